/*
 * lib/events.h — the writer side of the event stream (lib/events.c): what the L2 tier and the L3
 * binding call on every change of what the arena holds. Below lib/l2/ and lib/bind.c; calls only
 * shm/ (the ring, shm/evring.h).
 *
 * Cost with nobody listening: for the L2 tier (events_note_locked, under a shard lock), one
 * relaxed load from the held lock's cache line; for events_note, a store-load fence and a load of
 * the listener word (see sc_events_open in lib/events.c).
 */
#ifndef SC_LIB_EVENTS_H
#define SC_LIB_EVENTS_H

#include "internal.h"
#include "../shm/index.h"

/* The arena's event ring (validated once; NULL when corrupt). */
static inline const struct shm_evring *events_ring(struct sc_arena *a)
{
	if (__builtin_expect(a->ev_ready == 1, 1))
		return &a->ev;
	if (a->ev_ready == 0)
		a->ev_ready = shm_evring_view(a->shm, &a->ev) ? -1 : 1;
	return a->ev_ready == 1 ? &a->ev : NULL;
}

/* Slow path: append (type, stage, key, digest, tokens). */
void events_append(const struct shm_evring *r, uint32_t type, uint64_t stage_id, struct sc_key key,
		   struct sc_digest d, uint32_t ntok);

/* Slow path of events_note_locked: a shard says somebody listens; append if the ring agrees. */
void events_note_slow(struct sc_arena *a, uint32_t type, uint64_t stage_id, struct sc_key key, struct sc_digest d,
		      uint32_t ntok);

/*
 * A change of what L2 holds (entry key @key, in index @ix), noted by a writer that holds the shard
 * lock under which it made the change. No fence: a listener marks every shard (ev_listener), then
 * takes and releases every shard lock before it reads the truth (sc_events_open), so a writer
 * whose critical section came first has its change read by the listener, and one whose section
 * came after sees the mark. The mark sits in the held lock's own cache line: nobody listening
 * costs a load from a line the writer already owns.
 */
static inline void events_note_locked(struct sc_arena *a, const struct shm_index *ix, uint32_t type, uint64_t stage_id,
				      struct sc_key key, struct sc_digest d, uint32_t ntok)
{
	const struct shm_index_shard *sh = &ix->hdr->shards[shm_index_shard_of_bucket(shm_index_bucket(ix, key.lo))];
	if (__builtin_expect(atomic_load_explicit(&sh->ev_listener, memory_order_relaxed) != 0, 0))
		events_note_slow(a, type, stage_id, key, d, ntok);
}

/* A change made without a shard lock (an L3 store's, a clear's end): store-load fence first, so
 * that either the listener (which fences after taking the role, then reads the truth) sees the
 * change, or we see the listener. */
static inline void events_note(struct sc_arena *a, uint32_t type, uint64_t stage_id, struct sc_key key,
			       struct sc_digest d, uint32_t ntok)
{
	const struct shm_evring *r = events_ring(a);
	if (!r)
		return;
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->hdr->listener, memory_order_relaxed))
		events_append(r, type, stage_id, key, d, ntok);
}

/* The periodic reap's part (lib/l2/lease.c): clear the listener word of a dead listener, so that
 * writers stop appending for nobody. */
void events_reap_listener(struct sc_arena *a);

#endif
