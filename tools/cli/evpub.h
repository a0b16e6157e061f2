/*
 * tools/cli/evpub.h — the KV-event publisher's model of what an arena holds, as token blocks per
 * medium, and the wire encoding of vLLM's KVEventBatch (msgpack; docs/ROUTING.md) of what changed
 * in it (tools/cli/evpub.c). Used by `stagecache events` (tools/cli/cmd_events.c).
 *
 * An entry (an L2 entry by its key, an L3 prefix entry by its prefix key) holds the whole blocks
 * of its tokens; a block is held in a medium while any entry of that medium holds it (entries
 * share the blocks of their common prefix). A change of an entry adds BlockStored events for the
 * blocks that became held (runs of consecutive blocks, each run with its parent's hash) and one
 * BlockRemoved for those no entry holds any more, to the pending batch.
 */
#ifndef SC_TOOLS_EVPUB_H
#define SC_TOOLS_EVPUB_H

#include <stdint.h>

#include "stagecache.h"

enum { EVPUB_L2 = 0, EVPUB_L3 = 1, EVPUB_MEDIA = 2 };

struct evpub_opts {
	uint32_t block_size;             /* tokens per block (16: vLLM's default) */
	const char *medium[EVPUB_MEDIA]; /* names on the wire: "cpu_shared", "disk" */
	int has_lora_id;                 /* lora_id on the wire (else nil) */
	int64_t lora_id;
	const char *lora_name;           /* lora_name on the wire (NULL: nil) */
	int has_dp_rank;                 /* the batch's data_parallel_rank (else omitted) */
	int64_t dp_rank;
	int map_events;                  /* events as maps with a "type" key (later vLLM, Dynamo's relay);
					  * 0: tagged arrays (vLLM's array_like structs) */
};

struct evpub;

/* NULL when out of memory. */
struct evpub *evpub_new(const struct evpub_opts *o);
void evpub_free(struct evpub *p);

/* Entry @key of @medium now holds @tokens[0..n) with payload digest @dg (n == 0: it is gone).
 * 0, or -ENOMEM (the model is then unreliable: resynchronise). */
int evpub_set(struct evpub *p, int medium, struct sc_key key, struct sc_digest dg, const int32_t *tokens, uint32_t n);

/* The keys (and digests) of @medium's entries, malloc'd into *@out (free it): the count, or -ENOMEM. */
struct evpub_key {
	struct sc_key key;
	struct sc_digest digest;
};
int64_t evpub_keys(const struct evpub *p, int medium, struct evpub_key **out);

/* Forget every entry of every medium: the pending batch is emptied and starts with
 * AllBlocksCleared (what follows rebuilds the model: a snapshot). */
void evpub_clear(struct evpub *p);

/* Events waiting for the next batch. */
uint64_t evpub_pending(const struct evpub *p);
/* Encode the pending events as one KVEventBatch with timestamp @ts (seconds) into *@buf (malloc'd;
 * an empty batch when none is pending) and empty them. The length, or -ENOMEM. */
int64_t evpub_flush(struct evpub *p, double ts, uint8_t **buf);
/* Encode the model as a snapshot batch (AllBlocksCleared, then BlockStored for every held block)
 * without changing it. The length, or -ENOMEM. */
int64_t evpub_snapshot(struct evpub *p, double ts, uint8_t **buf);

/* Entries and distinct blocks held in @medium. */
uint64_t evpub_entries(const struct evpub *p, int medium);
uint64_t evpub_blocks(const struct evpub *p, int medium);

#endif
