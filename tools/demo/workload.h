/*
 * tools/demo/workload.h — synthetic inference workload shared by `demo` and `stress`: a small model
 * geometry, prefix-state payloads with valid KV page descriptors, Zipf-distributed prompts over a
 * set of documents that share prefixes, and deterministic generations a consumer can verify.
 */
#ifndef SC_TOOLS_WORKLOAD_H
#define SC_TOOLS_WORKLOAD_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

#include "stagecache.h"

/* fp16 KV of a small model: per token and layer, K and V rows of kv_heads * head_dim halves. */
struct wl_geometry {
	uint32_t layers;     /* default 8 */
	uint32_t kv_heads;   /* default 4 */
	uint32_t head_dim;   /* default 64 */
	uint32_t recurrent_bytes; /* size of the recurrent section; default 16 KiB */
};

void wl_geometry_default(struct wl_geometry *g);
/* KV bytes per token (all layers, K + V). */
uint64_t wl_kv_bytes_per_token(const struct wl_geometry *g);

/* A document: a prompt prefix that many requests share. */
struct wl_doc {
	uint32_t id;
	uint32_t token_count;
	uint64_t seed;
	struct sc_digest digest;  /* of the payload wire, filled by wl_payload_build */
	uint64_t payload_bytes;
};

/* A deterministic PRNG (splitmix64). */
static inline uint64_t wl_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t wl_rand(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return wl_mix(*state);
}

/* Token i of document @seed (tokens are 0..49999, like a vocabulary). */
static inline int32_t wl_doc_token(uint64_t seed, uint32_t i)
{
	return (int32_t)(wl_mix(seed * 1000003u + i) % 50000u);
}

/* Token i of the generation of @request_id, and its length (16..143 tokens). */
static inline int32_t wl_gen_token(uint64_t request_id, uint64_t i)
{
	return (int32_t)(wl_mix(request_id ^ (i * 0x100000001b3ull)) % 50000u);
}

static inline uint32_t wl_gen_length(uint64_t request_id)
{
	return 16u + (uint32_t)(wl_mix(request_id * 31u) % 128u);
}

/* A payload in caller memory: sections and descriptor pointing into @buf. */
struct wl_payload {
	uint8_t *buf;
	uint64_t kv_len, rec_len;
	struct sc_kv_desc desc;
	struct sc_payload p;
};

/* Build the KV_RECURRENT payload of @doc into @out (allocates out->buf; free with wl_payload_free).
 * Fills doc->digest and doc->payload_bytes. Returns 0 or -ENOMEM. */
int wl_payload_build(const struct wl_geometry *g, struct wl_doc *doc, struct wl_payload *out);
void wl_payload_free(struct wl_payload *p);
/* The KV descriptor of a prefix of @token_count tokens under @g. */
void wl_kv_desc(const struct wl_geometry *g, uint32_t token_count, struct sc_kv_desc *d);

/* Natural log and exp (tools/demo/workload.c), so the CLI does not link libm for the workload's curves. */
double wl_ln(double x);
double wl_exp(double y);

/* Documents with token counts log-uniform in [min_tokens, max_tokens]. */
void wl_docs_make(struct wl_doc *docs, uint32_t n, uint32_t min_tokens, uint32_t max_tokens, uint64_t seed);
/* Fill @tokens with document @doc's tokens then @suffix unique tokens; returns the total. */
uint32_t wl_prompt(const struct wl_doc *doc, uint64_t suffix_seed, uint32_t suffix, int32_t *tokens);

/* Zipf(s) over 0..n-1 by inverse CDF (table of n doubles, allocated). */
struct wl_zipf {
	double *cdf;
	uint32_t n;
};
int wl_zipf_init(struct wl_zipf *z, uint32_t n, double s);
uint32_t wl_zipf_next(const struct wl_zipf *z, uint64_t *rng);
void wl_zipf_free(struct wl_zipf *z);

/* The consumer loop of the demo and the stress verifier: poll @a's rings into @cb until *@stop is
 * set and the rings then stayed empty for @quiet_ns. A poll that finds a corrupted ring (-EBADMSG)
 * calls @on_torn (NULL: nothing) and goes on. 0, or the -errno of a poll that failed otherwise. */
int wl_drain_rings(struct sc_arena *a, sc_ring_fn cb, void *ctx, const _Atomic int *stop, uint64_t quiet_ns,
		   void (*on_torn)(void *ctx), void *torn_ctx);

#endif
