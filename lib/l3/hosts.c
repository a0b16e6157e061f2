/*
 * lib/l3/hosts.c — what lets several processes on several hosts use one L3 directory: host
 * identity, writer liveness, shared mode, per-host counters, the access records that carry uses
 * to the janitor, and the safe removal of a prefix entry.
 *
 * Liveness never rests on pids (a pid names nothing on another host, or in another pid
 * namespace). What a handle makes in DIR is named after it, <writer> = <host>.<pid>.<nonce>
 * (temp files .tmp-<writer>.<n>, captured prefix entries .drop-<writer>.<n>, access segments
 * access/<writer>.<n>), and while it uses such a file it holds an OFD lock on its byte 0: the
 * kernel (or, across hosts, the filesystem: CephFS passes OFD locks between clients) drops the
 * lock when the process dies, or when the host's session ends. A file nobody holds is left over
 * only once it is also older than the instant between its creation and its lock (2 s) and than
 * the visibility grace (below): no host ever removes another live process's file in progress.
 *
 * Shared mode. A directory that several hosts mount is "shared": DIR/shared exists (written by
 * the first open with SC_L3_OPEN_SHARED, or by an open on CephFS). Then: counters live per host
 * in host-local memory (a MAP_SHARED file on a network filesystem would be neither coherent
 * across hosts nor safe when the mount dies: a fault on it is a SIGBUS); fills do not touch
 * object mtimes (a setattr is an MDS round trip, ~10 ms on CephFS) but record each use in a
 * buffer that is appended to DIR/access/<writer>.<n> every 128 uses or once a second (one write
 * of 4 KiB, ~0.3 ms on ceph-fuse: a few µs per fill), which the janitor merges; and eviction is
 * the janitor's alone (lib/l3/janitor.c).
 *
 * Visibility. A network filesystem need not show one host's new file to another at once: on
 * ceph-fuse 16.2 a file renamed into place on host A is missing for host B for a few ms more
 * (measured p99 28 ms, max 70 ms, with or without an earlier lookup on B), because B's client
 * answers from a directory cache until the MDS revokes it. So in shared mode nothing is removed
 * on the strength of "missing" until what was judged is older than a grace (opts.visibility_ms,
 * default 10 s, which also covers clock skew between hosts): a prefix entry naming a missing
 * object is dropped only when the entry is older (puts refresh entries older than half of it), a
 * temp file of a writer whose entry is missing only when the temp file is older, an access
 * segment likewise. Local mode has no grace.
 *
 * Dropping a prefix entry (it names an object that is gone). A put re-creating that object
 * writes or keeps the entry and then checks that it is there, so a dropper must never remove an
 * entry once a put has checked it. It captures the entry first (rename to .drop-<writer>.<n>),
 * judges what it captured, and either removes it (its object is missing) or puts it back with
 * RENAME_NOREPLACE (a newer entry written meanwhile wins). A put that checked its entry before
 * the capture therefore has an object that exists, and the entry is put back; a put that checks
 * after it finds no entry and writes it again. A dropper killed in between leaves a .drop- file
 * that the janitor judges the same way.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "types.h"
#include "files.h"
#include "format.h"
#include "hosts.h"
#include "../../shm/arena.h"

#define CEPH_SUPER_MAGIC 0x00c36400
#define FUSE_SUPER_MAGIC 0x65735546


/* ---- host identity ---- */

static int host_valid(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > L3_HOST_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}


int l3_host_init(struct sc_l3 *l3, const char *host_id)
{
	if (host_id) {
		if (!host_valid(host_id))
			return -EINVAL;
		snprintf(l3->host, sizeof(l3->host), "%s", host_id);
		return 0;
	}
	char buf[128] = { 0 };
	int fd = open("/etc/machine-id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = 0;
		buf[strcspn(buf, "\n")] = 0;
		if (host_valid(buf)) {
			snprintf(l3->host, sizeof(l3->host), "%s", buf);
			return 0;
		}
	}
	/* no machine id: the host name, with anything outside the alphabet made '-' */
	if (gethostname(buf, sizeof(buf) - 1) < 0 || !buf[0])
		return -ENOENT;
	buf[L3_HOST_MAX] = 0;
	for (char *c = buf; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
			*c = '-';
	snprintf(l3->host, sizeof(l3->host), "%s", buf);
	return 0;
}


/* ---- shared mode ---- */

/* Is @dirfd on CephFS (the kernel client, or ceph-fuse: fstype "fuse.ceph-fuse" in mountinfo)? */
static int on_cephfs(int dirfd)
{
	struct statfs sf;
	if (fstatfs(dirfd, &sf) < 0)
		return 0;
	if ((unsigned long)sf.f_type == CEPH_SUPER_MAGIC)
		return 1;
	if ((unsigned long)sf.f_type != FUSE_SUPER_MAGIC)
		return 0;
	struct statx sx;
	if (statx(dirfd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0 || !(sx.stx_mask & STATX_MNT_ID))
		return 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 0;
	char line[4096];
	int yes = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long id;
		if (sscanf(line, "%llu ", &id) != 1 || id != sx.stx_mnt_id)
			continue;
		const char *sep = strstr(line, " - ");
		yes = sep && !strncmp(sep + 3, "fuse.ceph", 9);
		break;
	}
	fclose(f);
	return yes;
}


int l3_mode_init(struct sc_l3 *l3, uint32_t flags)
{
	if (faccessat(l3->dirfd, "shared", F_OK, 0) == 0) {
		l3->shared = 1;
		return 0;
	}
	if (errno != ENOENT)
		return -errno;
	if (!(flags & SC_L3_OPEN_SHARED) && !on_cephfs(l3->dirfd))
		return 0;
	/* record it, so that every later open agrees (whatever path or flags it uses) */
	int fd = openat(l3->dirfd, "shared", O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, l3->file_mode);
	if (fd < 0)
		return -errno;
	static const char note[] = "stagecache L3 directory shared by several hosts\n";
	int rc = l3_own(l3, fd, 0);
	ssize_t w = rc ? 0 : write(fd, note, sizeof(note) - 1);
	if (!rc)
		rc = w == (ssize_t)sizeof(note) - 1 ? 0 : w < 0 ? -errno : -EIO;
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (!rc && fsync(l3->dirfd) < 0)
		rc = -errno;
	if (!rc)
		l3->shared = 1;
	return rc;
}


/* ---- writers: names, and what is left over ---- */

void l3_writer_init(struct sc_l3 *l3)
{
	snprintf(l3->writer, sizeof(l3->writer), "%s.%d.%08llx", l3->host, (int)getpid(),
		 (unsigned long long)(l3->nonce & 0xffffffffull));
}


void l3_tmp_name(struct sc_l3 *l3, const char *prefix, char *out, size_t n)
{
	snprintf(out, n, "%s%s.%u", prefix, l3->writer, atomic_fetch_add_explicit(&l3->tmp_seq, 1, RELAXED));
}


int l3_left_over(struct sc_l3 *l3, int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0; /* gone already, or not ours to judge */
	struct stat st;
	int held = shm_ofd_held(fd, 0), left = 0;
	if (held == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		uint64_t mt = shm_ts_ns(st.st_mtim);
		uint64_t age = l3->grace_ns > L3_TMP_STALE_NS ? l3->grace_ns : L3_TMP_STALE_NS;
		left = shm_realtime_ns() > mt + age;
	}
	close(fd);
	return left;
}


/* ---- uses, for the LRU order ---- */

int64_t l3_note_access(struct sc_l3 *l3, int fd, uint64_t lo, uint64_t hi, int64_t mtime_ns)
{
	uint64_t now = shm_realtime_ns();
	if (!l3->shared) {
		/* the LRU clock has a resolution of L3_TOUCH_NS: a file used more recently is not touched
		 * again (an inode update costs a journal write) */
		if (fd >= 0 && (int64_t)now - mtime_ns > (int64_t)L3_TOUCH_NS && futimens(fd, NULL) == 0)
			return (int64_t)now;
		return mtime_ns;
	}
	struct l3_access a = { lo, hi, now, 0 };
	a.check = XXH3_64bits(&a, offsetof(struct l3_access, check));
	pthread_mutex_lock(&l3->mu);
	if (l3->nacc < L3_ACCESS_BUF) {
		if (!l3->nacc)
			l3->acc_first_ns = now;
		l3->acc[l3->nacc++] = a;
	}
	int flush = l3->nacc == L3_ACCESS_BUF || now - l3->acc_first_ns >= L3_ACCESS_FLUSH_NS;
	pthread_mutex_unlock(&l3->mu);
	if (flush)
		l3_access_flush(l3, 1);
	return mtime_ns;
}


void l3_access_flush(struct sc_l3 *l3, int force)
{
	if (!l3->shared)
		return;
	pthread_mutex_lock(&l3->mu);
	uint64_t now = shm_realtime_ns();
	if (!l3->nacc || (!force && now - l3->acc_first_ns < L3_ACCESS_FLUSH_NS))
		goto out;
	if (l3->accfd < 0) {
		if (l3_mkdir_at(l3, l3->dirfd, "access"))
			goto drop;
		if ((l3->accfd = openat(l3->dirfd, "access", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			goto drop;
	}
	if (l3->segfd < 0) {
		char name[L3_WRITER_MAX + 16];
		snprintf(name, sizeof(name), "%s.%u", l3->writer, l3->segseq);
		l3->segfd = l3_create_file(l3, l3->accfd, name, O_WRONLY | O_TRUNC);
		l3->segoff = 0;
		if (l3->segfd < 0) {
			l3->segfd = -1;
			goto drop;
		}
		(void)shm_ofd_trylock(l3->segfd, 0); /* ours while we append: the janitor leaves it open */
	}
	size_t len = (size_t)l3->nacc * sizeof(struct l3_access);
	ssize_t w = pwrite(l3->segfd, l3->acc, len, (off_t)l3->segoff);
	if (w > 0)
		l3->segoff += (uint64_t)w;
	if (w != (ssize_t)len || l3->segoff >= L3_SEGMENT_MAX) {
		/* full (or a short write left a torn record): the janitor takes closed segments away */
		close(l3->segfd);
		l3->segfd = -1;
		l3->segseq++;
	}
drop:
	/* uses are hints for the LRU order: ones that could not be written are dropped */
	l3->nacc = 0;
out:
	pthread_mutex_unlock(&l3->mu);
}


/* ---- dropping a prefix entry ---- */

int l3_settled(const struct sc_l3 *l3, uint64_t t_ns)
{
	uint64_t now = shm_realtime_ns();
	return !l3->grace_ns || (now > t_ns && now - t_ns > l3->grace_ns);
}


/* Judge a captured prefix entry at @dfd/@cap that was named @name: 1 it names a missing object or
 * is invalid (drop it), 0 keep it. */
static int captured_is_dangling(struct sc_l3 *l3, int dfd, const char *cap, const char *name)
{
	uint64_t lo, hi;
	struct l3_pfx p;
	int rc = l3_read_pfx_named(dfd, cap, name, &p, &lo, &hi);
	if (rc == 1)
		return 0;
	if (rc == -EBADMSG)
		return 1;
	if (rc)
		return 0; /* a transient error: keep it */
	if (!l3_settled(l3, p.created_ns))
		return 0; /* its object may just not be visible here yet */
	char rel[48];
	struct stat sb;
	l3_obj_relpath(p.digest_lo, p.digest_hi, rel);
	if (l3_statat(l3->objfd, rel, &sb) == 0)
		return 0;
	return errno == ENOENT;
}


/* Put a captured entry back under its name unless a newer one is there (then remove ours). */
static int settle(struct sc_l3 *l3, int dfd, const char *cap, const char *name, int dangling)
{
	(void)l3;
	if (dangling)
		return unlinkat(dfd, cap, 0) == 0 ? 1 : -errno;
	if (renameat2(dfd, cap, dfd, name, RENAME_NOREPLACE) == 0)
		return 0;
	int rc = -errno;
	if (rc == -EINVAL) { /* no RENAME_NOREPLACE here: link is no-replace too */
		rc = linkat(dfd, cap, dfd, name, 0) < 0 ? -errno : 0;
		if (rc == 0 || rc == -EEXIST)
			unlinkat(dfd, cap, 0);
		return rc == -EEXIST ? 0 : rc;
	}
	if (rc == -EEXIST) /* a put wrote a newer entry meanwhile: it wins */
		return unlinkat(dfd, cap, 0) == 0 ? 0 : -errno;
	return rc;
}


int l3_pfx_drop(struct sc_l3 *l3, const char *rel)
{
	/* rel is "<2 hex>/<name>" */
	char sub[3] = { rel[0], rel[1], 0 }, cap[L3_WRITER_MAX + 24];
	const char *name = rel + 3;
	int dfd = openat(l3->pfxfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;
	l3_tmp_name(l3, ".drop-", cap, sizeof(cap));
	int rc;
	if (renameat(dfd, name, dfd, cap) < 0)
		rc = errno == ENOENT ? 0 : -errno; /* someone else took it */
	else
		rc = settle(l3, dfd, cap, name, captured_is_dangling(l3, dfd, cap, name));
	close(dfd);
	return rc;
}


int l3_pfx_drop_resolve(struct sc_l3 *l3, int dfd, const char *sub, const char *cap)
{
	/* the captured file does not say its name; its content does (prefix key) */
	int fd = openat(dfd, cap, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct l3_pfx p;
	int rc = l3_read_pfx(fd, &p, NULL, NULL);
	close(fd);
	if (rc == -EBADMSG)
		return unlinkat(dfd, cap, 0) == 0 ? 1 : -errno;
	if (rc)
		return rc;
	char hex[33], name[48];
	l3_digest_hex(p.prefix_lo, p.prefix_hi, hex);
	if (strncmp(hex, sub, 2)) /* not from this directory: nothing can find it here */
		return unlinkat(dfd, cap, 0) == 0 ? 1 : -errno;
	snprintf(name, sizeof(name), "%s.pfx", hex);
	return settle(l3, dfd, cap, name, captured_is_dangling(l3, dfd, cap, name));
}



