/* lib/l3/put.h — puts (lib/l3/put.c). */
#ifndef SC_LIB_L3_PUT_H
#define SC_LIB_L3_PUT_H

#include "types.h"

/* Room for a put of @need bytes: refused (-E2BIG, -ENOSPC, counted) or made by eviction. */
int l3_put_room(struct sc_l3 *l3, uint64_t need);

#endif
