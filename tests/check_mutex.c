/* tests/check_mutex.c — hardened robust mutexes in shared memory (shm/mutex.c), and fsck's repair
 * of a corrupted one. Regression tests for the fuzzer's findings: a scribbled type word made glibc
 * abort, and a lock word naming a vanished owner made writers wait forever. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l2.h"
#include "../shm/heap.h"
#include "../shm/mutex.h"

static pthread_mutex_t *shared_mutex(void)
{
	pthread_mutex_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(shm_mutex_init(m), 0);
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
	pthread_mutex_t *m = shared_mutex();
	ck_assert_int_eq(shm_mutex_check(m), 0);
	ck_assert_int_eq(shm_mutex_lock(m), 0);
	pid_t pid = fork();
	if (pid == 0)
		_exit(shm_mutex_trylock(m) == EBUSY ? 0 : 1);
	int st;
	waitpid(pid, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	shm_mutex_unlock(m);
	ck_assert_int_eq(shm_mutex_trylock(m), 0);
	shm_mutex_unlock(m);
}
END_TEST

START_TEST(test_dead_holder_is_ownerdead)
{
	pthread_mutex_t *m = shared_mutex();
	pid_t pid = fork();
	if (pid == 0) {
		shm_mutex_lock(m);
		raise(SIGKILL);
	}
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(shm_mutex_check(m), 0); /* the kernel marked it: not corruption */
	ck_assert_int_eq(shm_mutex_lock(m), EOWNERDEAD);
	shm_mutex_consistent(m);
	shm_mutex_unlock(m);
	ck_assert_int_eq(shm_mutex_lock(m), 0);
	shm_mutex_unlock(m);
}
END_TEST

START_TEST(regression_scribbled_type_word_aborted)
{
	pthread_mutex_t *m = shared_mutex();
	((unsigned char *)&m->__data.__kind)[0] = 0xc3; /* pshared, priority-protect, not robust */
	ck_assert_int_eq(shm_mutex_check(m), EBADMSG);
	ck_assert_int_eq(shm_mutex_lock(m), EBADMSG);
	ck_assert_int_eq(shm_mutex_trylock(m), EBADMSG);
	ck_assert_int_eq(shm_mutex_reinit(m), 0);
	ck_assert_int_eq(shm_mutex_lock(m), 0);
	shm_mutex_unlock(m);
}
END_TEST

START_TEST(regression_vanished_owner_hung)
{
	pthread_mutex_t *m = shared_mutex();
	/* a lock word naming a thread that does not exist, without OWNER_DIED */
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	__atomic_store_n(&m->__data.__lock, (int)pid, __ATOMIC_RELAXED);
	ck_assert_int_eq(shm_mutex_check(m), EBADMSG);
	double t0 = now_s();
	ck_assert_int_eq(shm_mutex_lock(m), EBADMSG);
	ck_assert(now_s() - t0 < 5.0); /* bounded, not forever */
}
END_TEST

START_TEST(test_slow_live_holder_is_waited_for)
{
	pthread_mutex_t *m = shared_mutex();
	int go[2];
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork();
	if (pid == 0) {
		shm_mutex_lock(m);
		if (write(go[1], "x", 1) != 1)
			_exit(1);
		usleep(700000); /* longer than one wait slice */
		shm_mutex_unlock(m);
		_exit(0);
	}
	char c;
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	ck_assert_int_eq(shm_mutex_lock(m), 0);
	shm_mutex_unlock(m);
	waitpid(pid, NULL, 0);
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
	((unsigned char *)&ix->hdr->shards[shard].mu.__data.__kind)[0] = 0xc3;
	((unsigned char *)&shm_heap_mutex(a->shm)->__data.__kind)[0] = 0xc3;
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
	tcase_add_test(tc, regression_scribbled_type_word_aborted);
	tcase_add_test(tc, regression_vanished_owner_hung);
	tcase_add_test(tc, test_slow_live_holder_is_waited_for);
	tcase_add_test(tc, test_fsck_repairs_corrupted_arena_mutexes);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(mutex_suite)
