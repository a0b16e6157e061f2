/*
 * shm/readers.h — the reader table: one slot per attached handle, liveness, and epoch-based
 * reclamation.
 *
 * A slot is 512 bytes: the first cache line is this module's; the remaining 448 bytes
 * (SHM_READER_EXT_BYTES) belong to the L2 tier, which records there the leases the handle holds.
 *
 * Liveness. Each attached handle holds an OFD lock (fcntl F_OFD_SETLK, write) on the byte
 * SHM_LOCK_SLOT(i) of the arena file, through a file description of its own that is never
 * mapped and is closed in forked children. The kernel drops that lock when the process dies,
 * whatever pid namespace or user it runs under, and any process that can open the arena can test
 * it. The lock *is* the ownership of the slot: only its holder writes the slot (protocol in
 * shm/readers.c). Everything a process holds elsewhere in the arena (heap reservations, fill
 * claims, ring roles, mutexes) is recorded with its owner token, (incarnation << 16 | slot); a
 * token is alive while its slot is LIVE, at that incarnation, and locked. pid, uid and start
 * time are kept for people (`stagecache info`), never used to decide liveness; uid also counts
 * a user's slots against the arena's limit per user (shm_readers_claim).
 *
 * Fields and their writers (the slot's lock holder is "the holder"):
 *   state, inc, epoch, pid, uid, pidns, attached_ns, ext   written only by the holder
 * Everybody reads state, inc and epoch (acquire where stated in shm/readers.c); ext is read by
 * reclaimers (lease records, lib/l2/lease.c); the information fields only by `info`.
 */
#ifndef SC_SHM_READERS_H
#define SC_SHM_READERS_H

#include "region.h"
#include "util.h"

#define SHM_READER_SLOT_BYTES 512u
#define SHM_READER_EXT_BYTES (SHM_READER_SLOT_BYTES - SHM_CACHELINE)
/* Incarnations run 1..SHM_INC_MAX so that a token is never 0 and leaves bit 31 free (the mutex
 * word's waiters bit). */
#define SHM_INC_MAX 0x7fffu
/* Slot numbers fit the low 16 bits of a token. */
#define SHM_READER_SLOTS_MAX 65536u

struct shm_reader_slot {
	_Atomic uint32_t state;           /* SHM_SLOT_* */
	_Atomic uint32_t inc;             /* incarnation of the current/last holder, 1..SHM_INC_MAX */
	_Atomic uint64_t epoch;           /* 0: outside any read-side section; else the epoch entered */
	/* for people only (info): never used to decide liveness */
	_Atomic uint32_t pid;             /* in the holder's own pid namespace */
	_Atomic uint32_t uid;
	_Atomic uint64_t pidns;           /* inode of the holder's pid namespace (0: unknown) */
	_Atomic uint64_t attached_ns;     /* CLOCK_REALTIME at claim */
	uint8_t pad[SHM_CACHELINE - 40];
	/* the L2 tier's lease records (lib/l2/lease.c) */
	_Alignas(8) uint8_t ext[SHM_READER_EXT_BYTES];
};

enum {
	SHM_SLOT_FREE = 0,     /* nobody; a claimer may take it */
	SHM_SLOT_LIVE = 2,     /* attached (alive while its lock is held) */
	SHM_SLOT_CLEANING = 3, /* a holder is clearing what a dead owner left (finished by the next) */
};

_Static_assert(sizeof(struct shm_reader_slot) == SHM_READER_SLOT_BYTES, "reader slot layout");
_Static_assert(offsetof(struct shm_reader_slot, epoch) == 8, "reader slot layout");
_Static_assert(offsetof(struct shm_reader_slot, attached_ns) == 32, "reader slot layout");
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

/* Owner tokens: (incarnation << 16) | slot, never 0, bit 31 clear. */
static inline uint32_t shm_token(uint32_t slot, uint32_t inc)
{
	return (inc << 16) | (slot & 0xffffu);
}
static inline uint32_t shm_token_slot(uint32_t t) { return t & 0xffffu; }
static inline uint32_t shm_token_inc(uint32_t t) { return t >> 16; }

/* Claim a slot for this handle: take the lock of a free slot, or of one whose holder died (what
 * it left is cleared first). Sets a->reader_slot, a->token, a->lock_fd. 0, -EUSERS (every slot
 * is held by a live process, or its lock by someone), -EDQUOT (this effective uid already holds
 * the arena's slots_per_user live slots: the slot is given back), or another negative errno.
 * The uid a slot records is its holder's word: the limit stops a user's own processes through
 * the library, not a user who writes the table or locks the bytes directly. */
int shm_readers_claim(struct shm_arena *a);
/* Release our slot (our ext area should already be cleared by its owner module; what is left in
 * it is dropped) and close the lock descriptor. @pinned: a ring still holds the lock's description
 * (shm_arena_pin_find) and may still write into what the slot's token owns: the slot is left as it
 * is, and the first reaper to take the lock after the ring let it go clears it. */
void shm_readers_release(struct shm_arena *a, int pinned);

/* Clear every slot whose holder is dead (bounded: each slot at most once; one fcntl per slot
 * that is not free). Returns the number of slots freed. */
int shm_readers_reap(struct shm_arena *a);

/* Is the holder of @token alive? 1 yes (also for our own token, and conservatively when the
 * lock cannot be tested), 0 no (a different incarnation, a free slot, no lock, or a token that
 * names no slot). Costs one fcntl unless the answer is visible in the slot. */
int shm_token_alive(struct shm_arena *a, uint32_t token);
/* Is slot @i held (LIVE and locked)? For info and fsck. */
int shm_slot_alive(struct shm_arena *a, uint32_t i);

/* Times a slot was cleared in this arena, its holder dead or detaching (shared counter): a module
 * that keeps per-owner state elsewhere (heap reservations) sweeps it when this moves. A caller that
 * sees it move sees the clearings it counts: their holders' tokens test dead (acquire, pairs with
 * the cleaner's release increment). */
uint64_t shm_readers_cleaned(const struct shm_arena *a);
/* Of those, the slots whose holder had died (a slot its holder released itself is not counted): a module
 * that must hear of every death (the event listener, lib/events.c) watches this one. Ordered as
 * shm_readers_cleaned. */
uint64_t shm_readers_dead(const struct shm_arena *a);

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
/* Smallest epoch any slot is inside; UINT64_MAX when none. The epoch of a dead holder counts
 * until its slot is cleared (shm_readers_reap): reclamation waits, it never guesses. */
uint64_t shm_epoch_min_active(struct shm_arena *a);

#endif
