/* tests/check_mutex.c — the arena's writer locks (shm/mutex.c): owner tokens, takeover of a dead
 * holder's lock, bounded waits, and fsck's repair of a corrupted one. Regression tests for the
 * fuzzer's findings on the pthread-based locks they replace: a scribbled type word made glibc
 * abort, and a lock word naming a vanished owner made writers wait forever. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../shm/readers.h"
#include "../lib/l2/l2.h"
#include "../shm/heap.h"
#include "../shm/mutex.h"

static struct shm_mutex *shared_mutex(void)
{
	struct shm_mutex *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	shm_mutex_init(m);
	return m;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

START_TEST(test_lock_unlock_busy)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mtx", 16 << 20, &name);
	struct shm_mutex *m = shared_mutex();
	ck_assert_int_eq(shm_mutex_check(a->shm, m), 0);
	ck_assert_int_eq(shm_mutex_lock(a->shm, m), 0);
	ck_assert_uint_eq(shm_mutex_owner(m), a->shm->token);
	/* uncontended: the word is the token alone, so the unlock wakes nobody (no futex call) */
	ck_assert_uint_eq(atomic_load(&m->word), a->shm->token);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *b;
		_exit(sc_arena_open(name, &b) == 0 && shm_mutex_trylock(b->shm, m) == -EBUSY ? 0 : 1);
	}
	int st;
	waitpid(pid, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	shm_mutex_unlock(a->shm, m);
	ck_assert_uint_eq(shm_mutex_owner(m), 0);
	ck_assert_int_eq(shm_mutex_trylock(a->shm, m), 0);
	shm_mutex_unlock(a->shm, m);
	/* a handle without a reader slot has no owner token: it takes nothing (an owner of 0 would
	 * be a lock that looks free) */
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	shm_readers_release(b->shm, 0);
	ck_assert_uint_eq(b->shm->token, 0);
	ck_assert_int_eq(shm_mutex_trylock(b->shm, m), -EBADMSG);
	ck_assert_int_eq(shm_mutex_lock(b->shm, m), -EBADMSG);
	ck_assert_uint_eq(atomic_load(&m->word), 0);
	sc_arena_close(b);
	ck_assert_int_eq(shm_mutex_trylock(a->shm, m), 0);
	shm_mutex_unlock(a->shm, m);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_dead_holder_is_ownerdead)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mtx", 16 << 20, &name);
	struct shm_mutex *m = shared_mutex();
	pid_t pid = sc_test_locker(name, m, 'k', 0);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(shm_mutex_check(a->shm, m), 0); /* a dead holder is not corruption */
	ck_assert_int_eq(shm_mutex_trylock(a->shm, m), -EBUSY); /* trylock never takes over */
	double t0 = now_s();
	ck_assert_int_eq(shm_mutex_lock(a->shm, m), -EOWNERDEAD);
	ck_assert(now_s() - t0 < 1.0);
	ck_assert_uint_eq(shm_mutex_owner(m), a->shm->token);
	shm_mutex_unlock(a->shm, m);
	ck_assert_int_eq(shm_mutex_lock(a->shm, m), 0);
	shm_mutex_unlock(a->shm, m);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Shared by the waiters of test_one_waiter_takes_a_dead_lock_over (a MAP_SHARED page). */
struct takeover {
	struct shm_mutex *m;
	_Atomic int at_dead;  /* waiters that reached a wait on the dead holder's word */
	_Atomic int at_live;  /* waiters that reached a wait on the taker's word */
};

/* One waiter's own view (its stack, not shared). */
struct takeover_me {
	struct takeover *t;
	uint32_t dead;  /* the owner its first wait found (the dead holder) */
	int said_live;  /* counted in at_live */
};

/* A waiter's hook at mutex.lock.wait (it is about to sleep on the word): the first time, say so
 * and wait until all three are there (up to 30 s), so that all three find the holder dead; later,
 * once the word names someone else (the waiter that took the lock over), say that once. */
static void takeover_wait(const char *point, void *ctx)
{
	struct takeover_me *me = ctx;
	struct takeover *t = me->t;
	if (strcmp(point, "mutex.lock.wait"))
		return;
	uint32_t owner = shm_mutex_owner(t->m);
	if (!me->dead) {
		me->dead = owner;
		atomic_fetch_add(&t->at_dead, 1);
		double t0 = now_s();
		while (atomic_load(&t->at_dead) < 3) {
			if (now_s() - t0 > 30.0)
				_exit(4);
			sc_test_pause_ms(1);
		}
	} else if (owner && owner != me->dead && !me->said_live) {
		me->said_live = 1;
		atomic_fetch_add(&t->at_live, 1);
	}
}

START_TEST(test_one_waiter_takes_a_dead_lock_over)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mtx", 16 << 20, &name);
	struct shm_mutex *m = shared_mutex();
	struct takeover *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(shared, MAP_FAILED);
	shared->m = m;
	int res[2];
	ck_assert_int_eq(pipe(res), 0);
	pid_t holder = sc_test_locker(name, m, 'k', 0);
	char c;
	/* three waiters block on the dead holder's lock; exactly one must be told to repair. The one
	 * that is holds it until the two others wait on it as a live lock (up to 30 s). */
	pid_t w[3];
	for (int i = 0; i < 3; i++) {
		w[i] = fork();
		if (w[i] == 0) {
			struct sc_arena *b;
			if (sc_arena_open(name, &b))
				_exit(2);
			struct takeover_me me = { .t = shared };
			sc_sched_set(takeover_wait, &me);
			int rc = shm_mutex_lock(b->shm, m);
			sc_sched_set(NULL, NULL);
			char r = rc == -EOWNERDEAD ? 'D' : rc == 0 ? 'O' : 'E';
			double t0 = now_s();
			while (rc == -EOWNERDEAD && atomic_load(&shared->at_live) < 2) {
				if (now_s() - t0 > 30.0)
					_exit(5);
				sc_test_pause_ms(1);
			}
			shm_mutex_unlock(b->shm, m);
			_exit(write(res[1], &r, 1) == 1 ? 0 : 3);
		}
	}
	waitpid(holder, NULL, 0);
	int dead = 0, ok = 0;
	for (int i = 0; i < 3; i++) {
		int st;
		ck_assert_int_eq(waitpid(w[i], &st, 0), w[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "waiter %d: status %d (exit 4: the three never all waited on the dead lock, 5: the "
			      "others never waited on the taker's, within 30 s)", i, st);
	}
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(read(res[0], &c, 1), 1);
		dead += c == 'D';
		ok += c == 'O';
	}
	ck_assert_int_eq(dead, 1);
	ck_assert_int_eq(ok, 2);
	munmap(shared, 4096);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(regression_scribbled_type_word_aborted)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mtx", 16 << 20, &name);
	struct shm_mutex *m = shared_mutex();
	m->magic = 0xc3;
	ck_assert_int_eq(shm_mutex_check(a->shm, m), -EBADMSG);
	ck_assert_int_eq(shm_mutex_lock(a->shm, m), -EBADMSG);
	ck_assert_int_eq(shm_mutex_trylock(a->shm, m), -EBADMSG);
	shm_mutex_init(m);
	ck_assert_int_eq(shm_mutex_lock(a->shm, m), 0);
	shm_mutex_unlock(a->shm, m);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(regression_vanished_owner_hung)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mtx", 16 << 20, &name);
	struct shm_mutex *m = shared_mutex();
	/* a lock word naming a holder that never existed (slot beyond the table), and one naming a
	 * free slot: both are dead owners, taken over in bounded time */
	atomic_store(&m->word, shm_token(0xfff0, 3) | SHM_MUTEX_WAITERS);
	ck_assert_int_eq(shm_mutex_check(a->shm, m), -EBADMSG); /* fsck reports the garbage */
	double t0 = now_s();
	ck_assert_int_eq(shm_mutex_lock(a->shm, m), -EOWNERDEAD);
	ck_assert(now_s() - t0 < 1.0);
	shm_mutex_unlock(a->shm, m);
	atomic_store(&m->word, shm_token(5, 9));
	ck_assert_int_eq(shm_mutex_lock(a->shm, m), -EOWNERDEAD);
	shm_mutex_unlock(a->shm, m);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Owner words at the edges of a token: the last incarnation and the last reader slot are well
 * formed (fsck must not report them), one slot past the table and incarnation 0 are garbage. */
START_TEST(test_owner_words_at_the_token_bounds)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mtx", 16 << 20, &name);
	struct shm_mutex *m = shared_mutex();
	uint32_t slots = shm_readers_count(a->shm);
	atomic_store(&m->word, shm_token(0, SHM_INC_MAX));
	ck_assert_int_eq(shm_mutex_check(a->shm, m), 0);
	atomic_store(&m->word, shm_token(0, SHM_INC_MAX) | SHM_MUTEX_WAITERS);
	ck_assert_int_eq(shm_mutex_check(a->shm, m), 0);
	atomic_store(&m->word, shm_token(slots - 1, 1));
	ck_assert_int_eq(shm_mutex_check(a->shm, m), 0);
	atomic_store(&m->word, shm_token(slots, 1));
	ck_assert_int_eq(shm_mutex_check(a->shm, m), -EBADMSG);
	atomic_store(&m->word, shm_token(0, 0) | 1u);
	ck_assert_int_eq(shm_mutex_check(a->shm, m), -EBADMSG);
	atomic_store(&m->word, 0);
	ck_assert_int_eq(shm_mutex_check(a->shm, m), 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A word naming our own token while we do not hold the lock is a scribble: the lock refuses it at
 * once (waiting would be forever — the named holder, us, is alive), with or without waiters. */
START_TEST(test_a_word_naming_us_is_refused_at_once)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mtx", 16 << 20, &name);
	struct shm_mutex *m = shared_mutex();
	const uint32_t words[] = { a->shm->token, a->shm->token | SHM_MUTEX_WAITERS };
	for (int i = 0; i < 2; i++) {
		atomic_store(&m->word, words[i]);
		double t0 = now_s();
		ck_assert_int_eq(shm_mutex_lock(a->shm, m), -EBADMSG);
		ck_assert(now_s() - t0 < 1.0);
		ck_assert_uint_eq(atomic_load(&m->word), words[i]); /* left for fsck to report */
		ck_assert_int_eq(shm_mutex_trylock(a->shm, m), -EBUSY);
	}
	atomic_store(&m->word, 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A handle inherited through fork belongs to the parent: its token is not the child's, so the
 * child takes no lock with it (-ECHILD from both calls, the word untouched), free or held. */
START_TEST(test_a_forked_handle_takes_no_lock)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mtx", 16 << 20, &name);
	struct shm_mutex *m = shared_mutex();
	for (int held = 0; held < 2; held++) {
		if (held)
			ck_assert_int_eq(shm_mutex_lock(a->shm, m), 0);
		uint32_t before = atomic_load(&m->word);
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			_exit(shm_mutex_trylock(a->shm, m) == -ECHILD && shm_mutex_lock(a->shm, m) == -ECHILD &&
					      atomic_load(&m->word) == before ? 0 : 1);
		int st;
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		ck_assert_uint_eq(atomic_load(&m->word), before);
		if (held)
			shm_mutex_unlock(a->shm, m);
	}
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_slow_live_holder_is_waited_for)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mtx", 16 << 20, &name);
	struct shm_mutex *m = shared_mutex();
	pid_t pid = sc_test_locker(name, m, 'h', 700000); /* much longer than the wait slices */
	double t0 = now_s();
	ck_assert_int_eq(shm_mutex_lock(a->shm, m), 0); /* not taken over: the holder lives */
	ck_assert(now_s() - t0 > 0.5);
	shm_mutex_unlock(a->shm, m);
	int st;
	waitpid(pid, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_fsck_repairs_corrupted_arena_mutexes)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("mutex", 32 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	uint8_t buf[5000];
	memset(buf, 3, sizeof(buf));
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf, NULL }, .sec_len = { sizeof(buf), 0 } };
	int32_t tok[3] = { 1, 2, 3 };
	ck_assert_int_eq(sc_l2_admit(st, "", tok, 3, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
	struct shm_index *ix = l2_ix(a);
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(st, "", tok, 3, &k), 0);
	uint32_t shard = shm_index_shard_of_bucket(shm_index_bucket(ix, k.lo));
	ix->hdr->shards[shard].mu.magic = 0xc3;
	/* the shard's lock alone: a replacement refuses before it publishes, and its block goes back */
	struct shm_heap_stats h0, h1;
	ck_assert_int_eq(shm_heap_stats(a->shm, &h0), 0);
	ck_assert_int_eq(sc_l2_admit(st, "", tok, 3, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), -EBADMSG);
	ck_assert_int_eq(shm_heap_stats(a->shm, &h1), 0);
	ck_assert_uint_eq(h1.used_bytes, h0.used_bytes);
	shm_heap_mutex(a->shm)->magic = 0xc3;
	/* writers refuse, readers still serve */
	ck_assert_int_eq(sc_l2_admit(st, "", tok, 3, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), -EBADMSG);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "", tok, 3, NULL, &l), 0);
	sc_lease_release(&l);
	struct sc_fsck_report r;
	ck_assert_int_gt(sc_arena_fsck(a, 0, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_uint_ge(r.repaired, 2);
	ck_assert_int_eq(sc_l2_admit(st, "", tok, 3, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

Suite *mutex_suite(void)
{
	Suite *s = suite_create("mutex");
	TCase *tc = tcase_create("mutex");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_lock_unlock_busy);
	tcase_add_test(tc, test_dead_holder_is_ownerdead);
	tcase_add_test(tc, test_one_waiter_takes_a_dead_lock_over);
	tcase_add_test(tc, regression_scribbled_type_word_aborted);
	tcase_add_test(tc, regression_vanished_owner_hung);
	tcase_add_test(tc, test_owner_words_at_the_token_bounds);
	tcase_add_test(tc, test_a_forked_handle_takes_no_lock);
	tcase_add_test(tc, test_a_word_naming_us_is_refused_at_once);
	tcase_add_test(tc, test_slow_live_holder_is_waited_for);
	tcase_add_test(tc, test_fsck_repairs_corrupted_arena_mutexes);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(mutex_suite)
