/*
 * lib/l2/view.h — the bottom of the L2 tier: its structures in the arena (counters, lease
 * records), the stage handle, and the accessors every L2 module and the modules above use. It
 * calls nothing of lib/ (inline accessors over shm/ only).
 */
#ifndef SC_LIB_L2_VIEW_H
#define SC_LIB_L2_VIEW_H

#include <string.h>


#include "../internal.h"
#include "../../shm/evq.h"
#include "../../shm/index.h"
#include "../../shm/readers.h"
#include "../../shm/seg.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "keys hash tokens as little-endian int32: port the encoding for big-endian hosts"
#define L2_RESERVE_NO_EVICT 1u /* reserve only from free room: evict nothing */

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
	_Atomic uint64_t token_cost; /* ns per token the stage declared (sc_stage_set_token_cost), 0: none */
	uint64_t pad[6];
	struct l2_counters c;
};
_Static_assert(sizeof(struct l2_stage_rec) == 128, "stage record layout");

/* Refusals by reason (enum sc_l2_refusal), one line. */
struct l2_refusals {
	_Atomic uint64_t n[SC_L2_REFUSE_COUNT];
};
_Static_assert(sizeof(struct l2_refusals) == 64, "refusals: one line");

/* Miss reasons (enum sc_miss_reason) and what goes with them, per stage and global (5 lines: the
 * smallest arena must still have a heap, so exactly as many counters as there are reasons). */
#define L2_MISS_SLOTS 13u
#define L2_REFUSE_SLOTS 9u
#define L2_DEADLINE_SLOTS 4u
struct l2_misses {
	_Atomic uint64_t l2[L2_MISS_SLOTS];          /* L2 lookups that missed, by reason */
	_Atomic uint64_t restore[L2_MISS_SLOTS];     /* restores that returned no state, by reason */
	_Atomic uint64_t refused[L2_REFUSE_SLOTS];   /* L2 misses of reason REFUSED, by enum sc_l2_refusal */
	_Atomic uint64_t deadline[L2_DEADLINE_SLOTS]; /* restore misses of reason DEADLINE, by detail */
	_Atomic uint64_t low_benefit;                /* admissions refused as SC_L2_REFUSE_LOW_BENEFIT */
};
_Static_assert(sizeof(struct l2_misses) == 320, "miss counters: 5 lines");
_Static_assert(SC_MISS_COUNT == L2_MISS_SLOTS && SC_L2_REFUSE_REASONS == L2_REFUSE_SLOTS &&
		       SC_DEADLINE_COUNT == L2_DEADLINE_SLOTS,
	       "a counter for every reason (a new one changes the stats layout)");

#define L2_STAGE_RECS 1024u
struct l2_stats_region {
	struct l2_counters global;
	uint8_t pad[64];
	struct l2_stage_rec stages[L2_STAGE_RECS];
	struct l2_refusals refused_global;
	struct l2_refusals refused_stage[L2_STAGE_RECS]; /* same slot as stages[] */
	struct l2_misses misses_global;
	struct l2_misses misses_stage[L2_STAGE_RECS];    /* same slot as stages[] */
};
_Static_assert(offsetof(struct l2_stats_region, stages) == 128, "stats layout");
_Static_assert(offsetof(struct l2_stats_region, refused_global) == 128 + 128 * L2_STAGE_RECS, "stats layout");
_Static_assert(offsetof(struct l2_stats_region, misses_global) == 128 + 192 * L2_STAGE_RECS + 64, "stats layout");
_Static_assert(sizeof(struct l2_stats_region) <= SHM_STATS_BYTES, "stats region fits");

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
	uint64_t token_cost;         /* ns per token declared through this handle (the record's wins) */
	/* L2 misses by reason, flushed with local_misses (their sum is local_misses) */
	uint32_t local_miss_by[L2_MISS_SLOTS];
	uint32_t local_refused_by[L2_REFUSE_SLOTS];
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

/* An entry's layout fields, each read once from the arena and validated together. */
struct l2_snap {
	uint64_t off, l0, l1, wire;
	uint32_t meta;
	int has_desc;
	uint64_t ntok, tok_off;      /* stored token ids (0: none) and their arena offset */
	uint64_t seg_rec;            /* SHM_META_SEG: arena offset of the validated segment record */
	int scattered;               /* segmented and not contiguous: the wire is the record's pieces */
};
/* meta bit: the allocation stores the entry's token ids (see lib/l2/place.c); kept out of shm/index.h's
 * SHM_META_* because only lib/ gives it meaning */
#define L2_META_TOKENS (1u << 17)
/* Does this arena store and compare token ids? */
static inline int l2_verify_tokens(const struct sc_arena *a)
{
	return !(a->shm->hv.arena_flags & SHM_ARENA_NO_TOKEN_VERIFY);
}

#define L2_RESERVE_NO_EVICT 1u /* reserve only from free room: evict nothing */

#endif
