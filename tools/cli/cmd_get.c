/*
 * tools/cli/cmd_get.c — `stagecache get NAME --model M --state S [--ns NS] --tokens LIST|@FILE
 * [--out FILE] [--location-tokens N --location-digest HEX] [--json]`.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "l2cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache get NAME --model M --state S [--ns NS] --tokens LIST|@FILE [--out FILE]\n"
		   "         [--location-tokens N --location-digest HEX] [--dir DIR] [--owner USER] [--json]\n\n"
		   "Look the prefix up in L2 (a counted lookup, with a lease). With --out, write the payload\n"
		   "(the wire: section 0 then section 1) to FILE byte for byte ('-' for stdout); otherwise print\n"
		   "the entry. With a location (the durable copy's token count and digest) a disagreeing entry\n"
		   "is removed and the lookup is a miss. Exit status 1 on a miss. An --out FIFO must already\n"
		   "have a reader.\n"
		   "Open the arena only if its file is yours or root's; --owner USER (a name, a number, or\n"
		   "any) trusts another owner's (never a world-writable file).\n");
}

/* Write the lease's wire (its sections or segments, in order) to @out; an exit status. */
static int write_wire(const struct sc_lease *l, const char *out)
{
	FILE *f = cli_open_output("get", out);
	if (!f)
		return EXIT_FAIL;
	int ok = 1, n = sc_lease_segments(l, NULL, 0);
	struct sc_segment *sg = n > 0 ? malloc(sizeof(*sg) * (size_t)n) : NULL;
	if (n < 0 || (n > 0 && (!sg || sc_lease_segments(l, sg, (uint32_t)n) != n)))
		ok = 0;
	for (int i = 0; ok && i < n; i++)
		if (sg[i].len && fwrite(sg[i].ptr, 1, sg[i].len, f) != sg[i].len)
			ok = 0;
	free(sg);
	if (fflush(f) || (f != stdout && fclose(f)))
		ok = 0;
	return ok ? EXIT_OK : cli_fail("get", 0, "cannot write %s: %s", out, strerror(errno));
}

static void print_hit(const struct sc_lease *l, const char *out, int json)
{
	char dh[33], kh[33];
	sc_digest_format(l->digest, dh);
	sc_digest_format((struct sc_digest){ l->key.lo, l->key.hi }, kh);
	unsigned long long s0 = l->sec_len[0], s1 = l->sec_len[1];
	if (json)
		printf("{\"hit\":true,\"key\":\"%s\",\"tokens\":%llu,\"bytes\":%llu,\"sections\":[%llu,%llu],"
		       "\"kind\":\"%s\",\"origin\":\"%s\",\"digest\":\"%s\",\"kv_desc\":%s}\n",
		       kh, (unsigned long long)l->token_count, s0 + s1, s0, s1, l2cli_kind_name(l->kind),
		       l->origin ? "l3" : "direct", dh, l->has_kv_desc ? "true" : "false");
	else
		printf("hit %s: %llu tokens, %llu bytes (%s, %s), digest %s%s%s\n", kh, (unsigned long long)l->token_count,
		       s0 + s1, l2cli_kind_name(l->kind), l->origin ? "from L3" : "direct", dh, out ? ", written to " : "",
		       out ? out : "");
}

/* The counted lookup of @x's prefix (at @loc if set), then the wire to @out and/or the entry
 * printed; an exit status. */
static int get(const struct l2cli_args *x, const struct sc_location *loc, const char *out, int json)
{
	struct sc_lease l;
	int rc = sc_l2_get(x->st, x->ns, x->tokens, x->n, loc, &l);
	if (rc == -ENOENT)
		return cli_fail("get", 0, "miss: no L2 entry for these %zu tokens%s", x->n, loc ? " at that location" : "");
	if (rc)
		return cli_l2_error("get", rc, x->name, "lookup failed");
	/* the wire's ranges: the two sections, or a scattered (segmented) entry's segments */
	int ret = out ? write_wire(&l, out) : EXIT_OK;
	if (ret == EXIT_OK && (!out || strcmp(out, "-")))
		print_hit(&l, out, json);
	sc_lease_release(&l);
	return ret;
}

int cmd_get(int argc, char **argv)
{
	struct l2cli_args x = { .ns = "" };
	const char *out = NULL, *lt = NULL, *lg = NULL;
	int json = 0;
	const struct cli_opt own[] = {
		{ "out", CLI_STR, &out },           { "location-tokens", CLI_STR, &lt },
		{ "location-digest", CLI_STR, &lg }, { "json", CLI_FLAG, &json },
		{ 0 },
	};
	int rc = l2cli_parse("get", argc, argv, usage, own, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	struct sc_location loc = { 0 };
	uint64_t ltok = 0;
	if ((lt != NULL) != (lg != NULL))
		return cli_usage_error("get", "--location-tokens and --location-digest go together");
	if (lt && cli_parse_u64(lt, UINT32_MAX, &ltok))
		return cli_usage_error("get", "--location-tokens '%s': want a token count (at most %u)", cli_q(lt),
				       UINT32_MAX);
	loc.token_count = (uint32_t)ltok;
	if (lg && sc_digest_parse(lg, &loc.digest))
		return cli_usage_error("get", "--location-digest '%s': want 32 hex characters", cli_q(lg));
	if ((rc = l2cli_prefix("get", &x)) == EXIT_OK && (rc = l2cli_open("get", &x)) == EXIT_OK)
		rc = get(&x, lt ? &loc : NULL, out, json);
	l2cli_close(&x);
	return rc;
}
