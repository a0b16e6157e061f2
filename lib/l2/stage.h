/* lib/l2/stage.h — stage handles and the arena's L2 counters (lib/l2/stage.c). */
#ifndef SC_LIB_L2_STAGE_H
#define SC_LIB_L2_STAGE_H

#include "view.h"

int l2_ready(struct sc_arena *a);            /* validate the index view once; 0 or -EBADMSG */
void l2_count_event(struct sc_arena *a, uint64_t stage_id, int which, uint64_t v);
struct l2_stage_rec *l2_stage_rec_find(struct sc_arena *a, uint64_t stage_id, int claim);
enum { L2C_INSERTS, L2C_EVICTIONS, L2C_REJECTS, L2C_REFUSED, L2C_REMOVALS };
void l2_flush(struct sc_stage *st);
/* The miss-reason counters of stage @stage_id (NULL: it has no record). */
struct l2_misses *l2_misses_of(struct sc_arena *a, uint64_t stage_id);
/* The per-token cost declared for stage @st (its record's, else its handle's), 0: none. */
uint64_t l2_token_cost(const struct sc_stage *st);
/* Count one refusal of @bytes wire bytes for @reason (enum sc_l2_refusal) and fire l2_reject with
 * @rc (negative errno). Returns @rc. */
int l2_refuse(struct sc_arena *a, uint64_t stage_id, uint64_t bytes, int rc, int reason);


#define L2_PREFIX_BLOCK 256u /* prefix lengths step by this when the caller's block is 0 */
/* The L2 key of a prefix from its prefix hash P (key_pfx_hashes): H(stage hash | P). */
struct sc_key l2_key_of(const struct sc_stage *st, struct sc_key pfx);
int l2_stage_base(struct sc_stage *st, const uint8_t *secret, const char *model, const char *state);

#endif
