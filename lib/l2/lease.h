/* lib/l2/lease.h — lease records in reader slots, reaping the dead (lib/l2/lease.c). */
#ifndef SC_LIB_L2_LEASE_H
#define SC_LIB_L2_LEASE_H

#include "view.h"

/* Sorted lease records of every attached process. *out malloc'd (NULL when none). */
size_t l2_leases_collect(struct sc_arena *a, uint64_t **out);
/* Reap dead readers (their leases) and sweep orphaned reservations; rate-limited unless @force.
 * Returns 1 if anything was released (a dead holder's slot, or reservations nobody owns). */
int l2_reap(struct sc_arena *a, int force);
/* The arena-wide periodic reap (every 100 ms, by whichever writer comes first). */
void l2_reap_periodic(struct sc_arena *a);
int l2_lease_take(struct sc_arena *a, uint64_t rec);
void l2_lease_drop(struct sc_arena *a, int slot);

#endif
