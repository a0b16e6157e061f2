/*
 * shm/fault.h — test hooks: fault points and schedule points (test build only, -DSC_TEST_HOOKS).
 *
 * Fault points. A module marks the instructions where a crash is interesting with
 * shm_fault_point("mod.where"). A test arms one point in the process that should die, with
 * shm_fault_arm("heap.free.merge") or "name@N" (die at the N-th hit), or through the environment
 * variable SC_FAULT (read once, at the first point reached; ignored in set-uid processes). The
 * process then sends itself SIGKILL at exactly that instruction, holding whatever it holds (pid 1
 * of a pid namespace ignores its own SIGKILL: it _exit()s with status 137 instead, as abruptly).
 *
 * Schedule points. shm_sched_point("mod.step") marks a step of a shared-memory protocol between
 * a check and the act that depends on it. A test installs a hook (shm_sched_set) that parks the
 * process there until a controller lets it go, so every ordering of two or three processes'
 * steps can be run (tests/interleave.c).
 *
 * Without SC_TEST_HOOKS (the product library) both compile to nothing: no symbol, no load, no
 * environment variable read. Process-local state only; nothing here lives in shared memory.
 */
#ifndef SC_SHM_FAULT_H
#define SC_SHM_FAULT_H

#ifdef SC_TEST_HOOKS
#include <stdatomic.h>

/* -1: SC_FAULT not read yet, 0: nothing armed, 1: a point is armed. */
extern _Atomic int shm_fault_state;
/* The installed schedule hook, or NULL. */
extern void (*_Atomic shm_sched_hook)(const char *point, void *ctx);

/* Arm @spec ("name" or "name@N", N >= 1) in this process, replacing what was armed;
 * NULL or "" disarms. Returns 0, or -EINVAL for a malformed spec (then nothing is armed). */
int shm_fault_arm(const char *spec);
/* Slow path of shm_fault_point: compare with the armed point, count, and die. */
void shm_fault_hit(const char *name);
/* A rule of the code found broken in this process (@rule names it, e.g. a `*_locked` function
 * entered without its lock): die as an armed fault point does, so that the test running it fails. */
void shm_fault_broken(const char *rule);
/* Install @fn (NULL: none) as this process's schedule hook. */
void shm_sched_set(void (*fn)(const char *point, void *ctx), void *ctx);
/* Slow path of shm_sched_point. */
void shm_sched_hit(const char *name);

static inline void shm_fault_point(const char *name)
{
	/* relaxed: the state is process-local configuration, not a synchronisation flag */
	if (__builtin_expect(atomic_load_explicit(&shm_fault_state, memory_order_relaxed) != 0, 0))
		shm_fault_hit(name);
}

static inline void shm_sched_point(const char *name)
{
	if (__builtin_expect(atomic_load_explicit(&shm_sched_hook, memory_order_relaxed) != 0, 0))
		shm_sched_hit(name);
}
#else
#define shm_fault_point(name) ((void)0)
#define shm_sched_point(name) ((void)0)
#endif

#endif
