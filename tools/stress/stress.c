/*
 * tools/stress/stress.c — `stagecache stress NAME` (workers in worker.c): N worker processes run a mixed workload on one
 * arena and one L3 directory while a killer SIGKILLs a random worker every --kill-every ms (and
 * workers arm the library's fault points so some die inside admit, evict, repair, fill or ring
 * publish). A verifier checks every L2 hit's digest, every commit sequence and running total,
 * and that every committed token arrives. At the end: fsck, and a summary whose
 * digest_mismatches, lost_commits, torn_records, leaked_bytes and deadlocks must all be 0.
 *
 * Bookkeeping lives in an anonymous MAP_SHARED mapping that survives the kills:
 *  - each worker incarnation writes its op counters, a heartbeat, and after each commit call the
 *    pair (request sequence, committed tokens) packed in one 64-bit word (a kill can never tear it);
 *  - the verifier writes, per incarnation, what it has seen delivered.
 * A token counts as committed once sc_batcher_commit/finish returned with it emitted; it must then
 * reach the verifier even if its producer dies the next instant.
 *
 * Kinds of work, each a weighted op that the killer can catch anywhere: L2 gets (every hit's bytes
 * checked against its digest: a change after admission is a late write), admits, removes,
 * invalidations, restores of L3 documents (every byte checked against the digest of the version
 * served; a version older than the last put that returned before the restore began is stale),
 * re-puts of a document's prefix with new bytes (by the document's owner slot only, so versions are
 * ordered), restores into a stage of another model identity (never served), cold O_DIRECT fills
 * of a full queue into L2 reservations, and decodes through the commit rings. --segment-bytes
 * makes both the arena (when created here) and the L3 store segmented.
 *
 * Deployments: --pidns puts every other worker in a pid namespace of its own (unshare, then fork:
 * the worker is pid 1 there; the killer kills it by its pid here), --users runs workers under two
 * uids sharing one group (a group-mode arena and L3 directory). Each incarnation records its owner
 * token; a monitor looks at sc_arena_holders() every 250 ms and reports as held_by_dead_bytes the
 * most bytes (leased entries + reservations) any holder still held more than 2 s after its
 * process died — before any repair: the closing fsck is an extra check, not what makes it 0.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "shared.h"
#include "stress_hosts.h"
#include "worker.h"

#ifndef SC_TEST_HOOKS
#error "the stress harness arms fault points: it is built only into the test build (see the Makefile)"
#endif
#include "stagecache_test.h"

static const char *op_names[OP_COUNT] = { "get", "admit", "remove", "invalidate", "l3_restore", "decode",
					  "reput", "other_identity", "fill_queue" };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache stress NAME [--procs N] [--seconds S] [--kill-every MS] [--seed X]\n"
		"                         [--l3 DIR] [--size SIZE] [--max-payload SIZE] [--segment-bytes SIZE]\n"
		"                         [--pidns] [--users] [--keep] [--json]\n\n"
		"Run N worker processes on arena NAME (created if missing) and an L3 directory: Zipf lookups,\n"
		"admits and replacements of 1 KiB to --max-payload payloads, removals, digest invalidations,\n"
		"L3 puts, re-puts of changed bytes and restores with promotion, restores into a stage of\n"
		"another model (never served), cold O_DIRECT fills of a full queue into L2 reservations, and\n"
		"commit streams through the batcher. Every --kill-every ms a random worker gets SIGKILL\n"
		"(workers also arm the library's fault points) and is respawned. Every L2 hit is checked\n"
		"against its digest, every restore against its version's, every commit by a verifier.\n\n"
		"  --procs N          workers (default 4)        --seconds S     duration (default 30)\n"
		"  --kill-every MS    0 disables kills (default 0)\n"
		"  --seed X           workload seed (default: time)\n"
		"  --l3 DIR           L3 directory (default a fresh one under /var/tmp, removed after)\n"
		"  --size SIZE        arena size when creating (default 512M)\n"
		"  --max-payload SIZE largest payload (default 16M)\n"
		"  --segment-bytes SIZE  segments of this size in the arena (when created here) and the L3\n"
		"                     store (default: none)\n"
		"  --pidns            every other worker in a pid namespace of its own (root)\n"
		"  --users            workers under two uids (65534, 65533) of one group (65534) sharing a\n"
		"                     group-mode arena and L3 directory (root; the arena is created 0660)\n"
		"  --keep             keep the arena (and the L3 directory) afterwards\n"
		"  --json             print the summary as one JSON object\n"
		"Exit status 1 if digest_mismatches, late_writes (L2 bytes changed after admission),\n"
		"stale_served (a restore older than a put that returned before it), lost_commits,\n"
		"torn_records, leaked_bytes, deadlocks or held_by_dead_bytes (bytes still held by a process\n"
		"2 s after it died, before any repair) is not 0, the closing fsck finds a problem, or the\n"
		"repaired arena does not take an admission.\n");
}

static int parse(int argc, char **argv, struct stress_opts *o)
{
	const struct cli_opt opts[] = {
		STRESS_COMMON_OPTS(o),
		{ "procs", CLI_U32, &o->procs, 1, MAX_PROCS },
		{ "l3", CLI_STR, &o->l3dir },
		{ "max-payload", CLI_SIZE, &o->max_payload, 2048, 64u << 20, " (2K-64M)" },
		{ "pidns", CLI_FLAG, &o->pidns },
		{ "users", CLI_FLAG, &o->users },
		{ "segment-bytes", CLI_SIZE, &o->segment_bytes, SC_SEGMENT_MIN, SC_SEGMENT_MAX, " (64K-1G, a power of two)" },
		{ 0 },
	};
	int rc = cli_parse_opts("stress", argc, argv, opts, usage);
	if (rc)
		return rc;
	if (optind != argc - 1)
		return cli_usage_error("stress", optind >= argc ? "missing NAME" : "too many arguments");
	if ((o->pidns || o->users) && geteuid() != 0)
		return cli_usage_error("stress", "--pidns and --users need root (unshare, setuid)");
	o->name = argv[optind];
	return 0;
}

struct vstate {
	uint32_t seq;      /* request in progress (0: none) */
	uint32_t seen;     /* its tokens delivered so far */
	uint32_t done_seq; /* last request that ended with a terminal */
};

static struct vstate *vs; /* MAX_INCARNATIONS, private to the verifier */

static int on_commit(const struct sc_commit *c, void *p)
{
	struct shared *sh = p;
	uint64_t inc = c->request_id >> 32;
	uint32_t seq = (uint32_t)c->request_id;
	atomic_fetch_add(&sh->verify_commits, 1);
	if (inc >= MAX_INCARNATIONS || seq == 0) {
		atomic_fetch_add(&sh->torn_records, 1);
		problem(sh, "commit with an impossible request id %llx", (unsigned long long)c->request_id);
		return 0;
	}
	struct vstate *v = &vs[inc];
	if (seq != v->seq) {
		/* a new request: the previous one ended with a terminal, and sequences only grow */
		if (v->seq && v->seen && v->done_seq != v->seq) {
			atomic_fetch_add(&sh->torn_records, 1);
			problem(sh, "incarnation %llu: request %u started before request %u ended", (unsigned long long)inc,
				seq, v->seq);
		}
		if (seq <= v->seq) {
			atomic_fetch_add(&sh->torn_records, 1);
			problem(sh, "incarnation %llu: request %u after %u (reordered)", (unsigned long long)inc, seq, v->seq);
		}
		v->seq = seq;
		v->seen = 0;
	}
	for (uint32_t i = 0; i < c->token_count; i++)
		if (c->tokens[i] != wl_gen_token(c->request_id, v->seen + i)) {
			atomic_fetch_add(&sh->torn_records, 1);
			problem(sh, "request %llx: token %u is %d, expected %d", (unsigned long long)c->request_id,
				v->seen + i, c->tokens[i], wl_gen_token(c->request_id, v->seen + i));
			break;
		}
	v->seen += c->token_count;
	if (c->generated_token_count != v->seen) {
		atomic_fetch_add(&sh->torn_records, 1);
		problem(sh, "request %llx: running total %llu, delivered %u", (unsigned long long)c->request_id,
			(unsigned long long)c->generated_token_count, v->seen);
	}
	if (c->flags & (SC_COMMIT_FINISHED | SC_COMMIT_ABORTED)) {
		if (v->seen != wl_gen_length(c->request_id)) {
			atomic_fetch_add(&sh->torn_records, 1);
			problem(sh, "request %llx ended after %u tokens, expected %u", (unsigned long long)c->request_id,
				v->seen, wl_gen_length(c->request_id));
		}
		v->done_seq = seq;
	}
	atomic_fetch_add(&sh->verify_tokens, c->token_count);
	atomic_store(&sh->inc[inc].delivered, pack(seq, v->seen));
	return 0;
}

/* A poll found a corrupted ring: counted and reported; the verifier goes on. */
static void torn_ring(void *p)
{
	struct shared *sh = p;
	atomic_fetch_add(&sh->torn_records, 1);
	problem(sh, "sc_ring_poll: a ring is corrupted");
}

static int verifier_main(const char *name, struct shared *sh)
{
	vs = calloc(MAX_INCARNATIONS, sizeof(*vs));
	struct sc_arena *a;
	int rc = vs ? sc_arena_open(name, &a) : -ENOMEM;
	if (rc) {
		atomic_store(&sh->verifier_error, rc);
		return 1;
	}
	if ((rc = wl_drain_rings(a, on_commit, sh, &sh->stop_verifier, 300000000ull, torn_ring, sh)))
		atomic_store(&sh->verifier_error, rc);
	sc_ring_consumer_close(a);
	sc_arena_close(a);
	return 0;
}

/* ---- workers ---- */

/* ---- the parent: killer, monitor, summary ---- */

static uint32_t next_inc = 1;

/* In a new worker process: become the user --users gives this slot. 0 or -errno. */
static int become_user(uint32_t slot)
{
	gid_t g = USERS_GID;
	uid_t u = slot % 2 ? USER_B : USER_A;
	if (setgroups(1, &g) || setresgid(g, g, g) || setresuid(u, u, u))
		return -errno;
	umask(007);
	return 0;
}

static int run_worker(struct shared *sh, uint32_t slot, uint32_t inc, const struct stress_opts *o)
{
	if (o->users && become_user(slot)) {
		atomic_store(&sh->w[slot].last_error, -EPERM);
		return 1;
	}
	return stress_worker_main(sh, slot, inc, o);
}

/*
 * Start incarnation @inc in @slot. With --pidns, odd slots get a pid namespace of their own: a
 * child unshares it and forks the worker (pid 1 there), publishes the worker's pid as we see it,
 * waits for it and exits with its fate (128 + signal when it was killed).
 */
static pid_t spawn(struct shared *sh, uint32_t slot, const struct stress_opts *o)
{
	uint32_t inc = next_inc++;
	if (inc >= MAX_INCARNATIONS)
		return -1;
	atomic_store(&sh->w[slot].incarnation, inc);
	atomic_store(&sh->w[slot].armed, 0);
	atomic_store(&sh->w[slot].heartbeat_ns, cli_now_ns());
	atomic_store(&sh->w[slot].pid, 0);
	int own_ns = o->pidns && slot % 2;
	pid_t pid = fork();
	if (pid == 0) {
		if (!own_ns)
			_exit(run_worker(sh, slot, inc, o));
		if (unshare(CLONE_NEWPID))
			_exit(3);
		pid_t w = fork();
		if (w == 0)
			_exit(run_worker(sh, slot, inc, o));
		if (w < 0)
			_exit(4);
		atomic_store(&sh->w[slot].pid, w);
		int st;
		while (waitpid(w, &st, 0) < 0 && errno == EINTR)
			;
		_exit(WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st));
	}
	if (pid < 0)
		return -1;
	atomic_store(&sh->w[slot].waitpid, pid);
	if (!own_ns)
		atomic_store(&sh->w[slot].pid, pid);
	return pid;
}

/* The fate of a worker from its waitpid status (through a pid-namespace parent or not). */
static int killed_by_sigkill(int status)
{
	return (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
	       (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
}

/* The most bytes any dead holder still holds HELD_GRACE_NS after its process died. */
struct held_watch {
	uint64_t max_bytes, max_leases, checks;
	uint32_t first_token[64];        /* holders dead with no known death time: first seen dead */
	uint64_t first_seen[64];
	unsigned nfirst;
};

static uint64_t death_time(struct shared *sh, struct held_watch *hw, uint32_t token, uint64_t now)
{
	for (uint32_t inc = next_inc; inc-- > 1;)
		if (atomic_load(&sh->inc[inc].token) == token) {
			uint64_t d = atomic_load(&sh->inc[inc].died_ns);
			if (d)
				return d;
			break;
		}
	for (unsigned i = 0; i < hw->nfirst && i < 64; i++)
		if (hw->first_token[i] == token)
			return hw->first_seen[i];
	hw->first_token[hw->nfirst % 64] = token;
	hw->first_seen[hw->nfirst % 64] = now;
	hw->nfirst++;
	return now;
}

static void watch_held(struct sc_arena *a, struct shared *sh, struct held_watch *hw)
{
	struct sc_holder rows[256];
	int n = sc_arena_holders(a, rows, 256);
	if (n < 0)
		return;
	hw->checks++;
	uint64_t now = cli_now_ns();
	for (int i = 0; i < n && i < 256; i++) {
		if (rows[i].alive || (!rows[i].leases && !rows[i].reserved_bytes))
			continue;
		if (now - death_time(sh, hw, rows[i].token, now) < HELD_GRACE_NS)
			continue;
		uint64_t bytes = rows[i].leased_bytes + rows[i].reserved_bytes;
		if (bytes > hw->max_bytes || rows[i].leases > hw->max_leases)
			problem(sh, "a dead holder (token %#x, pid %u) still held %u leases and %llu bytes over 2 s after its death",
				rows[i].token, rows[i].pid, rows[i].leases, (unsigned long long)bytes);
		if (bytes > hw->max_bytes)
			hw->max_bytes = bytes;
		if (rows[i].leases > hw->max_leases)
			hw->max_leases = rows[i].leases;
	}
}

/* --users: the arena and the L3 directory belong to the shared group, group-writable, and new
 * L3 subdirectories inherit the group (setgid). */
static int share_with_group(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "chgrp -R %u '%s' && chmod -R g+rwX '%s' && find '%s' -type d -exec chmod g+s {} +",
		 USERS_GID, dir, dir, dir);
	return system(cmd) == 0 ? 0 : -EPERM;
}

static void on_finding(const char *component, const char *message, int repaired, void *ctx)
{
	int json = *(int *)ctx;
	if (!json)
		printf("  fsck %-12s %s%s\n", component, message, repaired ? " (repaired)" : "");
}

/* One run: the stores, the shared bookkeeping, the processes, and what the parent counted. */
struct stress {
	struct stress_opts o;
	char l3buf[256];
	int own_l3, tty, created;
	struct sc_arena *a;
	struct shared *sh;
	pid_t verifier;
	struct held_watch hw;
	uint64_t t0;
	double elapsed;
	/* counted by the parent while the workers run */
	uint64_t kills, fault_deaths, deadlocks, respawn_fail;
	/* the verdict */
	uint64_t lost, totals[OP_COUNT], hits, misses, mism, errors, r2, r3, torn, leaked, late, stale;
	int usable;                  /* the repaired arena took an admission and served it */
	struct sc_fsck_report rep, rep2;
	int frc, frc2, fsck_clean, fail;
};

/* The arena (used if it exists, else created) and the L3 directory, shared with the group for
 * --users. On failure the message is printed and the exit status returned. */
static int open_stores(struct stress *s)
{
	const struct stress_opts *o = &s->o;
	int rc = sc_arena_open(o->name, &s->a);
	if (rc == -ENOENT) {
		struct sc_arena_opts ao = { .size_bytes = o->size, .huge = SC_HUGE_AUTO,
					    .segment_bytes = (uint32_t)o->segment_bytes };
		if (o->users) {
			ao.mode = 0660;
			ao.gid = USERS_GID;
		}
		rc = sc_arena_create(o->name, &ao, &s->a);
		s->created = rc == 0;
	}
	if (rc)
		return cli_fail("stress", rc, "cannot open or create arena '%s'", o->name);
	struct sc_l3 *l3 = NULL;
	struct sc_l3_opts lo = { .budget_bytes = 256u << 20, .file_mode = o->users ? 0660 : 0 };
	if ((rc = sc_l3_open(o->l3dir, &lo, &l3))) {
		sc_arena_close(s->a);
		return cli_fail("stress", rc, "cannot open L3 directory %s", o->l3dir);
	}
	if (o->segment_bytes && (rc = sc_l3_set_segment_bytes(l3, o->segment_bytes))) {
		sc_l3_close(l3);
		sc_arena_close(s->a);
		return cli_fail("stress", rc, "cannot cut L3 directory %s in segments", o->l3dir);
	}
	sc_l3_close(l3);
	if (o->users && (rc = share_with_group(o->l3dir))) {
		sc_arena_close(s->a);
		return cli_fail("stress", rc, "cannot share L3 directory %s with group %u", o->l3dir, USERS_GID);
	}
	return 0;
}

/* The bookkeeping that survives the kills, with the L3 documents and their digests. */
static int make_shared(struct stress *s)
{
	s->sh = mmap(NULL, sizeof(*s->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s->sh == MAP_FAILED) {
		sc_arena_close(s->a);
		return cli_fail("stress", -errno, "mmap");
	}
	wl_docs_make(s->sh->l3docs, L3_DOCS, 16, 1024, s->o.seed);
	/* digests of the L3 documents, for verifying restores */
	struct wl_geometry g;
	wl_geometry_default(&g);
	for (int i = 0; i < L3_DOCS; i++) {
		struct wl_payload p;
		if (wl_payload_build(&g, &s->sh->l3docs[i], &p) == 0)
			wl_payload_free(&p);
	}
	return 0;
}

/* Reap the workers that died (and the verifier, if it did) and start their next incarnation. */
static void reap_and_respawn(struct stress *s)
{
	struct shared *sh = s->sh;
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == s->verifier) {
			s->verifier = -1;
			continue;
		}
		for (uint32_t i = 0; i < s->o.procs; i++) {
			if (atomic_load(&sh->w[i].waitpid) != pid)
				continue;
			atomic_store(&sh->w[i].pid, 0);
			atomic_store(&sh->w[i].waitpid, 0);
			atomic_store(&sh->inc[atomic_load(&sh->w[i].incarnation)].died_ns, cli_now_ns());
			if (killed_by_sigkill(status) && atomic_load(&sh->w[i].armed))
				s->fault_deaths++;
			else if (!killed_by_sigkill(status))
				problem(sh, "worker %u exited on its own (status %d, last error %s)", i, status,
					sc_strerror(atomic_load(&sh->w[i].last_error)));
			if (spawn(sh, i, &s->o) < 0)
				s->respawn_fail++;
		}
	}
}

/* Deadlock: a live worker with no completed op for more than 2 s. */
static void check_progress(struct stress *s, uint64_t now)
{
	struct shared *sh = s->sh;
	for (uint32_t i = 0; i < s->o.procs; i++) {
		pid_t p = atomic_load(&sh->w[i].pid);
		uint64_t hb = atomic_load(&sh->w[i].heartbeat_ns);
		if (p > 0 && now > hb && now - hb > 2000000000ull) {
			s->deadlocks++;
			problem(sh, "worker %u (pid %d) made no progress for %.1f s", i, p, (double)(now - hb) / 1e9);
			kill(p, SIGKILL); /* count it once, then let it be respawned */
			atomic_store(&sh->w[i].heartbeat_ns, now);
		}
	}
}

static void print_progress(const struct stress *s, uint64_t now)
{
	uint64_t ops = 0;
	for (uint32_t i = 0; i < s->o.procs; i++)
		for (int k = 0; k < OP_COUNT; k++)
			ops += atomic_load(&s->sh->w[i].ops[k]);
	fprintf(stderr, "%s[%3.0fs] ops %llu  kills %llu  fault deaths %llu  commits verified %llu  torn %llu  deadlocks %llu%s",
		s->tty ? "\r" : "", (double)(now - s->t0) / 1e9, (unsigned long long)ops, (unsigned long long)s->kills,
		(unsigned long long)s->fault_deaths, (unsigned long long)atomic_load(&s->sh->verify_commits),
		(unsigned long long)atomic_load(&s->sh->torn_records), (unsigned long long)s->deadlocks,
		s->tty ? "   " : "\n");
}

/* The verifier and the workers; then, every 10 ms for --seconds: respawn the dead, watch what
 * the dead hold, kill one every --kill-every ms, look for deadlocks, print progress. */
static void run(struct stress *s)
{
	const struct stress_opts *o = &s->o;
	uint64_t next_watch = 0;
	s->verifier = fork();
	if (s->verifier == 0)
		_exit(verifier_main(o->name, s->sh));
	for (uint32_t i = 0; i < o->procs; i++)
		spawn(s->sh, i, o);

	uint64_t t0 = s->t0 = cli_now_ns(), end = t0 + (uint64_t)o->seconds * 1000000000ull;
	uint64_t next_kill = o->kill_every_ms ? t0 + (uint64_t)o->kill_every_ms * 1000000ull : UINT64_MAX;
	uint64_t next_progress = t0 + 1000000000ull, rng = wl_mix(o->seed ^ 0x4b494c4cull);
	while (cli_now_ns() < end) {
		usleep(10000);
		uint64_t now = cli_now_ns();
		reap_and_respawn(s);
		if (now >= next_watch) {
			watch_held(s->a, s->sh, &s->hw);
			next_watch = now + 250000000ull;
		}
		if (now >= next_kill) {
			uint32_t i = (uint32_t)(wl_rand(&rng) % o->procs);
			pid_t victim = atomic_load(&s->sh->w[i].pid);
			atomic_store(&s->sh->w[i].armed, 0); /* the killer's, not a fault point's */
			if (victim > 0 && kill(victim, SIGKILL) == 0)
				s->kills++;
			next_kill = now + (uint64_t)o->kill_every_ms * 1000000ull;
		}
		check_progress(s, now);
		if (now >= next_progress && !o->json) {
			print_progress(s, now);
			next_progress = now + 1000000000ull;
		}
	}
	if (s->tty && !o->json)
		fprintf(stderr, "\n");
}

/* Stop: workers first (they finish their op), then the verifier drains the rings. */
static void stop(struct stress *s)
{
	struct shared *sh = s->sh;
	watch_held(s->a, sh, &s->hw); /* before the workers go: what the dead of the run still hold */
	atomic_store(&sh->stop_workers, 1);
	for (uint32_t i = 0; i < s->o.procs; i++) {
		pid_t p = atomic_load(&sh->w[i].waitpid);
		if (p <= 0)
			continue;
		int status;
		/* a worker still armed may die at its fault point while finishing: that is fine */
		uint64_t deadline = cli_now_ns() + 10000000000ull;
		while (waitpid(p, &status, WNOHANG) == 0) {
			if (cli_now_ns() > deadline) {
				s->deadlocks++;
				problem(sh, "worker %u did not stop within 10 s", i);
				pid_t w = atomic_load(&sh->w[i].pid);
				kill(w > 0 ? w : p, SIGKILL);
				waitpid(p, &status, 0);
				break;
			}
			usleep(10000);
		}
	}
	atomic_store(&sh->stop_verifier, 1);
	if (s->verifier > 0)
		waitpid(s->verifier, NULL, 0);
	s->elapsed = (double)(cli_now_ns() - s->t0) / 1e9;
}

/* Lost commits: for every incarnation, what it committed must have been delivered. */
static uint64_t count_lost(struct shared *sh)
{
	uint64_t lost = 0;
	for (uint32_t inc = 1; inc < next_inc; inc++) {
		uint64_t c = atomic_load(&sh->inc[inc].committed), d = atomic_load(&sh->inc[inc].delivered);
		if (c && d < c) {
			lost++;
			problem(sh, "incarnation %u committed request %u up to %u tokens; delivered only request %u up to %u",
				inc, (uint32_t)(c >> 32), (uint32_t)c, (uint32_t)(d >> 32), (uint32_t)d);
		}
	}
	return lost;
}

/* After the repair: an admission of a new entry publishes and is served back, byte for byte. */
static int repaired_arena_usable(struct sc_arena *a)
{
	struct sc_stage *st;
	if (sc_stage_open(a, "stress-after-repair", STATE, &st))
		return 0;
	static uint8_t b[65536];
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 7 + 3);
	int32_t t[2] = { 1, 2 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { sizeof(b) } };
	struct sc_lease l;
	int ok = sc_l2_admit(st, NS, t, 2, sc_digest(b, sizeof(b)), &p, SC_ORIGIN_DIRECT) == 0 &&
		 sc_l2_get(st, NS, t, 2, NULL, &l) == 0;
	if (ok) {
		ok = l.sec_len[0] == sizeof(b) && !memcmp(l.sec[0], b, sizeof(b));
		sc_lease_release(&l);
	}
	struct sc_key k;
	if (sc_l2_key(st, NS, t, 2, &k) == 0)
		(void)sc_l2_remove(st, k);
	sc_stage_close(st);
	return ok;
}

/* Lost commits, fsck (with repair, so that what dead processes held is accounted; then a clean
 * check), the workers' totals, and the verdict. */
static void check(struct stress *s)
{
	struct shared *sh = s->sh;
	int fsck_json = s->o.json;
	s->lost = count_lost(sh);
	if (!s->o.json)
		printf("fsck --repair:\n");
	s->frc = sc_arena_fsck(s->a, SC_FSCK_REPAIR | SC_FSCK_DEEP, on_finding, &fsck_json, &s->rep);
	s->frc2 = sc_arena_fsck(s->a, SC_FSCK_DEEP, on_finding, &fsck_json, &s->rep2);
	for (uint32_t i = 0; i < s->o.procs; i++) {
		for (int k = 0; k < OP_COUNT; k++)
			s->totals[k] += atomic_load(&sh->w[i].ops[k]);
		s->hits += atomic_load(&sh->w[i].hits);
		s->misses += atomic_load(&sh->w[i].misses);
		s->mism += atomic_load(&sh->w[i].digest_mismatches);
		s->late += atomic_load(&sh->w[i].late_writes);
		s->stale += atomic_load(&sh->w[i].stale_served);
		s->errors += atomic_load(&sh->w[i].errors);
		s->r2 += atomic_load(&sh->w[i].restores_l2);
		s->r3 += atomic_load(&sh->w[i].restores_l3);
	}
	s->torn = atomic_load(&sh->torn_records);
	s->leaked = s->frc2 < 0 ? UINT64_MAX : s->rep2.leaked_bytes;
	s->fsck_clean = s->frc2 == 0;
	s->usable = repaired_arena_usable(s->a);
	s->fail = s->mism || s->late || s->stale || !s->usable || s->lost || s->torn || s->leaked || s->deadlocks ||
		  s->hw.max_bytes || s->hw.max_leases ||
		  !s->fsck_clean || atomic_load(&sh->verifier_error);
}

static void report_json(const struct stress *s)
{
	const struct stress_opts *o = &s->o;
	char leaked[24] = "null"; /* unknown when the last fsck failed */
	if (s->frc2 >= 0)
		snprintf(leaked, sizeof(leaked), "%llu", (unsigned long long)s->leaked);
	printf("{\"seconds\":%.1f,\"procs\":%u,\"seed\":%llu,\"ops_per_s\":{", s->elapsed, o->procs, (unsigned long long)o->seed);
	for (int k = 0; k < OP_COUNT; k++)
		printf("%s\"%s\":%.1f", k ? "," : "", op_names[k], (double)s->totals[k] / s->elapsed);
	printf("},\"hits\":%llu,\"misses\":%llu,\"restores_l2\":%llu,\"restores_l3\":%llu,\"kills\":%llu,"
	       "\"fault_deaths\":%llu,\"repairs\":%llu,\"commits_verified\":%llu,\"tokens_verified\":%llu,"
	       "\"errors\":%llu,\"digest_mismatches\":%llu,\"late_writes\":%llu,\"stale_served\":%llu,"
	       "\"usable_after_repair\":%s,\"lost_commits\":%llu,\"torn_records\":%llu,"
	       "\"leaked_bytes\":%s,\"deadlocks\":%llu,\"held_by_dead_bytes\":%llu,\"held_by_dead_leases\":%llu,"
	       "\"pidns\":%s,\"users\":%s,\"fsck_problems\":%d,\"fsck_repaired\":%llu,\"ok\":%s}\n",
	       (unsigned long long)s->hits, (unsigned long long)s->misses, (unsigned long long)s->r2,
	       (unsigned long long)s->r3, (unsigned long long)s->kills, (unsigned long long)s->fault_deaths,
	       (unsigned long long)s->rep2.lock_repairs, (unsigned long long)atomic_load(&s->sh->verify_commits),
	       (unsigned long long)atomic_load(&s->sh->verify_tokens), (unsigned long long)s->errors,
	       (unsigned long long)s->mism, (unsigned long long)s->late, (unsigned long long)s->stale,
	       s->usable ? "true" : "false", (unsigned long long)s->lost, (unsigned long long)s->torn, leaked, (unsigned long long)s->deadlocks, (unsigned long long)s->hw.max_bytes,
	       (unsigned long long)s->hw.max_leases, o->pidns ? "true" : "false", o->users ? "true" : "false", s->frc2,
	       (unsigned long long)(s->frc >= 0 ? s->rep.repaired : 0), s->fail ? "false" : "true");
}

static void report_text(const struct stress *s)
{
	printf("\n== stress summary (%.1f s, %u workers, seed %llu) ==\n", s->elapsed, s->o.procs,
	       (unsigned long long)s->o.seed);
	printf("ops/s        ");
	for (int k = 0; k < OP_COUNT; k++)
		printf(" %s %.0f", op_names[k], (double)s->totals[k] / s->elapsed);
	printf("\nL2           %llu hits, %llu misses; restores %llu from L2, %llu from L3\n", (unsigned long long)s->hits,
	       (unsigned long long)s->misses, (unsigned long long)s->r2, (unsigned long long)s->r3);
	printf("kills        %llu by the killer, %llu at fault points\n", (unsigned long long)s->kills,
	       (unsigned long long)s->fault_deaths);
	printf("repairs      %llu (lock holders that died)\n", (unsigned long long)s->rep2.lock_repairs);
	if (s->frc < 0)
		printf("fsck         NOT CLEAN (repair failed: %s; %llu problems found)\n", sc_strerror(s->frc),
		       (unsigned long long)s->rep.problems);
	else
		printf("fsck         %s (repair: %llu problems found, %llu repaired; then %d left)\n",
		       s->fsck_clean ? "clean" : "NOT CLEAN", (unsigned long long)s->rep.problems,
		       (unsigned long long)s->rep.repaired, s->frc2);
	printf("verified     %llu commits, %llu tokens\n", (unsigned long long)atomic_load(&s->sh->verify_commits),
	       (unsigned long long)atomic_load(&s->sh->verify_tokens));
	printf("errors       %llu (refusals such as -ENOSPC are not errors)\n", (unsigned long long)s->errors);
	printf("held by the dead %llu checks of every holder (sc_arena_holders), before any repair\n",
	       (unsigned long long)s->hw.checks);
	printf("digest_mismatches %llu\nlate_writes       %llu\nstale_served      %llu\nlost_commits      %llu\n"
	       "torn_records      %llu\n", (unsigned long long)s->mism, (unsigned long long)s->late,
	       (unsigned long long)s->stale, (unsigned long long)s->lost, (unsigned long long)s->torn);
	if (s->frc2 < 0)
		printf("leaked_bytes      unknown (fsck: %s)\n", sc_strerror(s->frc2));
	else
		printf("leaked_bytes      %llu\n", (unsigned long long)s->leaked);
	printf("deadlocks         %llu\n", (unsigned long long)s->deadlocks);
	printf("held_by_dead_bytes %llu\nheld_by_dead_leases %llu\n", (unsigned long long)s->hw.max_bytes,
	       (unsigned long long)s->hw.max_leases);
	printf("after repair      %s\n", s->usable ? "usable (an admission published and read back)" : "NOT USABLE");
	if (s->sh->problem_written)
		printf("first problem: %s\n", s->sh->first_problem);
	printf("%s\n", s->fail ? "FAILED" : "OK");
}

/* The arena (if this run created it) and the L3 directory (if its own) go unless --keep. */
static void cleanup(struct stress *s)
{
	sc_arena_close(s->a);
	if (!s->o.keep) {
		if (s->created)
			sc_arena_destroy(NULL, s->o.name);
		if (s->own_l3)
			cli_rm_rf(s->o.l3dir);
	}
	munmap(s->sh, sizeof(*s->sh));
}

int cmd_stress(int argc, char **argv)
{
	if (stress_hosts_wanted(argc, argv)) /* several hosts on one L3 directory: stress_hosts.c */
		return stress_hosts_main(argc, argv);
	static struct stress s = { .o = { .procs = 4, .seconds = 30, .size = 512u << 20, .max_payload = 16u << 20 } };
	s.o.seed = (uint64_t)time(NULL);
	int rc = parse(argc, argv, &s.o);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	s.own_l3 = !s.o.l3dir;
	s.tty = isatty(2);
	if (s.own_l3) {
		snprintf(s.l3buf, sizeof(s.l3buf), "/var/tmp/stagecache-stress-%d", (int)getpid());
		s.o.l3dir = s.l3buf;
	}
	if ((rc = open_stores(&s)) || (rc = make_shared(&s)))
		return rc;
	if (!s.o.json)
		printf("stress %s: %u workers, %u s, kill every %u ms, seed %llu, L3 %s%s%s\n", s.o.name, s.o.procs,
		       s.o.seconds, s.o.kill_every_ms, (unsigned long long)s.o.seed, s.o.l3dir,
		       s.o.pidns ? ", every other worker in its own pid namespace" : "",
		       s.o.users ? ", workers as uids 65534/65533 of group 65534" : "");

	run(&s);
	stop(&s);
	check(&s);
	if (s.o.json)
		report_json(&s);
	else
		report_text(&s);
	cleanup(&s);
	return s.fail ? EXIT_FAIL : EXIT_OK;
}
