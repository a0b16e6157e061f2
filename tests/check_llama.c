/*
 * tests/check_llama.c — a real inference engine shares the cache: llama.cpp workers
 * (examples/llama/sc-llama-worker, separate processes) restore each other's prefixes.
 *
 * The model is build/llama/models/tiny.gguf (4 layers, 256 wide, random weights; `make llama`
 * writes it). Each test starts workers as processes and speaks their line protocol.
 *
 * Tolerance: none for what the worker exports by default. A restored prefix followed by the same
 * decode must give bit-identical logits: the worker's batches stop at every block boundary, so a
 * worker that restores k blocks splits the rest of the prompt exactly as the worker that computed
 * everything, and llama.cpp's CPU path computes the same bits for the same batch split (the
 * threads split rows, not sums). Every such comparison is of the raw float32 logits of each
 * generated step (memcmp), and a failure reports the largest absolute difference.
 * The one documented tolerance: a state exported at a boundary passed while generating
 * (--export-generated) holds KV of tokens decoded one at a time, whose last bits differ from the
 * same tokens' in a prompt batch (other kernels, other sums, then rounding to the f16 cache). A
 * continuation from it stays within 1% of the largest logit (measured: 0.1%), checked below.
 *
 * Without the engine (the npm registry was not reachable when `make deps` ran) every test prints
 * "SKIP: ..." and returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"

#ifndef SC_LLAMA_WORKER
#define SC_LLAMA_WORKER "build/examples/llama/sc-llama-worker"
#define SC_LLAMA_MODELS "build/llama/models"
#define SC_LLAMA_GEN "examples/llama/gen-model.py"
#define SC_LLAMA_GGUF_PY "build/llama/gguf-py"
#define SC_PYTHON3 "/usr/bin/python3"
#define SC_LLAMA_PY "examples/llama/worker.py"
#define SC_LLAMA_ENGINE "build/examples/llama/libsc-llama-engine.so"
#define SC_PYTHONPATH "python"
#endif

#define WAIT_MS 180000 /* a loaded 2-core machine: a tiny-model request takes well under a second */

static char tiny[4096];

/* The engine, the worker and the model are all there; else print SKIP and return 0. */
static int have_engine(void)
{
	snprintf(tiny, sizeof(tiny), "%s/tiny.gguf", SC_LLAMA_MODELS);
	if (access(SC_LLAMA_WORKER, X_OK)) {
		sc_skip("llama: %s is not built: the llama.cpp engine is not installed (make deps fetches it "
			"from the npm registry; it was not reachable)", SC_LLAMA_WORKER);
		return 0;
	}
	if (access(tiny, R_OK)) {
		sc_skip("llama: no model %s (make llama writes it)", tiny);
		return 0;
	}
	return 1;
}

struct worker {
	pid_t pid;
	int in, out, err;      /* err: -1 unless captured */
	char buf[2][1 << 16];  /* what was read from out, from err */
	size_t len[2];
};

/* Start a worker: --model @model --threads 1 and @extra (NULL-terminated); its stderr is read
 * by the test when @capture_err, else discarded. */
static void worker_start_any(struct worker *w, const char *model, const char *const *extra, int capture_err, int py)
{
	int in[2], out[2], er[2];
	ck_assert(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0);
	if (capture_err)
		ck_assert(pipe2(er, O_CLOEXEC) == 0);
	else
		ck_assert((er[1] = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0 && (er[0] = -1) == -1);
	const char *argv[40] = { SC_LLAMA_WORKER, "--model", model, "--threads", "1" };
	int k = 5;
	if (py) { /* examples/llama/worker.py, the same loop through the Python bindings */
		const char *pa[] = { SC_PYTHON3, SC_LLAMA_PY, "--model", model, "--threads", "1", "--engine", SC_LLAMA_ENGINE };
		memcpy(argv, pa, sizeof(pa));
		k = 8;
	}
	for (int i = 0; extra && extra[i]; i++)
		argv[k++] = extra[i];
	argv[k] = NULL;
	w->pid = fork();
	ck_assert(w->pid >= 0);
	if (w->pid == 0) {
		setenv("PYTHONPATH", SC_PYTHONPATH, 1);
		setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(er[1], 2);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(er[1]);
	w->in = in[1], w->out = out[0], w->err = er[0], w->len[0] = w->len[1] = 0;
}

static void worker_start(struct worker *w, const char *model, const char *const *extra)
{
	worker_start_any(w, model, extra, 0, 0);
}

static void worker_start_err(struct worker *w, const char *model, const char *const *extra, int capture_err)
{
	worker_start_any(w, model, extra, capture_err, 0);
}

/* The next line from the worker's stdout (@fd == w->out) or stderr, waiting at most @ms for it:
 * a malloc'ed string, or NULL when the time ran out or the stream ended. */
static char *line_from(struct worker *w, int fd, int ms)
{
	int k = fd != w->out;
	char *buf = w->buf[k];
	size_t *len = &w->len[k];
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		char *nl = memchr(buf, '\n', *len);
		if (nl) {
			size_t n = (size_t)(nl - buf) + 1;
			char *s = strndup(buf, n - 1);
			memmove(buf, buf + n, *len - n);
			*len -= n;
			return s;
		}
		if (*len == sizeof(w->buf[0]))
			return NULL;
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return NULL;
		ssize_t r = read(fd, buf + *len, sizeof(w->buf[0]) - *len);
		if (r <= 0)
			return NULL;
		*len += (size_t)r;
	}
}

static void worker_ready(struct worker *w)
{
	char *l = line_from(w, w->out, WAIT_MS);
	ck_assert_msg(l && !strncmp(l, "ready ", 6), "waiting for the worker's ready line: got %s", l ? l : "nothing");
	free(l);
}

static void worker_stop(struct worker *w)
{
	int st;
	if (write(w->in, "quit\n", 5) != 5) { /* already gone: waitpid says how */
	}
	close(w->in);
	/* it exits at quit; bounded wait, then it is a failure */
	for (int i = 0; i < 3000 && waitpid(w->pid, &st, WNOHANG) == 0; i++)
		sc_test_pause_ms(10);
	if (kill(w->pid, 0) == 0 && waitpid(w->pid, &st, WNOHANG) == 0) {
		kill(w->pid, SIGKILL);
		waitpid(w->pid, &st, 0);
		ck_abort_msg("the worker did not exit within 30 s of quit");
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker exit status %d", st);
	close(w->out);
	if (w->err >= 0)
		close(w->err);
}

static void worker_send(struct worker *w, unsigned long long id, uint32_t ngen, const char *flags,
			const int32_t *tok, uint32_t n)
{
	size_t cap = 64 + (size_t)n * 12, len;
	char *b = malloc(cap);
	ck_assert(b);
	len = (size_t)snprintf(b, cap, "req %llu 1 %u %s %u", id, ngen, flags, n);
	for (uint32_t i = 0; i < n; i++)
		len += (size_t)snprintf(b + len, cap - len, " %d", tok[i]);
	b[len++] = '\n';
	ck_assert_msg(write(w->in, b, len) == (ssize_t)len, "writing a request to the worker");
	free(b);
}

struct result {
	char *line;
	unsigned restored, generated;
	int refused;
	char source[8], gen[4096], logits[40];
};

static void parse(struct result *r, char *line)
{
	memset(r, 0, sizeof(*r));
	r->line = line;
	const char *p;
	if ((p = strstr(line, " restored=")))
		r->restored = (unsigned)strtoul(p + 10, NULL, 10);
	if ((p = strstr(line, " generated=")))
		r->generated = (unsigned)strtoul(p + 11, NULL, 10);
	if ((p = strstr(line, " refused=")))
		r->refused = atoi(p + 9);
	if ((p = strstr(line, " source=")))
		sscanf(p + 8, "%7s", r->source);
	if ((p = strstr(line, " gen=")))
		snprintf(r->gen, sizeof(r->gen), "%s", p + 5);
	if ((p = strstr(line, " logits=")))
		sscanf(p + 8, "%32s", r->logits);
}

/* One request, waiting for its result. */
static void ask(struct worker *w, struct result *r, unsigned long long id, uint32_t ngen, const char *flags,
		const int32_t *tok, uint32_t n)
{
	worker_send(w, id, ngen, flags, tok, n);
	char *l = line_from(w, w->out, WAIT_MS);
	ck_assert_msg(l && !strncmp(l, "res ", 4), "waiting for the result of request %llu: got %s", id, l ? l : "nothing");
	parse(r, l);
}

static int32_t *prompt(uint32_t n, uint64_t seed)
{
	int32_t *t = malloc(n * sizeof(int32_t));
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 7;
	for (uint32_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		t[i] = 3 + (int32_t)(x % 2045);
	}
	return t;
}

/* The logits two workers wrote for request @id are bit-identical (and not empty). */
static void logits_equal(const char *dir_a, const char *dir_b, unsigned long long id_a, unsigned long long id_b)
{
	char pa[4096], pb[4096];
	snprintf(pa, sizeof(pa), "%s/%llu.f32", dir_a, id_a);
	snprintf(pb, sizeof(pb), "%s/%llu.f32", dir_b, id_b);
	FILE *fa = fopen(pa, "r"), *fb = fopen(pb, "r");
	ck_assert_msg(fa && fb, "logits files %s, %s", pa, pb);
	fseek(fa, 0, SEEK_END);
	fseek(fb, 0, SEEK_END);
	long na = ftell(fa), nb = ftell(fb);
	ck_assert_msg(na == nb && na > 0, "logits sizes %ld, %ld", na, nb);
	rewind(fa);
	rewind(fb);
	float *a = malloc((size_t)na), *b = malloc((size_t)nb);
	ck_assert(fread(a, 1, (size_t)na, fa) == (size_t)na && fread(b, 1, (size_t)nb, fb) == (size_t)nb);
	fclose(fa);
	fclose(fb);
	if (memcmp(a, b, (size_t)na)) {
		double worst = 0;
		for (long i = 0; i < na / 4; i++)
			worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
		ck_abort_msg("logits of %s and %s differ: largest absolute difference %g (tolerance: bitwise)", pa, pb, worst);
	}
	free(a);
	free(b);
}

struct fixture {
	const char *arena_name;
	struct sc_arena *arena;
	char l3[128], logits[3][128];
};

static void fixture_open(struct fixture *f, const char *tag)
{
	f->arena = sc_test_arena(tag, 256ull << 20, &f->arena_name);
	snprintf(f->l3, sizeof(f->l3), "/tmp/sc-%s-l3", f->arena_name);
	sc_test_rm_tree(f->l3);
	for (int i = 0; i < 3; i++) {
		snprintf(f->logits[i], sizeof(f->logits[i]), "/tmp/sc-%s-logits%d", f->arena_name, i);
		sc_test_rm_tree(f->logits[i]);
		ck_assert(mkdir(f->logits[i], 0700) == 0);
	}
}

static void fixture_close(struct fixture *f)
{
	sc_test_rm_tree(f->l3);
	for (int i = 0; i < 3; i++)
		sc_test_rm_tree(f->logits[i]);
	sc_test_arena_destroy(f->arena, f->arena_name);
}

/*
 * Worker A computes a prompt and exports its blocks; worker B, another process, restores them
 * (from L2, then, with L2 emptied, from L3) and continues: the same greedy tokens and bit-identical
 * logits as a worker with no cache at all.
 */
START_TEST(test_restore_across_processes_is_bitwise)
{
	if (!have_engine())
		return;
	struct fixture f;
	fixture_open(&f, "llama-x");
	const uint32_t n = 700, ngen = 16;
	int32_t *p = prompt(n, 1);
	struct worker ref, a, b;
	struct result r0, r0b, ra, rb, rc, rd;
	const char *ref_args[] = { "--logits-dir", f.logits[0], NULL };
	const char *a_args[] = { "--arena", f.arena_name, "--l3", f.l3, "--logits-dir", f.logits[1], NULL };
	const char *b_args[] = { "--arena", f.arena_name, "--l3", f.l3, "--logits-dir", f.logits[2], NULL };
	worker_start(&ref, tiny, ref_args);
	worker_ready(&ref);
	ask(&ref, &r0, 1, ngen, "-", p, n);     /* the reference: no cache */
	ask(&ref, &r0b, 2, ngen, "-", p, 512);  /* and of the first two blocks alone */
	worker_stop(&ref);
	ck_assert_uint_eq(r0.restored, 0);
	ck_assert_uint_eq(r0.generated, ngen);

	worker_start(&a, tiny, a_args);
	worker_ready(&a);
	ask(&a, &ra, 10, ngen, "-", p, n);
	worker_stop(&a);
	ck_assert_msg(ra.restored == 0 && strstr(ra.line, " exports=2 "), "worker A: %s", ra.line);
	ck_assert_str_eq(ra.gen, r0.gen);
	logits_equal(f.logits[0], f.logits[1], 1, 10);

	worker_start(&b, tiny, b_args);
	worker_ready(&b);
	ask(&b, &rb, 20, ngen, "-", p, n);      /* 512 restored from L2, 188 decoded */
	ck_assert_msg(rb.restored == 512 && !strcmp(rb.source, "l2"), "worker B: %s", rb.line);
	ck_assert_str_eq(rb.gen, r0.gen);
	logits_equal(f.logits[0], f.logits[2], 1, 20);
	ask(&b, &rc, 21, ngen, "-", p, 512);    /* the whole prompt restored: its first token from the stored logits */
	ck_assert_msg(rc.restored == 512 && !strcmp(rc.source, "l2"), "worker B: %s", rc.line);
	ck_assert_str_eq(rc.gen, r0b.gen);
	logits_equal(f.logits[0], f.logits[2], 2, 21);
	/* L2 emptied: the same from an L3 fill */
	ck_assert_int_ge(sc_l2_clear(f.arena), 2);
	ask(&b, &rd, 22, ngen, "-", p, n);
	ck_assert_msg(rd.restored == 512 && !strcmp(rd.source, "l3"), "worker B from L3: %s", rd.line);
	ck_assert_str_eq(rd.gen, r0.gen);
	logits_equal(f.logits[0], f.logits[2], 1, 22);
	worker_stop(&b);
	free(r0.line), free(r0b.line), free(ra.line), free(rb.line), free(rc.line), free(rd.line);
	free(p);
	fixture_close(&f);
}
END_TEST

/*
 * A model of the same shape but other weights (another file, another identity) must never import
 * the first model's state: a miss in its own namespace, and, when the namespaces are forced equal
 * (--ns-raw), an object the library refuses (its header records the other identity) before the
 * worker's trailer would. Either way its output is its own model's.
 */
START_TEST(test_other_model_identity_is_a_miss)
{
	if (!have_engine())
		return;
	struct fixture f;
	fixture_open(&f, "llama-id");
	char other[256];
	snprintf(other, sizeof(other), "/tmp/sc-%s-other.gguf", f.arena_name);
	ck_assert_int_eq(sc_test_sh("%s %s --size tiny --seed 26 --gguf-py %s %s >/dev/null", SC_PYTHON3, SC_LLAMA_GEN,
				    SC_LLAMA_GGUF_PY, other), 0);
	const uint32_t n = 600, ngen = 8;
	int32_t *p = prompt(n, 2);
	struct worker a, b, ref;
	struct result ra, rb, rr, ra2, rb2;
	const char *ref_args[] = { "--logits-dir", f.logits[0], NULL };
	worker_start(&ref, other, ref_args);
	worker_ready(&ref);
	ask(&ref, &rr, 1, ngen, "-", p, n);
	worker_stop(&ref);

	for (int raw = 0; raw < 2; raw++) {
		const char *a_args[] = { "--arena", f.arena_name, "--l3", f.l3, raw ? "--ns-raw" : NULL, NULL };
		const char *b_args[] = { "--arena", f.arena_name, "--l3", f.l3, "--logits-dir", f.logits[1],
					 raw ? "--ns-raw" : NULL, NULL };
		worker_start(&a, tiny, a_args);
		worker_ready(&a);
		ask(&a, raw ? &ra2 : &ra, 10, ngen, "-", p, n);
		worker_stop(&a);
		struct result *x = raw ? &ra2 : &ra;
		ck_assert_msg(strstr(x->line, " exports=2 ") || raw, "worker A: %s", x->line);
		worker_start(&b, other, b_args);
		worker_ready(&b);
		struct result *y = raw ? &rb2 : &rb;
		ask(&b, y, 20 + (unsigned)raw, ngen, "noexport", p, n);
		worker_stop(&b);
		ck_assert_msg(y->restored == 0, "the other model restored %u tokens: %s", y->restored, y->line);
		/* with the namespaces forced equal the library refuses the object itself (its header
		 * records the other model's identity): a miss before the worker's trailer check */
		ck_assert_msg(y->refused == 0, "the library served the other model's object: %s", y->line);
		if (raw) {
			struct sc_l3 *l3 = NULL;
			struct sc_l3_stats st;
			ck_assert_int_eq(sc_l3_open(f.l3, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3), 0);
			ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
			ck_assert_msg(st.identity_mismatches > 0, "no identity mismatch counted: %s", y->line);
			sc_l3_close(l3);
		}
		ck_assert_str_eq(y->gen, rr.gen);
		logits_equal(f.logits[0], f.logits[1], 1, 20 + (unsigned)raw);
	}
	ck_assert_str_ne(ra.gen, rr.gen); /* the two models do differ */
	free(ra.line), free(rb.line), free(rr.line), free(ra2.line), free(rb2.line);
	free(p);
	unlink(other);
	fixture_close(&f);
}
END_TEST

/*
 * Workers SIGKILLed while they export (at once after announcing an export, and a little later)
 * leave nothing that restores wrongly: afterwards a worker restoring any stored prefix continues
 * exactly as a worker with no cache, and fsck finds the arena repairable to clean.
 */
START_TEST(test_sigkill_while_exporting_restores_nothing_wrong)
{
	if (!have_engine())
		return;
	struct fixture f;
	fixture_open(&f, "llama-kill");
	const uint32_t n = 2048, ngen = 4;
	int32_t *p = prompt(n, 3);
	const char *args[] = { "--arena", f.arena_name, "--l3", f.l3, NULL };
	/* killed right after announcing an export, and 0.2 .. 30 ms later: inside the state copy,
	 * the L2 admit, the L3 put, or the next blocks' prefill */
	static const unsigned delay_us[] = { 0, 200, 0, 1000, 3000, 0, 10000, 30000 };
	int kills = 0;
	for (unsigned round = 0; round < sizeof(delay_us) / sizeof(delay_us[0]); round++) {
		struct worker a;
		worker_start_err(&a, tiny, args, 1);
		worker_ready(&a);
		worker_send(&a, 100 + round, ngen, "-", p, n);
		/* the worker announces each export on stderr just before it starts it; one with nothing
		 * left to export answers on stdout instead */
		char *l = NULL, *res = NULL;
		for (int t = 0; t < WAIT_MS / 10 && !l && !res; t++)
			if (!(l = line_from(&a, a.err, 5)))
				res = line_from(&a, a.out, 5);
		ck_assert_msg(l || res, "waiting for round %u's worker to export or answer", round);
		if (l) {
			ck_assert_msg(!strncmp(l, "export ", 7), "unexpected stderr line: %s", l);
			/* the kill lands delay_us into the export: a spread of points inside it (a spin on
			 * the clock, finer than a sleep's wake-up) */
			for (double t0 = sc_test_now_s(); sc_test_now_s() - t0 < delay_us[round] / 1e6;)
				;
			kills++;
		}
		kill(a.pid, SIGKILL);
		free(l);
		free(res);
		sc_test_wait_killed(a.pid);
		close(a.in), close(a.out), close(a.err);
	}
	ck_assert_int_ge(kills, 4);
	/* one worker that is not killed stores what is still missing, restoring what the killed ones
	 * left: a wrongly stored block would show in its output or in the comparisons below */
	struct worker last;
	struct result rl;
	worker_start(&last, tiny, args);
	worker_ready(&last);
	ask(&last, &rl, 200, ngen, "-", p, n);
	worker_stop(&last);
	free(rl.line);

	/* every prefix length a restore can meet: the stored ones, and prompts between them */
	const uint32_t lens[] = { 2048, 1536, 1300, 768, 256, 200 };
	struct worker ref, b;
	const char *ref_args[] = { "--logits-dir", f.logits[0], NULL };
	const char *b_args[] = { "--arena", f.arena_name, "--l3", f.l3, "--logits-dir", f.logits[1], NULL };
	worker_start(&ref, tiny, ref_args);
	worker_start(&b, tiny, b_args);
	worker_ready(&ref);
	worker_ready(&b);
	unsigned restored_any = 0;
	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct result r0, r1;
		ask(&ref, &r0, i + 1, ngen, "-", p, lens[i]);
		ask(&b, &r1, i + 1, ngen, "noexport", p, lens[i]);
		ck_assert_msg(!r1.refused, "a stored state was refused: %s", r1.line);
		ck_assert_str_eq(r1.gen, r0.gen);
		logits_equal(f.logits[0], f.logits[1], i + 1, i + 1);
		restored_any += r1.restored > 0;
		free(r0.line), free(r1.line);
	}
	worker_stop(&ref);
	worker_stop(&b);
	ck_assert_msg(restored_any == 5, "%u of the 5 prompts of 256 tokens or more restored a prefix", restored_any);
	struct sc_fsck_report rep;
	int left = sc_arena_fsck(f.arena, SC_FSCK_REPAIR, NULL, NULL, &rep);
	ck_assert_msg(left == 0, "fsck left %d problems", left);
	ck_assert_msg(rep.digest_failures == 0, "fsck found %llu entries failing their digest",
		      (unsigned long long)rep.digest_failures);
	free(p);
	fixture_close(&f);
}
END_TEST

/*
 * The driver: two workers answer a chat trace (shared system prompts, growing histories), in
 * their own pid namespaces when we may make them; the tokens streamed through the commit rings
 * are the tokens each worker reported (the driver checks), the cache is hit, and every
 * conversation ends with the same history as without the cache.
 */
START_TEST(test_chat_trace_same_with_and_without_cache)
{
	if (!have_engine())
		return;
	char chat[4096];
	snprintf(chat, sizeof(chat), "%s", SC_LLAMA_WORKER);
	snprintf(strrchr(chat, '/'), sizeof(chat) - (size_t)(strrchr(chat, '/') - chat), "/sc-llama-chat");
	if (access(chat, X_OK)) {
		sc_skip("llama: %s is not built", chat);
		return;
	}
	struct fixture f;
	fixture_open(&f, "llama-chat");
	char out[2][256];
	const char *pidns = sc_test_is_root() ? "--pidns" : "";
	if (!*pidns)
		sc_skip("llama: not root: the chat workers run without their own pid namespaces");
	for (int cache = 0; cache < 2; cache++) {
		snprintf(out[cache], sizeof(out[cache]), "%s/chat%d.json", f.logits[0], cache);
		int rc = sc_test_sh("%s --model %s --arena %s --l3 %s --workers 2 %s %s --conversations 6 --turns 2..4 "
				    "--systems 3 --system-tokens 300..600 --user-tokens 20..90 --generate 40 --json >%s "
				    "2>%s.err",
				    chat, tiny, f.arena_name, f.l3, pidns, cache ? "" : "--no-cache", out[cache], out[cache]);
		ck_assert_msg(rc == 0, "sc-llama-chat (cache %d) exited %d", cache, rc);
	}
	char j[2][4096];
	for (int i = 0; i < 2; i++) {
		FILE *fj = fopen(out[i], "r");
		ck_assert(fj && fgets(j[i], sizeof(j[i]), fj));
		fclose(fj);
	}
	ck_assert_msg(strstr(j[0], "\"restored_tokens\":0,"), "no cache, yet restored: %s", j[0]);
	const char *h = strstr(j[1], "\"hit_ratio\":");
	ck_assert_msg(h && strtod(h + 12, NULL) > 0.3, "the cache was barely hit: %s", j[1]);
	ck_assert_msg(strstr(j[1], "\"ring_mismatch\":0,") && strstr(j[0], "\"ring_mismatch\":0,"), "%s\n%s", j[0], j[1]);
	const char *d0 = strstr(j[0], "\"history_digest\":"), *d1 = strstr(j[1], "\"history_digest\":");
	ck_assert(d0 && d1);
	ck_assert_msg(!strncmp(d0, d1, 17 + 34), "histories differ with the cache:\n%s\n%s", j[0], j[1]);
	fixture_close(&f);
}
END_TEST

/*
 * The Python worker (examples/llama/worker.py: the same loop through the bindings) and the C
 * worker restore each other's exports: the same tokens and the same logits (their digests, which
 * both compute alike) as a C worker with no cache.
 */
START_TEST(test_python_and_c_workers_restore_each_other)
{
	if (!have_engine())
		return;
	if (access(SC_LLAMA_ENGINE, R_OK) || sc_test_sh("%s -c 'import numpy' 2>/dev/null", SC_PYTHON3)) {
		sc_skip("llama: no %s or no numpy for %s", SC_LLAMA_ENGINE, SC_PYTHON3);
		return;
	}
	struct fixture f;
	fixture_open(&f, "llama-py");
	const uint32_t n1 = 900, n2 = 1300, ngen = 8;
	int32_t *p = prompt(n2, 4);
	struct worker ref, c, py;
	struct result r1, r2, c1, py1, py2, c2;
	const char *args[] = { "--arena", f.arena_name, "--l3", f.l3, NULL };
	worker_start(&ref, tiny, NULL);
	worker_ready(&ref);
	ask(&ref, &r1, 1, ngen, "-", p, n1);
	ask(&ref, &r2, 2, ngen, "-", p, n2);
	worker_stop(&ref);

	worker_start(&c, tiny, args);
	worker_ready(&c);
	ask(&c, &c1, 10, ngen, "-", p, n1); /* C exports 256, 512, 768 */
	worker_stop(&c);
	worker_start_any(&py, tiny, args, 0, 1);
	worker_ready(&py);
	ask(&py, &py1, 20, ngen, "-", p, n1);  /* Python restores 768 */
	ck_assert_msg(py1.restored == 768 && !strcmp(py1.source, "l2"), "python: %s", py1.line);
	ck_assert_str_eq(py1.gen, r1.gen);
	ck_assert_str_eq(py1.logits, r1.logits);
	ask(&py, &py2, 21, ngen, "-", p, n2);  /* restores 768, exports 1024 and 1280 */
	ck_assert_msg(py2.restored == 768, "python: %s", py2.line);
	ck_assert_str_eq(py2.gen, r2.gen);
	ck_assert_str_eq(py2.logits, r2.logits);
	worker_stop(&py);
	worker_start(&c, tiny, args);
	worker_ready(&c);
	ask(&c, &c2, 30, ngen, "noexport", p, n2); /* C restores what Python exported */
	worker_stop(&c);
	ck_assert_msg(c2.restored == 1280 && !strcmp(c2.source, "l2"), "C after python: %s", c2.line);
	ck_assert_str_eq(c2.gen, r2.gen);
	ck_assert_str_eq(c2.logits, r2.logits);
	free(r1.line), free(r2.line), free(c1.line), free(py1.line), free(py2.line), free(c2.line);
	free(p);
	fixture_close(&f);
}
END_TEST

/*
 * Token-major states (examples/llama/layout.h) on an arena with content-addressed segments: the
 * blocks a longer prefix shares with a shorter one are stored once, and what is restored from the
 * scattered segments continues bit for bit.
 */
START_TEST(test_token_major_layout_shares_segments)
{
	if (!have_engine())
		return;
	struct fixture f;
	struct sc_arena_opts o = { .size_bytes = 256ull << 20, .huge = SC_HUGE_OFF, .segment_bytes = 64u << 10 };
	f.arena = sc_test_arena_opts("llama-seg", &o, &f.arena_name);
	snprintf(f.l3, sizeof(f.l3), "/tmp/sc-%s-l3", f.arena_name);
	sc_test_rm_tree(f.l3);
	for (int i = 0; i < 3; i++) {
		snprintf(f.logits[i], sizeof(f.logits[i]), "/tmp/sc-%s-logits%d", f.arena_name, i);
		sc_test_rm_tree(f.logits[i]);
		ck_assert(mkdir(f.logits[i], 0700) == 0);
	}
	const uint32_t n = 1100, ngen = 8;
	int32_t *p = prompt(n, 5);
	struct worker ref, a, b;
	struct result r0, ra, rb;
	const char *ref_args[] = { "--logits-dir", f.logits[0], NULL };
	const char *args[] = { "--arena", f.arena_name, "--l3", f.l3, "--layout", "token-major", "--logits-dir", f.logits[1],
			       NULL };
	worker_start(&ref, tiny, ref_args);
	worker_ready(&ref);
	ask(&ref, &r0, 1, ngen, "-", p, n);
	worker_stop(&ref);
	worker_start(&a, tiny, args);
	worker_ready(&a);
	ask(&a, &ra, 10, ngen, "-", p, n); /* exports 256, 512, 768, 1024: each extends the last */
	worker_stop(&a);
	ck_assert_msg(strstr(ra.line, " exports=4 "), "worker A: %s", ra.line);
	struct sc_l2_stats st;
	ck_assert_int_eq(sc_l2_stats(f.arena, NULL, &st), 0);
	ck_assert_uint_eq(st.entries, 4);
	/* 4 prefixes of 1, 2, 3, 4 blocks: 10 blocks logical, 4 distinct (plus tails and headers) */
	ck_assert_msg(st.physical_bytes * 10 < st.logical_bytes * 6, "physical %llu of logical %llu bytes",
		      (unsigned long long)st.physical_bytes, (unsigned long long)st.logical_bytes);
	worker_start(&b, tiny, args);
	worker_ready(&b);
	ask(&b, &rb, 1, ngen, "noexport", p, n);
	worker_stop(&b);
	ck_assert_msg(rb.restored == 1024 && !strcmp(rb.source, "l2"), "worker B: %s", rb.line);
	ck_assert_str_eq(rb.gen, r0.gen);
	logits_equal(f.logits[0], f.logits[1], 1, 1);
	free(r0.line), free(ra.line), free(rb.line);
	free(p);
	fixture_close(&f);
}
END_TEST

static float *read_f32(const char *path, long *n)
{
	FILE *f = fopen(path, "r");
	ck_assert_msg(f, "%s", path);
	fseek(f, 0, SEEK_END);
	*n = ftell(f) / 4;
	rewind(f);
	float *v = malloc((size_t)*n * 4);
	ck_assert(v && fread(v, 4, (size_t)*n, f) == (size_t)*n);
	fclose(f);
	return v;
}

/*
 * A boundary passed while generating: by default not exported (the next turn restores the last
 * prompt boundary and stays bitwise); with --export-generated it is, and the continuation from
 * it is within the documented tolerance of a full prefill.
 */
START_TEST(test_generated_boundary_is_within_tolerance)
{
	if (!have_engine())
		return;
	struct fixture f;
	fixture_open(&f, "llama-gen");
	int32_t *p = prompt(300, 6);
	struct worker a, ref, b;
	struct result ra, rn, r0, r1;
	const char *plain[] = { "--arena", f.arena_name, "--l3", f.l3, NULL };
	const char *gen[] = { "--arena", f.arena_name, "--l3", f.l3, "--export-generated", NULL };
	worker_start(&a, tiny, plain);
	worker_ready(&a);
	ask(&a, &rn, 1, 20, "-", p, 250); /* passes 256 while generating: nothing exported */
	worker_stop(&a);
	ck_assert_msg(strstr(rn.line, " exports=0 "), "exported while generating: %s", rn.line);
	worker_start(&a, tiny, gen);
	worker_ready(&a);
	ask(&a, &ra, 2, 20, "-", p, 250);
	worker_stop(&a);
	ck_assert_msg(strstr(ra.line, " exports=1 ") && !strcmp(ra.gen, rn.gen), "--export-generated: %s", ra.line);
	/* the next turn: the prompt, the reply, more tokens (266 in all) */
	int32_t q[266];
	memcpy(q, p, 250 * sizeof(int32_t));
	const char *g = ra.gen;
	for (int i = 0; i < 16; i++) {
		char *end;
		q[250 + i] = (int32_t)strtol(g, &end, 10);
		g = end + (*end == ',');
	}
	const char *ref_args[] = { "--logits-dir", f.logits[0], NULL };
	const char *b_args[] = { "--arena", f.arena_name, "--l3", f.l3, "--logits-dir", f.logits[1], NULL };
	worker_start(&ref, tiny, ref_args);
	worker_ready(&ref);
	ask(&ref, &r0, 3, 8, "-", q, 266);
	worker_stop(&ref);
	worker_start(&b, tiny, b_args);
	worker_ready(&b);
	ask(&b, &r1, 3, 8, "noexport", q, 266);
	worker_stop(&b);
	ck_assert_msg(r1.restored == 256, "the generated boundary was not restored: %s", r1.line);
	long na, nb;
	char pa[300], pb[300];
	snprintf(pa, sizeof(pa), "%s/3.f32", f.logits[0]);
	snprintf(pb, sizeof(pb), "%s/3.f32", f.logits[1]);
	float *x = read_f32(pa, &na), *y = read_f32(pb, &nb);
	ck_assert_int_eq(na, nb);
	double worst = 0, top = 0;
	for (long i = 0; i < na; i++) {
		worst = fmax(worst, fabs((double)x[i] - (double)y[i]));
		top = fmax(top, fabs((double)x[i]));
	}
	printf("NOTE: continuation from a boundary exported while generating: largest logit difference %g "
	       "(%.3g%% of the largest logit)\n", worst, 100 * worst / top);
	ck_assert_msg(worst <= 0.01 * top, "logits differ by %g, above 1%% of the largest logit %g", worst, top);
	free(x), free(y), free(p);
	free(ra.line), free(rn.line), free(r0.line), free(r1.line);
	fixture_close(&f);
}
END_TEST

Suite *llama_suite(void)
{
	Suite *s = suite_create("llama");
	TCase *tc = tcase_create("llama");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_restore_across_processes_is_bitwise);
	tcase_add_test(tc, test_other_model_identity_is_a_miss);
	tcase_add_test(tc, test_sigkill_while_exporting_restores_nothing_wrong);
	tcase_add_test(tc, test_chat_trace_same_with_and_without_cache);
	tcase_add_test(tc, test_python_and_c_workers_restore_each_other);
	tcase_add_test(tc, test_token_major_layout_shares_segments);
	tcase_add_test(tc, test_generated_boundary_is_within_tolerance);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(llama_suite)
