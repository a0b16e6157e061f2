/*
 * tests/sc_check.h — shared by every Check suite (tests/check_<module>.c).
 *
 * Each suite file defines `Suite *<module>_suite(void)` and ends with SC_CHECK_MAIN(<module>_suite).
 * Suites run in Check's fork mode, so a crash fails only its own test.
 * Check 0.15 has no "skip" status: a test that cannot run here prints "SKIP: <why>" (sc_skip) and
 * returns; tests/run.sh lists the SKIP lines.
 */
#ifndef SC_TESTS_CHECK_H
#define SC_TESTS_CHECK_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "stagecache_test.h"

/* SC_CHECK_ONLY="name,name": add only the tests of these names (the mutation runner runs the tests
 * that cover a mutated line, tests/mutate/); unset: every test. */
void sc_tcase_add_test(TCase *tc, const TTest *ttest, int signal, int allowed_exit_value, int start, int end);
#define _tcase_add_test sc_tcase_add_test

#define SC_CHECK_MAIN(suite_fn)                                        \
	int main(void)                                                 \
	{                                                              \
		SRunner *sr = srunner_create(suite_fn());              \
		srunner_set_fork_status(sr, CK_FORK);                  \
		srunner_run_all(sr, CK_NORMAL);                        \
		int nf = srunner_ntests_failed(sr);                    \
		srunner_free(sr);                                      \
		return nf ? EXIT_FAILURE : EXIT_SUCCESS;               \
	}

/* Print "SKIP: <why>" (once per call) so the runner reports it. */
void sc_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A unique arena name for this test process: "t-<tag>-<pid>-<n>". */
const char *sc_test_name(const char *tag);

/* Create a fresh arena of @size bytes in /dev/shm (4 KiB pages, no hugepages needed), failing the
 * test on error. Destroy it with sc_test_arena_destroy. */
struct sc_arena *sc_test_arena(const char *tag, uint64_t size, const char **name_out);
struct sc_arena *sc_test_arena_opts(const char *tag, struct sc_arena_opts *opts, const char **name_out);
void sc_test_arena_destroy(struct sc_arena *a, const char *name);

/* A hand-made arena for sizes no test machine has memory for: @total bytes of reserved, untouched
 * address space (MAP_NORESERVE), its end 64-byte aligned against a guard page. Only the mapping is
 * set (base, hdr, size, a lock owner); the caller fills the header's regions. NULL after a SKIP
 * line when the address space cannot be reserved. Unmap with sc_test_fake_arena_close. */
struct shm_arena;
struct shm_arena *sc_test_fake_arena(struct shm_arena *fake, uint64_t total);
void sc_test_fake_arena_close(struct shm_arena *fake);

/* Reap child @pid, failing the test unless SIGKILL ended it (a holder killed on purpose). */
void sc_test_wait_killed(pid_t pid);
/* A child that opens arena @name, locks @m (a lock in memory it shares with us: the arena's, or
 * a MAP_SHARED page) and then does @then: 'k' SIGKILL itself, 'h' hold it until someone waits for
 * it and @hold_us have passed, unlock and exit 0 (4 when nobody came to wait while the test lived).
 * Returns its pid once it holds @m. */
struct shm_mutex;
pid_t sc_test_locker(const char *name, struct shm_mutex *m, char then, useconds_t hold_us);
/* The L2 index entry of @key in @a (NULL: none), for a test to forge; found inside a read-side
 * section, used after it (the caller holds no lease: nothing else may reclaim it meanwhile). */
struct shm_index_entry *sc_test_l2_entry(struct sc_arena *a, struct sc_key key);
/* The bytes @a's heap holds in live blocks (asserts the heap could be read). */
uint64_t sc_test_heap_used(struct sc_arena *a);
/* In a forked child: run @setup(@ctx) and, if it returns 0, say so and wait to be killed; the
 * test fails (naming @what, "could not @what") when the child cannot. Returns its pid. */
pid_t sc_test_parked(int (*setup)(void *ctx), void *ctx, const char *what);
/* Fork a process that opens arena @name and a stage, reserves @bytes of L2 and waits to be
 * killed; returns its pid once it holds the reservation. */
pid_t sc_test_filler(const char *name, uint64_t bytes);
/* Flip bits @mask of the byte at @at of file @path (asserts it was read and written). */
void sc_test_flip_byte(const char *path, off_t at, uint8_t mask);
/* Write a counter into the first 8 bytes of @buf, trying 0, 1, ... until the low bits of the
 * digest of its first @len bytes under @mask are all zero (a segment that lands in a table's slot
 * 0); fails the test after 10^6 tries. Returns that digest. */
struct sc_digest sc_test_digest_low_bits_zero(uint8_t *buf, size_t len, uint64_t mask);
/* In a forked child: limit the address space (RLIMIT_AS) to what it maps now plus @more bytes, so
 * that a mapping of more fails; 0, or -1 when the limit could not be read or set. */
int sc_test_limit_vm(uint64_t more);
/* How many descriptors this process has open. */
int sc_test_open_fds(void);
/* A thread answering fanotify permission events on one file or directory: the process that
 * reaches an event waits in the kernel until the thread has run @act(ctx, n) (n: the events
 * before it) and allowed it, which puts another thread's or process's step exactly there. */
struct sc_fan {
	int fd, stop[2];
	pthread_t t;
	void (*act)(void *, int);
	void *ctx;
	int acted; /* events answered */
};
/* Watch @mask (permission events) on @path: 0, or -errno (no fanotify permission events here). */
int sc_fan_start(struct sc_fan *f, const char *path, uint64_t mask, void (*act)(void *, int), void *ctx);
/* sc_fan_start, or this case's SKIP line where there are no fanotify permission events: 1 then. */
int sc_fan_start_or_skip(struct sc_fan *f, const char *path, uint64_t mask, void (*act)(void *, int), void *ctx);
/* Stop answering (events after this are not held) and join the thread. */
void sc_fan_stop(struct sc_fan *f);
/* Install the seccomp filter @f[0..@n) in this process (a forked child: a filter is never taken
 * off): 0, or -1 when seccomp is not to be had here. */
struct sock_filter;
int sc_test_seccomp(struct sock_filter *f, size_t n);
/* The offset of system call argument @k's low 32 bits in struct seccomp_data, for a filter (it
 * loads 32-bit words; <linux/seccomp.h> needed). */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define SC_TEST_SECCOMP_ARG_LO(k) (offsetof(struct seccomp_data, args[k]) + 4)
#else
#define SC_TEST_SECCOMP_ARG_LO(k) offsetof(struct seccomp_data, args[k])
#endif
/* In this process (a forked child), answer every call of system call @nr with seccomp action
 * @action (SECCOMP_RET_ERRNO | e: it returns -1 with errno e, or 0 for e 0, having done nothing;
 * SECCOMP_RET_TRAP: SIGSYS): 0, or -1 when seccomp is not to be had here. */
int sc_test_refuse_syscall(long nr, unsigned action);
/* In this process (a forked child), make every fcntl(F_SETFL) whose flags include the one flag
 * @flag (@flag 0: whose flags are 0) fail with EINVAL, as a filesystem that refuses the switch
 * answers: 0; 77 when seccomp is not to be had here (sc_test_child_status's SKIP); 78 when a call
 * the filter should refuse is not refused. */
int sc_test_refuse_setfl(int flag);
/* Reap child @pid, waiting at most 20 s (then it is killed and the test fails); the test fails
 * too if a signal ended it. Its exit status; or, for exit 77, "SKIP: @skip" said and -1. */
int sc_test_child_status(pid_t pid, const char *skip);
/* Run a shell command built from @fmt: its exit status, or -1 when it did not exit. */
int sc_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Remove @dir and everything below it (not crossing mounts); nothing when @dir is NULL or "". */
void sc_test_rm_tree(const char *dir);
/* The lowest descriptor number free in this process (a RLIMIT_NOFILE of it allows no new one). */
int sc_test_lowest_free_fd(void);
/* The build directory: the test binary is <build>/tests/check_<x>. */
const char *sc_test_build_dir(void);
/* Every point named by a call @call("...") in lib/ and shm/ is in the NULL-terminated list @pts,
 * and the list has nothing else (@what names the kind in the failure message). */
void sc_test_points_match_sources(const char *call, const char *const *pts, const char *what);

/* Temp files (.tmp-*) of L3 writers under @dir: how many; *@locked: how many a writer (or the
 * ring of a dead one, while its writes may still land) still holds; *@sig: their sizes and mtimes
 * mixed into one number (changes when any of them is written). */
int sc_test_l3_temps(const char *dir, int *locked, uint64_t *sig);
/* The temp files under @dir held now: a descriptor of each (at most @max, in @fds; the caller
 * closes them) and how many. Holding one does not hold its lock. */
int sc_test_l3_held_temps(const char *dir, int *fds, int max);
/* Is the file open as @fd locked by another open file description (a writer, or its ring)? */
int sc_test_fd_held(int fd);
/* Wait until no temp file under @dir is held (a killed writer's last writes landed): 0, or
 * -ETIMEDOUT after @timeout_ms. */
int sc_test_wait_l3_temps_unlocked(const char *dir, int timeout_ms);

/* Are we root (for tests of hugepages, BPF)? */
/* An sc_arena_fsck callback (ctx: struct sc_test_wanted) counting the findings whose message
 * contains @text. */
struct sc_test_wanted {
	const char *text;
	int hits;
};
void sc_test_on_wanted(const char *component, const char *message, int repaired, void *ctx);

int sc_test_is_root(void);

/* Seconds on CLOCK_MONOTONIC; a short pause inside a bounded wait for a condition (never a wait
 * on its own). */
double sc_test_now_s(void);
void sc_test_pause_ms(int ms);

#endif
