/*
 * tools/cli/main.c — `stagecache`, one binary with one file per subcommand (tools/cli/cmd_*.c).
 *
 * The command table below names each subcommand's function directly: a subcommand whose file is
 * missing from the build is a link error, not a surprise at run time.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cmd_setup(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_destroy(int argc, char **argv);
int cmd_put(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_peek(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_invalidate(int argc, char **argv);
int cmd_clear(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_exporter(int argc, char **argv);
int cmd_l3(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_tail(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_fsck(int argc, char **argv);
int cmd_stress(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_lookup(int argc, char **argv);

static const struct subcommand {
	const char *name;
	cli_fn fn;
	const char *help;
} table[] = {
	{ "setup", cmd_setup, "reserve hugepages, mount hugetlbfs and bpffs (root)" },
	{ "create", cmd_create, "create an arena" },
	{ "info", cmd_info, "describe an arena: backing, regions, attached processes" },
	{ "list", cmd_list, "list the arenas on this machine" },
	{ "destroy", cmd_destroy, "remove an arena" },
	{ "put", cmd_put, "admit a payload into L2" },
	{ "get", cmd_get, "look a prefix up in L2 and write the payload out" },
	{ "peek", cmd_peek, "show an L2 entry's metadata without touching it" },
	{ "ls", cmd_ls, "list L2 entries" },
	{ "rm", cmd_rm, "remove an L2 entry" },
	{ "invalidate", cmd_invalidate, "remove every L2 entry with a payload digest" },
	{ "clear", cmd_clear, "remove every L2 entry" },
	{ "stats", cmd_stats, "counters: L2, rings, promotion" },
	{ "exporter", cmd_exporter, "serve the counters to Prometheus (OpenMetrics at /metrics)" },
	{ "l3", cmd_l3, "the durable L3 store: put, ls, stats, verify, locate" },
	{ "restore", cmd_restore, "the whole restore path: L3 locate, L2 lookup, fill, promotion" },
	{ "events", cmd_events, "publish what the arena holds as vLLM KV events (ZeroMQ) for cache-aware routers" },
	{ "lookup", cmd_lookup, "how much of a prompt L2 and L3 hold (for routers)" },
	{ "tail", cmd_tail, "print commits from the commit rings as they arrive" },
	{ "trace", cmd_trace, "attach eBPF programs to the library's USDT probes and show live counts" },
	{ "fsck", cmd_fsck, "check (and repair) an arena" },
	{ "stress", cmd_stress, "multi-process stress with kills and verification" },
	{ "bench", cmd_bench, "benchmarks (JSON lines)" },
	{ "demo", cmd_demo, "the main demo: workers sharing the cache, L3 fills, rings, tracing" },
};

#define NCOMMANDS (sizeof(table) / sizeof(table[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache COMMAND [ARGS...]\n\n"
		   "A shared host-RAM cache of LLM prefix state for co-located worker processes.\n\n"
		   "commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-11s %s\n", table[i].name, table[i].help);
	fprintf(f, "\n'stagecache COMMAND --help' describes each. Exit status: 0 success, 1 failure, 2 usage error.\n");
}

static const struct subcommand *find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(name, table[i].name))
			return &table[i];
	return NULL;
}

int main(int argc, char **argv)
{
	opterr = 0; /* getopt's own messages do not name the subcommand: ours do (cli_opt_error) */
	if (argc < 2) {
		fprintf(stderr, "stagecache: missing COMMAND\ntry 'stagecache --help'\n");
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("stagecache %d.%d (arena layout %u)\n", SC_VERSION_MAJOR, SC_VERSION_MINOR, sc_arena_layout_version());
		return EXIT_OK;
	}
	const struct subcommand *cmd = find(argv[1]);
	if (!cmd) {
		fprintf(stderr, "stagecache: unknown command '%s'\ntry 'stagecache --help'\n", cli_q(argv[1]));
		return EXIT_USAGE;
	}
	return cmd->fn(argc - 1, argv + 1);
}
