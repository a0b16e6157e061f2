/* tests/l3_hosts.c — see l3_hosts.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "l3_hosts.h"

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void h_tokens(uint32_t doc, int32_t *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		t[i] = (int32_t)(mix(((uint64_t)doc << 32) | i) % 100000u);
}

void h_bytes(uint32_t doc, uint8_t *p, size_t n)
{
	uint64_t s = mix(doc ^ 0x5eed);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		s = mix(s);
		memcpy(p + i, &s, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)(i ^ doc);
}

unsigned h_visibility_ms;

int h_open(const char *dir, const char *host, uint64_t budget, const char *state_dir, struct sc_l3 **out)
{
	struct sc_l3_opts o = { .flags = SC_L3_OPEN_SHARED, .host_id = host, .budget_bytes = budget, .state_dir = state_dir,
				.visibility_ms = h_visibility_ms };
	return sc_l3_open(dir, &o, out);
}

int h_put(struct sc_l3 *l3, uint32_t doc, uint32_t ntok, size_t bytes)
{
	int32_t *t = malloc(ntok * sizeof(*t));
	uint8_t *b = malloc(bytes);
	if (!t || !b) {
		free(t);
		free(b);
		return -ENOMEM;
	}
	h_tokens(doc, t, ntok);
	h_bytes(doc, b, bytes);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { bytes } };
	struct sc_l3_put_args a = { .model_identity = "m", .state_identity = "s", .ns = "h", .tokens = t,
				    .token_count = ntok, .payload = &pl };
	int rc = sc_l3_put(l3, &a, NULL);
	free(t);
	free(b);
	return rc;
}

int h_fetch(struct sc_l3 *l3, uint32_t doc, uint32_t ntok, size_t bytes)
{
	int32_t *t = malloc(ntok * sizeof(*t));
	size_t cap = (bytes + 4095) & ~(size_t)4095;
	uint8_t *want = malloc(bytes), *got = aligned_alloc(4096, cap);
	int rc = -ENOMEM;
	if (!t || !want || !got)
		goto out;
	h_tokens(doc, t, ntok);
	struct sc_location loc;
	rc = sc_l3_locate_longest(l3, "h", t, ntok, &loc);
	if (rc == 0 || (rc > 0 && (uint32_t)rc != ntok)) {
		rc = -ENOENT;
		goto out;
	}
	if (rc < 0)
		goto out;
	rc = sc_l3_fill(l3, &loc, got, cap, 0);
	if (rc)
		goto out;
	h_bytes(doc, want, bytes);
	rc = loc.payload_bytes == bytes && memcmp(got, want, bytes) == 0 ? 0 : 1;
out:
	free(t);
	free(want);
	free(got);
	return rc;
}

int h_fetch_wait(struct sc_l3 *l3, uint32_t doc, uint32_t ntok, size_t bytes, unsigned ms)
{
	int rc;
	for (unsigned waited = 0;; waited += 10) {
		rc = h_fetch(l3, doc, ntok, bytes);
		if (rc != -ENOENT || waited >= ms)
			return rc;
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
}

int h_sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *count_prefix;
static int count_n;

static int count_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	if (flag == FTW_F && !strncmp(p + f->base, count_prefix, strlen(count_prefix)))
		count_n++;
	return 0;
}

int h_count(const char *dir, const char *prefix)
{
	count_prefix = prefix;
	count_n = 0;
	nftw(dir, count_one, 16, FTW_PHYS | FTW_MOUNT);
	return count_n;
}

int h_wait(int pid, int secs)
{
	int status;
	for (int i = 0; i < secs * 100; i++) {
		int r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (r < 0)
			return -1;
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/* ---- another host in its own process ---- */

struct peer_cmd {
	char op;
	uint32_t doc, ntok, bytes;
};

/* Flip one byte of document @doc's object (@at: offset in the file). */
static int corrupt(struct sc_l3 *l3, const char *dir, uint32_t doc, uint32_t ntok, uint64_t at)
{
	int32_t *t = malloc(ntok * sizeof(*t));
	if (!t)
		return -ENOMEM;
	h_tokens(doc, t, ntok);
	struct sc_location loc;
	int rc = sc_l3_locate_longest(l3, "h", t, ntok, &loc);
	free(t);
	if (rc != (int)ntok)
		return rc < 0 ? rc : -ENOENT;
	char hex[SC_DIGEST_HEX_LEN + 1], path[1024];
	sc_digest_format(loc.digest, hex);
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s.sc3", dir, hex, hex);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return -errno;
	uint8_t c;
	rc = pread(fd, &c, 1, (off_t)at) == 1 ? 0 : -EIO;
	c ^= 0x5a;
	if (!rc && pwrite(fd, &c, 1, (off_t)at) != 1)
		rc = -EIO;
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}

static void peer_main(int cmd, int res, const char *dir, const char *host, uint64_t budget, const char *state_dir,
		      const char *arena)
{
	struct sc_arena_opts ao = { .size_bytes = 32u << 20, .huge = SC_HUGE_OFF };
	struct sc_arena *a = NULL;
	struct sc_l3 *l3 = NULL;
	if (sc_arena_create(arena, &ao, &a) || h_open(dir, host, budget, state_dir, &l3) || sc_l3_bind_arena(l3, a))
		_exit(2);
	struct peer_cmd c;
	while (read(cmd, &c, sizeof(c)) == (ssize_t)sizeof(c)) {
		int32_t rc;
		switch (c.op) {
		case 'p': rc = h_put(l3, c.doc, c.ntok, c.bytes); break;
		case 'f': rc = h_fetch(l3, c.doc, c.ntok, c.bytes); break;
		case 'e': rc = sc_l3_evict_to(l3, c.bytes); break;
		case 'x': rc = corrupt(l3, dir, c.doc, c.ntok, 4096 + 100); break; /* behind the header block */
		case 'X': rc = corrupt(l3, dir, c.doc, c.ntok, 20); break;
		default: rc = -EINVAL;
		}
		if (write(res, &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
			break;
	}
	sc_l3_close(l3);
	sc_arena_close(a);
	sc_arena_destroy(NULL, arena);
	_exit(0);
}

int h_peer_start(struct h_peer *p, const char *dir, const char *host, uint64_t budget, const char *state_dir,
		 const char *arena)
{
	int c[2], r[2];
	if (pipe(c))
		return -errno;
	if (pipe(r)) {
		close(c[0]), close(c[1]);
		return -errno;
	}
	p->pid = fork();
	if (p->pid < 0)
		return -errno;
	if (p->pid == 0) {
		close(c[1]), close(r[0]);
		peer_main(c[0], r[1], dir, host, budget, state_dir, arena);
	}
	close(c[0]), close(r[1]);
	p->cmd = c[1], p->res = r[0];
	return 0;
}

int h_peer_do(struct h_peer *p, char op, uint32_t doc, uint32_t ntok, uint32_t bytes)
{
	struct peer_cmd c = { op, doc, ntok, bytes };
	int32_t rc;
	if (write(p->cmd, &c, sizeof(c)) != (ssize_t)sizeof(c) || read(p->res, &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
		return -EPIPE;
	return rc;
}

int h_peer_stop(struct h_peer *p)
{
	close(p->cmd);
	close(p->res);
	return h_wait(p->pid, 30);
}

/* ---- the coherence scenario ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

/* sizes of the payloads the scenario stores: one per (doc, length), so a length has its own bytes */
static uint32_t size_of(uint32_t ntok)
{
	return 65536u + ntok * 256u;
}

/* A's restore of document @doc's first @n tokens (+ 8 more the store never saw): the length it
 * served with every byte right, 0 a miss, -1000 wrong bytes, or the error. */
static int a_restore(struct sc_stage *st, struct sc_l3 *l3, uint32_t doc, uint32_t n)
{
	int32_t *t = malloc((n + 8) * sizeof(*t));
	uint8_t *want = malloc(size_of(n));
	if (!t || !want) {
		free(t), free(want);
		return -ENOMEM;
	}
	h_tokens(doc, t, n);
	for (int i = 0; i < 8; i++)
		t[n + i] = 100001 + i; /* past the vocabulary h_tokens draws from */
	struct sc_restore r;
	int rc = sc_restore(st, l3, "h", t, n + 8, 0, &r);
	if (rc == -ENOENT)
		rc = 0;
	else if (rc > 0) {
		h_bytes(doc, want, size_of((uint32_t)rc));
		if (r.sec_len[0] != size_of((uint32_t)rc) || memcmp(r.sec[0], want, r.sec_len[0]))
			rc = -1000;
		sc_restore_release(&r);
	}
	free(t), free(want);
	return rc;
}

/* A's directory-facing locate of @doc (no fill): the index learns it; waits up to @ms for it to show */
static int a_locate(struct sc_l3 *l3, uint32_t doc, uint32_t n, unsigned ms)
{
	int32_t t[256];
	struct sc_location loc;
	h_tokens(doc, t, n);
	int rc;
	for (uint64_t t0 = now_ns();; nap_ms(5)) {
		rc = sc_l3_locate_longest(l3, "h", t, n, &loc);
		if (rc != 0 || now_ns() - t0 > ms * 1000000ull)
			return rc;
	}
}

/* waits up to @ms for @doc's @n-token prefix to show in @dir on this mount: each look opens a
 * handle of its own, unbound (it asks the directory, never an index) and fresh (a handle keeps
 * the stored token lengths it has read). How long the mount takes to show another host's put.
 * Returns the token count found, 0 or a negative errno. */
static int dir_shows(const char *dir, const char *state_dir, uint32_t doc, uint32_t n, unsigned ms)
{
	int32_t t[256];
	struct sc_location loc;
	struct sc_l3_opts o = { .flags = SC_L3_OPEN_SHARED | SC_L3_OPEN_NO_RECONCILE, .host_id = "probe",
				.state_dir = state_dir, .visibility_ms = h_visibility_ms };
	h_tokens(doc, t, n);
	int rc;
	for (uint64_t t0 = now_ns();; nap_ms(5)) {
		struct sc_l3 *probe = NULL;
		rc = sc_l3_open(dir, &o, &probe);
		if (rc == 0) {
			rc = sc_l3_locate_longest(probe, "h", t, n, &loc);
			sc_l3_close(probe);
		}
		if (rc < 0 || rc == (int)n || now_ns() - t0 > ms * 1000000ull)
			return rc;
	}
}

#define FAIL(...) do { snprintf(why, len, __VA_ARGS__); goto out; } while (0)

int h_coherence(const char *dir_a, const char *dir_b, const char *state_a, const char *state_b, const char *arena_a,
		const char *arena_b, unsigned refresh_ms, unsigned vis_ms, double *lat_ms, char *why, size_t len)
{
	enum { D1 = 9001, D2 = 9002, D3 = 9003, D4 = 9004, D5 = 9005 };
	struct sc_arena_opts ao = { .size_bytes = 64u << 20, .huge = SC_HUGE_OFF, .l3_index_refresh_ms = refresh_ms };
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	struct sc_l3 *l3 = NULL;
	struct h_peer b = { .pid = -1 };
	struct sc_l3_index_stats s0, s1;
	int rc = -1, r;
	*lat_ms = -1;
	why[0] = 0;
	if (sc_arena_create(arena_a, &ao, &a) || sc_stage_open(a, "m", "s", &st) ||
	    h_open(dir_a, "hostA", 0, state_a, &l3) || sc_l3_bind_arena(l3, a))
		FAIL("host A: cannot set up its arena and handle");
	if (h_peer_start(&b, dir_b, "hostB", 0, state_b, arena_b))
		FAIL("host B: cannot start");
	/* an empty index, made complete by A's first restore (its scan) */
	if ((r = a_restore(st, l3, D1, 64)) != 0)
		FAIL("restore of nothing stored: %d", r);

	/* 1. B puts: once A's mount shows the object, A's very next restore finds it. A miss of its
	 * (complete) index goes to the directory; it never waits for the next refresh. The mount's
	 * delay (MDS, a loaded machine) is waited for apart (dir_shows). */
	if ((r = h_peer_do(&b, 'p', D1, 64, size_of(64))))
		FAIL("B's put: %d", r);
	uint64_t t0 = now_ns();
	if ((r = dir_shows(dir_a, state_a, D1, 64, vis_ms)) != 64)
		FAIL("1: B's put not shown by A's mount after %u ms: %d", vis_ms, r);
	double ms1 = (double)(now_ns() - t0) / 1e6;
	sc_l3_index_stats(a, &s0);
	r = a_restore(st, l3, D1, 64);
	sc_l3_index_stats(a, &s1);
	if (r != 64)
		FAIL("1: A's mount shows B's put (after %.0f ms), A's next restore: %d (want 64, at once)", ms1, r);
	/* to the directory: its probe on the index miss, or (when the mount took longer than the
	 * refresh interval, as on a loaded machine) the refresh scan that restore runs first */
	if (s1.fallbacks <= s0.fallbacks && s1.refreshes <= s0.refreshes)
		FAIL("1: the restore did not go to the directory on its index miss");
	/* the index now answers the prompt by itself */
	sc_l3_index_stats(a, &s0);
	if ((r = a_restore(st, l3, D1, 64)) != 64)
		FAIL("1: second restore: %d", r);
	sc_l3_index_stats(a, &s1);
	if (s1.hits <= s0.hits || s1.fallbacks != s0.fallbacks)
		FAIL("1: the second restore was not answered by the index");

	/* 2. B puts a longer prefix of the same prompt: once A's mount shows it, A's index does
	 * within its refresh interval */
	if ((r = h_peer_do(&b, 'p', D1, 128, size_of(128))))
		FAIL("B's longer put: %d", r);
	if ((r = dir_shows(dir_a, state_a, D1, 128, vis_ms)) != 128)
		FAIL("2: B's longer put not shown by A's mount after %u ms: %d", vis_ms, r);
	/* judged by A's directory scans, not by the clock (a loaded machine slows a scan, not the
	 * rule): the scan under way when the mount showed it, if any, may miss it; the next one finds
	 * it. The clock only ends the wait of an index that never shows it (10 s). */
	sc_l3_index_stats(a, &s0);
	t0 = now_ns();
	unsigned shorter = 0;
	while ((r = a_restore(st, l3, D1, 128)) == 64 &&
	       now_ns() - t0 < (10000ull + vis_ms) * 1000000ull) {
		shorter++;
		nap_ms(2);
	}
	*lat_ms = (double)(now_ns() - t0) / 1e6;
	sc_l3_index_stats(a, &s1);
	if (r != 128)
		FAIL("2: the longer prefix not restored on A after %.0f ms (%u shorter answers, %llu scans): %d", *lat_ms,
		     shorter, (unsigned long long)(s1.refreshes - s0.refreshes), r);
	if (s1.refreshes - s0.refreshes > 2)
		FAIL("2: the longer prefix showed after %llu scans (%.0f ms; refresh %u ms)",
		     (unsigned long long)(s1.refreshes - s0.refreshes), *lat_ms, refresh_ms);

	/* 3. B's janitor evicts what A's index names (A never filled it: no L2 mirror here) */
	if ((r = h_peer_do(&b, 'p', D2, 32, size_of(32))))
		FAIL("B's put D2: %d", r);
	if ((r = a_locate(l3, D2, 32, vis_ms)) != 32)
		FAIL("3: A's locate of D2: %d", r);
	if ((r = h_peer_do(&b, 'e', 0, 0, 0)) < 1)
		FAIL("3: B's eviction evicted %d", r);
	sc_l3_index_stats(a, &s0);
	t0 = now_ns();
	while ((r = a_restore(st, l3, D2, 32)) == 32 && now_ns() - t0 < vis_ms * 1000000ull)
		nap_ms(5); /* a mount may show the file (and its right bytes) a little longer */
	sc_l3_index_stats(a, &s1);
	if (r != 0)
		FAIL("3: A's restore of an object B evicted: %d (want a miss)", r);
	if (s1.vanished <= s0.vanished || s1.drops <= s0.drops)
		FAIL("3: vanished %llu -> %llu, drops %llu -> %llu: the entry was not dropped",
		     (unsigned long long)s0.vanished, (unsigned long long)s1.vanished, (unsigned long long)s0.drops,
		     (unsigned long long)s1.drops);
	if ((r = a_restore(st, l3, D2, 32)) != 0)
		FAIL("3: second restore: %d (want a miss)", r);
	sc_l3_index_stats(a, &s0);
	if (s0.vanished != s1.vanished)
		FAIL("3: the index still named the evicted object");
	/* and after A's index rescans the directory: D2's prefix entry is still there (on a mount
	 * with a visibility grace it is dropped only once older than that), its object is not. What
	 * is waited for: one refresh interval, so that the next restore's index is due a rescan. */
	nap_ms(refresh_ms + 10);
	if ((r = a_restore(st, l3, D2, 32)) != 0)
		FAIL("3: restore after the rescan: %d (want a miss)", r);
	sc_l3_index_stats(a, &s1);
	if (s1.refreshes - s0.refreshes <= s1.fallbacks - s0.fallbacks)
		FAIL("3: no rescan after %u ms (refreshes %llu -> %llu, directory probes %llu -> %llu)", refresh_ms + 10,
		     (unsigned long long)s0.refreshes, (unsigned long long)s1.refreshes,
		     (unsigned long long)s0.fallbacks, (unsigned long long)s1.fallbacks);
	if (s1.vanished != s0.vanished)
		FAIL("3: the index's rescan named the evicted object again");

	/* 4. B finds an object corrupt (its fill quarantines it): A misses */
	if ((r = h_peer_do(&b, 'p', D3, 32, size_of(32))))
		FAIL("B's put D3: %d", r);
	if ((r = a_locate(l3, D3, 32, vis_ms)) != 32)
		FAIL("4: A's locate of D3: %d", r);
	if ((r = h_peer_do(&b, 'x', D3, 32, 0)))
		FAIL("4: B's corruption: %d", r);
	if ((r = h_peer_do(&b, 'f', D3, 32, size_of(32))) != -EBADMSG)
		FAIL("4: B's fill of a corrupt object: %d (want -EBADMSG)", r);
	t0 = now_ns();
	while ((r = a_restore(st, l3, D3, 32)) == 32 && now_ns() - t0 < vis_ms * 1000000ull)
		nap_ms(5);
	if (r != 0)
		FAIL("4: A's restore of an object B quarantined: %d (want a miss)", r);

	/* 5. corrupt on B, read first by A (its index names it): A's fill fails its digest (a bad
	 * header: its lookup does), A quarantines it and reports the verification failure once
	 * (-EBADMSG) or, within the visibility grace, misses; the next restore is a miss */
	for (uint32_t d = D4; d <= D5; d++) {
		if ((r = h_peer_do(&b, 'p', d, 32, size_of(32))))
			FAIL("B's put %u: %d", d, r);
		if ((r = a_locate(l3, d, 32, vis_ms)) != 32)
			FAIL("5: A's locate of %u: %d", d, r);
		if ((r = h_peer_do(&b, d == D4 ? 'x' : 'X', d, 32, 0)))
			FAIL("5: B's corruption of %u: %d", d, r);
		struct sc_l3_stats ls0, ls1;
		sc_l3_stats(l3, &ls0);
		r = a_restore(st, l3, d, 32);
		sc_l3_stats(l3, &ls1);
		/* reported, or (a header found bad by the lookup while the prefix entry is younger than
		 * the visibility grace, which keeps it) a miss; never bytes, never another error */
		if (r != -EBADMSG && r != 0)
			FAIL("5: A's restore of corrupt %s %u: %d (want -EBADMSG or a miss)", d == D4 ? "payload" : "header", d, r);
		if (ls1.verify_failures <= ls0.verify_failures || ls1.quarantined <= ls0.quarantined)
			FAIL("5: A did not find %u corrupt (verify_failures %llu, quarantined %llu)", d,
			     (unsigned long long)ls1.verify_failures, (unsigned long long)ls1.quarantined);
		if ((r = a_restore(st, l3, d, 32)) != 0)
			FAIL("5: second restore of %u: %d (want a miss)", d, r);
	}
	rc = 0;
out:
	if (b.pid > 0 && h_peer_stop(&b) && !rc) {
		snprintf(why, len, "host B did not exit cleanly");
		rc = -1;
	}
	if (l3)
		sc_l3_close(l3);
	if (st)
		sc_stage_close(st);
	if (a) {
		sc_arena_close(a);
		sc_arena_destroy(NULL, arena_a);
	}
	return rc;
}
