/*
 * lib/l2/key.c — the L2 key of a stage: H(stage hash | P), where the stage hash covers the model and
 * state identities (keyed by the arena's secret) and P is the prefix hash of lib/key.c.
 */
#include <errno.h>
#include <string.h>

#include "stage.h"

/* The stage's base state: "SCL2KEY2", lp(model), lp(state); its digest is the stage hash (the
 * stage id is its low half). Called by sc_stage_open. */
int l2_stage_base(struct sc_stage *st, const uint8_t *secret, const char *model, const char *state)
{
	if (XXH3_128bits_reset_withSecret(&st->base, secret, SHM_SECRET_BYTES) != XXH_OK)
		return -EINVAL;
	XXH3_128bits_update(&st->base, "SCL2KEY2", 8);
	key_put_lp(&st->base, model, st->model_len);
	key_put_lp(&st->base, state, st->state_len);
	XXH128_hash_t h = XXH3_128bits_digest(&st->base);
	st->id = h.low64;
	st->id_hi = h.high64;
	st->secret = secret;
	st->ident = key_identity(model, st->model_len, state, st->state_len);
	return 0;
}

struct sc_key l2_key_of(const struct sc_stage *st, struct sc_key pfx)
{
	uint64_t four[4] = { st->id, st->id_hi, pfx.lo, pfx.hi };
	XXH128_hash_t h = key_h128(four, sizeof(four), st->secret);
	struct sc_key k = { h.low64, h.high64 };
	key_weaken(&k);
	return k;
}

int sc_l2_key(const struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_key *out)
{
	if (!st || !out || (n && !tokens))
		return -EINVAL;
	uint32_t len = n;
	struct sc_key p;
	int rc = key_pfx_hashes(st->secret, ns, tokens, n, &len, 1, &p);
	if (rc)
		return rc;
	*out = l2_key_of(st, p);
	return 0;
}

#define KEYS_AT_ONCE 64

int sc_l2_prefix_keys(const struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, uint32_t block,
		      struct sc_key *keys, uint32_t max)
{
	if (!st || (n && !tokens) || (max && !keys))
		return -EINVAL;
	if (!block)
		block = L2_PREFIX_BLOCK;
	size_t k = 0;
	/* the chain restarts per call; a batch of lengths shares one pass */
	uint32_t lens[KEYS_AT_ONCE];
	size_t at = block;
	while (at <= n && k < max && k < INT32_MAX) {
		uint32_t m = 0;
		size_t first = k;
		for (; at <= n && k < max && m < KEYS_AT_ONCE; at += block, k++)
			lens[m++] = (uint32_t)at;
		int rc = key_pfx_hashes(st->secret, ns, tokens, n, lens, m, keys + first);
		if (rc)
			return rc;
		for (uint32_t i = 0; i < m; i++)
			keys[first + i] = l2_key_of(st, keys[first + i]);
	}
	return (int)k;
}
