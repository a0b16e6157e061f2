/*
 * shm/mutex.c — hardened process-shared robust mutexes (see shm/mutex.h for why).
 *
 * The checks read glibc's mutex words (__kind, __lock) directly: this is glibc-specific, as is
 * the robust-futex protocol they describe (lock word = owner TID | FUTEX_WAITERS | FUTEX_OWNER_DIED).
 * Elsewhere the checks compile away and the plain pthread calls remain.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>

#include "mutex.h"

#define SLICE_NS 200000000L /* how long to wait before looking at the owner again */

static int init_attr(pthread_mutex_t *m)
{
	pthread_mutexattr_t at;
	int rc = pthread_mutexattr_init(&at);
	if (!rc)
		rc = pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
	if (!rc)
		rc = pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
	if (!rc)
		rc = pthread_mutex_init(m, &at);
	pthread_mutexattr_destroy(&at);
	return rc;
}

#ifdef __GLIBC__
/* The type word shm_mutex_init produces, learnt once from a private mutex (same attributes). */
static int expected_kind(void)
{
	static _Atomic int kind = -1;
	int k = atomic_load_explicit(&kind, memory_order_relaxed);
	if (k == -1) {
		pthread_mutex_t probe;
		if (init_attr(&probe))
			return -1;
		k = probe.__data.__kind;
		pthread_mutex_destroy(&probe);
		atomic_store_explicit(&kind, k, memory_order_relaxed);
	}
	return k;
}

int shm_mutex_valid(const pthread_mutex_t *m)
{
	return __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED) == expected_kind();
}

/* The lock word names an owner that is gone and the kernel did not mark it: it never will. */
static int owner_vanished(const pthread_mutex_t *m)
{
	unsigned w = (unsigned)__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED);
	unsigned tid = w & FUTEX_TID_MASK;
	if (!tid || (w & FUTEX_OWNER_DIED))
		return 0;
	char path[32];
	snprintf(path, sizeof(path), "/proc/%u", tid); /* threads have a /proc entry too (unlisted) */
	if (access(path, F_OK) == 0 || errno != ENOENT)
		return 0;
	/* the holder may have unlocked and exited since we read the word: only the same word, still
	 * naming the vanished thread, is corruption */
	return (unsigned)__atomic_load_n(&m->__data.__lock, __ATOMIC_ACQUIRE) == w;
}
#else
int shm_mutex_valid(const pthread_mutex_t *m)
{
	(void)m;
	return 1;
}

static int owner_vanished(const pthread_mutex_t *m)
{
	(void)m;
	return 0;
}
#endif

int shm_mutex_check(const pthread_mutex_t *m)
{
	return !shm_mutex_valid(m) || owner_vanished(m) ? EBADMSG : 0;
}

int shm_mutex_init(pthread_mutex_t *m)
{
	return -init_attr(m);
}

int shm_mutex_reinit(pthread_mutex_t *m)
{
	return -init_attr(m);
}

static int result(int rc)
{
	return rc == 0 || rc == EOWNERDEAD || rc == EBUSY ? rc : EBADMSG;
}

int shm_mutex_lock(pthread_mutex_t *m)
{
	if (!shm_mutex_valid(m) || owner_vanished(m))
		return EBADMSG;
#ifdef __SANITIZE_THREAD__
	/* ThreadSanitizer's timedlock does not model EOWNERDEAD; the check above still catches an
	 * owner that vanished before we arrived */
	return result(pthread_mutex_lock(m));
#endif
	for (;;) {
		/* timedlock (CLOCK_REALTIME) rather than clocklock: sanitizers intercept it, and a
		 * clock step only changes the length of one slice */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += SLICE_NS;
		if (ts.tv_nsec >= 1000000000L)
			ts.tv_sec++, ts.tv_nsec -= 1000000000L;
		int rc = pthread_mutex_timedlock(m, &ts);
		if (rc != ETIMEDOUT)
			return result(rc);
		/* a slow holder is fine; an owner that no longer exists is corruption */
		if (owner_vanished(m) || !shm_mutex_valid(m))
			return EBADMSG;
	}
}

int shm_mutex_trylock(pthread_mutex_t *m)
{
	if (!shm_mutex_valid(m))
		return EBADMSG;
	return result(pthread_mutex_trylock(m));
}

void shm_mutex_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}

void shm_mutex_consistent(pthread_mutex_t *m)
{
	pthread_mutex_consistent(m);
}
