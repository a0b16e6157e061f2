/* tests/check_l2.c — the L2 tier in one process: admission rules, leases, eviction, removal,
 * reservations, and hostile index contents. Multi-process cases: tests/check_l2_mp.c. */
#include <errno.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../shm/fault.h"
#include "../shm/heap.h"

#define ARENA (32ull << 20)

struct fx {
	struct sc_arena *a;
	const char *name;
	struct sc_stage *st;
};

static void fx_open(struct fx *f)
{
	f->a = sc_test_arena("l2", ARENA, &f->name);
	ck_assert_int_eq(sc_stage_open(f->a, "model-A", "state-1", &f->st), 0);
}

/* fx_open with arena options of its own */
static void fx_open_opts(struct fx *f, struct sc_arena_opts *o)
{
	f->a = sc_test_arena_opts("l2", o, &f->name);
	ck_assert_int_eq(sc_stage_open(f->a, "model-A", "state-1", &f->st), 0);
}

static void fx_close(struct fx *f)
{
	sc_stage_close(f->st);
	sc_test_arena_destroy(f->a, f->name);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static void toks(int32_t *t, size_t n, int32_t base)
{
	for (size_t i = 0; i < n; i++)
		t[i] = base + (int32_t)i;
}

/* Admit a FULL_STATE blob of @bytes derived from @seed under tokens base..base+n. */
static int put(struct sc_stage *st, int32_t base, size_t n, size_t bytes, uint32_t seed)
{
	uint8_t *buf = malloc(bytes ? bytes : 1);
	int32_t *t = malloc(n * sizeof(*t));
	fill(buf, bytes, seed);
	toks(t, n, base);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { bytes } };
	int rc = sc_l2_admit(st, "ns", t, n, sc_digest(buf, bytes), &p, SC_ORIGIN_DIRECT);
	free(buf);
	free(t);
	return rc;
}

static int has(struct sc_stage *st, int32_t base, size_t n)
{
	int32_t t[64];
	toks(t, n, base);
	struct sc_l2_entry_info info;
	return sc_l2_peek(st, "ns", t, n, &info) == 0;
}

/* fx_open, and one entry stored: 3000 bytes of seed 1 under token ids 10..13; its key. */
static struct sc_key fx_open_one(struct fx *f)
{
	fx_open(f);
	ck_assert_int_eq(put(f->st, 10, 4, 3000, 1), 0);
	int32_t t[4];
	toks(t, 4, 10);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f->st, "ns", t, 4, &k), 0);
	return k;
}

static struct sc_l2_stats stats(struct fx *f, const struct sc_stage *st)
{
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(f->a, st, &s), 0);
	return s;
}

/* Payload held at the most / heap bytes, admitting @bytes entries (16 token ids each) until the
 * first eviction, into an arena whose index has one entry per 4 KiB (sized for its smallest
 * entries): copied-in entries are packed, so the heap holds what it can. */
static double density(size_t bytes)
{
	struct sc_arena_opts o = { .size_bytes = ARENA, .index_entries = ARENA / 4096 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("l2dense", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "model-A", "state-1", &st), 0);
	struct sc_arena_info ai;
	ck_assert_int_eq(sc_arena_info(a, &ai), 0);
	struct sc_l2_stats s = { 0 };
	uint64_t held = 0;
	for (int32_t i = 0; s.evictions == 0 && s.admission_rejects == 0; i++) {
		ck_assert_msg(i < (int32_t)(ARENA / bytes) + 8, "%zu-byte entries never filled the heap", bytes);
		ck_assert_int_eq(put(st, i * 100, 16, bytes, (uint32_t)i), 0);
		ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
		if (s.logical_bytes > held)
			held = s.logical_bytes;
	}
	ck_assert_uint_eq(s.admission_rejects, 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
	return (double)held / (double)ai.heap_bytes;
}

/* Small entries fill the heap: 4 KiB ones to >= 0.9 of its bytes, 64 KiB ones to >= 0.97 (page
 * rounding and alignment gaps held 4 KiB entries to a third of it). */
START_TEST(small_entries_fill_the_heap)
{
	double d4 = density(4096), d64 = density(64u << 10);
	ck_assert_msg(d4 >= 0.9, "4 KiB entries hold %.3f of the heap", d4);
	ck_assert_msg(d64 >= 0.97, "64 KiB entries hold %.3f of the heap", d64);
}
END_TEST

START_TEST(admit_get_round_trip)
{
	struct fx f;
	fx_open(&f);
	uint8_t buf[5000];
	fill(buf, sizeof(buf), 1);
	int32_t t[10];
	toks(t, 10, 100);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_digest d = sc_digest(buf, sizeof(buf));
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 10, d, &p, SC_ORIGIN_FROM_L3), 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 10, NULL, &l), 0);
	ck_assert_uint_eq(l.sec_len[0], sizeof(buf));
	ck_assert_uint_eq(l.sec_len[1], 0);
	ck_assert_int_eq(memcmp(l.sec[0], buf, sizeof(buf)), 0);
	ck_assert_uint_eq(l.kind, SC_PAYLOAD_FULL_STATE);
	ck_assert_uint_eq(l.origin, SC_ORIGIN_FROM_L3);
	ck_assert_uint_eq(l.token_count, 10);
	ck_assert(sc_digest_equal(l.digest, d));
	/* zero copy: the section lives in the arena's heap, 64-byte aligned (a copied-in entry is
	 * packed: reservations, which L3 reads into, are the 4 KiB-aligned ones) */
	struct shm_arena *sa = f.a->shm;
	uint64_t off = (uint64_t)((const uint8_t *)l.sec[0] - sa->base);
	ck_assert_uint_ge(off, sa->hdr->regions[SHM_REGION_HEAP].off);
	ck_assert_uint_eq(off % 64, 0);
	struct sc_l2_stats s = stats(&f, NULL);
	ck_assert_uint_eq(s.bytes, sc_l2_footprint(f.a, sizeof(buf), 0, 10));
	ck_assert_uint_eq(s.bytes, 5056 + 64 + 64); /* the wire to 64 bytes, 10 ids in 64, a block header */
	ck_assert_uint_eq(s.leases, 1);
	sc_lease_release(&l);
	sc_lease_release(&l); /* idempotent */
	s = stats(&f, NULL);
	ck_assert_uint_eq(s.leases, 0);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.logical_bytes, sizeof(buf));
	ck_assert_uint_ge(s.bytes, sizeof(buf));
	ck_assert_uint_eq(s.inserts, 1);
	ck_assert_uint_eq(s.hits, 1);
	ck_assert_uint_eq(s.misses, 0);
	/* a miss: other tokens, other namespace, other stage */
	struct sc_stage *other;
	ck_assert_int_eq(sc_stage_open(f.a, "model-B", "state-1", &other), 0);
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 9, NULL, &l), -ENOENT);
	ck_assert_int_eq(sc_l2_get(f.st, "other", t, 10, NULL, &l), -ENOENT);
	ck_assert_int_eq(sc_l2_get(other, "ns", t, 10, NULL, &l), -ENOENT);
	s = stats(&f, f.st);
	ck_assert_uint_eq(s.misses, 2);
	ck_assert_uint_eq(s.hits, 1);
	ck_assert_uint_eq(s.entries, 1);
	s = stats(&f, other);
	ck_assert_uint_eq(s.misses, 1);
	ck_assert_uint_eq(s.entries, 0);
	sc_stage_close(other);
	/* copy-out */
	uint8_t out[5000];
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 10, NULL, out, sizeof(out), &info), (int64_t)sizeof(out));
	ck_assert_int_eq(memcmp(out, buf, sizeof(buf)), 0);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 10, NULL, out, 100, &info), -ENOBUFS);
	ck_assert_uint_eq(info.bytes, sizeof(buf));
	fx_close(&f);
}
END_TEST

/* Copies of every size (around 16 KiB multiples, past 1 MiB) come back byte for byte, and a byte
 * changed in the arena at the end of the largest is caught by the copy's digest check. */
START_TEST(copy_out_is_hashed_at_every_size)
{
	struct fx f;
	fx_open(&f);
	const size_t sizes[] = { 1, 4096, 32767, 32768, 32769, 5 * 16384 + 7, (1u << 20) + 3 };
	size_t big = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
	uint8_t *want = malloc(big), *got = malloc(big);
	ck_assert(want && got);
	int32_t t[4];
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		ck_assert_int_eq(put(f.st, 5000 + (int32_t)k * 10, 4, sizes[k], 70 + (uint32_t)k), 0);
		fill(want, sizes[k], 70 + (uint32_t)k);
		toks(t, 4, 5000 + (int32_t)k * 10);
		memset(got, 0, sizes[k]);
		ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, got, sizes[k], NULL), (int64_t)sizes[k]);
		ck_assert_msg(memcmp(got, want, sizes[k]) == 0, "copy of %zu bytes differs", sizes[k]);
	}
	/* the largest: one byte of its last chunk changed in the arena, then put back */
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), 0);
	uint8_t *last = (uint8_t *)(uintptr_t)l.sec[0] + big - 1;
	sc_lease_release(&l);
	*last ^= 0x40;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, got, big, NULL), -EBADMSG);
	*last ^= 0x40;
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, got, big, NULL), (int64_t)big);
	ck_assert_int_eq(memcmp(got, want, big), 0);
	free(want);
	free(got);
	fx_close(&f);
}
END_TEST

START_TEST(kv_recurrent_with_descriptor)
{
	struct fx f;
	fx_open(&f);
	uint8_t kv[8192], rec[300], wire[8192 + 300];
	fill(kv, sizeof(kv), 2);
	fill(rec, sizeof(rec), 3);
	memcpy(wire, kv, sizeof(kv));
	memcpy(wire + sizeof(kv), rec, sizeof(rec));
	struct sc_kv_desc desc;
	memset(&desc, 0, sizeof(desc));
	desc.version = 1;
	desc.token_count = 4;
	desc.payload_bytes = sizeof(kv);
	int32_t t[4] = { 1, 2, 3, 4 };
	struct sc_payload p = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { kv, rec }, .sec_len = { sizeof(kv), sizeof(rec) },
				.kv_desc = &desc };
	/* the expected digest is over the wire: kv then recurrent */
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4, sc_digest(kv, sizeof(kv)), &p, 0), -EBADMSG);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4, sc_digest(wire, sizeof(wire)), &p, 0), 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), 0);
	ck_assert_uint_eq(l.kind, SC_PAYLOAD_KV_RECURRENT);
	ck_assert_int_eq(memcmp(l.sec[0], kv, sizeof(kv)), 0);
	ck_assert_int_eq(memcmp(l.sec[1], rec, sizeof(rec)), 0);
	ck_assert_int_eq(l.has_kv_desc, 1);
	ck_assert_int_eq(memcmp(&l.kv_desc, &desc, sizeof(desc)), 0);
	ck_assert_int_eq(sc_kv_desc_validate_restore(&l.kv_desc, l.sec_len[0], 4), 0);
	/* the stored descriptor (after the wire) is validated on every read: a scribbled one is refused */
	struct sc_kv_desc *stored = memmem(l.sec[1] + sizeof(rec), 4096, &desc, sizeof(desc));
	ck_assert_ptr_nonnull(stored);
	sc_lease_release(&l);
	stored->payload_bytes++;
	uint8_t out[sizeof(wire)];
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), -EBADMSG);
	ck_assert_int_eq((int)sc_l2_get_copy(f.st, "ns", t, 4, NULL, out, sizeof(out), NULL), -EBADMSG);
	stored->payload_bytes--;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), 0);
	sc_lease_release(&l);
	/* KV without a descriptor, a descriptor that does not match, recurrent on FULL_STATE */
	struct sc_payload bad = p;
	bad.kv_desc = NULL;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 3, sc_digest(wire, sizeof(wire)), &bad, 0), -EINVAL);
	struct sc_kv_desc wrong = desc;
	wrong.payload_bytes = 1;
	bad.kv_desc = &wrong;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 3, sc_digest(wire, sizeof(wire)), &bad, 0), -EINVAL);
	bad = p;
	bad.kind = SC_PAYLOAD_FULL_STATE;
	bad.kv_desc = NULL;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 3, sc_digest(wire, sizeof(wire)), &bad, 0), -EINVAL);
	/* recurrent-only KV_RECURRENT (no KV section) needs no descriptor */
	struct sc_payload ro = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { NULL, rec }, .sec_len = { 0, sizeof(rec) } };
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 2, sc_digest(rec, sizeof(rec)), &ro, 0), 0);
	fx_close(&f);
}
END_TEST

/* Each refusal: its errno, counted, and nothing else changes. */
START_TEST(refusals_leave_the_cache_unchanged)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 0, 8, 1000, 9), 0);
	struct sc_l2_stats s0 = stats(&f, NULL);
	uint8_t buf[100];
	fill(buf, sizeof(buf), 4);
	int32_t t[8];
	toks(t, 8, 0); /* same key as the existing entry: a refusal must not replace it */
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_digest good = sc_digest(buf, sizeof(buf)), bad = good;
	bad.lo ^= 1;
	/* 1. digest first: even an inconsistent payload is refused for its digest */
	struct sc_payload incons = p;
	incons.sec[1] = buf;
	incons.sec_len[1] = 10;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, bad, &incons, 0), -EBADMSG);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, bad, &p, 0), -EBADMSG);
	/* 2. empty */
	struct sc_payload empty = { .kind = SC_PAYLOAD_FULL_STATE };
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, sc_digest(NULL, 0), &empty, 0), -EINVAL);
	/* 3. inconsistent sections / kind */
	struct sc_payload k0 = p;
	k0.kind = 0;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, good, &k0, 0), -EINVAL);
	/* 4. larger than the budget at all */
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 64 << 10), 0);
	static uint8_t big[128 << 10];
	struct sc_payload pb = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { big }, .sec_len = { sizeof(big) } };
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, sc_digest(big, sizeof(big)), &pb, 0), -E2BIG);
	struct sc_l2_stats s1 = stats(&f, NULL);
	ck_assert_uint_eq(s1.admission_rejects, s0.admission_rejects + 5);
	ck_assert_uint_eq(s1.refused_bytes, s0.refused_bytes + sizeof(big));
	ck_assert_uint_eq(s1.entries, s0.entries);
	ck_assert_uint_eq(s1.bytes, s0.bytes);
	ck_assert_uint_eq(s1.inserts, s0.inserts);
	ck_assert_uint_eq(s1.evictions, s0.evictions);
	/* the entry is still the original */
	uint8_t orig[1000], out[1000];
	fill(orig, sizeof(orig), 9);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 8, NULL, out, sizeof(out), NULL), 1000);
	ck_assert_int_eq(memcmp(out, orig, sizeof(out)), 0);
	/* NULL arguments */
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", NULL, 8, good, &p, 0), -EINVAL);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 0, good, &p, 0), -EINVAL);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, good, &p, 7), -EINVAL);
	fx_close(&f);
}
END_TEST

/* A large two-section payload with a descriptor round-trips; a wrong digest (changed bytes, or a
 * wrong expected value) is refused with nothing allocated, stored or evicted, with or without free
 * room. */
START_TEST(large_admit_with_a_wrong_digest_changes_nothing)
{
	struct fx f;
	fx_open(&f);
	size_t kvn = (200 << 10) + 100, recn = 20000; /* sections not multiples of the chunk */
	uint8_t *kv = malloc(kvn), *rec = malloc(recn), *wire = malloc(kvn + recn);
	fill(kv, kvn, 21);
	fill(rec, recn, 22);
	memcpy(wire, kv, kvn);
	memcpy(wire + kvn, rec, recn);
	struct sc_kv_desc desc;
	memset(&desc, 0, sizeof(desc));
	desc.version = 1;
	desc.token_count = 8;
	desc.payload_bytes = kvn;
	int32_t t[8];
	toks(t, 8, 500);
	struct sc_payload p = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { kv, rec }, .sec_len = { kvn, recn }, .kv_desc = &desc };
	struct sc_digest good = sc_digest(wire, kvn + recn), bad = good;
	bad.hi ^= 1;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, good, &p, 0), 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 8, NULL, &l), 0);
	ck_assert(sc_digest_equal(l.digest, good));
	ck_assert_uint_eq(l.sec_len[0], kvn);
	ck_assert_uint_eq(l.sec_len[1], recn);
	ck_assert_int_eq(memcmp(l.sec[0], kv, kvn), 0);
	ck_assert_int_eq(memcmp(l.sec[1], rec, recn), 0);
	ck_assert_int_eq(memcmp(&l.kv_desc, &desc, sizeof(desc)), 0);
	sc_lease_release(&l);
	/* the same key with a wrong digest: refused, nothing allocated, the entry kept */
	struct sc_l2_stats s0 = stats(&f, NULL);
	struct shm_heap_stats h0, h1;
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &h0), 0);
	uint8_t *changed = malloc(kvn);
	fill(changed, kvn, 23);
	struct sc_payload q = p;
	q.sec[0] = changed;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, good, &q, 0), -EBADMSG);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, bad, &p, 0), -EBADMSG);
	struct sc_l2_stats s1 = stats(&f, NULL);
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &h1), 0);
	ck_assert_uint_eq(h1.used_bytes, h0.used_bytes);
	ck_assert_uint_eq(s1.refused[SC_L2_REFUSE_DIGEST], s0.refused[SC_L2_REFUSE_DIGEST] + 2);
	ck_assert_uint_eq(s1.entries, s0.entries);
	ck_assert_uint_eq(s1.inserts, s0.inserts);
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 8, NULL, &l), 0);
	ck_assert_int_eq(memcmp(l.sec[0], kv, kvn), 0);
	sc_lease_release(&l);
	/* no free room (the budget is what is stored): a wrong digest evicts nothing */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(put(f.st, 1000 + 10 * i, 8, 64 << 10, (uint32_t)i), 0);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, stats(&f, NULL).bytes), 0);
	toks(t, 8, 900);
	s0 = stats(&f, NULL);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, bad, &p, 0), -EBADMSG);
	s1 = stats(&f, NULL);
	ck_assert_uint_eq(s1.evictions, s0.evictions);
	ck_assert_uint_eq(s1.entries, s0.entries);
	/* ... and a right one makes room as any admission does */
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 8, good, &p, 0), 0);
	ck_assert_uint_gt(stats(&f, NULL).evictions, s0.evictions);
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 8, NULL, &l), 0);
	ck_assert_int_eq(memcmp(l.sec[1], rec, recn), 0);
	sc_lease_release(&l);
	free(changed);
	free(kv);
	free(rec);
	free(wire);
	fx_close(&f);
}
END_TEST

/* A stage handle's counts reach the arena's counters (seen by another handle) on exactly its
 * L2_FLUSH_EVERY-th lookup without a close, whether that lookup hits or misses, and all of them
 * when it closes. */
static void lookups(struct sc_stage *st, uint32_t n, int hit)
{
	int32_t t[8];
	toks(t, 8, hit ? 0 : 5000);
	for (uint32_t i = 0; i < n; i++) {
		struct sc_lease l;
		ck_assert_int_eq(sc_l2_get(st, "ns", t, 8, NULL, &l), hit ? 0 : -ENOENT);
		sc_lease_release(&l);
	}
}

START_TEST(hit_counts_are_flushed_in_batches)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 0, 8, 1000, 1), 0);
	struct sc_arena *b;
	struct sc_stage *sb;
	ck_assert_int_eq(sc_arena_open(f.name, &b), 0);
	ck_assert_int_eq(sc_stage_open(b, "model-A", "state-1", &sb), 0);
	struct sc_l2_stats s0 = stats(&f, NULL); /* flushes f's own handle first */
	/* f's handle does not know sb: what it sees was flushed by sb's lookups themselves */
	lookups(sb, L2_FLUSH_EVERY - 1, 1);
	struct sc_l2_stats s1 = stats(&f, NULL);
	ck_assert_uint_eq(s1.hits, s0.hits);
	ck_assert_uint_eq(s1.misses, s0.misses);
	lookups(sb, 1, 0); /* the batch's last lookup is a miss */
	s1 = stats(&f, NULL);
	ck_assert_uint_eq(s1.hits, s0.hits + L2_FLUSH_EVERY - 1);
	ck_assert_uint_eq(s1.misses, s0.misses + 1);
	lookups(sb, L2_FLUSH_EVERY - 1, 0);
	ck_assert_uint_eq(stats(&f, NULL).misses, s0.misses + 1);
	lookups(sb, 1, 1); /* the batch's last lookup is a hit */
	s1 = stats(&f, NULL);
	ck_assert_uint_eq(s1.hits, s0.hits + L2_FLUSH_EVERY);
	ck_assert_uint_eq(s1.misses, s0.misses + L2_FLUSH_EVERY);
	lookups(sb, 5, 1);
	ck_assert_uint_eq(stats(&f, NULL).hits, s0.hits + L2_FLUSH_EVERY);
	sc_stage_close(sb);
	ck_assert_uint_eq(stats(&f, NULL).hits, s0.hits + L2_FLUSH_EVERY + 5);
	sc_arena_close(b);
	fx_close(&f);
}
END_TEST

START_TEST(eviction_makes_room_and_enospc_rolls_back)
{
	struct fx f;
	fx_open(&f);
	uint64_t fp = shm_heap_footprint((64 << 10) + 8 * 4) /* + 8 stored token ids */;
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 4 * fp), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(put(f.st, i * 100, 8, 64 << 10, (uint32_t)i), 0);
	ck_assert_uint_eq(stats(&f, NULL).entries, 4);
	ck_assert_uint_eq(stats(&f, NULL).evictions, 0);
	/* a fifth: one eviction */
	ck_assert_int_eq(put(f.st, 400, 8, 64 << 10, 4), 0);
	struct sc_l2_stats s = stats(&f, NULL);
	ck_assert_uint_eq(s.entries, 4);
	ck_assert_uint_eq(s.evictions, 1);
	ck_assert(has(f.st, 400, 8));
	/* lease all four: nothing can be evicted, the admit fails and changes nothing */
	struct sc_lease l[4];
	int n = 0;
	for (int i = 0; i <= 4; i++) {
		int32_t t[8];
		toks(t, 8, i * 100);
		if (sc_l2_get(f.st, "ns", t, 8, NULL, &l[n]) == 0)
			n++;
	}
	ck_assert_int_eq(n, 4);
	s = stats(&f, NULL);
	ck_assert_int_eq(put(f.st, 500, 8, 64 << 10, 5), -ENOSPC);
	struct sc_l2_stats s2 = stats(&f, NULL);
	ck_assert_uint_eq(s2.entries, s.entries);
	ck_assert_uint_eq(s2.evictions, s.evictions);
	ck_assert_uint_eq(s2.inserts, s.inserts);
	/* the refusal is counted, under its reason: everything evictable is leased */
	ck_assert_uint_eq(s2.admission_rejects, s.admission_rejects + 1);
	ck_assert_uint_eq(s2.refused[SC_L2_REFUSE_LEASED], s.refused[SC_L2_REFUSE_LEASED] + 1);
	ck_assert_uint_eq(s2.free_bytes, s.free_bytes);
	for (int i = 0; i < n; i++)
		sc_lease_release(&l[i]);
	ck_assert_int_eq(put(f.st, 500, 8, 64 << 10, 5), 0);
	ck_assert_uint_eq(stats(&f, NULL).entries, 4);
	fx_close(&f);
}
END_TEST

START_TEST(peek_does_not_change_eviction_order)
{
	struct fx f;
	fx_open(&f);
	uint64_t fp = shm_heap_footprint((64 << 10) + 8 * 4) /* + 8 stored token ids */;
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 2 * fp), 0);
	ck_assert_int_eq(put(f.st, 0, 8, 64 << 10, 0), 0);   /* A */
	ck_assert_int_eq(put(f.st, 100, 8, 64 << 10, 1), 0); /* B */
	/* A is read twice (S3-FIFO: two hits in the small FIFO earn the main one); B is only
	 * peeked, which must count nothing: else B would be spared and A evicted */
	int32_t t[8];
	toks(t, 8, 0);
	struct sc_lease l;
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 8, NULL, &l), 0);
		sc_lease_release(&l);
	}
	struct sc_l2_stats before = stats(&f, NULL);
	for (int i = 0; i < 10; i++)
		ck_assert(has(f.st, 100, 8));
	struct sc_l2_stats after = stats(&f, NULL);
	ck_assert_uint_eq(after.hits, before.hits);
	ck_assert_uint_eq(after.misses, before.misses);
	ck_assert_int_eq(put(f.st, 200, 8, 64 << 10, 2), 0); /* C evicts B, not A */
	ck_assert(has(f.st, 0, 8));
	ck_assert(!has(f.st, 100, 8));
	ck_assert(has(f.st, 200, 8));
	fx_close(&f);
}
END_TEST

START_TEST(location_mismatch_removes_the_mirror)
{
	struct fx f;
	fx_open(&f);
	uint8_t buf[128];
	memset(buf, 7, sizeof(buf));
	int32_t t[3] = { 1, 2, 3 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_digest d = sc_digest(buf, sizeof(buf));
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 3, d, &p, SC_ORIGIN_FROM_L3), 0);
	struct sc_location good = { .token_count = 3, .digest = d }, changed = { .token_count = 3, .digest = sc_digest("changed", 7) },
			   count = { .token_count = 4, .digest = d };
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 3, &good, &l), 0);
	sc_lease_release(&l);
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 3, &changed, &l), -ENOENT);
	ck_assert_uint_eq(stats(&f, NULL).entries, 0);
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 3, &good, &l), -ENOENT);
	/* a token-count mismatch too */
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 3, d, &p, SC_ORIGIN_FROM_L3), 0);
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 3, &count, &l), -ENOENT);
	ck_assert_uint_eq(stats(&f, NULL).entries, 0);
	fx_close(&f);
}
END_TEST

START_TEST(replacement_is_atomic_and_old_leases_stay_valid)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 0, 8, 10000, 1), 0);
	int32_t t[8];
	toks(t, 8, 0);
	struct sc_lease old, cur;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 8, NULL, &old), 0);
	uint8_t v1[10000], v2[20000];
	fill(v1, sizeof(v1), 1);
	fill(v2, sizeof(v2), 2);
	ck_assert_int_eq(put(f.st, 0, 8, 20000, 2), 0);
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 8, NULL, &cur), 0);
	ck_assert_uint_eq(cur.sec_len[0], sizeof(v2));
	ck_assert_int_eq(memcmp(cur.sec[0], v2, sizeof(v2)), 0);
	/* the old lease still reads the old payload, whole */
	ck_assert_uint_eq(old.sec_len[0], sizeof(v1));
	ck_assert_int_eq(memcmp(old.sec[0], v1, sizeof(v1)), 0);
	struct sc_l2_stats s = stats(&f, NULL);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_gt(s.pending_reclaim_bytes, 0);
	sc_lease_release(&old);
	sc_lease_release(&cur);
	/* retired entries are reclaimed in batches (lib/l2/evict.h): after many more replacements,
	 * less than a batch of them is pending and the first one, no longer leased, went with them */
	uint64_t fp = sc_l2_footprint(f.a, 20000, 0, 8);
	for (uint32_t v = 4; v < 4 + 2 * 32; v++)
		ck_assert_int_eq(put(f.st, 0, 8, 20000, v), 0);
	s = stats(&f, NULL);
	ck_assert_uint_lt(s.pending_reclaim_bytes, 32 * fp);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_le(s.bytes, 33 * fp);
	ck_assert_uint_eq(s.evictions, 0);
	fx_close(&f);
}
END_TEST

/* What waits to be reclaimed counts as used, and an admission short of room reclaims it before
 * it evicts anything: a budget of four entries, two of them live, one key replaced 100 times. */
START_TEST(pending_entries_are_reclaimed_before_anything_is_evicted)
{
	struct fx f;
	fx_open(&f);
	uint64_t fp = sc_l2_footprint(f.a, 20000, 0, 8);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 4 * fp), 0);
	ck_assert_int_eq(put(f.st, 1000, 8, 20000, 1), 0);
	ck_assert_int_eq(put(f.st, 2000, 8, 20000, 2), 0);
	for (uint32_t v = 3; v < 103; v++) {
		ck_assert_int_eq(put(f.st, 0, 8, 20000, v), 0);
		struct sc_l2_stats s = stats(&f, NULL);
		ck_assert_uint_le(s.bytes, 4 * fp);
		ck_assert_uint_eq(s.evictions, 0);
	}
	ck_assert(has(f.st, 1000, 8));
	ck_assert(has(f.st, 2000, 8));
	ck_assert(has(f.st, 0, 8));
	ck_assert_uint_eq(stats(&f, NULL).entries, 3);
	fx_close(&f);
}
END_TEST

/* An admission that fits the budget exactly (retired bytes counted) reclaims nothing: what is
 * retired waits for its batch (lib/l2/evict.h), nothing is evicted. */
START_TEST(an_admission_that_fits_exactly_leaves_the_reclaim_to_its_batch)
{
	struct fx f;
	fx_open(&f);
	uint64_t fp = sc_l2_footprint(f.a, 20000, 0, 8);
	ck_assert_int_eq(put(f.st, 0, 8, 20000, 1), 0);
	ck_assert_int_eq(put(f.st, 0, 8, 20000, 2), 0); /* the first one retired */
	struct sc_l2_stats s = stats(&f, NULL);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &hs), 0);
	ck_assert_uint_eq(s.pending_reclaim_bytes, fp);
	ck_assert_uint_eq(hs.used_bytes, 2 * fp); /* the live entry and the retired one */
	ck_assert_uint_lt(fp, s.budget_bytes >> 8); /* no batch due (lib/l2/evict.c: 1/256 of the budget) */
	/* the rest of the budget: a block header, the payload, 8 token ids (64 bytes) */
	size_t rest = s.budget_bytes - 2 * fp - 64 - 64;
	ck_assert_uint_eq(sc_l2_footprint(f.a, rest, 0, 8), s.budget_bytes - 2 * fp);
	ck_assert_int_eq(put(f.st, 1000, 8, rest, 3), 0);
	s = stats(&f, NULL);
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &hs), 0);
	ck_assert_uint_eq(hs.used_bytes, s.budget_bytes);
	ck_assert_uint_eq(s.pending_reclaim_bytes, fp);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert(has(f.st, 0, 8) && has(f.st, 1000, 8));
	fx_close(&f);
}
END_TEST

/* Allocation lengths (lib/l2/place.h): wire, descriptor and token ids each from a 64-byte
 * boundary, exact otherwise; a wire or token offset of 2^61 bytes or more, or 2^59 token ids,
 * saturate at 2^61. */
START_TEST(allocation_lengths_are_exact_and_saturate)
{
	const uint64_t sat = 1ull << 61, d = sizeof(struct sc_kv_desc);
	ck_assert_uint_eq(l2_alloc_len(100, 0), 100);
	ck_assert_uint_eq(l2_alloc_len(100, 1), 128 + d);
	ck_assert_uint_eq(l2_tokens_at(100, 0), 128);
	ck_assert_uint_eq(l2_tokens_at(128, 0), 128);
	ck_assert_uint_eq(l2_alloc_len_tok(100, 0, 0), 100);
	ck_assert_uint_eq(l2_alloc_len_tok(100, 1, 0), 128 + d);
	ck_assert_uint_eq(l2_alloc_len_tok(100, 0, 3), 128 + 12);
	ck_assert_uint_eq(l2_alloc_len(sat - 64, 0), sat - 64);
	ck_assert_uint_eq(l2_alloc_len(sat, 0), sat);
	ck_assert_uint_eq(l2_alloc_len(sat, 1), sat);
	ck_assert_uint_eq(l2_alloc_len(UINT64_MAX, 1), sat);
	ck_assert_uint_eq(l2_tokens_at(sat, 1), sat);
	ck_assert_uint_eq(l2_alloc_len_tok(sat - 64, 0, 1), sat - 64 + 4);
	ck_assert_uint_eq(l2_alloc_len_tok(sat, 0, 1), sat);
	ck_assert_uint_eq(l2_alloc_len_tok(1, 0, sat / 4), sat);
	ck_assert_uint_eq(l2_alloc_len_tok(1, 0, sat / 4 - 1), sat + 60); /* over any heap, never packed */
	ck_assert_uint_lt(sat + 60, SHM_HEAP_PACKED);
	ck_assert_uint_eq(l2_alloc_len_tok(1, 0, UINT64_MAX), sat);
}
END_TEST

/* Reclamations reached ("l2.reclaim.epochs_read"), and those reached with no shard lock held. */
static int reclaims, reclaims_unlocked;

static void at_reclaim(const char *point, void *ctx)
{
	const struct shm_index *ix = ctx;
	if (strcmp(point, "l2.reclaim.epochs_read"))
		return;
	int held = 0;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		held += atomic_load(&ix->hdr->shards[s].mu.word) != 0;
	reclaims++;
	reclaims_unlocked += !held;
}

/* Removal, invalidation and clear; each reclaims what it retired under the shard's lock. */
START_TEST(remove_invalidate_clear_shrink)
{
	struct fx f;
	fx_open(&f);
	struct sc_stage *s2;
	ck_assert_int_eq(sc_stage_open(f.a, "model-B", "state-1", &s2), 0);
	uint8_t buf[256];
	memset(buf, 1, sizeof(buf));
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_digest d = sc_digest(buf, sizeof(buf));
	int32_t t[4] = { 1, 2, 3, 4 };
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4, d, &p, 0), 0);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 3, d, &p, 0), 0);
	ck_assert_int_eq(sc_l2_admit(s2, "ns", t, 4, d, &p, 0), 0);
	ck_assert_int_eq(put(f.st, 50, 4, 300, 5), 0);
	ck_assert_uint_eq(stats(&f, NULL).entries, 4);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f.st, "ns", t, 3, &k), 0);
	reclaims = reclaims_unlocked = 0;
	sc_sched_set(at_reclaim, l2_ix(f.a));
	ck_assert_int_eq(sc_l2_remove(f.st, k), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, k), -ENOENT);
	/* invalidate: every stage */
	ck_assert_int_eq(sc_l2_invalidate_digest(f.a, d), 2);
	ck_assert_int_eq(sc_l2_invalidate_digest(f.a, d), 0);
	ck_assert_uint_eq(stats(&f, NULL).entries, 1);
	ck_assert_int_eq(put(f.st, 60, 4, 300, 6), 0);
	ck_assert_int_eq(sc_l2_clear(f.a), 2);
	sc_sched_set(NULL, NULL);
	ck_assert_int_ge(reclaims, 3); /* one shard at least for each of the three */
	ck_assert_int_eq(reclaims_unlocked, 0);
	ck_assert_uint_eq(stats(&f, NULL).entries, 0);
	/* nothing leaked: the heap is empty again */
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &hs), 0);
	ck_assert_uint_eq(hs.used_bytes, 0);
	/* shrink: entries go until the rest fits */
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(put(f.st, i * 10, 4, 64 << 10, (uint32_t)i), 0);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 3 * shm_heap_footprint((64 << 10) + 8 * 4) /* + 8 stored token ids */), 0);
	struct sc_l2_stats s = stats(&f, NULL);
	ck_assert_uint_le(s.entries, 3);
	ck_assert_uint_le(s.bytes, s.budget_bytes);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 0), 0);
	ck_assert_uint_eq(stats(&f, NULL).budget_bytes, l2_heap_capacity(f.a)); /* no budget: the whole heap */
	sc_stage_close(s2);
	fx_close(&f);
}
END_TEST

/* Reclamation reads the readers' epochs, then the leases (lib/l2/evict.c): a reader that enters
 * its read section after the epochs were read, the entry already unlinked, cannot reach the entry,
 * so the reclaim frees it. The reader enters at the schedule point between the two reads. */
static struct sc_arena *entering;

static void enter_at_epochs_read(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "l2.reclaim.epochs_read") && entering) {
		shm_epoch_enter(entering->shm);
		entering = NULL;
	}
}

START_TEST(a_reader_entering_after_the_epochs_were_read_does_not_hold_back_the_reclaim)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 70, 4, 4096, 70), 0);
	int32_t t[4];
	toks(t, 4, 70);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f.st, "ns", t, 4, &k), 0);
	struct sc_arena *r;
	ck_assert_int_eq(sc_arena_open(f.name, &r), 0);
	entering = r;
	sc_sched_set(enter_at_epochs_read, NULL);
	ck_assert_int_eq(sc_l2_remove(f.st, k), 0);
	sc_sched_set(NULL, NULL);
	ck_assert_ptr_null(entering); /* the removal reclaimed, and the reader entered there */
	ck_assert_uint_eq(stats(&f, NULL).pending_reclaim_bytes, 0);
	ck_assert(!has(f.st, 70, 4));
	shm_epoch_exit(r->shm);
	sc_arena_close(r);
	fx_close(&f);
}
END_TEST

/* A namespace one byte longer than SC_IDENTITY_MAX (the caller frees it). */
static char *too_long_ns(void)
{
	char *ns = malloc(SC_IDENTITY_MAX + 2);
	ck_assert_ptr_nonnull(ns);
	memset(ns, 'n', SC_IDENTITY_MAX + 1);
	ns[SC_IDENTITY_MAX + 1] = 0;
	return ns;
}

/* The entry of @tokens base..base+n, for forging (the caller holds no lease on it). */
static struct shm_index_entry *entry_of(struct fx *f, int32_t base, size_t n)
{
	int32_t *t = malloc(n * sizeof(*t));
	toks(t, n, base);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f->st, "ns", t, (uint32_t)n, &k), 0);
	free(t);
	struct shm_index_entry *e = sc_test_l2_entry(f->a, k);
	ck_assert_ptr_nonnull(e);
	return e;
}

/* A replaced entry that its chain no longer holds when it is replaced (the chain scribbled
 * between the commit's lookup and its link: the hook at "l2.commit.popped" cuts it out of its
 * bucket's chain) is not retired by the link: it stays LIVE, so it stays on the FIFOs too (a LIVE
 * entry that no FIFO holds could never be evicted); the key serves the new entry, and fsck
 * --repair retires the lost one. */
static struct {
	struct shm_index *ix;
	struct shm_index_entry *victim;
	int fired;
} cut;

static void cut_out_when_popped(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "l2.commit.popped") || cut.fired)
		return;
	cut.fired = 1;
	struct shm_index *ix = cut.ix;
	uint32_t me = shm_index_idx(ix, cut.victim) + 1;
	_Atomic uint32_t *slot = &ix->buckets[shm_index_bucket(ix, cut.victim->key_lo)];
	while (atomic_load(slot) && atomic_load(slot) != me)
		slot = &ix->ent[atomic_load(slot) - 1].next;
	ck_assert_uint_eq(atomic_load(slot), me);
	atomic_store(slot, atomic_load(&cut.victim->next));
}

START_TEST(a_replaced_entry_its_chain_lost_stays_live_and_queued)
{
	struct fx f;
	fx_open_one(&f);
	struct shm_index_entry *old = entry_of(&f, 10, 4);
	struct sc_l2_stats s = stats(&f, NULL);
	ck_assert_uint_eq(s.small_entries + s.main_entries, 1);
	cut.ix = l2_ix(f.a);
	cut.victim = old;
	cut.fired = 0;
	sc_sched_set(cut_out_when_popped, NULL);
	ck_assert_int_eq(put(f.st, 10, 4, 3000, 2), 0);
	sc_sched_set(NULL, NULL);
	ck_assert(cut.fired);
	ck_assert_uint_eq(atomic_load(&old->state), SHM_ENT_LIVE);
	s = stats(&f, NULL);
	ck_assert_uint_eq(s.small_entries + s.main_entries, 2);
	struct shm_index_entry *now = entry_of(&f, 10, 4);
	ck_assert_ptr_ne(now, old);
	uint8_t want[3000], got[3000];
	fill(want, sizeof(want), 2);
	int32_t t[4];
	toks(t, 4, 10);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, got, sizeof(got), NULL), 3000);
	ck_assert(memcmp(want, got, sizeof(want)) == 0);
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(f.a, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_uint_gt(rep.problems, 0);
	ck_assert_int_eq(sc_arena_fsck(f.a, 0, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(rep.problems, 0);
	ck_assert_uint_ne(atomic_load(&old->state), SHM_ENT_LIVE);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, got, sizeof(got), NULL), 3000);
	fx_close(&f);
}
END_TEST

START_TEST(longest_prefix)
{
	struct fx f;
	fx_open(&f);
	int32_t t[1100];
	toks(t, 1100, 5);
	uint8_t buf[64];
	memset(buf, 3, sizeof(buf));
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_digest d = sc_digest(buf, sizeof(buf));
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 256, d, &p, 0), 0);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 768, d, &p, 0), 0);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 1000, d, &p, 0), 0); /* not a block multiple */
	uint32_t len = 0;
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", t, 1100, 0, &len, &l), 0);
	ck_assert_uint_eq(len, 768);
	ck_assert_uint_eq(l.token_count, 768);
	sc_lease_release(&l);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", t, 700, 256, &len, &l), 0);
	ck_assert_uint_eq(len, 256);
	sc_lease_release(&l);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", t, 255, 256, &len, &l), -ENOENT);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "other", t, 1100, 256, &len, &l), -ENOENT);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", t, 1100, 500, &len, &l), 0);
	ck_assert_uint_eq(len, 1000);
	sc_lease_release(&l);
	struct sc_l2_stats s = stats(&f, NULL);
	ck_assert_uint_eq(s.hits, 3);
	ck_assert_uint_eq(s.misses, 2);
	/* bad arguments: refused, counted nowhere (no tokens at all is a miss) */
	char *longns = too_long_ns();
	ck_assert_int_eq(sc_l2_longest_prefix(NULL, "ns", t, 1100, 256, &len, &l), -EINVAL);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", t, 1100, 256, NULL, &l), -EINVAL);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", t, 1100, 256, &len, NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", NULL, 1100, 256, &len, &l), -EINVAL);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, longns, t, 1100, 256, &len, &l), -EINVAL);
	free(longns);
	s = stats(&f, NULL);
	ck_assert_uint_eq(s.hits, 3);
	ck_assert_uint_eq(s.misses, 2);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", NULL, 0, 256, &len, &l), -ENOENT);
	ck_assert_uint_eq(stats(&f, NULL).misses, 3);
	/* every lease slot held: -EMFILE at the longest prefix held, which is no miss */
	struct sc_lease held[SC_LEASES_MAX];
	for (int i = 0; i < SC_LEASES_MAX; i++)
		ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 256, NULL, &held[i]), 0);
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", t, 1100, 256, &len, &l), -EMFILE);
	ck_assert_uint_eq(len, 0);
	ck_assert_uint_eq(stats(&f, NULL).misses, 3);
	for (int i = 0; i < SC_LEASES_MAX; i++)
		sc_lease_release(&held[i]);
	/* a damaged entry at the longest length held is an error, not a shorter hit */
	struct shm_index_entry *e = entry_of(&f, 5, 768);
	uint32_t meta = e->meta;
	e->meta = 0xff;
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", t, 1100, 256, &len, &l), -EBADMSG);
	ck_assert_uint_eq(len, 0);
	e->meta = meta;
	ck_assert_int_eq(sc_l2_longest_prefix(f.st, "ns", t, 1100, 256, &len, &l), 0);
	ck_assert_uint_eq(len, 768);
	sc_lease_release(&l);
	fx_close(&f);
}
END_TEST

START_TEST(leases_pin_memory_and_are_bounded)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 0, 4, 4096, 1), 0);
	int32_t t[4];
	toks(t, 4, 0);
	struct sc_lease l[SC_LEASES_MAX + 1];
	for (int i = 0; i < SC_LEASES_MAX; i++)
		ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l[i]), 0);
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l[SC_LEASES_MAX]), -EMFILE);
	ck_assert_uint_eq(stats(&f, NULL).leases, SC_LEASES_MAX);
	/* no lease and a zeroed one (slot 0, no arena) give nothing back */
	sc_lease_release(NULL);
	struct sc_lease zero;
	memset(&zero, 0, sizeof(zero));
	sc_lease_release(&zero);
	ck_assert_uint_eq(stats(&f, NULL).leases, SC_LEASES_MAX);
	/* a lease whose slot was scribbled outside the table gives no other lease back */
	/* (shift counts that wrap onto a held lease's bit: 64 onto bit 0, 111 and -17 onto bit 47) */
	const int32_t bad_slots[] = { SC_LEASES_MAX, SC_LEASES_MAX + 1, 64, 111, -2, -17, -64, INT32_MAX, INT32_MIN };
	for (size_t i = 0; i < sizeof(bad_slots) / sizeof(bad_slots[0]); i++) {
		struct sc_lease forged = l[0];
		forged.slot_ = bad_slots[i];
		sc_lease_release(&forged);
		ck_assert_ptr_null(forged.arena_);
		ck_assert_uint_eq(stats(&f, NULL).leases, SC_LEASES_MAX);
		/* and no record of this handle became free to take */
		ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l[SC_LEASES_MAX]), -EMFILE);
	}
	/* removal defers the memory while leased */
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f.st, "ns", t, 4, &k), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, k), 0);
	struct sc_l2_stats s = stats(&f, NULL);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_uint_gt(s.pending_reclaim_bytes, 0);
	uint8_t expect[4096];
	fill(expect, sizeof(expect), 1);
	ck_assert_int_eq(memcmp(l[0].sec[0], expect, sizeof(expect)), 0);
	for (int i = 0; i < SC_LEASES_MAX; i++)
		sc_lease_release(&l[i]);
	ck_assert_int_eq(sc_l2_clear(f.a), 0);
	s = stats(&f, NULL);
	ck_assert_uint_eq(s.pending_reclaim_bytes, 0);
	ck_assert_uint_eq(s.leases, 0);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &hs), 0);
	ck_assert_uint_eq(hs.used_bytes, 0);
	fx_close(&f);
}
END_TEST

/* Only a slot's lease records are leases: the word after them (the ext area's spare bytes), a
 * FREE slot's records and bytes just past the reader table that read as a slot in use holding a
 * lease are never read as one, so the entry those words name is reclaimed once it is removed. */
START_TEST(only_lease_records_hold_memory)
{
	struct fx f;
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .reader_slots = 4 }; /* room after the table */
	fx_open_opts(&f, &o);
	ck_assert_int_eq(put(f.st, 0, 4, 4096, 1), 0);
	int32_t t[4];
	toks(t, 4, 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), 0);
	struct shm_arena *s = f.a->shm;
	struct l2_ext *mine = l2_ext_of(shm_reader_slot(s, (uint32_t)s->reader_slot));
	uint64_t rec = atomic_load(&mine->rec[l.slot_]); /* the entry's record */
	ck_assert_uint_ne(rec, 0);
	sc_lease_release(&l);
	mine->spare[0] = rec;
	uint32_t n = shm_readers_count(s);
	struct shm_reader_slot *past = shm_reader_slot(s, n);
	ck_assert_uint_le((uint64_t)((uint8_t *)(past + 1) - (uint8_t *)shm_reader_slot(s, 0)),
			  s->hv.regions[SHM_REGION_READERS].size);
	atomic_store(&past->state, SHM_SLOT_LIVE);
	atomic_store(&l2_ext_of(past)->rec[0], rec);
	/* nor does a FREE slot's record (its cleaner zeroes them; here one is scribbled) */
	struct shm_reader_slot *free_slot = shm_reader_slot(s, ((uint32_t)s->reader_slot + 1) % n);
	ck_assert_uint_eq(atomic_load(&free_slot->state), SHM_SLOT_FREE);
	atomic_store(&l2_ext_of(free_slot)->rec[SC_LEASES_MAX - 1], rec);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f.st, "ns", t, 4, &k), 0);
	ck_assert_uint_eq(stats(&f, NULL).leases, 0);
	ck_assert_int_eq(sc_l2_remove(f.st, k), 0);
	ck_assert_int_eq(sc_l2_clear(f.a), 0);
	ck_assert_uint_eq(stats(&f, NULL).pending_reclaim_bytes, 0);
	mine->spare[0] = 0;
	memset(past, 0, sizeof(*past));
	atomic_store(&l2_ext_of(free_slot)->rec[SC_LEASES_MAX - 1], 0);
	fx_close(&f);
}
END_TEST

/* An entry's frequency counts its hits up to 3 (S3-FIFO's counter), leases and copies alike;
 * peeks do not count. */
START_TEST(frequency_counts_hits_up_to_three)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 0, 4, 100, 1), 0);
	int32_t t[4];
	toks(t, 4, 0);
	struct sc_l2_entry_info info;
	uint8_t buf[100];
	for (uint32_t hit = 0; hit <= 5; hit++) {
		for (int peek = 0; peek < 2; peek++) {
			ck_assert_int_eq(sc_l2_peek(f.st, "ns", t, 4, &info), 0);
			ck_assert_uint_eq(info.frequency, hit < 3 ? hit : 3);
		}
		if (hit % 2) {
			struct sc_lease l;
			ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), 0);
			sc_lease_release(&l);
		} else {
			ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, buf, sizeof(buf), NULL), 100);
		}
	}
	fx_close(&f);
}
END_TEST

static int list_cb(const struct sc_l2_entry_info *e, void *ctx)
{
	uint64_t *seen = ctx;
	seen[0]++;
	seen[1] += e->bytes;
	return seen[2] && seen[0] == seen[2]; /* stop after seen[2] entries (0: never) */
}

static int cost_cb(const struct sc_l2_entry_info *e, void *ctx)
{
	uint64_t *wrong = ctx;
	*wrong += e->cost_ns != 5000 + e->bytes; /* admitted below with cost 5000 + its bytes */
	return 0;
}

/* Every listed entry reports the cost it was admitted with, the index's first entry included. */
START_TEST(listed_entries_report_their_cost)
{
	struct fx f;
	fx_open(&f);
	struct shm_index *ix = l2_ix(f.a);
	uint8_t buf[2000];
	int32_t t[4];
	uint32_t k;
	for (k = 0; k < 1000 && atomic_load(&ix->ent[0].state) != SHM_ENT_LIVE; k++) {
		fill(buf, 100 + k, k);
		toks(t, 4, (int32_t)k * 10);
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { 100 + k } };
		ck_assert_int_eq(sc_l2_admit_cost(f.st, "ns", t, 4, sc_digest(buf, 100 + k), &p, SC_ORIGIN_DIRECT, 5100 + k),
				 0);
	}
	ck_assert_msg(atomic_load(&ix->ent[0].state) == SHM_ENT_LIVE, "index entry 0 unused after %u admissions", k);
	uint64_t wrong = 0;
	ck_assert_int_eq(sc_l2_list(f.a, cost_cb, &wrong, 0), (int)k);
	ck_assert_uint_eq(wrong, 0);
	fx_close(&f);
}
END_TEST

/* sc_l2_list and the statistics see live entries only: not a removed one, not one whose block
 * was scribbled out of the heap, and not bytes past the index's table made to look like a copy of
 * a live entry (1500 entries: the region ends in slack). A callback that says stop stops it, and
 * a limit is a limit. */
START_TEST(listing_and_statistics_see_live_entries_only)
{
	struct fx f;
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .index_entries = 1500 };
	fx_open_opts(&f, &o);
	for (int32_t i = 0; i < 5; i++)
		ck_assert_int_eq(put(f.st, i * 10, 4, 1000 + (size_t)i, (uint32_t)i), 0);
	int32_t t[4];
	toks(t, 4, 40);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f.st, "ns", t, 4, &k), 0);
	ck_assert_int_eq(sc_l2_remove(f.st, k), 0);
	/* bytes past the table: a copy of the first live entry */
	struct shm_index *ix = l2_ix(f.a);
	uint64_t isize;
	uint8_t *ireg = shm_region(f.a->shm, SHM_REGION_INDEX, &isize);
	struct shm_index_entry *past = &ix->ent[ix->nentries], *live = NULL;
	ck_assert_uint_ge((uint64_t)(ireg + isize - (uint8_t *)past), sizeof(*past));
	for (uint32_t i = 0; !live && i < ix->nentries; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE)
			live = &ix->ent[i];
	ck_assert_ptr_nonnull(live);
	memcpy(past, live, sizeof(*past));
	/* and the header's bytes after its shards' records say bytes are pending */
	struct shm_index_shard *after = (struct shm_index_shard *)(void *)((uint8_t *)ix->hdr + sizeof(*ix->hdr));
	ck_assert((uint8_t *)(after + 1) <= ireg + SHM_INDEX_HDR_BYTES);
	after->pending_bytes = 12345;
	uint64_t seen[3] = { 0, 0, 0 };
	ck_assert_int_eq(sc_l2_list(f.a, list_cb, seen, 0), 4);
	ck_assert_uint_eq(seen[0], 4);
	ck_assert_uint_eq(seen[1], 1000 + 1001 + 1002 + 1003);
	struct sc_l2_stats st = stats(&f, NULL);
	ck_assert_uint_eq(st.entries, 4);
	ck_assert_uint_eq(st.logical_bytes, 1000 + 1001 + 1002 + 1003);
	ck_assert_uint_eq(st.pending_reclaim_bytes, 0);
	/* an entry whose payload offset was scribbled out of the heap is neither listed nor counted
	 * by the listing */
	struct shm_index_entry saved = *live;
	live->payload_off = 1;
	memset(seen, 0, sizeof(seen));
	ck_assert_int_eq(sc_l2_list(f.a, list_cb, seen, 0), 3);
	*live = saved;
	/* limits: a callback that stops, and max */
	uint64_t stop[3] = { 0, 0, 2 };
	ck_assert_int_eq(sc_l2_list(f.a, list_cb, stop, 0), 2);
	memset(seen, 0, sizeof(seen));
	ck_assert_int_eq(sc_l2_list(f.a, list_cb, seen, 3), 3);
	ck_assert_uint_eq(seen[0], 3);
	ck_assert_int_eq(sc_l2_list(f.a, list_cb, seen, 1), 1);
	ck_assert_int_eq(sc_l2_list(NULL, list_cb, seen, 0), -EINVAL);
	ck_assert_int_eq(sc_l2_list(f.a, NULL, seen, 0), -EINVAL);
	/* a stage's statistics count its own entries */
	struct sc_stage *other;
	ck_assert_int_eq(sc_stage_open(f.a, "model-A", "state-2", &other), 0);
	ck_assert_int_eq(put(other, 500, 4, 777, 9), 0);
	ck_assert_uint_eq(stats(&f, other).entries, 1);
	ck_assert_uint_eq(stats(&f, other).logical_bytes, 777);
	ck_assert_uint_eq(stats(&f, f.st).entries, 4);
	ck_assert_uint_eq(stats(&f, NULL).entries, 5);
	sc_stage_close(other);
	/* the parent's handle in a forked child lists nothing */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(sc_l2_list(f.a, list_cb, seen, 0) == -ECHILD ? 0 : 1);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	memset(past, 0, sizeof(*past));
	after->pending_bytes = 0;
	fx_close(&f);
}
END_TEST

/* Lookups check their arguments first: no stage, no lease, no tokens, no count, a copy with room
 * but no buffer, a peek with nowhere to put what it finds, a namespace longer than SC_IDENTITY_MAX,
 * the parent's handle in a forked child. Each is refused as such (never a miss of some other key),
 * none counts a lookup, and a refused sc_l2_get leaves an empty lease. */
START_TEST(lookups_refuse_bad_arguments)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 0, 4, 4096, 1), 0);
	int32_t t[4];
	toks(t, 4, 0);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f.st, "ns", t, 4, &k), 0);
	char *longns = too_long_ns();
	uint8_t buf[4096];
	struct sc_lease l;
	struct sc_l2_stats s0 = stats(&f, f.st);
	/* a refused sc_l2_get leaves the caller's lease empty (releasing it does nothing) */
#define GET_REFUSED(st_, ns_, t_, n_)                                                                      \
	do {                                                                                               \
		memset(&l, 0xa5, sizeof(l));                                                               \
		ck_assert_int_eq(sc_l2_get(st_, ns_, t_, n_, NULL, &l), -EINVAL);                          \
		ck_assert_ptr_null(l.arena_);                                                              \
		sc_lease_release(&l);                                                                      \
	} while (0)
	GET_REFUSED(NULL, "ns", t, 4);
	GET_REFUSED(f.st, "ns", NULL, 4);
	GET_REFUSED(f.st, "ns", t, 0);
	GET_REFUSED(f.st, longns, t, 4);
#undef GET_REFUSED
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, NULL), -EINVAL);
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_peek(NULL, "ns", t, 4, &info), -EINVAL);
	ck_assert_int_eq(sc_l2_peek(f.st, "ns", NULL, 4, &info), -EINVAL);
	ck_assert_int_eq(sc_l2_peek(f.st, "ns", t, 0, &info), -EINVAL);
	ck_assert_int_eq(sc_l2_peek(f.st, "ns", t, 4, NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_peek(f.st, longns, t, 4, &info), -EINVAL);
	ck_assert_int_eq(sc_l2_peek(f.st, "ns", t, 4, &info), 0);
	ck_assert_int_eq(sc_l2_get_key(NULL, k, &l), -EINVAL);
	ck_assert_int_eq(sc_l2_get_key(f.st, k, NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_get_copy(NULL, "ns", t, 4, NULL, buf, sizeof(buf), NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", NULL, 4, NULL, buf, sizeof(buf), NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 0, NULL, buf, sizeof(buf), NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, NULL, sizeof(buf), NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_get_copy(f.st, longns, t, 4, NULL, buf, sizeof(buf), NULL), -EINVAL);
	struct sc_l2_stats s1 = stats(&f, f.st);
	ck_assert_uint_eq(s1.hits, s0.hits);
	ck_assert_uint_eq(s1.misses, s0.misses);
	/* the parent's handle in a forked child: refused, by key and by tokens, for a lease or a copy */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(sc_l2_get(f.st, "ns", t, 4, NULL, &l) == -ECHILD && sc_l2_get_key(f.st, k, &l) == -ECHILD &&
				      sc_l2_get_copy(f.st, "ns", t, 4, NULL, buf, sizeof(buf), NULL) == -ECHILD
			      ? 0
			      : 1);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* and the entry is served here, once */
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, buf, sizeof(buf), NULL), 4096);
	ck_assert_uint_eq(stats(&f, f.st).hits, s0.hits + 1);
	free(longns);
	fx_close(&f);
}
END_TEST

/* A copy is checked against the entry's whole digest: bytes that match only its low half, or only
 * its high half, are refused (-EBADMSG), and so is an entry of a verifying arena that says it
 * stores no token ids (its meta bit scribbled): never served unverified. */
START_TEST(forged_digests_and_missing_token_ids_are_refused)
{
	struct fx f;
	fx_open(&f);
	ck_assert(l2_verify_tokens(f.a));
	ck_assert_int_eq(put(f.st, 0, 4, 4096, 1), 0);
	struct shm_index_entry *e = entry_of(&f, 0, 4);
	int32_t t[4];
	toks(t, 4, 0);
	uint8_t buf[4096];
	for (int half = 0; half < 2; half++) {
		uint64_t *w = half ? &e->digest_hi : &e->digest_lo;
		*w ^= 1;
		ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, buf, sizeof(buf), NULL), -EBADMSG);
		*w ^= 1;
	}
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, buf, sizeof(buf), NULL), 4096);
	e->meta &= ~L2_META_TOKENS;
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), -EBADMSG);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, 4, NULL, buf, sizeof(buf), NULL), -EBADMSG);
	fx_close(&f);
}
END_TEST

/* Arguments are checked first: no stage, no tokens (even with a wrong digest), a FULL_STATE or
 * RECURRENT_ONLY payload with a descriptor; a RECURRENT_ONLY payload without one is admitted. */
START_TEST(admission_arguments_are_checked_first)
{
	struct fx f;
	fx_open(&f);
	uint8_t buf[100];
	fill(buf, sizeof(buf), 3);
	int32_t t[4];
	toks(t, 4, 900);
	struct sc_payload p = { .kind = SC_PAYLOAD_RECURRENT_ONLY, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_digest d = sc_digest(buf, sizeof(buf)), bad = d;
	bad.hi ^= 1;
	ck_assert_int_eq(sc_l2_admit(NULL, "ns", t, 4, d, &p, 0), -EINVAL);
	struct sc_l2_resv r = { 0 };
	ck_assert_int_eq(sc_l2_publish(NULL, "ns", t, 4, d, &r, SC_PAYLOAD_FULL_STATE, 1, 0, NULL, 0, NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_publish(f.st, "ns", t, 4, d, NULL, SC_PAYLOAD_FULL_STATE, 1, 0, NULL, 0, NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_reserve(f.st, 100, NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_reserve(NULL, 100, &r), -EINVAL);
	ck_assert_ptr_null(r.ptr);
	sc_l2_reserve_release(NULL);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", NULL, 4, bad, &p, 0), -EINVAL);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_INVALID);
	/* a digest refusal is counted where the stage records end: still one stage */
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4, bad, &p, 0), -EBADMSG);
	uint64_t ids[4] = { 0 };
	ck_assert_int_eq(sc_l2_stage_ids(f.a, ids, 4), 1);
	ck_assert_uint_eq(ids[0], f.st->id);
	struct sc_payload no_sec = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { NULL, NULL }, .sec_len = { 0, 100 } };
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4, d, &no_sec, 0), -EINVAL); /* a length without its bytes */
	no_sec.sec_len[1] = 0;
	no_sec.sec_len[0] = 100;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4, d, &no_sec, 0), -EINVAL);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_INVALID);
	struct sc_kv_desc desc;
	memset(&desc, 0, sizeof(desc));
	struct sc_payload with_desc = p;
	with_desc.kv_desc = &desc;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4, d, &with_desc, 0), -EINVAL);
	with_desc.kind = SC_PAYLOAD_FULL_STATE;
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4, d, &with_desc, 0), -EINVAL);
	ck_assert_uint_eq(stats(&f, NULL).entries, 0);
	ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, 4, d, &p, 0), 0);
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_peek(f.st, "ns", t, 4, &info), 0);
	ck_assert_uint_eq(info.kind, SC_PAYLOAD_RECURRENT_ONLY);
	fx_close(&f);
}
END_TEST

/* The size checks at their bounds: an entry whose footprint is exactly the budget is admitted,
 * one a heap unit larger is refused as over the budget; one whose footprint is the heap's capacity
 * takes the whole heap, one a unit larger is refused as too large without evicting anything. */
static uint64_t footprint_of(uint64_t wire, uint64_t ntok)
{
	return shm_heap_footprint(l2_alloc_len_tok(wire, 0, ntok) | SHM_HEAP_PACKED);
}

static int put_refusal(struct fx *f, size_t bytes)
{
	int rc = put(f->st, 0, 4, bytes, 9);
	return rc ? sc_l2_last_refusal(f->st) : -1;
}

START_TEST(entries_at_the_size_bounds)
{
	struct fx f;
	fx_open(&f);
	uint64_t ntok = l2_verify_tokens(f.a) ? 4 : 0, fp = footprint_of(4096, ntok);
	size_t over = 4096;
	while (footprint_of(over, ntok) == fp)
		over++;
	ck_assert_int_eq(sc_l2_shrink_to(f.a, fp), 0);
	ck_assert_int_eq(put_refusal(&f, over), SC_L2_REFUSE_OVER_BUDGET);
	{ /* over the budget and worth nothing: refused once, for the first reason */
		uint8_t *b = calloc(1, over);
		int32_t t1[4] = { 1, 2, 3, 4 };
		struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { over } };
		struct sc_l2_stats s0 = stats(&f, NULL);
		ck_assert_int_eq(sc_l2_admit_cost(f.st, "ns", t1, 4, sc_digest(b, over), &pl, 0, 1), -E2BIG);
		ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_OVER_BUDGET);
		struct sc_l2_stats s1 = stats(&f, NULL);
		ck_assert_uint_eq(s1.admission_rejects, s0.admission_rejects + 1);
		ck_assert_uint_eq(s1.refused_low_benefit, s0.refused_low_benefit);
		free(b);
	}
	ck_assert_int_eq(put(f.st, 0, 4, 4096, 9), 0);
	ck_assert_uint_eq(stats(&f, NULL).bytes, fp);
	ck_assert_int_eq(sc_l2_clear(f.a), 1);
	/* so with reservations: one of exactly the budget is made, a larger one is over it */
	uint64_t rfp = shm_heap_footprint(l2_alloc_len(4096, 1)), rover = 4096;
	while (shm_heap_footprint(l2_alloc_len(rover, 1)) == rfp)
		rover++;
	ck_assert_int_eq(sc_l2_shrink_to(f.a, rfp), 0);
	struct sc_l2_resv r0;
	ck_assert_int_eq(sc_l2_reserve(f.st, rover - 1, &r0), 0);
	sc_l2_reserve_release(&r0);
	ck_assert_int_eq(sc_l2_reserve(f.st, rover, &r0), -E2BIG);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_OVER_BUDGET);
	ck_assert_int_eq(sc_l2_shrink_to(f.a, 0), 0);
	/* the heap holds blocks of at most its capacity (its header is not one): a larger entry is
	 * refused before it evicts anything (it emptied the cache first, then failed) */
	uint64_t cap = shm_heap_capacity(f.a->shm->hv.regions[SHM_REGION_HEAP].size);
	ck_assert_uint_lt(cap, f.a->shm->hv.regions[SHM_REGION_HEAP].size);
	size_t w = cap; /* the largest wire whose footprint is the capacity */
	while (footprint_of(w, ntok) > cap)
		w--;
	ck_assert_uint_eq(footprint_of(w, ntok), cap); /* the capacity is a whole number of units */
	for (int32_t i = 0; i < 4; i++)
		ck_assert_int_eq(put(f.st, 100 + i * 10, 4, 4096, (uint32_t)i), 0);
	ck_assert_int_eq(put_refusal(&f, w + 64), SC_L2_REFUSE_TOO_LARGE);
	uint64_t rb = cap - 8192; /* a reservation (page-aligned) whose footprint is just past it */
	while (shm_heap_footprint(l2_alloc_len(rb, 1)) <= cap)
		rb += 64;
	ck_assert_uint_le(shm_heap_footprint(l2_alloc_len(rb, 1)), f.a->shm->hv.regions[SHM_REGION_HEAP].size);
	struct sc_l2_resv r;
	ck_assert_int_eq(sc_l2_reserve(f.st, rb, &r), -E2BIG);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_TOO_LARGE);
	ck_assert_uint_eq(stats(&f, NULL).entries, 4);
	/* one of exactly the capacity takes the whole heap */
	ck_assert_int_eq(put(f.st, 0, 4, w, 9), 0);
	struct sc_l2_stats s = stats(&f, NULL);
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.bytes, cap);
	fx_close(&f);
}
END_TEST

/* A reservation holds the payload and room for a descriptor behind it; a publish whose token ids
 * need exactly that room stays in place, one token id more moves it into a block that has room. */
START_TEST(a_publish_with_exactly_its_room_stays_in_place)
{
	struct fx f;
	fx_open(&f);
	ck_assert(l2_verify_tokens(f.a));
	uint32_t fit = (uint32_t)(l2_alloc_len(4096, 1) - l2_tokens_at(4096, 0)) / 4;
	ck_assert_uint_eq(l2_alloc_len_tok(4096, 0, fit), l2_alloc_len(4096, 1));
	for (uint32_t n = fit; n <= fit + 1; n++) {
		int32_t *t = malloc(n * sizeof(*t));
		toks(t, n, (int32_t)n * 1000);
		struct sc_l2_resv r;
		ck_assert_int_eq(sc_l2_reserve(f.st, 4096, &r), 0);
		fill(r.ptr, 4096, n);
		const void *where = r.ptr;
		struct sc_lease l;
		ck_assert_int_eq(sc_l2_publish(f.st, "ns", t, n, sc_digest(r.ptr, 4096), &r, SC_PAYLOAD_FULL_STATE, 4096, 0,
					       NULL, SC_ORIGIN_FROM_L3, &l),
				 0);
		if (n == fit)
			ck_assert_ptr_eq(l.sec[0], where);
		else
			ck_assert_ptr_ne(l.sec[0], where);
		ck_assert_int_eq(sc_l2_entry_tokens(f.a, l.key, NULL, NULL, 0), n);
		sc_lease_release(&l);
		free(t);
	}
	fx_close(&f);
}
END_TEST

START_TEST(reserve_publish_in_place)
{
	struct fx f;
	fx_open(&f);
	struct sc_l2_resv r;
	ck_assert_int_eq(sc_l2_reserve(f.st, 0, &r), -EINVAL);
	ck_assert_int_eq(sc_l2_reserve(f.st, 1ull << 40, &r), -E2BIG);
	/* sizes whose allocation lengths would reach the heap's packed-request bit are still too large,
	 * never a few bytes (lengths saturate) */
	ck_assert_int_eq(sc_l2_reserve(f.st, UINT64_MAX / 4, &r), -E2BIG);
	ck_assert_int_eq(sc_l2_reserve(f.st, (1ull << 61) + 5, &r), -E2BIG);
	/* the largest sizes too (they were -EINVAL, which says "0 bytes"), counted as too large */
	ck_assert_int_eq(sc_l2_reserve(f.st, UINT64_MAX / 4 + 1, &r), -E2BIG);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_TOO_LARGE);
	ck_assert_int_eq(sc_l2_reserve(f.st, UINT64_MAX, &r), -E2BIG);
	ck_assert_int_eq(sc_l2_last_refusal(f.st), SC_L2_REFUSE_TOO_LARGE);
	ck_assert_uint_eq(sc_l2_footprint(f.a, UINT64_MAX / 4, 1, 16), UINT64_MAX);
	ck_assert_uint_eq(sc_l2_footprint(f.a, UINT64_MAX, 1, UINT32_MAX), UINT64_MAX);
	ck_assert_uint_eq(sc_l2_footprint(NULL, UINT64_MAX / 4 + 1, 0, 0), UINT64_MAX);
	ck_assert_uint_eq(sc_l2_footprint(NULL, (1ull << 62) - 64, 0, 0), UINT64_MAX);
	ck_assert_uint_eq(sc_l2_footprint(NULL, (1ull << 61) - 1, 1, UINT32_MAX), UINT64_MAX);
	/* as documented: the payload, the descriptor and the token ids each from a 64-byte boundary,
	 * the whole rounded to 64 bytes, and a 64-byte block header */
	ck_assert_uint_eq(sc_l2_footprint(f.a, 4096, 0, 16), 4096 + 64 + 64);
	ck_assert_uint_eq(sc_l2_footprint(NULL, 4096, 0, 16), 4096 + 64 + 64);
	ck_assert_uint_eq(sc_l2_footprint(f.a, 4000, 0, 16), 4032 + 64 + 64);
	ck_assert_uint_eq(sc_l2_footprint(f.a, 4096, 0, 17), 4096 + 128 + 64);
	ck_assert_uint_eq(sc_l2_footprint(f.a, 4096, 1, 16), 4096 + 64 * ((sizeof(struct sc_kv_desc) + 63) / 64) + 64 + 64);
	ck_assert_uint_eq(sc_l2_footprint(f.a, 1, 0, 1), 64 + 64 + 64);
	ck_assert_int_eq(sc_l2_reserve(f.st, 1 << 20, &r), 0);
	ck_assert_uint_eq((uintptr_t)r.ptr % 4096, 0);
	fill(r.ptr, 1 << 20, 42);
	struct sc_digest d = sc_digest(r.ptr, 1 << 20), bad = d;
	bad.hi++;
	int32_t t[5] = { 5, 4, 3, 2, 1 };
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_publish(f.st, "ns", t, 5, bad, &r, SC_PAYLOAD_FULL_STATE, 1 << 20, 0, NULL,
				       SC_ORIGIN_FROM_L3, &l), -EBADMSG);
	ck_assert_ptr_nonnull(r.ptr); /* still ours after a refusal */
	const void *where = r.ptr;
	ck_assert_int_eq(sc_l2_publish(f.st, "ns", t, 5, d, &r, SC_PAYLOAD_FULL_STATE, 1 << 20, 0, NULL,
				       SC_ORIGIN_FROM_L3, &l), 0);
	ck_assert_ptr_null(r.ptr);
	ck_assert_ptr_eq(l.sec[0], where); /* published in place: no copy */
	ck_assert_uint_eq(l.origin, SC_ORIGIN_FROM_L3);
	sc_lease_release(&l);
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 5, NULL, &l), 0);
	ck_assert(sc_digest_equal(sc_digest(l.sec[0], l.sec_len[0]), d));
	sc_lease_release(&l);
	/* release of an unpublished reservation frees it */
	ck_assert_int_eq(sc_l2_reserve(f.st, 5000, &r), 0);
	sc_l2_reserve_release(&r);
	sc_l2_reserve_release(&r);
	ck_assert_int_eq(sc_l2_clear(f.a), 1);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &hs), 0);
	ck_assert_uint_eq(hs.used_bytes, 0);
	fx_close(&f);
}
END_TEST

/* Every key put(@st, i * 10, 4, ...) stored for i < @n is refused as damaged (-EBADMSG). */
static void assert_keys_refused(struct sc_stage *st, int n)
{
	int32_t t[4];
	struct sc_lease l;
	for (int i = 0; i < n; i++) {
		toks(t, 4, i * 10);
		ck_assert_int_eq(sc_l2_get(st, "ns", t, 4, NULL, &l), -EBADMSG);
	}
}

/* An arena that stores no token ids checks none on a hit, so the index entry's own claim is all
 * there is: one flagged as storing token ids but counting none is damaged, and refused there too. */
START_TEST(a_tokens_flag_with_no_count_is_refused_without_verification)
{
	struct fx f;
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .flags = SC_ARENA_NO_TOKEN_VERIFY };
	fx_open_opts(&f, &o);
	ck_assert_int_eq(put(f.st, 0, 4, 5000, 1), 0);
	int32_t t[4];
	toks(t, 4, 0);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f.st, "ns", t, 4, &k), 0);
	struct shm_index_entry *e = (struct shm_index_entry *)sc_test_l2_entry(f.a, k);
	ck_assert_ptr_nonnull(e);
	ck_assert(!(e->meta & L2_META_TOKENS));
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), 0);
	sc_lease_release(&l);
	e->meta |= L2_META_TOKENS;
	ck_assert_uint_eq(e->token_count, 4);
	e->token_count = 0;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), -EBADMSG);
	e->meta &= ~L2_META_TOKENS;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, 4, NULL, &l), 0);
	sc_lease_release(&l);
	fx_close(&f);
}
END_TEST

/* Scribbled index contents: lookups fail with an error, never crash. */
START_TEST(hostile_index_contents)
{
	struct fx f;
	fx_open(&f);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(put(f.st, i * 10, 4, 5000, (uint32_t)i), 0);
	struct shm_index *ix = l2_ix(f.a);
	int32_t t[4];
	struct sc_lease l;
	uint8_t out[8192];
	/* 1. hostile payload offsets / lengths in every live entry */
	uint64_t saved_off[4096], saved_len[4096];
	uint32_t saved_meta[4096];
	ck_assert_uint_le(ix->nentries, 4096);
	for (uint32_t i = 0; i < ix->nentries; i++) {
		saved_off[i] = ix->ent[i].payload_off;
		saved_len[i] = ix->ent[i].sec_len[0];
		saved_meta[i] = ix->ent[i].meta;
	}
	/* ... and on the heap's 64-byte unit past its end: just past it, and far past it */
	const uint64_t evil[] = { 0, 1, f.a->shm->size - 10, UINT64_MAX - 100, 4096, ix->heap_lo,
				  ix->heap_lo + ((ix->heap_hi - ix->heap_lo) | 63) + 1,
				  ix->heap_lo + ((UINT64_MAX - ix->heap_lo) & ~63ull) };
	for (size_t v = 0; v < sizeof(evil) / sizeof(evil[0]); v++) {
		for (uint32_t i = 0; i < ix->nentries; i++)
			if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE)
				ix->ent[i].payload_off = evil[v];
		for (int i = 0; i < 20; i++) {
			toks(t, 4, i * 10);
			int rc = sc_l2_get(f.st, "ns", t, 4, NULL, &l);
			ck_assert_int_eq(rc, -EBADMSG);
			ck_assert_int_eq((int)sc_l2_get_copy(f.st, "ns", t, 4, NULL, out, sizeof(out), NULL), -EBADMSG);
		}
	}
	/* inside the heap's header, at the first block's header, off the 64-byte unit: never a
	 * payload, though every byte read would be inside the heap */
	for (uint64_t v = 0; v < 4; v++) {
		for (uint32_t i = 0; i < ix->nentries; i++)
			if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE)
				ix->ent[i].payload_off = v == 0 ? ix->heap_lo + 64
						       : v == 1 ? ix->heap_lo + SHM_HEAP_HDR_BYTES : saved_off[i] + 8 * (v - 1);
		assert_keys_refused(f.st, 20);
	}
	for (uint32_t i = 0; i < ix->nentries; i++) {
		ix->ent[i].payload_off = saved_off[i];
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE) {
			ix->ent[i].sec_len[0] = UINT64_MAX / 2;
			ix->ent[i].meta = saved_meta[i];
		}
	}
	assert_keys_refused(f.st, 20);
	for (uint32_t i = 0; i < ix->nentries; i++)
		ix->ent[i].sec_len[0] = saved_len[i];
	/* sections a FULL_STATE entry cannot have: none at all, a second one, a KV descriptor; and
	 * KV_RECURRENT sections whose lengths wrap around to a small sum (64 bytes), either one huge */
	const uint64_t l0s[] = { 0, 4000, 4000, UINT64_MAX - 63, 128 }, l1s[] = { 0, 64, 0, 128, UINT64_MAX - 63 };
	for (int v = 0; v < 5; v++) {
		for (uint32_t i = 0; i < ix->nentries; i++) {
			if (atomic_load(&ix->ent[i].state) != SHM_ENT_LIVE)
				continue;
			ix->ent[i].sec_len[0] = l0s[v];
			ix->ent[i].sec_len[1] = l1s[v];
			ix->ent[i].meta = v == 2 ? saved_meta[i] | 1u << 16
				        : v >= 3 ? (saved_meta[i] & ~0xffu) | SC_PAYLOAD_KV_RECURRENT : saved_meta[i];
		}
		assert_keys_refused(f.st, 20);
	}
	for (uint32_t i = 0; i < ix->nentries; i++)
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE)
			ix->ent[i].sec_len[0] = saved_len[i], ix->ent[i].sec_len[1] = 0, ix->ent[i].meta = saved_meta[i];
	/* an unknown kind (above the last, or 0 below the first) and an unknown origin */
	for (int v = 0; v < 3; v++) {
		for (uint32_t i = 0; i < ix->nentries; i++)
			if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE)
				ix->ent[i].meta = v == 0 ? 77 : v == 1 ? saved_meta[i] & ~0xffu : saved_meta[i] | 2u << 8;
		assert_keys_refused(f.st, 20);
	}
	for (uint32_t i = 0; i < ix->nentries; i++)
		ix->ent[i].meta = saved_meta[i];
	/* token ids flagged but none counted */
	uint64_t saved_ntok[4096];
	for (uint32_t i = 0; i < ix->nentries; i++) {
		saved_ntok[i] = ix->ent[i].token_count;
		if (atomic_load(&ix->ent[i].state) == SHM_ENT_LIVE) {
			ck_assert(ix->ent[i].meta & L2_META_TOKENS);
			ix->ent[i].token_count = 0;
		}
	}
	assert_keys_refused(f.st, 20);
	for (uint32_t i = 0; i < ix->nentries; i++)
		ix->ent[i].token_count = saved_ntok[i];
	/* 2. hostile bucket heads and chain links */
	for (uint32_t b = 0; b <= ix->mask; b++)
		atomic_store(&ix->buckets[b], b % 3 == 0 ? 0xffffffffu : (b % 3 == 1 ? ix->nentries + 1 : 2));
	for (int i = 0; i < 20; i++) {
		toks(t, 4, i * 10);
		int rc = sc_l2_get(f.st, "ns", t, 4, NULL, &l);
		/* a head may by chance point at the very entry of this key: then it is a real hit */
		ck_assert(rc == -EBADMSG || rc == -ENOENT || rc == 0);
		if (rc == 0) {
			ck_assert(sc_digest_equal(sc_digest(l.sec[0], l.sec_len[0]), l.digest));
			sc_lease_release(&l);
		}
		struct sc_l2_entry_info info;
		rc = sc_l2_peek(f.st, "ns", t, 4, &info);
		ck_assert(rc == -EBADMSG || rc == -ENOENT || rc == 0);
	}
	/* a cycle: every entry points to itself */
	for (uint32_t i = 0; i < ix->nentries; i++)
		atomic_store(&ix->ent[i].next, i + 1);
	for (uint32_t b = 0; b <= ix->mask; b++)
		atomic_store(&ix->buckets[b], (b % ix->nentries) + 1);
	for (int i = 0; i < 20; i++) {
		toks(t, 4, i * 10);
		int rc = sc_l2_get(f.st, "ns", t, 4, NULL, &l);
		ck_assert(rc == -EBADMSG || rc == -ENOENT || rc == 0);
		sc_lease_release(&l);
	}
	/* the listing and stats survive too */
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(f.a, NULL, &s), 0);
	/* and a writer repairs what it finds corrupted: admits work again and then hit */
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(put(f.st, 1000 + i * 10, 4, 500, (uint32_t)i), 0);
		ck_assert(has(f.st, 1000 + i * 10, 4));
	}
	fx_close(&f);
}
END_TEST

/* An entry in the heap's last block whose bytes (payload, then its token ids) end at the heap's
 * last byte is served: an entry's bounds are the heap's, to its end. */
START_TEST(an_entry_ending_at_the_heaps_last_byte_is_served)
{
	struct fx f;
	fx_open(&f);
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(f.a->shm, &hs), 0);
	ck_assert_uint_eq(hs.free_blocks, 1); /* nothing stored: one free block, to the heap's end */
	/* packed: a block header, the payload (a multiple of 64 bytes), then 16 token ids (64 bytes) */
	const size_t n = 16, bytes = hs.free_bytes - 2 * SHM_HEAP_BLOCK_HDR;
	ck_assert_int_eq(put(f.st, 7, n, bytes, 3), 0);
	int32_t t[16];
	toks(t, n, 7);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(f.st, "ns", t, n, &k), 0);
	struct shm_index *ix = l2_ix(f.a);
	const struct shm_index_entry *e = sc_test_l2_entry(f.a, k);
	ck_assert_ptr_nonnull(e);
	ck_assert(e->meta & L2_META_TOKENS);
	ck_assert_uint_eq(e->footprint, hs.free_bytes);
	ck_assert_uint_eq(e->payload_off + bytes + 4 * n, ix->heap_hi);
	uint8_t *got = malloc(bytes), *want = malloc(bytes);
	ck_assert(got && want);
	fill(want, bytes, 3);
	ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, n, NULL, got, bytes, NULL), (int64_t)bytes);
	ck_assert(memcmp(got, want, bytes) == 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(f.st, "ns", t, n, NULL, &l), 0);
	ck_assert_uint_eq(l.sec_len[0], bytes);
	sc_lease_release(&l);
	free(got);
	free(want);
	fx_close(&f);
}
END_TEST

START_TEST(corrupted_index_header_is_refused)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("l2h", ARENA, &name);
	struct shm_index_hdr *h = shm_region(a->shm, SHM_REGION_INDEX, NULL);
	h->nbuckets = 3;
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), -EBADMSG);
	h->nbuckets = 1u << 30;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), -EBADMSG);
	h->magic = 0;
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), -EBADMSG);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Scribbled writer state (shard lists), counters and lease areas: errors or repair, never a crash. */
START_TEST(hostile_shard_lists_counters_and_leases)
{
	struct fx f;
	fx_open(&f);
	for (int i = 0; i < 40; i++)
		ck_assert_int_eq(put(f.st, i * 10, 4, 3000, (uint32_t)i), 0);
	struct shm_index *ix = l2_ix(f.a);
	const uint32_t evil[] = { 0xffffffffu, ix->nentries + 5, 2, 17 };
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		ix->hdr->shards[s].free_head = evil[s % 4];
		ix->hdr->shards[s].pending_head = evil[(s + 1) % 4];
	}
	/* writes still work (the shard is rebuilt from its entry states) and nothing is lost */
	for (int i = 40; i < 80; i++)
		ck_assert_int_eq(put(f.st, i * 10, 4, 3000, (uint32_t)i), 0);
	for (int i = 0; i < 80; i++)
		ck_assert(has(f.st, i * 10, 4));
	struct sc_l2_stats s = stats(&f, NULL);
	ck_assert_uint_eq(s.entries, 80);
	/* counters and other processes' lease areas full of garbage */
	uint64_t size;
	uint8_t *st = shm_region(f.a->shm, SHM_REGION_STATS, &size);
	for (uint64_t i = 0; i < size; i++)
		st[i] = (uint8_t)(i * 37 + 11);
	for (uint32_t i = 0; i < shm_readers_count(f.a->shm); i++) {
		if ((int32_t)i == f.a->shm->reader_slot)
			continue;
		memset(shm_reader_slot(f.a->shm, i)->ext, 0xa5, SHM_READER_EXT_BYTES);
	}
	ck_assert_int_eq(sc_l2_stats(f.a, f.st, &s), 0);
	ck_assert_int_eq(sc_l2_stats(f.a, NULL, &s), 0);
	ck_assert_int_eq(put(f.st, 5000, 4, 3000, 1), 0);
	ck_assert(has(f.st, 5000, 4));
	ck_assert_int_ge(sc_l2_clear(f.a), 81);
	for (uint32_t i = 0; i < shm_readers_count(f.a->shm); i++)
		if ((int32_t)i != f.a->shm->reader_slot)
			memset(shm_reader_slot(f.a->shm, i)->ext, 0, SHM_READER_EXT_BYTES);
	fx_close(&f);
}
END_TEST

/* More keys than index entries: a full shard evicts within itself. */
START_TEST(index_capacity_is_recycled)
{
	struct sc_arena_opts o = { .size_bytes = ARENA, .huge = SC_HUGE_OFF, .index_entries = 1024 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("l2i", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	for (int i = 0; i < 3000; i++)
		ck_assert_int_eq(put(st, i * 16, 4, 100, (uint32_t)i), 0);
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_le(s.entries, 1024);
	ck_assert_uint_ge(s.entries, 512);
	ck_assert_uint_eq(s.inserts, 3000);
	ck_assert_uint_eq(s.evictions, 3000 - s.entries);
	ck_assert(has(st, 2999 * 16, 4));
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Defect 10: an unknown origin, n == 0 and NULL tokens were refused without being
 * counted in admission_rejects, contrary to the header. */
START_TEST(regression_every_refusal_is_counted)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("rejects", ARENA, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	static uint8_t buf[1000];
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_digest d = sc_digest(buf, sizeof(buf));
	int32_t t[2] = { 1, 2 };
	struct sc_payload nullsec = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { NULL }, .sec_len = { 10 } };
	ck_assert_int_eq(sc_l2_admit(st, "", t, 2, d, &p, 7), -EINVAL);      /* unknown origin */
	ck_assert_int_eq(sc_l2_admit(st, "", t, 0, d, &p, 0), -EINVAL);      /* n == 0 */
	ck_assert_int_eq(sc_l2_admit(st, "", NULL, 2, d, &p, 0), -EINVAL);   /* NULL tokens */
	ck_assert_int_eq(sc_l2_admit(st, "", t, 2, d, NULL, 0), -EINVAL);    /* NULL payload */
	ck_assert_int_eq(sc_l2_admit(st, "", t, 2, d, &nullsec, 0), -EINVAL); /* a length with no bytes */
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_eq(s.admission_rejects, 5);
	ck_assert_uint_eq(s.entries, 0);
	ck_assert_int_eq(sc_l2_stats(a, st, &s), 0);
	ck_assert_uint_eq(s.admission_rejects, 5);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The stage-table record at @slot (taken modulo the table's size, as the probes wrap). */
static struct l2_stage_rec *rec_at(struct l2_stats_region *r, uint32_t slot)
{
	return &r->stages[slot % L2_STAGE_RECS];
}

static uint64_t slot_id(struct l2_stats_region *r, uint32_t slot)
{
	return atomic_load(&rec_at(r, slot)->stage_id);
}

/* A stage whose 64 probe slots in the stats region's stage table are all taken by other stages has
 * no record there: it opens, counts into the global line only, and its token cost is its handle's
 * alone (-ENOSPC); the first slot past its probes stays free, and a stage that probes it gets it. */
START_TEST(a_stage_past_its_probes_has_no_record)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("stagefull", ARENA, &name);
	struct sc_stage *st, *full, *next;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	uint64_t id = sc_stage_id(st);
	struct l2_stats_region *r = l2_stats_region(a);
	uint32_t home = (uint32_t)(id % L2_STAGE_RECS);
	ck_assert_uint_eq(slot_id(r, home), id);
	sc_stage_close(st);
	for (uint32_t i = 0; i < 64; i++) /* forged: 64 other stages own every slot it probes */
		atomic_store(&rec_at(r, home + i)->stage_id, id + 1000 + i);
	uint32_t past = (home + 64) % L2_STAGE_RECS;
	ck_assert_uint_eq(slot_id(r, past), 0);
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &full), 0);
	ck_assert_uint_eq(sc_stage_id(full), id);
	ck_assert_uint_eq(slot_id(r, past), 0);
	ck_assert_int_eq(sc_stage_set_token_cost(full, 123), -ENOSPC);
	uint64_t cost = 0;
	ck_assert_int_eq(sc_stage_token_cost(full, &cost), 0);
	ck_assert_uint_eq(cost, 123);
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats_id(a, id, &s), -ENOENT);
	struct sc_miss_stats m;
	ck_assert_int_eq(sc_miss_stats(a, id, &m), -ENOENT);
	static uint8_t buf[1000];
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	int32_t t[2] = { 1, 2 };
	ck_assert_int_eq(sc_l2_admit(full, "", t, 2, sc_digest(buf, sizeof(buf)), &p, 0), 0);
	ck_assert_int_eq(sc_l2_admit(full, "", t, 2, sc_digest(buf, sizeof(buf)), &p, 7), -EINVAL);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(full, "", t, 2, NULL, &l), 0);
	sc_lease_release(&l);
	t[1] = 3;
	ck_assert_int_eq(sc_l2_get(full, "", t, 2, NULL, &l), -ENOENT);
	ck_assert_int_eq(sc_l2_stats(a, full, &s), 0); /* its entries; no counters of its own */
	ck_assert_uint_eq(s.entries, 1);
	ck_assert_uint_eq(s.inserts + s.admission_rejects + s.hits + s.misses, 0);
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0); /* the global line: nothing else has counted */
	ck_assert_uint_eq(s.inserts, 1);
	ck_assert_uint_eq(s.admission_rejects, 1);
	ck_assert_uint_eq(s.hits, 1);
	ck_assert_uint_eq(s.misses, 1);
	for (uint32_t i = 0; i < 64; i++) { /* no forged record counted any of it */
		struct l2_stage_rec *o = rec_at(r, home + i);
		ck_assert_uint_eq(atomic_load(&o->c.inserts) + atomic_load(&o->c.hits) + atomic_load(&o->c.misses) +
					  atomic_load(&o->c.admission_rejects),
				  0);
	}
	ck_assert_int_eq(sc_miss_stats(a, 0, &m), 0);
	ck_assert_uint_eq(m.l2[SC_MISS_NEVER_STORED], 1);
	/* a free slot anywhere on the probes is taken: freeing the last one gives it a record */
	atomic_store(&rec_at(r, home + 63)->stage_id, 0);
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &next), 0);
	ck_assert_uint_eq(slot_id(r, home + 63), id);
	ck_assert_int_eq(sc_stage_set_token_cost(next, 77), 0);
	ck_assert_int_eq(sc_stage_token_cost(next, &cost), 0);
	ck_assert_uint_eq(cost, 77);
	ck_assert_int_eq(sc_stage_token_cost(full, &cost), 0);
	ck_assert_uint_eq(cost, 123); /* a handle opened without a record keeps its own */
	ck_assert_int_eq(sc_l2_stats_id(a, id, &s), 0);
	sc_stage_close(next);
	sc_stage_close(full);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Another process claims the slot an opening stage is about to claim (a hook at the schedule point
 * between its look and its CAS): for the same stage the opener shares that record; for another
 * stage it probes on and claims the next slot. Either way the stage has one record. */
struct claim_race {
	struct l2_stats_region *r;
	uint64_t as; /* the id the other process claims the slot for */
	uint32_t slot, seen;
};

static void claim_first(const char *point, void *ctx)
{
	struct claim_race *c = ctx;
	if (strcmp(point, "l2.stage.claim") || c->seen++)
		return;
	atomic_store(&rec_at(c->r, c->slot)->stage_id, c->as);
}

START_TEST(a_stage_claimed_meanwhile_has_one_record)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("stagerace", ARENA, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	uint64_t id = sc_stage_id(st);
	struct l2_stats_region *r = l2_stats_region(a);
	uint32_t home = (uint32_t)(id % L2_STAGE_RECS);
	sc_stage_close(st);
	for (int same = 1; same >= 0; same--) {
		atomic_store(&rec_at(r, home)->stage_id, 0);
		atomic_store(&rec_at(r, home + 1)->stage_id, 0);
		struct claim_race c = { .r = r, .as = same ? id : id + 1, .slot = home };
		shm_sched_set(claim_first, &c);
		int rc = sc_stage_open(a, "m", "s", &st);
		shm_sched_set(NULL, NULL);
		ck_assert_int_eq(rc, 0);
		ck_assert_uint_eq(c.seen, 1 + !same); /* a lost claim of another's slot probes on */
		ck_assert_uint_eq(slot_id(r, home), c.as);
		ck_assert_uint_eq(slot_id(r, home + 1), same ? 0 : id);
		ck_assert_int_eq(sc_stage_set_token_cost(st, 40 + same), 0);
		ck_assert_uint_eq(atomic_load(&rec_at(r, home + !same)->token_cost), 40 + same);
		sc_stage_close(st);
	}
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Closing a stage takes that handle, and only it, off its arena handle's list: the hits of every
 * other stage are still flushed by the statistics (which flush every stage on the list). */
START_TEST(closing_a_stage_keeps_the_others_counted)
{
	struct fx f;
	(void)fx_open_one(&f);
	struct sc_stage *st[4] = { f.st };
	ck_assert_int_eq(sc_stage_open(f.a, "model-A", "state-2", &st[1]), 0);
	ck_assert_int_eq(sc_stage_open(f.a, "model-A", "state-3", &st[2]), 0);
	ck_assert_int_eq(sc_stage_open(f.a, "model-A", "state-4", &st[3]), 0);
	int32_t t[4];
	toks(t, 4, 10);
	static const int order[2] = { 2, 3 }; /* one in the middle of the list, then its head */
	for (int round = 0; round < 2; round++) {
		sc_stage_close(st[order[round]]);
		st[order[round]] = NULL;
		uint64_t h0 = stats(&f, NULL).hits;
		unsigned open = 0;
		for (int i = 0; i < 4; i++) {
			if (!st[i])
				continue;
			open++;
			/* each stage stores its own entry (a key is per stage), then hits it 5 times */
			if (i && round == 0)
				ck_assert_int_eq(put(st[i], 10, 4, 3000, 1), 0);
			for (int j = 0; j < 5; j++) {
				struct sc_lease l;
				ck_assert_int_eq(sc_l2_get(st[i], "ns", t, 4, NULL, &l), 0);
				sc_lease_release(&l);
			}
		}
		ck_assert_uint_eq(stats(&f, NULL).hits, h0 + 5 * open);
	}
	sc_stage_close(st[1]);
	fx_close(&f);
}
END_TEST

/* The admin calls refuse a missing arena or stage, and an entry stored beside survives them. */
START_TEST(admin_calls_refuse_a_missing_handle)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("admin-null", ARENA, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	static uint8_t buf[1000];
	memset(buf, 7, sizeof(buf));
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_digest d = sc_digest(buf, sizeof(buf));
	int32_t t[2] = { 5, 6 };
	ck_assert_int_eq(sc_l2_admit(st, "", t, 2, d, &p, 0), 0);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(st, "", t, 2, &k), 0);
	ck_assert_int_eq(sc_l2_clear(NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_shrink_to(NULL, 0), -EINVAL);
	ck_assert_int_eq(sc_l2_invalidate_digest(NULL, d), -EINVAL);
	ck_assert_int_eq(sc_l2_remove(NULL, k), -EINVAL);
	ck_assert_int_eq(l2_invalidate_why(NULL, d, SC_MISS_QUARANTINED), -EINVAL);
	/* stage id 0 is no stage: never found, never claimed (slot 0's record stays free) */
	ck_assert_ptr_null(l2_stage_rec_find(a, 0, 0));
	ck_assert_ptr_null(l2_stage_rec_find(a, 0, 1));
	uint64_t slot0 = atomic_load(&l2_stats_region(a)->stages[0].stage_id);
	ck_assert(slot0 == 0 || slot0 == sc_stage_id(st)); /* free, or st's own home */
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "", t, 2, NULL, &l), 0);
	ck_assert_int_eq(memcmp(l.sec[0], buf, sizeof(buf)), 0);
	sc_lease_release(&l);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- the command line: put / get --out reproduce the payload byte for byte ---- */

#define run sc_test_sh

static int same_file(const char *a, const char *b)
{
	return run("cmp -s %s %s", a, b) == 0;
}

START_TEST(cli_put_get_round_trip)
{
	const char *bin = "build/stagecache";
	if (access(bin, X_OK)) {
		sc_skip("%s not built (run make first)", bin);
		return;
	}
	const char *name;
	struct sc_arena *a = sc_test_arena("l2cli", ARENA, &name);
	char dir[] = "/tmp/sc-l2cli-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char p[256], kv[256], rec[256], desc[256], out[256], wire[256], tk[256];
	snprintf(p, sizeof(p), "%s/payload", dir);
	snprintf(kv, sizeof(kv), "%s/kv", dir);
	snprintf(rec, sizeof(rec), "%s/rec", dir);
	snprintf(desc, sizeof(desc), "%s/desc.json", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(wire, sizeof(wire), "%s/wire", dir);
	snprintf(tk, sizeof(tk), "%s/tokens", dir);
	ck_assert_int_eq(run("head -c 1234567 /dev/urandom > %s", p), 0);
	const char *q = "--model m --state s --ns n";
	ck_assert_int_eq(run("%s put %s %s --tokens 1,2,3 --kind full_state --file %s >/dev/null", bin, name, q, p), 0);
	ck_assert_int_eq(run("%s get %s %s --tokens 1,2,3 --out %s >/dev/null", bin, name, q, out), 0);
	ck_assert(same_file(p, out));
	/* tokens from a file, kv_recurrent with a descriptor */
	ck_assert_int_eq(run("printf '1 2\n3,4' > %s && head -c 8192 /dev/urandom > %s && head -c 999 /dev/urandom > %s",
			     tk, kv, rec), 0);
	ck_assert_int_eq(run("echo '{\"version\": 1, \"token_count\": 4, \"payload_bytes\": 8192, "
			     "\"components\": []}' > %s", desc), 0);
	ck_assert_int_eq(run("%s put %s %s --tokens @%s --kind kv_recurrent --kv-file %s --recurrent-file %s "
			     "--desc-json %s --origin l3 >/dev/null", bin, name, q, tk, kv, rec, desc), 0);
	ck_assert_int_eq(run("cat %s %s > %s", kv, rec, wire), 0);
	ck_assert_int_eq(run("%s get %s %s --tokens 1,2,3,4 --out %s >/dev/null", bin, name, q, out), 0);
	ck_assert(same_file(wire, out));
	ck_assert_int_eq(run("%s peek %s %s --tokens 1,2,3,4 --json | grep -q '\"origin\":\"l3\"'", bin, name, q), 0);
	ck_assert_int_eq(run("%s ls %s --json | wc -l | grep -qx 2", bin, name), 0);
	/* errors: a miss (1), usage (2), a refused admission (1), a bad descriptor (1) */
	ck_assert_int_eq(run("%s get %s %s --tokens 9 2>/dev/null", bin, name, q), 1);
	ck_assert_int_eq(run("%s get %s %s --tokens 1,x 2>/dev/null", bin, name, q), 2);
	ck_assert_int_eq(run("%s get %s --tokens 1 2>/dev/null", bin, name), 2);
	ck_assert_int_eq(run("%s put %s %s --tokens 5 --kind full --file %s --digest %032d 2>/dev/null", bin, name, q, p, 0), 1);
	ck_assert_int_eq(run("%s put %s %s --tokens 5 --kind bogus --file %s 2>/dev/null", bin, name, q, p), 2);
	ck_assert_int_eq(run("%s put %s %s --tokens 5 --kind kv --kv-file %s --desc-json %s 2>/dev/null", bin, name, q, kv, p), 1);
	ck_assert_int_eq(run("%s invalidate %s nothex 2>/dev/null", bin, name), 2);
	ck_assert_int_eq(run("%s rm %s %s --tokens 1,2,3 >/dev/null", bin, name, q), 0);
	ck_assert_int_eq(run("%s rm %s %s --tokens 1,2,3 2>/dev/null", bin, name, q), 1);
	ck_assert_int_eq(run("%s stats %s --json | grep -q '\"entries\":1,'", bin, name), 0);
	/* rm by the key 'ls' prints */
	ck_assert_int_eq(run("%s put %s %s --tokens 77 --kind recurrent_only --file %s >/dev/null", bin, name, q, rec), 0);
	ck_assert_int_eq(run("k=$(%s ls %s --json | grep '\"tokens\":1,' | sed 's/.*\"key\":\"\\([0-9a-f]*\\)\".*/\\1/') && "
			     "%s rm %s --key $k >/dev/null", bin, name, bin, name), 0);
	ck_assert_int_eq(run("%s peek %s %s --tokens 77 2>/dev/null", bin, name, q), 1);
	ck_assert_int_eq(run("%s clear %s >/dev/null", bin, name), 0);
	ck_assert_int_eq(run("%s stats %s --json | grep -q '\"entries\":0,'", bin, name), 0);
	ck_assert_int_eq(run("%s put --help >/dev/null && %s get --help >/dev/null && %s ls --help >/dev/null", bin, bin, bin), 0);
	run("rm -rf %s", dir);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Digests are compared whole, at every comparison: a location, an expected digest or an
 * invalidation whose digest differs from the entry's in one half only (either half, one bit) is a
 * mismatch. A compare of one half serves, keeps or drops the wrong entry. */
START_TEST(digests_differing_in_one_half_never_match)
{
	struct fx f;
	fx_open(&f);
	enum { N = 8, BYTES = 5000 };
	uint8_t buf[BYTES];
	fill(buf, BYTES, 77);
	struct sc_digest d = sc_digest(buf, BYTES);
	struct sc_digest halves[2] = { { d.lo ^ 1, d.hi }, { d.lo, d.hi ^ (1ull << 63) } };
	int32_t t[N];
	toks(t, N, 4000);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { BYTES } };
	for (int h = 0; h < 2; h++) {
		/* admit with an expected digest off by one half: refused, nothing stored */
		ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, N, halves[h], &p, SC_ORIGIN_DIRECT), -EBADMSG);
		ck_assert(!has(f.st, 4000, N));
		ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, N, d, &p, SC_ORIGIN_DIRECT), 0);
		/* invalidating the half-equal digest removes nothing */
		ck_assert_int_eq(sc_l2_invalidate_digest(f.a, halves[h]), 0);
		ck_assert(has(f.st, 4000, N));
		/* a location naming the half-equal digest: a mismatch (a miss, and the mirror dropped) */
		struct sc_location loc = { .token_count = N, .digest = halves[h] };
		struct sc_lease l;
		ck_assert_int_eq(sc_l2_get(f.st, "ns", t, N, &loc, &l), -ENOENT);
		ck_assert(!has(f.st, 4000, N));
		ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, N, d, &p, SC_ORIGIN_DIRECT), 0);
		uint8_t out[BYTES];
		ck_assert_int_eq(sc_l2_get_copy(f.st, "ns", t, N, &loc, out, sizeof(out), NULL), -ENOENT);
		ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, N, d, &p, SC_ORIGIN_DIRECT), 0);
		/* the right location still hits, and the right invalidation removes it */
		loc.digest = d;
		ck_assert_int_eq(sc_l2_get(f.st, "ns", t, N, &loc, &l), 0);
		sc_lease_release(&l);
		loc.token_count = N - 1; /* the count is part of the location too */
		ck_assert_int_eq(sc_l2_get(f.st, "ns", t, N, &loc, &l), -ENOENT);
		ck_assert_int_eq(sc_l2_admit(f.st, "ns", t, N, d, &p, SC_ORIGIN_DIRECT), 0);
		ck_assert_int_eq(sc_l2_invalidate_digest(f.a, d), 1);
		ck_assert(!has(f.st, 4000, N));
	}
	fx_close(&f);
}
END_TEST

/* A handle whose first L2 call meets a scribbled index header gets -EBADMSG from every
 * administrative call (clear, invalidate, shrink, remove) and cannot open a stage, and nothing is
 * touched. A handle that checked the header before (its first L2 call) keeps its own copy of the
 * bounds and does not read the header again: its lookups, admissions and statistics go on. */
START_TEST(admin_calls_on_a_scribbled_index_are_ebadmsg)
{
	struct fx f;
	fx_open(&f);
	ck_assert_int_eq(put(f.st, 10, 4, 3000, 1), 0);
	struct shm_index *ix = l2_ix(f.a);
	uint32_t magic = ix->hdr->magic;
	ix->hdr->magic ^= 0x5a5a5a5au;
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(f.name, &b), 0);
	ck_assert_int_eq(sc_l2_clear(b), -EBADMSG);
	ck_assert_int_eq(sc_l2_invalidate_digest(b, (struct sc_digest){ 1, 2 }), -EBADMSG);
	ck_assert_int_lt(sc_l2_shrink_to(b, 0), 0);
	struct sc_stage *sb;
	ck_assert_int_eq(sc_stage_open(b, "model-A", "state-1", &sb), -EBADMSG);
	ck_assert(has(f.st, 10, 4));
	ck_assert_int_eq(put(f.st, 20, 4, 3000, 2), 0);
	ck_assert(has(f.st, 20, 4));
	ck_assert_uint_eq(stats(&f, NULL).entries, 2);
	ix->hdr->magic = magic;
	ck_assert(has(f.st, 10, 4));
	sc_arena_close(b);
	fx_close(&f);
}
END_TEST

/* A removal whose walk meets a scribbled link repairs the chain (cuts the link) and looks again:
 * the answer is the one for the repaired chain (-ENOENT for a key not there, 0 for one that is),
 * never -EBADMSG, and the entries before the cut stay. */
START_TEST(remove_repairs_a_scribbled_chain_and_looks_again)
{
	struct fx f;
	struct sc_key k = fx_open_one(&f);
	struct shm_index *ix = l2_ix(f.a);
	int err;
	struct shm_index_entry *e = shm_index_find(ix, k.lo, k.hi, &err);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(atomic_load(&e->next), 0); /* alone in its bucket */
	struct sc_key other = { k.lo, k.hi ^ 1 };    /* the same bucket, not stored */
	for (int round = 0; round < 2; round++) {
		atomic_store(&e->next, ix->nentries + 1 + (uint32_t)round); /* beyond the table */
		ck_assert_ptr_null(shm_index_find(ix, other.lo, other.hi, &err));
		ck_assert_int_eq(err, -EBADMSG);
		if (round == 0) {
			ck_assert_int_eq(sc_l2_remove(f.st, other), -ENOENT);
			ck_assert_uint_eq(atomic_load(&e->next), 0); /* cut */
			ck_assert(has(f.st, 10, 4));
		} else {
			ck_assert_int_eq(sc_l2_remove(f.st, k), 0); /* found before the link: removed */
			ck_assert(!has(f.st, 10, 4));
			ck_assert_ptr_null(shm_index_find(ix, other.lo, other.hi, &err));
			ck_assert_int_eq(err, 0); /* the bad link did not move into the bucket */
		}
	}
	fx_close(&f);
}
END_TEST

/* Removals that must change nothing: one whose shard lock cannot be taken (its mutex scribbled)
 * says why and leaves the entry linked and served and the lock word as it was; invalidation and
 * clearing remove LIVE entries only, so an entry linked in its chain whose state is not LIVE (BUSY:
 * a writer that died linking it; forged here) is left as it is. */
START_TEST(removals_that_must_change_nothing)
{
	struct fx f;
	struct sc_key k = fx_open_one(&f);
	struct shm_index *ix = l2_ix(f.a);
	struct shm_mutex *mu = &ix->hdr->shards[shm_index_shard_of_bucket(shm_index_bucket(ix, k.lo))].mu;
	uint32_t magic = mu->magic;
	mu->magic = magic ^ 1;
	ck_assert_int_eq(sc_l2_remove(f.st, k), -EBADMSG);
	ck_assert_uint_eq(atomic_load(&mu->word), 0);
	ck_assert(has(f.st, 10, 4));
	mu->magic = magic;
	static uint8_t buf[3000]; /* fx_open_one's bytes, for their digest */
	fill(buf, sizeof(buf), 1);
	struct sc_digest d = sc_digest(buf, sizeof(buf));
	int err;
	struct shm_index_entry *e = shm_index_find(ix, k.lo, k.hi, &err);
	ck_assert_ptr_nonnull(e);
	atomic_store(&e->state, SHM_ENT_BUSY);
	ck_assert_int_eq(sc_l2_invalidate_digest(f.a, d), 0);
	ck_assert_int_eq(sc_l2_clear(f.a), 0);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_BUSY);
	atomic_store(&e->state, SHM_ENT_LIVE);
	ck_assert_ptr_eq(shm_index_find(ix, k.lo, k.hi, &err), e); /* still linked */
	ck_assert(has(f.st, 10, 4));
	ck_assert_int_eq(sc_l2_invalidate_digest(f.a, d), 1);
	ck_assert(!has(f.st, 10, 4));
	ck_assert_int_eq(sc_l2_remove(f.st, k), -ENOENT);
	fx_close(&f);
}
END_TEST

/* A handle without a reader slot (it has no lease records, no epoch: only sc_arena_inspect's
 * handles are made so; forged here) takes no L2 view: stages and L2 calls are refused. */
START_TEST(a_handle_without_a_reader_slot_takes_no_l2_view)
{
	struct fx f;
	struct sc_key k = fx_open_one(&f);
	struct sc_arena *b;
	struct sc_stage *sb;
	ck_assert_int_eq(sc_arena_open(f.name, &b), 0);
	int32_t slot = b->shm->reader_slot;
	ck_assert_int_ge(slot, 0);
	b->shm->reader_slot = -1;
	ck_assert_int_eq(sc_stage_open(b, "model-A", "state-1", &sb), -EBADMSG);
	ck_assert_int_eq(sc_l2_clear(b), -EBADMSG);
	ck_assert_int_eq(b->l2_ready, 0);
	b->shm->reader_slot = slot;
	ck_assert_int_eq(sc_stage_open(b, "model-A", "state-1", &sb), 0);
	struct sc_l2_entry_info info;
	int32_t t[4];
	toks(t, 4, 10);
	ck_assert_int_eq(sc_l2_peek(sb, "ns", t, 4, &info), 0);
	ck_assert_uint_eq(info.key.lo, k.lo);
	sc_stage_close(sb);
	sc_arena_close(b);
	fx_close(&f);
}
END_TEST

Suite *l2_suite(void)
{
	Suite *s = suite_create("l2");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, admit_get_round_trip);
	tcase_add_test(tc, small_entries_fill_the_heap);
	tcase_add_test(tc, copy_out_is_hashed_at_every_size);
	tcase_add_test(tc, kv_recurrent_with_descriptor);
	tcase_add_test(tc, refusals_leave_the_cache_unchanged);
	tcase_add_test(tc, large_admit_with_a_wrong_digest_changes_nothing);
	tcase_add_test(tc, hit_counts_are_flushed_in_batches);
	tcase_add_test(tc, eviction_makes_room_and_enospc_rolls_back);
	tcase_add_test(tc, peek_does_not_change_eviction_order);
	tcase_add_test(tc, location_mismatch_removes_the_mirror);
	tcase_add_test(tc, replacement_is_atomic_and_old_leases_stay_valid);
	tcase_add_test(tc, pending_entries_are_reclaimed_before_anything_is_evicted);
	tcase_add_test(tc, an_admission_that_fits_exactly_leaves_the_reclaim_to_its_batch);
	tcase_add_test(tc, allocation_lengths_are_exact_and_saturate);
	tcase_add_test(tc, remove_invalidate_clear_shrink);
	tcase_add_test(tc, a_reader_entering_after_the_epochs_were_read_does_not_hold_back_the_reclaim);
	tcase_add_test(tc, longest_prefix);
	tcase_add_test(tc, a_replaced_entry_its_chain_lost_stays_live_and_queued);
	tcase_add_test(tc, leases_pin_memory_and_are_bounded);
	tcase_add_test(tc, entries_at_the_size_bounds);
	tcase_add_test(tc, listing_and_statistics_see_live_entries_only);
	tcase_add_test(tc, listed_entries_report_their_cost);
	tcase_add_test(tc, admission_arguments_are_checked_first);
	tcase_add_test(tc, lookups_refuse_bad_arguments);
	tcase_add_test(tc, forged_digests_and_missing_token_ids_are_refused);
	tcase_add_test(tc, frequency_counts_hits_up_to_three);
	tcase_add_test(tc, a_publish_with_exactly_its_room_stays_in_place);
	tcase_add_test(tc, only_lease_records_hold_memory);
	tcase_add_test(tc, reserve_publish_in_place);
	tcase_add_test(tc, hostile_index_contents);
	tcase_add_test(tc, a_tokens_flag_with_no_count_is_refused_without_verification);
	tcase_add_test(tc, an_entry_ending_at_the_heaps_last_byte_is_served);
	tcase_add_test(tc, corrupted_index_header_is_refused);
	tcase_add_test(tc, cli_put_get_round_trip);
	tcase_add_test(tc, regression_every_refusal_is_counted);
	tcase_add_test(tc, a_stage_past_its_probes_has_no_record);
	tcase_add_test(tc, a_stage_claimed_meanwhile_has_one_record);
	tcase_add_test(tc, removals_that_must_change_nothing);
	tcase_add_test(tc, closing_a_stage_keeps_the_others_counted);
	tcase_add_test(tc, a_handle_without_a_reader_slot_takes_no_l2_view);
	tcase_add_test(tc, admin_calls_refuse_a_missing_handle);
	tcase_add_test(tc, index_capacity_is_recycled);
	tcase_add_test(tc, hostile_shard_lists_counters_and_leases);
	tcase_add_test(tc, digests_differing_in_one_half_never_match);
	tcase_add_test(tc, admin_calls_on_a_scribbled_index_are_ebadmsg);
	tcase_add_test(tc, remove_repairs_a_scribbled_chain_and_looks_again);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(l2_suite)
