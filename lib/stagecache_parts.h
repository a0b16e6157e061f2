/*
 * stagecache_parts.h — the building blocks sc_restore (stagecache.h) is made of, for callers that
 * build their own restore path: reservations of arena memory filled in place and published without
 * a copy, the promotion policy that decides which L3 fills earn a place in L2, and the single-flight
 * claims that keep two processes from filling the same object at once. Included by stagecache.h;
 * the same conventions (0 or a count on success, negative errno on failure, sc_ prefix).
 */
#ifndef STAGECACHE_PARTS_H
#define STAGECACHE_PARTS_H

#include "stagecache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ============================== reservations (lib/l2/admit.c) ============================== */

/*
 * Fills (used by the L3 store): reserve an arena allocation, fill it (e.g. O_DIRECT read), then
 * publish it in place (no copy) or release it.
 *
 * A reservation is private to this process: tagged with its reader slot, so that if the process
 * dies the next repair frees it. Its memory is 4 KiB aligned when bytes >= 4096.
 */

/**
 * sc_l2_reserve - allocate @bytes of arena memory for a fill. Makes room as sc_l2_admit does
 * (S3-FIFO, then by address in a fragmented heap). Returns 0, -EINVAL (0 bytes), -E2BIG (above
 * the heap or the budget), -ENOSPC (no room could be made). A refusal is counted like an
 * admission's (a reservation is the first half of a publish), with its reason. May block on
 * mutexes.
 */
int sc_l2_reserve(struct sc_stage *stage, uint64_t bytes, struct sc_l2_resv *resv);

/**
 * sc_l2_publish - publish a filled reservation in place under the key of (@ns, @tokens[0..n)).
 * The wire is resv->ptr[0 .. kv_len + rec_len): section 0 = kv_len bytes, section 1 = rec_len
 * bytes (kv_len is the single section for FULL_STATE / RECURRENT_ONLY, rec_len then 0). Same
 * checks, counters and replacement rules as sc_l2_admit (the digest is verified). On success the
 * reservation is consumed (*resv zeroed); on failure it stays valid (release it or retry).
 * @lease (optional) receives a lease on the published entry.
 * Returns as sc_l2_admit, and -EMFILE when @lease is given but this handle already holds
 * SC_LEASES_MAX leases (nothing is published then).
 */
int sc_l2_publish(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
		  struct sc_digest expected, struct sc_l2_resv *resv, uint32_t kind, uint64_t kv_len,
		  uint64_t rec_len, const struct sc_kv_desc *desc, uint32_t origin, struct sc_lease *lease);

/** sc_l2_publish_cost - sc_l2_publish with the prefix's compute cost (as sc_l2_admit_cost). */
int sc_l2_publish_cost(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
		       struct sc_digest expected, struct sc_l2_resv *resv, uint32_t kind, uint64_t kv_len,
		       uint64_t rec_len, const struct sc_kv_desc *desc, uint32_t origin, struct sc_lease *lease,
		       uint64_t cost_ns);

/** sc_l2_reserve_release - free an unpublished reservation (no-op on a zeroed one). */
void sc_l2_reserve_release(struct sc_l2_resv *resv);



/* ============================== promotion and fill claims (lib/promote.c) ============================== */

/*
 * The promotion policy: which L3 fills earn a place in L2. Observations live in the arena (shared
 * by every process), keyed by (stage id, payload digest), and expire 10 minutes after first sight.
 */
#define SC_PROMOTE_MAX_BYTES (64ull << 20)    /* larger payloads are never promoted */
#define SC_PROMOTE_RESTART_TOKENS 4096u       /* promoted on the first fill */
#define SC_PROMOTE_WINDOW_NS (600ull * 1000000000ull)
#define SC_PROMOTE_MAX_OBSERVATIONS 4096u

enum sc_promote_why {
	SC_PROMOTE_WHY_TERMINAL = 0,   /* refused for good (or attempted): no */
	SC_PROMOTE_WHY_OVERSIZE = 1,   /* > SC_PROMOTE_MAX_BYTES: no, and terminal */
	SC_PROMOTE_WHY_LONG_PREFIX = 2,/* >= SC_PROMOTE_RESTART_TOKENS: yes */
	SC_PROMOTE_WHY_SECOND_HIT = 3, /* second hit within the window: yes */
	SC_PROMOTE_WHY_FIRST_HIT = 4,  /* first hit: no (yet) */
	SC_PROMOTE_WHY_RETURNING = 5,  /* published before and filled again (it left L2 since): yes */
};
/** sc_promote_why_name - "terminal", "oversize", "long_prefix", "second_hit", "first_hit",
 * "returning", or "unknown". */
const char *sc_promote_why_name(int why);

/**
 * sc_promote_consider - count a fill of @digest for @stage_id (sc_stage_id) and decide. Returns 1 (promote),
 * 0 (not), or -EBADMSG (corrupted table), -EINVAL. *@why (may be NULL) gets the reason.
 * A "yes" leaves the observation open until its outcome is recorded (sc_promote_outcome) or
 * sc_promote_attempted, so a dropped hand-off retries. An observation whose last promotion was
 * published says yes again (SC_PROMOTE_WHY_RETURNING): a fill means the entry left L2 since.
 * Takes the table's process-shared mutex; O(1) except when the table is full (one bounded scan).
 */
int sc_promote_consider(struct sc_arena *arena, uint64_t stage_id, struct sc_digest digest, uint64_t token_count,
			uint64_t payload_bytes, int *why);

/**
 * sc_promote_admit - carry out a "yes" of sc_promote_consider in one call: admit the filled
 * payload into L2 with origin SC_ORIGIN_FROM_L3 (exactly as sc_l2_admit) and record its outcome
 * (as sc_promote_outcome: published, or the refusal's reason), so the same digest is not
 * promoted again for this stage unless it was refused for want of room.
 * Returns sc_l2_admit's result. A missing observation (expired, or evicted meanwhile) is not an
 * error. May block on mutexes.
 */
int sc_promote_admit(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
		     struct sc_digest expected, const struct sc_payload *payload);
/** sc_promote_admit_cost - sc_promote_admit with the prefix's compute cost (as sc_l2_admit_cost;
 * e.g. the struct sc_l3_fill_req.cost_ns its fill read from the object). */
int sc_promote_admit_cost(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
			  struct sc_digest expected, const struct sc_payload *payload, uint64_t cost_ns);

/**
 * sc_promote_outcome - record what became of a "promote" decision for (@stage_id, @digest) of
 * @bytes: @refused < 0 when it was published in L2, else why not (enum sc_l2_refusal). Counted in
 * sc_promote_stats (published / refused) and fired as the promote_outcome probe. The observation
 * becomes terminal, except after a refusal for want of room (LEASED, NO_ROOM, SCAN_LIMIT, OTHER):
 * then the next fill is judged again. sc_restore and sc_promote_admit call it for every "promote".
 * 0, -EINVAL, -EBADMSG.
 */
int sc_promote_outcome(struct sc_arena *arena, uint64_t stage_id, struct sc_digest digest, uint64_t bytes, int refused);

/** sc_promote_attempted - mark the observation terminal (after an admit attempt made other than
 * through sc_promote_admit or sc_restore). 0, -ENOENT (no observation), or -errno. */
int sc_promote_attempted(struct sc_arena *arena, uint64_t stage_id, struct sc_digest digest);

struct sc_promote_stats {
	uint32_t observations, claims, capacity;
	uint64_t considered, promoted, evicted, expired, repairs;
	/* what became of each "promote" decision of sc_restore / sc_promote_admit: published in L2,
	 * or refused (by enum sc_l2_refusal). promoted == published + sum(refused) once none is in flight. */
	uint64_t published, refused[SC_L2_REFUSE_COUNT];
	uint64_t refused_low_benefit;  /* refused as SC_L2_REFUSE_LOW_BENEFIT (also in promoted) */
	uint64_t reserved[7];          /* zero (room for later counters) */
};
/** sc_promote_stats - the observation table's counters. 0, -EINVAL, -EBADMSG. Takes the table's mutex. */
int sc_promote_stats(struct sc_arena *arena, struct sc_promote_stats *st);

/**
 * sc_fill_claim - single flight: claim the fill of (@stage_id, digest) for this thread. 0 when
 * claimed, -EBUSY while another live claimer holds it (a claim of a dead process is released),
 * -EAGAIN when the claim table is full. Release with sc_fill_release.
 */
int sc_fill_claim(struct sc_arena *arena, uint64_t stage_id, struct sc_digest digest);
int sc_fill_release(struct sc_arena *arena, uint64_t stage_id, struct sc_digest digest);
/** sc_fill_wait - wait (polling, bounded by @timeout_ns) until nobody claims it. 0 or -ETIMEDOUT. */
int sc_fill_wait(struct sc_arena *arena, uint64_t stage_id, struct sc_digest digest, int64_t timeout_ns);

#ifdef __cplusplus
}
#endif
#endif /* STAGECACHE_PARTS_H */
