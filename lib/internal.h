/*
 * lib/internal.h — private to lib/: the handle behind struct sc_arena. Modules of lib/ may add
 * process-local fields here (one block per module, marked with its owner).
 */
#ifndef SC_LIB_INTERNAL_H
#define SC_LIB_INTERNAL_H

#include <errno.h>

#include "stagecache.h"
#include "xxh.h"
#include "../shm/arena.h"
#include "../shm/l3ix.h"
#include "../shm/evring.h"

/* Sizes from a caller or a file added or multiplied without wrapping (UINT64_MAX when they would). */
static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
static inline uint64_t sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* ---- prefix hashes (lib/key.c) ---- */
/* Tokens per link of the prefix-hash chain: the restore path's block size. */
#define SC_PFX_BLOCK 256u
/*
 * P(len) for each of @lens (ascending, each <= @n) of (@ns, @tokens) in one pass, keyed with the
 * arena's @secret: the stage-independent key of a prefix. It keys the L3 location index, and the
 * L2 key of a stage is l2_key_of(stage, P), so the restore path hashes the tokens once.
 * 0 or -EINVAL (namespace too long, lengths out of order). Does not allocate.
 */
int key_pfx_hashes(const uint8_t *secret, const char *ns, const int32_t *tokens, uint32_t n, const uint32_t *lens,
		   uint32_t nlens, struct sc_key *out);
/* The same in two steps, for callers that need P at only some of the lengths: the chain value at
 * each length (one pass), then P of one length from its chain value (one short hash). */
int key_pfx_chain(const uint8_t *secret, const char *ns, const int32_t *tokens, uint32_t n, const uint32_t *lens,
		  uint32_t nlens, struct sc_key *chain);
struct sc_key key_pfx_finish(const uint8_t *secret, struct sc_key chain, const int32_t *tokens, uint32_t len);
/* One length-prefixed string (u32 LE length, bytes) into a 128-bit hash state. */
static inline void key_put_lp(XXH3_state_t *s, const char *str, size_t len)
{
	uint8_t le[4] = { (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24) };
	XXH3_128bits_update(s, le, 4);
	if (len)
		XXH3_128bits_update(s, str, len);
}
/* XXH3-128 keyed with an arena's secret. */
static inline XXH128_hash_t key_h128(const void *p, size_t len, const uint8_t *secret)
{
	return XXH3_128bits_withSecret(p, len, secret, SHM_SECRET_BYTES);
}
/* sc_identity_digest of (@model, @ml bytes) and (@state, @sl bytes): what an L3 object's header
 * identities are compared by. */
struct sc_digest key_identity(const char *model, size_t ml, const char *state, size_t sl);
#ifdef SC_TEST_HOOKS
extern uint64_t sc_key_mask_lo_, sc_key_mask_hi_;
#endif
/* The test build's deliberately weakened key (a mask, sc_test_set_key_mask); nothing otherwise. */
static inline void key_weaken(struct sc_key *k)
{
#ifdef SC_TEST_HOOKS
	k->lo &= sc_key_mask_lo_;
	k->hi &= sc_key_mask_hi_;
#else
	(void)k;
#endif
}

/* A key collision seen at @level (0 L2, 1 location index, 2 L3 prefix entry): counted in the
 * arena (its location index's counters), fires the key_collision probe (lib/key.c). */
void key_collision_count(struct sc_arena *a, int level, uint64_t tokens);

/*
 * A fill a restore abandoned past its deadline (lib/restore.c) holds this handle's memory (an
 * arena reservation) until the kernel completed its reads. It is linked here so that
 * sc_arena_close can detach it: the reservation is then left to the reaper, which frees it only
 * once the ring let the handle's liveness lock go (after the reads; lib/io_pin.c).
 */
struct arena_orphan {
	struct arena_orphan *next, **pprev;
	struct sc_arena *arena;      /* NULL once detached */
};

struct sc_arena {
	struct shm_arena *shm;
	/* ---- L2 tier ---- */
	_Alignas(8) unsigned char l2_ix[64]; /* struct shm_index (shm/index.h), valid when l2_ready (lib/l2/stage.c) */
	_Alignas(8) unsigned char l2_evq[48]; /* struct shm_evq (shm/evq.h): the eviction queues, valid when l2_ready */
	int l2_ready;
	_Alignas(8) unsigned char l2_seg[80]; /* struct shm_segtab (shm/seg.h), when l2_seg_on (lib/l2/seg.c) */
	int l2_seg_on;
	uint64_t l2_lease_used;             /* bit i: lease record i of our reader slot's ext area is in use */
	struct sc_stage *l2_stages;         /* open stages of this handle, for counter flushes */
	uint64_t l2_last_reap_ns;           /* rate limit for reaping dead readers' leases */
	uint64_t l2_swept_cleaned;          /* shm_readers_cleaned() at our last orphan sweep */
	/* ---- L3 location index (lib/l3/locindex.c) ---- */
	struct shm_l3ix l3ix;               /* valid when l3ix_ready == 1 (-1: the region is corrupt) */
	int l3ix_ready;
	/* ---- L3 / promotion ---- */
#ifdef SC_TEST_HOOKS
	uint64_t (*promote_now)(void *ctx);  /* injected policy clock (test build); NULL: CLOCK_MONOTONIC */
	void *promote_now_ctx;
#endif
	/* ---- restore: abandoned fills holding this handle's memory (lib/restore.c) ---- */
	struct arena_orphan *orphans;
	/* ---- the event ring (lib/events.h) ---- */
	struct shm_evring ev;               /* valid when ev_ready == 1 (-1: the region is corrupt) */
	int ev_ready;
	/* ---- rings ---- */
	struct shm_ring_cons *ring_cons; /* consumer state: allocated by the first sc_ring_poll, freed by sc_ring_consumer_close */
};

/* Did fsck declare this arena unrepairable (shm_header.damaged)? Acquire: pairs with the release
 * store in lib/fsck.c, so the reason and time are visible with the mark. */
static inline int arena_is_damaged(const struct sc_arena *a)
{
	return atomic_load_explicit(&a->shm->hdr->damaged, memory_order_acquire) == SHM_DAMAGED;
}

/* May a writer touch the arena? 0; -EBADMSG when its file is now shorter than the mapping (a
 * member truncated it: the first touch of a lost page would raise SIGBUS); -ENOTRECOVERABLE when
 * fsck declared it damaged. @lately: trust a check younger than SHM_INTACT_RECHECK_NS
 * (admissions, reservations: shm_arena_intact_lately); else one fstat (opening a stage). Never
 * for the read path. */
static inline int arena_usable(const struct sc_arena *a, int lately)
{
	int rc = lately ? shm_arena_intact_lately(a->shm) : shm_arena_intact(a->shm);
	return rc ? rc : arena_is_damaged(a) ? -ENOTRECOVERABLE : 0;
}

/* lib/promote.c, for lib/l2/: an entry promoted from L3 (origin l3) of (@stage_id, digest lo/hi) left L2 (evicted
 * or removed): a later fill of it is "returning". Never blocks (trylock); shard locks may be held. */
void l2_promoted_left(struct sc_arena *a, uint64_t stage_id, uint64_t lo, uint64_t hi);

/* The arena's L3 location index view (validated once; NULL when there is none or it is corrupt). */
static inline struct shm_l3ix *arena_l3ix(struct sc_arena *a)
{
	if (__builtin_expect(a->l3ix_ready == 1, 1))
		return &a->l3ix;
	if (a->l3ix_ready == 0)
		a->l3ix_ready = shm_l3ix_view(a->shm, &a->l3ix) ? -1 : 1;
	return a->l3ix_ready == 1 ? &a->l3ix : NULL;
}

/* lib/promote.c, for lib/restore.c: would sc_promote_consider say "promote" for this fill now?
 * 1 or 0 (counts nothing, changes nothing); a negative errno when the table cannot be read. */
int promote_predict(struct sc_arena *arena, uint64_t stage_id, struct sc_digest d, uint64_t token_count,
		    uint64_t payload_bytes);

#endif
