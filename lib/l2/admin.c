/*
 * lib/l2/admin.c — removal: by key, by digest (all stages), everything, and shrinking the budget.
 * Removal unlinks and retires under the shard lock; the memory follows when no reader can see it
 * and no lease pins it (shm/index.c).
 */
#include <errno.h>

#include "admin.h"
#include "evict.h"
#include "lease.h"
#include "miss.h"
#include "stage.h"
#include "../events.h"
#include "../probes.h"
#include "../../shm/fault.h"

/* @e was unlinked (its shard lock held): count it, tell the policy, the probes and the listener. */
static void removed(struct sc_arena *a, const struct shm_index_entry *e, int reason)
{
	uint64_t sid = e->stage_id, lo = e->digest_lo, hi = e->digest_hi, b = e->sec_len[0] + e->sec_len[1],
		 why = (uint64_t)reason;
	l2_count_event(a, sid, L2C_REMOVALS, 1);
	if (reason != L2_REMOVE_CLEAR) /* a clear tells the listener once, at its end */
		events_note_locked(a, l2_ix(a), SC_EVENT_L2_REMOVED, sid, (struct sc_key){ e->key_lo, e->key_hi },
				   (struct sc_digest){ lo, hi }, (uint32_t)e->token_count);
	if (SHM_META_ORIGIN(e->meta) == SC_ORIGIN_FROM_L3)
		l2_promoted_left(a, sid, lo, hi);
	SC_PROBE(l2_remove, sid, lo, hi, b, why);
}

/* Remove @key's entry; when @rec is not 0, only if it is still that entry (gen << 32 | idx+1). */
int l2_remove_key(struct sc_arena *a, struct sc_key key, uint64_t rec, int reason)
{
	struct shm_index *ix = l2_ix(a);
	uint32_t shard = shm_index_shard_of_bucket(shm_index_bucket(ix, key.lo));
	int rc = shm_index_lock(ix, shard), err;
	if (rc)
		return rc;
	struct shm_index_entry *e = shm_index_find(ix, key.lo, key.hi, &err);
	if (err == -EBADMSG) {
		shm_index_repair_locked(ix, shard); /* cut the corrupted links, then look again */
		e = shm_index_find(ix, key.lo, key.hi, &err);
	}
	if (!e || (rec && shm_index_rec(ix, e) != rec)) {
		rc = err ? err : -ENOENT;
	} else {
		rc = shm_index_unlink_retire_locked(ix, e);
		if (!rc) {
			l2_policy_forget(a, shm_index_idx(ix, e), l2_key_fp(key.lo, key.hi), SC_MISS_REMOVED, reason);
			removed(a, e, reason);
		}
	}
	shm_fault_point("l2.remove.unlinked");
	l2_reclaim_locked(a, shard);
	shm_index_unlock(ix, shard);
	return rc;
}

int sc_l2_remove(struct sc_stage *st, struct sc_key key)
{
	if (!st)
		return -EINVAL;
	return l2_remove_key(st->arena, key, 0, L2_REMOVE_EXPLICIT);
}

/* Remove every LIVE entry matching (@all, or digest @d); returns the count. O(index entries).
 * Each key's departure says @why (enum sc_miss_reason) with @reason as its detail. */
static int remove_where(struct sc_arena *a, int all, struct sc_digest d, int reason, int why)
{
	int rc = l2_ready(a);
	if (rc)
		return rc;
	struct shm_index *ix = l2_ix(a);
	int count = 0;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		if ((rc = shm_index_lock(ix, s)))
			return rc;
		for (uint32_t i = s; i < ix->nentries; i += SHM_INDEX_SHARDS) {
			struct shm_index_entry *e = &ix->ent[i];
			if (atomic_load_explicit(&e->state, memory_order_relaxed) != SHM_ENT_LIVE)
				continue;
			if (!all && (e->digest_lo != d.lo || e->digest_hi != d.hi))
				continue;
			if (shm_index_unlink_retire_locked(ix, e) == 0) {
				l2_policy_forget(a, i, l2_key_fp(e->key_lo, e->key_hi), why, reason);
				removed(a, e, reason);
				count++;
			}
		}
		l2_reclaim_locked(a, s);
		shm_index_unlock(ix, s);
	}
	if (all)
		events_note(a, SC_EVENT_L2_CLEARED, 0, (struct sc_key){ 0, 0 }, (struct sc_digest){ 0, 0 }, 0);
	(void)l2_reap(a, 1); /* admin path: also release what dead processes left */
	return count;
}

int sc_l2_invalidate_digest(struct sc_arena *a, struct sc_digest d)
{
	if (!a)
		return -EINVAL;
	return remove_where(a, 0, d, L2_REMOVE_INVALIDATE, SC_MISS_REMOVED);
}

int l2_invalidate_why(struct sc_arena *a, struct sc_digest d, int why)
{
	if (!a)
		return -EINVAL;
	return remove_where(a, 0, d, L2_REMOVE_INVALIDATE, why);
}

int sc_l2_clear(struct sc_arena *a)
{
	if (!a)
		return -EINVAL;
	return remove_where(a, 1, (struct sc_digest){ 0, 0 }, L2_REMOVE_CLEAR, SC_MISS_REMOVED);
}

int sc_l2_shrink_to(struct sc_arena *a, uint64_t bytes)
{
	if (!a)
		return -EINVAL;
	int rc = l2_ready(a);
	if (rc)
		return rc;
	struct shm_index *ix = l2_ix(a);
	atomic_store_explicit(&ix->hdr->budget_bytes, bytes, memory_order_relaxed);
	uint64_t budget = l2_budget(a);
	for (int round = 0; round < 16; round++) {
		l2_reclaim_all(a, -1);
		uint64_t used = l2_used(a), pending = l2_pending(a);
		uint64_t live = used > pending ? used - pending : 0;
		if (live <= budget)
			return 0;
		int why;
		if (l2_make_room(a, live - budget, -1, -1, NULL, SC_MISS_EVICTED_BUDGET, &why)) {
			/* not all of it: evict what can be evicted, bounded */
			if (l2_make_room(a, 1, -1, -1, NULL, SC_MISS_EVICTED_BUDGET, &why))
				return -EBUSY;
		}
	}
	return -EAGAIN;
}
