/* lib/l3/lru.h — the janitor's LRU table (lib/l3/lru.c). */
#ifndef SC_LIB_L3_LRU_H
#define SC_LIB_L3_LRU_H

#include "types.h"

struct l3_lru_ent {
	uint64_t lo, hi, t_ns;     /* digest, last use (CLOCK_REALTIME) */
};
struct l3_lru {
	struct l3_lru_ent *e;      /* open addressing: digest -> last use (t_ns 0: empty) */
	size_t cap, n;
	char (*closed)[L3_WRITER_MAX + 16]; /* DIR/access segments to remove once the table is written */
	size_t nclosed, capclosed;
	uint64_t accesses;         /* segment records merged */
};
/* DIR/lru, then every DIR/access segment merged in; @left_over(@ctx, name) tells whether a
 * segment's writer let go of it (it is then closed: removed after the table is written). */
void l3_lru_load(struct sc_l3 *l3, struct l3_lru *m, int (*left_over)(void *, const char *), void *ctx);
/* The last recorded use of a digest (0: none). */
uint64_t l3_lru_get(const struct l3_lru *m, uint64_t lo, uint64_t hi);
/* Write @e[0..n) as DIR/lru (tmp + fsync, then rename if @fence says we still hold the lease). */
int l3_lru_write(struct sc_l3 *l3, const struct l3_lru_ent *e, size_t n, int (*fence)(struct sc_l3 *));
/* Write every entry of @m (the table and the segments merged, objects gone or not) as DIR/lru:
 * a pass that did not list the store (a later listing drops the entries of objects gone). */
int l3_lru_write_merged(struct sc_l3 *l3, const struct l3_lru *m, int (*fence)(struct sc_l3 *));
void l3_lru_free(struct l3_lru *m);

#endif
