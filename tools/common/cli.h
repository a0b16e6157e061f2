/* tools/common/cli.h — what every subcommand of the `stagecache` command shares, and with it the
 * demo, the stress harness and the benchmarks (tools/common/cli_util.c, measure.c). */
#ifndef SC_TOOLS_CLI_H
#define SC_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "stagecache.h"

/* Exit statuses of every subcommand (EXIT_DAMAGED: fsck only, the arena is declared unrepairable). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_DAMAGED = 3 };

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

/* ---- options (every subcommand parses with getopt_long, optstring ":h") ---- */
/* Start parsing: getopt from the first argument, its own messages off (ours name the option). */
void cli_getopt_begin(void);
/* The usage error for what getopt_long returned ('?' unknown option, ':' missing argument),
 * naming the option as it was typed. Returns EXIT_USAGE. */
int cli_opt_error(const char *cmd, int c, char **argv);
/* One row of a command's option table. A table ends with a row whose name is NULL: { 0 } when
 * the command's operands are its own business, or CLI_OPERAND(WHAT, &var) when it takes exactly
 * one (called WHAT in the messages "missing WHAT" and "unexpected argument"). */
enum cli_opt_kind {
	CLI_STR,    /* const char *: the value as given */
	CLI_FLAG,   /* int: a switch, set to 1 */
	CLI_UNFLAG, /* int: a switch, set to 0 (--no-...) */
	CLI_BITS,   /* uint32_t: a switch, ORs in the bits of max */
	CLI_U32,    /* uint32_t: a whole number in [min, max] */
	CLI_U64,    /* uint64_t: a whole number in [min, max] */
	CLI_SIZE,   /* uint64_t: a size (cli_parse_size) in [min, max] */
	CLI_SIZE32, /* uint32_t: a size in [min, max] */
	CLI_POW2,   /* uint32_t: a size in [min, max] that is a power of two */
	CLI_REAL,   /* double: a number in [min, max] */
	CLI_MODE,   /* uint32_t: an octal mode, at most max (cli_parse_mode) */
	CLI_GROUP,  /* int64_t: a group (cli_parse_group) */
	CLI_OWNER,  /* no dst: whose arena files to trust (cli_parse_owner) */
	CLI_FN,     /* fn(cmd, value, dst): 0, or a usage error printed (its exit status) */
};
struct cli_opt {
	const char *name; /* --NAME, without the dashes */
	enum cli_opt_kind kind;
	void *dst;
	uint64_t min, max;
	const char *hint; /* after "bad --NAME 'VALUE'" (NULL: " (MIN-MAX)") */
	int (*fn)(const char *cmd, const char *arg, void *dst);
	const char *want; /* if set, a bad value says "--NAME 'VALUE': want WANT" instead */
};
#define CLI_OPERAND(what, var) { NULL, CLI_STR, (var), .want = (what) }
/* What cli_parse_opts returned when --help printed the usage: the caller exits with EXIT_OK. */
enum { CLI_HELP = -1 };
/* Parse the options of @t (and --help, which prints @usage unless it is NULL) from argv[1...],
 * then the operand if @t ends with CLI_OPERAND: 0 (other operands from optind), CLI_HELP, or
 * EXIT_USAGE after naming what is wrong. */
int cli_parse_opts(const char *cmd, int argc, char **argv, const struct cli_opt *t, void (*usage)(FILE *));
/* The one operand after the options (none after it) into *@out: 0, or a usage error
 * ("missing @what", "unexpected argument"). */
int cli_operand(const char *cmd, const char *what, int argc, char **argv, const char **out);
/* @s made safe for a one-line message: control characters shown as '?', cut after 40 characters
 * with "... (N bytes)". Returns one of 8 rotating static buffers. */
const char *cli_q(const char *s);
/* An arena NAME: 0, or a usage error naming it (EXIT_USAGE). */
int cli_check_name(const char *cmd, const char *name);
/* A model/state identity or a namespace given as option @opt: at most @max bytes, non-empty
 * unless @may_be_empty. 0 or a usage error. */
int cli_check_identity(const char *cmd, const char *opt, const char *v, size_t max, int may_be_empty);
/* --mode MODE: octal, at most @max (0777: file modes; 07777 with setgid/sticky). 0 or usage error. */
int cli_parse_mode(const char *cmd, const char *opt, const char *arg, uint32_t max, uint32_t *mode);
/* --group GROUP: a group name or number. 0 or usage error. */
int cli_parse_group(const char *cmd, const char *opt, const char *arg, int64_t *gid);
/* --owner USER|UID|any: whose arena files to trust besides root's and the caller's (the
 * following cli_open_arena calls use it). 0 or usage error. */
int cli_parse_owner(const char *cmd, const char *arg);

/* ---- files ---- */
/* Read the whole regular file @path (malloc'd, with a NUL after the @len bytes). Anything else
 * (a directory, a FIFO, a device: never opened in a way that could block) or an unreadable file
 * prints "stagecache CMD: cannot read WHAT PATH: why" and returns EXIT_FAIL. */
int cli_read_input(const char *cmd, const char *what, const char *path, uint8_t **buf, uint64_t *len);
/* Open @path for writing the output: "-" is stdout; a FIFO must already have a reader (the open
 * never waits for one); a directory is refused. Prints its own error and returns NULL. */
FILE *cli_open_output(const char *cmd, const char *path);

/* ---- arenas ---- */
/* Open the arena NAME (in DIR, or the known directories) trusting what --owner said. Returns 0,
 * or prints one line saying what is wrong with the file and returns EXIT_USAGE (invalid name) or
 * EXIT_FAIL; cli_open_errno is then the library's error (-ENOTRECOVERABLE: declared dead). */
int cli_open_arena(const char *cmd, const char *dir, const char *name, struct sc_arena **out);
/* The options of such an open (DIR and what --owner said), for a caller that prints nothing. */
struct sc_arena_open_opts cli_open_opts(const char *dir);
extern int cli_open_errno;
/* Explain an sc_arena_open* / sc_arena_create error @rc about (DIR, NAME) in one line. */
int cli_arena_error(const char *cmd, int rc, const char *dir, const char *name);
/* An L2 or ring call on arena NAME failed with @rc while doing @what: one line (a corrupted
 * index, a damaged arena, ...), EXIT_FAIL. */
int cli_l2_error(const char *cmd, int rc, const char *name, const char *what);
/* Mount point of the first hugetlbfs mount with 2 MiB pages (preferring /dev/hugepages), or NULL. */
const char *cli_hugetlbfs_mount(char *buf, size_t len);


/* ---- counters (stats and exporter show the same) ---- */
/* The arena-wide counters besides L2's, each with whether the arena has it. */
struct cli_counters {
	struct sc_promote_stats ps;
	struct sc_l3_index_stats xs;
	struct sc_arena_info info;
	int have_ps, have_xs, have_info;
	struct sc_ring_stat *rings; /* nrings of them; nrings < 0: not read */
	int nrings;
	uint64_t *ids;              /* every stage's id and L2 counters, nstages of them; < 0: not read */
	struct sc_l2_stats *stages;
	struct sc_miss_stats *misses; /* every stage's miss reasons (same order; zero when unreadable) */
	int nstages;
	struct sc_miss_stats all_misses; /* the arena's (have_ms) */
	int have_ms;
};
/* Read @a's counters into @c (at most @max_stages stages); free with cli_counters_free. */
void cli_counters_read(struct sc_arena *a, int max_stages, struct cli_counters *c);
void cli_counters_free(struct cli_counters *c);
/* Write @m's miss reasons as JSON members ("l2_misses":{...},"restore_misses":{...}, and with
 * @details "l2_misses_refused" and "restore_deadline"), each array by name, starting with a comma. */
void cli_json_misses(FILE *f, const struct sc_miss_stats *m, int details);
/* The same as text: one line per level that has misses, indented by @indent. */
void cli_text_misses(FILE *f, const struct sc_miss_stats *m, const char *indent);

/* ---- measuring (tools/common/measure.c) ---- */
/* Seconds, and nanoseconds, since an arbitrary point (CLOCK_MONOTONIC). */
double cli_now(void);
uint64_t cli_now_ns(void);
/* Median of @n doubles (sorts them); quantile @q in [0,1] of the @n sorted values @v
 * (interpolated between neighbours: the median of an even count is the mean of the middle two). */
double cli_median(double *v, int n);
double cli_quantile(const double *v, int n, double q);

#endif
