/*
 * tools/bench/ring.c — `stagecache bench ring [--runs N] [--bulk N]`.
 *
 * Producer and consumer run in two forked processes (pinned to CPUs 0 and 1 when there are
 * two), moving the same records three ways in the same run; every consumer reads every token of
 * every record (that is the headline row) and checks the sequence numbers:
 *   - the commit rings: sc_ring_try_submit_bulk (--bulk records per publish, default 16) or
 *     sc_ring_try_submit (one per publish) / sc_ring_poll (bursts of 64), tokens read in place;
 *   - DPDK rte_ring used as its authors intend for records this size: the zero-copy API
 *     (rte_ring_peek_zc.h), SP/SC, element = our record; the producer writes --bulk records in
 *     place between rte_ring_enqueue_zc_bulk_elem_start/finish, the consumer reads bursts of 64 in
 *     place between rte_ring_dequeue_zc_burst_elem_start/finish; the ring in MAP_SHARED memory
 *     (rte_ring_get_memsize_elem + rte_ring_init, dlopen'ed from librte_ring; the inline ring code
 *     is DPDK's headers, compiled like the rest of this file with -O3 -march=native);
 *   - a pipe with the same batching: --bulk records per write(), read in 64 KiB reads.
 * Records carry 8 tokens (a typical decode batch, 128 bytes) or 256 (a full batch, 1088 bytes).
 * Every figure is the median of --runs runs, the transports interleaved in each run; ratios are
 * medians of the per-run ratios. Spinning sides yield the CPU after 256 idle spins (the host is
 * shared) and idle consumers back off exponentially (up to 64 pauses), identically for both rings.
 * commit_to_visible_p50/p99_ns: a producer submitting one 8-token record every ~20 us stamps the
 * TSC into it; the consumer (the same polling loop) takes the difference on delivery.
 * consumer_idle_cpu: the CPU share of that polling consumer over 1 s with nothing to deliver.
 * batcher_ns_per_token: a producer process feeding sc_batcher_commit (capacity-driven emits)
 * while a consumer process drains the ring, time spent waiting for ring space excluded
 * (batcher_wall_ns_per_token includes it); the heap is checked for growth across the loop.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <x86intrin.h>
#include <unistd.h>
#include <fcntl.h>

#include "bench.h"
#include "tsc.h"

#if defined(__has_include)
#if __has_include(<rte_ring_elem.h>)
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <rte_ring_peek_zc.h>
#define HAVE_RTE_RING 1
#endif
#endif

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() do { } while (0)
#endif

#define BURST 64
#ifndef SC_DPDK_VERSION
#define SC_DPDK_VERSION "unknown"
#endif

/* An idle consumer backs off: after each empty poll it pauses twice as long as after the
 * previous one (up to 64 pauses), and starts over when it gets something. Both ring consumers
 * use exactly this, so neither hammers its producer's index line harder than the other. */
static inline void backoff(unsigned *pauses, unsigned *spins)
{
	for (unsigned i = 0; i < *pauses; i++)
		cpu_relax();
	if (*pauses < 64)
		*pauses = *pauses ? *pauses * 2 : 1;
	if (++*spins >= 256) {
		*spins = 0;
		sched_yield();
	}
}

/* Spin politely: on a shared, loaded host the other side may be descheduled; after a while of
 * finding nothing to do, give the CPU away (both ring transports do exactly the same). */
static inline void idle(unsigned *spins)
{
	if (++*spins < 256) {
		cpu_relax();
	} else {
		*spins = 0;
		sched_yield();
	}
}
#define RING_BYTES (256u << 10)

/* The record as the commit rings lay it out: 48-byte header, tokens, padded to 64 bytes. */
struct brec {
	uint32_t len, flags, ntokens, gen;
	uint64_t seq, request_id, session_id, total;
	int32_t tokens[];
};

static uint32_t rec_bytes(uint32_t ntokens)
{
	return (48 + 4 * ntokens + 63) & ~63u;
}

struct shared {
	_Atomic int ready;
	_Atomic int go;
	double t_start, t_end;
	_Atomic uint64_t bad;
	uint64_t sink; /* consumers store their token sums here, so no read is optimised away */
	double ns_per_token, wall_ns_per_token;
	int64_t heap_delta;
};

static struct shared *sh;

/* Every consumer reads every token of every record. */
static inline uint64_t sum_tokens(const int32_t *t, uint32_t n)
{
	uint64_t s = 0;
	for (uint32_t i = 0; i < n; i++)
		s += (uint32_t)t[i];
	return s;
}

static void pin(int cpu)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 2)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu % (int)n, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void wait_go(void)
{
	atomic_fetch_add(&sh->ready, 1);
	while (!atomic_load_explicit(&sh->go, memory_order_acquire))
		cpu_relax();
}

typedef void (*side_fn)(void *arg);

/* Fork a producer and a consumer; return the seconds from start to the consumer's last record. */
static double run_pair(side_fn producer, side_fn consumer, void *arg)
{
	memset(sh, 0, sizeof(*sh));
	pid_t p[2];
	side_fn fns[2] = { producer, consumer };
	for (int i = 0; i < 2; i++) {
		p[i] = fork();
		if (p[i] < 0)
			return -1;
		if (p[i] == 0) {
			pin(i);
			wait_go();
			fns[i](arg);
			_exit(0);
		}
	}
	while (atomic_load(&sh->ready) < 2)
		usleep(100);
	sh->t_start = cli_now();
	atomic_store_explicit(&sh->go, 1, memory_order_release);
	int ok = 1;
	for (int i = 0; i < 2; i++) {
		int st;
		waitpid(p[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			ok = 0;
	}
	if (!ok || atomic_load(&sh->bad))
		return -1;
	return sh->t_end - sh->t_start;
}

/* ---- the two sides of a commit ring ---- */

/* A producer's arena @name and its ring (the process exits 3 when either cannot be opened). */
static struct sc_ring *producer_open(const char *name, struct sc_arena **ar)
{
	struct sc_ring *r;
	if (sc_arena_open(name, ar) || sc_ring_open(*ar, &r))
		_exit(3);
	return r;
}

static void producer_close(struct sc_ring *r, struct sc_arena *ar)
{
	sc_ring_close(r);
	sc_arena_close(ar);
}

enum { IDLE_SPIN = 0, IDLE_BACKOFF = 1 };

/* The consumer: poll arena @name's rings into @cb (bursts of BURST) until *@count reaches @want,
 * idling with backoff() or idle() (@how) after an empty poll; stamps t_end when @stamp. The
 * process exits 3 when the arena cannot be opened, 4 when a poll fails. */
static void consume(const char *name, sc_ring_fn cb, void *ctx, const uint64_t *count, uint64_t want, int how,
		    int stamp)
{
	struct sc_arena *ar;
	if (sc_arena_open(name, &ar))
		_exit(3);
	unsigned spins = 0, pauses = 0;
	while (*count < want) {
		int got = sc_ring_poll(ar, cb, ctx, BURST);
		if (got < 0)
			_exit(4);
		if (got)
			pauses = 0;
		else if (how == IDLE_BACKOFF)
			backoff(&pauses, &spins);
		else
			idle(&spins);
	}
	if (stamp)
		sh->t_end = cli_now();
	sc_ring_consumer_close(ar);
	sc_arena_close(ar);
}

/* ---- the commit rings ---- */

struct ring_arg {
	const char *name;
	uint32_t ntokens, bulk;
	uint64_t n;
};

static void ring_producer(void *v)
{
	struct ring_arg *a = v;
	struct sc_arena *ar;
	struct sc_ring *r = producer_open(a->name, &ar);
	int32_t toks[256];
	for (uint32_t j = 0; j < a->ntokens; j++)
		toks[j] = (int32_t)j;
	struct sc_commit c[SC_RING_BULK_MAX];
	for (uint32_t k = 0; k < a->bulk; k++)
		c[k] = (struct sc_commit){ .request_id = 1, .session_id = 2, .token_count = a->ntokens, .tokens = toks };
	unsigned spins = 0;
	for (uint64_t i = 0; i < a->n; i += a->bulk) {
		for (uint32_t k = 0; k < a->bulk; k++)
			c[k].generated_token_count = (i + k + 1) * a->ntokens;
		if (a->bulk == 1) {
			while (sc_ring_try_submit(r, c) == -EAGAIN)
				idle(&spins);
		} else {
			while (sc_ring_try_submit_bulk(r, c, a->bulk) == -EAGAIN)
				idle(&spins);
		}
	}
	producer_close(r, ar);
}

struct cons_state {
	uint64_t n, expect, sum;
};

static int ring_cb(const struct sc_commit *c, void *ctx)
{
	struct cons_state *s = ctx;
	if (c->seq != ++s->expect)
		atomic_fetch_add(&sh->bad, 1);
	s->sum += sum_tokens(c->tokens, c->token_count);
	s->n++;
	return 0;
}

static void ring_consumer(void *v)
{
	struct ring_arg *a = v;
	struct cons_state s = { 0, 0, 0 };
	consume(a->name, ring_cb, &s, &s.n, a->n, IDLE_BACKOFF, 1);
	sh->sink += s.sum;
}

/* ---- the batcher ---- */

struct batch_arg {
	const char *name;
	uint64_t tokens;
};

static void batcher_producer(void *v)
{
	struct batch_arg *a = v;
	struct sc_arena *ar;
	struct sc_ring *r = producer_open(a->name, &ar);
	struct sc_batcher b;
	struct mallinfo2 m0 = mallinfo2();
	double t0 = cli_now(), waited = 0;
	uint64_t done = 0, req = 0;
	while (done < a->tokens) {
		sc_batcher_init(&b, r, ++req, 7);
		uint64_t t = 0;
		for (uint32_t k = 0; k < 4096 && done < a->tokens; k++, done++) {
			/* 1 us apart: emits are capacity-driven, one per 256 tokens. On -EAGAIN the token
			 * was taken unless the count did not move (the batcher was full): then wait for
			 * the consumer, and keep that wait out of the batcher's cost. */
			uint64_t before = sc_batcher_count(&b);
			t += 1000;
			if (sc_batcher_commit(&b, (int32_t)k, t) == -EAGAIN && sc_batcher_count(&b) == before) {
				double w0 = cli_now();
				unsigned spins = 0;
				while (sc_batcher_commit(&b, (int32_t)k, t) == -EAGAIN && sc_batcher_count(&b) == before)
					idle(&spins);
				waited += cli_now() - w0;
			}
		}
		if (sc_batcher_finish(&b, SC_COMMIT_FINISHED) == -EAGAIN) {
			double w0 = cli_now();
			unsigned spins = 0;
			while (sc_batcher_finish(&b, SC_COMMIT_FINISHED) == -EAGAIN)
				idle(&spins);
			waited += cli_now() - w0;
		}
	}
	double t1 = cli_now();
	struct mallinfo2 m1 = mallinfo2();
	sh->ns_per_token = (t1 - t0 - waited) * 1e9 / (double)a->tokens;
	sh->wall_ns_per_token = (t1 - t0) * 1e9 / (double)a->tokens;
	sh->heap_delta = (int64_t)(m1.uordblks - m0.uordblks) + (int64_t)(m1.hblkhd - m0.hblkhd);
	producer_close(r, ar);
	sh->t_end = cli_now();
}

static int batch_cb(const struct sc_commit *c, void *ctx)
{
	uint64_t *term = ctx;
	if (c->flags)
		(*term)++;
	return 0;
}

static void batcher_consumer(void *v)
{
	struct batch_arg *a = v;
	uint64_t term = 0; /* one terminal record per request of 4096 tokens */
	consume(a->name, batch_cb, &term, &term, (a->tokens + 4095) / 4096, IDLE_SPIN, 0);
}

/* ---- rte_ring ---- */

#ifdef HAVE_RTE_RING
static ssize_t (*p_memsize_elem)(unsigned int esize, unsigned int count);
static int (*p_ring_init)(struct rte_ring *r, const char *name, unsigned int count, unsigned int flags);

static int rte_load(void)
{
	static const char *libs[] = { "librte_ring.so", "librte_ring.so.23", "librte_ring.so.24", "librte_ring.so.25" };
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
		if (!h)
			continue;
		p_memsize_elem = (ssize_t(*)(unsigned int, unsigned int))dlsym(h, "rte_ring_get_memsize_elem");
		p_ring_init = (int (*)(struct rte_ring *, const char *, unsigned int, unsigned int))dlsym(h, "rte_ring_init");
		if (p_memsize_elem && p_ring_init)
			return 0;
	}
	return -1;
}

struct rte_arg {
	struct rte_ring *r;
	uint32_t esize, ntokens, bulk;
	uint64_t n;
};

static void fill_rec(struct brec *rec, const struct rte_arg *a, uint64_t seq)
{
	rec->len = a->esize;
	rec->flags = 0;
	rec->ntokens = a->ntokens;
	rec->gen = 1;
	rec->seq = seq;
	rec->request_id = 1;
	rec->session_id = 2;
	rec->total = seq * a->ntokens;
	for (uint32_t j = 0; j < a->ntokens; j++)
		rec->tokens[j] = (int32_t)j;
}

/* The producer writes its records in place in the ring (zero-copy API), --bulk at a time. */
static void rte_producer(void *v)
{
	struct rte_arg *a = v;
	unsigned spins = 0;
	for (uint64_t i = 0; i < a->n; i += a->bulk) {
		struct rte_ring_zc_data zcd = { 0 };
		while (rte_ring_enqueue_zc_bulk_elem_start(a->r, a->esize, a->bulk, &zcd, NULL) != a->bulk)
			idle(&spins);
		for (uint32_t k = 0; k < a->bulk; k++) {
			uint8_t *slot = k < zcd.n1 ? (uint8_t *)zcd.ptr1 + (size_t)k * a->esize
						   : (uint8_t *)zcd.ptr2 + (size_t)(k - zcd.n1) * a->esize;
			fill_rec((struct brec *)(void *)slot, a, i + k + 1);
		}
		rte_ring_enqueue_zc_elem_finish(a->r, a->bulk);
	}
}

/* The consumer reads bursts in place (zero-copy API) and then gives the slots back. */
static void rte_consumer(void *v)
{
	struct rte_arg *a = v;
	uint64_t n = 0, sum = 0;
	unsigned spins = 0, pauses = 0;
	while (n < a->n) {
		struct rte_ring_zc_data zcd = { 0 };
		unsigned got = rte_ring_dequeue_zc_burst_elem_start(a->r, a->esize, BURST, &zcd, NULL);
		if (!got) {
			backoff(&pauses, &spins);
			continue;
		}
		pauses = 0;
		for (unsigned i = 0; i < got; i++) {
			const uint8_t *slot = i < zcd.n1 ? (const uint8_t *)zcd.ptr1 + (size_t)i * a->esize
							 : (const uint8_t *)zcd.ptr2 + (size_t)(i - zcd.n1) * a->esize;
			const struct brec *rec = (const struct brec *)(const void *)slot;
			if (rec->seq != ++n)
				atomic_fetch_add(&sh->bad, 1);
			sum += sum_tokens(rec->tokens, rec->ntokens);
		}
		rte_ring_dequeue_zc_elem_finish(a->r, got);
	}
	sh->t_end = cli_now();
	sh->sink += sum;
}

static struct rte_ring *rte_make(uint32_t esize, uint32_t *count_out, size_t *bytes_out)
{
	uint32_t count = 1;
	while (count * esize < RING_BYTES)
		count <<= 1; /* the same bytes as our ring (rounded up to a power of two of elements) */
	ssize_t sz = p_memsize_elem(esize, count);
	if (sz < 0)
		return NULL;
	void *m = mmap(NULL, (size_t)sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if (p_ring_init(m, "sc_bench", count, RING_F_SP_ENQ | RING_F_SC_DEQ)) {
		munmap(m, (size_t)sz);
		return NULL;
	}
	*count_out = count;
	*bytes_out = (size_t)sz;
	return m;
}
#endif

/* ---- pipe ---- */

struct pipe_arg {
	int fd[2];
	uint32_t esize, ntokens, bulk;
	uint64_t n;
};

/* --bulk records per write(), as ours publishes --bulk per call */
static void pipe_producer(void *v)
{
	struct pipe_arg *a = v;
	close(a->fd[0]);
	uint8_t *buf = calloc(a->bulk, a->esize);
	for (uint32_t k = 0; k < a->bulk; k++) {
		struct brec *rec = (struct brec *)(void *)(buf + (size_t)k * a->esize);
		rec->len = a->esize;
		rec->ntokens = a->ntokens;
		for (uint32_t j = 0; j < a->ntokens; j++)
			rec->tokens[j] = (int32_t)j;
	}
	for (uint64_t i = 0; i < a->n; i += a->bulk) {
		for (uint32_t k = 0; k < a->bulk; k++) {
			struct brec *rec = (struct brec *)(void *)(buf + (size_t)k * a->esize);
			rec->seq = i + k + 1;
			rec->total = (i + k + 1) * a->ntokens;
		}
		size_t len = (size_t)a->bulk * a->esize, off = 0;
		while (off < len) {
			ssize_t w = write(a->fd[1], buf + off, len - off);
			if (w <= 0)
				_exit(5);
			off += (size_t)w;
		}
	}
	close(a->fd[1]);
	free(buf);
}

static void pipe_consumer(void *v)
{
	struct pipe_arg *a = v;
	close(a->fd[1]);
	size_t cap = 64u << 10, have = 0;
	uint8_t *buf = malloc(cap);
	uint64_t n = 0, sum = 0;
	while (n < a->n) {
		ssize_t got = read(a->fd[0], buf + have, cap - have);
		if (got <= 0)
			_exit(5);
		have += (size_t)got;
		size_t off = 0;
		while (have - off >= a->esize) {
			struct brec rh;
			memcpy(&rh, buf + off, sizeof(rh));
			if (rh.seq != ++n)
				atomic_fetch_add(&sh->bad, 1);
			sum += sum_tokens((const int32_t *)(const void *)(buf + off + 48), a->ntokens);
			off += a->esize;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
	sh->t_end = cli_now();
	free(buf);
	sh->sink += sum;
}

static double pipe_run(uint32_t ntokens, uint64_t n, uint32_t bulk)
{
	struct pipe_arg a = { .esize = rec_bytes(ntokens), .ntokens = ntokens, .bulk = bulk, .n = n };
	if (pipe(a.fd))
		return -1;
	fcntl(a.fd[1], F_SETPIPE_SZ, (int)RING_BYTES); /* the same buffering as our ring */
	double t = run_pair(pipe_producer, pipe_consumer, &a);
	close(a.fd[0]);
	close(a.fd[1]);
	return t;
}

/* ---- commit-to-visible latency and the idle consumer's CPU ---- */

#define LAT_N 20000
static uint64_t *lat;  /* LAT_N tick counts, shared with the consumer process */

struct lat_arg {
	const char *name;
	uint64_t n;
};

static void lat_producer(void *v)
{
	struct lat_arg *a = v;
	struct sc_arena *ar;
	struct sc_ring *r = producer_open(a->name, &ar);
	int32_t toks[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint64_t gap = 0;
	{ /* ~20 us in ticks */
		double t0 = cli_now();
		uint64_t c0 = __rdtsc();
		while (cli_now() - t0 < 0.01)
			;
		gap = (__rdtsc() - c0) / 500;
	}
	for (uint64_t i = 0; i < a->n; i++) {
		uint64_t until = __rdtsc() + gap;
		while (__rdtsc() < until)
			cpu_relax();
		struct sc_commit c = { .request_id = 0, .session_id = 2, .token_count = 8, .tokens = toks,
				       .generated_token_count = (i + 1) * 8 };
		_mm_lfence();
		c.request_id = __rdtsc();
		while (sc_ring_try_submit(r, &c) == -EAGAIN)
			cpu_relax();
	}
	producer_close(r, ar);
}

static int lat_cb(const struct sc_commit *c, void *ctx)
{
	uint64_t *n = ctx;
	_mm_lfence();
	uint64_t now = __rdtsc();
	if (*n < LAT_N)
		lat[*n] = now - c->request_id;
	(*n)++;
	return 0;
}

static void lat_consumer(void *v)
{
	struct lat_arg *a = v;
	uint64_t n = 0;
	consume(a->name, lat_cb, &n, &n, a->n, IDLE_BACKOFF, 1);
}

/* The polling consumer with nothing to deliver, for @secs: its CPU share (0..1), or < 0. */
static double idle_cpu(const char *name, double secs)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *ar;
		if (sc_arena_open(name, &ar))
			_exit(3);
		unsigned spins = 0, pauses = 0;
		uint64_t n = 0;
		double end = cli_now() + secs;
		while (cli_now() < end) {
			int got = sc_ring_poll(ar, lat_cb, &n, BURST);
			if (got < 0)
				_exit(4);
			if (!got)
				backoff(&pauses, &spins);
			else
				pauses = 0;
		}
		sc_ring_consumer_close(ar);
		sc_arena_close(ar);
		_exit(0);
	}
	if (pid < 0)
		return -1;
	double t0 = cli_now();
	int st;
	struct rusage ru;
	if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
		     (double)ru.ru_stime.tv_usec * 1e-6;
	return cpu / (cli_now() - t0);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench ring [--runs N] [--bulk N]\n\n"
		   "Commit rings vs DPDK rte_ring (SP/SC, zero-copy API, element = our record) and a pipe (the same\n"
		   "number of records per write), producer and consumer in separate processes, records of 8 and\n"
		   "256 tokens, every token read by every consumer; commit-to-visible latency; the idle consumer's\n"
		   "CPU; the batcher's cost per token. Records are published --bulk at a time (default 16), and again\n"
		   "one at a time (the *_single_* metrics). Each value is the median of N runs (default 7, --quick 3);\n"
		   "a ratio is the median of the per-run ratios (the transports alternate within each run).\n");
}

/* One run of bench ring: its options, the arena of the commit rings, DPDK or why not, and the
 * status (EXIT_OK until something fails; the phases after a failure do nothing). */
struct ringrun {
	int runs;
	uint32_t bulk;
	char name[64];
	struct sc_arena *arena;
	int have_rte;
	const char *rte_why;
	int status;
};

static int parse(int argc, char **argv, struct ringrun *x)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "bulk", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;
	uint64_t v;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "r:b:h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (cli_parse_u64(optarg, 101, &v) || !v)
				return cli_usage_error("bench ring", "--runs takes 1..101, not '%s'", optarg);
			x->runs = (int)v;
			break;
		case 'b':
			if (cli_parse_u64(optarg, SC_RING_BULK_MAX, &v) || !v)
				return cli_usage_error("bench ring", "--bulk takes 1..%u, not '%s'", SC_RING_BULK_MAX, optarg);
			x->bulk = (uint32_t)v;
			break;
		case 'h': usage(stdout); return -1;
		default: return cli_usage_error("bench ring", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return cli_usage_error("bench ring", "unexpected argument '%s'", argv[optind]);
	return 0;
}

/* The shared pages, the arena with four commit rings, and DPDK's librte_ring when we have it. */
static int setup(struct ringrun *x)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	lat = mmap(NULL, LAT_N * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || lat == MAP_FAILED)
		return cli_fail("bench ring", -errno, "mmap");
	snprintf(x->name, sizeof(x->name), "bench-ring-%d", (int)getpid());
	struct sc_arena_opts ao = { .size_bytes = 64u << 20, .huge = SC_HUGE_AUTO, .ring_count = 4, .ring_bytes = RING_BYTES };
	int rc = sc_arena_create(x->name, &ao, &x->arena);
	if (rc)
		return cli_fail("bench ring", rc, "creating arena %s", x->name);
	x->rte_why = "built without DPDK's headers (libdpdk-dev)";
#ifdef HAVE_RTE_RING
	x->have_rte = rte_load() == 0;
	if (!x->have_rte)
		x->rte_why = "librte_ring not found (dlopen)";
	else
		bench_env("ring", "dpdk", "%s (rte_ring zero-copy API, dlopen'ed librte_ring)", SC_DPDK_VERSION);
#endif
	return 0;
}

/* The batcher's cost per token, and whether the heap grows. */
static void bench_batcher(struct ringrun *x)
{
	int runs = x->runs;
	double *ns = calloc((size_t)runs, sizeof(double)), *wall = calloc((size_t)runs, sizeof(double)),
	       worst_heap = 0;
	struct batch_arg ba = { x->name, bench_quick ? 4000000 : 16000000 };
	for (int i = 0; i < runs; i++) {
		if (run_pair(batcher_producer, batcher_consumer, &ba) < 0) {
			x->status = cli_fail("bench ring", 0, "batcher run failed");
			break;
		}
		ns[i] = sh->ns_per_token;
		wall[i] = sh->wall_ns_per_token;
		if ((double)sh->heap_delta > worst_heap)
			worst_heap = (double)sh->heap_delta;
	}
	if (x->status == EXIT_OK) {
		bench_stat("ring", "batcher_ns_per_token", "ns", ns, runs, NULL);
		bench_stat("ring", "batcher_wall_ns_per_token", "ns", wall, runs, NULL);
		bench_value("ring", "batcher_heap_growth", worst_heap, "bytes", NULL);
	}
	free(wall);
	free(ns);
}

/* Commit-to-visible latency, then the idle consumer. */
static void bench_latency(struct ringrun *x)
{
	const char *name = x->name;
	double t0 = cli_now();
	uint64_t c0 = __rdtsc();
	while (cli_now() - t0 < 0.05)
		;
	double ns_tick = (cli_now() - t0) * 1e9 / (double)(__rdtsc() - c0);
	struct lat_arg la = { name, LAT_N };
	if (run_pair(lat_producer, lat_consumer, &la) < 0) {
		x->status = cli_fail("bench ring", 0, "latency run failed");
	} else {
		qsort(lat, LAT_N, sizeof(uint64_t), bench_cmp_u64);
		bench_value("ring", "commit_to_visible_p50_ns", (double)lat[LAT_N / 2] * ns_tick, "ns",
			    "one 8-token record every ~20 us, TSC stamped at submit, read at delivery by a polling consumer");
		bench_value("ring", "commit_to_visible_p99_ns", (double)lat[LAT_N * 99 / 100] * ns_tick, "ns", NULL);
	}
	double cpu = idle_cpu(name, bench_quick ? 0.3 : 1.0);
	if (cpu >= 0)
		bench_value("ring", "consumer_idle_cpu", cpu, "CPU fraction",
			    "the benchmark's polling consumer (sc_ring_poll, exponential pause backoff to 64, sched_yield "
			    "every 256 empty polls) with nothing to deliver");
	else
		bench_missing("ring", "consumer_idle_cpu", "the idle consumer failed");
}

/* The rows of records of @nt tokens: per run m[0] ours bulk, [1] rte bulk, [2] ours single,
 * [3] rte single, [4] pipe (bulk); ratio[0..3] ours bulk / rte, / pipe, ours single / rte, / pipe. */
static void report_transfer(const struct ringrun *x, uint32_t nt, double **m, double **ratio)
{
	int runs = x->runs, have_rte = x->have_rte;
	uint32_t bulk = x->bulk;
	const char *rte_why = x->rte_why;
	char k[80], bl[300];
	snprintf(k, sizeof(k), "records_%u_per_s", nt);
	bench_stat("ring", k, "records/s", m[0], runs, NULL);
	snprintf(k, sizeof(k), "rte_ring_records_%u_per_s", nt);
	snprintf(bl, sizeof(bl), "DPDK rte_ring SP/SC zero-copy API: %u records written in place per enqueue, bursts of "
		 "64 read in place, every token read; ours: sc_ring_try_submit_bulk of %u / sc_ring_poll of 64", bulk, bulk);
	if (have_rte)
		bench_stat("ring", k, "records/s", m[1], runs, NULL);
	else
		bench_missing("ring", k, "%s", rte_why);
	snprintf(k, sizeof(k), "records_%u_vs_rte_ring", nt);
	if (have_rte)
		bench_stat("ring", k, "ratio", ratio[0], runs, bl);
	else
		bench_missing("ring", k, "%s", rte_why);
	snprintf(k, sizeof(k), "pipe_records_%u_per_s", nt);
	bench_stat("ring", k, "records/s", m[4], runs, NULL);
	snprintf(bl, sizeof(bl), "a pipe (F_SETPIPE_SZ 256 KiB, as our ring), %u records per write(), 64 KiB reads, "
		 "every token read", bulk);
	snprintf(k, sizeof(k), "records_%u_vs_pipe", nt);
	bench_stat("ring", k, "ratio", ratio[1], runs, bl);
	snprintf(k, sizeof(k), "records_%u_single_per_s", nt);
	bench_stat("ring", k, "records/s", m[2], runs, NULL);
	snprintf(k, sizeof(k), "records_%u_single_vs_rte_ring", nt);
	if (have_rte)
		bench_stat("ring", k, "ratio", ratio[2], runs, "rte_ring zero-copy, one record per enqueue");
	else
		bench_missing("ring", k, "%s", rte_why);
	snprintf(k, sizeof(k), "records_%u_single_vs_pipe", nt);
	bench_stat("ring", k, "ratio", ratio[3], runs, "the pipe above (batched writes) vs ours one record per publish");
}

/* Records of @nt tokens: ours (bulk, then one at a time), rte_ring the same, and a pipe, each run. */
static void bench_transfer(struct ringrun *x, uint32_t nt)
{
	int runs = x->runs;
	uint32_t bulk = x->bulk, esize = rec_bytes(nt);
	const char *name = x->name;
	uint64_t n = nt == 8 ? 2000000 : 400000, np = nt == 8 ? 1000000 : 200000;
	if (bench_quick)
		n /= 4, np /= 4;
	n -= n % bulk;
	np -= np % bulk;
	/* per run: [0] ours bulk, [1] rte bulk, [2] ours single, [3] rte single, [4] pipe (bulk) */
	double *m[5], *ratio[4];
	for (int k = 0; k < 5; k++)
		m[k] = calloc((size_t)runs, sizeof(double));
	for (int k = 0; k < 4; k++)
		ratio[k] = calloc((size_t)runs, sizeof(double));
#ifdef HAVE_RTE_RING
	uint32_t count = 0;
	size_t rbytes = 0;
	struct rte_ring *rr = x->have_rte ? rte_make(esize, &count, &rbytes) : NULL;
	if (x->have_rte && !rr) {
		x->rte_why = "rte_ring_init failed";
		x->have_rte = 0;
	}
	int have_rte = x->have_rte;
#endif
	(void)esize;
	for (int i = 0; i < runs && x->status == EXIT_OK; i++) {
		for (int var = 0; var < 2 && x->status == EXIT_OK; var++) {
			uint32_t b = var == 1 ? 1 : bulk;
			struct ring_arg ra = { name, nt, b, n };
			double t = run_pair(ring_producer, ring_consumer, &ra);
			if (t <= 0)
				x->status = cli_fail("bench ring", 0, "ring run failed (lost or reordered records)");
			m[2 * var][i] = (double)n / t;
#ifdef HAVE_RTE_RING
			if (have_rte) {
				p_ring_init(rr, "sc_bench", count, RING_F_SP_ENQ | RING_F_SC_DEQ);
				struct rte_arg qa = { rr, esize, nt, b, n };
				t = run_pair(rte_producer, rte_consumer, &qa);
				if (t <= 0)
					x->status = cli_fail("bench ring", 0, "rte_ring run failed");
				m[2 * var + 1][i] = (double)n / t;
				ratio[2 * var][i] = m[2 * var][i] / m[2 * var + 1][i];
			}
#endif
		}
		double t = pipe_run(nt, np, bulk);
		if (t <= 0)
			x->status = cli_fail("bench ring", 0, "pipe run failed");
		m[4][i] = (double)np / t;
		ratio[1][i] = m[0][i] / m[4][i];
		ratio[3][i] = m[2][i] / m[4][i];
	}
	if (x->status == EXIT_OK)
		report_transfer(x, nt, m, ratio);
#ifdef HAVE_RTE_RING
	if (rr)
		munmap(rr, rbytes);
#endif
	for (int k = 0; k < 5; k++)
		free(m[k]);
	for (int k = 0; k < 4; k++)
		free(ratio[k]);
}

int bench_ring(int argc, char **argv)
{
	struct ringrun x = { .runs = bench_quick ? 3 : 7, .bulk = 16, .status = EXIT_OK };
	int rc = parse(argc, argv, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((rc = setup(&x)))
		return rc;
	bench_batcher(&x);
	if (x.status == EXIT_OK)
		bench_latency(&x);
	static const uint32_t sizes[2] = { 8, 256 };
	for (int s = 0; s < 2 && x.status == EXIT_OK; s++)
		bench_transfer(&x, sizes[s]);
	sc_arena_close(x.arena);
	sc_arena_destroy(NULL, x.name);
	munmap(sh, sizeof(*sh));
	munmap(lat, LAT_N * sizeof(uint64_t));
	return x.status;
}
