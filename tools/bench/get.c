/*
 * tools/bench/get.c — `stagecache bench get`: a get from another process, every byte of the value
 * delivered into the caller's memory, side by side with what a user would pick otherwise.
 *
 * The same work on every side. A get takes an item's tokens, derives its key, finds the value and
 * copies every byte into a destination that rotates over 16 buffers (so the destination is not
 * always the same hot lines):
 *   ours            sc_l2_get from the tokens (keyed XXH3-128 of them, lock-free lookup, lease),
 *                   memcpy out of the arena, sc_lease_release;
 *   floor           the memory floor: memcpy of the same bytes at the same random positions from a
 *                   plain buffer of the same total size and page size; no key, no lookup at all;
 *   lmdb            XXH3-128 of the tokens as a 16-byte key, mdb_txn_renew, mdb_get (the value in
 *                   place in LMDB's map), memcpy, mdb_txn_reset — LMDB's own read-only pattern;
 *   socket_floor    a minimal unix-socket server of ours answering from an in-memory hash table
 *                   (one writev per request): what any socket design can reach at best;
 *   memcached_unix, memcached_tcp, redis_unix, redis_tcp
 *                   the key as 36 characters of text, meta `mg <key> v` / RESP GET in one write,
 *                   the value received straight into the destination (MSG_WAITALL, TCP_NODELAY).
 * The pipelined class gets the 16 consecutive 256-token blocks of one 4096-token prefix per request:
 * one hashing pass yields the 16 keys on every side (sc_l2_prefix_keys for ours), and the socket
 * clients send the 16 requests in one write.
 *
 * Processes. This process admits every value into a private arena, writes the LMDB file, fills
 * the floor buffer and starts and loads the servers. Every measurement then runs in a freshly
 * forked client process (ours attaches with sc_arena_open); round r measures every system once,
 * in turn, and the rounds repeat, so a noisy neighbour hurts every system alike. The first round
 * also verifies the bytes each system delivers. Working set per class: --ws (default 256 MiB,
 * 8 x the 32 MiB L3 of one CCD of this machine's CPU), at random keys.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <lmdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "bench.h"
#include "get.h"

#define B "get"
#define NDST 16
#define L2_NS "bench-get"
#define MODEL "bench-get-model"
#define STATE "bench-get-state"
#define VERIFY_ITEMS 512

enum sys { S_OURS, S_FLOOR, S_LMDB, S_SOCK, S_MC_UNIX, S_MC_TCP, S_REDIS_UNIX, S_REDIS_TCP, NSYS };
static const char *const sys_name[NSYS] = { "ours", "floor", "lmdb", "socket_floor", "memcached_unix",
					     "memcached_tcp", "redis_unix", "redis_tcp" };

#define NCLASS 4
static struct gclass classes[NCLASS] = {
	{ "4k", 0, 4096, 1, 32, 0, NULL, NULL },
	{ "64k", 1, 65536, 1, 32, 0, NULL, NULL },
	{ "1m", 2, 1u << 20, 1, 32, 0, NULL, NULL },
	{ "pipe16", 3, 16384, 16, 256, 0, NULL, NULL },
};

struct cfg {
	uint64_t ws;
	int reps;
	double seconds;
};

static char arena_name[SC_NAME_MAX + 1];
static char tmpdir[128];
static uint8_t *floor_buf;
static size_t floor_len;
static const char *floor_backing = "";

/* ---- ours: the arena ---- */

static int ours_setup(const struct gclass *c, int *backing)
{
	uint64_t total = (uint64_t)c->nitems * (uint64_t)c->nb;
	/* each block's heap footprint (payload, token ids of its whole prefix, block header) plus the
	 * 4 KiB alignment gap a page-aligned block may leave before the next */
	uint64_t payload = total * (sc_l2_footprint(NULL, c->bytes, 0, (uint32_t)c->nb * c->ntok) + 4096);
	struct sc_arena_opts o = { .size_bytes = ((payload + payload / 8 + (64ull << 20)) + (2ull << 20) - 1) & ~((2ull << 20) - 1),
				   .huge = SC_HUGE_AUTO, .index_entries = (uint32_t)(total * 2 + 1024) };
	snprintf(arena_name, sizeof(arena_name), "bench-get-%d", (int)getpid());
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	int rc = sc_arena_create(arena_name, &o, &a);
	if (rc == -ENOMEM) {
		o.huge = SC_HUGE_OFF;
		rc = sc_arena_create(arena_name, &o, &a);
	}
	if (rc) {
		fprintf(stderr, "stagecache bench get: cannot create a %llu MiB arena: %s\n",
			(unsigned long long)(o.size_bytes >> 20), sc_strerror(rc));
		arena_name[0] = 0;
		return -1;
	}
	struct sc_arena_info *info = calloc(1, sizeof(*info));
	if (info && sc_arena_info(a, info) == 0)
		*backing = info->backing;
	free(info);
	uint8_t *v = malloc(c->bytes);
	if (!v || (rc = sc_stage_open(a, MODEL, STATE, &st)))
		goto fail;
	for (uint32_t i = 0; i < c->nitems; i++)
		for (int b = 0; b < c->nb; b++) {
			bg_value_fill(c, i, b, v);
			struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { v }, .sec_len = { c->bytes } };
			rc = sc_l2_admit(st, L2_NS, bg_item_tokens(c, i), (size_t)(b + 1) * c->ntok, sc_digest(v, c->bytes), &p,
					 SC_ORIGIN_DIRECT);
			if (rc)
				goto fail;
		}
	struct sc_l2_stats s;
	if ((rc = sc_l2_stats(a, NULL, &s)) == 0 && s.entries != total) {
		fprintf(stderr, "stagecache bench get: the arena holds %llu of %llu values\n", (unsigned long long)s.entries,
			(unsigned long long)total);
		rc = -ENOSPC;
	}
fail:
	if (rc)
		fprintf(stderr, "stagecache bench get: filling the arena: %s\n", sc_strerror(rc));
	free(v);
	sc_stage_close(st);
	sc_arena_close(a);
	return rc ? -1 : 0;
}

static void ours_teardown(void)
{
	if (arena_name[0])
		sc_arena_destroy(NULL, arena_name);
	arena_name[0] = 0;
}

/* ---- the floor buffer (hugepages like the arena when it can) and LMDB ---- */

static int floor_setup(const struct gclass *c)
{
	floor_len = ((size_t)c->nitems * (size_t)c->nb * c->bytes + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	if ((floor_buf = bench_huge_alloc(floor_len, 1, &floor_backing)) == MAP_FAILED) {
		floor_buf = NULL;
		return -1;
	}
	for (uint32_t i = 0; i < c->nitems; i++)
		for (int b = 0; b < c->nb; b++)
			bg_value_fill(c, i, b, floor_buf + ((size_t)i * (size_t)c->nb + (size_t)b) * c->bytes);
	return 0;
}

static void floor_teardown(void)
{
	if (floor_buf)
		munmap(floor_buf, floor_len);
	floor_buf = NULL;
}

static char lmdb_dir[200];

static int lmdb_setup(const struct gclass *c)
{
	snprintf(lmdb_dir, sizeof(lmdb_dir), "%s/lmdb", tmpdir);
	if (mkdir(lmdb_dir, 0700))
		return -1;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	uint64_t total = (uint64_t)c->nitems * (uint64_t)c->nb;
	int rc = mdb_env_create(&env);
	if (rc)
		goto err;
	mdb_env_set_mapsize(env, (size_t)(total * (c->bytes + 8192) + (64ull << 20)));
	if ((rc = mdb_env_open(env, lmdb_dir, MDB_NOSYNC | MDB_NOMETASYNC | MDB_WRITEMAP, 0600)) ||
	    (rc = mdb_txn_begin(env, NULL, 0, &txn)) || (rc = mdb_dbi_open(txn, NULL, 0, &dbi))) {
		mdb_env_close(env);
		goto err;
	}
	uint8_t *v = malloc(c->bytes);
	for (uint32_t i = 0; i < c->nitems && !rc; i++)
		for (int b = 0; b < c->nb && !rc; b++) {
			bg_value_fill(c, i, b, v);
			MDB_val k = { 16, c->key[(size_t)i * (size_t)c->nb + (size_t)b] }, d = { c->bytes, v };
			rc = mdb_put(txn, dbi, &k, &d, 0);
		}
	free(v);
	if (rc)
		mdb_txn_abort(txn);
	else
		rc = mdb_txn_commit(txn);
	if (!rc)
		rc = mdb_env_sync(env, 1);
	mdb_env_close(env);
	if (!rc)
		return 0;
err:
	fprintf(stderr, "stagecache bench get: LMDB: %s\n", mdb_strerror(rc));
	return -1;
}

/* ---- the clients (each in its own process) ---- */

struct client {
	const struct gclass *c;
	uint8_t *dst[NDST][16];
	uint8_t *scratch;
	/* ours */
	struct sc_arena *a;
	struct sc_stage *st;
	/* lmdb */
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	/* servers */
	struct bg_conn *conn;
};

/* One get of item @i into destination set @d. 0 or -1. */
static int get_one(int sys, struct client *k, uint32_t i, int d)
{
	const struct gclass *c = k->c;
	uint8_t **dst = k->dst[d];
	uint8_t keys[16][16];
	switch (sys) {
	case S_OURS: {
		struct sc_lease l;
		if (c->nb == 1) {
			int rc = sc_l2_get(k->st, L2_NS, bg_item_tokens(c, i), c->ntok, NULL, &l);
			if (rc || l.sec_len[0] != c->bytes)
				return -1;
			memcpy(dst[0], l.sec[0], c->bytes);
			sc_lease_release(&l);
			return 0;
		}
		struct sc_key kk[16];
		if (sc_l2_prefix_keys(k->st, L2_NS, bg_item_tokens(c, i), (size_t)c->nb * c->ntok, c->ntok, kk, 16) != c->nb)
			return -1;
		for (int b = 0; b < c->nb; b++) {
			if (sc_l2_get_key(k->st, kk[b], &l) || l.sec_len[0] != c->bytes)
				return -1;
			memcpy(dst[b], l.sec[0], c->bytes);
			sc_lease_release(&l);
		}
		return 0;
	}
	case S_FLOOR:
		for (int b = 0; b < c->nb; b++)
			memcpy(dst[b], floor_buf + ((size_t)i * (size_t)c->nb + (size_t)b) * c->bytes, c->bytes);
		return 0;
	case S_LMDB: {
		bg_their_keys(c, i, keys);
		if (mdb_txn_renew(k->txn))
			return -1;
		int bad = 0;
		for (int b = 0; b < c->nb && !bad; b++) {
			MDB_val kv = { 16, keys[b] }, v;
			bad = mdb_get(k->txn, k->dbi, &kv, &v) || v.mv_size != c->bytes;
			if (!bad)
				memcpy(dst[b], v.mv_data, c->bytes);
		}
		mdb_txn_reset(k->txn);
		return bad ? -1 : 0;
	}
	default:
		bg_their_keys(c, i, keys);
		return bg_conn_get(k->conn, c, i, keys, dst);
	}
}

static int client_open(int sys, struct client *k)
{
	const struct gclass *c = k->c;
	for (int d = 0; d < NDST; d++)
		for (int b = 0; b < c->nb; b++) {
			if (!(k->dst[d][b] = aligned_alloc(64, c->bytes)))
				return -1;
			memset(k->dst[d][b], 0, c->bytes); /* faulted in before the clock starts */
		}
	if (!(k->scratch = malloc(c->bytes)))
		return -1;
	int rc;
	switch (sys) {
	case S_OURS:
		if ((rc = sc_arena_open(arena_name, &k->a)) || (rc = sc_stage_open(k->a, MODEL, STATE, &k->st))) {
			fprintf(stderr, "stagecache bench get: reader: %s\n", sc_strerror(rc));
			return -1;
		}
		return 0;
	case S_FLOOR:
		return floor_buf ? 0 : -1;
	case S_LMDB:
		if (mdb_env_create(&k->env) || mdb_env_set_mapsize(k->env, 0) ||
		    mdb_env_open(k->env, lmdb_dir, MDB_RDONLY | MDB_NOTLS, 0600) ||
		    mdb_txn_begin(k->env, NULL, MDB_RDONLY, &k->txn) || mdb_dbi_open(k->txn, NULL, 0, &k->dbi)) {
			fprintf(stderr, "stagecache bench get: cannot open the LMDB environment\n");
			return -1;
		}
		mdb_txn_reset(k->txn);
		return 0;
	case S_SOCK: k->conn = bg_conn_open(BG_SOCK, 0); break;
	case S_MC_UNIX: k->conn = bg_conn_open(BG_MC_UNIX, 0); break;
	case S_MC_TCP: k->conn = bg_conn_open(BG_MC_TCP, 0); break;
	case S_REDIS_UNIX: k->conn = bg_conn_open(BG_REDIS, 0); break;
	case S_REDIS_TCP: k->conn = bg_conn_open(BG_REDIS, 1); break;
	}
	return k->conn ? 0 : -1;
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* In the client process: (verify,) then get at random for @seconds. ns per get, or -1. */
static double client_main(int sys, const struct gclass *c, const struct cfg *cf, int verify, uint64_t seed)
{
	struct client k = { .c = c };
	if (client_open(sys, &k))
		return -1;
	if (verify) {
		uint32_t step = c->nitems > VERIFY_ITEMS ? c->nitems / VERIFY_ITEMS : 1;
		for (uint32_t i = 0; i < c->nitems; i += step) {
			if (get_one(sys, &k, i, 0)) {
				fprintf(stderr, "stagecache bench get: %s: get of item %u of %s failed\n", sys_name[sys], i, c->tag);
				return -1;
			}
			for (int b = 0; b < c->nb; b++) {
				bg_value_fill(c, i, b, k.scratch);
				if (memcmp(k.scratch, k.dst[0][b], c->bytes)) {
					fprintf(stderr, "stagecache bench get: %s delivered wrong bytes for item %u of %s\n",
						sys_name[sys], i, c->tag);
					return -1;
				}
			}
		}
	}
	/* warm-up. In-process sides touch every item once, so no side pays first-touch page faults of
	 * its fresh mapping in the timed loop (LMDB's map has 4 KiB pages: one fault per page); the
	 * socket sides warm their connection, code and destinations */
	if (sys == S_OURS || sys == S_FLOOR || sys == S_LMDB)
		for (uint32_t i = 0; i < c->nitems; i++)
			if (get_one(sys, &k, i, (int)(i % NDST)))
				return -1;
	uint64_t x = seed | 1;
	for (int w = 0; w < 64; w++)
		if (get_one(sys, &k, (uint32_t)(xorshift(&x) % c->nitems), w % NDST))
			return -1;
	uint64_t n = 0;
	double t0 = cli_now(), end = t0 + cf->seconds, now;
	x = seed | 1;
	do {
		for (int j = 0; j < 8; j++, n++)
			if (get_one(sys, &k, (uint32_t)(xorshift(&x) % c->nitems), (int)(n % NDST)))
				return -1;
		now = cli_now();
	} while (now < end);
	return (now - t0) * 1e9 / (double)n;
}

/* One measurement in a fresh process: ns per get, or -1. */
static double measure(int sys, const struct gclass *c, const struct cfg *cf, int verify, uint64_t seed)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC))
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid_t parent = getpid(), pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		close(p[0]);
		double r = client_main(sys, c, cf, verify, seed);
		_exit(write(p[1], &r, sizeof(r)) == sizeof(r) && r > 0 ? 0 : 1);
	}
	close(p[1]);
	double r = -1;
	struct pollfd pf = { p[0], POLLIN, 0 };
	int n;
	while ((n = poll(&pf, 1, (int)((cf->seconds + 120) * 1000))) < 0 && errno == EINTR)
		;
	if (n <= 0 || read(p[0], &r, sizeof(r)) != sizeof(r))
		r = -1;
	if (n <= 0) {
		fprintf(stderr, "stagecache bench get: %s client hung; killed\n", sys_name[sys]);
		kill(pid, SIGKILL);
	}
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? r : -1;
}

/* ---- one class: set up every system, interleaved rounds, figures ---- */

static void baseline_of(int sys, const struct gclass *c, char *out, size_t len)
{
	char what[400];
	switch (sys) {
	case S_FLOOR:
		snprintf(what, sizeof(what), "memory floor: memcpy of the same bytes at the same random positions from a "
			 "plain %s buffer of the same size, no key and no lookup", floor_backing);
		break;
	case S_LMDB:
		snprintf(what, sizeof(what), "LMDB %d.%d.%d on tmpfs: XXH3-128 of the tokens as key, mdb_txn_renew, %s "
			 "(value in place in the map), memcpy, mdb_txn_reset", MDB_VERSION_MAJOR, MDB_VERSION_MINOR,
			 MDB_VERSION_PATCH, c->nb > 1 ? "16 mdb_get" : "mdb_get");
		break;
	case S_SOCK:
		snprintf(what, sizeof(what), "a minimal unix-socket server (in-memory hash table, one writev per request); "
			 "client: 16-byte keys in one write, values recv'd (MSG_WAITALL) into the destination");
		break;
	case S_MC_UNIX:
	case S_MC_TCP:
		snprintf(what, sizeof(what), "memcached %s (-t 2) over %s: %s in one write, value recv'd (MSG_WAITALL) "
			 "straight into the destination, no client library staging", bg_server_version(BG_MC_UNIX),
			 sys == S_MC_TCP ? "loopback TCP (TCP_NODELAY)" : "a unix socket",
			 c->nb > 1 ? "16 meta 'mg <key> v'" : "meta 'mg <key> v'");
		break;
	default:
		snprintf(what, sizeof(what), "%s over %s: RESP %s in one write, value recv'd (MSG_WAITALL) straight into "
			 "the destination", bg_server_version(BG_REDIS),
			 sys == S_REDIS_TCP ? "loopback TCP (TCP_NODELAY)" : "a unix socket", c->nb > 1 ? "16 GET" : "GET");
	}
	snprintf(out, len, "%s; ours: sc_l2_get%s from %u tokens, memcpy out, release; both: %u items x %d x %llu B "
		 "(%llu MiB), random keys, into 16 rotating destinations, 1 client process, medians of interleaved rounds",
		 what, c->nb > 1 ? " (sc_l2_prefix_keys + 16 sc_l2_get_key)" : "", c->ntok * (uint32_t)c->nb, c->nitems,
		 c->nb, (unsigned long long)c->bytes,
		 (unsigned long long)(((uint64_t)c->nitems * (uint64_t)c->nb * c->bytes) >> 20));
}

/* Every system set up for class @c: have[s] when it is ready, else why[s] says why not. */
static void setup_systems(struct gclass *c, const struct cfg *cf, int *have, const char **why)
{
	int backing = 0;
	bench_progress("get %s: setting up\n", c->tag);
	have[S_OURS] = ours_setup(c, &backing) == 0;
	why[S_OURS] = "the arena could not be filled (see above)";
	have[S_FLOOR] = floor_setup(c) == 0;
	why[S_FLOOR] = "no memory for the floor buffer";
	have[S_LMDB] = lmdb_setup(c) == 0;
	why[S_LMDB] = "the LMDB file could not be written (see above)";
	static const int srv_of[NSYS] = { -1, -1, -1, BG_SOCK, BG_MC_UNIX, BG_MC_TCP, BG_REDIS, BG_REDIS };
	int srv_ok[BG_NSRV];
	for (int s = 0; s < BG_NSRV; s++)
		srv_ok[s] = bg_server_start(s, tmpdir, c) == 0;
	for (int s = S_SOCK; s < NSYS; s++) {
		have[s] = srv_ok[srv_of[s]];
		why[s] = s == S_SOCK ? "the socket server did not start" :
			 s <= S_MC_TCP ? (bench_in_path("memcached") ? "memcached did not start or load" : "memcached is not installed")
				       : (bench_in_path("redis-server") ? "redis-server did not start or load" : "redis-server is not installed");
	}
	if (c == &classes[0]) {
		bench_env(B, "arena_backing", "%s", sc_backing_name(backing));
		bench_env(B, "floor_backing", "%s", floor_backing);
		bench_env(B, "lmdb", "%s, file on tmpfs (%s), 4 KiB pages", mdb_version(NULL, NULL, NULL), tmpdir);
		bench_env(B, "memcached", "%s", bg_server_version(BG_MC_UNIX));
		bench_env(B, "redis", "%s", bg_server_version(BG_REDIS));
		bench_env(B, "working_set_bytes", "%llu per size class", (unsigned long long)cf->ws);
	}
}

static void teardown_systems(void)
{
	bg_servers_stop();
	ours_teardown();
	floor_teardown();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/lmdb'", tmpdir);
	if (system(cmd)) {
	}
}

/* The rows of class @c: each system's ns per get, then ours against each of the others. */
static void report_class(const struct gclass *c, const struct cfg *cf, double **ns, const int *have,
			 const char **why)
{
	char metric[96], note[1200];
	for (int s = 0; s < NSYS; s++) {
		snprintf(metric, sizeof(metric), "get_%s_%s_ns", c->tag, sys_name[s]);
		if (have[s])
			bench_stat(B, metric, "ns", ns[s], cf->reps, NULL);
		else
			bench_missing(B, metric, "%s", why[s]);
	}
	for (int s = S_FLOOR; s < NSYS; s++) {
		snprintf(metric, sizeof(metric), "get_%s_vs_%s", c->tag, sys_name[s]);
		if (!have[s] || !have[S_OURS]) {
			bench_missing(B, metric, "%s", !have[S_OURS] ? why[S_OURS] : why[s]);
			continue;
		}
		double ratio[64];
		for (int r = 0; r < cf->reps; r++) /* the floor row is a time ratio (ours / floor, lower is better) */
			ratio[r] = s == S_FLOOR ? ns[S_OURS][r] / ns[s][r] : ns[s][r] / ns[S_OURS][r];
		baseline_of(s, c, note, sizeof(note));
		bench_stat(B, metric, s == S_FLOOR ? "time ratio" : "speed ratio", ratio, cf->reps, note);
	}
}

static int run_class(struct gclass *c, const struct cfg *cf)
{
	int have[NSYS] = { 0 }, ok = 1;
	const char *why[NSYS] = { 0 };
	double *ns[NSYS];
	for (int s = 0; s < NSYS; s++)
		ns[s] = calloc((size_t)cf->reps, sizeof(double));
	if (bg_class_init(c, cf->ws)) {
		fprintf(stderr, "stagecache bench get: out of memory\n");
		return -1;
	}
	setup_systems(c, cf, have, why);
	/* rounds: every system once per round, in turn */
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (int r = 0; r < cf->reps; r++)
		for (int s = 0; s < NSYS; s++) {
			if (!have[s])
				continue;
			bench_progress("get %s: round %d/%d %s", c->tag, r + 1, cf->reps, sys_name[s]);
			ns[s][r] = measure(s, c, cf, r == 0, seed + (uint64_t)r * 7919);
			if (ns[s][r] <= 0) {
				have[s] = 0;
				why[s] = "its client failed (see above)";
				ok = 0;
			}
		}
	bench_progress("%s", "");
	teardown_systems();
	report_class(c, cf, ns, have, why);
	for (int s = 0; s < NSYS; s++)
		free(ns[s]);
	bg_class_free(c);
	return ok && have[S_OURS] ? 0 : -1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench get [--ws BYTES] [--reps N] [--seconds S]\n\n"
		   "Gets of 4 KiB, 64 KiB and 1 MiB values, and pipelined gets of the 16 blocks (16 KiB each) of one\n"
		   "4096-token prefix, from a process other than the one that stored them; every byte is copied\n"
		   "into the caller's (rotating) destination on every side. Compared in the same run with: the\n"
		   "memory floor (the same copies from a plain buffer, no lookup), LMDB (mdb_get in place), a\n"
		   "minimal unix-socket server, memcached (meta protocol) and Redis (RESP), over a unix socket and\n"
		   "loopback TCP. Servers run on private sockets in a temp dir, removed after.\n\n"
		   "  --ws BYTES   working set per size class (default 256M; --quick 32M)\n"
		   "  --reps N     interleaved rounds, medians reported (default 5; --quick 3)\n"
		   "  --seconds S  length of one measurement (default 0.25; --quick 0.08)\n\n"
		   "Metrics: get_<class>_<system>_ns (ns per get) and get_<class>_vs_<system> (speed, ours / theirs;\n"
		   "for the floor: time, ours / floor), class 4k, 64k, 1m or pipe16; system ours, floor, lmdb,\n"
		   "socket_floor, memcached_unix, memcached_tcp, redis_unix, redis_tcp.\n");
}

int bench_get(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ws", required_argument, 0, 'w' }, { "reps", required_argument, 0, 'r' },
		{ "seconds", required_argument, 0, 's' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	struct cfg cf = { bench_quick ? 32ull << 20 : 256ull << 20, bench_quick ? 3 : 5, bench_quick ? 0.08 : 0.25 };
	uint64_t v;
	int ch;
	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 'w':
			if (cli_parse_size(optarg, &v) || v < (1u << 20) || v > (16ull << 30))
				return cli_usage_error("bench get", "--ws takes 1M..16G, not '%s'", optarg);
			cf.ws = v;
			break;
		case 'r':
			if (cli_parse_u64(optarg, 64, &v) || !v)
				return cli_usage_error("bench get", "--reps takes 1..64, not '%s'", optarg);
			cf.reps = (int)v;
			break;
		case 's': {
			char *end;
			double d = strtod(optarg, &end);
			if (*end || !(d >= 0.01 && d <= 60))
				return cli_usage_error("bench get", "--seconds takes 0.01..60, not '%s'", optarg);
			cf.seconds = d;
			break;
		}
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("bench get", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage_error("bench get", "unexpected argument '%s'", argv[optind]);
	snprintf(tmpdir, sizeof(tmpdir), "/dev/shm/sc-bench-get.%d.XXXXXX", (int)getpid());
	if (!mkdtemp(tmpdir))
		return cli_fail("bench get", -errno, "cannot create a temp dir in /dev/shm");
	int ok = 1;
	for (int i = 0; i < NCLASS; i++)
		if (run_class(&classes[i], &cf))
			ok = 0;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd)) {
	}
	return ok ? EXIT_OK : EXIT_FAIL;
}
