/* tests/check_key.c — digests and L2 keys. */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include <sys/mman.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"

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
	ck_assert_int_eq(sc_digest_parse("0123456789abcdef0123456789abcdef", NULL), -EINVAL); /* nowhere to put it */
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
	ck_assert_int_eq(sc_stage_open(a, "x", "", &bad), -EINVAL);
	ck_assert_int_eq(sc_stage_open(a, "x", NULL, &bad), -EINVAL);
	ck_assert_int_eq(sc_stage_open(a, NULL, "x", &bad), -EINVAL);
	ck_assert_int_eq(sc_stage_open(NULL, "x", "y", &bad), -EINVAL);
	ck_assert_int_eq(sc_stage_open(a, "x", "y", NULL), -EINVAL); /* nowhere to put the handle */
	sc_stage_close(NULL);                                        /* a no-op */
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

/* sc_digest_format writes its 32 digits and the terminator, not one byte more. */
START_TEST(digest_format_writes_33_bytes)
{
	char buf[64];
	memset(buf, 0x5a, sizeof(buf));
	struct sc_digest d = { 0x0123456789abcdefull, 0xfedcba9876543210ull };
	ck_assert_ptr_eq(sc_digest_format(d, buf), buf);
	ck_assert_str_eq(buf, "fedcba98765432100123456789abcdef");
	for (size_t i = SC_DIGEST_HEX_LEN + 1; i < sizeof(buf); i++)
		ck_assert_msg(buf[i] == 0x5a, "byte %zu past the terminator written", i);
}
END_TEST

/* The identity digest L3 headers record: unseeded XXH3-128 of "SCIDENT1" | u32 LE length | model |
 * u32 LE length | state. Stored objects are compared by it: the layout must never change. */
static void put_lp(XXH3_state_t *st, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);
	XXH3_128bits_update(st, &n, 4);
	XXH3_128bits_update(st, s, n);
}

START_TEST(identity_digest_follows_its_documented_layout)
{
	static const char *pairs[][2] = { { "llama-3-8b", "kv-f16" }, { "kv-f16", "llama-3-8b" }, { "m", "" } };
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		XXH3_state_t st;
		XXH3_INITSTATE(&st);
		XXH3_128bits_reset(&st);
		XXH3_128bits_update(&st, "SCIDENT1", 8);
		put_lp(&st, pairs[i][0]);
		put_lp(&st, pairs[i][1]);
		XXH128_hash_t h = XXH3_128bits_digest(&st);
		struct sc_digest d = sc_identity_digest(pairs[i][0], pairs[i][1]);
		ck_assert_msg(d.lo == h.low64 && d.hi == h.high64, "identity (%s, %s) is not the documented digest",
			      pairs[i][0], pairs[i][1]);
	}
}
END_TEST

/* The stage hash is XXH3-128 keyed by the arena's secret of "SCL2KEY2" | lp(model) | lp(state) (the
 * stage id is its low half); an L2 key is H(stage hash lo, hi | P lo, hi) with P the prefix hash. */
START_TEST(stage_ids_and_l2_keys_follow_their_documented_layout)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("key", 16 << 20, &name);
	const uint8_t *sec = a->shm->hv.key_secret;
	struct sc_stage *s;
	ck_assert_int_eq(sc_stage_open(a, "model-a", "state-b", &s), 0);
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_128bits_reset_withSecret(&st, sec, SHM_SECRET_BYTES);
	XXH3_128bits_update(&st, "SCL2KEY2", 8);
	put_lp(&st, "model-a");
	put_lp(&st, "state-b");
	XXH128_hash_t stage = XXH3_128bits_digest(&st);
	ck_assert_uint_eq(sc_stage_id(s), stage.low64);
	int32_t t[300];
	for (int i = 0; i < 300; i++)
		t[i] = 1000 - i * 3;
	for (uint32_t n = 0; n <= 300; n += 60) {
		struct sc_key p, got;
		ck_assert_int_eq(key_pfx_hashes(sec, "ns", t, n, &n, 1, &p), 0);
		uint64_t four[4] = { stage.low64, stage.high64, p.lo, p.hi };
		XXH128_hash_t want = XXH3_128bits_withSecret(four, sizeof(four), sec, SHM_SECRET_BYTES);
		ck_assert_int_eq(sc_l2_key(s, "ns", t, n, &got), 0);
		ck_assert_msg(got.lo == want.low64 && got.hi == want.high64, "key of %u tokens is not the documented one",
			      n);
	}
	sc_stage_close(s);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A namespace of SC_IDENTITY_MAX bytes is hashed whole; one byte more is refused by every function
 * that takes one, and nothing is written to the caller's keys (never a key of the namespace cut
 * short, which two namespaces would share). */
START_TEST(namespaces_longer_than_the_limit_are_refused)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("key", 16 << 20, &name);
	const uint8_t *sec = a->shm->hv.key_secret;
	struct sc_stage *s;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &s), 0);
	static char ns[SC_IDENTITY_MAX + 2], cut[SC_IDENTITY_MAX + 2];
	memset(ns, 'n', SC_IDENTITY_MAX + 1);
	memset(cut, 'n', SC_IDENTITY_MAX - 1);
	int32_t t[512];
	for (int i = 0; i < 512; i++)
		t[i] = i;
	const struct sc_key canary = { 0x1111, 0x2222 };
	struct sc_key k = canary, keys[4] = { canary, canary, canary, canary };
	uint32_t len = 512;
	/* one byte over */
	ck_assert_int_eq(sc_l2_key(s, ns, t, 512, &k), -EINVAL);
	ck_assert(k.lo == canary.lo && k.hi == canary.hi);
	ck_assert_int_eq(sc_l2_prefix_keys(s, ns, t, 512, 128, keys, 4), -EINVAL);
	ck_assert(keys[0].lo == canary.lo && keys[3].hi == canary.hi);
	ck_assert_int_eq(key_pfx_hashes(sec, ns, t, 512, &len, 1, &k), -EINVAL);
	/* exactly the limit: accepted, and distinct from the namespace one byte shorter */
	ns[SC_IDENTITY_MAX] = 0;
	struct sc_key whole, shorter, pk[4];
	ck_assert_int_eq(sc_l2_key(s, ns, t, 512, &whole), 0);
	ck_assert_int_eq(sc_l2_key(s, cut, t, 512, &shorter), 0);
	ck_assert(whole.lo != shorter.lo || whole.hi != shorter.hi);
	ck_assert_int_eq(sc_l2_prefix_keys(s, ns, t, 512, 128, pk, 4), 4);
	ck_assert(pk[3].lo == whole.lo && pk[3].hi == whole.hi);
	sc_stage_close(s);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(prefix_keys_refuse_bad_input)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("key", 16 << 20, &name);
	struct sc_stage *s;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &s), 0);
	int32_t t[256] = { 0 };
	struct sc_key keys[4];
	ck_assert_int_eq(sc_l2_prefix_keys(NULL, "ns", t, 256, 64, keys, 4), -EINVAL);
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", NULL, 256, 64, keys, 4), -EINVAL); /* tokens promised, none */
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", t, 256, 64, NULL, 4), -EINVAL);	/* keys wanted, nowhere */
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", NULL, 0, 64, keys, 4), 0);	/* nothing to read */
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", t, 256, 64, NULL, 0), 0);	/* nothing to write */
	sc_stage_close(s);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Prefixes whose length is a multiple of the block include the whole run; more keys than one batch
 * of lengths (64) come out each equal to the key of that prefix alone, a batch of one included. */
START_TEST(prefix_keys_cover_the_last_block_and_many_batches)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("key", 16 << 20, &name);
	struct sc_stage *s;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &s), 0);
	int32_t t[1024];
	for (int i = 0; i < 1024; i++)
		t[i] = i * 13 + 5;
	struct sc_key keys[200], one;
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", t, 1024, 256, keys, 8), 4); /* 256, 512, 768 and 1024 */
	ck_assert_int_eq(sc_l2_key(s, "ns", t, 1024, &one), 0);
	ck_assert(keys[3].lo == one.lo && keys[3].hi == one.hi);
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", t, 150, 1, keys, 200), 150);
	for (uint32_t i = 0; i < 150; i++) {
		ck_assert_int_eq(sc_l2_key(s, "ns", t, i + 1, &one), 0);
		ck_assert_msg(keys[i].lo == one.lo && keys[i].hi == one.hi, "key %u of 150 differs", i);
	}
	/* a second batch that starts at the last token: 64 lengths, then the 65th alone */
	ck_assert_int_eq(sc_l2_prefix_keys(s, "ns", t, 65, 1, keys, 200), 65);
	ck_assert_int_eq(sc_l2_key(s, "ns", t, 65, &one), 0);
	ck_assert(keys[64].lo == one.lo && keys[64].hi == one.hi);
	sc_stage_close(s);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The lengths of one pass come in non-decreasing order: equal lengths are fine, a shorter one after
 * a longer one is refused; a length past the tokens is refused. */
START_TEST(prefix_hash_lengths_must_not_decrease)
{
	uint8_t sec[SHM_SECRET_BYTES];
	for (size_t i = 0; i < sizeof(sec); i++)
		sec[i] = (uint8_t)(i * 91 + 3);
	int32_t t[600];
	for (int i = 0; i < 600; i++)
		t[i] = i ^ 0x5555;
	struct sc_key out[3], one;
	uint32_t eq[3] = { 300, 300, 600 }, down[3] = { 300, 600, 299 }, past[2] = { 300, 601 };
	ck_assert_int_eq(key_pfx_hashes(sec, "x", t, 600, eq, 3, out), 0);
	ck_assert(out[0].lo == out[1].lo && out[0].hi == out[1].hi);
	ck_assert_int_eq(key_pfx_hashes(sec, "x", t, 600, &eq[2], 1, &one), 0);
	ck_assert(out[2].lo == one.lo && out[2].hi == one.hi);
	ck_assert_int_eq(key_pfx_hashes(sec, "x", t, 600, down, 3, out), -EINVAL);
	ck_assert_int_eq(key_pfx_hashes(sec, "x", t, 600, past, 2, out), -EINVAL);
}
END_TEST

/* Tokens that end at the end of a mapping: the hash reads exactly the prefix's tokens, not a word
 * past them (the next page is unmapped here). */
START_TEST(prefix_hashes_read_no_token_past_the_prefix)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
	const char *name;
	struct sc_arena *a = sc_test_arena("key", 16 << 20, &name);
	struct sc_stage *s;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &s), 0);
	int32_t ref[300];
	for (uint32_t n = 1; n <= 300; n += 37) {
		int32_t *t = (int32_t *)(m + pg) - n;
		for (uint32_t i = 0; i < n; i++)
			ref[i] = t[i] = (int32_t)(i * 7 + n);
		struct sc_key k, want;
		ck_assert_int_eq(sc_l2_key(s, "ns", t, n, &k), 0);
		ck_assert_int_eq(sc_l2_key(s, "ns", ref, n, &want), 0);
		ck_assert(k.lo == want.lo && k.hi == want.hi);
	}
	sc_stage_close(s);
	sc_test_arena_destroy(a, name);
	munmap(m, (size_t)pg * 2);
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
	tcase_add_test(tc, digest_format_writes_33_bytes);
	tcase_add_test(tc, identity_digest_follows_its_documented_layout);
	tcase_add_test(tc, stage_ids_and_l2_keys_follow_their_documented_layout);
	tcase_add_test(tc, namespaces_longer_than_the_limit_are_refused);
	tcase_add_test(tc, prefix_keys_refuse_bad_input);
	tcase_add_test(tc, prefix_keys_cover_the_last_block_and_many_batches);
	tcase_add_test(tc, prefix_hash_lengths_must_not_decrease);
	tcase_add_test(tc, prefix_hashes_read_no_token_past_the_prefix);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(key_suite)
