/* tools/cli/cmd_create.c — `stagecache create NAME --size SIZE [...]`. */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache create NAME --size SIZE [--huge auto|require|off] [--mode MODE]\n"
		   "                         [--group GROUP] [--dir DIR] [--rings N] [--ring-bytes SIZE]\n"
		   "                         [--index-entries N] [--l3-index-entries N] [--l3-index-refresh-ms MS]\n"
		   "                         [--segment-bytes SIZE] [--max-slots-per-user N] [--no-token-verify]\n"
		   "                         [--json]\n\n"
		   "Create the arena NAME (1-64 characters of A-Z a-z 0-9 . _ -).\n"
		   "  --size SIZE        total size, with K/M/G suffixes (8M to 1T)\n"
		   "  --huge auto        hugetlbfs if mounted, else tmpfs with transparent hugepages, else 4 KiB (default)\n"
		   "  --huge require     hugetlbfs with 2 MiB pages or fail (no fallback)\n"
		   "  --huge off         4 KiB shared memory in /dev/shm\n"
		   "  --mode MODE        file mode in octal (default 0600: only this user; never world-writable)\n"
		   "  --group GROUP      group owner (name or number), e.g. with --mode 0660\n"
		   "  --max-slots-per-user N  processes of one user attached at once, 1-256 (default: 192 of the\n"
		   "                     256 reader slots when the group may open the arena, else all 256)\n"
		   "  --dir DIR          directory for the arena file (default /dev/hugepages or /dev/shm)\n"
		   "  --rings N          commit rings (default 16); --ring-bytes SIZE per ring (default 256K)\n"
		   "  --index-entries N  L2 index capacity (default size/16K); arenas of small entries want one per\n"
		   "                     smallest entry, e.g. size/4K for 4 KiB ones (about 300 bytes of arena each)\n"
		   "  --l3-index-entries N  L3 location index entries (default size/256K, 64..65536; 0: none)\n"
		   "  --l3-index-refresh-ms MS  trust an index entry this long without the L3 directory (default 1000)\n"
		   "  --segment-bytes SIZE  store each distinct segment of this size once (content-addressed L2;\n"
		   "                     a power of two, 64K..1G, e.g. 1M; default: payloads stored whole)\n"
		   "  --no-token-verify  store and compare no token ids on hits (a key collision then serves\n"
		   "                     another prefix's state; for measurements)\n"
		   "The backing actually obtained is measured and printed.\n");
}

/* Who owns the existing file, and what it is: "a FIFO owned by alice (uid 1001), mode 0666". */
static void describe(const struct sc_arena_file *fi, char *buf, size_t len)
{
	const char *kind = S_ISREG(fi->mode) ? "a file" : S_ISDIR(fi->mode) ? "a directory" : S_ISFIFO(fi->mode) ? "a FIFO"
			   : S_ISLNK(fi->mode) ? "a symbolic link" : "a special file";
	struct passwd *pw = getpwuid(fi->uid);
	char who[64];
	if (pw)
		snprintf(who, sizeof(who), "%s (uid %u)", pw->pw_name, fi->uid);
	else
		snprintf(who, sizeof(who), "uid %u", fi->uid);
	snprintf(buf, len, "%s owned by %s, mode %04o", kind, who, fi->mode & 07777);
}

static int size_opt(const char *cmd, const char *arg, void *dst)
{
	uint64_t *size = dst;
	if (cli_parse_size(arg, size))
		return cli_usage_error(cmd, "--size '%s': want a size such as 64M or 1G", cli_q(arg));
	if (*size < SC_ARENA_MIN_BYTES || *size > SC_ARENA_MAX_BYTES)
		return cli_usage_error(cmd, "--size '%s': must be between 8M and 1T", cli_q(arg));
	return 0;
}

static int huge_opt(const char *cmd, const char *arg, void *dst)
{
	int *huge = dst;
	if (!strcmp(arg, "auto"))
		*huge = SC_HUGE_AUTO;
	else if (!strcmp(arg, "require"))
		*huge = SC_HUGE_REQUIRE;
	else if (!strcmp(arg, "off"))
		*huge = SC_HUGE_OFF;
	else
		return cli_usage_error(cmd, "--huge '%s': want auto, require or off", cli_q(arg));
	return 0;
}

static int mode_opt(const char *cmd, const char *arg, void *dst)
{
	uint32_t *mode = dst;
	if (cli_parse_mode(cmd, "--mode", arg, 0777, mode))
		return EXIT_USAGE;
	if (*mode & 0002)
		return cli_usage_error(cmd, "--mode %04o: a world-writable arena would be refused by every open (anyone "
				       "could corrupt it); use a group (--mode 0660 --group G)", *mode);
	if ((*mode & 0004) || ((*mode & 0040) && !(*mode & 0020))) {
		/* a reader who cannot write still takes read locks on the reader slots' bytes */
		cli_fail(cmd, 0, "--mode %04o: lets users read the arena who cannot write it, and any of them could "
			 "stop every attach by locking its reader slots; use 0600, or 0660 with --group", *mode);
		return EXIT_USAGE;
	}
	if (!(*mode & 0600) || (*mode & 0600) != 0600)
		return cli_usage_error(cmd, "--mode %04o: the owner needs read and write (0600)", *mode);
	return 0;
}

static int group_opt(const char *cmd, const char *arg, void *dst)
{
	struct sc_arena_opts *o = dst;
	if (cli_parse_group(cmd, "--group", arg, &o->gid))
		return EXIT_USAGE;
	o->flags |= SC_ARENA_OPT_GID; /* --group root means group 0 */
	return 0;
}

static int l3_entries_opt(const char *cmd, const char *arg, void *dst)
{
	uint64_t v;
	if (cli_parse_u64(arg, 1u << 22, &v))
		return cli_usage_error(cmd, "--l3-index-entries '%s': want 0 (none) to 4194304", cli_q(arg));
	*(uint32_t *)dst = v ? (uint32_t)v : SC_L3_INDEX_NONE;
	return 0;
}

/* Why sc_arena_create(@name, @o) failed with @rc, in one line; EXIT_FAIL. */
static int create_error(const char *name, const struct sc_arena_opts *o, int rc)
{
	char hb[32], what[160], mnt[4096];
	struct sc_arena_file fi;
	struct stat st;
	switch (rc) {
	case -EINVAL:
		return cli_fail("create", 0, "cannot create arena '%s': the parameters do not fit %s (try a larger --size or "
				"fewer --rings/--index-entries)", name, cli_human(o->size_bytes, hb, sizeof(hb)));
	case -EEXIST:
		if (sc_arena_file_stat(o->dir, name, &fi) == 0) {
			describe(&fi, what, sizeof(what));
			return cli_fail("create", 0, "%s already exists: %s (stagecache destroy %s)", fi.path, what, name);
		}
		return cli_fail("create", 0, "an arena named '%s' already exists (stagecache destroy %s)", name, name);
	case -ENOMEM:
		return cli_fail("create", 0, "not enough %s for %s: reserve more (stagecache setup --hugepages N) or use --huge off",
				o->huge == SC_HUGE_OFF ? "shared memory" : "free hugepages",
				cli_human(o->size_bytes, hb, sizeof(hb)));
	case -ENODEV:
		return cli_fail("create", 0, "--huge require: no hugetlbfs mount with 2 MiB pages (run: stagecache setup)");
	case -ENOENT:
		if (o->dir && stat(o->dir, &st) < 0)
			return cli_fail("create", 0, "directory %s does not exist", o->dir);
		return cli_fail("create", 0, "cannot create arena '%s': %s", name, strerror(ENOENT));
	case -EACCES:
		if (o->dir)
			return cli_fail("create", 0, "permission denied: you may not create files in %s", o->dir);
		return cli_fail("create", 0, "permission denied: the hugetlbfs mount %s is not writable by you (root can "
				"open it to a group: stagecache setup --group G)",
				cli_hugetlbfs_mount(mnt, sizeof(mnt)) ? mnt : "/dev/hugepages");
	case -EPERM:
		if (o->gid)
			return cli_fail("create", 0, "cannot give the arena to group %lld: you are not a member of it",
					(long long)o->gid);
		return cli_fail("create", 0, "cannot create arena '%s': %s", name, strerror(EPERM));
	default:
		return cli_fail("create", 0, "cannot create arena '%s': %s", name, strerror(-rc));
	}
}

/* What was created, and why the backing is not hugetlbfs when hugepages were wanted. */
static void print_created(struct sc_arena *a, const struct sc_arena_opts *o, int json)
{
	struct sc_arena_info info;
	sc_arena_info(a, &info);
	if (json) {
		printf("{\"name\":");
		cli_json_str(stdout, info.name);
		printf(",\"path\":");
		cli_json_str(stdout, info.path);
		printf(",\"size_bytes\":%llu,\"backing\":\"%s\",\"page_size\":%llu}\n", (unsigned long long)info.size_bytes,
		       sc_backing_name(info.backing), (unsigned long long)info.page_size);
		return;
	}
	char hb[32], mnt[4096];
	printf("created %s: %s, %s (%s)\n", info.name, info.path, cli_human(info.size_bytes, hb, sizeof(hb)),
	       sc_backing_name(info.backing));
	if (o->huge != SC_HUGE_AUTO || o->dir || info.backing == SC_BACKING_HUGETLBFS_2M)
		return;
	if (!cli_hugetlbfs_mount(mnt, sizeof(mnt)))
		printf("note: no hugetlbfs mount with 2 MiB pages; fell back to %s (run stagecache setup)\n",
		       sc_backing_name(info.backing));
	else if (access(mnt, W_OK) != 0)
		printf("note: %s is not writable by you; fell back to %s (root can open it to a group: "
		       "stagecache setup --group G)\n", mnt, sc_backing_name(info.backing));
	else
		printf("note: not enough free 2 MiB pages in %s; fell back to %s (stagecache setup --hugepages N)\n",
		       mnt, sc_backing_name(info.backing));
}

int cmd_create(int argc, char **argv)
{
	struct sc_arena_opts o = { 0 };
	const char *name;
	int json = 0;
	const struct cli_opt opts[] = {
		{ "size", CLI_FN, &o.size_bytes, .fn = size_opt },
		{ "huge", CLI_FN, &o.huge, .fn = huge_opt },
		{ "mode", CLI_FN, &o.mode, .fn = mode_opt },
		{ "group", CLI_FN, &o, .fn = group_opt },
		{ "dir", CLI_STR, &o.dir },
		{ "rings", CLI_U32, &o.ring_count, 1, 4096, .want = "1-4096" },
		{ "ring-bytes", CLI_POW2, &o.ring_bytes, 4096, 1u << 30, .want = "a power of two from 4K to 1G" },
		{ "index-entries", CLI_U32, &o.index_entries, 1, 1u << 24, .want = "1 to 16777216" },
		{ "l3-index-entries", CLI_FN, &o.l3_index_entries, .fn = l3_entries_opt },
		{ "l3-index-refresh-ms", CLI_U32, &o.l3_index_refresh_ms, 1, 86400000, .want = "1 to 86400000" },
		{ "no-token-verify", CLI_BITS, &o.flags, .max = SC_ARENA_NO_TOKEN_VERIFY },
		{ "max-slots-per-user", CLI_U32, &o.slots_per_user, 1, 256, .want = "1-256" },
		{ "segment-bytes", CLI_POW2, &o.segment_bytes, SC_SEGMENT_MIN, SC_SEGMENT_MAX,
		  " (a power of two, 64K..1G)" },
		{ "json", CLI_FLAG, &json },
		CLI_OPERAND("NAME", &name),
	};
	int rc = cli_parse_opts("create", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((rc = cli_check_name("create", name)))
		return rc;
	if (!o.size_bytes) /* a given --size is never 0 */
		return cli_usage_error("create", "--size is required (e.g. --size 64M)");
	struct sc_arena *a;
	if ((rc = sc_arena_create(name, &o, &a)))
		return create_error(name, &o, rc);
	print_created(a, &o, json);
	sc_arena_close(a);
	return EXIT_OK;
}
