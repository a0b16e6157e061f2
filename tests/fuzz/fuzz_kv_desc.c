/* tests/fuzz/fuzz_kv_desc.c — sc_kv_desc_validate / sc_kv_desc_validate_restore over arbitrary
 * descriptors and payload lengths.
 *
 * Input: a struct sc_kv_desc image (zero-padded when short), then payload_len (u64), prefix_len
 * (u64) and one steering byte. The steering byte nudges the mutations towards the deep rules
 * (matching payload_bytes, the ISWA codec, consistent components) so the interesting accept /
 * reject boundaries are reached quickly.
 *
 * Properties (a violation traps, which libFuzzer reports as a crash):
 *  - both functions are pure: the same answer twice, the descriptor untouched;
 *  - accepted (0) implies payload_bytes == payload_len, no unknown flag bits, the k-index rule, at
 *    most SC_KV_DESC_MAX_COMPONENTS components, and every component's payload range
 *    [payload_offset, payload_offset + payload_bytes) inside [0, payload_len) without overflow,
 *    the ranges of an ISWA pair adjacent and together covering the section;
 *  - validate_restore accepts exactly when validate does and token_start == 0 and
 *    token_count == prefix_len;
 *  - NULL is refused.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stagecache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                        \
	do {                            \
		if (!(c))               \
			__builtin_trap(); \
	} while (0)

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum { D = sizeof(struct sc_kv_desc), TAIL = 17 };
	uint8_t raw[D + TAIL];
	memset(raw, 0, sizeof(raw));
	memcpy(raw, data, size < sizeof(raw) ? size : sizeof(raw));

	/* the descriptor on the heap with its exact size: any read past it is an ASAN report */
	struct sc_kv_desc *d = malloc(sizeof(*d));
	if (!d)
		return 0;
	memcpy(d, raw, D);
	uint64_t len = rd64(raw + D), prefix = rd64(raw + D + 8);
	uint8_t steer = raw[D + 16];

	if (steer & 0x01)
		len = d->payload_bytes;
	if (steer & 0x02) {
		d->flags &= SC_KV_DESC_FLAGS_MASK;
		if (!(d->flags & SC_KV_DESC_HAS_K_INDEX))
			d->k_idx_row_bytes = 0;
		else if (!d->k_idx_row_bytes)
			d->k_idx_row_bytes = 1;
	}
	if (steer & 0x04) {
		/* an ISWA composite shaped like a real one, then whatever the bytes left in it */
		d->version = 2;
		d->codec = SC_KV_CODEC_ISWA;
		d->component_count = 2;
		d->components[0].role = SC_KV_ROLE_BASE;
		d->components[1].role = SC_KV_ROLE_SWA;
		if (steer & 0x08) {
			struct sc_kv_component *b = &d->components[0], *s = &d->components[1];
			b->payload_offset = 0;
			b->token_start = d->token_start;
			b->token_count = d->token_count;
			s->payload_offset = b->payload_bytes;
			s->payload_bytes = d->payload_bytes - b->payload_bytes; /* may wrap: must be refused */
			if (steer & 0x10)
				s->token_start = b->token_start + b->token_count - s->token_count;
		}
	} else if (steer & 0x08) {
		d->codec &= 1;
		d->component_count = 0;
	}
	if (steer & 0x20)
		prefix = d->token_count;
	if (steer & 0x40)
		d->token_start = 0;

	struct sc_kv_desc before;
	memcpy(&before, d, sizeof(before));

	int rc = sc_kv_desc_validate(d, len);
	CHECK(rc == 0 || rc == -EINVAL);
	CHECK(sc_kv_desc_validate(d, len) == rc);
	CHECK(memcmp(&before, d, sizeof(before)) == 0);

	if (rc == 0) {
		CHECK(d->payload_bytes == len);
		CHECK((d->flags & ~SC_KV_DESC_FLAGS_MASK) == 0);
		CHECK((d->k_idx_row_bytes > 0) == ((d->flags & SC_KV_DESC_HAS_K_INDEX) != 0));
		CHECK(d->component_count <= SC_KV_DESC_MAX_COMPONENTS);
		uint64_t covered = 0;
		for (uint32_t i = 0; i < d->component_count; i++) {
			const struct sc_kv_component *c = &d->components[i];
			CHECK(c->payload_offset <= len);
			CHECK(c->payload_bytes <= len - c->payload_offset);
			if (i > 0) /* ISWA: SWA starts where the base ends */
				CHECK(c->payload_offset == d->components[i - 1].payload_offset +
								   d->components[i - 1].payload_bytes);
			covered += c->payload_bytes;
		}
		if (d->component_count) {
			CHECK(d->codec == SC_KV_CODEC_ISWA);
			CHECK(d->components[0].payload_offset == 0);
			CHECK(covered == len);
			/* the token ranges: base is the descriptor's; SWA ends with it, no overflow */
			const struct sc_kv_component *b = &d->components[0], *s = &d->components[1];
			CHECK(b->token_start == d->token_start && b->token_count == d->token_count);
			CHECK(s->token_start <= UINT64_MAX - s->token_count);
			CHECK(b->token_start <= UINT64_MAX - b->token_count);
			CHECK(s->token_start + s->token_count == b->token_start + b->token_count);
		} else {
			CHECK(d->codec == SC_KV_CODEC_RAW || d->codec == SC_KV_CODEC_1);
		}
	}

	int rr = sc_kv_desc_validate_restore(d, len, prefix);
	CHECK(rr == 0 || rr == -EINVAL);
	CHECK((rr == 0) == (rc == 0 && d->token_start == 0 && d->token_count == prefix));
	CHECK(memcmp(&before, d, sizeof(before)) == 0);

	CHECK(sc_kv_desc_validate(NULL, len) == -EINVAL);
	CHECK(sc_kv_desc_validate_restore(NULL, len, prefix) == -EINVAL);
	free(d);
	return 0;
}
