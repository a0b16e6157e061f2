/* lib/l3/fill.h — fills and the put path's synchronous I/O on the per-thread rings, and kept files (lib/l3/fill.c). */
#ifndef SC_LIB_L3_FILL_H
#define SC_LIB_L3_FILL_H

#include "types.h"

/* l3_fill_req for a fill into @src's memory (sc_restore): the segments of a segmented object that
 * @src's L2 holds are copied from there, not read (lib/l3/segstore.c). */
int l3_fill_from(struct sc_l3 *l3, struct sc_l3_fill_req *req, struct sc_arena *src);
/* One fill, waiting for it (other completions of this thread stay queued for reap). */
int l3_fill_req(struct sc_l3 *l3, struct sc_l3_fill_req *req);
/* Synchronous write of @iov at @off through the ring (loops on short writes). */
int l3_ring_writev(struct l3_ring *r, int fd, const struct iovec *iov, int niov, uint64_t off);
int l3_ring_fsync(struct l3_ring *r, int fd);

/* Wait for every fill in flight on this thread's rings of @l3 (before the rings are freed). */
void l3_fills_drain(struct sc_l3 *l3);

#endif
