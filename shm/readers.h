/*
 * shm/readers.h — the reader table: one slot per attached process, and epoch-based reclamation.
 *
 * A slot is 512 bytes: the first cache line is this module's; the remaining 448 bytes
 * (SHM_READER_EXT_BYTES) belong to the L2 tier, which records the leases the process holds there
 * so that the leases of a dead process can be released. This module never frees a dead process's
 * slot while its ext area holds anything non-zero: the L2 tier's reaper does that
 * (shm_readers_reap with a callback).
 *
 * Protocol, see shm/readers.c.
 */
#ifndef SC_SHM_READERS_H
#define SC_SHM_READERS_H

#include "arena.h"

#define SHM_READER_SLOT_BYTES 512u
#define SHM_READER_EXT_BYTES (SHM_READER_SLOT_BYTES - SHM_CACHELINE)

struct shm_reader_slot {
	/* owner: written by the claimer (CAS on pid), read by everyone */
	_Atomic uint32_t pid;             /* 0: free */
	_Atomic uint32_t state;           /* SHM_SLOT_FREE / CLAIMING / LIVE */
	_Atomic uint64_t start_time;      /* /proc/PID/stat start time of the owner */
	_Atomic uint64_t attached_ns;     /* CLOCK_REALTIME at claim */
	/* epoch: written only by the owner; read by reclaimers */
	_Atomic uint64_t epoch;           /* 0: outside any read-side section; else the epoch entered */
	uint8_t pad[SHM_CACHELINE - 32];
	/* owned by the L2 tier (leases) */
	_Alignas(8) uint8_t ext[SHM_READER_EXT_BYTES];
};

enum { SHM_SLOT_FREE = 0, SHM_SLOT_CLAIMING = 1, SHM_SLOT_LIVE = 2 };

_Static_assert(sizeof(struct shm_reader_slot) == SHM_READER_SLOT_BYTES, "reader slot layout");
_Static_assert(offsetof(struct shm_reader_slot, epoch) == 24, "reader slot layout");
_Static_assert(offsetof(struct shm_reader_slot, ext) == SHM_CACHELINE, "ext on its own lines");

/* Slots in the table: the creation parameter (attach checked that they fit the region). */
static inline uint32_t shm_readers_count(const struct shm_arena *a)
{
	return a->hv.reader_slots;
}

static inline struct shm_reader_slot *shm_reader_slot(const struct shm_arena *a, uint32_t i)
{
	struct shm_reader_slot *t = shm_region(a, SHM_REGION_READERS, NULL);
	return &t[i];
}

/* Claim a slot for this process (reaping dead owners with an all-zero ext area on the way).
 * Returns the slot index, or -EUSERS when the table is full. */
int shm_readers_claim(struct shm_arena *a);
/* Release our slot (ext area must already be cleared by its owner module). */
void shm_readers_release(struct shm_arena *a, int32_t slot);

/* Reap slots whose owner is dead or whose pid was reused. For each, @cb (if not NULL) is called
 * first to release what the ext area records; the slot is freed only when the ext area is then
 * all zero. Bounded: looks at every slot once. Returns the number of slots freed. */
int shm_readers_reap(struct shm_arena *a, void (*cb)(struct shm_arena *, struct shm_reader_slot *, void *),
		     void *ctx);

/* Is the slot's owner alive (and not a recycled pid)? */
int shm_reader_slot_alive(const struct shm_reader_slot *s);

/*
 * Epochs. A reader brackets each lock-free read-side section with enter/exit. A writer that
 * unlinks an object stamps it with shm_epoch_advance()'s result; the object's memory may be
 * reused once shm_epoch_min_active() is greater than that stamp.
 */
static inline void shm_epoch_enter(struct shm_arena *a)
{
	struct shm_reader_slot *s = shm_reader_slot(a, (uint32_t)a->reader_slot);
	uint64_t e = atomic_load_explicit(&a->hdr->global_epoch, memory_order_relaxed);
	/* store-load fence: our epoch must be visible before we read any index entry, so a writer
	 * that scans the table after unlinking either sees us or we see its unlink. */
#ifdef __SANITIZE_THREAD__
	/* ThreadSanitizer does not model fences: a seq_cst exchange is the same barrier on x86 */
	atomic_exchange_explicit(&s->epoch, e, memory_order_seq_cst);
#else
	atomic_store_explicit(&s->epoch, e, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

static inline void shm_epoch_exit(struct shm_arena *a)
{
	struct shm_reader_slot *s = shm_reader_slot(a, (uint32_t)a->reader_slot);
	/* release: our reads of the object happen-before the reclaimer's acquire load of 0 */
	atomic_store_explicit(&s->epoch, 0, memory_order_release);
}

/* Advance the global epoch; returns the new value. Called by writers after an unlink. */
uint64_t shm_epoch_advance(struct shm_arena *a);
/* Smallest epoch any live reader is inside; UINT64_MAX when none. Dead readers are ignored. */
uint64_t shm_epoch_min_active(struct shm_arena *a);

#endif
