/* lib/key.c — digests (unseeded XXH3-128) and L2 keys (XXH3-128 keyed with the arena's secret). */
#include <errno.h>
#include <string.h>
#include <xxh_x86dispatch.h>

#include "l2.h"

struct sc_digest sc_digest_of(const void *buf, size_t len)
{
	XXH128_hash_t h = XXH3_128bits_dispatch(len ? buf : "", len);
	return (struct sc_digest){ h.low64, h.high64 };
}

/* the former name, kept for C callers (in C++ it would hide the structure's name) */
struct sc_digest sc_digest(const void *buf, size_t len)
{
	return sc_digest_of(buf, len);
}

struct sc_digest sc_digest_sections(const void *a, size_t alen, const void *b, size_t blen)
{
	if (!blen)
		return sc_digest_of(a, alen);
	if (!alen)
		return sc_digest_of(b, blen);
	XXH3_state_t s;
	XXH3_128bits_reset(&s);
	XXH3_128bits_update_dispatch(&s, a, alen);
	XXH3_128bits_update_dispatch(&s, b, blen);
	XXH128_hash_t h = XXH3_128bits_digest(&s);
	return (struct sc_digest){ h.low64, h.high64 };
}

char *sc_digest_format(struct sc_digest d, char out[SC_DIGEST_HEX_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	uint64_t w[2] = { d.hi, d.lo }; /* canonical form: high64 first, big-endian */
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 16; j++)
			out[i * 16 + j] = hex[(w[i] >> (60 - 4 * j)) & 0xf];
	out[SC_DIGEST_HEX_LEN] = 0;
	return out;
}

int sc_digest_parse(const char *s, struct sc_digest *out)
{
	if (!s || !out || strlen(s) != SC_DIGEST_HEX_LEN)
		return -EINVAL;
	uint64_t w[2] = { 0, 0 };
	for (int i = 0; i < SC_DIGEST_HEX_LEN; i++) {
		char c = s[i];
		unsigned v;
		if (c >= '0' && c <= '9')
			v = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v = (unsigned)(c - 'A' + 10);
		else
			return -EINVAL;
		w[i / 16] = (w[i / 16] << 4) | v;
	}
	out->hi = w[0];
	out->lo = w[1];
	return 0;
}

static void put_lp(XXH3_state_t *s, const char *str, size_t len)
{
	uint8_t le[4] = { (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24) };
	XXH3_128bits_update_dispatch(s, le, 4);
	if (len)
		XXH3_128bits_update_dispatch(s, str, len);
}

/* The stage's base state: "SCL2KEY1", lp(model), lp(state). Called by sc_stage_open. */
int l2_stage_base(struct sc_stage *st, const uint8_t *secret, const char *model, const char *state)
{
	if (XXH3_128bits_reset_withSecret(&st->base, secret, SHM_SECRET_BYTES) != XXH_OK)
		return -EINVAL;
	XXH3_128bits_update_dispatch(&st->base, "SCL2KEY1", 8);
	put_lp(&st->base, model, st->model_len);
	put_lp(&st->base, state, st->state_len);
	st->id = XXH3_128bits_digest(&st->base).low64;
	return 0;
}

int l2_key_stream(const struct sc_stage *st, const char *ns, XXH3_state_t *s)
{
	size_t nl = ns ? strnlen(ns, SC_IDENTITY_MAX + 1) : 0;
	if (nl > SC_IDENTITY_MAX)
		return -EINVAL;
	memcpy(s, &st->base, sizeof(*s));
	put_lp(s, ns, nl);
	return 0;
}

int sc_l2_key(const struct sc_stage *st, const char *ns, const int32_t *tokens, size_t n, struct sc_key *out)
{
	if (!st || !out || (n && !tokens) || n > (SIZE_MAX / 8))
		return -EINVAL;
	XXH3_state_t s;
	int rc = l2_key_stream(st, ns, &s);
	if (rc)
		return rc;
	if (n)
		XXH3_128bits_update_dispatch(&s, tokens, n * sizeof(int32_t));
	XXH128_hash_t h = XXH3_128bits_digest(&s);
	out->lo = h.low64;
	out->hi = h.high64;
	return 0;
}

int sc_l2_prefix_keys(const struct sc_stage *st, const char *ns, const int32_t *tokens, size_t n, size_t block,
		      struct sc_key *keys, size_t max)
{
	if (!st || (n && !tokens) || (max && !keys) || n > (SIZE_MAX / 8))
		return -EINVAL;
	if (!block)
		block = 256;
	XXH3_state_t s;
	int rc = l2_key_stream(st, ns, &s);
	if (rc)
		return rc;
	size_t k = 0;
	for (size_t at = 0; at + block <= n && k < max && k < INT32_MAX; at += block) {
		XXH3_128bits_update_dispatch(&s, tokens + at, block * sizeof(int32_t));
		/* digest reads the state without consuming it: the stream goes on */
		XXH128_hash_t h = XXH3_128bits_digest(&s);
		keys[k].lo = h.low64;
		keys[k].hi = h.high64;
		k++;
	}
	return (int)k;
}
