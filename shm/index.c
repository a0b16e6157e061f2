/* shm/index.c — placeholder until the L2 tier lands: sizes only. */
#include "index.h"
uint64_t shm_index_bytes(uint32_t entries) { return (uint64_t)entries * 64; }
int shm_index_format(struct shm_arena *a) { (void)a; return 0; }
