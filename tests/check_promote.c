/* tests/check_promote.c — the promotion policy (injected clock) and single-flight fill claims,
 * shared between processes through the arena. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../shm/obs.h"

static uint64_t fake_now = 1000000000ull;
static uint64_t fake_clock(void *ctx)
{
	(void)ctx;
	return fake_now;
}

static struct sc_arena *arena;
static const char *arena_name;

static void setup(void)
{
	arena = sc_test_arena("promote", 16 << 20, &arena_name);
	fake_now = 1000000000ull;
	sc_promote_set_clock(arena, fake_clock, NULL);
}

static void teardown(void)
{
	sc_test_arena_destroy(arena, arena_name);
}

static struct sc_digest dg(uint64_t i)
{
	return (struct sc_digest){ 0x1234567800000000ull + i, 0xabcdef0000000000ull + i };
}

#define MIN_ 60000000000ull
#define S1 0x5151u

static int consider(uint64_t stage, struct sc_digest d, uint64_t tokens, uint64_t bytes, int want_why)
{
	int why = -1;
	int rc = sc_promote_consider(arena, stage, d, tokens, bytes, &why);
	ck_assert_int_ge(rc, 0);
	ck_assert_msg(why == want_why, "why %d, expected %d", why, want_why);
	return rc;
}

START_TEST(second_fill_promotes_then_terminal)
{
	ck_assert_int_eq(consider(S1, dg(1), 3, 128, SC_PROMOTE_WHY_FIRST_HIT), 0);
	ck_assert_int_eq(consider(S1, dg(1), 3, 128, SC_PROMOTE_WHY_SECOND_HIT), 1);
	ck_assert_int_eq(sc_promote_attempted(arena, S1, dg(1)), 0);
	ck_assert_int_eq(consider(S1, dg(1), 3, 128, SC_PROMOTE_WHY_TERMINAL), 0);
	/* keyed by stage: another stage's first fill of the same digest is a first hit */
	ck_assert_int_eq(consider(S1 + 1, dg(1), 3, 128, SC_PROMOTE_WHY_FIRST_HIT), 0);
	ck_assert_int_eq(sc_promote_attempted(arena, S1, dg(99)), -ENOENT);
}
END_TEST

START_TEST(restart_class_and_size_limit)
{
	ck_assert_int_eq(consider(S1, dg(1), 4096, 1 << 20, SC_PROMOTE_WHY_LONG_PREFIX), 1);
	ck_assert_int_eq(consider(S1, dg(2), 4095, 1 << 20, SC_PROMOTE_WHY_FIRST_HIT), 0);
	/* > 64 MiB: never, and terminal (then even exactly 64 MiB of that digest is refused) */
	ck_assert_int_eq(consider(S1, dg(3), 4096, SC_PROMOTE_MAX_BYTES + 1, SC_PROMOTE_WHY_OVERSIZE), 0);
	ck_assert_int_eq(consider(S1, dg(3), 4096, SC_PROMOTE_MAX_BYTES, SC_PROMOTE_WHY_TERMINAL), 0);
	/* exactly 64 MiB is allowed */
	ck_assert_int_eq(consider(S1, dg(4), 4096, SC_PROMOTE_MAX_BYTES, SC_PROMOTE_WHY_LONG_PREFIX), 1);
	ck_assert_int_eq(consider(S1, dg(5), 10, SC_PROMOTE_MAX_BYTES, SC_PROMOTE_WHY_FIRST_HIT), 0);
	ck_assert_int_eq(consider(S1, dg(5), 10, SC_PROMOTE_MAX_BYTES, SC_PROMOTE_WHY_SECOND_HIT), 1);
}
END_TEST

START_TEST(dropped_handoff_retries)
{
	ck_assert_int_eq(consider(S1, dg(7), 10, 100, SC_PROMOTE_WHY_FIRST_HIT), 0);
	ck_assert_int_eq(consider(S1, dg(7), 10, 100, SC_PROMOTE_WHY_SECOND_HIT), 1);
	/* the hand-off was dropped (no sc_promote_attempted): the next fill retries */
	ck_assert_int_eq(consider(S1, dg(7), 10, 100, SC_PROMOTE_WHY_SECOND_HIT), 1);
	ck_assert_int_eq(sc_promote_attempted(arena, S1, dg(7)), 0);
	ck_assert_int_eq(consider(S1, dg(7), 10, 100, SC_PROMOTE_WHY_TERMINAL), 0);
	/* a long prefix too */
	ck_assert_int_eq(consider(S1, dg(8), 5000, 100, SC_PROMOTE_WHY_LONG_PREFIX), 1);
	ck_assert_int_eq(consider(S1, dg(8), 5000, 100, SC_PROMOTE_WHY_LONG_PREFIX), 1);
}
END_TEST

START_TEST(expiry_ten_minutes_after_first_sight)
{
	ck_assert_int_eq(consider(S1, dg(1), 10, 100, SC_PROMOTE_WHY_FIRST_HIT), 0);
	fake_now += 10 * MIN_; /* exactly 10 minutes: still within the window */
	ck_assert_int_eq(consider(S1, dg(1), 10, 100, SC_PROMOTE_WHY_SECOND_HIT), 1);
	fake_now += 1; /* past it: a fresh observation */
	ck_assert_int_eq(consider(S1, dg(1), 10, 100, SC_PROMOTE_WHY_FIRST_HIT), 0);
	/* measured from first sight, not last: hits at 0, 9 and 11 minutes */
	ck_assert_int_eq(consider(S1, dg(2), 10, 100, SC_PROMOTE_WHY_FIRST_HIT), 0);
	fake_now += 9 * MIN_;
	ck_assert_int_eq(consider(S1, dg(2), 10, 100, SC_PROMOTE_WHY_SECOND_HIT), 1); /* hand-off dropped */
	fake_now += 2 * MIN_;
	ck_assert_int_eq(consider(S1, dg(2), 10, 100, SC_PROMOTE_WHY_FIRST_HIT), 0);
	/* a terminal mark expires too */
	ck_assert_int_eq(consider(S1, dg(3), 10, SC_PROMOTE_MAX_BYTES + 1, SC_PROMOTE_WHY_OVERSIZE), 0);
	fake_now += 11 * MIN_;
	ck_assert_int_eq(consider(S1, dg(3), 10, 100, SC_PROMOTE_WHY_FIRST_HIT), 0);
	struct sc_promote_stats st;
	ck_assert_int_eq(sc_promote_stats(arena, &st), 0);
	ck_assert_uint_ge(st.expired, 3);
}
END_TEST

START_TEST(evicts_oldest_at_4096)
{
	struct sc_promote_stats st;
	for (uint64_t i = 0; i < SC_PROMOTE_MAX_OBSERVATIONS; i++) {
		fake_now++;
		consider(S1, dg(100 + i), 10, 100, SC_PROMOTE_WHY_FIRST_HIT);
	}
	ck_assert_int_eq(sc_promote_stats(arena, &st), 0);
	ck_assert_int_eq(st.observations, SC_PROMOTE_MAX_OBSERVATIONS);
	fake_now++;
	consider(S1, dg(1), 10, 100, SC_PROMOTE_WHY_FIRST_HIT); /* evicts dg(100), the oldest */
	ck_assert_int_eq(sc_promote_stats(arena, &st), 0);
	ck_assert_int_eq(st.observations, SC_PROMOTE_MAX_OBSERVATIONS);
	ck_assert_int_eq(st.evicted, 1);
	/* dg(101) survived: its second fill promotes. (Re-seeing dg(100) evicts the next oldest.) */
	ck_assert_int_eq(consider(S1, dg(101), 10, 100, SC_PROMOTE_WHY_SECOND_HIT), 1);
	fake_now++;
	ck_assert_int_eq(consider(S1, dg(100), 10, 100, SC_PROMOTE_WHY_FIRST_HIT), 0);
	/* ties on first sight go by digest: the smaller one goes */
	sc_arena_close(arena);
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .obs_entries = 2 };
	sc_arena_destroy(NULL, arena_name);
	arena = sc_test_arena_opts("promote2", &o, &arena_name);
	sc_promote_set_clock(arena, fake_clock, NULL);
	consider(S1, dg(9), 10, 100, SC_PROMOTE_WHY_FIRST_HIT);
	consider(S1, dg(5), 10, 100, SC_PROMOTE_WHY_FIRST_HIT);
	consider(S1, dg(7), 10, 100, SC_PROMOTE_WHY_FIRST_HIT); /* evicts dg(5) */
	ck_assert_int_eq(consider(S1, dg(9), 10, 100, SC_PROMOTE_WHY_SECOND_HIT), 1);
}
END_TEST

/* Fork a child with an arena handle of its own (*@a, in the child, where it returns 0; it exits 3
 * when it cannot open one); the parent gets the pid. */
static pid_t fork_attached(struct sc_arena **a)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0 && sc_arena_open(arena_name, a))
		_exit(3);
	return pid;
}

START_TEST(two_processes_count_as_two_hits)
{
	struct sc_arena *a = NULL;
	pid_t pid = fork_attached(&a);
	if (pid == 0) {
		sc_promote_set_clock(a, fake_clock, NULL);
		int why = -1;
		int rc = sc_promote_consider(a, S1, dg(42), 10, 100, &why);
		sc_arena_close(a);
		_exit(rc == 0 && why == SC_PROMOTE_WHY_FIRST_HIT ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(consider(S1, dg(42), 10, 100, SC_PROMOTE_WHY_SECOND_HIT), 1);
}
END_TEST

START_TEST(single_flight_across_processes)
{
	int go[2], done[2];
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(done), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *a = NULL;
		char c = 0;
		if (sc_arena_open(arena_name, &a) || sc_fill_claim(a, S1, dg(1)))
			_exit(3);
		if (write(done[1], "c", 1) != 1)
			_exit(4);
		if (read(go[0], &c, 1) != 1)
			_exit(5);
		if (c == 'r')
			sc_fill_release(a, S1, dg(1));
		if (read(go[0], &c, 1) != 1) /* wait to be killed */
			_exit(6);
		_exit(0);
	}
	char c;
	ck_assert_int_eq(read(done[0], &c, 1), 1);
	/* the child holds the claim: we get -EBUSY; another digest or stage is free */
	ck_assert_int_eq(sc_fill_claim(arena, S1, dg(1)), -EBUSY);
	ck_assert_int_eq(sc_fill_wait(arena, S1, dg(1), 20000000), -ETIMEDOUT);
	ck_assert_int_eq(sc_fill_claim(arena, S1, dg(2)), 0);
	ck_assert_int_eq(sc_fill_claim(arena, S1 + 1, dg(1)), 0);
	ck_assert_int_eq(sc_fill_claim(arena, S1, dg(2)), -EBUSY); /* a second claim of ours too */
	ck_assert_int_eq(sc_fill_release(arena, S1, dg(2)), 0);
	ck_assert_int_eq(sc_fill_release(arena, S1, dg(2)), -ENOENT);
	/* release: the waiter proceeds */
	ck_assert_int_eq(write(go[1], "r", 1), 1);
	ck_assert_int_eq(sc_fill_wait(arena, S1, dg(1), 5000000000ll), 0);
	ck_assert_int_eq(sc_fill_claim(arena, S1, dg(1)), 0);
	ck_assert_int_eq(sc_fill_release(arena, S1, dg(1)), 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);

	/* a claimer killed while holding its claim: the claim is released */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *a = NULL;
		if (sc_arena_open(arena_name, &a) || sc_fill_claim(a, S1, dg(3)))
			_exit(3);
		if (write(done[1], "c", 1) != 1)
			_exit(4);
		pause();
		_exit(0);
	}
	ck_assert_int_eq(read(done[0], &c, 1), 1);
	ck_assert_int_eq(sc_fill_claim(arena, S1, dg(3)), -EBUSY);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(sc_fill_wait(arena, S1, dg(3), 1000000000), 0);
	ck_assert_int_eq(sc_fill_claim(arena, S1, dg(3)), 0);
	struct sc_promote_stats st;
	sc_promote_stats(arena, &st);
	ck_assert_int_eq(st.claims, 2); /* ours: (S1+1, dg1) and (S1, dg3) */
}
END_TEST

START_TEST(holder_killed_with_the_lock)
{
	for (uint64_t i = 0; i < 50; i++)
		consider(S1, dg(i), 10, 100, SC_PROMOTE_WHY_FIRST_HIT);
	struct sc_arena *a = NULL;
	pid_t pid = fork_attached(&a);
	if (pid == 0) {
		struct shm_obs_hdr *h = shm_obs_table(a->shm);
		if (!h || shm_obs_lock(a->shm, h))
			_exit(4);
		/* scribble a half-done removal: a hole in the middle of the table */
		struct shm_obs_entry *e = shm_obs_find_locked(h, S1, dg(10).lo, dg(10).hi);
		if (e)
			memset(e, 0, sizeof(*e));
		kill(getpid(), SIGKILL);
	}
	waitpid(pid, NULL, 0);
	/* the next locker repairs: every other observation is still found */
	for (uint64_t i = 0; i < 50; i++)
		if (i != 10)
			ck_assert_int_eq(consider(S1, dg(i), 10, 100, SC_PROMOTE_WHY_SECOND_HIT), 1);
	struct sc_promote_stats st;
	sc_promote_stats(arena, &st);
	ck_assert_int_eq(st.repairs, 1);
	ck_assert_int_eq(st.observations, 49);
}
END_TEST

START_TEST(hostile_table_is_refused)
{
	uint64_t size;
	struct shm_obs_hdr *h = shm_region(arena->shm, SHM_REGION_OBS, &size);
	uint32_t slots = h->slots;
	h->slots = 1u << 30; /* claims the table is far larger than its region */
	ck_assert_int_eq(sc_promote_consider(arena, S1, dg(1), 10, 100, NULL), -EBADMSG);
	ck_assert_int_eq(sc_fill_claim(arena, S1, dg(1)), -EBADMSG);
	h->slots = 3; /* not a power of two */
	ck_assert_int_eq(sc_promote_consider(arena, S1, dg(1), 10, 100, NULL), -EBADMSG);
	h->slots = slots;
	h->magic ^= 1;
	ck_assert_int_eq(sc_promote_consider(arena, S1, dg(1), 10, 100, NULL), -EBADMSG);
	h->magic ^= 1;
	h->count = 0xffffffffu; /* a lying count is clamped, never trusted for loops */
	ck_assert_int_ge(sc_promote_consider(arena, S1, dg(1), 10, 100, NULL), 0);
	/* every slot full of garbage that claims to be used: lookups stay bounded */
	struct shm_obs_entry *t = shm_obs_entries(h);
	for (uint32_t i = 0; i < h->slots; i++)
		t[i] = (struct shm_obs_entry){ .stage_id = 7, .digest_lo = i, .flags = SHM_OBS_USED };
	h->count = 0;
	ck_assert_int_eq(sc_promote_consider(arena, S1, dg(2), 10, 100, NULL), -EBADMSG);
	ck_assert_int_eq(sc_promote_consider(NULL, S1, dg(2), 10, 100, NULL), -EINVAL);
}
END_TEST

Suite *promote_suite(void)
{
	Suite *s = suite_create("promote");
	TCase *tc = tcase_create("policy");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, second_fill_promotes_then_terminal);
	tcase_add_test(tc, restart_class_and_size_limit);
	tcase_add_test(tc, dropped_handoff_retries);
	tcase_add_test(tc, expiry_ten_minutes_after_first_sight);
	tcase_add_test(tc, evicts_oldest_at_4096);
	tcase_add_test(tc, two_processes_count_as_two_hits);
	tcase_add_test(tc, single_flight_across_processes);
	tcase_add_test(tc, holder_killed_with_the_lock);
	tcase_add_test(tc, hostile_table_is_refused);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(promote_suite)
