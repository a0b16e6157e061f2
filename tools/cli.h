/* tools/cli.h — what every subcommand of the `stagecache` command shares. */
#ifndef SC_TOOLS_CLI_H
#define SC_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "stagecache.h"

/* Exit statuses of every subcommand. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

/* One subcommand: `stagecache NAME ...`. argv[0] is the subcommand name. */
typedef int (*cli_fn)(int argc, char **argv);

/* Parse "64M", "1G", "4096", "2k" (K/M/G/T, powers of 1024). 0 on success, -1 on bad input. */
int cli_parse_size(const char *s, uint64_t *out);
/* Parse a non-negative integer (decimal or 0x hex) no greater than @max. */
int cli_parse_u64(const char *s, uint64_t max, uint64_t *out);
/* Format @bytes as "64.0 MiB" into @buf. */
const char *cli_human(uint64_t bytes, char *buf, size_t len);
/* Print @s as a JSON string (with quotes and escapes). */
void cli_json_str(FILE *f, const char *s);
/* Print "stagecache NAME: MSG: sc_strerror(err)" to stderr and return EXIT_FAIL. */
int cli_fail(const char *cmd, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Print "stagecache NAME: MSG" and "try 'stagecache NAME --help'" to stderr; return EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Remove @dir and everything below it (rm -rf --one-file-system). 0 or -1. */
int cli_rm_rf(const char *dir);
/* Open the arena NAME (optionally in DIR), printing a clear message on failure. */
int cli_open_arena(const char *cmd, const char *dir, const char *name, struct sc_arena **out);


/* Median of @n doubles (sorts them). */
double cli_median(double *v, int n);
/* Seconds since an arbitrary point (CLOCK_MONOTONIC). */
double cli_now(void);

#endif
