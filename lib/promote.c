/*
 * lib/promote.c — the promotion policy (which L3 fills are published in L2) and single-flight fill
 * claims, over the shared observation table (shm/obs.c, whose mutex guards everything here).
 *
 * The rules, exactly (one observation per (stage, payload digest)):
 *  - an observation expires SC_PROMOTE_WINDOW_NS after it was first seen (not last seen);
 *  - consider: terminal after a published promotion -> yes (returning: fills are asked for after
 *    L2 missed, so the entry left L2 since; it earned its place once, like a ghost hit of the L2
 *    policy). Other terminal -> no. Count the hit. payload > 64 MiB -> terminal, no (exactly 64 MiB is
 *    fine). Otherwise yes when token_count >= 4096 (first fill) or this is at least the 2nd hit;
 *  - a "yes" stays non-terminal until its outcome is known: sc_promote_outcome records it
 *    (published, or refused and why) and makes it terminal unless the refusal was for want of
 *    room (leased, no room, scan limit, other) or for low benefit (which depends on what the cache
 *    holds then), which the next fill retries; sc_promote_attempted
 *    makes it terminal without recording anything;
 *  - at most min(capacity, 4096) observations: a new one evicts the oldest by first sight, ties by
 *    digest (as printed: high 64 bits, then low), then stage.
 * Expired observations are dropped lazily: on lookup, and all at once before an eviction (so a
 * full table first loses its expired entries, as if they had been dropped when they expired).
 */
#include <errno.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "probes.h"
#include "../shm/fault.h"
#include "../shm/obs.h"
#include "../shm/readers.h"

#ifdef SC_TEST_HOOKS
#include "stagecache_test.h"

static uint64_t now_ns(struct sc_arena *arena)
{
	if (arena->promote_now)
		return arena->promote_now(arena->promote_now_ctx);
	return shm_now_ns();
}

void sc_promote_set_clock(struct sc_arena *arena, uint64_t (*fn)(void *ctx), void *ctx)
{
	if (!arena)
		return;
	arena->promote_now = fn;
	arena->promote_now_ctx = fn ? ctx : NULL;
}
#else
static uint64_t now_ns(struct sc_arena *arena)
{
	(void)arena;
	return shm_now_ns();
}
#endif

static int lock_table(struct sc_arena *arena, struct shm_obs_hdr **out)
{
	if (!arena)
		return -EINVAL;
	struct shm_obs_hdr *h = shm_obs_table(arena->shm);
	if (!h)
		return -EBADMSG;
	int rc = shm_obs_lock(arena->shm, h);
	if (rc)
		return rc;
	shm_sched_point("obs.locked");
	/* count is written under the lock by every process: a hostile value must not drive loops */
	if (h->count > h->slots)
		h->count = h->slots;
	*out = h;
	return 0;
}

static int expired(const struct shm_obs_entry *e, uint64_t now)
{
	return now > e->first_seen_ns && now - e->first_seen_ns > SC_PROMOTE_WINDOW_NS;
}

/* Is a older than b (first sight, then digest as printed, then stage)? */
static int older(const struct shm_obs_entry *a, const struct shm_obs_entry *b)
{
	if (a->first_seen_ns != b->first_seen_ns)
		return a->first_seen_ns < b->first_seen_ns;
	if (a->digest_hi != b->digest_hi)
		return a->digest_hi < b->digest_hi;
	if (a->digest_lo != b->digest_lo)
		return a->digest_lo < b->digest_lo;
	return a->stage_id < b->stage_id;
}

/* Make room for one more observation: drop every expired one, then, if still full, the oldest.
 * One bounded pass per step over the slots. */
static void make_room_locked(struct shm_obs_hdr *h, uint32_t max, uint64_t now)
{
	struct shm_obs_entry *t = shm_obs_entries(h);
	for (uint32_t i = 0; i < h->slots;) {
		/* removal shifts a later entry into slot i: look at i again */
		if ((t[i].flags & SHM_OBS_USED) && expired(&t[i], now)) {
			shm_obs_remove_locked(h, &t[i]);
			h->expired++;
			continue;
		}
		i++;
	}
	while (h->count >= max) {
		struct shm_obs_entry *oldest = NULL;
		for (uint32_t i = 0; i < h->slots; i++)
			if ((t[i].flags & SHM_OBS_USED) && (!oldest || older(&t[i], oldest)))
				oldest = &t[i];
		if (!oldest) {
			h->count = 0; /* count disagreed with the slots (hostile or repaired table) */
			break;
		}
		shm_obs_remove_locked(h, oldest);
		h->evicted++;
	}
}

int sc_promote_consider(struct sc_arena *arena, uint64_t stage_id, struct sc_digest d, uint64_t token_count,
			uint64_t payload_bytes, int *why_out)
{
	struct shm_obs_hdr *h;
	int rc = lock_table(arena, &h);
	if (rc)
		return rc;
	uint64_t now = now_ns(arena);
	uint32_t max = h->capacity < SC_PROMOTE_MAX_OBSERVATIONS ? h->capacity : SC_PROMOTE_MAX_OBSERVATIONS;
	h->considered++;
	struct shm_obs_entry *e = shm_obs_find_locked(h, stage_id, d.lo, d.hi);
	if (e && expired(e, now)) {
		shm_obs_remove_locked(h, e);
		h->expired++;
		e = NULL;
	}
	if (!e) {
		if (h->count >= max)
			make_room_locked(h, max, now);
		e = shm_obs_insert_locked(h, stage_id, d.lo, d.hi);
		if (!e) {
			shm_obs_unlock(arena->shm, h);
			return -EBADMSG; /* no free slot although count < max: the table is corrupted */
		}
		e->first_seen_ns = now;
	}
	int yes = 0, why;
	if ((e->flags & SHM_OBS_RETURNING) == SHM_OBS_RETURNING) {
		/* published before, evicted (or removed) since, and filled again: it comes back */
		e->flags &= ~SHM_OBS_RETURNING;
		if (e->hits < UINT32_MAX)
			e->hits++;
		yes = 1, why = SC_PROMOTE_WHY_RETURNING;
	} else if (e->flags & SHM_OBS_TERMINAL) {
		why = SC_PROMOTE_WHY_TERMINAL;
	} else {
		if (e->hits < UINT32_MAX)
			e->hits++;
		if (payload_bytes > SC_PROMOTE_MAX_BYTES) {
			e->flags |= SHM_OBS_TERMINAL;
			why = SC_PROMOTE_WHY_OVERSIZE;
		} else if (token_count >= SC_PROMOTE_RESTART_TOKENS) {
			yes = 1, why = SC_PROMOTE_WHY_LONG_PREFIX;
		} else if (e->hits >= 2) {
			yes = 1, why = SC_PROMOTE_WHY_SECOND_HIT;
		} else {
			why = SC_PROMOTE_WHY_FIRST_HIT;
		}
	}
	if (yes)
		h->promoted++;
	shm_obs_unlock(arena->shm, h);
	uint64_t a = stage_id, lo = d.lo, hi = d.hi, tk = token_count, by = payload_bytes;
	int64_t dec = yes, wy = why;
	SC_PROBE(promote_decision, a, lo, hi, tk, by, dec, wy);
	if (why_out)
		*why_out = why;
	return yes;
}

int promote_predict(struct sc_arena *arena, uint64_t stage_id, struct sc_digest d, uint64_t token_count,
		    uint64_t payload_bytes)
{
	struct shm_obs_hdr *h;
	int rc = lock_table(arena, &h);
	if (rc)
		return rc;
	const struct shm_obs_entry *e = shm_obs_find_locked(h, stage_id, d.lo, d.hi);
	uint32_t hits = 1, returning = 0;
	if (e && !expired(e, now_ns(arena))) {
		returning = (e->flags & SHM_OBS_RETURNING) == SHM_OBS_RETURNING;
		hits = e->flags & SHM_OBS_TERMINAL ? 0 : (e->hits < UINT32_MAX ? e->hits + 1 : e->hits);
	}
	shm_obs_unlock(arena->shm, h);
	/* the rules of sc_promote_consider, in its order */
	if (returning)
		return 1;
	if (!hits || payload_bytes > SC_PROMOTE_MAX_BYTES)
		return 0;
	return token_count >= SC_PROMOTE_RESTART_TOKENS || hits >= 2;
}

void l2_promoted_left(struct sc_arena *arena, uint64_t stage_id, uint64_t lo, uint64_t hi)
{
	/* called with shard (and policy) locks held: never wait for the table; a mark lost to a busy
	 * table only means this document returns by the ordinary rules (a second fill) */
	struct shm_obs_hdr *h = shm_obs_table(arena->shm);
	if (!h || shm_mutex_trylock(arena->shm, &h->mu))
		return;
	struct shm_obs_entry *e = h->count <= h->slots ? shm_obs_find_locked(h, stage_id, lo, hi) : NULL;
	if (e && (e->flags & SHM_OBS_PUBLISHED))
		e->flags |= SHM_OBS_LEFT;
	shm_obs_unlock(arena->shm, h);
}

int sc_promote_attempted(struct sc_arena *arena, uint64_t stage_id, struct sc_digest d)
{
	struct shm_obs_hdr *h;
	int rc = lock_table(arena, &h);
	if (rc)
		return rc;
	struct shm_obs_entry *e = shm_obs_find_locked(h, stage_id, d.lo, d.hi);
	if (e)
		e->flags |= SHM_OBS_TERMINAL;
	shm_obs_unlock(arena->shm, h);
	return e ? 0 : -ENOENT;
}

_Static_assert(SHM_OBS_REFUSALS == SC_L2_REFUSE_COUNT, "one promotion counter per refusal reason");

int sc_promote_outcome(struct sc_arena *arena, uint64_t stage_id, struct sc_digest d, uint64_t bytes, int refused)
{
	if (refused >= SC_L2_REFUSE_REASONS)
		return -EINVAL;
	struct shm_obs_hdr *h;
	int rc = lock_table(arena, &h);
	if (rc)
		return rc;
	if (refused < 0)
		h->published++;
	else if (refused == SC_L2_REFUSE_LOW_BENEFIT)
		h->refused_low_benefit++;
	else
		h->refused[refused]++;
	uint32_t mark = refused < 0 ? SHM_OBS_TERMINAL | SHM_OBS_PUBLISHED : SHM_OBS_TERMINAL;
	/* want of room is retried by the next fill; the rest would be refused again */
	int retry = refused == SC_L2_REFUSE_LEASED || refused == SC_L2_REFUSE_NO_ROOM ||
		    refused == SC_L2_REFUSE_SCAN_LIMIT || refused == SC_L2_REFUSE_OTHER ||
		    refused == SC_L2_REFUSE_LOW_BENEFIT;
	struct shm_obs_entry *e = shm_obs_find_locked(h, stage_id, d.lo, d.hi);
	if (e && !retry)
		e->flags = (e->flags & ~SHM_OBS_LEFT) | mark; /* in L2 now: not "left" until it leaves again */
	shm_obs_unlock(arena->shm, h);
	uint64_t sid = stage_id, lo = d.lo, hi = d.hi, b = bytes, pub = refused < 0, why = refused < 0 ? 0 : (uint64_t)refused;
	SC_PROBE(promote_outcome, sid, lo, hi, b, pub, why);
	return 0;
}

int sc_promote_stats(struct sc_arena *arena, struct sc_promote_stats *st)
{
	if (!st)
		return -EINVAL;
	struct shm_obs_hdr *h;
	int rc = lock_table(arena, &h);
	if (rc)
		return rc;
	struct shm_obs_claim *c = shm_obs_claims(h);
	*st = (struct sc_promote_stats){ .observations = h->count, .capacity = h->capacity,
					 .considered = h->considered, .promoted = h->promoted,
					 .evicted = h->evicted, .expired = h->expired, .repairs = h->repairs,
					 .published = h->published, .refused_low_benefit = h->refused_low_benefit };
	for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
		st->refused[i] = h->refused[i];
	for (uint32_t i = 0; i < h->claims; i++)
		st->claims += c[i].owner != 0;
	shm_obs_unlock(arena->shm, h);
	return 0;
}

/* ---- single-flight claims ---- */

/* A claim is live while its owner token is (shm/readers.h): one fcntl, under the table lock. */
static int claim_live(struct sc_arena *arena, const struct shm_obs_claim *c)
{
	return c->owner && shm_token_alive(arena->shm, c->owner);
}

static int claim_is(const struct shm_obs_claim *c, uint64_t stage_id, struct sc_digest d)
{
	return c->owner && c->stage_id == stage_id && c->digest_lo == d.lo && c->digest_hi == d.hi;
}

int sc_fill_claim(struct sc_arena *arena, uint64_t stage_id, struct sc_digest d)
{
	struct shm_obs_hdr *h;
	int rc = lock_table(arena, &h);
	if (rc)
		return rc;
	struct shm_obs_claim *c = shm_obs_claims(h), *slot = NULL;
	rc = 0;
	for (uint32_t i = 0; i < h->claims; i++) {
		if (claim_is(&c[i], stage_id, d)) {
			shm_sched_point("fill.claim.found");
			if (claim_live(arena, &c[i])) {
				rc = -EBUSY;
				break;
			}
			slot = &c[i]; /* the claimer died: its claim is ours now */
			break;
		}
		if (!slot && !c[i].owner)
			slot = &c[i];
	}
	/* the table is full of claims: take one whose claimer died */
	for (uint32_t i = 0; !rc && !slot && i < h->claims; i++)
		if (!claim_live(arena, &c[i]))
			slot = &c[i];
	if (!rc && !slot)
		rc = -EAGAIN;
	if (!rc) {
		*slot = (struct shm_obs_claim){ .stage_id = stage_id, .digest_lo = d.lo, .digest_hi = d.hi,
						.owner = arena->shm->token, .pid = (uint32_t)getpid(),
						.claimed_ns = shm_now_ns() };
	}
	shm_obs_unlock(arena->shm, h);
	return rc;
}

int sc_fill_release(struct sc_arena *arena, uint64_t stage_id, struct sc_digest d)
{
	struct shm_obs_hdr *h;
	int rc = lock_table(arena, &h);
	if (rc)
		return rc;
	struct shm_obs_claim *c = shm_obs_claims(h);
	rc = -ENOENT;
	for (uint32_t i = 0; i < h->claims; i++)
		if (c[i].owner == arena->shm->token && claim_is(&c[i], stage_id, d)) {
			c[i] = (struct shm_obs_claim){ 0 };
			rc = 0;
			break;
		}
	shm_obs_unlock(arena->shm, h);
	return rc;
}

int sc_fill_wait(struct sc_arena *arena, uint64_t stage_id, struct sc_digest d, int64_t timeout_ns)
{
	uint64_t deadline = shm_now_ns() + (timeout_ns > 0 ? (uint64_t)timeout_ns : 0);
	for (;;) {
		struct shm_obs_hdr *h;
		int rc = lock_table(arena, &h), busy = 0;
		if (rc)
			return rc;
		struct shm_obs_claim *c = shm_obs_claims(h);
		for (uint32_t i = 0; i < h->claims && !busy; i++)
			busy = claim_is(&c[i], stage_id, d) && claim_live(arena, &c[i]);
		shm_obs_unlock(arena->shm, h);
		if (!busy)
			return 0;
		if (timeout_ns >= 0 && shm_now_ns() >= deadline)
			return -ETIMEDOUT;
		struct timespec ts = { 0, 1000000 }; /* 1 ms: a fill takes longer than that */
		nanosleep(&ts, NULL);
	}
}
