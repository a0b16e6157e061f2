/*
 * tools/bench/util.c — small helpers every benchmark may use (declared in bench.h): the machine's
 * cache size, programs in PATH, a command's first line, a benchmark without options, progress
 * notes, the block device under a directory. Below everything else in tools/bench/: it calls nothing of the harness.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <emmintrin.h> /* _mm_clflush */
#endif

#include "bench.h"

static uint64_t read_size_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	unsigned long long v = 0;
	char unit = 0;
	int k = fscanf(f, "%llu%c", &v, &unit);
	fclose(f);
	if (k < 1)
		return 0;
	return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : v;
}

uint64_t bench_splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t bench_llc_bytes(void)
{
	uint64_t best = 0;
	char p[128];
	for (int i = 0; i < 8; i++) {
		snprintf(p, sizeof(p), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		uint64_t s = read_size_file(p);
		if (s > best)
			best = s;
	}
	if (best)
		return best;
	long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
	return l3 > 0 ? (uint64_t)l3 : l2 > 0 ? (uint64_t)l2 : 0;
}

int bench_in_path(const char *prog)
{
	const char *path = getenv("PATH");
	if (!path)
		return 0;
	char dir[4096];
	while (*path) {
		size_t n = strcspn(path, ":");
		if (n && n < sizeof(dir) - strlen(prog) - 2) {
			memcpy(dir, path, n);
			snprintf(dir + n, sizeof(dir) - n, "/%s", prog);
			if (access(dir, X_OK) == 0)
				return 1;
		}
		path += n + (path[n] == ':');
	}
	return 0;
}

static void first_line_of(FILE *f, char *out, size_t len)
{
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = 0;
}

void bench_file_line(const char *path, char *out, size_t len)
{
	out[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	first_line_of(f, out, len);
	fclose(f);
}

void bench_first_line(const char *cmd, char *out, size_t len)
{
	out[0] = 0;
	FILE *f = popen(cmd, "r");
	if (!f)
		return;
	first_line_of(f, out, len);
	char sink[256];
	while (fgets(sink, sizeof(sink), f))
		;
	pclose(f);
}

int bench_no_options(const char *which, int argc, char **argv, void (*usage)(FILE *))
{
	static const struct option opts[] = { { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "bench %s", which);
	optind = 0;
	opterr = 0;
	if (getopt_long(argc, argv, "h", opts, NULL) == 'h') {
		usage(stdout);
		return EXIT_OK;
	}
	if (optind > 1)
		return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
	if (optind < argc)
		return cli_usage_error(cmd, "unknown option '%s'", argv[optind]);
	return -1;
}

void bench_progress(const char *fmt, ...)
{
	if (!isatty(2))
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "\r\033[K");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

void *bench_huge_alloc(size_t bytes, int shared, const char **backing)
{
	int flags = (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS;
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags | MAP_HUGETLB, -1, 0);
	const char *b = "hugetlb-2M";
	if (p == MAP_FAILED) {
		b = shared ? "shmem (MADV_HUGEPAGE)" : "anonymous (MADV_HUGEPAGE)";
		if ((p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0)) != MAP_FAILED)
			madvise(p, bytes, MADV_HUGEPAGE);
	}
	if (backing)
		*backing = b;
	return p;
}

/* An arena of @bytes (hugepages when there are, else 4 KiB pages) with one stage: bench l2 and its
 * KV-event rows. */
int bench_l2_arena(const char *name, uint64_t bytes, uint32_t entries, struct sc_arena **a, struct sc_stage **st)
{
	struct sc_arena_opts o = { .size_bytes = (bytes + (2ull << 20) - 1) & ~((2ull << 20) - 1), .huge = SC_HUGE_AUTO,
				   .index_entries = entries };
	int rc = sc_arena_create(name, &o, a);
	if (rc == -ENOMEM) {
		o.huge = SC_HUGE_OFF;
		rc = sc_arena_create(name, &o, a);
	}
	if (!rc && (rc = sc_stage_open(*a, "bench-model", "bench-state", st))) {
		sc_arena_close(*a);
		sc_arena_destroy(NULL, name);
	}
	if (rc)
		fprintf(stderr, "stagecache bench l2: arena %s of %llu MiB: %s\n", name, (unsigned long long)(bytes >> 20),
			sc_strerror(rc));
	return rc;
}

void bench_l2_arena_drop(const char *name, struct sc_arena *a, struct sc_stage *st)
{
	sc_stage_close(st);
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
}

void bench_evict(const void *p, size_t n)
{
#if defined(__x86_64__)
	for (size_t o = 0; o < n; o += 64)
		_mm_clflush((const char *)p + o);
	_mm_mfence();
#elif defined(__aarch64__)
	for (size_t o = 0; o < n; o += 64)
		__asm__ volatile("dc civac, %0" ::"r"((const char *)p + o) : "memory");
	__asm__ volatile("dsb ish" ::: "memory");
#else
	(void)p, (void)n; /* no portable way: callers measure what the caches hold */
#endif
}


void bench_disk_of(const char *dir, char *out, size_t len)
{
	struct stat st;
	out[0] = 0;
	if (stat(dir, &st))
		return;
	snprintf(out, len, "/sys/dev/block/%u:%u/stat", major(st.st_dev), minor(st.st_dev));
	if (access(out, R_OK))
		out[0] = 0;
}

int bench_disk_reads(const char *stat_path, double *ios, double *bytes)
{
	FILE *f = stat_path[0] ? fopen(stat_path, "r") : NULL;
	if (!f)
		return -1;
	unsigned long long n, merges, sectors;
	int k = fscanf(f, "%llu %llu %llu", &n, &merges, &sectors);
	fclose(f);
	if (k != 3)
		return -1;
	*ios = (double)n;
	*bytes = (double)sectors * 512.0;
	return 0;
}
