/*
 * lib/l3/write.c — durable writes: a temp file named with the writer's identity and locked by it
 * from creation (the lock goes only when the last write through that description landed, so a
 * reconciler never judges a file a dead writer is still writing), written with pwritev, fsync'd on
 * the thread's ring, renamed into place, and the directory fsync'd.
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

int l3_wfile_create(struct sc_l3 *l3, int dfd, const char *sub, struct l3_wfile *w)
{
	w->sfd = w->fd = -1;
	l3_tmp_name(l3, ".tmp-", w->tmp, sizeof(w->tmp));
	int rc = l3_mkdir_at(l3, dfd, sub);
	if (rc)
		return rc;
	/* the subdirectory opened once without following a link: a member's link (or file) in its
	 * place is never followed; it is removed (the link itself, not what it names) and the
	 * subdirectory made again */
	int sfd = l3_open_dir_at(dfd, sub);
	struct stat sb;
	if ((sfd == -ENOTDIR || sfd == -ELOOP) && fstatat(dfd, sub, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !S_ISDIR(sb.st_mode) && unlinkat(dfd, sub, 0) == 0 && !(rc = l3_mkdir_at(l3, dfd, sub)))
		sfd = l3_open_dir_at(dfd, sub);
	if (sfd < 0)
		return sfd;
	w->sfd = sfd;
	/* the temp file in DIR/tmp (a store made before it: beside the final name), so that
	 * reconciliation finds a dead writer's leftovers without listing the store */
	w->tfd = l3->tmpfd >= 0 ? l3->tmpfd : sfd;
	w->fd = openat(w->tfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, l3->file_mode);
	if (w->fd < 0) {
		rc = -errno;
		l3_wfile_close(w);
		return rc;
	}
	(void)shm_ofd_trylock(w->fd, 0); /* "being written": reconcilers leave it alone (tmp_is_stale) */
	shm_fault_point("l3.put.created");
	if ((rc = l3_own(l3, w->fd, 0)))
		l3_wfile_close(w);
	return rc;
}

int l3_wfile_place(struct l3_wfile *w, const char *final, int noreplace)
{
	int rc = 0;
	if (noreplace) {
		if (renameat2(w->tfd, w->tmp, w->sfd, final, RENAME_NOREPLACE) < 0) {
			rc = -errno;
			if (rc == -EINVAL) /* filesystem without RENAME_NOREPLACE: link is no-replace too */
				rc = linkat(w->tfd, w->tmp, w->sfd, final, 0) < 0 ? -errno : 0;
			unlinkat(w->tfd, w->tmp, 0);
		}
	} else if (renameat(w->tfd, w->tmp, w->sfd, final) < 0) {
		return -errno; /* the temp file stays: l3_wfile_close removes it */
	}
	close(w->fd); /* the lock goes with it: the name is in place (or the temp removed) */
	w->fd = -1;
	return rc;
}

void l3_wfile_close(struct l3_wfile *w)
{
	if (w->fd >= 0) {
		close(w->fd);
		unlinkat(w->tfd, w->tmp, 0);
	}
	if (w->sfd >= 0)
		close(w->sfd);
	w->fd = w->sfd = -1;
}

int l3_write_file(struct sc_l3 *l3, int dfd, const char *sub, const char *final, const struct iovec *iov, int niov,
		  int noreplace)
{
	struct l3_wfile w;
	int rc = l3_wfile_create(l3, dfd, sub, &w);
	if (rc)
		return rc;
	struct l3_ring *r = l3_ring_get(l3);
	if (!r) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = l3_write_at(w.fd, iov, niov, 0)))
		goto out;
	shm_fault_point("l3.put.written");
	if ((rc = l3_ring_fsync(r, w.fd)))
		goto out;
	shm_fault_point("l3.put.before_rename");
	if ((rc = l3_wfile_place(&w, final, noreplace))) {
		/* -EEXIST: another writer's rename was first (no-replace), and its directory may not be
		 * synced yet; or a directory holds the name (a sync that costs nothing more) */
		if (rc == -EEXIST) {
			int src = l3_fsync_dir_at(w.sfd, NULL);
			rc = src ? src : rc;
		}
		goto out;
	}
	shm_fault_point("l3.put.after_rename");
	/* the new name is durable once its directory is (DIR/tmp is not synced: a temp file that a
	 * power cut brings back is a dead writer's, removed by reconciliation) */
	rc = fsync(w.sfd) < 0 ? -errno : 0;
out:
	l3_wfile_close(&w);
	return rc;
}


#ifdef SC_TEST_HOOKS
uint64_t l3_settle_ns = L3_SETTLE_NS;
#define SETTLE_NS l3_settle_ns
#else
#define SETTLE_NS L3_SETTLE_NS
#endif

static int settled_at(uint64_t changed)
{
	uint64_t now = shm_realtime_ns();
	return changed <= now && now - changed >= SETTLE_NS;
}

int l3_name_young(int dfd, const char *sub, const struct stat *sb)
{
	if (settled_at(shm_ts_ns(sb->st_ctim)))
		return 0;
	/* the file changed lately, but a touch (a use) changes it too: a rename into the directory
	 * also moves the directory's mtime, a touch does not */
	struct stat ds;
	int rc = sub ? fstatat(dfd, sub, &ds, AT_SYMLINK_NOFOLLOW) : fstat(dfd, &ds);
	return rc < 0 || !settled_at(shm_ts_ns(ds.st_mtim));
}

/* Does this handle know token length @tokens durable? With @add it learns it (the oldest
 * forgotten past L3_DURABLE_LENGTHS). */
static int length_durable(struct sc_l3 *l3, uint32_t tokens, int add)
{
	pthread_mutex_lock(&l3->mu);
	uint32_t n = l3->ndurable_len < L3_DURABLE_LENGTHS ? l3->ndurable_len : L3_DURABLE_LENGTHS;
	int known = 0;
	for (uint32_t i = 0; i < n && !known; i++)
		known = l3->durable_len[i] == tokens;
	if (add && !known)
		l3->durable_len[l3->ndurable_len++ % L3_DURABLE_LENGTHS] = tokens;
	pthread_mutex_unlock(&l3->mu);
	return known;
}

/* Register token length @tokens (idempotent); the lengths directory's mtime tells readers to rescan. */
int l3_put_length(struct sc_l3 *l3, uint32_t tokens)
{
	char len[16];
	snprintf(len, sizeof(len), "%u", tokens);
	struct stat sb;
	if (fstatat(l3->lenfd, len, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!l3_name_young(l3->lenfd, NULL, &sb) || length_durable(l3, tokens, 0))
			return 0;
		int rc = l3_fsync_dir_at(l3->lenfd, NULL);
		if (!rc)
			length_durable(l3, tokens, 1);
		return rc;
	}
	int fd = openat(l3->lenfd, len, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, l3->file_mode);
	if (fd < 0)
		return -errno;
	int orc = l3_own(l3, fd, 0);
	close(fd);
	if (orc)
		return orc;
	int rc = fsync(l3->lenfd) < 0 ? -errno : 0;
	if (!rc)
		length_durable(l3, tokens, 1);
	pthread_mutex_lock(&l3->mu);
	l3->lengths_settled = 0;
	pthread_mutex_unlock(&l3->mu);
	return rc;
}


int l3_replace_top(struct sc_l3 *l3, const char *name, const struct iovec *iov, int niov, int sync,
		   int (*fence)(struct sc_l3 *))
{
	char tmp[L3_WRITER_MAX + 24];
	l3_tmp_name(l3, ".tmp-", tmp, sizeof(tmp));
	int rc = 0, fd = l3_create_file(l3, l3->dirfd, tmp, O_WRONLY | O_EXCL);
	if (fd < 0)
		return fd;
	(void)shm_ofd_trylock(fd, 0); /* being written: not left over */
	size_t len = 0;
	for (int i = 0; i < niov; i++)
		len += iov[i].iov_len;
	if (pwritev(fd, iov, niov, 0) != (ssize_t)len || (sync && fsync(fd) < 0))
		rc = -EIO;
	close(fd);
	if (!rc && fence)
		rc = fence(l3);
	if (!rc && renameat(l3->dirfd, tmp, l3->dirfd, name) < 0)
		rc = -errno;
	if (rc)
		unlinkat(l3->dirfd, tmp, 0);
	return rc;
}
