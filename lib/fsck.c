/*
 * lib/fsck.c — sc_arena_fsck: check (and repair) an arena.
 *
 * Order: header; reader slots; then, with every index shard locked (so no entry changes under
 * us; lock-free readers keep running), the bucket chains, every entry, and one walk of the heap
 * that classifies each allocated block by its tag:
 *   ENTRY(idx, gen)  owned when entry idx has that generation, points at the block and is LIVE,
 *                    RETIRED (pending reclamation) or being freed;
 *   PRIV(slot, pid)  a private reservation: owned while that process holds that reader slot,
 *                    an orphan once it died (the next writer's sweep frees it; repair does now);
 *   anything else    leaked.
 * Then, still under the shard locks, the eviction lists (shm/evq.c): their links against their
 * nodes, and every live entry on one of them (repair rebuilds the lists and puts orphans on the
 * small FIFO). Then the rings and the observation table, each under its own protocol.
 *
 * Repair only uses the modules' own repair paths (shard rebuild, unlink + retire, the orphan
 * sweep, the readers reaper), so what it leaves is what those paths guarantee. Shards are taken
 * with trylock only (the index's lock order forbids blocking on a second shard), retried for a
 * bounded time.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "l2.h"
#include "../shm/heap.h"
#include "../shm/mutex.h"
#include "../shm/obs.h"
#include "../shm/l3ix.h"

struct fsck {
	struct sc_arena *a;
	uint32_t flags;
	sc_fsck_fn cb;
	void *ctx;
	struct sc_fsck_report *r;
	struct shm_index *ix;
	uint8_t *reached;      /* per entry: found in its bucket chain */
	uint8_t *has_block;    /* per entry: its block was seen in the heap walk */
	uint64_t *free_offs;   /* blocks the repair frees after the walk */
	size_t nfree, cap_free;
	int need_sweep;        /* repair: run the index's sweep after the walk */
	uint32_t seg_sweep;    /* shards whose segment records lost their entry (bit per shard) */
	uint64_t pending_seen[SHM_INDEX_SHARDS];
};

static void finding(struct fsck *f, const char *component, int repaired, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void finding(struct fsck *f, const char *component, int repaired, const char *fmt, ...)
{
	f->r->problems++;
	if (repaired)
		f->r->repaired++;
	if (!f->cb)
		return;
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	f->cb(component, msg, repaired, f->ctx);
}

static int repairing(const struct fsck *f)
{
	return (f->flags & SC_FSCK_REPAIR) != 0;
}

static void check_readers(struct fsck *f)
{
	struct shm_arena *s = f->a->shm;
	uint32_t n = shm_readers_count(s);
	uint64_t dead = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct shm_reader_slot *rs = shm_reader_slot(s, i);
		uint32_t pid = atomic_load_explicit(&rs->pid, memory_order_relaxed);
		if (atomic_load_explicit(&rs->state, memory_order_acquire) == SHM_SLOT_FREE)
			continue;
		if (shm_slot_alive(s, i)) {
			f->r->readers_live++;
			continue;
		}
		dead++;
		const struct l2_ext *x = l2_ext_of(rs);
		unsigned leases = 0;
		for (unsigned k = 0; k < SC_LEASES_MAX; k++)
			leases += atomic_load_explicit(&x->rec[k], memory_order_relaxed) != 0;
		finding(f, "readers", repairing(f), "slot %u: its process (pid %u in its namespace) is gone (%u leases held)",
			i, pid, leases);
	}
	f->r->readers_dead = dead;
	if (dead && repairing(f))
		(void)l2_reap(f->a, 1);
}

/* The arena's writer locks themselves: a scribbled magic word makes every writer fail with
 * -EBADMSG, and a word naming no slot is taken over by the next locker; repair re-initialises
 * such a lock (fsck --repair assumes no other writer is inside it). */
static void check_mutex(struct fsck *f, struct shm_mutex *m, const char *what)
{
	if (!m || shm_mutex_check(f->a->shm, m) == 0)
		return;
	int fix = repairing(f);
	if (fix)
		shm_mutex_init(m);
	finding(f, "locks", fix, "%s: the lock is corrupted (bad magic word, or an owner that names no reader slot)", what);
}

static void check_mutexes(struct fsck *f)
{
	char what[32];
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		snprintf(what, sizeof(what), "index shard %u", s);
		check_mutex(f, &f->ix->hdr->shards[s].mu, what);
	}
	check_mutex(f, &f->ix->hdr->sweep_mu, "index sweep");
	check_mutex(f, &l2_q(f->a)->hdr->mu, "eviction lists");
	check_mutex(f, &l2_q(f->a)->hdr->search_mu, "room search");
	check_mutex(f, shm_heap_mutex(f->a->shm), "heap");
	struct shm_obs_hdr *h = shm_obs_table(f->a->shm);
	if (h)
		check_mutex(f, &h->mu, "observation table");
	struct shm_l3ix ix;
	if (shm_l3ix_view(f->a->shm, &ix) == 0) {
		check_mutex(f, &ix.hdr->mu, "L3 location index");
		check_mutex(f, &ix.hdr->sync_mu, "L3 location index scan");
	}
}

/* Take every shard in ascending order, waiting for each (a dead holder's shard is taken over and
 * repaired). Deadlock-free: every other writer blocks on at most one shard and only trylocks the
 * rest, so nobody waits for a shard while holding one we wait for. 0, or -EBADMSG with nothing
 * held (a corrupted shard mutex). */
static int lock_all(struct shm_index *ix)
{
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		int rc = shm_index_lock(ix, s);
		if (rc) {
			while (s-- > 0)
				shm_index_unlock(ix, s);
			return rc;
		}
	}
	return 0;
}

static void unlock_all(struct shm_index *ix)
{
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		shm_index_unlock(ix, s);
}

static void check_chains(struct fsck *f)
{
	struct shm_index *ix = f->ix;
	uint32_t nb = ix->mask + 1;
	for (uint32_t b = 0; b < nb; b++) {
		uint32_t cur = atomic_load_explicit(&ix->buckets[b], memory_order_acquire), len = 0;
		uint32_t shard = shm_index_shard_of_bucket(b);
		while (cur) {
			const char *bad = NULL;
			if (cur > ix->nentries)
				bad = "an entry index out of range";
			else if (++len > SHM_INDEX_MAX_CHAIN)
				bad = "a chain too long (cycle?)";
			else if ((cur - 1) % SHM_INDEX_SHARDS != shard)
				bad = "an entry of another shard";
			else if (atomic_load_explicit(&ix->ent[cur - 1].state, memory_order_acquire) != SHM_ENT_LIVE)
				bad = "an entry that is not live";
			else if (shm_index_bucket(ix, ix->ent[cur - 1].key_lo) != b)
				bad = "an entry of another bucket";
			if (bad) {
				finding(f, "index", repairing(f), "bucket %u: chain holds %s", b, bad);
				if (repairing(f))
					shm_index_repair_locked(ix, shard);
				break;
			}
			f->reached[cur - 1] = 1;
			cur = atomic_load_explicit(&ix->ent[cur - 1].next, memory_order_acquire);
		}
	}
}

static void remove_entry(struct fsck *f, struct shm_index_entry *e)
{
	if (shm_index_unlink_retire_locked(f->ix, e) == 0) {
		f->r->dropped++;
		/* it is pending reclamation now: account it as such for the shard check */
		f->pending_seen[shm_index_idx(f->ix, e) % SHM_INDEX_SHARDS] += e->footprint;
	}
}

static void check_entries(struct fsck *f)
{
	struct shm_index *ix = f->ix;
	for (uint32_t i = 0; i < ix->nentries; i++) {
		struct shm_index_entry *e = &ix->ent[i];
		uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);
		if (st == SHM_ENT_RETIRED) {
			f->pending_seen[i % SHM_INDEX_SHARDS] += e->footprint;
			continue;
		}
		if (st == SHM_ENT_BUSY || st == SHM_ENT_FREEING) {
			/* we hold every shard lock: only a dead writer leaves these, and the lock's repair
			 * should have cleaned them up */
			finding(f, "index", repairing(f), "entry %u: left %s by a writer", i, st == SHM_ENT_BUSY ? "busy" : "freeing");
			if (repairing(f))
				shm_index_repair_locked(ix, i % SHM_INDEX_SHARDS);
			continue;
		}
		if (st != SHM_ENT_LIVE) {
			if (st != SHM_ENT_FREE)
				finding(f, "index", 0, "entry %u: unknown state %u", i, st);
			continue;
		}
		uint64_t wire;
		struct sc_kv_desc desc;
		int has_desc;
		if (!f->reached[i]) {
			finding(f, "index", repairing(f), "entry %u: live but not reachable from its bucket", i);
			if (repairing(f))
				shm_index_repair_locked(ix, i % SHM_INDEX_SHARDS);
			continue;
		}
		if (l2_entry_check(ix, e, &wire, &desc, &has_desc)) {
			finding(f, "index", repairing(f), "entry %u: inconsistent sizes, kind or descriptor", i);
			if (repairing(f))
				remove_entry(f, e);
			continue;
		}
		f->r->entries++;
		if (f->flags & SC_FSCK_DEEP) {
			struct sc_digest d = { 0, 0 };
			if (e->meta & SHM_META_SEG) {
				/* scattered or not, the record's pieces make the wire */
				void *buf = malloc(wire ? wire : 1);
				if (buf && l2_seg_copy(f->a, ix->heap_lo + 64ull * e->seg_rec, buf, wire) == (int64_t)wire)
					d = sc_digest(buf, wire);
				free(buf);
			} else {
				d = sc_digest(ix->a->base + e->payload_off, wire);
			}
			f->r->digests_checked++;
			if (d.lo != e->digest_lo || d.hi != e->digest_hi) {
				f->r->digest_failures++;
				char hex[SC_DIGEST_HEX_LEN + 1];
				finding(f, "index", repairing(f), "entry %u: payload does not match digest %s", i,
					sc_digest_format((struct sc_digest){ e->digest_lo, e->digest_hi }, hex));
				if (repairing(f))
					remove_entry(f, e);
			}
		}
	}
}

static int tag_owner_alive(struct fsck *f, uint64_t tag)
{
	return shm_token_alive(f->a->shm, (uint32_t)tag);
}

static void to_free(struct fsck *f, uint64_t off)
{
	if (f->nfree == f->cap_free) {
		size_t cap = f->cap_free ? f->cap_free * 2 : 64;
		uint64_t *p = realloc(f->free_offs, cap * sizeof(*p));
		if (!p)
			return;
		f->free_offs = p;
		f->cap_free = cap;
	}
	f->free_offs[f->nfree++] = off;
}

static int walk_cb(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	struct fsck *f = ctx;
	struct shm_index *ix = f->ix;
	f->r->heap_blocks++;
	if (!allocated) {
		f->r->heap_free_bytes += bytes;
		return 0;
	}
	f->r->heap_used_bytes += bytes;
	if (SHM_TAG_TYPE(tag) == SHM_TAG_SEGHOLD) {
		f->r->entry_bytes += bytes; /* kept for the segments others use (check_segments) */
		return 0;
	}
	if (SHM_TAG_TYPE(tag) == SHM_TAG_SEGREC) {
		/* an entry's segment record: owned when the entry names it */
		uint32_t idx = (uint32_t)(tag >> 32) & 0xffffff, gen = (uint32_t)tag;
		if (idx < ix->nentries) {
			struct shm_index_entry *e = &ix->ent[idx];
			uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);
			if (e->gen == gen && (e->meta & SHM_META_SEG) && ix->heap_lo + 64ull * e->seg_rec == off &&
			    st != SHM_ENT_FREE) {
				if (st == SHM_ENT_RETIRED)
					f->r->pending_bytes += bytes;
				else
					f->r->entry_bytes += bytes;
				return 0;
			}
		}
		/* the segment sweep of the entry's shard releases it (it may hold references) */
		f->r->leaked_bytes += bytes;
		finding(f, "heap", repairing(f), "segment record at %llu is owned by no entry", (unsigned long long)off);
		f->seg_sweep |= 1u << (idx % SHM_INDEX_SHARDS); /* after the walk (the heap is locked now) */
		return 0;
	}
	if (SHM_TAG_TYPE(tag) == SHM_TAG_ENTRY || SHM_TAG_TYPE(tag) == SHM_TAG_SEGDATA) {
		uint32_t idx = (uint32_t)(tag >> 32) & 0xffffff, gen = (uint32_t)tag;
		if (idx < ix->nentries) {
			struct shm_index_entry *e = &ix->ent[idx];
			uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);
			if (e->gen == gen && e->payload_off == off && st != SHM_ENT_FREE) {
				f->has_block[idx] = 1;
				if (st == SHM_ENT_RETIRED)
					f->r->pending_bytes += bytes;
				else
					f->r->entry_bytes += bytes;
				return 0;
			}
		}
	} else if (SHM_TAG_TYPE(tag) == SHM_TAG_PRIV) {
		if (tag_owner_alive(f, tag)) {
			f->r->reserved_bytes += bytes;
		} else {
			f->r->orphan_bytes += bytes;
			finding(f, "heap", repairing(f), "block at %llu (%llu bytes): reservation of a detached holder (token %#x)",
				(unsigned long long)off, (unsigned long long)bytes, (uint32_t)tag);
			f->need_sweep = 1; /* the index's own sweep frees it, under sweep_mu */
		}
		return 0;
	}
	f->r->leaked_bytes += bytes;
	finding(f, "heap", repairing(f), "block at %llu (%llu bytes, tag %016llx) is owned by nothing",
		(unsigned long long)off, (unsigned long long)bytes, (unsigned long long)tag);
	if (SHM_TAG_TYPE(tag) == SHM_TAG_ENTRY)
		f->need_sweep = 1; /* tagged for an entry that does not own it: the sweep frees those */
	else if (SHM_TAG_TYPE(tag) == SHM_TAG_SEGDATA)
		f->seg_sweep |= 1u << ((uint32_t)(tag >> 32) % SHM_INDEX_SHARDS); /* the segment sweep frees it */
	else if (repairing(f))
		to_free(f, off); /* a tag nobody else recognises: nobody else frees it either */
	return 0;
}

static void check_heap(struct fsck *f)
{
	int rc = shm_heap_walk(f->a->shm, walk_cb, f);
	if (rc) {
		finding(f, "heap", 0, "block chain is corrupted (%s)", sc_strerror(rc));
		if (repairing(f) && shm_heap_repair(f->a->shm) == 0)
			f->r->repaired++;
		return;
	}
	for (size_t i = 0; i < f->nfree; i++)
		(void)shm_heap_free(f->a->shm, f->free_offs[i]);
	/* orphaned reservations and mis-tagged blocks go through the index's sweep (sweep_mu), so a
	 * concurrent sweep of another process can never free the same block twice; we hold every
	 * shard, which lets it free entry-tagged blocks of each */
	if (f->need_sweep && repairing(f))
		for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
			(void)shm_index_sweep(f->ix, (int)s);
	struct shm_segtab t;
	if (f->seg_sweep && repairing(f) && shm_seg_view(f->a->shm, f->ix, &t) == 0)
		for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
			if (f->seg_sweep & (1u << s))
				(void)shm_seg_sweep_shard(&t, s);
	/* every live or retired entry must own its block */
	struct shm_index *ix = f->ix;
	for (uint32_t i = 0; i < ix->nentries; i++) {
		struct shm_index_entry *e = &ix->ent[i];
		uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);
		if ((st == SHM_ENT_LIVE || st == SHM_ENT_RETIRED) && !f->has_block[i]) {
			finding(f, "index", 0, "entry %u (%s): its heap block is missing or tagged for another owner", i,
				st == SHM_ENT_LIVE ? "live" : "retired");
		}
	}
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		struct shm_index_shard *sh = &ix->hdr->shards[s];
		if (sh->pending_bytes != f->pending_seen[s]) {
			finding(f, "index", repairing(f), "shard %u: pending bytes %llu, retired entries hold %llu", s,
				(unsigned long long)sh->pending_bytes, (unsigned long long)f->pending_seen[s]);
			if (repairing(f))
				sh->pending_bytes = f->pending_seen[s];
		}
		f->r->lock_repairs += sh->repairs;
	}
}

/* The segment table (shard locks held): every slot's reference count must equal the number of
 * HELD segment records naming it, every record's pins the LIVE slots in its data block; repair
 * rebuilds them (what a locker does after a holder died). */
static void check_segments(struct fsck *f)
{
	struct shm_segtab t;
	int rc = shm_seg_view(f->a->shm, f->ix, &t);
	if (rc == -ENOTSUP)
		return;
	if (rc) {
		finding(f, "segments", 0, "the segment table's header is corrupted");
		return;
	}
	if ((rc = shm_seg_lock(&t))) {
		finding(f, "segments", 0, "cannot lock the segment table (%s)", sc_strerror(rc));
		return;
	}
	int64_t wrong = shm_seg_recount_locked(&t, 0);
	if (wrong > 0) {
		int fix = repairing(f);
		finding(f, "segments", fix, "%lld segment reference counts are wrong", (long long)wrong);
		if (fix) {
			(void)shm_seg_recount_locked(&t, 1);
			t.hdr->recounts++;
		}
	} else if (wrong < 0) {
		finding(f, "segments", 0, "segment records cannot be counted (%s)", sc_strerror((int)wrong));
	}
	shm_seg_unlock(&t);
}

/* The eviction lists (shard locks held: no entry changes state under us). */
static void check_policy(struct fsck *f)
{
	struct shm_evq *q = l2_q(f->a);
	struct shm_index *ix = f->ix;
	int rc = shm_evq_lock(q); /* a dead holder's lists are rebuilt by the lock itself */
	if (rc) {
		finding(f, "policy", 0, "cannot lock the eviction lists (%s)", sc_strerror(rc));
		return;
	}
	const char *why = NULL;
	if (shm_evq_check_locked(q, &why)) {
		int fix = repairing(f);
		finding(f, "policy", fix, "eviction lists: %s", why);
		if (fix)
			(void)shm_evq_rebuild_locked(q);
	}
	uint32_t orphans = 0;
	for (uint32_t i = 0; i < ix->nentries; i++) {
		const struct shm_index_entry *e = &ix->ent[i];
		if (atomic_load_explicit(&e->state, memory_order_relaxed) != SHM_ENT_LIVE || q->node[i].q != SHM_EVQ_NONE)
			continue;
		orphans++;
		if (repairing(f))
			shm_evq_push_locked(q, i, SHM_EVQ_SMALL, e->footprint);
	}
	if (orphans)
		finding(f, "policy", repairing(f), "%u live entries on no eviction list (only eviction by address would find them)",
			orphans);
	f->r->lock_repairs += q->hdr->repairs;
	shm_evq_unlock(q);
}

static void check_rings(struct fsck *f)
{
	uint32_t n = f->a->shm->hv.ring_count;
	struct sc_ring_stat *st = calloc(n ? n : 1, sizeof(*st));
	if (!st)
		return;
	int rc = sc_ring_stats(f->a, st, n);
	if (rc < 0) {
		f->r->ring_problems++;
		finding(f, "rings", 0, "ring directory is corrupted (%s)", sc_strerror(rc));
	} else {
		f->r->rings = (uint64_t)rc;
		for (int i = 0; i < rc && (uint32_t)i < n; i++)
			if (st[i].corrupt) {
				f->r->ring_problems++;
				finding(f, "rings", 0, "ring %d: indices are inconsistent (the consumer skips it)", i);
			}
	}
	free(st);
}

/* The L3 location index: entries, token chains and the page free list must agree (every page
 * used by one entry or free, never both); repair rebuilds the free list and clears entries whose
 * chain is broken (what a writer's successor does after it died). The index is a cache of the L3
 * directory: what repair clears is only looked up there again. */
static void check_l3_index(struct fsck *f)
{
	struct shm_l3ix ix;
	if (shm_l3ix_view(f->a->shm, &ix)) {
		int fix = repairing(f) && shm_l3ix_format(f->a->shm) == 0;
		finding(f, "l3index", fix, "the location index's header is corrupted%s", fix ? " (formatted anew, empty)" : "");
		return;
	}
	if (shm_l3ix_lock(&ix)) {
		finding(f, "l3index", 0, "cannot lock the location index");
		return;
	}
	uint8_t *owner = ix.npages ? calloc(ix.npages, 1) : NULL;
	uint32_t total = ix.nsets * SHM_L3IX_WAYS, bad = 0, free_seen = 0;
	for (uint32_t i = 0; i < total; i++) {
		struct shm_l3ix_entry *e = &ix.ent[i];
		int broken = (atomic_load_explicit(&e->seq, memory_order_relaxed) & 1) ||
			     (e->flags & ~(SHM_L3IX_POS | SHM_L3IX_NEG | SHM_L3IX_DESC | SHM_L3IX_TOKENS)) ||
			     ((e->flags & SHM_L3IX_POS) && (e->flags & SHM_L3IX_NEG));
		if (!broken && (e->flags & SHM_L3IX_TOKENS)) {
			uint32_t pg = e->first_page, need = (e->token_count + SHM_L3IX_PAGE_TOKENS - 1) / SHM_L3IX_PAGE_TOKENS;
			for (uint32_t k = 0; k < need && !broken; k++) {
				if (!pg || pg > ix.npages || !owner || owner[pg - 1])
					broken = 1;
				else
					owner[pg - 1] = 1, pg = ix.links[pg - 1];
			}
		}
		bad += broken;
	}
	for (uint32_t pg = ix.hdr->free_head, k = 0; pg && k <= ix.npages; k++, pg = ix.links[pg - 1]) {
		if (pg > ix.npages || !owner || owner[pg - 1]) {
			bad++;
			break;
		}
		owner[pg - 1] = 2;
		free_seen++;
	}
	if (free_seen != ix.hdr->free_pages)
		bad++;
	free(owner);
	if (bad) {
		int fix = repairing(f);
		if (fix)
			shm_l3ix_repair_locked(&ix);
		finding(f, "l3index", fix, "%u inconsistencies between entries, token pages and the free list", bad);
	}
	shm_l3ix_unlock(&ix);
}

static void check_observations(struct fsck *f)
{
	struct shm_obs_hdr *h = shm_obs_table(f->a->shm);
	if (!h) {
		f->r->obs_problems++;
		finding(f, "observations", 0, "observation table header is corrupted");
		return;
	}
	if (shm_obs_lock(f->a->shm, h)) {
		finding(f, "observations", 0, "cannot lock the observation table");
		return;
	}
	struct shm_obs_entry *e = shm_obs_entries(h);
	uint32_t used = 0;
	for (uint32_t i = 0; i < h->slots; i++) {
		if (!(e[i].flags & SHM_OBS_USED))
			continue;
		used++;
		if (e[i].flags & ~SHM_OBS_FLAGS) {
			f->r->obs_problems++;
			finding(f, "observations", 0, "slot %u: unknown flags %#x", i, e[i].flags);
		}
	}
	f->r->observations = used;
	if (used != h->count) {
		f->r->obs_problems++;
		finding(f, "observations", repairing(f), "count says %u, the table holds %u", h->count, used);
		if (repairing(f))
			h->count = used;
	}
	struct shm_obs_claim *c = shm_obs_claims(h);
	for (uint32_t i = 0; i < h->claims; i++) {
		if (!c[i].owner || shm_token_alive(f->a->shm, c[i].owner))
			continue;
		finding(f, "observations", repairing(f), "fill claim %u: its claimer (pid %u in its namespace) is gone", i,
			c[i].pid);
		if (repairing(f))
			memset(&c[i], 0, sizeof(c[i]));
	}
	f->r->lock_repairs += h->repairs;
	shm_obs_unlock(f->a->shm, h);
}

int sc_arena_fsck(struct sc_arena *arena, uint32_t flags, sc_fsck_fn cb, void *ctx, struct sc_fsck_report *rep)
{
	struct sc_fsck_report local;
	if (!arena || (flags & ~SC_FSCK_MASK))
		return -EINVAL;
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	struct fsck f = { .a = arena, .flags = flags, .cb = cb, .ctx = ctx, .r = rep };
	struct shm_arena *s = arena->shm;

	int rc = shm_header_check(s->hdr, s->size);
	if (rc) {
		finding(&f, "header", 0, "arena header is invalid (%s)", sc_strerror(rc));
		return -EBADMSG;
	}
	if ((rc = l2_ready(arena))) {
		finding(&f, "index", 0, "index header is corrupted (%s)", sc_strerror(rc));
		return -EBADMSG;
	}
	check_readers(&f);
	f.ix = l2_ix(arena);
	check_mutexes(&f);
	f.reached = calloc(f.ix->nentries, 1);
	f.has_block = calloc(f.ix->nentries, 1);
	if (!f.reached || !f.has_block) {
		free(f.reached);
		free(f.has_block);
		return -ENOMEM;
	}
	rc = lock_all(f.ix);
	if (rc == -EBUSY) {
		free(f.reached);
		free(f.has_block);
		return rc;
	}
	if (rc) {
		finding(&f, "index", 0, "index and heap not checked: a shard mutex is corrupted (repair re-initialises it)");
	} else {
		check_chains(&f);
		check_entries(&f);
		check_heap(&f);
		check_segments(&f);
		check_policy(&f);
		unlock_all(f.ix);
	}
	free(f.reached);
	free(f.has_block);
	free(f.free_offs);

	struct shm_heap_stats hs;
	if (shm_heap_stats(s, &hs) == 0)
		rep->lock_repairs += hs.repairs;
	check_rings(&f);
	check_observations(&f);
	check_l3_index(&f);
	uint64_t left = rep->problems - rep->repaired;
	return left > INT32_MAX ? INT32_MAX : (int)left;
}
