/* lib/l3/quarantine.h — moving a bad object (or segment) away, and telling whom it concerns (lib/l3/quarantine.c). */
#ifndef SC_LIB_L3_QUARANTINE_H
#define SC_LIB_L3_QUARANTINE_H

#include "types.h"

/* Was the object @lo/@hi quarantined at or after @since_ns (CLOCK_REALTIME)? Scans quarantine/. */
int l3_quarantined_since(struct sc_l3 *l3, uint64_t lo, uint64_t hi, uint64_t since_ns);
/* Move object @lo/@hi to quarantine/ (@reason: an errno, for the log): its L2 mirrors and index
 * entries go through the binding's hooks (struct l3_hooks). 0 or -errno. */
int l3_quarantine(struct sc_l3 *l3, uint64_t lo, uint64_t hi, int reason);

#endif
