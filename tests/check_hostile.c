/*
 * tests/check_hostile.c — hostile neighbours (root only; SKIP otherwise): what a user outside the
 * group and a member of it can do to others, for real (docs/DEPLOYING.md, "The trust model").
 *
 * Users and the group are made here when missing (groupadd/useradd, system accounts without a
 * home, left in place for the next run): group sc-hostile with members sc-hm-a (creates the
 * arenas and stores) and sc-hm-b (another member), and sc-ho outside it. Commands run under
 * setpriv with exactly the uid, gid and groups of the case; library-level processes fork and drop
 * to that user with setresuid. Every wait has a bound: each command runs under timeout(1), each
 * process that holds something for the test (a lock, a slot, open connections) is killed and
 * reaped before its test ends, and each wait for a condition says what it waits for.
 *
 * Each test is named after what a hostile user did; each failed before the change that made it
 * pass (the commit that added it says how).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "sc_check.h"
#include "../shm/region.h"

/* paths here are short (base is /var/tmp/sc-hostile-PID): truncation cannot happen */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define GROUP "sc-hostile"
#define MA "sc-hm-a"
#define MB "sc-hm-b"
#define OUT "sc-ho"

static char bin[1024], pydir[1024], libso[1024], base[128], tag[32];
static int ready;
static char why[256];
static uid_t uid_a, uid_b, uid_o;
static gid_t gid_g, gid_o;

#define shell sc_test_sh

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void setup(void)
{
	if (geteuid() != 0) {
		snprintf(why, sizeof(why), "hostile users need root (groupadd, useradd, setpriv)");
		return;
	}
	if (shell("command -v setpriv groupadd useradd timeout >/dev/null 2>&1")) {
		snprintf(why, sizeof(why), "setpriv, groupadd, useradd or timeout is missing");
		return;
	}
	ssize_t n = readlink("/proc/self/exe", bin, sizeof(bin) - 1);
	if (n <= 0)
		return;
	bin[n] = 0;
	char *d = dirname(dirname(bin)); /* <build>/tests/check_hostile -> <build> */
	memmove(bin, d, strlen(d) + 1);
	snprintf(libso, sizeof(libso), "%s/libstagecache.so.0", bin);
	/* the Python package sits in the source tree: <build>/.. or <build>/../.. (asan, tsan) */
	snprintf(pydir, sizeof(pydir), "%s/../python", bin);
	if (access(pydir, R_OK))
		snprintf(pydir, sizeof(pydir), "%s/../../python", bin);
	strcat(bin, "/stagecache");
	if (shell("getent group " GROUP " >/dev/null || groupadd --system " GROUP) ||
	    shell("id " MA " >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin --gid " GROUP
		  " " MA) ||
	    shell("id " MB " >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin --gid " GROUP
		  " " MB) ||
	    shell("id " OUT " >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin --user-group "
		  OUT)) {
		snprintf(why, sizeof(why), "cannot create the group %s and the users %s, %s, %s", GROUP, MA, MB, OUT);
		return;
	}
	struct passwd *pw;
	struct group *g = getgrnam(GROUP);
	if (!g)
		return;
	gid_g = g->gr_gid;
	if (!(pw = getpwnam(MA)))
		return;
	uid_a = pw->pw_uid;
	if (!(pw = getpwnam(MB)))
		return;
	uid_b = pw->pw_uid;
	if (!(pw = getpwnam(OUT)))
		return;
	uid_o = pw->pw_uid, gid_o = pw->pw_gid;
	/* base: anyone may enter; base/g: only the group */
	snprintf(base, sizeof(base), "/var/tmp/sc-hostile-%d", (int)getpid());
	snprintf(tag, sizeof(tag), "hx-%d", (int)getpid()); /* arena names: <tag>-<test> */
	if (shell("rm -rf %s && mkdir -p %s/g && chmod 0755 %s && chgrp " GROUP " %s/g && chmod 2770 %s/g && "
		  "head -c 20000 /dev/urandom > %s/payload && chmod 0644 %s/payload",
		  base, base, base, base, base, base, base))
		return;
	ready = 1;
}

static void teardown(void)
{
	if (!ready)
		return;
	shell("rm -rf %s; rm -f /dev/shm/stagecache.%s-*", base, tag);
}

#define NEED_READY()                                                       \
	do {                                                               \
		if (!ready) {                                              \
			sc_skip("%s", why[0] ? why : "fixture not ready"); \
			return;                                            \
		}                                                          \
	} while (0)

/* ---- commands as a user ---- */

struct out {
	int code;      /* exit status; 124: timeout(1) ended it */
	double secs;   /* how long it ran */
	char err[16384], out[262144]; /* the exporter's --once page is long */
};

static void slurp(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t k = f ? fread(buf, 1, cap - 1, f) : 0;
	buf[k] = 0;
	if (f)
		fclose(f);
	unlink(path);
}

/* Run the shell command @fmt as @user ("root": as we are) with @user's primary group and, when
 * @member, the group sc-hostile; timeout(1) ends it after @secs seconds (exit 124). */
static void run_as(struct out *o, const char *user, int member, int secs, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void run_as(struct out *o, const char *user, int member, int secs, const char *fmt, ...)
{
	char args[4096], cmd[8192], eo[128], oo[128], pre[256] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	if (strcmp(user, "root")) {
		struct passwd *pw = getpwnam(user);
		ck_assert_ptr_nonnull(pw);
		snprintf(pre, sizeof(pre), "setpriv --reuid=%u --regid=%u %s%s ", pw->pw_uid, pw->pw_gid,
			 member ? "--groups=" : "--clear-groups", member ? GROUP : "");
	}
	snprintf(eo, sizeof(eo), "/tmp/sc-hostile-%d.err", (int)getpid());
	snprintf(oo, sizeof(oo), "/tmp/sc-hostile-%d.out", (int)getpid());
	snprintf(cmd, sizeof(cmd), "cd / && timeout -s KILL %d %ssh -c '%s' >%s 2>%s", secs, pre, args, oo, eo);
	double t0 = now_s();
	int st = system(cmd);
	o->secs = now_s() - t0;
	o->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (o->code == 137)
		o->code = 124; /* killed by timeout -s KILL */
	slurp(eo, o->err, sizeof(o->err));
	slurp(oo, o->out, sizeof(o->out));
}

static int lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

#define OK(o, what) \
	ck_assert_msg((o)->code == 0, "%s: exit %d after %.1f s\n%.800s%.800s", what, (o)->code, (o)->secs, (o)->out, (o)->err)
#define NO_HANG(o, what) \
	ck_assert_msg((o)->code != 124, "%s: still waiting after %.1f s (ended by timeout)\n%.800s%.800s", what, (o)->secs, (o)->out, (o)->err)

/* ---- processes as a user ---- */

/* Become @uid with primary group @gid and, when @member, the group as a supplementary one. */
static void become(uid_t uid, gid_t gid, int member)
{
	gid_t groups[1] = { gid_g };
	if (setgroups(member ? 1 : 0, groups) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
		_exit(90);
}

struct holder {
	pid_t pid;
	int go;   /* write end: the holder lets go (and exits) when it is closed */
};

/* Fork a process as (@uid, @gid, @member) that runs @fn(@arg), which holds something and returns
 * 0 when it does; the holder then writes one byte to the test and waits (at most 120 s) until
 * the test lets it go. Returns once the holder holds (fails the test if it did not within 20 s). */
static void hold_as(struct holder *h, uid_t uid, gid_t gid, int member, int (*fn)(const void *), const void *arg)
{
	int up[2], down[2];
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		alarm(120); /* a holder never outlives a test that forgot it */
		become(uid, gid, member);
		int rc = fn(arg);
		char c = rc ? 'E' : 'R';
		if (write(up[1], &c, 1) != 1)
			_exit(91);
		if (rc)
			_exit(92);
		char x;
		while (read(down[0], &x, 1) > 0)
			;
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	struct pollfd p = { up[0], POLLIN, 0 };
	/* waits for: the holder to say it holds its lock, slots or connections */
	int r = poll(&p, 1, 20000);
	char c = 0;
	ck_assert_msg(r == 1 && read(up[0], &c, 1) == 1 && c == 'R', "the holder did not get hold within 20 s");
	close(up[0]);
	h->pid = pid;
	h->go = down[1];
}

static void let_go(struct holder *h)
{
	if (h->pid <= 0)
		return;
	close(h->go);
	kill(h->pid, SIGKILL);
	waitpid(h->pid, NULL, 0);
	h->pid = 0;
}

struct lock_req {
	const char *path;
	int how;             /* LOCK_SH or LOCK_EX (flock), or F_RDLCK / F_WRLCK with ofd */
	int ofd;             /* 1: OFD byte-range lock of [start, start + len) */
	int64_t start, len;
	int create_mode;     /* create the file first with this mode (0: open an existing one) */
};

static int take_lock(const void *arg)
{
	const struct lock_req *q = arg;
	int fd = q->create_mode ? open(q->path, O_RDWR | O_CREAT | O_EXCL, q->create_mode)
				: open(q->path, (q->ofd && q->how == F_WRLCK) ? O_RDWR : O_RDONLY);
	if (fd < 0)
		return -1;
	if (q->create_mode)
		fchmod(fd, (mode_t)q->create_mode);
	if (!q->ofd)
		return flock(fd, q->how | LOCK_NB);
	struct flock fl = { .l_type = (short)q->how, .l_whence = SEEK_SET, .l_start = q->start, .l_len = q->len };
	return fcntl(fd, F_OFD_SETLK, &fl);
}

static int file_exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int file_exists(const char *fmt, ...)
{
	char p[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p, sizeof(p), fmt, ap);
	va_end(ap);
	struct stat st;
	return lstat(p, &st) == 0;
}

/* A group L3 store at base/g/@sub made by member A with one object: its digest into @digest. */
static void group_store(const char *sub, const char *extra, char digest[33])
{
	struct out o;
	run_as(&o, MA, 1, 60,
	       "%s l3 put %s/g/%s --mode 0660 --group " GROUP " %s --ns t --model m --state s --tokens 1,2,3 "
	       "--kind full_state --file %s/payload",
	       bin, base, sub, extra, base);
	OK(&o, "member A puts into its group store");
	const char *d = strstr(o.out, "digest ");
	ck_assert_ptr_nonnull(d);
	memcpy(digest, d + 7, 32);
	digest[32] = 0;
}

/* The digest `l3 put` prints for payload @file (into a scratch store). */
static void digest_of(const char *file, char digest[33])
{
	struct out o;
	run_as(&o, "root", 0, 60, "%s l3 put %s/scratch-digest --ns x --tokens 9 --kind full_state --file %s", bin, base,
	       file);
	OK(&o, "scratch put");
	const char *d = strstr(o.out, "digest ");
	ck_assert_ptr_nonnull(d);
	memcpy(digest, d + 7, 32);
	digest[32] = 0;
	shell("rm -rf %s/scratch-digest", base);
}



/* A payload of @bytes random bytes at @path whose digest's first two hex characters differ from
 * @avoid's (its object then goes into a subdirectory of its own); its digest into @dg. */
static void payload_apart(const char *path, int bytes, const char *avoid, char dg[33])
{
	for (int i = 0; i < 64; i++) {
		ck_assert_int_eq(shell("head -c %d /dev/urandom > %s && chmod 0644 %s", bytes, path, path), 0);
		digest_of(path, dg);
		if (strncmp(dg, avoid, 2))
			return;
	}
	ck_abort_msg("no payload apart from %.2s in 64 tries", avoid);
}

/* ---- the exporter, and scraping it ---- */

struct exporter_proc {
	pid_t pid;
	int port;
	int err_fd; /* its stderr (read end) */
};

/* Start `stagecache exporter ARGS --listen 127.0.0.1:0` as root; returns once it printed where it
 * listens (fails the test if it did not within 20 s). */
static void exporter_start(struct exporter_proc *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void exporter_start(struct exporter_proc *x, const char *fmt, ...)
{
	char args[2048], cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "exec %s exporter %s --listen 127.0.0.1:0", bin, args);
	int out[2], err[2];
	ck_assert_int_eq(pipe(out), 0);
	ck_assert_int_eq(pipe2(err, O_NONBLOCK), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		close(out[0]), close(err[0]);
		alarm(300);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(out[1]), close(err[1]);
	char buf[512];
	size_t n = 0;
	double end = now_s() + 20;
	x->pid = pid, x->port = 0, x->err_fd = err[0];
	/* waits for: the exporter's "listening on http://127.0.0.1:PORT/metrics" line */
	while (!x->port && now_s() < end && n < sizeof(buf) - 1) {
		struct pollfd p = { out[0], POLLIN, 0 };
		if (poll(&p, 1, 1000) != 1)
			continue;
		ssize_t r = read(out[0], buf + n, sizeof(buf) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = 0;
		const char *l = strstr(buf, "listening on http://127.0.0.1:");
		if (l && strchr(l, '\n'))
			x->port = atoi(l + strlen("listening on http://127.0.0.1:"));
	}
	close(out[0]);
	ck_assert_msg(x->port > 0, "the exporter did not say where it listens within 20 s: %s", buf);
}

/* Stop it with SIGTERM: its exit status; fails the test unless it exits within @secs seconds. */
static int exporter_stop(struct exporter_proc *x, int secs, char *err, size_t cap)
{
	kill(x->pid, SIGTERM);
	int st = 0;
	double end = now_s() + secs;
	pid_t r = 0;
	/* waits for: the exporter to exit after SIGTERM (polled every 10 ms, at most @secs s) */
	while ((r = waitpid(x->pid, &st, WNOHANG)) == 0 && now_s() < end) {
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	if (r == 0) {
		kill(x->pid, SIGKILL);
		waitpid(x->pid, &st, 0);
	}
	size_t n = 0;
	ssize_t k;
	while (err && n < cap - 1 && (k = read(x->err_fd, err + n, cap - 1 - n)) > 0)
		n += (size_t)k;
	if (err)
		err[n] = 0;
	close(x->err_fd);
	ck_assert_msg(r == x->pid, "the exporter did not exit within %d s of SIGTERM", secs);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* GET /metrics from source address @from (127.0.0.x) within @secs seconds: 0 and the reply in
 * @buf, or -1 (refused, reset, or no whole reply in time). */
static int scrape(int port, const char *from, int secs, char *buf, size_t cap)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, from, &src.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
	struct timeval tv = { secs, 0 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	static const char req[] = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
	if (bind(s, (struct sockaddr *)&src, sizeof(src)) || connect(s, (struct sockaddr *)&dst, sizeof(dst)) ||
	    write(s, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
		close(s);
		return -1;
	}
	size_t n = 0;
	double end = now_s() + secs;
	ssize_t r = 0;
	while (n < cap - 1 && now_s() < end && (r = read(s, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(s);
	return r == 0 && strstr(buf, "200 OK") ? 0 : -1;
}

/* Spawn @argv-like shell command @cmd as root and wait for it (at most @secs s): its exit status
 * and its peak resident set in KiB (itself and what it waited for). */
static int run_rss(const char *cmd, int secs, long *maxrss_kib)
{
	char full[4096];
	snprintf(full, sizeof(full), "exec timeout -s KILL %d %s >/dev/null 2>&1", secs, cmd);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", full, (char *)NULL);
		_exit(127);
	}
	int st;
	struct rusage ru;
	ck_assert_int_eq(wait4(pid, &st, 0, &ru), pid);
	*maxrss_kib = ru.ru_maxrss;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ================= 1: a symlinked subdirectory steers root's writes and deletes ================= */

START_TEST(member_links_objects_subdir_to_a_root_only_directory)
{
	NEED_READY();
	char dg[33], rdg[33], store[256], secret[256], pay[256];
	struct out o;
	group_store("l3-link", "", dg);
	snprintf(store, sizeof(store), "%s/g/l3-link", base);
	snprintf(pay, sizeof(pay), "%s/rootpayload1", base);
	payload_apart(pay, 30000, dg, rdg);
	/* a root-only directory holding what reconciliation would take: a stale temp file and a file
	 * named like an object with no valid header */
	snprintf(secret, sizeof(secret), "%s/secret1", base);
	ck_assert_int_eq(shell("mkdir -m 0700 %s && echo keep > %s/.tmp-h.1.0000abcd.0 && "
			       "touch -d '2 hours ago' %s/.tmp-h.1.0000abcd.0 && echo not-an-object > %s/%s.sc3",
			       secret, secret, secret, secret, rdg), 0);
	/* member B replaces the missing objects/XX of root's object by a link to it */
	run_as(&o, MB, 1, 20, "ln -s %s %s/objects/%.2s", secret, store, rdg);
	OK(&o, "member plants the link");
	/* root puts its object (the open reconciles the store), verifies, runs the janitor */
	run_as(&o, "root", 0, 30, "%s l3 put %s --mode 0660 --group " GROUP " --ns r --tokens 5,6 --kind full_state --file %s",
	       bin, store, pay);
	NO_HANG(&o, "root's put");
	ck_assert_msg(o.code == 0 || strstr(o.err, "objects/"), "a failed put names the planted link:\n%.1000s", o.err);
	run_as(&o, "root", 0, 30, "%s l3 janitor %s --full --mode 0660 --group " GROUP, bin, store);
	NO_HANG(&o, "root's janitor");
	run_as(&o, "root", 0, 30, "%s l3 verify %s", bin, store);
	NO_HANG(&o, "root's verify");
	/* the root-only directory is exactly as it was: nothing written, removed or moved */
	ck_assert_msg(shell("test \"$(ls -A %s | sort | tr '\\n' ' ')\" = '.tmp-h.1.0000abcd.0 %s.sc3 '", secret, rdg) == 0,
		      "root wrote, removed or moved files through the member's link");
	ck_assert_int_eq(shell("grep -qx keep %s/.tmp-h.1.0000abcd.0 && grep -qx not-an-object %s/%s.sc3", secret, secret,
			       rdg), 0);
	ck_assert_int_ne(shell("ls %s/quarantine | grep -q %s", store, rdg), 0);
}
END_TEST

/* ================= 2: a predictable file in world-writable /dev/shm ================= */

static void state_files(char *out, size_t cap)
{
	FILE *p = popen("ls /dev/shm | grep '^stagecache-l3\\..*\\.state$' | sort", "r");
	size_t k = p ? fread(out, 1, cap - 1, p) : 0;
	out[k] = 0;
	if (p)
		pclose(p);
}

START_TEST(outsider_plants_and_locks_the_per_host_state_file)
{
	NEED_READY();
	char dg[33], store[256], real[PATH_MAX], path[PATH_MAX + 64];
	static char before[1 << 20], after[1 << 20]; /* every state file in /dev/shm */
	struct out o;
	group_store("l3-shm", "--shared --host hx2", dg);
	snprintf(store, sizeof(store), "%s/g/l3-shm", base);
	/* a store made before its state file's name was keyed: DIR/shared holds only the note */
	run_as(&o, MA, 1, 20, "printf \"stagecache L3 directory shared by several hosts\\n\" > %s/shared", store);
	OK(&o, "member writes an old DIR/shared");
	/* its per-host counters would be at this name: the host and the directory's path hashed */
	ck_assert_ptr_nonnull(realpath(store, real));
	XXH64_state_t *hs = XXH64_createState();
	XXH64_reset(hs, 0);
	XXH64_update(hs, "hx2", 4);
	XXH64_update(hs, real, strlen(real));
	snprintf(path, sizeof(path), "/dev/shm/stagecache-l3.%016llx.state", (unsigned long long)XXH64_digest(hs));
	XXH64_freeState(hs);
	unlink(path); /* as after a reboot */
	/* a user outside the group makes it first, world-writable, and holds a lock on it */
	struct holder h = { 0 };
	struct lock_req q = { .path = path, .how = LOCK_EX, .create_mode = 0666 };
	hold_as(&h, uid_o, gid_o, 0, take_lock, &q);
	state_files(before, sizeof(before));
	run_as(&o, "root", 0, 15, "%s l3 stats %s --host hx2", bin, store);
	NO_HANG(&o, "root's l3 stats");
	OK(&o, "root's l3 stats");
	run_as(&o, "root", 0, 15, "%s l3 put %s --host hx2 --mode 0660 --group " GROUP
	       " --ns r --tokens 8 --kind full_state --file %s/payload", bin, store, base);
	NO_HANG(&o, "root's l3 put");
	OK(&o, "root's l3 put");
	let_go(&h);
	/* root never used the outsider's file, and left no state file of its own behind */
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_msg(st.st_size == 0 && st.st_uid == uid_o, "root wrote into the outsider's file (%lld bytes)",
		      (long long)st.st_size);
	/* (an open may remove other files: those of stores that are gone) */
	state_files(after, sizeof(after));
	for (char *line = strtok(after, "\n"); line; line = strtok(NULL, "\n"))
		ck_assert_msg(strstr(before, line), "root left a state file of its own: %s", line);
	unlink(path);
}
END_TEST

/* ================= 3: a read-only opener stops every attach ================= */

START_TEST(reader_without_write_locks_every_slot)
{
	NEED_READY();
	struct out o;
	char name[64], file[256];
	/* a mode that lets others read but not write is refused, and says why */
	snprintf(name, sizeof(name), "%s-3a", tag);
	run_as(&o, "root", 0, 30, "%s create %s --dir %s --size 16M --mode 0644", bin, name, base);
	ck_assert_msg(o.code != 0 && lines(o.err) == 1 && strstr(o.err, "0644") && strstr(o.err, "read"),
		      "create --mode 0644: exit %d\n%.800s%.800s", o.code, o.out, o.err);
	/* and through the C API: every mode that grants read without write, nothing left behind */
	static const uint32_t refused[] = { 0644, 0640, 0604, 0664, 0654 };
	for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		struct sc_arena_opts co = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .dir = base, .mode = refused[i] };
		struct sc_arena *ca = NULL;
		ck_assert_msg(sc_arena_create(name, &co, &ca) == -EINVAL && !ca, "sc_arena_create mode %04o", refused[i]);
		ck_assert(!file_exists("%s/stagecache.%s", base, name));
	}
	{
		struct sc_arena_opts co = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .dir = base, .mode = 0660 };
		struct sc_arena *ca = NULL;
		ck_assert_int_eq(sc_arena_create(name, &co, &ca), 0);
		sc_arena_close(ca);
		ck_assert_int_eq(sc_arena_destroy(base, name), 0);
	}
	/* an arena that was given such a mode anyway (chmod) while a user who may only read it holds a
	 * read lock on every slot's byte */
	snprintf(name, sizeof(name), "%s-3b", tag);
	snprintf(file, sizeof(file), "%s/stagecache.%s", base, name);
	run_as(&o, "root", 0, 30, "%s create %s --dir %s --size 16M && chmod 0644 %s", bin, name, base, file);
	OK(&o, "root creates an arena");
	struct holder h = { 0 };
	struct lock_req q = { .path = file, .how = F_RDLCK, .ofd = 1, .start = SHM_LOCK_BASE, .len = 256 };
	hold_as(&h, uid_o, gid_o, 0, take_lock, &q);
	run_as(&o, "root", 0, 30, "%s stats %s --dir %s", bin, name, base);
	ck_assert_msg(o.code == 1 && lines(o.err) == 1 && !strstr(o.err, "every reader slot is taken") &&
			      strstr(o.err, "0644"),
		      "stats names the real cause: exit %d\n%.1000s", o.code, o.err);
	run_as(&o, "root", 0, 30, "%s info %s --dir %s", bin, name, base);
	OK(&o, "info without a slot");
	ck_assert_msg(strstr(o.out, "0644") && strstr(o.out, "lock"), "info names the mode and the locks:\n%s", o.out);
	let_go(&h);
}
END_TEST

/* ================= 4: one member holds every reader slot ================= */

struct grab {
	const char *name, *dir, *count_file;
	uid_t owner;
	int raw;         /* 1: lock every slot's byte directly, without the library */
	const char *path;
};

static int grab_slots(const void *arg)
{
	const struct grab *g = arg;
	int n = 0;
	if (g->raw) {
		int fd = open(g->path, O_RDWR);
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHM_LOCK_BASE, .l_len = 256 };
		if (fd < 0 || fcntl(fd, F_OFD_SETLK, &fl))
			return -1;
		n = 256;
	} else {
		struct sc_arena_open_opts oo = { .dir = g->dir, .owner_uid = g->owner };
		struct sc_arena *a;
		while (n < 300 && sc_arena_open_with(g->name, &oo, &a) == 0)
			n++;
	}
	FILE *f = fopen(g->count_file, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", n);
	fclose(f);
	return 0;
}

/* What grab_slots wrote: how many handles it holds. */
static int slots_taken(const char *count_file)
{
	char got[32] = "";
	FILE *f = fopen(count_file, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(got, sizeof(got), f));
	fclose(f);
	return atoi(got);
}

START_TEST(member_takes_every_reader_slot)
{
	NEED_READY();
	struct out o;
	char name[64], dir[256], cnt[256], file[256];
	snprintf(name, sizeof(name), "%s-4", tag);
	snprintf(dir, sizeof(dir), "%s/g", base);
	snprintf(cnt, sizeof(cnt), "%s/g/slots-taken", base);
	snprintf(file, sizeof(file), "%s/stagecache.%s", dir, name);
	run_as(&o, MA, 1, 30, "%s create %s --dir %s --size 16M --mode 0660 --group " GROUP, bin, name, dir);
	OK(&o, "member A creates");
	/* member B attaches as often as the library lets it, and holds every handle */
	struct holder h = { 0 };
	struct grab g = { .name = name, .dir = dir, .count_file = cnt, .owner = uid_a };
	hold_as(&h, uid_b, gid_g, 1, grab_slots, &g);
	/* B got three quarters of the 256 slots (the default for an arena its group may open) */
	int got = slots_taken(cnt);
	ck_assert_msg(got == 192, "member B attached %d times", got);
	/* B's next attach names the limit */
	run_as(&o, MB, 1, 30, "%s stats %s --dir %s --owner " MA, bin, name, dir);
	ck_assert_msg(o.code == 1 && lines(o.err) == 1 && strstr(o.err, "192") && strstr(o.err, "one user may"),
		      "B's stats over the limit: exit %d\n%.1000s", o.code, o.err);
	run_as(&o, MA, 1, 30, "%s put %s --dir %s --model m --state s --tokens 1,2 --kind full_state --file %s/payload",
	       bin, name, dir, base);
	OK(&o, "the creator's worker attaches while B holds what it could");
	run_as(&o, MA, 1, 30, "%s info %s --dir %s", bin, name, dir);
	OK(&o, "info");
	ck_assert_msg(strstr(o.out, "attached:       192 of 256 slots, at most 192 per user"), "info:\n%s", o.out);
	run_as(&o, MA, 1, 60, "%s fsck %s --dir %s", bin, name, dir);
	OK(&o, "fsck");
	let_go(&h);
	/* a limit given at creation */
	char name2[64];
	snprintf(name2, sizeof(name2), "%s-4b", tag);
	run_as(&o, MA, 1, 30, "%s create %s --dir %s --size 16M --mode 0660 --group " GROUP " --max-slots-per-user 3",
	       bin, name2, dir);
	OK(&o, "member A creates with --max-slots-per-user 3");
	g.name = name2;
	hold_as(&h, uid_b, gid_g, 1, grab_slots, &g);
	got = slots_taken(cnt);
	ck_assert_msg(got == 3, "member B attached %d times to an arena of 3 per user", got);
	let_go(&h);
	run_as(&o, MA, 1, 30, "%s destroy %s --dir %s", bin, name2, dir);
	OK(&o, "destroy");
	g.name = name;
	/* without the library: B locks every slot's byte itself; info still describes the arena and
	 * says so, and fsck tells why it cannot check the index instead of waiting or failing blind */
	g.raw = 1, g.path = file;
	hold_as(&h, uid_b, gid_g, 1, grab_slots, &g);
	run_as(&o, MA, 1, 30, "%s info %s --dir %s", bin, name, dir);
	OK(&o, "info while every slot's lock is held outside the library");
	ck_assert_msg(strstr(o.out, "lock"), "info says the slots are locked:\n%s", o.out);
	run_as(&o, MA, 1, 60, "%s fsck %s --dir %s", bin, name, dir);
	NO_HANG(&o, "fsck");
	ck_assert_msg(strstr(o.out, "lock") || strstr(o.err, "lock"), "fsck says why:\n%.800s%.800s", o.out, o.err);
	let_go(&h);
}
END_TEST

/* The same through the C API: the limit, its bounds, -EDQUOT, and a description without a slot
 * while every slot is held (one by a raw lock on its byte). */
START_TEST(one_user_reaches_its_slot_limit_through_the_api)
{
	NEED_READY();
	char name[64];
	snprintf(name, sizeof(name), "%s-4c", tag);
	struct sc_arena_opts co = { .size_bytes = 16u << 20, .huge = SC_HUGE_OFF, .dir = base, .reader_slots = 4,
				    .slots_per_user = 5 };
	struct sc_arena *a = NULL, *h[4] = { 0 };
	ck_assert_int_eq(sc_arena_create(name, &co, &a), -EINVAL); /* more than there are slots */
	ck_assert(!file_exists("%s/stagecache.%s", base, name));
	co.slots_per_user = 2;
	ck_assert_int_eq(sc_arena_create(name, &co, &a), 0);
	struct sc_arena_open_opts oo = { .dir = base };
	ck_assert_int_eq(sc_arena_open_with(name, &oo, &h[0]), 0);
	ck_assert_int_eq(sc_arena_open_with(name, &oo, &h[1]), -EDQUOT);
	ck_assert_ptr_null(h[1]);
	ck_assert_str_eq(sc_strerror(-EDQUOT), "this user's processes hold as many of the arena's reader slots as one user may");
	/* another user takes the rest: one slot through the library, the last by locking its byte */
	struct holder hb = { 0 };
	char cnt[256], file[256];
	snprintf(cnt, sizeof(cnt), "%s/g/slots-4c", base);
	snprintf(file, sizeof(file), "%s/stagecache.%s", base, name);
	ck_assert_int_eq(chmod(file, 0660), 0);
	ck_assert_int_eq(chown(file, (uid_t)-1, gid_g), 0);
	struct grab g = { .name = name, .dir = base, .count_file = cnt, .owner = 0 };
	hold_as(&hb, uid_b, gid_g, 1, grab_slots, &g);
	ck_assert_int_eq(slots_taken(cnt), 2);
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_inspect(name, &oo, &in), 0);
	ck_assert_uint_eq(in.attached_count, 4);
	ck_assert_uint_eq(in.slots_per_user, 2);
	ck_assert_uint_eq(in.locked_slots, 0);
	let_go(&hb);
	sc_arena_close(h[0]);
	int fd = open(file, O_RDWR);
	ck_assert_int_ge(fd, 0);
	for (uint32_t i = 0; i < 4; i++) { /* every byte but that of a's own slot */
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHM_LOCK_BASE + i, .l_len = 1 };
		if (i != (sc_arena_token(a) & 0xffffu))
			ck_assert_int_eq(fcntl(fd, F_OFD_SETLK, &fl), 0);
	}
	ck_assert_int_eq(sc_arena_inspect(name, &oo, &in), 0);
	/* every slot is held; h[0]'s (released: FREE) shows as locked, B's (LIVE, its holder killed,
	 * not reaped yet) as attached, since liveness is the lock and we now hold their bytes */
	ck_assert_uint_eq(in.attached_count + in.locked_slots, 4);
	ck_assert_uint_ge(in.locked_slots, 1);
	ck_assert_int_eq(sc_arena_open_with(name, &oo, &h[1]), -EUSERS);
	close(fd);
	struct sc_arena_info ai;
	ck_assert_int_eq(sc_arena_info(a, &ai), 0);
	ck_assert_uint_eq(ai.locked_slots, 0);
	sc_arena_close(a);
	ck_assert_int_eq(sc_arena_destroy(base, name), 0);
}
END_TEST

/* ================= 5: blocking locks without a bound ================= */

START_TEST(member_holds_the_store_locks)
{
	NEED_READY();
	char dg[33], store[256], path[300], name[64];
	struct out o;
	group_store("l3-locks", "", dg);
	snprintf(store, sizeof(store), "%s/g/l3-locks", base);
	snprintf(name, sizeof(name), "%s-5", tag);
	run_as(&o, "root", 0, 30, "%s create %s --size 16M --huge off", bin, name);
	OK(&o, "root creates an arena");
	/* a shared lock on DIR/state, by a member who may read it */
	snprintf(path, sizeof(path), "%s/state", store);
	struct holder h = { 0 };
	struct lock_req q = { .path = path, .how = LOCK_SH };
	hold_as(&h, uid_b, gid_g, 1, take_lock, &q);
	run_as(&o, "root", 0, 20, "%s l3 stats %s", bin, store);
	NO_HANG(&o, "l3 stats");
	OK(&o, "l3 stats");
	struct exporter_proc x;
	exporter_start(&x, "%s --l3 %s", name, store);
	char buf[65536], err[8192], want[512];
	ck_assert_msg(scrape(x.port, "127.0.0.1", 10, buf, sizeof(buf)) == 0, "the exporter's scrape did not answer:\n%s", buf);
	snprintf(want, sizeof(want), "stagecache_l3_up{dir=\"%s\"} 1", store);
	ck_assert_msg(strstr(buf, want), "want %s in:\n%.1000s", want, buf);
	exporter_stop(&x, 10, err, sizeof(err));
	let_go(&h);
	/* an exclusive lock on DIR/lock (what reconciliation takes) */
	snprintf(path, sizeof(path), "%s/lock", store);
	q = (struct lock_req){ .path = path, .how = LOCK_EX };
	hold_as(&h, uid_b, gid_g, 1, take_lock, &q);
	run_as(&o, "root", 0, 20, "%s restore %s %s --model m --state s --ns t --tokens 1,2,3", bin, name, store);
	NO_HANG(&o, "restore");
	OK(&o, "restore");
	run_as(&o, "root", 0, 20, "%s l3 put %s --ns u --tokens 4 --kind full_state --file %s/payload", bin, store, base);
	NO_HANG(&o, "l3 put");
	let_go(&h);
	run_as(&o, "root", 0, 30, "%s destroy %s", bin, name);
}
END_TEST

/* ================= 6: a FIFO planted under an object's name ================= */

START_TEST(member_plants_a_fifo_under_an_objects_name)
{
	NEED_READY();
	char dg[33], rdg[33], store[256], pay[256], name[64];
	struct out o;
	group_store("l3-fifo", "", dg);
	snprintf(store, sizeof(store), "%s/g/l3-fifo", base);
	snprintf(pay, sizeof(pay), "%s/rootpayload6", base);
	payload_apart(pay, 25000, dg, rdg);
	run_as(&o, MB, 1, 20, "umask 007 && mkdir %s/objects/%.2s && mkfifo %s/objects/%.2s/%s.sc3", store, rdg, store, rdg,
	       rdg);
	OK(&o, "member plants a FIFO");
	run_as(&o, "root", 0, 20, "%s l3 put %s --mode 0660 --group " GROUP " --ns r --tokens 7 --kind full_state --file %s",
	       bin, store, pay);
	NO_HANG(&o, "l3 put");
	OK(&o, "l3 put");
	snprintf(name, sizeof(name), "%s-6", tag);
	run_as(&o, "root", 0, 30, "%s create %s --size 16M --huge off && %s restore %s %s --model m --state s --ns r "
	       "--tokens 7 --out %s/restored6 && cmp %s %s/restored6", bin, name, bin, name, store, base, pay, base);
	OK(&o, "the object put over the FIFO restores");
	run_as(&o, "root", 0, 30, "%s destroy %s", bin, name);
}
END_TEST

/* ================= 7: restore allocates what the object header says ================= */

#include "../lib/l3/format.h"

START_TEST(member_plants_an_object_whose_header_claims_512_MiB)
{
	NEED_READY();
	char dg[33], store[256], obj[512], craft[256], name[64];
	struct out o;
	group_store("l3-big", "", dg);
	snprintf(store, sizeof(store), "%s/g/l3-big", base);
	snprintf(obj, sizeof(obj), "%s/objects/%.2s/%s.sc3", store, dg, dg);
	/* the header of the real object, rewritten to claim 512 MiB (checksum and all), the file then
	 * sparse to that size: nothing about it is wrong until its last byte is hashed */
	uint8_t block[L3_HDR_BLOCK];
	int fd = open(obj, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, block, sizeof(block), 0), (ssize_t)sizeof(block));
	close(fd);
	uint64_t big = 512ull << 20, c;
	memcpy(block + offsetof(struct l3_obj_hdr, section_bytes), &big, 8);
	memcpy(block + offsetof(struct l3_obj_hdr, payload_bytes), &big, 8);
	c = l3_hdr_check(block);
	memcpy(block + offsetof(struct l3_obj_hdr, check), &c, 8);
	struct l3_obj_hdr hv;
	ck_assert_int_eq(l3_hdr_parse(block, L3_HDR_BLOCK + big, &hv), 0);
	snprintf(craft, sizeof(craft), "%s/craft7", base);
	fd = open(craft, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
	close(fd);
	run_as(&o, MB, 1, 20, "cp %s %s.new && truncate -s %llu %s.new && mv %s.new %s", craft, obj,
	       (unsigned long long)(L3_HDR_BLOCK + big), obj, obj, obj);
	OK(&o, "member plants the object");
	/* root restores that prefix into an arena whose heap cannot hold it */
	snprintf(name, sizeof(name), "%s-7", tag);
	run_as(&o, "root", 0, 30, "%s create %s --size 16M --huge off", bin, name);
	OK(&o, "create");
	char cmd[1024];
	long rss = 0;
	snprintf(cmd, sizeof(cmd), "%s restore %s %s --model m --state s --ns t --tokens 1,2,3", bin, name, store);
	int rc = run_rss(cmd, 60, &rss);
	ck_assert_msg(rc != 124 && rc != 137, "restore did not end within 60 s");
	ck_assert_msg(rss < 128 * 1024, "one restore used %ld MiB of memory for a planted header", rss / 1024);
	run_as(&o, "root", 0, 30, "%s destroy %s", bin, name);
}
END_TEST

/* ================= 8: the exporter falls to slow clients ================= */

struct slow {
	int n;            /* connections */
	int port;
	double secs;      /* how long to trickle */
};

/* 1100 connections from 127.0.0.1, each sending a request line and then a header line every 2 s,
 * never ending its headers. */
static int slow_clients(const void *arg)
{
	const struct slow *s = arg;
	struct rlimit rl = { 4096, 4096 };
	setrlimit(RLIMIT_NOFILE, &rl);
	static int fds[2048];
	int n = 0;
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons((uint16_t)s->port) };
	inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
	for (int i = 0; i < s->n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			break;
		connect(fd, (struct sockaddr *)&dst, sizeof(dst));
		fds[n++] = fd;
	}
	if (n < s->n)
		return -1;
	/* say we are there (the holder's byte), then trickle in a child of ours */
	pid_t p = fork();
	if (p != 0)
		return p < 0 ? -1 : 0;
	double end = now_s() + s->secs;
	for (int round = 0; now_s() < end; round++) {
		for (int i = 0; i < n; i++) {
			static const char first[] = "GET /metrics HTTP/1.1\r\n", more[] = "X-Slow: 1\r\n";
			(void)!write(fds[i], round ? more : first, round ? sizeof(more) - 1 : sizeof(first) - 1);
		}
		/* the trickle's period: this sleep is the attack, not a wait for a condition */
		struct timespec ts = { 2, 0 };
		nanosleep(&ts, NULL);
	}
	_exit(0);
}

START_TEST(slow_clients_starve_the_exporter)
{
	NEED_READY();
	struct out o;
	char name[64];
	snprintf(name, sizeof(name), "%s-8", tag);
	run_as(&o, "root", 0, 30, "%s create %s --size 16M --huge off", bin, name);
	OK(&o, "create");
	struct exporter_proc x;
	exporter_start(&x, "%s", name);
	struct holder h = { 0 };
	struct slow s = { .n = 1100, .port = x.port, .secs = 40 };
	hold_as(&h, 0, 0, 0, slow_clients, &s);
	/* scrapes from another loopback address while the slow clients hold on */
	int good = 0;
	char buf[65536], err[65536];
	for (int i = 0; i < 5; i++)
		good += scrape(x.port, "127.0.0.2", 5, buf, sizeof(buf)) == 0;
	let_go(&h);
	exporter_stop(&x, 10, err, sizeof(err));
	ck_assert_msg(good == 5, "%d of 5 scrapes answered while 1100 slow clients were connected", good);
	ck_assert_msg(lines(err) <= 10, "the exporter wrote %d lines to stderr:\n%.1000s", lines(err), err);
	run_as(&o, "root", 0, 30, "%s destroy %s", bin, name);
}
END_TEST

/* ================= 9: a member truncates the creator's arena ================= */

struct worker9 {
	const char *name, *dir;
	int ctl;          /* the worker reads one byte here before it tries again */
	int res;          /* and writes its three results here */
};

START_TEST(member_truncates_the_creators_arena)
{
	NEED_READY();
	struct out o;
	char name[64], dir[256], file[300];
	snprintf(name, sizeof(name), "%s-9", tag);
	snprintf(dir, sizeof(dir), "%s/g/m1770", base);
	snprintf(file, sizeof(file), "%s/stagecache.%s", dir, name);
	/* a directory like a 1770 hugetlbfs mount: members create, nobody removes another's file */
	ck_assert_int_eq(shell("mkdir %s && chgrp " GROUP " %s && chmod 1770 %s", dir, dir, dir), 0);
	run_as(&o, MA, 1, 30, "%s create %s --dir %s --size 16M --mode 0660 --group " GROUP, bin, name, dir);
	OK(&o, "member A creates");
	/* A's worker: attached, with a stage, waiting */
	int ctl[2], res[2];
	ck_assert_int_eq(pipe(ctl), 0);
	ck_assert_int_eq(pipe(res), 0);
	pid_t w = fork();
	ck_assert_int_ge(w, 0);
	if (w == 0) {
		close(ctl[1]), close(res[0]);
		alarm(120);
		become(uid_a, gid_g, 1);
		struct sc_arena_open_opts oo = { .dir = dir };
		struct sc_arena *a;
		struct sc_stage *st;
		int r[4] = { sc_arena_open_with(name, &oo, &a), 0, 0, 0 };
		r[1] = r[0] ? r[0] : sc_stage_open(a, "m", "s", &st);
		(void)!write(res[1], r, 2 * sizeof(int));
		char c;
		if (read(ctl[0], &c, 1) != 1 || r[1])
			_exit(3);
		/* after the truncation: a new stage, an admission, the arena's description */
		struct sc_stage *st2 = NULL;
		static uint8_t pl[4096];
		int32_t t[3] = { 1, 2, 3 };
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pl, NULL }, .sec_len = { sizeof(pl), 0 } };
		struct sc_arena_info in;
		r[0] = sc_stage_open(a, "m2", "s", &st2);
		r[1] = sc_l2_admit(st, "", t, 3, sc_digest_of(pl, sizeof(pl)), &p, SC_ORIGIN_DIRECT);
		r[2] = sc_arena_info(a, &in);
		(void)!write(res[1], r, 3 * sizeof(int));
		sc_arena_close(a); /* detaching touches nothing that is gone */
		_exit(0);
	}
	close(ctl[0]), close(res[1]);
	int r[3] = { -1, -1, -1 };
	ck_assert_int_eq(read(res[0], r, 2 * sizeof(int)), (ssize_t)(2 * sizeof(int)));
	ck_assert_msg(r[0] == 0 && r[1] == 0, "the worker attached: %d %d", r[0], r[1]);
	/* member B truncates A's arena */
	run_as(&o, MB, 1, 20, "truncate -s 0 %s", file);
	OK(&o, "member B truncates the file");
	ck_assert_int_eq(write(ctl[1], "g", 1), 1);
	ssize_t got = read(res[0], r, 3 * sizeof(int));
	int st;
	ck_assert_int_eq(waitpid(w, &st, 0), w);
	ck_assert_msg(WIFEXITED(st), "A's worker died of signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	ck_assert_int_eq(got, (ssize_t)(3 * sizeof(int)));
	ck_assert_msg(r[0] == -EBADMSG && r[1] == -EBADMSG && r[2] == -EBADMSG,
		      "after the truncation: stage open %d, admit %d, info %d (want -EBADMSG)", r[0], r[1], r[2]);
	close(ctl[1]), close(res[0]);
	/* a new attach says what happened; destroy removes what cannot be opened; create works again */
	run_as(&o, MA, 1, 20, "%s stats %s --dir %s", bin, name, dir);
	ck_assert_msg(o.code == 1 && strstr(o.err, "truncated"), "stats: exit %d\n%.1000s", o.code, o.err);
	run_as(&o, MA, 1, 20, "%s destroy %s --dir %s", bin, name, dir);
	OK(&o, "destroy of the truncated file");
	ck_assert(!file_exists("%s", file));
	run_as(&o, MA, 1, 30, "%s create %s --dir %s --size 16M --mode 0660 --group " GROUP, bin, name, dir);
	OK(&o, "create again");
	/* cut to nothing and extended with zeroes: refused as an arena, and destroy removes it too */
	run_as(&o, MB, 1, 20, "truncate -s 0 %s && truncate -s 16M %s", file, file);
	OK(&o, "member B truncates and extends the file");
	run_as(&o, MA, 1, 20, "%s stats %s --dir %s", bin, name, dir);
	ck_assert_msg(o.code == 1 && strstr(o.err, "not a stagecache arena"), "stats: exit %d\n%.1000s", o.code, o.err);
	run_as(&o, MA, 1, 20, "%s destroy %s --dir %s", bin, name, dir);
	OK(&o, "destroy of the zeroed file");
	ck_assert(!file_exists("%s", file));
}
END_TEST

/* ================= 10: the group deployment from every interface ================= */

START_TEST(another_member_trusts_the_creator_everywhere)
{
	NEED_READY();
	struct out o;
	char name[64], dir[256];
	snprintf(name, sizeof(name), "%s-10", tag);
	snprintf(dir, sizeof(dir), "%s/g", base);
	run_as(&o, MA, 1, 30, "%s create %s --dir %s --size 16M --mode 0660 --group " GROUP, bin, name, dir);
	OK(&o, "member A creates");
	run_as(&o, MB, 1, 30, "%s exporter %s --dir %s --owner " MA " --once", bin, name, dir);
	OK(&o, "member B's exporter trusting A");
	ck_assert_msg(strstr(o.out, "stagecache_up{arena=\""), "no stagecache_up:\n%.1000s", o.out);
	char want[256];
	snprintf(want, sizeof(want), "stagecache_up{arena=\"%s\"} 1", name);
	ck_assert_msg(strstr(o.out, want), "want %s", want);
	run_as(&o, MB, 1, 60,
	       "STAGECACHE_LIB=%s PYTHONPATH=%s PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c \"import stagecache; "
	       "a = stagecache.Arena.open(\\\"%s\\\", dir=\\\"%s\\\", owner=\\\"" MA "\\\"); print(a.info()[\\\"reader_slots\\\"] if "
	       "isinstance(a.info(), dict) else \\\"ok\\\"); a.close()\"",
	       libso, pydir, name, dir);
	OK(&o, "member B's Python trusting A");
	run_as(&o, MB, 1, 60,
	       "STAGECACHE_LIB=%s PYTHONPATH=%s PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c \"import stagecache; "
	       "stagecache.Arena.open(\\\"%s\\\", dir=\\\"%s\\\")\"",
	       libso, pydir, name, dir);
	ck_assert_msg(o.code != 0, "Python trusted another owner without being asked");
	run_as(&o, MA, 1, 20, "%s destroy %s --dir %s", bin, name, dir);
}
END_TEST

/* ================= 11: the exporter on a shared store ================= */

START_TEST(exporter_reads_a_shared_store)
{
	NEED_READY();
	struct out o;
	char dg[33], store[256], name[64], want[512];
	group_store("l3-exp", "--shared --host hx11", dg);
	snprintf(store, sizeof(store), "%s/g/l3-exp", base);
	snprintf(name, sizeof(name), "%s-11", tag);
	run_as(&o, "root", 0, 30, "%s create %s --size 16M --huge off", bin, name);
	OK(&o, "create");
	run_as(&o, "root", 0, 30, "%s exporter %s --l3 %s --once", bin, name, store);
	OK(&o, "exporter --once on a shared store");
	snprintf(want, sizeof(want), "stagecache_l3_up{dir=\"%s\"} 1", store);
	ck_assert_msg(strstr(o.out, want), "want %s in:\n%.1000s\n%.500s", want, o.out, o.err);
	run_as(&o, "root", 0, 30, "%s exporter %s --l3 %s/missing --once", bin, name, base);
	ck_assert_msg(o.code == 1 && strstr(o.err, "stagecache_l3_up 0") && !strstr(o.err, "(stagecache_up 0)"),
		      "the message names the L3 metric: %.1000s", o.err);
	run_as(&o, "root", 0, 30, "%s destroy %s", bin, name);
}
END_TEST

/* ================= smaller ================= */

START_TEST(member_plants_fifo_link_and_directory_verify_says_so)
{
	NEED_READY();
	char dg[33], store[256], h1[33], h2[33], h3[33];
	struct out o;
	group_store("l3-verify", "", dg);
	snprintf(store, sizeof(store), "%s/g/l3-verify", base);
	/* three names of objects in one subdirectory that holds none yet */
	const char *sub = dg[0] == 'e' ? "f0" : "e0";
	snprintf(h1, sizeof(h1), "%s%s", sub, "111111111111111111111111111111");
	snprintf(h2, sizeof(h2), "%s%s", sub, "222222222222222222222222222222");
	snprintf(h3, sizeof(h3), "%s%s", sub, "333333333333333333333333333333");
	run_as(&o, MB, 1, 20, "umask 007 && mkdir -p %s/objects/%s && mkfifo %s/objects/%s/%s.sc3 && "
	       "ln -s /etc/passwd %s/objects/%s/%s.sc3 && mkdir %s/objects/%s/%s.sc3",
	       store, sub, store, sub, h1, store, sub, h2, store, sub, h3);
	OK(&o, "member plants them");
	run_as(&o, "root", 0, 30, "%s l3 verify %s", bin, store);
	NO_HANG(&o, "verify");
	ck_assert_msg(o.code == 1 && strstr(o.out, h1) && strstr(o.out, h2) && strstr(o.out, h3),
		      "verify: exit %d\n%.800s%.800s", o.code, o.out, o.err);
}
END_TEST

START_TEST(verify_gives_what_it_writes_the_stores_mode)
{
	NEED_READY();
	char dg[33], store[256];
	struct out o;
	group_store("l3-vmode", "", dg);
	snprintf(store, sizeof(store), "%s/g/l3-vmode", base);
	/* a member rewrites the object's payload: verify quarantines it and writes a record */
	run_as(&o, MB, 1, 20, "printf XXXX | dd of=%s/objects/%.2s/%s.sc3 bs=1 seek=5000 conv=notrunc 2>/dev/null", store, dg, dg);
	OK(&o, "member damages an object");
	run_as(&o, "root", 0, 30, "%s l3 verify %s --mode 0660 --group " GROUP, bin, store);
	ck_assert_msg(o.code == 1, "verify: exit %d\n%.800s%.800s", o.code, o.out, o.err);
	ck_assert_msg(shell("test -z \"$(find %s -type f \\( ! -perm 0660 -o ! -group " GROUP " \\))\"", store) == 0,
		      "verify left files without the store's mode and group");
	ck_assert_int_eq(shell("test -n \"$(ls %s/quarantine)\"", store), 0);
}
END_TEST

/* Find @needle (the first 64 bytes of base/payload) in arena file @path and flip a byte of it,
 * as the member running this. */
static int scribble_payload(const void *arg)
{
	const char *path = arg;
	char pp[256];
	snprintf(pp, sizeof(pp), "%s/payload", base);
	uint8_t needle[64];
	int pfd = open(pp, O_RDONLY);
	if (pfd < 0 || read(pfd, needle, sizeof(needle)) != (ssize_t)sizeof(needle))
		return -1;
	close(pfd);
	int fd = open(path, O_RDWR);
	struct stat st;
	if (fd < 0 || fstat(fd, &st))
		return -1;
	uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -1;
	uint8_t *hit = memmem(m, (size_t)st.st_size, needle, sizeof(needle));
	if (!hit)
		return -1;
	hit[100] ^= 0x5a;
	munmap(m, (size_t)st.st_size);
	close(fd);
	return 0;
}

START_TEST(member_scribbles_a_payload_copies_say_so)
{
	NEED_READY();
	struct out o;
	char name[64], dir[256], file[300];
	snprintf(name, sizeof(name), "%s-12", tag);
	snprintf(dir, sizeof(dir), "%s/g", base);
	snprintf(file, sizeof(file), "%s/stagecache.%s", dir, name);
	run_as(&o, MA, 1, 30, "%s create %s --dir %s --size 16M --mode 0660 --group " GROUP " && %s put %s --dir %s "
	       "--model m --state s --tokens 1,2,3 --kind full_state --file %s/payload", bin, name, dir, bin, name, dir, base);
	OK(&o, "member A creates and puts");
	struct holder h = { 0 };
	hold_as(&h, uid_b, gid_g, 1, scribble_payload, file);
	let_go(&h);
	run_as(&o, MA, 1, 30, "%s get %s --dir %s --model m --state s --tokens 1,2,3 --out %s/g/got12", bin, name, dir, base);
	ck_assert_msg(o.code == 1 && strstr(o.err, "digest"), "get --out of a scribbled payload: exit %d\n%.800s%.800s", o.code, o.out,
		      o.err);
	/* the library's copy too */
	pid_t w = fork();
	ck_assert_int_ge(w, 0);
	if (w == 0) {
		become(uid_a, gid_g, 1);
		struct sc_arena_open_opts oo = { .dir = dir };
		struct sc_arena *a;
		struct sc_stage *st;
		static uint8_t buf[65536];
		int32_t t[3] = { 1, 2, 3 };
		if (sc_arena_open_with(name, &oo, &a) || sc_stage_open(a, "m", "s", &st))
			_exit(2);
		int64_t r = sc_l2_get_copy(st, "", t, 3, NULL, buf, sizeof(buf), NULL);
		_exit(r == -EBADMSG ? 0 : 1);
	}
	int st;
	ck_assert_int_eq(waitpid(w, &st, 0), w);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sc_l2_get_copy of a scribbled payload did not fail -EBADMSG");
	run_as(&o, MA, 1, 20, "%s destroy %s --dir %s", bin, name, dir);
}
END_TEST

START_TEST(member_writes_damg_at_576)
{
	NEED_READY();
	struct out o;
	char name[64], dir[256];
	snprintf(name, sizeof(name), "%s-13", tag);
	snprintf(dir, sizeof(dir), "%s/g", base);
	run_as(&o, MA, 1, 30, "%s create %s --dir %s --size 16M --mode 0660 --group " GROUP, bin, name, dir);
	OK(&o, "create");
	run_as(&o, MB, 1, 20, "printf DAMG | dd of=%s/stagecache.%s bs=1 seek=576 conv=notrunc 2>/dev/null", dir, name);
	OK(&o, "member writes DAMG");
	run_as(&o, MA, 1, 20, "%s stats %s --dir %s", bin, name, dir);
	ck_assert_msg(!strstr(o.err, "declared unrepairable by fsck"), "a 4-byte write reads as fsck's verdict:\n%.1000s", o.err);
	run_as(&o, MA, 1, 20, "%s destroy %s --dir %s", bin, name, dir);
}
END_TEST

START_TEST(exporter_port_taken_one_line)
{
	NEED_READY();
	struct out o;
	char name[64];
	snprintf(name, sizeof(name), "%s-14", tag);
	run_as(&o, "root", 0, 30, "%s create %s --size 16M --huge off", bin, name);
	OK(&o, "create");
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	socklen_t al = sizeof(a);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(s, 1), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &al), 0);
	run_as(&o, "root", 0, 20, "%s exporter %s --listen 127.0.0.1:%u", bin, name, (unsigned)ntohs(a.sin_port));
	close(s);
	ck_assert_msg(o.code == 1 && lines(o.err) == 1 && strstr(o.err, "stagecache exporter:") && !strstr(o.err, "Failed"),
		      "exit %d, want 1 and one line of ours:\n%.1000s", o.code, o.err);
	run_as(&o, "root", 0, 30, "%s destroy %s", bin, name);
}
END_TEST

START_TEST(get_that_cannot_write_counts_no_hit)
{
	NEED_READY();
	struct out o;
	char name[64];
	snprintf(name, sizeof(name), "%s-15", tag);
	run_as(&o, "root", 0, 30, "%s create %s --size 16M --huge off && %s put %s --model m --state s --tokens 1 "
	       "--kind full_state --file %s/payload", bin, name, bin, name, base);
	OK(&o, "create and put");
	run_as(&o, "root", 0, 30, "%s get %s --model m --state s --tokens 1 --out %s/no/such/dir/x", bin, name, base);
	ck_assert_msg(o.code == 1, "get --out into a missing directory: exit %d\n%.1000s", o.code, o.err);
	run_as(&o, "root", 0, 30, "%s stats %s --json", bin, name);
	OK(&o, "stats");
	const char *hits = strstr(o.out, "\"hits\":"); /* the first is L2's */
	ck_assert_msg(hits && !strncmp(hits, "\"hits\":0,", 9), "a get that wrote nothing counted a hit:\n%.600s", o.out);
	run_as(&o, "root", 0, 30, "%s destroy %s", bin, name);
}
END_TEST

Suite *hostile_suite(void)
{
	Suite *s = suite_create("hostile");
	TCase *tc = tcase_create("hostile");
	tcase_set_timeout(tc, 240);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, member_links_objects_subdir_to_a_root_only_directory);
	tcase_add_test(tc, outsider_plants_and_locks_the_per_host_state_file);
	tcase_add_test(tc, reader_without_write_locks_every_slot);
	tcase_add_test(tc, member_takes_every_reader_slot);
	tcase_add_test(tc, one_user_reaches_its_slot_limit_through_the_api);
	tcase_add_test(tc, member_holds_the_store_locks);
	tcase_add_test(tc, member_plants_a_fifo_under_an_objects_name);
	tcase_add_test(tc, member_plants_an_object_whose_header_claims_512_MiB);
	tcase_add_test(tc, slow_clients_starve_the_exporter);
	tcase_add_test(tc, member_truncates_the_creators_arena);
	tcase_add_test(tc, another_member_trusts_the_creator_everywhere);
	tcase_add_test(tc, exporter_reads_a_shared_store);
	tcase_add_test(tc, member_plants_fifo_link_and_directory_verify_says_so);
	tcase_add_test(tc, verify_gives_what_it_writes_the_stores_mode);
	tcase_add_test(tc, member_scribbles_a_payload_copies_say_so);
	tcase_add_test(tc, member_writes_damg_at_576);
	tcase_add_test(tc, exporter_port_taken_one_line);
	tcase_add_test(tc, get_that_cannot_write_counts_no_hit);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(hostile_suite)
