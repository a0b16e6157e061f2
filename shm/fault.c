/*
 * shm/fault.c — test hooks (fault points, schedule points): see shm/fault.h. Test build only.
 *
 * Protocol: all state is process-local (no shared memory). shm_fault_state is read relaxed on the
 * fast path; a test arms before it starts the operation it wants to crash (same thread, so program
 * order suffices). The countdown is atomic so that threads racing through the same point kill the
 * process exactly once, at the N-th hit.
 */
#ifdef SC_TEST_HOOKS
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"

_Atomic int shm_fault_state = -1;
void (*_Atomic shm_sched_hook)(const char *point, void *ctx);
static void *sched_ctx;
static char fault_name[64];
static _Atomic unsigned long fault_countdown;

int shm_fault_arm(const char *spec)
{
	atomic_store_explicit(&shm_fault_state, 0, memory_order_relaxed);
	if (!spec || !*spec)
		return 0;
	const char *at = strchr(spec, '@');
	size_t n = at ? (size_t)(at - spec) : strlen(spec);
	unsigned long count = 1;
	if (at) {
		char *end;
		errno = 0;
		count = strtoul(at + 1, &end, 10);
		if (errno || end == at + 1 || *end || count == 0)
			return -EINVAL;
	}
	if (n == 0 || n >= sizeof(fault_name))
		return -EINVAL;
	memcpy(fault_name, spec, n);
	fault_name[n] = 0;
	atomic_store_explicit(&fault_countdown, count, memory_order_relaxed);
	atomic_store_explicit(&shm_fault_state, 1, memory_order_relaxed);
	return 0;
}

/* Die at once, as abruptly as a kill -9 from outside. */
static _Noreturn void die_now(void)
{
	if (getpid() == 1)
		_exit(128 + SIGKILL); /* a pid namespace's init ignores its own SIGKILL: exit as abruptly */
	kill(getpid(), SIGKILL);
	for (;;)
		pause();    /* SIGKILL to ourselves is delivered before kill() returns; never reached */
}

void shm_fault_hit(const char *name)
{
	int st = atomic_load_explicit(&shm_fault_state, memory_order_relaxed);
	if (st < 0) {
		/* first point reached: take the environment's setting (a malformed one arms nothing) */
		if (shm_fault_arm(secure_getenv("SC_FAULT")))
			atomic_store_explicit(&shm_fault_state, 0, memory_order_relaxed);
		st = atomic_load_explicit(&shm_fault_state, memory_order_relaxed);
	}
	if (st != 1 || strcmp(name, fault_name) != 0)
		return;
	if (atomic_fetch_sub_explicit(&fault_countdown, 1, memory_order_relaxed) != 1)
		return;
	die_now();
}

/* The rule the last shm_fault_broken call named (for a debugger: the process is gone after). */
static const char *_Atomic broken_rule;

void shm_fault_broken(const char *rule)
{
	atomic_store_explicit(&broken_rule, rule, memory_order_relaxed);
	die_now();
}

void shm_sched_set(void (*fn)(const char *point, void *ctx), void *ctx)
{
	sched_ctx = ctx;
	atomic_store_explicit(&shm_sched_hook, fn, memory_order_relaxed);
}

void shm_sched_hit(const char *name)
{
	void (*fn)(const char *, void *) = atomic_load_explicit(&shm_sched_hook, memory_order_relaxed);
	if (fn)
		fn(name, sched_ctx);
}
#endif
