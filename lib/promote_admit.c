/*
 * lib/promote_admit.c — the one-call promotion: admit an L3 fill into L2 with origin l3 and
 * record the attempt in the observation table (lib/promote.c), whatever the admit's outcome.
 *
 * Before it, a caller had to pair sc_l2_admit(..., SC_ORIGIN_FROM_L3) with sc_promote_attempted;
 * forgetting the second left the observation open, so every later fill of the digest was
 * promoted again (and copied again). The restore path, which publishes in place, records the
 * attempt itself.
 */
#include <errno.h>

#include "l2.h"

int sc_promote_admit(struct sc_stage *stage, const char *ns, const int32_t *tokens, uint32_t n,
		     struct sc_digest expected, const struct sc_payload *payload)
{
	if (!stage)
		return -EINVAL;
	int rc = sc_l2_admit(stage, ns, tokens, n, expected, payload, SC_ORIGIN_FROM_L3);
	/* terminal whether or not the admit succeeded: a refused payload would be refused again.
	 * -ENOENT (the observation expired or was evicted meanwhile) leaves nothing to record. */
	(void)sc_promote_attempted(stage->arena, stage->id, expected);
	return rc;
}
