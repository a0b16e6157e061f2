/* tools/cmd_destroy.c — `stagecache destroy NAME [--dir DIR]`. */
#include <errno.h>
#include <getopt.h>

#include "cli.h"

int cmd_destroy(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, 0, 'd' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *dir = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'h':
			printf("usage: stagecache destroy NAME [--dir DIR]\n\n"
			       "Remove the arena NAME. Processes still attached keep their mapping until they exit.\n"
			       "A file that is not a stagecache arena is never removed.\n");
			return EXIT_OK;
		default: return cli_usage_error("destroy", "unknown option");
		}
	}
	if (optind != argc - 1)
		return cli_usage_error("destroy", optind >= argc ? "missing NAME" : "too many arguments");
	const char *name = argv[optind];
	int rc = sc_arena_destroy(dir, name);
	switch (rc) {
	case 0:
		printf("destroyed %s\n", name);
		return EXIT_OK;
	case -ENOENT: return cli_fail("destroy", 0, "no arena named '%s'", name);
	case -EBADMSG: return cli_fail("destroy", 0, "'%s' is not a stagecache arena; left untouched", name);
	case -EINVAL: return cli_fail("destroy", 0, "invalid arena name '%s'", name);
	default: return cli_fail("destroy", rc, "cannot destroy '%s'", name);
	}
}
