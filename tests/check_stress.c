/*
 * tests/check_stress.c — `stagecache stress` as CI runs it, shorter: every kind of work (L2 gets
 * and admits, L3 restores and re-puts, restores into another model's stage, full queues of cold
 * O_DIRECT fills, decodes) with a kill every 100 ms, on a plain and on a segmented arena and L3
 * store. Every counter of the summary must be 0 and the repaired arena usable.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "sc_check.h"

static void run_stress(const char *extra)
{
	char out[8192], cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/stagecache stress %s --procs 4 --seconds 8 --kill-every 100 --seed 7 --json %s 2>&1",
		 sc_test_build_dir(), sc_test_name("stress"), extra);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	int st = pclose(p);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "stress %s failed:\n%s", extra, out);
	static const char *const zero[] = { "\"digest_mismatches\":0,", "\"late_writes\":0,", "\"stale_served\":0,",
					    "\"lost_commits\":0,", "\"torn_records\":0,", "\"leaked_bytes\":0,",
					    "\"deadlocks\":0,", "\"held_by_dead_bytes\":0,", "\"usable_after_repair\":true",
					    "\"ok\":true", NULL };
	for (int i = 0; zero[i]; i++)
		ck_assert_msg(strstr(out, zero[i]), "stress %s: no %s in\n%s", extra, zero[i], out);
	/* each new kind of work ran */
	static const char *const ran[] = { "\"reput\":", "\"other_identity\":", "\"fill_queue\":", NULL };
	for (int i = 0; ran[i]; i++) {
		const char *at = strstr(out, ran[i]);
		ck_assert_msg(at && strtod(at + strlen(ran[i]), NULL) > 0, "stress %s: %s did not run:\n%s", extra, ran[i],
			      out);
	}
}

START_TEST(every_kind_of_work_killed_on_a_plain_arena)
{
	run_stress("--size 256M");
}
END_TEST

START_TEST(every_kind_of_work_killed_on_a_segmented_arena)
{
	run_stress("--size 96M --segment-bytes 64K --max-payload 1M");
}
END_TEST

Suite *stress_suite(void)
{
	Suite *s = suite_create("stress");
	TCase *tc = tcase_create("stress");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, every_kind_of_work_killed_on_a_plain_arena);
	tcase_add_test(tc, every_kind_of_work_killed_on_a_segmented_arena);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(stress_suite)
