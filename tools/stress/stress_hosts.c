/*
 * tools/stress/stress_hosts.c — `stagecache stress NAME --hosts N --l3 DIR [--l3 DIR2 ...]`: several
 * simulated hosts share one L3 directory (host i uses the i-th --l3 path, e.g. its own CephFS
 * mount of the same directory, or all the same path on one filesystem). Each host has its own
 * identity, its own arena (NAME-h<i>), its own worker processes and one janitor candidate. While
 * a killer SIGKILLs random workers and janitors (a janitor killed holding the lease hands it to a
 * standby, possibly on another host), workers restore documents through their host's arena
 * (L3 locate, L2 lookup, fill, promotion), put them when missing or again, and check every byte.
 *
 * objects_lost: a put that was acknowledged and that no host can read back, unless the budget
 * evicted it after that put began. Every acknowledged put records its start time; a miss of a
 * document acknowledged before the lookup began is looked up again a second later (a put made on
 * another host may take a few tens of ms to show on this one: counted as late_visible), and if
 * it is still missing, recorded with that start time; at the end every document is looked up
 * once more from every host. Then each miss is checked against DIR/janitor.log: it is
 * explained by an eviction of that digest that began before the miss and ended after the put
 * began (an "intent" line whose "evict" line is missing: the janitor died in between, so it may
 * have ended at any time). Whatever is not explained is lost.
 *
 * The summary keeps the single-host stress's counters that apply here (digest_mismatches,
 * leaked_bytes from an fsck of each host's arena, deadlocks) and adds objects_lost and the L3
 * verification failures; all must be 0. (Commit rings are host-local: `stress NAME` covers them.)
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "stress_hosts.h"
#include "../demo/workload.h"

#define MAX_HOSTS 8
#define MAX_SLOTS 64
#define MAX_DOCS 256
#define EV_MAX (1u << 17)
#define NS "stress-hosts"
#define MODEL "stress-model"
#define STATE "state"
#define WORKER_STALL_NS (30ull * 1000000000ull)  /* CephFS metadata ops can take a while */
#define JANITOR_STALL_NS (90ull * 1000000000ull) /* a pass lists the whole directory */
#define VISIBLE_WITHIN_US 1000000u /* another host's put is visible here within this (CephFS: ~70 ms) */

enum { K_WORKER = 0, K_JANITOR = 1 };

struct slot {
	_Atomic int32_t pid;
	_Atomic uint32_t host, kind;
	_Atomic uint64_t heartbeat_ns;
	_Atomic int32_t waiting; /* a janitor blocked for the lease: not stalled */
};

struct host_counters {
	_Atomic uint64_t restores_l2, restores_l3, fills, misses, late_visible, puts, refusals, errors, mismatches;
	_Atomic uint64_t passes, lost_leases, elections, evicted;
	_Atomic int32_t last_error;
};

struct miss_event {
	uint32_t doc;
	uint64_t put_start_ns; /* the latest acknowledged put's start, seen before the lookup */
	uint64_t miss_ns;      /* when the miss was known */
};

struct shared {
	_Atomic int stop;
	struct slot s[MAX_SLOTS];
	struct host_counters h[MAX_HOSTS];
	struct wl_doc docs[MAX_DOCS];
	_Atomic uint64_t ack_start[MAX_DOCS];
	_Atomic uint64_t nev, ev_overflow;
	struct miss_event ev[EV_MAX];
	_Atomic uint64_t last_epoch;
	char first_problem[256];
	_Atomic int problem_written;
};

struct hopts {
	const char *name, *l3[MAX_HOSTS];
	uint32_t nl3, hosts, procs, seconds, kill_every_ms, docs, max_tokens;
	uint64_t seed, size, budget;
	int json, keep;
	char scratch[128];
};

void stress_first_problem(_Atomic int *written, char *buf, size_t len, const char *fmt, ...)
{
	if (atomic_exchange(written, 1))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static uint64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache stress NAME --hosts N --l3 DIR [--l3 DIR2 ...] [--procs P] [--seconds S]\n"
		"                         [--kill-every MS] [--budget SIZE] [--docs D] [--max-tokens T]\n"
		"                         [--size SIZE] [--seed X] [--keep] [--json]\n\n"
		"N simulated hosts share one L3 directory: host i uses the i-th --l3 path (its own mount of\n"
		"the shared directory, e.g. tools/scripts/cephfs-dev.sh mounts), or all the one given. Each host has\n"
		"its own identity (stress-h<i>), arena (NAME-h<i>, created), P workers and a janitor\n"
		"candidate. Workers restore documents through their arena, fill them straight from L3, put\n"
		"them when missing (and now and then again), and check every byte; every --kill-every ms a\n"
		"random worker or janitor gets SIGKILL and is respawned. At the end each document is looked\n"
		"up once more, each arena is checked by fsck, and every miss of an acknowledged put is\n"
		"checked against the janitors' log (DIR/janitor.log): objects_lost counts the ones no\n"
		"eviction explains.\n\n"
		"  --hosts N         simulated hosts (1-%d)        --procs P      workers per host (default 2)\n"
		"  --seconds S       duration (default 30)          --kill-every MS   0: no kills (default 0)\n"
		"  --budget SIZE     L3 budget (default 16M)        --docs D       documents (default 32)\n"
		"  --max-tokens T    longest document (default 256 tokens: 2 MiB of KV)\n"
		"  --size SIZE       arena size per host (default 128M)\n"
		"  --keep            keep the arenas afterwards     --json         one JSON object\n"
		"Exit status 1 if digest_mismatches, objects_lost, verify_failures, leaked_bytes or deadlocks\n"
		"is not 0.\n",
		MAX_HOSTS);
}

int stress_hosts_wanted(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--hosts") || !strncmp(argv[i], "--hosts=", 8))
			return 1;
	return 0;
}

static int l3_opt(const char *cmd, const char *arg, void *dst)
{
	struct hopts *o = dst;
	if (o->nl3 == MAX_HOSTS)
		return cli_usage_error(cmd, "at most %d --l3", MAX_HOSTS);
	o->l3[o->nl3++] = arg;
	return 0;
}

static int parse(int argc, char **argv, struct hopts *o)
{
	const struct cli_opt opts[] = {
		STRESS_COMMON_OPTS(o),
		{ "hosts", CLI_U32, &o->hosts, 1, MAX_HOSTS },
		{ "l3", CLI_FN, o, .fn = l3_opt },
		{ "procs", CLI_U32, &o->procs, 1, 16, " (1-16 per host)" },
		{ "budget", CLI_SIZE, &o->budget, 1u << 20, UINT64_MAX, " (at least 1M)" },
		{ "docs", CLI_U32, &o->docs, 2, MAX_DOCS },
		{ "max-tokens", CLI_U32, &o->max_tokens, 16, 4000 },
		{ 0 },
	};
	int rc = cli_parse_opts("stress", argc, argv, opts, usage);
	if (rc)
		return rc;
	if (optind != argc - 1)
		return cli_usage_error("stress", optind >= argc ? "missing NAME" : "too many arguments");
	o->name = argv[optind];
	if (!o->nl3)
		return cli_usage_error("stress", "--hosts needs --l3 DIR (one, or one per host: each host's mount of it)");
	if (o->nl3 != 1 && o->nl3 != o->hosts)
		return cli_usage_error("stress", "%u --l3 paths for %u hosts (give one, or one per host)", o->nl3, o->hosts);
	if (o->hosts * (o->procs + 1) > MAX_SLOTS)
		return cli_usage_error("stress", "too many processes (hosts x (procs + 1) <= %d)", MAX_SLOTS);
	return 0;
}

static const char *host_dir(const struct hopts *o, uint32_t h)
{
	return o->l3[o->nl3 == 1 ? 0 : h];
}

static int open_host_l3(const struct hopts *o, uint32_t h, struct sc_l3 **out)
{
	char host[32], state[192];
	snprintf(host, sizeof(host), "stress-h%u", h);
	snprintf(state, sizeof(state), "%s/state-h%u", o->scratch, h);
	struct sc_l3_opts lo = { .flags = SC_L3_OPEN_SHARED | SC_L3_OPEN_NO_RECONCILE, .budget_bytes = o->budget,
				 .host_id = host, .state_dir = state };
	return sc_l3_open(host_dir(o, h), &lo, out);
}

static void arena_name(const struct hopts *o, uint32_t h, char *out, size_t n)
{
	snprintf(out, n, "%s-h%u", o->name, h);
}

/* ---- workers ---- */

struct worker {
	struct shared *sh;
	struct host_counters *hc;
	struct slot *sl;
	const struct hopts *o;
	uint32_t host;
	struct sc_stage *st;
	struct sc_l3 *l3;
	uint64_t rng;
	int32_t *tokens;
};

static void note_error(struct worker *w, int rc, const char *what)
{
	atomic_fetch_add(&w->hc->errors, 1);
	atomic_store(&w->hc->last_error, rc);
	problem(w->sh, "host %u: %s: %s", w->host, what, sc_strerror(rc));
}

static void put_doc(struct worker *w, uint32_t d)
{
	struct wl_geometry g;
	wl_geometry_default(&g);
	struct wl_doc doc = w->sh->docs[d];
	struct wl_payload p;
	if (wl_payload_build(&g, &doc, &p))
		return;
	for (uint32_t i = 0; i < doc.token_count; i++)
		w->tokens[i] = wl_doc_token(doc.seed, i);
	struct sc_l3_put_args a = { .model_identity = MODEL, .state_identity = STATE, .ns = NS, .tokens = w->tokens,
				    .token_count = doc.token_count, .payload = &p.p };
	uint64_t start = real_ns();
	int rc = sc_l3_put(w->l3, &a, NULL);
	wl_payload_free(&p);
	if (rc == 0) {
		atomic_fetch_add(&w->hc->puts, 1);
		/* acknowledged: from now on a miss must be explained by an eviction */
		uint64_t cur = atomic_load(&w->sh->ack_start[d]);
		while (cur < start && !atomic_compare_exchange_weak(&w->sh->ack_start[d], &cur, start))
			;
	} else if (rc == -ENOSPC || rc == -E2BIG || rc == -EAGAIN) {
		atomic_fetch_add(&w->hc->refusals, 1);
	} else {
		note_error(w, rc, "put");
	}
}

static void record_miss(struct shared *sh, uint32_t d, uint64_t put_start, uint64_t when)
{
	if (!put_start)
		return; /* never acknowledged before the lookup: nothing to lose */
	uint64_t i = atomic_fetch_add(&sh->nev, 1);
	if (i >= EV_MAX) {
		atomic_fetch_add(&sh->ev_overflow, 1);
		return;
	}
	sh->ev[i] = (struct miss_event){ d, put_start, when };
}

static void op_restore(struct worker *w)
{
	struct shared *sh = w->sh;
	uint32_t d = (uint32_t)(wl_rand(&w->rng) % w->o->docs);
	/* a skew: half of the lookups go to the first eighth of the documents */
	if (wl_rand(&w->rng) & 1)
		d %= (w->o->docs + 7) / 8;
	const struct wl_doc *doc = &sh->docs[d];
	uint64_t seen = atomic_load(&sh->ack_start[d]);
	uint32_t n = wl_prompt(doc, wl_rand(&w->rng), 4, w->tokens);
	struct sc_restore r;
	int rc = sc_restore(w->st, w->l3, NS, w->tokens, n, SC_RESTORE_WAIT, &r);
	if (rc == -ENOENT || rc == 0) {
		atomic_fetch_add(&w->hc->misses, 1);
		if (seen) {
			/* acknowledged before we looked: either another host's put is not visible here yet
			 * (CephFS shows it within tens of ms), or it is gone. Look again after a second. */
			struct sc_location loc;
			for (uint32_t i = 0; i < doc->token_count; i++)
				w->tokens[i] = wl_doc_token(doc->seed, i);
			for (unsigned us = VISIBLE_WITHIN_US / 10;; us = VISIBLE_WITHIN_US - VISIBLE_WITHIN_US / 10) {
				usleep(us);
				if (sc_l3_locate_longest(w->l3, NS, w->tokens, doc->token_count, &loc) == (int)doc->token_count) {
					atomic_fetch_add(&w->hc->late_visible, 1);
					return;
				}
				if (us != VISIBLE_WITHIN_US / 10)
					break;
			}
			record_miss(sh, d, seen, real_ns());
		}
		put_doc(w, d);
		return;
	}
	if (rc < 0) {
		note_error(w, rc, "restore");
		return;
	}
	if ((uint32_t)rc != doc->token_count ||
	    !sc_digest_equal(sc_digest_sections(r.sec[0], r.sec_len[0], r.sec[1], r.sec_len[1]), doc->digest)) {
		atomic_fetch_add(&w->hc->mismatches, 1);
		problem(sh, "host %u: restore of document %u served wrong bytes (source %d, %d tokens)", w->host, d,
			r.source, rc);
	}
	atomic_fetch_add(r.source == SC_RESTORE_FROM_L2 ? &w->hc->restores_l2 : &w->hc->restores_l3, 1);
	sc_restore_release(&r);
}

/* A fill straight from L3 (no L2): what another host put, read through this host's mount. */
static void op_fill(struct worker *w)
{
	struct shared *sh = w->sh;
	uint32_t d = (uint32_t)(wl_rand(&w->rng) % w->o->docs);
	const struct wl_doc *doc = &sh->docs[d];
	for (uint32_t i = 0; i < doc->token_count; i++)
		w->tokens[i] = wl_doc_token(doc->seed, i);
	struct sc_location loc;
	int rc = sc_l3_locate_longest(w->l3, NS, w->tokens, doc->token_count, &loc);
	if (rc <= 0) {
		if (rc < 0)
			note_error(w, rc, "locate");
		return; /* not there: the restores deal with misses */
	}
	uint64_t room = (loc.payload_bytes + 4095) & ~4095ull;
	uint8_t *buf = aligned_alloc(4096, room);
	if (!buf)
		return;
	rc = sc_l3_fill(w->l3, &loc, buf, room, 0);
	if (rc == 0) {
		atomic_fetch_add(&w->hc->fills, 1);
		if ((uint32_t)loc.token_count != doc->token_count || loc.payload_bytes != doc->payload_bytes ||
		    !sc_digest_equal(sc_digest(buf, loc.payload_bytes), doc->digest)) {
			atomic_fetch_add(&w->hc->mismatches, 1);
			problem(sh, "host %u: fill of document %u gave wrong bytes", w->host, d);
		}
	} else if (rc != -ENOENT) { /* evicted between locate and fill: a miss */
		note_error(w, rc, "fill");
	}
	free(buf);
}

static int worker_main(struct shared *sh, uint32_t si, const struct hopts *o, uint32_t inc)
{
	struct worker w = { .sh = sh, .sl = &sh->s[si], .o = o };
	w.host = atomic_load(&w.sl->host);
	w.hc = &sh->h[w.host];
	w.rng = wl_mix(o->seed ^ ((uint64_t)inc << 24) ^ si);
	char an[160];
	arena_name(o, w.host, an, sizeof(an));
	struct sc_arena *a = NULL;
	int rc;
	if ((rc = sc_arena_open(an, &a)) || (rc = sc_stage_open(a, MODEL, STATE, &w.st)) ||
	    (rc = open_host_l3(o, w.host, &w.l3)) || (rc = sc_l3_bind_arena(w.l3, a))) {
		note_error(&w, rc, "open");
		return 1;
	}
	if (!(w.tokens = malloc(sizeof(int32_t) * (o->max_tokens + 8))))
		return 1;
	while (!atomic_load(&sh->stop)) {
		unsigned pick = (unsigned)(wl_rand(&w.rng) % 100);
		if (pick < 60) {
			op_restore(&w);
		} else if (pick < 90) {
			op_fill(&w);
		} else {
			uint32_t d = (uint32_t)(wl_rand(&w.rng) % o->docs);
			put_doc(&w, d); /* again: the same digest, from whichever host */
		}
		atomic_store(&w.sl->heartbeat_ns, cli_now_ns());
	}
	sc_l3_close(w.l3);
	sc_stage_close(w.st);
	sc_arena_close(a);
	free(w.tokens);
	return 0;
}

/* ---- janitor candidates ---- */

static int janitor_main(struct shared *sh, uint32_t si, const struct hopts *o)
{
	struct slot *sl = &sh->s[si];
	uint32_t h = atomic_load(&sl->host);
	struct host_counters *hc = &sh->h[h];
	struct sc_l3 *l3 = NULL;
	int rc = open_host_l3(o, h, &l3);
	if (rc) {
		atomic_fetch_add(&hc->errors, 1);
		problem(sh, "host %u: janitor open: %s", h, sc_strerror(rc));
		return 1;
	}
	while (!atomic_load(&sh->stop)) {
		struct sc_l3_janitor_report r;
		atomic_store(&sl->waiting, 1);
		rc = sc_l3_janitor(l3, SC_L3_JANITOR_KEEP | SC_L3_JANITOR_WAIT, &r);
		atomic_store(&sl->waiting, 0);
		atomic_store(&sl->heartbeat_ns, cli_now_ns());
		if (rc == 0) {
			atomic_fetch_add(&hc->passes, 1);
			atomic_fetch_add(&hc->evicted, r.evicted);
			uint64_t last = atomic_exchange(&sh->last_epoch, r.epoch);
			if (last != r.epoch)
				atomic_fetch_add(&hc->elections, 1);
		} else if (rc == -ESTALE) {
			atomic_fetch_add(&hc->lost_leases, 1);
		} else {
			atomic_fetch_add(&hc->errors, 1);
			atomic_store(&hc->last_error, rc);
			problem(sh, "host %u: janitor: %s", h, sc_strerror(rc));
		}
		for (int i = 0; i < 5 && !atomic_load(&sh->stop); i++)
			usleep(100000);
	}
	sc_l3_close(l3);
	return 0;
}

/* ---- the parent ---- */

static uint32_t next_inc = 1;

static pid_t spawn(struct shared *sh, uint32_t si, const struct hopts *o)
{
	struct slot *sl = &sh->s[si];
	uint32_t inc = next_inc++;
	atomic_store(&sl->heartbeat_ns, cli_now_ns());
	atomic_store(&sl->waiting, 0);
	pid_t pid = fork();
	if (pid == 0)
		_exit(atomic_load(&sl->kind) == K_JANITOR ? janitor_main(sh, si, o) : worker_main(sh, si, o, inc));
	if (pid > 0)
		atomic_store(&sl->pid, pid);
	return pid;
}

/* One record of DIR/janitor.log: an eviction of @d that began at t0 and ended at t1 (unknown:
 * UINT64_MAX, the janitor died after saying it would). */
struct evrec {
	struct sc_digest d;
	uint64_t t0, t1;
};

static int ev_cmp(const void *a, const void *b)
{
	const struct evrec *x = a, *y = b;
	if (x->d.hi != y->d.hi)
		return x->d.hi < y->d.hi ? -1 : 1;
	if (x->d.lo != y->d.lo)
		return x->d.lo < y->d.lo ? -1 : 1;
	return (x->t0 > y->t0) - (x->t0 < y->t0);
}

static int read_log(const char *dir, struct evrec **out, size_t *n, size_t *cap)
{
	const char *names[] = { "janitor.log.1", "janitor.log" };
	for (int k = 0; k < 2; k++) {
		char path[600], line[512];
		snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned long long t0, t1, epoch, bytes;
			char host[80], what[16], hex[40];
			if (sscanf(line, "%llu %llu %llu %79s %15s %39s %llu", &t0, &t1, &epoch, host, what, hex, &bytes) != 7)
				continue;
			struct sc_digest d;
			if (sc_digest_parse(hex, &d))
				continue;
			int intent = !strcmp(what, "intent");
			if (!intent && strcmp(what, "evict"))
				continue;
			if (*n == *cap) {
				size_t c = *cap ? *cap * 2 : 1024;
				struct evrec *p = realloc(*out, c * sizeof(*p));
				if (!p) {
					fclose(f);
					return -ENOMEM;
				}
				*out = p, *cap = c;
			}
			(*out)[(*n)++] = (struct evrec){ d, t0, intent ? UINT64_MAX : t1 };
		}
		fclose(f);
	}
	return 0;
}

/* Is a miss at @when of a put begun at @start explained by an eviction of @d? */
static int explained(const struct evrec *r, size_t n, struct sc_digest d, uint64_t start, uint64_t when)
{
	struct evrec key = { d, 0, 0 };
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ev_cmp(&r[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < n && sc_digest_equal(r[i].d, d); i++)
		if (r[i].t0 <= when && r[i].t1 >= start)
			return 1;
	return 0;
}

/* The hosts' counters, summed. */
struct sums {
	uint64_t r2, r3, misses, puts, refusals, errors, mism, passes, lostl, elections, evicted, late, fills;
};

/* One run: the processes, what the parent counted, and the verdict. */
struct run {
	struct hopts o;
	struct shared *sh;
	uint32_t created, nslots; /* arenas created (NAME-h0 ...); worker and janitor slots */
	uint64_t t0;
	double elapsed;
	/* counted by the parent while the hosts run */
	uint64_t kills, janitor_kills, deadlocks;
	/* the checks at the end */
	uint64_t final_checked, nev, lost, leaked, fsck_problems, verify_failures, quarantined;
	struct sums s;
	int fail;
};

/* Each host's arena (created) and its view of the L3 directory (opened once, as that host). */
static int make_hosts(struct run *r)
{
	const struct hopts *o = &r->o;
	int rc;
	for (uint32_t h = 0; h < o->hosts; h++) {
		char an[160], sd[192];
		snprintf(sd, sizeof(sd), "%s/state-h%u", o->scratch, h);
		mkdir(sd, 0700);
		arena_name(o, h, an, sizeof(an));
		struct sc_arena_opts ao = { .size_bytes = o->size, .huge = SC_HUGE_AUTO };
		struct sc_arena *a = NULL;
		if ((rc = sc_arena_create(an, &ao, &a)))
			return cli_fail("stress", rc, "cannot create arena '%s'", an);
		sc_arena_close(a);
		r->created++;
		struct sc_l3 *l3;
		if ((rc = open_host_l3(o, h, &l3)))
			return cli_fail("stress", rc, "cannot open %s as host %u", host_dir(o, h), h);
		sc_l3_close(l3);
	}
	return 0;
}

/* Documents and their digests (the workers check every restore against them); slot i belongs
 * to host i / (procs + 1), the last of each host's slots is its janitor. */
static void make_docs_and_slots(struct run *r)
{
	struct shared *sh = r->sh;
	const struct hopts *o = &r->o;
	wl_docs_make(sh->docs, o->docs, 16, o->max_tokens, o->seed);
	for (uint32_t d = 0; d < o->docs; d++) {
		struct wl_geometry g;
		struct wl_payload p;
		wl_geometry_default(&g);
		if (wl_payload_build(&g, &sh->docs[d], &p) == 0)
			wl_payload_free(&p);
	}
	r->nslots = o->hosts * (o->procs + 1);
	for (uint32_t i = 0; i < r->nslots; i++) {
		atomic_store(&sh->s[i].host, i / (o->procs + 1));
		atomic_store(&sh->s[i].kind, i % (o->procs + 1) == o->procs ? K_JANITOR : K_WORKER);
	}
}

static void print_plan(const struct hopts *o)
{
	printf("stress %s: %u hosts x (%u workers + a janitor), %u s, kill every %u ms, budget %llu MiB, %u documents, seed %llu\n",
	       o->name, o->hosts, o->procs, o->seconds, o->kill_every_ms, (unsigned long long)(o->budget >> 20), o->docs,
	       (unsigned long long)o->seed);
	for (uint32_t h = 0; h < o->hosts; h++)
		printf("  host %u: L3 %s, arena %s-h%u\n", h, host_dir(o, h), o->name, h);
	fflush(stdout);
}

/* Reap whatever died and start it again. */
static void reap_and_respawn(struct run *r)
{
	struct shared *sh = r->sh;
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		for (uint32_t i = 0; i < r->nslots; i++) {
			if (atomic_load(&sh->s[i].pid) != pid)
				continue;
			atomic_store(&sh->s[i].pid, 0);
			if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
				problem(sh, "%s of host %u exited on its own (status %d)",
					atomic_load(&sh->s[i].kind) == K_JANITOR ? "janitor" : "worker",
					atomic_load(&sh->s[i].host), status);
			spawn(sh, i, &r->o);
		}
}

/* One kill in eight hits a janitor (the one holding the lease, or a standby). */
static void kill_one(struct run *r, uint64_t *rng)
{
	const struct hopts *o = &r->o;
	uint32_t h = (uint32_t)(wl_rand(rng) % o->hosts), i;
	if (wl_rand(rng) % 8 == 0)
		i = h * (o->procs + 1) + o->procs;
	else
		i = h * (o->procs + 1) + (uint32_t)(wl_rand(rng) % o->procs);
	pid_t victim = atomic_load(&r->sh->s[i].pid);
	if (victim > 0 && kill(victim, SIGKILL) == 0) {
		r->kills++;
		r->janitor_kills += atomic_load(&r->sh->s[i].kind) == K_JANITOR;
	}
}

/* Deadlock: a live process, not waiting for the lease, with no progress for its stall time. */
static void check_stalls(struct run *r, uint64_t now)
{
	struct shared *sh = r->sh;
	for (uint32_t i = 0; i < r->nslots; i++) {
		pid_t p = atomic_load(&sh->s[i].pid);
		uint64_t hb = atomic_load(&sh->s[i].heartbeat_ns);
		int jan = atomic_load(&sh->s[i].kind) == K_JANITOR;
		if (p > 0 && !atomic_load(&sh->s[i].waiting) && now > hb &&
		    now - hb > (jan ? JANITOR_STALL_NS : WORKER_STALL_NS)) {
			r->deadlocks++;
			problem(sh, "%s of host %u (pid %d) made no progress for %.0f s", jan ? "janitor" : "worker",
				atomic_load(&sh->s[i].host), p, (double)(now - hb) / 1e9);
			kill(p, SIGKILL);
			atomic_store(&sh->s[i].heartbeat_ns, now);
		}
	}
}

static void print_progress(const struct run *r, uint64_t now)
{
	uint64_t rs = 0, m = 0, e = 0;
	for (uint32_t h = 0; h < r->o.hosts; h++) {
		rs += atomic_load(&r->sh->h[h].restores_l2) + atomic_load(&r->sh->h[h].restores_l3);
		m += atomic_load(&r->sh->h[h].misses);
		e += atomic_load(&r->sh->h[h].evicted);
	}
	fprintf(stderr, "[%3.0fs] restores %llu  misses %llu  evicted %llu  kills %llu (janitors %llu)  deadlocks %llu\n",
		(double)(now - r->t0) / 1e9, (unsigned long long)rs, (unsigned long long)m, (unsigned long long)e,
		(unsigned long long)r->kills, (unsigned long long)r->janitor_kills, (unsigned long long)r->deadlocks);
}

/* Every process started; then, every 10 ms for --seconds: respawn the dead, kill one every
 * --kill-every ms, look for stalls, and print progress every 5 s. */
static void run_hosts(struct run *r)
{
	const struct hopts *o = &r->o;
	for (uint32_t i = 0; i < r->nslots; i++)
		spawn(r->sh, i, o);
	uint64_t t0 = r->t0 = cli_now_ns(), end = t0 + (uint64_t)o->seconds * 1000000000ull;
	uint64_t rng = wl_mix(o->seed ^ 0x6b696c6cull);
	uint64_t next_kill = o->kill_every_ms ? t0 + (uint64_t)o->kill_every_ms * 1000000ull : UINT64_MAX;
	uint64_t next_progress = t0 + 5000000000ull;
	while (cli_now_ns() < end) {
		usleep(10000);
		uint64_t now = cli_now_ns();
		reap_and_respawn(r);
		if (now >= next_kill) {
			kill_one(r, &rng);
			next_kill = now + (uint64_t)o->kill_every_ms * 1000000ull;
		}
		check_stalls(r, now);
		if (now >= next_progress && !o->json) {
			print_progress(r, now);
			next_progress = now + 5000000000ull;
		}
	}
}

/* Stop: workers finish their op; janitors may be blocked waiting for the lease: killed. */
static void stop_hosts(struct run *r)
{
	struct shared *sh = r->sh;
	atomic_store(&sh->stop, 1);
	for (uint32_t i = 0; i < r->nslots; i++) {
		pid_t p = atomic_load(&sh->s[i].pid);
		if (p <= 0)
			continue;
		if (atomic_load(&sh->s[i].kind) == K_JANITOR) {
			kill(p, SIGKILL);
			waitpid(p, NULL, 0);
			continue;
		}
		uint64_t deadline = cli_now_ns() + 60000000000ull;
		int status;
		while (waitpid(p, &status, WNOHANG) == 0) {
			if (cli_now_ns() > deadline) {
				r->deadlocks++;
				problem(sh, "a worker of host %u did not stop within 60 s", atomic_load(&sh->s[i].host));
				kill(p, SIGKILL);
				waitpid(p, &status, 0);
				break;
			}
			usleep(10000);
		}
	}
	r->elapsed = (double)(cli_now_ns() - r->t0) / 1e9;
}

/* The last look: every acknowledged document, from every host. */
static void final_lookups(struct run *r)
{
	const struct hopts *o = &r->o;
	struct shared *sh = r->sh;
	int32_t *tok = malloc(sizeof(int32_t) * (o->max_tokens + 8));
	uint8_t *buf = NULL;
	int rc;
	for (uint32_t h = 0; tok && h < o->hosts; h++) {
		struct sc_l3 *l3;
		if (open_host_l3(o, h, &l3))
			continue;
		for (uint32_t d = 0; d < o->docs; d++) {
			uint64_t start = atomic_load(&sh->ack_start[d]);
			if (!start)
				continue;
			const struct wl_doc *doc = &sh->docs[d];
			for (uint32_t i = 0; i < doc->token_count; i++)
				tok[i] = wl_doc_token(doc->seed, i);
			struct sc_location loc;
			rc = sc_l3_locate_longest(l3, NS, tok, doc->token_count, &loc);
			uint64_t room = (doc->payload_bytes + 4095) & ~4095ull;
			free(buf);
			buf = aligned_alloc(4096, room);
			if (rc == (int)doc->token_count && buf)
				rc = sc_l3_fill(l3, &loc, buf, room, 0);
			else if (rc >= 0)
				rc = -ENOENT;
			r->final_checked++;
			if (rc == -ENOENT)
				record_miss(sh, d, start, real_ns());
			else if (rc == 0 && !sc_digest_equal(sc_digest(buf, doc->payload_bytes), doc->digest))
				atomic_fetch_add(&sh->h[h].mismatches, 1);
			else if (rc)
				atomic_fetch_add(&sh->h[h].errors, 1);
		}
		sc_l3_close(l3);
	}
	free(buf);
	free(tok);
}

/* What the log says about a lost document, for whoever investigates. */
static void print_lost(const struct shared *sh, const struct miss_event *e, const struct evrec *evr, size_t nevr)
{
	char hex[SC_DIGEST_HEX_LEN + 1];
	printf("lost: document %u %s, put begun at %llu, missing at %llu (+%.3f s); evictions of it:",
	       e->doc, sc_digest_format(sh->docs[e->doc].digest, hex), (unsigned long long)e->put_start_ns,
	       (unsigned long long)e->miss_ns, (double)(e->miss_ns - e->put_start_ns) / 1e9);
	for (size_t k = 0; k < nevr; k++)
		if (sc_digest_equal(evr[k].d, sh->docs[e->doc].digest))
			printf(" [%llu, %llu]", (unsigned long long)evr[k].t0, (unsigned long long)evr[k].t1);
	printf("\n");
}

/* objects_lost: misses that no eviction in the janitors' log explains */
static void count_lost(struct run *r)
{
	struct shared *sh = r->sh;
	struct evrec *evr = NULL;
	size_t nevr = 0, capevr = 0;
	read_log(host_dir(&r->o, 0), &evr, &nevr, &capevr);
	qsort(evr, nevr, sizeof(*evr), ev_cmp);
	r->nev = atomic_load(&sh->nev);
	if (r->nev > EV_MAX)
		r->nev = EV_MAX;
	for (uint64_t i = 0; i < r->nev; i++) {
		const struct miss_event *e = &sh->ev[i];
		if (explained(evr, nevr, sh->docs[e->doc].digest, e->put_start_ns, e->miss_ns))
			continue;
		r->lost++;
		char hex[SC_DIGEST_HEX_LEN + 1];
		if (r->lost <= 5 && !r->o.json)
			print_lost(sh, e, evr, nevr);
		problem(sh, "document %u (%s): acknowledged (put begun at %llu) and then missing at %llu; no eviction explains it",
			e->doc, sc_digest_format(sh->docs[e->doc].digest, hex), (unsigned long long)e->put_start_ns,
			(unsigned long long)e->miss_ns);
	}
	free(evr);
}

/* Each host: its arena checked (repair what the killed left, then a clean check), its L3 counters. */
static void check_hosts(struct run *r)
{
	for (uint32_t h = 0; h < r->o.hosts; h++) {
		char an[160];
		arena_name(&r->o, h, an, sizeof(an));
		struct sc_arena *a;
		struct sc_fsck_report r1, r2;
		if (sc_arena_open(an, &a) == 0) {
			sc_arena_fsck(a, SC_FSCK_REPAIR | SC_FSCK_DEEP, NULL, NULL, &r1);
			int frc = sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r2);
			r->leaked += frc < 0 ? 1 : r2.leaked_bytes;
			r->fsck_problems += frc < 0 ? 1 : r2.problems;
			sc_arena_close(a);
		} else {
			r->fsck_problems++;
		}
		struct sc_l3 *l3;
		struct sc_l3_stats st;
		if (open_host_l3(&r->o, h, &l3) == 0) {
			if (sc_l3_stats(l3, &st) == 0) {
				r->verify_failures += st.verify_failures;
				r->quarantined += st.quarantined;
			}
			sc_l3_close(l3);
		}
	}
}

static void sum_hosts(const struct shared *sh, uint32_t hosts, struct sums *s)
{
	for (uint32_t h = 0; h < hosts; h++) {
		const struct host_counters *c = &sh->h[h];
		s->r2 += atomic_load(&c->restores_l2), s->r3 += atomic_load(&c->restores_l3);
		s->misses += atomic_load(&c->misses), s->puts += atomic_load(&c->puts);
		s->refusals += atomic_load(&c->refusals), s->errors += atomic_load(&c->errors);
		s->mism += atomic_load(&c->mismatches), s->passes += atomic_load(&c->passes);
		s->lostl += atomic_load(&c->lost_leases), s->elections += atomic_load(&c->elections);
		s->evicted += atomic_load(&c->evicted), s->late += atomic_load(&c->late_visible);
		s->fills += atomic_load(&c->fills);
	}
}

/* The final lookups, lost objects, each host's fsck and L3 counters, and the verdict. */
static void check(struct run *r)
{
	final_lookups(r);
	count_lost(r);
	check_hosts(r);
	sum_hosts(r->sh, r->o.hosts, &r->s);
	r->fail = r->s.mism || r->lost || r->verify_failures || r->quarantined || r->leaked || r->deadlocks ||
		  r->fsck_problems || atomic_load(&r->sh->ev_overflow);
}

static void report_json(const struct run *r)
{
	const struct sums *s = &r->s;
	printf("{\"seconds\":%.1f,\"hosts\":%u,\"procs_per_host\":%u,\"seed\":%llu,\"restores_l2\":%llu,"
	       "\"restores_l3\":%llu,\"fills\":%llu,\"misses\":%llu,\"late_visible\":%llu,\"puts\":%llu,\"refusals\":%llu,\"errors\":%llu,\"kills\":%llu,"
	       "\"janitor_kills\":%llu,\"janitor_passes\":%llu,\"janitor_elections\":%llu,\"leases_lost\":%llu,"
	       "\"evicted\":%llu,\"misses_checked\":%llu,\"final_lookups\":%llu,\"digest_mismatches\":%llu,"
	       "\"objects_lost\":%llu,\"verify_failures\":%llu,\"quarantined\":%llu,\"leaked_bytes\":%llu,"
	       "\"fsck_problems\":%llu,\"deadlocks\":%llu,\"ok\":%s}\n",
	       r->elapsed, r->o.hosts, r->o.procs, (unsigned long long)r->o.seed, (unsigned long long)s->r2,
	       (unsigned long long)s->r3, (unsigned long long)s->fills, (unsigned long long)s->misses,
	       (unsigned long long)s->late, (unsigned long long)s->puts, (unsigned long long)s->refusals,
	       (unsigned long long)s->errors, (unsigned long long)r->kills, (unsigned long long)r->janitor_kills,
	       (unsigned long long)s->passes, (unsigned long long)s->elections, (unsigned long long)s->lostl,
	       (unsigned long long)s->evicted, (unsigned long long)r->nev, (unsigned long long)r->final_checked,
	       (unsigned long long)s->mism, (unsigned long long)r->lost, (unsigned long long)r->verify_failures,
	       (unsigned long long)r->quarantined, (unsigned long long)r->leaked, (unsigned long long)r->fsck_problems,
	       (unsigned long long)r->deadlocks, r->fail ? "false" : "true");
}

static void report_text(const struct run *r)
{
	const struct sums *s = &r->s;
	printf("\n== stress summary (%.1f s, %u hosts x %u workers, seed %llu) ==\n", r->elapsed, r->o.hosts, r->o.procs,
	       (unsigned long long)r->o.seed);
	printf("restores     %llu from L2, %llu from L3; %llu misses (then put), of which %llu were another\n"
	       "             host's put not yet visible here (found a second later)\n", (unsigned long long)s->r2,
	       (unsigned long long)s->r3, (unsigned long long)s->misses, (unsigned long long)s->late);
	printf("fills        %llu straight from L3, every byte checked\n", (unsigned long long)s->fills);
	printf("puts         %llu acknowledged, %llu refused (budget)\n", (unsigned long long)s->puts,
	       (unsigned long long)s->refusals);
	printf("janitor      %llu passes, %llu elections, %llu leases lost, %llu evicted\n", (unsigned long long)s->passes,
	       (unsigned long long)s->elections, (unsigned long long)s->lostl, (unsigned long long)s->evicted);
	printf("kills        %llu (%llu janitors)\n", (unsigned long long)r->kills, (unsigned long long)r->janitor_kills);
	printf("checked      %llu misses of acknowledged puts against the janitors' log; %llu final lookups\n",
	       (unsigned long long)r->nev, (unsigned long long)r->final_checked);
	printf("errors       %llu (refusals are not errors)\n", (unsigned long long)s->errors);
	printf("digest_mismatches %llu\nobjects_lost      %llu\nverify_failures   %llu\nquarantined       %llu\n"
	       "leaked_bytes      %llu\nfsck_problems     %llu\ndeadlocks         %llu\n",
	       (unsigned long long)s->mism, (unsigned long long)r->lost, (unsigned long long)r->verify_failures,
	       (unsigned long long)r->quarantined, (unsigned long long)r->leaked, (unsigned long long)r->fsck_problems,
	       (unsigned long long)r->deadlocks);
	if (atomic_load(&r->sh->ev_overflow))
		printf("(%llu misses were not recorded: raise EV_MAX)\n", (unsigned long long)atomic_load(&r->sh->ev_overflow));
	if (r->sh->problem_written)
		printf("first problem: %s\n", r->sh->first_problem);
	printf("%s\n", r->fail ? "FAILED" : "OK");
}

/* The arenas this run created go unless --keep; the scratch directory always goes. */
static void cleanup(struct run *r)
{
	if (!r->o.keep)
		for (uint32_t h = 0; h < r->created; h++) {
			char an[160];
			arena_name(&r->o, h, an, sizeof(an));
			sc_arena_destroy(NULL, an);
		}
	if (r->sh != MAP_FAILED)
		munmap(r->sh, sizeof(*r->sh));
	cli_rm_rf(r->o.scratch);
}

int stress_hosts_main(int argc, char **argv)
{
	static struct run r = { .o = { .hosts = 0, .procs = 2, .seconds = 30, .docs = 32, .max_tokens = 256,
				       .size = 128u << 20, .budget = 16u << 20 } };
	r.o.seed = (uint64_t)time(NULL);
	int rc = parse(argc, argv, &r.o);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	snprintf(r.o.scratch, sizeof(r.o.scratch), "/var/tmp/stagecache-stress-hosts-%d", (int)getpid());
	if (mkdir(r.o.scratch, 0700) < 0)
		return cli_fail("stress", -errno, "cannot create %s", r.o.scratch);
	r.sh = mmap(NULL, sizeof(*r.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r.sh == MAP_FAILED)
		rc = cli_fail("stress", -errno, "mmap");
	else
		rc = make_hosts(&r);
	if (rc) {
		cleanup(&r);
		return rc;
	}
	make_docs_and_slots(&r);
	if (!r.o.json)
		print_plan(&r.o);

	run_hosts(&r);
	stop_hosts(&r);
	check(&r);
	if (r.o.json)
		report_json(&r);
	else
		report_text(&r);
	cleanup(&r);
	return r.fail ? EXIT_FAIL : EXIT_OK;
}
