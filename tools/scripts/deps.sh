#!/bin/sh
# Install the Debian packages stagecache needs (build, tests, tracing, benchmarks, the C++/Python/Rust
# clients and their tests, the exporter and its Prometheus test, the man pages, the single-node
# Ceph cluster of the shared-L3 tests: tools/scripts/cephfs-dev.sh; git and npm for the llama.cpp example's
# engine; `stagecache events` and its subscriber test: ZeroMQ, msgpack and xxhash for Python) when missing.
# As root: one `apt-get update`, then `apt-get install -y` of what is missing.
# As non-root: print the exact command to run.
# `tools/scripts/deps.sh --cross` instead installs what `make cross` needs: Debian's aarch64 cross
# compiler and the arm64 -dev packages of the library's dependencies (multiarch: it adds the
# arm64 architecture to dpkg first).
if [ "${1:-}" = --cross ]; then
	PKGS="gcc-aarch64-linux-gnu liburing-dev:arm64 libxxhash-dev:arm64 systemtap-sdt-dev:arm64"
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		if [ "$(id -u)" != 0 ]; then
			echo "run as root: dpkg --add-architecture arm64 && apt-get update && apt-get install -y $PKGS"
			exit 1
		fi
		dpkg --add-architecture arm64 || exit 1
	fi
else
PKGS="build-essential liburing-dev libbpf-dev bpftool clang llvm libxxhash-dev check systemtap-sdt-dev \
pkg-config libelf-dev zlib1g-dev binutils libdpdk-dev fio memcached redis-server \
valgrind libclang-rt-14-dev liblmdb-dev lmdb-utils gnuplot-nox \
g++ python3 python3-numpy cargo rustc libmicrohttpd-dev prometheus help2man doxygen \
ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common uuid-runtime git \
libzmq3-dev libzmq5 python3-zmq python3-msgpack python3-xxhash"
# the llama.cpp example's engine comes from the npm registry (examples/llama/fetch-engine.sh)
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
fi
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "missing Debian packages:$missing"
	echo "run as root: apt-get update && apt-get install -y$missing"
	exit 1
fi
echo "installing missing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q || exit 1
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing || exit 1
