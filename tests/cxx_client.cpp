// tests/cxx_client.cpp — a C++ client of stagecache.h, built with -std=c++17 -Wall -Wextra
// -Wpedantic -Werror and linked with the shared library (the way a C++ engine would use it).
// It checks that the header compiles as C++ and that C++ sees the same layouts as the library,
// then runs the calls an inference worker makes: create, stage, admit, get, lease, stats,
// extents, a ring with the batcher and a consumer, an L3 put and a restore.
// Prints one line per check and a Check-style summary line for tests/run.sh.
#include <stagecache.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

static int checks, failures;

#define EXPECT(cond, ...)                                                     \
	do {                                                                  \
		checks++;                                                     \
		if (!(cond)) {                                                \
			failures++;                                           \
			std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			std::printf(__VA_ARGS__);                             \
			std::printf("\n");                                    \
		}                                                             \
	} while (0)

// Every structure as C++ lays it out, against the library's table.
template <typename T> static void same_layout(const char *name)
{
	EXPECT(sc_sizeof(name) == sizeof(T), "%s: C++ %zu, library %zu", name, sizeof(T), sc_sizeof(name));
	EXPECT(sc_alignof(name) == alignof(T), "%s: alignment", name);
}

struct commits {
	std::vector<int32_t> tokens;
	uint32_t last_flags = 0;
	uint64_t last_total = 0;
};

int main()
{
	same_layout<sc_arena_opts>("sc_arena_opts");
	same_layout<sc_arena_attached>("sc_arena_attached");
	same_layout<struct sc_arena_info>("sc_arena_info");
	same_layout<sc_holder>("sc_holder");
	same_layout<sc_arena_extent>("sc_arena_extent");
	same_layout<sc_digest>("sc_digest");
	same_layout<sc_key>("sc_key");
	same_layout<sc_kv_component>("sc_kv_component");
	same_layout<sc_kv_desc>("sc_kv_desc");
	same_layout<sc_payload>("sc_payload");
	same_layout<sc_location>("sc_location");
	same_layout<sc_lease>("sc_lease");
	same_layout<sc_l2_entry_info>("sc_l2_entry_info");
	same_layout<struct sc_l2_stats>("sc_l2_stats");
	same_layout<sc_l2_resv>("sc_l2_resv");
	same_layout<sc_l3_opts>("sc_l3_opts");
	same_layout<sc_l3_put_args>("sc_l3_put_args");
	same_layout<struct sc_l3_index_stats>("sc_l3_index_stats");
	same_layout<sc_l3_fill_req>("sc_l3_fill_req");
	same_layout<struct sc_l3_stats>("sc_l3_stats");
	same_layout<sc_l3_object_info>("sc_l3_object_info");
	same_layout<struct sc_promote_stats>("sc_promote_stats");
	same_layout<struct sc_restore>("sc_restore");
	same_layout<sc_commit>("sc_commit");
	same_layout<sc_ring_stat>("sc_ring_stat");
	same_layout<sc_batcher_opts>("sc_batcher_opts");
	same_layout<sc_batcher>("sc_batcher");
	same_layout<sc_fsck_report>("sc_fsck_report");
	EXPECT(sc_offsetof("sc_lease", "kv_desc") == static_cast<int64_t>(offsetof(sc_lease, kv_desc)), "kv_desc");
	EXPECT(std::string(sc_payload_kind_name(SC_PAYLOAD_KV_RECURRENT)) == "kv_recurrent", "names");

	const std::string name = "cxx-" + std::to_string(getpid());
	sc_arena_opts o{};
	o.size_bytes = 16u << 20;
	o.huge = SC_HUGE_OFF;
	sc_arena *a = nullptr;
	int rc = sc_arena_create(name.c_str(), &o, &a);
	EXPECT(rc == 0, "create: %s", sc_strerror(rc));
	if (rc)
		return 1;
	sc_stage *st = nullptr;
	rc = sc_stage_open(a, "llama", "kv-fp16", &st);
	EXPECT(rc == 0, "stage: %s", sc_strerror(rc));

	// admit, then get through a lease (the line, verbatim, compiles now)
	std::vector<unsigned char> buf(4096);
	for (size_t i = 0; i < buf.size(); i++)
		buf[i] = static_cast<unsigned char>(i * 13);
	size_t n = buf.size();
	sc_digest d = sc_digest_of(buf.data(), n);
	const int32_t toks[] = { 1, 2, 3, 4, 5 };
	sc_payload p{};
	p.kind = SC_PAYLOAD_FULL_STATE;
	p.sec[0] = buf.data();
	p.sec_len[0] = buf.size();
	rc = sc_l2_admit(st, "t", toks, 5, d, &p, SC_ORIGIN_DIRECT);
	EXPECT(rc == 0, "admit: %s", sc_strerror(rc));
	sc_lease l{};
	sc_location loc{};
	loc.token_count = 5;
	loc.digest = d;
	rc = sc_l2_get(st, "t", toks, 5, &loc, &l);
	EXPECT(rc == 0, "get: %s", sc_strerror(rc));
	if (rc == 0) {
		EXPECT(l.sec_len[0] == buf.size(), "length");
		EXPECT(std::memcmp(l.sec[0], buf.data(), buf.size()) == 0, "bytes");
		EXPECT(sc_digest_equal(l.digest, d), "digest");
		char hex[SC_DIGEST_HEX_LEN + 1];
		EXPECT(std::strlen(sc_digest_format(l.digest, hex)) == SC_DIGEST_HEX_LEN, "hex");
		sc_arena_extent ex{};
		EXPECT(sc_arena_extents(a, &ex, 1) == 1, "extents");
		auto s0 = static_cast<const unsigned char *>(l.sec[0]);
		auto b = static_cast<const unsigned char *>(ex.base);
		EXPECT(s0 >= b && s0 + l.sec_len[0] <= b + ex.bytes, "the lease lies in the extent");
		sc_lease_release(&l);
	}
	EXPECT(sc_l2_get(st, "t", toks, 4, nullptr, &l) == -ENOENT, "a miss");
	struct sc_l2_stats s{};
	rc = sc_l2_stats(a, nullptr, &s);
	EXPECT(rc == 0 && s.entries == 1 && s.hits == 1 && s.misses == 1 && s.leases == 0,
	       "stats: %llu entries %llu hits %llu misses", (unsigned long long)s.entries, (unsigned long long)s.hits,
	       (unsigned long long)s.misses);

	// a producer's batcher and a consumer with a lambda callback
	sc_ring *ring = nullptr;
	rc = sc_ring_open(a, &ring);
	EXPECT(rc == 0, "ring: %s", sc_strerror(rc));
	sc_batcher bt;
	sc_batcher_opts bo{};
	bo.flags = SC_BATCHER_OPT_INTERVAL; // interval 0: every token at once
	EXPECT(sc_batcher_init_opts(&bt, ring, 42, 7, &bo) == 0, "batcher");
	for (int32_t t = 0; t < 10; t++)
		EXPECT(sc_batcher_commit(&bt, t, 0) == 0, "commit");
	EXPECT(sc_batcher_finish(&bt, SC_COMMIT_FINISHED) == 0, "finish");
	commits got;
	int polled = sc_ring_poll(
		a,
		[](const sc_commit *c, void *ctx) -> int {
			auto g = static_cast<commits *>(ctx);
			g->tokens.insert(g->tokens.end(), c->tokens, c->tokens + c->token_count);
			g->last_flags = c->flags;
			g->last_total = c->generated_token_count;
			return 0;
		},
		&got, 100);
	EXPECT(polled == 11, "polled %d", polled);
	EXPECT(got.tokens.size() == 10 && got.tokens[9] == 9, "tokens");
	EXPECT(got.last_flags == SC_COMMIT_FINISHED && got.last_total == 10, "terminal");
	sc_ring_consumer_close(a);
	EXPECT(sc_ring_close(ring) == 0, "ring close");

	// L3 put, then a restore through the promotion policy
	char dir[] = "/var/tmp/sc-cxx-XXXXXX";
	EXPECT(mkdtemp(dir) != nullptr, "mkdtemp");
	sc_l3 *l3 = nullptr;
	rc = sc_l3_open(dir, nullptr, &l3);
	EXPECT(rc == 0, "l3: %s", sc_strerror(rc));
	if (rc == 0) {
		std::vector<int32_t> prompt(5000);
		for (size_t i = 0; i < prompt.size(); i++)
			prompt[i] = static_cast<int32_t>(i * 3 + 1);
		sc_l3_put_args pa{};
		pa.ns = "t";
		pa.tokens = prompt.data();
		pa.token_count = 4096;
		pa.payload = &p;
		EXPECT(sc_l3_put(l3, &pa, nullptr) == 0, "l3 put");
		struct sc_restore r;
		rc = sc_restore(st, l3, "t", prompt.data(), prompt.size(), 0, &r);
		EXPECT(rc == 4096, "restore: %d %s", rc, sc_strerror(rc));
		if (rc > 0) {
			EXPECT(r.source == SC_RESTORE_FROM_L3 && r.promoted && r.in_arena, "source %s, promoted %d",
			       sc_restore_source_name(r.source), r.promoted);
			EXPECT(std::string(sc_promote_why_name(r.promote_why)) == "long_prefix", "why");
			EXPECT(std::memcmp(r.sec[0], buf.data(), buf.size()) == 0, "restored bytes");
			sc_restore_release(&r);
		}
		rc = sc_restore(st, l3, "t", prompt.data(), prompt.size(), 0, &r);
		EXPECT(rc == 4096 && r.source == SC_RESTORE_FROM_L2, "second restore from L2");
		if (rc > 0)
			sc_restore_release(&r);
		sc_l3_close(l3);
	}
	std::string rm = std::string("rm -rf ") + dir;
	EXPECT(std::system(rm.c_str()) == 0, "cleanup");

	sc_stage_close(st);
	sc_arena_close(a);
	EXPECT(sc_arena_destroy(nullptr, name.c_str()) == 0, "destroy");
	std::printf("%d%%: Checks: %d, Failures: %d, Errors: 0\n", checks ? 100 * (checks - failures) / checks : 0,
		    checks, failures);
	return failures ? 1 : 0;
}
