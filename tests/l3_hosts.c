/* tests/l3_hosts.c — see l3_hosts.h. */
#include <dirent.h>
#include <errno.h>
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

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb, (void)flag, (void)f;
	remove(p);
	return 0;
}

void h_rm_rf(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
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
