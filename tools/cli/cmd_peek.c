/* tools/cli/cmd_peek.c — `stagecache peek NAME --model M --state S [--ns NS] --tokens LIST|@FILE [--json]`. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"
#include "l2cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache peek NAME --model M --state S [--ns NS] --tokens LIST|@FILE [--dir DIR]\n"
		   "         [--owner USER] [--json]\n\n"
		   "Show an L2 entry's metadata (key, stage, tokens, bytes, digest, origin, age, frequency)\n"
		   "without touching it: no counters, no recency. Exit status 1 when absent.\n");
}

/* Print the entry of @x's prefix, untouched; an exit status. */
static int peek(const struct l2cli_args *x, int json)
{
	struct sc_l2_entry_info info;
	int rc = sc_l2_peek(x->st, x->ns, x->tokens, x->n, &info);
	if (rc == -ENOENT)
		return cli_fail("peek", 0, "no L2 entry for these %zu tokens", x->n);
	if (rc)
		return cli_l2_error("peek", rc, x->name, "lookup failed");
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!json)
		printf("%-32s  %-16s  %8s  %10s  %-32s  %-6s  %9s  %s\n", "KEY", "STAGE", "TOKENS", "BYTES", "DIGEST",
		       "ORIGIN", "AGE", "FREQ");
	l2cli_print_info(&info, json, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
	return EXIT_OK;
}

int cmd_peek(int argc, char **argv)
{
	struct l2cli_args x = { .ns = "" };
	int json = 0;
	const struct cli_opt own[] = { { "json", CLI_FLAG, &json }, { 0 } };
	int rc = l2cli_parse("peek", argc, argv, usage, own, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((rc = l2cli_prefix("peek", &x)) == EXIT_OK && (rc = l2cli_open("peek", &x)) == EXIT_OK)
		rc = peek(&x, json);
	l2cli_close(&x);
	return rc;
}
