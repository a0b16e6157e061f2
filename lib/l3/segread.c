/*
 * lib/l3/segread.c — reading segmented objects (the design: lib/l3/segstore.c): the manifest, the
 * fill of its segments on the ring's segment ring (straight into the destination, each verified,
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
#include "../l2/seg.h"

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
	rc = r < 0 ? -errno : (size_t)r != mb || XXH3_64bits(*e, mb) != h->seg_check ? -EBADMSG : 0;
	uint64_t sum = 0;
	for (uint64_t i = 0; !rc && i < h->seg_count; i++) {
		if (!(*e)[i].len || (*e)[i].len > L3_SEG_MAXSZ)
			rc = -EBADMSG;
		sum += (*e)[i].len;
	}
	if (!rc && sum != h->payload_bytes)
		rc = -EBADMSG;
	if (rc) {
		free(*e);
		*e = NULL;
		return rc;
	}
	return (int)h->seg_count;
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


/* ---- fills ---- */

static int seg_ring(struct l3_ring *r)
{
	if (r->seg_ok)
		return 0;
	int rc = io_uring_queue_init(SEG_WINDOW * 2, &r->seg_ring, 0);
	if (rc < 0)
		return rc;
	(void)io_uring_ring_dontfork(&r->seg_ring); /* as the fill ring's (lib/l3/fill.c) */
	r->seg_ok = 1;
	return 0;
}


void l3_seg_ring_free(struct l3_ring *r)
{
	if (r->seg_ok)
		io_uring_queue_exit(&r->seg_ring);
	io_pins_forget(&r->seg_pins);
	r->seg_ok = 0;
}


/* What a window of segment reads needs besides the segments: the fill's destination bounds (an
 * O_DIRECT read is rounded up to the alignment and must fit), whether direct reads are allowed, and
 * the hashing done as segments land. */
struct seg_win {
	struct sc_l3 *l3;
	struct l3_ring *r;
	const uint8_t *dst_end;    /* end of the fill's destination */
	int direct;                /* O_DIRECT allowed for this fill (mode, filesystem, destination) */
	XXH3_state_t *hs;          /* the whole payload's digest */
	uint32_t hashed;           /* segments of the window verified and fed to hs, in order */
	int stuck;                 /* segment [hashed] failed its digest: left to the caller */
};

/* Verify and hash, in order, every leading segment of the window that is complete, stopping at the
 * first whose digest fails (the caller decides: an L2 copy is read again, an L3 segment is
 * quarantined). Each segment is hashed while the others are still being read. */
static void seg_hash_ready(struct seg_win *w, const struct l3_seg_ent *e, uint32_t n, uint8_t *dst,
			   const uint64_t *off, const uint8_t *done)
{
	while (!w->stuck && w->hashed < n && done[w->hashed]) {
		uint32_t i = w->hashed;
		XXH128_hash_t d = XXH3_128bits(dst + off[i], e[i].len);
		if (d.low64 != e[i].lo || d.high64 != e[i].hi) {
			w->stuck = 1;
			return;
		}
		XXH3_128bits_update(w->hs, dst + off[i], e[i].len);
		w->hashed++;
	}
}

/* May segment @s be read O_DIRECT into @at (aligned, its rounded length inside the destination,
 * and in auto mode not in the page cache)? Sets the flag on @fd when so. */
static int seg_direct(struct seg_win *w, int fd, const struct l3_seg_ent *s, const uint8_t *at)
{
	uint32_t ma = w->l3->dio_mem_align, oa = w->l3->dio_off_align;
	if (!w->direct || (uintptr_t)at % ma || (uint64_t)(w->dst_end - at) < (s->len + oa - 1) / oa * oa)
		return 0;
	if (w->l3->opts.o_direct != SC_L3_ODIRECT_ON && !l3_file_cold(fd, 0, s->len))
		return 0;
	return fcntl(fd, F_SETFL, O_DIRECT) == 0;
}

/* Queue the read of what segment @i still lacks (the remainder of a short read too). */
static int seg_prep(struct seg_win *w, int fd, int direct, uint8_t *at, uint64_t len, uint64_t got, uint32_t i)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->r->seg_ring);
	if (!sqe) {
		io_uring_submit(&w->r->seg_ring);
		if (!(sqe = io_uring_get_sqe(&w->r->seg_ring)))
			return -EAGAIN;
	}
	uint64_t want = len - got;
	if (direct)
		want = (want + w->l3->dio_off_align - 1) / w->l3->dio_off_align * w->l3->dio_off_align;
	io_uring_prep_read(sqe, fd, at + got, (unsigned)want, got);
	if (!direct && want >= (256u << 10))
		sqe->flags |= IOSQE_ASYNC; /* a buffered copy by io-wq, side by side */
	io_uring_sqe_set_data64(sqe, i);
	return 0;
}

/* An open of a segment that failed: vanished (ESTALE on a network filesystem), or not a file a
 * segment can be (a socket, ENXIO): a miss, as a missing segment is; a link on the way stays ELOOP. */
static int seg_open_error(int rc)
{
	return rc == -ESTALE || rc == -ENXIO || rc == -EBADMSG ? -ENOENT : rc == -EXDEV ? -ELOOP : rc;
}

#define SEG_OPEN_TAG (1ull << 62) /* user data of an open on the segment ring (| the segment) */

/* Open the segment files of [0, n) that @need marks into @fds (-1 where not needed or not opened),
 * side by side on the segment ring: the open of a segment whose inode is not cached reads the disk,
 * and one after another those reads added up. Where the ring refuses openat2 (an old kernel) the
 * segment is opened here. 0, or the first open's error (every file opened is in @fds either way). */
static int seg_open_window(struct seg_win *w, const struct l3_seg_ent *e, uint32_t n, const uint8_t *need, int *fds)
{
	/* never through a link in "XX/"; O_NONBLOCK: a FIFO planted under a segment's name is never
	 * waited on (the type is checked next, then the flag taken off) */
	static const struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, .resolve = L3_RESOLVE };
	struct io_uring *ring = &w->r->seg_ring;
	char rel[SEG_WINDOW][48];
	uint32_t queued = 0;
	int rc = 0;
	for (uint32_t i = 0; i < n; i++)
		fds[i] = -1;
	for (uint32_t i = 0; i < n && !rc; i++) {
		if (!need[i])
			continue;
		l3_seg_relpath(e[i].lo, e[i].hi, rel[i]);
		/* the ring is empty here and has 2 * SEG_WINDOW entries: a window's opens always fit */
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		if (!sqe) {
			rc = -EAGAIN;
			continue;
		}
		io_uring_prep_openat2(sqe, w->l3->sgfd, rel[i], (struct open_how *)&how);
		io_uring_sqe_set_data64(sqe, SEG_OPEN_TAG | i);
		queued++;
	}
	/* every open waited for: the paths are this frame's */
	while (queued) {
		struct io_uring_cqe *cqe;
		int wr = io_uring_submit_and_wait(ring, 1);
		if (wr < 0 && wr != -EINTR && wr != -EAGAIN && io_uring_wait_cqe(ring, &cqe) < 0)
			continue;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(ring, head, cqe) {
			uint32_t i = (uint32_t)(io_uring_cqe_get_data64(cqe) & 0xffff);
			int res = cqe->res;
			seen++;
			queued--;
			if (i >= n)
				continue;
			if (res == -EINVAL || res == -EOPNOTSUPP) /* no openat2 on this kernel's ring */
				res = l3_openat(w->l3->sgfd, rel[i], O_RDONLY | O_NONBLOCK, 0);
			if (res >= 0)
				fds[i] = res;
			else if (!rc)
				rc = seg_open_error(res);
		}
		io_uring_cq_advance(ring, seen);
	}
	return rc;
}

/* Read segments [0, n) of @e into @dst: each opened (side by side), checked to be a regular file of
 * its size, read on the segment ring (O_DIRECT where seg_direct allows; short reads resubmitted) —
 * or, when @src's L2 holds it, copied from there (bit i of *@from_l2 set) — and hashed in order as
 * they complete (w->hashed). 0, -ENOENT (missing or short: a miss), another -errno. */
static int seg_read_window(struct seg_win *w, const struct l3_seg_ent *e, uint32_t n, uint8_t *dst,
			   struct sc_arena *src, uint64_t *from_l2)
{
	struct sc_l3 *l3 = w->l3;
	struct l3_ring *r = w->r;
	int fds[SEG_WINDOW], rc = 0;
	uint64_t got[SEG_WINDOW] = { 0 }, off[SEG_WINDOW];
	uint8_t done[SEG_WINDOW] = { 0 }, direct[SEG_WINDOW] = { 0 }, need[SEG_WINDOW] = { 0 };
	uint32_t pending = 0;
	for (uint32_t i = 0; i < n; i++)
		off[i] = i ? off[i - 1] + e[i - 1].len : 0;
	*from_l2 = 0;
	w->hashed = 0;
	w->stuck = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (src && l2_seg_copy_held(src, e[i].lo, e[i].hi, e[i].len, dst + off[i]) == 1) {
			*from_l2 |= 1ull << i;
			done[i] = 1;
		} else {
			need[i] = 1;
		}
	}
	rc = seg_open_window(w, e, n, need, fds);
	for (uint32_t i = 0; i < n && !rc; i++) {
		struct stat sb;
		if (fds[i] < 0)
			continue;
		if (fstat(fds[i], &sb) < 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != e[i].len)
			rc = -ENOENT; /* not a file, short (or long): not this segment's file; a miss */
		else if (!(direct[i] = (uint8_t)seg_direct(w, fds[i], &e[i], dst + off[i])) && fcntl(fds[i], F_SETFL, 0) < 0)
			rc = -errno;
	}
	for (uint32_t i = 0; i < n && !rc; i++) {
		if (fds[i] < 0)
			continue; /* copied from L2 */
		if ((rc = seg_prep(w, fds[i], direct[i], dst + off[i], e[i].len, 0, i)) == 0)
			pending++;
	}
	/* never return while a read into the caller's memory is in flight */
	while (pending) {
		struct io_uring_cqe *cqe;
		int wr = io_uring_submit_and_wait(&r->seg_ring, 1);
		if (wr < 0 && wr != -EINTR && wr != -EAGAIN) {
			rc = rc ? rc : wr;
			if (io_uring_wait_cqe(&r->seg_ring, &cqe) < 0)
				continue;
		}
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&r->seg_ring, head, cqe) {
			uint32_t i = (uint32_t)io_uring_cqe_get_data64(cqe);
			int res = cqe->res;
			seen++;
			pending--;
			if (i >= n)
				continue;
			if (res == -EINVAL && direct[i] && !rc) {
				/* the kernel refused this O_DIRECT read after all: buffered */
				direct[i] = 0;
				if (fcntl(fds[i], F_SETFL, 0) < 0 ||
				    (rc = seg_prep(w, fds[i], 0, dst + off[i], e[i].len, got[i], i)) == 0)
					pending++;
			} else if (res < 0) {
				rc = rc ? rc : res == -ESTALE ? -ENOENT : res;
			} else if (res == 0) {
				rc = rc ? rc : -ENOENT; /* shorter than its stat said: cut under us */
			} else {
				L3_MARK_DEFINED(dst + off[i] + got[i], (uint64_t)res);
				got[i] += (uint64_t)res;
				if (got[i] >= e[i].len) {
					done[i] = 1;
				} else if (!rc) {
					if (direct[i] && got[i] % l3->dio_off_align && fcntl(fds[i], F_SETFL, 0) == 0)
						direct[i] = 0; /* an unaligned short read: the rest buffered */
					if ((rc = seg_prep(w, fds[i], direct[i], dst + off[i], e[i].len, got[i], i)) == 0)
						pending++;
				}
			}
		}
		io_uring_cq_advance(&r->seg_ring, seen);
		if (!rc)
			seg_hash_ready(w, e, n, dst, off, done);
	}
	if (!rc)
		seg_hash_ready(w, e, n, dst, off, done); /* copies from L2 with nothing read after them */
	for (uint32_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return rc;
}


int l3_seg_fill(struct sc_l3 *l3, struct l3_ring *r, int fd, uint64_t file_bytes, struct sc_l3_fill_req *req)
{
	const struct sc_location *loc = req->loc;
	struct l3_obj_hdr h;
	struct l3_seg_ent *e = NULL;
	int n = fcntl(fd, F_SETFL, 0) < 0 ? -errno : l3_seg_manifest(fd, file_bytes, &h, &e), rc = 0; /* no O_DIRECT */
	if (n == 0 || n == -EPROTO)
		n = -EBADMSG;
	if (n > 0 && (h.digest_lo != loc->digest.lo || h.digest_hi != loc->digest.hi))
		n = -EBADMSG; /* the file named by the digest holds another */
	if (n == -EBADMSG) {
		ADD(verify_failures, 1);
		l3_quarantine(l3, loc->digest.lo, loc->digest.hi, EBADMSG);
	}
	if (n < 0)
		return n;
	if (h.payload_bytes != loc->payload_bytes || h.section_bytes[0] != loc->sec_len[0] || h.kind != loc->kind)
		rc = -EINVAL; /* the caller's location describes it differently */
	if (!rc && l3->sgfd < 0)
		rc = -ENOENT; /* no segment directory at all: nothing to read */
	if (!rc)
		rc = seg_ring(r);
	/* the segment reads land in the arena too: its lock stays with this ring until they end */
	int pin = rc ? -1 : io_pin_get(&r->seg_ring, &r->seg_pins, req->dst);
	if (pin < -1)
		rc = pin;
	XXH3_state_t hs;
	XXH3_128bits_reset(&hs);
	uint8_t *dst = req->dst;
	uint32_t oa = l3->dio_off_align;
	struct seg_win w = { .l3 = l3, .r = r, .dst_end = dst + req->dst_bytes, .hs = &hs,
			     .direct = l3->opts.o_direct != SC_L3_ODIRECT_OFF && !(req->flags & SC_L3_FILL_BUFFERED) &&
				       l3->dio_mem_align && oa && oa <= L3_HDR_BLOCK };
	/* segments the destination arena's L2 already holds are copied from it, not read */
	struct sc_arena *src = r->seg_src ? r->seg_src : l3->arena;
	uint64_t copied = 0;
	for (uint32_t base = 0; !rc && base < (uint32_t)n; base += SEG_WINDOW) {
		uint32_t wn = (uint32_t)n - base < SEG_WINDOW ? (uint32_t)n - base : SEG_WINDOW;
		uint64_t from_l2, none;
		if ((rc = seg_read_window(&w, e + base, wn, dst, src, &from_l2)))
			break;
		uint8_t *at = dst;
		for (uint32_t i = 0; i < w.hashed; i++)
			at += e[base + i].len; /* verified and hashed as they landed */
		for (uint32_t i = w.hashed; i < wn && !rc; i++) {
			const struct l3_seg_ent *s = &e[base + i];
			XXH128_hash_t d = XXH3_128bits(at, s->len);
			if ((from_l2 >> i & 1) && (d.low64 != s->lo || d.high64 != s->hi)) {
				/* L2's copy did not hold what its name says (damaged shared memory): the
				 * L3 segment is not to blame; read it */
				from_l2 &= ~(1ull << i);
				XXH3_state_t scratch; /* the re-read is hashed below, not by the window */
				struct seg_win one = w;
				one.hs = &scratch;
				XXH3_128bits_reset(&scratch);
				if ((rc = seg_read_window(&one, s, 1, at, NULL, &none)))
					break;
				d = XXH3_128bits(at, s->len);
			}
			if (d.low64 != s->lo || d.high64 != s->hi) {
				seg_quarantine(l3, s->lo, s->hi);
				rc = -EBADMSG;
			}
			XXH3_128bits_update(&hs, at, s->len);
			at += s->len;
		}
		for (uint32_t i = 0; i < wn; i++)
			if (from_l2 >> i & 1)
				copied += e[base + i].len;
		dst = at;
	}
	io_pin_put(&r->seg_pins, pin);
	if (!rc && copied)
		ADD(seg_from_l2, copied);
	if (!rc) {
		XXH128_hash_t d = XXH3_128bits_digest(&hs);
		if (d.low64 != loc->digest.lo || d.high64 != loc->digest.hi) {
			/* every segment good, the whole not: the manifest lies */
			ADD(verify_failures, 1);
			l3_quarantine(l3, loc->digest.lo, loc->digest.hi, EBADMSG);
			rc = -EBADMSG;
		}
	}
	free(e);
	return rc;
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
		if (sfd >= 0)
			close(sfd);
		if (!whole) {
			(*missing)++; /* every missing one counted; the whole digest is then not checked */
			continue;
		}
		XXH128_hash_t d = XXH3_128bits(buf, e[i].len);
		if (d.low64 != e[i].lo || d.high64 != e[i].hi) {
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
