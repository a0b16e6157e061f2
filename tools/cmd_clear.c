/* tools/cmd_clear.c — `stagecache clear NAME [--dir DIR] [--json]`. */
#include <getopt.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache clear NAME [--dir DIR] [--owner USER] [--json]\n\n"
		   "Remove every L2 entry of every stage. Leased entries disappear at once; their memory\n"
		   "follows when the leases are released.\n");
}

int cmd_clear(int argc, char **argv)
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
			if (cli_parse_owner("clear", optarg))
				return EXIT_USAGE;
			break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_opt_error("clear", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("clear", "missing NAME");
	if (optind < argc - 1)
		return cli_usage_error("clear", "unexpected argument '%s'", cli_q(argv[optind + 1]));
	struct sc_arena *a;
	int rc = cli_open_arena("clear", dir, argv[optind], &a);
	if (rc)
		return rc;
	rc = sc_l2_clear(a);
	sc_arena_close(a);
	if (rc < 0)
		return cli_l2_error("clear", rc, argv[optind], "cannot clear");
	if (json)
		printf("{\"removed\":%d}\n", rc);
	else
		printf("removed %d entr%s\n", rc, rc == 1 ? "y" : "ies");
	return EXIT_OK;
}
