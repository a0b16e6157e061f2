/*
 * lib/l3/format.c — the L3 object header block, prefix keys, digests and paths.
 *
 * Everything here is pure: no I/O. Every field read from a header block is validated before use
 * (l3_hdr_parse): a corrupted or hostile file yields -EBADMSG (or -EPROTO for a format version we
 * do not read), never an out-of-bounds access.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "../xxh.h"

#include "types.h"
#include "format.h"

uint64_t l3_hdr_check(const uint8_t *block)
{
	/* the checksum covers the whole block with the check field read as zero */
	XXH3_state_t st;
	uint64_t zero = 0;
	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, block, offsetof(struct l3_obj_hdr, check));
	XXH3_64bits_update(&st, &zero, sizeof(zero));
	XXH3_64bits_update(&st, block + offsetof(struct l3_obj_hdr, check) + 8,
			   L3_HDR_BLOCK - offsetof(struct l3_obj_hdr, check) - 8);
	return XXH3_64bits_digest(&st);
}

static size_t slen(const char *s)
{
	return s ? strlen(s) : 0;
}

int l3_hdr_build(uint8_t *block, const struct sc_l3_put_args *p, XXH128_hash_t digest, XXH128_hash_t prefix)
{
	size_t ml = slen(p->model_identity), sl = slen(p->state_identity), nl = slen(p->ns);
	const struct sc_payload *pl = p->payload;
	uint32_t desc_bytes = pl->kv_desc ? (uint32_t)sizeof(struct sc_kv_desc) : 0;
	if (ml > SC_L3_STR_MAX || sl > SC_L3_STR_MAX || nl > SC_L3_STR_MAX)
		return -EINVAL;
	memset(block, 0, L3_HDR_BLOCK);
	struct l3_obj_hdr h = {
		.magic = L3_OBJ_MAGIC,
		.version = L3_FORMAT_VERSION,
		.hdr_bytes = L3_HDR_BLOCK,
		.kind = pl->kind,
		.token_count = p->token_count,
		.section_bytes = { pl->sec_len[0], pl->sec_len[1] },
		.payload_bytes = pl->sec_len[0] + pl->sec_len[1],
		.desc_bytes = desc_bytes,
		.model_len = (uint16_t)ml,
		.state_len = (uint16_t)sl,
		.ns_len = (uint16_t)nl,
		.digest_lo = digest.low64,
		.digest_hi = digest.high64,
		.prefix_lo = prefix.low64,
		.prefix_hi = prefix.high64,
	};
	h.created_ns = shm_realtime_ns();
	memcpy(block, &h, sizeof(h));
	uint8_t *q = block + L3_HDR_FIXED;
	if (desc_bytes)
		memcpy(q, pl->kv_desc, desc_bytes);
	q += desc_bytes;
	memcpy(q, p->model_identity ? p->model_identity : "", ml);
	q += ml;
	memcpy(q, p->state_identity ? p->state_identity : "", sl);
	q += sl;
	memcpy(q, p->ns ? p->ns : "", nl);
	uint64_t c = l3_hdr_check(block);
	memcpy(block + offsetof(struct l3_obj_hdr, check), &c, sizeof(c));
	return 0;
}

void l3_hdr_set_cost(uint8_t *block, uint64_t cost_ns)
{
	uint64_t c = cost_ns > SC_COST_MAX ? SC_COST_MAX : cost_ns;
	memcpy(block + offsetof(struct l3_obj_hdr, cost_ns), &c, sizeof(c));
	c = l3_hdr_check(block);
	memcpy(block + offsetof(struct l3_obj_hdr, check), &c, sizeof(c));
}

struct sc_digest l3_hdr_identity(const uint8_t *block, const struct l3_obj_hdr *h)
{
	if (!h->model_len && !h->state_len)
		return (struct sc_digest){ 0, 0 }; /* put with no identity: it claims none */
	/* in the block: l3_hdr_parse bounded desc_bytes and both lengths (the header block budget) */
	const char *m = (const char *)block + L3_HDR_FIXED + h->desc_bytes;
	return key_identity(m, h->model_len, m + h->model_len, h->state_len);
}

int l3_identity_differs(struct sc_digest want, struct sc_digest have)
{
	return (want.lo || want.hi) && (have.lo || have.hi) && (want.lo != have.lo || want.hi != have.hi);
}

int l3_hdr_parse(const uint8_t *block, uint64_t file_bytes, struct l3_obj_hdr *h)
{
	memcpy(h, block, sizeof(*h));
	if (h->magic != L3_OBJ_MAGIC)
		return -EBADMSG;
	if (h->version != L3_FORMAT_VERSION && h->version != L3_FORMAT_SEGMENTED)
		return -EPROTO;
	if (h->hdr_bytes != L3_HDR_BLOCK || h->kind == 0 || h->kind > 255 || h->token_count == 0)
		return -EBADMSG;
	if (h->section_bytes[0] > L3_MAX_PAYLOAD || h->section_bytes[1] > L3_MAX_PAYLOAD ||
	    h->payload_bytes != h->section_bytes[0] + h->section_bytes[1] || h->payload_bytes == 0)
		return -EBADMSG;
	/* version 1: the payload follows; version 2: a manifest of 1..L3_SEG_MAX_COUNT segments */
	uint64_t body = h->payload_bytes;
	if (h->version == L3_FORMAT_VERSION && (h->flags || h->seg_count || h->seg_bytes || h->seg_check))
		return -EBADMSG;
	if (h->version == L3_FORMAT_SEGMENTED) {
		if (h->flags != L3_OBJ_SEGMENTED || !h->seg_count || h->seg_count > L3_SEG_MAX_COUNT ||
		    h->seg_count > h->payload_bytes)
			return -EBADMSG;
		body = h->seg_count * sizeof(struct l3_seg_ent);
	}
	if ((h->desc_bytes != 0 && h->desc_bytes != sizeof(struct sc_kv_desc)) || h->model_len > SC_L3_STR_MAX || h->state_len > SC_L3_STR_MAX ||
	    h->ns_len > SC_L3_STR_MAX)
		return -EBADMSG;
	if (file_bytes && file_bytes != L3_HDR_BLOCK + body)
		return -EBADMSG;
	if (l3_hdr_check(block) != h->check)
		return -EBADMSG;
	/* the payload rules of the L2 tier: kind, sections, descriptor */
	switch (h->kind) {
	case SC_PAYLOAD_FULL_STATE:
	case SC_PAYLOAD_RECURRENT_ONLY:
		if (h->section_bytes[1] || h->desc_bytes)
			return -EBADMSG;
		break;
	case SC_PAYLOAD_KV_RECURRENT: {
		struct sc_kv_desc d;
		if (!h->desc_bytes != !h->section_bytes[0])
			return -EBADMSG;
		memcpy(&d, block + L3_HDR_FIXED, sizeof(d));
		if (h->desc_bytes && sc_kv_desc_validate(&d, h->section_bytes[0]))
			return -EBADMSG;
		break;
	}
	default:
		return -EBADMSG;
	}
	return 0;
}

void l3_hdr_location(const uint8_t *block, const struct l3_obj_hdr *h, struct sc_location *loc)
{
	memset(loc, 0, sizeof(*loc));
	loc->token_count = h->token_count;
	loc->kind = h->kind;
	loc->digest = (struct sc_digest){ h->digest_lo, h->digest_hi };
	loc->prefix = (struct sc_digest){ h->prefix_lo, h->prefix_hi };
	loc->sec_len[0] = h->section_bytes[0];
	loc->sec_len[1] = h->section_bytes[1];
	loc->payload_bytes = h->payload_bytes;
	loc->file_bytes = L3_HDR_BLOCK + (h->version == L3_FORMAT_SEGMENTED ? h->seg_count * sizeof(struct l3_seg_ent)
									       : h->payload_bytes);
	loc->has_kv_desc = h->desc_bytes != 0;
	if (loc->has_kv_desc)
		memcpy(&loc->kv_desc, block + L3_HDR_FIXED, sizeof(loc->kv_desc));
	loc->cost_ns = h->cost_ns > SC_COST_MAX ? SC_COST_MAX : h->cost_ns;
}

void l3_digest_hex(uint64_t lo, uint64_t hi, char out[33])
{
	/* big-endian print of the 128-bit value: high64 first, as XXH128 canonical form */
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int l3_hex_digest(const char *s, uint64_t *lo, uint64_t *hi)
{
	if (!s || strlen(s) != 32)
		return -EINVAL;
	uint64_t v[2] = { 0, 0 };
	for (int i = 0; i < 32; i++) {
		int d = hexval(s[i]);
		if (d < 0)
			return -EINVAL;
		v[i / 16] = (v[i / 16] << 4) | (uint64_t)d;
	}
	*hi = v[0];
	*lo = v[1];
	return 0;
}

void l3_obj_relpath(uint64_t lo, uint64_t hi, char out[48])
{
	char hex[33];
	l3_digest_hex(lo, hi, hex);
	snprintf(out, 48, "%.2s/%s.sc3", hex, hex);
}

void l3_pfx_relpath(uint64_t lo, uint64_t hi, char out[48])
{
	char hex[33];
	l3_digest_hex(lo, hi, hex);
	snprintf(out, 48, "%.2s/%s.pfx", hex, hex);
}

/*
 * Prefix key of (ns, tokens[0..k)): unseeded XXH3-128 over a domain tag, the namespace
 * length-prefixed (u32 LE), then the tokens as LE int32. The byte length of the input fixes k, so
 * one streaming pass yields the key of every length. Unseeded so that a directory moved to another
 * machine (or shared on a distributed filesystem) still resolves.
 */
static const char PFX_TAG[] = "stagecache/l3/prefix/v1";

void l3_prefix_keys(const char *ns, const int32_t *tokens, const uint32_t *lens, uint32_t nlens,
		    XXH128_hash_t *keys)
{
	XXH3_state_t st;
	XXH3_128bits_reset(&st);
	XXH3_128bits_update(&st, PFX_TAG, sizeof(PFX_TAG));
	uint32_t nl = (uint32_t)slen(ns);
	uint8_t le[4] = { (uint8_t)nl, (uint8_t)(nl >> 8), (uint8_t)(nl >> 16), (uint8_t)(nl >> 24) };
	XXH3_128bits_update(&st, le, 4);
	if (nl)
		XXH3_128bits_update(&st, ns, nl);
	uint32_t done = 0;
	int32_t buf[256];
	for (uint32_t i = 0; i < nlens; i++) {
		while (done < lens[i]) {
			uint32_t m = lens[i] - done;
			if (m > 256)
				m = 256;
			for (uint32_t j = 0; j < m; j++) {
				uint32_t t = (uint32_t)tokens[done + j];
				uint8_t *b = (uint8_t *)&buf[j];
				b[0] = (uint8_t)t, b[1] = (uint8_t)(t >> 8), b[2] = (uint8_t)(t >> 16), b[3] = (uint8_t)(t >> 24);
			}
			XXH3_128bits_update(&st, buf, (size_t)m * 4);
			done += m;
		}
		keys[i] = XXH3_128bits_digest(&st);
#ifdef SC_TEST_HOOKS
		keys[i].low64 &= sc_key_mask_lo_; /* the test build's weakened key */
		keys[i].high64 &= sc_key_mask_hi_;
#endif
	}
}


void l3_seg_relpath(uint64_t lo, uint64_t hi, char out[48])
{
	char hex[33];
	l3_digest_hex(lo, hi, hex);
	snprintf(out, 48, "%.2s/%s.seg", hex, hex);
}

