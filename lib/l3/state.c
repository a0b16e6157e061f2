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
	int rc = 0;
	struct stat sb;
	if (flock(fd, LOCK_EX) < 0 || fstat(fd, &sb) < 0) {
		rc = -errno;
		goto cleanup;
	}
	if (sb.st_size == 0 && !create) {
		rc = -ENOENT; /* never initialised: not an L3 directory yet */
		goto cleanup;
	}
	if (sb.st_size == 0 && ftruncate(fd, sizeof(struct l3_state)) < 0) {
		rc = -errno;
		goto cleanup;
	}
	if (sb.st_size != 0 && sb.st_size != (off_t)sizeof(struct l3_state)) {
		rc = -EBADMSG;
		goto cleanup;
	}
	void *m = mmap(NULL, sizeof(struct l3_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rc = -errno;
		goto cleanup;
	}
	l3->st = m;
	if (l3->st->magic == 0) {
		l3->st->version = L3_FORMAT_VERSION;
		l3->st->size = sizeof(struct l3_state);
		l3->st->magic = L3_STATE_MAGIC;
	} else if (l3->st->magic != L3_STATE_MAGIC || l3->st->size != sizeof(struct l3_state)) {
		munmap(m, sizeof(struct l3_state));
		l3->st = NULL;
		rc = -EBADMSG;
		goto cleanup;
	}
	l3_dio_detect(l3, fd);
cleanup:
	flock(fd, LOCK_UN);
	close(fd);
	return rc;
}


/* ---- per-host counters (shared mode) ---- */

int l3_state_open_host(struct sc_l3 *l3)
{
	char real[4096], path[4200];
	const char *sd = l3->opts.state_dir ? l3->opts.state_dir : "/dev/shm";
	if (!realpath(l3->dir, real))
		snprintf(real, sizeof(real), "%s", l3->dir);
	XXH64_state_t hs;
	XXH64_reset(&hs, 0);
	XXH64_update(&hs, l3->host, strlen(l3->host) + 1);
	XXH64_update(&hs, real, strlen(real));
	snprintf(path, sizeof(path), "%s/stagecache-l3.%016llx.state", sd, (unsigned long long)XXH64_digest(&hs));
	int fd = l3_create_file(l3, AT_FDCWD, path, O_RDWR);
	void *m = MAP_FAILED;
	if (fd >= 0) {
		struct stat sb;
		if (flock(fd, LOCK_EX) == 0 && fstat(fd, &sb) == 0 &&
		    (sb.st_size == (off_t)sizeof(struct l3_state) ||
		     (sb.st_size == 0 && ftruncate(fd, sizeof(struct l3_state)) == 0)))
			m = mmap(NULL, sizeof(struct l3_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			struct l3_state *st = m;
			if (st->magic == 0) {
				st->version = L3_FORMAT_VERSION;
				st->size = sizeof(struct l3_state);
				st->magic = L3_STATE_MAGIC;
			} else if (st->magic != L3_STATE_MAGIC || st->size != sizeof(struct l3_state)) {
				munmap(m, sizeof(struct l3_state));
				m = MAP_FAILED;
			}
		}
		flock(fd, LOCK_UN);
		close(fd);
	}
	if (m == MAP_FAILED) {
		/* no host-local file: counters of this handle only */
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
