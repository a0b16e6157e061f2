/*
 * lib/l3/state.c — DIR/state: the counters every process using the directory shares (mmap'd,
 * relaxed atomics: they are statistics), and in shared mode the host's own state file instead.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../xxh.h"
#include "types.h"
#include "files.h"
#include "state.h"
#include "../../shm/util.h"

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


/* A directory's identity: its inode number and, where the filesystem keeps one, its birth time
 * (an inode number is soon reused after a removal; the birth time tells the directory made again
 * from the one removed). @path relative to @dfd, or "" for @dfd itself. 0 or -errno. */
struct dir_id {
	uint64_t ino, btime_ns, dev;
};

static int dir_identity(int dfd, const char *path, struct dir_id *id)
{
	struct statx sx;
	if (statx(dfd, path, path[0] ? 0 : AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &sx) < 0)
		return -errno;
	id->ino = sx.stx_ino;
	id->dev = (uint64_t)makedev(sx.stx_dev_major, sx.stx_dev_minor);
	id->btime_ns = (sx.stx_mask & STATX_BTIME) ? (uint64_t)sx.stx_btime.tv_sec * 1000000000ull + sx.stx_btime.tv_nsec : 0;
	return 0;
}

/* Is @rec recorded for the directory @id? (A birth time missing on either side is not compared.) */
static int rec_is(const struct l3_host_rec *rec, uint64_t rec_ino, const struct dir_id *id)
{
	return rec_ino == id->ino && (!rec->dir_btime_ns || !id->btime_ns || rec->dir_btime_ns == id->btime_ns);
}

/* Record in @st the store directory it counts for (identical values from every recorder). */
static void host_record(struct l3_state *st, const char *real, const struct dir_id *id, uint64_t ns)
{
	size_t n = strlen(real);
	if (real[0] != '/' || n >= sizeof(st->host.dir_path) || !ns || !id->ino)
		return; /* not recorded: such a file is never removed */
	__atomic_store_n(&st->host.dir_ino, 0, __ATOMIC_RELAXED);
	atomic_thread_fence(memory_order_release);
	memcpy(st->host.dir_path, real, n + 1);
	st->host.mntns = ns;
	st->host.dir_btime_ns = id->btime_ns;
	st->host.dir_dev = id->dev;
	__atomic_store_n(&st->host.dir_ino, id->ino, __ATOMIC_RELEASE);
}

/*
 * Take the per-host file open as @fd (mapped as @st) for the store @id of @l3: its shared lock is
 * held while the handle is open, which is how a sweep (host_sweep) tells a file in use. A file
 * recorded for another directory at this path (a store removed, then made again) is removed if
 * nobody else holds it, else used as it is and recorded anew. 1: use it; 0: do not (its lock held
 * exclusively for longer than a bounded wait); -1: the name is another file now, open it again.
 */
static int host_claim(int sdfd, const char *name, int fd, struct l3_state *st, const char *real,
		      const struct dir_id *id, uint64_t ns)
{
	if (l3_flock_wait(fd, LOCK_SH, L3_LOCK_WAIT_MS))
		return 0;
	if (!l3_still_named(sdfd, name, fd))
		return -1;
	uint64_t ino = __atomic_load_n(&st->host.dir_ino, __ATOMIC_ACQUIRE);
	if (ino && rec_is(&st->host, ino, id))
		return 1;
	if (ino) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			if (l3_still_named(sdfd, name, fd))
				unlinkat(sdfd, name, 0);
			return -1;
		}
		/* a conversion that fails may have dropped the shared lock (flock(2)): take it again */
		if (l3_flock_wait(fd, LOCK_SH, L3_LOCK_WAIT_MS))
			return 0;
	}
	host_record(st, real, id, ns);
	return 1;
}

/* Was the store a per-host file @rec was recorded for removed (as namespace @ns sees it)? Only a
 * store of filesystem @dev is judged: the one the caller just opened a store on, so that a path on
 * another filesystem (a network mount that hangs) is never looked up. */
static int host_store_gone(const struct l3_host_rec *rec, uint64_t ns, uint64_t dev)
{
	char path[sizeof(rec->dir_path)];
	struct dir_id id;
	if (!rec->dir_ino || !ns || rec->mntns != ns || rec->dir_dev != dev || rec->dir_path[0] != '/')
		return 0;
	memcpy(path, rec->dir_path, sizeof(path));
	path[sizeof(path) - 1] = 0;
	int rc = dir_identity(AT_FDCWD, path, &id);
	if (rc == 0)
		return !rec_is(rec, rec->dir_ino, &id);
	return rc == -ENOENT || rc == -ENOTDIR;
}

#define HOST_SWEEP_MAX 256u /* per-host files looked at by one open */

/*
 * Remove this user's per-host files in @sdfd whose store directory on filesystem @dev is gone and
 * that no handle holds (host_claim's shared lock), other than @mine. Files of another user, of
 * another mount namespace or filesystem, or without a record are left alone.
 */
static void host_sweep(int sdfd, const char *mine, uint64_t ns, uint64_t dev)
{
	int dfd = openat(sdfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	struct dirent *e;
	unsigned looked = 0;
	while (looked < HOST_SWEEP_MAX && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 20 || strncmp(e->d_name, "stagecache-l3.", 14) || strcmp(e->d_name + len - 6, ".state") ||
		    !strcmp(e->d_name, mine))
			continue;
		looked++;
		int fd = openat(sdfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat sb;
		struct l3_host_rec rec;
		uint64_t magic = 0;
		if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
		    sb.st_size == (off_t)sizeof(struct l3_state) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
		    pread(fd, &magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) && magic == L3_STATE_MAGIC &&
		    pread(fd, &rec, sizeof(rec), offsetof(struct l3_state, host)) == (ssize_t)sizeof(rec) &&
		    host_store_gone(&rec, ns, dev) && l3_still_named(sdfd, e->d_name, fd))
			unlinkat(sdfd, e->d_name, 0);
		close(fd);
	}
	closedir(d);
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
	uint64_t ns = shm_mntns_self();
	struct dir_id id = { 0, 0 };
	(void)dir_identity(l3->dirfd, "", &id); /* none: the file is used, never recorded */
	int sdfd = open(sd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int tries = 0; sdfd >= 0 && m == MAP_FAILED && tries < 4; tries++) {
		int fd = l3_create_file(l3, sdfd, name, O_RDWR), again = 0;
		struct l3_state *st;
		if (fd >= 0 && fstat(fd, &sb) == 0 && fstat(l3->dirfd, &dsb) == 0 && host_file_trusted(&sb, &dsb) &&
		    state_map(fd, 1, &st) == 0) {
			int r = host_claim(sdfd, name, fd, st, real, &id, ns);
			if (r > 0) {
				m = st;
				l3->host_fd = fd;
				fd = -1;
			} else {
				munmap(st, sizeof(struct l3_state));
				again = r < 0;
			}
		}
		if (fd >= 0)
			close(fd);
		if (!again)
			break;
	}
	if (sdfd >= 0) {
		if (id.ino)
			host_sweep(sdfd, name, ns, id.dev);
		close(sdfd);
	}
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
	if (l3->host_fd >= 0)
		close(l3->host_fd); /* drops its shared lock: a sweep may now judge the file */
	l3->host_fd = -1;
}
