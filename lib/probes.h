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
 * l2_miss              stage, tokens, reason (0 absent, 1 location mismatch, 2 error), lookup_ns
 * l2_admit             stage, digest_lo, digest_hi, bytes, origin
 * l2_reject            stage, bytes, reason (positive errno)
 * l2_evict             stage, digest_lo, digest_hi, bytes
 * l2_remove            stage, digest_lo, digest_hi, bytes, reason (0 explicit, 1 mismatch, 2 invalidate, 3 clear)
 * promote_decision     stage, digest_lo, digest_hi, tokens, bytes, decision (1 promote, 0 not), why (enum sc_promote_why)
 * l3_fill_start        stage, digest_lo, digest_hi, bytes
 * l3_fill_done         stage, digest_lo, digest_hi, bytes, duration_ns, result (0 or negative errno)
 * l3_quarantine        digest_lo, digest_hi, reason (positive errno)
 * commit_emit          ring, request_id, running_total, batch_tokens
 * ring_full            ring, request_id, pending_tokens
 *
 * "stage" is the stage id: the low 64 bits of the stage's identity hash (see lib/l2).
 */
#ifndef SC_LIB_PROBES_H
#define SC_LIB_PROBES_H

#ifndef SC_NO_PROBES
#define _SDT_HAS_SEMAPHORES 1
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>

#define SC_PROBE_SEM(name) stagecache_##name##_semaphore
#define SC_PROBE_DECLARE(name) extern unsigned short SC_PROBE_SEM(name)
SC_PROBE_DECLARE(l2_hit);
SC_PROBE_DECLARE(l2_miss);
SC_PROBE_DECLARE(l2_admit);
SC_PROBE_DECLARE(l2_reject);
SC_PROBE_DECLARE(l2_evict);
SC_PROBE_DECLARE(l2_remove);
SC_PROBE_DECLARE(promote_decision);
SC_PROBE_DECLARE(l3_fill_start);
SC_PROBE_DECLARE(l3_fill_done);
SC_PROBE_DECLARE(l3_quarantine);
SC_PROBE_DECLARE(commit_emit);
SC_PROBE_DECLARE(ring_full);

#define SC_PROBE_ENABLED(name) __builtin_expect(SC_PROBE_SEM(name) != 0, 0)
#define SC_PROBE(name, ...)                                   \
	do {                                                  \
		if (SC_PROBE_ENABLED(name))                   \
			STAP_PROBEV(stagecache, name, __VA_ARGS__); \
	} while (0)
#else
#define SC_PROBE_ENABLED(name) 0
#define SC_PROBE(name, ...) do { } while (0)
#endif

#endif
