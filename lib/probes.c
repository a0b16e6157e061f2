/* lib/probes.c — the semaphores of the USDT probes (one definition each; see lib/probes.h).
 * A tracer that attaches increments a semaphore in the .probes section; the guard in SC_PROBE
 * then takes the branch. */
#include "probes.h"

#ifndef SC_NO_PROBES
#define SC_PROBE_DEFINE(name) unsigned short SC_PROBE_SEM(name) __attribute__((section(".probes"), used))
SC_PROBE_DEFINE(l2_hit);
SC_PROBE_DEFINE(l2_miss);
SC_PROBE_DEFINE(l2_admit);
SC_PROBE_DEFINE(l2_reject);
SC_PROBE_DEFINE(l2_evict);
SC_PROBE_DEFINE(l2_remove);
SC_PROBE_DEFINE(promote_decision);
SC_PROBE_DEFINE(l3_fill_start);
SC_PROBE_DEFINE(l3_fill_done);
SC_PROBE_DEFINE(l3_quarantine);
SC_PROBE_DEFINE(commit_emit);
SC_PROBE_DEFINE(ring_full);
#endif
