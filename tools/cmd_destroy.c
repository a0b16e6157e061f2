/* tools/cmd_destroy.c — `stagecache destroy NAME [--dir DIR]`. */
#include <errno.h>
#include <getopt.h>
#include <sys/stat.h>

#include "cli.h"

int cmd_destroy(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, 0, 'd' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *dir = NULL;
	int c;
	cli_getopt_begin();
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'h':
			printf("usage: stagecache destroy NAME [--dir DIR]\n\n"
			       "Remove the arena NAME. Processes still attached keep their mapping until they exit.\n"
			       "A file that is not a stagecache arena (a FIFO, a directory, a symlink, any other file)\n"
			       "is never removed.\n");
			return EXIT_OK;
		default: return cli_opt_error("destroy", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("destroy", "missing NAME");
	if (optind < argc - 1)
		return cli_usage_error("destroy", "unexpected argument '%s'", cli_q(argv[optind + 1]));
	const char *name = argv[optind];
	int rc = cli_check_name("destroy", name);
	if (rc)
		return rc;
	rc = sc_arena_destroy(dir, name);
	struct sc_arena_file fi;
	switch (rc) {
	case 0:
		printf("destroyed %s\n", name);
		return EXIT_OK;
	case -EACCES:
	case -EPERM:
		/* unlinking needs write permission on the directory (and, in a sticky /dev/shm, the
		 * file's ownership) */
		if (sc_arena_file_stat(dir, name, &fi) == 0)
			return cli_fail("destroy", 0, "permission denied: cannot remove %s (owner uid %u, mode %04o, in a "
					"directory you may not change)", fi.path, fi.uid, fi.mode & 07777);
		return cli_fail("destroy", 0, "permission denied: cannot remove arena '%s'", name);
	default:
		return cli_arena_error("destroy", rc, dir, name);
	}
}
