/*
 * tests/check_trace.c — `stagecache trace` end to end (root; SKIP where BPF is unavailable).
 *
 * The tracer (build/stagecache trace --binary <this test binary> --pin-dir <own dir>) attaches to
 * the probes linked into this very binary (it links build/libstagecache.a statically). A forked
 * child then performs a known workload through the public API; afterwards every BPF counter of
 * the child's pid must equal the library's own counters exactly. The pinned maps are read with the
 * bpf() syscall directly (layouts from bpf/stagecache_maps.h) and once through `bpftool -j map dump`
 * for the named fields. Each test uses its own pin directory under /sys/fs/bpf and removes it.
 *
 * Also: the shared library's probes (a child calling build/libstagecache.so.0 through dlopen, the
 * tracer on --lib), --pid (one process counted, its sibling not), --keep, and the error messages
 * (usage, not root, missing or non-ELF or probe-less target, pin dir not on bpffs).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <linux/bpf.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"
#include "../bpf/stagecache_maps.h"
#define SC_NO_PROBES /* only the list of probes, to count them */
#include "../lib/probes.h"

#define ONE_PROBE(name, nargs) +1
enum { N_PROBES = 0 SC_PROBE_LIST(ONE_PROBE) }; /* every probe the library has */

/* ---- environment ---- */

__attribute__((unused)) static const char *self_exe(void)
{
	static char p[PATH_MAX];
	ck_assert(realpath("/proc/self/exe", p) != NULL);
	return p;
}

static const char *cli_path(void)
{
	static char p[PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s/stagecache", sc_test_build_dir());
	return p;
}

/* Why BPF tracing cannot run here, or NULL. */
__attribute__((unused)) static const char *bpf_unavailable(void)
{
	if (!sc_test_is_root())
		return "not root: loading eBPF programs needs root";
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		return "no kernel BTF (/sys/kernel/btf/vmlinux)";
	if (access("/sys/bus/event_source/devices/uprobe", F_OK))
		return "the kernel has no uprobe PMU";
	if (system("bpftool version >/dev/null 2>&1"))
		return "bpftool is not installed";
	if (access(cli_path(), X_OK))
		return "build/stagecache is not built";
	return NULL;
}

/* Print "SKIP: <why>" and return 1 when BPF tracing cannot run here. */
static int skip_without_bpf(void)
{
	const char *why = bpf_unavailable();
	if (why)
		sc_skip("%s", why);
	return why != NULL;
}

/* Remove a pin directory whatever state a failed test left it in. */
static void pin_dir_remove(const char *dir)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- bpf() on pinned maps ---- */

static long bpf_call(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

static int map_open(const char *dir, const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.pathname = (uint64_t)(uintptr_t)p;
	int fd = (int)bpf_call(BPF_OBJ_GET, &a);
	ck_assert_msg(fd >= 0, "BPF_OBJ_GET %s: %s", p, strerror(errno));
	return fd;
}

static int map_next(int fd, const void *key, void *next)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)fd;
	a.key = (uint64_t)(uintptr_t)key;
	a.next_key = (uint64_t)(uintptr_t)next;
	return (int)bpf_call(BPF_MAP_GET_NEXT_KEY, &a);
}

static int map_lookup(int fd, const void *key, void *val)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)fd;
	a.key = (uint64_t)(uintptr_t)key;
	a.value = (uint64_t)(uintptr_t)val;
	return (int)bpf_call(BPF_MAP_LOOKUP_ELEM, &a);
}

/* Counters of @pid summed over stages: out[event]. Also records the stages seen for L2 events. */
static void read_counters(const char *dir, uint32_t pid, struct sc_bpf_counter out[SC_EV_COUNT], uint64_t *l2_stage)
{
	memset(out, 0, sizeof(*out) * SC_EV_COUNT);
	int fd = map_open(dir, "counters");
	struct sc_bpf_key k, next;
	const void *prev = NULL;
	while (map_next(fd, prev, &next) == 0) {
		k = next;
		prev = &k;
		struct sc_bpf_counter c;
		if (k.pid != pid || k.event >= SC_EV_COUNT || map_lookup(fd, &k, &c))
			continue;
		out[k.event].count += c.count;
		out[k.event].bytes += c.bytes;
		out[k.event].tokens += c.tokens;
		out[k.event].ns += c.ns;
		if (l2_stage && (k.event == SC_EV_L2_HIT || k.event == SC_EV_L2_MISS || k.event == SC_EV_L2_ADMIT)) {
			ck_assert_msg(*l2_stage == 0 || *l2_stage == k.stage, "L2 events under two stage ids");
			*l2_stage = k.stage;
		}
	}
	close(fd);
}

/* The count of (@stage, @event, @reason) in `reasons` (all pids: each test has its own stage). */
static uint64_t read_reason(const char *dir, uint64_t stage, uint32_t event, uint32_t reason)
{
	int fd = map_open(dir, "reasons");
	struct sc_bpf_reason_key k = { .stage = stage, .event = event, .reason = reason };
	struct sc_bpf_count c = { 0 };
	map_lookup(fd, &k, &c);
	close(fd);
	return c.count;
}

/* ---- the tracer ---- */

struct tracer {
	pid_t pid;
	int out;
	char pin_dir[128];
};

/* Start `stagecache trace @how @path` (--binary or --lib) and wait for its ready line. */
static void tracer_start_on(struct tracer *t, const char *how, const char *path)
{
	snprintf(t->pin_dir, sizeof(t->pin_dir), "/sys/fs/bpf/stagecache-check-%d", (int)getpid());
	int fds[2];
	ck_assert(pipe(fds) == 0);
	t->pid = fork();
	ck_assert(t->pid >= 0);
	if (t->pid == 0) {
		/* if the test dies on a failed assertion, the tracer stops too (and removes its pins) */
		prctl(PR_SET_PDEATHSIG, SIGINT);
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl(cli_path(), "stagecache", "trace", how, path, "--pin-dir", t->pin_dir, "--duration",
		      "60", "--interval", "100", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	t->out = fds[0];
	/* wait (at most 30 s) for the "ready" line */
	char buf[4096];
	size_t len = 0;
	for (int waited = 0; waited < 300; waited++) {
		struct pollfd p = { .fd = t->out, .events = POLLIN };
		if (poll(&p, 1, 100) > 0) {
			ssize_t n = read(t->out, buf + len, sizeof(buf) - 1 - len);
			ck_assert_msg(n > 0, "stagecache trace exited before it was ready (see its stderr above)");
			len += (size_t)n;
			buf[len] = 0;
			if (strstr(buf, "ready: ")) {
				char want[64];
				snprintf(want, sizeof(want), "%d/%d probes attached", N_PROBES, N_PROBES);
				ck_assert_msg(strstr(buf, want), "not every probe attached (want %s): %s", want, buf);
				return;
			}
		}
	}
	ck_abort_msg("stagecache trace did not print 'ready' within 30 s");
}

/* Trace the probes linked into this test binary. */
static void tracer_start(struct tracer *t)
{
	tracer_start_on(t, "--binary", self_exe());
}

static void tracer_stop(struct tracer *t)
{
	ck_assert(kill(t->pid, SIGINT) == 0);
	int st;
	ck_assert(waitpid(t->pid, &st, 0) == t->pid);
	close(t->out);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "trace exit status %d", st);
	/* without --keep the pins (and the directory it made) are gone */
	ck_assert_msg(access(t->pin_dir, F_OK) != 0, "%s left behind", t->pin_dir);
}

/* ---- the workload (runs in a forked child; exits non-zero at the first surprise) ---- */

#define W_TOKENS 32
#define W_DIRECT 6        /* 4 KiB entries admitted directly */
#define W_HITS_EACH 2     /* lookups of each of the first W_HIT_KEYS entries */
#define W_HIT_KEYS 4
#define W_MISSES 5
#define W_REJECTS 1       /* admit with a wrong digest */
#define W_MISMATCHES 1    /* lookups whose location disagrees: a miss and a removal */
#define W_REMOVES 1       /* explicit removals */
#define W_PROMO_HITS 3    /* lookups of the entry admitted FROM_L3 */
#define W_BIG 24          /* 1 MiB entries into a 16 MiB arena: evictions */
#define W_L3_BYTES (64u << 10) /* one L3 object, filled twice: promoted on the second fill */
#define W_L3_FILLS 2
#define W_L3_HITS 2       /* promotion hits on the promoted entry */
#define W_RING_FULL 3     /* submits refused by a full ring */
#define W_BATCH_TOKENS 300

static char l3_dir[PATH_MAX];
static char wanted_hex[SC_DIGEST_HEX_LEN + 1], found_path[PATH_MAX];

static void fill_tokens(int32_t *t, int n, int seed)
{
	for (int i = 0; i < n; i++)
		t[i] = seed * 1000 + i;
}

#define W_EXPECT(cond, ...)                               \
	do {                                              \
		if (!(cond)) {                            \
			fprintf(stderr, "workload: " __VA_ARGS__); \
			fprintf(stderr, "\n");            \
			_exit(3);                         \
		}                                         \
	} while (0)

/* One fill through the asynchronous API, so that it carries the stage id to the probes. */
static int fill_on_stage(struct sc_l3 *l3, uint64_t sid, const struct sc_location *loc, void *dst, uint64_t cap)
{
	struct sc_l3_fill_req req = { .loc = loc, .dst = dst, .dst_bytes = cap, .stage_id = sid };
	struct sc_l3_fill_req *rp = &req, *done = NULL;
	int rc = sc_l3_fill_submit(l3, &rp, 1);
	if (rc != 1)
		return rc < 0 ? rc : -EAGAIN;
	rc = sc_l3_fill_reap(l3, &done, 1, -1);
	if (rc != 1 || done != &req)
		return rc < 0 ? rc : -EIO;
	return req.result;
}

static int find_object(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (type == FTW_F && strstr(path, wanted_hex) && !strstr(path, "quarantine")) {
		snprintf(found_path, sizeof(found_path), "%s", path);
		return 1;
	}
	return 0;
}

/* Put an object, flip one byte of its payload on disk, fill it: -EBADMSG and a quarantine. */
static void workload_quarantine(struct sc_l3 *l3)
{
	static char obj[W_L3_BYTES];
	memset(obj, 'q', sizeof(obj));
	int32_t tok[W_TOKENS];
	fill_tokens(tok, W_TOKENS, 600);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { obj }, .sec_len = { sizeof(obj) } };
	struct sc_l3_put_args pa = { .ns = "ns", .tokens = tok, .token_count = W_TOKENS, .payload = &p };
	struct sc_location loc;
	int rc = sc_l3_put(l3, &pa, &loc);
	W_EXPECT(rc == 0, "l3 put (quarantine): %s", sc_strerror(rc));
	sc_digest_format(loc.digest, wanted_hex);
	found_path[0] = 0;
	nftw(l3_dir, find_object, 8, FTW_PHYS);
	W_EXPECT(found_path[0], "no object file named after %s under %s", wanted_hex, l3_dir);
	int fd = open(found_path, O_WRONLY);
	struct stat sb;
	W_EXPECT(fd >= 0 && fstat(fd, &sb) == 0, "open %s", found_path);
	char x = 'X';
	W_EXPECT(pwrite(fd, &x, 1, sb.st_size - 100) == 1, "corrupt %s", found_path);
	close(fd);
	void *dst = aligned_alloc(4096, W_L3_BYTES);
	W_EXPECT(dst != NULL, "alloc");
	rc = sc_l3_fill(l3, &loc, dst, W_L3_BYTES, SC_L3_FILL_BUFFERED);
	W_EXPECT(rc == -EBADMSG, "fill of a corrupted object: %s", sc_strerror(rc));
	free(dst);
}

/* Put one object in L3, fill it W_L3_FILLS times asking the policy each time, and admit it
 * FROM_L3 when the policy says so (the second fill); then hit it W_L3_HITS times. */
static void workload_l3(struct sc_arena *a, struct sc_stage *s)
{
	struct sc_l3 *l3 = NULL;
	struct sc_l3_opts o = { 0 };
	int rc = sc_l3_open(l3_dir, &o, &l3);
	W_EXPECT(rc == 0, "l3 open: %s", sc_strerror(rc));
	static char obj[W_L3_BYTES];
	memset(obj, 'l', sizeof(obj));
	int32_t tok[W_TOKENS];
	fill_tokens(tok, W_TOKENS, 500);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { obj }, .sec_len = { sizeof(obj) } };
	struct sc_l3_put_args pa = { .model_identity = "model-m", .state_identity = "state-s", .ns = "ns",
				     .tokens = tok, .token_count = W_TOKENS, .payload = &p };
	struct sc_location loc;
	rc = sc_l3_put(l3, &pa, &loc);
	W_EXPECT(rc == 0, "l3 put: %s", sc_strerror(rc));
	void *dst = aligned_alloc(4096, W_L3_BYTES);
	W_EXPECT(dst != NULL, "alloc");
	int promoted = 0;
	for (int f = 0; f < W_L3_FILLS; f++) {
		rc = fill_on_stage(l3, sc_stage_id(s), &loc, dst, W_L3_BYTES);
		W_EXPECT(rc == 0, "l3 fill %d: %s", f, sc_strerror(rc));
		int why = -1;
		rc = sc_promote_consider(a, sc_stage_id(s), loc.digest, W_TOKENS, loc.payload_bytes, &why);
		W_EXPECT(rc == (f == W_L3_FILLS - 1), "promote_consider %d: %d (why %d)", f, rc, why);
		if (rc == 1) {
			struct sc_payload fp = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { dst }, .sec_len = { W_L3_BYTES } };
			rc = sc_l2_admit(s, "ns", tok, W_TOKENS, loc.digest, &fp, SC_ORIGIN_FROM_L3);
			W_EXPECT(rc == 0, "promotion admit: %s", sc_strerror(rc));
			sc_promote_attempted(a, sc_stage_id(s), loc.digest);
			promoted++;
		}
	}
	W_EXPECT(promoted == 1, "promoted %d times", promoted);
	for (int i = 0; i < W_L3_HITS; i++) {
		struct sc_lease l;
		rc = sc_l2_get(s, "ns", tok, W_TOKENS, NULL, &l);
		W_EXPECT(rc == 0 && l.origin == SC_ORIGIN_FROM_L3, "promoted hit %d: %s", i, sc_strerror(rc));
		sc_lease_release(&l);
	}
	free(dst);
	workload_quarantine(l3);
	sc_l3_close(l3);
}

/* A batched generation of W_BATCH_TOKENS tokens (1 ms apart: a commit at the first token, then
 * every 100 ms), then raw submits until the ring is full and W_RING_FULL refused ones. */
static void workload_ring(struct sc_arena *a)
{
	struct sc_ring *r = NULL;
	int rc = sc_ring_open(a, &r);
	W_EXPECT(rc == 0, "ring open: %s", sc_strerror(rc));
	struct sc_batcher b;
	rc = sc_batcher_init(&b, r, 7, 1);
	W_EXPECT(rc == 0, "batcher init: %s", sc_strerror(rc));
	for (int i = 0; i < W_BATCH_TOKENS; i++) {
		rc = sc_batcher_commit(&b, i, (uint64_t)i * 1000000u);
		W_EXPECT(rc == 0, "batcher commit %d: %s", i, sc_strerror(rc));
	}
	rc = sc_batcher_finish(&b, SC_COMMIT_FINISHED);
	W_EXPECT(rc == 0, "batcher finish: %s", sc_strerror(rc));
	W_EXPECT(sc_batcher_commits(&b) >= 4, "only %llu commits", (unsigned long long)sc_batcher_commits(&b));
	static int32_t toks[64];
	struct sc_commit c = { .request_id = 8, .session_id = 1, .token_count = 64, .tokens = toks };
	int full = 0;
	for (int i = 0; i < 1000000 && full < W_RING_FULL; i++) {
		c.generated_token_count += 64;
		rc = sc_ring_try_submit(r, &c);
		W_EXPECT(rc == 0 || rc == -EAGAIN, "submit: %s", sc_strerror(rc));
		full += rc == -EAGAIN;
	}
	W_EXPECT(full == W_RING_FULL, "the ring never filled");
	sc_ring_close(r);
}

static void workload(const char *arena_name)
{
	struct sc_arena *a = NULL;
	struct sc_stage *s = NULL;
	int rc = sc_arena_open(arena_name, &a);
	W_EXPECT(rc == 0, "open: %s", sc_strerror(rc));
	rc = sc_stage_open(a, "model-m", "state-s", &s);
	W_EXPECT(rc == 0, "stage: %s", sc_strerror(rc));
	static char small[4096];
	int32_t tok[W_TOKENS];
	for (int i = 0; i < W_DIRECT; i++) {
		memset(small, 'a' + i, sizeof(small));
		fill_tokens(tok, W_TOKENS, i);
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { small }, .sec_len = { sizeof(small) } };
		rc = sc_l2_admit(s, "ns", tok, W_TOKENS, sc_digest(small, sizeof(small)), &p, SC_ORIGIN_DIRECT);
		W_EXPECT(rc == 0, "admit %d: %s", i, sc_strerror(rc));
	}
	for (int r = 0; r < W_HITS_EACH; r++)
		for (int i = 0; i < W_HIT_KEYS; i++) {
			struct sc_lease l;
			fill_tokens(tok, W_TOKENS, i);
			rc = sc_l2_get(s, "ns", tok, W_TOKENS, NULL, &l);
			W_EXPECT(rc == 0, "hit %d: %s", i, sc_strerror(rc));
			sc_lease_release(&l);
		}
	for (int i = 0; i < W_MISSES; i++) {
		struct sc_lease l;
		fill_tokens(tok, W_TOKENS, 100 + i);
		rc = sc_l2_get(s, "ns", tok, W_TOKENS, NULL, &l);
		W_EXPECT(rc == -ENOENT, "miss %d: %s", i, sc_strerror(rc));
	}
	{
		struct sc_digest wrong = { 1, 2 };
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { small }, .sec_len = { sizeof(small) } };
		fill_tokens(tok, W_TOKENS, 200);
		rc = sc_l2_admit(s, "ns", tok, W_TOKENS, wrong, &p, SC_ORIGIN_DIRECT);
		W_EXPECT(rc == -EBADMSG, "reject: %s", sc_strerror(rc));
	}
	{ /* one explicit removal (entry 5), one removal by a location mismatch (entry 4, a miss) */
		struct sc_key key;
		fill_tokens(tok, W_TOKENS, 5);
		rc = sc_l2_key(s, "ns", tok, W_TOKENS, &key);
		W_EXPECT(rc == 0, "key: %s", sc_strerror(rc));
		rc = sc_l2_remove(s, key);
		W_EXPECT(rc == 0, "remove: %s", sc_strerror(rc));
		struct sc_location stale = { .token_count = W_TOKENS, .digest = { 3, 4 } };
		struct sc_lease l;
		fill_tokens(tok, W_TOKENS, 4);
		rc = sc_l2_get(s, "ns", tok, W_TOKENS, &stale, &l);
		W_EXPECT(rc == -ENOENT, "mismatch: %s", sc_strerror(rc));
	}
	{ /* an entry that came from L3: its hits are promotion hits */
		memset(small, 'p', sizeof(small));
		fill_tokens(tok, W_TOKENS, 300);
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { small }, .sec_len = { sizeof(small) } };
		rc = sc_l2_admit(s, "ns", tok, W_TOKENS, sc_digest(small, sizeof(small)), &p, SC_ORIGIN_FROM_L3);
		W_EXPECT(rc == 0, "admit from L3: %s", sc_strerror(rc));
		for (int i = 0; i < W_PROMO_HITS; i++) {
			struct sc_lease l;
			rc = sc_l2_get(s, "ns", tok, W_TOKENS, NULL, &l);
			W_EXPECT(rc == 0 && l.origin == SC_ORIGIN_FROM_L3, "promotion hit %d: %s", i, sc_strerror(rc));
			sc_lease_release(&l);
		}
	}
	{ /* fill the arena past its budget: evictions */
		static char big[1 << 20];
		for (int i = 0; i < W_BIG; i++) {
			memset(big, i, sizeof(big));
			fill_tokens(tok, W_TOKENS, 400 + i);
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { big }, .sec_len = { sizeof(big) } };
			rc = sc_l2_admit(s, "ns", tok, W_TOKENS, sc_digest(big, sizeof(big)), &p, SC_ORIGIN_DIRECT);
			W_EXPECT(rc == 0, "big admit %d: %s", i, sc_strerror(rc));
		}
	}
	workload_l3(a, s);
	workload_ring(a);
	sc_stage_close(s); /* flushes the handle's pending hit/miss counts */
	sc_arena_close(a);
	_exit(0);
}

static pid_t run_workload(const char *arena_name)
{
	fflush(NULL);
	pid_t pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0)
		workload(arena_name);
	int st;
	ck_assert(waitpid(pid, &st, 0) == pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "workload failed (status %d)", st);
	return pid;
}

/* ---- tests ---- */

/* The payoff entry of @d, or 0 when absent. */
__attribute__((unused)) static int payoff_of(const char *dir, struct sc_digest d, struct sc_bpf_payoff *out)
{
	int fd = map_open(dir, "promotion_payoff");
	struct sc_bpf_digest k = { .lo = d.lo, .hi = d.hi };
	int found = map_lookup(fd, &k, out) == 0;
	close(fd);
	return found;
}

/* Sum of the fill-latency histogram of stage @stage. */
__attribute__((unused)) static uint64_t fill_hist_total(const char *dir, uint64_t stage)
{
	int fd = map_open(dir, "latency");
	struct sc_bpf_hist_key k = { .stage = stage, .kind = SC_HIST_FILL };
	static struct sc_bpf_hist h;
	uint64_t n = 0;
	if (map_lookup(fd, &k, &h) == 0)
		for (int i = 0; i < SC_BPF_HIST_SLOTS; i++)
			n += h.slots[i];
	close(fd);
	return n;
}

START_TEST(test_counters_equal_library)
{
	if (skip_without_bpf())
		return;
	const char *name;
	struct sc_arena_opts ao = { .size_bytes = 16ull << 20, .huge = SC_HUGE_OFF };
	struct sc_arena *a = sc_test_arena_opts("trace", &ao, &name);
	snprintf(l3_dir, sizeof(l3_dir), "/tmp/sc-check-trace-XXXXXX");
	ck_assert(mkdtemp(l3_dir) != NULL);
	struct tracer t;
	tracer_start(&t);
	pid_t child = run_workload(name);

	struct sc_bpf_counter c[SC_EV_COUNT];
	uint64_t stage_seen = 0;
	read_counters(t.pin_dir, (uint32_t)child, c, &stage_seen);
	struct sc_l2_stats st;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &st), 0);
	struct sc_stage *s;
	ck_assert_int_eq(sc_stage_open(a, "model-m", "state-s", &s), 0);
	ck_assert_uint_eq(stage_seen, sc_stage_id(s));
	sc_stage_close(s);

	uint64_t l3_hits = W_L3_HITS, l3_admits = 1;
	/* the library's counters and the known workload */
	ck_assert_uint_eq(st.hits, W_HITS_EACH * W_HIT_KEYS + W_PROMO_HITS + l3_hits);
	ck_assert_uint_eq(st.misses, W_MISSES + W_MISMATCHES);
	ck_assert_uint_eq(st.inserts, W_DIRECT + 1 + W_BIG + l3_admits);
	ck_assert_uint_eq(st.admission_rejects, W_REJECTS);
	ck_assert_msg(st.evictions > 0, "the workload evicted nothing");
	/* BPF == library, exactly */
	ck_assert_uint_eq(c[SC_EV_L2_HIT].count, st.hits);
	ck_assert_uint_eq(c[SC_EV_L2_MISS].count, st.misses);
	ck_assert_uint_eq(c[SC_EV_L2_ADMIT].count, st.inserts);
	ck_assert_uint_eq(c[SC_EV_L2_REJECT].count, st.admission_rejects);
	ck_assert_uint_eq(c[SC_EV_L2_EVICT].count, st.evictions);
	ck_assert_uint_eq(c[SC_EV_L2_HIT_PROMOTED].count, W_PROMO_HITS + l3_hits);
	/* removals have no counter in sc_l2_stats: the known workload, and the reasons */
	ck_assert_uint_eq(c[SC_EV_L2_REMOVE].count, W_REMOVES + W_MISMATCHES);
	ck_assert_uint_eq(read_reason(t.pin_dir, stage_seen, SC_EV_L2_REMOVE, 0), W_REMOVES);
	ck_assert_uint_eq(read_reason(t.pin_dir, stage_seen, SC_EV_L2_REMOVE, 1), W_MISMATCHES);
	ck_assert_uint_eq(read_reason(t.pin_dir, stage_seen, SC_EV_L2_MISS, 0), W_MISSES);
	ck_assert_uint_eq(read_reason(t.pin_dir, stage_seen, SC_EV_L2_MISS, 1), W_MISMATCHES);
	ck_assert_uint_eq(read_reason(t.pin_dir, stage_seen, SC_EV_L2_REJECT, SC_L2_REFUSE_DIGEST), W_REJECTS);
	ck_assert_uint_eq(st.refused[SC_L2_REFUSE_DIGEST], W_REJECTS);
	ck_assert_uint_eq(c[SC_EV_L2_ADMIT_FROM_L3].count, 1 + l3_admits);
	ck_assert_uint_eq(c[SC_EV_L2_HIT].bytes,
			  (uint64_t)(W_HITS_EACH * W_HIT_KEYS + W_PROMO_HITS) * 4096 + l3_hits * W_L3_BYTES);

	{
		struct sc_l3 *l3;
		struct sc_l3_opts o = { .flags = SC_L3_OPEN_NO_RECONCILE };
		ck_assert_int_eq(sc_l3_open(l3_dir, &o, &l3), 0);
		struct sc_l3_stats ls;
		ck_assert_int_eq(sc_l3_stats(l3, &ls), 0);
		sc_l3_close(l3);
		ck_assert_uint_eq(ls.fills, W_L3_FILLS);
		ck_assert_uint_eq(ls.verify_failures, 1);
		ck_assert_uint_eq(ls.quarantined, 1);
		ck_assert_uint_eq(c[SC_EV_FILL_DONE].count, ls.fills);
		ck_assert_uint_eq(c[SC_EV_FILL_DONE].bytes, ls.fill_bytes);
		ck_assert_uint_eq(c[SC_EV_FILL_ERROR].count, ls.verify_failures);
		ck_assert_uint_eq(c[SC_EV_FILL_START].count, ls.fills + ls.verify_failures);
		ck_assert_uint_eq(c[SC_EV_L3_QUARANTINE].count, ls.quarantined);
		/* the fills that carried a stage id are in that stage's histogram */
		ck_assert_uint_eq(fill_hist_total(t.pin_dir, stage_seen), ls.fills);
		struct sc_promote_stats ps;
		ck_assert_int_eq(sc_promote_stats(a, &ps), 0);
		ck_assert_uint_eq(ps.promoted, 1);
		ck_assert_uint_eq(c[SC_EV_PROMOTE].count, ps.promoted);
		ck_assert_uint_eq(c[SC_EV_PROMOTE].count + c[SC_EV_PROMOTE_NOT].count, ps.considered);
		/* the promoted entry's payoff: its hits since promotion */
		static char obj[W_L3_BYTES];
		memset(obj, 'l', sizeof(obj));
		struct sc_bpf_payoff po;
		ck_assert_msg(payoff_of(t.pin_dir, sc_digest(obj, sizeof(obj)), &po), "no payoff entry");
		ck_assert_uint_eq(po.hits, W_L3_HITS);
		/* and the promotion is in the recent list (other tracees may be there too) */
		int fd = map_open(t.pin_dir, "recent_promotions");
		int seen = 0;
		for (uint32_t slot = 0; slot < SC_BPF_RECENT; slot++) {
			struct sc_bpf_promotion rp;
			if (map_lookup(fd, &slot, &rp) == 0 && rp.seq && rp.pid == (uint32_t)child) {
				ck_assert_uint_eq(rp.tokens, W_TOKENS);
				ck_assert_uint_eq(rp.bytes, W_L3_BYTES);
				ck_assert_uint_eq(rp.why, SC_PROMOTE_WHY_SECOND_HIT);
				seen++;
			}
		}
		close(fd);
		ck_assert_int_eq(seen, 1);
		ck_assert_uint_eq(po.pid, (uint32_t)child);
		ck_assert(po.promoted_ns != 0);
	}
	{
		static struct sc_ring_stat rs[256];
		int n = sc_ring_stats(a, rs, 256);
		ck_assert_int_gt(n, 0);
		uint64_t records = 0, full = 0;
		for (int i = 0; i < n && i < 256; i++) {
			records += rs[i].records;
			full += rs[i].ring_full;
		}
		ck_assert_uint_eq(c[SC_EV_COMMIT].count, records);
		ck_assert_uint_eq(c[SC_EV_RING_FULL].count, full);
		ck_assert_uint_eq(full, W_RING_FULL);
	}

	/* the named fields, as an operator sees them */
	static const struct {
		const char *map, *fields[4];
	} named[] = {
		{ "counters", { "\"stage\"", "\"pid\"", "\"event\"", "\"bytes\"" } },
		{ "latency", { "\"kind\"", "\"slots\"", NULL } },
		{ "reasons", { "\"reason\"", "\"count\"", NULL } },
		{ "trace_state", { "\"promotions_seq\"", "\"drops\"", NULL } },
		{ "promotion_payoff", { "\"hits\"", "\"promoted_ns\"", "\"hit_bytes\"", NULL } },
		{ "recent_promotions", { "\"seq\"", "\"tokens\"", "\"time_ns\"", NULL } },
	};
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "bpftool -j map dump pinned '%s/%s'", t.pin_dir, named[i].map);
		FILE *f = popen(cmd, "r");
		ck_assert(f != NULL);
		static char json[1 << 20];
		size_t n = fread(json, 1, sizeof(json) - 1, f);
		json[n] = 0;
		ck_assert_int_eq(pclose(f), 0);
		ck_assert_msg(json[0] == '[' && strstr(json, "\"formatted\""), "%s: no BTF-formatted dump: %.200s",
			      named[i].map, json);
		for (int j = 0; j < 4 && named[i].fields[j]; j++)
			ck_assert_msg(strstr(json, named[i].fields[j]), "%s: field %s missing", named[i].map,
				      named[i].fields[j]);
	}
	/* pins are operator-only */
	struct stat sb;
	ck_assert_int_eq(stat(t.pin_dir, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0700);

	tracer_stop(&t);
	pin_dir_remove(t.pin_dir);
	pin_dir_remove(l3_dir);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Start the tracer, then fork the workload child: 0 in the child, its pid in the parent. */
static pid_t fork_traced(struct tracer *t)
{
	tracer_start(t);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert(pid >= 0);
	return pid;
}

/* Wait for the workload child @pid (it must exit 0) and read its counters from @pin_dir. */
static void workload_counters(pid_t pid, const char *pin_dir, struct sc_bpf_counter c[SC_EV_COUNT])
{
	int st;
	ck_assert(waitpid(pid, &st, 0) == pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "workload failed (status %d)", st);
	uint64_t stage_seen = 0;
	read_counters(pin_dir, (uint32_t)pid, c, &stage_seen);
}

/* Segmented admits: the l2_segments probe's logical and stored bytes, summed by eBPF,
 * equal what the library's stats say was saved. */
START_TEST(test_segment_bytes_equal_library)
{
	if (skip_without_bpf())
		return;
	const char *name;
	struct sc_arena_opts ao = { .size_bytes = 64ull << 20, .huge = SC_HUGE_OFF, .segment_bytes = 1u << 20 };
	struct sc_arena *a = sc_test_arena_opts("trseg", &ao, &name);
	struct tracer t;
	pid_t pid = fork_traced(&t);
	if (pid == 0) {
		struct sc_arena *ca;
		struct sc_stage *s;
		if (sc_arena_open(name, &ca) || sc_stage_open(ca, "model-m", "state-s", &s))
			_exit(2);
		uint8_t *b = malloc(6u << 20);
		for (size_t i = 0; i < (6u << 20); i++)
			b[i] = (uint8_t)(i * 2654435761u >> 24);
		int32_t tok[3] = { 1, 2, 3 };
		for (uint32_t k = 0; k < 2; k++) {
			uint64_t n = k ? 6u << 20 : 4u << 20;
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
			if (sc_l2_admit(s, "ns", tok, 2 + k, sc_digest(b, n), &p, SC_ORIGIN_DIRECT))
				_exit(3);
		}
		_exit(0);
	}
	struct sc_bpf_counter c[SC_EV_COUNT];
	workload_counters(pid, t.pin_dir, c);
	struct sc_l2_stats ls;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &ls), 0);
	ck_assert_uint_eq(c[SC_EV_L2_SEG_LOGICAL].count, 2);
	ck_assert_uint_eq(c[SC_EV_L2_SEG_LOGICAL].bytes, ls.logical_bytes);
	ck_assert_uint_eq(c[SC_EV_L2_SEG_STORED].bytes, ls.physical_bytes);
	ck_assert_uint_eq(c[SC_EV_L2_SEG_LOGICAL].bytes - c[SC_EV_L2_SEG_STORED].bytes, ls.saved_bytes);
	ck_assert_uint_eq(ls.saved_bytes, 4u << 20);
	tracer_stop(&t);
	pin_dir_remove(t.pin_dir);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Segmented L3 puts: the l3_segments probe's logical and stored bytes, summed by eBPF,
 * equal the store's logical and physical bytes. */
START_TEST(test_l3_segment_bytes_equal_library)
{
	if (skip_without_bpf())
		return;
	char dir[64];
	snprintf(dir, sizeof(dir), "/var/tmp/sc-trace-l3seg-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct tracer t;
	pid_t pid = fork_traced(&t);
	if (pid == 0) {
		struct sc_l3 *l3;
		if (sc_l3_open(dir, NULL, &l3) || sc_l3_set_segment_bytes(l3, 64u << 10))
			_exit(2);
		uint8_t *b = malloc(1u << 20);
		for (size_t i = 0; i < (1u << 20); i++)
			b[i] = (uint8_t)(i * 2654435761u >> 24);
		int32_t tok[3] = { 1, 2, 3 };
		for (uint32_t k = 0; k < 2; k++) {
			/* the second extends the first: its leading segments are stored already */
			uint64_t n = k ? (1u << 20) : (600u << 10) + 123;
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
			struct sc_l3_put_args pa = { .ns = "ns", .tokens = tok, .token_count = 2 + k, .payload = &p };
			struct sc_location loc;
			if (sc_l3_put(l3, &pa, &loc))
				_exit(3);
		}
		sc_l3_close(l3);
		_exit(0);
	}
	struct sc_bpf_counter c[SC_EV_COUNT];
	workload_counters(pid, t.pin_dir, c);
	struct sc_l3 *l3;
	struct sc_l3_stats ls;
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
	ck_assert_int_eq(sc_l3_stats(l3, &ls), 0);
	sc_l3_close(l3);
	ck_assert_uint_eq(c[SC_EV_L3_SEG_LOGICAL].count, 2);
	ck_assert_uint_eq(c[SC_EV_L3_SEG_LOGICAL].bytes, ls.logical_bytes);
	ck_assert_uint_eq(c[SC_EV_L3_SEG_STORED].bytes, ls.physical_bytes);
	ck_assert_uint_gt(ls.saved_bytes, 8 * (64u << 10)); /* 9 shared segments stored once, less the manifests */
	ck_assert_uint_eq(c[SC_EV_L3_SEG_LOGICAL].bytes - c[SC_EV_L3_SEG_STORED].bytes, ls.saved_bytes);
	tracer_stop(&t);
	pin_dir_remove(t.pin_dir);
	sc_test_rm_tree(dir);
}
END_TEST

/* The probes of the shared library fire too: a child calls the API of build/libstagecache.so.0
 * through dlopen (a copy separate from the static one linked into this binary) while the tracer
 * is attached with --lib. */
typedef int (*open_fn)(const char *, struct sc_arena **);
typedef void (*close_fn)(struct sc_arena *);
typedef int (*stage_open_fn)(struct sc_arena *, const char *, const char *, struct sc_stage **);
typedef void (*stage_close_fn)(struct sc_stage *);
typedef struct sc_digest (*digest_fn)(const void *, size_t);
typedef int (*admit_fn)(struct sc_stage *, const char *, const int32_t *, uint32_t, struct sc_digest,
			const struct sc_payload *, uint32_t);
typedef int (*get_fn)(struct sc_stage *, const char *, const int32_t *, uint32_t, const struct sc_location *,
		      struct sc_lease *);
typedef void (*release_fn)(struct sc_lease *);

#define SO_HITS 3
#define SO_MISSES 2

static void so_workload(const char *so, const char *arena_name)
{
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL); /* the executable exports no sc_*: the copy binds to itself */
	W_EXPECT(h != NULL, "dlopen %s: %s", so, dlerror());
	open_fn op = (open_fn)dlsym(h, "sc_arena_open");
	close_fn cl = (close_fn)dlsym(h, "sc_arena_close");
	stage_open_fn so_ = (stage_open_fn)dlsym(h, "sc_stage_open");
	stage_close_fn sc_ = (stage_close_fn)dlsym(h, "sc_stage_close");
	digest_fn dg = (digest_fn)dlsym(h, "sc_digest");
	admit_fn ad = (admit_fn)dlsym(h, "sc_l2_admit");
	get_fn gt = (get_fn)dlsym(h, "sc_l2_get");
	release_fn rl = (release_fn)dlsym(h, "sc_lease_release");
	W_EXPECT(op && cl && so_ && sc_ && dg && ad && gt && rl, "dlsym: %s", dlerror());
	struct sc_arena *a;
	struct sc_stage *s;
	int rc = op(arena_name, &a);
	W_EXPECT(rc == 0, "open: %d", rc);
	rc = so_(a, "model-so", "state-so", &s);
	W_EXPECT(rc == 0, "stage: %d", rc);
	static char buf[4096];
	int32_t tok[W_TOKENS];
	fill_tokens(tok, W_TOKENS, 700);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	rc = ad(s, "ns", tok, W_TOKENS, dg(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT);
	W_EXPECT(rc == 0, "admit: %d", rc);
	for (int i = 0; i < SO_HITS; i++) {
		struct sc_lease l;
		rc = gt(s, "ns", tok, W_TOKENS, NULL, &l);
		W_EXPECT(rc == 0, "hit: %d", rc);
		rl(&l);
	}
	for (int i = 0; i < SO_MISSES; i++) {
		struct sc_lease l;
		rc = gt(s, "ns", tok, W_TOKENS - 1 - i, NULL, &l);
		W_EXPECT(rc == -ENOENT, "miss: %d", rc);
	}
	sc_(s);
	cl(a);
	_exit(0);
}

START_TEST(test_shared_library_probes_fire)
{
	if (skip_without_bpf())
		return;
	char so[PATH_MAX + 32];
	snprintf(so, sizeof(so), "%s/libstagecache.so.0", sc_test_build_dir());
	const char *name;
	struct sc_arena *a = sc_test_arena("trace-so", 16ull << 20, &name);
	struct tracer t;
	tracer_start_on(&t, "--lib", so);
	fflush(NULL);
	pid_t child = fork();
	ck_assert(child >= 0);
	if (child == 0)
		so_workload(so, name);
	int st;
	ck_assert(waitpid(child, &st, 0) == child);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "shared-library workload failed (status %d)", st);

	struct sc_bpf_counter c[SC_EV_COUNT];
	read_counters(t.pin_dir, (uint32_t)child, c, NULL);
	struct sc_l2_stats ls;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &ls), 0);
	ck_assert_uint_eq(ls.hits, SO_HITS);
	ck_assert_uint_eq(ls.misses, SO_MISSES);
	ck_assert_uint_eq(c[SC_EV_L2_HIT].count, ls.hits);
	ck_assert_uint_eq(c[SC_EV_L2_MISS].count, ls.misses);
	ck_assert_uint_eq(c[SC_EV_L2_ADMIT].count, ls.inserts);
	tracer_stop(&t);
	pin_dir_remove(t.pin_dir);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A small workload: one admit and two hits, started when @gate becomes readable. */
static void mini_workload(const char *arena_name, int gate)
{
	char go;
	W_EXPECT(read(gate, &go, 1) == 1, "gate");
	struct sc_arena *a;
	struct sc_stage *s;
	W_EXPECT(sc_arena_open(arena_name, &a) == 0, "open");
	W_EXPECT(sc_stage_open(a, "model-pid", "state-pid", &s) == 0, "stage");
	static char buf[4096];
	int32_t tok[W_TOKENS];
	fill_tokens(tok, W_TOKENS, 800 + (int)getpid() % 100);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	W_EXPECT(sc_l2_admit(s, "ns", tok, W_TOKENS, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT) == 0, "admit");
	for (int i = 0; i < 2; i++) {
		struct sc_lease l;
		W_EXPECT(sc_l2_get(s, "ns", tok, W_TOKENS, NULL, &l) == 0, "hit");
		sc_lease_release(&l);
	}
	sc_stage_close(s);
	sc_arena_close(a);
	_exit(0);
}

/* --pid traces one process only (here a static binary: the target is found via /proc/PID/exe). */
START_TEST(test_pid_filter)
{
	if (skip_without_bpf())
		return;
	const char *name;
	struct sc_arena *a = sc_test_arena("trace-pid", 16ull << 20, &name);
	int gate[2][2];
	pid_t kids[2];
	fflush(NULL);
	for (int i = 0; i < 2; i++) {
		ck_assert(pipe(gate[i]) == 0);
		kids[i] = fork();
		ck_assert(kids[i] >= 0);
		if (kids[i] == 0) {
			close(gate[i][1]);
			mini_workload(name, gate[i][0]);
		}
		close(gate[i][0]);
	}
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", (int)kids[0]);
	struct tracer t;
	tracer_start_on(&t, "--pid", pid);
	for (int i = 0; i < 2; i++) {
		ck_assert(write(gate[i][1], "g", 1) == 1);
		close(gate[i][1]);
		int st;
		ck_assert(waitpid(kids[i], &st, 0) == kids[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "workload %d failed", i);
	}
	struct sc_bpf_counter c[SC_EV_COUNT];
	read_counters(t.pin_dir, (uint32_t)kids[0], c, NULL);
	ck_assert_uint_eq(c[SC_EV_L2_ADMIT].count, 1);
	ck_assert_uint_eq(c[SC_EV_L2_HIT].count, 2);
	read_counters(t.pin_dir, (uint32_t)kids[1], c, NULL);
	ck_assert_uint_eq(c[SC_EV_L2_ADMIT].count, 0);
	ck_assert_uint_eq(c[SC_EV_L2_HIT].count, 0);
	tracer_stop(&t);
	pin_dir_remove(t.pin_dir);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Run the CLI with @args (NULL-terminated), optionally as @uid; returns the exit status and the
 * first part of its stderr (or, with @fd 1, its stdout) in @err. */
static int run_cli_fd(uid_t uid, int fd, char *err, size_t errlen, const char *const *args)
{
	int fds[2];
	ck_assert(pipe(fds) == 0);
	pid_t pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, fd == 1 ? 2 : 1);
		dup2(fds[1], fd);
		close(fds[0]);
		if (uid && setuid(uid))
			_exit(126);
		execv(cli_path(), (char *const *)args);
		_exit(127);
	}
	close(fds[1]);
	size_t len = 0;
	ssize_t n;
	while (len < errlen - 1 && (n = read(fds[0], err + len, errlen - 1 - len)) > 0)
		len += (size_t)n;
	err[len] = 0;
	close(fds[0]);
	int st;
	ck_assert(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int run_cli(uid_t uid, char *err, size_t errlen, const char *const *args)
{
	return run_cli_fd(uid, 2, err, errlen, args);
}

/* --keep leaves the maps pinned (readable by bpftool after the tracer is gone), and a second
 * tracer refuses the occupied directory instead of mixing its counts in. */
START_TEST(test_keep_leaves_pins)
{
	if (skip_without_bpf())
		return;
	char pin[128], out[8192], p[256];
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/stagecache-check-keep-%d", (int)getpid());
	const char *keep[] = { "stagecache", "trace", "--binary", self_exe(), "--pin-dir", pin, "--duration", "0.3",
			       "--interval", "0.1", "--keep", "--json", NULL };
	ck_assert_int_eq(run_cli_fd(0, 1, out, sizeof(out), keep), 0);
	snprintf(p, sizeof(p), "{\"type\":\"ready\",\"attached\":%d,\"probes\":%d", N_PROBES, N_PROBES);
	ck_assert_msg(strstr(out, p), "%s", out);
	ck_assert_msg(strstr(out, "{\"type\":\"interval\""), "%s", out);
	static const char *const maps[] = { "counters", "reasons", "latency", "recent_promotions",
					    "promotion_payoff", "trace_state" };
	for (int i = 0; i < 6; i++) {
		snprintf(p, sizeof(p), "%s/%s", pin, maps[i]);
		ck_assert_msg(access(p, F_OK) == 0, "%s not kept", p);
	}
	snprintf(p, sizeof(p), "bpftool map dump pinned %s/trace_state | grep -q layout_version", pin);
	ck_assert_msg(system(p) == 0, "bpftool cannot read the kept trace_state");
	ck_assert_int_eq(run_cli(0, out, sizeof(out), keep), 1);
	ck_assert_msg(strstr(out, "already exists"), "%s", out);
	pin_dir_remove(pin);
}
END_TEST

START_TEST(test_errors_are_clear)
{
	if (access(cli_path(), X_OK)) {
		sc_skip("build/stagecache is not built");
		return;
	}
	char err[2048];
	const char *usage1[] = { "stagecache", "trace", "--lib", "a", "--binary", "b", NULL };
	ck_assert_int_eq(run_cli(0, err, sizeof(err), usage1), 2);
	const char *usage2[] = { "stagecache", "trace", "--interval", "soon", NULL };
	ck_assert_int_eq(run_cli(0, err, sizeof(err), usage2), 2);
	const char *help[] = { "stagecache", "trace", "--help", NULL };
	ck_assert_int_eq(run_cli(0, err, sizeof(err), help), 0);
	if (!sc_test_is_root()) {
		sc_skip("not root: the root-only error paths were not run");
		return;
	}
	const char *norootargs[] = { "stagecache", "trace", "--duration", "1", NULL };
	struct passwd *nobody = getpwnam("nobody");
	if (nobody) {
		ck_assert_int_eq(run_cli(nobody->pw_uid, err, sizeof(err), norootargs), 1);
		ck_assert_msg(strstr(err, "must run as root"), "not-root message: %s", err);
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		sc_skip("no kernel BTF: the path errors were not run");
		return;
	}
	const char *missing[] = { "stagecache", "trace", "--lib", "/nonexistent/libstagecache.so.0", NULL };
	ck_assert_int_eq(run_cli(0, err, sizeof(err), missing), 1);
	ck_assert_msg(strstr(err, "/nonexistent/libstagecache.so.0") && strstr(err, "No such file"), "%s", err);
	const char *notelf[] = { "stagecache", "trace", "--lib", "/etc/hostname", NULL };
	if (access("/etc/hostname", R_OK) == 0) {
		ck_assert_int_eq(run_cli(0, err, sizeof(err), notelf), 1);
		ck_assert_msg(strstr(err, "not an ELF file"), "%s", err);
	}
	char pin[128];
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/stagecache-check-err-%d", (int)getpid());
	const char *noprobes[] = { "stagecache", "trace", "--binary", "/bin/sh", "--pin-dir", pin, NULL };
	ck_assert_int_eq(run_cli(0, err, sizeof(err), noprobes), 1);
	ck_assert_msg(strstr(err, "has no stagecache USDT probes"), "%s", err);
	ck_assert_msg(access(pin, F_OK) != 0, "a failed trace left %s behind", pin);
	const char *notbpffs[] = { "stagecache", "trace", "--pin-dir", "/tmp", NULL };
	ck_assert_int_eq(run_cli(0, err, sizeof(err), notbpffs), 1);
	ck_assert_msg(strstr(err, "not on a bpf filesystem"), "%s", err);
	pin_dir_remove(pin);
}
END_TEST

/* ---- every refusal reason, counted by the library and by eBPF alike ---- */

#define R_ENTRY (128u << 10)

static int r_put(struct sc_stage *s, int k, size_t n)
{
	static char buf[2 << 20];
	int32_t tok[W_TOKENS];
	memset(buf, k, n);
	fill_tokens(tok, W_TOKENS, 5000 + k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { n } };
	return sc_l2_admit(s, "ns", tok, W_TOKENS, sc_digest(buf, n), &p, SC_ORIGIN_DIRECT);
}

static int r_get(struct sc_stage *s, int k, struct sc_lease *l)
{
	int32_t tok[W_TOKENS];
	fill_tokens(tok, W_TOKENS, 5000 + k);
	return sc_l2_get(s, "ns", tok, W_TOKENS, NULL, l);
}

/* One refusal of each reason, in a child traced like the workload above. */
static void refusal_workload(const char *arena_name)
{
	struct sc_arena *a = NULL;
	struct sc_stage *s = NULL;
	int rc = sc_arena_open(arena_name, &a);
	W_EXPECT(rc == 0, "open: %s", sc_strerror(rc));
	rc = sc_stage_open(a, "model-r", "state-r", &s);
	W_EXPECT(rc == 0, "stage: %s", sc_strerror(rc));
	static char buf[2 << 20];
	int32_t tok[W_TOKENS];
	fill_tokens(tok, W_TOKENS, 1);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { 4096 } };
	rc = sc_l2_admit(s, "ns", tok, W_TOKENS, (struct sc_digest){ 1, 2 }, &p, SC_ORIGIN_DIRECT);
	W_EXPECT(rc == -EBADMSG, "digest: %s", sc_strerror(rc));
	struct sc_payload bad = p;
	bad.kind = 99;
	rc = sc_l2_admit(s, "ns", tok, W_TOKENS, sc_digest(buf, 4096), &bad, SC_ORIGIN_DIRECT);
	W_EXPECT(rc == -EINVAL, "invalid: %s", sc_strerror(rc));
	struct sc_l2_resv r;
	rc = sc_l2_reserve(s, 1ull << 40, &r);
	W_EXPECT(rc == -E2BIG, "too large: %s", sc_strerror(rc));
	/* no room: the heap full of entries, every fifth leased */
	struct sc_lease l[SC_LEASES_MAX];
	int k = 0, nl = 0;
	for (;; k++) {
		struct sc_l2_stats st;
		rc = r_put(s, k, R_ENTRY);
		W_EXPECT(rc == 0, "fill %d: %s", k, sc_strerror(rc));
		W_EXPECT(sc_l2_stats(a, NULL, &st) == 0, "stats");
		if (st.evictions)
			break;
	}
	for (int i = 0; i <= k && nl < SC_LEASES_MAX; i += 5)
		if (r_get(s, i, &l[nl]) == 0)
			nl++;
	rc = r_put(s, 1000, 1 << 20);
	W_EXPECT(rc == -ENOSPC, "no room: %s", sc_strerror(rc));
	for (int i = 0; i < nl; i++)
		sc_lease_release(&l[i]);
	/* leased: a budget of two entries, both leased */
	rc = sc_l2_clear(a);
	W_EXPECT(rc >= 0, "clear: %s", sc_strerror(rc));
	rc = sc_l2_shrink_to(a, 2 * sc_l2_footprint(a, R_ENTRY, 0, W_TOKENS));
	W_EXPECT(rc == 0, "shrink: %s", sc_strerror(rc));
	for (int i = 0; i < 2; i++) {
		rc = r_put(s, 2000 + i, R_ENTRY);
		W_EXPECT(rc == 0, "put: %s", sc_strerror(rc));
		rc = r_get(s, 2000 + i, &l[i]);
		W_EXPECT(rc == 0, "lease: %s", sc_strerror(rc));
	}
	rc = r_put(s, 2002, R_ENTRY);
	W_EXPECT(rc == -ENOSPC, "leased: %s", sc_strerror(rc));
	sc_lease_release(&l[0]);
	sc_lease_release(&l[1]);
	/* scan limit: both entries hit (the first step only moves one), one step allowed */
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++) {
			rc = r_get(s, 2000 + i, &l[0]);
			W_EXPECT(rc == 0, "hit: %s", sc_strerror(rc));
			sc_lease_release(&l[0]);
		}
	sc_l2_set_policy_limits(1, 0);
	rc = r_put(s, 2003, R_ENTRY);
	W_EXPECT(rc == -ENOSPC, "scan limit: %s", sc_strerror(rc));
	sc_l2_set_policy_limits(0, 0);
	/* over budget */
	rc = r_put(s, 2004, 1 << 20);
	W_EXPECT(rc == -E2BIG, "over budget: %s", sc_strerror(rc));
	/* other: a publish that wants a lease with every lease slot in use */
	rc = sc_l2_shrink_to(a, 0);
	W_EXPECT(rc == 0, "budget: %s", sc_strerror(rc));
	for (int i = 0; i < SC_LEASES_MAX; i++) {
		rc = r_put(s, 3000 + i, 4096);
		W_EXPECT(rc == 0, "put: %s", sc_strerror(rc));
		rc = r_get(s, 3000 + i, &l[i]);
		W_EXPECT(rc == 0, "lease %d: %s", i, sc_strerror(rc));
	}
	rc = sc_l2_reserve(s, 4096, &r);
	W_EXPECT(rc == 0, "reserve: %s", sc_strerror(rc));
	memset(r.ptr, 7, 4096);
	struct sc_lease want;
	fill_tokens(tok, W_TOKENS, 7);
	rc = sc_l2_publish(s, "ns", tok, W_TOKENS, sc_digest(r.ptr, 4096), &r, SC_PAYLOAD_FULL_STATE, 4096, 0, NULL,
			   SC_ORIGIN_FROM_L3, &want);
	W_EXPECT(rc == -EMFILE, "other: %s", sc_strerror(rc));
	sc_l2_reserve_release(&r);
	for (int i = 0; i < SC_LEASES_MAX; i++)
		sc_lease_release(&l[i]);
	/* promotion outcomes: one published, one refused (leased) */
	struct sc_digest d1 = { 11, 12 }, d2 = { 21, 22 };
	rc = sc_promote_outcome(a, sc_stage_id(s), d1, 4096, -1);
	W_EXPECT(rc == 0, "outcome: %s", sc_strerror(rc));
	rc = sc_promote_outcome(a, sc_stage_id(s), d2, 4096, SC_L2_REFUSE_LEASED);
	W_EXPECT(rc == 0, "outcome: %s", sc_strerror(rc));
	sc_stage_close(s);
	sc_arena_close(a);
	_exit(0);
}

START_TEST(test_refusals_by_reason_equal_library)
{
	if (skip_without_bpf())
		return;
	const char *name;
	struct sc_arena_opts ao = { .size_bytes = 16ull << 20, .huge = SC_HUGE_OFF };
	struct sc_arena *a = sc_test_arena_opts("trace-r", &ao, &name);
	struct tracer t;
	pid_t pid = fork_traced(&t);
	if (pid == 0)
		refusal_workload(name);
	int status;
	ck_assert(waitpid(pid, &status, 0) == pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "workload failed (status %d)", status);
	struct sc_stage *s;
	ck_assert_int_eq(sc_stage_open(a, "model-r", "state-r", &s), 0);
	uint64_t sid = sc_stage_id(s);
	struct sc_l2_stats st;
	ck_assert_int_eq(sc_l2_stats(a, s, &st), 0);
	sc_stage_close(s);
	uint64_t total = 0;
	for (int r = 0; r < SC_L2_REFUSE_COUNT; r++) {
		ck_assert_msg(st.refused[r] == 1, "library: %llu refusals of reason %s", (unsigned long long)st.refused[r],
			      sc_l2_refusal_name(r));
		ck_assert_msg(read_reason(t.pin_dir, sid, SC_EV_L2_REJECT, (uint32_t)r) == st.refused[r],
			      "eBPF and library disagree on reason %s", sc_l2_refusal_name(r));
		total += st.refused[r];
	}
	ck_assert_uint_eq(st.admission_rejects, total);
	struct sc_bpf_counter c[SC_EV_COUNT];
	read_counters(t.pin_dir, (uint32_t)pid, c, NULL);
	ck_assert_uint_eq(c[SC_EV_L2_REJECT].count, total);
	struct sc_promote_stats ps;
	ck_assert_int_eq(sc_promote_stats(a, &ps), 0);
	ck_assert_uint_eq(ps.published, 1);
	ck_assert_uint_eq(ps.refused[SC_L2_REFUSE_LEASED], 1);
	ck_assert_uint_eq(c[SC_EV_PROMOTE_PUBLISHED].count, ps.published);
	ck_assert_uint_eq(c[SC_EV_PROMOTE_REFUSED].count, 1);
	ck_assert_uint_eq(read_reason(t.pin_dir, sid, SC_EV_PROMOTE_REFUSED, SC_L2_REFUSE_LEASED), 1);
	tracer_stop(&t);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- every miss reason, counted by the library and by eBPF alike ---- */

/* L2 misses of several reasons and restores with no state of several reasons, in a child traced
 * like the workloads above. */
static void miss_workload(const char *arena_name, const char *dir)
{
	struct sc_arena *a = NULL;
	struct sc_stage *s = NULL;
	struct sc_l3 *h = NULL;
	int rc = sc_arena_open(arena_name, &a);
	W_EXPECT(rc == 0, "open: %s", sc_strerror(rc));
	rc = sc_stage_open(a, "model-m", "state-m", &s);
	W_EXPECT(rc == 0, "stage: %s", sc_strerror(rc));
	rc = sc_l3_open(dir, NULL, &h);
	W_EXPECT(rc == 0, "l3: %s", sc_strerror(rc));
	struct sc_lease l;
	/* never stored */
	W_EXPECT(r_get(s, 1, &l) == -ENOENT, "never stored");
	/* removed */
	W_EXPECT(r_put(s, 2, 4096) == 0, "put");
	int32_t tok[W_TOKENS];
	fill_tokens(tok, W_TOKENS, 5000 + 2);
	struct sc_key k;
	W_EXPECT(sc_l2_key(s, "ns", tok, W_TOKENS, &k) == 0 && sc_l2_remove(s, k) == 0, "remove");
	W_EXPECT(r_get(s, 2, &l) == -ENOENT, "removed");
	/* refused: over the budget, and for low benefit (1 ns for 1 MiB) */
	rc = sc_l2_shrink_to(a, 4 * sc_l2_footprint(a, R_ENTRY, 0, W_TOKENS));
	W_EXPECT(rc == 0, "shrink: %s", sc_strerror(rc));
	W_EXPECT(r_put(s, 3, 1 << 20) == -E2BIG, "over budget");
	W_EXPECT(r_get(s, 3, &l) == -ENOENT, "refused");
	static char buf[1 << 20];
	memset(buf, 3, sizeof(buf));
	fill_tokens(tok, W_TOKENS, 5000 + 4);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { 100000 } };
	rc = sc_l2_admit_cost(s, "ns", tok, W_TOKENS, sc_digest(buf, 100000), &p, SC_ORIGIN_DIRECT, 1);
	W_EXPECT(rc == -ENOSPC, "low benefit: %s", sc_strerror(rc));
	W_EXPECT(r_get(s, 4, &l) == -ENOENT, "refused (low benefit)");
	/* evicted under pressure (a budget of four entries, eight admitted) */
	for (int i = 10; i < 18; i++)
		W_EXPECT(r_put(s, i, R_ENTRY) == 0, "put %d", i);
	W_EXPECT(r_get(s, 10, &l) == -ENOENT, "evicted");
	/* evicted for the budget */
	rc = sc_l2_shrink_to(a, sc_l2_footprint(a, R_ENTRY, 0, W_TOKENS));
	W_EXPECT(rc == 0, "shrink: %s", sc_strerror(rc));
	for (int i = 11; i < 18; i++) /* of those still there before, some went for the budget */
		if (r_get(s, i, &l) == 0)
			sc_lease_release(&l);
	/* restores with no state: never stored, another identity's, a deadline already past */
	struct sc_restore r;
	fill_tokens(tok, W_TOKENS, 9001);
	W_EXPECT(sc_restore(s, h, "ns", tok, W_TOKENS, 0, &r) == -ENOENT, "restore: never stored");
	struct sc_payload q = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { 8192 } };
	struct sc_l3_put_args pa = { .model_identity = "model-m", .state_identity = "another", .ns = "ns",
				     .tokens = tok, .token_count = W_TOKENS, .payload = &q };
	W_EXPECT(sc_l3_put(h, &pa, NULL) == 0, "l3 put");
	W_EXPECT(sc_restore(s, h, "ns", tok, W_TOKENS, 0, &r) == -ENOENT, "restore: identity");
	pa.state_identity = "state-m";
	fill_tokens(tok, W_TOKENS, 9002);
	W_EXPECT(sc_l3_put(h, &pa, NULL) == 0, "l3 put");
	struct sc_restore_opts o = { .deadline_ns = sc_clock_ns() - 1 };
	W_EXPECT(sc_restore_with(s, h, "ns", tok, W_TOKENS, &o, &r) == -ETIME, "restore: deadline");
	sc_l3_close(h);
	sc_stage_close(s); /* flushes the stage's pending L2 miss counts */
	sc_arena_close(a);
	_exit(0);
}

START_TEST(test_miss_reasons_equal_library)
{
	if (skip_without_bpf())
		return;
	const char *name;
	char dir[64];
	snprintf(dir, sizeof(dir), "/var/tmp/sc-trace-miss-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_arena_opts ao = { .size_bytes = 16ull << 20, .huge = SC_HUGE_OFF };
	struct sc_arena *a = sc_test_arena_opts("trace-m", &ao, &name);
	struct tracer t;
	pid_t pid = fork_traced(&t);
	if (pid == 0)
		miss_workload(name, dir);
	int status;
	ck_assert(waitpid(pid, &status, 0) == pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "workload failed (status %d)", status);
	struct sc_stage *s;
	ck_assert_int_eq(sc_stage_open(a, "model-m", "state-m", &s), 0);
	uint64_t sid = sc_stage_id(s);
	sc_stage_close(s);
	struct sc_miss_stats m;
	ck_assert_int_eq(sc_miss_stats(a, sid, &m), 0);
	static const int l2_want[] = { SC_MISS_NEVER_STORED, SC_MISS_REMOVED, SC_MISS_REFUSED, SC_MISS_EVICTED_PRESSURE,
				       SC_MISS_EVICTED_BUDGET };
	for (size_t i = 0; i < sizeof(l2_want) / sizeof(l2_want[0]); i++)
		ck_assert_msg(m.l2[l2_want[i]] >= 1, "the workload made no L2 miss of reason %s",
			      sc_miss_reason_name(l2_want[i]));
	uint64_t l2 = 0, rs = 0;
	for (int r = 0; r < SC_MISS_MAX; r++) {
		ck_assert_msg(read_reason(t.pin_dir, sid, SC_EV_MISS_L2, (uint32_t)r) == m.l2[r],
			      "eBPF and library disagree on L2 misses of reason %s", sc_miss_reason_name(r));
		ck_assert_msg(read_reason(t.pin_dir, sid, SC_EV_MISS_RESTORE, (uint32_t)r) == m.restore[r],
			      "eBPF and library disagree on restore misses of reason %s", sc_miss_reason_name(r));
		l2 += m.l2[r];
		rs += m.restore[r];
	}
	for (int r = 0; r < SC_L2_REFUSE_REASONS; r++)
		ck_assert_uint_eq(read_reason(t.pin_dir, sid, SC_EV_MISS_REFUSED, (uint32_t)r), m.l2_refused[r]);
	ck_assert_uint_eq(m.l2_refused[SC_L2_REFUSE_OVER_BUDGET], 1);
	ck_assert_uint_eq(m.l2_refused[SC_L2_REFUSE_LOW_BENEFIT], 1);
	for (int r = 0; r < SC_DEADLINE_COUNT; r++)
		ck_assert_uint_eq(read_reason(t.pin_dir, sid, SC_EV_MISS_DEADLINE, (uint32_t)r), m.deadline[r]);
	ck_assert_uint_eq(m.restore[SC_MISS_NEVER_STORED], 1);
	ck_assert_uint_eq(m.restore[SC_MISS_IDENTITY], 1);
	ck_assert_uint_eq(m.deadline[SC_DEADLINE_PAST], 1);
	struct sc_bpf_counter c[SC_EV_COUNT];
	read_counters(t.pin_dir, (uint32_t)pid, c, NULL);
	ck_assert_uint_eq(c[SC_EV_MISS_L2].count, l2);
	ck_assert_uint_eq(c[SC_EV_MISS_RESTORE].count, rs);
	/* every L2 miss is classified: the reasons add up to the misses */
	struct sc_l2_stats st;
	ck_assert_int_eq(sc_l2_stats_id(a, sid, &st), 0);
	ck_assert_uint_eq(st.misses, l2);
	ck_assert_uint_eq(c[SC_EV_L2_MISS].count, l2);
	tracer_stop(&t);
	sc_test_arena_destroy(a, name);
	sc_test_rm_tree(dir);
}
END_TEST

Suite *trace_suite(void)
{
	Suite *s = suite_create("trace");
	TCase *tc = tcase_create("trace");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_counters_equal_library);
	tcase_add_test(tc, test_segment_bytes_equal_library);
	tcase_add_test(tc, test_l3_segment_bytes_equal_library);
	tcase_add_test(tc, test_shared_library_probes_fire);
	tcase_add_test(tc, test_pid_filter);
	tcase_add_test(tc, test_refusals_by_reason_equal_library);
	tcase_add_test(tc, test_miss_reasons_equal_library);
	tcase_add_test(tc, test_errors_are_clear);
	tcase_add_test(tc, test_keep_leaves_pins);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(trace_suite)
