/* lib/ring.c — the public commit-ring API over shm/ring.c (protocol there), plus its probes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "probes.h"
#include "../shm/ring.h"

struct sc_ring {
	struct shm_ring_prod prod;
	struct sc_arena *arena;
};

_Static_assert(SC_COMMIT_FINISHED == SHM_REC_FINISHED && SC_COMMIT_ABORTED == SHM_REC_ABORTED &&
		       SC_COMMIT_MASK == SHM_REC_TERMINAL_MASK,
	       "commit flags are the record flags");
_Static_assert((int)SC_RING_FREE == (int)SHM_RING_FREE && (int)SC_RING_CLAIMING == (int)SHM_RING_CLAIMING &&
		       (int)SC_RING_LIVE == (int)SHM_RING_LIVE && (int)SC_RING_CLOSED == (int)SHM_RING_CLOSED,
	       "ring states");

int sc_ring_open(struct sc_arena *arena, struct sc_ring **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!arena)
		return -EINVAL;
	struct sc_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	int rc = shm_ring_claim(arena->shm, &r->prod);
	if (rc) {
		free(r);
		return rc;
	}
	r->arena = arena;
	*out = r;
	return 0;
}

int sc_ring_close(struct sc_ring *r)
{
	if (!r)
		return 0;
	if (r->arena->shm->forked) { /* the parent's ring: its producer goes on writing it */
		free(r);
		return -ECHILD;
	}
	int rc = shm_ring_release(&r->prod);
	free(r);
	return rc;
}

uint32_t sc_ring_index(const struct sc_ring *r)
{
	return r->prod.index;
}

uint32_t sc_ring_max_tokens(const struct sc_ring *r)
{
	return r->prod.max_tokens;
}

static void fire_probes(const struct sc_ring *r, const struct sc_commit *c, unsigned n, int rc)
{
	if (rc == 0 && SC_PROBE_ENABLED(commit_emit)) {
		for (unsigned i = 0; i < n; i++) {
			uint64_t ring = r->prod.index, req = c[i].request_id, total = c[i].generated_token_count,
				 nt = c[i].token_count;
			SC_PROBE(commit_emit, ring, req, total, nt);
		}
	} else if (rc == -EAGAIN && SC_PROBE_ENABLED(ring_full)) {
		uint64_t ring = r->prod.index, req = c[0].request_id, nt = 0;
		for (unsigned i = 0; i < n; i++)
			nt += c[i].token_count;
		SC_PROBE(ring_full, ring, req, nt);
	}
}

static int to_msg(const struct sc_commit *c, struct shm_ring_msg *m)
{
	if (c->token_count && !c->tokens)
		return -EINVAL;
	m->request_id = c->request_id;
	m->session_id = c->session_id;
	m->total = c->generated_token_count;
	m->flags = c->flags;
	m->ntokens = c->token_count;
	m->tokens = c->tokens;
	return 0;
}

int sc_ring_try_submit(struct sc_ring *r, const struct sc_commit *c)
{
	struct shm_ring_msg m;
	if (!r || !c || to_msg(c, &m))
		return -EINVAL;
	int rc = shm_ring_submit(&r->prod, &m);
	if (__builtin_expect(SC_PROBE_ENABLED(commit_emit) || SC_PROBE_ENABLED(ring_full), 0))
		fire_probes(r, c, 1, rc);
	return rc;
}

int sc_ring_try_submit_bulk(struct sc_ring *r, const struct sc_commit *c, unsigned n)
{
	if (!r || !c || !n || n > SC_RING_BULK_MAX)
		return -EINVAL;
	struct shm_ring_prod *p = &r->prod;
	/* where the records would end, pads included: all of them fit, or none is written */
	uint64_t end = p->tail;
	for (unsigned i = 0; i < n; i++) {
		if ((c[i].token_count && !c[i].tokens) || (c[i].flags & ~SC_COMMIT_MASK))
			return -EINVAL;
		if (c[i].token_count > p->max_tokens)
			return -E2BIG;
		end = shm_ring_advance(p, end, c[i].token_count);
	}
	int rc = 0;
	if (end - p->tail > p->size)
		rc = -E2BIG; /* could never fit, even in an empty ring */
	else if (end - p->head_cache > p->size)
		rc = shm_ring_reserve_slow(p, end);
	if (rc == 0) {
		uint64_t tail = p->tail, seq = p->seq;
		for (unsigned i = 0; i < n; i++) {
			struct shm_ring_msg m = { c[i].request_id, c[i].session_id, c[i].generated_token_count,
						  c[i].flags, c[i].token_count, c[i].tokens };
			tail = shm_ring_write(p, tail, ++seq, &m);
		}
		shm_ring_publish(p, tail, seq, n);
	}
	if (__builtin_expect(SC_PROBE_ENABLED(commit_emit) || SC_PROBE_ENABLED(ring_full), 0))
		fire_probes(r, c, n, rc);
	return rc;
}

int sc_ring_poll(struct sc_arena *arena, sc_ring_fn cb, void *ctx, unsigned max)
{
	if (!arena || !cb)
		return -EINVAL;
	struct shm_ring_cons *cons = arena->ring_cons;
	if (!cons) {
		cons = arena->ring_cons = calloc(1, sizeof(*cons));
		if (!cons)
			return -ENOMEM;
	}
	struct shm_ring_dir *d;
	int rc = shm_ring_poll_begin(arena->shm, cons, &d);
	if (rc)
		return rc;
	uint32_t nr = cons->ring_count, first = cons->rr;
	unsigned delivered = 0;
	int bad = 0, stop = 0;
	if (max > (1u << 30))
		max = 1u << 30;
	for (uint32_t k = 0; k < nr && !stop && delivered < max; k++) {
		uint32_t i = first + k < nr ? first + k : first + k - nr;
		struct shm_ring_cursor cur;
		int o = shm_ring_cursor_open(d, i, cons, &cur);
		if (o <= 0) {
			bad |= o < 0;
			continue;
		}
		struct shm_ring_view v;
		while (delivered < max) {
			int r = shm_ring_cursor_next(&cur, &v);
			if (r <= 0) {
				bad |= r < 0;
				break;
			}
			struct sc_commit c = {
				.request_id = v.request_id,
				.session_id = v.session_id,
				.generated_token_count = v.total,
				.flags = v.flags,
				.token_count = v.ntokens,
				.tokens = v.tokens,
				.ring = v.ring,
				.gen = v.gen,
				.seq = v.seq,
			};
			delivered++;
			if (cb(&c, ctx)) {
				stop = 1;
				break;
			}
		}
		shm_ring_cursor_close(&cur);
	}
	cons->rr = first + 1 < nr ? first + 1 : 0; /* the next poll starts one ring later: no ring starves */
	return bad ? -EBADMSG : (int)delivered;
}

void sc_ring_consumer_close(struct sc_arena *arena)
{
	if (!arena || !arena->ring_cons)
		return;
	shm_ring_consumer_release(arena->shm, arena->ring_cons);
	free(arena->ring_cons);
	arena->ring_cons = NULL;
}

int sc_ring_stats(struct sc_arena *arena, struct sc_ring_stat *out, unsigned max)
{
	if (!arena || (max && !out))
		return -EINVAL;
	struct shm_ring_dir *d;
	int rc = shm_ring_dir_check(arena->shm, &d);
	if (rc)
		return rc;
	uint32_t n = arena->shm->hv.ring_count;
	for (uint32_t i = 0; i < n && i < max; i++) {
		struct shm_ring_stat st;
		rc = shm_ring_stat(arena->shm, i, &st);
		if (rc)
			return rc;
		struct sc_ring_stat *o = &out[i];
		memset(o, 0, sizeof(*o));
		o->ring = i;
		o->state = st.state;
		o->producer_pid = st.pid;
		o->gen = st.gen;
		o->corrupt = st.corrupt;
		o->records = st.records;
		o->delivered = st.consumed;
		o->ring_full = st.ring_full;
		o->ring_bytes = arena->shm->hv.ring_bytes;
		if (!st.corrupt) {
			o->depth_bytes = st.tail - st.head;
			o->depth_records = st.records > st.consumed ? st.records - st.consumed : 0;
		}
		if (st.state == SHM_RING_LIVE)
			o->producer_alive = shm_token_alive(arena->shm, st.token);
	}
	return (int)n;
}
