/*
 * shm/fault.h — fault injection for crash tests (owned by the heap module; used by every module).
 *
 * A module marks the instructions where a crash is interesting with shm_fault_point("mod.where").
 * Unarmed (always, in production) a point costs one relaxed load and a not-taken branch. A test
 * arms one point, in the process that should die, with shm_fault_arm("heap.free.merge") or
 * "name@N" (die at the N-th hit), or through the environment variable SC_FAULT with the same
 * syntax (read once, at the first point reached; ignored in set-uid processes). When the armed
 * point is reached the process sends itself SIGKILL: it dies at exactly that instruction, holding
 * whatever locks it holds, as a crash would leave it.
 *
 * Process-local state only; nothing here lives in shared memory.
 */
#ifndef SC_SHM_FAULT_H
#define SC_SHM_FAULT_H

#include <stdatomic.h>

/* -1: SC_FAULT not read yet, 0: nothing armed, 1: a point is armed. */
extern _Atomic int shm_fault_state;

/* Arm @spec ("name" or "name@N", N >= 1) in this process, replacing what was armed;
 * NULL or "" disarms. Returns 0, or -EINVAL for a malformed spec (then nothing is armed). */
int shm_fault_arm(const char *spec);
/* Slow path of shm_fault_point: compare with the armed point, count, and die. */
void shm_fault_hit(const char *name);

static inline void shm_fault_point(const char *name)
{
	/* relaxed: the state is process-local configuration, not a synchronisation flag */
	if (__builtin_expect(atomic_load_explicit(&shm_fault_state, memory_order_relaxed) != 0, 0))
		shm_fault_hit(name);
}

#endif
