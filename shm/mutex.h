/*
 * shm/mutex.h — process-shared robust mutexes that live in the arena, hardened against a
 * corrupted or hostile arena.
 *
 * A mutex in shared memory is data any attached process can scribble on. Two ways that goes
 * wrong inside glibc rather than in our code: a type word that is not the one we initialised
 * can make glibc kill the process on a failed assertion in its priority-protect paths, and a
 * lock word naming an owner thread that no longer exists, without the kernel's OWNER_DIED bit,
 * makes pthread_mutex_lock wait forever
 * (only a real thread death sets that bit). So every lock here first checks the type word
 * against the one shm_mutex_init wrote, and waits in bounded slices: after each slice it checks
 * that the owner named by the lock word is still alive, and gives up with EBADMSG if not.
 *
 * Return values follow pthread (positive): 0, EOWNERDEAD (the previous holder died: the caller
 * repairs what the mutex protects, then calls shm_mutex_consistent), EBUSY (trylock), and
 * EBADMSG (not a mutex we made, or a lock word naming a dead owner the kernel did not mark; also
 * ENOTRECOVERABLE). shm_mutex_reinit is for fsck --repair, with every other writer stopped.
 */
#ifndef SC_SHM_MUTEX_H
#define SC_SHM_MUTEX_H

#include <pthread.h>

/* Initialise @m as process-shared and robust. 0 or -errno. */
int shm_mutex_init(pthread_mutex_t *m);
int shm_mutex_lock(pthread_mutex_t *m);
int shm_mutex_trylock(pthread_mutex_t *m);
void shm_mutex_unlock(pthread_mutex_t *m);
void shm_mutex_consistent(pthread_mutex_t *m);
/* Is @m's type word the one shm_mutex_init writes? */
int shm_mutex_valid(const pthread_mutex_t *m);
/* 0 when @m looks like a mutex we made whose owner (if any) exists or was marked dead by the
 * kernel; EBADMSG otherwise. Never blocks. */
int shm_mutex_check(const pthread_mutex_t *m);
/* Re-initialise a mutex found corrupted (fsck --repair; nobody else may be using it). 0 or -errno. */
int shm_mutex_reinit(pthread_mutex_t *m);

#endif
