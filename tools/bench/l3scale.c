/*
 * tools/bench/l3scale.c — `stagecache bench l3scale [--dir DIR] [--sizes N,N...] [--payload SIZE]
 * [--procs P]`: what an L3 store costs as it grows. Stores of N objects (default 10k and 100k; a
 * million on request: --sizes 10k,100k,1m) of SIZE-byte payloads (default 4 KiB) are generated once
 * under DIR (default /var/tmp/stagecache-l3scale) by P processes putting in parallel (in batches
 * of 32) and kept there
 * for the next run (DIR/s<N>-<SIZE>/, a .done file beside it records how long generation took).
 * Each figure is named for its store: open_ms_100k, or open_ms_100k_1m for 1 MiB payloads.
 *
 *   open_ms                   sc_l3_open of the store (default flags, local mode), then close
 *   locate_us_p50, _p99       sc_l3_locate_longest of stored prefixes picked at random, no arena
 *                             (each found at its full length: a locate that misses is a failure),
 *                             warm: the same keys located once before the timed pass
 *   locate_cold_us_p50, _p99, locate_cold_reads
 *                             context: other keys after the page cache, dentries and inodes were
 *                             dropped (root only), and the device's reads per locate
 *   puts_per_s                fresh puts of SIZE bytes by P processes at once, over the wall time
 *                             from a common start to the last put's return
 *   puts_batch_per_s          the same, each process putting 32 at a time (sc_l3_put_many: one
 *                             group commit per batch); interleaved with puts_per_s
 *   janitor_pass_ms           sc_l3_janitor after 1 % of the store was put fresh since the last pass
 *   evict_ms                  sc_l3_evict_to removing 1 % of the store after 1 % was put fresh, its
 *                             victims from the order the last listing left (lib/l3/victims.c);
 *                             the victims are 3-4 % put for the purpose and aged (mtime set back
 *                             a decade), so that the generated store stays whole for the next run
 *   evict_listing_ms          context: the first of those evictions, DIR/victims removed before
 *                             (a listing of the whole store: what every eviction cost before)
 *                             (both local mode only: a shared store's evictions are janitor passes,
 *                             which list)
 *   reconcile_after_crash_ms  a writer killed -9 inside its puts (its temp files aged past the
 *                             window a writer needs between create and lock), then the time of the
 *                             next sc_l3_open, which must have removed its temp files (shared mode,
 *                             where opens never reconcile: of the next sc_l3_janitor pass)
 *
 * Puts of a run stay in the store (it grows by P x puts + 5 % per run, less 3 % evicted); `objects` in the
 * environment lines says how many the store held when the figures were taken.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define B "l3scale"
#define NTOK 16
#define PUT_BATCH 32 /* puts per sc_l3_put_many in the batch row and in generation */
#define MAX_SIZES 8
#define NS "l3scale"
#define NS_FRESH "l3scale-fresh"

struct scale {
	const char *dir;
	uint64_t sizes[MAX_SIZES];
	int nsizes;
	uint64_t payload;
	uint32_t procs;
};

static void toks(int32_t *t, uint64_t i)
{
	for (int k = 0; k < NTOK; k++)
		t[k] = (int32_t)(uint32_t)(k ? i * 2654435761u + (uint64_t)k : i);
}

/* The put of object @i of namespace @ns in @a (its tokens @t, its payload @pl over @buf of @len
 * bytes): the payload's first bytes name it (distinct digests). */
static void put_args(const char *ns, uint64_t i, uint8_t *buf, uint64_t len, int32_t *t, struct sc_payload *pl,
		     struct sc_l3_put_args *a)
{
	toks(t, i);
	memcpy(buf, &i, sizeof(i));
	memcpy(buf + len - sizeof(i), ns, sizeof(i) < strlen(ns) ? sizeof(i) : strlen(ns));
	*pl = (struct sc_payload){ .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { len } };
	*a = (struct sc_l3_put_args){ .ns = ns, .tokens = t, .token_count = NTOK, .payload = pl };
}

static int put_one(struct sc_l3 *l3, const char *ns, uint64_t i, uint8_t *buf, uint64_t len)
{
	int32_t t[NTOK];
	struct sc_payload pl;
	struct sc_l3_put_args a;
	put_args(ns, i, buf, len, t, &pl, &a);
	return sc_l3_put(l3, &a, NULL);
}

static uint8_t *payload_buf(uint64_t len)
{
	uint8_t *b = malloc(len);
	if (b)
		for (uint64_t k = 0; k < len; k++)
			b[k] = (uint8_t)(k * 131 + 7);
	return b;
}

/* Run @procs processes, process w doing fn(l3, w); all start together. Returns the wall seconds
 * from the start to the last one's end, or -1 when one failed. */
static double in_procs(const char *dir, uint32_t procs, int (*fn)(struct sc_l3 *, uint32_t, void *), void *ctx)
{
	int go[2];
	double *ends = mmap(NULL, sizeof(double) * procs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ends == MAP_FAILED || pipe(go))
		return -1;
	pid_t pid[64];
	for (uint32_t w = 0; w < procs; w++) {
		if ((pid[w] = fork()) < 0)
			return -1;
		if (pid[w])
			continue;
		close(go[1]);
		struct sc_l3 *l3;
		char c;
		if (sc_l3_open(dir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3))
			_exit(2);
		if (read(go[0], &c, 1) < 0)
			_exit(2);
		int rc = fn(l3, w, ctx);
		ends[w] = cli_now();
		sc_l3_close(l3);
		_exit(rc ? 1 : 0);
	}
	close(go[0]);
	double t0 = cli_now();
	close(go[1]); /* every child's read returns: the common start */
	int bad = 0;
	for (uint32_t w = 0; w < procs; w++) {
		int st;
		waitpid(pid[w], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	double end = t0;
	for (uint32_t w = 0; w < procs; w++)
		end = ends[w] > end ? ends[w] : end;
	munmap(ends, sizeof(double) * procs);
	return bad ? -1 : end - t0;
}

struct putjob {
	const char *ns;
	uint64_t first, count, payload;
	uint32_t procs;
	int progress;
	uint32_t batch; /* puts per sc_l3_put_many; 0: one sc_l3_put at a time */
};

static int put_share(struct sc_l3 *l3, uint32_t w, void *ctx)
{
	struct putjob *j = ctx;
	uint32_t nb = j->batch ? j->batch : 1;
	uint8_t *buf = payload_buf(j->payload * nb);
	int32_t(*t)[NTOK] = malloc(sizeof(*t) * nb);
	struct sc_payload *pl = malloc(sizeof(*pl) * nb);
	struct sc_l3_put_args *a = malloc(sizeof(*a) * nb);
	int rc = buf && t && pl && a ? 0 : -ENOMEM;
	uint64_t end = j->first + j->count, shown = 0;
	for (uint64_t i = j->first + w; !rc && i < end;) {
		unsigned k = 0;
		for (; k < nb && i < end; k++, i += j->procs)
			put_args(j->ns, i, buf + k * j->payload, j->payload, t[k], &pl[k], &a[k]);
		rc = j->batch ? sc_l3_put_many(l3, a, NULL, k, NULL, NULL) : sc_l3_put(l3, a, NULL);
		if (j->progress && !w && i - j->first >= shown + 5000) {
			shown = i - j->first;
			bench_progress("generating: %llu of %llu", (unsigned long long)shown, (unsigned long long)j->count);
		}
	}
	if (rc)
		fprintf(stderr, "stagecache bench l3scale: put: %s\n", sc_strerror(rc));
	free(buf);
	free(t);
	free(pl);
	free(a);
	return rc;
}

static void suffix(char *out, size_t len, uint64_t n, uint64_t payload)
{
	char c[24], p[24] = "";
	if (n % 1000000 == 0)
		snprintf(c, sizeof(c), "%llum", (unsigned long long)(n / 1000000));
	else if (n % 1000 == 0)
		snprintf(c, sizeof(c), "%lluk", (unsigned long long)(n / 1000));
	else
		snprintf(c, sizeof(c), "%llu", (unsigned long long)n);
	if (payload != 4096)
		snprintf(p, sizeof(p), payload % (1u << 20) == 0 ? "_%llum" : "_%lluk",
			 (unsigned long long)(payload % (1u << 20) == 0 ? payload >> 20 : payload >> 10));
	snprintf(out, len, "%s%s", c, p);
}

/* The store of @n objects, generated unless its .done file says it was. 0 or -1. */
static int store_ready(const struct scale *s, uint64_t n, const char *store, const char *sfx)
{
	char done[400];
	snprintf(done, sizeof(done), "%s.done", store);
	FILE *f = fopen(done, "r");
	double secs = 0;
	if (f) {
		int ok = fscanf(f, "%lf", &secs) == 1;
		fclose(f);
		if (ok) {
			char key[64];
			snprintf(key, sizeof(key), "generate_s_%s", sfx);
			bench_env(B, key, "%.1f (an earlier run)", secs);
			return 0;
		}
	}
	cli_rm_rf(store);
	struct putjob j = { NS, 0, n, s->payload, s->procs, 1, PUT_BATCH };
	double t = in_procs(store, s->procs, put_share, &j);
	bench_progress("%s", "");
	if (t < 0)
		return -1;
	char key[64];
	snprintf(key, sizeof(key), "generate_s_%s", sfx);
	bench_env(B, key, "%.1f (%u processes)", t, s->procs);
	if (!(f = fopen(done, "w")))
		return -1;
	fprintf(f, "%.3f\n", t);
	return fclose(f) ? -1 : 0;
}

/* ---- a writer killed inside its puts ---- */

struct temps {
	char (*path)[512];
	int n, cap;
};
static struct temps *walk_temps;

static int temp_seen(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	if (flag == FTW_F && !strncmp(p + f->base, ".tmp-", 5) && walk_temps->n < walk_temps->cap)
		snprintf(walk_temps->path[walk_temps->n++], 512, "%s", p);
	return 0;
}

static int find_temps(const char *store, struct temps *t)
{
	t->n = 0;
	walk_temps = t;
	return nftw(store, temp_seen, 32, FTW_PHYS) ? -1 : t->n;
}

/* Is anyone holding the writer's OFD lock on byte 0 of @path? */
static int locked(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
	int held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
	close(fd);
	return held;
}

/* Is @store in shared mode (DIR/shared: several hosts)? */
static int shared_store(const char *store)
{
	char p[400];
	snprintf(p, sizeof(p), "%s/shared", store);
	return access(p, F_OK) == 0;
}

/* One sample: a writer killed while a temp file of its exists; its temps aged; the open timed.
 * Seconds, or -1 (no temp caught in 20 tries, or the open left one). */
static double crash_sample(const struct scale *s, const char *store, uint64_t *fresh)
{
	struct temps t = { malloc(64 * 512), 0, 64 };
	double ms = -1;
	for (int attempt = 0; t.path && attempt < 20 && ms < 0; attempt++) {
		uint64_t first = (*fresh += 1000000);
		pid_t pid = fork();
		if (pid < 0)
			break;
		if (pid == 0) {
			struct sc_l3 *l3;
			uint8_t *buf = payload_buf(s->payload);
			if (!buf || sc_l3_open(store, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3))
				_exit(2);
			for (uint64_t i = first;; i++)
				put_one(l3, NS_FRESH, i, buf, s->payload);
		}
		/* a few puts in: kill it wherever it is */
		struct timespec d = { 0, 20000000 + (attempt % 5) * 3000000 };
		nanosleep(&d, NULL);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (find_temps(store, &t) <= 0)
			continue;
		/* its writes land before its locks go; then the temps are aged past the writer's window */
		double t0 = cli_now();
		for (int k = 0; k < t.n; k++)
			while (locked(t.path[k]) && cli_now() - t0 < 10)
				sched_yield();
		struct timespec old[2] = { { 0, UTIME_OMIT }, { 0, 0 } };
		clock_gettime(CLOCK_REALTIME, &old[1]);
		old[1].tv_sec -= 60;
		for (int k = 0; k < t.n; k++)
			utimensat(AT_FDCWD, t.path[k], old, 0);
		/* local mode: the open reconciles; shared mode (several hosts: the store on CephFS),
		 * where opens never do, the janitor's pass */
		struct sc_l3 *l3;
		int shared = shared_store(store);
		double a = cli_now(), b;
		int rc = sc_l3_open(store, NULL, &l3);
		if (!rc && shared) {
			a = cli_now();
			rc = sc_l3_janitor(l3, SC_L3_JANITOR_WAIT, NULL);
		}
		b = cli_now();
		if (rc)
			break;
		sc_l3_close(l3);
		int left = 0;
		for (int k = 0; k < t.n; k++)
			left += access(t.path[k], F_OK) == 0;
		if (left) {
			fprintf(stderr, "stagecache bench l3scale: %d temp files of a dead writer left after %s\n", left,
				shared ? "a janitor pass" : "open");
			break;
		}
		ms = (b - a) * 1e3;
	}
	free(t.path);
	return ms;
}

/* ---- one store ---- */

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* @nloc locates of prefixes of @n's store picked by the sequence @seed; each one's time (us) in
 * @v (NULL: not timed). 0, or the exit status of a failure (a locate that did not find the whole
 * prefix). */
static int locate_pass(struct sc_l3 *l3, const char *store, uint64_t n, uint64_t seed, double *v, int nloc)
{
	uint64_t x = 88172645463325252ull * seed;
	for (int r = 0; r < nloc; r++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int32_t t[NTOK];
		struct sc_location loc;
		toks(t, x % n);
		uint64_t a = cli_now_ns();
		int rc = sc_l3_locate_longest(l3, NS, t, NTOK, &loc);
		if (v)
			v[r] = (double)(cli_now_ns() - a) / 1e3;
		if (rc != NTOK)
			return cli_fail("bench l3scale", rc < 0 ? rc : -ENOENT, "object %llu not found in %s",
					(unsigned long long)(x % n), store);
	}
	if (v)
		qsort(v, (size_t)nloc, sizeof(*v), dbl_cmp);
	return 0;
}

/* Locates from a cold cache (context rows, no target): as root, the page cache, dentries and
 * inodes dropped (sync; echo 3 > /proc/sys/vm/drop_caches), then keys never located before, with
 * the reads the device served per locate. Without root: not measured, said so. */
static int locate_cold(const char *store, const char *sfx, uint64_t n, double *v, int nloc)
{
	char m[96], disk[128];
	snprintf(m, sizeof(m), "locate_cold_us_p99_%s", sfx);
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		bench_env(B, m, "not measured: dropping the caches needs root");
		return EXIT_OK;
	}
	struct sc_l3 *l3;
	int rc = sc_l3_open(store, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3);
	if (rc) {
		close(fd);
		return cli_fail("bench l3scale", rc, "cannot open %s", store);
	}
	sync();
	int dropped = write(fd, "3", 1) == 1;
	close(fd);
	bench_disk_of(store, disk, sizeof(disk));
	double io0 = 0, io1 = 0, b0, b1;
	int have = !bench_disk_reads(disk, &io0, &b0);
	if (!(rc = locate_pass(l3, store, n, 2, v, nloc)) && dropped) {
		have = have && !bench_disk_reads(disk, &io1, &b1);
		bench_value(B, m, cli_quantile(v, nloc, 0.99), "us", "after sync; echo 3 > drop_caches, keys never located");
		snprintf(m, sizeof(m), "locate_cold_us_p50_%s", sfx);
		bench_value(B, m, cli_quantile(v, nloc, 0.5), "us", "after sync; echo 3 > drop_caches, keys never located");
		snprintf(m, sizeof(m), "locate_cold_reads_%s", sfx);
		if (have)
			bench_value(B, m, (io1 - io0) / nloc, "reads", "device reads per cold locate (/sys/dev/block)");
	} else if (!rc) {
		bench_env(B, m, "not measured: the write to /proc/sys/vm/drop_caches failed");
	}
	sc_l3_close(l3);
	return rc;
}


/* Age the objects of @ns [first, first + count): mtime set back to December 2015 + i seconds, older than
 * anything a run puts, so that evictions take them first. */
static int age_objects(struct sc_l3 *l3, const char *store, const char *ns, uint64_t first, uint64_t count)
{
	for (uint64_t i = first; i < first + count; i++) {
		int32_t t[NTOK];
		struct sc_location loc;
		toks(t, i);
		if (sc_l3_locate_longest(l3, ns, t, NTOK, &loc) != NTOK)
			return -ENOENT;
		char hex[SC_DIGEST_HEX_LEN + 1], path[400];
		sc_digest_format(loc.digest, hex);
		snprintf(path, sizeof(path), "%s/objects/%.2s/%s.sc3", store, hex, hex);
		struct timespec ts[2] = { { 1450000000 + (time_t)(i - first), 0 }, { 1450000000 + (time_t)(i - first), 0 } };
		if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	return 0;
}

/* Local mode: evictions of 1 % from the last listing's order (after 1 % put), and the first,
 * which lists. */
static int evict_rows(const struct scale *s, struct sc_l3 *l3, const char *store, const char *sfx, uint64_t n,
		      uint64_t *fresh, double *v)
{
	char m[96], path[400];
	uint64_t pct = n / 100 ? n / 100 : 1;
	int npass = bench_quick ? 2 : 3, rc;
	/* victims: 1 % per eviction, aged, and 1 % more: the first eviction lists, and evicts down
	 * from DIR/state's count, which a writer killed between its rename and its count (the crash
	 * rows of earlier runs) leaves short of the listing's */
	struct putjob aged = { NS_FRESH, *fresh, pct * (uint64_t)(npass + 2), s->payload, s->procs, 0, PUT_BATCH };
	*fresh += aged.count;
	if (in_procs(store, s->procs, put_share, &aged) < 0 ||
	    (rc = age_objects(l3, store, NS_FRESH, aged.first, aged.count)))
		return cli_fail("bench l3scale", -EIO, "aged puts into %s failed", store);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	uint64_t one = st.bytes / st.objects * pct;
	snprintf(path, sizeof(path), "%s/victims", store);
	if (unlink(path) < 0 && errno != ENOENT)
		return cli_fail("bench l3scale", -errno, "cannot remove %s", path);
	double a = cli_now();
	rc = sc_l3_evict_to(l3, st.bytes - one);
	double ms = (cli_now() - a) * 1e3;
	if (rc < 0)
		return cli_fail("bench l3scale", rc, "eviction in %s", store);
	snprintf(m, sizeof(m), "evict_listing_ms_%s", sfx);
	bench_value(B, m, ms, "ms", "context: the same eviction listing the store (DIR/victims removed first)");
	for (int r = 0; r < npass; r++) {
		struct putjob j = { NS_FRESH, *fresh, pct, s->payload, s->procs, 0, PUT_BATCH };
		*fresh += j.count;
		sc_l3_stats(l3, &st);
		if (in_procs(store, s->procs, put_share, &j) < 0)
			return cli_fail("bench l3scale", -EIO, "puts into %s failed", store);
		a = cli_now();
		rc = sc_l3_evict_to(l3, st.bytes);
		v[r] = (cli_now() - a) * 1e3;
		if (rc < 0)
			return cli_fail("bench l3scale", rc, "eviction in %s", store);
	}
	snprintf(m, sizeof(m), "evict_ms_%s", sfx);
	bench_stat(B, m, "ms", v, npass, "1 % of the objects evicted after 1 % was put, from the last listing's order");
	return 0;
}

static int one_store(const struct scale *s, uint64_t n)
{
	char store[320], sfx[32], m[96];
	snprintf(store, sizeof(store), "%s/s%llu-%llu", s->dir, (unsigned long long)n, (unsigned long long)s->payload);
	suffix(sfx, sizeof(sfx), n, s->payload);
	if (store_ready(s, n, store, sfx))
		return cli_fail("bench l3scale", -EIO, "cannot generate the store %s", store);
	int runs = bench_quick ? 3 : 7, nloc = bench_quick ? 300 : 3000;
	double *v = malloc(sizeof(double) * (size_t)(nloc > 64 ? nloc : 64));
	struct sc_l3 *l3;
	int rc = sc_l3_open(store, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &l3);
	if (rc || !v)
		return cli_fail("bench l3scale", rc ? rc : -ENOMEM, "cannot open %s", store);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	snprintf(m, sizeof(m), "objects_%s", sfx);
	bench_env(B, m, "%llu", (unsigned long long)st.objects);

	/* open */
	for (int r = 0; r < runs; r++) {
		struct sc_l3 *o;
		double a = cli_now();
		rc = sc_l3_open(store, NULL, &o);
		v[r] = (cli_now() - a) * 1e3;
		if (rc)
			return cli_fail("bench l3scale", rc, "cannot open %s", store);
		sc_l3_close(o);
	}
	snprintf(m, sizeof(m), "open_ms_%s", sfx);
	bench_stat(B, m, "ms", v, runs, NULL);

	/* locate, warm: each key located once, then the same keys timed (the device's part is the
	 * cold rows', at the end) */
	if ((rc = locate_pass(l3, store, n, 1, NULL, nloc)) || (rc = locate_pass(l3, store, n, 1, v, nloc)))
		return rc;
	snprintf(m, sizeof(m), "locate_us_p50_%s", sfx);
	bench_value(B, m, cli_quantile(v, nloc, 0.5), "us", "warm: the same keys located once before");
	snprintf(m, sizeof(m), "locate_us_p99_%s", sfx);
	bench_value(B, m, cli_quantile(v, nloc, 0.99), "us", "warm: the same keys located once before");

	/* puts from P processes: fresh ones, beyond any earlier run's (the store's count at the start) */
	uint64_t fresh = st.objects * 2 + 1000000000ull + (uint64_t)getpid() * 100000000ull;
	int nput = bench_quick ? 3 : 5;
	uint64_t per = bench_quick ? 100 : 500;
	double vb[5];
	/* one at a time and in batches, interleaved (the machine's load moves both alike) */
	for (int r = 0; r < nput; r++) {
		for (int b = 0; b < 2; b++) {
			struct putjob j = { NS_FRESH, fresh, per * s->procs, s->payload, s->procs, 0, b ? PUT_BATCH : 0 };
			fresh += j.count;
			double secs = in_procs(store, s->procs, put_share, &j);
			if (secs <= 0)
				return cli_fail("bench l3scale", -EIO, "puts into %s failed", store);
			(b ? vb : v)[r] = (double)j.count / secs;
		}
	}
	snprintf(m, sizeof(m), "puts_per_s_%s", sfx);
	char base[96];
	snprintf(base, sizeof(base), "%u processes, %llu puts each", s->procs, (unsigned long long)per);
	bench_stat(B, m, "puts/s", v, nput, base);
	snprintf(m, sizeof(m), "puts_batch_per_s_%s", sfx);
	snprintf(base, sizeof(base), "%u processes, %llu puts each, sc_l3_put_many of %d", s->procs,
		 (unsigned long long)per, PUT_BATCH);
	bench_stat(B, m, "puts/s", vb, nput, base);

	/* janitor passes after 1 % changed */
	struct sc_l3_janitor_report rep;
	if ((rc = sc_l3_janitor(l3, SC_L3_JANITOR_WAIT, &rep)))
		return cli_fail("bench l3scale", rc, "janitor pass over %s", store);
	int npass = bench_quick ? 2 : 3;
	for (int r = 0; r < npass; r++) {
		struct putjob j = { NS_FRESH, fresh, n / 100 ? n / 100 : 1, s->payload, s->procs, 0 };
		fresh += j.count;
		if (in_procs(store, s->procs, put_share, &j) < 0)
			return cli_fail("bench l3scale", -EIO, "puts into %s failed", store);
		double a = cli_now();
		rc = sc_l3_janitor(l3, SC_L3_JANITOR_WAIT, &rep);
		v[r] = (cli_now() - a) * 1e3;
		if (rc)
			return cli_fail("bench l3scale", rc, "janitor pass over %s", store);
	}
	snprintf(m, sizeof(m), "janitor_pass_ms_%s", sfx);
	bench_stat(B, m, "ms", v, npass, "1 % of the objects put since the last pass");
	if (!shared_store(store) && (rc = evict_rows(s, l3, store, sfx, n, &fresh, v)))
		return rc;
	sc_l3_close(l3);

	/* a crashed writer's leftovers */
	int ncrash = bench_quick ? 2 : 3, got = 0;
	for (int r = 0; r < ncrash; r++) {
		double ms = crash_sample(s, store, &fresh);
		if (ms >= 0)
			v[got++] = ms;
	}
	snprintf(m, sizeof(m), "reconcile_after_crash_ms_%s", sfx);
	if (got)
		bench_stat(B, m, "ms", v, got,
			   shared_store(store) ? "janitor pass after a writer was killed inside a put (shared mode: opens do not reconcile)"
					       : "open after a writer was killed inside a put");
	else
		bench_missing(B, m, "no writer was caught inside a put, or the open left its temp files");
	rc = locate_cold(store, sfx, n, v, nloc);
	free(v);
	return rc;
}

/* ---- options ---- */

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache bench l3scale [--dir DIR] [--sizes N,N...] [--payload SIZE] [--procs P]\n\n"
		   "L3 costs as the store grows: open, locate without an arena, puts from P processes\n"
		   "(one at a time, and 32 at a time with one group commit), a janitor pass after 1 %% changed, the open after a writer was killed inside a put.\n\n"
		   "  --dir DIR       where the stores are generated and kept for the next run\n"
		   "                  (default /var/tmp/stagecache-l3scale)\n"
		   "  --sizes LIST    objects per store, e.g. 10k,100k,1m (default 10k,100k; --quick: 2k)\n"
		   "  --payload SIZE  payload bytes per object (default 4K; e.g. 1M)\n"
		   "  --procs P       processes that generate and put (default 4)\n\n"
		   "Metrics (suffixed by the store: _100k, _100k_1m for 1 MiB payloads): open_ms,\n"
		   "locate_us_p50, locate_us_p99, puts_per_s, puts_batch_per_s, janitor_pass_ms,\n"
		   "reconcile_after_crash_ms.\n");
}

static int sizes_opt(const char *cmd, const char *arg, void *dst)
{
	struct scale *s = dst;
	const char *p = arg;
	s->nsizes = 0;
	while (*p) {
		char *end;
		unsigned long long n = strtoull(p, &end, 10);
		if (end == p || !n)
			return cli_usage_error(cmd, "--sizes '%s': want counts like 10k,100k,1m", arg);
		if (*end == 'k' || *end == 'K')
			n *= 1000, end++;
		else if (*end == 'm' || *end == 'M')
			n *= 1000000, end++;
		if ((*end && *end != ',') || s->nsizes == MAX_SIZES || n > 100000000ull)
			return cli_usage_error(cmd, "--sizes '%s': want at most 8 counts like 10k,100k,1m", arg);
		s->sizes[s->nsizes++] = n;
		p = *end ? end + 1 : end;
	}
	return s->nsizes ? 0 : cli_usage_error(cmd, "%s", "--sizes needs at least one count");
}

int bench_l3scale(int argc, char **argv)
{
	struct scale s = { .dir = "/var/tmp/stagecache-l3scale", .payload = 4096, .procs = 4 };
	const struct cli_opt opts[] = {
		{ "dir", CLI_STR, &s.dir },
		{ "sizes", CLI_FN, &s, .fn = sizes_opt },
		{ "payload", CLI_SIZE, &s.payload, 64, 64ull << 20, .want = "64 bytes to 64M" },
		{ "procs", CLI_U32, &s.procs, 1, 64, .want = "1 to 64" },
		{ 0 },
	};
	int rc = cli_parse_opts("bench l3scale", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (optind < argc)
		return cli_usage_error("bench l3scale", "unexpected argument '%s'", argv[optind]);
	if (!s.nsizes) {
		s.sizes[s.nsizes++] = bench_quick ? 2000 : 10000;
		if (!bench_quick)
			s.sizes[s.nsizes++] = 100000;
	}
	if (mkdir(s.dir, 0700) && errno != EEXIST)
		return cli_fail("bench l3scale", -errno, "cannot make %s", s.dir);
	bench_env(B, "dir", "%s", s.dir);
	bench_env(B, "procs", "%u", s.procs);
	char load[64];
	bench_file_line("/proc/loadavg", load, sizeof(load));
	bench_env(B, "loadavg_at_start", "%s", load);
	for (int i = 0; i < s.nsizes; i++)
		if ((rc = one_store(&s, s.sizes[i])) != EXIT_OK)
			return rc;
	return EXIT_OK;
}
