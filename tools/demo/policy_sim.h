/*
 * tools/demo/policy_sim.h — cache simulators over a request sequence, for `stagecache demo` and
 * `stagecache bench policy`: exact LRU, S3-FIFO (as in the SOSP '23 paper, with its libCacheSim
 * defaults) and Belady's OPT (for variable sizes, the furthest-next-use heuristic: an upper bound
 * in practice, not a proven one); and for compute costs: GreedyDual-Size-Frequency, the arena's
 * benefit-weighted S3-FIFO (lib/l2/evict.c, rule for rule) and OPT-by-benefit (a heuristic: evict
 * the object whose saved compute per byte per request-distance is lowest).
 *
 * A trace is a sequence of object ids 0..nobj-1; each object has a cost in bytes charged against
 * the capacity (its footprint in the arena), a size counted in byte hit ratios (its payload), and
 * optionally a value: the compute a hit on it saves (ns).
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
	const uint64_t *value;  /* [nobj] compute a hit saves, ns (NULL: none; the benefit policies then
				 * see every object at one density and behave as their base policy) */
};

struct psim_result {
	uint64_t reqs, hits;             /* requests counted, hits among them */
	uint64_t req_bytes, hit_bytes;   /* their bytes */
	uint64_t req_value, saved;       /* their values, and those of the hits: compute saved (ns) */
	uint64_t refused;                /* admissions the policy declined (benefit rules) */
};

enum psim_policy {
	PSIM_LRU = 0,
	PSIM_S3FIFO = 1,
	PSIM_OPT = 2,
	PSIM_GDSF = 3,     /* GreedyDual-Size-Frequency: H = L + hits x value / cost, evict min H, L = H */
	PSIM_BENEFIT = 4,  /* the arena's policy: S3-FIFO weighted by value / cost (lib/l2/evict.c) */
	PSIM_OPT_BENEFIT = 5, /* evict the lowest value / (cost x distance to next request); heuristic */
	PSIM_COUNT = 6,
};

/* The policy's name as the metrics spell it ("lru", "s3fifo", "opt", "gdsf", "benefit",
 * "opt_benefit"). */
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
/* Compute saved (ns) per byte of @capacity. */
double psim_saved_per_byte(const struct psim_result *r, uint64_t capacity);

#endif
