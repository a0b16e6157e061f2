/*
 * shm/heap.c — the payload heap: a two-level segregated fit (TLSF) allocator over arena offsets.
 *
 * Region layout (SHM_REGION_HEAP; the region starts 2 MiB aligned):
 *
 *   [ heap header (8 KiB) | block | block | ... | block ]      blocks tile [start, end) exactly
 *
 * Every block starts with a 64-byte header (struct heap_blk); an allocation's offset is the byte
 * after its header, so small allocations are 64-byte aligned. Allocations of
 * SHM_HEAP_PAGE_ALIGN_MIN bytes or more get a 4 KiB-aligned offset and a usable size rounded up to
 * a multiple of 4 KiB, so an O_DIRECT read of whole pages stays inside the block; a request marked
 * SHM_HEAP_PACKED (memory only ever written by a CPU copy) is placed and rounded as a small one,
 * so that blocks of copied-in entries tile the heap without gaps. The heap takes
 * the aligned header position out of a free block and leaves the gap before it as a free block of
 * its own (a free block may be a bare 64-byte header: it cannot be allocated but it coalesces).
 * Sizes are kept in 64-byte units.
 *
 * Who writes what. Everything in the region is written only by a holder of the heap mutex (a
 * arena writer lock in the heap header, shm/mutex.h), which every call takes. The only
 * exceptions are shm_heap_format (before the arena is published) and the payload bytes, which
 * belong to the allocation's owner. Readers of the L2 index never touch the heap. So within the
 * protocol all loads and stores are ordered by the mutex (lock = acquire, unlock = release) and
 * may be relaxed; the one ordering that matters is the program order of one writer's stores as a
 * crash would leave them, which the release stores below pin against compiler reordering.
 *
 * The block chain is the source of truth. Each header's first word (`word`) holds the block's size,
 * its state (FREE or ALLOC) and a 22-bit check keyed by a per-heap seed and the header's own
 * offset. Every change to the chain is ONE release store of one word:
 *  - split (alloc): write the tail's header (a FREE block, invisible while inside its parent), then
 *    shrink-and-mark the parent with one store; an aligned allocation first carves its leading gap
 *    the same way (write the aligned header, then shrink the gap block with one store);
 *  - free: mark the block FREE with one store; then merge a free successor by growing the block
 *    with one store (and only then scrub the swallowed header to 0), and merge into a free
 *    predecessor by growing the predecessor with one store.
 * A stale header left inside a block is always a FREE one (ALLOC blocks are marked FREE before
 * they are ever merged), so a double free of a swallowed offset is refused, and a check keyed by
 * position refuses a header copied elsewhere (the seed is in the arena: this stops accidents and
 * payload bytes that look like headers, not a process that can write the arena). The tag is stored before the store that marks the
 * block ALLOC, so an allocated block always carries its owner's tag.
 *
 * Derived state: prev_size in each header (for O(1) backward merge and as a second validation of
 * a claimed block start), the free lists and their two bitmaps, the byte/block counters. It is
 * brought up to date before every unlock, and can always be rebuilt from the chain.
 *
 * Crash repair. A holder killed at any instruction leaves a walkable chain: every block was
 * either already split/merged by its single store or not at all. The next locker gets -EOWNERDEAD,
 * marks the heap for rebuild (persisted first, so a death during the repair repeats it) and walks
 * the chain once: it validates each header, merges adjacent free blocks
 * (single-store grows again), rewrites prev_size and rebuilds the lists and counters. A block that
 * was unlinked from a free list but not yet marked ALLOC is still FREE in the chain and comes back
 * to the lists; a block marked ALLOC stays allocated with its tag (its owning module reclaims it).
 * The same rebuild runs when a call finds the derived state inconsistent (a free list that does
 * not link back, a bitmap pointing to an empty list, a list that its bitmaps do not show: checked
 * before an allocation answers -ENOSPC). If the chain itself is corrupted the heap becomes BROKEN
 * and every call returns -EBADMSG until shm_heap_repair succeeds. Repairs are counted in the
 * header.
 *
 * Fault points (shm/fault.h), for the crash tests: heap.alloc.unlinked (off the free list, still
 * FREE), heap.alloc.align (aligned header written, gap not yet shrunk), heap.alloc.split (tail
 * header written, block not yet shrunk), heap.alloc.done (block ALLOC, tail not yet listed),
 * heap.free.marked (block FREE, not merged), heap.free.merge (successor merged, predecessor not),
 * heap.chain (right after every store to a header word: "heap.chain@n" crashes after the n-th
 * chain store the process makes once armed, a repair's included).
 *
 * Bounds. Every offset read from shared memory is checked against [start, end) and 64-byte
 * alignment, every header against its check word, before use. Allocation is O(1) on the good-fit
 * path (bitmap search of the class that guarantees a fit) and scans at most SCAN_TOTAL list entries
 * near exhaustion; free is O(1). Walk and repair visit each block once (at most heap/64 steps):
 * repair runs only after a crash or a detected corruption.
 *
 * Lock order: the heap mutex is a leaf; callers may hold their own shard locks around heap calls,
 * never the reverse (walk callbacks must not call back into the heap).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "fault.h"
#include "heap.h"
#include "mutex.h"

#define HEAP_MAGIC 0x5041454843475453ull    /* "STGCHEAP" little-endian */
#define HEAP_VERSION 1u
#define HEAP_HDR_BYTES SHM_HEAP_HDR_BYTES
#define UNIT SHM_HEAP_BLOCK_HDR              /* size unit == header size == small alignment */
#define PAGE SHM_HEAP_PAGE_ALIGN_MIN
#define SL_LOG2 4u                           /* 16 second-level classes: <= 6.25% internal slack */
#define SL_COUNT (1u << SL_LOG2)
#define FL_COUNT 40u
#define UNITS_SHIFT 24
#define CHECK_MASK ((1ull << 22) - 1)
#define MAX_UNITS ((1ull << 40) - 1)          /* 64 TiB blocks */
#define SCAN_PER_LIST 16u                    /* bounds of the near-exhaustion scan */
#define SCAN_TOTAL 64u

enum { ST_FREE = 1, ST_ALLOC = 2 };
enum { HEAP_OK = 0, HEAP_REBUILD = 1, HEAP_BROKEN = 2 };

/* A block header; the allocation's bytes follow it. */
struct heap_blk {
	/* the chain (source of truth): size in units << 24 | check << 2 | state; one store per change */
	_Atomic uint64_t word;
	/* derived, rebuilt by repair */
	uint64_t prev_size;          /* bytes of the physically previous block; 0 for the first */
	/* the owner's tag: meaningful while ALLOC; stored before the ALLOC mark */
	_Atomic uint64_t tag;
	/* derived, meaningful while FREE: region-relative offsets, 0 = none */
	uint64_t next_free, prev_free;
	uint64_t reserved[3];
};

_Static_assert(sizeof(struct heap_blk) == SHM_HEAP_BLOCK_HDR, "block header is one unit");
_Static_assert(offsetof(struct heap_blk, word) == 0, "block header layout");
_Static_assert(offsetof(struct heap_blk, prev_size) == 8, "block header layout");
_Static_assert(offsetof(struct heap_blk, tag) == 16, "block header layout");
_Static_assert(offsetof(struct heap_blk, next_free) == 24, "block header layout");
_Static_assert(offsetof(struct heap_blk, prev_free) == 32, "block header layout");

struct heap_hdr {
	/* identity: written by shm_heap_format before publication, read-only afterwards */
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_bytes;
	uint64_t area_start;         /* region-relative offset of the first block */
	uint64_t area_end;           /* region-relative end of the last block */
	uint64_t seed;               /* keys the header check words */
	uint64_t reserved0[3];
	/* the writer lock, on its own cache line */
	union {
		struct shm_mutex mu;
		uint8_t bytes[SHM_CACHELINE];
	} lock;
	/* protected by the lock */
	uint64_t state;              /* HEAP_OK / HEAP_REBUILD / HEAP_BROKEN */
	uint64_t repairs;            /* successful rebuilds (not derived: survives them) */
	uint64_t free_bytes, free_blocks, used_blocks;   /* derived */
	uint64_t fl_bitmap;          /* derived: bit f set iff sl_bitmap[f] != 0 */
	uint64_t reserved1[2];
	uint32_t sl_bitmap[FL_COUNT];                    /* derived: bit s set iff heads[f][s] != 0 */
	uint64_t heads[FL_COUNT][SL_COUNT];              /* derived: first free block of each class */
};

_Static_assert(offsetof(struct heap_hdr, lock) == SHM_CACHELINE, "header layout");
_Static_assert(offsetof(struct heap_hdr, state) == 2 * SHM_CACHELINE, "header layout");
_Static_assert(offsetof(struct heap_hdr, seed) == 32, "header layout (tests)");
_Static_assert(offsetof(struct heap_hdr, free_bytes) == 2 * SHM_CACHELINE + 16, "header layout (tests)");
_Static_assert(offsetof(struct heap_hdr, free_blocks) == 2 * SHM_CACHELINE + 24, "header layout (tests)");
_Static_assert(offsetof(struct heap_hdr, fl_bitmap) == 2 * SHM_CACHELINE + 40, "header layout (tests)");
_Static_assert(offsetof(struct heap_hdr, sl_bitmap) == 3 * SHM_CACHELINE, "header layout");
_Static_assert(offsetof(struct heap_hdr, heads) == 3 * SHM_CACHELINE + 4 * FL_COUNT, "header layout");
_Static_assert(sizeof(struct heap_hdr) <= HEAP_HDR_BYTES, "header fits its reservation");

/* Process-local view of the heap of one arena, its geometry copied once per call after
 * validation (a later scribble on the header cannot move the bounds we check against). */
struct heap_ctx {
	struct shm_arena *a;
	uint8_t *base;               /* region base */
	uint64_t region_off;         /* arena offset of the region */
	struct heap_hdr *h;
	uint64_t start, end, seed;
};

static int heap_ctx(struct shm_arena *a, struct heap_ctx *c)
{
	uint64_t size;
	c->a = a;
	c->base = shm_region(a, SHM_REGION_HEAP, &size);
	c->region_off = shm_off(a, c->base);
	c->h = (struct heap_hdr *)c->base;
	if (size < HEAP_HDR_BYTES + 2 * UNIT || (c->region_off & (PAGE - 1)) ||
	    !shm_ptr(a, c->region_off, size))
		return -EBADMSG;
	const struct heap_hdr *h = c->h;
	c->start = h->area_start;
	c->end = h->area_end;
	c->seed = h->seed;
	if (h->magic != HEAP_MAGIC || h->version != HEAP_VERSION || h->hdr_bytes != HEAP_HDR_BYTES ||
	    c->start != HEAP_HDR_BYTES || c->end > size || c->end < c->start + 2 * UNIT ||
	    ((c->end - c->start) & (UNIT - 1)) || (c->end - c->start) / UNIT > MAX_UNITS)
		return -EBADMSG;
	return 0;
}

static inline struct heap_blk *blk(const struct heap_ctx *c, uint64_t rel)
{
	return (struct heap_blk *)(c->base + rel);
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static uint64_t word_make(const struct heap_ctx *c, uint64_t rel, uint64_t units, unsigned st)
{
	uint64_t w = units << UNITS_SHIFT | st;
	return w | (mix64(c->seed ^ (rel * 0x9e3779b97f4a7c15ull) ^ w) & CHECK_MASK) << 2;
}

/* Read and validate the header at region offset @rel. */
static int blk_get(const struct heap_ctx *c, uint64_t rel, uint64_t *units, unsigned *st)
{
	if (rel < c->start || rel >= c->end || (rel & (UNIT - 1)))
		return -EBADMSG;
	/* relaxed: ordered by the heap lock (acquire at lock pairs with the last holder's release at
	 * unlock; after a dead holder, with the acquire CAS that took its lock over) */
	uint64_t w = atomic_load_explicit(&blk(c, rel)->word, memory_order_relaxed);
	uint64_t u = w >> UNITS_SHIFT;
	unsigned s = (unsigned)(w & 3);
	if ((s != ST_FREE && s != ST_ALLOC) || u == 0 || u > (c->end - rel) / UNIT ||
	    (s == ST_ALLOC && u < 2) || w != word_make(c, rel, u, s))
		return -EBADMSG;
	*units = u;
	*st = s;
	return 0;
}

static int blk_is_free(const struct heap_ctx *c, uint64_t rel)
{
	uint64_t u;
	unsigned s;
	return blk_get(c, rel, &u, &s) == 0 && s == ST_FREE;
}

/* The single store that changes the chain. Release: every header/tag store before it in program
 * order is placed before it, so a crash leaves the chain either before or after this store. */
static void blk_commit(const struct heap_ctx *c, uint64_t rel, uint64_t units, unsigned st)
{
	atomic_store_explicit(&blk(c, rel)->word, word_make(c, rel, units, st), memory_order_release);
	shm_fault_point("heap.chain");  /* test build: a crash right after any chain store (@n) */
}

/* Erase a header that a merge swallowed. Release: stays after the growing store before it. */
static void blk_scrub(const struct heap_ctx *c, uint64_t rel)
{
	atomic_store_explicit(&blk(c, rel)->word, 0, memory_order_release);
	shm_fault_point("heap.chain");
}

/* ---- size classes ---- */

static void mapping(uint64_t u, unsigned *fl, unsigned *sl)
{
	if (u < SL_COUNT) {
		*fl = 0;
		*sl = (unsigned)u;
		return;
	}
	unsigned msb = 63u - (unsigned)__builtin_clzll(u);
	*fl = msb - SL_LOG2 + 1;
	*sl = (unsigned)(u >> (msb - SL_LOG2)) - SL_COUNT;
}

/* The first class whose every block holds @u units. */
static void mapping_up(uint64_t u, unsigned *fl, unsigned *sl)
{
	if (u >= SL_COUNT)
		u += (1ull << (63u - (unsigned)__builtin_clzll(u) - SL_LOG2)) - 1;
	mapping(u, fl, sl);
}

/* Derived state found inconsistent: rebuild it before the mutex is released (heap_unlock). */
static int heap_corrupt(struct heap_ctx *c)
{
	if (c->h->state == HEAP_OK)
		c->h->state = HEAP_REBUILD;
	return -EBADMSG;
}

static int list_insert(struct heap_ctx *c, uint64_t rel, uint64_t units)
{
	struct heap_hdr *h = c->h;
	unsigned fl, sl;
	mapping(units, &fl, &sl);
	uint64_t head = h->heads[fl][sl];
	if (head) {
		if (!blk_is_free(c, head) || head == rel)
			return heap_corrupt(c);
		blk(c, head)->prev_free = rel;
	}
	struct heap_blk *b = blk(c, rel);
	b->next_free = head;
	b->prev_free = 0;
	h->heads[fl][sl] = rel;
	h->sl_bitmap[fl] |= 1u << sl;
	h->fl_bitmap |= 1ull << fl;
	h->free_bytes += units * UNIT;
	h->free_blocks++;
	return 0;
}

static int list_remove(struct heap_ctx *c, uint64_t rel, uint64_t units)
{
	struct heap_hdr *h = c->h;
	unsigned fl, sl;
	mapping(units, &fl, &sl);
	struct heap_blk *b = blk(c, rel);
	uint64_t next = b->next_free, prev = b->prev_free;
	if (next == rel || prev == rel || h->free_bytes < units * UNIT || !h->free_blocks)
		return heap_corrupt(c);
	if (prev ? !blk_is_free(c, prev) || blk(c, prev)->next_free != rel : h->heads[fl][sl] != rel)
		return heap_corrupt(c);
	if (next && (!blk_is_free(c, next) || blk(c, next)->prev_free != rel))
		return heap_corrupt(c);
	if (prev)
		blk(c, prev)->next_free = next;
	else
		h->heads[fl][sl] = next;
	if (next)
		blk(c, next)->prev_free = prev;
	if (!h->heads[fl][sl]) {
		h->sl_bitmap[fl] &= ~(1u << sl);
		if (!h->sl_bitmap[fl])
			h->fl_bitmap &= ~(1ull << fl);
	}
	b->next_free = b->prev_free = 0;
	h->free_bytes -= units * UNIT;
	h->free_blocks--;
	return 0;
}

/* Units of free space before the header of an allocation placed in the block at @rel. */
static uint64_t align_gap(const struct heap_ctx *c, uint64_t rel, int aligned)
{
	if (!aligned)
		return 0;
	uint64_t usable = c->region_off + rel + UNIT;
	return (((usable + PAGE - 1) & ~(uint64_t)(PAGE - 1)) - usable) / UNIT;
}

/* A validated free-list entry of class (fl, sl): 0 and its size, or -EBADMSG. */
static int list_entry(struct heap_ctx *c, uint64_t rel, unsigned fl, unsigned sl, uint64_t *units)
{
	unsigned s, f2, s2;
	if (blk_get(c, rel, units, &s) || s != ST_FREE)
		return heap_corrupt(c);
	mapping(*units, &f2, &s2);
	if (f2 != fl || s2 != sl)
		return heap_corrupt(c);
	return 0;
}

/* Do the row and class bitmaps agree with each other and with the class heads? (A bit cleared by a
 * scribble would keep the memory of its list out of reach of every allocation: find_block checks
 * before it answers -ENOSPC, 40 rows and 640 heads.) */
static int bitmaps_agree(const struct heap_hdr *h)
{
	if (h->fl_bitmap >> FL_COUNT)
		return 0;
	for (unsigned f = 0; f < FL_COUNT; f++) {
		uint32_t row = h->sl_bitmap[f];
		if ((row >> SL_COUNT) || !row != !(h->fl_bitmap & (1ull << f)))
			return 0;
		for (unsigned s = 0; s < SL_COUNT; s++)
			if (!h->heads[f][s] != !(row & (1u << s)))
				return 0;
	}
	return 1;
}

/* Find a free block for @need units: 0 with its offset, size and alignment gap, or -ENOSPC
 * (-EBADMSG, with a rebuild due, when the bitmaps disagree with the lists). */
static int find_block(struct heap_ctx *c, uint64_t need, int aligned, uint64_t *rel,
		      uint64_t *units, uint64_t *gap)
{
	struct heap_hdr *h = c->h;
	uint64_t flm = h->fl_bitmap & ((1ull << FL_COUNT) - 1);
	unsigned fl, sl;
	/* 1. good fit, O(1): the first non-empty class at or above the one where every block holds
	 *    the request plus the worst alignment gap (63 units). */
	mapping_up(need + (aligned ? PAGE / UNIT - 1 : 0), &fl, &sl);
	if (fl < FL_COUNT) {
		uint32_t slm = h->sl_bitmap[fl] & (~0u << sl) & ((1u << SL_COUNT) - 1);
		if (!slm) {
			uint64_t up = fl + 1 < FL_COUNT ? flm & (~0ull << (fl + 1)) : 0;
			if (up) {
				fl = (unsigned)__builtin_ctzll(up);
				slm = h->sl_bitmap[fl] & ((1u << SL_COUNT) - 1);
				if (!slm)
					return heap_corrupt(c);
			}
		}
		if (slm) {
			sl = (unsigned)__builtin_ctz(slm);
			*rel = h->heads[fl][sl];
			if (list_entry(c, *rel, fl, sl, units))
				return -EBADMSG;
			*gap = align_gap(c, *rel, aligned);
			if (*gap + need > *units)
				return heap_corrupt(c);
			return 0;
		}
	}
	/* 2. near exhaustion: blocks of the classes below that one may still fit. Look at the
	 *    largest classes first (the ones stats' largest_free reports), a bounded number. */
	unsigned lo_fl, lo_sl, budget = SCAN_TOTAL;
	mapping(need, &lo_fl, &lo_sl);
	for (int f = FL_COUNT - 1; f >= (int)lo_fl && budget; f--) {
		if (!(flm & (1ull << f)))
			continue;
		for (int s = SL_COUNT - 1; s >= 0 && budget; s--) {
			if (!(h->sl_bitmap[f] & (1u << s)) || ((unsigned)f == lo_fl && (unsigned)s < lo_sl))
				continue;
			uint64_t r = h->heads[f][s];
			for (unsigned k = 0; r && k < SCAN_PER_LIST && budget; k++, budget--) {
				if (list_entry(c, r, (unsigned)f, (unsigned)s, units))
					return -EBADMSG;
				uint64_t g = align_gap(c, r, aligned);
				if (g + need <= *units) {
					*rel = r;
					*gap = g;
					return 0;
				}
				r = blk(c, r)->next_free;
			}
		}
	}
	return bitmaps_agree(h) ? -ENOSPC : heap_corrupt(c);
}

/* Largest request the block (rel, u) can serve (what largest_free reports). */
static uint64_t max_request(const struct heap_ctx *c, uint64_t rel, uint64_t u)
{
	if (u < 2)
		return 0;
	uint64_t best = (u - 1) * UNIT < PAGE ? (u - 1) * UNIT : PAGE - 1;
	uint64_t g = align_gap(c, rel, 1);
	if (u > g + 1) {
		uint64_t pages = ((u - g - 1) * UNIT) & ~(uint64_t)(PAGE - 1);
		if (pages >= PAGE)
			best = pages;
	}
	return best;
}

/* ---- repair ---- */

/* Rebuild every piece of derived state from one walk of the chain, merging adjacent free blocks
 * (a crash between a free's mark and its merges leaves them). Caller holds the mutex. */
static int heap_repair_locked(struct heap_ctx *c)
{
	struct heap_hdr *h = c->h;
	shm_sched_point("heap.repair.locked");
	memset(h->heads, 0, sizeof(h->heads));
	memset(h->sl_bitmap, 0, sizeof(h->sl_bitmap));
	h->fl_bitmap = 0;
	h->free_bytes = h->free_blocks = h->used_blocks = 0;
	uint64_t p = c->start, last = 0, pend = 0, pend_u = 0;
	while (p < c->end) {    /* each step advances >= 64 bytes: at most heap/64 steps */
		uint64_t u;
		unsigned s;
		if (blk_get(c, p, &u, &s)) {
			h->state = HEAP_BROKEN;
			return -EBADMSG;
		}
		if (s == ST_FREE && pend_u) {
			blk_commit(c, pend, pend_u + u, ST_FREE);
			blk_scrub(c, p);
			pend_u += u;
			last = pend_u;
		} else {
			blk(c, p)->prev_size = last * UNIT;
			if (pend_u && list_insert(c, pend, pend_u))
				goto broken;
			pend_u = 0;
			if (s == ST_FREE) {
				pend = p;
				pend_u = u;
			} else {
				h->used_blocks++;
			}
			last = u;
		}
		p += u * UNIT;
	}
	if (pend_u && list_insert(c, pend, pend_u))
		goto broken;
	h->state = HEAP_OK;
	h->repairs++;
	return 0;
broken:
	h->state = HEAP_BROKEN;
	return -EBADMSG;
}

static int heap_lock(struct heap_ctx *c)
{
	struct heap_hdr *h = c->h;
	int rc = shm_mutex_lock(c->a, &h->lock.mu);
	if (rc == -EOWNERDEAD) {
		/* the last holder died inside a call: persist "rebuild" before anything else, so
		 * dying during the repair leaves the same instruction for the next locker */
		h->state = HEAP_REBUILD;
	} else if (rc) {
		return rc;
	}
	if (h->state != HEAP_OK && h->state != HEAP_BROKEN)
		heap_repair_locked(c);
	if (h->state != HEAP_OK) {
		shm_mutex_unlock(c->a, &h->lock.mu);
		return -EBADMSG;
	}
	return 0;
}

static void heap_unlock(struct heap_ctx *c)
{
	if (c->h->state == HEAP_REBUILD)
		heap_repair_locked(c);
	shm_mutex_unlock(c->a, &c->h->lock.mu);
}

/* ---- format ---- */

uint64_t shm_heap_capacity(uint64_t region_bytes)
{
	if (region_bytes < HEAP_HDR_BYTES + 2 * UNIT)
		return 0;
	uint64_t units = (region_bytes - HEAP_HDR_BYTES) / UNIT;
	return (units > MAX_UNITS ? MAX_UNITS : units) * UNIT;
}

int shm_heap_format(struct shm_arena *a)
{
	uint64_t size;
	uint8_t *base = shm_region(a, SHM_REGION_HEAP, &size);
	if (size < HEAP_HDR_BYTES + 2 * UNIT)
		return -EINVAL;
	struct heap_hdr *h = (struct heap_hdr *)base;
	memset(h, 0, sizeof(*h));
	uint64_t end = HEAP_HDR_BYTES + shm_heap_capacity(size);
	uint64_t seed = 0;
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
		seed = mix64(shm_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)h);
	h->magic = HEAP_MAGIC;
	h->version = HEAP_VERSION;
	h->hdr_bytes = HEAP_HDR_BYTES;
	h->area_start = HEAP_HDR_BYTES;
	h->area_end = end;
	h->seed = seed;

	shm_mutex_init(&h->lock.mu);

	struct heap_ctx c;
	if (heap_ctx(a, &c))
		return -EINVAL;
	struct heap_blk *b = blk(&c, c.start);
	memset(b, 0, sizeof(*b));
	blk_commit(&c, c.start, (c.end - c.start) / UNIT, ST_FREE);
	h->state = HEAP_OK;
	return list_insert(&c, c.start, (c.end - c.start) / UNIT) ? -EINVAL : 0;
}

uint64_t shm_heap_footprint(uint64_t bytes)
{
	uint64_t a = shm_heap_page_aligned(bytes) ? PAGE : UNIT;
	bytes = SHM_HEAP_BYTES(bytes);
	if (bytes > MAX_UNITS * UNIT)
		return UINT64_MAX;
	if (!bytes)
		bytes = 1;
	return ((bytes + a - 1) & ~(a - 1)) + SHM_HEAP_BLOCK_HDR;
}

/* ---- alloc ---- */

/* Carve @need units (after @gap units of alignment) out of the listed free block (@rel, @units). */
static int alloc_block(struct heap_ctx *c, uint64_t rel, uint64_t units, uint64_t gap, uint64_t need, uint64_t tag,
		       uint64_t *off)
{
	int rc;
	if ((rc = list_remove(c, rel, units)))
		return rc;
	/* the block is off the lists but still FREE in the chain: a crash returns it to them */
	shm_fault_point("heap.alloc.unlinked");
	uint64_t after = rel + units * UNIT;
	if (gap) {
		uint64_t arel = rel + gap * UNIT;
		struct heap_blk *nb = blk(c, arel);
		nb->prev_size = gap * UNIT;
		nb->next_free = nb->prev_free = 0;
		atomic_store_explicit(&nb->tag, 0, memory_order_relaxed);
		blk_commit(c, arel, units - gap, ST_FREE);      /* inside the block: not in the chain yet */
		shm_fault_point("heap.alloc.align");
		blk_commit(c, rel, gap, ST_FREE);               /* one store: the gap, then the rest */
		list_insert(c, rel, gap);       /* on failure the rebuild at unlock relinks the gap */
		rel = arel;
		units -= gap;
	}
	uint64_t rem = units - need;
	if (rem) {
		struct heap_blk *rb = blk(c, rel + need * UNIT);
		rb->prev_size = need * UNIT;
		rb->next_free = rb->prev_free = 0;
		atomic_store_explicit(&rb->tag, 0, memory_order_relaxed);
		blk_commit(c, rel + need * UNIT, rem, ST_FREE); /* inside the block: not in the chain yet */
		shm_fault_point("heap.alloc.split");
	}
	/* the tag first, then one store shrinks the block and marks it allocated */
	atomic_store_explicit(&blk(c, rel)->tag, tag, memory_order_relaxed);
	blk_commit(c, rel, need, ST_ALLOC);
	c->h->used_blocks++;
	shm_fault_point("heap.alloc.done");
	if (rem)
		list_insert(c, rel + need * UNIT, rem);
	if (after < c->end)
		blk(c, after)->prev_size = (rem ? rem : need) * UNIT;
	*off = c->region_off + rel + UNIT;
	return 0;
}

static int alloc_locked(struct heap_ctx *c, uint64_t need, int aligned, uint64_t tag, uint64_t *off)
{
	uint64_t rel = 0, units = 0, gap = 0;
	int rc = find_block(c, need, aligned, &rel, &units, &gap);
	if (rc)
		return rc;
	return alloc_block(c, rel, units, gap, need, tag, off);
}

/* What both allocations check first: the arguments, the heap, a request the heap could ever hold
 * (its footprint into @fp). 0 or a negative errno. */
static int alloc_args(struct shm_arena *a, uint64_t bytes, const uint64_t *off, struct heap_ctx *c, uint64_t *fp)
{
	if (!a || !off || !SHM_HEAP_BYTES(bytes))
		return -EINVAL;
	int rc = heap_ctx(a, c);
	if (rc)
		return rc;
	*fp = shm_heap_footprint(bytes);
	return *fp > c->end - c->start ? -E2BIG : 0;
}

/* The region offset of the block whose payload starts at arena offset @off, if @off lies in the
 * heap's blocks (its header not checked): 0, or -1. */
static int payload_rel(const struct heap_ctx *c, uint64_t off, uint64_t *rel)
{
	if (off < c->region_off + c->start + UNIT || off - c->region_off - UNIT >= c->end)
		return -1;
	*rel = off - c->region_off - UNIT;
	return 0;
}

int shm_heap_alloc(struct shm_arena *a, uint64_t bytes, uint64_t tag, uint64_t *off)
{
	struct heap_ctx c;
	uint64_t fp;
	int rc = alloc_args(a, bytes, off, &c, &fp);
	if (rc || (rc = heap_lock(&c)))
		return rc;
	rc = alloc_locked(&c, fp / UNIT, shm_heap_page_aligned(bytes), tag, off);
	if (rc == -EBADMSG && c.h->state == HEAP_REBUILD && heap_repair_locked(&c) == 0)
		rc = alloc_locked(&c, fp / UNIT, shm_heap_page_aligned(bytes), tag, off);   /* once, on rebuilt lists */
	heap_unlock(&c);
	return rc;
}

/* The heap of @a validated into @c, and its lock taken: 0, or a negative errno (-EINVAL for no
 * arena) with the lock not held. */
static int heap_enter(struct shm_arena *a, struct heap_ctx *c)
{
	if (!a)
		return -EINVAL;
	int rc = heap_ctx(a, c);
	return rc ? rc : heap_lock(c);
}

static int listed(const struct heap_ctx *c, uint64_t p, uint64_t u);

/* Is region offset @rel the start of a block (free or allocated) whose neighbours agree with it?
 * 0 with its size and state, or -EBADMSG. */
static int blk_start(const struct heap_ctx *c, uint64_t rel, uint64_t *units, unsigned *st)
{
	uint64_t u2;
	unsigned s2;
	if (blk_get(c, rel, units, st))
		return -EBADMSG;
	uint64_t next = rel + *units * UNIT;
	if (next < c->end && (blk_get(c, next, &u2, &s2) || blk(c, next)->prev_size != *units * UNIT))
		return -EBADMSG;
	uint64_t ps = blk(c, rel)->prev_size;
	if (rel == c->start ? ps != 0
			    : ps == 0 || (ps & (UNIT - 1)) || ps > rel - c->start || blk_get(c, rel - ps, &u2, &s2) ||
				      u2 * UNIT != ps)
		return -EBADMSG;
	return 0;
}

int shm_heap_alloc_at(struct shm_arena *a, uint64_t at, uint64_t bytes, uint64_t tag, uint64_t *off)
{
	struct heap_ctx c;
	uint64_t fp, rel, units;
	int rc = alloc_args(a, bytes, off, &c, &fp);
	if (rc)
		return rc;
	if (payload_rel(&c, at, &rel))
		return -ENOSPC;
	if ((rc = heap_lock(&c)))
		return rc;
	unsigned st;
	rc = -ENOSPC; /* not (or no longer) a free block that holds the request */
	if (blk_start(&c, rel, &units, &st) == 0 && st == ST_FREE && listed(&c, rel, units)) {
		uint64_t gap = align_gap(&c, rel, shm_heap_page_aligned(bytes));
		if (gap + fp / UNIT <= units)
			rc = alloc_block(&c, rel, units, gap, fp / UNIT, tag, off);
	}
	heap_unlock(&c);
	return rc;
}

int shm_heap_scan(struct shm_arena *a, uint64_t from, uint64_t max_blocks,
		  int (*cb)(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx), void *ctx)
{
	struct heap_ctx c;
	if (!cb)
		return -EINVAL;
	int rc = heap_enter(a, &c);
	if (rc)
		return rc;
	uint64_t first = c.start, u, rel;
	unsigned s;
	if (payload_rel(&c, from, &rel) == 0 && blk_start(&c, rel, &u, &s) == 0)
		first = rel;
	uint64_t p = first, n = 0;
	int laps = 0;
	rc = 0;
	while (n < max_blocks) {
		if (blk_get(&c, p, &u, &s)) {
			rc = -EBADMSG;
			break;
		}
		uint64_t tag = s == ST_ALLOC ? atomic_load_explicit(&blk(&c, p)->tag, memory_order_relaxed) : 0;
		n++;
		if (cb(c.region_off + p + UNIT, u * UNIT - SHM_HEAP_BLOCK_HDR, s == ST_ALLOC, tag, ctx))
			break;
		p += u * UNIT;
		if (p >= c.end)
			p = c.start;
		if (p == first && ++laps == 2)
			break;
	}
	heap_unlock(&c);
	return rc ? rc : (int)(n > INT32_MAX ? INT32_MAX : n);
}

/* ---- live allocations ---- */

/* Validate that @off is the start of a live allocation: its header, its successor's prev_size and
 * its predecessor must all agree, so a forged header inside a payload is refused. */
static int blk_live(const struct heap_ctx *c, uint64_t off, uint64_t *rel, uint64_t *units)
{
	unsigned s;
	if (off < c->region_off + c->start + UNIT || off - c->region_off >= c->end)
		return -EBADMSG;
	uint64_t r = off - c->region_off - UNIT;
	if (blk_start(c, r, units, &s) || s != ST_ALLOC)
		return -EBADMSG;
	*rel = r;
	return 0;
}

static int free_locked(struct heap_ctx *c, uint64_t off)
{
	uint64_t rel, units, nu = 0, pu = 0, prev = 0;
	unsigned ns = 0, ps = 0;
	int rc = blk_live(c, off, &rel, &units);
	if (rc)
		return rc;
	uint64_t next = rel + units * UNIT;
	if (next < c->end)
		(void)blk_get(c, next, &nu, &ns);       /* validated by blk_live */
	if (rel > c->start) {
		prev = rel - blk(c, rel)->prev_size;
		(void)blk_get(c, prev, &pu, &ps);
	}
	blk_commit(c, rel, units, ST_FREE);               /* one store: the block is free */
	c->h->used_blocks--;
	shm_fault_point("heap.free.marked");
	if (ns == ST_FREE) {
		if (list_remove(c, next, nu))
			return 0;       /* freed; the rebuild at unlock merges and relinks */
		blk_commit(c, rel, units + nu, ST_FREE);  /* one store swallows the successor */
		blk_scrub(c, next);
		units += nu;
	}
	shm_fault_point("heap.free.merge");
	if (ps == ST_FREE) {
		if (list_remove(c, prev, pu))
			return 0;
		blk_commit(c, prev, pu + units, ST_FREE); /* one store: the predecessor swallows us */
		blk_scrub(c, rel);
		rel = prev;
		units += pu;
	}
	list_insert(c, rel, units);
	if (rel + units * UNIT < c->end)
		blk(c, rel + units * UNIT)->prev_size = units * UNIT;
	return 0;
}

int shm_heap_free(struct shm_arena *a, uint64_t off)
{
	struct heap_ctx c;
	int rc = heap_enter(a, &c);
	if (rc)
		return rc;
#ifdef SC_TEST_HOOKS
	/* test build: poison what is freed, so that a reader still looking at it (a reclamation
	 * bug) reads garbage and fails its digest check instead of passing by luck */
	uint64_t rel, units;
	if (blk_live(&c, off, &rel, &units) == 0) {
		/* its start and its end (whole up to 1 MiB): a stale reader of the payload meets one */
		uint8_t *p = c.base + rel + SHM_HEAP_BLOCK_HDR;
		uint64_t n = units * UNIT - SHM_HEAP_BLOCK_HDR, head = n < (1u << 20) ? n : (1u << 20);
		memset(p, 0xdb, head);
		if (n > head)
			memset(p + n - (n - head < (64u << 10) ? n - head : (64u << 10)), 0xdb,
			       n - head < (64u << 10) ? n - head : (64u << 10));
	}
#endif
	shm_sched_point("heap.free.locked");
	rc = free_locked(&c, off);
	heap_unlock(&c);
	return rc;
}

int shm_heap_set_tag(struct shm_arena *a, uint64_t off, uint64_t tag)
{
	struct heap_ctx c;
	uint64_t rel, units;
	int rc = heap_enter(a, &c);
	if (rc)
		return rc;
	rc = blk_live(&c, off, &rel, &units);
	if (!rc)
		atomic_store_explicit(&blk(&c, rel)->tag, tag, memory_order_relaxed);  /* one store */
	heap_unlock(&c);
	return rc;
}

int shm_heap_size(struct shm_arena *a, uint64_t off, uint64_t *bytes)
{
	struct heap_ctx c;
	uint64_t rel, units;
	if (!bytes)
		return -EINVAL;
	int rc = heap_enter(a, &c);
	if (rc)
		return rc;
	rc = blk_live(&c, off, &rel, &units);
	if (!rc)
		*bytes = units * UNIT - SHM_HEAP_BLOCK_HDR;
	heap_unlock(&c);
	return rc;
}

int shm_heap_stats(struct shm_arena *a, struct shm_heap_stats *st)
{
	struct heap_ctx c;
	if (!st)
		return -EINVAL;
	int rc = heap_enter(a, &c);
	if (rc)
		return rc;
	struct heap_hdr *h = c.h;
	memset(st, 0, sizeof(*st));
	st->heap_bytes = c.end - c.start;
	st->free_bytes = h->free_bytes <= st->heap_bytes ? h->free_bytes : st->heap_bytes;
	st->used_bytes = st->heap_bytes - st->free_bytes;
	st->free_blocks = h->free_blocks;
	st->used_blocks = h->used_blocks;
	st->repairs = h->repairs;
	/* the largest class's first few blocks: the same ones find_block looks at first */
	uint64_t flm = h->fl_bitmap & ((1ull << FL_COUNT) - 1);
	if (flm) {
		unsigned fl = 63u - (unsigned)__builtin_clzll(flm);
		uint32_t slm = h->sl_bitmap[fl] & ((1u << SL_COUNT) - 1);
		unsigned sl = slm ? 31u - (unsigned)__builtin_clz(slm) : 0;
		uint64_t r = slm ? h->heads[fl][sl] : 0, u;
		for (unsigned k = 0; r && k < SCAN_PER_LIST; k++) {
			if (list_entry(&c, r, fl, sl, &u))
				break;
			uint64_t m = max_request(&c, r, u);
			if (m > st->largest_free)
				st->largest_free = m;
			r = blk(&c, r)->next_free;
		}
	}
	heap_unlock(&c);
	return 0;
}

/* Is the free block at @p linked into its class list (O(1): its neighbours point back at it)? */
static int listed(const struct heap_ctx *c, uint64_t p, uint64_t u)
{
	unsigned fl, sl;
	mapping(u, &fl, &sl);
	const struct heap_blk *b = blk(c, p);
	if (b->prev_free ? !blk_is_free(c, b->prev_free) || blk(c, b->prev_free)->next_free != p
			 : c->h->heads[fl][sl] != p)
		return 0;
	return !b->next_free || (blk_is_free(c, b->next_free) && blk(c, b->next_free)->prev_free == p);
}

int shm_heap_walk(struct shm_arena *a,
		  int (*cb)(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx), void *ctx)
{
	struct heap_ctx c;
	int rc = heap_enter(a, &c);
	if (rc)
		return rc;
	uint64_t p = c.start, last = 0, free_b = 0, free_n = 0, used_n = 0;
	unsigned last_s = 0;
	while (p < c.end) {
		uint64_t u;
		unsigned s;
		if (blk_get(&c, p, &u, &s) || blk(&c, p)->prev_size != last * UNIT ||
		    (s == ST_FREE && (last_s == ST_FREE || !listed(&c, p, u)))) {
			rc = -EBADMSG;
			break;
		}
		if (s == ST_FREE) {
			free_b += u * UNIT;
			free_n++;
		} else {
			used_n++;
		}
		if (cb) {
			uint64_t tag = s == ST_ALLOC ? atomic_load_explicit(&blk(&c, p)->tag, memory_order_relaxed) : 0;
			rc = cb(c.region_off + p + UNIT, u * UNIT - SHM_HEAP_BLOCK_HDR, s == ST_ALLOC, tag, ctx);
			if (rc)
				break;
		}
		last = u;
		last_s = s;
		p += u * UNIT;
	}
	if (!rc && (free_b != c.h->free_bytes || free_n != c.h->free_blocks || used_n != c.h->used_blocks))
		rc = -EBADMSG;
	heap_unlock(&c);
	return rc;
}

int shm_heap_repair(struct shm_arena *a)
{
	struct heap_ctx c;
	if (!a)
		return -EINVAL;
	int rc = heap_ctx(a, &c);
	if (rc)
		return rc;
	rc = shm_mutex_lock(a, &c.h->lock.mu);
	if (rc && rc != -EOWNERDEAD) /* a dead holder: the rebuild below is the repair */
		return rc;
	rc = heap_repair_locked(&c);
	shm_mutex_unlock(a, &c.h->lock.mu);
	return rc;
}

struct shm_mutex *shm_heap_mutex(struct shm_arena *a)
{
	struct heap_ctx c;
	return heap_ctx(a, &c) ? NULL : &c.h->lock.mu;
}

#ifdef SC_TEST_HOOKS
uint64_t shm_heap_test_word(struct shm_arena *a, uint64_t rel, uint64_t units, unsigned st)
{
	struct heap_ctx c;
	return heap_ctx(a, &c) ? 0 : word_make(&c, rel, units, st);
}
#endif
