/*
 * tools/bench/probes.c — `stagecache bench probes [--json] [--quick]`: what the USDT probes cost.
 *
 * The same L2 hit loop (precomputed key: sc_l2_get_key + sc_lease_release on one 4 KiB entry) is
 * built twice by the Makefile, as a helper program linked statically:
 *   build/bench_probes_helper           against build/libstagecache.a (probes compiled in)
 *   build/noprobes/bench_probes_helper  against build/noprobes/libstagecache.a (-DSC_NO_PROBES)
 * so the only difference between the two is the probe sites. The runs are interleaved and each
 * variant keeps its best (minimum) batch median, since on a shared machine noise only ever adds.
 *   probes_unattached_overhead = with / without - 1   (target <= 0.02)
 * Then, as root, `stagecache trace --binary build/bench_probes_helper` attaches the eBPF programs
 * and the helper runs again: attached_ns_per_event = attached - unattached (one l2_hit per op).
 *
 * This file is both: compiled into stagecache-bench (bench_probes) and, with -DSC_PROBES_HELPER, the helper.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#ifdef SC_PROBES_HELPER

/* usage: bench_probes_helper ITERS BATCHES -> prints "ns_per_op X" (best batch) */
int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 200000, batches = argc > 2 ? atol(argv[2]) : 7;
	if (iters < 1 || batches < 1 || batches > 1000)
		return EXIT_USAGE;
	char name[64];
	snprintf(name, sizeof(name), "bench-probes-%d", (int)getpid());
	struct sc_arena_opts ao = { .size_bytes = 64ull << 20, .huge = SC_HUGE_OFF };
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	int rc = sc_arena_create(name, &ao, &a);
	if (rc) {
		fprintf(stderr, "bench_probes_helper: create arena: %s\n", sc_strerror(rc));
		return EXIT_FAIL;
	}
	static char payload[4096];
	int32_t tokens[64];
	for (int i = 0; i < 64; i++)
		tokens[i] = i * 7 + 1;
	memset(payload, 0x5a, sizeof(payload));
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { payload }, .sec_len = { sizeof(payload) } };
	struct sc_key key;
	if ((rc = sc_stage_open(a, "bench-model", "bench-state", &st)) ||
	    (rc = sc_l2_admit(st, "", tokens, 64, sc_digest(payload, sizeof(payload)), &p, SC_ORIGIN_DIRECT)) ||
	    (rc = sc_l2_key(st, "", tokens, 64, &key))) {
		fprintf(stderr, "bench_probes_helper: setup: %s\n", sc_strerror(rc));
		rc = EXIT_FAIL;
		goto out;
	}
	double best = 0;
	for (long b = 0; b < batches; b++) {
		double t0 = cli_now();
		for (long i = 0; i < iters; i++) {
			struct sc_lease l;
			rc = sc_l2_get_key(st, key, &l);
			if (rc) {
				fprintf(stderr, "bench_probes_helper: get: %s\n", sc_strerror(rc));
				rc = EXIT_FAIL;
				goto out;
			}
			sc_lease_release(&l);
		}
		double ns = (cli_now() - t0) * 1e9 / (double)iters;
		if (b == 0 || ns < best)
			best = ns;
	}
	printf("ns_per_op %.3f\n", best);
	rc = EXIT_OK;
out:
	sc_stage_close(st);
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
	return rc;
}

/* The helper links only the static library; cli_now is the CLI's. */
double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#else /* the CLI side */

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench probes\n\n"
		   "The L2 hit loop linked with probes (unattached) vs without probes (-DSC_NO_PROBES), and,\n"
		   "as root, with the eBPF programs of 'stagecache trace' attached. Metrics:\n"
		   "  hit_ns_noprobes, hit_ns_probes_unattached, probes_unattached_overhead (target <= 0.02),\n"
		   "  hit_ns_probes_attached, attached_ns_per_event\n");
}

/* Run @helper ITERS BATCHES; 0 and *ns on success. */
static int run_helper(const char *helper, long iters, long batches, double *ns)
{
	char cmd[PATH_MAX + 64], line[256];
	snprintf(cmd, sizeof(cmd), "'%s' %ld %ld", helper, iters, batches);
	FILE *f = popen(cmd, "r");
	if (!f)
		return -errno;
	int got = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "ns_per_op %lf", ns) == 1)
			got = 1;
	int st = pclose(f);
	return got && st == 0 ? 0 : -EIO;
}

/* Start `stagecache trace --binary @helper` and wait for its ready line. Returns its pid or -1. */
static pid_t start_trace(const char *self, const char *helper, const char *pin_dir, FILE **out)
{
	int fds[2];
	if (pipe(fds))
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGINT); /* never outlive the benchmark */
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl(self, self, "trace", "--binary", helper, "--pin-dir", pin_dir, "--interval", "3600", "--json",
		      (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	*out = fdopen(fds[0], "r");
	char line[1024];
	while (*out && fgets(line, sizeof(line), *out))
		if (strstr(line, "\"ready\""))
			return pid;
	kill(pid, SIGINT);
	waitpid(pid, NULL, 0);
	if (*out)
		fclose(*out);
	*out = NULL;
	return -1;
}

/* The helpers next to this binary: with probes (@with), without (@without), and the CLI (@self). */
struct helpers {
	char self[PATH_MAX + 16], with[PATH_MAX + 32], without[PATH_MAX + 48];
};

static int find_helpers(struct helpers *h)
{
	char exe[PATH_MAX], dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return cli_fail("bench", -errno, "probes: /proc/self/exe");
	exe[n] = 0;
	snprintf(dir, sizeof(dir), "%s", exe);
	*strrchr(dir, '/') = 0;
	/* `stagecache trace` is the CLI's, next to this benchmark binary */
	snprintf(h->self, sizeof(h->self), "%s/stagecache", dir);
	snprintf(h->with, sizeof(h->with), "%s/bench_probes_helper", dir);
	snprintf(h->without, sizeof(h->without), "%s/noprobes/bench_probes_helper", dir);
	if (access(h->with, X_OK) || access(h->without, X_OK))
		return cli_fail("bench", -ENOENT, "probes: helpers %s and %s are not built (run make)", h->with, h->without);
	return EXIT_OK;
}

/* Unattached probes vs none: the best of @rounds interleaved runs of each (so drift hits both
 * alike) into *@with and *@without. */
static int unattached(const struct helpers *h, long iters, long batches, int rounds, double *with, double *without)
{
	for (int r = 0; r < rounds; r++) {
		double a, b;
		int e = run_helper(h->without, iters, batches, &b);
		if (!e)
			e = run_helper(h->with, iters, batches, &a);
		if (e)
			return cli_fail("bench", e, "probes: running the helper failed");
		if (r == 0 || a < *with)
			*with = a;
		if (r == 0 || b < *without)
			*without = b;
	}
	return EXIT_OK;
}

/* With `stagecache trace` attached (root only): the best of @rounds runs; reports its figures
 * against @best_with (the unattached time), or says why they are missing. */
static int attached(const struct helpers *h, long iters, long batches, int rounds, double best_with)
{
	if (geteuid() != 0) {
		bench_missing("probes", "attached_ns_per_event", "not root: the eBPF programs cannot be attached");
		return EXIT_OK;
	}
	char pin_dir[64];
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/stagecache-bench-%d", (int)getpid());
	FILE *tout = NULL;
	pid_t tp = start_trace(h->self, h->with, pin_dir, &tout);
	if (tp < 0) {
		bench_missing("probes", "attached_ns_per_event", "could not attach (see 'stagecache trace --binary %s')",
			      h->with);
		return EXIT_OK;
	}
	double best_att = 0;
	int e = 0;
	for (int r = 0; r < rounds && !e; r++) {
		double a;
		e = run_helper(h->with, iters, batches, &a);
		if (!e && (r == 0 || a < best_att))
			best_att = a;
	}
	kill(tp, SIGINT);
	waitpid(tp, NULL, 0);
	fclose(tout);
	if (e)
		return cli_fail("bench", e, "probes: running the helper under trace failed");
	bench_value("probes", "hit_ns_probes_attached", best_att, "ns", NULL);
	bench_value("probes", "attached_ns_per_event", best_att - best_with, "ns", "hit_ns_probes_unattached");
	return EXIT_OK;
}

int bench_probes(int argc, char **argv)
{
	int quick = bench_quick;
	int rc = bench_no_options("probes", argc, argv, usage);
	if (rc >= 0)
		return rc;
	struct helpers h;
	if ((rc = find_helpers(&h)))
		return rc;
	long iters = quick ? 100000 : 400000, batches = quick ? 5 : 9;
	double best_with = 0, best_without = 0;
	if ((rc = unattached(&h, iters, batches, quick ? 3 : 15, &best_with, &best_without)))
		return rc;
	bench_value("probes", "hit_ns_noprobes", best_without, "ns", NULL);
	bench_value("probes", "hit_ns_probes_unattached", best_with, "ns", NULL);
	bench_value("probes", "probes_unattached_overhead", best_with / best_without - 1, "ratio",
		       "hit_ns_noprobes");
	return attached(&h, iters / 4, batches, quick ? 2 : 3, best_with);
}

#endif
