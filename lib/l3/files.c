/*
 * lib/l3/files.c — the file helpers every part of the store uses. Every path component is opened
 * relative to a directory descriptor and never through a link: a member of the store's group can
 * replace any name in it (a missing objects/XX by a link to a directory only root may write, an
 * object by a FIFO), and a process of another user (root's) must not follow it out of the store,
 * or wait on it. Paths inside the store have at most two components ("XX/<name>"): opens resolve
 * them with openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH), and every other call that takes a
 * path (stat, unlink, rename, link, utimens) goes through the subdirectory opened with O_NOFOLLOW
 * (l3_at_open). Files are never opened blocking (a FIFO planted under a name is refused, not
 * waited on); what the store creates gets exactly its mode and group, and what it did not create
 * keeps its own (never chmod'ed or chown'ed on a member's behalf).
 * The store's lock (DIR/lock, flock) is here too: who scans and unlinks takes it, for a bounded
 * time (a member may hold it forever).
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
#include <sys/syscall.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "../xxh.h"
#include "types.h"
#include "files.h"
#include "format.h"

int l3_own(struct sc_l3 *l3, int fd, int is_dir)
{
	/* chown first: it clears setgid on some filesystems; chmod then sets the exact mode */
	if (l3->opts.gid > 0 && fchown(fd, (uid_t)-1, (gid_t)l3->opts.gid) < 0)
		return -errno;
	if (fchmod(fd, is_dir ? l3->dir_mode : l3->file_mode) < 0)
		return -errno;
	return 0;
}


int l3_open_dir_at(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}


/* A subdirectory: made with the store's mode and group when it is new. */
int l3_mkdir_at(struct sc_l3 *l3, int dfd, const char *name)
{
	if (mkdirat(dfd, name, l3->dir_mode & 0777) < 0)
		return errno == EEXIST ? 0 : -errno;
	int fd = l3_open_dir_at(dfd, name);
	if (fd < 0)
		return fd;
	int rc = l3_own(l3, fd, 1);
	close(fd);
	return rc;
}


/* ---- paths inside the store: never through a link ---- */

static _Atomic int no_openat2; /* set when the kernel has no openat2 (before 5.6) */

int l3_openat(int dfd, const char *rel, int flags, mode_t mode)
{
	flags |= O_CLOEXEC | O_NOFOLLOW;
	if (!atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
		struct open_how how = { .flags = (uint64_t)flags, .mode = (flags & O_CREAT) ? mode : 0,
					.resolve = L3_RESOLVE };
		long fd = syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno == EXDEV)
			errno = ELOOP; /* the path would leave @dfd */
		if (errno != ENOSYS)
			return -errno;
		atomic_store_explicit(&no_openat2, 1, memory_order_relaxed);
	}
	struct l3_at at;
	int rc = l3_at_open(dfd, rel, &at);
	if (rc)
		return rc;
	int fd = openat(at.fd, at.leaf, flags, mode);
	rc = fd < 0 ? -errno : fd;
	l3_at_close(&at);
	return rc;
}


int l3_at_open(int dfd, const char *rel, struct l3_at *at)
{
	const char *slash = strchr(rel, '/');
	at->fd = dfd;
	at->own = 0;
	at->leaf = rel;
	if (!slash)
		return 0;
	char sub[64];
	size_t n = (size_t)(slash - rel);
	if (n == 0 || n >= sizeof(sub) || strchr(slash + 1, '/'))
		return errno = EINVAL, -EINVAL; /* the store's paths are "<sub>/<name>" */
	memcpy(sub, rel, n);
	sub[n] = 0;
	if (!strcmp(sub, "..") || !strcmp(sub, ".") || !strcmp(slash + 1, "..") || !strcmp(slash + 1, "."))
		return errno = EINVAL, -EINVAL;
	/* O_PATH: usable as the directory of the *at calls; O_NOFOLLOW|O_DIRECTORY: a link (or
	 * anything but a directory) planted under the name fails here */
	int fd = openat(dfd, sub, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	at->fd = fd;
	at->own = 1;
	at->leaf = slash + 1;
	return 0;
}


void l3_at_close(struct l3_at *at)
{
	if (at->own && at->fd >= 0)
		close(at->fd);
	at->fd = -1;
	at->own = 0;
}


int l3_statat(int dfd, const char *rel, struct stat *st)
{
	struct l3_at at;
	int rc = l3_at_open(dfd, rel, &at);
	if (rc)
		return rc;
	rc = fstatat(at.fd, at.leaf, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	l3_at_close(&at);
	return rc;
}


int l3_unlinkat(int dfd, const char *rel)
{
	struct l3_at at;
	int rc = l3_at_open(dfd, rel, &at);
	if (rc)
		return rc;
	rc = unlinkat(at.fd, at.leaf, 0) < 0 ? -errno : 0;
	l3_at_close(&at);
	return rc;
}


/* A rename (@flags as renameat2's) or, with @link, a hard link from one name to another; neither
 * name's directories are followed through a link, nor is the name itself (no AT_SYMLINK_FOLLOW). */
static int two_names(int odfd, const char *orel, int ndfd, const char *nrel, int link, unsigned flags)
{
	struct l3_at a, b;
	int rc = l3_at_open(odfd, orel, &a);
	if (rc)
		return rc;
	if ((rc = l3_at_open(ndfd, nrel, &b))) {
		l3_at_close(&a);
		return rc;
	}
	if (link)
		rc = linkat(a.fd, a.leaf, b.fd, b.leaf, 0);
	else
		rc = flags ? renameat2(a.fd, a.leaf, b.fd, b.leaf, flags) : renameat(a.fd, a.leaf, b.fd, b.leaf);
	rc = rc < 0 ? -errno : 0;
	l3_at_close(&b);
	l3_at_close(&a);
	return rc;
}


int l3_renameat(int odfd, const char *orel, int ndfd, const char *nrel, unsigned flags)
{
	return two_names(odfd, orel, ndfd, nrel, 0, flags);
}


int l3_linkat(int odfd, const char *orel, int ndfd, const char *nrel)
{
	return two_names(odfd, orel, ndfd, nrel, 1, 0);
}


int l3_touchat(int dfd, const char *rel)
{
	struct l3_at at;
	int rc = l3_at_open(dfd, rel, &at);
	if (rc)
		return rc;
	rc = utimensat(at.fd, at.leaf, NULL, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	l3_at_close(&at);
	return rc;
}


int l3_open_file(int dfd, const char *rel, int flags)
{
	struct stat sb;
	int fd = l3_open_file_st(dfd, rel, flags, &sb);
	if (fd >= 0 && fcntl(fd, F_SETFL, 0) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

int l3_open_file_st(int dfd, const char *rel, int flags, struct stat *sb)
{
	int fd = l3_openat(dfd, rel, flags | O_NONBLOCK, 0);
	if (fd < 0)
		return fd == -ENXIO ? -EBADMSG : fd; /* ENXIO: a socket */
	int rc = fstat(fd, sb) < 0 ? -errno : !S_ISREG(sb->st_mode) ? -EBADMSG : 0;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}


int l3_create_file(struct sc_l3 *l3, int dfd, const char *name, int flags)
{
	int keep = flags & (O_APPEND | O_TRUNC), acc = flags & O_ACCMODE;
	int fd = openat(dfd, name, acc | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, l3->file_mode);
	if (fd >= 0) {
		int rc = l3_own(l3, fd, 0);
		if (!rc && fcntl(fd, F_SETFL, keep & O_APPEND) < 0)
			rc = -errno;
		if (rc) {
			close(fd);
			unlinkat(dfd, name, 0);
			return rc;
		}
		return fd;
	}
	if (errno != EEXIST || (flags & O_EXCL))
		return -errno;
	/* someone else's (or an earlier) file: used as it is, its mode and group left alone */
	if ((fd = l3_open_file(dfd, name, acc)) < 0)
		return fd;
	if ((keep & O_APPEND) && fcntl(fd, F_SETFL, O_APPEND) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if ((keep & O_TRUNC) && ftruncate(fd, 0) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}


#ifdef SC_TEST_HOOKS
_Atomic unsigned long l3_test_dir_syncs;
#endif

int l3_fsync_dir_at(int dfd, const char *sub)
{
#ifdef SC_TEST_HOOKS
	atomic_fetch_add_explicit(&l3_test_dir_syncs, 1, memory_order_relaxed);
#endif
	int fd = sub ? openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : dfd;
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) < 0 ? -errno : 0;
	if (sub)
		close(fd);
	return rc;
}


int l3_still_named(int dfd, const char *name, int fd)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}


int l3_obj_backed(struct sc_l3 *l3, const struct sc_location *loc)
{
	char rel[48];
	struct stat sb;
	l3_obj_relpath(loc->digest.lo, loc->digest.hi, rel);
	if (l3_statat(l3->objfd, rel, &sb) < 0)
		return -errno;
	/* 1/8: room for filesystems that compress; a planted sparse object is far below it */
	if ((uint64_t)sb.st_size > 1u << 20 && (uint64_t)sb.st_blocks * 512 < (uint64_t)sb.st_size / 8)
		return -EBADMSG;
	return 0;
}


int l3_flock_wait(int fd, int how, unsigned ms)
{
	uint64_t end = shm_now_ns() + (uint64_t)ms * 1000000ull;
	long nap = 1000000; /* 1 ms, doubling to 64 ms: a lock held for a scan is let go in ms */
	while (flock(fd, how | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return -errno;
		if (shm_now_ns() >= end)
			return -EBUSY;
		/* waits for: the holder to let go, at most @ms in all */
		struct timespec ts = { 0, nap };
		nanosleep(&ts, NULL);
		nap = nap < 64000000 ? nap * 2 : nap;
	}
	return 0;
}


int l3_flock_ex(struct sc_l3 *l3)
{
	return l3_flock_wait(l3->lockfd, LOCK_EX, L3_LOCK_WAIT_MS);
}


void l3_flock_un(struct sc_l3 *l3)
{
	flock(l3->lockfd, LOCK_UN);
}


/* ---- O_DIRECT alignment ---- */

/* Filesystems on a local block device (or in memory), where a lookup or an fstat never leaves the
 * machine: ext2/3/4, XFS, Btrfs, F2FS, bcachefs, ZFS, tmpfs, overlayfs. */
static int fs_local(uint32_t type)
{
	static const uint32_t local[] = { 0xef53u, 0x58465342u, 0x9123683eu, 0xf2f52010u,
					  0xca451a4eu, 0x2fc12fc1u, 0x01021994u, 0x794c7630u };
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		if (type == local[i])
			return 1;
	return 0;
}

#ifdef SC_TEST_HOOKS
uint64_t l3_kept_local_bytes = L3_KEPT_LOCAL_BYTES;
#define KEPT_LOCAL_BYTES l3_kept_local_bytes
#else
#define KEPT_LOCAL_BYTES L3_KEPT_LOCAL_BYTES
#endif

void l3_dio_detect(struct sc_l3 *l3, int fd)
{
	struct statfs fs;
	int known = fstatfs(fd, &fs) == 0;
	int fuse = known && (uint32_t)fs.f_type == 0x65735546u, local = known && fs_local((uint32_t)fs.f_type);
	/* kept files by default: on FUSE, where an open is a round trip, any; on a local filesystem
	 * the small ones under a byte budget (L3_KEPT_LOCAL_*), and there an fstat is cheap enough for
	 * the sweep to close the files whose object was removed meanwhile; on a kernel network
	 * filesystem (CephFS, NFS: an fstat may be a round trip) none unless asked, as before */
	l3->kept_links = local;
	l3->syncfs_ok = local && !l3->shared;
	if (!fuse && !local && !l3->opts.fd_cache)
		l3->kept_max = 0;
	if (local && !l3->opts.fd_cache) {
		l3->kept_file_max = L3_KEPT_LOCAL_FILE;
		l3->kept_bytes_max = KEPT_LOCAL_BYTES;
	}
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
		l3->dio_mem_align = sx.stx_dio_mem_align;
		l3->dio_off_align = sx.stx_dio_offset_align;
		return;
	}
	/* the filesystem does not say (FUSE: ceph-fuse accepts O_DIRECT, statx reports no alignment):
	 * if it takes O_DIRECT at all, a page is an alignment every block device accepts; a read the
	 * kernel refuses after all goes on buffered (lib/l3/fill.c) */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
		fcntl(fd, F_SETFL, fl);
		l3->dio_mem_align = l3->dio_off_align = 4096;
	}
	/* a FUSE daemon (ceph-fuse) sees O_DIRECT only in the open's flags: set later, it bypasses the
	 * kernel's page cache but the daemon still serves the read from its own cache */
	l3->dio_at_open = l3->dio_mem_align && fuse;
}


/* ---- scanning ---- */

/* Call @cb(l3, subdir_fd, sub, name, ctx) for every entry of every DIR/<which>/<2 hex>/ directory. */
int l3_scan(struct sc_l3 *l3, int topfd, int (*cb)(struct sc_l3 *, int, const char *, const char *, void *),
		void *ctx)
{
	for (int i = 0; i < 256; i++) {
		char sub[3];
		snprintf(sub, sizeof(sub), "%02x", i);
		/* a link (or a file) planted under a subdirectory's name is not the store's: skipped */
		int fd = openat(topfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
				continue;
			return -errno;
		}
		DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			return -errno;
		}
		struct dirent *e;
		int rc = 0;
		while (!rc && (e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				rc = cb(l3, dirfd(d), sub, e->d_name, ctx);
		closedir(d);
		if (rc)
			return rc;
	}
	return 0;
}


int l3_name_digest(const char *name, const char *suffix, uint64_t *lo, uint64_t *hi)
{
	char hex[33];
	size_t n = strlen(name), sl = strlen(suffix);
	if (n != 32 + sl || strcmp(name + 32, suffix))
		return -EINVAL;
	memcpy(hex, name, 32);
	hex[32] = 0;
	return l3_hex_digest(hex, lo, hi);
}


/* The header block of an object of @size bytes opened at @fd. */
static int read_block_sized(int fd, int64_t size, uint8_t *block)
{
	if (size < L3_HDR_BLOCK)
		return -EBADMSG;
	ssize_t r = pread(fd, block, L3_HDR_BLOCK, 0);
	if (r < 0)
		return -errno;
	return r == L3_HDR_BLOCK ? 0 : -EBADMSG;
}

int l3_read_block(int fd, uint8_t *block, uint64_t *file_bytes)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return -errno;
	*file_bytes = (uint64_t)sb.st_size;
	return read_block_sized(fd, sb.st_size, block);
}


int l3_read_header(struct sc_l3 *l3, uint64_t lo, uint64_t hi, uint8_t *block, uint64_t *file_bytes)
{
	char rel[48];
	l3_obj_relpath(lo, hi, rel);
	struct stat sb;
	int fd = l3_open_file_st(l3->objfd, rel, O_RDONLY, &sb);
	if (fd < 0)
		return fd;
	*file_bytes = (uint64_t)sb.st_size;
	int rc = read_block_sized(fd, sb.st_size, block);
	close(fd);
	return rc;
}


/* The check of a version 2 entry: XXH3-64 of its token ids and namespace trailer, seeded with the
 * hash of the header's first 56 bytes. */
uint64_t l3_pfx_check(const struct l3_pfx *p, const int32_t *tokens, const char *ns, uint32_t ns_len)
{
	XXH3_state_t st;
	/* a state on the stack must be initialised before a seeded reset: XXH3 keeps its derived
	 * secret when the seed it finds there equals the new one, and a leftover seed of an earlier
	 * call at this depth (the same entry read again) came with a secret since overwritten */
	XXH3_INITSTATE(&st);
	XXH3_64bits_reset_withSeed(&st, XXH3_64bits(p, offsetof(struct l3_pfx, check)));
	XXH3_64bits_update(&st, tokens, (size_t)p->token_count * 4);
	XXH3_64bits_update(&st, &ns_len, 4);
	if (ns_len)
		XXH3_64bits_update(&st, ns, ns_len);
	return XXH3_64bits_digest(&st);
}


int l3_read_pfx(int fd, struct l3_pfx *p, int32_t **tokens, char *ns)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		if (tokens)
			*tokens = NULL;
		if (ns)
			ns[0] = 0;
		return -errno;
	}
	return l3_read_pfx_sized(fd, sb.st_size, p, tokens, ns);
}

int l3_read_pfx_sized(int fd, int64_t size, struct l3_pfx *p, int32_t **tokens, char *ns)
{
	if (tokens)
		*tokens = NULL;
	if (ns)
		ns[0] = 0;
	/* the whole file in one read: the header into @p, the token ids and namespace trailer behind */
	if (size < (int64_t)sizeof(*p) ||
	    (uint64_t)size > sizeof(*p) + (uint64_t)L3_PFX_MAX_TOKENS * 4 + 4 + SC_L3_STR_MAX)
		return -EBADMSG;
	size_t want = (size_t)size - sizeof(*p);
	uint8_t *body = malloc(want ? want : 1);
	if (!body)
		return -ENOMEM;
	struct iovec iov[2] = { { p, sizeof(*p) }, { body, want } };
	ssize_t n = preadv(fd, iov, 2, 0);
	int rc = n < 0 ? -errno : n != size ? -EBADMSG : 0;
	if (!rc && (p->magic != L3_PFX_MAGIC || (p->version != 1 && p->version != L3_PFX_VERSION) ||
		    p->token_count == 0 || p->token_count > L3_PFX_MAX_TOKENS))
		rc = -EBADMSG;
	if (!rc && p->version == 1) {
		free(body);
		return want == 0 && XXH3_64bits(p, offsetof(struct l3_pfx, check)) == p->check ? 0 : -EBADMSG;
	}
	uint64_t tb = (uint64_t)p->token_count * 4;
	if (!rc && (want < tb + 4 || want > tb + 4 + SC_L3_STR_MAX))
		rc = -EBADMSG;
	uint32_t ns_len = 0;
	if (!rc) {
		memcpy(&ns_len, body + tb, 4);
		if (ns_len != want - tb - 4 || memchr(body + tb + 4, 0, ns_len) ||
		    l3_pfx_check(p, (const int32_t *)(void *)body, (const char *)body + tb + 4, ns_len) != p->check)
			rc = -EBADMSG;
	}
	if (!rc && ns) {
		memcpy(ns, body + tb + 4, ns_len);
		ns[ns_len] = 0;
	}
	if (!rc && tokens)
		*tokens = (int32_t *)(void *)body; /* the token ids are the first bytes of the body */
	else
		free(body);
	return rc;
}


int l3_read_pfx_named(int dfd, const char *at, const char *name, struct l3_pfx *p, uint64_t *lo, uint64_t *hi)
{
	if (l3_name_digest(name, ".pfx", lo, hi))
		return 1;
	int fd = l3_open_file(dfd, at, O_RDONLY); /* a FIFO or link planted under the name: left alone */
	if (fd < 0)
		return 1;
	int rc = l3_read_pfx(fd, p, NULL, NULL);
	close(fd);
	if (!rc && (p->prefix_lo != *lo || p->prefix_hi != *hi))
		rc = -EBADMSG;
	return rc;
}


/* Quarantine names are <32 hex>.<CLOCK_REALTIME ns>.sc3 (see l3_quarantine). Only the unusual
 * path gets here (a prefix entry whose object is gone), so a scan of quarantine/ is fine. */
DIR *l3_opendir(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return d;
}


int l3_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 64;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}


int l3_file_cold(int fd, uint64_t off, uint64_t bytes)
{
	struct {
		uint64_t off, len;
	} rg = { off, bytes };
	struct {
		uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
	} cs;
	if (syscall(__NR_cachestat, fd, &rg, &cs, 0) < 0)
		return 1; /* unknown: treat as cold, O_DIRECT is correct either way */
	return cs.nr_cache * SHM_PAGE_BYTES < bytes / 2; /* nr_cache counts base pages */
}
