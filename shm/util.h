/* shm/util.h — clocks and OFD byte locks (shm/util.c): below every module of shm/. */
#ifndef SC_SHM_UTIL_H
#define SC_SHM_UTIL_H

#include <stdint.h>
#include <time.h>

#define SHM_NS_PER_SEC 1000000000ull
/* A clock reading or a file time in ns (files older than 1970 come out as negative int64). */
static inline uint64_t shm_ts_ns(struct timespec ts)
{
	return (uint64_t)ts.tv_sec * SHM_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}
uint64_t shm_now_ns(void);          /* CLOCK_MONOTONIC */
uint64_t shm_realtime_ns(void);     /* CLOCK_REALTIME */
/* OFD byte locks (see SHM_LOCK_*): 0 taken, -EAGAIN held through another file description,
 * or -errno. */
int shm_ofd_trylock(int fd, int64_t byte);
void shm_ofd_unlock(int fd, int64_t byte);
/* 1 when a file description other than @fd's holds @byte, 0 when none does, -errno. */
int shm_ofd_held(int fd, int64_t byte);
/* Inode of this process's pid namespace (0 if unknown), for people reading `info`. */
uint64_t shm_pidns_self(void);
/* Inode of this process's mount namespace (0 if unknown): whose paths a recorded one is. */
uint64_t shm_mntns_self(void);

#endif
