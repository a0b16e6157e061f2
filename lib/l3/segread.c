/*
 * lib/l3/segread.c — reading segmented objects (the design: lib/l3/segstore.c): the manifest, the
 * fill of its segments as steps on the fill ring (straight into the destination, each verified,
 * copied from the arena's L2 where it holds them), full verification, and the quarantine of a
 * segment that failed with every object that names it.
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
#include "format.h"
#include "quarantine.h"
#include "segread.h"
#include "ring.h"
#include "../l2/seg.h"
#include "../../shm/fault.h"

#define SEG_WINDOW 32u /* segment files open and read at once by a fill */


/* Move a damaged segment file out of the way (quarantine/<hex>.<ns>.seg): a put writes it anew. */
int l3_seg_move_away(struct sc_l3 *l3, uint64_t lo, uint64_t hi)
{
	char rel[48], hex[33], qname[80];
	struct stat sb;
	l3_seg_relpath(lo, hi, rel);
	l3_digest_hex(lo, hi, hex);
	snprintf(qname, sizeof(qname), "%s.%llu.seg", hex, (unsigned long long)shm_realtime_ns());
	int have = l3_statat(l3->sgfd, rel, &sb) == 0;
	int rc = l3_renameat(l3->sgfd, rel, l3->quarfd, qname, 0);
	if (rc < 0)
		return rc; /* someone else moved it first */
	if (have && S_ISREG(sb.st_mode)) {
		l3_count_sub(&l3->st->segments, 1);
		l3_count_sub(&l3->st->seg_bytes, (uint64_t)sb.st_size);
		l3_count_sub(&l3->st->bytes, (uint64_t)sb.st_size);
	}
	return 0;
}


/* ---- manifests ---- */

int l3_seg_is_manifest(const uint8_t *block)
{
	struct l3_obj_hdr h;
	memcpy(&h, block, sizeof(h));
	return h.magic == L3_OBJ_MAGIC && h.version == L3_FORMAT_SEGMENTED;
}


/* Check the @h->seg_count entries at @e against the header (their checksum, lengths within a
 * segment's bounds summing to the payload): count, or -EBADMSG. */
static int manifest_check(const struct l3_obj_hdr *h, const struct l3_seg_ent *e)
{
	if (XXH3_64bits(e, (size_t)h->seg_count * sizeof(*e)) != h->seg_check)
		return -EBADMSG;
	uint64_t sum = 0;
	for (uint64_t i = 0; i < h->seg_count; i++) {
		if (!e[i].len || e[i].len > L3_SEG_MAXSZ)
			return -EBADMSG;
		sum += e[i].len;
	}
	return sum == h->payload_bytes ? (int)h->seg_count : -EBADMSG;
}

/* The end of a manifest read into *@e (malloc'd): @rc of the read, then the check; on failure *@e
 * is freed (NULL). Count or -errno. */
static int manifest_done(const struct l3_obj_hdr *h, struct l3_seg_ent **e, int rc)
{
	if (!rc)
		rc = manifest_check(h, *e);
	if (rc < 0) {
		free(*e);
		*e = NULL;
	}
	return rc;
}

int l3_seg_manifest_mem(const uint8_t *block, uint64_t file_bytes, const void *ents, uint64_t got,
			struct l3_obj_hdr *h, struct l3_seg_ent **e)
{
	*e = NULL;
	int rc = l3_hdr_parse(block, file_bytes, h);
	if (rc)
		return rc;
	if (h->version != L3_FORMAT_SEGMENTED)
		return 0;
	size_t mb = (size_t)h->seg_count * sizeof(**e); /* seg_count <= L3_SEG_MAX_COUNT (l3_hdr_parse) */
	if (got < mb)
		return -EAGAIN; /* not all read */
	if (!(*e = malloc(mb)))
		return -ENOMEM;
	memcpy(*e, ents, mb);
	return manifest_done(h, e, 0);
}

int l3_seg_manifest(int fd, uint64_t file_bytes, struct l3_obj_hdr *h, struct l3_seg_ent **e)
{
	uint8_t *block = aligned_alloc(L3_DIO_ALIGN, L3_HDR_BLOCK);
	*e = NULL;
	if (!block)
		return -ENOMEM;
	ssize_t r = pread(fd, block, L3_HDR_BLOCK, 0);
	int rc = r < 0 ? -errno : r != L3_HDR_BLOCK ? -EBADMSG : l3_hdr_parse(block, file_bytes, h);
	free(block);
	if (rc)
		return rc;
	if (h->version != L3_FORMAT_SEGMENTED)
		return 0;
	size_t mb = (size_t)h->seg_count * sizeof(**e);
	if (!(*e = malloc(mb)))
		return -ENOMEM;
	r = pread(fd, *e, mb, L3_HDR_BLOCK);
	return manifest_done(h, e, r < 0 ? -errno : (size_t)r != mb ? -EBADMSG : 0);
}


struct seg_users {
	uint64_t lo, hi;
	uint64_t *objs; /* digests (lo, hi pairs) of the objects naming the segment */
	size_t n, cap;
};

static int find_users(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct seg_users *u = ctx;
	uint64_t lo, hi;
	struct stat sb;
	(void)l3, (void)sub;
	if (l3_name_digest(name, ".sc3", &lo, &hi) || fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < L3_HDR_BLOCK ||
	    ((uint64_t)sb.st_size - L3_HDR_BLOCK) % sizeof(struct l3_seg_ent))
		return 0;
	int fd = l3_open_file(dfd, name, O_RDONLY);
	if (fd < 0)
		return 0;
	struct l3_obj_hdr h;
	struct l3_seg_ent *e;
	int n = l3_seg_manifest(fd, (uint64_t)sb.st_size, &h, &e);
	close(fd);
	int uses = 0;
	for (int i = 0; i < n && !uses; i++)
		uses = e[i].lo == u->lo && e[i].hi == u->hi;
	free(e);
	if (!uses)
		return 0;
	if (l3_grow((void **)&u->objs, &u->cap, 2 * (u->n + 1), sizeof(uint64_t)))
		return -ENOMEM;
	u->objs[2 * u->n] = lo, u->objs[2 * u->n + 1] = hi;
	u->n++;
	return 0;
}


/* A segment failed its digest: it goes to quarantine, and so does every object naming it (their L2
 * mirrors and index entries with them, as l3_quarantine does for any object). */
static void seg_quarantine(struct sc_l3 *l3, uint64_t lo, uint64_t hi)
{
	struct seg_users u = { .lo = lo, .hi = hi };
	ADD(verify_failures, 1);
	(void)l3_seg_move_away(l3, lo, hi);
	(void)l3_scan(l3, l3->objfd, find_users, &u);
	for (size_t i = 0; i < u.n; i++)
		(void)l3_quarantine(l3, u.objs[2 * i], u.objs[2 * i + 1], EBADMSG);
	free(u.objs);
}


/* ---- fills ----
 *
 * A segmented fill is a state machine on the fill ring (lib/l3/fill.c runs it, as it runs a whole
 * object's reads): once the object's header block shows a manifest, l3_segfill_step reads the
 * manifest and queues the opens of a window of segment files side by side; as the opens end, the
 * segments' reads go to the ring straight into the destination (O_DIRECT where seg_direct allows,
 * short reads resubmitted); each segment is verified and fed to the whole payload's digest in order
 * as it lands; at the window's end its files are closed and the next window queued. Nothing waits:
 * the reaping thread goes on with other fills meanwhile. Segments the destination arena's L2 holds
 * are copied from there instead of read; an L2 copy whose digest fails (damaged shared memory) is
 * read from L3 after all, and only an L3 segment that fails is quarantined.
 */

enum { SEG_OPENING = 1, SEG_OPENED, SEG_READING, SEG_DONE };

struct l3_segfill {
	struct l3_seg_ent *e;      /* the manifest's entries */
	uint32_t n;                /* segments */
	uint32_t base, wn;         /* the window: segments [base, base + wn) */
	uint32_t hashed;           /* segments of the window verified and hashed, in order */
	uint32_t opens;            /* opens of the window on the ring, not yet ended */
	int direct;                /* O_DIRECT allowed for this fill (mode, filesystem, destination) */
	uint64_t at;               /* destination offset of segment base */
	uint64_t copied;           /* bytes copied from L2 */
	int fds[SEG_WINDOW];       /* -1: not open */
	uint64_t off[SEG_WINDOW];  /* offset of each segment from at */
	uint64_t got[SEG_WINDOW];  /* bytes read of each */
	uint8_t state[SEG_WINDOW]; /* 0 (copied from L2, or not started) or SEG_* */
	uint8_t direct_on[SEG_WINDOW];
	uint8_t from_l2[SEG_WINDOW];
	char rel[SEG_WINDOW][48];  /* an open's path (the kernel reads it when the open runs) */
};

static uint8_t *seg_at(const struct l3_fill_op *op, uint32_t i)
{
	return (uint8_t *)op->req->dst + op->seg->at + op->seg->off[i];
}

/* May window segment @i be read O_DIRECT into its place (aligned, its rounded length inside the
 * destination, and in auto mode not in the page cache)? Sets the flag on its file when so. Its
 * rounded read must not reach the next segment's place (that segment may have landed already):
 * only a segment of whole alignment units, or the object's last, ends where a rounded read may. */
static int seg_direct(struct sc_l3 *l3, const struct l3_fill_op *op, uint32_t i)
{
	const struct l3_segfill *s = op->seg;
	uint32_t ma = l3->dio_mem_align, oa = l3->dio_off_align;
	const uint8_t *at = seg_at(op, i), *end = (const uint8_t *)op->req->dst + op->req->dst_bytes;
	uint64_t len = s->e[s->base + i].len;
	if (!s->direct || (uintptr_t)at % ma || (uint64_t)(end - at) < (len + oa - 1) / oa * oa ||
	    (len % oa && s->base + i + 1 < s->n))
		return 0;
	if (l3->opts.o_direct != SC_L3_ODIRECT_ON && !l3_file_cold(s->fds[i], 0, len))
		return 0;
	return fcntl(s->fds[i], F_SETFL, O_DIRECT) == 0;
}

/* Queue the open of window segment @i: never through a link in "XX/"; O_NONBLOCK: a FIFO planted
 * under a segment's name is never waited on (the type is checked next, then the flag taken off). */
static int seg_queue_open(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op, uint32_t i)
{
	static const struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, .resolve = L3_RESOLVE };
	struct l3_segfill *s = op->seg;
	struct io_uring_sqe *sqe = l3_ring_sqe(r);
	if (!sqe)
		return -EAGAIN;
	l3_seg_relpath(s->e[s->base + i].lo, s->e[s->base + i].hi, s->rel[i]);
	io_uring_prep_openat2(sqe, l3->sgfd, s->rel[i], (struct open_how *)&how);
	io_uring_sqe_set_data64(sqe, l3_fill_ud(r, op, L3_IO_SEG, L3_SEG_TAG | L3_SEG_OPEN | i));
	op->pending++;
	s->opens++;
	s->state[i] = SEG_OPENING;
	return 0;
}

/* Queue the read of what window segment @i still lacks. */
static int seg_queue_read(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op, uint32_t i)
{
	struct l3_segfill *s = op->seg;
	struct io_uring_sqe *sqe = l3_ring_sqe(r);
	if (!sqe)
		return -EAGAIN;
	uint8_t *at = seg_at(op, i) + s->got[i];
	uint64_t want = s->e[s->base + i].len - s->got[i];
	if (s->direct_on[i])
		want = (want + l3->dio_off_align - 1) / l3->dio_off_align * l3->dio_off_align;
	int fi = r->reg_ok ? l3_ring_fixed_index(r, at, want) : -1;
	if (fi >= 0)
		io_uring_prep_read_fixed(sqe, s->fds[i], at, (unsigned)want, s->got[i], fi);
	else
		io_uring_prep_read(sqe, s->fds[i], at, (unsigned)want, s->got[i]);
	if (!s->direct_on[i] && want >= (256u << 10))
		sqe->flags |= IOSQE_ASYNC; /* a buffered copy by io-wq, side by side */
	io_uring_sqe_set_data64(sqe, l3_fill_ud(r, op, L3_IO_SEG, L3_SEG_TAG | i));
	op->pending++;
	s->state[i] = SEG_READING;
	return 0;
}

/* The window's opens all ended: check each file opened (a regular file of the segment's size:
 * else a miss), decide direct or buffered, and queue its read. */
static void seg_start_reads(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	struct l3_segfill *s = op->seg;
	for (uint32_t i = 0; i < s->wn && !op->err; i++) {
		struct stat sb;
		if (s->state[i] != SEG_OPENED)
			continue;
		if (fstat(s->fds[i], &sb) < 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != s->e[s->base + i].len)
			op->err = -ENOENT; /* not a file, short (or long): not this segment's file; a miss */
		else if (!(s->direct_on[i] = (uint8_t)seg_direct(l3, op, i)) && fcntl(s->fds[i], F_SETFL, 0) < 0)
			op->err = -errno;
		else
			op->err = seg_queue_read(l3, r, op, i);
	}
}

/* An open of a segment that failed: vanished (ESTALE on a network filesystem), or not a file a
 * segment can be (a socket, ENXIO): a miss, as a missing segment is; a link on the way stays ELOOP. */
static int seg_open_error(int rc)
{
	return rc == -ESTALE || rc == -ENXIO || rc == -EBADMSG ? -ENOENT : rc == -EXDEV ? -ELOOP : rc;
}

#ifdef SC_TEST_HOOKS
_Atomic uint64_t l3_test_refuse_seg_direct;
_Atomic int l3_test_seg_open_res, l3_test_seg_read_res;

static int seg_open_for_test(int res)
{
	int e = atomic_exchange(&l3_test_seg_open_res, 0);
	if (!e)
		return res;
	if (res >= 0)
		close(res);
	return e;
}
#endif

void l3_segfill_cqe(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op, uint32_t tag, int res)
{
	struct l3_segfill *s = op->seg;
	uint32_t i = tag & (SEG_WINDOW - 1);
	if (!s || i >= s->wn)
		return;
	if (tag & L3_SEG_OPEN) {
		s->opens--;
#ifdef SC_TEST_HOOKS
		res = seg_open_for_test(res);
#endif
		if (res == -EINVAL || res == -EOPNOTSUPP) /* no openat2 on this kernel's ring */
			res = l3_openat(l3->sgfd, s->rel[i], O_RDONLY | O_NONBLOCK, 0);
		if (res >= 0) {
			s->fds[i] = res; /* closed at the window's end, whatever happens */
			s->state[i] = SEG_OPENED;
		} else if (!op->err) {
			op->err = seg_open_error(res);
		}
		if (!s->opens && !op->err && !op->abandoned)
			seg_start_reads(l3, r, op);
		return;
	}
	if (op->err)
		return;
#ifdef SC_TEST_HOOKS
	if (res >= 0 && s->direct_on[i] && l3_test_take_bit(&l3_test_refuse_seg_direct, s->base + i))
		res = -EINVAL;
	int e = res >= 0 ? atomic_exchange(&l3_test_seg_read_res, 0) : 0;
	res = e ? e : res;
#endif
	if (res == -EINVAL && s->direct_on[i] && !op->abandoned) {
		/* the kernel refused this O_DIRECT read after all: buffered */
		s->direct_on[i] = 0;
		op->err = fcntl(s->fds[i], F_SETFL, 0) < 0 ? -errno : seg_queue_read(l3, r, op, i);
	} else if (res < 0) {
		op->err = res == -ESTALE ? -ENOENT : res;
	} else if (res == 0) {
		op->err = -ENOENT; /* shorter than its stat said: cut under us */
	} else if (op->abandoned) {
		op->err = -ECANCELED; /* no further read into a destination its caller gave up */
	} else {
		uint64_t len = s->e[s->base + i].len;
		L3_MARK_DEFINED(seg_at(op, i) + s->got[i], (uint64_t)res);
		s->got[i] += (uint64_t)res;
		if (s->got[i] >= len) {
			s->state[i] = SEG_DONE;
		} else {
			if (s->direct_on[i] && s->got[i] % l3->dio_off_align && fcntl(s->fds[i], F_SETFL, 0) == 0)
				s->direct_on[i] = 0; /* an unaligned short read: the rest buffered */
			op->err = seg_queue_read(l3, r, op, i);
		}
	}
}

/* Queue the window at s->base: segments the L2 of the fill's arena holds copied from it, the
 * others' opens on the ring. 0, or the first error (what was queued still ends). */
static int seg_window(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	struct l3_segfill *s = op->seg;
	/* l3_fill_from names the restoring arena while it runs; else the handle's own */
	struct sc_arena *src = r->seg_src ? r->seg_src : l3->arena;
	uint64_t o = 0;
	s->wn = s->n - s->base < SEG_WINDOW ? s->n - s->base : SEG_WINDOW;
	s->hashed = 0;
	for (uint32_t i = 0; i < s->wn; i++) {
		s->off[i] = o;
		o += s->e[s->base + i].len;
		s->fds[i] = -1;
		s->got[i] = 0;
		s->state[i] = s->direct_on[i] = s->from_l2[i] = 0;
	}
	for (uint32_t i = 0; i < s->wn; i++) {
		const struct l3_seg_ent *e = &s->e[s->base + i];
		if (src && l2_seg_copy_held(src, e->lo, e->hi, e->len, seg_at(op, i)) == 1) {
			s->from_l2[i] = 1;
			s->state[i] = SEG_DONE;
			continue;
		}
		int rc = seg_queue_open(l3, r, op, i);
		if (rc)
			return rc;
	}
	return 0;
}

static void seg_close_window(struct l3_segfill *s)
{
	for (uint32_t i = 0; i < s->wn; i++) {
		if (s->fds[i] >= 0)
			close(s->fds[i]);
		s->fds[i] = -1;
	}
}

/* Verify and hash, in order, every leading segment of the window that is complete. A segment
 * that fails its digest: an L2 copy is read from L3 instead (its open queued); an L3 segment is
 * quarantined with every object naming it (-EBADMSG), unless its name no longer names the file
 * read (another file put there since would be lost): a miss then. */
static void seg_hash_ready(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	struct l3_segfill *s = op->seg;
	while (!op->err && s->hashed < s->wn && s->state[s->hashed] == SEG_DONE) {
		uint32_t i = s->hashed;
		const struct l3_seg_ent *e = &s->e[s->base + i];
		const uint8_t *p = seg_at(op, i);
		XXH128_hash_t d = XXH3_128bits(p, e->len);
		if (d.low64 != e->lo || d.high64 != e->hi) {
			if (s->from_l2[i]) {
				/* L2's copy did not hold what its name says: the L3 segment is not to blame */
				s->from_l2[i] = 0;
				op->err = seg_queue_open(l3, r, op, i);
				return;
			}
			if (!l3_still_named(l3->sgfd, s->rel[i], s->fds[i])) {
				op->err = -ENOENT;
				return;
			}
			seg_quarantine(l3, e->lo, e->hi);
			op->err = -EBADMSG;
			return;
		}
		XXH3_128bits_update(op->hs, p, e->len);
		s->hashed++;
	}
}

/* The header block says: a segmented object. Its manifest read and checked against the fill's
 * location, the state made and the first window queued. 0 or -errno (nothing queued then but
 * what a partly queued window has in flight). */
static int seg_begin(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	const struct sc_location *loc = op->req->loc;
	struct l3_obj_hdr h;
	struct l3_seg_ent *e = NULL;
	/* the entries came with the header block, in the destination's chunk 0 (lib/l3/fill.c); when
	 * not all did, they are read here (buffered: they land in ordinary memory) */
	int n = l3_seg_manifest_mem(op->hdrbuf, op->file_bytes, op->req->dst, op->nchunks ? op->cgot[0] : 0, &h, &e), rc = 0;
	if (n == -EAGAIN && fcntl(op->fd, F_SETFL, 0) < 0) {
		n = -errno;
	} else if (n == -EAGAIN) {
		op->fl = 0;
		shm_sched_point("l3seg.fill.manifest_again"); /* the header block seen; the whole manifest next */
		n = l3_seg_manifest(op->fd, op->file_bytes, &h, &e);
	}
	if (n == 0 || n == -EPROTO)
		n = -EBADMSG;
	if (n > 0 && (h.digest_lo != loc->digest.lo || h.digest_hi != loc->digest.hi))
		n = -EBADMSG; /* the file named by the digest holds another */
	if (n == -EBADMSG)
		n = l3_fill_bad(l3, op);
	if (n < 0) {
		free(e); /* a manifest read whole, of another object */
		return n;
	}
	if (h.payload_bytes != loc->payload_bytes || h.section_bytes[0] != loc->sec_len[0] || h.kind != loc->kind)
		rc = -EINVAL; /* the caller's location describes it differently */
	if (!rc && l3->sgfd < 0)
		rc = -ENOENT; /* no segment directory at all: nothing to read */
	struct l3_segfill *s = rc ? NULL : calloc(1, sizeof(*s));
	if (!rc && !s)
		rc = -ENOMEM;
	if (rc) {
		free(e);
		return rc;
	}
	uint32_t oa = l3->dio_off_align;
	s->e = e;
	s->n = (uint32_t)n;
	s->direct = l3->opts.o_direct != SC_L3_ODIRECT_OFF && !(op->req->flags & SC_L3_FILL_BUFFERED) &&
		    l3->dio_mem_align && oa && oa <= L3_HDR_BLOCK;
	op->seg = s;
	XXH3_128bits_reset(op->hs);
	return seg_window(l3, r, op);
}

int l3_segfill_step(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	if (!op->seg) {
		int rc = seg_begin(l3, r, op);
		if (rc && !op->err)
			op->err = rc;
		if (!op->seg)
			return 1;
	}
	struct l3_segfill *s = op->seg;
	for (;;) {
		if (!op->err && !op->abandoned)
			seg_hash_ready(l3, r, op);
		if (op->pending)
			return 0; /* reads in flight: the next step comes with their completions */
		if (op->err || op->abandoned || s->hashed < s->wn) {
			seg_close_window(s);
			if (!op->err && !op->abandoned)
				op->err = -EIO; /* a window stopped short without an error: cannot happen */
			return 1;
		}
		seg_close_window(s);
		for (uint32_t i = 0; i < s->wn; i++) {
			if (s->from_l2[i])
				s->copied += s->e[s->base + i].len;
			s->at += s->e[s->base + i].len;
		}
		s->base += s->wn;
		if (s->base == s->n)
			break;
		int rc = seg_window(l3, r, op);
		if (rc)
			op->err = rc;
	}
	const struct sc_location *loc = op->req->loc;
	XXH128_hash_t d = XXH3_128bits_digest(op->hs);
	if (d.low64 != loc->digest.lo || d.high64 != loc->digest.hi)
		op->err = l3_fill_bad(l3, op); /* every segment good, the whole not: the manifest lies */
	else if (s->copied)
		ADD(seg_from_l2, s->copied);
	return 1;
}

void l3_segfill_free(struct l3_fill_op *op)
{
	struct l3_segfill *s = op->seg;
	if (!s)
		return;
	seg_close_window(s);
	free(s->e);
	free(s);
	op->seg = NULL;
}


/* sc_l3_verify of a segmented object: every segment read and digested, and the whole. */
int l3_seg_verify(struct sc_l3 *l3, int fd, uint64_t file_bytes, uint32_t *missing)
{
	*missing = 0;
	struct l3_obj_hdr h;
	struct l3_seg_ent *e;
	int n = l3_seg_manifest(fd, file_bytes, &h, &e), rc = 0;
	if (n <= 0)
		return n == 0 || n == -EPROTO ? -EBADMSG : n;
	uint8_t *buf = malloc(L3_SEG_MAXSZ < h.seg_bytes ? L3_SEG_MAXSZ : h.seg_bytes > 0 ? h.seg_bytes : 1);
	uint64_t cap = h.seg_bytes;
	XXH3_state_t hs;
	XXH3_128bits_reset(&hs);
	for (int i = 0; !rc && i < n; i++) {
		if (e[i].len > cap) {
			free(buf);
			buf = malloc(e[i].len);
			cap = e[i].len;
		}
		if (!buf) {
			rc = -ENOMEM;
			break;
		}
		char rel[48];
		l3_seg_relpath(e[i].lo, e[i].hi, rel);
		int sfd = l3->sgfd >= 0 ? l3_open_file(l3->sgfd, rel, O_RDONLY) : -ENOENT;
		ssize_t r = sfd < 0 ? -1 : pread(sfd, buf, e[i].len, 0);
		struct stat sb;
		int whole = r == (ssize_t)e[i].len && fstat(sfd, &sb) == 0 && (uint64_t)sb.st_size == e[i].len;
		int bad = 0;
		if (whole) {
			XXH128_hash_t d = XXH3_128bits(buf, e[i].len);
			bad = d.low64 != e[i].lo || d.high64 != e[i].hi;
			if (bad && !l3_still_named(l3->sgfd, rel, sfd))
				whole = bad = 0; /* not (any longer) the file under its name: not judged, missing */
		}
		if (sfd >= 0)
			close(sfd);
		if (!whole) {
			(*missing)++; /* every missing one counted; the whole digest is then not checked */
			continue;
		}
		if (bad) {
			seg_quarantine(l3, e[i].lo, e[i].hi);
			rc = -EBADMSG;
		}
		XXH3_128bits_update(&hs, buf, e[i].len);
	}
	if (!rc && *missing)
		rc = -ENOENT;
	if (!rc) {
		XXH128_hash_t d = XXH3_128bits_digest(&hs);
		if (d.low64 != h.digest_lo || d.high64 != h.digest_hi)
			rc = -EBADMSG;
	}
	free(buf);
	free(e);
	return rc;
}
