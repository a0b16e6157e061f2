/* tools/cmd_invalidate.c — `stagecache invalidate NAME DIGEST [--dir DIR] [--json]`. */
#include <getopt.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache invalidate NAME DIGEST [--dir DIR] [--owner USER] [--json]\n\n"
		   "Remove every L2 entry, in every stage, whose payload digest is DIGEST (32 hex characters):\n"
		   "what to do when the durable copy with that digest changed or was deleted.\n");
}

int cmd_invalidate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, 0, 'd' }, { "owner", required_argument, 0, 'O' },
		{ "json", no_argument, 0, 'j' },      { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *dir = NULL;
	int json = 0, c;
	cli_getopt_begin();
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'O':
			if (cli_parse_owner("invalidate", optarg))
				return EXIT_USAGE;
			break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_opt_error("invalidate", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("invalidate", "missing NAME and DIGEST");
	if (optind == argc - 1)
		return cli_usage_error("invalidate", "missing DIGEST");
	if (optind < argc - 2)
		return cli_usage_error("invalidate", "unexpected argument '%s'", cli_q(argv[optind + 2]));
	int rc = cli_check_name("invalidate", argv[optind]);
	if (rc)
		return rc;
	struct sc_digest d;
	if (sc_digest_parse(argv[optind + 1], &d))
		return cli_usage_error("invalidate", "DIGEST '%s': want 32 hex characters", cli_q(argv[optind + 1]));
	struct sc_arena *a;
	if ((rc = cli_open_arena("invalidate", dir, argv[optind], &a)))
		return rc;
	rc = sc_l2_invalidate_digest(a, d);
	sc_arena_close(a);
	if (rc < 0)
		return cli_l2_error("invalidate", rc, argv[optind], "cannot invalidate");
	if (json)
		printf("{\"removed\":%d}\n", rc);
	else
		printf("removed %d entr%s\n", rc, rc == 1 ? "y" : "ies");
	return EXIT_OK;
}
