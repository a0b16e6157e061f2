/* tests/check_key.c — digests and L2 keys. */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "sc_check.h"

START_TEST(digest_matches_xxh3_128)
{
	const char *msg = "stagecache";
	struct sc_digest d = sc_digest(msg, strlen(msg));
	XXH128_hash_t h = XXH3_128bits(msg, strlen(msg));
	ck_assert_uint_eq(d.lo, h.low64);
	ck_assert_uint_eq(d.hi, h.high64);
	struct sc_digest e = sc_digest(NULL, 0);
	XXH128_hash_t he = XXH3_128bits("", 0);
	ck_assert_uint_eq(e.lo, he.low64);
	/* large input goes through the dispatch path: still identical */
	static uint8_t big[1 << 20];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 31);
	d = sc_digest(big, sizeof(big));
	h = XXH3_128bits(big, sizeof(big));
	ck_assert(d.lo == h.low64 && d.hi == h.high64);
}
END_TEST

START_TEST(digest_of_sections_is_digest_of_wire)
{
	uint8_t w[300];
	for (int i = 0; i < 300; i++)
		w[i] = (uint8_t)(i * 13);
	struct sc_digest whole = sc_digest(w, 300);
	ck_assert(sc_digest_equal(sc_digest_sections(w, 100, w + 100, 200), whole));
	ck_assert(sc_digest_equal(sc_digest_sections(w, 300, NULL, 0), whole));
	ck_assert(sc_digest_equal(sc_digest_sections(NULL, 0, w, 300), whole));
}
END_TEST

START_TEST(digest_hex_round_trip)
{
	struct sc_digest d = sc_digest("abc", 3), p;
	char hex[SC_DIGEST_HEX_LEN + 1];
	sc_digest_format(d, hex);
	ck_assert_uint_eq(strlen(hex), 32);
	for (int i = 0; i < 32; i++)
		ck_assert(strchr("0123456789abcdef", hex[i]));
	/* canonical: high64 first, like XXH128_canonicalFromHash */
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, (XXH128_hash_t){ d.lo, d.hi });
	char ref[33];
	for (int i = 0; i < 16; i++)
		sprintf(ref + 2 * i, "%02x", c.digest[i]);
	ck_assert_str_eq(hex, ref);
	ck_assert_int_eq(sc_digest_parse(hex, &p), 0);
	ck_assert(sc_digest_equal(d, p));
	for (int i = 0; i < 32; i++)
		hex[i] = (char)toupper((unsigned char)hex[i]);
	ck_assert_int_eq(sc_digest_parse(hex, &p), 0);
	ck_assert(sc_digest_equal(d, p));
}
END_TEST

START_TEST(digest_parse_rejects_bad_input)
{
	struct sc_digest p;
	ck_assert_int_eq(sc_digest_parse("", &p), -EINVAL);
	ck_assert_int_eq(sc_digest_parse("0123", &p), -EINVAL);
	ck_assert_int_eq(sc_digest_parse("0123456789abcdef0123456789abcdeg", &p), -EINVAL);
	ck_assert_int_eq(sc_digest_parse("0123456789abcdef0123456789abcdef0", &p), -EINVAL);
	ck_assert_int_eq(sc_digest_parse(NULL, &p), -EINVAL);
	ck_assert_int_eq(sc_digest_parse(" 123456789abcdef0123456789abcdef", &p), -EINVAL);
}
END_TEST

START_TEST(keys_separate_stages_namespaces_and_tokens)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("key", 16 << 20, &name);
	struct sc_stage *s1, *s2, *s3, *s1b;
	ck_assert_int_eq(sc_stage_open(a, "ab", "c", &s1), 0);
	ck_assert_int_eq(sc_stage_open(a, "a", "bc", &s2), 0);
	ck_assert_int_eq(sc_stage_open(a, "ab", "d", &s3), 0);
	ck_assert_int_eq(sc_stage_open(a, "ab", "c", &s1b), 0);
	ck_assert_uint_eq(sc_stage_id(s1), sc_stage_id(s1b));
	ck_assert_uint_ne(sc_stage_id(s1), sc_stage_id(s2));
	int32_t t[4] = { 1, 2, 3, -4 };
	struct sc_key k1, k2, k3, k1b, kns, kshort;
	ck_assert_int_eq(sc_l2_key(s1, "ns", t, 4, &k1), 0);
	ck_assert_int_eq(sc_l2_key(s2, "ns", t, 4, &k2), 0);
	ck_assert_int_eq(sc_l2_key(s3, "ns", t, 4, &k3), 0);
	ck_assert_int_eq(sc_l2_key(s1b, "ns", t, 4, &k1b), 0);
	ck_assert_int_eq(sc_l2_key(s1, "ns2", t, 4, &kns), 0);
	ck_assert_int_eq(sc_l2_key(s1, "ns", t, 3, &kshort), 0);
	ck_assert(k1.lo == k1b.lo && k1.hi == k1b.hi);
	ck_assert(k1.lo != k2.lo && k1.lo != k3.lo && k1.lo != kns.lo && k1.lo != kshort.lo);
	/* NULL namespace is the empty namespace */
	struct sc_key ke, kn;
	ck_assert_int_eq(sc_l2_key(s1, "", t, 4, &ke), 0);
	ck_assert_int_eq(sc_l2_key(s1, NULL, t, 4, &kn), 0);
	ck_assert(ke.lo == kn.lo && ke.hi == kn.hi);
	/* bad input */
	ck_assert_int_eq(sc_l2_key(NULL, "ns", t, 4, &k1), -EINVAL);
	ck_assert_int_eq(sc_l2_key(s1, "ns", NULL, 4, &k1), -EINVAL);
	ck_assert_int_eq(sc_l2_key(s1, "ns", t, 4, NULL), -EINVAL); /* nowhere to write it */
	ck_assert_int_eq(sc_l2_key(s1, "ns", NULL, 0, &k1), 0);     /* no tokens, none read */
	struct sc_stage *bad = (struct sc_stage *)1;
	ck_assert_int_eq(sc_stage_open(a, "", "x", &bad), -EINVAL);
	ck_assert_ptr_null(bad);
	ck_assert_int_eq(sc_stage_open(a, "x", NULL, &bad), -EINVAL);
	ck_assert_int_eq(sc_stage_open(NULL, "x", "y", &bad), -EINVAL);
	/* identities of SC_IDENTITY_MAX bytes are taken whole; one byte more is refused (never cut to
	 * the first SC_IDENTITY_MAX, which would give two identities one stage) */
	static char big[SC_IDENTITY_MAX + 2];
	memset(big, 'm', SC_IDENTITY_MAX + 1);
	ck_assert_int_eq(sc_stage_open(a, big, "x", &bad), -EINVAL);
	ck_assert_int_eq(sc_stage_open(a, "x", big, &bad), -EINVAL);
	big[SC_IDENTITY_MAX] = 0;
	struct sc_stage *longest;
	ck_assert_int_eq(sc_stage_open(a, big, big, &longest), 0);
	sc_stage_close(longest);
	sc_stage_close(s1);
	sc_stage_close(s2);
	sc_stage_close(s3);
	sc_stage_close(s1b);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(keys_depend_on_the_arena_secret)
{
	const char *n1, *n2;
	struct sc_arena *a = sc_test_arena("key", 16 << 20, &n1), *b = sc_test_arena("key", 16 << 20, &n2);
	struct sc_stage *sa, *sb;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &sa), 0);
	ck_assert_int_eq(sc_stage_open(b, "m", "s", &sb), 0);
	int32_t t[2] = { 7, 8 };
	struct sc_key ka, kb;
	ck_assert_int_eq(sc_l2_key(sa, "n", t, 2, &ka), 0);
	ck_assert_int_eq(sc_l2_key(sb, "n", t, 2, &kb), 0);
	ck_assert(ka.lo != kb.lo || ka.hi != kb.hi);
	sc_stage_close(sa);
	sc_stage_close(sb);
	sc_test_arena_destroy(a, n1);
	sc_test_arena_destroy(b, n2);
}
END_TEST

START_TEST(prefix_keys_equal_individual_keys)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("key", 16 << 20, &name);
	struct sc_stage *s;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &s), 0);
	int32_t t[1000];
	for (int i = 0; i < 1000; i++)
		t[i] = i * 7 - 300;
	struct sc_key keys[16];
	int k = sc_l2_prefix_keys(s, "ns", t, 1000, 64, keys, 16);
	ck_assert_int_eq(k, 15); /* 64 .. 960 */
	for (int i = 0; i < k; i++) {
		struct sc_key one;
		ck_assert_int_eq(sc_l2_key(s, "ns", t, (size_t)(i + 1) * 64, &one), 0);
		ck_assert(one.lo == keys[i].lo && one.hi == keys[i].hi);
	}
	/* at most @max keys, and nothing written past them */
	struct sc_key canary = { 0x1234, 0x5678 };
	for (uint32_t max = 1; max < 16; max++) {
		struct sc_key few[17];
		for (int i = 0; i < 17; i++)
			few[i] = canary;
		ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", t, 1000, 64, few, max), (int)max);
		ck_assert(few[max].lo == canary.lo && few[max].hi == canary.hi);
		ck_assert(few[max - 1].lo == keys[max - 1].lo && few[max - 1].hi == keys[max - 1].hi);
	}
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", t, 1000, 64, keys, 3), 3);
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", t, 100, 0, keys, 16), 0); /* default block 256 */
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", t, 1000, 0, keys, 16), 3);
	sc_stage_close(s);
	sc_test_arena_destroy(a, name);
}
END_TEST

int key_pfx_hashes(const uint8_t *secret, const char *ns, const int32_t *tokens, uint32_t n, const uint32_t *lens,
		   uint32_t nlens, struct sc_key *out);

/* The prefix hash P(len) of lib/key.c against its documented layout, computed here with plain
 * (undispatched) streaming XXH3 over the same bytes: C_0 = H("SCPFX002" | u32 ns length | ns),
 * C_{i+1} = H(C_i | H(block i)), P = H(C_{len/256} | u32 len | tokens [256*(len/256), len)), H the
 * XXH3-128 keyed by the secret. Every length from 1 to 600 (each tail length, 0 to 255 tokens; one
 * and two whole blocks), for namespaces of 0, 2, 64 and 65 bytes (the last one hashed through a
 * streaming state, the others from one buffer). Keys name L3 objects on disk: this layout must
 * never change. */
static struct sc_key ref_h(const uint8_t *sec, const void *a, size_t al, const void *b, size_t bl)
{
	XXH3_state_t st;
	XXH3_128bits_reset_withSecret(&st, sec, 192);
	XXH3_128bits_update(&st, a, al);
	if (bl)
		XXH3_128bits_update(&st, b, bl);
	XXH128_hash_t h = XXH3_128bits_digest(&st);
	return (struct sc_key){ h.low64, h.high64 };
}

START_TEST(prefix_hashes_follow_their_documented_layout)
{
	uint8_t sec[192];
	for (int i = 0; i < 192; i++)
		sec[i] = (uint8_t)(i * 37 + 11);
	int32_t t[600];
	for (int i = 0; i < 600; i++)
		t[i] = i * 2654435 - 77;
	char ns[66];
	memset(ns, 'q', sizeof(ns));
	static const uint32_t nls[] = { 0, 2, 64, 65 };
	for (size_t k = 0; k < sizeof(nls) / sizeof(nls[0]); k++) {
		uint32_t nl = nls[k];
		ns[nl] = 0;
		uint8_t head[12];
		memcpy(head, "SCPFX002", 8);
		memcpy(head + 8, &nl, 4); /* u32 LE length, then the namespace */
		struct sc_key c[3];
		c[0] = ref_h(sec, head, sizeof(head), ns, nl);
		for (int b = 0; b < 2; b++) {
			struct sc_key blk = ref_h(sec, t + b * 256, 1024, NULL, 0);
			uint64_t two[4] = { c[b].lo, c[b].hi, blk.lo, blk.hi };
			c[b + 1] = ref_h(sec, two, sizeof(two), NULL, 0);
		}
		for (uint32_t len = 1; len <= 600; len++) {
			struct sc_key got, *ch = &c[len / 256];
			uint8_t pre[20];
			memcpy(pre, &ch->lo, 8);
			memcpy(pre + 8, &ch->hi, 8);
			memcpy(pre + 16, &len, 4);
			struct sc_key want = ref_h(sec, pre, sizeof(pre), t + len / 256 * 256, (size_t)(len % 256) * 4);
			ck_assert_int_eq(key_pfx_hashes(sec, nl ? ns : NULL, t, 600, &len, 1, &got), 0);
			ck_assert_msg(got.lo == want.lo && got.hi == want.hi,
				      "P(%u) with a %u-byte namespace is not the documented hash", len, nl);
		}
		ns[nl] = 'q';
	}
}
END_TEST

Suite *key_suite(void)
{
	Suite *s = suite_create("key");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, digest_matches_xxh3_128);
	tcase_add_test(tc, digest_hex_round_trip);
	tcase_add_test(tc, digest_of_sections_is_digest_of_wire);
	tcase_add_test(tc, digest_parse_rejects_bad_input);
	tcase_add_test(tc, keys_separate_stages_namespaces_and_tokens);
	tcase_add_test(tc, keys_depend_on_the_arena_secret);
	tcase_add_test(tc, prefix_keys_equal_individual_keys);
	tcase_add_test(tc, prefix_hashes_follow_their_documented_layout);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(key_suite)
