/*
 * examples/llama/worker.c — sc-llama-worker: one llama.cpp inference worker sharing stagecache.
 *
 * It loads a GGUF model, then answers requests read from stdin, one per line, and writes one
 * result line per request to stdout (the driver, the bench and the tests speak this protocol):
 *
 *   req ID SESSION NGEN FLAGS N TOK...   a prompt of N token ids; generate NGEN tokens greedily.
 *                                        FLAGS: "-" or a comma list of nocache (neither restore
 *                                        nor export), noexport, export=last|all, calib (also time
 *                                        a memcpy of the restored bytes and llama.cpp's import
 *                                        from a private buffer)
 *   quit
 *
 *   ready model=... ns=... state_bytes_per_token=...           once, after the model loaded
 *   res ID prompt=N restored=P source=l2|l3|none ttft_us=... gen=T1,T2,... logits=DIGEST ...
 *   err ID message
 *
 * Per request: restore the longest stored prefix (sc_restore: L2, else an L3 fill) straight into
 * the llama context (llama_state_seq_set_data from the arena), decode the rest of the prompt in
 * batches that stop at block boundaries, sample greedily, stream each token through the commit
 * batcher into this worker's ring, and export the state at each block boundary passed (into L2
 * and L3; the model file's digest is in the stage's model identity).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "engine.h"

#define EXIT_USAGE 2

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sc-llama-worker --model FILE [--arena NAME --l3 DIR] [options]\n\n"
		"A llama.cpp worker that restores prompt prefixes from stagecache and exports its state to it.\n"
		"Reads requests from stdin, one per line, writes one result line per request:\n"
		"  req ID SESSION NGEN FLAGS N TOK...   (FLAGS: - or nocache,noexport,export=last|all,calib)\n"
		"  quit\n\n"
		"  --model FILE      a GGUF model (examples/llama/gen-model.py makes one)\n"
		"  --arena NAME      the stagecache arena (stagecache create NAME --size ...); none: no cache\n"
		"  --l3 DIR          the L3 directory (required with --arena)\n"
		"  --ns NS           namespace (default chat); the model's identity is appended to it\n"
		"  --block N         export every N tokens, batches stop there (default 256)\n"
		"  --export WHAT     all (every boundary passed, default), last (the prompt's last), none\n"
		"  --ctx N           context tokens (default 16384)\n"
		"  --threads N       llama.cpp threads (default: online CPUs)\n"
		"  --no-flash-attn   attention without flash attention (V transposed in the state)\n"
		"  --no-ring         do not stream generated tokens through a commit ring\n"
		"  --prefault        read every page of the arena once at start, as a long-lived worker will have\n"
		"                    (else the first restore of a state pays each page's first touch here)\n"
		"  --export-generated  also export boundaries passed while generating (the next turn then\n"
		"                    continues within a tolerance of a full prefill, not bit for bit)\n"
		"  --layout WHAT     llama (llama.cpp's state bytes as they are, default) or token-major (each\n"
		"                    block's cells, K and V rows together: segments can share blocks)\n"
		"  --engine-lib DIR  where the ggml CPU backends are (default: next to libllama, build/llama/lib)\n"
		"  --logits-dir DIR  write each request's generated logits to DIR/ID.f32 (float32, NGEN x vocab)\n"
		"  --ns-raw          use --ns as given (tests: another model's state must then be refused by\n"
		"                    its trailer)\n"
		"  --verbose         llama.cpp's log on stderr\n"
		"  --help\n");
}

struct req {
	unsigned long long id, session;
	uint32_t ngen, n;
	int nocache, noexport, calib;
	enum llc_export export_what;
	int32_t *tok; /* prompt, then what is generated: the sequence */
	uint32_t cap;
};

struct worker {
	struct eng e;
	struct llc c;
	int cache;
	enum llc_export export_what;
	const char *logits_dir;
	/* per request */
	struct req *r;
	uint32_t restored, export_last;
	int generating;      /* decoding generated tokens one at a time */
	int export_generated; /* --export-generated */
	uint64_t exports, get_ns, admit_ns, put_ns, export_fail;
};

/* Called at each block boundary the engine passes. */
static int on_boundary(struct eng *e, void *arg)
{
	struct worker *w = arg;
	struct req *r = w->r;
	uint32_t p = (uint32_t)e->n_past;
	if (!w->cache || r->nocache || r->noexport || p <= w->restored)
		return 0;
	/* A token decoded alone gets KV whose last bits differ from the same token's in a prompt
	 * batch (other kernels, other sums): a state exported while generating would make the next
	 * turn's continuation differ from a full prefill. Only prompt boundaries are exported, unless
	 * asked (--export-generated: more reuse, within the tolerance docs/TUTORIAL.md gives). */
	if (w->generating && !w->export_generated)
		return 0;
	if (r->export_what == LLC_EXPORT_NONE || (r->export_what == LLC_EXPORT_LAST && p != w->export_last))
		return 0;
	/* a driver or test that kills this worker while it exports watches for this line */
	fprintf(stderr, "export %llu %u\n", r->id, p);
	if (llc_export(&w->c, e, r->tok, &w->get_ns, &w->admit_ns, &w->put_ns))
		w->export_fail++;
	else
		w->exports++;
	return 0;
}

static int parse_req(char *line, struct req *r)
{
	char *save = NULL, *t = strtok_r(line, " \n", &save);
	char *flags;
	if (!t || strcmp(t, "req"))
		return -1;
	char *f[5];
	for (int i = 0; i < 5; i++)
		if (!(f[i] = strtok_r(NULL, " \n", &save)))
			return -1;
	r->id = strtoull(f[0], NULL, 10);
	r->session = strtoull(f[1], NULL, 10);
	r->ngen = (uint32_t)strtoul(f[2], NULL, 10);
	flags = f[3];
	unsigned long n = strtoul(f[4], NULL, 10);
	if (n == 0 || n > (1u << 24) || r->ngen > (1u << 20))
		return -1;
	r->n = (uint32_t)n;
	r->nocache = r->noexport = r->calib = 0;
	for (char *s2 = NULL, *fl = strtok_r(flags, ",", &s2); fl; fl = strtok_r(NULL, ",", &s2)) {
		if (!strcmp(fl, "nocache"))
			r->nocache = 1;
		else if (!strcmp(fl, "noexport"))
			r->noexport = 1;
		else if (!strcmp(fl, "calib"))
			r->calib = 1;
		else if (!strcmp(fl, "export=last"))
			r->export_what = LLC_EXPORT_LAST;
		else if (!strcmp(fl, "export=all"))
			r->export_what = LLC_EXPORT_ALL;
		else if (strcmp(fl, "-"))
			return -1;
	}
	if (r->n + r->ngen > r->cap) {
		int32_t *nt = realloc(r->tok, (size_t)(r->n + r->ngen + 1) * sizeof(int32_t));
		if (!nt)
			return -1;
		r->tok = nt, r->cap = r->n + r->ngen + 1;
	}
	for (uint32_t i = 0; i < r->n; i++) {
		char *v = strtok_r(NULL, " \n", &save), *end;
		if (!v)
			return -1;
		long x = strtol(v, &end, 10);
		if (*end || x < 0 || x > INT32_MAX)
			return -1;
		r->tok[i] = (int32_t)x;
	}
	return 0;
}

static const char *source_name(int s)
{
	return s == SC_RESTORE_FROM_L2 ? "l2" : s == SC_RESTORE_FROM_L3 ? "l3" : "none";
}

/* Hand one token to the batcher; a full ring (no consumer keeping up) never stops generation. */
static void stream(struct worker *w, struct sc_batcher *b, int32_t tok, uint64_t t0)
{
	if (!w->c.ring)
		return;
	int rc = sc_batcher_commit(b, tok, llc_now_ns() - t0);
	if (rc == -EAGAIN || rc == SC_BATCHER_DEFERRED)
		w->c.ring_full++;
}

static void serve(struct worker *w, struct req *r)
{
	struct eng *e = &w->e;
	uint64_t t0 = llc_now_ns();
	struct llc_restored rs = { 0 };
	w->r = r;
	w->restored = 0;
	w->generating = 0;
	w->exports = w->get_ns = w->admit_ns = w->put_ns = w->export_fail = 0;
	w->export_last = r->n / e->block * e->block;
	if ((uint64_t)r->n + r->ngen > e->n_ctx) {
		printf("err %llu prompt of %u tokens + %u generated exceeds the context (%u)\n", r->id, r->n, r->ngen,
		       e->n_ctx);
		fflush(stdout);
		return;
	}
	if (w->cache && !r->nocache) {
		int rc = llc_restore(&w->c, e, r->tok, r->n, r->calib, &rs);
		if (rc)
			fprintf(stderr, "sc-llama-worker: restore: %s (prefilling instead)\n", sc_strerror(rc));
		w->restored = rs.tokens;
	} else {
		eng_reset(e);
	}
	uint64_t t_restored = llc_now_ns();
	if (w->restored < r->n && eng_decode(e, r->tok + w->restored, r->n - w->restored, on_boundary, w)) {
		printf("err %llu llama_decode failed\n", r->id);
		fflush(stdout);
		return;
	}
	uint64_t t_prefilled = llc_now_ns();
	w->generating = 1;
	struct sc_batcher b;
	if (w->c.ring)
		sc_batcher_init(&b, w->c.ring, r->id, r->session);
	struct sc_digest ld = { 0, 0 };
	FILE *lf = NULL;
	if (w->logits_dir) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/%llu.f32", w->logits_dir, r->id);
		lf = fopen(p, "w");
	}
	uint64_t ttft = 0;
	uint32_t g = 0;
	for (; g < r->ngen; g++) {
		if (g > 0 && eng_decode(e, &r->tok[r->n + g - 1], 1, on_boundary, w))
			break;
		ld = sc_digest_sections(&ld, sizeof(ld), e->logits, (size_t)e->n_vocab * 4);
		if (lf)
			fwrite(e->logits, 4, (size_t)e->n_vocab, lf);
		r->tok[r->n + g] = eng_greedy(e);
		if (g == 0)
			ttft = llc_now_ns() - t0;
		stream(w, &b, r->tok[r->n + g], t0);
	}
	if (lf)
		fclose(lf);
	if (w->c.ring) {
		uint32_t flag = g == r->ngen ? SC_COMMIT_FINISHED : SC_COMMIT_ABORTED;
		/* a full ring: retry for at most 200 ms, then give the stream up (counted) */
		for (int i = 0; sc_batcher_finish(&b, flag) == -EAGAIN; i++) {
			if (i == 200) {
				w->c.ring_full++;
				break;
			}
			usleep(1000);
		}
	}
	uint64_t t_end = llc_now_ns();
	char hex[SC_DIGEST_HEX_LEN + 1], dhex[SC_DIGEST_HEX_LEN + 1];
	printf("res %llu prompt=%u restored=%u source=%s refused=%d promoted=%d generated=%u ttft_us=%.1f total_us=%.1f "
	       "restore_us=%.1f locate_us=%.1f lookup_us=%.1f fill_us=%.1f import_us=%.1f prefill_us=%.1f "
	       "decode_us=%.1f exports=%llu export_fail=%llu export_get_us=%.1f export_admit_us=%.1f "
	       "export_put_us=%.1f state_bytes=%llu memcpy_us=%.1f set_private_us=%.1f digest=%s logits=%s gen=",
	       r->id, r->n, w->restored, source_name(rs.source), rs.refused, rs.promoted, g, ttft / 1e3, (t_end - t0) / 1e3,
	       rs.restore_ns / 1e3, rs.locate_ns / 1e3, rs.lookup_ns / 1e3, rs.fill_ns / 1e3, rs.import_ns / 1e3,
	       (t_prefilled - t_restored) / 1e3, (t_end - t_prefilled) / 1e3, (unsigned long long)w->exports,
	       (unsigned long long)w->export_fail, w->get_ns / 1e3, w->admit_ns / 1e3, w->put_ns / 1e3,
	       (unsigned long long)rs.state_bytes, rs.memcpy_ns / 1e3, rs.set_private_ns / 1e3,
	       rs.source ? sc_digest_format(rs.digest, dhex) : "-", sc_digest_format(ld, hex));
	for (uint32_t i = 0; i < g; i++)
		printf("%s%d", i ? "," : "", r->tok[r->n + i]);
	putchar('\n');
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, 0, 'm' },	  { "arena", required_argument, 0, 'a' },
		{ "l3", required_argument, 0, 'l' },	  { "ns", required_argument, 0, 'n' },
		{ "block", required_argument, 0, 'b' },	  { "export", required_argument, 0, 'x' },
		{ "ctx", required_argument, 0, 'c' },	  { "threads", required_argument, 0, 't' },
		{ "no-flash-attn", no_argument, 0, 'F' }, { "no-ring", no_argument, 0, 'R' },
		{ "engine-lib", required_argument, 0, 'E' }, { "logits-dir", required_argument, 0, 'L' },
		{ "ns-raw", no_argument, 0, 'N' },	  { "verbose", no_argument, 0, 'v' },
		{ "layout", required_argument, 0, 'Y' },	  { "export-generated", no_argument, 0, 'G' },
		{ "prefault", no_argument, 0, 'P' },
		{ "help", no_argument, 0, 'h' },	  { 0, 0, 0, 0 }
	};
	const char *model = NULL, *libdir = NULL;
	struct eng_opts eo = { .flash_attn = 1 };
	struct llc_opts co = { .ns = "chat", .ring = 1 };
	struct worker w = { .export_what = LLC_EXPORT_ALL };
	int verbose = 0, c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 'a': co.arena = optarg; break;
		case 'l': co.l3_dir = optarg; break;
		case 'n': co.ns = optarg; break;
		case 'b': eo.block = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'x':
			if (!strcmp(optarg, "all"))
				w.export_what = LLC_EXPORT_ALL;
			else if (!strcmp(optarg, "last"))
				w.export_what = LLC_EXPORT_LAST;
			else if (!strcmp(optarg, "none"))
				w.export_what = LLC_EXPORT_NONE;
			else {
				fprintf(stderr, "sc-llama-worker: --export takes all, last or none\n");
				return EXIT_USAGE;
			}
			break;
		case 'c': eo.n_ctx = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 't': eo.threads = atoi(optarg); break;
		case 'F': eo.flash_attn = 0; break;
		case 'R': co.ring = 0; break;
		case 'E': libdir = optarg; break;
		case 'L': w.logits_dir = optarg; break;
		case 'N': co.ns_raw = 1; break;
		case 'v': verbose = 1; break;
		case 'G': w.export_generated = 1; break;
		case 'P': co.prefault = 1; break;
		case 'Y':
			if (strcmp(optarg, "llama") && strcmp(optarg, "token-major")) {
				fprintf(stderr, "sc-llama-worker: --layout takes llama or token-major\n");
				return EXIT_USAGE;
			}
			co.token_major = !strcmp(optarg, "token-major");
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (!model || optind < argc || (co.arena && !co.l3_dir) || (eo.block && eo.block > 4096)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	char libbuf[4096];
	if (!libdir) {
		/* the ggml backends sit beside libllama, which this binary's rpath names */
		snprintf(libbuf, sizeof(libbuf), "%s", SC_LLAMA_LIBDIR);
		libdir = libbuf;
	}
	char err[512];
	if (eng_open(&w.e, libdir, model, &eo, verbose, err, sizeof(err))) {
		fprintf(stderr, "sc-llama-worker: %s\n", err);
		return 1;
	}
	int rc = llc_identify(&w.c, model, &w.e, &co);
	if (rc) {
		fprintf(stderr, "sc-llama-worker: %s: %s\n", model, sc_strerror(rc));
		return 1;
	}
	if (co.arena) {
		const char *what;
		if ((rc = llc_open(&w.c, &co, &what))) {
			fprintf(stderr, "sc-llama-worker: %s: %s\n", what, sc_strerror(rc));
			return 1;
		}
		w.cache = 1;
	}
	printf("ready pid=%d model=%s ns=%s vocab=%d ctx=%u block=%u cache=%d ring=%d prefault_ms=%.1f\n", (int)getpid(),
	       w.c.model_id, w.c.ns, w.e.n_vocab, w.e.n_ctx, w.e.block, w.cache,
	       w.c.ring ? (int)sc_ring_index(w.c.ring) : -1, w.c.prefault_ns / 1e6);
	fflush(stdout);
	struct req r = { 0 };
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, stdin) > 0) {
		if (!strncmp(line, "quit", 4))
			break;
		r.export_what = w.export_what;
		char idbuf[32] = "?";
		sscanf(line, "req %31s", idbuf);
		if (parse_req(line, &r)) {
			printf("err %s bad request\n", idbuf);
			fflush(stdout);
			continue;
		}
		serve(&w, &r);
	}
	free(line);
	free(r.tok);
	fprintf(stderr, "sc-llama-worker: exports=%llu bytes=%llu admit_fail=%llu put_fail=%llu refused=%llu ring_full=%llu\n",
		(unsigned long long)w.c.exports, (unsigned long long)w.c.export_bytes, (unsigned long long)w.c.admit_fail,
		(unsigned long long)w.c.put_fail, (unsigned long long)w.c.refused, (unsigned long long)w.c.ring_full);
	if (w.cache)
		llc_close(&w.c);
	eng_close(&w.e);
	return 0;
}
