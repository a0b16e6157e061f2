/* tests/check_seg.c — content-addressed L2 segments: payloads sharing leading segments
 * store them once, exact logical/physical/saved accounting, every reference path (entry, lease,
 * dead process, in-flight admit) keeps a shared segment alive until the last one goes, scattered
 * leases, fsck's check and repair of reference counts, hostile records, bad options. */
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../shm/heap.h"

#define MiB (1ull << 20)
#define SEG MiB
#define ARENA (96ull << 20)

struct fx {
	struct sc_arena *a;
	const char *name;
	struct sc_stage *st;
	uint8_t *base;                 /* a 16 MiB token-major "KV" stream: prefixes of it are payloads */
};

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* @entries: the L2 index's capacity (0: the default) */
static void fx_open_seg_n(struct fx *f, uint32_t seg, uint32_t entries)
{
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .segment_bytes = seg, .index_entries = entries };
	f->a = sc_test_arena_opts("seg", &o, &f->name);
	ck_assert_int_eq(sc_stage_open(f->a, "model-A", "state-1", &f->st), 0);
	f->base = malloc(16 * MiB);
	fill(f->base, 16 * MiB, 7);
}

static void fx_open_seg(struct fx *f, uint32_t seg)
{
	fx_open_seg_n(f, seg, 0);
}

static void fx_close(struct fx *f)
{
	sc_stage_close(f->st);
	sc_test_arena_destroy(f->a, f->name);
	free(f->base);
}

/* Admit the first @bytes of the stream (then @tail bytes of seed @ts as its recurrent-like end)
 * under the tokens [tok, tok + 8). */
static int put(struct fx *f, int32_t tok, uint64_t bytes, uint64_t tail, uint32_t ts)
{
	uint8_t *buf = malloc(bytes + tail);
	memcpy(buf, f->base, bytes);
	fill(buf + bytes, tail, ts);
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = tok + i;
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { bytes + tail } };
	int rc = sc_l2_admit(f->st, "ns", t, 8, sc_digest(buf, bytes + tail), &p, SC_ORIGIN_DIRECT);
	free(buf);
	return rc;
}

static struct sc_key key_of(struct fx *f, int32_t tok)
{
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = tok + i;
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f->st, "ns", t, 8, &k), 0);
	return k;
}

static int lease(struct fx *f, int32_t tok, struct sc_lease *l)
{
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = tok + i;
	return sc_l2_get(f->st, "ns", t, 8, NULL, l);
}

/* The wire of a lease equals the stream prefix + tail. */
static void lease_is(struct fx *f, const struct sc_lease *l, uint64_t bytes, uint64_t tail, uint32_t ts)
{
	uint8_t *want = malloc(bytes + tail), *got = malloc(bytes + tail);
	memcpy(want, f->base, bytes);
	fill(want + bytes, tail, ts);
	ck_assert_uint_eq(l->sec_len[0] + l->sec_len[1], bytes + tail);
	ck_assert_int_eq(sc_lease_copy(l, got, bytes + tail - 1), -ENOBUFS);
	ck_assert_int_eq(sc_lease_copy(l, got, bytes + tail), (int64_t)(bytes + tail));
	ck_assert(memcmp(want, got, bytes + tail) == 0);
	struct sc_segment sg[128];
	int n = sc_lease_segments(l, sg, 128);
	ck_assert_int_gt(n, 0);
	uint64_t at = 0;
	for (int i = 0; i < n; i++) {
		ck_assert(memcmp(sg[i].ptr, want + at, sg[i].len) == 0);
		at += sg[i].len;
	}
	ck_assert_uint_eq(at, bytes + tail);
	free(want);
	free(got);
}

static struct sc_l2_stats stats(struct fx *f)
{
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(f->a, NULL, &s), 0);
	return s;
}

static void finding_cb(const char *component, const char *message, int repaired, void *ctx)
{
	(void)repaired;
	snprintf(ctx, 256, "%s: %s", component, message);
}

static void reclaim(struct fx *f)
{
	l2_reclaim_all(f->a, -1);
}

static uint64_t heap_used(struct fx *f)
{
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(f->a->shm, &hs), 0);
	return hs.used_bytes;
}

/* Turn 1 (key 100: 4 segments and a 100-byte tail) and turn 2 extending it (key 200: the same 4
 * segments, 2 more, a 300-byte tail). */
static void two_turns(struct fx *f)
{
	ck_assert_int_eq(put(f, 100, 4 * MiB, 100, 1), 0);
	ck_assert_int_eq(put(f, 200, 6 * MiB, 300, 2), 0);
}

/* A fresh segmented fixture holding the two turns; returns the heap bytes used before them. */
static uint64_t fx_open_two_turns(struct fx *f)
{
	fx_open_seg(f, SEG);
	uint64_t used0 = heap_used(f);
	two_turns(f);
	return used0;
}

/* Turn 1 is still there, whole. */
static void turn_one_intact(struct fx *f)
{
	struct sc_lease l;
	ck_assert_int_eq(lease(f, 100, &l), 0);
	lease_is(f, &l, 4 * MiB, 100, 1);
	sc_lease_release(&l);
}

/* A payload of whole segments (no tail, one section) is cut into exactly its segments: key 200,
 * three segments extending key 100's two, is scattered over exactly three pieces of one segment
 * each (no empty piece for the tail it does not have, nor for the empty second section). */
START_TEST(a_payload_of_whole_segments_has_exactly_its_segments)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	ck_assert_int_eq(put(&f, 100, 2 * MiB, 0, 0), 0);
	ck_assert_int_eq(put(&f, 200, 3 * MiB, 0, 0), 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.segments, 3);
	ck_assert_uint_eq(s.segment_dedup_bytes, 2 * MiB);
	struct sc_lease l;
	ck_assert_int_eq(lease(&f, 200, &l), 0);
	ck_assert_uint_eq(l.segments, 3);
	struct sc_segment sg[8];
	ck_assert_int_eq(sc_lease_segments(&l, sg, 8), 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(sg[i].len, SEG);
		ck_assert_uint_eq(sg[i].section, 0);
	}
	lease_is(&f, &l, 3 * MiB, 0, 0);
	sc_lease_release(&l);
	fx_close(&f);
}
END_TEST

/* A segment the table keeps in its first slot (slot 0: its digest's low bits are all zero) is
 * found and shared like any other: the stream's first 8 bytes are chosen (a counter, tried in
 * turn) so that its first segment hashes there; key 200 (three segments) then shares it and the
 * second with key 100 (two: a payload of one segment is stored whole, unindexed). */
START_TEST(a_segment_in_the_tables_first_slot_is_shared)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	const struct shm_segtab *t = l2_segtab(f.a);
	struct sc_digest d = sc_test_digest_low_bits_zero(f.base, SEG, t->mask);
	ck_assert_int_eq(put(&f, 100, 2 * SEG, 0, 0), 0);
	ck_assert_uint_eq(t->slot[0].state, SHM_SEG_LIVE);
	ck_assert_uint_eq(t->slot[0].digest_lo, d.lo);
	ck_assert_int_eq(put(&f, 200, 3 * SEG, 0, 0), 0);
	ck_assert_uint_eq(stats(&f).segment_dedup_bytes, 2 * SEG);
	struct sc_lease l;
	ck_assert_int_eq(lease(&f, 200, &l), 0);
	ck_assert_uint_eq(l.segments, 3);
	lease_is(&f, &l, 3 * SEG, 0, 0);
	sc_lease_release(&l);
	fx_close(&f);
}
END_TEST

/* A scattered entry is copied out whole without a lease (sc_l2_get_copy: every piece, the last
 * one filling exactly what is left of the wire), and refused for a buffer one byte short. */
START_TEST(a_scattered_entry_is_copied_whole_without_a_lease)
{
	struct fx f;
	fx_open_two_turns(&f);
	uint64_t b = 6 * MiB + 300;
	uint8_t *want = malloc(b), *got = malloc(b);
	memcpy(want, f.base, 6 * MiB);
	fill(want + 6 * MiB, 300, 2);
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = 200 + i;
	struct sc_lease l;
	ck_assert_int_eq(lease(&f, 200, &l), 0);
	ck_assert_uint_gt(l.segments, 0); /* scattered */
	sc_lease_release(&l);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, got, b - 1, NULL), -ENOBUFS);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, got, b, NULL), (int64_t)b);
	ck_assert(memcmp(want, got, b) == 0);
	free(want);
	free(got);
	fx_close(&f);
}
END_TEST

/* sc_lease_segments writes at most @max segments and no more than there are: the slots past
 * them are left as they were (7 segments: room for 2, then for 9). */
START_TEST(lease_segments_writes_no_more_than_asked_or_there_are)
{
	struct fx f;
	fx_open_two_turns(&f);
	struct sc_lease l;
	ck_assert_int_eq(lease(&f, 200, &l), 0);
	ck_assert_uint_eq(l.segments, 7);
	struct sc_segment sg[10];
	const struct sc_segment canary = { .ptr = &canary, .len = 12345, .section = 7 };
	for (uint32_t max = 2; max <= 9; max += 7) {
		for (int i = 0; i < 10; i++)
			sg[i] = canary;
		ck_assert_int_eq(sc_lease_segments(&l, sg, max), 7);
		uint32_t wrote = max < 7 ? max : 7;
		for (uint32_t i = 0; i < 10; i++) {
			int untouched = sg[i].ptr == canary.ptr && sg[i].len == canary.len && sg[i].section == canary.section;
			ck_assert_msg(untouched == (i >= wrote), "max %u: slot %u %s", max, i,
				      untouched ? "not written" : "written");
		}
	}
	sc_lease_release(&l);
	fx_close(&f);
}
END_TEST

/* Two sections, each cut into segments from its start: B's second section (three segments)
 * shares its first two with A's, and B, scattered over pieces of both sections (the second
 * section's several in a row), is read back whole. */
START_TEST(a_scattered_entry_of_two_sections_reads_back_whole)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	struct sc_kv_desc kd = { .codec = SC_KV_CODEC_RAW, .payload_bytes = 2 * MiB, .token_count = 8 };
	struct sc_payload pa = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { f.base, f.base + 2 * MiB },
				 .sec_len = { 2 * MiB, 2 * MiB }, .kv_desc = &kd };
	struct sc_payload pb = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { f.base, f.base + 2 * MiB },
				 .sec_len = { 2 * MiB, 3 * MiB }, .kv_desc = &kd };
	int32_t ta[8], tb[8];
	for (int i = 0; i < 8; i++)
		ta[i] = 300 + i, tb[i] = 400 + i;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", ta, 8, sc_digest(f.base, 4 * MiB), &pa, SC_ORIGIN_DIRECT), 0);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", tb, 8, sc_digest(f.base, 5 * MiB), &pb, SC_ORIGIN_DIRECT), 0);
	ck_assert_uint_eq(stats(&f).segment_dedup_bytes, 4 * MiB);
	struct sc_lease l;
	ck_assert_int_eq(lease(&f, 400, &l), 0);
	ck_assert_uint_eq(l.segments, 5);
	ck_assert_uint_eq(l.sec_len[0], 2 * MiB);
	ck_assert_uint_eq(l.sec_len[1], 3 * MiB);
	struct sc_segment sg[8];
	ck_assert_int_eq(sc_lease_segments(&l, sg, 8), 5);
	for (int i = 0; i < 5; i++)
		ck_assert_uint_eq(sg[i].section, i < 2 ? 0 : 1);
	lease_is(&f, &l, 5 * MiB, 0, 0);
	/* its record scribbled so that a first section's piece comes after a second section's (the
	 * sums unchanged): refused */
	struct shm_seg_rec *r = (struct shm_seg_rec *)(void *)(f.a->shm->base + l.private_spare_[0]);
	struct shm_seg_piece p1 = r->p[1];
	r->p[1] = r->p[2], r->p[2] = p1;
	ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), -EBADMSG);
	uint8_t *buf = malloc(5 * MiB);
	ck_assert_int_eq(sc_lease_copy(&l, buf, 5 * MiB), -EBADMSG);
	free(buf);
	r->p[2] = r->p[1], r->p[1] = p1;
	ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), 5);
	sc_lease_release(&l);
	fx_close(&f);
}
END_TEST

/* An admission's lookup of its segments waits for the segment table's lock while another
 * process holds it (alive): the holder sees it wait, lets go and ends; the admission shares A's
 * segments as usual. (One that looked without the lock would clear the holder's lock word when it
 * "unlocked": the holder would never see a waiter.) */
START_TEST(a_segment_lookup_waits_for_the_tables_lock)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	ck_assert_int_eq(put(&f, 100, 4 * MiB, 100, 1), 0);
	pid_t holder = sc_test_locker(f.name, &l2_segtab(f.a)->hdr->mu, 'h', 0);
	ck_assert_int_eq(put(&f, 200, 6 * MiB, 300, 2), 0);
	int status = 0;
	pid_t got = 0;
	for (double t0 = sc_test_now_s(); got == 0 && sc_test_now_s() - t0 < 30.0; sc_test_pause_ms(1))
		got = waitpid(holder, &status, WNOHANG); /* the holder ends once it saw a waiter */
	if (got == 0) {
		kill(holder, SIGKILL);
		waitpid(holder, &status, 0);
	}
	ck_assert_msg(got == holder && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the lock's holder saw no waiter (status %#x)", status);
	ck_assert_uint_eq(stats(&f).segment_dedup_bytes, 4 * MiB);
	fx_close(&f);
}
END_TEST

/* The lease calls' bad input: no lease, a lease already released (contiguous or scattered), room
 * for segments but no array, no buffer for a copy, a lease whose segment count is not its
 * record's; and a contiguous entry of one section is one segment (no empty second one). Nothing
 * is written where it should not be. */
START_TEST(lease_segments_and_copy_refuse_bad_input)
{
	struct fx f;
	fx_open_two_turns(&f);
	uint8_t *buf = malloc(7 * MiB);
	struct sc_segment sg[8];
	ck_assert_int_eq(sc_lease_copy(NULL, buf, 7 * MiB), -EINVAL);
	ck_assert_int_eq(sc_lease_segments(NULL, sg, 8), -EINVAL);
	for (int32_t k = 100; k <= 200; k += 100) {
		struct sc_lease l;
		ck_assert_int_eq(lease(&f, k, &l), 0);
		ck_assert_int_eq(sc_lease_segments(&l, NULL, 4), -EINVAL);
		ck_assert_int_eq(sc_lease_copy(&l, NULL, 7 * MiB), -EINVAL);
		if (k == 100) {
			ck_assert_uint_eq(l.segments, 0);
			ck_assert_int_eq(sc_lease_segments(&l, sg, 8), 1);
			ck_assert_uint_eq(sg[0].len, 4 * MiB + 100);
		} else {
			l.segments--; /* not its record's count */
			ck_assert_int_eq(sc_lease_segments(&l, sg, 8), -EBADMSG);
			l.segments++;
			ck_assert_int_eq(sc_lease_segments(&l, sg, 8), 7);
		}
		sc_lease_release(&l);
		memset(buf, 0xa5, 64);
		ck_assert_int_eq(sc_lease_segments(&l, sg, 8), -EINVAL);
		ck_assert_int_eq(sc_lease_copy(&l, buf, 7 * MiB), -EINVAL);
		ck_assert_uint_eq(buf[0], 0xa5);
	}
	free(buf);
	fx_close(&f);
}
END_TEST

/* A plain entry (half a segment: stored whole, no record) counts its wire as physical bytes,
 * whatever its unused record field holds: scribbled to name turn 2's record, the statistics do
 * not change. */
START_TEST(a_plain_entry_counts_its_wire_whatever_its_record_field_holds)
{
	struct fx f;
	fx_open_two_turns(&f);
	ck_assert_int_eq(put(&f, 300, MiB / 2, 0, 0), 0);
	struct shm_index_entry *e = sc_test_l2_entry(f.a, key_of(&f, 300));
	const struct shm_index_entry *e2 = sc_test_l2_entry(f.a, key_of(&f, 200));
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_nonnull(e2);
	ck_assert(!(e->meta & SHM_META_SEG));
	ck_assert(e2->meta & SHM_META_SEG);
	uint64_t phys = stats(&f).physical_bytes;
	uint32_t saved = e->seg_rec;
	e->seg_rec = e2->seg_rec;
	ck_assert_uint_eq(stats(&f).physical_bytes, phys);
	e->seg_rec = saved;
	fx_close(&f);
}
END_TEST

/* In an arena without segments, an entry forged to say it is segmented, with a record the test
 * writes into a heap block (valid in itself: its magic, one piece of the entry's own bytes), is
 * refused by the copy without a lease: only an arena with segments reads records. With its meta
 * and record field put back, the same copy succeeds. */
START_TEST(a_forged_segmented_entry_in_an_arena_without_segments_is_refused)
{
	struct fx f;
	fx_open_seg(&f, 0);
	const uint64_t n = MiB / 2;
	ck_assert_int_eq(put(&f, 100, n, 0, 0), 0);
	struct shm_index_entry *e = sc_test_l2_entry(f.a, key_of(&f, 100));
	ck_assert_ptr_nonnull(e);
	struct shm_index *ix = l2_ix(f.a);
	uint64_t roff;
	ck_assert_int_eq(shm_heap_alloc(f.a->shm, shm_seg_rec_bytes(1), shm_tag_priv(f.a->shm->token), &roff), 0);
	ck_assert_uint_eq((roff - ix->heap_lo) % 64, 0);
	struct shm_seg_rec *r = (struct shm_seg_rec *)(void *)(f.a->shm->base + roff);
	memset(r, 0, shm_seg_rec_bytes(1));
	r->magic = SHM_SEG_REC_MAGIC;
	r->npieces = 1;
	r->data = e->payload_off;
	r->wire = r->local = n; /* all of it in the entry's block (its token ids after it), not CONTIG */
	r->p[0] = (struct shm_seg_piece){ .at = e->payload_off, .len = n, .slot = SHM_SEG_NONE, .local = 1 };
	uint32_t meta = e->meta, seg_rec = e->seg_rec;
	e->seg_rec = (uint32_t)((roff - ix->heap_lo) / 64);
	e->meta |= SHM_META_SEG;
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = 100 + i;
	uint8_t *buf = malloc(n);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, n, NULL), -EBADMSG);
	e->meta = meta, e->seg_rec = seg_rec;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, n, NULL), (int64_t)n);
	ck_assert(memcmp(buf, f.base, n) == 0);
	free(buf);
	ck_assert_int_eq(shm_heap_free(f.a->shm, roff), 0);
	fx_close(&f);
}
END_TEST

START_TEST(shared_leading_segments_are_stored_once)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	two_turns(&f);
	struct sc_l2_stats s = stats(&f);
	uint64_t a = 4 * MiB + 100, b = 6 * MiB + 300;
	ck_assert_uint_eq(s.entries, 2);
	ck_assert_uint_eq(s.logical_bytes, a + b);
	ck_assert_uint_eq(s.physical_bytes, a + 2 * MiB + 300); /* the shared 4 MiB once */
	ck_assert_uint_eq(s.saved_bytes, 4 * MiB);
	ck_assert_uint_eq(s.segments, 6);
	ck_assert_uint_eq(s.segment_dedup_bytes, 4 * MiB);
	ck_assert_uint_eq(s.segment_holder_bytes, 0);
	/* the first is contiguous: zero-copy sections as without segments */
	struct sc_lease la, lb;
	ck_assert_int_eq(lease(&f, 100, &la), 0);
	ck_assert_uint_eq(la.segments, 0);
	ck_assert_ptr_nonnull(la.sec[0]);
	ck_assert(memcmp(la.sec[0], f.base, 4 * MiB) == 0);
	lease_is(&f, &la, 4 * MiB, 100, 1);
	/* the second is scattered: a segment list, sections NULL */
	ck_assert_int_eq(lease(&f, 200, &lb), 0);
	ck_assert_uint_eq(lb.segments, 7);
	ck_assert_ptr_null(lb.sec[0]);
	lease_is(&f, &lb, 6 * MiB, 300, 2);
	ck_assert_int_eq(sc_lease_segments(&lb, NULL, 0), 7);
	ck_assert_int_eq(sc_lease_segments(NULL, NULL, 0), -EINVAL);
	sc_lease_release(&la);
	sc_lease_release(&lb);
	/* copy without a lease */
	uint8_t *buf = malloc(b);
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = 200 + i;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, b, NULL), (int64_t)b);
	ck_assert(memcmp(buf, f.base, 6 * MiB) == 0);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, b - 1, NULL), -ENOBUFS);
	free(buf);
	/* the same payload again (another key): only its tail is new */
	ck_assert_int_eq(put(&f, 300, 6 * MiB, 300, 2), 0);
	s = stats(&f);
	ck_assert_uint_eq(s.physical_bytes, a + 2 * MiB + 300 + 300);
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(rep.problems, 0);
	ck_assert_uint_eq(rep.digest_failures, 0);
	/* every heap byte in use is accounted to its owner: live entries (their segment records and
	 * segments included), nothing retired, nothing leaked */
	ck_assert_uint_eq(rep.pending_bytes, 0);
	ck_assert_uint_eq(rep.leaked_bytes, 0);
	ck_assert_uint_eq(rep.entry_bytes + rep.reserved_bytes, rep.heap_used_bytes);
	/* and through a handle that never used L2 (as `stagecache fsck --deep` opens it): the
	 * scattered payloads are read and verified the same */
	struct sc_arena *fresh;
	ck_assert_int_eq(sc_arena_open(f.name, &fresh), 0);
	ck_assert_int_eq(sc_arena_fsck(fresh, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(rep.digest_failures, 0);
	ck_assert_uint_eq(rep.digests_checked, 3);
	sc_arena_close(fresh);
	fx_close(&f);
}
END_TEST

/* Two entries put (6 MiB + 100 bytes, 4 MiB): the index of the first (segmented) one. */
static uint32_t put_two_seg_victim(struct fx *f)
{
	ck_assert_int_eq(put(f, 100, 6 * MiB, 100, 1), 0);
	ck_assert_int_eq(put(f, 200, 4 * MiB, 0, 0), 0);
	struct shm_index *ix = l2_ix(f->a);
	uint32_t victim = UINT32_MAX;
	for (uint32_t i = 0; i < ix->nentries && victim == UINT32_MAX; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE && (ix->ent[i].meta & SHM_META_SEG) &&
		    ix->ent[i].sec_len[0] == 6 * MiB + 100)
			victim = i;
	ck_assert_uint_ne(victim, UINT32_MAX);
	return victim;
}

/* Repairs (in up to three rounds) until a deep check is clean with every heap byte accounted;
 * the entry put as 200 (put_two_seg_victim's other one) is still leased; closes @f. */
static void repaired_other_stays(struct fx *f)
{
	struct sc_fsck_report rep;
	char msg[256] = "";
	for (int round = 0; round < 3 && sc_arena_fsck(f->a, SC_FSCK_REPAIR, NULL, NULL, &rep) > 0; round++)
		;
	ck_assert_msg(sc_arena_fsck(f->a, SC_FSCK_DEEP, finding_cb, msg, &rep) == 0, "%s", msg);
	ck_assert_uint_eq(rep.leaked_bytes, 0);
	ck_assert_uint_eq(rep.entry_bytes + rep.reserved_bytes + rep.pending_bytes, rep.heap_used_bytes);
	struct sc_lease l;
	ck_assert_int_eq(lease(f, 200, &l), 0); /* the other entry stays */
	sc_lease_release(&l);
	fx_close(f);
}

/* A segmented entry's record orphaned (the entry no longer says it is segmented, as a scribble
 * of its meta word does): fsck reports the record owned by no entry, and the repair drops the
 * entry it can no longer verify and sweeps the record and its references, in rounds that end with
 * the arena consistent and every heap byte accounted; the other entry stays. */
START_TEST(fsck_sweeps_an_orphaned_segment_record)
{
	struct fx f;
	fx_open_seg(&f, 2 * MiB);
	uint32_t victim = put_two_seg_victim(&f);
	struct shm_index *ix = l2_ix(f.a);
	ix->ent[victim].meta &= ~SHM_META_SEG;
	struct sc_fsck_report rep;
	char msg[256] = "";
	int found = sc_arena_fsck(f.a, 0, finding_cb, msg, &rep);
	ck_assert_int_gt(found, 0);
	uint64_t leaked = rep.leaked_bytes;
	ck_assert_uint_gt(leaked, 0);
	ck_assert_int_eq(sc_arena_fsck(f.a, 0, NULL, NULL, &rep), found); /* a check changes nothing */
	ck_assert_uint_eq(rep.leaked_bytes, leaked);
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	repaired_other_stays(&f);
}
END_TEST

/* A segment record tagged for the entry one past the index's table (1500 entries: the region
 * ends in slack), with the slack shaped as a segmented entry naming that record: nothing past the
 * table is an entry, so the record is owned by no entry; the repair drops the entry that lost it
 * and the other stays. */
START_TEST(fsck_owns_no_segment_record_past_the_table)
{
	struct fx f;
	fx_open_seg_n(&f, 2 * MiB, 1500);
	uint32_t victim = put_two_seg_victim(&f);
	struct shm_index *ix = l2_ix(f.a);
	uint64_t isize;
	uint8_t *ireg = shm_region(f.a->shm, SHM_REGION_INDEX, &isize);
	struct shm_index_entry *past = &ix->ent[ix->nentries];
	ck_assert_uint_ge((uint64_t)(ireg + isize - (uint8_t *)past), sizeof(*past));
	*past = ix->ent[victim];
	uint64_t rec = ix->heap_lo + 64ull * past->seg_rec;
	ck_assert_int_eq(shm_heap_set_tag(f.a->shm, rec, (uint64_t)SHM_TAG_SEGREC << 60 | (uint64_t)ix->nentries << 32 | past->gen), 0);
	struct sc_fsck_report rep;
	struct sc_test_wanted w = { .text = "is owned by no entry" };
	ck_assert_int_gt(sc_arena_fsck(f.a, 0, sc_test_on_wanted, &w, &rep), 0);
	ck_assert_int_eq(w.hits, 1);
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	repaired_other_stays(&f);
}
END_TEST

/* A segmented entry scribbled free (its generation, meta word and offsets intact), or naming a
 * segment record one record past its own: a free entry owns nothing, and an entry owns only the
 * record it names, so its record is reported as owned by no entry (and the free entry's data
 * blocks as owned by nothing); the repair converges and the other entry stays. */
START_TEST(fsck_a_record_is_owned_only_by_the_entry_naming_it)
{
	for (int k = 0; k < 2; k++) {
		struct fx f;
		fx_open_seg(&f, 2 * MiB);
		uint32_t victim = put_two_seg_victim(&f);
		struct shm_index *ix = l2_ix(f.a);
		if (k == 0)
			atomic_store(&ix->ent[victim].state, SHM_ENT_FREE);
		else
			ix->ent[victim].seg_rec++;
		struct sc_fsck_report rep;
		struct sc_test_wanted rec = { .text = "segment record at" }, blk = { .text = "is owned by nothing" };
		ck_assert_int_gt(sc_arena_fsck(f.a, 0, sc_test_on_wanted, &rec, &rep), 0);
		ck_assert_int_gt(sc_arena_fsck(f.a, 0, sc_test_on_wanted, &blk, &rep), 0);
		ck_assert_int_eq(rec.hits, 1);
		if (k == 0)
			ck_assert_int_gt(blk.hits, 0);
		repaired_other_stays(&f);
	}
}
END_TEST

START_TEST(segments_off_and_small_payloads_are_stored_whole)
{
	struct fx f;
	fx_open_seg(&f, 0);
	two_turns(&f);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.physical_bytes, s.logical_bytes);
	ck_assert_uint_eq(s.saved_bytes, 0);
	ck_assert_uint_eq(s.segments, 0);
	fx_close(&f);
	fx_open_seg(&f, SEG);
	ck_assert_int_eq(put(&f, 100, 0, 1000, 1), 0); /* below one segment: whole, no record */
	s = stats(&f);
	ck_assert_uint_eq(s.segments, 0);
	ck_assert_uint_eq(s.physical_bytes, 1000);
	/* exactly one segment ("larger than one segment" is cut): whole too, admitted or filled */
	ck_assert_int_eq(put(&f, 200, SEG, 0, 2), 0);
	ck_assert_uint_eq(stats(&f).segments, 0);
	struct sc_l2_resv r;
	ck_assert_int_eq(sc_l2_reserve(f.st, SEG, &r), 0);
	memcpy(r.ptr, f.base, SEG);
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = 300 + i;
	ck_assert_int_eq(sc_l2_publish(f.st, "ns", t, 8, sc_digest(r.ptr, SEG), &r, SC_PAYLOAD_FULL_STATE, SEG, 0, NULL,
				       SC_ORIGIN_FROM_L3, NULL), 0);
	/* a recurrent section of exactly one segment (recurrent-only: no KV section): whole too,
	 * admitted ... */
	struct sc_payload rp = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { NULL, f.base }, .sec_len = { 0, SEG } };
	for (int i = 0; i < 8; i++)
		t[i] = 500 + i;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, sc_digest(f.base, SEG), &rp, SC_ORIGIN_DIRECT), 0);
	ck_assert_uint_eq(stats(&f).segments, 0);
	/* ... or filled */
	ck_assert_int_eq(sc_l2_reserve(f.st, SEG, &r), 0);
	memcpy(r.ptr, f.base, SEG);
	for (int i = 0; i < 8; i++)
		t[i] = 400 + i;
	ck_assert_int_eq(sc_l2_publish(f.st, "ns", t, 8, sc_digest(r.ptr, SEG), &r, SC_PAYLOAD_KV_RECURRENT, 0, SEG, NULL,
				       SC_ORIGIN_FROM_L3, NULL), 0);
	s = stats(&f);
	ck_assert_uint_eq(s.segments, 0);
	ck_assert_uint_eq(s.saved_bytes, 0);
	fx_close(&f);
}
END_TEST

/* A fill published in place (sc_l2_reserve / sc_l2_publish: how L3 promotions land) is indexed
 * too: an admit extending it shares its segments. */
START_TEST(a_published_fill_is_indexed)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	struct sc_l2_resv r;
	uint64_t a = 4 * MiB + 100;
	ck_assert_int_eq(sc_l2_reserve(f.st, a, &r), 0);
	memcpy(r.ptr, f.base, 4 * MiB);
	fill((uint8_t *)r.ptr + 4 * MiB, 100, 1);
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = 100 + i;
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_publish(f.st, "ns", t, 8, sc_digest(r.ptr, a), &r, SC_PAYLOAD_FULL_STATE, a, 0, NULL,
				       SC_ORIGIN_FROM_L3, &l), 0);
	ck_assert_uint_eq(l.segments, 0);
	lease_is(&f, &l, 4 * MiB, 100, 1);
	sc_lease_release(&l);
	ck_assert_uint_eq(stats(&f).segments, 4);
	ck_assert_int_eq(put(&f, 200, 6 * MiB, 300, 2), 0);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.saved_bytes, 4 * MiB);
	ck_assert_uint_eq(s.physical_bytes, a + 2 * MiB + 300);
	ck_assert_int_eq(lease(&f, 200, &l), 0);
	ck_assert_uint_gt(l.segments, 0);
	lease_is(&f, &l, 6 * MiB, 300, 2);
	sc_lease_release(&l);
	/* a fill of whole segments, no partial last piece: exactly two pieces */
	ck_assert_int_eq(sc_l2_reserve(f.st, 2 * MiB, &r), 0);
	fill(r.ptr, 2 * MiB, 9);
	for (int i = 0; i < 8; i++)
		t[i] = 300 + i;
	ck_assert_int_eq(sc_l2_publish(f.st, "ns", t, 8, sc_digest(r.ptr, 2 * MiB), &r, SC_PAYLOAD_FULL_STATE, 2 * MiB, 0,
				       NULL, SC_ORIGIN_FROM_L3, &l), 0);
	lease_is(&f, &l, 0, 2 * MiB, 9);
	sc_lease_release(&l);
	ck_assert_uint_eq(stats(&f).segments, 6 + 2);
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_DEEP, NULL, NULL, NULL), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 300)), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 100)), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 200)), 0);
	reclaim(&f);
	s = stats(&f);
	ck_assert_uint_eq(s.segments, 0);
	ck_assert_uint_eq(s.physical_bytes, 0);
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_DEEP, NULL, NULL, NULL), 0);
	fx_close(&f);
}
END_TEST

START_TEST(every_reference_keeps_a_shared_segment_until_the_last_goes)
{
	struct fx f;
	uint64_t used0 = fx_open_two_turns(&f);
	/* 1. entry: A goes, B keeps A's segments (A's block stays as a holder) */
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 100)), 0);
	reclaim(&f);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.segments, 6);
	ck_assert_uint_eq(s.segment_holder_bytes, 4 * MiB + 100);
	ck_assert_uint_eq(s.physical_bytes, 4 * MiB + 100 + 2 * MiB + 300);
	char msg[256] = "";
	ck_assert_msg(sc_arena_fsck(f.a, SC_FSCK_DEEP, finding_cb, msg, NULL) == 0, "holder: %s", msg);
	struct sc_lease lb;
	ck_assert_int_eq(lease(&f, 200, &lb), 0);
	lease_is(&f, &lb, 6 * MiB, 300, 2);
	/* 2. lease: B removed while leased: everything stays */
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 200)), 0);
	reclaim(&f);
	s = stats(&f);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_uint_eq(s.segments, 6);
	lease_is(&f, &lb, 6 * MiB, 300, 2);
	sc_lease_release(&lb);
	reclaim(&f);
	s = stats(&f);
	ck_assert_uint_eq(s.segments, 0);
	ck_assert_uint_eq(s.segment_holder_bytes, 0);
	ck_assert_uint_eq(s.physical_bytes, 0);
	ck_assert_uint_eq(heap_used(&f), used0);
	/* 3. the holder order reversed: B goes first, A keeps its own */
	two_turns(&f);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 200)), 0);
	reclaim(&f);
	s = stats(&f);
	ck_assert_uint_eq(s.segments, 4);
	ck_assert_uint_eq(s.physical_bytes, 4 * MiB + 100);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 100)), 0);
	reclaim(&f);
	ck_assert_uint_eq(stats(&f).segments, 0);
	ck_assert_uint_eq(heap_used(&f), used0);
	fx_close(&f);
}
END_TEST

/* In a forked child: @f's arena and stage opened again as the child's own (exit 2 when they
 * cannot be). */
static void fx_reopen_in_child(struct fx *f)
{
	if (sc_arena_open(f->name, &f->a) || sc_stage_open(f->a, "model-A", "state-1", &f->st))
		_exit(2);
}

/* A shrink judges the bytes held after it reclaimed what waited: an entry whose block stays as a
 * segment holder frees less than its footprint, so the bytes used minus those pending, read
 * before that reclaim, would be too few. */
START_TEST(a_shrink_judges_what_is_held_after_its_reclaim)
{
	struct fx f;
	uint64_t used0 = fx_open_two_turns(&f);
	struct sc_lease la;
	ck_assert_int_eq(lease(&f, 100, &la), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 100)), 0); /* leased: A waits for reclaim */
	sc_lease_release(&la);
	ck_assert_uint_gt(l2_pending(f.a), 4 * MiB);
	ck_assert_uint_eq(stats(&f).entries, 1);
	/* B alone holds 6 MiB and more: it does not fit in 5 */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, used0 + 5 * MiB), 0);
	ck_assert_uint_eq(stats(&f).entries, 0);
	ck_assert_uint_le(heap_used(&f), used0 + 5 * MiB);
	fx_close(&f);
}
END_TEST

START_TEST(a_dead_processs_lease_keeps_segments_until_reaped)
{
	struct fx f;
	uint64_t used0 = fx_open_two_turns(&f);
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *a;
		struct sc_stage *st;
		if (sc_arena_open(f.name, &a) || sc_stage_open(a, "model-A", "state-1", &st))
			_exit(2);
		int32_t t[8];
		for (int i = 0; i < 8; i++)
			t[i] = 200 + i;
		struct sc_lease l;
		if (sc_l2_get(st, "ns", t, 8, NULL, &l) || !l.segments)
			_exit(3);
		char c = 1;
		if (write(pfd[1], &c, 1) != 1)
			_exit(4);
		pause(); /* killed holding the lease */
		_exit(0);
	}
	char c;
	ck_assert_int_eq(read(pfd[0], &c, 1), 1);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 100)), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 200)), 0);
	reclaim(&f);
	ck_assert_uint_eq(stats(&f).segments, 6); /* the child's lease pins B, B pins the segments */
	kill(pid, SIGKILL);
	int ws;
	waitpid(pid, &ws, 0);
	l2_reap(f.a, 1); /* what the next admit or the periodic reap does */
	reclaim(&f);
	ck_assert_uint_eq(stats(&f).segments, 0);
	ck_assert_uint_eq(heap_used(&f), used0);
	close(pfd[0]);
	close(pfd[1]);
	fx_close(&f);
}
END_TEST

START_TEST(a_writer_killed_inside_the_table_is_recounted)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	ck_assert_int_eq(put(&f, 100, 4 * MiB, 100, 1), 0);
	uint64_t phys = stats(&f).physical_bytes;
	const char *points[] = { "seg.hold.partial", "seg.admit.held", "l2.admit.busy", "l2.admit.linked" };
	for (unsigned k = 0; k < sizeof(points) / sizeof(points[0]); k++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			fx_reopen_in_child(&f);
			sc_fault_arm(points[k]);
			put(&f, 1000 + 100 * (int32_t)k, 6 * MiB, 300, 2);
			_exit(0);
		}
		int ws;
		waitpid(pid, &ws, 0);
		ck_assert_msg(WIFSIGNALED(ws), "%s: the child died at the point", points[k]);
		/* whatever it left: the next writer repairs it (lock owner dead, orphan sweep) */
		l2_reap(f.a, 1);
		ck_assert_int_eq(put(&f, 5000 + (int32_t)k, 5 * MiB, 7, 3), 0);
		struct sc_fsck_report rep;
		ck_assert_int_ge(sc_arena_fsck(f.a, SC_FSCK_REPAIR | SC_FSCK_DEEP, NULL, NULL, &rep), 0);
		ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
		ck_assert_msg(rep.problems == 0, "%s: clean after repair", points[k]);
		ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 5000 + (int32_t)k)), 0);
		int32_t dk = 1000 + 100 * (int32_t)k;
		(void)sc_l2_remove(f.st, key_of(&f, dk)); /* linked before it died: remove it too */
		reclaim(&f);
		struct sc_l2_stats s = stats(&f);
		ck_assert_msg(s.physical_bytes == phys && s.segments == 4, "%s: phys %llu segs %llu", points[k],
			      (unsigned long long)s.physical_bytes, (unsigned long long)s.segments);
	}
	turn_one_intact(&f);
	fx_close(&f);
}
END_TEST

/* A writer killed inside a heap free (its entry's record or data block half-freed) in a segmented
 * arena: read-only fsck finds what it left, repair frees it (never escalates: the arena stays
 * usable, every other entry kept), and a check after the repair is clean. */
START_TEST(regression_writer_killed_inside_a_free_is_repaired)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	ck_assert_int_eq(put(&f, 100, 4 * MiB, 100, 1), 0);
	const char *points[] = { "heap.free.marked", "heap.free.merge", "seg.free.data" };
	for (unsigned k = 0; k < sizeof(points) / sizeof(points[0]); k++) {
		for (int nth = 1; nth <= 3; nth++) {
			pid_t pid = fork();
			ck_assert_int_ge(pid, 0);
			if (pid == 0) {
				fx_reopen_in_child(&f);
				char spec[64];
				snprintf(spec, sizeof(spec), "%s@%d", points[k], nth);
				sc_fault_arm(spec);
				for (int32_t i = 0; i < 4; i++) {
					put(&f, 1000 + 100 * i, 6 * MiB, 300 + (uint64_t)i, 2);
					(void)sc_l2_remove(f.st, key_of(&f, 1000 + 100 * i));
					reclaim(&f);
				}
				_exit(0);
			}
			int ws;
			waitpid(pid, &ws, 0);
			if (!WIFSIGNALED(ws))
				continue; /* fewer frees than nth: nothing to check */
			struct sc_fsck_report rep;
			char msg[256] = "";
			int left = sc_arena_fsck(f.a, SC_FSCK_REPAIR | SC_FSCK_DEEP, finding_cb, msg, &rep);
			ck_assert_msg(left == 0, "%s@%d: repair left %d (%s)", points[k], nth, left, msg);
			ck_assert_msg(rep.leaked_bytes < (1ull << 40), "%s@%d: leaked_bytes %llu", points[k], nth,
				      (unsigned long long)rep.leaked_bytes);
			ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
			ck_assert_uint_eq(rep.problems, 0);
			struct sc_lease l;
			ck_assert_msg(lease(&f, 100, &l) == 0, "%s@%d: the intact entry was kept", points[k], nth);
			sc_lease_release(&l);
			ck_assert_int_eq(put(&f, 5000, 5 * MiB, 7, 3), 0);
			ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 5000)), 0);
			reclaim(&f);
		}
	}
	fx_close(&f);
}
END_TEST

START_TEST(fsck_finds_and_repairs_wrong_reference_counts)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	two_turns(&f);
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(f.a, 0, NULL, NULL, &rep), 0);
	struct shm_segtab *t = l2_segtab(f.a);
	uint32_t bumped = 0, zeroed = 0;
	for (uint32_t k = 0; k < t->nslots; k++) {
		if (t->slot[k].state != SHM_SEG_LIVE)
			continue;
		if (t->slot[k].refs == 2 && !bumped) {
			t->slot[k].refs = 9;  /* too many: would never be freed */
			bumped++;
		} else if (t->slot[k].refs == 1 && !zeroed) {
			t->slot[k].refs = 0;  /* too few: would be freed under B */
			zeroed++;
		}
	}
	ck_assert_uint_eq(bumped, 1);
	ck_assert_uint_eq(zeroed, 1);
	char msg[256] = "";
	ck_assert_int_gt(sc_arena_fsck(f.a, 0, finding_cb, msg, &rep), 0);
	ck_assert_uint_eq(rep.problems, 1);
	ck_assert_msg(strstr(msg, "segments: 2 segment reference counts are wrong") != NULL, "%s", msg);
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_int_eq(sc_arena_fsck(f.a, 0, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(rep.problems, 0);
	/* the repaired counts free exactly when the last reference goes */
	uint64_t s0 = stats(&f).segments;
	ck_assert_uint_eq(s0, 6);
	ck_assert_int_eq(sc_l2_remove(f.st, key_of(&f, 200)), 0);
	reclaim(&f);
	ck_assert_uint_eq(stats(&f).segments, 4);
	turn_one_intact(&f);
	fx_close(&f);
}
END_TEST

START_TEST(hostile_segment_records_are_refused)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	two_turns(&f);
	struct sc_lease l;
	ck_assert_int_eq(lease(&f, 200, &l), 0);
	struct shm_seg_rec *r = (struct shm_seg_rec *)(void *)(f.a->shm->base + l.private_spare_[0]);
	struct shm_seg_piece saved = r->p[0];
	r->p[0].at = f.a->shm->size - 16;   /* outside the heap */
	uint8_t *buf = malloc(7 * MiB);
	ck_assert_int_eq(sc_lease_copy(&l, buf, 7 * MiB), -EBADMSG);
	ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), -EBADMSG);
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = 200 + i;
	r->p[0].at = 1ull << 40;            /* far past the mapping: the copy path reads nothing there */
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, 7 * MiB, NULL), -EBADMSG);
	r->p[0] = saved;
	/* a piece that ends exactly at the heap's end is in bounds (the heap's last block may hold
	 * it): its bytes copied into the heap's last, free, bytes */
	uint64_t hn;
	uint8_t *heap = shm_region(f.a->shm, SHM_REGION_HEAP, &hn);
	ck_assert_uint_lt(heap_used(&f) + 2 * saved.len, hn);
	uint64_t end_at = (uint64_t)(heap - f.a->shm->base) + hn - saved.len;
	memcpy(f.a->shm->base + end_at, f.a->shm->base + saved.at, saved.len);
	r->p[0].at = end_at;
	struct sc_segment sg[16];
	ck_assert_int_gt(sc_lease_segments(&l, sg, 16), 0);
	ck_assert_ptr_eq(sg[0].ptr, f.a->shm->base + end_at);
	lease_is(&f, &l, 6 * MiB, 300, 2);
	r->p[0] = saved;
	r->p[0].len += 1;                   /* pieces no longer sum to the sections */
	ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), -EBADMSG);
	r->p[0] = saved;
	/* under the held lease: the record unreadable (no magic), or its wire not the sections' sum
	 * though its pieces still are */
	uint64_t m0 = r->magic;
	r->magic = 0;
	ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), -EBADMSG);
	ck_assert_int_eq(sc_lease_copy(&l, buf, 7 * MiB), -EBADMSG);
	r->magic = m0;
	r->wire += 64;
	ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), -EBADMSG);
	ck_assert_int_eq(sc_lease_copy(&l, buf, 7 * MiB), -EBADMSG);
	r->wire -= 64;
	ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), 7);
	/* a piece below the heap (in the arena's own header), one on the heap's unit past its end, one
	 * of a third section: refused by sc_lease_segments too */
	struct shm_index *hix = l2_ix(f.a);
	const uint64_t bad_at[] = { 64, hix->heap_lo + ((hix->heap_hi - hix->heap_lo) | 63) + 1 };
	for (int i = 0; i < 2; i++) {
		r->p[0].at = bad_at[i];
		ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), -EBADMSG);
		r->p[0] = saved;
	}
	r->p[0].section = 2;
	ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), -EBADMSG);
	r->p[0] = saved;
	ck_assert_int_eq(sc_lease_segments(&l, NULL, 0), 7);
	/* and by the copy without a lease: a piece below the heap, one that runs 64 bytes past its
	 * end, and a last piece longer than what is left of the wire (into a buffer of exactly the
	 * wire) */
	uint64_t wire = 6 * MiB + 300;
	uint8_t *exact = malloc(wire);
	/* (a piece below the heap is refused before any byte is copied: the entry is not counted as
	 * hit, as it would be by a copy that then failed the digest) */
	const struct shm_index_entry *e2 = sc_test_l2_entry(f.a, key_of(&f, 200));
	ck_assert_ptr_nonnull(e2);
	uint32_t freq = atomic_load(&e2->freq);
	ck_assert_uint_lt(freq, 2); /* room for a hit to show */
	r->p[0].at = 64;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, exact, wire, NULL), -EBADMSG);
	ck_assert_uint_eq(atomic_load(&e2->freq), freq);
	r->p[0].at = hix->heap_hi - saved.len + 64;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, exact, wire, NULL), -EBADMSG);
	r->p[0] = saved;
	struct shm_seg_piece last = r->p[r->npieces - 1];
	r->p[r->npieces - 1].len += 64;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, exact, wire, NULL), -EBADMSG);
	r->p[r->npieces - 1] = last;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, exact, wire, NULL), (int64_t)wire);
	free(exact);
	uint32_t np = r->npieces;
	r->npieces = 1u << 30;              /* beyond any record */
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, 7 * MiB, NULL), -EBADMSG);
	r->npieces = np;
	uint64_t m = r->magic;
	r->magic = 0;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, 7 * MiB, NULL), -EBADMSG);
	r->magic = m;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, 7 * MiB, NULL), (int64_t)(6 * MiB + 300));
	/* a record that names another data block than its entry does */
	uint64_t data = r->data;
	r->data += 64;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, 7 * MiB, NULL), -EBADMSG);
	r->data = data;
	sc_lease_release(&l);
	/* turn 1's record is contiguous (all its bytes in its own block): one whose wire or local bytes
	 * disagree with its entry's sections is refused, though its entry's block holds every byte */
	for (int i = 0; i < 8; i++)
		t[i] = 100 + i;
	const struct shm_index_entry *e = sc_test_l2_entry(f.a, key_of(&f, 100));
	ck_assert_ptr_nonnull(e);
	ck_assert(e->meta & SHM_META_SEG);
	r = (struct shm_seg_rec *)(void *)(f.a->shm->base + l2_ix(f.a)->heap_lo + 64ull * e->seg_rec);
	ck_assert_uint_eq(r->magic, SHM_SEG_REC_MAGIC);
	ck_assert(r->flags & SHM_SEG_CONTIG);
	ck_assert_uint_eq(r->local, 4 * MiB + 100);
	ck_assert_uint_eq(r->wire, 4 * MiB + 100);
	r->wire += 64; /* (still no fewer than its local bytes) */
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, 7 * MiB, NULL), -EBADMSG);
	r->wire -= 64;
	r->local -= 64;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, 7 * MiB, NULL), -EBADMSG);
	r->local += 64;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, buf, 7 * MiB, NULL), (int64_t)(4 * MiB + 100));
	free(buf);
	fx_close(&f);
}
END_TEST

/* Turn 2's index entry and segment record (scattered: 7 pieces, the first four in turn 1's
 * contiguous block), saved so that a test can forge them and put them back. */
struct turn2 {
	struct shm_index_entry *e;
	struct shm_seg_rec *r;
	uint64_t heap_lo, heap_hi;
	uint32_t meta;
	uint64_t sec_len[2], payload_off;
	uint8_t rec[64 + 7 * 32];
};

static void turn2_get(struct fx *f, struct turn2 *g)
{
	struct shm_segtab *t = l2_segtab(f->a);
	g->e = sc_test_l2_entry(f->a, key_of(f, 200));
	ck_assert_ptr_nonnull(g->e);
	ck_assert(g->e->meta & SHM_META_SEG);
	g->r = (struct shm_seg_rec *)(uintptr_t)shm_seg_rec_at(t, t->heap_lo + 64ull * g->e->seg_rec);
	ck_assert_ptr_nonnull(g->r);
	ck_assert(!(g->r->flags & SHM_SEG_CONTIG));
	ck_assert_uint_eq(g->r->npieces, 7);
	ck_assert_uint_eq(shm_seg_rec_bytes(7), sizeof(g->rec));
	g->heap_lo = t->heap_lo;
	g->heap_hi = t->heap_hi;
	g->meta = g->e->meta;
	g->sec_len[0] = g->e->sec_len[0];
	g->sec_len[1] = g->e->sec_len[1];
	g->payload_off = g->e->payload_off;
	memcpy(g->rec, g->r, sizeof(g->rec));
}

static void turn2_put_back(struct turn2 *g)
{
	g->e->meta = g->meta;
	g->e->sec_len[0] = g->sec_len[0];
	g->e->sec_len[1] = g->sec_len[1];
	g->e->payload_off = g->payload_off;
	memcpy(g->r, g->rec, sizeof(g->rec));
}

/* Turn 2's first two pieces (turn 1's first two segments, adjacent in its block) made one: the
 * same wire in 6 pieces, and @extra as the 7th (its last). */
static void turn2_merge_first_two(struct turn2 *g, struct shm_seg_piece extra)
{
	struct shm_seg_rec *r = g->r;
	memcpy(r, g->rec, sizeof(g->rec));
	ck_assert_uint_eq(r->p[0].at + r->p[0].len, r->p[1].at);
	ck_assert_uint_eq(r->p[0].section, r->p[1].section);
	r->p[0].len += r->p[1].len;
	r->p[0].slot = SHM_SEG_NONE;
	memmove(&r->p[1], &r->p[2], 5 * sizeof(r->p[0]));
	r->p[6] = extra;
}

/* The bounds of a segment record's pieces are the heap's own, both ends included: a piece whose
 * bytes start at the heap's first byte is listed and copied from there, and an empty piece at the
 * heap's very end is listed; an empty piece of a third section is refused (the section alone says
 * it is bad). Each is read under a held lease (sc_lease_segments, sc_lease_copy). */
START_TEST(a_records_pieces_may_lie_at_either_end_of_the_heap)
{
	struct fx f;
	fx_open_two_turns(&f);
	struct turn2 g;
	turn2_get(&f, &g);
	struct sc_lease l;
	ck_assert_int_eq(lease(&f, 200, &l), 0);
	ck_assert_uint_eq(l.segments, 7);
	const uint64_t wire = 6 * MiB + 300;
	uint8_t *buf = malloc(wire);
	struct sc_segment sg[7];
	/* the tail (its last piece, 300 bytes) read from the heap's first byte */
	struct shm_seg_piece *tail = &g.r->p[6];
	ck_assert_uint_eq(tail->len, 300);
	tail->at = g.heap_lo;
	ck_assert_int_eq(sc_lease_segments(&l, sg, 7), 7);
	ck_assert_ptr_eq(sg[6].ptr, f.a->shm->base + g.heap_lo);
	ck_assert_int_eq(sc_lease_copy(&l, buf, wire), (int64_t)wire);
	ck_assert(memcmp(buf, f.base, 6 * MiB) == 0);
	ck_assert(memcmp(buf + 6 * MiB, f.a->shm->base + g.heap_lo, 300) == 0);
	/* an empty last piece at the heap's end (the first two pieces merged to make its place) */
	turn2_merge_first_two(&g, (struct shm_seg_piece){ .at = g.heap_hi, .len = 0, .slot = SHM_SEG_NONE });
	ck_assert_int_eq(sc_lease_segments(&l, sg, 7), 7);
	ck_assert_ptr_eq(sg[6].ptr, f.a->shm->base + g.heap_hi);
	ck_assert_uint_eq(sg[6].len, 0);
	lease_is(&f, &l, 6 * MiB, 300, 2);
	/* an empty piece of section 2, inside the heap: refused */
	turn2_merge_first_two(&g, (struct shm_seg_piece){ .at = g.heap_lo, .len = 0, .slot = SHM_SEG_NONE,
							 .section = 2 });
	ck_assert_int_eq(sc_lease_segments(&l, sg, 7), -EBADMSG);
	ck_assert_int_eq(sc_lease_copy(&l, buf, wire), -EBADMSG);
	g.r->p[6].section = 0;
	ck_assert_int_eq(sc_lease_segments(&l, sg, 7), 7);
	turn2_put_back(&g);
	lease_is(&f, &l, 6 * MiB, 300, 2);
	sc_lease_release(&l);
	free(buf);
	fx_close(&f);
}
END_TEST

/* Turn 2's record made two pieces summing to @wire in section @sec: the whole heap, then its
 * first heap_lo bytes again (both in bounds). */
static void turn2_two_pieces(struct turn2 *g, uint64_t wire, uint32_t sec)
{
	ck_assert_uint_eq(wire, g->heap_hi);
	ck_assert_uint_lt(g->heap_lo, g->heap_hi - g->heap_lo);
	g->r->npieces = 2;
	g->r->wire = wire;
	g->r->p[0] = (struct shm_seg_piece){ .at = g->heap_lo, .len = g->heap_hi - g->heap_lo, .slot = SHM_SEG_NONE,
					     .section = sec };
	g->r->p[1] = (struct shm_seg_piece){ .at = g->heap_lo, .len = g->heap_lo, .slot = SHM_SEG_NONE, .section = sec };
}

/* A lease of turn 2 (its tokens compared) lists @n pieces that make @wire bytes. */
static void turn2_leased(struct fx *f, int n, uint64_t wire)
{
	struct sc_lease l;
	struct sc_segment sg[8];
	ck_assert_int_eq(lease(f, 200, &l), 0);
	ck_assert_uint_eq(l.sec_len[0] + l.sec_len[1], wire);
	ck_assert_int_eq(sc_lease_segments(&l, sg, 8), n);
	uint64_t sum = 0;
	for (int i = 0; i < n; i++)
		sum += sg[i].len;
	ck_assert_uint_eq(sum, wire);
	sc_lease_release(&l);
}

/* The bounds of a segmented entry are the heap's own, its end included: a scattered entry's
 * section may be as long as the heap's end offset (its bytes are the record's pieces, which may
 * repeat: not its data block's), section 0 of any kind or section 1 of KV_RECURRENT; and an entry
 * all of whose pieces are stored elsewhere (no local bytes, no token ids) may name the heap's end
 * as its empty data block, and is read whole from its pieces. */
START_TEST(a_scattered_entrys_sections_and_data_block_may_reach_the_heaps_end)
{
	struct fx f;
	fx_open_two_turns(&f);
	struct turn2 g;
	turn2_get(&f, &g);
	/* section 0 of heap_hi bytes */
	turn2_two_pieces(&g, g.heap_hi, 0);
	g.e->sec_len[0] = g.heap_hi;
	turn2_leased(&f, 2, g.heap_hi);
	/* section 1 of heap_hi bytes (section 0 empty: a KV_RECURRENT entry without KV) */
	turn2_two_pieces(&g, g.heap_hi, 1);
	g.e->sec_len[0] = 0;
	g.e->sec_len[1] = g.heap_hi;
	g.e->meta = (g.meta & ~0xffu) | SC_PAYLOAD_KV_RECURRENT;
	ck_assert(!SHM_META_HAS_DESC(g.e->meta));
	turn2_leased(&f, 2, g.heap_hi);
	turn2_put_back(&g);
	/* the data block at the heap's end, empty: every piece read from where it is; the entry
	 * without token ids (looked up by key alone) */
	ck_assert(shm_heap_alloc_off_ok(g.heap_hi - g.heap_lo));
	g.e->meta &= ~L2_META_TOKENS;
	g.e->payload_off = g.heap_hi;
	g.r->data = g.heap_hi;
	g.r->local = 0;
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get_key(f.st, key_of(&f, 200), &l), 0);
	ck_assert_uint_eq(l.segments, 7);
	lease_is(&f, &l, 6 * MiB, 300, 2);
	sc_lease_release(&l);
	turn2_put_back(&g);
	turn2_leased(&f, 7, 6 * MiB + 300);
	fx_close(&f);
}
END_TEST

/* A segment copied out of L2 by an L3 fill (l2_seg_copy_held) may lie anywhere in the heap, both
 * ends included: turn 1's first segment's table slot moved to the heap's first byte, then to end
 * exactly at the heap's end, is copied from there (the caller checks the bytes against the name);
 * one 64 bytes further is past the heap: not held. */
START_TEST(a_held_segment_may_lie_at_either_end_of_the_heap)
{
	struct fx f;
	fx_open_two_turns(&f);
	struct shm_segtab *t = l2_segtab(f.a);
	struct sc_digest d = sc_digest(f.base, SEG);
	ck_assert_int_eq(shm_seg_lock(t), 0);
	int64_t k = shm_seg_find_locked(t, d.lo, d.hi, SEG);
	shm_seg_unlock(t);
	ck_assert_int_ge(k, 0);
	struct shm_seg_slot *s = &t->slot[k];
	uint64_t off = s->off;
	uint8_t *buf = malloc(SEG);
	ck_assert_int_eq(l2_seg_copy_held(f.a, d.lo, d.hi, SEG, buf), 1);
	ck_assert(memcmp(buf, f.base, SEG) == 0);
	ck_assert_uint_ge(t->heap_hi - t->heap_lo, SEG + 64);
	const uint64_t at[3] = { t->heap_lo, t->heap_hi - SEG, t->heap_hi - SEG + 64 };
	for (int i = 0; i < 3; i++) {
		s->off = at[i];
		memset(buf, 0, SEG);
		ck_assert_int_eq(l2_seg_copy_held(f.a, d.lo, d.hi, SEG, buf), i < 2);
		if (i < 2)
			ck_assert(memcmp(buf, f.a->shm->base + at[i], SEG) == 0);
	}
	s->off = off;
	turn_one_intact(&f);
	free(buf);
	fx_close(&f);
}
END_TEST

/* A payload is cut into at most SHM_SEG_MAX_PIECES pieces: in an arena of the smallest segments,
 * one of exactly that many whole segments (4 GiB, address space only: the zero page) is planned
 * into them, each named by the digest of a zero segment; one byte more in section 1 (one piece
 * more) is not cut at all: l2_seg_plan says 1, the admit stores such a payload whole. */
START_TEST(a_payload_of_the_most_pieces_is_cut_one_more_is_stored_whole)
{
	struct fx f;
	fx_open_seg(&f, SC_SEGMENT_MIN);
	const uint64_t S = l2_segtab(f.a)->seg_bytes, n = (uint64_t)SHM_SEG_MAX_PIECES * S;
	ck_assert_uint_eq(S, SHM_SEG_MIN_BYTES);
	uint8_t *zero = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (zero == MAP_FAILED) {
		sc_skip("no 4 GiB of address space here");
		fx_close(&f);
		return;
	}
	(void)madvise(zero, n, MADV_HUGEPAGE); /* read through the huge zero page: fewer faults */
	struct sc_payload p = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { zero, zero }, .sec_len = { n, 1 } };
	struct sc_digest d;
	struct l2_seg_plan pl;
	ck_assert_int_eq(l2_seg_plan(f.a, &p, &d, &pl), 1);
	ck_assert_ptr_null(pl.pc);
	p.sec_len[1] = 0;
	ck_assert_int_eq(l2_seg_plan(f.a, &p, &d, &pl), 0);
	ck_assert_uint_eq(pl.np, SHM_SEG_MAX_PIECES);
	struct sc_digest z = sc_digest(zero, S);
	for (uint32_t i = 0; i < pl.np; i += pl.np - 1) {
		ck_assert_uint_eq(pl.pc[i].len, S);
		ck_assert_uint_eq(pl.pc[i].section, 0);
		ck_assert_uint_eq(pl.dg[i][0], z.lo);
		ck_assert_uint_eq(pl.dg[i][1], z.hi);
	}
	l2_seg_plan_free(&pl);
	munmap(zero, n);
	fx_close(&f);
}
END_TEST

/* l2_seg_index_fill of a block of @pieces pieces (whole segments, and @tail bytes in section 1),
 * which it never reads unless it indexes it: its answer, having allocated nothing (the heap's use
 * is not measured in a forked child: its handle is the parent's). */
static int index_fill_of(struct fx *f, uint64_t pieces, uint64_t tail)
{
	int child = f->a->shm->forked;
	uint64_t S = l2_segtab(f->a)->seg_bytes, rec_off = 1, fp = 1, used = child ? 0 : heap_used(f);
	uint64_t(*dg)[2] = (void *)&rec_off;
	int rc = l2_seg_index_fill(f->a, key_of(f, 500), l2_ix(f->a)->heap_lo + SHM_HEAP_HDR_BYTES + 64, pieces * S,
				   tail, &rec_off, &dg, &fp);
	ck_assert_uint_eq(rec_off, 0);
	ck_assert_ptr_null(dg);
	ck_assert_uint_eq(fp, 0);
	if (!child)
		ck_assert_uint_eq(heap_used(f), used);
	return rc;
}

/* A published fill's segments are indexed only up to SHM_SEG_MAX_PIECES pieces: one more is
 * refused (-E2BIG: stored plain) before anything else; exactly that many goes on to allocate its
 * record (refused here by a budget below it: -ENOSPC) — and, without memory for their digests,
 * is refused (-ENOMEM) before it allocates anything. The block (4 or 64 GiB) is never read. */
START_TEST(a_fill_of_the_most_pieces_is_indexed_one_more_is_not)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, heap_used(&f) + (64u << 10)), 0);
	ck_assert_uint_gt(shm_heap_footprint(shm_seg_rec_bytes(SHM_SEG_MAX_PIECES)), 64u << 10);
	ck_assert_int_eq(index_fill_of(&f, SHM_SEG_MAX_PIECES, 1), -E2BIG);
	ck_assert_int_eq(index_fill_of(&f, SHM_SEG_MAX_PIECES, 0), -ENOSPC);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* a fixed mmap threshold: the digests' 1 MiB is mapped anew, which the limit refuses */
		if (!mallopt(M_MMAP_THRESHOLD, 128 << 10) || !mallopt(M_TRIM_THRESHOLD, 128 << 10))
			_exit(7);
		malloc_trim(0);
		if (sc_test_limit_vm(256u << 10))
			_exit(4);
		void *probe = malloc(SHM_SEG_MAX_PIECES * 16);
		if (probe)
			_exit(5);
		_exit(index_fill_of(&f, SHM_SEG_MAX_PIECES, 0) == -ENOMEM ? 0 : 6);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "without memory: %s %d (0: -ENOMEM; 5: the digests' memory was there; 6: another answer; a "
		      "signal: crash)",
		      WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	fx_close(&f);
}
END_TEST

static struct fx *sched_fx;
static void remove_a_when_planned(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "seg.admit.planned") || !sched_fx)
		return;
	struct fx *f = sched_fx;
	sched_fx = NULL; /* once */
	ck_assert_int_eq(sc_l2_remove(f->st, key_of(f, 100)), 0);
	reclaim(f);
}

START_TEST(segments_released_between_lookup_and_commit)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	ck_assert_int_eq(put(&f, 100, 4 * MiB, 100, 1), 0);
	sched_fx = &f;
	sc_sched_set(remove_a_when_planned, NULL);
	ck_assert_int_eq(put(&f, 200, 6 * MiB, 300, 2), 0); /* found A's segments, A went, B stored whole */
	sc_sched_set(NULL, NULL);
	struct sc_l2_stats s = stats(&f);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.physical_bytes, 6 * MiB + 300);
	ck_assert_uint_eq(s.segments, 6);
	struct sc_lease l;
	ck_assert_int_eq(lease(&f, 200, &l), 0);
	ck_assert_uint_eq(l.segments, 0);
	lease_is(&f, &l, 6 * MiB, 300, 2);
	sc_lease_release(&l);
	char msg[256] = "";
	ck_assert_msg(sc_arena_fsck(f.a, SC_FSCK_DEEP, finding_cb, msg, NULL) == 0, "%s", msg);
	fx_close(&f);
}
END_TEST

static int planned_calls;
static void renew_a_when_planned(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "seg.admit.planned") || !sched_fx)
		return;
	struct fx *f = sched_fx;
	if (++planned_calls > 2)
		return;
	/* A goes and comes back: the same segments, indexed again under new generations (A's own
	 * admission passes the point too: not counted) */
	sched_fx = NULL;
	ck_assert_int_eq(sc_l2_remove(f->st, key_of(f, 100)), 0);
	reclaim(f);
	ck_assert_int_eq(put(f, 100, 4 * MiB, 100, 1), 0);
	sched_fx = f;
}

/* An admission whose planned segments go (and come back) under it twice plans no third time: it
 * stores the payload whole. Here A is removed and admitted again at each of B's plans, so each
 * hold finds A's segments under new generations. */
START_TEST(segments_renewed_under_two_plans_have_the_payload_stored_whole)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	ck_assert_int_eq(put(&f, 100, 4 * MiB, 100, 1), 0);
	sched_fx = &f;
	planned_calls = 0;
	sc_sched_set(renew_a_when_planned, NULL);
	ck_assert_int_eq(put(&f, 200, 6 * MiB, 300, 2), 0);
	sc_sched_set(NULL, NULL);
	sched_fx = NULL;
	ck_assert_int_eq(planned_calls, 2);
	struct sc_lease l;
	ck_assert_int_eq(lease(&f, 200, &l), 0);
	ck_assert_uint_eq(l.segments, 0); /* whole */
	lease_is(&f, &l, 6 * MiB, 300, 2);
	sc_lease_release(&l);
	turn_one_intact(&f);
	char msg[256] = "";
	ck_assert_msg(sc_arena_fsck(f.a, SC_FSCK_DEEP, finding_cb, msg, NULL) == 0, "%s", msg);
	fx_close(&f);
}
END_TEST

/* The heap's header scribbled (every heap call refuses) once the admission has popped an index
 * entry ("l2.commit.popped"), between its allocations and its tagging of the blocks: the
 * admission is refused as damaged, its index entry goes back on the shard's free list (the test
 * build checks that the shard is still held when it does), and with the header back the same
 * admission succeeds. A payload of two segments (its record's block is tagged first) and one of a
 * page (its data block only). */
static struct {
	struct sc_arena *a;
	uint32_t shard;
	int fired;
	uint8_t saved[64];
} scrib;

static uint8_t *heap_header(struct sc_arena *a)
{
	return a->shm->base + a->shm->hv.regions[SHM_REGION_HEAP].off;
}

static void scribble_once_popped(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "l2.commit.popped") || scrib.fired)
		return;
	memcpy(scrib.saved, heap_header(scrib.a), sizeof(scrib.saved));
	memset(heap_header(scrib.a), 0xff, sizeof(scrib.saved));
	scrib.fired = 1;
}

START_TEST(an_admission_whose_blocks_cannot_be_tagged_is_refused_and_gives_its_index_entry_back)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	struct shm_index *ix = l2_ix(f.a);
	const uint64_t sizes[2] = { 2 * MiB, 4096 };
	for (int i = 0; i < 2; i++) {
		int32_t tok = 300 + 10 * i;
		scrib.a = f.a;
		scrib.shard = shm_index_shard_of_bucket(shm_index_bucket(ix, key_of(&f, tok).lo));
		scrib.fired = 0;
		uint32_t head = ix->hdr->shards[scrib.shard].free_head;
		ck_assert_uint_ne(head, 0);
		sc_sched_set(scribble_once_popped, NULL);
		int rc = put(&f, tok, sizes[i], 100, 3);
		sc_sched_set(NULL, NULL);
		ck_assert(scrib.fired);
		memcpy(heap_header(f.a), scrib.saved, sizeof(scrib.saved));
		ck_assert_msg(rc == -EBADMSG, "size %llu: %s", (unsigned long long)sizes[i], sc_strerror(rc));
		ck_assert_uint_eq(ix->hdr->shards[scrib.shard].free_head, head);
		struct sc_lease l;
		ck_assert_int_eq(lease(&f, tok, &l), -ENOENT);
		ck_assert_int_eq(put(&f, tok, sizes[i], 100, 3), 0);
		ck_assert_int_eq(lease(&f, tok, &l), 0);
		lease_is(&f, &l, sizes[i], 100, 3);
		sc_lease_release(&l);
	}
	fx_close(&f);
}
END_TEST

/* The points of a commit in their order: a writer killed at the fault point "l2.admit.popped" dies
 * before its schedule point "l2.commit.popped" (what a test parks or scribbles there has not
 * happened), one killed at "l2.admit.tagged" passed that schedule point once; either way the next
 * writer repairs what it left and the killed writer's entry is not there. */
static volatile uint32_t *commit_popped_seen; /* a MAP_SHARED counter: the parent reads it */
static void count_commit_popped(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "l2.commit.popped"))
		__atomic_add_fetch(commit_popped_seen, 1, __ATOMIC_SEQ_CST);
}

START_TEST(a_writer_killed_at_admit_popped_has_not_reached_the_commits_schedule_point)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	commit_popped_seen = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert(commit_popped_seen != MAP_FAILED);
	const char *points[2] = { "l2.admit.popped", "l2.admit.tagged" };
	for (uint32_t k = 0; k < 2; k++) {
		*commit_popped_seen = 0;
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			fx_reopen_in_child(&f);
			sc_sched_set(count_commit_popped, NULL);
			sc_fault_arm(points[k]);
			put(&f, 100 + 100 * (int32_t)k, 2 * MiB, 100, 1);
			_exit(0);
		}
		sc_test_wait_killed(pid);
		ck_assert_msg(*commit_popped_seen == k, "%s: the schedule point was passed %u times", points[k],
			      *commit_popped_seen);
		l2_reap(f.a, 1);
		ck_assert_int_eq(put(&f, 1000 + (int32_t)k, 2 * MiB, 100, 1), 0);
		struct sc_lease l;
		ck_assert_int_eq(lease(&f, 100 + 100 * (int32_t)k, &l), -ENOENT);
	}
	munmap((void *)commit_popped_seen, 4096);
	fx_close(&f);
}
END_TEST

/* A copy of a scattered entry whose record a writer empties (no pieces, no bytes, a well-formed
 * record otherwise) after the lookup validated it (the hook at "l2.get.found", between the two)
 * is refused as damaged, never answered as a copy of 0 bytes. */
static struct shm_seg_rec *emptied;
static void empty_record_hook(const char *point, void *ctx)
{
	struct shm_seg_rec *r = ctx;
	if (strcmp(point, "l2.get.found") || emptied)
		return;
	r->npieces = 0;
	r->wire = 0;
	r->local = 0;
	emptied = r;
}

START_TEST(a_record_emptied_under_a_copy_is_refused)
{
	struct fx f;
	fx_open_two_turns(&f);
	struct shm_index_entry *e = sc_test_l2_entry(f.a, key_of(&f, 200));
	ck_assert_ptr_nonnull(e);
	ck_assert(e->meta & SHM_META_SEG);
	struct shm_segtab *t = l2_segtab(f.a);
	struct shm_seg_rec *r = (struct shm_seg_rec *)(uintptr_t)shm_seg_rec_at(t, t->heap_lo + 64ull * e->seg_rec);
	ck_assert_ptr_nonnull(r);
	ck_assert(!(r->flags & SHM_SEG_CONTIG)); /* turn 2 shares turn 1's segments: scattered */
	int32_t tk[8];
	for (int i = 0; i < 8; i++)
		tk[i] = 200 + i;
	uint64_t wire = r->wire;
	uint8_t *buf = malloc(wire);
	sc_sched_set(empty_record_hook, r);
	int64_t rc = sc_l2_get_copy(f.st, "ns", tk, 8, NULL, buf, wire, NULL);
	sc_sched_set(NULL, NULL);
	ck_assert_ptr_eq(emptied, r);
	ck_assert_int_eq(rc, -EBADMSG);
	free(buf);
	fx_close(&f);
}
END_TEST

#define run sc_test_sh
static void run_rm(const char *dir);

/* sc_restore served from a scattered L2 entry: the sections are a private copy (in_arena 0), the
 * bytes exact, and nothing stays leased. */
START_TEST(restore_from_a_scattered_entry)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	char dir[] = "/var/tmp/sc-segrs-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_bind_arena(l3, f.a), 0);
	int32_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = 200 + i;
	uint64_t sz[2] = { 4 * MiB + 100, 6 * MiB + 300 };
	uint8_t *buf[2];
	for (int k = 0; k < 2; k++) {
		buf[k] = malloc(sz[k]);
		memcpy(buf[k], f.base, sz[k] - (k ? 300 : 100));
		fill(buf[k] + sz[k] - (k ? 300 : 100), k ? 300 : 100, (uint32_t)k + 1);
		struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf[k] }, .sec_len = { sz[k] } };
		struct sc_l3_put_args pa = { .model_identity = "model-A", .state_identity = "state-1", .ns = "ns",
					     .tokens = t, .token_count = 4u + 4u * (uint32_t)k, .payload = &pl };
		struct sc_location loc;
		ck_assert_int_eq(sc_l3_put(l3, &pa, &loc), 0);
		ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4u + 4u * (uint32_t)k, sc_digest(buf[k], sz[k]), &pl, 0), 0);
	}
	struct sc_restore r;
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(sc_restore(f.st, l3, "ns", t, 8, 0, &r), 8);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L2);
	ck_assert_int_eq(r.in_arena, 0);
	ck_assert_uint_eq(r.sec_len[0], sz[1]);
	ck_assert(memcmp(r.sec[0], buf[1], sz[1]) == 0);
	sc_restore_release(&r);
	ck_assert_uint_eq(stats(&f).leases, 0);
	sc_l3_close(l3);
	run_rm(dir);
	free(buf[0]);
	free(buf[1]);
	fx_close(&f);
}
END_TEST

static void run_rm(const char *dir)
{
	(void)run("rm -rf %s", dir);
}

/* The command, or NULL (the SKIP said) when it is not built. */
static const char *cli_bin(void)
{
	const char *bin = "build/stagecache";
	if (!access(bin, X_OK))
		return bin;
	sc_skip("%s not built (run make first)", bin);
	return NULL;
}

/* The CLI on a segmented arena: create --segment-bytes, put a prefix and its extension, get the
 * scattered one back byte for byte, stats shows the saving, restore serves it contiguous. */
START_TEST(cli_round_trip_of_a_scattered_entry)
{
	const char *bin = cli_bin();
	if (!bin)
		return;
	const char *name = sc_test_name("segcli");
	char dir[] = "/tmp/sc-segcli-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(run("%s create %s --size 64M --huge off --segment-bytes 3M >/dev/null 2>&1", bin, name), 2);
	ck_assert_int_eq(run("%s create %s --size 64M --huge off --segment-bytes 1M >/dev/null", bin, name), 0);
	const char *q = "--model m --state s --ns n";
	ck_assert_int_eq(run("head -c 6291456 /dev/urandom > %s/b && head -c 4194304 %s/b > %s/a", dir, dir, dir), 0);
	ck_assert_int_eq(run("%s put %s %s --tokens 1,2 --kind full_state --file %s/a >/dev/null", bin, name, q, dir), 0);
	ck_assert_int_eq(run("%s put %s %s --tokens 1,2,3 --kind full_state --file %s/b >/dev/null", bin, name, q, dir), 0);
	ck_assert_int_eq(run("%s get %s %s --tokens 1,2,3 --out %s/out >/dev/null", bin, name, q, dir), 0);
	ck_assert_int_eq(run("cmp -s %s/b %s/out", dir, dir), 0);
	ck_assert_int_eq(run("%s stats %s --json | grep -q '\"saved_bytes\":4194304'", bin, name), 0);
	ck_assert_int_eq(run("%s stats %s --json | grep -q '\"physical_bytes\":6291456'", bin, name), 0);
	ck_assert_int_eq(run("%s fsck %s --deep >/dev/null", bin, name), 0);
	run("%s destroy %s >/dev/null 2>&1; rm -rf %s", bin, name, dir);
}
END_TEST

/* A segmented admission digests the payload from the hashing state before it frees that state:
 * under a malloc that poisons every block it frees (glibc's perturb byte, its per-thread cache off
 * so that no free skips the poisoning), the CLI puts a payload of whole segments and a tail and
 * gets it back byte for byte. */
START_TEST(a_segmented_admission_digests_before_it_frees_its_hashing_state)
{
	const char *bin = cli_bin();
	if (!bin)
		return;
	const char *name = sc_test_name("segpert");
	char dir[] = "/tmp/sc-segpert-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	const char *env = "GLIBC_TUNABLES=glibc.malloc.tcache_count=0 MALLOC_PERTURB_=165";
	const char *q = "--model m --state s --ns n --tokens 1,2,3";
	ck_assert_int_eq(run("%s create %s --size 64M --huge off --segment-bytes 1M >/dev/null", bin, name), 0);
	ck_assert_int_eq(run("head -c 3146000 /dev/urandom > %s/a", dir), 0);
	ck_assert_int_eq(run("%s %s put %s %s --kind full_state --file %s/a >/dev/null", env, bin, name, q, dir), 0);
	ck_assert_int_eq(run("%s get %s %s --out %s/out >/dev/null", bin, name, q, dir), 0);
	ck_assert_int_eq(run("cmp -s %s/a %s/out", dir, dir), 0);
	ck_assert_int_eq(run("%s stats %s --json | grep -q '\"segments\":3'", bin, name), 0);
	run("%s destroy %s >/dev/null 2>&1; rm -rf %s", bin, name, dir);
}
END_TEST

START_TEST(bad_segment_options_are_refused)
{
	struct sc_arena *a = NULL;
	const char *name = sc_test_name("segopts");
	uint32_t bad[] = { 3, 4096, (32u << 10), (1u << 20) + 1, 1u << 31 };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .segment_bytes = bad[i] };
		ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	}
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .reserved = { 0, 1 } };
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	ck_assert_ptr_null(a);
}
END_TEST

/* An entry's data block holds its token ids after its bytes, 4 bytes per id: a long prompt
 * (20000 ids, 80 KB) on a short segmented payload, contiguous or scattered, fits its block — the
 * heap stays walkable (fsck clean) and every id compares. */
START_TEST(long_token_lists_fit_their_data_block)
{
	struct fx f;
	fx_open_seg(&f, SEG);
	enum { NT = 20000 };
	int32_t *t = malloc(NT * sizeof(*t));
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < NT; i++)
			t[i] = 50000 * (k + 1) + i;
		uint64_t bytes = 2 * SEG + 1000;
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { f.base }, .sec_len = { bytes } };
		ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, NT, sc_digest(f.base, bytes), &p, SC_ORIGIN_DIRECT), 0);
		ck_assert_int_eq(put(&f, 900 + k, 3000 + (uint64_t)k * 5000, 0, 1), 0); /* a neighbour block */
		struct sc_fsck_report r;
		ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
		struct sc_lease l;
		ck_assert_int_eq(sc_l2_get(f.st, "ns", t, NT, NULL, &l), 0);
		sc_lease_release(&l);
		t[NT - 1] ^= 1; /* the last id decides */
		ck_assert_int_eq(sc_l2_get(f.st, "ns", t, NT, NULL, &l), -ENOENT);
	}
	free(t);
	fx_close(&f);
}
END_TEST

struct scan {
	uint64_t off[4];
	int n;
};

static int scan_cb(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	(void)bytes, (void)tag;
	struct scan *s = ctx;
	if (allocated && s->n < 4)
		s->off[s->n++] = off;
	return 0;
}

/* The recount (crash repair of the segment table's counts) judges nothing from a partial heap walk:
 * when the walk stops part-way it fails, rewrites no count, and turn 1 (whose segments turn 2
 * shares) stays whole once the heap is repaired. */
START_TEST(recount_after_a_partial_heap_walk_changes_nothing)
{
	struct fx f;
	fx_open_two_turns(&f);
	struct shm_segtab t;
	ck_assert_int_eq(l2_ready(f.a), 0);
	ck_assert_int_eq(shm_seg_view(f.a->shm, l2_ix(f.a), &t), 0);
	uint32_t *refs0 = malloc(t.nslots * sizeof(*refs0));
	for (uint32_t i = 0; i < t.nslots; i++)
		refs0[i] = t.slot[i].refs;
	/* the second allocated block's prev_size (derived state) scribbled: the walk stops there */
	struct scan sc = { .n = 0 };
	ck_assert_int_eq(shm_heap_walk(f.a->shm, scan_cb, &sc), 0);
	ck_assert_int_ge(sc.n, 2);
	uint64_t *prev_size = (uint64_t *)(void *)(f.a->shm->base + sc.off[1] - SHM_HEAP_BLOCK_HDR + 8);
	*prev_size += 64;
	ck_assert_int_eq(shm_seg_lock(&t), 0);
	ck_assert_int_lt(shm_seg_recount_locked(&t, 1), 0);
	shm_seg_unlock(&t);
	for (uint32_t i = 0; i < t.nslots; i++)
		ck_assert_uint_eq(t.slot[i].refs, refs0[i]);
	*prev_size -= 64;
	turn_one_intact(&f);
	free(refs0);
	fx_close(&f);
}
END_TEST

Suite *seg_suite(void)
{
	Suite *s = suite_create("seg");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, shared_leading_segments_are_stored_once);
	tcase_add_test(tc, a_payload_of_whole_segments_has_exactly_its_segments);
	tcase_add_test(tc, a_scattered_entry_is_copied_whole_without_a_lease);
	tcase_add_test(tc, lease_segments_writes_no_more_than_asked_or_there_are);
	tcase_add_test(tc, a_scattered_entry_of_two_sections_reads_back_whole);
	tcase_add_test(tc, a_segment_lookup_waits_for_the_tables_lock);
	tcase_add_test(tc, lease_segments_and_copy_refuse_bad_input);
	tcase_add_test(tc, a_plain_entry_counts_its_wire_whatever_its_record_field_holds);
	tcase_add_test(tc, a_forged_segmented_entry_in_an_arena_without_segments_is_refused);
	tcase_add_test(tc, a_segment_in_the_tables_first_slot_is_shared);
	tcase_add_test(tc, long_token_lists_fit_their_data_block);
	tcase_add_test(tc, recount_after_a_partial_heap_walk_changes_nothing);
	tcase_add_test(tc, fsck_sweeps_an_orphaned_segment_record);
	tcase_add_test(tc, fsck_owns_no_segment_record_past_the_table);
	tcase_add_test(tc, fsck_a_record_is_owned_only_by_the_entry_naming_it);
	tcase_add_test(tc, segments_off_and_small_payloads_are_stored_whole);
	tcase_add_test(tc, a_published_fill_is_indexed);
	tcase_add_test(tc, every_reference_keeps_a_shared_segment_until_the_last_goes);
	tcase_add_test(tc, a_shrink_judges_what_is_held_after_its_reclaim);
	tcase_add_test(tc, a_dead_processs_lease_keeps_segments_until_reaped);
	tcase_add_test(tc, a_writer_killed_inside_the_table_is_recounted);
	tcase_add_test(tc, regression_writer_killed_inside_a_free_is_repaired);
	tcase_add_test(tc, fsck_finds_and_repairs_wrong_reference_counts);
	tcase_add_test(tc, hostile_segment_records_are_refused);
	tcase_add_test(tc, a_records_pieces_may_lie_at_either_end_of_the_heap);
	tcase_add_test(tc, a_scattered_entrys_sections_and_data_block_may_reach_the_heaps_end);
	tcase_add_test(tc, a_held_segment_may_lie_at_either_end_of_the_heap);
	tcase_add_test(tc, a_payload_of_the_most_pieces_is_cut_one_more_is_stored_whole);
	tcase_add_test(tc, a_fill_of_the_most_pieces_is_indexed_one_more_is_not);
	tcase_add_test(tc, segments_released_between_lookup_and_commit);
	tcase_add_test(tc, segments_renewed_under_two_plans_have_the_payload_stored_whole);
	tcase_add_test(tc, bad_segment_options_are_refused);
	tcase_add_test(tc, cli_round_trip_of_a_scattered_entry);
	tcase_add_test(tc, a_segmented_admission_digests_before_it_frees_its_hashing_state);
	tcase_add_test(tc, restore_from_a_scattered_entry);
	tcase_add_test(tc, a_record_emptied_under_a_copy_is_refused);
	tcase_add_test(tc, an_admission_whose_blocks_cannot_be_tagged_is_refused_and_gives_its_index_entry_back);
	tcase_add_test(tc, a_writer_killed_at_admit_popped_has_not_reached_the_commits_schedule_point);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(seg_suite)
