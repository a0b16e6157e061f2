/*
 * lib/internal.h — private to lib/: the handle behind struct sc_arena. Modules of lib/ may add
 * process-local fields here (one block per module, marked with its owner).
 */
#ifndef SC_LIB_INTERNAL_H
#define SC_LIB_INTERNAL_H

#include "stagecache.h"
#include "../shm/arena.h"

struct sc_arena {
	struct shm_arena *shm;
	/* ---- L2 tier ---- */
	_Alignas(8) unsigned char l2_ix[64]; /* struct shm_index (shm/index.h), valid when l2_ready (lib/stage.c) */
	int l2_ready;
	uint64_t l2_lease_used;             /* bit i: lease record i of our reader slot's ext area is in use */
	struct sc_stage *l2_stages;         /* open stages of this handle, for counter flushes */
	uint64_t l2_last_reap_ns;           /* rate limit for reaping dead readers' leases */
	uint64_t l2_swept_cleaned;          /* shm_readers_cleaned() at our last orphan sweep */
	/* ---- L3 / promotion ---- */
#ifdef SC_TEST_HOOKS
	uint64_t (*promote_now)(void *ctx);  /* injected policy clock (test build); NULL: CLOCK_MONOTONIC */
	void *promote_now_ctx;
#endif
	/* ---- rings ---- */
	struct shm_ring_cons *ring_cons; /* consumer state: allocated by the first sc_ring_poll, freed by sc_ring_consumer_close */
};

/* Did fsck declare this arena unrepairable (shm_header.damaged)? Acquire: pairs with the release
 * store in lib/fsck.c, so the reason and time are visible with the mark. */
static inline int arena_is_damaged(const struct sc_arena *a)
{
	return atomic_load_explicit(&a->shm->hdr->damaged, memory_order_acquire) == SHM_DAMAGED;
}

#endif
