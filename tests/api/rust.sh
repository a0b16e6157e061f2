#!/bin/sh
# make check: the Rust crate's tests (bindings/rust: unit, integration, the seed's ported tests,
# the example of docs/LIBRARY.md, doc tests) with Debian's cargo and rustc, offline, against the library of
# the build directory. Prints a Check-style summary line for tests/run.sh.
cd "$(dirname "$0")/../.." || exit 1
. tests/api/summary.sh
b=${SC_BUILD:-build} cargo=${CARGO:-/usr/bin/cargo}
if [ -n "$SC_SANITIZER" ]; then
	echo "SKIP: the Rust tests link the library without sanitizers"
	summary 0 0
	exit 0
fi
# Debian's toolchain, not a newer one first on PATH
export RUSTC=${RUSTC:-/usr/bin/rustc} RUSTDOC=${RUSTDOC:-/usr/bin/rustdoc}
export CARGO_TARGET_DIR=$PWD/$b/rust STAGECACHE_LIB_DIR=$PWD/$b
export LD_LIBRARY_PATH=$PWD/$b${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "$($RUSTC --version), $($cargo --version)"
log=$(mktemp)
(cd bindings/rust && "$cargo" test --offline) >"$log" 2>&1
rc=$?
grep -vE '^\s+Compiling ' "$log"
passed=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
failed=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$log" | awk '{s+=$1} END {print s+0}')
rm -f "$log"
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1 # a build failure
summary $((passed + failed)) "$failed"
[ "$rc" -eq 0 ] && [ "$passed" -gt 0 ]
