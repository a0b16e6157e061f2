/* lib/l3/reconcile.h — reconciliation of a store at open: what crashed writers left (lib/l3/reconcile.c). */
#ifndef SC_LIB_L3_RECONCILE_H
#define SC_LIB_L3_RECONCILE_H

#include "types.h"

/* Remove stale temp files, quarantine objects with bad headers, drop dangling prefix entries, and
 * count what is there (DIR/state). Takes DIR/lock. 0 or -errno. */
int l3_reconcile(struct sc_l3 *l3);
/* At open: the whole store while it is small, else one bounded step (lib/l3/reconcile.c). Takes
 * DIR/lock (a step: only if free). 0 or -errno. The budget is the caller's. */
int l3_reconcile_open(struct sc_l3 *l3);
/* Is the store above the size that is reconciled whole (by DIR/state)? */
int l3_reconcile_large(struct sc_l3 *l3);
/* One bounded step (@janitor: a janitor pass's, larger); caller holds DIR/lock. Adds what it
 * removed to the three counts. */
void l3_reconcile_step_locked(struct sc_l3 *l3, int janitor, uint64_t *stale, uint64_t *quarantined, uint64_t *dropped);
#ifdef SC_TEST_HOOKS
/* Test build: the store size up to which an open reconciles whole, and a step's entries (0: as built). */
extern unsigned l3_recon_full_max, l3_recon_step;
#endif

#endif
