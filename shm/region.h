/*
 * shm/region.h — the arena's layout and the process-local handle, and the offset/region helpers
 * every module of shm/ uses (the bottom of shm/: it calls nothing). The arena is a named file
 * mapped MAP_SHARED by every attached process.
 *
 * Layout (all offsets from the arena base, every region 4 KiB aligned, the heap 2 MiB aligned):
 *
 *   [ header (4 KiB) | readers | stats | index | rings | obs | l3ix | policy | events | heap .... ]
 *
 * The header names every region by (offset, size). Modules find their region with
 * shm_region(); they never compute offsets of their own. A fresh file is zero-filled, so each
 * region's "all zeroes" state must be valid and empty, except where a module's init hook
 * (shm/layout.c) formats it at creation, before the initialised word is published.
 *
 * See shm/arena.c for the creation/attach protocol (shm/arena.h).
 */
#ifndef SC_SHM_REGION_H
#define SC_SHM_REGION_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>

#define SHM_MAGIC 0x0a48434143475453ull   /* "STGCACH\n" little-endian */
#define SHM_LAYOUT_VERSION 7u         /* 2: liveness by OFD locks and owner tokens; 3: L3 location
                                       * index region, stored token ids, chained prefix keys; 4: the
                                       * policy region (S3-FIFO queues), refusal counters; 5: the
                                       * segment table (shm/seg.h) after the queues; 6: the event
                                       * ring region (shm/evring.h), nine regions in the header; 7:
                                       * benefit fields in the policy nodes (48 bytes), the departure
                                       * table, miss-reason counters (stats region 528 KiB) */
#define SHM_STATS_BYTES (528u << 10)      /* SHM_REGION_STATS: lib/l2/view.h lays it out */
#define SHM_INIT_DONE 0x494e4954u         /* "TINI": published last, release */
#define SHM_HEADER_BYTES 4096u
#define SHM_SECRET_BYTES 192u             /* >= XXH3_SECRET_SIZE_MIN (136) */
#define SHM_CACHELINE 64u
#define SHM_DAMAGED 0x474d4144u            /* "DAMG": fsck declared the arena unrepairable */
/* Why (shm_header.damage_reason). */
enum { SHM_DAMAGE_HEAP = 1, SHM_DAMAGE_INDEX = 2, SHM_DAMAGE_RINGS = 3, SHM_DAMAGE_OBS = 4, SHM_DAMAGE_OTHER = 5,
       SHM_DAMAGE_L3IX = 6 };

enum shm_region_id {
	SHM_REGION_READERS = 0, /* reader table: shm/readers.c */
	SHM_REGION_STATS = 1,   /* global and per-stage counters: lib/ */
	SHM_REGION_INDEX = 2,   /* L2 hash index: shm/index.c */
	SHM_REGION_RINGS = 3,   /* commit ring directory + rings: shm/ring.c */
	SHM_REGION_OBS = 4,     /* promotion observation table: lib/promote.c */
	SHM_REGION_L3IX = 5,    /* L3 location index: shm/l3ix.c (size 0 when disabled) */
	SHM_REGION_POLICY = 6,  /* L2 eviction queues and ghost: shm/evq.c (policy: lib/l2/evict.c) */
	SHM_REGION_EVENTS = 7,  /* the event ring of what L2 and bound L3 stores hold: shm/evring.c */
	SHM_REGION_HEAP = 8,    /* payload heap: shm/heap.c (always the last region) */
	SHM_REGION_COUNT = 9,
	SHM_REGION_MAX = 9,     /* slots in the header's table */
};

struct shm_region {
	uint64_t off;
	uint64_t size;
};

/*
 * The header. Written once by the creator before the initialised word is published; read-only
 * afterwards except for the fields in the "mutable" cache lines at the end.
 */
struct shm_header {
	/* identity: written by the creator, never changed */
	uint64_t magic;                   /* SHM_MAGIC */
	uint32_t layout_version;          /* SHM_LAYOUT_VERSION */
	uint32_t header_bytes;            /* SHM_HEADER_BYTES */
	uint64_t total_bytes;             /* file and mapping size */
	_Atomic uint32_t initialised;     /* SHM_INIT_DONE, release-stored last (pairs with attach's acquire) */
	uint32_t region_count;            /* SHM_REGION_COUNT */
	uint64_t created_ns;              /* CLOCK_REALTIME at creation */
	uint32_t creator_pid;
	uint32_t page_size;               /* page size the creator asked for (2 MiB or 4 KiB) */
	/* creation parameters (after defaults were applied) */
	uint32_t index_entries;
	uint32_t ring_count;
	uint32_t ring_bytes;
	uint32_t obs_entries;
	uint32_t reader_slots;
	uint32_t huge_mode;               /* enum sc_huge the creator asked for */
	uint32_t l3ix_entries;            /* L3 location index entries (0: none) */
	uint32_t arena_flags;             /* SHM_ARENA_* */
	uint32_t l3ix_refresh_ms;         /* trust an index entry this long without the directory */
	uint32_t seg_bytes;               /* segment size (shm/seg.h); 0: payloads are not segmented */
	uint64_t seg_slots;               /* segment table slots (0 when seg_bytes is 0) */
	struct shm_region regions[SHM_REGION_MAX];   /* at offset 96 */
	uint8_t key_secret[SHM_SECRET_BYTES];        /* at offset 240: per-arena random secret for keyed hashing */
	uint64_t header_check;            /* at offset 432: XXH64 of bytes [0, 432) with initialised read as 0 */
	/* written by the creator before publication, never changed; outside header_check (it was
	 * padding, so arenas made before it read 0: no limit) */
	uint32_t slots_per_user;          /* at offset 440: reader slots one uid may hold (shm/readers.c); 0: all */
	uint8_t pad0[SHM_CACHELINE * 8 - 444];
	/* mutable, one cache line (shm/readers.c): read on every epoch enter, written by writers */
	_Atomic uint64_t global_epoch;    /* at offset 512 */
	_Atomic uint64_t slots_cleaned;   /* slots of dead holders cleared so far (fetch_add) */
	_Atomic uint64_t reap_due_ns;     /* CLOCK_MONOTONIC: the next periodic reap (lib/l2/lease.c) */
	_Atomic uint64_t slots_dead;      /* of slots_cleaned: those whose holder had died (not detached) */
	uint8_t pad1[SHM_CACHELINE - 32];
	/* mutable: the damage mark, its own cache line. Written only by fsck --repair when it gives
	 * up on the arena (lib/fsck.c): damaged is release-stored last, after the reason and the time;
	 * every open and every writer acquire-loads it. Zero in arenas that never had one (the line
	 * was padding before), so old arenas read as undamaged. Never cleared: the remedy is destroy
	 * and create. Not covered by header_check (it changes after creation). */
	_Atomic uint32_t damaged;         /* at offset 576: SHM_DAMAGED, or 0 */
	uint32_t damage_reason;           /* what could not be repaired (SHM_DAMAGE_*) */
	uint64_t damaged_ns;              /* CLOCK_REALTIME when fsck declared it */
	uint8_t pad2[SHM_CACHELINE - 16];
};

_Static_assert(offsetof(struct shm_header, initialised) == 24, "header layout");
_Static_assert(offsetof(struct shm_header, l3ix_entries) == 72, "header layout");
_Static_assert(offsetof(struct shm_header, regions) == 96, "header layout");

/* arena_flags */
#define SHM_ARENA_NO_TOKEN_VERIFY 0x1u    /* L2 entries and index entries store no token ids */
#define SHM_ARENA_FLAGS_MASK 0x1u
_Static_assert(offsetof(struct shm_header, key_secret) == 240, "header layout");
_Static_assert(offsetof(struct shm_header, header_check) == 432, "header layout");
_Static_assert(offsetof(struct shm_header, slots_per_user) == 440, "header layout");
_Static_assert(offsetof(struct shm_header, global_epoch) == 512, "header layout");
_Static_assert(offsetof(struct shm_header, slots_cleaned) == 520, "header layout");
_Static_assert(offsetof(struct shm_header, slots_dead) == 536, "header layout");
_Static_assert(offsetof(struct shm_header, damaged) == 576, "header layout");
_Static_assert(offsetof(struct shm_header, damaged_ns) == 584, "header layout");
_Static_assert(sizeof(struct shm_header) == 640, "header layout");

/*
 * Byte-range locks (fcntl F_OFD_SETLK) on the arena file, far beyond its end so they never meet
 * its data: SHM_LOCK_CREATE is held by the creator until the arena is published; SHM_LOCK_SLOT(i)
 * by the holder of reader slot i for as long as it is attached. The kernel drops an OFD lock when
 * the last reference to its open file description goes (the process exits or is killed), so any
 * process that can open the file tells a live holder from a dead one, from any pid namespace and
 * as any user; no pid is ever compared.
 */
#define SHM_LOCK_BASE (1ll << 62)
#define SHM_LOCK_CREATE (SHM_LOCK_BASE - 1)
#define SHM_LOCK_SLOT(i) (SHM_LOCK_BASE + (int64_t)(i))
_Static_assert(sizeof(struct shm_header) <= SHM_HEADER_BYTES, "header fits its page");

/* The process-local handle of an attached arena. */
struct shm_arena {
	uint8_t *base;              /* mapping */
	uint64_t size;
	struct shm_header *hdr;       /* the shared header: only its mutable words are read from here */
	struct shm_header hv;         /* private copy of the identity, validated at attach: regions and
	                               * creation parameters are read from here, so a process that
	                               * rewrites the shared header later cannot move them */
	int fd;                     /* the mapping's descriptor */
	int lock_fd;                /* our own file description, never mapped: holds our slot's lock */
	int backing;                /* enum sc_backing, measured after mapping */
	uint64_t page_size;         /* measured */
	int32_t reader_slot;        /* our slot in the reader table, -1 if none */
	uint32_t token;             /* our owner token (shm/readers.h), 0 if none */
	int forked;                 /* this is a forked child's copy of the handle: unusable */
	int no_slot;                /* attached to look (SHM_OPEN_NO_SLOT): read-only, no slot */
	_Atomic int cut;            /* the file was seen shorter than the mapping (shm_arena_intact) */
	_Atomic uint64_t intact_ns; /* CLOCK_MONOTONIC of the last check that found it whole */
	struct shm_arena *next_open; /* the process's list of open handles (fork, I/O pins) */
	uint64_t serial;            /* unique among this process's handles, never reused */
	uint32_t io_pins;           /* rings holding lock_fd's description (under the open list's mutex) */
	char name[65];
	char path[PATH_MAX];
};

#define SHM_PAGE_BYTES 4096u            /* the base page: region alignment, 4 KiB-page arenas */
#define SHM_HUGE_PAGE_BYTES (2ull << 20) /* a hugetlbfs page; the heap region starts on one */
static inline uint64_t shm_page_up(uint64_t v)
{
	return (v + SHM_PAGE_BYTES - 1) & ~(uint64_t)(SHM_PAGE_BYTES - 1);
}

/* The smallest power of two that is >= @v and >= @min (itself a power of two), capped at 2^30. */
static inline uint32_t shm_pow2_at_least(uint64_t v, uint32_t min)
{
	uint32_t p = min;
	while (p < v && p < (1u << 30))
		p <<= 1;
	return p;
}

/* huge_mode: the values of enum sc_huge (lib/arena.c checks they match; shm/ does not include lib/) */
#define SHM_HUGE_AUTO 0u
#define SHM_HUGE_REQUIRE 1u
#define SHM_HUGE_OFF 2u

/* Creation parameters after defaults; sizes of every region follow from them (shm/layout.c). */
struct shm_params {
	uint64_t total_bytes;
	uint32_t index_entries, ring_count, ring_bytes, obs_entries, reader_slots;
	uint32_t l3ix_entries;       /* UINT32_MAX: none */
	uint32_t arena_flags, l3ix_refresh_ms;
	uint32_t huge_mode;
	uint32_t page_size;
	uint32_t seg_bytes;          /* 0: no segments */
	uint32_t seg_slots;          /* computed by the plan */
	uint32_t slots_per_user;     /* 0: the default (shm_arena_create) */
};

/* Whose arena files an open accepts besides root's and the caller's own (planting: any local user
 * can create /dev/shm/stagecache.NAME first). A world-writable file is never accepted. */
struct shm_trust {
	int any_owner;              /* accept every owner */
	int64_t uid;                /* also accept this owner; -1: nobody else */
};

/* The region @id: pointer to its first byte and its size. The header was validated at attach,
 * so regions are known to lie inside the mapping. */
static inline void *shm_region(const struct shm_arena *a, enum shm_region_id id, uint64_t *size)
{
	const struct shm_region *r = &a->hv.regions[id];
	if (size)
		*size = r->size;
	return a->base + r->off;
}

/* Offset <-> pointer helpers. shm_ptr returns NULL when [off, off+len) is not inside the arena:
 * every offset read from shared memory goes through it (or an equivalent region check). */
static inline void *shm_ptr(const struct shm_arena *a, uint64_t off, uint64_t len)
{
	if (off > a->size || len > a->size - off)
		return NULL;
	return a->base + off;
}

static inline uint64_t shm_off(const struct shm_arena *a, const void *p)
{
	return (uint64_t)((const uint8_t *)p - a->base);
}

#endif
