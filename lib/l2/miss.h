/* lib/l2/miss.h — why lookups miss: the departure table's notes and the miss-reason counters
 * (lib/l2/miss.c). */
#ifndef SC_LIB_L2_MISS_H
#define SC_LIB_L2_MISS_H

#include "view.h"

/* The fingerprint of a key (L2 key, or a prefix hash P for the L3 tier) in the ghost and the
 * departure table: never 0. */
static inline uint64_t l2_key_fp(uint64_t lo, uint64_t hi)
{
	uint64_t fp = lo ^ (hi * 0x9e3779b97f4a7c15ull);
	return fp ? fp : 1;
}

/* Note why the key of fingerprint @fp left L2 or was refused (enum sc_miss_reason, its detail).
 * Takes the policy mutex (lock order: after a shard lock, never under the location index's
 * mutex). */
void l2_depart_note(struct sc_arena *a, uint64_t fp, int reason, int detail);
/* The reason a lookup of @fp found nothing (enum sc_miss_reason) and its detail, from the
 * departure table without a lock: SC_MISS_NEVER_STORED when nothing is noted. */
int l2_depart_reason(struct sc_arena *a, uint64_t fp, uint32_t *detail);

/* Count one L2 miss of @st under @reason (in the stage handle, flushed with its hit and miss
 * counts) and fire the miss_reason probe (level 0). */
void l2_count_l2_miss(struct sc_stage *st, int reason, uint32_t detail);
/* Count one restore that returned no state (shared counters at once) and fire the probe (level 1). */
void l2_count_restore_miss(struct sc_arena *a, uint64_t stage_id, int reason, uint32_t detail);

#endif
