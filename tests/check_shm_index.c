/*
 * tests/check_shm_index.c — the L2 hash index (shm/index.c) on its own, through shm/index.h on a
 * real arena (nothing of lib/l2 runs here): insert, lookup, replace and remove on bucket chains;
 * retired entries (the index's tombstones) held back by epochs and leases and then reused; a full
 * shard; hostile values in the region (header, bucket and chain links, lists, states); and the
 * repair the next locker runs after a writer died holding a shard lock.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../shm/fault.h"
#include "../shm/heap.h"
#include "../shm/index.h"
#include "../shm/readers.h"

#define ENTRIES 64u /* 4 per shard */
#define PER_SHARD (ENTRIES / SHM_INDEX_SHARDS)

static void view(struct sc_arena *a, struct shm_index *ix)
{
	ck_assert_int_eq(shm_index_view(a->shm, ix), 0);
	ck_assert_uint_eq(ix->nentries, ENTRIES);
}

/* A fresh arena of ENTRIES index entries, and its index viewed into @ix. */
static struct sc_arena *index_arena(const char **name, struct shm_index *ix)
{
	struct sc_arena_opts o = { .size_bytes = 8u << 20, .huge = SC_HUGE_OFF, .index_entries = ENTRIES };
	struct sc_arena *a = sc_test_arena_opts("index", &o, name);
	view(a, ix);
	return a;
}

static uint32_t shard_of(const struct shm_index *ix, uint64_t lo)
{
	return shm_index_shard_of_bucket(shm_index_bucket(ix, lo));
}

/* Insert (or replace) key (lo, hi) as a writer does: shard locked, entry BUSY then linked. */
static struct shm_index_entry *put(struct shm_index *ix, uint64_t lo, uint64_t hi)
{
	uint32_t s = shard_of(ix, lo);
	int err;
	ck_assert_int_eq(shm_index_lock(ix, s), 0);
	struct shm_index_entry *old = shm_index_find(ix, lo, hi, &err);
	ck_assert_int_eq(err, 0);
	struct shm_index_entry *e = shm_index_pop_free_locked(ix, s);
	if (e) {
		ck_assert_uint_eq(shm_index_idx(ix, e) % SHM_INDEX_SHARDS, s);
		e->key_lo = lo;
		e->key_hi = hi;
		e->payload_off = 0; /* no heap block: reclaim frees nothing */
		e->footprint = 100;
		atomic_store(&e->state, SHM_ENT_BUSY);
		shm_index_link_locked(ix, e, old);
	}
	shm_index_unlock(ix, s);
	return e;
}

static struct shm_index_entry *get(const struct shm_index *ix, uint64_t lo, uint64_t hi, int *err)
{
	return shm_index_find(ix, lo, hi, err);
}

static int del(struct shm_index *ix, uint64_t lo, uint64_t hi)
{
	uint32_t s = shard_of(ix, lo);
	int err;
	ck_assert_int_eq(shm_index_lock(ix, s), 0);
	struct shm_index_entry *e = shm_index_find(ix, lo, hi, &err);
	int rc = e ? shm_index_unlink_retire_locked(ix, e) : -ENOENT;
	shm_index_unlock(ix, s);
	return rc;
}

static int reclaim(struct shm_index *ix, uint32_t s, uint64_t min, const uint64_t *leases, size_t n, unsigned *blocked)
{
	ck_assert_int_eq(shm_index_lock(ix, s), 0);
	int rc = shm_index_reclaim_locked(ix, s, min, leases, n, 64, blocked);
	shm_index_unlock(ix, s);
	return rc;
}

START_TEST(test_view_checks_header)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	ck_assert_uint_eq(ix.hdr->nbuckets, ENTRIES);
	struct shm_index_hdr *h = ix.hdr, saved;
	memcpy(&saved, h, 64);
#define HOSTILE(stmt)                                                 \
	do {                                                          \
		stmt;                                                 \
		ck_assert_int_eq(shm_index_view(a->shm, &ix), -EBADMSG); \
		memcpy(h, &saved, 64);                                \
	} while (0)
	HOSTILE(h->magic ^= 1);
	HOSTILE(h->nentries = ENTRIES * 2);
	HOSTILE(h->nentries = 0);
	HOSTILE(h->nshards = 8);
	HOSTILE(h->nbuckets = ENTRIES * 4);
	HOSTILE(h->nbuckets = 0);
	HOSTILE(h->buckets_off = 0);
	HOSTILE(h->entries_off = 1ull << 40);
	HOSTILE(h->entries_off = h->buckets_off);
#undef HOSTILE
	/* the arena header's count is what the view trusts, and it must match */
	uint32_t n = a->shm->hv.index_entries;
	a->shm->hv.index_entries = 1u << 25;
	ck_assert_int_eq(shm_index_view(a->shm, &ix), -EBADMSG);
	a->shm->hv.index_entries = n;
	view(a, &ix);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_insert_lookup_replace_remove)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	int err = 1;
	ck_assert_ptr_null(get(&ix, 5, 6, &err));
	ck_assert_int_eq(err, 0);
	/* three keys in one bucket (same lo bits), told apart by the rest of the key */
	uint64_t lo[3] = { 5, 5 + ENTRIES, 5 + 2 * ENTRIES };
	struct shm_index_entry *e[3];
	for (int i = 0; i < 3; i++) {
		e[i] = put(&ix, lo[i], 100 + (uint64_t)i);
		ck_assert_ptr_nonnull(e[i]);
		ck_assert_uint_eq(atomic_load(&e[i]->state), SHM_ENT_LIVE);
	}
	for (int i = 0; i < 3; i++) {
		ck_assert_ptr_eq(get(&ix, lo[i], 100 + (uint64_t)i, &err), e[i]);
		ck_assert_int_eq(err, 0);
	}
	ck_assert_ptr_null(get(&ix, lo[0], 101, &err)); /* lo of one key, hi of another */
	ck_assert_ptr_null(get(&ix, 6, 100, &err));
	/* replace the middle of the chain: one store, the others still reachable */
	struct shm_index_entry *r = put(&ix, lo[1], 101);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_ne(r, e[1]);
	ck_assert_ptr_eq(get(&ix, lo[1], 101, &err), r);
	ck_assert_uint_eq(atomic_load(&e[1]->state), SHM_ENT_RETIRED);
	ck_assert_ptr_eq(get(&ix, lo[0], 100, &err), e[0]);
	ck_assert_ptr_eq(get(&ix, lo[2], 102, &err), e[2]);
	/* remove: gone, the rest of the chain intact, the entry retired with its epoch stamp */
	uint32_t s = shard_of(&ix, 5);
	uint32_t pending = ix.hdr->shards[s].pending_count;
	uint64_t epoch = atomic_load(&a->shm->hdr->global_epoch);
	ck_assert_int_eq(del(&ix, lo[0], 100), 0);
	ck_assert_ptr_null(get(&ix, lo[0], 100, &err));
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_eq(get(&ix, lo[1], 101, &err), r);
	ck_assert_ptr_eq(get(&ix, lo[2], 102, &err), e[2]);
	ck_assert_uint_eq(atomic_load(&e[0]->state), SHM_ENT_RETIRED);
	ck_assert_uint_eq(e[0]->retire_epoch, epoch + 1);
	ck_assert_uint_eq(ix.hdr->shards[s].pending_count, pending + 1);
	ck_assert_int_eq(del(&ix, lo[0], 100), -ENOENT);
	/* unlinking an entry that is not in its chain is refused */
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	ck_assert_int_eq(shm_index_unlink_retire_locked(&ix, e[0]), -ENOENT);
	shm_index_unlock(&ix, s);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Retired entries wait for epochs and leases, then come back through the free list. */
START_TEST(test_retired_wait_then_reused)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint32_t s = shard_of(&ix, 7);
	struct shm_index_entry *e = put(&ix, 7, 1);
	uint32_t gen = e->gen;
	uint64_t rec = shm_index_rec(&ix, e);
	ck_assert_int_eq(del(&ix, 7, 1), 0);
	uint64_t stamp = e->retire_epoch;
	unsigned blocked = 9;
	/* a reader inside an epoch <= the stamp could still see it */
	ck_assert_int_eq(reclaim(&ix, s, stamp, NULL, 0, &blocked), 0);
	ck_assert_uint_eq(blocked, 0);
	/* past the epoch but leased (records sorted): blocked */
	uint64_t leases[3] = { rec - 1, rec, rec + (1ull << 32) };
	ck_assert_int_eq(shm_index_leased(leases, 3, rec), 1);
	ck_assert_int_eq(shm_index_leased(leases, 3, rec + 1), 0);
	ck_assert_int_eq(shm_index_leased(leases, 0, rec), 0);
	ck_assert_int_eq(reclaim(&ix, s, stamp + 1, leases, 3, &blocked), 0);
	ck_assert_uint_eq(blocked, 1);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_RETIRED);
	/* a lease on an earlier use of the entry (another gen) does not pin it */
	uint64_t stale[1] = { rec - (1ull << 32) };
	ck_assert_int_eq(reclaim(&ix, s, stamp + 1, stale, 1, &blocked), 1);
	ck_assert_uint_eq(blocked, 0);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_FREE);
	ck_assert_uint_eq(e->gen, gen + 1);
	ck_assert_uint_eq(ix.hdr->shards[s].pending_count, 0);
	ck_assert_uint_eq(ix.hdr->shards[s].pending_bytes, 0);
	/* the same key over and over: entries recycle, no tombstone piles up in the chain */
	for (int round = 0; round < 200; round++) {
		struct shm_index_entry *x = put(&ix, 7, 1);
		ck_assert_msg(x != NULL, "round %d: the shard ran out of entries", round);
		int err;
		ck_assert_ptr_eq(get(&ix, 7, 1, &err), x);
		ck_assert_int_eq(del(&ix, 7, 1), 0);
		ck_assert_int_eq(reclaim(&ix, s, UINT64_MAX, NULL, 0, &blocked), 1);
		ck_assert_uint_eq(atomic_load(&ix.buckets[shm_index_bucket(&ix, 7)]), 0);
	}
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_full_shard)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint32_t s = shard_of(&ix, 3);
	struct shm_index_entry *e[PER_SHARD];
	for (uint32_t i = 0; i < PER_SHARD; i++) {
		e[i] = put(&ix, 3 + (uint64_t)i * ENTRIES, i);
		ck_assert_ptr_nonnull(e[i]);
	}
	/* the shard's entries are all in use: the next insert into it gets none */
	ck_assert_ptr_null(put(&ix, 3 + (uint64_t)PER_SHARD * ENTRIES, 0));
	/* other shards are not affected */
	ck_assert_ptr_nonnull(put(&ix, 4, 0));
	int err;
	for (uint32_t i = 0; i < PER_SHARD; i++)
		ck_assert_ptr_eq(get(&ix, 3 + (uint64_t)i * ENTRIES, i, &err), e[i]);
	/* removing one makes room once reclaimed, not before */
	ck_assert_int_eq(del(&ix, 3, 0), 0);
	ck_assert_ptr_null(put(&ix, 3 + (uint64_t)PER_SHARD * ENTRIES, 0));
	unsigned blocked;
	ck_assert_int_eq(reclaim(&ix, s, UINT64_MAX, NULL, 0, &blocked), 1);
	ck_assert_ptr_nonnull(put(&ix, 3 + (uint64_t)PER_SHARD * ENTRIES, 0));
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Every entry of the table in use, the last one included: each key found through chains that
 * link the table's first and last entries, each removed, and every entry back after reclaim. */
START_TEST(test_every_entry_up_to_the_last_is_linked_and_found)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint64_t key[ENTRIES];
	uint32_t per[SHM_INDEX_SHARDS] = { 0 }, n = 0;
	for (uint64_t lo = 1; n < ENTRIES; lo++) {
		uint32_t s = shard_of(&ix, lo);
		if (per[s] == PER_SHARD)
			continue;
		per[s]++;
		ck_assert_ptr_nonnull(put(&ix, lo, lo * 7));
		key[n++] = lo;
	}
	int err, last_seen = 0;
	for (uint32_t i = 0; i < ENTRIES; i++) {
		struct shm_index_entry *e = get(&ix, key[i], key[i] * 7, &err);
		ck_assert_msg(e && !err, "key %u of %u: entry %p, err %d", i, ENTRIES, (void *)e, err);
		last_seen |= shm_index_idx(&ix, e) == ENTRIES - 1;
	}
	ck_assert_msg(last_seen, "the table's last entry holds no key");
	for (uint32_t i = 0; i < ENTRIES; i++)
		ck_assert_int_eq(del(&ix, key[i], key[i] * 7), 0);
	unsigned blocked, back = 0;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		back += (unsigned)reclaim(&ix, s, UINT64_MAX, NULL, 0, &blocked);
	ck_assert_uint_eq(back, ENTRIES);
	for (uint32_t i = 0; i < ENTRIES; i++) { /* every entry can be taken again */
		ck_assert_ptr_null(get(&ix, key[i], key[i] * 7, &err));
		ck_assert_int_eq(err, 0);
		ck_assert_ptr_nonnull(put(&ix, key[i], key[i] * 7));
	}
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Hostile links: lookups report -EBADMSG (never loop or run off the table); repair cuts them. */
START_TEST(test_hostile_chains)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint32_t b = shm_index_bucket(&ix, 9), s = shm_index_shard_of_bucket(b);
	struct shm_index_entry *e = put(&ix, 9, 1), *f = put(&ix, 9 + ENTRIES, 2);
	int err;
	ck_assert_ptr_eq(get(&ix, 9, 1, &err), e); /* f was linked at the head, e behind it */
	uint32_t head = atomic_load(&ix.buckets[b]);
	ck_assert_uint_eq(head, shm_index_idx(&ix, f) + 1);

	atomic_store(&ix.buckets[b], ENTRIES + 1); /* beyond the table */
	ck_assert_ptr_null(get(&ix, 9, 1, &err));
	ck_assert_int_eq(err, -EBADMSG);
	atomic_store(&ix.buckets[b], UINT32_MAX);
	ck_assert_ptr_null(get(&ix, 9, 1, &err));
	ck_assert_int_eq(err, -EBADMSG);
	/* a writer's walk to an entry's predecessor stops at such a link too: nothing to unlink */
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	ck_assert_int_eq(shm_index_unlink_retire_locked(&ix, e), -ENOENT);
	shm_index_unlock(&ix, s);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_LIVE);
	atomic_store(&ix.buckets[b], ((s + 1) % SHM_INDEX_SHARDS) + 1); /* an entry of another shard */
	ck_assert_ptr_null(get(&ix, 9, 1, &err));
	ck_assert_int_eq(err, -EBADMSG);
	atomic_store(&ix.buckets[b], head);
	atomic_store(&e->next, shm_index_idx(&ix, f) + 1); /* a cycle f -> e -> f */
	ck_assert_ptr_null(get(&ix, 9, 3, &err));            /* bounded by SHM_INDEX_MAX_CHAIN */
	ck_assert_int_eq(err, -EBADMSG);
	ck_assert_ptr_eq(get(&ix, 9, 1, &err), e);           /* found before the loop matters */

	/* a state no writer sets makes an entry invisible, not a crash */
	atomic_store(&e->next, 0);
	atomic_store(&f->state, 99);
	ck_assert_ptr_null(get(&ix, 9 + ENTRIES, 2, &err));
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_eq(get(&ix, 9, 1, &err), e);

	/* the shard repair: cut the garbage entry out of the chain and free it; e stays */
	atomic_store(&e->next, ENTRIES + 7);
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	uint32_t repairs = ix.hdr->shards[s].repairs;
	shm_index_repair_locked(&ix, s);
	shm_index_unlock(&ix, s);
	ck_assert_uint_eq(ix.hdr->shards[s].repairs, repairs + 1);
	ck_assert_ptr_eq(get(&ix, 9, 1, &err), e);
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_null(get(&ix, 9, 3, &err));
	ck_assert_int_eq(err, 0); /* the bad link is gone */
	ck_assert_uint_eq(atomic_load(&e->next), 0);
	ck_assert_uint_eq(atomic_load(&f->state), SHM_ENT_FREE);
	sc_test_arena_destroy(a, name);
}
END_TEST

enum { N = 2048 }; /* big_index_arena: 128 entries per shard, 2048 buckets */

/* An arena whose index has N entries, for chains and lists longer than ENTRIES allows. */
static struct sc_arena *big_index_arena(const char **name, struct shm_index *ix)
{
	struct sc_arena_opts o = { .size_bytes = 32u << 20, .huge = SC_HUGE_OFF, .index_entries = N };
	struct sc_arena *a = sc_test_arena_opts("index", &o, name);
	ck_assert_int_eq(shm_index_view(a->shm, ix), 0);
	ck_assert_uint_eq(ix->mask + 1, N);
	return a;
}

/* A chain at the longest length a lookup follows (SHM_INDEX_MAX_CHAIN entries) and one longer.
 * Keys are chosen here (a bucket is key_lo's low bits), so one bucket gets 65 entries: a lookup
 * finds the 64 nearest the head, and reaching the 65th is corruption (-EBADMSG); a writer still
 * unlinks the 65th, and the shard repair cuts a chain after its 64th entry. */
START_TEST(test_chains_at_the_longest_allowed)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = big_index_arena(&name, &ix);
	uint32_t s = shard_of(&ix, 9);
	struct shm_index_entry *e[SHM_INDEX_MAX_CHAIN + 2];
	int err;
	for (uint32_t k = 0; k < SHM_INDEX_MAX_CHAIN; k++)
		ck_assert_ptr_nonnull(e[k] = put(&ix, 9 + (uint64_t)k * N, k));
	ck_assert_ptr_eq(get(&ix, 9, 0, &err), e[0]); /* the 64th of the chain: the deepest found */
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_null(get(&ix, 9, 99, &err)); /* a miss walks all 64 */
	ck_assert_int_eq(err, 0);

	ck_assert_ptr_nonnull(e[64] = put(&ix, 9 + 64ull * N, 64)); /* linked at the head: 65 now */
	ck_assert_ptr_eq(get(&ix, 9 + 64ull * N, 64, &err), e[64]);
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_eq(get(&ix, 9 + 1ull * N, 1, &err), e[1]); /* the 64th */
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_null(get(&ix, 9, 0, &err)); /* the 65th: too long a chain */
	ck_assert_int_eq(err, -EBADMSG);
	ck_assert_ptr_null(get(&ix, 9, 99, &err));
	ck_assert_int_eq(err, -EBADMSG);

	/* the writer still finds the 65th's predecessor and unlinks it: the chain is whole again */
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	ck_assert_int_eq(shm_index_unlink_retire_locked(&ix, e[0]), 0);
	shm_index_unlock(&ix, s);
	ck_assert_uint_eq(atomic_load(&e[0]->state), SHM_ENT_RETIRED);
	ck_assert_ptr_null(get(&ix, 9, 99, &err));
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_eq(get(&ix, 9 + 1ull * N, 1, &err), e[1]);

	/* 65 again; the shard repair keeps the 64 nearest the head and retires the one after them */
	ck_assert_ptr_nonnull(e[65] = put(&ix, 9 + 65ull * N, 65));
	uint32_t pending = ix.hdr->shards[s].pending_count;
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	shm_index_repair_locked(&ix, s);
	shm_index_unlock(&ix, s);
	ck_assert_uint_eq(atomic_load(&e[1]->state), SHM_ENT_RETIRED);
	ck_assert_uint_eq(ix.hdr->shards[s].pending_count, pending + 1);
	ck_assert_ptr_null(get(&ix, 9 + 1ull * N, 1, &err));
	ck_assert_int_eq(err, 0);
	ck_assert_ptr_eq(get(&ix, 9 + 2ull * N, 2, &err), e[2]);
	ck_assert_ptr_eq(get(&ix, 9 + 65ull * N, 65, &err), e[65]);
	ck_assert_int_eq(err, 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* An index whose entry count is not a multiple of the shard count (17: shard 0 has two entries,
 * the others one): the last entry is used, found and kept by its shard's repair. */
START_TEST(test_an_index_of_odd_size_works)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena_opts o = { .size_bytes = 8u << 20, .huge = SC_HUGE_OFF, .index_entries = 17 };
	struct sc_arena *a = sc_test_arena_opts("index", &o, &name);
	ck_assert_int_eq(shm_index_view(a->shm, &ix), 0);
	ck_assert_uint_eq(ix.nentries, 17);
	uint64_t lo = 0; /* bucket 0: shard 0 */
	ck_assert_uint_eq(shard_of(&ix, lo), 0);
	struct shm_index_entry *e = put(&ix, lo, 1), *f = put(&ix, lo + ix.mask + 1, 2);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(shm_index_idx(&ix, f), 16);
	ck_assert_ptr_null(put(&ix, lo + 2 * (ix.mask + 1), 3)); /* the shard is full */
	ck_assert_int_eq(shm_index_lock(&ix, 0), 0);
	shm_index_repair_locked(&ix, 0);
	shm_index_unlock(&ix, 0);
	int err;
	ck_assert_ptr_eq(get(&ix, lo, 1, &err), e);
	ck_assert_ptr_eq(get(&ix, lo + ix.mask + 1, 2, &err), f);
	ck_assert_uint_eq(atomic_load(&f->state), SHM_ENT_LIVE);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Formatting trusts no caller either: an entry count out of range or a region too small for the
 * count is -EINVAL, and the index already there is left as it was. */
START_TEST(test_format_refuses_bad_parameters)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	struct shm_index_entry *e = put(&ix, 21, 1);
	const uint32_t bad_n[] = { 0, SHM_INDEX_SHARDS - 1, SHM_INDEX_MAX_ENTRIES + 1, UINT32_MAX };
	struct shm_arena *m = a->shm;
	for (unsigned i = 0; i < sizeof(bad_n) / sizeof(bad_n[0]); i++) {
		m->hv.index_entries = bad_n[i];
		ck_assert_msg(shm_index_format(m) == -EINVAL, "%u entries formatted", bad_n[i]);
	}
	m->hv.index_entries = ENTRIES;
	uint64_t size = m->hv.regions[SHM_REGION_INDEX].size;
	m->hv.regions[SHM_REGION_INDEX].size = shm_index_bytes(ENTRIES) - 1;
	ck_assert_int_eq(shm_index_format(m), -EINVAL);
	m->hv.regions[SHM_REGION_INDEX].size = size;
	int err;
	ck_assert_ptr_eq(get(&ix, 21, 1, &err), e);
	ck_assert_int_eq(shm_index_view(m, &ix), 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* An entry retired while still linked (a reader that loaded its predecessor before the unlink
 * stands on it) is reported: the pre-removal state, kept intact by the epoch. */
START_TEST(test_a_retired_entry_still_linked_is_reported)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint32_t s = shard_of(&ix, 23);
	struct shm_index_entry *e = put(&ix, 23, 1);
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	shm_index_retire_locked(&ix, e); /* the state a reader can meet between unlink and its walk */
	shm_index_unlock(&ix, s);
	int err;
	ck_assert_ptr_eq(get(&ix, 23, 1, &err), e);
	ck_assert_int_eq(err, 0);
	atomic_store(&e->state, SHM_ENT_FREEING); /* but not one that is being freed */
	ck_assert_ptr_null(get(&ix, 23, 1, &err));
	ck_assert_int_eq(err, 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A reclaim pass frees at most @max entries and looks at no more than 4 * max + 16 of its shard's
 * pending list (a pass under the shard lock is bounded even when most of the list must wait). */
START_TEST(test_reclaim_passes_are_bounded)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = big_index_arena(&name, &ix);
	uint32_t s = shard_of(&ix, 5);
	struct shm_index_shard *sh = &ix.hdr->shards[s];
	struct shm_index_entry *oldest = put(&ix, 5, 0);
	ck_assert_int_eq(del(&ix, 5, 0), 0);
	for (uint32_t k = 1; k <= 20; k++) { /* retired later: ahead of it on the pending list */
		ck_assert_ptr_nonnull(put(&ix, 5 + (uint64_t)k * N, k));
		ck_assert_int_eq(del(&ix, 5 + (uint64_t)k * N, k), 0);
	}
	ck_assert_uint_eq(sh->pending_count, 21);
	unsigned blocked;
	/* only the oldest may go, and it is the 21st: a pass of max 1 looks at 20 and stops */
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	ck_assert_int_eq(shm_index_reclaim_locked(&ix, s, oldest->retire_epoch + 1, NULL, 0, 1, &blocked), 0);
	ck_assert_uint_eq(atomic_load(&oldest->state), SHM_ENT_RETIRED);
	/* with max 2 it may look at 24: it reaches the oldest, which goes */
	ck_assert_int_eq(shm_index_reclaim_locked(&ix, s, oldest->retire_epoch + 1, NULL, 0, 2, &blocked), 1);
	ck_assert_uint_eq(atomic_load(&oldest->state), SHM_ENT_FREE);
	/* everything may go: two per pass of max 2, then the rest */
	ck_assert_int_eq(shm_index_reclaim_locked(&ix, s, UINT64_MAX, NULL, 0, 2, &blocked), 2);
	ck_assert_uint_eq(sh->pending_count, 18);
	ck_assert_int_eq(shm_index_reclaim_locked(&ix, s, UINT64_MAX, NULL, 0, 64, &blocked), 18);
	ck_assert_uint_eq(sh->pending_count, 0);
	ck_assert_uint_eq(sh->pending_head, 0);
	shm_index_unlock(&ix, s);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The shard repair walks every bucket of its shard, the table's last one included (shard 15's
 * last bucket is the mask itself): a chain of two there stays LIVE, nothing is retired. */
START_TEST(test_repair_walks_the_last_bucket)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint64_t lo = ix.mask;
	uint32_t s = shard_of(&ix, lo);
	ck_assert_uint_eq(s, SHM_INDEX_SHARDS - 1);
	struct shm_index_entry *e = put(&ix, lo, 1), *f = put(&ix, lo + ix.mask + 1, 2);
	/* f, linked at the head, is the later entry of the shard's table: the walk meets the entries
	 * in the order opposite to their numbers */
	ck_assert_uint_gt(shm_index_idx(&ix, f), shm_index_idx(&ix, e));
	uint32_t pending = ix.hdr->shards[s].pending_count;
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	shm_index_repair_locked(&ix, s);
	shm_index_unlock(&ix, s);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_LIVE);
	ck_assert_uint_eq(atomic_load(&f->state), SHM_ENT_LIVE);
	ck_assert_uint_eq(ix.hdr->shards[s].pending_count, pending);
	int err;
	ck_assert_ptr_eq(get(&ix, lo, 1, &err), e);
	ck_assert_ptr_eq(get(&ix, lo + ix.mask + 1, 2, &err), f);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Hostile free and pending lists: the locker rebuilds them from the entry states. */
START_TEST(test_hostile_lists)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint32_t s = shard_of(&ix, 11);
	struct shm_index_shard *sh = &ix.hdr->shards[s];
	struct shm_index_entry *live = put(&ix, 11, 1);
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	uint32_t repairs = sh->repairs;
	sh->free_head = ENTRIES + 100; /* beyond the table */
	struct shm_index_entry *e = shm_index_pop_free_locked(&ix, s);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_FREE);
	ck_assert_uint_eq(shm_index_idx(&ix, e) % SHM_INDEX_SHARDS, s);
	ck_assert_ptr_ne(e, live);
	shm_index_push_free_locked(&ix, e);
	ck_assert_uint_eq(sh->repairs, repairs + 1);
	sh->free_head = shm_index_idx(&ix, live) + 1; /* names a LIVE entry */
	e = shm_index_pop_free_locked(&ix, s);
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_ne(e, live);
	ck_assert_uint_eq(atomic_load(&live->state), SHM_ENT_LIVE);
	shm_index_push_free_locked(&ix, e);
	ck_assert_uint_eq(sh->repairs, repairs + 2);
	sh->pending_head = ((s + 1) % SHM_INDEX_SHARDS) + 1; /* an entry of another shard */
	unsigned blocked;
	ck_assert_int_eq(shm_index_reclaim_locked(&ix, s, UINT64_MAX, NULL, 0, 8, &blocked), 0);
	ck_assert_uint_eq(sh->repairs, repairs + 3);
	ck_assert_uint_eq(sh->pending_head, 0);
	sh->pending_head = shm_index_idx(&ix, live) + 1; /* names the LIVE entry: never reclaimed */
	ck_assert_int_eq(shm_index_reclaim_locked(&ix, s, UINT64_MAX, NULL, 0, 8, &blocked), 0);
	ck_assert_uint_eq(sh->repairs, repairs + 4);
	ck_assert_uint_eq(sh->pending_head, 0);
	ck_assert_uint_eq(atomic_load(&live->state), SHM_ENT_LIVE);
	shm_index_unlock(&ix, s);
	int err;
	ck_assert_ptr_eq(get(&ix, 11, 1, &err), live);
	/* after all that the shard still holds exactly its entries: one live, the rest free */
	unsigned n = 0;
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	while (shm_index_pop_free_locked(&ix, s))
		n++;
	shm_index_unlock(&ix, s);
	ck_assert_uint_eq(n, PER_SHARD - 1);
	sc_test_arena_destroy(a, name);
}
END_TEST

static int find_block_cb(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	(void)bytes;
	(void)tag;
	uint64_t *want = ctx;
	if (off == want[0]) {
		want[1] = (uint64_t)allocated;
		return 1;
	}
	return 0;
}

/* Is there an allocated heap block whose usable bytes start at @off? (A freed block may have
 * merged with a free neighbour: then no block starts there.) */
static int block_allocated(struct sc_arena *a, uint64_t off)
{
	uint64_t want[2] = { off, 0 };
	ck_assert_int_ge(shm_heap_walk(a->shm, find_block_cb, want), 0);
	return (int)want[1];
}

/* The sweep frees the private reservations of dead processes and nothing else: ours and a live
 * child's stay; the child's goes once it is killed (a liveness seen by an earlier sweep is not
 * reused); the count it returns is the blocks it freed; a block allocated later where a swept one
 * was is not touched by later sweeps; a sweep lock whose holder died is taken over. */
START_TEST(test_sweep_frees_reservations_of_the_dead_only)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint64_t ours;
	ck_assert_uint_ne(a->shm->token, 0);
	int up[2], down[2];
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		struct sc_arena *b;
		uint64_t off;
		if (sc_arena_open(name, &b) || shm_heap_alloc(b->shm, 4096, shm_tag_priv(b->shm->token), &off))
			_exit(2);
		if (write(up[1], &off, sizeof(off)) != sizeof(off))
			_exit(3);
		char c;
		(void)!read(down[0], &c, 1); /* hold the reservation until killed */
		_exit(4);
	}
	close(up[1]);    /* a child that exits early: our read sees the end at once */
	close(down[0]);
	uint64_t theirs;
	ck_assert_int_eq(read(up[0], &theirs, sizeof(theirs)), (ssize_t)sizeof(theirs));
	/* ours after theirs: a walk meets the child's token first (the one whose verdict changes) */
	ck_assert_int_eq(shm_heap_alloc(a->shm, 4096, shm_tag_priv(a->shm->token), &ours), 0);
	ck_assert_int_eq(shm_index_sweep(&ix, -1), 0); /* both owners alive */
	ck_assert(block_allocated(a, ours));
	ck_assert(block_allocated(a, theirs));
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	sc_test_wait_killed(pid);
	ck_assert_int_eq(shm_index_sweep(&ix, -1), 1); /* the dead child's block, counted */
	ck_assert(!block_allocated(a, theirs));
	ck_assert(block_allocated(a, ours));
	/* a block allocated after the sweep (the heap may give it the swept one's place, an offset the
	 * sweep had in its batch) belongs to a live owner: later sweeps keep it */
	uint64_t again;
	ck_assert_int_eq(shm_heap_alloc(a->shm, 4096, shm_tag_priv(a->shm->token), &again), 0);
	ck_assert_int_eq(shm_index_sweep(&ix, -1), 0);
	ck_assert(block_allocated(a, again));
	ck_assert(block_allocated(a, ours));
	/* a process that died holding the sweep lock: the next sweep takes it over and works */
	pid = sc_test_locker(name, &ix.hdr->sweep_mu, 'k', 0);
	sc_test_wait_killed(pid);
	ck_assert_int_eq(shm_heap_set_tag(a->shm, again, shm_tag_priv(shm_token(SHM_READER_SLOTS_MAX - 1, 1))), 0);
	ix.hdr->sweep_mu.magic ^= 1; /* a scribbled sweep lock: no sweep, nothing freed */
	ck_assert_int_eq(shm_index_sweep(&ix, -1), -EBADMSG);
	ck_assert(block_allocated(a, again));
	ix.hdr->sweep_mu.magic ^= 1;
	ck_assert_int_eq(shm_index_sweep(&ix, -1), 1); /* a token past the reader table: dead */
	ck_assert(!block_allocated(a, again));
	ck_assert_int_eq(shm_index_sweep(&ix, -1), 0);
	ck_assert_int_eq(shm_heap_free(a->shm, ours), 0);
	close(up[0]);
	close(down[1]);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A block tagged for an entry of a locked shard is freed by the sweep when that entry does not own
 * it: the entry is FREE (or in a state no writer sets), or of another generation, or holds another
 * block; the blocks of a BUSY entry (a writer filling it) and of a LIVE one stay. */
START_TEST(test_sweep_frees_blocks_their_entry_does_not_own)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	struct shm_arena *m = a->shm;
	uint32_t s = shard_of(&ix, 25);
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	struct shm_index_entry *ent[4];
	uint64_t off[5];
	for (int i = 0; i < 4; i++) {
		ck_assert_ptr_nonnull(ent[i] = shm_index_pop_free_locked(&ix, s));
		uint32_t idx = shm_index_idx(&ix, ent[i]);
		ck_assert_int_eq(shm_heap_alloc(m, 1024, shm_tag_entry(idx, ent[i]->gen), &off[i]), 0);
		ent[i]->payload_off = off[i];
	}
	atomic_store(&ent[0]->state, SHM_ENT_BUSY);    /* being filled: kept */
	atomic_store(&ent[1]->state, SHM_ENT_LIVE);    /* kept */
	atomic_store(&ent[2]->state, SHM_ENT_FREE);    /* owns nothing: freed */
	atomic_store(&ent[3]->state, 77);              /* garbage: freed */
	/* blocks tagged with the LIVE entry's number: of an older generation, and of its generation
	 * but not the block it holds: both freed */
	uint32_t idx1 = shm_index_idx(&ix, ent[1]);
	uint64_t other;
	ck_assert_int_eq(shm_heap_alloc(m, 1024, shm_tag_entry(idx1, ent[1]->gen - 1), &off[4]), 0);
	ck_assert_int_eq(shm_heap_alloc(m, 1024, shm_tag_entry(idx1, ent[1]->gen), &other), 0);
	ck_assert_int_eq(shm_index_sweep(&ix, (int)s), 4);
	ck_assert(!block_allocated(a, other));
	ck_assert(block_allocated(a, off[0]));
	ck_assert(block_allocated(a, off[1]));
	ck_assert(!block_allocated(a, off[2]));
	ck_assert(!block_allocated(a, off[3]));
	ck_assert(!block_allocated(a, off[4]));
	/* without the shard (-1) entry-tagged blocks are not judged at all, not even one that names
	 * an entry past the table; with any shard that one is freed */
	atomic_store(&ent[1]->state, SHM_ENT_FREE);
	uint64_t past;
	ck_assert_int_eq(shm_heap_alloc(m, 1024, shm_tag_entry(ENTRIES + 5, 1), &past), 0);
	ck_assert_int_eq(shm_index_sweep(&ix, -1), 0);
	ck_assert(block_allocated(a, off[1]));
	ck_assert(block_allocated(a, past));
	atomic_store(&ent[1]->state, SHM_ENT_LIVE);
	ck_assert_int_eq(shm_index_sweep(&ix, (int)s), 1);
	ck_assert(!block_allocated(a, past));
	ck_assert(block_allocated(a, off[1]));
	shm_index_unlock(&ix, s);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* One sweep frees at most 64 rounds of 256 blocks (a bound on the time it holds the sweep lock):
 * 16 385 orphaned reservations take two sweeps. */
START_TEST(test_a_sweep_is_bounded)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena_opts o = { .size_bytes = 64u << 20, .huge = SC_HUGE_OFF, .index_entries = ENTRIES };
	struct sc_arena *a = sc_test_arena_opts("index", &o, &name);
	view(a, &ix);
	uint64_t dead = shm_tag_priv(shm_token(SHM_READER_SLOTS_MAX - 1, 1)); /* past the reader table */
	enum { MAX_FREED = 64 * 256 };
	for (int i = 0; i <= MAX_FREED; i++) {
		uint64_t off;
		ck_assert_int_eq(shm_heap_alloc(a->shm, 64, dead, &off), 0);
	}
	ck_assert_int_eq(shm_index_sweep(&ix, -1), MAX_FREED);
	ck_assert_int_eq(shm_index_sweep(&ix, -1), 1);
	ck_assert_int_eq(shm_index_sweep(&ix, -1), 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The shard repair on a chain that loops back (c -> b -> a -> c, three entries: a cut only by
 * the length limit would land elsewhere): the loop is cut where it closes, all three stay LIVE.
 * An entry a dead writer took (BUSY) but never linked is retired, not freed at once. */
START_TEST(test_repair_cuts_loops_where_they_close)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint64_t lo = 27;
	uint32_t s = shard_of(&ix, lo);
	struct shm_index_entry *e[3];
	for (uint32_t k = 0; k < 3; k++)
		e[k] = put(&ix, lo + (uint64_t)k * (ix.mask + 1), k);
	atomic_store(&e[0]->next, shm_index_idx(&ix, e[2]) + 1); /* the tail points at the head */
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	struct shm_index_entry *busy = shm_index_pop_free_locked(&ix, s);
	ck_assert_ptr_nonnull(busy);
	atomic_store(&busy->state, SHM_ENT_BUSY);
	uint32_t pending = ix.hdr->shards[s].pending_count;
	shm_index_repair_locked(&ix, s);
	shm_index_unlock(&ix, s);
	int err;
	for (uint32_t k = 0; k < 3; k++) {
		ck_assert_uint_eq(atomic_load(&e[k]->state), SHM_ENT_LIVE);
		ck_assert_ptr_eq(get(&ix, lo + (uint64_t)k * (ix.mask + 1), k, &err), e[k]);
	}
	ck_assert_uint_eq(atomic_load(&e[0]->next), 0);
	ck_assert_uint_eq(atomic_load(&busy->state), SHM_ENT_RETIRED);
	ck_assert_uint_eq(ix.hdr->shards[s].pending_count, pending + 1);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* On an arena with segments, reclaiming a plain (unsegmented) entry frees its own block. */
START_TEST(test_reclaim_frees_a_plain_block_on_a_segmented_arena)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena_opts o = { .size_bytes = 32u << 20, .huge = SC_HUGE_OFF, .index_entries = ENTRIES,
				   .segment_bytes = 64u << 10 };
	struct sc_arena *a = sc_test_arena_opts("index", &o, &name);
	view(a, &ix);
	uint32_t s = shard_of(&ix, 29);
	struct shm_index_entry *e = put(&ix, 29, 1);
	uint64_t off;
	ck_assert_int_eq(shm_heap_alloc(a->shm, 4096, shm_tag_entry(shm_index_idx(&ix, e), e->gen), &off), 0);
	e->payload_off = off;
	ck_assert_uint_eq(e->meta & SHM_META_SEG, 0);
	ck_assert_int_eq(del(&ix, 29, 1), 0);
	unsigned blocked;
	ck_assert_int_eq(reclaim(&ix, s, UINT64_MAX, NULL, 0, &blocked), 1);
	ck_assert(!block_allocated(a, off));
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Fork a child that arms crash hook @point, opens arena @name, locks shard @s and then unlinks
 * and retires entry @idx (@repair 0) or repairs the shard (@repair 1); it must die at the hook. */
static void killed_at(const char *name, uint32_t s, const char *point, uint32_t idx, int repair)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *b;
		struct shm_index cx;
		/* armed before the lock: a lock that finds its holder dead repairs at once */
		if (shm_fault_arm(point))
			_exit(3);
		if (sc_arena_open(name, &b) || shm_index_view(b->shm, &cx) || shm_index_lock(&cx, s))
			_exit(2);
		if (repair)
			shm_index_repair_locked(&cx, s);
		else
			(void)shm_index_unlink_retire_locked(&cx, &cx.ent[idx]);
		_exit(4); /* the hook was not reached */
	}
	sc_test_wait_killed(pid);
}

/* The retirement stamp comes before the RETIRED mark, in a writer's retirement and in the repair's:
 * a process killed between the two leaves the entry LIVE (and unreachable), which the next repair
 * stamps afresh, never RETIRED without a stamp (0 since its admission), which a reclaim would
 * take as long past. */
START_TEST(test_killed_between_stamp_and_mark)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint32_t s = shard_of(&ix, 31);
	struct shm_index_entry *e = put(&ix, 31, 1);
	uint32_t pending = ix.hdr->shards[s].pending_count; /* before the repairs that die half-way */
	ck_assert_uint_eq(e->retire_epoch, 0);
	killed_at(name, s, "l2.index.retire.stamped", shm_index_idx(&ix, e), 0);
	int err;
	ck_assert_ptr_null(get(&ix, 31, 1, &err)); /* unlinked */
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_LIVE);
	uint64_t child_stamp = e->retire_epoch;
	ck_assert_uint_gt(child_stamp, 0);
	/* the repair, killed at the same place for this entry: still LIVE */
	e->retire_epoch = 0; /* as if the child had died before its stamp */
	killed_at(name, s, "l2.repair.stamped", 0, 1);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_LIVE);
	ck_assert_uint_gt(e->retire_epoch, child_stamp);
	uint64_t repair_stamp = e->retire_epoch;
	/* the next locker's repair finishes: retired with a fresh stamp, on the pending list */
	ck_assert_int_eq(shm_index_lock(&ix, s), 0);
	shm_index_unlock(&ix, s);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_RETIRED);
	ck_assert_uint_gt(e->retire_epoch, repair_stamp);
	ck_assert_uint_eq(ix.hdr->shards[s].pending_count, pending + 1);
	/* and a reclaim pass with every epoch before that stamp leaves it: a reader may use it */
	unsigned blocked;
	ck_assert_int_eq(reclaim(&ix, s, e->retire_epoch, NULL, 0, &blocked), 0);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_RETIRED);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A writer killed holding a shard lock after linking a BUSY entry, and with a LIVE entry
 * unlinked but not retired: the next locker makes the first LIVE and retires the second. */
START_TEST(test_dead_writer_repair)
{
	const char *name;
	struct shm_index ix;
	struct sc_arena *a = index_arena(&name, &ix);
	uint32_t s = shard_of(&ix, 13);
	struct shm_index_entry *gone = put(&ix, 13 + ENTRIES, 2);
	uint32_t repairs = ix.hdr->shards[s].repairs, pending = ix.hdr->shards[s].pending_count;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *b;
		struct shm_index cx;
		if (sc_arena_open(name, &b) || shm_index_view(b->shm, &cx) || shm_index_lock(&cx, s))
			_exit(2);
		/* unlink `gone` by hand (no retire), then link a BUSY entry and die */
		uint32_t bk = shm_index_bucket(&cx, 13);
		struct shm_index_entry *g = &cx.ent[shm_index_idx(&ix, gone)];
		atomic_store(&cx.buckets[bk], atomic_load(&g->next));
		struct shm_index_entry *e = shm_index_pop_free_locked(&cx, s);
		if (!e)
			_exit(3);
		e->key_lo = 13;
		e->key_hi = 1;
		atomic_store(&e->next, atomic_load(&cx.buckets[bk]));
		atomic_store(&e->state, SHM_ENT_BUSY);
		atomic_store(&cx.buckets[bk], shm_index_idx(&cx, e) + 1);
		raise(SIGKILL);
		_exit(4);
	}
	sc_test_wait_killed(pid);
	int err;
	ck_assert_ptr_null(get(&ix, 13, 1, &err)); /* BUSY: not visible yet */
	ck_assert_int_eq(shm_index_lock(&ix, s), 0); /* the dead holder's lock: repaired */
	shm_index_unlock(&ix, s);
	ck_assert_uint_eq(ix.hdr->shards[s].repairs, repairs + 1);
	ck_assert_uint_eq(ix.hdr->shards[s].repair_pending, 0);
	struct shm_index_entry *e = get(&ix, 13, 1, &err);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(atomic_load(&e->state), SHM_ENT_LIVE);
	ck_assert_ptr_null(get(&ix, 13 + ENTRIES, 2, &err));
	ck_assert_uint_eq(atomic_load(&gone->state), SHM_ENT_RETIRED);
	ck_assert_uint_eq(ix.hdr->shards[s].pending_count, pending + 1);
	sc_test_arena_destroy(a, name);
}
END_TEST

Suite *shm_index_suite(void)
{
	Suite *s = suite_create("shm_index");
	TCase *tc = tcase_create("index");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_view_checks_header);
	tcase_add_test(tc, test_insert_lookup_replace_remove);
	tcase_add_test(tc, test_retired_wait_then_reused);
	tcase_add_test(tc, test_full_shard);
	tcase_add_test(tc, test_every_entry_up_to_the_last_is_linked_and_found);
	tcase_add_test(tc, test_hostile_chains);
	tcase_add_test(tc, test_chains_at_the_longest_allowed);
	tcase_add_test(tc, test_reclaim_passes_are_bounded);
	tcase_add_test(tc, test_an_index_of_odd_size_works);
	tcase_add_test(tc, test_format_refuses_bad_parameters);
	tcase_add_test(tc, test_a_retired_entry_still_linked_is_reported);
	tcase_add_test(tc, test_repair_walks_the_last_bucket);
	tcase_add_test(tc, test_hostile_lists);
	tcase_add_test(tc, test_dead_writer_repair);
	tcase_add_test(tc, test_killed_between_stamp_and_mark);
	tcase_add_test(tc, test_sweep_frees_reservations_of_the_dead_only);
	tcase_add_test(tc, test_sweep_frees_blocks_their_entry_does_not_own);
	tcase_add_test(tc, test_a_sweep_is_bounded);
	tcase_add_test(tc, test_repair_cuts_loops_where_they_close);
	tcase_add_test(tc, test_reclaim_frees_a_plain_block_on_a_segmented_arena);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(shm_index_suite)
