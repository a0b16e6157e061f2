/*
 * lib/l3_priv.h — private to lib/l3_*.c and lib/restore.c: the L3 store's on-disk format, the
 * handle, and the per-thread io_uring rings.
 *
 * On-disk layout of an L3 directory (all created 0700 / files 0600 unless opts say otherwise):
 *
 *   DIR/state                      shared counters (mmap'd, atomics; see struct l3_state); a shared
 *                                  directory keeps them per host instead (lib/l3_shared.c)
 *   DIR/lock                       flock()ed by whoever evicts or reconciles (local mode)
 *   DIR/objects/<2 hex>/<32 hex digest>.sc3     one object per payload digest
 *   DIR/objects/<2 hex>/.tmp-<writer>.<n>       writes in flight, OFD-locked by their writer (never
 *                                               visible as objects); <writer> = <host>.<pid>.<nonce>
 *   DIR/prefix/<2 hex>/<32 hex prefix key>.pfx  prefix index: (ns, token length, tokens) -> digest,
 *                                  with the token ids themselves (version 2), compared on every locate
 *   DIR/prefix/<2 hex>/.drop-<writer>.<n>       a prefix entry being judged by a dropper
 *   DIR/lengths/<decimal>          one empty file per token length present in the prefix index
 *   DIR/quarantine/<digest>.<ns>.sc3            objects that failed verification (ns: when)
 *   DIR/quarantine/<digest>.<ns>.seg            segments that failed verification
 *   DIR/segments                   the segment size for new objects (struct l3_segcfg; absent: whole objects)
 *   DIR/seg/<2 hex>/<32 hex digest>.seg         content-addressed segments of segmented objects
 *                                  (lib/l3_seg.c; .tmp- files in flight, .gc- files being removed)
 *   DIR/quarantine/<digest>.mirror              a quarantine no arena was bound for: the next
 *                                               sc_l3_bind_arena invalidates its L2 mirrors
 *   DIR/shared                     present when several hosts share DIR (lib/l3_shared.c)
 *   DIR/janitor                    the janitor lease (flock) and its record (lib/l3_janitor.c)
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
 * A segmented object (format version 2, lib/l3_seg.c) is the same header block followed by its
 * manifest instead of the payload: seg_count entries of struct l3_seg_ent (digest and length of
 * each segment, in payload order); the header's digest is still the whole payload's. The segment
 * bytes are in DIR/seg, one file per distinct segment, shared by every object naming it.
 */
#ifndef SC_LIB_L3_PRIV_H
#define SC_LIB_L3_PRIV_H

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

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <dirent.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <xxhash.h>

#include "internal.h"
#include "io_pin.h"

#define L3_OBJ_MAGIC 0x0a4a424f33435350ull /* "PSC3OBJ\n" */
#define L3_PFX_MAGIC 0x0a58465033435350ull /* "PSC3PFX\n" */
#define L3_STATE_MAGIC 0x0a54535333435350ull /* "PSC3SST\n" */
#define L3_FORMAT_VERSION 1u
#define L3_FORMAT_SEGMENTED 2u  /* an object whose body is a manifest of segments */
#define L3_OBJ_SEGMENTED 1u     /* l3_obj_hdr.flags of a version 2 object */
#define L3_HDR_BLOCK 4096u
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
	uint8_t pad[L3_HDR_FIXED - 136];
};
_Static_assert(sizeof(struct l3_obj_hdr) == L3_HDR_FIXED, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, section_bytes) == 24, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, desc_bytes) == 48, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, digest_lo) == 64, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, prefix_lo) == 80, "l3 object header layout");
_Static_assert(offsetof(struct l3_obj_hdr, check) == 128, "l3 object header layout");
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
	_Atomic uint64_t fills_kept;     /* fills that read a kept file (no open; lib/l3_fill.c) */
	_Atomic uint64_t logical;  /* what the objects would take whole (header block + payload each) */
	_Atomic uint64_t segments, seg_bytes; /* segment files in DIR/seg and their bytes (within bytes) */
	_Atomic uint64_t seg_from_l2;    /* segment bytes of fills copied from L2, not read (lib/l3_seg.c) */
	_Atomic uint64_t identity_mismatches; /* fills refused: another model or state identity's object */
	uint8_t pad0[32];
	/* The re-put journal (its own lines: every locate of an attached process reads repl_seq). A
	 * put whose prefix entry replaced one naming another digest takes ticket t = repl_seq++ and
	 * writes slot t % L3_REPL_SLOTS: seq 0, the prefix key, then seq t + 1 (release). Every
	 * arena's location index bound to this directory drops the entries of the keys it has not
	 * seen (lib/l3ix.c, sync_replaced), or all of them when it fell more than a ring behind. */
	_Atomic uint64_t repl_seq;
	uint8_t pad1[56];
	struct l3_repl {
		_Atomic uint64_t seq; /* ticket + 1 once lo, hi are written; 0 while being written */
		_Atomic uint64_t lo, hi; /* the prefix key (unseeded, as prefix files are named) */
	} repl[64];
	uint8_t pad[4096 - 256 - 64 * 24];
};
#define L3_REPL_SLOTS 64u
_Static_assert(sizeof(struct l3_state) == 4096, "l3 state layout");
_Static_assert(offsetof(struct l3_state, repl_seq) == 192, "l3 state layout");
_Static_assert(offsetof(struct l3_state, repl) == 256, "l3 state layout");
_Static_assert(offsetof(struct l3_state, objects) == 16, "l3 state layout");

/* ---- per-thread io_uring ---- */

/* What a fill's ring entry carries: the header block, a payload chunk, both at once (L3_IO_FIRST:
 * the header and chunk 0 in one vectored read, one device request for an O_DIRECT object), or the
 * open, stat and close of the object (on the ring when other fills are in flight). */
enum { L3_IO_HDR = 1, L3_IO_PAYLOAD = 2, L3_IO_SYNC = 3, L3_IO_FIRST = 4, L3_IO_OPEN = 5, L3_IO_STATX = 6, L3_IO_CLOSE = 7 };

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
	uint64_t cgot[L3_MAX_CHUNKS]; /* bytes read of each chunk */
	XXH3_state_t *hs;          /* payload digest, fed chunk by chunk in order */
	uint64_t file_bytes, ino;
	uint64_t t0;
	struct iovec iov[2];       /* L3_IO_FIRST: header block, chunk 0 (read when submitted) */
	struct l3_fill_op *next;   /* free list / done list */
	char rel[48];              /* the object's path under objects/ (an open on the ring reads it) */
	int open_direct;           /* opened with O_DIRECT (l3->dio_at_open); this fill may read buffered */
	int opened_direct;         /* as opened (what a kept file is filed under) */
	int on_ring;               /* opened, stat'ed and closed on the ring (other fills were in flight) */
	struct l3_kept *kept;      /* the kept file it reads (not closed at the end), or NULL */
	uint32_t kept_gen;         /* l3->kept_gen before its open (a file kept is stamped with it) */
	int hdr_known;             /* a kept file whose header was verified for this location: not read */
	struct statx stx;          /* on_ring: the file's size and mtime */
	int pin;                   /* io_pin_get's entry for req->dst (-1: not arena memory) */
	struct sc_digest ident;    /* the identities the header recorded (when it was read) */
};

/* An object file kept open for later fills of the same object (lib/l3_fill.c, "kept files"). */
struct l3_kept {
	uint64_t lo, hi;           /* the object's digest */
	uint64_t file_bytes, ino;
	uint64_t payload_bytes, sec0; /* what its header said when it was verified (the first fill) */
	uint32_t kind;
	struct sc_digest ident;    /* the identities its header recorded */
	int64_t mtime_ns;          /* as at open, or as last touched (LRU clock) */
	uint64_t opened_ns;        /* kept at most SC_L3_FD_KEEP_MS from here */
	uint64_t used;             /* the ring's tick at its last use: the least recent is replaced */
	uint32_t gen;              /* l3->kept_gen when it was opened */
	int fd;                    /* -1: empty */
	int open_direct;
	int busy;                  /* a fill in flight reads it: another fill of it opens its own */
};
#define L3_KEPT_WAYS 8u /* ways per set; twice as many slots as files may be kept */

/* A synchronous I/O on the ring (put path); completes when done is set. */
struct l3_sync_io {
	int done;
	int res;
};

struct l3_ring {
	struct io_uring ring;
	int ok;
	uint32_t depth;
	uint32_t inflight;         /* fills in flight */
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
	struct io_uring seg_ring;  /* segment reads of segmented fills (lib/l3_seg.c), made on first use */
	int seg_ok;
	struct io_pins pins, seg_pins; /* the arena handles each ring reads into (lib/io_pin.h) */
	struct l3_ring *all_next;  /* in the process's list of rings (fork: a child closes its copies) */
};

#define L3_MAX_RANGES 8
struct l3_range {
	uint8_t *base;
	uint64_t len;
};

struct sc_l3 {
	char *dir;
	int dirfd, objfd, pfxfd, lenfd, quarfd, lockfd;
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
	uint32_t kept_max;         /* files all its rings keep open, at most (opts.fd_cache resolved) */
	_Atomic uint32_t kept_count; /* files its rings keep open now */
	_Atomic uint32_t kept_gen; /* moved by every removal through this handle: kept files reopen */
	/* token lengths present in the prefix index, sorted ascending */
	uint32_t *lengths;
	uint32_t nlengths;
	int64_t lengths_mtime_ns;
	int lengths_settled;
	_Atomic uint32_t tmp_seq;
	uint64_t nonce;            /* random per handle, for tmp names (pids repeat across namespaces) */
	/* ---- identity, liveness, shared mode (lib/l3_shared.c, lib/l3_janitor.c) ---- */
	int shared;                /* several hosts share DIR: per-host counters, janitor-only eviction */
	char host[L3_HOST_MAX + 1];
	char writer[L3_WRITER_MAX]; /* <host>.<pid>.<nonce>: names our temp files and access segments */
	int accfd;
	int state_private;         /* l3->st is calloc'd (no per-host state file could be made) */
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
	struct sc_arena *ix_ok;    /* the last arena whose location index was found bound to us */
	int recon_changed;         /* our reconciliation quarantined objects or dropped prefix entries */
	/* ---- segments (lib/l3_seg.c) ---- */
	int sgfd;                  /* DIR/seg, or -1 when the store never had segments */
	uint64_t seg_size;         /* segment size our put calls use (DIR/segments at open); 0: whole objects */
};

/* ---- lib/l3_format.c ---- */
uint64_t l3_hdr_check(const uint8_t *block);
/* Build a header block for a put. */
int l3_hdr_build(uint8_t *block, const struct sc_l3_put_args *p, XXH128_hash_t digest, XXH128_hash_t prefix);
/* Validate a header block against the file size (0: don't check); fills *h. -EBADMSG / -EPROTO. */
int l3_hdr_parse(const uint8_t *block, uint64_t file_bytes, struct l3_obj_hdr *h);
/* The (model, state) identity digest recorded in a parsed header block (sc_identity_digest); zero
 * when the object was put with neither identity (it claims none, and any stage may restore it). */
struct sc_digest l3_hdr_identity(const uint8_t *block, const struct l3_obj_hdr *h);
/* Does a fill that asked for identity @want (zero: any) find another one (@have; zero: none)? */
int l3_identity_differs(struct sc_digest want, struct sc_digest have);
/* The location described by a validated header block. */
void l3_hdr_location(const uint8_t *block, const struct l3_obj_hdr *h, struct sc_location *loc);
void l3_digest_hex(uint64_t lo, uint64_t hi, char out[33]);
int l3_hex_digest(const char *s, uint64_t *lo, uint64_t *hi);
void l3_obj_relpath(uint64_t lo, uint64_t hi, char out[48]);
void l3_pfx_relpath(uint64_t lo, uint64_t hi, char out[48]);
/* Prefix keys of @tokens at each length in @lens (ascending, each <= n): keys[i] for lens[i]. */
void l3_prefix_keys(const char *ns, const int32_t *tokens, const uint32_t *lens, uint32_t nlens,
		    XXH128_hash_t *keys);

/* ---- lib/l3_store.c ---- */
/* Open @rel under @dfd without following a link or blocking (a planted FIFO would block an open
 * for reading), refusing anything but a regular file (-EBADMSG; a symlink is -ELOOP). The fd is
 * blocking again on return (io_uring honours O_NONBLOCK: reads would fail with -EAGAIN). */
int l3_open_file(int dfd, const char *rel, int flags);
/* Give what we just created (@fd) the store's exact mode and group. 0 or -errno. */
int l3_own(struct sc_l3 *l3, int fd, int is_dir);
/* Open DIR-relative @name with @flags (O_RDONLY/O_WRONLY/O_RDWR, O_APPEND, O_TRUNC, O_EXCL),
 * creating it when missing: a file it creates gets exactly the store's mode and group (l3_own);
 * an existing one is used as it is (never a FIFO, a link or anything but a regular file, and
 * never blocking). An fd or a negative errno. */
int l3_create_file(struct sc_l3 *l3, int dfd, const char *name, int flags);
/* mkdirat with the store's mode and group (0 also when it exists). */
int l3_mkdir_at(struct sc_l3 *l3, int dfd, const char *name);
/* Was the object @lo/@hi quarantined at or after @since_ns (CLOCK_REALTIME)? Scans quarantine/. */
int l3_quarantined_since(struct sc_l3 *l3, uint64_t lo, uint64_t hi, uint64_t since_ns);
/* Drop the prefix entry @key if it still names @lo/@hi. */
void l3_drop_prefix(struct sc_l3 *l3, uint64_t key_lo, uint64_t key_hi, uint64_t lo, uint64_t hi);
/* Call @cb(l3, subdir_fd, sub, name, ctx) for every entry of every <topfd>/<2 hex>/ directory. */
int l3_scan(struct sc_l3 *l3, int topfd, int (*cb)(struct sc_l3 *, int, const char *, const char *, void *),
	    void *ctx);
/* "<32 hex><suffix>" -> digest; -EINVAL otherwise. */
int l3_name_digest(const char *name, const char *suffix, uint64_t *lo, uint64_t *hi);
/* The header block and size of an object opened at @fd. */
int l3_read_block(int fd, uint8_t *block, uint64_t *file_bytes);
/* A prefix entry opened at @fd, validated (magic, version, checksum, size). With @tokens, a
 * version 2 entry's token ids are returned in *@tokens (malloc'd; NULL for version 1); with @ns
 * (SC_L3_STR_MAX + 1 bytes), its namespace. */
int l3_read_pfx(int fd, struct l3_pfx *p, int32_t **tokens, char *ns);
/* Read prefix file @at in @dfd, whose name is @name (<prefix key>.pfx; @at may be another name of
 * the file), into @p and its key into *@lo, *@hi: 0 read and it holds that prefix, -EBADMSG
 * unreadable or it holds another prefix, another -errno from the read, or 1 when @name is no
 * prefix file name or @at cannot be opened (nothing to judge). */
int l3_read_pfx_named(int dfd, const char *at, const char *name, struct l3_pfx *p, uint64_t *lo, uint64_t *hi);
int l3_quarantine(struct sc_l3 *l3, uint64_t lo, uint64_t hi, int reason);
int l3_read_header(struct sc_l3 *l3, uint64_t lo, uint64_t hi, uint8_t *block, uint64_t *file_bytes);
/* Register a token length in DIR/lengths (idempotent). */
int l3_put_length(struct sc_l3 *l3, uint32_t tokens);

/* Write @iov as @dfd/@sub/@final: a temp file (host identity in its name), fsync, rename (with
 * @noreplace: -EEXIST when it is there), fsync of the directory. */
int l3_write_file(struct sc_l3 *l3, int dfd, const char *sub, const char *final, const struct iovec *iov, int niov,
		  int noreplace);
/* Room for a put of @need bytes: refused (-E2BIG, -ENOSPC, counted) or made by eviction. */
int l3_put_room(struct sc_l3 *l3, uint64_t need);

/* ---- lib/l3_seg.c: segmented objects ---- */
/* DIR/seg and DIR/segments at open. */
int l3_seg_open(struct sc_l3 *l3);
/* A put's manifest (the payload cut at l3->seg_size, each piece digested). */
struct l3_seg_man {
	struct l3_seg_ent *e;
	uint32_t n;
};
int l3_seg_plan(struct sc_l3 *l3, const struct sc_payload *pl, struct l3_seg_man *m);
/* Make @block (built by l3_hdr_build) the header of the segmented object of @m. */
void l3_seg_hdr(uint8_t *block, const struct l3_seg_man *m, uint64_t seg_bytes);
/* Every segment of @m in place and touched (mtime now): written where missing. With @after (the
 * manifest is in place): the touch that makes a concurrent sweep keep them (lib/l3_seg.c). The
 * bytes of the segment files this call wrote go to *@wrote_bytes, their count to *@wrote. */
int l3_seg_store(struct sc_l3 *l3, const struct sc_payload *pl, const struct l3_seg_man *m, uint64_t *wrote,
		 uint64_t *wrote_bytes);
/* The physical bytes a put of @m adds: its object file and the segments not stored yet. */
uint64_t l3_seg_need(struct sc_l3 *l3, const struct l3_seg_man *m);
/* Is this header block a segmented object's (magic and version only: l3_seg_fill validates)? */
int l3_seg_is_manifest(const uint8_t *block);
/* The fill of a segmented object opened at @fd (its size @file_bytes): segments read on the ring's
 * segment ring into req->dst and verified. 0, -ENOENT (a segment missing: a miss), -EBADMSG (a
 * segment or the manifest is corrupt: quarantined with every object using it), -EINVAL. */
int l3_seg_fill(struct sc_l3 *l3, struct l3_ring *r, int fd, uint64_t file_bytes, struct sc_l3_fill_req *req);
void l3_seg_ring_free(struct l3_ring *r);
/* The manifest of the object at @fd: *@h and the entries (malloc'd) validated. Count or -errno. */
int l3_seg_manifest(int fd, uint64_t file_bytes, struct l3_obj_hdr *h, struct l3_seg_ent **e);
/* Full verification of a segmented object (sc_l3_verify): 0 or -EBADMSG / -ENOENT (segments
 * missing or cut: their count in *@missing) / -ENOMEM. */
int l3_seg_verify(struct sc_l3 *l3, int fd, uint64_t file_bytes, uint32_t *missing);

/* What eviction and reconciliation know of DIR/seg during one pass (under the lock or lease). */
struct l3_segref {
	uint64_t lo, hi, bytes;    /* bytes: the file's size (0: not seen in DIR/seg) */
	int64_t mtime;
	uint32_t refs;             /* manifests naming it, as listed */
	uint32_t used;             /* slot in use */
};
struct l3_segs {
	struct l3_segref *e;       /* open addressing by digest */
	size_t cap, n;
	uint64_t t0;               /* CLOCK_REALTIME before the listing of objects began */
	uint64_t files, bytes;     /* segment files and their bytes, as listed (minus what was removed) */
	uint64_t logical;          /* header block + payload of every object counted */
	uint64_t removed, removed_bytes, stale;
};
/* List DIR/seg (sizes, mtimes) and note the time: the start of a pass. No segments: 0, empty. */
int l3_segs_begin(struct sc_l3 *l3, struct l3_segs *s);
/* Count the object @name in @dfd (size @file_bytes): whole: its logical bytes; segmented: also
 * @delta on each of its segments' references, and with @delta < 0 the bytes of the segments no
 * longer referenced go to *@freed. 1 segmented, 0 whole, -ENOENT (one of its segments is not in
 * DIR/seg), another -errno (unreadable: left to the callers' checks). */
int l3_segs_object(struct sc_l3 *l3, struct l3_segs *s, int dfd, const char *name, uint64_t file_bytes, int delta,
		   uint64_t *freed);
/* Remove the segments no listed object references that were not touched since the pass began
 * (less the grace); @act (may be NULL) is asked before each removal (the janitor's fence). */
int l3_segs_sweep(struct sc_l3 *l3, struct l3_segs *s, int (*act)(void *), void *ctx);
void l3_segs_end(struct l3_segs *s);
/* A pass's counts into DIR/state: @objects, physical @bytes, and the segments' logical bytes and files. */
void l3_segs_publish(struct sc_l3 *l3, const struct l3_segs *s, uint64_t objects, uint64_t bytes);

/* ---- lib/l3_shared.c ---- */
/* This host's identity: @host_id validated, or /etc/machine-id, or the host name. */
int l3_host_init(struct sc_l3 *l3, const char *host_id);
/* Shared mode: DIR/shared present, asked for (and then recorded), or DIR on CephFS. */
int l3_mode_init(struct sc_l3 *l3, uint32_t flags);
/* l3->writer = "<host>.<pid>.<nonce>", the stem of every temp file and access segment we make. */
void l3_writer_init(struct sc_l3 *l3);
/* "<prefix><writer>.<n>" for a new temp file (".tmp-") or captured prefix entry (".drop-"). */
void l3_tmp_name(struct sc_l3 *l3, const char *prefix, char *out, size_t n);
/* A file its maker holds (an OFD lock on byte 0, from creation to rename or close) is in use; one
 * nobody holds is left over once it is older than L3_TMP_STALE_NS and the visibility grace (the
 * instant between its creation and its lock; a maker on another host). 1 left over, 0 not. */
#define L3_TMP_STALE_NS (2ull * 1000000000ull)
int l3_left_over(struct sc_l3 *l3, int dfd, const char *name);
/* The per-host counters of a shared directory (host-local memory). */
int l3_state_open_host(struct sc_l3 *l3);
void l3_state_close(struct sc_l3 *l3);
/* Record a use of an object for the LRU order: local mode touches the file's mtime (@fd, when
 * last touched longer ago than L3_TOUCH_NS); shared mode buffers an access record. */
int64_t l3_note_access(struct sc_l3 *l3, int fd, uint64_t lo, uint64_t hi, int64_t mtime_ns);
/* Write buffered access records (@force: even if few and recent). Caller must not hold mu. */
void l3_access_flush(struct sc_l3 *l3, int force);
/* Is something made at @t_ns (CLOCK_REALTIME of the host that made it) older than the grace?
 * (Local mode: always.) */
int l3_settled(const struct sc_l3 *l3, uint64_t t_ns);
/* Drop the prefix entry at @pfxfd/@rel if, once captured, it names an object that is missing or
 * bad and is older than the grace; a put that raced with us keeps its entry. 1 dropped, 0 kept,
 * negative errno. */
int l3_pfx_drop(struct sc_l3 *l3, const char *rel);
/* Resolve a captured ".drop-" file left by a dead dropper: put it back or remove it. */
int l3_pfx_drop_resolve(struct sc_l3 *l3, int dfd, const char *sub, const char *name);

/* ---- lib/l3_lru.c (the janitor's, under its lease) ---- */
/* Make room for @need elements of @elem bytes in the realloc'd array *@p of capacity *@cap
 * (doubling from 64). 0 or -ENOMEM (the array is left as it was). */
int l3_grow(void **p, size_t *cap, size_t need, size_t elem);
struct l3_lru_ent {
	uint64_t lo, hi, t_ns;     /* digest, last use (CLOCK_REALTIME) */
};
struct l3_lru {
	struct l3_lru_ent *e;      /* open addressing: digest -> last use (t_ns 0: empty) */
	size_t cap, n;
	char (*closed)[L3_WRITER_MAX + 16]; /* DIR/access segments to remove once the table is written */
	size_t nclosed, capclosed;
	uint64_t accesses;         /* segment records merged */
};
/* DIR/lru, then every DIR/access segment merged in; @left_over(@ctx, name) tells whether a
 * segment's writer let go of it (it is then closed: removed after the table is written). */
void l3_lru_load(struct sc_l3 *l3, struct l3_lru *m, int (*left_over)(void *, const char *), void *ctx);
/* The last recorded use of a digest (0: none). */
uint64_t l3_lru_get(const struct l3_lru *m, uint64_t lo, uint64_t hi);
/* Write @e[0..n) as DIR/lru (tmp + fsync, then rename if @fence says we still hold the lease). */
int l3_lru_write(struct sc_l3 *l3, const struct l3_lru_ent *e, size_t n, int (*fence)(struct sc_l3 *));
void l3_lru_free(struct l3_lru *m);

/* ---- lib/l3_janitor.c ---- */
/* Shared mode, put side: a put of @bytes made the store's estimated size exceed the budget:
 * run a pass now if no janitor holds the lease. */
void l3_janitor_after_put(struct sc_l3 *l3, uint64_t bytes);
void l3_janitor_release(struct sc_l3 *l3);
/* sc_l3_evict_to in shared mode: a pass down to @bytes. The count evicted, or -EBUSY/-ESTALE/... */
int l3_janitor_evict_to(struct sc_l3 *l3, uint64_t bytes);
/* The janitor record's objects, bytes, epoch, last pass (0 when there is none). */
struct l3_jrec_view {
	uint64_t epoch, objects, bytes, evictions, pass_end_ns;
	char host[L3_HOST_MAX + 1];
};
int l3_janitor_read(struct sc_l3 *l3, struct l3_jrec_view *v);

/* ---- lib/l3_index.c ---- */
/* What a directory probe saw at each length it probed (to refresh the arena's location index). */
enum { L3_PROBE_SKIPPED = 0, L3_PROBE_ABSENT, L3_PROBE_FOUND, L3_PROBE_COLLISION, L3_PROBE_UNVERIFIABLE };
#define L3_LOG_LENGTHS SHM_L3IX_MAX_LENGTHS
struct l3_probe_log {
	uint32_t n, found;                 /* lengths probed (ascending); index of the found one */
	uint32_t lens[L3_MAX_PROBES];
	uint8_t state[L3_MAX_PROBES];
	struct sc_digest l3key[L3_MAX_PROBES];
	uint32_t nall;                     /* the directory's lengths (the longest L3_LOG_LENGTHS) */
	int64_t all_mtime_ns;
	uint32_t all[L3_LOG_LENGTHS];
};
/* The directory @dfd as a DIR stream of its own (a new description: @dfd stays open and its
 * position untouched), or NULL. */
DIR *l3_opendir(int dfd);
/* The O_DIRECT alignment of the filesystem holding @fd (a regular file in the directory) into
 * l3->dio_*_align: statx's, else a page when the filesystem takes O_DIRECT, else 0 (never direct). */
void l3_dio_detect(struct sc_l3 *l3, int fd);
/* The directory's token lengths (the longest @max, ascending; reloaded when they changed, or
 * @force): the count, or a negative errno. */
int l3_lengths_snapshot(struct sc_l3 *l3, uint32_t *out, uint32_t max, int64_t *mtime_ns, int force);
/* The directory probe (what sc_l3_locate_longest did before the location index); @log optional.
 * *@bad (may be NULL): when nothing was found (0), the length of the longest matching prefix entry
 * that named an object that failed verification (now, or a quarantined one), else 0; that entry
 * is dropped, so restore reports it once instead of the shorter prefix. */
int l3_locate_dir(struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n, struct sc_location *loc,
		  struct l3_probe_log *log, uint32_t *bad);

/* ---- lib/l3ix.c: the arena's location index ---- */
/* Bind @l3's directory to @a's index (first binder wins): 1 bound to us, 0 another directory's. */
int l3ix_bind(struct sc_arena *a, struct sc_l3 *l3);
/* Coherence hooks of writers attached to @a (before they return). */
void l3ix_on_put(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens,
		 const struct sc_location *loc);
void l3ix_on_objects_gone(struct sc_arena *a, const struct sc_digest *digests, size_t n);
void l3ix_on_prefix_gone(struct sc_arena *a, struct sc_digest l3key);
/* What l3ix_locate found. */
struct l3ix_found {
	int from_index;                    /* out: 1 answered by the index (snap), 0 by the directory (loc) */
	uint32_t bad;                      /* out (directory, nothing found): see l3_locate_dir */
	uint32_t len;                      /* out: the prefix length */
	struct sc_key pfx;                 /* out: its prefix hash P (the L2 key is l2_key_of(stage, P)) */
	struct shm_l3ix_snap snap;         /* out (from_index): the positive entry */
};
/*
 * The longest stored prefix of @tokens[0..n): through the index when it can answer (no system
 * call; *@loc untouched, see @f->snap), else by the directory probe (*@loc filled, what it saw
 * refreshes the index). @now: CLOCK_MONOTONIC ns the caller just read (0: read it here).
 * Returns the length (> 0), 0 nothing stored, or a negative errno.
 */
int l3ix_locate(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		uint64_t now, struct l3ix_found *f, struct sc_location *loc);
/* The full location of an index answer (reads the object's header). -ENOENT: the object vanished,
 * or its header was bad (quarantined); either way its index entries and L2 mirrors were dropped. */
int l3ix_complete(struct sc_arena *a, struct sc_l3 *l3, const struct l3ix_found *f, struct sc_location *loc);
/* Are the index answer's token ids (and namespace) the caller's? From the entry's pages, or its
 * prefix entry file when it keeps none. 1, 0 (a collision: counted), -EAGAIN (the entry or the
 * file changed, or the file is gone: ask the directory). */
int l3ix_entry_tokens_equal(struct sc_arena *a, struct sc_l3 *l3, const struct l3ix_found *f, const char *ns,
			    const int32_t *tokens);
/* An object vanished under a fill: drop its index entries and L2 mirrors. */
void l3ix_vanished(struct sc_arena *a, struct sc_digest d);
/* Every entry must be re-checked against the directory (its reconciliation changed things). */
void l3ix_invalidate_all(struct sc_arena *a);
/* sc_l3_locate_longest through the index: a complete location (descriptor read from the header). */
int l3ix_locate_full(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		     struct sc_location *loc);

/* ---- lib/restore.c ---- */
/* Remove L2 mirrors of a quarantined digest in the bound arena (if any). */
void l3_invalidate_mirror(struct sc_l3 *l3, uint64_t lo, uint64_t hi);

/* ---- lib/l3_fill.c ---- */
struct l3_ring *l3_ring_get(struct sc_l3 *l3);
void l3_rings_free(struct sc_l3 *l3);
/* l3_fill_req for a fill into @src's memory (sc_restore): the segments of a segmented object that
 * @src's L2 holds are copied from there, not read (lib/l3_seg.c). */
int l3_fill_from(struct sc_l3 *l3, struct sc_l3_fill_req *req, struct sc_arena *src);
/* An object file was removed or moved through @l3: every ring's kept files are reopened (this
 * thread's ring closes its idle ones at once, the others at their next fill). */
void l3_kept_forget(struct sc_l3 *l3);
/* One fill, waiting for it (other completions of this thread stay queued for reap). */
int l3_fill_req(struct sc_l3 *l3, struct sc_l3_fill_req *req);
/* Synchronous write of @iov at @off through the ring (loops on short writes). */
int l3_ring_writev(struct l3_ring *r, int fd, const struct iovec *iov, int niov, uint64_t off);
int l3_ring_fsync(struct l3_ring *r, int fd);

#endif
