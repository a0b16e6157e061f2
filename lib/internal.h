/*
 * lib/internal.h — private to lib/: the handle behind struct sc_arena. Modules of lib/ may add
 * process-local fields here (one block per module, marked with its owner).
 */
#ifndef SC_LIB_INTERNAL_H
#define SC_LIB_INTERNAL_H

#include "stagecache.h"
#include "../shm/arena.h"

struct sc_arena {
	struct shm_arena *shm;
	/* ---- L2 tier ---- */
	/* ---- L3 / promotion ---- */
	/* ---- rings ---- */
};

#endif
