/*
 * lib/holders.c — who holds what in an arena (sc_arena_holders, sc_arena_token): reader slots,
 * their lease records and the entries they pin, and heap reservations by owner token.
 *
 * Read-only: it reads slots and lease records with acquire (pairs with the holders' release
 * stores, shm/readers.c and lib/l2/lease.c) and walks the heap under its lock. A holder may die
 * or detach while we look; the answer is a snapshot, each row consistent on its own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "l2/l2.h"
#include "../shm/heap.h"

uint32_t sc_arena_token(const struct sc_arena *arena)
{
	return arena ? arena->shm->token : 0;
}

struct holders {
	struct sc_arena *a;
	struct sc_holder *rows;
	unsigned n, cap;
};

static struct sc_holder *row_of(struct holders *h, uint32_t token)
{
	for (unsigned i = 0; i < h->n; i++)
		if (h->rows[i].token == token)
			return &h->rows[i];
	if (h->n == h->cap) {
		unsigned cap = h->cap ? h->cap * 2 : 64;
		struct sc_holder *r = realloc(h->rows, cap * sizeof(*r));
		if (!r)
			return NULL;
		h->rows = r;
		h->cap = cap;
	}
	struct sc_holder *r = &h->rows[h->n++];
	memset(r, 0, sizeof(*r));
	r->token = token;
	r->slot = shm_token_slot(token);
	return r;
}

static int walk_cb(uint64_t off, uint64_t bytes, int allocated, uint64_t tag, void *ctx)
{
	(void)off;
	struct holders *h = ctx;
	if (!allocated || SHM_TAG_TYPE(tag) != SHM_TAG_PRIV)
		return 0;
	struct sc_holder *r = row_of(h, (uint32_t)tag);
	if (!r)
		return -ENOMEM;
	r->reserved_bytes += bytes;
	return 0;
}

int sc_arena_holders(struct sc_arena *a, struct sc_holder *out, unsigned max)
{
	if (!a || (max && !out))
		return -EINVAL;
	int rc = l2_ready(a);
	if (rc)
		return rc;
	struct shm_arena *sa = a->shm;
	struct shm_index *ix = l2_ix(a);
	struct holders h = { .a = a };
	uint64_t my_ns = shm_pidns_self();
	for (uint32_t i = 0; i < shm_readers_count(sa); i++) {
		struct shm_reader_slot *s = shm_reader_slot(sa, i);
		if (atomic_load_explicit(&s->state, memory_order_acquire) == SHM_SLOT_FREE)
			continue;
		struct sc_holder *r = row_of(&h, shm_token(i, atomic_load_explicit(&s->inc, memory_order_acquire)));
		if (!r) {
			rc = -ENOMEM;
			goto out;
		}
		r->pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
		r->uid = atomic_load_explicit(&s->uid, memory_order_relaxed);
		uint64_t ns = atomic_load_explicit(&s->pidns, memory_order_relaxed);
		r->other_pidns = ns && my_ns && ns != my_ns;
		const struct l2_ext *x = l2_ext_of(s);
		for (int j = 0; j < SC_LEASES_MAX; j++) {
			uint64_t rec = atomic_load_explicit(&x->rec[j], memory_order_acquire);
			if (!rec)
				continue;
			r->leases++;
			uint32_t idx = (uint32_t)rec - 1, gen = (uint32_t)(rec >> 32);
			if (idx < ix->nentries && ix->ent[idx].gen == gen)
				r->leased_bytes += ix->ent[idx].footprint;
		}
	}
	if ((rc = shm_heap_walk(sa, walk_cb, &h)) < 0)
		goto out;
	for (unsigned i = 0; i < h.n && i < max; i++) { /* liveness only of the rows returned */
		h.rows[i].alive = shm_token_alive(sa, h.rows[i].token);
		out[i] = h.rows[i];
	}
	rc = (int)h.n;
out:
	free(h.rows);
	return rc;
}
