#!/bin/sh
# make check: the Python package's tests (python/tests) with Debian's python3 and python3-numpy,
# against the library of the build directory. Prints a Check-style summary line for tests/run.sh.
cd "$(dirname "$0")/../.." || exit 1
. tests/api/summary.sh
b=${SC_BUILD:-build} py=${PYTHON3:-/usr/bin/python3}
if [ -n "$SC_SANITIZER" ]; then
	echo "SKIP: the Python tests load the library into python3, which a sanitizer build cannot be"
	summary 0 0
	exit 0
fi
"$py" -c 'import numpy' 2>/dev/null || { echo "numpy missing for $py: run make deps (python3-numpy)"; exit 1; }
log=$(mktemp)
STAGECACHE_LIB=$PWD/$b/libstagecache.so.0 PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1 \
	"$py" -m unittest discover -v -s python/tests >"$log" 2>&1
rc=$?
cat "$log"
sed -n "s/^\(test[^ ]*\) .*\.\.\. skipped '\(.*\)'$/SKIP: \1: \2/p" "$log"
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' "$log")
bad=$(grep -cE '\.\.\. (FAIL|ERROR)$' "$log")
rm -f "$log"
summary "${ran:-0}" "$bad"
[ "$rc" -eq 0 ] && [ -n "$ran" ]
