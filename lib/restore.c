/*
 * lib/restore.c — the restore path: L3 locate -> L2 lookup validated against the location ->
 * fill from L3 into an arena reservation -> promotion policy -> publish in place (origin FROM_L3).
 *
 * Locate goes through the arena's L3 location index (lib/l3/locindex.c): the tokens are hashed once
 * (the prefix hashes P of the stored lengths), the index is probed longest first, and the
 * winner's L2 key is derived from its P. When L2 holds the prefix (its stored token ids equal
 * the caller's, its digest and length equal the index entry's) nothing else is read: no system
 * call. The index entry's own token ids are compared only when its answer is used without that
 * L2 proof (a fill, a location mismatch). An object that vanished under a fill (ENOENT) drops its
 * index entries and L2 mirrors and the restore starts over once (then the directory decides).
 *
 * Ownership of the filled memory: the reservation (sc_l2_reserve) is private to this process
 * until sc_l2_publish consumes it; if this process dies first, the L2 tier's repair frees it. A
 * reservation is released only after its fill was reaped (sc_l3_fill returns only then), so no
 * read is ever in flight into freed memory. Single flight: the fill of one (stage, digest) is
 * claimed in the arena's claim table for the duration of fill + decision + publish.
 *
 * Where a fill lands. A fill the policy will promote (asked before the fill, without counting)
 * reserves arena memory, evicting for it; any other fill takes arena memory only if it is free,
 * else process memory, so that fills nobody keeps never evict entries others are using. Every
 * "promote" decision ends in exactly one recorded outcome (sc_promote_outcome): published in
 * place, published by copy (the fill was in process memory), or refused with its reason. The
 * promotion carries the compute cost the object records (or the stage's per-token cost).
 *
 * Deadlines (sc_restore_with). An L2 hit is served whatever the deadline. Before a fill, the fill
 * time is predicted (sc_l3_fill_estimate: the measured fixed cost and time per byte, the bytes
 * already queued on this thread's ring) and a fill that would end past the deadline, or take
 * longer than the caller's recompute estimate, is not started: -ETIME, counted as a DEADLINE
 * miss. The deadline is checked again just before the fill is submitted (schedule point
 * restore.deadline.checked), so a restore past its deadline never starts one. A fill that then
 * runs past it is abandoned: its reads cannot be recalled, so its context (request, location,
 * the reservation or private buffer they read into) goes to the ring (l3_fill_abandon), which
 * releases it after the last read completed; meanwhile it is linked to the arena handle, so that
 * closing the handle first leaves the reservation to the reaper (freed only after the kernel let
 * the handle's lock go: lib/io_pin.c). Nothing of it is verified, promoted or published.
 *
 * Misses. Every restore that returns no state is counted under one reason (lib/l2/miss.c):
 * nothing located (never stored, or a prefix dropped when its object was evicted or quarantined),
 * another stage's object (identity), quarantined, deadline (predicted, past, abandoned, waited),
 * busy (another process fills it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "l2/l2.h"
#include "l3/l3.h"
#include "../shm/fault.h"

#define WAIT_NS (60ull * 1000000000ull) /* SC_RESTORE_WAIT: longest wait for another filler */

/* A fill that may be abandoned: everything its reads and its request need, off the stack (see the
 * top of this file). */
struct fill_ctx {
	struct arena_orphan link;    /* first: the arena handle's list of abandoned fills */
	struct sc_l3_fill_req req;
	struct sc_location loc;
	struct sc_l2_resv resv;      /* the reservation it reads into, or */
	void *heap;                  /* the private buffer */
};

/* The ring finished the reads of an abandoned fill: release what they read into. */
static void orphan_done(void *p, int result)
{
	(void)result; /* never verified, never published: the bytes are dropped whatever they are */
	struct fill_ctx *c = p;
	if (c->link.arena) {
		if ((*c->link.pprev = c->link.next))
			c->link.next->pprev = c->link.pprev;
		sc_l2_reserve_release(&c->resv);
	}
	/* detached (the handle was closed): the reservation is the reaper's */
	free(c->heap);
	free(c);
}

enum { R_NONE = 0, R_LEASE = 1, R_RESV = 2, R_HEAP = 3 };

/* A scattered entry (segments, lib/l2/seg.c) has no contiguous sections to hand out: copy its wire
 * into private memory (sc_restore's contract is contiguous sections) and drop the lease. 0 or
 * -ENOMEM / -EBADMSG (the caller treats it as a miss). */
static int lease_gather(struct sc_restore *out)
{
	struct sc_lease *l = &out->lease_;
	uint64_t wire = l->sec_len[0] + l->sec_len[1];
	void *buf = malloc(wire ? wire : 1);
	if (!buf)
		return -ENOMEM;
	int64_t got = sc_lease_copy(l, buf, wire);
	if (got != (int64_t)wire) {
		free(buf);
		return got < 0 ? (int)got : -EBADMSG;
	}
	out->heap_ = buf;
	return 0;
}

static void from_lease(struct sc_restore *out)
{
	const struct sc_lease *l = &out->lease_;
	out->sec[0] = l->sec[0], out->sec[1] = l->sec[1];
	if (l->segments) {
		/* gathered by lease_gather: the sections are private copies, the lease goes */
		out->sec[0] = out->heap_;
		out->sec[1] = (const uint8_t *)out->heap_ + l->sec_len[0];
	}
	out->sec_len[0] = l->sec_len[0], out->sec_len[1] = l->sec_len[1];
	out->kind = l->kind;
	out->token_count = (uint32_t)l->token_count;
	out->digest = l->digest;
	out->has_kv_desc = l->has_kv_desc;
	if (l->has_kv_desc)
		out->kv_desc = l->kv_desc;
	out->state_ = R_LEASE;
	out->in_arena = 1;
	if (l->segments) {
		sc_lease_release(&out->lease_);
		out->state_ = R_HEAP;
		out->in_arena = 0;
	}
}

/* Serve a lease on an L2 entry that may restore this prefix; 0, or -ENOENT (dropped: unusable). */
static int lease_usable(struct sc_stage *st, uint32_t len, struct sc_restore *out)
{
	if (out->lease_.has_kv_desc &&
	    sc_kv_desc_validate_restore(&out->lease_.kv_desc, out->lease_.sec_len[0], len)) {
		/* a mirror that cannot restore this prefix: drop it and fill from L3 instead */
		struct sc_key key = out->lease_.key;
		sc_lease_release(&out->lease_);
		sc_l2_remove(st, key);
		return -ENOENT;
	}
	if (out->lease_.segments && lease_gather(out)) {
		sc_lease_release(&out->lease_);
		return -ENOENT;
	}
	from_lease(out);
	out->source = SC_RESTORE_FROM_L2;
	out->promote_why = -1;
	return 0;
}

/* An L2 hit, validated against the location: 0, or -ENOENT (miss, mismatch, unusable entry). */
static int try_l2(struct sc_stage *st, const char *ns, const int32_t *tokens, const struct sc_location *loc,
		  struct sc_restore *out)
{
	struct sc_location where = { .token_count = loc->token_count, .digest = loc->digest };
	int rc = sc_l2_get(st, ns, tokens, loc->token_count, &where, &out->lease_);
	if (rc)
		return rc == -EMFILE ? rc : -ENOENT;
	return lease_usable(st, loc->token_count, out);
}

/*
 * Locate and, when the index answered and L2 holds the prefix, serve it: 1 served (out leased),
 * 0 nothing stored, -EAGAIN go on with *@loc (filled), or a negative errno. *@bad: see
 * l3_locate_dir (the longest matching prefix's object failed verification).
 */
static int locate_and_try_l2(struct sc_stage *st, struct sc_l3 *l3, const char *ns, const int32_t *tokens,
			     uint32_t n, struct sc_location *loc, struct sc_restore *out, uint64_t t0, uint64_t *t1,
			     uint32_t *bad, uint32_t *gone)
{
	struct sc_arena *arena = st->arena;
	for (int attempt = 0; attempt < 2; attempt++) {
		struct l3ix_found f = { 0 };
		int rc = l3ix_locate(arena, l3, ns, tokens, n, attempt ? 0 : t0, &f, loc);
		*t1 = shm_now_ns();
		out->from_index = f.from_index;
		*bad = f.bad;
		*gone = (uint32_t)f.gone;
		if (rc <= 0)
			return rc;
		if (!f.from_index)
			return -EAGAIN;
		struct sc_location where = { .token_count = f.len, .digest = { f.snap.e.digest_lo, f.snap.e.digest_hi } };
		struct sc_key key = l2_key_of(st, f.pfx);
		uint64_t stale = 0;
		rc = l2_get_prehashed(st, key, tokens, f.len, &where, &out->lease_, &stale);
		if (rc == 0) {
			if (lease_usable(st, f.len, out) == 0)
				return 1;
			rc = l3ix_complete(arena, l3, &f, loc); /* the mirror was unusable: fill */
			if (rc != -ENOENT)
				return rc ? rc : -EAGAIN;
			continue;
		}
		if (rc == -EMFILE)
			return rc;
		/* not served from L2: the index's answer is used on its own, so its tokens must be ours */
		int eq = l3ix_entry_tokens_equal(arena, l3, &f, ns, tokens);
		if (eq != 1) {
			/* a collision (or a concurrent rewrite): the directory decides, without the index */
			rc = l3_locate_dir(l3, ns, tokens, n, loc, NULL, bad);
			return rc > 0 ? -EAGAIN : rc;
		}
		if (rc == -ESTALE) /* the durable copy changed: a stale mirror */
			(void)l2_remove_key(arena, key, stale, L2_REMOVE_MISMATCH);
		rc = l3ix_complete(arena, l3, &f, loc);
		if (rc == 0)
			return -EAGAIN;
		if (rc != -ENOENT)
			return rc;
		/* vanished: its index entries and mirrors are gone; look again */
	}
	int rc = l3_locate_dir(l3, ns, tokens, n, loc, NULL, bad);
	return rc > 0 ? -EAGAIN : rc;
}

/* Why a restore returned no state: counted (lib/l2/miss.c) and told to the caller. Returns @rc. */
static int missed(struct sc_stage *st, struct sc_restore *out, int rc, int reason, uint32_t detail)
{
	out->miss_reason = reason;
	out->miss_detail = detail;
	l2_count_restore_miss(st->arena, st->id, reason, detail);
	return rc;
}

/* The deadline a restore answers by: the caller's, or when recomputing would be done (0: none). */
static uint64_t deadline_of(const struct sc_restore_opts *o, uint64_t t0)
{
	uint64_t d = o->deadline_ns, r = o->recompute_ns ? sat_add(t0, o->recompute_ns) : 0;
	return !d ? r : !r ? d : d < r ? d : r;
}

static int restore(struct sc_stage *st, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		   const struct sc_restore_opts *opts, struct sc_restore *out)
{
	uint32_t flags = opts->flags;
	struct sc_arena *arena = st->arena;
	if (arena_is_damaged(arena))
		return -ENOTRECOVERABLE;
	uint64_t stage_id = sc_stage_id(st), t0 = shm_now_ns(), t1, t2, deadline = deadline_of(opts, t0);
	struct sc_location loc;
	int rc, vanished = 0, why_miss = -1;
	uint32_t bad = 0, gone = 0, detail = 0;
	struct fill_ctx *fc = NULL;
	l3_fill_poll(l3); /* fills abandoned earlier that finished: their memory goes back now */
again:
	rc = locate_and_try_l2(st, l3, ns, tokens, (uint32_t)n, &loc, out, t0, &t1, &bad, &gone);
	out->locate_ns = t1 - t0;
	if (rc == 0 && bad)
		return missed(st, out, -EBADMSG, SC_MISS_QUARANTINED, 0); /* the longest stored prefix failed
									   * verification (and was dropped) */
	if (rc == 1) {
		t2 = shm_now_ns();
		out->lookup_ns = t2 - t1;
		out->total_ns = t2 - t0;
		return (int)out->token_count;
	}
	if (rc == 0)
		return missed(st, out, -ENOENT, vanished ? SC_MISS_EVICTED_JANITOR : gone ? (int)gone - 1 : SC_MISS_NEVER_STORED,
			      0);
	if (rc != -EAGAIN)
		return rc;
	if (loc.has_kv_desc && sc_kv_desc_validate_restore(&loc.kv_desc, loc.sec_len[0], loc.token_count))
		return missed(st, out, -EBADMSG, SC_MISS_QUARANTINED, 1); /* durable but not a restore of this prefix */
	rc = try_l2(st, ns, tokens, &loc, out);
	t2 = shm_now_ns();
	out->lookup_ns = t2 - t1;
	if (rc != -ENOENT)
		goto done;

	/* not in L2: a fill. Would it beat the deadline (or recomputing)? */
	if (deadline) {
		uint64_t est;
		if (t2 >= deadline) {
			why_miss = SC_MISS_DEADLINE, detail = SC_DEADLINE_PAST, rc = -ETIME;
			goto done;
		}
		if (sc_l3_fill_estimate(l3, loc.payload_bytes, &est) == 0) {
			out->predicted_ns = est ? est : 1;
			if (est > deadline - t2) {
				why_miss = SC_MISS_DEADLINE, detail = SC_DEADLINE_PREDICTED, rc = -ETIME;
				goto done;
			}
		}
	}

	/* single flight: one filler per (stage, digest); the others wait for it and then look in L2
	 * again. If it did not promote, the next waiter to claim fills (a few rounds at most, then
	 * fill unclaimed rather than wait on ever more fills). */
	int claimed = 0;
	for (int round = 0;; round++) {
		rc = sc_fill_claim(arena, stage_id, loc.digest);
		if (rc == 0) {
			claimed = 1;
			break;
		}
		if (rc == -EAGAIN)
			break; /* the claim table is full: fill without single flight */
		if (rc != -EBUSY || !(flags & SC_RESTORE_WAIT)) {
			if (rc == -EBUSY)
				why_miss = SC_MISS_BUSY;
			goto done;
		}
		out->waited = 1;
		uint64_t now = shm_now_ns(), wait = WAIT_NS;
		if (deadline && (now >= deadline || deadline - now < wait))
			wait = now >= deadline ? 0 : deadline - now;
		rc = sc_fill_wait(arena, stage_id, loc.digest, (int64_t)wait);
		if (rc) {
			if (rc == -ETIMEDOUT && deadline && wait < WAIT_NS)
				why_miss = SC_MISS_DEADLINE, detail = SC_DEADLINE_WAITED, rc = -ETIME;
			else if (rc == -ETIMEDOUT)
				why_miss = SC_MISS_BUSY;
			goto done;
		}
		rc = try_l2(st, ns, tokens, &loc, out);
		if (rc != -ENOENT || round == 3)
			break;
	}
	if (rc != -ENOENT && rc != -EAGAIN && !claimed)
		goto done;

	/* room for an O_DIRECT read of the rounded-up tail, and behind it the descriptor and the
	 * token ids that publishing in place stores with the entry (lib/l2/place.c) */
	uint64_t room = (loc.payload_bytes + L3_DIO_ALIGN - 1) & ~(uint64_t)(L3_DIO_ALIGN - 1);
	uint64_t keep = l2_tokens_at(loc.payload_bytes, loc.has_kv_desc) + (uint64_t)loc.token_count * 4;
	void *dst;
	int predicted = promote_predict(arena, stage_id, loc.digest, loc.token_count, loc.payload_bytes) == 1;
	int resv_why = SC_L2_REFUSE_OTHER;
	struct sc_key key;
	int have_key = sc_l2_key(st, ns, tokens, loc.token_count, &key) == 0;
	/* with a deadline the request lives off the stack: it may outlive this call (abandoned) */
	struct fill_ctx local, *ctx = &local;
	memset(&local, 0, sizeof(local));
	if (deadline && !(ctx = fc = calloc(1, sizeof(*fc)))) {
		rc = -ENOMEM;
		goto unclaim;
	}
	ctx->loc = loc;
	rc = l2_reserve(st, room > keep ? room : keep, predicted ? 0 : L2_RESERVE_NO_EVICT, have_key ? &key : NULL,
			loc.cost_ns, &out->resv_, &resv_why);
	if (rc == 0) {
		dst = out->resv_.ptr;
		out->state_ = R_RESV;
		out->in_arena = 1;
	} else if (rc == -E2BIG || rc == -ENOSPC) {
		/* L2 cannot (or need not) hold it: a private lease in process memory, of no more than the
		 * object file really holds */
		if ((rc = l3_obj_backed(l3, &loc)))
			goto unclaim;
		if (!(out->heap_ = dst = aligned_alloc(L3_DIO_ALIGN, room))) {
			rc = -ENOMEM;
			goto unclaim;
		}
		out->state_ = R_HEAP;
		if (!predicted)
			resv_why = -1; /* no room was asked for: a "promote" would admit by copy */
	} else {
		goto unclaim;
	}
	/* the object must be this stage's: another model's or state's bytes under the same namespace
	 * and tokens are a miss (-EKEYREJECTED, counted), never served */
	ctx->req = (struct sc_l3_fill_req){ .loc = &ctx->loc, .dst = dst, .dst_bytes = room, .stage_id = stage_id,
					    .identity = st->ident };
	/* located, not yet read: the object may vanish in between (ENOENT: a miss, handled below) */
	shm_sched_point("restore.fill");
	if (deadline) {
		/* the last look before starting a fill: one past its deadline is never started */
		shm_sched_point("restore.deadline.checked");
		if (shm_now_ns() >= deadline) {
			why_miss = SC_MISS_DEADLINE, detail = SC_DEADLINE_PAST, rc = -ETIME;
			goto unclaim;
		}
	}
	rc = l3_fill_from_until(l3, &ctx->req, arena, deadline);
	out->fill_ns = shm_now_ns() - t2;
	out->direct = ctx->req.direct;
	if (rc == -EINPROGRESS) {
		/* past the deadline with reads in flight: hand the fill and its memory to the ring */
		if (out->state_ == R_RESV) {
			fc->resv = out->resv_;
			memset(&out->resv_, 0, sizeof(out->resv_));
		} else {
			fc->heap = out->heap_;
			out->heap_ = NULL;
		}
		out->state_ = R_NONE;
		out->in_arena = 0;
		fc->link.arena = arena;
		fc->link.pprev = &arena->orphans;
		if ((fc->link.next = arena->orphans))
			fc->link.next->pprev = &fc->link.next;
		arena->orphans = &fc->link;
		shm_sched_point("restore.abandoned"); /* its reads may still land: nothing may reuse the room */
		l3_fill_abandon(l3, &fc->req, orphan_done, fc);
		fc = NULL;
		why_miss = SC_MISS_DEADLINE, detail = SC_DEADLINE_ABANDONED, rc = -ETIME;
		goto unclaim;
	}
	if (rc == -ETIME) {
		why_miss = SC_MISS_DEADLINE, detail = SC_DEADLINE_PAST; /* the ring stayed full: never submitted */
		goto unclaim;
	}
	if (rc) {
		if (rc == -EBADMSG) {
			/* quarantined: no mirror of it may be served either, and the prefix entry goes, so
			 * that the failure is reported once and the next restore finds what else is stored */
			l2_invalidate_why(arena, loc.digest, SC_MISS_QUARANTINED);
			l3_drop_prefix(l3, loc.prefix.lo, loc.prefix.hi, loc.digest.lo, loc.digest.hi);
			why_miss = SC_MISS_QUARANTINED;
		}
		sc_restore_release(out);
		if (rc == -EKEYREJECTED) {
			rc = -ENOENT; /* stored, but for another stage */
			why_miss = SC_MISS_IDENTITY;
		} else if (rc == -ENOENT && !vanished) {
			/* the object vanished under the fill (evicted by a process not attached, another
			 * host's janitor or quarantine), or a file it read bad was replaced meanwhile: a miss of this location, never an error; look
			 * again, and the directory decides. An object this fill found corrupt is reported
			 * (-EBADMSG): it is quarantined and its prefix entry dropped, so the next restore
			 * finds whatever shorter prefix is stored. */
			l3ix_vanished(arena, loc.digest);
			if (claimed)
				sc_fill_release(arena, stage_id, loc.digest);
			vanished = 1;
			free(fc);
			fc = NULL;
			goto again;
		} else if (rc == -ENOENT) {
			why_miss = SC_MISS_EVICTED_JANITOR; /* vanished twice */
		}
		goto unclaim;
	}
	out->sec[0] = dst;
	out->sec[1] = (const uint8_t *)dst + loc.sec_len[0];
	out->sec_len[0] = loc.sec_len[0], out->sec_len[1] = loc.sec_len[1];
	out->kind = loc.kind;
	out->token_count = loc.token_count;
	out->digest = loc.digest;
	out->has_kv_desc = loc.has_kv_desc;
	if (loc.has_kv_desc)
		out->kv_desc = loc.kv_desc;
	out->source = SC_RESTORE_FROM_L3;

	/* the compute cost the object records (the fill read its header; else the location's) */
	uint64_t cost = ctx->req.cost_ns ? ctx->req.cost_ns : loc.cost_ns;
	int why = SC_PROMOTE_WHY_FIRST_HIT;
	int yes = sc_promote_consider(arena, stage_id, loc.digest, loc.token_count, loc.payload_bytes, &why);
	out->promote_why = why;
	if (yes == 0 && have_key) /* a later L2 miss of it says so */
		l2_depart_note(arena, l2_key_fp(key.lo, key.hi), SC_MISS_NOT_PROMOTED, why);
	if (yes == 1) {
		int refused = -1;
		if (out->state_ == R_RESV) {
			struct sc_lease lease;
			int prc = l2_publish(st, ns, tokens, loc.token_count, loc.digest, &out->resv_, loc.kind,
					     loc.sec_len[0], loc.sec_len[1], loc.has_kv_desc ? &loc.kv_desc : NULL,
					     SC_ORIGIN_FROM_L3, &lease, cost, &refused);
			if (prc == 0) {
				out->lease_ = lease;
				from_lease(out);
				refused = -1;
			}
		} else if (resv_why >= 0) {
			refused = resv_why; /* room was asked for before the fill and refused (and noted) */
		} else {
			/* filled in process memory because no promotion was expected: admit a copy */
			struct sc_payload p = { .kind = loc.kind, .sec = { out->sec[0], out->sec[1] },
						.sec_len = { loc.sec_len[0], loc.sec_len[1] },
						.kv_desc = loc.has_kv_desc ? &loc.kv_desc : NULL };
			if (l2_admit(st, ns, tokens, loc.token_count, loc.digest, &p, SC_ORIGIN_FROM_L3, cost, &refused) == 0)
				refused = -1;
		}
		shm_sched_point("restore.promote.outcome");
		out->promoted = refused < 0;
		(void)sc_promote_outcome(arena, stage_id, loc.digest, loc.payload_bytes, refused);
	}
	rc = 0;
unclaim:
	if (claimed)
		sc_fill_release(arena, stage_id, loc.digest);
done:
	free(fc); /* not abandoned: the fill completed (or never started) */
	out->total_ns = shm_now_ns() - t0;
	if (rc) {
		sc_restore_release(out);
		return why_miss >= 0 ? missed(st, out, rc, why_miss, detail) : rc;
	}
	return (int)out->token_count;
}

int sc_restore(struct sc_stage *st, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
	       uint32_t flags, struct sc_restore *out)
{
	struct sc_restore_opts o = { .flags = flags };
	return sc_restore_with(st, l3, ns, tokens, n, &o, out);
}

int sc_restore_with(struct sc_stage *st, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		    const struct sc_restore_opts *opts, struct sc_restore *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->miss_reason = -1;
	struct sc_restore_opts none = { 0 };
	if (!opts)
		opts = &none;
	int reserved = opts->reserved0 != 0;
	for (size_t i = 0; i < sizeof(opts->reserved) / sizeof(opts->reserved[0]); i++)
		reserved |= opts->reserved[i] != 0;
	if (!st || !l3 || !tokens || !n || (opts->flags & ~SC_RESTORE_MASK) || reserved ||
	    (ns && strlen(ns) > SC_L3_STR_MAX))
		return -EINVAL;
	return restore(st, l3, ns, tokens, n, opts, out);
}

uint64_t sc_clock_ns(void)
{
	return shm_now_ns();
}

void sc_restore_release(struct sc_restore *r)
{
	if (!r)
		return;
	switch (r->state_) {
	case R_LEASE:
		sc_lease_release(&r->lease_);
		break;
	case R_RESV:
		sc_l2_reserve_release(&r->resv_);
		break;
	case R_HEAP:
		free(r->heap_);
		break;
	}
	r->heap_ = NULL;
	r->state_ = R_NONE;
	r->sec[0] = r->sec[1] = NULL;
}
