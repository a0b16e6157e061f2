/*
 * lib/l2/admit.c — the L2 write path: admit (copy in), reserve / publish (fill in place).
 *
 * Admission order (each refusal counted in admission_rejects and by reason, enum sc_l2_refusal):
 * arguments (-EINVAL: no tokens, unknown origin, NULL sections; INVALID), digest (-EBADMSG), empty
 * (-EINVAL), sections/descriptor (-EINVAL), heap and budget (-E2BIG, refused_bytes). An arena fsck
 * declared unrepairable refuses every admission first (-ENOTRECOVERABLE, not counted).
 * Then the benefit rules (lib/l2/evict.c): a payload whose compute cost is below what copying it
 * out takes is refused (LOW_BENEFIT), and so, when room must be made, is one worth less than 1/16
 * of what the cache evicts (the doorkeeper). Then room is made (lib/l2/evict.c: S3-FIFO weighted by
 * benefit for the budget, eviction by address when the heap is fragmented; -ENOSPC with its
 * reason when it cannot be made), the payload is copied into a private block (tag: our owner
 * token), and the block is committed (lib/l2/place.c). A refusal after the key is known is noted
 * in the departure table (lib/l2/miss.c), so that a later miss of the key says why.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "evict.h"
#include "miss.h"
#include "place.h"
#include "seg.h"
#include "stage.h"
#include "../probes.h"
#include "../xxh.h"
#include "../../shm/fault.h"
#include "../../shm/heap.h"

#define alloc_len l2_alloc_len
#define desc_at l2_desc_at

const char *sc_l2_refusal_name(int reason)
{
	static const char *const names[SC_L2_REFUSE_REASONS] = {
		[SC_L2_REFUSE_DIGEST] = "digest",       [SC_L2_REFUSE_INVALID] = "invalid",
		[SC_L2_REFUSE_TOO_LARGE] = "too_large", [SC_L2_REFUSE_OVER_BUDGET] = "over_budget",
		[SC_L2_REFUSE_LEASED] = "leased",       [SC_L2_REFUSE_NO_ROOM] = "no_room",
		[SC_L2_REFUSE_SCAN_LIMIT] = "scan_limit", [SC_L2_REFUSE_OTHER] = "other",
		[SC_L2_REFUSE_LOW_BENEFIT] = "low_benefit",
	};
	return reason >= 0 && reason < SC_L2_REFUSE_REASONS ? names[reason] : "?";
}

/* The cost an admission charges: the caller's (clamped), else the stage's per-token cost x @n. */
static uint64_t cost_for(const struct sc_stage *st, uint32_t n, uint64_t cost_ns)
{
	return l2_cost_clamp(cost_ns ? cost_ns : sat_mul(l2_token_cost(st), n));
}

/* A refusal of a known key: noted (a later miss of the key says why), then counted as any. */
static int refuse_key(struct sc_stage *st, struct sc_key key, uint64_t bytes, int rc, int reason)
{
	l2_depart_note(st->arena, l2_key_fp(key.lo, key.hi), SC_MISS_REFUSED, reason);
	return l2_refuse(st->arena, st->id, bytes, rc, reason);
}

/* ---- admission checks ---- */

static int reject(struct sc_stage *st, uint64_t bytes, int rc, int reason, int *why)
{
	if (why)
		*why = reason;
	return l2_refuse(st->arena, st->id, bytes, rc, reason);
}

/* Checks 2..4 (empty, consistency, heap and budget) without counting: 0, or -errno with *reason. */
static int shape_of(struct sc_stage *st, uint32_t kind, uint64_t l0, uint64_t l1, const struct sc_kv_desc *desc,
		    uint64_t ntok, uint64_t packed, uint64_t *fp, int *reason)
{
	uint64_t wire = l0 + l1;
	*reason = SC_L2_REFUSE_INVALID;
	if (wire == 0 || l0 > UINT64_MAX / 4 || l1 > UINT64_MAX / 4)
		return -EINVAL;
	if (kind == SC_PAYLOAD_FULL_STATE || kind == SC_PAYLOAD_RECURRENT_ONLY) {
		if (l1 || desc)
			return -EINVAL;
	} else if (kind == SC_PAYLOAD_KV_RECURRENT) {
		if ((l0 && !desc) || (desc && sc_kv_desc_validate(desc, l0)))
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	*fp = shm_heap_footprint(l2_alloc_len_tok(wire, desc != NULL, ntok) | packed);
	*reason = SC_L2_REFUSE_TOO_LARGE;
	if (*fp > l2_heap_capacity(st->arena))
		return -E2BIG;
	*reason = SC_L2_REFUSE_OVER_BUDGET;
	if (*fp > l2_budget(st->arena))
		return -E2BIG;
	return 0;
}

/* The opening admit and publish share: *@why defaults to SC_L2_REFUSE_OTHER (when @why is NULL,
 * into @spare); 0, -EINVAL (no stage), -EBADMSG (the file was truncated under the mapping) or
 * -ENOTRECOVERABLE (the arena is declared damaged). */
static int l2_enter(struct sc_stage *st, int **why, int *spare)
{
	if (!*why)
		*why = spare;
	**why = SC_L2_REFUSE_OTHER;
	if (!st)
		return -EINVAL;
	return arena_usable(st->arena, 1);
}

int l2_admit(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_digest expected,
	     const struct sc_payload *p, uint32_t origin, uint64_t cost_ns, int *why)
{
	int spare, rc = l2_enter(st, &why, &spare);
	if (rc)
		return rc;
	struct sc_arena *a = st->arena;
	/* every refusal with a stage to count it against is an admission reject (the header says so) */
	if (!p || !n || !tokens || origin > SC_ORIGIN_FROM_L3)
		return reject(st, p ? p->sec_len[0] + p->sec_len[1] : 0, -EINVAL, SC_L2_REFUSE_INVALID, why);
	uint64_t l0 = p->sec_len[0], l1 = p->sec_len[1];
	if ((l0 && !p->sec[0]) || (l1 && !p->sec[1]))
		return reject(st, l0 + l1, -EINVAL, SC_L2_REFUSE_INVALID, why);
	int has_desc = p->kv_desc != NULL;
	/* a copied-in entry is never an O_DIRECT target: packed (no page rounding, no alignment gap) */
	uint64_t fp, off, wire = l0 + l1, ntok = l2_verify_tokens(a) ? n : 0,
			  len = l2_alloc_len_tok(wire, has_desc, ntok) | SHM_HEAP_PACKED;
	struct sc_key key;
	struct sc_digest d;
	uint8_t *dst;
	int seg = a->l2_seg_on && (l0 > l2_segtab(a)->seg_bytes || l1 > l2_segtab(a)->seg_bytes);
	/* the key is computed first, so that the index's, the ghost's and the departures' lines
	 * for it load while the digest runs; a bad key is still refused after a bad digest */
	int krc = sc_l2_key(st, ns, tokens, n, &key);
	if (!krc) {
		shm_index_prefetch(l2_ix(a), key.lo, 0);
		shm_evq_prefetch(l2_q(a), l2_key_fp(key.lo, key.hi));
	}
	/* 1. the digest over the wire (a segmented arena digests the segments in the same pass) */
	struct l2_seg_plan plan = { 0 };
	if (seg && (seg = l2_seg_plan(a, p, &d, &plan)) < 0)
		return seg;
	seg = seg == 0 && plan.pc;
	if (!seg)
		d = sc_digest_sections(p->sec[0], l0, p->sec[1], l1);
	if (!sc_digest_equal(d, expected)) {
		l2_seg_plan_free(&plan);
		return reject(st, wire, -EBADMSG, SC_L2_REFUSE_DIGEST, why);
	}
	/* the key is known from here on, so that a refusal is noted for it (a later miss says why) */
	int reason;
	if ((rc = krc))
		rc = reject(st, wire, rc, SC_L2_REFUSE_INVALID, why);
	else if ((rc = shape_of(st, p->kind, l0, l1, p->kv_desc, ntok, SHM_HEAP_PACKED, &fp, &reason)))
		rc = refuse_key(st, key, wire, rc, *why = reason);
	uint64_t cost = cost_for(st, n, cost_ns);
	if (!rc && !l2_net_benefit(cost, wire)) {
		/* a hit would copy more than recomputing costs: no benefit in keeping it */
		*why = SC_L2_REFUSE_LOW_BENEFIT;
		rc = refuse_key(st, key, wire, -ENOSPC, *why);
	}
	if (rc) {
		l2_seg_plan_free(&plan);
		return rc;
	}
	if (seg) {
		rc = l2_seg_admit(st, key, n, tokens, d, p, origin, &plan, cost, why);
		l2_seg_plan_free(&plan);
		if (rc <= 0)
			return rc ? refuse_key(st, key, wire, rc, *why) : 0;
	}
	shm_index_prefetch(l2_ix(a), key.lo, 1); /* the chain's head, read by the commit */
	if ((rc = l2_alloc(a, len, fp, &key, cost, 0, &off, why)))
		return refuse_key(st, key, wire, rc, *why);
	dst = a->shm->base + off;
	if (l0)
		memcpy(dst, p->sec[0], l0);
	if (l1)
		memcpy(dst + l0, p->sec[1], l1);
	if (has_desc)
		memcpy(dst + desc_at(wire), p->kv_desc, sizeof(*p->kv_desc));
	if (ntok)
		memcpy(dst + l2_tokens_at(wire, has_desc), tokens, ntok * 4);
	shm_fault_point("l2.admit.copied");
	rc = l2_commit(st, key, n, d, off, p->kind, l0, l1, has_desc, ntok != 0, fp, origin, NULL, why, 0, NULL, cost);
	if (rc) {
		(void)shm_heap_free(a->shm, off);
		return refuse_key(st, key, wire, rc, *why);
	}
	return 0;
}

/* The stage handle remembers why its last admission, reservation or publish did not publish. */
static int noted(struct sc_stage *st, int rc, int why)
{
	if (st)
		st->last_refusal = rc && rc != -ENOTRECOVERABLE ? why : -1;
	return rc;
}

int sc_l2_admit(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_digest expected,
		const struct sc_payload *p, uint32_t origin)
{
	int why = SC_L2_REFUSE_OTHER, rc = l2_admit(st, ns, tokens, n, expected, p, origin, 0, &why);
	return noted(st, rc, why);
}

int sc_l2_admit_cost(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_digest expected,
		     const struct sc_payload *p, uint32_t origin, uint64_t cost_ns)
{
	int why = SC_L2_REFUSE_OTHER, rc = l2_admit(st, ns, tokens, n, expected, p, origin, cost_ns, &why);
	return noted(st, rc, why);
}

int sc_l2_last_refusal(const struct sc_stage *st)
{
	return st ? st->last_refusal : -1;
}

/* ---- reservations (fills) ---- */

int l2_reserve(struct sc_stage *st, uint64_t bytes, uint32_t flags, const struct sc_key *key, uint64_t cost,
	       struct sc_l2_resv *r, int *why)
{
	int dummy;
	if (!why)
		why = &dummy;
	*why = SC_L2_REFUSE_OTHER;
	if (!r)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	if (!st || !bytes)
		return -EINVAL; /* any larger size saturates in alloc_len: -E2BIG below, as documented */
	struct sc_arena *a = st->arena;
	int rc = arena_usable(a, 1);
	if (rc)
		return rc;
	uint64_t len = alloc_len(bytes, 1), fp = shm_heap_footprint(len), off;
	int counted = !(flags & L2_RESERVE_NO_EVICT); /* a free-room-only try is no admission */
	uint64_t cap = l2_heap_capacity(a);
	if (fp > l2_budget(a)) { /* (the budget is at most the heap's capacity) */
		*why = fp <= cap ? SC_L2_REFUSE_OVER_BUDGET : SC_L2_REFUSE_TOO_LARGE;
		return counted ? l2_refuse(a, st->id, bytes, -E2BIG, *why) : -E2BIG;
	}
	if ((rc = l2_alloc(a, len, fp, key, cost, flags, &off, why))) {
		if (counted && key)
			return refuse_key(st, *key, bytes, rc, *why);
		return counted ? l2_refuse(a, st->id, bytes, rc, *why) : rc;
	}
	r->ptr = a->shm->base + off;
	r->bytes = bytes;
	r->arena_ = a;
	r->off_ = off;
	r->asked_ = len;
	return 0;
}

int sc_l2_reserve(struct sc_stage *st, uint64_t bytes, struct sc_l2_resv *r)
{
	int why = SC_L2_REFUSE_OTHER, rc = l2_reserve(st, bytes, 0, NULL, 0, r, &why);
	return noted(st, rc, why);
}

void sc_l2_reserve_release(struct sc_l2_resv *r)
{
	if (!r || !r->arena_)
		return;
	(void)shm_heap_free(r->arena_->shm, r->off_);
	memset(r, 0, sizeof(*r));
}

int l2_publish(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_digest expected,
	       struct sc_l2_resv *r, uint32_t kind, uint64_t kv_len, uint64_t rec_len, const struct sc_kv_desc *desc,
	       uint32_t origin, struct sc_lease *lease, uint64_t cost_ns, int *why)
{
	int spare, rc = l2_enter(st, &why, &spare);
	if (rc)
		return rc;
	struct sc_arena *a = st->arena;
	if (!r || !r->arena_ || r->arena_ != a || !n || !tokens || origin > SC_ORIGIN_FROM_L3 ||
	    kv_len > r->bytes || rec_len > r->bytes - kv_len)
		return reject(st, r ? kv_len + rec_len : 0, -EINVAL, SC_L2_REFUSE_INVALID, why);
	struct sc_digest d = sc_digest(r->ptr, kv_len + rec_len);
	if (!sc_digest_equal(d, expected))
		return reject(st, kv_len + rec_len, -EBADMSG, SC_L2_REFUSE_DIGEST, why);
	uint64_t fp, ntok = l2_verify_tokens(a) ? n : 0, wire = kv_len + rec_len;
	struct sc_key key;
	int reason;
	if ((rc = sc_l2_key(st, ns, tokens, n, &key)))
		return reject(st, kv_len + rec_len, rc, SC_L2_REFUSE_INVALID, why);
	if ((rc = shape_of(st, kind, kv_len, rec_len, desc, ntok, 0, &fp, &reason)))
		return refuse_key(st, key, wire, rc, *why = reason);
	uint64_t cost = cost_for(st, n, cost_ns);
	if (!l2_net_benefit(cost, wire)) {
		*why = SC_L2_REFUSE_LOW_BENEFIT;
		return refuse_key(st, key, wire, -ENOSPC, *why);
	}
	uint64_t need = l2_alloc_len_tok(wire, desc != NULL, ntok), off = r->off_, asked = r->asked_;
	uint8_t *p = r->ptr;
	if (need > asked) {
		/* no room for the token ids behind the payload: move it into a block that has it (a
		 * copy; sc_restore reserves the room so that its fills publish in place) */
		if ((rc = l2_alloc(a, need, fp, &key, cost, 0, &off, why)))
			return refuse_key(st, key, wire, rc, *why);
		p = a->shm->base + off;
		memcpy(p, r->ptr, wire);
		asked = need;
	}
	if (desc)
		memcpy(p + desc_at(wire), desc, sizeof(*desc));
	if (ntok)
		memcpy(p + l2_tokens_at(wire, desc != NULL), tokens, ntok * 4);
	/* a segmented arena indexes the segments of a large fill (contiguous: read as it is) */
	uint64_t seg_rec = 0, seg_fp = 0;
	uint64_t(*seg_dg)[2] = NULL;
	if (a->l2_seg_on && (kv_len > l2_segtab(a)->seg_bytes || rec_len > l2_segtab(a)->seg_bytes))
		(void)l2_seg_index_fill(a, key, off, kv_len, rec_len, &seg_rec, &seg_dg, &seg_fp);
	/* charge what the block really costs */
	rc = l2_commit(st, key, n, d, off, kind, kv_len, rec_len, desc != NULL, ntok != 0,
		       shm_heap_footprint(asked) + seg_fp, origin, lease, why, seg_rec, (const uint64_t(*)[2])seg_dg, cost);
	free(seg_dg);
	if (rc) {
		if (seg_rec)
			(void)shm_heap_free(a->shm, seg_rec);
		if (off != r->off_)
			(void)shm_heap_free(a->shm, off);
		return refuse_key(st, key, wire, rc, rc == -EMFILE ? SC_L2_REFUSE_OTHER : *why);
	}
	if (off != r->off_)
		(void)shm_heap_free(a->shm, r->off_);
	memset(r, 0, sizeof(*r));
	return 0;
}

int sc_l2_publish(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_digest expected,
		  struct sc_l2_resv *r, uint32_t kind, uint64_t kv_len, uint64_t rec_len, const struct sc_kv_desc *desc,
		  uint32_t origin, struct sc_lease *lease)
{
	int why = SC_L2_REFUSE_OTHER;
	int rc = l2_publish(st, ns, tokens, n, expected, r, kind, kv_len, rec_len, desc, origin, lease, 0, &why);
	return noted(st, rc, why);
}

int sc_l2_publish_cost(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n,
		       struct sc_digest expected, struct sc_l2_resv *r, uint32_t kind, uint64_t kv_len, uint64_t rec_len,
		       const struct sc_kv_desc *desc, uint32_t origin, struct sc_lease *lease, uint64_t cost_ns)
{
	int why = SC_L2_REFUSE_OTHER;
	int rc = l2_publish(st, ns, tokens, n, expected, r, kind, kv_len, rec_len, desc, origin, lease, cost_ns, &why);
	return noted(st, rc, why);
}
