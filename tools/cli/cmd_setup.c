/*
 * tools/cli/cmd_setup.c — `stagecache setup [--hugepages N] [--group G [--mode 0770]] [--no-bpffs]
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

/* What setup wants (the options) and finds (the mounts, the reservation). */
struct setup {
	uint64_t want;  /* hugepages to reserve at least */
	int bpffs;      /* mount bpffs too */
	int64_t gid;    /* --group, or -1 */
	uint32_t mode;  /* the hugetlbfs root's mode with --group */
	long have;      /* hugepages reserved now */
	const char *hmount, *bmount; /* the hugetlbfs and bpffs mounts, or NULL */
	char hbuf[4096], bbuf[4096];
};

/* Not root: say what is missing and the commands that would set it up; an exit status. */
static int tell_user(const struct setup *x)
{
	int missing = 0;
	struct stat ms;
	if (x->gid >= 0 && x->hmount && stat(x->hmount, &ms) == 0 &&
	    (ms.st_gid != (gid_t)x->gid || (ms.st_mode & 07777) != x->mode)) {
		printf("hugetlbfs: %s is group %u mode %04o, not group %lld mode %04o; run as root: stagecache setup --group "
		       "%lld --mode %04o\n", x->hmount, ms.st_gid, ms.st_mode & 07777, (long long)x->gid, x->mode,
		       (long long)x->gid, x->mode);
		missing = 1;
	}
	if (x->have < (long)x->want) {
		printf("hugepages: %ld reserved, %llu wanted; run: echo %llu > %s\n", x->have, (unsigned long long)x->want,
		       (unsigned long long)x->want, NR_HUGEPAGES);
		missing = 1;
	}
	if (!x->hmount) {
		printf("hugetlbfs: not mounted; run: mkdir -p /dev/hugepages && mount -t hugetlbfs -o pagesize=2M none /dev/hugepages\n");
		missing = 1;
	}
	if (x->bpffs && !x->bmount) {
		printf("bpffs: not mounted; run: mount -t bpf bpf /sys/fs/bpf\n");
		missing = 1;
	}
	if (missing)
		printf("or, as root: sudo stagecache setup\n");
	else
		printf("nothing to do: hugepages, hugetlbfs%s are in place\n", x->bpffs ? " and bpffs" : "");
	return missing ? EXIT_FAIL : EXIT_OK;
}

/* Reserve hugepages up to the wanted count; EXIT_OK or EXIT_FAIL. */
static int reserve(struct setup *x)
{
	int rc = EXIT_OK;
	if (x->have < 0 || x->have >= (long)x->want)
		return rc;
	FILE *f = fopen(NR_HUGEPAGES, "we");
	if (!f || fprintf(f, "%llu\n", (unsigned long long)x->want) < 0 || fclose(f) != 0)
		rc = cli_fail("setup", 0, "cannot write %s: %s", NR_HUGEPAGES, strerror(errno));
	x->have = read_long(NR_HUGEPAGES);
	if (x->have < (long)x->want)
		fprintf(stderr, "stagecache setup: the kernel reserved only %ld of %llu hugepages (memory is fragmented or short)\n",
			x->have, (unsigned long long)x->want);
	return rc;
}

/* Mount hugetlbfs (and bpffs) where missing and give the hugetlbfs root to the group; EXIT_OK or
 * EXIT_FAIL (each failure said). */
static int mount_all(struct setup *x)
{
	int rc = EXIT_OK;
	if (!x->hmount) {
		char mopts[96];
		if (x->gid >= 0)
			snprintf(mopts, sizeof(mopts), "pagesize=2M,gid=%lld,mode=%04o", (long long)x->gid, x->mode);
		else
			snprintf(mopts, sizeof(mopts), "pagesize=2M");
		mkdir("/dev/hugepages", 0755);
		if (mount("none", "/dev/hugepages", "hugetlbfs", 0, mopts) < 0)
			rc = cli_fail("setup", 0, "cannot mount hugetlbfs at /dev/hugepages: %s", strerror(errno));
		x->hmount = find_mount("hugetlbfs", x->hbuf, sizeof(x->hbuf));
	}
	/* an existing mount (or one whose options did not take): its root directory is what
	 * decides who may create files in it */
	if (x->hmount && x->gid >= 0 && (chown(x->hmount, (uid_t)-1, (gid_t)x->gid) < 0 || chmod(x->hmount, x->mode) < 0))
		rc = cli_fail("setup", 0, "cannot give %s to group %lld with mode %04o: %s", x->hmount, (long long)x->gid,
			      x->mode, strerror(errno));
	if (x->bpffs && !x->bmount) {
		mkdir("/sys/fs/bpf", 0700);
		if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") < 0)
			rc = cli_fail("setup", 0, "cannot mount bpffs at /sys/fs/bpf: %s", strerror(errno));
		x->bmount = find_mount("bpf", x->bbuf, sizeof(x->bbuf));
	}
	return rc;
}

/* What is in effect now. */
static void report(const struct setup *x, int json)
{
	long total = meminfo("HugePages_Total"), freep = meminfo("HugePages_Free");
	struct stat ms;
	int have_ms = x->hmount && stat(x->hmount, &ms) == 0;
	char gname[64] = "";
	if (have_ms) {
		struct group *g = getgrgid(ms.st_gid);
		snprintf(gname, sizeof(gname), "%s", g ? g->gr_name : "");
	}
	if (json) {
		printf("{\"hugepages_total\":%ld,\"hugepages_free\":%ld,\"hugetlbfs\":", total, freep);
		if (x->hmount)
			cli_json_str(stdout, x->hmount);
		else
			printf("null");
		if (have_ms)
			printf(",\"hugetlbfs_gid\":%u,\"hugetlbfs_mode\":\"%04o\"", ms.st_gid, ms.st_mode & 07777);
		printf(",\"bpffs\":");
		if (x->bmount)
			cli_json_str(stdout, x->bmount);
		else
			printf("null");
		printf("}\n");
		return;
	}
	printf("hugepages: %ld reserved (2 MiB), %ld free\n", total, freep);
	if (have_ms)
		printf("hugetlbfs: %s (group %s%s%u, mode %04o)\n", x->hmount, gname, *gname ? " " : "", ms.st_gid,
		       ms.st_mode & 07777);
	else
		printf("hugetlbfs: %s\n", x->hmount ? x->hmount : "not mounted");
	if (x->bpffs)
		printf("bpffs:     %s\n", x->bmount ? x->bmount : "not mounted");
}

int cmd_setup(int argc, char **argv)
{
	static struct setup x = { .want = 512, .bpffs = 1, .gid = -1, .mode = UINT32_MAX };
	int json = 0;
	const struct cli_opt opts[] = {
		{ "hugepages", CLI_U64, &x.want, 0, 1u << 22, .want = "a number of pages" },
		{ "no-bpffs", CLI_UNFLAG, &x.bpffs },
		{ "group", CLI_GROUP, &x.gid },
		{ "mode", CLI_MODE, &x.mode, .max = 07777 },
		{ "json", CLI_FLAG, &json },
		{ 0 },
	};
	int rc = cli_parse_opts("setup", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (optind < argc)
		return cli_usage_error("setup", "unexpected argument '%s'", cli_q(argv[optind]));
	if (x.mode != UINT32_MAX && x.gid < 0)
		return cli_usage_error("setup", "--mode applies to the group given with --group GROUP");
	if (x.mode == UINT32_MAX)
		x.mode = 0770;
	if (x.gid >= 0 && (x.mode & 0070) != 0070)
		return cli_usage_error("setup", "--mode %04o: members of the group need rwx on the mount (e.g. 0770)", x.mode);
	if (x.gid >= 0 && (x.mode & 0002))
		return cli_usage_error("setup", "--mode %04o: a world-writable mount lets any user plant arenas there; give "
				   "it to a group instead", x.mode);
	x.have = read_long(NR_HUGEPAGES);
	x.hmount = find_mount("hugetlbfs", x.hbuf, sizeof(x.hbuf));
	x.bmount = x.bpffs ? find_mount("bpf", x.bbuf, sizeof(x.bbuf)) : NULL;
	if (geteuid() != 0)
		return tell_user(&x);
	rc = reserve(&x);
	if (mount_all(&x) != EXIT_OK)
		rc = EXIT_FAIL;
	report(&x, json);
	return rc;
}
