/* lib/l2/read.h — lookups (lib/l2/read.c). */
#ifndef SC_LIB_L2_READ_H
#define SC_LIB_L2_READ_H

#include "view.h"

/* lib/l2/read.c: sc_l2_get with the key already computed (l2_key_of), tokens verified. With
 * @stale_rec, a location mismatch removes nothing: -ESTALE and the entry's record. */
int l2_get_prehashed(struct sc_stage *st, struct sc_key key, const int32_t *tokens, uint32_t n,
		     const struct sc_location *loc, struct sc_lease *lease, uint64_t *stale_rec);

/* The longest prefix held for @st at a multiple of @block (0: 256) or at @extra, no lease, no
 * count (sc_lookup): 0 with *len and *info, -ENOENT, or a negative errno. */
int l2_longest_peek(struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, uint32_t block,
		    uint32_t extra, uint32_t *len, struct sc_l2_entry_info *info);

#endif
