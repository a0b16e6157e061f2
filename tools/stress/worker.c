/*
 * tools/stress/worker.c — a worker of `stagecache stress`: the weighted kinds of work (see
 * stress.c), each checked as it goes, with its counters, heartbeat and commit points in the shared
 * bookkeeping so that a kill at any instant loses nothing the verifier must see.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "stagecache_test.h"
#include "stress_hosts.h"
#include "worker.h"

static const unsigned op_weight[OP_COUNT] = { 50, 16, 5, 3, 8, 18, 3, 2, 3 };

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

int stress_worker_main(struct shared *sh, uint32_t slot, uint32_t inc, const struct stress_opts *o)
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
