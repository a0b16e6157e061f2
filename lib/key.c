/* lib/key.c — digests (unseeded XXH3-128) and L2 keys (XXH3-128 keyed with the arena's secret). */
#include <errno.h>
#include <string.h>
#include "xxh.h"

#include "internal.h"
#include "probes.h"

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

struct sc_digest key_identity(const char *model, size_t ml, const char *state, size_t sl)
{
	XXH3_state_t s;
	XXH3_128bits_reset(&s);
	XXH3_128bits_update(&s, "SCIDENT1", 8);
	key_put_lp(&s, model, ml);
	key_put_lp(&s, state, sl);
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
		c = key_h128(buf, 12 + nl, secret);
	} else {
		XXH3_state_t s;
		XXH3_128bits_reset_withSecret(&s, secret, SHM_SECRET_BYTES);
		XXH3_128bits_update(&s, "SCPFX002", 8);
		key_put_lp(&s, ns, nl);
		c = XXH3_128bits_digest(&s);
	}
	size_t blocks = 0; /* blocks folded into c */
	for (uint32_t i = 0; i < nlens; i++) {
		size_t len = lens[i];
		if (len > n || (i && len < lens[i - 1]))
			return -EINVAL;
		while ((blocks + 1) * SC_PFX_BLOCK <= len) {
			XXH128_hash_t b = key_h128(tokens + blocks * SC_PFX_BLOCK, SC_PFX_BLOCK * 4, secret);
			uint64_t two[4] = { c.low64, c.high64, b.low64, b.high64 };
			c = key_h128(two, sizeof(two), secret);
			blocks++;
		}
		chain[i] = (struct sc_key){ c.low64, c.high64 };
	}
	return 0;
}

/* memcpy of @n (< 1 KiB) bytes in 16-byte moves: GCC turns a memcpy of a variable length this
 * short into `rep movsq`, whose start-up costs more than the whole copy of a short tail. */
static void copy_tail(uint8_t *dst, const int32_t *src, size_t n)
{
	const uint8_t *s = (const uint8_t *)src;
	size_t i = 0;
	for (; i + 16 <= n; i += 16)
		memcpy(dst + i, s + i, 16);
	for (; i < n; i += 4)
		memcpy(dst + i, s + i, 4);
}

struct sc_key key_pfx_finish(const uint8_t *secret, struct sc_key chain, const int32_t *tokens, uint32_t len)
{
	uint8_t buf[16 + 4 + SC_PFX_BLOCK * 4];
	uint32_t tail = len % SC_PFX_BLOCK;
	memcpy(buf, &chain.lo, 8);
	memcpy(buf + 8, &chain.hi, 8);
	memcpy(buf + 16, &len, 4);
	if (tail)
		copy_tail(buf + 20, tokens + (len - tail), (size_t)tail * 4);
	XXH128_hash_t p = key_h128(buf, 20 + (size_t)tail * 4, secret);
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


void key_collision_count(struct sc_arena *a, int level, uint64_t tokens)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	if (ix)
		shm_l3ix_count(ix, (enum shm_l3ix_counter)(L3IX_COLL_L2 + level), 1);
	uint64_t lv = (uint64_t)level, tk = tokens;
	SC_PROBE(key_collision, lv, tk);
}
