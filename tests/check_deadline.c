/*
 * tests/check_deadline.c — restores that know when not to (sc_restore_with): a deadline already
 * past starts no fill, a fill predicted to lose (against the deadline or the caller's recompute
 * estimate) is not started, the prediction prices the queue ahead on the ring, an L2 hit is served
 * whatever the deadline, a wait for another process's fill stops at the deadline, and a fill that
 * overruns its deadline is abandoned: nothing published, its reservation held until its reads
 * completed, then released — also when the arena handle is closed first, and when the process is
 * killed with the abandoned fill in flight (the kernel keeps the handle's lock, and with it the
 * reservation, until the reads are done; the reaper frees it afterwards).
 *
 * Predictions are made deterministic with the test build's fill model (sc_test_set_fill_model);
 * a deadline is made to pass after the fill was submitted by the schedule point
 * l3.fill.submitted, whose hook waits (bounded by the deadline itself) until it has.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../lib/l3/l3.h"

#define BIG (32u << 20) /* a payload whose O_DIRECT read takes a while */
#define NTOK 64u

static char tmpdir[64];
static struct sc_arena *arena;
static const char *arena_name;
static struct sc_stage *stage;
static struct sc_l3 *l3;

static void rm_tmp(void)
{
	sc_test_rm_tree(tmpdir);
	tmpdir[0] = 0;
}

static struct sc_l3 *l3_open(void)
{
	struct sc_l3 *h;
	struct sc_l3_opts o = { .o_direct = SC_L3_ODIRECT_ON };
	ck_assert_int_eq(sc_l3_open(tmpdir, &o, &h), 0);
	return h;
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/sc-dl-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	atexit(rm_tmp);
	arena = sc_test_arena("deadline", 160ull << 20, &arena_name);
	ck_assert_int_eq(sc_stage_open(arena, "model", "state", &stage), 0);
	l3 = l3_open();
	ck_assert_int_eq(sc_l3_bind_arena(l3, arena), 0);
}

static void teardown(void)
{
	sc_sched_set(NULL, NULL);
	sc_l3_close(l3);
	sc_stage_close(stage);
	sc_test_arena_destroy(arena, arena_name);
	rm_tmp();
}

static void tokens_of(int32_t *t, uint32_t k)
{
	for (uint32_t i = 0; i < NTOK; i++)
		t[i] = (int32_t)(k * 100003u + i);
}

static void fill_bytes(uint8_t *p, size_t n, uint32_t k)
{
	uint64_t x = k * 0x9e3779b97f4a7c15ull + 7;
	for (size_t i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

/* Put object @k of @n bytes (compute cost 1 s) through @h; its location into @loc. */
static void put_obj(struct sc_l3 *h, uint32_t k, size_t n, struct sc_location *loc)
{
	uint8_t *b = aligned_alloc(4096, n);
	fill_bytes(b, n, k);
	int32_t t[NTOK];
	tokens_of(t, k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	struct sc_l3_put_args a = { .model_identity = "model", .state_identity = "state", .ns = "dl", .tokens = t,
				    .token_count = NTOK, .payload = &p };
	ck_assert_int_eq(sc_l3_put_cost(h, &a, 1000000000ull, loc), 0);
	free(b);
}

static int restore_with(struct sc_stage *st, struct sc_l3 *h, uint32_t k, const struct sc_restore_opts *o,
			struct sc_restore *r)
{
	int32_t t[NTOK];
	tokens_of(t, k);
	return sc_restore_with(st, h, "dl", t, NTOK, o, r);
}

static uint64_t fill_starts(struct sc_l3 *h)
{
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_stats(h, &st), 0);
	return st.fill_starts;
}

static struct sc_miss_stats misses(struct sc_arena *a, struct sc_stage *st)
{
	struct sc_miss_stats m;
	ck_assert_int_eq(sc_miss_stats(a, sc_stage_id(st), &m), 0);
	return m;
}

/* Heap bytes held by reservations (of live processes, and of dead ones not yet freed). */
static uint64_t reserved_bytes(struct sc_arena *a)
{
	struct sc_fsck_report rep;
	ck_assert_int_ge(sc_arena_fsck(a, 0, NULL, NULL, &rep), 0);
	return rep.reserved_bytes + rep.orphan_bytes;
}

static int l2_has(struct sc_stage *st, uint32_t k)
{
	int32_t t[NTOK];
	tokens_of(t, k);
	struct sc_l2_entry_info info;
	return sc_l2_peek(st, "dl", t, NTOK, &info) == 0;
}

/* The schedule hook: at l3.fill.submitted (the fill's reads are in flight), wait until the
 * deadline in *ctx has passed — a wait bounded by that deadline. */
static void pass_deadline(const char *point, void *ctx)
{
	if (strcmp(point, "l3.fill.submitted"))
		return;
	uint64_t deadline = *(const uint64_t *)ctx;
	while (sc_clock_ns() <= deadline)
		;
}

/* ---- no fill that would lose ---- */

START_TEST(a_deadline_already_past_starts_no_fill_but_l2_still_serves)
{
	struct sc_location loc;
	put_obj(l3, 1, 1 << 20, &loc);
	uint64_t starts = fill_starts(l3);
	struct sc_restore r;
	struct sc_restore_opts o = { .deadline_ns = sc_clock_ns() - 1 };
	ck_assert_int_eq(restore_with(stage, l3, 1, &o, &r), -ETIME);
	ck_assert_int_eq(r.miss_reason, SC_MISS_DEADLINE);
	ck_assert_uint_eq(r.miss_detail, SC_DEADLINE_PAST);
	ck_assert_uint_eq(fill_starts(l3), starts);
	struct sc_miss_stats m = misses(arena, stage);
	ck_assert_uint_eq(m.restore[SC_MISS_DEADLINE], 1);
	ck_assert_uint_eq(m.deadline[SC_DEADLINE_PAST], 1);
	ck_assert_str_eq(sc_deadline_detail_name(SC_DEADLINE_PAST), "past");
	/* promoted (second fill), then served from L2 even with a deadline in the past */
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(restore_with(stage, l3, 1, NULL, &r), NTOK);
		sc_restore_release(&r);
	}
	starts = fill_starts(l3);
	ck_assert_int_eq(restore_with(stage, l3, 1, &o, &r), NTOK);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L2);
	ck_assert_int_eq(r.miss_reason, -1);
	sc_restore_release(&r);
	ck_assert_uint_eq(fill_starts(l3), starts);
	/* bad options */
	struct sc_restore_opts bad = { .reserved0 = 1 };
	ck_assert_int_eq(restore_with(stage, l3, 1, &bad, &r), -EINVAL);
	bad = (struct sc_restore_opts){ .flags = 0x80 };
	ck_assert_int_eq(restore_with(stage, l3, 1, &bad, &r), -EINVAL);
	bad = (struct sc_restore_opts){ .reserved = { 0, 0, 0, 0, 1 } };
	ck_assert_int_eq(restore_with(stage, l3, 1, &bad, &r), -EINVAL);
	/* a recompute estimate of UINT64_MAX and a deadline of UINT64_MAX mean "whenever" */
	o = (struct sc_restore_opts){ .deadline_ns = UINT64_MAX, .recompute_ns = UINT64_MAX };
	ck_assert_int_eq(restore_with(stage, l3, 1, &o, &r), NTOK);
	sc_restore_release(&r);
}
END_TEST

START_TEST(a_fill_predicted_to_lose_is_not_started)
{
	struct sc_location loc;
	put_obj(l3, 2, 1 << 20, &loc);
	/* 100 ms + 1 ns per byte: a 1 MiB fill is predicted at about 101 ms */
	sc_test_set_fill_model(l3, 100000000, 1000);
	uint64_t est = 0, starts = fill_starts(l3);
	ck_assert_int_eq(sc_l3_fill_estimate(l3, 1 << 20, &est), 0);
	ck_assert_uint_eq(est, 100000000 + (1u << 20));
	struct sc_restore r;
	struct sc_restore_opts o = { .deadline_ns = sc_clock_ns() + 50000000 };
	ck_assert_int_eq(restore_with(stage, l3, 2, &o, &r), -ETIME);
	ck_assert_uint_eq(r.miss_detail, SC_DEADLINE_PREDICTED);
	ck_assert_uint_eq(r.predicted_ns, est);
	/* the caller's recompute estimate: cheaper to recompute than to read */
	o = (struct sc_restore_opts){ .recompute_ns = 50000000 };
	ck_assert_int_eq(restore_with(stage, l3, 2, &o, &r), -ETIME);
	ck_assert_uint_eq(r.miss_detail, SC_DEADLINE_PREDICTED);
	ck_assert_uint_eq(fill_starts(l3), starts);
	ck_assert_uint_eq(misses(arena, stage).deadline[SC_DEADLINE_PREDICTED], 2);
	/* recomputing costs more than the fill: it goes ahead */
	o = (struct sc_restore_opts){ .recompute_ns = 10000000000ull };
	ck_assert_int_eq(restore_with(stage, l3, 2, &o, &r), NTOK);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L3);
	ck_assert_uint_eq(r.predicted_ns, est);
	sc_restore_release(&r);
	ck_assert_uint_eq(fill_starts(l3), starts + 1);
	/* nothing measured and nothing recorded: no prediction (the model unpinned, a fresh store) */
	sc_test_set_fill_model(l3, 0, 0);
	ck_assert_int_eq(sc_l3_fill_estimate(NULL, 1, &est), -EINVAL);
	ck_assert_int_eq(sc_l3_fill_estimate(l3, 1, NULL), -EINVAL);
	ck_assert_int_eq(sc_l3_fill_estimate(l3, UINT64_MAX, &est), 0); /* saturates, never wraps */
	ck_assert_uint_ge(est, 1);
}
END_TEST

START_TEST(the_prediction_prices_the_queue_ahead_on_the_ring)
{
	struct sc_location big;
	put_obj(l3, 3, BIG, &big);
	sc_test_set_fill_model(l3, 1000, 100);
	uint64_t alone, behind;
	ck_assert_int_eq(sc_l3_fill_estimate(l3, 1 << 20, &alone), 0);
	void *dst = aligned_alloc(4096, BIG);
	struct sc_l3_fill_req req = { .loc = &big, .dst = dst, .dst_bytes = BIG }, *p = &req, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &p, 1), 1);
	ck_assert_int_eq(sc_l3_fill_estimate(l3, 1 << 20, &behind), 0);
	ck_assert_uint_eq(behind, alone + (uint64_t)BIG * 100 / 1000); /* the 32 MiB ahead of it */
	/* wait for that fill (bounded: 60 s) before its memory goes */
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, 60000000000ll), 1);
	ck_assert_int_eq(done->result, 0);
	ck_assert_uint_eq(done->cost_ns, 1000000000ull); /* the fill reports the object's recorded cost */
	free(dst);
	ck_assert_int_eq(sc_l3_fill_estimate(l3, 1 << 20, &behind), 0);
	ck_assert_uint_eq(behind, alone);
}
END_TEST

/* A child holds the fill claim of object 4 until told to let go: a restore waiting for it with a
 * deadline stops at the deadline. */
START_TEST(a_wait_for_another_fill_stops_at_the_deadline)
{
	struct sc_location loc;
	put_obj(l3, 4, 1 << 20, &loc);
	int held[2], go[2];
	ck_assert_int_eq(pipe(held), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *a;
		struct sc_stage *s;
		char c = 0;
		if (sc_arena_open(arena_name, &a) || sc_stage_open(a, "model", "state", &s) ||
		    sc_fill_claim(a, sc_stage_id(s), loc.digest))
			_exit(1);
		if (write(held[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(2);
		sc_fill_release(a, sc_stage_id(s), loc.digest);
		_exit(0);
	}
	char c;
	ck_assert_int_eq(read(held[0], &c, 1), 1); /* the claim is held */
	struct sc_restore r;
	struct sc_restore_opts o = { .flags = SC_RESTORE_WAIT, .deadline_ns = sc_clock_ns() + 50000000 };
	ck_assert_int_eq(restore_with(stage, l3, 4, &o, &r), -ETIME);
	ck_assert_uint_eq(r.miss_detail, SC_DEADLINE_WAITED);
	/* without waiting: busy */
	ck_assert_int_eq(restore_with(stage, l3, 4, NULL, &r), -EBUSY);
	ck_assert_int_eq(r.miss_reason, SC_MISS_BUSY);
	struct sc_miss_stats m = misses(arena, stage);
	ck_assert_uint_eq(m.deadline[SC_DEADLINE_WAITED], 1);
	ck_assert_uint_eq(m.restore[SC_MISS_BUSY], 1);
	ck_assert_int_eq(write(go[1], &c, 1), 1);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* ---- abandoned fills ---- */

/* Restore object @k with a fill predicted in time whose deadline passes once it is in flight:
 * -ETIME, abandoned. */
static void abandon(struct sc_stage *st, struct sc_l3 *h, uint32_t k)
{
	static uint64_t deadline;
	sc_test_set_fill_model(h, 1, 1); /* predicted: in time */
	deadline = sc_clock_ns() + 200000000; /* far enough for the locate on a loaded machine */
	sc_sched_set(pass_deadline, &deadline);
	struct sc_restore r;
	struct sc_restore_opts o = { .deadline_ns = deadline };
	int rc = restore_with(st, h, k, &o, &r);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(rc, -ETIME);
	ck_assert_int_eq(r.miss_reason, SC_MISS_DEADLINE);
	ck_assert_uint_eq(r.miss_detail, SC_DEADLINE_ABANDONED);
	ck_assert_ptr_null(r.sec[0]);
	sc_restore_release(&r); /* nothing to release: the ring has it */
}

/* Let @h's ring reap what finished, until nothing is in flight (bounded: 60 s). */
static void drain(struct sc_l3 *h)
{
	uint64_t until = sc_clock_ns() + 60000000000ull;
	struct sc_l3_fill_req *done[4];
	while (sc_l3_fill_inflight(h) && sc_clock_ns() < until)
		(void)sc_l3_fill_reap(h, done, 4, 10000000);
	ck_assert_uint_eq(sc_l3_fill_inflight(h), 0);
}

START_TEST(an_abandoned_fill_keeps_its_memory_until_its_reads_completed)
{
	struct sc_location loc;
	put_obj(l3, 5, BIG, &loc);
	/* promoted on this fill if it completed (it counts as the second), so a publication would show */
	int why;
	ck_assert_int_eq(sc_promote_consider(arena, sc_stage_id(stage), loc.digest, NTOK, BIG, &why), 0);
	uint64_t before = reserved_bytes(arena);
	abandon(stage, l3, 5);
	/* the ring still owes the reads (or their completion): the reservation is held */
	ck_assert_uint_gt(sc_l3_fill_inflight(l3), 0);
	ck_assert_uint_ge(reserved_bytes(arena), before + BIG);
	drain(l3);
	ck_assert_uint_eq(reserved_bytes(arena), before);
	ck_assert(!l2_has(stage, 5)); /* nothing published, whatever the reads brought */
	struct sc_promote_stats ps;
	ck_assert_int_eq(sc_promote_stats(arena, &ps), 0);
	ck_assert_uint_eq(ps.published, 0);
	ck_assert_uint_eq(misses(arena, stage).deadline[SC_DEADLINE_ABANDONED], 1);
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, NULL, NULL, &rep), 0);
	/* the object is fine and restores in full afterwards */
	struct sc_restore r;
	ck_assert_int_eq(restore_with(stage, l3, 5, NULL, &r), NTOK);
	uint8_t *want = malloc(BIG);
	fill_bytes(want, BIG, 5);
	ck_assert_int_eq(memcmp(r.sec[0], want, BIG), 0);
	free(want);
	sc_restore_release(&r);
}
END_TEST

/* The arena handle goes first: the abandoned fill is detached; its reservation stays tagged with
 * the closed handle's token until the ring lets that handle's lock go, then the reaper frees it. */
START_TEST(an_abandoned_fill_outlives_its_arena_handle)
{
	struct sc_location loc;
	put_obj(l3, 6, BIG, &loc);
	struct sc_arena *a2;
	struct sc_stage *s2;
	ck_assert_int_eq(sc_arena_open(arena_name, &a2), 0);
	ck_assert_int_eq(sc_stage_open(a2, "model", "state", &s2), 0);
	struct sc_l3 *h = l3_open();
	abandon(s2, h, 6);
	sc_stage_close(s2);
	sc_arena_close(a2); /* with the fill possibly in flight */
	sc_l3_close(h);     /* the drain: the fill completes, its context is freed, nothing touched */
	/* the reaper frees the closed handle's reservation once the lock is free (bounded: 10 s) */
	uint64_t until = sc_clock_ns() + 10000000000ull;
	struct sc_l2_stats st;
	while (reserved_bytes(arena) && sc_clock_ns() < until)
		ck_assert_int_eq(sc_l2_stats(arena, NULL, &st), 0); /* runs the periodic reap */
	ck_assert_uint_eq(reserved_bytes(arena), 0);
	ck_assert(!l2_has(stage, 6));
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, NULL, NULL, &rep), 0);
}
END_TEST

/* A process killed with an abandoned fill in flight: its reads may land after it died; its
 * reservation is freed only after they did; nothing is published; the arena is clean. */
START_TEST(a_process_killed_with_an_abandoned_fill_in_flight_leaves_nothing_behind)
{
	struct sc_location loc;
	put_obj(l3, 7, BIG, &loc);
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *a;
		struct sc_stage *s;
		close(ready[0]);
		if (sc_arena_open(arena_name, &a) || sc_stage_open(a, "model", "state", &s))
			_exit(1);
		struct sc_l3 *h = l3_open();
		abandon(s, h, 7); /* a failed check ends this process: the parent reads nothing */
		uint32_t inflight = sc_l3_fill_inflight(h);
		if (write(ready[1], &inflight, sizeof(inflight)) != sizeof(inflight))
			_exit(2);
		raise(SIGKILL); /* the abandoned fill's reads may still be landing */
		_exit(3);
	}
	uint32_t inflight = 0;
	close(ready[1]);
	ck_assert_int_eq(read(ready[0], &inflight, sizeof(inflight)), sizeof(inflight));
	sc_test_wait_killed(pid);
	printf("killed with %u fill(s) in flight\n", inflight);
	/* wait (bounded: 10 s) until the kernel finished the dead ring's reads and the reaper freed
	 * the reservation */
	uint64_t until = sc_clock_ns() + 10000000000ull;
	struct sc_l2_stats st;
	while (reserved_bytes(arena) && sc_clock_ns() < until)
		ck_assert_int_eq(sc_l2_stats(arena, NULL, &st), 0);
	ck_assert_uint_eq(reserved_bytes(arena), 0);
	ck_assert(!l2_has(stage, 7));
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(rep.leaked_bytes, 0);
	/* the memory is reusable and what is stored there now is right */
	struct sc_restore r;
	for (int i = 0; i < 2; i++) { /* the second fill is promoted into L2 */
		ck_assert_int_eq(restore_with(stage, l3, 7, NULL, &r), NTOK);
		sc_restore_release(&r);
	}
	ck_assert_int_eq(restore_with(stage, l3, 7, NULL, &r), NTOK);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L2);
	uint8_t *want = malloc(BIG);
	fill_bytes(want, BIG, 7);
	ck_assert_int_eq(memcmp(r.sec[0], want, BIG), 0);
	free(want);
	sc_restore_release(&r);
}
END_TEST

/* ---- costs in L3: every object format keeps them; old objects read as 0 ---- */

START_TEST(costs_survive_every_object_format)
{
	uint8_t *b = aligned_alloc(4096, 256 << 10);
	fill_bytes(b, 256 << 10, 8);
	int32_t t[NTOK];
	tokens_of(t, 8);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { 256 << 10 } };
	struct sc_l3_put_args a = { .ns = "dl", .tokens = t, .token_count = NTOK, .payload = &p };
	struct sc_location loc, got;
	/* whole: an absurd cost is clamped, not refused */
	ck_assert_int_eq(sc_l3_put_cost(l3, &a, UINT64_MAX, &loc), 0);
	ck_assert_uint_eq(loc.cost_ns, SC_COST_MAX);
	ck_assert_int_eq(sc_l3_lookup(l3, loc.digest, &got), 0);
	ck_assert_uint_eq(got.cost_ns, SC_COST_MAX);
	/* without a cost (as every object written before costs existed): 0 */
	fill_bytes(b, 256 << 10, 9);
	tokens_of(t, 9);
	ck_assert_int_eq(sc_l3_put(l3, &a, &loc), 0);
	ck_assert_int_eq(sc_l3_lookup(l3, loc.digest, &got), 0);
	ck_assert_uint_eq(got.cost_ns, 0);
	/* segmented: the manifest's header keeps it too, and a fill reports it */
	ck_assert_int_eq(sc_l3_set_segment_bytes(l3, 64 << 10), 0);
	struct sc_l3 *h = l3_open();
	fill_bytes(b, 256 << 10, 10);
	tokens_of(t, 10);
	ck_assert_int_eq(sc_l3_put_cost(h, &a, 777777, &loc), 0);
	ck_assert_int_eq(sc_l3_lookup(h, loc.digest, &got), 0);
	ck_assert_uint_eq(got.cost_ns, 777777);
	void *dst = aligned_alloc(4096, 256 << 10);
	struct sc_l3_fill_req req = { .loc = &got, .dst = dst, .dst_bytes = 256 << 10 }, *rp = &req, *done;
	ck_assert_int_eq(sc_l3_fill_submit(h, &rp, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(h, &done, 1, 60000000000ll), 1);
	ck_assert_int_eq(done->result, 0);
	ck_assert_uint_eq(done->cost_ns, 777777);
	ck_assert_int_eq(memcmp(dst, b, 256 << 10), 0);
	free(dst);
	sc_l3_close(h);
	free(b);
}
END_TEST

Suite *deadline_suite(void)
{
	Suite *s = suite_create("deadline");
	TCase *tc = tcase_create("deadline");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_deadline_already_past_starts_no_fill_but_l2_still_serves);
	tcase_add_test(tc, a_fill_predicted_to_lose_is_not_started);
	tcase_add_test(tc, the_prediction_prices_the_queue_ahead_on_the_ring);
	tcase_add_test(tc, a_wait_for_another_fill_stops_at_the_deadline);
	tcase_add_test(tc, an_abandoned_fill_keeps_its_memory_until_its_reads_completed);
	tcase_add_test(tc, an_abandoned_fill_outlives_its_arena_handle);
	tcase_add_test(tc, a_process_killed_with_an_abandoned_fill_in_flight_leaves_nothing_behind);
	tcase_add_test(tc, costs_survive_every_object_format);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(deadline_suite)
