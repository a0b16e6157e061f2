/*
 * tools/cli/cmd_clear.c — the L2 removals of every stage at once: `stagecache clear NAME` (every
 * entry) and `stagecache invalidate NAME DIGEST` (the entries of one payload digest). One command
 * with a row per form: the options, the checks and the report are the same.
 */
#include <getopt.h>

#include "cli.h"

struct removal {
	const char *cmd, *args, *help, *failed;
	int takes_digest;
};

static const struct removal clear_row = {
	"clear", "NAME",
	"Remove every L2 entry of every stage. Leased entries disappear at once; their memory\n"
	"follows when the leases are released.\n",
	"cannot clear", 0,
};
static const struct removal invalidate_row = {
	"invalidate", "NAME DIGEST",
	"Remove every L2 entry, in every stage, whose payload digest is DIGEST (32 hex characters):\n"
	"what to do when the durable copy with that digest changed or was deleted.\n",
	"cannot invalidate", 1,
};

static void usage(const struct removal *r, FILE *f)
{
	fprintf(f, "usage: stagecache %s %s [--dir DIR] [--owner USER] [--json]\n\n%s", r->cmd, r->args, r->help);
}

/* The positional arguments: NAME, and DIGEST when the form takes one. 0 or a usage error. */
static int check_args(const struct removal *r, int argc, char **argv, struct sc_digest *d)
{
	int want = 1 + r->takes_digest;
	if (optind >= argc)
		return cli_usage_error(r->cmd, r->takes_digest ? "missing NAME and DIGEST" : "missing NAME");
	if (argc - optind < want)
		return cli_usage_error(r->cmd, "missing DIGEST");
	if (argc - optind > want)
		return cli_usage_error(r->cmd, "unexpected argument '%s'", cli_q(argv[optind + want]));
	int rc = cli_check_name(r->cmd, argv[optind]);
	if (rc || !r->takes_digest)
		return rc;
	if (sc_digest_parse(argv[optind + 1], d))
		return cli_usage_error(r->cmd, "DIGEST '%s': want 32 hex characters", cli_q(argv[optind + 1]));
	return 0;
}

static int run(const struct removal *r, int argc, char **argv)
{
	const char *dir = NULL;
	int json = 0, rc;
	const struct cli_opt opts[] = {
		{ "dir", CLI_STR, &dir },            { "owner", CLI_OWNER },
		{ "json", CLI_FLAG, &json },         { 0 },
	};
	if ((rc = cli_parse_opts(r->cmd, argc, argv, opts, NULL)) == CLI_HELP)
		usage(r, stdout);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	struct sc_digest d;
	if ((rc = check_args(r, argc, argv, &d)))
		return rc;
	struct sc_arena *a;
	if ((rc = cli_open_arena(r->cmd, dir, argv[optind], &a)))
		return rc;
	rc = r->takes_digest ? sc_l2_invalidate_digest(a, d) : sc_l2_clear(a);
	sc_arena_close(a);
	if (rc < 0)
		return cli_l2_error(r->cmd, rc, argv[optind], r->failed);
	if (json)
		printf("{\"removed\":%d}\n", rc);
	else
		printf("removed %d entr%s\n", rc, rc == 1 ? "y" : "ies");
	return EXIT_OK;
}

int cmd_clear(int argc, char **argv)
{
	return run(&clear_row, argc, argv);
}

int cmd_invalidate(int argc, char **argv)
{
	return run(&invalidate_row, argc, argv);
}
