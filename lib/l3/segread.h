/* lib/l3/segread.h — reading segmented objects: manifests, fills of their segments, verification, quarantine of a bad segment (lib/l3/segread.c). */
#ifndef SC_LIB_L3_SEGREAD_H
#define SC_LIB_L3_SEGREAD_H

#include "types.h"

/* Is this header block a segmented object's (magic and version only: the fill validates)? */
int l3_seg_is_manifest(const uint8_t *block);
/* The segmented fill of @op, whose header block (read, a manifest) is in op->hdrbuf and whose
 * file is op->fd: a state machine on the fill ring (lib/l3/segread.c). Each step reads the
 * manifest (the first), verifies what landed and queues what comes next. 1: the fill is over, its
 * result in op->err (0, -ENOENT: a segment missing, or a file read found bad whose name no
 * longer names it (replaced meanwhile), a miss; -EBADMSG: a segment or the manifest corrupt,
 * quarantined with every object using it; -EINVAL, another -errno); 0: its I/O is in flight
 * (op->pending). */
int l3_segfill_step(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op);
/* A completion of one of its segment opens or reads (@tag: L3_SEG_*). */
void l3_segfill_cqe(struct sc_l3 *l3, struct l3_ring *r, struct l3_fill_op *op, uint32_t tag, int res);
/* Its state freed (files still open closed). */
void l3_segfill_free(struct l3_fill_op *op);
/* The manifest of the object at @fd: *@h and the entries (malloc'd) validated. Count or -errno. */
int l3_seg_manifest(int fd, uint64_t file_bytes, struct l3_obj_hdr *h, struct l3_seg_ent **e);
/* The same from a header block already read and the @got bytes that followed it at @ents:
 * -EAGAIN when they do not hold every entry. */
int l3_seg_manifest_mem(const uint8_t *block, uint64_t file_bytes, const void *ents, uint64_t got,
			struct l3_obj_hdr *h, struct l3_seg_ent **e);
/* Full verification of a segmented object (sc_l3_verify): 0 or -EBADMSG / -ENOENT (segments
 * missing or cut, or read bad from a file replaced under the read, not judged: their count in
 * *@missing) / -ENOMEM. */
int l3_seg_verify(struct sc_l3 *l3, int fd, uint64_t file_bytes, uint32_t *missing);

/* Move segment @lo/@hi out of DIR/seg (into quarantine/): its counters follow. 0 or -errno. */
int l3_seg_move_away(struct sc_l3 *l3, uint64_t lo, uint64_t hi);

#ifdef SC_TEST_HOOKS
/* Segments of a fill (bit k: the object's segment k) whose next O_DIRECT read completes as if
 * the kernel had refused it (-EINVAL), each once; tests set it. */
extern _Atomic uint64_t l3_test_refuse_seg_direct;
/* The next segment open on the ring ends with this result instead (once, its file closed; 0: as
 * it did): -EINVAL or -EOPNOTSUPP as a kernel whose ring has no openat2 ends it. Tests set it. */
extern _Atomic int l3_test_seg_open_res;
/* The next segment read that succeeds ends with this result instead (once; 0: as it did). */
extern _Atomic int l3_test_seg_read_res;
#endif

#endif
