/*
 * tests/check_evq.c — the L2 eviction queues (shm/evq.c) driven directly, under their mutex, in
 * a real arena's policy region: list operations against a model (order, counts, byte totals, no
 * repair where nothing was wrong), every inconsistency each operation detects (a rebuild from
 * the records, the lists as the records say), the rebuild's order and its clamping of the benefit
 * fields, fsck's check (each finding, and a node on no list ignored), the ghost's window and
 * victims, the departure table's victims and word, and the view's refusal of a wrong header.
 * The policy built on them (lib/l2/evict.c) is tests/check_policy.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../shm/evq.h"
#include "../shm/fault.h"

#define ARENA (32ull << 20)
#define MODEL_NODES 48u

struct fx {
	struct sc_arena *a;
	const char *name;
	struct shm_evq v;
	struct shm_evq *q;
};

/* An arena whose eviction lists are empty, locked by this process. */
static void fx_open(struct fx *f)
{
	f->a = sc_test_arena("evq", ARENA, &f->name);
	ck_assert_int_eq(shm_evq_view(f->a->shm, &f->v), 0);
	f->q = &f->v;
	ck_assert_uint_ge(f->q->nodes, 2 * MODEL_NODES);
	ck_assert_int_eq(shm_evq_lock(f->q), 0);
	ck_assert_uint_eq(f->q->hdr->repairs, 0);
}

static void fx_close(struct fx *f)
{
	shm_evq_unlock(f->q);
	sc_test_arena_destroy(f->a, f->name);
}

/* What the lists should hold: per list, node indexes from the oldest to the newest. */
struct model {
	uint32_t n[SHM_EVQ_LISTS];
	uint32_t idx[SHM_EVQ_LISTS][MODEL_NODES];
	uint64_t bytes[SHM_EVQ_LISTS];
	uint64_t node_bytes[MODEL_NODES];
	uint32_t on[MODEL_NODES]; /* SHM_EVQ_* */
};

static void model_remove(struct model *m, uint32_t idx)
{
	uint32_t w = m->on[idx];
	if (!w)
		return;
	uint32_t *l = m->idx[w - 1], j = 0;
	while (l[j] != idx)
		j++;
	memmove(&l[j], &l[j + 1], (m->n[w - 1] - j - 1) * sizeof(*l));
	m->n[w - 1]--;
	m->bytes[w - 1] -= m->node_bytes[idx];
	m->on[idx] = SHM_EVQ_NONE;
}

static void model_push(struct model *m, uint32_t idx, uint32_t w, uint64_t bytes)
{
	model_remove(m, idx);
	m->idx[w - 1][m->n[w - 1]++] = idx;
	m->bytes[w - 1] += bytes;
	m->node_bytes[idx] = bytes;
	m->on[idx] = w;
}

/* The lists hold exactly what @m says, walked as the policy walks them; fsck's check agrees. */
static void assert_as_model(struct shm_evq *q, const struct model *m, const char *when)
{
	for (uint32_t w = SHM_EVQ_SMALL; w <= SHM_EVQ_MAIN; w++) {
		uint32_t cur = shm_evq_tail_locked(q, w), j = 0;
		while (cur) {
			ck_assert_msg(j < m->n[w - 1], "%s: list %u longer than %u", when, w, m->n[w - 1]);
			ck_assert_msg(cur - 1 == m->idx[w - 1][j], "%s: list %u position %u holds node %u, not %u", when, w,
				      j, cur - 1, m->idx[w - 1][j]);
			cur = shm_evq_newer_locked(q, cur - 1);
			j++;
		}
		ck_assert_msg(j == m->n[w - 1], "%s: list %u holds %u nodes, not %u", when, w, j, m->n[w - 1]);
		ck_assert_uint_eq(q->hdr->count[w - 1], m->n[w - 1]);
		ck_assert_uint_eq(q->hdr->bytes[w - 1], m->bytes[w - 1]);
		ck_assert_uint_eq(q->hdr->head[w - 1], m->n[w - 1] ? m->idx[w - 1][m->n[w - 1] - 1] + 1 : 0);
	}
	for (uint32_t i = 0; i < MODEL_NODES; i++)
		ck_assert_msg(q->node[i].q == m->on[i], "%s: node %u records list %u, not %u", when, i, q->node[i].q,
			      m->on[i]);
	const char *why = NULL;
	ck_assert_msg(shm_evq_check_locked(q, &why) == 0, "%s: %s", when, why ? why : "?");
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

/* Pushes (to either list, of queued and unqueued nodes), removals and cost changes in random
 * order: after each the lists are the model's, and no operation took a consistent list for a
 * broken one (no repair). */
START_TEST(list_operations_follow_the_model)
{
	struct fx f;
	fx_open(&f);
	struct model m = { 0 };
	uint64_t x = 0x2545f4914f6cdd1dull;
	char when[64];
	for (int step = 0; step < 3000; step++) {
		uint64_t r = rnd(&x);
		uint32_t idx = (uint32_t)(r % MODEL_NODES), op = (uint32_t)(r >> 8) % 8;
		uint64_t bytes = 1 + (r >> 20) % 1000000;
		snprintf(when, sizeof(when), "step %d (op %u, node %u)", step, op, idx);
		if (op < 5) {
			uint32_t w = op < 3 ? SHM_EVQ_SMALL : SHM_EVQ_MAIN;
			shm_evq_push_locked(f.q, idx, w, bytes);
			model_push(&m, idx, w, bytes);
			ck_assert_uint_eq(f.q->node[idx].bytes, bytes);
			ck_assert_uint_eq(f.q->node[idx].seq, f.q->hdr->seq);
		} else if (op < 7) {
			shm_evq_remove_locked(f.q, idx);
			model_remove(&m, idx);
			ck_assert_uint_eq(f.q->node[idx].prev, 0);
			ck_assert_uint_eq(f.q->node[idx].next, 0);
		} else {
			shm_evq_set_cost_locked(f.q, idx, bytes * 3, 5);
			ck_assert_uint_eq(f.q->node[idx].dens, shm_evq_density(bytes * 3, f.q->node[idx].bytes));
		}
		assert_as_model(f.q, &m, when);
		ck_assert_msg(f.q->hdr->repairs == 0, "%s: a repair of consistent lists", when);
	}
	/* links, heads, tails, counts and totals lost: the rebuild restores the same order */
	for (uint32_t i = 0; i < f.q->nodes; i++)
		f.q->node[i].prev = f.q->node[i].next = (uint32_t)rnd(&x);
	memset(f.q->hdr->head, 0xab, sizeof(f.q->hdr->head));
	memset(f.q->hdr->tail, 0xcd, sizeof(f.q->hdr->tail));
	memset(f.q->hdr->count, 0x11, sizeof(f.q->hdr->count));
	memset(f.q->hdr->bytes, 0x22, sizeof(f.q->hdr->bytes));
	ck_assert_int_eq(shm_evq_rebuild_locked(f.q), 0);
	ck_assert_uint_eq(f.q->hdr->repairs, 1);
	ck_assert_uint_eq(f.q->hdr->state, SHM_EVQ_OK);
	assert_as_model(f.q, &m, "after the rebuild");
	fx_close(&f);
}
END_TEST

/* Three nodes on the small list (5, 6, 7 from the oldest), two on the main list (8, 9). */
static void three_and_two(struct fx *f, struct model *m)
{
	memset(m, 0, sizeof(*m));
	for (uint32_t i = 5; i < 10; i++) {
		uint32_t w = i < 8 ? SHM_EVQ_SMALL : SHM_EVQ_MAIN;
		shm_evq_push_locked(f->q, i, w, 1000 + i);
		model_push(m, i, w, 1000 + i);
	}
	assert_as_model(f->q, m, "set up");
}

enum { BAD_OLDER_RANGE, BAD_NEWER_RANGE, BAD_NEWER_BACK, BAD_OLDER_BACK, BAD_HEAD, BAD_TAIL, BAD_RECORD, BAD_CASES };

/* A removal that finds a link not pointing back (each of the conditions it checks, alone)
 * rebuilds: the node is off its list, the others are where their records say. */
START_TEST(remove_rebuilds_on_each_broken_link)
{
	struct fx f;
	fx_open(&f);
	struct model m;
	for (int c = 0; c < BAD_CASES; c++) {
		three_and_two(&f, &m);
		struct shm_evq *q = f.q;
		uint64_t repairs = q->hdr->repairs;
		uint32_t victim = 6; /* the middle of the small list */
		/* past the last node, bytes that read as a node pointing back at the victim: a link out of
		 * range must be refused for being out of range, not for what it leads to */
		const struct shm_evq_node fake = { .prev = 6 + 1, .next = 6 + 1, .q = SHM_EVQ_SMALL };
		memcpy(&q->node[q->nodes], &fake, sizeof(fake));
		switch (c) {
		case BAD_OLDER_RANGE: q->node[6].prev = q->nodes + 1; break;
		case BAD_NEWER_RANGE: q->node[6].next = q->nodes + 1; break;
		case BAD_NEWER_BACK: q->node[7].prev = 5 + 1; break;
		case BAD_OLDER_BACK: q->node[5].next = 7 + 1; break;
		case BAD_HEAD: victim = 7, q->hdr->head[0] = 6 + 1; break;
		case BAD_TAIL: victim = 5, q->hdr->tail[0] = 6 + 1; break;
		case BAD_RECORD: victim = 8, q->node[8].q = SHM_EVQ_LISTS + 1; break;
		}
		shm_evq_remove_locked(q, victim);
		model_remove(&m, victim);
		char when[32];
		snprintf(when, sizeof(when), "case %d", c);
		ck_assert_msg(q->hdr->repairs == repairs + 1, "%s: no rebuild", when);
		ck_assert_uint_eq(q->node[victim].q, SHM_EVQ_NONE);
		ck_assert_msg(memcmp(&fake, &q->node[q->nodes], sizeof(fake)) == 0, "%s: wrote past the last node", when);
		memset(&q->node[q->nodes], 0, sizeof(fake));
		assert_as_model(q, &m, when);
		/* the rebuild left the lists usable: take everything off without another repair */
		for (uint32_t i = 5; i < 10; i++) {
			shm_evq_remove_locked(q, i);
			model_remove(&m, i);
		}
		ck_assert_msg(q->hdr->repairs == repairs + 1, "%s: a repair after the rebuild", when);
		assert_as_model(q, &m, when);
	}
	fx_close(&f);
}
END_TEST

/* Removing the only node of a list and each end of a longer list needs no repair; so does a
 * removal from the main list (the last list there is). */
START_TEST(remove_at_each_end_needs_no_repair)
{
	struct fx f;
	fx_open(&f);
	struct model m;
	three_and_two(&f, &m);
	uint32_t order[] = { 9, 5, 7, 8, 6 }; /* main's head, small's tail, small's head, main's last, small's last */
	for (uint32_t i = 0; i < 5; i++) {
		shm_evq_remove_locked(f.q, order[i]);
		model_remove(&m, order[i]);
		assert_as_model(f.q, &m, "removal");
		shm_evq_remove_locked(f.q, order[i]); /* not queued: nothing to do */
		assert_as_model(f.q, &m, "second removal");
	}
	ck_assert_uint_eq(f.q->hdr->repairs, 0);
	ck_assert_uint_eq(f.q->hdr->bytes[0], 0);
	ck_assert_uint_eq(f.q->hdr->bytes[1], 0);
	fx_close(&f);
}
END_TEST

/* A list's count and byte total never wrap below zero, whatever a scribbled header said. */
START_TEST(remove_does_not_wrap_counts_or_totals)
{
	struct fx f;
	fx_open(&f);
	shm_evq_push_locked(f.q, 3, SHM_EVQ_MAIN, 5000);
	f.q->hdr->count[1] = 0;
	f.q->hdr->bytes[1] = 100; /* less than the node is charged */
	shm_evq_remove_locked(f.q, 3);
	ck_assert_uint_eq(f.q->hdr->count[1], 0);
	ck_assert_uint_eq(f.q->hdr->bytes[1], 0);
	ck_assert_uint_eq(f.q->hdr->head[1], 0);
	ck_assert_uint_eq(f.q->hdr->tail[1], 0);
	ck_assert_uint_eq(f.q->hdr->repairs, 0);
	fx_close(&f);
}
END_TEST

enum { PUSH_HEAD_RANGE, PUSH_HEAD_RECORD, PUSH_HEAD_NEXT, PUSH_CASES };

/* A push that finds its list's head broken (out of range, recorded on the other list, or with a
 * newer node) rebuilds first, then pushes onto the rebuilt list. */
START_TEST(push_rebuilds_on_a_broken_head)
{
	struct fx f;
	fx_open(&f);
	struct model m;
	for (int c = 0; c < PUSH_CASES; c++) {
		three_and_two(&f, &m);
		struct shm_evq *q = f.q;
		uint64_t repairs = q->hdr->repairs;
		/* past the last node, bytes that read as a head of the small list: out of range all the same */
		const struct shm_evq_node fake = { .q = SHM_EVQ_SMALL, .next = 0 };
		memcpy(&q->node[q->nodes], &fake, sizeof(fake));
		switch (c) {
		case PUSH_HEAD_RANGE: q->hdr->head[0] = q->nodes + 1; break;
		case PUSH_HEAD_RECORD: q->node[7].q = SHM_EVQ_MAIN; break; /* its record moves it */
		case PUSH_HEAD_NEXT: q->node[7].next = 5 + 1; break;
		}
		if (c == PUSH_HEAD_RECORD) {
			model_remove(&m, 7);
			/* the records order main by seq: 7 was queued before 8 and 9 */
			memmove(&m.idx[1][1], &m.idx[1][0], m.n[1] * sizeof(uint32_t));
			m.idx[1][0] = 7, m.n[1]++, m.on[7] = SHM_EVQ_MAIN, m.bytes[1] += 1007;
		}
		shm_evq_push_locked(q, 20, SHM_EVQ_SMALL, 77);
		model_push(&m, 20, SHM_EVQ_SMALL, 77);
		char when[32];
		snprintf(when, sizeof(when), "case %d", c);
		ck_assert_msg(q->hdr->repairs == repairs + 1, "%s: no rebuild", when);
		ck_assert_msg(memcmp(&fake, &q->node[q->nodes], sizeof(fake)) == 0, "%s: wrote past the last node", when);
		memset(&q->node[q->nodes], 0, sizeof(fake));
		assert_as_model(q, &m, when);
		for (uint32_t i = 0; i < MODEL_NODES; i++) {
			shm_evq_remove_locked(q, i);
			model_remove(&m, i);
		}
		ck_assert_msg(q->hdr->repairs == repairs + 1, "%s: a repair after the rebuild", when);
	}
	fx_close(&f);
}
END_TEST

/* Where a node past the last would be (the ghost table's first slots): bytes that read as a
 * queued node with benefit fields to clamp, so that any read of it changes something. */
static void fake_node_past_the_last(struct shm_evq *q, uint8_t beyond[sizeof(struct shm_evq_node)])
{
	const struct shm_evq_node fake = { .prev = 3, .next = 4, .q = SHM_EVQ_SMALL, .credit = 0x999, .bytes = 4096,
					   .seq = 5, .cost = 0, .dens = 1234 };
	memcpy(&q->node[q->nodes], &fake, sizeof(fake));
	memcpy(beyond, &q->node[q->nodes], sizeof(fake));
}

/* Entry points given a node or a list that does not exist change nothing (nor the bytes where a
 * node past the last would be). */
START_TEST(calls_naming_no_node_or_no_list_change_nothing)
{
	struct fx f;
	fx_open(&f);
	struct model m;
	three_and_two(&f, &m);
	struct shm_evq *q = f.q;
	struct shm_evq_hdr before = *q->hdr;
	struct shm_evq_node last = q->node[q->nodes - 1];
	uint8_t beyond[sizeof(struct shm_evq_node)];
	fake_node_past_the_last(q, beyond);
	shm_evq_push_locked(q, q->nodes, SHM_EVQ_SMALL, 1);
	shm_evq_push_locked(q, 30, SHM_EVQ_NONE, 1);
	shm_evq_push_locked(q, 30, SHM_EVQ_MAIN + 1, 1);
	shm_evq_set_cost_locked(q, q->nodes, 1, 1);
	shm_evq_remove_locked(q, q->nodes);
	ck_assert_uint_eq(shm_evq_newer_locked(q, q->nodes), 0);
	ck_assert_uint_eq(shm_evq_tail_locked(q, SHM_EVQ_NONE), 0);
	ck_assert_uint_eq(shm_evq_tail_locked(q, SHM_EVQ_MAIN + 1), 0);
	ck_assert_int_eq(memcmp(&before, q->hdr, sizeof(before)), 0);
	ck_assert_int_eq(memcmp(&last, &q->node[q->nodes - 1], sizeof(last)), 0);
	ck_assert_int_eq(memcmp(beyond, &q->node[q->nodes], sizeof(beyond)), 0);
	ck_assert_uint_eq(q->node[30].q, SHM_EVQ_NONE);
	memset(&q->node[q->nodes], 0, sizeof(beyond));
	fx_close(&f);
}
END_TEST

/* The last node and the last list are real: the last node as a head, as the newer and as the
 * older neighbour of a removed node, and as a tail, none of which is damage; a rebuild and fsck's
 * check stop at it (nothing past it read or written). */
START_TEST(the_last_node_is_a_node_like_any_other)
{
	struct fx f;
	fx_open(&f);
	struct model m;
	three_and_two(&f, &m);
	struct shm_evq *q = f.q;
	uint8_t beyond[sizeof(struct shm_evq_node)];
	fake_node_past_the_last(q, beyond);
	shm_evq_push_locked(q, q->nodes - 1, SHM_EVQ_MAIN, 9); /* main: 8, 9, last */
	ck_assert_uint_eq(q->hdr->head[1], q->nodes);
	ck_assert_uint_eq(shm_evq_newer_locked(q, 9), q->nodes);
	shm_evq_push_locked(q, 10, SHM_EVQ_MAIN, 10); /* onto the last node: 8, 9, last, 10 */
	ck_assert_uint_eq(q->node[q->nodes - 1].next, 10 + 1);
	const char *why = NULL;
	ck_assert_msg(shm_evq_check_locked(q, &why) == 0, "the last node queued: %s", why ? why : "?");
	shm_evq_set_cost_locked(q, q->nodes - 1, 1000, 2);
	ck_assert_uint_eq(q->node[q->nodes - 1].cost, 1000);
	shm_evq_remove_locked(q, 9);  /* its newer neighbour is the last node */
	shm_evq_remove_locked(q, 10); /* its older neighbour is the last node */
	ck_assert_uint_eq(q->hdr->head[1], q->nodes);
	shm_evq_remove_locked(q, 8);  /* the last node is the tail */
	ck_assert_uint_eq(shm_evq_tail_locked(q, SHM_EVQ_MAIN), q->nodes);
	shm_evq_remove_locked(q, q->nodes - 1);
	model_remove(&m, 8);
	model_remove(&m, 9);
	assert_as_model(q, &m, "after the last node");
	ck_assert_uint_eq(q->hdr->repairs, 0);
	ck_assert_int_eq(shm_evq_rebuild_locked(q), 0);
	assert_as_model(q, &m, "after the rebuild");
	ck_assert_int_eq(memcmp(beyond, &q->node[q->nodes], sizeof(beyond)), 0);
	memset(&q->node[q->nodes], 0, sizeof(beyond));
	fx_close(&f);
}
END_TEST

/* The oldest node is found even when the tail field lies (out of range, a node on the other
 * list, a node with an older one): one rebuild, then the true tail. */
START_TEST(tail_rebuilds_when_the_tail_field_lies)
{
	struct fx f;
	fx_open(&f);
	struct model m;
	for (int c = 0; c < 3; c++) {
		three_and_two(&f, &m);
		uint64_t repairs = f.q->hdr->repairs;
		/* past the last node, bytes that read as a tail of the small list: out of range all the same */
		struct shm_evq_node *beyond = &f.q->node[f.q->nodes];
		*beyond = (struct shm_evq_node){ .q = SHM_EVQ_SMALL, .prev = 0 };
		f.q->hdr->tail[0] = c == 0 ? f.q->nodes + 1 : c == 1 ? 8 + 1 : 6 + 1;
		ck_assert_uint_eq(shm_evq_tail_locked(f.q, SHM_EVQ_SMALL), 5 + 1);
		ck_assert_uint_eq(f.q->hdr->repairs, repairs + 1);
		ck_assert_uint_eq(shm_evq_tail_locked(f.q, SHM_EVQ_MAIN), 8 + 1);
		ck_assert_uint_eq(f.q->hdr->repairs, repairs + 1);
		/* a newer link out of range (to bytes that read as its newer node): the walk stops, and
		 * rebuilds */
		*beyond = (struct shm_evq_node){ .q = SHM_EVQ_SMALL, .prev = 5 + 1 };
		f.q->node[5].next = f.q->nodes + 1;
		ck_assert_uint_eq(shm_evq_newer_locked(f.q, 5), 0);
		ck_assert_uint_eq(f.q->hdr->repairs, repairs + 2);
		memset(beyond, 0, sizeof(*beyond));
		assert_as_model(f.q, &m, "after the walks");
		for (uint32_t i = 5; i < 10; i++)
			shm_evq_remove_locked(f.q, i);
	}
	fx_close(&f);
}
END_TEST

/* The rebuild orders each list by seq, ties by node number; drops garbage records; keeps the
 * benefit fields but clamps them (cost to its maximum, credit to its bits, density recomputed);
 * and the header's seq never goes back. */
START_TEST(rebuild_orders_by_seq_and_clamps_the_benefit_fields)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq *q = f.q;
	struct { uint32_t idx, w; uint64_t seq; } rec[] = {
		{ 12, SHM_EVQ_SMALL, 40 }, { 3, SHM_EVQ_SMALL, 7 }, { 9, SHM_EVQ_SMALL, 40 }, { 20, SHM_EVQ_MAIN, 2 },
		{ 4, SHM_EVQ_MAIN, 90 },   { 15, SHM_EVQ_SMALL, 1 },
	};
	for (uint32_t i = 0; i < sizeof(rec) / sizeof(rec[0]); i++) {
		q->node[rec[i].idx].q = rec[i].w;
		q->node[rec[i].idx].seq = rec[i].seq;
		q->node[rec[i].idx].bytes = 100 * (rec[i].idx + 1);
	}
	q->node[30].q = 7;          /* garbage: on no list */
	q->node[31].q = UINT32_MAX; /* garbage */
	q->node[12].cost = SHM_EVQ_COST_MAX + 1;
	q->node[12].credit = 5 | 0x200;
	q->node[3].cost = SHM_EVQ_COST_MAX;
	q->node[3].credit = SHM_EVQ_CREDIT_MAX | SHM_EVQ_CREDIT_GRANTED;
	q->node[3].dens = 12345;
	q->hdr->seq = 50;
	ck_assert_int_eq(shm_evq_rebuild_locked(q), 0);
	struct model m = { 0 };
	uint32_t small[] = { 15, 3, 9, 12 }, main_[] = { 20, 4 };
	for (uint32_t i = 0; i < 4; i++)
		model_push(&m, small[i], SHM_EVQ_SMALL, q->node[small[i]].bytes);
	for (uint32_t i = 0; i < 2; i++)
		model_push(&m, main_[i], SHM_EVQ_MAIN, q->node[main_[i]].bytes);
	assert_as_model(q, &m, "rebuilt");
	ck_assert_uint_eq(q->node[30].q, SHM_EVQ_NONE);
	ck_assert_uint_eq(q->node[31].q, SHM_EVQ_NONE);
	ck_assert_uint_eq(q->hdr->seq, 90);
	ck_assert_uint_eq(q->node[12].cost, SHM_EVQ_COST_MAX);
	ck_assert_uint_eq(q->node[12].credit, SHM_EVQ_CREDIT_MAX | SHM_EVQ_CREDIT_GRANTED);
	ck_assert_uint_eq(q->node[12].dens, shm_evq_density(SHM_EVQ_COST_MAX, 1300));
	ck_assert_uint_eq(q->node[3].cost, SHM_EVQ_COST_MAX);
	ck_assert_uint_eq(q->node[3].credit, SHM_EVQ_CREDIT_MAX | SHM_EVQ_CREDIT_GRANTED);
	ck_assert_uint_eq(q->node[3].dens, shm_evq_density(SHM_EVQ_COST_MAX, 400));
	/* a header seq above every node's stays */
	q->hdr->seq = 1000;
	ck_assert_int_eq(shm_evq_rebuild_locked(q), 0);
	ck_assert_uint_eq(q->hdr->seq, 1000);
	assert_as_model(q, &m, "rebuilt again");
	/* the next push is the newest */
	shm_evq_push_locked(q, 40, SHM_EVQ_MAIN, 1);
	model_push(&m, 40, SHM_EVQ_MAIN, 1);
	ck_assert_uint_eq(q->node[40].seq, 1001);
	assert_as_model(q, &m, "pushed");
	ck_assert_uint_eq(q->hdr->repairs, 2);
	fx_close(&f);
}
END_TEST

/* A lock that finds a rebuild left unfinished (state REBUILD) completes it before returning. */
START_TEST(lock_completes_an_unfinished_rebuild)
{
	struct fx f;
	fx_open(&f);
	struct model m;
	three_and_two(&f, &m);
	f.q->hdr->head[0] = f.q->hdr->tail[0] = 0;
	f.q->hdr->count[1] = 77;
	f.q->hdr->state = SHM_EVQ_REBUILD;
	shm_evq_unlock(f.q);
	ck_assert_int_eq(shm_evq_lock(f.q), 0);
	ck_assert_uint_eq(f.q->hdr->state, SHM_EVQ_OK);
	ck_assert_uint_eq(f.q->hdr->repairs, 1);
	assert_as_model(f.q, &m, "after the lock");
	/* a lock of consistent lists repairs nothing */
	shm_evq_unlock(f.q);
	ck_assert_int_eq(shm_evq_lock(f.q), 0);
	ck_assert_uint_eq(f.q->hdr->repairs, 1);
	fx_close(&f);
}
END_TEST

/* A writer killed between a node's record and its links (fault points evq.push.linking and
 * evq.remove.unlinking, in another process) leaves the record saying what it meant and the links
 * as they were, which fsck's check reports; the next locker takes the mutex over from the dead
 * holder and rebuilds the lists from the records. */
START_TEST(a_writer_killed_between_record_and_links)
{
	static const char *const points[2] = { "evq.push.linking", "evq.remove.unlinking" };
	struct fx f;
	fx_open(&f);
	struct model m;
	three_and_two(&f, &m);
	shm_evq_unlock(f.q);
	for (int i = 0; i < 2; i++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			struct sc_arena *ca;
			struct shm_evq cq;
			if (sc_arena_open(f.name, &ca) || shm_evq_view(ca->shm, &cq) || shm_evq_lock(&cq) ||
			    sc_fault_arm(points[i]))
				_exit(90);
			if (i == 0)
				shm_evq_push_locked(&cq, 20, SHM_EVQ_SMALL, 77);
			else
				shm_evq_remove_locked(&cq, 6);
			_exit(92);
		}
		sc_test_wait_killed(pid); /* by the fault point's SIGKILL, not by anything before it */
		if (i == 0) {
			ck_assert_uint_eq(f.q->node[20].q, SHM_EVQ_SMALL);
			model_push(&m, 20, SHM_EVQ_SMALL, 77);
		} else {
			ck_assert_uint_eq(f.q->node[6].q, SHM_EVQ_NONE);
			model_remove(&m, 6);
		}
		ck_assert_msg(f.q->hdr->count[0] == (i == 0 ? 3u : 4u), "%s: the links changed before the death", points[i]);
		const char *why = NULL;
		ck_assert_int_eq(shm_evq_check_locked(f.q, &why), -EBADMSG);
		uint64_t repairs = f.q->hdr->repairs;
		ck_assert_int_eq(shm_evq_lock(f.q), 0);
		ck_assert_uint_eq(f.q->hdr->repairs, repairs + 1);
		assert_as_model(f.q, &m, points[i]);
		shm_evq_unlock(f.q);
	}
	ck_assert_int_eq(shm_evq_lock(f.q), 0);
	fx_close(&f);
}
END_TEST

/* A cost and a credit are clamped at their maximum (the maximum itself kept), the granted bit
 * kept, the density follows. */
START_TEST(set_cost_clamps_at_the_maximum)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq *q = f.q;
	shm_evq_push_locked(q, 2, SHM_EVQ_SMALL, 4096);
	shm_evq_set_cost_locked(q, 2, SHM_EVQ_COST_MAX, SHM_EVQ_CREDIT_MAX);
	ck_assert_uint_eq(q->node[2].cost, SHM_EVQ_COST_MAX);
	ck_assert_uint_eq(q->node[2].credit, SHM_EVQ_CREDIT_MAX);
	shm_evq_set_cost_locked(q, 2, SHM_EVQ_COST_MAX + 1, (SHM_EVQ_CREDIT_MAX + 1) | SHM_EVQ_CREDIT_GRANTED);
	ck_assert_uint_eq(q->node[2].cost, SHM_EVQ_COST_MAX);
	ck_assert_uint_eq(q->node[2].credit, SHM_EVQ_CREDIT_MAX | SHM_EVQ_CREDIT_GRANTED);
	ck_assert_uint_eq(q->node[2].dens, shm_evq_density(SHM_EVQ_COST_MAX, 4096));
	shm_evq_set_cost_locked(q, 2, 7000, 3);
	ck_assert_uint_eq(q->node[2].cost, 7000);
	ck_assert_uint_eq(q->node[2].credit, 3);
	ck_assert_uint_eq(q->node[2].dens, (7000ull << SHM_EVQ_DENS_SHIFT) / 4096);
	/* a push charges new bytes: the density follows them, the cost stays */
	shm_evq_push_locked(q, 2, SHM_EVQ_MAIN, 1024);
	ck_assert_uint_eq(q->node[2].dens, (7000ull << SHM_EVQ_DENS_SHIFT) / 1024);
	const char *why = NULL;
	ck_assert_int_eq(shm_evq_check_locked(q, &why), 0);
	fx_close(&f);
}
END_TEST

enum {
	CK_TAIL_RANGE, CK_RECORD, CK_BACK, CK_HEAD, CK_COUNT, CK_BYTES, CK_COST, CK_CREDIT, CK_DENS, CK_UNREACHED,
	CK_CASES
};

/* fsck's check finds each kind of damage alone (with its message), and ignores the benefit
 * fields of a node on no list. */
START_TEST(check_reports_each_kind_of_damage)
{
	static const char *const want[CK_CASES] = {
		"a list link out of range or a cycle",
		"a node whose record or back link disagrees with its list",
		"a node whose record or back link disagrees with its list",
		"a list's head, count or byte total disagrees with its nodes",
		"a list's head, count or byte total disagrees with its nodes",
		"a list's head, count or byte total disagrees with its nodes",
		"a node's benefit fields disagree (cost, density, credit)",
		"a node's benefit fields disagree (cost, density, credit)",
		"a node's benefit fields disagree (cost, density, credit)",
		"nodes recorded on a list that the list does not reach",
	};
	struct fx f;
	fx_open(&f);
	struct model m;
	three_and_two(&f, &m);
	struct shm_evq *q = f.q;
	shm_evq_set_cost_locked(q, 6, 5000, 4);
	/* a node on no list may hold anything */
	q->node[40].cost = UINT64_MAX;
	q->node[40].credit = UINT32_MAX;
	q->node[40].dens = 3;
	const char *why = NULL;
	ck_assert_int_eq(shm_evq_check_locked(q, &why), 0);
	for (int c = 0; c < CK_CASES; c++) {
		struct shm_evq_hdr h = *q->hdr;
		struct shm_evq_node saved[MODEL_NODES];
		memcpy(saved, q->node, sizeof(saved));
		switch (c) {
		case CK_TAIL_RANGE: q->hdr->tail[1] = q->nodes + 1; break;
		case CK_RECORD: q->node[8].q = SHM_EVQ_SMALL; break;
		case CK_BACK: q->node[9].prev = 0; break;
		case CK_HEAD: q->hdr->head[0] = 6 + 1; break;
		case CK_COUNT: q->hdr->count[1] = 3; break;
		case CK_BYTES: q->hdr->bytes[0] += 1; break;
		case CK_COST: q->node[6].cost = SHM_EVQ_COST_MAX + 1; break;
		case CK_CREDIT: q->node[6].credit = 0x400; break;
		case CK_DENS: q->node[6].dens += 1; break;
		case CK_UNREACHED: q->node[41].q = SHM_EVQ_MAIN; break;
		}
		why = NULL;
		ck_assert_msg(shm_evq_check_locked(q, &why) == -EBADMSG, "case %d: not found", c);
		ck_assert_msg(why && strcmp(why, want[c]) == 0, "case %d: %s", c, why ? why : "(none)");
		*q->hdr = h;
		memcpy(q->node, saved, sizeof(saved));
		ck_assert_int_eq(shm_evq_check_locked(q, &why), 0);
	}
	/* a list that holds every node, its head linked back to its tail: the walk's bound finds it */
	for (uint32_t i = 5; i < 10; i++)
		shm_evq_remove_locked(q, i);
	q->node[40].cost = q->node[40].dens = q->node[40].credit = 0; /* queued now: its fields must agree */
	for (uint32_t i = 0; i < q->nodes; i++)
		shm_evq_push_locked(q, i, SHM_EVQ_SMALL, 1);
	ck_assert_int_eq(shm_evq_check_locked(q, &why), 0);
	q->node[q->nodes - 1].next = 0 + 1;
	ck_assert_int_eq(shm_evq_check_locked(q, &why), -EBADMSG);
	ck_assert_str_eq(why, "a list link out of range or a cycle");
	q->node[q->nodes - 1].next = 0;
	shm_evq_push_locked(q, 6, SHM_EVQ_SMALL, 1000 + 6);
	shm_evq_set_cost_locked(q, 6, 5000, 4);
	/* the largest values that are right pass */
	shm_evq_set_cost_locked(q, 6, SHM_EVQ_COST_MAX, SHM_EVQ_CREDIT_MAX | SHM_EVQ_CREDIT_GRANTED);
	ck_assert_int_eq(shm_evq_check_locked(q, &why), 0);
	fx_close(&f);
}
END_TEST

/* Fingerprints sharing a ghost bucket (the same low bits). */
static uint64_t same_bucket(uint32_t k)
{
	return (0x51ed27ull + k) << 32 | 0x40u;
}

/* A fingerprint is in the ghost while fewer than `window` bytes went in after it: exactly at the
 * window it is out. A take forgets it; a put of nothing still advances the clock; fingerprint 0
 * is never stored; a slot from the future (scribbled) is not believed. */
START_TEST(ghost_window_is_exact)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq *q = f.q;
	uint64_t a = same_bucket(0), b = 0x77ull << 32 | 0x80u;
	uint64_t c0 = q->hdr->ghost_clock;
	shm_evq_ghost_put_locked(q, a, 100);
	ck_assert_uint_eq(q->hdr->ghost_clock, c0 + 100);
	shm_evq_ghost_put_locked(q, b, 50);
	shm_evq_ghost_put_locked(q, b, 0); /* a put of nothing counts one */
	ck_assert_uint_eq(q->hdr->ghost_clock, c0 + 151);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, a, 51), 0);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, a, 52), 1);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, a, 51), 0); /* out of the window: forgotten all the same */
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, a, UINT64_MAX), 0);
	shm_evq_ghost_put_locked(q, a, 10);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, a, 1), 1);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, a, UINT64_MAX), 0);
	/* fingerprint 0 means an empty slot */
	uint64_t c1 = q->hdr->ghost_clock;
	shm_evq_ghost_put_locked(q, 0, 10);
	ck_assert_uint_eq(q->hdr->ghost_clock, c1);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, 0, UINT64_MAX), 0);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, 0, UINT64_MAX), 0);
	/* a slot whose clock is ahead of the ghost's */
	shm_evq_ghost_put_locked(q, a, 10);
	struct shm_evq_ghost *g = &q->ghost[a & q->ghost_mask];
	ck_assert_uint_eq(g->fp, a);
	g->clock = q->hdr->ghost_clock + 1;
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, a, UINT64_MAX), 0);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, a, UINT64_MAX), 0);
	g->clock = q->hdr->ghost_clock; /* the newest slot there can be */
	g->fp = a;
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, a, 1), 1);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, a, 1), 1);
	fx_close(&f);
}
END_TEST

/* A full bucket forgets its oldest slot; a fingerprint put again is refreshed in its own slot
 * (it takes no second one). */
START_TEST(ghost_full_bucket_forgets_its_oldest)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq *q = f.q;
	const uint32_t ways = SHM_EVQ_GHOST_WAYS;
	for (uint32_t k = 0; k < ways; k++)
		shm_evq_ghost_put_locked(q, same_bucket(k), 1);
	shm_evq_ghost_put_locked(q, same_bucket(0), 1); /* 0 is now the newest; 1 the oldest */
	shm_evq_ghost_put_locked(q, same_bucket(ways), 1);
	for (uint32_t k = 0; k <= ways; k++)
		ck_assert_msg(shm_evq_ghost_has_locked(q, same_bucket(k), UINT64_MAX) == (k != 1),
			      "fingerprint %u: wrong membership", k);
	shm_evq_ghost_put_locked(q, same_bucket(ways + 1), 1); /* then 2 goes */
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, same_bucket(2), UINT64_MAX), 0);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, same_bucket(0), UINT64_MAX), 1);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, same_bucket(3), UINT64_MAX), 1);
	/* an empty slot is taken before any held one, whatever clock it was left with */
	const uint64_t x = 0x33ull << 32 | 0x80u, y = 0x34ull << 32 | 0x80u;
	const uint32_t set = 0x80u & q->ghost_mask;
	shm_evq_ghost_put_locked(q, x, 1);
	ck_assert_uint_eq(q->ghost[set].fp, x);
	q->ghost[set + 1].clock = UINT64_MAX / 2; /* empty, with a clock from the future */
	shm_evq_ghost_put_locked(q, y, 1);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, x, UINT64_MAX), 1);
	ck_assert_uint_eq(q->ghost[set + 1].fp, y);
	fx_close(&f);
}
END_TEST

/* The departure table: a note is found with its reason and detail (one byte each, the detail
 * masked); reasons 0 and above one byte, and fingerprint 0, are not noted; a full set replaces its
 * oldest note, a key noted again keeps its slot; forget clears only its key; a view without the
 * table finds nothing. */
START_TEST(departures_keep_the_newest_notes)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq *q = f.q;
	uint64_t a = same_bucket(0);
	shm_evq_depart_note_locked(q, a, 0xff, 0x1a5);
	uint64_t w = shm_evq_depart_find(q, a);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(w), 0xff);
	ck_assert_uint_eq(SHM_EVQ_DEPART_DETAIL(w), 0xa5);
	ck_assert_uint_eq(w >> 16, q->hdr->depart_seq);
	uint64_t seq = q->hdr->depart_seq;
	shm_evq_depart_note_locked(q, a, 0x100, 1);
	shm_evq_depart_note_locked(q, a, 0, 1);
	shm_evq_depart_note_locked(q, 0, 3, 1);
	ck_assert_uint_eq(q->hdr->depart_seq, seq);
	ck_assert_uint_eq(shm_evq_depart_find(q, a), w);
	q->depart[0].word = 1ull << 16 | 3; /* an empty slot with a word (scribbled): fingerprint 0 is no key */
	ck_assert_uint_eq(shm_evq_depart_find(q, 0), 0);
	q->depart[0].word = 0;
	struct shm_evq blind = *q;
	blind.depart = NULL;
	ck_assert_uint_eq(shm_evq_depart_find(&blind, a), 0);
	/* a full set */
	const uint32_t ways = SHM_EVQ_GHOST_WAYS;
	for (uint32_t k = 1; k < ways; k++)
		shm_evq_depart_note_locked(q, same_bucket(k), 2, k);
	shm_evq_depart_note_locked(q, a, 4, 0); /* a again: its own slot, now the newest */
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, a)), 4);
	shm_evq_depart_note_locked(q, same_bucket(2), 8, 0); /* 2 again, not the oldest: its own slot too */
	for (uint32_t k = 0; k < ways; k++)
		ck_assert_msg(shm_evq_depart_find(q, same_bucket(k)) != 0, "departure %u forgotten by a note again", k);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, same_bucket(2))), 8);
	shm_evq_depart_note_locked(q, same_bucket(ways), 5, 0); /* 1 is the oldest: it goes */
	for (uint32_t k = 0; k <= ways; k++)
		ck_assert_msg((shm_evq_depart_find(q, same_bucket(k)) != 0) == (k != 1), "departure %u: wrong membership", k);
	shm_evq_depart_note_locked(q, same_bucket(ways + 1), 6, 0); /* then 3 goes */
	ck_assert_uint_eq(shm_evq_depart_find(q, same_bucket(3)), 0);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, same_bucket(2))), 8);
	/* forget clears its key only; a later note takes the freed slot before any other */
	shm_evq_depart_forget_locked(q, same_bucket(2));
	shm_evq_depart_forget_locked(q, 0);
	ck_assert_uint_eq(shm_evq_depart_find(q, same_bucket(2)), 0);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, same_bucket(ways + 1))), 6);
	shm_evq_depart_note_locked(q, same_bucket(ways + 2), 7, 0);
	for (uint32_t k = 0; k <= ways + 2; k++)
		ck_assert_msg((shm_evq_depart_find(q, same_bucket(k)) != 0) == (k == 0 || k >= ways),
			      "departure %u: wrong membership after forget", k);
	/* a slot whose word has no reason is not an answer */
	struct shm_evq_depart *d = &q->depart[a & q->ghost_mask & ~(ways - 1)];
	for (uint32_t i = 0; i < ways; i++)
		if (d[i].fp == a)
			d[i].word &= ~0xffull;
	ck_assert_uint_eq(shm_evq_depart_find(q, a), 0);
	fx_close(&f);
}
END_TEST

/* A fingerprint is looked for, and stored, in its own set only: a hostile copy of it in the next
 * set's first slot is not found, not forgotten, and an empty slot there is not taken when its own
 * set is full (the oldest of the set goes). The same for the departure table. */
START_TEST(ghost_and_departures_stay_in_their_sets)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq *q = f.q;
	const uint32_t ways = SHM_EVQ_GHOST_WAYS, set = (uint32_t)same_bucket(0) & q->ghost_mask & ~(ways - 1);
	const uint64_t bait = same_bucket(99);
	ck_assert_uint_lt(set + ways, q->ghost_mask);
	for (uint32_t k = 0; k < ways; k++)
		shm_evq_ghost_put_locked(q, same_bucket(k), 1);
	q->ghost[set + ways] = (struct shm_evq_ghost){ bait, q->hdr->ghost_clock };
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, bait, UINT64_MAX), 0);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, bait, UINT64_MAX), 0);
	ck_assert_uint_eq(q->ghost[set + ways].fp, bait);
	shm_evq_ghost_put_locked(q, bait, 1); /* into its own set (its oldest goes), not onto the copy */
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, bait, UINT64_MAX), 1);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, bait, UINT64_MAX), 1);
	shm_evq_ghost_put_locked(q, same_bucket(0), 1);
	memset(&q->ghost[set + ways], 0, sizeof(q->ghost[0]));
	shm_evq_ghost_put_locked(q, same_bucket(ways), 1);
	ck_assert_uint_eq(q->ghost[set + ways].fp, 0);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, same_bucket(1), UINT64_MAX), 0); /* 0 came back after it */
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, same_bucket(ways), UINT64_MAX), 1);

	for (uint32_t k = 0; k < ways; k++)
		shm_evq_depart_note_locked(q, same_bucket(k), 2, 0);
	q->depart[set + ways] = (struct shm_evq_depart){ bait, 1ull << 16 | 3 };
	ck_assert_uint_eq(shm_evq_depart_find(q, bait), 0);
	shm_evq_depart_forget_locked(q, bait);
	ck_assert_uint_eq(q->depart[set + ways].fp, bait);
	shm_evq_depart_note_locked(q, bait, 9, 0); /* into its own set (its oldest goes), not onto the copy */
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, bait)), 9);
	ck_assert_uint_eq(q->depart[set + ways].word, 1ull << 16 | 3);
	shm_evq_depart_forget_locked(q, bait);
	shm_evq_depart_note_locked(q, same_bucket(0), 2, 0);
	memset(&q->depart[set + ways], 0, sizeof(q->depart[0]));
	shm_evq_depart_note_locked(q, same_bucket(ways), 4, 0);
	ck_assert_uint_eq(q->depart[set + ways].fp, 0);
	ck_assert_uint_eq(shm_evq_depart_find(q, same_bucket(1)), 0);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, same_bucket(ways))), 4);
	fx_close(&f);
}
END_TEST

/* A key put again while a slot before its own is empty (a take or a forget left a hole) keeps
 * its own slot: no second copy, which would outlive the key's take (the ghost) or push out a
 * newer note (departures). */
START_TEST(a_key_put_again_after_a_hole_keeps_one_slot)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq *q = f.q;
	/* ghost: x in slot 0, y in slot 1; x taken; y put again */
	uint64_t x = same_bucket(0), y = same_bucket(1);
	shm_evq_ghost_put_locked(q, x, 1);
	shm_evq_ghost_put_locked(q, y, 1);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, x, UINT64_MAX), 1);
	shm_evq_ghost_put_locked(q, y, 1);
	const uint32_t set = (uint32_t)y & q->ghost_mask & ~(SHM_EVQ_GHOST_WAYS - 1);
	ck_assert_msg(q->ghost[set].fp == 0, "y took the hole: a second copy");
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, y, UINT64_MAX), 1);
	ck_assert_msg(shm_evq_ghost_has_locked(q, y, UINT64_MAX) == 0, "a taken key is still in the ghost");
	/* departures: x, c, y, d (ages 1-4); x forgotten; y noted again (in its own slot); then e
	 * takes x's hole, and c, the oldest note, stays */
	uint64_t c = same_bucket(2), d = same_bucket(3), e = same_bucket(4);
	shm_evq_depart_note_locked(q, x, 1, 0);
	shm_evq_depart_note_locked(q, c, 2, 0);
	shm_evq_depart_note_locked(q, y, 3, 0);
	shm_evq_depart_note_locked(q, d, 4, 0);
	shm_evq_depart_forget_locked(q, x);
	shm_evq_depart_note_locked(q, y, 5, 0);
	shm_evq_depart_note_locked(q, e, 6, 0);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, c)), 2);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, y)), 5);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, d)), 4);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, e)), 6);
	fx_close(&f);
}
END_TEST

/* Ties and copies inside one set: of equally old slots the first goes (ghost clocks that wrapped,
 * departure ages alike); a key with two copies (a scribble, or a set an older library wrote) is
 * refreshed in its first and taken from both; a note into a fresh set takes its first slot; a
 * forget of fingerprint 0 touches no slot. */
START_TEST(ties_and_copies_in_a_set)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq *q = f.q;
	const uint32_t ways = SHM_EVQ_GHOST_WAYS, set = (uint32_t)same_bucket(0) & q->ghost_mask & ~(ways - 1);
	uint64_t k[5];
	for (uint32_t i = 0; i < 5; i++)
		k[i] = same_bucket(i);
	/* ghost clocks 1, 0, 1, 0 (a put of 2^64 - 1 bytes wraps the clock): k1 is the first oldest */
	for (uint32_t i = 0; i < 4; i++)
		shm_evq_ghost_put_locked(q, k[i], i % 2 ? UINT64_MAX : 1);
	ck_assert_uint_eq(q->ghost[set + 1].clock, q->ghost[set + 3].clock);
	shm_evq_ghost_put_locked(q, k[4], 1);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, k[1], UINT64_MAX), 0);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, k[3], UINT64_MAX), 1);
	/* a key in two slots (the first empty): a put refreshes its first copy, a take forgets both */
	memset(&q->ghost[set], 0, ways * sizeof(q->ghost[0]));
	q->ghost[set + 1] = q->ghost[set + 3] = (struct shm_evq_ghost){ k[2], 0 };
	shm_evq_ghost_put_locked(q, k[2], 1);
	ck_assert_uint_eq(q->ghost[set].fp, 0);
	ck_assert_uint_eq(q->ghost[set + 1].clock, q->hdr->ghost_clock);
	ck_assert_uint_eq(q->ghost[set + 3].clock, 0);
	ck_assert_int_eq(shm_evq_ghost_take_locked(q, k[2], 1), 1);
	ck_assert_uint_eq(q->ghost[set + 1].fp, 0);
	ck_assert_uint_eq(q->ghost[set + 3].fp, 0);
	ck_assert_int_eq(shm_evq_ghost_has_locked(q, k[2], UINT64_MAX), 0);

	/* departures: a note into a fresh set takes its first slot */
	shm_evq_depart_note_locked(q, k[0], 1, 0);
	ck_assert_uint_eq(q->depart[set].fp, k[0]);
	/* four notes of the same age: the first goes */
	for (uint32_t i = 0; i < 4; i++)
		q->depart[set + i] = (struct shm_evq_depart){ k[i], 1ull << 16 | 2 };
	shm_evq_depart_note_locked(q, k[4], 3, 0);
	ck_assert_uint_eq(shm_evq_depart_find(q, k[0]), 0);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, k[3])), 2);
	/* a key in two slots is noted in the first, which find reads */
	memset(&q->depart[set], 0, ways * sizeof(q->depart[0]));
	q->depart[set + 1] = q->depart[set + 3] = (struct shm_evq_depart){ k[2], 1ull << 16 | 2 };
	shm_evq_depart_note_locked(q, k[2], 7, 0);
	ck_assert_uint_eq(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(q, k[2])), 7);
	ck_assert_uint_eq(q->depart[set].fp, 0);
	/* forget of fingerprint 0 leaves even a scribbled empty slot alone */
	q->depart[0] = (struct shm_evq_depart){ 0, 1ull << 16 | 3 }; /* fingerprint 0's set is the first */
	shm_evq_depart_forget_locked(q, 0);
	ck_assert_uint_eq(q->depart[0].word, 1ull << 16 | 3);
	q->depart[0].word = 0;
	fx_close(&f);
}
END_TEST

/* Departure sets are aligned like the ghost's buckets: as many keys as a set has slots, for
 * each of two neighbouring sets, are all remembered with their reasons, and keys whose low bits
 * fall anywhere in one set share it. */
START_TEST(departure_sets_hold_their_ways)
{
	struct fx f;
	fx_open(&f);
	const uint32_t n = 2 * SHM_EVQ_GHOST_WAYS;
	for (uint32_t low = 0; low < n; low++)
		shm_evq_depart_note_locked(f.q, (0x9e3779b9ull + low) << 32 | (0x1000u + low), low + 1, 0);
	for (uint32_t low = 0; low < n; low++)
		ck_assert_msg(SHM_EVQ_DEPART_REASON(shm_evq_depart_find(f.q, (0x9e3779b9ull + low) << 32 | (0x1000u + low))) ==
				      low + 1,
			      "departure %u of %u forgotten", low, n);
	/* five keys whose low bits fall anywhere in one aligned set: the fifth replaces the oldest */
	const uint32_t lows[5] = { 0x2001, 0x2002, 0x2003, 0x2000, 0x2001 };
	for (uint32_t i = 0; i < 5; i++)
		shm_evq_depart_note_locked(f.q, (0x51ull + i) << 32 | lows[i], i + 1, 0);
	for (uint32_t i = 0; i < 5; i++)
		ck_assert_msg((shm_evq_depart_find(f.q, (0x51ull + i) << 32 | lows[i]) != 0) == (i != 0),
			      "key %u of one set: wrong membership", i);
	fx_close(&f);
}
END_TEST

/* A lock that fails (here: the mutex names this process, which does not hold it through that
 * call) returns its error and touches nothing: an unfinished rebuild stays for a real locker. */
START_TEST(a_failed_lock_rebuilds_nothing)
{
	struct fx f;
	fx_open(&f);
	f.q->hdr->state = SHM_EVQ_REBUILD;
	ck_assert_int_eq(shm_evq_lock(f.q), -EBADMSG); /* held already, by us */
	ck_assert_uint_eq(f.q->hdr->state, SHM_EVQ_REBUILD);
	ck_assert_uint_eq(f.q->hdr->repairs, 0);
	shm_evq_unlock(f.q);
	ck_assert_int_eq(shm_evq_lock(f.q), 0);
	ck_assert_uint_eq(f.q->hdr->state, SHM_EVQ_OK);
	ck_assert_uint_eq(f.q->hdr->repairs, 1);
	fx_close(&f);
}
END_TEST

/* Formatting refuses an arena with no index entries, or whose policy region is smaller than the
 * lists of its entries need, and writes nothing; a real one formats to empty lists. */
START_TEST(format_refuses_a_region_too_small_and_formats_a_real_one)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq_hdr before = *f.q->hdr;
	struct shm_arena fake = *f.a->shm;
	fake.hv.index_entries = 0;
	ck_assert_int_eq(shm_evq_format(&fake), -EINVAL);
	uint64_t size;
	(void)shm_region(f.a->shm, SHM_REGION_POLICY, &size);
	fake.hv.index_entries = f.q->nodes * 2;
	ck_assert_uint_gt(shm_evq_bytes(fake.hv.index_entries), size);
	ck_assert_int_eq(shm_evq_format(&fake), -EINVAL);
	ck_assert_int_eq(memcmp(&before, f.q->hdr, sizeof(before)), 0);
	struct model m;
	three_and_two(&f, &m);
	shm_evq_unlock(f.q);
	for (uint32_t i = 5; i < 10; i++)
		f.q->node[i].q = SHM_EVQ_NONE; /* what a fresh region holds */
	ck_assert_int_eq(shm_evq_format(f.a->shm), 0);
	ck_assert_int_eq(shm_evq_view(f.a->shm, &f.v), 0);
	ck_assert_int_eq(shm_evq_lock(f.q), 0);
	memset(&m, 0, sizeof(m));
	assert_as_model(f.q, &m, "formatted");
	ck_assert_uint_eq(f.q->hdr->seq, 0);
	fx_close(&f);
}
END_TEST

/* A header whose geometry does not match the arena's (each field alone) is refused. */
START_TEST(view_refuses_each_wrong_header_field)
{
	struct fx f;
	fx_open(&f);
	struct shm_evq v;
	ck_assert_int_eq(shm_evq_view(f.a->shm, &v), 0);
	ck_assert_ptr_eq(v.node, f.q->node);
	ck_assert_ptr_eq(v.depart, f.q->depart);
	ck_assert_uint_eq(v.ghost_mask, f.q->ghost_mask);
	struct shm_evq_hdr *h = f.q->hdr;
	for (int c = 0; c < 6; c++) {
		struct shm_evq_hdr saved = *h;
		switch (c) {
		case 0: h->magic ^= 1; break;
		case 1: h->nodes++; break;
		case 2: h->ghost_slots *= 2; break;
		case 3: h->nodes_off += 64; break;
		case 4: h->ghost_off -= 16; break;
		case 5: h->depart_off += 16; break;
		}
		ck_assert_msg(shm_evq_view(f.a->shm, &v) == -EBADMSG, "field %d: accepted", c);
		*h = saved;
	}
	ck_assert_int_eq(shm_evq_view(f.a->shm, &v), 0);
	fx_close(&f);
}
END_TEST

Suite *evq_suite(void)
{
	Suite *s = suite_create("evq");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, list_operations_follow_the_model);
	tcase_add_test(tc, remove_rebuilds_on_each_broken_link);
	tcase_add_test(tc, remove_at_each_end_needs_no_repair);
	tcase_add_test(tc, remove_does_not_wrap_counts_or_totals);
	tcase_add_test(tc, push_rebuilds_on_a_broken_head);
	tcase_add_test(tc, calls_naming_no_node_or_no_list_change_nothing);
	tcase_add_test(tc, the_last_node_is_a_node_like_any_other);
	tcase_add_test(tc, tail_rebuilds_when_the_tail_field_lies);
	tcase_add_test(tc, rebuild_orders_by_seq_and_clamps_the_benefit_fields);
	tcase_add_test(tc, lock_completes_an_unfinished_rebuild);
	tcase_add_test(tc, a_writer_killed_between_record_and_links);
	tcase_add_test(tc, set_cost_clamps_at_the_maximum);
	tcase_add_test(tc, check_reports_each_kind_of_damage);
	tcase_add_test(tc, ghost_window_is_exact);
	tcase_add_test(tc, ghost_full_bucket_forgets_its_oldest);
	tcase_add_test(tc, departures_keep_the_newest_notes);
	tcase_add_test(tc, ghost_and_departures_stay_in_their_sets);
	tcase_add_test(tc, a_key_put_again_after_a_hole_keeps_one_slot);
	tcase_add_test(tc, ties_and_copies_in_a_set);
	tcase_add_test(tc, departure_sets_hold_their_ways);
	tcase_add_test(tc, a_failed_lock_rebuilds_nothing);
	tcase_add_test(tc, format_refuses_a_region_too_small_and_formats_a_real_one);
	tcase_add_test(tc, view_refuses_each_wrong_header_field);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(evq_suite)
