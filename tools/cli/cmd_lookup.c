/*
 * tools/cli/cmd_lookup.c — `stagecache lookup NAME --model M --state S [--ns NS] --tokens LIST|@FILE
 * [--l3 DIR] [--block N] [--json]`: how much of a prompt the arena's L2 and an L3 store hold
 * (sc_lookup), for a router-side agent. Reads only: no lease, no counter, no payload byte.
 */
#include <errno.h>
#include <stdlib.h>

#include "cli.h"
#include "l2cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache lookup NAME --model M --state S [--ns NS] --tokens LIST|@FILE [--l3 DIR]\n"
		   "         [--block N] [--dir DIR] [--owner USER] [--json]\n\n"
		   "How much of a prompt is here: the longest prefix of the tokens that L2 holds for the stage\n"
		   "(tried at the multiples of --block, default 256, and at the length L3 holds) and that the\n"
		   "L3 store DIR holds for the namespace, without reading a payload, taking a lease or counting\n"
		   "a hit. Prints the three lengths (tokens = the longer of the two); exit status 0 either way.\n");
}

static int lookup(const struct l2cli_args *x, const char *l3dir, uint32_t block, int json)
{
	struct sc_l3 *l3 = NULL;
	if (l3dir) {
		struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_CREATE | SC_L3_OPEN_NO_RECONCILE };
		int rc = sc_l3_open(l3dir, &lo, &l3);
		if (rc)
			return l3cli_open_error("lookup", rc, l3dir, &lo);
		sc_l3_bind_arena(l3, x->a); /* its locates go through the arena's location index */
	}
	struct sc_lookup r;
	int rc = sc_lookup(x->st, l3, x->ns, x->tokens, (uint32_t)x->n, block, &r);
	sc_l3_close(l3);
	if (rc)
		return cli_l2_error("lookup", rc, x->name, "lookup failed");
	char d2[SC_DIGEST_HEX_LEN + 1], d3[SC_DIGEST_HEX_LEN + 1];
	sc_digest_format(r.l2_digest, d2);
	sc_digest_format(r.l3_digest, d3);
	if (json)
		printf("{\"tokens\":%u,\"asked\":%zu,\"l2_tokens\":%u,\"l2_digest\":%s%s%s,\"l2_bytes\":%llu,"
		       "\"l3_tokens\":%u,\"l3_digest\":%s%s%s,\"l3_bytes\":%llu}\n",
		       r.tokens, x->n, r.l2_tokens, r.l2_tokens ? "\"" : "", r.l2_tokens ? d2 : "null",
		       r.l2_tokens ? "\"" : "", (unsigned long long)r.l2_bytes, r.l3_tokens, r.l3_tokens ? "\"" : "",
		       r.l3_tokens ? d3 : "null", r.l3_tokens ? "\"" : "", (unsigned long long)r.l3_bytes);
	else
		printf("%u of %zu tokens held: L2 %u%s%s, L3 %u%s%s\n", r.tokens, x->n, r.l2_tokens,
		       r.l2_tokens ? " digest " : "", r.l2_tokens ? d2 : "", r.l3_tokens, r.l3_tokens ? " digest " : "",
		       r.l3_tokens ? d3 : "");
	return EXIT_OK;
}

int cmd_lookup(int argc, char **argv)
{
	struct l2cli_args x = { .ns = "" };
	int json = 0;
	const char *l3dir = NULL;
	uint32_t block = 0;
	const struct cli_opt own[] = {
		{ "json", CLI_FLAG, &json },
		{ "l3", CLI_STR, &l3dir },
		{ "block", CLI_U32, &block, 1, UINT32_MAX, .want = "a number of tokens" },
		{ 0 },
	};
	int rc = l2cli_parse("lookup", argc, argv, usage, own, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((rc = l2cli_prefix("lookup", &x)) == EXIT_OK && x.n > UINT32_MAX)
		rc = cli_usage_error("lookup", "--tokens: more than %u tokens", UINT32_MAX);
	if (rc == EXIT_OK && (rc = l2cli_open("lookup", &x)) == EXIT_OK)
		rc = lookup(&x, l3dir, block, json);
	l2cli_close(&x);
	return rc;
}
