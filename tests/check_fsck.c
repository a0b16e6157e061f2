/* tests/check_fsck.c — fault injection (sc_fault_arm, the list of points) and sc_arena_fsck. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../shm/evq.h"
#include "../shm/fault.h"
#include "../shm/heap.h"
#include "../shm/obs.h"
#include "../shm/ring.h"
#include <time.h>

/* ---- fault points ---- */

START_TEST(test_fault_points_list_is_complete)
{
	/* every shm_fault_point("...") in the sources is listed, and nothing else */
	sc_test_points_match_sources("shm_fault_point", sc_fault_points(), "fault point");
}
END_TEST

START_TEST(test_fault_arm_bad_specs)
{
	ck_assert_int_eq(sc_fault_arm("x@0"), -EINVAL);
	ck_assert_int_eq(sc_fault_arm("x@abc"), -EINVAL);
	ck_assert_int_eq(sc_fault_arm("@3"), -EINVAL);
	ck_assert_int_eq(sc_fault_arm(NULL), 0);
	ck_assert_int_eq(sc_fault_arm(""), 0);
	ck_assert_int_eq(sc_fault_arm("heap.alloc.done@2"), 0);
	/* a name of 63 characters is the longest the hook keeps (with its NUL, 64 bytes) */
	char name[80];
	memset(name, 'n', sizeof(name));
	strcpy(name + 63, "@1");
	ck_assert_int_eq(sc_fault_arm(name), 0);
	name[63] = 'n';
	strcpy(name + 64, "@1"); /* 64 */
	ck_assert_int_eq(sc_fault_arm(name), -EINVAL);
	ck_assert_int_eq(sc_fault_arm("x@2y"), -EINVAL);                     /* trailing characters */
	ck_assert_int_eq(sc_fault_arm("x@99999999999999999999999999"), -EINVAL); /* out of range */
	ck_assert_int_eq(sc_fault_arm(NULL), 0);
}
END_TEST

/* In a forked child: arm @spec through sc_fault_arm (or, with @env, through SC_FAULT read at the
 * first point reached), then arm @spec2 (a malformed spec, or "": disarm), then hit "t.count"
 * @hits times, with near-miss names between; its end. */
static int fault_child(const char *spec, int env, const char *spec2, int hits, int *reached)
{
	int fd[2];
	ck_assert_int_eq(pipe(fd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fd[0]);
		if (env) {
			setenv("SC_FAULT", spec, 1);
			atomic_store(&shm_fault_state, -1); /* as in a process that has not read it yet */
		} else if (sc_fault_arm(spec)) {
			_exit(3);
		}
		if (spec2 && sc_fault_arm(*spec2 ? spec2 : NULL) != (*spec2 ? -EINVAL : 0))
			_exit(4);
		for (int i = 0; i < hits; i++) {
			shm_fault_point("t.coun"); /* as the library reaches a point */
			shm_fault_point("t.countx");
			shm_fault_point("other");
			unsigned char k = (unsigned char)i;
			if (write(fd[1], &k, 1) != 1)
				_exit(5);
			shm_fault_point("t.count");
		}
		_exit(0);
	}
	close(fd[1]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	unsigned char k;
	*reached = 0;
	while (read(fd[0], &k, 1) == 1)
		(*reached)++;
	close(fd[0]);
	return st;
}

/* "name@N" kills at the N-th time the process reaches that very point (not at other names, not
 * before), SC_FAULT likewise; a malformed spec, by either way, leaves nothing armed. */
START_TEST(test_fault_points_kill_at_the_nth_hit)
{
	int reached;
	int st = fault_child("t.count@3", 0, NULL, 5, &reached);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && reached == 3, "status %#x after %d hits", st, reached);
	st = fault_child("t.count", 0, NULL, 5, &reached);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && reached == 1, "status %#x after %d hits", st, reached);
	st = fault_child("t.count@2", 1, NULL, 5, &reached);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && reached == 2, "SC_FAULT: status %#x after %d hits", st,
		      reached);
	/* a refused spec replaces what was armed with nothing */
	st = fault_child("t.count@2", 0, "t.count@0", 5, &reached);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && reached == 5, "status %#x after %d hits", st, reached);
	/* disarmed before the first point: SC_FAULT is not read any more */
	st = fault_child("t.count", 1, "", 5, &reached);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && reached == 5, "disarmed SC_FAULT: status %#x after %d hits",
		      st, reached);
	st = fault_child("t.count@0", 1, NULL, 5, &reached);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && reached == 5, "malformed SC_FAULT: status %#x after %d hits",
		      st, reached);
	st = fault_child("t.count@x", 1, NULL, 5, &reached);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && reached == 5, "malformed SC_FAULT: status %#x after %d hits",
		      st, reached);
}
END_TEST

/* The fast path reads the state, the slow path reads it again: another thread may disarm in
 * between. A slow path that finds nothing armed neither fires the name armed before (its name and
 * count are still stored) nor reads SC_FAULT again. Called directly, as that thread would. */
START_TEST(test_fault_slow_path_after_a_disarm)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("SC_FAULT", "t.count", 1);
		if (sc_fault_arm("t.count@2") || sc_fault_arm(NULL))
			_exit(3);
		for (int i = 0; i < 3; i++)
			shm_fault_hit("t.count");
		_exit(atomic_load(&shm_fault_state) == 0 ? 0 : 4);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "slow path with nothing armed: status %#x (signal 9: the disarmed point fired; exit 3 setup, 4 re-armed)", st);
}
END_TEST

/* A pid namespace's init (pid 1) is immune to its own SIGKILL: a fault point there ends it as
 * abruptly with _exit, status 128 + SIGKILL, instead of leaving it paused for ever. */
START_TEST(test_fault_point_in_a_pid_namespace_init)
{
	if (geteuid() != 0) {
		sc_skip("a pid namespace needs root (unshare)");
		return;
	}
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		if (unshare(CLONE_NEWPID))
			_exit(10);
		pid_t g = fork();
		if (g < 0)
			_exit(11);
		if (g == 0) {
			if (getpid() != 1 || sc_fault_arm("t.init"))
				_exit(12);
			shm_fault_point("t.init");
			_exit(0);
		}
		/* waits for pid 1's end (its pidfd becomes readable), 10 s at most, then kills it from
		 * outside its namespace */
		int pfd = (int)syscall(SYS_pidfd_open, g, 0), st = 0;
		struct pollfd pw = { .fd = pfd, .events = POLLIN };
		if (pfd < 0 || poll(&pw, 1, 10000) != 1) {
			kill(g, SIGKILL);
			waitpid(g, &st, 0);
			_exit(pfd < 0 ? 10 : 13); /* no pidfd here; or it did not end: paused */
		}
		waitpid(g, &st, 0);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st));
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 10) {
		sc_skip("a fault point in a pid namespace's init: no pid namespace of our own here (CAP_SYS_ADMIN), or no pidfd");
		return;
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGKILL,
		      "pid 1 at an armed point: %s %d (10 unshare or pidfd, 11 fork, 12 setup, 13 paused, 100+ a signal)",
		      WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}
END_TEST

/* An arena for a test (@o: NULL for 32 MiB of defaults) and a stage in it. */
static struct sc_stage *fsck_arena(const char *tag, struct sc_arena_opts *o, struct sc_arena **a, const char **name)
{
	struct sc_arena_opts d = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF };
	*a = sc_test_arena_opts(tag, o ? o : &d, name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(*a, "m", "s", &st), 0);
	return st;
}

static void fsck_arena_close(struct sc_arena *a, struct sc_stage *st, const char *name)
{
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}

static void admit_one(struct sc_stage *st, int32_t tok, size_t len, uint8_t fill)
{
	uint8_t *buf = malloc(len);
	memset(buf, fill, len);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf, NULL }, .sec_len = { len, 0 } };
	int32_t tokens[2] = { tok, tok + 1 };
	ck_assert_int_eq(sc_l2_admit(st, "ns", tokens, 2, sc_digest(buf, len), &p, SC_ORIGIN_DIRECT), 0);
	free(buf);
}

START_TEST(test_armed_point_kills_and_fsck_repairs)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fault", NULL, &a, &name);
	admit_one(st, 1, 100000, 1);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *b;
		struct sc_stage *s2;
		if (sc_arena_open(name, &b) || sc_stage_open(b, "m", "s", &s2))
			_exit(2);
		sc_fault_arm("l2.admit.linked");
		admit_one(s2, 5, 200000, 5);
		_exit(0); /* not reached: the point kills us */
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* the next writer repairs; fsck then finds the arena consistent */
	admit_one(st, 9, 50000, 9);
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR | SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.leaked_bytes, 0);
	ck_assert_uint_ge(r.entries, 2);
	ck_assert_uint_eq(r.digest_failures, 0);
	ck_assert_uint_ge(r.lock_repairs, 1);
	fsck_arena_close(a, st, name);
}
END_TEST

/* ---- fsck ---- */

struct seen {
	int n;
	char last[256];
	char comp[32];
};

static void on_finding(const char *component, const char *message, int repaired, void *ctx)
{
	(void)repaired;
	struct seen *s = ctx;
	s->n++;
	snprintf(s->last, sizeof(s->last), "%s", message);
	snprintf(s->comp, sizeof(s->comp), "%s", component);
}

/* Counts the findings whose message holds @text. */
START_TEST(test_fsck_clean_and_bad_args)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsck0", NULL, &a, &name);
	for (int i = 0; i < 20; i++)
		admit_one(st, i * 10, 1000 + (size_t)i * 5000, (uint8_t)i);
	struct sc_fsck_report r;
	struct seen s = { 0 };
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, on_finding, &s, &r), 0);
	ck_assert_int_eq(s.n, 0);
	ck_assert_uint_eq(r.entries, 20);
	ck_assert_uint_eq(r.digests_checked, 20);
	ck_assert_uint_eq(r.heap_used_bytes, r.entry_bytes);
	ck_assert_uint_eq(r.rings, 16);
	ck_assert_int_eq(sc_arena_fsck(NULL, 0, NULL, NULL, &r), -EINVAL);
	ck_assert_int_eq(sc_arena_fsck(a, 0x80, NULL, NULL, &r), -EINVAL);
	/* a forked child's copy of the handle: refused, nothing repaired with the parent's locks */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r) == -ECHILD ? 0 : 1);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fsck in a forked child: status %#x", status);
	fsck_arena_close(a, st, name);
}
END_TEST

START_TEST(test_fsck_leaked_block)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("fsck1", 32 << 20, &name);
	uint64_t off;
	ck_assert_int_eq(shm_heap_alloc(a->shm, 12345, 0x1234, &off), 0); /* owned by nothing */
	struct sc_fsck_report r;
	struct seen s = { 0 };
	ck_assert_int_eq(sc_arena_fsck(a, 0, on_finding, &s, &r), 1);
	ck_assert_uint_ge(r.leaked_bytes, 12345);
	ck_assert_str_eq(s.comp, "heap");
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.repaired, 1);
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.leaked_bytes, 0);
	ck_assert_uint_eq(r.heap_used_bytes, 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_fsck_deep_digest_failure)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsck2", NULL, &a, &name);
	admit_one(st, 1, 4096, 7);
	admit_one(st, 3, 4096, 8);
	int32_t tokens[2] = { 1, 2 };
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "ns", tokens, 2, NULL, &l), 0);
	((uint8_t *)l.sec[0])[100] ^= 1; /* scribble on the published payload */
	sc_lease_release(&l);
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0); /* not deep: unseen */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 1);
	ck_assert_uint_eq(r.digest_failures, 1);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP | SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.dropped, 1);
	ck_assert_int_eq(sc_l2_get(st, "ns", tokens, 2, NULL, &l), -ENOENT); /* never served again */
	tokens[0] = 3;
	tokens[1] = 4;
	ck_assert_int_eq(sc_l2_get(st, "ns", tokens, 2, NULL, &l), 0); /* the other one is intact */
	sc_lease_release(&l);
	struct seen s9 = { 0 }; int rr = sc_arena_fsck(a, SC_FSCK_DEEP, on_finding, &s9, &r); ck_assert_msg(rr == 0, "%s: %s", s9.comp, s9.last);
	fsck_arena_close(a, st, name);
}
END_TEST

/* A process that attaches to arena @name, takes a lease on the entry of tokens { 1, 2 } or reserves
 * 100 000 bytes, and is killed (SIGKILL) holding it; returns once it is reaped. */
enum { HOLD_LEASE, HOLD_RESERVATION };

static void killed_holder(const char *name, int what)
{
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *b;
		struct sc_stage *s2;
		struct sc_lease l;
		struct sc_l2_resv rv;
		int32_t tokens[2] = { 1, 2 };
		if (sc_arena_open(name, &b) || sc_stage_open(b, "m", "s", &s2) ||
		    (what == HOLD_LEASE ? sc_l2_get(s2, "ns", tokens, 2, NULL, &l) : sc_l2_reserve(s2, 100000, &rv)))
			_exit(2);
		if (write(ready[1], "x", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	char c;
	ck_assert_int_eq(read(ready[0], &c, 1), 1); /* it holds it */
	close(ready[0]), close(ready[1]);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

START_TEST(test_fsck_dead_reader_with_lease)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsck3", NULL, &a, &name);
	admit_one(st, 1, 8192, 1);
	killed_holder(name, HOLD_LEASE); /* a lease on the entry of tokens { 1, 2 } */
	struct sc_fsck_report r;
	struct seen s = { 0 };
	ck_assert_int_eq(sc_arena_fsck(a, 0, on_finding, &s, &r), 1);
	ck_assert_uint_eq(r.readers_dead, 1);
	ck_assert_str_eq(s.comp, "readers");
	ck_assert(strstr(s.last, "1 leases held") != NULL);
	/* a check changes nothing: the next one finds the same */
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 1);
	ck_assert_uint_eq(r.readers_dead, 1);
	/* repaired through a handle that never used L2, as `stagecache fsck` and stress's closing
	 * check do (its reap once swept an index view it had not set up) */
	struct sc_arena *fresh;
	ck_assert_int_eq(sc_arena_open(name, &fresh), 0);
	ck_assert_int_eq(sc_arena_fsck(fresh, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	sc_arena_close(fresh);
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.readers_dead, 0);
	fsck_arena_close(a, st, name);
}
END_TEST

START_TEST(test_fsck_hostile_index)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsck4", NULL, &a, &name);
	for (int i = 0; i < 8; i++)
		admit_one(st, i * 10, 2048, (uint8_t)i);
	struct shm_index *ix = l2_ix(a);
	/* buckets pointing outside the entry table (just past it, and far past the arena), and a
	 * shard's pending count that lies */
	uint32_t b = 0;
	while (atomic_load(&ix->buckets[b]) != 0)
		b++;
	atomic_store(&ix->buckets[b], ix->nentries + 1000);
	uint32_t far = b + 1;
	while (atomic_load(&ix->buckets[far]) != 0 || far % SHM_INDEX_SHARDS == b % SHM_INDEX_SHARDS)
		far++;
	atomic_store(&ix->buckets[far], 0xfffffff0u); /* far outside the arena: never read */
	ix->hdr->shards[3].pending_bytes = 999;
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 3);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.repaired, 3);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 8); /* nothing that was stored was lost */
	fsck_arena_close(a, st, name);
}
END_TEST

/* An observation with flags no writer sets: a check names the slot and changes nothing (the
 * observation is still there); a repair formats the table again (observations forgotten, the arena
 * not declared damaged), after which it is clean and promotion observes again. The header's magic
 * scribbled: the same. */
START_TEST(fsck_reformats_an_observation_table_only_when_repairing)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("fsckobsf", 32 << 20, &name);
	struct sc_digest d = { 1, 2 };
	for (int k = 0; k < 2; k++) {
		ck_assert_int_ge(sc_promote_consider(a, 7, d, 10, 1000, NULL), 0);
		struct shm_obs_hdr *h = shm_obs_table(a->shm);
		ck_assert_ptr_nonnull(h);
		ck_assert_uint_eq(h->count, 1);
		struct shm_obs_entry *e = shm_obs_entries(h);
		uint32_t i = 0;
		while (i < h->slots && !e[i].flags)
			i++;
		ck_assert_uint_lt(i, h->slots);
		uint64_t magic = h->magic;
		if (k == 0)
			e[i].flags |= 0x80000000u;
		else
			h->magic ^= 0x5a5a;
		struct sc_fsck_report r;
		struct sc_test_wanted w = { .text = k == 0 ? "unknown flags" : "header is corrupted" };
		ck_assert_int_eq(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 1);
		ck_assert_int_eq(w.hits, 1);
		ck_assert_uint_eq(e[i].flags & 0x80000000u, (k == 0 ? 0x80000000u : 0)); /* a check changes nothing */
		ck_assert_uint_eq(h->count, 1);
		ck_assert_uint_eq(h->magic, (k == 0 ? magic : magic ^ 0x5a5a));
		ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
		ck_assert_uint_eq(r.repaired, 1);
		ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
		ck_assert_uint_eq(r.observations, 0);
		h = shm_obs_table(a->shm);
		ck_assert_ptr_nonnull(h);
		ck_assert_uint_eq(h->count, 0);
	}
	/* not declared damaged: a new handle opens it, and observations are made again */
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	ck_assert_int_ge(sc_promote_consider(b, 7, d, 10, 1000, NULL), 0);
	ck_assert_uint_eq(shm_obs_table(b->shm)->count, 1);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_fsck_observation_count)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("fsck5", 32 << 20, &name);
	struct sc_digest d = { 1, 2 };
	ck_assert_int_ge(sc_promote_consider(a, 7, d, 10, 1000, NULL), 0);
	struct shm_obs_hdr *h = shm_obs_table(a->shm);
	ck_assert_ptr_nonnull(h);
	h->count = 5;
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 1);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.observations, 1);
	/* its lock's magic scribbled: the table is not read, and the finding says why */
	uint32_t magic = h->mu.magic;
	h->mu.magic = 0x12345678;
	struct sc_test_wanted w = { .text = "cannot lock the observation table (corrupted lock)" };
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 0);
	ck_assert_int_eq(w.hits, 1);
	ck_assert_uint_eq(r.obs_problems, 1);
	h->mu.magic = magic;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	/* a fill claim held (ours: alive), made at a time whose high word has bits no observation's
	 * flags have (about 3 days of uptime): the claims that follow the slots are not slots */
	ck_assert_int_eq(sc_fill_claim(a, 7, d), 0);
	struct shm_obs_claim *c = shm_obs_claims(h);
	ck_assert(c[0].owner != 0);
	c[0].claimed_ns = 0x10001ull << 32;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.observations, 1);
	ck_assert_int_eq(sc_fill_release(a, 7, d), 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_fsck_corrupted_header)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("fsck6", 32 << 20, &name);
	a->shm->hdr->regions[SHM_REGION_HEAP].size = a->shm->size * 2;
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 1);
	/* the copy validated at attach is the truth: the shared header is rewritten from it */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.problems, 1);
	ck_assert_uint_eq(r.repaired, 1);
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	sc_arena_close(b);
	/* another identity written whole, with its own valid checksum (another secret): new opens
	 * would key everything differently, so it is found and rewritten from the copy too */
	struct shm_header *h = a->shm->hdr;
	uint8_t secret0 = h->key_secret[0];
	h->key_secret[0] ^= 0x5a;
	h->header_check = shm_header_checksum(h);
	ck_assert_int_eq(shm_header_check(h, a->shm->size), 0);
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 1);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(h->key_secret[0], secret0);
	ck_assert_int_eq(shm_header_check(h, a->shm->size), 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- fsck sees everything a reader or writer validates, and converges ---- */

static int count_cb(const struct sc_commit *c, void *ctx)
{
	(void)c;
	(*(int *)ctx)++;
	return 0;
}

/* Rings fsck must find consistent: one full to the last byte (tail - head = its size), and one
 * whose producer closed it with records undelivered; the consumer then reads every record. Then
 * what it must not: a head more than the size behind the tail, a scribbled ring directory (left as
 * it is by a check, rewritten by the repair). */
START_TEST(fsck_accepts_a_full_ring_and_a_closed_one)
{
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF, .ring_bytes = 4096 };
	struct sc_arena *a = sc_test_arena_opts("fsckfull", &o, &name);
	struct sc_ring *full, *closed;
	ck_assert_int_eq(sc_ring_open(a, &full), 0);
	ck_assert_int_eq(sc_ring_open(a, &closed), 0);
	int32_t tk[4] = { 1, 2, 3, 4 };
	int n = 0, rc;
	do {
		struct sc_commit c = { .request_id = 1, .session_id = 1, .generated_token_count = 4u * (n + 1),
				       .token_count = 4, .tokens = tk };
		rc = sc_ring_try_submit(full, &c);
		n += rc == 0;
	} while (rc == 0 && n < 10000);
	ck_assert_int_eq(rc, -EAGAIN);
	struct shm_ring_stat st;
	ck_assert_int_eq(shm_ring_stat(a->shm, sc_ring_index(full), &st), 0);
	ck_assert_uint_eq(st.tail - st.head, 4096); /* full to the last byte */
	for (int i = 0; i < 3; i++) {
		struct sc_commit c = { .request_id = 2, .session_id = 2, .generated_token_count = 4u * (i + 1),
				       .token_count = 4, .tokens = tk };
		ck_assert_int_eq(sc_ring_try_submit(closed, &c), 0);
	}
	sc_ring_close(closed);
	struct sc_fsck_report rep;
	struct seen sn = { 0 };
	rc = sc_arena_fsck(a, SC_FSCK_DEEP, on_finding, &sn, &rep);
	ck_assert_msg(rc == 0, "fsck: %d (%s: %s)", rc, sn.comp, sn.last);
	ck_assert_uint_eq(rep.ring_problems, 0);
	struct sc_arena *b; /* the consumer */
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	int got = 0;
	while ((rc = sc_ring_poll(b, count_cb, &got, 64)) > 0)
		;
	ck_assert_int_ge(rc, 0);
	ck_assert_int_eq(got, n + 3);
	sc_ring_consumer_close(b);
	sc_arena_close(b);
	/* a head more than the ring's size behind its tail (each a record boundary): impossible */
	struct shm_ring_dir *d = shm_region(a->shm, SHM_REGION_RINGS, NULL);
	struct shm_ring_ctl *ctl = (struct shm_ring_ctl *)((uint8_t *)d + SHM_RING_DIR_BYTES +
							   (uint64_t)sc_ring_index(full) * SHM_RING_CTL_BYTES);
	uint64_t head = atomic_load(&ctl->head);
	ck_assert_uint_ge(head, 4096);
	atomic_store(&ctl->head, head - 4096 - 64);
	struct sc_test_wanted w = { .text = "its indices are impossible" };
	ck_assert_int_eq(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &rep), 1);
	ck_assert_int_eq(w.hits, 1);
	atomic_store(&ctl->head, head);
	/* the ring directory's geometry scribbled: a check reports it and leaves it, the repair
	 * writes it again */
	uint32_t bytes = d->ring_bytes;
	d->ring_bytes = 12345;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &rep), 1);
	ck_assert_uint_eq(d->ring_bytes, 12345);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(d->ring_bytes, bytes);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	sc_ring_close(full);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Defect 6: a malformed record stops the consumer (sc_ring_poll: -EBADMSG), and fsck --deep
 * called the arena clean. */
START_TEST(regression_fsck_sees_a_corrupt_ring_record)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("fsckring", 32 << 20, &name);
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(a, &r), 0);
	int32_t tk[4] = { 1, 2, 3, 4 };
	for (int i = 0; i < 5; i++) {
		struct sc_commit c = { .request_id = 1, .session_id = 1, .generated_token_count = 4u * (i + 1),
				       .token_count = 4, .tokens = tk };
		ck_assert_int_eq(sc_ring_try_submit(r, &c), 0);
	}
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &rep), 0); /* five undelivered: consistent */
	uint32_t ring = sc_ring_index(r);
	struct shm_ring_dir *d = shm_region(a->shm, SHM_REGION_RINGS, NULL);
	uint8_t *data = (uint8_t *)d + shm_ring_data_off(a->shm->hv.ring_count) + (uint64_t)ring * a->shm->hv.ring_bytes;
	struct shm_ring_rec *rec = (struct shm_ring_rec *)(data + 128); /* the third record (64 bytes each) */
	atomic_store(&rec->len, 7);
	struct sc_arena *b; /* the consumer: another handle */
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	int n = 0;
	ck_assert_int_eq(sc_ring_poll(b, count_cb, &n, 64), -EBADMSG);
	sc_ring_consumer_close(b);
	struct seen s = { 0 };
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, on_finding, &s, &rep), 1);
	ck_assert_uint_eq(rep.ring_problems, 1);
	ck_assert_str_eq(s.comp, "rings");
	ck_assert_msg(strstr(s.last, "a malformed record at position 128 "), "%s", s.last);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP | SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	/* the consumer goes on: the producer's next commits are delivered */
	struct sc_commit c = { .request_id = 2, .session_id = 1, .generated_token_count = 4, .token_count = 4, .tokens = tk };
	ck_assert_int_eq(sc_ring_try_submit(r, &c), 0);
	n = 0;
	ck_assert_int_eq(sc_ring_poll(b, count_cb, &n, 64), 1);
	/* a repair through the consumer's own handle leaves it the consumer (it found the lock its own
	 * and must not give it up) */
	struct shm_ring_ctl *rc = (struct shm_ring_ctl *)((uint8_t *)d + SHM_RING_DIR_BYTES + (uint64_t)ring * SHM_RING_CTL_BYTES);
	uint64_t at = atomic_load(&rc->tail);
	ck_assert_int_eq(sc_ring_try_submit(r, &c), 0);
	atomic_store(&((struct shm_ring_rec *)(data + (at & (a->shm->hv.ring_bytes - 1))))->len, 7);
	ck_assert_int_eq(sc_arena_fsck(b, SC_FSCK_DEEP | SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(atomic_load(&d->consumer_id), b->shm->token);
	sc_ring_consumer_close(b);
	ck_assert_uint_eq(atomic_load(&d->consumer_id), 0);
	/* a tail that is not a record boundary, its producer alive: only the producer writes tail, so
	 * the repair waits for it (reported, nothing changed) */
	struct shm_ring_ctl *ctl = (struct shm_ring_ctl *)((uint8_t *)d + SHM_RING_DIR_BYTES + (uint64_t)ring * SHM_RING_CTL_BYTES);
	uint64_t tail = atomic_load(&ctl->tail);
	atomic_store(&ctl->tail, tail + 8);
	struct sc_test_wanted w = { .text = "its indices are impossible; not repaired: its producer is running" };
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, sc_test_on_wanted, &w, &rep), 1);
	ck_assert_int_eq(w.hits, 1);
	ck_assert_uint_eq(atomic_load(&ctl->tail), tail + 8);
	atomic_store(&ctl->tail, tail); /* the producer publishes a good one */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	/* with no live producer (it closed the ring) the repair rounds the tail up to the next record
	 * boundary itself, and drops what was undelivered */
	struct sc_commit c2 = { .request_id = 3, .session_id = 1, .generated_token_count = 4, .token_count = 4, .tokens = tk };
	ck_assert_int_eq(sc_ring_try_submit(r, &c2), 0);
	sc_ring_close(r);
	r = NULL;
	tail = atomic_load(&ctl->tail);
	atomic_store(&ctl->tail, tail - 8);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(atomic_load(&ctl->tail), tail);
	ck_assert_uint_eq(atomic_load(&ctl->head), tail);
	ck_assert_uint_eq(shm_ring_owner_state(atomic_load(&ctl->owner)), SHM_RING_CLOSED); /* still its producer's */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

static void admit_n(struct sc_stage *st, int n)
{
	for (int i = 0; i < n; i++)
		admit_one(st, i * 10, 1000 + (size_t)i * 97, (uint8_t)i);
}

/* A put and a get of a fresh entry work (the arena is usable). */
static void round_trip_works(struct sc_stage *st)
{
	static uint8_t buf[7777];
	memset(buf, 0x42, sizeof(buf));
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	int32_t t[3] = { 777, 778, 779 };
	ck_assert_int_eq(sc_l2_admit(st, "rt", t, 3, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "rt", t, 3, NULL, &l), 0);
	ck_assert_uint_eq(l.sec_len[0], sizeof(buf));
	ck_assert_int_eq(memcmp(l.sec[0], buf, sizeof(buf)), 0);
	sc_lease_release(&l);
}

/* Defect 7: after a sparse scribble of the index, repairs did not converge ("unknown state
 * 1715105", "heap block missing or tagged for another owner" left after every repair), and a
 * scribbled repair counter was printed as is. */
START_TEST(regression_fsck_repair_converges_after_index_scribble)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckconv", NULL, &a, &name);
	admit_n(st, 40);
	struct shm_index *ix = l2_ix(a);
	int garbage = 0, moved = 0;
	for (uint32_t i = 0; i < ix->nentries; i++) {
		struct shm_index_entry *e = &ix->ent[i];
		if (atomic_load(&e->state) != SHM_ENT_LIVE)
			continue;
		if (garbage < 10) {
			atomic_store(&e->state, 1715105u + (uint32_t)garbage);
			garbage++;
		} else if (moved < 10) {
			e->payload_off += 64 * (moved + 1); /* a block that is not its own */
			moved++;
		}
	}
	ix->hdr->shards[3].repairs = 3775213858u;
	struct sc_fsck_report r;
	ck_assert_int_ge(sc_arena_fsck(a, 0, NULL, NULL, &r), 21);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_lt(r.lock_repairs, 1000);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 20); /* the 20 good entries are all still there */
	ck_assert_uint_eq(r.digest_failures, 0);
	round_trip_works(st);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	fsck_arena_close(a, st, name);
}
END_TEST

/* The bytes of a region past its table (up to the region's page) belong to nothing: hostile bytes
 * there are never read as an index entry or a fill claim, nor shaped as the owner of a heap block
 * tagged for the entry one past the table's end. A check reports nothing of them, a repair leaves
 * them as they are. (1500 entries: the index region ends in slack; the claims end the observation
 * region, whose size is never a whole number of pages.) */
START_TEST(fsck_reads_nothing_past_its_tables)
{
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF, .index_entries = 1500 };
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckpast", &o, &a, &name);
	admit_n(st, 40);
	struct shm_index *ix = l2_ix(a);
	uint64_t isize, osize;
	uint8_t *ireg = shm_region(a->shm, SHM_REGION_INDEX, &isize);
	struct shm_obs_hdr *h = shm_region(a->shm, SHM_REGION_OBS, &osize);
	uint8_t *ipast = (uint8_t *)&ix->ent[ix->nentries], *opast = (uint8_t *)(shm_obs_claims(h) + h->claims);
	size_t islack = (size_t)(ireg + isize - ipast), oslack = (size_t)((uint8_t *)h + osize - opast);
	ck_assert_uint_ge(islack, sizeof(struct shm_index_entry));
	ck_assert_uint_ge(oslack, sizeof(struct shm_obs_claim));
	memset(ipast, 0xa5, islack);
	memset(opast, 0xa5, oslack);
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.problems, 0);
	for (size_t k = 0; k < islack; k++)
		ck_assert_uint_eq(ipast[k], 0xa5);
	for (size_t k = 0; k < oslack; k++)
		ck_assert_uint_eq(opast[k], 0xa5);

	/* a live entry's block tagged for entry 1500, and the slack shaped as that entry owning it */
	uint32_t victim = UINT32_MAX;
	for (uint32_t i = 0; i < ix->nentries && victim == UINT32_MAX; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE)
			victim = i;
	ck_assert_uint_ne(victim, UINT32_MAX);
	struct shm_index_entry *past = (struct shm_index_entry *)ipast;
	memset(past, 0, sizeof(*past));
	past->gen = ix->ent[victim].gen;
	past->payload_off = ix->ent[victim].payload_off;
	past->footprint = ix->ent[victim].footprint;
	atomic_store(&past->state, SHM_ENT_LIVE);
	struct shm_index_entry copy = *past;
	ck_assert_int_eq(shm_heap_set_tag(a->shm, past->payload_off, shm_tag_entry(ix->nentries, past->gen)), 0);
	struct sc_test_wanted w = { .text = "is owned by nothing" };
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 0);
	ck_assert_int_eq(w.hits, 1);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 39); /* the victim lost its block; the other 39 are intact */
	ck_assert_int_eq(memcmp(past, &copy, sizeof(copy)), 0);
	round_trip_works(st);
	fsck_arena_close(a, st, name);
}
END_TEST

/* A live entry cut out of its bucket's chain (as a writer killed between unlinking and retiring
 * leaves it): one finding; the repair's shard rebuild retires it, and the pending bytes the
 * rebuild counts are not judged against the pass's own count from before it (one finding in all,
 * repaired; the entry's bytes stay pending until reclaimed, then freed). */
START_TEST(fsck_retires_an_unreachable_entry_in_one_finding)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckunr", NULL, &a, &name);
	admit_n(st, 12);
	struct shm_index *ix = l2_ix(a);
	uint32_t b = 0, head = 0;
	for (; b <= ix->mask && !head; b++)
		head = atomic_load(&ix->buckets[b]);
	ck_assert_uint_ne(head, 0);
	uint64_t fp = ix->ent[head - 1].footprint;
	atomic_store(&ix->buckets[b - 1], atomic_load(&ix->ent[head - 1].next));
	struct sc_fsck_report r;
	struct sc_test_wanted w = { .text = "live but not reachable" };
	ck_assert_int_eq(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 1);
	ck_assert_int_eq(w.hits, 1);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.problems, 1);
	ck_assert_uint_eq(r.repaired, 1);
	ck_assert_uint_eq(r.entries, 11);
	ck_assert_uint_gt(r.pending_bytes, 0); /* (heap block bytes, without their headers) */
	ck_assert_uint_eq(ix->hdr->shards[(head - 1) % SHM_INDEX_SHARDS].pending_bytes, fp);
	l2_reclaim_all(a, -1); /* nobody reads: the retired entry's block is freed */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.pending_bytes, 0);
	ck_assert_uint_eq(r.leaked_bytes, 0);
	round_trip_works(st);
	fsck_arena_close(a, st, name);
}
END_TEST

/* The index header scribbled (a bucket count no arena has, a shard's free list lost): fsck reports
 * the header (the index cannot be read through it), the repair writes it again from the arena's
 * parameters (for an entry count that is a power of two and one that is not) and rebuilds the
 * shards' lists in the same pass; every stored entry is found again, and every shard admits. */
START_TEST(fsck_rewrites_a_scribbled_index_header)
{
	static const uint32_t counts[2] = { 2048, 1500 };
	for (int k = 0; k < 2; k++) {
		const char *name;
		struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF, .index_entries = counts[k] };
		struct sc_arena *a;
		struct sc_stage *st = fsck_arena("fsckixh", &o, &a, &name);
		admit_n(st, 20);
		struct shm_index *ix = l2_ix(a);
		ck_assert_uint_eq(ix->nentries, counts[k]);
		uint32_t nb = ix->hdr->nbuckets;
		ck_assert_uint_eq(nb, 2048); /* the next power of two */
		ix->hdr->nbuckets = 7;
		ix->hdr->shards[5].free_head = 0; /* the same scribble lost a shard's free list */
		struct sc_fsck_report r;
		struct seen sn = { 0 };
		ck_assert_int_eq(sc_arena_fsck(a, 0, on_finding, &sn, &r), 1);
		ck_assert_str_eq(sn.comp, "index");
		ck_assert_uint_eq(ix->hdr->nbuckets, 7); /* a check changes nothing */
		ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
		ck_assert_uint_eq(r.repaired, 1);
		ck_assert_uint_eq(ix->hdr->nbuckets, nb);
		ck_assert_uint_eq(atomic_load(&a->shm->hdr->damaged), 0); /* not declared unrepairable */
		ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
		ck_assert_uint_eq(r.entries, 20); /* nothing that was stored was lost */
		for (int i = 0; i < 20; i++) {
			int32_t t[2] = { i * 10, i * 10 + 1 };
			struct sc_lease l;
			ck_assert_int_eq(sc_l2_get(st, "ns", t, 2, NULL, &l), 0);
			ck_assert_uint_eq(l.sec_len[0], 1000 + (size_t)i * 97);
			sc_lease_release(&l);
		}
		round_trip_works(st);
		admit_n(st, 60); /* every shard admits again */
		ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
		fsck_arena_close(a, st, name);
	}
}
END_TEST

/* A cycle in the free list of a shard whose entries are all free (a fresh arena): the walk of the
 * list goes on past the shard's entry count, so the cycle is found and the list rebuilt; so are a
 * link out of such a list, a list of the right length through another shard's entry, a head far
 * out of range, and a retired entry lost from its pending list; then every entry admits. */
START_TEST(fsck_finds_a_cycle_in_a_wholly_free_shard)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckcyc", NULL, &a, &name);
	struct shm_index *ix = l2_ix(a);
	struct shm_index_shard *sh = &ix->hdr->shards[2];
	uint32_t head = sh->free_head, cur = head;
	ck_assert_uint_ne(head, 0);
	for (int i = 0; i < 3; i++) /* the third entry's successor: the head again */
		cur = ix->ent[cur - 1].link;
	ix->ent[cur - 1].link = head;
	struct sc_fsck_report r;
	struct seen sn = { 0 };
	ck_assert_int_eq(sc_arena_fsck(a, 0, on_finding, &sn, &r), 1);
	ck_assert_msg(strstr(sn.last, "shard 2:"), "%s", sn.last);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	/* a link out of the list (to an entry of another shard) in a wholly free shard: broken too */
	struct shm_index_shard *sh7 = &ix->hdr->shards[7];
	cur = sh7->free_head;
	for (int i = 0; i < 3; i++)
		cur = ix->ent[cur - 1].link;
	ix->ent[cur - 1].link = 8 + 1; /* entry 8: shard 8's */
	sn = (struct seen){ 0 };
	ck_assert_int_eq(sc_arena_fsck(a, 0, on_finding, &sn, &r), 1);
	ck_assert_msg(strstr(sn.last, "shard 7:"), "%s", sn.last);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	/* a list that ends in another shard's last free entry instead of its own: as long as it
	 * should be, and still broken */
	uint32_t p7 = ix->hdr->shards[7].free_head, y8 = ix->hdr->shards[8].free_head;
	while (ix->ent[ix->ent[p7 - 1].link - 1].link)
		p7 = ix->ent[p7 - 1].link;
	while (ix->ent[y8 - 1].link)
		y8 = ix->ent[y8 - 1].link;
	ix->ent[p7 - 1].link = y8;
	sn = (struct seen){ 0 };
	ck_assert_int_eq(sc_arena_fsck(a, 0, on_finding, &sn, &r), 1);
	ck_assert_msg(strstr(sn.last, "shard 7:"), "%s", sn.last);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	/* a head far past the arena, of the right shard: out of range, never read through */
	ix->hdr->shards[9].free_head = 0xfffffff0u + 10;
	sn = (struct seen){ 0 };
	ck_assert_int_eq(sc_arena_fsck(a, 0, on_finding, &sn, &r), 1);
	ck_assert_msg(strstr(sn.last, "shard 9:"), "%s", sn.last);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	/* a retired entry (a lease holds it) lost from its shard's pending list, the free list whole */
	int32_t t70[2] = { 70, 71 };
	struct sc_lease held;
	admit_one(st, 70, 3000, 0x70);
	ck_assert_int_eq(sc_l2_get(st, "ns", t70, 2, NULL, &held), 0);
	admit_one(st, 70, 3000, 0x71);
	uint32_t old = UINT32_MAX;
	for (uint32_t i = 0; i < ix->nentries && old == UINT32_MAX; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_RETIRED)
			old = i;
	ck_assert_uint_ne(old, UINT32_MAX);
	ix->hdr->shards[old % SHM_INDEX_SHARDS].pending_head = 0;
	sn = (struct seen){ 0 };
	ck_assert_int_gt(sc_arena_fsck(a, 0, on_finding, &sn, &r), 0);
	char shard[16];
	snprintf(shard, sizeof(shard), "shard %u:", old % SHM_INDEX_SHARDS);
	ck_assert_msg(strstr(sn.last, shard), "%s", sn.last);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	sc_lease_release(&held);
	admit_n(st, 300); /* more than the 128 entries of a shard, into every shard */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 300);
	fsck_arena_close(a, st, name);
}
END_TEST

/* Entries left mid-write (busy, freeing) with their shard's lock free: each reported as what it was
 * left, and the repair frees them or retires them for reclamation (their shard's lists rebuilt);
 * the stored entries stay. */
START_TEST(fsck_reports_entries_left_mid_write)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckbusy", NULL, &a, &name);
	admit_n(st, 6);
	struct shm_index *ix = l2_ix(a);
	uint32_t left[2] = { 0, 0 }, states[2] = { SHM_ENT_BUSY, SHM_ENT_FREEING };
	for (int k = 0; k < 2; k++) {
		uint32_t head = ix->hdr->shards[4 + k].free_head;
		ck_assert_uint_ne(head, 0);
		left[k] = head - 1;
		atomic_store(&ix->ent[left[k]].state, states[k]);
	}
	struct sc_fsck_report r;
	char tb[64], tf[64];
	snprintf(tb, sizeof(tb), "entry %u: left busy by a writer", left[0]);
	snprintf(tf, sizeof(tf), "entry %u: left freeing by a writer", left[1]);
	struct sc_test_wanted busy = { .text = tb }, freeing = { .text = tf };
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &busy, &r), 0);
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &freeing, &r), 0);
	ck_assert_int_eq(busy.hits, 1);
	ck_assert_int_eq(freeing.hits, 1);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.problems, 2); /* their shards' lists are rebuilt, not also reported */
	for (int k = 0; k < 2; k++) { /* free, or retired for reclamation to free */
		uint32_t now = atomic_load(&ix->ent[left[k]].state);
		ck_assert_msg(now == SHM_ENT_FREE || now == SHM_ENT_RETIRED, "entry %u: state %u", left[k], now);
	}
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 6);
	admit_n(st, 300); /* every shard admits */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	fsck_arena_close(a, st, name);
}
END_TEST

/* An entry whose key was scribbled (its bucket's chain holds a key of another bucket, of the same
 * shard): fsck drops that entry, the one the chain reached, and nothing else; every other entry is
 * still found, and the heap is whole. */
START_TEST(fsck_drops_exactly_the_entry_whose_key_was_scribbled)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckkey", NULL, &a, &name);
	admit_n(st, 12);
	struct shm_index *ix = l2_ix(a);
	uint32_t victim = UINT32_MAX;
	for (uint32_t i = 0; i < ix->nentries && victim == UINT32_MAX; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE)
			victim = i;
	ck_assert_uint_ne(victim, UINT32_MAX);
	uint64_t key_lo = ix->ent[victim].key_lo;
	ix->ent[victim].key_lo ^= SHM_INDEX_SHARDS; /* another bucket of the same shard */
	struct sc_fsck_report r;
	char want[96];
	snprintf(want, sizeof(want), "chain holds entry %u of another bucket", victim);
	struct sc_test_wanted w = { .text = want };
	ck_assert_int_eq(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 2); /* and so not reachable from its bucket */
	ck_assert_int_eq(w.hits, 1);
	ck_assert_uint_eq(atomic_load(&ix->ent[victim].state), SHM_ENT_LIVE); /* a check changes nothing */
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 2);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.dropped, 1);
	ck_assert_uint_ne(atomic_load(&ix->ent[victim].state), SHM_ENT_LIVE);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 11);
	ck_assert_uint_eq(r.leaked_bytes, 0);
	int found = 0;
	for (int i = 0; i < 12; i++) {
		int32_t t[2] = { i * 10, i * 10 + 1 };
		struct sc_lease l;
		if (sc_l2_get(st, "ns", t, 2, NULL, &l) == 0) {
			found++;
			ck_assert(l.key.lo != key_lo);
			sc_lease_release(&l);
		}
	}
	ck_assert_int_eq(found, 11);
	fsck_arena_close(a, st, name);
}
END_TEST


/* A schedule hook: reclamation (as another process's admit would run it) after fsck's first pass. */
struct between {
	struct sc_arena *a;
	int passes;
};

static void reclaim_between_passes(const char *point, void *ctx)
{
	struct between *bw = ctx;
	if (!strcmp(point, "fsck.pass.done") && bw->passes++ == 0)
		l2_reclaim_all(bw->a, -1);
}

/* An entry whose payload offset was moved 64 bytes into its own block: the block, still tagged for
 * it, is not the one it names, so the block is reported owned by nothing and the entry as having
 * none; the repair drops the entry and frees the block, and nothing leaks. Nor is another entry's
 * block freed when a dropped entry names it. */
START_TEST(fsck_frees_the_block_an_entry_no_longer_names)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckmove", NULL, &a, &name);
	admit_n(st, 8);
	struct shm_index *ix = l2_ix(a);
	uint32_t victim = UINT32_MAX;
	for (uint32_t i = 0; i < ix->nentries && victim == UINT32_MAX; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE)
			victim = i;
	ck_assert_uint_ne(victim, UINT32_MAX);
	uint64_t off = ix->ent[victim].payload_off;
	ix->ent[victim].payload_off = off + 64;
	struct sc_fsck_report r;
	char want[64];
	snprintf(want, sizeof(want), "block at %llu (", (unsigned long long)off);
	struct sc_test_wanted w = { .text = want };
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 0);
	ck_assert_int_eq(w.hits, 1);
	ck_assert_uint_gt(r.leaked_bytes, 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.dropped, 1);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 7);
	ck_assert_uint_eq(r.leaked_bytes, 0);
	/* an entry naming another live entry's block: dropped without that block being freed (the
	 * other entry keeps its bytes once the dropped one is reclaimed) */
	uint32_t e2[2], k = 0;
	for (uint32_t i = 0; i < ix->nentries && k < 2; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE)
			e2[k++] = i;
	ck_assert_uint_eq(k, 2);
	ix->ent[e2[0]].payload_off = ix->ent[e2[1]].payload_off;
	/* a check names both: the entry (its block is another's) and its own block (owned by nothing) */
	struct sc_test_wanted ent = { .text = "belongs to another owner" }, blk = { .text = "is owned by nothing" };
	ck_assert_int_eq(sc_arena_fsck(a, 0, sc_test_on_wanted, &ent, &r), 2);
	ck_assert_int_eq(sc_arena_fsck(a, 0, sc_test_on_wanted, &blk, &r), 2);
	ck_assert_int_eq(ent.hits, 1);
	ck_assert_int_eq(blk.hits, 1);
	/* and reclamation runs between the repair's pass and the check after it (fsck holds no lock
	 * there: another process's admit may reclaim), freeing what the dropped entry still names */
	struct between bw = { .a = a };
	sc_sched_set(reclaim_between_passes, &bw);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	sc_sched_set(NULL, NULL);
	ck_assert_int_ge(bw.passes, 2);
	ck_assert_uint_eq(r.dropped, 1);
	l2_reclaim_all(a, -1); /* nobody reads: what was dropped is freed now */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 6);
	ck_assert_uint_eq(r.pending_bytes, 0);
	ck_assert_uint_eq(r.digest_failures, 0);
	ck_assert_uint_eq(r.leaked_bytes, 0);
	fsck_arena_close(a, st, name);
}
END_TEST

/* Stored digests scribbled in one half each (the high word of one entry's, the low word of
 * another's): a deep check compares both halves and finds both; the repair drops exactly those. */
START_TEST(fsck_compares_whole_digests)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckdig", NULL, &a, &name);
	admit_n(st, 6);
	struct shm_index *ix = l2_ix(a);
	uint32_t hit = 0;
	for (uint32_t i = 0; i < ix->nentries && hit < 2; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE) {
			if (hit++)
				ix->ent[i].digest_lo ^= 1;
			else
				ix->ent[i].digest_hi ^= 1;
		}
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0); /* only a deep check reads payloads */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 2);
	ck_assert_uint_eq(r.digest_failures, 2);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.dropped, 2);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 4);
	fsck_arena_close(a, st, name);
}
END_TEST

/* A killed process's fill reservation (heap memory in its name, never published): a check reports
 * it and changes nothing, so the next check finds it again; the repair frees it. */
START_TEST(fsck_frees_a_dead_fillers_reservation_only_when_repairing)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckresv", NULL, &a, &name);
	admit_n(st, 3);
	killed_holder(name, HOLD_RESERVATION); /* 100 000 bytes reserved */
	struct sc_fsck_report r;
	struct sc_test_wanted w = { .text = "reservation of a detached holder" };
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 0);
	ck_assert_int_eq(w.hits, 1);
	uint64_t orphan = r.orphan_bytes;
	ck_assert_uint_ge(orphan, 100000);
	ck_assert_int_gt(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.orphan_bytes, orphan); /* a check changes nothing */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.orphan_bytes, 0);
	ck_assert_uint_eq(r.entries, 3);
	fsck_arena_close(a, st, name);
}
END_TEST

/* Lock repair counters of exactly the most fsck believes (2^20) are counted, not reset; one more is
 * reported and reset by the repair (the heap's, kept by the heap, is only left out of the sum). */
START_TEST(fsck_believes_repair_counters_up_to_its_bound)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckctr", NULL, &a, &name);
	admit_n(st, 4);
	struct shm_index *ix = l2_ix(a);
	struct shm_evq *q = l2_q(a);
	const uint64_t max = 1u << 20;
	struct shm_obs_hdr *oh = shm_obs_table(a->shm);
	ck_assert_ptr_nonnull(oh);
	/* the heap's counter: the word after its state word (shm/heap.c's header layout) */
	uint64_t *heap_repairs = (uint64_t *)((uint8_t *)shm_region(a->shm, SHM_REGION_HEAP, NULL) + 136);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(a->shm, &hs), 0);
	ck_assert_uint_eq(hs.repairs, *heap_repairs);
	ix->hdr->shards[3].repairs = (uint32_t)max;
	q->hdr->repairs = max;
	oh->repairs = max;
	*heap_repairs = max;
	ck_assert_int_eq(shm_heap_stats(a->shm, &hs), 0);
	ck_assert_uint_eq(hs.repairs, max);
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.lock_repairs, 4 * max); /* nothing else was ever repaired here */
	ix->hdr->shards[3].repairs = (uint32_t)max + 1;
	q->hdr->repairs = max + 1;
	oh->repairs = max + 1;
	*heap_repairs = max + 1; /* not believed either: left out of the sum (the heap keeps it) */
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 3);
	ck_assert_uint_eq(r.lock_repairs, 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(ix->hdr->shards[3].repairs, 0);
	ck_assert_uint_eq(q->hdr->repairs, 0);
	ck_assert_uint_eq(oh->repairs, 0);
	fsck_arena_close(a, st, name);
}
END_TEST

/* Every entry of the table in use, the last one (index n: the bound of every check) included:
 * fsck finds the arena consistent and counts them all. */
START_TEST(fsck_accepts_the_last_entry_of_the_table)
{
	const char *name;
	struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF, .index_entries = 1024 };
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fscklast", &o, &a, &name);
	struct shm_index *ix = l2_ix(a);
	uint32_t n = ix->nentries;
	int i = 0;
	while (atomic_load(&ix->ent[n - 1].state) != SHM_ENT_LIVE && i < 4 * (int)n) {
		admit_one(st, 100000 + i * 10, 256, (uint8_t)i);
		i++;
	}
	ck_assert_uint_eq(atomic_load(&ix->ent[n - 1].state), SHM_ENT_LIVE);
	struct sc_fsck_report r;
	struct seen sn = { 0 };
	int rc = sc_arena_fsck(a, SC_FSCK_DEEP, on_finding, &sn, &r);
	ck_assert_msg(rc == 0, "fsck: %d (%s: %s)", rc, sn.comp, sn.last);
	ck_assert_uint_ge(r.entries, 1);
	ck_assert_uint_eq(r.leaked_bytes, 0);
	fsck_arena_close(a, st, name);
}
END_TEST

/* Found by the converge property of fuzz_arena_scribble: a shard whose free list head was lost
 * (0) hides all its free entries, so every admission to it failed with -ENOSPC while fsck said
 * clean. fsck compares each shard's lists with its entries' states and rebuilds them. */
START_TEST(regression_fsck_lost_free_list_is_rebuilt)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fscklist", NULL, &a, &name);
	admit_n(st, 5);
	struct shm_index *ix = l2_ix(a);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		ix->hdr->shards[s].free_head = 0;
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), SHM_INDEX_SHARDS);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 5);
	admit_n(st, 40); /* every shard admits again */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	fsck_arena_close(a, st, name);
}
END_TEST

/* Defect 8: after a heap scribble, repair said "1 problem left" and every later put failed with
 * a digest error. Now: repaired and usable, or declared unrepairable and every later operation
 * says so. */
START_TEST(regression_fsck_heap_scribble_is_repaired_or_declared)
{
	for (int how = 0; how < 4; how++) {
		const char *name;
		struct sc_arena *a;
		struct sc_stage *st = fsck_arena("fsckheap", NULL, &a, &name);
		admit_n(st, 20);
		uint8_t *heap = shm_region(a->shm, SHM_REGION_HEAP, NULL);
		if (how == 0)
			memset(heap + 144, 0xa5, 24); /* the free byte and block counters: derived state */
		else if (how == 1)
			memset(heap + 8192, 0x5a, 200); /* the first block headers: the chain itself */
		else if (how == 3)
			memset(heap, 0x5a, 8); /* the heap's magic: neither its lock nor its blocks can be trusted */
		else {
			/* the free lists' bitmaps and heads (derived), and an entry that names a block
			 * not its own: judged only once the rebuilt heap can be walked, a round later */
			memset(heap + 168, 0, 5472 - 168);
			struct shm_index *ix = l2_ix(a);
			uint32_t i = 0;
			while (atomic_load(&ix->ent[i].state) != SHM_ENT_LIVE)
				i++;
			ix->ent[i].payload_off += 64;
		}
		struct sc_fsck_report r;
		struct sc_test_wanted w = { .text = "the heap's block chain or free lists are corrupted" };
		ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 0);
		ck_assert_int_eq(w.hits, 1);
		struct seen told = { 0 };
		int rc = sc_arena_fsck(a, SC_FSCK_REPAIR, on_finding, &told, &r);
		ck_assert_uint_eq(r.problems, (uint64_t)told.n); /* each finding told counts once */
		if (how == 0 || how == 2) {
			ck_assert_int_eq(rc, 0);
			ck_assert_uint_eq(r.entries, how == 2 ? 19 : 20);
			ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
			round_trip_works(st);
		} else {
			ck_assert_int_eq(rc, -ENOTRECOVERABLE);
			/* every later operation says the same */
			static uint8_t buf[100];
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
			int32_t t[2] = { 5, 6 };
			ck_assert_int_eq(sc_l2_admit(st, "x", t, 2, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT),
					 -ENOTRECOVERABLE);
			struct sc_l2_resv rv;
			ck_assert_int_eq(sc_l2_reserve(st, 100, &rv), -ENOTRECOVERABLE);
			struct sc_stage *st2;
			ck_assert_int_eq(sc_stage_open(a, "m2", "s", &st2), -ENOTRECOVERABLE);
			ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), -ENOTRECOVERABLE);
			struct sc_arena *b;
			ck_assert_int_eq(sc_arena_open(name, &b), -ENOTRECOVERABLE);
		}
		fsck_arena_close(a, st, name);
		struct sc_arena *b;
		ck_assert_int_eq(sc_arena_open(name, &b), -ENOENT); /* destroy works on a declared arena */
	}
}
END_TEST

/* The eviction lists (merged from main: shm/evq.c) are checked like everything else: a header
 * whose geometry was scribbled makes every new handle's writers refuse (-EBADMSG at l2_ready);
 * fsck reports it, repair formats it again and queues every live entry, and the arena is clean
 * and usable, the entries evictable again. */
START_TEST(fsck_repairs_a_scribbled_eviction_list_header)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fsckevq", NULL, &a, &name);
	admit_n(st, 12);
	struct shm_evq_hdr *h = l2_q(a)->hdr;
	h->ghost_off ^= 0x5a5a5a00u;
	h->count[0] = 987654321u;
	struct sc_arena *b;
	struct sc_stage *sb = NULL;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	ck_assert_int_eq(sc_stage_open(b, "m", "s", &sb), -EBADMSG);
	struct sc_fsck_report r;
	struct seen seen = { 0 };
	ck_assert_int_gt(sc_arena_fsck(a, SC_FSCK_DEEP, on_finding, &seen, &r), 0);
	ck_assert_str_eq(seen.comp, "policy");
	ck_assert_uint_eq(h->count[0], 987654321u); /* a check changes nothing */
	ck_assert_int_eq(sc_stage_open(b, "m", "s", &sb), -EBADMSG);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.entries, 12);
	ck_assert_uint_eq(h->count[0] + h->count[1], 12); /* every live entry is on a list again */
	ck_assert_int_eq(sc_stage_open(b, "m", "s", &sb), 0);
	round_trip_works(sb);
	sc_stage_close(sb);
	sc_arena_close(b);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	fsck_arena_close(a, st, name);
}
END_TEST

/* Defect 9: a corrupted shard lock word made fsck say "busy: another process is filling it".
 * A lock word naming no reader slot is corruption, reported at once (and taken over by the next
 * locker), not a busy lock. */
START_TEST(regression_fsck_corrupt_shard_lock_is_not_busy)
{
	const char *name;
	struct sc_arena *a;
	struct sc_stage *st = fsck_arena("fscklock", NULL, &a, &name);
	admit_n(st, 5);
	struct shm_mutex *m = &l2_ix(a)->hdr->shards[5].mu;
	atomic_store(&m->word, 0x7fff0000u | 0xfff0u); /* a token of a slot beyond the reader table */
	struct sc_fsck_report r;
	struct seen s = { 0 };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = sc_arena_fsck(a, 0, on_finding, &s, &r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_gt(rc, 0);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 3);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	round_trip_works(st);
	/* a scribbled magic word: every writer would refuse with -EBADMSG until fsck re-initialises it */
	m->magic = 0x12345678;
	struct sc_test_wanted w = { .text = "index and heap not checked this round: a shard lock is corrupted" };
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 0);
	ck_assert_int_eq(w.hits, 1);
	/* and the lock is named: shard 5's, no other */
	struct sc_test_wanted named = { .text = "index shard 5: the lock is corrupted" }, any = { .text = "index shard" };
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &named, &r), 0);
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &any, &r), 0);
	ck_assert_int_eq(named.hits, 1);
	ck_assert_int_eq(any.hits, 1);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	round_trip_works(st);
	/* the eviction lists' lock: named as such, re-initialised by the repair */
	struct shm_evq q;
	ck_assert_int_eq(shm_evq_view(a->shm, &q), 0);
	q.hdr->mu.magic = 0x12345678;
	struct sc_test_wanted evl = { .text = "eviction lists: the lock is corrupted" };
	ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &evl, &r), 0);
	ck_assert_int_eq(evl.hits, 1);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	round_trip_works(st);
	fsck_arena_close(a, st, name);
}
END_TEST

struct blocks {
	uint64_t off[64];
	unsigned n;
};

static int collect_allocated(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	(void)bytes, (void)tag;
	struct blocks *b = ctx;
	if (allocated && b->n < 64)
		b->off[b->n++] = off;
	return 0;
}

/* A repair after a walk that stopped part-way judges nothing by what the walk did not reach: one
 * scribbled prev_size (derived state: the heap's repair rewrites it) stops the heap walk at that
 * block, and every intact entry — those whose blocks lie after it too — is kept, bytes and all. */
START_TEST(regression_fsck_partial_heap_walk_drops_no_entry)
{
	for (unsigned at = 1; at < 6; at++) {
		const char *name;
		struct sc_arena *a;
		struct sc_stage *st = fsck_arena("fsckpart", NULL, &a, &name);
		admit_n(st, 6);
		/* and a retired entry a lease still holds, its block past every break below */
		int32_t t70[2] = { 70, 71 };
		struct sc_lease held;
		admit_one(st, 70, 3000, 0x70);
		ck_assert_int_eq(sc_l2_get(st, "ns", t70, 2, NULL, &held), 0);
		admit_one(st, 70, 3000, 0x71);
		struct blocks b = { .n = 0 };
		ck_assert_int_eq(shm_heap_walk(a->shm, collect_allocated, &b), 0);
		ck_assert_uint_ge(b.n, 6);
		/* the block header's second word: the physically previous block's size */
		uint64_t *prev_size = (uint64_t *)(void *)(a->shm->base + b.off[at] - SHM_HEAP_BLOCK_HDR + 8);
		*prev_size += 64;
		ck_assert_int_ne(shm_heap_walk(a->shm, collect_allocated, &(struct blocks){ .n = 0 }), 0);
		struct sc_fsck_report r;
		struct sc_test_wanted w = { .text = "(retired)" };
		ck_assert_int_gt(sc_arena_fsck(a, 0, sc_test_on_wanted, &w, &r), 0);
		ck_assert_int_eq(w.hits, 0); /* the retired entry's block was not reached: not judged */
		ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
		ck_assert_uint_eq(r.dropped, 0);
		ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
		ck_assert_msg(r.entries == 7, "scribbled block %u: %llu of 7 entries left", at, (unsigned long long)r.entries);
		ck_assert_uint_eq(((const uint8_t *)held.sec[0])[2999], 0x70); /* its old bytes, still leased */
		sc_lease_release(&held);
		for (int i = 0; i < 6; i++) {
			size_t len = 1000 + (size_t)i * 97;
			int32_t t[2] = { i * 10, i * 10 + 1 };
			struct sc_lease l;
			ck_assert_int_eq(sc_l2_get(st, "ns", t, 2, NULL, &l), 0);
			ck_assert_uint_eq(l.sec_len[0], len);
			for (size_t k = 0; k < len; k++)
				ck_assert_uint_eq(((const uint8_t *)l.sec[0])[k], (uint8_t)i);
			sc_lease_release(&l);
		}
		round_trip_works(st);
		fsck_arena_close(a, st, name);
	}
}
END_TEST

/* A walk of the eviction lists that stops part-way (one link scribbled in the middle of a list,
 * forwards or backwards) costs a rebuild from the nodes' membership records: every live entry is
 * on a list again and none is dropped, those past the break included. */
START_TEST(regression_fsck_partial_eviction_list_walk_drops_no_entry)
{
	for (int which = 0; which < 4; which++) {
		const char *name;
		struct sc_arena *a;
		struct sc_stage *st = fsck_arena("fsckevqw", NULL, &a, &name);
		admit_n(st, 12);
		struct shm_evq *q = l2_q(a);
		/* the queued nodes, in index order; break the link of one in the middle */
		uint32_t queued[64], nq = 0;
		for (uint32_t i = 0; i < q->nodes && nq < 64; i++)
			if (q->node[i].q != SHM_EVQ_NONE)
				queued[nq++] = i;
		ck_assert_uint_eq(nq, 12);
		struct shm_evq_node *nd = &q->node[queued[4 + which]];
		if (which & 1)
			nd->prev = q->nodes + 7; /* out of range */
		else
			nd->next = queued[(5 + which) % nq] + 1 == nd->next ? queued[0] + 1 : queued[(5 + which) % nq] + 1;
		struct sc_fsck_report r;
		ck_assert_int_gt(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
		ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
		ck_assert_uint_eq(r.dropped, 0);
		ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
		ck_assert_uint_eq(r.entries, 12);
		ck_assert_uint_eq(q->hdr->count[0] + q->hdr->count[1], 12);
		round_trip_works(st);
		fsck_arena_close(a, st, name);
	}
}
END_TEST

Suite *fsck_suite(void)
{
	Suite *s = suite_create("fsck");
	TCase *tc = tcase_create("fsck");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_fault_points_list_is_complete);
	tcase_add_test(tc, test_fault_arm_bad_specs);
	tcase_add_test(tc, test_fault_points_kill_at_the_nth_hit);
	tcase_add_test(tc, test_fault_slow_path_after_a_disarm);
	tcase_add_test(tc, test_fault_point_in_a_pid_namespace_init);
	tcase_add_test(tc, test_armed_point_kills_and_fsck_repairs);
	tcase_add_test(tc, test_fsck_clean_and_bad_args);
	tcase_add_test(tc, test_fsck_leaked_block);
	tcase_add_test(tc, test_fsck_deep_digest_failure);
	tcase_add_test(tc, test_fsck_dead_reader_with_lease);
	tcase_add_test(tc, test_fsck_hostile_index);
	tcase_add_test(tc, test_fsck_observation_count);
	tcase_add_test(tc, test_fsck_corrupted_header);
	tcase_add_test(tc, regression_fsck_sees_a_corrupt_ring_record);
	tcase_add_test(tc, regression_fsck_repair_converges_after_index_scribble);
	tcase_add_test(tc, regression_fsck_heap_scribble_is_repaired_or_declared);
	tcase_add_test(tc, regression_fsck_corrupt_shard_lock_is_not_busy);
	tcase_add_test(tc, regression_fsck_lost_free_list_is_rebuilt);
	tcase_add_test(tc, fsck_repairs_a_scribbled_eviction_list_header);
	tcase_add_test(tc, regression_fsck_partial_heap_walk_drops_no_entry);
	tcase_add_test(tc, regression_fsck_partial_eviction_list_walk_drops_no_entry);
	tcase_add_test(tc, fsck_rewrites_a_scribbled_index_header);
	tcase_add_test(tc, fsck_reads_nothing_past_its_tables);
	tcase_add_test(tc, fsck_retires_an_unreachable_entry_in_one_finding);
	tcase_add_test(tc, fsck_reformats_an_observation_table_only_when_repairing);
	tcase_add_test(tc, fsck_finds_a_cycle_in_a_wholly_free_shard);
	tcase_add_test(tc, fsck_believes_repair_counters_up_to_its_bound);
	tcase_add_test(tc, fsck_accepts_the_last_entry_of_the_table);
	tcase_add_test(tc, fsck_reports_entries_left_mid_write);
	tcase_add_test(tc, fsck_drops_exactly_the_entry_whose_key_was_scribbled);
	tcase_add_test(tc, fsck_frees_the_block_an_entry_no_longer_names);
	tcase_add_test(tc, fsck_compares_whole_digests);
	tcase_add_test(tc, fsck_frees_a_dead_fillers_reservation_only_when_repairing);
	tcase_add_test(tc, fsck_accepts_a_full_ring_and_a_closed_one);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(fsck_suite)
