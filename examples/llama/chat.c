/*
 * examples/llama/chat.c — sc-llama-chat: N llama.cpp workers (processes, optionally each in its
 * own pid namespace) answer a multi-turn chat trace, sharing one stagecache arena and L3.
 *
 * The driver draws the trace (trace.h), starts the workers (sc-llama-worker, next to this
 * binary), hands each idle worker the next turn of a conversation that is not waiting for a
 * reply — so the turns of one conversation go to whichever worker is free, and a worker restores
 * history another worker computed — and consumes every worker's commit ring, checking that the
 * tokens streamed through the rings are the tokens each worker reported. At the end it prints
 * throughput, the hit ratio, time to first token and where the time went; --json prints the
 * same as one JSON object.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stagecache.h>

#include "trace.h"

#define EXIT_USAGE 2
#define MAXW 16

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sc-llama-chat --model FILE --arena NAME --l3 DIR [options]\n\n"
		"Runs N sc-llama-worker processes on a multi-turn chat trace that shares system prompts (Zipf)\n"
		"and extends each conversation's history turn by turn; consumes their commit rings.\n\n"
		"  --model FILE          GGUF model (make llama-models writes build/llama/models/base.gguf)\n"
		"  --arena NAME          the arena (stagecache create NAME --size 1G); its rings carry the tokens\n"
		"  --l3 DIR              the L3 directory\n"
		"  --workers N           worker processes (default 2)\n"
		"  --no-cache            workers neither restore nor export (every prompt is prefilled)\n"
		"  --pidns               each worker in its own pid namespace (unshare --pid --fork)\n"
		"  --threads N           llama.cpp threads per worker (default 1)\n"
		"  --block N             export every N tokens (default 256)\n"
		"  --conversations N     (default 8)   --turns A..B (default 3..5)\n"
		"  --systems N           distinct system prompts (default 4), --system-tokens A..B (512..1024)\n"
		"  --user-tokens A..B    (default 32..160)   --generate N tokens per reply (default 32)\n"
		"  --zipf S              popularity of the system prompts (default 1.1)   --seed N (default 25)\n"
		"  --worker PATH         the worker binary (default: sc-llama-worker next to this one)\n"
		"  --worker-log FILE     the workers' stderr (default /dev/null)\n"
		"  --ns NS               namespace (default chat)\n"
		"  --layout WHAT         the workers' state layout: llama (default) or token-major\n"
		"  --prefault            the workers read every page of the arena at start (sc-llama-worker --help)\n"
		"  --json                one JSON object instead of the text summary\n"
		"  --help\n");
}

struct wk {
	pid_t pid;
	int in, out;           /* its stdin (we write), its stdout (we read) */
	char buf[1 << 16];
	size_t len;
	int busy;
	uint32_t conv;
	uint64_t req;
};

struct conv {
	int32_t *hist;
	uint32_t len, cap, next_turn;
	int waiting;
};

struct result {
	uint32_t conv, prompt, restored, generated;
	double ttft, locate, lookup, fill, import, prefill, decode, get, admit, put, total;
	int source;            /* 0 none, 1 l2, 2 l3 */
	int32_t *gen;          /* the tokens the worker reported */
	int32_t *streamed;     /* the tokens the rings carried */
	uint32_t nstreamed;
	int finished;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_range(const char *s, uint32_t *lo, uint32_t *hi)
{
	char *e;
	unsigned long a = strtoul(s, &e, 10), b = a;
	if (e == s)
		return -1;
	if (!strncmp(e, "..", 2)) {
		char *e2;
		b = strtoul(e + 2, &e2, 10);
		if (e2 == e + 2)
			return -1;
		e = e2;
	}
	if (*e || a > b || b > (1u << 20))
		return -1;
	*lo = (uint32_t)a, *hi = (uint32_t)b;
	return 0;
}

static double kv(const char *line, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), " %s=", key);
	const char *p = strstr(line, pat);
	return p ? strtod(p + strlen(pat), NULL) : 0;
}

static int spawn(struct wk *w, char **argv, int logfd)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(logfd, 2);
		execvp(argv[0], argv);
		fprintf(stderr, "sc-llama-chat: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	w->pid = pid, w->in = in[1], w->out = out[0], w->len = 0, w->busy = 0;
	return 0;
}

/* One line from a worker, waiting at most @timeout_ms; 1 a line in @line, 0 none yet, -1 EOF. */
static int read_line(struct wk *w, char **line, int timeout_ms)
{
	for (;;) {
		char *nl = memchr(w->buf, '\n', w->len);
		if (nl) {
			size_t n = (size_t)(nl - w->buf) + 1;
			*line = strndup(w->buf, n - 1);
			memmove(w->buf, w->buf + n, w->len - n);
			w->len -= n;
			return *line ? 1 : -1;
		}
		if (w->len == sizeof(w->buf))
			return -1;
		struct pollfd p = { .fd = w->out, .events = POLLIN };
		int k = poll(&p, 1, timeout_ms);
		if (k <= 0)
			return 0;
		ssize_t r = read(w->out, w->buf + w->len, sizeof(w->buf) - w->len);
		if (r <= 0)
			return -1;
		w->len += (size_t)r;
		timeout_ms = 0;
	}
}

static int write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t k = write(fd, s, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		s += k, n -= (size_t)k;
	}
	return 0;
}

struct run {
	struct result *res;
	uint64_t nres;
	uint64_t commits, ring_tokens, ring_unknown;
};

static int on_commit(const struct sc_commit *c, void *ctx)
{
	struct run *r = ctx;
	r->commits++;
	if (c->request_id == 0 || c->request_id > r->nres) {
		r->ring_unknown++;
		return 0;
	}
	struct result *x = &r->res[c->request_id - 1];
	for (uint32_t i = 0; i < c->token_count; i++) {
		int32_t *n = realloc(x->streamed, (x->nstreamed + 1) * sizeof(int32_t));
		if (!n)
			return 1;
		x->streamed = n;
		x->streamed[x->nstreamed++] = c->tokens[i];
	}
	r->ring_tokens += c->token_count;
	if (c->flags & SC_COMMIT_FINISHED)
		x->finished = 1;
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, 0, 'm' },	     { "arena", required_argument, 0, 'a' },
		{ "l3", required_argument, 0, 'l' },	     { "workers", required_argument, 0, 'w' },
		{ "no-cache", no_argument, 0, 'C' },	     { "pidns", no_argument, 0, 'P' },
		{ "threads", required_argument, 0, 't' },    { "block", required_argument, 0, 'b' },
		{ "conversations", required_argument, 0, 'c' }, { "turns", required_argument, 0, 'T' },
		{ "systems", required_argument, 0, 's' },    { "system-tokens", required_argument, 0, 'S' },
		{ "user-tokens", required_argument, 0, 'U' }, { "generate", required_argument, 0, 'g' },
		{ "zipf", required_argument, 0, 'z' },	     { "seed", required_argument, 0, 'r' },
		{ "worker", required_argument, 0, 'W' },     { "worker-log", required_argument, 0, 'L' },
		{ "ns", required_argument, 0, 'n' },	     { "json", no_argument, 0, 'j' },
		{ "layout", required_argument, 0, 'Y' },     { "prefault", no_argument, 0, 'F' },
		{ "help", no_argument, 0, 'h' },	     { 0, 0, 0, 0 }
	};
	const char *model = NULL, *arena_name = NULL, *l3 = NULL, *worker = NULL, *wlog = "/dev/null", *ns = "chat";
	const char *layout = "llama";
	int nw = 2, nocache = 0, pidns = 0, threads = 1, json = 0, prefault = 0, c;
	unsigned block = 256;
	struct trace_opts to = { 0 };
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case 'm': model = optarg; break;
		case 'a': arena_name = optarg; break;
		case 'l': l3 = optarg; break;
		case 'w': nw = atoi(optarg); bad = nw < 1 || nw > MAXW; break;
		case 'C': nocache = 1; break;
		case 'P': pidns = 1; break;
		case 't': threads = atoi(optarg); bad = threads < 1; break;
		case 'b': block = (unsigned)strtoul(optarg, NULL, 10); bad = !block; break;
		case 'c': to.conversations = (uint32_t)strtoul(optarg, NULL, 10); bad = !to.conversations; break;
		case 'T': bad = parse_range(optarg, &to.turns_min, &to.turns_max) || !to.turns_min; break;
		case 's': to.systems = (uint32_t)strtoul(optarg, NULL, 10); bad = !to.systems; break;
		case 'S': bad = parse_range(optarg, &to.system_min, &to.system_max) || !to.system_min; break;
		case 'U': bad = parse_range(optarg, &to.user_min, &to.user_max) || !to.user_min; break;
		case 'g': to.generate = (uint32_t)strtoul(optarg, NULL, 10); bad = !to.generate; break;
		case 'z': to.zipf = strtod(optarg, NULL); bad = to.zipf <= 0; break;
		case 'r': to.seed = strtoull(optarg, NULL, 10); break;
		case 'W': worker = optarg; break;
		case 'L': wlog = optarg; break;
		case 'n': ns = optarg; break;
		case 'j': json = 1; break;
		case 'F': prefault = 1; break;
		case 'Y': layout = optarg; bad = strcmp(layout, "llama") && strcmp(layout, "token-major"); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return EXIT_USAGE;
		}
		if (bad) {
			fprintf(stderr, "sc-llama-chat: bad value '%s' (see --help)\n", optarg);
			return EXIT_USAGE;
		}
	}
	if (!model || !arena_name || !l3 || optind < argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	char self[PATH_MAX], wpath[PATH_MAX + 32];
	if (!worker) {
		ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (k <= 0)
			return 1;
		self[k] = 0;
		char *sl = strrchr(self, '/');
		*sl = 0;
		snprintf(wpath, sizeof(wpath), "%s/sc-llama-worker", self);
		worker = wpath;
	}
	struct sc_arena *arena;
	int rc = sc_arena_open(arena_name, &arena);
	if (rc) {
		fprintf(stderr, "sc-llama-chat: arena %s: %s\n", arena_name, sc_strerror(rc));
		return 1;
	}
	int logfd = open(wlog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0) {
		fprintf(stderr, "sc-llama-chat: %s: %s\n", wlog, strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	char th[16], bl[16];
	snprintf(th, sizeof(th), "%d", threads);
	snprintf(bl, sizeof(bl), "%u", block);
	char *wargv[32];
	int k = 0;
	if (pidns) {
		wargv[k++] = "unshare";
		wargv[k++] = "--pid";
		wargv[k++] = "--fork";
		wargv[k++] = "--kill-child";
		wargv[k++] = "--";
	}
	char *base[] = { (char *)worker, "--model", (char *)model, "--arena", (char *)arena_name, "--l3", (char *)l3,
			 "--threads", th, "--block", bl, "--ns", (char *)ns, "--layout", (char *)layout, NULL };
	for (int i = 0; base[i]; i++)
		wargv[k++] = base[i];
	if (prefault)
		wargv[k++] = "--prefault";
	wargv[k] = NULL;
	static struct wk w[MAXW];
	int32_t vocab = 0;
	for (int i = 0; i < nw; i++) {
		if ((rc = spawn(&w[i], wargv, logfd))) {
			fprintf(stderr, "sc-llama-chat: fork: %s\n", strerror(-rc));
			return 1;
		}
	}
	for (int i = 0; i < nw; i++) {
		char *line = NULL;
		/* loading a model takes a second or two; a worker that said nothing in 120 s is broken */
		int got = 0;
		for (int t = 0; t < 1200 && !(got = read_line(&w[i], &line, 100)); t++)
			;
		if (got != 1 || strncmp(line, "ready ", 6)) {
			fprintf(stderr, "sc-llama-chat: worker %d did not start (see --worker-log)\n", i);
			for (int j = 0; j < nw; j++)
				kill(w[j].pid, SIGKILL);
			return 1;
		}
		vocab = (int32_t)kv(line, "vocab");
		free(line);
	}
	to.vocab = vocab;
	struct trace tr;
	if (trace_make(&tr, &to)) {
		fprintf(stderr, "sc-llama-chat: cannot make the trace\n");
		return 1;
	}
	struct conv *cv = calloc(tr.o.conversations, sizeof(*cv));
	struct run run = { .res = calloc(tr.requests, sizeof(struct result)), .nres = tr.requests };
	if (!cv || !run.res)
		return 1;
	uint32_t active_max = (uint32_t)nw * 2, started = 0, active = 0;
	uint64_t next_id = 1, done = 0;
	char *reqbuf = NULL;
	size_t reqcap = 0;
	int failed = 0;
	double t0 = now_s();
	while (done < tr.requests && !failed) {
		/* start conversations while fewer than 2 per worker are open */
		while (active < active_max && started < tr.o.conversations) {
			struct conv *v = &cv[started];
			const struct trace_conv *tc = &tr.conv[started];
			v->cap = tr.system_len[tc->system] + 1024;
			v->hist = malloc(v->cap * sizeof(int32_t));
			if (!v->hist)
				return 1;
			memcpy(v->hist, tr.system[tc->system], tr.system_len[tc->system] * sizeof(int32_t));
			v->len = tr.system_len[tc->system];
			started++, active++;
		}
		/* hand each idle worker the next turn of a conversation not waiting for its reply */
		for (int i = 0; i < nw; i++) {
			if (w[i].busy)
				continue;
			uint32_t pick = UINT32_MAX;
			for (uint32_t j = 0; j < started; j++)
				if (!cv[j].waiting && cv[j].next_turn < tr.conv[j].turns) {
					pick = j;
					break;
				}
			if (pick == UINT32_MAX)
				break;
			struct conv *v = &cv[pick];
			const struct trace_conv *tc = &tr.conv[pick];
			uint32_t ul = tc->user_len[v->next_turn];
			if (v->len + ul + tr.o.generate > v->cap) {
				v->cap = (v->len + ul + tr.o.generate) * 2;
				if (!(v->hist = realloc(v->hist, v->cap * sizeof(int32_t))))
					return 1;
			}
			memcpy(v->hist + v->len, tc->user[v->next_turn], ul * sizeof(int32_t));
			v->len += ul;
			size_t need = 64 + (size_t)v->len * 12;
			if (need > reqcap && !(reqbuf = realloc(reqbuf, reqcap = need)))
				return 1;
			int n = snprintf(reqbuf, reqcap, "req %llu %u %u %s %u", (unsigned long long)next_id, pick,
					 tr.o.generate, nocache ? "nocache" : "-", v->len);
			for (uint32_t t = 0; t < v->len; t++)
				n += snprintf(reqbuf + n, reqcap - (size_t)n, " %d", v->hist[t]);
			reqbuf[n++] = '\n';
			struct result *x = &run.res[next_id - 1];
			x->conv = pick;
			x->prompt = v->len;
			if (write_all(w[i].in, reqbuf, (size_t)n)) {
				fprintf(stderr, "sc-llama-chat: worker %d is gone\n", i);
				failed = 1;
				break;
			}
			v->waiting = 1;
			w[i].busy = 1, w[i].conv = pick, w[i].req = next_id++;
		}
		/* results */
		for (int i = 0; i < nw && !failed; i++) {
			if (!w[i].busy)
				continue;
			char *line = NULL;
			int got = read_line(&w[i], &line, 2);
			if (got == 0)
				continue;
			if (got < 0 || strncmp(line, "res ", 4)) {
				fprintf(stderr, "sc-llama-chat: worker %d: %s\n", i, got < 0 ? "exited" : line);
				free(line);
				failed = 1;
				break;
			}
			struct result *x = &run.res[w[i].req - 1];
			x->restored = (uint32_t)kv(line, "restored");
			x->generated = (uint32_t)kv(line, "generated");
			x->ttft = kv(line, "ttft_us") * 1e-6, x->total = kv(line, "total_us") * 1e-6;
			x->locate = kv(line, "locate_us") * 1e-6, x->lookup = kv(line, "lookup_us") * 1e-6;
			x->fill = kv(line, "fill_us") * 1e-6, x->import = kv(line, "import_us") * 1e-6;
			x->prefill = kv(line, "prefill_us") * 1e-6, x->decode = kv(line, "decode_us") * 1e-6;
			x->get = kv(line, "export_get_us") * 1e-6, x->admit = kv(line, "export_admit_us") * 1e-6;
			x->put = kv(line, "export_put_us") * 1e-6;
			x->source = strstr(line, " source=l2") ? 1 : strstr(line, " source=l3") ? 2 : 0;
			const char *g = strstr(line, " gen=");
			struct conv *v = &cv[w[i].conv];
			x->gen = malloc((x->generated + 1) * sizeof(int32_t));
			if (!x->gen)
				return 1;
			const char *p = g ? g + 5 : "";
			for (uint32_t t = 0; t < x->generated; t++) {
				char *end;
				x->gen[t] = (int32_t)strtol(p, &end, 10);
				p = end + (*end == ',');
			}
			/* the reply joins the history; the last token was sampled but not yet decoded, as a
			 * chat engine appends it with the next user message */
			memcpy(v->hist + v->len, x->gen, x->generated * sizeof(int32_t));
			v->len += x->generated;
			v->waiting = 0;
			if (++v->next_turn == tr.conv[w[i].conv].turns)
				active--;
			w[i].busy = 0;
			done++;
			free(line);
		}
		sc_ring_poll(arena, on_commit, &run, 256);
	}
	double wall = now_s() - t0;
	for (int i = 0; i < nw; i++) {
		write_all(w[i].in, "quit\n", 5);
		close(w[i].in);
	}
	/* the last commits: every request's FINISHED record, waited for at most 5 s */
	for (int t = 0; t < 500; t++) {
		sc_ring_poll(arena, on_commit, &run, 4096);
		uint64_t fin = 0;
		for (uint64_t i = 0; i < done; i++)
			fin += run.res[i].finished;
		if (fin == done)
			break;
		usleep(10000);
	}
	int worker_fail = 0;
	for (int i = 0; i < nw; i++) {
		int st = 0;
		/* a worker exits once its stdin closes; one still there after 10 s is killed and counted */
		int t;
		for (t = 0; t < 1000 && waitpid(w[i].pid, &st, WNOHANG) == 0; t++)
			usleep(10000);
		if (t == 1000) {
			kill(w[i].pid, SIGKILL);
			waitpid(w[i].pid, &st, 0);
		}
		worker_fail += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	sc_ring_consumer_close(arena);
	/* the figures */
	uint64_t gen = 0, prompt = 0, restored = 0, hits = 0, mismatch = 0, l2 = 0, l3n = 0;
	double s[11] = { 0 };
	double *ttft = calloc(done ? done : 1, sizeof(double));
	for (uint64_t i = 0; i < done; i++) {
		struct result *x = &run.res[i];
		gen += x->generated, prompt += x->prompt, restored += x->restored, hits += x->restored > 0;
		l2 += x->source == 1, l3n += x->source == 2;
		s[0] += x->locate, s[1] += x->lookup, s[2] += x->fill, s[3] += x->import, s[4] += x->prefill;
		s[5] += x->decode, s[6] += x->get, s[7] += x->admit, s[8] += x->put, s[9] += x->total;
		ttft[i] = x->ttft;
		if (x->nstreamed != x->generated || (x->generated && memcmp(x->streamed, x->gen, x->generated * 4)) ||
		    !x->finished)
			mismatch++;
	}
	qsort(ttft, done, sizeof(double), cmp_d);
	double p50 = done ? ttft[done / 2] : 0, p90 = done ? ttft[(done * 9) / 10 < done ? (done * 9) / 10 : done - 1] : 0;
	struct sc_l2_stats l2s = { 0 };
	sc_l2_stats(arena, NULL, &l2s);
	/* every conversation's final history, in trace order: the same with and without the cache,
	 * whichever worker answered which turn */
	struct sc_digest hd = { 0, 0 };
	for (uint32_t j = 0; j < started; j++)
		hd = sc_digest_sections(&hd, sizeof(hd), cv[j].hist, (size_t)cv[j].len * sizeof(int32_t));
	char hhex[SC_DIGEST_HEX_LEN + 1];
	sc_digest_format(hd, hhex);
	if (json) {
		printf("{\"workers\":%d,\"cache\":%d,\"pidns\":%d,\"threads\":%d,\"requests\":%llu,\"wall_s\":%.3f,"
		       "\"generated\":%llu,\"tokens_per_s\":%.3f,\"prompt_tokens\":%llu,\"restored_tokens\":%llu,"
		       "\"hit_ratio\":%.4f,\"request_hits\":%llu,\"from_l2\":%llu,\"from_l3\":%llu,\"ttft_p50_s\":%.4f,"
		       "\"ttft_p90_s\":%.4f,\"locate_s\":%.4f,\"lookup_s\":%.4f,\"fill_s\":%.4f,\"import_s\":%.4f,"
		       "\"prefill_s\":%.3f,\"decode_s\":%.3f,\"export_get_s\":%.3f,\"export_admit_s\":%.3f,"
		       "\"export_put_s\":%.3f,\"ring_commits\":%llu,\"ring_tokens\":%llu,\"ring_mismatch\":%llu,"
		       "\"l2_logical_bytes\":%llu,\"l2_physical_bytes\":%llu,\"l2_entries\":%llu,\"history_digest\":\"%s\","
		       "\"failed\":%d}\n",
		       nw, !nocache, pidns, threads, (unsigned long long)done, wall, (unsigned long long)gen, gen / wall,
		       (unsigned long long)prompt, (unsigned long long)restored, prompt ? (double)restored / prompt : 0,
		       (unsigned long long)hits, (unsigned long long)l2, (unsigned long long)l3n, p50, p90, s[0], s[1], s[2],
		       s[3], s[4], s[5], s[6], s[7], s[8], (unsigned long long)run.commits,
		       (unsigned long long)run.ring_tokens, (unsigned long long)mismatch,
		       (unsigned long long)l2s.logical_bytes, (unsigned long long)l2s.physical_bytes,
		       (unsigned long long)l2s.entries, hhex, failed || worker_fail);
	} else {
		printf("chat: %d workers%s, cache %s, %u conversations, %llu requests (%d threads each)\n", nw,
		       pidns ? " in their own pid namespaces" : "", nocache ? "off" : "on", tr.o.conversations,
		       (unsigned long long)done, threads);
		printf("  %.1f s, %llu tokens generated: %.2f tokens/s\n", wall, (unsigned long long)gen, gen / wall);
		printf("  prompt tokens %llu, restored %llu: hit ratio %.3f; requests with a hit %llu/%llu (L2 %llu, L3 %llu)\n",
		       (unsigned long long)prompt, (unsigned long long)restored, prompt ? (double)restored / prompt : 0,
		       (unsigned long long)hits, (unsigned long long)done, (unsigned long long)l2, (unsigned long long)l3n);
		printf("  time to first token: p50 %.3f s, p90 %.3f s\n", p50, p90);
		printf("  where the time went (summed over requests): restore: locate %.3f s, lookup %.3f s, fill %.3f s, "
		       "engine import %.3f s;\n    prefill %.1f s, decode %.1f s; export: get %.2f s, L2 admit %.2f s, "
		       "L3 put %.2f s\n",
		       s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8]);
		printf("  rings: %llu commits, %llu tokens streamed, %llu requests whose stream differs from the reply\n",
		       (unsigned long long)run.commits, (unsigned long long)run.ring_tokens, (unsigned long long)mismatch);
		printf("  conversations' final histories: %s\n", hhex);
		if (!nocache)
			printf("  L2: %llu entries, %.1f MiB logical, %.1f MiB physical\n", (unsigned long long)l2s.entries,
			       l2s.logical_bytes / 1048576.0, l2s.physical_bytes / 1048576.0);
	}
	sc_arena_close(arena);
	trace_free(&tr);
	return failed || worker_fail || mismatch ? 1 : 0;
}
