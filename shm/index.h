/*
 * shm/index.h — the L2 hash index (owned by the L2 tier). Protocol in shm/index.c.
 */
#ifndef SC_SHM_INDEX_H
#define SC_SHM_INDEX_H

#include "arena.h"

/* Bytes the index region needs for @entries entries (called by shm/layout.c). */
uint64_t shm_index_bytes(uint32_t entries);
/* Format the index region at creation (robust shard mutexes). */
int shm_index_format(struct shm_arena *a);

#endif
