/*
 * tests/check_cephfs.c — two hosts sharing one L3 directory on a real CephFS.
 *
 * The suite starts a single-node Ceph cluster with tools/scripts/cephfs-dev.sh (one mon, one osd, one
 * mds, no mgr: the mounts then report 0 blocks, the case a new user meets), mounts it twice with
 * ceph-fuse ("hostA", "hostB": two clients, two sessions, two page caches), and runs every test
 * with one process group per host: each has its own mount, its own arena, its own processes.
 * The last test stops the cluster and checks that no process, mount or file is left.
 * (A watchdog started with the cluster stops it if this program dies first.)
 *
 * Tests: a put on A restored on B byte for byte (through B's arena and L2); concurrent puts of
 * the same prefixes from both; budget eviction by the janitor while the other host fills (what
 * it uses survives: LRU across hosts); the janitor's host killed (its ceph-fuse SIGKILLed): no
 * takeover while its session holds the lock, takeover once the MDS evicts it, and the dead
 * janitor never acted again; a host's mount dying mid-fill: errors there, never wrong bytes, and
 * the other host goes on; segmented objects put by both hosts at once (each segment stored once,
 * read across hosts, swept by the janitor); host A's location index following host B's puts (at once on a miss,
 * a longer prefix within the refresh interval, measured), evictions and quarantines (a miss).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "l3_hosts.h"
#include "sc_check.h"

#ifndef SC_CEPHFS_DEV
#define SC_CEPHFS_DEV "tools/scripts/cephfs-dev.sh"
#endif

enum { A = 0, B = 1 };
static const char *const host_name[2] = { "hostA", "hostB" };
static char cluster[256];          /* the cluster's directory (empty: none) */
static char mnt[2][320];           /* where each host mounts it */
static char state[2][320];         /* each host's counters (under the cluster directory) */
static char why_not[256];          /* set when the cluster cannot be run here: SKIP */
static char failed[512];           /* set when it should have started and did not: FAIL */

/* ---- the cluster (in the runner process: unchecked fixture) ---- */

static pid_t starter; /* the runner process: only it stops the cluster at exit (not a forked test) */

static void cluster_stop(void)
{
	if (!cluster[0] || getpid() != starter)
		return;
	h_sh("%s stop %s >/dev/null 2>&1", SC_CEPHFS_DEV, cluster);
	cluster[0] = 0;
}

static void cluster_start(void)
{
	if (geteuid() != 0) {
		snprintf(why_not, sizeof(why_not), "not root: ceph-fuse mounts need root");
		return;
	}
	if (h_sh("command -v ceph-mon ceph-osd ceph-mds ceph-fuse >/dev/null") != 0) {
		snprintf(why_not, sizeof(why_not), "Ceph is not installed (make deps installs it)");
		return;
	}
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s start --owner %d 2>&1", SC_CEPHFS_DEV, (int)getpid());
	FILE *p = popen(cmd, "r");
	char line[512], last[512] = "";
	while (p && fgets(line, sizeof(line), p))
		snprintf(last, sizeof(last), "%s", line);
	int st = p ? pclose(p) : -1;
	last[strcspn(last, "\n")] = 0;
	if (st != 0 || last[0] != '/') {
		snprintf(failed, sizeof(failed), "cephfs-dev.sh start failed: %s", last);
		return;
	}
	snprintf(cluster, sizeof(cluster), "%s", last);
	starter = getpid();
	atexit(cluster_stop);
	for (int h = A; h <= B; h++) {
		snprintf(mnt[h], sizeof(mnt[h]), "%s/mnt/%s", cluster, host_name[h]);
		snprintf(state[h], sizeof(state[h]), "%s/state-%s", cluster, host_name[h]);
		mkdir(state[h], 0700);
		if (h_sh("%s mount %s %s >/dev/null", SC_CEPHFS_DEV, cluster, host_name[h])) {
			snprintf(failed, sizeof(failed), "mounting %s failed", host_name[h]);
			return;
		}
	}
}

/* Every test starts here: SKIP (with the reason) or fail when there is no cluster. */
static int need_cluster(void)
{
	if (why_not[0]) {
		sc_skip("%s", why_not);
		return 0;
	}
	ck_assert_msg(!failed[0] && cluster[0], "no cluster: %s", failed);
	return 1;
}

/* The test's L3 directory as seen from host @h. */
static const char *l3dir(int h, const char *name)
{
	static char buf[2][700];
	snprintf(buf[h], sizeof(buf[h]), "%s/%s", mnt[h], name);
	return buf[h];
}

static struct sc_l3 *open_as(int h, const char *name, uint64_t budget)
{
	struct sc_l3 *l3 = NULL;
	int rc = h_open(l3dir(h, name), host_name[h], budget, state[h], &l3);
	ck_assert_msg(rc == 0, "open %s as %s: %s", l3dir(h, name), host_name[h], sc_strerror(rc));
	return l3;
}

static void remount(int h)
{
	ck_assert_int_eq(h_sh("%s umount %s %s >/dev/null && %s mount %s %s >/dev/null", SC_CEPHFS_DEV, cluster,
			      host_name[h], SC_CEPHFS_DEV, cluster, host_name[h]), 0);
}

static void pipe2x(int p[2])
{
	ck_assert_int_eq(pipe(p), 0);
}

static void say(int fd, const void *m, size_t n)
{
	ck_assert_int_eq(write(fd, m, n), (ssize_t)n);
}

static int hear(int fd, void *m, size_t n)
{
	return read(fd, m, n) == (ssize_t)n ? 0 : -1;
}

/* A counter a forked host process bumps and the test reads (a MAP_SHARED page). */
static _Atomic int *shared_counter(void)
{
	_Atomic int *c = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(c, MAP_FAILED);
	atomic_store(c, 0);
	return c;
}

/* Wait, at most @secs, until *@c reaches @want; fail saying @what otherwise. */
static void wait_counter(_Atomic int *c, int want, int secs, const char *what)
{
	double end = sc_test_now_s() + secs;
	while (atomic_load(c) < want) {
		ck_assert_msg(sc_test_now_s() < end, "waited %d s for %s (%d of %d)", secs, what, atomic_load(c), want);
		sc_test_pause_ms(10);
	}
}

/* Fork a process of host @h: it opens the test directory @name on its mount and waits for a byte
 * on @go_fd (exit 2 when it cannot). 0 in the child (*@l3 open), the pid in the parent. */
static pid_t fork_host_waiting(int h, const char *name, int go_fd, struct sc_l3 **l3)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char c;
		if (h_open(l3dir(h, name), host_name[h], 0, state[h], l3) || hear(go_fd, &c, 1))
			_exit(2);
	}
	return pid;
}

/* ---- tests ---- */

START_TEST(put_on_a_restored_on_b_byte_for_byte)
{
	if (!need_cluster())
		return;
	enum { TOK = 4096, BYTES = 3u << 20 };
	/* the case of the new user: without a mgr the filesystem reports no size at all */
	struct statvfs vfs;
	ck_assert_int_eq(statvfs(mnt[A], &vfs), 0);
	ck_assert_msg(vfs.f_blocks == 0, "this test expects a mount that reports 0 blocks (no mgr)");
	pid_t pa = fork();
	ck_assert_int_ge(pa, 0);
	if (pa == 0) {
		struct sc_l3 *l3 = NULL;
		if (h_open(l3dir(A, "t1"), host_name[A], 0, state[A], &l3))
			_exit(2);
		int rc = h_put(l3, 1, TOK, BYTES);
		sc_l3_close(l3);
		_exit(rc ? 3 : 0);
	}
	ck_assert_int_eq(h_wait(pa, 60), 0);
	pid_t pb = fork();
	ck_assert_int_ge(pb, 0);
	if (pb == 0) {
		/* host B: its own arena; the restore fills from L3 (promoted: a long prefix), then L2 */
		struct sc_arena_opts ao = { .size_bytes = 64u << 20, .huge = SC_HUGE_OFF };
		const char *an = sc_test_name("cephB");
		struct sc_arena *a = NULL;
		struct sc_stage *st = NULL;
		struct sc_l3 *l3 = NULL;
		if (sc_arena_create(an, &ao, &a) || sc_stage_open(a, "m", "s", &st) ||
		    h_open(l3dir(B, "t1"), host_name[B], 0, state[B], &l3) || sc_l3_bind_arena(l3, a))
			_exit(2);
		int32_t *t = malloc((TOK + 10) * sizeof(*t));
		uint8_t *want = malloc(BYTES);
		h_tokens(1, t, TOK);
		for (int i = 0; i < 10; i++)
			t[TOK + i] = 7 + i; /* the prompt goes on past the stored prefix */
		h_bytes(1, want, BYTES);
		int bad = 0;
		/* A's put shows here within the mounts' visibility delay (tens of ms), not always at once */
		struct sc_location loc;
		for (int i = 0; i < 100 && sc_l3_locate_longest(l3, "h", t, TOK + 10, &loc) != TOK; i++)
			usleep(10000);
		for (int round = 0; round < 2; round++) {
			struct sc_restore r;
			int rc = sc_restore(st, l3, "h", t, TOK + 10, 0, &r);
			if (rc != TOK)
				bad |= 4;
			else if (r.sec_len[0] != BYTES || memcmp(r.sec[0], want, BYTES))
				bad |= 8; /* wrong bytes */
			else if (r.source != (round == 0 ? SC_RESTORE_FROM_L3 : SC_RESTORE_FROM_L2))
				bad |= 16;
			sc_restore_release(&r);
		}
		struct sc_l3_stats s;
		struct sc_l3_janitor_status js;
		if (sc_l3_stats(l3, &s) || sc_l3_janitor_status(l3, &js) || !js.shared || s.fills != 1)
			bad |= 32;
		/* fills again: the object file stays open from the first (kept files), the bytes are right */
		uint8_t *dst = aligned_alloc(4096, BYTES);
		for (int i = 0; i < 2 && dst; i++)
			if (sc_l3_fill(l3, &loc, dst, BYTES, 0) || memcmp(dst, want, BYTES))
				bad |= 64;
		if (!dst || sc_l3_stats(l3, &s) || s.fills != 3 || s.fills_kept < 2)
			bad |= 128;
		free(dst);
		sc_l3_close(l3);
		sc_stage_close(st);
		sc_arena_close(a);
		sc_arena_destroy(NULL, an);
		_exit(bad);
	}
	ck_assert_int_eq(h_wait(pb, 60), 0);
}
END_TEST

START_TEST(concurrent_puts_of_the_same_prefixes_from_both_hosts)
{
	if (!need_cluster())
		return;
	enum { K = 8, BYTES = 300000 };
	int go[2];
	pipe2x(go);
	pid_t pid[2];
	for (int h = A; h <= B; h++) {
		struct sc_l3 *l3 = NULL;
		if ((pid[h] = fork_host_waiting(h, "t2", go[0], &l3)) == 0) {
			int bad = 0;
			for (uint32_t i = 0; i < K; i++) {
				/* both put the shared set at the same time, and each a set of its own */
				bad |= h_put(l3, 100 + i, 64, BYTES) != 0;
				bad |= h_put(l3, 200 + (uint32_t)h * 10 + i, 64, BYTES / 3) != 0;
			}
			sc_l3_close(l3);
			_exit(bad);
		}
	}
	say(go[1], "gg", 2);
	ck_assert_int_eq(h_wait(pid[A], 120), 0);
	ck_assert_int_eq(h_wait(pid[B], 120), 0);
	/* one object per digest, nothing half-written, every byte right, from either mount */
	char objs[720];
	snprintf(objs, sizeof(objs), "%s/objects", l3dir(A, "t2"));
	ck_assert_int_eq(h_count(objs, ".tmp-"), 0);
	ck_assert_int_eq(h_sh("test $(find %s -name '*.sc3' | wc -l) = %d", objs, 3 * K), 0);
	for (int h = A; h <= B; h++) {
		struct sc_l3 *l3 = open_as(h, "t2", 0);
		for (uint32_t i = 0; i < K; i++) {
			ck_assert_int_eq(h_fetch_wait(l3, 100 + i, 64, BYTES, 1000), 0);
			ck_assert_int_eq(h_fetch_wait(l3, 200 + (uint32_t)(1 - h) * 10 + i, 64, BYTES / 3, 1000), 0);
		}
		if (h == B)
			ck_assert_int_eq(sc_l3_verify(l3, NULL, NULL), 0);
		sc_l3_close(l3);
	}
}
END_TEST

/* Segments (docs/DESIGN.md "Segments in L3") on CephFS: both hosts put payloads sharing their
 * leading segments at once; each distinct segment is stored once (ceph-fuse has no
 * RENAME_NOREPLACE: link is the no-replace), each host reads the other's objects byte for byte,
 * and the janitor sweeps what no object names any more, keeping the rest. */
#define SEGB (64u << 10)
static uint8_t *seg_payload(uint32_t doc, size_t *n)
{
	*n = 8 * SEGB;
	uint8_t *b = malloc(*n);
	for (uint32_t i = 0; i < 8; i++)
		h_bytes(i < 5 ? 9000 + i : doc * 16 + i, b + i * SEGB, SEGB); /* 5 shared, 3 of its own */
	return b;
}

static int seg_put_or_fetch(struct sc_l3 *l3, uint32_t doc, int put)
{
	size_t n;
	int32_t t[64];
	uint8_t *b = seg_payload(doc, &n);
	h_tokens(doc, t, 64);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	struct sc_l3_put_args a = { .ns = "h", .tokens = t, .token_count = 64, .payload = &p };
	struct sc_location loc;
	int rc = put ? sc_l3_put(l3, &a, NULL) : -ENOENT;
	for (int i = 0; !put && i < 100 && rc == -ENOENT; i++) {
		if (sc_l3_locate_longest(l3, "h", t, 64, &loc) != 64) {
			usleep(10000);
			continue;
		}
		uint8_t *got = aligned_alloc(4096, n);
		rc = sc_l3_fill(l3, &loc, got, n, 0);
		if (!rc && memcmp(got, b, n))
			rc = 1; /* wrong bytes */
		free(got);
	}
	free(b);
	return rc;
}

START_TEST(segments_shared_by_both_hosts)
{
	if (!need_cluster())
		return;
	struct sc_l3 *l3 = open_as(A, "t7", 0);
	ck_assert_int_eq(sc_l3_set_segment_bytes(l3, SEGB), 0);
	sc_l3_close(l3);
	int go[2];
	pipe2x(go);
	pid_t pid[2];
	for (int h = A; h <= B; h++) {
		struct sc_l3 *c = NULL;
		if ((pid[h] = fork_host_waiting(h, "t7", go[0], &c)) == 0) {
			int bad = 0;
			for (uint32_t i = 0; i < 3; i++) /* both put docs 1-3 at once, each its own 2 */
				bad |= seg_put_or_fetch(c, 1 + i, 1) || seg_put_or_fetch(c, 10 + (uint32_t)h * 10 + i, 1);
			sc_l3_close(c);
			_exit(bad);
		}
	}
	say(go[1], "gg", 2);
	ck_assert_int_eq(h_wait(pid[A], 120), 0);
	ck_assert_int_eq(h_wait(pid[B], 120), 0);
	/* 5 shared + 3 own segments for each of the 3 + 3 + 3 distinct payloads */
	char segs[720];
	snprintf(segs, sizeof(segs), "%s/seg", l3dir(A, "t7"));
	ck_assert_int_eq(h_sh("test $(find %s -name '*.seg' | wc -l) = %d", segs, 5 + 9 * 3), 0);
	ck_assert_int_eq(h_count(segs, ".tmp-"), 0);
	for (int h = A; h <= B; h++) {
		l3 = open_as(h, "t7", 0);
		for (uint32_t i = 0; i < 3; i++) {
			ck_assert_int_eq(seg_put_or_fetch(l3, 1 + i, 0), 0);
			ck_assert_int_eq(seg_put_or_fetch(l3, 10 + (uint32_t)(1 - h) * 10 + i, 0), 0);
		}
		sc_l3_close(l3);
	}
	/* host A's own 3 objects go (by hand); their segments are old: B's janitor sweeps them */
	l3 = open_as(A, "t7", 0);
	for (uint32_t i = 0; i < 3; i++) {
		int32_t t[64];
		struct sc_location loc;
		h_tokens(10 + i, t, 64);
		ck_assert_int_eq(sc_l3_locate_longest(l3, "h", t, 64, &loc), 64);
		char hex[SC_DIGEST_HEX_LEN + 1];
		sc_digest_format(loc.digest, hex);
		ck_assert_int_eq(h_sh("rm %s/objects/%.2s/%s.sc3", l3dir(A, "t7"), hex, hex), 0);
	}
	sc_l3_close(l3);
	ck_assert_int_eq(h_sh("find %s -name '*.seg' -exec touch -d '-1 hour' {} +", segs), 0);
	l3 = open_as(B, "t7", 0);
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(l3, SC_L3_JANITOR_FULL, &r), 0);
	ck_assert_int_eq(h_sh("test $(find %s -name '*.seg' | wc -l) = %d", segs, 5 + 6 * 3), 0);
	for (uint32_t i = 0; i < 3; i++) {
		ck_assert_int_eq(seg_put_or_fetch(l3, 1 + i, 0), 0);
		ck_assert_int_eq(seg_put_or_fetch(l3, 20 + i, 0), 0);
	}
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.bytes, (uint64_t)(5 + 6 * 3) * SEGB + 6 * (4096 + 8 * 24));
	sc_l3_close(l3);
}
END_TEST

/* bytes of use records in @dir/access as this mount shows them (32 bytes each, lib/l3/hosts.c) */
static long long access_bytes(const char *dir)
{
	char p[800];
	snprintf(p, sizeof(p), "%s/access", dir);
	DIR *d = opendir(p);
	long long sum = 0;
	struct dirent *e;
	struct stat sb;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &sb, 0) == 0 && S_ISREG(sb.st_mode))
			sum += sb.st_size;
	if (d)
		closedir(d);
	return sum;
}

START_TEST(janitor_evicts_to_budget_while_the_other_host_fills)
{
	if (!need_cluster())
		return;
	enum { N = 24, HOT = 6, BYTES = 256u << 10 };
	const uint64_t budget = 3u << 20;
	struct sc_l3 *a = open_as(A, "t3", 0);
	for (uint32_t d = 0; d < N; d++)
		ck_assert_int_eq(h_put(a, 300 + d, 32, BYTES), 0);
	sc_l3_close(a);
	int stop[2], res[2];
	pipe2x(stop);
	pipe2x(res);
	_Atomic int *rounds = shared_counter(); /* B's passes over its hot set */
	pid_t pb = fork();
	ck_assert_int_ge(pb, 0);
	if (pb == 0) {
		/* host B fills its hot set over and over, checking every byte */
		close(stop[1]);
		fcntl(stop[0], F_SETFL, O_NONBLOCK);
		struct sc_l3 *l3 = NULL;
		if (h_open(l3dir(B, "t3"), host_name[B], 0, state[B], &l3))
			_exit(2);
		int counts[4] = { 0 }; /* ok, miss, error, wrong */
		char c;
		for (uint32_t d = 0; d < HOT; d++) /* A's puts are visible here (within 1 s) */
			if (h_fetch_wait(l3, 300 + d, 32, BYTES, 1000))
				_exit(4);
		while (read(stop[0], &c, 1) != 1) {
			for (uint32_t d = 0; d < HOT; d++) {
				int rc = h_fetch(l3, 300 + d, 32, BYTES);
				counts[rc == 0 ? 0 : rc == -ENOENT ? 1 : rc == 1 ? 3 : 2]++;
			}
			atomic_fetch_add(rounds, 1);
		}
		sc_l3_close(l3);
		if (write(res[1], counts, sizeof(counts)) != sizeof(counts))
			_exit(3);
		_exit(0);
	}
	close(res[1]); /* a child that dies without answering gives EOF, not a hang */
	/* waits (at most 60 s) for B's uses of its hot set to reach DIR/access, as A's mount shows
	 * them: B appends its uses once a second; A's janitor must see them to keep the hot set */
	long long acc = 0;
	for (int ms = 0; (acc = access_bytes(l3dir(A, "t3"))) < HOT * 32 && ms < 60000; ms += 20)
		sc_test_pause_ms(20);
	ck_assert_msg(acc >= HOT * 32, "B's uses never reached DIR/access on A's mount (%lld bytes)", acc);
	pid_t pj = fork();
	ck_assert_int_ge(pj, 0);
	if (pj == 0) {
		/* host A's janitor, with a budget that takes half the store */
		struct sc_l3 *l3 = NULL;
		struct sc_l3_janitor_report r;
		if (h_open(l3dir(A, "t3"), host_name[A], budget, state[A], &l3))
			_exit(2);
		int rc = sc_l3_janitor(l3, 0, &r);
		sc_l3_close(l3);
		_exit(rc ? 3 : r.evicted == 0 ? 4 : r.bytes > budget / 100 * 85 ? 5 : r.accesses == 0 ? 6 : 0);
	}
	ck_assert_int_eq(h_wait(pj, 120), 0);
	/* B goes on filling after the pass: until it has gone over its whole hot set once more,
	 * a pass that began after the janitor's ended (up to 60 s) */
	wait_counter(rounds, atomic_load(rounds) + 2, 60, "B's pass over its hot set after the janitor's");
	say(stop[1], "s", 1);
	ck_assert_int_eq(h_wait(pb, 60), 0);
	int counts[4];
	ck_assert_int_eq(hear(res[0], counts, sizeof(counts)), 0);
	ck_assert_msg(counts[3] == 0, "%d fills returned wrong bytes", counts[3]);
	ck_assert_msg(counts[1] == 0 && counts[2] == 0, "B's hot set: %d misses, %d errors (LRU across hosts?)", counts[1],
		      counts[2]);
	ck_assert_int_gt(counts[0], HOT);
	munmap((void *)rounds, 4096);
	/* the cold ones went, and what stayed fits the budget */
	struct sc_l3 *b = open_as(B, "t3", 0);
	int cold_left = 0;
	for (uint32_t d = HOT; d < N; d++)
		cold_left += h_fetch(b, 300 + d, 32, BYTES) == 0;
	ck_assert_int_lt(cold_left, N - HOT);
	ck_assert_int_eq(h_sh("test $(find %s/objects -name '*.sc3' -printf '%%s\\n' | awk '{ s += $1 } END { print s }') -le %llu",
			      l3dir(B, "t3"), (unsigned long long)budget),
			 0);
	ck_assert_int_eq(h_sh("grep -c ' hostA evict ' %s/janitor.log >/dev/null", l3dir(B, "t3")), 0);
	sc_l3_close(b);
}
END_TEST

START_TEST(janitor_host_killed_then_taken_over)
{
	if (!need_cluster())
		return;
	enum { N = 20, BYTES = 256u << 10 };
	struct sc_l3 *b = open_as(B, "t4", 0);
	for (uint32_t d = 0; d < N; d++)
		ck_assert_int_eq(h_put(b, 400 + d, 32, BYTES), 0);
	int up[2];
	pipe2x(up);
	pid_t pj = fork();
	ck_assert_int_ge(pj, 0);
	if (pj == 0) {
		/* host A's janitor: keeps the lease, a pass every 200 ms; and a write of A's in progress:
		 * a temp file it holds (an OFD lock, as a put holds its temp file) */
		struct sc_l3 *l3 = NULL;
		struct sc_l3_janitor_report r;
		if (h_open(l3dir(A, "t4"), host_name[A], 0, state[A], &l3) || sc_l3_janitor(l3, SC_L3_JANITOR_KEEP, &r))
			_exit(2);
		char p[800];
		snprintf(p, sizeof(p), "%s/objects/00", l3dir(A, "t4"));
		mkdir(p, 0700);
		snprintf(p, sizeof(p), "%s/objects/00/.tmp-hostA.1.0badf00d.1", l3dir(A, "t4"));
		int tfd = open(p, O_CREAT | O_WRONLY, 0600);
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
		if (tfd < 0 || fcntl(tfd, F_OFD_SETLK, &fl))
			_exit(5);
		uint64_t epoch = r.epoch;
		say(up[1], &epoch, sizeof(epoch));
		uint64_t acted_after = 0;
		for (;;) {
			int rc = sc_l3_janitor(l3, SC_L3_JANITOR_KEEP, &r);
			if (rc) /* the mount is gone (ENOTCONN, or the fence saw it: ESTALE): it stops */
				_exit(acted_after ? 4 : 0);
			acted_after += r.evicted;
			usleep(200000);
		}
	}
	close(up[1]);
	uint64_t ea;
	ck_assert_int_eq(hear(up[0], &ea, sizeof(ea)), 0);
	ck_assert_uint_ge(ea, 1);
	/* A's write in progress looks an hour old: only its lock keeps it */
	ck_assert_int_eq(h_sh("touch -d '-1 hour' %s/objects/00/.tmp-hostA.1.0badf00d.1", l3dir(B, "t4")), 0);
	/* A holds the lease: B cannot be janitor */
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(b, 0, &r), -EBUSY);
	sc_l3_close(b);
	/* host A dies */
	ck_assert_int_eq(h_sh("%s kill-host %s %s >/dev/null", SC_CEPHFS_DEV, cluster, host_name[A]), 0);
	int res[2];
	pipe2x(res);
	pid_t pw = fork();
	ck_assert_int_ge(pw, 0);
	if (pw == 0) {
		/* host B's standby: waits for the lease, then enforces its budget */
		struct sc_l3 *l3 = NULL;
		struct sc_l3_janitor_report rr;
		if (h_open(l3dir(B, "t4"), host_name[B], 2u << 20, state[B], &l3))
			_exit(2);
		int rc = sc_l3_janitor(l3, SC_L3_JANITOR_WAIT, &rr);
		sc_l3_close(l3);
		if (write(res[1], &rr, sizeof(rr)) != sizeof(rr))
			_exit(3);
		_exit(rc ? 4 : 0);
	}
	close(res[1]);
	/* no takeover while the dead host's session still holds the lock: an observation window,
	 * 3 s of time itself in which B's standby must not get the lease */
	sleep(3);
	int status;
	ck_assert_int_eq(waitpid(pw, &status, WNOHANG), 0);
	/* the MDS evicts A's session (an operator, or session_autoclose): B takes over */
	ck_assert_int_eq(h_sh("%s evict %s %s >/dev/null", SC_CEPHFS_DEV, cluster, host_name[A]), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(h_wait(pw, 60), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("takeover: host B's standby had the lease and finished its pass %.2f s after host A's session was evicted\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	fflush(stdout);
	struct sc_l3_janitor_report rw;
	ck_assert_int_eq(hear(res[0], &rw, sizeof(rw)), 0);
	ck_assert_uint_gt(rw.epoch, ea);
	ck_assert_uint_gt(rw.evicted, 0);
	ck_assert_uint_le(rw.bytes, (2u << 20) / 100 * 85);
	ck_assert_uint_ge(rw.stale_temps, 1); /* A's write in progress: A's session ended, its lock with it */
	/* exactly that file went; a temp A's janitor was writing when the host died is young and may
	 * stay until it is old enough (a busy machine makes that likelier) */
	char planted[800];
	snprintf(planted, sizeof(planted), "%s/objects/00/.tmp-hostA.1.0badf00d.1", l3dir(B, "t4"));
	ck_assert_msg(access(planted, F_OK) != 0, "%s is still there", planted);
	/* A's janitor saw its mount fail and never acted after it lost the lease */
	ck_assert_int_eq(h_wait(pj, 30), 0);
	ck_assert_int_eq(h_sh("! grep -q ' %llu hostA ' %s/janitor.log", (unsigned long long)ea, l3dir(B, "t4")), 0);
	remount(A);
	/* and A, back, is an ordinary host again: it sees what B's janitor left */
	struct sc_l3 *a = open_as(A, "t4", 0);
	struct sc_l3_janitor_status st;
	ck_assert_int_eq(sc_l3_janitor_status(a, &st), 0);
	ck_assert_uint_eq(st.epoch, rw.epoch);
	ck_assert_str_eq(st.janitor_host, "hostB");
	ck_assert_int_eq(h_fetch_wait(a, 400 + N - 1, 32, BYTES, 1000), 0);
	sc_l3_close(a);
}
END_TEST

START_TEST(mount_dies_mid_fill_errors_never_wrong_bytes)
{
	if (!need_cluster())
		return;
	enum { N = 4, BYTES = 8u << 20 };
	struct sc_l3 *b = open_as(B, "t5", 0);
	for (uint32_t d = 0; d < N; d++)
		ck_assert_int_eq(h_put(b, 500 + d, 48, BYTES), 0);
	sc_l3_close(b);
	int up[2], res[2][2], stop[2][2]; /* a stop pipe each: one byte to each host, whatever it does */
	pipe2x(up);
	pipe2x(res[A]);
	pipe2x(res[B]);
	pipe2x(stop[A]);
	pipe2x(stop[B]);
	_Atomic int *b_after = shared_counter(); /* B's good fills after A's death was announced */
	pid_t pid[2];
	for (int h = A; h <= B; h++) {
		pid[h] = fork();
		ck_assert_int_ge(pid[h], 0);
		if (pid[h] == 0) {
			/* fill, fill, fill; every byte compared */
			close(stop[A][1]);
			close(stop[B][1]);
			fcntl(stop[h][0], F_SETFL, O_NONBLOCK);
			struct sc_l3 *l3 = NULL;
			if (h_open(l3dir(h, "t5"), host_name[h], 0, state[h], &l3))
				_exit(2);
			int counts[5] = { 0 }; /* ok, miss, error, wrong, ok after A's death was announced */
			int dead = 0, consecutive_err = 0;
			char c;
			uint64_t t0 = (uint64_t)time(NULL);
			for (uint32_t i = 0; (uint64_t)time(NULL) - t0 < 60; i++) {
				if (read(stop[h][0], &c, 1) == 1) {
					if (c == 'd')
						dead = 1;
					else
						break;
				}
				int rc = h_fetch(l3, 500 + i % N, 48, BYTES);
				int k = rc == 0 ? 0 : rc == -ENOENT ? 1 : rc == 1 ? 3 : 2;
				counts[k]++;
				counts[4] += dead && k == 0;
				if (h == B && dead && k == 0)
					atomic_fetch_add(b_after, 1);
				if (i == 0 && h == A)
					say(up[1], "r", 1);
				consecutive_err = k == 2 ? consecutive_err + 1 : 0;
				if (h == A && consecutive_err >= 20)
					break; /* the mount is gone for good */
			}
			if (h == A)
				_exit(write(res[h][1], counts, sizeof(counts)) == sizeof(counts) ? 0 : 3); /* no close: dead mount */
			sc_l3_close(l3);
			_exit(write(res[h][1], counts, sizeof(counts)) == sizeof(counts) ? 0 : 3);
		}
	}
	close(up[1]);
	close(res[A][1]);
	close(res[B][1]);
	char c;
	/* A has done one fill and goes straight on to the next: its mount dies under a fill */
	ck_assert_int_eq(hear(up[0], &c, 1), 0);
	ck_assert_int_eq(h_sh("%s kill-host %s %s >/dev/null", SC_CEPHFS_DEV, cluster, host_name[A]), 0);
	ck_assert_int_eq(h_sh("%s evict %s %s >/dev/null", SC_CEPHFS_DEV, cluster, host_name[A]), 0);
	say(stop[A][1], "d", 1);
	say(stop[B][1], "d", 1); /* B keeps filling */
	/* an observation window, 3 s of time itself in which B's fills must neither miss nor fail;
	 * and B must have filled after the death (up to 60 s) */
	sleep(3);
	wait_counter(b_after, 1, 60, "a good fill of B's after A's death");
	say(stop[A][1], "s", 1);
	say(stop[B][1], "s", 1);
	ck_assert_int_eq(h_wait(pid[A], 60), 0);
	ck_assert_int_eq(h_wait(pid[B], 60), 0);
	int ca[5], cb[5];
	ck_assert_int_eq(hear(res[A][0], ca, sizeof(ca)), 0);
	ck_assert_int_eq(hear(res[B][0], cb, sizeof(cb)), 0);
	ck_assert_msg(ca[3] == 0 && cb[3] == 0, "wrong bytes: A %d, B %d", ca[3], cb[3]);
	ck_assert_msg(ca[2] > 0, "A's fills never saw their mount die (%d ok, %d misses)", ca[0], ca[1]);
	ck_assert_msg(cb[1] == 0 && cb[2] == 0, "B: %d misses, %d errors", cb[1], cb[2]);
	ck_assert_msg(cb[4] > 0, "B made no progress after A died (%d ok in all)", cb[0]);
	munmap((void *)b_after, 4096);
	remount(A);
	/* nothing was quarantined by A's failed reads: the objects are intact */
	struct sc_l3 *a = open_as(A, "t5", 0);
	for (uint32_t d = 0; d < N; d++)
		ck_assert_int_eq(h_fetch_wait(a, 500 + d, 48, BYTES, 1000), 0);
	sc_l3_close(a);
}
END_TEST

/* Through two real mounts: host A's location index follows host B's puts
 * (at once on a miss; a longer prefix within the refresh interval), its janitor's evictions and
 * quarantines (a miss on A, never an error or wrong bytes). The scenario: tests/l3_hosts.c. */
START_TEST(location_index_follows_the_other_host)
{
	if (!need_cluster())
		return;
	/* the interval is short to keep the test short; visibility across mounts is ~10 ms (MDS
	 * settings of cephfs-dev.sh) */
	enum { REFRESH_MS = 500, VIS_MS = 2000 };
	sc_l3_close(open_as(A, "t6", 0)); /* makes the directory */
	char an[64], bn[64], why[512];
	snprintf(an, sizeof(an), "%s", sc_test_name("cephixA"));
	snprintf(bn, sizeof(bn), "%s", sc_test_name("cephixB"));
	double lat;
	int rc = h_coherence(l3dir(A, "t6"), l3dir(B, "t6"), state[A], state[B], an, bn, REFRESH_MS, VIS_MS,
			     &lat, why, sizeof(why));
	printf("location index on CephFS: another host's longer prefix visible after %.1f ms (refresh %u ms)\n", lat,
	       REFRESH_MS);
	fflush(stdout);
	ck_assert_msg(rc == 0, "%s", why);
}
END_TEST

START_TEST(stop_leaves_no_process_mount_or_file)
{
	if (!need_cluster())
		return;
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", cluster);
	ck_assert_int_eq(h_sh("%s stop %s", SC_CEPHFS_DEV, dir), 0);
	ck_assert_int_eq(h_sh("test ! -e %s", dir), 0);
	ck_assert_int_eq(h_sh("! grep -q '%s' /proc/mounts", dir), 0);
	/* no daemon, ceph-fuse or watchdog of this cluster (each names the directory on its command line) */
	ck_assert_int_eq(h_sh("! pgrep -f '[c]eph-(mon|osd|mds|mgr|fuse) .*%s' && ! pgrep -f '[w]atchdog .*%s'", dir, dir), 0);
}
END_TEST

static Suite *cephfs_suite(void)
{
	Suite *s = suite_create("cephfs");
	TCase *tc = tcase_create("two_hosts");
	tcase_add_unchecked_fixture(tc, cluster_start, NULL);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, put_on_a_restored_on_b_byte_for_byte);
	tcase_add_test(tc, location_index_follows_the_other_host);
	tcase_add_test(tc, concurrent_puts_of_the_same_prefixes_from_both_hosts);
	tcase_add_test(tc, segments_shared_by_both_hosts);
	tcase_add_test(tc, janitor_evicts_to_budget_while_the_other_host_fills);
	tcase_add_test(tc, janitor_host_killed_then_taken_over);
	tcase_add_test(tc, mount_dies_mid_fill_errors_never_wrong_bytes);
	suite_add_tcase(s, tc);
	TCase *tc2 = tcase_create("cleanup");
	tcase_set_timeout(tc2, 120);
	tcase_add_test(tc2, stop_leaves_no_process_mount_or_file);
	suite_add_tcase(s, tc2);
	return s;
}

SC_CHECK_MAIN(cephfs_suite)
