/*
 * tools/demo/policy_sim.h — cache simulators over a request sequence, for `stagecache demo` and
 * `stagecache bench policy`: exact LRU, S3-FIFO (as in the SOSP '23 paper, with its libCacheSim
 * defaults) and Belady's OPT (for variable sizes, the furthest-next-use heuristic: an upper bound
 * in practice, not a proven one).
 *
 * A trace is a sequence of object ids 0..nobj-1; each object has a cost in bytes charged against
 * the capacity (its footprint in the arena) and a size counted in byte hit ratios (its payload).
 * Every simulator admits on a miss (OPT may decline: bypassing is part of the optimum), evicts to
 * stay within the capacity, and never caches an object larger than the capacity. No randomness:
 * the same trace and capacity give the same result.
 */
#ifndef SC_TOOLS_POLICY_SIM_H
#define SC_TOOLS_POLICY_SIM_H

#include <stdint.h>

struct psim_trace {
	uint32_t nobj;
	const uint64_t *cost;   /* [nobj] bytes charged against the capacity */
	const uint64_t *bytes;  /* [nobj] bytes counted by byte hit ratios */
	uint32_t nreq;
	const uint32_t *req;    /* [nreq] object ids */
};

struct psim_result {
	uint64_t reqs, hits;             /* requests counted, hits among them */
	uint64_t req_bytes, hit_bytes;   /* their bytes */
};

enum psim_policy { PSIM_LRU = 0, PSIM_S3FIFO = 1, PSIM_OPT = 2 };

/* The policy's name as the metrics spell it ("lru", "s3fifo", "opt"). */
const char *psim_name(enum psim_policy p);

/*
 * Replay @t through @p with @capacity bytes. @hit (NULL or [nreq]) receives 1 for each request
 * that hit. @count (NULL or [nreq]) selects the requests counted in @res (all when NULL); every
 * request still goes through the cache. Returns 0, -EINVAL (an object id >= nobj) or -ENOMEM.
 */
int psim_run(enum psim_policy p, const struct psim_trace *t, uint64_t capacity, uint8_t *hit,
	     const uint8_t *count, struct psim_result *res);

/* Hit ratios of @r (0 when nothing was counted). */
double psim_object_ratio(const struct psim_result *r);
double psim_byte_ratio(const struct psim_result *r);

#endif
