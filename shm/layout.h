/* shm/layout.h — the layout planner (shm/layout.c): above every module whose region it sizes. */
#ifndef SC_SHM_LAYOUT_H
#define SC_SHM_LAYOUT_H

#include "region.h"

/* Apply defaults to @p and compute every region; -EINVAL if they do not fit @p->total_bytes. */
int shm_layout_plan(struct shm_params *p, struct shm_region regions[SHM_REGION_MAX]);
/* Format the regions that need more than zeroes (robust mutexes, free lists). Called by the
 * creator before publishing; returns a negative errno on failure. */
int shm_layout_format(struct shm_arena *a);

#endif
