#!/bin/sh
# examples/llama/fetch-engine.sh [DIR] — install the llama.cpp engine the llama example, its tests,
# `stagecache bench llama` and `make demo-llama` use, from the npm registry, at pinned versions:
#   @node-llama-cpp/linux-x64   prebuilt libllama and libggml* (CPU variants, picked at run time by
#                               ggml_backend_load_all_from_path)          -> DIR/lib/
#   node-llama-cpp              llama/gitRelease.bundle, a git bundle of the matching llama.cpp
#                               source: its headers and gguf-py (the GGUF writer) -> DIR/include/,
#                               DIR/gguf-py/
# Each tarball is fetched with `npm pack` and checked against the integrity pinned below before
# anything is unpacked. Node is not needed afterwards. Nothing else is downloaded.
# When npm or the registry is not reachable this says so and exits 0: the build then leaves the
# example out and the llama tests print "SKIP: <why>".
set -u
DIR=${1:-build/llama}
VERSION=3.22.1
BIN_PKG=@node-llama-cpp/linux-x64
BIN_TGZ=node-llama-cpp-linux-x64-$VERSION.tgz
BIN_SHA512=5uCCDNqWCNfaAm8aR/Uzxbo4HBpKgNF91kCHPepKhgMgV2OAmatoefbOlMihsqCiH2Od35E/eUHQCFbfRBJuOg==
BIN_SHA1=cf9934edd4cf034260358123d65f9f8c9fb6b5fd
SRC_PKG=node-llama-cpp
SRC_TGZ=node-llama-cpp-$VERSION.tgz
SRC_SHA512=bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==
SRC_SHA1=e908932762f21939024263d58f1d6dc3e88b23e6
STAMP="$DIR/ENGINE"
WANT="node-llama-cpp $VERSION sha512-$BIN_SHA512 sha512-$SRC_SHA512"

case "${1:-}" in -h|--help)
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
	echo "usage: $0 [DIR]   (default build/llama; DIR/ENGINE records what is installed)"
	exit 0;;
esac

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
	exit 0
fi
note() { echo "llama engine: $*"; }
skip() {
	note "$* — not installed; the llama example is not built and its tests print SKIP"
	rm -rf "$DIR/dl"
	exit 0
}
command -v npm >/dev/null 2>&1 || skip "npm is not installed"
command -v git >/dev/null 2>&1 || skip "git is not installed"
PY=/usr/bin/python3
[ -x $PY ] || skip "$PY is not installed"

rm -rf "$DIR/dl" && mkdir -p "$DIR/dl" || exit 1
note "fetching $BIN_PKG@$VERSION and $SRC_PKG@$VERSION with npm pack"
if ! (cd "$DIR/dl" && npm pack --silent --fetch-retries=1 --fetch-timeout=30000 \
		"$BIN_PKG@$VERSION" "$SRC_PKG@$VERSION" >/dev/null 2>npm.err); then
	sed 's/^/  npm: /' "$DIR/dl/npm.err" | tail -n 3
	skip "the npm registry did not answer (npm pack failed)"
fi

# sha512 (the registry's "integrity") and sha1 (its "shasum") of each tarball
check() { # FILE SHA512 SHA1
	got=$($PY - "$1" <<'PYEOF'
import base64, hashlib, sys
b = open(sys.argv[1], "rb").read()
print(base64.b64encode(hashlib.sha512(b).digest()).decode(), hashlib.sha1(b).hexdigest())
PYEOF
)
	if [ "$got" != "$2 $3" ]; then
		echo "llama engine: $1 does not match its pinned integrity: refusing it" >&2
		echo "  want sha512-$2 sha1 $3" >&2
		echo "  got  $got" >&2
		rm -rf "$DIR/dl"
		exit 1
	fi
}
check "$DIR/dl/$BIN_TGZ" "$BIN_SHA512" "$BIN_SHA1"
check "$DIR/dl/$SRC_TGZ" "$SRC_SHA512" "$SRC_SHA1"
note "integrity checked (sha512 and sha1 as pinned)"

rm -rf "$DIR/lib" "$DIR/include" "$DIR/gguf-py" "$DIR/src"
mkdir -p "$DIR/lib" "$DIR/include" "$DIR/dl/bin" || exit 1
tar -xzf "$DIR/dl/$BIN_TGZ" -C "$DIR/dl/bin" || exit 1
cp "$DIR"/dl/bin/package/bins/linux-x64/lib*.so "$DIR/lib/" || exit 1
cp "$DIR"/dl/bin/package/LICENSE "$DIR/lib/LICENSE.node-llama-cpp" 2>/dev/null
tar -xzf "$DIR/dl/$SRC_TGZ" -C "$DIR/dl" package/llama/gitRelease.bundle || exit 1
git clone -q "$DIR/dl/package/llama/gitRelease.bundle" "$DIR/dl/src" 2>/dev/null || exit 1
cp "$DIR"/dl/src/include/llama.h "$DIR"/dl/src/ggml/include/*.h "$DIR/include/" || exit 1
cp -r "$DIR/dl/src/gguf-py" "$DIR/gguf-py" || exit 1
cp "$DIR/dl/src/LICENSE" "$DIR/include/LICENSE.llama.cpp"
rm -rf "$DIR/dl"
echo "$WANT" > "$STAMP"
note "installed under $DIR (lib/: $(ls "$DIR/lib" | wc -l) libraries; include/; gguf-py/)"
