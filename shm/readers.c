/*
 * shm/readers.c — the reader table: slot ownership by kernel-released locks, and epochs.
 *
 * Protocol
 * --------
 * Ownership. Slot i belongs to whoever holds the OFD write lock on byte SHM_LOCK_SLOT(i) of the
 * arena file; only the holder writes the slot. Taking the lock is the claim (F_OFD_SETLK never
 * waits: EAGAIN means another file description holds it). A process that dies loses its locks at
 * once, so a slot whose state is not FREE and whose lock can be taken belonged to a dead holder:
 * whoever takes the lock — an attaching claimer or a reaper — clears it (clean_slot):
 *   state = CLEANING, inc += 1 (release: every token of the dead holder is dead from here on,
 *   even if the cleaner dies next), epoch = 0, ext = 0 (lease records), state = FREE.
 * A cleaner that dies half-way leaves CLEANING behind and loses the lock; the next taker starts
 * again from the top (every step is idempotent). A claimer then bumps inc again, writes the
 * information fields and release-stores LIVE; a reaper just drops the lock. There is no window in
 * which two processes write one slot: the reap race of pid-based schemes (a reaper zeroing the
 * epoch of a slot that a new owner claimed meanwhile) cannot happen.
 *
 * Tokens. A token (inc << 16 | slot) names one incarnation of one holder. It is alive while the
 * slot's inc equals it, the state is LIVE and the lock is held (shm_token_alive): read inc and
 * state (acquire: pairs with the claimer's release of LIVE), test the lock, read inc again. A
 * claimer takes the lock before it bumps inc, so the only error is transient and conservative: a
 * dead token looks alive while its slot is being taken over, never the other way round.
 *
 * Epochs. global_epoch starts at 1 and only grows (writers fetch_add). A reader stores the
 * current global epoch into its slot, then issues a seq_cst fence before touching the index
 * (shm_epoch_enter); it stores 0 with release when done. A writer that unlinked an object at
 * epoch E may reuse its memory once every slot's epoch is 0 or > E: any reader that could still
 * hold a reference entered at an epoch <= E (it loaded the object before the unlink, and the
 * fence orders its epoch store before that load). Stale reads of another slot's epoch only make
 * reclamation later, never earlier, because slot epochs move from 0 to a value >= the current
 * global epoch. A dead holder's epoch counts until a cleaner zeroes it (after it holds the lock,
 * i.e. after the death): reclamation waits for the reap, it never judges a reader dead by itself.
 *
 * Forks. The lock lives on a descriptor of its own, never mapped (a mapping would keep the file
 * description, and the lock, alive in a forked child). At fork the child closes the descriptors
 * of every handle it inherited (shm/arena.c), so a parent that dies is seen dead even while its
 * children run; the child's copies of the handles are marked unusable.
 *
 * I/O in flight. A process's death does not end its I/O: io_uring reads it submitted land after
 * waitpid() returns. So a ring that reads into the arena registers the lock's file description
 * in its file table (lib/io_pin.c), and the kernel drops the lock only when the ring's teardown
 * has completed every request: "alive" then means "alive, or its reads may still land", which is
 * exactly when what its token owns must not be reused. A handle closed while a ring still holds
 * its lock leaves its slot LIVE (shm_readers_release @pinned) for a reaper to clear later.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "readers.h"

/* Extra passes (1 ms apart) while slots are only busy being claimed or cleaned by others. */
#define CLAIM_RETRIES 100
#define CLAIM_RETRY_SLEEP_NS 1000000 /* between the retry passes */

static uint32_t next_inc(uint32_t inc)
{
	return inc >= SHM_INC_MAX ? 1 : inc + 1;
}

/* With the slot's lock held: clear what a dead (@dead) or departing holder left. */
static void clean_slot(struct shm_arena *a, struct shm_reader_slot *s, int dead)
{
	atomic_store_explicit(&s->state, SHM_SLOT_CLEANING, memory_order_relaxed);
	/* release: anyone who reads the new inc also sees CLEANING; old tokens are dead from now */
	atomic_store_explicit(&s->inc, next_inc(atomic_load_explicit(&s->inc, memory_order_relaxed)),
			      memory_order_release);
	shm_sched_point("readers.clean.inc");
	shm_fault_point("readers.clean.half"); /* crash tests: a cleaner that dies half-way */
	atomic_store_explicit(&s->epoch, 0, memory_order_release);
	_Atomic uint64_t *w = (_Atomic uint64_t *)(void *)s->ext;
	for (size_t i = 0; i < SHM_READER_EXT_BYTES / 8; i++)
		atomic_store_explicit(&w[i], 0, memory_order_release); /* pairs with reclaimers' acquire */
	atomic_store_explicit(&s->pid, 0, memory_order_relaxed);
	atomic_store_explicit(&s->attached_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&s->state, SHM_SLOT_FREE, memory_order_release);
	if (dead)
		atomic_fetch_add_explicit(&a->hdr->slots_dead, 1, memory_order_release);
	atomic_fetch_add_explicit(&a->hdr->slots_cleaned, 1, memory_order_release);
}

/* Does this user hold @lim live slots besides @mine? Counted after our own slot is LIVE, so two
 * processes of one user claiming at once each see the other (both may give up: never both stay). */
static int user_at_limit(struct shm_arena *a, uint32_t mine, uint32_t lim)
{
	/* our store of LIVE before our reads of the others' states (store buffering): of two claims at
	 * once, at least one sees the other */
	atomic_thread_fence(memory_order_seq_cst);
	uint32_t n = shm_readers_count(a), uid = (uint32_t)geteuid(), held = 0;
	for (uint32_t i = 0; i < n && held < lim; i++) {
		struct shm_reader_slot *s = shm_reader_slot(a, i);
		if (i == mine || atomic_load_explicit(&s->state, memory_order_acquire) != SHM_SLOT_LIVE ||
		    atomic_load_explicit(&s->uid, memory_order_relaxed) != uid)
			continue;
		held += shm_slot_alive(a, i) != 0;
	}
	return held >= lim;
}

int shm_readers_claim(struct shm_arena *a)
{
	uint32_t n = shm_readers_count(a);
	/* a file description of our own for the lock: reopen the very file we mapped (through
	 * /proc/self/fd, so a rename or unlink since does not matter), else by its path */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", a->fd);
	int fd = open(self, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		fd = open(a->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	/* first pass: free slots only (no cleaning); then slots of dead holders too, again for a
	 * while if some slot was only busy being claimed or cleaned by someone (bounded) */
	for (int pass = 0; pass < 2 + CLAIM_RETRIES; pass++) {
		int transient = 0;
		if (pass >= 2) {
			shm_sched_point("readers.claim.retry");
			struct timespec ts = { 0, CLAIM_RETRY_SLEEP_NS };
			nanosleep(&ts, NULL);
		}
		for (uint32_t i = 0; i < n; i++) {
			struct shm_reader_slot *s = shm_reader_slot(a, i);
			uint32_t st = atomic_load_explicit(&s->state, memory_order_relaxed);
			if (pass == 0 && st != SHM_SLOT_FREE)
				continue;
			int rc = shm_ofd_trylock(fd, SHM_LOCK_SLOT(i));
			if (rc == -EAGAIN) {
				transient |= st != SHM_SLOT_LIVE; /* being claimed or cleaned right now */
				continue; /* held: alive, or being claimed or cleaned right now */
			}
			if (rc) {
				close(fd);
				return rc;
			}
			shm_sched_point("readers.claim.locked");
			if (atomic_load_explicit(&s->state, memory_order_acquire) != SHM_SLOT_FREE)
				clean_slot(a, s, 1); /* its holder died: what it left goes first */
			uint32_t inc = next_inc(atomic_load_explicit(&s->inc, memory_order_relaxed));
			atomic_store_explicit(&s->inc, inc, memory_order_release);
			atomic_store_explicit(&s->epoch, 0, memory_order_relaxed);
			atomic_store_explicit(&s->pid, (uint32_t)getpid(), memory_order_relaxed);
			atomic_store_explicit(&s->uid, (uint32_t)geteuid(), memory_order_relaxed);
			atomic_store_explicit(&s->pidns, shm_pidns_self(), memory_order_relaxed);
			atomic_store_explicit(&s->attached_ns, shm_realtime_ns(), memory_order_relaxed);
			/* release: the fields above are visible to whoever acquires LIVE */
			atomic_store_explicit(&s->state, SHM_SLOT_LIVE, memory_order_release);
			uint32_t lim = a->hv.slots_per_user;
			if (lim && lim < n && user_at_limit(a, i, lim)) {
				clean_slot(a, s, 0);
				close(fd); /* drops the lock */
				return -EDQUOT;
			}
			a->lock_fd = fd;
			a->reader_slot = (int32_t)i;
			a->token = shm_token(i, inc);
			return (int)i;
		}
		if (pass >= 1 && !transient)
			break;
	}
	close(fd);
	return -EUSERS;
}

void shm_readers_release(struct shm_arena *a, int pinned)
{
	if (a->reader_slot < 0 || a->lock_fd < 0)
		return;
	if (!a->forked && !pinned)
		clean_slot(a, shm_reader_slot(a, (uint32_t)a->reader_slot), 0);
	close(a->lock_fd); /* drops the lock */
	a->lock_fd = -1;
	a->reader_slot = -1;
	a->token = 0;
}

int shm_readers_reap(struct shm_arena *a)
{
	uint32_t n = shm_readers_count(a);
	int freed = 0;
	if (a->lock_fd < 0)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		struct shm_reader_slot *s = shm_reader_slot(a, i);
		if ((int32_t)i == a->reader_slot ||
		    atomic_load_explicit(&s->state, memory_order_relaxed) == SHM_SLOT_FREE)
			continue;
		if (shm_ofd_trylock(a->lock_fd, SHM_LOCK_SLOT(i)))
			continue; /* alive (or someone else is on it) */
		shm_sched_point("readers.reap.locked");
		if (atomic_load_explicit(&s->state, memory_order_acquire) != SHM_SLOT_FREE) {
			clean_slot(a, s, 1);
			freed++;
		}
		shm_ofd_unlock(a->lock_fd, SHM_LOCK_SLOT(i));
	}
	return freed;
}

int shm_token_alive(struct shm_arena *a, uint32_t t)
{
	uint32_t slot = shm_token_slot(t), inc = shm_token_inc(t);
	if (!inc || inc > SHM_INC_MAX || slot >= shm_readers_count(a))
		return 0;
	if (t == a->token)
		return 1;
	struct shm_reader_slot *s = shm_reader_slot(a, slot);
	/* acquire: pairs with the claimer's release of LIVE / the cleaner's release of inc */
	if (atomic_load_explicit(&s->state, memory_order_acquire) != SHM_SLOT_LIVE ||
	    atomic_load_explicit(&s->inc, memory_order_acquire) != inc)
		return 0;
	int fd = a->lock_fd >= 0 ? a->lock_fd : a->fd;
	int held = shm_ofd_held(fd, SHM_LOCK_SLOT(slot));
	if (held < 0)
		return 1; /* cannot tell: never declare a holder dead on a guess */
	if (!held)
		return 0;
	return atomic_load_explicit(&s->inc, memory_order_acquire) == inc &&
	       atomic_load_explicit(&s->state, memory_order_acquire) == SHM_SLOT_LIVE;
}

int shm_slot_alive(struct shm_arena *a, uint32_t i)
{
	if (i >= shm_readers_count(a))
		return 0;
	struct shm_reader_slot *s = shm_reader_slot(a, i);
	return shm_token_alive(a, shm_token(i, atomic_load_explicit(&s->inc, memory_order_acquire)));
}

uint64_t shm_readers_dead(const struct shm_arena *a)
{
	return atomic_load_explicit(&a->hdr->slots_dead, memory_order_acquire);
}

uint64_t shm_readers_cleaned(const struct shm_arena *a)
{
	return atomic_load_explicit(&a->hdr->slots_cleaned, memory_order_acquire);
}

uint64_t shm_epoch_advance(struct shm_arena *a)
{
	/* release: a reader whose epoch is this value or a later one (shm_epoch_enter's load, then
	 * its fence) sees the unlink made before; reclamation does not wait for such a reader */
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
		uint64_t e = atomic_load_explicit(&shm_reader_slot(a, i)->epoch, memory_order_acquire);
		if (e && e < min)
			min = e;
	}
	return min;
}
