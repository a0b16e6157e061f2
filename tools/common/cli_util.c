/* tools/common/cli_util.c — parsing and printing helpers shared by the subcommands. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <mntent.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

int cli_parse_size(const char *s, uint64_t *out)
{
	if (!s || !*s || *s == '-')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 0: break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -1;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end)
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int cli_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	if (!s || !*s || *s == '-')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

const char *cli_human(uint64_t bytes, char *buf, size_t len)
{
	static const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int i = 0;
	while (v >= 1024 && i < 4)
		v /= 1024, i++;
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, u[i]);
	return buf;
}

void cli_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

int cli_fail(const char *cmd, int err, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "stagecache %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, ": %s", sc_strerror(err));
	fputc('\n', stderr);
	return EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "stagecache %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntry 'stagecache %s --help'\n", cmd);
	return EXIT_USAGE;
}

int cli_rm_rf(const char *dir)
{
	pid_t pid = fork();
	if (pid == 0) {
		execlp("rm", "rm", "-rf", "--one-file-system", dir, (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* ---- options ---- */

void cli_getopt_begin(void)
{
	optind = 1;
	opterr = 0;
}

int cli_opt_error(const char *cmd, int c, char **argv)
{
	/* the element getopt just looked at; for a short option inside a group, the letter */
	const char *arg = optind > 1 ? argv[optind - 1] : NULL;
	char shortopt[3] = { '-', (char)optopt, 0 };
	const char *what = arg && arg[0] == '-' && arg[1] == '-' ? arg : optopt ? shortopt : arg ? arg : "?";
	char name[64];
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(what, "="), what);
	if (c == ':')
		return cli_usage_error(cmd, "option '%s' needs a value", cli_q(name));
	return cli_usage_error(cmd, "unknown option '%s'", cli_q(what));
}

/* One value of row @o: 0, or EXIT_USAGE after "bad --NAME 'VALUE'HINT". */
static int opt_value(const char *cmd, const struct cli_opt *o, const char *arg)
{
	uint64_t v = 0;
	double d = 0;
	char *end;
	int bad;
	switch (o->kind) {
	case CLI_STR: *(const char **)o->dst = arg; return 0;
	case CLI_FLAG: *(int *)o->dst = 1; return 0;
	case CLI_UNFLAG: *(int *)o->dst = 0; return 0;
	case CLI_BITS: *(uint32_t *)o->dst |= (uint32_t)o->max; return 0;
	case CLI_FN: return o->fn(cmd, arg, o->dst);
	case CLI_OWNER: return cli_parse_owner(cmd, arg) ? EXIT_USAGE : 0;
	case CLI_MODE:
	case CLI_GROUP: {
		char opt[64];
		snprintf(opt, sizeof(opt), "--%s", o->name);
		if (o->kind == CLI_MODE)
			return cli_parse_mode(cmd, opt, arg, (uint32_t)o->max, o->dst) ? EXIT_USAGE : 0;
		return cli_parse_group(cmd, opt, arg, o->dst) ? EXIT_USAGE : 0;
	}
	case CLI_U32:
	case CLI_U64: bad = cli_parse_u64(arg, o->max, &v) || v < o->min; break;
	case CLI_SIZE:
	case CLI_SIZE32:
	case CLI_POW2:
		bad = cli_parse_size(arg, &v) || v < o->min || v > o->max || (o->kind == CLI_POW2 && (v & (v - 1)));
		break;
	case CLI_REAL:
		d = strtod(arg, &end);
		bad = end == arg || *end || !(d >= (double)o->min && d <= (double)o->max);
		break;
	default: bad = 1;
	}
	if (bad) {
		if (o->want)
			return cli_usage_error(cmd, "--%s '%s': want %s", o->name, cli_q(arg), o->want);
		if (o->hint)
			return cli_usage_error(cmd, "bad --%s '%s'%s", o->name, cli_q(arg), o->hint);
		return cli_usage_error(cmd, "bad --%s '%s' (%llu-%llu)", o->name, cli_q(arg), (unsigned long long)o->min,
				       (unsigned long long)o->max);
	}
	if (o->kind == CLI_U32 || o->kind == CLI_SIZE32 || o->kind == CLI_POW2)
		*(uint32_t *)o->dst = (uint32_t)v;
	else if (o->kind == CLI_REAL)
		*(double *)o->dst = d;
	else
		*(uint64_t *)o->dst = v;
	return 0;
}

int cli_parse_opts(const char *cmd, int argc, char **argv, const struct cli_opt *t, void (*usage)(FILE *))
{
	enum { ROW0 = 256, MAX_ROWS = 32 }; /* getopt values of the rows: past every letter */
	struct option opts[MAX_ROWS + 2] = { { "help", no_argument, 0, 'h' } };
	int n = 0, c;
	for (; t[n].name; n++) {
		if (n == MAX_ROWS)
			return cli_usage_error(cmd, "internal error: more than %d options", MAX_ROWS);
		enum cli_opt_kind k = t[n].kind;
		int has_arg = k == CLI_FLAG || k == CLI_UNFLAG || k == CLI_BITS ? no_argument : required_argument;
		opts[n + 1] = (struct option){ t[n].name, has_arg, 0, ROW0 + n };
	}
	cli_getopt_begin();
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h') {
			if (usage)
				usage(stdout);
			return CLI_HELP;
		}
		if (c < ROW0 || c >= ROW0 + n)
			return cli_opt_error(cmd, c, argv);
		if (opt_value(cmd, &t[c - ROW0], optarg))
			return EXIT_USAGE;
	}
	return t[n].want ? cli_operand(cmd, t[n].want, argc, argv, t[n].dst) : 0;
}

int cli_operand(const char *cmd, const char *what, int argc, char **argv, const char **out)
{
	if (optind >= argc)
		return cli_usage_error(cmd, "missing %s", what);
	if (optind < argc - 1)
		return cli_usage_error(cmd, "unexpected argument '%s'", cli_q(argv[optind + 1]));
	*out = argv[optind];
	return 0;
}

const char *cli_q(const char *s)
{
	static char bufs[8][80];
	static unsigned k;
	char *b = bufs[k++ % 8];
	size_t n = strlen(s), i, o = 0;
	for (i = 0; i < n && o < 40; i++)
		b[o++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	b[o] = 0;
	if (i < n)
		snprintf(b + o, sizeof(bufs[0]) - o, "... (%zu bytes)", n);
	return b;
}

int cli_check_name(const char *cmd, const char *name)
{
	size_t n = strlen(name);
	if (n < 1 || n > SC_NAME_MAX || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n ||
	    strspn(name, ".") == n)
		return cli_usage_error(cmd, "invalid arena name '%s' (1-64 characters of A-Z a-z 0-9 . _ -)", cli_q(name));
	return 0;
}

int cli_check_identity(const char *cmd, const char *opt, const char *v, size_t max, int may_be_empty)
{
	size_t n = strnlen(v, max + 1);
	if (!n && !may_be_empty)
		return cli_usage_error(cmd, "%s must not be empty", opt);
	if (n > max)
		return cli_usage_error(cmd, "%s is longer than %zu bytes ('%s')", opt, max, cli_q(v));
	return 0;
}

int cli_parse_mode(const char *cmd, const char *opt, const char *arg, uint32_t max, uint32_t *mode)
{
	char *end;
	errno = 0;
	unsigned long m = strtoul(arg, &end, 8);
	if (!*arg || *end || errno || *arg == '-' || m > max)
		return cli_usage_error(cmd, "%s '%s': want an octal mode up to %04o, e.g. 0660", opt, cli_q(arg), max);
	*mode = (uint32_t)m;
	return 0;
}

int cli_parse_group(const char *cmd, const char *opt, const char *arg, int64_t *gid)
{
	uint64_t v;
	struct group *g = *arg ? getgrnam(arg) : NULL;
	if (g)
		*gid = g->gr_gid;
	else if (cli_parse_u64(arg, 0x7fffffff, &v) == 0)
		*gid = (int64_t)v;
	else
		return cli_usage_error(cmd, "%s '%s': no such group", opt, cli_q(arg));
	return 0;
}

static int64_t owner_uid = -1;
static int owner_any;

int cli_parse_owner(const char *cmd, const char *arg)
{
	uint64_t v;
	struct passwd *pw = *arg ? getpwnam(arg) : NULL;
	if (!strcmp(arg, "any"))
		owner_any = 1;
	else if (pw)
		owner_uid = pw->pw_uid;
	else if (cli_parse_u64(arg, 0xfffffffe, &v) == 0)
		owner_uid = (int64_t)v;
	else
		return cli_usage_error(cmd, "--owner '%s': no such user (a name, a number, or 'any')", cli_q(arg));
	return 0;
}

/* ---- files ---- */

static const char *file_kind(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISLNK(m) ? "a symbolic link" : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a regular file";
}

int cli_read_input(const char *cmd, const char *what, const char *path, uint8_t **buf, uint64_t *len)
{
	*buf = NULL;
	*len = 0;
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return cli_fail(cmd, 0, "cannot read %s %s: %s", what, path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return cli_fail(cmd, 0, "cannot read %s %s: %s", what, path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return cli_fail(cmd, 0, "cannot read %s %s: it is %s, not a regular file", what, path, file_kind(st.st_mode));
	}
	uint64_t cap = (uint64_t)st.st_size + 1, n = 0;
	uint8_t *b = malloc(cap + 1);
	if (!b) {
		char h[32];
		close(fd);
		return cli_fail(cmd, 0, "cannot read %s %s: %s do not fit in memory", what, path,
				cli_human((uint64_t)st.st_size, h, sizeof(h)));
	}
	for (;;) {
		if (n == cap) { /* the file grew while we read it */
			uint8_t *nb = realloc(b, cap * 2 + 1);
			if (!nb) {
				free(b);
				close(fd);
				return cli_fail(cmd, 0, "cannot read %s %s: out of memory", what, path);
			}
			b = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, b + n, cap - n > (1u << 30) ? (1u << 30) : cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(b);
			close(fd);
			return cli_fail(cmd, 0, "cannot read %s %s: %s", what, path, strerror(e));
		}
		if (r == 0)
			break;
		n += (uint64_t)r;
	}
	close(fd);
	b[n] = 0;
	*buf = b;
	*len = n;
	return EXIT_OK;
}

FILE *cli_open_output(const char *cmd, const char *path)
{
	if (!strcmp(path, "-"))
		return stdout;
	/* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of waiting for one */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0666);
	if (fd < 0) {
		int e = errno;
		if (e == ENXIO)
			cli_fail(cmd, 0, "cannot write %s: it is a FIFO and no process is reading it", path);
		else if (e == EISDIR)
			cli_fail(cmd, 0, "cannot write %s: it is a directory", path);
		else
			cli_fail(cmd, 0, "cannot write %s: %s", path, strerror(e));
		return NULL;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* a reader is there: ordinary blocking writes */
	FILE *f = fdopen(fd, "wb");
	if (!f) {
		close(fd);
		cli_fail(cmd, 0, "cannot write %s: %s", path, strerror(errno));
	}
	return f;
}

/* ---- arenas ---- */

int cli_open_errno;

struct sc_arena_open_opts cli_open_opts(const char *dir)
{
	return (struct sc_arena_open_opts){ .dir = dir, .flags = owner_any ? SC_ARENA_OPEN_ANY_OWNER : 0,
					    .owner_uid = owner_uid > 0 ? (uint32_t)owner_uid : 0 };
}


int cli_open_arena(const char *cmd, const char *dir, const char *name, struct sc_arena **out)
{
	*out = NULL;
	int rc = cli_check_name(cmd, name);
	if (rc)
		return rc;
	struct sc_arena_open_opts o = cli_open_opts(dir);
	cli_open_errno = sc_arena_open_with(name, &o, out);
	if (cli_open_errno == 0)
		return EXIT_OK;
	return cli_arena_error(cmd, cli_open_errno, dir, name);
}

static const char *user_name(uint32_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(buf, len, "%s (uid %u)", pw->pw_name, uid);
	else
		snprintf(buf, len, "uid %u", uid);
	return buf;
}

static const char *group_name(uint32_t gid, char *buf, size_t len)
{
	struct group *g = getgrgid(gid);
	if (g)
		snprintf(buf, len, "%s", g->gr_name);
	else
		snprintf(buf, len, "%u", gid);
	return buf;
}

static int dir_missing(const char *dir)
{
	struct stat st;
	return dir && stat(dir, &st) < 0 && errno == ENOENT;
}

int cli_arena_error(const char *cmd, int rc, const char *dir, const char *name)
{
	struct sc_arena_file fi;
	int have = sc_arena_file_stat(dir, name, &fi) == 0;
	const char *what = have ? fi.path : cli_q(name);
	char u[64], g[64];
	switch (rc) {
	case -EINVAL:
		return cli_check_name(cmd, name) ? EXIT_USAGE : cli_fail(cmd, 0, "cannot open arena '%s': invalid options", cli_q(name));
	case -ENOENT:
		if (dir_missing(dir))
			return cli_fail(cmd, 0, "directory %s does not exist", dir);
		return cli_fail(cmd, 0, "no arena named '%s'%s%s (see 'stagecache list')", cli_q(name), dir ? " in " : "",
				dir ? dir : "");
	case -EBADMSG:
		if (have && !S_ISREG(fi.mode))
			return cli_fail(cmd, 0, "%s is %s, not an arena file; it was left untouched", what, file_kind(fi.mode));
		if (have && fi.size < 4096)
			return cli_fail(cmd, 0, "%s is not a stagecache arena (truncated: %llu bytes); the file was not changed",
					what, (unsigned long long)fi.size);
		return cli_fail(cmd, 0, "%s is not a stagecache arena (bad magic, corrupted header or truncated); the file "
				"was not changed", what);
	case -EPROTO: {
		uint32_t v = 0;
		if (sc_arena_file_version(dir, name, &v) == 0)
			return cli_fail(cmd, 0, "%s has layout version %u, this stagecache uses layout version %u", what, v,
					sc_arena_layout_version());
		return cli_fail(cmd, 0, "%s has another layout version than this stagecache (%u)", what,
				sc_arena_layout_version());
	}
	case -EPERM:
		if (have && (fi.mode & S_IWOTH))
			return cli_fail(cmd, 0, "%s is world-writable (mode %04o): anyone could corrupt it, so it is refused",
					what, fi.mode & 07777);
		if (have) {
			struct passwd *pw = getpwuid(fi.uid);
			char who[64];
			snprintf(who, sizeof(who), "%s", pw ? pw->pw_name : "");
			if (!pw)
				snprintf(who, sizeof(who), "%u", fi.uid);
			return cli_fail(cmd, 0, "%s is owned by %s, not by you or root: refused (pass --owner %s if you trust "
					"that user)", what, user_name(fi.uid, u, sizeof(u)), who);
		}
		return cli_fail(cmd, 0, "arena '%s' is refused: world-writable or owned by a user not trusted", cli_q(name));
	case -EACCES:
		if (have)
			return cli_fail(cmd, 0, "permission denied: %s is mode %04o, owner %s, group %s", what, fi.mode & 07777,
					user_name(fi.uid, u, sizeof(u)), group_name(fi.gid, g, sizeof(g)));
		return cli_fail(cmd, 0, "permission denied: you may not look up or open arena '%s'%s%s (its directory is not "
				"searchable by you)", cli_q(name), dir ? " in " : "", dir ? dir : "");
	case -EAGAIN:
		return cli_fail(cmd, 0, "arena '%s' is still being created by another process (or its creator died): try "
				"again, or destroy it", cli_q(name));
	case -EUSERS:
		/* a user who may read the file but not write it can lock every slot's byte (a read lock):
		 * that, not the attached processes, is then the cause */
		if (have && ((fi.mode & S_IROTH) || ((fi.mode & S_IRGRP) && !(fi.mode & S_IWGRP))))
			return cli_fail(cmd, 0, "arena '%s': every reader slot's lock is held, and %s is mode %04o: users who "
					"may read it but not write it can hold those locks (chmod it 0600, or 0660 with a group)",
					cli_q(name), what, fi.mode & 07777);
		return cli_fail(cmd, 0, "arena '%s': every reader slot is taken, by attached processes or by locks on "
				"their bytes ('stagecache info %s' shows which)", cli_q(name), cli_q(name));
	case -EDQUOT: {
		struct sc_arena_open_opts o = cli_open_opts(dir);
		struct sc_arena_info in;
		if (sc_arena_inspect(name, &o, &in) == 0)
			return cli_fail(cmd, 0, "arena '%s': processes of your user (uid %u) already hold %u of its reader slots, "
					"as many as one user may (set at creation, --max-slots-per-user)", cli_q(name),
					(unsigned)geteuid(), in.slots_per_user);
		return cli_fail(cmd, 0, "arena '%s': processes of your user already hold as many of its reader slots as "
				"one user may", cli_q(name));
	}
	case -ENOTRECOVERABLE:
		return cli_fail(cmd, 0, "arena '%s' is marked unrepairable (by fsck, or by someone who can write "
				"its file): destroy it and create it again",
				cli_q(name));
	default:
		return cli_fail(cmd, 0, "cannot open arena '%s': %s", cli_q(name), rc < -4095 ? "?" : strerror(-rc));
	}
}

int cli_l2_error(const char *cmd, int rc, const char *name, const char *what)
{
	switch (rc) {
	case -EBADMSG:
		return cli_fail(cmd, 0, "%s: the L2 index of arena '%s' is corrupted (run 'stagecache fsck %s --repair')", what,
				cli_q(name), cli_q(name));
	case -ENOTRECOVERABLE:
		return cli_fail(cmd, 0, "arena '%s' is marked unrepairable (by fsck, or by someone who can write "
				"its file): destroy it and create it again",
				cli_q(name));
	case -EMFILE:
		return cli_fail(cmd, 0, "%s: this handle holds the most leases it may (%d)", what, SC_LEASES_MAX);
	default:
		return cli_fail(cmd, 0, "%s on arena '%s': %s", what, cli_q(name), sc_strerror(rc));
	}
}

const char *cli_hugetlbfs_mount(char *buf, size_t len)
{
	FILE *f = setmntent("/proc/mounts", "r");
	struct mntent *m;
	const char *found = NULL;
	while (f && (m = getmntent(f))) {
		if (strcmp(m->mnt_type, "hugetlbfs"))
			continue;
		const char *ps = hasmntopt(m, "pagesize");
		if (ps && strncmp(ps, "pagesize=2M", 11) && strncmp(ps, "pagesize=2048k", 14))
			continue;
		if (!found || !strcmp(m->mnt_dir, "/dev/hugepages")) {
			snprintf(buf, len, "%s", m->mnt_dir);
			found = buf;
		}
	}
	if (f)
		endmntent(f);
	return found;
}

void cli_counters_read(struct sc_arena *a, int max_stages, struct cli_counters *c)
{
	memset(c, 0, sizeof(*c));
	c->nrings = c->nstages = -1;
	c->have_ps = sc_promote_stats(a, &c->ps) == 0;
	c->have_xs = sc_l3_index_stats(a, &c->xs) == 0;
	c->have_info = sc_arena_info(a, &c->info) == 0;
	c->have_ms = sc_miss_stats(a, 0, &c->all_misses) == 0;
	if (c->have_info && (c->rings = calloc(c->info.ring_count + 1, sizeof(*c->rings)))) {
		c->nrings = sc_ring_stats(a, c->rings, c->info.ring_count);
		if (c->nrings > (int)c->info.ring_count)
			c->nrings = (int)c->info.ring_count;
	}
	int n = sc_l2_stage_ids(a, NULL, 0);
	if (n > max_stages)
		n = max_stages;
	c->nstages = n;
	if (n <= 0)
		return;
	c->ids = calloc((size_t)n, sizeof(*c->ids));
	c->stages = calloc((size_t)n, sizeof(*c->stages));
	c->misses = calloc((size_t)n, sizeof(*c->misses));
	n = c->ids && c->stages && c->misses ? sc_l2_stage_ids(a, c->ids, (unsigned)n) : -1;
	c->nstages = n < 0 ? -1 : 0;
	for (int i = 0; i < n && i < max_stages; i++) {
		if (sc_l2_stats_id(a, c->ids[i], &c->stages[c->nstages]) == 0) {
			if (sc_miss_stats(a, c->ids[i], &c->misses[c->nstages]))
				memset(&c->misses[c->nstages], 0, sizeof(c->misses[0]));
			c->ids[c->nstages++] = c->ids[i];
		}
	}
}

void cli_json_misses(FILE *f, const struct sc_miss_stats *m, int details)
{
	for (int k = 0; k < 2; k++) {
		const uint64_t *v = k ? m->restore : m->l2;
		fprintf(f, ",\"%s\":{", k ? "restore_misses" : "l2_misses");
		for (int i = 0; i < SC_MISS_COUNT; i++)
			fprintf(f, "%s\"%s\":%llu", i ? "," : "", sc_miss_reason_name(i), (unsigned long long)v[i]);
		fprintf(f, "}");
	}
	if (!details)
		return;
	fprintf(f, ",\"l2_misses_refused\":{");
	for (int i = 0; i < SC_L2_REFUSE_REASONS; i++)
		fprintf(f, "%s\"%s\":%llu", i ? "," : "", sc_l2_refusal_name(i), (unsigned long long)m->l2_refused[i]);
	fprintf(f, "},\"restore_deadline\":{");
	for (int i = 0; i < SC_DEADLINE_COUNT; i++)
		fprintf(f, "%s\"%s\":%llu", i ? "," : "", sc_deadline_detail_name(i), (unsigned long long)m->deadline[i]);
	fprintf(f, "}");
}

void cli_text_misses(FILE *f, const struct sc_miss_stats *m, const char *indent)
{
	for (int k = 0; k < 2; k++) {
		const uint64_t *v = k ? m->restore : m->l2;
		uint64_t n = 0;
		for (int i = 0; i < SC_MISS_COUNT; i++)
			n += v[i];
		if (!n)
			continue;
		fprintf(f, "%s%s %llu:", indent, k ? "restores with no state" : "L2 misses", (unsigned long long)n);
		for (int i = 0; i < SC_MISS_COUNT; i++) {
			if (!v[i])
				continue;
			fprintf(f, " %s %llu", sc_miss_reason_name(i), (unsigned long long)v[i]);
			const uint64_t *d = !k && i == SC_MISS_REFUSED ? m->l2_refused : k && i == SC_MISS_DEADLINE ? m->deadline : NULL;
			int nd = d == m->l2_refused ? SC_L2_REFUSE_REASONS : SC_DEADLINE_COUNT;
			int any = 0;
			for (int j = 0; d && j < nd; j++)
				if (d[j])
					fprintf(f, "%s%s %llu", any++ ? ", " : " (",
						d == m->l2_refused ? sc_l2_refusal_name(j) : sc_deadline_detail_name(j),
						(unsigned long long)d[j]);
			if (any)
				fprintf(f, ")");
		}
		fprintf(f, "\n");
	}
}

void cli_counters_free(struct cli_counters *c)
{
	free(c->misses);
	free(c->rings);
	free(c->ids);
	free(c->stages);
}
