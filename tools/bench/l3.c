/*
 * tools/bench/l3.c — `stagecache bench l3 [--dir PARENT] [--runs N] [--qd4m N] [--qd64k N]
 *                                      [--count4m N] [--count64k N]`.
 *
 * Fills of 4 MiB and 64 KiB L3 objects into arena memory (sc_l2_reserve'd, registered with the
 * ring when the arena is on 2 MiB pages), cold and warm, each against the same bytes read another
 * way in the same run:
 *   fio          io_uring engine, direct=1, the same object files (--opendir), block size = the
 *                object payload, the same depth, --iomem=mmaphuge (a hugetlbfs file) --fixedbufs=1
 *                --registerfiles=1 --loops=1, JSON output ("bw_bytes"); which side runs first
 *                alternates from round to round, the page cache dropped before each;
 *   liburing     a bare loop of our own: O_DIRECT open, io_uring_prep_read_fixed of the payload
 *                into the same registered arena memory, the same depth, no verification, close —
 *                the limit of this disk;
 *   pread+xxh3   warm: buffered pread of each payload into the same arena memory plus XXH3-128 of
 *                it, on as many threads as our fill keeps busy (this thread + the io-wq workers
 *                counted in /proc/self/task while it runs).
 * Depth: --qd4m / --qd64k reads at the device on every side (fio's iodepth, the liburing loop's
 * reads in flight, the library's queue_depth). The caller of ours has more destinations than that
 * (2 x qd for 4 MiB, 256 for 64 KiB) and submits fills for all of them: the library reads at most
 * queue_depth at once and starts a waiting one as reads end, while it verifies those just read.
 * The fill does what a restore does: open, header and payload reads straight into the
 * destination, header checks and the XXH3-128 digest of every payload byte, close — except that
 * the library keeps object files it filled open (sc_l3_opts.fd_cache), and a fill of a kept file
 * reads the payload only (its header was checked when it was kept). fio opens all its files
 * before its clock starts; an untimed first pass over each set puts ours in the same state
 * (fill_cold_64k_kept_fraction: the fills that found their file open).
 * Coldness is checked, not assumed: bytes read from the block device (/sys/dev/block/M:m/stat)
 * during each cold pass, over the payload bytes, is reported (*_disk_fraction); a cold ratio whose
 * passes did not read their bytes from the disk is reported missing. CPU-seconds per GB come from
 * getrusage (io-wq workers are threads of this process, so they are included).
 * The objects live under PARENT (default /var/tmp: a real disk, not tmpfs), removed at the end;
 * --dir may name a CephFS mount (fills from a shared L3 directory).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h> /* the XXH3 baseline as fast as this CPU runs it (as the library's) */
#endif

#include "bench.h"

#define MAXOBJ 1024

struct set {
	const char *label;      /* "4m" / "64k" */
	uint64_t bytes;         /* payload bytes per object */
	int count;
	int qd;
	char dir[300];
	struct sc_l3 *l3;
	struct sc_location *loc;
	char (*path)[400];
	void **dst;             /* arena memory per object (shared round-robin for 4 MiB) */
	uint64_t dst_bytes;
	int ndst;
	uint64_t seg_bytes;     /* stored segmented with this segment size (0: whole objects) */
	int seg_files;          /* the files are segment files (the payload from offset 0, no header) */
};

static char parent[200];
static volatile uint64_t hash_sink; /* keeps the baseline's hashing from being optimised away */
static uint32_t fd_cache_opt; /* --fd-cache: sc_l3_opts.fd_cache of both sets (0: the library's default) */

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
	struct sc_l3_opts o = { .queue_depth = (uint32_t)s->qd, .fd_cache = fd_cache_opt };
	int rc = sc_l3_open(s->dir, &o, &s->l3);
	if (rc)
		return cli_fail("bench l3", rc, "cannot open %s", s->dir);
	if (s->seg_bytes && (rc = sc_l3_set_segment_bytes(s->l3, s->seg_bytes)))
		return cli_fail("bench l3", rc, "cannot set the segment size of %s", s->dir);
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
	double t0 = cli_now();
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
	double t = cli_now() - t0;
	if (direct_count) {
		*direct_count = 0;
		for (int i = 0; i < next; i++)
			*direct_count += req[i].direct;
	}
	free(req);
	free(free_dst);
	return bad ? -1 : t;
}

/* ---- measuring conditions: disk bytes, CPU time, io-wq workers ---- */

static char disk_stat_path[128];

/* Bytes read from the device under the sets so far, or -1 when unknown. */
static double disk_read_bytes(void)
{
	double ios, bytes;
	return bench_disk_reads(disk_stat_path, &ios, &bytes) ? -1 : bytes;
}

static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec * 1e-6;
}

/* CPU time of this thread alone. */
static double thread_cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* io_uring worker threads of this process right now (named iou-wrk-*). */
static int iowq_workers(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 0;
	struct dirent *e;
	int n = 0;
	char p[300], comm[64];
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(p, "r");
		if (f) {
			if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "iou-wrk", 7))
				n++;
			fclose(f);
		}
	}
	closedir(d);
	return n;
}

/* ---- the bare liburing baseline: read_fixed into the same registered arena memory ---- */

static double uring_pass(struct set *s)
{
	struct io_uring ring;
	if (io_uring_queue_init((unsigned)s->qd, &ring, 0))
		return -1;
	struct iovec *iov = calloc((size_t)s->ndst, sizeof(*iov));
	int *fds = calloc((size_t)s->ndst, sizeof(int));
	int *free_dst = calloc((size_t)s->ndst, sizeof(int)), nfree = s->ndst;
	double t = -1;
	if (!iov || !fds || !free_dst)
		goto out;
	for (int i = 0; i < s->ndst; i++) {
		iov[i] = (struct iovec){ s->dst[i], s->dst_bytes };
		free_dst[i] = i;
	}
	if (io_uring_register_buffers(&ring, iov, (unsigned)s->ndst))
		goto out;
	int next = 0, done = 0, inflight = 0, bad = 0;
	double t0 = cli_now();
	while (done < s->count && !bad) {
		while (next < s->count && nfree > 0 && inflight < s->qd) {
			int d = free_dst[--nfree];
			int fd = open(s->path[next], O_RDONLY | O_DIRECT | O_CLOEXEC);
			struct io_uring_sqe *sqe = fd >= 0 ? io_uring_get_sqe(&ring) : NULL;
			if (!sqe) {
				bad = 1;
				break;
			}
			fds[d] = fd;
			io_uring_prep_read_fixed(sqe, fd, s->dst[d], (unsigned)s->bytes, s->seg_files ? 0 : 4096, d);
			io_uring_sqe_set_data64(sqe, (uint64_t)d);
			next++;
			inflight++;
		}
		if (io_uring_submit_and_wait(&ring, 1) < 0)
			break;
		struct io_uring_cqe *cqe;
		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			int d = (int)io_uring_cqe_get_data64(cqe);
			if (cqe->res != (int)s->bytes)
				bad = 1;
			io_uring_cqe_seen(&ring, cqe);
			close(fds[d]);
			free_dst[nfree++] = d;
			inflight--;
			done++;
		}
	}
	while (inflight > 0) { /* never leave a read in flight into memory we reuse */
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe))
			break;
		close(fds[(int)io_uring_cqe_get_data64(cqe)]);
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
	}
	if (!bad && done == s->count)
		t = cli_now() - t0;
out:
	io_uring_queue_exit(&ring);
	free(iov);
	free(fds);
	free(free_dst);
	return t;
}

/* ---- warm baseline: buffered pread + XXH3-128 on @threads threads ---- */

struct pwork {
	struct set *s;
	int first, step, bad;
	uint64_t sink;
};

static void *pread_worker(void *v)
{
	struct pwork *w = v;
	struct set *s = w->s;
	for (int i = w->first; i < s->count; i += w->step) {
		int fd = open(s->path[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			w->bad = 1;
			return NULL;
		}
		uint8_t *d = s->dst[i % s->ndst];
		uint64_t got = 0;
		while (got < s->bytes) {
			ssize_t r = pread(fd, d + got, s->bytes - got, (off_t)(4096 + got));
			if (r <= 0) {
				w->bad = 1;
				break;
			}
			got += (uint64_t)r;
		}
		close(fd);
		XXH128_hash_t h = XXH3_128bits(d, s->bytes);
		w->sink += h.low64;
	}
	return NULL;
}

static double pread_xxh3_pass(struct set *s, int threads)
{
	pthread_t th[8];
	struct pwork w[8];
	if (threads > 8)
		threads = 8;
	double t0 = cli_now();
	for (int i = 0; i < threads; i++) {
		w[i] = (struct pwork){ s, i, threads, 0, 0 };
		if (i && pthread_create(&th[i], NULL, pread_worker, &w[i]))
			return -1;
	}
	pread_worker(&w[0]);
	int bad = w[0].bad;
	for (int i = 1; i < threads; i++) {
		pthread_join(th[i], NULL);
		bad |= w[i].bad;
	}
	return bad ? -1 : cli_now() - t0;
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

/* ---- fio over the same files: GB/s, or < 0 ---- */

static char fio_version[64];

/* The number after "@key" : in @text, or -1. */
static double json_num(const char *text, const char *key)
{
	char k[48];
	snprintf(k, sizeof(k), "\"%s\"", key);
	const char *p = strstr(text, k);
	p = p ? strchr(p + strlen(k), ':') : NULL;
	return p ? strtod(p + 1, NULL) : -1;
}

/* CPU-seconds of fio's job, as fio reports them (usr_cpu + sys_cpu, percent of job_runtime in
 * ms), from its last run; -1 when unknown. */
static double fio_cpu_s = -1;

/* Run fio with @argv (NULL-terminated, output to @out as JSON) and read bw_bytes of its @side
 * ("read"/"write") section: GB/s, or < 0. */
static double fio_run(char *const *argv, const char *out, const char *side)
{
	fio_cpu_s = -1;
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);
		if (nul >= 0)
			dup2(nul, 1), dup2(nul, 2);
		execvp("fio", argv);
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
	double rt = json_num(text, "job_runtime"), usr = json_num(text, "usr_cpu"), sys = json_num(text, "sys_cpu");
	if (rt > 0 && usr >= 0 && sys >= 0)
		fio_cpu_s = (usr + sys) / 100.0 * rt / 1000.0;
	char key[24];
	snprintf(key, sizeof(key), "\"%s\" : {", side); /* the section, not the job option "rw" : "read" */
	char *p = strstr(text, key);
	double bw = p ? json_num(p, "bw_bytes") : -1;
	return bw > 0 ? bw / 1e9 : -1;
}

static double fio_pass(struct set *s)
{
	char out[320], bs[32], depth[32], names[64], opendir[340], mem[128], outarg[360];
	snprintf(out, sizeof(out), "%s/fio-%s.json", parent, s->label);
	snprintf(bs, sizeof(bs), "--bs=%llu", (unsigned long long)s->bytes);
	snprintf(depth, sizeof(depth), "--iodepth=%d", s->qd);
	snprintf(names, sizeof(names), "--name=l3-%s", s->label);
	snprintf(opendir, sizeof(opendir), "--opendir=%s/objects", s->dir);
	snprintf(mem, sizeof(mem), "--iomem=mmaphuge:/dev/hugepages/sc-bench-fio.%d", (int)getpid());
	snprintf(outarg, sizeof(outarg), "--output=%s", out);
	char *argv[] = { "fio", names, opendir, "--ioengine=io_uring", "--direct=1", "--rw=read", bs, depth, mem,
			 "--fixedbufs=1", "--registerfiles=1", "--loops=1", "--thread=1", "--output-format=json", outarg, NULL };
	return fio_run(argv, out, "read");
}

/* fio writing @count new 4 MiB files in @dir, each written once and fsync'd (what a put of one
 * object does to its data), one at a time. GB/s, or < 0. */
static double fio_write_pass(const char *dir, int count)
{
	char out[320], outarg[360], dirarg[340], nr[32];
	snprintf(out, sizeof(out), "%s/fio-write.json", parent);
	snprintf(outarg, sizeof(outarg), "--output=%s", out);
	snprintf(dirarg, sizeof(dirarg), "--directory=%s", dir);
	snprintf(nr, sizeof(nr), "--nrfiles=%d", count);
	char *argv[] = { "fio", "--name=l3-put", dirarg, "--ioengine=io_uring", "--direct=0", "--rw=write", "--bs=4M",
			 "--filesize=4M", nr, "--fsync=1", "--iodepth=1", "--create_on_open=1", "--thread=1",
			 "--output-format=json", outarg, NULL };
	return fio_run(argv, out, "write");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench l3 [--dir PARENT] [--runs N] [--qd4m N] [--qd64k N] [--count4m N] [--count64k N]\n"
		   "                          [--fd-cache N|none]\n\n"
		   "L3 fills of 4 MiB and 64 KiB objects into arena memory, cold and warm, against fio (io_uring,\n"
		   "direct, mmaphuge fixed buffers, registered files, same files, block size and depth), a bare\n"
		   "liburing read_fixed loop into the same memory, and buffered pread + XXH3-128 on as many threads\n"
		   "as the fill keeps busy. Dropping the page cache needs root (else posix_fadvise DONTNEED).\n\n"
		   "  --dir PARENT   where the objects go (a temporary directory under it; default /var/tmp)\n"
		   "  --runs N       rounds, medians reported (default 5; --quick 3)\n"
		   "  --qd4m N       reads in flight for 4 MiB objects, on every side (default 8)\n"
		   "  --qd64k N      reads in flight for 64 KiB objects, on every side (default 32)\n"
		   "  --count4m N    4 MiB objects (default 64)     --count64k N  64 KiB objects (default 1024)\n"
		   "  --fd-cache N   object files kept open between fills (sc_l3_opts.fd_cache; none: keep none;\n"
		   "                 default: the library's)\n\n"
		   "Metrics: fill_cold_4m_vs_fio, fill_cold_4m_vs_liburing, fill_cold_64k_vs_fio,\n"
		   "fill_warm_4m_vs_pread_xxh3, fill_cold_4m_seg_vs_whole, fill_cold_4m_seg_vs_liburing_seg,\n"
		   "fill_cold_4m_cpu_vs_fio_xxh3,\n"
		   "put_4m_vs_fio_write_fsync, *_gbps, *_disk_fraction, *_direct_fraction, *_cpu_s_per_gb.\n");
}

static void ratio_row(const char *metric, double *v, int n, int have, const char *why, const char *note)
{
	if (have)
		bench_stat("l3", metric, "ratio", v, n, note);
	else
		bench_missing("l3", metric, "%s", why);
}

/* One run of bench l3: its options, arena, the two object sets, and the per-round figures. */
struct l3run {
	const char *pdir;
	uint64_t runs, qd4, qd64, n4, n64;
	char name[64];
	struct sc_arena *arena;
	struct sc_stage *st;
	struct set s4, s64, s4seg; /* s4seg: s4's payloads stored in 1 MiB segments */
	struct set segfiles;       /* s4seg's segment files, for the bare liburing loop */
	int n;     /* rounds */
	double *v; /* NV figures x n rounds, see V() */
	int direct4, direct64, fio_ok4, fio_ok64, fio_okw, cold_ok, threads_max;
	const char *fio_why, *fiow_why; /* why fio's read rows, write row are missing */
	double bytes4, bytes64;
};

enum { C4, F4, U4, C64, F64, W4, PW4, R4F, R4U, R64F, RW4, D4, DF4, D64, DF64, CPU_O, CPU_B, K64,
       S4, RS4, DS4, CPU_C, CPU_F, CPU_X, RCPU, PUT, FPUT, RPUT, PUTB, US4, RSU, NV };
#define PUTS 16         /* 4 MiB puts per round, and fio's files */
#define SEG_BYTES (1u << 20)
/* figure k of round r; expects locals v and n (the run's) */
#define V(k, r) v[(size_t)(k) * (size_t)n + (size_t)(r)]

static int parse(int argc, char **argv, struct l3run *x)
{
	static const struct option opts[] = {
		{ "runs", required_argument, 0, 'r' },  { "dir", required_argument, 0, 'd' },
		{ "qd4m", required_argument, 0, '4' },  { "qd64k", required_argument, 0, '6' },
		{ "count4m", required_argument, 0, 'a' }, { "count64k", required_argument, 0, 'b' },
		{ "fd-cache", required_argument, 0, 'f' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	int c;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (cli_parse_u64(optarg, 100, &x->runs) || !x->runs)
				return cli_usage_error("bench l3", "--runs takes 1..100, not '%s'", optarg);
			break;
		case 'd': x->pdir = optarg; break;
		case '4':
			if (cli_parse_u64(optarg, 256, &x->qd4) || !x->qd4)
				return cli_usage_error("bench l3", "--qd4m takes 1..256, not '%s'", optarg);
			break;
		case '6':
			if (cli_parse_u64(optarg, 256, &x->qd64) || !x->qd64)
				return cli_usage_error("bench l3", "--qd64k takes 1..256, not '%s'", optarg);
			break;
		case 'a':
			if (cli_parse_u64(optarg, 256, &x->n4) || x->n4 < 2)
				return cli_usage_error("bench l3", "--count4m takes 2..256, not '%s'", optarg);
			break;
		case 'b':
			if (cli_parse_u64(optarg, MAXOBJ, &x->n64) || x->n64 < 2)
				return cli_usage_error("bench l3", "--count64k takes 2..%d, not '%s'", MAXOBJ, optarg);
			break;
		case 'f':
			if (!strcmp(optarg, "none")) {
				fd_cache_opt = SC_L3_FD_CACHE_NONE;
			} else {
				uint64_t fc;
				if (cli_parse_u64(optarg, SC_L3_FD_CACHE_MAX, &fc) || !fc)
					return cli_usage_error("bench l3", "--fd-cache takes 1..%u or none, not '%s'",
							       SC_L3_FD_CACHE_MAX, optarg);
				fd_cache_opt = (uint32_t)fc;
			}
			break;
		case 'h': usage(stdout); return -1;
		default: return cli_usage_error("bench l3", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage_error("bench l3", "unexpected argument '%s'", argv[optind]);
	return 0;
}

/* The arena (room for both sets' destinations), its stage, and the objects of both sets. */
/* The segment files of the segmented set (DIR/seg/XX/NAME.seg), read by the bare liburing loop at the
 * same bytes in flight as the fills (depth x segments per object), into the same arena memory. */
static int setup_segfiles(struct l3run *x)
{
	struct set *f = &x->segfiles;
	uint32_t per = (uint32_t)(x->s4.bytes / SEG_BYTES);
	*f = (struct set){ .label = "4mseg-files", .bytes = SEG_BYTES, .qd = x->s4.qd * (int)per, .seg_files = 1,
			   .dst_bytes = SEG_BYTES };
	f->ndst = f->qd < x->s4.ndst * (int)per ? f->qd : x->s4.ndst * (int)per;
	f->path = calloc((size_t)x->s4seg.count * per, sizeof(*f->path));
	f->dst = calloc((size_t)f->ndst, sizeof(void *));
	if (!f->path || !f->dst)
		return cli_fail("bench", -ENOMEM, "setup");
	for (int i = 0; i < f->ndst; i++)
		f->dst[i] = (uint8_t *)x->s4.dst[i / (int)per] + (size_t)(i % (int)per) * SEG_BYTES;
	char top[340];
	snprintf(top, sizeof(top), "%s/seg", x->s4seg.dir);
	DIR *d = opendir(top);
	struct dirent *de;
	while (d && (de = readdir(d)) && f->count < x->s4seg.count * (int)per) {
		if (de->d_name[0] == '.')
			continue;
		char sub[400];
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", top, de->d_name) >= sizeof(sub))
			continue;
		DIR *sd = opendir(sub);
		struct dirent *se;
		while (sd && (se = readdir(sd)) && f->count < x->s4seg.count * (int)per)
			if (strstr(se->d_name, ".seg") &&
			    (size_t)snprintf(f->path[f->count], sizeof(f->path[0]), "%s/%.100s", sub, se->d_name) < sizeof(f->path[0]))
				f->count++;
		if (sd)
			closedir(sd);
	}
	if (d)
		closedir(d);
	return 0;
}

static int setup(struct l3run *x)
{
	struct sc_arena_opts ao = { .size_bytes = 256ull << 20 };
	struct set *s4 = &x->s4, *s64 = &x->s64;
	*s4 = (struct set){ .label = "4m", .bytes = 4ull << 20, .count = (int)x->n4, .qd = (int)x->qd4, .ndst = 2 * (int)x->qd4 };
	*s64 = (struct set){ .label = "64k", .bytes = 64ull << 10, .count = (int)x->n64, .qd = (int)x->qd64, .ndst = 256 };
	if (s4->ndst > s4->count)
		s4->ndst = s4->count;
	x->s4seg = *s4;
	x->s4seg.label = "4mseg";
	x->s4seg.seg_bytes = SEG_BYTES;
	if (s64->ndst < s64->qd)
		s64->ndst = s64->qd;
	uint64_t dst_total = 2 * (uint64_t)s4->ndst * s4->bytes + (uint64_t)s64->ndst * s64->bytes;
	if (dst_total > (192ull << 20))
		ao.size_bytes = (dst_total + (96ull << 20) + (2ull << 20) - 1) & ~((2ull << 20) - 1);
	int rc = sc_arena_create(x->name, &ao, &x->arena);
	if (rc) {
		ao.huge = SC_HUGE_OFF;
		rc = sc_arena_create(x->name, &ao, &x->arena);
	}
	if (rc)
		return cli_fail("bench l3", rc, "cannot create arena");
	if ((rc = sc_stage_open(x->arena, "bench", "l3", &x->st)))
		return cli_fail("bench l3", rc, "stage");
	bench_progress("l3: writing %d + %d + %d objects\n", s4->count, s64->count, x->s4seg.count);
	if (setup_set(s4, x->st) || setup_set(s64, x->st) || setup_set(&x->s4seg, x->st))
		return -1;
	sc_l3_bind_arena(s4->l3, x->arena);
	sc_l3_bind_arena(s64->l3, x->arena);
	sc_l3_bind_arena(x->s4seg.l3, x->arena);
	return setup_segfiles(x);
}

/* The conditions: arena backing, directory and device, how caches are dropped, fio's version. */
static void report_env(struct l3run *x)
{
	struct sc_arena_info *info = calloc(1, sizeof(*info));
	if (info && sc_arena_info(x->arena, info) == 0)
		bench_env("l3", "arena_backing", "%s (fill buffers registered: %s)", sc_backing_name(info->backing),
			  info->backing == SC_BACKING_HUGETLBFS_2M ? "yes" : "no");
	free(info);
	int is_root = geteuid() == 0, have_fio = bench_in_path("fio");
	bench_env("l3", "dir", "%s (device stat %s)", x->pdir, disk_stat_path[0] ? disk_stat_path : "unknown");
	bench_env("l3", "cache_drop", "%s", is_root ? "sync; echo 1 > /proc/sys/vm/drop_caches before each cold pass"
						    : "posix_fadvise(POSIX_FADV_DONTNEED) of each file (not root)");
	if (have_fio) {
		bench_first_line("fio --version 2>/dev/null", fio_version, sizeof(fio_version));
		bench_env("l3", "fio", "%s", fio_version);
	}
	x->fio_why = have_fio ? NULL : "fio is not installed (not in PATH)";
	x->fio_ok4 = x->fio_ok64 = x->fio_okw = have_fio;
	x->fiow_why = x->fio_why;
}

/* Cold 4 MiB: ours (whole objects, then segmented), fio and bare liburing, the order rotating each
 * round; CPU-seconds of ours and of fio (a child: its rusage). */
static int round_cold_4m(struct l3run *x, int r)
{
	double *v = x->v;
	int n = x->n;
	for (int k = 0; k < 5; k++) {
		int which = (k + r) % 5;
		drop_caches(which == 3 ? &x->s4seg : which == 4 ? &x->segfiles : &x->s4);
		double d0 = disk_read_bytes(), t, c0 = cpu_seconds();
		if (which == 0) {
			t = fill_pass(&x->s4, 0, &x->direct4);
			if (t < 0) {
				cli_fail("bench l3", 0, "a 4 MiB fill failed");
				return -1;
			}
			V(CPU_C, r) = (cpu_seconds() - c0) / (x->bytes4 / 1e9);
			V(C4, r) = x->bytes4 / t / 1e9;
			V(D4, r) = d0 >= 0 ? (disk_read_bytes() - d0) / x->bytes4 : -1;
		} else if (which == 1) {
			if (x->fio_ok4 && (V(F4, r) = fio_pass(&x->s4)) <= 0) {
				x->fio_ok4 = 0;
				x->fio_why = "fio failed (run it by hand with the options in tools/bench/l3.c)";
			}
			V(CPU_F, r) = fio_cpu_s / (x->bytes4 / 1e9);
			V(DF4, r) = d0 >= 0 ? (disk_read_bytes() - d0) / x->bytes4 : -1;
		} else if (which == 2) {
			t = uring_pass(&x->s4);
			V(U4, r) = t > 0 ? x->bytes4 / t / 1e9 : -1;
		} else if (which == 4) {
			t = x->segfiles.count ? uring_pass(&x->segfiles) : -1;
			V(US4, r) = t > 0 ? x->bytes4 / t / 1e9 : -1;
		} else {
			t = fill_pass(&x->s4seg, 0, NULL);
			if (t < 0) {
				cli_fail("bench l3", 0, "a segmented 4 MiB fill failed");
				return -1;
			}
			V(S4, r) = x->bytes4 / t / 1e9;
			V(DS4, r) = d0 >= 0 ? (disk_read_bytes() - d0) / x->bytes4 : -1;
		}
	}
	V(R4F, r) = x->fio_ok4 ? V(C4, r) / V(F4, r) : 0;
	V(R4U, r) = V(U4, r) > 0 ? V(C4, r) / V(U4, r) : 0;
	V(RS4, r) = V(S4, r) / V(C4, r);
	V(RSU, r) = V(US4, r) > 0 ? V(S4, r) / V(US4, r) : 0;
	/* XXH3-128 of as many bytes, from the same arena memory (what verification costs at least),
	 * each object's bytes evicted from the caches first: a cold fill hashes bytes the device wrote,
	 * which no cache of this CPU holds (the eviction itself is not counted) */
	double hash_s = 0;
	uint64_t sink = 0;
	for (int i = 0; i < x->s4.count; i++) {
		const uint8_t *d = x->s4.dst[i % x->s4.ndst];
		bench_evict(d, x->s4.bytes);
		double h0 = thread_cpu_seconds();
		sink += XXH3_128bits(d, x->s4.bytes).low64;
		hash_s += thread_cpu_seconds() - h0;
	}
	hash_sink += sink;
	V(CPU_X, r) = hash_s / (x->bytes4 / 1e9);
	V(RCPU, r) = x->fio_ok4 && V(CPU_F, r) > 0 ? V(CPU_C, r) / (V(CPU_F, r) + V(CPU_X, r)) : 0;
	return 0;
}

/* Puts of PUTS new 4 MiB objects (round @r) into a new store at @dir, one sc_l3_put at a time or
 * (@batch) as one sc_l3_put_many: GB/s, or a negative errno. */
static double put_pass(const char *dir, int r, uint8_t *const *payloads, int batch)
{
	struct sc_l3 *l3;
	struct sc_l3_opts o = { .queue_depth = 8 };
	int rc = sc_l3_open(dir, &o, &l3);
	if (rc)
		return rc;
	int32_t tokens[PUTS][2];
	struct sc_payload pl[PUTS];
	struct sc_l3_put_args a[PUTS];
	for (int i = 0; i < PUTS; i++) {
		tokens[i][0] = r * PUTS + i, tokens[i][1] = 7;
		pl[i] = (struct sc_payload){ .kind = SC_PAYLOAD_FULL_STATE, .sec = { payloads[i] }, .sec_len = { 4ull << 20 } };
		a[i] = (struct sc_l3_put_args){ .ns = "bench", .tokens = tokens[i], .token_count = 2, .payload = &pl[i] };
	}
	double t0 = cli_now();
	if (batch)
		rc = sc_l3_put_many(l3, a, NULL, PUTS, NULL, NULL);
	for (int i = 0; i < PUTS && !rc && !batch; i++)
		rc = sc_l3_put(l3, &a[i], NULL);
	double t = cli_now() - t0;
	sc_l3_close(l3);
	return rc ? rc : PUTS * 4.0 * (1 << 20) / t / 1e9;
}

/* Puts of PUTS new 4 MiB objects into a new store, one at a time, against fio writing as many new
 * 4 MiB files with an fsync after each (who goes first alternating); then the same puts as one
 * group commit (sc_l3_put_many). */
static int round_put(struct l3run *x, int r, uint8_t *const *payloads)
{
	double *v = x->v;
	int n = x->n;
	for (int k = 0; k < 3; k++) {
		char dir[320];
		snprintf(dir, sizeof(dir), "%s/put-%d-%d", parent, r, k);
		if (k == 2 || (k + r) % 2 == 0) {
			double g = put_pass(dir, r, payloads, k == 2);
			if (g < 0)
				return cli_fail("bench l3", (int)g, "put into %s", dir);
			V(k == 2 ? PUTB : PUT, r) = g;
		} else if (x->fio_okw && (mkdir(dir, 0700) || (V(FPUT, r) = fio_write_pass(dir, PUTS)) <= 0)) {
			x->fio_okw = 0;
			x->fiow_why = "fio failed (run it by hand with the options in tools/bench/l3.c)";
		}
		rm_rf(dir);
	}
	V(RPUT, r) = x->fio_okw ? V(PUT, r) / V(FPUT, r) : 0;
	return 0;
}

/* Fills so far that read a file kept open (no open, stat or close). */
static uint64_t kept_fills(struct set *s)
{
	struct sc_l3_stats st;
	return sc_l3_stats(s->l3, &st) == 0 ? st.fills_kept : 0;
}

/* Cold 64 KiB: ours and fio, alternating who goes first. */
static int round_cold_64k(struct l3run *x, int r)
{
	double *v = x->v;
	int n = x->n;
	for (int k = 0; k < 2; k++) {
		drop_caches(&x->s64);
		double d0 = disk_read_bytes();
		if ((k + r) % 2 == 0) {
			uint64_t kept0 = kept_fills(&x->s64);
			double t = fill_pass(&x->s64, 0, &x->direct64);
			V(K64, r) = (double)(kept_fills(&x->s64) - kept0) / x->s64.count;
			if (t < 0) {
				cli_fail("bench l3", 0, "a 64 KiB fill failed");
				return -1;
			}
			V(C64, r) = x->bytes64 / t / 1e9;
			V(D64, r) = d0 >= 0 ? (disk_read_bytes() - d0) / x->bytes64 : -1;
		} else {
			if (x->fio_ok64 && (V(F64, r) = fio_pass(&x->s64)) <= 0) {
				x->fio_ok64 = 0;
				x->fio_why = "fio failed (run it by hand with the options in tools/bench/l3.c)";
			}
			V(DF64, r) = d0 >= 0 ? (disk_read_bytes() - d0) / x->bytes64 : -1;
		}
	}
	V(R64F, r) = x->fio_ok64 ? V(C64, r) / V(F64, r) : 0;
	return 0;
}

/* Warm 4 MiB: ours vs pread + XXH3-128 on as many threads as ours keeps busy. */
static int round_warm_4m(struct l3run *x, int r)
{
	double *v = x->v;
	int n = x->n;
	warm_files(&x->s4);
	double c0 = cpu_seconds(), t = fill_pass(&x->s4, 0, NULL), c1 = cpu_seconds();
	int workers = iowq_workers();
	if (1 + workers > x->threads_max)
		x->threads_max = 1 + workers;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int threads = x->threads_max < ncpu ? x->threads_max : (int)ncpu;
	double tb = pread_xxh3_pass(&x->s4, threads), c2 = cpu_seconds();
	if (t <= 0 || tb <= 0) {
		cli_fail("bench l3", 0, "a warm pass failed");
		return -1;
	}
	V(W4, r) = x->bytes4 / t / 1e9;
	V(PW4, r) = x->bytes4 / tb / 1e9;
	V(RW4, r) = tb / t;
	V(CPU_O, r) = (c1 - c0) / (x->bytes4 / 1e9);
	V(CPU_B, r) = (c2 - c1) / (x->bytes4 / 1e9);
	return 0;
}

/* Coldness: every cold pass must have read its bytes from the device. */
static void check_coldness(struct l3run *x)
{
	double *v = x->v;
	int n = x->n, fio_ok4 = x->fio_ok4, fio_ok64 = x->fio_ok64;
	for (int r = 0; r < n; r++)
		if ((V(D4, r) >= 0 && V(D4, r) < 0.95) || (V(D64, r) >= 0 && V(D64, r) < 0.95) ||
		    (fio_ok4 && V(DF4, r) >= 0 && V(DF4, r) < 0.95) || (fio_ok64 && V(DF64, r) >= 0 && V(DF64, r) < 0.95) ||
		    (V(DS4, r) >= 0 && V(DS4, r) < 0.95))
			x->cold_ok = 0;
}

static void report(const struct l3run *x)
{
	double *v = x->v;
	int n = x->n, fio_ok4 = x->fio_ok4, fio_ok64 = x->fio_ok64, cold_ok = x->cold_ok, threads_max = x->threads_max;
	const struct set s4 = x->s4, s64 = x->s64;
	const char *fio_why = x->fio_why, *pdir = x->pdir;
	int direct4 = x->direct4, direct64 = x->direct64;
	const char *cold_why = "a cold pass read less than 95% of its bytes from the disk (page cache not dropped)";
	char note[512];
	snprintf(note, sizeof(note), "fio %s io_uring direct=1 bs=4M iodepth=%d iomem=mmaphuge fixedbufs registerfiles loops=1, "
		 "same %d files, page cache dropped, order rotating; files open before the clock on both sides (fio opens its "
		 "files first, ours keeps them open from an untimed first pass)", fio_version, s4.qd, s4.count);
	ratio_row("fill_cold_4m_vs_fio", &V(R4F, 0), n, fio_ok4 && cold_ok, fio_ok4 ? cold_why : fio_why, note);
	snprintf(note, sizeof(note), "bare liburing: O_DIRECT open, read_fixed of each payload into the same registered arena "
		 "memory, depth %d, no verification, close", s4.qd);
	int uring_ok = 1;
	for (int r = 0; r < n; r++)
		uring_ok &= V(U4, r) > 0;
	ratio_row("fill_cold_4m_vs_liburing", &V(R4U, 0), n, uring_ok && cold_ok, uring_ok ? cold_why : "the liburing loop failed", note);
	snprintf(note, sizeof(note), "fio %s io_uring direct=1 bs=64K iodepth=%d iomem=mmaphuge fixedbufs registerfiles loops=1, "
		 "same %d files, files open before the clock on both sides", fio_version, s64.qd, s64.count);
	ratio_row("fill_cold_64k_vs_fio", &V(R64F, 0), n, fio_ok64 && cold_ok, fio_ok64 ? cold_why : fio_why, note);
	snprintf(note, sizeof(note), "buffered pread of each payload into the same arena memory + XXH3-128 of it, on %d "
		 "thread(s) = this thread + the io-wq workers ours used (capped at the CPU count)", threads_max);
	ratio_row("fill_warm_4m_vs_pread_xxh3", &V(RW4, 0), n, 1, "", note);
	snprintf(note, sizeof(note), "the same %d payloads stored in %u KiB segments (a manifest object and %u segment "
		 "files each, sc_l3_set_segment_bytes), filled cold into the same arena memory at depth %d, in the same "
		 "rotation: segmented / whole-object fills", s4.count, SEG_BYTES >> 10, (unsigned)(s4.bytes / SEG_BYTES), s4.qd);
	ratio_row("fill_cold_4m_seg_vs_whole", &V(RS4, 0), n, cold_ok, cold_why, note);
	int useg_ok = x->segfiles.count == x->s4seg.count * (int)(s4.bytes / SEG_BYTES);
	for (int r = 0; r < n; r++)
		useg_ok &= V(US4, r) > 0;
	snprintf(note, sizeof(note), "bare liburing over the same %d segment files (O_DIRECT open, read_fixed of each into "
		 "the same registered arena memory, depth %d: the fills' bytes in flight, no verification, close): what "
		 "this device gives %u KiB reads", x->segfiles.count, x->segfiles.qd, SEG_BYTES >> 10);
	ratio_row("fill_cold_4m_seg_vs_liburing_seg", &V(RSU, 0), n, useg_ok && cold_ok,
		  useg_ok ? cold_why : "the liburing loop over the segment files failed", note);
	snprintf(note, sizeof(note), "CPU-seconds per GB of cold 4 MiB fills (getrusage of this process: io-wq included) / "
		 "(fio's, usr_cpu + sys_cpu of its job as it reports them, in the same rounds, + XXH3-128 of as many bytes from the same arena "
		 "memory, libxxhash's runtime dispatch, each object's bytes evicted from the caches before they are hashed "
		 "(clflush; a cold fill hashes bytes the device wrote), this thread's CPU time of the hashes alone)");
	int cpu_ok = fio_ok4;
	for (int r = 0; r < n; r++)
		cpu_ok &= V(CPU_F, r) > 0;
	ratio_row("fill_cold_4m_cpu_vs_fio_xxh3", &V(RCPU, 0), n, cpu_ok, fio_ok4 ? "fio reported no CPU figures" : fio_why,
		  note);
	snprintf(note, sizeof(note), "%d sc_l3_put of new 4 MiB objects into a new store, one at a time (each a group commit "
		 "of one: object and entry temp files written through io_uring, both fsync'd in one round, renamed, both "
		 "directories fsync'd in one round) / fio %s io_uring "
		 "direct=0 rw=write bs=4M filesize=4M nrfiles=%d fsync=1 iodepth=1 create_on_open=1 (each file written once "
		 "and fsync'd; no rename, no directory fsync), who goes first alternating", PUTS, fio_version, PUTS);
	ratio_row("put_4m_vs_fio_write_fsync", &V(RPUT, 0), n, x->fio_okw, x->fiow_why, note);
	bench_stat("l3", "fill_cold_4m_gbps", "GB/s", &V(C4, 0), n, NULL);
	bench_stat("l3", "fill_cold_4m_seg_gbps", "GB/s", &V(S4, 0), n, NULL);
	if (useg_ok)
		bench_stat("l3", "liburing_cold_4m_seg_gbps", "GB/s", &V(US4, 0), n, NULL);
	bench_stat("l3", "fill_cold_4m_cpu_s_per_gb", "CPU s/GB", &V(CPU_C, 0), n, NULL);
	if (cpu_ok)
		bench_stat("l3", "fio_cold_4m_cpu_s_per_gb", "CPU s/GB", &V(CPU_F, 0), n, NULL);
	bench_stat("l3", "xxh3_4m_cpu_s_per_gb", "CPU s/GB", &V(CPU_X, 0), n, NULL);
	bench_stat("l3", "put_4m_gbps", "GB/s", &V(PUT, 0), n, NULL);
	bench_stat("l3", "put_4m_batch_gbps", "GB/s", &V(PUTB, 0), n, "the same puts as one sc_l3_put_many (group commit)");
	if (x->fio_okw)
		bench_stat("l3", "fio_write_fsync_4m_gbps", "GB/s", &V(FPUT, 0), n, NULL);
	if (fio_ok4)
		bench_stat("l3", "fio_cold_4m_gbps", "GB/s", &V(F4, 0), n, NULL);
	else
		bench_missing("l3", "fio_cold_4m_gbps", "%s", fio_why);
	if (uring_ok)
		bench_stat("l3", "liburing_cold_4m_gbps", "GB/s", &V(U4, 0), n, NULL);
	bench_stat("l3", "fill_cold_64k_gbps", "GB/s", &V(C64, 0), n, NULL);
	bench_stat("l3", "fill_cold_64k_kept_fraction", "fraction", &V(K64, 0), n,
		   "cold 64 KiB fills that read an object file kept open since an earlier fill");
	if (fio_ok64)
		bench_stat("l3", "fio_cold_64k_gbps", "GB/s", &V(F64, 0), n, NULL);
	else
		bench_missing("l3", "fio_cold_64k_gbps", "%s", fio_why);
	bench_stat("l3", "fill_warm_4m_gbps", "GB/s", &V(W4, 0), n, NULL);
	bench_stat("l3", "pread_xxh3_warm_4m_gbps", "GB/s", &V(PW4, 0), n, NULL);
	bench_stat("l3", "fill_warm_4m_cpu_s_per_gb", "CPU s/GB", &V(CPU_O, 0), n, NULL);
	bench_stat("l3", "pread_xxh3_warm_4m_cpu_s_per_gb", "CPU s/GB", &V(CPU_B, 0), n, NULL);
	bench_value("l3", "fill_warm_4m_threads", threads_max, "threads", NULL);
	if (V(D4, 0) >= 0) {
		bench_stat("l3", "fill_cold_4m_disk_fraction", "fraction", &V(D4, 0), n, NULL);
		bench_stat("l3", "fill_cold_64k_disk_fraction", "fraction", &V(D64, 0), n, NULL);
		bench_stat("l3", "fill_cold_4m_seg_disk_fraction", "fraction", &V(DS4, 0), n, NULL);
		if (fio_ok4)
			bench_stat("l3", "fio_cold_4m_disk_fraction", "fraction", &V(DF4, 0), n, NULL);
	} else {
		bench_missing("l3", "fill_cold_4m_disk_fraction", "no block device statistics for %s", pdir);
	}
	bench_value("l3", "fill_cold_4m_direct_fraction", (double)direct4 / s4.count, "fraction", NULL);
	bench_value("l3", "fill_cold_64k_direct_fraction", (double)direct64 / s64.count, "fraction", NULL);
}

static void teardown(struct l3run *x)
{
	struct set *s4 = &x->s4, *s64 = &x->s64;
	free(x->v);
	if (s4->l3)
		sc_l3_close(s4->l3);
	if (s64->l3)
		sc_l3_close(s64->l3);
	if (x->s4seg.l3)
		sc_l3_close(x->s4seg.l3);
	free(x->s4seg.loc), free(x->s4seg.path), free(x->s4seg.dst);
	free(x->segfiles.path), free(x->segfiles.dst);
	free(s4->loc), free(s4->path), free(s4->dst), free(s64->loc), free(s64->path), free(s64->dst);
	sc_stage_close(x->st);
	sc_arena_close(x->arena);
	sc_arena_destroy(NULL, x->name);
	rm_rf(parent);
	char hp[96];
	snprintf(hp, sizeof(hp), "/dev/hugepages/sc-bench-fio.%d", (int)getpid());
	unlink(hp);
}

int bench_l3(int argc, char **argv)
{
	static struct l3run x;
	fd_cache_opt = 0;
	x = (struct l3run){ .pdir = "/var/tmp", .runs = bench_quick ? 3 : 5, .qd4 = 8, .qd64 = 32, .n4 = 64,
			    .n64 = MAXOBJ, .cold_ok = 1, .threads_max = 1 };
	int rc = parse(argc, argv, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	struct stat dst_st;
	if (stat(x.pdir, &dst_st) || !S_ISDIR(dst_st.st_mode))
		return cli_fail("bench l3", -ENOTDIR, "--dir %s is not a directory", x.pdir);
	snprintf(parent, sizeof(parent), "%s/sc-bench-l3-XXXXXX", x.pdir);
	if (!mkdtemp(parent))
		return cli_fail("bench l3", -errno, "cannot create a directory under %s", x.pdir);
	bench_disk_of(parent, disk_stat_path, sizeof(disk_stat_path));
	snprintf(x.name, sizeof(x.name), "bench-l3-%d", (int)getpid());
	int ret = EXIT_FAIL;
	if (setup(&x))
		goto cleanup;
	report_env(&x);

	x.n = (int)x.runs;
	x.v = calloc((size_t)x.n * NV, sizeof(double));
	if (!x.v)
		goto cleanup;
	x.bytes4 = (double)x.s4.count * (double)x.s4.bytes;
	x.bytes64 = (double)x.s64.count * (double)x.s64.bytes;
	/* fio opens its files before its clock starts; ours keeps the files it filled open
	 * (sc_l3_opts.fd_cache): one untimed pass of each set puts both in the same state */
	if (fill_pass(&x.s4, 0, NULL) < 0 || fill_pass(&x.s64, 0, NULL) < 0)
		goto cleanup;
	if (fill_pass(&x.s4seg, 0, NULL) < 0)
		goto cleanup;
	uint8_t *payloads[PUTS] = { 0 };
	for (int i = 0; i < PUTS; i++) {
		if (!(payloads[i] = malloc(4u << 20)))
			break;
		fill_pattern(payloads[i], 4u << 20, 0x5eed0000u + (uint64_t)i);
	}
	int have_payloads = payloads[PUTS - 1] != NULL;
	for (int r = 0; r < x.n && have_payloads; r++) {
		bench_progress("l3: round %d/%d", r + 1, x.n);
		for (int i = 0; i < PUTS; i++)
			payloads[i][0] = (uint8_t)r; /* new objects every round */
		if (round_cold_4m(&x, r) || round_cold_64k(&x, r) || round_warm_4m(&x, r) || round_put(&x, r, payloads)) {
			x.n = -1;
			break;
		}
	}
	for (int i = 0; i < PUTS; i++)
		free(payloads[i]);
	if (x.n < 0 || !have_payloads)
		goto cleanup;
	bench_progress("%s", "");
	check_coldness(&x);
	report(&x);
	ret = EXIT_OK;
cleanup:
	teardown(&x);
	return ret;
}
