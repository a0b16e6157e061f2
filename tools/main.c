/*
 * tools/main.c — `stagecache`, one binary with one file per subcommand (tools/cmd_*.c).
 *
 * Subcommands are bound weakly so that each lands with its own file; a subcommand whose file is
 * not in this build says so instead of failing to link.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define SUBCOMMANDS(X)                                                                     \
	X(setup, "reserve hugepages, mount hugetlbfs and bpffs (root)")                    \
	X(create, "create an arena")                                                       \
	X(info, "describe an arena: backing, regions, attached processes")                \
	X(list, "list the arenas on this machine")                                         \
	X(destroy, "remove an arena")                                                      \
	X(put, "admit a payload into L2")                                                  \
	X(get, "look a prefix up in L2 and write the payload out")                         \
	X(peek, "show an L2 entry's metadata without touching it")                         \
	X(ls, "list L2 entries")                                                           \
	X(rm, "remove an L2 entry")                                                        \
	X(invalidate, "remove every L2 entry with a payload digest")                       \
	X(clear, "remove every L2 entry")                                                  \
	X(stats, "counters: L2, rings, promotion")                                         \
	X(exporter, "serve the counters to Prometheus (OpenMetrics at /metrics)")          \
	X(l3, "the durable L3 store: put, ls, stats, verify, locate")                              \
	X(restore, "the whole restore path: L3 locate, L2 lookup, fill, promotion")        \
	X(tail, "print commits from the commit rings as they arrive")                      \
	X(trace, "attach eBPF programs to the library's USDT probes and show live counts") \
	X(fsck, "check (and repair) an arena")                                             \
	X(stress, "multi-process stress with kills and verification")                      \
	X(bench, "benchmarks (JSON lines)")                                                \
	X(demo, "the main demo: workers sharing the cache, L3 fills, rings, tracing")

#define DECLARE(name, help) int cmd_##name(int argc, char **argv) __attribute__((weak));
SUBCOMMANDS(DECLARE)

struct subcommand {
	const char *name;
	const char *help;
	cli_fn *fn;
};

#define ROW(name, help) { #name, help, (cli_fn *)0 },
static struct subcommand table[] = { SUBCOMMANDS(ROW) };

static void bind(void)
{
	size_t i = 0;
#define BIND(name, help) table[i++].fn = (cli_fn *)cmd_##name;
	SUBCOMMANDS(BIND)
#undef BIND
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache COMMAND [ARGS...]\n\n"
		   "A shared host-RAM cache of LLM prefix state for co-located worker processes.\n\n"
		   "commands:\n");
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].fn)
			fprintf(f, "  %-11s %s\n", table[i].name, table[i].help);
	fprintf(f, "\n'stagecache COMMAND --help' describes each. Exit status: 0 success, 1 failure, 2 usage error.\n");
}

int main(int argc, char **argv)
{
	bind();
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
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (strcmp(argv[1], table[i].name))
			continue;
		if (!table[i].fn) {
			fprintf(stderr, "stagecache: '%s' is not available in this build\n", argv[1]);
			return EXIT_FAIL;
		}
		return ((cli_fn)table[i].fn)(argc - 1, argv + 1);
	}
	fprintf(stderr, "stagecache: unknown command '%s'\ntry 'stagecache --help'\n", cli_q(argv[1]));
	return EXIT_USAGE;
}
