/* lib/l3/reconcile.h — reconciliation of a store at open: what crashed writers left (lib/l3/reconcile.c). */
#ifndef SC_LIB_L3_RECONCILE_H
#define SC_LIB_L3_RECONCILE_H

#include "types.h"

/* Remove stale temp files, quarantine objects with bad headers, drop dangling prefix entries, and
 * count what is there (DIR/state). Takes DIR/lock. 0 or -errno. */
int l3_reconcile(struct sc_l3 *l3);

#endif
