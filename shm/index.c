/*
 * shm/index.c — the L2 hash index: lock-free readers, writers serialised per shard.
 *
 * Protocol
 * --------
 * Structure. Buckets hold the idx+1 of the first entry of a chain (0: empty); entries chain
 * through `next`. Bucket b and every entry in its chain belong to shard b % SHM_INDEX_SHARDS; only
 * the holder of that shard's writer lock (shm/mutex.h) writes the bucket, the chain links and the entries of
 * the shard (except `freq`, below).
 *
 * Publication (RCU style). A writer fills a BUSY entry completely (it is unreachable), sets its
 * `next`, then release-stores the entry's idx+1 into the predecessor slot (bucket or `next` of
 * the previous entry). Readers acquire-load every slot they follow (pairs with that release), so
 * they see a fully written entry. Replacing an entry is one such store (the new entry's `next` is
 * the old one's), so a reader finds either the old entry or the new one, never a mix. Unlinking
 * is the store of the victim's `next` into its predecessor slot; the victim's own `next` is left
 * intact, so a reader standing on it still reaches the rest of the chain.
 *
 * Reclamation. An unlinked entry is RETIRED, stamped with shm_epoch_advance(), and put on its
 * shard's pending list. Its heap block and the entry itself are reused only when
 * shm_epoch_min_active() > stamp (no reader that could have seen it is still inside its read-side
 * section; see shm/readers.c) and no lease record (gen << 32 | idx+1) in any reader slot names it.
 * Readers record leases before leaving the epoch (release in shm_epoch_exit), and the reclaimer
 * reads lease records after acquiring that exit through shm_epoch_min_active, so a lease taken on
 * a retired entry is always seen. The entry's gen is bumped when it is freed, so stale lease
 * records never pin its next use.
 *
 * Stale reads that are harmless: a reader may walk into an entry that was unlinked after it
 * loaded the predecessor slot; the epoch keeps it intact, and the reader either reports it (a hit
 * on the pre-removal state) or moves on. `freq` is a relaxed hint: readers store 1 only when they
 * read 0, the evictor clears it; lost updates only change eviction order.
 *
 * Validation. Readers treat the region as hostile: every idx is checked against nentries and the
 * bucket's shard, chains longer than SHM_INDEX_MAX_CHAIN are corruption, payload offsets are
 * checked against the heap region by the caller (lib/l2). Errors are -EBADMSG, never a crash.
 *
 * Crash repair. The index (bucket chains + entry states) is the source of truth. A locker that
 * gets -EOWNERDEAD (shm/mutex.h) sets the shard's repair_pending and rebuilds it (a rebuild that
 * cannot finish, e.g. for lack of memory, leaves the flag for the next locker): chains are
 * walked and cut at invalid links; reachable BUSY
 * entries become LIVE; unreachable LIVE/BUSY entries are retired; RETIRED entries form the
 * pending list; FREE/FREEING entries the free list. Then heap blocks tagged as owned by an entry
 * of the shard that does not own them, and private reservations of dead processes, are freed
 * (shm_index_sweep; sweep_mu serialises sweeps of private blocks). A lock holder that finds the
 * shard's lists or chains corrupted runs the same rebuild (shm_index_repair_locked): it only cuts
 * invalid links and retires what became unreachable, so concurrent readers stay safe.
 *
 * Lock order: one shard by blocking lock; further shards only by trylock; sweep_mu after any
 * shard lock; the heap's own mutex innermost.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "heap.h"
#include "index.h"
#include "mutex.h"
#include "readers.h"
#include "seg.h"

/* Buckets for @v entries: a power of two, at least one per shard. */
static uint32_t pow2_ceil(uint32_t v)
{
	return shm_pow2_at_least(v, SHM_INDEX_SHARDS);
}

static uint64_t buckets_bytes(uint32_t entries)
{
	return ((uint64_t)pow2_ceil(entries) * 4 + 63) & ~63ull;
}

uint64_t shm_index_bytes(uint32_t entries)
{
	return SHM_INDEX_HDR_BYTES + buckets_bytes(entries) + (uint64_t)entries * sizeof(struct shm_index_entry);
}

int shm_index_format(struct shm_arena *a)
{
	uint64_t size;
	uint8_t *r = shm_region(a, SHM_REGION_INDEX, &size);
	uint32_t n = a->hv.index_entries;
	if (n < SHM_INDEX_SHARDS || n > SHM_INDEX_MAX_ENTRIES || size < shm_index_bytes(n))
		return -EINVAL;
	struct shm_index_hdr *h = (struct shm_index_hdr *)r;
	memset(h, 0, sizeof(*h));
	h->nentries = n;
	h->nbuckets = pow2_ceil(n);
	h->nshards = SHM_INDEX_SHARDS;
	h->buckets_off = SHM_INDEX_HDR_BYTES;
	h->entries_off = SHM_INDEX_HDR_BYTES + buckets_bytes(n);
	shm_mutex_init(&h->sweep_mu);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		shm_mutex_init(&h->shards[s].mu);
	struct shm_index_entry *ent = (struct shm_index_entry *)(r + h->entries_off);
	/* free lists in ascending order: push from the top down */
	for (uint32_t i = n; i-- > 0;) {
		struct shm_index_shard *sh = &h->shards[i % SHM_INDEX_SHARDS];
		ent[i].link = sh->free_head;
		sh->free_head = i + 1;
	}
	h->magic = SHM_INDEX_MAGIC;
	return 0;
}

int shm_index_view(struct shm_arena *a, struct shm_index *ix)
{
	uint64_t size;
	uint8_t *r = shm_region(a, SHM_REGION_INDEX, &size);
	struct shm_index_hdr *h = (struct shm_index_hdr *)r;
	uint32_t n = a->hv.index_entries;
	if (size < SHM_INDEX_HDR_BYTES || h->magic != SHM_INDEX_MAGIC || h->nentries != n ||
	    h->nshards != SHM_INDEX_SHARDS || n < SHM_INDEX_SHARDS || n > SHM_INDEX_MAX_ENTRIES ||
	    h->nbuckets != pow2_ceil(n) || h->buckets_off != SHM_INDEX_HDR_BYTES ||
	    h->entries_off != SHM_INDEX_HDR_BYTES + buckets_bytes(n) || size < shm_index_bytes(n))
		return -EBADMSG;
	const struct shm_region *heap = &a->hv.regions[SHM_REGION_HEAP];
	*ix = (struct shm_index){
		.a = a,
		.hdr = h,
		.buckets = (_Atomic uint32_t *)(r + h->buckets_off),
		.ent = (struct shm_index_entry *)(r + h->entries_off),
		.nentries = n,
		.mask = h->nbuckets - 1,
		.heap_lo = heap->off,
		.heap_hi = heap->off + heap->size,
	};
	return 0;
}

void shm_index_prefetch(const struct shm_index *ix, uint64_t key_lo, int chain)
{
	uint32_t b = shm_index_bucket(ix, key_lo);
	if (!chain) {
		__builtin_prefetch(&ix->buckets[b]);
		return;
	}
	/* a hint: the head's index is checked against the table, nothing else is read */
	uint32_t cur = atomic_load_explicit(&ix->buckets[b], memory_order_relaxed);
	if (cur && cur <= ix->nentries)
		__builtin_prefetch(&ix->ent[cur - 1]);
}

/* Does @link (an entry's index + 1, as buckets and `next` words hold them) name an entry of the
 * table that belongs to shard @shard? 0 for the end of a chain and for anything a scribble could
 * leave: a link past the table, or one into another shard's entries. */
static inline int link_in_shard(const struct shm_index *ix, uint32_t link, uint32_t shard)
{
	return link && link <= ix->nentries && (link - 1) % SHM_INDEX_SHARDS == shard;
}

struct shm_index_entry *shm_index_find(const struct shm_index *ix, uint64_t key_lo, uint64_t key_hi, int *err)
{
	uint32_t b = shm_index_bucket(ix, key_lo);
	uint32_t shard = shm_index_shard_of_bucket(b);
	/* acquire: pairs with the release store that published the entry (link_locked) */
	uint32_t cur = atomic_load_explicit(&ix->buckets[b], memory_order_acquire);
	*err = 0;
	for (uint32_t hops = 0; cur; hops++) {
		if (!link_in_shard(ix, cur, shard) || hops >= SHM_INDEX_MAX_CHAIN) {
			*err = -EBADMSG;
			return NULL;
		}
		struct shm_index_entry *e = &ix->ent[cur - 1];
		if (e->key_lo == key_lo && e->key_hi == key_hi) {
			/* RETIRED: unlinked after we loaded its predecessor; still intact (epoch) and
			 * its `next` was not changed, so it is the pre-removal state: report it */
			uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
			if (st == SHM_ENT_LIVE || st == SHM_ENT_RETIRED)
				return e;
		}
		/* acquire: pairs with the release store of a successor's publication */
		cur = atomic_load_explicit(&e->next, memory_order_acquire);
	}
	return NULL;
}

/* ---- locks and repair ---- */

static void repair_shard(struct shm_index *ix, uint32_t s);

void shm_index_repair_locked(struct shm_index *ix, uint32_t shard)
{
	repair_shard(ix, shard);
}

static int after_lock(struct shm_index *ix, uint32_t s, int rc)
{
	struct shm_index_shard *sh = &ix->hdr->shards[s];
	if (rc == -EOWNERDEAD)
		sh->repair_pending = 1; /* persisted first: a repair that cannot finish is owed on */
	else if (rc)
		return rc;
	if (sh->repair_pending)
		repair_shard(ix, s); /* we hold it; dying here hands -EOWNERDEAD on */
	return 0;
}

int shm_index_lock(struct shm_index *ix, uint32_t shard)
{
	return after_lock(ix, shard, shm_mutex_lock(ix->a, &ix->hdr->shards[shard].mu));
}

int shm_index_trylock(struct shm_index *ix, uint32_t shard)
{
	return after_lock(ix, shard, shm_mutex_trylock(ix->a, &ix->hdr->shards[shard].mu));
}

void shm_index_unlock(struct shm_index *ix, uint32_t shard)
{
	shm_mutex_unlock(ix->a, &ix->hdr->shards[shard].mu);
}

/* ---- writer operations (shard lock held) ---- */

struct shm_index_entry *shm_index_pop_free_locked(struct shm_index *ix, uint32_t shard)
{
	struct shm_index_shard *sh = &ix->hdr->shards[shard];
	for (int attempt = 0; attempt < 2; attempt++) {
		uint32_t h = sh->free_head;
		if (!h)
			return NULL;
		struct shm_index_entry *e = link_in_shard(ix, h, shard) ? &ix->ent[h - 1] : NULL;
		if (!e || atomic_load_explicit(&e->state, memory_order_relaxed) != SHM_ENT_FREE) {
			/* corrupted list: rebuild the shard from the entry states, then try again */
			repair_shard(ix, shard);
			continue;
		}
		sh->free_head = e->link;
		e->link = 0;
		return e;
	}
	return NULL;
}

void shm_index_push_free_locked(struct shm_index *ix, struct shm_index_entry *e)
{
	struct shm_index_shard *sh = &ix->hdr->shards[shm_index_idx(ix, e) % SHM_INDEX_SHARDS];
	SHM_MUTEX_HELD(ix->a, &sh->mu);
	atomic_store_explicit(&e->state, SHM_ENT_FREE, memory_order_relaxed);
	e->payload_off = 0;
	e->link = sh->free_head;
	sh->free_head = shm_index_idx(ix, e) + 1;
}

/* The slot (bucket or a `next`) that holds @target's idx+1 in its chain; NULL if not linked. */
static _Atomic uint32_t *pred_slot(struct shm_index *ix, uint32_t b, uint32_t target)
{
	_Atomic uint32_t *slot = &ix->buckets[b];
	for (uint32_t hops = 0; hops <= SHM_INDEX_MAX_CHAIN; hops++) {
		uint32_t cur = atomic_load_explicit(slot, memory_order_relaxed);
		if (!cur || cur > ix->nentries)
			return NULL;
		if (cur == target)
			return slot;
		slot = &ix->ent[cur - 1].next;
	}
	return NULL;
}

void shm_index_link_locked(struct shm_index *ix, struct shm_index_entry *e, struct shm_index_entry *old)
{
	uint32_t b = shm_index_bucket(ix, e->key_lo);
	uint32_t me = shm_index_idx(ix, e) + 1;
	_Atomic uint32_t *slot = old ? pred_slot(ix, b, shm_index_idx(ix, old) + 1) : NULL;
	if (!slot) {
		old = NULL;
		slot = &ix->buckets[b];
		atomic_store_explicit(&e->next, atomic_load_explicit(slot, memory_order_relaxed), memory_order_relaxed);
	} else {
		atomic_store_explicit(&e->next, atomic_load_explicit(&old->next, memory_order_relaxed),
				      memory_order_relaxed);
	}
	/* release: pairs with the acquire load of state in lib/l2 listings that reach entries
	 * without following a chain */
	atomic_store_explicit(&e->state, SHM_ENT_LIVE, memory_order_release);
	/* release: the entry's fields (and next) are visible to readers that acquire this slot */
	atomic_store_explicit(slot, me, memory_order_release);
	shm_sched_point("l2.index.published");
	if (old) {
		shm_fault_point("l2.index.replaced"); /* old is unreachable but not yet retired */
		shm_index_retire_locked(ix, old);
	}
}

void shm_index_retire_locked(struct shm_index *ix, struct shm_index_entry *e)
{
	struct shm_index_shard *sh = &ix->hdr->shards[shm_index_idx(ix, e) % SHM_INDEX_SHARDS];
	e->retire_epoch = shm_epoch_advance(ix->a);
	shm_fault_point("l2.index.retire.stamped"); /* stamped, still LIVE: the repair stamps again */
	/* release: the stamp is in memory before the mark, also for the compiler (a process killed
	 * between the two must leave the entry LIVE, never RETIRED without its stamp) */
	atomic_store_explicit(&e->state, SHM_ENT_RETIRED, memory_order_release);
	e->link = sh->pending_head;
	sh->pending_head = shm_index_idx(ix, e) + 1;
	sh->pending_bytes += e->footprint;
	sh->pending_count++;
}

int shm_index_unlink_retire_locked(struct shm_index *ix, struct shm_index_entry *e)
{
	uint32_t b = shm_index_bucket(ix, e->key_lo);
	_Atomic uint32_t *slot = pred_slot(ix, b, shm_index_idx(ix, e) + 1);
	if (!slot)
		return -ENOENT;
	/* a successor that is no entry of this shard (a scribbled link) is cut, not carried into the
	 * predecessor: the bucket's other lookups stay misses instead of -EBADMSG */
	uint32_t next = atomic_load_explicit(&e->next, memory_order_relaxed);
	if (!link_in_shard(ix, next, shm_index_shard_of_bucket(b)))
		next = 0;
	/* release: pairs with readers' acquire of the slot; the successor was published earlier */
	atomic_store_explicit(slot, next, memory_order_release);
	shm_fault_point("l2.index.unlinked"); /* unreachable but not yet retired */
	shm_sched_point("l2.index.unlinked");
	shm_index_retire_locked(ix, e);
	return 0;
}

int shm_index_reclaim_locked(struct shm_index *ix, uint32_t shard, uint64_t min, const uint64_t *leases,
			     size_t n_leased, unsigned max, unsigned *blocked)
{
	struct shm_index_shard *sh = &ix->hdr->shards[shard];
	unsigned done = 0;
	uint64_t seen = 0; /* bounded by 4 * max + 16, which needs more than 32 bits for a large max */
	*blocked = 0;
	if (!sh->pending_head)
		return 0;
	/* the blocks the loop below may free: their headers and their successors' load together,
	 * not one miss after another (a hint: offsets outside the heap are skipped) */
	uint32_t c = sh->pending_head;
	for (unsigned k = 0; c && c <= ix->nentries && k < max; k++) {
		const struct shm_index_entry *p = &ix->ent[c - 1];
		uint64_t off = p->payload_off, fp = p->footprint;
		if (off >= ix->heap_lo + 64 && off < ix->heap_hi) {
			__builtin_prefetch(ix->a->base + off - 64, 1);
			if (fp < ix->heap_hi - off)
				__builtin_prefetch(ix->a->base + off - 64 + fp, 1);
		}
		c = p->link;
	}
	uint32_t *pp = &sh->pending_head;
	while (*pp && seen < 4ull * max + 16 && done < max) {
		uint32_t cur = *pp;
		if (!link_in_shard(ix, cur, shard) ||
		    atomic_load_explicit(&ix->ent[cur - 1].state, memory_order_relaxed) != SHM_ENT_RETIRED) {
			repair_shard(ix, shard); /* corrupted list: rebuild the shard from the entry states */
			break;
		}
		struct shm_index_entry *e = &ix->ent[cur - 1];
		seen++;
		if (e->retire_epoch >= min) {
			pp = &e->link;
			continue;
		}
		if (shm_index_leased(leases, n_leased, shm_index_rec(ix, e))) {
			(*blocked)++;
			pp = &e->link;
			continue;
		}
		*pp = e->link;
		sh->pending_bytes -= e->footprint < sh->pending_bytes ? e->footprint : sh->pending_bytes;
		if (sh->pending_count)
			sh->pending_count--;
		atomic_store_explicit(&e->state, SHM_ENT_FREEING, memory_order_relaxed);
		shm_fault_point("l2.reclaim.freeing");
		struct shm_segtab t;
		if ((e->meta & SHM_META_SEG) && shm_seg_view(ix->a, ix, &t) == 0) {
			/* the segment table decides: its references go, its blocks go or stay as holders */
			(void)shm_seg_release(&t, t.heap_lo + 64ull * e->seg_rec);
		} else if (e->payload_off) {
			/* a plain entry, or a segment flag on an arena that has no segments (a scribble):
			 * its payload is one block of its own */
			(void)shm_heap_free(ix->a, e->payload_off);
		}
		shm_fault_point("l2.reclaim.freed");
		e->gen++;
		shm_index_push_free_locked(ix, e);
		done++;
	}
	return (int)done;
}

/* ---- repair and sweep ---- */

static void repair_shard(struct shm_index *ix, uint32_t s)
{
	struct shm_index_shard *sh = &ix->hdr->shards[s];
	uint32_t n = ix->nentries;
	uint8_t *reach = calloc(n / SHM_INDEX_SHARDS + 1, 1);
	if (!reach)
		return; /* cannot repair now: repair_pending stays set, the next locker tries again */
	/* 1. walk the shard's chains, cutting at invalid links and skipping non-live entries */
	for (uint32_t b = s; b <= ix->mask; b += SHM_INDEX_SHARDS) {
		_Atomic uint32_t *slot = &ix->buckets[b];
		for (uint32_t hops = 0;; hops++) {
			uint32_t cur = atomic_load_explicit(slot, memory_order_relaxed);
			if (!cur)
				break;
			if (!link_in_shard(ix, cur, s) || hops >= SHM_INDEX_MAX_CHAIN ||
			    reach[(cur - 1) / SHM_INDEX_SHARDS]) {
				atomic_store_explicit(slot, 0, memory_order_release);
				break;
			}
			struct shm_index_entry *e = &ix->ent[cur - 1];
			uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
			if (st != SHM_ENT_LIVE && st != SHM_ENT_BUSY) {
				atomic_store_explicit(slot, atomic_load_explicit(&e->next, memory_order_relaxed),
						      memory_order_release);
				continue;
			}
			reach[(cur - 1) / SHM_INDEX_SHARDS] = 1;
			if (st == SHM_ENT_BUSY) {
				/* died after linking: the entry is complete, and its block already tagged */
				atomic_store_explicit(&e->state, SHM_ENT_LIVE, memory_order_relaxed);
			}
			slot = &e->next;
		}
	}
	/* 2. rebuild the free and pending lists from the states */
	sh->free_head = 0;
	sh->pending_head = 0;
	sh->pending_bytes = 0;
	sh->pending_count = 0;
	for (uint32_t i = n; i-- > 0;) {
		if (i % SHM_INDEX_SHARDS != s)
			continue;
		struct shm_index_entry *e = &ix->ent[i];
		uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
		if (reach[i / SHM_INDEX_SHARDS])
			continue;
		if (st == SHM_ENT_LIVE || st == SHM_ENT_BUSY) {
			/* unreachable: a writer died between unlinking and retiring, or before linking.
			 * The stamp before the state (release), as in shm_index_retire_locked: a repair
			 * that dies in between leaves the entry as it was (stamped by the next repair),
			 * never RETIRED without a stamp (0 since its admission: a later reclaim pass would
			 * free it at once while a reader that reached it before the unlink may still be
			 * inside its epoch) */
			e->retire_epoch = shm_epoch_advance(ix->a);
			shm_fault_point("l2.repair.stamped");
			atomic_store_explicit(&e->state, SHM_ENT_RETIRED, memory_order_release);
			st = SHM_ENT_RETIRED;
		}
		if (st == SHM_ENT_RETIRED) {
			e->link = sh->pending_head;
			sh->pending_head = i + 1;
			sh->pending_bytes += e->footprint;
			sh->pending_count++;
		} else {
			/* FREE, FREEING or garbage: free; the sweep frees a block it may still own */
			e->gen++;
			shm_index_push_free_locked(ix, e);
		}
	}
	free(reach);
	shm_fault_point("l2.repair.rebuilt");
	sh->repairs++;
	sh->repair_pending = 0;
	(void)shm_index_sweep(ix, (int)s);
	struct shm_segtab t;
	if (shm_seg_view(ix->a, ix, &t) == 0)
		(void)shm_seg_sweep_shard(&t, s); /* segmented entries' blocks that lost their entry */
}

struct sweep_ctx {
	struct shm_index *ix;
	int shard;
	uint64_t offs[256];
	unsigned n;
	int full;
	uint32_t seen_token[8];   /* liveness verdicts of this walk (a token's blocks are adjacent often) */
	uint8_t seen_dead[8];
	unsigned nseen;
};

/* A private reservation is an orphan when its owner token is dead (one fcntl per token and walk). */
static int priv_dead(struct sweep_ctx *c, uint64_t tag)
{
	uint32_t t = (uint32_t)tag;
	for (unsigned i = 0; i < c->nseen && i < 8; i++)
		if (c->seen_token[i] == t)
			return c->seen_dead[i];
	int dead = !shm_token_alive(c->ix->a, t);
	c->seen_token[c->nseen % 8] = t;
	c->seen_dead[c->nseen % 8] = (uint8_t)dead;
	c->nseen++;
	return dead;
}

static int sweep_cb(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *vctx)
{
	struct sweep_ctx *c = vctx;
	(void)bytes;
	if (!allocated)
		return 0;
	int orphan = 0;
	if (SHM_TAG_TYPE(tag) == SHM_TAG_PRIV) {
		orphan = priv_dead(c, tag);
	} else if (SHM_TAG_TYPE(tag) == SHM_TAG_ENTRY && c->shard >= 0) {
		uint32_t idx = (uint32_t)(tag >> 32) & 0xffffff, gen = (uint32_t)tag;
		if (link_in_shard(c->ix, idx + 1, (uint32_t)c->shard)) {
			struct shm_index_entry *e = &c->ix->ent[idx];
			uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
			orphan = e->gen != gen || e->payload_off != off ||
				 (st != SHM_ENT_LIVE && st != SHM_ENT_RETIRED && st != SHM_ENT_BUSY);
		} else if (idx >= c->ix->nentries) {
			orphan = 1;
		}
	}
	if (!orphan)
		return 0;
	if (c->n == sizeof(c->offs) / sizeof(c->offs[0])) {
		c->full = 1;
		return 1;
	}
	c->offs[c->n++] = off;
	return 0;
}

int shm_index_sweep(struct shm_index *ix, int shard)
{
	int rc = shm_mutex_lock(ix->a, &ix->hdr->sweep_mu);
	if (rc && rc != -EOWNERDEAD) /* the sweep keeps no state of its own: nothing to repair */
		return rc;
	struct sweep_ctx *c = malloc(sizeof(*c));
	int freed = 0;
	if (!c) {
		shm_mutex_unlock(ix->a, &ix->hdr->sweep_mu);
		return -ENOMEM;
	}
	for (int round = 0; round < 64; round++) {
		c->ix = ix;
		c->shard = shard;
		c->n = 0;
		c->full = 0;
		c->nseen = 0;
		int w = shm_heap_walk(ix->a, sweep_cb, c);
		for (unsigned i = 0; i < c->n; i++)
			if (shm_heap_free(ix->a, c->offs[i]) == 0)
				freed++;
		if (w < 0 && !c->full) {
			freed = freed ? freed : w;
			break;
		}
		if (!c->full)
			break;
	}
	free(c);
	shm_mutex_unlock(ix->a, &ix->hdr->sweep_mu);
	return freed;
}
