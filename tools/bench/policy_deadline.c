/*
 * tools/bench/policy_deadline.c — `stagecache bench policy`'s deadline rows: a restore past its
 * deadline starts no fill.
 *
 * An L3 directory (tmpfs) of 16 objects of 4 MiB, an arena bound to it, restores with
 * a deadline that has passed and with one the predicted fill cannot meet (its model measured by
 * warm-up fills): restore_deadline_misses_started counts the fills they started (sc_l3_stats
 * fill_starts; target 0), restore_deadline_recompute the -ETIME answers; then restores with no
 * deadline show fills do start (restore_deadline_control_fills). Counts are exact; the fill time
 * rows (restore_fill_predicted_ns, restore_fill_measured_ns) are timings on a shared machine: noisy.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "bench.h"

#define B "policy"
#define NS "policy"
#define MODEL "bench-policy"
#define STATE "state"
#define DL_OBJS 16u
#define DL_BYTES (4u << 20)
#define DL_TOKENS 64u

static void dl_tokens(int32_t *t, uint32_t obj)
{
	for (uint32_t i = 0; i < DL_TOKENS; i++)
		t[i] = (int32_t)(obj * 1000003u + i);
}

static uint64_t dl_fill_starts(struct sc_l3 *l3)
{
	struct sc_l3_stats st;
	return sc_l3_stats(l3, &st) == 0 ? st.fill_starts : 0;
}

void bench_policy_deadlines(const uint8_t *src)
{
	static const char *const metrics[] = { "restore_deadline_misses_started", "restore_deadline_recompute",
					       "restore_deadline_control_fills" };
	char dir[96], name[64];
	snprintf(dir, sizeof(dir), "/dev/shm/sc-bench-deadline-%d", (int)getpid());
	snprintf(name, sizeof(name), "bench-deadline-%d", (int)getpid());
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	struct sc_l3 *l3 = NULL;
	struct sc_l3_opts lo = { 0 };
	struct sc_arena_opts ao = { .size_bytes = 64ull << 20, .huge = SC_HUGE_AUTO };
	int32_t tok[DL_TOKENS];
	int rc = sc_arena_create(name, &ao, &a);
	if (!rc)
		rc = sc_stage_open(a, MODEL, STATE, &st);
	if (!rc)
		rc = sc_l3_open(dir, &lo, &l3);
	if (!rc)
		rc = sc_l3_bind_arena(l3, a);
	for (uint32_t i = 0; !rc && i < DL_OBJS; i++) {
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { src + (uint64_t)i * 4096 }, .sec_len = { DL_BYTES } };
		struct sc_l3_put_args pa = { .model_identity = MODEL, .state_identity = STATE, .ns = NS, .tokens = tok,
					     .token_count = DL_TOKENS, .payload = &p };
		dl_tokens(tok, i);
		rc = sc_l3_put_cost(l3, &pa, (uint64_t)DL_TOKENS * 200000u, NULL);
	}
	if (rc) {
		for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
			bench_missing(B, metrics[i], "setup failed: %s", sc_strerror(rc));
		goto out;
	}
	/* warm the fill model on the first half (and keep L2 out of it: nothing is promoted on a first fill) */
	double predicted[DL_OBJS], measured[DL_OBJS];
	int np = 0;
	for (uint32_t i = 0; i < DL_OBJS / 2; i++) {
		struct sc_restore r;
		uint64_t est = 0;
		int have = sc_l3_fill_estimate(l3, DL_BYTES, &est) == 0;
		dl_tokens(tok, i);
		if (sc_restore(st, l3, NS, tok, DL_TOKENS, 0, &r) > 0 && r.source == SC_RESTORE_FROM_L3 && have) {
			predicted[np] = (double)est;
			measured[np++] = (double)r.fill_ns;
		}
		sc_restore_release(&r);
	}
	/* the second half, never filled: deadlines already past, then deadlines the predicted fill
	 * cannot meet (1 ns ahead) */
	uint64_t before = dl_fill_starts(l3), recompute = 0;
	for (int round = 0; round < 2; round++) {
		for (uint32_t i = DL_OBJS / 2; i < DL_OBJS; i++) {
			struct sc_restore r;
			uint64_t now = sc_clock_ns();
			struct sc_restore_opts o = { .deadline_ns = round == 0 ? now - 1 : now + 1 };
			dl_tokens(tok, i);
			if (sc_restore_with(st, l3, NS, tok, DL_TOKENS, &o, &r) == -ETIME)
				recompute++;
			sc_restore_release(&r);
		}
	}
	uint64_t started = dl_fill_starts(l3) - before;
	bench_value(B, "restore_deadline_misses_started", (double)started, "fills",
		    "fills started by 16 restores whose deadline had passed or could not be met by the predicted fill "
		    "(sc_l3_stats.fill_starts)");
	bench_value(B, "restore_deadline_recompute", (double)recompute, "restores",
		    "of those 16, answered -ETIME (recompute)");
	before = dl_fill_starts(l3);
	for (uint32_t i = DL_OBJS / 2; i < DL_OBJS; i++) {
		struct sc_restore r;
		dl_tokens(tok, i);
		(void)sc_restore(st, l3, NS, tok, DL_TOKENS, 0, &r);
		sc_restore_release(&r);
	}
	bench_value(B, "restore_deadline_control_fills", (double)(dl_fill_starts(l3) - before), "fills",
		    "fills started by the same 8 restores without a deadline (a control: 8)");
	if (np) {
		bench_stat(B, "restore_fill_predicted_ns", "ns", predicted, np,
			   "the fill time sc_l3_fill_estimate predicted for each warm-up fill (4 MiB, tmpfs; timing: noisy)");
		bench_stat(B, "restore_fill_measured_ns", "ns", measured, np,
			   "the fill time each warm-up restore measured (timing: noisy on a shared machine)");
	}
out:
	sc_l3_close(l3);
	sc_stage_close(st);
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
	cli_rm_rf(dir);
}

