/*
 * lib/promote_admit.c — the one-call promotion: admit an L3 fill into L2 with origin l3 and
 * record its outcome in the observation table (lib/promote.c): published, or refused and why.
 *
 * Before it, a caller had to pair sc_l2_admit(..., SC_ORIGIN_FROM_L3) with sc_promote_attempted;
 * forgetting the second left the observation open, so every later fill of the digest was
 * promoted again (and copied again). The restore path, which publishes in place, records the
 * outcome itself (sc_promote_outcome).
 */
#include <errno.h>

#include "l2/l2.h"

int sc_promote_admit(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
		     struct sc_digest expected, const struct sc_payload *payload)
{
	return sc_promote_admit_cost(stage, ns, tokens, n, expected, payload, 0);
}

int sc_promote_admit_cost(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
			  struct sc_digest expected, const struct sc_payload *payload, uint64_t cost_ns)
{
	if (!stage)
		return -EINVAL;
	int why = SC_L2_REFUSE_OTHER;
	int rc = l2_admit(stage, ns, tokens, n, expected, payload, SC_ORIGIN_FROM_L3, cost_ns, &why);
	uint64_t bytes = payload ? payload->sec_len[0] + payload->sec_len[1] : 0;
	/* published, or refused and why: terminal, except a refusal for want of room (the next
	 * fill is judged again). An observation that expired meanwhile leaves nothing to record. */
	if (rc != -EINVAL || payload)
		(void)sc_promote_outcome(stage->arena, stage->id, expected, bytes, rc ? why : -1);
	return rc;
}
