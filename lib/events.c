/*
 * lib/events.c — the event stream of what the arena holds: the writers' side (events_append,
 * called through lib/events.h by the L2 tier and the L3 binding), the listener (sc_events_open,
 * sc_events_read) and the counters. The ring's protocol is shm/evring.c's; this file gives its
 * records a meaning (enum sc_event_type) and tells the listener what it could not hear.
 *
 * A record: type = enum sc_event_type, aux = token count, w = key lo, key hi, digest lo, digest hi,
 * stage id.
 *
 * Why the listener may trust the truth it reads after opening: sc_events_open takes the role
 * (a seq_cst fence after the CAS), marks every L2 shard with its token (ev_listener, in the
 * shard lock's own cache line), then takes and releases every shard lock. A writer notes an L2
 * change while it holds the shard lock of the change (events_note_locked): if its critical section
 * ended before our lock of that shard, our later reads see the change; if it began after our
 * unlock, its read of the shard's mark happens after our store (the mutex orders them) and it
 * appends (once the listener word agrees). Marks are cleared (compared with the token) before
 * the role is given up, by the listener or by whoever reaps a dead one, so a next listener's
 * marks are never cleared by the previous one's leaving. Changes made without a shard lock fence
 * before they read the listener word (events_note).
 *
 * What the listener cannot hear, it is told: writers that found the ring full (the `dropped`
 * counter moved: its acquire load pairs with the writers' release increments, so every change
 * made before those drops is visible to the truth read after the LOST event); slots skipped or
 * torn (shm/evring.c); and the death of any attached process (the slots of dead holders are
 * reaped here at most every 100 ms, and shm_readers_dead moves when any is cleared, by us or
 * anyone): a writer killed between its change and its note leaves no event, so a death means
 * "read the truth again".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "../shm/index.h"
#include "../shm/readers.h"

#define EV_REAP_EVERY_NS (100ull * 1000 * 1000)

struct sc_events {
	struct sc_arena *a;
	const struct shm_evring *r;
	struct shm_evring_cursor cur;
	uint32_t token;
	uint64_t seen_dropped;       /* hdr->dropped at our last look */
	uint64_t seen_dead;          /* shm_readers_dead() at our last look */
	uint64_t seen_resets;        /* hdr->resets at our last look (a reset by anyone loses records) */
	uint64_t next_reap_ns;
};

static const char *const type_names[SC_EVENT_TYPE_COUNT] = {
	[SC_EVENT_L2_STORED] = "l2_stored",   [SC_EVENT_L2_REMOVED] = "l2_removed",
	[SC_EVENT_L2_CLEARED] = "l2_cleared", [SC_EVENT_L3_STORED] = "l3_stored",
	[SC_EVENT_L3_REMOVED] = "l3_removed", [SC_EVENT_L3_OBJECT_GONE] = "l3_object_gone",
	[SC_EVENT_LOST] = "lost",
};

const char *sc_event_type_name(int type)
{
	return type > 0 && type < SC_EVENT_TYPE_COUNT && type_names[type] ? type_names[type] : "?";
}

const char *sc_event_lost_name(int why)
{
	switch (why) {
	case SC_EVENT_LOST_DROPPED: return "dropped";
	case SC_EVENT_LOST_TORN: return "torn";
	case SC_EVENT_LOST_WRITER_DIED: return "writer_died";
	case SC_EVENT_LOST_RESET: return "reset";
	}
	return "?";
}

void events_append(const struct shm_evring *r, uint32_t type, uint64_t stage_id, struct sc_key key,
		   struct sc_digest d, uint32_t ntok)
{
	const uint64_t w[5] = { key.lo, key.hi, d.lo, d.hi, stage_id };
	(void)shm_evring_append(r, type, ntok, w); /* a drop is counted in the ring: the listener learns it */
}

static int token_alive(void *ctx, uint32_t token)
{
	return shm_token_alive(ctx, token);
}

void events_note_slow(struct sc_arena *a, uint32_t type, uint64_t stage_id, struct sc_key key, struct sc_digest d,
		      uint32_t ntok)
{
	const struct shm_evring *r = events_ring(a);
	if (r && atomic_load_explicit(&r->hdr->listener, memory_order_relaxed))
		events_append(r, type, stage_id, key, d, ntok);
}

/* Clear listener @t's marks on the shards (a compare: a newer listener's marks stay). Before the
 * role is given up, so that a next listener's marks come after ours are gone. */
static void unmark_shards(struct sc_arena *a, uint32_t t)
{
	struct shm_index ix;
	if (shm_index_view(a->shm, &ix))
		return;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++) {
		uint32_t want = t;
		(void)atomic_compare_exchange_strong_explicit(&ix.hdr->shards[s].ev_listener, &want, 0,
							      memory_order_relaxed, memory_order_relaxed);
	}
}

void events_reap_listener(struct sc_arena *a)
{
	const struct shm_evring *r = events_ring(a);
	if (!r)
		return;
	uint32_t t = atomic_load_explicit(&r->hdr->listener, memory_order_relaxed);
	if (t && !shm_token_alive(a->shm, t)) {
		unmark_shards(a, t);
		shm_evring_unlisten(r, t); /* the CAS compares t: a new listener's word stays */
	}
}

/* The ring of @a for a public call: 0 with *@r, -ECHILD (a handle inherited across fork()),
 * -EBADMSG (the region is corrupt). */
static int public_ring(struct sc_arena *a, const struct shm_evring **r)
{
	if (a->shm->forked)
		return -ECHILD;
	*r = events_ring(a);
	return *r ? 0 : -EBADMSG;
}

int sc_events_open(struct sc_arena *a, struct sc_events **out)
{
	if (!a || !out)
		return -EINVAL;
	*out = NULL;
	const struct shm_evring *r;
	int rc = public_ring(a, &r);
	if (rc)
		return rc;
	struct sc_events *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	ev->a = a;
	ev->r = r;
	ev->token = a->shm->token;
	rc = shm_evring_listen(r, ev->token, token_alive, a->shm);
	if (rc) {
		free(ev);
		return rc;
	}
	r->hdr->listener_pid = (uint32_t)getpid();
	r->hdr->listener_since_ns = shm_realtime_ns();
	/* what the previous listener left unread is read by us: events are hints, a stale one costs a look */
	ev->seen_dropped = atomic_load_explicit(&r->hdr->dropped, memory_order_acquire);
	ev->seen_dead = shm_readers_dead(a->shm);
	ev->seen_resets = atomic_load_explicit(&r->hdr->resets, memory_order_acquire);
	/* mark every shard, then quiesce the L2 writers: see the top of this file */
	struct shm_index ix;
	if (shm_index_view(a->shm, &ix) == 0) {
		for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
			atomic_store_explicit(&ix.hdr->shards[s].ev_listener, ev->token, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
			if (shm_index_lock(&ix, s) == 0)
				shm_index_unlock(&ix, s);
	}
	*out = ev;
	return 0;
}

void sc_events_close(struct sc_events *ev)
{
	if (!ev)
		return;
	if (!ev->a->shm->forked) {
		unmark_shards(ev->a, ev->token);
		shm_evring_unlisten(ev->r, ev->token);
	}
	free(ev);
}

static void lost_event(struct sc_event *e, uint32_t why, uint64_t count)
{
	memset(e, 0, sizeof(*e));
	e->type = SC_EVENT_LOST;
	e->lost_why = why;
	e->token_count = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
}

int sc_events_read(struct sc_events *ev, struct sc_event *out, unsigned max)
{
	if (!ev || (max && !out))
		return -EINVAL;
	struct sc_arena *a = ev->a;
	if (a->shm->forked)
		return -ECHILD;
	unsigned n = 0;
	if (!max)
		return 0;
	uint64_t now = shm_now_ns();
	/* deaths first: a writer killed between its change and its note left no event */
	if (now >= ev->next_reap_ns) {
		ev->next_reap_ns = now + EV_REAP_EVERY_NS;
		(void)shm_readers_reap(a->shm);
		uint64_t c = shm_readers_dead(a->shm);
		if (c != ev->seen_dead && n < max) {
			lost_event(&out[n++], SC_EVENT_LOST_WRITER_DIED, c - ev->seen_dead);
			ev->seen_dead = c;
		}
	}
	/* acquire: pairs with the writers' release increments (their changes came before) */
	uint64_t d = atomic_load_explicit(&ev->r->hdr->dropped, memory_order_acquire);
	if (d != ev->seen_dropped && n < max) {
		lost_event(&out[n++], SC_EVENT_LOST_DROPPED, d - ev->seen_dropped);
		ev->seen_dropped = d;
	}
	uint64_t rs = atomic_load_explicit(&ev->r->hdr->resets, memory_order_acquire);
	if (rs != ev->seen_resets && n < max) {
		lost_event(&out[n++], SC_EVENT_LOST_RESET, 0); /* fsck's, or ours: what was unread is gone */
		ev->seen_resets = rs;
	}
	if (n == max)
		return (int)n;
	/* the records, read in chunks into the caller's array (a record and an event are both 64 bytes) */
	_Static_assert(sizeof(struct shm_evrec) == sizeof(struct sc_event), "records convert in place");
	unsigned want = max - n;
	/* one slot is kept for the LOST event a take may report */
	if (want > 1)
		want--;
	struct shm_evrec *recs = (struct shm_evrec *)(void *)&out[n];
	uint64_t lost = 0;
	int got = shm_evring_take(ev->r, &ev->cur, recs, want, now, &lost);
	if (got < 0)
		return n ? (int)n : got;
	unsigned base = n, kept = 0;
	for (int i = 0; i < got; i++) {
		struct shm_evrec rec;
		memcpy(&rec, &recs[i], sizeof(rec));
		if (rec.type == 0 || rec.type >= SC_EVENT_LOST) {
			lost++; /* a type no writer writes: a scribbled record */
			continue;
		}
		struct sc_event *e = &out[base + kept++];
		memset(e, 0, sizeof(*e));
		e->type = rec.type;
		e->token_count = rec.aux;
		e->key = (struct sc_key){ rec.w[0], rec.w[1] };
		e->digest = (struct sc_digest){ rec.w[2], rec.w[3] };
		e->stage_id = rec.w[4];
	}
	n = base + kept;
	if (lost) {
		/* the LOST event goes before the records read with it: move them up one */
		if (n < max) {
			memmove(&out[base + 1], &out[base], kept * sizeof(*out));
			lost_event(&out[base], SC_EVENT_LOST_TORN, lost);
			n++;
		} else {
			lost_event(&out[n - 1], SC_EVENT_LOST_TORN, lost); /* the last record is re-read with the truth */
		}
	}
	return (int)n;
}

int sc_events_reset(struct sc_events *ev)
{
	if (!ev)
		return -EINVAL;
	shm_evring_reset(ev->r);
	ev->cur.hole_since_ns = 0;
	return 0;
}

int sc_events_post(struct sc_arena *a, const struct sc_event *e)
{
	if (!a || !e || !e->type || e->type >= SC_EVENT_LOST || e->reserved0 || e->reserved[0] ||
	    e->lost_why)
		return -EINVAL;
	const struct shm_evring *r;
	int rc = public_ring(a, &r);
	if (rc)
		return rc;
	atomic_thread_fence(memory_order_seq_cst); /* as events_note */
	if (!atomic_load_explicit(&r->hdr->listener, memory_order_relaxed))
		return -ENOTCONN;
	const uint64_t w[5] = { e->key.lo, e->key.hi, e->digest.lo, e->digest.hi, e->stage_id };
	return shm_evring_append(r, e->type, e->token_count, w);
}

uint64_t sc_events_seq(const struct sc_events *ev)
{
	return ev ? atomic_load_explicit(&ev->r->hdr->user_seq, memory_order_relaxed) : 0;
}

void sc_events_set_seq(struct sc_events *ev, uint64_t seq)
{
	if (ev)
		atomic_store_explicit(&ev->r->hdr->user_seq, seq, memory_order_relaxed);
}

int sc_events_stats(struct sc_arena *a, struct sc_events_stats *st)
{
	if (!a || !st)
		return -EINVAL;
	const struct shm_evring *r;
	int rc = public_ring(a, &r);
	if (rc)
		return rc;
	const struct shm_evring_hdr *h = r->hdr;
	memset(st, 0, sizeof(*st));
	st->records = r->nrec;
	st->listener = atomic_load_explicit(&h->listener, memory_order_acquire);
	st->listener_pid = h->listener_pid;
	st->listener_since_ns = h->listener_since_ns;
	st->listener_alive = st->listener ? shm_token_alive(a->shm, st->listener) : 0;
	uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
	st->appended = atomic_load_explicit(&h->head, memory_order_acquire);
	st->pending = st->appended > tail ? st->appended - tail : 0;
	st->consumed = atomic_load_explicit(&h->consumed, memory_order_relaxed);
	st->dropped = atomic_load_explicit(&h->dropped, memory_order_relaxed);
	st->lost = atomic_load_explicit(&h->lost, memory_order_relaxed);
	st->resets = atomic_load_explicit(&h->resets, memory_order_relaxed);
	st->seq = atomic_load_explicit(&h->user_seq, memory_order_relaxed);
	return 0;
}
