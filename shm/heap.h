/*
 * shm/heap.h — the payload heap: an allocator over arena offsets.
 *
 * Interface contract used by the L2 tier and the L3 fill path; the protocol and the crash-repair
 * rules are documented at the top of shm/heap.c.
 *  - Allocations are identified by their arena offset (never a pointer).
 *  - Sizes from 1 byte to the whole heap; blocks of SHM_HEAP_PAGE_ALIGN_MIN bytes or more start
 *    4 KiB aligned (so O_DIRECT reads can land in them), unless asked SHM_HEAP_PACKED.
 *  - Writers are serialised by the heap's own process-shared robust mutex, taken inside each call.
 *    A caller killed inside a call leaves the heap repairable by the next caller (EOWNERDEAD).
 */
#ifndef SC_SHM_HEAP_H
#define SC_SHM_HEAP_H

#include "region.h"
#include "util.h"
#include "mutex.h"

#define SHM_HEAP_PAGE_ALIGN_MIN 4096u
/* OR'd into a request's byte count (shm_heap_footprint, shm_heap_span_fits, shm_heap_alloc,
 * shm_heap_alloc_at): place it 64-byte aligned and round it to 64 bytes whatever its size, for
 * memory nobody reads with O_DIRECT (an entry copied in): no page rounding, no alignment gap.
 * Callers keep byte counts below this bit (lib/l2 saturates its lengths at 2^61): a count with
 * it set reads as packed. */
#define SHM_HEAP_PACKED (1ull << 62)
#define SHM_HEAP_BYTES(req) ((req) & ~SHM_HEAP_PACKED)
/* Does a request of @req (bytes, maybe | SHM_HEAP_PACKED) start on a 4 KiB boundary? */
static inline int shm_heap_page_aligned(uint64_t req)
{
	return !(req & SHM_HEAP_PACKED) && req >= SHM_HEAP_PAGE_ALIGN_MIN;
}
/* Bytes of block header in front of every allocation (the allocation's offset minus this is its
 * header; small allocations are aligned to this). */
#define SHM_HEAP_BLOCK_HDR 64u
/* Bytes of the heap's own header at the start of its region; the first block follows it. */
#define SHM_HEAP_HDR_BYTES 8192u
/* Could @rel (an offset relative to the heap's region) be an allocation's offset: past the heap
 * header and the first block's header, on a block-header boundary? (Not whether one is there.) */
static inline int shm_heap_alloc_off_ok(uint64_t rel)
{
	return rel >= SHM_HEAP_HDR_BYTES + SHM_HEAP_BLOCK_HDR && !(rel % SHM_HEAP_BLOCK_HDR);
}

struct shm_heap_stats {
	uint64_t heap_bytes;      /* bytes managed (block headers included) */
	uint64_t used_bytes;      /* bytes in allocated blocks (including block overhead) */
	uint64_t free_bytes;      /* bytes in free blocks (including their headers); used + free == heap */
	uint64_t largest_free;    /* largest single allocation that would succeed now (from the first
				   * blocks of the largest size class) */
	uint64_t used_blocks, free_blocks;
	uint64_t repairs;         /* rebuilds: after a holder died, after a detected inconsistency,
				   * or by shm_heap_repair */
};

/* The bytes of blocks a heap formatted in a region of @region_bytes manages (its header and the
 * tail short of a unit not counted): no allocation whose footprint is larger can ever succeed
 * (-E2BIG). 0 for a region too small to hold a heap. */
uint64_t shm_heap_capacity(uint64_t region_bytes);
/* Format the heap region (called once at arena creation, before publication). */
int shm_heap_format(struct shm_arena *a);
/* Bytes of heap a request of @bytes consumes: a successful shm_heap_alloc(@bytes) raises
 * used_bytes by exactly this (usable size rounded to 64 B, or to 4 KiB from
 * SHM_HEAP_PAGE_ALIGN_MIN on unless SHM_HEAP_PACKED, plus the block header). Alignment gaps stay
 * free. */
uint64_t shm_heap_footprint(uint64_t bytes);
/* Allocate @bytes; on success *off is the arena offset of the first usable byte.
 * @tag is an opaque 64-bit word stored with the block (the caller's ownership record, e.g.
 * "owned by reader slot N, not yet published"); shm_heap_walk reports it, shm_heap_set_tag
 * changes it. The heap never interprets it: the module that owns the memory decides, during its
 * own repair, which tagged blocks are orphans and frees them.
 * -ENOSPC (no block large enough now), -E2BIG (larger than the heap), -EINVAL (0 bytes),
 * -EBADMSG (heap metadata corrupted beyond repair). May block on the heap mutex. */
int shm_heap_alloc(struct shm_arena *a, uint64_t bytes, uint64_t tag, uint64_t *off);
/* Allocate @bytes in the free block whose first usable byte is @at (a block start seen in a walk
 * or scan), as shm_heap_alloc would place it there. -ENOSPC when @at is not (or no longer) the
 * start of a free block large enough, -E2BIG, -EINVAL, -EBADMSG. May block on the heap mutex. */
int shm_heap_alloc_at(struct shm_arena *a, uint64_t at, uint64_t bytes, uint64_t tag, uint64_t *off);
/* Would a free block whose first usable byte is @at and that ends at @end hold a request of
 * @bytes? (The placement rule of shm_heap_alloc: a request of SHM_HEAP_PAGE_ALIGN_MIN bytes or
 * more starts at the next 4 KiB boundary, leaving the gap before it free.) */
static inline int shm_heap_span_fits(uint64_t at, uint64_t end, uint64_t bytes)
{
	uint64_t start = at;
	if (shm_heap_page_aligned(bytes))
		start = (at + SHM_HEAP_PAGE_ALIGN_MIN - 1) & ~(uint64_t)(SHM_HEAP_PAGE_ALIGN_MIN - 1);
	uint64_t fp = shm_heap_footprint(bytes);
	return end >= at && start - at <= end - at && fp - SHM_HEAP_BLOCK_HDR <= end - start;
}
/* Replace the tag of the live allocation at @off (a single atomic store). -EBADMSG if @off is
 * not a live allocation. */
int shm_heap_set_tag(struct shm_arena *a, uint64_t off, uint64_t tag);
/* Free the allocation at @off. -EBADMSG if @off is not the start of a live allocation. */
int shm_heap_free(struct shm_arena *a, uint64_t off);
/* Usable size of the allocation at @off (validated); -EBADMSG if not a live allocation.
 * At least the bytes asked for; requests of SHM_HEAP_PAGE_ALIGN_MIN or more (not packed) get a
 * multiple of 4 KiB, so whole-page O_DIRECT reads stay inside the allocation. */
int shm_heap_size(struct shm_arena *a, uint64_t off, uint64_t *bytes);
int shm_heap_stats(struct shm_arena *a, struct shm_heap_stats *st);
/* Walk every block (for fsck and repair): @cb(off, bytes, allocated, tag, ctx) with @off the
 * usable offset; a non-zero return from @cb stops the walk and is returned. Returns 0, or
 * -EBADMSG at the first inconsistency. Takes the heap mutex; @cb must not call back into the heap. */
int shm_heap_walk(struct shm_arena *a,
		  int (*cb)(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx), void *ctx);
/* Visit at most @max_blocks blocks in address order, starting at the block whose first usable
 * byte is @from (the heap's first block when @from is not a block start), wrapping at the end
 * (the callback sees the jump: a block is contiguous with the previous one when its @off equals
 * the previous @off + @bytes + SHM_HEAP_BLOCK_HDR) and going on past @from for at most a second
 * lap, so that a run that starts before @from can be followed to its end: the callback stops the
 * scan (returns non-zero) when it has seen enough. Same callback contract as shm_heap_walk,
 * without the walk's counter checks. Returns the blocks visited or -errno. */
int shm_heap_scan(struct shm_arena *a, uint64_t from, uint64_t max_blocks,
		  int (*cb)(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx), void *ctx);
/* (walk: @bytes is the usable size, @tag 0 for free blocks, @cb may be NULL to only check; the
 * walk also checks prev sizes, free-list membership, coalescing and the counters.) */
/* Rebuild the heap's derived state (free lists, counters) from its block chain, as the first
 * caller after a crash does automatically; for fsck, or after a reported corruption was fixed.
 * 0, or -EBADMSG if the block chain itself is corrupted (the heap then refuses every call with
 * -EBADMSG until a repair succeeds). Takes the heap mutex; O(blocks). */
int shm_heap_repair(struct shm_arena *a);

/* The heap's writer mutex (for fsck's check of the mutex itself); NULL if the header is bad. */
struct shm_mutex *shm_heap_mutex(struct shm_arena *a);

#ifdef SC_TEST_HOOKS
/* Test build: the header word that a block of @units units in state @st (1 free, 2 allocated) at
 * heap-region offset @rel would carry, check bits included: what a process that can write the
 * arena (and so read the seed) can forge. 0 if the heap header is bad. */
uint64_t shm_heap_test_word(struct shm_arena *a, uint64_t rel, uint64_t units, unsigned st);
#endif

#endif
