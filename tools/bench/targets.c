/*
 * tools/bench/targets.c — the targets of `stagecache-bench`, one row per metric, and the figures of
 * a run (reported by output.c, or loaded back from a JSON file by report.c) judged against them:
 * the table of met, missed and missing. A benchmark adds its metrics' rows here.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* op '>' : value >= bound; '<' : value <= bound. */
static const struct target {
	const char *bench, *metric;
	char op;
	double bound;
	const char *what;
} targets[] = {
	/* l2 */
	{ "l2", "hit_lease_p50_ns", '<', 150, "hit by precomputed key: lookup + lease + release, ns" },
	{ "l2", "hit_p999_with_writer_vs_quiet_p50", '<', 20, "hit p99.9 with a writer admitting/evicting / quiet p50" },
	{ "l2", "hit_2proc_vs_1proc", '>', 1.8, "hits/s, 2 readers / 1 (barrier start, common window)" },
	{ "l2", "admit_4k_vs_xxh3_memcpy", '>', 0.9, "admit / XXH3-128 + memcpy, 4 KiB" },
	{ "l2", "admit_64k_vs_xxh3_memcpy", '>', 0.9, "admit / XXH3-128 + memcpy, 64 KiB" },
	{ "l2", "admit_1m_vs_xxh3_memcpy", '>', 0.9, "admit / XXH3-128 + memcpy, 1 MiB" },
	{ "l2", "admit_full_vs_not_full", '>', 0.7, "admit into a full arena (evicting) / not full, 64 KiB" },
	{ "l2", "copyout_4k_vs_memcpy", '>', 0.9, "copy-out get / memcpy, 4 KiB" },
	{ "l2", "copyout_64k_vs_memcpy", '>', 0.9, "copy-out get / memcpy, 64 KiB" },
	{ "l2", "copyout_1m_vs_memcpy", '>', 0.9, "copy-out get / memcpy, 1 MiB" },
	{ "l2", "density_4k", '>', 0.85, "payload held / heap bytes, 4 KiB entries (index sized per 4 KiB)" },
	{ "l2", "density_64k", '>', 0.97, "payload held / heap bytes, 64 KiB entries" },
	{ "l2", "events_hit_overhead", '<', 1.05, "hit with a KV-event publisher attached / without" },
	{ "l2", "events_admit_overhead", '<', 1.05, "admit (evicting) with a KV-event publisher attached / without" },
	{ "l2", "events_rate", '>', 1e6, "events/s through the event ring, writer to listener, none dropped" },
	/* get */
	{ "get", "get_4k_vs_memcached_unix", '>', 20, "get + read every byte, speed vs memcached (unix), 4 KiB" },
	{ "get", "get_64k_vs_memcached_unix", '>', 5, "vs memcached (unix), 64 KiB" },
	{ "get", "get_1m_vs_memcached_unix", '>', 3, "vs memcached (unix), 1 MiB" },
	{ "get", "get_4k_vs_memcached_tcp", '>', 20, "vs memcached (TCP loopback), 4 KiB" },
	{ "get", "get_64k_vs_memcached_tcp", '>', 5, "vs memcached (TCP loopback), 64 KiB" },
	{ "get", "get_1m_vs_memcached_tcp", '>', 3, "vs memcached (TCP loopback), 1 MiB" },
	{ "get", "get_4k_vs_redis_unix", '>', 20, "vs Redis (unix), 4 KiB" },
	{ "get", "get_64k_vs_redis_unix", '>', 5, "vs Redis (unix), 64 KiB" },
	{ "get", "get_1m_vs_redis_unix", '>', 3, "vs Redis (unix), 1 MiB" },
	{ "get", "get_4k_vs_redis_tcp", '>', 20, "vs Redis (TCP loopback), 4 KiB" },
	{ "get", "get_64k_vs_redis_tcp", '>', 5, "vs Redis (TCP loopback), 64 KiB" },
	{ "get", "get_1m_vs_redis_tcp", '>', 3, "vs Redis (TCP loopback), 1 MiB" },
	{ "get", "get_4k_vs_socket_floor", '>', 5, "vs a minimal unix-socket server, 4 KiB" },
	{ "get", "get_1m_vs_socket_floor", '>', 1.5, "vs a minimal unix-socket server, 1 MiB" },
	{ "get", "get_4k_vs_lmdb", '>', 1.2, "vs LMDB mdb_get (value read in place), 4 KiB" },
	{ "get", "get_64k_vs_lmdb", '>', 1.0, "vs LMDB, 64 KiB" },
	{ "get", "get_1m_vs_lmdb", '>', 1.0, "vs LMDB, 1 MiB" },
	{ "get", "get_4k_vs_floor", '<', 1.4, "our time / the memory floor's (no lookup), 4 KiB" },
	{ "get", "get_64k_vs_floor", '<', 1.05, "our time / the memory floor's, 64 KiB" },
	{ "get", "get_1m_vs_floor", '<', 1.05, "our time / the memory floor's, 1 MiB" },
	/* ring */
	{ "ring", "records_8_vs_rte_ring", '>', 1.0, "records/s vs rte_ring (zero-copy), 8 tokens, every token read" },
	{ "ring", "records_256_vs_rte_ring", '>', 1.0, "records/s vs rte_ring (zero-copy), 256 tokens, every token read" },
	{ "ring", "records_8_vs_pipe", '>', 3, "records/s vs a pipe (same batching), 8 tokens" },
	{ "ring", "records_256_vs_pipe", '>', 1.5, "records/s vs a pipe (same batching), 256 tokens" },
	{ "ring", "batcher_ns_per_token", '<', 10, "batcher cost per token, ns" },
	/* l3 */
	{ "l3", "fill_cold_4m_vs_fio", '>', 0.95, "cold 4 MiB fills / fio (mmaphuge, fixedbufs), same depth" },
	{ "l3", "fill_cold_4m_vs_liburing", '>', 0.95, "cold 4 MiB fills / bare liburing read_fixed, same depth" },
	{ "l3", "fill_cold_64k_vs_fio", '>', 0.9, "cold 64 KiB fills / fio, same depth" },
	{ "l3", "fill_warm_4m_vs_pread_xxh3", '>', 1.2, "warm 4 MiB fills / buffered pread + XXH3-128, same CPUs" },
	{ "l3", "fill_cold_4m_seg_vs_whole", '>', 0.95, "cold 4 MiB segmented fills / whole-object fills, same depth" },
	{ "l3", "fill_cold_4m_cpu_vs_fio_xxh3", '<', 1.1, "CPU-seconds per GB of cold 4 MiB fills / fio's + XXH3-128's" },
	{ "l3", "put_4m_vs_fio_write_fsync", '>', 0.8, "4 MiB puts (fsync'd, atomic) / fio write + fsync, depth 1" },
	{ "l3", "fill_cold_4m_direct_fraction", '>', 1.0, "cold 4 MiB fills that used O_DIRECT" },
	{ "l3", "fill_cold_64k_direct_fraction", '>', 1.0, "cold 64 KiB fills that used O_DIRECT" },
	/* l3scale (the store of 100 k objects of 4 KiB; the 1 M store is opt-in: --sizes 1m) */
	{ "l3scale", "open_ms_100k", '<', 50, "sc_l3_open of a store of 100 k objects, ms" },
	{ "l3scale", "locate_us_p99_100k", '<', 50, "locate without an arena index, p99, 100 k objects, warm, us" },
	{ "l3scale", "janitor_pass_ms_100k", '<', 100, "janitor pass after 1 % of 100 k objects changed, ms" },
	{ "l3scale", "puts_per_s_100k", '>', 5000, "4 KiB puts per second from 4 processes, one per call" },
	{ "l3scale", "puts_batch_per_s_100k", '>', 5000, "4 KiB puts per second from 4 processes, 32 per group commit" },
	/* probes */
	{ "probes", "probes_unattached_overhead", '<', 0.02, "L2 hit with probes unattached vs none" },
	/* restore */
	{ "restore", "restore_l2_vs_get", '<', 1.5, "restore from L2 p50 / key + sc_l2_get + release p50, 4096 tokens" },
	{ "restore", "restore_l2_p99_with_writer_vs_quiet_p50", '<', 10, "restore p99 with a writer / quiet p50" },
	{ "restore", "token_verify_cost", '<', 2.0, "restore p50 with token verification / without, tokens not cached" },
	/* policy */
	{ "policy", "policy_real_vs_lru_min", '>', 1.0, "byte hit ratio, real arena / simulated LRU, worst of 10 traces" },
	{ "policy", "policy_real_vs_s3fifo_min", '>', 0.98, "byte hit ratio, real arena / simulated S3-FIFO, worst of 10 traces" },
	{ "policy", "policy_benefit_vs_s3fifo", '>', 1.3, "compute saved per byte of L2, real arena / simulated S3-FIFO, mixed-cost trace" },
	{ "policy", "policy_benefit_uniform_max_dev", '<', 0.0, "benefit simulator vs S3-FIFO with uniform costs, byte hit ratio difference" },
	{ "policy", "restore_deadline_misses_started", '<', 0.0, "fills started by restores past their deadline" },
	{ "policy", "policy_scan_hot_drop_pts", '<', 5, "hot requests' hit ratio lost to a 2x-budget scan, points" },
	/* segments */
	{ "segments", "segments_physical_vs_logical_l2", '<', 0.35, "L2 physical / logical bytes, multi-turn trace" },
	{ "segments", "segments_physical_vs_logical_l3", '<', 0.35, "L3 physical / logical bytes, multi-turn trace" },
	{ "segments", "segments_hit_contiguous_vs_plain", '>', 0.95, "hit + read of an unfragmented segmented entry / segments off" },
	{ "segments", "segments_copyout_scattered_vs_memcpy", '>', 0.9, "copy-out of a scattered entry / memcpy" },
	{ "segments", "segments_admit_vs_plain", '>', 0.8, "admit with segment hashing and lookups / segments off" },
	{ "segments", "segments_policy_bhr_vs_off", '>', 1.5, "byte hit ratio of the multi-turn trace under pressure, on / off" },
	/* llama.cpp workers (examples/llama) */
	{ "llama", "llama_ttft_l2_speedup_2048", '>', 50, "time to first token, full prefill / restore from L2 (another process), 2048 tokens" },
	{ "llama", "llama_ttft_l3cold_speedup_2048", '>', 10, "time to first token, full prefill / restore from a cold L3, 2048 tokens" },
	{ "llama", "llama_restore_overhead", '<', 1.2, "sc_restore + set_data from the arena / memcpy + set_data from private memory" },
	{ "llama", "llama_chat_speedup", '>', 2, "chat-trace tokens/s of 2 workers, with the cache / without" },
};
#define NTARGET (sizeof(targets) / sizeof(targets[0]))

/* Every figure of this run, for the table and the missing-row rule. */
#define MAX_ROWS 1024
static struct row {
	char bench[16], metric[64], unit[16], why[160];
	double value;
	int missing;
} rows[MAX_ROWS];
static int nrows;

static struct row *row_add(const char *bench, const char *metric)
{
	if (nrows >= MAX_ROWS)
		return NULL;
	struct row *r = &rows[nrows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->bench, sizeof(r->bench), "%s", bench);
	snprintf(r->metric, sizeof(r->metric), "%s", metric);
	return r;
}

static const struct row *find_row(const char *bench, const char *metric)
{
	for (int i = 0; i < nrows; i++)
		if (!strcmp(rows[i].bench, bench) && !strcmp(rows[i].metric, metric))
			return &rows[i];
	return NULL;
}

static int ran_one(const char *const *ran, const char *bench)
{
	for (; *ran; ran++)
		if (!strcmp(*ran, bench))
			return 1;
	return 0;
}

int bench_targets_evaluate(const char *const *ran, FILE *f)
{
	int misses = 0, met = 0;
	if (f)
		fprintf(f, "\n%-7s %-36s %12s %9s  %-6s %s\n", "bench", "metric", "value", "target", "", "what (ours / theirs)");
	for (size_t t = 0; t < NTARGET; t++) {
		const struct target *tg = &targets[t];
		if (!ran_one(ran, tg->bench))
			continue;
		const struct row *r = find_row(tg->bench, tg->metric);
		char tb[32];
		snprintf(tb, sizeof(tb), "%s %g", tg->op == '<' ? "<=" : ">=", tg->bound);
		if (!r || r->missing) {
			misses++;
			if (f)
				fprintf(f, "%-7s %-36s %12s %9s  %-6s missing: %s\n", tg->bench, tg->metric, "-", tb, "MISS",
					r ? r->why : "not reported (the benchmark failed before it)");
			continue;
		}
		int ok = tg->op == '<' ? r->value <= tg->bound : r->value >= tg->bound;
		misses += !ok;
		met += ok;
		if (f)
			fprintf(f, "%-7s %-36s %12.4g %9s  %-6s %s\n", tg->bench, tg->metric, r->value, tb, ok ? "ok" : "MISS",
				tg->what);
	}
	/* figures without a target that were reported missing are misses too */
	for (int i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (!r->missing)
			continue;
		size_t t;
		for (t = 0; t < NTARGET && (strcmp(targets[t].bench, r->bench) || strcmp(targets[t].metric, r->metric)); t++)
			;
		if (t < NTARGET)
			continue;
		misses++;
		if (f)
			fprintf(f, "%-7s %-36s %12s %9s  %-6s missing: %s\n", r->bench, r->metric, "-", "", "MISS", r->why);
	}
	if (f)
		fprintf(f, "%d targets met, %d missed or missing\n", met, misses);
	return misses;
}

int bench_row_known(const char *bench, const char *metric)
{
	return find_row(bench, metric) != NULL;
}

void bench_row_add(const char *bench, const char *metric, double value, const char *unit, const char *why_missing)
{
	struct row *r = row_add(bench, metric);
	if (!r)
		return;
	r->value = value;
	snprintf(r->unit, sizeof(r->unit), "%s", unit ? unit : "");
	if (why_missing) {
		r->missing = 1;
		snprintf(r->why, sizeof(r->why), "%s", why_missing);
	}
}

int bench_targets_write(FILE *f, int html)
{
	int misses = 0, met = 0;
	if (html)
		fprintf(f, "<table>\n<tr><th>bench</th><th>metric</th><th>value</th><th>target</th><th>result</th><th>what (ours / theirs)</th></tr>\n");
	else
		fprintf(f, "| bench | metric | value | target | result | what (ours / theirs) |\n|---|---|---|---|---|---|\n");
	for (size_t t = 0; t < NTARGET; t++) {
		const struct target *tg = &targets[t];
		int any = 0;
		for (int i = 0; i < nrows && !any; i++)
			any = !strcmp(rows[i].bench, tg->bench);
		if (!any)
			continue;
		const struct row *r = find_row(tg->bench, tg->metric);
		char val[64], tb[32], res[200];
		snprintf(tb, sizeof(tb), "%s %g", tg->op == '<' ? "&le;" : "&ge;", tg->bound);
		if (!r || r->missing) {
			misses++;
			snprintf(val, sizeof(val), "—");
			snprintf(res, sizeof(res), "**missing**: %s", r ? r->why : "not reported");
		} else {
			int ok = tg->op == '<' ? r->value <= tg->bound : r->value >= tg->bound;
			misses += !ok;
			met += ok;
			snprintf(val, sizeof(val), "%.3g", r->value);
			snprintf(res, sizeof(res), "%s", ok ? "met" : "**missed**");
		}
		if (html)
			fprintf(f, "<tr><td>%s</td><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				tg->bench, tg->metric, val, tb, res, tg->what);
		else
			fprintf(f, "| %s | `%s` | %s | %s | %s | %s |\n", tg->bench, tg->metric, val, tb, res, tg->what);
	}
	if (html)
		fprintf(f, "</table>\n");
	fprintf(f, "%s%d targets met, %d missed or missing.%s\n", html ? "<p>" : "\n", met, misses, html ? "</p>" : "");
	return misses;
}
