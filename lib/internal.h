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
	_Alignas(8) unsigned char l2_evq[48]; /* struct shm_evq (shm/evq.h): the eviction queues, valid when l2_ready */
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

/* lib/promote.c, for lib/restore.c: would sc_promote_consider say "promote" for this fill now?
 * 1 or 0 (counts nothing, changes nothing); a negative errno when the table cannot be read. */
int promote_predict(struct sc_arena *arena, uint64_t stage_id, struct sc_digest d, uint64_t token_count,
		    uint64_t payload_bytes);

#endif
