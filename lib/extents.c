/*
 * lib/extents.c — sc_arena_extents: the memory ranges of an arena that hold payload bytes, for
 * registering them with a device (GPU DMA, RDMA). Today that is the heap region alone; a lease,
 * a restore served from the arena and a fill reservation all point into it.
 */
#include <errno.h>

#include "internal.h"

int sc_arena_extents(struct sc_arena *arena, struct sc_arena_extent *out, unsigned max)
{
	if (!arena || (max && !out))
		return -EINVAL;
	const struct shm_arena *a = arena->shm;
	uint64_t page = a->page_size ? a->page_size : SHM_PAGE_BYTES, heap_bytes;
	const uint8_t *heap = shm_region(a, SHM_REGION_HEAP, &heap_bytes);
	if (page & (page - 1) || !heap_bytes)
		return -EBADMSG;
	/* registration works on whole pages: widen to page boundaries, within the mapping (whose
	 * size is a multiple of its page size) */
	uint64_t first = (uint64_t)(heap - a->base) & ~(page - 1);
	uint64_t end = ((uint64_t)(heap - a->base) + heap_bytes + page - 1) & ~(page - 1);
	if (end > a->size)
		end = a->size & ~(page - 1);
	if (end <= first)
		return -EBADMSG;
	if (max) {
		out[0] = (struct sc_arena_extent){
			.base = a->base + first,
			.bytes = end - first,
			.page_size = page,
			.file_offset = first,
			.kind = SC_EXTENT_HEAP,
		};
	}
	return 1;
}
