/* tests/helpers.c — helpers shared by the Check suites (see sc_check.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/fanotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../lib/l2/l2.h"
#include "../shm/heap.h"
#include "../shm/mutex.h"

#undef _tcase_add_test

/* Is @name in the comma-separated list @list? */
static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		p += len + (e ? 1 : 0);
	}
	return 0;
}

void sc_tcase_add_test(TCase *tc, const TTest *ttest, int signal, int allowed_exit_value, int start, int end)
{
	const char *only = getenv("SC_CHECK_ONLY"), *list = getenv("SC_CHECK_LIST");
	if (list && *list) {
		printf("TEST %s\n", ttest->name); /* the mutation runner's inventory; nothing runs */
		fflush(stdout);
	}
	if (only && !in_list(only, ttest->name))
		return;
	_tcase_add_test(tc, ttest, signal, allowed_exit_value, start, end);
}

void sc_skip(const char *fmt, ...)
{
	va_list ap;
	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

const char *sc_test_name(const char *tag)
{
	static char buf[8][80];
	static unsigned n;
	char *b = buf[n % 8];
	snprintf(b, 80, "t-%s-%d-%u", tag, (int)getpid(), n);
	n++;
	return b;
}

struct sc_arena *sc_test_arena_opts(const char *tag, struct sc_arena_opts *opts, const char **name_out)
{
	const char *name = sc_test_name(tag);
	struct sc_arena *a = NULL;
	int rc = sc_arena_create(name, opts, &a);
	ck_assert_msg(rc == 0, "create %s: %s", name, sc_strerror(rc));
	if (name_out)
		*name_out = name;
	return a;
}

struct sc_arena *sc_test_arena(const char *tag, uint64_t size, const char **name_out)
{
	struct sc_arena_opts o = { .size_bytes = size, .huge = SC_HUGE_OFF };
	return sc_test_arena_opts(tag, &o, name_out);
}

void sc_test_arena_destroy(struct sc_arena *a, const char *name)
{
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
}

static uint64_t fake_map_bytes(uint64_t total, uint64_t *pg)
{
	*pg = (uint64_t)sysconf(_SC_PAGESIZE);
	return (total + *pg - 1) / *pg * *pg + *pg;
}

struct shm_arena *sc_test_fake_arena(struct shm_arena *fake, uint64_t total)
{
	uint64_t pg, map = fake_map_bytes(total, &pg);
	uint8_t *m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		sc_skip("cannot reserve %llu MiB of address space", (unsigned long long)(map >> 20));
		return NULL;
	}
	ck_assert_int_eq(mprotect(m + map - pg, pg, PROT_NONE), 0);
	uint8_t *base = m + ((map - pg - total) & ~(uint64_t)63); /* the end on the guard */
	memset(fake, 0, sizeof(*fake));
	fake->base = base;
	fake->size = total;
	fake->hdr = (struct shm_header *)base;
	fake->token = 1u << 16; /* a lock owner (no reader table: nobody else ever waits) */
	return fake;
}

void sc_test_fake_arena_close(struct shm_arena *fake)
{
	uint64_t pg, map = fake_map_bytes(fake->size, &pg);
	munmap(fake->base - ((map - pg - fake->size) & ~(uint64_t)63), map);
}

int sc_test_is_root(void)
{
	return geteuid() == 0;
}

double sc_test_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sc_test_pause_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

void sc_test_wait_killed(pid_t pid)
{
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child %d: status %d, not killed by SIGKILL", (int)pid,
		      st);
}

int sc_test_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory stream's own */
}

struct sc_digest sc_test_digest_low_bits_zero(uint8_t *buf, size_t len, uint64_t mask)
{
	for (uint64_t c = 0; c < 1000000; c++) {
		memcpy(buf, &c, sizeof(c));
		struct sc_digest d = sc_digest(buf, len);
		if (!(d.lo & mask))
			return d;
	}
	ck_abort_msg("no counter gives a digest with those bits zero");
	return (struct sc_digest){ 0, 0 };
}

void sc_test_flip_byte(const char *path, off_t at, uint8_t mask)
{
	int fd = open(path, O_RDWR);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	uint8_t b;
	ck_assert_int_eq(pread(fd, &b, 1, at), 1);
	b ^= mask;
	ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

int sc_test_seccomp(struct sock_filter *f, size_t n)
{
	struct sock_fprog prog = { (unsigned short)n, f };
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) ? -1 : 0;
}

int sc_test_refuse_syscall(long nr, unsigned action)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, action),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	return sc_test_seccomp(f, sizeof(f) / sizeof(f[0]));
}

int sc_test_refuse_setfl(int flag)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fcntl, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SC_TEST_SECCOMP_ARG_LO(1)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, F_SETFL, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SC_TEST_SECCOMP_ARG_LO(2)),
		BPF_JUMP(BPF_JMP | (flag ? BPF_JSET : BPF_JEQ) | BPF_K, (unsigned)flag, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	if (sc_test_seccomp(f, sizeof(f) / sizeof(f[0])))
		return 77;
	/* descriptor -1: EBADF from the kernel, EINVAL only from the filter, and nothing touched */
	errno = 0;
	return fcntl(-1, F_SETFL, flag) == -1 && errno == EINVAL ? 0 : 78;
}

int sc_test_child_status(pid_t pid, const char *skip)
{
	int st = 0, w = 0;
	double until = sc_test_now_s() + 20;
	while (!(w = waitpid(pid, &st, WNOHANG)) && sc_test_now_s() < until)
		sc_test_pause_ms(1); /* the child's end */
	if (!w) {
		kill(pid, SIGKILL);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_abort_msg("the child did not end in 20 s");
	}
	ck_assert_int_eq(w, pid);
	ck_assert_msg(WIFEXITED(st), "the child ended by signal %d", WTERMSIG(st));
	if (WEXITSTATUS(st) != 77)
		return WEXITSTATUS(st);
	sc_skip("%s", skip);
	return -1;
}

int sc_test_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb, (void)flag, (void)f;
	remove(p); /* go on: remove whatever else can be */
	return 0;
}

void sc_test_rm_tree(const char *dir)
{
	if (dir && dir[0])
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

int sc_test_lowest_free_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* not dup(0): 0 may be the free one */
	ck_assert_int_ge(fd, 0);
	close(fd);
	return fd;
}

const char *sc_test_build_dir(void)
{
	static char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	ck_assert(n > 0);
	dir[n] = 0;
	char *d = dirname(dirname(dir));
	memmove(dir, d, strlen(d) + 1);
	return dir;
}

void sc_test_points_match_sources(const char *call, const char *const *pts, const char *what)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "grep -rhoE '%s\\(\"[a-z0-9._]+\"\\)' lib shm --exclude=fault.h | sed -E 's/.*\\(\"(.*)\"\\)/\\1/' | sort -u",
		 call);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char line[128];
	int in_source = 0;
	while (fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = 0;
		int found = 0;
		for (int i = 0; pts[i]; i++)
			found |= !strcmp(pts[i], line);
		ck_assert_msg(found, "%s '%s' is in the sources but not in the list", what, line);
		in_source++;
	}
	pclose(p);
	int listed = 0;
	while (pts[listed])
		listed++;
	ck_assert_int_gt(in_source, 10);
	ck_assert_int_eq(listed, in_source);
}

/* ---- temp files of L3 writers ---- */

static struct {
	int files, locked;
	uint64_t sig; /* sizes and mtimes of every temp file, mixed */
	int *held, held_max; /* where to keep a descriptor of each held one (sc_test_l3_held_temps) */
} temps;

/* Is the file open as @fd locked by another open file description (a writer, or its ring)? */
int sc_test_fd_held(int fd)
{
	return shm_ofd_held(fd, 0) == 1; /* the byte a writer locks (lib/l3/write.c) */
}

static int temp_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	if (flag != FTW_F || strncmp(p + f->base, ".tmp-", 5))
		return 0;
	temps.files++;
	temps.sig = temps.sig * 1000003u ^ (uint64_t)sb->st_size ^ ((uint64_t)sb->st_mtim.tv_nsec << 20) ^
		    (uint64_t)sb->st_mtim.tv_sec;
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	if (sc_test_fd_held(fd)) {
		if (temps.locked < temps.held_max) {
			temps.held[temps.locked++] = fd;
			return 0;
		}
		temps.locked++;
	}
	close(fd);
	return 0;
}

static int temps_walk(const char *dir, int *held, int held_max, int *locked, uint64_t *sig)
{
	temps.files = temps.locked = 0;
	temps.sig = 0;
	temps.held = held;
	temps.held_max = held_max;
	nftw(dir, temp_one, 16, FTW_PHYS | FTW_MOUNT);
	if (locked)
		*locked = temps.locked;
	if (sig)
		*sig = temps.sig;
	return temps.files;
}

int sc_test_l3_temps(const char *dir, int *locked, uint64_t *sig)
{
	return temps_walk(dir, NULL, 0, locked, sig);
}

int sc_test_l3_held_temps(const char *dir, int *fds, int max)
{
	int locked;
	temps_walk(dir, fds, max, &locked, NULL);
	return locked < max ? locked : max;
}

int sc_test_wait_l3_temps_unlocked(const char *dir, int timeout_ms)
{
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int locked;
		sc_test_l3_temps(dir, &locked, NULL);
		if (!locked)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > timeout_ms)
			return -ETIMEDOUT;
		struct timespec nap = { 0, 1000000 }; /* between looks at the locks: 1 ms */
		nanosleep(&nap, NULL);
	}
}

void sc_test_on_wanted(const char *component, const char *message, int repaired, void *ctx)
{
	(void)component, (void)repaired;
	struct sc_test_wanted *w = ctx;
	w->hits += strstr(message, w->text) != NULL;
}

pid_t sc_test_locker(const char *name, struct shm_mutex *m, char then, useconds_t hold_us)
{
	int go[2];
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_arena *b;
		if (sc_arena_open(name, &b) || shm_mutex_lock(b->shm, m))
			_exit(2);
		if (write(go[1], "x", 1) != 1)
			_exit(3);
		if (then == 'k')
			raise(SIGKILL);
		/* 'h': hold it, alive, until a waiter has announced itself (the waiters bit) and @hold_us
		 * have passed since we took it, so the waiter sleeps through futex slices of a live
		 * holder. No waiter while the test lives is a failure (exit 4): the test process gone
		 * (Check's timeout ended it), or 300 s more, longer than any case may take */
		double t0 = sc_test_now_s(), hold = (double)hold_us / 1e6;
		pid_t test = getppid();
		while (!(atomic_load_explicit(&m->word, memory_order_relaxed) & SHM_MUTEX_WAITERS) ||
		       sc_test_now_s() - t0 < hold) {
			if (getppid() != test || sc_test_now_s() - t0 > hold + 300.0)
				_exit(4);
			sc_test_pause_ms(1);
		}
		shm_mutex_unlock(b->shm, m);
		_exit(0);
	}
	char c;
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	close(go[0]);
	close(go[1]);
	return pid;
}

struct shm_index_entry *sc_test_l2_entry(struct sc_arena *a, struct sc_key key)
{
	int err;
	ck_assert_int_eq(l2_ready(a), 0);
	shm_epoch_enter(a->shm);
	struct shm_index_entry *e = shm_index_find(l2_ix(a), key.lo, key.hi, &err);
	shm_epoch_exit(a->shm);
	return e;
}

uint64_t sc_test_heap_used(struct sc_arena *a)
{
	struct shm_heap_stats hs;
	ck_assert_int_eq(shm_heap_stats(a->shm, &hs), 0);
	return hs.used_bytes;
}

pid_t sc_test_parked(int (*setup)(void *ctx), void *ctx, const char *what)
{
	int up[2];
	ck_assert_int_eq(pipe(up), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(up[0]);
		if (setup(ctx) || write(up[1], "r", 1) != 1)
			_exit(2);
		for (;;)
			pause(); /* until killed */
	}
	close(up[1]);
	char c;
	ck_assert_msg(read(up[0], &c, 1) == 1, "the child could not %s", what);
	close(up[0]);
	return pid;
}

struct filler_ctx {
	const char *name;
	uint64_t bytes;
};

static int filler_setup(void *ctx)
{
	struct filler_ctx *f = ctx;
	struct sc_arena *a;
	struct sc_stage *st;
	struct sc_l2_resv r;
	return sc_arena_open(f->name, &a) || sc_stage_open(a, "filler", "state", &st) || sc_l2_reserve(st, f->bytes, &r);
}

pid_t sc_test_filler(const char *name, uint64_t bytes)
{
	struct filler_ctx f = { name, bytes };
	return sc_test_parked(filler_setup, &f, "reserve its bytes (a filler)");
}


static void *fan_run(void *arg)
{
	struct sc_fan *f = arg;
	char buf[4096] __attribute__((aligned(8)));
	for (;;) {
		struct pollfd p[2] = { { f->fd, POLLIN, 0 }, { f->stop[0], POLLIN, 0 } };
		if (poll(p, 2, -1) < 0 || p[1].revents)
			return NULL;
		ssize_t n = read(f->fd, buf, sizeof(buf));
		for (struct fanotify_event_metadata *m = (void *)buf; n > 0 && FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
			f->act(f->ctx, f->acted++);
			struct fanotify_response r = { .fd = m->fd, .response = FAN_ALLOW };
			if (write(f->fd, &r, sizeof(r)) != sizeof(r))
				abort();
			close(m->fd);
		}
	}
}

int sc_fan_start(struct sc_fan *f, const char *path, uint64_t mask, void (*act)(void *, int), void *ctx)
{
	*f = (struct sc_fan){ .act = act, .ctx = ctx };
	f->fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY | O_CLOEXEC | O_LARGEFILE);
	if (f->fd < 0)
		return -errno;
	if (fanotify_mark(f->fd, FAN_MARK_ADD, mask, AT_FDCWD, path) < 0) {
		int rc = -errno;
		close(f->fd);
		return rc;
	}
	ck_assert_int_eq(pipe2(f->stop, O_CLOEXEC), 0);
	ck_assert_int_eq(pthread_create(&f->t, NULL, fan_run, f), 0);
	return 0;
}

int sc_fan_start_or_skip(struct sc_fan *f, const char *path, uint64_t mask, void (*act)(void *, int), void *ctx)
{
	int rc = sc_fan_start(f, path, mask, act, ctx);
	if (rc)
		sc_skip("no fanotify permission events: %s", sc_strerror(rc));
	return rc != 0;
}

void sc_fan_stop(struct sc_fan *f)
{
	ck_assert_int_eq(write(f->stop[1], "s", 1), 1);
	ck_assert_int_eq(pthread_join(f->t, NULL), 0);
	close(f->fd), close(f->stop[0]), close(f->stop[1]);
}

int sc_test_limit_vm(uint64_t more)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0;
	int ok = f && fscanf(f, "%lu", &pages) == 1;
	if (f)
		fclose(f);
	if (!ok)
		return -1;
	rlim_t cap = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + more;
	struct rlimit rl = { cap, cap };
	return setrlimit(RLIMIT_AS, &rl) ? -1 : 0;
}
