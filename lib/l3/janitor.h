/* lib/l3/janitor.h — the janitor (lib/l3/janitor.c). */
#ifndef SC_LIB_L3_JANITOR_H
#define SC_LIB_L3_JANITOR_H

#include "types.h"

/* Shared mode, put side: a put of @bytes made the store's estimated size exceed the budget:
 * run a pass now if no janitor holds the lease. */
void l3_janitor_after_put(struct sc_l3 *l3, uint64_t bytes);
void l3_janitor_release(struct sc_l3 *l3);
/* sc_l3_evict_to in shared mode: a pass down to @bytes. The count evicted, or -EBUSY/-ESTALE/... */
int l3_janitor_evict_to(struct sc_l3 *l3, uint64_t bytes);
/* The janitor record's objects, bytes, epoch, last pass, last listing (0 when there is none). */
struct l3_jrec_view {
	uint64_t epoch, objects, bytes, evictions, pass_end_ns, listed_s;
	char host[L3_HOST_MAX + 1];
};
int l3_janitor_read(struct sc_l3 *l3, struct l3_jrec_view *v);
#ifdef SC_TEST_HOOKS
/* Shared mode: a store larger than l3_shared_list_min objects at its last listing, listed less than
 * l3_shared_relist_s seconds ago, is not listed by a pass without a budget (1024 and 600 unless a
 * test changes them); passes that listed the store, in this process. */
extern unsigned l3_shared_list_min, l3_shared_relist_s;
extern _Atomic unsigned long l3_test_janitor_listings;
#endif

#endif
