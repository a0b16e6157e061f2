/* lib/kvdesc.c — the KV page descriptor's validity rules (see sc_kv_desc_validate). */
#include <errno.h>

#include "stagecache.h"

int sc_kv_desc_validate(const struct sc_kv_desc *d, uint64_t len)
{
	if (!d || d->payload_bytes != len || (d->flags & ~SC_KV_DESC_FLAGS_MASK))
		return -EINVAL;
	int has_idx = (d->flags & SC_KV_DESC_HAS_K_INDEX) != 0;
	if ((d->k_idx_row_bytes > 0) != has_idx)
		return -EINVAL;
	if (d->codec == SC_KV_CODEC_RAW || d->codec == SC_KV_CODEC_1)
		return d->component_count == 0 ? 0 : -EINVAL;
	if (d->codec != SC_KV_CODEC_ISWA)
		return -EINVAL;
	if (d->version != 2 || d->component_count != 2)
		return -EINVAL;
	const struct sc_kv_component *base = &d->components[0], *swa = &d->components[1];
	if (base->role != SC_KV_ROLE_BASE || swa->role != SC_KV_ROLE_SWA)
		return -EINVAL;
	if (base->payload_offset != 0 || base->token_start != d->token_start || base->token_count != d->token_count)
		return -EINVAL;
	/* the SWA window ends where the base range ends */
	if (swa->token_start > UINT64_MAX - swa->token_count || base->token_start > UINT64_MAX - base->token_count ||
	    swa->token_start + swa->token_count != base->token_start + base->token_count)
		return -EINVAL;
	if (swa->payload_offset != base->payload_bytes || swa->payload_offset > len ||
	    swa->payload_bytes != len - swa->payload_offset)
		return -EINVAL;
	return 0;
}

int sc_kv_desc_validate_restore(const struct sc_kv_desc *d, uint64_t len, uint64_t prefix_len)
{
	int rc = sc_kv_desc_validate(d, len);
	if (rc)
		return rc;
	return d->token_start == 0 && d->token_count == prefix_len ? 0 : -EINVAL;
}
