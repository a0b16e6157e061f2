/* lib/l3/segstore.h — storing segmented objects and the sweep of segments no object names (lib/l3/segstore.c). */
#ifndef SC_LIB_L3_SEGSTORE_H
#define SC_LIB_L3_SEGSTORE_H

#include "types.h"

/* DIR/seg and DIR/segments at open. */
int l3_seg_open(struct sc_l3 *l3);
/* A put's manifest (the payload cut at l3->seg_size, each piece digested). */
struct l3_seg_man {
	struct l3_seg_ent *e;
	uint32_t n;
};
int l3_seg_plan(struct sc_l3 *l3, const struct sc_payload *pl, struct l3_seg_man *m);
/* Make @block (built by l3_hdr_build) the header of the segmented object of @m. */
void l3_seg_hdr(uint8_t *block, const struct l3_seg_man *m, uint64_t seg_bytes);
/* Every segment of @m in place and touched (mtime now): written where missing. Called again once
 * the manifest is in place: the touch that makes a concurrent sweep keep them (lib/l3/segstore.c).
 * With @sync_found, the directory of every young segment found in place is synced (lib/l3/write.h;
 * the first call: the second finds what the first found or wrote). The bytes of the segment files
 * this call wrote go to *@wrote_bytes, their count to *@wrote. */
int l3_seg_store(struct sc_l3 *l3, const struct sc_payload *pl, const struct l3_seg_man *m, uint64_t *wrote,
		 uint64_t *wrote_bytes, int sync_found);
/* The physical bytes a put of @m adds: its object file and the segments not stored yet. */
uint64_t l3_seg_need(struct sc_l3 *l3, const struct l3_seg_man *m);
/* What eviction and reconciliation know of DIR/seg during one pass (under the lock or lease). */
struct l3_segref {
	uint64_t lo, hi, bytes;    /* bytes: the file's size (0: not seen in DIR/seg) */
	int64_t mtime;
	uint32_t refs;             /* manifests naming it, as listed */
	uint32_t used;             /* slot in use */
};
struct l3_segs {
	struct l3_segref *e;       /* open addressing by digest */
	size_t cap, n;
	uint64_t t0;               /* CLOCK_REALTIME before the listing of objects began */
	uint64_t files, bytes;     /* segment files and their bytes, as listed (minus what was removed) */
	uint64_t logical;          /* header block + payload of every object counted */
	uint64_t removed, removed_bytes, stale;
};
/* List DIR/seg (sizes, mtimes) and note the time: the start of a pass. No segments: 0, empty. */
int l3_segs_begin(struct sc_l3 *l3, struct l3_segs *s);
/* Count the object @name in @dfd (size @file_bytes): whole: its logical bytes; segmented: also
 * @delta on each of its segments' references, and with @delta < 0 the bytes of the segments no
 * longer referenced go to *@freed. 1 segmented, 0 whole, -ENOENT (one of its segments is not in
 * DIR/seg), another -errno (unreadable: left to the callers' checks). */
int l3_segs_object(struct sc_l3 *l3, struct l3_segs *s, int dfd, const char *name, uint64_t file_bytes, int delta,
		   uint64_t *freed);
/* Remove the segments no listed object references that were not touched since the pass began
 * (less the grace); @act (may be NULL) is asked before each removal (the janitor's fence). */
int l3_segs_sweep(struct sc_l3 *l3, struct l3_segs *s, int (*act)(void *), void *ctx);
void l3_segs_end(struct l3_segs *s);
/* A pass's counts into DIR/state: @objects, physical @bytes, and the segments' logical bytes and files. */
void l3_segs_publish(struct sc_l3 *l3, const struct l3_segs *s, uint64_t objects, uint64_t bytes);

#endif
