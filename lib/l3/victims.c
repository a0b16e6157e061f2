/*
 * lib/l3/victims.c — evictions that do not list the store (local mode).
 *
 * Finding the least recently used objects takes a listing of every object (a readdir and a stat
 * each: seconds at a million objects), and a store over its budget used to be listed by every
 * eviction — by every put that crossed the budget. A listing sorts every object by its last use;
 * it now leaves the head of that order in DIR/victims: the oldest objects covering half the
 * budget (or of the store; L3_VICTIMS_KEEP_PCT), each with the size and mtime it had. The next evictions take their
 * victims from there, in order, without listing:
 *
 *   - a candidate that is gone (evicted, quarantined or replaced by someone else) is passed over;
 *   - one whose mtime or size changed was used (a local fill touches its file) or put again
 *     since: it is kept, and it is no longer among the oldest;
 *   - one that did not change is older than every object not in the file: those had a later last
 *     use at the listing (uses only move it later) or were put after it. So the order evicted is
 *     the order a listing now would give, save objects whose put began before the listing and
 *     ended after it passed their directory (they are evicted later than their mtime says).
 *
 * A segmented candidate (a manifest) stops the walk: what its eviction frees depends on every
 * other manifest, which only a listing reads. So does the end of the file, a damaged entry or
 * header (each carries an XXH3-64), or a file that is not there. How far the file was used is a
 * hint kept in its header (`pos`, written in place after a walk): a crash that loses it makes the
 * next walk stat again what was evicted already (gone: passed over).
 *
 * The file is written without fsync: after a power cut it is either whole, or fails its checks
 * and the next eviction lists. DIR/state's counters (bytes, objects, logical) move with each
 * eviction, as with a put or a quarantine; a listing recounts them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "../xxh.h"
#include "../../shm/fault.h"

#include "types.h"
#include "files.h"
#include "format.h"
#include "fill.h"
#include "reconcile.h"
#include "ring.h"
#include "victims.h"
#include "write.h"

#define VICTIMS_MAGIC 0x0a4d49544349564cull /* "LVICTIM\n" */
#define VICTIMS_MAX (1u << 22)              /* entries at most (4 M: a file of 192 MiB) */

struct vhdr {
	uint64_t magic;
	uint32_t version, entry_size;
	uint64_t count;
	uint64_t listed_ns;                 /* CLOCK_REALTIME of the save */
	uint64_t check;                     /* XXH3-64 of the bytes before it */
	uint64_t pos;                       /* entries walked already (a hint; not in the check) */
};
_Static_assert(sizeof(struct vhdr) == 48 && sizeof(struct l3_cand) == 48, "victims file layout");

#ifdef SC_TEST_HOOKS
_Atomic unsigned long l3_test_evict_listings;
#endif


void l3_cand_set(struct l3_cand *c, uint64_t lo, uint64_t hi, uint64_t bytes, int64_t mtime, int segmented)
{
	*c = (struct l3_cand){ lo, hi, bytes, mtime, segmented ? L3_CAND_SEGMENTED : 0, 0, 0 };
	c->check = XXH3_64bits(c, offsetof(struct l3_cand, check));
}


int l3_victims_save(struct sc_l3 *l3, const struct l3_cand *c, size_t n, uint64_t total)
{
	if (!l3_reconcile_large(l3))
		return 0; /* a small store is listed by every eviction (a few ms) */
	uint64_t keep = (l3->opts.budget_bytes ? l3->opts.budget_bytes : total) / 100 * L3_VICTIMS_KEEP_PCT;
	size_t k = 0;
	for (uint64_t got = 0; k < n && k < VICTIMS_MAX && got < keep; k++)
		got += c[k].bytes;
	if (!k)
		return unlinkat(l3->dirfd, "victims", 0) < 0 && errno != ENOENT ? -errno : 0;
	struct vhdr h = { VICTIMS_MAGIC, L3_FORMAT_VERSION, sizeof(*c), k, shm_realtime_ns(), 0, 0 };
	h.check = XXH3_64bits(&h, offsetof(struct vhdr, check));
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)c, k * sizeof(*c) } };
	return l3_replace_top(l3, "victims", iov, 2, 0, NULL);
}


/* The file's header, checked against its size; its fd (read-write), or -ENOENT. */
static int victims_open(struct sc_l3 *l3, struct vhdr *h)
{
	int fd = openat(l3->dirfd, "victims", O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -ENOENT;
	struct stat sb;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || pread(fd, h, sizeof(*h), 0) != sizeof(*h) ||
	    h->magic != VICTIMS_MAGIC || h->version != L3_FORMAT_VERSION || h->entry_size != sizeof(struct l3_cand) ||
	    h->check != XXH3_64bits(h, offsetof(struct vhdr, check)) || h->count > VICTIMS_MAX ||
	    (uint64_t)sb.st_size != sizeof(*h) + h->count * sizeof(struct l3_cand)) {
		close(fd);
		return -ENOENT;
	}
	if (h->pos > h->count)
		h->pos = h->count;
	return fd;
}

/*
 * A walk takes the candidates ROUND at a time: their statx calls as one round on this thread's
 * ring, then the unlinks of those it picks (while the store, less what is picked, is over the
 * goal) as another, which io-wq runs side by side (an unlink that frees an inode and its blocks
 * waits for the filesystem's bitmaps: ~80 us alone on the test machines' ext4, ~15-30 us each with
 * 16-64 at once). Without a ring, the same requests one by one.
 */
#define ROUND 32u

struct walk {
	struct sc_l3 *l3;
	struct l3_ring *ring;
	const struct l3_victims_ops *ops;
	int sub[256];                       /* DIR/objects/XX (O_PATH), opened when first needed */
	struct l3_cand c[ROUND];
	int dfd[ROUND];
	char name[ROUND][48];
	struct statx stx[ROUND];
	int res[ROUND];
	unsigned pick[ROUND], npick;
};

static void prep_statx(struct io_uring_sqe *sqe, unsigned i, void *ctx)
{
	struct walk *w = ctx;
	io_uring_prep_statx(sqe, w->dfd[i], w->name[i], AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_SIZE | STATX_MTIME,
			    &w->stx[i]);
}

static void prep_unlink(struct io_uring_sqe *sqe, unsigned i, void *ctx)
{
	struct walk *w = ctx;
	io_uring_prep_unlinkat(sqe, w->dfd[w->pick[i]], w->name[w->pick[i]], 0);
}

/* @n requests (statx of candidates 0..n, or unlinks of the picks), on the ring or one by one. */
static void round_of(struct walk *w, unsigned n, int unlink)
{
	for (unsigned i = 0; i < n; i++)
		w->res[i] = -ECANCELED;
	if (w->ring)
		(void)l3_ring_round(w->ring, n, unlink ? prep_unlink : prep_statx, w, w->res);
	/* what the ring did not take (none, or no ring): one by one; what it took stays as it ended */
	for (unsigned i = 0; i < n; i++) {
		if (w->res[i] != -ECANCELED)
			continue;
		unsigned k = unlink ? w->pick[i] : i;
		int rc = unlink ? unlinkat(w->dfd[k], w->name[k], 0)
				: statx(w->dfd[k], w->name[k], AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_SIZE | STATX_MTIME,
					&w->stx[k]);
		w->res[i] = rc < 0 ? -errno : 0;
	}
}

/* Candidate @i's directory and name; -1 when its directory is not there. */
static int locate(struct walk *w, unsigned i)
{
	char rel[48];
	l3_obj_relpath(w->c[i].lo, w->c[i].hi, rel);
	unsigned x = (unsigned)strtoul((char[3]){ rel[0], rel[1], 0 }, NULL, 16) & 255u;
	if (w->sub[x] < 0)
		w->sub[x] = openat(w->l3->objfd, (char[3]){ rel[0], rel[1], 0 }, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	snprintf(w->name[i], sizeof(w->name[i]), "%s", rel + 3);
	return w->dfd[i] = w->sub[x] >= 0 ? w->sub[x] : -1;
}

/* Is candidate @i as the listing saw it (not used, replaced or removed since)? */
static int unchanged(const struct walk *w, unsigned i)
{
	const struct statx *x = &w->stx[i];
	return w->dfd[i] >= 0 && w->res[i] == 0 && S_ISREG(x->stx_mode) && x->stx_size == w->c[i].bytes &&
	       (int64_t)x->stx_mtime.tv_sec * 1000000000ll + x->stx_mtime.tv_nsec == w->c[i].mtime;
}

/* Candidates 0..n judged: the unchanged ones evicted in order while the store is over @goal.
 * How many were walked (the rest stay for the next eviction), or a negative errno of the ops. */
static int batch(struct walk *w, unsigned n, uint64_t goal, int *evicted)
{
	struct sc_l3 *l3 = w->l3;
	unsigned walked = n;
	int rc = 0;
	round_of(w, n, 0);
	uint64_t pending = 0; /* bytes of the picks, not yet removed */
	w->npick = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!unchanged(w, i))
			continue; /* used or put again since (no longer among the oldest), or gone */
		if (atomic_load_explicit(&l3->st->bytes, RELAXED) <= goal + pending) {
			walked = i; /* enough: this one and what follows stay in the order */
			break;
		}
		shm_sched_point("l3.victims.checked"); /* judged unused: a use from now on is not seen */
		if (w->ops && w->ops->act && (rc = w->ops->act(w->ops->ctx, &w->c[i]))) {
			walked = i;
			break;
		}
		w->pick[w->npick++] = i;
		pending += w->c[i].bytes;
	}
	uint64_t t0 = shm_realtime_ns();
	if (w->npick)
		round_of(w, w->npick, 1);
	for (unsigned p = 0; p < w->npick; p++) {
		const struct l3_cand *c = &w->c[w->pick[p]];
		if (w->res[p] < 0)
			continue;
		l3_count_sub(&l3->st->bytes, c->bytes);
		l3_count_sub(&l3->st->objects, 1);
		l3_count_sub(&l3->st->logical, c->bytes);
		struct sc_digest d = { c->lo, c->hi };
		l3_tell_objects_gone(l3, &d, 1);
		if (w->ops && w->ops->evicted)
			w->ops->evicted(w->ops->ctx, c, t0);
		(*evicted)++;
	}
	if (*evicted)
		l3_kept_forget(l3);
	return rc ? rc : (int)walked;
}


int l3_victims_evict(struct sc_l3 *l3, uint64_t goal, const struct l3_victims_ops *ops, int *reached)
{
	*reached = atomic_load_explicit(&l3->st->bytes, RELAXED) <= goal;
	if (*reached)
		return 0;
	struct vhdr h;
	int fd = victims_open(l3, &h);
	if (fd < 0)
		return fd;
	struct walk *w = malloc(sizeof(*w));
	if (!w) {
		close(fd);
		return -ENOMEM;
	}
	w->l3 = l3;
	w->ring = l3_ring_get(l3);
	w->ops = ops;
	for (int i = 0; i < 256; i++)
		w->sub[i] = -1;
	int rc = 0, evicted = 0, stop = 0;
	uint64_t pos = h.pos, start = h.pos;
	while (!stop && !*reached && pos < h.count) {
		unsigned k = h.count - pos < ROUND ? (unsigned)(h.count - pos) : ROUND, n = 0;
		if (pread(fd, w->c, k * sizeof(*w->c), (off_t)(sizeof(h) + pos * sizeof(*w->c))) != (ssize_t)(k * sizeof(*w->c)))
			break;
		/* a damaged or segmented candidate ends the walk: a listing judges it */
		while (n < k && w->c[n].check == XXH3_64bits(&w->c[n], offsetof(struct l3_cand, check)) &&
		       !(w->c[n].flags & L3_CAND_SEGMENTED))
			locate(w, n++);
		stop = n < k;
		int r = n ? batch(w, n, goal, &evicted) : 0;
		if (r < 0) {
			rc = r; /* the janitor lost its lease: nothing more */
			break;
		}
		pos += (unsigned)r;
		*reached = atomic_load_explicit(&l3->st->bytes, RELAXED) <= goal;
	}
	if (pos != start)
		(void)!pwrite(fd, &pos, sizeof(pos), offsetof(struct vhdr, pos));
	close(fd);
	for (int i = 0; i < 256; i++)
		if (w->sub[i] >= 0)
			close(w->sub[i]);
	free(w);
	return rc ? rc : evicted;
}
