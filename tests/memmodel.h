/*
 * tests/memmodel.h — a weak-memory model checker for the shared-memory protocols' real code.
 *
 * The interleaving explorer (tests/interleave.c) runs real processes on this machine, so every
 * ordering it shows is one x86 (or whatever runs the tests) allows: a fence that compiles to
 * nothing on x86 can be weakened without any test noticing. Here the protocol's own functions
 * (shm/readers.c, shm/index.c, lib/l2_lease.c, compiled into the test with every C11 atomic
 * redirected by tests/mm_atomics.h) run as coroutines ("threads") of one process under a model of
 * C11's weak memory, and every execution the model allows is explored, depth first:
 *
 *  - every atomic location keeps its stores in modification order ("messages"), each with the
 *    view it carries (release semantics);
 *  - each thread has a view (per location, the oldest message it may still read), an acquire view
 *    (what an acquire fence would join) and a release view (what a release fence published);
 *  - a load may read any message at or after the thread's view of its location (store buffering,
 *    delayed stores: a stale value), and joins the message's view when it is an acquire;
 *  - a read-modify-write reads the last message and appends after it (atomicity, release sequences);
 *  - a seq_cst fence joins the thread's view with one global SC view and publishes it there (so two
 *    seq_cst fences order a store before one with a load after the other: no store buffering);
 *    acquire / release fences do what C11 says and nothing more;
 *  - seq_cst loads and stores are modelled as acquire / release accesses between seq_cst fences
 *    (stronger than C11: it can hide a bug, never invent one).
 * What it does not model: load buffering (a load that reads a store not yet executed), plain
 * (non-atomic) accesses (they see the latest value), and out-of-thin-air values. It is the
 * promising semantics without promises, restricted to the locations in the registered regions;
 * every other address goes straight to the real atomics.
 *
 * Threads switch only before an access to a location that two threads touch and one writes
 * ("shared", learnt from earlier executions: the exploration restarts whenever the set grows),
 * before a seq_cst fence, at mm_yield() and in a futex wait (mm_futex_wait). Everything here is
 * single-OS-thread and test-only.
 */
#ifndef SC_TESTS_MEMMODEL_H
#define SC_TESTS_MEMMODEL_H

#include <stddef.h>
#include <stdint.h>

#define MM_MAX_THREADS 3

struct mm_scenario {
	const char *name;
	unsigned threads;
	void *ctx;
	/* main context, before every execution: put the real memory back as it was */
	void (*reset)(void *ctx);
	/* in model thread @who (a coroutine): the protocol's code */
	void (*thread)(void *ctx, unsigned who);
	/* main context, after every execution: 0 when the invariant held, else a message in @why */
	int (*check)(void *ctx, char *why, size_t len);
	/* when every thread not done sleeps in mm_futex_wait: 0, the execution fails as a deadlock;
	 * 1, one of them (each in turn) wakes with a time-out (a lock holder that died wakes nobody) */
	int timeouts;
};

struct mm_result {
	unsigned long executions;
	unsigned long failures;
	unsigned restarts;        /* explorations restarted because the shared set grew */
	unsigned shared;          /* shared locations */
	int exhausted;            /* every execution the model allows was run */
	char first_failure[1024]; /* the reason and the trace of the first failing execution */
};

/* Model the atomics inside [p, p + len) (several regions may be registered); reset by mm_explore's
 * caller with mm_regions_clear. */
void mm_region(void *p, size_t len);
/* The same memory mapped again at @p (another handle's mapping): one location per byte of @canon. */
void mm_region_alias(void *p, size_t len, void *canon);
void mm_regions_clear(void);

/* In a model thread: a scheduling point of the test's own (e.g. "the reader uses the entry now"). */
void mm_yield(void);
/* In a model thread: which thread this is (-1 in the main context). */
int mm_self(void);

/* Explore @s under at most @max_executions executions; 0 when none failed. Prints one line. */
int mm_explore(const struct mm_scenario *s, unsigned long max_executions, struct mm_result *r);

/* The redirected operations (tests/mm_atomics.h). @order is a C11 memory_order. */
uint64_t mm_load(const volatile void *p, unsigned size, int order);
void mm_store(volatile void *p, unsigned size, uint64_t v, int order);
enum { MM_XCHG, MM_ADD, MM_SUB, MM_OR, MM_AND, MM_XOR };
uint64_t mm_rmw(volatile void *p, unsigned size, int op, uint64_t v, int order);
int mm_cas(volatile void *p, unsigned size, void *expected, uint64_t desired, int succ, int fail);
void mm_fence(int order);
/* FUTEX_WAIT on a modelled word (in a model thread; anything else aborts the test): -1 when the
 * word does not hold @val, else the thread sleeps until another thread stores a different value,
 * then 0. The wait reads the word as a relaxed load of its latest value (a futex promises no
 * acquire). Wakes are not modelled (FUTEX_WAKE is the caller's no-op): any change wakes every
 * sleeper, so a lost wake-up goes unseen. When every thread left sleeps, the scenario's `timeouts`
 * says whether one wakes with a time-out (then 1) or the execution fails as a deadlock. */
int mm_futex_wait(const volatile void *p, unsigned size, uint64_t val);

#endif
