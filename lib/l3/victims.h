/* lib/l3/victims.h — the eviction order a listing leaves for the passes after it (lib/l3/victims.c). */
#ifndef SC_LIB_L3_VICTIMS_H
#define SC_LIB_L3_VICTIMS_H

#include "types.h"

#define L3_CAND_SEGMENTED 1u      /* a manifest: its segments' bytes need a listing to be judged */
#define L3_VICTIMS_KEEP_PCT 50u   /* a listing keeps the oldest objects covering this share of the
				   * budget (of the store without one): three evictions of 15 % */

/* An object as a listing saw it, in eviction order (oldest last use first). */
struct l3_cand {
	uint64_t lo, hi, bytes;
	int64_t mtime;             /* the file's mtime at the listing */
	uint32_t flags;            /* L3_CAND_* */
	uint32_t reserved;
	uint64_t check;            /* XXH3-64 of the bytes before it */
};

/* A large store's listing of @total bytes, @c[0..n) in eviction order: its first objects covering
 * L3_VICTIMS_KEEP_PCT of the budget (of @total without one) saved as DIR/victims, replacing the
 * last listing's (none: the file is removed). Nothing for a small store. Caller holds DIR/lock. */
int l3_victims_save(struct sc_l3 *l3, const struct l3_cand *c, size_t n, uint64_t total);
/* Fill @c from an object's listing (its mtime then, segmented or not). */
void l3_cand_set(struct l3_cand *c, uint64_t lo, uint64_t hi, uint64_t bytes, int64_t mtime, int segmented);

struct l3_victims_ops {
	int (*act)(void *ctx, const struct l3_cand *c);        /* before its removal: 0 or stop */
	void (*evicted)(void *ctx, const struct l3_cand *c, uint64_t t0_ns);
	void *ctx;
};
/*
 * Local mode, caller holds DIR/lock: evict from the last listing's order until DIR/state's bytes
 * are at most @goal, without listing the store. A candidate that is gone is passed over, one
 * used or replaced since (mtime or size differ) is kept; a segmented one stops the walk (its
 * segments are judged by a listing). Returns the count evicted (DIR/state's bytes, objects and
 * logical moved, the arena's index and kept files told; the evictions counter is the caller's), -ENOENT when there is no usable order, or a negative errno from @ops->act;
 * *@reached says whether the store is now at most @goal.
 */
int l3_victims_evict(struct sc_l3 *l3, uint64_t goal, const struct l3_victims_ops *ops, int *reached);

#ifdef SC_TEST_HOOKS
/* Test build: listings of the store by sc_l3_evict_to and by local-mode janitor passes. */
extern _Atomic unsigned long l3_test_evict_listings;
#endif

#endif
