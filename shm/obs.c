/*
 * shm/obs.c — the promotion observation table in SHM_REGION_OBS (the policy is lib/promote.c).
 *
 * Layout: [ header (256 B) | slots x struct shm_obs_entry | SHM_OBS_CLAIMS x struct shm_obs_claim ]
 *
 * Protocol
 * --------
 * Everything in the region except the header's identity (magic, slots, capacity, claims: written
 * once by the creator before the arena's initialised word is published, read-only afterwards) is
 * read and written only with hdr->mu held: the arena's robust writer lock (shm/mutex.h). There is no lock-free
 * reader: the table is touched once per L3 fill (milliseconds apart), not on the L2 read path, so
 * plain loads and stores under the mutex suffice and no field needs an atomic.
 *
 * Observations are an open-addressing hash table (linear probing, slots a power of two at least
 * twice the capacity so chains stay short) with backward-shift deletion, so there are no
 * tombstones. A holder killed mid-update can leave a chain with a hole or a duplicate: the next
 * locker gets -EOWNERDEAD and rebuilds the table from the entries that look sane (re-inserting each,
 * dropping duplicates and garbage) and recounts. Observations are advisory, so losing one costs at
 * most a delayed promotion. Claims are a flat array scanned under the lock; a claim names its
 * holder by owner token (shm/readers.h), so a dead claimer is seen from any pid namespace.
 *
 * Hostile arena: shm_obs_table() checks the header against the region size before any use, and
 * every probe loop is bounded by the slot count.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "obs.h"
#include "mutex.h"

static uint32_t slots_for(uint32_t entries)
{
	return shm_pow2_at_least((uint64_t)(entries ? entries : 1) * 2, 1);
}

uint64_t shm_obs_bytes(uint32_t entries)
{
	return SHM_OBS_HDR_BYTES + (uint64_t)slots_for(entries) * sizeof(struct shm_obs_entry) +
	       (uint64_t)SHM_OBS_CLAIMS * sizeof(struct shm_obs_claim);
}

int shm_obs_format(struct shm_arena *a)
{
	uint64_t size;
	struct shm_obs_hdr *h = shm_region(a, SHM_REGION_OBS, &size);
	uint32_t entries = a->hv.obs_entries;
	if (size < shm_obs_bytes(entries))
		return -EINVAL;
	memset(h, 0, SHM_OBS_HDR_BYTES);
	shm_mutex_init(&h->mu);
	h->slots = slots_for(entries);
	h->capacity = entries;
	h->claims = SHM_OBS_CLAIMS;
	h->magic = SHM_OBS_MAGIC;
	return 0;
}

struct shm_obs_hdr *shm_obs_table(struct shm_arena *a)
{
	uint64_t size;
	struct shm_obs_hdr *h = shm_region(a, SHM_REGION_OBS, &size);
	if (size < SHM_OBS_HDR_BYTES || h->magic != SHM_OBS_MAGIC || h->claims != SHM_OBS_CLAIMS || !h->slots ||
	    (h->slots & (h->slots - 1)) || h->capacity == 0 || h->slots < 2ull * h->capacity ||
	    SHM_OBS_HDR_BYTES + (uint64_t)h->slots * 64 + (uint64_t)h->claims * 64 > size)
		return NULL;
	return h;
}

static uint32_t hash3(uint64_t stage, uint64_t lo, uint64_t hi)
{
	uint64_t x = lo ^ (hi * 0x9e3779b97f4a7c15ull) ^ (stage * 0xc2b2ae3d27d4eb4full);
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x;
}

struct shm_obs_entry *shm_obs_find_locked(struct shm_obs_hdr *h, uint64_t stage, uint64_t lo, uint64_t hi)
{
	struct shm_obs_entry *t = shm_obs_entries(h);
	uint32_t mask = h->slots - 1, i = hash3(stage, lo, hi) & mask;
	for (uint32_t n = 0; n < h->slots; n++, i = (i + 1) & mask) {
		struct shm_obs_entry *e = &t[i];
		if (!(e->flags & SHM_OBS_USED))
			return NULL;
		if (e->stage_id == stage && e->digest_lo == lo && e->digest_hi == hi)
			return e;
	}
	return NULL;
}

struct shm_obs_entry *shm_obs_insert_locked(struct shm_obs_hdr *h, uint64_t stage, uint64_t lo, uint64_t hi)
{
	struct shm_obs_entry *t = shm_obs_entries(h);
	uint32_t mask = h->slots - 1, i = hash3(stage, lo, hi) & mask;
	for (uint32_t n = 0; n < h->slots; n++, i = (i + 1) & mask) {
		struct shm_obs_entry *e = &t[i];
		if (e->flags & SHM_OBS_USED)
			continue;
		memset(e, 0, sizeof(*e));
		e->stage_id = stage, e->digest_lo = lo, e->digest_hi = hi;
		e->flags = SHM_OBS_USED; /* last: a holder killed before this leaves an empty slot */
		h->count++;
		return e;
	}
	return NULL;
}

void shm_obs_remove_locked(struct shm_obs_hdr *h, struct shm_obs_entry *e)
{
	struct shm_obs_entry *t = shm_obs_entries(h);
	uint32_t mask = h->slots - 1, hole = (uint32_t)(e - t);
	/* backward shift: move later members of the chain into the hole while that keeps them
	 * reachable from their home slot */
	for (uint32_t n = 0, j = (hole + 1) & mask; n < h->slots; n++, j = (j + 1) & mask) {
		if (!(t[j].flags & SHM_OBS_USED))
			break;
		uint32_t home = hash3(t[j].stage_id, t[j].digest_lo, t[j].digest_hi) & mask;
		/* t[j] may move to the hole when its home is not in (hole, j] cyclically */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			t[hole] = t[j];
			hole = j;
		}
	}
	memset(&t[hole], 0, sizeof(t[hole]));
	if (h->count)
		h->count--;
}

/* The last holder died mid-update: rebuild the hash table from the sane entries. */
static void repair_locked(struct shm_obs_hdr *h)
{
	struct shm_obs_entry *t = shm_obs_entries(h);
	struct shm_obs_entry *keep = malloc((size_t)h->slots * sizeof(*keep));
	uint32_t n = 0;
	for (uint32_t i = 0; keep && i < h->slots; i++)
		if (t[i].flags & SHM_OBS_USED && !(t[i].flags & ~SHM_OBS_FLAGS))
			keep[n++] = t[i];
	memset(t, 0, (size_t)h->slots * sizeof(*t));
	h->count = 0;
	for (uint32_t i = 0; i < n && h->count < h->capacity; i++) {
		if (shm_obs_find_locked(h, keep[i].stage_id, keep[i].digest_lo, keep[i].digest_hi))
			continue;
		struct shm_obs_entry *e = shm_obs_insert_locked(h, keep[i].stage_id, keep[i].digest_lo, keep[i].digest_hi);
		if (e) {
			e->first_seen_ns = keep[i].first_seen_ns;
			e->hits = keep[i].hits;
			e->flags = keep[i].flags;
		}
	}
	free(keep);
	h->repairs++;
}

int shm_obs_lock(struct shm_arena *a, struct shm_obs_hdr *h)
{
	int rc = shm_mutex_lock(a, &h->mu);
	if (rc == -EOWNERDEAD) {
		repair_locked(h);
		rc = 0;
	}
	return rc;
}

void shm_obs_unlock(struct shm_arena *a, struct shm_obs_hdr *h)
{
	shm_mutex_unlock(a, &h->mu);
}
