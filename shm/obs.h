/*
 * shm/obs.h — the promotion observation table storage (owned by the L3/promotion module; the
 * policy itself is lib/promote.c). Protocol in shm/obs.c.
 */
#ifndef SC_SHM_OBS_H
#define SC_SHM_OBS_H

#include "arena.h"

/* Bytes the observation region needs for @entries observations (shm/layout.c). */
uint64_t shm_obs_bytes(uint32_t entries);
/* Format the observation region at creation. */
int shm_obs_format(struct shm_arena *a);

#endif
