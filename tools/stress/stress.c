/*
 * tools/stress/stress.c — `stagecache stress NAME`: N worker processes run a mixed workload on one
 * arena and one L3 directory while a killer SIGKILLs a random worker every --kill-every ms (and
 * workers arm the library's fault points so some die inside admit, evict, repair, fill or ring
 * publish). A verifier checks every L2 hit's digest, every commit sequence and running total,
 * and that every committed token arrives. At the end: fsck, and a summary whose
 * digest_mismatches, lost_commits, torn_records, leaked_bytes and deadlocks must all be 0.
 *
 * Bookkeeping lives in an anonymous MAP_SHARED mapping that survives the kills:
 *  - each worker incarnation writes its op counters, a heartbeat, and after each commit call the
 *    pair (request sequence, committed tokens) packed in one 64-bit word (a kill can never tear it);
 *  - the verifier writes, per incarnation, what it has seen delivered.
 * A token counts as committed once sc_batcher_commit/finish returned with it emitted; it must then
 * reach the verifier even if its producer dies the next instant.
 *
 * Kinds of work, each a weighted op that the killer can catch anywhere: L2 gets (every hit's bytes
 * checked against its digest: a change after admission is a late write), admits, removes,
 * invalidations, restores of L3 documents (every byte checked against the digest of the version
 * served; a version older than the last put that returned before the restore began is stale),
 * re-puts of a document's prefix with new bytes (by the document's owner slot only, so versions are
 * ordered), restores into a stage of another model identity (never served), cold O_DIRECT fills
 * of a full queue into L2 reservations, and decodes through the commit rings. --segment-bytes
 * makes both the arena (when created here) and the L3 store segmented.
 *
 * Deployments: --pidns puts every other worker in a pid namespace of its own (unshare, then fork:
 * the worker is pid 1 there; the killer kills it by its pid here), --users runs workers under two
 * uids sharing one group (a group-mode arena and L3 directory). Each incarnation records its owner
 * token; a monitor looks at sc_arena_holders() every 250 ms and reports as held_by_dead_bytes the
 * most bytes (leased entries + reservations) any holder still held more than 2 s after its
 * process died — before any repair: the closing fsck is an extra check, not what makes it 0.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <sched.h>
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
#include "stress_hosts.h"
#include "../demo/workload.h"

#ifndef SC_TEST_HOOKS
#error "the stress harness arms fault points: it is built only into the test build (see the Makefile)"
#endif
#include "stagecache_test.h"

#define MAX_PROCS 64
#define MAX_INCARNATIONS 65536
#define KEYS 256
#define L3_DOCS 48
#define NS "stress"
#define MODEL "stress-model"
#define STATE "state"
#define HDR_MAGIC 0x5354524553534844ull /* payload header: magic, key id, version */
/* --users: workers alternate between these uids, sharing this group (nobody / nogroup and the uid
 * below it: numeric ids need no passwd entry) */
#define USER_A 65534u
#define USER_B 65533u
#define USERS_GID 65534u
#define HELD_GRACE_NS 2000000000ull /* what the dead hold must be released within this */

enum op { OP_GET, OP_ADMIT, OP_REMOVE, OP_INVALIDATE, OP_L3, OP_DECODE, OP_REPUT, OP_OTHER_ID, OP_FILLQ, OP_COUNT };
static const char *op_names[OP_COUNT] = { "get", "admit", "remove", "invalidate", "l3_restore", "decode",
					  "reput", "other_identity", "fill_queue" };
static const unsigned op_weight[OP_COUNT] = { 50, 16, 5, 3, 8, 18, 3, 2, 3 };
#define FILLQ 16       /* fills in flight in a fill_queue op */
#define VERSIONS 8     /* digests of a document's latest versions kept for checking restores */
#define OTHER_MODEL "stress-other-model"

struct incarnation {
	/* written by the worker */
	_Atomic uint64_t committed;   /* (request seq << 32) | committed tokens of that request */
	_Atomic uint32_t token;       /* its arena handle's owner token (sc_arena_token) */
	/* written by the parent */
	_Atomic uint64_t died_ns;     /* when the parent saw it die (0: alive or unknown) */
	/* written by the verifier */
	_Atomic uint64_t delivered;   /* same packing: the furthest point delivered */
	_Atomic uint32_t worker;      /* which worker slot this incarnation ran in */
};

struct worker_slot {
	_Atomic int32_t pid;               /* the worker's pid in our namespace (the one to kill) */
	_Atomic int32_t waitpid;           /* the child we wait for (a pid-namespace parent, or the worker) */
	_Atomic uint32_t incarnation;
	_Atomic uint64_t heartbeat_ns;     /* last op completed */
	_Atomic uint64_t ops[OP_COUNT];
	_Atomic uint64_t hits, misses, admits_ok, admits_refused, restores_l2, restores_l3;
	_Atomic uint64_t digest_mismatches, errors;
	_Atomic uint64_t late_writes;      /* L2 hits whose bytes are not their entry's digest */
	_Atomic uint64_t stale_served;     /* restores of a version older than one put before them */
	_Atomic int32_t last_error;
	_Atomic int32_t armed;             /* a fault point is armed in this incarnation */
	uint8_t pad[64];
};

/* The versions of one L3 document: only its owner slot (id % procs) puts it, so versions are
 * ordered; version v's payload is the document's with v stamped into its recurrent section. */
struct doc_versions {
	_Atomic uint64_t done;             /* the last version whose put returned */
	_Atomic uint64_t next;             /* the next version to put */
	struct {
		_Atomic uint64_t v;        /* version + 1 once lo, hi are written (0: being written) */
		_Atomic uint64_t lo, hi;
	} d[VERSIONS];
};

struct shared {
	_Atomic int stop_workers, stop_verifier;
	struct doc_versions ver[L3_DOCS];
	struct worker_slot w[MAX_PROCS];
	_Atomic uint64_t torn_records, verify_commits, verify_tokens, stale_records;
	_Atomic int verifier_error;
	char first_problem[256];
	_Atomic int problem_written;
	struct wl_doc l3docs[L3_DOCS];
	struct incarnation inc[MAX_INCARNATIONS];
};

struct stress_opts {
	const char *name, *l3dir;
	uint32_t procs, seconds, kill_every_ms;
	uint64_t seed, size, max_payload, segment_bytes;
	int json, keep, pidns, users;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache stress NAME [--procs N] [--seconds S] [--kill-every MS] [--seed X]\n"
		"                         [--l3 DIR] [--size SIZE] [--max-payload SIZE] [--segment-bytes SIZE]\n"
		"                         [--pidns] [--users] [--keep] [--json]\n\n"
		"Run N worker processes on arena NAME (created if missing) and an L3 directory: Zipf lookups,\n"
		"admits and replacements of 1 KiB to --max-payload payloads, removals, digest invalidations,\n"
		"L3 puts, re-puts of changed bytes and restores with promotion, restores into a stage of\n"
		"another model (never served), cold O_DIRECT fills of a full queue into L2 reservations, and\n"
		"commit streams through the batcher. Every --kill-every ms a random worker gets SIGKILL\n"
		"(workers also arm the library's fault points) and is respawned. Every L2 hit is checked\n"
		"against its digest, every restore against its version's, every commit by a verifier.\n\n"
		"  --procs N          workers (default 4)        --seconds S     duration (default 30)\n"
		"  --kill-every MS    0 disables kills (default 0)\n"
		"  --seed X           workload seed (default: time)\n"
		"  --l3 DIR           L3 directory (default a fresh one under /var/tmp, removed after)\n"
		"  --size SIZE        arena size when creating (default 512M)\n"
		"  --max-payload SIZE largest payload (default 16M)\n"
		"  --segment-bytes SIZE  segments of this size in the arena (when created here) and the L3\n"
		"                     store (default: none)\n"
		"  --pidns            every other worker in a pid namespace of its own (root)\n"
		"  --users            workers under two uids (65534, 65533) of one group (65534) sharing a\n"
		"                     group-mode arena and L3 directory (root; the arena is created 0660)\n"
		"  --keep             keep the arena (and the L3 directory) afterwards\n"
		"  --json             print the summary as one JSON object\n"
		"Exit status 1 if digest_mismatches, late_writes (L2 bytes changed after admission),\n"
		"stale_served (a restore older than a put that returned before it), lost_commits,\n"
		"torn_records, leaked_bytes, deadlocks or held_by_dead_bytes (bytes still held by a process\n"
		"2 s after it died, before any repair) is not 0, the closing fsck finds a problem, or the\n"
		"repaired arena does not take an admission.\n");
}

static int parse(int argc, char **argv, struct stress_opts *o)
{
	const struct cli_opt opts[] = {
		STRESS_COMMON_OPTS(o),
		{ "procs", CLI_U32, &o->procs, 1, MAX_PROCS },
		{ "l3", CLI_STR, &o->l3dir },
		{ "max-payload", CLI_SIZE, &o->max_payload, 2048, 64u << 20, " (2K-64M)" },
		{ "pidns", CLI_FLAG, &o->pidns },
		{ "users", CLI_FLAG, &o->users },
		{ "segment-bytes", CLI_SIZE, &o->segment_bytes, SC_SEGMENT_MIN, SC_SEGMENT_MAX, " (64K-1G, a power of two)" },
		{ 0 },
	};
	int rc = cli_parse_opts("stress", argc, argv, opts, usage);
	if (rc)
		return rc;
	if (optind != argc - 1)
		return cli_usage_error("stress", optind >= argc ? "missing NAME" : "too many arguments");
	if ((o->pidns || o->users) && geteuid() != 0)
		return cli_usage_error("stress", "--pidns and --users need root (unshare, setuid)");
	o->name = argv[optind];
	return 0;
}

static inline uint64_t pack(uint32_t seq, uint32_t tokens)
{
	return ((uint64_t)seq << 32) | tokens;
}

/* ---- the verifier: every commit of every incarnation ---- */

struct vstate {
	uint32_t seq;      /* request in progress (0: none) */
	uint32_t seen;     /* its tokens delivered so far */
	uint32_t done_seq; /* last request that ended with a terminal */
};

static struct vstate *vs; /* MAX_INCARNATIONS, private to the verifier */

static int on_commit(const struct sc_commit *c, void *p)
{
	struct shared *sh = p;
	uint64_t inc = c->request_id >> 32;
	uint32_t seq = (uint32_t)c->request_id;
	atomic_fetch_add(&sh->verify_commits, 1);
	if (inc >= MAX_INCARNATIONS || seq == 0) {
		atomic_fetch_add(&sh->torn_records, 1);
		problem(sh, "commit with an impossible request id %llx", (unsigned long long)c->request_id);
		return 0;
	}
	struct vstate *v = &vs[inc];
	if (seq != v->seq) {
		/* a new request: the previous one ended with a terminal, and sequences only grow */
		if (v->seq && v->seen && v->done_seq != v->seq) {
			atomic_fetch_add(&sh->torn_records, 1);
			problem(sh, "incarnation %llu: request %u started before request %u ended", (unsigned long long)inc,
				seq, v->seq);
		}
		if (seq <= v->seq) {
			atomic_fetch_add(&sh->torn_records, 1);
			problem(sh, "incarnation %llu: request %u after %u (reordered)", (unsigned long long)inc, seq, v->seq);
		}
		v->seq = seq;
		v->seen = 0;
	}
	for (uint32_t i = 0; i < c->token_count; i++)
		if (c->tokens[i] != wl_gen_token(c->request_id, v->seen + i)) {
			atomic_fetch_add(&sh->torn_records, 1);
			problem(sh, "request %llx: token %u is %d, expected %d", (unsigned long long)c->request_id,
				v->seen + i, c->tokens[i], wl_gen_token(c->request_id, v->seen + i));
			break;
		}
	v->seen += c->token_count;
	if (c->generated_token_count != v->seen) {
		atomic_fetch_add(&sh->torn_records, 1);
		problem(sh, "request %llx: running total %llu, delivered %u", (unsigned long long)c->request_id,
			(unsigned long long)c->generated_token_count, v->seen);
	}
	if (c->flags & (SC_COMMIT_FINISHED | SC_COMMIT_ABORTED)) {
		if (v->seen != wl_gen_length(c->request_id)) {
			atomic_fetch_add(&sh->torn_records, 1);
			problem(sh, "request %llx ended after %u tokens, expected %u", (unsigned long long)c->request_id,
				v->seen, wl_gen_length(c->request_id));
		}
		v->done_seq = seq;
	}
	atomic_fetch_add(&sh->verify_tokens, c->token_count);
	atomic_store(&sh->inc[inc].delivered, pack(seq, v->seen));
	return 0;
}

/* A poll found a corrupted ring: counted and reported; the verifier goes on. */
static void torn_ring(void *p)
{
	struct shared *sh = p;
	atomic_fetch_add(&sh->torn_records, 1);
	problem(sh, "sc_ring_poll: a ring is corrupted");
}

static int verifier_main(const char *name, struct shared *sh)
{
	vs = calloc(MAX_INCARNATIONS, sizeof(*vs));
	struct sc_arena *a;
	int rc = vs ? sc_arena_open(name, &a) : -ENOMEM;
	if (rc) {
		atomic_store(&sh->verifier_error, rc);
		return 1;
	}
	if ((rc = wl_drain_rings(a, on_commit, sh, &sh->stop_verifier, 300000000ull, torn_ring, sh)))
		atomic_store(&sh->verifier_error, rc);
	sc_ring_consumer_close(a);
	sc_arena_close(a);
	return 0;
}

/* ---- workers ---- */

struct worker {
	struct shared *sh;
	struct worker_slot *ws;
	uint32_t inc;
	const struct stress_opts *o;
	struct sc_arena *a;
	struct sc_stage *st, *other; /* other: another model's stage (never served this model's state) */
	struct sc_l3 *l3, *dl3;      /* dl3: O_DIRECT always, for the fill queue */
	struct sc_ring *ring;
	struct wl_zipf zipf;
	uint64_t rng;
	uint32_t seq;
	uint8_t *buf;          /* payload scratch, max_payload bytes */
	struct sc_digest recent[16];
	unsigned nrecent;
	int32_t *l3tokens;
};

static void key_tokens(uint32_t key, int32_t tokens[8])
{
	for (int i = 0; i < 8; i++)
		tokens[i] = (int32_t)(wl_mix(key * 8u + (uint32_t)i) % 50000u);
}

/* Payload of (key, version): a 24-byte header then PRNG bytes. */
static uint64_t make_payload(struct worker *w, uint32_t key, uint64_t version, uint64_t len)
{
	uint64_t *q = (uint64_t *)w->buf;
	uint64_t st = wl_mix(key) ^ version;
	for (uint64_t i = 0; i < len / 8; i++)
		q[i] = wl_rand(&st);
	for (uint64_t i = len & ~7ull; i < len; i++)
		w->buf[i] = (uint8_t)i;
	q[0] = HDR_MAGIC;
	q[1] = key;
	q[2] = version;
	return len;
}

static void note_error(struct worker *w, int rc)
{
	atomic_fetch_add(&w->ws->errors, 1);
	atomic_store(&w->ws->last_error, rc);
}

static void op_get(struct worker *w)
{
	uint32_t key = wl_zipf_next(&w->zipf, &w->rng);
	int32_t tokens[8];
	key_tokens(key, tokens);
	struct sc_lease l;
	int rc = sc_l2_get(w->st, NS, tokens, 8, NULL, &l);
	if (rc == -ENOENT) {
		atomic_fetch_add(&w->ws->misses, 1);
		return;
	}
	if (rc) {
		note_error(w, rc);
		return;
	}
	atomic_fetch_add(&w->ws->hits, 1);
	const uint64_t *q = l.sec[0];
	struct sc_digest d = sc_digest_sections(l.sec[0], l.sec_len[0], l.sec[1], l.sec_len[1]);
	if (!sc_digest_equal(d, l.digest)) {
		/* published entries are immutable: these bytes changed after the admission */
		atomic_fetch_add(&w->ws->late_writes, 1);
		problem(w->sh, "L2 hit on key %u: its bytes are not its entry's digest (written after admission)", key);
	} else if (l.sec_len[0] < 24 || q[0] != HDR_MAGIC || q[1] != key) {
		atomic_fetch_add(&w->ws->digest_mismatches, 1);
		problem(w->sh, "L2 hit on key %u: another key's entry", key);
	}
	sc_lease_release(&l);
}

static void op_admit(struct worker *w)
{
	uint32_t key = wl_zipf_next(&w->zipf, &w->rng);
	int32_t tokens[8];
	key_tokens(key, tokens);
	/* log-uniform 1 KiB .. max_payload */
	double u = (double)(wl_rand(&w->rng) >> 11) / (double)(1ull << 53);
	uint64_t len = (uint64_t)(1024.0 * wl_exp(u * wl_ln((double)w->o->max_payload / 1024.0)));
	if (len < 24)
		len = 24;
	make_payload(w, key, wl_rand(&w->rng), len);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { w->buf, NULL }, .sec_len = { len, 0 } };
	struct sc_digest d = sc_digest(w->buf, len);
	int rc = sc_l2_admit(w->st, NS, tokens, 8, d, &p, SC_ORIGIN_DIRECT);
	if (rc == 0) {
		atomic_fetch_add(&w->ws->admits_ok, 1);
		w->recent[w->nrecent++ % 16] = d;
	} else if (rc == -ENOSPC || rc == -E2BIG) {
		atomic_fetch_add(&w->ws->admits_refused, 1);
	} else {
		note_error(w, rc);
	}
}

static void op_remove(struct worker *w)
{
	uint32_t key = wl_zipf_next(&w->zipf, &w->rng);
	int32_t tokens[8];
	key_tokens(key, tokens);
	struct sc_key k;
	int rc = sc_l2_key(w->st, NS, tokens, 8, &k);
	if (!rc)
		rc = sc_l2_remove(w->st, k);
	if (rc && rc != -ENOENT)
		note_error(w, rc);
}

static void op_invalidate(struct worker *w)
{
	if (!w->nrecent)
		return;
	int rc = sc_l2_invalidate_digest(w->a, w->recent[wl_rand(&w->rng) % (w->nrecent < 16 ? w->nrecent : 16)]);
	if (rc < 0 && rc != -ENOENT)
		note_error(w, rc);
}

/* ---- L3 documents and their versions ---- */

/* Version @v of @doc's payload (allocated in @p): the document's, with v stamped into the first 8
 * bytes of its recurrent section. Its digest is recorded in the document's version table before
 * it is put (the owner does that). */
static int doc_payload(struct wl_doc *doc, uint64_t v, struct wl_payload *p)
{
	struct wl_geometry g;
	wl_geometry_default(&g);
	struct wl_doc copy = *doc;
	int rc = wl_payload_build(&g, &copy, p);
	if (rc)
		return rc;
	uint8_t *rec = (uint8_t *)p->p.sec[1];
	if (p->p.sec_len[1] < 8) {
		wl_payload_free(p);
		return -EINVAL;
	}
	memcpy(rec, &v, 8);
	return 0;
}

static uint64_t version_of(const struct sc_restore *r)
{
	uint64_t v = UINT64_MAX;
	if (r->sec_len[1] >= 8)
		memcpy(&v, r->sec[1], 8);
	return v;
}

/* Is the digest of the bytes served for version @v the one its owner recorded? */
static int version_digest_ok(struct doc_versions *dv, uint64_t v, struct sc_digest d)
{
	for (int i = 0; i < VERSIONS; i++) {
		uint64_t tag = atomic_load(&dv->d[i].v);
		if (tag != v + 1)
			continue;
		struct sc_digest want = { atomic_load(&dv->d[i].lo), atomic_load(&dv->d[i].hi) };
		return atomic_load(&dv->d[i].v) == tag && sc_digest_equal(want, d);
	}
	return 0; /* overwritten by VERSIONS later puts: too old to be served anyway */
}

static int doc_owner(const struct worker *w, const struct wl_doc *doc)
{
	return doc->id % w->o->procs == (uint32_t)(w->ws - w->sh->w);
}

/* The owner puts version @v of @doc (recording its digest first). */
static void doc_put(struct worker *w, struct wl_doc *doc, uint64_t v, const int32_t *tokens)
{
	struct doc_versions *dv = &w->sh->ver[doc->id];
	struct wl_payload p;
	if (doc_payload(doc, v, &p))
		return;
	struct sc_digest d = sc_digest_sections(p.p.sec[0], p.p.sec_len[0], p.p.sec[1], p.p.sec_len[1]);
	int i = (int)(v % VERSIONS);
	atomic_store(&dv->d[i].v, 0);
	atomic_store(&dv->d[i].lo, d.lo);
	atomic_store(&dv->d[i].hi, d.hi);
	atomic_store(&dv->d[i].v, v + 1);
	struct sc_l3_put_args args = { .model_identity = MODEL, .state_identity = STATE, .ns = NS,
				       .tokens = tokens, .token_count = doc->token_count, .payload = &p.p };
	int rc = sc_l3_put(w->l3, &args, NULL);
	if (rc == 0 && v > atomic_load(&dv->done))
		atomic_store(&dv->done, v);
	else if (rc && rc != -ENOSPC && rc != -E2BIG)
		note_error(w, rc);
	wl_payload_free(&p);
}

static void op_l3(struct worker *w)
{
	struct wl_doc *doc = &w->sh->l3docs[wl_rand(&w->rng) % L3_DOCS];
	struct doc_versions *dv = &w->sh->ver[doc->id];
	uint32_t n = wl_prompt(doc, wl_rand(&w->rng), 4, w->l3tokens);
	uint64_t before = atomic_load(&dv->done); /* a put that returned before we start */
	struct sc_restore r;
	int rc = sc_restore(w->st, w->l3, NS, w->l3tokens, n, SC_RESTORE_WAIT, &r);
	if (rc == -ENOENT || rc == 0) {
		/* not stored yet (or removed by the budget): its owner puts the current version */
		if (doc_owner(w, doc))
			doc_put(w, doc, atomic_load(&dv->done), w->l3tokens);
		return;
	}
	if (rc < 0) {
		if (rc != -EBUSY)
			note_error(w, rc);
		return;
	}
	uint64_t v = version_of(&r);
	struct sc_digest d = sc_digest_sections(r.sec[0], r.sec_len[0], r.sec[1], r.sec_len[1]);
	if ((uint32_t)rc != doc->token_count || v == UINT64_MAX || !version_digest_ok(dv, v, d)) {
		atomic_fetch_add(&w->ws->digest_mismatches, 1);
		problem(w->sh, "restore of L3 document %u served the wrong bytes (version %llu, source %d)", doc->id,
			(unsigned long long)v, r.source);
	} else if (v < before) {
		atomic_fetch_add(&w->ws->stale_served, 1);
		problem(w->sh, "restore of L3 document %u served version %llu after version %llu was put (source %d)",
			doc->id, (unsigned long long)v, (unsigned long long)before, r.source);
	}
	atomic_fetch_add(r.source == SC_RESTORE_FROM_L2 ? &w->ws->restores_l2 : &w->ws->restores_l3, 1);
	sc_restore_release(&r);
}

/* New bytes for a document's prefix (its owner only): the next restore anywhere serves them. */
static void op_reput(struct worker *w)
{
	struct wl_doc *doc = &w->sh->l3docs[wl_rand(&w->rng) % L3_DOCS];
	if (!doc_owner(w, doc))
		return;
	struct doc_versions *dv = &w->sh->ver[doc->id];
	uint32_t n = wl_prompt(doc, 0, 0, w->l3tokens);
	doc_put(w, doc, atomic_fetch_add(&dv->next, 1) + 1, w->l3tokens);
	(void)n;
}

/* A stage of another model asks for this model's prefixes: never served (same namespace, tokens). */
static void op_other_identity(struct worker *w)
{
	struct wl_doc *doc = &w->sh->l3docs[wl_rand(&w->rng) % L3_DOCS];
	uint32_t n = wl_prompt(doc, wl_rand(&w->rng), 4, w->l3tokens);
	struct sc_restore r;
	int rc = sc_restore(w->other, w->l3, NS, w->l3tokens, n, SC_RESTORE_WAIT, &r);
	if (rc > 0) {
		atomic_fetch_add(&w->ws->digest_mismatches, 1);
		problem(w->sh, "a stage of model %s restored L3 document %u of model %s", OTHER_MODEL, doc->id, MODEL);
		sc_restore_release(&r);
	} else if (rc < 0 && rc != -ENOENT && rc != -EBUSY) {
		note_error(w, rc);
	}
}

/* A full queue of cold O_DIRECT fills into L2 reservations: killed at any moment, its reads land
 * after its death, and nothing of the arena may be reused before they did. */
static void op_fill_queue(struct worker *w)
{
	struct sc_l2_resv resv[FILLQ];
	struct sc_location loc[FILLQ];
	struct sc_l3_fill_req req[FILLQ], *pr[FILLQ];
	unsigned n = 0;
	for (unsigned i = 0; i < FILLQ; i++) {
		struct wl_doc *doc = &w->sh->l3docs[wl_rand(&w->rng) % L3_DOCS];
		uint32_t t = wl_prompt(doc, 0, 0, w->l3tokens);
		if (sc_l3_locate_longest(w->dl3, NS, w->l3tokens, t, &loc[n]) <= 0)
			continue;
		uint64_t room = (loc[n].payload_bytes + 4095) & ~4095ull;
		if (sc_l2_reserve(w->st, room, &resv[n]))
			break;
		req[n] = (struct sc_l3_fill_req){ .loc = &loc[n], .dst = resv[n].ptr, .dst_bytes = resv[n].bytes,
						  .identity = sc_stage_identity(w->st) };
		pr[n] = &req[n];
		n++;
	}
	int k = n ? sc_l3_fill_submit(w->dl3, pr, n) : 0;
	for (int got = 0; got < k;) {
		struct sc_l3_fill_req *done[FILLQ];
		int r = sc_l3_fill_reap(w->dl3, done, FILLQ, -1);
		if (r < 0) {
			note_error(w, r);
			break;
		}
		got += r;
	}
	for (int i = 0; i < k; i++) {
		/* a fill verified the bytes it read; they must still be its object's */
		if (req[i].result == 0 &&
		    !sc_digest_equal(sc_digest(req[i].dst, loc[i].payload_bytes), loc[i].digest)) {
			atomic_fetch_add(&w->ws->late_writes, 1);
			problem(w->sh, "a filled reservation changed after its fill was verified");
		} else if (req[i].result && req[i].result != -ENOENT) {
			note_error(w, req[i].result);
		}
	}
	if (k < 0)
		note_error(w, k);
	for (unsigned i = 0; i < n; i++)
		sc_l2_reserve_release(&resv[i]);
}

static void op_decode(struct worker *w)
{
	uint32_t seq = ++w->seq;
	uint64_t request_id = ((uint64_t)w->inc << 32) | seq;
	struct sc_batcher b;
	struct sc_batcher_opts bo = { .interval_ns = 20000000ull, .capacity = 64 };
	sc_batcher_init_opts(&b, w->ring, request_id, w->inc, &bo);
	struct incarnation *in = &w->sh->inc[w->inc];
	uint32_t len = wl_gen_length(request_id);
	for (uint32_t i = 0; i < len;) {
		uint64_t before = sc_batcher_count(&b);
		int rc = sc_batcher_commit(&b, wl_gen_token(request_id, i), (uint64_t)i * 1000000ull);
		if (sc_batcher_count(&b) > before)
			i++; /* the token was taken (even when the emit found the ring full) */
		atomic_store(&in->committed, pack(seq, (uint32_t)(sc_batcher_count(&b) - sc_batcher_pending(&b))));
		if (rc == -EAGAIN)
			usleep(100);
	}
	while (sc_batcher_finish(&b, SC_COMMIT_FINISHED) == -EAGAIN)
		usleep(100);
	atomic_store(&in->committed, pack(seq, len));
}

static int worker_main(struct shared *sh, uint32_t slot, uint32_t inc, const struct stress_opts *o)
{
	struct worker w = { .sh = sh, .ws = &sh->w[slot], .inc = inc, .o = o };
	w.rng = wl_mix(o->seed ^ ((uint64_t)inc << 20));
	atomic_store(&sh->inc[inc].worker, slot);
	int rc;
	struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_RECONCILE, .budget_bytes = 256u << 20,
				 .file_mode = o->users ? 0660 : 0 };
	if ((rc = sc_arena_open(o->name, &w.a)) == 0)
		atomic_store(&sh->inc[inc].token, sc_arena_token(w.a));
	struct sc_l3_opts dlo = lo;
	dlo.o_direct = SC_L3_ODIRECT_ON;
	dlo.queue_depth = FILLQ;
	if (rc || (rc = sc_stage_open(w.a, MODEL, STATE, &w.st)) || (rc = sc_stage_open(w.a, OTHER_MODEL, STATE, &w.other)) ||
	    (rc = sc_l3_open(o->l3dir, &lo, &w.l3)) || (rc = sc_l3_bind_arena(w.l3, w.a)) ||
	    (rc = sc_l3_open(o->l3dir, &dlo, &w.dl3)) || (rc = sc_l3_bind_arena(w.dl3, w.a)) ||
	    (rc = sc_ring_open(w.a, &w.ring)) || (rc = wl_zipf_init(&w.zipf, KEYS, 0.99))) {
		note_error(&w, rc);
		return 1;
	}
	w.buf = malloc(o->max_payload);
	w.l3tokens = malloc(sizeof(int32_t) * 4200);
	if (!w.buf || !w.l3tokens)
		return 1;
	const char *const *points = sc_fault_points();
	unsigned npoints = 0;
	while (points[npoints])
		npoints++;
	unsigned total_weight = 0;
	for (int i = 0; i < OP_COUNT; i++)
		total_weight += op_weight[i];
	while (!atomic_load(&sh->stop_workers)) {
		/* with kills on, now and then arm a fault point: this incarnation then dies inside the library */
		if (o->kill_every_ms && npoints && !w.ws->armed && wl_rand(&w.rng) % 400 == 0) {
			char spec[96];
			snprintf(spec, sizeof(spec), "%s@%u", points[wl_rand(&w.rng) % npoints], 1 + (unsigned)(wl_rand(&w.rng) % 3));
			if (sc_fault_arm(spec) == 0)
				atomic_store(&w.ws->armed, 1);
		}
		unsigned pick = (unsigned)(wl_rand(&w.rng) % total_weight), op = 0;
		while (pick >= op_weight[op])
			pick -= op_weight[op++];
		switch (op) {
		case OP_GET: op_get(&w); break;
		case OP_ADMIT: op_admit(&w); break;
		case OP_REMOVE: op_remove(&w); break;
		case OP_INVALIDATE: op_invalidate(&w); break;
		case OP_L3: op_l3(&w); break;
		case OP_DECODE: op_decode(&w); break;
		case OP_REPUT: op_reput(&w); break;
		case OP_OTHER_ID: op_other_identity(&w); break;
		case OP_FILLQ: op_fill_queue(&w); break;
		}
		atomic_fetch_add(&w.ws->ops[op], 1);
		atomic_store(&w.ws->heartbeat_ns, cli_now_ns());
	}
	sc_fault_arm(NULL);
	sc_ring_close(w.ring);
	wl_zipf_free(&w.zipf);
	sc_l3_close(w.l3);
	sc_l3_close(w.dl3);
	sc_stage_close(w.other);
	sc_stage_close(w.st);
	sc_arena_close(w.a);
	free(w.buf);
	free(w.l3tokens);
	return 0;
}

/* ---- the parent: killer, monitor, summary ---- */

static uint32_t next_inc = 1;

/* In a new worker process: become the user --users gives this slot. 0 or -errno. */
static int become_user(uint32_t slot)
{
	gid_t g = USERS_GID;
	uid_t u = slot % 2 ? USER_B : USER_A;
	if (setgroups(1, &g) || setresgid(g, g, g) || setresuid(u, u, u))
		return -errno;
	umask(007);
	return 0;
}

static int run_worker(struct shared *sh, uint32_t slot, uint32_t inc, const struct stress_opts *o)
{
	if (o->users && become_user(slot)) {
		atomic_store(&sh->w[slot].last_error, -EPERM);
		return 1;
	}
	return worker_main(sh, slot, inc, o);
}

/*
 * Start incarnation @inc in @slot. With --pidns, odd slots get a pid namespace of their own: a
 * child unshares it and forks the worker (pid 1 there), publishes the worker's pid as we see it,
 * waits for it and exits with its fate (128 + signal when it was killed).
 */
static pid_t spawn(struct shared *sh, uint32_t slot, const struct stress_opts *o)
{
	uint32_t inc = next_inc++;
	if (inc >= MAX_INCARNATIONS)
		return -1;
	atomic_store(&sh->w[slot].incarnation, inc);
	atomic_store(&sh->w[slot].armed, 0);
	atomic_store(&sh->w[slot].heartbeat_ns, cli_now_ns());
	atomic_store(&sh->w[slot].pid, 0);
	int own_ns = o->pidns && slot % 2;
	pid_t pid = fork();
	if (pid == 0) {
		if (!own_ns)
			_exit(run_worker(sh, slot, inc, o));
		if (unshare(CLONE_NEWPID))
			_exit(3);
		pid_t w = fork();
		if (w == 0)
			_exit(run_worker(sh, slot, inc, o));
		if (w < 0)
			_exit(4);
		atomic_store(&sh->w[slot].pid, w);
		int st;
		while (waitpid(w, &st, 0) < 0 && errno == EINTR)
			;
		_exit(WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st));
	}
	if (pid < 0)
		return -1;
	atomic_store(&sh->w[slot].waitpid, pid);
	if (!own_ns)
		atomic_store(&sh->w[slot].pid, pid);
	return pid;
}

/* The fate of a worker from its waitpid status (through a pid-namespace parent or not). */
static int killed_by_sigkill(int status)
{
	return (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
	       (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
}

/* The most bytes any dead holder still holds HELD_GRACE_NS after its process died. */
struct held_watch {
	uint64_t max_bytes, max_leases, checks;
	uint32_t first_token[64];        /* holders dead with no known death time: first seen dead */
	uint64_t first_seen[64];
	unsigned nfirst;
};

static uint64_t death_time(struct shared *sh, struct held_watch *hw, uint32_t token, uint64_t now)
{
	for (uint32_t inc = next_inc; inc-- > 1;)
		if (atomic_load(&sh->inc[inc].token) == token) {
			uint64_t d = atomic_load(&sh->inc[inc].died_ns);
			if (d)
				return d;
			break;
		}
	for (unsigned i = 0; i < hw->nfirst && i < 64; i++)
		if (hw->first_token[i] == token)
			return hw->first_seen[i];
	hw->first_token[hw->nfirst % 64] = token;
	hw->first_seen[hw->nfirst % 64] = now;
	hw->nfirst++;
	return now;
}

static void watch_held(struct sc_arena *a, struct shared *sh, struct held_watch *hw)
{
	struct sc_holder rows[256];
	int n = sc_arena_holders(a, rows, 256);
	if (n < 0)
		return;
	hw->checks++;
	uint64_t now = cli_now_ns();
	for (int i = 0; i < n && i < 256; i++) {
		if (rows[i].alive || (!rows[i].leases && !rows[i].reserved_bytes))
			continue;
		if (now - death_time(sh, hw, rows[i].token, now) < HELD_GRACE_NS)
			continue;
		uint64_t bytes = rows[i].leased_bytes + rows[i].reserved_bytes;
		if (bytes > hw->max_bytes || rows[i].leases > hw->max_leases)
			problem(sh, "a dead holder (token %#x, pid %u) still held %u leases and %llu bytes over 2 s after its death",
				rows[i].token, rows[i].pid, rows[i].leases, (unsigned long long)bytes);
		if (bytes > hw->max_bytes)
			hw->max_bytes = bytes;
		if (rows[i].leases > hw->max_leases)
			hw->max_leases = rows[i].leases;
	}
}

/* --users: the arena and the L3 directory belong to the shared group, group-writable, and new
 * L3 subdirectories inherit the group (setgid). */
static int share_with_group(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "chgrp -R %u '%s' && chmod -R g+rwX '%s' && find '%s' -type d -exec chmod g+s {} +",
		 USERS_GID, dir, dir, dir);
	return system(cmd) == 0 ? 0 : -EPERM;
}

static void on_finding(const char *component, const char *message, int repaired, void *ctx)
{
	int json = *(int *)ctx;
	if (!json)
		printf("  fsck %-12s %s%s\n", component, message, repaired ? " (repaired)" : "");
}

/* One run: the stores, the shared bookkeeping, the processes, and what the parent counted. */
struct stress {
	struct stress_opts o;
	char l3buf[256];
	int own_l3, tty, created;
	struct sc_arena *a;
	struct shared *sh;
	pid_t verifier;
	struct held_watch hw;
	uint64_t t0;
	double elapsed;
	/* counted by the parent while the workers run */
	uint64_t kills, fault_deaths, deadlocks, respawn_fail;
	/* the verdict */
	uint64_t lost, totals[OP_COUNT], hits, misses, mism, errors, r2, r3, torn, leaked, late, stale;
	int usable;                  /* the repaired arena took an admission and served it */
	struct sc_fsck_report rep, rep2;
	int frc, frc2, fsck_clean, fail;
};

/* The arena (used if it exists, else created) and the L3 directory, shared with the group for
 * --users. On failure the message is printed and the exit status returned. */
static int open_stores(struct stress *s)
{
	const struct stress_opts *o = &s->o;
	int rc = sc_arena_open(o->name, &s->a);
	if (rc == -ENOENT) {
		struct sc_arena_opts ao = { .size_bytes = o->size, .huge = SC_HUGE_AUTO,
					    .segment_bytes = (uint32_t)o->segment_bytes };
		if (o->users) {
			ao.mode = 0660;
			ao.gid = USERS_GID;
		}
		rc = sc_arena_create(o->name, &ao, &s->a);
		s->created = rc == 0;
	}
	if (rc)
		return cli_fail("stress", rc, "cannot open or create arena '%s'", o->name);
	struct sc_l3 *l3 = NULL;
	struct sc_l3_opts lo = { .budget_bytes = 256u << 20, .file_mode = o->users ? 0660 : 0 };
	if ((rc = sc_l3_open(o->l3dir, &lo, &l3))) {
		sc_arena_close(s->a);
		return cli_fail("stress", rc, "cannot open L3 directory %s", o->l3dir);
	}
	if (o->segment_bytes && (rc = sc_l3_set_segment_bytes(l3, o->segment_bytes))) {
		sc_l3_close(l3);
		sc_arena_close(s->a);
		return cli_fail("stress", rc, "cannot cut L3 directory %s in segments", o->l3dir);
	}
	sc_l3_close(l3);
	if (o->users && (rc = share_with_group(o->l3dir))) {
		sc_arena_close(s->a);
		return cli_fail("stress", rc, "cannot share L3 directory %s with group %u", o->l3dir, USERS_GID);
	}
	return 0;
}

/* The bookkeeping that survives the kills, with the L3 documents and their digests. */
static int make_shared(struct stress *s)
{
	s->sh = mmap(NULL, sizeof(*s->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s->sh == MAP_FAILED) {
		sc_arena_close(s->a);
		return cli_fail("stress", -errno, "mmap");
	}
	wl_docs_make(s->sh->l3docs, L3_DOCS, 16, 1024, s->o.seed);
	/* digests of the L3 documents, for verifying restores */
	struct wl_geometry g;
	wl_geometry_default(&g);
	for (int i = 0; i < L3_DOCS; i++) {
		struct wl_payload p;
		if (wl_payload_build(&g, &s->sh->l3docs[i], &p) == 0)
			wl_payload_free(&p);
	}
	return 0;
}

/* Reap the workers that died (and the verifier, if it did) and start their next incarnation. */
static void reap_and_respawn(struct stress *s)
{
	struct shared *sh = s->sh;
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == s->verifier) {
			s->verifier = -1;
			continue;
		}
		for (uint32_t i = 0; i < s->o.procs; i++) {
			if (atomic_load(&sh->w[i].waitpid) != pid)
				continue;
			atomic_store(&sh->w[i].pid, 0);
			atomic_store(&sh->w[i].waitpid, 0);
			atomic_store(&sh->inc[atomic_load(&sh->w[i].incarnation)].died_ns, cli_now_ns());
			if (killed_by_sigkill(status) && atomic_load(&sh->w[i].armed))
				s->fault_deaths++;
			else if (!killed_by_sigkill(status))
				problem(sh, "worker %u exited on its own (status %d, last error %s)", i, status,
					sc_strerror(atomic_load(&sh->w[i].last_error)));
			if (spawn(sh, i, &s->o) < 0)
				s->respawn_fail++;
		}
	}
}

/* Deadlock: a live worker with no completed op for more than 2 s. */
static void check_progress(struct stress *s, uint64_t now)
{
	struct shared *sh = s->sh;
	for (uint32_t i = 0; i < s->o.procs; i++) {
		pid_t p = atomic_load(&sh->w[i].pid);
		uint64_t hb = atomic_load(&sh->w[i].heartbeat_ns);
		if (p > 0 && now > hb && now - hb > 2000000000ull) {
			s->deadlocks++;
			problem(sh, "worker %u (pid %d) made no progress for %.1f s", i, p, (double)(now - hb) / 1e9);
			kill(p, SIGKILL); /* count it once, then let it be respawned */
			atomic_store(&sh->w[i].heartbeat_ns, now);
		}
	}
}

static void print_progress(const struct stress *s, uint64_t now)
{
	uint64_t ops = 0;
	for (uint32_t i = 0; i < s->o.procs; i++)
		for (int k = 0; k < OP_COUNT; k++)
			ops += atomic_load(&s->sh->w[i].ops[k]);
	fprintf(stderr, "%s[%3.0fs] ops %llu  kills %llu  fault deaths %llu  commits verified %llu  torn %llu  deadlocks %llu%s",
		s->tty ? "\r" : "", (double)(now - s->t0) / 1e9, (unsigned long long)ops, (unsigned long long)s->kills,
		(unsigned long long)s->fault_deaths, (unsigned long long)atomic_load(&s->sh->verify_commits),
		(unsigned long long)atomic_load(&s->sh->torn_records), (unsigned long long)s->deadlocks,
		s->tty ? "   " : "\n");
}

/* The verifier and the workers; then, every 10 ms for --seconds: respawn the dead, watch what
 * the dead hold, kill one every --kill-every ms, look for deadlocks, print progress. */
static void run(struct stress *s)
{
	const struct stress_opts *o = &s->o;
	uint64_t next_watch = 0;
	s->verifier = fork();
	if (s->verifier == 0)
		_exit(verifier_main(o->name, s->sh));
	for (uint32_t i = 0; i < o->procs; i++)
		spawn(s->sh, i, o);

	uint64_t t0 = s->t0 = cli_now_ns(), end = t0 + (uint64_t)o->seconds * 1000000000ull;
	uint64_t next_kill = o->kill_every_ms ? t0 + (uint64_t)o->kill_every_ms * 1000000ull : UINT64_MAX;
	uint64_t next_progress = t0 + 1000000000ull, rng = wl_mix(o->seed ^ 0x4b494c4cull);
	while (cli_now_ns() < end) {
		usleep(10000);
		uint64_t now = cli_now_ns();
		reap_and_respawn(s);
		if (now >= next_watch) {
			watch_held(s->a, s->sh, &s->hw);
			next_watch = now + 250000000ull;
		}
		if (now >= next_kill) {
			uint32_t i = (uint32_t)(wl_rand(&rng) % o->procs);
			pid_t victim = atomic_load(&s->sh->w[i].pid);
			atomic_store(&s->sh->w[i].armed, 0); /* the killer's, not a fault point's */
			if (victim > 0 && kill(victim, SIGKILL) == 0)
				s->kills++;
			next_kill = now + (uint64_t)o->kill_every_ms * 1000000ull;
		}
		check_progress(s, now);
		if (now >= next_progress && !o->json) {
			print_progress(s, now);
			next_progress = now + 1000000000ull;
		}
	}
	if (s->tty && !o->json)
		fprintf(stderr, "\n");
}

/* Stop: workers first (they finish their op), then the verifier drains the rings. */
static void stop(struct stress *s)
{
	struct shared *sh = s->sh;
	watch_held(s->a, sh, &s->hw); /* before the workers go: what the dead of the run still hold */
	atomic_store(&sh->stop_workers, 1);
	for (uint32_t i = 0; i < s->o.procs; i++) {
		pid_t p = atomic_load(&sh->w[i].waitpid);
		if (p <= 0)
			continue;
		int status;
		/* a worker still armed may die at its fault point while finishing: that is fine */
		uint64_t deadline = cli_now_ns() + 10000000000ull;
		while (waitpid(p, &status, WNOHANG) == 0) {
			if (cli_now_ns() > deadline) {
				s->deadlocks++;
				problem(sh, "worker %u did not stop within 10 s", i);
				pid_t w = atomic_load(&sh->w[i].pid);
				kill(w > 0 ? w : p, SIGKILL);
				waitpid(p, &status, 0);
				break;
			}
			usleep(10000);
		}
	}
	atomic_store(&sh->stop_verifier, 1);
	if (s->verifier > 0)
		waitpid(s->verifier, NULL, 0);
	s->elapsed = (double)(cli_now_ns() - s->t0) / 1e9;
}

/* Lost commits: for every incarnation, what it committed must have been delivered. */
static uint64_t count_lost(struct shared *sh)
{
	uint64_t lost = 0;
	for (uint32_t inc = 1; inc < next_inc; inc++) {
		uint64_t c = atomic_load(&sh->inc[inc].committed), d = atomic_load(&sh->inc[inc].delivered);
		if (c && d < c) {
			lost++;
			problem(sh, "incarnation %u committed request %u up to %u tokens; delivered only request %u up to %u",
				inc, (uint32_t)(c >> 32), (uint32_t)c, (uint32_t)(d >> 32), (uint32_t)d);
		}
	}
	return lost;
}

/* After the repair: an admission of a new entry publishes and is served back, byte for byte. */
static int repaired_arena_usable(struct sc_arena *a)
{
	struct sc_stage *st;
	if (sc_stage_open(a, "stress-after-repair", STATE, &st))
		return 0;
	static uint8_t b[65536];
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 7 + 3);
	int32_t t[2] = { 1, 2 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { sizeof(b) } };
	struct sc_lease l;
	int ok = sc_l2_admit(st, NS, t, 2, sc_digest(b, sizeof(b)), &p, SC_ORIGIN_DIRECT) == 0 &&
		 sc_l2_get(st, NS, t, 2, NULL, &l) == 0;
	if (ok) {
		ok = l.sec_len[0] == sizeof(b) && !memcmp(l.sec[0], b, sizeof(b));
		sc_lease_release(&l);
	}
	struct sc_key k;
	if (sc_l2_key(st, NS, t, 2, &k) == 0)
		(void)sc_l2_remove(st, k);
	sc_stage_close(st);
	return ok;
}

/* Lost commits, fsck (with repair, so that what dead processes held is accounted; then a clean
 * check), the workers' totals, and the verdict. */
static void check(struct stress *s)
{
	struct shared *sh = s->sh;
	int fsck_json = s->o.json;
	s->lost = count_lost(sh);
	if (!s->o.json)
		printf("fsck --repair:\n");
	s->frc = sc_arena_fsck(s->a, SC_FSCK_REPAIR | SC_FSCK_DEEP, on_finding, &fsck_json, &s->rep);
	s->frc2 = sc_arena_fsck(s->a, SC_FSCK_DEEP, on_finding, &fsck_json, &s->rep2);
	for (uint32_t i = 0; i < s->o.procs; i++) {
		for (int k = 0; k < OP_COUNT; k++)
			s->totals[k] += atomic_load(&sh->w[i].ops[k]);
		s->hits += atomic_load(&sh->w[i].hits);
		s->misses += atomic_load(&sh->w[i].misses);
		s->mism += atomic_load(&sh->w[i].digest_mismatches);
		s->late += atomic_load(&sh->w[i].late_writes);
		s->stale += atomic_load(&sh->w[i].stale_served);
		s->errors += atomic_load(&sh->w[i].errors);
		s->r2 += atomic_load(&sh->w[i].restores_l2);
		s->r3 += atomic_load(&sh->w[i].restores_l3);
	}
	s->torn = atomic_load(&sh->torn_records);
	s->leaked = s->frc2 < 0 ? UINT64_MAX : s->rep2.leaked_bytes;
	s->fsck_clean = s->frc2 == 0;
	s->usable = repaired_arena_usable(s->a);
	s->fail = s->mism || s->late || s->stale || !s->usable || s->lost || s->torn || s->leaked || s->deadlocks ||
		  s->hw.max_bytes || s->hw.max_leases ||
		  !s->fsck_clean || atomic_load(&sh->verifier_error);
}

static void report_json(const struct stress *s)
{
	const struct stress_opts *o = &s->o;
	char leaked[24] = "null"; /* unknown when the last fsck failed */
	if (s->frc2 >= 0)
		snprintf(leaked, sizeof(leaked), "%llu", (unsigned long long)s->leaked);
	printf("{\"seconds\":%.1f,\"procs\":%u,\"seed\":%llu,\"ops_per_s\":{", s->elapsed, o->procs, (unsigned long long)o->seed);
	for (int k = 0; k < OP_COUNT; k++)
		printf("%s\"%s\":%.1f", k ? "," : "", op_names[k], (double)s->totals[k] / s->elapsed);
	printf("},\"hits\":%llu,\"misses\":%llu,\"restores_l2\":%llu,\"restores_l3\":%llu,\"kills\":%llu,"
	       "\"fault_deaths\":%llu,\"repairs\":%llu,\"commits_verified\":%llu,\"tokens_verified\":%llu,"
	       "\"errors\":%llu,\"digest_mismatches\":%llu,\"late_writes\":%llu,\"stale_served\":%llu,"
	       "\"usable_after_repair\":%s,\"lost_commits\":%llu,\"torn_records\":%llu,"
	       "\"leaked_bytes\":%s,\"deadlocks\":%llu,\"held_by_dead_bytes\":%llu,\"held_by_dead_leases\":%llu,"
	       "\"pidns\":%s,\"users\":%s,\"fsck_problems\":%d,\"fsck_repaired\":%llu,\"ok\":%s}\n",
	       (unsigned long long)s->hits, (unsigned long long)s->misses, (unsigned long long)s->r2,
	       (unsigned long long)s->r3, (unsigned long long)s->kills, (unsigned long long)s->fault_deaths,
	       (unsigned long long)s->rep2.lock_repairs, (unsigned long long)atomic_load(&s->sh->verify_commits),
	       (unsigned long long)atomic_load(&s->sh->verify_tokens), (unsigned long long)s->errors,
	       (unsigned long long)s->mism, (unsigned long long)s->late, (unsigned long long)s->stale,
	       s->usable ? "true" : "false", (unsigned long long)s->lost, (unsigned long long)s->torn, leaked, (unsigned long long)s->deadlocks, (unsigned long long)s->hw.max_bytes,
	       (unsigned long long)s->hw.max_leases, o->pidns ? "true" : "false", o->users ? "true" : "false", s->frc2,
	       (unsigned long long)(s->frc >= 0 ? s->rep.repaired : 0), s->fail ? "false" : "true");
}

static void report_text(const struct stress *s)
{
	printf("\n== stress summary (%.1f s, %u workers, seed %llu) ==\n", s->elapsed, s->o.procs,
	       (unsigned long long)s->o.seed);
	printf("ops/s        ");
	for (int k = 0; k < OP_COUNT; k++)
		printf(" %s %.0f", op_names[k], (double)s->totals[k] / s->elapsed);
	printf("\nL2           %llu hits, %llu misses; restores %llu from L2, %llu from L3\n", (unsigned long long)s->hits,
	       (unsigned long long)s->misses, (unsigned long long)s->r2, (unsigned long long)s->r3);
	printf("kills        %llu by the killer, %llu at fault points\n", (unsigned long long)s->kills,
	       (unsigned long long)s->fault_deaths);
	printf("repairs      %llu (lock holders that died)\n", (unsigned long long)s->rep2.lock_repairs);
	if (s->frc < 0)
		printf("fsck         NOT CLEAN (repair failed: %s; %llu problems found)\n", sc_strerror(s->frc),
		       (unsigned long long)s->rep.problems);
	else
		printf("fsck         %s (repair: %llu problems found, %llu repaired; then %d left)\n",
		       s->fsck_clean ? "clean" : "NOT CLEAN", (unsigned long long)s->rep.problems,
		       (unsigned long long)s->rep.repaired, s->frc2);
	printf("verified     %llu commits, %llu tokens\n", (unsigned long long)atomic_load(&s->sh->verify_commits),
	       (unsigned long long)atomic_load(&s->sh->verify_tokens));
	printf("errors       %llu (refusals such as -ENOSPC are not errors)\n", (unsigned long long)s->errors);
	printf("held by the dead %llu checks of every holder (sc_arena_holders), before any repair\n",
	       (unsigned long long)s->hw.checks);
	printf("digest_mismatches %llu\nlate_writes       %llu\nstale_served      %llu\nlost_commits      %llu\n"
	       "torn_records      %llu\n", (unsigned long long)s->mism, (unsigned long long)s->late,
	       (unsigned long long)s->stale, (unsigned long long)s->lost, (unsigned long long)s->torn);
	if (s->frc2 < 0)
		printf("leaked_bytes      unknown (fsck: %s)\n", sc_strerror(s->frc2));
	else
		printf("leaked_bytes      %llu\n", (unsigned long long)s->leaked);
	printf("deadlocks         %llu\n", (unsigned long long)s->deadlocks);
	printf("held_by_dead_bytes %llu\nheld_by_dead_leases %llu\n", (unsigned long long)s->hw.max_bytes,
	       (unsigned long long)s->hw.max_leases);
	printf("after repair      %s\n", s->usable ? "usable (an admission published and read back)" : "NOT USABLE");
	if (s->sh->problem_written)
		printf("first problem: %s\n", s->sh->first_problem);
	printf("%s\n", s->fail ? "FAILED" : "OK");
}

/* The arena (if this run created it) and the L3 directory (if its own) go unless --keep. */
static void cleanup(struct stress *s)
{
	sc_arena_close(s->a);
	if (!s->o.keep) {
		if (s->created)
			sc_arena_destroy(NULL, s->o.name);
		if (s->own_l3)
			cli_rm_rf(s->o.l3dir);
	}
	munmap(s->sh, sizeof(*s->sh));
}

int cmd_stress(int argc, char **argv)
{
	if (stress_hosts_wanted(argc, argv)) /* several hosts on one L3 directory: stress_hosts.c */
		return stress_hosts_main(argc, argv);
	static struct stress s = { .o = { .procs = 4, .seconds = 30, .size = 512u << 20, .max_payload = 16u << 20 } };
	s.o.seed = (uint64_t)time(NULL);
	int rc = parse(argc, argv, &s.o);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	s.own_l3 = !s.o.l3dir;
	s.tty = isatty(2);
	if (s.own_l3) {
		snprintf(s.l3buf, sizeof(s.l3buf), "/var/tmp/stagecache-stress-%d", (int)getpid());
		s.o.l3dir = s.l3buf;
	}
	if ((rc = open_stores(&s)) || (rc = make_shared(&s)))
		return rc;
	if (!s.o.json)
		printf("stress %s: %u workers, %u s, kill every %u ms, seed %llu, L3 %s%s%s\n", s.o.name, s.o.procs,
		       s.o.seconds, s.o.kill_every_ms, (unsigned long long)s.o.seed, s.o.l3dir,
		       s.o.pidns ? ", every other worker in its own pid namespace" : "",
		       s.o.users ? ", workers as uids 65534/65533 of group 65534" : "");

	run(&s);
	stop(&s);
	check(&s);
	if (s.o.json)
		report_json(&s);
	else
		report_text(&s);
	cleanup(&s);
	return s.fail ? EXIT_FAIL : EXIT_OK;
}
