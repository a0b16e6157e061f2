/*
 * tools/bench/report.c — `stagecache bench report JSON DIR`: the pictures and the report of a run.
 *
 * Reads the JSON lines a run wrote (--out), writes gnuplot data files and a script into DIR, runs
 * gnuplot (SVG), and writes DIR/report.md and DIR/report.html: the machine, the table of targets
 * (met, missed, missing and why), the plots, and every figure with its interquartile range and
 * baseline. Plots: get latency by value size for ours and every baseline (log scale); ring
 * throughput by record size; fill bandwidth by object size and depth; policy hit ratios when a
 * `bench policy` run is in the file. A plot whose figures are all missing is left out and said so.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define MAXR 2048

static struct rec {
	char bench[16], metric[64], unit[24], baseline[1200], why[200];
	double value, q1, q3;
	int n, missing, env;
} *recs;
static int nrec;

/* The JSON string or number after "key": in @line. */
static int jstr(const char *line, const char *key, char *out, size_t len)
{
	char pat[40];
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	const char *p = strstr(line, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	size_t o = 0;
	while (*p && *p != '"' && o + 1 < len) {
		if (*p == '\\' && p[1]) {
			p++;
			if (*p == 'u') { /* control characters only: keep a space */
				out[o++] = ' ';
				p += strlen(p) >= 5 ? 5 : strlen(p);
				continue;
			}
		}
		out[o++] = *p++;
	}
	out[o] = 0;
	return 0;
}

static int jnum(const char *line, const char *key, double *v)
{
	char pat[40];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(line, pat);
	if (!p)
		return -1;
	char *end;
	*v = strtod(p + strlen(pat), &end);
	return end == p + strlen(pat) ? -1 : 0;
}

static int load(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	static char line[1 << 16];
	recs = calloc(MAXR, sizeof(*recs));
	if (!recs) {
		fclose(f);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f) && nrec < MAXR) {
		struct rec *r = &recs[nrec];
		if (jstr(line, "bench", r->bench, sizeof(r->bench)))
			continue;
		if (!jstr(line, "env", r->metric, sizeof(r->metric))) {
			r->env = 1;
			jstr(line, "value", r->baseline, sizeof(r->baseline));
			nrec++;
			continue;
		}
		if (jstr(line, "metric", r->metric, sizeof(r->metric)))
			continue;
		if (!jstr(line, "missing", r->why, sizeof(r->why))) {
			r->missing = 1;
		} else if (jnum(line, "value", &r->value)) {
			continue;
		}
		jstr(line, "unit", r->unit, sizeof(r->unit));
		jstr(line, "baseline", r->baseline, sizeof(r->baseline));
		double n = 0;
		if (!jnum(line, "n", &n)) {
			r->n = (int)n;
			jnum(line, "q1", &r->q1);
			jnum(line, "q3", &r->q3);
		}
		bench_row_add(r->bench, r->metric, r->value, r->unit, r->missing ? r->why : NULL);
		nrec++;
	}
	fclose(f);
	return 0;
}

static const struct rec *get(const char *bench, const char *metric)
{
	for (int i = 0; i < nrec; i++)
		if (!recs[i].env && !recs[i].missing && !strcmp(recs[i].bench, bench) && !strcmp(recs[i].metric, metric))
			return &recs[i];
	return NULL;
}

/* ---- plots ---- */

static const char *const get_sys[] = { "ours", "floor", "lmdb", "socket_floor", "memcached_unix", "memcached_tcp",
					"redis_unix", "redis_tcp" };
#define NGSYS (int)(sizeof(get_sys) / sizeof(get_sys[0]))

struct plot {
	const char *file, *title;
	int have;
};

static int plot_get(const char *dir, FILE *gp)
{
	static const struct { const char *tag; double bytes; } sz[] = { { "4k", 4096 }, { "64k", 65536 }, { "1m", 1048576 } };
	char p[4200], m[96];
	snprintf(p, sizeof(p), "%s/get.dat", dir);
	FILE *f = fopen(p, "w");
	if (!f)
		return 0;
	int any = 0;
	fprintf(f, "bytes");
	for (int s = 0; s < NGSYS; s++)
		fprintf(f, " %s", get_sys[s]);
	fprintf(f, "\n");
	for (int i = 0; i < 3; i++) {
		fprintf(f, "%.0f", sz[i].bytes);
		for (int s = 0; s < NGSYS; s++) {
			snprintf(m, sizeof(m), "get_%s_%s_ns", sz[i].tag, get_sys[s]);
			const struct rec *r = get("get", m);
			fprintf(f, r ? " %.6g" : " NaN", r ? r->value / 1000.0 : 0);
			any |= r != NULL;
		}
		fprintf(f, "\n");
	}
	fclose(f);
	if (!any)
		return 0;
	fprintf(gp, "set output 'get_latency.svg'\nset title 'Get from another process, every byte copied out (median)'\n"
		    "set logscale xy\nset xlabel 'value size'\nset ylabel 'time per get (µs, log scale)'\n"
		    "set xtics ('4 KiB' 4096, '64 KiB' 65536, '1 MiB' 1048576)\nset key outside right\nset grid\n"
		    "plot for [i=2:%d] 'get.dat' using 1:i with linespoints lw 2 pt 7 title columnhead(i)\n"
		    "unset logscale\nunset xtics\nset xtics\nunset xlabel\n",
		    NGSYS + 1);
	return 1;
}

/* Bars of @n metrics of @bench (labels @lab) into @name.svg. */
static int plot_bars(const char *dir, FILE *gp, const char *name, const char *title, const char *ylabel, const char *bench,
		     const char *const *metric, const char *const *lab, int n, double scale)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s.dat", dir, name);
	FILE *f = fopen(p, "w");
	if (!f)
		return 0;
	int any = 0;
	for (int i = 0; i < n; i++) {
		const struct rec *r = get(bench, metric[i]);
		if (r) {
			fprintf(f, "\"%s\" %.6g %.6g %.6g\n", lab[i], r->value * scale, (r->n ? r->q1 : r->value) * scale,
				(r->n ? r->q3 : r->value) * scale);
			any = 1;
		} else {
			fprintf(f, "\"%s (missing)\" 0 0 0\n", lab[i]);
		}
	}
	fclose(f);
	if (!any)
		return 0;
	fprintf(gp, "set output '%s.svg'\nset title '%s (median, bars: interquartile range)'\nset ylabel '%s'\n"
		    "unset logscale\nset style fill solid 0.6\nset boxwidth 0.6\nset xtics rotate by -30\nset key off\nset yrange [0:*]\n"
		    "plot '%s.dat' using 0:2:xtic(1) with boxes lc rgb '#4472c4', '' using 0:2:3:4 with yerrorbars lc rgb 'black' pt 0\n"
		    "set xtics norotate\nunset yrange\nset key\n",
		    name, title, ylabel, name);
	return 1;
}

/* bench policy: per trace, the byte hit ratio of the real arena next to the LRU, S3-FIFO and OPT
 * simulators (metrics policy_<trace>_byte_hit_{real,lru,s3fifo,opt}), as clustered bars. */
static int plot_policy(const char *dir, FILE *gp)
{
	static const char *const sys[] = { "real", "lru", "s3fifo", "opt" };
	char p[4200], m[96], trace[64];
	snprintf(p, sizeof(p), "%s/policy_hit_ratio.dat", dir);
	FILE *f = fopen(p, "w");
	if (!f)
		return 0;
	fprintf(f, "trace \"real arena\" \"LRU (sim)\" \"S3-FIFO (sim)\" \"OPT (sim, furthest next use)\"\n");
	int rows = 0;
	const char *suffix = "_byte_hit_real";
	for (int i = 0; i < nrec; i++) {
		const struct rec *r = &recs[i];
		size_t ml = strlen(r->metric), sl = strlen(suffix);
		if (r->env || strcmp(r->bench, "policy") || strncmp(r->metric, "policy_", 7) || ml <= 7 + sl ||
		    strcmp(r->metric + ml - sl, suffix))
			continue;
		snprintf(trace, sizeof(trace), "%.*s", (int)(ml - 7 - sl), r->metric + 7);
		fprintf(f, "%s", trace);
		for (int k = 0; k < 4; k++) {
			snprintf(m, sizeof(m), "policy_%s_byte_hit_%s", trace, sys[k]);
			const struct rec *v = get("policy", m);
			fprintf(f, v ? " %.6g" : " NaN", v ? v->value : 0);
		}
		fprintf(f, "\n");
		rows++;
	}
	fclose(f);
	if (!rows)
		return 0;
	fprintf(gp, "set output 'policy_hit_ratio.svg'\nset title 'Byte hit ratio by trace: the real arena (median) and simulators, same requests and capacity'\n"
		    "unset logscale\nset style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.7 border -1\n"
		    "set boxwidth 0.9\nset xtics rotate by -30 noenhanced\nset ylabel 'byte hit ratio'\nset yrange [0:1]\nset key outside right\nset grid ytics\n"
		    "plot 'policy_hit_ratio.dat' using 2:xtic(1) title columnhead(2), '' using 3 title columnhead(3), "
		    "'' using 4 title columnhead(4), '' using 5 title columnhead(5)\n"
		    "set xtics norotate\nunset yrange\nset style data points\n");
	return 1;
}

static void html_escape(FILE *f, const char *s)
{
	for (; *s; s++)
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else
			fputc(*s, f);
}

/* The conditions each benchmark recorded (the env records). */
static void write_conditions(FILE *f, int html)
{
	fprintf(f, html ? "<h2>Machine and conditions</h2>\n<ul>\n" : "## Machine and conditions\n\n");
	for (int i = 0; i < nrec; i++) {
		if (!recs[i].env)
			continue;
		if (html) {
			fprintf(f, "<li>%s <code>%s</code>: ", recs[i].bench, recs[i].metric);
			html_escape(f, recs[i].baseline);
			fprintf(f, "</li>\n");
		} else {
			fprintf(f, "- %s `%s`: %s\n", recs[i].bench, recs[i].metric, recs[i].baseline);
		}
	}
}

static void write_plots(FILE *f, const struct plot *pl, int npl, int gnuplot_ok, int html)
{
	fprintf(f, html ? "<h2>Plots</h2>\n" : "\n## Plots\n\n");
	for (int i = 0; i < npl; i++) {
		if (!pl[i].have)
			fprintf(f, html ? "<p>%s: no figures in this run.</p>\n" : "- %s: no figures in this run.\n", pl[i].title);
		else if (!gnuplot_ok)
			fprintf(f, html ? "<p>%s: not drawn (gnuplot is not installed or failed).</p>\n"
					: "- %s: not drawn (gnuplot is not installed or failed).\n", pl[i].title);
		else if (html)
			fprintf(f, "<h3>%s</h3>\n<img src='%s' alt='%s'>\n", pl[i].title, pl[i].file, pl[i].title);
		else
			fprintf(f, "### %s\n\n![%s](%s)\n\n", pl[i].title, pl[i].title, pl[i].file);
	}
}

/* One row of the table of every figure. */
static void write_row(FILE *f, const struct rec *r, int html)
{
	char med[32], iqr[64] = "";
	if (r->missing)
		snprintf(med, sizeof(med), "missing");
	else
		snprintf(med, sizeof(med), "%.4g", r->value);
	if (!r->missing && r->n > 1)
		snprintf(iqr, sizeof(iqr), "%.4g – %.4g", r->q1, r->q3);
	if (html) {
		fprintf(f, "<tr><td>%s</td><td><code>%s</code></td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>", r->bench,
			r->metric, med, iqr, r->n, r->unit);
		html_escape(f, r->missing ? r->why : r->baseline);
		fprintf(f, "</td></tr>\n");
	} else {
		fprintf(f, "| %s | `%s` | %s | %s | %d | %s | %s |\n", r->bench, r->metric, med, iqr, r->n, r->unit,
			r->missing ? r->why : r->baseline);
	}
}

static void write_report(const char *dir, const struct plot *pl, int npl, int gnuplot_ok, int html)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/report.%s", dir, html ? "html" : "md");
	FILE *f = fopen(p, "w");
	if (!f)
		return;
	if (html)
		fprintf(f, "<!doctype html>\n<html><head><meta charset='utf-8'><title>stagecache benchmarks</title>\n"
			   "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
			   "td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%%}code{font-size:95%%}</style></head><body>\n"
			   "<h1>stagecache benchmarks</h1>\n");
	else
		fprintf(f, "# stagecache benchmarks\n\n");
	write_conditions(f, html);
	fprintf(f, html ? "</ul>\n<h2>Targets</h2>\n" : "\n## Targets\n\n");
	bench_targets_write(f, html);
	write_plots(f, pl, npl, gnuplot_ok, html);
	fprintf(f, html ? "<h2>Every figure</h2>\n<table>\n<tr><th>bench</th><th>metric</th><th>median</th><th>IQR</th>"
			  "<th>n</th><th>unit</th><th>baseline (what the other side did)</th></tr>\n"
			: "\n## Every figure\n\n| bench | metric | median | IQR | n | unit | baseline (what the other side did) |\n"
			  "|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < nrec; i++)
		if (!recs[i].env)
			write_row(f, &recs[i], html);
	fprintf(f, html ? "</table>\n</body></html>\n" : "");
	fclose(f);
}

int bench_report(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: stagecache bench report JSON DIR\n\nPlots (gnuplot, SVG) and DIR/report.md, DIR/report.html from the "
		       "JSON lines of a run (bench ... --out JSON).\n");
		return EXIT_OK;
	}
	if (argc != 3)
		return cli_usage_error("bench report", "needs the JSON file of a run and an output directory");
	int rc = load(argv[1]);
	if (rc)
		return cli_fail("bench report", rc, "cannot read %s", argv[1]);
	const char *dir = argv[2];
	char p[4200];
	snprintf(p, sizeof(p), "%s/plots.gp", dir);
	FILE *gp = fopen(p, "w");
	if (!gp)
		return cli_fail("bench report", -errno, "cannot write %s", p);
	fprintf(gp, "set terminal svg size 900,500 dynamic enhanced font 'sans,12' background '#ffffff'\n");
	struct plot pl[4] = {
		{ "get_latency.svg", "Get latency by value size, ours and every baseline (log scale)", 0 },
		{ "ring_throughput.svg", "Ring throughput by record size", 0 },
		{ "fill_bandwidth.svg", "Fill bandwidth by object size and depth", 0 },
		{ "policy_hit_ratio.svg", "Policy hit ratios", 0 },
	};
	pl[0].have = plot_get(dir, gp);
	static const char *const rm[] = { "records_8_per_s", "rte_ring_records_8_per_s", "pipe_records_8_per_s",
					  "records_256_per_s", "rte_ring_records_256_per_s", "pipe_records_256_per_s" };
	static const char *const rl[] = { "ours, 8 tokens (128 B)", "rte_ring, 8 tokens", "pipe, 8 tokens",
					  "ours, 256 tokens (1088 B)", "rte_ring, 256 tokens", "pipe, 256 tokens" };
	pl[1].have = plot_bars(dir, gp, "ring_throughput", "Commit records per second, every token read", "million records/s",
			       "ring", rm, rl, 6, 1e-6);
	static const char *const fm[] = { "fill_cold_4m_gbps", "fio_cold_4m_gbps", "liburing_cold_4m_gbps",
					  "fill_cold_64k_gbps", "fio_cold_64k_gbps", "fill_warm_4m_gbps",
					  "pread_xxh3_warm_4m_gbps" };
	static const char *const fl[] = { "ours cold 4 MiB", "fio cold 4 MiB", "liburing cold 4 MiB", "ours cold 64 KiB",
					  "fio cold 64 KiB", "ours warm 4 MiB", "pread+XXH3 warm 4 MiB" };
	pl[2].have = plot_bars(dir, gp, "fill_bandwidth", "L3 fill bandwidth (same depth on every side)", "GB/s", "l3", fm, fl,
			       7, 1);
	pl[3].have = plot_policy(dir, gp);
	fclose(gp);
	int gnuplot_ok = 0, any = 0;
	for (int i = 0; i < 4; i++)
		any |= pl[i].have;
	if (any && bench_in_path("gnuplot")) {
		char cmd[4400];
		snprintf(cmd, sizeof(cmd), "cd '%s' && gnuplot plots.gp", dir);
		gnuplot_ok = system(cmd) == 0;
		if (!gnuplot_ok)
			fprintf(stderr, "stagecache bench report: gnuplot failed on %s/plots.gp\n", dir);
	} else if (any) {
		fprintf(stderr, "stagecache bench report: gnuplot is not installed: no plots (apt-get install gnuplot-nox)\n");
	}
	write_report(dir, pl, 4, gnuplot_ok, 0);
	write_report(dir, pl, 4, gnuplot_ok, 1);
	return any && !gnuplot_ok ? EXIT_FAIL : EXIT_OK;
}
