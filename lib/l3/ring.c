/*
 * lib/l3/ring.c — one io_uring per thread per handle, and what lives on it between fills: the
 * registered buffers, the arena locks it pins (lib/io_pin.h) and the kept files.
 *
 * Rings. Each thread using a handle gets its own ring (created on first use, recorded in the
 * handle's list and in a small thread-local cache keyed by the handle's unique id). A ring is
 * used only by the thread that created it, so it needs no lock; a forked child sees a different
 * thread id and creates its own, and at fork() the child closes its copies of every ring (their
 * mappings are not inherited: MADV_DONTFORK), so that a ring of the parent, and the arena locks it
 * holds, go when the parent dies. Each ring holds the liveness lock of every arena it reads into
 * (lib/io_pin.h): a fill that the ring cannot pin fails before it reads. Registered buffers: ring-owned header buffers, plus the ranges
 * given to sc_l3_register_memory (in pieces of at most 1 GiB), re-registered lazily when the
 * handle's range generation moves; where the kernel refuses, plain reads are used.
 *
 * Kept files. An open (and its close) is a round trip to the metadata server on a network
 * filesystem (~1 ms on ceph-fuse), more than reading a 64 KiB object. Each ring keeps the files of
 * objects it filled successfully open (an 8-way set-associative table by digest, least recently
 * used replaced; at most opts.fd_cache files for all of a handle's rings, in twice as many slots
 * per ring so that a set rarely overflows), and a later fill of the same object reads the kept file
 * with no open, stat or close. What makes this safe: objects are immutable under their name and
 * every fill verifies the bytes against the digest as before, so a kept file can only be as right
 * as a fresh open. What it can change: an object removed by another process or host is still read
 * through a kept file (a hit where a fresh open would miss) until the entry is dropped. Hence: on a
 * kernel filesystem, where a lookup costs a microsecond, each use first checks that the name still
 * names the kept inode (fstatat; a removed or replaced object reopens or misses exactly as
 * before). On FUSE, where that lookup is the round trip being saved, there is no such check: every
 * removal through this handle moves kept_gen and every ring reopens, and a file is kept at most
 * SC_L3_FD_KEEP_MS after its open — so an object another process or host removed may still be
 * read (and verified) here for that long, and its disk space stays pinned as long. Idle kept files
 * that are stale (a removal moved kept_gen, or older than SC_L3_FD_KEEP_MS) are closed by a sweep
 * at the ring's next fill (at once in the thread that removed the object), so a removed object's
 * space is not held until its slot happens to be reused; on a local filesystem the sweep also
 * closes idle kept files whose object lost its last link (an fstat each: another process removed
 * it). By default (fd_cache 0) on a local filesystem only small files are kept, under a byte
 * budget (L3_KEPT_LOCAL_*: what a process that stops filling may hold of removed objects); on a
 * kernel network filesystem (CephFS, NFS) none. A fill that fails
 * -EBADMSG quarantines the object only if its name still names the file that was read (a kept
 * file, or a file replaced under the fill, is not what another process may have put there since). A fill
 * that fails closes its kept file. A kept file's header was verified by the fill that kept it: a
 * later fill for the same location reads only the payload (one request, not two: on FUSE the
 * vectored header+payload read is two requests to the daemon) and still verifies its digest and
 * length. A kept file in use by a fill in flight is not shared (the
 * other fill opens its own: O_DIRECT is switched per fill on the open file).
 *
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../shm/fault.h"
#include "../xxh.h"
#include "types.h"
#include "files.h"
#include "ring.h"
#include "quarantine.h"

#define REG_CHUNK (1ull << 30)
#define MAX_IOVECS 64

static __thread struct {
	uint64_t id;
	struct l3_ring *r;
} tls_cache[4];
static __thread unsigned tls_next;
/* This thread's id, asked once (glibc's gettid is a system call; every submit and reap wants it).
 * A forked child's thread inherits the copy: all_child clears it. */
static __thread pid_t tls_tid;
static pthread_once_t all_once = PTHREAD_ONCE_INIT;
static void all_atfork(void);

pid_t l3_tid(void)
{
	if (!tls_tid) {
		pthread_once(&all_once, all_atfork); /* before any id is cached: a fork clears it */
		tls_tid = gettid();
	}
	return tls_tid;
}

/* Every ring of this process, for fork (guarded by all_mu, held across fork()). */
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct l3_ring *all_rings;

static void all_prepare(void)
{
	pthread_mutex_lock(&all_mu);
}

static void all_parent(void)
{
	pthread_mutex_unlock(&all_mu);
}

/* The child's copies of the rings are not its own: their descriptors go at once (a copy would keep
 * the parent's ring, and the arena locks it holds, alive after the parent's death). The copies
 * are never used (tid 0 matches no thread) and their memory is freed when their handle closes. */
static void all_child(void)
{
	for (struct l3_ring *r = all_rings; r; r = r->all_next) {
		if (r->ok)
			close(r->ring.ring_fd);
		r->ok = 0;
		r->tid = 0;
		io_pins_forget(&r->pins);
	}
	all_rings = NULL;
	tls_tid = 0; /* the child's own id on next use */
	pthread_mutex_unlock(&all_mu);
}

static void all_atfork(void)
{
	(void)pthread_atfork(all_prepare, all_parent, all_child);
}

static void l3_ring_track(struct l3_ring *r, int add)
{
	pthread_once(&all_once, all_atfork);
	pthread_mutex_lock(&all_mu);
	struct l3_ring **p = &all_rings;
	while (*p && *p != r)
		p = &(*p)->all_next;
	if (add && !*p) {
		r->all_next = all_rings;
		all_rings = r;
	} else if (!add && *p) {
		*p = r->all_next;
	}
	pthread_mutex_unlock(&all_mu);
}

/* ---- rings ---- */

static void ring_register_locked(struct sc_l3 *l3, struct l3_ring *r);

static struct l3_ring *ring_create(struct sc_l3 *l3)
{
	struct l3_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->io_depth = l3->opts.queue_depth;
	r->depth = 2 * r->io_depth; /* as many again wait, or are verified, while queue_depth read */
	r->tid = l3_tid();
	r->ops = calloc(r->depth, sizeof(*r->ops));
	r->hdrbufs = aligned_alloc(L3_DIO_ALIGN, (size_t)r->depth * L3_HDR_BLOCK);
	r->hstates = aligned_alloc(64, (size_t)r->depth * sizeof(XXH3_state_t));
	if (!r->ops || !r->hdrbufs || !r->hstates)
		goto fail;
	/* a reading fill is a header read plus up to L3_MAX_CHUNKS payload reads: size the CQ for all
	 * of them, and a close for every slot */
	unsigned entries = r->io_depth * 2 + 8, cq = r->io_depth * (L3_MAX_CHUNKS + 1) + r->depth + 64;
	struct io_uring_params p = { .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN |
					      IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP,
				     .cq_entries = cq };
	if (io_uring_queue_init_params(entries, &r->ring, &p) < 0) {
		p = (struct io_uring_params){ .flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP, .cq_entries = cq };
		if (io_uring_queue_init_params(entries, &r->ring, &p) < 0)
			goto fail;
	}
	r->ok = 1;
	(void)io_uring_ring_dontfork(&r->ring); /* a child's copy of the mappings would keep the ring */
	l3_ring_track(r, 1);
	for (uint32_t i = 0; i < r->depth; i++) {
		r->ops[i].hdrbuf = r->hdrbufs + (size_t)i * L3_HDR_BLOCK;
		r->ops[i].hs = &r->hstates[i];
		r->ops[i].fd = -1;
		r->ops[i].next = r->free_ops;
		r->free_ops = &r->ops[i];
	}
	r->owner = l3;
	r->reg_gen = UINT64_MAX;
	if (l3->kept_max) {
		r->kept_sets = (2 * l3->kept_max + L3_KEPT_WAYS - 1) / L3_KEPT_WAYS;
		r->kept = calloc((size_t)r->kept_sets * L3_KEPT_WAYS, sizeof(*r->kept));
		if (!r->kept)
			r->kept_sets = 0; /* no kept files: fills open every time */
		for (uint32_t i = 0; r->kept && i < r->kept_sets * L3_KEPT_WAYS; i++)
			r->kept[i].fd = -1;
	}
	ring_register_locked(l3, r);
	return r;
fail:
	free(r->ops);
	free(r->hdrbufs);
	free(r->hstates);
	free(r);
	return NULL;
}

static void ring_free(struct l3_ring *r)
{
	l3_ring_track(r, 0);
	if (r->ok)
		io_uring_queue_exit(&r->ring); /* reads still in flight (a failed drain) keep our pins */
	io_pins_forget(&r->pins);
	/* a segmented fill's state stays allocated after a failed drain: an open still on the ring
	 * may read a path in it. The fills' files: of this thread's ring (a failed drain), and of a
	 * forked child's copy (tid 0: its own copies of the descriptors, of fills the parent had in
	 * flight at the fork; nothing else closes them); another thread's ring keeps its files for
	 * that thread's reads still in flight. */
	for (uint32_t i = 0; i < r->depth; i++)
		if (r->ops[i].fd >= 0 && !r->ops[i].kept && (r->tid == l3_tid() || !r->tid))
			close(r->ops[i].fd);
	/* kept files too in a forked child (its own copies of the descriptors: nothing else closes them) */
	for (uint32_t i = 0; i < r->kept_sets * L3_KEPT_WAYS; i++)
		if (r->kept[i].fd >= 0)
			close(r->kept[i].fd);
	free(r->kept);
	free(r->ops);
	free(r->hdrbufs);
	free(r->hstates);
	free(r);
}

/* This thread's ring of @l3, made on first use when @create (else NULL until then). */
static struct l3_ring *ring_of_thread(struct sc_l3 *l3, int create)
{
	pid_t tid = l3_tid();
	for (int i = 0; i < 4; i++)
		if (tls_cache[i].id == l3->id && tls_cache[i].r && tls_cache[i].r->tid == tid)
			return tls_cache[i].r;
	pthread_mutex_lock(&l3->mu);
	struct l3_ring *r = l3->rings;
	while (r && r->tid != tid)
		r = r->next;
	if (!r && create && (r = ring_create(l3))) {
		r->next = l3->rings;
		l3->rings = r;
	}
	pthread_mutex_unlock(&l3->mu);
	if (r) {
		unsigned k = tls_next++ % 4;
		tls_cache[k].id = l3->id;
		tls_cache[k].r = r;
	}
	return r;
}

struct l3_ring *l3_ring_get(struct sc_l3 *l3)
{
	return ring_of_thread(l3, 1);
}

struct l3_ring *l3_ring_find(struct sc_l3 *l3)
{
	return ring_of_thread(l3, 0);
}

void l3_rings_free(struct sc_l3 *l3)
{
	struct l3_ring *r = l3->rings;
	while (r) {
		struct l3_ring *n = r->next;
		for (int i = 0; i < 4; i++)
			if (tls_cache[i].r == r)
				tls_cache[i].id = 0, tls_cache[i].r = NULL;
		ring_free(r);
		r = n;
	}
	l3->rings = NULL;
}

/* (Re-)register the header buffers and the handle's memory ranges. Caller holds l3->mu. */
static void ring_register_locked(struct sc_l3 *l3, struct l3_ring *r)
{
#ifdef SC_TEST_HOOKS
	/* the rule checked in the test build: a lock nobody holds is a caller without it (one held by
	 * another thread passes unseen) */
	if (pthread_mutex_trylock(&l3->mu) == 0) {
		pthread_mutex_unlock(&l3->mu);
		shm_fault_broken(__func__);
	}
#endif
	uint64_t gen = atomic_load_explicit(&l3->reg_gen, RELAXED);
	struct iovec iov[MAX_IOVECS];
	int n = 0;
	iov[n++] = (struct iovec){ r->hdrbufs, (size_t)r->depth * L3_HDR_BLOCK };
	for (uint32_t i = 0; i < l3->nranges; i++)
		for (uint64_t off = 0; off < l3->ranges[i].len && n < MAX_IOVECS; off += REG_CHUNK) {
			uint64_t len = l3->ranges[i].len - off < REG_CHUNK ? l3->ranges[i].len - off : REG_CHUNK;
			iov[n++] = (struct iovec){ l3->ranges[i].base + off, len };
		}
	if (r->reg_ok)
		io_uring_unregister_buffers(&r->ring);
	r->reg_ok = io_uring_register_buffers(&r->ring, iov, (unsigned)n) == 0;
	if (!r->reg_ok && n > 1) /* the kernel refused the ranges: keep at least the header buffers */
		r->reg_ok = io_uring_register_buffers(&r->ring, iov, (n = 1)) == 0;
	r->nreg = r->reg_ok ? n : 0;
	memcpy(r->reg, iov, sizeof(iov[0]) * (size_t)r->nreg);
	r->reg_gen = gen;
}

void l3_ring_register(struct sc_l3 *l3, struct l3_ring *r)
{
	/* a stale generation only delays the use of a new range by one call */
	if (atomic_load_explicit(&l3->reg_gen, RELAXED) == r->reg_gen)
		return;
	pthread_mutex_lock(&l3->mu);
	ring_register_locked(l3, r);
	pthread_mutex_unlock(&l3->mu);
}

int sc_l3_register_memory(struct sc_l3 *l3, void *base, uint64_t len)
{
	if (!l3 || !base || !len)
		return -EINVAL;
	pthread_mutex_lock(&l3->mu);
	int rc = 0;
	for (uint32_t i = 0; i < l3->nranges; i++)
		if (l3->ranges[i].base == base && l3->ranges[i].len == len)
			goto out;
	if (l3->nranges == L3_MAX_RANGES) {
		rc = -ENOSPC;
		goto out;
	}
	l3->ranges[l3->nranges++] = (struct l3_range){ base, len };
	atomic_fetch_add_explicit(&l3->reg_gen, 1, RELAXED); /* read by the owner thread under l3->mu */
out:
	pthread_mutex_unlock(&l3->mu);
	return rc;
}

/* Registered buffer index holding [p, p+len), or -1. */
int l3_ring_fixed_index(struct l3_ring *r, const void *p, uint64_t len)
{
	const uint8_t *b = p;
	for (int i = 0; i < r->nreg; i++) {
		const uint8_t *base = r->reg[i].iov_base;
		if (b >= base && b + len <= base + r->reg[i].iov_len)
			return i;
	}
	return -1;
}

#ifdef SC_TEST_HOOKS
_Atomic uint64_t l3_test_no_sqe;
#endif

struct io_uring_sqe *l3_ring_sqe(struct l3_ring *r)
{
#ifdef SC_TEST_HOOKS
	uint64_t none = atomic_load_explicit(&l3_test_no_sqe, RELAXED);
	if (none) {
		atomic_store_explicit(&l3_test_no_sqe, none >> 1, RELAXED);
		if (none & 1)
			return NULL; /* as a full queue whose submit io_uring_enter refused (-EAGAIN, -EBUSY) */
	}
#endif
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	if (!sqe) {
		io_uring_submit(&r->ring);
		sqe = io_uring_get_sqe(&r->ring);
	}
	return sqe;
}

/* ---- kept files ---- */

static struct l3_kept *kept_set(struct l3_ring *r, uint64_t lo)
{
	return &r->kept[(lo % r->kept_sets) * L3_KEPT_WAYS];
}

static void kept_drop(struct l3_ring *r, struct l3_kept *k)
{
	close(k->fd);
	k->fd = -1;
	k->busy = 0;
	atomic_fetch_sub_explicit(&r->owner->kept_count, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&r->owner->kept_bytes, k->file_bytes, memory_order_relaxed);
}

/* Would one more kept file of @bytes go over the handle's limits? */
static int kept_full(const struct sc_l3 *l3, uint64_t bytes)
{
	return atomic_load_explicit(&l3->kept_count, memory_order_relaxed) >= l3->kept_max ||
	       atomic_load_explicit(&l3->kept_bytes, memory_order_relaxed) + bytes > l3->kept_bytes_max;
}

/* Has @k's object lost its last name (removed by another process: its space is held by us)? */
static int kept_unlinked(const struct l3_kept *k)
{
	struct stat sb;
	return fstat(k->fd, &sb) == 0 && sb.st_nlink == 0;
}

/* The least recently used idle kept file of the whole table (it makes room at the limit). */
static struct l3_kept *kept_oldest(struct l3_ring *r)
{
	struct l3_kept *v = NULL;
	for (uint32_t i = 0; i < r->kept_sets * L3_KEPT_WAYS; i++) {
		struct l3_kept *k = &r->kept[i];
		if (k->fd >= 0 && !k->busy && (!v || k->used < v->used))
			v = k;
	}
	return v;
}

/* Is @k too old to use: opened before a removal through this handle, or SC_L3_FD_KEEP_MS ago? */
static int kept_stale(struct sc_l3 *l3, const struct l3_kept *k, uint64_t now)
{
	return k->gen != atomic_load_explicit(&l3->kept_gen, memory_order_acquire) ||
	       now - k->opened_ns > (uint64_t)SC_L3_FD_KEEP_MS * 1000000ull;
}

int l3_fill_bad(struct sc_l3 *l3, const struct l3_fill_op *op)
{
	const struct sc_location *loc = op->req->loc;
	struct stat a, b;
	/* the file read is the descriptor's: a statx beside a ring's open may have seen another */
	if (fstat(op->fd, &a) < 0 || l3_statat(l3->objfd, op->rel, &b) < 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino)
		return -ENOENT; /* what was read is not (any longer) the object under its name: a miss */
	ADD(verify_failures, 1);
	l3_quarantine(l3, loc->digest.lo, loc->digest.hi, EBADMSG);
	return -EBADMSG;
}

/* Does @rel still name kept file @k? One fstatat through DIR/objects. (l3_statat, which
 * l3_fill_bad uses, opens the subdirectory first, to refuse a link planted in its place; here such
 * a link can only make the check pass by leading to @k's own inode on the objects' filesystem, the
 * file read anyway, whose bytes every fill verifies. Opening the subdirectory made it three system
 * calls, a third of the CPU time of a 64 KiB fill.) Not on FUSE (see the top). */
static int kept_named(struct sc_l3 *l3, const struct l3_kept *k, const char *rel)
{
	struct stat sb;
	return l3->dio_at_open || (fstatat(l3->objfd, rel, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
				   (uint64_t)sb.st_dev == l3->obj_dev && (uint64_t)sb.st_ino == k->ino &&
				   (uint64_t)sb.st_size == k->file_bytes);
}

/* Close the idle kept files that are stale (opened before a removal moved kept_gen, or longer ago
 * than SC_L3_FD_KEEP_MS) and, on a local filesystem, those whose object was removed by another
 * process (an fstat each: their space is freed): on a new generation at once, else at most once a
 * second. */
void l3_kept_sweep(struct sc_l3 *l3, struct l3_ring *r)
{
	uint32_t gen = atomic_load_explicit(&l3->kept_gen, memory_order_acquire);
	uint64_t now = shm_now_ns();
	if (!r->kept_sets || (gen == r->kept_swept_gen && now - r->kept_swept_ns < SHM_NS_PER_SEC))
		return;
	r->kept_swept_gen = gen;
	r->kept_swept_ns = now;
	for (uint32_t i = 0; i < r->kept_sets * L3_KEPT_WAYS; i++) {
		struct l3_kept *k = &r->kept[i];
		if (k->fd >= 0 && !k->busy && (kept_stale(l3, k, now) || (l3->kept_links && kept_unlinked(k))))
			kept_drop(r, k);
	}
}

void l3_kept_forget(struct sc_l3 *l3)
{
	l3_kept_invalidate(l3);
	struct l3_ring *r = l3_ring_find(l3); /* this thread's ring, whether cached or not */
	if (r)
		l3_kept_sweep(l3, r); /* its own table: no lock */
}

/* The kept file of object (@lo, @hi) at @rel, opened as @open_direct asks, marked busy; NULL: none
 * usable (a stale one is closed on the way). */
struct l3_kept *l3_kept_take(struct sc_l3 *l3, struct l3_ring *r, uint64_t lo, uint64_t hi, const char *rel,
				 int open_direct)
{
	if (!r->kept_sets)
		return NULL;
	struct l3_kept *set = kept_set(r, lo);
	for (uint32_t w = 0; w < L3_KEPT_WAYS; w++) {
		struct l3_kept *k = &set[w];
		if (k->fd < 0 || k->lo != lo || k->hi != hi || k->busy)
			continue;
		if (kept_stale(l3, k, shm_now_ns()) || !kept_named(l3, k, rel)) {
			kept_drop(r, k);
			return NULL;
		}
		if (k->open_direct != open_direct)
			return NULL;
		k->busy = 1;
		k->used = ++r->kept_tick;
		return k;
	}
	return NULL;
}

/* Keep @op's file (its fill succeeded) in an empty slot of its set, or in place of the set's least
 * recently used idle file; at the limit the table's least recently used idle file is closed first.
 * 1: kept (the caller must not close it), 0: not kept. */
int l3_kept_keep(struct l3_ring *r, struct l3_fill_op *op, uint64_t lo, uint64_t hi)
{
	if (!r->kept_sets || op->file_bytes > r->owner->kept_file_max)
		return 0;
	struct l3_kept *set = kept_set(r, lo), *v = NULL;
	for (uint32_t w = 0; w < L3_KEPT_WAYS; w++) {
		struct l3_kept *k = &set[w];
		if (k->fd >= 0 && k->lo == lo && k->hi == hi)
			return 0; /* kept already (another fill's file is in use): close ours */
		if (k->busy)
			continue;
		if (k->fd < 0) {
			if (!v || v->fd >= 0)
				v = k; /* an empty entry first */
		} else if (!v || (v->fd >= 0 && k->used < v->used)) {
			v = k;
		}
	}
	if (!v)
		return 0;
	if (v->fd >= 0)
		kept_drop(r, v);
	while (kept_full(r->owner, op->file_bytes)) {
		struct l3_kept *old = kept_oldest(r);
		if (!old)
			return 0;
		kept_drop(r, old);
	}
	atomic_fetch_add_explicit(&r->owner->kept_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->owner->kept_bytes, op->file_bytes, memory_order_relaxed);
	const struct sc_location *loc = op->req->loc;
	*v = (struct l3_kept){ .lo = lo, .hi = hi, .file_bytes = op->file_bytes, .ino = op->ino,
			       .payload_bytes = loc->payload_bytes, .sec0 = loc->sec_len[0], .kind = loc->kind, .ident = op->ident,
			       .cost_ns = op->cost_ns,
			       .mtime_ns = op->mtime_ns,
			       .opened_ns = op->t0, .used = ++r->kept_tick, .gen = op->kept_gen, .fd = op->fd,
			       .open_direct = op->opened_direct, .fl = op->fl };
	return 1;
}

/* The end of a fill that read kept file @k: idle again, or closed when the fill failed. */
void l3_kept_release(struct l3_ring *r, struct l3_kept *k, int rc, int64_t mtime_ns)
{
	if (rc) {
		kept_drop(r, k);
		return;
	}
	k->mtime_ns = mtime_ns;
	k->busy = 0;
}
