/*
 * tools/bench_ring.c — `stagecache bench ring [--json] [--quick] [--runs N]`.
 *
 * Producer and consumer run in two forked processes (pinned to CPUs 0 and 1 when there are
 * two), moving the same records three ways in the same run:
 *   - the commit rings: sc_ring_try_submit_bulk (--bulk records per publish, default 16) and
 *     sc_ring_try_submit (one per publish) / sc_ring_poll (bursts of 64);
 *   - DPDK rte_ring, _elem API in SP/SC mode, element size = our record size, enqueue_bulk of the
 *     same count as we publish, dequeue bursts of 64, the ring in MAP_SHARED memory
 *     initialised with rte_ring_get_memsize_elem + rte_ring_init (looked up with dlopen, so the
 *     CLI does not link DPDK; the inline enqueue/dequeue code needs DPDK's headers at build time);
 *   - a pipe, one record per write().
 * Records carry 8 tokens (a typical decode batch, 128 bytes) or 256 (a full batch, 1088 bytes).
 * Both consumers do the same work per record: check the sequence number and read two tokens (the
 * first and the last); the *_read_all_* rows repeat the bulk runs with every token read.
 * Every figure is the median of --runs runs, the three transports interleaved in each run; ratios
 * are medians of the per-run ratios. Spinning sides yield the CPU after 256 idle spins (the host
 * is shared) and idle consumers back off exponentially (up to 64 pauses), identically for both
 * ring transports.
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
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include "bench.h"

#if defined(__has_include)
#if __has_include(<rte_ring_elem.h>)
#include <rte_ring.h>
#include <rte_ring_elem.h>
#define HAVE_RTE_RING 1
#endif
#endif

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() do { } while (0)
#endif

#define BURST 64

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

/* What each consumer reads of a record's tokens: by default the first and the last (ours in
 * place, zero-copy; rte_ring's and the pipe's from the copy their APIs always make), or, for the
 * *_read_all_* rows, every token (the bytes then cross to the consumer's core on both sides). */
static int read_all;

static inline uint64_t sum_tokens(const int32_t *t, uint32_t n)
{
	if (!read_all)
		return (uint64_t)(uint32_t)t[0] + (uint32_t)t[n - 1];
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
	sh->t_start = bench_now();
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
	struct sc_ring *r;
	if (sc_arena_open(a->name, &ar) || sc_ring_open(ar, &r))
		_exit(3);
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
	sc_ring_close(r);
	sc_arena_close(ar);
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
	struct sc_arena *ar;
	if (sc_arena_open(a->name, &ar))
		_exit(3);
	struct cons_state s = { 0, 0, 0 };
	unsigned spins = 0, pauses = 0;
	while (s.n < a->n) {
		int got = sc_ring_poll(ar, ring_cb, &s, BURST);
		if (got < 0)
			_exit(4);
		if (!got)
			backoff(&pauses, &spins);
		else
			pauses = 0;
	}
	sh->t_end = bench_now();
	sh->sink += s.sum;
	sc_ring_consumer_close(ar);
	sc_arena_close(ar);
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
	struct sc_ring *r;
	if (sc_arena_open(a->name, &ar) || sc_ring_open(ar, &r))
		_exit(3);
	struct sc_batcher b;
	struct mallinfo2 m0 = mallinfo2();
	double t0 = bench_now(), waited = 0;
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
				double w0 = bench_now();
				unsigned spins = 0;
				while (sc_batcher_commit(&b, (int32_t)k, t) == -EAGAIN && sc_batcher_count(&b) == before)
					idle(&spins);
				waited += bench_now() - w0;
			}
		}
		if (sc_batcher_finish(&b, SC_COMMIT_FINISHED) == -EAGAIN) {
			double w0 = bench_now();
			unsigned spins = 0;
			while (sc_batcher_finish(&b, SC_COMMIT_FINISHED) == -EAGAIN)
				idle(&spins);
			waited += bench_now() - w0;
		}
	}
	double t1 = bench_now();
	struct mallinfo2 m1 = mallinfo2();
	sh->ns_per_token = (t1 - t0 - waited) * 1e9 / (double)a->tokens;
	sh->wall_ns_per_token = (t1 - t0) * 1e9 / (double)a->tokens;
	sh->heap_delta = (int64_t)(m1.uordblks - m0.uordblks) + (int64_t)(m1.hblkhd - m0.hblkhd);
	sc_ring_close(r);
	sc_arena_close(ar);
	sh->t_end = bench_now();
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
	struct sc_arena *ar;
	if (sc_arena_open(a->name, &ar))
		_exit(3);
	uint64_t term = 0, want = (a->tokens + 4095) / 4096;
	unsigned spins = 0;
	while (term < want) {
		int got = sc_ring_poll(ar, batch_cb, &term, BURST);
		if (got < 0)
			_exit(4);
		if (!got)
			idle(&spins);
	}
	sc_ring_consumer_close(ar);
	sc_arena_close(ar);
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

static void rte_producer(void *v)
{
	struct rte_arg *a = v;
	uint8_t *buf = aligned_alloc(64, (size_t)a->esize * a->bulk);
	memset(buf, 0, (size_t)a->esize * a->bulk);
	for (uint32_t k = 0; k < a->bulk; k++) {
		struct brec *rec = (struct brec *)(buf + (size_t)k * a->esize);
		rec->len = a->esize;
		rec->ntokens = a->ntokens;
		rec->request_id = 1;
		rec->session_id = 2;
		for (uint32_t j = 0; j < a->ntokens; j++)
			rec->tokens[j] = (int32_t)j;
	}
	unsigned spins = 0;
	for (uint64_t i = 0; i < a->n; i += a->bulk) {
		for (uint32_t k = 0; k < a->bulk; k++) {
			struct brec *rec = (struct brec *)(buf + (size_t)k * a->esize);
			rec->seq = i + k + 1;
			rec->total = (i + k + 1) * a->ntokens;
		}
		while (rte_ring_sp_enqueue_bulk_elem(a->r, buf, a->esize, a->bulk, NULL) != a->bulk)
			idle(&spins);
	}
	free(buf);
}

static void rte_consumer(void *v)
{
	struct rte_arg *a = v;
	uint8_t *buf = aligned_alloc(64, (size_t)a->esize * BURST);
	uint64_t n = 0, sum = 0;
	unsigned spins = 0, pauses = 0;
	while (n < a->n) {
		unsigned got = rte_ring_sc_dequeue_burst_elem(a->r, buf, a->esize, BURST, NULL);
		if (!got) {
			backoff(&pauses, &spins);
			continue;
		}
		pauses = 0;
		for (unsigned i = 0; i < got; i++) {
			const struct brec *rec = (const struct brec *)(buf + (size_t)i * a->esize);
			if (rec->seq != ++n)
				atomic_fetch_add(&sh->bad, 1);
			sum += sum_tokens(rec->tokens, rec->ntokens);
		}
	}
	sh->t_end = bench_now();
	free(buf);
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
	uint32_t esize, ntokens;
	uint64_t n;
};

static void pipe_producer(void *v)
{
	struct pipe_arg *a = v;
	close(a->fd[0]);
	struct brec *rec = calloc(1, a->esize);
	rec->len = a->esize;
	rec->ntokens = a->ntokens;
	for (uint32_t j = 0; j < a->ntokens; j++)
		rec->tokens[j] = (int32_t)j;
	for (uint64_t i = 0; i < a->n; i++) {
		rec->seq = i + 1;
		rec->total = (i + 1) * a->ntokens;
		if (write(a->fd[1], rec, a->esize) != (ssize_t)a->esize)
			_exit(5);
	}
	close(a->fd[1]);
	free(rec);
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
	sh->t_end = bench_now();
	free(buf);
	sh->sink += sum;
}

static double pipe_run(uint32_t ntokens, uint64_t n)
{
	struct pipe_arg a = { .esize = rec_bytes(ntokens), .ntokens = ntokens, .n = n };
	if (pipe(a.fd))
		return -1;
	fcntl(a.fd[1], F_SETPIPE_SZ, (int)RING_BYTES); /* the same buffering as our ring */
	double t = run_pair(pipe_producer, pipe_consumer, &a);
	close(a.fd[0]);
	close(a.fd[1]);
	return t;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench ring [--json] [--quick] [--runs N] [--bulk N]\n\n"
		   "Commit rings vs DPDK rte_ring (SP/SC, _elem API, element = our record) and a pipe (one record\n"
		   "per write), producer and consumer in separate processes, records of 8 and 256 tokens; and\n"
		   "the batcher's cost per token. Records are published --bulk at a time (default 16:\n"
		   "sc_ring_try_submit_bulk vs rte_ring_sp_enqueue_bulk_elem of the same count), and again one\n"
		   "at a time (the *_single_* metrics). Prints JSON lines {\"bench\":\"ring\",\"metric\",\"value\",\n"
		   "\"unit\"[,\"baseline\"]}; each value is the median of N runs (default 7, --quick: 5 runs of\n"
		   "fewer records); a ratio is the median of the per-run ratios (the transports alternate\n"
		   "within each run, so they share the host's noise).\n");
}

int bench_ring(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ "runs", required_argument, NULL, 'r' },
		{ "bulk", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int quick = 0, runs = 7, c;
	uint32_t bulk = 16;
	uint64_t v;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "jqr:b:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': break; /* JSON lines are the only output */
		case 'q': quick = 1; runs = 5; break;
		case 'r':
			if (cli_parse_u64(optarg, 101, &v) || !v)
				return cli_usage_error("bench", "--runs needs 1..101");
			runs = (int)v;
			break;
		case 'b':
			if (cli_parse_u64(optarg, SC_RING_BULK_MAX, &v) || !v)
				return cli_usage_error("bench", "--bulk needs 1..%u", SC_RING_BULK_MAX);
			bulk = (uint32_t)v;
			break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("bench", "unknown option '%s' for bench ring", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return cli_usage_error("bench", "unexpected argument '%s'", argv[optind]);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return cli_fail("bench", -errno, "mmap");
	char name[64];
	snprintf(name, sizeof(name), "bench-ring-%d", (int)getpid());
	struct sc_arena_opts ao = { .size_bytes = 64u << 20, .huge = SC_HUGE_AUTO, .ring_count = 4, .ring_bytes = RING_BYTES };
	struct sc_arena *arena;
	int rc = sc_arena_create(name, &ao, &arena);
	if (rc)
		return cli_fail("bench", rc, "creating arena %s", name);
	int status = EXIT_OK;
	int have_rte = 0;
#ifdef HAVE_RTE_RING
	have_rte = rte_load() == 0;
	if (!have_rte)
		fprintf(stderr, "stagecache bench ring: librte_ring not found (dlopen): rte_ring baseline skipped\n");
#else
	fprintf(stderr, "stagecache bench ring: built without DPDK headers: rte_ring baseline skipped (compile "
			"tools/bench_ring.c with $(pkg-config --cflags libdpdk))\n");
#endif
	/* the batcher */
	{
		double *ns = calloc((size_t)runs, sizeof(double)), *wall = calloc((size_t)runs, sizeof(double)),
		       worst_heap = 0;
		struct batch_arg ba = { name, quick ? 4000000 : 16000000 };
		for (int i = 0; i < runs; i++) {
			if (run_pair(batcher_producer, batcher_consumer, &ba) < 0) {
				status = cli_fail("bench", 0, "batcher run failed");
				break;
			}
			ns[i] = sh->ns_per_token;
			wall[i] = sh->wall_ns_per_token;
			if ((double)sh->heap_delta > worst_heap)
				worst_heap = (double)sh->heap_delta;
		}
		if (status == EXIT_OK) {
			/* the batcher's own cost (ring-full waits for the consumer excluded), and wall time */
			bench_value("ring", "batcher_ns_per_token", bench_median(ns, runs), "ns", NULL);
			bench_value("ring", "batcher_wall_ns_per_token", bench_median(wall, runs), "ns", NULL);
			bench_value("ring", "batcher_heap_growth", worst_heap, "bytes", NULL);
		}
		free(wall);
		free(ns);
	}
	static const uint32_t sizes[2] = { 8, 256 };
	for (int s = 0; s < 2 && status == EXIT_OK; s++) {
		uint32_t nt = sizes[s], esize = rec_bytes(nt);
		uint64_t n = nt == 8 ? 2000000 : 400000, np = nt == 8 ? 300000 : 150000;
		if (quick)
			n /= 4, np /= 4;
		n -= n % bulk;
		/* per run: [0] ours bulk, [1] rte bulk, [2] ours single, [3] rte single, [4] pipe,
		 * [5] ours bulk reading every token, [6] rte bulk reading every token */
		double *m[7], *ratio[5];
		for (int k = 0; k < 7; k++)
			m[k] = calloc((size_t)runs, sizeof(double));
		for (int k = 0; k < 5; k++)
			ratio[k] = calloc((size_t)runs, sizeof(double));
#ifdef HAVE_RTE_RING
		uint32_t count = 0;
		size_t rbytes = 0;
		struct rte_ring *rr = have_rte ? rte_make(esize, &count, &rbytes) : NULL;
		if (have_rte && !rr) {
			fprintf(stderr, "stagecache bench ring: rte_ring_init failed: rte_ring baseline skipped\n");
			have_rte = 0;
		}
#endif
		for (int i = 0; i < runs && status == EXIT_OK; i++) {
			/* variants: 0 bulk, 1 one record per publish, 2 bulk with every token read */
			for (int var = 0; var < 3 && status == EXIT_OK; var++) {
				uint32_t b = var == 1 ? 1 : bulk;
				int mo = var == 2 ? 5 : 2 * var; /* where ours goes in m[]; rte_ring's is next */
				read_all = var == 2;
				struct ring_arg ra = { name, nt, b, n };
				double t = run_pair(ring_producer, ring_consumer, &ra);
				if (t <= 0)
					status = cli_fail("bench", 0, "ring run failed (lost or reordered records)");
				m[mo][i] = (double)n / t;
#ifdef HAVE_RTE_RING
				if (have_rte) {
					p_ring_init(rr, "sc_bench", count, RING_F_SP_ENQ | RING_F_SC_DEQ);
					struct rte_arg qa = { rr, esize, nt, b, n };
					t = run_pair(rte_producer, rte_consumer, &qa);
					if (t <= 0)
						status = cli_fail("bench", 0, "rte_ring run failed");
					m[mo + 1][i] = (double)n / t;
					ratio[var == 2 ? 4 : 2 * var][i] = m[mo][i] / m[mo + 1][i];
				}
#endif
			}
			read_all = 0;
			double t = pipe_run(nt, np);
			if (t <= 0)
				status = cli_fail("bench", 0, "pipe run failed");
			m[4][i] = (double)np / t;
			ratio[1][i] = m[0][i] / m[4][i];
			ratio[3][i] = m[2][i] / m[4][i];
		}
		if (status == EXIT_OK) {
			char k[80], bl[32];
			double o = bench_median(m[0], runs);
			snprintf(bl, sizeof(bl), "rte_ring_bulk_%u", bulk);
			snprintf(k, sizeof(k), "records_%u_per_s", nt);
			bench_value("ring", k, o, "records/s", NULL);
			snprintf(k, sizeof(k), "tokens_%u_per_s", nt);
			bench_value("ring", k, o * nt, "tokens/s", NULL);
			snprintf(k, sizeof(k), "bytes_%u_per_s", nt);
			bench_value("ring", k, o * esize, "bytes/s", NULL);
			if (have_rte) {
				snprintf(k, sizeof(k), "rte_ring_records_%u_per_s", nt);
				bench_value("ring", k, bench_median(m[1], runs), "records/s", NULL);
				snprintf(k, sizeof(k), "records_%u_vs_rte_ring", nt);
				bench_value("ring", k, bench_median(ratio[0], runs), "ratio", bl);
			}
			snprintf(k, sizeof(k), "pipe_records_%u_per_s", nt);
			bench_value("ring", k, bench_median(m[4], runs), "records/s", NULL);
			snprintf(k, sizeof(k), "records_%u_vs_pipe", nt);
			bench_value("ring", k, bench_median(ratio[1], runs), "ratio", "pipe");
			/* the same with one record per publish (sc_ring_try_submit / rte_ring bulk of 1) */
			snprintf(k, sizeof(k), "records_%u_single_per_s", nt);
			bench_value("ring", k, bench_median(m[2], runs), "records/s", NULL);
			if (have_rte) {
				snprintf(k, sizeof(k), "rte_ring_records_%u_single_per_s", nt);
				bench_value("ring", k, bench_median(m[3], runs), "records/s", NULL);
				snprintf(k, sizeof(k), "records_%u_single_vs_rte_ring", nt);
				bench_value("ring", k, bench_median(ratio[2], runs), "ratio", "rte_ring_bulk_1");
			}
			snprintf(k, sizeof(k), "records_%u_single_vs_pipe", nt);
			bench_value("ring", k, bench_median(ratio[3], runs), "ratio", "pipe");
			if (have_rte) {
				/* both consumers read every token: ours in place, rte_ring's from its copy */
				snprintf(k, sizeof(k), "records_%u_read_all_per_s", nt);
				bench_value("ring", k, bench_median(m[5], runs), "records/s", NULL);
				snprintf(k, sizeof(k), "records_%u_read_all_vs_rte_ring", nt);
				bench_value("ring", k, bench_median(ratio[4], runs), "ratio", "rte_ring_bulk_16, every token read");
			}
		}
#ifdef HAVE_RTE_RING
		if (rr)
			munmap(rr, rbytes);
#endif
		for (int k = 0; k < 7; k++)
			free(m[k]);
		for (int k = 0; k < 5; k++)
			free(ratio[k]);
	}
	sc_arena_close(arena);
	sc_arena_destroy(NULL, name);
	munmap(sh, sizeof(*sh));
	return status;
}
