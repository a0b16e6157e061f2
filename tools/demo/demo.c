/*
 * tools/demo/demo.c — `stagecache demo`: the main job, in about 30 seconds.
 *
 * One arena (hugepages when available), an L3 directory of synthetic prefix-state objects for a
 * small model, `stagecache trace` in the background (root), one consumer tailing the commit rings
 * and verifying every generation exactly, and N stage workers serving a Zipf workload over
 * documents that share prefixes: sc_restore (L3 locate -> L2 lookup -> io_uring fill ->
 * promotion), a digest check of every restored payload, then a "decode" through the batcher.
 * A progress line while it runs, then a summary with the library's counters next to eBPF's.
 *
 * Under pressure: the documents' state is larger than the arena, so L2 evicts. Every request is
 * numbered (a shared ticket) and recorded; after the run the same sequence goes through exact
 * LRU, S3-FIFO and OPT simulators (tools/demo/policy_sim.c) with the L2 budget as capacity, printed
 * next to the L2 hit ratio, and every "promote" decision is accounted for: published, or refused
 * with its reason (decided - published = the refusals printed).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "policy_sim.h"
#include "workload.h"

#define MAX_WORKERS 32
#define MAX_DOCS 1024
#define MAX_SEQ (4u << 20) /* requests recorded for the simulators (about 20 minutes at 3000/s) */
#define WINDOWS 64
#define NS "demo"
#define MODEL "demo-model-8L-fp16"
#define STATE "kv+recurrent"

struct worker_stats {
	_Atomic uint64_t requests, from_l2, from_l3, promoted, fill_bytes, fill_ns, verify_errors, errors;
	_Atomic uint64_t tokens, commits_failed, ring_full_waits;
	_Atomic int last_error;
	uint8_t pad[64];
};

struct shared {
	_Atomic int stop_workers, stop_consumer;
	struct worker_stats w[MAX_WORKERS];
	/* consumer results */
	_Atomic uint64_t delivered_tokens, delivered_commits, generations_done, consumer_errors;
	_Atomic int consumer_ready, consumer_error;
	char consumer_msg[256];
	struct wl_doc docs[MAX_DOCS];
	/* the request sequence: ticket -> document, and whether L2 served it */
	_Atomic uint64_t ticket;
	uint16_t seq_doc[MAX_SEQ];
	uint8_t seq_hit[MAX_SEQ];
};

struct demo_opts {
	uint32_t workers, docs, min_tokens, max_tokens, seconds;
	double zipf;
	uint64_t arena_bytes;
	const char *l3dir;
	int trace, keep, json;
	struct wl_geometry g;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache demo [--workers N] [--seconds S] [--docs N] [--min-tokens N] [--max-tokens N]\n"
		"                       [--layers N] [--kv-heads N] [--head-dim N] [--recurrent-bytes SIZE]\n"
		"                       [--arena-size SIZE] [--zipf S] [--l3 DIR] [--no-trace] [--keep] [--json]\n\n"
		"Run the main scene: stage workers sharing one arena's L2, L3 fills through io_uring with\n"
		"promotion, commit rings with a verifying consumer, and `stagecache trace` (when root).\n\n"
		"  --workers N          stage worker processes (default 4)\n"
		"  --seconds S          how long the workers serve requests (default 30)\n"
		"  --docs N             distinct prompt prefixes stored in L3 (default 384: about 4.7x the L2 budget)\n"
		"  --min-tokens N       shortest prefix (default 32)   --max-tokens N  longest (default 2048)\n"
		"  --layers N --kv-heads N --head-dim N   model geometry, fp16 KV (default 8, 4, 64: 8 KiB/token,\n"
		"                       so prefixes of 256 KiB to 16 MiB)\n"
		"  --recurrent-bytes SIZE  recurrent state per payload (default 16K)\n"
		"  --arena-size SIZE    arena size (default 320M; smaller than the L3 working set, so L2 evicts)\n"
		"  --zipf S             Zipf exponent of document popularity (default 0.9)\n"
		"  --l3 DIR             L3 directory (default a fresh one under /var/tmp, removed after)\n"
		"  --no-trace           do not start `stagecache trace`\n"
		"  --keep               keep the arena and the L3 directory\n"
		"  --json               print the summary as one JSON object\n"
		"Exit status 0 when every restored payload verified and every token arrived exactly once.\n");
}

static int parse(int argc, char **argv, struct demo_opts *o)
{
	const struct cli_opt opts[] = {
		{ "workers", CLI_U32, &o->workers, 1, MAX_WORKERS },
		{ "seconds", CLI_U32, &o->seconds, 1, 3600 },
		{ "docs", CLI_U32, &o->docs, 1, MAX_DOCS },
		{ "min-tokens", CLI_U32, &o->min_tokens, 1, 1 << 20 },
		{ "max-tokens", CLI_U32, &o->max_tokens, 1, 1 << 20 },
		{ "layers", CLI_U32, &o->g.layers, 1, 1024 },
		{ "kv-heads", CLI_U32, &o->g.kv_heads, 1, 1024 },
		{ "head-dim", CLI_U32, &o->g.head_dim, 1, 4096 },
		{ "recurrent-bytes", CLI_SIZE32, &o->g.recurrent_bytes, 8, 64u << 20, "" },
		{ "arena-size", CLI_SIZE, &o->arena_bytes, SC_ARENA_MIN_BYTES, UINT64_MAX, "" },
		{ "zipf", CLI_REAL, &o->zipf, 0, 5 },
		{ "l3", CLI_STR, &o->l3dir },
		{ "no-trace", CLI_UNFLAG, &o->trace },
		{ "keep", CLI_FLAG, &o->keep },
		{ "json", CLI_FLAG, &o->json },
		{ 0 },
	};
	int rc = cli_parse_opts("demo", argc, argv, opts, usage);
	if (rc)
		return rc;
	if (optind != argc)
		return cli_usage_error("demo", "unexpected argument '%s'", cli_q(argv[optind]));
	if (o->min_tokens > o->max_tokens)
		return cli_usage_error("demo", "--min-tokens is larger than --max-tokens");
	return 0;
}

/* ---- the consumer: every generation verified token by token ---- */

struct gen_state {
	uint64_t request_id; /* current request of this worker (0: none yet) */
	uint64_t next;       /* tokens seen so far */
};

struct consumer_ctx {
	struct shared *sh;
	struct gen_state per_worker[MAX_WORKERS];
};

static void consumer_error(struct consumer_ctx *cx, const char *msg, const struct sc_commit *c)
{
	if (atomic_fetch_add(&cx->sh->consumer_errors, 1) == 0)
		snprintf(cx->sh->consumer_msg, sizeof(cx->sh->consumer_msg),
			 "%s: request %llx, total %llu, %u tokens, flags %u", msg, (unsigned long long)c->request_id,
			 (unsigned long long)c->generated_token_count, c->token_count, c->flags);
}

static int on_commit(const struct sc_commit *c, void *p)
{
	struct consumer_ctx *cx = p;
	uint32_t w = (uint32_t)(c->request_id >> 40);
	if (w >= MAX_WORKERS) {
		consumer_error(cx, "commit from an unknown worker", c);
		return 0;
	}
	struct gen_state *g = &cx->per_worker[w];
	if (g->request_id != c->request_id) {
		/* a new generation of this worker: the previous one must have ended with a terminal */
		if (g->request_id && g->next)
			consumer_error(cx, "generation started before the previous one ended", c);
		g->request_id = c->request_id;
		g->next = 0;
	}
	for (uint32_t i = 0; i < c->token_count; i++)
		if (c->tokens[i] != wl_gen_token(c->request_id, g->next + i)) {
			consumer_error(cx, "wrong token", c);
			break;
		}
	g->next += c->token_count;
	if (c->generated_token_count != g->next)
		consumer_error(cx, "running total does not match the tokens delivered", c);
	atomic_fetch_add(&cx->sh->delivered_tokens, c->token_count);
	atomic_fetch_add(&cx->sh->delivered_commits, 1);
	if (c->flags & (SC_COMMIT_FINISHED | SC_COMMIT_ABORTED)) {
		if (g->next != wl_gen_length(c->request_id))
			consumer_error(cx, "generation ended with the wrong length", c);
		atomic_fetch_add(&cx->sh->generations_done, 1);
		g->next = 0;
	}
	return 0;
}

static int consumer_main(const char *arena_name, struct shared *sh)
{
	struct sc_arena *a;
	int rc = sc_arena_open(arena_name, &a);
	if (rc) {
		atomic_store(&sh->consumer_error, rc);
		atomic_store(&sh->consumer_ready, 1);
		return 1;
	}
	static struct consumer_ctx cx;
	cx.sh = sh;
	atomic_store(&sh->consumer_ready, 1);
	/* done when told to stop and the rings stayed empty for 200 ms */
	if ((rc = wl_drain_rings(a, on_commit, &cx, &sh->stop_consumer, 200000000ull, NULL, NULL)))
		atomic_store(&sh->consumer_error, rc);
	sc_ring_consumer_close(a);
	sc_arena_close(a);
	return 0;
}

/* ---- a stage worker ---- */

/* Restore @doc's prefix (from L2, or filled from L3 and perhaps promoted) and check what was
 * served: the right prefix, and bytes that hash to its digest. Records the outcome of @ticket;
 * -1 when the restore failed (counted). */
static int serve(struct shared *sh, struct worker_stats *ws, struct sc_stage *st, struct sc_l3 *l3,
		 const struct wl_doc *doc, uint64_t request_id, uint64_t ticket, int32_t *tokens)
{
	uint32_t n = wl_prompt(doc, request_id, 8 + (uint32_t)(request_id % 32), tokens);
	struct sc_restore r;
	int rc = sc_restore(st, l3, NS, tokens, n, SC_RESTORE_WAIT, &r);
	if (rc < 0) {
		atomic_fetch_add(&ws->errors, 1);
		atomic_store(&ws->last_error, rc);
		return -1;
	}
	if ((uint32_t)rc != doc->token_count || !sc_digest_equal(r.digest, doc->digest) ||
	    !sc_digest_equal(sc_digest_sections(r.sec[0], r.sec_len[0], r.sec[1], r.sec_len[1]), doc->digest))
		atomic_fetch_add(&ws->verify_errors, 1);
	if (ticket < MAX_SEQ)
		sh->seq_hit[ticket] = r.source == SC_RESTORE_FROM_L2;
	if (r.source == SC_RESTORE_FROM_L2) {
		atomic_fetch_add(&ws->from_l2, 1);
	} else {
		atomic_fetch_add(&ws->from_l3, 1);
		atomic_fetch_add(&ws->fill_bytes, r.sec_len[0] + r.sec_len[1]);
		atomic_fetch_add(&ws->fill_ns, r.fill_ns);
		if (r.promoted)
			atomic_fetch_add(&ws->promoted, 1);
	}
	sc_restore_release(&r);
	return 0;
}

/* Decode: tokens 5 ms apart in model time, batched by the commit batcher. */
static void decode(struct worker_stats *ws, struct sc_ring *ring, uint64_t request_id, const struct wl_doc *doc)
{
	struct sc_batcher b;
	sc_batcher_init(&b, ring, request_id, doc->id);
	uint32_t len = wl_gen_length(request_id);
	for (uint32_t i = 0; i < len; i++) {
		while (sc_batcher_commit(&b, wl_gen_token(request_id, i), (uint64_t)i * 5000000ull) == -EAGAIN) {
			atomic_fetch_add(&ws->ring_full_waits, 1);
			usleep(200);
		}
	}
	while (sc_batcher_finish(&b, SC_COMMIT_FINISHED) == -EAGAIN)
		usleep(200);
	atomic_fetch_add(&ws->tokens, len);
	atomic_fetch_add(&ws->requests, 1);
}

static int worker_main(uint32_t id, const char *arena_name, const char *l3dir, const struct demo_opts *o,
		       struct shared *sh)
{
	struct worker_stats *ws = &sh->w[id];
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	struct sc_l3 *l3 = NULL;
	struct sc_ring *ring = NULL;
	struct wl_zipf z = { 0 };
	int32_t *tokens = NULL;
	int rc;
	struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_RECONCILE };
	if ((rc = sc_arena_open(arena_name, &a)) || (rc = sc_stage_open(a, MODEL, STATE, &st)) ||
	    (rc = sc_l3_open(l3dir, &lo, &l3)) || (rc = sc_l3_bind_arena(l3, a)) || (rc = sc_ring_open(a, &ring)) ||
	    (rc = wl_zipf_init(&z, o->docs, o->zipf)))
		goto out;
	tokens = malloc(sizeof(int32_t) * (o->max_tokens + 64));
	if (!tokens) {
		rc = -ENOMEM;
		goto out;
	}
	uint64_t rng = wl_mix(0xd3e0 + id), seq = 0;
	while (!atomic_load(&sh->stop_workers)) {
		const struct wl_doc *doc = &sh->docs[wl_zipf_next(&z, &rng)];
		uint64_t request_id = ((uint64_t)id << 40) | ++seq;
		uint64_t ticket = atomic_fetch_add(&sh->ticket, 1);
		if (ticket < MAX_SEQ)
			sh->seq_doc[ticket] = (uint16_t)doc->id;
		if (serve(sh, ws, st, l3, doc, request_id, ticket, tokens) == 0)
			decode(ws, ring, request_id, doc);
	}
	rc = 0;
out:
	if (rc) {
		atomic_store(&ws->last_error, rc);
		atomic_fetch_add(&ws->errors, 1);
	}
	free(tokens);
	wl_zipf_free(&z);
	sc_ring_close(ring);
	sc_l3_close(l3);
	sc_stage_close(st);
	sc_arena_close(a);
	return rc ? 1 : 0;
}

/* ---- the L3 store: synthetic objects ---- */

static int populate_l3(struct sc_l3 *l3, const struct demo_opts *o, struct shared *sh, int tty)
{
	uint64_t bytes = 0;
	double t0 = cli_now();
	int32_t *tokens = malloc(sizeof(int32_t) * (o->max_tokens + 1));
	if (!tokens)
		return -ENOMEM;
	for (uint32_t i = 0; i < o->docs; i++) {
		struct wl_doc *d = &sh->docs[i];
		struct wl_payload p;
		int rc = wl_payload_build(&o->g, d, &p);
		if (rc) {
			free(tokens);
			return rc;
		}
		wl_prompt(d, 0, 0, tokens);
		struct sc_l3_put_args args = {
			.model_identity = MODEL, .state_identity = STATE, .ns = NS,
			.tokens = tokens, .token_count = d->token_count, .payload = &p.p,
		};
		rc = sc_l3_put(l3, &args, NULL);
		wl_payload_free(&p);
		if (rc) {
			free(tokens);
			return rc;
		}
		bytes += d->payload_bytes;
		if (tty || i + 1 == o->docs) {
			char hb[32];
			fprintf(stderr, "\rL3: wrote %u/%u objects, %s, %.1f s   ", i + 1, o->docs,
				cli_human(bytes, hb, sizeof(hb)), cli_now() - t0);
		}
	}
	fprintf(stderr, "\n");
	free(tokens);
	return 0;
}

/* ---- trace in the background ---- */

static pid_t start_trace(const char *self, const char *log, const char *pindir, uint32_t seconds)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
	}
	char dur[32];
	snprintf(dur, sizeof(dur), "%u", seconds + 60);
	execl(self, self, "trace", "--json", "--interval", "1", "--duration", dur, "--pin-dir", pindir, (char *)NULL);
	_exit(127);
}

/* Wait until the trace log has its "ready" line (or the tracer died). */
static int trace_wait_ready(pid_t pid, const char *log)
{
	for (int i = 0; i < 300; i++) {
		FILE *f = fopen(log, "r");
		char line[4096];
		int ready = 0;
		while (f && fgets(line, sizeof(line), f))
			ready |= strstr(line, "\"type\":\"ready\"") != NULL;
		if (f)
			fclose(f);
		if (ready)
			return 0;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		usleep(100000);
	}
	return -1;
}

struct trace_totals {
	uint64_t hits, promotion_hits, misses, admits, promotions, evictions, fills, fill_bytes, commits;
	uint64_t index_hits, fallbacks, collisions;
	uint64_t published, rejects;
	int have;
};

static uint64_t sum_key(const char *line, const char *key)
{
	uint64_t sum = 0;
	size_t kl = strlen(key);
	for (const char *p = line; (p = strstr(p, key)); p += kl)
		sum += strtoull(p + kl, NULL, 10);
	return sum;
}

static void trace_read_totals(const char *log, struct trace_totals *t)
{
	memset(t, 0, sizeof(*t));
	FILE *f = fopen(log, "r");
	if (!f)
		return;
	static char line[1 << 16], last[1 << 16];
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "\"type\":\"interval\""))
			memcpy(last, line, sizeof(last)), t->have = 1;
	fclose(f);
	if (!t->have)
		return;
	t->hits = sum_key(last, "\"hits\":");
	t->promotion_hits = sum_key(last, "\"promotion_hits\":");
	t->misses = sum_key(last, "\"misses\":");
	t->admits = sum_key(last, "\"admits\":");
	t->promotions = sum_key(last, "\"promotions\":");
	t->evictions = sum_key(last, "\"evictions\":");
	t->fills = sum_key(last, "\"fills\":");
	t->fill_bytes = sum_key(last, "\"fill_bytes\":");
	t->commits = sum_key(last, "\"commits\":");
	t->index_hits = sum_key(last, "\"index_hits\":");
	t->fallbacks = sum_key(last, "\"fallbacks\":");
	t->collisions = sum_key(last, "\"key_collisions\":");
	t->published = sum_key(last, "\"promotions_published\":");
	t->rejects = sum_key(last, "\"rejects\":");
}

/* ---- the same requests through simulators ---- */

struct sim_out {
	uint64_t n;                        /* requests recorded */
	struct psim_result real, sim[3];   /* L2 as served, then LRU, S3-FIFO, OPT */
	int ok;
};

/* The footprint L2 charges for a document promoted from a fill (lib/restore.c reserves the
 * payload rounded up to 4 KiB, with room for the KV descriptor): a reservation's block is whole
 * pages behind its 64-byte header, where sc_l2_footprint prices an entry copied in (packed). */
static uint64_t doc_cost(const struct wl_doc *d)
{
	uint64_t fp = sc_l2_footprint(NULL, (d->payload_bytes + 4095) & ~4095ull, 1, d->token_count);
	return fp == UINT64_MAX ? fp : ((fp - 64 + 4095) & ~4095ull) + 64;
}

static void simulate(const struct shared *sh, uint32_t ndocs, uint64_t capacity, struct sim_out *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t n = atomic_load(&sh->ticket);
	if (n > MAX_SEQ)
		n = MAX_SEQ;
	out->n = n;
	uint64_t cost[MAX_DOCS], bytes[MAX_DOCS];
	for (uint32_t i = 0; i < ndocs; i++) {
		cost[i] = doc_cost(&sh->docs[i]);
		bytes[i] = sh->docs[i].payload_bytes;
	}
	uint32_t *req = malloc((n ? n : 1) * sizeof(uint32_t));
	if (!req)
		return;
	for (uint64_t i = 0; i < n; i++) {
		req[i] = sh->seq_doc[i];
		uint64_t b = bytes[req[i]];
		out->real.reqs++;
		out->real.req_bytes += b;
		if (sh->seq_hit[i]) {
			out->real.hits++;
			out->real.hit_bytes += b;
		}
	}
	struct psim_trace t = { ndocs, cost, bytes, (uint32_t)n, req };
	out->ok = 1;
	for (int p = 0; p < 3; p++)
		out->ok &= psim_run((enum psim_policy)p, &t, capacity, NULL, NULL, &out->sim[p]) == 0;
	free(req);
}

/* ---- the scene ---- */

struct totals {
	uint64_t requests, from_l2, from_l3, promoted, fill_bytes, fill_ns, verify_errors, errors, tokens, waits;
	int last_error;
};

static void sum_workers(const struct shared *sh, uint32_t n, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (uint32_t i = 0; i < n; i++) {
		const struct worker_stats *w = &sh->w[i];
		t->requests += w->requests;
		t->from_l2 += w->from_l2;
		t->from_l3 += w->from_l3;
		t->promoted += w->promoted;
		t->fill_bytes += w->fill_bytes;
		t->fill_ns += w->fill_ns;
		t->verify_errors += w->verify_errors;
		t->errors += w->errors;
		t->tokens += w->tokens;
		t->waits += w->ring_full_waits;
		if (w->last_error)
			t->last_error = w->last_error;
	}
}

/* Everything one run of the demo holds: its names, handles, processes, and what it measured. */
struct demo {
	struct demo_opts o;
	int tty, root;
	char arena_name[64], l3buf[256], tlog[256], pindir[256], self[4096];
	const char *l3dir;
	int own_l3;
	struct shared *sh;
	struct sc_arena *a;
	struct sc_arena_info info;
	pid_t tracer, consumer, workers[MAX_WORKERS];
	uint32_t nworkers;
	/* the run: the L2 hit ratio per window of win_s seconds */
	double t0, window_hit[WINDOWS], elapsed;
	uint32_t nwin, win_s;
	int worker_fail;
	/* the results */
	struct sc_l2_stats l2s;
	struct sc_promote_stats ps;
	struct sc_l3_index_stats xs;
	struct trace_totals tt;
	struct totals cur;
	struct sim_out so;
	uint64_t delivered, cerr, verify, refused_sum, l2_refused_sum;
};

/* Names of this run's arena, L3 directory, trace log and pin directory; the shared page. */
static int demo_init(struct demo *d)
{
	int pid = (int)getpid();
	d->tty = isatty(2);
	d->root = geteuid() == 0;
	d->tracer = d->consumer = -1;
	snprintf(d->arena_name, sizeof(d->arena_name), "demo-%d", pid);
	snprintf(d->tlog, sizeof(d->tlog), "/tmp/stagecache-demo-%d-trace.log", pid);
	snprintf(d->pindir, sizeof(d->pindir), "/sys/fs/bpf/stagecache-demo-%d", pid);
	ssize_t sl = readlink("/proc/self/exe", d->self, sizeof(d->self) - 1);
	d->self[sl > 0 ? sl : 0] = 0;
	d->l3dir = d->o.l3dir;
	d->own_l3 = !d->l3dir;
	if (d->own_l3) {
		snprintf(d->l3buf, sizeof(d->l3buf), "/var/tmp/stagecache-demo-%d", pid);
		d->l3dir = d->l3buf;
	}
	d->sh = mmap(NULL, sizeof(*d->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return d->sh == MAP_FAILED ? -errno : 0;
}

/* 1. the arena */
static int make_arena(struct demo *d)
{
	struct sc_arena_opts ao = { .size_bytes = d->o.arena_bytes, .huge = SC_HUGE_AUTO };
	int r = sc_arena_create(d->arena_name, &ao, &d->a);
	if (r)
		return cli_fail("demo", r, "cannot create the arena");
	sc_arena_info(d->a, &d->info);
	char hb[32];
	printf("arena %s: %s, backing %s%s\n", d->arena_name, cli_human(d->info.size_bytes, hb, sizeof(hb)),
	       sc_backing_name(d->info.backing),
	       d->info.backing == SC_BACKING_HUGETLBFS_2M ? "" :
	       d->root ? " (no free 2 MiB hugepages on a hugetlbfs mount: fell back; run stagecache setup)" :
			 " (not root: no hugepages reserved; fell back)");
	return 0;
}

/* 2. the L3 store: the documents written, and how their footprints compare with the L2 budget */
static int make_l3(struct demo *d)
{
	const struct demo_opts *o = &d->o;
	struct sc_l3 *l3 = NULL;
	struct sc_l3_opts lo = { 0 };
	char hb[32], hb2[32];
	int r = sc_l3_open(d->l3dir, &lo, &l3);
	if (r)
		return cli_fail("demo", r, "cannot open L3 directory %s", d->l3dir);
	wl_docs_make(d->sh->docs, o->docs, o->min_tokens, o->max_tokens, 0x5eed);
	printf("L3 %s: %u documents of %u-%u tokens, %s per token (%u layers x %u KV heads x %u dims, fp16)\n",
	       d->l3dir, o->docs, o->min_tokens, o->max_tokens, cli_human(wl_kv_bytes_per_token(&o->g), hb, sizeof(hb)),
	       o->g.layers, o->g.kv_heads, o->g.head_dim);
	r = populate_l3(l3, o, d->sh, d->tty);
	struct sc_l3_stats l3s;
	if (!r && sc_l3_stats(l3, &l3s) == 0)
		printf("L3 bytes: logical %llu, physical %llu, saved %llu (segments %llu)\n", (unsigned long long)l3s.logical_bytes,
		       (unsigned long long)l3s.physical_bytes, (unsigned long long)l3s.saved_bytes, (unsigned long long)l3s.segments);
	sc_l3_close(l3);
	if (r)
		return cli_fail("demo", r, "cannot write the L3 objects");
	struct sc_l2_stats l2s0;
	uint64_t ws = 0;
	for (uint32_t i = 0; i < o->docs; i++)
		ws += doc_cost(&d->sh->docs[i]);
	if (sc_l2_stats(d->a, NULL, &l2s0) == 0)
		printf("working set: %s of L2 footprints = %.2f x the L2 budget (%s): L2 must choose\n",
		       cli_human(ws, hb, sizeof(hb)), (double)ws / (double)l2s0.budget_bytes,
		       cli_human(l2s0.budget_bytes, hb2, sizeof(hb2)));
	return 0;
}

static void stop_tracer(struct demo *d)
{
	if (d->tracer > 0) {
		kill(d->tracer, SIGINT);
		waitpid(d->tracer, NULL, 0);
	}
	d->tracer = -1;
}

/* 3. `stagecache trace` in the background (root only); the demo goes on without it */
static void start_tracing(struct demo *d)
{
	if (!d->o.trace)
		return;
	if (!d->root) {
		printf("trace: skipped (not root: loading eBPF programs needs root)\n");
		return;
	}
	d->tracer = start_trace(d->self, d->tlog, d->pindir, d->o.seconds);
	if (trace_wait_ready(d->tracer, d->tlog)) {
		printf("trace: could not attach (see %s); going on without it\n", d->tlog);
		stop_tracer(d);
	} else {
		printf("trace: eBPF programs attached to the library's USDT probes (maps pinned in %s)\n", d->pindir);
	}
}

/* 4. the consumer, then the workers */
static int start_processes(struct demo *d)
{
	struct shared *sh = d->sh;
	d->consumer = fork();
	if (d->consumer == 0)
		_exit(consumer_main(d->arena_name, sh));
	while (!atomic_load(&sh->consumer_ready))
		usleep(1000);
	if (atomic_load(&sh->consumer_error))
		return cli_fail("demo", atomic_load(&sh->consumer_error), "the consumer could not start");
	printf("running %u workers for %u s (Zipf %.2f over %u documents) ...\n", d->o.workers, d->o.seconds,
	       d->o.zipf, d->o.docs);
	fflush(stdout);
	for (uint32_t i = 0; i < d->o.workers; i++) {
		d->workers[i] = fork();
		if (d->workers[i] == 0)
			_exit(worker_main(i, d->arena_name, d->l3dir, &d->o, sh));
		d->nworkers++;
	}
	return 0;
}

/* One progress line: the totals so far and the rates over the last @dt seconds. */
static void print_progress(const struct demo *d, double at, double dt, const struct totals *cur,
			   const struct totals *prev)
{
	uint64_t dreq = cur->requests - prev->requests;
	uint64_t dl2 = cur->from_l2 - prev->from_l2, dl3 = cur->from_l3 - prev->from_l3;
	fprintf(stderr, "%s[%3.0fs] requests %llu (%.0f/s)  L2 hit %.1f%%  promotions %llu  fill %.2f GB/s  "
			"tokens %llu -> %llu delivered  errors %llu%s",
		d->tty ? "\r" : "", at, (unsigned long long)cur->requests, (double)dreq / dt,
		dl2 + dl3 ? 100.0 * (double)dl2 / (double)(dl2 + dl3) : 0.0, (unsigned long long)cur->promoted,
		(double)(cur->fill_bytes - prev->fill_bytes) / dt / 1e9, (unsigned long long)cur->tokens,
		(unsigned long long)atomic_load(&d->sh->delivered_tokens),
		(unsigned long long)(cur->verify_errors + cur->errors + atomic_load(&d->sh->consumer_errors)),
		d->tty ? "   " : "\n");
}

/* 5. progress once a second, and the L2 hit ratio per window, for --seconds */
static void watch(struct demo *d)
{
	double t0 = d->t0 = cli_now(), last = t0;
	struct totals prev = { 0 }, cur, win_prev = { 0 };
	d->win_s = d->o.seconds <= 20 ? 2 : 5;
	while (cli_now() - t0 < d->o.seconds) {
		usleep(250000);
		double now = cli_now();
		if (now - last < 1.0)
			continue;
		sum_workers(d->sh, d->o.workers, &cur);
		print_progress(d, now - t0, now - last, &cur, &prev);
		if ((uint32_t)((now - t0) / d->win_s) > d->nwin && d->nwin < WINDOWS) {
			uint64_t a2 = cur.from_l2 - win_prev.from_l2, a3 = cur.from_l3 - win_prev.from_l3;
			d->window_hit[d->nwin++] = a2 + a3 ? (double)a2 / (double)(a2 + a3) : 0;
			win_prev = cur;
		}
		prev = cur;
		last = now;
	}
	if (d->tty)
		fprintf(stderr, "\n");
}

/* Stop the workers, then (once the rings are drained) the consumer. */
static void stop_processes(struct demo *d, int *worker_fail)
{
	atomic_store(&d->sh->stop_workers, 1);
	for (uint32_t i = 0; i < d->nworkers; i++) {
		int status;
		waitpid(d->workers[i], &status, 0);
		if (worker_fail)
			*worker_fail |= !WIFEXITED(status) || WEXITSTATUS(status);
	}
	d->nworkers = 0;
	if (d->consumer > 0) {
		atomic_store(&d->sh->stop_consumer, 1);
		waitpid(d->consumer, NULL, 0);
	}
	d->consumer = -1;
}

/* 6. counters: the library's own, eBPF's, and the same requests through the simulators */
static void collect(struct demo *d)
{
	sc_l2_stats(d->a, NULL, &d->l2s);
	sc_promote_stats(d->a, &d->ps);
	sc_l3_index_stats(d->a, &d->xs);
	if (d->tracer > 0) {
		usleep(1500000); /* one more interval so the last snapshot includes everything */
		stop_tracer(d);
		trace_read_totals(d->tlog, &d->tt);
	}
	sum_workers(d->sh, d->o.workers, &d->cur);
	d->delivered = atomic_load(&d->sh->delivered_tokens);
	d->cerr = atomic_load(&d->sh->consumer_errors);
	d->verify = d->cur.verify_errors + d->cerr + (d->delivered != d->cur.tokens);
	simulate(d->sh, d->o.docs, d->l2s.budget_bytes, &d->so);
	for (int i = 0; i < SC_L2_REFUSE_COUNT; i++) {
		d->refused_sum += d->ps.refused[i];
		d->l2_refused_sum += d->l2s.refused[i];
	}
}

/* {"name":count,...} of refusals by reason, all of them */
static void json_refusals(const uint64_t *refused)
{
	for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
		printf("%s\"%s\":%llu", i ? "," : "", sc_l2_refusal_name(i), (unsigned long long)refused[i]);
}

static void report_json(const struct demo *d)
{
	const struct totals *cur = &d->cur;
	const struct sim_out *so = &d->so;
	const struct trace_totals *tt = &d->tt;
	printf("{\"seconds\":%.1f,\"workers\":%u,\"backing\":\"%s\",\"requests\":%llu,\"from_l2\":%llu,"
	       "\"from_l3\":%llu,\"promotions\":%llu,\"fill_gb_per_s\":%.3f,\"tokens_produced\":%llu,"
	       "\"tokens_delivered\":%llu,\"commits\":%llu,\"verification_errors\":%llu,\"errors\":%llu,"
	       "\"l2\":{\"hits\":%llu,\"misses\":%llu,\"inserts\":%llu,\"evictions\":%llu,\"budget_bytes\":%llu,"
	       "\"logical_bytes\":%llu,\"physical_bytes\":%llu,\"saved_bytes\":%llu,\"refused\":{",
	       d->elapsed, d->o.workers, sc_backing_name(d->info.backing), (unsigned long long)cur->requests,
	       (unsigned long long)cur->from_l2, (unsigned long long)cur->from_l3, (unsigned long long)cur->promoted,
	       cur->fill_ns ? (double)cur->fill_bytes / (double)cur->fill_ns : 0.0, (unsigned long long)cur->tokens,
	       (unsigned long long)d->delivered, (unsigned long long)atomic_load(&d->sh->delivered_commits),
	       (unsigned long long)d->verify, (unsigned long long)cur->errors, (unsigned long long)d->l2s.hits,
	       (unsigned long long)d->l2s.misses, (unsigned long long)d->l2s.inserts,
	       (unsigned long long)d->l2s.evictions, (unsigned long long)d->l2s.budget_bytes,
	       (unsigned long long)d->l2s.logical_bytes, (unsigned long long)d->l2s.physical_bytes,
	       (unsigned long long)d->l2s.saved_bytes);
	json_refusals(d->l2s.refused);
	printf("}},\"promotion\":{\"decided\":%llu,\"published\":%llu,\"refused\":{", (unsigned long long)d->ps.promoted,
	       (unsigned long long)d->ps.published);
	json_refusals(d->ps.refused);
	printf("}},\"same_requests\":{\"requests\":%llu,\"object_hit\":{\"l2\":%.4f", (unsigned long long)so->n,
	       psim_object_ratio(&so->real));
	for (int p = 0; p < 3 && so->ok; p++)
		printf(",\"%s\":%.4f", psim_name((enum psim_policy)p), psim_object_ratio(&so->sim[p]));
	printf("},\"byte_hit\":{\"l2\":%.4f", psim_byte_ratio(&so->real));
	for (int p = 0; p < 3 && so->ok; p++)
		printf(",\"%s\":%.4f", psim_name((enum psim_policy)p), psim_byte_ratio(&so->sim[p]));
	printf("}},\"l3_index\":{\"index_hits\":%llu,\"fallbacks\":%llu,\"key_collisions\":%llu},",
	       (unsigned long long)d->xs.hits, (unsigned long long)d->xs.fallbacks,
	       (unsigned long long)d->xs.key_collisions);
	printf("\"ebpf\":{\"attached\":%s,\"hits\":%llu,\"promotion_hits\":%llu,\"misses\":%llu,"
	       "\"promotions\":%llu,\"promotions_published\":%llu,\"rejects\":%llu,\"evictions\":%llu,"
	       "\"fills\":%llu,\"commits\":%llu},\"hit_ratio_windows\":[",
	       tt->have ? "true" : "false", (unsigned long long)tt->hits, (unsigned long long)tt->promotion_hits,
	       (unsigned long long)tt->misses, (unsigned long long)tt->promotions, (unsigned long long)tt->published,
	       (unsigned long long)tt->rejects, (unsigned long long)tt->evictions, (unsigned long long)tt->fills,
	       (unsigned long long)tt->commits);
	for (uint32_t i = 0; i < d->nwin; i++)
		printf("%s%.4f", i ? "," : "", d->window_hit[i]);
	printf("]}\n");
}

/* ": reason n, reason n" for the reasons with a count, nothing when there are none */
static void text_refusals(const uint64_t *refused)
{
	for (int i = 0, first = 1; i < SC_L2_REFUSE_COUNT; i++)
		if (refused[i]) {
			printf("%s%s %llu", first ? ": " : ", ", sc_l2_refusal_name(i), (unsigned long long)refused[i]);
			first = 0;
		}
}

/* Requests, where they were served from, and the hit ratio next to the simulators'. */
static void report_requests(const struct demo *d)
{
	const struct totals *cur = &d->cur;
	const struct sim_out *so = &d->so;
	char hb[32];
	printf("requests            %llu (%.0f/s)\n", (unsigned long long)cur->requests, (double)cur->requests / d->elapsed);
	printf("served from L2      %llu (%.1f%%)\n", (unsigned long long)cur->from_l2,
	       cur->requests ? 100.0 * (double)cur->from_l2 / (double)cur->requests : 0.0);
	printf("served from L3      %llu (fills: %s at %.2f GB/s)\n", (unsigned long long)cur->from_l3,
	       cli_human(cur->fill_bytes, hb, sizeof(hb)), cur->fill_ns ? (double)cur->fill_bytes / (double)cur->fill_ns : 0.0);
	printf("L2 hit ratio        ");
	for (uint32_t i = 0; i < d->nwin; i++)
		printf("%s%u-%us %.0f%%", i ? ", " : "", i * d->win_s, (i + 1) * d->win_s, 100 * d->window_hit[i]);
	printf("\n");
	if (so->ok && so->n) {
		printf("same requests       L2 %.1f%% | simulated with the L2 budget: LRU %.1f%%, S3-FIFO %.1f%%, "
		       "OPT %.1f%% (furthest next use)  [%llu requests, hit ratio by request]\n",
		       100 * psim_object_ratio(&so->real), 100 * psim_object_ratio(&so->sim[PSIM_LRU]),
		       100 * psim_object_ratio(&so->sim[PSIM_S3FIFO]), 100 * psim_object_ratio(&so->sim[PSIM_OPT]),
		       (unsigned long long)so->n);
		printf("  by bytes          L2 %.1f%% | LRU %.1f%%, S3-FIFO %.1f%%, OPT %.1f%%\n",
		       100 * psim_byte_ratio(&so->real), 100 * psim_byte_ratio(&so->sim[PSIM_LRU]),
		       100 * psim_byte_ratio(&so->sim[PSIM_S3FIFO]), 100 * psim_byte_ratio(&so->sim[PSIM_OPT]));
		double dr = 100 * (psim_object_ratio(&so->real) - psim_object_ratio(&so->sim[PSIM_LRU]));
		double db = 100 * (psim_byte_ratio(&so->real) - psim_byte_ratio(&so->sim[PSIM_LRU]));
		printf("  L2 - LRU          %+.1f points by request, %+.1f by bytes (%s)\n", dr, db,
		       dr >= 0 && db >= 0 ? "not below LRU" : "BELOW LRU");
	}
}

/* Promotions decided, published and refused; L2's refusals; what the consumer verified. */
static void report_outcomes(const struct demo *d)
{
	const struct sc_promote_stats *ps = &d->ps;
	printf("promotions          %llu decided by the policy, %llu published in L2, %llu refused",
	       (unsigned long long)ps->promoted, (unsigned long long)ps->published, (unsigned long long)d->refused_sum);
	text_refusals(ps->refused);
	printf(" (%u observations)\n", ps->observations);
	printf("                    decided - published = %llu %s the refusals%s\n",
	       (unsigned long long)(ps->promoted - ps->published), ps->promoted - ps->published == d->refused_sum ? "=" : "!=",
	       d->cur.promoted == ps->published ? "" : " (workers counted a different number published!)");
	printf("L2 refusals         %llu", (unsigned long long)d->l2_refused_sum);
	text_refusals(d->l2s.refused);
	printf(" (every admission and reservation L2 turned down, by reason)\n");
	printf("commits delivered   %llu\n", (unsigned long long)atomic_load(&d->sh->delivered_commits));
	printf("tokens              %llu produced, %llu delivered, %llu generations verified\n",
	       (unsigned long long)d->cur.tokens, (unsigned long long)d->delivered,
	       (unsigned long long)atomic_load(&d->sh->generations_done));
	printf("verification errors %llu%s%s\n", (unsigned long long)d->verify, d->cerr ? "  first: " : "",
	       d->cerr ? d->sh->consumer_msg : "");
	if (d->cur.errors)
		printf("request errors      %llu (last: %s)\n", (unsigned long long)d->cur.errors,
		       sc_strerror(d->cur.last_error));
}

/* The library's counters next to eBPF's ("-" without a tracer). */
static void report_counters(const struct demo *d)
{
	const struct trace_totals *tt = &d->tt;
	char hb[32];
	printf("\n%-22s %14s %14s\n", "counter", "library", tt->have ? "eBPF" : "eBPF (off)");
#define ROW(label, lib, bpf) printf("%-22s %14llu %14s\n", label, (unsigned long long)(lib), tt->have ? (snprintf(hb, sizeof(hb), "%llu", (unsigned long long)(bpf)), hb) : "-")
	ROW("L2 hits", d->l2s.hits, tt->hits);
	ROW("  promotion hits", d->cur.from_l2, tt->promotion_hits);
	ROW("L2 misses", d->l2s.misses, tt->misses);
	ROW("L2 inserts", d->l2s.inserts, tt->admits);
	ROW("L2 evictions", d->l2s.evictions, tt->evictions);
	ROW("promotions", d->ps.promoted, tt->promotions);
	ROW("  published", d->ps.published, tt->published);
	ROW("L2 refusals", d->l2s.admission_rejects, tt->rejects);
	ROW("L3 fills", d->cur.from_l3, tt->fills);
	ROW("commits", atomic_load(&d->sh->delivered_commits), tt->commits);
	ROW("L3 index hits", d->xs.hits, tt->index_hits);
	ROW("L3 directory probes", d->xs.fallbacks, tt->fallbacks);
	ROW("key collisions", d->xs.key_collisions, tt->collisions);
#undef ROW
	printf("L2 bytes: logical %llu, physical %llu, saved %llu (segments %llu)\n",
	       (unsigned long long)d->l2s.logical_bytes, (unsigned long long)d->l2s.physical_bytes,
	       (unsigned long long)d->l2s.saved_bytes, (unsigned long long)d->l2s.segments);
	if (tt->have)
		printf("(pinned maps: bpftool map dump pinned %s/<map>; removed now)\n", d->pindir);
}

static void report_text(const struct demo *d)
{
	char hb[32];
	printf("\n== summary (%.1f s, %u workers, arena %s %s) ==\n", d->elapsed, d->o.workers,
	       cli_human(d->info.size_bytes, hb, sizeof(hb)), sc_backing_name(d->info.backing));
	report_requests(d);
	report_outcomes(d);
	report_counters(d);
}

/* Whatever is still running is stopped; the arena and L3 directory go unless --keep. */
static void cleanup(struct demo *d)
{
	stop_tracer(d);
	stop_processes(d, NULL);
	sc_arena_close(d->a);
	if (!d->o.keep) {
		sc_arena_destroy(NULL, d->arena_name);
		if (d->own_l3)
			cli_rm_rf(d->l3dir);
		unlink(d->tlog);
	} else {
		printf("kept: arena %s, L3 %s\n", d->arena_name, d->l3dir);
	}
	munmap(d->sh, sizeof(*d->sh));
}

int cmd_demo(int argc, char **argv)
{
	static struct demo d = { .o = { .workers = 4, .docs = 384, .min_tokens = 32, .max_tokens = 2048, .seconds = 30,
					.zipf = 0.9, .arena_bytes = 320u << 20, .trace = 1 } };
	wl_geometry_default(&d.o.g);
	int rc = parse(argc, argv, &d.o);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((rc = demo_init(&d)))
		return cli_fail("demo", rc, "mmap");

	rc = EXIT_FAIL;
	if (make_arena(&d) || make_l3(&d))
		goto out;
	start_tracing(&d);
	if (start_processes(&d))
		goto out;
	watch(&d);
	stop_processes(&d, &d.worker_fail);
	d.elapsed = cli_now() - d.t0;
	collect(&d);

	if (d.o.json)
		report_json(&d);
	else
		report_text(&d);
	rc = (d.verify || d.worker_fail || d.cur.errors) ? EXIT_FAIL : EXIT_OK;
	if (rc)
		fprintf(stderr, "stagecache demo: %s\n", d.verify ? "VERIFICATION FAILED" : "some requests failed");
out:
	cleanup(&d);
	return rc;
}
