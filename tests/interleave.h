/*
 * tests/interleave.h — a bounded explorer of process interleavings at the library's schedule
 * points (test build only: shm_sched_point, lib/stagecache_test.h).
 *
 * A scenario has 2 or 3 actors, each run in a forked process that attaches on its own; each
 * starts parked (at "il.start"), so a run is under control from its first instruction. At every
 * schedule point it reaches (of the scenario's chosen set) an actor parks until the controller
 * lets it go on; the controller lets exactly one actor run at a time from one point to its next
 * (or to its end). An actor waiting for an arena lock says so (the lock's own "mutex.lock.wait"
 * and "mutex.lock.acquired" points) and is not waited for meanwhile; one that does not reach a
 * point within IL_BLOCKED_MS (polling for another actor's progress) is taken to be blocked and
 * the others go on. The
 * explorer replays the scenario from scratch under every sequence of choices (depth-first over
 * the choices each run saw), up to a bound, and checks the scenario's invariant after each run.
 * Freed heap memory is poisoned in the test build, so a reader that touches memory after it was
 * reused reads garbage and fails its digest check.
 */
#ifndef SC_TESTS_INTERLEAVE_H
#define SC_TESTS_INTERLEAVE_H

#include <stdint.h>

#define IL_MAX_ACTORS 3
#define IL_MAX_STEPS 64
#define IL_BLOCKED_MS 300

struct il_scenario {
	const char *name;
	unsigned actors;                     /* 2 or 3 */
	const char *const *points;           /* schedule points that park an actor (NULL-terminated) */
	void *ctx;                           /* the scenario's own state (visible to every callback) */
	/* parent, before each run: fresh state (e.g. create an arena named in ctx); 0 or fail */
	int (*setup)(void *ctx);
	/* in actor @who's own process: 0 when it did its part; may die on purpose (raise SIGKILL) */
	int (*actor)(void *ctx, unsigned who);
	/* which actors are expected to die (bit i): their death is not a failure */
	unsigned may_die;
	/* parent, after every actor ended: 0 when the invariant holds, else a message in @why */
	int (*check)(void *ctx, char *why, unsigned len);
	void (*teardown)(void *ctx);
};

struct il_result {
	unsigned runs;                       /* orderings explored */
	unsigned exhausted;                  /* 1: every ordering was run (the bound was not hit) */
	unsigned failures;                   /* runs whose actor failed or whose invariant broke */
	unsigned max_steps;                  /* longest schedule seen */
	unsigned blocked;                    /* times an actor was found blocked */
	char first_failure[512];             /* the schedule and reason of the first failure */
};

/* In an actor's polling loop (waiting for another actor's progress): let the others go first. */
void il_yield(void);

/* Explore @s under at most @max_runs orderings. Returns 0 when no run failed. */
int il_explore(const struct il_scenario *s, unsigned max_runs, struct il_result *r);

#endif
