/* lib/l3/ring.h — the per-thread rings, their registrations and kept files (lib/l3/ring.c). */
#ifndef SC_LIB_L3_RING_H
#define SC_LIB_L3_RING_H

#include "types.h"

/* This thread's id (cached per thread; a forked child asks again). */
pid_t l3_tid(void);
/* This thread's ring of @l3 (created on first use), or NULL (no memory, io_uring refused). */
struct l3_ring *l3_ring_get(struct sc_l3 *l3);
/* This thread's ring of @l3 if it has one, else NULL: for callers that only look at fills in
 * flight (a restore served from L2 makes no ring, registers nothing). */
struct l3_ring *l3_ring_find(struct sc_l3 *l3);
/* Free every ring of @l3 (their fills drained first: l3_fills_drain). */
void l3_rings_free(struct sc_l3 *l3);
/* Bring @r's registered buffers up to date with the handle's ranges (a stale generation only
 * delays a new range by one call). */
void l3_ring_register(struct sc_l3 *l3, struct l3_ring *r);
/* Registered buffer index holding [p, p+len), or -1. */
int l3_ring_fixed_index(struct l3_ring *r, const void *p, uint64_t len);
/* A submission entry (submitting what is queued when the ring is full), or NULL. */
struct io_uring_sqe *l3_ring_sqe(struct l3_ring *r);
/* A fill found what it read of @op's object bad: -EBADMSG, the failure counted and the file under
 * the object's name moved to quarantine; or -ENOENT, nothing judged, when that name no longer names
 * the file the fill read (a good copy put since would be lost): a miss. */
int l3_fill_bad(struct sc_l3 *l3, const struct l3_fill_op *op);
/* An object file was removed or moved through @l3: every ring's kept files are reopened (this
 * thread's ring closes its idle ones at once, the others at their next fill). */
void l3_kept_forget(struct sc_l3 *l3);
/* Close @r's idle kept files that are stale (a removal moved the generation, or older than
 * SC_L3_FD_KEEP_MS): at once on a new generation, else at most once a second. */
void l3_kept_sweep(struct sc_l3 *l3, struct l3_ring *r);
/* The kept file of object (@lo, @hi) at @rel opened as @open_direct asks, marked busy; NULL: none
 * usable (a stale one is closed on the way). */
struct l3_kept *l3_kept_take(struct sc_l3 *l3, struct l3_ring *r, uint64_t lo, uint64_t hi, const char *rel,
			     int open_direct);
/* Keep @op's file (its fill succeeded) for later fills: 1 kept (the caller must not close it), 0 not. */
int l3_kept_keep(struct l3_ring *r, struct l3_fill_op *op, uint64_t lo, uint64_t hi);
/* The end of a fill that read kept file @k: idle again, or closed when the fill failed (@rc). */
void l3_kept_release(struct l3_ring *r, struct l3_kept *k, int rc, int64_t mtime_ns);

#ifdef SC_TEST_HOOKS
/* Bit k: the (k+1)-th request for a submission entry from now (l3_ring_sqe) finds none, as when the
 * queue is full and io_uring_enter refuses its submit; each request shifts the mask. Tests set it. */
extern _Atomic uint64_t l3_test_no_sqe;
/* Clear bit @c of @m if it is set: did this caller clear it? (The test build's refusals: each
 * bit is one refusal, taken once.) */
static inline int l3_test_take_bit(_Atomic uint64_t *m, uint32_t c)
{
	uint64_t v = atomic_load(m);
	while (c < 64 && v >> c & 1)
		if (atomic_compare_exchange_weak(m, &v, v & ~(1ull << c)))
			return 1;
	return 0;
}
#endif

#endif
