/* lib/l2/evict.h — the eviction policy (S3-FIFO over shm/evq.c), room making, reclamation (lib/l2/evict.c). */
#ifndef SC_LIB_L2_EVICT_H
#define SC_LIB_L2_EVICT_H

#include "view.h"

/* Put a BUSY entry (shard locked, not yet linked) on the small or main FIFO, or on main when its
 * key is in the ghost. */
void l2_policy_admit(struct sc_arena *a, struct shm_index_entry *e);
/* Take entry @idx off the FIFOs after it was unlinked (shard locked). */
void l2_policy_forget(struct sc_arena *a, uint32_t idx);
/* Make room: evict @need_bytes of footprints (0: none) and, if @need_shard >= 0, an entry of that
 * shard. @held: shard the caller holds locked (-1 none). @exclude: entry never to evict.
 * 0, or -ENOSPC with *why (enum sc_l2_refusal). */
int l2_make_room(struct sc_arena *a, uint64_t need_bytes, int need_shard, int held,
		 const struct shm_index_entry *exclude, int *why);
/* The heap has the bytes but no block for @len: evict the neighbours (by address) of the policy's
 * next victims until one block fits, and allocate it tagged @tag. 0 with *off, -EAGAIN (room was
 * made but taken before we could allocate it: try again), or -ENOSPC with *why. */
int l2_make_contig(struct sc_arena *a, uint64_t len, uint64_t tag, const struct shm_index_entry *exclude,
		   uint64_t *off, int *why);
/* Reclaim pending entries of @shard (locked). */
void l2_reclaim_locked(struct sc_arena *a, uint32_t shard);
/* Reclaim in every shard the caller holds (@held, or -1) or can trylock. */
void l2_reclaim_all(struct sc_arena *a, int held);
/* Footprints retired and waiting for readers or leases, summed over the shards (a hint). */
uint64_t l2_pending(struct sc_arena *a);
uint64_t l2_budget(struct sc_arena *a);
uint64_t l2_used(struct sc_arena *a);

#endif
