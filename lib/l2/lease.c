/*
 * lib/l2/lease.c — leases: records in this process's reader-slot ext area (struct l2_ext).
 *
 * A record (gen << 32 | idx+1) is stored by the slot owner, inside its epoch, before it leaves
 * the epoch (release in shm_epoch_exit); reclaimers read records only after shm_epoch_min_active
 * (acquire) showed the epoch of the retirement passed, so they see every lease taken on a retired
 * entry (protocol: shm/index.c). Release stores 0 (release: the holder's reads of the payload
 * happen before a reclaimer that reads 0 frees it). A dead holder's records are cleared with its
 * slot by whoever takes the slot's lock after the death (shm/readers.c), and only then.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../events.h"
#include "lease.h"
#include "stage.h"

int l2_lease_take(struct sc_arena *a, uint64_t rec)
{
	uint64_t free_bits = ~a->l2_lease_used & ((SC_LEASES_MAX == 64) ? ~0ull : ((1ull << SC_LEASES_MAX) - 1));
	if (!free_bits)
		return -EMFILE;
	int i = __builtin_ctzll(free_bits);
	struct l2_ext *x = l2_ext_of(shm_reader_slot(a->shm, (uint32_t)a->shm->reader_slot));
	atomic_store_explicit(&x->rec[i], rec, memory_order_relaxed);
	a->l2_lease_used |= 1ull << i;
	return i;
}

void l2_lease_drop(struct sc_arena *a, int i)
{
	if (i < 0 || i >= SC_LEASES_MAX || !(a->l2_lease_used & (1ull << i)))
		return;
	struct l2_ext *x = l2_ext_of(shm_reader_slot(a->shm, (uint32_t)a->shm->reader_slot));
	/* release: our reads of the leased payload happen-before a reclaimer's acquire of 0 */
	atomic_store_explicit(&x->rec[i], 0, memory_order_release);
	a->l2_lease_used &= ~(1ull << i);
}

void sc_lease_release(struct sc_lease *l)
{
	if (!l || !l->arena_)
		return;
	l2_lease_drop(l->arena_, l->slot_);
	l->arena_ = NULL;
	l->slot_ = -1;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

size_t l2_leases_collect(struct sc_arena *a, uint64_t **out)
{
	uint32_t n = shm_readers_count(a->shm);
	size_t cap = 0, k = 0;
	uint64_t *v = NULL;
	*out = NULL;
	for (uint32_t i = 0; i < n; i++) {
		struct shm_reader_slot *s = shm_reader_slot(a->shm, i);
		if (atomic_load_explicit(&s->state, memory_order_relaxed) == SHM_SLOT_FREE)
			continue; /* a free slot records nothing (its cleaner zeroed ext before FREE) */
		struct l2_ext *x = l2_ext_of(s);
		for (int j = 0; j < SC_LEASES_MAX; j++) {
			/* acquire: pairs with the release in l2_lease_drop / the epoch exit */
			uint64_t r = atomic_load_explicit(&x->rec[j], memory_order_acquire);
			if (!r)
				continue;
			if (k == cap) {
				size_t nc = cap ? cap * 2 : 64;
				uint64_t *nv = realloc(v, nc * sizeof(*v));
				if (!nv) {
					/* cannot allocate: report "everything leased" by failing closed */
					free(v);
					*out = NULL;
					return SIZE_MAX;
				}
				v = nv;
				cap = nc;
			}
			v[k++] = r;
		}
	}
	if (k)
		qsort(v, k, sizeof(*v), cmp_u64);
	*out = v;
	return k;
}

/* At most once per L2_REAP_PERIOD_NS across all processes (a CAS on the arena's reap_due_ns):
 * whoever passes by first after the period reaps. This bounds how long a dead process's leases
 * and reservations outlive it while anyone admits, with no daemon. */
#define L2_REAP_PERIOD_NS 100000000ull
#define L2_REAP_MIN_GAP_NS 1000000ull /* one handle reaps at most this often unless forced */
void l2_reap_periodic(struct sc_arena *a)
{
	_Atomic uint64_t *due = &a->shm->hdr->reap_due_ns;
	uint64_t now = shm_now_ns(), d = atomic_load_explicit(due, memory_order_relaxed);
	if (now < d || !atomic_compare_exchange_strong_explicit(due, &d, now + L2_REAP_PERIOD_NS, memory_order_relaxed,
								 memory_order_relaxed))
		return;
	(void)l2_reap(a, 0);
	events_reap_listener(a); /* a dead listener: writers stop appending for nobody */
}

int l2_reap(struct sc_arena *a, int force)
{
	uint64_t now = shm_now_ns();
	if (!force && now - a->l2_last_reap_ns < L2_REAP_MIN_GAP_NS)
		return 0;
	a->l2_last_reap_ns = now;
	/* clearing a dead holder's slot drops its lease records (shm/readers.c) */
	int freed = shm_readers_reap(a->shm), swept = 0;
	uint64_t cleaned = shm_readers_cleaned(a->shm);
	if (freed > 0 || force || cleaned != a->l2_swept_cleaned) {
		a->l2_swept_cleaned = cleaned;
		/* their private reservations are orphans now (the index view comes with l2_ready: a
		 * handle that never used L2, fsck's, may reap first) */
		/* a holder that died between the pass above and the sweep (or whose ring let its lock
		 * go then: its last reads ended, shm/readers.c) was judged dead by the sweep, which freed
		 * its reservations: a second pass frees its slot too, so that after the reap nothing of
		 * a holder dead before the sweep began is left */
		if (l2_ready(a) == 0 && (swept = shm_index_sweep(l2_ix(a), -1)) >= 0)
			freed += shm_readers_reap(a->shm);
	}
	/* reservations swept free count: the holder's slot may have been cleaned by someone else */
	return freed > 0 || swept > 0;
}

