/* tools/demo/workload.c — the synthetic workload of `demo` and `stress` (see workload.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "workload.h"

/*
 * Natural log and exp for the workload's shapes (Zipf weights, log-uniform lengths), so the
 * product binary does not link libm for two curves: ln by the atanh series on the mantissa,
 * exp by range reduction to |r| <= ln2/2 and its Taylor series. Accurate to ~1e-15 relative,
 * far beyond what a workload generator needs.
 */
#define WL_LN2 0.69314718055994530942

double wl_ln(double x)
{
	if (!(x > 0))
		return -1e308;
	uint64_t b;
	memcpy(&b, &x, 8);
	int e = (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & ~(0x7ffull << 52)) | (1023ull << 52); /* mantissa in [1, 2) */
	double m;
	memcpy(&m, &b, 8);
	double z = (m - 1) / (m + 1), z2 = z * z, term = z, sum = 0;
	for (int k = 1; k < 60; k += 2) {
		sum += term / k;
		term *= z2;
	}
	return 2 * sum + e * WL_LN2;
}

double wl_exp(double y)
{
	if (y > 700)
		y = 700;
	if (y < -700)
		return 0;
	int k = (int)(y / WL_LN2 + (y >= 0 ? 0.5 : -0.5));
	double r = y - k * WL_LN2, term = 1, sum = 1;
	for (int i = 1; i < 25; i++) {
		term *= r / i;
		sum += term;
	}
	uint64_t b = (uint64_t)(k + 1023) << 52;
	double scale;
	memcpy(&scale, &b, 8);
	return sum * scale;
}

static double wl_pow(double x, double s)
{
	return wl_exp(s * wl_ln(x));
}

void wl_geometry_default(struct wl_geometry *g)
{
	g->layers = 8;
	g->kv_heads = 4;
	g->head_dim = 64;
	g->recurrent_bytes = 16u << 10;
}

uint64_t wl_kv_bytes_per_token(const struct wl_geometry *g)
{
	uint64_t row = (uint64_t)g->kv_heads * g->head_dim * 2; /* fp16 */
	return (uint64_t)g->layers * 2 * row;
}

void wl_kv_desc(const struct wl_geometry *g, uint32_t token_count, struct sc_kv_desc *d)
{
	uint64_t row = (uint64_t)g->kv_heads * g->head_dim * 2;
	memset(d, 0, sizeof(*d));
	d->version = 1;
	d->layer_start = 0;
	d->layer_end = g->layers;
	d->layer_count = g->layers;
	d->token_start = 0;
	d->token_count = token_count;
	d->k_type = 1; /* f16 */
	d->v_type = 1;
	d->k_row_bytes = row;
	d->v_row_bytes = row;
	d->v_element_bytes = 2;
	d->k_idx_row_bytes = 0;
	d->payload_bytes = wl_kv_bytes_per_token(g) * token_count;
	d->flags = 0;
	d->codec = SC_KV_CODEC_RAW;
	d->component_count = 0;
}

int wl_payload_build(const struct wl_geometry *g, struct wl_doc *doc, struct wl_payload *out)
{
	memset(out, 0, sizeof(*out));
	out->kv_len = wl_kv_bytes_per_token(g) * doc->token_count;
	out->rec_len = g->recurrent_bytes;
	uint64_t total = out->kv_len + out->rec_len;
	out->buf = malloc(total);
	if (!out->buf)
		return -ENOMEM;
	/* cheap deterministic bytes: one PRNG word per 8 bytes */
	uint64_t st = doc->seed ^ 0xfeedfacecafebeefull;
	uint64_t *w = (uint64_t *)out->buf;
	for (uint64_t i = 0; i < total / 8; i++)
		w[i] = wl_rand(&st);
	for (uint64_t i = total & ~7ull; i < total; i++)
		out->buf[i] = (uint8_t)i;
	wl_kv_desc(g, doc->token_count, &out->desc);
	out->p.kind = SC_PAYLOAD_KV_RECURRENT;
	out->p.sec[0] = out->buf;
	out->p.sec_len[0] = out->kv_len;
	out->p.sec[1] = out->buf + out->kv_len;
	out->p.sec_len[1] = out->rec_len;
	out->p.kv_desc = &out->desc;
	doc->digest = sc_digest(out->buf, total);
	doc->payload_bytes = total;
	return 0;
}

void wl_payload_free(struct wl_payload *p)
{
	free(p->buf);
	p->buf = NULL;
}

void wl_docs_make(struct wl_doc *docs, uint32_t n, uint32_t min_tokens, uint32_t max_tokens, uint64_t seed)
{
	uint64_t st = seed;
	double lo = wl_ln((double)min_tokens), hi = wl_ln((double)max_tokens);
	for (uint32_t i = 0; i < n; i++) {
		double u = (double)(wl_rand(&st) >> 11) / (double)(1ull << 53);
		uint32_t t = (uint32_t)wl_exp(lo + (hi - lo) * u);
		if (t < min_tokens)
			t = min_tokens;
		if (t > max_tokens)
			t = max_tokens;
		memset(&docs[i], 0, sizeof(docs[i]));
		docs[i].id = i;
		docs[i].token_count = t;
		docs[i].seed = wl_mix(seed + i + 1);
	}
}

uint32_t wl_prompt(const struct wl_doc *doc, uint64_t suffix_seed, uint32_t suffix, int32_t *tokens)
{
	for (uint32_t i = 0; i < doc->token_count; i++)
		tokens[i] = wl_doc_token(doc->seed, i);
	for (uint32_t i = 0; i < suffix; i++)
		tokens[doc->token_count + i] = (int32_t)(50000u + wl_mix(suffix_seed + i) % 10000u);
	return doc->token_count + suffix;
}

int wl_zipf_init(struct wl_zipf *z, uint32_t n, double s)
{
	z->n = n;
	z->cdf = malloc(sizeof(double) * n);
	if (!z->cdf)
		return -ENOMEM;
	double sum = 0;
	for (uint32_t i = 0; i < n; i++)
		sum += 1.0 / wl_pow((double)(i + 1), s);
	double acc = 0;
	for (uint32_t i = 0; i < n; i++) {
		acc += 1.0 / wl_pow((double)(i + 1), s) / sum;
		z->cdf[i] = acc;
	}
	z->cdf[n - 1] = 1.0;
	return 0;
}

uint32_t wl_zipf_next(const struct wl_zipf *z, uint64_t *rng)
{
	double u = (double)(wl_rand(rng) >> 11) / (double)(1ull << 53);
	uint32_t lo = 0, hi = z->n - 1;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void wl_zipf_free(struct wl_zipf *z)
{
	free(z->cdf);
	z->cdf = NULL;
}

int wl_drain_rings(struct sc_arena *a, sc_ring_fn cb, void *ctx, const _Atomic int *stop, uint64_t quiet_ns,
		   void (*on_torn)(void *ctx), void *torn_ctx)
{
	uint64_t idle_since = 0;
	for (;;) {
		int rc = sc_ring_poll(a, cb, ctx, 4096);
		if (rc == -EBADMSG) {
			if (on_torn)
				on_torn(torn_ctx);
		} else if (rc < 0) {
			return rc;
		}
		if (rc > 0) {
			idle_since = 0;
			continue;
		}
		if (atomic_load(stop)) {
			uint64_t now = cli_now_ns();
			if (!idle_since)
				idle_since = now;
			else if (now - idle_since > quiet_ns)
				return 0;
		}
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
}
