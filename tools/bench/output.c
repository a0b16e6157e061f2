/*
 * tools/bench/output.c — how a figure leaves a benchmark: one JSON line (to stdout with --json, and
 * to the --out file), aligned text otherwise, and a row for the targets' table (targets.c). The
 * machine is described once, before the first figure.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

int bench_quick;
static int json_out;
static const char *out_path;
static FILE *out_file;
static int started; /* the first figure was printed (the machine's description went first) */
static void machine_env(void);

void bench_output_setup(int json, const char *path)
{
	json_out = json;
	out_path = path;
}

FILE *bench_output_table(void)
{
	return json_out ? stderr : stdout;
}

void bench_output_close(void)
{
	if (out_file)
		fclose(out_file);
	out_file = NULL;
}

/* "KEY":"VALUE" as the first field of a JSON object (opening it) or a later one. */
static void json_field(FILE *f, int first, const char *key, const char *value)
{
	fprintf(f, "%c\"%s\":", first ? '{' : ',', key);
	cli_json_str(f, value);
}

/* The output file is created, and the machine described, when the first figure comes: a run that
 * stops at a usage error (the harness's or a benchmark's) writes nothing. */
void bench_output_start(void)
{
	if (started)
		return;
	started = 1;
	if (out_path && !(out_file = fopen(out_path, "w")))
		fprintf(stderr, "stagecache bench: cannot write %s: %s\n", out_path, strerror(errno));
	machine_env();
}

/* One JSON line to stdout (with --json) and to the --out file. */
static void emit_json(void (*body)(FILE *, const void *), const void *ctx)
{
	bench_output_start();
	FILE *fs[2] = { json_out ? stdout : NULL, out_file };
	for (int i = 0; i < 2; i++)
		if (fs[i]) {
			body(fs[i], ctx);
			fputc('\n', fs[i]);
			fflush(fs[i]);
		}
}

struct fig {
	const char *bench, *metric, *unit, *baseline;
	double value, q1, q3;
	const double *samples;
	int n;
};

static void fig_body(FILE *f, const void *v)
{
	const struct fig *g = v;
	json_field(f, 1, "bench", g->bench);
	json_field(f, 0, "metric", g->metric);
	fprintf(f, ",\"value\":%.6g", g->value);
	json_field(f, 0, "unit", g->unit);
	if (g->samples) {
		fprintf(f, ",\"q1\":%.6g,\"q3\":%.6g,\"iqr\":%.6g,\"n\":%d,\"samples\":[", g->q1, g->q3, g->q3 - g->q1, g->n);
		for (int i = 0; i < g->n; i++)
			fprintf(f, "%s%.6g", i ? "," : "", g->samples[i]);
		fputc(']', f);
	}
	if (g->baseline)
		json_field(f, 0, "baseline", g->baseline);
	fputc('}', f);
}

static void fig_report(const struct fig *g)
{
	bench_row_add(g->bench, g->metric, g->value, g->unit, NULL);
	emit_json(fig_body, g);
	if (!json_out) {
		if (g->samples && g->n > 1)
			printf("%-7s %-40s %12.4g %-9s (IQR %.4g..%.4g, n=%d)\n", g->bench, g->metric, g->value, g->unit, g->q1,
			       g->q3, g->n);
		else
			printf("%-7s %-40s %12.4g %s\n", g->bench, g->metric, g->value, g->unit);
		fflush(stdout);
	}
}

void bench_stat(const char *bench, const char *metric, const char *unit, const double *samples, int n,
		const char *baseline)
{
	if (n < 1) {
		bench_missing(bench, metric, "no samples");
		return;
	}
	double *s = malloc((size_t)n * sizeof(double));
	if (!s) {
		bench_missing(bench, metric, "out of memory");
		return;
	}
	memcpy(s, samples, (size_t)n * sizeof(double));
	double med = cli_median(s, n); /* sorts s */
	struct fig g = { bench, metric, unit, baseline, med, cli_quantile(s, n, 0.25), cli_quantile(s, n, 0.75),
			 samples, n };
	fig_report(&g);
	free(s);
}

void bench_value(const char *bench, const char *metric, double value, const char *unit, const char *baseline)
{
	struct fig g = { bench, metric, unit, baseline, value, 0, 0, NULL, 0 };
	fig_report(&g);
}

/* A JSON object of three string fields: a figure not measured, a fact about the run. */
struct three {
	const char *key[3], *value[3];
};

static void three_body(FILE *f, const void *v)
{
	const struct three *t = v;
	for (int i = 0; i < 3; i++)
		json_field(f, i == 0, t->key[i], t->value[i]);
	fputc('}', f);
}

void bench_missing(const char *bench, const char *metric, const char *fmt, ...)
{
	char why[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (bench_row_known(bench, metric)) /* measured after all, or already said */
		return;
	bench_row_add(bench, metric, 0, NULL, why);
	struct three m = { { "bench", "metric", "missing" }, { bench, metric, why } };
	emit_json(three_body, &m);
	if (!json_out)
		printf("%-7s %-40s missing: %s\n", bench, metric, why);
	fprintf(stderr, "stagecache bench %s: %s not measured: %s\n", bench, metric, why);
}

void bench_env(const char *bench, const char *key, const char *fmt, ...)
{
	char v[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	struct three e = { { "bench", "env", "value" }, { bench, key, v } };
	emit_json(three_body, &e);
	if (!json_out)
		printf("%-7s env %-36s %s\n", bench, key, v);
}

/* The machine, once per run: what a reader of the figures needs to judge them. */
static void machine_env(void)
{
	char v[512], model[512] = "";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "model name", 10)) {
				char *c = strchr(line, ':');
				snprintf(model, sizeof(model), "%s", c ? c + 2 : line);
				model[strcspn(model, "\n")] = 0;
				break;
			}
		fclose(f);
	}
	struct utsname u;
	uname(&u);
	bench_env("env", "cpu_model", "%s", model);
	bench_env("env", "cpus_online", "%ld", sysconf(_SC_NPROCESSORS_ONLN));
	bench_env("env", "llc_bytes", "%llu", (unsigned long long)bench_llc_bytes());
	bench_env("env", "kernel", "%s %s", u.sysname, u.release);
	bench_file_line("/sys/kernel/mm/transparent_hugepage/enabled", v, sizeof(v));
	bench_env("env", "thp_enabled", "%s", v);
	bench_file_line("/proc/sys/vm/nr_hugepages", v, sizeof(v));
	bench_env("env", "nr_hugepages", "%s", v);
	bench_file_line("/proc/loadavg", v, sizeof(v));
	bench_env("env", "loadavg_at_start", "%s", v);
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(v, sizeof(v), "%Y-%m-%dT%H:%M:%SZ", &tm);
	bench_env("env", "date", "%s", v);
	bench_env("env", "stagecache", "%d.%d (arena layout %u)", SC_VERSION_MAJOR, SC_VERSION_MINOR,
		  sc_arena_layout_version());
#ifdef __VERSION__
	bench_env("env", "compiler", "%s", __VERSION__);
#endif
}
