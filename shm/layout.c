/*
 * shm/layout.c — where each region goes, and who formats it.
 *
 * The creator computes the region table once from the creation parameters; every later attach
 * reads it from the header (after shm_header_check validated it). Regions are placed in a fixed
 * order, 4 KiB aligned, and the heap takes everything left after a 2 MiB-aligned start so that
 * large payloads sit on hugepage boundaries.
 */
#include <errno.h>

#include "layout.h"
#include "evq.h"
#include "evring.h"
#include "heap.h"
#include "index.h"
#include "l3ix.h"
#include "obs.h"
#include "readers.h"
#include "ring.h"
#include "seg.h"

#define SHM_HEAP_MIN_BYTES (2u << 20)

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static int pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int shm_layout_plan(struct shm_params *p, struct shm_region regions[SHM_REGION_MAX])
{
	if (!p->index_entries) {
		uint64_t n = p->total_bytes / (16u << 10);
		p->index_entries = n < 1024 ? 1024 : n > SHM_INDEX_MAX_ENTRIES ? SHM_INDEX_MAX_ENTRIES : (uint32_t)n;
	}
	if (!p->ring_count)
		p->ring_count = 16;
	if (!p->ring_bytes)
		p->ring_bytes = 256u << 10;
	if (!p->obs_entries)
		p->obs_entries = 4096;
	if (!p->reader_slots)
		p->reader_slots = 256;
	if (!p->l3ix_entries) {
		/* one entry per 256 KiB of arena: the index's pages cost about 2 % of it */
		uint64_t n = p->total_bytes / (256u << 10);
		p->l3ix_entries = n < SHM_L3IX_MIN_ENTRIES ? SHM_L3IX_MIN_ENTRIES : n > 65536 ? 65536 : (uint32_t)n;
	} else if (p->l3ix_entries == UINT32_MAX) {
		p->l3ix_entries = 0;
	}
	if (p->l3ix_entries > SHM_L3IX_MAX_ENTRIES || (p->arena_flags & ~SHM_ARENA_FLAGS_MASK))
		return -EINVAL;
	p->l3ix_entries = shm_l3ix_entries(p->l3ix_entries);
	if (!p->l3ix_refresh_ms)
		p->l3ix_refresh_ms = 1000;
	if (p->seg_bytes && (!pow2(p->seg_bytes) || p->seg_bytes < SHM_SEG_MIN_BYTES || p->seg_bytes > SHM_SEG_MAX_BYTES))
		return -EINVAL;
	p->seg_slots = shm_seg_slots(p->total_bytes, p->seg_bytes);
	if (p->index_entries > SHM_INDEX_MAX_ENTRIES || p->ring_count > SHM_RING_COUNT_MAX || !pow2(p->ring_bytes) ||
	    p->ring_bytes < SHM_RING_BYTES_MIN || p->ring_bytes > SHM_RING_BYTES_MAX ||
	    p->obs_entries > SHM_OBS_MAX_ENTRIES || p->reader_slots > SHM_READER_SLOTS_MAX)
		return -EINVAL;

	uint64_t sizes[SHM_REGION_COUNT] = {
		[SHM_REGION_READERS] = (uint64_t)p->reader_slots * SHM_READER_SLOT_BYTES,
		[SHM_REGION_STATS] = SHM_STATS_BYTES,
		[SHM_REGION_INDEX] = shm_index_bytes(p->index_entries),
		[SHM_REGION_RINGS] = shm_ring_region_bytes(p->ring_count, p->ring_bytes),
		[SHM_REGION_OBS] = shm_obs_bytes(p->obs_entries),
		[SHM_REGION_L3IX] = shm_l3ix_bytes(p->l3ix_entries),
		/* the segment table follows the queues in the same region (shm_seg_table_off) */
		[SHM_REGION_POLICY] = align_up(shm_evq_bytes(p->index_entries), 4096) + shm_seg_table_bytes(p->seg_slots),
		[SHM_REGION_EVENTS] = shm_evring_bytes(shm_evring_records(p->index_entries)),
	};
	uint64_t off = SHM_HEADER_BYTES;
	for (int i = 0; i < SHM_REGION_MAX; i++)
		regions[i] = (struct shm_region){ 0, 0 };
	for (int i = 0; i < SHM_REGION_HEAP; i++) {
		regions[i].off = off;
		regions[i].size = shm_page_up(sizes[i]);
		off += regions[i].size;
	}
	off = align_up(off, SHM_HUGE_PAGE_BYTES);
	if (off + SHM_HEAP_MIN_BYTES > p->total_bytes)
		return -EINVAL;
	regions[SHM_REGION_HEAP].off = off;
	regions[SHM_REGION_HEAP].size = p->total_bytes - off;
	return 0;
}

int shm_layout_format(struct shm_arena *a)
{
	int rc = shm_heap_format(a);
	if (!rc)
		rc = shm_index_format(a);
	if (!rc)
		rc = shm_ring_region_format(a);
	if (!rc)
		rc = shm_obs_format(a);
	if (!rc)
		rc = shm_l3ix_format(a);
	if (!rc)
		rc = shm_evq_format(a);
	if (!rc && a->hv.seg_bytes)
		rc = shm_seg_format(a);
	if (!rc)
		rc = shm_evring_format(a);
	return rc;
}
