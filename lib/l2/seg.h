/* lib/l2/seg.h — segmented payloads in L2 (lib/l2/seg.c over shm/seg.h). */
#ifndef SC_LIB_L2_SEG_H
#define SC_LIB_L2_SEG_H

#include "view.h"

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
		 const struct sc_payload *p, uint32_t origin, struct l2_seg_plan *pl, uint64_t cost, int *why);
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

#endif
