/*
 * tests/interleave.c — the interleaving explorer (see interleave.h).
 *
 * Control block (MAP_SHARED, created per exploration): one line per actor with its state
 * (RUNNING, PARKED at `at`, DONE), and `go`, a counter the controller bumps to release it. An
 * actor's hook stores `at`, release-stores PARKED, then sleeps on `go` (futex) until it moves;
 * the controller acquire-loads the state, so it sees `at`. Only the controller writes `go`;
 * only the actor writes its state (the controller writes DONE for an actor that died).
 */
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "interleave.h"
#include "sc_check.h"

enum { IL_RUNNING = 0, IL_PARKED = 1, IL_DONE = 2, IL_WAITING = 3, IL_YIELDED = 4 };

struct il_actor_state {
	_Atomic uint32_t state;
	_Atomic uint32_t go;
	_Atomic uint64_t ran_ms;   /* when it last started running (released, or got its lock) */
	char at[48];
};

struct il_ctl {
	struct il_actor_state a[IL_MAX_ACTORS];
};

static struct il_ctl *ctl_;
static unsigned me_;
static const char *const *points_;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int wanted(const char *point)
{
	if (!strcmp(point, "il.start") || !strcmp(point, "il.yield"))
		return 1;
	for (unsigned i = 0; points_ && points_[i]; i++)
		if (!strcmp(points_[i], point))
			return 1;
	return 0;
}

/* The schedule hook, in an actor: park at a wanted point until released. */
static void park(const char *point, void *ctx)
{
	(void)ctx;
	struct il_actor_state *s = &ctl_->a[me_];
	/* waiting for a lock another actor holds: nothing to schedule until it has it */
	if (!strcmp(point, "mutex.lock.wait")) {
		atomic_store_explicit(&s->state, IL_WAITING, memory_order_release);
		return;
	}
	if (!strcmp(point, "mutex.lock.acquired")) {
		atomic_store_explicit(&s->state, IL_RUNNING, memory_order_release);
		atomic_store_explicit(&s->ran_ms, now_ms(), memory_order_release);
		return;
	}
	if (!wanted(point))
		return;
	uint32_t g = atomic_load_explicit(&s->go, memory_order_acquire);
	size_t n = strnlen(point, sizeof(s->at) - 1); /* (snprintf "%s" here: a false -Wformat-truncation under ASAN=1) */
	memcpy(s->at, point, n);
	s->at[n] = 0;
	atomic_store_explicit(&s->state, strcmp(point, "il.yield") ? IL_PARKED : IL_YIELDED, memory_order_release);
	while (atomic_load_explicit(&s->go, memory_order_acquire) == g) {
		struct timespec ts = { 0, 10000000 };
		syscall(SYS_futex, (uint32_t *)&s->go, FUTEX_WAIT, g, &ts, NULL, 0);
	}
	atomic_store_explicit(&s->state, IL_RUNNING, memory_order_release);
}

void il_yield(void)
{
	if (ctl_)
		park("il.yield", NULL);
	else
		usleep(1000);
}

static void release(struct il_ctl *c, unsigned who)
{
	atomic_store_explicit(&c->a[who].ran_ms, now_ms(), memory_order_release);
	atomic_store_explicit(&c->a[who].state, IL_RUNNING, memory_order_release);
	atomic_fetch_add_explicit(&c->a[who].go, 1, memory_order_release);
	syscall(SYS_futex, (uint32_t *)&c->a[who].go, FUTEX_WAKE, 1, NULL, NULL, 0);
}

struct il_run {
	unsigned n;
	uint8_t chosen[IL_MAX_STEPS];
	uint8_t enabled[IL_MAX_STEPS];      /* bit mask of actors parked at that step */
	char at[IL_MAX_STEPS][24];
};

/* Run the scenario once, following @prefix (length @plen) then always the lowest parked actor. */
static int run_once(const struct il_scenario *s, struct il_ctl *c, const uint8_t *prefix, unsigned plen,
		    struct il_run *run, char *why, unsigned len, unsigned *blocked)
{
	memset(c, 0, sizeof(*c));
	memset(run, 0, sizeof(*run));
	if (s->setup(s->ctx)) {
		snprintf(why, len, "setup failed");
		return -1;
	}
	pid_t pid[IL_MAX_ACTORS];
	int status[IL_MAX_ACTORS], ended[IL_MAX_ACTORS] = { 0 };
	for (unsigned i = 0; i < s->actors; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			ctl_ = c;
			me_ = i;
			points_ = s->points;
			sc_sched_set(park, NULL);
			park("il.start", NULL); /* every run starts under control */
			int rc = s->actor(s->ctx, i);
			sc_sched_set(NULL, NULL);
			atomic_store_explicit(&c->a[i].state, IL_DONE, memory_order_release);
			_exit(rc ? 1 : 0);
		}
	}
	for (unsigned i = 0; i < s->actors; i++)
		atomic_store(&c->a[i].ran_ms, now_ms());
	unsigned started = 0; /* actors that reached a point (or ended) at least once */
	unsigned last_yielder = 0;
	int rc = 0;
	uint64_t deadline = now_ms() + 20000;
	for (;;) {
		/* settle: every actor parked, done, or blocked (running too long since released) */
		unsigned parked = 0, running = 0, live = 0, yielded = 0;
		for (unsigned i = 0; i < s->actors; i++) {
			if (!ended[i] && waitpid(pid[i], &status[i], WNOHANG) == pid[i]) {
				ended[i] = 1;
				atomic_store_explicit(&c->a[i].state, IL_DONE, memory_order_release);
			}
			uint32_t st = atomic_load_explicit(&c->a[i].state, memory_order_acquire);
			if (st != IL_RUNNING || ended[i])
				started |= 1u << i;
			/* before its first point an actor is attaching: slow, but not blocked on anyone */
			uint64_t patience = (started & (1u << i)) ? IL_BLOCKED_MS : 5000;
			if (st == IL_PARKED)
				parked |= 1u << i;
			else if (st == IL_YIELDED)
				yielded |= 1u << i;
			else if (st == IL_RUNNING && !ended[i] &&
				 now_ms() - atomic_load_explicit(&c->a[i].ran_ms, memory_order_acquire) < patience)
				running |= 1u << i;
			if (!ended[i])
				live |= 1u << i;
		}
		if (!live)
			break;
		if (now_ms() > deadline) {
			snprintf(why, len, "no progress for 20 s (a deadlock?)");
			rc = -1;
			break;
		}
		if (running) {
			usleep(200);
			continue;
		}
		/* actors polling for another's progress run only when nobody else can, in turn (not a
		 * choice the explorer branches on: which poller polls first changes nothing) */
		if (!parked && yielded) {
			for (unsigned k = 1; k <= s->actors; k++) {
				unsigned i = (last_yielder + k) % s->actors;
				if (yielded & (1u << i)) {
					last_yielder = i;
					break;
				}
			}
			release(c, last_yielder);
			continue;
		}
		if (!parked) {
			usleep(200);
			continue;
		}
		for (unsigned i = 0; i < s->actors; i++)
			if ((live & ~parked) & (1u << i))
				(*blocked)++;
		unsigned step = run->n, pick = IL_MAX_ACTORS;
		if (step < plen && (parked & (1u << prefix[step])))
			pick = prefix[step];
		for (unsigned i = 0; i < s->actors && pick == IL_MAX_ACTORS; i++)
			if (parked & (1u << i))
				pick = i;
		if (step < IL_MAX_STEPS) {
			run->chosen[step] = (uint8_t)pick;
			run->enabled[step] = (uint8_t)parked;
			snprintf(run->at[step], sizeof(run->at[step]), "%s", c->a[pick].at);
			run->n++;
		}
		if (getenv("IL_VERBOSE")) {
			fprintf(stderr, "  step %u: parked %#x, run %u from %s  (states", step, parked, pick, c->a[pick].at);
			for (unsigned i = 0; i < s->actors; i++)
				fprintf(stderr, " %u:%u%s", i, atomic_load(&c->a[i].state), ended[i] ? "e" : "");
			fprintf(stderr, ")\n");
		}
		release(c, pick);
	}
	for (unsigned i = 0; i < s->actors; i++) {
		if (!ended[i]) {
			kill(pid[i], SIGKILL);
			waitpid(pid[i], &status[i], 0);
			ended[i] = 1;
		}
		int died = WIFSIGNALED(status[i]), failed = WIFEXITED(status[i]) && WEXITSTATUS(status[i]);
		if (!rc && (failed || (died && !(s->may_die & (1u << i))))) {
			snprintf(why, len, "actor %u %s (status %#x)", i, failed ? "failed" : "died", status[i]);
			rc = -1;
		}
	}
	if (!rc && s->check(s->ctx, why, len))
		rc = -1;
	s->teardown(s->ctx);
	return rc;
}

/* The next prefix in depth-first order after @run: 0 and @prefix/@plen set, or -1 when done. */
static int next_prefix(const struct il_run *run, uint8_t *prefix, unsigned *plen)
{
	for (unsigned i = run->n; i-- > 0;) {
		unsigned alt = run->enabled[i] & ~((2u << run->chosen[i]) - 1);
		if (!alt)
			continue;
		memcpy(prefix, run->chosen, i);
		prefix[i] = (uint8_t)__builtin_ctz(alt);
		*plen = i + 1;
		return 0;
	}
	return -1;
}

int il_explore(const struct il_scenario *s, unsigned max_runs, struct il_result *r)
{
	memset(r, 0, sizeof(*r));
	struct il_ctl *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return -1;
	uint8_t prefix[IL_MAX_STEPS] = { 0 };
	unsigned plen = 0;
	struct il_run run;
	for (;;) {
		char why[256] = "";
		int rc = run_once(s, c, prefix, plen, &run, why, sizeof(why), &r->blocked);
		r->runs++;
		if (run.n > r->max_steps)
			r->max_steps = run.n;
		if (rc) {
			if (!r->failures) {
				int off = snprintf(r->first_failure, sizeof(r->first_failure), "%s: %s; schedule:", s->name, why);
				for (unsigned i = 0; i < run.n && off < (int)sizeof(r->first_failure) - 40; i++)
					off += snprintf(r->first_failure + off, sizeof(r->first_failure) - (size_t)off, " %u@%s",
							run.chosen[i], run.at[i]);
			}
			r->failures++;
		}
		if (next_prefix(&run, prefix, &plen)) {
			r->exhausted = 1;
			break;
		}
		if (r->runs >= max_runs)
			break;
	}
	munmap(c, sizeof(*c));
	printf("interleave %-32s orderings %4u%s  longest %2u steps  blocked %u  failures %u\n", s->name, r->runs,
	       r->exhausted ? " (all)" : " (bounded)", r->max_steps, r->blocked, r->failures);
	fflush(stdout);
	return r->failures ? -1 : 0;
}
