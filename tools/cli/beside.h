/* tools/cli/beside.h — subcommands that are programs installed beside `stagecache` (beside.c). */
#ifndef SC_TOOLS_CLI_BESIDE_H
#define SC_TOOLS_CLI_BESIDE_H

/* Execute the program @rel (a path relative to the directory of this executable) with arguments
 * @argv0, then @argv[@first...@argc-1]. Returns only on failure: when @rel is not there, prints
 * "stagecache CMD: @what %s is not there (why): @hint" and returns EXIT_FAIL; when exec fails,
 * says why and returns EXIT_FAIL. */
int cli_exec_beside(const char *cmd, const char *rel, const char *what, const char *hint, const char *argv0,
		    int first, int argc, char **argv);

#endif
