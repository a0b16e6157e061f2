/*
 * tests/check_l3_shared.c — an L3 directory shared by several hosts, simulated on a local
 * filesystem: processes with different host identities (the real two-mount tests against CephFS
 * are tests/check_cephfs.c). Host identity, shared mode, writer liveness (no pid), the janitor's
 * lease, takeover and fencing, the LRU order across hosts, the prefix-drop protocol, vanished
 * objects, the location index of one host following another's puts, evictions and quarantines.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "l3_hosts.h"
#include "sc_check.h"
#include "../lib/l3/l3.h"

static char dir[128], sdir[160];

static void teardown(void);

static void setup(void)
{
	h_visibility_ms = 1; /* one local filesystem: what one process makes, every other sees at once */
	snprintf(dir, sizeof(dir), "/var/tmp/sc-l3sh-%d-XXXXXX", (int)getpid());
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sdir, sizeof(sdir), "%s.state", dir);
	ck_assert_int_eq(mkdir(sdir, 0700), 0);
	strcat(dir, "/l3");
	atexit(teardown); /* a failed assertion exits the test process without the teardown */
}

static void teardown(void)
{
	if (!dir[0])
		return;
	char top[128];
	snprintf(top, sizeof(top), "%s", dir);
	*strrchr(top, '/') = 0;
	sc_test_rm_tree(top);
	sc_test_rm_tree(sdir);
	dir[0] = 0;
}

static struct sc_l3 *host(const char *h, uint64_t budget)
{
	struct sc_l3 *l3 = NULL;
	int rc = h_open(dir, h, budget, sdir, &l3);
	ck_assert_msg(rc == 0, "open as %s: %s", h, sc_strerror(rc));
	return l3;
}

/* a child's one-byte message to its parent, and back */
static void say(int fd, char c)
{
	ck_assert_int_eq(write(fd, &c, 1), 1);
}

static char hear(int fd)
{
	char c = 0;
	if (read(fd, &c, 1) != 1)
		return 0;
	return c;
}

START_TEST(host_identity_is_validated)
{
	struct sc_l3 *l3 = NULL;
	const char *bad[] = { "", "a/b", "a.b", "sp ace", "x\n",
			      "0123456789012345678901234567890123456789012345678901234567890123x" };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sc_l3_opts o = { .host_id = bad[i] };
		ck_assert_int_eq(sc_l3_open(dir, &o, &l3), -EINVAL);
		ck_assert_ptr_null(l3);
	}
	struct sc_l3_opts o = { .host_id = "0123456789012345678901234567890123456789012345678901234567890123" };
	ck_assert_int_eq(sc_l3_open(dir, &o, &l3), 0);
	sc_l3_close(l3);
	/* the default is the machine id */
	char mid[128] = { 0 };
	FILE *f = fopen("/etc/machine-id", "r");
	if (!f || !fgets(mid, sizeof(mid), f)) {
		sc_skip("no /etc/machine-id: the host-name fallback is used");
	} else {
		mid[strcspn(mid, "\n")] = 0;
		ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
		struct sc_l3_janitor_status st;
		ck_assert_int_eq(sc_l3_janitor_status(l3, &st), 0);
		ck_assert_str_eq(st.host_id, mid);
		ck_assert_int_eq(st.shared, 0);
		sc_l3_close(l3);
	}
	if (f)
		fclose(f);
}
END_TEST

START_TEST(shared_mode_is_sticky_with_per_host_counters)
{
	struct sc_l3 *a = host("hostA", 0);
	char p[256];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/shared", dir);
	ck_assert_int_eq(stat(p, &sb), 0);
	snprintf(p, sizeof(p), "%s/state", dir);
	ck_assert_int_eq(stat(p, &sb), -1); /* no mmap'd counters on the shared filesystem */
	ck_assert_int_eq(h_put(a, 1, 40, 5000), 0);
	ck_assert_int_eq(h_put(a, 2, 40, 5000), 0);
	ck_assert_int_eq(h_put(a, 2, 40, 5000), 0);
	/* an open without the flag (another path, another tool) is shared too */
	struct sc_l3_opts o = { .host_id = "hostB", .state_dir = sdir };
	struct sc_l3 *b = NULL;
	ck_assert_int_eq(sc_l3_open(dir, &o, &b), 0);
	struct sc_l3_stats sa, sbs;
	struct sc_l3_janitor_status js;
	ck_assert_int_eq(sc_l3_stats(a, &sa), 0);
	ck_assert_int_eq(sc_l3_stats(b, &sbs), 0);
	ck_assert_int_eq(sc_l3_janitor_status(b, &js), 0);
	ck_assert_int_eq(js.shared, 1);
	ck_assert_str_eq(js.host_id, "hostB");
	ck_assert_uint_eq(sa.puts, 2);
	ck_assert_uint_eq(sa.put_dedup, 1);
	ck_assert_uint_eq(sbs.puts, 0); /* each host counts its own */
	ck_assert_uint_eq(js.epoch, 0);
	ck_assert_int_eq(h_fetch(b, 1, 40, 5000), 0);
	ck_assert_int_eq(sc_l3_stats(b, &sbs), 0);
	ck_assert_uint_eq(sbs.fills, 1);
	/* objects and bytes come from the janitor */
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(b, 0, &r), 0);
	ck_assert_uint_eq(r.objects, 2);
	ck_assert_int_eq(sc_l3_stats(a, &sa), 0);
	ck_assert_uint_eq(sa.objects, 2);
	ck_assert_uint_eq(sa.bytes, 2 * (4096 + 5000));
	ck_assert_int_eq(sc_l3_janitor_status(a, &js), 0);
	ck_assert_uint_eq(js.epoch, r.epoch);
	ck_assert_str_eq(js.janitor_host, "hostB");
	ck_assert_uint_eq(js.objects, 2);
	ck_assert_uint_eq(js.passes, 1);
	/* what a host makes is named after it: temp files, access segments */
	struct sc_l3 *x = a;
	ck_assert(strncmp(x->writer, "hostA.", 6) == 0);
	char name[128];
	l3_tmp_name(x, ".tmp-", name, sizeof(name));
	ck_assert(strncmp(name, ".tmp-hostA.", 11) == 0);
	sc_l3_close(a);
	sc_l3_close(b);
	snprintf(p, sizeof(p), "%s/access", dir);
	ck_assert_int_eq(h_count(p, "hostB."), 1); /* B's fill, written at close */
}
END_TEST

/* Make @path and hold an OFD lock on it (what a writer does with its temp file), or back-date it. */
static int make_held(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY, 0600);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
	if (fd < 0 || fcntl(fd, F_OFD_SETLK, &fl))
		return -1;
	return fd;
}

START_TEST(temp_files_of_live_writers_survive_dead_ones_go)
{
	int up[2], down[2];
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	char p[512];
	snprintf(p, sizeof(p), "%s/objects/ab", dir);
	struct sc_l3 *a = host("hostA", 0);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/prefix/ab", dir);
	mkdir(p, 0700);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* host B: a writer in the middle of two puts (it holds its temp files) */
		const char *sub[] = { "objects", "prefix" };
		for (int i = 0; i < 2; i++) {
			snprintf(p, sizeof(p), "%s/%s/ab/.tmp-hostB.42.0badf00d.%d", dir, sub[i], i);
			if (make_held(p) < 0)
				_exit(3);
		}
		say(up[1], 'r');
		hear(down[0]);
		_exit(0);
	}
	ck_assert_int_eq(hear(up[0]), 'r');
	/* leftovers of writers that are gone: nobody holds them */
	snprintf(p, sizeof(p), "%s/objects/ab/.tmp-hostZ.77.0badf00d.3", dir);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	snprintf(p, sizeof(p), "%s/objects/ab/.tmp-12345.678.9", dir); /* an older name */
	close(open(p, O_CREAT | O_WRONLY, 0600));
	snprintf(p, sizeof(p), "%s/.tmp-hostZ.77.0badf00d.4", dir); /* a janitor killed writing DIR/lru */
	close(open(p, O_CREAT | O_WRONLY, 0600));
	/* a young one nobody holds yet (its writer between create and lock) stays */
	snprintf(p, sizeof(p), "%s/objects/ab/.tmp-hostY.5.0badf00d.0", dir);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	/* everything but the young one looks an hour old: only a lock keeps a file */
	ck_assert_int_eq(h_sh("find %s -name '.tmp-*' ! -name '.tmp-hostY*' -exec touch -d '-1 hour' {} +", dir), 0);
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(a, SC_L3_JANITOR_FULL, &r), 0);
	ck_assert_uint_eq(r.stale_temps, 3);
	ck_assert_int_eq(h_count(dir, ".tmp-hostB."), 2);
	ck_assert_int_eq(h_count(dir, ".tmp-hostY."), 1);
	ck_assert_int_eq(h_count(dir, ".tmp-hostZ."), 0);
	/* host B dies: its locks go with it, and its files at the next pass */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_uint_eq(r.stale_temps, 2);
	ck_assert_int_eq(h_count(dir, ".tmp-hostB."), 0);
	ck_assert_int_eq(h_count(dir, ".tmp-hostY."), 1);
	/* the young one, once old and still not held, goes too */
	ck_assert_int_eq(h_sh("touch -d '-1 hour' %s/objects/ab/.tmp-hostY*", dir), 0);
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_uint_eq(r.stale_temps, 1);
	ck_assert_int_eq(h_count(dir, ".tmp-"), 0);
	sc_l3_close(a);
}
END_TEST

/* Fork host A's janitor, holding the lease (SC_L3_JANITOR_KEEP) of a store with @budget: in the
 * child it returns 0 with the store in *@j and its first report in *@r; the parent gets the pid.
 * @up and @down become the pipes child -> parent and parent -> child. */
static pid_t fork_janitor(uint64_t budget, int up[2], int down[2], struct sc_l3 **j, struct sc_l3_janitor_report *r)
{
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0 && (h_open(dir, "hostA", budget, sdir, j) || sc_l3_janitor(*j, SC_L3_JANITOR_KEEP, r)))
		_exit(2);
	return pid;
}

START_TEST(janitor_lease_is_exclusive_and_taken_over)
{
	int up[2], down[2];
	struct sc_l3 *j = NULL;
	struct sc_l3_janitor_report r;
	pid_t pid = fork_janitor(0, up, down, &j, &r);
	if (pid == 0) {
		say(up[1], (char)r.epoch);
		hear(down[0]); /* hold the lease until killed */
		_exit(0);
	}
	char e1 = hear(up[0]);
	ck_assert_int_eq(e1, 1);
	struct sc_l3 *b = host("hostB", 0);
	ck_assert_int_eq(sc_l3_janitor(b, 0, &r), -EBUSY);
	ck_assert_int_eq(sc_l3_evict_to(b, 0), -EBUSY);
	struct sc_l3_janitor_status st;
	ck_assert_int_eq(sc_l3_janitor_status(b, &st), 0);
	ck_assert_str_eq(st.janitor_host, "hostA");
	/* the janitor dies: the lease is free at once, and the next holder's epoch is higher */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(sc_l3_janitor(b, SC_L3_JANITOR_KEEP, &r), 0);
	ck_assert_uint_eq(r.epoch, 2);
	/* kept: the next call is the same lease */
	ck_assert_int_eq(sc_l3_janitor(b, 0, &r), 0);
	ck_assert_uint_eq(r.epoch, 2);
	ck_assert_int_eq(sc_l3_janitor(b, SC_L3_JANITOR_WAIT, &r), 0);
	ck_assert_uint_eq(r.epoch, 3);
	ck_assert_int_eq(sc_l3_janitor(b, 0xf0, &r), -EINVAL);
	sc_l3_close(b);
}
END_TEST

START_TEST(janitor_that_lost_its_lease_cannot_act)
{
	int up[2], down[2];
	struct sc_l3 *j = NULL;
	struct sc_l3_janitor_report r;
	pid_t pid = fork_janitor(200000, up, down, &j, &r); /* with a budget its pass will want to enforce */
	if (pid == 0) {
		say(up[1], 'k');
		hear(down[0]);
		int rc = sc_l3_janitor(j, SC_L3_JANITOR_KEEP, &r);
		say(up[1], rc == -ESTALE ? 's' : 'x');
		hear(down[0]);
		rc = sc_l3_janitor(j, 0, &r); /* competes anew: elected, acts */
		say(up[1], rc == 0 && r.evicted > 0 ? 'e' : 'x');
		_exit(0);
	}
	ck_assert_int_eq(hear(up[0]), 'k');
	struct sc_l3 *b = host("hostB", 0);
	for (uint32_t d = 0; d < 10; d++)
		ck_assert_int_eq(h_put(b, d, 30, 50000), 0);
	/* A's lock is released under it: DIR/janitor is replaced (as a filesystem that ended A's
	 * session would drop the lock), and B becomes janitor with the next epoch */
	char p[256], q[256];
	snprintf(p, sizeof(p), "%s/janitor", dir);
	snprintf(q, sizeof(q), "%s/janitor.new", dir);
	ck_assert_int_eq(h_sh("cp %s %s && mv %s %s", p, q, q, p), 0);
	ck_assert_int_eq(sc_l3_janitor(b, SC_L3_JANITOR_KEEP, &r), 0);
	ck_assert_uint_eq(r.epoch, 2);
	/* A tries to act: fenced, nothing removed */
	say(down[1], 'g');
	ck_assert_int_eq(hear(up[0]), 's');
	for (uint32_t d = 0; d < 10; d++)
		ck_assert_int_eq(h_fetch(b, d, 30, 50000), 0);
	ck_assert_int_eq(h_sh("! grep -q ' 1 hostA evict ' %s/janitor.log 2>/dev/null", dir), 0);
	/* B lets go: A is elected with a new epoch and enforces its budget */
	sc_l3_close(b);
	say(down[1], 'g');
	ck_assert_int_eq(hear(up[0]), 'e');
	ck_assert_int_eq(h_wait(pid, 30), 0);
	ck_assert_int_eq(h_sh("grep -q ' 3 hostA evict ' %s/janitor.log", dir), 0);
}
END_TEST

/* Wait, at most 2 s, until @clk reads later than @after_ns (@what says which moment). */
static void wait_realtime_past(uint64_t after_ns, clockid_t clk, const char *what)
{
	double end = sc_test_now_s() + 2;
	for (;;) {
		struct timespec t;
		ck_assert_int_eq(clock_gettime(clk, &t), 0);
		if ((uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec > after_ns)
			return;
		ck_assert_msg(sc_test_now_s() < end, "waited 2 s for %s", what);
		sc_test_pause_ms(1);
	}
}

/* Host A puts documents 0..@n-1 (30 tokens, 100 000 bytes) in order, each with a later mtime
 * than the one before: after each put, the coarse clock that file times come from moves on. */
static void put_in_order(struct sc_l3 *a, uint32_t n)
{
	for (uint32_t d = 0; d < n; d++) {
		ck_assert_int_eq(h_put(a, d, 30, 100000), 0);
		struct timespec t;
		ck_assert_int_eq(clock_gettime(CLOCK_REALTIME_COARSE, &t), 0);
		wait_realtime_past((uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec, CLOCK_REALTIME_COARSE,
				   "the clock of file times to move past the put");
	}
}

/* Host B (another process) fetches documents 0..4 of 30 tokens and exits: its access segment,
 * let go of, holds those uses. */
static void hostb_uses_five_oldest(void)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_l3 *b = NULL;
		if (h_open(dir, "hostB", 0, sdir, &b))
			_exit(2);
		int bad = 0;
		for (uint32_t d = 0; d < 5; d++)
			bad |= h_fetch(b, d, 30, 100000) != 0;
		sc_l3_close(b); /* writes its access records */
		_exit(bad);
	}
	ck_assert_int_eq(h_wait(pid, 30), 0);
}

START_TEST(lru_order_counts_other_hosts_uses)
{
	struct sc_l3 *a = host("hostA", 0);
	put_in_order(a, 10);
	hostb_uses_five_oldest(); /* host B uses the five oldest */
	/* B's segment is let go of (B exited); make it old enough to count as left over at once */
	ck_assert_int_eq(h_sh("touch -d '-1 hour' %s/access/hostB.*", dir), 0);
	/* host A's janitor keeps half: the ones B used, although A put them first */
	int n = sc_l3_evict_to(a, 5 * (4096 + 100000));
	ck_assert_int_eq(n, 5);
	for (uint32_t d = 0; d < 5; d++)
		ck_assert_int_eq(h_fetch(a, d, 30, 100000), 0);
	for (uint32_t d = 5; d < 10; d++)
		ck_assert_int_eq(h_fetch(a, d, 30, 100000), -ENOENT);
	/* merged into DIR/lru; the closed segment is gone */
	char p[256];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/lru", dir);
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_int_gt(sb.st_size, 32);
	snprintf(p, sizeof(p), "%s/access", dir);
	ck_assert_int_eq(h_count(p, "hostB."), 0);
	/* and the order survives the table: a second pass still knows B's uses */
	ck_assert_int_eq(sc_l3_evict_to(a, 3 * (4096 + 100000)), 2);
	ck_assert_int_eq(h_fetch(a, 3, 30, 100000), 0);
	ck_assert_int_eq(h_fetch(a, 4, 30, 100000), 0);
	sc_l3_close(a);
}
END_TEST

/* Shared mode without a budget: once the last listing found the store larger than
 * l3_shared_list_min objects, a pass lists nothing for l3_shared_relist_s seconds. It merges the
 * hosts' access segments into DIR/lru (and removes the closed ones), removes dead writers' temp
 * files, and reports the last listing's objects; the LRU order it kept is the one a later
 * evicting pass follows. A full check lists again, and so does a pass once the listing is old. */
START_TEST(passes_without_a_budget_read_what_changed_not_the_store)
{
	l3_shared_list_min = 4;
	struct sc_l3 *a = host("hostA", 0);
	put_in_order(a, 10);
	unsigned long l0 = atomic_load(&l3_test_janitor_listings);
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0); /* no listing on record yet: this one lists */
	ck_assert_uint_eq(atomic_load(&l3_test_janitor_listings) - l0, 1);
	ck_assert_uint_eq(r.objects, 10);
	struct l3_jrec_view v0, v1;
	ck_assert_int_eq(l3_janitor_read(a, &v0), 0);
	ck_assert_uint_gt(v0.listed_s, 0);
	/* the next second, so that a pass that wrote its own time into the record would differ */
	wait_realtime_past(v0.listed_s * 1000000000ull + 999999999ull, CLOCK_REALTIME, "the next second");
	/* since: two more puts, host B uses the five oldest, a writer died leaving a temp file */
	for (uint32_t d = 10; d < 12; d++)
		ck_assert_int_eq(h_put(a, d, 30, 100000), 0);
	hostb_uses_five_oldest();
	char p[512];
	snprintf(p, sizeof(p), "%s/tmp/.tmp-hostZ.77.0badf00d.9", dir);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	ck_assert_int_eq(h_sh("touch -d '-1 hour' %s/access/hostB.* %s", dir, p), 0);
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_janitor_listings) - l0, 1); /* not listed */
	ck_assert_uint_eq(r.objects, 10);                                   /* the listing's count */
	ck_assert_int_eq(l3_janitor_read(a, &v1), 0);
	ck_assert_uint_eq(v1.listed_s, v0.listed_s); /* the listing's time is kept, not this pass's */
	ck_assert_uint_gt(v1.pass_end_ns, v0.pass_end_ns);
	ck_assert_uint_eq(r.stale_temps, 1);
	ck_assert_int_eq(access(p, F_OK), -1);
	ck_assert_uint_ge(r.accesses, 5);
	snprintf(p, sizeof(p), "%s/access", dir);
	ck_assert_int_eq(h_count(p, "hostB."), 0); /* merged into DIR/lru, then removed */
	/* the order it kept: an evicting pass (it lists) keeps what B used, evicts the five unused */
	ck_assert_int_eq(sc_l3_evict_to(a, 7 * (4096 + 100000)), 5);
	ck_assert_uint_eq(atomic_load(&l3_test_janitor_listings) - l0, 2);
	for (uint32_t d = 0; d < 12; d++)
		ck_assert_int_eq(h_fetch(a, d, 30, 100000), d >= 5 && d < 10 ? -ENOENT : 0);
	/* a full check lists; so does a pass whose last listing is older than l3_shared_relist_s */
	ck_assert_int_eq(sc_l3_janitor(a, SC_L3_JANITOR_FULL, &r), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_janitor_listings) - l0, 3);
	ck_assert_uint_eq(r.objects, 7);
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_janitor_listings) - l0, 3);
	l3_shared_relist_s = 0;
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_janitor_listings) - l0, 4);
	/* a store at or under the threshold is listed by every pass */
	l3_shared_relist_s = 600;
	l3_shared_list_min = 7;
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_janitor_listings) - l0, 5);
	l3_shared_list_min = 1024;
	sc_l3_close(a);
}
END_TEST

START_TEST(dangling_prefix_entries_dropped_live_ones_kept)
{
	struct sc_l3 *a = host("hostA", 0);
	ck_assert_int_eq(h_put(a, 7, 20, 3000), 0);
	ck_assert_int_eq(h_put(a, 8, 20, 3000), 0);
	/* the object of doc 7 vanishes (another host's janitor): a miss, and the entry goes */
	ck_assert_int_eq(h_sh("rm %s/objects/*/*.sc3 && test $(find %s/prefix -name '*.pfx' | wc -l) = 2", dir, dir), 0);
	ck_assert_int_eq(h_fetch(a, 7, 20, 3000), -ENOENT);
	ck_assert_int_eq(h_sh("test $(find %s/prefix -name '*.pfx' | wc -l) = 1", dir), 0);
	/* put again: both there, restorable */
	ck_assert_int_eq(h_put(a, 7, 20, 3000), 0);
	ck_assert_int_eq(h_fetch(a, 7, 20, 3000), 0);
	/* a dropper that died after capturing a live entry: the janitor puts it back */
	ck_assert_int_eq(h_sh("f=$(find %s/prefix -name '*.pfx' | head -n 1); mv $f $(dirname $f)/.drop-hostZ.9.0badf00d.1 && "
			      "touch -d '-1 hour' $(dirname $f)/.drop-hostZ.9.0badf00d.1", dir), 0);
	ck_assert_int_eq(h_fetch(a, 7, 20, 3000), -ENOENT);
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_int_eq(h_fetch(a, 7, 20, 3000), 0);
	ck_assert_int_eq(h_count(dir, ".drop-"), 0);
	/* ... and removes a captured one whose object is gone */
	ck_assert_int_eq(h_put(a, 9, 20, 3000), 0);
	ck_assert_int_eq(h_sh("rm %s/objects/*/*.sc3; for f in $(find %s/prefix -name '*.pfx'); do "
			      "d=$(dirname $f)/.drop-hostZ.9.0badf00d.$RANDOM; mv $f $d && touch -d '-1 hour' $d; done", dir, dir), 0);
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_int_eq(h_count(dir, ".drop-"), 0);
	ck_assert_int_eq(h_sh("test $(find %s/prefix -name '*.pfx' | wc -l) = 0", dir), 0);
	/* FULL: entries naming missing objects are dropped by the janitor too */
	ck_assert_int_eq(h_put(a, 10, 20, 3000), 0);
	ck_assert_int_eq(h_sh("rm %s/objects/*/*.sc3", dir), 0);
	ck_assert_int_eq(sc_l3_janitor(a, SC_L3_JANITOR_FULL, &r), 0);
	ck_assert_uint_eq(r.dropped, 1);
	sc_l3_close(a);
}
END_TEST

/* A group commit in shared mode: another host's handle finds every put of the batch; after the
 * objects vanished (another host's janitor), the same batch puts them back. */
START_TEST(put_many_is_seen_by_the_other_host)
{
	enum { N = 8, NTOK = 20, BYTES = 3000 };
	struct sc_l3 *a = host("hostA", 0), *b = host("hostB", 0);
	int32_t t[N][NTOK];
	uint8_t p[N][BYTES];
	struct sc_payload pl[N];
	struct sc_l3_put_args args[N];
	int rcs[N];
	for (uint32_t k = 0; k < N; k++) {
		h_tokens(20 + k, t[k], NTOK);
		h_bytes(20 + k, p[k], BYTES);
		pl[k] = (struct sc_payload){ .kind = SC_PAYLOAD_FULL_STATE, .sec = { p[k] }, .sec_len = { BYTES } };
		args[k] = (struct sc_l3_put_args){ .ns = "h", .tokens = t[k], .token_count = NTOK, .payload = &pl[k] };
	}
	ck_assert_int_eq(sc_l3_put_many(a, args, NULL, N, NULL, rcs), 0);
	for (uint32_t k = 0; k < N; k++)
		ck_assert_int_eq(h_fetch_wait(b, 20 + k, NTOK, BYTES, 5000), 0);
	ck_assert_int_eq(h_sh("rm %s/objects/*/*.sc3", dir), 0);
	ck_assert_int_eq(sc_l3_put_many(a, args, NULL, N, NULL, rcs), 0);
	for (uint32_t k = 0; k < N; k++) {
		ck_assert_int_eq(rcs[k], 0);
		ck_assert_int_eq(h_fetch_wait(b, 20 + k, NTOK, BYTES, 5000), 0);
	}
	ck_assert_int_eq(h_count(dir, ".tmp-"), 0);
	sc_l3_close(a);
	sc_l3_close(b);
}
END_TEST

START_TEST(nothing_is_removed_on_a_missing_younger_than_the_grace)
{
	/* the grace of a filesystem that may show another host's new files late */
	h_visibility_ms = 1500;
	struct sc_l3 *a = host("hostA", 0);
	ck_assert_int_eq(h_put(a, 7, 20, 3000), 0);
	ck_assert_int_eq(h_sh("rm %s/objects/*/*.sc3", dir), 0);
	/* a miss, but the young entry stays: its object may just not be visible here yet */
	ck_assert_int_eq(h_fetch(a, 7, 20, 3000), -ENOENT);
	ck_assert_int_eq(h_sh("test $(find %s/prefix -name '*.pfx' | wc -l) = 1", dir), 0);
	/* a young temp file whose writer's entry is missing stays too */
	char p[256];
	snprintf(p, sizeof(p), "%s/objects/ab", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/objects/ab/.tmp-hostZ.1.0badf00d.0", dir);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(a, SC_L3_JANITOR_FULL, &r), 0);
	ck_assert_uint_eq(r.stale_temps, 0);
	ck_assert_uint_eq(r.dropped, 0);
	ck_assert_int_eq(h_count(dir, ".tmp-hostZ"), 1);
	/* past the grace (and the 2 s any unheld temp file gets) both go */
	usleep(2500000);
	ck_assert_int_eq(h_fetch(a, 7, 20, 3000), -ENOENT);
	ck_assert_int_eq(h_sh("test $(find %s/prefix -name '*.pfx' | wc -l) = 0", dir), 0);
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_uint_eq(r.stale_temps, 1);
	/* a put keeps an entry young: one older than half the grace is written again */
	ck_assert_int_eq(h_put(a, 8, 20, 3000), 0);
	ck_assert_int_eq(h_sh("cp -p %s/prefix/*/*.pfx %s.pfx1", dir, dir), 0);
	ck_assert_int_eq(h_put(a, 8, 20, 3000), 0);
	ck_assert_int_eq(h_sh("cmp -s %s/prefix/*/*.pfx %s.pfx1", dir, dir), 0); /* young: kept as it was */
	/* time itself: the entry ages past half the grace (750 ms, lib/l3/put.c) */
	usleep(800000);
	ck_assert_int_eq(h_put(a, 8, 20, 3000), 0);
	ck_assert_int_eq(h_sh("! cmp -s %s/prefix/*/*.pfx %s.pfx1", dir, dir), 0); /* refreshed */
	ck_assert_int_eq(h_sh("rm -f %s.pfx1", dir), 0);
	sc_l3_close(a);
}
END_TEST

START_TEST(regression_killed_put_left_an_unregistered_length)
{
	/* a writer killed after renaming its prefix entry into place but before registering the
	 * entry's token length: nothing probed that length, and every later put of the same prefix
	 * found the entry "the same" and returned early, so the prefix stayed unreachable (found by
	 * stress --hosts: objects_lost) */
	struct sc_l3 *a = host("hostA", 0);
	ck_assert_int_eq(h_put(a, 5, 33, 4000), 0);
	ck_assert_int_eq(h_sh("rm %s/lengths/33", dir), 0);
	ck_assert_int_eq(h_fetch(a, 5, 33, 4000), -ENOENT);
	ck_assert_int_eq(h_put(a, 5, 33, 4000), 0);
	ck_assert_int_eq(h_fetch(a, 5, 33, 4000), 0);
	/* the janitor's full pass repairs it too */
	ck_assert_int_eq(h_sh("rm %s/lengths/33", dir), 0);
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(a, SC_L3_JANITOR_FULL, &r), 0);
	ck_assert_int_eq(h_fetch(a, 5, 33, 4000), 0);
	sc_l3_close(a);
}
END_TEST

START_TEST(corrupt_janitor_files_are_survived)
{
	struct sc_l3 *a = host("hostA", 0);
	ck_assert_int_eq(h_put(a, 1, 20, 3000), 0);
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	/* a scribbled record, a truncated LRU table, a segment with a torn tail, junk in access/ */
	ck_assert_int_eq(h_sh("cd %s && printf 'garbage' | dd of=janitor bs=1 seek=20 conv=notrunc 2>/dev/null && "
			      "head -c 40 lru > lru.x && mv lru.x lru && mkdir -p access && "
			      "head -c 45 /dev/urandom > access/hostQ.1.0badf00d.0 && echo hi > access/nonsense", dir), 0);
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_uint_gt(r.epoch, 2); /* an unreadable record: an epoch no earlier holder had */
	ck_assert_uint_eq(r.objects, 1);
	ck_assert_int_eq(h_fetch(a, 1, 20, 3000), 0);
	struct sc_l3_janitor_status st;
	ck_assert_int_eq(sc_l3_janitor_status(a, &st), 0);
	ck_assert_uint_eq(st.epoch, r.epoch);
	/* a record of the wrong size */
	ck_assert_int_eq(h_sh("cd %s && head -c 100 /dev/zero > janitor", dir), 0);
	ck_assert_int_eq(sc_l3_janitor(a, 0, &r), 0);
	ck_assert_uint_eq(r.objects, 1);
	sc_l3_close(a);
}
END_TEST

START_TEST(put_over_budget_runs_a_pass)
{
	struct sc_l3 *a = host("hostA", 1 << 20);
	for (uint32_t d = 0; d < 30; d++)
		ck_assert_int_eq(h_put(a, d, 30, 100000), 0);
	struct sc_l3_stats st;
	struct sc_l3_janitor_status js;
	ck_assert_int_eq(sc_l3_stats(a, &st), 0);
	ck_assert_int_eq(sc_l3_janitor_status(a, &js), 0);
	ck_assert_uint_gt(js.evictions, 0);
	ck_assert_uint_le(st.bytes, 1 << 20);
	ck_assert_int_eq(h_sh("test $(du -cb %s/objects/*/*.sc3 | tail -n 1 | cut -f1) -le %d", dir, (1 << 20) + 104096), 0);
	/* the newest are there */
	ck_assert_int_eq(h_fetch(a, 29, 30, 100000), 0);
	sc_l3_close(a);
}
END_TEST

START_TEST(vanished_object_is_a_miss)
{
	struct sc_l3 *a = host("hostA", 0);
	ck_assert_int_eq(h_put(a, 3, 25, 20000), 0);
	int32_t t[25];
	h_tokens(3, t, 25);
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_locate_longest(a, "h", t, 25, &loc), 25);
	ck_assert_int_eq(h_sh("rm %s/objects/*/*.sc3", dir), 0);
	uint8_t *buf = aligned_alloc(4096, 24576);
	ck_assert_int_eq(sc_l3_fill(a, &loc, buf, 24576, 0), -ENOENT);
	ck_assert_int_eq(sc_l3_lookup(a, loc.digest, &loc), -ENOENT);
	ck_assert_int_eq(sc_l3_locate_longest(a, "h", t, 25, &loc), 0);
	free(buf);
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_stats(a, &st), 0);
	ck_assert_uint_eq(st.verify_failures, 0);
	ck_assert_uint_eq(st.quarantined, 0);
	sc_l3_close(a);
}
END_TEST

/* The location index of one host's arena follows another host's puts (within
 * the refresh interval; at once on a miss), evictions and quarantines (a miss, never an error or
 * wrong bytes). Host B is another process with its own handle and arena (tests/l3_hosts.c).
 * @grace_ms: the handles' visibility grace (a prefix entry naming a missing object younger than
 * that is kept: the index's rescans must not name the object again). */
static void index_follows(const char *tag, unsigned grace_ms)
{
	enum { REFRESH_MS = 200 };
	char sa[200], sb[200], why[512];
	h_visibility_ms = grace_ms;
	snprintf(sa, sizeof(sa), "%s/a", sdir);
	snprintf(sb, sizeof(sb), "%s/b", sdir);
	ck_assert_int_eq(mkdir(sa, 0700), 0);
	ck_assert_int_eq(mkdir(sb, 0700), 0);
	struct sc_l3 *init = host("hostA", 0); /* makes the directory */
	sc_l3_close(init);
	char an[64], bn[64];
	snprintf(an, sizeof(an), "%s", sc_test_name("l3shA"));
	snprintf(bn, sizeof(bn), "%s", sc_test_name("l3shB"));
	double lat;
	int rc = h_coherence(dir, dir, sa, sb, an, bn, REFRESH_MS, 0, &lat, why, sizeof(why));
	printf("location index (%s): another host's longer prefix visible after %.1f ms (refresh %u ms)\n", tag, lat,
	       REFRESH_MS);
	fflush(stdout);
	ck_assert_msg(rc == 0, "%s", why);
}

START_TEST(location_index_follows_the_other_host)
{
	index_follows("one local filesystem", 1);
}
END_TEST

/* the default grace (a network filesystem's): an evicted object's prefix entry outlives it */
START_TEST(location_index_follows_the_other_host_within_the_grace)
{
	index_follows("default grace", 0);
}
END_TEST

/* The inode of the per-host file of @store in sdir (0: none), found by its recorded path. */
static ino_t host_file_of(const char *store)
{
	char real[PATH_MAX], name[PATH_MAX + 200];
	if (!realpath(store, real))
		return 0;
	DIR *d = opendir(sdir);
	struct dirent *e;
	ino_t found = 0;
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "stagecache-l3.", 14))
			continue;
		snprintf(name, sizeof(name), "%s/%s", sdir, e->d_name);
		struct l3_state st;
		struct stat sb;
		int fd = open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
		if (fd >= 0 && fstat(fd, &sb) == 0 && pread(fd, &st, sizeof(st), 0) == (ssize_t)sizeof(st) &&
		    !strcmp(st.host.dir_path, real))
			found = sb.st_ino;
		if (fd >= 0)
			close(fd);
	}
	if (d)
		closedir(d);
	return found;
}

/* A per-host file as a store recorded it: @path on filesystem @dev, @mntns, owner @uid. */
static void plant_host_file(const char *name, const char *path, uint64_t dir_ino, uint64_t dev, uint64_t mntns,
			    uid_t uid)
{
	char p[PATH_MAX];
	struct l3_state st;
	memset(&st, 0, sizeof(st));
	st.magic = L3_STATE_MAGIC;
	st.version = L3_FORMAT_VERSION;
	st.size = sizeof(st);
	st.host.dir_ino = dir_ino;
	st.host.mntns = mntns;
	st.host.dir_dev = dev;
	snprintf(st.host.dir_path, sizeof(st.host.dir_path), "%s", path);
	snprintf(p, sizeof(p), "%s/%s", sdir, name);
	int fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, &st, sizeof(st)), (ssize_t)sizeof(st));
	ck_assert_int_eq(fchown(fd, uid, 0), 0);
	close(fd);
}

static int in_sdir(const char *name)
{
	char p[PATH_MAX];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/%s", sdir, name);
	return lstat(p, &sb) == 0;
}

START_TEST(per_host_files_of_removed_stores_are_removed)
{
	/* the per-host counters live in a host-local directory (/dev/shm by default): the file of a
	 * store that is gone is removed by the next open of any store there, once no handle holds it;
	 * a store made again at a removed one's path starts with counters of its own */
	char other[PATH_MAX], held[PATH_MAX], p[PATH_MAX];
	struct stat sb;
	snprintf(other, sizeof(other), "%s2", dir);
	snprintf(held, sizeof(held), "%s3", dir);
	struct sc_l3 *a = host("hostA", 0), *b, *c;
	ck_assert_int_eq(h_put(a, 1, 40, 5000), 0);
	ino_t mine = host_file_of(dir);
	ck_assert_uint_ne(mine, 0);
	ck_assert_int_eq(h_open(other, "hostA", 0, sdir, &b), 0);
	ck_assert_uint_ne(host_file_of(other), 0);
	sc_l3_close(b);
	ck_assert_int_eq(h_open(held, "hostA", 0, sdir, &c), 0); /* stays open */
	ck_assert_int_eq(h_count(sdir, "stagecache-l3."), 3);
	/* files a sweep must leave: another user's, another mount namespace's, one without a
	 * record, one of another filesystem, a link to a file elsewhere and a truncated one, all
	 * naming a missing directory */
	snprintf(p, sizeof(p), "%s/gone", sdir);
	stat("/proc/self/ns/mnt", &sb);
	uint64_t ns = (uint64_t)sb.st_ino;
	ck_assert_int_eq(stat(sdir, &sb), 0);
	uint64_t dev = (uint64_t)sb.st_dev; /* the stores' filesystem too */
	plant_host_file("stagecache-l3.00000000000000a1.state", p, 7, dev, ns, 65534);
	plant_host_file("stagecache-l3.00000000000000a2.state", p, 7, dev, ns + 1, 0);
	plant_host_file("stagecache-l3.00000000000000a3.state", p, 0, dev, ns, 0);
	plant_host_file("stagecache-l3.00000000000000a7.state", p, 7, dev + 1, ns, 0);
	plant_host_file("stagecache-l3.00000000000000a4.state", p, 7, dev, ns, 0); /* this one goes */
	char keep[PATH_MAX];
	snprintf(keep, sizeof(keep), "%s.keep", dir);
	ck_assert_int_eq(h_sh("echo kept > %s", keep), 0);
	snprintf(p, sizeof(p), "%s/stagecache-l3.00000000000000a5.state", sdir);
	ck_assert_int_eq(symlink(keep, p), 0);
	ck_assert_int_eq(h_sh("head -c 100 /dev/zero > %s/stagecache-l3.00000000000000a6.state", sdir), 0);
	sc_test_rm_tree(other);
	sc_test_rm_tree(held);
	struct sc_l3 *a2 = host("hostA", 0); /* another open of any store sweeps */
	ck_assert_uint_eq(host_file_of(dir), mine);
	ck_assert_int_eq(h_count(sdir, "stagecache-l3."), 7); /* mine, the held one, a1, a2, a3, a6, a7 */
	ck_assert(in_sdir("stagecache-l3.00000000000000a5.state"));
	ck_assert(!in_sdir("stagecache-l3.00000000000000a4.state"));
	ck_assert_int_eq(stat(keep, &sb), 0);
	sc_l3_close(c); /* the held one is free now: the next open removes it */
	sc_l3_close(a2);
	a2 = host("hostA", 0);
	ck_assert_int_eq(h_count(sdir, "stagecache-l3."), 6);
	sc_l3_close(a2);
	/* the store made again at its path: its own counters, in a new file */
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_stats(a, &st), 0);
	ck_assert_uint_eq(st.puts, 1);
	struct statx old_id, new_id;
	ck_assert_int_eq(statx(AT_FDCWD, dir, 0, STATX_INO | STATX_BTIME, &old_id), 0);
	sc_l3_close(a);
	sc_test_rm_tree(dir);
	a = host("hostA", 0);
	ck_assert_uint_ne(host_file_of(dir), 0);
	ck_assert_int_eq(statx(AT_FDCWD, dir, 0, STATX_INO | STATX_BTIME, &new_id), 0);
	ck_assert_int_eq(sc_l3_stats(a, &st), 0);
	if (new_id.stx_ino == old_id.stx_ino && !(new_id.stx_mask & STATX_BTIME))
		sc_skip("the directory made again got the removed one's inode number, and this filesystem "
			"keeps no birth time: the two cannot be told apart");
	else
		ck_assert_uint_eq(st.puts, 0);
	ck_assert_int_eq(h_count(sdir, "stagecache-l3."), 6);
	/* ... unless another handle still holds the old one: then it is used, recorded anew */
	mine = host_file_of(dir);
	b = host("hostA", 0);
	sc_l3_close(a);
	char moved[PATH_MAX];
	snprintf(moved, sizeof(moved), "%s.old", dir);
	ck_assert_int_eq(rename(dir, moved), 0);
	a = host("hostA", 0); /* a new store at the path while b holds the old file */
	ck_assert_uint_eq(host_file_of(dir), mine);
	sc_l3_close(a);
	sc_l3_close(b);
	sc_test_rm_tree(moved);
}
END_TEST

static Suite *l3_shared_suite(void)
{
	Suite *s = suite_create("l3_shared");
	TCase *tc = tcase_create("hosts");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, host_identity_is_validated);
	tcase_add_test(tc, shared_mode_is_sticky_with_per_host_counters);
	tcase_add_test(tc, temp_files_of_live_writers_survive_dead_ones_go);
	tcase_add_test(tc, janitor_lease_is_exclusive_and_taken_over);
	tcase_add_test(tc, janitor_that_lost_its_lease_cannot_act);
	tcase_add_test(tc, lru_order_counts_other_hosts_uses);
	tcase_add_test(tc, passes_without_a_budget_read_what_changed_not_the_store);
	tcase_add_test(tc, dangling_prefix_entries_dropped_live_ones_kept);
	tcase_add_test(tc, put_many_is_seen_by_the_other_host);
	tcase_add_test(tc, nothing_is_removed_on_a_missing_younger_than_the_grace);
	tcase_add_test(tc, regression_killed_put_left_an_unregistered_length);
	tcase_add_test(tc, corrupt_janitor_files_are_survived);
	tcase_add_test(tc, put_over_budget_runs_a_pass);
	tcase_add_test(tc, vanished_object_is_a_miss);
	tcase_add_test(tc, location_index_follows_the_other_host);
	tcase_add_test(tc, location_index_follows_the_other_host_within_the_grace);
	tcase_add_test(tc, per_host_files_of_removed_stores_are_removed);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(l3_shared_suite)
