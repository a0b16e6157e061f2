/*
 * shm/mutex.c — the arena's writer locks (see shm/mutex.h for why they are not pthread's).
 *
 * Protocol
 * --------
 * Lock: CAS 0 -> me (acquire). Contended: make sure the waiters bit is set in the word we saw
 * (CAS w -> w | WAITERS), then FUTEX_WAIT on that value for one slice. After a slice that ended
 * by timeout, test the owner's token (shm_token_alive: one fcntl); when it is dead, CAS the very
 * word we saw (w) -> me | WAITERS and report -EOWNERDEAD: of several waiters that all find the
 * owner dead, exactly one CAS succeeds; a waiter whose CAS fails reads the word again (it now names
 * a live owner). The waiters bit is kept on takeover because others may still sleep.
 * Unlock: exchange the word with 0 (release: pairs with the next locker's acquire CAS), and
 * FUTEX_WAKE one sleeper if the bit was set. A woken waiter locks with the bit set (it cannot
 * know whether others still sleep), which costs at most one spare wake.
 * The word is data any attached process can scribble: a token that names no slot is dead by
 * shm_token_alive's rules and is taken over like a dead owner; a wrong magic refuses the lock.
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "mutex.h"
#include "readers.h"

/* First slice a waiter sleeps before testing the owner's liveness; doubled up to the maximum. */
#define SLICE_MIN_NS 2000000ull
#define SLICE_MAX_NS 50000000ull

void shm_mutex_init(struct shm_mutex *m)
{
	atomic_store_explicit(&m->word, 0, memory_order_relaxed);
	m->magic = SHM_MUTEX_MAGIC;
}

int shm_mutex_valid(const struct shm_mutex *m)
{
	return __atomic_load_n(&m->magic, __ATOMIC_RELAXED) == SHM_MUTEX_MAGIC;
}

uint32_t shm_mutex_owner(const struct shm_mutex *m)
{
	return atomic_load_explicit(&m->word, memory_order_relaxed) & ~SHM_MUTEX_WAITERS;
}

#ifdef SC_TEST_HOOKS
void shm_mutex_held(struct shm_arena *a, const struct shm_mutex *m, const char *fn)
{
	if (!a->token || shm_mutex_owner(m) != a->token)
		shm_fault_broken(fn);
}
#endif

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

int shm_mutex_trylock(struct shm_arena *a, struct shm_mutex *m)
{
	if (a->forked)
		return -ECHILD; /* the parent's handle, in a forked child: its token is not ours */
	if (!shm_mutex_valid(m) || !a->token)
		return -EBADMSG;
	uint32_t w = 0;
	/* acquire: pairs with the release exchange in shm_mutex_unlock */
	if (atomic_compare_exchange_strong_explicit(&m->word, &w, a->token, memory_order_acquire, memory_order_relaxed))
		return 0;
	return -EBUSY;
}

int shm_mutex_lock(struct shm_arena *a, struct shm_mutex *m)
{
	if (a->forked)
		return -ECHILD; /* the parent's handle, in a forked child: its token is not ours */
	if (!shm_mutex_valid(m) || !a->token)
		return -EBADMSG;
	uint32_t me = a->token, w = 0;
	if (atomic_compare_exchange_strong_explicit(&m->word, &w, me, memory_order_acquire, memory_order_relaxed))
		return 0;
	uint64_t slice = SLICE_MIN_NS;
	for (;;) {
		w = atomic_load_explicit(&m->word, memory_order_relaxed);
		if (w == 0) {
			if (atomic_compare_exchange_strong_explicit(&m->word, &w, me | SHM_MUTEX_WAITERS,
								    memory_order_acquire, memory_order_relaxed)) {
				shm_sched_point("mutex.lock.acquired");
				return 0;
			}
			continue;
		}
		if ((w & ~SHM_MUTEX_WAITERS) == me)
			return -EBADMSG; /* names us, and we do not hold it: scribbled */
		if (!(w & SHM_MUTEX_WAITERS)) {
			uint32_t nw = w | SHM_MUTEX_WAITERS;
			if (!atomic_compare_exchange_strong_explicit(&m->word, &w, nw, memory_order_relaxed,
								     memory_order_relaxed))
				continue;
			w = nw;
		}
		shm_sched_point("mutex.lock.wait");
		struct timespec ts = { (time_t)(slice / SHM_NS_PER_SEC), (long)(slice % SHM_NS_PER_SEC) };
		long rc = futex(&m->word, FUTEX_WAIT, w, &ts);
		if (rc == 0 || errno != ETIMEDOUT)
			continue; /* woken, or the word changed before we slept */
		if (shm_token_alive(a, w & ~SHM_MUTEX_WAITERS)) {
			slice = slice * 2 > SLICE_MAX_NS ? SLICE_MAX_NS : slice * 2;
			continue;
		}
		/* the holder is gone: take its lock over (exactly one waiter's CAS on w succeeds) */
		if (atomic_compare_exchange_strong_explicit(&m->word, &w, me | SHM_MUTEX_WAITERS, memory_order_acquire,
							    memory_order_relaxed)) {
			shm_sched_point("mutex.lock.acquired");
			return -EOWNERDEAD;
		}
	}
}

void shm_mutex_unlock(struct shm_arena *a, struct shm_mutex *m)
{
	(void)a;
	/* release: everything written under the lock happens-before the next locker's acquire */
	uint32_t w = atomic_exchange_explicit(&m->word, 0, memory_order_release);
	if (w & SHM_MUTEX_WAITERS)
		(void)futex(&m->word, FUTEX_WAKE, 1, NULL);
}

int shm_mutex_check(struct shm_arena *a, const struct shm_mutex *m)
{
	if (!shm_mutex_valid(m))
		return -EBADMSG;
	uint32_t t = shm_mutex_owner(m);
	if (!t)
		return 0;
	return shm_token_inc(t) && shm_token_inc(t) <= SHM_INC_MAX && shm_token_slot(t) < shm_readers_count(a) ? 0
														    : -EBADMSG;
}
