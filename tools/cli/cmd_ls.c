/* tools/cli/cmd_ls.c — `stagecache ls NAME [--max N] [--dir DIR] [--json]`: the live L2 entries. */
#include <getopt.h>
#include <time.h>

#include "cli.h"
#include "l2cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache ls NAME [--max N] [--dir DIR] [--owner USER] [--json]\n\n"
		   "List the live L2 entries of every stage: key, stage id, tokens, bytes, payload digest,\n"
		   "origin (direct or l3), age and frequency hint. --json prints one object per line.\n");
}

struct ls_ctx {
	int json, n;
	uint64_t now;
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
	l2cli_print_info(e, c->json, c->now);
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
		CLI_OPERAND("NAME", &name),
	};
	int rc = cli_parse_opts("ls", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	struct sc_arena *a;
	rc = cli_open_arena("ls", dir, name, &a);
	if (rc)
		return rc;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ctx.now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* the header line only once the listing can start: a failure then prints one line only */
	rc = sc_l2_list(a, print_one, &ctx, max);
	sc_arena_close(a);
	if (rc < 0)
		return cli_l2_error("ls", rc, name, "cannot list the entries");
	if (!ctx.json && !ctx.n)
		header();
	return EXIT_OK;
}
