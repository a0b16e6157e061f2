/*
 * tools/bench_l3.c — `stagecache bench l3 [--json] [--quick] [--runs N] [--dir PARENT] [--qd4m N] [--qd64k N]`.
 *
 * Fills of 64 x 4 MiB and 1024 x 64 KiB L3 objects into arena memory (sc_l2_reserve'd buffers of
 * one arena), cold (page cache dropped: /proc/sys/vm/drop_caches as root, else
 * posix_fadvise(DONTNEED) per file) and warm, compared in the same run with:
 *   - fio (io_uring engine, direct=1, the same object files, the same block size and depth),
 *     run as a subprocess with --output-format=json; bandwidth parsed from "bw_bytes";
 *   - a pread loop (open, pread of the payload into the same arena memory, close): with
 *     O_DIRECT for the cold 64 KiB case, buffered for the warm 4 MiB case.
 * The fill does what a restore does: open, header + payload reads straight into the destination,
 * header checks and the XXH3-128 digest of every payload byte, LRU touch, close.
 * Every figure is the median of --runs runs (default 5). The directory lives under /var/tmp (a
 * real disk, not tmpfs) and is removed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define MAXOBJ 1024

struct set {
	const char *label;      /* "4m" / "64k" */
	uint64_t bytes;         /* payload bytes per object */
	int count;
	int qd;
	char dir[300];
	struct sc_l3 *l3;
	struct sc_l3_location *loc;
	char (*path)[400];
	void **dst;             /* arena memory per object (shared round-robin for 4 MiB) */
	uint64_t dst_bytes;
	int ndst;
};

static char parent[200];

static void rm_rf(const char *d)
{
	pid_t pid = fork();
	if (pid == 0) {
		execlp("rm", "rm", "-rf", d, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static void drop_caches(struct set *s)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd >= 0) {
		int ok = write(fd, "1", 1) == 1;
		close(fd);
		if (ok)
			return;
	}
	for (int i = 0; i < s->count; i++) {
		int f = open(s->path[i], O_RDONLY);
		if (f >= 0) {
			posix_fadvise(f, 0, 0, POSIX_FADV_DONTNEED);
			close(f);
		}
	}
}

static void fill_pattern(uint8_t *p, uint64_t n, uint64_t seed)
{
	uint64_t *w = (uint64_t *)p, x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (uint64_t i = 0; i < n / 8; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		w[i] = x;
	}
}

static int setup_set(struct set *s, struct sc_stage *st)
{
	snprintf(s->dir, sizeof(s->dir), "%s/l3-%s", parent, s->label);
	struct sc_l3_opts o = { .queue_depth = (uint32_t)s->qd };
	int rc = sc_l3_open(s->dir, &o, &s->l3);
	if (rc)
		return cli_fail("bench", rc, "cannot open %s", s->dir);
	s->loc = calloc((size_t)s->count, sizeof(*s->loc));
	s->path = calloc((size_t)s->count, sizeof(*s->path));
	s->dst = calloc((size_t)s->ndst, sizeof(void *));
	uint8_t *buf = malloc(s->bytes);
	int32_t tokens[2];
	if (!s->loc || !s->path || !s->dst || !buf)
		return cli_fail("bench", -ENOMEM, "setup");
	for (int i = 0; i < s->count; i++) {
		fill_pattern(buf, s->bytes, (uint64_t)i + s->bytes);
		struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { s->bytes } };
		tokens[0] = i, tokens[1] = (int32_t)s->bytes;
		struct sc_l3_put_args a = { .ns = "bench", .tokens = tokens, .token_count = 2, .payload = &pl };
		if ((rc = sc_l3_put(s->l3, &a, &s->loc[i]))) {
			free(buf);
			return cli_fail("bench", rc, "put");
		}
		char hex[SC_DIGEST_HEX_LEN + 1];
		sc_digest_format(s->loc[i].digest, hex);
		snprintf(s->path[i], sizeof(s->path[i]), "%s/objects/%.2s/%s.sc3", s->dir, hex, hex);
	}
	free(buf);
	/* destinations: arena reservations (4 KiB aligned), reused round-robin */
	s->dst_bytes = s->bytes;
	for (int i = 0; i < s->ndst; i++) {
		struct sc_l2_resv r;
		if ((rc = sc_l2_reserve(st, s->dst_bytes, &r)))
			return cli_fail("bench", rc, "arena reservation %d", i);
		s->dst[i] = r.ptr;
		memset(r.ptr, 0, s->dst_bytes); /* fault the memory in before timing */
	}
	return 0;
}

/* One pass of fills of the whole set, at most ndst in flight (a destination is handed to a new
 * fill only after its previous fill was reaped). Returns seconds, or < 0. */
static double fill_pass(struct set *s, uint32_t flags, int *direct_count)
{
	struct sc_l3_fill_req *req = calloc((size_t)s->count, sizeof(*req)), *done[64];
	int *free_dst = calloc((size_t)s->ndst, sizeof(int)), nfree = s->ndst;
	if (!req || !free_dst) {
		free(req);
		free(free_dst);
		return -1;
	}
	for (int i = 0; i < s->ndst; i++)
		free_dst[i] = i;
	int next = 0, completed = 0, bad = 0;
	double t0 = bench_now();
	while (completed < s->count && !bad) {
		while (next < s->count && nfree > 0) {
			int d = free_dst[--nfree];
			req[next] = (struct sc_l3_fill_req){ .loc = &s->loc[next], .dst = s->dst[d], .dst_bytes = s->dst_bytes,
							     .flags = flags, .user_data = (uint64_t)d };
			struct sc_l3_fill_req *rp = &req[next];
			int k = sc_l3_fill_submit(s->l3, &rp, 1);
			if (k < 0)
				bad = 1;
			if (k <= 0) {
				nfree++;
				break;
			}
			next++;
		}
		int r = sc_l3_fill_reap(s->l3, done, 64, -1);
		if (r < 0)
			bad = 1;
		for (int j = 0; j < r; j++) {
			free_dst[nfree++] = (int)done[j]->user_data;
			if (done[j]->result && !bad) {
				bad = 1;
				fprintf(stderr, "stagecache bench: fill of %s: %s\n", s->path[done[j] - req],
					sc_strerror(done[j]->result));
			}
		}
		completed += r > 0 ? r : 0;
	}
	while (completed < next) { /* never leave a read in flight into memory we reuse */
		int r = sc_l3_fill_reap(s->l3, done, 64, -1);
		if (r <= 0)
			break;
		completed += r;
	}
	double t = bench_now() - t0;
	if (direct_count) {
		*direct_count = 0;
		for (int i = 0; i < next; i++)
			*direct_count += req[i].direct;
	}
	free(req);
	free(free_dst);
	return bad ? -1 : t;
}

/* The baseline: open, pread the payload into the same arena memory, close. */
static double pread_pass(struct set *s, int direct)
{
	double t0 = bench_now();
	for (int i = 0; i < s->count; i++) {
		int fd = open(s->path[i], O_RDONLY | (direct ? O_DIRECT : 0));
		if (fd < 0)
			return -1;
		uint64_t got = 0;
		uint8_t *d = s->dst[i % s->ndst];
		while (got < s->bytes) {
			ssize_t r = pread(fd, d + got, s->bytes - got, (off_t)(4096 + got));
			if (r <= 0) {
				close(fd);
				return -1;
			}
			got += (uint64_t)r;
		}
		close(fd);
	}
	return bench_now() - t0;
}

/* Bring whole object files (header and payload) into the page cache. */
static void warm_files(struct set *s)
{
	static uint8_t buf[1 << 20];
	for (int i = 0; i < s->count; i++) {
		int fd = open(s->path[i], O_RDONLY);
		if (fd < 0)
			continue;
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
	}
}

/* fio over the same files: io_uring, direct=1, block size = payload size, same depth. GB/s or < 0. */
static double fio_pass(struct set *s)
{
	char out[320], bs[32], depth[32], names[64], opendir[340];
	snprintf(out, sizeof(out), "%s/fio-%s.json", parent, s->label);
	snprintf(bs, sizeof(bs), "--bs=%llu", (unsigned long long)s->bytes);
	snprintf(depth, sizeof(depth), "--iodepth=%d", s->qd);
	snprintf(names, sizeof(names), "--name=l3-%s", s->label);
	snprintf(opendir, sizeof(opendir), "--opendir=%s/objects", s->dir);
	char outarg[360];
	snprintf(outarg, sizeof(outarg), "--output=%s", out);
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);
		if (nul >= 0)
			dup2(nul, 1), dup2(nul, 2);
		execlp("fio", "fio", names, opendir, "--ioengine=io_uring", "--direct=1", "--rw=read", bs, depth,
		       "--loops=3", "--output-format=json", outarg, (char *)NULL);
		_exit(127);
	}
	int status;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return -1;
	FILE *f = fopen(out, "r");
	if (!f)
		return -1;
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	/* the first "read" section's bw_bytes */
	char *p = strstr(text, "\"read\"");
	p = p ? strstr(p, "\"bw_bytes\"") : NULL;
	if (!p)
		return -1;
	p = strchr(p, ':');
	return p ? strtod(p + 1, NULL) / 1e9 : -1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench l3 [--json] [--quick] [--runs N] [--dir PARENT] [--qd4m N] [--qd64k N]\n\n"
		   "L3 fills of 64 x 4 MiB and 1024 x 64 KiB objects into arena memory, cold and warm, against\n"
		   "fio (io_uring, direct=1, same files, block size and depth) and a pread loop into the same\n"
		   "memory. Dropping the page cache needs root (else posix_fadvise DONTNEED is used).\n"
		   "Objects go to a temporary directory under PARENT (default /var/tmp), removed at the end.\n");
}

int bench_l3(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, 0, 'j' },        { "quick", no_argument, 0, 'q' },
		{ "runs", required_argument, 0, 'r' },  { "dir", required_argument, 0, 'd' },
		{ "qd4m", required_argument, 0, '4' },  { "qd64k", required_argument, 0, '6' },
		{ "help", no_argument, 0, 'h' },        { 0, 0, 0, 0 },
	};
	const char *pdir = "/var/tmp";
	uint64_t runs = 5, qd4 = 8, qd64 = 32;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': break;
		case 'q': runs = 3; break;
		case 'r':
			if (cli_parse_u64(optarg, 100, &runs) || !runs)
				return cli_usage_error("bench", "bad --runs");
			break;
		case 'd': pdir = optarg; break;
		case '4':
			if (cli_parse_u64(optarg, 256, &qd4) || !qd4)
				return cli_usage_error("bench", "bad --qd4m");
			break;
		case '6':
			if (cli_parse_u64(optarg, 256, &qd64) || !qd64)
				return cli_usage_error("bench", "bad --qd64k");
			break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("bench", "unknown option for l3");
		}
	}
	snprintf(parent, sizeof(parent), "%s/sc-bench-l3-XXXXXX", pdir);
	if (!mkdtemp(parent))
		return cli_fail("bench", -errno, "cannot create a directory under %s", pdir);
	char name[64];
	snprintf(name, sizeof(name), "bench-l3-%d", (int)getpid());
	struct sc_arena_opts ao = { .size_bytes = 256ull << 20 };
	struct sc_arena *arena = NULL;
	struct sc_stage *st = NULL;
	/* 4 MiB destinations: one per fill in flight; 64 KiB: 256 of them */
	struct set s4 = { .label = "4m", .bytes = 4ull << 20, .count = 64, .qd = (int)qd4, .ndst = (int)qd4 };
	struct set s64 = { .label = "64k", .bytes = 64ull << 10, .count = 1024, .qd = (int)qd64, .ndst = 256 };
	if (s4.ndst > s4.count)
		s4.ndst = s4.count;
	if (s64.ndst < s64.qd)
		s64.ndst = s64.qd;
	int ret = EXIT_FAIL, rc = sc_arena_create(name, &ao, &arena);
	if (rc) {
		ao.huge = SC_HUGE_OFF;
		rc = sc_arena_create(name, &ao, &arena);
	}
	if (rc) {
		cli_fail("bench", rc, "cannot create arena");
		goto cleanup;
	}
	if ((rc = sc_stage_open(arena, "bench", "l3", &st))) {
		cli_fail("bench", rc, "stage");
		goto cleanup;
	}
	if (setup_set(&s4, st) || setup_set(&s64, st))
		goto cleanup;
	sc_l3_bind_arena(s4.l3, arena);
	sc_l3_bind_arena(s64.l3, arena);

	int n = (int)runs;
	double *v = calloc((size_t)n * 16, sizeof(double));
	if (!v)
		goto cleanup;
	double *c4 = v, *f4 = v + n, *c64 = v + 2 * n, *p64 = v + 3 * n, *w4 = v + 4 * n, *pw4 = v + 5 * n;
	double *rc4 = v + 6 * n, *r64 = v + 7 * n, *rw4 = v + 8 * n, *f64 = v + 9 * n, *w64 = v + 10 * n;
	double *rc4f = v + 11 * n;
	int have_fio = 1, direct4 = 0, direct64 = 0;
	for (int r = 0; r < n; r++) {
		/* cold 4 MiB: ours, then fio on the same files */
		drop_caches(&s4);
		double t = fill_pass(&s4, 0, &direct4);
		if (t < 0) {
			cli_fail("bench", 0, "a 4 MiB fill failed");
			goto cleanup;
		}
		c4[r] = (double)s4.count * (double)s4.bytes / t / 1e9;
		if (have_fio) {
			f4[r] = fio_pass(&s4);
			if (f4[r] <= 0)
				have_fio = 0;
			else
				rc4[r] = c4[r] / f4[r];
		}
		/* cold 64 KiB: ours vs an O_DIRECT pread loop */
		drop_caches(&s64);
		t = fill_pass(&s64, 0, &direct64);
		if (t < 0) {
			cli_fail("bench", 0, "a 64 KiB fill failed");
			goto cleanup;
		}
		c64[r] = (double)s64.count / t;
		drop_caches(&s64);
		double tp = pread_pass(&s64, 1);
		p64[r] = (double)s64.count / tp;
		r64[r] = tp / t;
		if (have_fio) {
			f64[r] = fio_pass(&s64);
			rc4f[r] = f64[r] > 0 ? c64[r] * (double)s64.bytes / 1e9 / f64[r] : 0;
		}
		/* warm 4 MiB: page cache populated; ours (buffered, as the file is warm) vs buffered pread */
		warm_files(&s4);
		double tws[3], tps[3], rws[3];
		for (int k = 0; k < 3; k++) { /* interleaved, so both see the same host load */
			tws[k] = fill_pass(&s4, 0, NULL);
			tps[k] = pread_pass(&s4, 0);
			rws[k] = tps[k] / tws[k];
		}
		double tw = bench_median(tws, 3), tpw = bench_median(tps, 3);
		w4[r] = (double)s4.count * (double)s4.bytes / tw / 1e9;
		pw4[r] = (double)s4.count * (double)s4.bytes / tpw / 1e9;
		rw4[r] = bench_median(rws, 3);
		/* warm 64 KiB, for the record */
		warm_files(&s64);
		w64[r] = (double)s64.count / fill_pass(&s64, 0, NULL);
	}
	if (have_fio)
		bench_value("l3", "fill_cold_4m_vs_fio", bench_median(rc4, n), "ratio", "fio io_uring direct=1 bs=4M same files and depth");
	else
		fprintf(stderr, "stagecache bench l3: fio not available (or failed): fill_cold_4m_vs_fio not measured\n");
	bench_value("l3", "fill_cold_64k_vs_pread", bench_median(r64, n), "ratio", "pread loop, O_DIRECT, same arena memory");
	bench_value("l3", "fill_warm_4m_vs_pread", bench_median(rw4, n), "ratio", "pread loop, buffered, warm, same arena memory");
	bench_value("l3", "fill_cold_4m_gbps", bench_median(c4, n), "GB/s", NULL);
	if (have_fio) {
		bench_value("l3", "fio_cold_4m_gbps", bench_median(f4, n), "GB/s", NULL);
		bench_value("l3", "fio_cold_64k_gbps", bench_median(f64, n), "GB/s", NULL);
		bench_value("l3", "fill_cold_64k_vs_fio", bench_median(rc4f, n), "ratio", "fio io_uring direct=1 bs=64K same files and depth");
	}
	bench_value("l3", "fill_cold_4m_objects_per_s", bench_median(c4, n) * 1e9 / (double)s4.bytes, "objects/s", NULL);
	bench_value("l3", "fill_cold_64k_objects_per_s", bench_median(c64, n), "objects/s", NULL);
	bench_value("l3", "fill_cold_64k_gbps", bench_median(c64, n) * (double)s64.bytes / 1e9, "GB/s", NULL);
	bench_value("l3", "pread_direct_64k_objects_per_s", bench_median(p64, n), "objects/s", NULL);
	bench_value("l3", "fill_warm_4m_gbps", bench_median(w4, n), "GB/s", NULL);
	bench_value("l3", "pread_warm_4m_gbps", bench_median(pw4, n), "GB/s", NULL);
	bench_value("l3", "fill_warm_64k_objects_per_s", bench_median(w64, n), "objects/s", NULL);
	bench_value("l3", "fill_cold_4m_direct_fraction", (double)direct4 / s4.count, "fraction", NULL);
	bench_value("l3", "fill_cold_64k_direct_fraction", (double)direct64 / s64.count, "fraction", NULL);
	free(v);
	ret = EXIT_OK;
cleanup:
	if (s4.l3)
		sc_l3_close(s4.l3);
	if (s64.l3)
		sc_l3_close(s64.l3);
	free(s4.loc), free(s4.path), free(s4.dst), free(s64.loc), free(s64.path), free(s64.dst);
	/* the reservations die with the arena */
	sc_stage_close(st);
	sc_arena_close(arena);
	sc_arena_destroy(NULL, name);
	rm_rf(parent);
	return ret;
}
