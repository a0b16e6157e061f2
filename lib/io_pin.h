/*
 * lib/io_pin.h — a ring keeps the owner of the memory it reads into alive until its reads end.
 *
 * A process's death does not end its I/O: io_uring reads land after waitpid() (O_DIRECT reads
 * into the arena, tens of ms later). Memory of an arena is reserved under the owner token of the
 * handle whose mapping holds it, and a token is alive while its slot's OFD lock is held
 * (shm/readers.c). A ring that reads into an arena registers that lock's file description in its
 * file table; the kernel frees a ring's registered files only after its teardown completed every
 * request, so the lock (and with it every reservation, claim and lease of the token) outlives the
 * last read that may land. The ring of a dead process is torn down by the kernel; nothing waits.
 */
#ifndef SC_IO_PIN_H
#define SC_IO_PIN_H

#include <liburing.h>
#include <stdint.h>

#define IO_PIN_SLOTS 16u /* arena handles one ring reads into at once, at most */

struct io_pin_ent {
	uint64_t serial;   /* the handle (shm_arena_pin_find), 0: a free entry */
	uintptr_t base, end; /* its mapping */
	uint32_t inflight; /* requests into it not yet completed: never unregistered before 0 */
	uint32_t closed;   /* its handle was closed: kept only until its reads are done */
};

struct io_pins {
	struct io_pin_ent e[IO_PIN_SLOTS]; /* entry i is the ring's registered file i */
	uint64_t gen;      /* shm_arena_open_gen() when closed handles were last let go */
	int table;         /* 1: the file table exists, < 0: the kernel refused it (-errno), 0: not tried */
};

/* Before a request reads into @dst on @ring (used by this thread only): make sure the ring holds
 * the lock of the arena handle whose mapping holds @dst, and count the request. The entry index
 * (give it to io_pin_put when the request completed), -1 when @dst is in no arena of this process,
 * or -errno: the ring cannot hold the lock (-ENFILE: IO_PIN_SLOTS handles with reads in flight; or
 * the kernel's error registering files), and the read must not start. Does not block; allocates
 * nothing; one mutex and a registration only the first time a ring meets a handle. */
int io_pin_get(struct io_uring *ring, struct io_pins *p, const void *dst);
/* The request counted by io_pin_get(…) == @idx completed (idx < 0: nothing). */
void io_pin_put(struct io_pins *p, int idx);
/* The ring is gone (io_uring_queue_exit, or a forked child's copy): forget its pins. */
void io_pins_forget(struct io_pins *p);

#endif
