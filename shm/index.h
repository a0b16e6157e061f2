/*
 * shm/index.h — the L2 hash index (used by the L2 tier, lib/l2*.c). Protocol at the top of shm/index.c.
 *
 * Region layout (SHM_REGION_INDEX):
 *   [ header + shard table (4 KiB) | buckets: u32[nbuckets] | entries: struct shm_index_entry[n] ]
 * Bucket b belongs to shard b % SHM_INDEX_SHARDS; entry i belongs to shard i % SHM_INDEX_SHARDS.
 * A bucket's chain holds only entries of its own shard.
 */
#ifndef SC_SHM_INDEX_H
#define SC_SHM_INDEX_H

#include "region.h"
#include "util.h"
#include "mutex.h"

#define SHM_INDEX_MAGIC 0x3158444932435353ull /* "SSC2IDX1" */
#define SHM_INDEX_SHARDS 16u
#define SHM_INDEX_MAX_CHAIN 64u   /* longer chains are treated as corruption (-EBADMSG) */
#define SHM_INDEX_HDR_BYTES 4096u
#define SHM_INDEX_MAX_ENTRIES (1u << 24) /* an entry's idx fits a heap tag (24 bits) */

/* Entry states (shm_index_entry.state). */
enum {
	SHM_ENT_FREE = 0,    /* on its shard's free list (or being popped) */
	SHM_ENT_BUSY = 1,    /* being filled / linked by the shard lock holder */
	SHM_ENT_LIVE = 2,    /* linked in its bucket chain */
	SHM_ENT_RETIRED = 3, /* unlinked; memory waits for epochs and leases (pending list) */
	SHM_ENT_FREEING = 4, /* its block is being freed */
};

/* Heap tags (shm_heap_alloc's opaque word) used by the L2 tier. */
#define SHM_TAG_TYPE(t) ((uint32_t)((t) >> 60))
#define SHM_TAG_PRIV 0xAu  /* private reservation: owner token (bits 0..31, shm/readers.h) */
#define SHM_TAG_ENTRY 0xBu /* owned by entry: idx (bits 32..55), gen (bits 0..31) */
#define SHM_TAG_SEGREC 0xCu  /* segment record of entry idx/gen (shm/seg.h) */
#define SHM_TAG_SEGDATA 0xDu /* data block of a segmented entry idx/gen (shm/seg.h) */
#define SHM_TAG_SEGHOLD 0xEu /* record or data block of a gone entry whose segments others use */
static inline uint64_t shm_tag_priv(uint32_t token)
{
	return ((uint64_t)SHM_TAG_PRIV << 60) | token;
}
static inline uint64_t shm_tag_entry(uint32_t idx, uint32_t gen)
{
	return ((uint64_t)SHM_TAG_ENTRY << 60) | ((uint64_t)(idx & 0xffffff) << 32) | gen;
}
static inline uint64_t shm_tag_typed(uint32_t type, uint32_t idx, uint32_t gen)
{
	return ((uint64_t)type << 60) | ((uint64_t)(idx & 0xffffff) << 32) | gen;
}

/*
 * One entry, 128 bytes. Everything except next/state/freq is written by the shard lock holder
 * while the entry is BUSY (unreachable) and is immutable while reachable by readers. Readers
 * validate every field they use.
 */
struct shm_index_entry {
	/* line 0: identity and chain */
	uint64_t key_lo, key_hi;
	_Atomic uint32_t next;       /* idx+1 of the next entry in the chain, 0: end (release/acquire) */
	_Atomic uint32_t state;      /* SHM_ENT_* */
	uint32_t gen;                /* bumped each time the entry is reused */
	uint32_t meta;               /* kind | origin << 8 | has_desc << 16 */
	uint64_t stage_id;
	uint64_t payload_off;        /* arena offset of the heap allocation */
	uint64_t sec_len[2];
	/* line 1 */
	uint64_t digest_lo, digest_hi;
	uint64_t token_count;
	uint64_t footprint;          /* bytes charged (shm_heap_footprint of the allocation) */
	uint64_t created_ns;         /* CLOCK_REALTIME */
	uint64_t retire_epoch;       /* writer-only: epoch stamp when retired */
	uint32_t link;               /* writer-only: free / pending list, idx+1 */
	uint32_t owner;              /* writer-only: token of the writer that filled it (information) */
	_Atomic uint32_t freq;       /* readers store 1 when 0 (relaxed); the evictor clears it */
	uint32_t seg_rec;            /* SHM_META_SEG: segment record at heap start + 64 * seg_rec */
};
_Static_assert(sizeof(struct shm_index_entry) == 128, "index entry layout");
_Static_assert(offsetof(struct shm_index_entry, next) == 16, "index entry layout");
_Static_assert(offsetof(struct shm_index_entry, digest_lo) == 64, "index entry layout");
_Static_assert(offsetof(struct shm_index_entry, freq) == 120, "index entry layout");

#define SHM_META_KIND(m) ((m) & 0xffu)
#define SHM_META_ORIGIN(m) (((m) >> 8) & 0xffu)
#define SHM_META_HAS_DESC(m) (((m) >> 16) & 1u)
#define SHM_META_SEG (1u << 18)  /* the payload is segmented: seg_rec names its record (shm/seg.h) */

/* Per-shard writer state: protected by mu. */
struct shm_index_shard {
	struct shm_mutex mu;         /* the shard's writer lock (shm/mutex.h) */
	/* The event listener's token while one listens (lib/events.c), 0 when nobody does: what a
	 * writer holding this lock reads before it notes a change, in the lock's own line. */
	_Atomic uint32_t ev_listener;
	uint8_t pad0[64 - sizeof(struct shm_mutex) - 4];
	uint32_t free_head;          /* idx+1 */
	uint32_t pending_head;       /* idx+1 */
	uint64_t pending_bytes;      /* footprints of RETIRED entries */
	uint32_t pending_count;
	uint32_t repairs;
	uint32_t repair_pending;     /* 1: a rebuild is owed (set before it starts, cleared when done) */
	uint8_t pad1[36];
};
_Static_assert(sizeof(struct shm_index_shard) == 128, "shard layout");

struct shm_index_hdr {
	uint64_t magic;              /* written at format, never changed */
	uint32_t nentries, nbuckets; /* nbuckets: power of two >= nentries */
	uint32_t nshards, pad;
	uint64_t buckets_off;        /* from the region start */
	uint64_t entries_off;
	uint8_t pad0[24];
	_Atomic uint64_t hand;       /* CLOCK hand (any writer, fetch_add) */
	_Atomic uint64_t budget_bytes; /* L2 budget; 0: the whole heap */
	uint8_t pad1[48];
	struct shm_mutex sweep_mu;   /* serialises orphan sweeps of private reservations */
	uint8_t pad2[64 - sizeof(struct shm_mutex)];
	struct shm_index_shard shards[SHM_INDEX_SHARDS];
};
_Static_assert(offsetof(struct shm_index_hdr, hand) == 64, "index header layout");
_Static_assert(offsetof(struct shm_index_hdr, sweep_mu) == 128, "index header layout");
_Static_assert(offsetof(struct shm_index_hdr, shards) == 192, "index header layout");
_Static_assert(sizeof(struct shm_index_hdr) <= SHM_INDEX_HDR_BYTES, "index header fits");

/* A validated, process-local view of the index region. */
struct shm_index {
	struct shm_arena *a;
	struct shm_index_hdr *hdr;
	_Atomic uint32_t *buckets;
	struct shm_index_entry *ent;
	uint32_t nentries, mask;
	uint64_t heap_lo, heap_hi;   /* the heap region, for validating payload offsets */
};

/* Bytes the index region needs for @entries entries (called by shm/layout.c). */
uint64_t shm_index_bytes(uint32_t entries);
/* Format the index region at creation (robust shard mutexes, free lists). */
int shm_index_format(struct shm_arena *a);
/* Validate the region's header against the arena header and fill @ix. 0 or -EBADMSG. */
int shm_index_view(struct shm_arena *a, struct shm_index *ix);

static inline uint32_t shm_index_bucket(const struct shm_index *ix, uint64_t key_lo)
{
	return (uint32_t)(key_lo & ix->mask);
}
static inline uint32_t shm_index_shard_of_bucket(uint32_t b)
{
	return b % SHM_INDEX_SHARDS;
}

/* Start loading what a lookup of @key_lo will read, without a lock or an epoch: its bucket, or with
 * @chain the first entry of its chain (the bucket's current head, bounded by the table). A hint for
 * writers that have other work to do meanwhile; nothing is returned. */
void shm_index_prefetch(const struct shm_index *ix, uint64_t key_lo, int chain);
/*
 * Lock-free lookup (caller inside an epoch): the LIVE entry with this key, or NULL.
 * *err = 0, or -EBADMSG when the chain is corrupted (bad index, wrong shard, too long).
 */
struct shm_index_entry *shm_index_find(const struct shm_index *ix, uint64_t key_lo, uint64_t key_hi, int *err);

/* Shard locks. Lock order: shards by ascending number may be held together only through
 * shm_index_trylock (never block on a second shard); sweep_mu is taken last.
 * shm_index_lock repairs the shard when the previous holder died (EOWNERDEAD). 0 or -errno. */
int shm_index_lock(struct shm_index *ix, uint32_t shard);
/* 0 locked, -EBUSY held by someone else, other -errno. Repairs like shm_index_lock. */
int shm_index_trylock(struct shm_index *ix, uint32_t shard);
void shm_index_unlock(struct shm_index *ix, uint32_t shard);

/* ---- with the shard lock held ---- */
/* Rebuild the shard from its entry states (what EOWNERDEAD does), e.g. after finding a corrupted
 * chain. Safe with concurrent readers: it only cuts invalid links and retires unreachable entries. */
void shm_index_repair_locked(struct shm_index *ix, uint32_t shard);
/* Pop a free entry of @shard (state stays FREE until the caller sets BUSY). NULL when empty. A
 * corrupted list is rebuilt from the entry states (the shard repair) first. */
struct shm_index_entry *shm_index_pop_free_locked(struct shm_index *ix, uint32_t shard);
/* Push an entry back on its shard's free list (state FREE). */
void shm_index_push_free_locked(struct shm_index *ix, struct shm_index_entry *e);
/* Link BUSY entry @e into its bucket, replacing @old (LIVE, same key) atomically if not NULL.
 * @e becomes LIVE; @old is unlinked (caller retires it). */
void shm_index_link_locked(struct shm_index *ix, struct shm_index_entry *e, struct shm_index_entry *old);
/* Unlink LIVE entry @e from its chain and retire it (pending list, epoch stamped). -ENOENT if not found. */
int shm_index_unlink_retire_locked(struct shm_index *ix, struct shm_index_entry *e);
/* Retire an unlinked entry (state RETIRED, pending list). */
void shm_index_retire_locked(struct shm_index *ix, struct shm_index_entry *e);
/*
 * Reclaim up to @max pending entries of @shard retired before epoch @min_active and not pinned
 * by @leased (sorted lease records, n_leased): free their heap blocks and return them to the free
 * list. Returns the number reclaimed; *blocked counts entries still pinned by a lease.
 * Order matters: @min_active = shm_epoch_min_active() must be read BEFORE the lease records, so
 * that a reader whose epoch exit it saw has its lease (recorded before that exit) in @leased.
 */
int shm_index_reclaim_locked(struct shm_index *ix, uint32_t shard, uint64_t min_active, const uint64_t *leased,
			     size_t n_leased, unsigned max, unsigned *blocked);

static inline uint32_t shm_index_idx(const struct shm_index *ix, const struct shm_index_entry *e)
{
	return (uint32_t)(e - ix->ent);
}
/* The lease / tag record of an entry: gen << 32 | idx + 1. */
static inline uint64_t shm_index_rec(const struct shm_index *ix, const struct shm_index_entry *e)
{
	return ((uint64_t)e->gen << 32) | (shm_index_idx(ix, e) + 1u);
}
/* 1 when record @rec is among the @n records of @v (sorted ascending, e.g. the lease records). */
static inline int shm_index_leased(const uint64_t *v, size_t n, uint64_t rec)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid] == rec)
			return 1;
		if (v[mid] < rec)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/*
 * Free heap blocks nobody owns: private reservations of dead processes, and (when @shard is a
 * shard the caller holds locked, or -1 for none) blocks tagged with an entry of that shard that
 * does not own them. Returns the number freed or -errno.
 */
int shm_index_sweep(struct shm_index *ix, int shard);

#endif
