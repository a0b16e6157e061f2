/*
 * lib/l3/janitor.c — the janitor of an L3 directory: one process at a time, across every host
 * sharing the directory, evicts to the budget and removes what dead writers left.
 *
 * The lease. DIR/janitor is flock()ed exclusively by the janitor; it also holds the record
 * (struct l3_jrec): the epoch, who holds the lease, and the outcome of the last pass. Whoever
 * takes the lock writes epoch + 1 (fsync'd) before acting. The fencing rule: before the first
 * removal and before every batch of FENCE_BATCH removals, the janitor checks that the path
 * DIR/janitor is still the file it locked and that the record still carries its epoch; if not,
 * it has lost the lease (the lock was released under it: its host's session was evicted, or the
 * file was replaced) and stops with -ESTALE. The filesystem is the ultimate fence (an evicted
 * CephFS client is blocklisted: its operations fail); the epoch check makes it explicit, and
 * bounds what a janitor that lost its lease without noticing can do to one batch, every act of
 * which is also safe on its own: a victim is re-checked just before its unlink (a changed mtime
 * or size means it was used or replaced: kept), temp files are removed only when their writer's
 * entry is unlocked, prefix entries only through the capture protocol of lib/l3/hosts.c.
 *
 * Takeover. A janitor's process that dies releases the lock at once. A janitor's host that dies
 * keeps it until the filesystem ends the host's session (CephFS: session_timeout/autoclose, or
 * `ceph tell mds.<id> client evict`); then the next caller takes the lease, bumps the epoch, and
 * carries the record's counters on.
 *
 * The LRU order across hosts (shared mode). Fills and repeated puts on every host append a
 * record per use to their DIR/access/<writer>.<n> segment (lib/l3/hosts.c); each pass merges the
 * segments into the table of last uses it inherited from DIR/lru (lib/l3/lru.c), orders victims by
 * the later of their mtime (creation, or last touch in local mode) and their last recorded use,
 * writes the table back (tmp + rename) and only then removes the segments that are closed (their
 * writer is gone, or it has moved on to a newer one). A pass that dies in between merges them again
 * next time: merging is idempotent (a maximum).
 *
 * Lock order within a process: jan_mu (one janitor call per handle), then mu (lib/l3/hosts.c).
 *
 * Cost per pass on CephFS (measured with ceph-fuse): a listing of every object (readdir + stat,
 * ~0.25 ms per object with warm caps, ~2 ms cold), ~10 ms per unlink, the segments (<= 64 KiB per
 * live writer) and the table (24 bytes per object).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../xxh.h"

#include "types.h"
#include "files.h"
#include "fill.h"
#include "ring.h"
#include "format.h"
#include "hosts.h"
#include "janitor.h"
#include "lru.h"
#include "quarantine.h"
#include "reconcile.h"
#include "segstore.h"
#include "victims.h"
#include "write.h"

#define JREC_MAGIC 0x0a4e414a33435350ull /* "PSC3JAN\n" */
#define FENCE_BATCH 16                   /* removals between two fence checks */
#define LOG_ROTATE (4u << 20)            /* janitor.log is renamed to janitor.log.1 past this */
#define EST_REFRESH_NS 1000000000ull     /* put side: re-read the record at most this often */
#define SHARED_LIST_MIN 1024u            /* shared mode: a store this small is listed by every pass */
#define SHARED_RELIST_S 600u             /* shared mode: a larger one at least this often */

#ifdef SC_TEST_HOOKS
unsigned l3_shared_list_min = SHARED_LIST_MIN, l3_shared_relist_s = SHARED_RELIST_S;
_Atomic unsigned long l3_test_janitor_listings;
#define LIST_MIN l3_shared_list_min
#define RELIST_S l3_shared_relist_s
#else
#define LIST_MIN SHARED_LIST_MIN
#define RELIST_S SHARED_RELIST_S
#endif

/* The record in DIR/janitor (a 256-byte block at offset 0). */
struct l3_jrec {
	uint64_t magic;
	uint32_t version, size;
	uint64_t epoch;                /* fencing token: bumped by every new holder */
	uint64_t acquired_ns;          /* CLOCK_REALTIME when the holder took the lease */
	uint64_t pass_start_ns, pass_end_ns;
	uint64_t objects, bytes;       /* after the last pass */
	uint64_t evictions;            /* by every janitor since the directory was made */
	uint64_t passes;
	uint64_t full_pass_ns;         /* end of the last SC_L3_JANITOR_FULL pass */
	uint32_t pid;                  /* for people to read */
	uint32_t listed_s;             /* CLOCK_REALTIME seconds at the end of the last pass that
					* listed the store (0: none recorded; versions before kept 0) */
	char host[72];
	uint64_t check;                /* XXH3-64 of the bytes before it */
	uint8_t pad[256 - 176];
};
_Static_assert(sizeof(struct l3_jrec) == 256, "janitor record layout");
_Static_assert(offsetof(struct l3_jrec, check) == 168, "janitor record layout");


/* ---- the record ---- */

static int jrec_read_fd(int fd, struct l3_jrec *r)
{
	ssize_t n = pread(fd, r, sizeof(*r), 0);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ENOENT;
	if (n != sizeof(*r) || r->magic != JREC_MAGIC || r->version != L3_FORMAT_VERSION || r->size != sizeof(*r) ||
	    XXH3_64bits(r, offsetof(struct l3_jrec, check)) != r->check || memchr(r->host, 0, sizeof(r->host)) == NULL)
		return -EBADMSG;
	return 0;
}

static int jrec_write_fd(int fd, struct l3_jrec *r)
{
	r->magic = JREC_MAGIC;
	r->version = L3_FORMAT_VERSION;
	r->size = sizeof(*r);
	r->check = XXH3_64bits(r, offsetof(struct l3_jrec, check));
	ssize_t n = pwrite(fd, r, sizeof(*r), 0);
	if (n != sizeof(*r))
		return n < 0 ? -errno : -EIO;
	return fsync(fd) < 0 ? -errno : 0;
}

/* The janitor record of DIR into @r: 1, 0 when there is none yet, or -errno. */
static int jrec_load(struct sc_l3 *l3, struct l3_jrec *r)
{
	int fd = openat(l3->dirfd, "janitor", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	int rc = jrec_read_fd(fd, r);
	close(fd);
	return rc == -ENOENT ? 0 : rc ? rc : 1;
}

int l3_janitor_read(struct sc_l3 *l3, struct l3_jrec_view *v)
{
	memset(v, 0, sizeof(*v));
	struct l3_jrec r;
	int rc = jrec_load(l3, &r);
	if (rc <= 0)
		return rc;
	*v = (struct l3_jrec_view){ r.epoch, r.objects, r.bytes, r.evictions, r.pass_end_ns, r.listed_s, { 0 } };
	size_t hl = strnlen(r.host, sizeof(v->host) - 1);
	memcpy(v->host, r.host, hl);
	v->host[hl] = 0;
	return 0;
}

int sc_l3_janitor_status(struct sc_l3 *l3, struct sc_l3_janitor_status *st)
{
	if (!l3 || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->shared = l3->shared;
	snprintf(st->host_id, sizeof(st->host_id), "%s", l3->host);
	struct l3_jrec r;
	int rc = jrec_load(l3, &r);
	if (rc <= 0)
		return rc;
	size_t hl = strnlen(r.host, sizeof(st->janitor_host) - 1);
	memcpy(st->janitor_host, r.host, hl);
	st->janitor_host[hl] = 0;
	st->epoch = r.epoch;
	st->pass_start_ns = r.pass_start_ns;
	st->pass_end_ns = r.pass_end_ns;
	st->objects = r.objects;
	st->bytes = r.bytes;
	st->evictions = r.evictions;
	st->passes = r.passes;
	return 0;
}

/* ---- the lease ---- */

static uint64_t ino_of(int fd)
{
	struct stat sb;
	return fstat(fd, &sb) == 0 ? (uint64_t)sb.st_ino ^ ((uint64_t)sb.st_dev << 48) : 0;
}

/* Do we still hold the lease? 0, or -ESTALE (lost it, or cannot tell). */
static int fence(struct sc_l3 *l3)
{
	struct stat sb;
	struct l3_jrec r;
	if (l3->janfd < 0 || fstatat(l3->dirfd, "janitor", &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    ((uint64_t)sb.st_ino ^ ((uint64_t)sb.st_dev << 48)) != l3->jan_ino)
		return -ESTALE;
	if (jrec_read_fd(l3->janfd, &r) || r.epoch != l3->jan_epoch)
		return -ESTALE;
	return 0;
}

void l3_janitor_release(struct sc_l3 *l3)
{
	if (l3->janfd >= 0) {
		flock(l3->janfd, LOCK_UN);
		close(l3->janfd);
	}
	l3->janfd = -1;
	l3->jan_epoch = l3->jan_ino = 0;
}

static int lease_take(struct sc_l3 *l3, int wait)
{
	if (l3->janfd >= 0) { /* kept from an earlier call */
		int rc = fence(l3);
		if (rc)
			l3_janitor_release(l3);
		return rc;
	}
	for (int attempt = 0; attempt < 8; attempt++) {
		int fd = l3_create_file(l3, l3->dirfd, "janitor", O_RDWR);
		if (fd < 0)
			return fd;
		while (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) < 0) {
			int e = errno;
			if (e == EINTR && wait)
				continue;
			close(fd);
			return e == EWOULDBLOCK ? -EBUSY : -e;
		}
		/* the file we locked must still be the one at the path (not replaced while we waited) */
		if (!l3_still_named(l3->dirfd, "janitor", fd)) {
			close(fd);
			continue;
		}
		struct l3_jrec r;
		int rc = jrec_read_fd(fd, &r);
		if (rc == -ENOENT || rc == -EBADMSG) {
			/* first lease, or an unreadable record: an epoch no earlier holder can have had */
			uint64_t e = rc == -EBADMSG ? shm_realtime_ns() : 0;
			memset(&r, 0, sizeof(r));
			r.epoch = e;
		} else if (rc) {
			close(fd);
			return rc;
		}
		r.epoch++;
		r.acquired_ns = shm_realtime_ns();
		r.pid = (uint32_t)getpid();
		snprintf(r.host, sizeof(r.host), "%s", l3->host);
		if ((rc = jrec_write_fd(fd, &r))) {
			close(fd);
			return rc;
		}
		l3->janfd = fd;
		l3->jan_epoch = r.epoch;
		l3->jan_ino = ino_of(fd);
		return 0;
	}
	return -EBUSY;
}

/* ---- a pass ---- */

struct victim {
	uint64_t lo, hi, bytes;
	int64_t mtime, key;
	int gone, segmented;
};

struct jctx {
	struct sc_l3 *l3;
	uint32_t flags;
	struct sc_l3_janitor_report rep;
	struct victim *v;
	size_t nv, capv;
	size_t *order;                      /* v in eviction order, once evict() sorted it */
	uint64_t total;                     /* physical: object files and segment files */
	uint64_t objbytes;                  /* object files */
	struct l3_segs segs;                /* DIR/seg and the references of the objects listed */
	struct l3_lru lru;                  /* shared mode: last uses (lib/l3/lru.c) */
	unsigned acts;                      /* removals so far: fence every FENCE_BATCH */
	int logfd;
	char logbuf[8192];
	size_t loglen;
};

/* Is this access segment (in DIR/access) left over by a writer that is gone? */
static int segment_left_over(void *ctx, const char *name)
{
	struct jctx *j = ctx;
	int dfd = openat(j->l3->dirfd, "access", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	int left = l3_left_over(j->l3, dfd, name);
	close(dfd);
	return left;
}

/* May we remove something now? The fencing rule, checked before every FENCE_BATCH removals. */
static int act(struct jctx *j)
{
	if (j->acts++ % FENCE_BATCH == 0) {
		if (j->loglen && j->logfd >= 0) {
			if (write(j->logfd, j->logbuf, j->loglen) < 0) {
				/* the log is for people and the stress; a failed write loses lines, not objects */
			}
			j->loglen = 0;
		}
		return fence(j->l3);
	}
	return 0;
}

static int act_cb(void *j)
{
	return act(j);
}

static void log_line(struct jctx *j, uint64_t t0, uint64_t t1, const char *what, uint64_t lo, uint64_t hi,
		     uint64_t bytes)
{
	if (j->logfd < 0)
		return;
	char hex[33];
	l3_digest_hex(lo, hi, hex);
	if (j->loglen + 200 > sizeof(j->logbuf)) {
		if (write(j->logfd, j->logbuf, j->loglen) < 0) {
			/* as above */
		}
		j->loglen = 0;
	}
	j->loglen += (size_t)snprintf(j->logbuf + j->loglen, sizeof(j->logbuf) - j->loglen, "%llu %llu %llu %s %s %s %llu\n",
				      (unsigned long long)t0, (unsigned long long)t1, (unsigned long long)j->l3->jan_epoch,
				      j->l3->host, what, hex, (unsigned long long)bytes);
}

/* Write what is buffered now. */
static void log_flush(struct jctx *j)
{
	if (j->loglen && j->logfd >= 0 && write(j->logfd, j->logbuf, j->loglen) < 0) {
		/* the log is for people and the stress; a failed write loses lines, not objects */
	}
	j->loglen = 0;
}

static void log_open(struct jctx *j)
{
	struct stat sb;
	struct sc_l3 *l3 = j->l3;
	if (fstatat(l3->dirfd, "janitor.log", &sb, AT_SYMLINK_NOFOLLOW) == 0 && sb.st_size > LOG_ROTATE)
		renameat(l3->dirfd, "janitor.log", l3->dirfd, "janitor.log.1");
	j->logfd = l3_create_file(l3, l3->dirfd, "janitor.log", O_WRONLY | O_APPEND);
	if (j->logfd < 0)
		j->logfd = -1;
}

/* -- the listing -- */

static int on_object(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct jctx *j = ctx;
	(void)sub;
	if (!strncmp(name, ".tmp-", 5)) {
		/* a writer's temp file: left alone while its writer holds it, or while it is young */
		if (!l3_left_over(l3, dfd, name))
			return 0;
		int rc = act(j);
		if (rc)
			return rc;
		if (unlinkat(dfd, name, 0) == 0)
			j->rep.stale_temps++;
		return 0;
	}
	uint64_t lo, hi;
	struct stat sb;
	if (l3_name_digest(name, ".sc3", &lo, &hi) || fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(sb.st_mode))
		return 0;
	if (j->flags & SC_L3_JANITOR_FULL) {
		uint8_t *block = malloc(L3_HDR_BLOCK);
		uint64_t fb = 0;
		struct l3_obj_hdr h;
		int fd = block ? openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
		int rc = fd < 0 ? -errno : l3_read_block(fd, block, &fb);
		if (fd >= 0)
			close(fd);
		if (!rc)
			rc = l3_hdr_parse(block, fb, &h);
		if (!rc && (h.digest_lo != lo || h.digest_hi != hi))
			rc = -EBADMSG;
		free(block);
		if (!block)
			return -ENOMEM;
		if (rc == -EBADMSG || rc == -EPROTO) {
			if ((rc = act(j)))
				return rc;
			uint64_t t0 = shm_realtime_ns();
			if (l3_quarantine(l3, lo, hi, EBADMSG) == 0) {
				j->rep.quarantined++;
				log_line(j, t0, shm_realtime_ns(), "quarantine", lo, hi, (uint64_t)sb.st_size);
			}
			return 0;
		}
	}
	if (l3_grow((void **)&j->v, &j->capv, j->nv + 1, sizeof(*j->v)))
		return -ENOMEM;
	int64_t mt = (int64_t)shm_ts_ns(sb.st_mtim);
	int64_t used = (int64_t)l3_lru_get(&j->lru, lo, hi);
	/* a manifest naming a missing segment can never be read: a full pass removes it once settled */
	int seg = l3_segs_object(l3, &j->segs, dfd, name, (uint64_t)sb.st_size, 1, NULL);
	if (seg == -ENOENT &&
	    (j->flags & SC_L3_JANITOR_FULL) && l3_settled(l3, (uint64_t)mt) &&
	    shm_realtime_ns() - (uint64_t)mt > L3_TMP_STALE_NS) {
		int rc = act(j);
		if (rc)
			return rc;
		if (unlinkat(dfd, name, 0) == 0) {
			log_line(j, shm_realtime_ns(), shm_realtime_ns(), "dangling", lo, hi, (uint64_t)sb.st_size);
			if (l3->arena) {
				struct sc_digest d = { lo, hi };
				l3_tell_objects_gone(l3, &d, 1);
			}
		}
		return 0;
	}
	j->v[j->nv++] = (struct victim){ lo, hi, (uint64_t)sb.st_size, mt, used > mt ? used : mt, 0, seg != 0 };
	j->total += (uint64_t)sb.st_size;
	j->objbytes += (uint64_t)sb.st_size;
	return 0;
}

static int by_key(const void *a, const void *b, void *ctx)
{
	const struct victim *v = ctx, *x = &v[*(const size_t *)a], *y = &v[*(const size_t *)b];
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The listing in eviction order (j->order). */
static int sort_victims(struct jctx *j)
{
	if (j->order)
		return 0;
	size_t *order = j->order = malloc((j->nv ? j->nv : 1) * sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < j->nv; i++)
		order[i] = i;
	qsort_r(order, j->nv, sizeof(*order), by_key, j->v);
	return 0;
}

static int evict(struct jctx *j, uint64_t goal)
{
	struct sc_l3 *l3 = j->l3;
	if (j->total <= goal)
		return 0;
	int rc = sort_victims(j);
	if (rc)
		return rc;
	size_t *order = j->order;
	for (size_t i = 0; i < j->nv && j->total > goal; i++) {
		struct victim *v = &j->v[order[i]];
		char rel[48];
		struct stat sb;
		l3_obj_relpath(v->lo, v->hi, rel);
		/* used (touched) or replaced since the listing: keep it */
		if (l3_statat(l3->objfd, rel, &sb) < 0) {
			if (errno == ENOENT) {
				j->total -= v->bytes;
				j->objbytes -= v->bytes;
				v->gone = 1;
			}
			continue;
		}
		if ((int64_t)shm_ts_ns(sb.st_mtim) != v->mtime ||
		    (uint64_t)sb.st_size != v->bytes) {
			j->rep.skipped_recent++;
			continue;
		}
		if ((rc = act(j)))
			break;
		/* the intent is on record before the unlink: a janitor killed between the two still
		 * leaves a line saying the object may be gone from then on */
		uint64_t t0 = shm_realtime_ns();
		log_line(j, t0, 0, "intent", v->lo, v->hi, v->bytes);
		log_flush(j);
		uint64_t freed = 0; /* its segments no other object names (the sweep removes them) */
		(void)l3_segs_object(l3, &j->segs, l3->objfd, rel, v->bytes, -1, &freed);
		if (l3_unlinkat(l3->objfd, rel) < 0) {
			(void)l3_segs_object(l3, &j->segs, l3->objfd, rel, v->bytes, 1, NULL);
			continue;
		}
		l3_kept_forget(l3);
		uint64_t t1 = shm_realtime_ns();
		log_line(j, t0, t1, "evict", v->lo, v->hi, v->bytes);
		j->total -= v->bytes + freed;
		j->objbytes -= v->bytes;
		v->gone = 1;
		if (l3->arena) { /* attached here: the arena's location index forgets it before we go on */
			struct sc_digest d = { v->lo, v->hi };
			l3_tell_objects_gone(l3, &d, 1);
		}
		j->rep.evicted++;
		j->rep.evicted_bytes += v->bytes;
	}
	return rc;
}

/* Local mode, a large store with a budget: the head of this listing's order, for the evictions
 * after it (lib/l3/victims.c). */
static void save_order(struct jctx *j)
{
	struct sc_l3 *l3 = j->l3;
	if (l3->shared || !l3->opts.budget_bytes || sort_victims(j))
		return;
	struct l3_cand *c = malloc((j->nv ? j->nv : 1) * sizeof(*c));
	size_t k = 0;
	for (size_t i = 0; c && i < j->nv; i++) {
		const struct victim *v = &j->v[j->order[i]];
		if (!v->gone)
			l3_cand_set(&c[k++], v->lo, v->hi, v->bytes, v->mtime, v->segmented);
	}
	if (c)
		(void)l3_victims_save(l3, c, k, j->total);
	free(c);
}

/* Victims from the last listing's order: the fencing rule and the intent line before each. */
static int cand_act(void *ctx, const struct l3_cand *c)
{
	struct jctx *j = ctx;
	int rc = act(j);
	if (!rc) {
		log_line(j, shm_realtime_ns(), 0, "intent", c->lo, c->hi, c->bytes);
		log_flush(j);
	}
	return rc;
}

static void cand_evicted(void *ctx, const struct l3_cand *c, uint64_t t0)
{
	struct jctx *j = ctx;
	log_line(j, t0, shm_realtime_ns(), "evict", c->lo, c->hi, c->bytes);
	j->rep.evicted++;
	j->rep.evicted_bytes += c->bytes;
}

static int on_prefix(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct jctx *j = ctx;
	int rc;
	if (!strncmp(name, ".tmp-", 5) || !strncmp(name, ".drop-", 6)) {
		int drop = name[1] == 'd';
		if (!l3_left_over(l3, dfd, name))
			return 0;
		if ((rc = act(j)))
			return rc;
		if (drop)
			l3_pfx_drop_resolve(l3, dfd, sub, name);
		else if (unlinkat(dfd, name, 0) == 0)
			j->rep.stale_temps++;
		return 0;
	}
	if (!(j->flags & SC_L3_JANITOR_FULL))
		return 0;
	uint64_t lo, hi;
	struct l3_pfx p;
	rc = l3_read_pfx_named(dfd, name, name, &p, &lo, &hi);
	if (rc == 1)
		return 0;
	int dangling = rc == -EBADMSG;
	if (!rc && !dangling) {
		char rel[48];
		struct stat sb;
		l3_obj_relpath(p.digest_lo, p.digest_hi, rel);
		dangling = l3_statat(l3->objfd, rel, &sb) == -ENOENT;
	}
	if (!dangling) {
		/* an entry is found only through its length: register it if a writer died before */
		l3_put_length(l3, p.token_count);
		return 0;
	}
	if ((rc = act(j)))
		return rc;
	char rel[48];
	snprintf(rel, sizeof(rel), "%s/%s", sub, name);
	if (l3_pfx_drop(l3, rel) == 1) {
		j->rep.dropped++;
		if (l3->arena)
			l3_tell_prefix_gone(l3, (struct sc_digest){ lo, hi });
	}
	return 0;
}

/* The table of last uses, for the objects still there and only where their mtime says less. */
static int lru_write(struct jctx *j)
{
	size_t n = 0;
	struct l3_lru_ent *e = malloc((j->nv ? j->nv : 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < j->nv; i++) {
		const struct victim *v = &j->v[i];
		if (!v->gone && v->key > v->mtime)
			e[n++] = (struct l3_lru_ent){ v->lo, v->hi, (uint64_t)v->key };
	}
	int rc = l3_lru_write(j->l3, e, n, fence);
	free(e);
	return rc;
}

/* Shared mode: the access segments merged into the table just written whose writers are done
 * with them, removed. */
static int segments_remove(struct jctx *j)
{
	int rc = 0;
	int afd = openat(j->l3->dirfd, "access", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	for (size_t i = 0; afd >= 0 && i < j->lru.nclosed && !(rc = act(j)); i++)
		unlinkat(afd, j->lru.closed[i], 0);
	if (afd >= 0)
		close(afd);
	return rc;
}

/*
 * Shared mode, no budget, no full check asked, and the store's last listing (by any host's janitor)
 * found it larger than LIST_MIN objects less than RELIST_S seconds ago: what changed since is the
 * hosts' uses (their access segments, merged into DIR/lru) and the temp files of writers that died,
 * so that is all this pass looks at; it does not list the store (on CephFS a listing costs ~0.5 ms
 * per object). What only a listing finds (temp files of stores made before DIR/tmp, segments no
 * object names) waits for the next one, at most RELIST_S later. Its objects and bytes are the last
 * listing's.
 */
static int listed_recently(struct sc_l3 *l3, uint32_t flags, uint64_t target, struct l3_jrec *last)
{
	if (!l3->shared || (flags & SC_L3_JANITOR_FULL) || target != UINT64_MAX || l3->opts.budget_bytes ||
	    jrec_read_fd(l3->janfd, last) || !last->listed_s || last->objects <= LIST_MIN)
		return 0;
	uint64_t now_s = shm_realtime_ns() / 1000000000ull;
	return now_s >= last->listed_s && now_s - last->listed_s < RELIST_S;
}

/* Temp files of writers that are gone in @dfd: DIR/tmp (every put's), or DIR itself (a janitor
 * killed while writing DIR/lru). */
static int top_temps(struct jctx *j, int dfd)
{
	struct sc_l3 *l3 = j->l3;
	DIR *d = dfd >= 0 ? l3_opendir(dfd) : NULL;
	if (!d)
		return 0;
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		if (strncmp(e->d_name, ".tmp-", 5) || !l3_left_over(l3, dirfd(d), e->d_name))
			continue;
		if (!(rc = act(j)) && unlinkat(dirfd(d), e->d_name, 0) == 0)
			j->rep.stale_temps++;
	}
	closedir(d);
	return rc;
}

static int pass(struct sc_l3 *l3, uint32_t flags, uint64_t target, struct sc_l3_janitor_report *out)
{
	struct jctx *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->l3 = l3;
	j->flags = flags;
	j->logfd = -1;
	uint64_t t0 = shm_now_ns(), start = shm_realtime_ns();
	int rc = fence(l3);
	if (rc)
		goto out;
	log_open(j);
	if (l3->shared) {
		l3_lru_load(l3, &j->lru, segment_left_over, j);
		j->rep.accesses = j->lru.accesses;
	}
	/* local mode, a large store, no full check asked: under its budget nothing to evict, over it
	 * the victims the last listing's order still has (lib/l3/victims.c) — no listing while they
	 * suffice; what dead writers left in DIR/tmp and one reconciliation step (lib/l3/reconcile.c),
	 * the counters as DIR/state has them */
	uint64_t budget = l3->opts.budget_bytes, objects = 0;
	int listed = 0, reached = 1;
	int local_large = !l3->shared && !(flags & SC_L3_JANITOR_FULL) && l3_reconcile_large(l3);
	if (local_large) {
		uint64_t goal = target;
		if (goal == UINT64_MAX && budget && atomic_load_explicit(&l3->st->bytes, RELAXED) > budget)
			goal = budget / 100 * L3_LOW_WATER_PCT;
		if (goal != UINT64_MAX) {
			struct l3_victims_ops ops = { cand_act, cand_evicted, j };
			rc = l3_victims_evict(l3, goal, &ops, &reached);
			if (rc < 0 && rc != -ENOENT)
				goto out;
			reached = rc >= 0 && reached;
			rc = 0;
		}
	}
	if (local_large && reached) {
		if ((rc = act(j)))
			goto out;
		l3_reconcile_step_locked(l3, 1, &j->rep.stale_temps, &j->rep.quarantined, &j->rep.dropped);
		objects = atomic_load_explicit(&l3->st->objects, RELAXED);
		j->total = atomic_load_explicit(&l3->st->bytes, RELAXED);
		goto record;
	}
	struct l3_jrec last;
	if (listed_recently(l3, flags, target, &last)) {
		if ((rc = act(j)) || (rc = top_temps(j, l3->dirfd)) || (rc = top_temps(j, l3->tmpfd)) ||
		    (rc = l3_lru_write_merged(l3, &j->lru, fence)) || (rc = segments_remove(j)))
			goto out;
		objects = last.objects;
		j->total = last.bytes;
		goto record;
	}
	listed = 1;
#ifdef SC_TEST_HOOKS
	atomic_fetch_add_explicit(&l3_test_janitor_listings, 1, RELAXED);
	if (!l3->shared)
		atomic_fetch_add_explicit(&l3_test_evict_listings, 1, RELAXED);
#endif
	if ((rc = l3_segs_begin(l3, &j->segs)) || (rc = l3_scan(l3, l3->objfd, on_object, j)))
		goto out;
	j->total += j->segs.bytes;
	if (target != UINT64_MAX)
		rc = evict(j, target);
	else if (budget && j->total > budget)
		rc = evict(j, budget / 100 * L3_LOW_WATER_PCT);
	if (rc)
		goto out;
	if ((rc = l3_scan(l3, l3->pfxfd, on_prefix, j)))
		goto out;
	if ((rc = top_temps(j, l3->dirfd)) || (rc = top_temps(j, l3->tmpfd)) || (rc = l3_segs_sweep(l3, &j->segs, act_cb, j)))
		goto out;
	j->total = j->objbytes + j->segs.bytes;
	if (l3->shared) {
		if ((rc = lru_write(j)) || (rc = segments_remove(j)))
			goto out;
	}
	for (size_t i = 0; i < j->nv; i++)
		objects += !j->v[i].gone;
	l3_segs_publish(l3, &j->segs, objects, j->total);
	save_order(j);
record:;
	/* the record: carried on from the last holder */
	struct l3_jrec r;
	if ((rc = fence(l3)) || (rc = jrec_read_fd(l3->janfd, &r)))
		goto out;
	r.pass_start_ns = start;
	r.pass_end_ns = shm_realtime_ns();
	r.objects = objects;
	r.bytes = j->total;
	r.evictions += j->rep.evicted;
	r.passes++;
	if (flags & SC_L3_JANITOR_FULL)
		r.full_pass_ns = r.pass_end_ns;
	if (listed)
		r.listed_s = (uint32_t)(r.pass_end_ns / 1000000000ull);
	if ((rc = jrec_write_fd(l3->janfd, &r)))
		goto out;
	atomic_fetch_add_explicit(&l3->st->evictions, j->rep.evicted, RELAXED);
	j->rep.objects = objects;
	j->rep.bytes = j->total;
	pthread_mutex_lock(&l3->mu);
	l3->est_bytes = j->total;
	l3->est_read_ns = r.pass_end_ns;
	pthread_mutex_unlock(&l3->mu);
out:
	if (j->logfd >= 0) {
		if (j->loglen && write(j->logfd, j->logbuf, j->loglen) < 0) {
			/* lines lost, objects not */
		}
		close(j->logfd);
	}
	j->rep.epoch = l3->jan_epoch;
	j->rep.pass_ns = shm_now_ns() - t0;
	if (out)
		*out = j->rep;
	free(j->v);
	free(j->order);
	l3_segs_end(&j->segs);
	l3_lru_free(&j->lru);
	free(j);
	return rc;
}

static int janitor_run(struct sc_l3 *l3, uint32_t flags, uint64_t target, struct sc_l3_janitor_report *rep, int trylock)
{
	if (trylock) {
		if (pthread_mutex_trylock(&l3->jan_mu))
			return -EBUSY;
	} else {
		pthread_mutex_lock(&l3->jan_mu);
	}
	l3_access_flush(l3, 1); /* our own uses first */
	int rc = lease_take(l3, flags & SC_L3_JANITOR_WAIT);
	if (!rc) {
		/* local mode: also exclude reconcile/evict_to */
		rc = l3->shared ? 0 : l3_flock_ex(l3);
		if (!rc) {
			rc = pass(l3, flags, target, rep);
			if (!l3->shared)
				l3_flock_un(l3);
		}
		if (rc == -ESTALE || !(flags & SC_L3_JANITOR_KEEP))
			l3_janitor_release(l3);
	} else if (rep) {
		memset(rep, 0, sizeof(*rep));
	}
	pthread_mutex_unlock(&l3->jan_mu);
	return rc;
}

int sc_l3_janitor(struct sc_l3 *l3, uint32_t flags, struct sc_l3_janitor_report *rep)
{
	if (!l3 || (flags & ~SC_L3_JANITOR_MASK))
		return -EINVAL;
	return janitor_run(l3, flags, UINT64_MAX, rep, 0);
}

int l3_janitor_evict_to(struct sc_l3 *l3, uint64_t bytes)
{
	struct sc_l3_janitor_report rep;
	int rc = janitor_run(l3, 0, bytes, &rep, 0);
	return rc ? rc : (int)rep.evicted;
}

void l3_janitor_after_put(struct sc_l3 *l3, uint64_t bytes)
{
	uint64_t budget = l3->opts.budget_bytes, now = shm_realtime_ns();
	if (!l3->shared || !budget)
		return;
	pthread_mutex_lock(&l3->mu);
	int refresh = now - l3->est_read_ns > EST_REFRESH_NS;
	l3->est_bytes += bytes;
	pthread_mutex_unlock(&l3->mu);
	if (refresh) {
		/* the last pass's size, plus what we put since (other hosts' puts show at the next pass) */
		struct l3_jrec_view v;
		if (l3_janitor_read(l3, &v) == 0 && v.pass_end_ns) {
			pthread_mutex_lock(&l3->mu);
			l3->est_bytes = v.bytes + bytes;
			l3->est_read_ns = now;
			pthread_mutex_unlock(&l3->mu);
		}
	}
	pthread_mutex_lock(&l3->mu);
	int over = l3->est_bytes > budget;
	pthread_mutex_unlock(&l3->mu);
	/* over the budget: a pass now, unless a janitor (here or on another host) is at work */
	if (over)
		janitor_run(l3, 0, UINT64_MAX, NULL, 1);
}
