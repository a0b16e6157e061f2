/*
 * tools/bench/main.c — `stagecache-bench`, the benchmark binary (also reached as `stagecache bench`,
 * which execs it): the registry of benchmarks, their targets, the JSON lines, the table, and the
 * rule that a figure that was not measured is a miss.
 *
 *   stagecache-bench WHICH [--json] [--out FILE] [--table] [--quick] [options of WHICH]
 *   stagecache-bench report JSON DIR
 *
 * Output. Every figure is one JSON object per line:
 *   {"bench","metric","value","unit"[,"q1","q3","n","samples"][,"baseline"]}      measured
 *   {"bench","metric","missing":"why"}                                            not measured
 *   {"bench","env":KEY,"value":V}                                                 a condition of the run
 * The first line describes the machine ({"bench":"env",...}). Without --json the same facts are
 * printed as aligned text; --out FILE always gets the JSON lines.
 *
 * Exit status: 0 every target met and nothing missing; 1 a benchmark failed, a figure is missing,
 * or a target was missed; 2 usage error (nothing is written then: --out is opened only after the
 * arguments were checked).
 *
 * Adding a benchmark: write tools/bench/<name>.c with `int bench_<name>(int argc, char **argv)`,
 * add it to BENCHES below and its metrics with targets to `targets` (targets.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define BENCHES(X)                                                                                      \
	X(l2, "L2 hit path at 1 M entries (quiet and with a writer), admit and copy-out vs XXH3 + memcpy, "     \
	      "2 readers vs 1, memory per entry")                                                        \
	X(anatomy, "where the time of a 4 KiB L2 hit goes: key, lookup and lease, copy, phase by phase vs the memory floor") \
	X(get, "gets from another process vs the memory floor, LMDB, a minimal socket server, memcached, Redis") \
	X(ring, "commit rings vs DPDK rte_ring (zero-copy API) and a pipe; commit-to-visible latency")  \
	X(l3, "L3 fills (cold and warm) vs fio, bare liburing and pread + XXH3-128")                    \
	X(l3scale, "L3 stores of 10 k to 1 M objects: open, locate without an arena, puts from 4 processes, " \
		   "janitor passes, the open after a crashed writer")                                     \
	X(probes, "USDT probe overhead, unattached and attached")                                      \
	X(restore, "sc_restore from L2 through the L3 location index vs the L2 lookup alone, with a writer, "  \
		   "token verification cost, first restore after attach, the directory probe, 1 and 2 processes") \
	X(policy, "L2 hit ratio under pressure: Zipf traces replayed by 2 processes vs LRU, S3-FIFO, OPT simulators") \
	X(segments, "content-addressed L2 segments: physical vs logical bytes of a multi-turn trace, hit, copy-out " \
		    "and admit vs segments off, byte hit ratio under pressure vs segments off")                      \
	X(llama, "llama.cpp workers (examples/llama): time to first token, full prefill vs restore from L2 and from " \
		 "a cold L3; restore overhead vs memcpy + set_data; chat-trace throughput with and without the cache")

struct bench_entry {
	const char *name, *help;
	int (*fn)(int, char **);
};
#define ENTRY(n, h) { #n, h, bench_##n },
static const struct bench_entry benches[] = { BENCHES(ENTRY) };
#undef ENTRY
#define NBENCH (sizeof(benches) / sizeof(benches[0]))

/* ---- arguments ---- */

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench WHICH [--json] [--out FILE] [--table] [--quick] [options of WHICH]\n"
		   "       stagecache bench report JSON DIR\n\n"
		   "Runs benchmarks and prints each figure: the median of repeated runs with its interquartile\n"
		   "range, and for each comparison what the other side did (\"baseline\"). Every comparison is\n"
		   "measured in the same run doing the same work, the runs interleaved.\n\n"
		   "  --json      print JSON lines (one object per figure) instead of text\n"
		   "  --out FILE  also write the JSON lines to FILE (created or truncated once the arguments are valid)\n"
		   "  --table     finish with the table of targets: met, missed, or missing and why\n"
		   "  --quick     fewer repetitions and smaller working sets (a smoke run; figures are rough)\n\n"
		   "WHICH:\n"
		   "  all         every benchmark below, in turn\n");
	for (size_t i = 0; i < NBENCH; i++)
		fprintf(f, "  %-11s %s\n", benches[i].name, benches[i].help);
	fprintf(f, "  report      turn a JSON file of a run into plots (gnuplot) and DIR/report.md, DIR/report.html\n\n"
		   "'stagecache bench WHICH --help' lists a benchmark's own options and metrics.\n"
		   "Exit status: 0 every target met, 1 a target missed, a figure missing or a benchmark failed,\n"
		   "2 usage error.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "stagecache bench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\ntry 'stagecache bench --help'\n");
	return EXIT_USAGE;
}

/* The harness's command line: its own options, the benchmark's name, and the rest (rest[0] is
 * the name) for the benchmark. */
struct harness {
	const char *which, *out_path;
	int table, help, json;
	char **rest;
	int nrest;
};

/* Pass 1: the harness's own options; everything else belongs to the benchmark. 0 or an exit status. */
static int parse_harness(int argc, char **argv, struct harness *h)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--table")) {
			h->table = 1;
		} else if (!strcmp(a, "--json")) {
			h->json = 1;
		} else if (!strcmp(a, "--quick")) {
			bench_quick = 1;
		} else if (!strcmp(a, "--out") || !strncmp(a, "--out=", 6)) {
			if (a[5] == '=')
				h->out_path = a + 6;
			else if (i + 1 >= argc)
				return usage_error("%s needs a file name", a);
			else
				h->out_path = argv[++i];
			if (!*h->out_path)
				return usage_error("%s", "--out needs a non-empty file name");
		} else if ((!strcmp(a, "--help") || !strcmp(a, "-h")) && !h->which) {
			h->help = 1;
		} else if (!h->which && a[0] != '-') {
			h->which = a;
			h->rest[0] = argv[i];
		} else {
			h->rest[h->nrest++] = argv[i];
		}
	}
	bench_output_setup(h->json, h->out_path);
	return 0;
}

/* Refuse an unwritable --out file now, without truncating it. */
static int check_out_path(const char *out_path)
{
	int e = 0, fd = open(out_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
	} else if (errno == ENOENT) {
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s", out_path);
		char *slash = strrchr(dir, '/');
		if (slash)
			slash[slash == dir] = 0;
		if (access(slash ? dir : ".", W_OK | X_OK))
			e = errno;
	} else {
		e = errno;
	}
	if (e)
		fprintf(stderr, "stagecache bench: cannot write %s: %s\n", out_path, strerror(e));
	return e;
}

/* Benchmark @sel (or every one with @all), in turn; which ran in @ran, *failed when one failed.
 * EXIT_USAGE when a benchmark refused its options, else 0. */
static int run_benches(int all, size_t sel, struct harness *h, int *ran, int *failed)
{
	for (size_t i = 0; i < NBENCH; i++) {
		if (!all && i != sel)
			continue;
		h->rest[0] = (char *)benches[i].name;
		ran[i] = 1;
		bench_progress("bench %s ...\n", benches[i].name);
		int rc = benches[i].fn(h->nrest, h->rest);
		if (rc == EXIT_USAGE) {
			ran[i] = 0;
			return EXIT_USAGE;
		}
		if (rc) {
			*failed = 1;
			fprintf(stderr, "stagecache bench: %s failed (exit %d)\n", benches[i].name, rc);
		}
	}
	return 0;
}

/* Everything before the run: help, the benchmark chosen, its own --help, the --out file.
 * Returns -1 to go on with *all / *sel set, else the exit status. */
static int choose(struct harness *h, int *all, size_t *sel)
{
	if (h->help && !h->which) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!h->which) {
		if (h->nrest > 1)
			return usage_error("unexpected option '%s' before the benchmark's name", h->rest[1]);
		char names[256] = "all";
		for (size_t i = 0; i < NBENCH; i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), ", %s", benches[i].name);
		return usage_error("missing WHICH, the benchmark to run: %s or report", names);
	}
	if (!strcmp(h->which, "report"))
		return bench_report(h->nrest, h->rest);
	*all = !strcmp(h->which, "all");
	*sel = NBENCH;
	for (size_t i = 0; i < NBENCH; i++)
		if (!strcmp(h->which, benches[i].name))
			*sel = i;
	if (!*all && *sel == NBENCH)
		return usage_error("unknown benchmark '%s' (see 'stagecache bench --help')", h->which);
	if (*all && h->nrest > 1) {
		if (!strcmp(h->rest[1], "--help") || !strcmp(h->rest[1], "-h")) {
			usage(stdout);
			printf("\n'bench all' runs each benchmark above in turn with --json/--out/--table/--quick.\n");
			return EXIT_OK;
		}
		return usage_error("'bench all' takes only --json, --out, --table and --quick, not '%s'", h->rest[1]);
	}
	/* a benchmark's --help needs no output file */
	for (int i = 1; i < h->nrest; i++)
		if (!strcmp(h->rest[i], "--help") || !strcmp(h->rest[i], "-h"))
			return benches[*sel].fn(h->nrest, h->rest);
	if (h->out_path && check_out_path(h->out_path))
		return EXIT_FAIL;
	return -1;
}

int main(int argc, char **argv)
{
	struct harness h = { .nrest = 1 };
	h.rest = calloc((size_t)argc + 1, sizeof(char *));
	if (!h.rest)
		return EXIT_FAIL;
	int all = 0, rc = parse_harness(argc, argv, &h);
	size_t sel = NBENCH;
	if (rc || (rc = choose(&h, &all, &sel)) >= 0) {
		free(h.rest);
		return rc;
	}
	int ran[NBENCH] = { 0 }, failed = 0;
	int usage_rc = run_benches(all, sel, &h, ran, &failed);
	free(h.rest);
	if (!usage_rc)
		bench_output_start();
	const char *names[NBENCH + 1] = { NULL };
	for (size_t i = 0, k = 0; i < NBENCH; i++)
		if (ran[i])
			names[k++] = benches[i].name;
	int misses = bench_targets_evaluate(names, NULL);
	if (h.table)
		bench_targets_evaluate(names, bench_output_table());
	bench_output_close();
	if (usage_rc)
		return EXIT_USAGE;
	return failed || misses ? EXIT_FAIL : EXIT_OK;
}
