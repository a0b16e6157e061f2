/*
 * shm/seg.h — content-addressed segments of L2 payloads (owned by the L2 tier). Protocol at the
 * top of shm/seg.c.
 *
 * A payload section larger than one segment (the arena's seg_bytes, a creation parameter) is cut
 * into whole segments from its start; each is named by the unseeded XXH3-128 of its bytes. The
 * segment table (at the end of SHM_REGION_POLICY, after the eviction queues) maps a digest to the
 * bytes of one stored copy and counts the entries that refer to it. An entry of such a payload
 * (meta SHM_META_SEG) owns two heap blocks: its data block (tag SHM_TAG_SEGDATA: the pieces it
 * stores itself, then its descriptor and token ids as every entry) and its segment record (tag
 * SHM_TAG_SEGREC: the list of pieces that make its wire, each a range of its own data block or a
 * segment stored by another entry).
 */
#ifndef SC_SHM_SEG_H
#define SC_SHM_SEG_H

#include "region.h"
#include "util.h"
#include "index.h"
#include "mutex.h"

#define SHM_SEG_MAGIC 0x3147455343535353ull   /* "SSSCSEG1" */
#define SHM_SEG_REC_MAGIC 0x3143455247455353ull /* "SSEGREC1" */
#define SHM_SEG_HDR_BYTES 4096u
#define SHM_SEG_MIN_BYTES (64u << 10)
#define SHM_SEG_MAX_BYTES (1u << 30)
#define SHM_SEG_MAX_PROBE 64u        /* linear probes per lookup; a fuller run stores inline */
#define SHM_SEG_MAX_PIECES 65536u
#define SHM_SEG_NONE 0xffffffffu     /* a piece that is no indexed segment (a section's tail) */

/* Slot states */
enum { SHM_SEG_EMPTY = 0, SHM_SEG_LIVE = 1, SHM_SEG_TOMB = 2 };

/* One table slot, 64 bytes: written only under the table mutex. */
struct shm_seg_slot {
	uint64_t digest_lo, digest_hi;
	uint64_t off;                /* arena offset of the segment's bytes */
	uint64_t len;
	uint64_t rec;                /* arena offset of the segment record of the entry storing them */
	uint32_t refs;               /* segment records (HELD) that list this slot */
	uint32_t state;              /* SHM_SEG_* */
	uint32_t gen;                /* bumped when the slot is emptied */
	uint32_t pad0;
	uint64_t pad1;
};
_Static_assert(sizeof(struct shm_seg_slot) == 64, "segment slot layout");

struct shm_seg_hdr {
	uint64_t magic;
	uint32_t nslots, pad;
	uint64_t seg_bytes;
	uint8_t pad0[40];
	struct shm_mutex mu;         /* the table's writer lock (after shard locks, before the heap's) */
	uint8_t pad1[56];
	/* under mu */
	uint64_t live, tombs;        /* slots */
	uint64_t logical;            /* wire bytes of HELD records */
	uint64_t stored;             /* bytes of data blocks (pieces stored) alive, owned or orphaned */
	uint64_t orphan_bytes;       /* of those, in data blocks whose entry is gone (holders) */
	uint64_t orphans;            /* holder records */
	uint64_t dedup_bytes;        /* bytes admits found stored already (cumulative) */
	uint64_t recounts;           /* reference counts rebuilt (a holder died, or fsck) */
};
_Static_assert(offsetof(struct shm_seg_hdr, mu) == 64, "segment header layout");
_Static_assert(offsetof(struct shm_seg_hdr, live) == 128, "segment header layout");
_Static_assert(sizeof(struct shm_seg_hdr) <= SHM_SEG_HDR_BYTES, "segment header fits");

/* A piece of an entry's wire, in wire order: sections never share a piece. */
struct shm_seg_piece {
	uint64_t at;                 /* arena offset of its bytes */
	uint64_t len;
	uint32_t slot, gen;          /* its table slot (SHM_SEG_NONE: not indexed) */
	uint32_t section, local;     /* 0/1; 1 when stored in this entry's data block */
};
_Static_assert(sizeof(struct shm_seg_piece) == 32, "segment piece layout");

/* rec flags */
#define SHM_SEG_HELD 0x1u       /* its pieces' slots count it in refs */
#define SHM_SEG_ORPHAN 0x2u     /* its entry is gone; kept while pins > 0 */
#define SHM_SEG_CONTIG 0x4u     /* the data block holds the whole wire in order */

/* The segment record (its own heap block). Written by the committer before it is HELD; then only
 * flags and pins change, under the table mutex. */
struct shm_seg_rec {
	uint64_t magic;
	uint32_t flags;
	uint32_t npieces;
	uint32_t pins;               /* LIVE slots whose bytes lie in this record's data block */
	uint32_t pad;
	uint64_t data;               /* arena offset of the data block */
	uint64_t wire;               /* sec_len[0] + sec_len[1] */
	uint64_t local;              /* bytes of pieces stored in the data block (at its start) */
	uint64_t pad1[2];
	struct shm_seg_piece p[];
};
_Static_assert(sizeof(struct shm_seg_rec) == 64, "segment record layout");

static inline uint64_t shm_seg_rec_bytes(uint32_t npieces)
{
	return sizeof(struct shm_seg_rec) + (uint64_t)npieces * sizeof(struct shm_seg_piece);
}

/* A process-local view. */
struct shm_segtab {
	struct shm_arena *a;
	struct shm_seg_hdr *hdr;
	struct shm_seg_slot *slot;
	uint32_t nslots, mask;
	uint64_t seg_bytes;
	uint64_t heap_lo, heap_hi;
	struct shm_index *ix;
};

/* Slots for an arena of @total_bytes with segments of @seg_bytes (0: none). */
uint32_t shm_seg_slots(uint64_t total_bytes, uint32_t seg_bytes);
/* Bytes of the table for @nslots (0 when none). */
uint64_t shm_seg_table_bytes(uint32_t nslots);
/* Arena offset of the table (end of the policy region's queues). */
uint64_t shm_seg_table_off(const struct shm_arena *a);
int shm_seg_format(struct shm_arena *a);
/* 0, -ENOTSUP (the arena has no segments), -EBADMSG. */
int shm_seg_view(struct shm_arena *a, struct shm_index *ix, struct shm_segtab *t);

/* The table mutex. -EOWNERDEAD is handled inside (the reference counts are rebuilt): 0 or -errno. */
int shm_seg_lock(struct shm_segtab *t);
void shm_seg_unlock(struct shm_segtab *t);

/* A record at arena offset @off, validated (magic, size, pieces inside the heap); NULL if bad. */
struct shm_seg_rec *shm_seg_rec_at(const struct shm_segtab *t, uint64_t off);

/* ---- with the table mutex ---- */
/* The LIVE slot holding @lo/@hi of @len bytes, or -1. */
int64_t shm_seg_find_locked(struct shm_segtab *t, uint64_t lo, uint64_t hi, uint64_t len);
/*
 * Take the references of record @r (at @rec_off): every piece naming a slot must still name that
 * LIVE slot (gen, len) — else nothing is taken and -ESTALE is returned (the caller stores the
 * payload whole). Local whole-segment pieces are indexed (slot inserted, pins of @r counted)
 * unless the digest is there already; @digests[i] is piece i's digest (lo, hi). Sets HELD.
 */
int shm_seg_hold_locked(struct shm_segtab *t, struct shm_seg_rec *r, uint64_t rec_off, const uint64_t (*digests)[2]);

/* Release an entry's record (its entry leaves: reclaim, or an orphan found by a sweep): drop its
 * references, free the data block and the record, or keep them as a holder while other entries
 * refer to its segments. Takes the mutex. 0 or -errno. Idempotent on a record already released. */
int shm_seg_release(struct shm_segtab *t, uint64_t rec_off);

/* Rebuild every slot's refs and every record's pins from the HELD records in the heap (what a
 * locker does after a holder died; fsck --repair). With the mutex. Returns the number of counts
 * that were wrong, or -errno (-ENOMEM: no memory to collect the records; nothing judged or
 * changed). @fix 0: only count. */
int64_t shm_seg_recount_locked(struct shm_segtab *t, int fix);

/* Records and data blocks tagged for an entry of @shard (locked by the caller) that does not own
 * them (a writer died between tagging and linking, or while freeing): release them. The number
 * of blocks freed or released, or -errno (-ENOMEM: no memory to collect them, nothing freed; the
 * table's mutex cannot be taken: records released before stay so, nothing else is freed). */
int shm_seg_sweep_shard(struct shm_segtab *t, uint32_t shard);

#endif
