/* lib/l2/place.h — an entry's allocation: layout, checks, allocation and commit (lib/l2/place.c). */
#ifndef SC_LIB_L2_PLACE_H
#define SC_LIB_L2_PLACE_H

#include "view.h"

/* Give a block (@off, and for a segmented entry its record @rec_off, else 0) to a new entry of
 * @key and link it (see lib/l2/place.c). */
int l2_commit_seg(struct sc_stage *st, struct sc_key key, uint32_t n, struct sc_digest d, uint64_t off, uint32_t kind,
		  uint64_t l0, uint64_t l1, int has_desc, int has_tokens, uint64_t fp, uint32_t origin, uint64_t rec_off,
		  const uint64_t (*digests)[2], int *why, uint64_t cost);
int l2_alloc_for(struct sc_arena *a, uint64_t len, uint64_t fp, struct sc_key key, uint64_t cost, uint64_t *off,
		 int *why);
uint64_t l2_desc_at(uint64_t wire);
int l2_entry_snap(struct shm_index *ix, const struct shm_index_entry *e, struct l2_snap *sn, struct sc_kv_desc *desc);
int l2_entry_check(struct shm_index *ix, const struct shm_index_entry *e, uint64_t *wire, struct sc_kv_desc *desc,
		   int *has_desc);
void l2_entry_info(struct shm_index *ix, const struct shm_index_entry *e, struct sc_l2_entry_info *info);
/* The footprint of an allocation for @wire bytes (with a descriptor when @has_desc). */
uint64_t l2_alloc_len(uint64_t wire, int has_desc);

/* The allocation of an entry: wire, descriptor, and @ntok stored token ids (0: none). */
uint64_t l2_alloc_len_tok(uint64_t wire, int has_desc, uint64_t ntok);
/* Give the private block at @off to a new entry of @key and link it (see lib/l2/place.c); with
 * @lease, a lease on it. @cost: the compute a hit saves (ns, 0: unknown), for the policy. */
int l2_commit(struct sc_stage *st, struct sc_key key, uint32_t n, struct sc_digest d, uint64_t off, uint32_t kind,
	      uint64_t l0, uint64_t l1, int has_desc, int has_tokens, uint64_t fp, uint32_t origin,
	      struct sc_lease *lease, int *why, uint64_t rec_off, const uint64_t (*dg)[2], uint64_t cost);

/* Allocate @len bytes (footprint @fp) tagged private, making room (never evicting the live entry of
 * @exclude_key; with L2_RESERVE_NO_EVICT only from free room). With @exclude_key and a @cost (ns),
 * the benefit doorkeeper is asked once before room is made (SC_L2_REFUSE_LOW_BENEFIT). 0 with
 * *@off, or -ENOSPC / -EBADMSG with *@why. */
int l2_alloc(struct sc_arena *a, uint64_t len, uint64_t fp, const struct sc_key *exclude_key, uint64_t cost,
	     uint32_t flags, uint64_t *off, int *why);
/* Where the token ids start in an entry's allocation. */
uint64_t l2_tokens_at(uint64_t wire, int has_desc);

#endif
