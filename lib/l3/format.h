/* lib/l3/format.h — the on-disk formats' pure functions: headers, names, prefix keys (lib/l3/format.c). */
#ifndef SC_LIB_L3_FORMAT_H
#define SC_LIB_L3_FORMAT_H

#include "types.h"

uint64_t l3_hdr_check(const uint8_t *block);
/* Build a header block for a put. */
int l3_hdr_build(uint8_t *block, const struct sc_l3_put_args *p, XXH128_hash_t digest, XXH128_hash_t prefix);
/* Record @cost_ns (clamped to SC_COST_MAX) in a built header block (its check recomputed). */
void l3_hdr_set_cost(uint8_t *block, uint64_t cost_ns);
/* Validate a header block against the file size (0: don't check); fills *h. -EBADMSG / -EPROTO. */
int l3_hdr_parse(const uint8_t *block, uint64_t file_bytes, struct l3_obj_hdr *h);
/* The (model, state) identity digest recorded in a parsed header block (sc_identity_digest); zero
 * when the object was put with neither identity (it claims none, and any stage may restore it). */
struct sc_digest l3_hdr_identity(const uint8_t *block, const struct l3_obj_hdr *h);
/* Does a fill that asked for identity @want (zero: any) find another one (@have; zero: none)? */
int l3_identity_differs(struct sc_digest want, struct sc_digest have);
/* The location described by a validated header block. */
void l3_hdr_location(const uint8_t *block, const struct l3_obj_hdr *h, struct sc_location *loc);
void l3_digest_hex(uint64_t lo, uint64_t hi, char out[33]);
int l3_hex_digest(const char *s, uint64_t *lo, uint64_t *hi);
void l3_obj_relpath(uint64_t lo, uint64_t hi, char out[48]);
void l3_pfx_relpath(uint64_t lo, uint64_t hi, char out[48]);
/* Prefix keys of @tokens at each length in @lens (ascending, each <= n): keys[i] for lens[i]. */
void l3_prefix_keys(const char *ns, const int32_t *tokens, const uint32_t *lens, uint32_t nlens,
		    XXH128_hash_t *keys);

/* DIR/seg's relative path of segment @lo/@hi: "<2 hex>/<32 hex>.seg". */
void l3_seg_relpath(uint64_t lo, uint64_t hi, char out[48]);

#endif
