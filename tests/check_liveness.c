/*
 * tests/check_liveness.c — liveness as real deployments see it: workers in other pid namespaces
 * (the `unshare` command and unshare(2)), under other users of one group (`setpriv`), /proc
 * mounted hidepid=2, and SIGKILLed holders of leases, reservations, fill claims, ring roles and
 * locks. Nothing here runs fsck: what the dead held is reclaimed by the operations that need it.
 *
 * The binary doubles as the lease holder the namespaced/other-user cases run:
 *   check_liveness hold NAME KEY   attach, lease key KEY, print "ready <token>", then on each
 *                                  stdin line print "same"/"changed" (the leased bytes' digest
 *                                  against the one taken with the lease); exit at EOF.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../shm/readers.h"

#define MODEL "m"
#define STATE "s"
#define NS "live"
#define OTHER_UID 65534u
#define OTHER_UID2 65533u
#define SHARED_GID 65534u

static char self_path[4096];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void key_tokens(int32_t t[8], uint32_t k)
{
	for (int i = 0; i < 8; i++)
		t[i] = (int32_t)(k * 1000 + (uint32_t)i);
}

static void payload(uint8_t *p, size_t n, uint32_t k)
{
	uint32_t x = k * 2654435761u + 12345u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static int admit(struct sc_stage *st, uint32_t k, size_t n)
{
	uint8_t *b = malloc(n);
	payload(b, n, k);
	int32_t t[8];
	key_tokens(t, k);
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	int rc = sc_l2_admit(st, NS, t, 8, sc_digest(b, n), &p, SC_ORIGIN_DIRECT);
	free(b);
	return rc;
}

static int lease(struct sc_stage *st, uint32_t k, struct sc_lease *l)
{
	int32_t t[8];
	key_tokens(t, k);
	return sc_l2_get(st, NS, t, 8, NULL, l);
}

static struct sc_digest lease_digest(const struct sc_lease *l)
{
	return sc_digest_sections(l->sec[0], l->sec_len[0], l->sec[1], l->sec_len[1]);
}

/* ---- the holder (argv mode) ---- */

static int hold_main(const char *name, uint32_t key)
{
	struct sc_arena *a;
	struct sc_stage *st;
	struct sc_lease l;
	int rc = sc_arena_open(name, &a);
	if (!rc)
		rc = sc_stage_open(a, MODEL, STATE, &st);
	if (!rc)
		rc = lease(st, key, &l);
	if (rc) {
		printf("error %d\n", rc);
		return 1;
	}
	struct sc_digest d0 = lease_digest(&l);
	printf("ready %u\n", sc_arena_token(a));
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		printf("%s\n", sc_digest_equal(lease_digest(&l), d0) ? "same" : "changed");
		fflush(stdout);
	}
	sc_lease_release(&l);
	sc_stage_close(st);
	sc_arena_close(a);
	return 0;
}

/* ---- spawning holders through real commands ---- */

struct child {
	pid_t pid;
	FILE *in, *out;
};

static int spawn(char *const argv[], struct child *c)
{
	int in[2], out[2];
	if (pipe(in) || pipe(out))
		return -1;
	c->pid = fork();
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in = fdopen(in[1], "w");
	c->out = fdopen(out[0], "r");
	return 0;
}

static void ask(struct child *c, char *line, size_t len)
{
	fputs("check\n", c->in);
	fflush(c->in);
	ck_assert_ptr_nonnull(fgets(line, (int)len, c->out));
}

static int finish(struct child *c)
{
	fclose(c->in);
	char line[64];
	while (fgets(line, sizeof(line), c->out))
		;
	fclose(c->out);
	int st;
	waitpid(c->pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A copy of this binary that other users may execute (the build tree may not be theirs). */
static const char *public_copy(char *dir, size_t len)
{
	snprintf(dir, len, "/tmp/sc-liveness-%d", (int)getpid());
	mkdir(dir, 0755);
	chmod(dir, 0755);
	static char bin[4200];
	snprintf(bin, sizeof(bin), "%s/check_liveness", dir);
	char cmd[16384];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 0755 '%s'", self_path, bin, bin);
	ck_assert_int_eq(system(cmd), 0);
	return bin;
}

static void remove_copy(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)system(cmd);
}

/* Clear the arena and admit @rounds times its heap's worth of fresh payloads. */
static void churn(struct sc_arena *a, struct sc_stage *st, unsigned rounds, uint32_t key0)
{
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	const size_t sz = 1u << 20;
	uint32_t per = (uint32_t)(in.heap_bytes / sz);
	for (unsigned r = 0; r < rounds; r++) {
		ck_assert_int_ge(sc_l2_clear(a), 0);
		for (uint32_t i = 0; i < per; i++) {
			int rc = admit(st, key0 + r * per + i, sz);
			ck_assert_msg(rc == 0 || rc == -ENOSPC, "admit: %s", sc_strerror(rc));
		}
	}
}

static const struct sc_holder *find_holder(const struct sc_holder *h, int n, uint32_t token)
{
	for (int i = 0; i < n; i++)
		if (h[i].token == token)
			return &h[i];
	return NULL;
}

/* A held lease, from a holder started by @argv: survives several clears and refills. */
/* setpriv's options that run a command as OTHER_UID in SHARED_GID */
struct other_user {
	char ruid[32], rgid[32], grp[32];
};

static void other_user_args(struct other_user *u)
{
	snprintf(u->ruid, sizeof(u->ruid), "--reuid=%u", OTHER_UID);
	snprintf(u->rgid, sizeof(u->rgid), "--regid=%u", SHARED_GID);
	snprintf(u->grp, sizeof(u->grp), "--groups=%u", SHARED_GID);
}

/* a 64 MiB group-mode (0660, SHARED_GID) arena with one 24 MiB payload admitted under @id */
static struct sc_arena *group_arena_with_payload(const char *tag, uint64_t id, const char **name,
						 struct sc_stage **st)
{
	struct sc_arena_opts o = { .size_bytes = 64 << 20, .huge = SC_HUGE_OFF, .mode = 0660, .gid = SHARED_GID };
	struct sc_arena *a = sc_test_arena_opts(tag, &o, name);
	ck_assert_int_eq(sc_stage_open(a, MODEL, STATE, st), 0);
	ck_assert_int_eq(admit(*st, id, 24u << 20), 0);
	return a;
}

static void lease_survives(char *const argv[], struct sc_arena *a, struct sc_stage *st, int expect_other_ns)
{
	struct child c;
	ck_assert_int_eq(spawn(argv, &c), 0);
	char line[128];
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), c.out));
	unsigned token = 0;
	ck_assert_msg(sscanf(line, "ready %u", &token) == 1, "holder said: %s", line);
	/* we see it attached and alive, with its lease */
	struct sc_holder h[64];
	int n = sc_arena_holders(a, h, 64);
	ck_assert_int_gt(n, 0);
	const struct sc_holder *me = find_holder(h, n, token);
	ck_assert_ptr_nonnull(me);
	ck_assert_int_eq(me->alive, 1);
	ck_assert_uint_eq(me->leases, 1);
	ck_assert_int_eq(me->other_pidns, expect_other_ns);
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	ck_assert_uint_eq(in.attached_count, 2);
	/* clear and fill the arena several times over: not one byte under the lease may change */
	churn(a, st, 4, 100000);
	ask(&c, line, sizeof(line));
	ck_assert_str_eq(line, "same\n");
	ck_assert_int_eq(finish(&c), 0);
	/* gone: its lease no longer pins anything */
	n = sc_arena_holders(a, h, 64);
	ck_assert_ptr_null(find_holder(h, n, token));
}

START_TEST(test_lease_held_from_another_pid_namespace)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("pidns", 64 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, MODEL, STATE, &st), 0);
	ck_assert_int_eq(admit(st, 7, 24u << 20), 0); /* large: the refills would reuse its memory first */
	char *argv[] = { "unshare", "--pid", "--fork", "--mount-proc", self_path, "hold", (char *)name, "7", NULL };
	lease_survives(argv, a, st, 1);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_lease_held_by_another_user_of_the_group)
{
	const char *name;
	struct sc_stage *st;
	struct sc_arena *a = group_arena_with_payload("users", 9, &name, &st);
	char dir[256];
	const char *bin = public_copy(dir, sizeof(dir));
	struct other_user u;
	other_user_args(&u);
	char *argv[] = { "setpriv", u.ruid, u.rgid, u.grp, (char *)bin, "hold", (char *)name, "9", NULL };
	lease_survives(argv, a, st, 0);
	/* and both at once: another user in another pid namespace */
	char *argv2[] = { "unshare", "--pid", "--fork", "--mount-proc", "setpriv", u.ruid, u.rgid, u.grp, (char *)bin,
			  "hold", (char *)name, "9", NULL };
	ck_assert_int_eq(admit(st, 9, 24u << 20), 0);
	lease_survives(argv2, a, st, 1);
	remove_copy(dir);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_hidepid_proc_does_not_make_holders_dead)
{
	const char *name;
	struct sc_stage *st;
	struct sc_arena *a = group_arena_with_payload("hidepid", 11, &name, &st);
	char dir[256];
	const char *bin = public_copy(dir, sizeof(dir));
	struct other_user u;
	other_user_args(&u);
	char *argv[] = { "setpriv", u.ruid, u.rgid, u.grp, (char *)bin, "hold", (char *)name, "11", NULL };
	struct child c;
	ck_assert_int_eq(spawn(argv, &c), 0);
	char line[128];
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), c.out));
	unsigned token;
	ck_assert_int_eq(sscanf(line, "ready %u", &token), 1);
	/* a second user's process that sees /proc with hidepid=2 (it cannot see the holder there)
	 * churns the arena: the holder must still be alive to it, and its bytes untouched */
	pid_t pid = fork();
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("proc", "/proc", "proc", 0, "hidepid=2"))
			_exit(10);
		if (setgroups(1, (gid_t[]){ SHARED_GID }) || setresgid(SHARED_GID, SHARED_GID, SHARED_GID) ||
		    setresuid(OTHER_UID2, OTHER_UID2, OTHER_UID2))
			_exit(11);
		struct sc_arena *b;
		struct sc_stage *bs;
		if (sc_arena_open(name, &b) || sc_stage_open(b, MODEL, STATE, &bs))
			_exit(12);
		struct sc_holder h[64];
		int n = sc_arena_holders(b, h, 64);
		const struct sc_holder *hh = find_holder(h, n, token);
		if (!hh || !hh->alive || hh->leases != 1)
			_exit(13);
		for (unsigned r = 0; r < 4; r++) {
			sc_l2_clear(b);
			for (uint32_t i = 0; i < 64; i++) {
				int rc = admit(bs, 200000 + r * 64 + i, 1u << 20);
				if (rc && rc != -ENOSPC)
					_exit(14);
			}
		}
		_exit(0);
	}
	int stt;
	waitpid(pid, &stt, 0);
	ck_assert_msg(WIFEXITED(stt) && WEXITSTATUS(stt) == 0, "hidepid churner status %#x", stt);
	ask(&c, line, sizeof(line));
	ck_assert_str_eq(line, "same\n");
	ck_assert_int_eq(finish(&c), 0);
	remove_copy(dir);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- holders killed with kill -9 ---- */

/* Fork a child in a new pid namespace (unshare(2) then fork: the grandchild is pid 1 there) that
 * runs @fn; returns the grandchild's pid in our namespace, so we can kill it. */
static pid_t fork_in_new_pidns(int (*fn)(void *), void *ctx, pid_t *middle)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	*middle = fork();
	if (*middle == 0) {
		close(p[0]);
		if (unshare(CLONE_NEWPID))
			_exit(20);
		pid_t g = fork();
		if (g == 0)
			_exit(fn(ctx));
		if (write(p[1], &g, sizeof(g)) != sizeof(g))
			_exit(21);
		int st;
		waitpid(g, &st, 0);
		_exit(0);
	}
	close(p[1]);
	pid_t g = -1;
	ck_assert_int_eq(read(p[0], &g, sizeof(g)), (ssize_t)sizeof(g));
	close(p[0]);
	return g;
}

struct holder_ctx {
	const char *name;
	uint32_t key;
	uint64_t reserve;
	int ready_fd;
};

/* In a holder child: tell the test @v (a token, a ring index) and wait to be killed. */
static int ready_then_pause(struct holder_ctx *c, uint32_t v)
{
	if (write(c->ready_fd, &v, sizeof(v)) != sizeof(v))
		return 9;
	for (;;)
		pause();
}

/* Run @fn in a child in a new pid namespace (fork_in_new_pidns) and wait for the value it reports
 * with ready_then_pause; returns the child's pid in our namespace. */
static pid_t start_in_new_pidns(int (*fn)(void *), struct holder_ctx *hc, pid_t *middle, uint32_t *ready)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	hc->ready_fd = p[1];
	pid_t v = fork_in_new_pidns(fn, hc, middle);
	close(p[1]);
	ck_assert_int_eq(read(p[0], ready, sizeof(*ready)), (ssize_t)sizeof(*ready));
	close(p[0]);
	return v;
}

/* Lease @key, reserve @reserve bytes, say so, and wait to be killed. */
static int lease_and_wait(void *vctx)
{
	struct holder_ctx *c = vctx;
	struct sc_arena *a;
	struct sc_stage *st;
	struct sc_lease l;
	struct sc_l2_resv r;
	if (sc_arena_open(c->name, &a) || sc_stage_open(a, MODEL, STATE, &st) || lease(st, c->key, &l))
		return 2;
	if (c->reserve && sc_l2_reserve(st, c->reserve, &r))
		return 3;
	uint32_t t = sc_arena_token(a);
	return ready_then_pause(c, t);
}

START_TEST(test_killed_holders_reclaimed_by_admits_that_need_room)
{
	/* 8 holders, half of them in other pid namespaces, each pinning an entry and a reservation */
	const char *name;
	struct sc_arena *a = sc_test_arena("killed", 64 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, MODEL, STATE, &st), 0);
	for (uint32_t k = 0; k < 8; k++)
		ck_assert_int_eq(admit(st, k, 3u << 20), 0);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t victims[8], middles[8] = { 0 };
	struct holder_ctx hc[8];
	uint32_t tokens[8];
	for (uint32_t k = 0; k < 8; k++) {
		hc[k] = (struct holder_ctx){ .name = name, .key = k, .reserve = 2u << 20, .ready_fd = p[1] };
		if (k % 2) {
			victims[k] = fork_in_new_pidns(lease_and_wait, &hc[k], &middles[k]);
		} else {
			victims[k] = fork();
			if (victims[k] == 0)
				_exit(lease_and_wait(&hc[k]));
		}
		ck_assert_int_eq(read(p[0], &tokens[k], sizeof(tokens[k])), (ssize_t)sizeof(tokens[k]));
	}
	struct sc_l2_stats s;
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_eq(s.leases, 8);
	for (int k = 0; k < 8; k++) {
		kill(victims[k], SIGKILL);
		if (middles[k])
			waitpid(middles[k], NULL, 0);
		else
			waitpid(victims[k], NULL, 0);
	}
	/* admits that need the room succeed, with no fsck: 40 MiB more into a 64 MiB arena whose
	 * heap holds 24 MiB of leased entries and 16 MiB of dead reservations */
	for (uint32_t k = 100; k < 110; k++) {
		int rc = admit(st, k, 4u << 20);
		ck_assert_msg(rc == 0, "admit %u: %s", k, sc_strerror(rc));
	}
	struct sc_holder h[64];
	int n = sc_arena_holders(a, h, 64);
	for (int i = 0; i < n; i++)
		ck_assert_msg(h[i].alive || (!h[i].leases && !h[i].reserved_bytes), "dead holder %#x still holds %u leases, %llu bytes",
			      h[i].token, h[i].leases, (unsigned long long)h[i].reserved_bytes);
	ck_assert_int_eq(sc_l2_stats(a, NULL, &s), 0);
	ck_assert_uint_eq(s.leases, 0);
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_DEEP, NULL, NULL, &r), 0);
	ck_assert_uint_eq(r.orphan_bytes, 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_dead_holders_reclaimed_within_the_reap_period)
{
	/* no shortage at all: a writer passing by reaps within the period (100 ms) */
	const char *name;
	struct sc_arena *a = sc_test_arena("period", 64 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, MODEL, STATE, &st), 0);
	ck_assert_int_eq(admit(st, 1, 1u << 20), 0);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	struct holder_ctx hc = { .name = name, .key = 1, .reserve = 1u << 20, .ready_fd = p[1] };
	pid_t v = fork();
	if (v == 0)
		_exit(lease_and_wait(&hc));
	uint32_t t;
	ck_assert_int_eq(read(p[0], &t, sizeof(t)), (ssize_t)sizeof(t));
	kill(v, SIGKILL);
	waitpid(v, NULL, 0);
	double t0 = now_s();
	int held = 1;
	while (held && now_s() - t0 < 2.0) {
		ck_assert_int_eq(admit(st, 2, 4096), 0); /* small admits: no shortage */
		struct sc_holder h[64];
		int n = sc_arena_holders(a, h, 64);
		const struct sc_holder *x = find_holder(h, n, t);
		held = x && (x->leases || x->reserved_bytes);
		usleep(10000);
	}
	ck_assert_msg(!held, "a dead holder's lease and reservation outlived it by 2 s");
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

static int lease_then_die(void *vctx)
{
	struct holder_ctx *c = vctx;
	struct sc_arena *a;
	struct sc_stage *st;
	struct sc_lease l;
	if (sc_arena_open(c->name, &a) || sc_stage_open(a, MODEL, STATE, &st) || lease(st, c->key, &l))
		return 2;
	raise(SIGKILL);
	return 0;
}

START_TEST(test_thousand_killed_lease_holders)
{
	struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = SC_HUGE_OFF, .reader_slots = 64 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("thousand", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, MODEL, STATE, &st), 0);
	ck_assert_int_eq(admit(st, 3, 64 << 10), 0);
	struct holder_ctx hc = { .name = name, .key = 3 };
	for (int i = 0; i < 1000; i++) {
		pid_t v = fork();
		if (v == 0)
			_exit(lease_then_die(&hc));
		int stt;
		waitpid(v, &stt, 0);
		ck_assert_msg(WIFSIGNALED(stt) && WTERMSIG(stt) == SIGKILL, "holder %d status %#x", i, stt);
	}
	/* usable: info lists only us, another process attaches, a put/get round trip works */
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	ck_assert_uint_eq(in.attached_count, 1);
	ck_assert_uint_eq(in.attached[0].pid, (uint32_t)getpid());
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	sc_arena_close(b);
	ck_assert_int_eq(admit(st, 4, 64 << 10), 0);
	struct sc_lease l;
	ck_assert_int_eq(lease(st, 4, &l), 0);
	sc_lease_release(&l);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- creation ---- */

/* The creator's hook: at arena.create.locked (the creation lock held), say "x" on @parked_fd,
 * then stay there until the file @flag exists (60 s without it: exit 4, so the creator of a run
 * that failed before making the file does not stay parked). */
struct park {
	const char *flag;
	int parked_fd;
};

static void park_until_file(const char *point, void *ctx)
{
	const struct park *p = ctx;
	if (strcmp(point, "arena.create.locked"))
		return;
	if (write(p->parked_fd, "x", 1) != 1)
		_exit(3);
	double t0 = now_s();
	while (access(p->flag, F_OK)) {
		if (now_s() - t0 > 60.0)
			_exit(4);
		usleep(5000);
	}
}

/* The opener's hook: count its waits for the creator (arena.open.wait); at the first, make the
 * file @flag that lets the creator go on, then wait for the creator's byte on @created_fd (its
 * sc_arena_create has returned), so the opener's next look finds the arena published however
 * slow the creator was (the opener's own wait is only OPEN_WAIT_NS). */
struct unpark {
	const char *flag;
	int created_fd;
	int waits;
};

static void unpark_at_open_wait(const char *point, void *ctx)
{
	struct unpark *u = ctx;
	if (strcmp(point, "arena.open.wait") || u->waits++)
		return;
	int fd = open(u->flag, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	char c;
	struct pollfd pf = { .fd = u->created_fd, .events = POLLIN };
	ck_assert_msg(poll(&pf, 1, 30000) == 1 && read(u->created_fd, &c, 1) == 1,
		      "the released creator did not finish sc_arena_create (within 30 s)");
}

START_TEST(test_open_during_create_waits_then_eagain)
{
	const char *name = sc_test_name("creating");
	char flag[128];
	snprintf(flag, sizeof(flag), "/tmp/sc-create-flag-%d", (int)getpid());
	unlink(flag);
	int up[2], created[2];
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(created), 0);
	pid_t creator = fork();
	if (creator == 0) {
		close(created[0]);
		struct park p = { .flag = flag, .parked_fd = up[1] };
		sc_sched_set(park_until_file, &p);
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
		struct sc_arena *c;
		int rc = sc_arena_create(name, &o, &c);
		sc_sched_set(NULL, NULL);
		if (rc)
			_exit(2);
		if (write(created[1], "c", 1) != 1)
			_exit(3);
		sleep(30); /* keep it attached until killed */
		_exit(0);
	}
	/* the file exists, the creator is parked holding the creation lock (it says so) */
	close(up[1]); /* a creator that ends before the point ends the wait below */
	close(created[1]); /* and one that ends before it has created, the hook's wait */
	char c;
	struct pollfd pf = { .fd = up[0], .events = POLLIN };
	ck_assert_msg(poll(&pf, 1, 30000) == 1 && read(up[0], &c, 1) == 1,
		      "the creator did not park holding the creation lock (within 30 s)");
	close(up[0]);
	struct sc_arena *a;
	double t0 = now_s();
	ck_assert_int_eq(sc_arena_open(name, &a), -EAGAIN); /* not -EBADMSG */
	ck_assert(now_s() - t0 > 1.5);                        /* it waited (bounded) */
	/* released while we wait (at our first wait): we get in */
	struct unpark u = { .flag = flag, .created_fd = created[0] };
	sc_sched_set(unpark_at_open_wait, &u);
	int rc = sc_arena_open(name, &a);
	sc_sched_set(NULL, NULL);
	close(created[0]);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_ge(u.waits, 1); /* it waited for the creator */
	sc_arena_close(a);
	kill(creator, SIGKILL);
	waitpid(creator, NULL, 0);
	unlink(flag);
	sc_arena_destroy(NULL, name);
}
END_TEST

START_TEST(test_create_else_open_from_many_processes)
{
	/* the start-up the README recommends: open, and on ENOENT create, and on EEXIST open */
	const char *name = sc_test_name("startup");
	pid_t kids[6];
	for (int i = 0; i < 6; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			struct sc_arena *a;
			struct sc_arena_opts o = { .size_bytes = 64 << 20, .huge = SC_HUGE_OFF };
			for (int attempt = 0; attempt < 20; attempt++) {
				int rc = sc_arena_open(name, &a);
				if (rc == -ENOENT) {
					rc = sc_arena_create(name, &o, &a);
					if (rc == -EEXIST)
						continue;
				}
				if (rc == -EAGAIN)
					continue;
				_exit(rc ? 1 : 0);
			}
			_exit(3);
		}
	}
	for (int i = 0; i < 6; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "starter %d status %#x", i, st);
	}
	sc_arena_destroy(NULL, name);
}
END_TEST

/* ---- claims, rings, locks ---- */

static int claim_and_wait(void *vctx)
{
	struct holder_ctx *c = vctx;
	struct sc_arena *a;
	if (sc_arena_open(c->name, &a) || sc_fill_claim(a, 42, (struct sc_digest){ 1, 2 }))
		return 2;
	uint32_t t = sc_arena_token(a);
	return ready_then_pause(c, t);
}

START_TEST(test_killed_fill_claimer_is_taken_over)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("claim", 16 << 20, &name);
	struct holder_ctx hc = { .name = name };
	uint32_t t;
	pid_t middle, v = start_in_new_pidns(claim_and_wait, &hc, &middle, &t);
	/* alive in its own pid namespace: its claim holds */
	ck_assert_int_eq(sc_fill_claim(a, 42, (struct sc_digest){ 1, 2 }), -EBUSY);
	ck_assert_int_eq(sc_fill_wait(a, 42, (struct sc_digest){ 1, 2 }, 100000000), -ETIMEDOUT);
	kill(v, SIGKILL);
	waitpid(middle, NULL, 0);
	/* dead: the waiter stops waiting (long before its 60 s timeout, whatever the machine's
	 * load) and the claim is taken over */
	double t0 = now_s();
	ck_assert_int_eq(sc_fill_wait(a, 42, (struct sc_digest){ 1, 2 }, 60000000000ull), 0);
	ck_assert(now_s() - t0 < 30.0);
	ck_assert_int_eq(sc_fill_claim(a, 42, (struct sc_digest){ 1, 2 }), 0);
	ck_assert_int_eq(sc_fill_release(a, 42, (struct sc_digest){ 1, 2 }), 0);
	sc_test_arena_destroy(a, name);
}
END_TEST

static int count_cb(const struct sc_commit *c, void *ctx)
{
	(void)c;
	(*(unsigned *)ctx)++;
	return 0;
}

static int produce_and_wait(void *vctx)
{
	struct holder_ctx *c = vctx;
	struct sc_arena *a;
	struct sc_ring *r;
	if (sc_arena_open(c->name, &a) || sc_ring_open(a, &r))
		return 2;
	int32_t tok[4] = { 1, 2, 3, 4 };
	struct sc_commit cm = { .request_id = 1, .token_count = 4, .tokens = tok };
	for (int i = 0; i < 10; i++)
		if (sc_ring_try_submit(r, &cm))
			return 3;
	uint32_t idx = sc_ring_index(r);
	return ready_then_pause(c, idx);
}

START_TEST(test_ring_producer_in_another_pidns_keeps_its_ring)
{
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .ring_count = 2 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("ring", &o, &name);
	struct holder_ctx hc = { .name = name };
	uint32_t idx;
	pid_t middle, v = start_in_new_pidns(produce_and_wait, &hc, &middle, &idx);
	unsigned got = 0;
	/* drain, then an observation window in which nothing must happen: 200 ms of time itself,
	 * four of the consumer's checks of empty LIVE rings for dead producers (every
	 * SHM_RING_REAP_INTERVAL_NS, 50 ms), none of which may reclaim the live producer's ring */
	for (int i = 0; i < 20; i++) {
		ck_assert_int_ge(sc_ring_poll(a, count_cb, &got, 64), 0);
		usleep(10000);
	}
	ck_assert_uint_eq(got, 10);
	struct sc_ring_stat rs[2];
	ck_assert_int_eq(sc_ring_stats(a, rs, 2), 2);
	ck_assert_uint_eq(rs[idx].state, SC_RING_LIVE); /* not reclaimed from a live producer */
	ck_assert_int_eq(rs[idx].producer_alive, 1);
	/* both rings taken: one by it, one by us */
	struct sc_ring *mine, *third;
	ck_assert_int_eq(sc_ring_open(a, &mine), 0);
	struct sc_arena *a2;
	ck_assert_int_eq(sc_arena_open(name, &a2), 0);
	ck_assert_int_eq(sc_ring_open(a2, &third), -ENOSPC);
	/* killed: its drained ring is reclaimed by the consumer and can be claimed again */
	kill(v, SIGKILL);
	waitpid(middle, NULL, 0);
	/* its token is dead once it is reaped; the consumer frees the ring at its next check of
	 * empty LIVE rings (every SHM_RING_REAP_INTERVAL_NS): poll until it has (up to 30 s) */
	double t0 = now_s();
	for (;;) {
		ck_assert_int_ge(sc_ring_poll(a, count_cb, &got, 64), 0);
		ck_assert_int_eq(sc_ring_stats(a, rs, 2), 2);
		if (rs[idx].state == SC_RING_FREE)
			break;
		ck_assert_msg(now_s() - t0 < 30.0, "the dead producer's ring %u is still in state %u after 30 s of polls",
			      idx, rs[idx].state);
		sc_test_pause_ms(1);
	}
	ck_assert_uint_eq(got, 10);
	ck_assert_int_eq(sc_ring_open(a2, &third), 0);
	sc_ring_close(third);
	sc_ring_close(mine);
	sc_ring_consumer_close(a);
	sc_arena_close(a2);
	sc_test_arena_destroy(a, name);
}
END_TEST

static int consume_and_wait(void *vctx)
{
	struct holder_ctx *c = vctx;
	struct sc_arena *a;
	unsigned got = 0;
	if (sc_arena_open(c->name, &a) || sc_ring_poll(a, count_cb, &got, 1) < 0)
		return 2;
	uint32_t t = sc_arena_token(a);
	return ready_then_pause(c, t);
}

START_TEST(test_killed_consumer_in_another_pidns_is_taken_over)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("cons", 16 << 20, &name);
	struct holder_ctx hc = { .name = name };
	uint32_t t;
	pid_t middle, v = start_in_new_pidns(consume_and_wait, &hc, &middle, &t);
	unsigned got = 0;
	ck_assert_int_eq(sc_ring_poll(a, count_cb, &got, 1), -EBUSY); /* it lives */
	kill(v, SIGKILL);
	waitpid(middle, NULL, 0);
	ck_assert_int_eq(sc_ring_poll(a, count_cb, &got, 1), 0); /* taken over */
	sc_ring_consumer_close(a);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- pids decide nothing: a holder's pid may name no process here, or another one ---- */

/* Fork a new pid namespace whose init (pid 1 there) sets ns_last_pid so that its one child gets
 * pid @want there, and runs @fn in that child. Returns the init's pid in our namespace: killing it
 * kills the holder too. */
static pid_t fork_at_pid_in_new_pidns(int (*fn)(void *), void *ctx, pid_t want, pid_t *middle)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	*middle = fork();
	if (*middle == 0) {
		close(p[0]);
		if (unshare(CLONE_NEWPID))
			_exit(20);
		pid_t g = fork();
		if (g == 0) {
			/* pid 1 of the namespace: the next pid it hands out is ns_last_pid + 1 */
			char v[32];
			int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
			int n = snprintf(v, sizeof(v), "%d", (int)want - 1);
			if (fd < 0 || write(fd, v, (size_t)n) != n)
				_exit(22);
			close(fd);
			pid_t h = fork();
			if (h == 0)
				_exit(getpid() == want ? fn(ctx) : 23);
			int st;
			waitpid(h, &st, 0);
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 24);
		}
		if (write(p[1], &g, sizeof(g)) != sizeof(g))
			_exit(21);
		int st;
		waitpid(g, &st, 0);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 25);
	}
	close(p[1]);
	pid_t g = -1;
	ck_assert_int_eq(read(p[0], &g, sizeof(g)), (ssize_t)sizeof(g));
	close(p[0]);
	return g;
}

/* A pid (>= 72) that names no process in our namespace now. */
static pid_t pid_absent_here(void)
{
	for (pid_t p = 72; p < 4000; p++)
		if (kill(p, 0) && errno == ESRCH)
			return p;
	ck_abort_msg("no free pid below 4000");
	return -1;
}

/* Lease @key, take the ring consumer role and a ring, say our token, wait to be killed. */
static int hold_roles_and_wait(void *vctx)
{
	struct holder_ctx *c = vctx;
	struct sc_arena *a;
	struct sc_stage *st;
	struct sc_lease l;
	struct sc_ring *r;
	unsigned got = 0;
	if (sc_arena_open(c->name, &a) || sc_stage_open(a, MODEL, STATE, &st) || lease(st, c->key, &l))
		return 2;
	if (sc_ring_poll(a, count_cb, &got, 1) < 0 || sc_ring_open(a, &r))
		return 3;
	return ready_then_pause(c, sc_arena_token(a));
}

/* Start hold_roles_and_wait at pid @want of a new pid namespace on arena @name (key 7 admitted);
 * returns its namespace's init (ours) and its token. */
static pid_t start_holder_at(const char *name, pid_t want, pid_t *middle, uint32_t *token)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	struct holder_ctx hc = { .name = name, .key = 7, .ready_fd = p[1] };
	pid_t g = fork_at_pid_in_new_pidns(hold_roles_and_wait, &hc, want, middle);
	close(p[1]);
	ck_assert_msg(read(p[0], token, sizeof(*token)) == (ssize_t)sizeof(*token), "the holder at pid %d did not start",
		      (int)want);
	close(p[0]);
	return g;
}

static const struct sc_holder *holder_row(struct sc_arena *a, struct sc_holder *h, int max, uint32_t token)
{
	int n = sc_arena_holders(a, h, max);
	ck_assert_int_gt(n, 0);
	return find_holder(h, n, token);
}

/* A live holder whose pid (in its own namespace) names no process here keeps everything it holds:
 * its consumer role, its ring, its lease (a liveness test that asks kill(pid, 0) loses them). */
START_TEST(test_live_holder_whose_pid_names_nothing_here_keeps_its_roles)
{
	struct sc_arena_opts o = { .size_bytes = 64 << 20, .huge = SC_HUGE_OFF, .ring_count = 1 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("pid72", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, MODEL, STATE, &st), 0);
	ck_assert_int_eq(admit(st, 7, 24u << 20), 0);
	pid_t want = pid_absent_here(), middle;
	uint32_t token;
	pid_t g = start_holder_at(name, want, &middle, &token);
	struct sc_holder h[16];
	const struct sc_holder *me = holder_row(a, h, 16, token);
	ck_assert_ptr_nonnull(me);
	ck_assert_uint_eq(me->pid, (uint32_t)want);
	ck_assert_msg(kill(want, 0) == -1 && errno == ESRCH, "pid %d exists here after all", (int)want);
	ck_assert_int_eq(me->alive, 1);
	ck_assert_int_eq(me->other_pidns, 1);
	ck_assert_int_eq(shm_token_alive(a->shm, token), 1);
	/* its roles stay its own */
	unsigned got = 0;
	ck_assert_int_eq(sc_ring_poll(a, count_cb, &got, 1), -EBUSY);
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(a, &r), -ENOSPC);
	/* reaps, clears and refills leave its lease and slot alone */
	ck_assert_int_eq(shm_readers_reap(a->shm), 0);
	churn(a, st, 2, 300000);
	me = holder_row(a, h, 16, token);
	ck_assert_ptr_nonnull(me);
	ck_assert_int_eq(me->alive, 1);
	ck_assert_uint_eq(me->leases, 1);
	/* killed: now it is dead, and everything it held is taken over */
	kill(g, SIGKILL);
	waitpid(middle, NULL, 0);
	ck_assert_int_eq(shm_token_alive(a->shm, token), 0);
	ck_assert_int_eq(sc_ring_poll(a, count_cb, &got, 1), 0);
	ck_assert_int_eq(sc_ring_open(a, &r), 0);
	sc_ring_close(r);
	sc_ring_consumer_close(a);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A dead holder whose pid (in its own namespace) is the pid of a live process here (this test's
 * own) is dead all the same: its roles are taken over at once (a liveness test that trusts
 * kill(pid, 0) keeps them forever). */
START_TEST(test_dead_holder_whose_pid_names_a_live_process_here_is_dead)
{
	struct sc_arena_opts o = { .size_bytes = 64 << 20, .huge = SC_HUGE_OFF, .ring_count = 1 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("pidhere", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, MODEL, STATE, &st), 0);
	ck_assert_int_eq(admit(st, 7, 24u << 20), 0);
	pid_t want = getpid(), middle;
	uint32_t token;
	pid_t g = start_holder_at(name, want, &middle, &token);
	kill(g, SIGKILL);
	waitpid(middle, NULL, 0);
	struct sc_holder h[16];
	const struct sc_holder *me = holder_row(a, h, 16, token);
	ck_assert_ptr_nonnull(me); /* not reaped yet: its slot still names pid @want */
	ck_assert_uint_eq(me->pid, (uint32_t)want);
	ck_assert_int_eq(kill(want, 0), 0);
	ck_assert_int_eq(me->alive, 0);
	ck_assert_int_eq(shm_token_alive(a->shm, token), 0);
	unsigned got = 0;
	ck_assert_int_eq(sc_ring_poll(a, count_cb, &got, 1), 0); /* the consumer role: taken over */
	struct sc_ring *r;
	ck_assert_int_eq(sc_ring_open(a, &r), 0);               /* its empty ring: reclaimed */
	sc_ring_close(r);
	ck_assert_int_eq(shm_readers_reap(a->shm), 1);          /* its slot and lease: cleared */
	ck_assert_ptr_null(holder_row(a, h, 16, token));
	sc_ring_consumer_close(a);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Has a waiter announced itself on one of @ix's shard locks (the waiters bit)? */
static int a_shard_lock_has_waiters(struct shm_index *ix)
{
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		if (atomic_load_explicit(&ix->hdr->shards[s].mu.word, memory_order_relaxed) & SHM_MUTEX_WAITERS)
			return 1;
	return 0;
}

static int admit_slowly(void *vctx)
{
	/* hold a shard's writer lock for a while from another pid namespace: a waiter must wait for
	 * it (alive), not take it over */
	struct holder_ctx *c = vctx;
	struct sc_arena *a;
	struct sc_stage *st;
	if (sc_arena_open(c->name, &a) || sc_stage_open(a, MODEL, STATE, &st))
		return 2;
	int rc = l2_ready(a);
	if (rc)
		return 3;
	struct shm_index *ix = (struct shm_index *)(void *)a->l2_ix;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		if (shm_index_lock(ix, s))
			return 4;
	uint32_t tok = sc_arena_token(a);
	if (write(c->ready_fd, &tok, sizeof(tok)) != sizeof(tok))
		return 5;
	/* until the test's admission waits on one of them (up to 30 s), then 600 ms more: time
	 * itself, for it to sleep through futex slices and test our token after each (2 to 50 ms,
	 * SLICE_MIN_NS and SLICE_MAX_NS in shm/mutex.c) */
	double t0 = now_s();
	while (!a_shard_lock_has_waiters(ix)) {
		if (now_s() - t0 > 30.0)
			return 6;
		sc_test_pause_ms(1);
	}
	usleep(600000);
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		shm_index_unlock(ix, s);
	return 0;
}

START_TEST(test_lock_holder_in_another_pidns_is_waited_for)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("locks", 32 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, MODEL, STATE, &st), 0);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	struct holder_ctx hc = { .name = name, .ready_fd = p[1] };
	pid_t middle;
	(void)fork_in_new_pidns(admit_slowly, &hc, &middle);
	uint32_t t;
	ck_assert_int_eq(read(p[0], &t, sizeof(t)), (ssize_t)sizeof(t));
	double t0 = now_s();
	ck_assert_int_eq(admit(st, 5, 8192), 0);
	ck_assert(now_s() - t0 > 0.3); /* waited for the live holder */
	struct shm_index *ix = (struct shm_index *)(void *)a->l2_ix;
	uint32_t repairs = 0;
	for (uint32_t s = 0; s < SHM_INDEX_SHARDS; s++)
		repairs += ix->hdr->shards[s].repairs;
	ck_assert_uint_eq(repairs, 0); /* nothing was "repaired" under a live holder */
	int stt;
	waitpid(middle, &stt, 0);
	ck_assert(WIFEXITED(stt) && WEXITSTATUS(stt) == 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_forked_child_cannot_use_the_parents_handle)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("fork", 16 << 20, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, MODEL, STATE, &st), 0);
	ck_assert_int_eq(admit(st, 1, 4096), 0);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t c = fork();
	if (c == 0) {
		struct sc_lease l;
		int r1 = lease(st, 1, &l), r2 = admit(st, 2, 4096);
		/* its own handle works */
		struct sc_arena *b;
		struct sc_stage *bs;
		int r3 = sc_arena_open(name, &b);
		if (!r3)
			r3 = sc_stage_open(b, MODEL, STATE, &bs);
		if (!r3)
			r3 = lease(bs, 1, &l);
		char ok = r1 == -ECHILD && r2 == -ECHILD && r3 == 0 ? 'y' : 'n';
		if (write(p[1], &ok, 1) != 1)
			_exit(5);
		pause(); /* keeps the parent's (inherited) handle while the parent looks */
		_exit(0);
	}
	char x;
	ck_assert_int_eq(read(p[0], &x, 1), 1);
	ck_assert_msg(x == 'y', "the inherited handle worked in the child, or the child's own did not");
	/* our slot is ours alone: the child closed its inherited copy of our lock */
	struct sc_holder h[16];
	int n = sc_arena_holders(a, h, 16);
	ck_assert_int_eq(n, 2);
	kill(c, SIGKILL); /* (Check's SIGTERM handler, inherited, would take the whole test down) */
	int stt;
	waitpid(c, &stt, 0);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* ---- L3 temp files: judged by their writer's lock, not its pid ---- */

static int lock_file_and_wait(void *vctx)
{
	struct holder_ctx *c = vctx;
	int fd = open(c->name, O_WRONLY);
	if (fd < 0 || shm_ofd_trylock(fd, 0))
		return 2;
	uint32_t t = 1;
	return ready_then_pause(c, t);
}

START_TEST(test_l3_temp_file_of_a_live_writer_in_another_pidns_is_kept)
{
	char dir[128], sub[160], tmp[256], cmd[600];
	snprintf(dir, sizeof(dir), "/tmp/sc-live-l3-%d", (int)getpid());
	struct sc_l3 *l3;
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
	sc_l3_close(l3);
	snprintf(sub, sizeof(sub), "%s/objects/ab", dir);
	mkdir(sub, 0700);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-1.abc.0", sub); /* pid 1: as a container's writer would be */
	int fd = open(tmp, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	struct holder_ctx hc = { .name = tmp };
	uint32_t t;
	pid_t middle, v = start_in_new_pidns(lock_file_and_wait, &hc, &middle, &t);
	snprintf(cmd, sizeof(cmd), "touch -d '-1 hour' '%s'", tmp);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0); /* reconciles */
	sc_l3_close(l3);
	ck_assert_int_eq(access(tmp, F_OK), 0); /* its writer lives: kept, however old */
	kill(v, SIGKILL);
	waitpid(middle, NULL, 0);
	ck_assert_int_eq(sc_l3_open(dir, NULL, &l3), 0);
	sc_l3_close(l3);
	ck_assert_int_ne(access(tmp, F_OK), 0); /* its writer is gone: removed */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

Suite *liveness_suite(void)
{
	Suite *s = suite_create("liveness");
	TCase *tc = tcase_create("liveness");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lease_held_from_another_pid_namespace);
	tcase_add_test(tc, test_lease_held_by_another_user_of_the_group);
	tcase_add_test(tc, test_hidepid_proc_does_not_make_holders_dead);
	tcase_add_test(tc, test_killed_holders_reclaimed_by_admits_that_need_room);
	tcase_add_test(tc, test_dead_holders_reclaimed_within_the_reap_period);
	tcase_add_test(tc, test_thousand_killed_lease_holders);
	tcase_add_test(tc, test_open_during_create_waits_then_eagain);
	tcase_add_test(tc, test_create_else_open_from_many_processes);
	tcase_add_test(tc, test_killed_fill_claimer_is_taken_over);
	tcase_add_test(tc, test_ring_producer_in_another_pidns_keeps_its_ring);
	tcase_add_test(tc, test_killed_consumer_in_another_pidns_is_taken_over);
	tcase_add_test(tc, test_live_holder_whose_pid_names_nothing_here_keeps_its_roles);
	tcase_add_test(tc, test_dead_holder_whose_pid_names_a_live_process_here_is_dead);
	tcase_add_test(tc, test_lock_holder_in_another_pidns_is_waited_for);
	tcase_add_test(tc, test_forked_child_cannot_use_the_parents_handle);
	tcase_add_test(tc, test_l3_temp_file_of_a_live_writer_in_another_pidns_is_kept);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold_main(argv[2], (uint32_t)strtoul(argv[3], NULL, 10));
	ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
	if (n <= 0)
		return 2;
	self_path[n] = 0;
	if (geteuid() != 0) {
		sc_skip("liveness across pid namespaces and users needs root (unshare, setpriv)");
		return 0;
	}
	SRunner *sr = srunner_create(liveness_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
