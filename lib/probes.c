/* lib/probes.c — the semaphores of the USDT probes (one definition each; see lib/probes.h).
 * A tracer that attaches increments a semaphore in the .probes section; the guard in SC_PROBE
 * then takes the branch. */
#include "probes.h"

#ifndef SC_NO_PROBES
#define SC_PROBE_DEFINE(name) unsigned short SC_PROBE_SEM(name) __attribute__((section(".probes"), used))
#define SC_PROBE_DEFINE_X_(name, nargs) SC_PROBE_DEFINE(name);
SC_PROBE_LIST(SC_PROBE_DEFINE_X_)
#endif
