#!/bin/sh
# make check: the docs. The man pages build (docs/man.sh: help2man, Doxygen) and name every
# subcommand and every function of the header; docs/CLI.md is what docs/cli.sh makes of --help;
# every relative link of the Markdown files leads to a file (and a heading) that exists; the
# tutorial's C, Python and Rust workers compile, run, and print exactly the output
# docs/TUTORIAL.md shows. A Check-style summary line at the end.
cd "$(dirname "$0")/../.." || exit 1
. tests/api/summary.sh
b=${SC_BUILD:-build} py=${PYTHON3:-/usr/bin/python3} cargo=${CARGO:-/usr/bin/cargo}
if [ -n "$SC_SANITIZER" ]; then
	echo "SKIP: the docs test runs the examples against the library without sanitizers"
	summary 0 0
	exit 0
fi
total=0 failed=0
ok() { total=$((total + 1)); echo "ok   $1"; }
bad() { total=$((total + 1)); failed=$((failed + 1)); echo "FAIL $1"; }
t=$(mktemp -d /var/tmp/sc-docs-XXXXXX)
trap 'rm -rf "$t"' EXIT

# man pages, built into a scratch directory
if sh docs/man.sh "$t" "$b/stagecache" >"$t/man.log" 2>&1; then ok "docs/man.sh builds the man pages"; else cat "$t/man.log"; bad "docs/man.sh"; fi
for c in $("$b/stagecache" --help | sed -n 's/^  \([a-z0-9][a-z0-9]*\)  .*/\1/p'); do
	p=$t/man/man1/stagecache-$c.1
	w=
	if [ -s "$p" ] && LC_ALL=C MANWIDTH=200 man --warnings -l "$p" >"$t/page" 2>"$t/warn" && w=$(cat "$t/warn") &&
		[ -z "$w" ] && grep -q "stagecache $c" "$t/page"; then
		ok "stagecache-$c(1)"
	else
		bad "stagecache-$c(1): missing, or man warns: $w"
	fi
done
LC_ALL=C MANWIDTH=200 man -l "$t/man/stagecache.1" 2>/dev/null | grep -q "SEE ALSO" && ok "stagecache(1)" || bad "stagecache(1)"
# docs/CLI.md is committed: it must be what docs/cli.sh prints from this build's --help texts
if sh docs/cli.sh "$b/stagecache" >"$t/CLI.md" 2>"$t/cli.log" && diff -u docs/CLI.md "$t/CLI.md" >"$t/cli.diff"; then
	ok "docs/CLI.md is current (sh docs/cli.sh $b/stagecache)"
else
	cat "$t/cli.log" "$t/cli.diff"; bad "docs/CLI.md differs from the --help texts: run make docs"
fi
page=$(LC_ALL=C MANWIDTH=300 man -l "$t/man/man3/libstagecache.3" 2>/dev/null)
missing=""
for fn in $(sed -n 's/^[a-z].*[ *]\(sc_[a-z0-9_]*\)(.*/\1/p' lib/stagecache.h lib/stagecache_parts.h); do
	echo "$page" | grep -q "$fn (" || missing="$missing $fn"
	[ -e "$t/man/man3/$fn.3" ] || missing="$missing $fn.3"
done
[ -z "$missing" ] && ok "libstagecache(3) documents every function of the header" || bad "libstagecache(3) lacks:$missing"
[ -s "$t/man/man3type/sc_lease.3type" ] && LC_ALL=C man -l "$t/man/man3type/sc_lease.3type" 2>/dev/null | grep -q sec_len &&
	ok "sc_lease(3type) lists its fields" || bad "sc_lease(3type)"

# links between the Markdown files (README, docs/, tools/*/README.md, CHANGELOG)
if "$py" tests/api/links.py $(git ls-files '*.md' 2>/dev/null || ls README.md docs/*.md tools/*/README.md CHANGELOG.md) >"$t/links" 2>&1; then
	ok "every relative link of the Markdown files leads to a file and heading"
else
	cat "$t/links"; bad "broken links in the Markdown files"
fi

# the tutorial's three workers
"$py" tests/api/extract.py docs/TUTORIAL.md "<!-- output: tutorial -->" >"$t/expected"
"$py" tests/api/extract.py docs/TUTORIAL.md "<!-- example: tutorial-c -->" >"$t/worker.c"
"$py" tests/api/extract.py docs/TUTORIAL.md "<!-- example: tutorial-python -->" >"$t/worker.py"
"$py" tests/api/extract.py docs/TUTORIAL.md "<!-- example: tutorial-rust -->" >"$t/worker.rs"
compare() { # compare NAME OUTPUT
	if diff -u "$t/expected" "$2" >"$t/diff"; then ok "$1 prints what the tutorial shows"; else cat "$t/diff"; bad "$1"; fi
}
if cc -std=c11 -Wall -Wextra -Werror -Ilib "$t/worker.c" -o "$t/worker-c" -L"$b" -l:libstagecache.so.0 \
	-Wl,-rpath,"$PWD/$b" 2>"$t/cc.log"; then
	ok "the C worker compiles with -Wall -Wextra -Werror"
	"$t/worker-c" >"$t/out-c" 2>&1 && compare "the C worker" "$t/out-c" || { cat "$t/out-c"; bad "the C worker runs"; }
else
	cat "$t/cc.log"; bad "the C worker compiles"
fi
if PYTHONPATH=$PWD/python STAGECACHE_LIB=$PWD/$b/libstagecache.so.0 PYTHONDONTWRITEBYTECODE=1 "$py" "$t/worker.py" >"$t/out-py" 2>&1; then
	compare "the Python worker" "$t/out-py"
else
	cat "$t/out-py"; bad "the Python worker runs"
fi
export RUSTC=${RUSTC:-/usr/bin/rustc} CARGO_TARGET_DIR=$PWD/$b/rust STAGECACHE_LIB_DIR=$PWD/$b
if (cd bindings/rust && "$cargo" build --offline -q) >"$t/cargo.log" 2>&1; then
	rlib=$(ls -t "$b"/rust/debug/libstagecache.rlib "$b"/rust/debug/deps/libstagecache-*.rlib 2>/dev/null | head -1)
	if "$RUSTC" --edition 2021 -L "$b/rust/debug/deps" -L "native=$b" --extern "stagecache=$rlib" \
		-C "link-arg=-Wl,-rpath,$PWD/$b" "$t/worker.rs" -o "$t/worker-rs" 2>"$t/rustc.log"; then
		ok "the Rust worker compiles with Debian's rustc"
		"$t/worker-rs" >"$t/out-rs" 2>&1 && compare "the Rust worker" "$t/out-rs" || { cat "$t/out-rs"; bad "the Rust worker runs"; }
	else
		cat "$t/rustc.log"; bad "the Rust worker compiles"
	fi
else
	cat "$t/cargo.log"; bad "the crate builds"
fi
summary "$total" "$failed"
[ "$failed" -eq 0 ]
