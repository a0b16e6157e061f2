/* tools/cmd_invalidate.c — `stagecache invalidate NAME DIGEST [--dir DIR] [--json]`. */
#include <getopt.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache invalidate NAME DIGEST [--dir DIR] [--json]\n\n"
		   "Remove every L2 entry, in every stage, whose payload digest is DIGEST (32 hex characters):\n"
		   "what to do when the durable copy with that digest changed or was deleted.\n");
}

int cmd_invalidate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, 0, 'd' }, { "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },      { 0, 0, 0, 0 },
	};
	const char *dir = NULL;
	int json = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("invalidate", "unknown option");
		}
	}
	if (optind != argc - 2)
		return cli_usage_error("invalidate", optind >= argc - 1 ? "missing NAME or DIGEST" : "too many arguments");
	struct sc_digest d;
	if (sc_digest_parse(argv[optind + 1], &d))
		return cli_usage_error("invalidate", "DIGEST: want 32 hex characters, got '%s'", argv[optind + 1]);
	struct sc_arena *a;
	if (cli_open_arena("invalidate", dir, argv[optind], &a))
		return EXIT_FAIL;
	int rc = sc_l2_invalidate_digest(a, d);
	sc_arena_close(a);
	if (rc < 0)
		return cli_fail("invalidate", rc, "cannot invalidate");
	if (json)
		printf("{\"removed\":%d}\n", rc);
	else
		printf("removed %d entr%s\n", rc, rc == 1 ? "y" : "ies");
	return EXIT_OK;
}
