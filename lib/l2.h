/*
 * lib/l2.h — private to the L2 tier (lib/key.c, lib/stage.c, lib/l2*.c).
 */
#ifndef SC_LIB_L2_H
#define SC_LIB_L2_H

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "internal.h"
#include "../shm/index.h"
#include "../shm/readers.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "keys hash tokens as little-endian int32: port the encoding for big-endian hosts"
#endif

_Static_assert(sizeof(struct shm_index) <= sizeof(((struct sc_arena *)0)->l2_ix), "l2_ix holds a shm_index");

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

#define L2_STAGE_RECS 1024u
struct l2_stats_region {
	struct l2_counters global;
	uint8_t pad[64];
	struct l2_stage_rec stages[L2_STAGE_RECS];
};
_Static_assert(offsetof(struct l2_stats_region, stages) == 128, "stats layout");
_Static_assert(sizeof(struct l2_stats_region) <= (256u << 10), "stats region fits");

/* ---- reader-slot ext area: lease records ---- */
struct l2_ext {
	_Atomic uint64_t rec[SC_LEASES_MAX]; /* gen << 32 | idx+1; 0: free */
	uint64_t spare[(SHM_READER_EXT_BYTES - SC_LEASES_MAX * 8) / 8];
};
_Static_assert(sizeof(struct l2_ext) == SHM_READER_EXT_BYTES, "ext layout");
_Static_assert(SC_LEASES_MAX <= 64, "lease mask is a u64");

#define L2_FLUSH_EVERY 64u

struct sc_stage {
	XXH3_state_t base;           /* after "SCL2KEY1" + model + state (64-byte aligned) */
	struct sc_arena *arena;
	uint64_t id, id_hi;          /* the stage hash (id: its low half) */
	const uint8_t *secret;       /* the arena's key secret (the handle's validated header copy) */
	struct l2_stage_rec *rec;    /* NULL when the table was full */
	uint64_t local_hits, local_misses;
	struct sc_stage *next;
	size_t model_len, state_len;
};

static inline struct shm_index *l2_ix(struct sc_arena *a)
{
	return (struct shm_index *)(void *)a->l2_ix;
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

/* lib/key.c */
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

/* lib/l2_evict.c */
/* Make room: free @need_bytes of budget/heap (0: none) and, if @need_shard >= 0, an entry of
 * that shard. @held: shard the caller holds locked (-1 none). @exclude: entry not to evict.
 * 0, or -ENOSPC with nothing evicted. */
int l2_make_room(struct sc_arena *a, uint64_t need_bytes, int need_shard, int held,
		 const struct shm_index_entry *exclude);
/* Reclaim pending entries of @shard (locked). */
void l2_reclaim_locked(struct sc_arena *a, uint32_t shard);
/* Reclaim in every shard the caller holds (@held, or -1) or can trylock. */
void l2_reclaim_all(struct sc_arena *a, int held);
uint64_t l2_budget(struct sc_arena *a);
uint64_t l2_used(struct sc_arena *a);

/* lib/l2_read.c: sc_l2_get with the key already computed (l2_key_of), tokens verified. With
 * @stale_rec, a location mismatch removes nothing: -ESTALE and the entry's record. */
int l2_get_prehashed(struct sc_stage *st, struct sc_key key, const int32_t *tokens, uint32_t n,
		     const struct sc_location *loc, struct sc_lease *lease, uint64_t *stale_rec);

/* lib/l2_admin.c: remove @key's entry (only if it is still @rec = gen << 32 | idx+1, when not 0);
 * @reason as in the l2_remove probe. */
int l2_remove_key(struct sc_arena *a, struct sc_key key, uint64_t rec, int reason);

/* lib/l2.c */
/* An entry's layout fields, each read once from the arena and validated together. */
struct l2_snap {
	uint64_t off, l0, l1, wire;
	uint32_t meta;
	int has_desc;
	uint64_t ntok, tok_off;      /* stored token ids (0: none) and their arena offset */
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
uint64_t l2_now_ns(void);

#endif
