/*
 * lib/l3_store.c — the L3 directory: open and reconciliation, put, locate, quarantine, budget
 * eviction, listing and verification. The on-disk layout is described in lib/l3_priv.h.
 *
 * Multi-process rules. Objects and prefix entries appear only by rename of a fully written and
 * fsynced temp file, so a reader never sees a partial one and a writer killed at any point leaves
 * at most a .tmp-<writer>.<n> file, which reconciliation (or the janitor) removes once its
 * writer no longer holds its OFD lock on it and it is not young (lib/l3_shared.c): never another
 * live process's or another host's file in progress. Objects are put with RENAME_NOREPLACE (two puts of one
 * digest, from any hosts: the second finds it there). A put ends by checking that its object and
 * its prefix entry are both there, and writes again what a concurrent eviction or drop took
 * (lib/l3_shared.c says why a dropper cannot then remove it). Eviction and reconciliation hold
 * DIR/lock (flock, exclusive) so that only one process scans and unlinks at a time; put and fill
 * never take it. In shared mode a put never scans or evicts unless the store is over budget and
 * no janitor is at work (lib/l3_janitor.c). A fill that raced with an eviction either opened the
 * file first (and reads it; unlink does not disturb an open file) or gets -ENOENT: a miss.
 * The counters in DIR/state are statistics (relaxed atomics). Lookup, locate, listing and
 * verification are in lib/l3_index.c.
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
#include <sys/vfs.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "xxh.h"

#include "l3_priv.h"
#include "probes.h"
#include "../shm/fault.h"

static _Atomic uint64_t next_id = 1;

#define RELAXED memory_order_relaxed
#define ADD(field, v) atomic_fetch_add_explicit(&l3->st->field, (uint64_t)(v), RELAXED)
static void sub_sat(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, RELAXED);
	while (!atomic_compare_exchange_weak_explicit(a, &cur, cur > v ? cur - v : 0, RELAXED, RELAXED))
		;
}

int l3_own(struct sc_l3 *l3, int fd, int is_dir)
{
	/* chown first: it clears setgid on some filesystems; chmod then sets the exact mode */
	if (l3->opts.gid > 0 && fchown(fd, (uid_t)-1, (gid_t)l3->opts.gid) < 0)
		return -errno;
	if (fchmod(fd, is_dir ? l3->dir_mode : l3->file_mode) < 0)
		return -errno;
	return 0;
}

static int open_dir_at(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* A subdirectory: made with the store's mode and group when it is new. */
static int mkdir_at(struct sc_l3 *l3, int dfd, const char *name)
{
	if (mkdirat(dfd, name, l3->dir_mode & 0777) < 0)
		return errno == EEXIST ? 0 : -errno;
	int fd = open_dir_at(dfd, name);
	if (fd < 0)
		return fd;
	int rc = l3_own(l3, fd, 1);
	close(fd);
	return rc;
}

int l3_open_file(int dfd, const char *rel, int flags)
{
	int fd = openat(dfd, rel, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ENXIO ? -EBADMSG : -errno; /* ENXIO: a socket */
	struct stat sb;
	int rc = 0;
	if (fstat(fd, &sb) < 0)
		rc = -errno;
	else if (!S_ISREG(sb.st_mode))
		rc = -EBADMSG;
	else if (fcntl(fd, F_SETFL, 0) < 0)
		rc = -errno;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int l3_mkdir_at(struct sc_l3 *l3, int dfd, const char *name)
{
	return mkdir_at(l3, dfd, name);
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

static int fsync_dir_at(int dfd, const char *sub)
{
	int fd = sub ? openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : dfd;
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) < 0 ? -errno : 0;
	if (sub)
		close(fd);
	return rc;
}

static int flock_ex(struct sc_l3 *l3)
{
	while (flock(l3->lockfd, LOCK_EX) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static void flock_un(struct sc_l3 *l3)
{
	flock(l3->lockfd, LOCK_UN);
}

/* ---- O_DIRECT alignment ---- */

void l3_dio_detect(struct sc_l3 *l3, int fd)
{
	struct statfs fs;
	int fuse = fstatfs(fd, &fs) == 0 && (uint32_t)fs.f_type == 0x65735546u;
	/* kept files by default only where an open is a round trip (FUSE); elsewhere on request */
	if (!fuse && !l3->opts.fd_cache)
		l3->kept_max = 0;
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
		l3->dio_mem_align = sx.stx_dio_mem_align;
		l3->dio_off_align = sx.stx_dio_offset_align;
		return;
	}
	/* the filesystem does not say (FUSE: ceph-fuse accepts O_DIRECT, statx reports no alignment):
	 * if it takes O_DIRECT at all, a page is an alignment every block device accepts; a read the
	 * kernel refuses after all goes on buffered (lib/l3_fill.c) */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
		fcntl(fd, F_SETFL, fl);
		l3->dio_mem_align = l3->dio_off_align = 4096;
	}
	/* a FUSE daemon (ceph-fuse) sees O_DIRECT only in the open's flags: set later, it bypasses the
	 * kernel's page cache but the daemon still serves the read from its own cache */
	l3->dio_at_open = l3->dio_mem_align && fuse;
}

/* ---- the shared state file ---- */

static int state_open(struct sc_l3 *l3, int create)
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

/* ---- scanning ---- */

/* Call @cb(l3, subdir_fd, sub, name, ctx) for every entry of every DIR/<which>/<2 hex>/ directory. */
int l3_scan(struct sc_l3 *l3, int topfd, int (*cb)(struct sc_l3 *, int, const char *, const char *, void *),
		void *ctx)
{
	for (int i = 0; i < 256; i++) {
		char sub[3];
		snprintf(sub, sizeof(sub), "%02x", i);
		int fd = openat(topfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
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

/* A temp file (.tmp-<writer>.<n>), or a captured prefix entry (.drop-<writer>.<n>), left over by
 * a writer that is gone (lib/l3_shared.c: its OFD lock is free and it is not young). */
static int tmp_is_stale(struct sc_l3 *l3, int dfd, const char *name)
{
	return l3_left_over(l3, dfd, name);
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

/* Read the header block of an object opened at @fd. */
int l3_read_block(int fd, uint8_t *block, uint64_t *file_bytes)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return -errno;
	*file_bytes = (uint64_t)sb.st_size;
	if ((uint64_t)sb.st_size < L3_HDR_BLOCK)
		return -EBADMSG;
	ssize_t r = pread(fd, block, L3_HDR_BLOCK, 0);
	if (r < 0)
		return -errno;
	return r == L3_HDR_BLOCK ? 0 : -EBADMSG;
}

int l3_read_header(struct sc_l3 *l3, uint64_t lo, uint64_t hi, uint8_t *block, uint64_t *file_bytes)
{
	char rel[48];
	l3_obj_relpath(lo, hi, rel);
	int fd = l3_open_file(l3->objfd, rel, O_RDONLY);
	if (fd < 0)
		return fd;
	int rc = l3_read_block(fd, block, file_bytes);
	close(fd);
	return rc;
}

struct recon {
	uint64_t objects, bytes, stale, quarantined, dropped;
	struct l3_segs segs;
};

static int recon_obj(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct recon *r = ctx;
	(void)sub;
	if (!strncmp(name, ".tmp-", 5)) {
		if (tmp_is_stale(l3, dfd, name) && unlinkat(dfd, name, 0) == 0)
			r->stale++;
		return 0;
	}
	uint64_t lo, hi, fb = 0;
	if (l3_name_digest(name, ".sc3", &lo, &hi))
		return 0; /* not ours: leave it alone */
	uint8_t block[L3_HDR_BLOCK];
	struct l3_obj_hdr h;
	int fd = l3_open_file(dfd, name, O_RDONLY);
	if (fd < 0)
		return 0; /* gone, or not a regular file (a planted link or FIFO): not ours, left alone */
	int rc = l3_read_block(fd, block, &fb);
	close(fd);
	if (!rc)
		rc = l3_hdr_parse(block, fb, &h);
	if (!rc && (h.digest_lo != lo || h.digest_hi != hi))
		rc = -EBADMSG;
	if (rc) {
		if (l3_quarantine(l3, lo, hi, EBADMSG) == 0)
			r->quarantined++;
		return 0;
	}
	/* a segmented object one of whose segments is gone can never be read: removed once it is not
	 * young (a put that has just written its manifest rewrites what a sweep took) */
	struct stat sb;
	if (l3_segs_object(l3, &r->segs, dfd, name, fb, 1, NULL) == -ENOENT && fstatat(dfd, name, &sb, 0) == 0 &&
	    shm_realtime_ns() - shm_ts_ns(sb.st_mtim) > L3_TMP_STALE_NS && unlinkat(dfd, name, 0) == 0) {
		r->dropped++;
		return 0;
	}
	r->objects++;
	r->bytes += fb;
	return 0;
}

/* The check of a version 2 entry: XXH3-64 of its token ids and namespace trailer, seeded with the
 * hash of the header's first 56 bytes. */
static uint64_t pfx_check(const struct l3_pfx *p, const int32_t *tokens, const char *ns, uint32_t ns_len)
{
	XXH3_state_t st;
	XXH3_64bits_reset_withSeed(&st, XXH3_64bits(p, offsetof(struct l3_pfx, check)));
	XXH3_64bits_update(&st, tokens, (size_t)p->token_count * 4);
	XXH3_64bits_update(&st, &ns_len, 4);
	if (ns_len)
		XXH3_64bits_update(&st, ns, ns_len);
	return XXH3_64bits_digest(&st);
}

int l3_read_pfx(int fd, struct l3_pfx *p, int32_t **tokens, char *ns)
{
	if (tokens)
		*tokens = NULL;
	if (ns)
		ns[0] = 0;
	ssize_t n = pread(fd, p, sizeof(*p), 0);
	if (n < 0)
		return -errno;
	if (n != sizeof(*p) || p->magic != L3_PFX_MAGIC || (p->version != 1 && p->version != L3_PFX_VERSION) ||
	    p->token_count == 0 || p->token_count > L3_PFX_MAX_TOKENS)
		return -EBADMSG;
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (p->version == 1)
		return sb.st_size == sizeof(*p) && XXH3_64bits(p, offsetof(struct l3_pfx, check)) == p->check ? 0 : -EBADMSG;
	uint64_t tb = (uint64_t)p->token_count * 4;
	if ((uint64_t)sb.st_size < sizeof(*p) + tb + 4 || (uint64_t)sb.st_size > sizeof(*p) + tb + 4 + SC_L3_STR_MAX)
		return -EBADMSG;
	uint8_t *body = malloc((size_t)sb.st_size - sizeof(*p));
	if (!body)
		return -ENOMEM;
	size_t want = (size_t)sb.st_size - sizeof(*p);
	n = pread(fd, body, want, sizeof(*p));
	int rc = n < 0 ? -errno : (size_t)n != want ? -EBADMSG : 0;
	uint32_t ns_len = 0;
	if (!rc) {
		memcpy(&ns_len, body + tb, 4);
		if (ns_len != want - tb - 4 || memchr(body + tb + 4, 0, ns_len) ||
		    pfx_check(p, (const int32_t *)(void *)body, (const char *)body + tb + 4, ns_len) != p->check)
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

static int recon_pfx(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct recon *r = ctx;
	if (!strncmp(name, ".tmp-", 5)) {
		if (tmp_is_stale(l3, dfd, name) && unlinkat(dfd, name, 0) == 0)
			r->stale++;
		return 0;
	}
	if (!strncmp(name, ".drop-", 6)) {
		if (tmp_is_stale(l3, dfd, name) && l3_pfx_drop_resolve(l3, dfd, sub, name) == 1)
			r->dropped++;
		return 0;
	}
	uint64_t lo, hi;
	struct l3_pfx p;
	int rc = l3_read_pfx_named(dfd, name, name, &p, &lo, &hi);
	if (rc == 1)
		return 0;
	if (!rc) {
		char rel[48];
		struct stat sb;
		l3_obj_relpath(p.digest_lo, p.digest_hi, rel);
		/* an entry whose object was quarantined stays: the next restore of it reports the
		 * failed verification (and drops it) instead of a silent "nothing stored" */
		if (fstatat(l3->objfd, rel, &sb, AT_SYMLINK_NOFOLLOW) < 0 &&
		    !l3_quarantined_since(l3, p.digest_lo, p.digest_hi, p.created_ns))
			rc = -ENOENT;
	}
	/* only what is known bad or orphaned is dropped, never on a transient error, and never an
	 * entry that a concurrent put has just checked (the capture protocol) */
	if (rc == -ENOENT || rc == -EBADMSG) {
		char rel[48];
		snprintf(rel, sizeof(rel), "%s/%s", sub, name);
		if (l3_pfx_drop(l3, rel) == 1)
			r->dropped++;
	}
	return 0;
}

static int reconcile(struct sc_l3 *l3)
{
	int rc = flock_ex(l3);
	if (rc)
		return rc;
	struct recon r = { 0 };
	rc = l3_segs_begin(l3, &r.segs);
	if (!rc)
		rc = l3_scan(l3, l3->objfd, recon_obj, &r);
	if (!rc)
		rc = l3_scan(l3, l3->pfxfd, recon_pfx, &r);
	if (!rc)
		rc = l3_segs_sweep(l3, &r.segs, NULL, NULL);
	if (!rc) {
		r.bytes += r.segs.bytes;
		l3_segs_publish(l3, &r.segs, r.objects, r.bytes);
	}
	l3_segs_end(&r.segs);
	l3->recon_changed = r.quarantined || r.dropped;
	flock_un(l3);
	if (!rc && l3->opts.budget_bytes && r.bytes > l3->opts.budget_bytes) {
		int n = sc_l3_evict_to(l3, l3->opts.budget_bytes / 100 * L3_LOW_WATER_PCT);
		if (n < 0)
			rc = n;
	}
	return rc;
}

/* ---- open / close ---- */

/* Files a handle's rings keep open: as asked (at most RLIMIT_NOFILE / 2), or by default
 * min(4096, RLIMIT_NOFILE / 4) (a process has other uses for descriptors); l3_dio_detect turns
 * the default off where opens are cheap. */
static uint32_t kept_max(uint32_t asked)
{
	if (asked == SC_L3_FD_CACHE_NONE)
		return 0;
	struct rlimit rl;
	uint64_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 65536;
	uint64_t n = asked ? asked : lim / 4 < 4096 ? lim / 4 : 4096;
	return (uint32_t)(n < lim / 2 ? n : lim / 2);
}

int sc_l3_open(const char *dir, const struct sc_l3_opts *opts, struct sc_l3 **out)
{
	struct sc_l3_opts o = { 0 };
	if (!dir || !*dir || !out)
		return -EINVAL;
	*out = NULL;
	if (opts)
		o = *opts;
	if ((o.flags & ~SC_L3_OPEN_MASK) || o.o_direct < SC_L3_ODIRECT_AUTO || o.o_direct > SC_L3_ODIRECT_OFF ||
	    o.queue_depth > SC_L3_MAX_QUEUE_DEPTH || (o.file_mode & ~0666u) || o.gid < 0 || o.gid > 0x7fffffff ||
	    (o.fd_cache > SC_L3_FD_CACHE_MAX && o.fd_cache != SC_L3_FD_CACHE_NONE))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(o.reserved) / sizeof(o.reserved[0]); i++)
		if (o.reserved[i])
			return -EINVAL; /* a field of a later version: refuse rather than ignore it */
	int create = !(o.flags & SC_L3_OPEN_NO_CREATE);
	if (!o.queue_depth)
		o.queue_depth = 64;
	struct sc_l3 *l3 = calloc(1, sizeof(*l3));
	if (!l3)
		return -ENOMEM;
	l3->dirfd = l3->objfd = l3->pfxfd = l3->lenfd = l3->quarfd = l3->lockfd = -1;
	l3->accfd = l3->segfd = l3->janfd = l3->sgfd = -1;
	pthread_mutex_init(&l3->jan_mu, NULL);
	l3->opts = o;
	l3->kept_max = kept_max(o.fd_cache);
	l3->file_mode = o.file_mode ? o.file_mode : 0600;
	l3->dir_mode = l3->file_mode | ((l3->file_mode & 0444) >> 2) | 0700 | (o.gid > 0 ? S_ISGID : 0);
	l3->id = atomic_fetch_add_explicit(&next_id, 1, RELAXED);
	if (getrandom(&l3->nonce, sizeof(l3->nonce), GRND_NONBLOCK) != (ssize_t)sizeof(l3->nonce))
		l3->nonce = shm_now_ns() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)l3;
	pthread_mutex_init(&l3->mu, NULL);
	int rc = -ENOMEM;
	if (!(l3->dir = strdup(dir)))
		goto cleanup;
	if ((rc = l3_host_init(l3, o.host_id)))
		goto cleanup;
	l3_writer_init(l3);
	l3->opts.host_id = NULL; /* not kept: the caller's string may not outlive the handle */
	l3->opts.state_dir = NULL;
	int made = 0;
	if (create) {
		if (mkdir(dir, l3->dir_mode & 0777) == 0)
			made = 1;
		else if (errno != EEXIST) {
			rc = -errno;
			goto cleanup;
		}
	}
	if ((rc = l3->dirfd = open_dir_at(AT_FDCWD, dir)) < 0)
		goto cleanup;
	if (made && (rc = l3_own(l3, l3->dirfd, 1)))
		goto cleanup;
	/* without NO_CREATE an existing directory becomes a store; with it, only a store is opened
	 * (its state file tells), and nothing is created in it */
	if (!create && faccessat(l3->dirfd, "shared", F_OK, 0) < 0 && (rc = state_open(l3, 0)))
		goto cleanup;
	struct stat dsb;
	if (fstat(l3->dirfd, &dsb) < 0) {
		rc = -errno;
		goto cleanup;
	}
	l3->dir_dev = (uint64_t)dsb.st_dev;
	l3->dir_ino = (uint64_t)dsb.st_ino;
	const char *subs[] = { "objects", "prefix", "lengths", "quarantine" };
	int *fds[] = { &l3->objfd, &l3->pfxfd, &l3->lenfd, &l3->quarfd };
	for (int i = 0; i < 4; i++) {
		if (create && (rc = mkdir_at(l3, l3->dirfd, subs[i])) < 0)
			goto cleanup;
		if ((rc = *fds[i] = open_dir_at(l3->dirfd, subs[i])) < 0)
			goto cleanup;
	}
	l3->lockfd = l3_open_file(l3->dirfd, "lock", O_RDWR);
	if (l3->lockfd == -ENOENT && create) {
		l3->lockfd = openat(l3->dirfd, "lock", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, l3->file_mode);
		if (l3->lockfd < 0 && errno == EEXIST)
			l3->lockfd = l3_open_file(l3->dirfd, "lock", O_RDWR);
		else if (l3->lockfd < 0)
			l3->lockfd = -errno;
		else if ((rc = l3_own(l3, l3->lockfd, 0)))
			goto cleanup;
	}
	if (l3->lockfd < 0) {
		rc = l3->lockfd;
		goto cleanup;
	}
	if ((rc = l3_mode_init(l3, o.flags)) || (rc = l3_seg_open(l3)))
		goto cleanup;
	if (l3->shared)
		l3->grace_ns = (o.visibility_ms ? o.visibility_ms : L3_VISIBILITY_MS_DEFAULT) * 1000000ull;
	if (l3->shared) {
		if (l3->st) { /* mapped by the NO_CREATE check above: a shared directory counts per host */
			munmap(l3->st, sizeof(struct l3_state));
			l3->st = NULL;
		}
		l3->opts.state_dir = o.state_dir;
		rc = l3_state_open_host(l3);
		l3->opts.state_dir = NULL;
	} else if (!l3->st) {
		rc = state_open(l3, create);
	}
	if (rc)
		goto cleanup;
	/* shared mode: a scan of the directory at every open would cost every worker seconds on a
	 * network filesystem; the janitor reconciles instead (sc_l3_janitor with SC_L3_JANITOR_FULL) */
	if (!(o.flags & SC_L3_OPEN_NO_RECONCILE) && !l3->shared && (rc = reconcile(l3)))
		goto cleanup;
	*out = l3;
	return 0;
cleanup:
	sc_l3_close(l3);
	return rc;
}

void sc_l3_close(struct sc_l3 *l3)
{
	if (!l3)
		return;
	l3_rings_free(l3);
	if (l3->dirfd >= 0)
		l3_access_flush(l3, 1);
	l3_janitor_release(l3);
	int fds[] = { l3->dirfd, l3->objfd, l3->pfxfd, l3->lenfd, l3->quarfd, l3->lockfd, l3->accfd, l3->segfd, l3->sgfd };
	for (int i = 0; i < 9; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	l3_state_close(l3);
	pthread_mutex_destroy(&l3->mu);
	pthread_mutex_destroy(&l3->jan_mu);
	free(l3->lengths);
	free(l3->dir);
	free(l3);
}

/* ---- quarantine, eviction ---- */

int l3_quarantine(struct sc_l3 *l3, uint64_t lo, uint64_t hi, int reason)
{
	char rel[48], hex[33], qname[80];
	struct stat sb;
	l3_obj_relpath(lo, hi, rel);
	l3_digest_hex(lo, hi, hex);
	snprintf(qname, sizeof(qname), "%s.%llu.sc3", hex, (unsigned long long)shm_realtime_ns());
	int have = fstatat(l3->objfd, rel, &sb, 0) == 0;
	if (renameat(l3->objfd, rel, l3->quarfd, qname) < 0)
		return -errno; /* someone else moved it first */
	l3_kept_forget(l3);
	if (have) {
		sub_sat(&l3->st->bytes, (uint64_t)sb.st_size);
		sub_sat(&l3->st->objects, 1);
	}
	ADD(quarantined, 1);
	uint64_t a = lo, b = hi;
	int64_t why = reason;
	SC_PROBE(l3_quarantine, a, b, why);
	if (l3->arena) {
		l3_invalidate_mirror(l3, lo, hi);
	} else {
		/* no arena to invalidate mirrors in (reconciliation at open, l3 verify, a fill before
		 * any bind): leave a record for the next sc_l3_bind_arena */
		char rec[48];
		snprintf(rec, sizeof(rec), "%s.mirror", hex);
		int fd = openat(l3->quarfd, rec, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, l3->file_mode);
		if (fd >= 0) {
			(void)l3_own(l3, fd, 0);
			close(fd);
		}
	}
	return 0;
}

/* Quarantine names are <32 hex>.<CLOCK_REALTIME ns>.sc3 (see l3_quarantine). Only the unusual
 * path gets here (a prefix entry whose object is gone), so a scan of quarantine/ is fine. */
DIR *l3_opendir(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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

int l3_quarantined_since(struct sc_l3 *l3, uint64_t lo, uint64_t hi, uint64_t since_ns)
{
	char hex[33];
	l3_digest_hex(lo, hi, hex);
	DIR *d = l3_opendir(l3->quarfd);
	if (!d)
		return 0;
	struct dirent *e;
	int found = 0;
	while (!found && (e = readdir(d))) {
		unsigned long long ns;
		char tail[8];
		if (strncmp(e->d_name, hex, 32) || e->d_name[32] != '.' ||
		    sscanf(e->d_name + 33, "%llu.%7s", &ns, tail) != 2 || strcmp(tail, "sc3"))
			continue;
		found = ns >= since_ns;
	}
	closedir(d);
	return found;
}

void l3_drop_prefix(struct sc_l3 *l3, uint64_t key_lo, uint64_t key_hi, uint64_t lo, uint64_t hi)
{
	char rel[48];
	struct l3_pfx p;
	l3_pfx_relpath(key_lo, key_hi, rel);
	int fd = l3_open_file(l3->pfxfd, rel, O_RDONLY);
	if (fd < 0)
		return;
	int same = l3_read_pfx(fd, &p, NULL, NULL) == 0 && p.digest_lo == lo && p.digest_hi == hi;
	close(fd);
	/* a concurrent put may have replaced it with a good one: only this one goes */
	if (same && unlinkat(l3->pfxfd, rel, 0) == 0 && l3->arena)
		l3ix_on_prefix_gone(l3->arena, (struct sc_digest){ key_lo, key_hi });
}

struct victim {
	uint64_t lo, hi, bytes;
	int64_t mtime;
};

struct victims {
	struct victim *v;
	size_t n, cap;
	uint64_t total;
	struct l3_segs segs;
};

static int collect(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct victims *vs = ctx;
	(void)sub;
	uint64_t lo, hi;
	struct stat sb;
	if (l3_name_digest(name, ".sc3", &lo, &hi) || fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (vs->n == vs->cap) {
		size_t cap = vs->cap ? vs->cap * 2 : 256;
		struct victim *v = realloc(vs->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		vs->v = v, vs->cap = cap;
	}
	vs->v[vs->n++] = (struct victim){ lo, hi, (uint64_t)sb.st_size,
					  (int64_t)shm_ts_ns(sb.st_mtim) };
	vs->total += (uint64_t)sb.st_size;
	(void)l3_segs_object(l3, &vs->segs, dfd, name, (uint64_t)sb.st_size, 1, NULL);
	return 0;
}

static int by_age(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;
	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int sc_l3_evict_to(struct sc_l3 *l3, uint64_t target)
{
	if (!l3)
		return -EINVAL;
	if (l3->shared)
		return l3_janitor_evict_to(l3, target);
	int rc = flock_ex(l3);
	if (rc)
		return rc;
	struct victims vs = { 0 };
	rc = l3_segs_begin(l3, &vs.segs);
	if (!rc)
		rc = l3_scan(l3, l3->objfd, collect, &vs);
	int evicted = 0;
	if (!rc) {
		qsort(vs.v, vs.n, sizeof(*vs.v), by_age);
		/* physical bytes: a segment counts once, and leaves with the last object naming it */
		uint64_t total = vs.total + vs.segs.bytes, objects = vs.n, objbytes = vs.total;
		struct sc_digest *gone = l3->arena ? malloc(vs.n * sizeof(*gone) + 1) : NULL;
		for (size_t i = 0; i < vs.n && total > target; i++) {
			char rel[48];
			uint64_t freed = 0;
			l3_obj_relpath(vs.v[i].lo, vs.v[i].hi, rel);
			(void)l3_segs_object(l3, &vs.segs, l3->objfd, rel, vs.v[i].bytes, -1, &freed);
			if (unlinkat(l3->objfd, rel, 0) < 0) {
				(void)l3_segs_object(l3, &vs.segs, l3->objfd, rel, vs.v[i].bytes, 1, NULL);
				continue;
			}
			l3_kept_forget(l3);
			if (gone)
				gone[evicted] = (struct sc_digest){ vs.v[i].lo, vs.v[i].hi };
			total -= vs.v[i].bytes + freed;
			objbytes -= vs.v[i].bytes;
			objects--;
			evicted++;
		}
		/* what no object names any more goes (lib/l3_seg.c: the rule that keeps a put's) */
		if (l3_segs_sweep(l3, &vs.segs, NULL, NULL) == 0)
			total = objbytes + vs.segs.bytes;
		/* attached: the index forgets them before we return (without memory for the list, the
		 * fills that find them gone drop them) */
		if (gone && evicted)
			l3ix_on_objects_gone(l3->arena, gone, (size_t)evicted);
		free(gone);
		l3_segs_publish(l3, &vs.segs, objects, total);
		ADD(evictions, evicted);
		rc = evicted;
	}
	flock_un(l3);
	l3_segs_end(&vs.segs);
	free(vs.v);
	return rc;
}

/* ---- put ---- */

int l3_write_file(struct sc_l3 *l3, int dfd, const char *sub, const char *final, const struct iovec *iov, int niov,
		  int noreplace)
{
	char tmp[L3_WRITER_MAX + 24], tmprel[L3_WRITER_MAX + 32], finrel[100];
	l3_tmp_name(l3, ".tmp-", tmp, sizeof(tmp));
	snprintf(tmprel, sizeof(tmprel), "%s/%s", sub, tmp);
	snprintf(finrel, sizeof(finrel), "%s/%s", sub, final);
	int rc = mkdir_at(l3, dfd, sub);
	if (rc)
		return rc;
	int fd = openat(dfd, tmprel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, l3->file_mode);
	if (fd < 0)
		return -errno;
	(void)shm_ofd_trylock(fd, 0); /* "being written": reconcilers leave it alone (tmp_is_stale) */
	if ((rc = l3_own(l3, fd, 0)))
		goto cleanup;
	struct l3_ring *r = l3_ring_get(l3);
	if (!r) {
		rc = -ENOMEM;
		goto cleanup;
	}
	if ((rc = l3_ring_writev(r, fd, iov, niov, 0)) || (rc = l3_ring_fsync(r, fd)))
		goto cleanup;
	shm_fault_point("l3.put.before_rename");
	if (noreplace) {
		if (renameat2(dfd, tmprel, dfd, finrel, RENAME_NOREPLACE) < 0) {
			rc = -errno;
			if (rc == -EINVAL) /* filesystem without RENAME_NOREPLACE: link is no-replace too */
				rc = linkat(dfd, tmprel, dfd, finrel, 0) < 0 ? -errno : 0;
			unlinkat(dfd, tmprel, 0);
			if (rc)
				goto cleanup;
		}
	} else if (renameat(dfd, tmprel, dfd, finrel) < 0) {
		rc = -errno;
		goto cleanup;
	}
	close(fd);
	fd = -1;
	return fsync_dir_at(dfd, sub);
cleanup:
	if (fd >= 0) {
		close(fd);
		unlinkat(dfd, tmprel, 0);
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

/* Prefix @key now names another digest than it did: every arena index bound to this directory
 * drops what it knew of it at its next locate (struct l3_state, the re-put journal). */
static void journal_replaced(struct sc_l3 *l3, XXH128_hash_t key)
{
	struct l3_state *st = l3->st;
	uint64_t t = atomic_fetch_add_explicit(&st->repl_seq, 1, memory_order_acq_rel);
	struct l3_repl *r = &st->repl[t % L3_REPL_SLOTS];
	atomic_store_explicit(&r->seq, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release); /* a reader that sees our key sees seq 0 first */
	atomic_store_explicit(&r->lo, key.low64, memory_order_relaxed);
	atomic_store_explicit(&r->hi, key.high64, memory_order_relaxed);
	atomic_store_explicit(&r->seq, t + 1, memory_order_release); /* pairs with sync_replaced */
}

static int put_prefix(struct sc_l3 *l3, XXH128_hash_t key, const char *ns, const int32_t *tokens, uint32_t ntok,
		      uint64_t lo, uint64_t hi)
{
	char rel[48], hex[33];
	l3_pfx_relpath(key.low64, key.high64, rel);
	/* the length first: an entry whose length is not registered is never probed, and a writer
	 * killed between the two must not leave one behind (a later put finds the entry the same
	 * and would not come here again) */
	int rc = l3_put_length(l3, ntok);
	if (rc)
		return rc;
	struct l3_pfx p;
	uint32_t ns_len = ns ? (uint32_t)strlen(ns) : 0;
	int fd = l3_open_file(l3->pfxfd, rel, O_RDONLY), replaced = 0;
	if (fd >= 0) {
		int32_t *old = NULL;
		char *old_ns = malloc(SC_L3_STR_MAX + 1);
		int same = old_ns && l3_read_pfx(fd, &p, &old, old_ns) == 0 && old && p.digest_lo == lo &&
			   p.digest_hi == hi && p.token_count == ntok && !memcmp(old, tokens, (size_t)ntok * 4) &&
			   !strcmp(old_ns, ns ? ns : "");
		free(old);
		free(old_ns);
		close(fd);
		/* the same entry is kept, unless it is old enough to be judged by a dropper that cannot
		 * see our object yet (shared mode): then it is written again, young */
		if (same && (!l3->grace_ns || shm_realtime_ns() - p.created_ns < l3->grace_ns / 2))
			return 0;
		replaced = !same;
	}
	p = (struct l3_pfx){ .magic = L3_PFX_MAGIC, .version = L3_PFX_VERSION, .token_count = ntok,
			     .digest_lo = lo, .digest_hi = hi, .prefix_lo = key.low64, .prefix_hi = key.high64,
			     .created_ns = shm_realtime_ns() };
	p.check = pfx_check(&p, tokens, ns, ns_len);
	l3_digest_hex(key.low64, key.high64, hex);
	char name[40];
	snprintf(name, sizeof(name), "%s.pfx", hex);
	char sub[3] = { hex[0], hex[1], 0 };
	struct iovec iov[4] = { { &p, sizeof(p) }, { (void *)tokens, (size_t)ntok * 4 }, { &ns_len, 4 },
				{ (void *)(ns ? ns : ""), ns_len } };
	rc = l3_write_file(l3, l3->pfxfd, sub, name, iov, ns_len ? 4 : 3, 0);
	if (!rc && replaced)
		journal_replaced(l3, key);
	return rc;
}

/* The payload rules of sc_l2_admit: kind, sections, descriptor. */
static int payload_check(const struct sc_payload *p)
{
	if (!p || (p->sec_len[0] && !p->sec[0]) || (p->sec_len[1] && !p->sec[1]) || p->sec_len[0] > L3_MAX_PAYLOAD ||
	    p->sec_len[1] > L3_MAX_PAYLOAD || !(p->sec_len[0] + p->sec_len[1]))
		return -EINVAL;
	switch (p->kind) {
	case SC_PAYLOAD_FULL_STATE:
	case SC_PAYLOAD_RECURRENT_ONLY:
		return p->sec_len[1] || p->kv_desc ? -EINVAL : 0;
	case SC_PAYLOAD_KV_RECURRENT:
		if (!p->kv_desc != !p->sec_len[0])
			return -EINVAL;
		return p->kv_desc ? sc_kv_desc_validate(p->kv_desc, p->sec_len[0]) : 0;
	default:
		return -EINVAL;
	}
}

int l3_put_room(struct sc_l3 *l3, uint64_t need)
{
	struct statvfs vfs;
	if (l3->opts.budget_bytes && need > l3->opts.budget_bytes) {
		ADD(write_refusals, 1);
		return -E2BIG;
	}
	/* a filesystem that reports no size at all (ceph-fuse without a mgr: 0 blocks) is of unknown
	 * size, not full: there the budget is the only limit */
	if (fstatvfs(l3->dirfd, &vfs) == 0 && vfs.f_blocks &&
	    sat_mul((uint64_t)vfs.f_bavail, vfs.f_frsize) < sat_add(need, l3->opts.min_free_bytes)) {
		ADD(write_refusals, 1);
		return -ENOSPC;
	}
	uint64_t budget = l3->opts.budget_bytes;
	if (budget && !l3->shared && sat_add(atomic_load_explicit(&l3->st->bytes, RELAXED), need) > budget) {
		uint64_t target = budget / 100 * L3_LOW_WATER_PCT;
		int rc = sc_l3_evict_to(l3, target > need ? target - need : 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Write the object of a put (its header block @block, then the sections, or with @m the manifest
 * after its segments) unless it is there. Sets *@wrote to the physical bytes this call added.
 * 0, or a negative errno (refusals counted). */
static int put_object(struct sc_l3 *l3, const struct sc_payload *pl, const struct l3_seg_man *m, uint8_t *block,
		      const char *rel, uint64_t file_bytes, uint64_t *wrote)
{
	uint64_t lo, hi, payload = pl->sec_len[0] + pl->sec_len[1];
	struct stat sb;
	*wrote = 0;
	l3_name_digest(rel + 3, ".sc3", &lo, &hi);
	int fd = openat(l3->objfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == file_bytes) {
		ADD(put_dedup, 1);
		/* putting it again is a use: the LRU order keeps what is put again */
		l3_note_access(l3, fd, lo, hi, (int64_t)shm_ts_ns(sb.st_mtim));
		close(fd);
		return 0;
	}
	if (fd >= 0)
		close(fd);
	/* the room it takes: a segmented object's file and the segments not stored yet */
	int rc = l3_put_room(l3, m ? l3_seg_need(l3, m) : L3_HDR_BLOCK + payload);
	if (rc)
		return rc;
	uint64_t segs = 0, seg_bytes = 0;
	/* segments first, each touched: a sweep that began before our manifest keeps them (lib/l3_seg.c) */
	if (m && (rc = l3_seg_store(l3, pl, m, &segs, &seg_bytes)))
		goto refused;
	char name[48];
	struct iovec iov[3] = { { block, L3_HDR_BLOCK } };
	int niov = 1;
	if (m)
		iov[niov++] = (struct iovec){ m->e, (size_t)m->n * sizeof(*m->e) };
	for (int i = 0; !m && i < 2; i++)
		if (pl->sec_len[i])
			iov[niov++] = (struct iovec){ (void *)pl->sec[i], pl->sec_len[i] };
	snprintf(name, sizeof(name), "%s", rel + 3);
	char sub[3] = { rel[0], rel[1], 0 };
	if (m) {
		shm_fault_point("l3seg.put.segments");
		shm_sched_point("l3seg.put.reused"); /* segments checked and touched, manifest not yet written */
	}
	rc = l3_write_file(l3, l3->objfd, sub, name, iov, niov, 1);
	/* the manifest is in place: every segment touched again, written again where a sweep took it */
	if ((!rc || rc == -EEXIST) && m) {
		uint64_t s2 = 0, b2 = 0;
		int rc2 = l3_seg_store(l3, pl, m, &s2, &b2);
		segs += s2, seg_bytes += b2;
		if (rc2)
			rc = rc2;
	}
	ADD(segments, segs);
	ADD(seg_bytes, seg_bytes);
	ADD(bytes, seg_bytes);
	*wrote = seg_bytes;
	if (rc == -EEXIST) {
		ADD(put_dedup, 1);
		return 0;
	}
refused:
	if (rc) {
		if (rc == -ENOSPC || rc == -EDQUOT)
			ADD(write_refusals, 1);
		return rc;
	}
	ADD(puts, 1);
	ADD(objects, 1);
	ADD(bytes, file_bytes);
	ADD(logical, L3_HDR_BLOCK + payload);
	*wrote += file_bytes;
	if (m) {
		uint64_t lg = L3_HDR_BLOCK + payload, stored = file_bytes + seg_bytes, shared = payload - seg_bytes;
		SC_PROBE(l3_segments, lg, stored, shared);
	}
	return 0;
}

/* Are the object @rel and the prefix entry @key -> its digest both there? */
static int put_landed(struct sc_l3 *l3, const char *rel, XXH128_hash_t key, XXH128_hash_t dg, uint32_t tokens)
{
	char prel[48];
	struct stat sb;
	struct l3_pfx p;
	if (fstatat(l3->objfd, rel, &sb, 0) < 0)
		return 0;
	l3_pfx_relpath(key.low64, key.high64, prel);
	int fd = openat(l3->pfxfd, prel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	int ok = l3_read_pfx(fd, &p, NULL, NULL) == 0 && p.digest_lo == dg.low64 && p.digest_hi == dg.high64 && p.token_count == tokens;
	close(fd);
	return ok;
}

int sc_l3_put(struct sc_l3 *l3, const struct sc_l3_put_args *a, struct sc_location *loc)
{
	if (!l3 || !a || !a->tokens || !a->token_count || payload_check(a->payload))
		return -EINVAL;
	const struct sc_payload *pl = a->payload;
	uint64_t payload = pl->sec_len[0] + pl->sec_len[1], file_bytes = L3_HDR_BLOCK + payload;
	XXH3_state_t hs;
	XXH3_128bits_reset(&hs);
	for (int i = 0; i < 2; i++)
		if (pl->sec_len[i])
			XXH3_128bits_update(&hs, pl->sec[i], pl->sec_len[i]);
	XXH128_hash_t dg = XXH3_128bits_digest(&hs), key;
	l3_prefix_keys(a->ns, a->tokens, &a->token_count, 1, &key);
	uint8_t *block = aligned_alloc(L3_DIO_ALIGN, L3_HDR_BLOCK);
	if (!block)
		return -ENOMEM;
	struct l3_seg_man man = { 0 }, *m = NULL;
	uint64_t wrote_any = 0;
	int rc = l3_hdr_build(block, a, dg, key);
	if (rc)
		goto cleanup;
	/* segments on and a payload above one: the object is a manifest of its segments */
	if (l3->seg_size && payload > l3->seg_size) {
		if ((rc = l3_seg_plan(l3, pl, &man)))
			goto cleanup;
		m = &man;
		l3_seg_hdr(block, m, l3->seg_size);
		file_bytes = L3_HDR_BLOCK + (uint64_t)man.n * sizeof(*man.e);
	}
	char rel[48];
	l3_obj_relpath(dg.low64, dg.high64, rel);
	/* acknowledged only once the object and the entry were seen in place after both were
	 * written: an eviction or a drop that raced with us is repaired by writing again */
	for (int attempt = 0;; attempt++) {
		uint64_t wrote;
		if ((rc = put_object(l3, pl, m, block, rel, file_bytes, &wrote)))
			goto cleanup;
		wrote_any += wrote;
		if ((rc = put_prefix(l3, key, a->ns, a->tokens, a->token_count, dg.low64, dg.high64)))
			goto cleanup;
		if (put_landed(l3, rel, key, dg, a->token_count))
			break;
		if (attempt == 3) {
			rc = -EAGAIN; /* evicted as fast as we put it: the budget is too small for the load */
			goto cleanup;
		}
	}
	{
		struct sc_location where;
		struct l3_obj_hdr h;
		l3_hdr_parse(block, 0, &h);
		l3_hdr_location(block, &h, &where);
		where.prefix = (struct sc_digest){ key.low64, key.high64 };
		/* attached: the arena's location index knows before we return */
		if (l3->arena)
			l3ix_on_put(l3->arena, l3, a->ns, a->tokens, &where);
		if (loc)
			*loc = where;
	}
	if (wrote_any)
		l3_janitor_after_put(l3, wrote_any);
	l3_access_flush(l3, 0);
cleanup:
	free(man.e);
	free(block);
	return rc;
}
