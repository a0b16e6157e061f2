/*
 * lib/probes.h — the USDT probes of libstagecache (provider "stagecache").
 *
 * Each probe is guarded by its semaphore (sys/sdt.h): when no tracer is attached the guard is one
 * load and a not-taken branch, and no argument is computed. Code that must compute something only
 * for a probe (a duration, say) tests SC_PROBE_ENABLED(name) first.
 *
 * Arguments are plain integers (libbpf 1.1 parses only simple operand forms; the build passes
 * -DSTAP_SDT_ARG_CONSTRAINT=nr). A 128-bit digest travels as two u64 halves (lo, hi), in the
 * byte order of sc_digest's two 64-bit words (low64, high64).
 *
 * Probe                arguments
 * l2_hit               stage, digest_lo, digest_hi, bytes, origin (0 direct, 1 from L3), lookup_ns
 * l2_miss              stage, tokens, reason (0 absent, 1 location mismatch, 2 error, 3 key collision), lookup_ns
 * l2_admit             stage, digest_lo, digest_hi, bytes, origin
 * l2_segments          stage, logical bytes, stored bytes, shared bytes (a segmented admit: its wire,
 *                      what it stored, what it found stored already; logical = stored + shared)
 * l3_segments          logical bytes, stored bytes, shared bytes (a segmented L3 put: its object whole
 *                      (header block + payload), what it wrote (manifest file + new segments), the
 *                      payload bytes it found stored already)
 * l2_reject            stage, bytes, errno (positive), reason (enum sc_l2_refusal)
 * l2_evict             stage, digest_lo, digest_hi, bytes
 * l2_remove            stage, digest_lo, digest_hi, bytes, reason (0 explicit, 1 mismatch, 2 invalidate, 3 clear)
 * promote_decision     stage, digest_lo, digest_hi, tokens, bytes, decision (1 promote, 0 not), why (enum sc_promote_why)
 * promote_outcome      stage, digest_lo, digest_hi, bytes, published (1) or not (0), reason (enum sc_l2_refusal; 0 when published)
 * l3_fill_start        stage, digest_lo, digest_hi, bytes
 * l3_fill_done         stage, digest_lo, digest_hi, bytes, duration_ns, result (0 or negative errno)
 * l3_quarantine        digest_lo, digest_hi, reason (positive errno)
 * l3_index             result (0 hit; a directory probe: 2 miss, 3 stale, 4 collision, 5 unbound), tokens, lookup_ns
 * l3_index_refresh     positive, negative, evicted (entries written back after a directory probe)
 * key_collision        level (0 L2, 1 location index, 2 L3 prefix entry), tokens
 * miss_reason          stage, level (0 an L2 lookup, 1 a restore that returned no state), reason
 *                      (enum sc_miss_reason), detail (REFUSED: enum sc_l2_refusal; NOT_PROMOTED: enum
 *                      sc_promote_why; REMOVED: as l2_remove; DEADLINE: enum sc_deadline_detail; else 0)
 * commit_emit          ring, request_id, running_total, batch_tokens
 * ring_full            ring, request_id, pending_tokens
 *
 * "stage" is the stage id: the low 64 bits of the stage's identity hash (see lib/l2).
 */
#ifndef SC_LIB_PROBES_H
#define SC_LIB_PROBES_H

/* Every probe with its argument count, for code that must know the whole list (lib/probes.c,
 * tests/check_probes.c). Keep in step with the table above and the programs in bpf/. */
#define SC_PROBE_LIST(X)        \
	X(l2_hit, 6)            \
	X(l2_miss, 4)           \
	X(l2_admit, 5)          \
	X(l2_segments, 4)       \
	X(l3_segments, 3)       \
	X(l2_reject, 4)         \
	X(l2_evict, 4)          \
	X(l2_remove, 5)         \
	X(promote_decision, 7)  \
	X(promote_outcome, 6)   \
	X(l3_fill_start, 4)     \
	X(l3_fill_done, 6)      \
	X(l3_quarantine, 3)     \
	X(l3_index, 3)          \
	X(l3_index_refresh, 3)  \
	X(key_collision, 2)     \
	X(miss_reason, 4)       \
	X(commit_emit, 4)       \
	X(ring_full, 3)

#ifndef SC_NO_PROBES
#define _SDT_HAS_SEMAPHORES 1
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>

#define SC_PROBE_SEM(name) stagecache_##name##_semaphore
/* Hidden: the guard is then one rip-relative load (no GOT indirection); the semaphores are not
 * part of the ABI (tracers find them through the notes). */
#define SC_PROBE_DECLARE(name) extern unsigned short SC_PROBE_SEM(name) __attribute__((visibility("hidden")))
#define SC_PROBE_DECLARE_X_(name, nargs) SC_PROBE_DECLARE(name);
SC_PROBE_LIST(SC_PROBE_DECLARE_X_)

#define SC_PROBE_ENABLED(name) __builtin_expect(SC_PROBE_SEM(name) != 0, 0)
#define SC_PROBE(name, ...)                                   \
	do {                                                  \
		if (SC_PROBE_ENABLED(name))                   \
			STAP_PROBEV(stagecache, name, __VA_ARGS__); \
	} while (0)
#else
/* Built without probes (the baseline of `stagecache bench probes`): nothing is evaluated, but the
 * arguments still count as used so locals computed for a probe do not trip -Werror. */
static inline void sc_probe_args_unused_(int unused, ...)
{
	(void)unused;
}
#define SC_PROBE_ENABLED(name) 0
#define SC_PROBE(name, ...)                                        \
	do {                                                       \
		if (0)                                             \
			sc_probe_args_unused_(0, __VA_ARGS__);     \
	} while (0)
#endif

#endif
