/* lib/l2/evict.h — the eviction policy (S3-FIFO over shm/evq.c), room making, reclamation (lib/l2/evict.c). */
#ifndef SC_LIB_L2_EVICT_H
#define SC_LIB_L2_EVICT_H

#include "view.h"
#include "../../shm/heap.h"

/* Put a BUSY entry (shard locked, not yet linked) that saves @cost ns per hit (0: unknown) on the
 * small or main FIFO, or on main when its key is in the ghost; its key's departure is forgotten. */
void l2_policy_admit(struct sc_arena *a, struct shm_index_entry *e, uint64_t cost);
/* Take entry @idx off the FIFOs after it was unlinked (shard locked), noting why its key (of
 * fingerprint @kfp) left: @reason (enum sc_miss_reason; < 0: nothing to note) and @detail. */
void l2_policy_forget(struct sc_arena *a, uint32_t idx, uint64_t kfp, int reason, int detail);
/* The cost the policy holds for entry @idx (for people: read without the lock). */
uint64_t l2_entry_cost(struct sc_arena *a, uint32_t idx);
/* @cost clamped to SC_COST_MAX. */
uint64_t l2_cost_clamp(uint64_t cost);
/* Is a hit on @bytes worth more than recomputing what costs @cost ns (unknown: yes)? */
int l2_net_benefit(uint64_t cost, uint64_t bytes);
/* The admission doorkeeper, asked before room is made for a newcomer (key fingerprint @kfp,
 * @footprint, @cost): 0 admit, -ENOSPC refuse (SC_L2_REFUSE_LOW_BENEFIT; the key went into the
 * ghost, so that asking again soon admits it). Takes the policy mutex. */
int l2_benefit_admit(struct sc_arena *a, uint64_t kfp, uint64_t footprint, uint64_t cost);
/* Make room: evict @need_bytes of footprints (0: none) and, if @need_shard >= 0, an entry of that
 * shard. @held: shard the caller holds locked (-1 none). @exclude: entry never to evict. @cause:
 * what the evicted keys' departures say (SC_MISS_EVICTED_PRESSURE or _BUDGET).
 * 0, or -ENOSPC with *why (enum sc_l2_refusal). */
int l2_make_room(struct sc_arena *a, uint64_t need_bytes, int need_shard, int held,
		 const struct shm_index_entry *exclude, int cause, int *why);
/* The heap has the bytes but no block for @len: evict the neighbours (by address) of the policy's
 * next victims until one block fits, and allocate it tagged @tag. 0 with *off, -EAGAIN (room was
 * made but taken before we could allocate it: try again), or -ENOSPC with *why. */
int l2_make_contig(struct sc_arena *a, uint64_t len, uint64_t tag, const struct shm_index_entry *exclude,
		   uint64_t *off, int *why);
/* Reclaim pending entries of @shard (locked). */
void l2_reclaim_locked(struct sc_arena *a, uint32_t shard);
/* Is a batch of reclamation due, judged from @shard (locked)? L2_RECLAIM_BATCH entries pending
 * there, or 1/256 of the budget. A reclamation reads every reader slot's epoch and leases, so
 * writers reclaim in batches, every shard at once (l2_reclaim_all: the blocks freed together
 * merge, and the next admissions are placed in address order again). What stays pending counts as
 * used, and an allocation short of room reclaims everything first (lib/l2/place.c), so nothing is
 * evicted for it. */
int l2_reclaim_due_locked(struct sc_arena *a, uint32_t shard);
/* Reclaim in every shard the caller holds (@held, or -1) or can trylock. */
void l2_reclaim_all(struct sc_arena *a, int held);
/* Footprints retired and waiting for readers or leases, summed over the shards (a hint). */
uint64_t l2_pending(struct sc_arena *a);
uint64_t l2_budget(struct sc_arena *a);
/* The bytes of blocks the arena's heap can hold (shm_heap_capacity of its region): no entry with a
 * larger footprint can be stored. */
static inline uint64_t l2_heap_capacity(const struct sc_arena *a)
{
	return shm_heap_capacity(a->shm->hv.regions[SHM_REGION_HEAP].size);
}
uint64_t l2_used(struct sc_arena *a);

#endif
