/* lib/l3/state.h — DIR/state (or the host's state file in shared mode): the counters every process of a host shares (lib/l3/state.c). */
#ifndef SC_LIB_L3_STATE_H
#define SC_LIB_L3_STATE_H

#include "types.h"

/* Map DIR/state (local mode; created when missing) into l3->st. 0 or -errno (-EBADMSG: not an
 * L3 state file). */
int l3_state_open(struct sc_l3 *l3, int create);
/* The per-host counters of a shared directory (host-local memory). */
int l3_state_open_host(struct sc_l3 *l3);
void l3_state_close(struct sc_l3 *l3);

#endif
