/*
 * stagecache.h — the whole public contract of libstagecache.
 *
 * stagecache lets the co-located worker processes of an LLM inference server share one host-RAM
 * cache of exact prefix state in a named shared-memory arena (see DESIGN.md).
 *
 * Conventions, everywhere below:
 *  - every public name starts with sc_ / SC_;
 *  - functions return 0 (or a count) on success and a negative errno on failure; sc_strerror()
 *    names each stagecache-specific meaning;
 *  - the library never prints, exits or aborts;
 *  - unknown flag bits are rejected with -EINVAL against the matching SC_*_MASK.
 *
 * The file is split in sections, one per object. Each section is owned by one module in lib/.
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

/* ============================== arena (lib/arena.c, shm/arena.c) ============================== */

/* Longest arena name; names are 1..SC_NAME_MAX characters of [A-Za-z0-9._-]. */
#define SC_NAME_MAX 64
/* Smallest and largest arena the library creates. */
#define SC_ARENA_MIN_BYTES (8ull << 20)
#define SC_ARENA_MAX_BYTES (1ull << 40)

enum sc_huge {
	SC_HUGE_AUTO = 0,    /* hugetlbfs, else tmpfs with THP, else 4 KiB shmem */
	SC_HUGE_REQUIRE = 1, /* hugetlbfs or fail */
	SC_HUGE_OFF = 2,     /* never hugepages: 4 KiB shmem */
};

enum sc_backing {
	SC_BACKING_UNKNOWN = 0,
	SC_BACKING_HUGETLBFS_2M = 1, /* "hugetlbfs-2M" */
	SC_BACKING_SHMEM_THP = 2,    /* "shmem-thp" */
	SC_BACKING_SHM_4K = 3,       /* "shm-4k" */
};

/**
 * struct sc_arena_opts - creation parameters. Zero-initialise, then set what you need;
 * every zero field takes its default.
 */
struct sc_arena_opts {
	uint64_t size_bytes;     /* total arena size; required, SC_ARENA_MIN_BYTES..SC_ARENA_MAX_BYTES */
	int huge;                /* enum sc_huge */
	const char *dir;         /* directory for the arena file; NULL: /dev/hugepages or /dev/shm */
	uint32_t mode;           /* file mode; 0: 0600 */
	int64_t gid;             /* group owner; 0: the caller's (use -1 for "none" explicitly) */
	uint32_t index_entries;  /* L2 index capacity; 0: size_bytes / 16 KiB, at least 1024 */
	uint32_t ring_count;     /* commit rings; 0: 16 */
	uint32_t ring_bytes;     /* bytes of record space per ring (power of two); 0: 256 KiB */
	uint32_t obs_entries;    /* promotion observation table; 0: 4096 */
	uint32_t reader_slots;   /* attached processes at once; 0: 256 */
};

struct sc_arena;

/**
 * sc_arena_create - create a named arena and attach to it.
 * @name: 1..SC_NAME_MAX characters of [A-Za-z0-9._-].
 * @opts: creation parameters (size_bytes required).
 * @out:  receives the handle; close with sc_arena_close().
 * Returns 0, or -EINVAL (bad name or size), -EEXIST (an arena of that name exists, or another
 * process is creating it), -ENOMEM (not enough hugepages or memory; nothing is left behind),
 * -ENODEV (huge=require and no hugetlbfs mount), -EACCES, or another negative errno.
 * Blocks while the arena is pre-faulted; allocates the handle.
 */
int sc_arena_create(const char *name, const struct sc_arena_opts *opts, struct sc_arena **out);

/**
 * sc_arena_open - attach to an existing arena, looking in /dev/hugepages then /dev/shm.
 * Returns 0, or -ENOENT (no such arena), -EINVAL (bad name), -EBADMSG (not an arena, truncated,
 * or a corrupted header), -EPROTO (a different layout version), -EAGAIN (still being created
 * after a bounded wait), -EUSERS (reader table full), -EACCES.
 * Never modifies the file when it refuses it.
 */
int sc_arena_open(const char *name, struct sc_arena **out);

/** sc_arena_open_dir - as sc_arena_open, looking only in @dir. */
int sc_arena_open_dir(const char *dir, const char *name, struct sc_arena **out);

/** sc_arena_close - detach (releases this process's reader slot) and free the handle. NULL is a no-op. */
void sc_arena_close(struct sc_arena *arena);

/**
 * sc_arena_destroy - remove the named arena's file (from @dir, or the known directories when
 * NULL). Processes still attached keep their mapping until they close.
 * Returns 0, -ENOENT, -EINVAL, -EBADMSG (the file is not an arena: it is left alone), -EACCES.
 */
int sc_arena_destroy(const char *dir, const char *name);

#define SC_INFO_MAX_ATTACHED 64

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
	uint32_t attached_count; /* live attached processes (all of them) */
	struct {
		uint32_t pid;
		uint64_t attached_unix;
	} attached[SC_INFO_MAX_ATTACHED]; /* the first SC_INFO_MAX_ATTACHED of them */
	uint32_t index_entries, ring_count, ring_bytes, obs_entries;
	uint64_t heap_bytes;     /* bytes of the payload heap region */
};

/** sc_arena_info - describe the arena. Reads /proc/self/smaps (may block briefly). */
int sc_arena_info(struct sc_arena *arena, struct sc_arena_info *info);

/** sc_arena_layout_version - the layout version this library reads and writes. */
uint32_t sc_arena_layout_version(void);

/**
 * sc_arena_file_version - the layout version recorded in an arena file's header, without
 * attaching (for messages about -EPROTO). Returns 0, -ENOENT, -EINVAL or -EBADMSG (no magic).
 */
int sc_arena_file_version(const char *dir, const char *name, uint32_t *version);

/** sc_backing_name - "hugetlbfs-2M", "shmem-thp", "shm-4k" or "unknown". */
const char *sc_backing_name(int backing);

/**
 * sc_arena_list - names of the arenas found in the known directories (and @dir if not NULL).
 * Calls @cb once per file named stagecache.* with its directory and name.
 * Returns the number found, or a negative errno.
 */
int sc_arena_list(const char *dir, void (*cb)(const char *dir, const char *name, void *ctx), void *ctx);

/* ============================== keys, digests, stages, L2 (lib/l2*.c) ============================== */
/* (section owned by the L2 tier) */

/* ============================== L3 store and promotion (lib/l3*.c, lib/promote.c) ============================== */
/* (section owned by the L3 store) */

/* ============================== commit rings and batcher (lib/batcher.c, lib/ring.c) ============================== */
/* (section owned by the commit rings) */

/* ============================== fault injection (tests and stress) ============================== */
/* (section owned by reliability) */

#ifdef __cplusplus
}
#endif
#endif /* STAGECACHE_H */
