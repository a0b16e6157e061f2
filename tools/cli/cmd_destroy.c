/* tools/cli/cmd_destroy.c — `stagecache destroy NAME [--dir DIR]`. */
#include <errno.h>
#include <getopt.h>
#include <sys/stat.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache destroy NAME [--dir DIR]\n\n"
		   "Remove the arena NAME. Processes still attached keep their mapping until they exit.\n"
		   "A file that is not a stagecache arena (a FIFO, a directory, a symlink, any other file)\n"
		   "is never removed.\n");
}

int cmd_destroy(int argc, char **argv)
{
	const char *dir = NULL, *name;
	const struct cli_opt opts[] = { { "dir", CLI_STR, &dir }, CLI_OPERAND("NAME", &name) };
	int rc = cli_parse_opts("destroy", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	rc = cli_check_name("destroy", name);
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
