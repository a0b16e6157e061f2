/*
 * tools/cmd_put.c — `stagecache put NAME --model M --state S --ns NS --tokens 1,2,3|@file --kind K
 * --file PAYLOAD | --kv-file F --recurrent-file F --desc-json F [--origin direct|l3] [--json]`.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "l2cli.h"

/* ---- put ---- */

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache put NAME --model M --state S [--ns NS] --tokens LIST|@FILE\n"
		   "         --kind full_state|recurrent_only --file PAYLOAD\n"
		   "       stagecache put NAME ... --kind kv_recurrent [--kv-file F --desc-json F] [--recurrent-file F]\n"
		   "         [--origin direct|l3] [--digest HEX] [--dir DIR] [--owner USER] [--json]\n\n"
		   "Admit a payload into L2 under the key of (model, state, namespace, tokens). The expected\n"
		   "digest is computed from the files unless --digest gives one (a mismatch is refused).\n"
		   "LIST is integers separated by commas; @FILE reads them from a regular file.\n"
		   "Open the arena only if its file is yours or root's; --owner USER (a name, a number, or any)\n"
		   "trusts another owner's (never a world-writable file).\n");
}

static int parse_kind(const char *s, uint32_t *k)
{
	if (!strcmp(s, "full_state") || !strcmp(s, "full") || !strcmp(s, "FULL_STATE"))
		*k = SC_PAYLOAD_FULL_STATE;
	else if (!strcmp(s, "recurrent_only") || !strcmp(s, "recurrent") || !strcmp(s, "RECURRENT_ONLY"))
		*k = SC_PAYLOAD_RECURRENT_ONLY;
	else if (!strcmp(s, "kv_recurrent") || !strcmp(s, "kv") || !strcmp(s, "KV_RECURRENT"))
		*k = SC_PAYLOAD_KV_RECURRENT;
	else
		return -1;
	return 0;
}

int cmd_put(int argc, char **argv)
{
	struct l2cli_args x = { .ns = "" };
	const char *kind_s = NULL, *file = NULL, *kvf = NULL, *recf = NULL, *descf = NULL, *origin_s = "direct",
		   *digest_s = NULL;
	int json = 0;
	const struct cli_opt own[] = {
		{ "kind", CLI_STR, &kind_s },       { "file", CLI_STR, &file },
		{ "kv-file", CLI_STR, &kvf },       { "recurrent-file", CLI_STR, &recf },
		{ "desc-json", CLI_STR, &descf },   { "origin", CLI_STR, &origin_s },
		{ "digest", CLI_STR, &digest_s },   { "json", CLI_FLAG, &json },
		{ 0 },
	};
	int rc = l2cli_parse("put", argc, argv, usage, own, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (!x.model || !x.state || !x.tokens_spec || !kind_s)
		return cli_usage_error("put", "--model, --state, --tokens and --kind are required");
	uint32_t kind, origin;
	if (parse_kind(kind_s, &kind))
		return cli_usage_error("put", "--kind '%s': want full_state, recurrent_only or kv_recurrent", cli_q(kind_s));
	if (!strcmp(origin_s, "direct"))
		origin = SC_ORIGIN_DIRECT;
	else if (!strcmp(origin_s, "l3") || !strcmp(origin_s, "from_l3"))
		origin = SC_ORIGIN_FROM_L3;
	else
		return cli_usage_error("put", "--origin '%s': want direct or l3", cli_q(origin_s));
	if (kind == SC_PAYLOAD_KV_RECURRENT ? (file != NULL || (!kvf && !recf)) : (!file || kvf || recf || descf))
		return cli_usage_error("put", kind == SC_PAYLOAD_KV_RECURRENT
						      ? "--kind kv_recurrent takes --kv-file/--recurrent-file (and --desc-json), not --file"
						      : "--kind %s takes --file (and no --kv-file, --recurrent-file or --desc-json)",
				       kind_s);
	struct sc_digest want;
	if (digest_s && sc_digest_parse(digest_s, &want))
		return cli_usage_error("put", "--digest '%s': want 32 hex characters", cli_q(digest_s));

	rc = l2cli_parse_tokens("put", x.tokens_spec, &x.tokens, &x.n);
	if (rc)
		return rc;
	struct l2cli_payload pl;
	int ret = EXIT_FAIL;
	if ((ret = l2cli_load_payload("put", kind, kind == SC_PAYLOAD_KV_RECURRENT ? kvf : file, recf, descf, &pl)))
		goto cleanup;
	ret = EXIT_FAIL;
	uint64_t l0 = pl.p.sec_len[0], l1 = pl.p.sec_len[1];
	struct sc_digest have = sc_digest_sections(pl.p.sec[0], l0, pl.p.sec[1], l1);
	if (!digest_s)
		want = have;
	if ((ret = l2cli_open("put", &x)))
		goto cleanup;
	ret = EXIT_FAIL;
	rc = sc_l2_admit(x.st, x.ns, x.tokens, x.n, want, &pl.p, origin);
	if (rc) {
		char why[256], hb[32];
		/* -EBADMSG is a digest mismatch only when the digest we were told differs from the one
		 * we computed; otherwise the arena's index or heap is corrupted */
		if (rc == -EBADMSG && !sc_digest_equal(want, have))
			cli_fail("put", 0, "refused: the payload's digest is %s, not the expected %s",
				 sc_digest_format(have, (char[33]){ 0 }), digest_s);
		else if (rc == -EINVAL)
			cli_fail("put", 0, "refused: %s", l2cli_explain_payload(&pl.p, why, sizeof(why)));
		else if (rc == -E2BIG) {
			/* an entry keeps its token ids next to the payload (4 bytes each) */
			char tb[32];
			cli_fail("put", 0, "refused: %s of payload and %zu token ids (%s) are more than the L2 budget of "
				 "arena '%s' can ever hold", cli_human(l0 + l1, hb, sizeof(hb)), x.n,
				 cli_human((uint64_t)x.n * 4, tb, sizeof(tb)), x.name);
		}
		else if (rc == -ENOSPC)
			cli_fail("put", 0, "refused: no room could be made in arena '%s' (every entry is leased, or the heap "
				 "is fragmented)", x.name);
		else
			cli_l2_error("put", rc, x.name, "admission failed");
		goto cleanup;
	}
	struct sc_key key;
	sc_l2_key(x.st, x.ns, x.tokens, x.n, &key);
	char kh[33], dh[33];
	sc_digest_format((struct sc_digest){ key.lo, key.hi }, kh);
	sc_digest_format(want, dh);
	if (json)
		printf("{\"key\":\"%s\",\"stage\":\"%016llx\",\"tokens\":%zu,\"bytes\":%llu,\"digest\":\"%s\"}\n", kh,
		       (unsigned long long)sc_stage_id(x.st), x.n, (unsigned long long)(l0 + l1), dh);
	else
		printf("admitted %s (%zu tokens, %llu bytes, digest %s)\n", kh, x.n, (unsigned long long)(l0 + l1), dh);
	ret = EXIT_OK;
cleanup:
	l2cli_payload_free(&pl);
	l2cli_close(&x);
	return ret;
}
