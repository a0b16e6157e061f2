/*
 * lib/l2/evict.c — the L2 eviction policy (S3-FIFO weighted by benefit), making room, and
 * reclamation.
 *
 * Policy (the reasoning: docs/DESIGN.md, "L2 under memory pressure"). Every entry is on one of
 * two FIFO lists kept in shm/evq.c: a small probationary FIFO (10 % of the budget) and a main
 * FIFO, plus a ghost of the keys recently evicted from the small one. A new entry joins the small FIFO, or the main
 * one when its key is in the ghost (it was evicted recently and asked for again), or the main one
 * before the first eviction ever once the small one is full. Readers count hits in the entry's
 * `freq` (0..3, one relaxed store per hit at most, none once it reads 3). To free room:
 *  - from the small FIFO (when the main one is within 90 % of the budget): its oldest entry moves
 *    to the main FIFO if it was hit at least twice (freq reset), else it is evicted and its key
 *    goes to the ghost;
 *  - from the main FIFO: its oldest entry goes back to the head with freq - 1 if it was hit, else
 *    it is evicted.
 * Entries that cannot be evicted now (leased, being replaced, their shard busy) go back to the
 * head of their list unchanged. The lists' order survives between calls, so a call that stops at
 * its step bound has still made progress for the next one.
 *
 * Benefit (docs/DESIGN.md, "The benefit policy"). Each entry carries the compute a hit on it saves
 * (its cost, ns) and its density d = cost / footprint (shm_evq_density). The header keeps D, a
 * moving average of the densities of the entries evicted lately: what the cache is giving up now.
 * An entry's ratio r = d / D (1 when either is unknown) weights S3-FIFO's three choices:
 *  - credit: an entry that joins or stays in the main FIFO on merit (a hit, a move from small, a
 *    ghost hit) is granted c = min(r - 1, 63) extra passes, and one that got there otherwise (the
 *    warm-up) is granted them the first time it reaches the tail unhit; at the main FIFO's tail an
 *    unhit entry with credit goes back with c - 1 instead of being evicted (so it stays about r
 *    times as long as an average one: GDSF's cost/size, in FIFO passes);
 *  - probation: a small-FIFO entry moves to main after two hits, or one hit when r >= 2, or none
 *    when r >= 4 (its expected reuse x saved compute per byte already beats what is evicted);
 *  - admission: a newcomer whose cost is below what copying it out of L2 takes is refused (a hit
 *    would lose to recomputing), and under pressure one with r < 1/16 that is not in the ghost is
 *    refused and put in the ghost (a doorkeeper: its return is admitted).
 * With no costs, or one density for all (r = 1), every rule reduces to plain S3-FIFO.
 *
 * Fragmentation. The budget counts footprints; the heap can hold the bytes and still lack one
 * block for a large entry. Then l2_make_contig scans the heap by address from the block of the
 * policy's next victim, over runs of blocks that are free, evictable entries or retired entries
 * nobody leases (a leased entry or a reservation of a live process ends a run), finds the
 * shortest window that holds the entry, evicts the entries in it, reclaims them and allocates in
 * the merged block.
 *
 * Safety. Victims are chosen under the policy mutex (shm/evq.c) and evicted under their shard
 * lock (trylock: the policy mutex comes after one blocking shard lock). An entry is evicted only
 * when, under its shard lock, it is LIVE, not the excluded entry, and its lease record is not in
 * the lease list collected at the start of the call; a lease taken after that collection keeps
 * the memory (reclamation re-reads leases, shm/index.c) while the entry leaves the index, as if
 * the hit had come just before the eviction. Leased entries are never chosen.
 *
 * Lock order: the search mutex (searches by address only, holding nothing) -> one shard lock
 * (blocking) -> the policy mutex -> other shards by trylock -> the index's sweep_mu -> the heap
 * mutex.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "evict.h"
#include "lease.h"
#include "miss.h"
#include "stage.h"
#include "../events.h"
#include "../probes.h"
#include "../../shm/fault.h"
#include "../../shm/heap.h"

#define L2_EVICT_STEPS_MAX 65536u    /* FIFO steps one call may take (moves, reinsertions, evictions) */
#define L2_SWEEP_BLOCKS_MAX (1u << 16) /* heap blocks one neighbourhood search may visit */
#define L2_SMALL_PERCENT 10u         /* the small FIFO's share of the budget */
#define L2_GHOST_PERCENT 90u         /* the ghost remembers keys worth this share of the budget */
#define L2_TO_MAIN 2u                /* hits in the small FIFO that earn the main FIFO */
#define L2_RECLAIM_PER_CALL 64u
#define L2_RECLAIM_BATCH 32u         /* a reclamation is due once a shard has this many entries retired */
#define L2_RECLAIM_BATCH_SHIFT 8     /* ... or once they hold 1/256 of the budget */
/* The benefit policy's parameters (ratios in sixteenths: 16 is "worth what the cache evicts") */
#define L2_R_ONE 16u                 /* r = 1 */
#define L2_R_HIT_MOVE 32u            /* r >= 2: one hit in the small FIFO earns the main one */
#define L2_R_KEEP 64u                /* r >= 4: an unhit small-FIFO entry goes to main, not the ghost */
#define L2_R_LOW 1u                  /* r < 1/16: a newcomer not in the ghost is refused under pressure */
#define L2_DENS_EWMA_SHIFT 3         /* D moves 1/8 of the way to each evicted entry's density */
#define L2_RECLAIM_WAIT_NS 2000000ull /* how long room making waits for readers to leave */

#ifdef SC_TEST_HOOKS
#include "stagecache_test.h"
/* the test build can lower the bounds, to reach them without a million entries */
static uint32_t evict_steps = L2_EVICT_STEPS_MAX, sweep_blocks = L2_SWEEP_BLOCKS_MAX;
void sc_l2_set_policy_limits(uint32_t steps, uint32_t blocks)
{
	evict_steps = steps ? steps : L2_EVICT_STEPS_MAX;
	sweep_blocks = blocks ? blocks : L2_SWEEP_BLOCKS_MAX;
}
#define L2_EVICT_STEPS evict_steps
#define L2_SWEEP_BLOCKS sweep_blocks
#else
#define L2_EVICT_STEPS L2_EVICT_STEPS_MAX
#define L2_SWEEP_BLOCKS L2_SWEEP_BLOCKS_MAX
#endif

uint64_t l2_budget(struct sc_arena *a)
{
	uint64_t b = atomic_load_explicit(&l2_ix(a)->hdr->budget_bytes, memory_order_relaxed);
	uint64_t heap = l2_heap_capacity(a); /* no budget: all the heap's blocks can hold */
	return b && b < heap ? b : heap;
}

uint64_t l2_used(struct sc_arena *a)
{
	struct shm_heap_stats hs;
	if (shm_heap_stats(a->shm, &hs))
		return 0;
	return hs.used_bytes;
}

uint64_t l2_pending(struct sc_arena *a)
{
	struct shm_index *ix = l2_ix(a);
	uint64_t p = 0;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		p += ix->hdr->shards[s].pending_bytes; /* a hint: written under each shard's lock */
	return p;
}

/* The ghost's fingerprint of an entry's key (never 0). */
static uint64_t key_fp(const struct shm_index_entry *e)
{
	return l2_key_fp(e->key_lo, e->key_hi);
}

/* ---- benefit ---- */

/* r = @dens / D in sixteenths (L2_R_ONE when either is unknown), at most 2^32. */
static uint64_t ratio16(uint64_t dens, uint64_t evict_dens)
{
	if (!dens || !evict_dens)
		return L2_R_ONE;
	unsigned __int128 r = ((unsigned __int128)dens * L2_R_ONE) / evict_dens;
	return r > (1ull << 32) ? (1ull << 32) : (uint64_t)r;
}

/* Extra passes for an entry of density @dens: min(r - 1, SHM_EVQ_CREDIT_MAX), 0 below r = 2;
 * flagged as granted. */
static uint32_t credit_of(uint64_t dens, uint64_t evict_dens)
{
	uint64_t r = ratio16(dens, evict_dens);
	if (r < L2_R_HIT_MOVE)
		return SHM_EVQ_CREDIT_GRANTED;
	r = r / L2_R_ONE - 1;
	return SHM_EVQ_CREDIT_GRANTED | (r > SHM_EVQ_CREDIT_MAX ? SHM_EVQ_CREDIT_MAX : (uint32_t)r);
}

/* D moves 1/8 of the way toward the density of an entry evicted now (unknown costs leave it). */
static void note_evicted_density(struct shm_evq_hdr *h, uint64_t dens)
{
	if (!dens)
		return;
	uint64_t d = h->evict_dens;
	if (!d)
		h->evict_dens = dens;
	else if (dens >= d)
		h->evict_dens = d + ((dens - d) >> L2_DENS_EWMA_SHIFT);
	else
		h->evict_dens = d - ((d - dens) >> L2_DENS_EWMA_SHIFT);
}

uint64_t l2_cost_clamp(uint64_t cost)
{
	return cost > SC_COST_MAX ? SC_COST_MAX : cost;
}

int l2_net_benefit(uint64_t cost, uint64_t bytes)
{
	/* a hit copies the bytes out at SC_L2_RESTORE_PS_PER_BYTE: compare in ps, in 128 bits */
	return !cost || (unsigned __int128)cost * 1000u >= (unsigned __int128)bytes * SC_L2_RESTORE_PS_PER_BYTE;
}

int l2_benefit_admit(struct sc_arena *a, uint64_t kfp, uint64_t footprint, uint64_t cost)
{
	if (!cost)
		return 0; /* unknown: weighed as the average, admitted as plain S3-FIFO admits */
	struct shm_evq *q = l2_q(a);
	if (shm_evq_lock(q))
		return 0;
	struct shm_evq_hdr *h = q->hdr;
	uint64_t window = l2_budget(a) / 100 * L2_GHOST_PERCENT;
	int refuse = h->has_evicted && ratio16(shm_evq_density(cost, footprint), h->evict_dens) < L2_R_LOW &&
		     !shm_evq_ghost_has_locked(q, kfp, window);
	if (refuse) {
		/* a doorkeeper: remember it, so that asking again soon admits it (a ghost hit) */
		shm_evq_ghost_put_locked(q, kfp, footprint);
		h->low_benefit++;
	}
	shm_evq_unlock(q);
	return refuse ? -ENOSPC : 0;
}

/* ---- the FIFOs: admission and forgetting ---- */

void l2_policy_admit(struct sc_arena *a, struct shm_index_entry *e, uint64_t cost)
{
	struct shm_evq *q = l2_q(a);
	if (shm_evq_lock(q))
		return; /* unqueued: neighbourhood eviction and fsck still find it */
	struct shm_evq_hdr *h = q->hdr;
	uint64_t budget = l2_budget(a), kfp = key_fp(e);
	uint32_t which = SHM_EVQ_SMALL, idx = shm_index_idx(l2_ix(a), e), credit = 0; /* not weighed yet */
	uint64_t dens = shm_evq_density(l2_cost_clamp(cost), e->footprint);
	if (shm_evq_ghost_take_locked(q, kfp, budget / 100 * L2_GHOST_PERCENT)) {
		which = SHM_EVQ_MAIN;
		h->ghost_hits++;
		credit = credit_of(dens, h->evict_dens); /* it came back: it has earned its weight */
	} else if (!h->has_evicted && h->bytes[SHM_EVQ_SMALL - 1] >= budget / 100 * L2_SMALL_PERCENT) {
		which = SHM_EVQ_MAIN;
	}
	shm_evq_depart_forget_locked(q, kfp); /* stored again: its last departure no longer explains a miss */
	/* off any list first (a stale node keeps its old charge until then), then the benefit fields
	 * (the density from the bytes it will be charged), then the push */
	shm_evq_remove_locked(q, idx);
	q->node[idx].bytes = e->footprint;
	shm_evq_set_cost_locked(q, idx, cost, credit);
	shm_evq_push_locked(q, idx, which, e->footprint);
	shm_evq_unlock(q);
}

void l2_policy_forget(struct sc_arena *a, uint32_t idx, uint64_t kfp, int reason, int detail)
{
	struct shm_evq *q = l2_q(a);
	if (shm_evq_lock(q))
		return; /* a stale node: the evictor drops it when it meets it */
	shm_evq_remove_locked(q, idx);
	if (reason >= 0)
		shm_evq_depart_note_locked(q, kfp, (uint32_t)reason + 1, (uint32_t)detail);
	shm_evq_unlock(q);
}

uint64_t l2_entry_cost(struct sc_arena *a, uint32_t idx)
{
	struct shm_evq *q = l2_q(a);
	/* without the mutex, for people (sc_l2_entry_info): a relaxed load of a word the policy
	 * writes under it; a stale value is harmless */
	return idx < q->nodes ? __atomic_load_n(&q->node[idx].cost, __ATOMIC_RELAXED) : 0;
}

/* ---- reclamation ---- */

void l2_reclaim_locked(struct sc_arena *a, uint32_t shard)
{
	struct shm_index *ix = l2_ix(a);
	if (!ix->hdr->shards[shard].pending_head)
		return;
	/* epochs first, then leases: a reader whose epoch exit we see recorded its lease before it
	 * (release in shm_epoch_exit), so the lease read below is seen (shm/index.c, Reclamation) */
	uint64_t min = shm_epoch_min_active(a->shm);
	shm_sched_point("l2.reclaim.epochs_read"); /* between the two reads: their order is the protocol */
	uint64_t *leases;
	size_t n = l2_leases_collect(a, &leases);
	if (n == SIZE_MAX)
		return;
	shm_sched_point("l2.reclaim.leases_read");
	unsigned blocked = 0;
	(void)shm_index_reclaim_locked(ix, shard, min, leases, n, L2_RECLAIM_PER_CALL, &blocked);
	free(leases);
	if (blocked && l2_reap(a, 0) > 0) {
		/* a dead process was what pinned them: try once more */
		min = shm_epoch_min_active(a->shm);
		if ((n = l2_leases_collect(a, &leases)) != SIZE_MAX) {
			(void)shm_index_reclaim_locked(ix, shard, min, leases, n, L2_RECLAIM_PER_CALL, &blocked);
			free(leases);
		}
	}
}

int l2_reclaim_due_locked(struct sc_arena *a, uint32_t shard)
{
	const struct shm_index_shard *sh = &l2_ix(a)->hdr->shards[shard];
	SHM_MUTEX_HELD(a->shm, &sh->mu);
	return sh->pending_count >= L2_RECLAIM_BATCH || sh->pending_bytes >= l2_budget(a) >> L2_RECLAIM_BATCH_SHIFT;
}

void l2_reclaim_all(struct sc_arena *a, int held)
{
	struct shm_index *ix = l2_ix(a);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		if (!ix->hdr->shards[s].pending_head)
			continue;
		if ((int)s == held) {
			l2_reclaim_locked(a, s);
		} else if (shm_index_trylock(ix, s) == 0) {
			l2_reclaim_locked(a, s);
			shm_index_unlock(ix, s);
		}
	}
}

/* ---- one room-making call: its leases, its shard locks ---- */

struct room {
	struct sc_arena *a;
	struct shm_index *ix;
	struct shm_evq *q;
	uint64_t *leases;
	size_t nl;
	int held;
	uint32_t locked, mine;       /* shards we hold; those we took ourselves */
	uint32_t busy_mask;          /* shards we could not trylock (held by someone, maybe dead) */
	const struct shm_index_entry *exclude;
	int cause;                   /* enum sc_miss_reason noted for what this call evicts */
	uint64_t freed;              /* footprints evicted by this call */
	unsigned evicted, busy;      /* entries evicted; candidates skipped because their shard was busy */
};

/* Start a room-making call: collect the leases. On failure (no memory) it holds nothing, and there
 * is nothing to close. */
static int room_open(struct room *r, struct sc_arena *a, int held, const struct shm_index_entry *exclude, int cause)
{
	*r = (struct room){ .a = a, .ix = l2_ix(a), .q = l2_q(a), .held = held, .exclude = exclude, .cause = cause };
	r->locked = held >= 0 ? 1u << held : 0;
	r->nl = l2_leases_collect(a, &r->leases);
	return r->nl == SIZE_MAX ? -ENOMEM : 0; /* no memory: fail closed (everything counts as leased) */
}

/* Reclaim what we evicted (waiting a bounded time for readers still inside their epoch), then
 * release the shards we took. */
static void room_close(struct room *r)
{
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		if (!(r->locked & (1u << s)))
			continue;
		if (r->evicted)
			l2_reclaim_locked(r->a, s);
		if (r->mine & (1u << s))
			shm_index_unlock(r->ix, s);
	}
	free(r->leases);
	r->leases = NULL;
	r->locked = r->mine = 0;
}

static int room_lock_shard(struct room *r, uint32_t sh)
{
	if (r->locked & (1u << sh))
		return 0;
	if (shm_index_trylock(r->ix, sh)) {
		r->busy++;
		r->busy_mask |= 1u << sh;
		return -EBUSY;
	}
	r->locked |= 1u << sh;
	r->mine |= 1u << sh;
	return 0;
}

enum { C_EVICT = 0, C_SKIP = 1, C_DROP = 2 };

/* What to do with the entry behind node @idx: C_EVICT (its shard is now locked by us), C_SKIP (not
 * now: leased, excluded, in flux, shard busy) or C_DROP (not LIVE: a stale node). */
static int room_candidate(struct room *r, uint32_t idx, struct shm_index_entry **out)
{
	struct shm_index_entry *e = &r->ix->ent[idx];
	uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
	if (st == SHM_ENT_RETIRED || st == SHM_ENT_FREE || st == SHM_ENT_FREEING)
		return C_DROP;
	if (e == r->exclude || shm_index_leased(r->leases, r->nl, shm_index_rec(r->ix, e)))
		return C_SKIP;
	if (room_lock_shard(r, idx % SHM_INDEX_SHARDS))
		return C_SKIP;
	st = atomic_load_explicit(&e->state, memory_order_relaxed); /* stable now */
	if (st != SHM_ENT_LIVE)
		return st == SHM_ENT_BUSY ? C_SKIP : C_DROP;
	*out = e;
	return C_EVICT;
}

/* Evict LIVE entry @e (its shard and the policy mutex held). */
static void room_evict(struct room *r, struct shm_index_entry *e, int to_ghost)
{
	uint32_t idx = shm_index_idx(r->ix, e);
	uint64_t lo = e->digest_lo, hi = e->digest_hi, fp = e->footprint, sid = e->stage_id, kfp = key_fp(e);
	uint32_t meta = e->meta;
	shm_sched_point("l2.evict.chosen");
	uint64_t dens = r->q->node[idx].dens;
	int rc = shm_index_unlink_retire_locked(r->ix, e);
	shm_evq_remove_locked(r->q, idx);
	if (rc)
		return;
	shm_fault_point("l2.evict.unlinked");
	if (to_ghost)
		shm_evq_ghost_put_locked(r->q, kfp, fp);
	shm_evq_depart_note_locked(r->q, kfp, (uint32_t)r->cause + 1, 0);
	note_evicted_density(r->q->hdr, dens);
	r->q->hdr->has_evicted = 1;
	r->freed += fp;
	r->evicted++;
	l2_count_event(r->a, sid, L2C_EVICTIONS, 1);
	events_note_locked(r->a, r->ix, SC_EVENT_L2_REMOVED, sid, (struct sc_key){ e->key_lo, e->key_hi }, (struct sc_digest){ lo, hi },
			   (uint32_t)e->token_count);
	if (SHM_META_ORIGIN(meta) == SC_ORIGIN_FROM_L3)
		l2_promoted_left(r->a, sid, lo, hi);
	SC_PROBE(l2_evict, sid, lo, hi, fp);
}

/* Bytes on the FIFOs that no lease (and not @exclude) pins: what eviction could free at most. */
static uint64_t evictable_bytes(struct room *r)
{
	struct shm_evq *q = r->q;
	uint64_t total = q->hdr->bytes[0] + q->hdr->bytes[1], pinned = 0;
	for (size_t i = 0; i < r->nl; i++) {
		if (i && r->leases[i] == r->leases[i - 1])
			continue; /* the same entry leased twice */
		uint32_t idx = (uint32_t)r->leases[i] - 1, gen = (uint32_t)(r->leases[i] >> 32);
		if (idx < q->nodes && q->node[idx].q != SHM_EVQ_NONE && r->ix->ent[idx].gen == gen)
			pinned += q->node[idx].bytes;
	}
	if (r->exclude) {
		uint32_t x = shm_index_idx(r->ix, r->exclude);
		if (q->node[x].q != SHM_EVQ_NONE &&
		    !shm_index_leased(r->leases, r->nl, shm_index_rec(r->ix, r->exclude)))
			pinned += q->node[x].bytes;
	}
	return total > pinned ? total - pinned : 0;
}

/*
 * S3-FIFO eviction until @need bytes were freed (policy mutex held). 0, or -ENOSPC with *why:
 * LEASED before evicting anything when the unpinned bytes on the lists cannot cover @need,
 * SCAN_LIMIT when the step bound ends the walk.
 */
static int evict_bytes(struct room *r, uint64_t need, int *why)
{
	struct shm_evq *q = r->q;
	struct shm_evq_hdr *h = q->hdr;
	uint64_t budget = l2_budget(r->a), small_cap = budget / 100 * L2_SMALL_PERCENT, main_cap = budget - small_cap;
	if (evictable_bytes(r) < need) {
		*why = SC_L2_REFUSE_LEASED;
		return -ENOSPC;
	}
	uint32_t steps = 0;
	while (r->freed < need) {
		/* one eviction, as S3-FIFO's evict(): from main when it is over its share or small is
		 * empty, else from small (moving hit entries to main until one is evicted) */
		uint32_t which = h->bytes[SHM_EVQ_MAIN - 1] > main_cap || !h->count[SHM_EVQ_SMALL - 1] ? SHM_EVQ_MAIN
													 : SHM_EVQ_SMALL;
		unsigned before = r->evicted;
		uint32_t skipped = 0; /* entries of this list put back unchanged since the last progress */
		int switched = 0;
		while (r->evicted == before) {
			if (++steps > L2_EVICT_STEPS) {
				*why = SC_L2_REFUSE_SCAN_LIMIT;
				return -ENOSPC;
			}
			uint32_t t = shm_evq_tail_locked(q, which);
			if (!t) {
				uint32_t other = which == SHM_EVQ_MAIN ? SHM_EVQ_SMALL : SHM_EVQ_MAIN;
				if (!(t = shm_evq_tail_locked(q, other))) {
					*why = SC_L2_REFUSE_LEASED; /* nothing left on the lists */
					return -ENOSPC;
				}
				which = other;
			}
			uint32_t idx = t - 1;
			struct shm_index_entry *e = NULL, *ent = &r->ix->ent[idx];
			int c = room_candidate(r, idx, &e);
			if (c == C_DROP) {
				shm_evq_remove_locked(q, idx);
				skipped = 0;
				continue;
			}
			uint32_t f = atomic_load_explicit(&ent->freq, memory_order_relaxed);
			struct shm_evq_node *nd = &q->node[idx];
			uint64_t bytes = nd->bytes, r16 = ratio16(nd->dens, h->evict_dens);
			if (which == SHM_EVQ_SMALL && (f >= L2_TO_MAIN || (f >= 1 && r16 >= L2_R_HIT_MOVE) || r16 >= L2_R_KEEP)) {
				/* two hits, or fewer when its benefit per byte beats what is evicted */
				atomic_store_explicit(&ent->freq, 0, memory_order_relaxed);
				nd->credit = credit_of(nd->dens, h->evict_dens);
				shm_evq_push_locked(q, idx, SHM_EVQ_MAIN, bytes);
				h->to_main++;
				h->benefit_moves += f < L2_TO_MAIN;
			} else if (which == SHM_EVQ_MAIN && f >= 1) {
				atomic_store_explicit(&ent->freq, (f < L2_FREQ_MAX ? f : L2_FREQ_MAX) - 1, memory_order_relaxed);
				nd->credit = credit_of(nd->dens, h->evict_dens); /* hit again: its weight renewed */
				shm_evq_push_locked(q, idx, SHM_EVQ_MAIN, bytes);
				h->reinserted++;
			} else if (which == SHM_EVQ_MAIN && SHM_EVQ_CREDIT(nd->credit) &&
				   SHM_EVQ_CREDIT(nd->credit) <= SHM_EVQ_CREDIT_MAX) {
				nd->credit--; /* unhit, but worth more than what is evicted: one more pass */
				shm_evq_push_locked(q, idx, SHM_EVQ_MAIN, bytes);
				h->credit_kept++;
			} else if (which == SHM_EVQ_MAIN && !(nd->credit & SHM_EVQ_CREDIT_GRANTED) &&
				   SHM_EVQ_CREDIT(credit_of(nd->dens, h->evict_dens))) {
				/* in main since before anything was weighed (the warm-up): weighed now, once */
				nd->credit = credit_of(nd->dens, h->evict_dens) - 1;
				shm_evq_push_locked(q, idx, SHM_EVQ_MAIN, bytes);
				h->credit_kept++;
			} else if (c == C_SKIP) {
				shm_evq_push_locked(q, idx, which, bytes); /* not now: back to the head */
				h->skipped++;
				if (++skipped <= h->count[which - 1])
					continue;
				/* this whole list went round and nothing on it can go now: the other one
				 * gives instead; when neither can, stop */
				if (switched) {
					*why = r->busy ? SC_L2_REFUSE_SCAN_LIMIT : SC_L2_REFUSE_LEASED;
					return -ENOSPC;
				}
				which = which == SHM_EVQ_MAIN ? SHM_EVQ_SMALL : SHM_EVQ_MAIN;
				switched = 1;
				skipped = 0;
				continue;
			} else {
				room_evict(r, e, which == SHM_EVQ_SMALL);
			}
			skipped = 0;
		}
	}
	return 0;
}

/* Evict one entry of @shard (the index has no free entry there), oldest first. */
static int evict_in_shard(struct room *r, uint32_t shard, int *why)
{
	struct shm_evq *q = r->q;
	uint32_t steps = 0, unleased = 0;
	for (uint32_t which = SHM_EVQ_SMALL; which <= SHM_EVQ_MAIN; which++) {
		uint32_t cur = shm_evq_tail_locked(q, which);
		while (cur && steps++ < L2_EVICT_STEPS) {
			uint32_t idx = cur - 1;
			cur = shm_evq_newer_locked(q, idx);
			if (idx % SHM_INDEX_SHARDS != shard)
				continue;
			struct shm_index_entry *e = NULL;
			int c = room_candidate(r, idx, &e);
			if (c == C_DROP) {
				shm_evq_remove_locked(q, idx);
				continue;
			}
			if (c == C_SKIP) {
				unleased += !shm_index_leased(r->leases, r->nl, shm_index_rec(r->ix, &r->ix->ent[idx]));
				continue;
			}
			room_evict(r, e, which == SHM_EVQ_SMALL);
			return 0;
		}
	}
	*why = steps > L2_EVICT_STEPS || unleased ? SC_L2_REFUSE_SCAN_LIMIT : SC_L2_REFUSE_LEASED;
	return -ENOSPC;
}

int l2_make_room(struct sc_arena *a, uint64_t need_bytes, int need_shard, int held,
		 const struct shm_index_entry *exclude, int cause, int *why)
{
	int rc = -ENOSPC;
	*why = SC_L2_REFUSE_OTHER;
	for (int attempt = 0; attempt < 2; attempt++) {
		struct room r;
		if (room_open(&r, a, held, exclude, cause))
			return -ENOSPC;
		if ((rc = shm_evq_lock(r.q))) {
			room_close(&r);
			return -ENOSPC;
		}
		if (need_bytes)
			rc = evict_bytes(&r, need_bytes, why);
		if (!rc && need_shard >= 0)
			rc = evict_in_shard(&r, (uint32_t)need_shard, why);
		shm_evq_unlock(r.q);
		uint32_t busy = r.busy_mask;
		need_bytes -= r.freed < need_bytes ? r.freed : need_bytes;
		room_close(&r);
		if (!rc || !busy || held >= 0)
			return rc;
		/* shards we could not trylock stood in the way: wait for each once, holding nothing
		 * (a dead holder's shard is taken over and repaired by the lock), then try again */
		for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
			if ((busy & (1u << s)) && shm_index_lock(l2_ix(a), s) == 0)
				shm_index_unlock(l2_ix(a), s);
	}
	return rc;
}

/* ---- fragmentation: eviction by address neighbourhood ---- */

enum { B_FREE = 0, B_EVICT = 1, B_PENDING = 2 };

struct wblk {
	uint64_t off, bytes, cost;
	uint32_t idx, gen;
	uint32_t kind;
	uint32_t pad;
};

struct sweep {
	struct room *r;
	uint64_t len;
	struct wblk *w;              /* the window: w[head .. head + n) */
	uint32_t head, n, cap;
	uint64_t cost, prev_end;
	int found, wrapped, nomem;
	uint64_t first_off, last_off; /* the block the scan started at; the last one seen */
	uint64_t visited;
	/* the cheapest window that fits so far */
	struct wblk *best;
	uint32_t nbest, capbest;
	uint64_t best_cost;
};

/* Keep the current window as the best one. 0, or -ENOMEM. */
static int keep_best(struct sweep *s)
{
	if (s->n > s->capbest) {
		struct wblk *nb = realloc(s->best, s->n * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		s->best = nb;
		s->capbest = s->n;
	}
	memcpy(s->best, s->w + s->head, s->n * sizeof(*s->best));
	s->nbest = s->n;
	s->best_cost = s->cost;
	s->found = 1;
	return 0;
}

static int win_fits(const struct sweep *s, uint32_t from)
{
	const struct wblk *f = &s->w[s->head + from], *l = &s->w[s->head + s->n - 1];
	return shm_heap_span_fits(f->off, l->off + l->bytes, s->len);
}

static int sweep_cb(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	struct sweep *s = ctx;
	struct room *r = s->r;
	/* the scan starts at the block of first_off, or at the heap's start when that names no
	 * block; it has wrapped when an offset goes back (at the heap's first block too) */
	if (!s->visited++)
		s->first_off = off;
	else if (off < s->last_off)
		s->wrapped = 1;
	s->last_off = off;
	int contiguous = s->n && off == s->prev_end + SHM_HEAP_BLOCK_HDR;
	/* past the start again (the second lap): only to follow a run that began before it; every
	 * window from here on was seen in the first lap */
	if (s->wrapped && off >= s->first_off && (!contiguous || s->w[s->head].off >= s->first_off))
		return 1;
	s->prev_end = off + bytes;
	struct wblk b = { .off = off, .bytes = bytes, .kind = B_FREE };
	if (allocated) {
		int pinned = 1;
		if (SHM_TAG_TYPE(tag) == SHM_TAG_ENTRY) {
			uint32_t idx = (uint32_t)(tag >> 32) & 0xffffff, gen = (uint32_t)tag;
			if (idx < r->ix->nentries) {
				const struct shm_index_entry *e = &r->ix->ent[idx];
				uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
				uint64_t rec = ((uint64_t)gen << 32) | (idx + 1);
				if (e->gen == gen && e->payload_off == off && (r->locked & (1u << (idx % SHM_INDEX_SHARDS))) &&
				    !shm_index_leased(r->leases, r->nl, rec)) {
					if (st == SHM_ENT_LIVE && e != r->exclude) {
						/* what losing it costs: by how soon the policy would evict it
						 * anyway (small FIFO and not hit twice first, main FIFO and hit
						 * last), then by its bytes (less to evict, less to refill) */
						uint32_t f = atomic_load_explicit(&e->freq, memory_order_relaxed);
						const struct shm_evq_node *nd = &r->q->node[idx];
						uint64_t w = nd->q == SHM_EVQ_MAIN ? 3 + (f < L2_FREQ_MAX ? f : L2_FREQ_MAX)
										   : f >= L2_TO_MAIN ? 2 : 1;
						/* and by what it is worth: its credit counts as passes */
						w += SHM_EVQ_CREDIT(nd->credit) <= SHM_EVQ_CREDIT_MAX ? SHM_EVQ_CREDIT(nd->credit) : 0;
						w *= (1ull << 20) + bytes;
						b = (struct wblk){ .off = off, .bytes = bytes, .idx = idx, .gen = gen,
								   .kind = B_EVICT, .cost = w };
						pinned = 0;
					} else if (st == SHM_ENT_RETIRED) {
						b.kind = B_PENDING; /* freed by reclamation, nobody leases it */
						pinned = 0;
					}
				}
			}
		}
		if (pinned) {
			s->n = 0; /* a leased entry, a fill in flight, something in flux: ends the run */
			s->cost = 0;
			return 0;
		}
	}
	if (!contiguous) {
		s->n = 0;
		s->cost = 0;
	}
	if (s->head + s->n == s->cap) {
		/* compact, or grow up to the scan bound */
		if (s->head) {
			memmove(s->w, s->w + s->head, s->n * sizeof(*s->w));
			s->head = 0;
		} else {
			uint32_t nc = s->cap ? s->cap * 2 : 256;
			struct wblk *nw = realloc(s->w, nc * sizeof(*nw));
			if (!nw) {
				s->nomem = 1;
				return 1;
			}
			s->w = nw;
			s->cap = nc;
		}
	}
	if (!s->n)
		s->head = 0;
	s->w[s->head + s->n++] = b;
	s->cost += b.cost;
	if (!win_fits(s, 0))
		return 0;
	/* shortest window: drop leading blocks we would evict (never a free one: it would merge into
	 * the allocation's block and move its start) while the rest still fits */
	while (s->n > 1 && s->w[s->head].kind != B_FREE && win_fits(s, 1)) {
		s->cost -= s->w[s->head].cost;
		s->head++;
		s->n--;
	}
	if ((!s->found || s->cost < s->best_cost) && keep_best(s)) {
		s->nomem = 1;
		return 1;
	}
	if (!s->best_cost)
		return 1; /* nothing to evict: cannot do better */
	/* slide on: the next window starts one block later */
	s->cost -= s->w[s->head].cost;
	s->head++;
	s->n--;
	return 0;
}

int l2_make_contig(struct sc_arena *a, uint64_t len, uint64_t tag, const struct shm_index_entry *exclude,
		   uint64_t *off, int *why)
{
	struct room r;
	*why = SC_L2_REFUSE_OTHER;
	/* one search at a time: two would lock each other's shards out and pin each other's
	 * windows (it guards no state: a dead holder's lock is simply taken over) */
	struct shm_mutex *smu = &l2_q(a)->hdr->search_mu;
	int lrc = shm_mutex_lock(a->shm, smu);
	if (lrc && lrc != -EOWNERDEAD)
		return -ENOSPC;
	if (room_open(&r, a, -1, exclude, SC_MISS_EVICTED_PRESSURE)) {
		shm_mutex_unlock(a->shm, smu);
		return -ENOSPC;
	}
	/* every shard we can have now, for the whole search: the entries of the window we pick stay
	 * as we saw them (a reader may still lease one: see the top of this file); entries of shards
	 * held by others are pinned for this search */
	for (uint32_t sh = 0; sh < SHM_INDEX_SHARDS; sh++)
		(void)room_lock_shard(&r, sh);
	/* start at the block of the policy's next victim: its neighbours go with it */
	uint64_t start = 0;
	if (shm_evq_lock(r.q) == 0) {
		uint32_t t = shm_evq_tail_locked(r.q, SHM_EVQ_SMALL);
		if (!t)
			t = shm_evq_tail_locked(r.q, SHM_EVQ_MAIN);
		if (t)
			start = __atomic_load_n(&r.ix->ent[t - 1].payload_off, __ATOMIC_RELAXED);
		shm_evq_unlock(r.q);
	}
	struct sweep s = { .r = &r, .len = len };
	int visited = shm_heap_scan(a->shm, start, L2_SWEEP_BLOCKS, sweep_cb, &s);
	int rc = -ENOSPC;
	uint32_t busy = r.busy_mask;
	if (visited < 0 || s.nomem) {
		*why = SC_L2_REFUSE_OTHER;
		goto out;
	}
	if (!s.found) {
		/* no run of unpinned blocks holds it: the whole heap was looked at, or only the bound,
		 * or shards held by others pinned what would have made the run */
		*why = busy || (uint64_t)visited >= L2_SWEEP_BLOCKS ? SC_L2_REFUSE_SCAN_LIMIT : SC_L2_REFUSE_NO_ROOM;
		goto out;
	}
	shm_sched_point("l2.frag.window");
	/* evict the window's entries (their shards are ours since before the search) */
	if (shm_evq_lock(r.q) == 0) {
		for (uint32_t i = 0; i < s.nbest; i++) {
			const struct wblk *b = &s.best[i];
			if (b->kind != B_EVICT)
				continue;
			struct shm_index_entry *e = &r.ix->ent[b->idx];
			if (room_lock_shard(&r, b->idx % SHM_INDEX_SHARDS) ||
			    atomic_load_explicit(&e->state, memory_order_relaxed) != SHM_ENT_LIVE || e->gen != b->gen ||
			    e->payload_off != b->off || e == exclude)
				continue;
			room_evict(&r, e, 1);
		}
		shm_evq_unlock(r.q);
	}
	/* reclaim them (and the window's retired blocks) as soon as readers let us, then allocate in
	 * the merged block; the shards are released first (each round takes them again by trylock) */
	uint64_t at = s.best[0].off, deadline = shm_now_ns() + L2_RECLAIM_WAIT_NS;
	room_close(&r);
	for (;;) {
		l2_reclaim_all(a, -1);
		shm_sched_point("l2.frag.alloc");
		if (shm_heap_alloc_at(a->shm, at, len, tag, off) == 0 || shm_heap_alloc(a->shm, len, tag, off) == 0) {
			rc = 0;
			break;
		}
		if (shm_now_ns() > deadline) {
			rc = -EAGAIN; /* readers or a new lease still hold part of it, or another writer took it */
			break;
		}
		sched_yield();
	}
out:
	free(s.w);
	free(s.best);
	room_close(&r);
	/* the shards go before the search lock: the next search must find them free */
	shm_sched_point("l2.frag.done");
	shm_mutex_unlock(a->shm, smu);
	if (rc && busy) {
		/* shards held by others stood in the way: wait for each once, holding nothing (a dead
		 * holder's shard is taken over and repaired by the lock), and let the caller try again */
		for (uint32_t sh = 0; sh < SHM_INDEX_SHARDS; sh++)
			if ((busy & (1u << sh)) && shm_index_lock(l2_ix(a), sh) == 0)
				shm_index_unlock(l2_ix(a), sh);
		rc = -EAGAIN;
	}
	return rc;
}
