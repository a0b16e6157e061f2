/* shm/util.c — clocks, OFD byte locks (the liveness primitive, see shm/arena.h) and identity. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "util.h"

uint64_t shm_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return shm_ts_ns(ts);
}

uint64_t shm_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return shm_ts_ns(ts);
}

static int ofd(int fd, int cmd, short type, int64_t byte, struct flock *out)
{
	struct flock f = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)byte, .l_len = 1, .l_pid = 0 };
	int rc;
	do
		rc = fcntl(fd, cmd, &f);
	while (rc < 0 && errno == EINTR);
	if (out)
		*out = f;
	return rc < 0 ? -errno : 0;
}

int shm_ofd_trylock(int fd, int64_t byte)
{
	int rc = ofd(fd, F_OFD_SETLK, F_WRLCK, byte, NULL);
	return rc == -EACCES ? -EAGAIN : rc; /* POSIX allows either for "held" */
}

void shm_ofd_unlock(int fd, int64_t byte)
{
	(void)ofd(fd, F_OFD_SETLK, F_UNLCK, byte, NULL);
}

int shm_ofd_held(int fd, int64_t byte)
{
	struct flock f;
	int rc = ofd(fd, F_OFD_GETLK, F_WRLCK, byte, &f);
	if (rc)
		return rc;
	return f.l_type != F_UNLCK;
}

/* The namespace /proc/self/ns/@kind names, by its inode number (0: unknown). */
static uint64_t ns_self(const char *kind)
{
	char path[48];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/self/ns/%s", kind);
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

uint64_t shm_pidns_self(void)
{
	return ns_self("pid");
}

uint64_t shm_mntns_self(void)
{
	return ns_self("mnt");
}
