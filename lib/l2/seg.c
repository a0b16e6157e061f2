/*
 * lib/l2/seg.c — segmented L2 payloads: the admit that stores only the segments L2 lacks, and
 * the read side of scattered entries (sc_lease_segments, sc_lease_copy). The table and the
 * reference protocol are shm/seg.c's.
 *
 * Cutting. Each section is cut from its start into whole segments of the arena's seg_bytes and a
 * tail (shorter, never indexed); a segment is named by the unseeded XXH3-128 of its bytes. A
 * token-major KV section that extends an earlier one therefore shares all of the earlier one's
 * whole segments; a layer-major one shares none but its first (docs/DESIGN.md, "Segments").
 *
 * Admit. Digest the segments, look them up (table mutex, briefly), then without the mutex
 * allocate a data block for what was not found (plus descriptor and token ids as for any entry)
 * and a segment record, copy, and commit: lib/l2/place.c takes the record's references under the shard
 * lock and the table mutex (shm_seg_hold_locked). A segment that went in between fails the hold
 * (-ESTALE): the admit plans again once, then stores the payload whole. When nothing was found the
 * data block holds the whole wire in order (CONTIG): the entry is read zero-copy as any other, and
 * its segments are indexed for the next admits.
 *
 * A digest match is trusted as the payload digest is (128 bits): the bytes are not compared.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "seg.h"
#include "place.h"
#include "../xxh.h"
#include "../probes.h"
#include "../../shm/fault.h"
#include "../../shm/heap.h"

static uint64_t data_len(uint64_t local, int has_desc, uint64_t ntok)
{
	return ntok ? l2_tokens_at(local, has_desc) + ntok * 4 : l2_alloc_len(local, has_desc);
}

/* One planning and commit attempt: 0, -ESTALE (plan again), or -errno. */
static int try_admit(struct sc_stage *st, struct sc_key key, uint32_t n, const int32_t *tokens, struct sc_digest d,
		     const struct sc_payload *p, uint32_t origin, struct shm_seg_piece *pc, uint64_t (*dg)[2],
		     uint32_t np, uint64_t cost, int *why)
{
	struct sc_arena *a = st->arena;
	struct shm_segtab *t = l2_segtab(a);
	uint64_t ntok = l2_verify_tokens(a) ? n : 0, local = 0;
	int has_desc = p->kv_desc != NULL, rc;
	uint32_t nremote = 0;
	if ((rc = shm_seg_lock(t)))
		return rc;
	for (uint32_t i = 0; i < np; i++) {
		pc[i].local = 1;
		pc[i].slot = SHM_SEG_NONE;
		pc[i].gen = 0;
		int64_t k = pc[i].len == t->seg_bytes ? shm_seg_find_locked(t, dg[i][0], dg[i][1], pc[i].len) : -1;
		if (k >= 0) {
			pc[i].local = 0;
			pc[i].slot = (uint32_t)k;
			pc[i].gen = t->slot[k].gen;
			pc[i].at = t->slot[k].off;
			nremote++;
		} else {
			local += pc[i].len;
		}
	}
	shm_seg_unlock(t);
	shm_sched_point("seg.admit.planned"); /* looked up, not yet held: vs the release of a segment */
	uint64_t len = data_len(local, has_desc, ntok), rlen = shm_seg_rec_bytes(np), off, rec_off;
	uint64_t fp = shm_heap_footprint(len) + shm_heap_footprint(rlen);
	if ((rc = l2_alloc_for(a, len, shm_heap_footprint(len), key, cost, &off, why)))
		return rc;
	if ((rc = l2_alloc_for(a, rlen, shm_heap_footprint(rlen), key, 0, &rec_off, why))) {
		(void)shm_heap_free(a->shm, off);
		return rc;
	}
	uint8_t *dst = a->shm->base + off;
	uint64_t cur = 0, sec_at[2] = { 0, 0 };
	for (uint32_t i = 0; i < np; i++) {
		const uint8_t *src = (const uint8_t *)p->sec[pc[i].section] + sec_at[pc[i].section];
		sec_at[pc[i].section] += pc[i].len;
		if (!pc[i].local)
			continue;
		memcpy(dst + cur, src, pc[i].len);
		pc[i].at = off + cur;
		cur += pc[i].len;
	}
	if (has_desc)
		memcpy(dst + l2_desc_at(local), p->kv_desc, sizeof(*p->kv_desc));
	if (ntok)
		memcpy(dst + l2_tokens_at(local, has_desc), tokens, ntok * 4);
	struct shm_seg_rec *r = (struct shm_seg_rec *)(void *)(a->shm->base + rec_off);
	memset(r, 0, sizeof(*r));
	r->magic = SHM_SEG_REC_MAGIC;
	r->flags = nremote ? 0 : SHM_SEG_CONTIG;
	r->npieces = np;
	r->data = off;
	r->wire = p->sec_len[0] + p->sec_len[1];
	r->local = local;
	memcpy(r->p, pc, np * sizeof(*pc));
	shm_fault_point("l2.admit.copied");
	rc = l2_commit_seg(st, key, n, d, off, p->kind, p->sec_len[0], p->sec_len[1], has_desc, ntok != 0, fp, origin,
			   rec_off, (const uint64_t(*)[2])dg, why, cost);
	if (rc) {
		(void)shm_heap_free(a->shm, rec_off);
		(void)shm_heap_free(a->shm, off);
		return rc;
	}
	uint64_t sid = st->id, lg = r->wire, stored = local, shared = r->wire - local;
	SC_PROBE(l2_segments, sid, lg, stored, shared);
	return 0;
}

#define SEG_HASH_STEP (64u << 10) /* bytes hashed into both digests at a time (stays in L1/L2) */

int l2_seg_plan(struct sc_arena *a, const struct sc_payload *p, struct sc_digest *d, struct l2_seg_plan *pl)
{
	struct shm_segtab *t = l2_segtab(a);
	uint64_t S = t->seg_bytes, np = 0;
	memset(pl, 0, sizeof(*pl));
	for (int s = 0; s < 2; s++)
		np += p->sec_len[s] / S + (p->sec_len[s] % S != 0);
	if (np > SHM_SEG_MAX_PIECES)
		return 1;
	pl->pc = calloc(np, sizeof(*pl->pc));
	pl->dg = calloc(np, sizeof(*pl->dg));
	if (!pl->pc || !pl->dg) {
		l2_seg_plan_free(pl);
		return -ENOMEM;
	}
	pl->np = (uint32_t)np;
	/* one pass over the bytes: each piece of SEG_HASH_STEP bytes feeds the segment's digest and
	 * then the payload's running digest while it is still in the core's cache (a whole segment
	 * is larger than L2: hashed twice in turn it was read from memory twice). Streaming XXH3-128
	 * equals the one-shot digest (unseeded, as sc_digest). */
	XXH3_state_t *hs = XXH3_createState(), *ss = XXH3_createState();
	if (!hs || !ss) {
		XXH3_freeState(hs);
		XXH3_freeState(ss);
		l2_seg_plan_free(pl);
		return -ENOMEM;
	}
	XXH3_128bits_reset(hs);
	uint32_t k = 0;
	for (uint32_t s = 0; s < 2; s++) {
		const uint8_t *src = p->sec[s];
		for (uint64_t at = 0; at < p->sec_len[s]; at += S, k++) {
			uint64_t len = p->sec_len[s] - at < S ? p->sec_len[s] - at : S;
			pl->pc[k].section = s;
			pl->pc[k].len = len;
			XXH3_128bits_reset(ss);
			for (uint64_t o = 0; o < len; o += SEG_HASH_STEP) {
				uint64_t n = len - o < SEG_HASH_STEP ? len - o : SEG_HASH_STEP;
				if (len == S)
					XXH3_128bits_update(ss, src + at + o, n);
				XXH3_128bits_update(hs, src + at + o, n);
			}
			if (len == S) {
				XXH128_hash_t h = XXH3_128bits_digest(ss);
				pl->dg[k][0] = h.low64;
				pl->dg[k][1] = h.high64;
			}
		}
	}
	XXH128_hash_t h = XXH3_128bits_digest(hs);
	XXH3_freeState(hs);
	XXH3_freeState(ss);
	*d = (struct sc_digest){ h.low64, h.high64 };
	return 0;
}

int l2_seg_copy_held(struct sc_arena *a, uint64_t lo, uint64_t hi, uint64_t len, void *dst)
{
	if (!a || !a->l2_seg_on || !len)
		return 0;
	struct shm_segtab *t = l2_segtab(a);
	if (len != t->seg_bytes)
		return 0; /* only whole segments are indexed */
	int rc = shm_seg_lock(t);
	if (rc)
		return rc;
	int64_t i = shm_seg_find_locked(t, lo, hi, len);
	const struct shm_seg_slot *s = i >= 0 && (uint64_t)i < t->nslots ? &t->slot[i] : NULL;
	/* the slot is shared memory: its range must lie in the heap */
	int ok = s && s->off >= t->heap_lo && s->off <= t->heap_hi && len <= t->heap_hi - s->off;
	if (ok)
		memcpy(dst, a->shm->base + s->off, len);
	shm_seg_unlock(t);
	return ok;
}

void l2_seg_plan_free(struct l2_seg_plan *pl)
{
	free(pl->pc);
	free(pl->dg);
	pl->pc = NULL;
	pl->dg = NULL;
}

int l2_seg_admit(struct sc_stage *st, struct sc_key key, uint32_t n, const int32_t *tokens, struct sc_digest d,
		 const struct sc_payload *p, uint32_t origin, struct l2_seg_plan *pl, uint64_t cost, int *why)
{
	int rc = -ESTALE;
	for (int attempt = 0; attempt < 2; attempt++) {
		rc = try_admit(st, key, n, tokens, d, p, origin, pl->pc, pl->dg, pl->np, cost, why);
		if (rc != -ESTALE)
			break;
	}
	return rc == -ESTALE ? 1 : rc; /* segments keep going under us: the caller stores it whole */
}

int l2_seg_index_fill(struct sc_arena *a, struct sc_key key, uint64_t off, uint64_t l0, uint64_t l1, uint64_t *rec_off,
		      uint64_t (**dg_out)[2], uint64_t *fp)
{
	struct shm_segtab *t = l2_segtab(a);
	uint64_t S = t->seg_bytes, len[2] = { l0, l1 }, np = 0;
	*rec_off = 0;
	*dg_out = NULL;
	*fp = 0;
	for (int s = 0; s < 2; s++)
		np += len[s] / S + (len[s] % S != 0);
	if (np > SHM_SEG_MAX_PIECES)
		return -E2BIG;
	uint64_t(*dg)[2] = calloc(np, sizeof(*dg)), rlen = shm_seg_rec_bytes((uint32_t)np), roff;
	if (!dg)
		return -ENOMEM;
	int why, rc = l2_alloc_for(a, rlen, shm_heap_footprint(rlen), key, 0, &roff, &why);
	if (rc) {
		free(dg);
		return rc;
	}
	struct shm_seg_rec *r = (struct shm_seg_rec *)(void *)(a->shm->base + roff);
	memset(r, 0, sizeof(*r));
	r->magic = SHM_SEG_REC_MAGIC;
	r->flags = SHM_SEG_CONTIG;
	r->npieces = (uint32_t)np;
	r->data = off;
	r->wire = r->local = l0 + l1;
	uint32_t k = 0;
	uint64_t at = off;
	for (uint32_t s = 0; s < 2; s++) {
		for (uint64_t o = 0; o < len[s]; o += S, k++) {
			uint64_t n = len[s] - o < S ? len[s] - o : S;
			r->p[k] = (struct shm_seg_piece){ .at = at, .len = n, .slot = SHM_SEG_NONE, .section = s, .local = 1 };
			if (n == S) {
				struct sc_digest h = sc_digest(a->shm->base + at, n);
				dg[k][0] = h.lo;
				dg[k][1] = h.hi;
			}
			at += n;
		}
	}
	*rec_off = roff;
	*dg_out = dg;
	*fp = shm_heap_footprint(rlen);
	return 0;
}

/* The validated record of a segmented entry and the check that its pieces make the wire. */
static const struct shm_seg_rec *rec_checked(struct sc_arena *a, uint64_t rec, uint64_t l0, uint64_t l1)
{
	if (!a->l2_seg_on)
		return NULL;
	struct shm_segtab *t = l2_segtab(a);
	const struct shm_seg_rec *r = shm_seg_rec_at(t, rec);
	if (!r || r->wire != l0 + l1)
		return NULL;
	uint64_t sum[2] = { 0, 0 };
	for (uint32_t i = 0; i < r->npieces; i++) {
		const struct shm_seg_piece *p = &r->p[i];
		if (p->section > 1 || p->at < t->heap_lo || p->at > t->heap_hi || p->len > t->heap_hi - p->at ||
		    (p->section == 0 && sum[1]))
			return NULL;
		sum[p->section] += p->len;
	}
	return sum[0] == l0 && sum[1] == l1 ? r : NULL;
}

int64_t l2_seg_copy(struct sc_arena *a, uint64_t rec, void *dst, uint64_t cap)
{
	struct shm_segtab *t = l2_segtab(a);
	const struct shm_seg_rec *r = a->l2_seg_on ? shm_seg_rec_at(t, rec) : NULL;
	if (!r)
		return -EBADMSG;
	if (r->wire > cap)
		return -ENOBUFS;
	uint64_t cur = 0;
	for (uint32_t i = 0; i < r->npieces; i++) {
		const struct shm_seg_piece *p = &r->p[i];
		if (p->at < t->heap_lo || p->at > t->heap_hi || p->len > t->heap_hi - p->at || p->len > r->wire - cur)
			return -EBADMSG;
		memcpy((uint8_t *)dst + cur, a->shm->base + p->at, p->len);
		cur += p->len;
	}
	return cur == r->wire ? (int64_t)cur : -EBADMSG;
}

uint64_t l2_seg_local(struct sc_arena *a, const struct shm_index_entry *e)
{
	uint64_t wire = e->sec_len[0] + e->sec_len[1];
	if (!(e->meta & SHM_META_SEG) || !a->l2_seg_on)
		return wire;
	struct shm_segtab *t = l2_segtab(a);
	const struct shm_seg_rec *r = shm_seg_rec_at(t, t->heap_lo + 64ull * e->seg_rec);
	return r ? r->local : wire;
}

int sc_lease_segments(const struct sc_lease *l, struct sc_segment *out, uint32_t max)
{
	if (!l || !l->arena_ || (max && !out))
		return -EINVAL;
	if (!l->segments) {
		uint32_t k = 0;
		for (uint32_t s = 0; s < 2; s++) {
			if (!l->sec_len[s])
				continue;
			if (k < max)
				out[k] = (struct sc_segment){ .ptr = l->sec[s], .len = l->sec_len[s], .section = s };
			k++;
		}
		return (int)k;
	}
	const struct shm_seg_rec *r = rec_checked(l->arena_, l->private_spare_[0], l->sec_len[0], l->sec_len[1]);
	if (!r || r->npieces != l->segments)
		return -EBADMSG;
	for (uint32_t i = 0; i < r->npieces && i < max; i++)
		out[i] = (struct sc_segment){ .ptr = l->arena_->shm->base + r->p[i].at, .len = r->p[i].len,
					      .section = r->p[i].section };
	return (int)r->npieces;
}

int64_t sc_lease_copy(const struct sc_lease *l, void *buf, uint64_t cap)
{
	if (!l || !l->arena_ || (!buf && cap))
		return -EINVAL;
	uint64_t wire = l->sec_len[0] + l->sec_len[1];
	if (wire > cap)
		return -ENOBUFS;
	if (!l->segments) {
		if (l->sec_len[0])
			memcpy(buf, l->sec[0], l->sec_len[0]);
		if (l->sec_len[1])
			memcpy((uint8_t *)buf + l->sec_len[0], l->sec[1], l->sec_len[1]);
		return (int64_t)wire;
	}
	if (!rec_checked(l->arena_, l->private_spare_[0], l->sec_len[0], l->sec_len[1]))
		return -EBADMSG;
	return l2_seg_copy(l->arena_, l->private_spare_[0], buf, cap);
}
