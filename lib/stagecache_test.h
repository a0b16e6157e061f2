/*
 * stagecache_test.h — the test build's hooks. Never installed; only the test build has them.
 *
 * The library compiled with -DSC_TEST_HOOKS (build/test/, what `make check` and
 * `stagecache stress` use) adds three kinds of hooks to the product library:
 *  - fault points: named instructions where a test can make the process die (SIGKILL to itself),
 *    as a crash would leave shared memory;
 *  - schedule points: named steps of the shared-memory protocols where a test can park a process
 *    and let another run first (the ordering counterpart of fault points; tests/interleave.c
 *    explores every ordering of a scenario's points);
 *  - the promotion policy's clock, and poisoning of freed heap memory (so a reader that touches
 *    memory after it was reused reads garbage and fails its digest check).
 * The product library (build/libstagecache.so, `make install`) has none of them: the calls
 * below do not exist there, and the SC_FAULT environment variable changes nothing.
 */
#ifndef STAGECACHE_TEST_H
#define STAGECACHE_TEST_H

#ifndef SC_TEST_HOOKS
#error "stagecache_test.h is for the test build (-DSC_TEST_HOOKS) only"
#endif

#include "stagecache.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * sc_fault_arm - arm a fault point in the calling process: when the library reaches the point
 * named @spec ("l2.admit.linked", ... or "name@N" for the N-th time), the process sends itself
 * SIGKILL there. NULL or "" disarms. The environment variable SC_FAULT does the same (read once,
 * at the first point reached, unless sc_fault_arm was called before; a malformed value arms
 * nothing). Returns 0 or -EINVAL (malformed spec).
 */
int sc_fault_arm(const char *spec);

/** sc_fault_points - the names of every fault point (NULL-terminated array). */
const char *const *sc_fault_points(void);

/**
 * sc_sched_set - call @fn(point, @ctx) at every schedule point this process reaches (NULL
 * disables). The hook runs in the library's context: it may block (that is its purpose) but must
 * not call back into the library. Process-local.
 */
typedef void (*sc_sched_fn)(const char *point, void *ctx);
void sc_sched_set(sc_sched_fn fn, void *ctx);

/** sc_sched_points - the names of every schedule point (NULL-terminated array). */
const char *const *sc_sched_points(void);

/**
 * sc_test_set_key_mask - the deliberately weakened key: every L2 key, location-index key (the
 * prefix hash) and L3 prefix key computed by this process from now on is ANDed with these masks
 * (~0, ~0: the real keys). With a narrow mask, different prefixes share keys at every level, which
 * is how the tests prove that a key collision is a miss (and counted), never another prefix's
 * state. Set it before creating the arena and the L3 directory a test uses.
 */
void sc_test_set_key_mask(uint64_t lo_mask, uint64_t hi_mask);

/**
 * sc_l2_set_policy_limits - lower the eviction policy's per-call bounds in this process: at most
 * @evict_steps FIFO steps per room-making call and @sweep_blocks heap blocks per neighbourhood
 * search (0: the product's bounds, 65536 each), so a test reaches SC_L2_REFUSE_SCAN_LIMIT without
 * a million entries. Process-local.
 */
void sc_l2_set_policy_limits(uint32_t evict_steps, uint32_t sweep_blocks);

/** sc_promote_set_clock - this handle's promotion-policy clock (ns, monotonic); NULL: the real one. */
void sc_promote_set_clock(struct sc_arena *arena, uint64_t (*now_ns)(void *ctx), void *ctx);

/**
 * sc_test_set_fill_model - fix this L3 handle's fill time model (sc_l3_fill_estimate): a fill of
 * b bytes is predicted to take @fixed_ns + (bytes in flight + b) x @ps_per_byte / 1000, and
 * measurements no longer move it (0, 0: measured again). So that deadline tests decide the same
 * way on a fast or a loaded machine.
 */
void sc_test_set_fill_model(struct sc_l3 *l3, uint64_t fixed_ns, uint64_t ps_per_byte);

/**
 * sc_test_l3_fills_reading - on this thread's ring of @l3: how many fills are reading now (their
 * open or reads started, not all ended), and in *@max the most that ever were at once (reset to
 * the current count). 0 and 0 when the thread has no ring.
 */
unsigned sc_test_l3_fills_reading(struct sc_l3 *l3, unsigned *max);

#ifdef __cplusplus
}
#endif
#endif
