/* tests/check_l3recon.c — reconciliation of a large L3 store in bounded steps (lib/l3/reconcile.c):
 * writers killed at every step of a put, then opens and janitor passes from other processes;
 * nothing wrong is served meanwhile, and everything is cleaned up eventually; the same for a
 * writer killed at every step of a group commit (sc_l3_put_many). The test build's
 * l3_recon_full_max = 0 makes every store "large" (an open takes one step, never a scan). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l3/l3.h"
#include "../lib/l3/files.h"
#include "../lib/l3/write.h"
#include "../lib/l3/ring.h"
#include "../shm/fault.h"

#define NTOK 8
#define BASE 24      /* objects put before each crash */
#define OBJ_BYTES 20000

static char tmpdir[64];

static void rm_tmp(void)
{
	sc_test_rm_tree(tmpdir);
	tmpdir[0] = 0;
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/sc-l3r-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	atexit(rm_tmp);
	l3_recon_full_max = 0; /* forked children inherit it */
	l3_recon_step = 4;
}

static void teardown(void)
{
	rm_tmp();
}

static void toks_of(int32_t *t, unsigned i)
{
	for (int k = 0; k < NTOK; k++)
		t[k] = (int32_t)(i * 1000u + (unsigned)k);
}

static void bytes_of(uint8_t *p, size_t n, unsigned i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + 1;
	for (size_t k = 0; k < n; k++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[k] = (uint8_t)x;
	}
}

static int put_i(struct sc_l3 *l3, unsigned i)
{
	uint8_t *b = malloc(OBJ_BYTES);
	int32_t t[NTOK];
	toks_of(t, i);
	bytes_of(b, OBJ_BYTES, i);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { OBJ_BYTES } };
	struct sc_l3_put_args a = { .ns = "r", .tokens = t, .token_count = NTOK, .payload = &pl };
	int rc = sc_l3_put(l3, &a, NULL);
	free(b);
	return rc;
}

/* A batch of puts: prefix tok[k] holding the bytes of seed pay[k], of @len bytes each. */
struct batch {
	unsigned n;
	int32_t t[SC_L3_PUT_MANY_MAX][NTOK];
	uint8_t *b[SC_L3_PUT_MANY_MAX];
	struct sc_payload pl[SC_L3_PUT_MANY_MAX];
	struct sc_l3_put_args a[SC_L3_PUT_MANY_MAX];
	struct sc_location loc[SC_L3_PUT_MANY_MAX];
	int rcs[SC_L3_PUT_MANY_MAX];
};

static struct batch *batch_of(unsigned n, const unsigned *tok, const unsigned *pay, size_t len)
{
	struct batch *x = calloc(1, sizeof(*x));
	x->n = n;
	for (unsigned k = 0; k < n; k++) {
		toks_of(x->t[k], tok[k]);
		x->b[k] = malloc(len);
		bytes_of(x->b[k], len, pay[k]);
		x->pl[k] = (struct sc_payload){ .kind = SC_PAYLOAD_FULL_STATE, .sec = { x->b[k] }, .sec_len = { len } };
		x->a[k] = (struct sc_l3_put_args){ .ns = "r", .tokens = x->t[k], .token_count = NTOK, .payload = &x->pl[k] };
	}
	return x;
}

/* Objects [first, first + n) as one batch (each prefix holding its own bytes). */
static struct batch *batch_range(unsigned first, unsigned n)
{
	unsigned idx[SC_L3_PUT_MANY_MAX];
	for (unsigned k = 0; k < n; k++)
		idx[k] = first + k;
	return batch_of(n, idx, idx, OBJ_BYTES);
}

static void batch_free(struct batch *x)
{
	for (unsigned k = 0; k < x->n; k++)
		free(x->b[k]);
	free(x);
}

static int put_batch(struct sc_l3 *l3, struct batch *x)
{
	return sc_l3_put_many(l3, x->a, NULL, x->n, x->loc, x->rcs);
}

static void put_batch_of(struct sc_l3 *l3, void *x)
{
	put_batch(l3, x);
}

/* Object @i as this handle finds it, holding the bytes of @seed: 1 served and exact, 0 not found (a miss), -1 wrong bytes or
 * a fill that returned something other than a verification failure. */
static int served_as(struct sc_l3 *l3, unsigned i, unsigned seed)
{
	int32_t t[NTOK];
	struct sc_location loc;
	toks_of(t, i);
	int n = sc_l3_locate_longest(l3, "r", t, NTOK, &loc);
	if (n <= 0)
		return n == 0 ? 0 : -1;
	if (n != NTOK || loc.payload_bytes != OBJ_BYTES)
		return -1;
	uint8_t *dst = aligned_alloc(4096, 5 * 4096), *want = malloc(OBJ_BYTES);
	bytes_of(want, OBJ_BYTES, seed);
	int rc = sc_l3_fill(l3, &loc, dst, 5 * 4096, 0);
	int r = rc == 0 ? (memcmp(dst, want, OBJ_BYTES) ? -1 : 1) : rc == -EBADMSG || rc == -ENOENT ? 0 : -1;
	free(dst);
	free(want);
	return r;
}

static int served(struct sc_l3 *l3, unsigned i)
{
	return served_as(l3, i, i);
}

/* In another process: open (one step), then check every object in [0, n): each served exactly or
 * missed (those in @must_serve: served). The child's exit status: 0 right, 1 wrong. */
static void other_process_opens_and_checks(unsigned n, unsigned must_serve)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_l3 *l3;
		if (sc_l3_open(tmpdir, NULL, &l3))
			_exit(2);
		for (unsigned i = 0; i < n; i++) {
			int s = served(l3, i);
			if (s < 0 || (i < must_serve && s != 1))
				_exit(1);
		}
		sc_l3_close(l3);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "another process was served wrong (status %d)", st);
}

static unsigned temps_in(const char *sub)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", tmpdir, sub);
	return (unsigned)sc_test_l3_temps(p, NULL, NULL);
}

/* Four processes put batches at once, half of each the same 16 objects as the others' (their
 * renames race for one name): every put acknowledged, each object stored once, all exact. */
START_TEST(put_many_from_four_processes_at_once)
{
	enum { PROCS = 4, SAME = 16, OWN = 16 };
	pid_t pid[PROCS];
	int go[2], ready[2];
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(ready), 0);
	for (unsigned w = 0; w < PROCS; w++) {
		pid[w] = fork();
		ck_assert_int_ge(pid[w], 0);
		if (pid[w] == 0) {
			struct sc_l3 *l3;
			char c;
			close(go[1]);
			/* every open done before any put: an open of a small store recounts its counters,
			 * which puts made meanwhile would escape */
			if (sc_l3_open(tmpdir, NULL, &l3) || write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 0)
				_exit(2);
			unsigned idx[SAME + OWN];
			for (unsigned k = 0; k < SAME; k++)
				idx[k] = k;
			for (unsigned k = 0; k < OWN; k++)
				idx[SAME + k] = 100 + w * OWN + k;
			struct batch *x = batch_of(SAME + OWN, idx, idx, OBJ_BYTES);
			int rc = put_batch(l3, x);
			for (unsigned k = 0; k < SAME + OWN; k++)
				rc |= x->rcs[k];
			sc_l3_close(l3);
			_exit(rc ? 1 : 0);
		}
	}
	close(go[0]);
	for (unsigned w = 0; w < PROCS; w++) {
		char c;
		ck_assert_int_eq(read(ready[0], &c, 1), 1);
	}
	close(go[1]); /* every child's read returns 0: they start together */
	for (unsigned w = 0; w < PROCS; w++) {
		int st;
		ck_assert_int_eq(waitpid(pid[w], &st, 0), pid[w]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %u: a put failed (status %d)", w, st);
	}
	struct sc_l3 *l3;
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	for (unsigned i = 0; i < SAME; i++)
		ck_assert_int_eq(served(l3, i), 1);
	for (unsigned i = 100; i < 100 + PROCS * OWN; i++)
		ck_assert_int_eq(served(l3, i), 1);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.objects, SAME + PROCS * OWN);
	sc_l3_close(l3);
	ck_assert_uint_eq(temps_in("tmp"), 0);
}
END_TEST

/* After a writer killed at @point: another process's open leaves its @young temp files (their
 * writer may be between create and lock), serves objects [0, @must) and the others of [0, @n)
 * exactly or not at all; once they are aged, the next open removes them whatever the store's
 * size, and a janitor pass of another process finds nothing wrong. */
static void dead_writer_cleaned_up(const char *point, unsigned n, unsigned must, unsigned young)
{
	other_process_opens_and_checks(n, must);
	ck_assert_msg(temps_in("tmp") == young, "%s: %u temp files after an open, not %u", point, temps_in("tmp"), young);
	ck_assert_int_eq(sc_test_sh("find %s -name '.tmp-*' -exec touch -d '-1 minute' {} +", tmpdir), 0);
	other_process_opens_and_checks(n, must);
	ck_assert_msg(temps_in("tmp") == 0, "%s: an open left a dead writer's temp file", point);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_l3 *j;
		struct sc_l3_janitor_report rep;
		if (sc_l3_open(tmpdir, NULL, &j) || sc_l3_janitor(j, SC_L3_JANITOR_FULL | SC_L3_JANITOR_WAIT, &rep))
			_exit(2);
		_exit(rep.quarantined || rep.stale_temps || sc_l3_verify(j, NULL, NULL) != 0 ? 1 : 0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: janitor pass after the steps (status %d)", point, st);
}

/* Objects [0, BASE), put one at a time. */
static void base_store(void)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	for (unsigned i = 0; i < BASE; i++)
		ck_assert_int_eq(put_i(l3, i), 0);
	sc_l3_close(l3);
}

/* A writer (another process) that puts with @put(its handle, @ctx) and is killed at @point; once
 * it is, its temp files are unlocked (its ring's writes all landed). */
static void killed_writer(const char *point, void (*put)(struct sc_l3 *, void *), void *ctx)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_l3 *w;
		if (sc_l3_open(tmpdir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &w))
			_exit(3);
		shm_fault_arm(point);
		put(w, ctx);
		_exit(4);
	}
	sc_test_wait_killed(pid);
	ck_assert_int_eq(sc_test_wait_l3_temps_unlocked(tmpdir, 30000), 0);
}

static void put_base(struct sc_l3 *l3, void *ctx)
{
	(void)ctx;
	put_i(l3, BASE);
}

/* The steps of a put where a writer can die (a group commit of one, lib/l3/put.c): its object's
 * temp file made, its entry's made, both written, both synced, the object placed, both placed (the
 * directories not synced yet); and the temp files each step leaves in DIR/tmp. */
static const struct {
	const char *point;
	unsigned temps;
} kill_steps[] = {
	{ "l3.put.created@1", 1 },    { "l3.put.created@2", 2 },           { "l3.putmany.written@1", 2 },
	{ "l3.putmany.synced@1", 2 }, { "l3.putmany.object_placed@1", 1 }, { "l3.putmany.placed@1", 0 },
};
#define NPOINTS (sizeof(kill_steps) / sizeof(kill_steps[0]))

START_TEST(writer_killed_at_every_step_then_steps_clean_up)
{
	const char *point = kill_steps[_i].point;
	unsigned young = kill_steps[_i].temps;
	struct sc_l3 *l3;
	base_store();
	/* the writer, killed inside its put of object BASE */
	killed_writer(point, put_base, NULL);
	ck_assert_msg(temps_in("tmp") == young, "%s: temp files in DIR/tmp: %u, not %u", point, temps_in("tmp"), young);
	ck_assert_int_eq(temps_in("objects") + temps_in("prefix"), 0); /* never beside the objects */
	/* a janitor pass of another process finds nothing wrong, and the put works again */
	dead_writer_cleaned_up(point, BASE + 1, BASE, young);
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(put_i(l3, BASE), 0);
	ck_assert_int_eq(served(l3, BASE), 1);
	sc_l3_close(l3);
}
END_TEST

/* Damage no writer made: a bad object, an entry whose object is gone, an old store's temp file
 * beside the objects, a dead dropper's capture. Steps find each within one round of the cursor;
 * meanwhile the bad object is never served. */
START_TEST(steps_find_every_leftover_within_a_round)
{
	enum { N = 40 };
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	for (unsigned i = 0; i < N; i++)
		ck_assert_int_eq(put_i(l3, i), 0);
	struct sc_location loc[3];
	for (unsigned i = 0; i < 3; i++) {
		int32_t t[NTOK];
		toks_of(t, i);
		ck_assert_int_eq(sc_l3_locate_longest(l3, "r", t, NTOK, &loc[i]), NTOK);
	}
	sc_l3_close(l3);
	char hex[33], p[256];
	/* object 0: its header's check broken */
	l3_digest_hex(loc[0].digest.lo, loc[0].digest.hi, hex);
	snprintf(p, sizeof(p), "%s/objects/%.2s/%s.sc3", tmpdir, hex, hex);
	int fd = open(p, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "XXXXXXXX", 8, 100), 8);
	close(fd);
	/* object 1: gone (its entry dangles) */
	l3_digest_hex(loc[1].digest.lo, loc[1].digest.hi, hex);
	snprintf(p, sizeof(p), "%s/objects/%.2s/%s.sc3", tmpdir, hex, hex);
	ck_assert_int_eq(unlink(p), 0);
	char dangling[256];
	l3_digest_hex(loc[1].prefix.lo, loc[1].prefix.hi, hex);
	snprintf(dangling, sizeof(dangling), "%s/prefix/%.2s/%s.pfx", tmpdir, hex, hex);
	ck_assert_int_eq(access(dangling, F_OK), 0);
	/* a temp file beside the objects, as a store made before DIR/tmp has them, of a dead writer */
	ck_assert_int_eq(sc_test_sh("mkdir -p %s/objects/ab && echo x > %s/objects/ab/.tmp-h.1.0badf00d.7 && "
				    "touch -d '-1 hour' %s/objects/ab/.tmp-h.1.0badf00d.7", tmpdir, tmpdir, tmpdir), 0);
	/* steps: at most l3_recon_step entries each; a whole round of the cursor cleans everything */
	struct sc_l3_stats st;
	uint64_t rounds0 = 0;
	int opens = 0, clean = 0;
	for (; opens < 200 && !clean; opens++) {
		/* meanwhile object 0 is never served from another handle (a fill verifies it) */
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			struct sc_l3 *r;
			if (sc_l3_open(tmpdir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &r))
				_exit(2);
			uint8_t *dst = aligned_alloc(4096, 5 * 4096);
			_exit(sc_l3_fill(r, &loc[0], dst, 5 * 4096, 0) == 0 ? 1 : 0);
		}
		int ws;
		ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
		ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "a bad object was served (status %d)", ws);
		ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
		if (!opens)
			rounds0 = atomic_load(&l3->st->sweep_rounds);
		sc_l3_stats(l3, &st);
		sc_l3_close(l3);
		clean = st.quarantined >= 1 && access(dangling, F_OK) != 0 && temps_in("objects") == 0;
	}
	ck_assert_msg(clean, "200 steps did not clean up (quarantined %llu)", (unsigned long long)st.quarantined);
	/* the first step did not do it all (bounded), and one round was enough */
	ck_assert_int_gt(opens, 1);
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_uint_le(atomic_load(&l3->st->sweep_rounds), rounds0 + 2);
	for (unsigned i = 2; i < N; i++)
		ck_assert_int_eq(served(l3, i), 1);
	ck_assert_int_eq(served(l3, 0), 0);
	ck_assert_int_eq(served(l3, 1), 0);
	sc_l3_close(l3);
}
END_TEST

/* A reconciler killed in its step (holding DIR/lock, the cursor half moved): the lock goes with
 * it, and the next open's step carries on. */
START_TEST(reconciler_killed_in_its_step)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	for (unsigned i = 0; i < 12; i++)
		ck_assert_int_eq(put_i(l3, i), 0);
	sc_l3_close(l3);
	ck_assert_int_eq(sc_test_sh("for i in 1 2 3; do echo x > %s/tmp/.tmp-h.1.0badf00d.$i; done; "
				    "touch -d '-1 hour' %s/tmp/.tmp-*", tmpdir, tmpdir), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		shm_fault_arm("l3.recon.judged@2");
		struct sc_l3 *r;
		sc_l3_open(tmpdir, NULL, &r);
		_exit(4);
	}
	sc_test_wait_killed(pid);
	ck_assert_uint_eq(temps_in("tmp"), 1); /* two judged, then killed */
	other_process_opens_and_checks(12, 12);
	ck_assert_uint_eq(temps_in("tmp"), 0);
}
END_TEST

/* A janitor pass of a large store under its budget lists nothing: it removes what dead writers
 * left in DIR/tmp and takes a step; the counters come from DIR/state. A full pass lists. */
START_TEST(janitor_pass_of_a_large_store_takes_a_step)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	for (unsigned i = 0; i < 10; i++)
		ck_assert_int_eq(put_i(l3, i), 0);
	ck_assert_int_eq(sc_test_sh("echo x > %s/tmp/.tmp-h.1.0badf00d.1 && mkdir -p %s/objects/ab && "
				    "echo x > %s/objects/ab/.tmp-h.1.0badf00d.2 && touch -d '-1 hour' %s/tmp/.tmp-* "
				    "%s/objects/ab/.tmp-*", tmpdir, tmpdir, tmpdir, tmpdir, tmpdir), 0);
	uint64_t pos = atomic_load(&l3->st->sweep_pos), off = atomic_load(&l3->st->sweep_off);
	struct sc_l3_janitor_report rep;
	ck_assert_int_eq(sc_l3_janitor(l3, SC_L3_JANITOR_WAIT, &rep), 0);
	ck_assert_uint_eq(temps_in("tmp"), 0);
	ck_assert_uint_ge(rep.stale_temps, 1);
	ck_assert_uint_eq(rep.objects, 10);
	ck_assert(atomic_load(&l3->st->sweep_pos) != pos || atomic_load(&l3->st->sweep_off) != off);
	/* a full pass lists everything: the old store's temp file goes at once */
	ck_assert_int_eq(sc_l3_janitor(l3, SC_L3_JANITOR_WAIT | SC_L3_JANITOR_FULL, &rep), 0);
	ck_assert_uint_eq(temps_in("objects"), 0);
	ck_assert_uint_eq(rep.objects, 10);
	for (unsigned i = 0; i < 10; i++)
		ck_assert_int_eq(served(l3, i), 1);
	sc_l3_close(l3);
}
END_TEST

/* ---- group commit (sc_l3_put_many) ---- */

START_TEST(put_many_acknowledges_each_put_as_put_would)
{
	struct sc_l3 *l3;
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(put_i(l3, 5), 0); /* stored already: the batch only uses it again */
	struct batch *x = batch_range(0, 20);
	/* object 7 twice in one batch (in the place of object 19): stored once */
	x->a[19] = x->a[7];
	uint64_t costs[20];
	for (unsigned k = 0; k < 20; k++)
		costs[k] = 1000u + k;
	ck_assert_int_eq(sc_l3_put_many(l3, x->a, costs, 20, x->loc, x->rcs), 0);
	for (unsigned k = 0; k < 20; k++) {
		struct sc_location loc;
		int32_t t[NTOK];
		ck_assert_int_eq(x->rcs[k], 0);
		toks_of(t, k == 19 ? 7 : k);
		ck_assert_int_eq(sc_l3_locate_longest(l3, "r", t, NTOK, &loc), NTOK);
		ck_assert(!memcmp(&loc.digest, &x->loc[k].digest, sizeof(loc.digest)));
		ck_assert(!memcmp(&loc.prefix, &x->loc[k].prefix, sizeof(loc.prefix)));
		ck_assert_uint_eq(x->loc[k].payload_bytes, OBJ_BYTES);
		/* the cost of the put that wrote the object (object 5 keeps sc_l3_put's 0) */
		ck_assert_uint_eq(loc.cost_ns, k == 5 ? 0 : k == 19 ? 1007 : 1000 + k);
	}
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.objects, 19);
	ck_assert_uint_eq(st.puts, 19);     /* object 5 by sc_l3_put, 18 by the batch */
	ck_assert_uint_ge(st.put_dedup, 2); /* object 5, and object 7's second put */
	sc_l3_close(l3);
	/* durable and exact for another process; no temp file left */
	other_process_opens_and_checks(19, 19);
	ck_assert_uint_eq(temps_in("tmp"), 0);
	batch_free(x);
}
END_TEST

/* Is the test directory on a filesystem whose large fsync rounds are one syncfs (local ones)? */
static int whole_fs_here(void)
{
	struct statfs sf;
	ck_assert_int_eq(statfs(tmpdir, &sf), 0);
	return sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == XFS_SUPER_MAGIC || sf.f_type == BTRFS_SUPER_MAGIC ||
	       sf.f_type == TMPFS_MAGIC;
}

/* @n new files under @dir (named @tag.k), each with a byte written, their descriptors in @fds. */
static void files_in(const char *dir, const char *tag, int *fds, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		char p[160];
		snprintf(p, sizeof(p), "%s/%s.%u", dir, tag, k);
		fds[k] = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		ck_assert_int_ge(fds[k], 0);
		ck_assert_int_eq(write(fds[k], "x", 1), 1);
	}
}

/* A round of fsyncs is one syncfs only when it is large, the handle's filesystem is a local one,
 * and every file of the round is on the store's filesystem: a file elsewhere (/dev/shm), a round
 * under the threshold, a shared handle or a bad descriptor get their fsyncs (and their error). */
START_TEST(a_round_is_one_syncfs_only_when_every_file_is_on_the_store)
{
	if (!whole_fs_here()) {
		sc_skip("%s is not on ext4, XFS, Btrfs or tmpfs", tmpdir);
		return;
	}
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	struct l3_ring *r = l3_ring_get(l3);
	ck_assert_ptr_nonnull(r);
	int fds[L3_SYNCFS_MIN + 1];
	files_in(tmpdir, "f", fds, L3_SYNCFS_MIN);
	unsigned long s0 = atomic_load(&l3_test_syncfs_rounds), f0 = atomic_load(&l3_test_fsyncs);
	ck_assert_int_eq(l3_ring_fsync_all(r, fds, L3_SYNCFS_MIN), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_syncfs_rounds) - s0, 1);
	/* one fewer: fsyncs, each of them */
	ck_assert_int_eq(l3_ring_fsync_all(r, fds, L3_SYNCFS_MIN - 1), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_syncfs_rounds) - s0, 1);
	ck_assert_uint_eq(atomic_load(&l3_test_fsyncs) - f0, 2 * L3_SYNCFS_MIN - 1);
	/* one file on another filesystem: every file fsynced */
	struct stat a, b;
	ck_assert_int_eq(stat(tmpdir, &a), 0);
	if (stat("/dev/shm", &b) == 0 && a.st_dev != b.st_dev) {
		char shm[64];
		snprintf(shm, sizeof(shm), "/dev/shm/sc-l3r-%d", (int)getpid());
		files_in("/dev/shm", shm + 9, &fds[L3_SYNCFS_MIN], 1);
		ck_assert_int_eq(l3_ring_fsync_all(r, fds, L3_SYNCFS_MIN + 1), 0);
		ck_assert_uint_eq(atomic_load(&l3_test_syncfs_rounds) - s0, 1);
		char p[80];
		snprintf(p, sizeof(p), "%s.0", shm);
		unlink(p);
		close(fds[L3_SYNCFS_MIN]);
	} else {
		sc_skip("/dev/shm is not another filesystem here: the mixed round is not tried");
	}
	/* a closed descriptor in the round: its error, no syncfs hiding it */
	int keep = fds[3];
	fds[3] = 1000;
	ck_assert_int_eq(l3_ring_fsync_all(r, fds, L3_SYNCFS_MIN), -EBADF);
	ck_assert_uint_eq(atomic_load(&l3_test_syncfs_rounds) - s0, 1);
	fds[3] = keep;
	/* writes refuse a bad descriptor as well */
	struct iovec one = { .iov_base = "y", .iov_len = 1 };
	ck_assert_int_eq(l3_write_at(1000, &one, 1, 0), -EBADF);
	sc_l3_close(l3);
	/* a shared handle (several hosts: FUSE or a network filesystem) never uses syncfs */
	ck_assert_int_eq(sc_l3_open(tmpdir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_SHARED }, &l3), 0);
	ck_assert_ptr_nonnull(r = l3_ring_get(l3));
	ck_assert_int_eq(l3_ring_fsync_all(r, fds, L3_SYNCFS_MIN), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_syncfs_rounds) - s0, 1);
	sc_l3_close(l3);
	for (unsigned k = 0; k < L3_SYNCFS_MIN; k++)
		close(fds[k]);
}
END_TEST

/* The group commit itself: a batch of 16 new puts is two rounds of fsyncs (its 32 temp files, then
 * its directories, each once); the same batch again writes nothing, and syncs only the directories
 * of its names while they are young (lib/l3/write.h), nothing once they are settled. */
START_TEST(put_many_commits_a_batch_in_two_rounds_of_fsyncs)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	struct batch *x = batch_range(0, 16);
	unsigned long r0 = atomic_load(&l3_test_fsync_rounds), f0 = atomic_load(&l3_test_fsyncs);
	unsigned long s0 = atomic_load(&l3_test_syncfs_rounds);
	ck_assert_int_eq(put_batch(l3, x), 0);
	unsigned long rounds = atomic_load(&l3_test_fsync_rounds) - r0, fsyncs = atomic_load(&l3_test_fsyncs) - f0;
	ck_assert_uint_eq(rounds, 2);
	/* on a local filesystem both rounds (over L3_SYNCFS_MIN files each) are one syncfs each */
	ck_assert_uint_eq(atomic_load(&l3_test_syncfs_rounds) - s0, whole_fs_here() ? 2 : 0);
	/* 32 temp files, then at least the one objects/ and one prefix/ subdirectory, at most 32 */
	ck_assert_uint_ge(fsyncs, 32 + 2);
	ck_assert_uint_le(fsyncs, 32 + 32);
	f0 = atomic_load(&l3_test_fsyncs);
	l3_settle_ns = UINT64_MAX; /* young, however long the batch took */
	ck_assert_int_eq(put_batch(l3, x), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_fsyncs) - f0, fsyncs - 32); /* the directories, no file */
	l3_settle_ns = 0;
	f0 = atomic_load(&l3_test_fsyncs);
	ck_assert_int_eq(put_batch(l3, x), 0);
	l3_settle_ns = L3_SETTLE_NS;
	ck_assert_uint_eq(atomic_load(&l3_test_fsyncs) - f0, 0);
	/* one put alone is a batch of one: its two temp files in one round, its two directories
	 * (objects/XX, prefix/YY) in the other */
	r0 = atomic_load(&l3_test_fsync_rounds);
	f0 = atomic_load(&l3_test_fsyncs);
	s0 = atomic_load(&l3_test_syncfs_rounds);
	ck_assert_int_eq(put_i(l3, 40), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_fsync_rounds) - r0, 2);
	ck_assert_uint_eq(atomic_load(&l3_test_fsyncs) - f0, 4);
	ck_assert_uint_eq(atomic_load(&l3_test_syncfs_rounds) - s0, 0); /* rounds of two: fsyncs */
	for (unsigned k = 0; k < 16; k++)
		ck_assert_int_eq(served(l3, k), 1);
	sc_l3_close(l3);
	batch_free(x);
}
END_TEST

/* The subdirectories of DIR/@top holding at least one file. */
static unsigned dirs_in_use(const char *top)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", tmpdir, top);
	DIR *d = opendir(p);
	unsigned n = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char q[600];
		snprintf(q, sizeof(q), "%s/%s", p, e->d_name);
		DIR *sd = opendir(q);
		int used = 0;
		for (struct dirent *f; sd && !used && (f = readdir(sd));)
			used = f->d_name[0] != '.';
		if (sd)
			closedir(sd);
		n += used;
	}
	if (d)
		closedir(d);
	return n;
}

/* DIR/@top's subdirectories (and DIR/@top itself) modified an hour ago, as far as their mtime says. */
static void dirs_aged(const char *top)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", tmpdir, top);
	struct timespec t[2];
	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= 3600;
	t[1] = t[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, p, t, 0), 0);
	DIR *d = opendir(p);
	for (struct dirent *e; d && (e = readdir(d));) {
		char q[600];
		snprintf(q, sizeof(q), "%s/%s", p, e->d_name);
		if (e->d_name[0] != '.' && e->d_type == DT_DIR)
			ck_assert_int_eq(utimensat(AT_FDCWD, q, t, 0), 0);
	}
	if (d)
		closedir(d);
}

/* A put that finds its object and its entry in place acknowledges on the strength of names another
 * writer made: one killed after its renames, before its directory round, left names whose
 * directories nobody synced. The put again syncs both directories (objects/XX and prefix/YY, and
 * the young token length's DIR/lengths) before it returns; a segmented put (made alone, put_one)
 * syncs those and every seg/XX directory of the segments it found. A use's touch does not make a
 * name young (its directory's mtime does not move), and settled names cost nothing. */
START_TEST(puts_that_find_young_names_sync_their_directories)
{
	struct sc_l3 *l3;
	base_store();
	killed_writer("l3.putmany.placed@1", put_base, NULL);
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	l3_settle_ns = UINT64_MAX; /* every name young, however long the steps above took */
	unsigned long r0 = atomic_load(&l3_test_fsync_rounds), f0 = atomic_load(&l3_test_fsyncs);
	unsigned long d0 = atomic_load(&l3_test_dir_syncs);
	ck_assert_int_eq(put_i(l3, BASE), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_fsync_rounds) - r0, 2);
	ck_assert_uint_eq(atomic_load(&l3_test_fsyncs) - f0, 2); /* no temp file; its two directories */
	ck_assert_uint_eq(atomic_load(&l3_test_dir_syncs) - d0, 1); /* DIR/lengths, registered by the other */
	ck_assert_int_eq(served(l3, BASE), 1);
	/* the length is known durable here now: the same put again syncs its two directories only */
	f0 = atomic_load(&l3_test_fsyncs);
	d0 = atomic_load(&l3_test_dir_syncs);
	ck_assert_int_eq(put_i(l3, BASE), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_fsyncs) - f0, 2);
	ck_assert_uint_eq(atomic_load(&l3_test_dir_syncs) - d0, 0);
	/* segments a writer killed before its manifest left: the put of the same payload finds them
	 * and syncs each seg/XX directory once (its manifest and entry it writes itself) */
	ck_assert_int_eq(sc_l3_set_segment_bytes(l3, 64 * 1024), 0);
	struct batch *seg = batch_of(1, (unsigned[]){ BASE + 1 }, (unsigned[]){ BASE + 1 }, 200 * 1024);
	killed_writer("l3seg.put.segments@1", put_batch_of, seg);
	unsigned segdirs = dirs_in_use("seg");
	ck_assert_uint_ge(segdirs, 1);
	d0 = atomic_load(&l3_test_dir_syncs);
	ck_assert_int_eq(put_batch(l3, seg), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_dir_syncs) - d0, segdirs);
	/* the segmented object found in place (made alone): its two directories; its segments were
	 * durable before its manifest was placed */
	d0 = atomic_load(&l3_test_dir_syncs);
	ck_assert_int_eq(put_batch(l3, seg), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_dir_syncs) - d0, 2); /* objects/XX, prefix/YY */
	/* files changed just now (touched by those puts), directories an hour ago: settled */
	l3_settle_ns = L3_SETTLE_NS;
	dirs_aged("objects");
	dirs_aged("prefix");
	dirs_aged("seg");
	f0 = atomic_load(&l3_test_fsyncs);
	d0 = atomic_load(&l3_test_dir_syncs);
	ck_assert_int_eq(put_i(l3, BASE), 0);
	ck_assert_int_eq(put_batch(l3, seg), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_fsyncs) - f0, 0);
	ck_assert_uint_eq(atomic_load(&l3_test_dir_syncs) - d0, 0);
	/* every name settled */
	l3_settle_ns = 0;
	f0 = atomic_load(&l3_test_fsyncs);
	d0 = atomic_load(&l3_test_dir_syncs);
	ck_assert_int_eq(put_i(l3, BASE), 0);
	ck_assert_int_eq(put_batch(l3, seg), 0);
	l3_settle_ns = L3_SETTLE_NS;
	ck_assert_uint_eq(atomic_load(&l3_test_fsyncs) - f0, 0);
	ck_assert_uint_eq(atomic_load(&l3_test_dir_syncs) - d0, 0);
	sc_l3_close(l3);
	batch_free(seg);
}
END_TEST

/* A rename refused because another writer's rename of the same name came first (no-replace:
 * objects and segments) leaves the put relying on that writer's name: the directory is synced
 * before -EEXIST is returned, and the name keeps the first writer's bytes. */
START_TEST(a_rename_that_finds_the_name_taken_syncs_its_directory)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	char a[64] = "first", b[64] = "second";
	struct iovec ia = { a, sizeof(a) }, ib = { b, sizeof(b) };
	unsigned long d0 = atomic_load(&l3_test_dir_syncs);
	ck_assert_int_eq(l3_write_file(l3, l3->objfd, "zz", "taken.sc3", &ia, 1, 1), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_dir_syncs) - d0, 0); /* its own rename: synced inline */
	ck_assert_int_eq(l3_write_file(l3, l3->objfd, "zz", "taken.sc3", &ib, 1, 1), -EEXIST);
	ck_assert_uint_eq(atomic_load(&l3_test_dir_syncs) - d0, 1);
	char p[256], got[64];
	snprintf(p, sizeof(p), "%s/objects/zz/taken.sc3", tmpdir);
	int fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read(fd, got, sizeof(got)), sizeof(got));
	close(fd);
	ck_assert(!memcmp(got, a, sizeof(a)));
	ck_assert_uint_eq(temps_in("tmp"), 0); /* the refused temp file removed */
	sc_l3_close(l3);
}
END_TEST

/* The pages of @fd's file that are dirty and not yet under writeback, or -1 (no cachestat). */
static long dirty_pages(int fd)
{
	struct {
		uint64_t off, len;
	} rg = { 0, 0 }; /* len 0: to the end of the file */
	struct {
		uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
	} cs;
	return syscall(__NR_cachestat, fd, &rg, &cs, 0) < 0 ? -1 : (long)cs.nr_dirty;
}

/* The put path's writes (l3_write_at): a file over one piece (1 MiB) is written a piece at a
 * time and each piece's writeback is started at once, so that the fsync after it waits for the
 * last piece, not the file; the bytes are the vector's wherever the pieces cut it; a small file, or
 * one of exactly one piece, is one write whose writeback is left to the fsync (the starts are
 * counted by the test build's l3_test_wb_starts); a vector it cannot take is refused. */
START_TEST(large_writes_start_their_writeback_piece_by_piece)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	char path[128];
	snprintf(path, sizeof(path), "%s/big", tmpdir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	/* four sections: piece boundaries fall inside the second and the fourth */
	static const size_t len[4] = { 4096, (3u << 19) + 7, 3, (2u << 20) + 5 };
	struct iovec iov[5];
	size_t total = 0;
	for (unsigned i = 0; i < 4; i++) {
		iov[i] = (struct iovec){ .iov_base = malloc(len[i]), .iov_len = len[i] };
		ck_assert_ptr_nonnull(iov[i].iov_base);
		bytes_of(iov[i].iov_base, len[i], 70 + i);
		total += len[i];
	}
	iov[4] = iov[3];
	unsigned long wb = atomic_load(&l3_test_wb_starts);
	ck_assert_int_eq(l3_write_at(fd, iov, 4, 0), 0);
	ck_assert_uint_ge(atomic_load(&l3_test_wb_starts) - wb, 4); /* a writeback started per piece */
	long dirty = dirty_pages(fd);
	struct statfs sf;
	ck_assert_int_eq(fstatfs(fd, &sf), 0);
	if (dirty < 0 || sf.f_type == TMPFS_MAGIC) {
		sc_skip("the writeback of the pieces is not visible here (%s)", dirty < 0 ? "no cachestat" : "tmpfs");
	} else {
		/* every piece was sent: nothing is left dirty but what the kernel may have skipped of a
		 * piece (WB_SYNC_NONE); written in one go, the whole file (about 900 pages) would wait */
		ck_assert_msg(dirty < 256, "%ld pages of %zu bytes still dirty", dirty, total);
	}
	struct stat sb;
	ck_assert_int_eq(fstat(fd, &sb), 0);
	ck_assert_uint_eq((uint64_t)sb.st_size, total);
	off_t at = 0;
	for (unsigned i = 0; i < 4; i++) {
		uint8_t *back = malloc(len[i]);
		ck_assert_int_eq(pread(fd, back, len[i], at), (ssize_t)len[i]);
		ck_assert_msg(memcmp(back, iov[i].iov_base, len[i]) == 0, "section %u differs", i);
		at += (off_t)len[i];
		free(back);
	}
	/* a small file: one write, no writeback started (its fsync does it) */
	int small = open(path, O_RDWR | O_TRUNC | O_CLOEXEC);
	ck_assert_int_ge(small, 0);
	struct iovec one = { .iov_base = iov[1].iov_base, .iov_len = 64 << 10 };
	wb = atomic_load(&l3_test_wb_starts);
	ck_assert_int_eq(l3_write_at(small, &one, 1, 0), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_wb_starts), wb);
	/* refused, nothing written: more sections than it takes, a negative count; none, or only
	 * empty ones: done at once */
	ck_assert_int_eq(l3_write_at(small, iov, 5, 0), -EINVAL);
	ck_assert_int_eq(l3_write_at(small, iov, -1, 0), -EINVAL);
	ck_assert_int_eq(l3_write_at(small, iov, 0, 64 << 10), 0); /* no section: nothing to write */
	struct iovec empty[2] = { { .iov_base = iov[0].iov_base, .iov_len = 0 },
				  { .iov_base = iov[1].iov_base, .iov_len = 0 } };
	ck_assert_int_eq(l3_write_at(small, empty, 2, 64 << 10), 0); /* empty sections: nothing either */
	ck_assert_int_eq(fstat(small, &sb), 0);
	ck_assert_uint_eq((uint64_t)sb.st_size, 64 << 10);
	close(small);
	/* a file of exactly one piece: one write as well, no writeback started */
	snprintf(path, sizeof(path), "%s/piece", tmpdir);
	int piece = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(piece, 0);
	struct iovec whole = { .iov_base = malloc(1u << 20), .iov_len = 1u << 20 };
	ck_assert_ptr_nonnull(whole.iov_base);
	bytes_of(whole.iov_base, whole.iov_len, 75);
	ck_assert_int_eq(l3_write_at(piece, &whole, 1, 0), 0);
	ck_assert_uint_eq(atomic_load(&l3_test_wb_starts), wb);
	close(piece);
	free(whole.iov_base);
	close(fd);
	for (unsigned i = 0; i < 4; i++)
		free(iov[i].iov_base);
	sc_l3_close(l3);
}
END_TEST

/* A write the kernel answers with 0 bytes (nothing written and no error; here a seccomp filter in a
 * child makes pwritev return 0) fails at once with -EIO, whatever errno held before: it is not
 * taken for an interrupted write (errno EINTR) and made again for ever (the child's alarm ends it),
 * nor for an error (-errno), nor, errno 0, for success. */
START_TEST(a_write_the_kernel_answers_with_0_bytes_fails_with_eio)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/nothing", tmpdir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	static const int before[] = { EINTR, 0, ENOSPC };
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (sc_test_refuse_syscall(__NR_pwritev, SECCOMP_RET_ERRNO | 0))
			_exit(77);
		/* a write made again for ever ends the child by SIGALRM (the default action: the handler
		 * inherited from Check's runner would kill the whole process group) */
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		if (sigaction(SIGALRM, &dfl, NULL))
			_exit(20);
		alarm(10);
		static uint8_t b[8192];
		struct iovec v[2] = { { b, 4096 }, { b + 4096, 4096 } };
		if (pwritev(fd, v, 2, 0) != 0)
			_exit(21); /* the filter does not hold */
		for (unsigned i = 0; i < sizeof(before) / sizeof(before[0]); i++) {
			errno = before[i];
			if (l3_write_at(fd, v, 2, 0) != -EIO)
				_exit(22 + (int)i);
		}
		_exit(0);
	}
	int st = sc_test_child_status(pid, "no seccomp filter: no write answered with 0 bytes to be had");
	ck_assert_msg(st <= 0, "the child: exit %d (20: no SIGALRM; 21: the filter does not hold; 22, 23, 24: errno EINTR, 0, ENOSPC "
		      "before, and the write answered with 0 bytes did not fail with -EIO)", st);
	close(fd);
}
END_TEST

START_TEST(put_many_of_one_prefix_twice_keeps_the_later)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(put_i(l3, 3), 0);
	/* prefix 3 put again with other bytes (seed 103), then prefix 4 with seeds 104 then 204 */
	struct batch *x = batch_of(3, (unsigned[]){ 3, 4, 4 }, (unsigned[]){ 103, 104, 204 }, OBJ_BYTES);
	ck_assert_int_eq(put_batch(l3, x), 0);
	ck_assert_int_eq(served_as(l3, 3, 103), 1);
	ck_assert_int_eq(served_as(l3, 4, 204), 1);
	sc_l3_close(l3);
	/* a new handle, which never saw the old entries, finds the new ones too */
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(served_as(l3, 3, 103), 1);
	ck_assert_int_eq(served_as(l3, 4, 204), 1);
	sc_l3_close(l3);
	batch_free(x);
}
END_TEST

START_TEST(put_many_refuses_bad_input_and_writes_nothing)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	struct batch *x = batch_range(0, 4);
	ck_assert_int_eq(sc_l3_put_many(NULL, x->a, NULL, 4, NULL, NULL), -EINVAL);
	ck_assert_int_eq(sc_l3_put_many(l3, NULL, NULL, 4, NULL, NULL), -EINVAL);
	ck_assert_int_eq(sc_l3_put_many(l3, x->a, NULL, 0, NULL, NULL), -EINVAL);
	ck_assert_int_eq(sc_l3_put_many(l3, x->a, NULL, SC_L3_PUT_MANY_MAX + 1, NULL, NULL), -EINVAL);
	/* one bad put among good ones: none is written, each is told why */
	struct sc_payload bad = { .kind = 99, .sec = { x->b[2] }, .sec_len = { OBJ_BYTES } };
	x->a[2].payload = &bad;
	ck_assert_int_eq(put_batch(l3, x), -EINVAL);
	for (unsigned k = 0; k < 4; k++)
		ck_assert_int_eq(x->rcs[k], -EINVAL);
	x->a[2].payload = &x->pl[2];
	x->a[3].token_count = 0;
	ck_assert_int_eq(put_batch(l3, x), -EINVAL);
	x->a[3].token_count = NTOK;
	x->a[1].tokens = NULL;
	ck_assert_int_eq(put_batch(l3, x), -EINVAL);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.objects, 0);
	ck_assert_uint_eq(st.puts, 0);
	for (unsigned k = 0; k < 4; k++)
		ck_assert_int_eq(served(l3, k), 0);
	ck_assert_uint_eq(temps_in("tmp"), 0);
	/* refused by the budget: that put fails (counted), the others are acknowledged */
	sc_l3_close(l3);
	ck_assert_int_eq(sc_l3_open(tmpdir, &(struct sc_l3_opts){ .budget_bytes = 3 * OBJ_BYTES }, &l3), 0);
	x->a[1].tokens = x->t[1];
	struct batch *big = batch_of(1, (unsigned[]){ 9 }, (unsigned[]){ 9 }, 4 * OBJ_BYTES);
	x->a[3] = big->a[0];
	ck_assert_int_eq(put_batch(l3, x), -E2BIG);
	ck_assert_int_eq(x->rcs[0], 0);
	ck_assert_int_eq(x->rcs[1], 0);
	ck_assert_int_eq(x->rcs[2], 0);
	ck_assert_int_eq(x->rcs[3], -E2BIG);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.write_refusals, 1);
	for (unsigned k = 0; k < 3; k++)
		ck_assert_int_eq(served(l3, k), 1);
	sc_l3_close(l3);
	batch_free(big);
	batch_free(x);
}
END_TEST

/* The store, opened with segments of 64 KiB (set, then opened again as a worker would). */
static struct sc_l3 *open_segmented(void)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_set_segment_bytes(l3, 64 * 1024), 0);
	sc_l3_close(l3);
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	return l3;
}

START_TEST(put_many_puts_a_segmented_object_alone)
{
	struct sc_l3 *l3 = open_segmented();
	/* 200 KiB: four segments; beside it two whole objects of the batch */
	struct batch *x = batch_range(0, 3), *seg = batch_of(1, (unsigned[]){ 1 }, (unsigned[]){ 1 }, 200 * 1024);
	x->a[1] = seg->a[0];
	ck_assert_int_eq(put_batch(l3, x), 0);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.segments, 4);
	ck_assert_uint_eq(st.objects, 3);
	ck_assert_int_eq(served(l3, 0), 1);
	ck_assert_int_eq(served(l3, 2), 1);
	uint8_t *dst = aligned_alloc(4096, 256 * 1024);
	ck_assert_int_eq(sc_l3_fill(l3, &x->loc[1], dst, 256 * 1024, 0), 0);
	ck_assert(!memcmp(dst, seg->b[0], 200 * 1024));
	free(dst);
	sc_l3_close(l3);
	batch_free(seg);
	batch_free(x);
}
END_TEST

/* The steps of a batch where its writer can die: inside the writing of its temp files, after all
 * were written, after the one round of fsyncs, between an object and its entry, after every
 * rename (before the directories are synced). */
static const char *const batch_points[] = {
	"l3.put.created@5", "l3.putmany.written@1", "l3.putmany.synced@1", "l3.putmany.object_placed@3",
	"l3.putmany.placed@1",
};
#define NBATCH_POINTS (sizeof(batch_points) / sizeof(batch_points[0]))
#define BATCH 8

START_TEST(put_many_writer_killed_at_every_step)
{
	const char *point = batch_points[_i];
	struct sc_l3 *l3;
	base_store();
	struct batch *x = batch_range(BASE, BATCH);
	killed_writer(point, put_batch_of, x);
	unsigned left = temps_in("tmp");
	/* every temp file is in DIR/tmp until its rename: some are left unless all were placed */
	ck_assert_msg(strstr(point, "putmany.placed") ? left == 0 : left > 0, "%s: %u temp files", point, left);
	ck_assert_int_eq(temps_in("objects") + temps_in("prefix"), 0);
	/* the earlier objects served; the batch's exactly or not at all */
	dead_writer_cleaned_up(point, BASE + BATCH, BASE, left);
	/* the batch again: every put acknowledged and served */
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(put_batch(l3, x), 0);
	sc_l3_close(l3);
	other_process_opens_and_checks(BASE + BATCH, BASE + BATCH);
	batch_free(x);
}
END_TEST


/* ---- evictions from the last listing's order (lib/l3/victims.c) ---- */

/* Object @i's file, relative to the store. */
static void obj_path(struct sc_l3 *l3, unsigned i, char *out, size_t n)
{
	int32_t t[NTOK];
	struct sc_location loc;
	toks_of(t, i);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "r", t, NTOK, &loc), NTOK);
	char rel[48];
	l3_obj_relpath(loc.digest.lo, loc.digest.hi, rel);
	snprintf(out, n, "%s/objects/%s", tmpdir, rel);
}

static char paths[128][160]; /* object i's file */

/* Object @i put, its path noted. */
static void put_noted(struct sc_l3 *l3, unsigned i)
{
	ck_assert_int_eq(put_i(l3, i), 0);
	obj_path(l3, i, paths[i], sizeof(paths[i]));
}

/* Objects [0, n) put, object i last used 1000 - i seconds ago (0 the oldest). */
static uint64_t aged_store(struct sc_l3 *l3, unsigned n)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	for (unsigned i = 0; i < n; i++) {
		put_noted(l3, i);
		struct timespec ts[2] = { { now.tv_sec - 1000 + (time_t)i, 0 }, { now.tv_sec - 1000 + (time_t)i, 0 } };
		ck_assert_int_eq(utimensat(AT_FDCWD, paths[i], ts, 0), 0);
	}
	struct stat sb;
	ck_assert_int_eq(stat(paths[0], &sb), 0);
	return (uint64_t)sb.st_size;
}

/* Which of [0, n) are stored (bit i), without using them (a fill is a use). */
static uint64_t stored(unsigned n)
{
	uint64_t m = 0;
	for (unsigned i = 0; i < n; i++)
		m |= (uint64_t)(access(paths[i], F_OK) == 0) << i;
	return m;
}

/* How many of [first, last) are stored. */
static unsigned stored_in(unsigned first, unsigned last)
{
	unsigned k = 0;
	for (unsigned i = first; i < last; i++)
		k += access(paths[i], F_OK) == 0;
	return k;
}

static unsigned long listings(void)
{
	return atomic_load(&l3_test_evict_listings);
}

/* Which of [0, n) this handle serves (bit i), each served exactly or missed (each a use). */
static uint64_t serving(struct sc_l3 *l3, unsigned n)
{
	uint64_t m = 0;
	for (unsigned i = 0; i < n; i++) {
		int s = served(l3, i);
		ck_assert_msg(s >= 0, "object %u served wrong", i);
		m |= (uint64_t)(s == 1) << i;
	}
	return m;
}

/* A flipped byte at @off of DIR/victims. */
static void victims_scribble(off_t off)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/victims", tmpdir);
	sc_test_flip_byte(p, off, 0x5a);
}

/* The first eviction of a large store lists it and leaves the head of its order; the next ones take
 * their victims from there without listing, in the same order a listing would: an object used
 * since (a fill touched it) is kept, one removed by someone else is passed over, objects put since
 * are newer than all of them. A damaged entry or header, a cut file and the end of the order make
 * the next eviction list again, and it is as right. */
START_TEST(evictions_take_the_last_listing_order_without_listing)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	uint64_t ob = aged_store(l3, 40);
	uint64_t all = (1ull << 40) - 1;
	ck_assert_uint_eq(atomic_load(&l3->st->bytes), 40 * ob);
	unsigned long l0 = listings();
	/* the first eviction lists: the four oldest go */
	ck_assert_int_eq(sc_l3_evict_to(l3, 36 * ob), 4);
	ck_assert_uint_eq(listings() - l0, 1);
	ck_assert_uint_eq(stored(40), all & ~0xfull);
	char p[160];
	snprintf(p, sizeof(p), "%s/victims", tmpdir);
	struct stat sb;
	ck_assert_int_eq(stat(p, &sb), 0);
	/* half the store's 36 objects: 18 entries after a 48-byte header */
	ck_assert_uint_eq((uint64_t)sb.st_size, 48 + 18 * sizeof(struct l3_cand));
	/* object 4 used (its file touched), 5 removed by someone else, 40-42 put since */
	ck_assert_int_eq(utimensat(AT_FDCWD, paths[4], NULL, 0), 0);
	ck_assert_int_eq(unlink(paths[5]), 0);
	l3_count_sub(&l3->st->bytes, ob);
	l3_count_sub(&l3->st->objects, 1);
	for (unsigned i = 40; i < 43; i++)
		put_noted(l3, i);
	ck_assert_uint_eq(atomic_load(&l3->st->bytes), 38 * ob);
	/* two more go without a listing: 6 and 7 (4 is kept, 5 passed over) */
	ck_assert_int_eq(sc_l3_evict_to(l3, 36 * ob), 2);
	ck_assert_uint_eq(listings() - l0, 1);
	uint64_t want = (all | 7ull << 40) & ~0xffull;
	want |= 1ull << 4;
	ck_assert_uint_eq(stored(43), want);
	ck_assert_uint_eq(atomic_load(&l3->st->objects), 36);
	/* a damaged entry (the next one: 8) stops the walk, and the eviction lists: 8 goes all the same */
	victims_scribble(48 + 4 * (off_t)sizeof(struct l3_cand) + 3);
	ck_assert_int_eq(sc_l3_evict_to(l3, 35 * ob), 1);
	ck_assert_uint_eq(listings() - l0, 2);
	want &= ~(1ull << 8);
	ck_assert_uint_eq(stored(43), want);
	/* from the new listing's order, without listing: 9 */
	ck_assert_int_eq(sc_l3_evict_to(l3, 34 * ob), 1);
	ck_assert_uint_eq(listings() - l0, 2);
	want &= ~(1ull << 9);
	ck_assert_uint_eq(stored(43), want);
	/* a damaged header, then a cut file: each eviction lists */
	victims_scribble(20);
	ck_assert_int_eq(sc_l3_evict_to(l3, 33 * ob), 1);
	ck_assert_uint_eq(listings() - l0, 3);
	ck_assert_int_eq(truncate(p, 48 + 3 * (off_t)sizeof(struct l3_cand) - 1), 0);
	ck_assert_int_eq(sc_l3_evict_to(l3, 32 * ob), 1);
	ck_assert_uint_eq(listings() - l0, 4);
	want &= ~(3ull << 10);
	ck_assert_uint_eq(stored(43), want);
	/* past the end of the order (half of 32 objects: 16), the eviction lists for the rest */
	ck_assert_int_eq(sc_l3_evict_to(l3, 12 * ob), 20);
	ck_assert_uint_eq(listings() - l0, 5);
	/* what is left is the 12 most recently used, counted right */
	want = (want & ~((1ull << 32) - 1)) | 1ull << 4;
	ck_assert_uint_eq(stored(43), want);
	ck_assert_uint_eq(serving(l3, 43), want);
	struct sc_l3_janitor_report rep;
	uint64_t bytes = atomic_load(&l3->st->bytes), objects = atomic_load(&l3->st->objects);
	ck_assert_int_eq(sc_l3_janitor(l3, SC_L3_JANITOR_WAIT | SC_L3_JANITOR_FULL, &rep), 0);
	ck_assert_uint_eq(rep.objects, 12);
	ck_assert_uint_eq(objects, 12);
	ck_assert_uint_eq(bytes, 12 * ob);
	sc_l3_close(l3);
}
END_TEST

/* A janitor pass over the budget evicts from the last listing's order without listing: its
 * report counts them, its log has an intent line before each eviction; then a pass under the
 * budget evicts nothing. Another process's evictions use the same order. */
START_TEST(janitor_passes_over_the_budget_evict_without_listing)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	uint64_t ob = aged_store(l3, 30);
	sc_l3_close(l3);
	/* a budget of 29.5 objects: the open evicts down to 85 % of it (25.075: 5 go) and lists */
	unsigned long l0 = listings();
	uint64_t budget = 59 * ob / 2;
	ck_assert_int_eq(sc_l3_open(tmpdir, &(struct sc_l3_opts){ .budget_bytes = budget }, &l3), 0);
	ck_assert_uint_eq(listings() - l0, 1);
	ck_assert_uint_eq(atomic_load(&l3->st->objects), 25);
	/* five puts: the last takes it over the budget, and evicts from the order down to 85 % of the
	 * budget less its own size (5-9) */
	for (unsigned i = 30; i < 35; i++)
		put_noted(l3, i);
	ck_assert_uint_eq(listings() - l0, 1);
	uint64_t m = stored(35);
	ck_assert_uint_eq(m, ((1ull << 35) - 1) & ~0x3ffull);
	/* over the budget behind this handle's back (another process's puts counted in DIR/state):
	 * a janitor pass evicts, from the order */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_l3 *o;
		if (sc_l3_open(tmpdir, NULL, &o))
			_exit(2);
		for (unsigned i = 35; i < 40; i++)
			if (put_i(o, i))
				_exit(3);
		sc_l3_close(o);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (unsigned i = 35; i < 40; i++)
		obj_path(l3, i, paths[i], sizeof(paths[i]));
	ck_assert_uint_gt(atomic_load(&l3->st->bytes), budget);
	struct sc_l3_janitor_report rep;
	ck_assert_int_eq(sc_l3_janitor(l3, SC_L3_JANITOR_WAIT, &rep), 0);
	ck_assert_uint_eq(listings() - l0, 1);
	ck_assert_uint_ge(rep.evicted, 1);
	ck_assert_uint_le(atomic_load(&l3->st->bytes), budget / 100 * 85);
	ck_assert_uint_eq(rep.objects, atomic_load(&l3->st->objects));
	m = stored(40);
	unsigned gone = 0;
	for (unsigned i = 0; i < 40; i++) {
		gone += !(m >> i & 1);
		/* the oldest went: nothing kept is older than something evicted */
		if (i && (m >> i & 1) == 0)
			ck_assert_msg(!(m & ((1ull << i) - 1)), "object %u evicted before an older one", i);
	}
	ck_assert_uint_eq(gone, 40 - atomic_load(&l3->st->objects));
	char log[128];
	snprintf(log, sizeof(log), "%s/janitor.log", tmpdir);
	ck_assert_int_eq(sc_test_sh("test $(grep -c ' intent ' %s) -eq %llu && test $(grep -c ' evict ' %s) -eq %llu", log,
				    (unsigned long long)rep.evicted, log, (unsigned long long)rep.evicted), 0);
	/* under the budget now: nothing to evict, nothing listed */
	ck_assert_int_eq(sc_l3_janitor(l3, SC_L3_JANITOR_WAIT, &rep), 0);
	ck_assert_uint_eq(rep.evicted, 0);
	ck_assert_uint_eq(listings() - l0, 1);
	sc_l3_close(l3);
}
END_TEST

/* An eviction with no order kept (no victims file yet) lists the store and evicts from the listing,
 * and makes no ring for it: only a walk of the order uses a ring. */
START_TEST(an_eviction_with_no_order_makes_no_ring)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	uint64_t ob = aged_store(l3, 10);
	sc_l3_close(l3);
	char p[160];
	snprintf(p, sizeof(p), "%s/victims", tmpdir);
	ck_assert_int_eq(access(p, F_OK), -1); /* no eviction yet: no order */
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_ptr_null(l3_ring_find(l3));
	unsigned long l0 = listings();
	ck_assert_int_eq(sc_l3_evict_to(l3, 8 * ob), 2);
	ck_assert_uint_eq(listings() - l0, 1);
	ck_assert_uint_eq(stored(10), 0x3fcull); /* the two oldest went */
	ck_assert_ptr_null(l3_ring_find(l3));
	sc_l3_close(l3);
}
END_TEST

/* A process may run with its standard input closed (a daemon): a file or directory the walk opens
 * is then descriptor 0, and is used and closed as any other. 0: the order's file opens as 0 (the
 * walk goes on from it, no listing). 1: descriptor 0 freed during the first round of the walk, so
 * the directory of the second round's first candidate opens as 0; the second candidate is in the
 * same directory and no earlier one is (the objects' ages are set so): it is found open. Both
 * evict the same 40 (the oldest of the order), and descriptor 0 is closed after the walk. */
static int zero_freed, zero_taken;
static struct stat zero_dir; /* the directory of the second round's first candidate */

static void free_zero_at_first_check(const char *point, void *ctx)
{
	(void)ctx;
	struct stat sb;
	if (strcmp(point, "l3.victims.checked"))
		return;
	if (!zero_freed) {
		zero_freed = 1;
		close(0);
	} else if (fstat(0, &sb) == 0 && sb.st_dev == zero_dir.st_dev && sb.st_ino == zero_dir.st_ino) {
		zero_taken = 1; /* that directory opened as 0 */
	}
}

static int same_dir(unsigned a, unsigned b)
{
	const char *x = strrchr(paths[a], '/'), *y = strrchr(paths[b], '/');
	return x - paths[a] == y - paths[b] && !memcmp(x - 2, y - 2, 2);
}

START_TEST(an_order_walked_with_descriptor_0_free_evicts_the_same)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	uint64_t ob = aged_store(l3, 100);
	/* two objects of one directory (a, b) made the 43rd and 44th oldest, the other objects of their
	 * directory the newest: the listing takes the 10 oldest and keeps the next 45 as the order, the
	 * walk's first round is the 11th-42nd, its second starts with a, b */
	unsigned a = 0, b = 0, rank[100], next = 0, last = 99;
	for (unsigned i = 0; i < 100 && !b; i++)
		for (unsigned j = i + 1; j < 100 && !b; j++)
			if (same_dir(i, j))
				a = i, b = j;
	ck_assert_msg(b, "no two of 100 objects share a directory");
	for (unsigned i = 0; i < 100; i++) {
		if (i == a || i == b)
			continue;
		if (same_dir(i, a)) {
			rank[i] = last--;
			continue;
		}
		next += next == 42 ? 2 : 0;
		rank[i] = next++;
	}
	rank[a] = 42, rank[b] = 43;
	char dir[160];
	snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(paths[a], '/') - paths[a]), paths[a]);
	ck_assert_int_eq(stat(dir, &zero_dir), 0);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	for (unsigned i = 0; i < 100; i++) {
		struct timespec ts[2] = { { now.tv_sec - 1000 + (time_t)rank[i], 0 }, { now.tv_sec - 1000 + (time_t)rank[i], 0 } };
		ck_assert_int_eq(utimensat(AT_FDCWD, paths[i], ts, 0), 0);
	}
	unsigned long l0 = listings();
	ck_assert_int_eq(sc_l3_evict_to(l3, 90 * ob), 10);
	ck_assert_uint_eq(listings() - l0, 1);
	int in = fcntl(0, F_DUPFD_CLOEXEC, 100);
	ck_assert_int_ge(in, 0);
	if (_i == 0) {
		close(0);
	} else {
		zero_freed = zero_taken = 0;
		shm_sched_set(free_zero_at_first_check, NULL);
	}
	int n = sc_l3_evict_to(l3, 50 * ob); /* 40 from the order: two rounds, 32 and 8 */
	shm_sched_set(NULL, NULL);
	int zero_open = fcntl(0, F_GETFD) >= 0;
	ck_assert_int_eq(dup2(in, 0), 0);
	close(in);
	ck_assert_int_eq(n, 40);
	ck_assert_uint_eq(listings() - l0, 1);
	for (unsigned i = 0; i < 100; i++)
		ck_assert_msg((access(paths[i], F_OK) == 0) == (rank[i] >= 50), "object %u (age rank %u) %s", i,
			      rank[i] + 1, rank[i] >= 50 ? "evicted" : "kept");
	ck_assert_msg(!zero_open, "the walk left descriptor 0 open");
	if (_i == 1)
		ck_assert(zero_freed && zero_taken);
	sc_l3_close(l3);
}
END_TEST

/* One eviction walks the order past a round of 32 candidates without listing; a process without
 * io_uring walks it as well, one request at a time; each evicts exactly the oldest; a candidate
 * whose unlink fails (an immutable file) stays, counted, and the next one goes instead. */
START_TEST(evictions_walk_the_order_in_rounds_with_and_without_a_ring)
{
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	uint64_t ob = aged_store(l3, 100);
	unsigned long l0 = listings();
	/* the listing: 0-9 go, and the order keeps 10-54 (half the store's 90) */
	ck_assert_int_eq(sc_l3_evict_to(l3, 90 * ob), 10);
	ck_assert_uint_eq(listings() - l0, 1);
	/* 40 at once from the order (two rounds: 32 and 8), no listing */
	ck_assert_int_eq(sc_l3_evict_to(l3, 50 * ob), 40);
	ck_assert_uint_eq(listings() - l0, 1);
	ck_assert_uint_eq(stored_in(0, 50), 0);
	ck_assert_uint_eq(stored_in(50, 100), 50);
	/* 50 cannot be removed (immutable): it stays, counted, and 51-53 go instead */
	int fd = open(paths[50], O_RDONLY);
	ck_assert_int_ge(fd, 0);
	int attr = 0;
	ck_assert_int_eq(ioctl(fd, FS_IOC_GETFLAGS, &attr), 0);
	attr |= FS_IMMUTABLE_FL;
	int immutable = ioctl(fd, FS_IOC_SETFLAGS, &attr) == 0;
	if (!immutable)
		printf("SKIP: an object that cannot be removed: FS_IOC_SETFLAGS immutable: %s\n", strerror(errno));
	/* another process, whose io_uring_setup fails: the next three go, from the order */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_l3 *o;
		if (sc_test_refuse_syscall(__NR_io_uring_setup, SECCOMP_RET_ERRNO | ENOSYS) || sc_l3_open(tmpdir, NULL, &o))
			_exit(2);
		unsigned long c0 = listings();
		int n = sc_l3_evict_to(o, 47 * ob);
		int ringless = l3_ring_get(o) == NULL;
		sc_l3_close(o);
		_exit(!ringless ? 3 : listings() != c0 ? 4 : n == 3 ? 0 : 5);
	}
	int st;
	pid_t w = waitpid(pid, &st, 0);
	/* removable again before anything is checked: a failed check leaves a tree teardown can remove */
	attr &= ~FS_IMMUTABLE_FL;
	int cleared = !immutable || ioctl(fd, FS_IOC_SETFLAGS, &attr) == 0;
	ck_assert(cleared);
	ck_assert_int_eq(w, pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the ringless eviction: status %d", st);
	if (immutable) {
		ck_assert_uint_eq(stored(54) >> 50, 1); /* 50 kept, 51-53 gone */
		ck_assert_uint_eq(stored_in(0, 50), 0);
		ck_assert_uint_eq(stored_in(54, 100), 46);
	} else {
		ck_assert_uint_eq(stored_in(0, 53), 0);
		ck_assert_uint_eq(stored_in(53, 100), 47);
	}
	close(fd);
	ck_assert_uint_eq(atomic_load(&l3->st->objects), 47);
	ck_assert_uint_eq(atomic_load(&l3->st->bytes), 47 * ob);
	sc_l3_close(l3);
}
END_TEST

/* A segmented candidate (a manifest) ends the walk: what its eviction frees depends on every other
 * manifest, so the eviction lists the store, and evicts it from there. */
START_TEST(a_segmented_candidate_makes_the_eviction_list)
{
	struct sc_l3 *l3 = open_segmented();
	uint64_t ob = aged_store(l3, 10);
	/* 200 KiB in four segments, last used between objects 0 and 1 */
	struct batch *seg = batch_of(1, (unsigned[]){ 50 }, (unsigned[]){ 50 }, 200 * 1024);
	ck_assert_int_eq(put_batch(l3, seg), 0);
	char rel[48], p[160];
	l3_obj_relpath(seg->loc[0].digest.lo, seg->loc[0].digest.hi, rel);
	snprintf(p, sizeof(p), "%s/objects/%s", tmpdir, rel);
	struct stat sb;
	ck_assert_int_eq(stat(paths[0], &sb), 0);
	struct timespec ts[2] = { { sb.st_mtim.tv_sec, 500000000 }, { sb.st_mtim.tv_sec, 500000000 } };
	ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
	unsigned long l0 = listings();
	ck_assert_int_eq(sc_l3_evict_to(l3, atomic_load(&l3->st->bytes) - ob), 1);
	ck_assert_uint_eq(listings() - l0, 1);
	ck_assert_uint_eq(stored(10), 0x3fe);
	ck_assert_int_eq(access(p, F_OK), 0);
	/* first in the order now: the next eviction lists, and it goes */
	ck_assert_int_eq(sc_l3_evict_to(l3, atomic_load(&l3->st->bytes) - 1), 1);
	ck_assert_uint_eq(listings() - l0, 2);
	ck_assert_int_eq(access(p, F_OK), -1);
	ck_assert_uint_eq(stored(10), 0x3fe);
	batch_free(seg);
	sc_l3_close(l3);
}
END_TEST

Suite *l3recon_suite(void)
{
	Suite *s = suite_create("l3recon");
	TCase *tc = tcase_create("steps");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, writer_killed_at_every_step_then_steps_clean_up, 0, (int)NPOINTS);
	tcase_add_test(tc, steps_find_every_leftover_within_a_round);
	tcase_add_test(tc, reconciler_killed_in_its_step);
	tcase_add_test(tc, janitor_pass_of_a_large_store_takes_a_step);
	tcase_add_test(tc, evictions_take_the_last_listing_order_without_listing);
	tcase_add_test(tc, an_eviction_with_no_order_makes_no_ring);
	tcase_add_loop_test(tc, an_order_walked_with_descriptor_0_free_evicts_the_same, 0, 2);
	tcase_add_test(tc, janitor_passes_over_the_budget_evict_without_listing);
	tcase_add_test(tc, evictions_walk_the_order_in_rounds_with_and_without_a_ring);
	tcase_add_test(tc, a_segmented_candidate_makes_the_eviction_list);
	suite_add_tcase(s, tc);
	tc = tcase_create("batch");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, put_many_acknowledges_each_put_as_put_would);
	tcase_add_test(tc, put_many_commits_a_batch_in_two_rounds_of_fsyncs);
	tcase_add_test(tc, puts_that_find_young_names_sync_their_directories);
	tcase_add_test(tc, a_rename_that_finds_the_name_taken_syncs_its_directory);
	tcase_add_test(tc, a_round_is_one_syncfs_only_when_every_file_is_on_the_store);
	tcase_add_test(tc, large_writes_start_their_writeback_piece_by_piece);
	tcase_add_test(tc, a_write_the_kernel_answers_with_0_bytes_fails_with_eio);
	tcase_add_test(tc, put_many_of_one_prefix_twice_keeps_the_later);
	tcase_add_test(tc, put_many_refuses_bad_input_and_writes_nothing);
	tcase_add_test(tc, put_many_puts_a_segmented_object_alone);
	tcase_add_test(tc, put_many_from_four_processes_at_once);
	tcase_add_loop_test(tc, put_many_writer_killed_at_every_step, 0, (int)NBATCH_POINTS);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(l3recon_suite)
