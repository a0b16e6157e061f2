/*
 * tests/check_cli.c — the `stagecache` command against bad input: hundreds of cases, each run as
 * a real process under a timeout.
 *
 * Every case runs build/stagecache (the binary next to this suite's build directory) with an
 * argument template, and checks what the command promises:
 *  - it never crashes (no signal) and never hangs (killed after a timeout: a failure);
 *  - exit 0 ok, 1 failure, 2 usage error (fsck: 3 when the arena is declared unrepairable);
 *  - a usage error names the offending option or argument on its first stderr line;
 *  - a failure prints exactly one line on stderr ("stagecache CMD: ..."), of bounded length;
 *  - nothing changes when a command refuses: the fixture's files (type, mode, owner, size, and
 *    the bytes of every file; for an arena the header and the index, heap, ring and observation
 *    regions, not the reader slots and counters that attaching touches) are the same after.
 * The fixture (built once, in the parent, before the forked cases) holds a good arena and
 * garbage named stagecache.*: random bytes, an empty file, a FIFO, a directory, symlinks, a
 * truncated copy, a copy of another layout version, one with a corrupted index header, a
 * world-writable one, one owned by another user (root only); L3 directories with garbage
 * objects and state files; and a file of ten million tokens.
 *
 * Regression cases are named after the defects they reproduce (d1 ... d12).
 * SC_CLI_MATCH=TEXT runs only the cases whose template contains TEXT (while iterating).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "sc_check.h"
#include "../shm/arena.h"
#include "../shm/index.h"
#include "../shm/mutex.h"

/* ---- fixture ---- */

static char base[200];     /* /tmp/sc-cli-PID: inputs, L3 dirs, outputs */
static char adir[200];     /* /dev/shm/sc-cli-PID: arenas (tmpfs) */
static char bin[PATH_MAX];
static char longstr[5001];
static int is_root;

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "check_cli: fixture command failed: %s\n", cmd);
		exit(1);
	}
}

/* The fixture is built outside any test (an unchecked fixture): failures end the run. */
#define FIX(cond) do { if (!(cond)) { fprintf(stderr, "check_cli: fixture: %s failed (line %d)\n", #cond, __LINE__); exit(1); } } while (0)

static struct sc_arena *make_arena(const char *name, int populate)
{
	struct sc_arena_opts o = { .size_bytes = 8u << 20, .huge = SC_HUGE_OFF, .dir = adir, .ring_count = 2,
				   .ring_bytes = 4096, .index_entries = 1024 };
	struct sc_arena *a;
	int rc = sc_arena_create(name, &o, &a);
	FIX(rc == 0);
	if (populate) {
		struct sc_stage *st;
		FIX(sc_stage_open(a, "m", "s", &st) == 0);
		static uint8_t pl[5000];
		memset(pl, 7, sizeof(pl));
		struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pl }, .sec_len = { sizeof(pl) } };
		int32_t t[3] = { 1, 2, 3 };
		FIX(sc_l2_admit(st, "", t, 3, sc_digest(pl, sizeof(pl)), &p, SC_ORIGIN_DIRECT) == 0);
		sc_stage_close(st);
	}
	return a;
}

static void arena_path(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/stagecache.%s", adir, name);
}

static void put_l3(const char *dir)
{
	struct sc_l3 *l3;
	int rc = sc_l3_open(dir, NULL, &l3);
	FIX(rc == 0);
	static uint8_t pl[9000];
	memset(pl, 3, sizeof(pl));
	int32_t t[3] = { 1, 2, 3 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pl }, .sec_len = { sizeof(pl) } };
	struct sc_l3_put_args pa = { .model_identity = "m", .state_identity = "s", .ns = "", .tokens = t,
				     .token_count = 3, .payload = &p };
	FIX(sc_l3_put(l3, &pa, NULL) == 0);
	sc_l3_close(l3);
}

static void setup(void)
{
	is_root = geteuid() == 0;
	ssize_t n = readlink("/proc/self/exe", bin, sizeof(bin) - 1);
	FIX(n > 0);
	bin[n] = 0;
	char *d = dirname(dirname(bin)); /* <build>/tests/check_cli -> <build> */
	memmove(bin, d, strlen(d) + 1);
	strcat(bin, "/stagecache");
	memset(longstr, 'a', 5000);
	longstr[5000] = 0;
	snprintf(base, sizeof(base), "/tmp/sc-cli-%d", (int)getpid());
	snprintf(adir, sizeof(adir), "/dev/shm/sc-cli-%d", (int)getpid());
	sh("rm -rf %s %s && mkdir -p %s/in %s/out %s", base, adir, base, base, adir);
	sh("chmod 755 %s %s", base, adir);
	/* inputs */
	sh("head -c 65536 /dev/urandom > %s/in/p64k && head -c 8192 /dev/urandom > %s/in/kv && "
	   "head -c 999 /dev/urandom > %s/in/rec && : > %s/in/empty && mkdir %s/in/dir && mkfifo %s/in/fifo",
	   base, base, base, base, base, base);
	sh("printf '1,2,3' > %s/in/t3 && printf '1,2,x' > %s/in/tbad && printf '99999999999' > %s/in/tbig", base, base, base);
	sh("echo '{\"version\":1,\"token_count\":4,\"payload_bytes\":8192}' > %s/in/desc.json", base);
	sh("echo '{\"version\":1,\"token_count\":4,\"payload_bytes\":4096}' > %s/in/desc-wrong.json", base);
	sh("echo 'not json' > %s/in/desc-bad.json", base);
	sh("seq -s, 1 10000000 > %s/in/t10m", base); /* ten million tokens (78 MB) */
	sh("(seq -s, 1 9999999; echo ,x) > %s/in/t10m-bad", base);
	/* arenas: one good, and garbage named stagecache.* */
	sc_arena_close(make_arena("good", 1));
	char p[PATH_MAX], q[PATH_MAX];
	arena_path(p, sizeof(p), "good");
	sh("head -c 65536 /dev/urandom > %s/stagecache.garbage", adir);
	sh(": > %s/stagecache.empty && mkfifo %s/stagecache.fifo && mkdir %s/stagecache.dir", adir, adir, adir);
	sh("ln -s stagecache.good %s/stagecache.link && ln -s /nonexistent %s/stagecache.dangling", adir, adir);
	sh("head -c 8192 %s > %s/stagecache.trunc", p, adir);
	sh("cp %s %s/stagecache.badver && printf '\\143' | dd of=%s/stagecache.badver bs=1 seek=8 conv=notrunc 2>/dev/null",
	   p, adir, adir);
	/* a valid header over an index region whose header was zeroed (defect 1) */
	sc_arena_close(make_arena("badidx", 1));
	arena_path(q, sizeof(q), "badidx");
	{
		int fd = open(q, O_RDWR);
		FIX(fd >= 0);
		struct shm_header h;
		FIX(pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h));
		static uint8_t zero[4096];
		FIX(pwrite(fd, zero, sizeof(zero), (off_t)h.regions[SHM_REGION_INDEX].off) == 4096);
		close(fd);
	}
	sc_arena_close(make_arena("ww", 1));
	arena_path(q, sizeof(q), "ww");
	FIX(chmod(q, 0666) == 0);
	if (is_root) {
		sc_arena_close(make_arena("other", 1));
		arena_path(q, sizeof(q), "other");
		FIX(chown(q, 65534, 65534) == 0);
	}
	/* L3: a good directory, one with garbage objects, one with a garbage state file */
	char l3[PATH_MAX];
	snprintf(l3, sizeof(l3), "%s/l3", base);
	put_l3(l3);
	snprintf(l3, sizeof(l3), "%s/l3g", base);
	put_l3(l3);
	sh("cd %s/l3g && mkdir -p objects/ab objects/cd prefix/ef && "
	   "mkfifo objects/ab/abababababababababababababababab.sc3 && "
	   "mkdir objects/cd/cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd.sc3 && "
	   "ln -s /etc/passwd objects/cd/cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdce.sc3 && "
	   "mkfifo prefix/ef/efefefefefefefefefefefefefefefef.pfx && touch lengths/junk lengths/4294967296",
	   base);
	snprintf(l3, sizeof(l3), "%s/l3s", base);
	put_l3(l3);
	sh("head -c 4096 /dev/urandom > %s/l3s/state", base);
	snprintf(l3, sizeof(l3), "%s/l3f", base);
	put_l3(l3);
	sh("rm %s/l3f/state && mkfifo %s/l3f/state", base, base);
	sh("mkdir -p %s/notl3", base); /* an existing directory that is not an L3 store */
}

static void teardown(void)
{
	sc_test_rm_tree(base);
	sc_test_rm_tree(adir);
}

/* ---- snapshots: what "nothing changed" means ---- */

struct mask {
	uint64_t off, len; /* file offsets to read as zero */
};

static uint64_t hash_fd_range(int fd, uint64_t off, uint64_t len, uint64_t seed, const struct mask *m, unsigned nm)
{
	static uint8_t buf[1 << 16];
	XXH64_state_t *st = XXH64_createState();
	XXH64_reset(st, seed);
	while (len) {
		size_t want = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		ssize_t r = pread(fd, buf, want, (off_t)off);
		if (r <= 0)
			break;
		for (unsigned i = 0; i < nm; i++) {
			uint64_t lo = m[i].off > off ? m[i].off : off, hi = m[i].off + m[i].len;
			if (hi > off + (uint64_t)r)
				hi = off + (uint64_t)r;
			if (lo < hi)
				memset(buf + (lo - off), 0, hi - lo);
		}
		XXH64_update(st, buf, (size_t)r);
		off += (uint64_t)r, len -= (uint64_t)r;
	}
	uint64_t h = XXH64_digest(st);
	XXH64_freeState(st);
	return h;
}

/* A valid arena: its identity and the L2/ring/observation regions, but not what attaching, a
 * counted lookup or taking a lock writes by design (reader slots, counters, the entries' CLOCK
 * hints, the lock words). Anything else: all its bytes. */
static uint64_t file_digest(const char *path, const struct stat *sb)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	struct shm_header h;
	uint64_t d;
	if (!strncmp(basename((char *)path), "stagecache.", 11) && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	    shm_header_check(&h, (uint64_t)sb->st_size) == 0) {
		static struct mask m[4096];
		unsigned nm = 0;
		uint64_t ix = h.regions[SHM_REGION_INDEX].off;
		m[nm++] = (struct mask){ ix + offsetof(struct shm_index_hdr, sweep_mu), sizeof(struct shm_mutex) };
		for (unsigned s = 0; s < SHM_INDEX_SHARDS; s++)
			m[nm++] = (struct mask){ ix + offsetof(struct shm_index_hdr, shards) + s * sizeof(struct shm_index_shard),
						 sizeof(struct shm_mutex) };
		m[nm++] = (struct mask){ h.regions[SHM_REGION_HEAP].off + 64, 64 };  /* the heap's lock line */
		m[nm++] = (struct mask){ h.regions[SHM_REGION_OBS].off + 64, sizeof(struct shm_mutex) };
		struct shm_index_hdr ih;
		if (pread(fd, &ih, sizeof(ih), (off_t)ix) == (ssize_t)sizeof(ih) && ih.nentries <= 4000)
			for (uint32_t i = 0; i < ih.nentries; i++)
				m[nm++] = (struct mask){ ix + ih.entries_off + (uint64_t)i * 128 + 120, 4 }; /* freq */
		d = hash_fd_range(fd, 0, 512, 1, NULL, 0); /* identity, not the epoch */
		const int regions[] = { SHM_REGION_INDEX, SHM_REGION_RINGS, SHM_REGION_OBS, SHM_REGION_HEAP };
		for (unsigned i = 0; i < 4; i++)
			d ^= hash_fd_range(fd, h.regions[regions[i]].off, h.regions[regions[i]].size, d + i, m, nm);
	} else {
		d = hash_fd_range(fd, 0, (uint64_t)sb->st_size, 0, NULL, 0);
	}
	close(fd);
	return d;
}

struct snap {
	char *text;
	size_t len, cap;
};

static void snap_add(struct snap *s, const char *line)
{
	size_t n = strlen(line);
	if (s->len + n + 1 > s->cap) {
		s->cap = (s->len + n + 1) * 2;
		s->text = realloc(s->text, s->cap);
	}
	memcpy(s->text + s->len, line, n + 1);
	s->len += n;
}

static struct snap *cur_snap;

static int snap_cb(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)type, (void)ftw;
	char line[PATH_MAX + 128];
	const char *b = strrchr(p, '/');
	b = b ? b + 1 : p;
	/* L3 state (shared counters) and lock are updated by every open: not content */
	int counters = !strcmp(b, "state") || !strcmp(b, "lock");
	uint64_t d = S_ISREG(sb->st_mode) && !counters ? file_digest(p, sb) : 0;
	snprintf(line, sizeof(line), "%s %o %u %lld %016llx\n", p, sb->st_mode, sb->st_uid,
		 S_ISDIR(sb->st_mode) || counters ? 0LL : (long long)sb->st_size, (unsigned long long)d);
	snap_add(cur_snap, line);
	return 0;
}

static char *snapshot(void)
{
	struct snap s = { 0 };
	cur_snap = &s;
	snap_add(&s, "");
	nftw(adir, snap_cb, 16, FTW_PHYS);
	char l3[PATH_MAX];
	const char *dirs[] = { "l3", "l3g", "l3s", "l3f", "in", "notl3" };
	for (unsigned i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(l3, sizeof(l3), "%s/%s", base, dirs[i]);
		nftw(l3, snap_cb, 16, FTW_PHYS);
	}
	return s.text;
}

/* ---- running the command ---- */

struct res {
	int code;          /* exit status, -SIG when killed by a signal, -1000 on timeout */
	char out[1 << 16], err[1 << 16];
	size_t outn, errn;
	double secs;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void run_argv(char **argv, int timeout_s, struct res *r)
{
	int po[2], pe[2];
	ck_assert_int_eq(pipe2(po, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(pe, O_CLOEXEC), 0);
	double t0 = now_s();
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		int devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, 0);
		setenv("LC_ALL", "C", 1);
		execv(bin, argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	r->outn = r->errn = 0;
	int open_fds = 2, killed = 0;
	struct pollfd pf[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
	while (open_fds) {
		int left = (int)((t0 + timeout_s - now_s()) * 1000);
		if (left <= 0) {
			kill(pid, SIGKILL);
			killed = 1;
			break;
		}
		if (poll(pf, 2, left) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char *buf = i ? r->err : r->out;
			size_t *n = i ? &r->errn : &r->outn;
			char tmp[65536];
			ssize_t k = read(pf[i].fd, tmp, sizeof(tmp));
			if (k <= 0) {
				close(pf[i].fd);
				pf[i].fd = -1;
				open_fds--;
				continue;
			}
			size_t room = sizeof(r->out) - 1 - *n;
			memcpy(buf + *n, tmp, (size_t)k < room ? (size_t)k : room);
			*n += (size_t)k < room ? (size_t)k : room;
		}
	}
	for (int i = 0; i < 2; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	int st = 0;
	waitpid(pid, &st, 0);
	r->out[r->outn] = r->err[r->errn] = 0;
	r->secs = now_s() - t0;
	r->code = killed ? -1000 : WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st);
}

/* Expand a template into argv: tokens split on spaces; %D arena dir, %B base dir, %X a
 * 5000-character string, %E (a whole token) the empty string, %S the case's scratch arena. */
static char **expand(const char *tmpl, const char *scratch)
{
	static char store[1 << 16];
	static char *argv[64];
	size_t used = 0;
	int argc = 0;
	argv[argc++] = bin;
	const char *p = tmpl;
	while (*p) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		char *tok = store + used;
		while (*p && *p != ' ') {
			const char *add = NULL;
			char one[2] = { *p, 0 };
			if (*p == '%' && p[1]) {
				switch (p[1]) {
				case 'D': add = adir; break;
				case 'B': add = base; break;
				case 'X': add = longstr; break;
				case 'S': add = scratch; break;
				case 'E': add = ""; break;
				case '%': add = "%"; break;
				}
				if (add)
					p += 2;
			}
			if (!add) {
				add = one;
				p++;
			}
			size_t n = strlen(add);
			ck_assert(used + n + 1 < sizeof(store));
			memcpy(store + used, add, n);
			used += n;
		}
		store[used++] = 0;
		ck_assert(argc < 63);
		argv[argc++] = tok;
	}
	argv[argc] = NULL;
	return argv;
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static size_t longest_line(const char *s)
{
	size_t best = 0, cur = 0;
	for (; *s; s++) {
		if (*s == '\n') {
			best = cur > best ? cur : best;
			cur = 0;
		} else {
			cur++;
		}
	}
	return cur > best ? cur : best;
}

/* ---- the cases ---- */

enum {
	F_CHANGES = 1,   /* the command is allowed to change the fixture (a success) */
	F_SLOW = 2,      /* ten million tokens: a longer timeout */
	F_ROOT = 4,      /* needs root (a file owned by another user) */
	F_SCRATCH = 8,   /* %S: a fresh populated arena for this case, destroyed after */
	F_ANY01 = 16,    /* exit 0 or 1 are both fine (e.g. a hit or a miss) */
	F_NOTYPO = 32,   /* %B/typo must not exist after the command (a mistyped path is never created) */
};

struct cli_case {
	const char *args;
	int want;              /* expected exit status */
	const char *needle;    /* must appear in stderr (usage errors: the option) or stdout (want 0) */
	unsigned flags;
};

#define MAXCASES 1200
static struct cli_case cases[MAXCASES];
static int ncases;
static char casebuf[MAXCASES][600];

static void add(int want, const char *needle, unsigned flags, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(int want, const char *needle, unsigned flags, const char *fmt, ...)
{
	if (ncases >= MAXCASES) { fprintf(stderr, "check_cli: too many cases\n"); exit(1); }
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(casebuf[ncases], sizeof(casebuf[ncases]), fmt, ap);
	va_end(ap);
	cases[ncases] = (struct cli_case){ casebuf[ncases], want, needle, flags };
	ncases++;
}

#define Q "--model m --state s"
#define Z32 "00000000000000000000000000000000"

/* Subcommands that take an arena NAME, each with what it needs besides NAME ("%s" = NAME). */
static const char *const arena_cmds[] = {
	"info %s --dir %%D",
	"destroy %s --dir %%D",
	"put %s --dir %%D " Q " --tokens 1,2,3 --kind full_state --file %%B/in/p64k",
	"get %s --dir %%D " Q " --tokens 1,2,3",
	"peek %s --dir %%D " Q " --tokens 1,2,3",
	"ls %s --dir %%D",
	"rm %s --dir %%D --key " Z32,
	"rm %s --dir %%D " Q " --tokens 1,2,3",
	"invalidate %s " Z32 " --dir %%D",
	"clear %s --dir %%D",
	"stats %s --dir %%D",
	"stats %s --dir %%D " Q,
	"restore %s %%B/l3 --arena-dir %%D " Q " --tokens 1,2,3",
	"tail %s --dir %%D",
	"fsck %s --dir %%D",
	"fsck %s --dir %%D --deep --json",
	"create %s --dir %%D --size 16M",
};
#define NARENA_CMDS (int)(sizeof(arena_cmds) / sizeof(arena_cmds[0]))

/* @fmt with its one "%s" replaced by @name and "%%" by "%" (the arena_cmds templates). */
static void fill(char *out, size_t len, const char *fmt, const char *name)
{
	size_t o = 0;
	for (const char *p = fmt; *p && o + 1 < len; p++) {
		if (p[0] == '%' && p[1] == 's') {
			for (const char *q = name; *q && o + 1 < len; q++)
				out[o++] = *q;
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			out[o++] = '%';
			p++;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = 0;
}

static void build_cases(void)
{
	/* d1: the stage cannot be opened (empty or oversized model, corrupted index header):
	 * get/put/peek/rm crashed with a double close, and the message echoed 5000 characters */
	const char *d1[] = { "get %S --dir %D --model %E --state s --tokens 1",
			     "put %S --dir %D --model %E --state s --tokens 1 --kind full_state --file %B/in/p64k",
			     "peek %S --dir %D --model %E --state s --tokens 1",
			     "rm %S --dir %D --model %E --state s --tokens 1",
			     "get %S --dir %D --model %X --state s --tokens 1",
			     "put %S --dir %D --model %X --state s --tokens 1 --kind full_state --file %B/in/p64k",
			     "peek %S --dir %D --model m --state %X --tokens 1",
			     "rm %S --dir %D --model %X --state s --tokens 1",
			     "restore %S %B/l3 --arena-dir %D --model %X --state s --tokens 1",
			     "stats %S --dir %D --model %X --state s" };
	for (unsigned i = 0; i < sizeof(d1) / sizeof(d1[0]); i++)
		add(2, i < 4 ? "--model" : (i == 6 ? "--state" : "--model"), F_SCRATCH, "%s", d1[i]);
	const char *d1b[] = { "get badidx --dir %D " Q " --tokens 1,2,3", "peek badidx --dir %D " Q " --tokens 1,2,3",
			      "rm badidx --dir %D " Q " --tokens 1,2,3",
			      "put badidx --dir %D " Q " --tokens 1,2,3 --kind full_state --file %B/in/p64k",
			      "ls badidx --dir %D", "clear badidx --dir %D", "stats badidx --dir %D",
			      "invalidate badidx " Z32 " --dir %D",
			      "restore badidx %B/l3 --arena-dir %D " Q " --tokens 1,2,3" };
	for (unsigned i = 0; i < sizeof(d1b) / sizeof(d1b[0]); i++)
		add(1, "index", 0, "%s", d1b[i]);

	/* d3: a FIFO planted as an arena file hung destroy (and anything that opened it) */
	add(1, "FIFO", 0, "destroy fifo --dir %%D");
	add(1, "FIFO", 0, "info fifo --dir %%D");
	add(1, "FIFO", 0, "fsck fifo --dir %%D --repair");

	/* d4: a read-only command given a mistyped L3 path created it (the directory tree, then refused) */
	add(1, "%B/typo", F_NOTYPO, "restore good %%B/typo --arena-dir %%D " Q " --tokens 1,2,3");
	add(1, "typo", F_NOTYPO, "l3 ls %%B/typo");
	add(1, "typo", F_NOTYPO, "l3 stats %%B/typo");
	add(1, "typo", F_NOTYPO, "l3 verify %%B/typo");
	add(1, "typo", F_NOTYPO, "l3 locate %%B/typo --tokens 1,2");
	add(1, "typo", F_NOTYPO, "stats good --dir %%D --l3 %%B/typo");
	add(1, "%B/nope/deeper", 0, "restore good %%B/nope/deeper --arena-dir %%D " Q " --tokens 1,2,3");
	add(1, "nope", 0, "l3 ls %%B/nope/deeper");
	add(1, "nope", 0, "l3 stats %%B/nope/deeper");
	add(1, "nope", 0, "l3 verify %%B/nope/deeper");
	add(1, "nope", 0, "l3 locate %%B/nope/deeper --tokens 1,2");
	add(1, "not an L3", 0, "restore good %%B/notl3 --arena-dir %%D " Q " --tokens 1,2,3");
	add(1, "not an L3", 0, "l3 ls %%B/notl3");

	/* d11: messages that say which rule failed, in the words of the object at hand */
	add(2, "--bogus", 0, "get good --bogus");
	add(2, "--dir", 0, "get good --dir");
	add(1, "/nonexistent", 0, "create cx --dir /nonexistent --size 16M");
	add(1, "directory", F_SCRATCH, "put %%S --dir %%D " Q " --tokens 4 --kind full_state --file %%B/in/dir");
	add(1, "empty", F_SCRATCH, "put %%S --dir %%D " Q " --tokens 4 --kind full_state --file %%B/in/empty");
	add(1, "payload_bytes", F_SCRATCH,
	    "put %%S --dir %%D " Q " --tokens 4 --kind kv_recurrent --kv-file %%B/in/kv --desc-json %%B/in/desc-wrong.json");
	add(1, "descriptor", F_SCRATCH, "put %%S --dir %%D " Q " --tokens 4 --kind kv_recurrent --kv-file %%B/in/kv");
	add(1, "digest", F_SCRATCH, "put %%S --dir %%D " Q " --tokens 4 --kind full_state --file %%B/in/p64k --digest " Z32);

	/* inputs that are not plain files never hang */
	add(1, "fifo", F_SCRATCH, "put %%S --dir %%D " Q " --tokens @%%B/in/fifo --kind full_state --file %%B/in/p64k");
	add(1, "fifo", F_SCRATCH, "put %%S --dir %%D " Q " --tokens 5 --kind full_state --file %%B/in/fifo");
	add(1, "fifo", F_SCRATCH,
	    "put %%S --dir %%D " Q " --tokens 5 --kind kv_recurrent --kv-file %%B/in/kv --desc-json %%B/in/fifo");
	add(1, "directory", F_SCRATCH, "get %%S --dir %%D " Q " --tokens @%%B/in/dir");
	add(1, "fifo", F_SCRATCH, "get %%S --dir %%D " Q " --tokens 1,2,3 --out %%B/in/fifo");
	add(1, "directory", F_SCRATCH, "get %%S --dir %%D " Q " --tokens 1,2,3 --out %%B/in/dir");
	add(1, "directory", 0, "l3 put %%B/l3 --tokens 1 --kind full_state --file %%B/in/dir");

	/* ten million tokens */
	/* an entry keeps its token ids (40 MB here): more than a scratch arena's budget */
	add(1, "10000000 token ids", F_SLOW | F_SCRATCH,
	    "put %%S --dir %%D " Q " --tokens @%%B/in/t10m --kind full_state --file %%B/in/p64k");
	add(1, "miss", F_SLOW | F_SCRATCH, "get %%S --dir %%D " Q " --tokens @%%B/in/t10m");
	add(1, "no L2 entry", F_SLOW | F_SCRATCH, "peek %%S --dir %%D " Q " --tokens @%%B/in/t10m");
	add(1, "no such", F_SLOW | F_SCRATCH, "rm %%S --dir %%D " Q " --tokens @%%B/in/t10m");
	add(0, "tokens 3", F_SLOW | F_SCRATCH | F_CHANGES, "restore %%S %%B/l3 --arena-dir %%D " Q " --tokens @%%B/in/t10m");
	add(0, "tokens 3", F_SLOW, "l3 locate %%B/l3 --tokens @%%B/in/t10m");
	add(2, "--tokens", F_SLOW | F_SCRATCH, "get %%S --dir %%D " Q " --tokens @%%B/in/t10m-bad");
	add(2, "--tokens", 0, "get good --dir %%D " Q " --tokens @%%B/in/tbad");
	add(2, "--tokens", 0, "get good --dir %%D " Q " --tokens 99999999999");
	add(2, "--tokens", 0, "get good --dir %%D " Q " --tokens %%E");
	add(2, "--tokens", 0, "get good --dir %%D " Q " --tokens ,,,");

	/* every subcommand: --help, an unknown option, a missing option argument, missing and extra
	 * arguments */
	const char *all[] = { "setup", "create", "info", "list", "destroy", "put", "get", "peek", "ls", "rm",
			      "invalidate", "clear", "stats", "l3", "restore", "tail", "trace", "fsck", "demo", "exporter",
			      "events", "lookup" };
	for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		add(0, "usage", 0, "%s --help", all[i]);
		add(2, "--bogus", 0, "%s --bogus", all[i]);
		add(2, "--bogus", 0, "%s --bogus=1 good", all[i]);
		add(2, "-Q", 0, "%s -Q good", all[i]);
	}
	const char *named[] = { "create", "info", "destroy", "put", "get", "peek", "ls", "rm", "invalidate",
				"clear", "stats", "restore", "tail", "fsck", "lookup" };
	for (unsigned i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		add(2, "NAME", 0, "%s", named[i]);
		add(2, "extra", 0, "%s good extra1 extra2 extra3", named[i]);
		const char *rest = !strcmp(named[i], "restore") ? " %B/l3" : !strcmp(named[i], "invalidate") ? " " Z32 : "";
		add(2, "bad/name", 0, "%s bad/name%s", named[i], rest);
		add(2, "name", 0, "%s %%X%s", named[i], rest);
	}
	const char *with_dir[] = { "info", "destroy", "ls", "clear", "stats", "tail", "fsck", "create", "list" };
	for (unsigned i = 0; i < sizeof(with_dir) / sizeof(with_dir[0]); i++)
		add(2, "--dir", 0, "%s good --dir", with_dir[i]);
	add(2, "extra", 0, "list extra");
	/* events and lookup (issue 28) */
	add(2, "NAME", 0, "events");
	add(2, "--endpoint", 0, "events good --dir %%D");
	add(2, "--format", 0, "events good --dir %%D --endpoint tcp://127.0.0.1:1 --format nope");
	add(2, "--block-size", 0, "events good --dir %%D --endpoint tcp://127.0.0.1:1 --block-size 0");
	add(2, "--heartbeat-ms", 0, "events good --dir %%D --endpoint tcp://127.0.0.1:1 --heartbeat-ms -5");
	add(2, "bad/name", 0, "events bad/name --status --dir %%D");
	add(1, "absent", 0, "events absent --status --dir %%D");
	add(0, "records", 0, "events good --status --json --dir %%D");
	add(0, "publisher: none", 0, "events good --status --dir %%D");
	add(1, "cannot bind", 0, "events good --dir %%D --endpoint nope://x");
	add(0, "held", 0, "lookup good --dir %%D " Q " --tokens 1,2,3");
	add(0, "l2_tokens", 0, "lookup good --dir %%D " Q " --tokens 1,2,3 --json");
	add(0, "l3_tokens", 0, "lookup good --dir %%D " Q " --tokens 1,2,3 --json --l3 %%B/l3");
	add(1, "nope", 0, "lookup good --dir %%D " Q " --tokens 1,2,3 --l3 %%B/nope");
	add(2, "--block", 0, "lookup good --dir %%D " Q " --tokens 1,2,3 --block 0");
	add(2, "--tokens", 0, "lookup good --dir %%D " Q);
	add(2, "--token-ids", 0, "ls good --dir %%D --token-ids");
	add(0, "token_ids", 0, "ls good --dir %%D --json --token-ids");
	add(0, "PREFIX", 0, "l3 ls %%B/l3 --prefixes");
	add(2, "--prefixes", 0, "l3 stats %%B/l3 --prefixes");
	add(2, "NAME", 0, "exporter");
	add(2, "bad/name", 0, "exporter good bad/name --once --dir %%D");
	add(2, "--listen", 0, "exporter good --listen");
	add(2, "--listen", 0, "exporter good --listen nope --dir %%D");
	add(1, "absent", 0, "exporter absent --once --dir %%D");
	add(2, "ACTION", 0, "l3");
	add(2, "nope", 0, "l3 nope %%B/l3");
	add(2, "DIR", 0, "l3 ls");
	add(2, "extra", 0, "l3 ls %%B/l3 extra");
	add(2, "extra", 0, "l3 stats %%B/l3 extra");
	add(2, "--bogus", 0, "l3 locate %%B/l3 --tokens 1 --bogus");
	add(2, "--tokens", 0, "l3 locate %%B/l3");
	add(2, "--segment-bytes", 0, "l3 init %%B/segx --segment-bytes 5");
	add(2, "--segment-bytes", 0, "l3 init %%B/segx --segment-bytes 65K");
	add(2, "--segment-bytes", 0, "l3 init %%B/segx --segment-bytes");
	add(2, "--segment-bytes", 0, "l3 stats %%B/l3 --segment-bytes 64K");
	add(2, "--tokens", 0, "l3 locate %%B/l3 --tokens");
	add(2, "--ns", 0, "l3 locate %%B/l3 --tokens 1 --ns");
	add(2, "--kind", 0, "l3 put %%B/l3 --tokens 1 --file %%B/in/p64k");
	add(2, "--kind", 0, "l3 put %%B/l3 --tokens 1 --kind nope --file %%B/in/p64k");
	add(2, "--budget", 0, "l3 put %%B/l3 --tokens 1 --kind full_state --file %%B/in/p64k --budget lots");
	add(2, "--min-free", 0, "l3 put %%B/l3 --tokens 1 --kind full_state --file %%B/in/p64k --min-free -1");
	add(2, "--mode", 0, "l3 put %%B/l3 --tokens 1 --kind full_state --file %%B/in/p64k --mode 9");
	add(2, "--group", 0, "l3 put %%B/l3 --tokens 1 --kind full_state --file %%B/in/p64k --group no-such-group-x");
	/* the janitor and the shared-directory options */
	add(2, "DIR", 0, "l3 janitor");
	add(2, "extra", 0, "l3 janitor %%B/l3 extra");
	add(2, "--bogus", 0, "l3 janitor %%B/l3 --bogus");
	add(2, "--loop", 0, "l3 janitor %%B/l3 --loop 0");
	add(2, "--loop", 0, "l3 janitor %%B/l3 --loop");
	add(2, "--count", 0, "l3 janitor %%B/l3 --count 3");
	add(2, "--budget", 0, "l3 janitor %%B/l3 --budget lots");
	add(1, "typo", F_NOTYPO, "l3 janitor %%B/typo");
	add(2, "--mode", 0, "l3 janitor %%B/l3 --mode 0440");
	add(2, "--group", 0, "l3 janitor %%B/l3 --group no-such-group-x");
	add(1, "not an L3", 0, "l3 janitor %%B/notl3");
	add(1, "--host", 0, "l3 ls %%B/l3 --host bad.host!");
	add(1, "--host", 0, "l3 janitor %%B/l3 --host %%X");
	add(2, "--host", 0, "l3 stats %%B/l3 --host");
	add(1, "typo", F_NOTYPO, "l3 stats %%B/typo --shared");
	add(2, "DIR", 0, "restore good");
	add(2, "--mode", 0, "restore good %%B/l3 " Q " --tokens 1 --arena-dir %%D --mode 0999");
	add(2, "--group", 0, "restore good %%B/l3 " Q " --tokens 1 --arena-dir %%D --group no-such-group-x");
	add(2, "--repeat", 0, "restore good %%B/l3 " Q " --tokens 1 --arena-dir %%D --repeat 0");
	add(2, "--repeat", 0, "restore good %%B/l3 " Q " --tokens 1 --arena-dir %%D --repeat x");
	add(2, "--model", 0, "restore good %%B/l3 --tokens 1 --arena-dir %%D");
	add(2, "--arena-dir", 0, "restore good %%B/l3 " Q " --tokens 1 --arena-dir");
	/* option values */
	const char *cvals[][2] = { { "--size", "abc" },  { "--size", "1K" },        { "--size", "2T" },
				   { "--size", "-5M" },  { "--size", "%E" },        { "--huge", "maybe" },
				   { "--mode", "999" },  { "--mode", "0666" },      { "--mode", "abc" },
				   { "--rings", "0" },   { "--rings", "5000" },     { "--ring-bytes", "3000" },
				   { "--ring-bytes", "5K" }, { "--index-entries", "0" }, { "--index-entries", "x" },
				   { "--l3-index-entries", "x" }, { "--l3-index-entries", "5000000" },
				   { "--l3-index-entries", "-1" }, { "--l3-index-refresh-ms", "0" },
				   { "--l3-index-refresh-ms", "1e3" },
				   { "--group", "no-such-group-x" }, { "--owner", "no-such-user-x" } };
	for (unsigned i = 0; i < sizeof(cvals) / sizeof(cvals[0]); i++) {
		if (!strcmp(cvals[i][0], "--owner"))
			continue;
		add(2, cvals[i][0], 0, "create cv --dir %%D --size 16M %s %s", cvals[i][0], cvals[i][1]);
	}
	add(2, "--size", 0, "create cv --dir %%D");
	const char *getopts[][2] = { { "--location-tokens", "x" }, { "--location-digest", "xyz" } };
	for (unsigned i = 0; i < 2; i++)
		add(2, getopts[i][0], 0, "get good --dir %%D " Q " --tokens 1 %s %s", getopts[i][0], getopts[i][1]);
	add(2, "--location", 0, "get good --dir %%D " Q " --tokens 1 --location-tokens 3");
	add(2, "--location-tokens", 0, "get good --dir %%D " Q " --tokens 1 --location-tokens 4294967296 --location-digest " Z32);
	add(2, "--max", 0, "ls good --dir %%D --max lots");
	add(2, "--key", 0, "rm good --dir %%D --key abc");
	add(2, "--key", 0, "rm good --dir %%D --key " Z32 " " Q " --tokens 1");
	add(2, "DIGEST", 0, "invalidate good nothex --dir %%D");
	add(2, "DIGEST", 0, "invalidate good --dir %%D");
	add(2, "--state", 0, "stats good --dir %%D --model m");
	add(2, "--hugepages", 0, "setup --hugepages many");
	add(2, "--group", 0, "setup --group no-such-group-x");
	add(2, "--mode", 0, "setup --group 0 --mode 8888");
	add(2, "--mode", 0, "setup --mode 0770");
	add(2, "extra", 0, "setup extra");
	add(2, "--interval", 0, "trace --interval 0");
	add(2, "--pin-dir", 0, "trace --pin-dir relative");
	add(2, "--workers", 0, "demo --workers 0");
	const char *putbad[][2] = { { "--kind", "nope" }, { "--origin", "elsewhere" }, { "--digest", "xyz" } };
	for (unsigned i = 0; i < 3; i++)
		add(2, putbad[i][0], 0, "put good --dir %%D " Q " --tokens 1 --kind full_state --file %%B/in/p64k %s %s",
		    putbad[i][0], putbad[i][1]);
	add(2, "--file", 0, "put good --dir %%D " Q " --tokens 1 --kind full_state");
	add(2, "--file", 0, "put good --dir %%D " Q " --tokens 1 --kind kv_recurrent --file %%B/in/p64k");
	add(2, "--kind", 0, "put good --dir %%D " Q " --tokens 1 --file %%B/in/p64k");
	add(2, "--tokens", 0, "put good --dir %%D " Q " --kind full_state --file %%B/in/p64k");
	add(1, "not a KV descriptor", F_SCRATCH,
	    "put %%S --dir %%D " Q " --tokens 1 --kind kv_recurrent --kv-file %%B/in/kv --desc-json %%B/in/desc-bad.json");
	add(1, "no such file", F_SCRATCH, "put %%S --dir %%D " Q " --tokens 1 --kind full_state --file %%B/in/missing");
	add(1, "no such file", 0, "get good --dir %%D " Q " --tokens @%%B/in/missing");
	/* top level */
	add(2, "COMMAND", 0, "%s", "");
	add(2, "''", 0, "%%E");
	add(2, "nosuch", 0, "nosuch");
	add(0, "stagecache", 0, "--version");
	add(0, "usage", 0, "--help");

	/* every arena command against every kind of garbage named stagecache.*; nothing changes */
	const char *garbage[] = { "garbage", "empty", "fifo", "dir", "link", "dangling", "trunc", "badver", "ww", "other" };
	for (unsigned g = 0; g < sizeof(garbage) / sizeof(garbage[0]); g++)
		for (int c = 0; c < NARENA_CMDS; c++) {
			char t[600];
			/* an arena's own file, however broken (truncated, another version, world-writable,
			 * another owner's), is destroyed: those cases run last */
			int magic = g >= 6;
			if (magic && !strncmp(arena_cmds[c], "destroy", 7))
				continue;
			fill(t, sizeof(t), arena_cmds[c], garbage[g]);
			add(1, NULL, !strcmp(garbage[g], "other") ? F_ROOT : 0, "%s", t);
		}
	/* the same commands with a name nothing has, and with a directory that does not exist */
	for (int c = 0; c < NARENA_CMDS; c++) {
		char t[600];
		if (!strncmp(arena_cmds[c], "create", 6))
			continue;
		fill(t, sizeof(t), arena_cmds[c], "absent");
		add(1, "absent", 0, "%s", t);
		fill(t, sizeof(t), arena_cmds[c], "absent");
		char *dd = strstr(t, "%D");
		if (dd) {
			char t2[700];
			snprintf(t2, sizeof(t2), "%.*s%%B/no-such-dir%s", (int)(dd - t), t, dd + 2);
			add(1, "no-such-dir", 0, "%s", t2);
		}
	}
	/* trusting another user's arena explicitly */
	add(0, "entries", F_ROOT, "stats other --dir %%D --owner nobody");
	add(0, "entries", F_ROOT, "stats other --dir %%D --owner 65534");
	add(1, "owned by", F_ROOT, "stats other --dir %%D --owner root");
	add(2, "--owner", 0, "stats good --dir %%D --owner no-such-user-x");
	/* the good arena: reads work */
	add(0, "entries", 0, "stats good --dir %%D");
	add(0, "hit", F_CHANGES, "get good --dir %%D " Q " --tokens 1,2,3"); /* sets the entry's CLOCK hint */
	add(0, "clean", 0, "fsck good --dir %%D --deep");
	add(1, "already exists", 0, "create good --dir %%D --size 16M");
	add(0, NULL, 0, "list --dir %%D");
	add(0, NULL, 0, "list --dir %%D --json");
	add(1, "no such", F_SCRATCH, "rm %%S --dir %%D --key " Z32);

	/* L3 directories with garbage (below) and, last, destroy of broken arenas' own files */
	const char *l3dirs[] = { "l3g", "l3s", "l3f" };
	for (unsigned i = 0; i < 3; i++) {
		int bad_state = i > 0;
		add(bad_state ? 1 : -1, NULL, 0, "l3 ls %%B/%s", l3dirs[i]);
		add(bad_state ? 1 : 0, NULL, 0, "l3 stats %%B/%s", l3dirs[i]);
		add(bad_state ? 1 : -1, NULL, 0, "l3 locate %%B/%s --tokens 1,2,3", l3dirs[i]);
		add(bad_state ? 1 : -1, NULL, F_SCRATCH | (bad_state ? 0 : F_CHANGES),
		    "restore %%S %%B/%s --arena-dir %%D " Q " --tokens 1,2,3", l3dirs[i]);
		add(1, NULL, 0, "l3 put %%B/%s --tokens 1,2 --kind full_state --file %%B/in/empty", l3dirs[i]);
	}
	add(0, "destroyed", F_CHANGES, "destroy trunc --dir %%D");
	add(0, "destroyed", F_CHANGES, "destroy badver --dir %%D");
	add(0, "destroyed", F_CHANGES, "destroy ww --dir %%D");
	add(0, "destroyed", F_CHANGES | F_ROOT, "destroy other --dir %%D");
	add(1, "symbolic link", 0, "destroy link --dir %%D"); /* the link stays, and what it points to */
	/* the location index options */
	add(0, "ixopt", F_CHANGES, "create ixopt --dir %%D --size 8M --l3-index-entries 0 --no-token-verify "
	    "--l3-index-refresh-ms 5");
	add(0, "NOT verified", 0, "info ixopt --dir %%D");
	add(0, "destroyed", F_CHANGES, "destroy ixopt --dir %%D");
	add(0, "destroyed", F_CHANGES, "destroy good --dir %%D");
}

/* ---- the test ---- */

static void check_case(int i)
{
	const struct cli_case *c = &cases[i];
	/* while iterating: SC_CLI_MATCH=TEXT runs only the cases whose template contains TEXT */
	const char *only = getenv("SC_CLI_MATCH");
	if (only && !strstr(c->args, only))
		return;
	if ((c->flags & F_ROOT) && !is_root) {
		sc_skip("cli case %d (%s): needs root (a file owned by another user)", i, c->args);
		return;
	}
	char scratch[64] = "";
	if (c->flags & F_SCRATCH) {
		snprintf(scratch, sizeof(scratch), "scr%d", i);
		sc_arena_close(make_arena(scratch, 1));
	}
	char **argv = expand(c->args, scratch);
	char shown[600];
	snprintf(shown, sizeof(shown), "%s", c->args);
	char *before = c->flags & F_CHANGES ? NULL : snapshot();
	static struct res r;
	run_argv(argv, c->flags & F_SLOW ? 120 : 20, &r);
	ck_assert_msg(r.code != -1000, "case %d '%s': hangs (killed after %.0f s)", i, shown, r.secs);
	ck_assert_msg(r.code >= 0, "case %d '%s': killed by signal %d\nstderr: %.800s", i, shown, -r.code, r.err);
	int want = c->want;
	if (want == -1)
		ck_assert_msg(r.code == 0 || r.code == 1, "case %d '%s': exit %d, want 0 or 1\nstderr: %.800s", i, shown,
			      r.code, r.err);
	else if (c->flags & F_ANY01)
		ck_assert_msg(r.code <= 1, "case %d '%s': exit %d\nstderr: %.800s", i, shown, r.code, r.err);
	else
		ck_assert_msg(r.code == want, "case %d '%s': exit %d, want %d\nstdout: %.500s\nstderr: %.800s", i, shown,
			      r.code, want, r.out, r.err);
	ck_assert_msg(!strstr(r.err, "(null)") && !strstr(r.out, "(null)"), "case %d '%s': prints (null)", i, shown);
	ck_assert_msg(longest_line(r.err) <= 400, "case %d '%s': stderr line of %zu characters", i, shown,
		      longest_line(r.err));
	if (r.code == 1 || (want == -1 && r.code == 1 && r.errn)) {
		ck_assert_msg(count_lines(r.err) == 1, "case %d '%s': a failure prints %d lines on stderr, want 1:\n%.800s", i,
			      shown, count_lines(r.err), r.err);
		ck_assert_msg(!strncmp(r.err, "stagecache ", 11), "case %d '%s': stderr does not say who: %.300s", i, shown,
			      r.err);
	}
	if (r.code == 2) {
		int nl = count_lines(r.err);
		ck_assert_msg(nl >= 1 && nl <= 2, "case %d '%s': a usage error prints %d lines:\n%.800s", i, shown, nl, r.err);
	}
	if (c->needle) {
		char needle[700];
		snprintf(needle, sizeof(needle), "%s", c->needle);
		char *b = strstr(needle, "%B");
		if (b) {
			char t[700];
			snprintf(t, sizeof(t), "%.*s%s%s", (int)(b - needle), needle, base, b + 2);
			snprintf(needle, sizeof(needle), "%s", t);
		}
		const char *where = r.code == 0 ? r.out : r.err;
		if (r.code == 2) { /* the first line names it */
			char first[1024];
			snprintf(first, sizeof(first), "%.*s", (int)strcspn(r.err, "\n"), r.err);
			ck_assert_msg(strcasestr(first, needle), "case %d '%s': usage error does not name '%s':\n%.800s", i,
				      shown, needle, r.err);
		} else {
			ck_assert_msg(strcasestr(where, needle), "case %d '%s': output does not mention '%s':\nstdout: %.400s\nstderr: %.800s",
				      i, shown, needle, r.out, r.err);
		}
	}
	if (before) {
		char *after = snapshot();
		if (strcmp(before, after)) {
			/* show the first line that differs */
			const char *p = before, *q = after;
			while (*p && *p == *q)
				p++, q++;
			while (p > before && p[-1] != '\n')
				p--;
			while (q > after && q[-1] != '\n')
				q--;
			ck_abort_msg("case %d '%s' (exit %d) changed the fixture:\nbefore: %.*s\nafter:  %.*s\nstderr: %.800s", i,
				     shown, r.code, (int)strcspn(p, "\n"), p, (int)strcspn(q, "\n"), q, r.err);
		}
		free(after);
		free(before);
	}
	if (c->flags & F_NOTYPO) {
		char typo[300];
		snprintf(typo, sizeof(typo), "%s/typo", base);
		ck_assert_msg(access(typo, F_OK) != 0, "case %d '%s': created %s", i, shown, typo);
	}
	if (c->flags & F_SCRATCH)
		sc_arena_destroy(adir, scratch);
}

START_TEST(cli_case)
{
	check_case(_i);
}
END_TEST

START_TEST(cli_case_count)
{
	/* the suite's size, for the log: each case above is one Check test */
	printf("cli: %d cases\n", ncases);
	ck_assert_int_ge(ncases, 300);
}
END_TEST

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	build_cases();
	TCase *tc = tcase_create("cases");
	tcase_set_timeout(tc, 200);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, cli_case_count);
	tcase_add_loop_test(tc, cli_case, 0, ncases);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(cli_suite)
