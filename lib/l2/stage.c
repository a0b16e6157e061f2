/*
 * lib/l2/stage.c — stage views and the L2 counters in SHM_REGION_STATS.
 *
 * Counters. The stats region holds one line of global counters and a table of per-stage records
 * (open addressing on the stage id, claimed by CAS of stage_id 0 -> id). Every counter is a
 * relaxed atomic add: totals only, no ordering with anything else. Writers (admit, evict, remove)
 * add directly. Readers never touch a shared line on a hit: hits and misses accumulate in the
 * stage handle and are flushed every L2_FLUSH_EVERY events, at sc_l2_stats and at
 * sc_stage_close; a process killed without closing loses fewer than L2_FLUSH_EVERY of each.
 * A record is claimed by the first process that opens the stage; two processes opening one stage
 * at once share the record the first claimed (the loser of the CAS sees its own id there).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stage.h"
#include "../probes.h"
#include "../../shm/fault.h"

int l2_ready(struct sc_arena *a)
{
	if (__builtin_expect(a->shm->forked, 0))
		return -ECHILD; /* a handle inherited through fork: the child must open its own */
	if (a->l2_ready)
		return 0;
	int rc = shm_index_view(a->shm, l2_ix(a));
	if (!rc)
		rc = shm_evq_view(a->shm, l2_q(a));
	if (rc)
		return rc;
	if (a->shm->reader_slot < 0)
		return -EBADMSG;
	if (a->shm->hv.seg_bytes) {
		if ((rc = shm_seg_view(a->shm, l2_ix(a), l2_segtab(a))))
			return rc;
		a->l2_seg_on = 1;
	}
	a->l2_ready = 1;
	return 0;
}

#define STAGE_PROBES 64u

struct l2_stage_rec *l2_stage_rec_find(struct sc_arena *a, uint64_t id, int claim)
{
	struct l2_stats_region *r = l2_stats_region(a);
	if (!id)
		return NULL;
	for (uint32_t i = 0; i < STAGE_PROBES; i++) {
		struct l2_stage_rec *s = &r->stages[(id + i) % L2_STAGE_RECS];
		uint64_t cur = atomic_load_explicit(&s->stage_id, memory_order_relaxed);
		if (cur == id)
			return s;
		if (cur == 0) {
			if (!claim)
				return NULL;
			shm_sched_point("l2.stage.claim"); /* another process may claim this slot first */
			if (atomic_compare_exchange_strong_explicit(&s->stage_id, &cur, id, memory_order_relaxed,
								    memory_order_relaxed) ||
			    cur == id)
				return s;
		}
	}
	return NULL;
}

static _Atomic uint64_t *counter(struct l2_counters *c, int which)
{
	switch (which) {
	case L2C_INSERTS: return &c->inserts;
	case L2C_EVICTIONS: return &c->evictions;
	case L2C_REJECTS: return &c->admission_rejects;
	case L2C_REFUSED: return &c->refused_bytes;
	default: return &c->removals;
	}
}

void l2_count_event(struct sc_arena *a, uint64_t stage_id, int which, uint64_t v)
{
	atomic_fetch_add_explicit(counter(&l2_stats_region(a)->global, which), v, memory_order_relaxed);
	struct l2_stage_rec *s = l2_stage_rec_find(a, stage_id, 0);
	if (s)
		atomic_fetch_add_explicit(counter(&s->c, which), v, memory_order_relaxed);
}

int l2_refuse(struct sc_arena *a, uint64_t stage_id, uint64_t bytes, int rc, int reason)
{
	if (reason < 0 || reason >= SC_L2_REFUSE_REASONS)
		reason = SC_L2_REFUSE_OTHER;
	struct l2_stats_region *r = l2_stats_region(a);
	l2_count_event(a, stage_id, L2C_REJECTS, 1);
	if (rc == -E2BIG)
		l2_count_event(a, stage_id, L2C_REFUSED, bytes);
	struct l2_stage_rec *s = l2_stage_rec_find(a, stage_id, 0);
	if (reason == SC_L2_REFUSE_LOW_BENEFIT) {
		/* no slot in the refusal lines (their size is the public arrays'): its own counter */
		struct l2_misses *m = s ? &r->misses_stage[s - r->stages] : NULL;
		atomic_fetch_add_explicit(&r->misses_global.low_benefit, 1, memory_order_relaxed);
		if (m)
			atomic_fetch_add_explicit(&m->low_benefit, 1, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&r->refused_global.n[reason], 1, memory_order_relaxed);
		if (s)
			atomic_fetch_add_explicit(&r->refused_stage[s - r->stages].n[reason], 1, memory_order_relaxed);
	}
	uint64_t sid = stage_id, b = bytes, err = (uint64_t)-rc, why = (uint64_t)reason;
	SC_PROBE(l2_reject, sid, b, err, why);
	return rc;
}

struct l2_misses *l2_misses_of(struct sc_arena *a, uint64_t stage_id)
{
	struct l2_stats_region *r = l2_stats_region(a);
	struct l2_stage_rec *s = l2_stage_rec_find(a, stage_id, 0);
	return s ? &r->misses_stage[s - r->stages] : NULL;
}

/* The stage handle's L2 misses by reason (lib/l2/miss.c counts them there) into the arena. */
static void flush_misses(struct sc_stage *st)
{
	struct l2_misses *g = &l2_stats_region(st->arena)->misses_global, *s = st->rec ? l2_misses_of(st->arena, st->id) : NULL;
	for (unsigned i = 0; i < L2_MISS_SLOTS; i++) {
		if (st->local_miss_by[i]) {
			atomic_fetch_add_explicit(&g->l2[i], st->local_miss_by[i], memory_order_relaxed);
			if (s)
				atomic_fetch_add_explicit(&s->l2[i], st->local_miss_by[i], memory_order_relaxed);
			st->local_miss_by[i] = 0;
		}
	}
	for (unsigned i = 0; i < L2_REFUSE_SLOTS; i++) {
		if (st->local_refused_by[i]) {
			atomic_fetch_add_explicit(&g->refused[i], st->local_refused_by[i], memory_order_relaxed);
			if (s)
				atomic_fetch_add_explicit(&s->refused[i], st->local_refused_by[i], memory_order_relaxed);
			st->local_refused_by[i] = 0;
		}
	}
}

void l2_flush(struct sc_stage *st)
{
	if (!st->local_hits && !st->local_misses)
		return;
	if (st->local_misses)
		flush_misses(st);
	struct l2_counters *g = &l2_stats_region(st->arena)->global;
	if (st->local_hits) {
		atomic_fetch_add_explicit(&g->hits, st->local_hits, memory_order_relaxed);
		if (st->rec)
			atomic_fetch_add_explicit(&st->rec->c.hits, st->local_hits, memory_order_relaxed);
	}
	if (st->local_misses) {
		atomic_fetch_add_explicit(&g->misses, st->local_misses, memory_order_relaxed);
		if (st->rec)
			atomic_fetch_add_explicit(&st->rec->c.misses, st->local_misses, memory_order_relaxed);
	}
	st->local_hits = st->local_misses = 0;
}

int sc_stage_open(struct sc_arena *arena, const char *model, const char *state, struct sc_stage **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!arena || !model || !state)
		return -EINVAL;
	size_t ml = strnlen(model, SC_IDENTITY_MAX + 1), sl = strnlen(state, SC_IDENTITY_MAX + 1);
	if (!ml || !sl || ml > SC_IDENTITY_MAX || sl > SC_IDENTITY_MAX)
		return -EINVAL;
	int rc = arena_usable(arena, 0);
	if (rc)
		return rc;
	rc = l2_ready(arena);
	if (rc)
		return rc;
	struct sc_stage *st = aligned_alloc(64, (sizeof(*st) + 63) & ~(size_t)63);
	if (!st)
		return -ENOMEM;
	memset(st, 0, sizeof(*st));
	st->arena = arena;
	st->last_refusal = -1;
	st->model_len = ml;
	st->state_len = sl;
	if ((rc = l2_stage_base(st, arena->shm->hv.key_secret, model, state))) {
		free(st);
		return rc;
	}
	st->rec = l2_stage_rec_find(arena, st->id, 1);
	st->next = arena->l2_stages;
	arena->l2_stages = st;
	*out = st;
	return 0; /* a full stage table only means counters go to the global line */
}

void sc_stage_close(struct sc_stage *st)
{
	if (!st)
		return;
	l2_flush(st);
	for (struct sc_stage **pp = &st->arena->l2_stages; *pp; pp = &(*pp)->next) {
		if (*pp == st) {
			*pp = st->next;
			break;
		}
	}
	free(st);
}

uint64_t sc_stage_id(const struct sc_stage *st)
{
	return st ? st->id : 0;
}

uint64_t l2_token_cost(const struct sc_stage *st)
{
	uint64_t c = st->rec ? atomic_load_explicit(&st->rec->token_cost, memory_order_relaxed) : 0;
	return c ? c : st->token_cost;
}

int sc_stage_set_token_cost(struct sc_stage *st, uint64_t ns_per_token)
{
	if (!st)
		return -EINVAL;
	st->token_cost = ns_per_token;
	if (!st->rec)
		return -ENOSPC; /* no record in the arena: only this handle charges it */
	atomic_store_explicit(&st->rec->token_cost, ns_per_token, memory_order_relaxed);
	return 0;
}

int sc_stage_token_cost(const struct sc_stage *st, uint64_t *ns_per_token)
{
	if (!st || !ns_per_token)
		return -EINVAL;
	*ns_per_token = l2_token_cost(st);
	return 0;
}

struct sc_digest sc_stage_identity(const struct sc_stage *st)
{
	return st ? st->ident : (struct sc_digest){ 0, 0 };
}
