#!/usr/bin/env bash
# tools/scripts/stress-cephfs.sh — the multi-host stress against a real CephFS: starts a throw-away
# single-node cluster (tools/scripts/cephfs-dev.sh), mounts it once per simulated host, runs
#   stagecache stress NAME --hosts N --l3 <mount 0>/l3 --l3 <mount 1>/l3 ... [STRESS OPTIONS]
# and stops the cluster again (also when interrupted). Exit status: the stress's.
#
#   tools/scripts/stress-cephfs.sh [--hosts N] [--stagecache PATH] [STRESS OPTIONS...]
#   e.g. tools/scripts/stress-cephfs.sh --seconds 60 --kill-every 200
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin="$here/../../build/stagecache"
hosts=2
args=()
while [ $# -gt 0 ]; do
	case $1 in
	--hosts) hosts=${2:?--hosts needs N}; shift ;;
	--stagecache) bin=${2:?--stagecache needs a path}; shift ;;
	-h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) args+=("$1") ;;
	esac
	shift
done
case $hosts in '' | *[!0-9]*) echo "stress-cephfs.sh: bad --hosts '$hosts'" >&2; exit 2 ;; esac
[ -x "$bin" ] || { echo "stress-cephfs.sh: $bin not found (make)" >&2; exit 1; }
dir=$("$here/cephfs-dev.sh" start --owner $$) || exit 1
trap '"$here/cephfs-dev.sh" stop "$dir" >/dev/null' EXIT
trap 'exit 130' INT TERM
l3=()
for i in $(seq 0 $((hosts - 1))); do
	m=$("$here/cephfs-dev.sh" mount "$dir" "host$i") || exit 1
	l3+=(--l3 "$m/l3")
done
"$bin" stress "stress-cephfs-$$" --hosts "$hosts" "${l3[@]}" "${args[@]}"
