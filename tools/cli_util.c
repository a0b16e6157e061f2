/* tools/cli_util.c — parsing and printing helpers shared by the subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
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

int cli_open_arena(const char *cmd, const char *dir, const char *name, struct sc_arena **out)
{
	int rc = sc_arena_open_dir(dir, name, out);
	if (rc == 0)
		return 0;
	switch (rc) {
	case -ENOENT:
		cli_fail(cmd, 0, "no arena named '%s'%s%s (see 'stagecache list')", name, dir ? " in " : "", dir ? dir : "");
		break;
	case -EBADMSG:
		cli_fail(cmd, 0, "'%s' is not a stagecache arena (bad magic, corrupted header or truncated file); the file was not changed", name);
		break;
	case -EPROTO: {
		uint32_t v = 0;
		if (sc_arena_file_version(dir, name, &v) == 0)
			cli_fail(cmd, 0, "arena '%s' has layout version %u, this stagecache uses layout version %u", name, v,
				 sc_arena_layout_version());
		else
			cli_fail(cmd, rc, "arena '%s'", name);
		break;
	}
	case -EINVAL:
		cli_fail(cmd, 0, "invalid arena name '%s' (1-64 characters of A-Z a-z 0-9 . _ -)", name);
		break;
	default:
		cli_fail(cmd, rc, "cannot open arena '%s'", name);
	}
	return EXIT_FAIL;
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
