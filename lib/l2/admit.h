/* lib/l2/admit.h — admission, reservations and publishing (lib/l2/admit.c). */
#ifndef SC_LIB_L2_ADMIT_H
#define SC_LIB_L2_ADMIT_H

#include "view.h"

/* Internal forms that report why they refused (*why, enum sc_l2_refusal, when not 0). */
/* @key, @cost: the prefix a reservation is for and its compute cost (NULL, 0: none), so that the
 * benefit doorkeeper judges it before room is made for it (and a refusal is noted for the key). */
int l2_reserve(struct sc_stage *st, uint64_t bytes, uint32_t flags, const struct sc_key *key, uint64_t cost,
	       struct sc_l2_resv *r, int *why);
/* @cost_ns: the prefix's compute cost (0: the stage's per-token cost x n, if declared). */
int l2_admit(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_digest expected,
	     const struct sc_payload *p, uint32_t origin, uint64_t cost_ns, int *why);
int l2_publish(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_digest expected,
	       struct sc_l2_resv *r, uint32_t kind, uint64_t kv_len, uint64_t rec_len, const struct sc_kv_desc *desc,
	       uint32_t origin, struct sc_lease *lease, uint64_t cost_ns, int *why);

#endif
