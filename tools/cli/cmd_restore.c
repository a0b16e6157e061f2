/*
 * tools/cli/cmd_restore.c — `stagecache restore NAME DIR --model M --state S [--ns NS] --tokens T
 * [--wait] [--deadline-ms N] [--recompute-ms N] [--repeat N] [--out FILE] [--arena-dir D] [--json]`:
 * the whole restore path.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "l2cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache restore NAME DIR --model M --state S [--ns NS] --tokens 1,2,3|@file\n"
		"                          [--wait] [--deadline-ms N] [--recompute-ms N] [--repeat N]\n"
		"                          [--out FILE] [--arena-dir D] [--owner USER] [--mode MODE]\n"
		"                          [--group GROUP] [--json]\n\n"
		"Restore the longest prefix of the tokens stored in the L3 directory DIR for the stage\n"
		"(M, S) of arena NAME: L3 locate, L2 lookup validated against the L3 location, else a fill\n"
		"from L3 into arena memory, the promotion policy, and publication in L2 in place.\n"
		"Prints which tier served it (l2 or l3), whether the fill was promoted and the times.\n"
		"DIR must be an existing L3 directory (made by 'stagecache l3 put' or sc_l3_open): restore\n"
		"never creates one.\n"
		"  --wait        if another process is filling the same payload, wait for it and use L2\n"
		"  --deadline-ms N  answer within N ms of the start of each restore: a fill predicted to end\n"
		"                later is not started, one that runs past it is abandoned (exit status 3:\n"
		"                recompute)\n"
		"  --recompute-ms N what recomputing the prefix would take: a fill predicted to take longer is\n"
		"                not started (exit status 3: recompute)\n"
		"  --repeat N    restore N times (a second fill is promoted, then L2 serves it)\n"
		"  --out FILE    write the restored payload (the wire: section 0 then section 1)\n"
		"  --arena-dir D look for the arena in D only\n"
		"  --owner USER  trust an arena file owned by USER (a name, a number, or any)\n"
		"  --mode MODE, --group GROUP\n"
		"                mode and group of what restore creates in DIR (quarantine records), as\n"
		"                given to 'l3 put' for a directory shared by a group (e.g. 0660 and G)\n"
		"Exit status 1 when nothing is stored for the tokens or the object failed verification; 3\n"
		"when recomputing wins (--deadline-ms, --recompute-ms). Every restore with no state says\n"
		"why (its miss reason).\n");
}

static const char *why_name(int w)
{
	switch (w) {
	case SC_PROMOTE_WHY_TERMINAL: return "terminal";
	case SC_PROMOTE_WHY_OVERSIZE: return "oversize";
	case SC_PROMOTE_WHY_LONG_PREFIX: return "long_prefix";
	case SC_PROMOTE_WHY_SECOND_HIT: return "second_hit";
	case SC_PROMOTE_WHY_FIRST_HIT: return "first_hit";
	case SC_PROMOTE_WHY_RETURNING: return "returning";
	default: return "-";
	}
}

#define EXIT_RECOMPUTE 3

/* Why a restore from @dir failed with @rc, in one line; EXIT_FAIL (EXIT_RECOMPUTE for -ETIME). */
static int restore_error(int rc, const char *dir, const struct l2cli_args *x, const struct sc_restore *r)
{
	if (rc == -ETIME) {
		fprintf(stderr, "stagecache restore: recompute: %s (%s)", sc_miss_reason_name(r->miss_reason),
			sc_deadline_detail_name((int)r->miss_detail));
		if (r->predicted_ns)
			fprintf(stderr, ", predicted fill %.3f ms", (double)r->predicted_ns / 1e6);
		fprintf(stderr, "\n");
		return EXIT_RECOMPUTE;
	}
	if (rc == -ENOENT)
		return cli_fail("restore", 0, "no prefix of these tokens is stored in %s (namespace '%s'): %s", dir,
				cli_q(x->ns), r->miss_reason >= 0 ? sc_miss_reason_name(r->miss_reason) : "never_stored");
	if (rc == -EBADMSG)
		return cli_fail("restore", 0, "the stored object of the longest prefix failed verification and was "
				"quarantined (%s/quarantine/); its L2 mirrors are invalidated", dir);
	if (rc == -EBUSY)
		return cli_fail("restore", 0, "another process is filling this payload now (--wait waits for it)");
	if (rc == -ETIMEDOUT)
		return cli_fail("restore", 0, "waited 60 s for another process's fill of this payload");
	return cli_l2_error("restore", rc, x->name, "restore failed");
}

static void print_restore(const struct sc_restore *r, int json)
{
	char d[SC_DIGEST_HEX_LEN + 1];
	sc_digest_format(r->digest, d);
	const char *src = r->source == SC_RESTORE_FROM_L2 ? "l2" : "l3";
	uint64_t bytes = r->sec_len[0] + r->sec_len[1];
	if (json)
		printf("{\"source\":\"%s\",\"token_count\":%u,\"bytes\":%llu,\"digest\":\"%s\",\"kind\":\"%s\","
		       "\"promoted\":%s,\"promote_why\":\"%s\",\"waited\":%s,\"direct\":%s,\"locate_ns\":%llu,"
		       "\"lookup_ns\":%llu,\"fill_ns\":%llu,\"total_ns\":%llu,\"located_by\":\"%s\"}\n",
		       src, r->token_count, (unsigned long long)bytes, d, l2cli_kind_name(r->kind),
		       r->promoted ? "true" : "false", why_name(r->promote_why), r->waited ? "true" : "false",
		       r->direct ? "true" : "false", (unsigned long long)r->locate_ns, (unsigned long long)r->lookup_ns,
		       (unsigned long long)r->fill_ns, (unsigned long long)r->total_ns, r->from_index ? "index" : "directory");
	else
		printf("source %s  tokens %u  bytes %llu  digest %s  %s%s  locate %.2f us (%s)  lookup %.2f us  fill %.1f us  total %.2f us\n",
		       src, r->token_count, (unsigned long long)bytes, d,
		       r->source == SC_RESTORE_FROM_L2 ? "" : (r->promoted ? "promoted:" : "not promoted:"),
		       r->source == SC_RESTORE_FROM_L2 ? "hit" : why_name(r->promote_why), (double)r->locate_ns / 1e3,
		       r->from_index ? "index" : "directory", (double)r->lookup_ns / 1e3, (double)r->fill_ns / 1e3,
		       (double)r->total_ns / 1e3);
}

/* Write the restored wire (section 0 then section 1) to @out, opened now (a refused restore
 * leaves FILE alone) into *@of; EXIT_OK or EXIT_FAIL. */
static int write_wire(const char *out, const struct sc_restore *r, FILE **of)
{
	if (!(*of = cli_open_output("restore", out)))
		return EXIT_FAIL;
	int ok = fwrite(r->sec[0], 1, r->sec_len[0], *of) == r->sec_len[0] &&
		 (!r->sec_len[1] || fwrite(r->sec[1], 1, r->sec_len[1], *of) == r->sec_len[1]) && fflush(*of) == 0;
	return ok ? EXIT_OK : cli_fail("restore", 0, "cannot write %s: %s", out, strerror(errno));
}

/* Restore @repeat times from @l3, each printed; the last one's wire to @out if given. */
static int restores(struct l2cli_args *x, struct sc_l3 *l3, const char *dir, uint32_t flags, uint64_t deadline_ms,
		    uint64_t recompute_ms, uint64_t repeat, const char *out, int json)
{
	FILE *of = NULL;
	int ret = EXIT_OK;
	for (uint64_t i = 0; i < repeat && ret == EXIT_OK; i++) {
		struct sc_restore r;
		struct sc_restore_opts o = { .flags = flags, .recompute_ns = recompute_ms * 1000000u };
		if (deadline_ms)
			o.deadline_ns = sc_clock_ns() + deadline_ms * 1000000u;
		int rc = sc_restore_with(x->st, l3, x->ns, x->tokens, x->n, &o, &r);
		if (rc < 0)
			return restore_error(rc, dir, x, &r);
		print_restore(&r, json);
		if (out && i + 1 == repeat)
			ret = write_wire(out, &r, &of);
		sc_restore_release(&r);
	}
	if (of && of != stdout && fclose(of) && ret == EXIT_OK)
		ret = cli_fail("restore", 0, "cannot write %s: %s", out, strerror(errno));
	return ret;
}

int cmd_restore(int argc, char **argv)
{
	struct l2cli_args x = { .ns = "" };
	const char *out = NULL;
	uint64_t repeat = 1;
	struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_CREATE };
	int json = 0;
	uint32_t flags = 0;
	uint64_t deadline_ms = 0, recompute_ms = 0;
	const struct cli_opt opts[] = {
		{ "model", CLI_STR, &x.model },     { "state", CLI_STR, &x.state },
		{ "ns", CLI_STR, &x.ns },           { "tokens", CLI_STR, &x.tokens_spec },
		{ "wait", CLI_BITS, &flags, .max = SC_RESTORE_WAIT },
		{ "deadline-ms", CLI_U64, &deadline_ms, 1, 86400000, .want = "1 to 86400000" },
		{ "recompute-ms", CLI_U64, &recompute_ms, 1, 86400000, .want = "1 to 86400000" },
		{ "repeat", CLI_U64, &repeat, 1, 1000000, .want = "1 to 1000000" },
		{ "out", CLI_STR, &out },           { "arena-dir", CLI_STR, &x.dir },
		{ "owner", CLI_OWNER },             { "mode", CLI_MODE, &lo.file_mode, .max = 0666 },
		{ "group", CLI_GROUP, &lo.gid },    { "json", CLI_FLAG, &json },
		{ 0 },
	};
	int ret = cli_parse_opts("restore", argc, argv, opts, usage);
	if (ret)
		return ret < 0 ? EXIT_OK : ret;
	if (argc - optind < 2)
		return cli_usage_error("restore", argc - optind < 1 ? "missing NAME and DIR" : "missing DIR");
	if (argc - optind > 2)
		return cli_usage_error("restore", "unexpected argument '%s'", cli_q(argv[optind + 2]));
	x.name = argv[optind];
	const char *dir = argv[optind + 1];
	ret = l2cli_check_args("restore", &x, SC_L3_STR_MAX);
	if (ret)
		return ret;
	if (!x.model || !x.state || !x.tokens_spec)
		return cli_usage_error("restore", "--model, --state and --tokens are required");
	if ((ret = l2cli_parse_tokens("restore", x.tokens_spec, &x.tokens, &x.n)))
		return ret;
	if (x.n > UINT32_MAX) {
		free(x.tokens);
		return cli_usage_error("restore", "--tokens: more than %u tokens", UINT32_MAX);
	}
	struct sc_l3 *l3 = NULL;
	if ((ret = l2cli_open("restore", &x)) == EXIT_OK) {
		int rc = sc_l3_open(dir, &lo, &l3);
		if (rc) {
			ret = l3cli_open_error("restore", rc, dir, &lo);
		} else {
			sc_l3_bind_arena(l3, x.a);
			ret = restores(&x, l3, dir, flags, deadline_ms, recompute_ms, repeat, out, json);
		}
	}
	sc_l3_close(l3);
	l2cli_close(&x);
	return ret;
}
