/* tools/cmd_ls.c — `stagecache ls NAME [--max N] [--dir DIR] [--json]`: the live L2 entries. */
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
	static const struct option opts[] = {
		{ "dir", required_argument, 0, 'd' }, { "max", required_argument, 0, 'x' },
		{ "owner", required_argument, 0, 'O' }, { "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },      { 0, 0, 0, 0 },
	};
	const char *dir = NULL;
	uint64_t max = 0;
	struct ls_ctx ctx = { 0 };
	int c;
	cli_getopt_begin();
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'x':
			if (cli_parse_u64(optarg, UINT64_MAX, &max))
				return cli_usage_error("ls", "--max '%s': want a number", cli_q(optarg));
			break;
		case 'O':
			if (cli_parse_owner("ls", optarg))
				return EXIT_USAGE;
			break;
		case 'j': ctx.json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_opt_error("ls", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("ls", "missing NAME");
	if (optind < argc - 1)
		return cli_usage_error("ls", "unexpected argument '%s'", cli_q(argv[optind + 1]));
	struct sc_arena *a;
	int rc = cli_open_arena("ls", dir, argv[optind], &a);
	if (rc)
		return rc;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ctx.now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* the header line only once the listing can start: a failure then prints one line only */
	rc = sc_l2_list(a, print_one, &ctx, max);
	sc_arena_close(a);
	if (rc < 0)
		return cli_l2_error("ls", rc, argv[optind], "cannot list the entries");
	if (!ctx.json && !ctx.n)
		header();
	return EXIT_OK;
}
