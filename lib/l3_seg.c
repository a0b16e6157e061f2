/*
 * lib/l3_seg.c — segmented L3 objects: a payload above one segment is stored as content-addressed
 * segment files shared by every object that contains them, and the object file holds a manifest.
 *
 * The option. DIR/segments (struct l3_segcfg) records the segment size of new puts; every process
 * and host reads it at open (sc_l3_set_segment_bytes writes it; 0 or no file: whole objects, the
 * version 1 format). An object's manifest says how it was cut, so a store whose option changed
 * reads both kinds, and readers never need the option.
 *
 * Segments. DIR/seg/<2 hex>/<32 hex>.seg holds the bytes of one segment, named by their digest
 * (unseeded XXH3-128, as L2 segments and payload digests). A segment is written once: a temp file
 * named with the writer's identity (host, pid, nonce), fsync, rename with RENAME_NOREPLACE; two
 * writers of one segment on any hosts write the same bytes, the second finds it there. Segment
 * files are never modified; they leave only by the sweep below or by quarantine.
 *
 * A put (lib/l3_store.c put_object): (1) every segment is checked (size) and touched (mtime now),
 * written where missing; (2) the manifest is written (tmp + rename); (3) every segment is touched
 * again, and written again where it is missing. A fill reads the manifest, then the segments on the
 * ring's segment ring straight into the destination, verifies each segment's digest and the whole
 * payload's; a segment that fails is quarantined with every object naming it (their L2 mirrors and
 * index entries invalidated as for any quarantined object); a missing or short one is a miss.
 *
 * The sweep (reconciliation, eviction, the janitor; one at a time: DIR/lock, or the janitor lease
 * in shared mode, where only the janitor sweeps). At the start of a pass, time T0; the objects are
 * listed and the segments their manifests name are counted; a segment no listed manifest names is
 * removed only if (a) its mtime is older than T0 - G (G, the grace: at least L3_SEG_GRACE_NS and the
 * shared mode's visibility grace, which also covers clock skew between hosts), and (b) after it is
 * captured (renamed to .gc-<digest>.<writer>), its mtime read again is still older than T0 - G;
 * otherwise it is put back. Why a put that reuses or writes a segment S can never lose it: if the
 * pass listed the put's manifest, S is referenced. If not, the manifest became visible after the
 * pass began (after T0), and the put's step (3) touches S after that: if the touch comes before the
 * capture, S's mtime is after T0 and the re-read keeps S; if it comes after, the touch fails
 * (ENOENT) and the put writes S again. Step (1) keeps a pass from removing what a put is about to
 * name in the common case (touched within the grace), so step (3) rarely has to write anything.
 * The physical bytes of a store are its object files plus its segment files, each counted once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "xxh.h"

#include "l2/l2.h"
#include "l3_priv.h"
#include "../shm/fault.h"

#define RELAXED memory_order_relaxed
#define ADD(field, v) atomic_fetch_add_explicit(&l3->st->field, (uint64_t)(v), RELAXED)
#define SEGCFG_MAGIC 0x0a47464333435350ull /* "PSC3CFG\n" */
#define SEG_WINDOW 32u                     /* segment files open and read at once by a fill */
#define L3_SEG_GRACE_NS (2ull * 1000000000ull)

struct l3_segcfg {
	uint64_t magic;
	uint32_t version, size;
	uint64_t segment_bytes;
	uint64_t check; /* XXH3-64 of the bytes before it */
};
_Static_assert(sizeof(struct l3_segcfg) == 32, "l3 segment option layout");

static void sub_sat(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, RELAXED);
	while (!atomic_compare_exchange_weak_explicit(a, &cur, cur > v ? cur - v : 0, RELAXED, RELAXED))
		;
}

static void seg_relpath(uint64_t lo, uint64_t hi, char out[48])
{
	char hex[33];
	l3_digest_hex(lo, hi, hex);
	snprintf(out, 48, "%.2s/%s.seg", hex, hex);
}

static uint64_t grace(const struct sc_l3 *l3)
{
	return l3->grace_ns > L3_SEG_GRACE_NS ? l3->grace_ns : L3_SEG_GRACE_NS;
}

/* ---- the option ---- */

static int seg_dir(struct sc_l3 *l3, int create)
{
	if (l3->sgfd >= 0)
		return 0;
	if (create) {
		int rc = l3_mkdir_at(l3, l3->dirfd, "seg");
		if (rc)
			return rc;
	}
	int fd = openat(l3->dirfd, "seg", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT && !create ? 0 : -errno;
	l3->sgfd = fd;
	return 0;
}

int l3_seg_open(struct sc_l3 *l3)
{
	struct l3_segcfg c;
	int fd = l3_open_file(l3->dirfd, "segments", O_RDONLY);
	if (fd == -ENOENT)
		return seg_dir(l3, 0);
	if (fd < 0)
		return fd;
	ssize_t n = pread(fd, &c, sizeof(c), 0);
	int rc = n < 0 ? -errno : 0;
	close(fd);
	if (!rc && (n != sizeof(c) || c.magic != SEGCFG_MAGIC || c.version != 1 || c.size != sizeof(c) ||
		    XXH3_64bits(&c, offsetof(struct l3_segcfg, check)) != c.check ||
		    (c.segment_bytes && (c.segment_bytes < L3_SEG_MIN || c.segment_bytes > L3_SEG_MAXSZ ||
					 c.segment_bytes % L3_DIO_ALIGN))))
		rc = -EBADMSG; /* a damaged option file: refused rather than guessed */
	if (rc)
		return rc;
	l3->seg_size = c.segment_bytes;
	return seg_dir(l3, l3->seg_size != 0);
}

int sc_l3_set_segment_bytes(struct sc_l3 *l3, uint64_t segment_bytes)
{
	if (!l3 || (segment_bytes && (segment_bytes < L3_SEG_MIN || segment_bytes > L3_SEG_MAXSZ ||
				      segment_bytes % L3_DIO_ALIGN)))
		return -EINVAL;
	int rc = segment_bytes ? seg_dir(l3, 1) : 0;
	if (rc)
		return rc;
	struct l3_segcfg c = { SEGCFG_MAGIC, 1, sizeof(c), segment_bytes, 0 };
	c.check = XXH3_64bits(&c, offsetof(struct l3_segcfg, check));
	struct iovec iov = { &c, sizeof(c) };
	if ((rc = l3_write_file(l3, l3->dirfd, ".", "segments", &iov, 1, 0)))
		return rc;
	l3->seg_size = segment_bytes;
	return 0;
}

int sc_l3_segment_bytes(struct sc_l3 *l3, uint64_t *segment_bytes)
{
	if (!l3 || !segment_bytes)
		return -EINVAL;
	*segment_bytes = l3->seg_size;
	return 0;
}

/* ---- the put side ---- */

/* The wire bytes [off, off+len) as at most two pieces (they may straddle the sections). */
static int wire_iov(const struct sc_payload *pl, uint64_t off, uint64_t len, struct iovec iov[2])
{
	int n = 0;
	for (int s = 0; s < 2 && len; s++) {
		if (off >= pl->sec_len[s]) {
			off -= pl->sec_len[s];
			continue;
		}
		uint64_t take = pl->sec_len[s] - off < len ? pl->sec_len[s] - off : len;
		iov[n++] = (struct iovec){ (uint8_t *)pl->sec[s] + off, (size_t)take };
		len -= take;
		off = 0;
	}
	return n;
}

int l3_seg_plan(struct sc_l3 *l3, const struct sc_payload *pl, struct l3_seg_man *m)
{
	uint64_t payload = pl->sec_len[0] + pl->sec_len[1], sz = l3->seg_size;
	uint64_t n = (payload + sz - 1) / sz;
	if (n > L3_SEG_MAX_COUNT)
		return -E2BIG;
	if (!(m->e = malloc((size_t)n * sizeof(*m->e))))
		return -ENOMEM;
	m->n = (uint32_t)n;
	XXH3_state_t hs;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = i * sz, len = payload - off < sz ? payload - off : sz;
		struct iovec iov[2];
		int k = wire_iov(pl, off, len, iov);
		XXH3_128bits_reset(&hs);
		for (int j = 0; j < k; j++)
			XXH3_128bits_update(&hs, iov[j].iov_base, iov[j].iov_len);
		XXH128_hash_t d = XXH3_128bits_digest(&hs);
		m->e[i] = (struct l3_seg_ent){ d.low64, d.high64, len };
	}
	return 0;
}

void l3_seg_hdr(uint8_t *block, const struct l3_seg_man *m, uint64_t seg_bytes)
{
	struct l3_obj_hdr h;
	memcpy(&h, block, sizeof(h));
	h.version = L3_FORMAT_SEGMENTED;
	h.flags = L3_OBJ_SEGMENTED;
	h.seg_count = m->n;
	h.seg_bytes = seg_bytes;
	h.seg_check = XXH3_64bits(m->e, (size_t)m->n * sizeof(*m->e));
	memcpy(block, &h, sizeof(h));
	uint64_t c = l3_hdr_check(block);
	memcpy(block + offsetof(struct l3_obj_hdr, check), &c, sizeof(c));
}

/* Move a damaged segment file out of the way (quarantine/<hex>.<ns>.seg): a put writes it anew. */
static int seg_move_away(struct sc_l3 *l3, uint64_t lo, uint64_t hi)
{
	char rel[48], hex[33], qname[80];
	struct stat sb;
	seg_relpath(lo, hi, rel);
	l3_digest_hex(lo, hi, hex);
	snprintf(qname, sizeof(qname), "%s.%llu.seg", hex, (unsigned long long)shm_realtime_ns());
	int have = fstatat(l3->sgfd, rel, &sb, AT_SYMLINK_NOFOLLOW) == 0;
	if (renameat(l3->sgfd, rel, l3->quarfd, qname) < 0)
		return -errno; /* someone else moved it first */
	if (have && S_ISREG(sb.st_mode)) {
		sub_sat(&l3->st->segments, 1);
		sub_sat(&l3->st->seg_bytes, (uint64_t)sb.st_size);
		sub_sat(&l3->st->bytes, (uint64_t)sb.st_size);
	}
	return 0;
}

uint64_t l3_seg_need(struct sc_l3 *l3, const struct l3_seg_man *m)
{
	uint64_t need = L3_HDR_BLOCK + (uint64_t)m->n * sizeof(*m->e);
	for (uint32_t i = 0; i < m->n; i++) {
		char rel[48];
		struct stat sb;
		seg_relpath(m->e[i].lo, m->e[i].hi, rel);
		if (fstatat(l3->sgfd, rel, &sb, AT_SYMLINK_NOFOLLOW) < 0 || (uint64_t)sb.st_size != m->e[i].len)
			need += m->e[i].len;
	}
	return need;
}

int l3_seg_store(struct sc_l3 *l3, const struct sc_payload *pl, const struct l3_seg_man *m, uint64_t *wrote,
		 uint64_t *wrote_bytes)
{
	uint64_t off = 0;
	for (uint32_t i = 0; i < m->n; off += m->e[i].len, i++) {
		const struct l3_seg_ent *e = &m->e[i];
		char rel[48], hex[33], name[40];
		struct stat sb;
		seg_relpath(e->lo, e->hi, rel);
		if (fstatat(l3->sgfd, rel, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
			/* there and whole: touched (the sweep's rule); a touch that fails finds it gone */
			if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == e->len) {
				if (utimensat(l3->sgfd, rel, NULL, AT_SYMLINK_NOFOLLOW) == 0)
					continue;
				if (errno != ENOENT)
					return -errno;
			} else {
				(void)seg_move_away(l3, e->lo, e->hi); /* truncated or planted: replaced */
			}
		} else if (errno != ENOENT) {
			return -errno;
		}
		struct iovec iov[2];
		int k = wire_iov(pl, off, e->len, iov);
		l3_digest_hex(e->lo, e->hi, hex);
		snprintf(name, sizeof(name), "%s.seg", hex);
		char sub[3] = { hex[0], hex[1], 0 };
		int rc = l3_write_file(l3, l3->sgfd, sub, name, iov, k, 1);
		if (rc == -EEXIST)
			continue; /* another writer's, the same bytes (its mtime is fresh) */
		if (rc)
			return rc;
		(*wrote)++;
		*wrote_bytes += e->len;
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
	(void)seg_move_away(l3, lo, hi);
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
	(void)io_uring_ring_dontfork(&r->seg_ring); /* as the fill ring's (lib/l3_fill.c) */
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

/* Read segments [first, first+n) of @e (starting at payload offset @off) into @dst: each opened,
 * its size checked, read on the segment ring (short reads resubmitted) — or, when @src's L2 holds
 * it, copied from there (bit i of *@from_l2 set; the caller verifies it like the others). 0,
 * -ENOENT (missing or short: a miss), another -errno. */
static int seg_read_window(struct sc_l3 *l3, struct l3_ring *r, const struct l3_seg_ent *e, uint32_t n, uint8_t *dst,
			   struct sc_arena *src, uint64_t *from_l2)
{
	int fds[SEG_WINDOW], rc = 0;
	uint64_t got[SEG_WINDOW] = { 0 }, off[SEG_WINDOW];
	uint32_t opened = 0, pending = 0;
	for (uint32_t i = 0; i < n; i++)
		off[i] = i ? off[i - 1] + e[i - 1].len : 0;
	*from_l2 = 0;
	for (; opened < n && !rc; opened++) {
		char rel[48];
		struct stat sb;
		fds[opened] = -1;
		if (src && l2_seg_copy_held(src, e[opened].lo, e[opened].hi, e[opened].len, dst + off[opened]) == 1) {
			*from_l2 |= 1ull << opened;
			continue;
		}
		seg_relpath(e[opened].lo, e[opened].hi, rel);
		fds[opened] = l3_open_file(l3->sgfd, rel, O_RDONLY);
		if (fds[opened] < 0) {
			rc = fds[opened] == -ESTALE || fds[opened] == -EBADMSG ? -ENOENT : fds[opened];
			break;
		}
		if (fstat(fds[opened], &sb) < 0 || (uint64_t)sb.st_size != e[opened].len)
			rc = -ENOENT; /* short (or long): not this segment's file; a miss */
	}
	for (uint32_t i = 0; i < opened && !rc; i++) {
		if (fds[i] < 0)
			continue; /* copied from L2 */
		struct io_uring_sqe *sqe = io_uring_get_sqe(&r->seg_ring);
		if (!sqe) {
			io_uring_submit(&r->seg_ring);
			sqe = io_uring_get_sqe(&r->seg_ring);
		}
		io_uring_prep_read(sqe, fds[i], dst + off[i], (unsigned)e[i].len, 0);
		if (e[i].len >= (256u << 10))
			sqe->flags |= IOSQE_ASYNC; /* copied by io-wq, side by side */
		io_uring_sqe_set_data64(sqe, i);
		pending++;
	}
	/* never return while a read into the caller's memory is in flight */
	while (pending) {
		struct io_uring_cqe *cqe;
		int w = io_uring_submit_and_wait(&r->seg_ring, 1);
		if (w < 0 && w != -EINTR && w != -EAGAIN) {
			rc = rc ? rc : w;
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
			if (res < 0) {
				rc = rc ? rc : res == -ESTALE ? -ENOENT : res;
			} else if (res == 0) {
				rc = rc ? rc : -ENOENT; /* shorter than its stat said: cut under us */
			} else {
				L3_MARK_DEFINED(dst + off[i] + got[i], (uint64_t)res);
				got[i] += (uint64_t)res;
				if (got[i] < e[i].len && !rc) {
					struct io_uring_sqe *sqe = io_uring_get_sqe(&r->seg_ring);
					if (!sqe) {
						rc = -EAGAIN;
						continue;
					}
					io_uring_prep_read(sqe, fds[i], dst + off[i] + got[i], (unsigned)(e[i].len - got[i]),
							   got[i]);
					io_uring_sqe_set_data64(sqe, i);
					pending++;
				}
			}
		}
		io_uring_cq_advance(&r->seg_ring, seen);
	}
	for (uint32_t i = 0; i < opened && i < n; i++)
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
	/* segments the destination arena's L2 already holds are copied from it, not read */
	struct sc_arena *src = r->seg_src ? r->seg_src : l3->arena;
	uint64_t copied = 0;
	for (uint32_t base = 0; !rc && base < (uint32_t)n; base += SEG_WINDOW) {
		uint32_t w = (uint32_t)n - base < SEG_WINDOW ? (uint32_t)n - base : SEG_WINDOW;
		uint8_t *at = dst;
		uint64_t from_l2, none;
		if ((rc = seg_read_window(l3, r, e + base, w, dst, src, &from_l2)))
			break;
		for (uint32_t i = 0; i < w && !rc; i++) {
			const struct l3_seg_ent *s = &e[base + i];
			XXH128_hash_t d = XXH3_128bits(at, s->len);
			if ((from_l2 >> i & 1) && (d.low64 != s->lo || d.high64 != s->hi)) {
				/* L2's copy did not hold what its name says (damaged shared memory): the
				 * L3 segment is not to blame; read it */
				from_l2 &= ~(1ull << i);
				if ((rc = seg_read_window(l3, r, s, 1, at, NULL, &none)))
					break;
				d = XXH3_128bits(at, s->len);
			}
			if (d.low64 != s->lo || d.high64 != s->hi) {
				seg_quarantine(l3, s->lo, s->hi);
				rc = -EBADMSG;
			}
			if (from_l2 >> i & 1)
				copied += s->len;
			XXH3_128bits_update(&hs, at, s->len);
			at += s->len;
		}
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
		seg_relpath(e[i].lo, e[i].hi, rel);
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

/* ---- a pass: references, the sweep ---- */

static struct l3_segref *ref_find(struct l3_segs *s, uint64_t lo, uint64_t hi, int add)
{
	if (add && (s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct l3_segref *e = calloc(cap, sizeof(*e));
		if (!e)
			return NULL;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->e[i].used)
				continue;
			size_t k = (size_t)(s->e[i].lo * 0x9e3779b97f4a7c15ull >> 7) & (cap - 1);
			while (e[k].used)
				k = (k + 1) & (cap - 1);
			e[k] = s->e[i];
		}
		free(s->e);
		s->e = e, s->cap = cap;
	}
	if (!s->cap)
		return NULL;
	size_t k = (size_t)(lo * 0x9e3779b97f4a7c15ull >> 7) & (s->cap - 1);
	for (; s->e[k].used; k = (k + 1) & (s->cap - 1))
		if (s->e[k].lo == lo && s->e[k].hi == hi)
			return &s->e[k];
	if (!add)
		return NULL;
	s->e[k] = (struct l3_segref){ .lo = lo, .hi = hi, .used = 1 };
	s->n++;
	return &s->e[k];
}

/* Note a segment file @st in the table (listing, or one a new put made since). */
static struct l3_segref *ref_seen(struct l3_segs *s, uint64_t lo, uint64_t hi, const struct stat *sb)
{
	struct l3_segref *r = ref_find(s, lo, hi, 1);
	if (r && !r->bytes) {
		r->bytes = (uint64_t)sb->st_size ? (uint64_t)sb->st_size : 1;
		r->mtime = (int64_t)shm_ts_ns(sb->st_mtim);
		s->files++;
		s->bytes += r->bytes;
	}
	return r;
}

/* Put the captured @cap back as @rel unless @rel exists again (a put wrote it: the same bytes).
 * ceph-fuse has no RENAME_NOREPLACE: link is no-replace too. */
static void put_back(int dfd, const char *cap, const char *rel)
{
	if (renameat2(dfd, cap, dfd, rel, RENAME_NOREPLACE) == 0)
		return;
	if (errno == EINVAL && linkat(dfd, cap, dfd, rel, 0) == 0) {
		unlinkat(dfd, cap, 0); /* linked back: the captured name goes */
		return;
	}
	if (errno == EEXIST)
		unlinkat(dfd, cap, 0); /* a put wrote it again (the same bytes): ours is a spare */
	/* any other failure (I/O, space, a signal): kept as it is; the next pass puts it back */
}

static char *gc_name(struct sc_l3 *l3, const char *hex, char *out, size_t n)
{
	snprintf(out, n, "%.2s/.gc-%s.%s", hex, hex, l3->writer);
	return out;
}

static int list_seg(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct l3_segs *s = ctx;
	uint64_t lo, hi;
	struct stat sb;
	(void)sub;
	if (!strncmp(name, ".tmp-", 5)) {
		if (l3_left_over(l3, dfd, name) && unlinkat(dfd, name, 0) == 0)
			s->stale++;
		return 0;
	}
	if (!strncmp(name, ".gc-", 4)) {
		/* a sweeper died between capture and removal: put back (the next sweep judges it) */
		char hex[33], fin[40];
		if (strlen(name) < 4 + 32 || !l3_left_over(l3, dfd, name))
			return 0;
		memcpy(hex, name + 4, 32);
		hex[32] = 0;
		snprintf(fin, sizeof(fin), "%s.seg", hex);
		if (l3_hex_digest(hex, &lo, &hi) == 0)
			put_back(dfd, name, fin);
		return 0;
	}
	if (l3_name_digest(name, ".seg", &lo, &hi) || fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(sb.st_mode))
		return 0;
	return ref_seen(s, lo, hi, &sb) ? 0 : -ENOMEM;
}

int l3_segs_begin(struct sc_l3 *l3, struct l3_segs *s)
{
	memset(s, 0, sizeof(*s));
	s->t0 = shm_realtime_ns();
	return l3->sgfd >= 0 ? l3_scan(l3, l3->sgfd, list_seg, s) : 0;
}

static void logical_add(struct l3_segs *s, uint64_t v, int delta)
{
	if (delta > 0)
		s->logical += v;
	else
		s->logical = s->logical > v ? s->logical - v : 0;
}

int l3_segs_object(struct sc_l3 *l3, struct l3_segs *s, int dfd, const char *name, uint64_t file_bytes, int delta,
		   uint64_t *freed)
{
	/* a version 2 object's body is a whole number of entries; anything else is read as whole */
	if (l3->sgfd < 0 || file_bytes < L3_HDR_BLOCK || (file_bytes - L3_HDR_BLOCK) % sizeof(struct l3_seg_ent)) {
		logical_add(s, file_bytes, delta);
		return 0;
	}
	int fd = l3_open_file(dfd, name, O_RDONLY);
	if (fd < 0)
		return fd;
	struct l3_obj_hdr h;
	struct l3_seg_ent *e;
	int n = l3_seg_manifest(fd, file_bytes, &h, &e);
	close(fd);
	if (n <= 0) {
		if (n == 0)
			logical_add(s, file_bytes, delta);
		return n;
	}
	int missing = 0;
	for (int i = 0; i < n; i++) {
		struct l3_segref *r = ref_find(s, e[i].lo, e[i].hi, 0);
		if (r && r->bytes == e[i].len)
			continue;
		if (r && r->bytes) {
			missing = 1; /* listed with another size: cut or planted, never this segment */
			continue;
		}
		char rel[48];
		struct stat sb;
		seg_relpath(e[i].lo, e[i].hi, rel);
		/* not listed: made since the listing began (a put), or missing */
		if (fstatat(l3->sgfd, rel, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == e[i].len) {
			if (!ref_seen(s, e[i].lo, e[i].hi, &sb)) {
				free(e);
				return -ENOMEM;
			}
		} else {
			missing = 1;
		}
	}
	if (missing && delta > 0) {
		free(e);
		return -ENOENT;
	}
	for (int i = 0; i < n; i++) {
		struct l3_segref *r = ref_find(s, e[i].lo, e[i].hi, 0);
		if (!r)
			continue;
		if (delta > 0) {
			r->refs++;
		} else if (r->refs && !--r->refs && freed) {
			*freed += r->bytes;
		}
	}
	logical_add(s, L3_HDR_BLOCK + h.payload_bytes, delta);
	free(e);
	return 1;
}

int l3_segs_sweep(struct sc_l3 *l3, struct l3_segs *s, int (*act)(void *), void *ctx)
{
	if (l3->sgfd < 0)
		return 0;
	uint64_t g = grace(l3), old = s->t0 > g ? s->t0 - g : 0;
	for (size_t i = 0; i < s->cap; i++) {
		struct l3_segref *r = &s->e[i];
		if (!r->used || r->refs || !r->bytes || (uint64_t)r->mtime >= old)
			continue;
		int rc = act ? act(ctx) : 0;
		if (rc)
			return rc;
		char rel[48], hex[33], cap[160];
		struct stat sb;
		seg_relpath(r->lo, r->hi, rel);
		l3_digest_hex(r->lo, r->hi, hex);
		gc_name(l3, hex, cap, sizeof(cap));
		shm_sched_point("l3seg.sweep.chosen");
		if (renameat(l3->sgfd, rel, l3->sgfd, cap) < 0) {
			if (errno == ENOENT) /* gone already (quarantined) */
				s->files--, s->bytes -= r->bytes, r->bytes = 0;
			continue;
		}
		/* touched since the pass began (a put names it): put back */
		if (fstatat(l3->sgfd, cap, &sb, AT_SYMLINK_NOFOLLOW) == 0 && shm_ts_ns(sb.st_mtim) >= old) {
			put_back(l3->sgfd, cap, rel);
			continue;
		}
		if (unlinkat(l3->sgfd, cap, 0) < 0)
			continue;
		s->removed++;
		s->removed_bytes += r->bytes;
		s->files--;
		s->bytes -= r->bytes;
		r->bytes = 0;
	}
	return 0;
}

void l3_segs_end(struct l3_segs *s)
{
	free(s->e);
	s->e = NULL;
	s->cap = s->n = 0;
}

void l3_segs_publish(struct sc_l3 *l3, const struct l3_segs *s, uint64_t objects, uint64_t bytes)
{
	atomic_store_explicit(&l3->st->objects, objects, RELAXED);
	atomic_store_explicit(&l3->st->bytes, bytes, RELAXED);
	atomic_store_explicit(&l3->st->logical, s->logical, RELAXED);
	atomic_store_explicit(&l3->st->segments, s->files, RELAXED);
	atomic_store_explicit(&l3->st->seg_bytes, s->bytes, RELAXED);
}
