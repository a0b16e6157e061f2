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
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "../xxh.h"
#include "../../shm/fault.h"

#include "types.h"
#include "files.h"
#include "format.h"
#include "ring.h"
#include "victims.h"
#include "write.h"

#define VICTIMS_MAGIC 0x0a4d49544349564cull /* "LVICTIM\n" */
#define VICTIMS_MAX (1u << 22)              /* entries at most (224 MiB of file would be 4 M) */
#define VICTIMS_CHUNK 1024u                 /* entries read at a time */

struct vhdr {
	uint64_t magic;
	uint32_t version, entry_size;
	uint64_t count;
	uint64_t listed_ns;                 /* CLOCK_REALTIME of the save */
	uint64_t check;                     /* XXH3-64 of the bytes before it */
	uint64_t pos;                       /* entries walked already (a hint; not in the check) */
};
_Static_assert(sizeof(struct vhdr) == 48 && sizeof(struct l3_cand) == 56, "victims file layout");

#ifdef SC_TEST_HOOKS
_Atomic unsigned long l3_test_evict_listings;
#endif


void l3_cand_set(struct l3_cand *c, uint64_t lo, uint64_t hi, uint64_t bytes, int64_t mtime, int64_t key,
		 int segmented)
{
	*c = (struct l3_cand){ lo, hi, bytes, mtime, key, segmented ? L3_CAND_SEGMENTED : 0, 0, 0 };
	c->check = XXH3_64bits(c, offsetof(struct l3_cand, check));
}


int l3_victims_save(struct sc_l3 *l3, const struct l3_cand *c, size_t n, uint64_t keep)
{
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

/* One candidate: 1 evicted, 0 passed over, -EAGAIN stop the walk (a listing judges it), or an
 * error of @ops->act. */
static int one(struct sc_l3 *l3, const struct l3_cand *c, const struct l3_victims_ops *ops)
{
	if (c->check != XXH3_64bits(c, offsetof(struct l3_cand, check)) || (c->flags & L3_CAND_SEGMENTED))
		return -EAGAIN;
	char rel[48];
	struct stat sb;
	l3_obj_relpath(c->lo, c->hi, rel);
	if (l3_statat(l3->objfd, rel, &sb) < 0)
		return errno == ENOENT ? 0 : -EAGAIN;
	if (!S_ISREG(sb.st_mode) || (int64_t)shm_ts_ns(sb.st_mtim) != c->mtime || (uint64_t)sb.st_size != c->bytes)
		return 0; /* used or put again since: no longer among the oldest */
	shm_sched_point("l3.victims.checked"); /* judged unused: a use from now on is not seen */
	int rc = ops && ops->act ? ops->act(ops->ctx, c) : 0;
	if (rc)
		return rc;
	uint64_t t0 = shm_realtime_ns();
	if (l3_unlinkat(l3->objfd, rel) < 0)
		return 0;
	l3_kept_forget(l3);
	l3_count_sub(&l3->st->bytes, c->bytes);
	l3_count_sub(&l3->st->objects, 1);
	l3_count_sub(&l3->st->logical, c->bytes);
	struct sc_digest d = { c->lo, c->hi };
	l3_tell_objects_gone(l3, &d, 1);
	if (ops && ops->evicted)
		ops->evicted(ops->ctx, c, t0);
	return 1;
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
	struct l3_cand *c = malloc(VICTIMS_CHUNK * sizeof(*c));
	int rc = c ? 0 : -ENOMEM, evicted = 0;
	uint64_t pos = h.pos, start = h.pos;
	while (!rc && !*reached && pos < h.count) {
		size_t k = h.count - pos < VICTIMS_CHUNK ? (size_t)(h.count - pos) : VICTIMS_CHUNK;
		if (pread(fd, c, k * sizeof(*c), (off_t)(sizeof(h) + pos * sizeof(*c))) != (ssize_t)(k * sizeof(*c)))
			break;
		for (size_t i = 0; i < k && !rc && !*reached; i++) {
			int r = one(l3, &c[i], ops);
			if (r < 0) {
				rc = r;
				break;
			}
			evicted += r;
			pos++;
			*reached = atomic_load_explicit(&l3->st->bytes, RELAXED) <= goal;
		}
	}
	if (pos != start)
		(void)!pwrite(fd, &pos, sizeof(pos), offsetof(struct vhdr, pos));
	close(fd);
	free(c);
	if (rc == -EAGAIN)
		rc = 0; /* the walk stopped where a listing must judge */
	return rc ? rc : evicted;
}
