/*
 * lib/l3/state.c — DIR/state: the counters every process using the directory shares (mmap'd,
 * relaxed atomics: they are statistics), and in shared mode the host's own state file instead.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../xxh.h"
#include "types.h"
#include "files.h"
#include "state.h"

/* ---- the shared state file ---- */

/* Map the counters of @fd, initialising them when the file is new. An initialised file is mapped
 * without a lock (a reader's shared lock, held forever, blocks nobody); a new one under the
 * file's lock, waited on for a bounded time. @create: a 0-byte file may be initialised. 0, -ENOENT
 * (empty and !@create), -EBUSY (empty and its lock held), -EBADMSG (not a state file) or -errno. */
static int state_map(int fd, int create, struct l3_state **out)
{
	struct stat sb;
	int rc = 0, locked = 0;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (sb.st_size != (off_t)sizeof(struct l3_state)) {
		if (sb.st_size == 0 && !create)
			return -ENOENT; /* never initialised: not an L3 directory yet */
		if ((rc = l3_flock_wait(fd, LOCK_EX, L3_LOCK_WAIT_MS)))
			return rc;
		locked = 1;
		if (fstat(fd, &sb) < 0)
			rc = -errno;
		else if (sb.st_size == 0 && ftruncate(fd, sizeof(struct l3_state)) < 0)
			rc = -errno;
		else if (sb.st_size != 0 && sb.st_size != (off_t)sizeof(struct l3_state))
			rc = -EBADMSG;
		if (rc)
			goto cleanup;
	}
	struct l3_state *st = mmap(NULL, sizeof(struct l3_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (st == MAP_FAILED) {
		rc = -errno;
		goto cleanup;
	}
	/* written under the lock by the creator; a process that maps it between the ftruncate and
	 * these stores writes the same values */
	if (st->magic == 0) {
		st->version = L3_FORMAT_VERSION;
		st->size = sizeof(struct l3_state);
		st->magic = L3_STATE_MAGIC;
	} else if (st->magic != L3_STATE_MAGIC || st->size != sizeof(struct l3_state)) {
		munmap(st, sizeof(struct l3_state));
		rc = -EBADMSG;
		goto cleanup;
	}
	*out = st;
cleanup:
	if (locked)
		flock(fd, LOCK_UN);
	return rc;
}


int l3_state_open(struct sc_l3 *l3, int create)
{
	int fd = l3_open_file(l3->dirfd, "state", O_RDWR);
	if (fd == -ENOENT && create) {
		fd = openat(l3->dirfd, "state", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, l3->file_mode);
		if (fd < 0 && errno == EEXIST)
			fd = l3_open_file(l3->dirfd, "state", O_RDWR); /* another process made it first */
		else if (fd < 0)
			fd = -errno;
		else if (l3_own(l3, fd, 0) < 0) {
			int e = errno;
			close(fd);
			unlinkat(l3->dirfd, "state", 0);
			return -e;
		}
	}
	if (fd < 0)
		return fd;
	int rc = state_map(fd, create, &l3->st);
	if (!rc)
		l3_dio_detect(l3, fd);
	close(fd);
	return rc;
}


/* ---- per-host counters (shared mode) ---- */

/* May this process use the per-host file @sb for the store whose directory is @dsb? It sits in a
 * world-writable directory (/dev/shm), where anyone may have made it first: only a file made by
 * this user, root or the store's owner, or one of the store's group that others cannot open. */
static int host_file_trusted(const struct stat *sb, const struct stat *dsb)
{
	if (!S_ISREG(sb->st_mode) || (sb->st_mode & 0002))
		return 0;
	if (sb->st_uid == geteuid() || sb->st_uid == 0 || sb->st_uid == dsb->st_uid)
		return 1;
	/* only a member (or root) can give a file the store's group */
	return dsb->st_gid != 0 && sb->st_gid == dsb->st_gid && !(sb->st_mode & 0007);
}


int l3_state_open_host(struct sc_l3 *l3)
{
	char real[4096], name[64];
	const char *sd = l3->opts.state_dir ? l3->opts.state_dir : "/dev/shm";
	if (!realpath(l3->dir, real))
		snprintf(real, sizeof(real), "%s", l3->dir);
	XXH64_state_t hs;
	XXH64_reset(&hs, 0);
	XXH64_update(&hs, l3->host, strlen(l3->host) + 1);
	XXH64_update(&hs, real, strlen(real));
	snprintf(name, sizeof(name), "stagecache-l3.%016llx.state", (unsigned long long)XXH64_digest(&hs));
	void *m = MAP_FAILED;
	struct stat sb, dsb;
	int sdfd = open(sd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = sdfd < 0 ? -errno : l3_create_file(l3, sdfd, name, O_RDWR);
	if (fd >= 0 && fstat(fd, &sb) == 0 && fstat(l3->dirfd, &dsb) == 0 && host_file_trusted(&sb, &dsb)) {
		struct l3_state *st;
		if (state_map(fd, 1, &st) == 0)
			m = st;
	}
	if (fd >= 0)
		close(fd);
	if (sdfd >= 0)
		close(sdfd);
	if (m == MAP_FAILED) {
		/* no host-local file we may use: counters of this handle only */
		if (!(m = calloc(1, sizeof(struct l3_state))))
			return -ENOMEM;
		l3->state_private = 1;
	}
	l3->st = m;
	/* O_DIRECT alignment of the shared filesystem, from a file on it */
	l3_dio_detect(l3, l3->lockfd);
	return 0;
}


void l3_state_close(struct sc_l3 *l3)
{
	if (!l3->st)
		return;
	if (l3->state_private)
		free(l3->st);
	else
		munmap(l3->st, sizeof(struct l3_state));
	l3->st = NULL;
}
