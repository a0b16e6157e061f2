/*
 * tools/bench/bench.h — what the benchmarks of `stagecache-bench` (every file of tools/bench/) share with the
 * harness. Private to the benchmark binary; the `stagecache` CLI never links any of it (its `bench`
 * subcommand execs stagecache-bench, see tools/cli/cmd_bench.c).
 *
 * A benchmark is one function `int bench_<name>(int argc, char **argv)` registered in the BENCHES
 * list of main.c: argv[0] is its name, the rest its own options (the harness keeps --json,
 * --out, --table and --quick for itself; bench_quick tells whether --quick was given). It reports
 * each figure with bench_stat (raw samples: the median, the quartiles and the samples go into the
 * JSON line) or bench_value (a single derived value), and every figure it could not measure with
 * bench_missing ("missing: why"), which the harness counts as a miss. It returns EXIT_OK, or
 * EXIT_FAIL when something broke (the harness then also reports its target rows as missing).
 *
 * Targets live in targets.c, one row per metric: a benchmark adds a row there and emits the
 * metric, nothing else.
 *
 * Calls go one way: main.c (the harness) -> report.c -> targets.c; main.c and every benchmark ->
 * output.c -> targets.c; util.c is below all of them.
 */
#ifndef SC_TOOLS_BENCH_H
#define SC_TOOLS_BENCH_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"

/* --quick was given: fewer repetitions, smaller working sets (for tests and smoke runs). */
extern int bench_quick;

/* A figure from @n raw samples (n >= 1): median, quartiles and samples are printed. */
void bench_stat(const char *bench, const char *metric, const char *unit, const double *samples, int n,
		const char *baseline);
/* A figure that is a single value (a count, a fraction, or derived from other figures). */
void bench_value(const char *bench, const char *metric, double value, const char *unit, const char *baseline);
/* A figure that could not be measured, and why (one line, no trailing newline). Counted as a miss. */
void bench_missing(const char *bench, const char *metric, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A fact about the conditions of this benchmark's run (arena backing, how caches were dropped...). */
void bench_env(const char *bench, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Clocks, medians and quantiles: cli_now, cli_median, cli_quantile (tools/common/cli.h). */

/* The next value of the splitmix64 sequence whose state is *@s (advances it). */
uint64_t bench_splitmix(uint64_t *s);
/* Last-level cache bytes as the machine reports it (sysfs, else sysconf), or 0 when unknown. */
uint64_t bench_llc_bytes(void);
/* Is @prog an executable found in PATH? */
int bench_in_path(const char *prog);
/* Run @cmd through sh and put the first line it prints in @out ("" when none). */
void bench_first_line(const char *cmd, char *out, size_t len);
/* Evict @n bytes at @p from every cache level, written back first (x86 clflush, aarch64 dc civac;
 * elsewhere nothing). */
void bench_evict(const void *p, size_t n);
/* The first line of the file @path in @out, without its newline ("" when unreadable). */
void bench_file_line(const char *path, char *out, size_t len);
/* The options of a benchmark that takes none but --help: -1 to go on, else its exit status
 * (--help: @usage to stdout and EXIT_OK; anything else: a usage error naming "bench @which"). */
int bench_no_options(const char *which, int argc, char **argv, void (*usage)(FILE *));
/* Print a progress note to stderr when it is a terminal (never into the data). */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The stat file of the block device holding @dir (/sys/dev/block/M:m/stat) in @out, or "" when
 * there is none (a filesystem without one: tmpfs, FUSE, a network filesystem). */
void bench_disk_of(const char *dir, char *out, size_t len);
/* Read requests completed and bytes read by that device so far: 0, or -1 when unknown. */
int bench_disk_reads(const char *stat_path, double *ios, double *bytes);

/* The benchmarks (one file each). */
int bench_l2(int argc, char **argv);
int bench_anatomy(int argc, char **argv);
int bench_get(int argc, char **argv);
int bench_ring(int argc, char **argv);
int bench_l3(int argc, char **argv);
int bench_l3scale(int argc, char **argv);
int bench_probes(int argc, char **argv);
int bench_restore(int argc, char **argv);
int bench_policy(int argc, char **argv);
/* bench policy's deadline rows (tools/bench/policy_deadline.c); @src: 4 MiB + 64 KiB of payload bytes. */
void bench_policy_deadlines(const uint8_t *src);
int bench_segments(int argc, char **argv);
int bench_llama(int argc, char **argv);
/* The KV-event rows of bench l2 (tools/bench/events.c): called by bench_l2. */
void bench_l2_events(void);
/* bench l2's temporary arenas (tools/bench/l2.c): @bytes (rounded up to 2 MiB) with @entries
 * index entries, hugepages when available, and a stage in it; 0, or an error (said on stderr). */
int bench_l2_arena(const char *name, uint64_t bytes, uint32_t entries, struct sc_arena **a, struct sc_stage **st);
void bench_l2_arena_drop(const char *name, struct sc_arena *a, struct sc_stage *st);
/* @bytes (a multiple of 2 MiB) of anonymous memory, @shared or private, on 2 MiB hugepages like
 * an arena when there are free ones, else plain pages with MADV_HUGEPAGE; *@backing (if not NULL)
 * says which. MAP_FAILED when neither can be had; give it back with munmap(p, @bytes). */
void *bench_huge_alloc(size_t bytes, int shared, const char **backing);

/* ---- the harness (output.c): where figures go ---- */
/* --json (figures as JSON lines on stdout) and --out FILE (NULL: none), before the first figure. */
void bench_output_setup(int json, const char *out_path);
/* Create the --out file and describe the machine, if no figure did yet. */
void bench_output_start(void);
/* Where the table of targets goes: stderr with --json (stdout carries the JSON lines), else stdout. */
FILE *bench_output_table(void);
void bench_output_close(void);

/* ---- targets and rows (targets.c) ---- */
/* A row of this run: a figure (@why_missing NULL) or one not measured; a row read back from a JSON
 * file is added the same way. */
void bench_row_add(const char *bench, const char *metric, double value, const char *unit, const char *why_missing);
/* Is there a row for (@bench, @metric) already? */
int bench_row_known(const char *bench, const char *metric);
/* Misses among the targets of the benchmarks named in @ran (NULL-terminated), plus every figure
 * reported missing. Prints the table to @f when it is not NULL. */
int bench_targets_evaluate(const char *const *ran, FILE *f);
/* The table of targets (Markdown or HTML) over the rows, for the benchmarks that have rows.
 * Returns the misses. */
int bench_targets_write(FILE *f, int html);

/* `stagecache-bench report JSON DIR`: plots (gnuplot) and report.md / report.html. */
int bench_report(int argc, char **argv);

#endif
