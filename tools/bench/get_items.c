/*
 * tools/bench/get_items.c — the items of `stagecache bench get`: tokens, keys and values of each
 * size class, the same for every system compared (get.c drives, get_server.c serves; both use these).
 */
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "bench.h"
#include "get.h"

void bg_value_fill(const struct gclass *c, uint32_t i, int b, uint8_t *buf)
{
	uint64_t s = ((uint64_t)c->index << 56) ^ ((uint64_t)i << 8) ^ (uint64_t)b;
	for (uint64_t o = 0; o < c->bytes; o += 8) {
		uint64_t w = bench_splitmix(&s);
		memcpy(buf + o, &w, 8);
	}
}

size_t bg_key_text(const uint8_t key[16], char out[40])
{
	static const char hex[] = "0123456789abcdef";
	memcpy(out, "scb:", 4);
	for (int i = 0; i < 16; i++) {
		out[4 + 2 * i] = hex[key[i] >> 4];
		out[5 + 2 * i] = hex[key[i] & 15];
	}
	out[36] = 0;
	return 36;
}

const int32_t *bg_item_tokens(const struct gclass *c, uint32_t i)
{
	return c->tokens + (size_t)i * (size_t)c->nb * c->ntok;
}

void bg_their_keys(const struct gclass *c, uint32_t i, uint8_t (*out)[16])
{
	const int32_t *t = bg_item_tokens(c, i);
	if (c->nb == 1) {
		XXH128_hash_t h = XXH3_128bits(t, c->ntok * sizeof(int32_t));
		memcpy(out[0], &h, 16);
		return;
	}
	XXH3_state_t s;
	XXH3_128bits_reset(&s);
	for (int b = 0; b < c->nb; b++) {
		XXH3_128bits_update(&s, t + (size_t)b * c->ntok, c->ntok * sizeof(int32_t));
		XXH128_hash_t h = XXH3_128bits_digest(&s);
		memcpy(out[b], &h, 16);
	}
}

int bg_class_init(struct gclass *c, uint64_t ws)
{
	uint64_t per = c->bytes * (uint64_t)c->nb;
	c->nitems = (uint32_t)(ws / per < 16 ? 16 : ws / per);
	size_t nblk = (size_t)c->nitems * (size_t)c->nb;
	c->tokens = malloc(nblk * c->ntok * sizeof(int32_t));
	c->key = malloc(nblk * 16);
	if (!c->tokens || !c->key)
		return -1;
	uint64_t s = 0x5eed0000ull + (uint64_t)c->index;
	for (size_t k = 0; k < nblk * c->ntok; k++)
		c->tokens[k] = (int32_t)(bench_splitmix(&s) & 0x7fffffff) % 200000;
	for (uint32_t i = 0; i < c->nitems; i++)
		bg_their_keys(c, i, c->key + (size_t)i * (size_t)c->nb);
	return 0;
}

void bg_class_free(struct gclass *c)
{
	free(c->tokens);
	free(c->key);
	c->tokens = NULL;
	c->key = NULL;
}
