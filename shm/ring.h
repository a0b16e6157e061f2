/*
 * shm/ring.h — the commit ring directory and its single-producer/single-consumer rings (used by
 * lib/ring.c and lib/batcher.c). The protocol (who writes what, which orderings pair) is at the top of
 * shm/ring.c.
 *
 * Region layout (SHM_REGION_RINGS, offsets from the region start):
 *
 *   [ dir (4 KiB) | ctl[0..count) (384 B each, 4 KiB aligned in total) | data[0..count) ]
 *
 * data[i] is ring i's record space: ring_bytes (a power of two, >= 4096) bytes at
 * SHM_RING_DATA_OFF(count) + i * ring_bytes. Positions (head, tail) are 64-bit byte counts that
 * only grow; the byte at position p lives at data[p & (ring_bytes - 1)].
 */
#ifndef SC_SHM_RING_H
#define SC_SHM_RING_H

#include <errno.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "region.h"
#include "util.h"
#include "fault.h"
#include "readers.h"

#define SHM_RING_MAGIC 0x474e49524d4d4f43ull /* "COMMRING" little-endian */
#define SHM_RING_DIR_BYTES 4096u
#define SHM_RING_CTL_BYTES 384u
#define SHM_RING_REC_HDR 48u
#define SHM_RING_ALIGN SHM_CACHELINE
/* Empty LIVE rings are checked for a dead producer at most this often per consumer handle. */
#define SHM_RING_REAP_INTERVAL_NS 50000000ull
/* Limits of the creation parameters (shm/layout.c) that the ring directory's check repeats. */
#define SHM_RING_COUNT_MAX 4096u
#define SHM_RING_BYTES_MIN 4096u
#define SHM_RING_BYTES_MAX (1u << 30)

/* Ring states (bits 32..39 of the owner word). A zero-filled ring is FREE. (CLAIMING is no longer
 * written: a claim goes straight to LIVE; it is kept so that old values read as what they are.) */
enum { SHM_RING_FREE = 0, SHM_RING_CLAIMING = 1, SHM_RING_LIVE = 2, SHM_RING_CLOSED = 3 };

/* Record flags. PAD fills the tail end of the ring when the next record does not fit there. */
#define SHM_REC_FINISHED 0x1u
#define SHM_REC_ABORTED 0x2u
#define SHM_REC_TERMINAL_MASK 0x3u
#define SHM_REC_PAD 0x80000000u

/* The owner word: the producer's owner token (bits 0..31, shm/readers.h), state (32..39), claim
 * generation (40..63). Every claim bumps the generation, so a CAS on the whole word can never
 * succeed against a recycled state (ABA). */
static inline uint64_t shm_ring_owner(uint32_t gen, uint32_t state, uint32_t token)
{
	return ((uint64_t)(gen & 0xffffffu) << 40) | ((uint64_t)(state & 0xffu) << 32) | token;
}
static inline uint32_t shm_ring_owner_token(uint64_t w) { return (uint32_t)w; }
static inline uint32_t shm_ring_owner_state(uint64_t w) { return (uint32_t)(w >> 32) & 0xffu; }
static inline uint32_t shm_ring_owner_gen(uint64_t w) { return (uint32_t)(w >> 40); }

/* The directory: geometry (written once at format) and the consumer lock. */
struct shm_ring_dir {
	/* written by the creator before the arena is published; read-only afterwards */
	uint64_t magic;                   /* SHM_RING_MAGIC */
	uint32_t ring_count;              /* == header ring_count */
	uint32_t ring_bytes;              /* == header ring_bytes */
	uint64_t ctl_off;                 /* == SHM_RING_DIR_BYTES */
	uint64_t data_off;                /* == shm_ring_data_off(ring_count) */
	uint8_t pad0[SHM_CACHELINE - 32];
	/* the consumer lock: CAS by would-be consumers (see shm/ring.c) */
	_Atomic uint64_t consumer_id;     /* 0: none; else the consumer's owner token */
	_Atomic uint64_t consumer_pid;    /* for people only: the consumer's pid in its namespace */
	uint8_t pad1[SHM_CACHELINE - 16];
};
_Static_assert(offsetof(struct shm_ring_dir, consumer_id) == SHM_CACHELINE, "dir layout");
_Static_assert(sizeof(struct shm_ring_dir) == 2 * SHM_CACHELINE, "dir layout");
_Static_assert(sizeof(struct shm_ring_dir) <= SHM_RING_DIR_BYTES, "dir fits its page");

/* One ring's control block: ownership, producer and consumer each in their own 128-byte pair of
 * cache lines (the adjacent-line prefetcher pulls lines in pairs). */
struct shm_ring_ctl {
	/* ownership: CAS by claimers and by the reclaiming consumer. pid and claimed_ns are written
	 * (relaxed) after the claim's CAS, for people only: a reader may see the new owner with the
	 * previous producer's pid for a moment */
	_Atomic uint64_t owner;
	_Atomic uint64_t pid;             /* for people only: the producer's pid in its namespace */
	_Atomic uint64_t claimed_ns;      /* CLOCK_REALTIME of the claim */
	uint8_t pad0[2 * SHM_CACHELINE - 24];
	/* producer: written only by the owning producer */
	_Atomic uint64_t tail;            /* end of the published records (release) */
	uint8_t pad1[SHM_CACHELINE - 8];
	/* producer statistics, on their own line: the consumer polling tail never waits for them */
	_Atomic uint64_t records;         /* records ever published in this ring (relaxed, stats) */
	_Atomic uint64_t ring_full;       /* submits refused for lack of space (relaxed, stats) */
	uint8_t pad1b[SHM_CACHELINE - 16];
	/* consumer: written only by the holder of the consumer lock */
	_Atomic uint64_t head;            /* start of the oldest undelivered record (release) */
	_Atomic uint64_t consumed;        /* records ever delivered (relaxed, stats) */
	uint8_t pad2[2 * SHM_CACHELINE - 16];
};
_Static_assert(offsetof(struct shm_ring_ctl, tail) == 128, "ctl layout");
_Static_assert(offsetof(struct shm_ring_ctl, records) == 192, "ctl layout");
_Static_assert(offsetof(struct shm_ring_ctl, head) == 256, "ctl layout");
_Static_assert(sizeof(struct shm_ring_ctl) == SHM_RING_CTL_BYTES, "ctl layout");

/* A record: this header, then ntokens int32 tokens, padded to a multiple of 64 bytes. The
 * fields are atomics only so that the consumer reads each exactly once (relaxed): the ordering
 * comes from the tail. */
struct shm_ring_rec {
	_Atomic uint32_t len;             /* bytes of the record including padding; multiple of 64 */
	_Atomic uint32_t flags;           /* SHM_REC_* */
	_Atomic uint32_t ntokens;
	_Atomic uint32_t gen;             /* claim generation of the producer that wrote it */
	_Atomic uint64_t seq;             /* 1, 2, 3 ... per claim */
	_Atomic uint64_t request_id;
	_Atomic uint64_t session_id;
	_Atomic uint64_t total;           /* generated_token_count after this record */
	int32_t tokens[];
};
_Static_assert(offsetof(struct shm_ring_rec, seq) == 16, "record layout");
_Static_assert(offsetof(struct shm_ring_rec, tokens) == SHM_RING_REC_HDR, "record layout");
_Static_assert(sizeof(struct shm_ring_rec) == SHM_RING_REC_HDR, "record layout");

static inline uint64_t shm_ring_data_off(uint32_t count)
{
	uint64_t ctl = (uint64_t)count * SHM_RING_CTL_BYTES;
	return SHM_RING_DIR_BYTES + ((ctl + 4095) & ~4095ull);
}

/* Bytes a record of @ntokens tokens occupies. */
static inline uint64_t shm_ring_rec_bytes(uint64_t ntokens)
{
	return (SHM_RING_REC_HDR + 4 * ntokens + SHM_RING_ALIGN - 1) & ~(uint64_t)(SHM_RING_ALIGN - 1);
}

/* Most tokens one record can carry in a ring of @ring_bytes: a record is at most half the ring,
 * so an empty ring always has room for it even after padding out the tail end. */
static inline uint32_t shm_ring_max_tokens(uint32_t ring_bytes)
{
	return (ring_bytes / 2 - SHM_RING_REC_HDR) / 4;
}

/* What a producer submits. */
struct shm_ring_msg {
	uint64_t request_id, session_id, total;
	uint32_t flags;                   /* SHM_REC_FINISHED / SHM_REC_ABORTED */
	uint32_t ntokens;
	const int32_t *tokens;
};

/* What the consumer gets for one record: a validated copy of the header; tokens point into the
 * ring and stay valid until the cursor is closed. */
struct shm_ring_view {
	uint64_t request_id, session_id, total;
	uint32_t flags, ntokens;
	int32_t *tokens;
	uint32_t ring, gen;
	uint64_t seq;
};

/* Prefetch distances: the consumer's reads (shm_ring_cursor_next: record headers up to this many
 * bytes ahead, or four records when records are longer) and the producer's writes
 * (shm_ring_publish: a whole bulk of 8-token records and more, so the next bulk's lines are
 * already being taken back from the consumer). Measured with `stagecache bench ring`. */
#define SHM_RING_PREFETCH 1024u
#define SHM_RING_PREFETCH_W 4096u

/* A consumer's pass over one ring: shm_ring_cursor_open, _next until it returns 0 or an error
 * (or the caller has enough), then _close, which publishes what was taken. */
struct shm_ring_cursor {
	struct shm_ring_ctl *ctl;
	uint8_t *data;
	uint64_t size, mask;
	uint64_t start, head, tail, pf;
	uint32_t ring, n;
};

/* Process-local producer state (one per claimed ring; not shared between threads). */
struct shm_ring_prod {
	struct shm_ring_ctl *ctl;
	uint8_t *data;
	uint64_t size, mask;
	uint64_t tail;                    /* our copy of ctl->tail */
	uint64_t head_cache;              /* last ctl->head we read; refreshed only when short of room */
	uint64_t seq;                     /* seq of the last record */
	uint64_t records;                 /* our copy of ctl->records */
	uint64_t ring_full;               /* our copy of ctl->ring_full */
	uint64_t owner;                   /* the LIVE owner word we hold */
	uint64_t pfw;                     /* lines below this position were already prefetched for writing */
	uint32_t index, gen, max_tokens;
};

/* Process-local consumer state (one per arena handle). */
struct shm_ring_cons {
	struct shm_arena *a;              /* the handle whose token is our consumer id */
	uint64_t id;                      /* our owner token; 0 until first used */
	uint64_t next_reap_ns;
	uint32_t rr;                      /* ring the next poll starts at */
	uint32_t ring_count, ring_bytes;  /* geometry validated at shm_ring_poll_begin */
	int held;                         /* we hold the consumer lock */
	int reap_due;                     /* this poll: -1 not decided yet, 0 no, 1 check dead producers */
};

struct shm_ring_stat {
	uint32_t state, pid, gen, token;
	int corrupt;                      /* indices or geometry inconsistent */
	uint64_t head, tail, records, consumed, ring_full, claimed_ns;
};

/* Bytes the ring region needs for @count rings of @bytes record space each (shm/layout.c). */
uint64_t shm_ring_region_bytes(uint32_t count, uint32_t bytes);
/* Format the ring region at creation. */
int shm_ring_region_format(struct shm_arena *a);
/* Validate the directory against the header and the region; 0 or -EBADMSG. */
int shm_ring_dir_check(const struct shm_arena *a, struct shm_ring_dir **dir);

/* Claim a free (or reclaimable, empty) ring for @a's holder. 0, -ENOSPC (every ring is owned by
 * a live producer or still holds undelivered records), -EBADMSG, -ECHILD (@a is a forked child's
 * copy). Tests owners' liveness
 * (shm_token_alive: one fcntl per LIVE ring looked at). */
int shm_ring_claim(struct shm_arena *a, struct shm_ring_prod *p);
/* Give the ring up: LIVE -> CLOSED. The consumer delivers what is left, then frees it.
 * 0, or -ESTALE if the ring is no longer ours. */
int shm_ring_release(struct shm_ring_prod *p);
/* The image of a record header as the producer writes it (see shm_ring_write). */
struct shm_ring_rec_image {
	uint32_t len, flags, ntokens, gen;
	uint64_t seq, request_id, session_id, total;
};
_Static_assert(sizeof(struct shm_ring_rec_image) == SHM_RING_REC_HDR, "record image");
_Static_assert(offsetof(struct shm_ring_rec_image, seq) == offsetof(struct shm_ring_rec, seq), "record image");
_Static_assert(offsetof(struct shm_ring_rec_image, total) == offsetof(struct shm_ring_rec, total), "record image");

/* Typical decode batches are a handful of tokens: copy those in 16-byte moves, not a call. */
static inline void shm_ring_copy_tokens(int32_t *dst, const int32_t *src, uint32_t n)
{
	if (n > 32) {
		__builtin_memcpy(dst, src, (size_t)n * 4);
		return;
	}
	uint32_t j = 0;
	for (; j + 4 <= n; j += 4)
		__builtin_memcpy(dst + j, src + j, 16);
	for (; j < n; j++)
		dst[j] = src[j];
}

/*
 * Write one record (and the PAD before it when it does not fit before the end of the data) at
 * position @tail; return the position after it. The space beyond tail belongs to the producer
 * alone until R3, so the header goes in as one 48-byte image (a few wide stores: the fewer
 * stores per record, the more records' cache-line transfers overlap in the store buffer).
 */
static inline uint64_t shm_ring_write(struct shm_ring_prod *p, uint64_t tail, uint64_t seq, const struct shm_ring_msg *m)
{
	uint64_t need = shm_ring_rec_bytes(m->ntokens);
	uint64_t off = tail & p->mask;
	if (p->size - off < need) {
		struct shm_ring_rec_image pad = { .len = (uint32_t)(p->size - off), .flags = SHM_REC_PAD };
		__builtin_memcpy(p->data + off, &pad, sizeof(pad)); /* off is 64-aligned: fits */
		tail += p->size - off;
		off = 0;
	}
	uint8_t *dst = p->data + off;
#if defined(__SSE2__)
	/* three 16-byte stores straight from registers (the image struct would go through the stack) */
	_mm_storeu_si128((__m128i *)dst, _mm_set_epi32((int)p->gen, (int)m->ntokens, (int)m->flags, (int)need));
	_mm_storeu_si128((__m128i *)(dst + 16), _mm_set_epi64x((long long)m->request_id, (long long)seq));
	_mm_storeu_si128((__m128i *)(dst + 32), _mm_set_epi64x((long long)m->total, (long long)m->session_id));
#else
	struct shm_ring_rec_image h = { (uint32_t)need, m->flags, m->ntokens, p->gen, seq,
					m->request_id, m->session_id, m->total };
	__builtin_memcpy(dst, &h, sizeof(h));
#endif
	shm_ring_copy_tokens((int32_t *)(p->data + off + SHM_RING_REC_HDR), m->tokens, m->ntokens);
	return tail + need;
}

/* The position after a record of @ntokens written at @pos, its PAD included. */
static inline uint64_t shm_ring_advance(const struct shm_ring_prod *p, uint64_t pos, uint32_t ntokens)
{
	uint64_t need = shm_ring_rec_bytes(ntokens), off = pos & p->mask;
	return pos + (p->size - off < need ? p->size - off : 0) + need;
}

/* Ask for ownership of the line at @addr ahead of writing it (a hint: never faults). */
static inline void shm_ring_prefetch_write(const void *addr)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)addr)); /* a NOP where unsupported */
#else
	__builtin_prefetch(addr, 1, 3);
#endif
}

/* Publish everything written up to @tail (the records up to @seq, @n of them): R3. */
static inline void shm_ring_publish(struct shm_ring_prod *p, uint64_t tail, uint64_t seq, uint32_t n)
{
	shm_fault_point("ring.publish"); /* crash tests: records written, their tail not published */
	atomic_store_explicit(&p->ctl->tail, tail, memory_order_release); /* R3 */
	/* The lines the next records go to were last read by the consumer: start taking them back
	 * now, so those transfers overlap with the next submits instead of stalling them. Only
	 * space the consumer has released (below head_cache + size) is touched. */
	uint64_t want = tail + SHM_RING_PREFETCH_W, lim = p->head_cache + p->size;
	if (want > lim)
		want = lim;
	uint64_t pf = p->pfw > tail ? p->pfw : tail;
	for (; pf < want; pf += SHM_RING_ALIGN)
		shm_ring_prefetch_write(p->data + (pf & p->mask));
	p->pfw = pf;
	p->tail = tail;
	p->seq = seq;
	p->records += n;
	atomic_store_explicit(&p->ctl->records, p->records, memory_order_relaxed);
}

/* Refresh the cached head because [tail, @end) does not fit below it: 0, -EAGAIN (still no room;
 * the ring-full counter is incremented), -EBADMSG (the consumer index is impossible). */
int shm_ring_reserve_slow(struct shm_ring_prod *p, uint64_t end);

/* Append one record. Never blocks. 0, -EAGAIN (no room), -E2BIG (too many tokens), -EINVAL
 * (unknown flags), -EBADMSG (the consumer index is impossible). Inline: it runs per commit. */
static inline int shm_ring_submit(struct shm_ring_prod *p, const struct shm_ring_msg *m)
{
	if (m->flags & ~SHM_REC_TERMINAL_MASK)
		return -EINVAL;
	if (m->ntokens > p->max_tokens)
		return -E2BIG;
	uint64_t end = shm_ring_advance(p, p->tail, m->ntokens);
	if (end - p->head_cache > p->size) {
		int rc = shm_ring_reserve_slow(p, end);
		if (rc)
			return rc;
	}
	shm_ring_write(p, p->tail, p->seq + 1, m);
	shm_ring_publish(p, end, p->seq + 1, 1);
	return 0;
}

/* Several records under one tail store: check each with shm_ring_advance, make room for all
 * (shm_ring_reserve_slow), shm_ring_write each, then one shm_ring_publish (lib/ring.c does this
 * straight from the caller's commits). */

/* Take the consumer lock for @c. 0, -EBUSY (another live consumer holds it), -EBADMSG, -ECHILD
 * (@a is a forked child's copy). */
int shm_ring_consumer_acquire(struct shm_arena *a, struct shm_ring_cons *c);
/* Drop the consumer lock if @c holds it (never through a forked child's copy of @a). */
void shm_ring_consumer_release(struct shm_arena *a, struct shm_ring_cons *c);
/* Start a poll: validate the directory, take (or confirm) the consumer lock. 0, -EBUSY, -EBADMSG,
 * -ECHILD (@a is a forked child's copy). */
int shm_ring_poll_begin(struct shm_arena *a, struct shm_ring_cons *c, struct shm_ring_dir **dir);
/* Open ring @i of @d for reading (after shm_ring_poll_begin). Returns 1 when records are
 * pending, 0 when none (a drained ring of a closed or dead producer is reclaimed here), or
 * -EBADMSG when the ring's indices are impossible. */
int shm_ring_cursor_open(struct shm_ring_dir *d, uint32_t i, struct shm_ring_cons *c, struct shm_ring_cursor *cur);
/* Publish the records taken through @cur (release-store of head, R4). */
void shm_ring_cursor_close(struct shm_ring_cursor *cur);

/*
 * The next record of @cur into @v: 1, 0 when the ring holds no more, -EBADMSG when the record is
 * malformed (cur stays on it, so nothing past it is ever consumed). Inline: it runs per record.
 * Records are found by chasing lengths, which would serialise the cache misses on lines the
 * producer just wrote, so the headers of the next records are prefetched (at the positions they
 * would have if as long as this one). Only header lines: the token lines are left to whoever
 * reads them (the callback, where the hardware prefetcher follows a sequential read), so lines
 * nobody reads stay in the producer's cache instead of bouncing between the two.
 */
static inline int shm_ring_cursor_next(struct shm_ring_cursor *cur, struct shm_ring_view *v)
{
	for (;;) {
		uint64_t head = cur->head, avail = cur->tail - head;
		if (!avail)
			return 0;
		uint64_t off = head & cur->mask;
		struct shm_ring_rec *r = (struct shm_ring_rec *)(cur->data + off);
		uint32_t len = atomic_load_explicit(&r->len, memory_order_relaxed);
		/* Prefetch the headers of the next records, guessing they are as long as this one
		 * (a wrong guess costs one useless prefetch inside the published bytes). */
		uint64_t step = len >= SHM_RING_ALIGN && !(len % SHM_RING_ALIGN) && len <= cur->size ? len : SHM_RING_ALIGN;
		uint64_t pf_end = head + (step * 4 > SHM_RING_PREFETCH ? step * 4 : SHM_RING_PREFETCH);
		if (pf_end > cur->tail)
			pf_end = cur->tail;
		if (cur->pf <= head)
			cur->pf = head + step;
		for (; cur->pf < pf_end; cur->pf += step)
			__builtin_prefetch(cur->data + (cur->pf & cur->mask), 0, 3);
		uint32_t flags = atomic_load_explicit(&r->flags, memory_order_relaxed);
		if (len < SHM_RING_ALIGN || len % SHM_RING_ALIGN || len > cur->size - off || len > avail)
			return -EBADMSG;
		if (flags == SHM_REC_PAD) {
			if (len != cur->size - off)
				return -EBADMSG;
			cur->head = head + len;
			continue;
		}
		uint32_t nt = atomic_load_explicit(&r->ntokens, memory_order_relaxed);
		if ((flags & ~SHM_REC_TERMINAL_MASK) || nt > (len - SHM_RING_REC_HDR) / 4 ||
		    shm_ring_rec_bytes(nt) != len)
			return -EBADMSG;
		v->request_id = atomic_load_explicit(&r->request_id, memory_order_relaxed);
		v->session_id = atomic_load_explicit(&r->session_id, memory_order_relaxed);
		v->total = atomic_load_explicit(&r->total, memory_order_relaxed);
		v->flags = flags;
		v->ntokens = nt;
		v->tokens = r->tokens;
		v->ring = cur->ring;
		v->gen = atomic_load_explicit(&r->gen, memory_order_relaxed);
		v->seq = atomic_load_explicit(&r->seq, memory_order_relaxed);
		cur->head = head + len;
		cur->n++;
		return 1;
	}
}

/* A snapshot of ring @i. 0, -EINVAL (no such ring), -EBADMSG (bad directory). */
int shm_ring_stat(const struct shm_arena *a, uint32_t i, struct shm_ring_stat *st);

#endif
