/*
 * tools/cli/cmd_put.c — `stagecache put NAME --model M --state S --ns NS --tokens 1,2,3|@file --kind K
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

/* Why the admission of @pl (digest @have; @want expected, from --digest @digest_s if given)
 * failed with @rc, in one line; EXIT_FAIL. */
static int admit_error(int rc, const struct l2cli_args *x, const struct l2cli_payload *pl, struct sc_digest want,
		       struct sc_digest have, const char *digest_s)
{
	char why[256], hb[32], tb[32];
	uint64_t bytes = pl->p.sec_len[0] + pl->p.sec_len[1];
	/* -EBADMSG is a digest mismatch only when the digest we were told differs from the one we
	 * computed; otherwise the arena's index or heap is corrupted */
	if (rc == -EBADMSG && !sc_digest_equal(want, have))
		return cli_fail("put", 0, "refused: the payload's digest is %s, not the expected %s",
				sc_digest_format(have, (char[33]){ 0 }), digest_s);
	if (rc == -EINVAL)
		return cli_fail("put", 0, "refused: %s", l2cli_explain_payload(&pl->p, why, sizeof(why)));
	if (rc == -E2BIG) /* an entry keeps its token ids next to the payload (4 bytes each) */
		return cli_fail("put", 0, "refused: %s of payload and %zu token ids (%s) are more than the L2 budget of "
				"arena '%s' can ever hold", cli_human(bytes, hb, sizeof(hb)), x->n,
				cli_human((uint64_t)x->n * 4, tb, sizeof(tb)), x->name);
	if (rc == -ENOSPC) {
		int r = sc_l2_last_refusal(x->st);
		const char *what = r == SC_L2_REFUSE_LEASED ? "the entries that could make room are leased, or the room is held by fills in flight"
				   : r == SC_L2_REFUSE_NO_ROOM ? "enough bytes, but leased entries or fills in flight split the heap: no contiguous room"
				   : r == SC_L2_REFUSE_SCAN_LIMIT ? "the bounded eviction scan ended before it found room (try again)"
								  : "room could not be made";
		return cli_fail("put", 0, "refused (%s): no room in arena '%s': %s", sc_l2_refusal_name(r), x->name, what);
	}
	return cli_l2_error("put", rc, x->name, "admission failed");
}

static void print_admitted(const struct l2cli_args *x, struct sc_digest want, uint64_t bytes, int json)
{
	struct sc_key key;
	sc_l2_key(x->st, x->ns, x->tokens, x->n, &key);
	char kh[33], dh[33];
	sc_digest_format((struct sc_digest){ key.lo, key.hi }, kh);
	sc_digest_format(want, dh);
	if (json)
		printf("{\"key\":\"%s\",\"stage\":\"%016llx\",\"tokens\":%zu,\"bytes\":%llu,\"digest\":\"%s\"}\n", kh,
		       (unsigned long long)sc_stage_id(x->st), x->n, (unsigned long long)bytes, dh);
	else
		printf("admitted %s (%zu tokens, %llu bytes, digest %s)\n", kh, x->n, (unsigned long long)bytes, dh);
}

/* Admit @pl under @x's prefix (the digest it hashes to, or --digest @digest_s); an exit status. */
static int put(struct l2cli_args *x, const struct l2cli_payload *pl, const char *digest_s, uint32_t origin,
	       int json)
{
	const struct sc_payload *p = &pl->p;
	struct sc_digest have = sc_digest_sections(p->sec[0], p->sec_len[0], p->sec[1], p->sec_len[1]), want = have;
	if (digest_s)
		sc_digest_parse(digest_s, &want); /* checked already */
	int rc = sc_l2_admit(x->st, x->ns, x->tokens, x->n, want, p, origin);
	if (rc)
		return admit_error(rc, x, pl, want, have, digest_s);
	print_admitted(x, want, p->sec_len[0] + p->sec_len[1], json);
	return EXIT_OK;
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
	struct sc_digest want;
	if ((rc = l2cli_payload_kind("put", kind_s, file, kvf, recf, descf, &kind)))
		return rc;
	if (!strcmp(origin_s, "direct"))
		origin = SC_ORIGIN_DIRECT;
	else if (!strcmp(origin_s, "l3") || !strcmp(origin_s, "from_l3"))
		origin = SC_ORIGIN_FROM_L3;
	else
		return cli_usage_error("put", "--origin '%s': want direct or l3", cli_q(origin_s));
	if (digest_s && sc_digest_parse(digest_s, &want))
		return cli_usage_error("put", "--digest '%s': want 32 hex characters", cli_q(digest_s));
	if ((rc = l2cli_parse_tokens("put", x.tokens_spec, &x.tokens, &x.n)))
		return rc;
	struct l2cli_payload pl;
	if ((rc = l2cli_load_payload("put", kind, kind == SC_PAYLOAD_KV_RECURRENT ? kvf : file, recf, descf, &pl)) ==
		    EXIT_OK &&
	    (rc = l2cli_open("put", &x)) == EXIT_OK)
		rc = put(&x, &pl, digest_s, origin, json);
	l2cli_payload_free(&pl);
	l2cli_close(&x);
	return rc;
}
