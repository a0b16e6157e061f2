/*
 * tests/check_deploy.c — deployment across users, for real (root only; SKIP otherwise).
 *
 * What it checks: after `stagecache setup --group G`, the user `nobody` running with
 * G among its groups creates an arena on the hugetlbfs mount, puts and gets, restores from an L3
 * directory shared by the group and written by another member, and destroys the arena; a user
 * outside G gets one clear "permission denied" line for each of those.
 *
 * Users and the group are made here when missing (groupadd/useradd, system accounts without a
 * home, and left in place for the next run): group sc-deploy, users sc-writer (a member) and
 * sc-outsider (not a member). Commands run under setpriv with exactly the uid, gid and
 * supplementary groups of the case, so nothing else about the accounts matters. The hugetlbfs
 * mount's group and mode are put back as they were when the suite ends.
 */
#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"

#define GROUP "sc-deploy"
#define WRITER "sc-writer"
#define OUTSIDER "sc-outsider"

static char bin[1024], base[128], mnt[64] = "/dev/hugepages";
static struct stat mnt_before;
static int ready;
static char why[256];

#define shell sc_test_sh

static void setup(void)
{
	if (geteuid() != 0) {
		snprintf(why, sizeof(why), "deployment across users needs root (groupadd, useradd, setpriv, setup --group)");
		return;
	}
	if (shell("command -v setpriv groupadd useradd >/dev/null 2>&1")) {
		snprintf(why, sizeof(why), "setpriv, groupadd or useradd is missing");
		return;
	}
	if (stat(mnt, &mnt_before) < 0 || shell("grep -q ' %s hugetlbfs ' /proc/mounts", mnt)) {
		snprintf(why, sizeof(why), "no hugetlbfs mounted at %s (run stagecache setup)", mnt);
		return;
	}
	ssize_t n = readlink("/proc/self/exe", bin, sizeof(bin) - 1);
	if (n <= 0)
		return;
	bin[n] = 0;
	char *d = dirname(dirname(bin));
	memmove(bin, d, strlen(d) + 1);
	strcat(bin, "/stagecache");
	if (shell("getent group " GROUP " >/dev/null || groupadd --system " GROUP) ||
	    shell("id " WRITER " >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "
		  "--gid " GROUP " " WRITER) ||
	    shell("id " OUTSIDER " >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "
		  "--user-group " OUTSIDER)) {
		snprintf(why, sizeof(why), "cannot create the group %s and the users %s, %s", GROUP, WRITER, OUTSIDER);
		return;
	}
	/* a scratch directory only the group can enter, with a payload every member can read */
	snprintf(base, sizeof(base), "/var/tmp/sc-deploy-%d", (int)getpid());
	if (shell("rm -rf %s && mkdir -p %s && chgrp " GROUP " %s && chmod 0770 %s && "
		  "head -c 20000 /dev/urandom > %s/payload && head -c 7000 /dev/urandom > %s/state && chmod 0644 %s/payload %s/state",
		  base, base, base, base, base, base, base, base))
		return;
	ready = 1;
}

static void teardown(void)
{
	if (!ready)
		return;
	/* put the mount back as it was: the suite must not change the machine for others */
	if (chown(mnt, mnt_before.st_uid, mnt_before.st_gid) || chmod(mnt, mnt_before.st_mode & 07777))
		fprintf(stderr, "check_deploy: cannot restore %s\n", mnt);
	shell("rm -f %s/stagecache.sc-deploy-*; rm -rf %s", mnt, base);
}

struct out {
	int code;
	char err[4096], out[4096];
};

/* Run `stagecache ARGS` as @user (uid and primary group), with @groups as its supplementary
 * groups ("" for none). */
static void as(struct out *o, const char *user, const char *groups, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void as(struct out *o, const char *user, const char *groups, const char *fmt, ...)
{
	char args[2048], cmd[8192], eo[128], oo[128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	struct passwd *pw = getpwnam(user);
	ck_assert_ptr_nonnull(pw);
	snprintf(eo, sizeof(eo), "/tmp/sc-deploy-%d.err", (int)getpid());
	snprintf(oo, sizeof(oo), "/tmp/sc-deploy-%d.out", (int)getpid());
	snprintf(cmd, sizeof(cmd), "cd / && timeout 60 setpriv --reuid=%u --regid=%u %s%s %s %s >%s 2>%s", pw->pw_uid,
		 pw->pw_gid, *groups ? "--groups=" : "--clear-groups", groups, bin, args, oo, eo);
	int st = system(cmd);
	o->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	FILE *f = fopen(eo, "r");
	size_t k = f ? fread(o->err, 1, sizeof(o->err) - 1, f) : 0;
	o->err[k] = 0;
	if (f)
		fclose(f);
	f = fopen(oo, "r");
	k = f ? fread(o->out, 1, sizeof(o->out) - 1, f) : 0;
	o->out[k] = 0;
	if (f)
		fclose(f);
	unlink(eo);
	unlink(oo);
}

static int lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

#define OK(o, what) ck_assert_msg((o)->code == 0, "%s: exit %d\n%s%s", what, (o)->code, (o)->out, (o)->err)
/* refused with exactly one line that says "permission denied" */
#define DENIED(o, what)                                                                                           \
	ck_assert_msg((o)->code == 1 && lines((o)->err) == 1 && strstr((o)->err, "permission denied"),             \
		      "%s: exit %d, want 1 and one 'permission denied' line:\n%s%s", what, (o)->code, (o)->out, (o)->err)

START_TEST(group_member_does_everything_outsider_is_told_why)
{
	if (!ready) {
		sc_skip("%s", why[0] ? why : "fixture not ready");
		return;
	}
	struct out o;
	char name[64], l3[256], gid[16];
	snprintf(name, sizeof(name), "sc-deploy-%d", (int)getpid());
	snprintf(l3, sizeof(l3), "%s/l3", base);
	struct group *g = getgrnam(GROUP);
	ck_assert_ptr_nonnull(g);
	snprintf(gid, sizeof(gid), "%u", g->gr_gid);

	/* root gives the hugetlbfs mount to the group */
	ck_assert_int_eq(shell("%s setup --group " GROUP " --no-bpffs --hugepages 0 >/dev/null", bin), 0);
	struct stat st;
	ck_assert_int_eq(stat(mnt, &st), 0);
	ck_assert_uint_eq(st.st_gid, g->gr_gid);
	ck_assert_uint_eq(st.st_mode & 07777, 0770);

	/* another member writes the group-shared L3 directory */
	as(&o, WRITER, GROUP, "l3 put %s --mode 0660 --group " GROUP " --ns tenant --model m --state s --tokens 1,2,3 "
	   "--kind full_state --file %s/payload", l3, base);
	OK(&o, "member writes L3");
	ck_assert_int_eq(shell("test -z \"$(find %s -mindepth 1 \\( -type f ! -perm 0660 \\) -o \\( -type d ! -perm 2770 \\) -o ! -group " GROUP ")\"", l3), 0);

	/* nobody, in the group: create on the hugetlbfs mount, put, get, restore, destroy */
	as(&o, "nobody", gid, "create %s --size 16M --mode 0660 --group " GROUP, name);
	OK(&o, "nobody creates");
	ck_assert_msg(strstr(o.out, "hugetlbfs-2M") && strstr(o.out, mnt), "not on the hugetlbfs mount: %s", o.out);
	as(&o, "nobody", gid, "put %s --model m --state s --tokens 5,6,7 --kind full_state --file %s/state", name, base);
	OK(&o, "nobody puts");
	as(&o, "nobody", gid, "get %s --model m --state s --tokens 5,6,7 --out %s/got", name, base);
	OK(&o, "nobody gets");
	ck_assert_int_eq(shell("cmp -s %s/state %s/got", base, base), 0);
	for (int i = 0; i < 3; i++) {
		as(&o, "nobody", gid, "restore %s %s --model m --state s --ns tenant --tokens 1,2,3,4 --mode 0660 --group "
		   GROUP " --out %s/restored", name, l3, base);
		OK(&o, "nobody restores from the group's L3");
		ck_assert(strstr(o.out, i < 2 ? "source l3" : "source l2"));
	}
	ck_assert_int_eq(shell("cmp -s %s/payload %s/restored", base, base), 0);

	/* another member: the arena is nobody's, so it is trusted only when asked */
	as(&o, WRITER, GROUP, "stats %s", name);
	ck_assert_msg(o.code == 1 && lines(o.err) == 1 && strstr(o.err, "--owner"), "member, untrusted owner:\n%s", o.err);
	as(&o, WRITER, GROUP, "get %s --owner nobody --model m --state s --tokens 5,6,7", name);
	OK(&o, "member gets with --owner nobody");

	/* outside the group: one clear permission line for each */
	as(&o, OUTSIDER, "", "create %s-x --size 16M --huge require", name);
	DENIED(&o, "outsider creates on the mount");
	as(&o, OUTSIDER, "", "put %s --model m --state s --tokens 8 --kind full_state --file /etc/hostname", name);
	DENIED(&o, "outsider puts");
	as(&o, OUTSIDER, "", "get %s --model m --state s --tokens 5,6,7", name);
	DENIED(&o, "outsider gets");
	as(&o, OUTSIDER, "", "restore %s %s --model m --state s --ns tenant --tokens 1,2,3", name, l3);
	DENIED(&o, "outsider restores");
	as(&o, OUTSIDER, "", "l3 ls %s", l3);
	DENIED(&o, "outsider lists L3");
	as(&o, OUTSIDER, "", "destroy %s", name);
	DENIED(&o, "outsider destroys");

	as(&o, "nobody", gid, "destroy %s", name);
	OK(&o, "nobody destroys");
	ck_assert_int_ne(shell("test -e %s/stagecache.%s", mnt, name), 0);
}
END_TEST

Suite *deploy_suite(void)
{
	Suite *s = suite_create("deploy");
	TCase *tc = tcase_create("deploy");
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, group_member_does_everything_outsider_is_told_why);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(deploy_suite)
