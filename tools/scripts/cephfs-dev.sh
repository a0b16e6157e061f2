#!/usr/bin/env bash
# tools/scripts/cephfs-dev.sh — a throw-away single-node Ceph cluster with CephFS, for development and for
# the tests of the shared L3 store (one ceph-fuse mount per simulated host).
#
#   cephfs-dev.sh start [DIR] [--mgr] [--owner PID] [--json]   bring a cluster up under DIR
#   cephfs-dev.sh mount DIR HOST                               mount it at DIR/mnt/HOST (client.HOST)
#   cephfs-dev.sh umount DIR HOST                              unmount it (and stop its ceph-fuse)
#   cephfs-dev.sh kill-host DIR HOST                           SIGKILL HOST's ceph-fuse (a dead host)
#   cephfs-dev.sh evict DIR HOST                               evict HOST's MDS session (releases its locks)
#   cephfs-dev.sh status DIR [--json]                          daemons, mounts, health
#   cephfs-dev.sh stop DIR                                     stop everything, remove DIR
#
# What start builds (all of it under DIR, nothing elsewhere; every listener on 127.0.0.1):
#   one mon, one osd (BlueStore on a sparse file DIR/osd/block), one mds, a mgr only with --mgr,
#   cephx, pools of size 1, the MDS settings that make two mounts of one file fast
#   (mds_early_reply = false, mds_tick_interval = 0.2). Each daemon and each ceph-fuse has its own
#   admin socket and pid file in DIR/run, and is stopped only through its pid file. DIR is created
#   (default: a fresh /var/tmp/stagecache-ceph.XXXXXX) and printed on stdout.
#
# --owner PID: a watchdog stops the cluster (and removes DIR) when process PID exits, so a test
# that dies cannot leave a cluster behind.
#
# Exit status: 0 ok, 1 failure, 2 usage. Needs root (ceph-fuse mounts, umount) and the Debian
# packages ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common (`make deps`).
set -u
PROG=cephfs-dev.sh
FS=stagecachefs

usage() {
	sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
}
die() { echo "$PROG: $*" >&2; exit 1; }
usage_error() { echo "$PROG: $*" >&2; echo "try '$PROG --help'" >&2; exit 2; }

# ---- pid files: the only way anything here is stopped ----

pid_of() { # pidfile -> pid (empty when missing, not a number, or not running)
	local p
	[ -r "$1" ] || return 0
	p=$(head -c 32 "$1" 2>/dev/null | tr -dc 0-9)
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
	return 0
}

stop_pidfile() { # pidfile [signal]: TERM (or the given signal), wait up to 10 s, then KILL
	local p i
	p=$(pid_of "$1")
	[ -n "$p" ] || { rm -f "$1"; return 0; }
	kill "-${2:-TERM}" "$p" 2>/dev/null
	for i in $(seq 100); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$p" 2>/dev/null; then
		kill -KILL "$p" 2>/dev/null
		for i in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	fi
	rm -f "$1"
}

is_mounted() { # path
	awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/mounts
}

# Unmount without looking at the path first (-c: a dead FUSE mount answers ENOTCONN to that), and
# lazily if something still has files open on it; a few tries, as a dying ceph-fuse lets go.
unmount() { # path
	local i
	for i in 1 2 3 4 5; do
		is_mounted "$1" || return 0
		umount -c "$1" 2>/dev/null || umount -c -l "$1" 2>/dev/null || umount -c -f -l "$1" 2>/dev/null
		is_mounted "$1" || return 0
		sleep 0.5
	done
	return 1
}

check_dir() {
	[ -n "${D:-}" ] || usage_error "missing DIR"
	[ -f "$D/ceph.conf" ] && [ -f "$D/.cephfs-dev" ] || die "$D is not a cluster made by $PROG"
	D=$(cd "$D" && pwd -P)
}

ceph_cmd() { timeout "${CEPH_TIMEOUT:-30}" ceph -c "$D/ceph.conf" "$@"; }

# ---- start ----

write_conf() {
	cat >"$D/ceph.conf" <<EOF
[global]
fsid = $FSID
mon_host = [v2:127.0.0.1:$PORT,v1:127.0.0.1:$((PORT + 1))]
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_ipv4 = true
ms_bind_ipv6 = false
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
run_dir = $D/run
crash_dir = $D/crash
log_file = $D/log/\$name.log
keyring = $D/keyring/\$name.keyring
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_max_pg_per_osd = 1000
err_to_stderr = false
log_to_stderr = false

[mon]
mon_data = $D/mon/\$cluster-\$id
mon_cluster_log_file = $D/log/cluster.log
[mon.a]
admin_socket = $D/run/mon.a.asok
pid_file = $D/run/mon.a.pid

[mgr]
mgr_data = $D/mgr/\$cluster-\$id
[mgr.x]
admin_socket = $D/run/mgr.x.asok
pid_file = $D/run/mgr.x.pid

[osd]
osd_data = $D/osd/\$cluster-\$id
osd_objectstore = bluestore
bluestore_block_path = $D/osd/block
bluestore_block_create = true
bluestore_block_size = 21474836480
bluestore_fsck_on_mkfs = false
bluestore_fsck_on_mount = false
osd_memory_target = 939524096
osd_op_num_shards = 1
osd_op_num_threads_per_shard = 2
[osd.0]
admin_socket = $D/run/osd.0.asok
pid_file = $D/run/osd.0.pid

[mds]
mds_data = $D/mds/\$cluster-\$id
mds_early_reply = false
mds_tick_interval = 0.2
[mds.a]
admin_socket = $D/run/mds.a.asok
pid_file = $D/run/mds.a.pid

[client]
admin_socket =
log_file = $D/log/\$name.log
EOF
}

free_port() { # two consecutive free TCP ports on 127.0.0.1, in 20000..29998
	local p used
	used=$(awk 'NR > 1 { split($2, a, ":"); print strtonum("0x" a[2]) }' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u)
	for _ in $(seq 200); do
		p=$((20000 + (RANDOM % 5000) * 2))
		if ! echo "$used" | grep -qx "$p" && ! echo "$used" | grep -qx "$((p + 1))"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

wait_for() { # seconds description command...
	local secs=$1 what=$2 i
	shift 2
	for i in $(seq $((secs * 5))); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	echo "$PROG: timed out after ${secs}s waiting for $what" >&2
	return 1
}

mds_active() { CEPH_TIMEOUT=5 ceph_cmd mds stat 2>/dev/null | grep -q 'up:active'; }

do_start() {
	local mgr=0 owner="" json=0
	D=""
	while [ $# -gt 0 ]; do
		case $1 in
		--mgr) mgr=1 ;;
		--owner) [ $# -ge 2 ] || usage_error "--owner needs a PID"; owner=$2; shift ;;
		--json) json=1 ;;
		-h | --help) usage; exit 0 ;;
		-*) usage_error "unknown option '$1'" ;;
		*) [ -z "$D" ] || usage_error "too many arguments"; D=$1 ;;
		esac
		shift
	done
	[ "$(id -u)" = 0 ] || die "needs root (ceph-fuse mounts and umount)"
	for t in ceph ceph-mon ceph-osd ceph-mds ceph-fuse ceph-authtool monmaptool; do
		command -v "$t" >/dev/null || die "$t not found: run 'make deps' (Debian: ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common)"
	done
	if [ "$mgr" = 1 ]; then command -v ceph-mgr >/dev/null || die "ceph-mgr not found: run 'make deps'"; fi
	if [ -n "$owner" ]; then
		case $owner in *[!0-9]* | "") usage_error "bad --owner '$owner'" ;; esac
		kill -0 "$owner" 2>/dev/null || die "--owner $owner is not running"
	fi
	if [ -z "$D" ]; then
		D=$(mktemp -d /var/tmp/stagecache-ceph.XXXXXX) || die "mktemp failed"
	else
		if [ -e "$D" ] && [ -n "$(ls -A "$D" 2>/dev/null)" ]; then die "$D exists and is not empty"; fi
		mkdir -p "$D" || die "cannot create $D"
	fi
	D=$(cd "$D" && pwd -P)
	touch "$D/.cephfs-dev"
	# from here on a failure stops whatever was started and removes DIR
	trap 'echo "$PROG: start failed; cleaning up (logs were in $D/log)" >&2; tail -n 20 "$D"/log/*.log >&2 2>/dev/null; do_stop_dir; exit 1' ERR
	set -E
	mkdir -p "$D"/{run,log,crash,keyring,mon,mgr,osd,mds,mnt}
	FSID=$(uuidgen)
	PORT=$(free_port) || false
	write_conf
	local t0=$SECONDS
	ceph-authtool --create-keyring "$D/keyring/mon.a.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	ceph-authtool --create-keyring "$D/keyring/client.admin.keyring" --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
	ceph-authtool "$D/keyring/mon.a.keyring" --import-keyring "$D/keyring/client.admin.keyring" >/dev/null
	monmaptool --create --addv a "[v2:127.0.0.1:$PORT,v1:127.0.0.1:$((PORT + 1))]" --fsid "$FSID" "$D/monmap" >/dev/null
	ceph-mon -c "$D/ceph.conf" -i a --mkfs --monmap "$D/monmap" --keyring "$D/keyring/mon.a.keyring" >/dev/null 2>&1
	ceph-mon -c "$D/ceph.conf" -i a
	wait_for 30 "the monitor" timeout 5 ceph -c "$D/ceph.conf" --connect-timeout 5 -s
	ceph_cmd config set mon auth_allow_insecure_global_id_reclaim false >/dev/null 2>&1 || true
	if [ "$mgr" = 1 ]; then
		mkdir -p "$D/mgr/ceph-x"
		ceph_cmd auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
			-o "$D/keyring/mgr.x.keyring" >/dev/null
		ceph-mgr -c "$D/ceph.conf" -i x
	fi
	local uuid id
	uuid=$(uuidgen)
	id=$(ceph_cmd osd new "$uuid")
	[ "$id" = 0 ] || { echo "$PROG: unexpected osd id '$id'" >&2; false; }
	mkdir -p "$D/osd/ceph-0"
	ceph_cmd auth get-or-create osd.0 mon 'allow profile osd' mgr 'allow profile osd' osd 'allow *' \
		-o "$D/keyring/osd.0.keyring" >/dev/null
	ceph-osd -c "$D/ceph.conf" -i 0 --mkfs --osd-uuid "$uuid" >/dev/null 2>&1
	ceph-osd -c "$D/ceph.conf" -i 0 >/dev/null 2>&1
	wait_for 60 "the OSD to come up" sh -c "ceph -c '$D/ceph.conf' osd dump 2>/dev/null | grep -q '^osd.0 up'"
	ceph_cmd osd pool create "${FS}_metadata" 8 >/dev/null 2>&1
	ceph_cmd osd pool create "${FS}_data" 8 >/dev/null 2>&1
	ceph_cmd fs new "$FS" "${FS}_metadata" "${FS}_data" >/dev/null 2>&1
	mkdir -p "$D/mds/ceph-a"
	ceph_cmd auth get-or-create mds.a mon 'allow profile mds' osd 'allow rwx' mds 'allow' mgr 'allow profile mds' \
		-o "$D/keyring/mds.a.keyring" >/dev/null
	ceph-mds -c "$D/ceph.conf" -i a >/dev/null 2>&1
	wait_for 60 "the MDS to become active" mds_active
	# a dead host's session (and its locks) is dropped after 30 s, not 300 s
	ceph_cmd fs set "$FS" session_timeout 30 >/dev/null 2>&1
	ceph_cmd fs set "$FS" session_autoclose 30 >/dev/null 2>&1
	trap - ERR
	set +E
	if [ -n "$owner" ]; then
		local ostart
		ostart=$(awk '{ print $22 }' "/proc/$owner/stat" 2>/dev/null)
		# the watchdog: when the owner is gone (or its pid names another process), stop everything
		setsid bash -c '
			owner=$1 ostart=$2 dir=$3 self=$4
			while [ -d "$dir" ] && [ "$(awk "{ print \$22 }" /proc/$owner/stat 2>/dev/null)" = "$ostart" ]; do sleep 1; done
			[ -d "$dir" ] && "$self" stop "$dir" >/dev/null 2>&1
		' watchdog "$owner" "$ostart" "$D" "$(readlink -f "$0")" </dev/null >/dev/null 2>&1 &
		echo $! >"$D/run/watchdog.pid"
	fi
	if [ "$json" = 1 ]; then
		printf '{"dir":"%s","conf":"%s","fs":"%s","mon":"127.0.0.1:%s","seconds":%d}\n' "$D" "$D/ceph.conf" "$FS" "$PORT" $((SECONDS - t0))
	else
		echo "$D"
	fi
}

# ---- mounts (one per simulated host) ----

check_host() {
	[ -n "${1:-}" ] || usage_error "missing HOST"
	case $1 in *[!A-Za-z0-9_-]*) usage_error "bad HOST '$1' (letters, digits, _ and - only)" ;; esac
}

do_mount() {
	check_host "${1:-}"
	local h=$1 m="$D/mnt/$1"
	is_mounted "$m" && die "$m is already mounted"
	[ -n "$(pid_of "$D/run/fuse.$h.pid")" ] && die "a ceph-fuse for $h is still running"
	mkdir -p "$m"
	if [ ! -s "$D/keyring/client.$h.keyring" ]; then
		ceph_cmd fs authorize "$FS" "client.$h" / rw -o "$D/keyring/client.$h.keyring" >/dev/null 2>&1 ||
			ceph_cmd fs authorize "$FS" "client.$h" / rw >"$D/keyring/client.$h.keyring" 2>/dev/null ||
			die "cannot create the key of client.$h"
	fi
	rm -f "$D/run/fuse.$h.pid" "$D/run/fuse.$h.asok"
	timeout 60 ceph-fuse -c "$D/ceph.conf" --id "$h" --client_fs "$FS" "$m" \
		--admin_socket "$D/run/fuse.$h.asok" --pid_file "$D/run/fuse.$h.pid" \
		--log_file "$D/log/fuse.$h.log" >>"$D/log/fuse.$h.out" 2>&1 ||
		die "ceph-fuse for $h failed (see $D/log/fuse.$h.log)"
	is_mounted "$m" || die "ceph-fuse for $h did not mount $m"
	# the session id, for evicting this host later even when its ceph-fuse is gone
	local i
	for i in $(seq 50); do
		timeout 5 ceph --admin-daemon "$D/run/fuse.$h.asok" status 2>/dev/null |
			sed -n 's/^ *"id": \([0-9]*\),*$/\1/p' | head -n 1 >"$D/run/fuse.$h.id"
		[ -s "$D/run/fuse.$h.id" ] && break
		sleep 0.1
	done
	echo "$m"
}

do_umount() {
	check_host "${1:-}"
	local h=$1 m="$D/mnt/$1"
	unmount "$m" || die "cannot unmount $m"
	stop_pidfile "$D/run/fuse.$h.pid"
	rm -f "$D/run/fuse.$h.asok"
	rmdir "$m" 2>/dev/null
	return 0
}

do_kill_host() {
	check_host "${1:-}"
	local p
	p=$(pid_of "$D/run/fuse.$1.pid")
	[ -n "$p" ] || die "no ceph-fuse running for $1"
	kill -KILL "$p"
	for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	echo "killed ceph-fuse of $1 (pid $p); $D/mnt/$1 now answers ENOTCONN"
}

do_evict() {
	check_host "${1:-}"
	local id
	id=$(cat "$D/run/fuse.$1.id" 2>/dev/null)
	if [ -n "$id" ]; then
		ceph_cmd tell mds.a client evict "id=$id" >/dev/null 2>&1 || die "evicting session $id of $1 failed"
	else
		ceph_cmd tell mds.a client evict "auth_name=client.$1" >/dev/null 2>&1 || die "evicting client.$1 failed"
	fi
	echo "evicted the MDS session of $1${id:+ (id $id)}"
}

# ---- status, stop ----

do_status() {
	local json=0 name p first=1
	[ "${1:-}" = --json ] && json=1
	[ "$json" = 1 ] && printf '{"dir":"%s","daemons":{' "$D" || echo "cluster in $D"
	for f in "$D"/run/*.pid; do
		[ -e "$f" ] || continue
		name=$(basename "$f" .pid)
		p=$(pid_of "$f")
		if [ "$json" = 1 ]; then
			[ $first = 1 ] || printf ','
			first=0
			printf '"%s":%s' "$name" "${p:-null}"
		else
			if [ -n "$p" ]; then printf '  %-16s running (pid %s)\n' "$name" "$p"; else printf '  %-16s not running\n' "$name"; fi
		fi
	done
	[ "$json" = 1 ] && printf '},"mounts":['
	first=1
	for m in "$D"/mnt/*; do
		[ -d "$m" ] || continue
		local state=unmounted
		is_mounted "$m" && state=mounted
		if [ $state = mounted ] && ! stat -t "$m" >/dev/null 2>&1; then state=dead; fi
		if [ "$json" = 1 ]; then
			[ $first = 1 ] || printf ','
			first=0
			printf '{"host":"%s","path":"%s","state":"%s"}' "$(basename "$m")" "$m" "$state"
		else
			printf '  mount %-10s %s (%s)\n' "$(basename "$m")" "$m" "$state"
		fi
	done
	local health
	health=$(CEPH_TIMEOUT=5 ceph_cmd health 2>/dev/null | head -n 1)
	if [ "$json" = 1 ]; then
		printf '],"health":"%s"}\n' "${health:-unreachable}"
	else
		echo "  health           ${health:-unreachable}"
	fi
}

# Stop everything of the cluster in $D (mounts first, then daemons, each by its pid file) and
# remove $D. Safe to run on a half-started cluster and more than once.
do_stop_dir() {
	local m f
	for m in "$D"/mnt/*; do
		[ -d "$m" ] || continue
		unmount "$m"
	done
	for f in "$D"/run/fuse.*.pid; do [ -e "$f" ] && stop_pidfile "$f"; done
	for f in mds.a mgr.x osd.0 mon.a; do stop_pidfile "$D/run/$f.pid"; done
	# anything still mounted under DIR (a mount made by hand) is left alone, and so is DIR
	if awk -v d="$D/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
		echo "$PROG: something is still mounted under $D; not removing it" >&2
		return 1
	fi
	local w
	w=$(pid_of "$D/run/watchdog.pid")
	rm -rf --one-file-system "$D"
	[ -n "$w" ] && [ "$w" != "$$" ] && [ "$w" != "$PPID" ] && kill "$w" 2>/dev/null
	return 0
}

do_stop() {
	do_stop_dir || exit 1
}

# ---- main ----

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1
shift
case $cmd in
-h | --help | help) usage; exit 0 ;;
start) do_start "$@" ;;
mount | umount | kill-host | evict | status | stop)
	for a in "$@"; do case $a in -h | --help) usage; exit 0 ;; esac; done
	D=${1:-}
	check_dir
	shift
	case $cmd in
	mount) do_mount "$@" ;;
	umount) do_umount "$@" ;;
	kill-host) do_kill_host "$@" ;;
	evict) do_evict "$@" ;;
	status) do_status "$@" ;;
	stop) do_stop ;;
	esac
	;;
*) usage_error "unknown command '$cmd'" ;;
esac
