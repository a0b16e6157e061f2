/*
 * tests/check_events_pub.c — `stagecache events` end to end, as a router sees it: a real
 * subscriber (tests/kv_subscriber.py: Debian's python3-zmq and python3-msgpack, decoding each
 * KVEventBatch as vLLM's types define them) rebuilds the set of blocks per medium while a
 * workload admits and evicts (a small arena), clears, puts into a bound L3 store and evicts it,
 * overflows the event ring, kills writers with kill -9 (also right after a link and inside an
 * append), kills the publisher with kill -9 and starts another; the subscriber loses batches on
 * purpose and heals the gaps through the replay socket; malformed replay requests are refused
 * and the publisher goes on. At the end its sets must equal what `stagecache ls --token-ids`
 * and `stagecache l3 ls --prefixes` report (the subscriber computes the hashes itself, with
 * python3-xxhash, from the documented formula). Real processes throughout.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"

#ifndef SC_SRC_DIR
#define SC_SRC_DIR "."
#endif
#define PYTHON "/usr/bin/python3"
#define ARENA_BYTES (24ull << 20)
#define PAYLOAD (256u << 10)

struct env {
	const char *name;
	char dir[64];         /* temp dir: the L3 store, logs, state */
	char l3[96];
	char endpoint[64], replay[64];
	char state[128];
	pid_t pub, sub;
	int pub_runs;
	const char *format;   /* --format of the publisher and the subscriber */
	struct sc_arena *a;
};

/* fork + exec @argv with stdout and stderr to @log. */
static pid_t spawn(char *const argv[], const char *log)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static int file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return strstr(buf, needle) != NULL;
}

static int exited(pid_t pid)
{
	int status;
	return waitpid(pid, &status, WNOHANG) == pid;
}

/* Start a publisher; a port another test took is tried again with the next pair. */
static void start_publisher(struct env *e)
{
	char log[160], bin[512];
	snprintf(bin, sizeof(bin), "%s/stagecache", sc_test_build_dir());
	for (int attempt = 0; attempt < 8; attempt++) {
		snprintf(log, sizeof(log), "%s/pub.%d.log", e->dir, e->pub_runs++);
		char *argv[] = { bin,	 "events",	      (char *)e->name, "--endpoint",	 e->endpoint,
				 "--replay", e->replay,	       "--l3",		e->l3,		 "--json",
				 "--heartbeat-ms", "200",	"--l3-rescan-ms", "1000",	"--format",
				 (char *)(e->format ? e->format : "array"), NULL };
		e->pub = spawn(argv, log);
		double end = sc_test_now_s() + 15;
		int up = 0, gone = 0;
		while (sc_test_now_s() < end && !(up = file_has(log, "\"event\":\"start\"")) && !(gone = exited(e->pub)))
			sc_test_pause_ms(20);
		if (up)
			return;
		ck_assert_msg(gone, "waited 15 s for the publisher's start line (%s)", log);
		ck_assert_msg(file_has(log, "cannot bind"), "the publisher exited at start (%s)", log);
		/* a port in use by someone else: the next pair (the subscriber is told below) */
		int port = atoi(strrchr(e->endpoint, ':') + 1) + 2;
		snprintf(e->endpoint, sizeof(e->endpoint), "tcp://127.0.0.1:%d", port);
		snprintf(e->replay, sizeof(e->replay), "tcp://127.0.0.1:%d", port + 1);
	}
	ck_abort_msg("no free port pair for the publisher");
}

static void start_subscriber(struct env *e, const char *skip)
{
	char script[512], log[160];
	snprintf(script, sizeof(script), "%s/tests/kv_subscriber.py", SC_SRC_DIR);
	snprintf(log, sizeof(log), "%s/sub.log", e->dir);
	char *argv[] = { PYTHON, script, "subscribe", "--endpoint", e->endpoint, "--replay", e->replay,
			 "--state", e->state, "--skip", (char *)skip, "--format", (char *)(e->format ? e->format : "array"),
			 NULL };
	e->sub = spawn(argv, log);
	double end = sc_test_now_s() + 15;
	while (sc_test_now_s() < end && access(e->state, F_OK) && !exited(e->sub))
		sc_test_pause_ms(20);
	ck_assert_msg(!access(e->state, F_OK), "waited 15 s for the subscriber's first state (%s)", log);
}

static uint32_t conv_tokens(int32_t *t, uint32_t conv, uint32_t turn)
{
	uint32_t n = 24 + 20 * turn;
	for (uint32_t i = 0; i < n; i++)
		t[i] = (int32_t)(conv * 100000 + i * 7 + 1);
	return n;
}

static int admit(struct sc_stage *st, const int32_t *t, uint32_t n, uint32_t salt)
{
	static uint8_t b[PAYLOAD];
	for (size_t i = 0; i < PAYLOAD; i += 64)
		b[i] = (uint8_t)(i + salt);
	b[0] = (uint8_t)salt;
	memcpy(b + 4, &salt, 4);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { PAYLOAD } };
	return sc_l2_admit(st, "conv", t, n, sc_digest(b, PAYLOAD), &p, SC_ORIGIN_DIRECT);
}

/* Child: admit conversation turns @first.. (@count of them, or forever when 0), arming @fault. */
static void admitter(const char *name, uint32_t first, uint32_t count, const char *fault)
{
	struct sc_arena *a;
	struct sc_stage *st;
	if (sc_arena_open(name, &a) || sc_stage_open(a, "model", "state", &st))
		_exit(90);
	if (fault)
		sc_fault_arm(fault);
	int32_t t[1024];
	for (uint32_t i = first; !count || i < first + count; i++) {
		uint32_t n = conv_tokens(t, i % 12, (i / 12) % 30);
		int rc = admit(st, t, n, i);
		if (rc && rc != -ENOSPC)
			_exit(91);
	}
	_exit(0);
}

/* Child: put prefixes into the L3 store bound to the arena, then evict half of it. */
static void l3_writer(const char *name, const char *dir, uint32_t first, uint32_t count)
{
	struct sc_arena *a;
	struct sc_l3 *l3;
	if (sc_arena_open(name, &a) || sc_l3_open(dir, NULL, &l3) || sc_l3_bind_arena(l3, a))
		_exit(90);
	int32_t t[1024];
	static uint8_t b[8192];
	for (uint32_t i = first; i < first + count; i++) {
		uint32_t n = conv_tokens(t, 50 + i % 5, i / 5);
		memset(b, (int)i, sizeof(b));
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { sizeof(b) } };
		struct sc_l3_put_args pa = { .ns = "conv", .tokens = t, .token_count = n, .payload = &p };
		if (sc_l3_put(l3, &pa, NULL))
			_exit(91);
	}
	struct sc_l3_stats s;
	if (sc_l3_stats(l3, &s) || sc_l3_evict_to(l3, s.bytes / 2) < 0)
		_exit(92);
	sc_l3_close(l3);
	sc_arena_close(a);
	_exit(0);
}

static void run_child(pid_t pid)
{
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a workload process failed (status %d)", status);
}

/* Kill -9 an endless admitter once it has admitted a few entries (the arena's inserts say so). */
static void kill_admitter_midway(struct env *e, uint32_t first)
{
	struct sc_l2_stats s0, s;
	ck_assert_int_eq(sc_l2_stats(e->a, NULL, &s0), 0);
	pid_t pid = fork();
	if (!pid)
		admitter(e->name, first, 0, NULL);
	double end = sc_test_now_s() + 20;
	do {
		sc_test_pause_ms(5);
		ck_assert_int_eq(sc_l2_stats(e->a, NULL, &s), 0);
	} while (s.inserts < s0.inserts + 15 && sc_test_now_s() < end);
	ck_assert_msg(s.inserts >= s0.inserts + 15, "waited 20 s for a writer's 15 admissions");
	kill(pid, SIGKILL);
	sc_test_wait_killed(pid);
}

/* Wait until the subscriber's sets equal what ls and l3 ls report (everything published and
 * received): at most @secs. Returns the checker's exit status. */
static int wait_equal(struct env *e, double secs)
{
	const char *b = sc_test_build_dir();
	double end = sc_test_now_s() + secs;
	int rc;
	do {
		sc_test_pause_ms(200);
		rc = sc_test_sh("%s/stagecache ls %s --json --token-ids > %s/ls.json && %s/stagecache l3 ls %s --prefixes --json > "
			"%s/l3.json && " PYTHON " %s/tests/kv_subscriber.py expect --ls %s/ls.json --l3ls %s/l3.json "
			"--state %s > %s/expect.log 2>&1",
			b, e->name, e->dir, b, e->l3, e->dir, SC_SRC_DIR, e->dir, e->dir, e->state, e->dir);
	} while (rc && sc_test_now_s() < end);
	return rc;
}

static long state_counter(struct env *e, const char *key)
{
	char path[256], buf[65536], pat[64];
	snprintf(path, sizeof(path), "%s", e->state);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	char *p = strstr(buf, pat);
	return p ? atol(p + strlen(pat)) : -1;
}

static void malformed_replays(struct env *e)
{
	char script[512];
	snprintf(script, sizeof(script), "%s/tests/kv_subscriber.py", SC_SRC_DIR);
	/* frames after the DEALER's own: none but the delimiter, a 1-byte sequence, an extra frame,
	 * a non-empty delimiter, nine frames, a frame past the size limit (the connection is cut) */
	const char *raw[] = { "", ",01", ",0000000000000001,ff", "61,0000000000000001", "00,00,00,00,00,00,00,00,00",
			      ",00000000000000000000000000000000000000000000000000000000000000000000000000000000"
			      "000000000000000000000000000000000000000000000000000000000000000000000000000000" };
	for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
		ck_assert_int_eq(sc_test_sh(PYTHON " %s replay --replay %s --raw '%s' >> %s/raw.log 2>&1", script, e->replay, raw[i],
				    e->dir),
				 0);
		ck_assert_msg(!exited(e->pub), "the publisher died on malformed replay request %zu", i);
	}
	char log[160];
	snprintf(log, sizeof(log), "%s/raw.log", e->dir);
	ck_assert_msg(file_has(log, "reply: ,ffffffffffffffff,"), "a refused request is answered with the end marker");
}

/* What the test needs beyond the build: 1, or 0 after a SKIP line saying what is missing. */
static int have_tools(void)
{
	if (sc_test_sh(PYTHON " -c 'import zmq, msgpack, xxhash' 2>/dev/null")) {
		sc_skip("events: %s lacks zmq, msgpack or xxhash (tools/scripts/deps.sh installs python3-zmq, python3-msgpack, "
			"python3-xxhash)", PYTHON);
		return 0;
	}
	if (sc_test_sh("ldconfig -p | grep -q libzmq.so.5")) {
		sc_skip("events: no libzmq.so.5 (tools/scripts/deps.sh installs libzmq5)");
		return 0;
	}
	return 1;
}

/* A fresh arena, temp dir, L3 store and a port pair; returns the first port. */
static int env_setup(struct env *e)
{
	struct sc_arena_opts o = { .size_bytes = ARENA_BYTES, .huge = SC_HUGE_OFF };
	e->a = sc_test_arena_opts("evpub", &o, &e->name);
	strcpy(e->dir, "/tmp/sc-evpub-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(e->dir));
	snprintf(e->l3, sizeof(e->l3), "%s/l3", e->dir);
	snprintf(e->state, sizeof(e->state), "%s/sub.json", e->dir);
	int port = 21000 + (int)(getpid() % 9000) * 2;
	snprintf(e->endpoint, sizeof(e->endpoint), "tcp://127.0.0.1:%d", port);
	snprintf(e->replay, sizeof(e->replay), "tcp://127.0.0.1:%d", port + 1);
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(e->l3, NULL, &l3), 0); /* made before the publisher opens it */
	sc_l3_close(l3);
	return port;
}

static void env_stop(struct env *e)
{
	int status;
	kill(e->pub, SIGTERM);
	ck_assert_int_eq(waitpid(e->pub, &status, 0), e->pub);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	kill(e->sub, SIGKILL);
	waitpid(e->sub, &status, 0);
	char log[160];
	snprintf(log, sizeof(log), "%s/pub.%d.log", e->dir, e->pub_runs - 1);
	ck_assert(file_has(log, "\"event\":\"stop\""));
	sc_test_rm_tree(e->dir);
	sc_test_arena_destroy(e->a, e->name);
}

START_TEST(test_subscriber_sees_what_ls_sees)
{
	if (!have_tools())
		return;
	struct env e = { 0 };
	int port = env_setup(&e);

	/* what the arena held before anyone listened comes in the first (snapshot) batch */
	pid_t w = fork();
	if (!w)
		admitter(e.name, 0, 20, NULL);
	run_child(w);
	start_publisher(&e);
	/* a late subscriber that loses batches 10, 11 and 25 on purpose: replays heal the gaps */
	start_subscriber(&e, "10,11,25");

	/* admits with evictions (24 MiB, 256 KiB entries) and L3 puts and evictions, at once */
	pid_t w1 = fork();
	if (!w1)
		admitter(e.name, 20, 150, NULL);
	pid_t w2 = fork();
	if (!w2)
		l3_writer(e.name, e.l3, 0, 40);
	run_child(w1);
	run_child(w2);
	struct sc_l2_stats ls;
	ck_assert_int_eq(sc_l2_stats(e.a, NULL, &ls), 0);
	ck_assert_uint_gt(ls.evictions, 0);
	ck_assert_int_eq(wait_equal(&e, 30), 0);

	/* a clear, then the L2 filled again */
	ck_assert_int_ge(sc_l2_clear(e.a), 1);
	w = fork();
	if (!w)
		admitter(e.name, 200, 40, NULL);
	run_child(w);
	ck_assert_int_eq(wait_equal(&e, 30), 0);

	/* writers killed: anywhere in a loop, right after linking an entry (before its event), and
	 * inside an append (a claimed slot never committed) */
	kill_admitter_midway(&e, 300);
	w = fork();
	if (!w)
		admitter(e.name, 400, 0, "l2.admit.linked@7");
	sc_test_wait_killed(w);
	w = fork();
	if (!w)
		admitter(e.name, 500, 0, "events.append.claimed@4");
	sc_test_wait_killed(w);
	ck_assert_int_eq(wait_equal(&e, 30), 0);

	/* a full ring: the publisher is stopped while writers drop events, then resynchronises */
	kill(e.pub, SIGSTOP);
	struct sc_events_stats es;
	ck_assert_int_eq(sc_events_stats(e.a, &es), 0);
	struct sc_event hint = { .type = SC_EVENT_L2_REMOVED };
	for (uint32_t i = 0; i < es.records; i++) {
		hint.key.lo = i;
		(void)sc_events_post(e.a, &hint);
	}
	w = fork();
	if (!w)
		admitter(e.name, 600, 24, NULL);
	run_child(w);
	uint64_t dropped = es.dropped;
	ck_assert_int_eq(sc_events_stats(e.a, &es), 0);
	ck_assert_uint_gt(es.dropped, dropped);
	kill(e.pub, SIGCONT);
	ck_assert_int_eq(wait_equal(&e, 30), 0);

	/* malformed replay requests: refused, the publisher goes on */
	malformed_replays(&e);

	/* the publisher killed with kill -9 while writers work; another one takes over */
	w = fork();
	if (!w)
		admitter(e.name, 700, 30, NULL);
	kill(e.pub, SIGKILL);
	sc_test_wait_killed(e.pub);
	w2 = fork();
	if (!w2)
		l3_writer(e.name, e.l3, 100, 20);
	start_publisher(&e);
	run_child(w);
	run_child(w2);
	ck_assert_int_eq(wait_equal(&e, 30), 0);

	(void)sc_test_sh("sed 's/^/events_pub: /' %s/expect.log", e.dir); /* the sets and the router's counters, for the log */
	/* what the router saw: gaps healed by replay, snapshots, no decoding error */
	ck_assert_int_ge(state_counter(&e, "gaps"), 1);
	ck_assert_int_ge(state_counter(&e, "replays"), 2);
	ck_assert_int_ge(state_counter(&e, "snapshots"), 2);
	ck_assert_int_eq(state_counter(&e, "errors"), 0);
	ck_assert_int_ge(state_counter(&e, "skipped"), 3);

	/* a second publisher is refused while this one runs */
	char cmd_log[160];
	snprintf(cmd_log, sizeof(cmd_log), "%s/second.log", e.dir);
	ck_assert_int_eq(sc_test_sh("%s/stagecache events %s --endpoint tcp://127.0.0.1:%d > %s 2>&1", sc_test_build_dir(), e.name,
			    port + 5000, cmd_log),
			 1);
	ck_assert(file_has(cmd_log, "already has a publisher"));

	env_stop(&e);
}
END_TEST

/* The later vLLM form (events as maps with a "type" key, what Dynamo's ZMQ relay documents):
 * the same sets through admits, evictions and L3 puts. */
START_TEST(test_map_format)
{
	if (!have_tools())
		return;
	struct env e = { .format = "map" };
	(void)env_setup(&e);
	start_publisher(&e);
	start_subscriber(&e, "");
	pid_t w1 = fork();
	if (!w1)
		admitter(e.name, 0, 120, NULL);
	pid_t w2 = fork();
	if (!w2)
		l3_writer(e.name, e.l3, 0, 20);
	run_child(w1);
	run_child(w2);
	ck_assert_int_eq(wait_equal(&e, 30), 0);
	ck_assert_int_eq(state_counter(&e, "errors"), 0);
	env_stop(&e);
}
END_TEST

Suite *events_pub_suite(void)
{
	Suite *s = suite_create("events_pub");
	TCase *tc = tcase_create("publisher");
	tcase_set_timeout(tc, 400);
	tcase_add_test(tc, test_subscriber_sees_what_ls_sees);
	tcase_add_test(tc, test_map_format);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(events_pub_suite)
