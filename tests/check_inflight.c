/*
 * tests/check_inflight.c — a process's death does not end its I/O.
 *
 * io_uring reads submitted by a process can land in their destination after the process was
 * killed and reaped (O_DIRECT reads into the arena, tens of ms later). These tests kill a filler
 * whose ring is full of fills into arena reservations at random moments and, at once, admit
 * entries that need exactly the room its reservations held: no admitted byte may change
 * afterwards, fsck must stay clean, no call may report a corrupted arena. The same for fills of
 * segmented L3 objects (their segments read on the same ring), and for L3 puts (no temp file is judged stale
 * while a write of its dead writer may still land).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../lib/io_pin.h"

enum {
	NOBJ = 24,            /* objects in the store, each filled in turn */
	OBJ = 4 << 20,        /* payload bytes of each (a 4 MiB reservation each) */
	QD = 16,              /* fills in flight in the filler */
	ROUNDS = 50,
	NTOK = 8,             /* tokens of each stored prefix */
};

static char dir[] = "/var/tmp/sc-inflight-XXXXXX";
static void watch_window_ms(long ms);
static struct sc_location locs[NOBJ];
static int32_t toks[NOBJ][NTOK];

static void pattern(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

/* The store: NOBJ objects of OBJ bytes (segmented ones when @seg_bytes), O_DIRECT fills. */
static struct sc_l3 *store(uint64_t seg_bytes)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_l3_opts o = { .o_direct = SC_L3_ODIRECT_ON };
	struct sc_l3 *l3 = NULL;
	ck_assert_int_eq(sc_l3_open(dir, &o, &l3), 0);
	if (seg_bytes)
		ck_assert_int_eq(sc_l3_set_segment_bytes(l3, seg_bytes), 0);
	uint8_t *b = malloc(OBJ);
	for (int i = 0; i < NOBJ; i++) {
		pattern(b, OBJ, 1000 + (uint64_t)i);
		for (int t = 0; t < NTOK; t++)
			toks[i][t] = i * 100 + t;
		struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { OBJ } };
		struct sc_l3_put_args a = { .model_identity = "m", .state_identity = "s", .ns = "if",
					    .tokens = toks[i], .token_count = NTOK, .payload = &pl };
		int rc = sc_l3_put(l3, &a, &locs[i]);
		ck_assert_msg(rc == 0, "put %d: %s", i, sc_strerror(rc));
	}
	free(b);
	return l3;
}

static int waitable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1;
}

/*
 * The filler: QD reservations of OBJ bytes in arena @name, each filled from the store again and
 * again (a full queue at all times). It writes one byte to @ready once every fill was submitted,
 * then runs until it is killed.
 */
static void filler(const char *name, int ready, int register_heap)
{
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	struct sc_l3 *l3 = NULL;
	struct sc_l3_opts o = { .o_direct = SC_L3_ODIRECT_ON, .queue_depth = QD };
	if (sc_arena_open(name, &a) || sc_stage_open(a, "m", "s", &st) || sc_l3_open(dir, &o, &l3))
		_exit(2);
	if (register_heap && sc_l3_bind_arena(l3, a))
		_exit(3);
	static struct sc_l2_resv resv[QD];
	static struct sc_l3_fill_req req[QD];
	struct sc_l3_fill_req *pr[QD];
	for (int i = 0; i < QD; i++) {
		if (sc_l2_reserve(st, OBJ, &resv[i]))
			_exit(4);
		req[i] = (struct sc_l3_fill_req){ .loc = &locs[i % NOBJ], .dst = resv[i].ptr, .dst_bytes = resv[i].bytes };
		pr[i] = &req[i];
	}
	if (sc_l3_fill_submit(l3, pr, QD) != QD)
		_exit(5);
	uint32_t token = sc_arena_token(a);
	if (write(ready, &token, sizeof(token)) != (ssize_t)sizeof(token))
		_exit(6);
	for (unsigned n = QD;; n++) {
		struct sc_l3_fill_req *done[QD];
		int k = sc_l3_fill_reap(l3, done, QD, -1);
		for (int j = 0; j < k; j++) {
			if (done[j]->result)
				_exit(7); /* the parent sees a status, not a kill */
			done[j]->loc = &locs[n++ % NOBJ];
		}
		if (k > 0 && sc_l3_fill_submit(l3, done, (unsigned)k) != k)
			_exit(8);
	}
}

/* The payloads the parent admits in round @r, made before the kill so that the admissions follow
 * it as closely as they can: two pages below OBJ each, so that with its token ids an entry takes
 * the block one of the filler's reservations held. */
#define ADM (OBJ - 8192)

struct admits {
	uint8_t *buf[QD];
	struct sc_digest d[QD];
	struct sc_lease lease[QD];
};

static void admits_make(struct admits *ad, int r)
{
	for (int j = 0; j < QD; j++) {
		if (!ad->buf[j])
			ck_assert_ptr_nonnull(ad->buf[j] = malloc(ADM));
		pattern(ad->buf[j], ADM, ((uint64_t)r << 8) + (uint64_t)j);
		ad->d[j] = sc_digest(ad->buf[j], ADM);
	}
}

/* Does the filler's token still hold its slot (its process, or its ring while reads may land)? */
static int holder_alive(struct sc_arena *a, uint32_t token)
{
	struct sc_holder rows[64];
	int n = sc_arena_holders(a, rows, 64);
	for (int i = 0; i < n && i < 64; i++)
		if (rows[i].token == token)
			return rows[i].alive;
	return 0;
}

static void admit_slot(struct sc_arena *a, struct sc_stage *st, int r, int j, struct admits *ad, uint32_t token)
{
	int32_t t[2] = { r, j };
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { ad->buf[j] }, .sec_len = { ADM } };
	/* at once: the dead filler's room comes back only when the kernel finished its reads, and
	 * until then the admission is refused (everything else is leased), never served wrong */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int rc = sc_l2_admit(st, "adm", t, 2, ad->d[j], &pl, SC_ORIGIN_DIRECT);
		ck_assert_msg(rc == 0 || rc == -ENOSPC, "round %d admit %d: %s", r, j, sc_strerror(rc));
		if (rc == 0)
			break;
		/* refused: wait for the filler's lock to go (its ring's teardown), then admit again */
		while (holder_alive(a, token)) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			ck_assert_msg(now.tv_sec - t0.tv_sec < 60, "round %d: the dead filler's ring never let go", r);
			watch_window_ms(1);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		ck_assert_msg(now.tv_sec - t0.tv_sec < 60, "round %d: the dead filler's room never came back", r);
	}
	ck_assert_int_eq(sc_l2_get(st, "adm", t, 2, NULL, &ad->lease[j]), 0);
	ck_assert(ad->lease[j].digest.lo == ad->d[j].lo && ad->lease[j].digest.hi == ad->d[j].hi);
}

static void check_unchanged(int r, int n, struct sc_lease *leases)
{
	for (int j = 0; j < n; j++) {
		struct sc_digest d = sc_digest(leases[j].sec[0], leases[j].sec_len[0]);
		ck_assert_msg(d.lo == leases[j].digest.lo && d.hi == leases[j].digest.hi,
			      "round %d: admitted entry %d changed after its admission (a late read of the dead filler)", r, j);
	}
}

static void finding(const char *component, const char *message, int repaired, void *ctx)
{
	(void)repaired;
	snprintf(ctx, 256, "%s: %s", component, message);
}

static void fsck_clean(struct sc_arena *a, int r)
{
	struct sc_fsck_report rep;
	char last[256] = "";
	int rc = sc_arena_fsck(a, SC_FSCK_DEEP, finding, last, &rep);
	ck_assert_msg(rc == 0 && rep.digest_failures == 0, "round %d: fsck --deep: %d problems (%s%s)", r, rc,
		      rc < 0 ? sc_strerror(rc) : "", last);
}

/* Watch what a dead process's I/O may still do: an observation window, not a wait for a state. */
static void watch_window_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* @huge: a hugetlbfs arena with its heap registered in the filler's ring (read_fixed); else a
 * 4 KiB shm arena (plain reads). @seg_bytes: a segmented store (segment reads). */
static void killed_filler_rounds(int huge, uint64_t seg_bytes)
{
	if (huge && !sc_test_is_root()) {
		sc_skip("hugetlbfs arena needs root (stagecache setup)");
		return;
	}
	struct sc_l3 *l3 = store(seg_bytes);
	struct sc_l3_stats ls;
	sc_l3_stats(l3, &ls);
	if (!ls.dio_mem_align) {
		sc_skip("no O_DIRECT on %s", dir);
		goto out;
	}
	/* a heap that holds the QD reservations and not one more (4 MiB of the arena beyond them for
	 * its other regions: the event ring's alone is 260 KiB, the stats 528 KiB, the policy nodes
	 * 48 bytes an entry, and the heap starts 2 MiB aligned) */
	struct sc_arena_opts ao = { .size_bytes = ((uint64_t)(QD + 2) << 22) + (4u << 20), .huge = huge ? SC_HUGE_REQUIRE : SC_HUGE_OFF,
				    .l3_index_entries = SC_L3_INDEX_NONE };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("inflight", &ao, &name);
	struct sc_stage *st = NULL;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	struct sc_arena_info info;
	ck_assert_int_eq(sc_arena_info(a, &info), 0);
	ck_assert_msg(info.heap_bytes >= (uint64_t)QD * OBJ && info.heap_bytes < (uint64_t)(QD + 1) * OBJ + (4u << 20),
		      "heap %llu bytes: the arena's layout changed, resize the test", (unsigned long long)info.heap_bytes);
	static struct admits ad;
	unsigned seed = (unsigned)time(NULL);
	printf("inflight: huge %d seg %llu seed %u\n", huge, (unsigned long long)seg_bytes, seed);
	srand(seed);
	for (int r = 0; r < ROUNDS; r++) {
		int p[2];
		ck_assert_int_eq(pipe(p), 0);
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			close(p[0]);
			filler(name, p[1], huge);
		}
		close(p[1]);
		admits_make(&ad, r);
		ck_assert_msg(waitable(p[0], 20000), "round %d: the filler did not start its fills within 20 s", r);
		uint32_t token;
		if (read(p[0], &token, sizeof(token)) != (ssize_t)sizeof(token)) {
			int status = 0;
			waitpid(pid, &status, 0);
			ck_abort_msg("round %d: the filler failed before its fills (exit status %d)", r,
				     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		}
		close(p[0]);
		watch_window_ms(rand() % 12); /* a random moment into its reads */
		kill(pid, SIGKILL);
		sc_test_wait_killed(pid);
		for (int j = 0; j < QD; j++)
			admit_slot(a, st, r, j, &ad, token);
		check_unchanged(r, QD, ad.lease);
		watch_window_ms(100); /* late reads of a dead process land within tens of ms */
		check_unchanged(r, QD, ad.lease);
		fsck_clean(a, r);
		for (int j = 0; j < QD; j++)
			sc_lease_release(&ad.lease[j]);
		ck_assert_int_ge(sc_l2_clear(a), 0);
	}
	for (int j = 0; j < QD; j++)
		free(ad.buf[j]);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
out:
	sc_l3_close(l3);
	sc_test_rm_tree(dir);
}

START_TEST(killed_filler_never_writes_reused_memory)
{
	/* _i: 0 a 4 KiB shm arena, 1 hugetlbfs with the heap registered */
	killed_filler_rounds(_i, 0);
}
END_TEST

START_TEST(killed_segmented_filler_never_writes_reused_memory)
{
	killed_filler_rounds(0, 1u << 20);
}
END_TEST

/*
 * L3 puts: a writer killed with writes of a big temp file in flight. Its writes land after
 * waitpid(), and its temp file stays locked until they did (the lock is on the file description
 * every write holds). While it is locked, reconciliation keeps it even when it looks old; once
 * unlocked, nothing writes it any more, and reconciliation removes it.
 */
START_TEST(killed_writer_temp_file_judged_after_its_writes)
{
	/* rounds: at least MIN_ROUNDS, more until KEPT reconciliations met a held temp file (a kill
	 * lands in a write or an fsync only now and then), at most MAX_ROUNDS */
	enum { MIN_ROUNDS = 20, KEPT = 3, MAX_ROUNDS = 60, BIG = 24 << 20 };
	ck_assert_ptr_nonnull(mkdtemp(dir));
	unsigned seed = (unsigned)time(NULL);
	printf("inflight puts: seed %u\n", seed);
	srand(seed);
	int kept_locked = 0;
	int r;
	for (r = 0; r < MAX_ROUNDS && (r < MIN_ROUNDS || kept_locked < KEPT); r++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			struct sc_l3 *w = NULL;
			if (sc_l3_open(dir, NULL, &w))
				_exit(3);
			uint8_t *b = malloc(BIG);
			for (unsigned i = 0;; i++) {
				int32_t t[2] = { r, (int32_t)i };
				pattern(b, BIG, ((uint64_t)r << 32) + i);
				struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { BIG } };
				struct sc_l3_put_args a = { .ns = "w", .tokens = t, .token_count = 2, .payload = &pl };
				(void)sc_l3_put(w, &a, NULL);
			}
		}
		struct timespec t0, now;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (!sc_test_l3_temps(dir, NULL, NULL)) { /* inside a put */
			clock_gettime(CLOCK_MONOTONIC, &now);
			ck_assert_msg(now.tv_sec - t0.tv_sec < 30, "round %d: the writer made no temp file in 30 s", r);
			watch_window_ms(1);
		}
		watch_window_ms(rand() % 20); /* a random moment into its writes */
		kill(pid, SIGKILL);
		sc_test_wait_killed(pid);
		/* held: judged old by its mtime, kept by its lock. A put has two temp files at a time
		 * (its object's and its entry's, synced together): one may be let go and removed while
		 * the other is held. Each held one is watched through a descriptor of the test's own
		 * (which holds no lock): a lock never comes back once its writer is dead, so one still
		 * held after the reconciliation was held all through it, and must not have been removed. */
		for (;;) {
			int held[8];
			int nh = sc_test_l3_held_temps(dir, held, 8);
			if (!nh)
				break;
			ck_assert_int_eq(sc_test_sh("find %s -name '.tmp-*' -exec touch -d '-1 minute' {} +", dir), 0);
			struct sc_l3 *l3 = NULL;
			ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0); /* reconciles */
			sc_l3_close(l3);
			for (int k = 0; k < nh; k++) {
				struct stat sb;
				ck_assert_int_eq(fstat(held[k], &sb), 0);
				if (sc_test_fd_held(held[k])) {
					ck_assert_msg(sb.st_nlink > 0, "round %d: a temp file was removed while its writer's writes were in flight", r);
					kept_locked++;
				}
				close(held[k]);
			}
		}
		/* let go: nothing writes it any more */
		uint64_t sig0, sig1;
		sc_test_l3_temps(dir, NULL, &sig0);
		watch_window_ms(100); /* late writes of a dead process land within tens of ms */
		sc_test_l3_temps(dir, NULL, &sig1);
		ck_assert_msg(sig0 == sig1, "round %d: a temp file was written after its lock was released", r);
		ck_assert_int_eq(sc_test_sh("find %s -name '.tmp-*' -exec touch -d '-1 minute' {} +", dir), 0);
		struct sc_l3 *l3 = NULL;
		ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
		ck_assert_int_eq(sc_test_l3_temps(dir, NULL, NULL), 0);
		ck_assert_int_eq(sc_l3_verify(l3, NULL, NULL), 0);
		sc_l3_close(l3);
	}
	printf("inflight puts: %d reconciliations in %d rounds kept a held temp file\n", kept_locked, r);
	sc_test_rm_tree(dir);
}
END_TEST

/* Fill the object at @l (@bytes, written with pattern seed @seed) into a reservation of @st through
 * @l3's ring: the fill's result (the bytes checked when 0); the reservation is released. */
static int fill_into(struct sc_l3 *l3, struct sc_stage *st, const struct sc_location *l, uint64_t seed, uint64_t bytes)
{
	struct sc_l2_resv resv;
	ck_assert_int_eq(sc_l2_reserve(st, bytes, &resv), 0);
	struct sc_l3_fill_req req = { .loc = l, .dst = resv.ptr, .dst_bytes = resv.bytes }, *pr = &req, *done = NULL;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &pr, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_ptr_eq(done, &req);
	int rc = req.result;
	if (!rc) {
		uint8_t *want = malloc(bytes);
		pattern(want, bytes, seed);
		ck_assert_msg(!memcmp(resv.ptr, want, bytes), "the fill delivered other bytes");
		free(want);
	}
	sc_l2_reserve_release(&resv);
	return rc;
}

/*
 * One ring, two arena handles of this process in turn. The ring holds the lock of each handle it
 * reads into (lib/io_pin.c); a handle closed with its lock held by the ring keeps its slot live
 * until the ring's next fill lets the lock go. The ring's file table is opened once: the second
 * handle's fill must not try to open it again.
 */
START_TEST(one_ring_pins_each_arena_handle_and_lets_closed_ones_go)
{
	enum { SMALL = 256 << 10 };
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_l3 *l3 = NULL;
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
	struct sc_location l[2];
	uint8_t *b = malloc(SMALL);
	for (int i = 0; i < 2; i++) {
		int32_t t[2] = { 7, i };
		pattern(b, SMALL, 500 + (uint64_t)i);
		struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { SMALL } };
		struct sc_l3_put_args a = { .ns = "pin", .tokens = t, .token_count = 2, .payload = &pl };
		ck_assert_int_eq(sc_l3_put(l3, &a, &l[i]), 0);
	}
	free(b);
	struct sc_arena_opts ao = { .size_bytes = 64u << 20, .huge = SC_HUGE_OFF, .l3_index_entries = SC_L3_INDEX_NONE };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("pins", &ao, &name), *a2 = NULL;
	struct sc_stage *st = NULL, *st2 = NULL;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	ck_assert_int_eq(sc_arena_open(name, &a2), 0);
	ck_assert_int_eq(sc_stage_open(a2, "m", "s", &st2), 0);
	uint32_t token2 = sc_arena_token(a2);
	ck_assert_int_eq(fill_into(l3, st2, &l[0], 500, SMALL), 0);
	sc_stage_close(st2);
	sc_arena_close(a2);
	ck_assert_msg(holder_alive(a, token2), "the ring no longer holds the closed handle's lock (it read into it)");
	/* a fill into the other handle: the same ring, its table already open */
	int rc = fill_into(l3, st, &l[1], 501, SMALL);
	ck_assert_msg(rc == 0, "a fill into a second arena handle through the same ring: %s", sc_strerror(rc));
	ck_assert_msg(!holder_alive(a, token2), "the ring kept the closed handle's lock after its next fill");
	ck_assert_int_eq(fill_into(l3, st, &l[0], 500, SMALL), 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
	sc_l3_close(l3);
	sc_test_rm_tree(dir);
}
END_TEST

/*
 * The pin accounting of one ring (lib/io_pin.c), step by step with no read racing it: a request
 * into private memory holds no lock and its end lets none go; a request into a handle that was
 * closed keeps that handle's lock through the ring's next request into another handle, and the
 * lock goes at the first request after the last one into it ended.
 */
START_TEST(pins_count_only_reads_into_arena_memory)
{
	struct io_uring ring;
	ck_assert_int_eq(io_uring_queue_init(8, &ring, 0), 0);
	struct io_pins pins = { 0 };
	const char *name;
	struct sc_arena *a = sc_test_arena("pin-acct", 32u << 20, &name), *a2 = NULL;
	struct sc_stage *st = NULL, *st2 = NULL;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	ck_assert_int_eq(sc_arena_open(name, &a2), 0);
	ck_assert_int_eq(sc_stage_open(a2, "m", "s", &st2), 0);
	uint32_t token2 = sc_arena_token(a2);
	struct sc_l2_resv r1, r2;
	ck_assert_int_eq(sc_l2_reserve(st, 65536, &r1), 0);
	ck_assert_int_eq(sc_l2_reserve(st2, 65536, &r2), 0);
	static uint8_t priv[4096];

	int i2 = io_pin_get(&ring, &pins, r2.ptr); /* a read into the second handle's memory starts */
	ck_assert_int_ge(i2, 0);
	ck_assert_int_eq(io_pin_get(&ring, &pins, (uint8_t *)r2.ptr + 4096), i2); /* the same handle, the same entry */
	io_pin_put(&pins, i2);
	int ip = io_pin_get(&ring, &pins, priv); /* a read into private memory: nothing to hold */
	ck_assert_int_eq(ip, -1);
	io_pin_put(&pins, ip); /* ... and its end lets nothing go */
	sc_stage_close(st2);
	sc_arena_close(a2); /* r2 goes to the reaper with its handle */
	ck_assert_msg(holder_alive(a, token2), "the closed handle's lock went with a read into it in flight");
	/* the closed handle's entry stays (its read is in flight) but is nobody's any more: an address
	 * in its old range (unmapped now, or some later mapping's) is not pinned by it */
	ck_assert_int_eq(io_pin_get(&ring, &pins, r2.ptr), -1);
	int i1 = io_pin_get(&ring, &pins, r1.ptr); /* the next request, into the first handle */
	ck_assert_int_ge(i1, 0);
	ck_assert_int_ne(i1, i2);
	ck_assert_msg(holder_alive(a, token2), "the ring let go of a closed handle's lock with a read into it in flight");
	io_pin_put(&pins, i2); /* the read into the closed handle ended */
	io_pin_put(&pins, i2); /* an end with nothing in flight (a caller's slip) counts nothing */
	io_pin_put(&pins, i1);
	ck_assert_msg(holder_alive(a, token2), "the lock went before the ring's next request");
	ck_assert_int_eq(io_pin_get(&ring, &pins, r1.ptr), i1);
	ck_assert_msg(!holder_alive(a, token2), "the ring kept a closed handle's lock after its reads ended");
	io_pin_put(&pins, i1);
	/* an index out of range changes nothing, not even what lies after the table */
	struct {
		struct io_pins p;
		uint32_t after[8];
	} w;
	memcpy(&w.p, &pins, sizeof(pins));
	for (int k = 0; k < 8; k++)
		w.after[k] = 7;
	io_pin_put(&w.p, IO_PIN_SLOTS);
	io_pin_put(&w.p, 99);
	io_pin_put(&w.p, -2);
	ck_assert_int_eq(memcmp(&w.p, &pins, sizeof(pins)), 0);
	for (int k = 0; k < 8; k++)
		ck_assert_uint_eq(w.after[k], 7);
	io_pins_forget(&pins);
	io_uring_queue_exit(&ring);
	sc_l2_reserve_release(&r1);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A ring's file table holds IO_PIN_SLOTS handles: with a read in flight into each, a request into
 * one more handle is refused (-ENFILE, nothing started); once one of them has no read in flight,
 * its entry makes room (the first idle one), the others untouched. */
START_TEST(pins_make_room_from_idle_entries_only)
{
	enum { N = IO_PIN_SLOTS + 1 };
	struct io_uring ring;
	ck_assert_int_eq(io_uring_queue_init(8, &ring, 0), 0);
	struct io_pins pins = { 0 };
	const char *name;
	struct sc_arena *h[N];
	struct sc_stage *st[N];
	struct sc_l2_resv r[N];
	h[0] = sc_test_arena("pin-room", 64u << 20, &name);
	for (int i = 0; i < N; i++) {
		if (i)
			ck_assert_int_eq(sc_arena_open(name, &h[i]), 0);
		ck_assert_int_eq(sc_stage_open(h[i], "m", "s", &st[i]), 0);
		ck_assert_int_eq(sc_l2_reserve(st[i], 4096, &r[i]), 0);
	}
	int idx[N];
	for (int i = 0; i < N - 1; i++)
		ck_assert_int_eq(idx[i] = io_pin_get(&ring, &pins, r[i].ptr), i);
	ck_assert_int_eq(io_pin_get(&ring, &pins, r[N - 1].ptr), -ENFILE); /* every entry has a read in flight */
	io_pin_put(&pins, idx[0]);
	io_pin_put(&pins, idx[5]);
	ck_assert_int_eq(io_pin_get(&ring, &pins, r[N - 1].ptr), 0); /* the first idle entry made room */
	/* ... and its handle is pinned no more (its close cleans its slot), the other idle one's is */
	ck_assert_uint_eq(h[0]->shm->io_pins, 0);
	ck_assert_uint_eq(h[5]->shm->io_pins, 1);
	ck_assert_int_eq(io_pin_get(&ring, &pins, r[5].ptr), 5);     /* the other idle one is still there */
	ck_assert_int_eq(io_pin_get(&ring, &pins, r[0].ptr), -ENFILE); /* and now nothing is idle again */
	io_pins_forget(&pins);
	io_uring_queue_exit(&ring);
	for (int i = N - 1; i >= 0; i--) {
		sc_l2_reserve_release(&r[i]);
		sc_stage_close(st[i]);
		if (i)
			sc_arena_close(h[i]);
	}
	sc_test_arena_destroy(h[0], name);
}
END_TEST

Suite *inflight_suite(void)
{
	Suite *s = suite_create("inflight");
	TCase *tc = tcase_create("inflight");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, killed_filler_never_writes_reused_memory, 0, 2);
	tcase_add_test(tc, killed_segmented_filler_never_writes_reused_memory);
	tcase_add_test(tc, killed_writer_temp_file_judged_after_its_writes);
	tcase_add_test(tc, one_ring_pins_each_arena_handle_and_lets_closed_ones_go);
	tcase_add_test(tc, pins_count_only_reads_into_arena_memory);
	tcase_add_test(tc, pins_make_room_from_idle_entries_only);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(inflight_suite)
