/* tools/cli/cmd_list.c — `stagecache list [--dir DIR] [--json]`: the arenas in the known directories. */
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

struct list_ctx {
	int json, n, any;
};

/* Why an arena could not be opened, in a few words (no quotes: printed inside JSON too). */
static const char *why(const char *dir, const char *name, int rc)
{
	struct sc_arena_file fi;
	int have = sc_arena_file_stat(dir, name, &fi) == 0;
	switch (rc) {
	case -EBADMSG:
		if (have && !S_ISREG(fi.mode))
			return S_ISDIR(fi.mode) ? "a directory, not an arena" : S_ISFIFO(fi.mode) ? "a FIFO, not an arena"
			       : S_ISLNK(fi.mode) ? "a symbolic link, not an arena" : "not a regular file";
		return "not a stagecache arena";
	case -EPROTO: return "another layout version";
	case -EPERM:
		return have && (fi.mode & S_IWOTH) ? "world-writable: refused" : "owned by another user: refused (--owner any)";
	case -EACCES: return "permission denied";
	case -ENOTRECOVERABLE: return "declared unrepairable by fsck: destroy it";
	case -EAGAIN: return "being created";
	default: return sc_strerror(rc);
	}
}

static void one(const char *dir, const char *name, void *p)
{
	struct list_ctx *ctx = p;
	struct sc_arena *a = NULL;
	struct sc_arena_info in;
	struct sc_arena_open_opts oo = { .dir = dir, .flags = ctx->any ? SC_ARENA_OPEN_ANY_OWNER : 0 };
	int rc = sc_arena_open_with(name, &oo, &a);
	if (rc == 0)
		rc = sc_arena_info(a, &in);
	if (ctx->json) {
		printf("%s{\"name\":", ctx->n++ ? "," : "");
		cli_json_str(stdout, name);
		printf(",\"dir\":");
		cli_json_str(stdout, dir);
		if (rc == 0)
			printf(",\"size_bytes\":%llu,\"backing\":\"%s\",\"attached\":%u}", (unsigned long long)in.size_bytes,
			       sc_backing_name(in.backing), in.attached_count - 1);
		else
			printf(",\"error\":\"%s\"}", why(dir, name, rc));
	} else {
		char hb[32];
		if (rc == 0)
			printf("%-24s %-10s %-13s %3u attached  %s\n", name, cli_human(in.size_bytes, hb, sizeof(hb)),
			       sc_backing_name(in.backing), in.attached_count - 1, dir);
		else
			printf("%-24s (%s)  %s\n", name, why(dir, name, rc), dir);
		ctx->n++;
	}
	sc_arena_close(a);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache list [--dir DIR] [--owner any] [--json]\n\n"
		   "List the arenas in /dev/hugepages (or the hugetlbfs mount) and /dev/shm (and DIR).\n"
		   "A file that cannot be opened is listed with the reason (not an arena, a FIFO,\n"
		   "world-writable, owned by another user unless --owner any, ...).\n");
}

static int owner_any_opt(const char *cmd, const char *arg, void *dst)
{
	if (strcmp(arg, "any"))
		return cli_usage_error(cmd, "--owner '%s': list takes only --owner any", cli_q(arg));
	*(int *)dst = 1;
	return 0;
}

int cmd_list(int argc, char **argv)
{
	const char *dir = NULL;
	struct list_ctx ctx = { 0, 0, 0 };
	const struct cli_opt opts[] = {
		{ "dir", CLI_STR, &dir },            { "json", CLI_FLAG, &ctx.json },
		{ "owner", CLI_FN, &ctx.any, .fn = owner_any_opt },
		{ 0 },
	};
	int prc = cli_parse_opts("list", argc, argv, opts, usage);
	if (prc)
		return prc < 0 ? EXIT_OK : prc;
	if (optind != argc)
		return cli_usage_error("list", "unexpected argument '%s'", cli_q(argv[optind]));
	struct stat dst;
	if (dir && stat(dir, &dst) < 0)
		return cli_fail("list", 0, "directory %s: %s", dir, strerror(errno));
	if (ctx.json)
		printf("[");
	int rc = sc_arena_list(dir, one, &ctx);
	if (ctx.json)
		printf("]\n");
	else if (rc == 0)
		printf("no arenas\n");
	return rc < 0 ? cli_fail("list", 0, "cannot list: %s", strerror(-rc)) : EXIT_OK;
}
