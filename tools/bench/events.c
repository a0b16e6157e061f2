/*
 * tools/bench/events.c — the KV-event stream's costs, reported by `stagecache bench l2`
 * (bench_l2 calls bench_l2_events last):
 *
 *   events_hit_overhead    hit (sc_l2_get_key + release, 1024 small entries) with a publisher
 *                          attached / without: the median of each round's times per hit (TSC, in
 *                          groups of 64), rounds alternate, the median of the rounds' ratios
 *                          (target <= 1.05)
 *   events_admit_overhead  4 KiB admits into a full arena (each admit evicts: two events) with a
 *                          publisher attached / without, measured the same way (target <= 1.05)
 *   events_rate            events/s through the ring from one writer process to the listener
 *                          (sc_events_post -> sc_events_read), with no event dropped: the writer
 *                          appends in bursts of half the ring, at most two bursts ahead of the
 *                          reader (a token per burst read, through a pipe) (target >= 1 M/s)
 *   events_publisher_cpu_ns  context: the real publisher's CPU time per L2 event (read, its entry
 *                          looked at, the model updated, the batch encoded and sent), fed by admits
 *
 * "A publisher attached" is the real one: `stagecache events NAME --endpoint ipc://...` (the CLI
 * beside this binary; libzmq). Where it cannot start, a child that only reads the ring stands in
 * (bench_env says which).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tsc.h"

#define B "l2"
#define KEYS 1024
#define NTOK 32

static void toks(int32_t *t, uint32_t n, uint32_t base)
{
	for (uint32_t i = 0; i < n; i++)
		t[i] = (int32_t)((base * 2654435761u) ^ (i * 40503u));
}

static void pause_ms(int ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };
	nanosleep(&ts, NULL);
}

/* A listener that only drains the ring (when the real publisher cannot run). */
static void drain_child(const char *name)
{
	struct sc_arena *a;
	struct sc_events *ev;
	if (sc_arena_open(name, &a) || sc_events_open(a, &ev))
		_exit(90);
	static struct sc_event e[1024];
	for (;;) {
		int n = sc_events_read(ev, e, 1024);
		if (n < 0)
			_exit(91);
		if (!n)
			pause_ms(1);
	}
}

/* Start a publisher on arena @name: the CLI's, else a draining child. 0 with *pid, or -1. */
static int attach(struct sc_arena *a, const char *name, pid_t *pid, const char **kind)
{
	char exe[4096], cli[4200], ep[128];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = 0;
		snprintf(cli, sizeof(cli), "%s/stagecache", exe);
		snprintf(ep, sizeof(ep), "ipc:///tmp/stagecache-bench-events-%d.sock", (int)getpid());
	}
	for (int real = n > 0 && access(cli, X_OK) == 0; real >= 0; real--) {
		*pid = fork();
		if (*pid < 0)
			return -1;
		if (!*pid) {
			if (!real)
				drain_child(name);
			int null = open("/dev/null", O_WRONLY);
			if (null >= 0) {
				dup2(null, 1);
				dup2(null, 2);
			}
			execl(cli, cli, "events", name, "--endpoint", ep, "--heartbeat-ms", "0", (char *)NULL);
			_exit(127);
		}
		struct sc_events_stats st, st0;
		double end = cli_now() + 10;
		int status;
		sc_events_stats(a, &st0);
		while (cli_now() < end && waitpid(*pid, &status, WNOHANG) == 0) {
			/* listening, and (the real one) its first batch, the snapshot, is out: what is measured
			 * after this is the steady state */
			if (sc_events_stats(a, &st) == 0 && st.listener && st.listener_alive && (!real || st.seq > st0.seq)) {
				*kind = real ? "stagecache events (ipc)" : "a child draining the ring";
				return 0;
			}
			pause_ms(5);
		}
		kill(*pid, SIGKILL);
		waitpid(*pid, &status, 0);
	}
	return -1;
}

static void detach(pid_t pid)
{
	int status;
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
}

static int admit(struct sc_stage *st, uint8_t *buf, size_t len, uint32_t k)
{
	int32_t t[NTOK];
	toks(t, NTOK, k);
	memcpy(buf, &k, 4);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { len } };
	return sc_l2_admit(st, "bench", t, NTOK, sc_digest(buf, len), &p, SC_ORIGIN_DIRECT);
}

/* Hits are timed in groups: one hit (~30 ns) is a few steps of the time-stamp counter as a VM
 * shows it (~10 ns each), too coarse for a 5 % comparison; a group of 64 is ~2 us. */
#define HIT_GROUP 64

/* The median ns per hit of @n random hits of @keys, timed in groups of HIT_GROUP (TSC): a process
 * the machine runs meanwhile stretches a few groups, not the median. @d: room for @n / HIT_GROUP. */
static double hit_round(struct sc_stage *st, const struct sc_key *keys, int n, uint32_t *x, uint64_t *d)
{
	int groups = n / HIT_GROUP;
	for (int g = 0; g < groups; g++) {
		uint64_t t0 = TSC_START();
		for (int i = 0; i < HIT_GROUP; i++) {
			*x = *x * 1103515245u + 12345u;
			struct sc_lease l;
			if (sc_l2_get_key(st, keys[(*x >> 8) % KEYS], &l) == 0)
				sc_lease_release(&l);
		}
		d[g] = TSC_STOP(t0);
	}
	qsort(d, (size_t)groups, sizeof(*d), bench_cmp_u64);
	return bench_tick_q(d, (size_t)groups, 0.5) / HIT_GROUP;
}

/* The median ns of @n admits of keys from *@next on (the arena is full: each evicts), each timed alone. */
static double admit_round(struct sc_stage *st, uint8_t *buf, size_t len, int n, uint32_t *next, int *err, uint64_t *d)
{
	for (int i = 0; i < n; i++) {
		uint64_t t0 = TSC_START();
		int rc = admit(st, buf, len, (*next)++);
		d[i] = TSC_STOP(t0);
		if (rc && !*err)
			*err = rc;
	}
	qsort(d, (size_t)n, sizeof(*d), bench_cmp_u64);
	return bench_tick_q(d, (size_t)n, 0.5);
}

static void overheads(void)
{
	char name[64];
	snprintf(name, sizeof(name), "bench-ev-%d", (int)getpid());
	struct sc_arena *a;
	struct sc_stage *st;
	int rc = bench_l2_arena(name, 16ull << 20, 8192, &a, &st);
	if (rc) {
		bench_missing(B, "events_hit_overhead", "arena: %s", sc_strerror(rc));
		bench_missing(B, "events_admit_overhead", "arena: %s", sc_strerror(rc));
		return;
	}
	static uint8_t buf[4096];
	memset(buf, 0x5a, sizeof(buf));
	struct sc_key *keys = calloc(KEYS, sizeof(*keys));
	for (uint32_t k = 0; k < KEYS && !rc; k++) {
		int32_t t[NTOK];
		toks(t, NTOK, k);
		rc = admit(st, buf, 512, k);
		sc_l2_key(st, "bench", t, NTOK, &keys[k]);
	}
	/* fill the arena with 4 KiB entries: from here on every admit evicts */
	uint32_t next = 1u << 20;
	struct sc_l2_stats ls = { 0 };
	for (int i = 0; !rc && i < 100000 && !ls.evictions; i++) {
		rc = admit(st, buf, sizeof(buf), next++);
		if (i % 256 == 0)
			sc_l2_stats(a, NULL, &ls);
	}
	/* the hit keys were evicted meanwhile: admit them again (hits must hit) */
	for (uint32_t k = 0; k < KEYS && !rc; k++)
		rc = admit(st, buf, 512, k);
	pid_t pub = 0;
	const char *kind = NULL;
	if (rc || attach(a, name, &pub, &kind)) {
		bench_missing(B, "events_hit_overhead", "%s", rc ? sc_strerror(rc) : "no publisher could attach");
		bench_missing(B, "events_admit_overhead", "%s", rc ? sc_strerror(rc) : "no publisher could attach");
		free(keys);
		bench_l2_arena_drop(name, a, st);
		return;
	}
	bench_env(B, "events_publisher", "%s", kind);
	detach(pub);
	int reps = bench_quick ? 3 : 9, nh = bench_quick ? 50000 : 200000, na = bench_quick ? 2000 : 8000, err = 0;
	uint64_t *ticks = malloc((size_t)nh * sizeof(*ticks));
	double hw[16], ho[16], aw[16], ao[16];
	uint32_t x = 7;
	/* each round measures without and with (the publisher started anew), in alternating order so
	 * that a drift of the machine's load between the two halves cancels out over the rounds */
	for (int r = 0; r < reps && !err; r++) {
		for (int half = 0; half < 2 && !err; half++) {
			int with = (r & 1) ? !half : half;
			if (with && attach(a, name, &pub, &kind)) {
				err = -ECHILD;
				break;
			}
			double h = hit_round(st, keys, nh, &x, ticks);
			double ad = admit_round(st, buf, sizeof(buf), na, &next, &err, ticks);
			if (with) {
				hw[r] = h;
				aw[r] = ad;
				detach(pub);
			} else {
				ho[r] = h;
				ao[r] = ad;
			}
		}
	}
	if (err) {
		bench_missing(B, "events_hit_overhead", "a round failed: %s", sc_strerror(err));
		bench_missing(B, "events_admit_overhead", "a round failed: %s", sc_strerror(err));
	} else {
		double rh[16], ra[16];
		for (int r = 0; r < reps; r++) {
			rh[r] = hw[r] / ho[r];
			ra[r] = aw[r] / ao[r];
		}
		bench_stat(B, "events_hit_overhead", "ratio", rh, reps, "the same hits with no publisher");
		bench_stat(B, "events_admit_overhead", "ratio", ra, reps, "the same admits (each evicting) with no publisher");
		bench_stat(B, "events_hit_with_publisher_p50_ns", "ns", hw, reps, NULL);
		bench_stat(B, "events_admit_with_publisher_p50_ns", "ns", aw, reps, NULL);
	}
	free(ticks);
	free(keys);
	bench_l2_arena_drop(name, a, st);
}

/* One writer process posts @total events in bursts of half the ring; the listener (this process)
 * reads them and hands the writer a token through a pipe for every burst it has passed, and the
 * writer waits for a token before each burst after the second: at most a ring's worth is ever
 * unread, so nothing is dropped, and neither side spins. A writer descheduled for longer than the
 * ring's hole time between claiming a slot and filling it (a loaded machine) loses that event: the
 * listener skipped the slot. Such events are counted in *@lost (with drops and reorderings), not
 * waited for. events/s, or a negative errno. */
static double ring_rate(struct sc_arena *a, const char *name, uint64_t total, uint64_t *lost)
{
	struct sc_events *ev;
	int rc = sc_events_open(a, &ev);
	if (rc)
		return rc;
	struct sc_events_stats s0;
	sc_events_stats(a, &s0);
	uint64_t burst = s0.records / 2;
	int tok[2];
	if (pipe(tok)) {
		sc_events_close(ev);
		return -errno;
	}
	pid_t w = fork();
	if (!w) {
		struct sc_arena *c;
		if (sc_arena_open(name, &c))
			_exit(90);
		struct sc_event e = { .type = SC_EVENT_L2_REMOVED };
		char t;
		for (uint64_t i = 0, b = 0; i < total; b++) {
			if (b >= 2 && read(tok[0], &t, 1) != 1)
				_exit(93);
			for (uint64_t k = 0; k < burst && i < total; k++, i++) {
				e.key.lo = i;
				/* -ENOSPC: dropped or skipped, which the ring counts; anything else is a failure */
				int prc = sc_events_post(c, &e);
				if (prc && prc != -ENOSPC)
					_exit(91);
			}
		}
		_exit(0);
	}
	static struct sc_event e[4096];
	uint64_t got = 0, next = 0, order_bad = 0, tokens = 0;
	double t0 = cli_now(), t1 = t0, end = t0 + 120;
	int status, done = 0;
	while (next < total) {
		int was_done = done; /* the writer had exited before this read: nothing more will come */
		int n = sc_events_read(ev, e, 4096);
		if (n < 0)
			break;
		for (int i = 0; i < n; i++) {
			if (e[i].type != SC_EVENT_L2_REMOVED)
				continue;
			if (e[i].key.lo < next)
				order_bad++;
			next = e[i].key.lo + 1;
			got++;
		}
		/* a token per burst passed (by position: a skipped event must not stop the writer) */
		for (; tokens < next / burst; tokens++)
			(void)!write(tok[1], "t", 1);
		t1 = cli_now();
		if (!n && (was_done || t1 > end))
			break;
		if (!n && !done)
			done = waitpid(w, &status, WNOHANG) == w;
	}
	if (!done) {
		if (next < total)
			kill(w, SIGKILL);
		waitpid(w, &status, 0);
	}
	close(tok[0]);
	close(tok[1]);
	struct sc_events_stats s1;
	sc_events_stats(a, &s1);
	*lost = s1.dropped - s0.dropped + s1.lost - s0.lost + order_bad;
	sc_events_close(ev);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return -EIO;
	if (got + *lost < total)
		return -ETIMEDOUT;
	return (double)got / (t1 - t0);
}

/* CPU seconds (user + system) process @pid has used, or < 0. */
static double cpu_s(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *c = strrchr(buf, ')');
	unsigned long ut, st;
	if (!c || sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The real publisher fed by admits of new keys into a full arena (two events each): its CPU time
 * per event (each read, its entry looked at, the model updated, the batch encoded and sent), ns. */
static double publisher_cost(struct sc_arena *a, struct sc_stage *st, const char *name, uint64_t *events)
{
	pid_t pub = 0;
	const char *kind = "";
	if (attach(a, name, &pub, &kind) || strncmp(kind, "stagecache", 10)) {
		if (pub > 0)
			detach(pub);
		return -ENOTCONN;
	}
	static uint8_t buf[512];
	struct sc_events_stats s0, s;
	sc_events_stats(a, &s0);
	double c0 = cpu_s(pub), end = cli_now() + 120;
	int n = bench_quick ? 20000 : 100000;
	for (int i = 0; i < n; i++) {
		if (admit(st, buf, sizeof(buf), 5000000u + (uint32_t)i) && i == 0)
			break;
		/* paced: a publisher that falls a ring behind resynchronises, which is not what this measures */
		if (i % 512 == 511)
			while (sc_events_stats(a, &s) == 0 && s.pending > s.records / 2 && cli_now() < end)
				pause_ms(1);
	}
	end = cli_now() + 30;
	while (sc_events_stats(a, &s) == 0 && s.pending && cli_now() < end)
		pause_ms(1);
	double c1 = cpu_s(pub);
	detach(pub);
	*events = s.appended - s0.appended;
	if (s.pending)
		return -ETIMEDOUT;
	if (s.dropped != s0.dropped)
		return -ENOSPC;
	return c0 < 0 || c1 < 0 || !*events ? -EIO : (c1 - c0) * 1e9 / (double)*events;
}

static void rates(void)
{
	char name[64];
	snprintf(name, sizeof(name), "bench-evr-%d", (int)getpid());
	struct sc_arena *a;
	struct sc_stage *st;
	int rc = bench_l2_arena(name, 16ull << 20, 8192, &a, &st);
	if (rc) {
		bench_missing(B, "events_rate", "arena: %s", sc_strerror(rc));
		return;
	}
	/* a run in which the machine descheduled the writer past the ring's hole time lost an event
	 * and does not count; it is run again, up to three times the runs wanted */
	int reps = bench_quick ? 3 : 5, good = 0, runs = 0;
	uint64_t total = bench_quick ? 500000 : 4000000, lost_runs = 0, lost = 0, d = 0;
	double v[16];
	while (good < reps && runs < 3 * reps) {
		double r = ring_rate(a, name, total, &d);
		runs++;
		if (r < 0) {
			bench_missing(B, "events_rate", "a run failed: %s", sc_strerror((int)r));
			bench_l2_arena_drop(name, a, st);
			return;
		}
		if (d) {
			lost_runs++;
			lost += d;
		} else {
			v[good++] = r;
		}
	}
	bench_env(B, "events_rate_runs", "%d runs of %llu events, %llu of them with %llu events lost (a writer "
		  "descheduled between claim and commit): not counted", runs, (unsigned long long)total,
		  (unsigned long long)lost_runs, (unsigned long long)lost);
	if (good < reps)
		bench_missing(B, "events_rate", "%d of %d runs lost events (%llu in all)", (int)lost_runs, runs,
			      (unsigned long long)lost);
	else
		bench_stat(B, "events_rate", "events/s", v, reps, "one writer process, no drop");
	uint64_t ev;
	double pc = publisher_cost(a, st, name, &ev);
	if (pc >= 0)
		bench_value(B, "events_publisher_cpu_ns", pc, "ns/event", "CPU of `stagecache events` per L2 event");
	else
		bench_missing(B, "events_publisher_cpu_ns", "%s", sc_strerror((int)pc));
	bench_l2_arena_drop(name, a, st);
}

void bench_l2_events(void)
{
	bench_progress("l2: events\n");
	overheads();
	rates();
}
