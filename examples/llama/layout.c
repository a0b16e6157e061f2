/*
 * examples/llama/layout.c — see layout.h. Every length is checked against the buffer before use:
 * these bytes come from shared memory and files.
 */
#include <string.h>

#include "layout.h"

#define MAXL 256 /* layers */

struct shape {
	uint32_t n, L;
	int32_t kt[MAXL], vt[MAXL];
	uint64_t kr[MAXL], vr[MAXL];
	uint64_t row_bytes;      /* sum of every layer's K and V row: one token's KV */
};

static uint32_t u32_at(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t u64_at(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static size_t header_bytes(uint32_t L)
{
	return 8 + 12 + (size_t)L * 24 + 4;
}

/* The state's total size for this shape, or 0 when it overflows. */
static size_t total(const struct shape *s)
{
	size_t kv = (size_t)s->n * s->row_bytes;
	if (s->row_bytes && kv / s->row_bytes != s->n)
		return 0;
	return 8 + 8 + (size_t)s->n * 12 + 8 + (size_t)s->L * 24 + kv;
}

int layout_to_tokens(const uint8_t *in, size_t len, uint32_t block, uint8_t *out)
{
	struct shape s = { 0 };
	if (!block || len < 24 || u32_at(in + 4) != 0 || u32_at(in + 8) != 1)
		return -1;
	uint32_t magic = u32_at(in);
	s.n = u32_at(in + 12);
	if ((size_t)s.n * 12 + 24 > len)
		return -1;
	const uint8_t *meta = in + 16;
	for (uint32_t i = 0; i < s.n; i++) /* one sequence, 0, at positions 0..n-1 */
		if (u32_at(meta + 12 * (size_t)i) != i || u32_at(meta + 12 * (size_t)i + 4) != 1 ||
		    u32_at(meta + 12 * (size_t)i + 8) != 0)
			return -1;
	const uint8_t *p = meta + 12 * (size_t)s.n, *end = in + len;
	if (u32_at(p) != 0) /* transposed V */
		return -1;
	s.L = u32_at(p + 4);
	if (!s.L || s.L > MAXL)
		return -1;
	p += 8;
	const uint8_t *krows[MAXL], *vrows[MAXL];
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t l = 0; l < s.L; l++) {
			if ((size_t)(end - p) < 12)
				return -1;
			int32_t t;
			memcpy(&t, p, 4);
			uint64_t r = u64_at(p + 4);
			if (!r || r > len || (s.n && r * s.n / s.n != r) || r * s.n > (size_t)(end - p) - 12)
				return -1;
			(pass ? s.vt : s.kt)[l] = t;
			(pass ? s.vr : s.kr)[l] = r;
			(pass ? vrows : krows)[l] = p + 12;
			s.row_bytes += r;
			p += 12 + r * s.n;
		}
	if (p != end || total(&s) != len)
		return -1;
	uint8_t *o = out;
	for (uint32_t b0 = 0; b0 < s.n; b0 += block) {
		uint32_t m = s.n - b0 < block ? s.n - b0 : block;
		memcpy(o, meta + 12 * (size_t)b0, 12 * (size_t)m), o += 12 * (size_t)m;
		for (uint32_t l = 0; l < s.L; l++)
			memcpy(o, krows[l] + s.kr[l] * b0, s.kr[l] * m), o += s.kr[l] * m;
		for (uint32_t l = 0; l < s.L; l++)
			memcpy(o, vrows[l] + s.vr[l] * b0, s.vr[l] * m), o += s.vr[l] * m;
	}
	uint32_t one = 1, zero = 0;
	memcpy(o, &magic, 4), memcpy(o + 4, &zero, 4), o += 8;
	memcpy(o, &one, 4), memcpy(o + 4, &s.n, 4), memcpy(o + 8, &zero, 4), o += 12;
	for (uint32_t l = 0; l < s.L; l++)
		memcpy(o, &s.kt[l], 4), memcpy(o + 4, &s.kr[l], 8), o += 12;
	for (uint32_t l = 0; l < s.L; l++)
		memcpy(o, &s.vt[l], 4), memcpy(o + 4, &s.vr[l], 8), o += 12;
	memcpy(o, &s.L, 4), o += 4;
	return o == out + len ? 0 : -1;
}

int layout_from_tokens(const uint8_t *in, size_t len, uint32_t block, uint8_t *out)
{
	struct shape s = { 0 };
	if (!block || len < 4)
		return -1;
	s.L = u32_at(in + len - 4);
	if (!s.L || s.L > MAXL || header_bytes(s.L) > len)
		return -1;
	const uint8_t *h = in + len - header_bytes(s.L);
	uint32_t magic = u32_at(h);
	if (u32_at(h + 4) != 0 || u32_at(h + 8) != 1 || u32_at(h + 16) != 0)
		return -1;
	s.n = u32_at(h + 12);
	h += 20;
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t l = 0; l < s.L; l++, h += 12) {
			int32_t t;
			memcpy(&t, h, 4);
			uint64_t r = u64_at(h + 4);
			if (!r || r > len)
				return -1;
			(pass ? s.vt : s.kt)[l] = t;
			(pass ? s.vr : s.kr)[l] = r;
			s.row_bytes += r;
		}
	if (total(&s) != len)
		return -1;
	/* llama.cpp's form: the offsets of each layer's rows */
	uint8_t *meta = out + 16, *krows[MAXL], *vrows[MAXL];
	uint32_t one = 1, zero = 0;
	memcpy(out, &magic, 4), memcpy(out + 4, &zero, 4), memcpy(out + 8, &one, 4), memcpy(out + 12, &s.n, 4);
	uint8_t *o = meta + 12 * (size_t)s.n;
	memcpy(o, &zero, 4), memcpy(o + 4, &s.L, 4), o += 8;
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t l = 0; l < s.L; l++) {
			uint64_t r = pass ? s.vr[l] : s.kr[l];
			memcpy(o, pass ? &s.vt[l] : &s.kt[l], 4), memcpy(o + 4, &r, 8);
			(pass ? vrows : krows)[l] = o + 12;
			o += 12 + r * s.n;
		}
	const uint8_t *q = in;
	for (uint32_t b0 = 0; b0 < s.n; b0 += block) {
		uint32_t m = s.n - b0 < block ? s.n - b0 : block;
		memcpy(meta + 12 * (size_t)b0, q, 12 * (size_t)m), q += 12 * (size_t)m;
		for (uint32_t l = 0; l < s.L; l++)
			memcpy(krows[l] + s.kr[l] * b0, q, s.kr[l] * m), q += s.kr[l] * m;
		for (uint32_t l = 0; l < s.L; l++)
			memcpy(vrows[l] + s.vr[l] * b0, q, s.vr[l] * m), q += s.vr[l] * m;
	}
	return 0;
}
