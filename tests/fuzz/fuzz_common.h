/* tests/fuzz/fuzz_common.h — helpers shared by the libFuzzer targets (header-only: every
 * tests/fuzz/fuzz_*.c is its own binary).
 *
 * Seeds: a target that knows what a valid input looks like writes a few into its corpus
 * directory (the first non-flag argument) when that directory is empty, from
 * LLVMFuzzerInitialize. That way `build/fuzz/<target> corpus/` starts from inputs that pass the
 * checksums instead of rediscovering the format from nothing, and no binary seeds live in git.
 */
#ifndef SC_FUZZ_COMMON_H
#define SC_FUZZ_COMMON_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A property failed: say which, then trap (libFuzzer saves the input). */
#define FUZZ_CHECK(c)                                                                          \
	do {                                                                                   \
		if (!(c)) {                                                                    \
			fprintf(stderr, "property failed: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			__builtin_trap();                                                      \
		}                                                                              \
	} while (0)

/* The corpus directory to seed: the first argument that is not a flag and is an empty
 * directory; NULL when there is none (e.g. when running single inputs). */
static inline const char *fuzz_seed_dir(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		struct stat sb;
		if (argv[i][0] == '-' || stat(argv[i], &sb) || !S_ISDIR(sb.st_mode))
			continue;
		DIR *d = opendir(argv[i]);
		if (!d)
			return NULL;
		struct dirent *e;
		int empty = 1;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				empty = 0;
		closedir(d);
		return empty ? argv[i] : NULL;
	}
	return NULL;
}

static inline void fuzz_seed_write(const char *dir, const char *name, const void *a, size_t alen,
				   const void *b, size_t blen)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/seed-%s", dir, name);
	int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0)
		return;
	if (write(fd, a, alen) != (ssize_t)alen || (blen && write(fd, b, blen) != (ssize_t)blen))
		unlink(p);
	close(fd);
}

static inline int fuzz_rm_one(const char *p, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb, (void)ftw;
	return type == FTW_DP ? rmdir(p) : unlink(p);
}

/* Remove /dev/shm/<prefix><pid> files or directories left by runs that died without exiting
 * (a timeout or a crash ends the process with _exit: no atexit cleanup). */
static inline void fuzz_reap_stale(const char *prefix)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	size_t pl = strlen(prefix);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, pl))
			continue;
		char *end;
		long pid = strtol(e->d_name + pl, &end, 10);
		if (*end || pid <= 0 || pid == getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char p[512];
		snprintf(p, sizeof(p), "/dev/shm/%s", e->d_name);
		nftw(p, fuzz_rm_one, 8, FTW_DEPTH | FTW_PHYS);
	}
	closedir(d);
}

#endif
