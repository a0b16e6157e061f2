/*
 * tests/check_shm_seg.c — the segment table (shm/seg.c) driven directly, in a real arena with
 * segments: its geometry and the view's refusals; a record's validation, each condition alone;
 * holds (which pieces are indexed, references and pins, each reason a hold is stale); probing
 * (the probe limit, tombstones, wrapping); releases (the last reference drops a slot, a record
 * whose segments others use stays as a holder until the last of them goes) with every header
 * counter checked; the recount (each kind of damage alone: found without fix, repaired with it);
 * the shard sweep of records and data blocks no entry owns. Segmented entries through the
 * library (lib/l2/seg.c) are tests/check_seg.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../shm/fault.h"
#include "../shm/heap.h"
#include "../shm/index.h"
#include "../shm/seg.h"

#define ARENA (64ull << 20)
#define SEG (64u << 10)

struct fx {
	struct sc_arena *a;
	const char *name;
	struct shm_index ix;
	struct shm_segtab t;
};

static void fx_open(struct fx *f)
{
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .segment_bytes = SEG };
	f->a = sc_test_arena_opts("seg", &o, &f->name);
	ck_assert_int_eq(shm_index_view(f->a->shm, &f->ix), 0);
	ck_assert_int_eq(shm_seg_view(f->a->shm, &f->ix, &f->t), 0);
	ck_assert_uint_eq(f->t.seg_bytes, SEG);
	ck_assert_uint_ge(f->t.nslots, 256);
}

static void fx_close(struct fx *f)
{
	sc_test_arena_destroy(f->a, f->name);
}

static struct shm_seg_rec *rec(struct fx *f, uint64_t off)
{
	return (struct shm_seg_rec *)(void *)(f->a->shm->base + off);
}

/* Is @off a live heap allocation? */
static int allocated(struct fx *f, uint64_t off)
{
	uint64_t b;
	return shm_heap_size(f->a->shm, off, &b) == 0;
}

/* The heap tag of the live block at @off (via a walk). */
struct tag_q {
	uint64_t off, tag;
	int found;
};
static int tag_cb(uint64_t off, uint64_t bytes, int alloc, uint64_t tag, void *ctx)
{
	struct tag_q *q = ctx;
	(void)bytes;
	if (alloc && off == q->off)
		q->tag = tag, q->found = 1;
	return 0;
}
static uint64_t tag_of(struct fx *f, uint64_t off)
{
	struct tag_q q = { .off = off };
	ck_assert_int_eq(shm_heap_walk(f->a->shm, tag_cb, &q), 0);
	ck_assert(q.found);
	return q.tag;
}

/*
 * A record of @n pieces in the heap, tagged @tag: piece i is local (stored in the record's data
 * block, in order, @len[i] bytes) when @from[i] is NULL, else it names the same segment as piece
 * i of record @from[i] (which must be held). Its data block gets @dtag.
 */
static uint64_t rec_new(struct fx *f, uint32_t n, const uint64_t *len, const uint64_t *const *from_piece,
			uint64_t tag, uint64_t dtag)
{
	uint64_t roff, doff = 0, local = 0, wire = 0;
	for (uint32_t i = 0; i < n; i++) {
		wire += len[i];
		if (!from_piece || !from_piece[i])
			local += len[i];
	}
	ck_assert_int_eq(shm_heap_alloc(f->a->shm, shm_seg_rec_bytes(n), tag, &roff), 0);
	/* every entry has a data block (its token ids at least), if no piece is stored in it */
	ck_assert_int_eq(shm_heap_alloc(f->a->shm, local ? local : 64, dtag, &doff), 0);
	struct shm_seg_rec *r = rec(f, roff);
	memset(r, 0, shm_seg_rec_bytes(n));
	r->npieces = n;
	r->data = doff;
	r->wire = wire;
	r->local = local;
	uint64_t at = doff;
	for (uint32_t i = 0; i < n; i++) {
		struct shm_seg_piece *p = &r->p[i];
		p->len = len[i];
		if (from_piece && from_piece[i]) {
			const struct shm_seg_piece *q = (const struct shm_seg_piece *)(const void *)from_piece[i];
			p->at = q->at, p->slot = q->slot, p->gen = q->gen;
		} else {
			p->at = at, p->local = 1; /* slot: whatever the hold overwrites (0, a slot number) */
			at += len[i];
		}
	}
	r->magic = SHM_SEG_REC_MAGIC;
	return roff;
}

static uint64_t priv(struct fx *f)
{
	return shm_tag_priv(f->a->shm->token);
}

static int hold(struct fx *f, uint64_t roff, const uint64_t (*dg)[2])
{
	ck_assert_int_eq(shm_seg_lock(&f->t), 0);
	int rc = shm_seg_hold_locked(&f->t, rec(f, roff), roff, dg);
	shm_seg_unlock(&f->t);
	return rc;
}

struct counts {
	uint64_t live, tombs, logical, stored, orphan_bytes, orphans, dedup;
};

static void assert_counts(struct fx *f, struct counts c, const char *when)
{
	const struct shm_seg_hdr *h = f->t.hdr;
	ck_assert_msg(h->live == c.live && h->tombs == c.tombs && h->logical == c.logical && h->stored == c.stored &&
			      h->orphan_bytes == c.orphan_bytes && h->orphans == c.orphans && h->dedup_bytes == c.dedup,
		      "%s: live %lu tombs %lu logical %lu stored %lu orphan_bytes %lu orphans %lu dedup %lu", when,
		      (unsigned long)h->live, (unsigned long)h->tombs, (unsigned long)h->logical,
		      (unsigned long)h->stored, (unsigned long)h->orphan_bytes, (unsigned long)h->orphans,
		      (unsigned long)h->dedup_bytes);
}

static int64_t recount(struct fx *f, int fix)
{
	ck_assert_int_eq(shm_seg_lock(&f->t), 0);
	int64_t w = shm_seg_recount_locked(&f->t, fix);
	shm_seg_unlock(&f->t);
	return w;
}

START_TEST(geometry_and_the_view)
{
	ck_assert_uint_eq(shm_seg_slots(1ull << 30, 0), 0);
	ck_assert_uint_eq(shm_seg_slots(0, SEG), 256);
	ck_assert_uint_eq(shm_seg_slots(128ull * SEG, SEG), 256);
	ck_assert_uint_eq(shm_seg_slots(129ull * SEG, SEG), 512);
	ck_assert_uint_eq(shm_seg_slots(1000ull * SEG, SEG), 2048);
	ck_assert_uint_eq(shm_seg_slots(1ull << 50, SEG), 1u << 24);
	ck_assert_uint_eq(shm_seg_table_bytes(0), 0);
	ck_assert_uint_eq(shm_seg_table_bytes(256), SHM_SEG_HDR_BYTES + 256 * 64);

	struct fx f;
	fx_open(&f);
	struct shm_segtab v;
	struct shm_seg_hdr *h = f.t.hdr, keep = *h;
	for (int c = 0; c < 4; c++) {
		switch (c) {
		case 0: h->magic ^= 1; break;
		case 1: h->nslots *= 2; break;
		case 2: h->nslots--; break;
		case 3: h->seg_bytes *= 2; break;
		}
		ck_assert_msg(shm_seg_view(f.a->shm, &f.ix, &v) == -EBADMSG, "case %d accepted", c);
		*h = keep;
	}
	ck_assert_int_eq(shm_seg_view(f.a->shm, &f.ix, &v), 0);
	ck_assert_ptr_eq(v.slot, f.t.slot);
	ck_assert_uint_eq(v.mask, v.nslots - 1);
	ck_assert_uint_eq(v.heap_hi - v.heap_lo, f.a->shm->hv.regions[SHM_REGION_HEAP].size);
	/* an arena without segments has no table */
	uint64_t sb = f.a->shm->hv.seg_bytes;
	f.a->shm->hv.seg_bytes = 0;
	ck_assert_int_eq(shm_seg_view(f.a->shm, &f.ix, &v), -ENOTSUP);
	f.a->shm->hv.seg_bytes = sb;
	fx_close(&f);
}
END_TEST

/* A record validates only 64-aligned, inside the heap with all its pieces, with its magic, at
 * most SHM_SEG_MAX_PIECES pieces, local bytes no more than its wire and a data block inside the
 * heap: each condition alone, and each bound exactly. */
START_TEST(a_record_validates_each_condition_alone)
{
	struct fx f;
	fx_open(&f);
	uint64_t len[] = { SEG, 100 };
	uint64_t off = rec_new(&f, 2, len, NULL, priv(&f), priv(&f));
	struct shm_seg_rec *r = rec(&f, off), keep;
	memcpy(&keep, r, sizeof(keep));
	ck_assert_ptr_eq(shm_seg_rec_at(&f.t, off), r);
	ck_assert_ptr_null(shm_seg_rec_at(&f.t, off + 8));
	ck_assert_ptr_null(shm_seg_rec_at(&f.t, off + 64)); /* its pieces: no magic */
	ck_assert_ptr_null(shm_seg_rec_at(&f.t, f.t.heap_lo - 64));
	ck_assert_ptr_null(shm_seg_rec_at(&f.t, f.t.heap_hi));
	ck_assert_ptr_null(shm_seg_rec_at(&f.t, f.t.heap_hi + 64));
	for (int c = 0; c < 10; c++) {
		int ok = 0;
		switch (c) {
		case 0: r->magic ^= 1; break;
		case 1: r->npieces = SHM_SEG_MAX_PIECES + 1; break;
		case 2: r->npieces = SHM_SEG_MAX_PIECES, ok = 1; break; /* inside the heap: accepted */
		case 3: r->local = r->wire + 1; break;
		case 4: r->local = r->wire, ok = 1; break;
		case 5: r->data = f.t.heap_lo - 64; break;
		case 6: r->data = f.t.heap_hi - r->local + 1; break;
		case 7: r->data = f.t.heap_hi - r->local, ok = 1; break;
		case 8: r->data = f.t.heap_hi + 64, r->local = 0; break;
		case 9: r->data = f.t.heap_hi, r->local = 0, ok = 1; break;
		}
		ck_assert_msg((shm_seg_rec_at(&f.t, off) != NULL) == ok, "case %d: %s", c, ok ? "refused" : "accepted");
		memcpy(r, &keep, sizeof(keep));
	}
	/* a record image 8 bytes into a block: it would validate, but records are 64-aligned */
	uint64_t blk;
	ck_assert_int_eq(shm_heap_alloc(f.a->shm, 512, priv(&f), &blk), 0);
	memcpy(f.a->shm->base + blk, r, shm_seg_rec_bytes(2));
	ck_assert_ptr_nonnull(shm_seg_rec_at(&f.t, blk));
	memcpy(f.a->shm->base + blk + 8, r, shm_seg_rec_bytes(2));
	ck_assert_ptr_null(shm_seg_rec_at(&f.t, blk + 8));
	/* a record whose pieces would run past the heap's end */
	uint64_t last = f.t.heap_hi - 64;
	struct shm_seg_rec *lr = rec(&f, last), lkeep;
	memcpy(&lkeep, lr, sizeof(lkeep));
	memset(lr, 0, sizeof(*lr));
	lr->magic = SHM_SEG_REC_MAGIC;
	lr->data = f.t.heap_lo;
	ck_assert_ptr_eq(shm_seg_rec_at(&f.t, last), lr);
	lr->npieces = 1;
	ck_assert_ptr_null(shm_seg_rec_at(&f.t, last));
	memcpy(lr, &lkeep, sizeof(lkeep));
	fx_close(&f);
}
END_TEST

static const uint64_t DG[4][2] = { { 0x1001, 0xa1 }, { 0x2002, 0xa2 }, { 0x3003, 0xa3 }, { 0x4004, 0xa4 } };

/* An entry's record of two full segments and a tail, then a second one that names the first's
 * two segments and stores a tail of its own: which pieces are indexed, references, pins, every
 * counter; then releases in either order (the first record a holder while the second needs its
 * bytes), ending with every slot a tombstone and every block freed. */
START_TEST(holds_and_releases_count_references_and_keep_holders)
{
	for (int order = 0; order < 2; order++) {
		struct fx f;
		fx_open(&f);
		uint64_t len1[] = { SEG, SEG, 1000 };
		uint64_t r1 = rec_new(&f, 3, len1, NULL, shm_tag_typed(SHM_TAG_SEGREC, 1, 1),
				      shm_tag_typed(SHM_TAG_SEGDATA, 1, 1));
		ck_assert_int_eq(hold(&f, r1, DG), 0);
		struct shm_seg_rec *a = rec(&f, r1);
		ck_assert_uint_eq(a->flags, SHM_SEG_HELD);
		ck_assert_uint_eq(a->pins, 2);
		ck_assert_uint_eq(a->p[2].slot, SHM_SEG_NONE); /* a tail is not indexed */
		ck_assert_int_eq(shm_seg_lock(&f.t), 0);
		for (uint32_t i = 0; i < 2; i++) {
			int64_t k = shm_seg_find_locked(&f.t, DG[i][0], DG[i][1], SEG);
			ck_assert_int_eq(k, (int64_t)(DG[i][0] & f.t.mask));
			ck_assert_uint_eq(a->p[i].slot, (uint32_t)k);
			const struct shm_seg_slot *s = &f.t.slot[k];
			ck_assert_uint_eq(s->refs, 1);
			ck_assert_uint_eq(s->rec, r1);
			ck_assert_uint_eq(s->off, a->p[i].at);
			ck_assert_uint_eq(a->p[i].gen, s->gen);
		}
		ck_assert_int_eq(shm_seg_find_locked(&f.t, DG[2][0], DG[2][1], 1000), -1);
		ck_assert_int_eq(shm_seg_find_locked(&f.t, DG[0][0], DG[0][1] + 1, SEG), -1);
		ck_assert_int_eq(shm_seg_find_locked(&f.t, DG[0][0], DG[0][1], SEG - 1), -1);
		shm_seg_unlock(&f.t);
		assert_counts(&f, (struct counts){ .live = 2, .logical = 2 * SEG + 1000, .stored = 2 * SEG + 1000 },
			      "first held");

		uint64_t len2[] = { SEG, SEG, 500 };
		const uint64_t *from[] = { (const uint64_t *)(const void *)&a->p[0], (const uint64_t *)(const void *)&a->p[1],
					   NULL };
		uint64_t r2 = rec_new(&f, 3, len2, from, shm_tag_typed(SHM_TAG_SEGREC, 2, 1),
				      shm_tag_typed(SHM_TAG_SEGDATA, 2, 1));
		ck_assert_int_eq(hold(&f, r2, NULL), 0);
		struct shm_seg_rec *b = rec(&f, r2);
		ck_assert_uint_eq(b->pins, 0);
		ck_assert_uint_eq(f.t.slot[a->p[0].slot].refs, 2);
		ck_assert_uint_eq(f.t.slot[a->p[1].slot].refs, 2);
		struct counts c = { .live = 2, .logical = 4 * SEG + 1500, .stored = 2 * SEG + 1500, .dedup = 2 * SEG };
		assert_counts(&f, c, "second held");
		ck_assert_int_eq(recount(&f, 0), 0);

		uint64_t a_data = a->data, b_data = b->data;
		uint32_t s0 = a->p[0].slot, s1 = a->p[1].slot, g0 = f.t.slot[s0].gen;
		if (order == 0) {
			/* the second goes first: references back to one, its blocks freed */
			ck_assert_int_eq(shm_seg_release(&f.t, r2), 0);
			ck_assert(!allocated(&f, r2));
			ck_assert(!allocated(&f, b_data));
			ck_assert_uint_eq(f.t.slot[s0].refs, 1);
			c.logical -= 2 * SEG + 500, c.stored -= 500;
			assert_counts(&f, c, "second released");
			ck_assert_int_eq(shm_seg_release(&f.t, r1), 0);
		} else {
			/* the first goes first: it stays as a holder of both segments */
			ck_assert_int_eq(shm_seg_release(&f.t, r1), 0);
			ck_assert(allocated(&f, r1));
			ck_assert(allocated(&f, a_data));
			ck_assert_uint_eq(a->flags, SHM_SEG_ORPHAN);
			ck_assert_uint_eq(a->pins, 2);
			ck_assert_uint_eq(f.t.slot[s0].refs, 1);
			ck_assert_uint_eq(f.t.slot[s0].state, SHM_SEG_LIVE);
			ck_assert_uint_eq(SHM_TAG_TYPE(tag_of(&f, r1)), SHM_TAG_SEGHOLD);
			ck_assert_uint_eq(SHM_TAG_TYPE(tag_of(&f, a_data)), SHM_TAG_SEGHOLD);
			c.logical -= 2 * SEG + 1000, c.orphans = 1, c.orphan_bytes = 2 * SEG + 1000;
			assert_counts(&f, c, "first released");
			ck_assert_int_eq(recount(&f, 0), 0);
			/* released again: nothing changes */
			ck_assert_int_eq(shm_seg_release(&f.t, r1), 0);
			assert_counts(&f, c, "first released twice");
			ck_assert_int_eq(shm_seg_release(&f.t, r2), 0);
			ck_assert(!allocated(&f, r2));
		}
		/* the last reference gone: both slots tombstones of a new generation, both records and
		 * data blocks freed, every counter back to zero */
		ck_assert(!allocated(&f, r1));
		ck_assert(!allocated(&f, a_data));
		ck_assert_uint_eq(f.t.slot[s0].state, SHM_SEG_TOMB);
		ck_assert_uint_eq(f.t.slot[s1].state, SHM_SEG_TOMB);
		ck_assert_uint_eq(f.t.slot[s0].gen, g0 + 1);
		ck_assert_uint_eq(f.t.slot[s0].refs, 0);
		assert_counts(&f, (struct counts){ .tombs = 2, .dedup = 2 * SEG }, "all released");
		ck_assert_int_eq(shm_seg_release(&f.t, r1), -EBADMSG);
		ck_assert_int_eq(recount(&f, 0), 0);
		/* a tombstone is reused by the next insert of its probe run (a tombstone count that
		 * lost track stays at 0) */
		uint64_t r3 = rec_new(&f, 1, len1, NULL, priv(&f), priv(&f));
		if (order)
			f.t.hdr->tombs = 0;
		ck_assert_int_eq(hold(&f, r3, DG), 0);
		ck_assert_uint_eq(rec(&f, r3)->p[0].slot, s0);
		ck_assert_uint_eq(f.t.slot[s0].gen, g0 + 1);
		/* an empty slot taken leaves the tombstone count alone */
		uint64_t r4 = rec_new(&f, 1, len1, NULL, priv(&f), priv(&f));
		ck_assert_int_eq(hold(&f, r4, DG + 3), 0);
		ck_assert_uint_eq(f.t.slot[rec(&f, r4)->p[0].slot].state, SHM_SEG_LIVE);
		ck_assert_uint_eq(f.t.hdr->tombs, order ? 0 : 1);
		assert_counts(&f, (struct counts){ .live = 2, .tombs = order ? 0 : 1, .logical = 2 * SEG,
						   .stored = 2 * SEG, .dedup = 2 * SEG },
			      "reused");
		fx_close(&f);
	}
}
END_TEST

/* A hold whose record names a segment that went (or never matched) fails as a whole, each reason
 * alone, and changes nothing: a slot past the table, not LIVE, of another generation, length or
 * offset. A piece naming no slot is not a reference. */
START_TEST(a_stale_hold_changes_nothing)
{
	struct fx f;
	fx_open(&f);
	uint64_t len1[] = { SEG, SEG };
	uint64_t r1 = rec_new(&f, 2, len1, NULL, shm_tag_typed(SHM_TAG_SEGREC, 1, 1), priv(&f));
	ck_assert_int_eq(hold(&f, r1, DG), 0);
	struct shm_seg_rec *a = rec(&f, r1);
	const uint64_t *from[] = { (const uint64_t *)(const void *)&a->p[0], (const uint64_t *)(const void *)&a->p[1] };
	uint64_t r2 = rec_new(&f, 2, len1, from, shm_tag_typed(SHM_TAG_SEGREC, 2, 1), priv(&f));
	struct shm_seg_rec *b = rec(&f, r2);
	struct shm_seg_piece keep = b->p[1];
	struct shm_seg_slot *s = &f.t.slot[a->p[1].slot];
	struct counts c = { .live = 2, .logical = 2 * SEG, .stored = 2 * SEG };
	/* past the table (the next region's first bytes, put back after): a slot that would match */
	struct shm_seg_slot *past = &f.t.slot[f.t.nslots], pkeep = *past;
	for (int k = 0; k < 6; k++) {
		switch (k) {
		case 0: b->p[1].slot = f.t.nslots, *past = *s; break;
		case 1: s->state = SHM_SEG_TOMB; break;
		case 2: b->p[1].gen++; break;
		case 3: b->p[1].len--; break;
		case 4: b->p[1].at += 64; break;
		case 5: s->state = SHM_SEG_EMPTY; break;
		}
		int rc = hold(&f, r2, NULL);
		*past = pkeep;
		ck_assert_msg(rc == -ESTALE, "case %d held", k);
		ck_assert_uint_eq(b->flags, 0);
		ck_assert_uint_eq(f.t.slot[a->p[0].slot].refs, 1);
		assert_counts(&f, c, "stale");
		b->p[1] = keep;
		s->state = SHM_SEG_LIVE;
	}
	/* without digests a full local piece is held unindexed */
	uint64_t r9 = rec_new(&f, 2, len1, NULL, shm_tag_typed(SHM_TAG_SEGREC, 9, 1), priv(&f));
	ck_assert_int_eq(hold(&f, r9, NULL), 0);
	ck_assert_uint_eq(rec(&f, r9)->p[0].slot, SHM_SEG_NONE);
	ck_assert_uint_eq(rec(&f, r9)->pins, 0);
	ck_assert_int_eq(shm_seg_release(&f.t, r9), 0);
	/* a release that cannot lock the table changes nothing */
	uint32_t magic = f.t.hdr->mu.magic;
	f.t.hdr->mu.magic ^= 1;
	ck_assert_int_eq(shm_seg_release(&f.t, r1), -EBADMSG);
	f.t.hdr->mu.magic = magic;
	ck_assert_uint_eq(a->flags, SHM_SEG_HELD);
	ck_assert_uint_eq(f.t.slot[a->p[0].slot].refs, 1);
	assert_counts(&f, c, "release refused");
	/* a piece that names no slot: neither checked nor counted */
	b->p[1].slot = SHM_SEG_NONE;
	b->p[1].gen = 12345;
	ck_assert_int_eq(hold(&f, r2, NULL), 0);
	ck_assert_uint_eq(f.t.slot[a->p[0].slot].refs, 2);
	ck_assert_uint_eq(s->refs, 1);
	c.logical += 2 * SEG, c.dedup = SEG;
	assert_counts(&f, c, "held");
	ck_assert_int_eq(recount(&f, 0), 0);
	fx_close(&f);
}
END_TEST

/* Record r1 (entry 1) of one segment, held and indexed, and r2 (entry 2) naming the same segment,
 * held: the segment's slot counts two references. */
static void one_shared_segment(struct fx *f, uint64_t *r1, uint64_t *r2)
{
	uint64_t len[] = { SEG };
	*r1 = rec_new(f, 1, len, NULL, shm_tag_typed(SHM_TAG_SEGREC, 1, 1), priv(f));
	ck_assert_int_eq(hold(f, *r1, DG), 0);
	const uint64_t *from[] = { (const uint64_t *)(const void *)&rec(f, *r1)->p[0] };
	*r2 = rec_new(f, 1, len, from, shm_tag_typed(SHM_TAG_SEGREC, 2, 1), priv(f));
	ck_assert_int_eq(hold(f, *r2, NULL), 0);
}

/* A release drops only references its record holds: not a slot emptied and reused since (another
 * generation), not memory past the table (a scribbled slot number). */
START_TEST(a_release_drops_only_its_own_references)
{
	struct fx f;
	fx_open(&f);
	uint64_t len1[] = { SEG };
	uint64_t r1 = rec_new(&f, 1, len1, NULL, shm_tag_typed(SHM_TAG_SEGREC, 1, 1), priv(&f));
	ck_assert_int_eq(hold(&f, r1, DG), 0);
	uint32_t k = rec(&f, r1)->p[0].slot;
	/* the slot emptied under r1 (as a repair does) and taken by another record's copy */
	struct shm_seg_slot *s = &f.t.slot[k];
	s->state = SHM_SEG_TOMB, s->refs = 0, s->gen++;
	f.t.hdr->live--, f.t.hdr->tombs++;
	uint64_t r2 = rec_new(&f, 1, len1, NULL, shm_tag_typed(SHM_TAG_SEGREC, 2, 1), priv(&f));
	ck_assert_int_eq(hold(&f, r2, DG), 0);
	ck_assert_uint_eq(rec(&f, r2)->p[0].slot, k);
	rec(&f, r1)->pins = 0;
	ck_assert_int_eq(recount(&f, 0), 0); /* r1's piece names the slot's old generation: not a reference */
	ck_assert_int_eq(shm_seg_release(&f.t, r1), 0);
	ck_assert(!allocated(&f, r1));
	ck_assert_uint_eq(s->state, SHM_SEG_LIVE);
	ck_assert_uint_eq(s->refs, 1);
	ck_assert_uint_eq(s->rec, r2);
	ck_assert_int_eq(recount(&f, 0), 0);

	/* a held record whose piece names the slot just past the table, where bytes that read as a
	 * LIVE slot of its generation are planted (the next region's first bytes, put back after) */
	const uint64_t *from[] = { (const uint64_t *)(const void *)&rec(&f, r2)->p[0] };
	uint64_t r3 = rec_new(&f, 1, len1, from, shm_tag_typed(SHM_TAG_SEGREC, 3, 1), priv(&f));
	ck_assert_int_eq(hold(&f, r3, NULL), 0);
	struct shm_seg_slot *past = &f.t.slot[f.t.nslots], keep = *past, fake = *s;
	rec(&f, r3)->p[0].slot = f.t.nslots;
	*past = fake;
	int64_t w = recount(&f, 0); /* the real slot counts 2 references and has 1 now: that alone */
	ck_assert_int_eq(shm_seg_release(&f.t, r3), 0);
	int same = memcmp(past, &fake, sizeof(fake)) == 0;
	*past = keep;
	ck_assert_msg(same, "a release wrote past the table");
	ck_assert_int_eq(w, 1);
	ck_assert_uint_eq(s->refs, 2); /* its reference to the real slot was scribbled away: kept */

	/* a held record whose piece was scribbled to name an empty slot of the same generation (0) */
	uint64_t r4 = rec_new(&f, 1, len1, from, shm_tag_typed(SHM_TAG_SEGREC, 4, 1), priv(&f));
	ck_assert_int_eq(hold(&f, r4, NULL), 0);
	uint32_t empty = (k + 100) & f.t.mask;
	ck_assert_uint_eq(f.t.slot[empty].state, SHM_SEG_EMPTY);
	rec(&f, r4)->p[0].slot = empty;
	rec(&f, r4)->p[0].gen = f.t.slot[empty].gen;
	uint64_t live = f.t.hdr->live, tombs = f.t.hdr->tombs;
	ck_assert_int_eq(shm_seg_release(&f.t, r4), 0);
	ck_assert_uint_eq(f.t.slot[empty].state, SHM_SEG_EMPTY);
	ck_assert_uint_eq(f.t.hdr->live, live);
	ck_assert_uint_eq(f.t.hdr->tombs, tombs);
	fx_close(&f);
}
END_TEST

/* The recount and the sweep collect blocks into arrays that grow by doubling from 256: with
 * exactly 256 records (the array full) nothing past the last is read. */
START_TEST(a_full_collection_array_is_read_to_its_end_only)
{
	struct fx f;
	fx_open(&f);
	uint64_t len[] = { 100 };
	for (uint32_t i = 0; i < 256; i++) {
		uint64_t r = rec_new(&f, 1, len, NULL, shm_tag_typed(SHM_TAG_SEGREC, i * SHM_INDEX_SHARDS + 1, 1), priv(&f));
		ck_assert_int_eq(hold(&f, r, NULL), 0);
	}
	ck_assert_int_eq(recount(&f, 0), 0);
	ck_assert_int_eq(recount(&f, 1), 0);
	ck_assert_uint_eq(f.t.hdr->stored, 256 * 100);
	ck_assert_int_eq(shm_seg_sweep_shard(&f.t, 1), 256); /* no entry owns any of them */
	assert_counts(&f, (struct counts){ 0 }, "swept");
	fx_close(&f);
}
END_TEST

/* A slot dropped by a release whose holder record no longer validates changes only the slot; a
 * holder that is still its entry's record (not a holder left behind) is never freed by a drop,
 * even when its pins say none (counts a dead process left wrong). */
START_TEST(a_drop_frees_only_holders_left_behind)
{
	for (int c = 0; c < 2; c++) {
		struct fx f;
		fx_open(&f);
		uint64_t r1, r2;
		one_shared_segment(&f, &r1, &r2);
		uint32_t k = rec(&f, r1)->p[0].slot;
		if (c == 0)
			f.t.slot[k].rec = r1 + 8; /* its holder does not validate there */
		f.t.slot[k].refs = 1;     /* r1's reference lost */
		ck_assert_int_eq(shm_seg_release(&f.t, r2), 0);
		ck_assert_uint_eq(f.t.slot[k].state, SHM_SEG_TOMB);
		ck_assert(allocated(&f, r1));
		ck_assert_ptr_nonnull(shm_seg_rec_at(&f.t, r1));
		ck_assert_uint_eq(rec(&f, r1)->flags, SHM_SEG_HELD);
		ck_assert_uint_eq(rec(&f, r1)->pins, c == 0 ? 1 : 0);
		fx_close(&f);
	}
}
END_TEST

/* Bytes past a record's last piece (inside its heap block) that read as a piece naming a live
 * slot, and bytes past the table that read as a LIVE slot, are never counted, dropped or
 * repaired. */
START_TEST(nothing_past_a_record_or_the_table_is_read)
{
	struct fx f;
	fx_open(&f);
	uint64_t r1, r2;
	one_shared_segment(&f, &r1, &r2);
	uint64_t usable;
	ck_assert_int_eq(shm_heap_size(f.a->shm, r2, &usable), 0);
	ck_assert_uint_ge(usable, shm_seg_rec_bytes(2));
	rec(&f, r2)->p[1] = rec(&f, r2)->p[0]; /* past its one piece */
	uint32_t k = rec(&f, r1)->p[0].slot;
	ck_assert_uint_eq(f.t.slot[k].refs, 2);
	struct shm_seg_slot *past = &f.t.slot[f.t.nslots], keep = *past, fake = f.t.slot[k];
	*past = fake;
	int64_t w0 = recount(&f, 0), w1 = recount(&f, 1);
	int same = memcmp(past, &fake, sizeof(fake)) == 0;
	*past = keep;
	ck_assert_int_eq(w0, 0);
	ck_assert_int_eq(w1, 0);
	ck_assert_msg(same, "the recount wrote past the table");
	ck_assert_uint_eq(f.t.slot[k].refs, 2);
	ck_assert_int_eq(shm_seg_release(&f.t, r2), 0);
	ck_assert_uint_eq(f.t.slot[k].refs, 1);
	ck_assert_uint_eq(f.t.slot[k].state, SHM_SEG_LIVE);
	fx_close(&f);
}
END_TEST

/* Lookups probe at most SHM_SEG_MAX_PROBE slots from the digest's, wrapping at the table's end,
 * stop at an empty slot and pass tombstones; a hold whose probe run is full stores its piece
 * unindexed; a digest stored already is not stored twice. */
START_TEST(probing_tombstones_and_full_runs)
{
	struct fx f;
	fx_open(&f);
	uint32_t n = f.t.nslots, start = n - 10;
	ck_assert_int_eq(shm_seg_lock(&f.t), 0);
	/* slots start .. start + 63 (wrapping) LIVE with other digests, the last of them a match */
	for (uint32_t i = 0; i < SHM_SEG_MAX_PROBE; i++) {
		struct shm_seg_slot *s = &f.t.slot[(start + i) & f.t.mask];
		s->state = SHM_SEG_LIVE;
		s->digest_lo = start + i + 1000 * n;
		s->len = SEG;
	}
	struct shm_seg_slot *m = &f.t.slot[(start + SHM_SEG_MAX_PROBE - 1) & f.t.mask];
	m->digest_lo = start;
	m->digest_hi = 77;
	ck_assert_int_eq(shm_seg_find_locked(&f.t, start, 77, SEG), (int64_t)((start + SHM_SEG_MAX_PROBE - 1) & f.t.mask));
	/* one probe further: not found */
	m->state = SHM_SEG_TOMB;
	struct shm_seg_slot *m2 = &f.t.slot[(start + SHM_SEG_MAX_PROBE) & f.t.mask];
	*m2 = *m;
	m2->state = SHM_SEG_LIVE;
	ck_assert_int_eq(shm_seg_find_locked(&f.t, start, 77, SEG), -1);
	/* a tombstone is passed, an empty slot ends the run */
	m2->state = SHM_SEG_EMPTY;
	m->state = SHM_SEG_LIVE;
	f.t.slot[(start + 5) & f.t.mask].state = SHM_SEG_TOMB;
	ck_assert_int_eq(shm_seg_find_locked(&f.t, start, 77, SEG), (int64_t)((start + SHM_SEG_MAX_PROBE - 1) & f.t.mask));
	f.t.slot[(start + 5) & f.t.mask].state = SHM_SEG_EMPTY;
	ck_assert_int_eq(shm_seg_find_locked(&f.t, start, 77, SEG), -1);
	shm_seg_unlock(&f.t);

	/* a hold into that run: the tombstone... made empty above: the piece takes slot start + 5 */
	uint64_t dg[1][2] = { { start, 99 } };
	uint64_t len[] = { SEG };
	uint64_t r = rec_new(&f, 1, len, NULL, priv(&f), priv(&f));
	ck_assert_int_eq(hold(&f, r, (const uint64_t(*)[2])dg), 0);
	ck_assert_uint_eq(rec(&f, r)->p[0].slot, (start + 5) & f.t.mask);
	/* the whole run LIVE: the next one stays unindexed, but is held */
	uint64_t r2 = rec_new(&f, 1, len, NULL, priv(&f), priv(&f));
	dg[0][1] = 100;
	uint64_t live = f.t.hdr->live;
	ck_assert_int_eq(hold(&f, r2, (const uint64_t(*)[2])dg), 0);
	ck_assert_uint_eq(rec(&f, r2)->p[0].slot, SHM_SEG_NONE);
	ck_assert_uint_eq(rec(&f, r2)->pins, 0);
	ck_assert_uint_eq(rec(&f, r2)->flags, SHM_SEG_HELD);
	ck_assert_uint_eq(f.t.hdr->live, live);
	ck_assert_uint_eq(m2->state, SHM_SEG_EMPTY); /* one past the probe limit: not taken */
	/* the same digest as a LIVE slot: not stored again */
	uint64_t r3 = rec_new(&f, 1, len, NULL, priv(&f), priv(&f));
	dg[0][1] = 99;
	ck_assert_int_eq(hold(&f, r3, (const uint64_t(*)[2])dg), 0);
	ck_assert_uint_eq(rec(&f, r3)->p[0].slot, SHM_SEG_NONE);
	ck_assert_uint_eq(f.t.hdr->live, live);
	fx_close(&f);

	/* the table's first slot is a slot: taken, then found */
	fx_open(&f);
	dg[0][0] = f.t.nslots, dg[0][1] = 5;
	uint64_t r4 = rec_new(&f, 1, len, NULL, priv(&f), priv(&f)), r5 = rec_new(&f, 1, len, NULL, priv(&f), priv(&f));
	ck_assert_int_eq(hold(&f, r4, (const uint64_t(*)[2])dg), 0);
	ck_assert_uint_eq(rec(&f, r4)->p[0].slot, 0);
	ck_assert_int_eq(hold(&f, r5, (const uint64_t(*)[2])dg), 0);
	ck_assert_uint_eq(rec(&f, r5)->p[0].slot, SHM_SEG_NONE);
	ck_assert_uint_eq(f.t.hdr->live, 1);
	fx_close(&f);
}
END_TEST

/* Two entries sharing segments, one released (a holder). */
static void shared_pair(struct fx *f, uint64_t *r1, uint64_t *r2, uint64_t *r3)
{
	uint64_t len1[] = { SEG, SEG, 300 };
	*r1 = rec_new(f, 3, len1, NULL, shm_tag_typed(SHM_TAG_SEGREC, 1, 1), shm_tag_typed(SHM_TAG_SEGDATA, 1, 1));
	ck_assert_int_eq(hold(f, *r1, DG), 0);
	struct shm_seg_rec *a = rec(f, *r1);
	const uint64_t *from[] = { (const uint64_t *)(const void *)&a->p[0], NULL, NULL };
	uint64_t len2[] = { SEG, SEG, 200 };
	*r2 = rec_new(f, 3, len2, from, shm_tag_typed(SHM_TAG_SEGREC, 2, 1), shm_tag_typed(SHM_TAG_SEGDATA, 2, 1));
	ck_assert_int_eq(hold(f, *r2, DG + 2), 0);
	const uint64_t *from3[] = { (const uint64_t *)(const void *)&a->p[1] };
	uint64_t len3[] = { SEG };
	*r3 = rec_new(f, 1, len3, from3, shm_tag_typed(SHM_TAG_SEGREC, 3, 1), shm_tag_typed(SHM_TAG_SEGDATA, 3, 1));
	ck_assert_int_eq(hold(f, *r3, NULL), 0);
	ck_assert_int_eq(shm_seg_release(&f->t, *r1), 0); /* a holder of both its segments */
	ck_assert_uint_eq(a->flags, SHM_SEG_ORPHAN);
	ck_assert_int_eq(recount(f, 0), 0);
}

enum { D_REFS, D_PINS, D_LIVE_NOBODY, D_LIVE_NO_REC, D_HOLD_UNNAMED, D_ORPHAN_UNPINNED, D_COUNTERS, D_REC_INVALID,
       D_LIVE_PRIV_REC, D_LIVE_INVALID_REC, D_CASES };

/* Each kind of damage alone: the recount finds it without changing anything, repairs it with
 * @fix, and finds nothing after. */
START_TEST(the_recount_finds_and_repairs_each_damage_alone)
{
	for (int c = 0; c < D_CASES; c++) {
		struct fx f;
		fx_open(&f);
		uint64_t r1, r2, r3;
		shared_pair(&f, &r1, &r2, &r3);
		struct shm_seg_rec *a = rec(&f, r1), *b = rec(&f, r2);
		struct shm_seg_hdr keep_h = *f.t.hdr;
		uint32_t s0 = a->p[0].slot, s1 = a->p[1].slot, sb = b->p[1].slot;
		uint64_t stray = 0, orphan = 0, orphan_data = 0;
		switch (c) {
		case D_REFS: f.t.slot[s0].refs = 7; break;
		case D_PINS: b->pins = 3; break;
		case D_LIVE_NOBODY: /* a LIVE slot no record refers to */
			f.t.slot[5] = f.t.slot[sb], f.t.slot[5].digest_lo ^= 1 << 20;
			break;
		case D_LIVE_NO_REC: f.t.slot[sb].rec = r2 + 64; break;
		case D_HOLD_UNNAMED:
			ck_assert_int_eq(shm_heap_alloc(f.a->shm, 4096, (uint64_t)SHM_TAG_SEGHOLD << 60, &stray), 0);
			break;
		case D_ORPHAN_UNPINNED: {
			/* a holder no slot points into any more (a dead releaser): freed by the fix */
			uint64_t l[] = { 100 };
			orphan = rec_new(&f, 1, l, NULL, (uint64_t)SHM_TAG_SEGHOLD << 60, (uint64_t)SHM_TAG_SEGHOLD << 60);
			rec(&f, orphan)->flags = SHM_SEG_ORPHAN;
			orphan_data = rec(&f, orphan)->data;
			break;
		}
		case D_COUNTERS:
			f.t.hdr->live += 3, f.t.hdr->tombs = 9, f.t.hdr->logical = 1, f.t.hdr->stored = 2;
			f.t.hdr->orphans = 0, f.t.hdr->orphan_bytes = 5;
			break;
		case D_REC_INVALID: /* an entry's record block that does not validate: the shard sweep's */
			ck_assert_int_eq(shm_heap_alloc(f.a->shm, 256, shm_tag_typed(SHM_TAG_SEGREC, 5, 1), &stray), 0);
			break;
		case D_LIVE_PRIV_REC: { /* a LIVE slot whose holder validates but is no record of the table's */
			uint64_t l[] = { SEG };
			f.t.slot[sb].rec = rec_new(&f, 1, l, NULL, priv(&f), priv(&f));
			break;
		}
		case D_LIVE_INVALID_REC: /* a LIVE slot whose holder is a record block that does not validate */
			ck_assert_int_eq(shm_heap_alloc(f.a->shm, 256, shm_tag_typed(SHM_TAG_SEGREC, 5, 1), &stray), 0);
			f.t.slot[sb].rec = stray;
			break;
		}
		struct shm_seg_slot before[8];
		memcpy(before, f.t.slot, sizeof(before));
		int64_t w = recount(&f, 0);
		if (c == D_COUNTERS || c == D_ORPHAN_UNPINNED || c == D_REC_INVALID)
			ck_assert_msg(w == 0, "case %d: %ld found", c, (long)w); /* counters and a pin-less holder are not "wrong" */
		else
			ck_assert_msg(w >= 1, "case %d: nothing found", c);
		int slot_lost = c == D_LIVE_NO_REC || c == D_LIVE_PRIV_REC || c == D_LIVE_INVALID_REC;
		if (c == D_REFS || c == D_PINS || c == D_HOLD_UNNAMED || slot_lost)
			ck_assert_msg(w == 1 + slot_lost, "case %d: %ld found", c, (long)w); /* the slot, and r2's pin */
		if (stray)
			ck_assert(allocated(&f, stray));
		ck_assert_int_eq(memcmp(before, f.t.slot, sizeof(before)), 0);
		ck_assert_int_eq(recount(&f, 1), w);
		ck_assert_msg(recount(&f, 0) == 0, "case %d: not repaired", c);
		/* what the repair made */
		ck_assert_uint_eq(f.t.slot[s0].refs, 1);
		ck_assert_uint_eq(f.t.slot[s1].refs, 1);
		ck_assert_uint_eq(a->pins, 2);
		ck_assert_uint_eq(b->pins, slot_lost ? 0 : 1);
		if (c == D_LIVE_NOBODY) {
			ck_assert_uint_eq(f.t.slot[5].state, SHM_SEG_TOMB);
			ck_assert_uint_eq(f.t.slot[5].gen, f.t.slot[sb].gen + 1);
		}
		if (slot_lost)
			ck_assert_uint_eq(f.t.slot[sb].state, SHM_SEG_TOMB);
		if (stray)
			ck_assert(allocated(&f, stray) == (c == D_REC_INVALID || c == D_LIVE_INVALID_REC));
		if (orphan) {
			ck_assert(!allocated(&f, orphan));
			ck_assert(!allocated(&f, orphan_data));
		}
		const struct shm_seg_hdr *h = f.t.hdr;
		ck_assert_uint_eq(h->live, keep_h.live - slot_lost);
		ck_assert_uint_eq(h->tombs, keep_h.tombs + (slot_lost || c == D_LIVE_NOBODY));
		ck_assert_uint_eq(h->logical, keep_h.logical);
		ck_assert_uint_eq(h->stored, keep_h.stored);
		ck_assert_uint_eq(h->orphans, keep_h.orphans);
		ck_assert_uint_eq(h->orphan_bytes, keep_h.orphan_bytes);
		fx_close(&f);
	}
}
END_TEST

/* The shard sweep frees, for the entries of its shard only, records and data blocks that no
 * entry owns (a record it can still read is released, keeping what others use); blocks of
 * entries that own them, and of other shards, stay. */
START_TEST(the_shard_sweep_frees_only_what_no_entry_of_its_shard_owns)
{
	struct fx f;
	fx_open(&f);
	uint64_t r1, r2, r3;
	shared_pair(&f, &r1, &r2, &r3);
	/* r2 (entry 2 of shard 2) and r3 (entry 3 of shard 3): no index entry owns them */
	struct shm_seg_rec *b = rec(&f, r2);
	uint64_t b_data = b->data, sb = b->p[1].slot;
	uint64_t lone, lone_other;
	ck_assert_int_eq(shm_heap_alloc(f.a->shm, 512, shm_tag_typed(SHM_TAG_SEGDATA, 2 + SHM_INDEX_SHARDS, 9), &lone), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a->shm, 512, shm_tag_typed(SHM_TAG_SEGDATA, 4, 9), &lone_other), 0);
	ck_assert_int_eq(shm_seg_sweep_shard(&f.t, 2), 2); /* r2 (released: its data freed with it) and lone */
	ck_assert(!allocated(&f, r2));
	ck_assert(!allocated(&f, b_data));
	ck_assert(!allocated(&f, lone));
	ck_assert(allocated(&f, lone_other));
	ck_assert(allocated(&f, r3));
	ck_assert_uint_eq(f.t.slot[sb].state, SHM_SEG_TOMB);
	/* r2 was the last reference to r1's first segment: r1 holds only its second now */
	ck_assert_uint_eq(f.t.slot[rec(&f, r1)->p[0].slot].state, SHM_SEG_TOMB);
	ck_assert(allocated(&f, r1));
	ck_assert_uint_eq(rec(&f, r1)->pins, 1);
	ck_assert_int_eq(recount(&f, 0), 0);
	/* shard 3: r3 released, and with it the holder r1 (its last reference) */
	ck_assert_int_eq(shm_seg_sweep_shard(&f.t, 3), 1);
	ck_assert(!allocated(&f, r3));
	ck_assert(!allocated(&f, r1));
	ck_assert(allocated(&f, lone_other));
	ck_assert_int_eq(recount(&f, 0), 0);
	assert_counts(&f, (struct counts){ .tombs = 3, .dedup = 2 * SEG }, "swept");
	/* shard 0: a data block and a record block that does not validate (its free had begun), no
	 * entry owning either; a holder block is not the sweep's */
	uint64_t d0, g0, h0;
	ck_assert_int_eq(shm_heap_alloc(f.a->shm, 512, shm_tag_typed(SHM_TAG_SEGDATA, SHM_INDEX_SHARDS, 9), &d0), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a->shm, 512, shm_tag_typed(SHM_TAG_SEGREC, 0, 9), &g0), 0);
	ck_assert_int_eq(shm_heap_alloc(f.a->shm, 512, (uint64_t)SHM_TAG_SEGHOLD << 60, &h0), 0);
	memset(f.a->shm->base + g0, 0, 512);
	ck_assert_int_eq(shm_seg_sweep_shard(&f.t, 0), 2);
	ck_assert(!allocated(&f, d0));
	ck_assert(!allocated(&f, g0));
	ck_assert(allocated(&f, h0));
	fx_close(&f);
}
END_TEST

enum { O_LIVE, O_RETIRED, O_BUSY, O_FREEING, O_FREE, O_GEN, O_META, O_REC, O_DATA, O_BADREC, O_BADREC_OTHER, O_CASES };

/* An entry owns its record and data block in any state but free, with its generation, the
 * segmented flag and its record's position: each condition alone. What it does not own is swept:
 * the record released (its data block with it). A data block its owned record names stays even
 * when the entry's payload offset (shared memory) says another. */
START_TEST(the_sweep_keeps_what_its_entry_owns_each_condition_alone)
{
	const uint32_t idx = 2 + 3 * SHM_INDEX_SHARDS, gen = 5;
	for (int c = 0; c < O_CASES; c++) {
		struct fx f;
		fx_open(&f);
		ck_assert_uint_gt(f.ix.nentries, idx);
		uint64_t len[] = { 100 };
		uint64_t r = rec_new(&f, 1, len, NULL, shm_tag_typed(SHM_TAG_SEGREC, idx, gen),
				     shm_tag_typed(SHM_TAG_SEGDATA, idx, gen));
		ck_assert_int_eq(hold(&f, r, NULL), 0);
		uint64_t data = rec(&f, r)->data;
		struct shm_index_entry *e = &f.ix.ent[idx], keep = *e;
		e->gen = gen;
		e->meta = SHM_META_SEG | 3;
		e->seg_rec = (uint32_t)((r - f.t.heap_lo) / 64);
		e->payload_off = data;
		uint32_t st = SHM_ENT_LIVE;
		switch (c) {
		case O_RETIRED: st = SHM_ENT_RETIRED; break;
		case O_BUSY: st = SHM_ENT_BUSY; break;
		case O_FREEING: st = SHM_ENT_FREEING; break;
		case O_FREE: st = SHM_ENT_FREE; break;
		case O_GEN: e->gen = gen + 1; break;
		case O_META: e->meta = 3; break;
		case O_REC: e->seg_rec++; break;
		case O_DATA: e->payload_off += 64; break;
		case O_BADREC_OTHER: e->payload_off += 64; /* fall through */
		case O_BADREC: rec(&f, r)->magic ^= 1; break;
		}
		atomic_store(&e->state, st);
		/* owned: both kept; O_REC: the record released, its data block with it; O_DATA (a
		 * payload offset scribbled): the record is owned, and the data block it names stays;
		 * O_BADREC: an owned record that no longer validates names nothing the sweep can read,
		 * so the payload offset decides: the block stays, and goes when that names another */
		int owned = c <= O_FREEING, rec_kept = owned || c >= O_DATA;
		int data_kept = owned || c == O_DATA || c == O_BADREC;
		int freed = shm_seg_sweep_shard(&f.t, idx % SHM_INDEX_SHARDS);
		ck_assert_msg(allocated(&f, r) == rec_kept, "case %d: record %s", c, rec_kept ? "freed" : "kept");
		ck_assert_msg(allocated(&f, data) == data_kept, "case %d: data %s", c, data_kept ? "freed" : "kept");
		ck_assert_int_eq(freed, data_kept ? 0 : 1);
		if (c == O_BADREC || c == O_BADREC_OTHER)
			rec(&f, r)->magic ^= 1;
		if (rec_kept)
			ck_assert_uint_eq(rec(&f, r)->data, data);
		*e = keep;
		fx_close(&f);
	}
}
END_TEST

/* The sweep judges nothing it could not lock for (a record is released only under the table's
 * mutex) and nothing of a heap whose walk failed. */
START_TEST(the_sweep_stops_without_its_lock_or_a_sound_heap)
{
	struct fx f;
	fx_open(&f);
	uint64_t len[] = { 100 };
	uint64_t r = rec_new(&f, 1, len, NULL, shm_tag_typed(SHM_TAG_SEGREC, 5, 1), shm_tag_typed(SHM_TAG_SEGDATA, 5, 1));
	ck_assert_int_eq(hold(&f, r, NULL), 0);
	uint32_t magic = f.t.hdr->mu.magic;
	f.t.hdr->mu.magic ^= 1;
	int rc = shm_seg_sweep_shard(&f.t, 5);
	f.t.hdr->mu.magic = magic;
	ck_assert_int_eq(rc, -EBADMSG);
	ck_assert(allocated(&f, r));
	ck_assert(allocated(&f, rec(&f, r)->data)); /* the record still names it */
	ck_assert_uint_eq(rec(&f, r)->flags, SHM_SEG_HELD);
	fx_close(&f);

	fx_open(&f);
	r = rec_new(&f, 1, len, NULL, shm_tag_typed(SHM_TAG_SEGREC, 5, 1), priv(&f));
	ck_assert_int_eq(hold(&f, r, NULL), 0);
	uint64_t after;
	ck_assert_int_eq(shm_heap_alloc(f.a->shm, 512, priv(&f), &after), 0);
	uint64_t *word = (uint64_t *)(void *)(f.a->shm->base + after - SHM_HEAP_BLOCK_HDR), keep = *word;
	*word ^= 0x5a5a5a5a5a5aull;
	rc = shm_seg_sweep_shard(&f.t, 5);
	*word = keep;
	ck_assert_int_eq(rc, -EBADMSG);
	ck_assert_int_eq(shm_heap_repair(f.a->shm), 0);
	ck_assert(allocated(&f, r));
	ck_assert_uint_eq(rec(&f, r)->flags, SHM_SEG_HELD);
	fx_close(&f);
}
END_TEST

/* A process killed holding the table's mutex: the next locker recounts. */
START_TEST(a_holder_killed_inside_the_table_is_recounted_by_the_next_locker)
{
	struct fx f;
	fx_open(&f);
	uint64_t r1, r2, r3;
	shared_pair(&f, &r1, &r2, &r3);
	uint32_t s0 = rec(&f, r1)->p[0].slot;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *ca;
		struct shm_index cix;
		struct shm_segtab ct;
		if (sc_arena_open(f.name, &ca) || shm_index_view(ca->shm, &cix) || shm_seg_view(ca->shm, &cix, &ct) ||
		    shm_seg_lock(&ct))
			_exit(90);
		ct.slot[s0].refs = 40; /* half-way through a change */
		ct.hdr->live = 1000;
		kill(getpid(), SIGKILL);
		_exit(91);
	}
	sc_test_wait_killed(pid);
	uint64_t recounts = f.t.hdr->recounts;
	ck_assert_int_eq(shm_seg_lock(&f.t), 0);
	ck_assert_uint_eq(f.t.hdr->recounts, recounts + 1);
	ck_assert_uint_eq(f.t.slot[s0].refs, 1);
	ck_assert_uint_eq(f.t.hdr->live, 3);
	shm_seg_unlock(&f.t);
	ck_assert_int_eq(recount(&f, 0), 0);
	fx_close(&f);
}
END_TEST

Suite *shm_seg_suite(void)
{
	Suite *s = suite_create("shm_seg");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, geometry_and_the_view);
	tcase_add_test(tc, a_record_validates_each_condition_alone);
	tcase_add_test(tc, holds_and_releases_count_references_and_keep_holders);
	tcase_add_test(tc, a_stale_hold_changes_nothing);
	tcase_add_test(tc, a_release_drops_only_its_own_references);
	tcase_add_test(tc, nothing_past_a_record_or_the_table_is_read);
	tcase_add_test(tc, a_full_collection_array_is_read_to_its_end_only);
	tcase_add_test(tc, a_drop_frees_only_holders_left_behind);
	tcase_add_test(tc, probing_tombstones_and_full_runs);
	tcase_add_test(tc, the_recount_finds_and_repairs_each_damage_alone);
	tcase_add_test(tc, the_shard_sweep_frees_only_what_no_entry_of_its_shard_owns);
	tcase_add_test(tc, the_sweep_keeps_what_its_entry_owns_each_condition_alone);
	tcase_add_test(tc, the_sweep_stops_without_its_lock_or_a_sound_heap);
	tcase_add_test(tc, a_holder_killed_inside_the_table_is_recounted_by_the_next_locker);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(shm_seg_suite)
