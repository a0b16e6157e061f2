/* lib/key.c — digests (unseeded XXH3-128) and L2 keys (XXH3-128 keyed with the arena's secret). */
#include <errno.h>
#include <string.h>
#include "xxh.h"

#include "l2.h"

struct sc_digest sc_digest_of(const void *buf, size_t len)
{
	XXH128_hash_t h = XXH3_128bits(len ? buf : "", len);
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
	XXH3_128bits_update(&s, a, alen);
	XXH3_128bits_update(&s, b, blen);
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
	XXH3_128bits_update(s, le, 4);
	if (len)
		XXH3_128bits_update(s, str, len);
}

struct sc_digest key_identity(const char *model, size_t ml, const char *state, size_t sl)
{
	XXH3_state_t s;
	XXH3_128bits_reset(&s);
	XXH3_128bits_update(&s, "SCIDENT1", 8);
	put_lp(&s, model, ml);
	put_lp(&s, state, sl);
	XXH128_hash_t h = XXH3_128bits_digest(&s);
	return (struct sc_digest){ h.low64, h.high64 };
}

struct sc_digest sc_identity_digest(const char *model, const char *state)
{
	return key_identity(model, model ? strlen(model) : 0, state, state ? strlen(state) : 0);
}

#ifdef SC_TEST_HOOKS
/* the test build's weakened key (sc_test_set_key_mask): every key and prefix hash is masked */
uint64_t sc_key_mask_lo_ = ~0ull, sc_key_mask_hi_ = ~0ull;
#endif

/* The stage's base state: "SCL2KEY2", lp(model), lp(state); its digest is the stage hash (the
 * stage id is its low half). Called by sc_stage_open. */
int l2_stage_base(struct sc_stage *st, const uint8_t *secret, const char *model, const char *state)
{
	if (XXH3_128bits_reset_withSecret(&st->base, secret, SHM_SECRET_BYTES) != XXH_OK)
		return -EINVAL;
	XXH3_128bits_update(&st->base, "SCL2KEY2", 8);
	put_lp(&st->base, model, st->model_len);
	put_lp(&st->base, state, st->state_len);
	XXH128_hash_t h = XXH3_128bits_digest(&st->base);
	st->id = h.low64;
	st->id_hi = h.high64;
	st->secret = secret;
	st->ident = key_identity(model, st->model_len, state, st->state_len);
	return 0;
}

static inline XXH128_hash_t h128(const void *p, size_t len, const uint8_t *secret)
{
	return XXH3_128bits_withSecret(p, len, secret, SHM_SECRET_BYTES);
}

/*
 * Prefix hashes (see lib/internal.h). The chain runs over 256-token blocks:
 *   C_0     = H("SCPFX002" | u32 ns length | ns)
 *   C_{i+1} = H(C_i | H(block i))                      (block i: tokens [256i, 256i+256) as LE int32)
 *   P(len)  = H(C_{len/256} | u32 len | tokens [256*(len/256), len))
 * with H the XXH3-128 keyed by the arena's secret. One pass over the tokens yields P at every
 * length; the length is hashed into P, so prefixes of different lengths never share a chain value.
 */
int key_pfx_chain(const uint8_t *secret, const char *ns, const int32_t *tokens, uint32_t n, const uint32_t *lens,
		  uint32_t nlens, struct sc_key *chain)
{
	size_t nl = ns ? strnlen(ns, SC_IDENTITY_MAX + 1) : 0;
	if (nl > SC_IDENTITY_MAX)
		return -EINVAL;
	XXH128_hash_t c;
	uint8_t buf[12 + 64];
	if (nl <= sizeof(buf) - 12) {
		memcpy(buf, "SCPFX002", 8);
		buf[8] = (uint8_t)nl, buf[9] = (uint8_t)(nl >> 8), buf[10] = (uint8_t)(nl >> 16), buf[11] = 0;
		if (nl)
			memcpy(buf + 12, ns, nl);
		c = h128(buf, 12 + nl, secret);
	} else {
		XXH3_state_t s;
		XXH3_128bits_reset_withSecret(&s, secret, SHM_SECRET_BYTES);
		XXH3_128bits_update(&s, "SCPFX002", 8);
		put_lp(&s, ns, nl);
		c = XXH3_128bits_digest(&s);
	}
	size_t blocks = 0; /* blocks folded into c */
	for (uint32_t i = 0; i < nlens; i++) {
		size_t len = lens[i];
		if (len > n || (i && len < lens[i - 1]))
			return -EINVAL;
		while ((blocks + 1) * SC_PFX_BLOCK <= len) {
			XXH128_hash_t b = h128(tokens + blocks * SC_PFX_BLOCK, SC_PFX_BLOCK * 4, secret);
			uint64_t two[4] = { c.low64, c.high64, b.low64, b.high64 };
			c = h128(two, sizeof(two), secret);
			blocks++;
		}
		chain[i] = (struct sc_key){ c.low64, c.high64 };
	}
	return 0;
}

struct sc_key key_pfx_finish(const uint8_t *secret, struct sc_key chain, const int32_t *tokens, uint32_t len)
{
	uint8_t buf[16 + 4 + SC_PFX_BLOCK * 4];
	uint32_t tail = len % SC_PFX_BLOCK;
	memcpy(buf, &chain.lo, 8);
	memcpy(buf + 8, &chain.hi, 8);
	memcpy(buf + 16, &len, 4);
	if (tail)
		memcpy(buf + 20, tokens + (len - tail), (size_t)tail * 4);
	XXH128_hash_t p = h128(buf, 20 + (size_t)tail * 4, secret);
	struct sc_key k = { p.low64, p.high64 };
	key_weaken(&k);
	return k;
}

int key_pfx_hashes(const uint8_t *secret, const char *ns, const int32_t *tokens, uint32_t n, const uint32_t *lens,
		   uint32_t nlens, struct sc_key *out)
{
	int rc = key_pfx_chain(secret, ns, tokens, n, lens, nlens, out);
	for (uint32_t i = 0; !rc && i < nlens; i++)
		out[i] = key_pfx_finish(secret, out[i], tokens, lens[i]);
	return rc;
}

struct sc_key l2_key_of(const struct sc_stage *st, struct sc_key pfx)
{
	uint64_t four[4] = { st->id, st->id_hi, pfx.lo, pfx.hi };
	XXH128_hash_t h = h128(four, sizeof(four), st->secret);
	struct sc_key k = { h.low64, h.high64 };
	key_weaken(&k);
	return k;
}

int sc_l2_key(const struct sc_stage *st, const char *ns, const int32_t *tokens, uint32_t n, struct sc_key *out)
{
	if (!st || !out || (n && !tokens) || n > UINT32_MAX)
		return -EINVAL;
	uint32_t len = (uint32_t)n;
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
	if (!st || (n && !tokens) || (max && !keys) || n > UINT32_MAX)
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
