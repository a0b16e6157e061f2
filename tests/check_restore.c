/* tests/check_restore.c — the whole restore path: L3 locate, L2 lookup validated against the
 * location, fill, promotion, publish in place; quarantine invalidating mirrors; single flight. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l3/l3.h"
#include "../shm/obs.h"

static char tmpdir[64];
static struct sc_arena *arena;
static const char *arena_name;
static struct sc_stage *stage;
static struct sc_l3 *l3;
static int32_t toks[8192];

static void rm_tmp(void)
{
	sc_test_rm_tree(tmpdir);
	tmpdir[0] = 0;
}

static void setup_size(uint64_t arena_bytes)
{
	for (int i = 0; i < 8192; i++)
		toks[i] = i * 11 + 5;
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/sc-rs-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	atexit(rm_tmp); /* a failed assertion exits the test process without the teardown */
	arena = sc_test_arena("restore", arena_bytes, &arena_name);
	ck_assert_int_eq(sc_stage_open(arena, "model-a", "state-a", &stage), 0);
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_bind_arena(l3, arena), 0);
}

static void setup(void)
{
	setup_size(64 << 20);
}

static void setup_big(void)
{
	setup_size(200 << 20);
}

static void teardown(void)
{
	sc_l3_close(l3);
	sc_stage_close(stage);
	sc_test_arena_destroy(arena, arena_name);
	rm_tmp();
}

static void fill_bytes(uint8_t *p, size_t n, unsigned seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static void put(const char *ns, uint32_t ntok, size_t n, unsigned seed, struct sc_location *loc)
{
	uint8_t *b = malloc(n);
	fill_bytes(b, n, seed);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	struct sc_l3_put_args a = { .ns = ns, .tokens = toks, .token_count = ntok, .payload = &pl };
	ck_assert_int_eq(sc_l3_put(l3, &a, loc), 0);
	free(b);
}

/* Restore and check the bytes; returns the source. */
static int restore_check(const char *ns, uint32_t n, uint32_t want_tokens, size_t bytes, unsigned seed,
			 struct sc_restore *r)
{
	int rc = sc_restore(stage, l3, ns, toks, n, 0, r);
	ck_assert_msg(rc == (int)want_tokens, "restore: %d (%s)", rc, sc_strerror(rc));
	ck_assert_int_eq(r->sec_len[0], bytes);
	uint8_t *want = malloc(bytes);
	fill_bytes(want, bytes, seed);
	ck_assert(memcmp(r->sec[0], want, bytes) == 0);
	free(want);
	int src = r->source;
	sc_restore_release(r);
	return src;
}

/* The path of @loc's object file in the store. */
static void object_path(const struct sc_location *loc, char *path, size_t n)
{
	char rel[48];
	l3_obj_relpath(loc->digest.lo, loc->digest.hi, rel);
	snprintf(path, n, "%s/objects/%s", tmpdir, rel);
}

/* Flip one bit of the byte at @off of @loc's object file. */
static void flip_object_byte(const struct sc_location *loc, off_t off, uint8_t bit)
{
	char path[256];
	object_path(loc, path, sizeof(path));
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t b;
	ck_assert_int_eq(pread(fd, &b, 1, off), 1);
	b ^= bit;
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

/* A second arena, without a location index (the directory locates), and a stage in it. */
static struct sc_stage *open_noindex(const char *tag, struct sc_arena **a2, const char **name2)
{
	struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF, .l3_index_entries = SC_L3_INDEX_NONE };
	*a2 = sc_test_arena_opts(tag, &o, name2);
	struct sc_stage *st2;
	ck_assert_int_eq(sc_stage_open(*a2, "model", "state", &st2), 0);
	return st2;
}

START_TEST(second_fill_promotes_and_l2_serves)
{
	struct sc_restore r;
	put("ns", 300, 50000, 1, NULL);
	/* first: from L3, not promoted */
	ck_assert_int_eq(restore_check("ns", 1000, 300, 50000, 1, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promoted, 0);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_FIRST_HIT);
	/* second: from L3, promoted in place */
	ck_assert_int_eq(restore_check("ns", 1000, 300, 50000, 1, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promoted, 1);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_SECOND_HIT);
	/* then the mirror serves the located prefix */
	ck_assert_int_eq(restore_check("ns", 1000, 300, 50000, 1, &r), SC_RESTORE_FROM_L2);
	ck_assert_int_eq(restore_check("ns", 300, 300, 50000, 1, &r), SC_RESTORE_FROM_L2);
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_peek(stage, "ns", toks, 300, &info), 0);
	ck_assert_int_eq(info.origin, SC_ORIGIN_FROM_L3);
	ck_assert_int_eq(info.token_count, 300);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_int_eq(st.fills, 2);
	/* nothing stored: -ENOENT; bad arguments */
	ck_assert_int_eq(sc_restore(stage, l3, "other", toks, 1000, 0, &r), -ENOENT);
	ck_assert_int_eq(sc_restore(stage, l3, "ns", toks, 0, 0, &r), -EINVAL);
	ck_assert_int_eq(sc_restore(stage, l3, "ns", toks, 10, 0x80, &r), -EINVAL);
	ck_assert_int_eq(sc_restore(NULL, l3, "ns", toks, 10, 0, &r), -EINVAL);
}
END_TEST

START_TEST(long_prefix_promotes_on_first_fill)
{
	struct sc_restore r;
	put("ns", 4096, 10000, 2, NULL);
	put("ns", 4095, 10000, 3, NULL);
	ck_assert_int_eq(restore_check("ns", 4096, 4096, 10000, 2, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promoted, 1);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_LONG_PREFIX);
	ck_assert_int_eq(restore_check("ns", 4096, 4096, 10000, 2, &r), SC_RESTORE_FROM_L2);
	ck_assert_int_eq(restore_check("ns", 4095, 4095, 10000, 3, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promoted, 0);
}
END_TEST

START_TEST(regression_promotion_with_every_lease_held)
{
	/* all SC_LEASES_MAX leases of the handle are held when a fill is promoted: the publish
	 * refuses (-EMFILE) instead of linking an entry it cannot lease, and the restore still
	 * returns the filled bytes (it used to return 0 with NULL sections) */
	uint8_t buf[256];
	memset(buf, 1, sizeof(buf));
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	struct sc_lease held[SC_LEASES_MAX];
	int32_t t[2];
	for (int i = 0; i < SC_LEASES_MAX; i++) {
		t[0] = 900000 + i, t[1] = 1;
		ck_assert_int_eq(sc_l2_admit(stage, "other", t, 2, sc_digest(buf, sizeof(buf)), &pl, SC_ORIGIN_DIRECT), 0);
		ck_assert_int_eq(sc_l2_get(stage, "other", t, 2, NULL, &held[i]), 0);
	}
	put("ns", 4096, 10000, 7, NULL);
	struct sc_restore r;
	int rc = sc_restore(stage, l3, "ns", toks, 4096, 0, &r);
	ck_assert_int_eq(rc, 4096);
	ck_assert_ptr_nonnull(r.sec[0]);
	ck_assert_uint_eq(r.sec_len[0], 10000);
	uint8_t *want = malloc(10000);
	fill_bytes(want, 10000, 7);
	ck_assert(memcmp(r.sec[0], want, 10000) == 0);
	free(want);
	ck_assert_int_eq(r.promoted, 0);
	sc_restore_release(&r);
	for (int i = 0; i < SC_LEASES_MAX; i++)
		sc_lease_release(&held[i]);
}
END_TEST

START_TEST(size_limit_64_mib)
{
	struct sc_restore r;
	size_t max = SC_PROMOTE_MAX_BYTES;
	put("big", 5000, max + 1, 4, NULL);
	put("big", 6000, max, 5, NULL);
	ck_assert_int_eq(restore_check("big", 5000, 5000, max + 1, 4, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promoted, 0);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_OVERSIZE);
	ck_assert_int_eq(restore_check("big", 5000, 5000, max + 1, 4, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_TERMINAL);
	ck_assert_int_eq(restore_check("big", 6000, 6000, max, 5, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promoted, 1);
	ck_assert_int_eq(restore_check("big", 6000, 6000, max, 5, &r), SC_RESTORE_FROM_L2);
}
END_TEST

START_TEST(changed_durable_digest_invalidates_mirror)
{
	struct sc_restore r;
	put("ns", 3, 128, 7, NULL);
	restore_check("ns", 4, 3, 128, 7, &r);
	restore_check("ns", 4, 3, 128, 7, &r);
	ck_assert_int_eq(r.promoted, 1);
	ck_assert_int_eq(restore_check("ns", 4, 3, 128, 7, &r), SC_RESTORE_FROM_L2);
	/* the durable copy changes: the mirror no longer matches the location */
	put("ns", 3, 128, 8, NULL);
	ck_assert_int_eq(restore_check("ns", 4, 3, 128, 8, &r), SC_RESTORE_FROM_L3);
	struct sc_l2_stats st;
	ck_assert_int_eq(sc_l2_stats(arena, NULL, &st), 0);
	ck_assert_int_eq(st.entries, 0);
}
END_TEST

/* Put through @h (@seed's bytes) for the first 3 tokens of "rp". */
static void put_via(struct sc_l3 *h, unsigned seed)
{
	uint8_t b[128];
	fill_bytes(b, sizeof(b), seed);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { sizeof(b) } };
	struct sc_l3_put_args a = { .ns = "rp", .tokens = toks, .token_count = 3, .payload = &pl };
	ck_assert_int_eq(sc_l3_put(h, &a, NULL), 0);
}

/* Restore until L2 holds a mirror of @seed's bytes (the second fill promotes). */
static void mirror_of(unsigned seed)
{
	struct sc_restore r;
	for (int i = 0; i < 3 && restore_check("rp", 4, 3, 128, seed, &r) != SC_RESTORE_FROM_L2; i++)
		;
	ck_assert_int_eq(restore_check("rp", 4, 3, 128, seed, &r), SC_RESTORE_FROM_L2);
}

/* A re-put of new bytes is what the very next restore returns, whichever handle or process put
 * it: the bound handle, an unbound handle of this process (the L2 mirror and the location index
 * named the old digest), a process with no arena at all, and a process attached to the arena. */
START_TEST(regression_reput_is_restored_at_once_from_any_handle)
{
	struct sc_restore r;
	put_via(l3, 1);
	mirror_of(1);
	/* an unbound handle of this process */
	struct sc_l3 *other = NULL;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &other), 0);
	put_via(other, 2);
	restore_check("rp", 4, 3, 128, 2, &r);
	mirror_of(2);
	/* the bound handle */
	put_via(l3, 3);
	restore_check("rp", 4, 3, 128, 3, &r);
	mirror_of(3);
	/* a process with no arena; then a process attached to the arena, restoring there too */
	for (unsigned seed = 4; seed <= 5; seed++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			struct sc_l3 *h = NULL;
			struct sc_arena *a = NULL;
			struct sc_stage *st = NULL;
			if (sc_l3_open(tmpdir, NULL, &h))
				_exit(2);
			if (seed == 5 && (sc_arena_open(arena_name, &a) || sc_l3_bind_arena(h, a) ||
					  sc_stage_open(a, "model-a", "state-a", &st)))
				_exit(3);
			put_via(h, seed);
			if (st) {
				struct sc_restore rr;
				uint8_t want[128];
				fill_bytes(want, sizeof(want), seed);
				if (sc_restore(st, h, "rp", toks, 4, 0, &rr) != 3 || memcmp(rr.sec[0], want, 128))
					_exit(4);
				sc_restore_release(&rr);
			}
			_exit(0);
		}
		int ws;
		ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
		ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "re-put process %u: status %d", seed, ws);
		restore_check("rp", 4, 3, 128, seed, &r);
		mirror_of(seed);
	}
	/* more re-puts than the journal holds: everything is re-checked, still never the old bytes */
	for (unsigned seed = 10; seed < 10 + L3_REPL_SLOTS + 5; seed++)
		put_via(other, seed);
	restore_check("rp", 4, 3, 128, 10 + L3_REPL_SLOTS + 4, &r);
	sc_l3_close(other);
}
END_TEST

/* An object put by model a / state s is restored only into stages of a/s: b/s and a/t miss
 * (counted), whether the bytes come from a fresh open, a kept file or a segmented object. */
START_TEST(restore_refuses_another_models_or_states_object)
{
	struct sc_l3_opts o = { .fd_cache = 16 };
	struct sc_l3 *kl3 = NULL;
	ck_assert_int_eq(sc_l3_open(tmpdir, &o, &kl3), 0);
	struct sc_stage *b_s = NULL, *a_t = NULL;
	ck_assert_int_eq(sc_stage_open(arena, "model-b", "state-a", &b_s), 0);
	ck_assert_int_eq(sc_stage_open(arena, "model-a", "state-b", &a_t), 0);
	for (int segmented = 0; segmented <= 1; segmented++) {
		size_t n = segmented ? (3u << 20) + 77 : 4096;
		if (segmented)
			ck_assert_int_eq(sc_l3_set_segment_bytes(kl3, 1u << 20), 0);
		uint8_t *b = malloc(n);
		fill_bytes(b, n, 40 + (unsigned)segmented);
		struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
		const char *ns = segmented ? "id-seg" : "id";
		struct sc_l3_put_args a = { .model_identity = "model-a", .state_identity = "state-a", .ns = ns,
					    .tokens = toks, .token_count = 5, .payload = &pl };
		ck_assert_int_eq(sc_l3_put(kl3, &a, NULL), 0);
		struct sc_l3_stats s0, s1;
		sc_l3_stats(kl3, &s0);
		for (int round = 0; round < 3; round++) { /* fresh open, then kept files */
			struct sc_restore r;
			ck_assert_int_eq(sc_restore(b_s, kl3, ns, toks, 6, 0, &r), -ENOENT);
			ck_assert_int_eq(sc_restore(a_t, kl3, ns, toks, 6, 0, &r), -ENOENT);
			ck_assert_int_eq(sc_restore(stage, kl3, ns, toks, 6, 0, &r), 5);
			ck_assert(r.sec_len[0] == n && memcmp(r.sec[0], b, n) == 0);
			sc_restore_release(&r);
		}
		sc_l3_stats(kl3, &s1);
		ck_assert_uint_eq(s1.identity_mismatches - s0.identity_mismatches, 6);
		ck_assert_uint_eq(s1.quarantined, s0.quarantined); /* not bad: only not theirs */
		/* the fill API: the stage's identity is checked, zero asks for none */
		struct sc_location loc;
		ck_assert_int_eq(sc_l3_locate_longest(kl3, ns, toks, 6, &loc), 5);
		uint8_t *dst = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
		struct sc_l3_fill_req req = { .loc = &loc, .dst = dst, .dst_bytes = (n + 4095) & ~(size_t)4095,
					      .identity = sc_stage_identity(b_s) }, *pr = &req, *done;
		ck_assert_int_eq(sc_l3_fill_submit(kl3, &pr, 1), 1);
		ck_assert_int_eq(sc_l3_fill_reap(kl3, &done, 1, -1), 1);
		ck_assert_int_eq(req.result, -EKEYREJECTED);
		req.identity = sc_identity_digest("model-a", "state-a");
		ck_assert_int_eq(sc_l3_fill_submit(kl3, &pr, 1), 1);
		ck_assert_int_eq(sc_l3_fill_reap(kl3, &done, 1, -1), 1);
		ck_assert_int_eq(req.result, 0);
		req.identity = (struct sc_digest){ 0, 0 };
		ck_assert_int_eq(sc_l3_fill_submit(kl3, &pr, 1), 1);
		ck_assert_int_eq(sc_l3_fill_reap(kl3, &done, 1, -1), 1);
		ck_assert_int_eq(req.result, 0);
		free(dst);
		free(b);
	}
	/* an object put with no identity claims none: any stage restores it */
	put("anyone", 5, 2048, 50, NULL);
	struct sc_restore r;
	ck_assert_int_eq(sc_restore(b_s, kl3, "anyone", toks, 6, 0, &r), 5);
	sc_restore_release(&r);
	ck_assert(sc_identity_digest("model-a", "state-a").lo == sc_stage_identity(stage).lo);
	ck_assert(sc_identity_digest("model-a", "state-a").lo != sc_identity_digest("model-as", "tate-a").lo);
	sc_stage_close(b_s);
	sc_stage_close(a_t);
	sc_l3_close(kl3);
}
END_TEST

static void flip_payload_byte(const struct sc_location *loc)
{
	flip_object_byte(loc, L3_HDR_BLOCK + 5, 0x80);
}

START_TEST(flipped_byte_is_quarantined_and_mirror_invalidated)
{
	struct sc_restore r;
	struct sc_location loc;
	put("q", 10, 9000, 9, &loc);
	flip_payload_byte(&loc);
	/* the fill fails its digest and quarantines the object: the restore reports the verification
	 * failure once; the next one is a miss */
	struct sc_l3_stats st0;
	sc_l3_stats(l3, &st0);
	ck_assert_int_eq(sc_restore(stage, l3, "q", toks, 10, 0, &r), -EBADMSG);
	struct sc_l3_stats st1;
	sc_l3_stats(l3, &st1);
	ck_assert_uint_eq(st1.verify_failures, st0.verify_failures + 1);
	ck_assert_uint_eq(st1.quarantined, st0.quarantined + 1);
	ck_assert_int_eq(sc_restore(stage, l3, "q", toks, 10, 0, &r), -ENOENT);
	/* a promoted object corrupted later: the next fill quarantines it and drops the mirror */
	put("q2", 10, 9000, 10, &loc);
	restore_check("q2", 10, 10, 9000, 10, &r);
	restore_check("q2", 10, 10, 9000, 10, &r);
	ck_assert_int_eq(r.promoted, 1);
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_peek(stage, "q2", toks, 10, &info), 0);
	flip_payload_byte(&loc);
	uint8_t *dst = aligned_alloc(4096, 16384);
	ck_assert_int_eq(sc_l3_fill(l3, &loc, dst, 16384, 0), -EBADMSG);
	free(dst);
	ck_assert_int_eq(sc_l2_peek(stage, "q2", toks, 10, &info), -ENOENT);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_int_eq(st.quarantined, 2);
}
END_TEST

/* Defect 5: an object found bad at sc_l3_open (a header byte flipped, or truncated)
 * was quarantined before any arena was bound: its L2 mirror survived, and restore said "nothing
 * stored" (-ENOENT). The quarantine is recorded, the next bind invalidates the mirror, and restore
 * reports the verification failure once. */
START_TEST(regression_quarantine_at_open_invalidates_mirror_and_is_reported)
{
	for (int how = 0; how < 2; how++) {
		struct sc_restore r;
		struct sc_location loc;
		const char *ns = how ? "trunc" : "flip";
		put(ns, 12, 9000, 20u + (unsigned)how, &loc);
		restore_check(ns, 12, 12, 9000, 20u + (unsigned)how, &r);
		restore_check(ns, 12, 12, 9000, 20u + (unsigned)how, &r);
		ck_assert_int_eq(r.promoted, 1); /* an L2 mirror now */
		struct sc_l2_entry_info info;
		ck_assert_int_eq(sc_l2_peek(stage, ns, toks, 12, &info), 0);
		sc_l3_close(l3);
		char rel[48], path[256];
		l3_obj_relpath(loc.digest.lo, loc.digest.hi, rel);
		snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
		if (how == 0) {
			int fd = open(path, O_RDWR);
			ck_assert_int_ge(fd, 0);
			uint8_t b;
			ck_assert_int_eq(pread(fd, &b, 1, 20), 1); /* a header byte */
			b ^= 0x10;
			ck_assert_int_eq(pwrite(fd, &b, 1, 20), 1);
			close(fd);
		} else {
			ck_assert_int_eq(truncate(path, L3_HDR_BLOCK + 100), 0);
		}
		/* another process's open reconciles (quarantines it) before any arena is bound */
		struct sc_l3 *other;
		ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &other), 0);
		sc_l3_close(other);
		ck_assert_int_eq(access(path, F_OK), -1);
		ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
		ck_assert_int_eq(sc_l2_peek(stage, ns, toks, 12, &info), 0); /* not yet: nothing bound */
		ck_assert_int_eq(sc_l3_bind_arena(l3, arena), 0);
		ck_assert_int_eq(sc_l2_peek(stage, ns, toks, 12, &info), -ENOENT);
		ck_assert_int_eq(sc_restore(stage, l3, ns, toks, 12, 0, &r), -EBADMSG);
		ck_assert_int_eq(sc_restore(stage, l3, ns, toks, 12, 0, &r), -ENOENT); /* reported once */
	}
}
END_TEST

/* At the moment a restore finds another filler's claim: say "x" on the descriptor *@ctx, once.
 * The restore holds the claim table here, so a live claimer cannot let go before it is seen. */
static void say_claim_found(const char *point, void *ctx)
{
	int *fd = ctx;
	if (strcmp(point, "fill.claim.found") || *fd < 0)
		return;
	if (write(*fd, "x", 1) != 1)
		_exit(4);
	*fd = -1;
}

/* In a child process: restore (@ns, the first @n tokens, @flags) through an arena handle, stage
 * and store of its own, saying "x" on @ready_fd (when it is >= 0) when the restore finds another
 * filler's claim. Returns what sc_restore did, *@r released (its fields only). Exits 3 or 4 when
 * it cannot open or say. */
static int child_restore(const char *ns, uint32_t n, uint32_t flags, int ready_fd, struct sc_restore *r)
{
	struct sc_arena *a = NULL;
	struct sc_stage *s = NULL;
	struct sc_l3 *x = NULL;
	if (sc_arena_open(arena_name, &a) || sc_stage_open(a, "model-a", "state-a", &s) || sc_l3_open(tmpdir, NULL, &x))
		_exit(3);
	sc_sched_set(say_claim_found, &ready_fd);
	int rc = sc_restore(s, x, ns, toks, n, flags, r);
	sc_sched_set(NULL, NULL);
	sc_restore_release(r);
	sc_l3_close(x);
	sc_stage_close(s);
	sc_arena_close(a);
	return rc;
}

START_TEST(two_processes_fills_count_as_two_hits)
{
	struct sc_restore r;
	put("mp", 20, 3000, 11, NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_restore rr;
		int rc = child_restore("mp", 20, 0, -1, &rr);
		_exit(rc == 20 && rr.source == SC_RESTORE_FROM_L3 && !rr.promoted ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(restore_check("mp", 20, 20, 3000, 11, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promoted, 1);
	ck_assert_int_eq(restore_check("mp", 20, 20, 3000, 11, &r), SC_RESTORE_FROM_L2);
}
END_TEST

START_TEST(single_flight_waits_then_hits_l2)
{
	struct sc_restore r;
	struct sc_location loc;
	put("sf", 30, 7000, 12, &loc);
	uint64_t sid = sc_stage_id(stage);
	/* we are "filling" it */
	ck_assert_int_eq(sc_fill_claim(arena, sid, loc.digest), 0);
	ck_assert_int_eq(sc_restore(stage, l3, "sf", toks, 30, 0, &r), -EBUSY);
	int pipefd[2];
	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_restore rr;
		int rc = child_restore("sf", 30, SC_RESTORE_WAIT, pipefd[1], &rr);
		_exit(rc == 30 && rr.source == SC_RESTORE_FROM_L2 && rr.waited ? 0 : 1);
	}
	close(pipefd[1]); /* a child that ends before finding our claim ends the read below */
	char c;
	struct pollfd pf = { .fd = pipefd[0], .events = POLLIN };
	ck_assert_msg(poll(&pf, 1, 30000) == 1 && read(pipefd[0], &c, 1) == 1,
		      "the child's restore did not find our claim (within 30 s)");
	close(pipefd[0]);
	/* it found our claim, and holds the claim table: it sees the claim live and waits. Finish
	 * "our" fill: publish, then release the claim */
	uint8_t *b = malloc(7000);
	fill_bytes(b, 7000, 12);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { 7000 } };
	ck_assert_int_eq(sc_l2_admit(stage, "sf", toks, 30, loc.digest, &pl, SC_ORIGIN_FROM_L3), 0);
	free(b);
	ck_assert_int_eq(sc_fill_release(arena, sid, loc.digest), 0);
	int status;
	waitpid(pid, &status, 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* a claimer killed mid-fill does not block anyone */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *a = NULL;
		if (sc_arena_open(arena_name, &a) || sc_fill_claim(a, sid, loc.digest))
			_exit(3);
		kill(getpid(), SIGKILL);
	}
	waitpid(pid, &status, 0);
	ck_assert(WIFSIGNALED(status));
	sc_l2_clear(arena);
	ck_assert_int_eq(restore_check("sf", 30, 30, 7000, 12, &r), SC_RESTORE_FROM_L3);
}
END_TEST

/* A prefix L2 holds, asked for while every lease of the handle is held: the restore says so
 * (-EMFILE, nothing filled), whether the location index answered the locate or the arena has no
 * index (the directory locates, then L2 is asked). */
START_TEST(a_restore_with_every_lease_held_is_refused)
{
	const char *name2;
	struct sc_arena *a2;
	struct sc_stage *st2 = open_noindex("rs-noix", &a2, &name2);
	struct sc_stage *stages[2] = { stage, st2 };
	put("ns", 40, 6000, 9, NULL);
	uint8_t buf[256];
	memset(buf, 1, sizeof(buf));
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	for (int k = 0; k < 2; k++) {
		struct sc_restore r;
		for (int i = 0; i < 2; i++) { /* the second fill promotes: L2 holds it */
			ck_assert_int_eq(sc_restore(stages[k], l3, "ns", toks, 40, 0, &r), 40);
			sc_restore_release(&r);
		}
		ck_assert_int_eq(r.promoted, 1);
		struct sc_lease held[SC_LEASES_MAX];
		int32_t t[2];
		for (int i = 0; i < SC_LEASES_MAX; i++) {
			t[0] = 700000 + i, t[1] = 1;
			ck_assert_int_eq(sc_l2_admit(stages[k], "other", t, 2, sc_digest(buf, sizeof(buf)), &pl,
						     SC_ORIGIN_DIRECT), 0);
			ck_assert_int_eq(sc_l2_get(stages[k], "other", t, 2, NULL, &held[i]), 0);
		}
		struct sc_l3_stats s0, s1;
		sc_l3_stats(l3, &s0);
		ck_assert_int_eq(sc_restore(stages[k], l3, "ns", toks, 40, 0, &r), -EMFILE);
		ck_assert_int_eq(r.from_index, k == 0);
		sc_l3_stats(l3, &s1);
		ck_assert_int_eq(s1.fills, s0.fills);
		for (int i = 0; i < SC_LEASES_MAX; i++)
			sc_lease_release(&held[i]);
		ck_assert_int_eq(sc_restore(stages[k], l3, "ns", toks, 40, 0, &r), 40);
		ck_assert_int_eq(r.source, SC_RESTORE_FROM_L2);
		sc_restore_release(&r);
	}
	sc_stage_close(st2);
	sc_test_arena_destroy(a2, name2);
}
END_TEST

/* The object of the longest prefix the location index names is gone (removed behind the index's
 * back, as a process not attached removes it): the restore looks again and serves the shorter
 * prefix that is still stored, from L3; with every stored prefix's object gone, a miss. */
START_TEST(an_object_gone_before_the_locate_falls_back_to_a_shorter_prefix)
{
	struct sc_restore r;
	struct sc_location l32, l64;
	put("ns", 32, 5000, 41, &l32);
	put("ns", 64, 7000, 42, &l64);
	ck_assert_int_eq(restore_check("ns", 64, 64, 7000, 42, &r), SC_RESTORE_FROM_L3);
	sc_l2_clear(arena);
	char path[256];
	object_path(&l64, path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
	int rc = sc_restore(stage, l3, "ns", toks, 64, 0, &r);
	ck_assert_msg(rc == 32, "restore: %d (%s)", rc, sc_strerror(rc));
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L3);
	ck_assert_uint_eq(r.sec_len[0], 5000);
	uint8_t want[5000];
	fill_bytes(want, sizeof(want), 41);
	ck_assert(memcmp(r.sec[0], want, sizeof(want)) == 0);
	sc_restore_release(&r);
	/* both objects gone behind the index's back (both prefixes indexed again by the puts): two
	 * looks find nothing, and the directory says so: a miss */
	put("ns", 32, 5000, 41, &l32);
	put("ns", 64, 7000, 42, &l64);
	sc_l2_clear(arena);
	const struct sc_location *gone[2] = { &l32, &l64 };
	for (int k = 0; k < 2; k++) {
		object_path(gone[k], path, sizeof(path));
		ck_assert_int_eq(unlink(path), 0);
	}
	rc = sc_restore(stage, l3, "ns", toks, 64, 0, &r);
	ck_assert_msg(rc == -ENOENT, "restore: %d (%s)", rc, sc_strerror(rc));
	ck_assert_int_ge(r.miss_reason, 0);
}
END_TEST

/* The objects unlinked one at a time, each just before the fill that would read it. */
struct vanish {
	const struct sc_location *locs[3]; /* longest first */
	int fills;                        /* fills started */
};

static void vanish_hook(const char *point, void *ctx)
{
	struct vanish *v = ctx;
	if (strcmp(point, "restore.fill") || v->fills >= 3)
		return;
	char path[256];
	object_path(v->locs[v->fills++], path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
}

/* Objects that vanish under the fill that reads them (as another host's janitor removes them):
 * the restore looks again once, and when the second object also vanishes it reports the miss
 * (evicted by a janitor) rather than chase every shorter prefix; what is still stored is served
 * by the next restore. */
START_TEST(a_restore_whose_objects_vanish_twice_reports_the_miss)
{
	struct sc_location l32, l48, l64;
	put("ns", 32, 5000, 61, &l32);
	put("ns", 48, 6000, 62, &l48);
	put("ns", 64, 7000, 63, &l64);
	struct vanish v = { .locs = { &l64, &l48, &l32 } };
	struct sc_restore r;
	sc_sched_set(vanish_hook, &v);
	int rc = sc_restore(stage, l3, "ns", toks, 64, 0, &r);
	sc_sched_set(NULL, NULL);
	ck_assert_msg(rc == -ENOENT, "restore: %d (%s)", rc, sc_strerror(rc));
	ck_assert_int_eq(r.miss_reason, SC_MISS_EVICTED_JANITOR);
	ck_assert_int_eq(v.fills, 2); /* the 64- and 48-token prefixes' fills, not the 32's */
	ck_assert_int_eq(restore_check("ns", 64, 32, 5000, 61, &r), SC_RESTORE_FROM_L3);
}
END_TEST

/* Another worker's fill of the same object counted while this one reads it. */
struct seen_twice {
	struct sc_location loc;
	int counted;
};

static void seen_twice_hook(const char *point, void *ctx)
{
	struct seen_twice *s = ctx;
	if (strcmp(point, "restore.fill") || s->counted++)
		return;
	int why;
	ck_assert_int_eq(sc_promote_consider(arena, sc_stage_id(stage), s->loc.digest, s->loc.token_count,
					     s->loc.payload_bytes, &why), 0); /* its first hit */
}

/* A fill that was not expected to promote (so it reads into process memory, L2 having no free
 * room) becomes a second hit while it reads, because another worker's fill of the same object was
 * counted meanwhile: the restore admits a copy, and when L2 refuses it (every byte of L2 reserved
 * by fills in flight) the restore says it was not promoted, and L2 holds nothing of it. */
START_TEST(a_promotion_by_copy_that_l2_refuses_is_reported_not_promoted)
{
	struct seen_twice s = { .counted = 0 };
	put("ns", 300, 50000, 71, &s.loc);
	static struct sc_l2_resv held[4096];
	int n = 0;
	for (uint64_t size = 4 << 20; size >= 4096; size /= 4) /* all of L2's room, reserved */
		while (n < 4096 && sc_l2_reserve(stage, size, &held[n]) == 0)
			n++;
	ck_assert_int_lt(n, 4096);
	sc_sched_set(seen_twice_hook, &s);
	struct sc_restore r;
	int rc = sc_restore(stage, l3, "ns", toks, 300, 0, &r);
	sc_sched_set(NULL, NULL);
	ck_assert_msg(rc == 300, "restore: %d (%s)", rc, sc_strerror(rc));
	ck_assert_int_eq(s.counted, 1);
	ck_assert_int_eq(r.in_arena, 0); /* read into process memory */
	ck_assert_int_eq(r.promote_why, SC_PROMOTE_WHY_SECOND_HIT);
	ck_assert_int_eq(r.promoted, 0);
	uint8_t *want = malloc(50000);
	fill_bytes(want, 50000, 71);
	ck_assert(memcmp(r.sec[0], want, 50000) == 0);
	free(want);
	sc_restore_release(&r);
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_peek(stage, "ns", toks, 300, &info), -ENOENT);
	for (int i = 0; i < n; i++)
		sc_l2_reserve_release(&held[i]);
}
END_TEST

/* The object replaced by a link to it (moved) just before the fill opens it. */
struct link_at {
	const struct sc_location *loc;
	int planted;
};

static void link_hook(const char *point, void *ctx)
{
	struct link_at *la = ctx;
	if (strcmp(point, "restore.fill") || la->planted++)
		return;
	char path[256], real[300];
	object_path(la->loc, path, sizeof(path));
	snprintf(real, sizeof(real), "%s.real", path);
	ck_assert_int_eq(rename(path, real), 0);
	ck_assert_int_eq(symlink(real, path), 0);
}

/* A link planted under the longest prefix's object name (to the object itself, moved: never
 * followed): the restore judges it as the directory's verification does, bad, and quarantines it;
 * the shorter prefix is served, at once when the location index answered the locate (as for a bad
 * header), after the one restore that reports it when the directory locates. A lookup error that
 * is not the object's (too many open files) is the restore's answer, not a miss. */
START_TEST(a_link_under_an_object_name_is_quarantined_and_the_shorter_served)
{
	const char *name2;
	struct sc_arena *a2;
	struct sc_stage *st2 = open_noindex("rs-link", &a2, &name2);
	struct sc_stage *stages[2] = { stage, st2 };
	char path[256], real[300];
	for (int k = 0; k < 2; k++) {
		struct sc_location l32, l64;
		put("ln", 32, 5000, 101, &l32);
		put("ln", 64, 7000, 102, &l64);
		struct sc_restore r;
		ck_assert_int_eq(restore_check("ln", 64, 64, 7000, 102, &r), SC_RESTORE_FROM_L3); /* indexed */
		object_path(&l64, path, sizeof(path));
		snprintf(real, sizeof(real), "%s.real", path);
		ck_assert_int_eq(rename(path, real), 0);
		ck_assert_int_eq(symlink(real, path), 0);
		struct sc_l3_stats s0, s1;
		sc_l3_stats(l3, &s0);
		int rc = sc_restore(stages[k], l3, "ln", toks, 64, 0, &r);
		if (k == 1) { /* the directory reports a bad longest object once (as for a bad header) */
			ck_assert_msg(rc == -EBADMSG, "restore: %d (%s)", rc, sc_strerror(rc));
			ck_assert_int_eq(r.miss_reason, SC_MISS_QUARANTINED);
			rc = sc_restore(stages[k], l3, "ln", toks, 64, 0, &r);
		}
		ck_assert_msg(rc == 32, "restore %d: %d (%s)", k, rc, sc_strerror(rc));
		ck_assert_int_eq(r.from_index, k == 0);
		ck_assert_uint_eq(r.sec_len[0], 5000);
		sc_restore_release(&r);
		sc_l3_stats(l3, &s1);
		ck_assert_uint_eq(s1.quarantined, s0.quarantined + 1);
		struct stat sb;
		ck_assert_int_eq(lstat(path, &sb), -1); /* moved away: a put can store the object again */
		ck_assert_int_eq(unlink(real), 0);
		sc_l2_clear(arena);
	}
	/* planted after the locate, just before the fill opens it: the fill finds no object under
	 * the name, and the restore reports it once (-EBADMSG, counted as quarantined) */
	{
		struct sc_location l32, l64;
		put("lf", 32, 5000, 103, &l32);
		put("lf", 64, 7000, 104, &l64);
		struct link_at la = { .loc = &l64 };
		struct sc_restore r;
		sc_sched_set(link_hook, &la);
		int rc = sc_restore(stage, l3, "lf", toks, 64, 0, &r);
		sc_sched_set(NULL, NULL);
		ck_assert_int_eq(la.planted, 1);
		ck_assert_msg(rc == -EBADMSG, "restore: %d (%s)", rc, sc_strerror(rc));
		ck_assert_int_eq(r.miss_reason, SC_MISS_QUARANTINED);
		ck_assert_int_eq(restore_check("lf", 64, 32, 5000, 103, &r), SC_RESTORE_FROM_L3);
		object_path(&l64, path, sizeof(path));
		ck_assert_int_eq(unlink(path), 0);
		snprintf(real, sizeof(real), "%s.real", path);
		ck_assert_int_eq(unlink(real), 0);
	}
	/* every descriptor in use when the located object is opened: that error is the answer */
	put("ln", 64, 7000, 102, NULL);
	struct sc_restore r;
	ck_assert_int_eq(restore_check("ln", 64, 64, 7000, 102, &r), SC_RESTORE_FROM_L3);
	sc_l2_clear(arena);
	int fd = dup(0);
	ck_assert_int_ge(fd, 0);
	close(fd);
	struct rlimit rl = { (rlim_t)fd, (rlim_t)fd };
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0); /* this test's process only */
	int rc = sc_restore(stage, l3, "ln", toks, 64, 0, &r);
	ck_assert_msg(rc == -EMFILE, "restore: %d (%s)", rc, sc_strerror(rc));
	ck_assert_int_eq(r.from_index, 1);
	ck_assert_int_eq(r.miss_reason, -1);
	sc_stage_close(st2);
	sc_test_arena_destroy(a2, name2);
}
END_TEST

/* An L2 mirror that cannot restore the prefix (its KV descriptor covers 63 of its 64 tokens) of an
 * object that is gone: the mirror is dropped, the fill finds no object, and the restore looks
 * again and serves the shorter prefix still stored. */
START_TEST(an_unusable_mirror_of_a_gone_object_falls_back_to_a_shorter_prefix)
{
	struct sc_location l32, l64;
	put("ns", 32, 5000, 51, &l32);
	put("ns", 64, 7000, 52, &l64);
	static uint8_t kv[7000]; /* the object's own bytes (the mirror's digest is the object's) */
	fill_bytes(kv, sizeof(kv), 52);
	struct sc_kv_desc d = { .codec = SC_KV_CODEC_RAW, .payload_bytes = sizeof(kv), .token_count = 63 };
	struct sc_payload pl = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { kv }, .sec_len = { sizeof(kv) }, .kv_desc = &d };
	ck_assert_int_eq(sc_l2_admit(stage, "ns", toks, 64, l64.digest, &pl, SC_ORIGIN_DIRECT), 0);
	char path[256];
	object_path(&l64, path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
	struct sc_restore r;
	int rc = sc_restore(stage, l3, "ns", toks, 64, 0, &r);
	ck_assert_msg(rc == 32, "restore: %d (%s)", rc, sc_strerror(rc));
	ck_assert_uint_eq(r.sec_len[0], 5000);
	uint8_t want[5000];
	fill_bytes(want, sizeof(want), 51);
	ck_assert(memcmp(r.sec[0], want, sizeof(want)) == 0);
	sc_restore_release(&r);
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_peek(stage, "ns", toks, 64, &info), -ENOENT); /* the unusable mirror went */
}
END_TEST

/* A namespace of exactly SC_L3_STR_MAX bytes is restored like any other; one byte more, or no
 * result to fill, is refused (-EINVAL) and nothing is counted. */
START_TEST(a_namespace_of_the_longest_length_is_restored)
{
	static char ns[SC_L3_STR_MAX + 2];
	memset(ns, 'q', SC_L3_STR_MAX);
	put(ns, 16, 3000, 61, NULL);
	struct sc_restore r;
	ck_assert_int_eq(restore_check(ns, 16, 16, 3000, 61, &r), SC_RESTORE_FROM_L3);
	struct sc_l3_stats s0, s1;
	sc_l3_stats(l3, &s0);
	ns[SC_L3_STR_MAX] = 'q';
	ck_assert_int_eq(sc_restore(stage, l3, ns, toks, 16, 0, &r), -EINVAL);
	ck_assert_int_eq(r.miss_reason, -1);
	ns[SC_L3_STR_MAX] = 0;
	ck_assert_int_eq(sc_restore(stage, l3, ns, toks, 16, 0, NULL), -EINVAL); /* nowhere to answer */
	sc_restore_release(NULL); /* nothing to release: nothing happens */
	sc_l3_stats(l3, &s1);
	ck_assert_int_eq(s1.fills, s0.fills);
}
END_TEST

/* A fill published in place keeps the prefix's token ids behind the payload: the reservation holds
 * them all, even when they fill most of a page past the payload (1 100 ids, 4 400 bytes, behind
 * 8 KiB): promoted, served from L2 with every id compared, and the arena stays whole. */
START_TEST(a_fill_published_in_place_keeps_every_token_id)
{
	struct sc_restore r;
	put("ids", 1100, 8192, 71, NULL);
	ck_assert_int_eq(restore_check("ids", 1100, 1100, 8192, 71, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(restore_check("ids", 1100, 1100, 8192, 71, &r), SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.promoted, 1);
	ck_assert_int_eq(restore_check("ids", 1100, 1100, 8192, 71, &r), SC_RESTORE_FROM_L2);
	toks[1099] ^= 1; /* the last id differs: not this prefix */
	struct sc_lease l;
	int rc = sc_l2_get(stage, "ids", toks, 1100, NULL, &l);
	toks[1099] ^= 1;
	ck_assert_int_eq(rc, -ENOENT);
	struct sc_fsck_report rep;
	ck_assert_int_eq(sc_arena_fsck(arena, 0, NULL, NULL, &rep), 0);
}
END_TEST

/* Restores served from L2 keep nothing of this process's memory once released: 200 of a 64 KiB
 * entry leave malloc's in-use bytes where they were (within 1 MiB; a copy kept per restore would
 * be 12.5 MiB). */
START_TEST(restores_served_from_l2_keep_no_memory)
{
	struct sc_restore r;
	put("mem", 20, 65536, 81, NULL);
	restore_check("mem", 20, 20, 65536, 81, &r);
	restore_check("mem", 20, 20, 65536, 81, &r);
	ck_assert_int_eq(restore_check("mem", 20, 20, 65536, 81, &r), SC_RESTORE_FROM_L2);
	struct mallinfo2 m0 = mallinfo2();
	for (int i = 0; i < 200; i++) {
		ck_assert_int_eq(sc_restore(stage, l3, "mem", toks, 20, 0, &r), 20);
		ck_assert_int_eq(r.source, SC_RESTORE_FROM_L2);
		sc_restore_release(&r);
	}
	struct mallinfo2 m1 = mallinfo2();
	ck_assert_msg(m1.uordblks < m0.uordblks + (1u << 20), "in use: %zu bytes before, %zu after", m0.uordblks,
		      m1.uordblks);
}
END_TEST

/* An arena fsck declared unrepairable: a restore says so (-ENOTRECOVERABLE) and reads nothing. */
START_TEST(a_restore_in_a_damaged_arena_is_refused)
{
	put("dmg", 12, 3000, 91, NULL);
	struct sc_l3_stats s0, s1;
	sc_l3_stats(l3, &s0);
	atomic_store(&arena->shm->hdr->damaged, SHM_DAMAGED);
	struct sc_restore r;
	int rc = sc_restore(stage, l3, "dmg", toks, 12, 0, &r);
	atomic_store(&arena->shm->hdr->damaged, 0);
	ck_assert_int_eq(rc, -ENOTRECOVERABLE);
	sc_l3_stats(l3, &s1);
	ck_assert_int_eq(s1.fills, s0.fills);
	ck_assert_int_eq(restore_check("dmg", 12, 12, 3000, 91, &r), SC_RESTORE_FROM_L3);
}
END_TEST

/* A stored state whose KV descriptor does not describe this prefix (64 tokens stored, a descriptor
 * of 63) is never served: a miss counted as quarantined (-EBADMSG), nothing filled; with a
 * descriptor of its 64 tokens it is. */
START_TEST(a_location_whose_descriptor_is_not_this_prefix_is_not_served)
{
	static uint8_t kv[4096];
	fill_bytes(kv, sizeof(kv), 92);
	struct sc_kv_desc d = { .codec = SC_KV_CODEC_RAW, .payload_bytes = sizeof(kv), .token_count = 63 };
	struct sc_payload pl = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { kv }, .sec_len = { sizeof(kv) }, .kv_desc = &d };
	struct sc_l3_put_args a = { .ns = "desc", .tokens = toks, .token_count = 64, .payload = &pl };
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_put(l3, &a, &loc), 0);
	struct sc_l3_stats s0, s1;
	sc_l3_stats(l3, &s0);
	struct sc_restore r;
	ck_assert_int_eq(sc_restore(stage, l3, "desc", toks, 64, 0, &r), -EBADMSG);
	ck_assert_int_eq(r.miss_reason, SC_MISS_QUARANTINED);
	ck_assert_ptr_null(r.sec[0]);
	sc_l3_stats(l3, &s1);
	ck_assert_int_eq(s1.fills, s0.fills);
	/* other bytes (another object) with a descriptor of the 64 tokens are served */
	fill_bytes(kv, sizeof(kv), 96);
	d.token_count = 64;
	a.ns = "desc-ok";
	ck_assert_int_eq(sc_l3_put(l3, &a, &loc), 0);
	ck_assert_int_eq(sc_restore(stage, l3, "desc-ok", toks, 64, 0, &r), 64);
	ck_assert_int_eq(r.has_kv_desc, 1);
	ck_assert_uint_eq(r.kv_desc.token_count, 64);
	ck_assert(memcmp(r.sec[0], kv, sizeof(kv)) == 0);
	sc_restore_release(&r);
}
END_TEST

/* Without a location index the directory locates: when the longest prefix's object fails
 * verification the restore reports it (-EBADMSG, counted as quarantined) once, and the next one
 * serves the shorter prefix that is stored. */
START_TEST(a_bad_longest_object_is_reported_once_then_the_shorter_served)
{
	const char *name2;
	struct sc_arena *a2;
	struct sc_stage *st2 = open_noindex("rs-bad", &a2, &name2);
	struct sc_location l32, l64;
	put("bad", 32, 5000, 93, &l32);
	put("bad", 64, 7000, 94, &l64);
	flip_object_byte(&l64, 20, 0x10); /* a header byte */
	struct sc_restore r;
	ck_assert_int_eq(sc_restore(st2, l3, "bad", toks, 64, 0, &r), -EBADMSG);
	ck_assert_int_eq(r.miss_reason, SC_MISS_QUARANTINED);
	int rc = sc_restore(st2, l3, "bad", toks, 64, 0, &r);
	ck_assert_msg(rc == 32, "restore: %d (%s)", rc, sc_strerror(rc));
	uint8_t want[5000];
	fill_bytes(want, sizeof(want), 93);
	ck_assert(memcmp(r.sec[0], want, sizeof(want)) == 0);
	sc_restore_release(&r);
	sc_stage_close(st2);
	sc_test_arena_destroy(a2, name2);
}
END_TEST

/* The claim table full of other fills' claims (256): a restore fills without single flight
 * rather than fail, and leaves the table as it was. */
START_TEST(a_full_claim_table_does_not_stop_a_fill)
{
	put("full", 20, 4000, 95, NULL);
	uint64_t sid = sc_stage_id(stage);
	for (uint32_t i = 0; i < SHM_OBS_CLAIMS; i++)
		ck_assert_int_eq(sc_fill_claim(arena, sid, (struct sc_digest){ 1000 + i, 7 }), 0);
	ck_assert_int_eq(sc_fill_claim(arena, sid, (struct sc_digest){ 999, 7 }), -EAGAIN);
	struct sc_restore r;
	ck_assert_int_eq(restore_check("full", 20, 20, 4000, 95, &r), SC_RESTORE_FROM_L3);
	for (uint32_t i = 0; i < SHM_OBS_CLAIMS; i++)
		ck_assert_int_eq(sc_fill_release(arena, sid, (struct sc_digest){ 1000 + i, 7 }), 0);
}
END_TEST

/* A restore says where its time went: without a location index the directory probe (a prefix
 * entry and an object header opened and read: about 100 us here) takes more than 3 us on any
 * machine (the clock read before the locate gives under 1 us), and the total holds the locate
 * and the fill. */
START_TEST(a_restore_reports_where_its_time_went)
{
	const char *name2;
	struct sc_arena *a2;
	struct sc_stage *st2 = open_noindex("rs-time", &a2, &name2);
	put("time", 24, 2 << 20, 97, NULL);
	struct sc_restore r;
	struct sc_l3_stats s0, s1;
	sc_l3_stats(l3, &s0);
	ck_assert_int_eq(sc_restore(st2, l3, "time", toks, 24, 0, &r), 24);
	sc_l3_stats(l3, &s1);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.from_index, 0);
	ck_assert_uint_ge(r.locate_ns, 3000);
	/* the fill's own time (the store's counter) lies within what the restore calls its fill */
	ck_assert_int_eq(s1.fills, s0.fills + 1);
	ck_assert_uint_ge(r.fill_ns, s1.fill_ns - s0.fill_ns);
	ck_assert_uint_ge(r.total_ns, r.locate_ns + r.fill_ns);
	sc_restore_release(&r);
	/* served from L2 after a directory probe: the lookup (L2's) hashes and compares 65536 token
	 * ids (256 KiB: several microseconds on any machine) */
	static int32_t many[65536];
	for (int i = 0; i < 65536; i++)
		many[i] = i * 7 + 3;
	uint8_t b[4096];
	fill_bytes(b, sizeof(b), 98);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { sizeof(b) } };
	struct sc_l3_put_args a = { .ns = "time", .tokens = many, .token_count = 65536, .payload = &pl };
	ck_assert_int_eq(sc_l3_put(l3, &a, NULL), 0);
	ck_assert_int_eq(sc_restore(st2, l3, "time", many, 65536, 0, &r), 65536); /* a long prefix: promoted */
	ck_assert_int_eq(r.promoted, 1);
	sc_restore_release(&r);
	ck_assert_int_eq(sc_restore(st2, l3, "time", many, 65536, 0, &r), 65536);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L2);
	ck_assert_uint_ge(r.lookup_ns, 2000);
	ck_assert_uint_ge(r.total_ns, r.locate_ns + r.lookup_ns);
	sc_restore_release(&r);
	sc_stage_close(st2);
	sc_test_arena_destroy(a2, name2);
}
END_TEST

static uint64_t obs_magic; /* the claim table's magic, while obs_hook has it scribbled */

/* At the moment a restore finds another filler's claim: the claim table's header is damaged. */
static void obs_hook(const char *point, void *ctx)
{
	(void)ctx;
	struct shm_obs_hdr *h = shm_obs_table(arena->shm);
	if (!strcmp(point, "fill.claim.found") && h) {
		obs_magic = h->magic;
		h->magic = 0;
	}
}

/* The claims on @d of stage @sid (one of them in *@one). */
static int claims_on(struct shm_obs_hdr *h, uint64_t sid, struct sc_digest d, struct shm_obs_claim **one)
{
	struct shm_obs_claim *c = shm_obs_claims(h);
	int n = 0;
	for (uint32_t i = 0; i < h->claims; i++)
		if (c[i].owner && c[i].stage_id == sid && c[i].digest_lo == d.lo && c[i].digest_hi == d.hi)
			n++, *one = &c[i];
	return n;
}

/* Another filler that keeps filling without promoting: its claim is let go during each wait and
 * taken again before the waiter's next claim, for up to @rounds rounds. */
struct relay {
	struct sc_digest d;
	int rounds, found, released, claims_at_fill;
	struct shm_obs_claim theirs, *slot;
};

static void relay_hook(const char *point, void *ctx)
{
	struct relay *rl = ctx;
	struct shm_obs_hdr *h = shm_obs_table(arena->shm);
	struct shm_obs_claim *c = NULL;
	if (!strcmp(point, "fill.claim.found")) {
		if (!rl->found++) {
			ck_assert_int_eq(claims_on(h, sc_stage_id(stage), rl->d, &c), 1);
			rl->theirs = *c, rl->slot = c;
		}
	} else if (!strcmp(point, "obs.locked") && rl->found && rl->found == rl->released + 1 && rl->found <= rl->rounds) {
		memset(rl->slot, 0, sizeof(*rl->slot)); /* in the waiter's wait: let go */
		rl->released++;
	} else if (!strcmp(point, "obs.locked") && rl->found && rl->found == rl->released && rl->found < rl->rounds &&
		   !rl->slot->owner) {
		*rl->slot = rl->theirs; /* before the waiter's next claim: taken again */
	} else if (!strcmp(point, "restore.fill")) {
		rl->claims_at_fill = claims_on(h, sc_stage_id(stage), rl->d, &c) - (rl->slot->owner == rl->theirs.owner);
	}
}

/* A restore of @ns (30 tokens, stored) with SC_RESTORE_WAIT while another handle claims its fill
 * and lets the claim go for @rounds rounds (relay_hook). */
static void restore_past_relay(const char *ns, const struct sc_location *loc, int rounds, struct relay *rl,
			       struct sc_restore *r)
{
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(arena_name, &b), 0);
	ck_assert_int_eq(sc_fill_claim(b, sc_stage_id(stage), loc->digest), 0); /* another handle is filling it */
	*rl = (struct relay){ .d = loc->digest, .rounds = rounds };
	struct sc_restore_opts o = { .flags = SC_RESTORE_WAIT };
	sc_sched_set(relay_hook, rl);
	int rc = sc_restore_with(stage, l3, ns, toks, 30, &o, r);
	sc_sched_set(NULL, NULL);
	ck_assert_msg(rc == 30, "restore: %d (%s)", rc, sc_strerror(rc));
	ck_assert_int_eq(r->waited, 1);
	sc_restore_release(r);
	sc_arena_close(b);
}

/* A restore that waited for another filler and wakes to a miss (it did not promote) claims the
 * fill before it starts it: single flight holds for the next round too. */
START_TEST(a_waiter_that_wakes_to_a_miss_claims_before_it_fills)
{
	struct sc_location loc;
	put("wk", 30, 7000, 14, &loc);
	struct relay rl;
	struct sc_restore r;
	restore_past_relay("wk", &loc, 1, &rl, &r);
	ck_assert_int_eq(rl.released, 1);
	ck_assert_int_eq(rl.claims_at_fill, 1); /* its own claim */
	struct shm_obs_claim *c = NULL;
	ck_assert_int_eq(claims_on(shm_obs_table(arena->shm), sc_stage_id(stage), loc.digest, &c), 0); /* and released */
}
END_TEST

/* A waiter that keeps waking to a miss (the other filler fills again each time, never promoting)
 * waits four rounds, then fills without a claim rather than wait on ever more fills. */
START_TEST(a_waiter_fills_unclaimed_after_four_rounds)
{
	struct sc_location loc;
	put("rl", 30, 7000, 15, &loc);
	struct relay rl;
	struct sc_restore r;
	restore_past_relay("rl", &loc, 8, &rl, &r);
	ck_assert_int_eq(rl.found, 4); /* four rounds of waiting */
	ck_assert_int_eq(rl.claims_at_fill, 0); /* then a fill without a claim of its own */
}
END_TEST

/* A restore waiting for another filler (SC_RESTORE_WAIT) whose claim table turns out damaged
 * returns the error (-EBADMSG): not a "busy" miss nor a deadline miss, and nothing filled. */
START_TEST(a_wait_on_a_damaged_claim_table_is_an_error)
{
	struct sc_location loc;
	put("dw", 30, 7000, 13, &loc);
	uint64_t sid = sc_stage_id(stage);
	ck_assert_int_eq(sc_fill_claim(arena, sid, loc.digest), 0); /* we are "filling" it */
	struct sc_l3_stats s0, s1;
	sc_l3_stats(l3, &s0);
	struct sc_restore r;
	for (int with_deadline = 0; with_deadline < 2; with_deadline++) {
		/* with a deadline 10 s away: the error is still the answer, not a deadline miss */
		struct sc_restore_opts o = { .flags = SC_RESTORE_WAIT,
					     .deadline_ns = with_deadline ? sc_clock_ns() + 10000000000ull : 0 };
		obs_magic = 0;
		sc_sched_set(obs_hook, NULL);
		int rc = sc_restore_with(stage, l3, "dw", toks, 30, &o, &r);
		sc_sched_set(NULL, NULL);
		ck_assert_uint_ne(obs_magic, 0);
		struct shm_obs_hdr *h = shm_region(arena->shm, SHM_REGION_OBS, NULL);
		h->magic = obs_magic;
		ck_assert_msg(rc == -EBADMSG, "restore: %d (%s)", rc, sc_strerror(rc));
		ck_assert_int_eq(r.waited, 1);
		ck_assert_int_eq(r.miss_reason, -1);
	}
	sc_l3_stats(l3, &s1);
	ck_assert_int_eq(s1.fills, s0.fills);
	ck_assert_int_eq(sc_fill_release(arena, sid, loc.digest), 0);
	ck_assert_int_eq(restore_check("dw", 30, 30, 7000, 13, &r), SC_RESTORE_FROM_L3);
}
END_TEST

/* Mirror records (DIR/quarantine/<digest>.mirror) left in the directory. */
static int mirror_records(void)
{
	char q[128];
	snprintf(q, sizeof(q), "%s/quarantine", tmpdir);
	DIR *d = opendir(q);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		n += len > 7 && strcmp(e->d_name + len - 7, ".mirror") == 0;
	}
	closedir(d);
	return n;
}

/* A quarantine done while no arena was bound leaves a mirror record; the next bind consumes it
 * whether or not that arena held a mirror of the object (here it held none). */
START_TEST(quarantine_records_are_consumed_by_the_next_bind)
{
	struct sc_location loc;
	put("nomirror", 12, 9000, 31, &loc);
	sc_l3_close(l3);
	char path[256];
	object_path(&loc, path, sizeof(path));
	flip_object_byte(&loc, 20, 0x10); /* a header byte */
	ck_assert_int_eq(mirror_records(), 0);
	struct sc_l3 *other; /* its open quarantines the object, with no arena bound */
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &other), 0);
	sc_l3_close(other);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(mirror_records(), 1);
	/* a binder out of file descriptors cannot read the records: it binds, and leaves them */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *ac;
		struct sc_l3 *lc;
		if (sc_arena_open(arena_name, &ac) || sc_l3_open(tmpdir, NULL, &lc))
			_exit(2);
		int lowest = dup(0); /* every descriptor below the lowest free one is taken */
		if (lowest < 0)
			_exit(3);
		close(lowest);
		struct rlimit rl = { (rlim_t)lowest, (rlim_t)lowest };
		if (setrlimit(RLIMIT_NOFILE, &rl) || dup(0) != -1)
			_exit(4);
		_exit(sc_l3_bind_arena(lc, ac) == 0 ? 0 : 5);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the bind without descriptors: %s %d",
		      WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	ck_assert_int_eq(mirror_records(), 1);
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_bind_arena(l3, arena), 0);
	ck_assert_int_eq(mirror_records(), 0);
}
END_TEST

Suite *restore_suite(void)
{
	Suite *s = suite_create("restore");
	TCase *tc = tcase_create("restore");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, second_fill_promotes_and_l2_serves);
	tcase_add_test(tc, long_prefix_promotes_on_first_fill);
	tcase_add_test(tc, regression_promotion_with_every_lease_held);
	tcase_add_test(tc, changed_durable_digest_invalidates_mirror);
	tcase_add_test(tc, regression_reput_is_restored_at_once_from_any_handle);
	tcase_add_test(tc, restore_refuses_another_models_or_states_object);
	tcase_add_test(tc, flipped_byte_is_quarantined_and_mirror_invalidated);
	tcase_add_test(tc, regression_quarantine_at_open_invalidates_mirror_and_is_reported);
	tcase_add_test(tc, quarantine_records_are_consumed_by_the_next_bind);
	tcase_add_test(tc, a_restore_with_every_lease_held_is_refused);
	tcase_add_test(tc, an_object_gone_before_the_locate_falls_back_to_a_shorter_prefix);
	tcase_add_test(tc, an_unusable_mirror_of_a_gone_object_falls_back_to_a_shorter_prefix);
	tcase_add_test(tc, a_namespace_of_the_longest_length_is_restored);
	tcase_add_test(tc, a_wait_on_a_damaged_claim_table_is_an_error);
	tcase_add_test(tc, a_fill_published_in_place_keeps_every_token_id);
	tcase_add_test(tc, restores_served_from_l2_keep_no_memory);
	tcase_add_test(tc, a_restore_in_a_damaged_arena_is_refused);
	tcase_add_test(tc, a_full_claim_table_does_not_stop_a_fill);
	tcase_add_test(tc, a_restore_reports_where_its_time_went);
	tcase_add_test(tc, a_location_whose_descriptor_is_not_this_prefix_is_not_served);
	tcase_add_test(tc, a_bad_longest_object_is_reported_once_then_the_shorter_served);
	tcase_add_test(tc, a_restore_whose_objects_vanish_twice_reports_the_miss);
	tcase_add_test(tc, a_promotion_by_copy_that_l2_refuses_is_reported_not_promoted);
	tcase_add_test(tc, a_link_under_an_object_name_is_quarantined_and_the_shorter_served);
	tcase_add_test(tc, a_waiter_that_wakes_to_a_miss_claims_before_it_fills);
	tcase_add_test(tc, a_waiter_fills_unclaimed_after_four_rounds);
	tcase_add_test(tc, two_processes_fills_count_as_two_hits);
	tcase_add_test(tc, single_flight_waits_then_hits_l2);
	suite_add_tcase(s, tc);
	TCase *big = tcase_create("big");
	tcase_add_checked_fixture(big, setup_big, teardown);
	tcase_set_timeout(big, 60);
	tcase_add_test(big, size_limit_64_mib);
	suite_add_tcase(s, big);
	return s;
}

SC_CHECK_MAIN(restore_suite)
