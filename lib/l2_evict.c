/*
 * lib/l2_evict.c — budget, eviction (CLOCK with a frequency hint) and reclamation.
 *
 * CLOCK: readers store freq = 1 on a hit when it reads 0 (one relaxed store, rarely repeated).
 * The evictor scans at most L2_SCAN_MAX entries from a shared hand. Victims are planned first
 * and evicted only if the plan frees enough: entries with freq 0 in scan order, then (second
 * pass) entries with freq 1; a plan that cannot be met changes nothing (-ENOSPC). When a plan is
 * carried out, the freq hints of scanned entries that were spared are cleared (their second
 * chance is used). Leased entries and the entry being replaced are never chosen. Entries of other
 * shards are taken only if their shard can be trylocked (lock order, shm/index.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "l2.h"
#include "probes.h"
#include "../shm/fault.h"
#include "../shm/heap.h"

#define L2_SCAN_MAX 8192u
#define L2_VICTIMS_MAX 1024u
#define L2_RECLAIM_PER_CALL 64u

uint64_t l2_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t l2_budget(struct sc_arena *a)
{
	uint64_t b = atomic_load_explicit(&l2_ix(a)->hdr->budget_bytes, memory_order_relaxed);
	uint64_t heap = a->shm->hv.regions[SHM_REGION_HEAP].size;
	return b && b < heap ? b : heap;
}

uint64_t l2_used(struct sc_arena *a)
{
	struct shm_heap_stats hs;
	if (shm_heap_stats(a->shm, &hs))
		return 0;
	return hs.used_bytes;
}

static int is_leased(const uint64_t *v, size_t n, uint64_t rec)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid] == rec)
			return 1;
		if (v[mid] < rec)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

void l2_reclaim_locked(struct sc_arena *a, uint32_t shard)
{
	struct shm_index *ix = l2_ix(a);
	if (!ix->hdr->shards[shard].pending_head)
		return;
	/* epochs first, then leases: a reader whose epoch exit we see recorded its lease before it
	 * (release in shm_epoch_exit), so the lease read below is seen (shm/index.c, Reclamation) */
	uint64_t min = shm_epoch_min_active(a->shm);
	uint64_t *leases;
	size_t n = l2_leases_collect(a, &leases);
	if (n == SIZE_MAX)
		return;
	shm_sched_point("l2.reclaim.leases_read");
	unsigned blocked = 0;
	(void)shm_index_reclaim_locked(ix, shard, min, leases, n, L2_RECLAIM_PER_CALL, &blocked);
	free(leases);
	if (blocked && l2_reap(a, 0) > 0) {
		/* a dead process was what pinned them: try once more */
		min = shm_epoch_min_active(a->shm);
		if ((n = l2_leases_collect(a, &leases)) != SIZE_MAX) {
			(void)shm_index_reclaim_locked(ix, shard, min, leases, n, L2_RECLAIM_PER_CALL, &blocked);
			free(leases);
		}
	}
}

/* Reclaim in every shard we hold or can trylock; @held is locked by the caller. */
void l2_reclaim_all(struct sc_arena *a, int held)
{
	struct shm_index *ix = l2_ix(a);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		if (!ix->hdr->shards[s].pending_head)
			continue;
		if ((int)s == held) {
			l2_reclaim_locked(a, s);
		} else if (shm_index_trylock(ix, s) == 0) {
			l2_reclaim_locked(a, s);
			shm_index_unlock(ix, s);
		}
	}
}

int l2_make_room(struct sc_arena *a, uint64_t need_bytes, int need_shard, int held,
		 const struct shm_index_entry *exclude)
{
	struct shm_index *ix = l2_ix(a);
	uint64_t *leases;
	size_t nl = l2_leases_collect(a, &leases);
	if (nl == SIZE_MAX)
		return -ENOSPC;
	struct shm_index_entry **t0 = malloc(2 * L2_VICTIMS_MAX * sizeof(*t0));
	if (!t0) {
		free(leases);
		return -ENOSPC;
	}
	struct shm_index_entry **t1 = t0 + L2_VICTIMS_MAX;
	unsigned n0 = 0, n1 = 0;
	uint32_t locked = held >= 0 ? 1u << held : 0, mine = 0;
	uint64_t sum0 = 0;
	int shard_ok0 = need_shard < 0;
	uint32_t n = ix->nentries;
	/* shard mode (only an entry of need_shard is wanted): walk that shard's entries */
	int shard_mode = need_shard >= 0 && need_bytes == 0;
	uint32_t span = shard_mode ? n / SHM_INDEX_SHARDS : n;
	uint32_t scan = span < L2_SCAN_MAX ? span : L2_SCAN_MAX;
	uint64_t start = atomic_load_explicit(&ix->hdr->hand, memory_order_relaxed);
	uint32_t k;
	for (k = 0; k < scan && n0 < L2_VICTIMS_MAX; k++) {
		uint32_t idx = shard_mode ? (uint32_t)(((start + k) % span) * SHM_INDEX_SHARDS + (uint32_t)need_shard)
					  : (uint32_t)((start + k) % n);
		if (idx >= n)
			continue;
		struct shm_index_entry *e = &ix->ent[idx];
		if (e == exclude || atomic_load_explicit(&e->state, memory_order_relaxed) != SHM_ENT_LIVE)
			continue;
		if (is_leased(leases, nl, shm_index_rec(ix, e)))
			continue;
		uint32_t sh = idx % SHM_INDEX_SHARDS;
		if (!(locked & (1u << sh))) {
			if (shm_index_trylock(ix, sh))
				continue;
			locked |= 1u << sh;
			mine |= 1u << sh;
			if (atomic_load_explicit(&e->state, memory_order_relaxed) != SHM_ENT_LIVE)
				continue;
		}
		if (atomic_load_explicit(&e->freq, memory_order_relaxed) == 0) {
			t0[n0++] = e;
			sum0 += e->footprint;
			if (sh == (uint32_t)need_shard)
				shard_ok0 = 1;
			if (sum0 >= need_bytes && shard_ok0) {
				k++;
				break;
			}
		} else if (n1 < L2_VICTIMS_MAX) {
			t1[n1++] = e;
		}
	}
	/* second chance used up: take freq-1 entries in scan order until the plan is met */
	unsigned take1 = 0;
	uint64_t sum = sum0;
	int shard_ok = shard_ok0;
	while ((sum < need_bytes || !shard_ok) && take1 < n1) {
		struct shm_index_entry *e = t1[take1++];
		sum += e->footprint;
		if (shm_index_idx(ix, e) % SHM_INDEX_SHARDS == (uint32_t)need_shard)
			shard_ok = 1;
	}
	int rc = 0;
	if (sum < need_bytes || !shard_ok) {
		rc = -ENOSPC; /* plan not met: nothing changes */
	} else {
		for (unsigned i = 0; i < n0 + take1; i++) {
			struct shm_index_entry *e = i < n0 ? t0[i] : t1[i - n0];
			uint64_t lo = e->digest_lo, hi = e->digest_hi, fp = e->footprint, sid = e->stage_id;
			if (shm_index_unlink_retire_locked(ix, e))
				continue;
			shm_fault_point("l2.evict.unlinked");
			l2_count_event(a, sid, L2C_EVICTIONS, 1);
			SC_PROBE(l2_evict, sid, lo, hi, fp);
		}
		for (unsigned i = take1; i < n1; i++)
			atomic_store_explicit(&t1[i]->freq, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&ix->hdr->hand, k, memory_order_relaxed);
	}
	free(t0);
	free(leases);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		if (!(locked & (1u << s)))
			continue;
		if (rc == 0)
			l2_reclaim_locked(a, s);
		if (mine & (1u << s))
			shm_index_unlock(ix, s);
	}
	return rc;
}
