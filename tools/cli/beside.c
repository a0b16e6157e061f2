/*
 * tools/cli/beside.c — running a program installed beside this one: `stagecache bench` runs
 * stagecache-bench, `stagecache stress` the test build's CLI (see cmd_bench.c, cmd_stress.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "beside.h"
#include "cli.h"

int cli_exec_beside(const char *cmd, const char *rel, const char *what, const char *hint, const char *argv0,
		    int first, int argc, char **argv)
{
	char self[PATH_MAX], bin[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return cli_fail(cmd, -errno, "cannot find this program (/proc/self/exe)");
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	snprintf(bin, sizeof(bin), "%s/%s", self, rel);
	if (access(bin, X_OK)) {
		int e = errno;
		fprintf(stderr, "stagecache %s: %s %s is not there (%s): %s\n", cmd, what, bin, strerror(e), hint);
		return EXIT_FAIL;
	}
	char **args = calloc((size_t)(argc - first) + 2, sizeof(char *));
	if (!args)
		return cli_fail(cmd, -ENOMEM, "arguments");
	args[0] = (char *)argv0;
	for (int i = first; i < argc; i++)
		args[1 + i - first] = argv[i];
	fflush(stdout);
	fflush(stderr);
	execv(bin, args);
	int e = errno;
	free(args);
	return cli_fail(cmd, -e, "cannot run %s", bin);
}
