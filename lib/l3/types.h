/*
 * lib/l3/types.h — the bottom of the L3 tier: the store's on-disk formats, the handle, and the
 * per-thread io_uring rings' structures (declarations only; each module of lib/l3/ has its own
 * header for its functions).
 *
 * On-disk layout of an L3 directory (all created 0700 / files 0600 unless opts say otherwise):
 *
 *   DIR/state                      shared counters (mmap'd, atomics; see struct l3_state); a shared
 *                                  directory keeps them per host instead (lib/l3/hosts.c)
 *   DIR/lock                       flock()ed by whoever evicts or reconciles (local mode)
 *   DIR/objects/<2 hex>/<32 hex digest>.sc3     one object per payload digest
 *   DIR/tmp/.tmp-<writer>.<n>      writes in flight, OFD-locked by their writer (never visible as
 *                                  objects; renamed into objects/, prefix/ or seg/ when written);
 *                                  <writer> = <host>.<pid>.<nonce>. One directory, so that what
 *                                  crashed writers left is found without listing the store
 *   DIR/objects/<2 hex>/.tmp-<writer>.<n>       the same, as stores made before DIR/tmp have them
 *   DIR/prefix/<2 hex>/<32 hex prefix key>.pfx  prefix index: (ns, token length, tokens) -> digest,
 *                                  with the token ids themselves (version 2), compared on every locate
 *   DIR/prefix/<2 hex>/.drop-<writer>.<n>       a prefix entry being judged by a dropper
 *   DIR/lengths/<decimal>          one empty file per token length present in the prefix index
 *   DIR/quarantine/<digest>.<ns>.sc3            objects that failed verification (ns: when)
 *   DIR/quarantine/<digest>.<ns>.seg            segments that failed verification
 *   DIR/segments                   the segment size for new objects (struct l3_segcfg; absent: whole objects)
 *   DIR/seg/<2 hex>/<32 hex digest>.seg         content-addressed segments of segmented objects
 *                                  (lib/l3/segstore.c; .tmp- files in flight, .gc- files being removed)
 *   DIR/quarantine/<digest>.mirror              a quarantine no arena was bound for: the next
 *                                               sc_l3_bind_arena invalidates its L2 mirrors
 *   DIR/shared                     present when several hosts share DIR (lib/l3/hosts.c)
 *   DIR/janitor                    the janitor lease (flock) and its record (lib/l3/janitor.c)
 *   DIR/janitor.log[.1]            what janitors evicted, one line each
 *   DIR/lru                        last use of every object, as the last janitor knew it (shared)
 *   DIR/access/<writer>.<n>        uses (fills, repeated puts) not yet merged by a janitor (shared;
 *                                  OFD-locked by its writer while it appends)
 *
 * An object file is a 4096-byte header block followed by the payload (the wire: section 0 then
 * section 1), so the payload starts at a 4 KiB boundary and an O_DIRECT read can land straight in
 * an aligned destination. The header block holds struct l3_obj_hdr, then the descriptor, then the
 * model identity, state identity and namespace strings; its checksum covers the whole block.
 * Objects are immutable once renamed into place: the only writers are put (tmp -> rename,
 * RENAME_NOREPLACE), eviction (unlink) and quarantine (rename away).
 *
 * A segmented object (format version 2, lib/l3/segstore.c) is the same header block followed by its
 * manifest instead of the payload: seg_count entries of struct l3_seg_ent (digest and length of
 * each segment, in payload order); the header's digest is still the whole payload's. The segment
 * bytes are in DIR/seg, one file per distinct segment, shared by every object naming it.
 */
#ifndef SC_LIB_L3_TYPES_H
#define SC_LIB_L3_TYPES_H

/* io_uring reads land in memory behind valgrind's back: tell memcheck the bytes are defined (a
 * few no-op instructions outside valgrind; nothing without its header). */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define L3_MARK_DEFINED(p, n) ((void)VALGRIND_MAKE_MEM_DEFINED((p), (n)))
#endif
#endif
#ifndef L3_MARK_DEFINED
#define L3_MARK_DEFINED(p, n) ((void)(p), (void)(n))
#endif

#include <dirent.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "../internal.h"
#include "../io_pin.h"

#define L3_OBJ_MAGIC 0x0a4a424f33435350ull /* "PSC3OBJ\n" */
#define L3_PFX_MAGIC 0x0a58465033435350ull /* "PSC3PFX\n" */
#define L3_STATE_MAGIC 0x0a54535333435350ull /* "PSC3SST\n" */
#define L3_FORMAT_VERSION 1u
#define L3_FORMAT_SEGMENTED 2u  /* an object whose body is a manifest of segments */
#define L3_OBJ_SEGMENTED 1u     /* l3_obj_hdr.flags of a version 2 object */
#define L3_HDR_BLOCK 4096u
#define L3_DURABLE_LENGTHS 64u  /* token lengths a handle remembers as durable */
#define L3_DIO_ALIGN 4096u      /* O_DIRECT: buffers, offsets and lengths aligned to this */
#define L3_LOW_WATER_PCT 85u    /* eviction over the budget goes down to this share of it */
#define L3_VISIBILITY_MS_DEFAULT 10000u /* sc_l3_opts.visibility_ms when 0 */
#define L3_HDR_FIXED 256u
#define L3_DESC_MAX 768u
#define L3_STR_MAX 1024u
#define L3_MAX_PAYLOAD (1ull << 40)
#define L3_MAX_PROBES 64
_Static_assert(sizeof(struct sc_kv_desc) <= L3_DESC_MAX, "a KV descriptor fits the header block");
_Static_assert(SC_L3_STR_MAX < L3_STR_MAX, "strings fit their budget");
#define L3_MAX_LENGTHS 4096
#define L3_CHUNK (1u << 20)     /* buffered payload reads of large objects are split in these */
#define L3_DIRECT_CHUNK (2u << 20) /* O_DIRECT payload reads of large objects are split in these */
#define L3_MAX_CHUNKS 64
#define L3_TOUCH_NS 1000000000ull /* LRU resolution: a fill touches a file last used longer ago */
#define L3_HOST_MAX 64u           /* SC_L3_HOST_ID_MAX */
#define L3_WRITER_MAX 96u
#define L3_ACCESS_BUF 128u        /* uses buffered per handle before one write to the access segment */
#define L3_ACCESS_FLUSH_NS 1000000000ull /* ... or when the oldest is this old */
#define L3_SEGMENT_MAX (64u << 10) /* an access segment is closed (a new one started) past this size */

/* One use of an object (fill, repeated put), as written to DIR/access/<writer>.<n>. */
struct l3_access {
	uint64_t lo, hi;           /* digest */
	uint64_t t_ns;             /* CLOCK_REALTIME of the use */
	uint64_t check;            /* XXH3-64 of the first 24 bytes: a torn tail is skipped */
};
_Static_assert(sizeof(struct l3_access) == 32, "l3 access record layout");

struct l3_obj_hdr {
	uint64_t magic;            /* L3_OBJ_MAGIC */
	uint32_t version;          /* L3_FORMAT_VERSION */
	uint32_t hdr_bytes;        /* L3_HDR_BLOCK: the payload's file offset */
	uint32_t kind;             /* payload kind (SC_PAYLOAD_*) */
	uint32_t token_count;
	uint64_t section_bytes[2]; /* kv, recurrent */
	uint64_t payload_bytes;    /* section_bytes[0] + section_bytes[1] */
	uint32_t desc_bytes;       /* descriptor bytes at L3_HDR_FIXED */
	uint16_t model_len;        /* strings follow the descriptor, in this order */
	uint16_t state_len;
	uint16_t ns_len;
	uint16_t reserved0;
	uint32_t flags;            /* 0; version 2: L3_OBJ_SEGMENTED */
	uint64_t digest_lo, digest_hi; /* payload digest (unseeded XXH3-128 of the wire) */
	uint64_t prefix_lo, prefix_hi; /* prefix key the object was put under */
	uint64_t created_ns;       /* CLOCK_REALTIME */
	uint64_t seg_count;        /* version 2: manifest entries (0 in version 1) */
	uint64_t seg_bytes;        /* version 2: the nominal segment size it was cut with */
	uint64_t seg_check;        /* version 2: XXH3-64 of the manifest */
	uint64_t check;            /* XXH3-64 of the 4096-byte block with this field zero */
	uint64_t cost_ns;          /* the prefix's compute cost, ns (sc_l3_put_cost; 0: none). Objects
				    * written before it have 0 here (it was zero padding, under check) */
	uint8_t pad[L3_HDR_FIXED - 144];
};
_Static_assert(sizeof(struct l3_obj_hdr) == L3_HDR_FIXED, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, section_bytes) == 24, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, desc_bytes) == 48, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, digest_lo) == 64, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, prefix_lo) == 80, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, check) == 128, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, cost_ns) == 136, "l3 object header layout");
_Static_assert(L3_HDR_FIXED + L3_DESC_MAX + 3 * L3_STR_MAX == L3_HDR_BLOCK, "header block budget");

/* One manifest entry of a segmented object: the segment's digest (unseeded XXH3-128 of its bytes,
 * its file name in DIR/seg) and length. */
struct l3_seg_ent {
	uint64_t lo, hi, len;
};
_Static_assert(sizeof(struct l3_seg_ent) == 24, "l3 manifest entry layout");
#define L3_SEG_MIN (64u << 10)   /* segment sizes: a multiple of 4 KiB in [L3_SEG_MIN, L3_SEG_MAX] */
#define L3_SEG_MAXSZ (1u << 30)
#define L3_SEG_MAX_COUNT (1u << 22) /* manifest entries of one object */

/*
 * A prefix-index entry: this 64-byte header, then (version 2) token_count token ids as LE int32,
 * a u32 namespace length and the namespace (no NUL): what the arena's location index needs to key
 * the entry when it scans the directory. check is XXH3-64 of the first 56 bytes (version 1), or
 * XXH3-64 of everything after the header seeded with that (version 2), so a flipped token id is a
 * corrupted entry, not a different prefix. Version 1 files (no token ids) are never served: their
 * prefix cannot be verified (a miss; left in place).
 */
#define L3_PFX_VERSION 2u
#define L3_PFX_MAX_TOKENS (1u << 24)
struct l3_pfx {
	uint64_t magic;            /* L3_PFX_MAGIC */
	uint32_t version;
	uint32_t token_count;
	uint64_t digest_lo, digest_hi;
	uint64_t prefix_lo, prefix_hi;
	uint64_t created_ns;
	uint64_t check;            /* XXH3-64 of the first 56 bytes */
};
_Static_assert(sizeof(struct l3_pfx) == 64, "l3 prefix entry layout");
_Static_assert(offsetof(struct l3_pfx, check) == 56, "l3 prefix entry layout");

/*
 * DIR/state: counters shared by every process using the directory, mmap'd MAP_SHARED. Each
 * counter is a relaxed atomic: they are statistics, nothing is ordered by them. objects/bytes are
 * recomputed from a scan at reconciliation and eviction (under the directory flock), and moved by
 * relaxed adds in between, so a concurrent scan can make them briefly approximate.
 */
struct l3_state {
	uint64_t magic;
	uint32_t version;
	uint32_t size;
	_Atomic uint64_t objects, bytes;
	_Atomic uint64_t fills, fill_bytes, fill_ns;
	_Atomic uint64_t verify_failures, quarantined, evictions, write_refusals;
	_Atomic uint64_t puts, put_dedup;
	_Atomic uint64_t key_collisions; /* prefix entries whose token ids differed from the caller's */
	_Atomic uint64_t fills_kept;     /* fills that read a kept file (no open; lib/l3/fill.c) */
	_Atomic uint64_t logical;  /* what the objects would take whole (header block + payload each) */
	_Atomic uint64_t segments, seg_bytes; /* segment files in DIR/seg and their bytes (within bytes) */
	_Atomic uint64_t seg_from_l2;    /* segment bytes of fills copied from L2, not read (lib/l3/segstore.c) */
	_Atomic uint64_t identity_mismatches; /* fills refused: another model or state identity's object */
	/* Reconciliation's cursor (lib/l3/reconcile.c; written under DIR/lock, read by the next
	 * holder): the subdirectory (0..255 objects/<xx>, 256..511 prefix/<xx>) and the readdir
	 * position in it where the next bounded step goes on. Any value is safe: a bad one restarts. */
	_Atomic uint64_t sweep_pos, sweep_off;
	_Atomic uint64_t sweep_rounds; /* whole rounds the steps completed (a test waits for one) */
	_Atomic uint64_t fill_starts;    /* fills submitted (lib/l3/fill.c) */
	/* The re-put journal (its own lines: every locate of an attached process reads repl_seq). A
	 * put whose prefix entry replaced one naming another digest takes ticket t = repl_seq++ and
	 * writes slot t % L3_REPL_SLOTS: seq 0, the prefix key, then seq t + 1 (release). Every
	 * arena's location index bound to this directory drops the entries of the keys it has not
	 * seen (lib/l3/locindex.c, sync_replaced), or all of them when it fell more than a ring behind. */
	_Atomic uint64_t repl_seq;
	uint8_t pad1[56];
	struct l3_repl {
		_Atomic uint64_t seq; /* ticket + 1 once lo, hi are written; 0 while being written */
		_Atomic uint64_t lo, hi; /* the prefix key (unseeded, as prefix files are named) */
	} repl[64];
	/* Per-host files only (shared mode, lib/l3/state.c): the store directory the file counts
	 * for, so that one left by a store that is gone is found and removed. dir_ino is written
	 * last (release); 0: not recorded, and then never removed. */
	struct l3_host_rec {
		uint64_t dir_ino;
		uint64_t mntns;        /* the recording process's mount namespace (its inode number) */
		uint64_t dir_btime_ns; /* the directory's birth time (0: the filesystem keeps none) */
		uint64_t dir_dev;      /* the filesystem it is on (st_dev) */
		char dir_path[1008];   /* the directory's real path, as that namespace sees it */
	} host;
	uint8_t pad[4096 - 256 - 64 * 24 - sizeof(struct l3_host_rec)];
};
#define L3_REPL_SLOTS 64u
_Static_assert(sizeof(struct l3_state) == 4096, "l3 state layout");
_Static_assert(offsetof(struct l3_state, repl_seq) == 192, "l3 state layout");
_Static_assert(offsetof(struct l3_state, repl) == 256, "l3 state layout");
_Static_assert(offsetof(struct l3_state, objects) == 16, "l3 state layout");
_Static_assert(offsetof(struct l3_state, sweep_pos) == 160, "l3 state layout");
_Static_assert(offsetof(struct l3_state, host) == 256 + 64 * 24, "l3 state layout");

/* ---- per-thread io_uring ---- */

/* What a fill's ring entry carries: the header block, a payload chunk, both at once (L3_IO_FIRST:
 * the header and chunk 0 in one vectored read, one device request for an O_DIRECT object), or the
 * open, stat and close of the object (on the ring when other fills are in flight). */
enum { L3_IO_SEG = 0, L3_IO_HDR = 1, L3_IO_PAYLOAD = 2, L3_IO_SYNC = 3, L3_IO_FIRST = 4, L3_IO_OPEN = 5,
       L3_IO_STATX = 6, L3_IO_CLOSE = 7 };
/* L3_IO_SEG's tag: a segment open or read of a segmented fill, and which of its window */
#define L3_SEG_TAG 0x1000u
#define L3_SEG_OPEN 0x0800u
#define L3_FILL_TAG_MASK 0x1fffu /* a ring entry's tag: 13 bits above the kind */

struct l3_ring;

/* One in-flight fill (a slot in its ring). */
struct l3_fill_op {
	struct sc_l3_fill_req *req;
	int fd;
	int direct;
	int64_t mtime_ns;          /* the file's mtime at open (LRU: touched again when older) */
	uint32_t align;            /* DIO offset alignment when direct */
	int pending;               /* SQEs in flight */
	int err;
	uint8_t *hdrbuf;           /* L3_HDR_BLOCK bytes, aligned */
	uint64_t hdr_got;
	uint64_t want;             /* payload bytes expected (from the location) */
	uint64_t chunk;            /* bytes per payload read (the last may be shorter) */
	uint32_t nchunks, hashed;  /* chunks; leading chunks already hashed */
	uint64_t done_mask;        /* chunks complete */
	uint64_t direct_mask;      /* chunks whose read in flight was submitted O_DIRECT */
	uint64_t cgot[L3_MAX_CHUNKS]; /* bytes read of each chunk */
	XXH3_state_t *hs;          /* payload digest, fed chunk by chunk in order */
	uint64_t file_bytes, ino;
	uint64_t t0;
	struct iovec iov[2];       /* L3_IO_FIRST: header block, chunk 0 (read when submitted) */
	struct l3_fill_op *next;   /* free list, waiting list or work list (one at a time) */
	int waiting;               /* on the ring's waiting list (submitted, no reading slot yet) */
	int started;               /* has a reading slot (not waiting for one) */
	int opened;                /* its file is open (kept, opened here, or both ring entries ended) */
	int pre_read;              /* its first read (header and chunk 0) was made while it waited */
	int in_work;               /* on the ring's work list (a chunk to hash, or every read ended) */
	char rel[48];              /* the object's path under objects/ (an open on the ring reads it) */
	int open_direct;           /* opened with O_DIRECT (l3->dio_at_open); this fill may read buffered */
	int fl;                    /* the file's status flags as last set (O_NONBLOCK, O_DIRECT): fcntl only to change them */
	int opened_direct;         /* as opened (what a kept file is filed under) */
	int on_ring;               /* opened, stat'ed and closed on the ring (other fills were in flight) */
	int ring_wait;             /* on_ring: of the open and the statx, how many have not completed */
	struct l3_kept *kept;      /* the kept file it reads (not closed at the end), or NULL */
	uint32_t kept_gen;         /* l3->kept_gen before its open (a file kept is stamped with it) */
	int hdr_known;             /* a kept file whose header was verified for this location: not read */
	struct statx stx;          /* on_ring: the file's size and mtime */
	int pin;                   /* io_pin_get's entry for req->dst (-1: not arena memory) */
	struct sc_digest ident;    /* the identities the header recorded (when it was read) */
	uint64_t cost_ns;          /* the compute cost the header recorded (when it was read) */
	uint64_t ahead;            /* payload bytes in flight on the ring when it was submitted */
	/* abandoned by its caller (l3_fill_abandon): when its last read completes, this is called
	 * instead of queueing the request for a reap (the caller's memory is released there) */
	void (*abandoned)(void *ctx, int result);
	void *abandon_ctx;
	struct l3_segfill *seg;    /* a segmented object's fill (lib/l3/segread.c), once its manifest showed */
};

/* An object file kept open for later fills of the same object (lib/l3/fill.c, "kept files"). */
struct l3_kept {
	uint64_t lo, hi;           /* the object's digest */
	uint64_t file_bytes, ino;
	uint64_t payload_bytes, sec0; /* what its header said when it was verified (the first fill) */
	uint32_t kind;
	struct sc_digest ident;    /* the identities its header recorded */
	uint64_t cost_ns;          /* the compute cost its header recorded */
	int64_t mtime_ns;          /* as at open, or as last touched (LRU clock) */
	uint64_t opened_ns;        /* kept at most SC_L3_FD_KEEP_MS from here */
	uint64_t used;             /* the ring's tick at its last use: the least recent is replaced */
	uint32_t gen;              /* l3->kept_gen when it was opened */
	int fd;                    /* -1: empty */
	int open_direct;
	int fl;                    /* its status flags as the last fill left them */
	int busy;                  /* a fill in flight reads it: another fill of it opens its own */
};
#define L3_KEPT_WAYS 8u /* ways per set; twice as many slots as files may be kept */
/* By default on a local filesystem: files kept only up to this size (an open of a cold inode costs
 * ~100-160 us on a local disk: more than reading 64 KiB, under a tenth of reading 4 MiB) ... */
#define L3_KEPT_LOCAL_FILE ((1ull << 20) + 4096)
/* ... and at most this many bytes of them per handle (the space a kept file of an object another
 * process removed holds until the sweep finds its last link gone) */
#define L3_KEPT_LOCAL_BYTES (256ull << 20)

/* A synchronous I/O on the ring (put path); completes when done is set. */
struct l3_sync_io {
	int done;
	int res;
};

struct l3_ring {
	struct io_uring ring;
	int ok;
	uint32_t depth;            /* fill slots (ops): twice io_depth */
	uint32_t io_depth;         /* fills reading at once (sc_l3_opts.queue_depth) */
	uint32_t reading, reading_max; /* fills started whose reads have not all ended; the most seen */
	uint32_t inflight;         /* fills in flight (waiting, reading or being verified) */
	struct l3_fill_op *wait_head, *wait_tail; /* submitted, waiting for a reading slot, in order */
	struct l3_fill_op *work_head; /* chunks to hash, fills to verify (after waiting ones start) */
	uint64_t inflight_bytes;   /* their payload bytes (the queue a new fill waits behind) */
	pid_t tid;
	struct l3_fill_op *ops;
	uint8_t *hdrbufs;
	XXH3_state_t *hstates;     /* one per op, 64-byte aligned */
	struct l3_fill_op *free_ops;
	struct sc_l3_fill_req *done_head, *done_tail; /* completed, not yet reaped (linked by _next) */
	uint32_t done_count;
	uint64_t reg_gen;          /* registered ranges generation seen */
	int reg_ok;
	int nreg;
	struct iovec reg[64];      /* what is registered: [0] the header buffers */
	struct sc_l3 *owner;
	struct l3_ring *next;      /* in the handle's list */
	struct sc_arena *seg_src;  /* during l3_fill_from: segments its L2 holds are copied, not read */
	struct l3_kept *kept;      /* kept_sets * L3_KEPT_WAYS slots, set by digest */
	uint32_t kept_sets;
	uint32_t kept_swept_gen;   /* owner->kept_gen at the last sweep */
	uint64_t kept_swept_ns;    /* when (a sweep runs at most once a second but on a new gen) */
	uint64_t kept_tick;
	struct io_pins pins;       /* the arena handles the ring reads into (lib/io_pin.h) */
	struct l3_ring *all_next;  /* in the process's list of rings (fork: a child closes its copies) */
};

/* A fill ring entry's user data: the kind (L3_IO_*), a tag (chunk or segment), the op's slot. */
static inline uint64_t l3_fill_ud(const struct l3_ring *r, const struct l3_fill_op *op, int kind, uint32_t t)
{
	return (uint64_t)kind | ((uint64_t)t << 3) | ((uint64_t)(op - r->ops) << 16);
}

#define L3_MAX_RANGES 8
struct l3_range {
	uint8_t *base;
	uint64_t len;
};

/* What the store's lower layers tell the arena bound to the handle, through functions the binding
 * installs (lib/bind.c) instead of calls up into the location index, L2 and the event stream:
 * objects gone (evicted), an object quarantined (its L2 mirrors go too), a prefix entry gone, a
 * prefix entry put (key, the object's digest, its tokens). */
struct l3_hooks {
	void (*objects_gone)(struct sc_arena *a, const struct sc_digest *d, size_t n);
	void (*quarantined)(struct sc_arena *a, struct sc_digest d);
	void (*prefix_gone)(struct sc_arena *a, struct sc_digest key);
	void (*stored)(struct sc_arena *a, struct sc_digest key, struct sc_digest d, uint32_t ntok);
};

struct sc_l3 {
	char *dir;
	int dirfd, objfd, pfxfd, lenfd, quarfd, lockfd;
	int tmpfd;                 /* DIR/tmp: every temp file of a put (-1: an older store opened NO_CREATE) */
	struct l3_state *st;
	struct sc_l3_opts opts;
	uint32_t file_mode, dir_mode;      /* exactly what we create (dir_mode has setgid with a gid) */
	uint32_t dio_mem_align, dio_off_align; /* 0: O_DIRECT unsupported */
	int dio_at_open;           /* FUSE: O_DIRECT must be given at open (the daemon sees only that) */
	uint64_t id;               /* unique per handle (thread-local ring cache key) */
	pthread_mutex_t mu;        /* rings list, ranges, lengths cache */
	struct l3_ring *rings;
	struct l3_range ranges[L3_MAX_RANGES];
	uint32_t nranges;
	_Atomic uint64_t reg_gen;
	struct sc_arena *arena;    /* bound arena: invalidate L2 mirrors on quarantine */
	const struct l3_hooks *hooks; /* set with arena (lib/bind.c) */
	uint32_t kept_max;         /* files all its rings keep open, at most (opts.fd_cache resolved) */
	_Atomic uint32_t kept_count; /* files its rings keep open now */
	uint64_t kept_file_max;    /* larger files are not kept (UINT64_MAX: any) */
	uint64_t kept_bytes_max;   /* their bytes, at most (UINT64_MAX: no limit) */
	_Atomic uint64_t kept_bytes; /* bytes of the files its rings keep open now */
	int kept_links;            /* a local filesystem: the sweep closes kept files with no link left */
	int syncfs_ok;             /* a local filesystem whose syncfs is real: large fsync rounds use it */
	_Atomic uint32_t kept_gen; /* moved by every removal through this handle: kept files reopen */
	/* token lengths present in the prefix index, sorted ascending */
	uint32_t *lengths;
	uint32_t nlengths;
	int64_t lengths_mtime_ns;
	int lengths_settled;
	/* token lengths whose DIR/lengths entry this handle knows durable (made or synced here; a
	 * young one found there is synced once: lib/l3/write.h), the last L3_DURABLE_LENGTHS */
	uint32_t durable_len[L3_DURABLE_LENGTHS];
	uint32_t ndurable_len;
	_Atomic uint32_t tmp_seq;
	uint64_t nonce;            /* random per handle, for tmp names (pids repeat across namespaces) */
	/* ---- identity, liveness, shared mode (lib/l3/hosts.c, lib/l3/janitor.c) ---- */
	int shared;                /* several hosts share DIR: per-host counters, janitor-only eviction */
	char host[L3_HOST_MAX + 1];
	char writer[L3_WRITER_MAX]; /* <host>.<pid>.<nonce>: names our temp files and access segments */
	int accfd;
	int state_private;         /* l3->st is calloc'd (no per-host state file could be made) */
	int host_fd;               /* shared mode: the per-host file, its shared lock held while open (-1: none) */
	/* janitor lease held across calls (SC_L3_JANITOR_KEEP): the locked fd and our epoch */
	pthread_mutex_t jan_mu;    /* one janitor call per handle at a time */
	int janfd;
	uint64_t jan_epoch;
	uint64_t jan_ino;
	/* under mu: uses not yet written to our access segment (shared mode) */
	struct l3_access acc[L3_ACCESS_BUF];
	uint32_t nacc;
	uint64_t acc_first_ns;
	int segfd;
	uint32_t segseq;
	uint64_t segoff;
	uint64_t grace_ns;         /* shared mode: visibility grace (opts.visibility_ms); local: 0 */
	/* under mu: the put side's estimate of the shared store's size (janitor record + our puts) */
	uint64_t est_bytes, est_read_ns;
	uint64_t dir_dev, dir_ino; /* identity of the directory (the arena's location index binds it) */
	uint64_t obj_dev;          /* st_dev of DIR/objects (a kept file's name check compares it) */
	struct sc_arena *ix_ok;    /* the last arena whose location index was found bound to us */
	int recon_changed;         /* our reconciliation quarantined objects or dropped prefix entries */
	/* ---- segments (lib/l3/segstore.c) ---- */
	int sgfd;                  /* DIR/seg, or -1 when the store never had segments */
	uint64_t seg_size;         /* segment size our put calls use (DIR/segments at open); 0: whole objects */
	/* ---- the fill time model (lib/l3/fill.c, sc_l3_fill_estimate): moving averages over this
	 * handle's fills, written by the threads that reap them (relaxed: a lost update is harmless) */
	_Atomic uint64_t est_fixed_ns;     /* what a small fill takes whatever its size */
	_Atomic uint64_t est_ps_per_byte;  /* what each byte adds (ps), queue included */
	_Atomic uint32_t est_samples;
	int est_pinned;                    /* test build: the model was set, measurements leave it */
};


/* Tell the bound arena (if any) through its hooks. */
static inline void l3_tell_objects_gone(struct sc_l3 *l3, const struct sc_digest *d, size_t n)
{
	if (l3->arena && l3->hooks && n)
		l3->hooks->objects_gone(l3->arena, d, n);
}
static inline void l3_tell_prefix_gone(struct sc_l3 *l3, struct sc_digest key)
{
	if (l3->arena && l3->hooks)
		l3->hooks->prefix_gone(l3->arena, key);
}
static inline void l3_tell_stored(struct sc_l3 *l3, struct sc_digest key, struct sc_digest d, uint32_t ntok)
{
	if (l3->arena && l3->hooks)
		l3->hooks->stored(l3->arena, key, d, ntok);
}
/* Kept files (lib/l3/fill.c) of every ring are reopened before their next use: an object file was
 * removed or moved through this handle. */
static inline void l3_kept_invalidate(struct sc_l3 *l3)
{
	atomic_fetch_add_explicit(&l3->kept_gen, 1, memory_order_release);
}

/* Counters in DIR/state (struct l3_state) are statistics: relaxed atomics. */
#define RELAXED memory_order_relaxed
#define ADD(field, v) atomic_fetch_add_explicit(&l3->st->field, (uint64_t)(v), RELAXED)
/* Subtract @v from a counter, stopping at 0 (counters of files others may have removed). */
static inline void l3_count_sub(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, RELAXED);
	while (!atomic_compare_exchange_weak_explicit(a, &cur, cur > v ? cur - v : 0, RELAXED, RELAXED))
		;
}

#endif
