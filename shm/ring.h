/*
 * shm/ring.h — the commit ring directory and SPSC rings (owned by the commit rings). Protocol in
 * shm/ring.c.
 */
#ifndef SC_SHM_RING_H
#define SC_SHM_RING_H

#include "arena.h"

/* Bytes the ring region needs for @count rings of @bytes record space each (shm/layout.c). */
uint64_t shm_ring_region_bytes(uint32_t count, uint32_t bytes);
/* Format the ring region at creation. */
int shm_ring_region_format(struct shm_arena *a);

#endif
