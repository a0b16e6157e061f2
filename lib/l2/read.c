/*
 * lib/l2/read.c — the L2 read path: get (lease), get_copy, peek, longest prefix, listing, stats.
 *
 * A lookup is: epoch enter (own slot), lock-free chain walk (shm_index_find), checks of the
 * entry's offsets and descriptor against the heap region, the lease record in our own slot,
 * at most one relaxed store to the entry's freq (f + 1 when it reads f < 3: the eviction policy's
 * hit counter, lib/l2/evict.c; a lost update between two readers only costs a count), epoch exit.
 * No lock, no syscall, no allocation, no shared counter: hits and misses accumulate in the stage
 * handle.
 *
 * Exact tokens: in an arena that verifies tokens every entry stores its token ids, and a lookup
 * that knows the caller's tokens compares them (count and every id) before anything else. A key
 * that matched someone else's prefix is a miss (reason 3), counted in key_collisions (shared
 * counter: collisions are rare events) and never removes that other prefix's entry.
 *
 * Misses are classified (lib/l2/miss.c): an absent key by what the departure table noted of it
 * (evicted, removed, refused, not promoted; nothing: never stored), the others by what the lookup
 * saw (a stale mirror: removed; a collision; a corrupted entry). That costs a miss one more cache
 * line (the departure set, relaxed loads); a hit pays nothing for it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "read.h"
#include "admin.h"
#include "evict.h"
#include "lease.h"
#include "miss.h"
#include "place.h"
#include "seg.h"
#include "stage.h"
#include "../probes.h"
#include "../../shm/fault.h"
#include "../../shm/heap.h"

enum { MISS_ABSENT = 0, MISS_MISMATCH = 1, MISS_ERROR = 2, MISS_COLLISION = 3 };

static inline void count_hit(struct sc_stage *st)
{
	if (++st->local_hits + st->local_misses >= L2_FLUSH_EVERY)
		l2_flush(st);
}

/* Count a miss of @key (its lookup ended with @reason, MISS_*): classified first, then counted in
 * the stage handle (flushed with the hits). */
static void count_miss(struct sc_stage *st, struct sc_key key, uint64_t tokens, int reason, uint64_t t0)
{
	uint32_t detail = 0;
	int cls = reason == MISS_ABSENT      ? l2_depart_reason(st->arena, l2_key_fp(key.lo, key.hi), &detail)
		  : reason == MISS_MISMATCH  ? SC_MISS_REMOVED
		  : reason == MISS_COLLISION ? SC_MISS_COLLISION
					     : SC_MISS_CORRUPT;
	if (reason == MISS_MISMATCH)
		detail = L2_REMOVE_MISMATCH;
	l2_count_l2_miss(st, cls, detail);
	if (++st->local_misses + st->local_hits >= L2_FLUSH_EVERY)
		l2_flush(st);
	if (SC_PROBE_ENABLED(l2_miss)) {
		uint64_t sid = st->id, tk = tokens, why = (uint64_t)reason, ns = t0 ? shm_now_ns() - t0 : 0;
		SC_PROBE(l2_miss, sid, tk, why, ns);
	}
}

enum lookup_mode { LOOKUP_LEASE, LOOKUP_COPY, LOOKUP_PEEK };

struct lookup {
	enum lookup_mode mode;
	int count;
	const struct sc_location *loc;
	struct sc_lease *lease;
	void *buf;
	uint64_t cap;
	struct sc_l2_entry_info *info;
	uint64_t tokens;
	const int32_t *tok;          /* the caller's tokens (tokens of them) to verify, or NULL */
	int keep_stale;              /* a location mismatch returns -ESTALE and removes nothing */
	uint64_t stale_rec;          /* then: the entry's record (gen << 32 | idx+1) */
};

/* Do the entry's stored token ids equal @tok[0..n)? 1 yes, 0 no (a collision), -EBADMSG. */
static int tokens_match(struct sc_arena *a, const struct l2_snap *sn, const int32_t *tok, uint64_t n)
{
	if (!l2_verify_tokens(a))
		return 1;
	if (!sn->ntok)
		return -EBADMSG; /* every entry of a verifying arena stores its tokens */
	return sn->ntok == n && !memcmp(a->shm->base + sn->tok_off, tok, n * 4);
}

/*
 * The caller of a hit reads the value (lease) or we copy it (get_copy) right after the lookup, and
 * the lookup's last dependent miss (the stored tokens, behind the payload) does not need it: start
 * the payload's first lines now, so that their misses overlap the token compare instead of
 * following it. The hardware prefetcher takes over once the copy streams. A hint only: the
 * offsets were validated (l2_entry_snap), and a prefetch never faults.
 */
#define L2_PREFETCH_LINES 8
static inline void prefetch_payload(const uint8_t *p, uint64_t wire)
{
	uint64_t n = (wire + 63) / 64;
	if (n > L2_PREFETCH_LINES)
		n = L2_PREFETCH_LINES;
	for (uint64_t i = 0; i < n; i++)
		__builtin_prefetch(p + i * 64, 0, 3);
}

static int64_t lookup(struct sc_stage *st, struct sc_key key, struct lookup *q)
{
	struct sc_arena *a = st->arena;
	if (__builtin_expect(a->shm->forked, 0))
		return -ECHILD; /* the parent's handle in a forked child: its reader slot is not ours */
	struct shm_index *ix = l2_ix(a);
	uint64_t t0 = (q->count && (SC_PROBE_ENABLED(l2_hit) || SC_PROBE_ENABLED(l2_miss))) ? shm_now_ns() : 0;
	int err;
	struct l2_snap sn;
	int64_t ret = 0;
	struct sc_kv_desc desc;

	shm_epoch_enter(a->shm);
	struct shm_index_entry *e = shm_index_find(ix, key.lo, key.hi, &err);
	if (!e) {
		shm_epoch_exit(a->shm);
		if (q->count)
			count_miss(st, key, q->tokens, err ? MISS_ERROR : MISS_ABSENT, t0);
		return err ? err : -ENOENT;
	}
	if ((err = l2_entry_snap(ix, e, &sn, &desc))) {
		shm_epoch_exit(a->shm);
		if (q->count)
			count_miss(st, key, q->tokens, MISS_ERROR, t0);
		return err;
	}
	if (q->mode != 2)
		prefetch_payload(a->shm->base + sn.off, sn.wire);
	if (q->tok) {
		int m = tokens_match(a, &sn, q->tok, q->tokens);
		if (m != 1) {
			shm_epoch_exit(a->shm);
			if (m == 0)
				key_collision_count(a, 0, q->tokens);
			if (q->count)
				count_miss(st, key, q->tokens, m == 0 ? MISS_COLLISION : MISS_ERROR, t0);
			return m == 0 ? -ENOENT : m;
		}
	}
	struct sc_digest d = { e->digest_lo, e->digest_hi };
	if (q->loc && (e->token_count != q->loc->token_count || !sc_digest_equal(d, q->loc->digest))) {
		uint64_t rec = shm_index_rec(ix, e);
		shm_epoch_exit(a->shm);
		if (q->keep_stale) {
			q->stale_rec = rec;
			if (q->count)
				count_miss(st, key, q->tokens, MISS_MISMATCH, t0);
			return -ESTALE;
		}
		/* the durable copy changed: this mirror is stale */
		(void)l2_remove_key(a, key, rec, L2_REMOVE_MISMATCH);
		if (q->count)
			count_miss(st, key, q->tokens, MISS_MISMATCH, t0);
		return -ENOENT;
	}
	shm_sched_point("l2.get.found"); /* found, lease not yet recorded: vs removal + reclaim */
	/* only the validated snapshot from here on */
	const uint8_t *p = a->shm->base + sn.off;
	uint64_t l0 = sn.l0, l1 = sn.l1, wire = sn.wire;
	uint32_t meta = sn.meta;
	int has_desc = sn.has_desc;
	if (q->info)
		l2_entry_info(ix, e, q->info);
	if (q->mode == LOOKUP_LEASE) {
		int slot = l2_lease_take(a, shm_index_rec(ix, e));
		if (slot < 0) {
			shm_epoch_exit(a->shm);
			return slot;
		}
		l2_lease_fill(q->lease, a, slot, p, l0, l1, SHM_META_KIND(meta), SHM_META_ORIGIN(meta), e->token_count,
			      d, key, has_desc, &desc);
		if (sn.scattered) { /* no contiguous sections: the segment list (sc_lease_segments) */
			struct sc_lease *l = q->lease;
			l->sec[0] = l->sec[1] = NULL;
			l->segments = ((const struct shm_seg_rec *)(const void *)(a->shm->base + sn.seg_rec))->npieces;
			l->private_spare_[0] = sn.seg_rec;
		}
	} else if (q->mode == LOOKUP_COPY) {
		if (wire > q->cap) {
			shm_epoch_exit(a->shm);
			return -ENOBUFS;
		}
		if (sn.scattered) {
			ret = l2_seg_copy(a, sn.seg_rec, q->buf, q->cap);
			if (ret < 0) {
				shm_epoch_exit(a->shm);
				return ret;
			}
		} else {
			memcpy(q->buf, p, wire);
		}
		ret = (int64_t)wire;
	}
	if (q->mode != LOOKUP_PEEK) {
		uint32_t f = atomic_load_explicit(&e->freq, memory_order_relaxed);
		if (f < L2_FREQ_MAX)
			atomic_store_explicit(&e->freq, f + 1, memory_order_relaxed);
	}
	shm_epoch_exit(a->shm);
	/* a copy is the caller's own: checked against the entry's digest (a member who can write the
	 * arena could have changed the bytes), where a zero-copy view leaves that to its reader */
	if (q->mode == LOOKUP_COPY) {
		struct sc_digest got = sc_digest_of(q->buf, wire);
		if (got.lo != d.lo || got.hi != d.hi)
			return -EBADMSG;
	}
	if (q->count) {
		count_hit(st);
		if (SC_PROBE_ENABLED(l2_hit)) {
			uint64_t sid = st->id, lo = d.lo, hi = d.hi, b = wire, org = SHM_META_ORIGIN(meta),
				 ns = shm_now_ns() - t0;
			SC_PROBE(l2_hit, sid, lo, hi, b, org, ns);
		}
	}
	return ret;
}

int sc_l2_get_key(struct sc_stage *st, struct sc_key key, struct sc_lease *lease)
{
	if (!st || !lease)
		return -EINVAL;
	lease->arena_ = NULL;
	lease->slot_ = -1;
	struct lookup q = { .mode = LOOKUP_LEASE, .count = 1, .lease = lease };
	return (int)lookup(st, key, &q);
}

int l2_get_prehashed(struct sc_stage *st, struct sc_key key, const int32_t *tokens, uint32_t n,
		     const struct sc_location *loc, struct sc_lease *lease, uint64_t *stale_rec)
{
	lease->arena_ = NULL;
	lease->slot_ = -1;
	struct lookup q = { .mode = LOOKUP_LEASE, .count = 1, .loc = loc, .lease = lease, .tokens = n, .tok = tokens,
			    .keep_stale = stale_rec != NULL };
	int rc = (int)lookup(st, key, &q);
	if (rc == -ESTALE)
		*stale_rec = q.stale_rec;
	return rc;
}

int sc_l2_get(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, const struct sc_location *loc,
	      struct sc_lease *lease)
{
	if (!lease)
		return -EINVAL;
	lease->arena_ = NULL; /* whatever the answer: an empty lease, which releasing leaves alone */
	lease->slot_ = -1;
	if (!n)
		return -EINVAL; /* (a stage and the tokens: sc_l2_key checks them) */
	struct sc_key key;
	int rc = sc_l2_key(st, ns, tokens, n, &key);
	if (rc)
		return rc;
	struct lookup q = { .mode = LOOKUP_LEASE, .count = 1, .loc = loc, .lease = lease, .tokens = n, .tok = tokens };
	return (int)lookup(st, key, &q);
}

int64_t sc_l2_get_copy(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n,
		       const struct sc_location *loc, void *buf, uint64_t cap, struct sc_l2_entry_info *info)
{
	if (!n || (cap && !buf))
		return -EINVAL; /* (a stage and the tokens: sc_l2_key checks them) */
	struct sc_key key;
	int rc = sc_l2_key(st, ns, tokens, n, &key);
	if (rc)
		return rc;
	struct lookup q = { .mode = LOOKUP_COPY, .count = 1, .loc = loc, .buf = buf, .cap = cap, .info = info,
			    .tokens = n, .tok = tokens };
	return lookup(st, key, &q);
}

int sc_l2_peek(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_l2_entry_info *info)
{
	if (!n || !info)
		return -EINVAL; /* (a stage and the tokens: sc_l2_key checks them) */
	struct sc_key key;
	int rc = sc_l2_key(st, ns, tokens, n, &key);
	if (rc)
		return rc;
	struct lookup q = { .mode = LOOKUP_PEEK, .count = 0, .info = info, .tokens = n, .tok = tokens };
	return (int)lookup(st, key, &q);
}

#define PREFIX_STACK_KEYS 512

int sc_l2_longest_prefix(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, uint32_t block,
			 uint32_t *len, struct sc_lease *lease)
{
	if (!len || !lease)
		return -EINVAL;
	*len = 0; /* whatever the answer: no length, and an empty lease (as sc_l2_get) */
	lease->arena_ = NULL;
	lease->slot_ = -1;
	if (!st || (n && !tokens))
		return -EINVAL; /* before the key array is allocated */
	if (!block)
		block = L2_PREFIX_BLOCK;
	uint64_t t0 = (SC_PROBE_ENABLED(l2_hit) || SC_PROBE_ENABLED(l2_miss)) ? shm_now_ns() : 0;
	size_t want = n / block;
	struct sc_key stack_keys[PREFIX_STACK_KEYS], *keys = stack_keys;
	if (want > PREFIX_STACK_KEYS && !(keys = malloc(want * sizeof(*keys))))
		return -ENOMEM;
	int k = sc_l2_prefix_keys(st, ns, tokens, n, block, keys, want);
	int rc = k < 0 ? k : -ENOENT;
	for (int i = k - 1; i >= 0; i--) {
		struct lookup q = { .mode = LOOKUP_LEASE, .count = 0, .lease = lease,
				    .tokens = (uint64_t)(i + 1) * block, .tok = tokens };
		rc = (int)lookup(st, keys[i], &q);
		if (rc == 0) {
			*len = (size_t)(i + 1) * block;
			break;
		}
		if (rc != -ENOENT)
			break;
	}
	/* one lookup, one count, one probe */
	if (rc == 0) {
		count_hit(st);
		if (SC_PROBE_ENABLED(l2_hit)) {
			uint64_t sid = st->id, lo = lease->digest.lo, hi = lease->digest.hi,
				 b = lease->sec_len[0] + lease->sec_len[1], org = lease->origin, dt = shm_now_ns() - t0;
			SC_PROBE(l2_hit, sid, lo, hi, b, org, dt);
		}
	} else if (k >= 0 && rc != -EMFILE) {
		/* classified by the longest prefix it looked for */
		struct sc_key longest = k > 0 ? keys[k - 1] : (struct sc_key){ 0, 0 };
		count_miss(st, longest, n, rc == -ENOENT ? MISS_ABSENT : MISS_ERROR, t0);
	}
	if (keys != stack_keys)
		free(keys);
	return rc;
}

/* The longest prefix of @tokens held for @st at a multiple of @block, or at @extra (0: none),
 * without a lease or a count (sc_lookup). 0 with *len and @info, -ENOENT, or an error. */
int l2_longest_peek(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, uint32_t block,
		    uint32_t extra, uint32_t *len, struct sc_l2_entry_info *info)
{
	if (!block)
		block = L2_PREFIX_BLOCK;
	*len = 0;
	size_t want = n / block;
	struct sc_key stack_keys[PREFIX_STACK_KEYS], *keys = stack_keys;
	if (want > PREFIX_STACK_KEYS && !(keys = malloc(want * sizeof(*keys))))
		return -ENOMEM;
	int k = sc_l2_prefix_keys(st, ns, tokens, n, block, keys, want);
	int rc = k < 0 ? k : -ENOENT;
	/* longest first; the L3 length (an entry promoted from L3 has it) in its place among the
	 * multiples, unless it is one */
	int extra_due = k >= 0 && extra && extra <= n && extra % block;
	for (int i = k - 1; i >= -1 && rc == -ENOENT; i--) {
		uint32_t m = (uint32_t)(i + 1) * block;
		if (extra_due && extra > m) {
			struct sc_key key;
			extra_due = 0;
			if ((rc = sc_l2_key(st, ns, tokens, extra, &key)) == 0) {
				struct lookup q = { .mode = LOOKUP_PEEK, .info = info, .tokens = extra, .tok = tokens };
				rc = (int)lookup(st, key, &q);
				if (rc == 0)
					*len = extra;
			}
			if (rc != -ENOENT)
				break;
		}
		if (i < 0)
			break;
		struct lookup q = { .mode = LOOKUP_PEEK, .info = info, .tokens = m, .tok = tokens };
		rc = (int)lookup(st, keys[i], &q);
		if (rc == 0)
			*len = m;
	}
	if (keys != stack_keys)
		free(keys);
	return rc;
}

int64_t sc_l2_entry_tokens(struct sc_arena *a, struct sc_key key, struct sc_l2_entry_info *info, int32_t *tokens,
			   uint32_t cap)
{
	if (!a || (cap && !tokens))
		return -EINVAL;
	int rc = l2_ready(a), err; /* (-ECHILD: the parent's handle in a forked child) */
	if (rc)
		return rc;
	if (!l2_verify_tokens(a))
		return -ENODATA;
	struct shm_index *ix = l2_ix(a);
	struct l2_snap sn;
	struct sc_kv_desc desc;
	int64_t ret;
	shm_epoch_enter(a->shm);
	struct shm_index_entry *e = shm_index_find(ix, key.lo, key.hi, &err);
	if (!e) {
		ret = err ? err : -ENOENT;
	} else if ((err = l2_entry_snap(ix, e, &sn, &desc)) || !sn.ntok || sn.ntok > UINT32_MAX) {
		ret = -EBADMSG; /* every entry of a verifying arena stores its tokens (count validated) */
	} else {
		/* inside the epoch the allocation is not reused: the ids are the entry's */
		if (cap)
			memcpy(tokens, a->shm->base + sn.tok_off, (sn.ntok < cap ? sn.ntok : cap) * 4);
		if (info)
			l2_entry_info(ix, e, info);
		ret = (int64_t)sn.ntok;
	}
	shm_epoch_exit(a->shm);
	return ret;
}

/* ---- listing and stats ---- */

int sc_l2_list(struct sc_arena *a, int (*cb)(const struct sc_l2_entry_info *e, void *ctx), void *ctx, uint64_t max)
{
	if (!a || !cb)
		return -EINVAL;
	int rc = l2_ready(a);
	if (rc)
		return rc;
	struct shm_index *ix = l2_ix(a);
	int count = 0;
	for (uint32_t i = 0; i < ix->nentries && (!max || (uint64_t)count < max); i++) {
		struct shm_index_entry *e = &ix->ent[i];
		struct sc_l2_entry_info info;
		uint64_t wire;
		struct sc_kv_desc desc;
		shm_epoch_enter(a->shm);
		/* acquire: pairs with the release store of LIVE in shm_index_link_locked */
		int live = atomic_load_explicit(&e->state, memory_order_acquire) == SHM_ENT_LIVE &&
			   l2_entry_check(ix, e, &wire, &desc, NULL) == 0;
		if (live)
			l2_entry_info(ix, e, &info);
		shm_epoch_exit(a->shm);
		if (!live)
			continue;
		count++;
		if (cb(&info, ctx))
			break;
	}
	return count;
}

/* The counters of stage @id (0: global); a stage with no record has only entries and bytes. */
static int stats_of(struct sc_arena *a, uint64_t id, struct sc_l2_stats *out)
{
	int rc = l2_ready(a);
	if (rc)
		return rc;
	for (struct sc_stage *s = a->l2_stages; s; s = s->next)
		l2_flush(s);
	l2_reap_periodic(a); /* counts of dead holders' leases are not reported as held for long */
	memset(out, 0, sizeof(*out));
	struct shm_index *ix = l2_ix(a);
	for (uint32_t i = 0; i < ix->nentries; i++) {
		struct shm_index_entry *e = &ix->ent[i];
		if (atomic_load_explicit(&e->state, memory_order_acquire) != SHM_ENT_LIVE)
			continue;
		if (id && e->stage_id != id)
			continue;
		out->entries++;
		out->bytes += e->footprint;
		out->logical_bytes += e->sec_len[0] + e->sec_len[1];
		out->physical_bytes += l2_seg_local(a, e);
	}
	struct l2_stats_region *sr = l2_stats_region(a);
	struct l2_counters *c = &sr->global;
	struct l2_refusals *rf = &sr->refused_global;
	if (id) {
		struct l2_stage_rec *r = l2_stage_rec_find(a, id, 0);
		c = r ? &r->c : NULL;
		rf = r ? &sr->refused_stage[r - sr->stages] : NULL;
	}
	if (c) {
		out->hits = atomic_load_explicit(&c->hits, memory_order_relaxed);
		out->misses = atomic_load_explicit(&c->misses, memory_order_relaxed);
		out->inserts = atomic_load_explicit(&c->inserts, memory_order_relaxed);
		out->evictions = atomic_load_explicit(&c->evictions, memory_order_relaxed);
		out->admission_rejects = atomic_load_explicit(&c->admission_rejects, memory_order_relaxed);
		out->refused_bytes = atomic_load_explicit(&c->refused_bytes, memory_order_relaxed);
	}
	for (int i = 0; rf && i < SC_L2_REFUSE_COUNT; i++)
		out->refused[i] = atomic_load_explicit(&rf->n[i], memory_order_relaxed);
	struct l2_misses *ms = id ? l2_misses_of(a, id) : &sr->misses_global;
	if (ms)
		out->refused_low_benefit = atomic_load_explicit(&ms->low_benefit, memory_order_relaxed);
	struct shm_evq *q = l2_q(a);
	if (shm_evq_lock(q) == 0) {
		const struct shm_evq_hdr *h = q->hdr;
		out->small_entries = h->count[SHM_EVQ_SMALL - 1];
		out->small_bytes = h->bytes[SHM_EVQ_SMALL - 1];
		out->main_entries = h->count[SHM_EVQ_MAIN - 1];
		out->main_bytes = h->bytes[SHM_EVQ_MAIN - 1];
		out->moved_to_main = h->to_main;
		out->ghost_hits = h->ghost_hits;
		out->credit_kept = h->credit_kept;
		shm_evq_unlock(q);
	}
	out->budget_bytes = l2_budget(a);
	if (a->l2_seg_on) {
		struct shm_segtab *t = l2_segtab(a);
		if (shm_seg_lock(t) == 0) {
			/* blocks kept only for others' segments are physical bytes too (global) */
			out->segment_holder_bytes = t->hdr->orphan_bytes;
			out->segments = t->hdr->live;
			out->segment_dedup_bytes = t->hdr->dedup_bytes;
			shm_seg_unlock(t);
		}
		if (!id)
			out->physical_bytes += out->segment_holder_bytes;
	}
	out->saved_bytes = out->logical_bytes > out->physical_bytes ? out->logical_bytes - out->physical_bytes : 0;
	uint32_t ns = shm_readers_count(a->shm);
	for (uint32_t i = 0; i < ns; i++) {
		struct shm_reader_slot *s = shm_reader_slot(a->shm, i);
		if (atomic_load_explicit(&s->state, memory_order_acquire) == SHM_SLOT_FREE)
			continue;
		struct l2_ext *x = l2_ext_of(s);
		for (int j = 0; j < SC_LEASES_MAX; j++)
			out->leases += atomic_load_explicit(&x->rec[j], memory_order_relaxed) != 0;
	}
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		out->pending_reclaim_bytes += ix->hdr->shards[s].pending_bytes;
	struct shm_heap_stats hs;
	if ((rc = shm_heap_stats(a->shm, &hs)))
		return rc;
	out->free_bytes = hs.free_bytes;
	out->largest_free_block = hs.largest_free;
	return 0;
}

int sc_l2_stats(struct sc_arena *a, const struct sc_stage *stage, struct sc_l2_stats *out)
{
	if (!a || !out || (stage && stage->arena != a))
		return -EINVAL;
	return stats_of(a, stage ? stage->id : 0, out);
}

int sc_l2_stats_id(struct sc_arena *a, uint64_t stage_id, struct sc_l2_stats *out)
{
	if (!a || !out)
		return -EINVAL;
	int rc = l2_ready(a);
	if (rc)
		return rc;
	if (stage_id && !l2_stage_rec_find(a, stage_id, 0))
		return -ENOENT;
	return stats_of(a, stage_id, out);
}

int sc_l2_stage_ids(struct sc_arena *a, uint64_t *ids, unsigned max)
{
	if (!a || (max && !ids))
		return -EINVAL;
	int rc = l2_ready(a);
	if (rc)
		return rc;
	/* records are claimed (stage_id 0 -> id) and never given back: a relaxed read of each is a
	 * snapshot that can only miss a stage opened meanwhile */
	struct l2_stats_region *r = l2_stats_region(a);
	unsigned n = 0;
	for (uint32_t i = 0; i < L2_STAGE_RECS; i++) {
		uint64_t id = atomic_load_explicit(&r->stages[i].stage_id, memory_order_relaxed);
		if (!id)
			continue;
		if (n < max)
			ids[n] = id;
		n++;
	}
	return (int)n;
}
