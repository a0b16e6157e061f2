/*
 * tests/check_bench.c — the benchmark harness (`stagecache bench`, which execs stagecache-bench).
 *
 * Regressions (defect 2): `bench --table` and `bench --out F` with no benchmark named
 * crashed, and `bench nosuch --out F` truncated F before it checked the name. And the rule that a
 * figure that was not measured is a miss: with fio hidden from PATH, `bench l3` reports the fio
 * rows missing (why, in the table and the JSON) and exits non-zero.
 */
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"

/* Run `stagecache ARGS...` with PATH @path (NULL: unchanged), output into @out (may be NULL).
 * Returns the exit status, or 128 + signal when it died of one (a crash), or -1 after a timeout. */
static int run(const char *path, char *out, size_t outlen, const char *const *args)
{
	char cli[PATH_MAX + 16];
	snprintf(cli, sizeof(cli), "%s/stagecache", sc_test_build_dir());
	int fds[2];
	ck_assert(pipe(fds) == 0);
	pid_t pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		if (path)
			setenv("PATH", path, 1);
		alarm(600);
		execv(cli, (char *const *)args);
		_exit(127);
	}
	close(fds[1]);
	size_t len = 0;
	ssize_t n;
	char sink[4096];
	while ((n = read(fds[0], out && len < outlen - 1 ? out + len : sink,
			 out && len < outlen - 1 ? outlen - 1 - len : sizeof(sink))) > 0)
		if (out && len < outlen - 1)
			len += (size_t)n;
	if (out)
		out[len] = 0;
	close(fds[0]);
	int st;
	ck_assert(waitpid(pid, &st, 0) == pid);
	if (WIFSIGNALED(st))
		return WTERMSIG(st) == SIGALRM ? -1 : 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

static void write_file(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");
	ck_assert(f != NULL);
	fputs(text, f);
	fclose(f);
}

static int file_is(const char *p, const char *text)
{
	char buf[256] = "";
	FILE *f = fopen(p, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return !strcmp(buf, text);
}

static int have_bench(void)
{
	char p[PATH_MAX + 32];
	snprintf(p, sizeof(p), "%s/stagecache-bench", sc_test_build_dir());
	if (access(p, X_OK)) {
		sc_skip("%s is not built", p);
		return 0;
	}
	return 1;
}

/* defect 2: no benchmark named, with --table: a usage error, not a crash */
START_TEST(test_bench_table_without_name_is_usage_error)
{
	if (!have_bench())
		return;
	char out[8192];
	const char *args[] = { "stagecache", "bench", "--table", NULL };
	ck_assert_int_eq(run(NULL, out, sizeof(out), args), 2);
	ck_assert_ptr_nonnull(strstr(out, "stagecache bench: missing WHICH, the benchmark to run: all, l2,"));
	ck_assert_ptr_null(strstr(out, "usage:")); /* one line that names what is missing */
}
END_TEST

/* defect 2: --out F with no benchmark named: usage error, F untouched */
START_TEST(test_bench_out_without_name_keeps_file)
{
	if (!have_bench())
		return;
	char f[64], out[8192];
	snprintf(f, sizeof(f), "/tmp/check-bench-out-%d", (int)getpid());
	write_file(f, "precious\n");
	const char *args[] = { "stagecache", "bench", "--out", f, NULL };
	ck_assert_int_eq(run(NULL, out, sizeof(out), args), 2);
	ck_assert_msg(file_is(f, "precious\n"), "bench --out F with no benchmark changed F");
	const char *args2[] = { "stagecache", "bench", "--out", NULL };
	ck_assert_int_eq(run(NULL, out, sizeof(out), args2), 2);
	ck_assert_ptr_nonnull(strstr(out, "--out needs a file name"));
	unlink(f);
}
END_TEST

/* defect 2: an unknown benchmark is refused before --out F is truncated */
START_TEST(test_bench_unknown_name_keeps_file)
{
	if (!have_bench())
		return;
	char f[64], out[8192];
	snprintf(f, sizeof(f), "/tmp/check-bench-nosuch-%d", (int)getpid());
	write_file(f, "precious\n");
	const char *args[] = { "stagecache", "bench", "nosuch", "--out", f, NULL };
	ck_assert_int_eq(run(NULL, out, sizeof(out), args), 2);
	ck_assert_ptr_nonnull(strstr(out, "unknown benchmark 'nosuch'"));
	ck_assert_msg(file_is(f, "precious\n"), "bench nosuch --out F truncated F");
	/* a benchmark's own bad option: usage error, F untouched too */
	const char *args2[] = { "stagecache", "bench", "l3", "--runs", "zero", "--out", f, NULL };
	ck_assert_int_eq(run(NULL, out, sizeof(out), args2), 2);
	ck_assert_msg(file_is(f, "precious\n"), "a usage error of bench l3 truncated F");
	/* an unwritable --out is refused before anything runs */
	const char *args3[] = { "stagecache", "bench", "l3", "--out", "/nonexistent-dir/x.json", NULL };
	ck_assert_int_eq(run(NULL, out, sizeof(out), args3), 1);
	ck_assert_ptr_nonnull(strstr(out, "cannot write /nonexistent-dir/x.json"));
	unlink(f);
}
END_TEST

/* A missing row is a miss: fio hidden from PATH -> the fio rows say "missing: why", exit 1. */
START_TEST(test_bench_l3_without_fio_reports_missing_rows)
{
	if (!have_bench())
		return;
	char dir[64], link[128], json[128], out[65536];
	snprintf(dir, sizeof(dir), "/tmp/check-bench-path-%d", (int)getpid());
	ck_assert(mkdir(dir, 0700) == 0);
	/* PATH with only what the benchmark itself needs (rm), and no fio */
	snprintf(link, sizeof(link), "%s/rm", dir);
	ck_assert(symlink("/bin/rm", link) == 0);
	snprintf(json, sizeof(json), "%s/out.json", dir);
	const char *args[] = { "stagecache", "bench", "l3", "--quick", "--runs", "1", "--count4m", "2", "--count64k", "4",
			       "--dir", "/var/tmp", "--out", json, "--table", NULL };
	int rc = run(dir, out, sizeof(out), args);
	ck_assert_msg(rc == 1, "bench l3 without fio exited %d, want 1:\n%s", rc, out);
	ck_assert_ptr_nonnull(strstr(out, "fill_cold_4m_vs_fio"));
	ck_assert_ptr_nonnull(strstr(out, "missing: fio is not installed"));
	ck_assert_ptr_nonnull(strstr(out, "MISS"));
	FILE *f = fopen(json, "r");
	ck_assert(f != NULL);
	static char text[1 << 16];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	ck_assert_ptr_nonnull(strstr(text, "{\"bench\":\"l3\",\"metric\":\"fill_cold_4m_vs_fio\",\"missing\":"));
	ck_assert_ptr_nonnull(strstr(text, "{\"bench\":\"l3\",\"metric\":\"fill_cold_64k_vs_fio\",\"missing\":"));
	ck_assert_ptr_nonnull(strstr(text, "{\"bench\":\"l3\",\"metric\":\"fill_cold_4m_cpu_vs_fio_xxh3\",\"missing\":\"fio is not installed"));
	ck_assert_ptr_nonnull(strstr(text, "{\"bench\":\"l3\",\"metric\":\"put_4m_vs_fio_write_fsync\",\"missing\":\"fio is not installed"));
	/* the segmented fills need no fio: measured, against our whole-object fills */
	ck_assert_ptr_nonnull(strstr(text, "\"metric\":\"fill_cold_4m_seg_vs_whole\",\"value\":"));
	/* the rest was measured: the harness still reports what it could */
	ck_assert_ptr_nonnull(strstr(text, "\"metric\":\"fill_cold_4m_vs_liburing\",\"value\":"));
	ck_assert_ptr_nonnull(strstr(text, "{\"bench\":\"env\",\"env\":\"cpu_model\""));
	unlink(json);
	unlink(link);
	rmdir(dir);
}
END_TEST

/* bench l3scale: bad sizes are usage errors; a small store is generated once, kept, and reused */
START_TEST(test_bench_l3scale_keeps_its_store)
{
	if (!have_bench())
		return;
	static char out[1 << 16];
	const char *bad[][6] = {
		{ "stagecache", "bench", "l3scale", "--sizes", "0", NULL },
		{ "stagecache", "bench", "l3scale", "--sizes", "10x", NULL },
		{ "stagecache", "bench", "l3scale", "--sizes", "1,2,3,4,5,6,7,8,9", NULL },
		{ "stagecache", "bench", "l3scale", "--procs", "0", NULL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(run(NULL, out, sizeof(out), bad[i]) == 2, "%s %s: not a usage error:\n%s", bad[i][3], bad[i][4], out);
	char dir[64];
	snprintf(dir, sizeof(dir), "/var/tmp/check-bench-l3scale-%d", (int)getpid());
	const char *args[] = { "stagecache", "bench", "l3scale", "--quick", "--sizes", "200", "--procs", "2", "--dir", dir, NULL };
	/* exit 1: the targets are the 100 k store's rows, not measured here */
	int rc = run(NULL, out, sizeof(out), args);
	ck_assert_msg(rc == 1, "bench l3scale exited %d:\n%s", rc, out);
	const char *rows[] = { "open_ms_200", "locate_us_p50_200", "locate_us_p99_200", "puts_per_s_200", "puts_batch_per_s_200",
			       "janitor_pass_ms_200", "reconcile_after_crash_ms_200", "generate_s_200" };
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		ck_assert_msg(strstr(out, rows[i]), "no %s in:\n%s", rows[i], out);
	ck_assert_ptr_null(strstr(out, "missing"));
	/* the next run reuses the store */
	rc = run(NULL, out, sizeof(out), args);
	ck_assert_msg(rc == 1 && strstr(out, "(an earlier run)"), "second run (exit %d) did not reuse the store:\n%s", rc, out);
	sc_test_rm_tree(dir);
}
END_TEST

/* bench anatomy: bad options are usage errors; a small run prints every phase's row, each a
 * positive time, and exits 0 (it has no targets; nothing is missing) */
START_TEST(test_bench_anatomy_prints_every_phase)
{
	if (!have_bench())
		return;
	static char out[1 << 16];
	const char *bad[][6] = {
		{ "stagecache", "bench", "anatomy", "--ws", "0", NULL },
		{ "stagecache", "bench", "anatomy", "--rounds", "0", NULL },
		{ "stagecache", "bench", "anatomy", "--gets", "5", NULL },
		{ "stagecache", "bench", "anatomy", "extra", NULL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(run(NULL, out, sizeof(out), bad[i]) == 2, "%s: not a usage error:\n%s", bad[i][3], out);
	const char *args[] = { "stagecache", "bench", "anatomy", "--json", "--ws", "4M", "--rounds", "2", "--gets", "2000", NULL };
	int rc = run(NULL, out, sizeof(out), args);
	ck_assert_msg(rc == 0, "bench anatomy exited %d:\n%s", rc, out);
	const char *rows[] = { "anatomy_floor_ns", "anatomy_chase_ns", "anatomy_key_ns", "anatomy_lookup_ns", "anatomy_get_ns",
			       "anatomy_get_copy_ns", "anatomy_get_copy_vs_floor" };
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char want[96];
		snprintf(want, sizeof(want), "\"metric\":\"%s\",\"value\":", rows[i]);
		const char *at = strstr(out, want);
		ck_assert_msg(at, "no %s in:\n%s", rows[i], out);
		ck_assert_msg(strtod(at + strlen(want), NULL) > 0, "%s is not a positive figure:\n%s", rows[i], out);
	}
	ck_assert_ptr_null(strstr(out, "missing"));
}
END_TEST

Suite *bench_suite(void)
{
	Suite *s = suite_create("bench");
	TCase *tc = tcase_create("harness");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_bench_table_without_name_is_usage_error);
	tcase_add_test(tc, test_bench_out_without_name_keeps_file);
	tcase_add_test(tc, test_bench_unknown_name_keeps_file);
	tcase_add_test(tc, test_bench_l3_without_fio_reports_missing_rows);
	tcase_add_test(tc, test_bench_l3scale_keeps_its_store);
	tcase_add_test(tc, test_bench_anatomy_prints_every_phase);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(bench_suite)
