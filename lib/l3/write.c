/*
 * lib/l3/write.c — durable writes: a temp file named with the writer's identity and locked by it
 * from creation (the lock goes only when the last write through that description landed, so a
 * reconciler never judges a file a dead writer's ring is still writing), written on the thread's
 * ring, fsync'd, renamed into place, and the directory fsync'd.
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
#include "../../shm/fault.h"
#include "files.h"
#include "fill.h"
#include "ring.h"
#include "hosts.h"
#include "write.h"

/* ---- put ---- */

int l3_write_file(struct sc_l3 *l3, int dfd, const char *sub, const char *final, const struct iovec *iov, int niov,
		  int noreplace)
{
	char tmp[L3_WRITER_MAX + 24], tmprel[L3_WRITER_MAX + 32], finrel[100];
	l3_tmp_name(l3, ".tmp-", tmp, sizeof(tmp));
	/* in DIR/tmp (a store made before it: beside the final name), so that reconciliation finds
	 * a dead writer's leftovers without listing the store */
	int tfd = l3->tmpfd >= 0 ? l3->tmpfd : dfd;
	if (l3->tmpfd >= 0)
		snprintf(tmprel, sizeof(tmprel), "%s", tmp);
	else
		snprintf(tmprel, sizeof(tmprel), "%s/%s", sub, tmp);
	snprintf(finrel, sizeof(finrel), "%s/%s", sub, final);
	int rc = l3_mkdir_at(l3, dfd, sub);
	if (rc)
		return rc;
	int fd = openat(tfd, tmprel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, l3->file_mode);
	if (fd < 0)
		return -errno;
	(void)shm_ofd_trylock(fd, 0); /* "being written": reconcilers leave it alone (tmp_is_stale) */
	shm_fault_point("l3.put.created");
	if ((rc = l3_own(l3, fd, 0)))
		goto cleanup;
	struct l3_ring *r = l3_ring_get(l3);
	if (!r) {
		rc = -ENOMEM;
		goto cleanup;
	}
	if ((rc = l3_ring_writev(r, fd, iov, niov, 0)))
		goto cleanup;
	shm_fault_point("l3.put.written");
	if ((rc = l3_ring_fsync(r, fd)))
		goto cleanup;
	shm_fault_point("l3.put.before_rename");
	if (noreplace) {
		if (renameat2(tfd, tmprel, dfd, finrel, RENAME_NOREPLACE) < 0) {
			rc = -errno;
			if (rc == -EINVAL) /* filesystem without RENAME_NOREPLACE: link is no-replace too */
				rc = linkat(tfd, tmprel, dfd, finrel, 0) < 0 ? -errno : 0;
			unlinkat(tfd, tmprel, 0);
			if (rc)
				goto cleanup;
		}
	} else if (renameat(tfd, tmprel, dfd, finrel) < 0) {
		rc = -errno;
		goto cleanup;
	}
	close(fd);
	fd = -1;
	shm_fault_point("l3.put.after_rename");
	/* the new name is durable once its directory is (DIR/tmp is not synced: a temp file that a
	 * power cut brings back is a dead writer's, removed by reconciliation) */
	return l3_fsync_dir_at(dfd, sub);
cleanup:
	if (fd >= 0) {
		close(fd);
		unlinkat(tfd, tmprel, 0);
	}
	return rc;
}


/* Register token length @tokens (idempotent); the lengths directory's mtime tells readers to rescan. */
int l3_put_length(struct sc_l3 *l3, uint32_t tokens)
{
	char len[16];
	snprintf(len, sizeof(len), "%u", tokens);
	if (faccessat(l3->lenfd, len, F_OK, 0) == 0)
		return 0;
	int fd = openat(l3->lenfd, len, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, l3->file_mode);
	if (fd < 0)
		return -errno;
	int orc = l3_own(l3, fd, 0);
	close(fd);
	if (orc)
		return orc;
	fsync(l3->lenfd);
	pthread_mutex_lock(&l3->mu);
	l3->lengths_settled = 0;
	pthread_mutex_unlock(&l3->mu);
	return 0;
}
