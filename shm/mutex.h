/*
 * shm/mutex.h — the arena's writer locks: a futex word whose owner is an owner token
 * (shm/readers.h), robust across processes, pid namespaces and users.
 *
 * Why not pthread robust mutexes: their lock word holds the owner's thread id in its own pid
 * namespace, so a process in another namespace cannot tell whether the owner lives, and two
 * containers' threads can share an id (the kernel's robust-list cleanup of one may then mark the
 * other's lock dead); glibc also aborts on some scribbled type words. Here the word names the
 * owner's reader-slot token, whose liveness any process can test (the kernel-released slot lock).
 *
 * Word: 0 free; else owner token | SHM_MUTEX_WAITERS (bit 31: someone may sleep on it).
 * Return values follow the library (negative errno): 0; -EOWNERDEAD (the previous holder died
 * holding it: the caller now holds it and repairs what it protects — there is no separate
 * "consistent" step; dying during the repair hands -EOWNERDEAD to the next locker); -EBUSY
 * (trylock); -EBADMSG (not a lock we made: the magic word is wrong — fsck re-initialises it).
 * A waiter sleeps in bounded slices and tests the owner's liveness after each: no lock ever
 * waits on a dead process for longer than a slice. Protocol: shm/mutex.c.
 */
#ifndef SC_SHM_MUTEX_H
#define SC_SHM_MUTEX_H

#include "region.h"
#include "util.h"

#define SHM_MUTEX_MAGIC 0x4d435453u     /* "STCM" */
#define SHM_MUTEX_WAITERS 0x80000000u

struct shm_mutex {
	_Atomic uint32_t word;    /* 0, or owner token | SHM_MUTEX_WAITERS */
	uint32_t magic;           /* SHM_MUTEX_MAGIC, written by shm_mutex_init */
};
_Static_assert(sizeof(struct shm_mutex) == 8, "mutex layout");

/* Initialise (creation, or fsck --repair with every other writer stopped). */
void shm_mutex_init(struct shm_mutex *m);
/* Lock as the holder of @a's token. 0, -EOWNERDEAD (held now; repair), -EBADMSG, -ECHILD (@a is
 * a handle inherited through fork: it belongs to the parent). */
int shm_mutex_lock(struct shm_arena *a, struct shm_mutex *m);
/* 0, -EBUSY (held by someone, alive or not: blocking lockers take dead holders' locks over),
 * -EBADMSG. */
int shm_mutex_trylock(struct shm_arena *a, struct shm_mutex *m);
void shm_mutex_unlock(struct shm_arena *a, struct shm_mutex *m);
/* Is the magic word ours? */
int shm_mutex_valid(const struct shm_mutex *m);
/* 0 when @m is a lock we made whose word is free or names a well-formed token (alive, or dead
 * and taken over by the next locker); -EBADMSG otherwise. Never blocks. */
int shm_mutex_check(struct shm_arena *a, const struct shm_mutex *m);
/* The token holding @m (0: free); for fsck's report. */
uint32_t shm_mutex_owner(const struct shm_mutex *m);

/* `*_locked` functions state that their caller holds a lock; the test build checks it at their
 * entry (SHM_MUTEX_HELD): a call made without the lock, or after it was released, ends the process
 * as an armed fault point does (shm_fault_broken, naming the function), so that every test running
 * the path fails. Nothing in the product library. */
#ifdef SC_TEST_HOOKS
void shm_mutex_held(struct shm_arena *a, const struct shm_mutex *m, const char *fn);
#define SHM_MUTEX_HELD(a, m) shm_mutex_held((a), (m), __func__)
#else
#define SHM_MUTEX_HELD(a, m) ((void)0)
#endif

#endif
