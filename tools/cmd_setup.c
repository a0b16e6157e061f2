/*
 * tools/cmd_setup.c — `stagecache setup [--hugepages N] [--group G [--mode 0770]] [--no-bpffs]
 * [--json]`: prepare the machine.
 *
 * As root: reserve hugepages (never lowering an existing reservation), mount hugetlbfs at
 * /dev/hugepages if no 2 MiB hugetlbfs is mounted, mount bpffs at /sys/fs/bpf if needed; with
 * --group, give the hugetlbfs mount's root directory to group G with --mode (default 0770) so
 * that members of G can create arenas there (a new mount gets gid= and mode= options; an existing
 * one has its root directory chown'd and chmod'ed, which lasts until it is unmounted). Idempotent.
 * As non-root: report what is missing and the commands that would fix it.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <mntent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"

static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static long meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	long v = -1;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':')
			v = strtol(line + kl + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* Mount point of the first mount of @type (with 2 MiB pages for hugetlbfs), or NULL. */
static const char *find_mount(const char *type, char *buf, size_t len)
{
	FILE *f = setmntent("/proc/mounts", "r");
	struct mntent *m;
	const char *found = NULL;
	while (f && (m = getmntent(f))) {
		if (strcmp(m->mnt_type, type))
			continue;
		if (!strcmp(type, "hugetlbfs")) {
			const char *ps = hasmntopt(m, "pagesize");
			if (ps && strncmp(ps, "pagesize=2M", 11))
				continue;
		}
		snprintf(buf, len, "%s", m->mnt_dir);
		found = buf;
		break;
	}
	if (f)
		endmntent(f);
	return found;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache setup [--hugepages N] [--group GROUP [--mode MODE]] [--no-bpffs] [--json]\n\n"
		   "Prepare this machine for stagecache (as root; idempotent):\n"
		   "  - reserve N 2 MiB hugepages (default: enough for 1 GiB, i.e. 512); never lowers an\n"
		   "    existing reservation;\n"
		   "  - mount hugetlbfs (pagesize=2M) at /dev/hugepages if none is mounted;\n"
		   "  - with --group GROUP: let members of GROUP create arenas there: the mount's root\n"
		   "    directory gets group GROUP and mode MODE (octal, default 0770; 1770 also keeps\n"
		   "    members from removing each other's arenas);\n"
		   "  - mount bpffs at /sys/fs/bpf if it is not mounted (skip with --no-bpffs).\n"
		   "Then print what is in effect. As non-root, print what is missing and the commands to run.\n");
}

int cmd_setup(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "hugepages", required_argument, 0, 'n' }, { "no-bpffs", no_argument, 0, 'b' },
		{ "group", required_argument, 0, 'g' },     { "mode", required_argument, 0, 'm' },
		{ "json", no_argument, 0, 'j' },           { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	uint64_t want = 512;
	int bpffs = 1, json = 0, c, mode_given = 0;
	int64_t gid = -1;
	uint32_t mode = 0770;
	cli_getopt_begin();
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (cli_parse_u64(optarg, 1u << 22, &want))
				return cli_usage_error("setup", "--hugepages '%s': want a number of pages", cli_q(optarg));
			break;
		case 'g':
			if (cli_parse_group("setup", "--group", optarg, &gid))
				return EXIT_USAGE;
			break;
		case 'm':
			if (cli_parse_mode("setup", "--mode", optarg, 07777, &mode))
				return EXIT_USAGE;
			mode_given = 1;
			break;
		case 'b': bpffs = 0; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_opt_error("setup", c, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error("setup", "unexpected argument '%s'", cli_q(argv[optind]));
	if (mode_given && gid < 0)
		return cli_usage_error("setup", "--mode applies to the group given with --group GROUP");
	if (gid >= 0 && (mode & 0070) != 0070)
		return cli_usage_error("setup", "--mode %04o: members of the group need rwx on the mount (e.g. 0770)", mode);
	if (gid >= 0 && (mode & 0002))
		return cli_usage_error("setup", "--mode %04o: a world-writable mount lets any user plant arenas there; give "
				   "it to a group instead", mode);

	int root = geteuid() == 0, rc = EXIT_OK;
	char hbuf[4096], bbuf[4096];
	long have = read_long(NR_HUGEPAGES);
	const char *hmount = find_mount("hugetlbfs", hbuf, sizeof(hbuf));
	const char *bmount = bpffs ? find_mount("bpf", bbuf, sizeof(bbuf)) : NULL;

	if (!root) {
		int missing = 0;
		struct stat ms;
		if (gid >= 0 && hmount && stat(hmount, &ms) == 0 && (ms.st_gid != (gid_t)gid || (ms.st_mode & 07777) != mode)) {
			printf("hugetlbfs: %s is group %u mode %04o, not group %lld mode %04o; run as root: stagecache setup --group "
			       "%lld --mode %04o\n", hmount, ms.st_gid, ms.st_mode & 07777, (long long)gid, mode, (long long)gid,
			       mode);
			missing = 1;
		}
		if (have < (long)want) {
			printf("hugepages: %ld reserved, %llu wanted; run: echo %llu > %s\n", have, (unsigned long long)want,
			       (unsigned long long)want, NR_HUGEPAGES);
			missing = 1;
		}
		if (!hmount) {
			printf("hugetlbfs: not mounted; run: mkdir -p /dev/hugepages && mount -t hugetlbfs -o pagesize=2M none /dev/hugepages\n");
			missing = 1;
		}
		if (bpffs && !bmount) {
			printf("bpffs: not mounted; run: mount -t bpf bpf /sys/fs/bpf\n");
			missing = 1;
		}
		if (missing)
			printf("or, as root: sudo stagecache setup\n");
		else
			printf("nothing to do: hugepages, hugetlbfs%s are in place\n", bpffs ? " and bpffs" : "");
		return missing ? EXIT_FAIL : EXIT_OK;
	}

	if (have >= 0 && have < (long)want) {
		FILE *f = fopen(NR_HUGEPAGES, "we");
		if (!f || fprintf(f, "%llu\n", (unsigned long long)want) < 0 || fclose(f) != 0) {
			cli_fail("setup", 0, "cannot write %s: %s", NR_HUGEPAGES, strerror(errno));
			rc = EXIT_FAIL;
		}
		have = read_long(NR_HUGEPAGES);
		if (have < (long)want)
			fprintf(stderr, "stagecache setup: the kernel reserved only %ld of %llu hugepages (memory is fragmented or short)\n",
				have, (unsigned long long)want);
	}
	if (!hmount) {
		char mopts[96];
		if (gid >= 0)
			snprintf(mopts, sizeof(mopts), "pagesize=2M,gid=%lld,mode=%04o", (long long)gid, mode);
		else
			snprintf(mopts, sizeof(mopts), "pagesize=2M");
		mkdir("/dev/hugepages", 0755);
		if (mount("none", "/dev/hugepages", "hugetlbfs", 0, mopts) < 0) {
			cli_fail("setup", 0, "cannot mount hugetlbfs at /dev/hugepages: %s", strerror(errno));
			rc = EXIT_FAIL;
		}
		hmount = find_mount("hugetlbfs", hbuf, sizeof(hbuf));
	}
	/* an existing mount (or one whose options did not take): its root directory is what
	 * decides who may create files in it */
	if (hmount && gid >= 0 && (chown(hmount, (uid_t)-1, (gid_t)gid) < 0 || chmod(hmount, mode) < 0)) {
		cli_fail("setup", 0, "cannot give %s to group %lld with mode %04o: %s", hmount, (long long)gid, mode,
			 strerror(errno));
		rc = EXIT_FAIL;
	}
	if (bpffs && !bmount) {
		mkdir("/sys/fs/bpf", 0700);
		if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") < 0) {
			cli_fail("setup", 0, "cannot mount bpffs at /sys/fs/bpf: %s", strerror(errno));
			rc = EXIT_FAIL;
		}
		bmount = find_mount("bpf", bbuf, sizeof(bbuf));
	}
	long total = meminfo("HugePages_Total"), freep = meminfo("HugePages_Free");
	struct stat ms;
	int have_ms = hmount && stat(hmount, &ms) == 0;
	char gname[64] = "";
	if (have_ms) {
		struct group *g = getgrgid(ms.st_gid);
		snprintf(gname, sizeof(gname), "%s", g ? g->gr_name : "");
	}
	if (json) {
		printf("{\"hugepages_total\":%ld,\"hugepages_free\":%ld,\"hugetlbfs\":", total, freep);
		if (hmount)
			cli_json_str(stdout, hmount);
		else
			printf("null");
		if (have_ms)
			printf(",\"hugetlbfs_gid\":%u,\"hugetlbfs_mode\":\"%04o\"", ms.st_gid, ms.st_mode & 07777);
		printf(",\"bpffs\":");
		if (bmount)
			cli_json_str(stdout, bmount);
		else
			printf("null");
		printf("}\n");
	} else {
		printf("hugepages: %ld reserved (2 MiB), %ld free\n", total, freep);
		if (have_ms)
			printf("hugetlbfs: %s (group %s%s%u, mode %04o)\n", hmount, gname, *gname ? " " : "", ms.st_gid,
			       ms.st_mode & 07777);
		else
			printf("hugetlbfs: %s\n", hmount ? hmount : "not mounted");
		if (bpffs)
			printf("bpffs:     %s\n", bmount ? bmount : "not mounted");
	}
	return rc;
}
