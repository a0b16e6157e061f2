/*
 * lib/l3/fill.c — fills: io_uring reads of L3 objects straight into caller (arena) memory, and
 * the synchronous writes of the put path, on one ring per thread.
 *
 * A fill is two reads submitted together: the 4 KiB header block into a ring-owned aligned
 * buffer, and the payload straight into the destination. O_DIRECT is used when the filesystem's
 * statx DIO alignment allows it for this destination and (in auto mode) cachestat() says the
 * file is mostly not in the page cache; a warm file is read buffered, which io_uring completes
 * inline at submit. On FUSE (ceph-fuse) O_DIRECT is given at open, whenever allowed: the daemon
 * sees only the open's flags. With other fills in flight on the ring, the open, the stat and the
 * close of the object go on the ring too (on a network filesystem each is a round trip). Short reads are resubmitted for the remainder. When both reads are complete
 * the reaping thread verifies the header (sane, consistent with the file size, checksum, same
 * digest and sizes as the location) and the payload digest; a failure quarantines the object and
 * the request completes with -EBADMSG. The destination is the caller's until the request is
 * reaped: nothing here frees or reuses it, and a request is reaped only after every read into it
 * completed.
 *
 *
 * The rings, their registrations and the kept files are lib/l3/ring.c's.
 *
 * Abandoned fills. A caller that stops waiting for a fill (a restore past its deadline) cannot
 * take its reads back: the kernel keeps writing into the destination until each read completes,
 * and may do so after the caller's process died (lib/io_pin.c). So abandoning only hands the
 * request to the ring (l3_fill_abandon): the fill goes on as any, its pin of the destination's
 * arena stays until its last read completed, and then, instead of queueing the request for a
 * reap, the ring calls the caller's function, which releases the destination (its reservation).
 * Nothing verifies or publishes it, and nothing here touches the destination any more (no hash,
 * no further read): the caller's mapping of it may be gone (its arena handle closed). Any later process() of the ring (a fill, a reap, a restore, the
 * drain of sc_l3_close) gets there; a process that dies first leaves the reservation tagged with
 * its token, which the kernel keeps alive (the ring's pin) until the reads are done: only then can
 * a reaper free it.
 *
 * Fill time model (sc_l3_fill_estimate). Each successful fill of this handle feeds two moving
 * averages: small fills (under 256 KiB) the fixed cost of a fill, larger ones the time per byte
 * of what was ahead of them on the ring plus their own payload (so a queue is priced as bytes to
 * read first). A prediction is fixed + (bytes in flight + bytes) x per byte.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "../xxh.h"

#include "types.h"
#include "files.h"
#include "fill.h"
#include "ring.h"
#include "format.h"
#include "hosts.h"
#include "quarantine.h"
#include "segread.h"
#include "../probes.h"
#include "../../shm/fault.h"

#define TAG_MASK 7ull
#define L3_ASYNC_MIN (256u << 10)
#define L3_EST_SMALL (256u << 10)   /* fills below this measure the fixed cost */
#define L3_EST_LARGE (1u << 20)     /* fills from this measure the cost per byte */
#define L3_EST_SHIFT 2              /* moving averages move 1/4 of the way per sample */

/* ---- fills ---- */

static void complete_req(struct l3_ring *r, struct sc_l3_fill_req *req, int result)
{
	req->result = result;
	req->_next = NULL;
	if (r->done_tail)
		r->done_tail->_next = req;
	else
		r->done_head = req;
	r->done_tail = req;
	r->done_count++;
}

/*
 * The payload is read in chunks: one read for a payload under two chunks, else pieces of
 * L3_CHUNK (buffered) or L3_DIRECT_CHUNK (O_DIRECT), at most L3_MAX_CHUNKS of them. Chunks are
 * hashed in order as soon as every earlier chunk is complete, so the digest of chunk k is computed
 * while later chunks are still being read (or copied by io-wq, on another CPU, for IOSQE_ASYNC
 * reads). A direct read is one device request per chunk, each with its completion interrupt: a
 * cold 4 MiB fill is two reads of 2 MiB, not four of 1 MiB (`bench l3`, fill_cold_4m_vs_liburing,
 * seven full runs alternated with four chunks: median 0.910 against 0.884, ranges 0.79-0.95 and
 * 0.84-0.93: within that VM's noise; tools/bench/README.md).
 */
static uint64_t chunk_len(const struct l3_fill_op *op, uint32_t c)
{
	uint64_t start = (uint64_t)c * op->chunk;
	return op->want - start < op->chunk ? op->want - start : op->chunk;
}

static int prep_chunk(struct l3_ring *r, struct l3_fill_op *op, uint32_t c)
{
	struct sc_l3_fill_req *req = op->req;
	struct io_uring_sqe *sqe = l3_ring_sqe(r);
	if (!sqe)
		return -EAGAIN;
	uint64_t off = (uint64_t)c * op->chunk + op->cgot[c];
	uint64_t len = chunk_len(op, c) - op->cgot[c];
	uint8_t *dst = (uint8_t *)req->dst + off;
	if (op->direct)
		len = (len + op->align - 1) / op->align * op->align; /* fits: dst_bytes was checked */
	op->direct_mask = op->direct ? op->direct_mask | 1ull << c : op->direct_mask & ~(1ull << c);
	if (len > (1u << 30))
		len = 1u << 30; /* a short read; the rest is resubmitted */
	int fi = r->reg_ok ? l3_ring_fixed_index(r, dst, len) : -1;
	if (fi >= 0)
		io_uring_prep_read_fixed(sqe, op->fd, dst, (unsigned)len, L3_HDR_BLOCK + off, fi);
	else
		io_uring_prep_read(sqe, op->fd, dst, (unsigned)len, L3_HDR_BLOCK + off);
	/* a large buffered read would be copied inline, in this thread, at submit; punted to io-wq
	 * it is copied on another CPU while this thread hashes earlier chunks */
	if (!op->direct && len >= L3_ASYNC_MIN)
		sqe->flags |= IOSQE_ASYNC;
	io_uring_sqe_set_data64(sqe, l3_fill_ud(r, op, L3_IO_PAYLOAD, c));
	op->pending++;
	return 0;
}

static int prep_header(struct l3_ring *r, struct l3_fill_op *op)
{
	struct io_uring_sqe *sqe = l3_ring_sqe(r);
	if (!sqe)
		return -EAGAIN;
	uint64_t len = L3_HDR_BLOCK - op->hdr_got;
	if (r->reg_ok && !op->hdr_got)
		io_uring_prep_read_fixed(sqe, op->fd, op->hdrbuf, (unsigned)len, 0, 0);
	else
		io_uring_prep_read(sqe, op->fd, op->hdrbuf + op->hdr_got, (unsigned)len, op->hdr_got);
	io_uring_sqe_set_data64(sqe, l3_fill_ud(r, op, L3_IO_HDR, 0));
	op->pending++;
	return 0;
}

/* The header block and chunk 0 in one vectored read at offset 0 (O_DIRECT fills): one device
 * request where there would be two, which is what bounds small fills on a disk that counts
 * requests. The vector lives in the op until the read completes. */
static int prep_first(struct l3_ring *r, struct l3_fill_op *op)
{
	struct io_uring_sqe *sqe = l3_ring_sqe(r);
	if (!sqe)
		return -EAGAIN;
	uint64_t len = (chunk_len(op, 0) + op->align - 1) / op->align * op->align; /* fits: dst_bytes was checked */
	op->iov[0] = (struct iovec){ op->hdrbuf, L3_HDR_BLOCK };
	op->iov[1] = (struct iovec){ op->req->dst, (size_t)len };
	io_uring_prep_readv(sqe, op->fd, op->iov, 2, 0);
	op->direct_mask |= 1; /* only direct fills read this way */
	io_uring_sqe_set_data64(sqe, l3_fill_ud(r, op, L3_IO_FIRST, 0));
	op->pending++;
	return 0;
}

static int fill_opened(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op, int pre);

/* Was @op's open started: a kept file, an open here, or its open and statx on the ring? */
static int open_begun(const struct l3_fill_op *op)
{
	return op->opened || op->on_ring;
}

/* Is @op's file (its header unknown) shorter than header + payload: a segmented object's manifest,
 * or an object cut short? The header decides which. */
static int short_file(const struct l3_fill_op *op)
{
	return !op->hdr_known && op->file_bytes < L3_HDR_BLOCK + op->req->loc->payload_bytes;
}

/* May this fill read O_DIRECT (the filesystem, the mode, the destination)? */
static int direct_ok(struct sc_l3 *l3, const struct sc_l3_fill_req *req, uint64_t want)
{
	uint32_t ma = l3->dio_mem_align, oa = l3->dio_off_align;
	return l3->opts.o_direct != SC_L3_ODIRECT_OFF && !(req->flags & SC_L3_FILL_BUFFERED) && ma && oa &&
	       oa <= L3_HDR_BLOCK && L3_HDR_BLOCK % ma == 0 && (uintptr_t)req->dst % ma == 0 &&
	       req->dst_bytes >= (want + oa - 1) / oa * oa;
}

/* An open that failed: vanished (ESTALE on a network filesystem) is a miss; a socket (ENXIO) or
 * a link (ELOOP; EXDEV: a link in "XX/" leading out of the store) under an object's name is not an
 * object, as the statx beside the open and the directory's verification judge it. */
/* O_NONBLOCK: a FIFO planted under an object's name is never waited on (fill_opened checks the
 * type and takes the flag off again: io_uring would not punt a blocking read otherwise) */
#define L3_FILL_OPEN (O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)

static int open_error(int rc)
{
	return rc == -ESTALE ? -ENOENT : rc == -ENXIO || rc == -ELOOP || rc == -EXDEV ? -EBADMSG : rc;
}

/*
 * Open the object: a kept file, or, with other fills in flight on this ring, an open on the ring
 * (on a network filesystem an open is a round trip, ~1 ms on ceph-fuse, and on a local disk the
 * open of a cold inode reads it, ~0.1-0.2 ms: one after another in this thread they would bound a
 * batch of fills; io-wq runs them side by side). A lone fill opens here when @may_block: nothing
 * to overlap, one system call less. 0 (op->opened: the file is open; else its open is on the
 * ring, and ring_opened goes on), 1 (not @may_block and the ring had no room: nothing done), or a
 * negative errno.
 */
static int fill_open(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op, int may_block)
{
	const struct sc_location *loc = op->req->loc;
	l3_obj_relpath(loc->digest.lo, loc->digest.hi, op->rel);
	/* FUSE: no page-cache test decides (the daemon's cache is not the kernel's): direct from the
	 * open whenever direct is allowed */
	op->open_direct = l3->dio_at_open && direct_ok(l3, op->req, loc->payload_bytes);
	op->opened_direct = op->open_direct;
	op->kept_gen = atomic_load_explicit(&l3->kept_gen, memory_order_acquire);
	if ((op->kept = l3_kept_take(l3, r, loc->digest.lo, loc->digest.hi, op->rel, op->open_direct))) {
		op->fd = op->kept->fd;
		op->fl = op->kept->fl;
		op->file_bytes = op->kept->file_bytes;
		op->mtime_ns = op->kept->mtime_ns;
		op->opened = 1;
		return 0;
	}
	int flags = L3_FILL_OPEN | (op->open_direct ? O_DIRECT : 0);
	if (r->inflight > 1 && io_uring_sq_space_left(&r->ring) < 2)
		io_uring_submit(&r->ring);
	if (r->inflight > 1 && io_uring_sq_space_left(&r->ring) >= 2) {
		/* the open and the stat side by side (each a round trip on FUSE); the close too, later */
		struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
		/* never through a link in "XX/": a member may plant one in place of a subdirectory */
		static const struct open_how how_buf = { .flags = L3_FILL_OPEN, .resolve = L3_RESOLVE },
					     how_dio = { .flags = L3_FILL_OPEN | O_DIRECT, .resolve = L3_RESOLVE };
		io_uring_prep_openat2(sqe, l3->objfd, op->rel, (struct open_how *)(op->open_direct ? &how_dio : &how_buf));
		io_uring_sqe_set_data64(sqe, l3_fill_ud(r, op, L3_IO_OPEN, 0));
		sqe = io_uring_get_sqe(&r->ring);
		io_uring_prep_statx(sqe, l3->objfd, op->rel, AT_SYMLINK_NOFOLLOW,
				    STATX_TYPE | STATX_SIZE | STATX_MTIME | STATX_INO,
				    &op->stx);
		io_uring_sqe_set_data64(sqe, l3_fill_ud(r, op, L3_IO_STATX, 0));
		op->pending += 2;
		op->on_ring = 1;
		op->ring_wait = 2;
		return 0;
	}
	if (!may_block)
		return 1;
	op->fd = l3_openat(l3->objfd, op->rel, flags, 0);
	if (op->fd < 0)
		return open_error(op->fd);
	op->fl = flags & (O_NONBLOCK | O_DIRECT);
	op->opened = 1;
	return 0;
}

/* Open the object and queue its reads (fill_opened; for an open on the ring, ring_opened does). */
static int fill_start(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	int rc = fill_open(l3, r, op, 1);
	return rc ? rc : op->opened ? fill_opened(l3, r, op, 0) : 0;
}

/* The file is open: decide direct or buffered and queue the reads (@pre: only the first one, of
 * a short file whose fill waits for a reading slot; see open_waiting). */
static int fill_opened(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op, int pre)
{
	struct sc_l3_fill_req *req = op->req;
	const struct sc_location *loc = req->loc;
	if (!op->on_ring && !op->kept) {
		struct stat sb;
		if (fstat(op->fd, &sb) < 0)
			return -errno;
		if (!S_ISREG(sb.st_mode))
			return -EBADMSG; /* a FIFO, device or directory under an object's name */
		op->file_bytes = (uint64_t)sb.st_size;
		op->ino = (uint64_t)sb.st_ino;
		op->mtime_ns = (int64_t)shm_ts_ns(sb.st_mtim);
	}
	op->want = loc->payload_bytes;
	/* direct or not is decided first, then the file's flags are set once (O_NONBLOCK off): a kept
	 * file whose flags are already right costs no system call. FUSE, auto mode: what the kernel's
	 * page cache has is read from there even though the file was opened direct. */
	int cold = l3->opts.o_direct == SC_L3_ODIRECT_ON || l3_file_cold(op->fd, L3_HDR_BLOCK, op->want);
	int want_fl = (op->open_direct ? cold : direct_ok(l3, req, op->want) && cold) ? O_DIRECT : 0;
	if (op->fl != want_fl && fcntl(op->fd, F_SETFL, want_fl) < 0) {
		want_fl ^= O_DIRECT; /* refused: the other way (buffered, or direct as opened) */
		if (fcntl(op->fd, F_SETFL, want_fl) < 0)
			return -errno;
	}
	op->fl = want_fl;
	if (!want_fl)
		op->open_direct = 0;
	op->direct = want_fl == O_DIRECT;
	if (op->direct)
		op->align = l3->dio_off_align;
	req->direct = op->direct;
	/* small: one read; large: chunks, hashed in order as they land (while later chunks are still
	 * being read, and while a chunk just read may still be in the CPU's cache) */
	op->chunk = op->want;
	uint64_t piece = op->direct ? L3_DIRECT_CHUNK : L3_CHUNK;
	if (op->want >= 2 * piece) {
		uint64_t ch = (op->want + L3_MAX_CHUNKS - 1) / L3_MAX_CHUNKS;
		op->chunk = ch < piece ? piece : shm_page_up(ch);
	}
	op->nchunks = (uint32_t)((op->want + op->chunk - 1) / op->chunk);
	XXH3_128bits_reset(op->hs);
	const struct l3_kept *k = op->kept;
	op->hdr_known = k && k->payload_bytes == loc->payload_bytes && k->sec0 == loc->sec_len[0] && k->kind == loc->kind;
	if (op->hdr_known) {
		op->ident = k->ident;
		op->cost_ns = k->cost_ns;
	}
	int first = op->direct && !op->hdr_known;
	/* shorter than its payload: a segmented object's manifest (or a cut one): the header decides,
	 * and the rest of the file lands in chunk 0 (a manifest's entries: lib/l3/segread.c takes them
	 * from there, no second read) */
	uint32_t nread = pre || (!op->on_ring && short_file(op)) ? 1 : op->nchunks;
	int rc = op->hdr_known ? 0 : first ? prep_first(r, op) : prep_header(r, op);
	for (uint32_t c = first ? 1 : 0; !rc && c < nread; c++)
		rc = prep_chunk(r, op, c);
	return rc;
}

/* Hash every leading chunk that is complete (not for an abandoned fill: its destination may be
 * unmapped, and nobody will look at the digest). */
static void hash_ready(struct l3_fill_op *op)
{
	if (op->abandoned)
		return;
	while (op->hashed < op->nchunks && (op->done_mask >> op->hashed & 1)) {
		uint64_t start = (uint64_t)op->hashed * op->chunk;
		XXH3_128bits_update(op->hs, (const uint8_t *)op->req->dst + start, chunk_len(op, op->hashed));
		op->hashed++;
	}
}

/* The end of @op's file: kept for the next fill of the object, or released, or closed. */
static void fill_close(struct l3_ring *r, struct l3_fill_op *op, int rc)
{
	const struct sc_location *loc = op->req->loc;
	if (op->kept) {
		op->kept->fl = op->fl;
		l3_kept_release(r, op->kept, rc, op->mtime_ns);
	} else if (op->fd >= 0 && (rc || !l3_kept_keep(r, op, loc->digest.lo, loc->digest.hi))) {
		/* on FUSE a close is a round trip too (flush): on the ring when the fill was */
		struct io_uring_sqe *sqe = op->on_ring ? io_uring_get_sqe(&r->ring) : NULL;
		if (sqe) {
			io_uring_prep_close(sqe, op->fd);
			io_uring_sqe_set_data64(sqe, L3_IO_CLOSE); /* nothing waits for it */
		} else {
			close(op->fd);
		}
	}
	op->fd = -1;
	op->kept = NULL;
}

/* Check what a fill read: the header (unless a kept file's header was verified for this
 * location), every chunk complete, the payload digest. 0, -EBADMSG (the object is bad) or -EINVAL
 * (the location describes it differently: the caller's mistake, not the object's). */
static int fill_verify(struct l3_fill_op *op, const struct sc_location *loc)
{
	if (!op->hdr_known) {
		struct l3_obj_hdr h;
		int rc = op->hdr_got == L3_HDR_BLOCK ? l3_hdr_parse(op->hdrbuf, op->file_bytes, &h) : -EBADMSG;
		if (rc)
			return rc == -EPROTO ? -EBADMSG : rc;
		/* the file named by the digest must hold that digest (else it is corrupt) */
		if (h.digest_lo != loc->digest.lo || h.digest_hi != loc->digest.hi)
			return -EBADMSG;
		if (h.payload_bytes != loc->payload_bytes || h.section_bytes[0] != loc->sec_len[0] || h.kind != loc->kind)
			return -EINVAL;
		op->ident = l3_hdr_identity(op->hdrbuf, &h);
		op->cost_ns = h.cost_ns > SC_COST_MAX ? SC_COST_MAX : h.cost_ns;
	}
	if (op->hashed != op->nchunks)
		return -EBADMSG; /* truncated: some chunk ended early */
	XXH128_hash_t d = XXH3_128bits_digest(op->hs);
	if (d.low64 != loc->digest.lo || d.high64 != loc->digest.hi)
		return -EBADMSG;
	/* good bytes, but another model's or state's: never this stage's */
	return l3_identity_differs(op->req->identity, op->ident) ? -EKEYREJECTED : 0;
}

/* A segmented object's identities, from its header block (already read): -EKEYREJECTED when the
 * fill asked for others; 0 otherwise (a bad header is the segmented fill's to judge). */
static int seg_identity(struct l3_fill_op *op)
{
	struct l3_obj_hdr h;
	if (l3_hdr_parse(op->hdrbuf, 0, &h))
		return 0;
	op->ident = l3_hdr_identity(op->hdrbuf, &h);
	op->cost_ns = h.cost_ns > SC_COST_MAX ? SC_COST_MAX : h.cost_ns;
	return l3_identity_differs(op->req->identity, op->ident) ? -EKEYREJECTED : 0;
}

/* A successful fill of @want bytes behind @ahead bytes took @ns: feed the model (see the top). */
static void est_sample(struct sc_l3 *l3, uint64_t want, uint64_t ahead, uint64_t ns)
{
	if (l3->est_pinned)
		return;
	uint64_t fixed = atomic_load_explicit(&l3->est_fixed_ns, RELAXED);
	if (want < L3_EST_SMALL && !ahead) {
		uint64_t f = fixed ? (fixed - (fixed >> L3_EST_SHIFT)) + (ns >> L3_EST_SHIFT) : ns;
		atomic_store_explicit(&l3->est_fixed_ns, f, RELAXED);
	} else if (want >= L3_EST_LARGE) {
		uint64_t var = ns > fixed ? ns - fixed : 0, bytes = sat_add(want, ahead);
		unsigned __int128 ps128 = (unsigned __int128)var * 1000u / bytes;
		uint64_t ps = ps128 > UINT32_MAX ? UINT32_MAX : (uint64_t)ps128;
		uint64_t cur = atomic_load_explicit(&l3->est_ps_per_byte, RELAXED);
		atomic_store_explicit(&l3->est_ps_per_byte,
				      cur ? (cur - (cur >> L3_EST_SHIFT)) + (ps >> L3_EST_SHIFT) : (ps ? ps : 1), RELAXED);
	} else {
		return;
	}
	atomic_fetch_add_explicit(&l3->est_samples, 1, RELAXED);
}

static void fill_finish(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	struct sc_l3_fill_req *req = op->req;
	const struct sc_location *loc = req->loc;
	/* a segmented object (never kept: its header is read every time) was read, verified and
	 * quarantined by its steps (lib/l3/segread.c): its result is op->err */
	int rc = op->err, seg = op->seg != NULL;
	l3_segfill_free(op);
	shm_fault_point("fill.after_read");
	if (!rc && op->abandoned)
		rc = -ECANCELED; /* its caller gave up: not verified, not used (see the top of this file) */
	if (!rc && !seg) {
		rc = fill_verify(op, loc);
		if (rc == -EBADMSG)
			rc = l3_fill_bad(l3, op);
	}
	if (rc == -EKEYREJECTED)
		atomic_fetch_add_explicit(&l3->st->identity_mismatches, 1, RELAXED);
	if (rc == -EBADMSG)
		l3_kept_forget(l3); /* moved away: this thread's idle kept files close at once */
	uint64_t ns = shm_now_ns() - op->t0;
	if (rc == -ESTALE)
		rc = -ENOENT; /* the file vanished under the read (network filesystem): a miss */
	if (!rc) {
		/* last use, for the budget's LRU order (lib/l3/hosts.c); best effort */
		op->mtime_ns = l3_note_access(l3, op->fd, loc->digest.lo, loc->digest.hi, op->mtime_ns);
		atomic_fetch_add_explicit(&l3->st->fills, 1, RELAXED);
		if (op->kept)
			atomic_fetch_add_explicit(&l3->st->fills_kept, 1, RELAXED);
		atomic_fetch_add_explicit(&l3->st->fill_bytes, op->want, RELAXED);
		atomic_fetch_add_explicit(&l3->st->fill_ns, ns, RELAXED);
		est_sample(l3, op->want, op->ahead, ns);
	}
	fill_close(r, op, seg && !rc ? 1 : rc);
	req->fill_ns = ns;
	req->cost_ns = op->cost_ns;
	io_pin_put(&r->pins, op->pin); /* every read into req->dst completed */
	uint64_t stage = req->stage_id, lo = loc->digest.lo, hi = loc->digest.hi, bytes = loc->payload_bytes;
	int64_t res = rc;
	SC_PROBE(l3_fill_done, stage, lo, hi, bytes, ns, res);
	void (*abandoned)(void *, int) = op->abandoned;
	void *actx = op->abandon_ctx;
	op->req = NULL;
	op->abandoned = NULL;
	op->abandon_ctx = NULL;
	op->next = r->free_ops;
	r->free_ops = op;
	r->inflight--;
	r->inflight_bytes -= op->want < r->inflight_bytes ? op->want : r->inflight_bytes;
	if (abandoned)
		abandoned(actx, rc); /* its caller gave up on it: the reads are done, the memory is free */
	else
		complete_req(r, req, rc);
}

/*
 * Reading slots. A ring has twice queue_depth fill slots; at most queue_depth fills read at once
 * (the depth the caller asked of the device), the others wait in submission order. When reads
 * end, process() starts waiting fills first and only then hashes and verifies what was read: a
 * fill's verification (~0.4 ms for 4 MiB) never keeps the device short of a read the caller
 * already asked for.
 */
static void work_push(struct l3_ring *r, struct l3_fill_op *op)
{
	/* a waiting fill's read (made while it waits, on the waiting list by the same link): its
	 * start goes on from there */
	if (op->in_work || op->waiting)
		return;
	op->in_work = 1;
	op->next = r->work_head;
	r->work_head = op;
}

/* Is @op a segmented object's fill: its segment reads under way, or its header read (and nothing
 * else in flight) showing a manifest? Its reading slot is kept until its last segment is read. */
static int seg_fill(const struct l3_fill_op *op)
{
	return op->seg || (!op->pending && !op->err && !op->abandoned && !op->hdr_known &&
			   op->hdr_got == L3_HDR_BLOCK && l3_seg_is_manifest(op->hdrbuf));
}

/* Does @op keep its reading slot when its reads in flight end: a segmented fill (until its last
 * segment is read), or the first read of a short file made while it waited (run_work reads the
 * rest when it is no manifest)? */
static int slot_kept(const struct l3_fill_op *op)
{
	return seg_fill(op) || (op->pre_read && !op->err && !op->abandoned);
}

/* Every read of @op ended: its reading slot is free. */
static void reads_ended(struct l3_ring *r, struct l3_fill_op *op)
{
	if (op->started) {
		op->started = 0;
		r->reading--;
	}
}

/* Start @op: its open and reads go to the ring (or it fails at once, and ends). */
static void start_one(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	op->started = 1;
	if (++r->reading > r->reading_max)
		r->reading_max = r->reading;
	/* a fill its caller gave up before it started reads nothing (the memory may be gone); one
	 * whose open failed while it waited ends now; one opened meanwhile reads at once; one whose
	 * open is still on the ring starts reading when it ends (ring_opened) */
	int rc = op->abandoned ? -ECANCELED
		 : op->err     ? 0
		 : !open_begun(op) ? fill_start(l3, r, op)
		 : op->pre_read ? 0 /* its first read was made while it waited: run_work goes on */
		 : op->opened  ? fill_opened(l3, r, op, 0)
			       : 0;
	if (rc && !op->err)
		op->err = rc;
	if (op->pending == 0 && slot_kept(op)) {
		work_push(r, op);
	} else if (op->pending == 0) {
		reads_ended(r, op);
		fill_finish(l3, r, op);
	}
}

/* Start waiting fills while reading slots are free. */
static void start_waiting(struct sc_l3 *l3, struct l3_ring *r)
{
	while (r->wait_head && r->reading < r->io_depth) {
		struct l3_fill_op *op = r->wait_head;
		if (!(r->wait_head = op->next))
			r->wait_tail = NULL;
		op->next = NULL;
		op->waiting = 0;
		start_one(l3, r, op);
	}
}

/* Open the files of waiting fills on the ring meanwhile, from @op to the end of the waiting list
 * (the fills just submitted), as fio opens its files before it reads: the open of a cold inode is
 * a disk read, and started with the fill it would add to its time in a reading slot. */
static void open_waiting(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	for (; op; op = op->next) {
		if (open_begun(op) || op->abandoned)
			continue;
		int rc = fill_open(l3, r, op, 0);
		if (rc == 1)
			return; /* the ring is full: the rest open when they start */
		if (rc)
			op->err = rc; /* ends when it starts (start_one) */
	}
}

/* A step of a segmented fill (lib/l3/segread.c), its identities checked first: 1 when over. */
static int seg_step(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	if (!op->seg) {
		int rc = seg_identity(op);
		if (rc) {
			op->err = rc;
			return 1;
		}
	}
	return l3_segfill_step(l3, r, op);
}

/* Hash what arrived and verify the fills whose reads all ended. */
static void run_work(struct sc_l3 *l3, struct l3_ring *r)
{
	while (r->work_head) {
		struct l3_fill_op *op = r->work_head;
		r->work_head = op->next;
		op->next = NULL;
		op->in_work = 0;
		if (seg_fill(op)) {
			if (!seg_step(l3, r, op))
				continue; /* its reads are in flight */
			reads_ended(r, op);
			fill_finish(l3, r, op);
			continue;
		}
		if (op->pre_read && !op->pending && !op->err && !op->abandoned) {
			/* the first read of a short file made while it waited, and no manifest: read it all
			 * again now, as any fill (the size its open's statx saw may not be its file's) */
			op->pre_read = 0;
			op->hdr_got = op->done_mask = op->direct_mask = 0;
			op->hashed = 0;
			memset(op->cgot, 0, sizeof(op->cgot));
			int rc = fill_opened(l3, r, op, 0);
			if (rc)
				op->err = rc;
			if (op->pending)
				continue;
		}
		hash_ready(op);
		if (op->pending == 0) {
			reads_ended(r, op);
			fill_finish(l3, r, op);
		}
	}
}

#ifdef SC_TEST_HOOKS
_Atomic int l3_test_setfl_fails;
#endif

/* Switch an O_DIRECT fill to buffered reads for what it still has to read (reads in flight
 * finish as they were submitted). 0, or -errno when the descriptor keeps O_DIRECT: then the fill
 * ends with that error (a buffered read's offsets on an O_DIRECT descriptor would only be refused). */
static int to_buffered(struct l3_fill_op *op)
{
	int rc = fcntl(op->fd, F_SETFL, 0) < 0 ? -errno : 0;
#ifdef SC_TEST_HOOKS
	int e = atomic_exchange(&l3_test_setfl_fails, 0);
	if (e && !rc) {
		(void)fcntl(op->fd, F_SETFL, op->fl); /* as if the switch had not happened */
		rc = -e;
	}
#endif
	if (rc)
		return rc;
	op->direct = 0;
	op->fl = 0;
	return 0;
}

/* @res bytes (>= 0) of chunk @c arrived: account them, read the rest of the chunk, or hash what is
 * complete. A read of 0 bytes is the end of the file: the chunk stays incomplete (truncated). */
static void chunk_got(struct l3_ring *r, struct l3_fill_op *op, uint32_t c, uint64_t res)
{
	if (!res)
		return;
	if (op->abandoned) {
		op->err = -ECANCELED; /* no further read into a destination its caller gave up */
		return;
	}
	L3_MARK_DEFINED((uint8_t *)op->req->dst + (uint64_t)c * op->chunk + op->cgot[c], res);
	uint64_t len = chunk_len(op, c), got = op->cgot[c] + res;
	op->cgot[c] = got > len ? len : got; /* a longer file is caught by the size check */
	if (op->cgot[c] < len) {
		if (op->hdr_got == L3_HDR_BLOCK && l3_seg_is_manifest(op->hdrbuf))
			return; /* a segmented object's manifest ended here: its segments are read instead */
		/* an unaligned short read: continue buffered */
		int rc = op->direct && op->cgot[c] % op->align ? to_buffered(op) : 0;
		if (rc || prep_chunk(r, op, c))
			op->err = rc ? rc : -EAGAIN;
	} else {
		op->done_mask |= 1ull << c;
		work_push(r, op); /* hashed once the waiting fills have started (process) */
	}
}

/* The combined read (header block + chunk 0) completed with @res. */
static void first_got(struct l3_ring *r, struct l3_fill_op *op, int res)
{
	if (res == -EINVAL && (op->direct_mask & 1) && !op->abandoned) {
		/* the kernel refused this O_DIRECT read after all (the fill may have turned buffered
		 * already, for a later chunk refused first): two buffered reads */
		int rc = op->direct ? to_buffered(op) : 0;
		if (rc || prep_header(r, op) || prep_chunk(r, op, 0))
			op->err = rc ? rc : -EAGAIN;
		return;
	}
	if (res < 0) {
		op->err = res;
		return;
	}
	uint64_t h = (uint64_t)res < L3_HDR_BLOCK ? (uint64_t)res : L3_HDR_BLOCK;
	if (h)
		L3_MARK_DEFINED(op->hdrbuf, h);
	op->hdr_got = h;
	/* a header cut short is the end of a file shorter than a header: verification rejects it */
	if (h == L3_HDR_BLOCK)
		chunk_got(r, op, 0, (uint64_t)res - h);
}

/* One of the open and the statx of a fill opened on the ring completed. Its reads start once both
 * have, and only for a regular file: a FIFO planted under an object's name would hold a read
 * (poll-armed, waiting for a writer) and its ring entry forever. */
static void ring_opened(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op)
{
	if (--op->ring_wait > 0 || op->err || op->abandoned)
		return;
	op->opened = 1;
	if (!op->started) {
		/* opened while it waits: its reads start with it (start_one), but a file shorter than its
		 * payload (a segmented object's manifest, most likely) is read now, so that its segments
		 * can be read as soon as it starts: its header and manifest are a few KiB, read beside the
		 * reading fills, not in a reading slot of their own */
		if (short_file(op)) {
			int rc = fill_opened(l3, r, op, 1);
			if (rc)
				op->err = rc;
			op->pre_read = 1;
		}
		return;
	}
	int rc = fill_opened(l3, r, op, 0);
	if (rc)
		op->err = rc;
}

#ifdef SC_TEST_HOOKS
_Atomic uint64_t l3_test_refuse_direct;
_Atomic int l3_test_statx_res;

/* A direct read of chunk @c that l3_test_refuse_direct names ends as the kernel's refusal; a statx
 * on the ring ends as l3_test_statx_res says, once. */
static int refused_for_test(const struct l3_fill_op *op, int kind, uint32_t c, int res)
{
	if (kind == L3_IO_STATX) {
		int e = atomic_exchange(&l3_test_statx_res, 0);
		return e ? e : res;
	}
	if ((kind != L3_IO_PAYLOAD && kind != L3_IO_FIRST) || res < 0 || c >= 64 || !(op->direct_mask >> c & 1))
		return res;
	return l3_test_take_bit(&l3_test_refuse_direct, c) ? -EINVAL : res;
}
#endif

/* Handle one completion of a fill read. */
static void fill_cqe(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op, int kind, uint32_t c, int res)
{
	op->pending--;
#ifdef SC_TEST_HOOKS
	res = refused_for_test(op, kind, c, res);
#endif
	if (kind == L3_IO_SEG) {
		l3_segfill_cqe(l3, r, op, c, res);
		work_push(r, op); /* hashed as it lands, the next window queued (run_work) */
	} else if (kind == L3_IO_STATX) {
		if (res < 0 && !op->err)
			op->err = res == -ESTALE ? -ENOENT : res;
		else if (res >= 0 && !S_ISREG(op->stx.stx_mode) && !op->err)
			op->err = -EBADMSG; /* a FIFO, device or directory under an object's name */
		else if (res >= 0) {
			op->file_bytes = op->stx.stx_size;
			op->ino = op->stx.stx_ino;
			op->mtime_ns = (int64_t)op->stx.stx_mtime.tv_sec * SHM_NS_PER_SEC + op->stx.stx_mtime.tv_nsec;
		}
		ring_opened(l3, r, op);
	} else if (kind == L3_IO_OPEN) {
		if (res < 0) {
			op->err = open_error(res);
		} else if (op->abandoned) {
			op->fd = res; /* closed by fill_close; no read is started */
			op->err = -ECANCELED;
		} else {
			op->fd = res;
			op->fl = O_NONBLOCK | (op->open_direct ? O_DIRECT : 0); /* as fill_start asked */
		}
		ring_opened(l3, r, op); /* its reads are submitted by process() */
	} else if (op->err) {
		/* already failed: just wait for the other reads */
	} else if (kind == L3_IO_HDR) {
		if (res > 0)
			L3_MARK_DEFINED((uint8_t *)op->hdrbuf + op->hdr_got, (uint64_t)res);
		if (res < 0)
			op->err = res;
		else if ((op->hdr_got += (uint64_t)res) < L3_HDR_BLOCK && res > 0 && prep_header(r, op))
			op->err = -EAGAIN;
		/* a short header (EOF) is caught by verification */
	} else if (kind == L3_IO_FIRST) {
		first_got(r, op, res);
	} else if (c >= op->nchunks) {
		op->err = -EIO; /* cannot happen: we encoded it */
	} else if (res < 0) {
		if (res == -EINVAL && (op->direct_mask >> c & 1) && !op->abandoned) {
			/* the kernel refused this O_DIRECT read after all (the fill may have turned
			 * buffered already, for a chunk refused before it): read buffered */
			int rc = op->direct ? to_buffered(op) : 0;
			if (rc || prep_chunk(r, op, c))
				op->err = rc ? rc : -EAGAIN;
		} else {
			op->err = res;
		}
	} else {
		chunk_got(r, op, c, (uint64_t)res);
	}
	if (op->pending == 0 && op->started) {
		if (!slot_kept(op))
			reads_ended(r, op);
		work_push(r, op);
	} /* a waiting fill whose open ended (or failed) stays on the waiting list: start_one goes on */
}

/* Process every available completion: waiting fills start in the slots freed, then what was read is
 * hashed and verified. Returns how many completions. */
static unsigned process(struct sc_l3 *l3, struct l3_ring *r)
{
	struct io_uring_cqe *cqes[64];
	unsigned total = 0, n;
	while ((n = io_uring_peek_batch_cqe(&r->ring, cqes, 64)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			uint64_t ud = io_uring_cqe_get_data64(cqes[i]);
			int kind = (int)(ud & TAG_MASK), res = cqes[i]->res;
			if (kind == L3_IO_SYNC) {
				struct l3_sync_io *io = (void *)(uintptr_t)(ud & ~TAG_MASK);
				io->res = res;
				io->done = 1;
			} else if ((kind == L3_IO_HDR || kind == L3_IO_PAYLOAD || kind == L3_IO_FIRST || kind == L3_IO_OPEN ||
				    kind == L3_IO_STATX || (kind == L3_IO_SEG && (ud >> 3 & L3_SEG_TAG))) &&
				   (ud >> 16) < r->depth) {
				fill_cqe(l3, r, &r->ops[ud >> 16], kind, (uint32_t)(ud >> 3) & L3_FILL_TAG_MASK, res);
			}
		}
		io_uring_cq_advance(&r->ring, n);
		total += n;
	}
	/* waiting fills start, then the reads resubmitted by fill_cqe and theirs go; then what was read
	 * is hashed and verified; a segmented fill that ends there frees its slot: round again, so that
	 * no fill is left waiting with nothing in flight to wake a reap */
	for (;;) {
		start_waiting(l3, r);
		if (io_uring_sq_ready(&r->ring))
			io_uring_submit(&r->ring);
		if (!r->work_head)
			break;
		run_work(l3, r);
	}
	return total;
}

#ifdef SC_TEST_HOOKS
_Atomic int l3_test_wait_again, l3_test_wait_errno = EAGAIN;
#endif

/* Submit whatever is still queued (a failed io_uring_submit may have left SQEs behind) and wait
 * for at least one completion: a plain wait could sleep forever on reads never submitted. */
static int ring_wait(struct l3_ring *r)
{
#ifdef SC_TEST_HOOKS
	if (atomic_load_explicit(&l3_test_wait_again, memory_order_relaxed) > 0) {
		atomic_fetch_sub_explicit(&l3_test_wait_again, 1, memory_order_relaxed);
		return -atomic_load_explicit(&l3_test_wait_errno, memory_order_relaxed);
	}
#endif
	int rc = io_uring_submit_and_wait(&r->ring, 1);
	return rc < 0 ? rc : 0;
}

static void drain(struct l3_ring *r)
{
	/* wait for every read still in flight: their destinations belong to callers (a signal
	 * interrupting a wait is no reason to stop) */
	while (r->inflight) {
		int rc = ring_wait(r);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
			break;
		process(r->owner, r);
	}
}

int sc_l3_fill_submit(struct sc_l3 *l3, struct sc_l3_fill_req **reqs, unsigned n)
{
	if (!l3 || (!reqs && n))
		return -EINVAL;
	struct l3_ring *r = l3_ring_get(l3);
	if (!r)
		return -ENOMEM;
	l3_ring_register(l3, r);
	l3_kept_sweep(l3, r);
	unsigned i;
	struct l3_fill_op *first_new = NULL;
	for (i = 0; i < n; i++) {
		struct sc_l3_fill_req *req = reqs[i];
		if (!r->free_ops)
			break;
		req->result = 0;
		req->direct = 0;
		req->fill_ns = 0;
		req->cost_ns = 0;
		if (!req->loc || !req->dst || (req->flags & ~SC_L3_FILL_MASK) || !req->loc->payload_bytes ||
		    req->dst_bytes < req->loc->payload_bytes) {
			complete_req(r, req, -EINVAL);
			continue;
		}
		/* the arena's lock stays with the ring until the kernel is done with every read */
		int pin = io_pin_get(&r->ring, &r->pins, req->dst);
		if (pin < -1) {
			complete_req(r, req, pin);
			continue;
		}
		struct l3_fill_op *op = r->free_ops;
		r->free_ops = op->next;
		*op = (struct l3_fill_op){ .req = req, .fd = -1, .hdrbuf = op->hdrbuf, .hs = op->hs, .t0 = shm_now_ns(),
					   .pin = pin, .ahead = r->inflight_bytes };
		r->inflight++;
		r->inflight_bytes = sat_add(r->inflight_bytes, req->loc->payload_bytes);
		atomic_fetch_add_explicit(&l3->st->fill_starts, 1, RELAXED);
		uint64_t stage = req->stage_id, lo = req->loc->digest.lo, hi = req->loc->digest.hi;
		uint64_t bytes = req->loc->payload_bytes;
		SC_PROBE(l3_fill_start, stage, lo, hi, bytes);
		op->waiting = 1;
		if (!first_new)
			first_new = op;
		if (r->wait_tail)
			r->wait_tail->next = op;
		else
			r->wait_head = op;
		r->wait_tail = op;
	}
	start_waiting(l3, r);
	/* the new fills still waiting (when the first of them started, every fill before it did) */
	if (first_new)
		open_waiting(l3, r, first_new->waiting ? first_new : r->wait_head);
	if (io_uring_sq_ready(&r->ring)) {
		int rc = io_uring_submit(&r->ring);
		if (rc < 0 && i == 0)
			return rc;
	}
	return (int)i;
}

int sc_l3_fill_reap(struct sc_l3 *l3, struct sc_l3_fill_req **done, unsigned max, int64_t timeout_ns)
{
	if (!l3 || (!done && max))
		return -EINVAL;
	struct l3_ring *r = l3_ring_get(l3);
	if (!r)
		return -ENOMEM;
	uint64_t deadline = timeout_ns > 0 ? shm_now_ns() + (uint64_t)timeout_ns : 0;
	process(l3, r);
	while (!r->done_count && r->inflight && timeout_ns != 0) {
		struct io_uring_cqe *cqe;
		int rc;
		if (timeout_ns < 0) {
			rc = ring_wait(r);
		} else {
			io_uring_submit(&r->ring);
			uint64_t now = shm_now_ns();
			if (now >= deadline)
				break;
			struct __kernel_timespec ts = { .tv_sec = (long long)((deadline - now) / SHM_NS_PER_SEC),
							.tv_nsec = (long long)((deadline - now) % SHM_NS_PER_SEC) };
			rc = io_uring_wait_cqe_timeout(&r->ring, &cqe, &ts);
		}
		if (rc < 0 && rc != -ETIME && rc != -EINTR)
			return rc;
		process(l3, r);
	}
	unsigned k = 0;
	while (k < max && r->done_head) {
		struct sc_l3_fill_req *req = r->done_head;
		r->done_head = req->_next;
		if (!r->done_head)
			r->done_tail = NULL;
		r->done_count--;
		req->_next = NULL;
		done[k++] = req;
	}
	return (int)k;
}

unsigned sc_l3_fill_inflight(struct sc_l3 *l3)
{
	struct l3_ring *r = l3 ? l3_ring_find(l3) : NULL;
	return r ? r->inflight + r->done_count : 0;
}

int sc_l3_fill(struct sc_l3 *l3, const struct sc_location *loc, void *dst, uint64_t dst_bytes, uint32_t flags)
{
	if (!l3 || !loc || !dst)
		return -EINVAL;
	struct sc_l3_fill_req req = { .loc = loc, .dst = dst, .dst_bytes = dst_bytes, .flags = flags };
	return l3_fill_req(l3, &req);
}

int l3_fill_from(struct sc_l3 *l3, struct sc_l3_fill_req *req, struct sc_arena *src)
{
	struct l3_ring *r = l3_ring_get(l3);
	if (!r)
		return -ENOMEM;
	r->seg_src = src; /* this thread's ring: no other fill reads it meanwhile but the batch's */
	int rc = l3_fill_req(l3, req);
	r->seg_src = NULL;
	return rc;
}

int l3_fill_req(struct sc_l3 *l3, struct sc_l3_fill_req *reqp)
{
	struct l3_ring *r = l3_ring_get(l3);
	if (!r)
		return -ENOMEM;
	struct sc_l3_fill_req *p = reqp;
	int k;
	while ((k = sc_l3_fill_submit(l3, &p, 1)) == 0) {
		/* the ring is full of this thread's batch fills: let one finish */
		if (ring_wait(r) < 0)
			return -EAGAIN;
		process(l3, r);
	}
	if (k < 0)
		return k;
	/* wait for our request, leaving other completions queued for sc_l3_fill_reap */
	for (;;) {
		struct sc_l3_fill_req **pp = &r->done_head, *prev = NULL;
		while (*pp && *pp != reqp)
			prev = *pp, pp = &(*pp)->_next;
		if (*pp) {
			*pp = reqp->_next;
			if (r->done_tail == reqp)
				r->done_tail = prev;
			r->done_count--;
			return reqp->result;
		}
		/* never return while a read into the caller's memory is in flight: a failed wait (only
		 * EINTR/EAGAIN in practice) is retried */
		if (ring_wait(r) < 0)
			sched_yield();
		process(l3, r);
	}
}

/* Take @req off the done list if it is there: 1 (its result in req->result), else 0. */
static int take_done(struct l3_ring *r, struct sc_l3_fill_req *reqp)
{
	struct sc_l3_fill_req **pp = &r->done_head, *prev = NULL;
	while (*pp && *pp != reqp)
		prev = *pp, pp = &(*pp)->_next;
	if (!*pp)
		return 0;
	*pp = reqp->_next;
	if (r->done_tail == reqp)
		r->done_tail = prev;
	r->done_count--;
	reqp->_next = NULL;
	return 1;
}

int l3_fill_from_until(struct sc_l3 *l3, struct sc_l3_fill_req *req, struct sc_arena *src, uint64_t deadline)
{
	if (!deadline)
		return l3_fill_from(l3, req, src);
	struct l3_ring *r = l3_ring_get(l3);
	if (!r)
		return -ENOMEM;
	r->seg_src = src; /* an optimisation only: a fill reaped later without it reads every segment */
	int k, rc;
	struct sc_l3_fill_req *p = req;
	while ((k = sc_l3_fill_submit(l3, &p, 1)) == 0) {
		/* the ring is full of this thread's fills: let one finish, but not past the deadline */
		if (shm_now_ns() >= deadline) {
			rc = -ETIME; /* nothing submitted */
			goto out;
		}
		if (ring_wait(r) < 0) {
			rc = -EAGAIN;
			goto out;
		}
		process(l3, r);
	}
	if (k < 0) {
		rc = k;
		goto out;
	}
	shm_sched_point("l3.fill.submitted"); /* in flight: the deadline may pass before its reads do */
	/* what completed is taken before the deadline is looked at; what completes after it is the
	 * abandoned fill's own business (its completion may already be queued: the ring reaps it) */
	for (;;) {
		if (take_done(r, req)) {
			rc = req->result;
			goto out;
		}
		uint64_t now = shm_now_ns();
		if (now >= deadline) {
			rc = -EINPROGRESS; /* still reading into the caller's memory: abandon it */
			goto out;
		}
		io_uring_submit(&r->ring);
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts = { .tv_sec = (long long)((deadline - now) / SHM_NS_PER_SEC),
						.tv_nsec = (long long)((deadline - now) % SHM_NS_PER_SEC) };
		(void)io_uring_wait_cqe_timeout(&r->ring, &cqe, &ts);
		process(l3, r);
	}
out:
	r->seg_src = NULL;
	return rc;
}

void l3_fill_abandon(struct sc_l3 *l3, struct sc_l3_fill_req *req, void (*done)(void *ctx, int result), void *ctx)
{
	struct l3_ring *r = l3_ring_get(l3);
	if (r) {
		for (uint32_t i = 0; i < r->depth; i++) {
			if (r->ops[i].req == req) {
				r->ops[i].abandoned = done;
				r->ops[i].abandon_ctx = ctx;
				return;
			}
		}
		if (!take_done(r, req))
			return; /* not this ring's: nothing in flight to wait for (cannot happen) */
	}
	done(ctx, req->result); /* it completed meanwhile: nothing reads into the memory any more */
}

void l3_fill_poll(struct sc_l3 *l3)
{
	struct l3_ring *r = l3_ring_find(l3);
	if (r && r->inflight)
		process(l3, r);
}

int sc_l3_fill_estimate(struct sc_l3 *l3, uint64_t bytes, uint64_t *ns)
{
	if (!l3 || !ns)
		return -EINVAL;
	*ns = 0;
	uint64_t fixed = atomic_load_explicit(&l3->est_fixed_ns, RELAXED);
	uint64_t ps = atomic_load_explicit(&l3->est_ps_per_byte, RELAXED);
	if (!ps) {
		/* nothing large measured by this handle: the directory's record of every fill so far
		 * (fixed costs included, so it errs long) */
		uint64_t fb = atomic_load_explicit(&l3->st->fill_bytes, RELAXED);
		uint64_t fn = atomic_load_explicit(&l3->st->fill_ns, RELAXED);
		if (!fb || !fn) {
			if (!fixed)
				return -ENODATA;
		} else {
			unsigned __int128 p = (unsigned __int128)fn * 1000u / fb;
			ps = p > UINT32_MAX ? UINT32_MAX : p ? (uint64_t)p : 1;
		}
	}
	struct l3_ring *r = l3_ring_find(l3);
	uint64_t ahead = r ? r->inflight_bytes : 0;
	unsigned __int128 t = (unsigned __int128)sat_add(bytes, ahead) * ps / 1000u + fixed;
	*ns = t > UINT64_MAX ? UINT64_MAX : (uint64_t)t;
	return 0;
}

#ifdef SC_TEST_HOOKS
#include "stagecache_test.h"
void sc_test_set_fill_model(struct sc_l3 *l3, uint64_t fixed_ns, uint64_t ps_per_byte)
{
	if (!l3)
		return;
	atomic_store_explicit(&l3->est_fixed_ns, fixed_ns, RELAXED);
	atomic_store_explicit(&l3->est_ps_per_byte, ps_per_byte, RELAXED);
	l3->est_pinned = fixed_ns || ps_per_byte;
}

unsigned sc_test_l3_fills_reading(struct sc_l3 *l3, unsigned *max)
{
	struct l3_ring *r = l3 ? l3_ring_find(l3) : NULL;
	*max = r ? r->reading_max : 0;
	if (r)
		r->reading_max = r->reading;
	return r ? r->reading : 0;
}
#endif

/* ---- the put path's synchronous I/O ---- */

static int sync_wait(struct l3_ring *r, struct l3_sync_io *io)
{
	while (!io->done) {
		int rc = ring_wait(r);
		if (rc < 0 && rc != -EINTR)
			return rc;
		process(r->owner, r);
	}
	return io->res;
}

/*
 * A put's temp file is written with pwritev on the calling thread, not on the ring: the write is
 * buffered (it lands in the page cache), which io_uring hands to an io-wq worker, so a ring write
 * cost a wake-up and two context switches for nothing; a plain write also ends with the call (no
 * completion of a dead writer can land later). A file larger than L3_WB_PIECE is written a piece at
 * a time, and the writeback of each piece is started as soon as it is in the page cache
 * (sync_file_range WRITE, which waits for nothing): the device writes piece k while piece k+1 is
 * copied, so the fsync that follows waits for the last piece and the journal instead of the whole
 * file (a 4 MiB object on this project's test disks: fsync 3.0 ms -> 1.8 ms, write + fsync
 * 4.1 ms -> 3.0 ms). Durability is still the fsync's alone; a smaller file (a prefix entry) is one
 * write.
 */
#define L3_WB_PIECE (1u << 20)

#ifdef SC_TEST_HOOKS
_Atomic unsigned long l3_test_wb_starts;
#endif

int l3_write_at(int fd, const struct iovec *iov_in, int niov, uint64_t off)
{
	struct iovec iov[4], sub[4];
	if (niov < 0 || niov > 4)
		return -EINVAL;
	memcpy(iov, iov_in, sizeof(*iov) * (size_t)niov);
	uint64_t total = 0;
	for (int i = 0; i < niov; i++)
		total += iov[i].iov_len;
	if (!total)
		return 0; /* nothing to write (pwritev would return 0, which below is a failed write) */
	int pieces = total > L3_WB_PIECE;
	int first = 0;
	while (first < niov) {
		/* this write: what is left, or its next piece */
		uint64_t room = pieces ? L3_WB_PIECE : UINT64_MAX;
		int ns = 0;
		for (int i = first; i < niov && room; i++) {
			size_t len = iov[i].iov_len < room ? iov[i].iov_len : (size_t)room;
			sub[ns++] = (struct iovec){ .iov_base = iov[i].iov_base, .iov_len = len };
			room -= len;
		}
		ssize_t res = pwritev(fd, sub, ns, (off_t)off);
		if (res < 0 && errno == EINTR)
			continue;
		if (res < 0)
			return -errno;
		if (res == 0)
			return -EIO;
		if (pieces) {
			(void)sync_file_range(fd, (off_t)off, res, SYNC_FILE_RANGE_WRITE);
#ifdef SC_TEST_HOOKS
			atomic_fetch_add_explicit(&l3_test_wb_starts, 1, memory_order_relaxed);
#endif
		}
		off += (uint64_t)res;
		size_t left = (size_t)res;
		while (first < niov && left >= iov[first].iov_len)
			left -= iov[first++].iov_len;
		if (first < niov) {
			iov[first].iov_base = (uint8_t *)iov[first].iov_base + left;
			iov[first].iov_len -= left;
		}
	}
	return 0;
}

int l3_ring_fsync(struct l3_ring *r, int fd)
{
	return l3_ring_fsync_all(r, &fd, 1);
}

#ifdef SC_TEST_HOOKS
_Atomic unsigned long l3_test_fsync_rounds, l3_test_fsyncs, l3_test_syncfs_rounds;
#endif

/*
 * A round of many fsyncs is one syncfs on a local filesystem. Each fsync on a filesystem without a
 * journal (ext4 made without one, as on this project's test machines) writes its file and inode and
 * flushes the device on its own: a group commit of 32 puts was ~110 flushes there (a temp file each
 * for the object and its entry, and nearly as many directories, 256 per tree). syncfs writes every
 * dirty inode and block of the filesystem and flushes once, and reports any writeback error since
 * the descriptor it is given was opened (Linux >= 5.8), so the round is as durable. It costs ~1.2 ms
 * on that disk where one fsync costs ~0.2 ms, and it also writes the filesystem's other dirty data,
 * so only rounds of at least L3_SYNCFS_MIN files use it, and only when every file is on the store's
 * filesystem (st_dev of DIR/objects) and that filesystem is a local one whose syncfs is a real one
 * (l3->syncfs_ok: never FUSE, whose syncfs may be a no-op, nor a network filesystem).
 */
static int whole_fs_round(struct sc_l3 *l3, const int *fds, unsigned n)
{
	if (!l3 || !l3->syncfs_ok || n < L3_SYNCFS_MIN)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		struct stat sb;
		if (fstat(fds[i], &sb) < 0 || (uint64_t)sb.st_dev != l3->obj_dev)
			return 0;
	}
	return 1;
}

static void prep_fsync(struct io_uring_sqe *sqe, unsigned i, void *ctx);

int l3_ring_fsync_all(struct l3_ring *r, const int *fds, unsigned n)
{
#ifdef SC_TEST_HOOKS
	atomic_fetch_add_explicit(&l3_test_fsync_rounds, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&l3_test_fsyncs, n, memory_order_relaxed);
#endif
	if (whole_fs_round(r->owner, fds, n)) {
#ifdef SC_TEST_HOOKS
		atomic_fetch_add_explicit(&l3_test_syncfs_rounds, 1, memory_order_relaxed);
#endif
		return syncfs(fds[0]) < 0 ? -errno : 0;
	}
	/* the writeback of every file started first, so that their blocks are allocated in one
	 * journal transaction (delayed allocation happens at writeback) which the fsyncs, run a
	 * few at a time by io-wq workers, can then share */
	if (n > 1)
		for (unsigned i = 0; i < n; i++)
			(void)sync_file_range(fds[i], 0, 0, SYNC_FILE_RANGE_WRITE);
	int *res = malloc((n ? n : 1) * sizeof(*res));
	if (!res)
		return -ENOMEM;
	/* all queued before one wait: the filesystem commits them together */
	int rc = l3_ring_round(r, n, prep_fsync, (void *)fds, res);
	for (unsigned i = 0; i < n && !rc; i++)
		rc = res[i] < 0 ? res[i] : 0;
	free(res);
	return rc;
}

static void prep_fsync(struct io_uring_sqe *sqe, unsigned i, void *ctx)
{
	io_uring_prep_fsync(sqe, ((const int *)ctx)[i], 0);
}

int l3_ring_round(struct l3_ring *r, unsigned n, void (*prep)(struct io_uring_sqe *, unsigned, void *), void *ctx,
		  int *res)
{
	struct l3_sync_io *io = calloc(n ? n : 1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	int rc = 0;
	unsigned queued = 0;
	/* io-wq runs blocking requests (fsync, unlink, statx of a cold inode) on at most 4 workers per
	 * CPU: for this round as many as there are requests, so that they all wait at once (for the
	 * same journal commit, or for the device's reads) instead of a group of workers at a time
	 * (the limit is put back after) */
	unsigned lim[2] = { n, 0 }, had = 0;
	if (n > 1 && io_uring_register_iowq_max_workers(&r->ring, lim) == 0)
		had = lim[0];
	for (; queued < n; queued++) {
		struct io_uring_sqe *sqe = l3_ring_sqe(r);
		if (!sqe) {
			rc = -EAGAIN;
			break;
		}
		prep(sqe, queued, ctx);
		io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)&io[queued] | L3_IO_SYNC);
	}
	int lost = 0;
	for (unsigned i = 0; i < n; i++) {
		if (i >= queued || lost) {
			res[i] = i >= queued ? -ECANCELED : -EIO; /* not submitted, or its end unknown */
			continue;
		}
		int v = sync_wait(r, &io[i]);
		/* the ring failed: a completion may still name io (kept, not freed) */
		lost = !io[i].done;
		res[i] = lost ? (v < 0 ? v : -EIO) : io[i].res;
	}
	if (lost && !rc)
		rc = -EIO;
	if (had) {
		unsigned back[2] = { had, 0 };
		(void)io_uring_register_iowq_max_workers(&r->ring, back);
	}
	if (!lost)
		free(io);
	return rc;
}

void l3_fills_drain(struct sc_l3 *l3)
{
	/* every read still in flight on this thread's rings: their destinations belong to callers */
	pid_t tid = l3_tid();
	for (struct l3_ring *r = l3->rings; r; r = r->next)
		if (r->ok && r->tid == tid)
			drain(r);
}
