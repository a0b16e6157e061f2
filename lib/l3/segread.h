/* lib/l3/segread.h — reading segmented objects: manifests, fills of their segments, verification, quarantine of a bad segment (lib/l3/segread.c). */
#ifndef SC_LIB_L3_SEGREAD_H
#define SC_LIB_L3_SEGREAD_H

#include "types.h"

/* Is this header block a segmented object's (magic and version only: l3_seg_fill validates)? */
int l3_seg_is_manifest(const uint8_t *block);
/* The fill of a segmented object opened at @fd (its size @file_bytes): segments read on the ring's
 * segment ring into req->dst and verified. 0, -ENOENT (a segment missing: a miss), -EBADMSG (a
 * segment or the manifest is corrupt: quarantined with every object using it), -EINVAL. */
int l3_seg_fill(struct sc_l3 *l3, struct l3_ring *r, int fd, uint64_t file_bytes, struct sc_l3_fill_req *req);
void l3_seg_ring_free(struct l3_ring *r);
/* The manifest of the object at @fd: *@h and the entries (malloc'd) validated. Count or -errno. */
int l3_seg_manifest(int fd, uint64_t file_bytes, struct l3_obj_hdr *h, struct l3_seg_ent **e);
/* Full verification of a segmented object (sc_l3_verify): 0 or -EBADMSG / -ENOENT (segments
 * missing or cut: their count in *@missing) / -ENOMEM. */
int l3_seg_verify(struct sc_l3 *l3, int fd, uint64_t file_bytes, uint32_t *missing);

/* Move segment @lo/@hi out of DIR/seg (into quarantine/): its counters follow. 0 or -errno. */
int l3_seg_move_away(struct sc_l3 *l3, uint64_t lo, uint64_t hi);

#endif
