/*
 * lib/fsck.c — sc_arena_fsck: check an arena, and repair it until it is clean or declared dead.
 *
 * What it checks is what any reader or writer validates, so that fsck never calls an arena clean
 * while an operation on it fails: the shared header against the copy validated at attach; reader
 * slots of dead processes; the index header and every lock word; then, with every index shard
 * locked (so no entry changes under us; lock-free readers keep running), the bucket chains, one
 * walk of the heap that classifies each allocated block by its tag, and every entry (its state,
 * its layout, its block, with SC_FSCK_DEEP its digest); the commit ring directory, each ring's
 * owner word and indices and every record between them (what the consumer would read); the
 * eviction lists (shm/evq.c: their header, their links against their nodes, every live entry on
 * one of them; repair formats a header that does not match the arena's geometry, rebuilds the
 * lists and puts orphans on the small FIFO, under the shard locks); the
 * observation table and its fill claims; repair counters no process could have reached.
 *
 * Heap tags: ENTRY(idx, gen) is owned when entry idx has that generation, points at the block and
 * is LIVE, RETIRED or being freed; PRIV(token) is a private reservation, an orphan once its
 * holder's token is dead; anything else is leaked.
 *
 * Repair (SC_FSCK_REPAIR) goes through the modules' own repair paths where they exist (the shard
 * rebuild, unlink + retire, the orphan sweep, the readers reaper, the heap rebuild), rewrites what
 * is derived from the header copy validated at attach (the shared header's identity, the index
 * header's geometry, the ring directory), and drops soft state that is malformed (an entry that
 * fails its checks, the undelivered records of a ring whose records are malformed, the promotion
 * observations). An entry whose heap block is missing or belongs to someone else is dropped
 * without freeing that block. Then the arena is checked again, and repaired again while problems
 * remain, at most FSCK_ROUNDS times. What is still wrong then either waits on a live process
 * (another ring consumer, a running producer whose ring index is bad: reported, not damage) or
 * cannot be repaired (a heap block chain the rebuild cannot walk, ...): the arena is declared
 * unrepairable.
 * shm_header.damaged is release-stored after the reason and the time; every later open fails
 * with -ENOTRECOVERABLE and writers attached now refuse with it (lib/arena.c, lib/l2/place.c).
 *
 * Shards are taken in ascending order, waiting for each (lock_all: a dead holder's shard is taken
 * over). Re-initialising a corrupted lock word assumes no writer is inside it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "events.h"
#include "l2/l2.h"
#include "../shm/heap.h"
#include "../shm/mutex.h"
#include "../shm/obs.h"
#include "../shm/ring.h"

#define FSCK_ROUNDS 4
/* A repair counter above this is not believable: each count is a process killed inside a writer. */
#define COUNTER_MAX (1ull << 20)
#include "../shm/l3ix.h"

struct fsck {
	struct sc_arena *a;
	uint32_t flags;
	sc_fsck_fn cb;
	void *ctx;
	struct sc_fsck_report *r;
	struct shm_index ixv;  /* this pass's validated view of the index region */
	struct shm_index *ix;  /* &ixv once valid, else NULL */
	struct shm_evq qv;     /* this pass's validated view of the eviction lists */
	struct shm_evq *q;     /* &qv once valid, else NULL */
	uint8_t *reached;      /* per entry: found in its bucket chain */
	uint8_t *has_block;    /* per entry: its block was seen in the heap walk */
	uint64_t *free_offs;   /* blocks the repair frees after the walk */
	size_t nfree, cap_free;
	uint32_t shard_repair; /* bit s: shard s gets the shard rebuild after the entry pass */
	int need_sweep;        /* repair: run the index's sweep after the walk */
	uint32_t seg_sweep;    /* shards whose segment records lost their entry (bit per shard) */
	int heap_ok;           /* the heap walk completed: has_block is complete */
	uint64_t deferred;     /* problems held by live processes: not damage */
	uint32_t damage;       /* SHM_DAMAGE_* of a repair that cannot work */
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

/* ---- the header ---- */

/* Writers and readers use the copy validated at attach; only new opens read the shared header.
 * A shared header that differs from that copy is rewritten from it. */
static void check_header(struct fsck *f)
{
	struct shm_arena *s = f->a->shm;
	/* the identity: everything up to and with the checksum, but the initialised word (published
	 * after the creator took its copy) */
	const size_t a = offsetof(struct shm_header, initialised), b = a + sizeof(uint32_t),
		     n = offsetof(struct shm_header, header_check) + sizeof(uint64_t);
	const uint8_t *sh = (const uint8_t *)s->hdr, *hv = (const uint8_t *)&s->hv;
	if (shm_header_check(s->hdr, s->size) == 0 && !memcmp(sh, hv, a) && !memcmp(sh + b, hv + b, n - b))
		return;
	finding(f, "header", repairing(f), "the shared header differs from the one validated at attach (new opens "
		"would refuse the arena)");
	if (repairing(f)) {
		memcpy((uint8_t *)s->hdr, hv, a);
		memcpy((uint8_t *)s->hdr + b, hv + b, n - b);
	}
}

/* ---- reader slots ---- */

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

/* ---- the index header and the lock words ---- */

/* The index header's geometry follows from the arena's parameters (as shm_index_format writes it):
 * a corrupted one is rewritten, and every shard's lists are then rebuilt from the entry states. */
static void check_index_header(struct fsck *f)
{
	struct shm_arena *s = f->a->shm;
	if (shm_index_view(s, &f->ixv) == 0) {
		f->ix = &f->ixv;
		return;
	}
	uint64_t size;
	struct shm_index_hdr *h = shm_region(s, SHM_REGION_INDEX, &size);
	uint32_t n = s->hv.index_entries, nb = SHM_INDEX_SHARDS;
	while (nb < n)
		nb <<= 1;
	finding(f, "index", repairing(f), "the index header is corrupted (its geometry does not match the arena's)");
	if (!repairing(f))
		return;
	h->nentries = n;
	h->nbuckets = nb;
	h->nshards = SHM_INDEX_SHARDS;
	h->buckets_off = SHM_INDEX_HDR_BYTES;
	h->entries_off = shm_index_bytes(n) - (uint64_t)n * sizeof(struct shm_index_entry);
	h->magic = SHM_INDEX_MAGIC;
	f->shard_repair = (1u << SHM_INDEX_SHARDS) - 1;
	if (shm_index_view(s, &f->ixv) == 0) {
		f->ix = &f->ixv;
	} else {
		f->r->repaired--;
		f->damage = SHM_DAMAGE_INDEX;
	}
}

/* The eviction lists' header (shm/evq.c): its geometry is derived from the arena's; a header that
 * does not match is formatted again (empty lists: check_policy then finds every live entry on no
 * list and queues it, and the nodes' stale links are rebuilt). */
static void check_policy_header(struct fsck *f)
{
	struct shm_arena *s = f->a->shm;
	if (shm_evq_view(s, &f->qv) == 0) {
		f->q = &f->qv;
		return;
	}
	finding(f, "policy", repairing(f), "the eviction lists' header is corrupted (its geometry does not match the arena's)");
	if (!repairing(f))
		return;
	if (shm_evq_format(s) == 0 && shm_evq_view(s, &f->qv) == 0) {
		f->q = &f->qv;
	} else {
		f->r->repaired--;
		f->damage = SHM_DAMAGE_INDEX;
	}
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
	if (f->ix) {
		for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
			snprintf(what, sizeof(what), "index shard %u", s);
			check_mutex(f, &f->ix->hdr->shards[s].mu, what);
		}
		check_mutex(f, &f->ix->hdr->sweep_mu, "index sweep");
	}
	if (f->q) {
		check_mutex(f, &f->q->hdr->mu, "eviction lists");
		check_mutex(f, &f->q->hdr->search_mu, "room search");
	}
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

/* ---- chains, heap, entries (every shard locked) ---- */

static void check_chains(struct fsck *f)
{
	struct shm_index *ix = f->ix;
	uint32_t nb = ix->mask + 1;
	for (uint32_t b = 0; b < nb; b++) {
		_Atomic uint32_t *slot = &ix->buckets[b];
		uint32_t cur = atomic_load_explicit(slot, memory_order_acquire), len = 0;
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
			if (!bad && shm_index_bucket(ix, ix->ent[cur - 1].key_lo) != b) {
				/* its key was scribbled: no lookup can find it, and the shard rebuild keeps any
				 * live entry its chain reaches. Unlink it here, where it was found, and retire
				 * it (its block is its own: reclamation frees it) */
				struct shm_index_entry *e = &ix->ent[cur - 1];
				uint32_t next = atomic_load_explicit(&e->next, memory_order_relaxed);
				finding(f, "index", repairing(f), "bucket %u: chain holds entry %u of another bucket (its key "
					"is corrupted; dropped)", b, cur - 1);
				if (!repairing(f))
					break;
				/* release: the successor was published before; readers on @e still reach it */
				atomic_store_explicit(slot, next, memory_order_release);
				shm_index_retire_locked(ix, e);
				f->r->dropped++;
				cur = next;
				continue;
			}
			if (bad) {
				finding(f, "index", repairing(f), "bucket %u: chain holds %s", b, bad);
				if (repairing(f))
					shm_index_repair_locked(ix, shard); /* cuts it now: the entry pass needs whole chains */
				break;
			}
			f->reached[cur - 1] = 1;
			slot = &ix->ent[cur - 1].next;
			cur = atomic_load_explicit(slot, memory_order_acquire);
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
			if (e->gen == gen && e->payload_off == off && st != SHM_ENT_FREE && !f->has_block[idx]) {
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

static void walk_heap(struct fsck *f)
{
	int rc = shm_heap_walk(f->a->shm, walk_cb, f);
	if (!rc) {
		f->heap_ok = 1;
		return;
	}
	/* the walk stopped: what it classified is partial, so no entry is judged by its block */
	f->nfree = 0;
	f->need_sweep = 0;
	finding(f, "heap", 0, "the heap's block chain or free lists are corrupted");
	if (!repairing(f))
		return;
	if (shm_heap_repair(f->a->shm) == 0)
		f->r->repaired++; /* derived state rebuilt; the next round walks it again */
	else
		f->damage = SHM_DAMAGE_HEAP; /* the chain itself: nothing to rebuild from */
}

/* Drop entry @e (shard locked): unlinked and retired, its memory freed when no reader can see it.
 * When its block is not known to be its own, it forgets the block first: never free another's. */
static void drop_entry(struct fsck *f, struct shm_index_entry *e, uint32_t i)
{
	if (!f->heap_ok || !f->has_block[i])
		e->payload_off = 0;
	uint32_t st = atomic_load_explicit(&e->state, memory_order_relaxed);
	if (st == SHM_ENT_LIVE && shm_index_unlink_retire_locked(f->ix, e) == 0) {
		events_note_locked(f->a, f->ix, SC_EVENT_L2_REMOVED, e->stage_id, (struct sc_key){ e->key_lo, e->key_hi },
				   (struct sc_digest){ e->digest_lo, e->digest_hi }, (uint32_t)e->token_count);
		f->r->dropped++;
		f->pending_seen[i % SHM_INDEX_SHARDS] += e->footprint;
	} else if (st == SHM_ENT_LIVE) {
		f->shard_repair |= 1u << (i % SHM_INDEX_SHARDS); /* unreachable: the rebuild retires it */
		f->r->dropped++;
	}
}

static void check_entries(struct fsck *f)
{
	struct shm_index *ix = f->ix;
	for (uint32_t i = 0; i < ix->nentries; i++) {
		struct shm_index_entry *e = &ix->ent[i];
		uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire), sh = i % SHM_INDEX_SHARDS;
		if (st == SHM_ENT_FREE)
			continue;
		if (st == SHM_ENT_RETIRED) {
			f->pending_seen[sh] += e->footprint;
			if (f->heap_ok && !f->has_block[i] && e->payload_off) {
				finding(f, "index", repairing(f), "entry %u (retired): its heap block is missing or belongs to "
					"another owner", i);
				if (repairing(f))
					e->payload_off = 0; /* reclamation frees nothing for it */
			}
			continue;
		}
		if (st == SHM_ENT_BUSY || st == SHM_ENT_FREEING) {
			/* we hold every shard lock: only a dead writer leaves these, and the lock's repair
			 * should have cleaned them up */
			finding(f, "index", repairing(f), "entry %u: left %s by a writer", i, st == SHM_ENT_BUSY ? "busy" : "freeing");
			f->shard_repair |= repairing(f) ? 1u << sh : 0;
			continue;
		}
		if (st != SHM_ENT_LIVE) {
			finding(f, "index", repairing(f), "entry %u: unknown state %u", i, st);
			f->shard_repair |= repairing(f) ? 1u << sh : 0; /* the rebuild frees it */
			continue;
		}
		uint64_t wire;
		struct sc_kv_desc desc;
		int has_desc;
		if (!f->reached[i]) {
			finding(f, "index", repairing(f), "entry %u: live but not reachable from its bucket", i);
			f->shard_repair |= repairing(f) ? 1u << sh : 0;
			continue;
		}
		if (l2_entry_check(ix, e, &wire, &desc, &has_desc)) {
			finding(f, "index", repairing(f), "entry %u: inconsistent sizes, kind or descriptor (dropped)", i);
			if (repairing(f))
				drop_entry(f, e, i);
			continue;
		}
		if (f->heap_ok && !f->has_block[i]) {
			finding(f, "index", repairing(f), "entry %u: its heap block is missing or belongs to another owner "
				"(dropped)", i);
			if (repairing(f))
				drop_entry(f, e, i);
			continue;
		}
		f->r->entries++;
		if (f->flags & SC_FSCK_DEEP) {
			struct sc_digest d = { 0, 0 };
			if (e->meta & SHM_META_SEG) {
				/* scattered or not, the record's pieces make the wire (the segment table's view
				 * comes with the handle's L2 view) */
				void *buf = malloc(wire ? wire : 1);
				if (!buf)
					continue; /* not verified (digests_checked says so): no memory is not a bad payload */
				if (l2_ready(f->a) == 0 &&
				    l2_seg_copy(f->a, ix->heap_lo + 64ull * e->seg_rec, buf, wire) == (int64_t)wire)
					d = sc_digest(buf, wire);
				free(buf);
			} else {
				d = sc_digest(ix->a->base + e->payload_off, wire);
			}
			f->r->digests_checked++;
			if (d.lo != e->digest_lo || d.hi != e->digest_hi) {
				f->r->digest_failures++;
				char hex[SC_DIGEST_HEX_LEN + 1];
				finding(f, "index", repairing(f), "entry %u: payload does not match digest %s (dropped)", i,
					sc_digest_format((struct sc_digest){ e->digest_lo, e->digest_hi }, hex));
				if (repairing(f))
					drop_entry(f, e, i);
			}
		}
	}
}

/* Every FREE entry of a shard is on its free list and every RETIRED one on its pending list (a
 * lost list head hides entries from every writer: admissions then fail with -ENOSPC while the
 * shard is empty). Lists are followed at most as far as the shard has entries. */
static void check_lists(struct fsck *f)
{
	struct shm_index *ix = f->ix;
	uint32_t per = (ix->nentries + SHM_INDEX_SHARDS - 1) / SHM_INDEX_SHARDS;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		if (f->shard_repair & (1u << s))
			continue;
		uint32_t want[2] = { 0, 0 }, got[2] = { 0, 0 };
		for (uint32_t i = s; i < ix->nentries; i += SHM_INDEX_SHARDS) {
			uint32_t st = atomic_load_explicit(&ix->ent[i].state, memory_order_relaxed);
			want[0] += st == SHM_ENT_FREE;
			want[1] += st == SHM_ENT_RETIRED;
		}
		const struct shm_index_shard *sh = &ix->hdr->shards[s];
		uint32_t heads[2] = { sh->free_head, sh->pending_head }, states[2] = { SHM_ENT_FREE, SHM_ENT_RETIRED };
		for (int l = 0; l < 2; l++) {
			for (uint32_t cur = heads[l]; cur && got[l] <= per; got[l]++) {
				if (cur > ix->nentries || (cur - 1) % SHM_INDEX_SHARDS != s ||
				    atomic_load_explicit(&ix->ent[cur - 1].state, memory_order_relaxed) != states[l]) {
					got[l] = per + 1; /* a link out of the list: broken */
					break;
				}
				cur = ix->ent[cur - 1].link;
			}
		}
		if (got[0] == want[0] && got[1] == want[1])
			continue;
		finding(f, "index", repairing(f), "shard %u: its free and pending lists do not hold its %u free and %u "
			"retired entries (rebuilt from the entry states)", s, want[0], want[1]);
		f->shard_repair |= repairing(f) ? 1u << s : 0;
	}
}

/* After the entry pass: frees, sweeps and rebuilds; then the shards' own accounting. */
static void finish_index(struct fsck *f)
{
	struct shm_index *ix = f->ix;
	for (size_t i = 0; i < f->nfree; i++)
		(void)shm_heap_free(f->a->shm, f->free_offs[i]);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		if (f->shard_repair & (1u << s))
			shm_index_repair_locked(ix, s); /* rebuilds lists and pending bytes, then sweeps */
	/* orphaned reservations and mis-tagged blocks go through the index's sweep (sweep_mu), so a
	 * concurrent sweep of another process can never free the same block twice; we hold every
	 * shard, which lets it free entry-tagged blocks of each */
	if (f->need_sweep && repairing(f))
		for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
			(void)shm_index_sweep(ix, (int)s);
	struct shm_segtab t;
	if (f->seg_sweep && repairing(f) && shm_seg_view(f->a->shm, ix, &t) == 0)
		for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
			if (f->seg_sweep & (1u << s))
				(void)shm_seg_sweep_shard(&t, s);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		struct shm_index_shard *sh = &ix->hdr->shards[s];
		if (!(f->shard_repair & (1u << s)) && sh->pending_bytes != f->pending_seen[s]) {
			finding(f, "index", repairing(f), "shard %u: pending bytes %llu, retired entries hold %llu", s,
				(unsigned long long)sh->pending_bytes, (unsigned long long)f->pending_seen[s]);
			if (repairing(f))
				sh->pending_bytes = f->pending_seen[s];
		}
		if (sh->repairs > COUNTER_MAX) {
			finding(f, "index", repairing(f), "shard %u: lock repair counter %u is not believable", s, sh->repairs);
			if (repairing(f))
				sh->repairs = 0;
		} else {
			f->r->lock_repairs += sh->repairs;
		}
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
	struct shm_evq *q = f->q;
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
	if (q->hdr->repairs > COUNTER_MAX) {
		finding(f, "policy", repairing(f), "eviction lists: repair counter %llu is not believable",
			(unsigned long long)q->hdr->repairs);
		if (repairing(f))
			q->hdr->repairs = 0;
	} else {
		f->r->lock_repairs += q->hdr->repairs;
	}
	shm_evq_unlock(q);
}

static void check_index(struct fsck *f)
{
	uint32_t n = f->ix->nentries;
	f->reached = calloc(n, 1);
	f->has_block = calloc(n, 1);
	if (!f->reached || !f->has_block) {
		f->deferred++;
		finding(f, "index", 0, "not checked: out of memory");
		goto out;
	}
	int rc = lock_all(f->ix);
	if (rc) {
		/* check_mutexes reported (and with repair re-initialised) a corrupted one */
		finding(f, "index", 0, "index and heap not checked this round: %s",
			rc == -EBADMSG ? "a shard lock is corrupted" : sc_strerror(rc));
		goto out;
	}
	if (f->shard_repair) /* the index header was rewritten: rebuild every shard's lists first */
		for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
			shm_index_repair_locked(f->ix, s);
	f->shard_repair = 0;
	check_chains(f);
	walk_heap(f);
	check_entries(f);
	check_lists(f);
	check_segments(f);
	if (f->q)
		check_policy(f);
	finish_index(f);
	unlock_all(f->ix);
out:
	free(f->reached);
	free(f->has_block);
	free(f->free_offs);
	f->reached = f->has_block = NULL;
	f->free_offs = NULL;
	f->nfree = f->cap_free = 0;
}

/* ---- commit rings ---- */

static struct shm_ring_ctl *ring_ctl_of(struct shm_ring_dir *d, uint32_t i)
{
	return (struct shm_ring_ctl *)((uint8_t *)d + SHM_RING_DIR_BYTES + (uint64_t)i * SHM_RING_CTL_BYTES);
}

/* Walk every record between head and tail as the consumer would (shm_ring_cursor_next), without
 * consuming. 0, or the position of the first malformed record + 1. A record the consumer has
 * passed in the meantime may be overwritten by its producer: a fault there is re-checked against
 * the current head and ignored when it is behind it. */
static uint64_t ring_bad_record(struct shm_ring_dir *d, uint32_t i, uint32_t count, uint64_t size, uint64_t head,
				uint64_t tail)
{
	struct shm_ring_ctl *ctl = ring_ctl_of(d, i);
	struct shm_ring_cursor cur = {
		.ctl = ctl,
		.data = (uint8_t *)d + shm_ring_data_off(count) + (uint64_t)i * size,
		.size = size,
		.mask = size - 1,
		.start = head,
		.head = head,
		.tail = tail,
		.pf = head,
		.ring = i,
	};
	struct shm_ring_view v;
	int r;
	while ((r = shm_ring_cursor_next(&cur, &v)) > 0)
		;
	if (r == 0)
		return 0;
	uint64_t now = atomic_load_explicit(&ctl->head, memory_order_acquire);
	return cur.head >= now ? cur.head + 1 : 0;
}

/* Drop ring @i's undelivered records (the consumer lock is ours) and, with a garbage owner word,
 * free the ring. Returns 1 when repaired, 0 when it must wait for its live producer. */
static int ring_reset(struct shm_arena *s, struct shm_ring_ctl *ctl)
{
	uint64_t w = atomic_load_explicit(&ctl->owner, memory_order_acquire);
	uint32_t st = shm_ring_owner_state(w);
	uint64_t tail = atomic_load_explicit(&ctl->tail, memory_order_acquire);
	if (tail & (SHM_RING_ALIGN - 1)) {
		/* only the producer writes tail: wait for a live one to publish a good one */
		if (st == SHM_RING_LIVE && shm_token_alive(s, shm_ring_owner_token(w)))
			return 0;
		tail = (tail + SHM_RING_ALIGN - 1) & ~(uint64_t)(SHM_RING_ALIGN - 1);
		atomic_store_explicit(&ctl->tail, tail, memory_order_release);
	}
	atomic_store_explicit(&ctl->consumed, atomic_load_explicit(&ctl->records, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&ctl->head, tail, memory_order_release); /* as the consumer's R4 */
	if (st > SHM_RING_CLOSED) /* a garbage owner word: the ring belongs to nobody */
		atomic_compare_exchange_strong_explicit(&ctl->owner, &w, shm_ring_owner(shm_ring_owner_gen(w) + 1, SHM_RING_FREE, 0),
							memory_order_release, memory_order_relaxed);
	return 1;
}


static void check_rings(struct fsck *f)
{
	struct shm_arena *s = f->a->shm;
	struct shm_ring_dir *d;
	uint32_t count = s->hv.ring_count;
	uint64_t size = s->hv.ring_bytes;
	if (shm_ring_dir_check(s, &d)) {
		f->r->ring_problems++;
		finding(f, "rings", repairing(f), "the ring directory is corrupted (tail and stats refuse every ring)");
		if (!repairing(f))
			return;
		uint64_t rsize;
		d = shm_region(s, SHM_REGION_RINGS, &rsize);
		d->ring_count = count;
		d->ring_bytes = (uint32_t)size;
		d->ctl_off = SHM_RING_DIR_BYTES;
		d->data_off = shm_ring_data_off(count);
		d->magic = SHM_RING_MAGIC;
		if (shm_ring_dir_check(s, &d)) {
			f->r->repaired--;
			f->damage = SHM_DAMAGE_RINGS;
			return;
		}
	}
	f->r->rings = count;
	struct shm_ring_cons cons = { 0 };
	int consumer = 0; /* 1: we took the consumer lock, 2: this handle consumes (it keeps the lock),
			   * -1: another live consumer holds it */
	for (uint32_t i = 0; i < count; i++) {
		struct shm_ring_stat st;
		if (shm_ring_stat(s, i, &st))
			continue;
		uint64_t bad = 0;
		const char *why = NULL;
		char buf[96];
		if (st.state > SHM_RING_CLOSED)
			why = "its owner word is garbage";
		else if (st.tail - st.head > size || ((st.tail | st.head) & (SHM_RING_ALIGN - 1)))
			why = "its indices are impossible";
		else if (st.head != st.tail && (bad = ring_bad_record(d, i, count, size, st.head, st.tail))) {
			snprintf(buf, sizeof(buf), "a malformed record at position %llu (the consumer stops there)",
				 (unsigned long long)(bad - 1));
			why = buf;
		}
		if (!why)
			continue;
		f->r->ring_problems++;
		if (!repairing(f)) {
			finding(f, "rings", 0, "ring %u: %s", i, why);
			continue;
		}
		if (!consumer) {
			/* this handle's own id: it was consuming before fsck began, and stays the consumer */
			int ours = atomic_load_explicit(&d->consumer_id, memory_order_acquire) == s->token;
			consumer = shm_ring_consumer_acquire(s, &cons) == 0 ? 1 + ours : -1;
		}
		int fixed = consumer > 0 && ring_reset(s, ring_ctl_of(d, i));
		if (!fixed)
			f->deferred++;
		finding(f, "rings", fixed, "ring %u: %s%s", i, why,
			fixed ? "; its undelivered records were dropped"
			      : consumer < 0 ? "; not repaired: another process is consuming the rings"
					     : "; not repaired: its producer is running");
	}
	if (consumer == 1)
		shm_ring_consumer_release(s, &cons);
}

/* ---- observations ---- */

/* The observation table is soft state (promotion decisions, fill claims): a malformed one is
 * formatted again, which forgets the observations; a fill in flight just claims again. */
static void reformat_obs(struct fsck *f)
{
	uint64_t size;
	uint8_t *r = shm_region(f->a->shm, SHM_REGION_OBS, &size);
	memset(r, 0, size);
	if (shm_obs_format(f->a->shm) || !shm_obs_table(f->a->shm)) {
		f->r->repaired--;
		f->damage = SHM_DAMAGE_OBS;
	}
}

/* The L3 location index: entries, token chains and the page free list must agree (every page
 * used by one entry or free, never both); repair rebuilds the free list and clears entries whose
 * chain is broken (what a writer's successor does after it died). The index is a cache of the L3
 * directory: what repair clears is only looked up there again. */
static void check_l3_index(struct fsck *f)
{
	struct shm_l3ix ix;
	if (!f->a->shm->hv.l3ix_entries)
		return; /* created without one */
	if (shm_l3ix_view(f->a->shm, &ix)) {
		int fix = repairing(f) && shm_l3ix_reformat(f->a->shm) == 0;
		finding(f, "l3index", fix, "the location index's header is corrupted%s", fix ? " (formatted anew, empty)" : "");
		if (repairing(f) && !fix)
			f->damage = SHM_DAMAGE_L3IX;
		return;
	}
	int rc = shm_l3ix_lock(&ix);
	if (rc) {
		finding(f, "l3index", 0, "cannot lock the location index (%s)", sc_strerror(rc));
		return;
	}
	uint8_t *owner = ix.npages ? calloc(ix.npages, 1) : NULL;
	if (ix.npages && !owner) {
		/* no memory to tell used pages from free ones: nothing is judged (never an entry cleared) */
		shm_l3ix_unlock(&ix);
		f->deferred++;
		finding(f, "l3index", 0, "not checked: out of memory");
		return;
	}
	uint32_t total = ix.nsets * SHM_L3IX_WAYS, bad = 0, free_seen = 0;
	for (uint32_t i = 0; i < total; i++) {
		struct shm_l3ix_entry *e = &ix.ent[i];
		int broken = (atomic_load_explicit(&e->seq, memory_order_relaxed) & 1) ||
			     (e->flags & ~(SHM_L3IX_POS | SHM_L3IX_NEG | SHM_L3IX_DESC | SHM_L3IX_TOKENS)) ||
			     ((e->flags & SHM_L3IX_POS) && (e->flags & SHM_L3IX_NEG));
		if (!broken && (e->flags & SHM_L3IX_TOKENS)) {
			uint32_t pg = e->first_page, need = (e->token_count + SHM_L3IX_PAGE_TOKENS - 1) / SHM_L3IX_PAGE_TOKENS;
			for (uint32_t k = 0; k < need && !broken; k++) {
				if (!pg || pg > ix.npages || owner[pg - 1])
					broken = 1;
				else
					owner[pg - 1] = 1, pg = ix.links[pg - 1];
			}
		}
		bad += broken;
	}
	for (uint32_t pg = ix.hdr->free_head, k = 0; pg && k <= ix.npages; k++, pg = ix.links[pg - 1]) {
		if (pg > ix.npages || owner[pg - 1]) {
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

/* The event ring: its header against the plan, positions and stamps. A repair resets it; the
 * listener learns of the reset (SC_EVENT_LOST) and reads the truth again. */
static void check_events(struct fsck *f)
{
	int rc = shm_evring_check(f->a->shm, repairing(f));
	if (rc > 0)
		finding(f, "events", repairing(f), "the event ring's header, positions or slots are inconsistent%s",
			repairing(f) ? " (reset)" : "");
	else if (rc < 0)
		finding(f, "events", 0, "the event region is smaller than the arena's plan");
}

static void check_observations(struct fsck *f)
{
	struct shm_obs_hdr *h = shm_obs_table(f->a->shm);
	if (!h) {
		f->r->obs_problems++;
		finding(f, "observations", repairing(f), "the observation table header is corrupted (formatted again: "
			"observations forgotten)");
		if (repairing(f))
			reformat_obs(f);
		return;
	}
	int rc = shm_obs_lock(f->a->shm, h);
	if (rc) {
		f->r->obs_problems++;
		finding(f, "observations", 0, "cannot lock the observation table (%s)", rc == -EBADMSG ? "corrupted lock"
											: sc_strerror(rc));
		return;
	}
	struct shm_obs_entry *e = shm_obs_entries(h);
	uint32_t used = 0, bad = 0;
	for (uint32_t i = 0; i < h->slots; i++) {
		if (!(e[i].flags & SHM_OBS_USED))
			continue;
		used++;
		if (e[i].flags & ~SHM_OBS_FLAGS) {
			f->r->obs_problems++;
			if (!bad++)
				finding(f, "observations", repairing(f), "slot %u: unknown flags %#x%s", i, e[i].flags,
					repairing(f) ? " (table formatted again: observations forgotten)" : "");
		}
	}
	if (bad && repairing(f)) {
		shm_obs_unlock(f->a->shm, h);
		reformat_obs(f);
		return;
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
	if (h->repairs > COUNTER_MAX) {
		finding(f, "observations", repairing(f), "lock repair counter %llu is not believable",
			(unsigned long long)h->repairs);
		if (repairing(f))
			h->repairs = 0;
	} else {
		f->r->lock_repairs += h->repairs;
	}
	shm_obs_unlock(f->a->shm, h);
}

/* ---- one pass, and the rounds ---- */

struct pass {
	uint64_t deferred;     /* problems a live process holds */
	uint32_t damage;       /* a repair that cannot work */
};

/* One pass over everything (the shard locks wait; a dead holder's are taken over). */
static void one_pass(struct sc_arena *arena, uint32_t flags, sc_fsck_fn cb, void *ctx, struct sc_fsck_report *rep,
		    struct pass *p)
{
	memset(rep, 0, sizeof(*rep));
	struct fsck f = { .a = arena, .flags = flags, .cb = cb, .ctx = ctx, .r = rep };
	check_header(&f);
	check_readers(&f);
	check_index_header(&f);
	check_policy_header(&f);
	check_mutexes(&f);
	if (f.ix)
		check_index(&f);
	struct shm_heap_stats hs;
	if (shm_heap_stats(arena->shm, &hs) == 0 && hs.repairs <= COUNTER_MAX)
		rep->lock_repairs += hs.repairs; /* an unbelievable heap counter is left out of the sum */
	check_rings(&f);
	check_observations(&f);
	check_l3_index(&f);
	check_events(&f);
	p->deferred = f.deferred;
	p->damage = f.damage;
	/* between passes fsck holds no lock: other processes admit and reclaim (tests run that here) */
	shm_sched_point("fsck.pass.done");
}

static void declare_damaged(struct sc_arena *arena, uint32_t reason)
{
	struct shm_header *h = arena->shm->hdr;
	h->damage_reason = reason;
	h->damaged_ns = shm_realtime_ns();
	/* release: the reason and time are visible to whoever acquires the mark (open, writers) */
	atomic_store_explicit(&h->damaged, SHM_DAMAGED, memory_order_release);
}

static const char *damage_name(uint32_t reason)
{
	switch (reason) {
	case SHM_DAMAGE_HEAP: return "the heap's block chain cannot be rebuilt";
	case SHM_DAMAGE_INDEX: return "the index cannot be rebuilt";
	case SHM_DAMAGE_RINGS: return "the ring directory cannot be rewritten";
	case SHM_DAMAGE_OBS: return "the observation table cannot be formatted";
	case SHM_DAMAGE_L3IX: return "the L3 location index cannot be formatted";
	default: return "problems remain after every repair";
	}
}

int sc_arena_fsck(struct sc_arena *arena, uint32_t flags, sc_fsck_fn cb, void *ctx, struct sc_fsck_report *rep)
{
	struct sc_fsck_report local, v;
	if (!arena || (flags & ~SC_FSCK_MASK))
		return -EINVAL;
	if (arena->shm->forked)
		return -ECHILD; /* the parent's handle: its locks and roles are not ours */
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	if (shm_arena_intact(arena->shm)) {
		rep->problems = 1;
		if (cb)
			cb("header", "the file is shorter than the arena (someone who can write it truncated it): destroy "
			   "it and create it again", 0, ctx);
		return -EBADMSG;
	}
	if (arena_is_damaged(arena)) {
		rep->problems = 1;
		if (cb) {
			char msg[160];
			snprintf(msg, sizeof(msg), "declared unrepairable by fsck (%s): destroy it and create it again",
				 damage_name(arena->shm->hdr->damage_reason));
			cb("header", msg, 0, ctx);
		}
		return -ENOTRECOVERABLE;
	}
	/* a repair also verifies every payload: readers never check digests on a hit, so a repaired
	 * arena must not keep an entry whose bytes are not what its digest says */
	if (flags & SC_FSCK_REPAIR)
		flags |= SC_FSCK_DEEP;
	struct pass p, vp;
	one_pass(arena, flags, cb, ctx, rep, &p);
	if (!(flags & SC_FSCK_REPAIR)) {
		uint64_t left = rep->problems - rep->repaired;
		return left > INT32_MAX ? INT32_MAX : (int)left;
	}
	/* check again, silently, after every repair pass; repair again while problems remain. Each
	 * finding reported (through @cb) counts once in problems; repaired is what no longer shows. */
	uint64_t found = rep->problems, dropped = rep->dropped;
	for (int round = 0;; round++) {
		one_pass(arena, flags & ~SC_FSCK_REPAIR, NULL, NULL, &v, &vp);
		if (v.problems == 0 || (!p.damage && v.problems <= p.deferred)) {
			/* the counts of the final state are the last check's */
			*rep = v;
			rep->problems = found;
			rep->repaired = found - v.problems;
			rep->dropped = dropped;
			return (int)v.problems;
		}
		if (p.damage || round == FSCK_ROUNDS)
			break;
		struct sc_fsck_report r;
		one_pass(arena, flags, cb, ctx, &r, &p);
		found += r.problems;
		dropped += r.dropped;
	}
	declare_damaged(arena, p.damage ? p.damage : SHM_DAMAGE_OTHER);
	*rep = v;
	rep->problems = found + 1;
	rep->repaired = found > v.problems ? found - v.problems : 0;
	rep->dropped = dropped;
	if (cb) {
		char msg[160];
		snprintf(msg, sizeof(msg), "the arena cannot be repaired (%s): declared unrepairable; destroy it and create "
			 "it again", damage_name(p.damage));
		cb("header", msg, 0, ctx);
	}
	return -ENOTRECOVERABLE;
}
