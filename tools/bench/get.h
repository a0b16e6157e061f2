/*
 * tools/bench/get.h — what the parts of `stagecache bench get` share:
 *   get.c         the driver: ours, LMDB, the memory floor, measurement processes, figures;
 *   get_server.c  the socket baselines: memcached (meta protocol), Redis (RESP) and a minimal
 *                 unix-socket server of our own, each started here and read by a client that
 *                 receives every value straight into the caller's destination;
 *   get_items.c   the size classes' tokens, keys and values (below both).
 */
#ifndef SC_TOOLS_BENCH_GET_H
#define SC_TOOLS_BENCH_GET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One size class: @nitems items of @nb blocks of @bytes each (a get of an item gets its blocks in
 * one request: nb == 1 for the single gets, 16 for the pipelined prefix). */
struct gclass {
	const char *tag;        /* "4k", "64k", "1m", "pipe16" */
	int index;              /* which class: seeds its tokens and values */
	uint64_t bytes;         /* bytes per block */
	int nb;                 /* blocks per get */
	uint32_t ntok;          /* tokens per block's key step (block b's key covers (b+1)*ntok tokens) */
	uint32_t nitems;
	int32_t *tokens;        /* nitems * nb * ntok tokens */
	uint8_t (*key)[16];     /* nitems * nb: unseeded XXH3-128 of each block's prefix (their keys) */
};

/* Allocate @c's items for a working set of @ws bytes (at least 16 items): tokens and their keys.
 * 0, or -1 when out of memory (bg_class_free frees what was allocated). */
int bg_class_init(struct gclass *c, uint64_t ws);
void bg_class_free(struct gclass *c);
/* The tokens of item @i (nb * ntok of them). */
const int32_t *bg_item_tokens(const struct gclass *c, uint32_t i);
/* The value of block @b of item @i of class @c into @buf (c->bytes): incompressible, distinct. */
void bg_value_fill(const struct gclass *c, uint32_t i, int b, uint8_t *buf);
/* Memcached/Redis key text of (i, b): "scb:" + 32 hex chars; returns its length. */
size_t bg_key_text(const uint8_t key[16], char out[40]);
/* Block keys of item @i the way their clients compute them: one XXH3-128 pass over its tokens,
 * a digest at every block boundary. */
void bg_their_keys(const struct gclass *c, uint32_t i, uint8_t (*out)[16]);

enum bg_srv { BG_MC_UNIX, BG_MC_TCP, BG_REDIS, BG_SOCK, BG_NSRV };

/* Start server @s (its own temp dir under @dir) and load class @c into it. 0 or -1 (said why). */
int bg_server_start(int s, const char *dir, const struct gclass *c);
/* Stop and reap every server started. */
void bg_servers_stop(void);
/* The server's version ("" when unknown). */
const char *bg_server_version(int s);

/* A client connection: bg_conn_open, then bg_conn_get(item) (every block received into
 * dst[b]), then bg_conn_close. @tcp picks Redis's TCP port. 0 or -1 (said why). */
struct bg_conn;
struct bg_conn *bg_conn_open(int s, int redis_tcp);
int bg_conn_get(struct bg_conn *k, const struct gclass *c, uint32_t item, uint8_t (*keys)[16], uint8_t **dst);
void bg_conn_close(struct bg_conn *k);

#endif
