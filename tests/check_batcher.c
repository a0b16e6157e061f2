/* tests/check_batcher.c — the generation commit batcher (lib/batcher.c): every case of the
 * reference behaviour, plus ring-full backpressure, options and terminal markers. Commits are
 * observed as a consumer would: through a real ring in a test arena and sc_ring_poll. */
#include <errno.h>
#include <string.h>

#include "sc_check.h"

#define MS 1000000ull
#define MAX_COMMITS 2048

struct commit {
	uint64_t request, session, total, seq;
	uint32_t flags, n;
	int32_t tokens[SC_BATCHER_CAPACITY_MAX];
};

struct log {
	int n;
	struct commit c[MAX_COMMITS];
};

static struct log logbuf;

static int record(const struct sc_commit *c, void *ctx)
{
	struct log *l = ctx;
	ck_assert_int_lt(l->n, MAX_COMMITS);
	ck_assert_uint_le(c->token_count, SC_BATCHER_CAPACITY_MAX);
	struct commit *o = &l->c[l->n++];
	o->request = c->request_id;
	o->session = c->session_id;
	o->total = c->generated_token_count;
	o->seq = c->seq;
	o->flags = c->flags;
	o->n = c->token_count;
	memcpy(o->tokens, c->tokens, c->token_count * sizeof(int32_t));
	return 0;
}

static struct log *drain(struct sc_arena *a)
{
	int rc;
	while ((rc = sc_ring_poll(a, record, &logbuf, 1000)) > 0)
		;
	ck_assert_msg(rc == 0, "poll: %s", sc_strerror(rc));
	return &logbuf;
}

static void expect(const struct commit *c, uint64_t total, uint32_t flags, int n, const int32_t *toks)
{
	ck_assert_uint_eq(c->request, 7);
	ck_assert_uint_eq(c->session, 9);
	ck_assert_uint_eq(c->total, total);
	ck_assert_uint_eq(c->flags, flags);
	ck_assert_int_eq((int)c->n, n);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(c->tokens[i], toks[i]);
}

static struct sc_arena *arena;
static const char *arena_name;
static struct sc_ring *ring;

static void setup_arena(uint32_t ring_bytes)
{
	memset(&logbuf, 0, sizeof(logbuf));
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .ring_count = 4, .ring_bytes = ring_bytes };
	arena = sc_test_arena_opts("batch", &o, &arena_name);
	ck_assert_int_eq(sc_ring_open(arena, &ring), 0);
}

static void teardown_arena(void)
{
	sc_ring_close(ring);
	sc_ring_consumer_close(arena);
	sc_test_arena_destroy(arena, arena_name);
}

START_TEST(the_first_token_emits_immediately)
{
	setup_arena(0);
	struct sc_batcher b;
	ck_assert_int_eq(sc_batcher_init(&b, ring, 7, 9), 0);
	ck_assert_int_eq(sc_batcher_commit(&b, 11, 0), 0);
	struct log *l = drain(arena);
	ck_assert_int_eq(l->n, 1);
	expect(&l->c[0], 1, 0, 1, (int32_t[]){ 11 });
	teardown_arena();
}
END_TEST

START_TEST(tokens_inside_one_window_accumulate_into_one_commit)
{
	setup_arena(0);
	struct sc_batcher b;
	sc_batcher_init(&b, ring, 7, 9);
	ck_assert_int_eq(sc_batcher_commit(&b, 1, 0), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sc_batcher_commit(&b, 2 + i, 10 * MS * (uint64_t)(i + 1)), 0);
	ck_assert_int_eq(drain(arena)->n, 1); /* nothing more until the window closes */
	ck_assert_int_eq(sc_batcher_commit(&b, 5, 100 * MS), 0);
	struct log *l = drain(arena);
	ck_assert_int_eq(l->n, 2);
	expect(&l->c[0], 1, 0, 1, (int32_t[]){ 1 });
	expect(&l->c[1], 5, 0, 4, (int32_t[]){ 2, 3, 4, 5 });
	teardown_arena();
}
END_TEST

START_TEST(concatenated_batches_reproduce_the_token_sequence_exactly)
{
	setup_arena(0);
	struct sc_batcher b;
	sc_batcher_init(&b, ring, 7, 9);
	for (int i = 0; i < 500; i++) {
		ck_assert_int_eq(sc_batcher_commit(&b, i, 3 * MS * (uint64_t)i), 0);
		if (i % 97 == 0)
			drain(arena); /* consume while producing, as a real consumer would */
	}
	ck_assert_int_eq(sc_batcher_flush(&b), 0);
	ck_assert_uint_eq(sc_batcher_count(&b), 500);
	struct log *l = drain(arena);
	int next = 0;
	uint64_t running = 0;
	for (int k = 0; k < l->n; k++) {
		running += l->c[k].n;
		ck_assert_uint_eq(l->c[k].total, running);
		ck_assert_uint_eq(l->c[k].seq, (uint64_t)k + 1);
		for (uint32_t j = 0; j < l->c[k].n; j++)
			ck_assert_int_eq(l->c[k].tokens[j], next++);
	}
	ck_assert_int_eq(next, 500);
	ck_assert_int_lt(l->n, 500);
	ck_assert_uint_eq(sc_batcher_commits(&b), (uint64_t)l->n);
	teardown_arena();
}
END_TEST

START_TEST(reaching_the_buffer_capacity_commits_early)
{
	setup_arena(0);
	struct sc_batcher b;
	sc_batcher_init(&b, ring, 7, 9);
	for (int t = 0; t <= (int)SC_BATCHER_CAPACITY_MAX; t++)
		ck_assert_int_eq(sc_batcher_commit(&b, t, 0), 0);
	struct log *l = drain(arena);
	ck_assert_int_eq(l->n, 2);
	ck_assert_uint_eq(l->c[0].n, 1);
	ck_assert_uint_eq(l->c[1].n, SC_BATCHER_CAPACITY_MAX);
	ck_assert_uint_eq(l->c[1].total, SC_BATCHER_CAPACITY_MAX + 1);
	ck_assert_int_eq(l->c[1].tokens[0], 1);
	ck_assert_int_eq(l->c[1].tokens[SC_BATCHER_CAPACITY_MAX - 1], SC_BATCHER_CAPACITY_MAX);
	ck_assert_uint_eq(sc_batcher_pending(&b), 0);
	teardown_arena();
}
END_TEST

START_TEST(flush_emits_the_residual_batch_exactly_once)
{
	setup_arena(0);
	struct sc_batcher b;
	sc_batcher_init(&b, ring, 7, 9);
	sc_batcher_commit(&b, 1, 0);
	sc_batcher_commit(&b, 2, 5 * MS);
	ck_assert_int_eq(sc_batcher_flush(&b), 0);
	ck_assert_int_eq(sc_batcher_flush(&b), 0);
	struct log *l = drain(arena);
	ck_assert_int_eq(l->n, 2);
	expect(&l->c[0], 1, 0, 1, (int32_t[]){ 1 });
	expect(&l->c[1], 2, 0, 1, (int32_t[]){ 2 });
	teardown_arena();
}
END_TEST

START_TEST(flush_does_not_move_the_cadence)
{
	setup_arena(0);
	struct sc_batcher b;
	sc_batcher_init(&b, ring, 7, 9);
	sc_batcher_commit(&b, 1, 0);
	sc_batcher_commit(&b, 2, 50 * MS);
	sc_batcher_flush(&b);
	/* the window counts from the last emitted commit (t=0), not from the flush (t=50) */
	sc_batcher_commit(&b, 3, 100 * MS);
	struct log *l = drain(arena);
	ck_assert_int_eq(l->n, 3);
	expect(&l->c[2], 3, 0, 1, (int32_t[]){ 3 });
	teardown_arena();
}
END_TEST

START_TEST(finish_flushes_the_residual_batch)
{
	/* the seed's "dropping flushes the residual": in C the safety net is sc_batcher_finish */
	setup_arena(0);
	struct sc_batcher b;
	sc_batcher_init(&b, ring, 7, 9);
	sc_batcher_commit(&b, 1, 0);
	sc_batcher_commit(&b, 2, 5 * MS);
	ck_assert_int_eq(sc_batcher_finish(&b, SC_COMMIT_FINISHED), 0);
	ck_assert_int_eq(sc_batcher_finish(&b, SC_COMMIT_ABORTED), 0); /* no-op */
	ck_assert_int_eq(sc_batcher_commit(&b, 3, 6 * MS), -EINVAL);
	ck_assert_int_eq(sc_batcher_flush(&b), 0);
	struct log *l = drain(arena);
	ck_assert_int_eq(l->n, 2);
	expect(&l->c[0], 1, 0, 1, (int32_t[]){ 1 });
	expect(&l->c[1], 2, SC_COMMIT_FINISHED, 1, (int32_t[]){ 2 });
	teardown_arena();
}
END_TEST

START_TEST(finish_with_nothing_pending_sends_a_bare_terminal)
{
	setup_arena(0);
	struct sc_batcher b;
	sc_batcher_init(&b, ring, 7, 9);
	sc_batcher_commit(&b, 1, 0);
	ck_assert_int_eq(sc_batcher_finish(&b, 0x4), -EINVAL);
	ck_assert_int_eq(sc_batcher_finish(&b, SC_COMMIT_ABORTED), 0);
	struct log *l = drain(arena);
	ck_assert_int_eq(l->n, 2);
	expect(&l->c[1], 1, SC_COMMIT_ABORTED, 0, NULL);
	ck_assert_uint_eq(sc_batcher_commits(&b), 2);
	teardown_arena();
}
END_TEST

START_TEST(no_ring_retains_nothing)
{
	struct sc_batcher b;
	ck_assert_int_eq(sc_batcher_init(&b, NULL, 7, 9), 0);
	ck_assert_int_eq(sc_batcher_commit(&b, 1, 0), 0);
	ck_assert_int_eq(sc_batcher_commit(&b, 2, 500 * MS), 0);
	ck_assert_int_eq(sc_batcher_flush(&b), 0);
	ck_assert_uint_eq(sc_batcher_count(&b), 0);
	ck_assert_uint_eq(sc_batcher_pending(&b), 0);
	ck_assert_uint_eq(sc_batcher_commits(&b), 0);
	ck_assert_int_eq(sc_batcher_finish(&b, SC_COMMIT_FINISHED), 0);
	ck_assert_uint_eq(sc_batcher_ring_full(&b), 0);
}
END_TEST

START_TEST(options_are_validated_and_applied)
{
	setup_arena(0);
	struct sc_batcher b;
	struct sc_batcher_opts o = { .capacity = SC_BATCHER_CAPACITY_MAX + 1 };
	ck_assert_int_eq(sc_batcher_init_opts(&b, ring, 7, 9, &o), -EINVAL);
	ck_assert_int_eq(sc_batcher_init_opts(NULL, ring, 7, 9, NULL), -EINVAL);
	o = (struct sc_batcher_opts){ .interval_ns = 10 * MS, .capacity = 4 };
	ck_assert_int_eq(sc_batcher_init_opts(&b, ring, 7, 9, &o), 0);
	sc_batcher_commit(&b, 0, 0);      /* first: emits */
	sc_batcher_commit(&b, 1, 5 * MS); /* pending */
	sc_batcher_commit(&b, 2, 10 * MS); /* 10 ms window: emits [1,2] */
	for (int t = 3; t < 7; t++)
		sc_batcher_commit(&b, t, 11 * MS); /* capacity 4: emits [3..6] */
	struct log *l = drain(arena);
	ck_assert_int_eq(l->n, 3);
	expect(&l->c[1], 3, 0, 2, (int32_t[]){ 1, 2 });
	expect(&l->c[2], 7, 0, 4, (int32_t[]){ 3, 4, 5, 6 });
	teardown_arena();
}
END_TEST

START_TEST(a_full_ring_keeps_the_batch_pending_and_loses_nothing)
{
	setup_arena(4096); /* 64 one-token records */
	struct sc_batcher b;
	struct sc_batcher_opts o = { .interval_ns = 1, .capacity = 8 };
	sc_batcher_init_opts(&b, ring, 7, 9, &o);
	int32_t next = 0;
	uint64_t t = 0;
	int rc;
	/* every token is due (interval 1 ns): fill the ring until it refuses */
	while ((rc = sc_batcher_commit(&b, next, t += 10)) == 0)
		next++;
	/* the refused emit's token was taken: a success that says the batch is deferred */
	ck_assert_int_eq(rc, SC_BATCHER_DEFERRED);
	next++;
	ck_assert_uint_eq(sc_batcher_count(&b), (uint64_t)next);
	ck_assert_uint_eq(sc_batcher_pending(&b), 1);
	ck_assert_uint_eq(sc_batcher_ring_full(&b), 1);
	/* keep going while full: tokens accumulate up to capacity, each call retries and is taken */
	while (sc_batcher_pending(&b) < 8) {
		ck_assert_int_eq(sc_batcher_commit(&b, next++, t += 10), SC_BATCHER_DEFERRED);
	}
	/* at capacity with the ring still full, the token is not taken: -EAGAIN, and only then */
	uint64_t before = sc_batcher_count(&b);
	ck_assert_int_eq(sc_batcher_commit(&b, next, t += 10), -EAGAIN);
	ck_assert_uint_eq(sc_batcher_count(&b), before);
	ck_assert_int_eq(sc_batcher_flush(&b), -EAGAIN);
	ck_assert_uint_eq(sc_batcher_ring_full(&b), 10);
	struct sc_ring_stat st[4];
	ck_assert_int_eq(sc_ring_stats(arena, st, 4), 4);
	ck_assert_uint_eq(st[sc_ring_index(ring)].ring_full, 10);
	/* the consumer makes room: the same token is now accepted and the batch goes out */
	drain(arena);
	ck_assert_int_eq(sc_batcher_commit(&b, next++, t += 10), 0);
	ck_assert_int_eq(sc_batcher_finish(&b, SC_COMMIT_FINISHED), 0);
	struct log *l = drain(arena);
	int32_t expect_tok = 0;
	uint64_t running = 0;
	for (int k = 0; k < l->n; k++) {
		running += l->c[k].n;
		ck_assert_uint_eq(l->c[k].total, running);
		for (uint32_t j = 0; j < l->c[k].n; j++)
			ck_assert_int_eq(l->c[k].tokens[j], expect_tok++);
	}
	ck_assert_int_eq(expect_tok, next);
	ck_assert_uint_eq(l->c[l->n - 1].flags, SC_COMMIT_FINISHED);
	teardown_arena();
}
END_TEST

START_TEST(finish_on_a_full_ring_can_be_retried)
{
	setup_arena(4096);
	struct sc_batcher b;
	sc_batcher_init(&b, ring, 7, 9);
	/* fill the ring directly */
	struct sc_commit c = { .request_id = 1 };
	while (sc_ring_try_submit(ring, &c) == 0)
		;
	ck_assert_int_eq(sc_batcher_commit(&b, 1, 0), SC_BATCHER_DEFERRED);
	ck_assert_int_eq(sc_batcher_finish(&b, SC_COMMIT_FINISHED), -EAGAIN);
	drain(arena);
	int before = logbuf.n;
	ck_assert_int_eq(sc_batcher_finish(&b, SC_COMMIT_FINISHED), 0);
	struct log *l = drain(arena);
	ck_assert_int_eq(l->n, before + 1);
	expect(&l->c[l->n - 1], 1, SC_COMMIT_FINISHED, 1, (int32_t[]){ 1 });
	teardown_arena();
}
END_TEST

Suite *batcher_suite(void)
{
	Suite *s = suite_create("batcher");
	TCase *tc = tcase_create("batcher");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, the_first_token_emits_immediately);
	tcase_add_test(tc, tokens_inside_one_window_accumulate_into_one_commit);
	tcase_add_test(tc, concatenated_batches_reproduce_the_token_sequence_exactly);
	tcase_add_test(tc, reaching_the_buffer_capacity_commits_early);
	tcase_add_test(tc, flush_emits_the_residual_batch_exactly_once);
	tcase_add_test(tc, flush_does_not_move_the_cadence);
	tcase_add_test(tc, finish_flushes_the_residual_batch);
	tcase_add_test(tc, finish_with_nothing_pending_sends_a_bare_terminal);
	tcase_add_test(tc, no_ring_retains_nothing);
	tcase_add_test(tc, options_are_validated_and_applied);
	tcase_add_test(tc, a_full_ring_keeps_the_batch_pending_and_loses_nothing);
	tcase_add_test(tc, finish_on_a_full_ring_can_be_retried);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(batcher_suite)
