/* tools/cmd_list.c — `stagecache list [--dir DIR] [--json]`: the arenas in the known directories. */
#include <getopt.h>
#include <string.h>

#include "cli.h"

struct list_ctx {
	int json, n;
};

static void one(const char *dir, const char *name, void *p)
{
	struct list_ctx *ctx = p;
	struct sc_arena *a = NULL;
	struct sc_arena_info in;
	int rc = sc_arena_open_dir(dir, name, &a);
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
			printf(",\"error\":\"%s\"}", sc_strerror(rc));
	} else {
		char hb[32];
		if (rc == 0)
			printf("%-24s %-10s %-13s %3u attached  %s\n", name, cli_human(in.size_bytes, hb, sizeof(hb)),
			       sc_backing_name(in.backing), in.attached_count - 1, dir);
		else
			printf("%-24s (%s)  %s\n", name, sc_strerror(rc), dir);
		ctx->n++;
	}
	sc_arena_close(a);
}

int cmd_list(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, 0, 'd' }, { "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },      { 0, 0, 0, 0 },
	};
	const char *dir = NULL;
	struct list_ctx ctx = { 0, 0 };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'j': ctx.json = 1; break;
		case 'h':
			printf("usage: stagecache list [--dir DIR] [--json]\n\n"
			       "List the arenas in /dev/hugepages (or the hugetlbfs mount) and /dev/shm (and DIR).\n");
			return EXIT_OK;
		default: return cli_usage_error("list", "unknown option");
		}
	}
	if (optind != argc)
		return cli_usage_error("list", "unexpected argument '%s'", argv[optind]);
	if (ctx.json)
		printf("[");
	int rc = sc_arena_list(dir, one, &ctx);
	if (ctx.json)
		printf("]\n");
	else if (rc == 0)
		printf("no arenas\n");
	return rc < 0 ? cli_fail("list", rc, "cannot list") : EXIT_OK;
}
