/* tools/cli/cmd_ls.c — `stagecache ls NAME [--max N] [--dir DIR] [--json [--token-ids]]`: the live L2 entries. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"
#include "l2cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache ls NAME [--max N] [--dir DIR] [--owner USER] [--json [--token-ids]]\n\n"
		   "List the live L2 entries of every stage: key, stage id, tokens, bytes, payload digest,\n"
		   "origin (direct or l3), age and frequency hint. --json prints one object per line;\n"
		   "--token-ids prints instead each entry's key, stage, token count, digest and its token ids\n"
		   "(\"token_ids\"), the prefix it restores (what `stagecache events` publishes as blocks).\n");
}

struct ls_ctx {
	int json, n, ids, err;
	uint64_t now;
	struct sc_arena *a;
	int32_t *tok;
	uint32_t cap;
};

static void header(void)
{
	printf("%-32s  %-16s  %8s  %10s  %-32s  %-6s  %9s  %s\n", "KEY", "STAGE", "TOKENS", "BYTES", "DIGEST", "ORIGIN",
	       "AGE", "FREQ");
}

static int print_one(const struct sc_l2_entry_info *e, void *vctx)
{
	struct ls_ctx *c = vctx;
	if (!c->json && !c->n++)
		header();
	if (!c->ids) {
		l2cli_print_info(e, c->json, c->now);
		return 0;
	}
	int64_t n;
	while ((n = sc_l2_entry_tokens(c->a, e->key, NULL, c->tok, c->cap)) > (int64_t)c->cap) {
		int32_t *t = realloc(c->tok, (size_t)n * 4);
		if (!t)
			return c->err = -ENOMEM;
		c->tok = t;
		c->cap = (uint32_t)n;
	}
	if (n == -ENOENT)
		return 0; /* gone since the listing looked */
	if (n < 0)
		return c->err = (int)n;
	l2cli_print_info_ids(e, 1, c->now, c->tok, (uint64_t)n);
	return 0;
}

int cmd_ls(int argc, char **argv)
{
	const char *dir = NULL, *name;
	uint64_t max = 0;
	struct ls_ctx ctx = { 0 };
	const struct cli_opt opts[] = {
		{ "dir", CLI_STR, &dir },            { "max", CLI_U64, &max, 0, UINT64_MAX, .want = "a number" },
		{ "owner", CLI_OWNER },              { "json", CLI_FLAG, &ctx.json },
		{ "token-ids", CLI_FLAG, &ctx.ids },
		CLI_OPERAND("NAME", &name),
	};
	int rc = cli_parse_opts("ls", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	struct sc_arena *a;
	if (ctx.ids && !ctx.json)
		return cli_usage_error("ls", "--token-ids needs --json");
	rc = cli_open_arena("ls", dir, name, &a);
	if (rc)
		return rc;
	ctx.a = a;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ctx.now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* the header line only once the listing can start: a failure then prints one line only */
	rc = sc_l2_list(a, print_one, &ctx, max);
	sc_arena_close(a);
	free(ctx.tok);
	if (ctx.err)
		rc = ctx.err;
	if (rc < 0)
		return cli_l2_error("ls", rc, name, "cannot list the entries");
	if (!ctx.json && !ctx.n)
		header();
	return EXIT_OK;
}
