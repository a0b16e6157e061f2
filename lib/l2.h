/*
 * lib/l2.h — private to the L2 tier (lib/key.c, lib/stage.c, lib/l2*.c).
 */
#ifndef SC_LIB_L2_H
#define SC_LIB_L2_H

#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "internal.h"
#include "../shm/evq.h"
#include "../shm/index.h"
#include "../shm/readers.h"
#include "../shm/seg.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "keys hash tokens as little-endian int32: port the encoding for big-endian hosts"
#endif

_Static_assert(sizeof(struct shm_index) <= sizeof(((struct sc_arena *)0)->l2_ix), "l2_ix holds a shm_index");
_Static_assert(sizeof(struct shm_evq) <= sizeof(((struct sc_arena *)0)->l2_evq), "l2_evq holds a shm_evq");

/* ---- stats region (SHM_REGION_STATS), all zero is valid ---- */
struct l2_counters {
	_Atomic uint64_t hits, misses, inserts, evictions, admission_rejects, refused_bytes, removals, pad;
};
_Static_assert(sizeof(struct l2_counters) == 64, "counters: one line");

struct l2_stage_rec {
	_Atomic uint64_t stage_id;   /* 0: free; claimed by CAS at sc_stage_open */
	uint64_t pad[7];
	struct l2_counters c;
};
_Static_assert(sizeof(struct l2_stage_rec) == 128, "stage record layout");

/* Refusals by reason (enum sc_l2_refusal), one line. */
struct l2_refusals {
	_Atomic uint64_t n[SC_L2_REFUSE_COUNT];
};
_Static_assert(sizeof(struct l2_refusals) == 64, "refusals: one line");

#define L2_STAGE_RECS 1024u
struct l2_stats_region {
	struct l2_counters global;
	uint8_t pad[64];
	struct l2_stage_rec stages[L2_STAGE_RECS];
	struct l2_refusals refused_global;
	struct l2_refusals refused_stage[L2_STAGE_RECS]; /* same slot as stages[] */
};
_Static_assert(offsetof(struct l2_stats_region, stages) == 128, "stats layout");
_Static_assert(offsetof(struct l2_stats_region, refused_global) == 128 + 128 * L2_STAGE_RECS, "stats layout");
_Static_assert(sizeof(struct l2_stats_region) <= (256u << 10), "stats region fits");

/* ---- reader-slot ext area: lease records ---- */
struct l2_ext {
	_Atomic uint64_t rec[SC_LEASES_MAX]; /* gen << 32 | idx+1; 0: free */
	uint64_t spare[(SHM_READER_EXT_BYTES - SC_LEASES_MAX * 8) / 8];
};
_Static_assert(sizeof(struct l2_ext) == SHM_READER_EXT_BYTES, "ext layout");
_Static_assert(SC_LEASES_MAX <= 64, "lease mask is a u64");

/* Hits and misses are added to the arena's shared counters once per this many lookups of a stage
 * handle. A flush is atomic adds on two lines that every reader of the stage writes: with two
 * readers each flush moves both lines between cores (~0.2 us by estimate), which at 64 lookups of
 * ~30 ns each was about a tenth of a reader's time; at 1024 it is under 1 %. */
#define L2_FLUSH_EVERY 1024u
/* An entry's `freq` counts hits up to this (S3-FIFO's 2-bit counter): a reader stores f + 1 when
 * it reads f < L2_FREQ_MAX, so a hot entry costs its readers no store at all. */
#define L2_FREQ_MAX 3u

struct sc_stage {
	XXH3_state_t base;           /* after "SCL2KEY1" + model + state (64-byte aligned) */
	struct sc_arena *arena;
	uint64_t id, id_hi;          /* the stage hash (id: its low half) */
	const uint8_t *secret;       /* the arena's key secret (the handle's validated header copy) */
	struct l2_stage_rec *rec;    /* NULL when the table was full */
	uint64_t local_hits, local_misses;
	struct sc_stage *next;
	size_t model_len, state_len;
	struct sc_digest ident;      /* sc_identity_digest of model and state (unkeyed: L3 objects) */
	int last_refusal;            /* enum sc_l2_refusal of the last call that did not publish, -1 */
};

static inline struct shm_index *l2_ix(struct sc_arena *a)
{
	return (struct shm_index *)(void *)a->l2_ix;
}
_Static_assert(sizeof(struct shm_segtab) <= sizeof(((struct sc_arena *)0)->l2_seg), "l2_seg holds a shm_segtab");
static inline struct shm_segtab *l2_segtab(struct sc_arena *a)
{
	return (struct shm_segtab *)(void *)a->l2_seg;
}
static inline struct shm_evq *l2_q(struct sc_arena *a)
{
	return (struct shm_evq *)(void *)a->l2_evq;
}
static inline struct l2_stats_region *l2_stats_region(struct sc_arena *a)
{
	return shm_region(a->shm, SHM_REGION_STATS, NULL);
}
static inline struct l2_ext *l2_ext_of(struct shm_reader_slot *s)
{
	return (struct l2_ext *)(void *)s->ext;
}

/* lib/stage.c */
int l2_ready(struct sc_arena *a);            /* validate the index view once; 0 or -EBADMSG */
void l2_count_event(struct sc_arena *a, uint64_t stage_id, int which, uint64_t v);
struct l2_stage_rec *l2_stage_rec_find(struct sc_arena *a, uint64_t stage_id, int claim);
enum { L2C_INSERTS, L2C_EVICTIONS, L2C_REJECTS, L2C_REFUSED, L2C_REMOVALS };
void l2_flush(struct sc_stage *st);
/* Count one refusal of @bytes wire bytes for @reason (enum sc_l2_refusal) and fire l2_reject with
 * @rc (negative errno). Returns @rc. */
int l2_refuse(struct sc_arena *a, uint64_t stage_id, uint64_t bytes, int rc, int reason);

/* lib/key.c */
#define L2_PREFIX_BLOCK 256u /* prefix lengths step by this when the caller's block is 0 */
/* The L2 key of a prefix from its prefix hash P (key_pfx_hashes): H(stage hash | P). */
struct sc_key l2_key_of(const struct sc_stage *st, struct sc_key pfx);
int l2_stage_base(struct sc_stage *st, const uint8_t *secret, const char *model, const char *state);

/* lib/l2_lease.c */
/* Sorted lease records of every attached process. *out malloc'd (NULL when none). */
size_t l2_leases_collect(struct sc_arena *a, uint64_t **out);
/* Reap dead readers (their leases) and sweep orphaned reservations; rate-limited unless @force.
 * Returns 1 if anything was released. */
int l2_reap(struct sc_arena *a, int force);
/* The arena-wide periodic reap (every 100 ms, by whichever writer comes first). */
void l2_reap_periodic(struct sc_arena *a);
int l2_lease_take(struct sc_arena *a, uint64_t rec);
void l2_lease_drop(struct sc_arena *a, int slot);
/*
 * Fill the public part of @l for a lease in slot @slot (l2_lease_take) on the payload at @p
 * (sections @l0, @l1), with a copy of the descriptor at @desc (any alignment) when @has_desc.
 * Writes every public field but kv_desc and reserved0_ (kv_desc only with a descriptor); inline
 * so that the read path pays nothing for sharing it with admission.
 */
static inline void l2_lease_fill(struct sc_lease *l, struct sc_arena *a, int slot, const uint8_t *p, uint64_t l0,
				 uint64_t l1, uint32_t kind, uint32_t origin, uint32_t n, struct sc_digest d,
				 struct sc_key key, int has_desc, const void *desc)
{
	l->sec[0] = p;
	l->sec[1] = p + l0;
	l->sec_len[0] = l0;
	l->sec_len[1] = l1;
	l->kind = kind;
	l->origin = origin;
	l->token_count = n;
	l->digest = d;
	l->key = key;
	l->has_kv_desc = has_desc;
	l->reserved0 = 0;
	if (has_desc)
		memcpy(&l->kv_desc, desc, sizeof(l->kv_desc));
	memset(l->reserved, 0, sizeof(l->reserved)); /* the layout promises zeroes there */
	l->reserved1 = 0;
	l->segments = 0; /* contiguous; a scattered entry's reader sets the segment list */
	l->private_spare_[0] = 0;
	l->arena_ = a;
	l->slot_ = slot;
}

/* lib/l2_evict.c: the eviction policy (S3-FIFO over shm/evq.c), room making, reclamation. */
/* Put a BUSY entry (shard locked, not yet linked) on the small or main FIFO, or on main when its
 * key is in the ghost. */
void l2_policy_admit(struct sc_arena *a, struct shm_index_entry *e);
/* Take entry @idx off the FIFOs after it was unlinked (shard locked). */
void l2_policy_forget(struct sc_arena *a, uint32_t idx);
/* Make room: evict @need_bytes of footprints (0: none) and, if @need_shard >= 0, an entry of that
 * shard. @held: shard the caller holds locked (-1 none). @exclude: entry never to evict.
 * 0, or -ENOSPC with *why (enum sc_l2_refusal). */
int l2_make_room(struct sc_arena *a, uint64_t need_bytes, int need_shard, int held,
		 const struct shm_index_entry *exclude, int *why);
/* The heap has the bytes but no block for @len: evict the neighbours (by address) of the policy's
 * next victims until one block fits, and allocate it tagged @tag. 0 with *off, -EAGAIN (room was
 * made but taken before we could allocate it: try again), or -ENOSPC with *why. */
int l2_make_contig(struct sc_arena *a, uint64_t len, uint64_t tag, const struct shm_index_entry *exclude,
		   uint64_t *off, int *why);
/* Reclaim pending entries of @shard (locked). */
void l2_reclaim_locked(struct sc_arena *a, uint32_t shard);
/* Reclaim in every shard the caller holds (@held, or -1) or can trylock. */
void l2_reclaim_all(struct sc_arena *a, int held);
/* Footprints retired and waiting for readers or leases, summed over the shards (a hint). */
uint64_t l2_pending(struct sc_arena *a);
uint64_t l2_budget(struct sc_arena *a);
uint64_t l2_used(struct sc_arena *a);

/* lib/l2_read.c: sc_l2_get with the key already computed (l2_key_of), tokens verified. With
 * @stale_rec, a location mismatch removes nothing: -ESTALE and the entry's record. */
int l2_get_prehashed(struct sc_stage *st, struct sc_key key, const int32_t *tokens, uint32_t n,
		     const struct sc_location *loc, struct sc_lease *lease, uint64_t *stale_rec);

/* lib/promote.c: an entry promoted from L3 (origin l3) of (@stage_id, digest lo/hi) left L2 (evicted
 * or removed): a later fill of it is "returning". Never blocks (trylock); shard locks may be held. */
void l2_promoted_left(struct sc_arena *a, uint64_t stage_id, uint64_t lo, uint64_t hi);

/* lib/l2_admin.c: remove @key's entry (only if it is still @rec = gen << 32 | idx+1, when not 0);
 * @reason as in the l2_remove probe. */
/* Why an entry was removed: the l2_remove probe's reason (lib/probes.h). */
enum { L2_REMOVE_EXPLICIT = 0, L2_REMOVE_MISMATCH = 1, L2_REMOVE_INVALIDATE = 2, L2_REMOVE_CLEAR = 3 };
int l2_remove_key(struct sc_arena *a, struct sc_key key, uint64_t rec, int reason);

/* lib/l2_seg.c: segmented payloads (shm/seg.h). */
/* The cut of a payload into pieces and the digests of its whole segments. */
struct l2_seg_plan {
	struct shm_seg_piece *pc;
	uint64_t (*dg)[2];
	uint32_t np;
};
/* Cut @p and digest its segments and (same pass, @d) the whole wire. 0, 1 (too many pieces: store
 * it whole; *@d not computed) or -ENOMEM. Free with l2_seg_plan_free. */
int l2_seg_plan(struct sc_arena *a, const struct sc_payload *p, struct sc_digest *d, struct l2_seg_plan *pl);
void l2_seg_plan_free(struct l2_seg_plan *pl);
/* Admit a planned payload (digest @d verified by the caller): 0, -errno with *why, or 1 when the
 * segments it found kept going away (the caller stores it whole). */
int l2_seg_admit(struct sc_stage *st, struct sc_key key, uint32_t n, const int32_t *tokens, struct sc_digest d,
		 const struct sc_payload *p, uint32_t origin, struct l2_seg_plan *pl, int *why);
/* Index the whole segments of a filled block (@off: section 0 of @l0 bytes then section 1) as a
 * contiguous segmented entry: a record at *@rec_off (private), the pieces' digests in *@dg
 * (malloc'd), the record's footprint in *@fp. 0, or -errno (nothing allocated: store it plain). */
int l2_seg_index_fill(struct sc_arena *a, struct sc_key key, uint64_t off, uint64_t l0, uint64_t l1, uint64_t *rec_off,
		      uint64_t (**dg)[2], uint64_t *fp);
/* Copy the segment named @lo/@hi of @len bytes into @dst if L2 holds it (under the table mutex,
 * so its block cannot be released meanwhile): 1 copied, 0 not held (or no segments), -errno. The
 * caller verifies the bytes (they are shared memory). */
int l2_seg_copy_held(struct sc_arena *a, uint64_t lo, uint64_t hi, uint64_t len, void *dst);
/* Copy the wire of a segmented entry (validated record at @rec) into @dst (@cap bytes). */
int64_t l2_seg_copy(struct sc_arena *a, uint64_t rec, void *dst, uint64_t cap);
/* Physical payload bytes of an entry (what its data block stores), for stats. */
uint64_t l2_seg_local(struct sc_arena *a, const struct shm_index_entry *e);

/* lib/l2.c */
/* Give a block (@off, and for a segmented entry its record @rec_off, else 0) to a new entry of
 * @key and link it (see lib/l2.c). */
int l2_commit_seg(struct sc_stage *st, struct sc_key key, uint32_t n, struct sc_digest d, uint64_t off, uint32_t kind,
		  uint64_t l0, uint64_t l1, int has_desc, int has_tokens, uint64_t fp, uint32_t origin, uint64_t rec_off,
		  const uint64_t (*digests)[2], int *why);
int l2_alloc_for(struct sc_arena *a, uint64_t len, uint64_t fp, struct sc_key key, uint64_t *off, int *why);
uint64_t l2_desc_at(uint64_t wire);
/* An entry's layout fields, each read once from the arena and validated together. */
struct l2_snap {
	uint64_t off, l0, l1, wire;
	uint32_t meta;
	int has_desc;
	uint64_t ntok, tok_off;      /* stored token ids (0: none) and their arena offset */
	uint64_t seg_rec;            /* SHM_META_SEG: arena offset of the validated segment record */
	int scattered;               /* segmented and not contiguous: the wire is the record's pieces */
};
/* meta bit: the allocation stores the entry's token ids (see lib/l2.c); kept out of shm/index.h's
 * SHM_META_* because only lib/ gives it meaning */
#define L2_META_TOKENS (1u << 17)
/* Where the token ids start in an entry's allocation. */
uint64_t l2_tokens_at(uint64_t wire, int has_desc);
/* Does this arena store and compare token ids? */
static inline int l2_verify_tokens(const struct sc_arena *a)
{
	return !(a->shm->hv.arena_flags & SHM_ARENA_NO_TOKEN_VERIFY);
}
int l2_entry_snap(struct shm_index *ix, const struct shm_index_entry *e, struct l2_snap *sn, struct sc_kv_desc *desc);
int l2_entry_check(struct shm_index *ix, const struct shm_index_entry *e, uint64_t *wire, struct sc_kv_desc *desc,
		   int *has_desc);
void l2_entry_info(struct shm_index *ix, const struct shm_index_entry *e, struct sc_l2_entry_info *info);
/* The footprint of an allocation for @wire bytes (with a descriptor when @has_desc). */
uint64_t l2_alloc_len(uint64_t wire, int has_desc);
/* Internal forms that report why they refused (*why, enum sc_l2_refusal, when not 0). */
#define L2_RESERVE_NO_EVICT 1u /* reserve only from free room: evict nothing */
int l2_reserve(struct sc_stage *st, uint64_t bytes, uint32_t flags, struct sc_l2_resv *r, int *why);
int l2_admit(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_digest expected,
	     const struct sc_payload *p, uint32_t origin, int *why);
int l2_publish(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_digest expected,
	       struct sc_l2_resv *r, uint32_t kind, uint64_t kv_len, uint64_t rec_len, const struct sc_kv_desc *desc,
	       uint32_t origin, struct sc_lease *lease, int *why);

#endif
