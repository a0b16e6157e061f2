/*
 * lib/lookup.c — sc_lookup: how much of a prompt the arena's L2 and a bound L3 store hold, for a
 * router-side agent. Reads only: no lease, no count, no payload byte. L3 first (its answer's
 * length is also asked of L2: an entry promoted from L3 has exactly that length), then L2 at the
 * caller's block multiples.
 */
#include <errno.h>
#include <string.h>

#include "l2/l2.h"
#include "xxh.h"

int sc_lookup(struct sc_stage *st, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n, uint32_t block,
	      struct sc_lookup *out)
{
	if (!st || !tokens || !n || !out || (ns && strlen(ns) > SC_L3_STR_MAX))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (st->arena->shm->forked)
		return -ECHILD;
	if (l3) {
		struct sc_location loc;
		int rc = sc_l3_locate_longest(l3, ns, tokens, n, &loc);
		if (rc > 0) {
			out->l3_tokens = (uint32_t)rc;
			out->l3_digest = loc.digest;
			out->l3_bytes = loc.payload_bytes;
		} else if (rc < 0 && rc != -ENOENT && rc != -EBADMSG) {
			return rc; /* an object that fails its checks is no prefix held: a miss */
		}
	}
	struct sc_l2_entry_info info;
	uint32_t len = 0;
	int rc = l2_longest_peek(st, ns, tokens, n, block, out->l3_tokens, &len, &info);
	if (rc == 0) {
		out->l2_tokens = len;
		out->l2_digest = info.digest;
		out->l2_bytes = info.bytes;
	} else if (rc != -ENOENT) {
		return rc;
	}
	out->tokens = out->l2_tokens > out->l3_tokens ? out->l2_tokens : out->l3_tokens;
	return 0;
}

int64_t sc_block_hashes(const int32_t *tokens, uint32_t n, uint32_t block_size, uint64_t parent, uint64_t *out,
			uint32_t max)
{
	if (!block_size || (n && !tokens) || (max && !out))
		return -EINVAL;
	uint32_t blocks = n / block_size;
	for (uint32_t i = 0; i < blocks && i < max; i++) {
		XXH3_state_t s;
		uint8_t le[8];
		for (int b = 0; b < 8; b++)
			le[b] = (uint8_t)(parent >> (8 * b));
		XXH3_64bits_reset(&s);
		XXH3_64bits_update(&s, le, sizeof(le));
		XXH3_64bits_update(&s, tokens + (size_t)i * block_size, (size_t)block_size * 4); /* LE int32 (lib/l2/view.h) */
		parent = XXH3_64bits_digest(&s) & 0x7fffffffffffffffull;
		out[i] = parent;
	}
	return blocks;
}
