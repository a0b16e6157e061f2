/*
 * tests/check_probes.c — the USDT probes as built (no privileges needed).
 *
 * Reads the stapsdt notes (readelf -n) of build/libstagecache.so.0 and of build/tests/static_probes
 * (a program linked statically with every object of build/libstagecache.a) and checks that every
 * probe of lib/probes.h is there with provider "stagecache", a semaphore, the documented number
 * of arguments, and only argument forms libbpf 1.1 can parse. Also checks that the BPF skeleton
 * was generated and carries one program per probe.
 */
#include <libgen.h>
#include <limits.h>
#include <regex.h>
#include <string.h>
#include <sys/sdt.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/probes.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "stagecache.skel.h"
#pragma GCC diagnostic pop

struct expect {
	const char *name;
	int nargs;
};

#define X(name, n) { #name, n },
static const struct expect probes[] = { SC_PROBE_LIST(X) };
#undef X
#define NPROBES (int)(sizeof(probes) / sizeof(probes[0]))

/* Every name in the list has its semaphore declared in probes.h (a compile-time cross-check). */
#define X(name, n) &SC_PROBE_SEM(name),
static unsigned short *const semaphores[] __attribute__((used)) = { SC_PROBE_LIST(X) };
#undef X

static int have_readelf(void)
{
	return system("readelf --version >/dev/null 2>&1") == 0;
}

struct seen {
	int notes;        /* notes (call sites) found */
	int bad_semaphore;
	int bad_nargs;
	char bad_arg[128];
};

/* Forms libbpf 1.1 parses: N@$imm, N@%reg, N@off(%reg), N@(%reg). Anything else (for example the
 * (%reg,%reg,N) forms the default "nor" constraint produces) fails to attach. */
static int arg_parseable(const char *a)
{
	static regex_t re;
	static int init;
	if (!init) {
		int rc = regcomp(&re, "^-?[0-9]+@(\\$-?[0-9]+|%[a-z0-9]+|-?[0-9]*\\(%[a-z0-9]+\\))$", REG_EXTENDED | REG_NOSUB);
		ck_assert_int_eq(rc, 0);
		init = 1;
	}
	return regexec(&re, a, 0, NULL, 0) == 0;
}

/* Parse `readelf -n --wide @path` into @seen (indexed like probes[]); returns stagecache notes. */
static int read_notes(const char *path, struct seen *seen)
{
	char cmd[PATH_MAX + 64], line[4096];
	snprintf(cmd, sizeof(cmd), "readelf -n --wide '%s' 2>&1", path);
	FILE *f = popen(cmd, "r");
	ck_assert_msg(f != NULL, "popen %s", cmd);
	memset(seen, 0, sizeof(*seen) * NPROBES);
	int ours = 0, in_ours = 0, cur = -1;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *s = line + strspn(line, " \t");
		char *prov = strstr(s, "Provider: "); /* with --wide it ends the note's header line */
		if (prov) {
			in_ours = !strcmp(prov + 10, "stagecache");
			cur = -1;
		} else if (in_ours && !strncmp(s, "Name: ", 6)) {
			ours++;
			for (int i = 0; i < NPROBES; i++)
				if (!strcmp(s + 6, probes[i].name))
					cur = i;
			ck_assert_msg(cur >= 0, "%s: probe stagecache:%s is not in lib/probes.h", path, s + 6);
			seen[cur].notes++;
		} else if (in_ours && cur >= 0 && strstr(s, "Semaphore: ")) {
			unsigned long long sem = strtoull(strstr(s, "Semaphore: ") + 11, NULL, 16);
			if (!sem)
				seen[cur].bad_semaphore++;
		} else if (in_ours && cur >= 0 && !strncmp(s, "Arguments:", 10)) {
			int n = 0;
			for (char *save = NULL, *a = strtok_r(s + 10, " ", &save); a; a = strtok_r(NULL, " ", &save)) {
				n++;
				if (!arg_parseable(a) && !seen[cur].bad_arg[0])
					snprintf(seen[cur].bad_arg, sizeof(seen[cur].bad_arg), "%s", a);
			}
			if (n != probes[cur].nargs)
				seen[cur].bad_nargs++;
		}
	}
	int st = pclose(f);
	ck_assert_msg(st == 0, "readelf -n %s failed (status %d)", path, st);
	return ours;
}

static void check_file(const char *path)
{
	ck_assert_msg(access(path, R_OK) == 0, "%s is not built (run make)", path);
	struct seen seen[NPROBES];
	read_notes(path, seen);
	char missing[512] = "";
	for (int i = 0; i < NPROBES; i++) {
		if (!seen[i].notes)
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s", probes[i].name);
		ck_assert_msg(!seen[i].bad_semaphore, "%s: stagecache:%s has a call site without a semaphore", path,
			      probes[i].name);
		ck_assert_msg(!seen[i].bad_nargs, "%s: stagecache:%s has a call site with other than %d arguments",
			      path, probes[i].name, probes[i].nargs);
		ck_assert_msg(!seen[i].bad_arg[0], "%s: stagecache:%s has argument '%s' that libbpf 1.1 cannot parse",
			      path, probes[i].name, seen[i].bad_arg);
	}
	ck_assert_msg(!missing[0], "%s: probes never called (no note):%s", path, missing);
}

START_TEST(test_shared_library_notes)
{
	if (!have_readelf()) {
		sc_skip("readelf (binutils) is not installed");
		return;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/libstagecache.so.0", sc_test_build_dir());
	check_file(path);
}
END_TEST

START_TEST(test_static_binary_notes)
{
	if (!have_readelf()) {
		sc_skip("readelf (binutils) is not installed");
		return;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/tests/static_probes", sc_test_build_dir());
	check_file(path);
}
END_TEST

#define CONSTRAINT_STR_(x) #x
#define CONSTRAINT_STR(x) CONSTRAINT_STR_(x)

/* The arguments of this binary's one sc_check:constraint note (space-separated, into @out);
 * returns their number, or -1 when there is no such note. */
static int own_probe_args(const char *path, char *out, size_t cap)
{
	char cmd[PATH_MAX + 64], line[4096];
	snprintf(cmd, sizeof(cmd), "readelf -n --wide '%s' 2>&1", path);
	FILE *f = popen(cmd, "r");
	ck_assert_msg(f != NULL, "popen %s", cmd);
	int in_ours = 0, n = -1;
	out[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *s = line + strspn(line, " \t");
		char *prov = strstr(s, "Provider: ");
		if (prov)
			in_ours = !strcmp(prov + 10, "sc_check");
		else if (in_ours && !strncmp(s, "Name: ", 6))
			in_ours = !strcmp(s + 6, "constraint");
		else if (in_ours && !strncmp(s, "Arguments:", 10)) {
			ck_assert_msg(n < 0, "%s: more than one sc_check:constraint note", path);
			snprintf(out, cap, "%s", s + 10 + strspn(s + 10, " "));
			n = 0;
			for (const char *c = out; *c; c += strcspn(c, " "), c += strspn(c, " "))
				n++;
		}
	}
	ck_assert_msg(pclose(f) == 0, "readelf -n %s failed", path);
	return n;
}

/* Regression guard for the argument forms: a probe fired here with locals must produce only
 * parseable forms in this very binary (the build's STAP_SDT_ARG_CONSTRAINT=nr is in effect). */
START_TEST(test_constraint_in_effect)
{
	if (!have_readelf()) {
		sc_skip("readelf (binutils) is not installed");
		return;
	}
	ck_assert(arg_parseable("8@%rax"));
	ck_assert(arg_parseable("-8@$-5"));
	ck_assert(arg_parseable("8@-16(%rbp)"));
	ck_assert(!arg_parseable("8@(%rax,%rdx,8)"));
	ck_assert(!arg_parseable("8@sym(%rip)"));
#ifndef STAP_SDT_ARG_CONSTRAINT
	ck_abort_msg("the build must define STAP_SDT_ARG_CONSTRAINT=nr");
#else
	ck_assert_str_eq(CONSTRAINT_STR(STAP_SDT_ARG_CONSTRAINT), "nr");
	/* fire one with an indexed array element and a stack local: under the default "nor" these
	 * may become (%reg,%reg,N) or sym(%rip) memory forms; under "nr" they must not */
	static long table[8];
	volatile unsigned i = 5;
	long local = (long)i * 3;
	table[i] = local;
	STAP_PROBE3(sc_check, constraint, table[i], local, table[(i + 1) & 7]);
	char path[PATH_MAX], args[512];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	ck_assert(n > 0);
	path[n] = 0;
	int nargs = own_probe_args(path, args, sizeof(args));
	ck_assert_msg(nargs == 3, "%s: sc_check:constraint has %d arguments, not 3 ('%s')", path, nargs, args);
	for (char *save = NULL, *a = strtok_r(args, " ", &save); a; a = strtok_r(NULL, " ", &save))
		ck_assert_msg(arg_parseable(a), "%s: sc_check:constraint argument '%s' is not a form libbpf parses",
			      path, a);
#endif
}
END_TEST

START_TEST(test_skeleton_has_every_program)
{
	size_t sz = 0;
	const unsigned char *elf = stagecache_bpf__elf_bytes(&sz);
	ck_assert_msg(elf && sz > 64, "empty skeleton");
	ck_assert(!memcmp(elf, "\177ELF", 4));
	ck_assert_msg(memmem(elf, sz, "usdt", 5) != NULL, "no SEC(\"usdt\") program");
	for (int i = 0; i < NPROBES; i++) {
		char name[64];
		int n = snprintf(name, sizeof(name), "%s", probes[i].name);
		ck_assert_msg(memmem(elf, sz, name, (size_t)n + 1) != NULL, "no BPF program for stagecache:%s", name);
	}
	/* the map layouts travel as BTF so bpftool prints named fields */
	static const char *const types[] = { "sc_bpf_key", "sc_bpf_counter", "sc_bpf_hist", "sc_bpf_payoff",
					     "sc_bpf_promotion", "sc_bpf_digest" };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		ck_assert_msg(memmem(elf, sz, types[i], strlen(types[i]) + 1) != NULL, "no BTF for struct %s",
			      types[i]);
}
END_TEST

Suite *probes_suite(void)
{
	Suite *s = suite_create("probes");
	TCase *tc = tcase_create("notes");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_shared_library_notes);
	tcase_add_test(tc, test_static_binary_notes);
	tcase_add_test(tc, test_constraint_in_effect);
	tcase_add_test(tc, test_skeleton_has_every_program);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(probes_suite)
