/* tools/cmd_create.c — `stagecache create NAME --size SIZE [...]`. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache create NAME --size SIZE [--huge auto|require|off] [--mode MODE]\n"
		   "                         [--group GROUP] [--dir DIR] [--rings N] [--ring-bytes SIZE]\n"
		   "                         [--index-entries N] [--l3-index-entries N] [--l3-index-refresh-ms MS]\n"
		   "                         [--segment-bytes SIZE] [--no-token-verify] [--json]\n\n"
		   "Create the arena NAME (1-64 characters of A-Z a-z 0-9 . _ -).\n"
		   "  --size SIZE        total size, with K/M/G suffixes (8M to 1T)\n"
		   "  --huge auto        hugetlbfs if mounted, else tmpfs with transparent hugepages, else 4 KiB (default)\n"
		   "  --huge require     hugetlbfs with 2 MiB pages or fail (no fallback)\n"
		   "  --huge off         4 KiB shared memory in /dev/shm\n"
		   "  --mode MODE        file mode in octal (default 0600: only this user)\n"
		   "  --group GROUP      group owner (name or number), e.g. with --mode 0660\n"
		   "  --dir DIR          directory for the arena file (default /dev/hugepages or /dev/shm)\n"
		   "  --rings N          commit rings (default 16); --ring-bytes SIZE per ring (default 256K)\n"
		   "  --index-entries N  L2 index capacity (default size/16K)\n"
		   "  --l3-index-entries N  L3 location index entries (default size/256K, 64..65536; 0: none)\n"
		   "  --l3-index-refresh-ms MS  trust an index entry this long without the L3 directory (default 1000)\n"
		   "  --segment-bytes SIZE  store each distinct segment of this size once (content-addressed L2;\n"
		   "                     a power of two, 64K..1G, e.g. 1M; default: payloads stored whole)\n"
		   "  --no-token-verify  store and compare no token ids on hits (a key collision then serves\n"
		   "                     another prefix's state; for measurements)\n"
		   "The backing actually obtained is measured and printed.\n");
}

int cmd_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, 0, 's' },  { "huge", required_argument, 0, 'H' },
		{ "mode", required_argument, 0, 'm' },  { "group", required_argument, 0, 'g' },
		{ "dir", required_argument, 0, 'd' },   { "rings", required_argument, 0, 'r' },
		{ "ring-bytes", required_argument, 0, 'R' }, { "index-entries", required_argument, 0, 'i' },
		{ "l3-index-entries", required_argument, 0, 'L' }, { "l3-index-refresh-ms", required_argument, 0, 'F' },
		{ "no-token-verify", no_argument, 0, 'N' }, { "segment-bytes", required_argument, 0, 'S' },
		{ "json", no_argument, 0, 'j' },        { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct sc_arena_opts o = { 0 };
	int json = 0, c;
	uint64_t v;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (cli_parse_size(optarg, &o.size_bytes))
				return cli_usage_error("create", "bad --size '%s' (e.g. 64M, 1G)", optarg);
			break;
		case 'H':
			if (!strcmp(optarg, "auto"))
				o.huge = SC_HUGE_AUTO;
			else if (!strcmp(optarg, "require"))
				o.huge = SC_HUGE_REQUIRE;
			else if (!strcmp(optarg, "off"))
				o.huge = SC_HUGE_OFF;
			else
				return cli_usage_error("create", "--huge takes auto, require or off, not '%s'", optarg);
			break;
		case 'm': {
			char *end;
			unsigned long m = strtoul(optarg, &end, 8);
			if (*end || !*optarg || m > 0777)
				return cli_usage_error("create", "bad --mode '%s' (octal, e.g. 0660)", optarg);
			o.mode = (uint32_t)m;
			break;
		}
		case 'g': {
			struct group *g = getgrnam(optarg);
			if (g)
				o.gid = g->gr_gid;
			else if (cli_parse_u64(optarg, 0x7fffffff, &v) == 0)
				o.gid = (int64_t)v;
			else
				return cli_usage_error("create", "unknown group '%s'", optarg);
			o.flags |= SC_ARENA_OPT_GID; /* --group root means group 0 */
			break;
		}
		case 'd': o.dir = optarg; break;
		case 'S':
			if (cli_parse_size(optarg, &v) || v < SC_SEGMENT_MIN || v > SC_SEGMENT_MAX || (v & (v - 1)))
				return cli_usage_error("create", "bad --segment-bytes '%s' (a power of two, 64K..1G)", optarg);
			o.segment_bytes = (uint32_t)v;
			break;
		case 'r':
			if (cli_parse_u64(optarg, 4096, &v) || !v)
				return cli_usage_error("create", "bad --rings '%s' (1-4096)", optarg);
			o.ring_count = (uint32_t)v;
			break;
		case 'R':
			if (cli_parse_size(optarg, &v) || v < 4096 || v > (1u << 30) || (v & (v - 1)))
				return cli_usage_error("create", "bad --ring-bytes '%s' (a power of two, 4K-1G)", optarg);
			o.ring_bytes = (uint32_t)v;
			break;
		case 'i':
			if (cli_parse_u64(optarg, 1u << 24, &v) || !v)
				return cli_usage_error("create", "bad --index-entries '%s'", optarg);
			o.index_entries = (uint32_t)v;
			break;
		case 'L':
			if (cli_parse_u64(optarg, 1u << 22, &v))
				return cli_usage_error("create", "bad --l3-index-entries '%s' (0-4194304)", optarg);
			o.l3_index_entries = v ? (uint32_t)v : SC_L3_INDEX_NONE;
			break;
		case 'F':
			if (cli_parse_u64(optarg, 86400000, &v) || !v)
				return cli_usage_error("create", "bad --l3-index-refresh-ms '%s' (1-86400000)", optarg);
			o.l3_index_refresh_ms = (uint32_t)v;
			break;
		case 'N': o.flags |= SC_ARENA_NO_TOKEN_VERIFY; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("create", "unknown option");
		}
	}
	if (optind != argc - 1)
		return cli_usage_error("create", optind >= argc ? "missing NAME" : "too many arguments");
	const char *name = argv[optind];
	size_t nl = strlen(name);
	if (nl < 1 || nl > SC_NAME_MAX || strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != nl ||
	    strspn(name, ".") == nl)
		return cli_usage_error("create", "invalid name '%s' (1-64 characters of A-Z a-z 0-9 . _ -)", name);
	if (!o.size_bytes)
		return cli_usage_error("create", "--size is required");
	if (o.size_bytes < SC_ARENA_MIN_BYTES || o.size_bytes > SC_ARENA_MAX_BYTES)
		return cli_usage_error("create", "--size must be between 8M and 1T");

	struct sc_arena *a;
	int rc = sc_arena_create(name, &o, &a);
	if (rc) {
		char hb[32];
		switch (rc) {
		case -EINVAL:
			return cli_fail("create", 0, "invalid name '%s' or parameters (names: 1-64 characters of A-Z a-z 0-9 . _ -)", name);
		case -EEXIST:
			return cli_fail("create", 0, "an arena named '%s' already exists (stagecache destroy %s)", name, name);
		case -ENOMEM:
			return cli_fail("create", 0, "not enough %s for %s: reserve more (stagecache setup --hugepages N) or use --huge off",
					o.huge == SC_HUGE_OFF ? "shared memory" : "free hugepages",
					cli_human(o.size_bytes, hb, sizeof(hb)));
		case -ENODEV:
			return cli_fail("create", 0, "--huge require: no hugetlbfs mount with 2 MiB pages (run: stagecache setup)");
		default:
			return cli_fail("create", rc, "cannot create arena '%s'", name);
		}
	}
	struct sc_arena_info info;
	sc_arena_info(a, &info);
	if (json) {
		printf("{\"name\":");
		cli_json_str(stdout, info.name);
		printf(",\"path\":");
		cli_json_str(stdout, info.path);
		printf(",\"size_bytes\":%llu,\"backing\":\"%s\",\"page_size\":%llu}\n", (unsigned long long)info.size_bytes,
		       sc_backing_name(info.backing), (unsigned long long)info.page_size);
	} else {
		char hb[32];
		printf("created %s: %s, %s (%s)\n", info.name, info.path, cli_human(info.size_bytes, hb, sizeof(hb)),
		       sc_backing_name(info.backing));
		if (o.huge == SC_HUGE_AUTO && !o.dir && info.backing != SC_BACKING_HUGETLBFS_2M)
			printf("note: no hugetlbfs mount with free 2 MiB pages was used; fell back to %s (run stagecache setup)\n",
			       sc_backing_name(info.backing));
	}
	sc_arena_close(a);
	return EXIT_OK;
}
