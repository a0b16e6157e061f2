/* lib/l2/admin.h — removal, invalidation, clearing, shrinking (lib/l2/admin.c). */
#ifndef SC_LIB_L2_ADMIN_H
#define SC_LIB_L2_ADMIN_H

#include "view.h"

/* lib/l2/admin.c: remove @key's entry (only if it is still @rec = gen << 32 | idx+1, when not 0);
 * @reason as in the l2_remove probe. */
/* Why an entry was removed: the l2_remove probe's reason (lib/probes.h). */
enum { L2_REMOVE_EXPLICIT = 0, L2_REMOVE_MISMATCH = 1, L2_REMOVE_INVALIDATE = 2, L2_REMOVE_CLEAR = 3 };
int l2_remove_key(struct sc_arena *a, struct sc_key key, uint64_t rec, int reason);
/* sc_l2_invalidate_digest whose removals say @why (enum sc_miss_reason: QUARANTINED, the object
 * failed verification; EVICTED_JANITOR, it is gone from L3). */
int l2_invalidate_why(struct sc_arena *a, struct sc_digest d, int why);

#endif
