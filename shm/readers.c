/*
 * shm/readers.c — the reader table and epoch-based reclamation.
 *
 * Protocol
 * --------
 * Slot ownership. A slot is free when pid == 0. A process claims it with a CAS of pid 0 -> own
 * pid, then writes start_time and attached_ns, and finally release-stores state = LIVE (pairs with
 * the acquire load of state in shm_arena_info / reapers). A reaper that finds a slot whose owner is
 * dead (kill(pid,0) fails, or /proc start time differs: the pid was recycled) first CASes pid to
 * SHM_PID_REAPING so that no two reapers and no claimer touch the slot at once, clears it, and
 * release-stores pid = 0. A claimer that died between its CAS and start_time looks like a slot
 * with start_time 0: it is judged by kill(pid,0) alone.
 *
 * The ext area (L2 leases) is written only by the slot owner, or by the reaper that holds the
 * REAPING marker. A slot whose ext area is non-zero after the callback is put back to its dead
 * owner's pid, so the L2 tier's reaper can deal with it later; memory it pins stays pinned.
 *
 * Epochs. global_epoch starts at 1 and only grows (writers fetch_add). A reader stores the
 * current global epoch into its slot, then issues a seq_cst fence before touching the index
 * (shm_epoch_enter); it stores 0 with release when done. A writer that unlinked an object at
 * epoch E may reuse its memory once every live slot's epoch is 0 or > E: any reader that could
 * still hold a reference entered at an epoch <= E (it loaded the object before the unlink, and
 * the fence orders its epoch store before that load). Stale reads of another slot's epoch only
 * make reclamation later, never earlier, because slot epochs move from 0 to a value >= the
 * current global epoch. Dead readers are skipped: they hold nothing.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "readers.h"

#define SHM_PID_REAPING UINT32_MAX

static int ext_is_zero(const struct shm_reader_slot *s)
{
	const uint64_t *w = (const uint64_t *)s->ext;
	for (size_t i = 0; i < SHM_READER_EXT_BYTES / 8; i++)
		if (w[i])
			return 0;
	return 1;
}

int shm_reader_slot_alive(const struct shm_reader_slot *s)
{
	uint32_t pid = atomic_load_explicit(&s->pid, memory_order_acquire);
	if (pid == 0 || pid == SHM_PID_REAPING)
		return pid == SHM_PID_REAPING;
	return shm_proc_alive((int)pid, atomic_load_explicit(&s->start_time, memory_order_relaxed));
}

/* Free the slot of a dead owner; returns 1 if freed. */
static int reap_one(struct shm_arena *a, struct shm_reader_slot *s, uint32_t pid,
		    void (*cb)(struct shm_arena *, struct shm_reader_slot *, void *), void *ctx)
{
	/* a dead reader is inside no read section: clear its epoch first, so that neither a
	 * reaper that dies below (leaving the slot REAPING) nor leases that stay behind can hold
	 * reclamation back. Only a dead owner's slot gets here; nobody else writes its epoch. */
	atomic_store_explicit(&s->epoch, 0, memory_order_release);
	if (!atomic_compare_exchange_strong_explicit(&s->pid, &pid, SHM_PID_REAPING, memory_order_acq_rel,
						     memory_order_relaxed))
		return 0;
	if (cb)
		cb(a, s, ctx);
	if (!ext_is_zero(s)) {
		/* still pins something only its module can release: leave it for that module */
		atomic_store_explicit(&s->pid, pid, memory_order_release);
		return 0;
	}
	atomic_store_explicit(&s->epoch, 0, memory_order_relaxed);
	atomic_store_explicit(&s->start_time, 0, memory_order_relaxed);
	atomic_store_explicit(&s->attached_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&s->state, SHM_SLOT_FREE, memory_order_relaxed);
	atomic_store_explicit(&s->pid, 0, memory_order_release);
	return 1;
}

int shm_readers_reap(struct shm_arena *a, void (*cb)(struct shm_arena *, struct shm_reader_slot *, void *),
		     void *ctx)
{
	uint32_t n = shm_readers_count(a);
	int freed = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct shm_reader_slot *s = shm_reader_slot(a, i);
		uint32_t pid = atomic_load_explicit(&s->pid, memory_order_acquire);
		if (pid == 0 || pid == SHM_PID_REAPING || (int32_t)i == a->reader_slot)
			continue;
		if (shm_reader_slot_alive(s))
			continue;
		freed += reap_one(a, s, pid, cb, ctx);
	}
	return freed;
}

int shm_readers_claim(struct shm_arena *a)
{
	uint32_t n = shm_readers_count(a);
	uint32_t me = (uint32_t)getpid();
	uint64_t start = shm_proc_start_time((int)me);
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < n; i++) {
			struct shm_reader_slot *s = shm_reader_slot(a, i);
			uint32_t pid = atomic_load_explicit(&s->pid, memory_order_acquire);
			if (pid != 0) {
				/* on the second pass, free what dead owners left behind */
				if (pass == 1 && pid != SHM_PID_REAPING && !shm_reader_slot_alive(s))
					reap_one(a, s, pid, NULL, NULL);
				pid = atomic_load_explicit(&s->pid, memory_order_acquire);
				if (pid != 0)
					continue;
			}
			if (!atomic_compare_exchange_strong_explicit(&s->pid, &pid, me, memory_order_acq_rel,
								     memory_order_relaxed))
				continue;
			atomic_store_explicit(&s->state, SHM_SLOT_CLAIMING, memory_order_relaxed);
			atomic_store_explicit(&s->start_time, start, memory_order_relaxed);
			atomic_store_explicit(&s->attached_ns, shm_realtime_ns(), memory_order_relaxed);
			atomic_store_explicit(&s->epoch, 0, memory_order_relaxed);
			/* release: the fields above are visible to whoever acquires state == LIVE */
			atomic_store_explicit(&s->state, SHM_SLOT_LIVE, memory_order_release);
			return (int)i;
		}
	}
	return -EUSERS;
}

void shm_readers_release(struct shm_arena *a, int32_t slot)
{
	if (slot < 0 || (uint32_t)slot >= shm_readers_count(a))
		return;
	struct shm_reader_slot *s = shm_reader_slot(a, (uint32_t)slot);
	if (atomic_load_explicit(&s->pid, memory_order_relaxed) != (uint32_t)getpid())
		return; /* not ours any more (reaped after a pid change, e.g. after fork) */
	if (!ext_is_zero(s))
		return; /* its module must release what it records first; a reaper will finish */
	atomic_store_explicit(&s->epoch, 0, memory_order_relaxed);
	atomic_store_explicit(&s->start_time, 0, memory_order_relaxed);
	atomic_store_explicit(&s->attached_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&s->state, SHM_SLOT_FREE, memory_order_relaxed);
	atomic_store_explicit(&s->pid, 0, memory_order_release);
}

uint64_t shm_epoch_advance(struct shm_arena *a)
{
	return atomic_fetch_add_explicit(&a->hdr->global_epoch, 1, memory_order_acq_rel) + 1;
}

uint64_t shm_epoch_min_active(struct shm_arena *a)
{
	/* pairs with the seq_cst fence in shm_epoch_enter */
#ifdef __SANITIZE_THREAD__
	(void)atomic_fetch_add_explicit(&a->hdr->global_epoch, 0, memory_order_seq_cst);
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
	uint64_t min = UINT64_MAX;
	uint32_t n = shm_readers_count(a);
	for (uint32_t i = 0; i < n; i++) {
		struct shm_reader_slot *s = shm_reader_slot(a, i);
		uint64_t e = atomic_load_explicit(&s->epoch, memory_order_acquire);
		if (e == 0 || e >= min)
			continue;
		uint32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
		/* a dead reader holds nothing; kill(2) is enough here, a recycled pid only delays */
		if (pid == 0 || (pid != SHM_PID_REAPING && kill((pid_t)pid, 0) < 0 && errno == ESRCH))
			continue;
		min = e;
	}
	return min;
}
