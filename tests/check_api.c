/*
 * tests/check_api.c — the API's conventions: the run-time layout table (every byte of every
 * public structure accounted for), the enum name helpers, sc_arena_extents, sc_promote_admit,
 * the batcher's explicit options, explicit zero values, reserved words refused, per-stage stats
 * by id, and what a lease and a restore promise about their reserved and in_arena fields.
 */
#include <errno.h>
#include <ftw.h>
#include <grp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/abi.h"

/* ---- the layout table ---- */

/* A program written before struct sc_l3_location was renamed still compiles and means the same. */
START_TEST(the_old_location_name_still_compiles)
{
	struct sc_l3_location old = { .token_count = 7 };
	struct sc_location *now = &old;
	ck_assert_uint_eq(now->token_count, 7);
	ck_assert_uint_eq(sizeof(struct sc_l3_location), sizeof(struct sc_location));
}
END_TEST

START_TEST(the_layout_table_accounts_for_every_byte)
{
	unsigned ntypes = 0;
	for (const struct abi_type *t; (t = abi_type_at(ntypes)); ntypes++) {
		ck_assert_uint_gt(t->nmembers, 0);
		size_t end = 0;
		for (unsigned i = 0; i < t->nmembers; i++) {
			const struct member *m = &t->members[i];
			/* in declaration order, no overlap, and a gap is alignment padding only */
			ck_assert_msg(m->offset >= end, "%s.%s overlaps the member before it", t->name, m->name);
			ck_assert_msg(m->offset - end < 8, "%s: %zu unlisted bytes before %s", t->name, m->offset - end,
				      m->name);
			ck_assert_uint_gt(m->size, 0);
			end = m->offset + m->size;
		}
		ck_assert_msg(end <= t->size && t->size - end < t->align, "%s: %zu unlisted bytes at the end", t->name,
			      t->size - end);
		ck_assert_uint_eq(t->size % t->align, 0);
		/* the public functions agree with the table */
		ck_assert_uint_eq(sc_sizeof(t->name), t->size);
		ck_assert_uint_eq(sc_alignof(t->name), t->align);
		ck_assert_str_eq(sc_type_name(ntypes), t->name);
		unsigned pub = 0;
		for (unsigned i = 0; i < t->nmembers; i++) {
			const struct member *m = &t->members[i];
			int64_t off = sc_offsetof(t->name, m->name);
			if (m->pub) {
				ck_assert_int_eq(off, (int64_t)m->offset);
				const char *name;
				size_t o, sz;
				ck_assert_int_eq(sc_type_field(t->name, pub, &name, &o, &sz), 0);
				ck_assert_str_eq(name, m->name);
				ck_assert_uint_eq(o, m->offset);
				ck_assert_uint_eq(sz, m->size);
				pub++;
			} else if (strcmp(m->name, "reserved") == 0 || m->name[strlen(m->name) - 1] == '_') {
				/* reserved and private blocks are never reported */
				ck_assert_int_eq(off, -ENOENT);
			}
		}
		ck_assert_int_eq(sc_type_field(t->name, pub, NULL, NULL, NULL), -ENOENT);
	}
	ck_assert_uint_eq(ntypes, 39);
	ck_assert_ptr_null(sc_type_name(ntypes));
	ck_assert_ptr_null(sc_type_name(~0u));
}
END_TEST

START_TEST(layouts_are_pinned)
{
	/* a size change is a deliberate ABI change: update these, the bindings and the docs together */
	ck_assert_uint_eq(sizeof(struct sc_lease), 440);
	ck_assert_uint_eq(offsetof(struct sc_lease, kv_desc), 88);
	ck_assert_uint_eq(offsetof(struct sc_lease, segments), 328); /* in former reserved room */
	ck_assert_uint_eq(offsetof(struct sc_lease, reserved), 336);
	ck_assert_uint_eq(sizeof(struct sc_segment), 24);
	ck_assert_uint_eq(offsetof(struct sc_arena_opts, segment_bytes), 72);
	ck_assert_uint_eq(offsetof(struct sc_l2_stats, physical_bytes), 224);
	ck_assert_uint_eq(offsetof(struct sc_lease, arena_), 392); /* the private block: 48 bytes */
	ck_assert_uint_eq(sizeof(struct sc_restore), 928);
	ck_assert_uint_eq(sizeof(struct sc_kv_desc), 240);         /* on disk and in the arena: never changes */
	ck_assert_uint_eq(sizeof(struct sc_batcher), 1104);
	ck_assert_uint_eq(sizeof(struct sc_l2_stats), 288);
	ck_assert_uint_eq(sizeof(struct sc_arena_opts), 112);
	ck_assert_uint_eq(sizeof(struct sc_commit), 56);
	/* costs, miss reasons and restore deadlines took reserved room; sizes unchanged */
	ck_assert_uint_eq(sizeof(struct sc_location), 368);
	ck_assert_uint_eq(offsetof(struct sc_location, cost_ns), 320);
	ck_assert_uint_eq(offsetof(struct sc_l2_stats, refused_low_benefit), 264);
	ck_assert_uint_eq(offsetof(struct sc_restore, predicted_ns), 368);
	ck_assert_uint_eq(sizeof(struct sc_restore_opts), 64);
	ck_assert_uint_eq(sizeof(struct sc_miss_stats), 512);
	ck_assert_uint_eq(sizeof(struct sc_event), 64);            /* a ring record converts in place */
	ck_assert_uint_eq(sizeof(struct sc_lookup), 96);
	ck_assert_uint_eq(sizeof(struct sc_events_stats), 112);
	ck_assert_uint_eq(offsetof(struct sc_l3_prefix_info, ns), 80);
}
END_TEST

START_TEST(layout_queries_refuse_bad_input)
{
	ck_assert_uint_eq(sc_sizeof(NULL), 0);
	ck_assert_uint_eq(sc_sizeof(""), 0);
	ck_assert_uint_eq(sc_sizeof("struct sc_lease"), 0); /* named without "struct " */
	ck_assert_uint_eq(sc_sizeof("sc_lease2"), 0);
	ck_assert_uint_eq(sc_alignof("nope"), 0);
	ck_assert_int_eq(sc_offsetof(NULL, "sec"), -ENOENT);
	ck_assert_int_eq(sc_offsetof("sc_lease", NULL), -ENOENT);
	ck_assert_int_eq(sc_offsetof("sc_lease", "arena_"), -ENOENT);   /* private */
	ck_assert_int_eq(sc_offsetof("sc_lease", "reserved"), -ENOENT); /* reserved */
	ck_assert_int_eq(sc_offsetof("sc_batcher", "count"), -ENOENT);  /* opaque */
	ck_assert_int_eq(sc_offsetof("sc_lease", "SEC"), -ENOENT);
	ck_assert_int_eq(sc_type_field("sc_batcher", 0, NULL, NULL, NULL), -ENOENT);
	ck_assert_int_eq(sc_type_field("nope", 0, NULL, NULL, NULL), -ENOENT);
	ck_assert_int_eq(sc_type_field(NULL, 0, NULL, NULL, NULL), -ENOENT);
	char big[8192];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	ck_assert_uint_eq(sc_sizeof(big), 0);
	ck_assert_int_eq(sc_offsetof("sc_lease", big), -ENOENT);
	/* the ones a binding uses most, by value */
	ck_assert_int_eq(sc_offsetof("sc_lease", "sec_len"), 16);
	ck_assert_int_eq(sc_offsetof("sc_digest", "hi"), 8);
	ck_assert_int_eq(sc_offsetof("sc_fsck_report", "reserved_bytes"), 48); /* a counter, not a reserved block */
}
END_TEST

/* ---- names ---- */

START_TEST(every_enum_value_has_a_name)
{
	ck_assert_str_eq(sc_huge_name(SC_HUGE_AUTO), "auto");
	ck_assert_str_eq(sc_huge_name(SC_HUGE_REQUIRE), "require");
	ck_assert_str_eq(sc_huge_name(SC_HUGE_OFF), "off");
	ck_assert_str_eq(sc_backing_name(SC_BACKING_HUGETLBFS_2M), "hugetlbfs-2M");
	ck_assert_str_eq(sc_backing_name(SC_BACKING_FILE_4K), "file-4k");
	ck_assert_str_eq(sc_payload_kind_name(SC_PAYLOAD_FULL_STATE), "full_state");
	ck_assert_str_eq(sc_payload_kind_name(SC_PAYLOAD_RECURRENT_ONLY), "recurrent_only");
	ck_assert_str_eq(sc_payload_kind_name(SC_PAYLOAD_KV_RECURRENT), "kv_recurrent");
	ck_assert_str_eq(sc_origin_name(SC_ORIGIN_DIRECT), "direct");
	ck_assert_str_eq(sc_origin_name(SC_ORIGIN_FROM_L3), "l3");
	ck_assert_str_eq(sc_l3_odirect_name(SC_L3_ODIRECT_AUTO), "auto");
	ck_assert_str_eq(sc_l3_odirect_name(SC_L3_ODIRECT_ON), "on");
	ck_assert_str_eq(sc_l3_odirect_name(SC_L3_ODIRECT_OFF), "off");
	ck_assert_str_eq(sc_promote_why_name(SC_PROMOTE_WHY_TERMINAL), "terminal");
	ck_assert_str_eq(sc_promote_why_name(SC_PROMOTE_WHY_OVERSIZE), "oversize");
	ck_assert_str_eq(sc_promote_why_name(SC_PROMOTE_WHY_LONG_PREFIX), "long_prefix");
	ck_assert_str_eq(sc_promote_why_name(SC_PROMOTE_WHY_SECOND_HIT), "second_hit");
	ck_assert_str_eq(sc_promote_why_name(SC_PROMOTE_WHY_FIRST_HIT), "first_hit");
	ck_assert_str_eq(sc_restore_source_name(SC_RESTORE_FROM_L2), "l2");
	ck_assert_str_eq(sc_restore_source_name(SC_RESTORE_FROM_L3), "l3");
	ck_assert_str_eq(sc_ring_state_name(SC_RING_FREE), "free");
	ck_assert_str_eq(sc_ring_state_name(SC_RING_CLAIMING), "claiming");
	ck_assert_str_eq(sc_ring_state_name(SC_RING_LIVE), "live");
	ck_assert_str_eq(sc_ring_state_name(SC_RING_CLOSED), "closed");
	ck_assert_str_eq(sc_extent_kind_name(SC_EXTENT_HEAP), "heap");
	/* anything else, including what a corrupted arena could hold, is "unknown", never NULL */
	const char *(*fns[])(int) = { sc_huge_name, sc_backing_name, sc_payload_kind_name, sc_origin_name,
				      sc_l3_odirect_name, sc_promote_why_name, sc_restore_source_name,
				      sc_ring_state_name, sc_extent_kind_name };
	int bad[] = { -1, 99, 0x7fffffff, -0x7fffffff - 1 };
	for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++)
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			ck_assert_str_eq(fns[f](bad[i]), "unknown");
	ck_assert_str_eq(sc_payload_kind_name(0), "unknown");
	ck_assert_str_eq(sc_restore_source_name(0), "unknown");
}
END_TEST

/* ---- a small fixture: one arena, one stage ---- */

static struct sc_arena *arena;
static const char *arena_name;
static struct sc_stage *stage;
static int32_t toks[64];
static char payload[8192];

static void setup(void)
{
	arena = sc_test_arena("api", 16u << 20, &arena_name);
	ck_assert_int_eq(sc_stage_open(arena, "model-api", "state-api", &stage), 0);
	for (int i = 0; i < 64; i++)
		toks[i] = 1000 + i;
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (char)(i * 7 + 1);
}

static void teardown(void)
{
	sc_stage_close(stage);
	sc_test_arena_destroy(arena, arena_name);
}

static int admit(struct sc_stage *st, size_t n, uint32_t origin)
{
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { payload }, .sec_len = { sizeof(payload) } };
	return sc_l2_admit(st, "ns", toks, n, sc_digest_of(payload, sizeof(payload)), &p, origin);
}

START_TEST(digest_of_is_the_digest)
{
	struct sc_digest a = sc_digest_of(payload, sizeof(payload)), b = sc_digest(payload, sizeof(payload));
	ck_assert(sc_digest_equal(a, b));
	ck_assert(sc_digest_equal(sc_digest_of(NULL, 0), sc_digest_of("", 0)));
	ck_assert(!sc_digest_equal(a, sc_digest_of(payload, sizeof(payload) - 1)));
}
END_TEST

START_TEST(a_lease_has_zeroed_reserved_words)
{
	ck_assert_int_eq(admit(stage, 8, SC_ORIGIN_DIRECT), 0);
	struct sc_lease l;
	memset(&l, 0xa5, sizeof(l)); /* whatever the caller's stack held */
	ck_assert_int_eq(sc_l2_get(stage, "ns", toks, 8, NULL, &l), 0);
	ck_assert_uint_eq(l.reserved0, 0);
	for (size_t i = 0; i < sizeof(l.reserved) / sizeof(l.reserved[0]); i++)
		ck_assert_uint_eq(l.reserved[i], 0);
	ck_assert_uint_eq(l.sec_len[0], sizeof(payload));
	ck_assert_int_eq(memcmp(l.sec[0], payload, sizeof(payload)), 0);
	sc_lease_release(&l);
	sc_lease_release(&l); /* idempotent */
	struct sc_l2_stats st;
	ck_assert_int_eq(sc_l2_stats(arena, NULL, &st), 0);
	ck_assert_uint_eq(st.leases, 0);
}
END_TEST

/* ---- extents ---- */

static void check_extents(struct sc_arena *a, struct sc_stage *st, uint64_t want_page)
{
	struct sc_arena_extent ex[4];
	ck_assert_int_eq(sc_arena_extents(a, NULL, 0), 1);
	memset(ex, 0xa5, sizeof(ex));
	ck_assert_int_eq(sc_arena_extents(a, ex, 4), 1);
	ck_assert_uint_eq(ex[0].kind, SC_EXTENT_HEAP);
	ck_assert_uint_eq(ex[0].page_size, want_page);
	ck_assert_uint_eq((uintptr_t)ex[0].base % want_page, 0);
	ck_assert_uint_eq(ex[0].bytes % want_page, 0);
	ck_assert_uint_eq(ex[0].file_offset % want_page, 0);
	ck_assert_uint_eq(ex[0].flags, 0);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(ex[0].reserved[i], 0);
	struct sc_arena_info info;
	ck_assert_int_eq(sc_arena_info(a, &info), 0);
	ck_assert_uint_ge(ex[0].bytes, info.heap_bytes);
	ck_assert_uint_le(ex[0].file_offset + ex[0].bytes, info.size_bytes);

	/* a lease's bytes lie inside the extent, and file_offset names the same bytes in the file */
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { payload }, .sec_len = { sizeof(payload) } };
	ck_assert_int_eq(sc_l2_admit(st, "ext", toks, 4, sc_digest_of(payload, sizeof(payload)), &p, SC_ORIGIN_DIRECT), 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "ext", toks, 4, NULL, &l), 0);
	const uint8_t *s0 = l.sec[0], *b = ex[0].base;
	ck_assert(s0 >= b && s0 + l.sec_len[0] <= b + ex[0].bytes);
	int fd = open(info.path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	void *m = mmap(NULL, ex[0].bytes, PROT_READ, MAP_SHARED, fd, (off_t)ex[0].file_offset);
	ck_assert_msg(m != MAP_FAILED, "mmap of the extent: %s", strerror(errno));
	ck_assert_int_eq(memcmp((const uint8_t *)m + (s0 - b), payload, sizeof(payload)), 0);
	munmap(m, ex[0].bytes);
	close(fd);
	sc_lease_release(&l);
}

START_TEST(extents_cover_every_lease_4k)
{
	check_extents(arena, stage, 4096);
	ck_assert_int_eq(sc_arena_extents(NULL, NULL, 0), -EINVAL);
	ck_assert_int_eq(sc_arena_extents(arena, NULL, 1), -EINVAL);
}
END_TEST

START_TEST(extents_cover_every_lease_hugetlbfs)
{
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_REQUIRE };
	const char *name = sc_test_name("apihuge");
	struct sc_arena *a = NULL;
	int rc = sc_arena_create(name, &o, &a);
	if (rc == -ENODEV || rc == -ENOMEM || rc == -EACCES) {
		sc_skip("no 2 MiB hugetlbfs arena here (%s): run stagecache setup", sc_strerror(rc));
		return;
	}
	ck_assert_msg(rc == 0, "create: %s", sc_strerror(rc));
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	check_extents(a, st, 2u << 20);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- promotion in one call ---- */

START_TEST(promote_admit_records_the_attempt)
{
	struct sc_digest d = sc_digest_of(payload, sizeof(payload));
	uint64_t id = sc_stage_id(stage);
	int why;
	ck_assert_int_eq(sc_promote_consider(arena, id, d, 16, sizeof(payload), &why), 0);
	ck_assert_int_eq(why, SC_PROMOTE_WHY_FIRST_HIT);
	ck_assert_int_eq(sc_promote_consider(arena, id, d, 16, sizeof(payload), &why), 1);
	ck_assert_int_eq(why, SC_PROMOTE_WHY_SECOND_HIT);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { payload }, .sec_len = { sizeof(payload) } };
	ck_assert_int_eq(sc_promote_admit(stage, "ns", toks, 16, d, &p), 0);
	/* one call did both: the entry is in L2 with origin l3, and its outcome is recorded: published */
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_peek(stage, "ns", toks, 16, &info), 0);
	ck_assert_uint_eq(info.origin, SC_ORIGIN_FROM_L3);
	struct sc_promote_stats ps;
	ck_assert_int_eq(sc_promote_stats(arena, &ps), 0);
	ck_assert_uint_eq(ps.published, 1);
	/* still in L2: another fill is not promoted again (the seed's rule) ... */
	ck_assert_int_eq(sc_promote_consider(arena, id, d, 16, sizeof(payload), &why), 0);
	ck_assert_int_eq(why, SC_PROMOTE_WHY_TERMINAL);
	/* ... but once it has left L2, a fill of it comes back at once */
	struct sc_key k;
	ck_assert_int_eq(sc_l2_key(stage, "ns", toks, 16, &k), 0);
	ck_assert_int_eq(sc_l2_remove(stage, k), 0);
	ck_assert_int_eq(sc_promote_consider(arena, id, d, 16, sizeof(payload), &why), 1);
	ck_assert_int_eq(why, SC_PROMOTE_WHY_RETURNING);
}
END_TEST

START_TEST(a_refused_promotion_is_still_recorded)
{
	/* long prefix: yes on the first fill; the admit is refused (wrong digest) */
	struct sc_digest d = sc_digest_of(payload, sizeof(payload));
	uint64_t id = sc_stage_id(stage);
	ck_assert_int_eq(sc_promote_consider(arena, id, d, SC_PROMOTE_RESTART_TOKENS, sizeof(payload), NULL), 1);
	char other[64] = { 1 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { other }, .sec_len = { sizeof(other) } };
	ck_assert_int_eq(sc_promote_admit(stage, "ns", toks, 16, d, &p), -EBADMSG);
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_peek(stage, "ns", toks, 16, &info), -ENOENT);
	int why;
	ck_assert_int_eq(sc_promote_consider(arena, id, d, SC_PROMOTE_RESTART_TOKENS, sizeof(payload), &why), 0);
	ck_assert_int_eq(why, SC_PROMOTE_WHY_TERMINAL);
	/* with no observation at all it still admits (nothing to record); bad arguments are refused */
	struct sc_payload good = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { payload }, .sec_len = { sizeof(payload) } };
	ck_assert_int_eq(sc_promote_admit(stage, "other", toks, 16, d, &good), 0);
	ck_assert_int_eq(sc_promote_admit(NULL, "ns", toks, 16, d, &good), -EINVAL);
	ck_assert_int_eq(sc_promote_admit(stage, "ns", NULL, 16, d, &good), -EINVAL);
	ck_assert_int_eq(sc_promote_admit(stage, "ns", toks, 16, d, NULL), -EINVAL);
}
END_TEST

/* ---- batcher: explicit interval 0, distinct outcomes ---- */

struct seen {
	int n;
	uint32_t tokens[64];
};

static int count_commit(const struct sc_commit *c, void *ctx)
{
	struct seen *s = ctx;
	if (s->n < 64)
		s->tokens[s->n] = c->token_count;
	s->n++;
	return 0;
}

START_TEST(batcher_interval_zero_is_asked_for_explicitly)
{
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(arena, &r), 0);
	struct sc_batcher b;
	/* explicit 0: every token is its own commit, even at the same elapsed time */
	struct sc_batcher_opts o = { .interval_ns = 0, .flags = SC_BATCHER_OPT_INTERVAL };
	ck_assert_int_eq(sc_batcher_init_opts(&b, r, 1, 2, &o), 0);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(sc_batcher_commit(&b, i, 1000), 0);
	ck_assert_uint_eq(sc_batcher_commits(&b), 5);
	ck_assert_uint_eq(sc_batcher_pending(&b), 0);
	/* a plain zero still means the default (100 ms): the same tokens batch up */
	struct sc_batcher_opts d = { 0 };
	ck_assert_int_eq(sc_batcher_init_opts(&b, r, 3, 4, &d), 0);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(sc_batcher_commit(&b, i, 1000 + (uint64_t)i), 0);
	ck_assert_uint_eq(sc_batcher_commits(&b), 1); /* the first token only */
	ck_assert_uint_eq(sc_batcher_pending(&b), 4);
	ck_assert_int_eq(sc_batcher_finish(&b, SC_COMMIT_FINISHED), 0);
	struct seen s = { 0 };
	ck_assert_int_eq(sc_ring_poll(arena, count_commit, &s, 64), 7);
	ck_assert_uint_eq(s.tokens[5], 1);
	ck_assert_uint_eq(s.tokens[6], 4);
	/* bad options */
	struct sc_batcher_opts bad = { .flags = 0x80 };
	ck_assert_int_eq(sc_batcher_init_opts(&b, r, 1, 2, &bad), -EINVAL);
	bad = (struct sc_batcher_opts){ .reserved = { 0, 1 } };
	ck_assert_int_eq(sc_batcher_init_opts(&b, r, 1, 2, &bad), -EINVAL);
	bad = (struct sc_batcher_opts){ .capacity = SC_BATCHER_CAPACITY_MAX + 1 };
	ck_assert_int_eq(sc_batcher_init_opts(&b, r, 1, 2, &bad), -EINVAL);
	ck_assert_int_eq(sc_batcher_init_opts(NULL, r, 1, 2, NULL), -EINVAL);
	sc_ring_consumer_close(arena);
	sc_ring_close(r);
}
END_TEST

START_TEST(batcher_outcomes_are_distinct_without_counting)
{
	/* a tiny ring: fill it directly, then the batcher sees both ring-full outcomes */
	struct sc_arena_opts ao = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .ring_count = 1, .ring_bytes = 4096 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("apiring", &ao, &name);
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(a, &r), 0);
	struct sc_commit c = { .request_id = 1 };
	while (sc_ring_try_submit(r, &c) == 0)
		;
	struct sc_batcher b;
	struct sc_batcher_opts o = { .capacity = 3 };
	ck_assert_int_eq(sc_batcher_init_opts(&b, r, 5, 6, &o), 0);
	/* taken, deferred: 1, 2, 3 (the first is due, the rest retry the full ring) */
	for (int i = 1; i <= 3; i++)
		ck_assert_int_eq(sc_batcher_commit(&b, i, (uint64_t)i), SC_BATCHER_DEFERRED);
	/* refused: the 4th token must be sent again, as many times as it takes */
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(sc_batcher_commit(&b, 4, 10), -EAGAIN);
	ck_assert_uint_eq(sc_batcher_count(&b), 3);
	/* the consumer makes room: the same token is taken now */
	struct seen s = { 0 };
	while (sc_ring_poll(a, count_commit, &s, 64) > 0)
		;
	ck_assert_int_eq(sc_batcher_commit(&b, 4, 11), 0);
	ck_assert_int_eq(sc_batcher_finish(&b, SC_COMMIT_FINISHED), 0);
	ck_assert_int_eq(sc_batcher_commit(&b, 5, 12), -EINVAL);
	memset(&s, 0, sizeof(s));
	while (sc_ring_poll(a, count_commit, &s, 64) > 0)
		;
	/* [1 2 3] then [4] with the terminal: nothing lost, nothing doubled */
	ck_assert_int_eq(s.n, 2);
	ck_assert_uint_eq(s.tokens[0], 3);
	ck_assert_uint_eq(s.tokens[1], 1);
	sc_ring_consumer_close(a);
	sc_ring_close(r);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- explicit zero values, reserved words ---- */

START_TEST(arena_opts_refuse_unknown_flags_and_reserved_words)
{
	struct sc_arena *a = NULL;
	const char *name = sc_test_name("apiopts");
	struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .flags = 0x100 };
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	o = (struct sc_arena_opts){ .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .reserved = { [3] = 1 } };
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	o = (struct sc_arena_opts){ .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .gid = -2 };
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	o = (struct sc_arena_opts){ .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .gid = (int64_t)1 << 40 };
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	ck_assert_ptr_null(a);
	/* nothing was left behind by the refusals */
	ck_assert_int_eq(sc_arena_open(name, &a), -ENOENT);
}
END_TEST

/* Create an arena in a child whose effective group is 65534 and report the file's group. */
static gid_t group_of_created(uint32_t flags, int64_t gid)
{
	const char *name = sc_test_name("apigid");
	pid_t pid = fork();
	if (pid == 0) {
		if (setegid(65534))
			_exit(2);
		struct sc_arena *a;
		struct sc_arena_opts o = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .gid = gid, .flags = flags };
		_exit(sc_arena_create(name, &o, &a) ? 3 : 0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", st);
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/stagecache.%s", name);
	struct stat sb;
	ck_assert_int_eq(stat(path, &sb), 0);
	sc_arena_destroy(NULL, name);
	return sb.st_gid;
}

START_TEST(group_zero_is_asked_for_explicitly)
{
	if (!sc_test_is_root()) {
		sc_skip("not root: cannot give a file to group 0");
		return;
	}
	ck_assert_uint_eq(group_of_created(0, 0), 65534);                /* 0: the creator's */
	ck_assert_uint_eq(group_of_created(0, -1), 65534);               /* -1: the creator's */
	ck_assert_uint_eq(group_of_created(SC_ARENA_OPT_GID, 0), 0);     /* explicit: root's group */
	ck_assert_uint_eq(group_of_created(SC_ARENA_OPT_GID, 65534), 65534);
}
END_TEST

START_TEST(l3_opts_refuse_reserved_words)
{
	char dir[] = "/var/tmp/sc-api-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_l3 *l3 = NULL;
	struct sc_l3_opts o = { .reserved = { 0, 7 } };
	ck_assert_int_eq(sc_l3_open(dir, &o, &l3), -EINVAL);
	ck_assert_ptr_null(l3);
	o = (struct sc_l3_opts){ 0 };
	ck_assert_int_eq(sc_l3_open(dir, &o, &l3), 0);
	sc_l3_close(l3);
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- per-stage stats by id ---- */

START_TEST(stage_stats_by_id_match_the_open_stage)
{
	struct sc_stage *other;
	ck_assert_int_eq(sc_stage_open(arena, "model-b", "state-b", &other), 0);
	ck_assert_int_eq(admit(stage, 8, SC_ORIGIN_DIRECT), 0);
	ck_assert_int_eq(admit(other, 8, SC_ORIGIN_DIRECT), 0);
	ck_assert_int_eq(admit(other, 9, SC_ORIGIN_DIRECT), 0);
	struct sc_lease l;
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(sc_l2_get(stage, "ns", toks, 8, NULL, &l), 0);
		sc_lease_release(&l);
	}
	ck_assert_int_eq(sc_l2_get(other, "ns", toks, 7, NULL, &l), -ENOENT);

	uint64_t ids[4];
	ck_assert_int_eq(sc_l2_stage_ids(arena, NULL, 0), 2);
	ck_assert_int_eq(sc_l2_stage_ids(arena, ids, 1), 2); /* more than fit: the count, one written */
	ck_assert_int_eq(sc_l2_stage_ids(arena, ids, 4), 2);
	ck_assert((ids[0] == sc_stage_id(stage) && ids[1] == sc_stage_id(other)) ||
		  (ids[1] == sc_stage_id(stage) && ids[0] == sc_stage_id(other)));
	struct sc_stage *sts[2] = { stage, other };
	for (int i = 0; i < 2; i++) {
		struct sc_l2_stats a, b;
		ck_assert_int_eq(sc_l2_stats(arena, sts[i], &a), 0);
		ck_assert_int_eq(sc_l2_stats_id(arena, sc_stage_id(sts[i]), &b), 0);
		ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
	}
	struct sc_l2_stats s1, s2, g1, g2;
	ck_assert_int_eq(sc_l2_stats_id(arena, sc_stage_id(stage), &s1), 0);
	ck_assert_int_eq(sc_l2_stats_id(arena, sc_stage_id(other), &s2), 0);
	ck_assert_uint_eq(s1.entries, 1);
	ck_assert_uint_eq(s1.hits, 3);
	ck_assert_uint_eq(s2.entries, 2);
	ck_assert_uint_eq(s2.misses, 1);
	ck_assert_int_eq(sc_l2_stats_id(arena, 0, &g1), 0);
	ck_assert_int_eq(sc_l2_stats(arena, NULL, &g2), 0);
	ck_assert_int_eq(memcmp(&g1, &g2, sizeof(g1)), 0);
	ck_assert_uint_eq(g1.entries, 3);
	ck_assert_uint_eq(g1.hits, 3);
	for (size_t i = 0; i < sizeof(g1.reserved) / sizeof(g1.reserved[0]); i++)
		ck_assert_uint_eq(g1.reserved[i], 0);
	/* an id nobody opened; bad arguments */
	ck_assert_int_eq(sc_l2_stats_id(arena, 0x1234, &g1), -ENOENT);
	ck_assert_int_eq(sc_l2_stats_id(NULL, 0, &g1), -EINVAL);
	ck_assert_int_eq(sc_l2_stats_id(arena, 0, NULL), -EINVAL);
	ck_assert_int_eq(sc_l2_stage_ids(NULL, ids, 4), -EINVAL);
	ck_assert_int_eq(sc_l2_stage_ids(arena, NULL, 4), -EINVAL);
	sc_stage_close(other);
}
END_TEST

/* ---- a restore says whether its bytes are in the arena ---- */

START_TEST(a_restore_says_whether_it_is_in_the_arena)
{
	char dir[] = "/var/tmp/sc-api-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { payload }, .sec_len = { sizeof(payload) } };
	struct sc_l3_put_args pa = { .ns = "r", .tokens = toks, .token_count = 32, .payload = &p };
	ck_assert_int_eq(sc_l3_put(l3, &pa, NULL), 0);
	struct sc_restore r;
	memset(&r, 0xa5, sizeof(r));
	ck_assert_int_eq(sc_restore(stage, l3, "r", toks, 40, 0, &r), 32);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L3);
	ck_assert_int_eq(r.in_arena, 1);
	ck_assert_uint_eq(r.reserved0, 0);
	for (size_t i = 0; i < sizeof(r.reserved) / sizeof(r.reserved[0]); i++)
		ck_assert_uint_eq(r.reserved[i], 0);
	struct sc_arena_extent ex;
	ck_assert_int_eq(sc_arena_extents(arena, &ex, 1), 1);
	ck_assert((const uint8_t *)r.sec[0] >= (const uint8_t *)ex.base &&
		  (const uint8_t *)r.sec[0] + r.sec_len[0] <= (const uint8_t *)ex.base + ex.bytes);
	ck_assert_int_eq(memcmp(r.sec[0], payload, sizeof(payload)), 0);
	sc_restore_release(&r);
	sc_l3_close(l3);
	sc_test_rm_tree(dir);
}
END_TEST

Suite *api_suite(void)
{
	Suite *s = suite_create("api");
	TCase *t = tcase_create("layouts");
	tcase_add_test(t, the_old_location_name_still_compiles);
	tcase_add_test(t, the_layout_table_accounts_for_every_byte);
	tcase_add_test(t, layouts_are_pinned);
	tcase_add_test(t, layout_queries_refuse_bad_input);
	tcase_add_test(t, every_enum_value_has_a_name);
	suite_add_tcase(s, t);
	t = tcase_create("calls");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, digest_of_is_the_digest);
	tcase_add_test(t, a_lease_has_zeroed_reserved_words);
	tcase_add_test(t, extents_cover_every_lease_4k);
	tcase_add_test(t, extents_cover_every_lease_hugetlbfs);
	tcase_add_test(t, promote_admit_records_the_attempt);
	tcase_add_test(t, a_refused_promotion_is_still_recorded);
	tcase_add_test(t, batcher_interval_zero_is_asked_for_explicitly);
	tcase_add_test(t, batcher_outcomes_are_distinct_without_counting);
	tcase_add_test(t, arena_opts_refuse_unknown_flags_and_reserved_words);
	tcase_add_test(t, group_zero_is_asked_for_explicitly);
	tcase_add_test(t, l3_opts_refuse_reserved_words);
	tcase_add_test(t, stage_stats_by_id_match_the_open_stage);
	tcase_add_test(t, a_restore_says_whether_it_is_in_the_arena);
	suite_add_tcase(s, t);
	return s;
}

SC_CHECK_MAIN(api_suite)
