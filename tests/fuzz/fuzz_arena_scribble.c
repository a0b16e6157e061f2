/* tests/fuzz/fuzz_arena_scribble.c — random bytes written into the index, policy, heap and ring regions
 * of a populated arena, then lookups, a ring poll and fsck: errors only, never a crash.
 *
 * One arena (in /dev/shm, 4 KiB pages, 8 MiB, 2 small rings) is created and populated once per
 * process: L2 entries of every payload shape, a private reservation, one live ring with a
 * finished generation from the batcher and one closed ring with records still pending. Its bytes
 * are saved. Each input then:
 *   1. restores the saved bytes (page by page, only the pages that differ; no lock is held then),
 *   2. applies the input's patches: [sel u8][off u24 LE][len-1 u8 (mod 16)][len bytes], each aimed
 *      by sel at one part of the index (header, buckets, live entries, any entry), the heap
 *      (header, around live blocks, anywhere in the used part), the rings (directory and
 *      control blocks, record space) or the eviction lists (header, nodes, ghost) with
 *      shm_region(),
 *   3. runs sc_l2_get (+ reading every byte of the lease) / sc_lease_release, sc_l2_get_copy,
 *      sc_l2_peek, sc_l2_list, sc_l2_stats, optionally an sc_l2_admit (a writer over the
 *      scribbled index and heap), sc_ring_poll (+ sc_ring_consumer_close) and sc_arena_fsck
 *      (check, repair, or deep repair, picked by the first byte).
 * Properties (trap): a hit's sections lie inside the heap region and its descriptor is valid for
 * its KV section; a copy never reports more than the buffer; polled commits point into the ring
 * region and respect the token limit; return codes are 0/counts or negative errnos. After every
 * fsck --repair, the converge property (see converged()): clean under a second fsck --deep and a
 * put/get round trip works, or only rings a live process holds are left (and L2 works), or the
 * arena is declared unrepairable and every later operation (fsck, admit, reserve, stage open,
 * open) says so.
 *
 * The writer locks (index shards, sweep, heap; shm/mutex.h) live in the arena too. By default
 * (SC_FUZZ_SCRIBBLE_MUTEX unset or 2) patches scribble every lock byte except the lock word
 * itself, so that the check after each run (no lock left held) stays meaningful; =1 scribbles
 * the lock words too (a garbage owner is a dead owner: taken over, never waited for), =0 spares
 * the locks entirely. (With the pthread locks they replace, a scribbled lock word hung and a
 * scribbled type word aborted: both kept as reproducers in tests/fuzz/regressions/.)
 *
 * First byte (flags): 0x3 fsck mode (0 none, 1 check, 2 repair, 3 deep+repair), 0x4 pass the
 * populated location to sc_l2_get (mismatch removes), 0x8 admit after the lookups,
 * 0x10 skip the ring poll, 0x20 fsck before the lookups instead of after.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stagecache.h"
#include "../../lib/internal.h"
#include "../../shm/arena.h"
#include "../../shm/evq.h"
#include "../../shm/index.h"
#include "../../shm/mutex.h"
#include "../../shm/ring.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK FUZZ_CHECK
#define NPFX 16
#define NTOK 8
#define PAGE 4096u

static char name[64];
static struct sc_arena *A;
static struct sc_stage *S;
static struct sc_l2_resv resv;
static struct sc_ring *r0;
static uint8_t *base, *saved;
static uint64_t asize;
static int32_t toks[NPFX][NTOK];
static struct sc_location locs[NPFX];
static const char *nss[2] = { "ns-a", "" };
static uint8_t *ix_base, *heap_base, *ring_base, *pol_base;
static uint64_t ix_size, heap_size, ring_size, heap_hot, pol_size;
static struct shm_index_hdr ixh;
static struct shm_ring_dir rdir;
static uint64_t live_off[NPFX + 4], live_len[NPFX + 4];
static uint32_t live_idx[NPFX + 4], nlive;
static int scribble_mutex; /* 0: locks untouched, 1: all their bytes, 2: all but the lock word */
struct range {
	uint64_t lo, hi;
};
static struct range mutexes[SHM_INDEX_SHARDS + 4];
static unsigned nmutex;
static uint8_t copybuf[64 << 10];

static void restore(void);

/* How repairs ended (printed at exit with SC_FUZZ_STATS=1): clean, rings left to a live
 * process, declared unrepairable. */
static unsigned long outcomes[3], damages[8];

static void cleanup(void)
{
	if (getenv("SC_FUZZ_STATS"))
		fprintf(stderr, "fsck --repair outcomes: %lu clean, %lu rings left to a live process, %lu declared "
			"unrepairable (heap %lu, index %lu, rings %lu, observations %lu, other %lu)\n", outcomes[0],
			outcomes[1], outcomes[2], damages[SHM_DAMAGE_HEAP], damages[SHM_DAMAGE_INDEX],
			damages[SHM_DAMAGE_RINGS], damages[SHM_DAMAGE_OBS], damages[SHM_DAMAGE_OTHER]);
	if (!A)
		return;
	if (saved)
		restore(); /* the handles below are closed against a consistent arena */
	sc_ring_close(r0);
	sc_l2_reserve_release(&resv);
	sc_ring_consumer_close(A);
	sc_stage_close(S);
	sc_arena_close(A);
	sc_arena_destroy(NULL, name);
	A = NULL;
}

static void populate(void)
{
	static uint8_t payload[40000];
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 31 + 7);
	for (int p = 0; p < NPFX; p++) {
		for (int t = 0; t < NTOK; t++)
			toks[p][t] = p * 100 + t;
		uint64_t len = 64 + (uint64_t)p * 2311 % 30000;
		struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { payload }, .sec_len = { len } };
		struct sc_kv_desc d = { .version = 1, .token_count = NTOK };
		if (p % 3 == 1) {
			pl.kind = SC_PAYLOAD_RECURRENT_ONLY;
		} else if (p % 3 == 2) {
			pl.kind = SC_PAYLOAD_KV_RECURRENT;
			pl.sec_len[0] = len / 2, pl.sec_len[1] = len - len / 2;
			pl.sec[1] = payload + len / 2;
			d.payload_bytes = len / 2;
			pl.kv_desc = &d;
		}
		struct sc_digest dg = sc_digest(payload, len);
		locs[p] = (struct sc_location){ .token_count = NTOK - p % 2, .digest = dg };
		int rc = sc_l2_admit(S, nss[p % 2], toks[p], NTOK - p % 2, dg, &pl, SC_ORIGIN_DIRECT);
		CHECK(rc == 0);
	}
	/* one removed (memory reclaimed later), one private reservation of a live process */
	struct sc_key k;
	CHECK(sc_l2_key(S, nss[1], toks[NPFX - 1], NTOK - 1, &k) == 0);
	CHECK(sc_l2_remove(S, k) == 0);
	CHECK(sc_l2_reserve(S, 5000, &resv) == 0);
	memset(resv.ptr, 0x5c, 5000);

	/* ring 0: a finished generation through the batcher, records pending */
	struct sc_ring *r1;
	CHECK(sc_ring_open(A, &r0) == 0);
	struct sc_batcher b;
	struct sc_batcher_opts bo = { .interval_ns = 1000, .capacity = 16 };
	CHECK(sc_batcher_init_opts(&b, r0, 77, 5, &bo) == 0);
	for (int t = 0; t < 40; t++)
		CHECK(sc_batcher_commit(&b, 1000 + t, (uint64_t)t * 300) == 0);
	CHECK(sc_batcher_finish(&b, SC_COMMIT_FINISHED) == 0);
	/* ring 1: a few bare commits, then the producer closes with records pending */
	CHECK(sc_ring_open(A, &r1) == 0);
	int32_t tk[3] = { 1, 2, 3 };
	for (int i = 0; i < 5; i++) {
		struct sc_commit c = { .request_id = 9, .session_id = 1, .generated_token_count = 3u * (i + 1),
				       .token_count = 3, .tokens = tk };
		CHECK(sc_ring_try_submit(r1, &c) == 0);
	}
	CHECK(sc_ring_close(r1) == 0);
	/* r0 stays LIVE and owned by this process for the whole run */
}

static void add_mutex(uint8_t *p)
{
	mutexes[nmutex++] = (struct range){ (uint64_t)(p - base), (uint64_t)(p - base) + sizeof(struct shm_mutex) };
}

static void survey(void)
{
	struct shm_arena *sa = A->shm;
	ix_base = shm_region(sa, SHM_REGION_INDEX, &ix_size);
	heap_base = shm_region(sa, SHM_REGION_HEAP, &heap_size);
	ring_base = shm_region(sa, SHM_REGION_RINGS, &ring_size);
	pol_base = shm_region(sa, SHM_REGION_POLICY, &pol_size);
	memcpy(&ixh, ix_base, sizeof(ixh));
	memcpy(&rdir, ring_base, sizeof(rdir));
	add_mutex(ix_base + offsetof(struct shm_index_hdr, sweep_mu));
	for (unsigned s = 0; s < SHM_INDEX_SHARDS; s++)
		add_mutex(ix_base + offsetof(struct shm_index_hdr, shards) + s * sizeof(struct shm_index_shard));
	add_mutex(heap_base + SHM_CACHELINE); /* struct heap_hdr: the lock is its second line */
	add_mutex(pol_base + offsetof(struct shm_evq_hdr, mu));
	add_mutex(pol_base + offsetof(struct shm_evq_hdr, search_mu));
	/* live entries and the used part of the heap */
	const struct shm_index_entry *ent = (const void *)(ix_base + ixh.entries_off);
	uint64_t hot = 8192;
	for (uint32_t i = 0; i < ixh.nentries && nlive < NPFX + 4; i++) {
		if (ent[i].state != SHM_ENT_LIVE && ent[i].state != SHM_ENT_RETIRED)
			continue;
		live_idx[nlive] = i;
		live_off[nlive] = ent[i].payload_off;
		live_len[nlive] = ent[i].sec_len[0] + ent[i].sec_len[1];
		uint64_t end = ent[i].payload_off + live_len[nlive] - (uint64_t)(heap_base - base);
		if (end > hot)
			hot = end;
		nlive++;
	}
	uint64_t rend = (uint64_t)((uint8_t *)resv.ptr - heap_base) + resv.bytes;
	if (rend > hot)
		hot = rend;
	heap_hot = hot + 2 * PAGE < heap_size ? hot + 2 * PAGE : heap_size;
	CHECK(nlive >= NPFX - 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	const char *e = getenv("SC_FUZZ_SCRIBBLE_MUTEX");
	scribble_mutex = e && (*e == '0' || *e == '1') ? *e - '0' : 2;
	fuzz_reap_stale("stagecache.fuzz-scribble-");
	snprintf(name, sizeof(name), "fuzz-scribble-%d", (int)getpid());
	struct sc_arena_opts o = { .size_bytes = 8u << 20, .huge = SC_HUGE_OFF, .index_entries = 256,
				   .ring_count = 2, .ring_bytes = 4096, .obs_entries = 64, .reader_slots = 8 };
	sc_arena_destroy(NULL, name);
	CHECK(sc_arena_create(name, &o, &A) == 0);
	atexit(cleanup);
	CHECK(sc_stage_open(A, "fuzz-model", "fuzz-state", &S) == 0);
	populate();
	base = A->shm->base;
	asize = A->shm->size;
	survey();
	saved = malloc(asize);
	CHECK(saved);
	memcpy(saved, base, asize);
	return 0;
}

/* Put the pristine bytes back: only pages that differ are written (most of the heap never does). */
static void restore(void)
{
	for (uint64_t off = 0; off < asize; off += PAGE)
		if (memcmp(base + off, saved + off, PAGE))
			memcpy(base + off, saved + off, PAGE);
}

static void patch(uint8_t *dst, const uint8_t *src, size_t len)
{
	/* clamp to the arena and skip mutex bytes unless asked */
	uint64_t off = (uint64_t)(dst - base);
	for (size_t i = 0; i < len && off + i < asize; i++) {
		int skip = 0;
		for (unsigned m = 0; scribble_mutex != 1 && m < nmutex; m++) {
			uint64_t at = off + i;
			if (at < mutexes[m].lo || at >= mutexes[m].hi)
				continue;
			/* mode 2 spares only the lock word (offset 0) */
			if (!scribble_mutex || at - mutexes[m].lo < 4)
				skip = 1;
		}
		if (!skip)
			base[off + i] = src[i];
	}
}

static uint8_t *aim(uint8_t sel, uint32_t off)
{
	switch (sel % 11) {
	case 0: /* index header and shard table */
		return ix_base + off % SHM_INDEX_HDR_BYTES;
	case 1: /* buckets */
		return ix_base + ixh.buckets_off + off % ((uint64_t)ixh.nbuckets * 4);
	case 2: /* a live entry */
		return ix_base + ixh.entries_off + (uint64_t)live_idx[(off >> 8) % nlive] * 128 + off % 128;
	case 3: /* any entry */
		return ix_base + ixh.entries_off + off % ((uint64_t)ixh.nentries * 128);
	case 4: /* heap header */
		return heap_base + off % 8192;
	case 5: { /* around a live block: its header, its start, its end */
		uint32_t k = (off >> 12) % nlive;
		uint8_t *p = base + live_off[k];
		if (off & 0x800)
			return p + live_len[k] - 64 + off % 192;
		return p - SHM_CACHELINE + off % 256;
	}
	case 6: /* anywhere in the used part of the heap */
		return heap_base + off % heap_hot;
	case 7: /* ring directory and control blocks */
		return ring_base + off % rdir.data_off;
	case 8: /* record space */
		return ring_base + rdir.data_off + off % ((uint64_t)rdir.ring_count * rdir.ring_bytes);
	case 9: /* the eviction lists: header, nodes and ghost (the live entries' nodes most often) */
		if (off & 1)
			return pol_base + SHM_EVQ_HDR_BYTES + (uint64_t)live_idx[(off >> 8) % nlive] * sizeof(struct shm_evq_node) +
			       (off >> 1) % sizeof(struct shm_evq_node);
		return pol_base + (off >> 1) % pol_size;
	default: /* anywhere in the three regions */
		switch (off % 3) {
		case 0:
			return ix_base + (off >> 2) % ix_size;
		case 1:
			return heap_base + (off >> 2) % heap_hot;
		default:
			return ring_base + (off >> 2) % ring_size;
		}
	}
}

static int in_heap(const void *p, uint64_t len)
{
	const uint8_t *q = p;
	return q >= heap_base && q <= heap_base + heap_size && len <= (uint64_t)(heap_base + heap_size - q);
}

static volatile uint8_t sink;

static void lookups(uint8_t flags)
{
	for (int p = 0; p < NPFX; p++) {
		struct sc_lease l;
		size_t n = NTOK - p % 2;
		int rc = sc_l2_get(S, nss[p % 2], toks[p], n, (flags & 4) ? &locs[p] : NULL, &l);
		CHECK(rc == 0 || (rc < 0 && rc > -4096));
		if (rc == 0) {
			uint8_t x = 0;
			for (int s = 0; s < 2; s++) {
				CHECK(l.sec_len[s] == 0 || in_heap(l.sec[s], l.sec_len[s]));
				for (uint64_t i = 0; i < l.sec_len[s]; i += 64)
					x ^= ((const uint8_t *)l.sec[s])[i];
			}
			sink = x;
			if (l.has_kv_desc)
				CHECK(sc_kv_desc_validate(&l.kv_desc, l.sec_len[0]) == 0);
			sc_lease_release(&l);
		}
		if (p % 4 == 0) {
			struct sc_l2_entry_info in;
			int64_t c = sc_l2_get_copy(S, nss[p % 2], toks[p], n, NULL, copybuf, sizeof(copybuf), &in);
			CHECK(c <= (int64_t)sizeof(copybuf) && c > -4096);
			rc = sc_l2_peek(S, nss[p % 2], toks[p], n, &in);
			CHECK(rc == 0 || (rc < 0 && rc > -4096));
		}
	}
}

static int list_cb(const struct sc_l2_entry_info *e, void *ctx)
{
	(void)e;
	(*(int *)ctx)++;
	return 0;
}

static int poll_cb(const struct sc_commit *c, void *ctx)
{
	(void)ctx;
	if (c->token_count) {
		const uint8_t *t = (const uint8_t *)c->tokens;
		CHECK(t >= ring_base && t + (uint64_t)c->token_count * 4 <= ring_base + ring_size);
		sink = t[0];
	}
	return 0;
}

static int not_ring(const char *component)
{
	return strcmp(component, "rings") != 0;
}

static void count_not_ring(const char *component, const char *message, int repaired, void *ctx)
{
	(void)message, (void)repaired;
	*(int *)ctx += not_ring(component);
}

static void print_finding(const char *component, const char *message, int repaired, void *ctx)
{
	(void)ctx;
	fprintf(stderr, "fsck: %s: %s%s\n", component, message, repaired ? " [repaired]" : "");
}

/* fsck --deep: the count of what it finds outside the rings (printed when any, before the trap). */
static int left_outside_rings(int *left)
{
	struct sc_fsck_report rep;
	int others = 0;
	*left = sc_arena_fsck(A, SC_FSCK_DEEP, count_not_ring, &others, &rep);
	if (others || *left < 0)
		sc_arena_fsck(A, SC_FSCK_DEEP, print_finding, NULL, &rep);
	return others;
}

/* A put and a get of a fresh entry: the arena is usable. A scribbled budget is a legal one
 * (sc_l2_shrink_to sets any): below the payload it refuses with -E2BIG, below what is stored it
 * may need more eviction than one admission does (-ENOSPC); neither is a failure of fsck. */
static void round_trip(void)
{
	static uint8_t pl[3000];
	for (size_t i = 0; i < sizeof(pl); i++)
		pl[i] = (uint8_t)(i * 13 + 1);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pl }, .sec_len = { sizeof(pl) } };
	int32_t t[3] = { 9, 9, 9 };
	int rc = sc_l2_admit(S, "converge", t, 3, sc_digest(pl, sizeof(pl)), &p, SC_ORIGIN_DIRECT);
	if (rc == -ENOSPC) {
		struct sc_l2_stats st;
		CHECK(sc_l2_stats(A, NULL, &st) == 0 && st.budget_bytes < heap_size);
		return;
	}
	CHECK(rc == 0 || rc == -E2BIG);
	if (rc)
		return;
	struct sc_lease l;
	CHECK(sc_l2_get(S, "converge", t, 3, NULL, &l) == 0);
	CHECK(l.sec_len[0] == sizeof(pl) && !memcmp(l.sec[0], pl, sizeof(pl)));
	sc_lease_release(&l);
}

/*
 * The converge property, after every fsck --repair: either the arena is clean (a
 * second fsck --deep finds nothing) and a put/get round trip works; or problems are left only in
 * commit rings that a live producer or consumer holds (this process keeps a producer, ring 0),
 * and L2 works; or the arena is declared unrepairable and every later operation says so.
 */
static void converged(int rc)
{
	struct sc_fsck_report rep;
	outcomes[rc == -ENOTRECOVERABLE ? 2 : rc > 0 ? 1 : 0]++;
	if (rc == -ENOTRECOVERABLE) {
		damages[A->shm->hdr->damage_reason & 7]++;
		CHECK(sc_arena_fsck(A, 0, NULL, NULL, &rep) == -ENOTRECOVERABLE);
		static uint8_t pl[100];
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pl }, .sec_len = { sizeof(pl) } };
		int32_t t[2] = { 7, 7 };
		CHECK(sc_l2_admit(S, "dead", t, 2, sc_digest(pl, sizeof(pl)), &p, SC_ORIGIN_DIRECT) == -ENOTRECOVERABLE);
		struct sc_l2_resv rv;
		CHECK(sc_l2_reserve(S, 100, &rv) == -ENOTRECOVERABLE);
		struct sc_stage *st = NULL;
		CHECK(sc_stage_open(A, "other", "stage", &st) == -ENOTRECOVERABLE && !st);
		struct sc_arena *b = NULL;
		CHECK(sc_arena_open(name, &b) == -ENOTRECOVERABLE && !b);
		return;
	}
	CHECK(rc >= 0);
	int left;
	int others = left_outside_rings(&left);
	CHECK(left >= 0);
	CHECK(rc > 0 ? others == 0 : left == 0);
	round_trip();
	others = left_outside_rings(&left);
	CHECK(left >= 0 && others == 0);
}

static void fsck(uint8_t flags)
{
	static const uint32_t modes[4] = { 0, 0, SC_FSCK_REPAIR, SC_FSCK_REPAIR | SC_FSCK_DEEP };
	if (!(flags & 3))
		return;
	struct sc_fsck_report rep;
	int rc = sc_arena_fsck(A, modes[flags & 3], NULL, NULL, &rep);
	CHECK(rc > -4096);
	if (modes[flags & 3] & SC_FSCK_REPAIR)
		converged(rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	restore();
	uint8_t flags = data[0];
	size_t i = 1;
	while (i + 5 <= size) {
		uint8_t sel = data[i];
		uint32_t off = data[i + 1] | data[i + 2] << 8 | (uint32_t)data[i + 3] << 16;
		size_t len = (size_t)(data[i + 4] % 16) + 1;
		i += 5;
		if (len > size - i)
			len = size - i;
		patch(aim(sel, off), data + i, len);
		i += len;
	}
	if (flags & 0x20)
		fsck(flags);
	lookups(flags);
	int n = 0;
	int rc = sc_l2_list(A, list_cb, &n, 0);
	CHECK(rc > -4096 && (rc < 0 || rc == n));
	struct sc_l2_stats st;
	rc = sc_l2_stats(A, NULL, &st);
	CHECK(rc <= 0 && rc > -4096);
	if (flags & 8) {
		static uint8_t pl[3000];
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pl }, .sec_len = { sizeof(pl) } };
		int32_t t[2] = { 42, (int32_t)size };
		rc = sc_l2_admit(S, "admit", t, 2, sc_digest(pl, sizeof(pl)), &p, SC_ORIGIN_DIRECT);
		CHECK(rc <= 0 && rc > -4096);
	}
	if (!(flags & 0x10)) {
		rc = sc_ring_poll(A, poll_cb, NULL, 64);
		CHECK(rc > -4096);
		sc_ring_consumer_close(A);
	}
	if (!(flags & 0x20))
		fsck(flags);
	/* every call has returned: no mutex may still be held (a lock leaked on an error path would
	 * otherwise be hidden by the next restore). Only meaningful while lock words are not scribbled. */
	for (unsigned m = 0; scribble_mutex != 1 && m < nmutex; m++) {
		int w;
		memcpy(&w, base + mutexes[m].lo, sizeof(w)); /* struct shm_mutex starts with its lock word */
		CHECK(w == 0);
	}
	return 0;
}
