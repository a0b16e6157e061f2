/* lib/l3/fill.h — fills and the put path's synchronous I/O on the per-thread rings, and kept files (lib/l3/fill.c). */
#ifndef SC_LIB_L3_FILL_H
#define SC_LIB_L3_FILL_H

#include "types.h"

/* l3_fill_req for a fill into @src's memory (sc_restore): the segments of a segmented object that
 * @src's L2 holds are copied from there, not read (lib/l3/segstore.c). */
int l3_fill_from(struct sc_l3 *l3, struct sc_l3_fill_req *req, struct sc_arena *src);
/* l3_fill_from with a deadline (CLOCK_MONOTONIC ns; 0: none): the result when the fill completed
 * in time, -ETIME when the deadline passed before it could be submitted (nothing in flight), or
 * -EINPROGRESS when it passed with the fill in flight: the caller must hand it to l3_fill_abandon
 * (its memory is still being read into). */
int l3_fill_from_until(struct sc_l3 *l3, struct sc_l3_fill_req *req, struct sc_arena *src, uint64_t deadline);
/* Give up on @req (in flight on this thread's ring): @done(ctx, result) is called once its last
 * read completed (at once when it already had), from whatever next processes the ring. */
void l3_fill_abandon(struct sc_l3 *l3, struct sc_l3_fill_req *req, void (*done)(void *ctx, int result), void *ctx);
/* Process this thread's ring's completions without waiting (abandoned fills that finished). */
void l3_fill_poll(struct sc_l3 *l3);
/* One fill, waiting for it (other completions of this thread stay queued for reap). */
int l3_fill_req(struct sc_l3 *l3, struct sc_l3_fill_req *req);
/* Write @iov (at most 4 parts) at @off with pwritev (loops on short writes; a file over 1 MiB a
 * piece at a time, each piece's writeback started): 0 or a negative errno. */
int l3_write_at(int fd, const struct iovec *iov, int niov, uint64_t off);
int l3_ring_fsync(struct l3_ring *r, int fd);
/* A round of at least this many files is one syncfs on a local filesystem (lib/l3/fill.c). */
#define L3_SYNCFS_MIN 8
/* fsync @fds[0..n) on @r, all submitted before the first wait (a round of L3_SYNCFS_MIN or more
 * files on the store's local filesystem: one syncfs): 0 or the first error. */
int l3_ring_fsync_all(struct l3_ring *r, const int *fds, unsigned n);
/* A round of @n requests on @r, all submitted before one wait: @prep(sqe, i, @ctx) prepares
 * request i; its result in @res[i] (-ECANCELED: never submitted; -EIO: submitted, but the ring
 * failed before its end was heard). io-wq may run a worker per
 * request meanwhile. 0, or -EAGAIN/-EIO when the ring could not take or finish the round. */
struct io_uring_sqe;
int l3_ring_round(struct l3_ring *r, unsigned n, void (*prep)(struct io_uring_sqe *, unsigned, void *), void *ctx,
		  int *res);
#ifdef SC_TEST_HOOKS
/* Rounds of l3_ring_fsync_all in this process, the fsyncs in them, and the rounds that were one
 * syncfs (test build). */
extern _Atomic unsigned long l3_test_fsync_rounds, l3_test_fsyncs, l3_test_syncfs_rounds;
/* The writebacks l3_write_at started (one per piece of a file over one piece) in this process. */
extern _Atomic unsigned long l3_test_wb_starts;
/* Chunks (bit c: chunk c; bit 0 also the combined header + chunk 0 read) whose next O_DIRECT read
 * completes as if the kernel had refused it (-EINVAL), each once; tests set it. */
extern _Atomic uint64_t l3_test_refuse_direct;
/* The next statx of a fill opened on the ring completes with this result (once; 0: as it did). */
extern _Atomic int l3_test_statx_res;
/* The next switch of an O_DIRECT fill to buffered reads fails with this errno (once; 0: none). */
extern _Atomic int l3_test_setfl_fails;
/* The next l3_test_wait_again waits on a ring (0: none) end at once with -l3_test_wait_errno:
 * EAGAIN (the default), as io_uring_enter refuses when the kernel is short of resources, EINTR, as
 * a signal interrupts it, or another errno (a positive one: 0 would be a wait that succeeded). */
extern _Atomic int l3_test_wait_again, l3_test_wait_errno;
#endif

/* Wait for every fill in flight on this thread's rings of @l3 (before the rings are freed). */
void l3_fills_drain(struct sc_l3 *l3);

#endif
