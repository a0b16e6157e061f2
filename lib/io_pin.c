/*
 * lib/io_pin.c — rings hold the liveness lock of the arena they read into (lib/io_pin.h).
 *
 * Each ring that reads into arena memory has a sparse file table of IO_PIN_SLOTS entries; entry i
 * holds the lock description of one arena handle of this process (never used as a request's file:
 * it is there only so that the kernel keeps it, and the lock, until the ring is torn down). An
 * entry is registered the first time the ring reads into that handle's mapping, and let go only
 * when no request into it is in flight: after its handle was closed (noticed when
 * shm_arena_open_gen moved), or to make room for another handle. A closed handle whose lock a
 * ring holds left its slot LIVE (shm/readers.c); letting go of the entry frees the lock, and the
 * next reaper clears the slot.
 *
 * Only the ring's own thread calls these (rings are per thread, lib/l3/fill.c): no lock here but
 * the open-handle list's mutex in shm/arena.c, taken only when the ring meets a new mapping.
 */
#include <errno.h>
#include <unistd.h>

#include "io_pin.h"
#include "../shm/arena.h"

static int table_open(struct io_uring *ring, struct io_pins *p)
{
	if (p->table)
		return p->table < 0 ? p->table : 0;
	int rc = io_uring_register_files_sparse(ring, IO_PIN_SLOTS);
	if (rc < 0) {
		/* kernels before 5.19: a table of empty (-1) entries is sparse too */
		int fds[IO_PIN_SLOTS];
		for (unsigned i = 0; i < IO_PIN_SLOTS; i++)
			fds[i] = -1;
		rc = io_uring_register_files(ring, fds, IO_PIN_SLOTS);
	}
	p->table = rc < 0 ? rc : 1;
	return rc < 0 ? rc : 0;
}

/* Let entry @i go (nothing in flight into it); its handle's pin count follows (if still open). */
static void drop(struct io_uring *ring, struct io_pins *p, unsigned i)
{
	int none = -1;
	(void)io_uring_register_files_update(ring, i, &none, 1);
	shm_arena_unpin(p->e[i].serial);
	p->e[i] = (struct io_pin_ent){ 0 };
}

/* Handles were closed since the last look: let go of their idle entries; the others are marked
 * closed (never matched again: their mapping's addresses may be another handle's by now). */
static void drop_closed(struct io_uring *ring, struct io_pins *p, uint64_t gen)
{
	int pending = 0;
	for (unsigned i = 0; i < IO_PIN_SLOTS; i++) {
		struct io_pin_ent *e = &p->e[i];
		if (!e->serial || (!e->closed && shm_arena_serial_open(e->serial)))
			continue;
		e->closed = 1;
		if (e->inflight)
			pending = 1; /* again at the next call, once its reads are done */
		else
			drop(ring, p, i);
	}
	if (!pending)
		p->gen = gen;
}

int io_pin_get(struct io_uring *ring, struct io_pins *p, const void *dst)
{
	uintptr_t d = (uintptr_t)dst;
	uint64_t gen = shm_arena_open_gen();
	if (gen != p->gen && p->table > 0)
		drop_closed(ring, p, gen);
	int free_i = -1, idle_i = -1;
	for (unsigned i = 0; i < IO_PIN_SLOTS; i++) {
		struct io_pin_ent *e = &p->e[i];
		if (!e->serial) {
			free_i = free_i < 0 ? (int)i : free_i;
		} else if (d >= e->base && d < e->end && !e->closed) {
			e->inflight++;
			return (int)i;
		} else if (!e->inflight) {
			idle_i = idle_i < 0 ? (int)i : idle_i;
		}
	}
	struct shm_pin_owner o;
	int rc = shm_arena_pin_find(dst, &o);
	if (rc <= 0)
		return rc == 0 ? -1 : rc; /* private memory: nothing to hold */
	if ((rc = table_open(ring, p)) == 0 && free_i < 0) {
		if (idle_i < 0)
			rc = -ENFILE;
		else
			drop(ring, p, (unsigned)(free_i = idle_i));
	}
	if (!rc) {
		rc = io_uring_register_files_update(ring, (unsigned)free_i, &o.fd, 1);
		rc = rc == 1 ? 0 : rc < 0 ? rc : -EIO;
	}
	close(o.fd); /* the ring holds the description now (or nothing does: rc) */
	if (rc) {
		shm_arena_unpin(o.serial);
		return rc;
	}
	p->e[free_i] = (struct io_pin_ent){ .serial = o.serial, .base = o.base, .end = o.end, .inflight = 1 };
	return free_i;
}

void io_pin_put(struct io_pins *p, int idx)
{
	if (idx >= 0 && (unsigned)idx < IO_PIN_SLOTS && p->e[idx].inflight)
		p->e[idx].inflight--;
}

void io_pins_forget(struct io_pins *p)
{
	for (unsigned i = 0; i < IO_PIN_SLOTS; i++)
		if (p->e[i].serial)
			shm_arena_unpin(p->e[i].serial);
	*p = (struct io_pins){ 0 };
}
