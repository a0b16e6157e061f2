/*
 * lib/l2/place.c — where an entry lives: the layout of its heap allocation, the checks of an
 * entry's fields shared with the read path, allocation (making room through lib/l2/evict.c), and
 * the commit that gives a block to an entry and links it.
 *
 * An entry's heap allocation holds the wire (section 0 then section 1) and, for KV_RECURRENT with
 * a descriptor, a copy of struct sc_kv_desc at the next 64-byte boundary after the wire; then, in
 * an arena that verifies tokens (the default), the entry's token ids (LE int32, token_count of
 * them) at the next 64-byte boundary, flagged by L2_META_TOKENS. Readers compare them with the
 * caller's tokens on every hit (lib/l2/read.c): a key collision is a miss. A reservation of 4 KiB
 * or more starts 4 KiB aligned (the heap guarantees it), so L3 can read into it with O_DIRECT; an
 * entry copied in (sc_l2_admit) is packed (SHM_HEAP_PACKED): 64-byte aligned, rounded to 64 bytes,
 * so that small entries tile the heap (a 4 KiB entry with 16 token ids takes 4 224 bytes, not the
 * 8 256 plus up to 4 032 of alignment gap a page-aligned block would).
 *
 * Under the key's shard lock the block is given to an entry (tag: entry idx and gen), the entry
 * joins the policy's FIFOs (before it is linked, so that a writer killed in between leaves a
 * queued entry that is not LIVE, which the evictor drops, rather than a LIVE entry no FIFO holds)
 * and is linked, replacing an existing entry of the key in one release store (shm/index.c); the
 * replaced one leaves the FIFOs.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evict.h"
#include "lease.h"
#include "miss.h"
#include "place.h"
#include "seg.h"
#include "stage.h"
#include "../events.h"
#include "../probes.h"
#include "../xxh.h"
#include "../../shm/fault.h"
#include "../../shm/heap.h"

#define DESC_ALIGN 64u

static uint64_t desc_at(uint64_t wire)
{
	return (wire + DESC_ALIGN - 1) & ~(uint64_t)(DESC_ALIGN - 1);
}

/* Lengths of allocations saturate here: larger than any heap (the heap then says -E2BIG), and
 * far below SHM_HEAP_PACKED's bit, so that no length of ours, however hostile the sizes it came
 * from, reads as a packed request of a few bytes. */
#define L2_LEN_SAT (1ull << 61)

uint64_t l2_alloc_len(uint64_t wire, int has_desc)
{
	if (wire >= L2_LEN_SAT)
		return L2_LEN_SAT;
	return has_desc ? desc_at(wire) + sizeof(struct sc_kv_desc) : wire;
}
#define alloc_len l2_alloc_len


uint64_t l2_tokens_at(uint64_t wire, int has_desc)
{
	return desc_at(alloc_len(wire, has_desc));
}

/* The allocation of an entry: wire, descriptor, and @ntok stored token ids (0: none). */
uint64_t l2_alloc_len_tok(uint64_t wire, int has_desc, uint64_t ntok)
{
	uint64_t at = l2_tokens_at(wire, has_desc);
	if (!ntok)
		return alloc_len(wire, has_desc);
	return at >= L2_LEN_SAT || ntok >= L2_LEN_SAT / 4 ? L2_LEN_SAT : at + ntok * 4;
}

uint64_t sc_l2_footprint(const struct sc_arena *a, uint64_t bytes, int has_kv_desc, uint32_t token_count)
{
	/* (any size saturates at L2_LEN_SAT, whose footprint is UINT64_MAX) */
	uint64_t ntok = !a || l2_verify_tokens(a) ? token_count : 0;
	return shm_heap_footprint(l2_alloc_len_tok(bytes, has_kv_desc != 0, ntok) | SHM_HEAP_PACKED);
}

int l2_entry_snap(struct shm_index *ix, const struct shm_index_entry *e, struct l2_snap *sn, struct sc_kv_desc *desc)
{
	/* each field is read once (a hostile writer could change it between two reads): the caller
	 * uses only what was validated here */
	uint32_t meta = __atomic_load_n(&e->meta, __ATOMIC_RELAXED);
	uint32_t kind = SHM_META_KIND(meta), origin = SHM_META_ORIGIN(meta);
	int has_desc = (int)SHM_META_HAS_DESC(meta);
	uint64_t l0 = __atomic_load_n(&e->sec_len[0], __ATOMIC_RELAXED), l1 = __atomic_load_n(&e->sec_len[1], __ATOMIC_RELAXED);
	uint64_t off = __atomic_load_n(&e->payload_off, __ATOMIC_RELAXED);
	uint64_t ntok = (meta & L2_META_TOKENS) ? __atomic_load_n(&e->token_count, __ATOMIC_RELAXED) : 0;
	if (kind < SC_PAYLOAD_FULL_STATE || kind > SC_PAYLOAD_KV_RECURRENT || origin > SC_ORIGIN_FROM_L3)
		return -EBADMSG;
	if (l0 > ix->heap_hi || l1 > ix->heap_hi || l0 + l1 == 0 || (kind != SC_PAYLOAD_KV_RECURRENT && (l1 || has_desc)))
		return -EBADMSG;
	if (ntok > ix->heap_hi / 4 || ((meta & L2_META_TOKENS) && !ntok))
		return -EBADMSG;
	uint64_t wire = l0 + l1, local = wire, rec = 0;
	int scattered = 0;
	if (meta & SHM_META_SEG) {
		/* the data block stores the record's local pieces; the rest lives in other blocks */
		const struct shm_seg_rec *r;
		struct shm_segtab t = { .a = ix->a, .heap_lo = ix->heap_lo, .heap_hi = ix->heap_hi };
		rec = ix->heap_lo + 64ull * __atomic_load_n(&e->seg_rec, __ATOMIC_RELAXED);
		if (!(r = shm_seg_rec_at(&t, rec)) || r->data != off || r->wire != wire)
			return -EBADMSG;
		local = r->local;
		scattered = !(r->flags & SHM_SEG_CONTIG);
		if (!scattered && local != wire)
			return -EBADMSG;
	}
	uint64_t need = l2_alloc_len_tok(local, has_desc, ntok);
	/* (the heap's header and the blocks' headers are never a payload) */
	if (off < ix->heap_lo || !shm_heap_alloc_off_ok(off - ix->heap_lo) || off > ix->heap_hi ||
	    need > ix->heap_hi - off)
		return -EBADMSG;
	if (has_desc) {
		memcpy(desc, ix->a->base + off + desc_at(local), sizeof(*desc));
		if (sc_kv_desc_validate(desc, l0))
			return -EBADMSG;
	}
	*sn = (struct l2_snap){ .off = off, .l0 = l0, .l1 = l1, .wire = wire, .meta = meta, .has_desc = has_desc,
				.ntok = ntok, .tok_off = ntok ? off + l2_tokens_at(local, has_desc) : 0,
				.seg_rec = rec, .scattered = scattered };
	return 0;
}

int l2_entry_check(struct shm_index *ix, const struct shm_index_entry *e, uint64_t *wire_out, struct sc_kv_desc *desc,
		   int *has_desc_out)
{
	struct l2_snap sn;
	int rc = l2_entry_snap(ix, e, &sn, desc);
	if (rc)
		return rc;
	*wire_out = sn.wire;
	if (has_desc_out)
		*has_desc_out = sn.has_desc;
	return 0;
}

/* The arena handle whose l2_ix is @ix (every shm_index view lives inside one). */
static struct sc_arena *ix_arena(struct shm_index *ix)
{
	return (struct sc_arena *)(void *)((char *)ix - offsetof(struct sc_arena, l2_ix));
}

void l2_entry_info(struct shm_index *ix, const struct shm_index_entry *e, struct sc_l2_entry_info *info)
{
	memset(info, 0, sizeof(*info));
	info->key = (struct sc_key){ e->key_lo, e->key_hi };
	info->stage_id = e->stage_id;
	info->token_count = e->token_count;
	info->sec_len[0] = e->sec_len[0];
	info->sec_len[1] = e->sec_len[1];
	info->bytes = e->sec_len[0] + e->sec_len[1];
	info->footprint = e->footprint;
	info->digest = (struct sc_digest){ e->digest_lo, e->digest_hi };
	info->kind = SHM_META_KIND(e->meta);
	info->origin = SHM_META_ORIGIN(e->meta);
	info->has_kv_desc = (int)SHM_META_HAS_DESC(e->meta);
	info->created_unix_ns = e->created_ns;
	info->frequency = atomic_load_explicit(&e->freq, memory_order_relaxed);
	info->cost_ns = ix->ent <= e && e < ix->ent + ix->nentries ? l2_entry_cost(ix_arena(ix), shm_index_idx(ix, e)) : 0;
}

/* The live entry of @key, if any (lock-free; for excluding it from eviction only). */
static const struct shm_index_entry *peek_entry(struct sc_arena *a, struct sc_key key)
{
	int err;
	shm_epoch_enter(a->shm);
	const struct shm_index_entry *e = shm_index_find(l2_ix(a), key.lo, key.hi, &err);
	shm_epoch_exit(a->shm);
	return e;
}

/* What an allocation must not evict: the live entry of a key, looked up only when room has to be
 * made (an admission that finds room never pays for the lookup: two dependent misses). */
struct excl {
	const struct sc_key *key;    /* NULL: nothing to exclude */
	const struct shm_index_entry *e;
	int looked;
};

static const struct shm_index_entry *excl_entry(struct sc_arena *a, struct excl *x)
{
	if (x->key && !x->looked) {
		x->e = peek_entry(a, *x->key);
		x->looked = 1;
	}
	return x->e;
}

/* l2_make_room, and when it cannot: clear what dead holders left (their leases pin entries, their
 * reservations hold heap) and try once more. Whoever needs the room does the reaping. 0 also when
 * the reap released something and nothing more could be evicted: what it released (a dead
 * filler's reservation) may be the room itself, which the caller measures again. Room in bytes is
 * not made again after a reap: what it released and the reclaim freed may already be the room,
 * and @need_bytes, measured before, would evict that much more; the caller measures again. */
static int make_room(struct sc_arena *a, uint64_t need_bytes, int need_shard, int held,
		     const struct shm_index_entry *exclude, int *why)
{
	int rc = l2_make_room(a, need_bytes, need_shard, held, exclude, SC_MISS_EVICTED_PRESSURE, why);
	if (rc == -ENOSPC && l2_reap(a, 1) > 0) {
		l2_reclaim_all(a, held);
		if (need_bytes)
			return 0;
		rc = l2_make_room(a, need_bytes, need_shard, held, exclude, SC_MISS_EVICTED_PRESSURE, why);
		if (rc == -ENOSPC)
			rc = 0;
	}
	return rc;
}

#define L2_PENDING_WAIT_NS 2000000ull /* for room that only readers still hold */

/*
 * Allocate @len bytes (footprint @fp) tagged private, evicting for the budget (S3-FIFO) and, when
 * the heap is fragmented, by address. 0, or -ENOSPC / -EBADMSG with *why.
 * Retired entries still count as used until readers leave them: room that is only waiting for
 * readers is waited for (briefly) instead of being made twice.
 */
int l2_alloc(struct sc_arena *a, uint64_t len, uint64_t fp, const struct sc_key *exclude_key, uint64_t cost,
	     uint32_t flags, uint64_t *off, int *why)
{
	struct excl x = { .key = exclude_key };
	uint64_t tag = shm_tag_priv(a->shm->token);
	uint64_t budget = l2_budget(a);
	int rc = -ENOSPC, waited = 0, judged = !cost || !exclude_key;
	*why = SC_L2_REFUSE_OTHER;
	l2_reap_periodic(a);
	for (int round = 0; round < 12; round++) {
		uint64_t used = l2_used(a);
		if (used + fp > budget) {
			l2_reclaim_all(a, -1);
			used = l2_used(a);
		}
		if (used + fp > budget) {
			if (flags & L2_RESERVE_NO_EVICT) {
				*why = SC_L2_REFUSE_LEASED;
				return -ENOSPC;
			}
			uint64_t need = used + fp - budget, pending = l2_pending(a);
			if (pending && !waited) {
				/* evicted (by us or others) but still seen by a reader, which a busy machine may
				 * have descheduled inside its read section: wait for it, a bounded time, once
				 * per admission, rather than evict the same room twice */
				uint64_t until = shm_now_ns() + L2_PENDING_WAIT_NS;
				waited = 1;
				do { /* one round at least, however late this process runs */
					shm_sched_point("l2.admit.waiting");
					sched_yield();
					l2_reclaim_all(a, -1);
					if (l2_used(a) + fp <= budget)
						break;
				} while (l2_pending(a) && shm_now_ns() < until);
				continue;
			}
			if (!judged) {
				/* room must be made for it: is it worth what it would displace? */
				judged = 1;
				if (l2_benefit_admit(a, l2_key_fp(exclude_key->lo, exclude_key->hi), fp, cost)) {
					*why = SC_L2_REFUSE_LOW_BENEFIT;
					return -ENOSPC;
				}
			}
			if ((rc = make_room(a, need, -1, -1, excl_entry(a, &x), why)))
				return rc;
			continue;
		}
		rc = shm_heap_alloc(a->shm, len, tag, off);
		if (rc != -ENOSPC) {
			if (rc)
				*why = rc == -E2BIG ? SC_L2_REFUSE_TOO_LARGE : SC_L2_REFUSE_OTHER;
			return rc;
		}
		l2_reclaim_all(a, -1);
		if (shm_heap_alloc(a->shm, len, tag, off) == 0)
			return 0;
		if (flags & L2_RESERVE_NO_EVICT) {
			*why = SC_L2_REFUSE_NO_ROOM;
			return -ENOSPC;
		}
		/* the bytes are there but not in one block: evict by address */
		rc = l2_make_contig(a, len, tag, excl_entry(a, &x), off, why);
		if (rc != -EAGAIN)
			return rc;
	}
	/* every round made room and lost it again (to other writers, to readers or dead holders
	 * that kept it): the bounded effort ended */
	*why = SC_L2_REFUSE_SCAN_LIMIT;
	return -ENOSPC;
}

uint64_t l2_desc_at(uint64_t wire)
{
	return desc_at(wire);
}

int l2_alloc_for(struct sc_arena *a, uint64_t len, uint64_t fp, struct sc_key key, uint64_t cost, uint64_t *off,
		 int *why)
{
	return l2_alloc(a, len, fp, &key, cost, 0, off, why);
}

/*
 * Give the private block at @off to a new entry of @key and link it, replacing the key's entry.
 * With @rec_off (a segmented payload, lib/l2/seg.c) the record at @rec_off goes with it, and the
 * record's references are taken (shm_seg_hold_locked, @dg the pieces' digests) before the entry
 * is BUSY; -ESTALE when a segment it names went meanwhile.
 * 0 (the blocks now belong to the index) or -errno (the blocks are still the caller's).
 */
int l2_commit(struct sc_stage *st, struct sc_key key, uint32_t n, struct sc_digest d, uint64_t off, uint32_t kind,
		     uint64_t l0, uint64_t l1, int has_desc, int has_tokens, uint64_t fp, uint32_t origin,
		     struct sc_lease *lease, int *why, uint64_t rec_off, const uint64_t (*dg)[2], uint64_t cost)
{
	struct sc_arena *a = st->arena;
	struct shm_index *ix = l2_ix(a);
	uint32_t shard = shm_index_shard_of_bucket(shm_index_bucket(ix, key.lo));
	if (lease) {
		memset(lease, 0, sizeof(*lease));
		lease->slot_ = -1;
		/* a lease slot is needed after linking: make sure now that one is free (the lease
		 * table is this handle's alone, so it stays free), or publish nothing */
		uint64_t all = SC_LEASES_MAX == 64 ? ~0ull : ((1ull << SC_LEASES_MAX) - 1);
		if (!(~a->l2_lease_used & all))
			return -EMFILE;
	}
	*why = SC_L2_REFUSE_OTHER;
	int rc = shm_index_lock(ix, shard), err;
	if (rc)
		return rc;
	struct shm_index_entry *old = shm_index_find(ix, key.lo, key.hi, &err);
	if (err == -EBADMSG) {
		/* a corrupted chain: rebuild the shard (cutting the bad links) and look again */
		shm_index_repair_locked(ix, shard);
		old = shm_index_find(ix, key.lo, key.hi, &err);
	}
	if (err) {
		shm_index_unlock(ix, shard);
		return err;
	}
	struct shm_index_entry *e = shm_index_pop_free_locked(ix, shard);
	if (!e) {
		l2_reclaim_locked(a, shard);
		e = shm_index_pop_free_locked(ix, shard);
	}
	if (!e && make_room(a, 0, (int)shard, (int)shard, old, why) == 0)
		e = shm_index_pop_free_locked(ix, shard);
	if (!e) {
		/* the shard's index entries are all in use: make_room said why (or they are retired
		 * and still seen by readers: no room now) */
		if (*why == SC_L2_REFUSE_OTHER)
			*why = SC_L2_REFUSE_SCAN_LIMIT;
		shm_index_unlock(ix, shard);
		return -ENOSPC;
	}
	shm_fault_point("l2.admit.popped");
	shm_sched_point("l2.commit.popped"); /* the shard held, its blocks not yet the entry's */
	uint32_t idx = shm_index_idx(ix, e);
	if (rec_off && (rc = shm_heap_set_tag(a->shm, rec_off, shm_tag_typed(SHM_TAG_SEGREC, idx, e->gen)))) {
		shm_index_push_free_locked(ix, e);
		shm_index_unlock(ix, shard);
		return rc;
	}
	if ((rc = shm_heap_set_tag(a->shm, off, rec_off ? shm_tag_typed(SHM_TAG_SEGDATA, idx, e->gen)
							 : shm_tag_entry(idx, e->gen)))) {
		if (rec_off)
			(void)shm_heap_set_tag(a->shm, rec_off, shm_tag_priv(a->shm->token));
		shm_index_push_free_locked(ix, e);
		shm_index_unlock(ix, shard);
		return rc;
	}
	shm_fault_point("l2.admit.tagged");
	e->key_lo = key.lo;
	e->key_hi = key.hi;
	e->meta = kind | (origin << 8) | ((uint32_t)has_desc << 16) | (has_tokens ? L2_META_TOKENS : 0);
	e->stage_id = st->id;
	e->payload_off = off;
	e->sec_len[0] = l0;
	e->sec_len[1] = l1;
	e->digest_lo = d.lo;
	e->digest_hi = d.hi;
	e->token_count = n;
	e->footprint = fp;
	e->created_ns = shm_realtime_ns();
	e->retire_epoch = 0;
	e->owner = a->shm->token;
	e->seg_rec = 0;
	atomic_store_explicit(&e->freq, 0, memory_order_relaxed);
	if (rec_off) {
		struct shm_segtab *t = l2_segtab(a);
		e->meta |= SHM_META_SEG;
		e->seg_rec = (uint32_t)((rec_off - t->heap_lo) / 64);
		struct shm_seg_rec *r = shm_seg_rec_at(t, rec_off);
		rc = r ? shm_seg_lock(t) : -EBADMSG;
		if (!rc) {
			rc = shm_seg_hold_locked(t, r, rec_off, dg);
			shm_seg_unlock(t);
		}
		if (rc) {
			/* a segment it names went since the admit looked: give the blocks back */
			(void)shm_heap_set_tag(a->shm, rec_off, shm_tag_priv(a->shm->token));
			(void)shm_heap_set_tag(a->shm, off, shm_tag_priv(a->shm->token));
			e->meta &= ~SHM_META_SEG;
			shm_index_push_free_locked(ix, e);
			shm_index_unlock(ix, shard);
			return rc;
		}
		shm_fault_point("seg.admit.held");
	}
	atomic_store_explicit(&e->state, SHM_ENT_BUSY, memory_order_relaxed);
	shm_fault_point("l2.admit.busy");
	l2_policy_admit(a, e, cost); /* queued before it is reachable (see the top of this file) */
	shm_fault_point("l2.admit.queued");
	shm_index_link_locked(ix, e, old);
	shm_fault_point("l2.admit.linked");
	if (old && atomic_load_explicit(&old->state, memory_order_relaxed) != SHM_ENT_LIVE)
		l2_policy_forget(a, shm_index_idx(ix, old), 0, -1, 0); /* replaced: nothing to note */
	if (lease) {
		int slot = l2_lease_take(a, shm_index_rec(ix, e));
		if (slot >= 0) { /* *lease was zeroed above */
			const uint8_t *p = a->shm->base + off;
			l2_lease_fill(lease, a, slot, p, l0, l1, kind, origin, n, d, key, has_desc,
				      p + desc_at(l0 + l1));
		}
	}
	events_note_locked(a, ix, SC_EVENT_L2_STORED, st->id, key, d, n);
	int due = l2_reclaim_due_locked(a, shard); /* what we replaced, in batches (lib/l2/evict.h) */
	shm_index_unlock(ix, shard);
	if (due)
		l2_reclaim_all(a, -1);
	l2_count_event(a, st->id, L2C_INSERTS, 1);
	uint64_t sid = st->id, lo = d.lo, hi = d.hi, b = l0 + l1, org = origin;
	SC_PROBE(l2_admit, sid, lo, hi, b, org);
	return 0;
}

int l2_commit_seg(struct sc_stage *st, struct sc_key key, uint32_t n, struct sc_digest d, uint64_t off, uint32_t kind,
		  uint64_t l0, uint64_t l1, int has_desc, int has_tokens, uint64_t fp, uint32_t origin, uint64_t rec_off,
		  const uint64_t (*dg)[2], int *why, uint64_t cost)
{
	return l2_commit(st, key, n, d, off, kind, l0, l1, has_desc, has_tokens, fp, origin, NULL, why, rec_off, dg,
			 cost);
}

