/* shm/ring.c — placeholder until the commit rings land: sizes only. */
#include "ring.h"
uint64_t shm_ring_region_bytes(uint32_t count, uint32_t bytes) { return (uint64_t)count * (bytes + 4096); }
int shm_ring_region_format(struct shm_arena *a) { (void)a; return 0; }
