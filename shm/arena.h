/*
 * shm/arena.h — creating, attaching, closing and destroying arenas (shm/arena.c), and the I/O pins
 * of open handles. The layout and the handle are in shm/region.h.
 */
#ifndef SC_SHM_ARENA_H
#define SC_SHM_ARENA_H

#include <sys/stat.h>

#include "region.h"
#include "util.h"

int shm_name_valid(const char *name);
/* @gid: group owner to give the file, or -1 to leave the creator's */
int shm_arena_create(const char *dir, const char *name, const struct shm_params *p,
		     uint32_t mode, int64_t gid, struct shm_arena **out);
/* Attach. Besides the header checks: the file must be a regular file (not a symlink, FIFO,
 * directory; opened O_NONBLOCK|O_NOFOLLOW so nothing planted can block or redirect the open:
 * -EBADMSG), not world-writable and owned by root, the caller or whom @trust names (-EPERM). */
int shm_arena_open(const char *dir, const char *name, const struct shm_trust *trust, unsigned flags,
		   struct shm_arena **out);
/* @flags of shm_arena_open. SHM_OPEN_NO_SLOT: attach to look, not to use: the file opened
 * read-only, mapped PROT_READ, no reader slot taken (so it works when every slot is taken, and
 * for a user who may only read the file). Only reads of the header and the reader table, and
 * shm_arena_measure, are allowed on such a handle. */
#define SHM_OPEN_NO_SLOT 0x1u
/* Is the file still as long as the mapping? 0; -EBADMSG when somebody who can write it cut it
 * shorter (a touch of a page past its new end would raise SIGBUS; once seen, always); -errno.
 * One fstat: for the paths that open stages, describe the arena, check it or close it, never the
 * read path (a truncation after the check still faults). shm_arena_intact_lately: the same, but
 * the fstat only when the last one that found the file whole is SHM_INTACT_RECHECK_NS old (a
 * syscall costs as much as a 4 KiB admission on a loaded VM, measured: 2-6 us): for admissions
 * and reservations, which then miss a truncation younger than that. */
#define SHM_INTACT_RECHECK_NS 10000000ull /* 10 ms */
int shm_arena_intact(struct shm_arena *a);
int shm_arena_intact_lately(struct shm_arena *a);
/* lstat() of the file an open of (@dir, @name) would try, and its path. 0, -ENOENT, -EINVAL. */
int shm_arena_stat(const char *dir, const char *name, char *path, size_t len, struct stat *st);
void shm_arena_close(struct shm_arena *a);

/*
 * I/O pins: asynchronous I/O outlives its process (an io_uring read lands after the process was
 * reaped), so a ring that reads into an arena holds the liveness lock of the handle whose mapping
 * it writes: it registers lock_fd's file description in its file table, and the kernel drops the
 * lock only after the ring's teardown completed every request (lib/io_pin.c).
 *
 * shm_arena_pin_find: the open handle of this process whose mapping holds @p. 1 and *@o filled,
 * with o->fd a new descriptor of the handle's lock description (the caller registers it, then
 * closes it) and the handle's pin count raised; 0 when @p is in no arena of this process (or its
 * handle holds no slot); -errno. shm_arena_unpin: the pin of handle @serial goes (a no-op when
 * the handle was closed). shm_arena_open_gen: moves at every close, so that a holder of pins
 * knows when to look for handles that are gone (shm_arena_serial_open).
 */
struct shm_pin_owner {
	uint64_t serial;
	uintptr_t base, end;
	int fd;
};
int shm_arena_pin_find(const void *p, struct shm_pin_owner *o);
void shm_arena_unpin(uint64_t serial);
uint64_t shm_arena_open_gen(void);
int shm_arena_serial_open(uint64_t serial);
int shm_arena_destroy(const char *dir, const char *name);
int shm_arena_file_version(const char *dir, const char *name, uint32_t *version);
int shm_arena_list(const char *dir, void (*cb)(const char *dir, const char *name, void *ctx), void *ctx);
/* Validate a header image of @file_bytes bytes; 0, -EBADMSG, -EPROTO. Pure; used by attach and fsck. */
int shm_header_check(const struct shm_header *h, uint64_t file_bytes);
/* The checksum attach expects in header_check (XXH64 of the identity part, initialised read as 0). */
uint64_t shm_header_checksum(const struct shm_header *h);
/* Measure the backing of the mapping at @addr from /proc/self/smaps. */
int shm_measure_backing(const void *addr, uint64_t *page_size);
/* Measure an attached arena's backing (enum sc_backing values), touching the start of its heap. */
int shm_arena_measure(struct shm_arena *a, uint64_t *page_size);

#endif
