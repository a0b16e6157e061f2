/*
 * stagecache.h — the whole public contract of libstagecache.
 *
 * stagecache lets the co-located worker processes of an LLM inference server share one host-RAM
 * cache of exact prefix state in a named shared-memory arena. The design — layers, the arena's
 * layout, every shared-memory protocol and its liveness rule — is docs/DESIGN.md in the source
 * tree.
 *
 * Conventions, everywhere below:
 *  - every public name starts with sc_ / SC_;
 *  - functions return 0 (or a count) on success and a negative errno on failure; sc_strerror()
 *    names each stagecache-specific meaning;
 *  - the library never prints, exits or aborts;
 *  - unknown flag bits are rejected with -EINVAL against the matching SC_*_MASK.
 *
 * The file is split in sections, one per object; each names the lib/ files that implement it.
 *
 * Structures (the stable layout rules; see "layouts" below for the run-time checks):
 *  - a structure the caller allocates or reads has a fixed, documented layout on every 64-bit
 *    Linux target: its public fields, then (where it may grow) a `reserved` block that the library
 *    zeroes in what it returns and requires to be zero in what it is given (-EINVAL otherwise),
 *    then (where it has one) a private block whose bytes only the library reads or writes;
 *  - a later version adds public fields only inside a reserved block, so a structure never
 *    changes size within a major version, and a binding that checks the fields it uses against
 *    sc_offsetof() keeps working;
 *  - struct sc_batcher is opaque: allocate sc_sizeof("sc_batcher") bytes, 8-byte aligned.
 *
 * Option structures: zero-initialise, then set what you need. A zero field takes its default
 * only where zero would be meaningless (a size, a count); where zero is a meaningful value (a
 * batcher interval of 0, group id 0) a bit in the structure's `flags` says it is meant literally.
 *
 * C++: the header compiles as C++ (tests/cxx_client.cpp builds with -Wall -Wextra -Werror). Where
 * a function and a structure share a name (sc_arena_info, sc_l2_stats, sc_l3_stats,
 * sc_promote_stats, sc_restore), the plain name is the function: write `struct sc_l2_stats st;`
 * as in C. Digests are computed with sc_digest_of() (`sc_digest d = sc_digest_of(buf, n);`).
 */
#ifndef STAGECACHE_H
#define STAGECACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SC_VERSION_MAJOR 0
#define SC_VERSION_MINOR 1

/* ============================== errors (lib/error.c) ============================== */

/**
 * sc_strerror - a human-readable message for a value returned by any sc_* function.
 * @err: a negative errno as returned by the library (a positive value is accepted too).
 * Returns a static string; never NULL. Does not allocate.
 */
const char *sc_strerror(int err);

/* ============================== layouts (lib/abi.c) ============================== */
/*
 * Run-time layout checks, for bindings (Python ctypes, Rust FFI, ...) that mirror the structures
 * of this header: at load time a binding compares the size of each structure it uses and the
 * offset and size of each field it reads or writes with what the library it loaded was built
 * with, and refuses to run on any difference. Types are named without "struct " ("sc_lease");
 * fields by their C name ("sec_len"; an array is one field of its whole size). Only public fields
 * are listed: `reserved` blocks and private blocks are not, so a field that a later version adds
 * in reserved space breaks no binding that does not use it. None of these allocate or fail on
 * any input.
 */

/** sc_sizeof - sizeof(struct @type) in this library, or 0 when @type is unknown (or NULL). */
size_t sc_sizeof(const char *type);
/** sc_alignof - _Alignof(struct @type), or 0 when unknown. */
size_t sc_alignof(const char *type);
/** sc_offsetof - offsetof(struct @type, @field): >= 0, or -ENOENT (no such type or public field). */
int64_t sc_offsetof(const char *type, const char *field);
/**
 * sc_type_field - the @index-th public field of @type, in increasing offset: its @name, @offset
 * and @size (each out pointer may be NULL). Returns 0, or -ENOENT past the last field or for an
 * unknown type. With sc_type_name() a binding's tests can check that it mirrors every field.
 */
int sc_type_field(const char *type, unsigned index, const char **name, size_t *offset, size_t *size);
/** sc_type_name - the @index-th structure the checks know ("sc_arena_opts", ...), NULL past the end. */
const char *sc_type_name(unsigned index);

/* ============================== arena (lib/arena.c, shm/arena.c) ============================== */

/* Longest arena name; names are 1..SC_NAME_MAX characters of [A-Za-z0-9._-], not dots only. */
#define SC_NAME_MAX 64
/* Smallest and largest arena the library creates. */
#define SC_ARENA_MIN_BYTES (8ull << 20)
#define SC_ARENA_MAX_BYTES (1ull << 40)

enum sc_huge {
	SC_HUGE_AUTO = 0,    /* hugetlbfs, else tmpfs with THP, else 4 KiB shmem */
	SC_HUGE_REQUIRE = 1, /* hugetlbfs or fail */
	SC_HUGE_OFF = 2,     /* no hugetlbfs: 4 KiB shmem (an explicit dir gives what its filesystem gives) */
};

enum sc_backing {
	SC_BACKING_UNKNOWN = 0,
	SC_BACKING_HUGETLBFS_2M = 1, /* "hugetlbfs-2M" */
	SC_BACKING_SHMEM_THP = 2,    /* "shmem-thp" */
	SC_BACKING_SHM_4K = 3,       /* "shm-4k" */
	SC_BACKING_FILE_4K = 4,      /* "file-4k": an explicit directory on a disk filesystem (page cache) */
};

/** sc_huge_name - "auto", "require", "off", or "unknown". */
const char *sc_huge_name(int huge);

#define SC_ARENA_OPT_GID 0x1u  /* gid is meant literally: 0 is root's group, not "the caller's" */
/* Store no token ids with L2 and index entries and compare none on hits: a key collision then
 * serves another prefix's state. For measurements (see tools/bench/README.md, "Token verification"). Also
 * reported in sc_arena_info.flags. */
#define SC_ARENA_NO_TOKEN_VERIFY 0x2u
#define SC_ARENA_OPT_MASK 0x3u

/**
 * struct sc_arena_opts - creation parameters. Zero-initialise, then set what you need; a zero
 * field takes its default (flags say where zero is meant literally).
 */
struct sc_arena_opts {
	uint64_t size_bytes;     /* total arena size; required, SC_ARENA_MIN_BYTES..SC_ARENA_MAX_BYTES */
	int huge;                /* enum sc_huge */
	const char *dir;         /* directory for the arena file; NULL: /dev/hugepages or /dev/shm */
	uint32_t mode;           /* file mode; 0: 0600; never world-writable (open refuses such files) */
	int64_t gid;             /* group owner; 0 or -1: the caller's (unless SC_ARENA_OPT_GID) */
	uint32_t index_entries;  /* L2 index capacity; 0: size_bytes / 16 KiB, at least 1024 */
	uint32_t ring_count;     /* commit rings; 0: 16 */
	uint32_t ring_bytes;     /* bytes of record space per ring (power of two); 0: 256 KiB */
	uint32_t obs_entries;    /* promotion observation table; 0: 4096 */
	uint32_t reader_slots;   /* attached processes at once; 0: 256 */
	uint32_t flags;          /* SC_ARENA_OPT_* */
	uint32_t l3_index_entries; /* L3 location index entries (rounded up to whole sets of 8);
	                          * 0: one per 256 KiB of arena, 64..65536; SC_L3_INDEX_NONE: no index */
	uint32_t l3_index_refresh_ms; /* how long an index entry is trusted without looking at the L3
	                          * directory (changes by processes not attached); 0: 1000 */
	uint32_t segment_bytes;  /* content-addressed L2 segments of this size (a power of two,
	                          * SC_SEGMENT_MIN..SC_SEGMENT_MAX; SC_SEGMENT_DEFAULT is 1 MiB): sections
	                          * larger than one segment are stored once per distinct segment;
	                          * 0: no segments (every payload stored whole) */
	uint32_t slots_per_user; /* reader slots the processes of one user may hold at once (an attach
	                          * beyond it fails with -EDQUOT), 1..reader_slots; 0: three quarters of
	                          * them when the mode gives the group access, else all of them */
	uint64_t reserved[4];    /* zero */
};
#define SC_SEGMENT_DEFAULT (1u << 20)
#define SC_SEGMENT_MIN (64u << 10)
#define SC_SEGMENT_MAX (1u << 30)
#define SC_L3_INDEX_NONE 0xffffffffu
struct sc_arena;

/**
 * sc_arena_create - create a named arena and attach to it.
 * @name: 1..SC_NAME_MAX characters of [A-Za-z0-9._-], not dots only.
 * @opts: creation parameters (size_bytes required).
 * @out:  receives the handle; close with sc_arena_close().
 * With huge=auto, a hugetlbfs mount this user may not write to (root's 0755 /dev/hugepages;
 * `stagecache setup --group G` opens it to a group) or a hugepage shortage falls back to /dev/shm.
 * Returns 0, or -EINVAL (bad name or size; a mode with o+w, or one that lets users read the file
 * who may not write it (o+r, or g+r without g+w: any of them could lock every reader slot's byte
 * and stop every attach); slots_per_user above reader_slots; unknown opts->flags bits or a
 * non-zero reserved word), -EEXIST (an arena of that name exists, or another process is creating
 * it), -ENOMEM (not enough hugepages or memory; nothing is left behind), -ENODEV (huge=require and
 * no hugetlbfs mount), -EACCES (huge=require and the mount is not writable by this user; or @dir
 * not writable), -EPERM (gid: not a group of the caller), -ENOENT (@dir does not exist), or
 * another negative errno.
 * Blocks while the arena is pre-faulted; allocates the handle.
 */
int sc_arena_create(const char *name, const struct sc_arena_opts *opts, struct sc_arena **out);

/**
 * sc_arena_open - attach to an existing arena, looking in /dev/hugepages then /dev/shm.
 * The file must be a regular file (opened without following a symlink and without blocking, so
 * a FIFO or link planted under the name is refused, never waited on or followed), must not be
 * world-writable, and must be owned by root or the caller (see sc_arena_open_with to trust
 * another owner): anyone can create /dev/shm/stagecache.NAME before you do.
 * Returns 0, or -ENOENT (no such arena), -EINVAL (bad name), -EBADMSG (not an arena: not a
 * regular file, truncated, or a corrupted header), -EPROTO (a different layout version), -EPERM
 * (world-writable, or owned by a user not trusted), -EACCES (no permission to open it), -EAGAIN
 * (still being created after a bounded wait), -EUSERS (reader table full, or every free slot's
 * lock held by someone), -EDQUOT (the processes of this user already hold the arena's
 * slots_per_user slots), -ENOTRECOVERABLE (fsck declared the arena unrepairable: destroy and
 * create it again). A file shorter than its header says is -EBADMSG.
 * Never modifies the file when it refuses it.
 */
int sc_arena_open(const char *name, struct sc_arena **out);

/** sc_arena_open_dir - as sc_arena_open, looking only in @dir. */
int sc_arena_open_dir(const char *dir, const char *name, struct sc_arena **out);

#define SC_ARENA_OPEN_ANY_OWNER 0x1u /* accept an arena file owned by any user (never a world-writable one) */
#define SC_ARENA_OPEN_MASK 0x1u

/** struct sc_arena_open_opts - how to open an arena; zero-initialise, every zero field takes its default. */
struct sc_arena_open_opts {
	const char *dir;             /* look only here; NULL: /dev/hugepages (hugetlbfs) then /dev/shm */
	uint32_t flags;              /* SC_ARENA_OPEN_* */
	uint32_t owner_uid;          /* also accept a file owned by this user (0: nobody beyond root and you) */
	uint64_t reserved[4];        /* zero */
};

/**
 * sc_arena_open_with - as sc_arena_open, with options: where to look, and whose arena files to
 * trust besides root's and your own (e.g. the service account that creates arenas for a group of
 * workers). Returns as sc_arena_open, and -EINVAL for unknown flags or a non-zero reserved word.
 */
int sc_arena_open_with(const char *name, const struct sc_arena_open_opts *opts, struct sc_arena **out);

/* What an arena's file is, without opening it (for messages). */
struct sc_arena_file {
	char path[4096];
	uint32_t mode;               /* st_mode: type and permission bits (S_ISREG(), S_ISFIFO(), ... apply) */
	uint32_t uid, gid;
	uint64_t size;
	uint64_t reserved[4];
};

/**
 * sc_arena_file_stat - describe the file that opening (@dir, @name) would try: path, type, mode,
 * owner, size (lstat: a symlink is described, not followed). Opens nothing, changes nothing.
 * Returns 0, -ENOENT (no such file), -EINVAL (bad name).
 */
int sc_arena_file_stat(const char *dir, const char *name, struct sc_arena_file *out);

/** sc_arena_close - detach (releases this process's reader slot) and free the handle. NULL is a no-op. */
void sc_arena_close(struct sc_arena *arena);
/**
 * sc_arena_fd - a new descriptor (O_CLOEXEC) of the very file @arena maps, for a binding that maps
 * read-only views of it (offsets from sc_arena_extents). Never a path lookup: after a destroy and
 * a create under the same name, or a file planted under the name, it still names what the handle
 * attached to. The caller closes it. Returns it (>= 0), -EINVAL, -ECHILD (a forked child's copy
 * of the handle), or -errno (EMFILE).
 */
int sc_arena_fd(struct sc_arena *arena);

/**
 * sc_arena_destroy - remove the named arena's file (from @dir, or the known directories when
 * NULL). Processes still attached keep their mapping until they close. What is removed: a
 * regular file that starts with an arena's magic word (however broken), or one shorter than an
 * arena header or starting with a zero word (what truncating an arena leaves).
 * Returns 0, -ENOENT, -EINVAL, -EBADMSG (the file is not an arena: it is left alone), -EACCES.
 */
int sc_arena_destroy(const char *dir, const char *name);

#define SC_INFO_MAX_ATTACHED 64

/* One attached handle, as sc_arena_info reports it (for people to read: pids are not liveness). */
struct sc_arena_attached {
	uint32_t pid;            /* in the attached process's own pid namespace */
	uint32_t uid;
	uint32_t slot;           /* its reader slot */
	int other_pidns;         /* 1: another pid namespace than the caller's (the pid means nothing here) */
	uint64_t attached_unix;  /* seconds */
};

struct sc_arena_info {
	char name[SC_NAME_MAX + 1];
	char path[4096];
	uint64_t size_bytes;
	uint64_t page_size;      /* page size of the mapping as measured from /proc/self/smaps */
	int backing;             /* enum sc_backing, measured */
	uint32_t layout_version;
	uint64_t created_unix;   /* seconds */
	uint32_t creator_pid;
	uint32_t mode;           /* file mode bits */
	uint32_t reader_slots;
	uint32_t attached_count; /* attached handles whose process is alive (all of them) */
	struct sc_arena_attached attached[SC_INFO_MAX_ATTACHED]; /* the first SC_INFO_MAX_ATTACHED of them */
	uint32_t index_entries, ring_count, ring_bytes, obs_entries;
	uint64_t heap_bytes;     /* bytes of the payload heap region */
	uint32_t l3_index_entries, l3_index_refresh_ms;
	uint32_t flags;          /* SC_ARENA_NO_TOKEN_VERIFY when the arena was created with it */
	uint32_t slots_per_user; /* reader slots one user's processes may hold (0: no limit, older arenas) */
	uint32_t locked_slots;   /* slots not attached whose lock byte is held all the same: by a
	                          * process that locked the file's bytes itself (any user who can open
	                          * the file can), or one attaching right now */
	uint32_t reserved0;      /* zero */
	uint64_t reserved[5];    /* zero */
};

/**
 * sc_arena_info - describe the arena. Reads /proc/self/smaps (may block briefly). Returns 0,
 * -EINVAL, or -EBADMSG when the file is now shorter than the mapping (someone who can write it
 * truncated it: the handle cannot be used any more; close it).
 */
int sc_arena_info(struct sc_arena *arena, struct sc_arena_info *info);

/**
 * sc_arena_inspect - describe the arena @name as sc_arena_info does, without taking a reader
 * slot: the file is opened read-only and mapped PROT_READ for the call, and nothing in it is
 * written. For diagnostics that must work when every slot is taken (or locked by someone), and
 * for a user who may only read the file. @opts: where to look and whom to trust, as for
 * sc_arena_open_with (NULL: the defaults). Returns as sc_arena_open (never -EUSERS or -EDQUOT),
 * and 0 for an arena declared unrepairable (it can still be described).
 */
int sc_arena_inspect(const char *name, const struct sc_arena_open_opts *opts, struct sc_arena_info *info);

/**
 * sc_arena_token - this handle's owner token: how the arena records this handle as the holder of
 * its leases, fill reservations, fill claims, ring roles and locks. Unique among the live
 * attachments; (incarnation << 16) | reader slot. 0 for NULL.
 */
uint32_t sc_arena_token(const struct sc_arena *arena);

/* One holder of arena resources (sc_arena_holders). */
struct sc_holder {
	uint32_t slot;           /* reader slot */
	uint32_t token;          /* owner token (sc_arena_token of the handle) */
	int alive;               /* 1: its process holds the slot's kernel-released lock */
	int other_pidns;         /* 1: attached from another pid namespace than the caller's */
	uint32_t pid, uid;       /* for people: pid in the holder's own namespace (0: unknown) */
	uint32_t leases;         /* lease records */
	uint64_t leased_bytes;   /* footprint of the L2 entries those leases pin */
	uint64_t reserved_bytes; /* heap bytes of its unpublished fill reservations */
};

/**
 * sc_arena_holders - every attachment the reader table records (live ones, and dead ones whose
 * slot nobody has cleared yet), plus holders known only from what they still hold (reservations
 * of an attachment whose slot was reused since). Fills up to @max rows of @out and returns how
 * many rows there are (may exceed @max), or -EINVAL, -EBADMSG, -ECHILD. Reads the lease records
 * and walks the heap (its lock is taken briefly); changes nothing. Liveness costs one fcntl per
 * row. For monitoring and tests: what dead processes still hold is reclaimed by the next
 * operation that needs the room, and by a periodic reap while anyone admits.
 */
int sc_arena_holders(struct sc_arena *arena, struct sc_holder *out, unsigned max);

/** sc_arena_layout_version - the layout version this library reads and writes. */
uint32_t sc_arena_layout_version(void);

/**
 * sc_arena_file_version - the layout version recorded in an arena file's header, without
 * attaching (for messages about -EPROTO). Returns 0, -ENOENT, -EINVAL or -EBADMSG (no magic).
 */
int sc_arena_file_version(const char *dir, const char *name, uint32_t *version);

/** sc_backing_name - "hugetlbfs-2M", "shmem-thp", "shm-4k", "file-4k" or "unknown". */
const char *sc_backing_name(int backing);

/*
 * Arena extents, for registering the arena with a device for DMA (e.g. cudaHostRegister, or
 * ibv_reg_mr): every byte that a lease, a restore with in_arena set, or a reservation can point
 * to lies inside one of the extents. They are this process's mapping (each process maps the
 * arena at its own address, so each registers its own) and stay valid until sc_arena_close.
 *
 * How, with CUDA: after sc_arena_open, for each extent call cudaHostRegister(base + off, len,
 * cudaHostRegisterDefault) over chunks of at most 1 GiB whose offsets and lengths are multiples
 * of page_size (the extent's base and bytes already are); then cudaMemcpyAsync from lease
 * sections runs as DMA from pinned memory. Call cudaHostUnregister on every chunk before
 * sc_arena_close. Hugetlbfs pages are never swapped or migrated, so pinning them costs little;
 * on 4 KiB shared memory registration pins every page (slow to register, and it locks the
 * memory: check RLIMIT_MEMLOCK).
 */
enum sc_extent_kind {
	SC_EXTENT_HEAP = 1,  /* the payload heap: L2 entries, leases, fill reservations */
};
/** sc_extent_kind_name - "heap", or "unknown". */
const char *sc_extent_kind_name(int kind);

struct sc_arena_extent {
	void *base;            /* first byte in this process's mapping (page_size aligned) */
	uint64_t bytes;        /* length (a multiple of page_size) */
	uint64_t page_size;    /* of the mapping, as measured at attach: 2 MiB on hugetlbfs, else 4 KiB */
	uint64_t file_offset;  /* offset of base in the arena file (for a second mmap of the file) */
	uint32_t kind;         /* enum sc_extent_kind */
	uint32_t flags;        /* 0 */
	uint64_t reserved[4];  /* zero */
};

/**
 * sc_arena_extents - describe the memory ranges of @arena that hold payload bytes.
 * @out: receives up to @max extents (may be NULL when @max is 0).
 * Returns the number of extents the arena has (which may exceed @max), or -EINVAL, -EBADMSG.
 * Never blocks, never allocates.
 */
int sc_arena_extents(struct sc_arena *arena, struct sc_arena_extent *out, unsigned max);

/**
 * sc_arena_list - names of the arenas found in the known directories (and @dir if not NULL).
 * Calls @cb once per file named stagecache.<name> whose <name> is a valid arena name, with its
 * directory and name. Files are not opened: sc_arena_open tells an arena from another file.
 * Returns the number found, or a negative errno.
 */
int sc_arena_list(const char *dir, void (*cb)(const char *dir, const char *name, void *ctx), void *ctx);

/* ============================== keys, digests, stages, L2 (lib/l2*.c) ============================== */

/*
 * Digests: unseeded XXH3-128 of payload bytes (the wire), printable as 32 lowercase hex chars
 * (high 64 bits first, as XXH128_canonical). Identical on every machine, so an L3 object can be
 * verified anywhere.
 */
struct sc_digest {
	uint64_t lo; /* XXH128 low64 (probes carry it as digest_lo) */
	uint64_t hi; /* XXH128 high64 */
};
#define SC_DIGEST_HEX_LEN 32

/** sc_digest_of - XXH3-128 (unseeded) of @len bytes at @buf. Never fails; does not allocate. */
struct sc_digest sc_digest_of(const void *buf, size_t len);
#ifndef __cplusplus
/** sc_digest - the former name of sc_digest_of (C only: in C++ the name is the structure's). */
struct sc_digest sc_digest(const void *buf, size_t len);
#endif
/** sc_digest_sections - the digest of the wire @a[0..alen) followed by @b[0..blen) (either may be
 * empty), without concatenating them. Never fails; does not allocate. */
struct sc_digest sc_digest_sections(const void *a, size_t alen, const void *b, size_t blen);
/** sc_digest_format - write 32 lowercase hex chars and a NUL into @out (>= 33 bytes). Returns @out. */
char *sc_digest_format(struct sc_digest d, char out[SC_DIGEST_HEX_LEN + 1]);
/** sc_digest_parse - parse exactly 32 hex chars (either case). 0, or -EINVAL. */
int sc_digest_parse(const char *hex, struct sc_digest *out);
/** sc_digest_equal - 1 when equal. */
static inline int sc_digest_equal(struct sc_digest a, struct sc_digest b)
{
	return a.lo == b.lo && a.hi == b.hi;
}

/* An L2 key: keyed XXH3-128 (secret = the arena's per-arena random secret). */
struct sc_key {
	uint64_t lo, hi;
};

/*
 * Stages. A stage view binds a model identity and a state identity; every key of the stage
 * includes both, so entries of different stages never collide. A stage handle belongs to the
 * struct sc_arena it was opened on and, like that handle, to one thread at a time.
 */
struct sc_stage;
#define SC_IDENTITY_MAX 4096 /* longest model / state identity / namespace, in bytes */

/**
 * sc_stage_open - open a stage view.
 * @arena: an attached arena.  @model_identity, @state_identity: non-empty strings of at most
 * SC_IDENTITY_MAX bytes.  @out: receives the handle (sc_stage_close it before the arena).
 * Returns 0, -EINVAL, -ENOMEM, -EBADMSG (corrupted index region), -ENOTRECOVERABLE (fsck declared
 * the arena unrepairable). Allocates. When the arena's
 * table of per-stage counters is full the stage still works; its counters go to the global line.
 */
int sc_stage_open(struct sc_arena *arena, const char *model_identity, const char *state_identity,
		  struct sc_stage **out);
/** sc_stage_close - flush this handle's pending hit/miss counts and free it (before closing its
 * arena handle). NULL is a no-op. Hits and misses are counted in the stage handle and added to
 * the arena's counters every 1024 lookups, at sc_l2_stats on the same arena handle, and here. */
void sc_stage_close(struct sc_stage *stage);
/** sc_stage_id - the stage id used by probes and stats: low 64 bits of the keyed stage hash. */
uint64_t sc_stage_id(const struct sc_stage *stage);
/**
 * sc_identity_digest - the digest of a (model identity, state identity) pair as L3 objects record
 * it: unseeded XXH3-128 over a domain tag and both strings, length-prefixed (NULL is ""). The same
 * on every machine. Fills compare it with the object's (struct sc_l3_fill_req.identity).
 */
struct sc_digest sc_identity_digest(const char *model_identity, const char *state_identity);
/** sc_stage_identity - sc_identity_digest of the stage's two identities (zero for NULL). */
struct sc_digest sc_stage_identity(const struct sc_stage *stage);

/**
 * sc_l2_key - the L2 key of the prefix @tokens[0..n) in namespace @ns (NUL-terminated, may be "").
 * Encoding hashed: "SCL2KEY1", u32 LE length + model identity, u32 LE length + state identity,
 * u32 LE length + namespace, then n tokens as LE int32 (tokens last, so every prefix's key is a
 * state of one stream). Returns 0, or -EINVAL (NULL stage/out, n > 0 with NULL tokens, namespace
 * too long). Does not allocate.
 */
int sc_l2_key(const struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n, struct sc_key *out);

/**
 * sc_l2_prefix_keys - one hashing pass over @tokens[0..n) yielding the keys of every prefix whose
 * length is a positive multiple of @block (0: 256): keys[i] is the key of the first (i+1)*block
 * tokens. Writes at most @max keys. Returns the number written, or -EINVAL. Does not allocate.
 */
int sc_l2_prefix_keys(const struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
		      uint32_t block, struct sc_key *keys, uint32_t max);

/* Payload kinds. The wire is the sections concatenated (section 0, then section 1). */
enum sc_payload_kind {
	SC_PAYLOAD_FULL_STATE = 1,     /* one section (sec[0]) */
	SC_PAYLOAD_RECURRENT_ONLY = 2, /* one section (sec[0]) */
	SC_PAYLOAD_KV_RECURRENT = 3,   /* sec[0] = KV pages (+ kv_desc when non-empty), sec[1] = recurrent */
};
/** sc_payload_kind_name - "full_state", "recurrent_only", "kv_recurrent", or "unknown". */
const char *sc_payload_kind_name(int kind);

/* KV page descriptor (plain data; copied into the arena with the payload). */
#define SC_KV_DESC_V_TRANSPOSED 0x1u /* flags bit 0 */
#define SC_KV_DESC_HAS_K_INDEX 0x2u  /* flags bit 1 */
#define SC_KV_DESC_FLAGS_MASK 0x3u
#define SC_KV_CODEC_RAW 0u
#define SC_KV_CODEC_1 1u
#define SC_KV_CODEC_ISWA 2u          /* ISWA composite: exactly two components */
#define SC_KV_ROLE_BASE 1u
#define SC_KV_ROLE_SWA 2u
#define SC_KV_DESC_MAX_COMPONENTS 2

struct sc_kv_component {
	uint32_t version;
	uint32_t role;               /* SC_KV_ROLE_* */
	uint64_t token_start;
	uint64_t token_count;
	uint32_t k_type, v_type;
	uint64_t k_row_bytes, v_row_bytes;
	uint64_t payload_offset;     /* within the KV section */
	uint64_t payload_bytes;
	uint32_t flags;
	uint32_t reserved;
};

struct sc_kv_desc {
	uint32_t version;
	uint32_t layer_start, layer_end;
	uint32_t layer_count;
	uint64_t token_start, token_count;
	uint32_t k_type, v_type;
	uint64_t k_row_bytes, v_row_bytes;
	uint64_t v_element_bytes;
	uint64_t k_idx_row_bytes;
	uint64_t payload_bytes;
	uint32_t flags;              /* SC_KV_DESC_* */
	uint32_t codec;              /* SC_KV_CODEC_* */
	uint32_t component_count;    /* 0..SC_KV_DESC_MAX_COMPONENTS */
	uint32_t reserved;
	struct sc_kv_component components[SC_KV_DESC_MAX_COMPONENTS];
};

/**
 * sc_kv_desc_validate - is @desc a valid descriptor of a KV section of @payload_len bytes?
 * Rules: payload_bytes == payload_len; k_idx_row_bytes > 0 exactly when SC_KV_DESC_HAS_K_INDEX;
 * no unknown flag bits; codec 0 or 1 only with no components; codec 2 (ISWA) needs version 2, two
 * components, base (role 1) at offset 0 over the descriptor's token range, SWA (role 2) ending at
 * the same token and starting at offset base.payload_bytes, and offset + bytes == payload_len;
 * anything else is invalid. Returns 0 or -EINVAL.
 */
int sc_kv_desc_validate(const struct sc_kv_desc *desc, uint64_t payload_len);
/** sc_kv_desc_validate_restore - validate, and also token_start == 0, token_count == @prefix_len. */
int sc_kv_desc_validate_restore(const struct sc_kv_desc *desc, uint64_t payload_len, uint64_t prefix_len);

/* What to admit: the kind, the sections, and the KV descriptor (KV_RECURRENT with a non-empty KV
 * section only; NULL otherwise). */
struct sc_payload {
	uint32_t kind;               /* enum sc_payload_kind */
	const void *sec[2];
	uint64_t sec_len[2];         /* sec_len[1] must be 0 unless KV_RECURRENT */
	const struct sc_kv_desc *kv_desc;
};

enum sc_origin {
	SC_ORIGIN_DIRECT = 0,  /* computed by a worker */
	SC_ORIGIN_FROM_L3 = 1, /* promoted from an L3 fill */
};
/** sc_origin_name - "direct", "l3", or "unknown". */
const char *sc_origin_name(int origin);

/*
 * Token counts are uint32_t everywhere (L2, L3, restore; at most UINT32_MAX tokens).
 *
 * A prefix's location: where its durable copy is and what it holds. The one type that L2, L3 and
 * restore share: sc_l3_put and sc_l3_locate_longest fill all of it, a fill needs all of it, and
 * an L2 lookup is validated against token_count and digest only (the other fields are ignored
 * there and may be zero).
 */
struct sc_location {
	uint32_t token_count;          /* length of the prefix */
	uint32_t kind;                 /* enum sc_payload_kind */
	struct sc_digest digest;       /* payload digest (of the wire) */
	struct sc_digest prefix;       /* L3 prefix key (unseeded XXH3-128 of namespace and tokens) */
	uint64_t sec_len[2];
	uint64_t payload_bytes;        /* sec_len[0] + sec_len[1] */
	uint64_t file_bytes;           /* L3 object file size */
	int has_kv_desc;
	uint32_t reserved0;            /* zero */
	struct sc_kv_desc kv_desc;
	uint64_t cost_ns;              /* the compute cost the L3 object records (ns to compute the
					* prefix; 0: none recorded). Filled by sc_l3_put_cost, locates and
					* lookups; ignored by L2 lookups */
	uint64_t reserved[5];          /* zero */
};
/* Deprecated: the name of struct sc_location before L2, L3 and restore shared one location type
 * (`struct sc_l3_location` in programs written then still compiles). Removed in a later release. */
#define sc_l3_location sc_location

/*
 * A lease: a pinned, zero-copy, read-only view of an L2 entry. While held, the entry's memory is
 * not reused (eviction skips it; removal defers the memory until release). Leases are recorded in
 * the process's reader slot, so a killed process's leases are reclaimed. At most SC_LEASES_MAX
 * leases per struct sc_arena handle at once. Release with sc_lease_release.
 *
 * Layout (stable, see the top of this file): the public fields, 64 reserved bytes (zero; room
 * for a later list of scattered segments and a unified location type), then the private block
 * (48 bytes, only the library touches it). A lease may be copied bitwise while held, but
 * released once (by whichever copy).
 */
#define SC_LEASES_MAX 48
struct sc_lease {
	const void *sec[2];          /* section pointers into the arena (read-only) */
	uint64_t sec_len[2];
	uint32_t kind;               /* enum sc_payload_kind */
	uint32_t origin;             /* enum sc_origin */
	uint32_t token_count;
	uint32_t reserved0_;
	struct sc_digest digest;     /* of the wire */
	struct sc_key key;
	int has_kv_desc;
	uint32_t reserved0;          /* zero */
	struct sc_kv_desc kv_desc;   /* a copy, validated against sec_len[0] */
	uint32_t segments;           /* 0: sec[] hold the wire; else the entry's wire is this many
	                              * scattered segments (sec[] are NULL): sc_lease_segments, sc_lease_copy */
	uint32_t reserved1;          /* zero */
	uint64_t reserved[7];        /* zero */
	/* private (48 bytes) */
	struct sc_arena *arena_;
	uint64_t rec_;
	int32_t slot_;
	int32_t reserved_;
	uint64_t private_spare_[3];
};

/*
 * Threads and processes: a struct sc_arena handle owns one reader slot (its epoch and its lease
 * table) and is not thread-safe. Each thread that uses L2 opens its own handle (sc_arena_open)
 * and its own stages on it. After fork(), the child must not use the parent's handles: it opens
 * its own. Close (or release) stages, leases and reservations before closing their arena handle:
 * a reservation outlives its handle's reader slot only until the next orphan sweep.
 */

/*
 * Why an admission did not publish (sc_l2_admit, sc_l2_reserve, sc_l2_publish, and the promotions
 * of sc_restore). Each refusal is counted once under its reason (sc_l2_stats.refused, the
 * promotion's in sc_promote_stats.refused), fires the l2_reject probe with it, and changes nothing
 * stored except what eviction already did (see sc_l2_admit).
 */
enum sc_l2_refusal {
	SC_L2_REFUSE_DIGEST = 0,      /* the wire's digest is not the expected one (-EBADMSG) */
	SC_L2_REFUSE_INVALID = 1,     /* empty, unknown kind, or sections and descriptor disagree (-EINVAL) */
	SC_L2_REFUSE_TOO_LARGE = 2,   /* its footprint is larger than the arena's heap (-E2BIG) */
	SC_L2_REFUSE_OVER_BUDGET = 3, /* larger than the L2 budget, which is below the heap (-E2BIG) */
	SC_L2_REFUSE_LEASED = 4,      /* the entries that could make room are leased, or the room is held
				       * by fills in flight (-ENOSPC) */
	SC_L2_REFUSE_NO_ROOM = 5,     /* enough bytes, but no contiguous room even after evicting by address:
				       * leased entries or fills in flight split the heap (-ENOSPC) */
	SC_L2_REFUSE_SCAN_LIMIT = 6,  /* the bounded eviction scan ended before it found room (-ENOSPC;
				       * the scan's progress is kept, a retry goes further) */
	SC_L2_REFUSE_OTHER = 7,       /* anything else: no lease slot left (-EMFILE), a corrupted arena
				       * (-EBADMSG), no memory for planning (-ENOMEM) */
	SC_L2_REFUSE_COUNT = 8,       /* the size of the refused[] arrays of sc_l2_stats and
				       * sc_promote_stats (which count the reasons above) */
	SC_L2_REFUSE_LOW_BENEFIT = 8, /* the benefit policy's admission: restoring it would cost more than
				       * recomputing it (its compute cost is below what copying its bytes
				       * out of L2 takes), or, under pressure, it is worth less than 1/16 of
				       * what the cache now evicts and did not come back through the ghost
				       * (-ENOSPC; counted in the refused_low_benefit fields) */
	SC_L2_REFUSE_REASONS = 9,     /* every reason above (enum values 0 .. REASONS-1) */
};
/** sc_l2_refusal_name - "digest", "invalid", "too_large", "over_budget", "leased", "no_room",
 * "scan_limit", "other", "low_benefit"; "?" for anything else. */
const char *sc_l2_refusal_name(int reason);
/** sc_l2_last_refusal - why the last sc_l2_admit, sc_l2_reserve or sc_l2_publish through @stage
 * did not publish (enum sc_l2_refusal), or -1 when it did (or none was made, or NULL). */
int sc_l2_last_refusal(const struct sc_stage *stage);

/** sc_l2_footprint - the bytes an entry of @bytes wire bytes (with a KV descriptor when
 * @has_kv_desc) for a prefix of @token_count tokens is charged against the L2 budget of @arena
 * (its token ids are stored with it unless the arena was created with SC_ARENA_NO_TOKEN_VERIFY;
 * NULL @arena: as if they are), when it is copied in (sc_l2_admit): the payload, descriptor and
 * token ids rounded to 64 bytes, plus a 64-byte block header. An entry published from a
 * reservation (sc_l2_reserve, L3 fills) keeps its reservation's block, page aligned and rounded to
 * 4 KiB from 4 KiB on. UINT64_MAX when it could never be allocated. */
uint64_t sc_l2_footprint(const struct sc_arena *arena, uint64_t bytes, int has_kv_desc, uint32_t token_count);

/**
 * sc_l2_admit - copy a payload into L2 under the key of (@ns, @tokens[0..n)).
 * Checks, in order, each refusal counted in admission_rejects (when @stage is not NULL) and
 * leaving the cache unchanged:
 *  -EINVAL   n == 0, NULL tokens or payload, unknown origin, a section length with a NULL pointer,
 *            namespace too long                                      (SC_L2_REFUSE_INVALID);
 *  -EBADMSG  XXH3-128 of the wire != @expected                      (SC_L2_REFUSE_DIGEST);
 *  -EINVAL   empty payload, unknown kind, sections and descriptor inconsistent (sc_kv_desc_validate)
 *            (SC_L2_REFUSE_INVALID);
 *  -E2BIG    larger than the heap (TOO_LARGE) or the budget (OVER_BUDGET); refused_bytes += wire.
 * Then makes room (never evicting a leased entry or the entry being replaced): eviction is S3-FIFO
 * (a small probationary FIFO, a main FIFO, a ghost of recently evicted keys; see docs/DESIGN.md,
 * "L2 under memory pressure"); when the heap is fragmented it evicts the neighbours of the next
 * victim by address until one contiguous block fits. An entry up to the whole budget is
 * published whenever the heap holds a run of unleased entries and free space long enough for it.
 * When room cannot be made: -ENOSPC (LEASED, NO_ROOM or SCAN_LIMIT: sc_l2_last_refusal says
 * which); what was evicted on the
 * way stays evicted. An existing entry of the key is replaced atomically (readers see the old
 * entry or the new one). Also -EBADMSG (corrupted index), -ENOTRECOVERABLE (fsck declared the
 * arena unrepairable; not counted).
 * The budget is checked against the heap's allocated bytes before allocating, so concurrent
 * admissions may overshoot it by at most what is in flight.
 * May block on shard/policy/heap mutexes; allocates only transiently (lease lists).
 * To promote an L3 fill (origin SC_ORIGIN_FROM_L3) use sc_promote_admit, which also records the
 * outcome in the promotion table; an sc_l2_admit with SC_ORIGIN_FROM_L3 records nothing.
 */
int sc_l2_admit(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
		struct sc_digest expected, const struct sc_payload *payload, uint32_t origin);

/*
 * Compute costs: what a hit on an entry saves. L2 keeps what saves the most compute per byte
 * (docs/DESIGN.md, "The benefit policy"): each entry's density is cost / footprint, and S3-FIFO's
 * choices are weighted by it against the density of what the cache is evicting. An entry with no
 * known cost (0) is weighed as the average, so a cache whose entries all carry no cost, or all the
 * same cost per byte, behaves exactly as plain S3-FIFO. Costs are clamped to SC_COST_MAX.
 */
#define SC_COST_MAX (1ull << 50) /* ns (13 days of compute for one prefix); larger costs are clamped */

/**
 * sc_l2_admit_cost - sc_l2_admit with the prefix's measured compute cost: @cost_ns, the ns it took
 * (or takes) to compute these @n tokens' state from nothing. 0: unknown, then the stage's declared
 * per-token cost times @n (sc_stage_set_token_cost) if it declared one. A cost below what copying
 * the payload out of L2 takes (SC_L2_RESTORE_PS_PER_BYTE) is refused: a hit would be slower than
 * recomputing (-ENOSPC, SC_L2_REFUSE_LOW_BENEFIT). Otherwise as sc_l2_admit, plus that refusal
 * under pressure (see enum sc_l2_refusal). Any @cost_ns is accepted (UINT64_MAX is clamped).
 */
int sc_l2_admit_cost(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
		     struct sc_digest expected, const struct sc_payload *payload, uint32_t origin, uint64_t cost_ns);

/* What the admission's net-benefit rule assumes a hit costs: copying the payload out of host RAM
 * at 20 GB/s (50 ps per byte). */
#define SC_L2_RESTORE_PS_PER_BYTE 50u

/**
 * sc_stage_set_token_cost - declare what computing one token of this stage's prefixes costs, in
 * ns (0: nothing declared). An admission or promotion that brings no cost of its own is charged
 * token count x this (saturating). Recorded in the arena's record of the stage, so every process
 * of the stage sees it. Returns 0, -EINVAL (NULL), -ENOSPC (the arena's table of stage records was
 * full: the declaration stays in this handle). Never blocks.
 */
int sc_stage_set_token_cost(struct sc_stage *stage, uint64_t ns_per_token);
/** sc_stage_token_cost - the per-token cost declared for this stage (0: none). 0 or -EINVAL. */
int sc_stage_token_cost(const struct sc_stage *stage, uint64_t *ns_per_token);

/**
 * sc_l2_get - look (@ns, @tokens[0..n)) up without a lock; on a hit fill @lease.
 * @location: optional; when given and the entry's token_count or digest differ, the entry is
 * removed and the call is a miss.
 * Returns 0 (hit), -ENOENT (miss), -EBADMSG (corrupted index entry: counted as a miss),
 * -EMFILE (SC_LEASES_MAX leases already held by this handle), -EINVAL. On every error @lease (when
 * not NULL) is left empty: sc_lease_release on it does nothing.
 * Never blocks, never allocates (except when a location mismatch removes the entry).
 */
int sc_l2_get(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
	      const struct sc_location *location, struct sc_lease *lease);
/** sc_l2_get_key - as sc_l2_get with a precomputed key and no location. The caller owns the key:
 * without the tokens no token ids can be compared (use sc_l2_get for exact tokens). */
int sc_l2_get_key(struct sc_stage *stage, struct sc_key key, struct sc_lease *lease);
/** sc_lease_release - release a lease (idempotent on a zeroed/released lease). */
void sc_lease_release(struct sc_lease *lease);

/* Metadata of an entry (peek, ls). */
struct sc_l2_entry_info {
	struct sc_key key;
	uint64_t stage_id;
	uint32_t token_count;
	uint32_t reserved0_;
	uint64_t bytes;              /* wire bytes */
	uint64_t footprint;          /* bytes charged to the budget */
	uint64_t sec_len[2];
	struct sc_digest digest;
	uint32_t kind, origin;
	uint64_t created_unix_ns;
	uint32_t frequency;          /* hits since the policy last looked, 0..3 (S3-FIFO's counter) */
	int has_kv_desc;
	uint64_t cost_ns;            /* compute a hit saves, as admitted (0: unknown; see sc_l2_admit_cost) */
	uint64_t reserved[5];        /* zero */
};

/**
 * sc_l2_get_copy - copy the payload wire of the entry into @buf (@cap bytes) without a lease.
 * @info (optional) receives the metadata. Returns the wire length (0..), -ENOENT, -ENOBUFS
 * (@cap too small: info->bytes says how much is needed; counts nothing), -EBADMSG (a damaged entry,
 * or copied bytes that are not the entry's digest: someone wrote into the arena), -EINVAL.
 * Counts a hit or a miss; @location as in sc_l2_get. Never blocks; the copy runs inside the
 * read-side section (it delays reclamation, not writers).
 */
int64_t sc_l2_get_copy(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
		       const struct sc_location *location, void *buf, uint64_t cap, struct sc_l2_entry_info *info);

/** sc_l2_peek - metadata only; changes no recency/frequency state and counts nothing.
 * Returns 0, -ENOENT, -EBADMSG, -EINVAL. */
int sc_l2_peek(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
	       struct sc_l2_entry_info *info);

/**
 * sc_l2_longest_prefix - the longest cached prefix of @tokens[0..n) whose length is a multiple of
 * @block (0: 256), tried longest first after one hashing pass. On a hit *len is its length and
 * @lease is filled (as sc_l2_get). Returns 0, -ENOENT, -EMFILE, -EINVAL, -EBADMSG.
 */
int sc_l2_longest_prefix(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
			 uint32_t block, uint32_t *len, struct sc_lease *lease);

/** sc_l2_remove - remove the entry with @key (memory deferred while leased). 0, -ENOENT, -EBADMSG. */
int sc_l2_remove(struct sc_stage *stage, struct sc_key key);
/** sc_l2_invalidate_digest - remove every entry (all stages) whose payload digest is @digest.
 * Returns the number removed, or a negative errno. O(index entries). */
int sc_l2_invalidate_digest(struct sc_arena *arena, struct sc_digest digest);
/** sc_l2_shrink_to - set the L2 budget to @bytes (0: the whole heap) and evict unleased entries
 * until the L2 bytes fit. Returns 0, -EAGAIN (bounded work done; call again), -EBUSY (only leased
 * entries are left above the budget). */
int sc_l2_shrink_to(struct sc_arena *arena, uint64_t bytes);
/** sc_l2_clear - remove every entry (leased ones' memory deferred). Returns the number removed. */
int sc_l2_clear(struct sc_arena *arena);

struct sc_l2_stats {
	uint64_t entries, bytes, logical_bytes, budget_bytes;
	uint64_t hits, misses, inserts, evictions, admission_rejects, refused_bytes;
	uint64_t leases, pending_reclaim_bytes, free_bytes, largest_free_block;
	uint64_t refused[SC_L2_REFUSE_COUNT]; /* admission_rejects by enum sc_l2_refusal */
	/* the eviction policy, always global: entries and bytes on S3-FIFO's small and main FIFOs,
	 * entries moved from small to main, re-admissions found in the ghost */
	uint64_t small_entries, small_bytes, main_entries, main_bytes, moved_to_main, ghost_hits;
	/* segments (arenas with segment_bytes; always global): payload bytes stored for the live
	 * entries (logical_bytes counts each entry whole; physical counts each stored segment once,
	 * plus segments kept for others after their entry left), saved = logical - physical (0 when
	 * negative), indexed segments, bytes of blocks kept only for others, and bytes admits found
	 * stored already (cumulative) */
	uint64_t physical_bytes, saved_bytes, segments, segment_holder_bytes, segment_dedup_bytes;
	/* the benefit policy: admissions refused as SC_L2_REFUSE_LOW_BENEFIT (this stage's, or all),
	 * and unhit entries kept one more pass for their benefit (always global) */
	uint64_t refused_low_benefit, credit_kept;
	uint64_t reserved[1];        /* zero (room for a later counter) */
};
/**
 * struct sc_segment - one contiguous range of a leased wire (sc_lease_segments).
 */
struct sc_segment {
	const void *ptr;             /* into the arena (read-only), valid while the lease is held */
	uint64_t len;
	uint32_t section;            /* 0 or 1 */
	uint32_t reserved;
};
/**
 * sc_lease_segments - the ranges that make a leased wire, in order: a contiguous entry gives its
 * (non-empty) sections, a scattered one (lease->segments > 0) its segments.
 * @out: room for @max of them (may be NULL when @max is 0).
 * Returns how many there are (more than @max: only @max were written), or -EINVAL (no lease),
 * -EBADMSG (the entry's segment record is corrupted). Does not block or allocate.
 */
int sc_lease_segments(const struct sc_lease *lease, struct sc_segment *out, uint32_t max);
/**
 * sc_lease_copy - copy a leased wire (section 0 then section 1) into @buf of @cap bytes.
 * Returns the bytes copied, -ENOBUFS (@cap too small), -EINVAL, -EBADMSG.
 */
int64_t sc_lease_copy(const struct sc_lease *lease, void *buf, uint64_t cap);

/** sc_l2_stats - global counters (@stage NULL) or one stage's (entries/bytes of that stage;
 * leases, pending, free and largest_free_block are always global). Flushes this handle's pending
 * hit/miss counts first. 0, -EINVAL, -EBADMSG. O(index entries). */
int sc_l2_stats(struct sc_arena *arena, const struct sc_stage *stage, struct sc_l2_stats *st);

/**
 * sc_l2_stage_ids - the stage ids that have counters in @arena (every stage ever opened on it,
 * while the arena's table of 1024 stage records lasts), for tools that report every stage
 * without knowing their identities. Writes up to @max ids into @ids (may be NULL when @max is 0).
 * Returns how many there are (which may exceed @max), or -EINVAL, -EBADMSG. Never blocks.
 */
int sc_l2_stage_ids(struct sc_arena *arena, uint64_t *ids, unsigned max);

/** sc_l2_stats_id - as sc_l2_stats for the stage with id @stage_id (0: the whole arena), which
 * need not be open in this process. Returns 0, -ENOENT (no counters for that id), -EINVAL, -EBADMSG. */
int sc_l2_stats_id(struct sc_arena *arena, uint64_t stage_id, struct sc_l2_stats *st);

/*
 * Miss reasons: why a lookup found nothing. Every L2 lookup that misses (sc_l2_get, sc_l2_get_copy,
 * sc_l2_longest_prefix, and the lookup of sc_restore) is counted under one reason, from what the
 * arena remembers of the key (the departure table: what evicted, removed or refused it); every
 * sc_restore that returns no state is counted under one reason too. Per stage and globally
 * (sc_miss_stats), fired as the miss probe, shown by `stagecache stats`, the exporter and
 * `stagecache trace`. The departure table is bounded (as many slots as the index has entries):
 * a key whose record was forgotten misses as NEVER_STORED.
 */
enum sc_miss_reason {
	SC_MISS_NEVER_STORED = 0,     /* no record that it was stored (L2: never admitted; restore:
				       * nothing in L3 for any prefix of the tokens) */
	SC_MISS_EVICTED_PRESSURE = 1, /* L2: evicted to make room for other admissions */
	SC_MISS_EVICTED_BUDGET = 2,   /* L2: evicted because the budget was lowered (sc_l2_shrink_to) */
	SC_MISS_EVICTED_JANITOR = 3,  /* its L3 object was evicted (a janitor, sc_l3_evict_to, the store's
				       * budget) or vanished under a fill; L2 mirrors of it went with it */
	SC_MISS_REFUSED = 4,          /* L2: its admission was refused (detail: enum sc_l2_refusal) */
	SC_MISS_NOT_PROMOTED = 5,     /* L2: filled from L3, the promotion policy has not promoted it
				       * (detail: enum sc_promote_why) */
	SC_MISS_REMOVED = 6,          /* L2: removed (sc_l2_remove, a stale mirror, sc_l2_invalidate_digest,
				       * sc_l2_clear: detail 0..3) */
	SC_MISS_IDENTITY = 7,         /* restore: the object is another model's or state's */
	SC_MISS_QUARANTINED = 8,      /* the object failed verification (quarantined; its mirrors dropped) */
	SC_MISS_DEADLINE = 9,         /* restore: it would not beat recomputing (detail: enum
				       * sc_deadline_detail; sc_restore_with returned -ETIME) */
	SC_MISS_COLLISION = 10,       /* L2: the key holds another prefix (a key collision) */
	SC_MISS_CORRUPT = 11,         /* L2: the entry failed validation (a corrupted index entry) */
	SC_MISS_BUSY = 12,            /* restore: another process is filling it (no SC_RESTORE_WAIT), or
				       * the wait for it ended (-ETIMEDOUT) */
	SC_MISS_COUNT = 13,
};
#define SC_MISS_MAX 16 /* the size of the arrays of struct sc_miss_stats indexed by reason */
/** sc_miss_reason_name - "never_stored", "evicted_pressure", "evicted_budget", "evicted_janitor",
 * "refused", "not_promoted", "removed", "identity", "quarantined", "deadline", "collision",
 * "corrupt", "busy"; "?" otherwise. */
const char *sc_miss_reason_name(int reason);

/* Details of SC_MISS_DEADLINE. */
enum sc_deadline_detail {
	SC_DEADLINE_PREDICTED = 0, /* the predicted fill would end past the deadline or cost more than
				    * recomputing: no fill was started */
	SC_DEADLINE_PAST = 1,      /* the deadline had passed before a fill could start: none was */
	SC_DEADLINE_ABANDONED = 2, /* a fill ran past the deadline and was abandoned (its memory stays
				    * reserved until its reads completed; nothing is published) */
	SC_DEADLINE_WAITED = 3,    /* waiting for another process's fill ran past the deadline */
	SC_DEADLINE_COUNT = 4,
};
/** sc_deadline_detail_name - "predicted", "past", "abandoned", "waited"; "?" otherwise. */
const char *sc_deadline_detail_name(int detail);

struct sc_miss_stats {
	uint64_t l2[SC_MISS_MAX];      /* L2 lookups that missed, by enum sc_miss_reason */
	uint64_t restore[SC_MISS_MAX]; /* sc_restore calls that returned no state, by reason */
	uint64_t l2_refused[SC_MISS_MAX]; /* of l2[SC_MISS_REFUSED], by enum sc_l2_refusal */
	uint64_t deadline[8];          /* of restore[SC_MISS_DEADLINE], by enum sc_deadline_detail */
	uint64_t reserved[8];          /* zero */
};

/**
 * sc_miss_stats - the miss reasons of stage @stage_id (0: the whole arena). Flushes this handle's
 * pending counts first (L2 misses are counted in the stage handle, like hits, and added to the
 * arena every 1024 lookups). Returns 0, -ENOENT (no record of that stage), -EINVAL, -EBADMSG.
 * Never blocks.
 */
int sc_miss_stats(struct sc_arena *arena, uint64_t stage_id, struct sc_miss_stats *st);

/**
 * sc_l2_list - call @cb for each live entry (all stages), in index order, at most @max (0: all).
 * A non-zero return from @cb stops the walk. Returns the number reported or a negative errno.
 */
int sc_l2_list(struct sc_arena *arena, int (*cb)(const struct sc_l2_entry_info *e, void *ctx), void *ctx,
	       uint64_t max);

/**
 * sc_l2_entry_tokens - the live entry with @key (any stage): its metadata into @info (may be NULL)
 * and its token ids into @tokens (room for @cap; may be NULL when @cap is 0). For tools that
 * report what L2 holds by prefix (`stagecache events`, `ls --tokens`): the ids are the ones the
 * entry stored at admission and compares on every hit.
 * Returns the entry's token count (more than @cap: only @cap ids were copied), or -ENOENT (no live
 * entry with @key), -ENODATA (the arena stores no token ids: SC_ARENA_NO_TOKEN_VERIFY), -EBADMSG
 * (a corrupted index entry or allocation), -EINVAL (NULL @arena, or NULL @tokens with @cap > 0),
 * -ECHILD (a forked child's copy of the handle). Never blocks, never allocates: the copy runs
 * inside the read-side section.
 */
int64_t sc_l2_entry_tokens(struct sc_arena *arena, struct sc_key key, struct sc_l2_entry_info *info, int32_t *tokens,
			   uint32_t cap);

/* An arena reservation (sc_l2_reserve, <stagecache_parts.h>): here because struct sc_restore
 * holds one in its private block. */
struct sc_l2_resv {
	void *ptr;                   /* first byte, writable */
	uint64_t bytes;              /* usable bytes (>= requested) */
	/* private (24 bytes) */
	struct sc_arena *arena_;
	uint64_t off_;
	uint64_t asked_;
};

/* ============================== L3 store and promotion (lib/l3*.c, lib/promote.c) ============================== */

/*
 * The L3 store: a directory on local disk holding one durable object per payload digest, with a
 * prefix index (namespace, token length, tokens) -> digest. Any number of processes may use one
 * directory at once. Fills read objects with io_uring straight into caller memory (normally an
 * arena allocation) and verify every byte before returning.
 * The prefix index is keyed by namespace and tokens only (unseeded, so a directory can move between
 * machines): when stages of different models or state identities share one directory, give each
 * its own namespace (e.g. prefixed with the model identity).
 */
struct sc_l3;

enum sc_l3_odirect {
	SC_L3_ODIRECT_AUTO = 0, /* O_DIRECT when the alignment rules allow and the file is not cached */
	SC_L3_ODIRECT_ON = 1,   /* O_DIRECT whenever the alignment rules allow */
	SC_L3_ODIRECT_OFF = 2,  /* always buffered */
};
/** sc_l3_odirect_name - "auto", "on", "off", or "unknown". */
const char *sc_l3_odirect_name(int o_direct);

/* Longest model identity, state identity and namespace an object records. */
#define SC_L3_STR_MAX 1023u
/* At most this many prefix lengths are probed by sc_l3_locate_longest. */
#define SC_L3_MAX_PROBES 64u
/* Largest queue depth of a fill ring. */
#define SC_L3_MAX_QUEUE_DEPTH 1024u

#define SC_L3_OPEN_NO_RECONCILE 0x1u /* skip start-up reconciliation (read-only tools) */
#define SC_L3_OPEN_SHARED 0x2u       /* several hosts share DIR (recorded in DIR/shared: sticky) */
#define SC_L3_OPEN_NO_CREATE 0x4u    /* @dir must already be an L3 directory: create nothing at open */
#define SC_L3_OPEN_MASK 0x7u
#define SC_L3_FD_CACHE_NONE 0xffffffffu /* sc_l3_opts.fd_cache: keep no file open between fills */
#define SC_L3_FD_CACHE_MAX 65536u       /* sc_l3_opts.fd_cache: at most this many */
#define SC_L3_FD_KEEP_MS 600000u        /* FUSE: a kept file is reopened this long after its open */

/* Longest host identity (sc_l3_opts.host_id). */
#define SC_L3_HOST_ID_MAX 64u

/**
 * struct sc_l3_opts - zero-initialise; every zero field takes its default.
 *
 * Shared mode (a directory that several hosts mount, e.g. on CephFS): set SC_L3_OPEN_SHARED once
 * (DIR/shared then records it for every later open), or open a directory on CephFS, which is
 * shared mode by itself. In shared mode each host keeps its own counters (in @state_dir), puts
 * never scan the directory, and eviction and cleanup are done by one janitor at a time
 * (sc_l3_janitor), elected by a lock on DIR/janitor.
 */
struct sc_l3_opts {
	uint64_t budget_bytes;   /* bytes of object files to keep; 0: unlimited. On a filesystem that
				  * reports no size (ceph-fuse without a mgr) this is the only limit */
	uint64_t min_free_bytes; /* refuse a put that would leave less free space; 0: none (ignored
				  * where the filesystem reports no size) */
	uint32_t queue_depth;    /* fills reading at once per thread (as many more may be submitted:
				  * they wait, and start as reads end); 0: 64 */
	int o_direct;            /* enum sc_l3_odirect */
	uint32_t file_mode;      /* mode of the files it creates, exactly (umask ignored); 0: 0600. Directories get
				  * the same plus x where r is given (0660 -> 0770), and setgid with @gid */
	uint32_t flags;          /* SC_L3_OPEN_* */
	const char *host_id;     /* this host's identity: 1 to SC_L3_HOST_ID_MAX of [A-Za-z0-9_-]. It
				  * names everything a host owns in DIR (temp files, access records, the
				  * janitor record and log). NULL: /etc/machine-id (else the host name) */
	const char *state_dir;   /* shared mode: where this host keeps its counters; NULL: /dev/shm */
	uint32_t visibility_ms;  /* shared mode: how long a file made on another host may stay
				  * invisible here (plus clock skew between hosts). Nothing is removed
				  * on the strength of "missing" unless what named it is older than this.
				  * 0: 10000 (ceph-fuse 16.2 measured: p99 28 ms, max 70 ms) */
	uint32_t fd_cache;       /* object files a handle keeps open for later fills (an open is a
				  * round trip on a network filesystem, a disk read of a cold inode on a
				  * local one): 0: min(4096, RLIMIT_NOFILE / 4) on FUSE; on a local
				  * filesystem (ext4, XFS, Btrfs, tmpfs ...) as many but only files of at
				  * most 1 MiB + 4 KiB, 256 MiB of them in all; on kernel CephFS or NFS
				  * none; N: N of any size (at most RLIMIT_NOFILE / 2);
				  * SC_L3_FD_CACHE_NONE: none. On a kernel filesystem each use checks that
				  * the name still names the kept file; on FUSE (where that lookup is the
				  * round trip saved) an object another process or host removed may be read
				  * (verified as always) until SC_L3_FD_KEEP_MS after the file's open */
	int64_t gid;             /* group of every file and directory it creates (the caller must be a
				  * member); 0: the caller's. With file_mode 0660 members of the group share the
				  * store: any of them can put, fill, reconcile and evict. */
	uint64_t reserved[2];    /* zero */
};

/**
 * sc_l3_open - open (creating if needed, unless SC_L3_OPEN_NO_CREATE) the L3 directory @dir and
 * reconcile it: stale temp files of dead writers are removed, objects with an invalid header are
 * quarantined (L2 mirrors of their digests are invalidated in the next arena bound to any handle:
 * sc_l3_bind_arena), prefix entries naming objects that are gone are dropped (those naming a
 * quarantined object stay until a locate reports them), and the budget is enforced.
 * Every file is opened without following links or blocking: a FIFO or link planted under an
 * object's name is left alone by reconciliation and refused by a fill.
 * Returns 0, -EINVAL (bad opts or flags, non-zero reserved), -ENOENT (SC_L3_OPEN_NO_CREATE: @dir is
 * missing or is not an L3 directory; nothing was created), -ENOTDIR, -EACCES, -EPERM (@gid: not a
 * group of the caller), -EBADMSG (DIR/state is not an L3 state file), or another negative errno.
 * Blocks on disk I/O; allocates the handle.
 */
int sc_l3_open(const char *dir, const struct sc_l3_opts *opts, struct sc_l3 **out);

/** sc_l3_close - free the handle and every thread's ring. No fill may be in flight. NULL: no-op. */
void sc_l3_close(struct sc_l3 *l3);

/** What sc_l3_put stores. The digest covers the wire (section 0 then section 1). */
struct sc_l3_put_args {
	const char *model_identity;       /* recorded in the object; may be NULL. A restore fills it only
					   * into stages of this model and state identity (both NULL:
					   * into any stage) */
	const char *state_identity;       /* recorded in the object; may be NULL */
	const char *ns;                   /* namespace; NULL means "" */
	const int32_t *tokens;            /* the prefix this payload restores */
	uint32_t token_count;             /* >= 1 */
	const struct sc_payload *payload; /* kind, sections, KV descriptor (rules as sc_l2_admit) */
};

/* Where a durable copy is: struct sc_location (the L2 section), what sc_l3_locate_longest and
 * sc_l3_put return and a fill needs. */

/**
 * sc_l3_put - write a payload through to disk: temp file, io_uring write, fsync, rename, fsync of
 * the directory; then the prefix entry the same way. Putting a digest that exists only adds the
 * prefix entry (idempotent); concurrent puts of any digests from any processes are safe.
 * @loc: if not NULL, receives the location.
 * Returns 0 once the object and the prefix entry were both seen in place (a concurrent eviction
 * or drop is repaired by writing again), -EINVAL (bad args), -E2BIG (larger than the budget) or
 * -ENOSPC (below min_free, or the disk is full): refusals are counted in write_refusals; -EAGAIN
 * (evicted again as fast as it was written, four times: the budget is too small for the load);
 * or another negative errno.
 * Blocks on disk I/O (fsync), may evict least recently used objects (shared mode: only when the
 * store is over budget and no janitor holds the lease: a janitor pass); allocates a little.
 */
int sc_l3_put(struct sc_l3 *l3, const struct sc_l3_put_args *args, struct sc_location *loc);

/**
 * sc_l3_put_cost - sc_l3_put that records @cost_ns, the prefix's measured compute cost (ns; 0:
 * none, clamped to SC_COST_MAX), in the object's header, where every later fill finds it
 * (struct sc_location.cost_ns, struct sc_l3_fill_req.cost_ns) and sc_restore's promotions carry it
 * into L2. Objects written before costs existed read as cost 0. A put of a digest that is stored
 * already keeps the object (and the cost it records). Returns as sc_l3_put.
 */
int sc_l3_put_cost(struct sc_l3 *l3, const struct sc_l3_put_args *args, uint64_t cost_ns, struct sc_location *loc);

/* The most puts one sc_l3_put_many takes (each holds four descriptors while it is made). */
#define SC_L3_PUT_MANY_MAX 64

/**
 * sc_l3_put_many - @n puts made durable together (group commit): every object's and entry's temp
 * file is written, all of them are fsync'd in one round (submitted together on the thread's ring,
 * so the filesystem commits them as one), each object then its entry is renamed into place, and
 * the directories that gained a name are fsync'd in a second round, each once. The batch pays two
 * fsync latencies for all of its files (sc_l3_put and sc_l3_put_cost are batches of one). Each
 * put is acknowledged only once its object and its entry are durable and were seen in place. A
 * segmented object (segments on and a payload above one), and a put that a concurrent eviction or
 * drop raced with, is made alone inside the call: object then entry, each fsync'd, renamed and its
 * directory fsync'd before the next.
 * @args: @n put requests, each under the rules of sc_l3_put; the same digest or prefix twice is
 * allowed (the later entry wins, as when they are put one after the other).
 * @costs: NULL (no costs recorded), or @n costs as sc_l3_put_cost's @cost_ns.
 * @n: 1 to SC_L3_PUT_MANY_MAX.
 * @locs: NULL, or @n locations, filled for each put acknowledged.
 * @rcs: NULL, or @n results, each what sc_l3_put_cost would return for that put.
 * Returns 0 when every put was acknowledged; -EINVAL (a NULL array, @n out of range, or any put's
 * arguments invalid: then nothing is written and every @rcs is -EINVAL); -ENOMEM; or the first
 * failed put's error (the others may be acknowledged: see @rcs). A writer killed inside the call
 * leaves what sc_l3_put leaves: temp files in DIR/tmp that reconciliation removes, objects with no
 * entry, never an entry served wrong.
 * Blocks on disk I/O (two rounds of fsyncs), may evict like sc_l3_put; allocates.
 */
int sc_l3_put_many(struct sc_l3 *l3, const struct sc_l3_put_args *args, const uint64_t *costs, unsigned n,
		   struct sc_location *locs, int *rcs);

/**
 * sc_l3_locate_longest - the longest prefix of @tokens[0..n) stored for namespace @ns, probing
 * stored token lengths longest first, at most SC_L3_MAX_PROBES of them. One hashing pass.
 * Returns the token count found (> 0) with *@loc filled, 0 when nothing is stored, or a negative
 * errno. A prefix entry naming a missing or invalid object is dropped and probing continues
 * (sc_restore instead reports an entry whose object failed verification: -EBADMSG).
 * Blocks on small file reads.
 */
int sc_l3_locate_longest(struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
			 struct sc_location *loc);

/** sc_l3_lookup - the location of the object with @digest. 0, -ENOENT, -EBADMSG (quarantined: a bad
 * header, or something not a regular file under its name, a link included), or a negative errno. */
int sc_l3_lookup(struct sc_l3 *l3, struct sc_digest digest, struct sc_location *loc);

/*
 * Fills. A fill reads the payload of @loc into @dst with io_uring (O_DIRECT when allowed: @dst
 * aligned to the filesystem's DIO memory alignment and @dst_bytes >= payload rounded up to the
 * DIO offset alignment; registered buffers when @dst lies in memory given to
 * sc_l3_register_memory) and verifies the header (sane, consistent with the file size, checksum,
 * same digest as @loc) and the payload digest. A failed verification moves the object to
 * quarantine/, invalidates L2 mirrors of the digest in the bound arena, and returns -EBADMSG: the
 * bytes in @dst must not be used. When the object's (or a segment's) name no longer names the file
 * the fill read bad (another process replaced it meanwhile), nothing is judged: -ENOENT, a miss
 * (look it up again).
 * Each thread gets its own ring, created on first use.
 */
#define SC_L3_FILL_BUFFERED 0x1u /* never O_DIRECT for this fill */
#define SC_L3_FILL_MASK 0x1u

struct sc_l3_fill_req {
	const struct sc_location *loc; /* in; must stay valid until reaped */
	void *dst;                        /* in: payload destination */
	uint64_t dst_bytes;               /* in: capacity, >= loc->payload_bytes */
	uint32_t flags;                   /* in: SC_L3_FILL_* */
	uint64_t user_data;               /* in: returned untouched */
	uint64_t stage_id;                /* in: for the probes (sc_stage_id), may be 0 */
	int result;                       /* out: 0, -EBADMSG (object corrupt: quarantined; or not a regular file under its name, a link included: not followed), -ENOENT (no such object; or the file read was replaced under the fill: nothing quarantined), -EINVAL (the location does not describe the object: nothing quarantined), -EKEYREJECTED (another stage's: @identity) or another errno */
	int direct;                       /* out: 1 if read with O_DIRECT */
	uint64_t fill_ns;                 /* out: submit to verified */
	struct sc_digest identity;        /* in: zero, or sc_stage_identity() of the stage the bytes are
					   * for: an object put with another model or state identity
					   * fails with -EKEYREJECTED (never quarantined: it is not bad,
					   * only not this stage's). An object put with neither identity
					   * (both NULL or "") claims none and fills for any stage */
	uint64_t cost_ns;                 /* out: the compute cost the object's header records (0: none) */
	uint64_t reserved[1];             /* zero */
	struct sc_l3_fill_req *_next;     /* private (8 bytes) */
};

/**
 * sc_l3_fill_submit - start up to @n fills on this thread's ring. Returns how many were accepted
 * (the first ones; fewer when 2 x queue_depth fills are in flight), or a negative errno when none
 * could be. At most queue_depth of them read at once; the others wait in submission order and
 * start as reads end, before the fills just read are verified (the device is kept busy while this
 * thread hashes). A request that fails before any I/O (missing object, bad arguments) is accepted and
 * completes at once with its result. Never blocks on I/O.
 */
int sc_l3_fill_submit(struct sc_l3 *l3, struct sc_l3_fill_req **reqs, unsigned n);

/**
 * sc_l3_fill_reap - collect up to @max completed (and verified) fills of this thread into @done.
 * @timeout_ns: 0 returns at once, < 0 waits for at least one, > 0 waits at most that long.
 * Returns the count (0 when none completed in time), or a negative errno. Verifies digests.
 */
int sc_l3_fill_reap(struct sc_l3 *l3, struct sc_l3_fill_req **done, unsigned max, int64_t timeout_ns);

/** sc_l3_fill_inflight - fills of this thread submitted but not yet reaped. */
unsigned sc_l3_fill_inflight(struct sc_l3 *l3);

/** sc_l3_fill - one fill, waiting for it. Returns 0 or the request's result (see above). */
int sc_l3_fill(struct sc_l3 *l3, const struct sc_location *loc, void *dst, uint64_t dst_bytes, uint32_t flags);

/**
 * sc_l3_fill_estimate - how long a fill of @bytes started now on this thread's ring would take,
 * predicted from this handle's measured fills (a moving average of the fixed cost per fill and of
 * the time per byte) and the payload bytes already in flight on the ring ahead of it (the queue
 * depth); before this handle measured any, from the directory's counters of all its fills. What
 * sc_restore_with decides by. Returns 0 with *@ns, -ENODATA (nothing measured yet), -EINVAL.
 * Never blocks.
 */
int sc_l3_fill_estimate(struct sc_l3 *l3, uint64_t bytes, uint64_t *ns);

/**
 * sc_l3_register_memory - let fills into [@base, @base+@len) use registered buffers (each
 * thread's ring registers it on next use; where the kernel refuses, plain reads are used).
 * Returns 0, -EINVAL, -ENOSPC (too many ranges). The memory must outlive the handle.
 */
int sc_l3_register_memory(struct sc_l3 *l3, void *base, uint64_t len);

/** sc_l3_bind_arena - quarantine invalidates L2 mirrors in @arena; when the arena is on 2 MiB
 * pages its heap becomes registered memory (on 4 KiB pages pinning it would cost more than it saves).
 * Quarantines done while no arena was bound (at any handle's open, by `l3 verify`, ...) are
 * recorded in DIR/quarantine/<digest>.mirror; binding invalidates their mirrors in @arena and
 * removes the records (so one arena, the next one bound, gets them).
 * The arena handle is then used by whichever thread quarantines: bind a handle only when this L3
 * handle is used by that handle's thread (sc_restore invalidates through its own stage anyway).
 * Returns 0, -EINVAL, or an error of sc_l3_register_memory. */
int sc_l3_bind_arena(struct sc_l3 *l3, struct sc_arena *arena);

struct sc_l3_stats {
	uint64_t objects, bytes;                  /* shared mode: as of the last janitor pass */
	uint64_t fills, fill_bytes, fill_ns;
	uint64_t verify_failures, quarantined, evictions, write_refusals;
	uint64_t puts, put_dedup;
	uint64_t key_collisions;   /* prefix entries whose stored token ids were not the caller's */
	uint64_t budget_bytes;
	uint32_t dio_mem_align, dio_offset_align; /* 0: no O_DIRECT on this filesystem */
	uint64_t fills_kept;                      /* of fills: read a file kept open (sc_l3_opts.fd_cache) */
	uint64_t logical_bytes;    /* what the objects would take stored whole (header block + payload each) */
	uint64_t physical_bytes;   /* what they take: object files plus segment files, a segment once (= bytes) */
	uint64_t saved_bytes;      /* logical - physical (0 when less) */
	uint64_t segments;         /* segment files (sc_l3_set_segment_bytes) */
	uint64_t segment_bytes;    /* the store's segment size for new objects (0: whole objects) */
	uint64_t fill_bytes_from_l2; /* of fill_bytes: segments the arena's L2 held, copied, not read */
	uint64_t identity_mismatches; /* fills refused: the object was put by another model or state
				       * identity (a restore counts them as misses) */
	uint64_t fill_starts;      /* fills submitted (each reads, or fails before reading) */
	uint64_t reserved[3];                     /* zero (room for later counters) */
};

/**
 * sc_l3_set_segment_bytes - record in the store (DIR/segments, read by every process and host at
 * open) that payloads above @segment_bytes are stored as content-addressed segment files, each
 * distinct segment once, the object holding a manifest (docs/DESIGN.md "Segments in L3"). 0: whole
 * objects (the default). Objects already stored keep their form; handles opened earlier keep the
 * size they read until reopened. @segment_bytes: 0, or a multiple of 4096 in [64 KiB, 1 GiB].
 * Returns 0, -EINVAL, or a negative errno from writing the file.
 */
int sc_l3_set_segment_bytes(struct sc_l3 *l3, uint64_t segment_bytes);
/** sc_l3_segment_bytes - the segment size this handle's puts use (0: whole objects). */
int sc_l3_segment_bytes(struct sc_l3 *l3, uint64_t *segment_bytes);

/** sc_l3_stats - counters shared by every process using the directory (since it was created);
 * in shared mode, by every process of this host, with objects and bytes from the last janitor pass. */
int sc_l3_stats(struct sc_l3 *l3, struct sc_l3_stats *st);

/** What a handle knows of its directory's mode and janitor (sc_l3_janitor_status). */
struct sc_l3_janitor_status {
	int shared;                               /* 1: several hosts share the directory */
	uint32_t reserved0;                       /* zero */
	char host_id[SC_L3_HOST_ID_MAX + 1];      /* this handle's host identity */
	char janitor_host[SC_L3_HOST_ID_MAX + 1]; /* host of the last lease holder ("": none yet) */
	uint8_t reserved1[6];                     /* zero */
	uint64_t epoch;                           /* the lease's epoch (0: never held) */
	uint64_t pass_start_ns, pass_end_ns;      /* CLOCK_REALTIME of the last pass (0: none yet) */
	uint64_t objects, bytes;                  /* after the last pass */
	uint64_t evictions;                       /* by every janitor, every host, since DIR was made */
	uint64_t passes;
	uint64_t reserved[4];                     /* zero */
};

/**
 * sc_l3_janitor_status - read the janitor record (DIR/janitor) and this handle's identity.
 * Returns 0, -EINVAL, -EBADMSG (the record is damaged: fields as of no pass), or another negative
 * errno. Reads one small file.
 */
int sc_l3_janitor_status(struct sc_l3 *l3, struct sc_l3_janitor_status *st);

struct sc_l3_object_info {
	struct sc_digest digest;
	uint32_t kind, token_count;
	uint64_t payload_bytes, file_bytes;
	int64_t mtime_ns;                  /* last use */
	uint32_t segments;                 /* manifest entries of a segmented object (0: stored whole) */
	uint32_t segments_missing;         /* verify: segment files missing or cut, or replaced under the read of a bad one (the object is kept) */
	uint64_t reserved[3];              /* zero */
	char ns[SC_L3_STR_MAX + 1], model_identity[SC_L3_STR_MAX + 1], state_identity[SC_L3_STR_MAX + 1];
	int valid;                         /* header valid (list) / whole object valid (verify) */
};

/**
 * sc_l3_list - call @cb for every object (headers are checked, payloads are not).
 * Returns the number of objects, or a negative errno (or @cb's non-zero return).
 */
int sc_l3_list(struct sc_l3 *l3, int (*cb)(const struct sc_l3_object_info *, void *), void *ctx);

/**
 * sc_l3_verify - read and verify every object; bad ones are quarantined. @cb (may be NULL) sees
 * each with ->valid set. Returns the number of bad objects, or a negative errno. Reads everything.
 */
int sc_l3_verify(struct sc_l3 *l3, int (*cb)(const struct sc_l3_object_info *, void *), void *ctx);

/* A prefix entry of the store: which object restores which prefix (sc_l3_prefix_get, sc_l3_prefix_list). */
struct sc_l3_prefix_info {
	struct sc_digest prefix;           /* the prefix key (unseeded XXH3-128 of namespace and tokens: the file's name) */
	struct sc_digest digest;           /* payload digest of the object it names */
	uint32_t token_count;
	int object_present;                /* 1: the object file is in the store (a regular file); 0: the
					    * entry dangles (its object was evicted or quarantined) */
	int64_t created_ns;                /* CLOCK_REALTIME of the put that wrote the entry */
	uint64_t reserved[4];              /* zero */
	char ns[SC_L3_STR_MAX + 1];        /* the namespace */
};

/**
 * sc_l3_prefix_get - read the prefix entry named @prefix (and look whether its object is there).
 * @info: receives the entry (may be NULL); @tokens: room for @cap token ids (NULL when @cap is 0).
 * Returns the entry's token count (more than @cap: only @cap were copied), or -ENOENT (no such
 * entry), -EBADMSG (the file is not a valid prefix entry, or a version 1 entry without token ids),
 * -EINVAL (NULL @l3, or NULL @tokens with @cap > 0), or another negative errno from reading it.
 * Blocks on small file reads (an open, a read, a stat); allocates while it reads.
 */
int64_t sc_l3_prefix_get(struct sc_l3 *l3, struct sc_digest prefix, struct sc_l3_prefix_info *info, int32_t *tokens,
			 uint32_t cap);

/**
 * sc_l3_prefix_list - call @cb for every valid prefix entry of the store with its token ids (valid
 * for the call only), in directory order; entries that are not valid are skipped. A non-zero
 * return from @cb stops the walk and is returned.
 * Returns the number of entries reported, -EINVAL, -ENOMEM, or another negative errno from the
 * listing. Blocks on a listing of DIR/prefix and one read per entry; allocates while it runs.
 */
int sc_l3_prefix_list(struct sc_l3 *l3, int (*cb)(const struct sc_l3_prefix_info *info, const int32_t *tokens, void *ctx),
		      void *ctx);

/**
 * sc_l3_evict_to - evict least recently used objects until at most @bytes remain. Returns the
 * count. In shared mode this is a janitor pass with that target: -EBUSY when another process
 * holds the janitor lease, -ESTALE when the lease was lost during the pass.
 */
int sc_l3_evict_to(struct sc_l3 *l3, uint64_t bytes);

/*
 * The janitor: budget eviction and cleanup of a directory, done by one process at a time across
 * every host sharing it. The lease is an exclusive flock() on DIR/janitor; each new holder bumps
 * the epoch recorded in that file (the fencing token) and, before every batch of removals,
 * checks that the file is still the one it locked and still carries its epoch: a janitor that
 * lost its lease (its host's session was evicted, the file was replaced) stops before acting.
 * When a janitor's process dies the lease is free at once; when its host dies, as soon as the
 * filesystem releases the lock (CephFS: when the MDS evicts the host's session).
 *
 * A pass: merge the uses other hosts recorded (DIR/access/, written by every fill and repeated
 * put in batches of up to 128 or once a second) into the last-use table DIR/lru; list every
 * object; remove temp files their writers let go of (no OFD lock on them, and older than the
 * visibility grace); if the objects exceed the budget, remove least recently used ones
 * until 85 % of it remain (an object used since the listing is skipped), each logged to
 * DIR/janitor.log; write DIR/lru and the record (objects, bytes, time).
 * DIR/janitor.log has one line per act: "<t0> <t1> <epoch> <host> <what> <digest> <bytes>", t in
 * CLOCK_REALTIME ns; what = "intent" (written before an unlink, t1 = 0), "evict" (t0..t1 is the
 * unlink), or "quarantine". It is renamed to janitor.log.1 past 4 MiB.
 */
#define SC_L3_JANITOR_WAIT 0x1u /* wait for the lease instead of returning -EBUSY */
#define SC_L3_JANITOR_KEEP 0x2u /* keep the lease after the pass (until a call without it, or close) */
#define SC_L3_JANITOR_FULL 0x4u /* also check every object's header (quarantine bad ones) and drop
				 * prefix entries naming missing objects: reads 4 KiB per object */
#define SC_L3_JANITOR_MASK 0x7u

struct sc_l3_janitor_report {
	uint64_t epoch;                  /* the lease's epoch during this pass */
	uint64_t objects, bytes;         /* after the pass */
	uint64_t evicted, evicted_bytes; /* by this pass */
	uint64_t stale_temps;            /* temp files of writers that are gone, removed */
	uint64_t accesses;               /* access records merged */
	uint64_t quarantined, dropped;   /* FULL: bad objects, prefix entries naming missing objects */
	uint64_t skipped_recent;         /* victims used since the listing, kept */
	uint64_t pass_ns;                /* duration */
	uint64_t reserved[4];            /* zero */
};

/**
 * sc_l3_janitor - run one janitor pass if this handle can hold the lease.
 * @flags: SC_L3_JANITOR_*. @rep: may be NULL.
 * Returns 0 (pass done), -EBUSY (another process holds the lease; without SC_L3_JANITOR_WAIT),
 * -ESTALE (the lease was lost: nothing more was removed after that was seen; call again to
 * compete anew), -EINVAL, or another negative errno (the filesystem failed).
 * Blocks on many file operations (a listing of the whole directory; in local mode, a store of
 * more than 1024 objects under its budget without SC_L3_JANITOR_FULL: no listing, the temp files
 * of dead writers and one bounded reconciliation step; in shared mode without a budget or
 * SC_L3_JANITOR_FULL, a store whose last listing found more than 1024 objects and is less than 10
 * minutes old: no listing, the hosts' access records merged and the temp files of dead writers
 * removed, @rep's objects and bytes the last listing's); allocates.
 */
int sc_l3_janitor(struct sc_l3 *l3, uint32_t flags, struct sc_l3_janitor_report *rep);


/*
 * The restore path: the longest prefix stored in L3, served from its L2 mirror when there is one
 * (validated against the L3 location), else filled from L3 straight into an arena allocation,
 * which the promotion policy may publish in L2 in place (origin SC_ORIGIN_FROM_L3, no copy).
 */
#define SC_RESTORE_WAIT 0x1u /* another process is filling the same digest: wait for it, then use L2 */
#define SC_RESTORE_MASK 0x1u

enum sc_restore_source {
	SC_RESTORE_FROM_L2 = 1,
	SC_RESTORE_FROM_L3 = 2,
};
/** sc_restore_source_name - "l2", "l3", or "unknown". */
const char *sc_restore_source_name(int source);

/** A restored payload: valid until sc_restore_release. Layout: public fields, 64 reserved bytes
 * (zero), then the private block (everything from lease_ on; only the library touches it). */
struct sc_restore {
	const void *sec[2];            /* the sections (read-only) */
	uint64_t sec_len[2];
	uint32_t kind;                 /* enum sc_payload_kind */
	uint32_t token_count;          /* length of the restored prefix */
	struct sc_digest digest;
	int has_kv_desc;
	uint32_t reserved0;            /* zero */
	struct sc_kv_desc kv_desc;
	int source;                    /* enum sc_restore_source */
	int promoted;                  /* this L3 fill was published in L2 */
	int promote_why;               /* enum sc_promote_why of the decision (-1 when served from L2) */
	int waited;                    /* waited for another process's fill (SC_RESTORE_WAIT) */
	int direct;                    /* the fill used O_DIRECT */
	int in_arena;                  /* the sections lie in the arena (sc_arena_extents); 0: private
					  process memory, when L2 could not hold the fill */
	int from_index;                /* the arena's L3 location index answered the locate (no system
	                                * call); 0: the L3 directory was probed */
	uint64_t locate_ns, lookup_ns, fill_ns, total_ns;
	uint64_t predicted_ns;         /* sc_restore_with: the fill time it predicted (0: none) */
	int32_t miss_reason;           /* when no state is returned: enum sc_miss_reason (-1: none) */
	uint32_t miss_detail;          /* its detail (enum sc_deadline_detail for SC_MISS_DEADLINE) */
	uint64_t reserved[6];          /* zero */
	/* private */
	struct sc_lease lease_;
	struct sc_l2_resv resv_;
	void *heap_;
	int state_;
	int private_spare_;
};

/**
 * sc_restore - restore the longest stored prefix of @tokens[0..n) in namespace @ns for @stage.
 * Locates it in @l3; looks it up in L2 validated against that location (token count, digest);
 * on a miss claims the fill (single flight per stage and digest), fills from L3 into an arena
 * reservation (evicting for it only when the promotion policy will promote this fill; else only
 * free arena memory, or private memory), asks the promotion policy, and publishes in place when
 * it says so (by copy when the fill went to private memory); every "promote" ends in one
 * recorded outcome (sc_promote_outcome: published, or refused and why; out->promoted says which).
 * Either way @out holds a lease on the bytes: release it with sc_restore_release.
 * Returns the restored token count (> 0), or -ENOENT (nothing stored), -EBUSY (another process is
 * filling it and SC_RESTORE_WAIT was not given), -ETIMEDOUT (SC_RESTORE_WAIT and the other fill
 * did not finish in time), -EBADMSG (the object of the longest stored prefix failed verification,
 * now or at an earlier open or verify: it is quarantined, its L2 mirrors invalidated and its
 * prefix entry dropped, so the next call finds whatever shorter prefix is stored), -EINVAL,
 * -ENOMEM, -EMFILE (too many leases held), -ENOTRECOVERABLE (the arena was declared
 * unrepairable), or an L3 error. An object that vanished under the fill (evicted by a process not
 * attached to this arena, another host's janitor, another host's quarantine) is a miss of that
 * location: the restore looks again. Blocks on disk I/O.
 */
int sc_restore(struct sc_stage *stage, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
	       uint32_t flags, struct sc_restore *out);

/*
 * Restores that know when not to: a caller that would rather recompute than wait gives a deadline
 * or what recomputing would cost it. From the fill time predicted for the object's size
 * (sc_l3_fill_estimate: measured bandwidth, the queue ahead on this thread's ring) the restore
 * answers -ETIME ("recompute": counted as SC_MISS_DEADLINE) instead of starting a fill that
 * would lose; a fill that runs past the deadline anyway is abandoned: -ETIME, nothing published,
 * its arena reservation kept by this process until the ring reaps its reads (any later fill or
 * restore on this thread, or sc_l3_close), then released. A served L2 hit never waits for the
 * prediction: it is returned whatever the deadline.
 */
struct sc_restore_opts {
	uint32_t flags;          /* SC_RESTORE_* */
	uint32_t reserved0;      /* zero */
	uint64_t deadline_ns;    /* CLOCK_MONOTONIC (sc_clock_ns): the latest time to answer by; 0: none */
	uint64_t recompute_ns;   /* what recomputing the prefix would take the caller, ns: a fill
				  * predicted to take longer is not started; 0: unknown */
	uint64_t reserved[5];    /* zero */
};

/**
 * sc_restore_with - sc_restore with options (NULL: as sc_restore). Returns as sc_restore, and
 * -ETIME when recomputing wins: the deadline had passed, or the predicted fill would end past it
 * (or take longer than recompute_ns), or the fill was abandoned past the deadline (see above);
 * out->miss_reason and miss_detail say which. -EINVAL for unknown flags or a non-zero reserved
 * word. With no fill measured yet (sc_l3_fill_estimate: -ENODATA) a fill is started while the
 * deadline is ahead, and abandoned if it overruns.
 */
int sc_restore_with(struct sc_stage *stage, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		    const struct sc_restore_opts *opts, struct sc_restore *out);

/** sc_clock_ns - CLOCK_MONOTONIC in ns, the clock of sc_restore_opts.deadline_ns. */
uint64_t sc_clock_ns(void);

/** sc_restore_release - release what sc_restore returned (idempotent on a released one). */
void sc_restore_release(struct sc_restore *r);

/*
 * The L3 location index: a table in the arena, shared by every process that binds an L3
 * directory to it (sc_l3_bind_arena, or sc_restore), mapping prefix -> location so that restore
 * and sc_l3_locate_longest need no system call when L2 serves the prefix. Its rules (who updates
 * it, how changes made elsewhere become visible) are in docs/DESIGN.md ("The L3 location index").
 */
struct sc_l3_index_stats {
	uint32_t capacity;           /* entries (0: the arena has no index) */
	uint32_t refresh_ms;         /* entries are trusted this long without the directory */
	uint32_t positive, negative; /* entries now: a prefix entry exists / checked absent */
	uint32_t pages, free_pages;  /* token-id pages (1 KiB each) */
	int token_verify;            /* 1: token ids are stored and compared (L2 and index) */
	int bound;                   /* a directory is bound */
	uint64_t hits;               /* restores/locates answered by a positive entry */
	uint64_t negative_hits;      /* lengths skipped on a fresh negative entry (index not complete) */
	uint64_t misses;             /* lookups the index could not answer (then the directory probe) */
	uint64_t fallbacks;          /* directory probes run */
	uint64_t stale;              /* of the misses: an entry or the lengths older than refresh_ms */
	uint64_t refreshes;          /* directory scans completed + directory probes written back */
	uint64_t inserts, evictions, drops, full;
	uint64_t vanished;           /* objects found gone under a fill or a lookup */
	uint64_t foreign;            /* lookups by an L3 directory other than the bound one */
	uint64_t key_collisions;     /* the sum of the three below */
	uint64_t key_collisions_l2, key_collisions_index, key_collisions_l3;
	uint64_t reserved[8];        /* zero (room for later counters) */
};

/** sc_l3_index_stats - the arena's location index and its key-collision counters (every level).
 * 0, -EINVAL, -EBADMSG. O(index entries); does not allocate. */
int sc_l3_index_stats(struct sc_arena *arena, struct sc_l3_index_stats *st);

/* ============================== commit rings and batcher (lib/batcher.c, lib/ring.c) ============================== */
/*
 * Commit rings. Each producer (a process, or a thread with its own handle) claims one
 * single-producer ring in the arena with sc_ring_open and appends commits to it with
 * sc_ring_try_submit, which never blocks. One consumer at a time reads every ring with
 * sc_ring_poll: records of one ring arrive in order, each with the ring's sequence number
 * (1, 2, 3 ... per claim, with the claim generation), so a consumer can check nothing was lost
 * or reordered. A producer that exits or is killed loses nothing it submitted: the consumer
 * delivers its ring's records, then the ring is reclaimed for another producer.
 *
 * Second consumer: the consumer role is exclusive. The first sc_ring_poll on an arena handle
 * takes it (recorded in the arena with the process's pid and start time); sc_ring_poll on any
 * other handle or process then returns -EBUSY until the holder calls sc_ring_consumer_close or
 * its process dies. A new consumer resumes where the last one published its progress, so
 * records delivered to a consumer that died inside its callback may be delivered again
 * (at-least-once; the pair (ring, gen, seq) identifies a record).
 */
#define SC_COMMIT_FINISHED 0x1u  /* terminal: the generation finished */
#define SC_COMMIT_ABORTED 0x2u   /* terminal: the generation was aborted */
#define SC_COMMIT_MASK 0x3u

/* One commit: a batch of generated tokens of one request. */
struct sc_commit {
	uint64_t request_id;
	uint64_t session_id;
	uint64_t generated_token_count; /* running total of the request's tokens after this batch */
	uint32_t flags;                 /* 0, or one of SC_COMMIT_FINISHED / SC_COMMIT_ABORTED */
	uint32_t token_count;           /* tokens in this batch (0 is allowed, e.g. a bare terminal) */
	const int32_t *tokens;          /* sc_ring_poll: points into the arena, valid during the callback */
	/* set by sc_ring_poll; ignored by sc_ring_try_submit */
	uint32_t ring;                  /* ring index */
	uint32_t gen;                   /* claim generation of the producer that wrote it */
	uint64_t seq;                   /* 1, 2, 3 ... within (ring, gen) */
};

struct sc_ring;

/**
 * sc_ring_open - claim a commit ring of @arena for the calling producer.
 * @out: receives the handle; give it up with sc_ring_close(). Use it from one thread at a time
 *       and not across fork().
 * Returns 0, -EINVAL, -ENOSPC (every ring is owned by a live producer or still holds records
 * the consumer has not taken yet), -EBADMSG (corrupted ring directory), -ECHILD (a forked
 * child's copy of @arena), -ENOMEM.
 * Allocates the handle; one fcntl per LIVE ring looked at tells dead owners from live ones.
 */
int sc_ring_open(struct sc_arena *arena, struct sc_ring **out);

/**
 * sc_ring_close - give the ring up and free the handle. Records already submitted are still
 * delivered; the consumer then frees the ring. NULL is a no-op. Returns 0, -ESTALE (the ring
 * had been taken from this handle: only possible if the arena was tampered with), or -ECHILD (in
 * a forked child, a ring its parent opened: the handle is freed, the ring stays the parent's).
 */
int sc_ring_close(struct sc_ring *ring);

/** sc_ring_index - the index of @ring in the arena's ring directory. */
uint32_t sc_ring_index(const struct sc_ring *ring);

/** sc_ring_max_tokens - the most tokens one commit may carry in this arena's rings. */
uint32_t sc_ring_max_tokens(const struct sc_ring *ring);

/**
 * sc_ring_try_submit - append @c (request_id, session_id, generated_token_count, flags,
 * token_count, tokens) to @ring. Never blocks, never allocates. Fires the commit_emit probe on
 * success and ring_full when there is no room.
 * Returns 0, -EAGAIN (the ring is full: nothing was written; the ring's ring-full counter was
 * incremented), -E2BIG (more than sc_ring_max_tokens tokens), -EINVAL (unknown flags, or
 * tokens NULL with a token_count), -EBADMSG (the ring's consumer index is corrupted).
 */
int sc_ring_try_submit(struct sc_ring *ring, const struct sc_commit *c);

/* Most commits one sc_ring_try_submit_bulk call takes. */
#define SC_RING_BULK_MAX 64u

/**
 * sc_ring_try_submit_bulk - append @n commits (1..SC_RING_BULK_MAX) published together: the
 * consumer sees all of them or none, and the shared tail is written once (e.g. one call per
 * decode step of a batch of sequences). All or nothing; never blocks, never allocates.
 * Returns 0, -EAGAIN (not enough room for all: nothing was written, the ring-full counter was
 * incremented once), -E2BIG (a commit has too many tokens, or all of them together exceed the
 * ring), -EINVAL (n out of range, unknown flags, NULL tokens), -EBADMSG.
 */
int sc_ring_try_submit_bulk(struct sc_ring *ring, const struct sc_commit *c, unsigned n);

/* Called by sc_ring_poll for each record; return 0 to go on, non-zero to stop after this one
 * (the record counts as delivered either way). */
typedef int (*sc_ring_fn)(const struct sc_commit *c, void *ctx);

/**
 * sc_ring_poll - deliver up to @max pending commits from all rings to @cb, in order within
 * each ring, starting one ring later on each call so that no ring starves. Never blocks. Takes
 * the consumer role on the first call (see above). Drained rings of closed or dead producers
 * are reclaimed here. The first call allocates this handle's consumer state.
 * Returns the number delivered (0 when nothing is pending), or -EBUSY (another live consumer
 * holds the role), -EBADMSG (a ring's indices or records are corrupted: that ring is skipped,
 * every other ring was served; see sc_ring_stats), -ECHILD (a forked child's copy of the
 * handle, whether or not the parent held the role), -EINVAL, -ENOMEM.
 */
int sc_ring_poll(struct sc_arena *arena, sc_ring_fn cb, void *ctx, unsigned max);

/** sc_ring_consumer_close - give up the consumer role taken by sc_ring_poll (no-op if not held;
 * in a forked child, a role its parent holds stays the parent's) and free the consumer state.
 * Call before sc_arena_close. */
void sc_ring_consumer_close(struct sc_arena *arena);

enum sc_ring_state {
	SC_RING_FREE = 0,
	SC_RING_CLAIMING = 1,
	SC_RING_LIVE = 2,     /* owned by a producer */
	SC_RING_CLOSED = 3,   /* given up; the rest is being delivered */
};
/** sc_ring_state_name - "free", "claiming", "live", "closed", or "unknown". */
const char *sc_ring_state_name(int state);

/* A snapshot of one ring (for `stagecache stats`). */
struct sc_ring_stat {
	uint32_t ring;
	uint32_t state;         /* enum sc_ring_state */
	uint32_t producer_pid;  /* 0 when free */
	uint32_t gen;           /* claim generation */
	int producer_alive;     /* 1 when state is LIVE and the producer process is running */
	int corrupt;            /* the ring's indices are inconsistent (poll skips it) */
	uint64_t depth_bytes;   /* bytes submitted but not yet delivered */
	uint64_t depth_records; /* records submitted but not yet delivered */
	uint64_t records;       /* records ever submitted to this ring */
	uint64_t delivered;     /* records ever delivered from this ring */
	uint64_t ring_full;     /* submits refused because the ring was full */
	uint64_t ring_bytes;    /* capacity */
	uint64_t reserved[6];   /* zero */
};

/**
 * sc_ring_stats - snapshot up to @max rings into @out (ring i in out[i]).
 * Returns the arena's ring count (which may exceed @max), or -EINVAL, -EBADMSG.
 * Reads /proc to tell whether each producer is alive; does not allocate.
 */
int sc_ring_stats(struct sc_arena *arena, struct sc_ring_stat *out, unsigned max);

/* The generation commit batcher. */
#define SC_BATCHER_CAPACITY_MAX 256u                  /* tokens one batcher holds */
#define SC_BATCHER_INTERVAL_DEFAULT_NS 100000000ull   /* 100 ms */

#define SC_BATCHER_OPT_INTERVAL 0x1u /* interval_ns is meant literally: 0 emits every token at once */
#define SC_BATCHER_OPT_MASK 0x1u

struct sc_batcher_opts {
	uint64_t interval_ns; /* least spacing between commits after the first; 0: 100 ms (unless
				 SC_BATCHER_OPT_INTERVAL) */
	uint32_t capacity;    /* pending tokens that force a commit; 0: 256 (max SC_BATCHER_CAPACITY_MAX) */
	uint32_t flags;       /* SC_BATCHER_OPT_* */
	uint64_t reserved[2]; /* zero */
};

/*
 * Per-request batching state, allocated by the caller (on the stack is fine); the batcher never
 * allocates, reads no clock and takes no lock. Use one from one thread at a time. The structure
 * is opaque: read it through the accessors below (a binding allocates sc_sizeof("sc_batcher")
 * bytes, 8-byte aligned). It may be copied bitwise between calls (it holds no pointer into itself).
 */
struct sc_batcher {
	struct sc_ring *ring;
	uint64_t request_id, session_id;
	uint64_t interval_ns;
	uint64_t last_emit_ns;  /* elapsed time at the last emitted commit */
	uint64_t count;         /* running total, pending tokens included */
	uint64_t ring_full;     /* emits refused because the ring was full */
	uint64_t commits;       /* commits emitted */
	uint32_t capacity, pending;
	uint32_t state;         /* private flags */
	uint32_t reserved;
	int32_t tokens[SC_BATCHER_CAPACITY_MAX];
};

/**
 * sc_batcher_init - start a request's batcher with the defaults (100 ms, 256 tokens).
 * @ring: where commits go; NULL makes a batcher that retains and counts nothing.
 * Returns 0 or -EINVAL (@b NULL).
 */
int sc_batcher_init(struct sc_batcher *b, struct sc_ring *ring, uint64_t request_id, uint64_t session_id);

/**
 * sc_batcher_init_opts - as sc_batcher_init with @opts (NULL: defaults).
 * Returns 0, -EINVAL (capacity above SC_BATCHER_CAPACITY_MAX, unknown flags, non-zero reserved),
 * -E2BIG (capacity above what one record of @ring can carry, see sc_ring_max_tokens).
 */
int sc_batcher_init_opts(struct sc_batcher *b, struct sc_ring *ring, uint64_t request_id, uint64_t session_id,
			 const struct sc_batcher_opts *opts);

/* sc_batcher_commit's success value when the token was taken but the commit it made due found
 * the ring full: the batch stays pending and goes out with a later commit, flush or finish. */
#define SC_BATCHER_DEFERRED 1

/**
 * sc_batcher_commit - record one generated token, emitting a commit when one is due: on the
 * generation's first token, when capacity tokens are pending, when @elapsed_ns (time since
 * the request started, supplied by the caller) is at least interval past the last emitted
 * commit, or when an earlier emit found the ring full. An emit sets the last-emit time to
 * @elapsed_ns. Never blocks, never allocates.
 * Returns (the token was taken in both success cases; never commit it again):
 *  0                    and whatever was due was emitted;
 *  SC_BATCHER_DEFERRED  (1) an emit found the ring full: the batch stays pending (nothing
 *                       dropped or reordered), the ring-full counter was incremented, and the
 *                       next commit, flush or finish retries it;
 *  -EAGAIN              the token was NOT taken: the batcher already held capacity tokens and the
 *                       ring is still full. Commit the same token again once the consumer made
 *                       room (back-pressure); the ring-full counter was incremented;
 *  -EINVAL              after sc_batcher_finish (nothing taken);
 *  -EBADMSG             the ring's consumer index is corrupted (the token, if the buffer had
 *                       room, stays pending; nothing can be emitted to this ring).
 * With no ring: 0 and nothing is kept.
 */
int sc_batcher_commit(struct sc_batcher *b, int32_t token, uint64_t elapsed_ns);

/**
 * sc_batcher_flush - emit whatever is pending (does not move the last-emit time). A second
 * flush, or a flush with nothing pending, is a no-op. Call before the generation's terminal.
 * Returns 0, or -EAGAIN (ring full: the batch stays pending, the ring-full counter is incremented).
 */
int sc_batcher_flush(struct sc_batcher *b);

/**
 * sc_batcher_finish - flush and mark the end of the generation: the last commit carries
 * @terminal_flag (SC_COMMIT_FINISHED or SC_COMMIT_ABORTED) together with the residual tokens,
 * or alone with no tokens when nothing is pending. Afterwards the batcher is finished: another
 * finish is a no-op returning 0 (so it is safe on every exit path) and commit returns -EINVAL.
 * Returns 0, -EAGAIN (ring full: nothing changed, call again), -EINVAL (bad flag).
 */
int sc_batcher_finish(struct sc_batcher *b, uint32_t terminal_flag);

/** sc_batcher_count - tokens recorded so far, pending ones included (0 without a ring). */
uint64_t sc_batcher_count(const struct sc_batcher *b);
/** sc_batcher_pending - tokens recorded but not yet emitted. */
uint32_t sc_batcher_pending(const struct sc_batcher *b);
/** sc_batcher_ring_full - emits that found the ring full. */
uint64_t sc_batcher_ring_full(const struct sc_batcher *b);
/** sc_batcher_commits - commits emitted (the terminal one included). */
uint64_t sc_batcher_commits(const struct sc_batcher *b);

/* ============================== routing: lookups and KV events (lib/lookup.c, lib/events.c) ============================== */

/*
 * How much of a prompt is here, in either tier, in one call: for an agent beside a router that
 * scores workers by the prefix they hold (docs/ROUTING.md).
 */
struct sc_lookup {
	uint32_t tokens;             /* the longest prefix held in either tier: max(l2_tokens, l3_tokens) */
	uint32_t l2_tokens;          /* the longest prefix whose entry L2 holds for the stage (0: none) */
	uint32_t l3_tokens;          /* the longest prefix the L3 store holds for @ns (0: none or no store) */
	uint32_t reserved0;          /* zero */
	struct sc_digest l2_digest;  /* payload digest of the L2 entry found (zero when none) */
	struct sc_digest l3_digest;  /* payload digest of the L3 object found (zero when none) */
	uint64_t l2_bytes;           /* wire bytes of the L2 entry found */
	uint64_t l3_bytes;           /* payload bytes of the L3 object found */
	uint64_t reserved[4];        /* zero */
};

/**
 * sc_lookup - the longest prefix of @tokens[0..n) held in L2 (for @stage) and in L3 (@l3, for
 * namespace @ns), without reading any payload, taking any lease or counting a hit or a miss.
 * L2 is asked at the lengths that are multiples of @block (0: 256), longest first (as
 * sc_l2_longest_prefix), and at the length L3 holds (an entry promoted from L3 has that length);
 * L3 at its stored lengths (as sc_l3_locate_longest, through the arena's location index when
 * @l3 is bound to the stage's arena).
 * @l3: may be NULL (L2 only). @out: receives the answer (zeroed first).
 * Returns 0 (with out->tokens == 0 when nothing is held), -EINVAL (NULL @stage, @tokens or @out,
 * n == 0, a namespace longer than SC_L3_STR_MAX), -EBADMSG (a corrupted L2 index), -ECHILD (a forked
 * child's copy of the handle), or an error of sc_l3_locate_longest (-EBADMSG excepted: an object
 * that fails its checks is no prefix held). Never blocks in L2; L3 may read small files (prefix
 * entries) when its location index cannot answer. Allocates only for more than 512 candidate
 * lengths (-ENOMEM when that fails).
 */
int sc_lookup(struct sc_stage *stage, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
	      uint32_t block, struct sc_lookup *out);

/**
 * sc_block_hashes - the block hashes `stagecache events` publishes for a prefix (docs/ROUTING.md):
 * for each whole block of @block_size tokens of @tokens[0..n), in order, XXH3-64 (seed 0) of the
 * previous block's hash as 8 little-endian bytes (@parent for the first block: 0 when the prefix
 * starts at token 0) followed by the block's token ids as little-endian int32, with bit 63
 * cleared (so the value is the same as a signed and as an unsigned 64-bit integer). A trailing
 * partial block has no hash.
 * @out: room for @max hashes (may be NULL when @max is 0).
 * Returns the number of whole blocks, n / @block_size (more than @max: only @max were written), or
 * -EINVAL (@block_size 0, NULL @tokens with n > 0, NULL @out with @max > 0). Never blocks or
 * allocates.
 */
int64_t sc_block_hashes(const int32_t *tokens, uint32_t n, uint32_t block_size, uint64_t parent, uint64_t *out,
			uint32_t max);

/*
 * KV events: the stream of what the arena holds changing. Every change of what L2 holds (an entry
 * published, evicted, removed, invalidated, cleared) and, for L3 handles bound to the arena
 * (sc_l3_bind_arena), of what L3 holds (a put, an eviction, a quarantine, a prefix entry dropped)
 * is appended to the arena's event ring by the process that made it, while a listener is attached.
 * There is one listener per arena (sc_events_open; `stagecache events` publishes the stream to
 * routers in vLLM's KV-event format, docs/ROUTING.md). With nobody listening a change costs one
 * load of a word. The ring is bounded, lock-free and never makes a writer wait: when it is full
 * the event is dropped and counted, and the listener learns it (SC_EVENT_LOST).
 *
 * An event names what changed, not the state after it: the listener reads the state itself when
 * it handles the event (sc_l2_entry_tokens, sc_l3_prefix_get), so events of one key may arrive in
 * any order and the listener still ends at the truth. After SC_EVENT_LOST, and right after
 * sc_events_open, the listener reads the whole truth (sc_l2_list, sc_l3_prefix_list): every change
 * it did not hear of happened before that.
 */
enum sc_event_type {
	SC_EVENT_L2_STORED = 1,       /* key: an L2 entry was published (admit, publish, replacement) */
	SC_EVENT_L2_REMOVED = 2,      /* key: an L2 entry left (eviction, removal, invalidation) */
	SC_EVENT_L2_CLEARED = 3,      /* every L2 entry was removed (sc_l2_clear) */
	SC_EVENT_L3_STORED = 4,       /* key: the L3 prefix key of a put; digest: its object */
	SC_EVENT_L3_REMOVED = 5,      /* key: an L3 prefix entry was dropped */
	SC_EVENT_L3_OBJECT_GONE = 6,  /* digest: an L3 object was evicted or quarantined (every prefix
				       * entry naming it dangles) */
	SC_EVENT_LOST = 7,            /* events were not delivered (lost_why, token_count = how many,
				       * 0 when unknown): read the whole truth again */
	SC_EVENT_TYPE_COUNT = 8,
};
/** sc_event_type_name - "l2_stored", "l2_removed", "l2_cleared", "l3_stored", "l3_removed",
 * "l3_object_gone", "lost"; "?" for anything else. */
const char *sc_event_type_name(int type);

enum sc_event_lost {
	SC_EVENT_LOST_DROPPED = 1,    /* the ring was full: writers dropped events */
	SC_EVENT_LOST_TORN = 2,       /* a writer died (or stalled) between claiming a slot and filling
				       * it, or a record failed its check */
	SC_EVENT_LOST_WRITER_DIED = 3, /* an attached process died: a change it made just before may
				       * have no event */
	SC_EVENT_LOST_RESET = 4,      /* the ring was reset (sc_events_reset, fsck --repair): what was unread is gone */
};
/** sc_event_lost_name - "dropped", "torn", "writer_died", "reset"; "?" for anything else. */
const char *sc_event_lost_name(int why);

struct sc_event {
	uint32_t type;               /* enum sc_event_type */
	uint32_t token_count;        /* STORED: tokens of the prefix; LOST: events lost (0: unknown) */
	uint64_t stage_id;           /* L2 STORED/REMOVED: the entry's stage (sc_stage_id); else 0 */
	struct sc_key key;           /* L2: the entry's key; L3 STORED/REMOVED: the prefix key */
	struct sc_digest digest;     /* L2 STORED/REMOVED, L3 STORED, L3 OBJECT_GONE: the payload digest */
	uint32_t lost_why;           /* LOST: enum sc_event_lost */
	uint32_t reserved0;          /* zero */
	uint64_t reserved[1];        /* zero */
};

struct sc_events;

/**
 * sc_events_open - become the arena's listener: from now on every change is appended to the event
 * ring until sc_events_close (or this process's death: the role is then taken over by the next
 * sc_events_open, and writers stop appending within the periodic reap, 100 ms while anyone admits).
 * Read the whole truth after it returns (changes made before it have no event).
 * Returns 0, or -EBUSY (a live process listens already, through this handle too: a handle does not
 * listen twice), -EBADMSG (the event region is corrupted),
 * -EINVAL, -ECHILD (a forked child's copy of the handle), -ENOMEM. Allocates the handle; does not block.
 */
int sc_events_open(struct sc_arena *arena, struct sc_events **out);
/** sc_events_close - give the role up and free the handle (NULL: no-op). */
void sc_events_close(struct sc_events *ev);

/**
 * sc_events_read - take up to @max events, oldest first. A loss (dropped by full-ring writers,
 * torn by a writer that died mid-append, a writer's death) comes as one SC_EVENT_LOST before the
 * events read after it. At most every 100 ms it also reaps the reader slots of dead processes
 * (one fcntl per attached handle) to learn of deaths.
 * Returns the count (0: nothing new), or -EBADMSG (the ring's positions or a slot's sequence word
 * are corrupted: nothing was taken; sc_events_reset, then read the truth again), -EINVAL,
 * -ECHILD. Never blocks (a slot whose writer has not finished is waited for across calls, at most
 * 50 ms, then skipped and reported lost); does not allocate.
 */
int sc_events_read(struct sc_events *ev, struct sc_event *out, unsigned max);
/** sc_events_reset - empty a corrupted ring (events appended meanwhile may be lost: read the whole
 * truth again). Returns 0, -EINVAL. */
int sc_events_reset(struct sc_events *ev);

/**
 * sc_events_post - append an event as the library does for its own changes: for an engine that
 * changes what a worker holds outside the library, and for tests and benchmarks. Events are
 * hints (the listener reads the state itself), so a wrong one costs a look, never a wrong answer.
 * Returns 0, or -ENOTCONN (nobody listens: nothing appended), -ENOSPC (the ring is full: dropped
 * and counted), -EINVAL (NULL, a type other than the L2/L3 ones, non-zero reserved fields),
 * -EBADMSG (the event region is corrupted), -ECHILD. Never blocks; does not allocate.
 */
int sc_events_post(struct sc_arena *arena, const struct sc_event *ev);

/** The listener's batch counter (for `stagecache events`): kept in the arena, so that a listener
 * that replaces another continues its numbering. */
uint64_t sc_events_seq(const struct sc_events *ev);
void sc_events_set_seq(struct sc_events *ev, uint64_t seq);

struct sc_events_stats {
	uint32_t records;            /* capacity of the ring */
	uint32_t listener;           /* owner token of the listener (0: nobody listens) */
	uint32_t listener_pid;       /* for people: its pid in its own namespace */
	int listener_alive;          /* 1: the listener's process holds its slot's lock */
	uint64_t listener_since_ns;  /* CLOCK_REALTIME when it started listening */
	uint64_t appended;           /* records claimed by writers since creation */
	uint64_t consumed;           /* records read by listeners */
	uint64_t pending;            /* claimed, not yet read */
	uint64_t dropped;            /* events writers dropped: the ring was full */
	uint64_t lost;               /* slots skipped or records that failed their check */
	uint64_t resets;             /* corrupted rings reset */
	uint64_t seq;                /* the listener's next batch number */
	uint64_t reserved[4];        /* zero */
};
/**
 * sc_events_stats - the ring's counters and who listens. Returns 0, -EINVAL, -EBADMSG (the event
 * region is corrupted), -ECHILD. Costs one fcntl (the listener's liveness); does not allocate.
 */
int sc_events_stats(struct sc_arena *arena, struct sc_events_stats *st);

/* ============================== fsck (lib/fsck.c) ============================== */
/* (the test build's hooks — fault points, clocks, schedule points —
 * are not part of this header: see lib/stagecache_test.h, which is never installed) */

#define SC_FSCK_DEEP 0x1u   /* also verify the digest of every L2 entry */
#define SC_FSCK_REPAIR 0x2u /* fix what can be fixed, drop what cannot; implies SC_FSCK_DEEP */
#define SC_FSCK_MASK 0x3u

struct sc_fsck_report {
	uint64_t problems;        /* inconsistencies found (before repair) */
	uint64_t repaired;        /* of those, fixed (SC_FSCK_REPAIR) */
	uint64_t dropped;         /* entries dropped because they could not be fixed */
	uint64_t entries, entry_bytes;          /* live L2 entries and their heap bytes */
	uint64_t pending_bytes;   /* heap bytes awaiting epoch reclamation */
	uint64_t reserved_bytes;  /* heap bytes in private reservations of live processes */
	uint64_t orphan_bytes;    /* heap bytes reserved by dead processes (freed by repair) */
	uint64_t heap_used_bytes, heap_free_bytes, heap_blocks;
	uint64_t leaked_bytes;    /* heap bytes in use that nothing owns */
	uint64_t digests_checked, digest_failures;   /* SC_FSCK_DEEP; an entry whose payload could not be
	                                              * read into memory (allocation failed) is left unchecked */
	uint64_t readers_live, readers_dead;         /* reader slots */
	uint64_t rings, ring_problems;
	uint64_t observations, obs_problems;
	uint64_t lock_repairs;    /* repairs after a lock holder died, since creation */
	uint64_t reserved[8];     /* zero */
};

/* Called for each finding: @component ("header", "heap", "index", "policy", "rings",
 * "observations", "readers", "locks", "l3index", "events"), a one-line @message, and whether it was
 * repaired. */
typedef void (*sc_fsck_fn)(const char *component, const char *message, int repaired, void *ctx);

/**
 * sc_arena_fsck - check the arena with everything a reader or writer validates: the header, the
 * index header and every lock word, the index against the heap (every allocation owned by exactly
 * one live entry, pending reclamation or a live process's reservation; free space accounted),
 * every entry's layout (and with SC_FSCK_DEEP its digest), the ring directory, each ring's owner
 * and indices and every undelivered record, the observation table and fill claims, reader slots
 * of dead processes, repair counters no process could have reached.
 * With SC_FSCK_REPAIR it repairs, checks again, and repairs again while problems remain (a bounded
 * number of rounds): the result is either clean (a later check finds nothing and admissions work),
 * or problems held by live processes (another ring consumer, a live producer: returned as a count),
 * or the arena is declared unrepairable: marked in its header, so every later sc_arena_open* and
 * every admission returns -ENOTRECOVERABLE; the remedy is destroy and create.
 * @flags: SC_FSCK_*; @cb: optional, one call per finding; @rep: optional report (its counts are the
 * final state's; problems are every finding reported, repaired those no longer present).
 * Returns the number of problems left (0: clean), or -EINVAL, -ECHILD (a forked child's copy of
 * the handle), -ENOTRECOVERABLE (declared unrepairable, now or before). Takes every writer lock,
 * waiting for live holders (a dead holder's is taken over); readers keep running; bounded by the
 * arena's size; re-initialising a corrupted lock word assumes no writer is inside it.
 */
int sc_arena_fsck(struct sc_arena *arena, uint32_t flags, sc_fsck_fn cb, void *ctx, struct sc_fsck_report *rep);

/* The parts sc_restore is made of (reservations, the promotion policy, single-flight fill claims),
 * for callers that build their own restore path: <stagecache_parts.h>, included here. */
#include "stagecache_parts.h"

#ifdef __cplusplus
}
#endif
#endif /* STAGECACHE_H */
