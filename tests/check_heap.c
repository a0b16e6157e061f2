/* tests/check_heap.c — the payload heap (shm/heap.c) and fault injection (shm/fault.c). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../shm/fault.h"
#include "../shm/heap.h"
#include "../shm/mutex.h"

/* The heap header's derived state, as laid out in shm/heap.c (its static asserts): the counters,
 * the row and class bitmaps and the 40 x 16 class list heads; and the seed. */
#define HH_FREE_BYTES 144
#define HH_FREE_BLOCKS 152
#define HH_FL_BITMAP 168
#define HH_SL_BITMAP 192
#define HH_HEADS 352
#define HH_HEADS_N (40 * 16)
#define HH_SEED 32

#define ARENA_BYTES (64ull << 20)
#define PAGE SHM_HEAP_PAGE_ALIGN_MIN

struct fx {
	struct sc_arena *sa;
	const char *name;
	struct shm_arena *a;
	struct shm_heap_stats st0;      /* the empty heap */
};

static void fx_open(struct fx *f)
{
	f->sa = sc_test_arena("heap", ARENA_BYTES, &f->name);
	f->a = f->sa->shm;
	ck_assert_int_eq(shm_heap_stats(f->a, &f->st0), 0);
	ck_assert_uint_eq(f->st0.used_bytes, 0);
	ck_assert_uint_eq(f->st0.free_blocks, 1);
	ck_assert_uint_ge(f->st0.largest_free, 32ull << 20);
}

static void fx_close(struct fx *f)
{
	sc_test_arena_destroy(f->sa, f->name);
}

/* In a forked child: a handle of its own on the same arena (an inherited handle is the parent's
 * and refuses to work, -ECHILD). Exits 7 when it cannot attach. */
static struct shm_arena *own(struct shm_arena *inherited)
{
	struct sc_arena *c;
	if (sc_arena_open(inherited->name, &c))
		_exit(7);
	return c->shm;
}

static struct shm_heap_stats stats(struct shm_arena *a)
{
	struct shm_heap_stats st;
	ck_assert_int_eq(shm_heap_stats(a, &st), 0);
	ck_assert_uint_eq(st.used_bytes + st.free_bytes, st.heap_bytes);
	return st;
}

/* The heap is back to exactly its empty state (everything coalesced, nothing lost). */
static void assert_empty(struct fx *f)
{
	struct shm_heap_stats st = stats(f->a);
	ck_assert_int_eq(shm_heap_walk(f->a, NULL, NULL), 0);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_eq(st.used_blocks, 0);
	ck_assert_uint_eq(st.free_blocks, 1);
	ck_assert_uint_eq(st.free_bytes, f->st0.free_bytes);
	ck_assert_uint_eq(st.largest_free, f->st0.largest_free);
}

static uint64_t xrand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Fill / verify an allocation with a pattern unique to @id. */
static void fill(struct shm_arena *a, uint64_t off, uint64_t bytes, uint64_t id)
{
	uint8_t *p = shm_ptr(a, off, bytes);
	ck_assert_ptr_nonnull(p);
	uint64_t w = id * 0x9e3779b97f4a7c15ull | 1;
	for (uint64_t i = 0; i + 8 <= bytes; i += 8)
		memcpy(p + i, &w, 8);
	for (uint64_t i = bytes & ~7ull; i < bytes; i++)
		p[i] = (uint8_t)id;
}

static int verify(struct shm_arena *a, uint64_t off, uint64_t bytes, uint64_t id)
{
	const uint8_t *p = shm_ptr(a, off, bytes);
	if (!p)
		return 0;
	uint64_t w = id * 0x9e3779b97f4a7c15ull | 1, v;
	for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
		memcpy(&v, p + i, 8);
		if (v != w)
			return 0;
	}
	for (uint64_t i = bytes & ~7ull; i < bytes; i++)
		if (p[i] != (uint8_t)id)
			return 0;
	return 1;
}

struct blkrec {
	uint64_t off, bytes, tag;
	int alloc;
};

struct walkbuf {
	struct blkrec *r;
	size_t n, cap;
};

static int collect(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	struct walkbuf *w = ctx;
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 256;
		w->r = realloc(w->r, w->cap * sizeof(*w->r));
	}
	w->r[w->n++] = (struct blkrec){ off, bytes, tag, allocated };
	return 0;
}

/* Allocated blocks carrying @tag. */
static size_t count_tag(struct shm_arena *a, uint64_t tag, uint64_t *off)
{
	struct walkbuf w = { 0 };
	size_t n = 0;
	ck_assert_int_eq(shm_heap_walk(a, collect, &w), 0);
	for (size_t i = 0; i < w.n; i++)
		if (w.r[i].alloc && w.r[i].tag == tag) {
			n++;
			if (off)
				*off = w.r[i].off;
		}
	free(w.r);
	return n;
}

START_TEST(test_footprint)
{
	ck_assert_uint_eq(shm_heap_footprint(1), 128);
	ck_assert_uint_eq(shm_heap_footprint(64), 128);
	ck_assert_uint_eq(shm_heap_footprint(65), 192);
	ck_assert_uint_eq(shm_heap_footprint(4095), 4160);
	ck_assert_uint_eq(shm_heap_footprint(4096), 4160);
	ck_assert_uint_eq(shm_heap_footprint(4097), 8256);
	ck_assert_uint_eq(shm_heap_footprint(UINT64_MAX), UINT64_MAX);
}
END_TEST

/* Packed requests (SHM_HEAP_PACKED): 64-byte placement and rounding at every size, so that
 * blocks tile the heap with no alignment gap between them; page-aligned requests are unchanged. */
START_TEST(test_packed)
{
	const uint64_t P = SHM_HEAP_PACKED;
	ck_assert_uint_eq(shm_heap_footprint(4096 | P), 4160);
	ck_assert_uint_eq(shm_heap_footprint(4097 | P), 4224);
	ck_assert_uint_eq(shm_heap_footprint(4160 | P), 4224);
	ck_assert_uint_eq(shm_heap_footprint((1u << 20) | P), (1u << 20) + 64);
	ck_assert_uint_eq(shm_heap_footprint(4160), 8256); /* not packed: a page multiple */
	ck_assert_uint_eq(shm_heap_footprint(UINT64_MAX), UINT64_MAX);
	ck_assert_uint_eq(shm_heap_footprint((UINT64_MAX >> 2) | P), UINT64_MAX);
	ck_assert(!shm_heap_page_aligned(8192 | P) && shm_heap_page_aligned(8192) && !shm_heap_page_aligned(4095));

	struct fx f;
	fx_open(&f);
	uint64_t off, first, offs[8], sz;
	ck_assert_int_eq(shm_heap_alloc(f.a, P, 1, &off), -EINVAL); /* no bytes, only the flag */
	ck_assert_int_eq(shm_heap_alloc(f.a, (ARENA_BYTES * 2) | P, 1, &off), -E2BIG);
	ck_assert_int_eq(shm_heap_alloc(f.a, 100, 1, &first), 0); /* the next block is not page aligned */
	for (int i = 0; i < 8; i++) {
		struct shm_heap_stats b = stats(f.a);
		ck_assert_int_eq(shm_heap_alloc(f.a, 4160 | P, 10 + (uint64_t)i, &offs[i]), 0);
		ck_assert_uint_eq(offs[i] % 64, 0);
		ck_assert_uint_eq(offs[i], (i ? offs[i - 1] : first) + (i ? 4224 : shm_heap_footprint(100)));
		ck_assert_uint_eq(stats(f.a).used_bytes - b.used_bytes, 4224);
		ck_assert_int_eq(shm_heap_size(f.a, offs[i], &sz), 0);
		ck_assert_uint_eq(sz, 4160);
		fill(f.a, offs[i], sz, 10 + (uint64_t)i);
	}
	struct shm_heap_stats st = stats(f.a);
	ck_assert_uint_eq(st.free_blocks, 1); /* no gap anywhere: the blocks tile */
	ck_assert_uint_eq(st.used_bytes, shm_heap_footprint(100) + 8 * 4224);
	/* the same request unpacked lands on the next page and leaves the gap free */
	ck_assert_int_eq(shm_heap_alloc(f.a, 4160, 99, &off), 0);
	ck_assert_uint_eq(off % PAGE, 0);
	ck_assert_uint_eq(stats(f.a).free_blocks, 2);
	ck_assert_int_eq(shm_heap_free(f.a, off), 0);
	/* a freed packed block is reused in place, whole, by alloc_at; span_fits agrees */
	ck_assert_int_eq(shm_heap_free(f.a, offs[3]), 0);
	ck_assert(shm_heap_span_fits(offs[3], offs[4] - 64, 4160 | P));
	ck_assert(!shm_heap_span_fits(offs[3], offs[4] - 64, 4161 | P));
	ck_assert(!shm_heap_span_fits(offs[3], offs[4] - 64, 4160));
	ck_assert_int_eq(shm_heap_alloc_at(f.a, offs[3], 4160, 98, &off), -ENOSPC); /* page-aligned: no room */
	ck_assert_int_eq(shm_heap_alloc_at(f.a, offs[3], 4160 | P, 13, &off), 0);
	ck_assert_uint_eq(off, offs[3]);
	fill(f.a, off, 4160, 13);
	for (int i = 0; i < 8; i++) {
		ck_assert(verify(f.a, offs[i], 4160, 10 + (uint64_t)i));
		ck_assert_int_eq(shm_heap_free(f.a, offs[i]), 0);
	}
	ck_assert_int_eq(shm_heap_free(f.a, first), 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

static int stop_walk(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	return 7;
}

START_TEST(test_roundtrip)
{
	struct fx f;
	fx_open(&f);
	uint64_t off, sz;
	ck_assert_int_eq(shm_heap_alloc(f.a, 0, 1, &off), -EINVAL);
	ck_assert_int_eq(shm_heap_alloc(f.a, 100, 0xabcd, &off), 0);
	ck_assert_int_eq(shm_heap_size(f.a, off, &sz), 0);
	ck_assert_uint_ge(sz, 100);
	fill(f.a, off, sz, 7);
	struct shm_heap_stats st = stats(f.a);
	ck_assert_uint_eq(st.used_bytes, shm_heap_footprint(100));
	ck_assert_uint_eq(st.used_blocks, 1);
	ck_assert_uint_eq(count_tag(f.a, 0xabcd, NULL), 1);
	ck_assert_int_eq(shm_heap_set_tag(f.a, off, 0x1234), 0);
	ck_assert_uint_eq(count_tag(f.a, 0xabcd, NULL), 0);
	ck_assert_uint_eq(count_tag(f.a, 0x1234, NULL), 1);
	ck_assert(verify(f.a, off, sz, 7));
	ck_assert_int_eq(shm_heap_free(f.a, off), 0);
	assert_empty(&f);
	/* walk stops at a non-zero callback result and returns it */
	ck_assert_int_eq(shm_heap_alloc(f.a, 100, 1, &off), 0);
	ck_assert_int_eq(shm_heap_walk(f.a, stop_walk, NULL), 7);
	ck_assert_int_eq(shm_heap_free(f.a, off), 0);
	fx_close(&f);
}
END_TEST

/* @off relative to the heap's region (what shm_heap_alloc_off_ok judges) */
static uint64_t heap_rel(struct shm_arena *a, uint64_t off)
{
	return off - (uint64_t)((uint8_t *)shm_region(a, SHM_REGION_HEAP, NULL) - a->base);
}

/* shm_heap_alloc_off_ok, the readers' cheap check of an offset, is exact at the heap's start: the
 * first allocation is the first offset it accepts, the heap's header and the first block's header
 * are refused, and so is any offset off the 64-byte unit. */
START_TEST(test_the_first_allocation_is_the_first_offset_accepted)
{
	struct fx f;
	fx_open(&f);
	uint64_t off;
	ck_assert_int_eq(shm_heap_alloc(f.a, 1 | SHM_HEAP_PACKED, 1, &off), 0);
	uint64_t rel = heap_rel(f.a, off);
	ck_assert_uint_eq(rel, SHM_HEAP_HDR_BYTES + SHM_HEAP_BLOCK_HDR);
	ck_assert(shm_heap_alloc_off_ok(rel));
	ck_assert(shm_heap_alloc_off_ok(rel + SHM_HEAP_BLOCK_HDR));
	ck_assert(!shm_heap_alloc_off_ok(rel - SHM_HEAP_BLOCK_HDR));
	ck_assert(!shm_heap_alloc_off_ok(rel - 1));
	ck_assert(!shm_heap_alloc_off_ok(0));
	for (uint64_t d = 1; d < SHM_HEAP_BLOCK_HDR; d++)
		ck_assert(!shm_heap_alloc_off_ok(rel + d));
	ck_assert_int_eq(shm_heap_free(f.a, off), 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

START_TEST(test_alignment)
{
	struct fx f;
	fx_open(&f);
	static const uint64_t sizes[] = { 1, 63, 64, 65, 4095, 4096, 4097, 100, 10000, 1u << 20, 200,
					  (3u << 20) + 5, 4096 * 3, 1, 8191, 64 };
	uint64_t offs[16];
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i < 16; i++) {
			struct shm_heap_stats b = stats(f.a);
			uint64_t sz;
			ck_assert_int_eq(shm_heap_alloc(f.a, sizes[i], i, &offs[i]), 0);
			ck_assert_int_eq(shm_heap_size(f.a, offs[i], &sz), 0);
			ck_assert_uint_ge(sz, sizes[i]);
			if (sizes[i] >= PAGE) {
				ck_assert_msg(offs[i] % PAGE == 0, "size %lu at %lu", (unsigned long)sizes[i],
					      (unsigned long)offs[i]);
				ck_assert_uint_eq(sz % PAGE, 0);
			} else {
				ck_assert_uint_eq(offs[i] % 64, 0);
			}
			struct shm_heap_stats s2 = stats(f.a);
			ck_assert_uint_eq(s2.used_bytes - b.used_bytes, shm_heap_footprint(sizes[i]));
			fill(f.a, offs[i], sz, i + 100 * round);
		}
		ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
		for (unsigned i = 0; i < 16; i++) {
			uint64_t sz;
			ck_assert_int_eq(shm_heap_size(f.a, offs[i], &sz), 0);
			ck_assert(verify(f.a, offs[i], sz, i + 100 * round));
			/* free out of order to exercise both merge directions */
			if (i % 2 == 0)
				ck_assert_int_eq(shm_heap_free(f.a, offs[i]), 0);
		}
		for (unsigned i = 1; i < 16; i += 2)
			ck_assert_int_eq(shm_heap_free(f.a, offs[i]), 0);
		assert_empty(&f);
	}
	fx_close(&f);
}
END_TEST

/* A page-aligned request takes the first class whose every block holds it at the worst alignment
 * gap (63 units): a free block of exactly that many units serves it, rather than the heap's large
 * free tail being split for it. */
START_TEST(test_page_aligned_request_takes_the_block_that_just_fits)
{
	struct fx f;
	fx_open(&f);
	const uint64_t P = SHM_HEAP_PACKED, U = 1024; /* units of 64 bytes: a class's lower bound */
	uint64_t a, sep, off;
	ck_assert_int_eq(shm_heap_alloc(f.a, (U * 64 - 64) | P, 1, &a), 0); /* a block of exactly U units */
	ck_assert_int_eq(shm_heap_alloc(f.a, 100, 2, &sep), 0);               /* keeps it from the tail */
	ck_assert_int_eq(shm_heap_free(f.a, a), 0);
	ck_assert_uint_eq(stats(f.a).free_blocks, 2);
	/* 15 pages: U - 63 units with its header, so U at the worst gap */
	uint64_t req = (U / 64 - 1) * PAGE;
	ck_assert_uint_eq(shm_heap_footprint(req) / 64 + 63, U);
	ck_assert_int_eq(shm_heap_alloc(f.a, req, 3, &off), 0);
	ck_assert_uint_eq(off % PAGE, 0);
	ck_assert_msg(off >= a && off + req <= a - 64 + U * 64, "placed at %llu, the block that fits is [%llu, %llu)",
		      (unsigned long long)off, (unsigned long long)(a - 64), (unsigned long long)(a - 64 + U * 64));
	ck_assert_int_eq(shm_heap_free(f.a, off), 0);
	ck_assert_int_eq(shm_heap_free(f.a, sep), 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

START_TEST(test_exhaustion)
{
	struct fx f;
	fx_open(&f);
	static uint64_t big[256], small[1u << 20];
	unsigned nb = 0, ns = 0;
	int rc;
	uint64_t off;
	while ((rc = shm_heap_alloc(f.a, 1u << 20, 1, &off)) == 0) {
		ck_assert_uint_lt(nb, 256);
		big[nb++] = off;
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_uint_ge(nb, 32);
	struct shm_heap_stats st = stats(f.a);
	ck_assert_uint_lt(st.largest_free, 1u << 20);
	/* the last crumbs go to small allocations */
	while ((rc = shm_heap_alloc(f.a, 64, 2, &off)) == 0) {
		ck_assert_uint_lt(ns, 1u << 20);
		small[ns++] = off;
	}
	ck_assert_int_eq(rc, -ENOSPC);
	st = stats(f.a);
	ck_assert_uint_lt(st.largest_free, 64);
	ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
	/* free every other big block: 1 MiB fits again, 2 MiB does not */
	for (unsigned i = 0; i < nb; i += 2)
		ck_assert_int_eq(shm_heap_free(f.a, big[i]), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 2u << 20, 3, &off), -ENOSPC);
	ck_assert_int_eq(shm_heap_alloc(f.a, 1u << 20, 3, &big[0]), 0);
	for (unsigned i = 1; i < nb; i += 2)
		ck_assert_int_eq(shm_heap_free(f.a, big[i]), 0);
	ck_assert_int_eq(shm_heap_free(f.a, big[0]), 0);
	for (unsigned i = 0; i < ns; i++)
		ck_assert_int_eq(shm_heap_free(f.a, small[i]), 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

START_TEST(test_e2big)
{
	struct fx f;
	fx_open(&f);
	uint64_t off, sz;
	ck_assert_int_eq(shm_heap_alloc(f.a, f.st0.heap_bytes + 1, 1, &off), -E2BIG);
	ck_assert_int_eq(shm_heap_alloc(f.a, UINT64_MAX, 1, &off), -E2BIG);
	ck_assert_int_eq(shm_heap_alloc(f.a, f.st0.heap_bytes, 1, &off), -E2BIG);
	/* nearly the whole heap: exactly the reported largest allocation */
	int rc = shm_heap_alloc(f.a, f.st0.largest_free + 1, 1, &off);
	ck_assert_msg(rc == -ENOSPC || rc == -E2BIG, "rc %d", rc);
	ck_assert_int_eq(shm_heap_alloc(f.a, f.st0.largest_free, 1, &off), 0);
	ck_assert_int_eq(shm_heap_size(f.a, off, &sz), 0);
	ck_assert_uint_eq(sz, f.st0.largest_free);
	ck_assert_uint_eq(off % PAGE, 0);
	fill(f.a, off, sz, 3);
	ck_assert_int_eq(shm_heap_free(f.a, off), 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

START_TEST(test_coalesce)
{
	struct fx f;
	fx_open(&f);
	enum { N = 2000 };
	static uint64_t offs[N];
	uint64_t seed = 0x1234567;
	for (int order = 0; order < 3; order++) {
		for (int i = 0; i < N; i++)
			ck_assert_int_eq(shm_heap_alloc(f.a, 1 + xrand(&seed) % 20000, (uint64_t)i, &offs[i]), 0);
		ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
		if (order == 0) {
			for (int i = 0; i < N; i++)
				ck_assert_int_eq(shm_heap_free(f.a, offs[i]), 0);
		} else if (order == 1) {
			for (int i = N - 1; i >= 0; i--)
				ck_assert_int_eq(shm_heap_free(f.a, offs[i]), 0);
		} else {
			for (int i = N - 1; i > 0; i--) {
				int j = (int)(xrand(&seed) % (uint64_t)(i + 1));
				uint64_t t = offs[i];
				offs[i] = offs[j];
				offs[j] = t;
			}
			for (int i = 0; i < N; i++)
				ck_assert_int_eq(shm_heap_free(f.a, offs[i]), 0);
		}
		assert_empty(&f);
	}
	fx_close(&f);
}
END_TEST

/* Random alloc/free against a reference model: patterns prove no two live blocks overlap. */
START_TEST(test_torture)
{
	struct fx f;
	fx_open(&f);
	enum { MAXLIVE = 512, OPS = 20000 };
	static struct { uint64_t off, bytes, id; } live[MAXLIVE];
	unsigned n = 0;
	uint64_t seed = 0xfeedbeef, id = 1;
	for (int op = 0; op < OPS; op++) {
		int do_alloc = n == 0 || (n < MAXLIVE && xrand(&seed) % 100 < 55);
		if (do_alloc) {
			uint64_t r = xrand(&seed) % 100, bytes;
			if (r < 60)
				bytes = 1 + xrand(&seed) % 4096;
			else if (r < 95)
				bytes = 4096 + xrand(&seed) % (256u << 10);
			else
				bytes = (1u << 20) + xrand(&seed) % (4u << 20);
			uint64_t off;
			int rc = shm_heap_alloc(f.a, bytes, id, &off);
			if (rc == -ENOSPC)
				continue;
			ck_assert_int_eq(rc, 0);
			ck_assert(bytes < PAGE ? off % 64 == 0 : off % PAGE == 0);
			ck_assert(shm_heap_alloc_off_ok(heap_rel(f.a, off)));
			fill(f.a, off, bytes, id);
			live[n++] = (typeof(live[0])){ off, bytes, id++ };
		} else {
			unsigned i = (unsigned)(xrand(&seed) % n);
			ck_assert_msg(verify(f.a, live[i].off, live[i].bytes, live[i].id), "block %lu overwritten",
				      (unsigned long)live[i].id);
			ck_assert_int_eq(shm_heap_free(f.a, live[i].off), 0);
			ck_assert_int_eq(shm_heap_free(f.a, live[i].off), -EBADMSG);
			live[i] = live[--n];
		}
		if (op % 1000 == 999) {
			/* the walk agrees with the model: same allocations, same tags */
			struct walkbuf w = { 0 };
			ck_assert_int_eq(shm_heap_walk(f.a, collect, &w), 0);
			unsigned na = 0;
			for (size_t k = 0; k < w.n; k++) {
				if (!w.r[k].alloc)
					continue;
				na++;
				unsigned j;
				for (j = 0; j < n && live[j].off != w.r[k].off; j++)
					;
				ck_assert_uint_lt(j, n);
				ck_assert_uint_eq(w.r[k].tag, live[j].id);
				ck_assert_uint_ge(w.r[k].bytes, live[j].bytes);
			}
			ck_assert_uint_eq(na, n);
			free(w.r);
		}
	}
	for (unsigned i = 0; i < n; i++) {
		ck_assert(verify(f.a, live[i].off, live[i].bytes, live[i].id));
		ck_assert_int_eq(shm_heap_free(f.a, live[i].off), 0);
	}
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

static void assert_same(struct shm_heap_stats a, struct shm_heap_stats b)
{
	ck_assert_uint_eq(a.free_bytes, b.free_bytes);
	ck_assert_uint_eq(a.used_blocks, b.used_blocks);
	ck_assert_uint_eq(a.free_blocks, b.free_blocks);
	ck_assert_uint_eq(a.largest_free, b.largest_free);
	ck_assert_uint_eq(a.repairs, b.repairs);
}

START_TEST(test_hostile_offsets)
{
	struct fx f;
	fx_open(&f);
	uint64_t A, B, C, D, sz, hsize;
	uint8_t *hbase = shm_region(f.a, SHM_REGION_HEAP, &hsize);
	uint64_t hoff = shm_off(f.a, hbase);
	uint64_t E, F, G;       /* three contiguous blocks, for the forged chain below */
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 5, &E), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 6, &F), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 7, &G), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 1, &A), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 100000, 2, &B), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 64, 3, &C), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 64, 4, &D), 0);
	ck_assert_int_eq(shm_heap_free(f.a, C), 0);
	struct shm_heap_stats before = stats(f.a);
	const uint64_t bad[] = { 0, 1, 64, hoff, hoff + 64, hoff + 8192, A - 64, A + 8, A + 64,
				 B + 4096, B + 64, B - 4096, C /* double free */, hoff + hsize,
				 hoff + hsize - 64, f.a->size, f.a->size + 64, UINT64_MAX,
				 UINT64_MAX - 63, (uint64_t)1 << 63 };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(shm_heap_free(f.a, bad[i]) == -EBADMSG, "free bad[%u]", i);
		ck_assert_int_eq(shm_heap_size(f.a, bad[i], &sz), -EBADMSG);
		ck_assert_int_eq(shm_heap_set_tag(f.a, bad[i], 9), -EBADMSG);
	}
	assert_same(stats(f.a), before);
	ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
	ck_assert_uint_eq(count_tag(f.a, 9, NULL), 0);

	/* a copy of B's valid header planted inside B's own payload is refused: the header check is
	 * keyed by position, and the neighbours do not agree */
	uint8_t *pb = shm_ptr(f.a, B, 100000);
	memcpy(pb + 8192 - 64, pb - 64, 64);
	ck_assert_int_eq(shm_heap_free(f.a, B + 8192), -EBADMSG);
	/* and D's header planted right behind D (where a forger would put it) too */
	uint8_t *pd = shm_ptr(f.a, D, 64);
	memcpy(pb + 4096 - 64, pd - 64, 64);
	ck_assert_int_eq(shm_heap_free(f.a, B + 4096), -EBADMSG);
	assert_same(stats(f.a), before);
	ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);

	/* a whole consistent chain (E, F, G) copied into B's payload: the neighbours agree with the
	 * forged F, only the position-keyed header check refuses it */
	ck_assert_uint_eq(F - E, shm_heap_footprint(1000));
	ck_assert_uint_eq(G - F, shm_heap_footprint(1000));
	memcpy(pb + PAGE, (uint8_t *)shm_ptr(f.a, E, 1) - 64, G - E + 64);
	uint64_t forged = B + PAGE + 64 + (F - E);
	ck_assert_int_eq(shm_heap_free(f.a, forged), -EBADMSG);
	ck_assert_int_eq(shm_heap_size(f.a, forged, &sz), -EBADMSG);
	ck_assert_int_eq(shm_heap_set_tag(f.a, forged, 1), -EBADMSG);
	assert_same(stats(f.a), before);
	ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
	ck_assert_int_eq(shm_heap_free(f.a, E), 0);
	ck_assert_int_eq(shm_heap_free(f.a, F), 0);
	ck_assert_int_eq(shm_heap_free(f.a, G), 0);

	ck_assert_int_eq(shm_heap_free(f.a, A), 0);
	ck_assert_int_eq(shm_heap_free(f.a, A), -EBADMSG);
	ck_assert_int_eq(shm_heap_free(f.a, B), 0);
	ck_assert_int_eq(shm_heap_free(f.a, D), 0);
	ck_assert_int_eq(shm_heap_free(f.a, D), -EBADMSG);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

START_TEST(test_corrupt_header)
{
	struct fx f;
	fx_open(&f);
	uint64_t A, B, C, sz, X;
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 1, &A), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 2, &B), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 3, &C), 0);
	uint8_t *hb = (uint8_t *)shm_ptr(f.a, B, 1) - SHM_HEAP_BLOCK_HDR, saved[64];
	memcpy(saved, hb, 64);
	uint64_t seed = 99;
	for (int trial = 0; trial < 3; trial++) {
		if (trial == 0) {
			for (int i = 0; i < 64; i += 8) {
				uint64_t r = xrand(&seed);
				memcpy(hb + i, &r, 8);
			}
		} else if (trial == 1) {
			hb[3] ^= 0x10;        /* one bit of B's size */
		} else {
			hb[0] ^= 0x03;        /* B's state */
		}
		ck_assert_int_eq(shm_heap_free(f.a, B), -EBADMSG);
		ck_assert_int_eq(shm_heap_size(f.a, B, &sz), -EBADMSG);
		ck_assert_int_eq(shm_heap_set_tag(f.a, B, 5), -EBADMSG);
		ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), -EBADMSG);
		/* the neighbours cannot be freed through the bad header either */
		ck_assert_int_eq(shm_heap_free(f.a, C), -EBADMSG);
		/* unrelated allocations still work */
		ck_assert_int_eq(shm_heap_alloc(f.a, 5000, 4, &X), 0);
		ck_assert_int_eq(shm_heap_free(f.a, X), 0);
		memcpy(hb, saved, 64);
		ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
	}
	/* a corrupted free-list link is detected, the lists are rebuilt from the chain, and the
	 * allocation goes on from the rebuilt lists */
	uint64_t hsize;
	uint8_t *hh;
	struct shm_heap_stats st = stats(f.a);
	uint8_t *fb = (uint8_t *)shm_ptr(f.a, C, 1) - SHM_HEAP_BLOCK_HDR + shm_heap_footprint(1000);
	uint64_t junk = 0x123456789ull;
	memcpy(fb + 24, &junk, 8);      /* next_free of the free block after C */
	memcpy(fb + 32, &junk, 8);      /* prev_free */
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 6, &X), 0);
	struct shm_heap_stats st2 = stats(f.a);
	ck_assert_uint_eq(st2.repairs, st.repairs + 1);
	ck_assert_uint_eq(st2.used_bytes, st.used_bytes + shm_heap_footprint(1000));
	ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
	ck_assert_int_eq(shm_heap_free(f.a, X), 0);
	/* a bitmap bit pointing at an empty list: same */
	hh = shm_region(f.a, SHM_REGION_HEAP, &hsize);
	memset(hh + 3 * 64, 0xff, 4);   /* sl_bitmap[0]: classes of 1..15 units claim blocks */
	ck_assert_int_eq(shm_heap_alloc(f.a, 100, 6, &X), 0);
	ck_assert_uint_eq(stats(f.a).repairs, st.repairs + 2);
	ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
	ck_assert_int_eq(shm_heap_free(f.a, X), 0);

	/* a scribbled heap header: every call refuses, nothing crashes */
	uint8_t hsaved[64];
	memcpy(hsaved, hh, 64);
	memset(hh, 0xff, 64);
	ck_assert_int_eq(shm_heap_alloc(f.a, 10, 1, &X), -EBADMSG);
	ck_assert_int_eq(shm_heap_free(f.a, A), -EBADMSG);
	ck_assert_int_eq(shm_heap_stats(f.a, &st), -EBADMSG);
	ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), -EBADMSG);
	memcpy(hh, hsaved, 64);
	/* one field at a time: a wrong version, header size or start, and an end past the region,
	 * too close to the start, or off the 64-byte unit (by 8 or 32 bytes, after an odd and an even
	 * number of units) */
	{
		uint64_t start, end;
		memcpy(&start, hh + 16, 8);
		memcpy(&end, hh + 24, 8);
		const struct { unsigned at, width; uint64_t v; } bad[] = {
			{ 8, 4, 99 }, { 12, 4, 4096 }, { 16, 8, start + 64 }, { 24, 8, hsize + 64 },
			{ 24, 8, start + 64 }, { 24, 8, end - 64 + 8 }, { 24, 8, end - 128 + 8 }, { 24, 8, end - 64 + 32 },
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			memcpy(hh + bad[i].at, &bad[i].v, bad[i].width); /* little-endian: the low bytes */
			ck_assert_msg(shm_heap_alloc(f.a, 10, 1, &X) == -EBADMSG, "heap header change %zu accepted", i);
			ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), -EBADMSG);
			memcpy(hh, hsaved, 64);
		}
		ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
	}

	/* a broken chain makes a rebuild fail: the heap refuses everything until it is fixed */
	memset(hb, 0, 8);
	ck_assert_int_eq(shm_heap_repair(f.a), -EBADMSG);
	ck_assert_int_eq(shm_heap_alloc(f.a, 10, 1, &X), -EBADMSG);
	ck_assert_int_eq(shm_heap_free(f.a, A), -EBADMSG);
	memcpy(hb, saved, 64);
	ck_assert_int_eq(shm_heap_repair(f.a), 0);
	ck_assert_int_eq(shm_heap_free(f.a, A), 0);
	ck_assert_int_eq(shm_heap_free(f.a, B), 0);
	ck_assert_int_eq(shm_heap_free(f.a, C), 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

/* ---- crashes ---- */

#define CHILD_TAG 0xc0ffee00ull

struct crash_case {
	const char *point;
	int is_free;        /* child frees the middle of three blocks; else allocates */
	uint64_t bytes;
	int stays_alloc;    /* the in-flight allocation survives the repair */
};

static const struct crash_case crash_cases[] = {
	{ "heap.alloc.unlinked", 0, 1000, 0 },
	{ "heap.alloc.align", 0, 8192, 0 },
	{ "heap.alloc.split", 0, 1000, 0 },
	{ "heap.alloc.split", 0, 3u << 20, 0 },
	{ "heap.alloc.done", 0, 1000, 1 },
	{ "heap.alloc.done", 0, 8192, 1 },
	{ "heap.alloc.split", 0, 8192 | SHM_HEAP_PACKED, 0 },
	{ "heap.alloc.done", 0, 8192 | SHM_HEAP_PACKED, 1 },
	{ "heap.free.marked", 1, 1000, 0 },
	{ "heap.free.merge", 1, 1000, 0 },
	{ "heap.free.merge@2", 1, 1000, 0 },
};

static void run_child_killed(struct shm_arena *a, const char *point, int is_free, uint64_t arg)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		uint64_t off;
		a = own(a);
		if (shm_fault_arm(point))
			_exit(4);
		if (is_free) {
			shm_heap_free(a, arg);
			shm_heap_free(a, arg + 2 * shm_heap_footprint(1000));   /* for "@2" */
		} else {
			shm_heap_alloc(a, arg, CHILD_TAG, &off);
		}
		_exit(3);       /* the fault point was not reached */
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: child status %#x", point,
		      status);
}

START_TEST(test_crash_points)
{
	const struct crash_case *cc = &crash_cases[_i];
	struct fx f;
	fx_open(&f);
	uint64_t blk[6];
	if (cc->is_free) {
		/* A B C D E F of 1000 bytes, contiguous; A, C and E free: freeing B merges both ways,
		 * freeing D (for "@2", after B) too */
		for (int i = 0; i < 6; i++)
			ck_assert_int_eq(shm_heap_alloc(f.a, 1000, (uint64_t)i, &blk[i]), 0);
		ck_assert_int_eq(shm_heap_free(f.a, blk[0]), 0);
		ck_assert_int_eq(shm_heap_free(f.a, blk[2]), 0);
		ck_assert_int_eq(shm_heap_free(f.a, blk[4]), 0);
	}
	struct shm_heap_stats before = stats(f.a);
	run_child_killed(f.a, cc->point, cc->is_free, cc->is_free ? blk[1] : cc->bytes);

	struct shm_heap_stats after = stats(f.a);     /* the first call after the crash repairs */
	ck_assert_uint_eq(after.repairs, before.repairs + 1);
	ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
	uint64_t off = 0;
	if (cc->is_free) {
		int two = strchr(cc->point, '@') != NULL;
		uint64_t fp = shm_heap_footprint(1000);
		ck_assert_uint_eq(after.free_bytes, before.free_bytes + (two ? 2 : 1) * fp);
		ck_assert_uint_eq(after.used_blocks, before.used_blocks - (two ? 2 : 1));
		ck_assert_uint_eq(after.free_blocks, before.free_blocks - (two ? 2 : 1));
		ck_assert_int_eq(shm_heap_free(f.a, blk[1]), -EBADMSG);
		if (!two)
			ck_assert_int_eq(shm_heap_free(f.a, blk[3]), 0);
		ck_assert_int_eq(shm_heap_free(f.a, blk[5]), 0);
	} else if (cc->stays_alloc) {
		ck_assert_uint_eq(count_tag(f.a, CHILD_TAG, &off), 1);
		ck_assert_uint_eq(after.used_bytes, before.used_bytes + shm_heap_footprint(cc->bytes));
		ck_assert(shm_heap_page_aligned(cc->bytes) ? off % PAGE == 0 : off % 64 == 0);
		/* the owner reclaims it by its tag */
		ck_assert_int_eq(shm_heap_free(f.a, off), 0);
	} else {
		ck_assert_uint_eq(count_tag(f.a, CHILD_TAG, NULL), 0);
		assert_same(after, (struct shm_heap_stats){ .free_bytes = before.free_bytes,
							    .used_blocks = before.used_blocks,
							    .free_blocks = before.free_blocks,
							    .largest_free = before.largest_free,
							    .repairs = before.repairs + 1 });
	}
	/* nothing lost: everything coalesces back into the empty heap */
	struct shm_heap_stats end = stats(f.a);
	ck_assert_uint_eq(end.used_bytes, 0);
	ck_assert_uint_eq(end.free_blocks, 1);
	ck_assert_uint_eq(end.largest_free, f.st0.largest_free);
	ck_assert_uint_eq(end.repairs, before.repairs + 1);
	fx_close(&f);
}
END_TEST

static int block_in_walk(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	int fd = *(int *)ctx;
	if (write(fd, "x", 1) != 1)
		_exit(5);
	pause();        /* killed here, holding the heap mutex */
	return 0;
}

/* A holder killed right after any one of its stores to the block chain ("heap.chain@n": every
 * such store of an allocation, of a free that merges both ways, of the repair that merges after a
 * crash) leaves a heap that the next caller repairs with nothing lost: the allocation is whole
 * with its owner's tag or was never made, the freed block is allocated or free, every other block
 * is as it was. */
static const struct { uint64_t bytes; int op; } chain_cases[] = {
	{ 100, 0 }, { 1000, 0 }, { 8192, 0 }, { 8192 | SHM_HEAP_PACKED, 0 }, { 1000, 1 }, { 1000, 2 },
};

START_TEST(test_killed_after_every_chain_store)
{
	const uint64_t bytes = chain_cases[_i].bytes, fp = shm_heap_footprint(1000);
	const int op = chain_cases[_i].op;      /* 0 allocate, 1 free B, 2 the repair after B's free */
	unsigned n;
	for (n = 1;; n++) {
		struct fx f;
		fx_open(&f);
		uint64_t blk[6];
		for (int i = 0; i < 6; i++)     /* A..F; A, C and E free: freeing B merges both ways */
			ck_assert_int_eq(shm_heap_alloc(f.a, 1000, (uint64_t)i, &blk[i]), 0);
		for (int i = 0; i < 6; i += 2)
			ck_assert_int_eq(shm_heap_free(f.a, blk[i]), 0);
		struct shm_heap_stats before = stats(f.a);
		if (op == 2)    /* B freed by a holder killed before its merges: the next locker repairs */
			run_child_killed(f.a, "heap.free.marked", 1, blk[1]);
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			uint64_t off;
			struct shm_heap_stats st;
			struct shm_arena *a = own(f.a);
			char spec[32];
			snprintf(spec, sizeof(spec), "heap.chain@%u", n);
			if (shm_fault_arm(spec))
				_exit(4);
			if (op == 0)
				shm_heap_alloc(a, bytes, CHILD_TAG, &off);
			else if (op == 1)
				shm_heap_free(a, blk[1]);
			else
				shm_heap_stats(a, &st);
			_exit(3);       /* the n-th chain store was not reached: every one was tried */
		}
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
			fx_close(&f);
			break;
		}
		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "store %u: child status %#x", n,
			      status);
		if (op == 1 && (n == 3 || n == 5)) {    /* the free's scrubs: C's header, then B's, are 0 */
			uint64_t w;
			memcpy(&w, shm_ptr(f.a, blk[n == 3 ? 2 : 1] - 64, 8), 8);
			ck_assert_msg(w == 0, "store %u: the swallowed header is not scrubbed", n);
		}
		struct shm_heap_stats after = stats(f.a);
		ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);
		uint64_t off = 0;
		size_t mine = count_tag(f.a, CHILD_TAG, &off), b = count_tag(f.a, 1, NULL);
		ck_assert_uint_le(mine, op == 0);       /* the allocation: made or not */
		if (op == 0)
			ck_assert_uint_eq(b, 1);        /* B: freed only by ops 1 and 2 ... */
		if (op == 2)
			ck_assert_uint_eq(b, 0);        /* ... and op 2 found it marked free */
		ck_assert_uint_eq(count_tag(f.a, 3, NULL), 1);  /* D and F untouched */
		ck_assert_uint_eq(count_tag(f.a, 5, NULL), 1);
		if (op == 0)
			ck_assert_uint_eq(after.used_bytes, before.used_bytes + mine * shm_heap_footprint(bytes));
		else
			ck_assert_uint_eq(after.used_bytes, before.used_bytes - (1 - b) * fp);
		ck_assert_uint_eq(after.used_blocks, before.used_blocks + mine - (op ? 1 - b : 0));
		if (mine) {
			uint64_t sz;
			ck_assert_int_eq(shm_heap_size(f.a, off, &sz), 0);
			ck_assert_uint_ge(sz, SHM_HEAP_BYTES(bytes));
			ck_assert_int_eq(shm_heap_free(f.a, off), 0);
		}
		for (int i = 1; i < 6; i += 2)
			if (i != 1 || b)
				ck_assert_int_eq(shm_heap_free(f.a, blk[i]), 0);
		struct shm_heap_stats end = stats(f.a);
		ck_assert_uint_eq(end.used_bytes, 0);
		ck_assert_uint_eq(end.free_blocks, 1);
		ck_assert_uint_eq(end.largest_free, f.st0.largest_free);
		fx_close(&f);
	}
	ck_assert_uint_gt(n, bytes == 1000 && op == 0 ? 1 : 2);  /* (a 1000-byte request fills a hole: one store) */
}
END_TEST

/* A schedule-point hook: at every start of a heap repair, is the heap mutex held by @a's token? */
struct held_probe {
	struct shm_arena *a;
	unsigned seen, held, listed;    /* listed: some class head still set (the repair not begun) */
};

/* Does @a's token hold the heap mutex? */
static int heap_lock_held(struct shm_arena *a)
{
	struct shm_mutex *m = shm_heap_mutex(a);
	return m && shm_mutex_owner(m) == a->token;
}

static void repair_probe(const char *point, void *ctx)
{
	struct held_probe *p = ctx;
	if (strcmp(point, "heap.repair.locked"))
		return;
	p->seen++;
	p->held += heap_lock_held(p->a);
	const uint8_t *hb = shm_region(p->a, SHM_REGION_HEAP, NULL);
	for (int k = 0; k < HH_HEADS_N; k++) {
		uint64_t v;
		memcpy(&v, hb + HH_HEADS + 8 * k, 8);
		if (v) {
			p->listed++;
			break;
		}
	}
}

START_TEST(test_killed_holding_lock)
{
	struct fx f;
	fx_open(&f);
	uint64_t A;
	ck_assert_int_eq(shm_heap_alloc(f.a, 5000, 1, &A), 0);
	struct shm_heap_stats before = stats(f.a);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		shm_heap_walk(own(f.a), block_in_walk, &p[1]);
		_exit(3);
	}
	close(p[1]);
	char c;
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	close(p[0]);
	kill(pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	struct shm_heap_stats after = stats(f.a);
	ck_assert_uint_eq(after.repairs, before.repairs + 1);
	before.repairs++;
	assert_same(after, before);

	/* again, and this time shm_heap_repair (fsck's call) is the first to lock: it repairs */
	ck_assert_int_eq(pipe(p), 0);
	if ((pid = fork()) == 0) {
		close(p[0]);
		shm_heap_walk(own(f.a), block_in_walk, &p[1]);
		_exit(3);
	}
	ck_assert_int_gt(pid, 0);
	close(p[1]);
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	close(p[0]);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	struct held_probe probe = { .a = f.a };
	shm_sched_set(repair_probe, &probe);
	ck_assert_int_eq(shm_heap_repair(f.a), 0);
	ck_assert_int_eq(shm_heap_repair(f.a), 0);      /* and with nobody dead */
	shm_sched_set(NULL, NULL);
	ck_assert_uint_eq(probe.seen, 2);
	ck_assert_uint_eq(probe.held, 2);               /* every repair ran under the lock */
	ck_assert_uint_eq(probe.listed, 2);             /* the point is before the repair's first store */
	after = stats(f.a);
	ck_assert_uint_eq(after.repairs, before.repairs + 2);
	before.repairs += 2;
	assert_same(after, before);
	ck_assert_int_eq(shm_heap_free(f.a, A), 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

START_TEST(test_fault_arm)
{
	ck_assert_int_eq(shm_fault_arm("x@0"), -EINVAL);
	ck_assert_int_eq(shm_fault_arm("x@"), -EINVAL);
	ck_assert_int_eq(shm_fault_arm("@3"), -EINVAL);
	ck_assert_int_eq(shm_fault_arm("x@2y"), -EINVAL);
	ck_assert_int_eq(shm_fault_arm("test.point@3"), 0);
	shm_fault_point("test.point");      /* 1st, 2nd: survive */
	shm_fault_point("other.point");
	shm_fault_point("test.point");
	ck_assert_int_eq(shm_fault_arm(NULL), 0);
	shm_fault_point("test.point");      /* disarmed */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("SC_FAULT", "env.point", 1);
		atomic_store(&shm_fault_state, -1);  /* as in a fresh process */
		shm_fault_point("env.point");
		_exit(3);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}
END_TEST

/* Two processes allocating and freeing concurrently for 2 s, each verifying its patterns. */
static int mp_child(struct shm_arena *a, uint64_t seed)
{
	enum { LIVE = 64 };
	struct { uint64_t off, bytes, id; } live[LIVE];
	unsigned n = 0;
	uint64_t id = (uint64_t)getpid() << 32;
	time_t end = time(NULL) + 2;
	long ops = 0;
	while (time(NULL) <= end || n) {
		int stop = time(NULL) > end;
		if (!stop && n < LIVE && (n == 0 || xrand(&seed) % 2)) {
			uint64_t bytes = xrand(&seed) % 8 ? 1 + xrand(&seed) % 8192 : 1 + xrand(&seed) % (1u << 20);
			uint64_t off;
			int rc = shm_heap_alloc(a, bytes, id, &off);
			if (rc == -ENOSPC)
				continue;
			if (rc)
				return 2;
			fill(a, off, bytes, id);
			live[n].off = off;
			live[n].bytes = bytes;
			live[n++].id = id++;
		} else {
			unsigned i = (unsigned)(xrand(&seed) % n);
			if (!verify(a, live[i].off, live[i].bytes, live[i].id))
				return 1;
			if (shm_heap_free(a, live[i].off))
				return 2;
			live[i] = live[--n];
		}
		ops++;
	}
	return ops > 100 ? 0 : 6;
}

START_TEST(test_multiproc)
{
	struct fx f;
	fx_open(&f);
	pid_t pid[2];
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		ck_assert_int_ge(pid[i], 0);
		if (pid[i] == 0)
			_exit(mp_child(own(f.a), 0x9876543210ull + (uint64_t)i * 7919));
	}
	for (int i = 0; i < 2; i++) {
		int status;
		ck_assert_int_eq(waitpid(pid[i], &status, 0), pid[i]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d status %#x", i, status);
	}
	ck_assert_uint_eq(stats(f.a).repairs, 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

/* A hand-made arena handle (sc_test_fake_arena) whose heap region is @region bytes at offset @at:
 * only the pages written are ever touched (block headers, and in the test build what a free
 * poisons, up to 1 MiB at a freed block's start and 64 KiB at its end), and the guard page right
 * after the region's last 64-byte unit makes a read past the heap fault; NULL after a SKIP line. */
static struct shm_arena *fake_at(struct shm_arena *fake, uint64_t at, uint64_t region)
{
	if (!sc_test_fake_arena(fake, at + region))
		return NULL;
	fake->hdr->regions[SHM_REGION_HEAP].off = at;
	fake->hdr->regions[SHM_REGION_HEAP].size = region;
	fake->hv.regions[SHM_REGION_HEAP] = fake->hdr->regions[SHM_REGION_HEAP]; /* the validated copy */
	return fake;
}

/* The same, the region at 2 MiB (where a hugepage arena's heap starts). */
static struct shm_arena *fake_open(struct shm_arena *fake, uint64_t region)
{
	return fake_at(fake, 2u << 20, region);
}

/* A hand-made heap of @region bytes, formatted; NULL after a SKIP line (fake_open). */
static struct shm_arena *fake_heap(struct shm_arena *fake, uint64_t region)
{
	struct shm_arena *a = fake_open(fake, region);
	if (a)
		ck_assert_int_eq(shm_heap_format(a), 0);
	return a;
}

/* A heap of many GiB. */
START_TEST(test_huge_heap)
{
	const uint64_t total = 256ull << 30;
	static struct shm_arena fake;
	struct shm_arena *a = fake_heap(&fake, total - (2u << 20));
	if (!a)
		return;
	struct shm_heap_stats st0 = stats(a), st;
	ck_assert_uint_ge(st0.largest_free, total - (3u << 20));
	static const uint64_t sizes[] = { 64ull << 20, 1ull << 30, 100ull << 30, 3, (64ull << 20) + 1,
					  17ull << 30, 4096 };
	uint64_t offs[7], sz;
	for (int i = 0; i < 7; i++) {
		ck_assert_int_eq(shm_heap_alloc(a, sizes[i], (uint64_t)i, &offs[i]), 0);
		ck_assert_int_eq(shm_heap_size(a, offs[i], &sz), 0);
		ck_assert_uint_ge(sz, sizes[i]);
		ck_assert(sizes[i] < PAGE ? offs[i] % 64 == 0 : offs[i] % PAGE == 0);
	}
	ck_assert_int_eq(shm_heap_alloc(a, 200ull << 30, 9, &offs[0]) , -ENOSPC);
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	for (int i = 6; i >= 0; i -= 2)
		ck_assert_int_eq(shm_heap_free(a, offs[i]), 0);
	for (int i = 1; i < 7; i += 2)
		ck_assert_int_eq(shm_heap_free(a, offs[i]), 0);
	st = stats(a);
	ck_assert_uint_eq(st.used_bytes, 0);
	ck_assert_uint_eq(st.free_blocks, 1);
	ck_assert_uint_eq(st.largest_free, st0.largest_free);
	/* the whole heap in one allocation */
	ck_assert_int_eq(shm_heap_alloc(a, st0.largest_free, 1, &offs[0]), 0);
	ck_assert_int_eq(shm_heap_free(a, offs[0]), 0);
	sc_test_fake_arena_close(a);
}
END_TEST

/* The heap's size limits, on hand-made regions: the smallest heap (its 8 KiB header and one block
 * of two units) works and a byte less is refused; the largest one (2^40 - 1 units of 64 bytes:
 * 64 TiB of address space, of which only the pages written are touched) works and a region a
 * unit larger is clamped to it. shm_heap_capacity says the same of each region. */
#define HEAP_MAX_BYTES ((((uint64_t)1 << 40) - 1) * 64)
START_TEST(test_heap_size_limits)
{
	static struct shm_arena fake;
	struct shm_arena *a = fake_open(&fake, 8192 + 127);
	uint64_t off, off2, sz;
	if (!a)
		return;
	ck_assert_int_eq(shm_heap_format(a), -EINVAL);
	ck_assert_uint_eq(shm_heap_capacity(8192 + 127), 0);
	sc_test_fake_arena_close(a);

	ck_assert_ptr_nonnull(a = fake_open(&fake, 8192 + 192 + 5));      /* the heap ends on a unit */
	ck_assert_int_eq(shm_heap_format(a), 0);
	ck_assert_uint_eq(stats(a).heap_bytes, 192);
	ck_assert_uint_eq(shm_heap_capacity(8192 + 192 + 5), 192);
	sc_test_fake_arena_close(a);

	ck_assert_ptr_nonnull(a = fake_open(&fake, 8192 + 128));
	ck_assert_int_eq(shm_heap_format(a), 0);
	struct shm_heap_stats st = stats(a);
	ck_assert_uint_eq(st.heap_bytes, 128);
	ck_assert_uint_eq(shm_heap_capacity(8192 + 128), 128);
	ck_assert_uint_eq(st.largest_free, 64);
	ck_assert_int_eq(shm_heap_alloc(a, 65, 1, &off), -E2BIG);
	ck_assert_int_eq(shm_heap_alloc(a, 64, 1, &off), 0);
	ck_assert_int_eq(shm_heap_size(a, off, &sz), 0);
	ck_assert_uint_eq(sz, 64);
	ck_assert_int_eq(shm_heap_alloc(a, 1, 2, &off2), -ENOSPC);
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	ck_assert_int_eq(shm_heap_repair(a), 0);        /* a chain with no free block */
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	ck_assert_int_eq(shm_heap_free(a, off), 0);
	ck_assert_int_eq(shm_heap_repair(a), 0);
	ck_assert_uint_eq(stats(a).free_bytes, 128);
	sc_test_fake_arena_close(a);

	a = fake_open(&fake, 8192 + HEAP_MAX_BYTES + 64);
	if (!a)
		return;
	ck_assert_int_eq(shm_heap_format(a), 0);
	st = stats(a);
	ck_assert_uint_eq(st.heap_bytes, HEAP_MAX_BYTES);
	ck_assert_uint_eq(shm_heap_capacity(8192 + HEAP_MAX_BYTES + 64), HEAP_MAX_BYTES);
	ck_assert_uint_eq(shm_heap_capacity(8192 + HEAP_MAX_BYTES), HEAP_MAX_BYTES);
	ck_assert_uint_eq(shm_heap_capacity(8192 + HEAP_MAX_BYTES - 1), HEAP_MAX_BYTES - 64);
	ck_assert_uint_eq(shm_heap_capacity(UINT64_MAX), HEAP_MAX_BYTES);
	ck_assert_uint_ge(st.largest_free, HEAP_MAX_BYTES - 2 * PAGE);
	ck_assert_int_eq(shm_heap_alloc(a, HEAP_MAX_BYTES, 1, &off), -E2BIG);
	ck_assert_uint_eq(shm_heap_footprint(HEAP_MAX_BYTES | SHM_HEAP_PACKED), HEAP_MAX_BYTES + 64);
	ck_assert_uint_eq(shm_heap_footprint((HEAP_MAX_BYTES + 1) | SHM_HEAP_PACKED), UINT64_MAX);
	/* the whole heap in one packed block, and nothing more */
	ck_assert_int_eq(shm_heap_alloc(a, (HEAP_MAX_BYTES - 64) | SHM_HEAP_PACKED, 1, &off), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 1, 1, &off2), -ENOSPC);
	ck_assert_uint_eq(stats(a).free_bytes, 0);
	ck_assert_int_eq(shm_heap_free(a, off), 0);
	ck_assert_int_eq(shm_heap_alloc(a, st.largest_free, 1, &off), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 1ull << 30, 2, &off2), -ENOSPC);
	ck_assert_int_eq(shm_heap_free(a, off), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 1, 3, &off), 0);
	ck_assert_int_eq(shm_heap_free(a, off), 0);
	ck_assert_int_eq(shm_heap_repair(a), 0);
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	ck_assert_uint_eq(stats(a).largest_free, st.largest_free);
	sc_test_fake_arena_close(a);
}
END_TEST

/* Where the heap region may lie: a heap on any 4 KiB boundary works; one off a 4 KiB boundary,
 * one too small to hold its header (it is not read: here it ends on a guard page) and one that
 * reaches past the mapping are refused. */
START_TEST(test_region_placement)
{
	static struct shm_arena fake;
	struct shm_arena *a;
	uint64_t off;
	ck_assert_ptr_nonnull(a = fake_at(&fake, (2u << 20) + 4096, 8192 + (64u << 10)));
	ck_assert_int_eq(shm_heap_format(a), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 8192, 1, &off), 0);
	ck_assert_uint_eq(off % PAGE, 0);
	ck_assert_int_eq(shm_heap_free(a, off), 0);
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	sc_test_fake_arena_close(a);

	ck_assert_ptr_nonnull(a = fake_at(&fake, (2u << 20) + 64, 8192 + (64u << 10)));
	ck_assert_int_eq(shm_heap_format(a), -EINVAL);
	sc_test_fake_arena_close(a);

	for (uint64_t size = 0; size <= 64; size += 32) {
		ck_assert_ptr_nonnull(a = fake_at(&fake, 2u << 20, size));
		ck_assert_int_eq(shm_heap_format(a), -EINVAL);
		struct shm_heap_stats st;
		ck_assert_int_eq(shm_heap_stats(a, &st), -EBADMSG);
		ck_assert_int_eq(shm_heap_alloc(a, 64, 1, &off), -EBADMSG);
		sc_test_fake_arena_close(a);
	}

	ck_assert_ptr_nonnull(a = fake_open(&fake, 8192 + (64u << 10)));
	ck_assert_int_eq(shm_heap_format(a), 0);
	a->hv.regions[SHM_REGION_HEAP].size += 4096;     /* now past the mapping's end */
	struct shm_heap_stats st;
	ck_assert_int_eq(shm_heap_stats(a, &st), -EBADMSG);
	ck_assert_int_eq(shm_heap_alloc(a, 64, 1, &off), -EBADMSG);
	a->hv.regions[SHM_REGION_HEAP].size -= 4096;
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	sc_test_fake_arena_close(a);
}
END_TEST

struct frees {
	uint64_t off[64], bytes[64];
	unsigned n;
};

static int collect_free(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	struct frees *f = ctx;
	(void)tag;
	if (!allocated) {
		ck_assert_uint_lt(f->n, 64);
		f->off[f->n] = off;
		f->bytes[f->n++] = bytes;
	}
	return 0;
}

/* Which of the free blocks @fr hold a request of @bytes (shm_heap_span_fits); -1 if none. */
static int fitting_block(const struct frees *fr, uint64_t bytes)
{
	for (unsigned i = 0; i < fr->n; i++)
		if (shm_heap_span_fits(fr->off[i], fr->off[i] + fr->bytes[i], bytes))
			return (int)i;
	return -1;
}

/* The largest plain (not packed) request that a free block whose payload is @bytes at @at holds:
 * below a page anywhere in it, whole pages from its first page boundary on. */
static uint64_t largest_request(uint64_t at, uint64_t bytes)
{
	uint64_t best = bytes < PAGE ? bytes : PAGE - 1;
	uint64_t start = (at + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	if (start <= at + bytes && ((at + bytes - start) & ~(uint64_t)(PAGE - 1)) >= PAGE)
		best = (at + bytes - start) & ~(uint64_t)(PAGE - 1);
	return best;
}

/* Near exhaustion, with few free blocks (fewer than the scan's bounds), a request is served if
 * and only if one of them holds it, and inside that one: every size class and class boundary,
 * alignment gaps included. A 1 MiB heap filled with packed blocks of 2 to 161 units and then
 * 2-unit ones; each of the first 160 blocks freed alone (a hole of exactly its size) and asked
 * for again; then in each of 16 rounds ten of them freed at once and requests of every size up
 * to the largest hole, packed and page-aligned, tried against the holes. */
START_TEST(test_fit_is_exact_near_exhaustion)
{
	static struct shm_arena fake;
	static uint64_t offs[16384];
	struct shm_arena *a = fake_heap(&fake, 8192 + (1u << 20));
	if (!a)
		return;
	unsigned n = 0;
	while (n < 160 && shm_heap_alloc(a, ((1 + n) * 64) | SHM_HEAP_PACKED, n, &offs[n]) == 0)
		n++;
	ck_assert_uint_eq(n, 160);
	while (shm_heap_alloc(a, 64, n, &offs[n]) == 0)
		n++;
	struct frees fr0 = { .n = 0 };
	ck_assert_int_eq(shm_heap_walk(a, collect_free, &fr0), 0);
	ck_assert_uint_le(fr0.n, 1);    /* at most a bare header is left */
	/* each hole alone: stats' largest_free is exactly the largest plain request it holds, and is
	 * served; a request that fills it is served exactly there, one unit more is refused */
	for (unsigned i = 0; i < 160; i++) {
		uint64_t off, largest = largest_request(offs[i], (1 + i) * 64);
		ck_assert_int_eq(shm_heap_free(a, offs[i]), 0);
		ck_assert_msg(stats(a).largest_free == largest, "a hole of %u units: largest_free %llu, not %llu",
			      i + 2, (unsigned long long)stats(a).largest_free, (unsigned long long)largest);
		ck_assert_int_eq(shm_heap_alloc(a, largest + 1, i, &off), -ENOSPC);
		ck_assert_int_eq(shm_heap_alloc(a, largest, i, &off), 0);
		ck_assert_int_eq(shm_heap_free(a, off), 0);
		ck_assert_int_eq(shm_heap_alloc(a, ((2 + i) * 64) | SHM_HEAP_PACKED, i, &off), -ENOSPC);
		ck_assert_msg(shm_heap_alloc(a, ((1 + i) * 64) | SHM_HEAP_PACKED, i, &off) == 0 && off == offs[i],
			      "a hole of %u units", i + 2);
	}
	unsigned served = 0, refused = 0;
	for (unsigned r = 0; r < 16; r++) {
		for (unsigned i = r; i < 160; i += 16)
			ck_assert_int_eq(shm_heap_free(a, offs[i]), 0);
		struct frees fr = { .n = 0 };
		ck_assert_int_eq(shm_heap_walk(a, collect_free, &fr), 0);
		ck_assert_uint_eq(fr.n, 10 + fr0.n);
		for (uint64_t u = 1; u <= 2 + 160 + 1; u++) {
			const uint64_t reqs[] = { u * 64 | SHM_HEAP_PACKED, u * 64 - 63, u * 64 * 64,
						  u * 64 * 64 - 4095 };
			for (unsigned k = 0; k < sizeof(reqs) / sizeof(reqs[0]); k++) {
				uint64_t off, sz;
				int want = fitting_block(&fr, reqs[k]);
				int rc = shm_heap_alloc(a, reqs[k], 7, &off);
				ck_assert_msg(want < 0 ? rc == -ENOSPC : rc == 0,
					      "round %u: request %#llx: %d with %s fitting block", r,
					      (unsigned long long)reqs[k], rc, want < 0 ? "no" : "a");
				if (rc)
					continue;
				int in = -1;
				for (unsigned i = 0; i < fr.n; i++)
					if (off >= fr.off[i] && off < fr.off[i] + fr.bytes[i] + 64)
						in = (int)i;
				ck_assert_int_ge(in, 0);
				ck_assert_int_eq(shm_heap_size(a, off, &sz), 0);
				ck_assert(shm_heap_span_fits(off, off + sz, reqs[k]));
				ck_assert_uint_le(off + sz, fr.off[in] + fr.bytes[in]);
				ck_assert_int_eq(shm_heap_free(a, off), 0);
				served++;
			}
			refused += fitting_block(&fr, u * 64 | SHM_HEAP_PACKED) < 0;
		}
		ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
		for (unsigned i = r; i < 160; i += 16) {    /* the holes filled again, in place */
			uint64_t off;
			ck_assert_int_eq(shm_heap_alloc_at(a, offs[i], ((1 + i) * 64) | SHM_HEAP_PACKED, i, &off), 0);
			ck_assert_uint_eq(off, offs[i]);
		}
	}
	ck_assert_uint_gt(served, 1000);
	ck_assert_uint_gt(refused, 100);
	sc_test_fake_arena_close(a);
}
END_TEST

/* A hand-made heap formatted afresh with one 64-byte allocation at its start (*A, tag 1): the rest
 * is one free block, whose header is at region offset REST. Returns the repairs so far (a call
 * reports the count before its own repair). */
#define REST (8192u + 128u)
#define SMALL_HEAP (8192u + (64u << 10))      /* a hand-made heap region's bytes */
static uint64_t one_allocated(struct shm_arena *a, uint64_t *A)
{
	ck_assert_int_eq(shm_heap_format(a), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 64, 1, A), 0);
	ck_assert_uint_eq(*A - 64 + 128 - (2u << 20), REST);
	return stats(a).repairs;
}

/* The rest's links were made bad: the next allocation is served from lists rebuilt once, by it,
 * and the heap is whole. The allocation's offset. */
static uint64_t served_after_a_rebuild(struct shm_arena *a, uint64_t A, uint64_t repairs, const char *what,
				       unsigned i)
{
	uint64_t B, sz;
	ck_assert_int_eq(shm_heap_alloc(a, 1000, 2, &B), 0);
	ck_assert_msg(stats(a).repairs == repairs + 1, "%s %u followed", what, i);
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	ck_assert_int_eq(shm_heap_size(a, A, &sz), 0);
	ck_assert_int_eq(shm_heap_size(a, B, &sz), 0);
	return B;
}

/* Free-list links in shared memory that point at the heap's end, outside it, or inside it off a
 * block boundary are refused without being followed (a hand-made heap has a guard page right
 * after its end: a read there faults): the call that meets one has the lists rebuilt from the
 * chain and is served. */
START_TEST(test_list_links_past_the_end)
{
	static struct shm_arena fake;
	struct shm_arena *a = fake_open(&fake, SMALL_HEAP);
	if (!a)
		return;
	uint8_t *hb = a->base + (2u << 20);
	const uint64_t bad[] = { SMALL_HEAP, SMALL_HEAP + 64, SMALL_HEAP - 32, SMALL_HEAP - 4, UINT64_MAX - 63, 8192 - 64, 8192 + 8 };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (unsigned field = 24; field <= 32; field += 8) {     /* next_free, prev_free */
			uint64_t A, B;
			uint64_t repairs = one_allocated(a, &A);
			memcpy(hb + REST + field, &bad[i], 8);
			B = served_after_a_rebuild(a, A, repairs, "bad link", i);
			ck_assert_int_eq(shm_heap_free(a, A), 0);
			ck_assert_int_eq(shm_heap_free(a, B), 0);
			struct shm_heap_stats st = stats(a);
			ck_assert_uint_eq(st.free_blocks, 1);
			ck_assert_uint_eq(st.free_bytes, SMALL_HEAP - 8192);
		}
	}
	sc_test_fake_arena_close(a);
}
END_TEST

/* Near exhaustion an allocation looks at no more than 16 blocks of one class list (its time stays
 * bounded): a block that holds the request 17th in its list is not found, the 16th is; the same
 * bound for stats' largest_free (the first 16 blocks of the largest class). */
START_TEST(test_scan_looks_at_sixteen_blocks_of_a_list)
{
	static struct shm_arena fake;
	static uint64_t fill[4096];
	struct shm_arena *a = fake_heap(&fake, 8192 + (256u << 10));
	if (!a)
		return;
	uint64_t x[17], sep, off, pad;
	/* a pad so that the 135-unit block's payload starts on a page: it alone holds two pages */
	ck_assert_int_eq(shm_heap_alloc(a, (62 * 64) | SHM_HEAP_PACKED, 98, &pad), 0);
	for (unsigned j = 0; j < 17; j++) {  /* 135 units, then 16 of 128 (one class: 128..135) */
		ck_assert_int_eq(shm_heap_alloc(a, ((j ? 127 : 134) * 64) | SHM_HEAP_PACKED, j, &x[j]), 0);
		ck_assert_int_eq(shm_heap_alloc(a, 64, 99, &sep), 0);
	}
	unsigned n = 0;
	while (shm_heap_alloc(a, 64, 100, &fill[n]) == 0)
		n++;
	for (unsigned j = 0; j < 17; j++)       /* listed last-in first: the 135-unit block is 17th */
		ck_assert_int_eq(shm_heap_free(a, x[j]), 0);
	ck_assert_uint_eq(x[0] % PAGE, 0);
	ck_assert_uint_eq(stats(a).largest_free, PAGE);         /* as far as the first 16 blocks tell */
	ck_assert_int_eq(shm_heap_alloc(a, (134 * 64) | SHM_HEAP_PACKED, 7, &off), -ENOSPC);
	ck_assert_int_eq(shm_heap_alloc(a, (127 * 64) | SHM_HEAP_PACKED, 7, &off), 0);  /* one of 128 */
	ck_assert_uint_eq(off, x[16]);
	ck_assert_uint_eq(stats(a).largest_free, 2 * PAGE);
	ck_assert_int_eq(shm_heap_alloc(a, (134 * 64) | SHM_HEAP_PACKED, 7, &off), 0);  /* now 16th */
	ck_assert_uint_eq(off, x[0]);
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	sc_test_fake_arena_close(a);
}
END_TEST

/* Headers forged with a valid check word (by a process that can write the arena, and so read the
 * heap's seed) that break the chain's rules are still refused: linked into a free list (inside
 * the heap's own header, no units, more units than the heap has left, a state neither free nor
 * allocated), in the chain (such a state), freed (an allocated block of one unit). The call that meets one
 * rebuilds the lists or refuses; nothing allocated is lost. */
START_TEST(test_forged_headers)
{
	static struct shm_arena fake;
	struct shm_arena *a = fake_open(&fake, SMALL_HEAP);
	if (!a)
		return;
	uint8_t *hb = a->base + (2u << 20);
	uint64_t A, B, C, sz;
	const uint64_t R = REST, X = R + 64 * 40;       /* the free rest after A; a spot inside it */
	const struct { uint64_t at, units; unsigned st; } link[] = {
		{ 8192 - 64, 2, 1 }, { X, 0, 1 }, { X, (SMALL_HEAP - X) / 64 + 1, 1 }, { X, 2, 0 }, { X, 2, 3 },
	};
	for (unsigned i = 0; i < sizeof(link) / sizeof(link[0]); i++) {
		uint64_t repairs = one_allocated(a, &A);
		uint64_t w = shm_heap_test_word(a, link[i].at, link[i].units, link[i].st);
		ck_assert_uint_ne(w, 0);
		memcpy(hb + link[i].at, &w, 8);
		memcpy(hb + link[i].at + 32, &R, 8);             /* its prev_free: back to R */
		memset(hb + link[i].at + 24, 0, 8);
		memcpy(hb + R + 24, &link[i].at, 8);             /* R's next_free: the forgery */
		served_after_a_rebuild(a, A, repairs, "forged link", i);
	}

	/* in the chain: B's header with a valid check but the state 0 or 3; the walk and a repair
	 * refuse the chain, the heap refuses calls until B's header is back */
	ck_assert_int_eq(shm_heap_format(a), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 64, 1, &A), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 128, 2, &B), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 64, 3, &C), 0);
	uint8_t *bh = shm_ptr(a, B - 64, 128), saved[128];
	memcpy(saved, bh, 128);
	for (unsigned st = 0; st <= 3; st += 3) {
		uint64_t w = shm_heap_test_word(a, B - 64 - (2u << 20), 3, st);
		memcpy(bh, &w, 8);
		ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), -EBADMSG);
		ck_assert_int_eq(shm_heap_repair(a), -EBADMSG);
		ck_assert_int_eq(shm_heap_alloc(a, 64, 4, &sz), -EBADMSG);
		memcpy(bh, saved, 8);
		ck_assert_int_eq(shm_heap_repair(a), 0);
		ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	}

	/* freed: B's header made an allocated block of one unit, followed by a forged 2-unit header
	 * whose prev_size agrees: refused, nothing changes */
	uint64_t w1 = shm_heap_test_word(a, B - 64 - (2u << 20), 1, 2);
	uint64_t w2 = shm_heap_test_word(a, B - (2u << 20), 2, 2), ps = 64;
	memcpy(bh, &w1, 8);
	memcpy(bh + 64, &w2, 8);
	memcpy(bh + 64 + 8, &ps, 8);
	ck_assert_int_eq(shm_heap_free(a, B), -EBADMSG);
	ck_assert_int_eq(shm_heap_size(a, B, &sz), -EBADMSG);
	memcpy(bh, saved, 128);
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	ck_assert_uint_eq(stats(a).used_blocks, 3);
	ck_assert_int_eq(shm_heap_free(a, B), 0);
	sc_test_fake_arena_close(a);
}
END_TEST

/* The slot of the class list head that holds @rel (region-relative), or -1. */
static int head_slot(const uint8_t *hb, uint64_t rel)
{
	for (int k = 0; k < HH_HEADS_N; k++) {
		uint64_t v;
		memcpy(&v, hb + HH_HEADS + 8 * k, 8);
		if (v == rel)
			return k;
	}
	return -1;
}

/* Scribbled free lists and counters (derived state) are found by the call that meets them, which
 * has them rebuilt from the chain before the lock is released: a block linked to itself, the free
 * counters below what is being taken, a class head that does not point back at its first block,
 * a class head already pointing at the block being listed, a class row marked non-empty with no
 * class in it, a class head pointing at an allocated block (never handed out twice), every empty
 * class head pointing at one or at the heap's end (an allocation is still made once), a free block
 * missing from its list (not handed out where asked). Nothing allocated is lost. */
START_TEST(test_scribbled_lists_are_rebuilt)
{
	static struct shm_arena fake;
	struct shm_arena *a = fake_open(&fake, SMALL_HEAP);
	if (!a)
		return;
	uint8_t *hb = a->base + (2u << 20);
	const uint64_t zero = 0;
	for (unsigned i = 0; i < 10; i++) {
		uint64_t A, B, C, D, sz, v;
		ck_assert_int_eq(shm_heap_format(a), 0);
		ck_assert_int_eq(shm_heap_alloc(a, 64, 1, &A), 0);
		ck_assert_int_eq(shm_heap_alloc(a, 128, 2, &B), 0);
		ck_assert_int_eq(shm_heap_alloc(a, 64, 3, &C), 0);
		const uint64_t R = C + 128 - 64 - (2u << 20), Brel = B - 64 - (2u << 20);  /* the free rest; B */
		uint64_t repairs = stats(a).repairs;    /* (a call reports the count before its own repair) */
		int rc, once = 0;
		switch (i) {
		case 0:         /* R linked to itself both ways, then taken */
			memcpy(hb + R + 24, &R, 8);
			memcpy(hb + R + 32, &R, 8);
			rc = shm_heap_alloc(a, 1000, 4, &D);
			break;
		case 1:         /* fewer free bytes than R holds */
			memcpy(hb + HH_FREE_BYTES, &zero, 8);
			rc = shm_heap_alloc(a, 1000, 4, &D);
			break;
		case 2:         /* no free block counted */
			memcpy(hb + HH_FREE_BLOCKS, &zero, 8);
			rc = shm_heap_alloc(a, 1000, 4, &D);
			break;
		case 3: {       /* R's class head emptied, then R merged by freeing C */
			int k = head_slot(hb, R);
			ck_assert_int_ge(k, 0);
			memcpy(hb + HH_HEADS + 8 * k, &zero, 8);
			rc = shm_heap_free(a, C);
			C = 0;
			break;
		}
		case 5:         /* the row of classes 3 marked non-empty (none of its classes is) */
			memcpy(&v, hb + HH_FL_BITMAP, 8);
			v |= 1u << 3;
			memcpy(hb + HH_FL_BITMAP, &v, 8);
			rc = shm_heap_alloc(a, 1000, 4, &D);
			break;
		case 6: {       /* B (allocated, 3 units) made the head of the 3-unit class */
			uint32_t sl0;
			memcpy(&v, hb + HH_FL_BITMAP, 8);
			v |= 1;
			memcpy(hb + HH_FL_BITMAP, &v, 8);
			memcpy(&sl0, hb + HH_SL_BITMAP, 4);
			sl0 |= 1u << 3;
			memcpy(hb + HH_SL_BITMAP, &sl0, 4);
			memcpy(hb + HH_HEADS + 8 * 3, &Brel, 8);
			ck_assert_int_eq(shm_heap_alloc_at(a, B, 128, 4, &D), -ENOSPC);
			rc = shm_heap_alloc(a, 128, 4, &D);
			ck_assert(rc || D != B);
			break;
		}
		case 7:         /* every empty class head pointing at B, or at the heap's end (a guard
				 * page: never read): the allocation's gap and rest cannot be listed; the
				 * allocation is made once */
		case 8:
			for (int k = 0; k < HH_HEADS_N; k++) {
				uint64_t bad = i == 7 ? Brel : SMALL_HEAP;
				memcpy(&v, hb + HH_HEADS + 8 * k, 8);
				if (!v)
					memcpy(hb + HH_HEADS + 8 * k, &bad, 8);
			}
			rc = shm_heap_alloc(a, 20000, 4, &D);
			once = 1;
			break;
		case 9: {       /* R unlinked from its class: not handed out where asked, found by the next
				 * allocation that looks at its class */
			int k = head_slot(hb, R);
			ck_assert_int_ge(k, 0);
			memcpy(hb + HH_HEADS + 8 * k, &zero, 8);
			ck_assert_int_eq(shm_heap_alloc_at(a, R + 64 + (2u << 20), 1000, 4, &D), -ENOSPC);
			rc = shm_heap_alloc(a, 1000, 4, &D);
			break;
		}
		case 4:
		default: {      /* B's class head already pointing at B when B is freed */
			ck_assert_int_eq(shm_heap_free(a, B), 0);
			int k = head_slot(hb, Brel);
			ck_assert_int_ge(k, 0);
			ck_assert_int_eq(shm_heap_alloc_at(a, B, 128, 2, &B), 0);
			memcpy(hb + HH_HEADS + 8 * k, &Brel, 8);
			rc = shm_heap_free(a, B);
			B = 0;
			break;
		}
		}
		ck_assert_int_eq(rc, 0);
		ck_assert_msg(stats(a).repairs == repairs + 1, "scribble %u not found", i);
		ck_assert(!once || stats(a).used_blocks == 4);
		ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
		ck_assert_int_eq(shm_heap_size(a, A, &sz), 0);
		ck_assert(!B || shm_heap_size(a, B, &sz) == 0);
		ck_assert(!C || shm_heap_size(a, C, &sz) == 0);
	}
	sc_test_fake_arena_close(a);
}
END_TEST

/* Near exhaustion every list that can hold the request is reached and no other: a list hidden by a
 * cleared row bit or class bit (a scribble) has the lists rebuilt before the allocation answers
 * -ENOSPC, and is then served; so do bits for classes that cannot exist; a bad link in a class too
 * small for the request is not followed.
 * A 256 KiB heap, full but for the blocks freed: H (130 units), Q (520) and F (1016). */
START_TEST(test_scan_reaches_every_list)
{
	static struct shm_arena fake;
	struct shm_arena *a = fake_heap(&fake, 8192 + (256u << 10));
	if (!a)
		return;
	uint8_t *hb = a->base + (2u << 20);
	uint64_t h, q, f, sep, rest, off, v;
	ck_assert_int_eq(shm_heap_alloc(a, (129 * 64) | SHM_HEAP_PACKED, 1, &h), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 64, 9, &sep), 0);
	ck_assert_int_eq(shm_heap_alloc(a, (519 * 64) | SHM_HEAP_PACKED, 2, &q), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 64, 9, &sep), 0);
	ck_assert_int_eq(shm_heap_alloc(a, (1015 * 64) | SHM_HEAP_PACKED, 3, &f), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 64, 9, &sep), 0);
	ck_assert_int_eq(shm_heap_alloc(a, (stats(a).free_bytes - 64) | SHM_HEAP_PACKED, 9, &rest), 0);
	ck_assert_uint_eq(stats(a).free_bytes, 0);
	/* row 6 (Q and F) hidden from a request of row 5 (300 units: Q or F); F's class bit hidden
	 * from a request only F holds (701 units) */
	const uint64_t want[2] = { (299 * 64) | SHM_HEAP_PACKED, (700 * 64) | SHM_HEAP_PACKED };
	for (int hide = 0; hide < 2; hide++) {
		ck_assert_int_eq(shm_heap_free(a, q), 0);
		ck_assert_int_eq(shm_heap_free(a, f), 0);
		uint64_t repairs = stats(a).repairs;    /* (a call reports the count before its own repair) */
		if (hide == 0) {
			memcpy(&v, hb + HH_FL_BITMAP, 8);
			v &= ~(1ull << 6);
			memcpy(hb + HH_FL_BITMAP, &v, 8);
		} else {
			uint32_t row;
			memcpy(&row, hb + HH_SL_BITMAP + 4 * 6, 4);
			ck_assert_uint_eq(row, (1u << 15) | 1u);  /* F's class (1008..1023), Q's (512..543) */
			row &= ~(1u << 15);
			memcpy(hb + HH_SL_BITMAP + 4 * 6, &row, 4);
		}
		ck_assert_int_eq(shm_heap_alloc(a, want[hide], 3, &off), 0);
		ck_assert(off == f || (!hide && off == q));
		ck_assert_msg(stats(a).repairs == repairs + 1, "hidden list %d served without a rebuild", hide);
		ck_assert_int_eq(shm_heap_free(a, off), 0);
		ck_assert_int_eq(shm_heap_alloc_at(a, q, (519 * 64) | SHM_HEAP_PACKED, 2, &off), 0);
		ck_assert_int_eq(shm_heap_alloc_at(a, f, (1015 * 64) | SHM_HEAP_PACKED, 3, &off), 0);
		ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	}
	/* a full heap whose bitmaps show what no class can be (a row past the 40th; a class past a
	 * row's 16th, its row marked): rebuilt before -ENOSPC is answered */
	for (int k = 0; k < 2; k++) {
		uint64_t repairs = stats(a).repairs;
		memcpy(&v, hb + HH_FL_BITMAP, 8);
		v |= k ? 1ull << 3 : 1ull << 45;
		memcpy(hb + HH_FL_BITMAP, &v, 8);
		if (k) {
			uint32_t row = 1u << 20;
			memcpy(hb + HH_SL_BITMAP + 4 * 3, &row, 4);
		}
		/* a request of a row above the scribbled ones: only the check before -ENOSPC sees them */
		ck_assert_int_eq(shm_heap_alloc(a, 100000, 4, &off), -ENOSPC);
		ck_assert_msg(stats(a).repairs == repairs + 1, "bitmap scribble %d not found", k);
	}
	/* only H free, its next link bad: a request H cannot hold never looks at H's class */
	ck_assert_int_eq(shm_heap_free(a, h), 0);
	uint64_t repairs = stats(a).repairs, bad = 8192 + (256u << 10);
	memcpy(hb + (h - 64 - (2u << 20)) + 24, &bad, 8);
	ck_assert_int_eq(shm_heap_alloc(a, (146 * 64) | SHM_HEAP_PACKED, 4, &off), -ENOSPC);
	ck_assert_uint_eq(stats(a).repairs, repairs);
	sc_test_fake_arena_close(a);
}
END_TEST

struct seen {
	uint64_t off[16], bytes[16], tag[16];
	int alloc[16];
	unsigned n, stop_at;
};

static int see(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	struct seen *v = ctx;
	ck_assert_uint_lt(v->n, 16);
	v->off[v->n] = off;
	v->bytes[v->n] = bytes;
	v->tag[v->n] = tag;
	v->alloc[v->n++] = allocated;
	return v->n == v->stop_at;
}

/* shm_heap_scan (the evictor's sweep): starts at the block given (the first block when the offset
 * given is not a block start), visits blocks in address order with their sizes, states and tags,
 * wraps at the end, goes on past its start for at most a second lap, stops after max_blocks or when
 * the callback says so, and reports a broken chain. */
START_TEST(test_scan)
{
	static struct shm_arena fake;
	struct shm_arena *a = fake_heap(&fake, 8192 + (64u << 10));
	if (!a)
		return;
	uint64_t A, B, C;
	ck_assert_int_eq(shm_heap_alloc(a, 100, 11, &A), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 1000, 12, &B), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 64, 13, &C), 0);
	const uint64_t T = C + 128, end = (2u << 20) + 8192 + (64u << 10);
	const uint64_t off[4] = { A, B, C, T }, bytes[4] = { 128, 1024, 64, end - T }, tag[4] = { 11, 12, 13, 0 };
	struct seen v = { .n = 0 };

	ck_assert_int_eq(shm_heap_scan(a, B, 3, see, &v), 3);
	ck_assert_uint_eq(v.n, 3);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_uint_eq(v.off[i], off[i + 1]);
		ck_assert_uint_eq(v.bytes[i], bytes[i + 1]);
		ck_assert_uint_eq(v.tag[i], tag[i + 1]);
		ck_assert_int_eq(v.alloc[i], i < 2);
	}
	v.n = 0;                        /* two laps from B at most, wrapping at the end */
	ck_assert_int_eq(shm_heap_scan(a, B, 1000, see, &v), 8);
	for (unsigned i = 0; i < 8; i++)
		ck_assert_uint_eq(v.off[i], off[(i + 1) % 4]);
	v.n = 0;                        /* the callback stops it */
	v.stop_at = 2;
	ck_assert_int_eq(shm_heap_scan(a, C, 1000, see, &v), 2);
	ck_assert_uint_eq(v.off[0], C);
	ck_assert_uint_eq(v.off[1], T);
	v.stop_at = 0;
	const uint64_t not_a_start[] = { B + 64, B - 1, 0, T + 64, end, UINT64_MAX, A - 64 };
	for (unsigned k = 0; k < sizeof(not_a_start) / sizeof(not_a_start[0]); k++) {
		v.n = 0;
		ck_assert_int_eq(shm_heap_scan(a, not_a_start[k], 2, see, &v), 2);
		ck_assert_uint_eq(v.off[0], A);
		ck_assert_uint_eq(v.off[1], B);
	}
	v.n = 0;                        /* a walk stopped by its callback returns what it returned */
	v.stop_at = 2;
	ck_assert_int_eq(shm_heap_walk(a, see, &v), 1);
	ck_assert_uint_eq(v.n, 2);
	v.stop_at = 0;
	v.n = 0;
	ck_assert_int_eq(shm_heap_scan(a, B, 0, see, &v), 0);
	ck_assert_uint_eq(v.n, 0);
	ck_assert_int_eq(shm_heap_scan(a, B, 4, NULL, NULL), -EINVAL);
	ck_assert_int_eq(shm_heap_scan(NULL, B, 4, see, &v), -EINVAL);

	/* C's header scribbled: the scan stops there with -EBADMSG after what it saw; nothing changed */
	uint64_t *cw = shm_ptr(a, C - 64, 8), saved = *cw;
	*cw ^= 1ull << 30;
	v.n = 0;
	ck_assert_int_eq(shm_heap_scan(a, A, 10, see, &v), -EBADMSG);
	ck_assert_uint_eq(v.n, 2);
	*cw = saved;
	ck_assert_int_eq(shm_heap_walk(a, NULL, NULL), 0);
	ck_assert_uint_eq(stats(a).used_blocks, 3);
	sc_test_fake_arena_close(a);
}
END_TEST

/* Bad calls get clear errors and change nothing: no arena or output (-EINVAL), no callback, zero
 * bytes, more than the heap (-E2BIG), the parent's handle in a forked child (-ECHILD). A heap whose
 * header is bad, or whose chain is broken, refuses every call with -EBADMSG and changes nothing
 * (an alloc_at offset outside the heap is -ENOSPC before the heap is looked at, broken or not);
 * a broken chain mended by hand stays refused until shm_heap_repair. */
START_TEST(test_bad_calls_and_broken_heap)
{
	struct fx f;
	fx_open(&f);
	uint64_t A, B, off = 0, sz;
	struct shm_heap_stats st;
	struct seen v = { .n = 0 };
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 1, &A), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 2, &B), 0);
	ck_assert_int_eq(shm_heap_free(f.a, B), 0);
	struct shm_heap_stats before = stats(f.a);
	ck_assert_int_eq(shm_heap_alloc(NULL, 64, 1, &off), -EINVAL);
	ck_assert_int_eq(shm_heap_alloc(f.a, 64, 1, NULL), -EINVAL);
	ck_assert_int_eq(shm_heap_alloc(f.a, 0, 1, &off), -EINVAL);
	ck_assert_int_eq(shm_heap_alloc(f.a, SHM_HEAP_PACKED, 1, &off), -EINVAL);
	ck_assert_int_eq(shm_heap_alloc_at(NULL, B, 64, 1, &off), -EINVAL);
	ck_assert_int_eq(shm_heap_alloc_at(f.a, B, 64, 1, NULL), -EINVAL);
	ck_assert_int_eq(shm_heap_alloc_at(f.a, B, 0, 1, &off), -EINVAL);
	ck_assert_int_eq(shm_heap_alloc_at(f.a, B, ARENA_BYTES, 1, &off), -E2BIG);
	ck_assert_int_eq(shm_heap_free(NULL, A), -EINVAL);
	ck_assert_int_eq(shm_heap_set_tag(NULL, A, 1), -EINVAL);
	ck_assert_int_eq(shm_heap_size(NULL, A, &sz), -EINVAL);
	ck_assert_int_eq(shm_heap_size(f.a, A, NULL), -EINVAL);
	ck_assert_int_eq(shm_heap_stats(NULL, &st), -EINVAL);
	ck_assert_int_eq(shm_heap_stats(f.a, NULL), -EINVAL);
	ck_assert_int_eq(shm_heap_walk(NULL, NULL, NULL), -EINVAL);
	ck_assert_int_eq(shm_heap_scan(f.a, A, 1, NULL, NULL), -EINVAL);
	ck_assert_int_eq(shm_heap_repair(NULL), -EINVAL);
	assert_same(stats(f.a), before);

	/* the parent's handle in a forked child: refused before anything is touched */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int ok = shm_heap_alloc(f.a, 64, 1, &off) == -ECHILD && shm_heap_alloc_at(f.a, B, 64, 1, &off) == -ECHILD &&
			 shm_heap_free(f.a, A) == -ECHILD && shm_heap_set_tag(f.a, A, 9) == -ECHILD &&
			 shm_heap_size(f.a, A, &sz) == -ECHILD && shm_heap_stats(f.a, &st) == -ECHILD &&
			 shm_heap_walk(f.a, NULL, NULL) == -ECHILD && shm_heap_scan(f.a, A, 1, see, &v) == -ECHILD &&
			 shm_heap_repair(f.a) == -ECHILD;
		_exit(ok ? 0 : 1);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	assert_same(stats(f.a), before);

	/* the heap header's magic scribbled: every call refuses, the repair too */
	uint64_t hsize, *magic = shm_region(f.a, SHM_REGION_HEAP, &hsize), saved = *magic;
	const uint64_t hoff = shm_off(f.a, magic);
	ck_assert_uint_eq(before.heap_bytes, hsize - 8192);     /* the heap ends where its region does */
	*magic ^= 1;
	ck_assert_int_eq(shm_heap_repair(f.a), -EBADMSG);
	ck_assert_int_eq(shm_heap_alloc(f.a, 64, 1, &off), -EBADMSG);
	ck_assert_int_eq(shm_heap_stats(f.a, &st), -EBADMSG);
	ck_assert_ptr_null(shm_heap_mutex(f.a));
	*magic = saved;
	assert_same(stats(f.a), before);

	/* A's header scribbled and found by a repair: the chain is broken, every call refuses */
	uint64_t *aw = shm_ptr(f.a, A - 64, 8), aword = *aw;
	*aw ^= 1ull << 40;
	ck_assert_int_eq(shm_heap_repair(f.a), -EBADMSG);
	const uint64_t outside[] = { hoff + 64, hoff + 8192, hoff + hsize + 64, hoff + hsize + 4096, 0, UINT64_MAX };
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(shm_heap_alloc(f.a, 64, 1, &off), -EBADMSG);
		ck_assert_int_eq(shm_heap_alloc_at(f.a, B, 64, 1, &off), -EBADMSG);
		for (unsigned k = 0; k < sizeof(outside) / sizeof(outside[0]); k++)   /* before any look */
			ck_assert_int_eq(shm_heap_alloc_at(f.a, outside[k], 64, 1, &off), -ENOSPC);
		ck_assert_int_eq(shm_heap_free(f.a, A), -EBADMSG);
		ck_assert_int_eq(shm_heap_set_tag(f.a, A, 9), -EBADMSG);
		ck_assert_int_eq(shm_heap_size(f.a, A, &sz), -EBADMSG);
		ck_assert_int_eq(shm_heap_stats(f.a, &st), -EBADMSG);
		ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), -EBADMSG);
		ck_assert_int_eq(shm_heap_scan(f.a, A, 1, see, &v), -EBADMSG);
		ck_assert_uint_eq(v.n, 0);
		*aw = aword;    /* mended by hand: still refused until a repair */
	}
	ck_assert_int_eq(shm_heap_repair(f.a), 0);
	before.repairs++;
	assert_same(stats(f.a), before);
	ck_assert_uint_eq(count_tag(f.a, 1, NULL), 1);
	ck_assert_int_eq(shm_heap_free(f.a, A), 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

/* A schedule-point hook at heap.free.locked: the freed block's state there, and whether the heap
 * lock is held (the interleaving explorer parks a freeing process there to run others against
 * the held lock and the block not yet freed). */
struct free_probe {
	struct shm_arena *a;
	const _Atomic uint64_t *word;
	unsigned seen, allocated, held;
};

static void free_probe(const char *point, void *ctx)
{
	struct free_probe *p = ctx;
	if (strcmp(point, "heap.free.locked"))
		return;
	p->seen++;
	p->allocated += (atomic_load(p->word) & 3) == 2;
	p->held += heap_lock_held(p->a);
}

START_TEST(test_free_schedule_point)
{
	struct fx f;
	fx_open(&f);
	uint64_t A;
	ck_assert_int_eq(shm_heap_alloc(f.a, 1000, 1, &A), 0);
	struct free_probe p = { .a = f.a, .word = shm_ptr(f.a, A - 64, 8) };
	shm_sched_set(free_probe, &p);
	ck_assert_int_eq(shm_heap_free(f.a, A), 0);
	shm_sched_set(NULL, NULL);
	ck_assert_uint_eq(p.seen, 1);
	ck_assert_uint_eq(p.allocated, 1);
	ck_assert_uint_eq(p.held, 1);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

/* getrandom as this test binary's heap sees it: the kernel's, or a failure (as on a kernel
 * without it) while fail_getrandom is set. */
static int fail_getrandom;
ssize_t getrandom(void *buf, size_t len, unsigned flags)
{
	if (fail_getrandom) {
		errno = ENOSYS;
		return -1;
	}
	return syscall(SYS_getrandom, buf, len, flags);
}

/* Each heap gets its own seed for its header check words (offset 32 of the heap header), from the
 * kernel (never the last heap's), or made from the clock, the pid and the address when getrandom
 * fails: never 0. */
START_TEST(test_seed)
{
	static struct shm_arena fake;
	uint64_t seed[4];
	for (int i = 0; i < 4; i++) {
		fail_getrandom = i >= 2;
		struct shm_arena *a = fake_heap(&fake, SMALL_HEAP);
		fail_getrandom = 0;
		if (!a)
			return;
		memcpy(&seed[i], a->base + (2u << 20) + HH_SEED, 8);
		sc_test_fake_arena_close(a);
		ck_assert_uint_ne(seed[i], 0);
		ck_assert(i != 1 || seed[1] != seed[0]);        /* the kernel's (the fallback's clock may be coarse) */
	}
}
END_TEST

/* What a crash at the allocation's fault points leaves, read raw before anyone repairs (the
 * promise of heap.alloc.align / heap.alloc.split, and of heap.chain@1, the first chain store):
 * the header the allocation writes inside its block (the aligned start, or the tail) is written
 * whole, with its tag cleared, though a stale tag lay there, and the block it is inside is not
 * shrunk yet. */
static const struct { const char *point; uint64_t bytes; } inner_cases[] = {
	{ "heap.alloc.split", 100 }, { "heap.chain@1", 100 }, { "heap.alloc.align", 8192 }, { "heap.chain@1", 8192 },
};

START_TEST(test_inner_header_at_a_crash)
{
	struct fx f;
	fx_open(&f);
	const uint64_t start = 8192, units = f.st0.heap_bytes / 64, aligned = inner_cases[_i].bytes >= PAGE;
	uint64_t hsize, P, Q;
	uint8_t *hb = shm_region(f.a, SHM_REGION_HEAP, &hsize);
	/* the inner header's place: after 3 units (a 100-byte allocation's tail), or after the gap
	 * before the first page boundary (63 units: the heap starts on a page) */
	const uint64_t inner = start + (aligned ? 63 : 3) * 64;
	ck_assert_uint_eq((shm_off(f.a, hb) + inner + 64) % (aligned ? PAGE : 64), 0);
	/* a stale tag there: a block whose header was at that place, freed and merged */
	ck_assert_int_eq(shm_heap_alloc(f.a, ((inner - start) / 64 - 1) * 64 | SHM_HEAP_PACKED, 0x71, &P), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a, 100, 0x72, &Q), 0);
	ck_assert_uint_eq(Q - 64 - shm_off(f.a, hb), inner);
	ck_assert_int_eq(shm_heap_free(f.a, P), 0);
	ck_assert_int_eq(shm_heap_free(f.a, Q), 0);
	run_child_killed(f.a, inner_cases[_i].point, 0, inner_cases[_i].bytes);
	uint64_t w, tag;
	memcpy(&w, hb + inner, 8);
	memcpy(&tag, hb + inner + 16, 8);
	ck_assert_uint_eq(w, shm_heap_test_word(f.a, inner, aligned ? units - 63 : units - 3, 1));
	ck_assert_uint_eq(tag, 0);
	memcpy(&w, hb + start, 8);      /* and the block it is inside not shrunk yet */
	ck_assert_uint_eq(w, shm_heap_test_word(f.a, start, units, 1));
	ck_assert_int_eq(shm_heap_walk(f.a, NULL, NULL), 0);    /* repaired: nothing allocated */
	ck_assert_uint_eq(count_tag(f.a, CHILD_TAG, NULL), 0);
	assert_empty(&f);
	fx_close(&f);
}
END_TEST

/* The smallest arena still has a working heap. */
START_TEST(test_small_arena)
{
	const char *name;
	struct sc_arena *sa = sc_test_arena("heapmin", SC_ARENA_MIN_BYTES, &name);
	struct shm_arena *a = sa->shm;
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0);
	struct shm_heap_stats st0 = stats(a);
	ck_assert_uint_gt(st0.largest_free, 1u << 20);
	uint64_t off[4];
	ck_assert_int_eq(shm_heap_alloc(a, st0.largest_free, 1, &off[0]), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 4096, 1, &off[1]), -ENOSPC);
	ck_assert_int_eq(shm_heap_free(a, off[0]), 0);
	ck_assert_int_eq(shm_heap_alloc(a, 1, 1, &off[0]), 0);
	ck_assert_int_eq(shm_heap_free(a, off[0]), 0);
	ck_assert_uint_eq(stats(a).largest_free, st0.largest_free);
	sc_arena_close(sa);
}
END_TEST

Suite *heap_suite(void)
{
	Suite *s = suite_create("heap");
	TCase *tc = tcase_create("heap");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_footprint);
	tcase_add_test(tc, test_packed);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_the_first_allocation_is_the_first_offset_accepted);
	tcase_add_test(tc, test_alignment);
	tcase_add_test(tc, test_page_aligned_request_takes_the_block_that_just_fits);
	tcase_add_test(tc, test_exhaustion);
	tcase_add_test(tc, test_e2big);
	tcase_add_test(tc, test_coalesce);
	tcase_add_test(tc, test_torture);
	tcase_add_test(tc, test_hostile_offsets);
	tcase_add_test(tc, test_corrupt_header);
	tcase_add_loop_test(tc, test_crash_points, 0, (int)(sizeof(crash_cases) / sizeof(crash_cases[0])));
	tcase_add_loop_test(tc, test_killed_after_every_chain_store, 0,
			    (int)(sizeof(chain_cases) / sizeof(chain_cases[0])));
	tcase_add_test(tc, test_killed_holding_lock);
	tcase_add_test(tc, test_fault_arm);
	tcase_add_test(tc, test_multiproc);
	tcase_add_test(tc, test_huge_heap);
	tcase_add_test(tc, test_heap_size_limits);
	tcase_add_test(tc, test_region_placement);
	tcase_add_test(tc, test_fit_is_exact_near_exhaustion);
	tcase_add_test(tc, test_list_links_past_the_end);
	tcase_add_test(tc, test_forged_headers);
	tcase_add_test(tc, test_scribbled_lists_are_rebuilt);
	tcase_add_test(tc, test_scan_looks_at_sixteen_blocks_of_a_list);
	tcase_add_test(tc, test_scan_reaches_every_list);
	tcase_add_test(tc, test_scan);
	tcase_add_test(tc, test_bad_calls_and_broken_heap);
	tcase_add_test(tc, test_free_schedule_point);
	tcase_add_test(tc, test_seed);
	tcase_add_loop_test(tc, test_inner_header_at_a_crash, 0, (int)(sizeof(inner_cases) / sizeof(inner_cases[0])));
	tcase_add_test(tc, test_small_arena);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(heap_suite)
