/* tools/cmd_peek.c — `stagecache peek NAME --model M --state S [--ns NS] --tokens LIST|@FILE [--json]`. */
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

int cmd_peek(int argc, char **argv)
{
	struct l2cli_args x = { .ns = "" };
	int json = 0;
	const struct l2cli_opt own[] = { { "json", NULL, &json }, { 0 } };
	int rc = l2cli_parse("peek", argc, argv, usage, own, &x);
	if (rc != L2CLI_GO)
		return rc;
	rc = l2cli_prefix("peek", &x);
	if (rc)
		return rc;
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	int ret;
	if ((ret = l2cli_open("peek", &x, &a, &st)))
		goto cleanup;
	ret = EXIT_FAIL;
	struct sc_l2_entry_info info;
	rc = sc_l2_peek(st, x.ns, x.tokens, x.n, &info);
	if (rc == -ENOENT) {
		cli_fail("peek", 0, "no L2 entry for these %zu tokens", x.n);
		goto cleanup;
	}
	if (rc) {
		cli_l2_error("peek", rc, x.name, "lookup failed");
		goto cleanup;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!json)
		printf("%-32s  %-16s  %8s  %10s  %-32s  %-6s  %9s  %s\n", "KEY", "STAGE", "TOKENS", "BYTES", "DIGEST",
		       "ORIGIN", "AGE", "FREQ");
	l2cli_print_info(&info, json, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
	ret = EXIT_OK;
cleanup:
	sc_stage_close(st);
	sc_arena_close(a);
	free(x.tokens);
	return ret;
}
