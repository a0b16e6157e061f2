/*
 * tests/check_product.c — the product build carries no test hooks: the library that `make
 * install` installs exports no fault, clock or schedule symbol, and SC_FAULT in the environment
 * changes nothing there — while the same variable does kill the test build's CLI at that point
 * (so the check below is not passing because the variable is ignored everywhere).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sc_check.h"

#ifndef SC_BUILD_DIR
#define SC_BUILD_DIR "build"
#endif

static int sh(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

START_TEST(test_product_library_exports_no_hooks)
{
	char cmd[512];
	/* the product library exports its API ... */
	snprintf(cmd, sizeof(cmd), "nm -D --defined-only %s/libstagecache.so.0 | grep -q ' sc_arena_open'", SC_BUILD_DIR);
	ck_assert_int_eq(sh(cmd), 0);
	/* ... and no hook (sc_clock_ns, the clock of restore deadlines, is API: the hooks set clocks) */
	snprintf(cmd, sizeof(cmd), "nm -D --defined-only %s/libstagecache.so.0 | grep -iE 'fault|set_clock|sched'", SC_BUILD_DIR);
	ck_assert_msg(sh(cmd) == 1, "the product library exports a test hook");
	/* nor does the static archive define one */
	snprintf(cmd, sizeof(cmd), "nm --defined-only %s/libstagecache.a 2>/dev/null | grep -iE ' T .*(fault|set_clock|sched)'",
		 SC_BUILD_DIR);
	ck_assert_msg(sh(cmd) == 1, "the product archive defines a test hook");
	/* the test build has them (the grep above would find them there) */
	snprintf(cmd, sizeof(cmd), "nm -D --defined-only %s/test/libstagecache.so.0 | grep -q sc_fault_arm", SC_BUILD_DIR);
	ck_assert_int_eq(sh(cmd), 0);
}
END_TEST

/* The product binary links only what every command uses: liburing, libbpf (libelf,
 * zlib), libxxhash, libc and our library. The benchmarks live in stagecache-bench, the exporter
 * loads libmicrohttpd when it serves. */
START_TEST(test_product_binary_links_only_what_it_uses)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "readelf -d %s/stagecache | grep -q 'NEEDED.*libstagecache'", SC_BUILD_DIR);
	ck_assert_int_eq(sh(cmd), 0); /* the check below reads the right section */
	snprintf(cmd, sizeof(cmd),
		 "readelf -d %s/stagecache | grep NEEDED | grep -vE '\\[(libstagecache|liburing|libbpf|libelf|libz|"
		 "libxxhash|libc)\\.so[.0-9]*\\]'", SC_BUILD_DIR);
	ck_assert_msg(sh(cmd) == 1, "build/stagecache links a library it should not (see readelf -d)");
}
END_TEST

START_TEST(test_sc_fault_changes_nothing_in_the_product)
{
	const char *name = sc_test_name("product");
	char file[256], cmd[1400];
	snprintf(file, sizeof(file), "/tmp/sc-product-%d.bin", (int)getpid());
	snprintf(cmd, sizeof(cmd), "head -c 10000 /dev/urandom > %s && %s/stagecache create %s --size 16M --huge off >/dev/null",
		 file, SC_BUILD_DIR, name);
	ck_assert_int_eq(sh(cmd), 0);
	/* the test build's CLI dies at the point named in SC_FAULT ... */
	snprintf(cmd, sizeof(cmd),
		 "SC_FAULT=l2.admit.linked %s/test/stagecache put %s --model m --state s --tokens 1,2,3 --kind full_state "
		 "--file %s >/dev/null 2>&1",
		 SC_BUILD_DIR, name, file);
	ck_assert_int_eq(sh(cmd), 128 + 9);
	/* ... the product's does not: the put succeeds and the entry is there */
	snprintf(cmd, sizeof(cmd),
		 "SC_FAULT=l2.admit.linked %s/stagecache put %s --model m --state s --tokens 4,5,6 --kind full_state "
		 "--file %s >/dev/null && %s/stagecache get %s --model m --state s --tokens 4,5,6 --out - | cmp - %s",
		 SC_BUILD_DIR, name, file, SC_BUILD_DIR, name, file);
	ck_assert_int_eq(sh(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/stagecache destroy %s >/dev/null; rm -f %s", SC_BUILD_DIR, name, file);
	sh(cmd);
}
END_TEST

Suite *product_suite(void)
{
	Suite *s = suite_create("product");
	TCase *tc = tcase_create("product");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_product_library_exports_no_hooks);
	tcase_add_test(tc, test_product_binary_links_only_what_it_uses);
	tcase_add_test(tc, test_sc_fault_changes_nothing_in_the_product);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(product_suite)
