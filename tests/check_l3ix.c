/* tests/check_l3ix.c — the L3 location index in the arena and exact tokens on every hit:
 * coherence across processes (attached writers update the index before they return), changes by
 * processes not attached (visible within the refresh interval, at once after a miss), an object
 * vanishing under a fill, forced key collisions at the L2, index and L3 levels (the test build's
 * weakened key), a full index, a scribbled index region. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l3/l3.h"
#include "../shm/l3ix.h"

static char tmpdir[64];
static struct sc_arena *arena;
static const char *arena_name;
static struct sc_stage *stage;
static struct sc_l3 *l3; /* bound to the arena */

static void rm_tmp(void)
{
	sc_test_rm_tree(tmpdir);
	tmpdir[0] = 0;
}

static void open_all(uint32_t entries, uint32_t refresh_ms, uint32_t flags)
{
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/sc-ix-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	atexit(rm_tmp); /* a failed assertion exits the test process without the teardown */
	struct sc_arena_opts o = { .size_bytes = 64 << 20, .huge = SC_HUGE_OFF, .l3_index_entries = entries,
				   .l3_index_refresh_ms = refresh_ms, .flags = flags };
	arena = sc_test_arena_opts("l3ix", &o, &arena_name);
	ck_assert_int_eq(sc_stage_open(arena, "model", "state", &stage), 0);
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_bind_arena(l3, arena), 0);
}

static void close_all(void)
{
	sc_l3_close(l3);
	sc_stage_close(stage);
	sc_test_arena_destroy(arena, arena_name);
	rm_tmp();
}

static void toks_of(int32_t *t, uint32_t n, unsigned seed)
{
	for (uint32_t i = 0; i < n; i++)
		t[i] = (int32_t)(i * 7 + seed * 100003u);
}

static void bytes_of(uint8_t *p, size_t n, unsigned seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

#define PAY 8192

/* Put (tokens seeded @tseed, first @n of them) -> payload seeded @pseed through @h. */
static void put_with(struct sc_l3 *h, unsigned tseed, uint32_t n, unsigned pseed, struct sc_location *loc)
{
	int32_t *t = malloc(n * sizeof(*t));
	uint8_t *b = malloc(PAY);
	toks_of(t, n, tseed);
	bytes_of(b, PAY, pseed);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { PAY } };
	struct sc_l3_put_args a = { .ns = "ns", .tokens = t, .token_count = n, .payload = &pl };
	ck_assert_int_eq(sc_l3_put(h, &a, loc), 0);
	free(t);
	free(b);
}

/* Restore (tokens seeded @tseed, @n of them): the token count (or the error); on success the bytes
 * must be payload @pseed. *from_index tells who located it. */
static int restore_is(unsigned tseed, uint32_t n, unsigned pseed, int *from_index)
{
	int32_t *t = malloc(n * sizeof(*t));
	toks_of(t, n, tseed);
	struct sc_restore r;
	int rc = sc_restore(stage, l3, "ns", t, n, 0, &r);
	free(t);
	if (from_index)
		*from_index = r.from_index;
	if (rc < 0)
		return rc;
	uint8_t want[PAY];
	bytes_of(want, PAY, pseed);
	ck_assert_uint_eq(r.sec_len[0], PAY);
	ck_assert_msg(memcmp(r.sec[0], want, PAY) == 0, "restored bytes are not payload %u", pseed);
	sc_restore_release(&r);
	return rc;
}

/* Restore: the token count, checking the bytes are the payload put at that length (seed 21 at
 * 256 tokens, 22 at 768: not_attached_changes_visible_within_interval). */
static int restore_len(unsigned tseed, uint32_t n, int *from_index)
{
	int32_t *t = malloc(n * sizeof(*t));
	toks_of(t, n, tseed);
	struct sc_restore r;
	int rc = sc_restore(stage, l3, "ns", t, n, 0, &r);
	free(t);
	*from_index = r.from_index;
	if (rc < 0)
		return rc;
	uint8_t want[PAY];
	bytes_of(want, PAY, rc == 256 ? 21 : 22);
	ck_assert_msg(memcmp(r.sec[0], want, PAY) == 0, "restored bytes are not those put at %d tokens", rc);
	sc_restore_release(&r);
	return rc;
}

static struct sc_l3_index_stats ixstats(void)
{
	struct sc_l3_index_stats s;
	ck_assert_int_eq(sc_l3_index_stats(arena, &s), 0);
	return s;
}

/* Run @fn in a forked child with its own arena handle and L3 handle (bound when @bind). */
static void in_child(int bind, void (*fn)(struct sc_l3 *h, void *ctx), void *ctx)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *a = NULL;
		struct sc_l3 *h = NULL;
		if (sc_arena_open_dir("/dev/shm", arena_name, &a) || sc_l3_open(tmpdir, NULL, &h))
			_exit(2);
		if (bind && sc_l3_bind_arena(h, a))
			_exit(3);
		fn(h, ctx);
		sc_l3_close(h);
		sc_arena_close(a);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed: status %d", st);
}

struct put_ctx {
	unsigned tseed, pseed;
	uint32_t n;
};

static void child_put(struct sc_l3 *h, void *ctx)
{
	struct put_ctx *p = ctx;
	put_with(h, p->tseed, p->n, p->pseed, NULL);
}

static void child_evict_all(struct sc_l3 *h, void *ctx)
{
	(void)ctx;
	if (sc_l3_evict_to(h, 0) < 1)
		_exit(4);
}

static void child_corrupt_and_verify(struct sc_l3 *h, void *ctx)
{
	const struct sc_location *loc = ctx;
	char hex[33], path[256];
	l3_digest_hex(loc->digest.lo, loc->digest.hi, hex);
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s.sc3", tmpdir, hex, hex);
	int fd = open(path, O_RDWR);
	uint8_t b;
	if (fd < 0 || pread(fd, &b, 1, L3_HDR_BLOCK + 5) != 1)
		_exit(5);
	b ^= 0xff;
	if (pwrite(fd, &b, 1, L3_HDR_BLOCK + 5) != 1)
		_exit(6);
	close(fd);
	if (sc_l3_verify(h, NULL, NULL) != 1)
		_exit(7);
}

START_TEST(coherence_across_attached_processes)
{
	open_all(0, 600000, 0); /* nothing goes stale during the test: what we see comes from the writers */
	int fi;
	/* load the index's view of the (empty) directory */
	ck_assert_int_eq(restore_is(9, 512, 0, &fi), -ENOENT);
	ck_assert_int_eq(fi, 0); /* the first: the directory answers (and fills the index) */
	ck_assert_int_eq(restore_is(9, 512, 0, &fi), -ENOENT);
	ck_assert_int_eq(fi, 0); /* a miss is always the directory's to decide */
	/* another process puts: we see it at once, through the index (no directory probe) */
	struct put_ctx p = { 1, 11, 512 };
	in_child(1, child_put, &p);
	uint64_t fb = ixstats().fallbacks;
	ck_assert_int_eq(restore_is(1, 600, 11, &fi), 512);
	ck_assert_int_eq(fi, 1);
	ck_assert_int_eq(restore_is(1, 600, 11, &fi), 512); /* second fill: promoted to L2 */
	ck_assert_int_eq(restore_is(1, 600, 11, &fi), 512); /* served from L2 */
	ck_assert_uint_eq(ixstats().fallbacks, fb);
	/* another process evicts it: we miss at once (the L2 mirror is not served without it) */
	in_child(1, child_evict_all, NULL);
	ck_assert_uint_ge(ixstats().drops, 1);
	ck_assert_int_eq(restore_is(1, 600, 11, &fi), -ENOENT);
	/* put again with other bytes: the stale L2 mirror is not served, the new bytes are */
	p.pseed = 12;
	in_child(1, child_put, &p);
	ck_assert_int_eq(restore_is(1, 600, 12, &fi), 512);
	ck_assert_int_eq(fi, 1);
	ck_assert_int_eq(restore_is(1, 600, 12, &fi), 512);
	ck_assert_int_eq(restore_is(1, 600, 12, &fi), 512);
	/* another process quarantines it: we miss at once */
	struct sc_location loc;
	int32_t t[512];
	toks_of(t, 512, 1);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "ns", t, 512, &loc), 512);
	in_child(1, child_corrupt_and_verify, &loc);
	/* the verification failure is reported, once (never a plain miss), then it is one */
	ck_assert_int_eq(restore_is(1, 600, 12, &fi), -EBADMSG);
	ck_assert_int_eq(restore_is(1, 600, 12, &fi), -ENOENT);
	close_all();
}
END_TEST

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

START_TEST(not_attached_changes_visible_within_interval)
{
	const uint32_t refresh = 300;
	open_all(0, refresh, 0);
	int fi;
	struct put_ctx p = { 2, 21, 256 };
	in_child(0, child_put, &p); /* a process that never binds the arena */
	ck_assert_int_eq(restore_is(2, 1024, 21, &fi), 256); /* the first scans the directory */
	ck_assert_int_eq(restore_is(2, 1024, 21, &fi), 256);
	ck_assert_int_eq(fi, 1);
	/* a longer prefix, put without the arena: the index may say 256 until the interval ends,
	 * then the directory is looked at again and 768 is seen */
	p = (struct put_ctx){ 2, 22, 768 };
	in_child(0, child_put, &p);
	uint64_t t0 = now_ms(), seen_after = 0;
	while (now_ms() - t0 < 5 * refresh) {
		int rc = restore_len(2, 1024, &fi);
		ck_assert_msg(rc == 256 || rc == 768, "restore: %d", rc);
		if (rc == 768) {
			seen_after = now_ms() - t0;
			break;
		}
		usleep(10000);
	}
	ck_assert_msg(seen_after > 0, "the longer prefix was never seen");
	ck_assert_msg(seen_after <= refresh + 150, "seen after %llu ms (interval %u ms)", (unsigned long long)seen_after,
		      refresh);
	ck_assert_int_eq(restore_is(2, 1024, 22, &fi), 768);
	/* a prefix the index has never heard of: a miss, so the directory is asked at once */
	p = (struct put_ctx){ 3, 31, 256 };
	in_child(0, child_put, &p);
	uint64_t fb = ixstats().fallbacks;
	ck_assert_int_eq(restore_is(3, 300, 31, &fi), 256);
	if (!fi) /* (unless the interval just ended and the scan found it first) */
		ck_assert_uint_eq(ixstats().fallbacks, fb + 1);
	ck_assert_int_eq(restore_is(3, 300, 31, &fi), 256);
	ck_assert_int_eq(fi, 1);
	close_all();
}
END_TEST

/* Delete the object file of the next fill, between locate and read (schedule point). */
static char vanish_path[256];
static int vanished_done;
static void vanish_hook(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "restore.fill") && !vanished_done) {
		ck_assert_int_eq(unlink(vanish_path), 0);
		vanished_done = 1;
	}
}

START_TEST(object_vanishing_under_a_fill_is_a_miss)
{
	open_all(0, 600000, 0);
	struct sc_location loc;
	put_with(l3, 4, 256, 41, &loc);
	/* a mirror of the same bytes in another stage: it must go too */
	struct sc_stage *other;
	ck_assert_int_eq(sc_stage_open(arena, "model", "other-state", &other), 0);
	int32_t t[256];
	toks_of(t, 256, 4);
	uint8_t b[PAY];
	bytes_of(b, PAY, 41);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { PAY } };
	ck_assert_int_eq(sc_l2_admit(other, "ns", t, 256, loc.digest, &pl, SC_ORIGIN_FROM_L3), 0);
	char hex[33];
	l3_digest_hex(loc.digest.lo, loc.digest.hi, hex);
	snprintf(vanish_path, sizeof(vanish_path), "%s/objects/%.2s/%s.sc3", tmpdir, hex, hex);
	sc_sched_set(vanish_hook, NULL);
	int fi;
	ck_assert_int_eq(restore_is(4, 256, 41, &fi), -ENOENT); /* a miss, not an error */
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(vanished_done, 1);
	ck_assert_uint_ge(ixstats().vanished, 1);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(other, "ns", t, 256, NULL, &l), -ENOENT);
	/* and the index no longer names it */
	ck_assert_int_eq(restore_is(4, 256, 41, &fi), -ENOENT);
	sc_stage_close(other);
	close_all();
}
END_TEST

/* Keys weakened to 0 (any two prefixes of one length collide), the arena opened with @flags, and
 * prefix A (tokens @a, payload @pa) admitted to L2; @bt gets prefix B's tokens. */
static void colliding_prefixes(uint32_t flags, int32_t a[256], int32_t bt[256], uint8_t pa[PAY])
{
	sc_test_set_key_mask(0, 0);
	open_all(0, 600000, flags);
	toks_of(a, 256, 5);
	toks_of(bt, 256, 6);
	bytes_of(pa, PAY, 51);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pa }, .sec_len = { PAY } };
	ck_assert_int_eq(sc_l2_admit(stage, "ns", a, 256, sc_digest(pa, PAY), &pl, 0), 0);
}

/* The weakened key: every key at every level is 0, so any two prefixes of one length collide. */
START_TEST(forced_collisions_are_misses_at_every_level)
{
	int32_t a[256], bt[256];
	uint8_t pa[PAY];
	colliding_prefixes(0, a, bt, pa);
	/* L2 */
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(stage, "ns", bt, 256, NULL, &l), -ENOENT);
	ck_assert_uint_eq(ixstats().key_collisions_l2, 1);
	ck_assert_int_eq(sc_l2_get(stage, "ns", a, 256, NULL, &l), 0);
	ck_assert(memcmp(l.sec[0], pa, PAY) == 0);
	sc_lease_release(&l);
	/* L3: a handle not bound to the arena (only the directory) */
	struct sc_l3 *nb;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &nb), 0);
	struct sc_location loc;
	put_with(nb, 5, 256, 51, NULL);
	put_with(nb, 6, 256, 61, NULL); /* same prefix-entry file: B's now */
	struct sc_l3_stats s3;
	ck_assert_int_eq(sc_l3_stats(nb, &s3), 0);
	uint64_t c3 = s3.key_collisions;
	ck_assert_int_eq(sc_l3_locate_longest(nb, "ns", a, 256, &loc), 0);
	ck_assert_int_eq(sc_l3_stats(nb, &s3), 0);
	ck_assert_uint_eq(s3.key_collisions, c3 + 1);
	ck_assert_int_eq(sc_l3_locate_longest(nb, "ns", bt, 256, &loc), 256);
	uint8_t pb[PAY];
	bytes_of(pb, PAY, 61);
	ck_assert(sc_digest_equal(loc.digest, sc_digest(pb, PAY)));
	/* the index: A put through the bound handle (after a first locate loaded the index's view of
	 * the directory); looking B up collides there, then in L3 */
	ck_assert_int_eq(sc_l3_locate_longest(l3, "ns", a, 256, &loc), 0);
	put_with(l3, 5, 256, 51, NULL);
	/* that put replaced B's entry: the re-put journal drops the key from the index at the next
	 * locate, whose directory probe then writes A's entry back */
	ck_assert_int_eq(sc_l3_locate_longest(l3, "ns", a, 256, &loc), 256);
	struct sc_l3_index_stats s0 = ixstats();
	ck_assert_int_eq(sc_l3_locate_longest(l3, "ns", bt, 256, &loc), 0);
	struct sc_l3_index_stats s1 = ixstats();
	ck_assert_uint_eq(s1.key_collisions_index, s0.key_collisions_index + 1);
	ck_assert_uint_eq(s1.key_collisions_l3, s0.key_collisions_l3 + 1);
	/* restores: B is a miss (never A's state), A is A's */
	int fi;
	ck_assert_int_eq(restore_is(6, 256, 61, &fi), -ENOENT);
	ck_assert_int_eq(restore_is(5, 256, 51, &fi), 256);
	ck_assert_uint_ge(ixstats().key_collisions, 3);
	sc_l3_close(nb);
	close_all();
}
END_TEST

/* An index entry of another prefix under A's key names a durable copy that is not A's: A's own
 * mirror in L2 (its token ids checked) is not stale for that, and stays; the restore is decided
 * by the directory, and never serves B's bytes for A. */
START_TEST(a_colliding_index_entry_leaves_the_l2_mirror_alone)
{
	int32_t a[256], bt[256];
	uint8_t pa[PAY];
	colliding_prefixes(0, a, bt, pa);
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_locate_longest(l3, "ns", a, 256, &loc), 0); /* the index's view loaded */
	put_with(l3, 6, 256, 61, NULL);                                      /* B, indexed under key 0 */
	ck_assert_int_eq(sc_l3_locate_longest(l3, "ns", bt, 256, &loc), 256);
	int fi, rc = restore_is(5, 256, 51, &fi);
	ck_assert_msg(rc == -ENOENT || rc == 256, "restore of A: %d", rc);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(stage, "ns", a, 256, NULL, &l), 0);
	ck_assert(memcmp(l.sec[0], pa, PAY) == 0);
	sc_lease_release(&l);
	close_all();
}
END_TEST

/* A stale mirror is removed as the record the lookup found, never as whatever its key holds by
 * then: an entry of the new bytes that a worker admits under the key between the lookup and the
 * removal (an in-process hook at the schedule point between them, l3ix.tokens.compared) stays. */
static int readmitted;
static void readmit_hook(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "l3ix.tokens.compared") || readmitted++)
		return;
	int32_t t[256];
	uint8_t b[PAY];
	toks_of(t, 256, 3);
	bytes_of(b, PAY, 32);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { PAY } };
	ck_assert_int_eq(sc_l2_admit(stage, "ns", t, 256, sc_digest(b, PAY), &pl, SC_ORIGIN_DIRECT), 0);
}

START_TEST(a_stale_mirror_removal_spares_a_newer_entry)
{
	open_all(0, 600000, 0);
	int fi;
	put_with(l3, 3, 256, 31, NULL);
	for (int i = 0; i < 3; i++) /* filled, promoted, served from L2 */
		ck_assert_int_eq(restore_is(3, 256, 31, &fi), 256);
	in_child(1, child_evict_all, NULL);
	struct put_ctx p = { 3, 32, 256 };
	in_child(1, child_put, &p); /* the durable copy changes: the mirror (31) is stale */
	sc_sched_set(readmit_hook, NULL);
	int rc = restore_is(3, 256, 32, &fi);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(rc, 256);
	ck_assert_int_eq(fi, 1);
	ck_assert_int_ge(readmitted, 1);
	int32_t t[256];
	uint8_t want[PAY];
	toks_of(t, 256, 3);
	bytes_of(want, PAY, 32);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(stage, "ns", t, 256, NULL, &l), 0);
	ck_assert_msg(l.origin == SC_ORIGIN_DIRECT, "the worker's entry was removed (origin %u)", l.origin);
	ck_assert(memcmp(l.sec[0], want, PAY) == 0);
	sc_lease_release(&l);
	close_all();
}
END_TEST

/* What the per-arena option gives up: without token ids, the same collision serves A's state. */
START_TEST(without_verification_a_collision_serves_another_prefix)
{
	int32_t a[256], bt[256];
	uint8_t pa[PAY];
	colliding_prefixes(SC_ARENA_NO_TOKEN_VERIFY, a, bt, pa);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(stage, "ns", bt, 256, NULL, &l), 0);
	ck_assert(memcmp(l.sec[0], pa, PAY) == 0);
	sc_lease_release(&l);
	ck_assert_int_eq(ixstats().token_verify, 0);
	close_all();
}
END_TEST

/* Prefixes that differ in one token only (the first, token 200, the last): with the weakened key
 * they share every key, so only the compare of every token id tells them apart, at every level.
 * A compare of a part of the ids (bytes instead of ids, a shorter count) serves A's state for B. */
START_TEST(near_collisions_differing_in_one_token_are_misses_at_every_level)
{
	static const uint32_t at[] = { 0, 200, 255 };
	int32_t a[256], bt[256];
	uint8_t pa[PAY], pb[PAY];
	colliding_prefixes(0, a, bt, pa);
	bytes_of(pb, PAY, 62);
	struct sc_l3 *nb;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &nb), 0);
	put_with(nb, 5, 256, 51, NULL); /* A in L3 (the unbound handle: the directory only) */
	for (unsigned k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		memcpy(bt, a, sizeof(bt));
		bt[at[k]] ^= 0x10000; /* one id, in its third byte */
		/* L2: get, get_copy, peek, longest prefix */
		struct sc_lease l;
		ck_assert_msg(sc_l2_get(stage, "ns", bt, 256, NULL, &l) == -ENOENT, "L2 served A for B (token %u)", at[k]);
		uint8_t buf[PAY];
		ck_assert_int_eq(sc_l2_get_copy(stage, "ns", bt, 256, NULL, buf, sizeof(buf), NULL), -ENOENT);
		struct sc_l2_entry_info info;
		ck_assert_int_eq(sc_l2_peek(stage, "ns", bt, 256, &info), -ENOENT);
		uint32_t len = 0;
		ck_assert_int_eq(sc_l2_longest_prefix(stage, "ns", bt, 256, 256, &len, &l), -ENOENT);
		/* A is still A's, and still there */
		ck_assert_int_eq(sc_l2_get(stage, "ns", a, 256, NULL, &l), 0);
		ck_assert(memcmp(l.sec[0], pa, PAY) == 0);
		sc_lease_release(&l);
		/* L3, the directory: B is not A */
		struct sc_location loc;
		ck_assert_msg(sc_l3_locate_longest(nb, "ns", bt, 256, &loc) == 0, "L3 located A for B (token %u)", at[k]);
		/* the index (bound handle): B is not A either, and a restore of B is a miss */
		ck_assert_int_eq(sc_l3_locate_longest(l3, "ns", a, 256, &loc), 256);
		ck_assert_msg(sc_l3_locate_longest(l3, "ns", bt, 256, &loc) == 0, "the index located A for B (token %u)",
			      at[k]);
		int fi;
		ck_assert_int_eq(restore_is(5, 256, 51, &fi), 256);
		int32_t save[256];
		memcpy(save, a, sizeof(save));
		struct sc_restore r;
		int rc = sc_restore(stage, l3, "ns", bt, 256, 0, &r);
		if (rc >= 0)
			sc_restore_release(&r);
		ck_assert_msg(rc == -ENOENT, "restore of B returned %d (token %u)", rc, at[k]);
		ck_assert(memcmp(save, a, sizeof(save)) == 0);
	}
	/* B put with A's very payload (one object, one digest) through the unbound handle: B's prefix
	 * entry must name B's ids, not be taken for A's already there */
	for (unsigned k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		memcpy(bt, a, sizeof(bt));
		bt[at[k]] ^= 0x10000;
		struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pa }, .sec_len = { PAY } };
		struct sc_l3_put_args pa3 = { .ns = "ns", .tokens = bt, .token_count = 256, .payload = &pl };
		struct sc_location lb;
		ck_assert_int_eq(sc_l3_put(nb, &pa3, &lb), 0);
		ck_assert_msg(sc_l3_locate_longest(nb, "ns", bt, 256, &lb) == 256,
			      "B put with A's payload is not found (token %u)", at[k]);
		ck_assert_int_eq(sc_l3_locate_longest(nb, "ns", a, 256, &lb), 0); /* one entry per key: B's */
		put_with(nb, 5, 256, 51, NULL); /* A's again */
	}
	/* and B put through the bound handle (the index has both, at one key): each is its own */
	for (unsigned k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		memcpy(bt, a, sizeof(bt));
		bt[at[k]] ^= 0x10000;
		struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pb }, .sec_len = { PAY } };
		struct sc_l3_put_args pa3 = { .ns = "ns", .tokens = bt, .token_count = 256, .payload = &pl };
		struct sc_location lb, la;
		ck_assert_int_eq(sc_l3_put(l3, &pa3, &lb), 0);
		ck_assert_int_eq(sc_l3_locate_longest(l3, "ns", bt, 256, &lb), 256);
		ck_assert(sc_digest_equal(lb.digest, sc_digest(pb, PAY)));
		int rc = sc_l3_locate_longest(l3, "ns", a, 256, &la);
		ck_assert_msg(rc == 0 || (rc == 256 && sc_digest_equal(la.digest, sc_digest(pa, PAY))),
			      "A located as B's object (token %u)", at[k]);
		struct sc_restore r;
		ck_assert_int_eq(sc_restore(stage, l3, "ns", bt, 256, 0, &r), 256);
		ck_assert_msg(memcmp(r.sec[0], pb, PAY) == 0, "restore of B served other bytes (token %u)", at[k]);
		sc_restore_release(&r);
	}
	sc_l3_close(nb);
	close_all();
}
END_TEST

START_TEST(full_index_falls_back_and_stays_correct)
{
	open_all(64, 600000, 0); /* 64 entries, 256 token pages: 1024-token prefixes fit 64 at most */
	enum { N = 150 };
	for (unsigned i = 0; i < N; i++)
		put_with(l3, 100 + i, 1024, 1000 + i, NULL);
	for (int round = 0; round < 3; round++)
		for (unsigned i = 0; i < N; i++) {
			unsigned k = (i * 37 + (unsigned)round * 11) % N;
			int fi;
			ck_assert_int_eq(restore_is(100 + k, 1500, 1000 + k, &fi), 1024);
		}
	struct sc_l3_index_stats s = ixstats();
	ck_assert_uint_eq(s.capacity, 64);
	ck_assert_uint_gt(s.evictions, 0);
	ck_assert_uint_gt(s.hits, 0);
	ck_assert_uint_gt(s.fallbacks, 0);
	ck_assert_uint_le(s.positive + s.negative, 64);
	close_all();
}
END_TEST

START_TEST(scribbled_index_region_never_serves_wrong_bytes)
{
	open_all(0, 600000, 0);
	for (unsigned i = 0; i < 20; i++)
		put_with(l3, 200 + i, 512, 2000 + i, NULL);
	int fi;
	for (unsigned i = 0; i < 20; i++)
		ck_assert_int_eq(restore_is(200 + i, 700, 2000 + i, &fi), 512);
	/* scribble everything but the header's format words: lengths, entries, links, pages */
	uint64_t size;
	uint8_t *r = shm_region(arena->shm, SHM_REGION_L3IX, &size);
	uint64_t x = 88172645463325252ull;
	for (int pass = 0; pass < 3; pass++) {
		for (uint64_t o = 4096; o + 8 <= size; o += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			if (pass == 0 || (x & 3) == 0)
				memcpy(r + o, &x, 8);
		}
		/* and keys that match, with hostile fields: copy real keys back into garbage entries */
		for (unsigned i = 0; i < 20; i++) {
			int rc = restore_is(200 + i, 700, 2000 + i, &fi);
			/* a scribbled index may cost a miss; it never serves other bytes (restore_is
			 * checks them) and never crashes */
			ck_assert_msg(rc == 512 || rc == -ENOENT || rc == -EBADMSG, "restore %u after scribbling: %d", i, rc);
		}
	}
	/* the header's format words: the index is refused, restores still work (directory) */
	memset(r, 0xa5, 64);
	arena->l3ix_ready = 0;
	for (unsigned i = 0; i < 20; i++)
		ck_assert_int_eq(restore_is(200 + i, 700, 2000 + i, &fi), 512);
	close_all();
}
END_TEST

START_TEST(bad_pfx_files_are_refused)
{
	open_all(0, 600000, 0);
	struct sc_location loc;
	put_with(l3, 7, 256, 71, &loc);
	char hex[33], path[256];
	l3_digest_hex(loc.prefix.lo, loc.prefix.hi, hex);
	snprintf(path, sizeof(path), "%s/prefix/%.2s/%s.pfx", tmpdir, hex, hex);
	/* a flipped token id: the entry's check fails (corrupted), never another prefix */
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	int32_t v;
	ck_assert_int_eq(pread(fd, &v, 4, 64 + 100 * 4), 4);
	v ^= 1;
	ck_assert_int_eq(pwrite(fd, &v, 4, 64 + 100 * 4), 4);
	close(fd);
	struct sc_l3 *nb;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &nb), 0);
	int32_t t[256];
	toks_of(t, 256, 7);
	ck_assert_int_eq(sc_l3_locate_longest(nb, "ns", t, 256, &loc), 0);
	/* truncated: refused too */
	put_with(nb, 7, 256, 71, &loc);
	ck_assert_int_eq(truncate(path, 64 + 10), 0);
	ck_assert_int_eq(sc_l3_locate_longest(nb, "ns", t, 256, &loc), 0);
	sc_l3_close(nb);
	close_all();
}
END_TEST

/* Schedule point hook of the parked process: tell the parent, wait for its go. */
static int park_to_parent = -1, park_from_parent = -1;
static void park_hook(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "l3ix.refresh.read"))
		return;
	char c = 'p';
	if (write(park_to_parent, &c, 1) != 1 || read(park_from_parent, &c, 1) != 1)
		_exit(9);
}

/* The window between a refresh's directory read and its write into the index: an attached put
 * of a new digest lands there; the older view must not overwrite it. */
/* The index entry of the 256-token prefix of seed @tseed (put by this test): 1 with its snapshot. */
static int find_indexed(unsigned tseed, struct shm_l3ix *ix, struct shm_l3ix_snap *snap)
{
	ck_assert_int_eq(shm_l3ix_view(arena->shm, ix), 0);
	int32_t t[256];
	toks_of(t, 256, tseed);
	struct sc_key key;
	uint32_t len = 256;
	ck_assert_int_eq(key_pfx_hashes(arena->shm->hv.key_secret, "ns", t, 256, &len, 1, &key), 0);
	int eq;
	return shm_l3ix_find(ix, key.lo, key.hi, 256, NULL, 0, &eq, snap);
}

/* A token comparison that a writer overlaps is discarded: the entry changes between the
 * comparison and its validation (an in-process hook at the schedule point between them clears
 * it), and the answer is -EAGAIN, never the comparison of pages that may have been rewritten. */
static struct shm_l3ix *overlap_ix;
static uint32_t overlap_idx;
static int overlapped;
static void overlap_hook(const char *point, void *ctx)
{
	(void)ctx;
	if (strcmp(point, "l3ix.tokens.compared") || overlapped)
		return;
	overlapped = 1;
	ck_assert_int_eq(shm_l3ix_lock(overlap_ix), 0);
	shm_l3ix_clear_locked(overlap_ix, overlap_idx);
	shm_l3ix_unlock(overlap_ix);
}

START_TEST(a_token_comparison_a_writer_overlaps_is_discarded)
{
	open_all(64, 600000, 0);
	struct sc_location loc;
	put_with(l3, 8, 256, 81, &loc);
	struct shm_l3ix ix;
	struct shm_l3ix_snap snap;
	ck_assert_int_eq(find_indexed(8, &ix, &snap), 1);
	int32_t t[256], other[256];
	toks_of(t, 256, 8);
	memcpy(other, t, sizeof(t));
	other[200] ^= 1;
	ck_assert_int_eq(shm_l3ix_tokens_equal(&ix, &snap, t), 1);
	ck_assert_int_eq(shm_l3ix_tokens_equal(&ix, &snap, other), 0);
	overlap_ix = &ix;
	overlap_idx = snap.idx;
	sc_sched_set(overlap_hook, NULL);
	int rc = shm_l3ix_tokens_equal(&ix, &snap, t);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(overlapped, 1);
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_int_eq(shm_l3ix_tokens_equal(&ix, &snap, t), -EAGAIN); /* and from then on */
	close_all();
}
END_TEST

START_TEST(refresh_never_puts_an_older_view_back)
{
	open_all(64, 600000, 0); /* small: the directory below outgrows it, so lookups miss and refresh */
	for (unsigned i = 0; i < 40; i++) {
		struct put_ctx q = { 400 + i, 4000 + i, 256 };
		in_child(0, child_put, &q);
	}
	struct put_ctx p1 = { 8, 81, 256 };
	in_child(0, child_put, &p1); /* D1, by a process not attached */
	int up[2], down[2];
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *a;
		struct sc_l3 *h;
		if (sc_arena_open_dir("/dev/shm", arena_name, &a) || sc_l3_open(tmpdir, NULL, &h) || sc_l3_bind_arena(h, a))
			_exit(2);
		park_to_parent = up[1], park_from_parent = down[0];
		sc_sched_set(park_hook, NULL);
		int32_t t[256];
		toks_of(t, 256, 8);
		struct sc_location loc;
		int rc = sc_l3_locate_longest(h, "ns", t, 256, &loc); /* a miss: the directory, then park */
		_exit(rc == 256 ? 0 : 3);
	}
	char c;
	ck_assert_int_eq(read(up[0], &c, 1), 1); /* parked, having read D1 from the directory */
	struct sc_location l2loc;
	put_with(l3, 8, 256, 82, &l2loc); /* D2, attached: into the index now */
	ck_assert_int_eq(write(down[1], "g", 1), 1);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the parked process failed: %d", st);
	/* the index still says D2 */
	struct shm_l3ix ix;
	struct shm_l3ix_snap snap;
	ck_assert_int_eq(find_indexed(8, &ix, &snap), 1);
	ck_assert(snap.e.digest_lo == l2loc.digest.lo && snap.e.digest_hi == l2loc.digest.hi);
	int fi;
	ck_assert_int_eq(restore_is(8, 256, 82, &fi), 256);
	close(up[0]), close(up[1]), close(down[0]), close(down[1]);
	close_all();
}
END_TEST

static void count_finding(const char *component, const char *message, int repaired, void *ctx)
{
	(void)message, (void)repaired;
	if (!strcmp(component, "l3index"))
		++*(int *)ctx;
}

START_TEST(fsck_finds_and_repairs_a_broken_index)
{
	open_all(0, 600000, 0);
	for (unsigned i = 0; i < 10; i++)
		put_with(l3, 300 + i, 512, 3000 + i, NULL);
	int fi, found = 0;
	for (unsigned i = 0; i < 10; i++)
		ck_assert_int_eq(restore_is(300 + i, 600, 3000 + i, &fi), 512);
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 0);
	ck_assert_int_eq(found, 0);
	/* a used page put on the free list too, and an entry left half-written */
	struct shm_l3ix ix;
	ck_assert_int_eq(shm_l3ix_view(arena->shm, &ix), 0);
	uint32_t victim = UINT32_MAX;
	for (uint32_t i = 0; i < ix.nsets * SHM_L3IX_WAYS && victim == UINT32_MAX; i++)
		if (ix.ent[i].flags & SHM_L3IX_TOKENS)
			victim = i;
	ck_assert_uint_ne(victim, UINT32_MAX);
	ix.links[ix.ent[victim].first_page - 1] = ix.hdr->free_head;
	ix.hdr->free_head = ix.ent[victim].first_page;
	ix.hdr->free_pages++;
	atomic_fetch_add(&ix.ent[(victim + 1) % (ix.nsets * SHM_L3IX_WAYS)].seq, 1);
	ck_assert_int_gt(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 0);
	ck_assert_int_gt(found, 0);
	found = 0;
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_REPAIR, count_finding, &found, &rep), 0);
	ck_assert_int_gt(found, 0);
	found = 0;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 0);
	ck_assert_int_eq(found, 0);
	/* and the index still answers right (what repair cleared is asked of the directory again) */
	for (unsigned i = 0; i < 10; i++)
		ck_assert_int_eq(restore_is(300 + i, 600, 3000 + i, &fi), 512);
	close_all();
}
END_TEST

/* The token pages' free list of a fresh index (every page free), its last page linked back to the
 * first: a cycle as long as the list can be, found by fsck (the walk goes one page past the count)
 * and repaired; the index then answers right. */
START_TEST(fsck_finds_a_cycle_through_every_free_token_page)
{
	open_all(0, 600000, 0);
	struct shm_l3ix ix;
	ck_assert_int_eq(shm_l3ix_view(arena->shm, &ix), 0);
	ck_assert_uint_eq(ix.hdr->free_pages, ix.npages);
	uint32_t last = ix.hdr->free_head, k = 1;
	while (ix.links[last - 1])
		last = ix.links[last - 1], k++;
	ck_assert_uint_eq(k, ix.npages);
	ix.links[last - 1] = ix.hdr->free_head;
	int found = 0;
	struct sc_fsck_report rep;
	ck_assert_int_gt(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 0);
	ck_assert_int_eq(found, 1);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_uint_eq(ix.links[last - 1], 0);
	found = 0;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 0);
	put_with(l3, 500, 512, 5000, NULL);
	int fi;
	ck_assert_int_eq(restore_is(500, 600, 5000, &fi), 512);
	close_all();
}
END_TEST

/* The last token page (numbered npages, the bound of every page check) holding an entry's token
 * ids: the free list reordered to hand it out first, then a prefix stored and located. fsck finds
 * the index consistent. */
START_TEST(fsck_accepts_the_last_token_page_in_use)
{
	open_all(0, 600000, 0);
	int fi;
	put_with(l3, 100, 512, 6100, NULL); /* the index in use (bound, synced) */
	ck_assert_int_eq(restore_is(100, 600, 6100, &fi), 512);
	struct shm_l3ix ix;
	ck_assert_int_eq(shm_l3ix_view(arena->shm, &ix), 0);
	uint32_t head = ix.hdr->free_head, before_last = 0, last = head;
	while (ix.links[last - 1])
		before_last = last, last = ix.links[last - 1];
	ck_assert_uint_eq(last, ix.npages);
	ck_assert_uint_ne(before_last, 0);
	ix.links[before_last - 1] = 0; /* the same pages, the last one first */
	ix.links[last - 1] = head;
	ix.hdr->free_head = last;
	int found = 0;
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 0);
	put_with(l3, 600, 512, 6000, NULL);
	ck_assert_int_eq(restore_is(600, 600, 6000, &fi), 512); /* located: the index keeps its token ids */
	uint32_t total = ix.nsets * SHM_L3IX_WAYS, on_last = 0;
	for (uint32_t i = 0; i < total; i++)
		on_last += (ix.ent[i].flags & SHM_L3IX_TOKENS) && ix.ent[i].first_page == last;
	ck_assert_uint_eq(on_last, 1);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_DEEP, count_finding, &found, &rep), 0);
	ck_assert_int_eq(found, 0);
	close_all();
}
END_TEST

/* Documents 400.. 400 + @n - 1 (512 tokens, payload seeds 4000..) put, and each restored once
 * (the index learns them). */
static void indexed_docs(unsigned n)
{
	int fi;
	for (unsigned i = 0; i < n; i++)
		put_with(l3, 400 + i, 512, 4000 + i, NULL);
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(restore_is(400 + i, 600, 4000 + i, &fi), 512);
}

/* Entries of @ix that hold token ids. */
static uint32_t token_entries(const struct shm_l3ix *ix)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < ix->nsets * SHM_L3IX_WAYS; i++)
		n += (ix->ent[i].flags & SHM_L3IX_TOKENS) != 0;
	return n;
}

/* The first positive entry of @ix at or after @from (there is one). */
static uint32_t positive_from(const struct shm_l3ix *ix, uint32_t from)
{
	uint32_t total = ix->nsets * SHM_L3IX_WAYS, i = from;
	while (i < total && !(ix->ent[i].flags & SHM_L3IX_POS))
		i++;
	ck_assert_uint_lt(i, total);
	return i;
}

/* Issue 12's converge property over the location index: entries with flags no writer sets, and
 * a scribbled index header, are repaired in one fsck --repair (never left to declare the arena
 * unrepairable), and the index answers right afterwards. */
START_TEST(regression_fsck_repair_converges_over_index_scribble)
{
	open_all(0, 600000, 0);
	indexed_docs(6);
	int fi, found = 0;
	struct shm_l3ix ix;
	ck_assert_int_eq(shm_l3ix_view(arena->shm, &ix), 0);
	uint32_t total = ix.nsets * SHM_L3IX_WAYS, hit = 0;
	for (uint32_t i = 0; i < total && hit < 2; i++)
		if (ix.ent[i].flags & SHM_L3IX_POS)
			ix.ent[i].flags |= hit++ ? 0xf0u : SHM_L3IX_NEG; /* garbage bits; positive and negative */
	ck_assert_uint_eq(hit, 2);
	struct sc_fsck_report rep;
	ck_assert_int_gt(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 0);
	ck_assert_int_gt(found, 0);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	found = 0;
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_DEEP, count_finding, &found, &rep), 0);
	ck_assert_int_eq(found, 0);
	for (unsigned i = 0; i < 6; i++)
		ck_assert_int_eq(restore_is(400 + i, 600, 4000 + i, &fi), 512);
	/* the header: formatted anew (empty), then clean, and the directory answers */
	ix.hdr->magic ^= 0x5a5a;
	ck_assert_int_gt(sc_arena_fsck(arena, 0, NULL, NULL, &rep), 0);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	for (uint32_t i = 0; i < total; i++) /* empty: every token page is free now */
		ck_assert_msg(!ix.ent[i].flags, "entry %u kept by the new format", i);
	ck_assert_uint_eq(ix.hdr->free_pages, ix.npages);
	for (unsigned i = 0; i < 6; i++)
		ck_assert_int_eq(restore_is(400 + i, 600, 4000 + i, &fi), 512);
	close_all();
}
END_TEST

/* One entry broken at a time (a writer's odd sequence left behind, a flag no writer sets, both
 * positive and negative, a token chain that starts at page 0, far past the last page, or on
 * another entry's page): each
 * alone is one inconsistency; the repair clears that entry, and only it, and the directory answers
 * for it again. Case 5: an arena without token ids, whose entries have no chain: nothing to find. */
START_TEST(fsck_finds_each_broken_index_entry_alone)
{
	for (int k = 0; k < 7; k++) {
		open_all(0, 600000, k == 5 ? SC_ARENA_NO_TOKEN_VERIFY : 0);
		indexed_docs(4);
		int fi, found = 0;
		struct shm_l3ix ix;
		ck_assert_int_eq(shm_l3ix_view(arena->shm, &ix), 0);
		uint32_t i = positive_from(&ix, 0), broken = i, with_tokens = token_entries(&ix);
		if (k == 0)
			atomic_fetch_add(&ix.ent[i].seq, 1);
		else if (k <= 2)
			ix.ent[i].flags |= k == 1 ? 0x100u : SHM_L3IX_NEG;
		else if (k <= 4)
			ix.ent[i].first_page = k == 3 ? 0 : UINT32_MAX;
		else if (k == 6) {
			uint32_t o = positive_from(&ix, i + 1);
			ix.ent[o].first_page = ix.ent[i].first_page; /* the later one is the broken one */
			broken = o;
		}
		struct sc_fsck_report rep;
		if (k == 5) {
			ck_assert_uint_eq(ix.ent[i].flags & SHM_L3IX_TOKENS, 0);
			ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_DEEP, count_finding, &found, &rep), 0);
			ck_assert_int_eq(found, 0);
			close_all();
			continue;
		}
		ck_assert_uint_ne(ix.ent[broken].flags & SHM_L3IX_TOKENS, 0);
		ck_assert_int_eq(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 1);
		ck_assert_int_eq(found, 1);
		ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
		ck_assert_uint_eq(rep.repaired, 1);
		ck_assert_uint_eq(ix.ent[broken].flags, 0);
		/* only that entry went: the others' chains (two whole pages each: 512 tokens) are kept */
		ck_assert_uint_eq(token_entries(&ix), with_tokens - 1);
		ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
		for (unsigned j = 0; j < 4; j++)
			ck_assert_int_eq(restore_is(400 + j, 600, 4000 + j, &fi), 512);
		close_all();
	}
}
END_TEST

/* The token pages' free list in another order (1, 3, 2, 4, ...: every free page once, as frees in
 * another order leave it) is as consistent as the formatted one: fsck finds nothing, and the pages
 * serve puts and restores. */
START_TEST(fsck_accepts_a_free_list_in_any_order)
{
	open_all(0, 600000, 0);
	struct shm_l3ix ix;
	ck_assert_int_eq(shm_l3ix_view(arena->shm, &ix), 0);
	ck_assert_uint_ge(ix.npages, 4);
	ck_assert_uint_eq(ix.hdr->free_head, 1);
	ck_assert_uint_eq(ix.hdr->free_pages, ix.npages);
	ck_assert_uint_eq(ix.links[0], 2);
	ix.links[0] = 3, ix.links[2] = 2, ix.links[1] = 4;
	struct sc_fsck_report rep;
	int found = 0;
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_DEEP, count_finding, &found, &rep), 0);
	ck_assert_int_eq(found, 0);
	indexed_docs(4);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_DEEP, count_finding, &found, &rep), 0);
	close_all();
}
END_TEST

/* The free list made to start at an entry's only token page, in place of the free page it skips
 * (the count unchanged): a page both used and free is one finding; the repair rebuilds the list
 * and the entry's tokens still prove its restores. Then a head far past the last page. */
START_TEST(fsck_finds_a_used_page_on_the_free_list)
{
	open_all(0, 600000, 0);
	put_with(l3, 400, 200, 4000, NULL);
	struct shm_l3ix ix;
	ck_assert_int_eq(shm_l3ix_view(arena->shm, &ix), 0);
	uint32_t p = ix.ent[positive_from(&ix, 0)].first_page, head = ix.hdr->free_head;
	ck_assert(p && head && p != head);
	ix.links[p - 1] = ix.links[head - 1]; /* (one page: its own link is never followed) */
	ix.hdr->free_head = p;
	struct sc_fsck_report rep;
	int found = 0, fi;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 1);
	ck_assert_int_eq(found, 1);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	ck_assert_int_eq(restore_is(400, 300, 4000, &fi), 200);
	/* a head far past the last page: one finding, never read through */
	ix.hdr->free_head = UINT32_MAX;
	found = 0;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, count_finding, &found, &rep), 1);
	ck_assert_int_eq(found, 1);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_REPAIR, NULL, NULL, &rep), 0);
	ck_assert_uint_le(ix.hdr->free_head, ix.npages);
	for (unsigned k = 1; k < 4; k++)
		put_with(l3, 400 + k, 512, 4000 + k, NULL);
	for (unsigned k = 1; k < 4; k++)
		ck_assert_int_eq(restore_is(400 + k, 600, 4000 + k, &fi), 512);
	ck_assert_int_eq(sc_arena_fsck(arena, SC_FSCK_DEEP, NULL, NULL, &rep), 0);
	close_all();
}
END_TEST

/* Binding and locating refuse bad input with -EINVAL and change nothing; a namespace of exactly
 * SC_L3_STR_MAX bytes is a namespace like any other. */
START_TEST(bind_and_locate_refuse_bad_input)
{
	open_all(0, 0, 0);
	ck_assert_int_eq(sc_l3_bind_arena(NULL, arena), -EINVAL);
	ck_assert_int_eq(sc_l3_bind_arena(l3, NULL), -EINVAL);
	static char longest[SC_L3_STR_MAX + 2];
	memset(longest, 'n', SC_L3_STR_MAX + 1);
	int32_t t[64];
	toks_of(t, 64, 3);
	uint8_t b[4096];
	bytes_of(b, sizeof(b), 3);
	longest[SC_L3_STR_MAX] = 0; /* SC_L3_STR_MAX bytes: stored and found */
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { sizeof(b) } };
	struct sc_l3_put_args a = { .ns = longest, .tokens = t, .token_count = 64, .payload = &pl };
	struct sc_location put, loc;
	ck_assert_int_eq(sc_l3_put(l3, &a, &put), 0);
	memset(&loc, 0x5a, sizeof(loc));
	struct sc_location untouched = loc;
	ck_assert_int_eq(sc_l3_locate_longest(NULL, longest, t, 64, &loc), -EINVAL);
	ck_assert_int_eq(sc_l3_locate_longest(l3, longest, NULL, 64, &loc), -EINVAL);
	ck_assert_int_eq(sc_l3_locate_longest(l3, longest, t, 0, &loc), -EINVAL);
	ck_assert_int_eq(sc_l3_locate_longest(l3, longest, t, 64, NULL), -EINVAL);
	ck_assert_int_eq(memcmp(&loc, &untouched, sizeof(loc)), 0);
	longest[SC_L3_STR_MAX] = 'n'; /* one byte more: refused, whether stored or not */
	ck_assert_int_eq(sc_l3_locate_longest(l3, longest, t, 64, &loc), -EINVAL);
	ck_assert_int_eq(memcmp(&loc, &untouched, sizeof(loc)), 0);
	longest[SC_L3_STR_MAX] = 0;
	ck_assert_int_eq(sc_l3_locate_longest(l3, longest, t, 64, &loc), 64);
	ck_assert(sc_digest_equal(loc.digest, put.digest));
	/* the same through a handle that is not bound (the directory answers) */
	struct sc_l3 *plain;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &plain), 0);
	ck_assert_int_eq(sc_l3_locate_longest(plain, longest, NULL, 64, &loc), -EINVAL);
	ck_assert_int_eq(sc_l3_locate_longest(plain, longest, t, 0, &loc), -EINVAL);
	ck_assert_int_eq(sc_l3_locate_longest(plain, longest, t, 64, NULL), -EINVAL);
	longest[SC_L3_STR_MAX] = 'n';
	ck_assert_int_eq(sc_l3_locate_longest(plain, longest, t, 64, &loc), -EINVAL);
	longest[SC_L3_STR_MAX] = 0;
	ck_assert_int_eq(sc_l3_locate_longest(plain, longest, t, 64, &loc), 64);
	ck_assert(sc_digest_equal(loc.digest, put.digest));
	sc_l3_close(plain);
	close_all();
}
END_TEST

/* Binding a second store whose open changed its own directory (a quarantine) to an arena whose
 * index serves another store leaves that index alone: the first store's prefixes are still
 * answered by it, without a directory probe or scan (entries are trusted for 60 s here, so
 * only an invalidation would make one). */
START_TEST(binding_another_store_keeps_the_index)
{
	open_all(0, 60000, 0);
	struct sc_location loc;
	put_with(l3, 5, 64, 5, &loc);
	int fi = 0;
	ck_assert_int_eq(restore_is(5, 64, 5, &fi), 64);
	ck_assert_int_eq(fi, 1);
	/* store B: one object, its header damaged, so that B's next open quarantines it */
	char other[80];
	snprintf(other, sizeof(other), "%s-b", tmpdir);
	struct sc_l3 *b;
	ck_assert_int_eq(sc_l3_open(other, NULL, &b), 0);
	struct sc_location bl;
	put_with(b, 6, 64, 6, &bl);
	sc_l3_close(b);
	char rel[48], path[200];
	l3_obj_relpath(bl.digest.lo, bl.digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", other, rel);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t x = 0xff;
	ck_assert_int_eq(pwrite(fd, &x, 1, 20), 1);
	close(fd);
	ck_assert_int_eq(sc_l3_open(other, NULL, &b), 0);
	ck_assert_int_eq(access(path, F_OK), -1); /* quarantined by this open */
	struct sc_l3_index_stats s0 = ixstats();
	ck_assert_int_eq(sc_l3_bind_arena(b, arena), 0);
	ck_assert_int_eq(restore_is(5, 64, 5, &fi), 64);
	ck_assert_int_eq(fi, 1);
	struct sc_l3_index_stats s1 = ixstats();
	ck_assert_uint_eq(s1.hits, s0.hits + 1);
	ck_assert_uint_eq(s1.fallbacks, s0.fallbacks);
	ck_assert_uint_eq(s1.stale, s0.stale);
	ck_assert_uint_eq(s1.refreshes, s0.refreshes); /* nor a directory scan: nothing was invalidated */
	sc_l3_close(b);
	sc_test_rm_tree(other);
	close_all();
}
END_TEST

Suite *l3ix_suite(void)
{
	Suite *s = suite_create("l3ix");
	TCase *c = tcase_create("coherence");
	tcase_set_timeout(c, 120);
	tcase_add_test(c, coherence_across_attached_processes);
	tcase_add_test(c, not_attached_changes_visible_within_interval);
	tcase_add_test(c, object_vanishing_under_a_fill_is_a_miss);
	tcase_add_test(c, refresh_never_puts_an_older_view_back);
	tcase_add_test(c, a_token_comparison_a_writer_overlaps_is_discarded);
	suite_add_tcase(s, c);
	c = tcase_create("collisions");
	tcase_set_timeout(c, 120);
	tcase_add_test(c, forced_collisions_are_misses_at_every_level);
	tcase_add_test(c, a_colliding_index_entry_leaves_the_l2_mirror_alone);
	tcase_add_test(c, a_stale_mirror_removal_spares_a_newer_entry);
	tcase_add_test(c, without_verification_a_collision_serves_another_prefix);
	tcase_add_test(c, near_collisions_differing_in_one_token_are_misses_at_every_level);
	suite_add_tcase(s, c);
	c = tcase_create("bounds");
	tcase_set_timeout(c, 120);
	tcase_add_test(c, full_index_falls_back_and_stays_correct);
	tcase_add_test(c, scribbled_index_region_never_serves_wrong_bytes);
	tcase_add_test(c, bad_pfx_files_are_refused);
	tcase_add_test(c, bind_and_locate_refuse_bad_input);
	tcase_add_test(c, binding_another_store_keeps_the_index);
	tcase_add_test(c, fsck_finds_and_repairs_a_broken_index);
	tcase_add_test(c, fsck_finds_a_cycle_through_every_free_token_page);
	tcase_add_test(c, fsck_accepts_the_last_token_page_in_use);
	tcase_add_test(c, regression_fsck_repair_converges_over_index_scribble);
	tcase_add_test(c, fsck_finds_each_broken_index_entry_alone);
	tcase_add_test(c, fsck_accepts_a_free_list_in_any_order);
	tcase_add_test(c, fsck_finds_a_used_page_on_the_free_list);
	suite_add_tcase(s, c);
	return s;
}

SC_CHECK_MAIN(l3ix_suite)
