/* shm/obs.c — placeholder until the promotion policy lands: sizes only. */
#include "obs.h"
uint64_t shm_obs_bytes(uint32_t entries) { return (uint64_t)entries * 64; }
int shm_obs_format(struct shm_arena *a) { (void)a; return 0; }
