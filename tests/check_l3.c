/* tests/check_l3.c — the L3 store: format round trip, locate, fills (single and batch),
 * verification and quarantine, reconciliation, budget, multi-process puts. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/fanotify.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sc_check.h"
#include "../lib/l3/l3.h"
#include "../shm/fault.h"
#include "../shm/heap.h"

static char tmpdir[64];

static void mkdir_tmp(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/sc-l3-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
	char img[128];
	snprintf(img, sizeof(img), "%s/disk.img", tmpdir);
	if (tmpdir[0] && access(img, F_OK) == 0) /* o_direct_on_a_disk_of_4k_sectors's, if it failed half-way */
		sc_test_sh("umount %s/mnt 2>/dev/null; losetup -n -O NAME -j %s | xargs -r -n1 losetup -d", tmpdir, img);
	sc_test_rm_tree(tmpdir);
	tmpdir[0] = 0;
}

static struct sc_l3 *open_l3(const struct sc_l3_opts *o)
{
	struct sc_l3 *l3 = NULL;
	int rc = sc_l3_open(tmpdir, o, &l3);
	ck_assert_msg(rc == 0, "sc_l3_open: %s", sc_strerror(rc));
	return l3;
}

static void fill_bytes(uint8_t *p, size_t n, unsigned seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static int32_t toks[8192];
static void init_tokens(void)
{
	for (int i = 0; i < 8192; i++)
		toks[i] = i * 7 + 3;
}

/* Put a FULL_STATE payload of @n bytes (seeded) for the first @ntok tokens. */
static int put_full(struct sc_l3 *l3, const char *ns, uint32_t ntok, size_t n, unsigned seed, struct sc_location *loc)
{
	uint8_t *b = malloc(n);
	fill_bytes(b, n, seed);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	struct sc_l3_put_args a = { .model_identity = "m", .state_identity = "s", .ns = ns, .tokens = toks,
				    .token_count = ntok, .payload = &pl };
	int rc = sc_l3_put(l3, &a, loc);
	free(b);
	return rc;
}

static void *abuf(size_t n)
{
	void *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
	ck_assert_ptr_nonnull(p);
	return p;
}

/* Fill @loc (put from @seed) with @flags: its result, and the bytes checked when it is 0. */
static int fill_seeded(struct sc_l3 *l3, const struct sc_location *loc, unsigned seed, uint32_t flags)
{
	size_t cap = (loc->payload_bytes + 4095) / 4096 * 4096;
	uint8_t *dst = abuf(cap), *want = malloc(loc->payload_bytes);
	fill_bytes(want, loc->payload_bytes, seed);
	int rc = sc_l3_fill(l3, loc, dst, cap, flags);
	if (!rc)
		ck_assert_msg(memcmp(dst, want, loc->payload_bytes) == 0, "a fill returned wrong bytes");
	free(dst);
	free(want);
	return rc;
}

static void check_fill(struct sc_l3 *l3, const struct sc_location *loc, unsigned seed, uint32_t flags)
{
	int rc = fill_seeded(l3, loc, seed, flags);
	ck_assert_msg(rc == 0, "fill: %s", sc_strerror(rc));
}

/* check_fill, served from a kept file (sc_l3_stats.fills_kept grows by one). */
static void check_fill_kept(struct sc_l3 *l3, const struct sc_location *loc, unsigned seed)
{
	struct sc_l3_stats s0, s1;
	ck_assert_int_eq(sc_l3_stats(l3, &s0), 0);
	check_fill(l3, loc, seed, 0);
	ck_assert_int_eq(sc_l3_stats(l3, &s1), 0);
	ck_assert_uint_eq(s1.fills_kept, s0.fills_kept + 1);
}

static void setup(void)
{
	init_tokens();
	mkdir_tmp();
	atexit(rm_tmp); /* a failed assertion exits the test process without the teardown */
}

static void teardown(void)
{
	rm_tmp();
}

START_TEST(round_trip_every_kind)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_l3_stats st;
	/* FULL_STATE and RECURRENT_ONLY: one section */
	for (int kind = SC_PAYLOAD_FULL_STATE; kind <= SC_PAYLOAD_RECURRENT_ONLY; kind++) {
		size_t n = 100000 + (size_t)kind;
		uint8_t *b = malloc(n);
		fill_bytes(b, n, (unsigned)kind);
		struct sc_payload pl = { .kind = (uint32_t)kind, .sec = { b }, .sec_len = { n } };
		struct sc_l3_put_args a = { .ns = "ns", .tokens = toks, .token_count = 10u + (uint32_t)kind, .payload = &pl };
		struct sc_location put_loc, loc;
		ck_assert_int_eq(sc_l3_put(l3, &a, &put_loc), 0);
		ck_assert_int_eq(sc_l3_locate_longest(l3, "ns", toks, 10u + (uint32_t)kind, &loc), 10 + kind);
		ck_assert_int_eq(loc.kind, kind);
		ck_assert(sc_digest_equal(loc.digest, sc_digest(b, n)));
		ck_assert(sc_digest_equal(loc.digest, put_loc.digest));
		ck_assert_int_eq(loc.payload_bytes, n);
		ck_assert_int_eq(loc.has_kv_desc, 0);
		check_fill(l3, &loc, (unsigned)kind, 0);
		check_fill(l3, &loc, (unsigned)kind, SC_L3_FILL_BUFFERED);
		free(b);
	}
	/* KV_RECURRENT: kv + recurrent + descriptor */
	size_t kvn = 64 * 1024, recn = 5000;
	uint8_t *w = malloc(kvn + recn);
	fill_bytes(w, kvn + recn, 77);
	struct sc_kv_desc d = { .version = 1, .layer_start = 0, .layer_end = 4, .layer_count = 4, .token_start = 0,
				.token_count = 20, .k_row_bytes = 128, .v_row_bytes = 128, .payload_bytes = kvn };
	ck_assert_int_eq(sc_kv_desc_validate(&d, kvn), 0);
	struct sc_payload pl = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { w, w + kvn }, .sec_len = { kvn, recn },
				 .kv_desc = &d };
	struct sc_l3_put_args a = { .ns = "kv", .tokens = toks, .token_count = 20, .payload = &pl };
	ck_assert_int_eq(sc_l3_put(l3, &a, NULL), 0);
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_locate_longest(l3, "kv", toks, 100, &loc), 20);
	ck_assert_int_eq(loc.kind, SC_PAYLOAD_KV_RECURRENT);
	ck_assert_int_eq(loc.sec_len[0], kvn);
	ck_assert_int_eq(loc.sec_len[1], recn);
	ck_assert_int_eq(loc.has_kv_desc, 1);
	ck_assert(memcmp(&loc.kv_desc, &d, sizeof(d)) == 0);
	check_fill(l3, &loc, 77, 0);
	/* KV_RECURRENT with an empty KV section: no descriptor */
	struct sc_payload pl2 = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec = { NULL, w }, .sec_len = { 0, recn } };
	a.payload = &pl2;
	a.ns = "kv2";
	ck_assert_int_eq(sc_l3_put(l3, &a, NULL), 0);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "kv2", toks, 20, &loc), 20);
	ck_assert_int_eq(loc.has_kv_desc, 0);
	check_fill(l3, &loc, 77, 0);
	/* payload rules: descriptor without KV, bad descriptor, second section on FULL_STATE */
	struct sc_payload bad = pl;
	d.payload_bytes = kvn + 1;
	a.payload = &bad;
	ck_assert_int_eq(sc_l3_put(l3, &a, NULL), -EINVAL);
	struct sc_payload bad2 = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { w, w }, .sec_len = { 10, 10 } };
	a.payload = &bad2;
	ck_assert_int_eq(sc_l3_put(l3, &a, NULL), -EINVAL);
	bad2.kind = 9;
	ck_assert_int_eq(sc_l3_put(l3, &a, NULL), -EINVAL);
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_int_eq(st.objects, 4);
	ck_assert_uint_ge(st.fills, 5);
	ck_assert_int_eq(st.verify_failures, 0);
	free(w);
	sc_l3_close(l3);
}
END_TEST

START_TEST(locate_longest_first)
{
	struct sc_l3 *l3 = open_l3(NULL);
	ck_assert_int_eq(put_full(l3, "a", 3, 128, 3, NULL), 0);
	ck_assert_int_eq(put_full(l3, "a", 300, 4096, 300, NULL), 0);
	ck_assert_int_eq(put_full(l3, "a", 1000, 5000, 1000, NULL), 0);
	ck_assert_int_eq(put_full(l3, "b", 500, 128, 500, NULL), 0);
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_locate_longest(l3, "a", toks, 2000, &loc), 1000);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "a", toks, 999, &loc), 300);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "a", toks, 299, &loc), 3);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "a", toks, 2, &loc), 0);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "c", toks, 2000, &loc), 0);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "b", toks, 2000, &loc), 500);
	/* a different token at position 100 hides every prefix longer than 100 */
	int32_t other[2000];
	memcpy(other, toks, sizeof(other));
	other[100] = -1;
	ck_assert_int_eq(sc_l3_locate_longest(l3, "a", other, 2000, &loc), 3);
	/* another handle (another process's view) sees the same index */
	struct sc_l3 *l3b = open_l3(NULL);
	ck_assert_int_eq(sc_l3_locate_longest(l3b, "a", toks, 2000, &loc), 1000);
	ck_assert_int_eq(put_full(l3b, "a", 1500, 100, 1500, NULL), 0);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "a", toks, 2000, &loc), 1500);
	check_fill(l3, &loc, 1500, 0);
	/* bad arguments */
	ck_assert_int_eq(sc_l3_locate_longest(l3, "a", toks, 0, &loc), -EINVAL);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "a", NULL, 10, &loc), -EINVAL);
	sc_l3_close(l3b);
	sc_l3_close(l3);
}
END_TEST

START_TEST(put_is_idempotent_and_refusals_counted)
{
	struct sc_l3_opts o = { .budget_bytes = 1 << 20 };
	struct sc_l3 *l3 = open_l3(&o);
	struct sc_l3_stats st;
	ck_assert_int_eq(put_full(l3, "n", 10, 1000, 1, NULL), 0);
	ck_assert_int_eq(put_full(l3, "n", 10, 1000, 1, NULL), 0);
	ck_assert_int_eq(put_full(l3, "n", 11, 1000, 1, NULL), 0); /* same payload, another prefix */
	sc_l3_stats(l3, &st);
	ck_assert_int_eq(st.objects, 1);
	ck_assert_int_eq(st.put_dedup, 2);
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_locate_longest(l3, "n", toks, 11, &loc), 11);
	ck_assert_int_eq(put_full(l3, "n", 12, 2 << 20, 2, NULL), -E2BIG);
	sc_l3_stats(l3, &st);
	ck_assert_int_eq(st.write_refusals, 1);
	sc_l3_close(l3);
	o = (struct sc_l3_opts){ .min_free_bytes = 1ull << 60 };
	l3 = open_l3(&o);
	ck_assert_int_eq(put_full(l3, "n", 13, 1000, 3, NULL), -ENOSPC);
	sc_l3_stats(l3, &st);
	ck_assert_int_eq(st.write_refusals, 2);
	ck_assert_int_eq(st.objects, 1);
	sc_l3_close(l3);
	/* the largest minimum refuses every put (it used to wrap around and accept them all) */
	o = (struct sc_l3_opts){ .min_free_bytes = UINT64_MAX };
	l3 = open_l3(&o);
	ck_assert_int_eq(put_full(l3, "n", 14, 1000, 4, NULL), -ENOSPC);
	ck_assert_int_eq(put_full(l3, "n", 15, 1, 5, NULL), -ENOSPC);
	sc_l3_stats(l3, &st);
	ck_assert_int_eq(st.objects, 1);
	sc_l3_close(l3);
	/* bad options */
	struct sc_l3 *x;
	o = (struct sc_l3_opts){ .flags = 0x100 };
	ck_assert_int_eq(sc_l3_open(tmpdir, &o, &x), -EINVAL);
	o = (struct sc_l3_opts){ .o_direct = 7 };
	ck_assert_int_eq(sc_l3_open(tmpdir, &o, &x), -EINVAL);
	ck_assert_int_eq(sc_l3_open(NULL, NULL, &x), -EINVAL);
}
END_TEST

/* Corrupt the object of @loc with @how, then check it is quarantined and never served. */
enum { C_MAGIC, C_VERSION, C_CHECKSUM, C_TRUNCATE, C_PAYLOAD, C_LENGTH, C_EXTEND, C_COUNT };

static void corrupt(const struct sc_location *loc, int how)
{
	char rel[48], path[200];
	l3_obj_relpath(loc->digest.lo, loc->digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t block[L3_HDR_BLOCK];
	ck_assert_int_eq(pread(fd, block, sizeof(block), 0), (ssize_t)sizeof(block));
	struct l3_obj_hdr *h = (struct l3_obj_hdr *)block;
	int rewrite_check = 0;
	switch (how) {
	case C_MAGIC: block[0] ^= 1; break;
	case C_VERSION: h->version = 99; rewrite_check = 1; break;
	case C_CHECKSUM: block[L3_HDR_FIXED + 1] ^= 0x40; break; /* in the strings: only the checksum sees it */
	case C_TRUNCATE: ck_assert_int_eq(ftruncate(fd, (off_t)(loc->file_bytes - 1)), 0); break;
	case C_PAYLOAD: {
		uint8_t b;
		ck_assert_int_eq(pread(fd, &b, 1, L3_HDR_BLOCK + 17), 1);
		b ^= 0x01;
		ck_assert_int_eq(pwrite(fd, &b, 1, L3_HDR_BLOCK + 17), 1);
		break;
	}
	case C_LENGTH: h->section_bytes[0] = 1ull << 50; h->payload_bytes = 1ull << 50; rewrite_check = 1; break;
	case C_EXTEND: ck_assert_int_eq(ftruncate(fd, (off_t)(loc->file_bytes + 4096)), 0); break;
	}
	if (rewrite_check)
		h->check = l3_hdr_check(block);
	if (how != C_TRUNCATE && how != C_PAYLOAD && how != C_EXTEND)
		ck_assert_int_eq(pwrite(fd, block, sizeof(block), 0), (ssize_t)sizeof(block));
	close(fd);
}

static int count_dir(const char *sub)
{
	char path[200];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, sub);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	/* quarantine/ also holds <digest>.mirror records (mirrors to invalidate at the next bind) */
	while ((e = readdir(d)))
		n += e->d_name[0] != '.' && !strstr(e->d_name, ".mirror");
	closedir(d);
	return n;
}

/* Every corruption, through each read path: buffered (a warm file) and O_DIRECT (forced: the
 * header and chunk 0 in one vectored read), a small object (one chunk) and a 5 MiB one (chunks
 * hashed as they land: five of 1 MiB buffered, three of 2 MiB direct). */
START_TEST(every_corruption_is_quarantined)
{
	static const size_t sizes[] = { 20000, 5u << 20 };
	int quarantined = 0;
	for (int direct = 0; direct < 2; direct++)
		for (int z = 0; z < 2; z++)
			for (int how = 0; how < C_COUNT; how++) {
				struct sc_l3_opts o = { .o_direct = direct ? SC_L3_ODIRECT_ON : SC_L3_ODIRECT_OFF };
				struct sc_l3 *l3 = open_l3(&o);
				struct sc_location loc, loc2;
				uint32_t ntok = 50u + (uint32_t)(how + C_COUNT * (z + 2 * direct));
				ck_assert_int_eq(put_full(l3, "q", ntok, sizes[z], 100u + ntok, &loc), 0);
				ck_assert_int_eq(sc_l3_locate_longest(l3, "q", toks, ntok, &loc), (int)ntok);
				corrupt(&loc, how);
				size_t cap = (sizes[z] + (1 << 20)) & ~(size_t)4095;
				uint8_t *dst = abuf(cap);
				struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = cap }, *rp = &r, *done;
				ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
				ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
				ck_assert_msg(r.result == -EBADMSG, "corruption %d (%zu bytes, %s): fill returned %d", how,
					      sizes[z], direct ? "direct" : "buffered", r.result);
				free(dst);
				ck_assert_int_eq(count_dir("quarantine"), ++quarantined);
				/* never served again: the prefix no longer resolves, the digest is gone */
				ck_assert_int_eq(sc_l3_locate_longest(l3, "q", toks, ntok, &loc2), 0);
				ck_assert_int_eq(sc_l3_lookup(l3, loc.digest, &loc2), -ENOENT);
				struct sc_l3_stats st;
				sc_l3_stats(l3, &st);
				ck_assert_uint_ge(st.quarantined, 1);
				ck_assert_uint_ge(st.verify_failures, 1);
				sc_l3_close(l3);
			}
}
END_TEST

/* Descriptors of this process open on object files (kept files): all, removed ones included, or
 * (@removed) only those of removed files. */
static int count_object_fds_of(int removed)
{
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	char p[300], target[512];
	while ((e = readdir(d))) {
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(p, target, sizeof(target) - 1);
		if (k > 0) {
			target[k] = 0;
			n += strstr(target, tmpdir) && strstr(target, ".sc3") && (!removed || strstr(target, " (deleted)"));
		}
	}
	closedir(d);
	return n;
}

static int count_object_fds(void)
{
	return count_object_fds_of(0);
}

static int count_removed_object_fds(void)
{
	return count_object_fds_of(1);
}

/* Mappings of io_uring rings in this process (their SQ, CQ and SQE arrays). */
static int count_ring_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	ck_assert_ptr_nonnull(f);
	char line[512];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "io_uring") != NULL;
	fclose(f);
	return n;
}

static int fill_rc(struct sc_l3 *l3, const struct sc_location *loc)
{
	size_t cap = (loc->payload_bytes + 4095) / 4096 * 4096;
	void *dst = abuf(cap);
	int rc = sc_l3_fill(l3, loc, dst, cap, 0);
	free(dst);
	return rc;
}

/* A handle's ring and files go with it: open, put, fill (this thread's ring is made), close leaves
 * the process with the descriptors and io_uring mappings it had, every time. */
START_TEST(closing_a_handle_releases_its_ring_and_files)
{
	for (int round = 0; round < 3; round++) {
		int n0 = sc_test_open_fds(), m0 = count_ring_maps();
		struct sc_l3 *l3 = open_l3(NULL);
		struct sc_location loc;
		ck_assert_int_eq(put_full(l3, "ring", 10, 20000 + round, 70 + round, &loc), 0);
		check_fill(l3, &loc, 70 + round, 0);
		ck_assert_msg(count_ring_maps() > m0, "round %d: no io_uring mapping after a fill", round);
		sc_l3_close(l3);
		ck_assert_msg(sc_test_open_fds() == n0, "round %d: %d descriptors after close, %d before", round, sc_test_open_fds(), n0);
		ck_assert_msg(count_ring_maps() == m0, "round %d: %d io_uring mappings after close, %d before", round,
			      count_ring_maps(), m0);
	}
}
END_TEST

/* A fill in a process that may open no descriptor more (no ring can be made, no file opened): a
 * clear error, nothing quarantined; with descriptors again the same fill returns the bytes. (In a
 * child: the limit is the process's.) */
START_TEST(a_fill_without_a_descriptor_to_spare_fails_cleanly)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "nofd", 10, 50000, 90, &loc), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		size_t cap = (loc.payload_bytes + 4095) / 4096 * 4096;
		uint8_t *dst = aligned_alloc(4096, cap), *want = malloc(loc.payload_bytes);
		fill_bytes(want, loc.payload_bytes, 90);
		struct rlimit was, none;
		int bad = !dst || !want || getrlimit(RLIMIT_NOFILE, &was) != 0;
		none = (struct rlimit){ (rlim_t)sc_test_lowest_free_fd(), was.rlim_max }; /* no new descriptor */
		bad |= setrlimit(RLIMIT_NOFILE, &none) != 0;
		int rc = sc_l3_fill(l3, &loc, dst, cap, 0);
		bad |= setrlimit(RLIMIT_NOFILE, &was) != 0;
		struct sc_l3_stats st;
		sc_l3_stats(l3, &st);
		if (rc == 0 || rc == -EBADMSG || rc == -ENOENT || st.quarantined)
			_exit(10);
		bad |= sc_l3_fill(l3, &loc, dst, cap, 0) != 0 || memcmp(dst, want, loc.payload_bytes) != 0;
		_exit(bad ? 11 : 0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "the child: status %d (exit 10: the fill succeeded, missed or judged the object; 11: no bytes after)",
		      st);
	check_fill(l3, &loc, 90, 0);
	sc_l3_close(l3);
}
END_TEST

/* More memory registered than a ring can name (8 ranges of 9 GiB: 72 one-GiB vectors, the ring
 * takes 64), none of it usable by the kernel (reserved, PROT_NONE): the registration is refused,
 * the ring keeps its header buffers, fills read right; a ninth range is -ENOSPC, bad ones -EINVAL. */
START_TEST(registering_more_memory_than_a_ring_names)
{
	const uint64_t each = 9ull << 30;
	uint8_t *res = mmap(NULL, 8 * each, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED) {
		sc_skip("registering_more_memory_than_a_ring_names: 72 GiB of address space not reserved (%s)",
			strerror(errno));
		return;
	}
	struct sc_l3 *l3 = open_l3(NULL);
	ck_assert_int_eq(sc_l3_register_memory(l3, NULL, 4096), -EINVAL);
	ck_assert_int_eq(sc_l3_register_memory(l3, res, 0), -EINVAL);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(sc_l3_register_memory(l3, res + (uint64_t)i * each, each), 0);
	ck_assert_int_eq(sc_l3_register_memory(l3, res, each), 0); /* the same range again: nothing new */
	ck_assert_int_eq(sc_l3_register_memory(l3, res + 4096, 4096), -ENOSPC);
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "regs", 10, 70000, 95, &loc), 0);
	check_fill(l3, &loc, 95, 0);
	check_fill(l3, &loc, 95, SC_L3_FILL_BUFFERED);
	sc_l3_close(l3);
	munmap(res, 8 * each);
}
END_TEST

/* A forked child owns copies of its parent's handles but none of their rings (lib/l3/ring.c drops
 * them from its list at fork): it may close them in either order and fill through a new handle.
 * (A ring list that kept a closed handle's ring would hand the new ring a freed neighbour: the
 * ASan build reports it.) */
START_TEST(a_forked_child_closes_handles_in_any_order_and_fills_again)
{
	struct sc_l3 *a = open_l3(NULL), *b = open_l3(NULL);
	struct sc_location loc;
	ck_assert_int_eq(put_full(a, "fork", 10, 30000, 80, &loc), 0);
	check_fill(a, &loc, 80, 0); /* a's ring, then b's */
	check_fill(b, &loc, 80, 0);
	for (int order = 0; order < 2; order++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			sc_l3_close(order ? b : a);
			sc_l3_close(order ? a : b);
			struct sc_l3 *c = NULL;
			int ok = sc_l3_open(tmpdir, NULL, &c) == 0;
			for (int k = 0; ok && k < 2; k++)
				ok = fill_rc(c, &loc) == 0;
			if (c)
				sc_l3_close(c);
			_exit(ok ? 0 : 1);
		}
		int st;
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "order %d: the child's fill failed (status %d)", order,
			      st);
	}
	check_fill(a, &loc, 80, 0); /* the parent's handles are untouched */
	check_fill(b, &loc, 80, 0);
	sc_l3_close(b);
	sc_l3_close(a);
}
END_TEST

/* A child forked while a fill was in flight (its file open, its read not reaped) has its own copy
 * of the fill's descriptor: the child's close of the handle closes it (no object file stays open
 * in the child); the parent's fill ends as if no child had been made. */
START_TEST(a_forked_childs_close_closes_its_copies_of_fills_in_flight)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "fork", 11, 30000, 81, &loc), 0);
	check_fill(l3, &loc, 81, 0); /* the ring made */
	uint8_t *dst = abuf(32768);
	struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = 32768 }, *rp = &r, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1); /* a lone fill: its file opened now */
	ck_assert_int_eq(count_object_fds(), 1);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int before = count_object_fds();
		sc_l3_close(l3);
		_exit(before == 1 && count_object_fds() == 0 ? 0 : 1);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child kept an object file open (status %d)", st);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_int_eq(r.result, 0);
	uint8_t *w = malloc(30000);
	fill_bytes(w, 30000, 81);
	ck_assert(memcmp(dst, w, 30000) == 0);
	free(w), free(dst);
	ck_assert_int_eq(count_object_fds(), 0);
	sc_l3_close(l3);
}
END_TEST

/* A thread has one ring per handle, however many handles it uses: with more handles than its
 * small cache of rings holds (4), a fill submitted on the first handle, left in flight while the
 * thread fills through five others, is reaped on the first handle's ring (the same ring found
 * again, not a new one made). */
START_TEST(a_threads_fill_is_reaped_on_its_ring_after_five_other_handles)
{
	enum { H = 6 };
	struct sc_l3 *l3[H];
	struct sc_location loc;
	for (int i = 0; i < H; i++)
		l3[i] = open_l3(NULL);
	ck_assert_int_eq(put_full(l3[0], "many", 12, 30000, 82, &loc), 0);
	check_fill(l3[0], &loc, 82, 0); /* the first handle's ring */
	struct l3_ring *r0 = l3_ring_find(l3[0]);
	uint8_t *dst = abuf(32768);
	struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = 32768 }, *rp = &r, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3[0], &rp, 1), 1);
	for (int i = 1; i < H; i++)
		check_fill(l3[i], &loc, 82, 0);
	ck_assert_int_eq(sc_l3_fill_reap(l3[0], &done, 1, 10 * 1000000000ll), 1);
	ck_assert_ptr_eq(done, &r);
	ck_assert_int_eq(r.result, 0);
	ck_assert_ptr_eq(l3_ring_find(l3[0]), r0);
	uint8_t *w = malloc(30000);
	fill_bytes(w, 30000, 82);
	ck_assert(memcmp(dst, w, 30000) == 0);
	free(w), free(dst);
	for (int i = 0; i < H; i++)
		sc_l3_close(l3[i]);
}
END_TEST

/* Kept files (lib/l3/fill.c): a second fill of an object opens nothing; at most fd_cache files are
 * kept; a removed, replaced or damaged object is never served from a kept file; none: none kept. */
/* Fill the stack below the caller with what an earlier seeded XXH3 state there would have left:
 * in every 64-byte line, @w where the state keeps its seed and 0 where it keeps its external
 * secret pointer (offsets 552 and 568 of the 64-byte aligned state in xxHash 0.8), @w elsewhere. */
static __attribute__((noinline)) void stack_fill(uint64_t w)
{
	_Alignas(64) volatile uint64_t b[4096];
	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		b[i] = i % 8 == 7 ? 0 : w;
}

/* A prefix entry's check does not depend on what the stack held: its XXH3 state lives on the stack
 * and is reset with a seed (the hash of the header), and XXH3 keeps the secret derived from the
 * seed it finds in the state when that equals the new one. Here every stack word below us is that
 * seed, and the check must still be the hash of the entry (a fresh state, computed here). Without
 * the state's initialisation, an entry read twice at one stack depth was judged damaged about once
 * in five runs of kept_files_reused_and_never_stale. */
START_TEST(prefix_check_ignores_what_the_stack_held)
{
	struct l3_pfx p = { .magic = L3_PFX_MAGIC, .version = L3_PFX_VERSION, .token_count = 100,
			    .digest_lo = 1, .digest_hi = 2, .prefix_lo = 3, .prefix_hi = 4, .created_ns = 5 };
	int32_t tok[100];
	for (int i = 0; i < 100; i++)
		tok[i] = i * 31 - 7;
	uint32_t nl = 2;
	uint64_t seed = XXH3_64bits(&p, offsetof(struct l3_pfx, check));
	XXH3_state_t st;
	memset(&st, 0, sizeof(st));
	XXH3_64bits_reset_withSeed(&st, seed);
	XXH3_64bits_update(&st, tok, sizeof(tok));
	XXH3_64bits_update(&st, &nl, 4);
	XXH3_64bits_update(&st, "ns", 2);
	uint64_t want = XXH3_64bits_digest(&st);
	for (int round = 0; round < 3; round++) {
		stack_fill(seed);
		ck_assert_uint_eq(l3_pfx_check(&p, tok, "ns", nl), want);
	}
}
END_TEST

static void obj_path(const struct sc_location *loc, char *path, size_t n)
{
	char rel[48];
	l3_obj_relpath(loc->digest.lo, loc->digest.hi, rel);
	snprintf(path, n, "%s/objects/%s", tmpdir, rel);
}

/* Descriptors of this process open on @loc's object file: how many, and the lowest in *@first
 * (-1: none). */
static int object_fds_at(const struct sc_location *loc, int *first)
{
	char path[200];
	obj_path(loc, path, sizeof(path));
	struct stat obj, sb;
	ck_assert_int_eq(stat(path, &obj), 0);
	int n = 0;
	*first = -1;
	for (int fd = 0; fd < 1024; fd++) {
		if (fstat(fd, &sb) || sb.st_ino != obj.st_ino || sb.st_dev != obj.st_dev)
			continue;
		if (!n++)
			*first = fd;
	}
	return n;
}

/* The descriptor of this process open on @loc's object file (a kept file), or -1. */
static int object_fd(const struct sc_location *loc)
{
	int first;
	(void)object_fds_at(loc, &first);
	return first;
}

/* Close this process's descriptor 0 (a daemon's standard input often is) after a first fill made
 * the thread's ring (its descriptors taken), then fill an object (seed @seed + 1, put under
 * @ns, at *@b) whose file is opened, and kept, as descriptor 0. */
static void keep_as_descriptor_0(struct sc_l3 *l3, const char *ns, unsigned seed, struct sc_location *b)
{
	struct sc_location a;
	ck_assert_int_eq(put_full(l3, ns, 16, 20000, seed, &a), 0);
	ck_assert_int_eq(put_full(l3, ns, 17, 20000, seed + 1, b), 0);
	check_fill(l3, &a, seed, 0);
	ck_assert_int_eq(close(0), 0);
	check_fill(l3, b, seed + 1, 0);
	ck_assert_int_eq(object_fd(b), 0);
}

/* A process whose standard input is closed (a daemon's often is) gets descriptor 0 from its next
 * open: an object file opened as 0 is filled from, kept, filled from again, and closed with the
 * handle like any other. */
START_TEST(an_object_file_opened_as_descriptor_0_is_filled_kept_and_closed)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4 });
	struct sc_location b;
	keep_as_descriptor_0(l3, "zero", 60, &b);
	check_fill_kept(l3, &b, 61);
	sc_l3_close(l3);
	errno = 0;
	ck_assert_int_eq(fcntl(0, F_GETFD), -1); /* closed with the handle */
	ck_assert_int_eq(errno, EBADF);
}
END_TEST

/* A forked child's close of the handle closes its copies of the kept files, descriptor 0 too; the
 * parent's kept file stays open and kept. */
START_TEST(a_forked_childs_close_closes_its_copy_of_a_kept_file_as_descriptor_0)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4 });
	struct sc_location b;
	keep_as_descriptor_0(l3, "zfork", 62, &b);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int had = fcntl(0, F_GETFD) >= 0;
		sc_l3_close(l3);
		errno = 0;
		_exit(had && fcntl(0, F_GETFD) == -1 && errno == EBADF ? 0 : 1);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's copy of descriptor 0 stayed open (status %d)", st);
	ck_assert_int_eq(object_fd(&b), 0);
	check_fill_kept(l3, &b, 63);
	sc_l3_close(l3);
}
END_TEST

START_TEST(kept_files_reused_and_never_stale)
{
	struct sc_l3_opts o = { .fd_cache = SC_L3_FD_CACHE_MAX + 1 };
	struct sc_l3 *bad = NULL;
	ck_assert_int_eq(sc_l3_open(tmpdir, &o, &bad), -EINVAL);
	o.fd_cache = 4;
	struct sc_l3 *l3 = open_l3(&o);
	struct sc_location loc[7];
	for (unsigned i = 0; i < 7; i++)
		ck_assert_int_eq(put_full(l3, "kept", 100 + i, 20000 + i * 4096, 40 + i, &loc[i]), 0);
	check_fill(l3, &loc[6], 46, 0); /* the ring exists, object 6 is kept */
	int n0 = sc_test_open_fds();
	check_fill(l3, &loc[0], 40, 0);
	ck_assert_int_eq(sc_test_open_fds(), n0 + 1);
	check_fill(l3, &loc[0], 40, 0);
	ck_assert_int_eq(sc_test_open_fds(), n0 + 1); /* the same file, not opened again */
	for (unsigned i = 0; i < 6; i++)
		check_fill(l3, &loc[i], 40 + i, 0);
	ck_assert_int_le(sc_test_open_fds(), n0 + 3); /* at most 4 kept in all */
	check_fill(l3, &loc[0], 40, 0);

	/* removed under its kept file: a miss, as with a fresh open */
	char rel[48], path[200], path3[200];
	l3_obj_relpath(loc[0].digest.lo, loc[0].digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(fill_rc(l3, &loc[0]), -ENOENT);
	ck_assert_int_eq(put_full(l3, "kept", 100, 20000, 40, &loc[0]), 0);
	check_fill(l3, &loc[0], 40, 0);

	/* damaged in place: -EBADMSG, quarantined, and the kept files closed (a removal through the
	 * handle sweeps this thread's idle kept files at once) */
	check_fill(l3, &loc[1], 41, 0);
	ck_assert_int_ge(count_object_fds(), 2);
	corrupt(&loc[1], C_PAYLOAD);
	ck_assert_int_eq(fill_rc(l3, &loc[1]), -EBADMSG);
	ck_assert_int_eq(count_object_fds(), 0);
	ck_assert_int_eq(fill_rc(l3, &loc[1]), -ENOENT); /* quarantined: gone */

	/* cut short under its kept file: -EBADMSG */
	check_fill(l3, &loc[5], 45, 0);
	corrupt(&loc[5], C_TRUNCATE);
	ck_assert_int_eq(fill_rc(l3, &loc[5]), -EBADMSG);

	/* replaced by another object's file under the same name: -EBADMSG, never the old bytes */
	check_fill(l3, &loc[2], 42, 0);
	l3_obj_relpath(loc[2].digest.lo, loc[2].digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	l3_obj_relpath(loc[3].digest.lo, loc[3].digest.hi, rel);
	snprintf(path3, sizeof(path3), "%s/objects/%s", tmpdir, rel);
	ck_assert_int_eq(rename(path3, path), 0);
	ck_assert_int_eq(fill_rc(l3, &loc[2]), -EBADMSG);
	sc_l3_close(l3);

	/* none: nothing stays open after a fill */
	o.fd_cache = SC_L3_FD_CACHE_NONE;
	l3 = open_l3(&o);
	check_fill(l3, &loc[4], 44, 0);
	int n2 = sc_test_open_fds();
	check_fill(l3, &loc[6], 46, 0);
	check_fill(l3, &loc[4], 44, 0);
	ck_assert_msg(sc_test_open_fds() == n2, "%d fds, %d before; %d on objects", sc_test_open_fds(), n2, count_object_fds());
	sc_l3_close(l3);

	/* evicted: the kept files go at once (their space is freed), and a forked child's copies
	 * of kept files are closed by its sc_l3_close */
	o.fd_cache = 4;
	l3 = open_l3(&o);
	check_fill(l3, &loc[4], 44, 0);
	check_fill(l3, &loc[6], 46, 0);
	ck_assert_int_eq(count_object_fds(), 2);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int had = count_object_fds();
		sc_l3_close(l3);
		_exit(had == 2 && count_object_fds() == 0 ? 0 : 1);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child kept its copies (status %d)", st);
	ck_assert_int_ge(sc_l3_evict_to(l3, 0), 2);
	ck_assert_int_eq(count_object_fds(), 0);
	sc_l3_close(l3);
}
END_TEST

/*
 * The default on a local filesystem (lib/l3/ring.c): small object files are kept, a large one is
 * not, their bytes stay under the budget; a kept file whose object another process removed is
 * closed by the sweep of a later fill (its space freed), not held until its slot is reused.
 */
START_TEST(kept_files_by_default_small_under_a_budget_and_let_go_when_removed)
{
	enum { SMALL = 64 << 10, LARGE = (1 << 20) + 8192, EDGE = L3_KEPT_LOCAL_FILE - L3_HDR_BLOCK };
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location s[4], big, edge;
	for (unsigned i = 0; i < 4; i++)
		ck_assert_int_eq(put_full(l3, "dflt", 200 + i, SMALL, 60 + i, &s[i]), 0);
	ck_assert_int_eq(put_full(l3, "dflt", 300, LARGE, 70, &big), 0);
	ck_assert_int_eq(put_full(l3, "dflt", 301, EDGE, 71, &edge), 0);
	ck_assert_uint_eq(edge.file_bytes, L3_KEPT_LOCAL_FILE); /* the largest file kept */
	if (!l3->kept_links) {
		sc_skip("%s is not on a local filesystem: the default keeps every file (FUSE) or none there", tmpdir);
		sc_l3_close(l3);
		return;
	}
	for (unsigned i = 0; i < 4; i++)
		check_fill(l3, &s[i], 60 + i, 0);
	check_fill(l3, &big, 70, 0);
	ck_assert_msg(count_object_fds() == 4, "%d object files kept: the 4 small ones, not the large one", count_object_fds());
	check_fill(l3, &edge, 71, 0);
	ck_assert_msg(count_object_fds() == 5, "%d object files kept: a file of the largest size kept is not", count_object_fds());
	sc_l3_close(l3);

	/* a budget of two and a half small files: two kept */
	l3_kept_local_bytes = SMALL * 5 / 2 + 4096;
	l3 = open_l3(NULL);
	l3_kept_local_bytes = L3_KEPT_LOCAL_BYTES;
	for (unsigned i = 0; i < 4; i++)
		check_fill(l3, &s[i], 60 + i, 0);
	ck_assert_msg(count_object_fds() == 2, "%d object files kept under a budget of two", count_object_fds());
	check_fill(l3, &s[3], 63, 0); /* the most recent ones are those kept */
	check_fill(l3, &s[2], 62, 0);
	ck_assert_int_eq(count_object_fds(), 2);
	sc_l3_close(l3);

	/* a budget of exactly two small files (their files' bytes): both kept */
	char rel[48], path[200];
	uint64_t two = 0;
	for (unsigned i = 0; i < 2; i++) {
		struct stat sb;
		l3_obj_relpath(s[i].digest.lo, s[i].digest.hi, rel);
		snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
		ck_assert_int_eq(stat(path, &sb), 0);
		two += (uint64_t)sb.st_size;
	}
	l3_kept_local_bytes = two;
	l3 = open_l3(NULL);
	l3_kept_local_bytes = L3_KEPT_LOCAL_BYTES;
	for (unsigned i = 0; i < 2; i++)
		check_fill(l3, &s[i], 60 + i, 0);
	ck_assert_msg(count_object_fds() == 2, "%d object files kept under a budget of exactly two", count_object_fds());
	sc_l3_close(l3);

	/* removed by another process under a kept file: that file is closed by a later fill's sweep
	 * (at most once a second), and a fill of the removed object misses as with a fresh open */
	l3 = open_l3(NULL);
	check_fill(l3, &s[0], 60, 0);
	check_fill(l3, &s[1], 61, 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sc_l3 *other = NULL;
		_exit(sc_l3_open(tmpdir, NULL, &other) || sc_l3_evict_to(other, 0) < 2 ? 1 : 0);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the other process did not evict the objects (%d)", status);
	ck_assert_int_eq(count_removed_object_fds(), 2); /* held by the kept files */
	struct sc_location fresh;
	ck_assert_int_eq(put_full(l3, "dflt", 400, SMALL, 80, &fresh), 0);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (count_removed_object_fds()) { /* fills of another object, until one sweeps */
		check_fill(l3, &fresh, 80, 0);
		clock_gettime(CLOCK_MONOTONIC, &now);
		ck_assert_msg(now.tv_sec - t0.tv_sec < 10, "a kept file of a removed object still open after 10 s of fills");
		sc_test_pause_ms(20); /* the sweep's pace: once a second */
	}
	ck_assert_int_eq(count_object_fds(), 1); /* the new object's, kept */
	ck_assert_int_eq(fill_rc(l3, &s[0]), -ENOENT);
	sc_l3_close(l3);
}
END_TEST

/* A store opened with O_DIRECT on, or NULL after a SKIP line when the filesystem reports no
 * direct-I/O alignment. */
static struct sc_l3 *open_l3_direct(void)
{
	struct sc_l3_opts o = { .o_direct = SC_L3_ODIRECT_ON };
	struct sc_l3 *l3 = open_l3(&o);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	if (st.dio_mem_align)
		return l3;
	sc_skip("no statx DIO alignment on %s", tmpdir);
	sc_l3_close(l3);
	return NULL;
}

/* O_DIRECT fills of every size class are exact: one vectored read (header + payload), chunked
 * reads of a large object, a tail that is not a multiple of the alignment. */
START_TEST(o_direct_fills_are_exact)
{
	struct sc_l3 *l3 = open_l3_direct();
	if (!l3)
		return;
	static const size_t sizes[] = {
		1, 4095, 4096, 65536, 65537, (2u << 20) - 1, 2u << 20, (4u << 20) - 1, 4u << 20, (5u << 20) + 12345,
	};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct sc_location loc;
		ck_assert_int_eq(put_full(l3, "od", 200 + i, sizes[i], 300 + i, &loc), 0);
		size_t cap = (sizes[i] + 4095) & ~(size_t)4095;
		uint8_t *dst = abuf(cap), *want = malloc(sizes[i]);
		fill_bytes(want, sizes[i], 300 + i);
		struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = cap }, *rp = &r, *done;
		ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
		ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
		ck_assert_msg(r.result == 0, "%zu bytes: %d", sizes[i], r.result);
		ck_assert_int_eq(r.direct, 1);
		ck_assert_msg(memcmp(dst, want, sizes[i]) == 0, "%zu bytes: wrong bytes", sizes[i]);
		free(dst);
		free(want);
	}
	sc_l3_close(l3);
}
END_TEST

/* The kernel may refuse an O_DIRECT read it accepted the open for (-EINVAL): the fill turns
 * buffered and reads that chunk again; a second chunk refused after the fill turned buffered is
 * read again too, and so is the combined header + chunk 0 read refused after a later chunk. Each
 * fill ends exact. (The refusals are the test build's: l3_test_refuse_direct.) */
START_TEST(o_direct_reads_refused_are_read_again_buffered)
{
	struct sc_l3 *l3 = open_l3_direct();
	if (!l3)
		return;
	static const uint64_t refuse[] = { 1u << 1, (1u << 1) | (1u << 2), 1u << 0, (1u << 0) | (1u << 2) };
	size_t len = (6u << 20) + 4096; /* four chunks of 2 MiB, the last short */
	for (unsigned i = 0; i < sizeof(refuse) / sizeof(refuse[0]); i++) {
		struct sc_location loc;
		ck_assert_int_eq(put_full(l3, "rf", 400 + i, len, 500 + i, &loc), 0);
		uint8_t *dst = abuf(len), *want = malloc(len);
		fill_bytes(want, len, 500 + i);
		atomic_store(&l3_test_refuse_direct, refuse[i]);
		struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = len }, *rp = &r, *done;
		ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
		ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
		ck_assert_msg(r.result == 0, "refusals %#llx: %d", (unsigned long long)refuse[i], r.result);
		ck_assert_msg(atomic_load(&l3_test_refuse_direct) == 0, "refusals %#llx: not all made",
			      (unsigned long long)refuse[i]);
		ck_assert_msg(memcmp(dst, want, len) == 0, "refusals %#llx: wrong bytes", (unsigned long long)refuse[i]);
		free(dst);
		free(want);
	}
	sc_l3_close(l3);
}
END_TEST

/* A fill whose descriptor cannot be switched to buffered reads (fcntl refused: the test build's
 * l3_test_setfl_fails) ends with that error instead of sending buffered reads to an O_DIRECT
 * descriptor — once for the combined first read, once for a later chunk; the object is intact,
 * and the next fill of it is exact. */
START_TEST(a_fill_that_cannot_turn_buffered_ends_with_the_error)
{
	struct sc_l3 *l3 = open_l3_direct();
	if (!l3)
		return;
	size_t len = (6u << 20) + 4096;
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "sf", 420, len, 520, &loc), 0);
	uint8_t *dst = abuf(len), *want = malloc(len);
	fill_bytes(want, len, 520);
	static const uint64_t refuse[] = { 1u << 0, 1u << 2 }; /* the combined first read; a later chunk */
	for (unsigned i = 0; i < 2; i++) {
		atomic_store(&l3_test_refuse_direct, refuse[i]);
		atomic_store(&l3_test_setfl_fails, EPERM);
		struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = len }, *rp = &r, *done;
		ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
		ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
		ck_assert_int_eq(r.result, -EPERM);
		ck_assert_int_eq(atomic_load(&l3_test_setfl_fails), 0); /* the switch was tried */
		ck_assert_uint_eq(atomic_load(&l3_test_refuse_direct), 0);
		memset(dst, 0, len);
		r = (struct sc_l3_fill_req){ .loc = &loc, .dst = dst, .dst_bytes = len };
		ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
		ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
		ck_assert_int_eq(r.result, 0);
		ck_assert_int_eq(memcmp(dst, want, len), 0);
	}
	free(dst);
	free(want);
	sc_l3_close(l3);
}
END_TEST


/* One fill of @loc (seeded @seed) into an aligned destination, submitted alone and reaped: its
 * sc_l3_fill_req.direct, after checking the result and the bytes. */
static int fill_direct_flag(struct sc_l3 *l3, const struct sc_location *loc, unsigned seed, uint32_t flags)
{
	size_t cap = (loc->payload_bytes + 4095) / 4096 * 4096;
	uint8_t *dst = abuf(cap), *want = malloc(loc->payload_bytes);
	fill_bytes(want, loc->payload_bytes, seed);
	struct sc_l3_fill_req r = { .loc = loc, .dst = dst, .dst_bytes = cap, .flags = flags }, *rp = &r, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_msg(r.result == 0, "fill: %s", sc_strerror(r.result));
	ck_assert(memcmp(dst, want, loc->payload_bytes) == 0);
	free(dst);
	free(want);
	return r.direct;
}

/* Refuse io_uring_enter when it would wait for nothing (min_complete 0: a plain submission) with
 * EAGAIN, in this process; a submission that waits goes through. 0, or -1 without seccomp. */
static int refuse_plain_submissions(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SC_TEST_SECCOMP_ARG_LO(2)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAGAIN),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	return sc_test_seccomp(f, sizeof(f) / sizeof(f[0]));
}

/* An open object file is switched between O_DIRECT and buffered per fill, and the descriptor is
 * what the fill reports (sc_l3_fill_req.direct), O_NONBLOCK off (the open's, for planted FIFOs): a
 * kept file read direct, then buffered, then direct again. Where the switch to O_DIRECT is refused
 * (fcntl EINVAL, as on a filesystem without direct I/O; here a seccomp filter in a child), the fill
 * reads buffered, exact, reports it, and the file is kept buffered. */
START_TEST(an_open_file_is_switched_to_the_mode_each_fill_reports)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .o_direct = SC_L3_ODIRECT_ON, .fd_cache = 4 });
	struct sc_l3_stats st0, st;
	sc_l3_stats(l3, &st0);
	if (!st0.dio_mem_align) {
		sc_skip("no statx DIO alignment on %s", tmpdir);
		sc_l3_close(l3);
		return;
	}
	struct sc_location a, b;
	ck_assert_int_eq(put_full(l3, "mode", 30, 100001, 130, &a), 0);
	ck_assert_int_eq(put_full(l3, "mode", 31, 100001, 131, &b), 0);
	static const uint32_t flags[] = { 0, SC_L3_FILL_BUFFERED, 0 };
	for (unsigned i = 0; i < 3; i++) {
		int direct = fill_direct_flag(l3, &a, 130, flags[i]);
		ck_assert_int_eq(direct, !flags[i]);
		int fd = object_fd(&a), fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
		ck_assert_msg(fd >= 0, "fill %u: the file is not kept", i);
		ck_assert_msg(fl >= 0 && !!(fl & O_DIRECT) == direct && !(fl & O_NONBLOCK),
			      "fill %u (direct %d): the file's flags are %#x", i, direct, fl);
	}
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.fills_kept, st0.fills_kept + 2); /* one file, switched twice */

	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int rc = sc_test_refuse_setfl(O_DIRECT);
		if (rc)
			_exit(rc);
		size_t cap = 102400;
		uint8_t *dst = aligned_alloc(4096, cap), *want = malloc(100001);
		fill_bytes(want, 100001, 131);
		struct sc_l3_fill_req r = { .loc = &b, .dst = dst, .dst_bytes = cap }, *rp = &r, *done;
		if (sc_l3_fill_submit(l3, &rp, 1) != 1 || sc_l3_fill_reap(l3, &done, 1, -1) != 1)
			_exit(22);
		if (r.result)
			_exit(23); /* the fill failed instead of reading buffered */
		if (r.direct || memcmp(dst, want, 100001))
			_exit(24);
		int fd = object_fd(&b), fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
		_exit(fl >= 0 && !(fl & (O_DIRECT | O_NONBLOCK)) ? 0 : 25);
	}
	int ex = sc_test_child_status(pid, "no seccomp filter: the refused switch is not tried");
	ck_assert_msg(ex <= 0, "the child: exit %d (78: no refusal; 22: no fill; 23: the fill failed; 24: reported direct "
		      "or wrong bytes; 25: the kept file's flags)", ex);
	sc_l3_close(l3);
}
END_TEST

/* Drop CAP_IPC_LOCK from this process's effective set: RLIMIT_MEMLOCK binds io_uring's
 * registrations even for root. 0, or -1. */
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d) ? -1 : 0;
}

/* A process that may lock no more memory (RLIMIT_MEMLOCK lowered to 0 after its ring was made, no
 * CAP_IPC_LOCK): the ring can register neither the memory given to sc_l3_register_memory nor,
 * again, its own header buffers, and fills read with plain reads, exact — a buffered fill's header
 * read too. (In a child: the limit and the capability are the process's.) */
START_TEST(a_process_that_may_lock_no_memory_fills_with_plain_reads)
{
	/* no kept files: every fill reads its header */
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "nolock", 10, 70000, 140, &loc), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		size_t cap = 73728;
		uint8_t *dst = aligned_alloc(4096, cap), *want = malloc(loc.payload_bytes), *page = aligned_alloc(4096, 4096);
		struct io_uring probe;
		/* the rings first (their memory counts against the limit too), then no more locking */
		if (!dst || !want || !page || drop_ipc_lock() || io_uring_queue_init(2, &probe, 0))
			_exit(20);
		fill_bytes(want, loc.payload_bytes, 140);
		if (sc_l3_fill(l3, &loc, dst, cap, 0) || memcmp(dst, want, loc.payload_bytes))
			_exit(20);
		struct rlimit none = { 0, 0 };
		if (setrlimit(RLIMIT_MEMLOCK, &none))
			_exit(20);
		struct iovec iov = { page, 4096 };
		int reg = io_uring_register_buffers(&probe, &iov, 1);
		io_uring_queue_exit(&probe);
		if (reg == 0)
			_exit(21); /* the kernel allowed a registration */
		if (sc_l3_register_memory(l3, dst, cap))
			_exit(22);
		for (uint32_t flags = SC_L3_FILL_BUFFERED;; flags = 0) {
			memset(dst, 0, cap);
			if (sc_l3_fill(l3, &loc, dst, cap, flags) || memcmp(dst, want, loc.payload_bytes))
				_exit(flags ? 23 : 24);
			if (!flags)
				break;
		}
		_exit(0);
	}
	int ws;
	ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 20) {
		sc_skip("a_process_that_may_lock_no_memory_fills_with_plain_reads: no ring under RLIMIT_MEMLOCK here");
	} else {
		ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
			      "the child: status %#x (exit 21: a registration was allowed; 22: register_memory; "
			      "23: the buffered fill failed or was wrong; 24: the other fill)",
			      ws);
	}
	sc_l3_close(l3);
}
END_TEST

/* A lone fill (nothing else on the ring) opens and stats its file with system calls of its own:
 * nothing to overlap, and an open or statx on the ring is one more trip (the statx always goes to
 * io-wq). Fills submitted together open on the ring. Seen in the ring's submission entries, which
 * keep what was last prepared in them. */
static int ring_count_opcode(struct l3_ring *r, uint8_t op)
{
	int n = 0;
	for (unsigned i = 0; i < r->ring.sq.ring_entries; i++)
		n += r->ring.sq.sqes[i].opcode == op;
	return n;
}

static int ring_has_opcode(struct l3_ring *r, uint8_t op)
{
	return ring_count_opcode(r, op) > 0;
}

/* Submit the @n fills of @rp together and reap them all. */
static void fill_all(struct sc_l3 *l3, struct sc_l3_fill_req **rp, unsigned n)
{
	struct sc_l3_fill_req *done[8];
	ck_assert_uint_le(n, 8);
	ck_assert_int_eq(sc_l3_fill_submit(l3, rp, n), (int)n);
	for (unsigned got = 0; got < n;) {
		int k = sc_l3_fill_reap(l3, done, n, -1);
		ck_assert_int_gt(k, 0);
		got += (unsigned)k;
	}
}

/* A ring sweeps its idle kept files (an fstat each) at most once a second: a fill that comes
 * sooner after the last sweep makes none; a removal through the handle sweeps at once. */
START_TEST(kept_files_are_swept_at_most_once_a_second_and_at_once_after_a_removal)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location x, y;
	ck_assert_int_eq(put_full(l3, "sweep", 40, 50000, 71, &x), 0);
	ck_assert_int_eq(put_full(l3, "sweep", 41, 50000, 72, &y), 0);
	check_fill(l3, &x, 71, 0);
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_gt(r->kept_sets, 0);
	ck_assert_uint_ne(r->kept_swept_ns, 0); /* the ring's first fill swept */
	for (int k = 0; k < 20; k++) {
		uint64_t t0 = r->kept_swept_ns;
		check_fill(l3, &y, 72, 0);
		uint64_t t1 = r->kept_swept_ns;
		ck_assert_msg(t1 == t0 || t1 - t0 >= SHM_NS_PER_SEC, "fill %d swept %llu ns after the last sweep", k,
			      (unsigned long long)(t1 - t0));
	}
	uint64_t t0 = r->kept_swept_ns;
	ck_assert_int_eq(sc_l3_evict_to(l3, 0), 2); /* both removed through the handle */
	ck_assert_uint_eq(r->kept_swept_gen, atomic_load(&l3->kept_gen)); /* swept at once */
	ck_assert_uint_ne(r->kept_swept_ns, t0);
	for (unsigned i = 0; i < r->kept_sets * L3_KEPT_WAYS; i++)
		ck_assert_int_lt(r->kept[i].fd, 0); /* both kept files closed */
	sc_l3_close(l3);
}
END_TEST

/* A ring's completion queue has room for a completion of every read its reading fills can have in
 * flight (a header and L3_MAX_CHUNKS chunks for each of queue_depth fills) and of a close for every
 * fill slot (what more completes at once, the kernel keeps in its overflow list). 123 is a depth
 * where leaving out the headers' share crosses a power of two (the kernel rounds the size up); 978
 * is the deepest whose need fits the kernel's largest queue, 65536 (the size asked is clamped). */
START_TEST(a_ring_s_completion_queue_holds_every_read_in_flight)
{
	static const uint32_t depth[] = { 0, 123, 978 };
	uint32_t qd = depth[_i];
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .queue_depth = qd });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "cq", 40, 50000, 7, &loc), 0);
	check_fill(l3, &loc, 7, 0);
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->io_depth, qd ? qd : 64);
	ck_assert_uint_eq(r->depth, 2 * r->io_depth);
	uint64_t need = (uint64_t)r->io_depth * (L3_MAX_CHUNKS + 1) + r->depth;
	ck_assert_msg(r->ring.cq.ring_entries >= need, "queue depth %u: a CQ of %u entries for %llu completions",
		      r->io_depth, r->ring.cq.ring_entries, (unsigned long long)need);
	sc_l3_close(l3);
}
END_TEST

START_TEST(a_lone_fill_opens_its_file_itself_and_fills_together_open_on_the_ring)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc[3];
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(put_full(l3, "lone", 40 + i, 50000, 150 + i, &loc[i]), 0);
	for (unsigned i = 0; i < 2; i++)
		check_fill(l3, &loc[i], 150 + i, i ? SC_L3_FILL_BUFFERED : 0); /* each alone, on this handle's new ring */
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	ck_assert(ring_has_opcode(r, IORING_OP_READ) || ring_has_opcode(r, IORING_OP_READ_FIXED) ||
		  ring_has_opcode(r, IORING_OP_READV)); /* the entries kept the fills' reads */
	ck_assert_msg(!ring_has_opcode(r, IORING_OP_OPENAT2) && !ring_has_opcode(r, IORING_OP_STATX),
		      "a lone fill opened its file on the ring");
	/* two together: the opens are on the ring */
	struct sc_l3_fill_req req[2], *rp[2];
	uint8_t *dst[2];
	for (unsigned i = 0; i < 2; i++) {
		dst[i] = abuf(50000);
		req[i] = (struct sc_l3_fill_req){ .loc = &loc[i + 1], .dst = dst[i], .dst_bytes = 53248 };
		rp[i] = &req[i];
	}
	fill_all(l3, rp, 2);
	for (unsigned i = 0; i < 2; i++) {
		uint8_t *want = malloc(50000);
		fill_bytes(want, 50000, 151 + i);
		ck_assert_int_eq(req[i].result, 0);
		ck_assert(memcmp(dst[i], want, 50000) == 0);
		free(want);
		free(dst[i]);
	}
	ck_assert(ring_has_opcode(r, IORING_OP_OPENAT2) && ring_has_opcode(r, IORING_OP_STATX));
	sc_l3_close(l3);
}
END_TEST

/* Fills submitted together open their files on the ring; the one whose open got descriptor 0
 * (standard input closed) is read like any other, and its file closed after it. */
START_TEST(a_file_opened_on_the_ring_as_descriptor_0_is_read)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc[2];
	for (unsigned i = 0; i < 2; i++)
		ck_assert_int_eq(put_full(l3, "zr", 70 + i, 30000, 170 + i, &loc[i]), 0);
	check_fill(l3, &loc[0], 170, 0); /* the thread's ring exists: its descriptors are taken */
	ck_assert_int_eq(close(0), 0);
	struct sc_l3_fill_req req[2], *rp[2];
	for (unsigned i = 0; i < 2; i++) {
		req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = abuf(32768), .dst_bytes = 32768 };
		rp[i] = &req[i];
	}
	fill_all(l3, rp, 2);
	ck_assert(ring_has_opcode(l3_ring_find(l3), IORING_OP_OPENAT2));
	for (unsigned i = 0; i < 2; i++) {
		uint8_t *w = malloc(30000);
		fill_bytes(w, 30000, 170 + i);
		ck_assert_msg(req[i].result == 0, "fill %u: %s", i, sc_strerror(req[i].result));
		ck_assert(memcmp(req[i].dst, w, 30000) == 0);
		free(w), free(req[i].dst);
	}
	errno = 0;
	ck_assert_int_eq(fcntl(0, F_GETFD), -1); /* not kept: closed after its fill */
	ck_assert_int_eq(errno, EBADF);
	sc_l3_close(l3);
}
END_TEST

/* An object file cut inside its header block, read O_DIRECT, whose combined first read the kernel
 * refuses (the test build's l3_test_refuse_direct): the header is read again buffered, up to the
 * file's end and no further (a read of 0 bytes ends it), and the object is corrupt: -EBADMSG,
 * quarantined. */
START_TEST(a_header_cut_short_read_again_buffered_ends_at_the_files_end)
{
	struct sc_l3 *l3 = open_l3_direct();
	if (!l3)
		return;
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "cut", 90, 20000, 190, &loc), 0);
	char path[256];
	obj_path(&loc, path, sizeof(path));
	ck_assert_int_eq(truncate(path, 100), 0);
	atomic_store(&l3_test_refuse_direct, 1);
	uint8_t *dst = abuf(24576);
	struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = 24576 }, *rp = &r, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, 10 * 1000000000ll), 1);
	ck_assert_int_eq(atomic_load(&l3_test_refuse_direct), 0);
	ck_assert_int_eq(r.result, -EBADMSG);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(count_dir("quarantine"), 1);
	free(dst);
	sc_l3_close(l3);
}
END_TEST

/* A child of this test with its own ring of @l3 (it filled @loc, seed @seed, once): 0 in the
 * child, its pid in the parent. */
static pid_t fork_with_ring(struct sc_l3 *l3, const struct sc_location *loc, unsigned seed)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		check_fill(l3, loc, seed, 0);
	return pid;
}

/* A submission the kernel refuses (io_uring_enter fails: here -EAGAIN, from a seccomp filter in a
 * child): sc_l3_fill_submit still takes the fills it was given and says how many (their reads
 * stay queued on the ring for the next submission); called with none, it reports the failure to
 * submit what is queued. */
START_TEST(a_refused_submission_takes_the_fills_or_reports_the_error)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "enter", 13, 20000, 83, &loc), 0);
	pid_t pid = fork_with_ring(l3, &loc, 83);
	if (pid == 0) {
		if (sc_test_refuse_syscall(__NR_io_uring_enter, SECCOMP_RET_ERRNO | EAGAIN))
			_exit(77);
		struct sc_l3_fill_req r = { .loc = &loc, .dst = abuf(20480), .dst_bytes = 20480 }, *rp = &r;
		int taken = sc_l3_fill_submit(l3, &rp, 1), again = sc_l3_fill_submit(l3, NULL, 0);
		_exit((taken == 1 ? 0 : 1) | (again == -EAGAIN ? 0 : 2));
	}
	int st = sc_test_child_status(pid, "no seccomp filter: a refused submission is not tried");
	ck_assert_msg(st <= 0, "the fill not taken (%d); the empty submission's error not reported (%d)", st & 1,
		      st >> 1 & 1);
	sc_l3_close(l3);
}
END_TEST

/* A fill opened on the ring whose statx fails: ESTALE (a network filesystem's name gone under the
 * open) is a miss; any other error is the fill's result. The other fill is served, nothing is
 * quarantined. (The failures are the test build's: l3_test_statx_res, the next statx.) */
START_TEST(a_failed_stat_on_the_ring_is_a_miss_or_its_error)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc[2];
	for (unsigned i = 0; i < 2; i++)
		ck_assert_int_eq(put_full(l3, "stx", 60 + i, 40000, 160 + i, &loc[i]), 0);
	static const int fail[] = { -ESTALE, -EACCES, -ENOMEM }, want[] = { -ENOENT, -EACCES, -ENOMEM };
	for (unsigned f = 0; f < 3; f++) {
		atomic_store(&l3_test_statx_res, fail[f]);
		struct sc_l3_fill_req req[2], *rp[2];
		uint8_t *dst[2];
		for (unsigned i = 0; i < 2; i++) {
			dst[i] = abuf(40960);
			req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = dst[i], .dst_bytes = 40960 };
			rp[i] = &req[i];
		}
		fill_all(l3, rp, 2);
		ck_assert_int_eq(atomic_load(&l3_test_statx_res), 0);
		/* one of the two statx failed: that fill ends with the error, the other is served */
		int bad = req[0].result ? 0 : 1;
		ck_assert_msg(req[bad].result == want[f], "statx %d: the fill returned %d", fail[f], req[bad].result);
		ck_assert_int_eq(req[!bad].result, 0);
		uint8_t *w = malloc(40000);
		fill_bytes(w, 40000, 160 + (unsigned)!bad);
		ck_assert(memcmp(dst[!bad], w, 40000) == 0);
		free(w), free(dst[0]), free(dst[1]);
		ck_assert_int_eq(count_dir("quarantine"), 0);
		for (unsigned i = 0; i < 2; i++)
			check_fill(l3, &loc[i], 160 + i, 0);
	}
	sc_l3_close(l3);
}
END_TEST

/* Every corruption of a file opened on the ring (a fill submitted beside another: its open and
 * statx go to the ring, and what the statx says, size and inode, is what the fill judges): found,
 * the object quarantined (its name still names the inode the statx saw), the other fill served;
 * buffered and O_DIRECT. */
START_TEST(every_corruption_of_a_file_opened_on_the_ring_is_quarantined)
{
	int quarantined = 0;
	for (int direct = 0; direct < 2; direct++)
		for (int how = 0; how < C_COUNT; how++) {
			struct sc_l3_opts o = { .o_direct = direct ? SC_L3_ODIRECT_ON : SC_L3_ODIRECT_OFF,
						.fd_cache = SC_L3_FD_CACHE_NONE };
			struct sc_l3 *l3 = open_l3(&o);
			struct sc_location loc[2];
			uint32_t ntok = 300u + (uint32_t)(how + C_COUNT * direct);
			ck_assert_int_eq(put_full(l3, "ok", ntok, 30000, 7u, &loc[0]), 0);
			ck_assert_int_eq(put_full(l3, "q", ntok, 20000, 100u + ntok, &loc[1]), 0);
			corrupt(&loc[1], how);
			uint8_t *dst[2] = { abuf(32768), abuf(32768) };
			struct sc_l3_fill_req req[2], *rp[2];
			for (int i = 0; i < 2; i++) {
				req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = dst[i], .dst_bytes = 32768 };
				rp[i] = &req[i];
			}
			fill_all(l3, rp, 2);
			struct l3_ring *r = l3_ring_find(l3);
			ck_assert_ptr_nonnull(r);
			ck_assert(ring_has_opcode(r, IORING_OP_OPENAT2) && ring_has_opcode(r, IORING_OP_STATX));
			ck_assert_int_eq(req[0].result, 0);
			ck_assert_msg(req[1].result == -EBADMSG, "corruption %d (%s): fill returned %d", how,
				      direct ? "direct" : "buffered", req[1].result);
			ck_assert_int_eq(count_dir("quarantine"), ++quarantined);
			ck_assert_int_eq(sc_l3_lookup(l3, loc[1].digest, &loc[1]), -ENOENT);
			check_fill(l3, &loc[0], 7u, 0);
			free(dst[0]), free(dst[1]);
			sc_l3_close(l3);
		}
}
END_TEST

/* Fills submitted beyond the reading slots wait, and their files are opened on the ring meanwhile,
 * every one of them (as fio opens its files before it reads): with 2 reading slots, 4 fills
 * submitted at once put 4 opens and 4 stats on the ring before any read. */
START_TEST(fills_that_wait_for_a_slot_all_open_their_files_meanwhile)
{
	struct sc_l3 *put = open_l3(NULL);
	enum { N = 4, SZ = 20000 };
	struct sc_location loc[N];
	struct sc_l3_fill_req req[N], *rp[N], *done[N];
	for (unsigned i = 0; i < N; i++) {
		ck_assert_int_eq(put_full(put, "waitopen", 70 + i, SZ, 230 + i, &loc[i]), 0);
		req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = abuf(SZ), .dst_bytes = 20480 };
		rp[i] = &req[i];
	}
	sc_l3_close(put);
	/* a handle of its own: its ring is made by these fills (a put's writes go on a ring too) */
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .queue_depth = 2, .fd_cache = SC_L3_FD_CACHE_NONE });
	ck_assert_ptr_null(l3_ring_find(l3));
	ck_assert_int_eq(sc_l3_fill_submit(l3, rp, N), N);
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->io_depth, 2);
	ck_assert_int_eq(ring_count_opcode(r, IORING_OP_OPENAT2), N);
	ck_assert_int_eq(ring_count_opcode(r, IORING_OP_STATX), N);
	for (int got = 0; got < N;) {
		int k = sc_l3_fill_reap(l3, done, N, -1);
		ck_assert_int_gt(k, 0);
		got += k;
	}
	for (unsigned i = 0; i < N; i++) {
		uint8_t *want = malloc(SZ);
		fill_bytes(want, SZ, 230 + i);
		ck_assert_int_eq(req[i].result, 0);
		ck_assert(memcmp(req[i].dst, want, SZ) == 0);
		free(want);
		free(req[i].dst);
	}
	sc_l3_close(l3);
}
END_TEST

/* A location that does not describe the object (another kind, first section or payload size) is
 * refused with -EINVAL also when the object's file is kept: a kept file's header stands for the
 * location it was verified against only. Nothing is quarantined, and the right location still
 * fills from the kept file. */
START_TEST(a_wrong_location_is_refused_through_a_kept_file_too)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4 });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "wrongkept", 12, 20000, 160, &loc), 0);
	uint8_t *dst = abuf(24576);
	for (int k = 0; k < 3; k++) {
		check_fill(l3, &loc, 160, 0);
		ck_assert_msg(object_fd(&loc) >= 0, "case %d: the object's file is not kept", k);
		struct sc_location bad = loc;
		if (k == 0)
			bad.kind = SC_PAYLOAD_RECURRENT_ONLY;
		else if (k == 1)
			bad.sec_len[0] -= 4096;
		else
			bad.payload_bytes -= 4096;
		int rc = sc_l3_fill(l3, &bad, dst, 24576, 0);
		ck_assert_msg(rc == -EINVAL, "case %d: %s", k, sc_strerror(rc));
	}
	struct sc_l3_stats s0, s1;
	sc_l3_stats(l3, &s0);
	ck_assert_uint_eq(s0.quarantined, 0);
	check_fill(l3, &loc, 160, 0);
	check_fill(l3, &loc, 160, 0);
	sc_l3_stats(l3, &s1);
	ck_assert_uint_eq(s1.fills_kept, s0.fills_kept + 1);
	free(dst);
	sc_l3_close(l3);
}
END_TEST

/* Descriptor 0 is an object file's like any other (see the test above): opened as 0 and not kept,
 * it is closed when the fill ends; kept as 0 and the least recently used kept file when the handle
 * is at its limit of kept files, it is the one closed for the new one. */
START_TEST(an_object_file_as_descriptor_0_is_closed_when_not_kept_or_when_oldest)
{
	struct sc_l3 *none = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_l3 *one = open_l3(&(struct sc_l3_opts){ .fd_cache = 1 });
	struct sc_location a, b, c;
	ck_assert_int_eq(put_full(none, "zero0", 16, 20000, 170, &a), 0);
	ck_assert_int_eq(put_full(none, "zero0", 17, 20000, 171, &b), 0);
	ck_assert_int_eq(put_full(none, "zero0", 18, 20000, 172, &c), 0);
	check_fill(none, &a, 170, 0); /* both rings exist: their descriptors are taken */
	check_fill(one, &a, 170, 0);  /* a kept by `one` */
	ck_assert_int_ge(object_fd(&a), 3);
	ck_assert_int_eq(close(0), 0);
	ck_assert_int_eq(sc_test_lowest_free_fd(), 0);
	check_fill(none, &b, 171, 0); /* opened as 0, not kept */
	errno = 0;
	ck_assert_msg(fcntl(0, F_GETFD) == -1 && errno == EBADF, "descriptor 0 still open after a fill that keeps no file");
	check_fill(one, &b, 171, 0); /* opened as 0; a, the oldest, closed for it */
	ck_assert_int_eq(object_fd(&b), 0);
	ck_assert_int_eq(object_fd(&a), -1);
	check_fill(one, &c, 172, 0); /* b (descriptor 0), the oldest, closed for c */
	errno = 0;
	ck_assert_msg(fcntl(0, F_GETFD) == -1 && errno == EBADF, "the oldest kept file (descriptor 0) still open");
	ck_assert_int_ge(object_fd(&c), 0);
	sc_l3_close(one);
	sc_l3_close(none);
}
END_TEST

/* The fill time model's classes (the top of lib/l3/fill.c): a fill under 256 KiB (nothing ahead)
 * is a sample of the fixed cost, one of 1 MiB or more a sample of the time per byte, one between
 * (256 KiB itself included, 1 MiB excluded) neither. */
START_TEST(the_fill_model_takes_its_samples_from_the_documented_sizes)
{
	static const struct {
		size_t bytes;
		int fixed, per_byte; /* a sample of either */
	} f[] = {
		{ (1u << 20) - 4096, 0, 0 }, { 256u << 10, 0, 0 }, { 1u << 20, 0, 1 }, { (256u << 10) - 4096, 1, 0 },
	};
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location loc[4];
	for (unsigned i = 0; i < 4; i++)
		ck_assert_int_eq(put_full(l3, "model", 50 + i, f[i].bytes, 180 + i, &loc[i]), 0);
	uint32_t samples = 0;
	int fixed = 0, per_byte = 0;
	ck_assert_uint_eq(atomic_load(&l3->est_samples), 0);
	for (unsigned i = 0; i < 4; i++) {
		check_fill(l3, &loc[i], 180 + i, 0);
		samples += (uint32_t)(f[i].fixed + f[i].per_byte);
		fixed |= f[i].fixed;
		per_byte |= f[i].per_byte;
		ck_assert_msg(atomic_load(&l3->est_samples) == samples, "a fill of %zu bytes: %u samples, %u expected",
			      f[i].bytes, (unsigned)atomic_load(&l3->est_samples), samples);
		ck_assert_msg((atomic_load(&l3->est_fixed_ns) != 0) == fixed, "a fill of %zu bytes: fixed cost %llu",
			      f[i].bytes, (unsigned long long)atomic_load(&l3->est_fixed_ns));
		ck_assert_msg((atomic_load(&l3->est_ps_per_byte) != 0) == per_byte, "a fill of %zu bytes: %llu ps per byte",
			      f[i].bytes, (unsigned long long)atomic_load(&l3->est_ps_per_byte));
	}
	sc_l3_close(l3);
}
END_TEST

/* The SQE of this ring's last submission that reads into @dst, or NULL. */
static const struct io_uring_sqe *ring_sqe_into(struct l3_ring *r, const void *dst)
{
	for (unsigned i = 0; i < r->ring.sq.ring_entries; i++)
		if (r->ring.sq.sqes[i].addr == (uint64_t)(uintptr_t)dst &&
		    (r->ring.sq.sqes[i].opcode == IORING_OP_READ || r->ring.sq.sqes[i].opcode == IORING_OP_READ_FIXED))
			return &r->ring.sq.sqes[i];
	return NULL;
}

/* Registered memory: a fill whose destination is exactly a registered range (its first byte to
 * its last) reads it as a registered buffer. When a later range is refused by the kernel
 * (PROT_NONE memory) the ring keeps only its header buffers, and a fill into the range that was
 * registered before reads it with a plain read, exact (nothing of the old registration is used). */
START_TEST(registered_ranges_are_used_to_their_bounds_and_not_after_a_refusal)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc;
	enum { N = 20000 };
	ck_assert_int_eq(put_full(l3, "regb", 14, N, 190, &loc), 0);
	uint8_t *dst = abuf(N), *want = malloc(N);
	fill_bytes(want, N, 190);
	ck_assert_int_eq(sc_l3_register_memory(l3, dst, N), 0);
	ck_assert_int_eq(sc_l3_fill(l3, &loc, dst, N, SC_L3_FILL_BUFFERED), 0);
	ck_assert(memcmp(dst, want, N) == 0);
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	ck_assert_msg(r->reg_ok && r->nreg == 2, "the range is not registered (%d, %d)", r->reg_ok, r->nreg);
	const struct io_uring_sqe *sqe = ring_sqe_into(r, dst);
	ck_assert_ptr_nonnull(sqe);
	ck_assert_msg(sqe->opcode == IORING_OP_READ_FIXED && sqe->len == N, "the payload read: opcode %u, %u bytes",
		      sqe->opcode, sqe->len);

	uint8_t *res = mmap(NULL, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert(res != MAP_FAILED);
	ck_assert_int_eq(sc_l3_register_memory(l3, res, 1 << 20), 0);
	memset(dst, 0, N);
	int rc = sc_l3_fill(l3, &loc, dst, N, SC_L3_FILL_BUFFERED);
	ck_assert_msg(rc == 0, "fill: %s", sc_strerror(rc));
	ck_assert(memcmp(dst, want, N) == 0);
	ck_assert_msg(r->reg_ok && r->nreg == 1, "registered after the refusal: %d, %d", r->reg_ok, r->nreg);
	sc_l3_close(l3);
	munmap(res, 1 << 20);
	free(dst);
	free(want);
}
END_TEST

/* Registering memory: bad input (no handle, no base, no length) is -EINVAL; a range registered
 * again is not added twice; the same base with another length is a range of its own, and a fill
 * reaching past the first length reads as a registered buffer through it. */
START_TEST(a_range_registered_again_with_another_length_is_its_own)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	enum { N = 20000 };
	uint8_t *dst = abuf(2 * N);
	ck_assert_int_eq(sc_l3_register_memory(NULL, dst, N), -EINVAL);
	ck_assert_int_eq(sc_l3_register_memory(l3, NULL, N), -EINVAL);
	ck_assert_int_eq(sc_l3_register_memory(l3, dst, 0), -EINVAL);
	ck_assert_uint_eq(l3->nranges, 0);
	ck_assert_int_eq(sc_l3_register_memory(l3, dst, N), 0);
	ck_assert_int_eq(sc_l3_register_memory(l3, dst, N), 0);
	ck_assert_uint_eq(l3->nranges, 1);
	ck_assert_int_eq(sc_l3_register_memory(l3, dst, 2 * N), 0);
	ck_assert_uint_eq(l3->nranges, 2);
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "regl", 15, 2 * N, 191, &loc), 0);
	check_fill(l3, &loc, 191, SC_L3_FILL_BUFFERED); /* the ring made */
	uint8_t *want = malloc(2 * N);
	fill_bytes(want, 2 * N, 191);
	ck_assert_int_eq(sc_l3_fill(l3, &loc, dst, 2 * N, SC_L3_FILL_BUFFERED), 0);
	ck_assert(memcmp(dst, want, 2 * N) == 0);
	const struct io_uring_sqe *sqe = ring_sqe_into(l3_ring_find(l3), dst);
	ck_assert_ptr_nonnull(sqe);
	ck_assert_msg(sqe->opcode == IORING_OP_READ_FIXED && sqe->len == 2 * N, "the payload read: opcode %u, %u bytes",
		      sqe->opcode, sqe->len);
	sc_l3_close(l3);
	free(dst), free(want);
}
END_TEST

/* Eight ranges, the most a handle takes, all usable: the ring registers all eight beside its header
 * buffers (nothing past the eighth is read as a range), and a fill into the last reads it as a
 * registered buffer. */
START_TEST(eight_registered_ranges_are_all_registered)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	enum { N = 8192 };
	uint8_t *mem[8];
	for (int i = 0; i < 8; i++) {
		mem[i] = abuf(N);
		ck_assert_int_eq(sc_l3_register_memory(l3, mem[i], N), 0);
	}
	ck_assert_int_eq(sc_l3_register_memory(l3, mem[0] + 4096, 4096), -ENOSPC);
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "reg8", 16, N, 192, &loc), 0);
	uint8_t *want = malloc(N);
	fill_bytes(want, N, 192);
	ck_assert_int_eq(sc_l3_fill(l3, &loc, mem[7], N, SC_L3_FILL_BUFFERED), 0);
	ck_assert(memcmp(mem[7], want, N) == 0);
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	ck_assert_msg(r->reg_ok && r->nreg == 9, "registered: %d, %d buffers", r->reg_ok, r->nreg);
	const struct io_uring_sqe *sqe = ring_sqe_into(r, mem[7]);
	ck_assert_ptr_nonnull(sqe);
	ck_assert_msg(sqe->opcode == IORING_OP_READ_FIXED, "the payload read: opcode %u", sqe->opcode);
	sc_l3_close(l3);
	for (int i = 0; i < 8; i++)
		free(mem[i]);
	free(want);
}
END_TEST

/* Descriptors of this process open on @loc's object file. */
static int object_fds(const struct sc_location *loc)
{
	int first;
	return object_fds_at(loc, &first);
}

/* A fill held in a read: a fanotify permission event on its object's file holds the event number
 * @at (0: the first read of the file after held_watch) until held_release. Only a file opened
 * after the watch began reports its reads, and a read made inline at submission would hold the
 * submitting thread itself: the held read must be a payload read io-wq makes (256 KiB or more,
 * buffered), on a file opened since the watch. While it is held, the watcher has a descriptor of
 * the file too (the event's); before, the descriptors of the events it answered may still be open
 * for a moment, so a count of the watched file's descriptors is exact only while one is held. */
struct held_fill {
	struct sc_fan fan;
	int pipe[2], at;
	atomic_int holding; /* the watcher has the event and holds it */
	atomic_int gave_up; /* the watcher let it go after 20 s: nobody released it */
	struct sc_l3_fill_req req;
};

static void hold_at(void *ctx, int nth)
{
	struct held_fill *h = ctx;
	char c;
	if (nth != h->at)
		return;
	atomic_store(&h->holding, 1);
	struct pollfd p = { h->pipe[0], POLLIN, 0 };
	if (poll(&p, 1, 20000) == 0) { /* a read made inline holds the thread that would release it */
		atomic_store(&h->gave_up, 1);
		return;
	}
	if (read(h->pipe[0], &c, 1) != 1)
		abort();
}

/* Watch @loc's file, to hold its read number @at: 0, or 1 when there are no permission events
 * here (SKIP said). */
static int held_watch(struct held_fill *h, const struct sc_location *loc, int at)
{
	char path[256];
	obj_path(loc, path, sizeof(path));
	h->at = at;
	atomic_store(&h->holding, 0);
	atomic_store(&h->gave_up, 0);
	ck_assert_int_eq(pipe2(h->pipe, O_CLOEXEC), 0);
	if (sc_fan_start_or_skip(&h->fan, path, FAN_ACCESS_PERM, hold_at, h)) {
		close(h->pipe[0]), close(h->pipe[1]);
		return 1;
	}
	return 0;
}

/* Submit the fill of @loc whose read will be held, and wait (at most 10 s) until it is held. */
static void held_submit(struct held_fill *h, struct sc_l3 *l3, const struct sc_location *loc)
{
	size_t cap = (loc->payload_bytes + 4095) / 4096 * 4096;
	h->req = (struct sc_l3_fill_req){ .loc = loc, .dst = abuf(cap), .dst_bytes = cap };
	struct sc_l3_fill_req *rp = &h->req;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	for (int i = 0; i < 10000 && !atomic_load(&h->holding); i++)
		sc_test_pause_ms(1);
	ck_assert_msg(atomic_load(&h->holding), "the fill's read was not held in 10 s");
}

/* The held fill ended: its bytes are seed @seed's; stop watching. */
static void held_end(struct held_fill *h, unsigned seed)
{
	ck_assert_int_eq(h->req.result, 0);
	uint8_t *w = malloc(h->req.loc->payload_bytes);
	fill_bytes(w, h->req.loc->payload_bytes, seed);
	ck_assert(memcmp(h->req.dst, w, h->req.loc->payload_bytes) == 0);
	free(w), free(h->req.dst);
	sc_fan_stop(&h->fan);
	ck_assert_int_gt(h->fan.acted, h->at);
	ck_assert_msg(!atomic_load(&h->gave_up), "the held read was let go by the watcher, not released");
	close(h->pipe[0]), close(h->pipe[1]);
}

/* Let the held read go, reap its fill (seed @seed's bytes expected) and stop watching. */
static void held_release(struct held_fill *h, struct sc_l3 *l3, unsigned seed)
{
	struct sc_l3_fill_req *done;
	ck_assert_int_eq(write(h->pipe[1], "g", 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_ptr_eq(done, &h->req);
	held_end(h, seed);
}

/* A payload read io-wq makes: buffered, of exactly 256 KiB (lib/l3/fill.c's L3_ASYNC_MIN, the least
 * it punts there; one byte less is read inline at submission, which a hold would block). */
enum { HELD_BYTES = 256 << 10 };

/* A reap whose time runs out while a fill's read is still held returns 0 (nothing done, no
 * error), again and again; once the read goes on, the fill is reaped with its bytes. */
START_TEST(a_reap_whose_time_runs_out_returns_nothing_done)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "held", 16, HELD_BYTES, 84, &loc), 0);
	check_fill(l3, &loc, 84, 0); /* the ring made */
	struct held_fill h;
	if (held_watch(&h, &loc, 1)) { /* its header read (inline), then its payload read */
		sc_l3_close(l3);
		return;
	}
	held_submit(&h, l3, &loc);
	struct sc_l3_fill_req *done;
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, 20 * 1000000ll), 0);
	ck_assert_uint_eq(sc_l3_fill_inflight(l3), 1);
	held_release(&h, l3, 84);
	sc_l3_close(l3);
}
END_TEST

/* A reap returns at most @max fills, the rest waiting for the next reap; a lone fill of a thread
 * whose ring is full of its batch fills (every slot taken: queue_depth 2, 4 slots) waits for one
 * of them to end and is served, and the batch is still reaped whole after it; a fill with a
 * deadline (a restore's) waits for a slot the same way. */
START_TEST(reaps_take_at_most_max_and_a_lone_fill_waits_for_a_full_ring)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE, .queue_depth = 2 });
	enum { N = 4 };
	struct sc_location loc[N + 1];
	for (unsigned i = 0; i <= N; i++)
		ck_assert_int_eq(put_full(l3, "full", 30 + i, 20000, 210 + i, &loc[i]), 0);
	struct sc_l3_fill_req req[N], *rp[N], *done[N];
	for (unsigned i = 0; i < N; i++) {
		req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = abuf(20480), .dst_bytes = 20480 };
		rp[i] = &req[i];
	}
	ck_assert_int_eq(sc_l3_fill_submit(l3, rp, N), N);
	ck_assert_uint_eq(l3_ring_find(l3)->depth, N); /* every slot taken */
	check_fill(l3, &loc[N], 210 + N, 0);
	while (l3_ring_find(l3)->inflight) /* every batch fill ended, none reaped */
		ck_assert_int_eq(sc_l3_fill_reap(l3, done, 0, -1), 0);
	unsigned got = 0;
	for (int k = 0; k < N; k++) {
		ck_assert_int_eq(sc_l3_fill_reap(l3, done, 1, 0), 1);
		ck_assert_int_eq(done[0]->result, 0);
		got |= 1u << (done[0] - req);
	}
	ck_assert_uint_eq(got, (1u << N) - 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, done, 1, 0), 0);
	for (unsigned i = 0; i < N; i++) {
		uint8_t *w = malloc(20000);
		fill_bytes(w, 20000, 210 + i);
		ck_assert(memcmp(req[i].dst, w, 20000) == 0);
		free(w);
	}
	/* the same for a fill with a deadline (a restore's): every slot taken again, it waits for one */
	for (unsigned i = 0; i < N; i++)
		req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = req[i].dst, .dst_bytes = 20480 };
	ck_assert_int_eq(sc_l3_fill_submit(l3, rp, N), N);
	struct sc_l3_fill_req d = { .loc = &loc[N], .dst = abuf(20480), .dst_bytes = 20480 };
	ck_assert_int_eq(l3_fill_from_until(l3, &d, NULL, shm_now_ns() + 30 * SHM_NS_PER_SEC), 0);
	for (int n = 0; n < N;) {
		int k = sc_l3_fill_reap(l3, done, N, -1);
		ck_assert_int_gt(k, 0);
		for (int j = 0; j < k; j++)
			ck_assert_int_eq(done[j]->result, 0);
		n += k;
	}
	for (unsigned i = 0; i < N; i++)
		free(req[i].dst);
	free(d.dst);
	sc_l3_close(l3);
}
END_TEST

/* An eviction through one handle closes that handle's idle kept files at once, and only its: a
 * kept file of another handle the same thread uses stays open (it is that handle's to judge). */
START_TEST(an_eviction_through_one_handle_leaves_another_handles_kept_files)
{
	struct sc_l3 *a = open_l3(&(struct sc_l3_opts){ .fd_cache = 4 });
	char dir2[sizeof(tmpdir) + 8];
	snprintf(dir2, sizeof(dir2), "%s/other", tmpdir);
	ck_assert_int_eq(mkdir(dir2, 0700), 0);
	struct sc_l3 *b = NULL;
	ck_assert_int_eq(sc_l3_open(dir2, &(struct sc_l3_opts){ .fd_cache = 4 }, &b), 0);
	struct sc_location la, lb;
	ck_assert_int_eq(put_full(a, "two", 23, 20000, 91, &la), 0);
	ck_assert_int_eq(put_full(b, "two", 24, 20000, 92, &lb), 0);
	check_fill(a, &la, 91, 0);
	check_fill(b, &lb, 92, 0);
	ck_assert_int_eq(count_object_fds(), 2);
	ck_assert_int_ge(sc_l3_evict_to(a, 0), 0);
	ck_assert_int_eq(count_removed_object_fds(), 0); /* a's kept file closed with its object */
	ck_assert_int_eq(count_object_fds(), 1);         /* b's kept file open */
	check_fill(b, &lb, 92, 0);
	sc_l3_close(b);
	sc_l3_close(a);
}
END_TEST

/* A kept file is its object's alone: a fill of another location whose digest shares half of the
 * kept object's (its high word; the low word another, in the same set of the table) is a miss
 * of its own, and the kept file stays open, used by the next fill of its object. */
START_TEST(a_kept_file_serves_only_its_own_digest)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 1 });
	struct sc_location x, other;
	ck_assert_int_eq(put_full(l3, "own", 25, 20000, 93, &x), 0);
	check_fill(l3, &x, 93, 0);
	ck_assert_int_eq(object_fds(&x), 1);
	other = x;
	other.digest.lo ^= 1;
	ck_assert_int_eq(fill_rc(l3, &other), -ENOENT);
	ck_assert_int_eq(object_fds(&x), 1);
	check_fill_kept(l3, &x, 93);
	sc_l3_close(l3);
}
END_TEST

static void prep_nop(struct io_uring_sqe *sqe, unsigned i, void *ctx)
{
	(void)i, (void)ctx;
	io_uring_prep_nop(sqe);
}

/* A round of requests run side by side (l3_ring_round: fsyncs, unlinks, statx) raises the ring's
 * io-wq worker limit to its size for the round and puts the limit back after: a thread's rounds
 * never leave its io-wq at the last round's size. */
START_TEST(a_round_puts_the_io_wq_worker_limit_back)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "round", 25, 20000, 95, &loc), 0);
	check_fill(l3, &loc, 95, 0); /* the ring made */
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	unsigned before[2] = { 0, 0 }, after[2] = { 0, 0 };
	if (io_uring_register_iowq_max_workers(&r->ring, before)) {
		sc_skip("no io-wq worker limits on this kernel");
		sc_l3_close(l3);
		return;
	}
	for (unsigned n = 1; n <= 3; n++) {
		int res[3] = { -1, -1, -1 };
		ck_assert_int_eq(l3_ring_round(r, n, prep_nop, NULL, res), 0);
		for (unsigned i = 0; i < n; i++)
			ck_assert_int_eq(res[i], 0);
		ck_assert_int_eq(io_uring_register_iowq_max_workers(&r->ring, after), 0);
		ck_assert_msg(after[0] == before[0] && after[1] == before[1], "round of %u: limits %u/%u, were %u/%u", n,
			      after[0], after[1], before[0], before[1]);
	}
	sc_l3_close(l3);
}
END_TEST

/* A round larger than the ring's free SQ entries, when a submission to make room is refused: the
 * requests queued run (0 each), the others are never waited for and say -ECANCELED, and the round
 * says -EAGAIN. In a child (the seccomp filter stays with it). */
START_TEST(a_round_the_ring_cannot_take_whole_cancels_the_rest)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "rfull", 26, 20000, 96, &loc), 0);
	pid_t pid = fork_with_ring(l3, &loc, 96);
	if (pid == 0) {
		struct l3_ring *r = l3_ring_find(l3);
		unsigned sq = r->ring.sq.ring_entries, n = sq + 2;
		int *res = malloc(n * sizeof(*res));
		if (!res)
			_exit(8);
		if (refuse_plain_submissions())
			_exit(77);
		int rc = l3_ring_round(r, n, prep_nop, NULL, res), bad = rc != -EAGAIN;
		for (unsigned i = 0; i < n; i++)
			bad |= res[i] != (i < sq ? 0 : -ECANCELED) ? 2 : 0;
		_exit(bad);
	}
	int st = sc_test_child_status(pid, "no seccomp filter: a refused submission is not tried");
	ck_assert_msg(st <= 0, "status %d: the round's result (bit 1), the requests' (bit 2)", st);
	sc_l3_close(l3);
}
END_TEST

/* A fill with a deadline that ends in time is taken off its ring's list of ended fills alone (the
 * list's last, and only, entry): a batch fill submitted after it is reaped as usual. */
START_TEST(a_fill_with_a_deadline_leaves_the_ended_fills_whole)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location x, y;
	ck_assert_int_eq(put_full(l3, "dl", 26, 20000, 94, &x), 0);
	ck_assert_int_eq(put_full(l3, "dl", 27, 20000, 95, &y), 0);
	check_fill(l3, &x, 94, 0); /* the ring made */
	struct sc_l3_fill_req a = { .loc = &x, .dst = abuf(20480), .dst_bytes = 20480 };
	ck_assert_int_eq(l3_fill_from_until(l3, &a, NULL, shm_now_ns() + 30 * SHM_NS_PER_SEC), 0);
	struct sc_l3_fill_req b = { .loc = &y, .dst = abuf(20480), .dst_bytes = 20480 }, *rp = &b, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, 30 * 1000000000ll), 1);
	ck_assert_ptr_eq(done, &b);
	ck_assert_int_eq(b.result, 0);
	ck_assert_uint_eq(sc_l3_fill_inflight(l3), 0);
	free(a.dst), free(b.dst);
	sc_l3_close(l3);
}
END_TEST

/* A thread sending SIGUSR1 to the thread that started it every millisecond until stopped; the
 * signal's handler does nothing and has no SA_RESTART, so a wait it lands in returns EINTR. */
struct pester {
	pthread_t t, target;
	atomic_int stop;
};

static atomic_int usr1_handled; /* signals the handler has run for */

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&usr1_handled, 1);
}

static void *pester_run(void *arg)
{
	struct pester *p = arg;
	while (!atomic_load(&p->stop)) {
		pthread_kill(p->target, SIGUSR1);
		sc_test_pause_ms(1); /* the pace of the signals */
	}
	return NULL;
}

static void pester_start(struct pester *p)
{
	ck_assert_int_eq(sigaction(SIGUSR1, &(struct sigaction){ .sa_handler = on_usr1 }, NULL), 0);
	p->target = pthread_self();
	atomic_store(&p->stop, 0);
	ck_assert_int_eq(pthread_create(&p->t, NULL, pester_run, p), 0);
}

static void pester_stop(struct pester *p)
{
	atomic_store(&p->stop, 1);
	ck_assert_int_eq(pthread_join(p->t, NULL), 0);
}

/* A reap interrupted by signals while a fill's read is held waits on to its timeout and returns 0
 * (a signal is no error: it is not reported as one); the fill is reaped once its read goes on. */
START_TEST(a_reap_interrupted_by_signals_waits_on)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "sig", 21, HELD_BYTES, 89, &loc), 0);
	check_fill(l3, &loc, 89, 0);
	struct held_fill h;
	if (held_watch(&h, &loc, 1)) {
		sc_l3_close(l3);
		return;
	}
	held_submit(&h, l3, &loc);
	struct pester p;
	pester_start(&p);
	struct sc_l3_fill_req *done;
	int rc = sc_l3_fill_reap(l3, &done, 1, 200 * 1000000ll);
	pester_stop(&p);
	ck_assert_int_eq(rc, 0);
	held_release(&h, l3, 89);
	sc_l3_close(l3);
}
END_TEST

struct late_release {
	struct held_fill *h;
	int again; /* the close's waits refused instead of interrupted */
	atomic_int closing, closed, seen;
};

/* Once the close has begun and 50 more signals have interrupted the closing thread (or, with
 * again, the refused waits are all spent or the close returned; at most 10 s), note whether the
 * close has returned, then let the held read go. */
static void *release_late(void *arg)
{
	struct late_release *x = arg;
	for (int i = 0; i < 10000 && !atomic_load(&x->closing); i++)
		sc_test_pause_ms(1);
	int from = atomic_load(&usr1_handled);
	for (int i = 0; i < 10000 && !x->again && atomic_load(&usr1_handled) < from + 50; i++)
		sc_test_pause_ms(1);
	for (int i = 0; i < 10000 && x->again && atomic_load(&l3_test_wait_again) > 0 && !atomic_load(&x->closed); i++)
		sc_test_pause_ms(1);
	atomic_store(&x->seen, atomic_load(&x->closed));
	if (write(x->h->pipe[1], "g", 1) != 1)
		abort();
	return NULL;
}

/* A handle's close waits for a fill whose read is in flight, signals or not (its destination is
 * the caller's memory until the read ends): the close returns only after the held read went on.
 * 0: signals interrupt its waits; 1: its first three waits are refused (-EAGAIN, the kernel short
 * of resources): it waits again. */
START_TEST(a_close_interrupted_by_signals_waits_for_the_read_in_flight)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "sig", 22, HELD_BYTES, 90, &loc), 0);
	check_fill(l3, &loc, 90, 0);
	struct held_fill h;
	if (held_watch(&h, &loc, 1)) {
		sc_l3_close(l3);
		return;
	}
	held_submit(&h, l3, &loc);
	struct late_release x = { .h = &h, .again = _i == 1 };
	pthread_t t;
	struct pester p;
	if (!x.again)
		pester_start(&p);
	else
		atomic_store(&l3_test_wait_again, 3);
	ck_assert_int_eq(pthread_create(&t, NULL, release_late, &x), 0);
	atomic_store(&x.closing, 1);
	sc_l3_close(l3);
	atomic_store(&x.closed, 1);
	if (!x.again)
		pester_stop(&p);
	int refusals_left = atomic_exchange(&l3_test_wait_again, 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(!atomic_load(&x.seen), "the close returned with a read in flight");
	ck_assert_msg(!refusals_left, "the close stopped after a refused wait (%d refusals not met)", refusals_left);
	held_end(&h, 90);
}
END_TEST

static volatile sig_atomic_t yields;

static void count_yield(int sig)
{
	(void)sig;
	yields++;
}

/* A fill waits for its reads in the kernel: while its waits succeed it never yields the CPU (a
 * yield is only for a wait that failed, before it waits again). In a child where sched_yield traps
 * (a seccomp filter; the SIGSYS handler counts), fills of a small object and of one whose payload
 * read goes to io-wq make no call of it. */
START_TEST(a_fill_whose_waits_succeed_never_yields)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location a, b;
	ck_assert_int_eq(put_full(l3, "yield", 29, 20000, 122, &a), 0);
	ck_assert_int_eq(put_full(l3, "yield", 30, HELD_BYTES, 123, &b), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sigaction sa = { .sa_handler = count_yield };
		if (sigaction(SIGSYS, &sa, NULL))
			_exit(20);
		if (sc_test_refuse_syscall(__NR_sched_yield, SECCOMP_RET_TRAP))
			_exit(77);
		sched_yield();
		if (yields != 1)
			_exit(21); /* the filter does not hold */
		yields = 0;
		for (int i = 0; i < 4; i++)
			if (fill_seeded(l3, &a, 122, 0) || fill_seeded(l3, &b, 123, 0))
				_exit(22);
		_exit(yields ? 23 : 0);
	}
	int st = sc_test_child_status(pid, "no seccomp filter: yields not seen");
	ck_assert_msg(st <= 0, "the child: exit %d (20: no SIGSYS handler; 21: the filter does not hold; 22: a fill failed; 23: a fill "
		      "yielded)", st);
	sc_l3_close(l3);
}
END_TEST

/* A put's fsyncs go through the thread's ring: a wait on it that a signal interrupts (-EINTR) is
 * waited again, and the put ends as if nothing had happened. */
START_TEST(a_put_whose_waits_are_interrupted_waits_again)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location loc;
	unsigned long rounds = atomic_load(&l3_test_fsync_rounds);
	atomic_store(&l3_test_wait_errno, EINTR);
	atomic_store(&l3_test_wait_again, 3);
	int rc = put_full(l3, "eintr", 26, 30000, 97, &loc);
	int left = atomic_exchange(&l3_test_wait_again, 0);
	atomic_store(&l3_test_wait_errno, EAGAIN);
	ck_assert_msg(rc == 0, "a put whose waits were interrupted: %s", sc_strerror(rc));
	ck_assert_uint_gt(atomic_load(&l3_test_fsync_rounds), rounds); /* it waited on the ring */
	ck_assert_msg(!left, "%d interrupted waits not met", left);
	check_fill(l3, &loc, 97, 0);
	sc_l3_close(l3);
}
END_TEST

/* A fill whose request for a submission entry finds none (the queue full and its submit refused by
 * the kernel) fails with -EAGAIN; nothing is quarantined, no descriptor is left open, and the next
 * fill returns the bytes. Each of the fill's requests in turn, until a fill makes fewer requests
 * (and returns the bytes): 0 buffered (the header's read, then the chunks'), 1 O_DIRECT (the header
 * with chunk 0 in one read, then the other chunks). A put whose fsync finds none fails with
 * -EAGAIN, and the same put then stores the object. */
START_TEST(a_fill_or_put_finding_no_submission_entry_fails_cleanly)
{
	struct sc_l3 *l3 = _i ? open_l3_direct() : open_l3(&(struct sc_l3_opts){ .o_direct = SC_L3_ODIRECT_OFF });
	if (!l3)
		return;
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "nosqe", 27, (5 << 20) + 1000, 98, &loc), 0);
	check_fill(l3, &loc, 98, 0);
	struct sc_l3_stats st0, st;
	ck_assert_int_eq(sc_l3_stats(l3, &st0), 0);
	int fds = sc_test_open_fds();
	unsigned k, failed = 0;
	for (k = 0; k < 64; k++) {
		atomic_store(&l3_test_no_sqe, 1ull << k);
		int rc = fill_seeded(l3, &loc, 98, 0);
		uint64_t left = atomic_exchange(&l3_test_no_sqe, 0);
		ck_assert_msg(rc == 0 || (!left && rc == -EAGAIN), "request %u: %s", k, sc_strerror(rc));
		failed += rc != 0;
		check_fill(l3, &loc, 98, 0);
		if (left)
			break; /* the fill made fewer requests */
	}
	ck_assert_msg(k >= 3 && k < 64, "a fill of 5 MiB asked for %u entries", k);
	ck_assert_uint_eq(failed, k);
	ck_assert_int_eq(sc_test_open_fds(), fds);
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	/* a put's fsync round: the put fails, and the same put then stores the object */
	atomic_store(&l3_test_no_sqe, 1);
	int rc = put_full(l3, "nosqe2", 28, 30000, 99, &loc);
	ck_assert_uint_eq(atomic_exchange(&l3_test_no_sqe, 0), 0);
	ck_assert_msg(rc == -EAGAIN, "a put finding no submission entry: %s", sc_strerror(rc));
	ck_assert_int_eq(put_full(l3, "nosqe2", 28, 30000, 99, &loc), 0);
	check_fill(l3, &loc, 99, 0);
	sc_l3_close(l3);
}
END_TEST

/* A kept file in use when a removal through the handle moved the generation (the removal's sweep
 * passes over a busy file: here a fill through it not yet reaped) is stale when its fill ends: the
 * next fill of its object, sooner than the ring's next sweep, does not use it but opens the file
 * anew. */
START_TEST(a_kept_file_busy_through_a_removal_is_not_used_after_it)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location x, y;
	ck_assert_int_eq(put_full(l3, "busy", 24, 50000, 95, &x), 0);
	ck_assert_int_eq(put_full(l3, "busy", 25, 50000, 96, &y), 0);
	char py[256];
	obj_path(&y, py, sizeof(py));
	struct timespec old[2] = { { time(NULL) - 1000, 0 }, { time(NULL) - 1000, 0 } };
	ck_assert_int_eq(utimensat(AT_FDCWD, py, old, 0), 0); /* the oldest: an eviction takes it */
	check_fill(l3, &x, 95, 0); /* kept */
	ck_assert_uint_eq(atomic_load(&l3->kept_count), 1);
	size_t cap = 53248;
	struct sc_l3_fill_req req = { .loc = &x, .dst = abuf(cap), .dst_bytes = cap }, *rp = &req, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1); /* through the kept file: busy until reaped */
	struct sc_l3_stats s0, s1;
	ck_assert_int_eq(sc_l3_stats(l3, &s0), 0);
	struct stat sb;
	ck_assert_int_eq(stat(py, &sb), 0);
	ck_assert_int_eq(sc_l3_evict_to(l3, s0.bytes - (uint64_t)sb.st_size), 1); /* y, through the handle */
	ck_assert_int_eq(access(py, F_OK), -1);
	ck_assert_int_eq(sc_l3_fill_inflight(l3), 1); /* not reaped by the eviction */
	ck_assert_uint_eq(atomic_load(&l3->kept_count), 1); /* x's, busy: not closed by the removal */
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, 10 * 1000000000ll), 1);
	ck_assert_int_eq(req.result, 0);
	free(req.dst);
	ck_assert_int_eq(sc_l3_stats(l3, &s0), 0);
	ck_assert_uint_eq(s0.fills_kept, 1); /* that fill read the kept file */
	check_fill(l3, &x, 95, 0);
	ck_assert_int_eq(sc_l3_stats(l3, &s1), 0);
	ck_assert_uint_eq(s1.fills_kept, s0.fills_kept); /* read through a file opened anew */
	sc_l3_close(l3);
}
END_TEST

/* A close whose wait for the reads in flight fails (io_uring_enter refused, here with EPERM by a
 * seccomp filter in a child) still closes the descriptors of the fills left on the thread's own
 * ring: the object file a held fill opened as descriptor 0 is closed with the handle. */
START_TEST(a_close_whose_wait_fails_closes_the_files_of_its_fills)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "drain", 23, HELD_BYTES, 93, &loc), 0);
	pid_t pid = fork_with_ring(l3, &loc, 93);
	if (pid == 0) {
		struct held_fill h;
		if (held_watch(&h, &loc, 1))
			_exit(77);
		if (close(0))
			_exit(8);
		held_submit(&h, l3, &loc);
		int zero = object_fd(&loc) == 0, refused = sc_test_refuse_syscall(__NR_io_uring_enter, SECCOMP_RET_ERRNO | EPERM) == 0;
		if (refused)
			sc_l3_close(l3);
		errno = 0;
		int closed = fcntl(0, F_GETFD) == -1 && errno == EBADF;
		if (write(h.pipe[1], "g", 1) != 1)
			_exit(8);
		sc_fan_stop(&h.fan);
		_exit(!refused ? 77 : (zero ? 0 : 1) | (closed ? 0 : 2));
	}
	int st = sc_test_child_status(pid, "no fanotify permission events or no seccomp filter: a failed close's wait is not tried");
	ck_assert_msg(st <= 0, "status %d: the fill's file not descriptor 0 (bit 1), left open after the close (bit 2)", st);
	sc_l3_close(l3);
}
END_TEST

/* close() for this binary (the library's calls come here too): while close_watch is set, counts
 * in close_ebadf the closes of descriptors that were not open (EBADF: one file closed twice, which
 * in a threaded process closes whatever another thread opened in between). */
static atomic_int close_watch, close_ebadf;

extern int __close(int fd); /* glibc's (sanitizers that track descriptors intercept it too) */

int close(int fd)
{
	int rc = __close(fd);
	if (rc < 0 && errno == EBADF && atomic_load(&close_watch))
		atomic_fetch_add(&close_ebadf, 1);
	return rc;
}

/* A close whose wait for the reads in flight fails (the test build's refused waits, with EPERM)
 * while a fill through a kept file is in flight closes that file once, as a kept file, not also as
 * the fill's: the close meets no descriptor that was not open, and the file is closed after it.
 * In a child (a failed close leaves the fill's state behind). */
START_TEST(a_close_whose_wait_fails_closes_a_busy_kept_file_once)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "twice", 29, 50000, 31, &loc), 0);
	pid_t pid = fork_with_ring(l3, &loc, 31); /* the child's fill keeps the file */
	if (pid == 0) {
		int kept = object_fd(&loc) >= 0;
		size_t cap = 53248;
		struct sc_l3_fill_req req = { .loc = &loc, .dst = abuf(cap), .dst_bytes = cap }, *rp = &req;
		int sub = sc_l3_fill_submit(l3, &rp, 1) == 1; /* through the kept file: busy until reaped */
		atomic_store(&l3_test_wait_errno, EPERM);
		atomic_store(&l3_test_wait_again, 1000);
		atomic_store(&close_watch, 1);
		sc_l3_close(l3);
		atomic_store(&close_watch, 0);
		int closed = object_fd(&loc) < 0;
		_exit(!kept || !sub ? 4 : (atomic_load(&close_ebadf) ? 1 : 0) | (closed ? 0 : 2));
	}
	int st = sc_test_child_status(pid, "");
	ck_assert_msg(st == 0, "status %d: a descriptor closed twice (bit 1), the kept file left open (bit 2), "
			       "or the file not kept or the fill not submitted (4)", st);
	sc_l3_close(l3);
}
END_TEST

/* A fill that ends while every way of its object's set of kept files is in use (fills through them
 * in flight) keeps nothing: its file is closed, the kept ones stay, and every fill returns its
 * bytes. fd_cache 8: two sets of eight ways. Eight small objects of one set are kept; a ninth of
 * that set is submitted, its read held; the eight are filled again (busy until their ends are
 * processed), then the read goes on: the reap ends the ninth first (the last completion's fill
 * ends first), while the eight are busy. */
START_TEST(a_fill_ending_while_its_set_of_kept_files_is_all_busy_keeps_nothing)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 8, .queue_depth = 16, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location loc[9];
	unsigned seed[9], n = 0;
	for (unsigned s = 0; n < 9 && s < 200; s++) {
		struct sc_location l;
		ck_assert_int_eq(put_full(l3, "busyset", 30 + s, n < 8 ? 20000 : HELD_BYTES, 300 + s, &l), 0);
		if (l.digest.lo % 2 == 0)
			loc[n] = l, seed[n++] = 300 + s;
	}
	ck_assert_uint_eq(n, 9);
	for (unsigned i = 0; i < 8; i++)
		check_fill(l3, &loc[i], seed[i], 0);
	for (unsigned i = 0; i < 8; i++)
		ck_assert_int_ge(object_fd(&loc[i]), 0); /* kept: the set is full */
	struct held_fill h;
	if (held_watch(&h, &loc[8], 1)) {
		sc_l3_close(l3);
		return;
	}
	held_submit(&h, l3, &loc[8]);
	struct sc_l3_fill_req req[8], *rp[8], *done[9];
	for (unsigned i = 0; i < 8; i++) {
		size_t cap = (loc[i].payload_bytes + 4095) / 4096 * 4096;
		req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = abuf(cap), .dst_bytes = cap };
		rp[i] = &req[i];
	}
	struct l3_ring *r = l3_ring_find(l3);
	unsigned ready = io_uring_cq_ready(&r->ring);
	ck_assert_uint_eq(ready, 1); /* the ninth's header read, made inline */
	ck_assert_int_eq(sc_l3_fill_submit(l3, rp, 8), 8);
	for (int i = 0; i < 10000 && io_uring_cq_ready(&r->ring) < ready + 8; i++)
		sc_test_pause_ms(1); /* until the eight reads' completions are there */
	ck_assert_uint_eq(io_uring_cq_ready(&r->ring), ready + 8);
	ck_assert_int_eq(write(h.pipe[1], "g", 1), 1);
	for (int i = 0; i < 10000 && io_uring_cq_ready(&r->ring) < ready + 9; i++)
		sc_test_pause_ms(1); /* until the held read's completion is there, after them */
	ck_assert_uint_eq(io_uring_cq_ready(&r->ring), ready + 9);
	for (unsigned got = 0; got < 9;) {
		int k = sc_l3_fill_reap(l3, done, 9, -1);
		ck_assert_int_gt(k, 0);
		got += (unsigned)k;
	}
	held_end(&h, seed[8]);
	for (unsigned i = 0; i < 8; i++) {
		ck_assert_msg(req[i].result == 0, "fill of object %u: %s", i, sc_strerror(req[i].result));
		uint8_t *w = malloc(loc[i].payload_bytes);
		fill_bytes(w, loc[i].payload_bytes, seed[i]);
		ck_assert_msg(memcmp(req[i].dst, w, loc[i].payload_bytes) == 0, "object %u: wrong bytes", i);
		free(w), free(req[i].dst);
		ck_assert_int_ge(object_fd(&loc[i]), 0);
	}
	ck_assert_int_eq(object_fd(&loc[8]), -1); /* not kept, and closed */
	sc_l3_close(l3);
}
END_TEST

/* A thread that submits a held fill on its own ring, then stays (a thread's exit waits for its
 * reads in flight) until told to go. */
struct held_in_thread {
	struct held_fill *h;
	struct sc_l3 *l3;
	const struct sc_location *loc;
	atomic_int submitted, go;
};

static void *held_submit_run(void *arg)
{
	struct held_in_thread *x = arg;
	check_fill(x->l3, x->loc, 94, 0); /* this thread's ring */
	held_submit(x->h, x->l3, x->loc);
	atomic_store(&x->submitted, 1);
	while (!atomic_load(&x->go))
		sc_test_pause_ms(1);
	return NULL;
}

/* A handle closed by one thread while another thread's fill is in flight on that thread's own
 * ring leaves the fill its file (the read may still use it): the object file stays open through
 * the close; once the held read goes on, its bytes land in the caller's buffer. */
START_TEST(a_close_leaves_another_threads_fill_its_file)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "other", 24, HELD_BYTES, 94, &loc), 0);
	struct held_fill h;
	if (held_watch(&h, &loc, 3)) { /* after the thread's first fill: its header, its payload */
		sc_l3_close(l3);
		return;
	}
	struct held_in_thread x = { &h, l3, &loc, 0, 0 };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, held_submit_run, &x), 0);
	for (int i = 0; i < 20000 && !atomic_load(&x.submitted); i++)
		sc_test_pause_ms(1);
	ck_assert_msg(atomic_load(&x.submitted), "the thread's fill was not submitted and held in 20 s");
	ck_assert_int_eq(object_fds(&loc), 2); /* the fill's, and the held event's */
	sc_l3_close(l3);
	ck_assert_int_eq(object_fds(&loc), 2);
	ck_assert_int_eq(write(h.pipe[1], "g", 1), 1);
	atomic_store(&x.go, 1);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	uint8_t *w = malloc(HELD_BYTES);
	fill_bytes(w, HELD_BYTES, 94);
	for (int i = 0; i < 10000 && memcmp(h.req.dst, w, HELD_BYTES); i++)
		sc_test_pause_ms(1); /* the read goes on: nothing can reap it now */
	ck_assert_msg(memcmp(h.req.dst, w, HELD_BYTES) == 0, "the held read did not land in 10 s");
	free(w), free(h.req.dst);
	sc_fan_stop(&h.fan);
	close(h.pipe[0]), close(h.pipe[1]);
	int fd;
	while (object_fds_at(&loc, &fd))
		ck_assert_int_eq(close(fd), 0); /* the file the closed handle left to the thread's fill */
}
END_TEST

/* Kept files are told apart by both halves of their object's digest. The kept entry of X is made
 * to name another object whose digest shares one half with X's (_i 0: the low half, _i 1: the high
 * one; rewritten in memory, as no such pair can be found), in X's set. That file is not taken for
 * X's fill, nor seen as X kept already: X's file is opened, read and kept beside it, and the next
 * fill of X reads that one. */
START_TEST(kept_files_are_told_apart_by_both_halves_of_the_digest)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location x;
	ck_assert_int_eq(put_full(l3, "halves", 40, 20000, 121, &x), 0);
	check_fill(l3, &x, 121, 0);
	struct l3_ring *r = l3_ring_find(l3);
	struct l3_kept *k = NULL;
	for (uint32_t i = 0; i < r->kept_sets * L3_KEPT_WAYS; i++)
		if (r->kept[i].fd >= 0)
			k = &r->kept[i];
	ck_assert_ptr_nonnull(k);
	ck_assert(k->lo == x.digest.lo && k->hi == x.digest.hi);
	if (_i == 0)
		k->hi ^= 1;
	else
		k->lo = k->lo >= r->kept_sets ? k->lo - r->kept_sets : k->lo + r->kept_sets; /* the same set */
	struct sc_l3_stats s0, s1;
	ck_assert_int_eq(sc_l3_stats(l3, &s0), 0);
	check_fill(l3, &x, 121, 0);
	ck_assert_int_eq(sc_l3_stats(l3, &s1), 0);
	ck_assert_uint_eq(s1.fills_kept, s0.fills_kept); /* not read from the other object's file */
	ck_assert_int_eq(object_fds(&x), 2);            /* that file, and X's own, kept */
	check_fill_kept(l3, &x, 121);
	ck_assert_int_eq(object_fds(&x), 2);
	sc_l3_close(l3);
	ck_assert_int_eq(object_fds(&x), 0);
}
END_TEST

/* A kept file a fill is reading (busy) is never closed to make room: at the limit (fd_cache 1) a
 * fill that ends while the kept file's fill is held in its read is not kept (its file closed),
 * and the held fill's kept file stays open through it and after. */
START_TEST(a_kept_file_in_use_is_not_closed_to_make_room)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 1, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location x, y;
	ck_assert_int_eq(put_full(l3, "busy", 17, HELD_BYTES, 85, &x), 0);
	ck_assert_int_eq(put_full(l3, "busy", 18, 20000, 86, &y), 0);
	check_fill(l3, &y, 86, 0); /* the ring made */
	struct held_fill h;
	if (held_watch(&h, &x, 2)) { /* x's header and payload reads, then its kept file's payload read */
		sc_l3_close(l3);
		return;
	}
	check_fill(l3, &x, 85, 0);
	held_submit(&h, l3, &x);
	ck_assert_int_eq(object_fds(&x), 2); /* kept, and the held event's descriptor */
	check_fill(l3, &y, 86, 0);
	ck_assert_int_eq(object_fds(&x), 2); /* its kept file, and the held event's own descriptor */
	ck_assert_int_eq(object_fds(&y), 0);
	held_release(&h, l3, 85);
	ck_assert_int_eq(object_fds(&x), 1);
	sc_l3_close(l3);
}
END_TEST

/* A kept file serves one fill at a time: a second fill of the object while the first is held in
 * its read of the kept file opens a file of its own (the kept file is busy), and both fills
 * return the bytes. */
START_TEST(a_busy_kept_file_is_not_shared_by_a_second_fill)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location x;
	ck_assert_int_eq(put_full(l3, "share", 28, HELD_BYTES, 96, &x), 0);
	struct held_fill h;
	if (held_watch(&h, &x, 2)) { /* x's header and payload reads, then its kept file's payload read */
		sc_l3_close(l3);
		return;
	}
	check_fill(l3, &x, 96, 0);
	held_submit(&h, l3, &x);
	ck_assert_int_eq(object_fds(&x), 2); /* kept, and the held event's descriptor */
	struct sc_l3_fill_req r2 = { .loc = &x, .dst = abuf(HELD_BYTES), .dst_bytes = HELD_BYTES }, *rp = &r2, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	/* the kept file, the second fill's own file (its open is on the ring: waited for, at most
	 * 10 s), and the held event's descriptor */
	for (int i = 0; i < 10000 && object_fds(&x) < 3; i++)
		sc_test_pause_ms(1);
	ck_assert_int_eq(object_fds(&x), 3);
	ck_assert_int_eq(write(h.pipe[1], "g", 1), 1);
	for (int got = 0; got < 2; got++) {
		ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
		ck_assert_int_eq(done->result, 0);
	}
	uint8_t *w = malloc(HELD_BYTES);
	fill_bytes(w, HELD_BYTES, 96);
	ck_assert(memcmp(r2.dst, w, HELD_BYTES) == 0);
	free(w), free(r2.dst);
	held_end(&h, 96);
	ck_assert_int_eq(object_fds(&x), 1);
	sc_l3_close(l3);
}
END_TEST

/* In a full set of kept files (fd_cache 12: three sets of 8), keeping one more replaces the least
 * recently used idle file of the set, never a busy one: with the set's least recently used held
 * in its fill's read (the others used since it was taken), the next least recently used goes,
 * and the held one stays open. */
START_TEST(a_full_sets_busy_file_is_not_replaced)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 12, .o_direct = SC_L3_ODIRECT_OFF });
	enum { N = 9 }; /* X (held), o1..o7, then z */
	struct sc_location o[N], loc;
	unsigned seed[N], n = 0;
	for (unsigned i = 0; n < N; i++) {
		ck_assert_uint_lt(i, 300);
		size_t bytes = n ? 20000 : HELD_BYTES;
		ck_assert_int_eq(put_full(l3, "busyset", 1400 + i, bytes, 400 + i, &loc), 0);
		if (loc.digest.lo % 3 == 0)
			o[n] = loc, seed[n++] = 400 + i;
	}
	struct held_fill h;
	if (held_watch(&h, &o[0], 2)) { /* X's header and payload reads, then its kept file's payload read */
		sc_l3_close(l3);
		return;
	}
	for (unsigned i = 0; i < 8; i++)
		check_fill(l3, &o[i], seed[i], 0); /* the set is full, X its least recently used */
	ck_assert_uint_eq(l3_ring_find(l3)->kept_sets, 3);
	for (unsigned i = 1; i < 8; i++)
		ck_assert_int_eq(object_fds(&o[i]), 1);
	held_submit(&h, l3, &o[0]);
	for (unsigned i = 1; i < 8; i++)
		check_fill(l3, &o[i], seed[i], 0); /* X, taken by the held fill, is the least recently used again */
	check_fill(l3, &o[8], seed[8], 0);
	ck_assert_int_eq(object_fds(&o[0]), 2); /* its kept file, and the held event's descriptor */
	ck_assert_int_eq(object_fds(&o[1]), 0); /* the least recently used idle one went */
	ck_assert_int_eq(object_fds(&o[8]), 1);
	held_release(&h, l3, seed[0]);
	sc_l3_close(l3);
}
END_TEST

/* An eviction through the handle closes the thread's idle kept files at once (a new generation),
 * however recently the last sweep ran; a kept file whose fill is held in its read is left to
 * that fill (open while it reads), and its fill returns the bytes. */
START_TEST(an_eviction_closes_idle_kept_files_at_once_and_leaves_busy_ones_to_their_fill)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location a, b;
	ck_assert_int_eq(put_full(l3, "evk", 19, 20000, 87, &a), 0);
	ck_assert_int_eq(put_full(l3, "evk", 20, HELD_BYTES, 88, &b), 0);
	check_fill(l3, &a, 87, 0);
	struct held_fill h;
	if (held_watch(&h, &b, 2)) {
		sc_l3_close(l3);
		return;
	}
	check_fill(l3, &b, 88, 0);
	held_submit(&h, l3, &b);
	ck_assert_int_eq(count_object_fds(), 3); /* a's and b's kept files, the held event's descriptor */
	ck_assert_int_ge(sc_l3_evict_to(l3, 0), 0);
	/* both files removed: a's idle one closed; b's kept one open for its read, with the held
	 * event's descriptor */
	ck_assert_int_eq(count_removed_object_fds(), 2);
	held_release(&h, l3, 88);
	sc_l3_close(l3);
	ck_assert_int_eq(count_object_fds(), 0);
}
END_TEST

/* A removal through a handle closes this thread's idle kept files of it at once: also after another
 * handle on the same store was used and closed (_i 0: closing one handle leaves the others their
 * sweeps), and after the thread used more handles than its cache of rings holds (_i 1: four). */
START_TEST(an_eviction_closes_idle_kept_files_after_other_handles)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4, .o_direct = SC_L3_ODIRECT_OFF });
	struct sc_location a;
	ck_assert_int_eq(put_full(l3, "evo", 21, 20000, 89, &a), 0);
	check_fill(l3, &a, 89, 0);
	ck_assert_int_eq(count_object_fds(), 1); /* kept */
	struct sc_l3 *others[4] = { NULL };
	for (int i = 0; i < (_i ? 4 : 1); i++) { /* each makes a ring of this thread */
		others[i] = open_l3(&(struct sc_l3_opts){ .fd_cache = _i ? SC_L3_FD_CACHE_NONE : 4,
							  .o_direct = SC_L3_ODIRECT_OFF });
		ck_assert_int_eq(fill_rc(others[i], &a), 0);
	}
	if (!_i) {
		sc_l3_close(others[0]);
		others[0] = NULL;
	}
	ck_assert_int_eq(count_object_fds(), 1);
	ck_assert_int_ge(sc_l3_evict_to(l3, 0), 0);
	ck_assert_int_eq(count_removed_object_fds(), 0);
	for (int i = 0; i < 4; i++)
		if (others[i])
			sc_l3_close(others[i]);
	sc_l3_close(l3);
}
END_TEST
/* @n fills of @loc (seeded @seed) submitted together, all reaped: each exact. */
static void fill_together(struct sc_l3 *l3, const struct sc_location *loc, unsigned seed, unsigned n)
{
	struct sc_l3_fill_req req[4], *rp[4];
	size_t cap = (loc->payload_bytes + 4095) / 4096 * 4096;
	uint8_t *want = malloc(loc->payload_bytes);
	fill_bytes(want, loc->payload_bytes, seed);
	ck_assert_uint_le(n, 4);
	for (unsigned i = 0; i < n; i++) {
		req[i] = (struct sc_l3_fill_req){ .loc = loc, .dst = abuf(cap), .dst_bytes = cap };
		rp[i] = &req[i];
	}
	fill_all(l3, rp, n);
	for (unsigned i = 0; i < n; i++) {
		ck_assert_msg(req[i].result == 0, "fill %u of %u: %s", i, n, sc_strerror(req[i].result));
		ck_assert(memcmp(req[i].dst, want, loc->payload_bytes) == 0);
		free(req[i].dst);
	}
	free(want);
}

/* A handle keeps one file per object: fills of a kept object at once read the kept file and a file
 * of their own, which is closed at the end (the object is kept already). Also when the kept file
 * is descriptor 0, which is kept beside other kept files (a new one takes a free slot, not its
 * place) and closed by the sweep like them when objects are removed through the handle. */
START_TEST(one_kept_file_per_object_descriptor_0_included)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4 });
	struct sc_location a, b, d, gone;
	ck_assert_int_eq(put_full(l3, "onekept", 20, 20000, 210, &a), 0);
	ck_assert_int_eq(put_full(l3, "onekept", 21, 20000, 211, &b), 0);
	ck_assert_int_eq(put_full(l3, "onekept", 22, 20000, 212, &d), 0);
	ck_assert_int_eq(put_full(l3, "onekept", 23, 20000, 213, &gone), 0);
	check_fill(l3, &a, 210, 0);
	ck_assert_int_eq(object_fds(&a), 1);
	fill_together(l3, &a, 210, 2); /* the kept file and one of its own */
	ck_assert_int_eq(object_fds(&a), 1);
	sc_l3_close(l3);

	/* descriptor 0: this handle's ring is made by a fill that keeps nothing (its object is gone) */
	l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 4 });
	char path[200];
	obj_path(&gone, path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(fill_rc(l3, &gone), -ENOENT);
	ck_assert_int_eq(count_object_fds(), 0);
	ck_assert_int_eq(close(0), 0);
	ck_assert_int_eq(sc_test_lowest_free_fd(), 0);
	check_fill(l3, &b, 211, 0);
	ck_assert_int_eq(object_fd(&b), 0); /* kept as 0, in the table's first slot */
	fill_together(l3, &b, 211, 2);
	ck_assert_int_eq(object_fds(&b), 1);
	ck_assert_int_eq(object_fd(&b), 0);
	check_fill(l3, &d, 212, 0); /* kept beside it */
	ck_assert_int_eq(object_fd(&b), 0);
	ck_assert_int_ge(object_fd(&d), 1);
	check_fill_kept(l3, &b, 211);
	ck_assert_int_ge(sc_l3_evict_to(l3, 0), 2); /* the sweep closes both at once */
	errno = 0;
	ck_assert_msg(fcntl(0, F_GETFD) == -1 && errno == EBADF, "the kept file of a removed object (descriptor 0) still open");
	ck_assert_int_eq(count_object_fds(), 0);
	sc_l3_close(l3);
}
END_TEST

/* A fill returns what it read and verified even when its object's name goes after the open (the
 * bytes are the object's: a miss would only waste them); a fill that read a damaged file whose name
 * was given to a good copy meanwhile is a miss (-ENOENT), and the good copy is not quarantined. */
START_TEST(a_fill_judges_the_file_it_read_not_what_its_name_names_later)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE });
	struct sc_location loc;
	enum { N = 20000 };
	ck_assert_int_eq(put_full(l3, "later", 24, N, 220, &loc), 0);
	char path[200], good[220];
	obj_path(&loc, path, sizeof(path));
	snprintf(good, sizeof(good), "%s.good", path);
	ck_assert_int_eq(sc_test_sh("cp %s %s", path, good), 0);
	uint8_t *dst = abuf(N), *want = malloc(N);
	fill_bytes(want, N, 220);
	struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = 20480 }, *rp = &r, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1); /* alone: its file is open when this returns */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_msg(r.result == 0, "removed after the open: %s", sc_strerror(r.result));
	ck_assert(memcmp(dst, want, N) == 0);

	ck_assert_int_eq(sc_test_sh("cp %s %s", good, path), 0);
	corrupt(&loc, C_PAYLOAD);
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(rename(good, path), 0);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_msg(r.result == -ENOENT, "damaged, then renamed over: %s", sc_strerror(r.result));
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, 0);
	check_fill(l3, &loc, 220, 0); /* the good copy, still there */
	free(dst);
	free(want);
	sc_l3_close(l3);
}
END_TEST

/* At the handle's limit of kept files (fd_cache 2: one set, its ways taken in order), keeping a
 * third closes the least recently used idle one, whatever its place in the table: A, B, B again,
 * then C closes A's file and keeps B's and C's. */
START_TEST(at_the_limit_the_least_recently_used_kept_file_goes)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 2 });
	struct sc_location loc[3];
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(put_full(l3, "lru", 20 + i, 20000, 200 + i, &loc[i]), 0);
	static const unsigned order[] = { 0, 1, 1, 2 };
	for (unsigned k = 0; k < 4; k++)
		check_fill(l3, &loc[order[k]], 200 + order[k], 0);
	ck_assert_int_eq(object_fds(&loc[0]), 0);
	ck_assert_int_eq(object_fds(&loc[1]), 1);
	ck_assert_int_eq(object_fds(&loc[2]), 1);
	sc_l3_close(l3);
}
END_TEST

/* Which kept file makes room in a full set of the kept-file table: the least recently used one,
 * wherever it sits and whatever its descriptor, 0 included (closed then, as any). A handle keeping
 * 12 files has three sets of 8 slots; the objects here all fall in one (digest lo % 3 == 0), which
 * fills up while the handle is under its limit. */
START_TEST(a_full_set_of_kept_files_replaces_its_least_recently_used_descriptor_0_included)
{
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .fd_cache = 12 });
	enum { N = 11 }; /* X F o2..o7 n1 n2 n3 */
	struct sc_location o[N], loc, gone;
	unsigned seed[N], n = 0;
	for (unsigned i = 0; n < N; i++) {
		ck_assert_uint_lt(i, 300);
		ck_assert_int_eq(put_full(l3, "fullset", 1000 + i, 20000, 300 + i, &loc), 0);
		if (loc.digest.lo % 3 == 0)
			o[n] = loc, seed[n++] = 300 + i;
	}
	for (unsigned i = 300;; i++) {
		ck_assert_int_eq(put_full(l3, "fullset", 1000 + i, 20000, 300 + i, &gone), 0);
		if (gone.digest.lo % 3)
			break;
	}
	char path[200];
	obj_path(&gone, path, sizeof(path));
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(fill_rc(l3, &gone), -ENOENT); /* the ring, keeping nothing */
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->kept_sets, 3);
	enum { X = 0, F = 1, N1 = 8, N2 = 9, N3 = 10 };
#define FILL(i) check_fill(l3, &o[i], seed[i], 0)
	FILL(X); /* slot 0 */
	ck_assert_int_eq(close(0), 0);
	FILL(F); /* slot 1, descriptor 0 */
	ck_assert_int_eq(object_fd(&o[F]), 0);
	for (unsigned i = 2; i < 8; i++)
		FILL(i); /* slots 2-7: the set is full */
	ck_assert_int_eq(count_object_fds(), 8);
	/* X (slot 0) is the least recently used, F (slot 1) the next */
	FILL(N1);
	ck_assert_int_eq(object_fd(&o[X]), -1);
	ck_assert_int_eq(object_fd(&o[F]), 0);
	/* F used, then n1: o2 (slot 2) is the least recently used, behind F (slot 1) */
	FILL(F);
	FILL(N1);
	FILL(N2);
	ck_assert_int_eq(object_fd(&o[2]), -1);
	ck_assert_int_eq(object_fd(&o[F]), 0);
	/* o3-o7 used: F is the least recently used: descriptor 0 is closed for n3 */
	for (unsigned i = 3; i < 8; i++)
		FILL(i);
	FILL(N3);
	errno = 0;
	ck_assert_msg(fcntl(0, F_GETFD) == -1 && errno == EBADF, "the least recently used kept file (descriptor 0) still open");
	ck_assert_int_eq(count_object_fds(), 8);
	ck_assert_int_ge(object_fd(&o[N3]), 0);
#undef FILL
	sc_l3_close(l3);
}
END_TEST

START_TEST(corrupt_header_found_by_locate_and_reconcile)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location loc, loc2;
	ck_assert_int_eq(put_full(l3, "r", 7, 9000, 7, &loc), 0);
	ck_assert_int_eq(put_full(l3, "r", 8, 9000, 8, &loc2), 0);
	corrupt(&loc, C_MAGIC);
	/* locate reads the header: a bad one is quarantined and probing goes on */
	ck_assert_int_eq(sc_l3_locate_longest(l3, "r", toks, 7, &loc2), 0);
	ck_assert_int_eq(count_dir("quarantine"), 1);
	sc_l3_close(l3);
	/* reconciliation at open: bad header quarantined, dangling prefix entry dropped */
	l3 = open_l3(NULL);
	ck_assert_int_eq(put_full(l3, "r", 9, 9000, 9, &loc), 0);
	sc_l3_close(l3);
	corrupt(&loc, C_VERSION);
	char rel[48], path[256];
	l3 = open_l3(NULL); /* reconciles: the bad version is quarantined */
	ck_assert_int_eq(sc_l3_locate_longest(l3, "r", toks, 8, &loc2), 8);
	sc_l3_close(l3);
	l3_obj_relpath(loc2.digest.lo, loc2.digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	ck_assert_int_eq(unlink(path), 0); /* object 8 vanishes behind the index's back */
	l3 = open_l3(NULL);
	ck_assert_int_eq(count_dir("quarantine"), 2);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_int_eq(st.objects, 0);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "r", toks, 100, &loc2), 0);
	sc_l3_close(l3);
}
END_TEST

START_TEST(hostile_prefix_entries_and_links)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location loc, l2;
	ck_assert_int_eq(put_full(l3, "h", 5, 1000, 5, &loc), 0);
	ck_assert_int_eq(put_full(l3, "h", 9, 1000, 9, NULL), 0);
	/* scribble over the prefix entry of length 9: it is dropped, the shorter prefix serves */
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "for f in $(find %s/prefix -name '*.pfx'); do "
		 "if [ $(od -An -tu4 -j12 -N4 $f) = 9 ]; then printf 'garbage' | dd of=$f bs=1 seek=30 conv=notrunc 2>/dev/null; fi; done",
		 tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "h", toks, 20, &l2), 5);
	snprintf(cmd, sizeof(cmd), "test $(find %s/prefix -name '*.pfx' | wc -l) = 1", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	/* an object path replaced by a symlink is not followed: not an object (-EBADMSG, as a FIFO or
	 * a directory there is), whichever of the open and the statx beside it reports first */
	char rel[48], path[256];
	l3_obj_relpath(loc.digest.lo, loc.digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(symlink("/etc/passwd", path), 0);
	uint8_t *dst = abuf(8192);
	ck_assert_int_eq(sc_l3_fill(l3, &loc, dst, 8192, 0), -EBADMSG);
	free(dst);
	sc_l3_close(l3);
}
END_TEST

/* The directory probe reads a prefix entry in one read sized by the open's fstat: entries whose
 * size disagrees with their header (a byte appended, cut inside the token ids or inside the
 * header, a header claiming more token ids than the file holds) are refused, the shorter prefix
 * serves, and the object stored for the longer one is still whole. */
START_TEST(prefix_entries_of_the_wrong_size_are_refused)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location l5, l9, got;
	ck_assert_int_eq(put_full(l3, "w", 5, 3000, 5, &l5), 0);
	char rel[48], path[256];
	static const struct { int op; off_t at; } cases[] = { { 1, 0 }, { 0, 64 + 9 * 4 - 2 }, { 0, 40 }, { 2, 0 } };
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		ck_assert_int_eq(put_full(l3, "w", 9, 3000, 9, &l9), 0);
		ck_assert_int_eq(sc_l3_locate_longest(l3, "w", toks, 20, &got), 9);
		l3_pfx_relpath(l9.prefix.lo, l9.prefix.hi, rel);
		snprintf(path, sizeof(path), "%s/prefix/%s", tmpdir, rel);
		int fd = open(path, O_RDWR);
		ck_assert_int_ge(fd, 0);
		struct stat sb;
		ck_assert_int_eq(fstat(fd, &sb), 0);
		if (cases[c].op == 1) {
			ck_assert_int_eq(pwrite(fd, "x", 1, sb.st_size), 1);
		} else if (cases[c].op == 0) {
			ck_assert_int_eq(ftruncate(fd, cases[c].at), 0);
		} else {
			uint32_t many = 9000; /* the header's token count (offset 12), more than the file holds */
			ck_assert_int_eq(pwrite(fd, &many, 4, 12), 4);
		}
		close(fd);
		ck_assert_msg(sc_l3_locate_longest(l3, "w", toks, 20, &got) == 5, "case %u", c);
		ck_assert(sc_digest_equal(got.digest, l5.digest));
		ck_assert_int_eq(sc_l3_lookup(l3, l9.digest, &got), 0);
		uint8_t *dst = abuf(8192);
		ck_assert_int_eq(sc_l3_fill(l3, &got, dst, 8192, 0), 0);
		free(dst);
	}
	sc_l3_close(l3);
}
END_TEST

/* A batch whose objects are partly gone or not files any more (a directory, a FIFO under the
 * object's name): each fill gets its own result, the others their bytes, in either submission
 * order (the first of a batch opens in the caller, the rest through the ring, side by side). */
START_TEST(batch_fills_with_missing_and_odd_files)
{
	enum { N = 8 };
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .queue_depth = N });
	struct sc_location loc[N];
	uint8_t *dst[N];
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(put_full(l3, "odd", 200u + (uint32_t)i, 9000u + (size_t)i * 512, 300u + (unsigned)i, &loc[i]),
				 0);
		dst[i] = abuf(16384);
	}
	for (int round = 0; round < 2; round++) {
		/* 2: removed; 4: a directory; 6: a FIFO (an open that must not block) */
		for (int i = 2; i <= 6; i += 2) {
			char rel[48], path[200];
			l3_obj_relpath(loc[i].digest.lo, loc[i].digest.hi, rel);
			snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
			unlink(path);
			rmdir(path);
			if (i == 4)
				ck_assert_int_eq(mkdir(path, 0755), 0);
			if (i == 6)
				ck_assert_int_eq(mkfifo(path, 0644), 0);
		}
		struct sc_l3_fill_req req[N], *rp[N], *done[N];
		for (int k = 0; k < N; k++) {
			int i = round ? N - 1 - k : k; /* round 1: the odd ones are not first */
			req[k] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = dst[i], .dst_bytes = 16384, .user_data = (uint64_t)i };
			rp[k] = &req[k];
		}
		ck_assert_int_eq(sc_l3_fill_submit(l3, rp, N), N);
		int got = 0, ended = 0; /* bit i: object i's fill ended */
		while (got < N) {
			int r = sc_l3_fill_reap(l3, done, N, 10 * 1000000000ll);
			ck_assert_msg(r > 0, "round %d: %d of %d fills ended (mask %#x); none more in 10 s (reap: %d)", round, got,
				      N, ended, r);
			for (int j = 0; j < r; j++) {
				int i = (int)done[j]->user_data, rc = done[j]->result;
				ended |= 1 << i;
				if (i == 2)
					ck_assert_msg(rc == -ENOENT, "round %d: the removed object: %d", round, rc);
				else if (i == 4 || i == 6)
					ck_assert_msg(rc == -EBADMSG || rc == -ENOENT, "round %d: object %d (%s): %d", round, i,
						      i == 4 ? "a directory" : "a FIFO", rc);
				else {
					ck_assert_msg(rc == 0, "round %d: object %d: %d", round, i, rc);
					uint8_t *want = malloc(loc[i].payload_bytes);
					fill_bytes(want, loc[i].payload_bytes, 300u + (unsigned)i);
					ck_assert_msg(memcmp(want, dst[i], loc[i].payload_bytes) == 0, "round %d: object %d: wrong bytes",
						      round, i);
					free(want);
				}
			}
			got += r;
		}
		ck_assert_int_eq(sc_l3_fill_inflight(l3), 0);
	}
	for (int i = 0; i < N; i++)
		free(dst[i]);
	sc_l3_close(l3);
}
END_TEST

START_TEST(batch_fills)
{
	struct sc_l3_opts o = { .queue_depth = 8 };
	struct sc_l3 *l3 = open_l3(&o);
	enum { N = 40 };
	struct sc_location loc[N];
	struct sc_l3_fill_req req[N], *rp[N], *done[N];
	uint8_t *dst[N];
	for (int i = 0; i < N; i++) {
		size_t n = 1000u + (size_t)i * 3000u;
		ck_assert_int_eq(put_full(l3, "batch", 100u + (uint32_t)i, n, 1000u + (unsigned)i, &loc[i]), 0);
		dst[i] = abuf(n);
		req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = dst[i], .dst_bytes = (n + 4095) / 4096 * 4096,
						  .user_data = (uint64_t)i, .flags = i % 2 ? SC_L3_FILL_BUFFERED : 0 };
		rp[i] = &req[i];
	}
	int submitted = 0, reaped = 0, seen[N] = { 0 };
	while (reaped < N) {
		int k = sc_l3_fill_submit(l3, rp + submitted, (unsigned)(N - submitted));
		ck_assert_int_ge(k, 0);
		ck_assert_int_le((unsigned)(submitted + k - reaped), 16); /* twice queue_depth in flight */
		submitted += k;
		unsigned most, now = sc_test_l3_fills_reading(l3, &most);
		ck_assert_msg(now <= 8 && most <= 8, "%u fills reading (at most %u seen) with queue_depth 8", now, most);
		int r = sc_l3_fill_reap(l3, done, N, 1000000000);
		ck_assert_int_ge(r, 0);
		for (int j = 0; j < r; j++) {
			int i = (int)done[j]->user_data;
			ck_assert_int_eq(done[j]->result, 0);
			ck_assert_int_eq(seen[i], 0);
			seen[i] = 1;
			uint8_t *want = malloc(loc[i].payload_bytes);
			fill_bytes(want, loc[i].payload_bytes, 1000u + (unsigned)i);
			ck_assert(memcmp(want, dst[i], loc[i].payload_bytes) == 0);
			free(want);
		}
		reaped += r;
	}
	ck_assert_int_eq(sc_l3_fill_inflight(l3), 0);
	ck_assert_int_eq(sc_l3_fill_reap(l3, done, N, 0), 0);
	/* requests that fail before I/O complete at once */
	struct sc_location missing = loc[0];
	missing.digest.lo ^= 1;
	struct sc_l3_fill_req bad[2] = { { .loc = &missing, .dst = dst[0], .dst_bytes = 1 << 20 },
					 { .loc = &loc[1], .dst = dst[1], .dst_bytes = 1 } };
	struct sc_l3_fill_req *bp[2] = { &bad[0], &bad[1] };
	ck_assert_int_eq(sc_l3_fill_submit(l3, bp, 2), 2);
	ck_assert_int_eq(sc_l3_fill_reap(l3, done, N, 0), 2);
	ck_assert_int_eq(bad[0].result, -ENOENT);
	ck_assert_int_eq(bad[1].result, -EINVAL);
	for (int i = 0; i < N; i++)
		free(dst[i]);
	sc_l3_close(l3);
}
END_TEST

static void note_abandoned(void *ctx, int result)
{
	*(int *)ctx = result;
}

/* Twice queue_depth fills may be submitted; queue_depth of them read at once, the others wait and
 * start as reads end. A waiting fill its caller abandons never reads into its memory. */
START_TEST(fills_beyond_the_depth_wait_and_start_as_reads_end)
{
	enum { QD = 2, N = 6, SZ = 1 << 20 };
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .queue_depth = QD });
	struct sc_location loc[N];
	struct sc_l3_fill_req req[N], *rp[N], *done[N];
	uint8_t *dst[N];
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(put_full(l3, "wait", 40u + (uint32_t)i, SZ, 70u + (unsigned)i, &loc[i]), 0);
		dst[i] = abuf(SZ);
	}
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++) {
			memset(dst[i], 0xa5, SZ);
			req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = dst[i], .dst_bytes = SZ, .user_data = (uint64_t)i,
							  .flags = round == 1 ? SC_L3_FILL_BUFFERED : 0 };
			rp[i] = &req[i];
		}
		ck_assert_int_eq(sc_l3_fill_submit(l3, rp, N), 2 * QD); /* the rest: no slot */
		unsigned most, now = sc_test_l3_fills_reading(l3, &most);
		ck_assert_msg(now <= QD && most <= QD, "round %d: %u reading, at most %u, queue_depth %d", round, now, most, QD);
		int abandoned = 1; /* round 2: the last one accepted is given up while it waits */
		if (round == 2) {
			ck_assert_uint_eq(now, QD); /* so fill 3 has not started */
			l3_fill_abandon(l3, &req[2 * QD - 1], note_abandoned, &abandoned);
		}
		int got = 0, want_done = round == 2 ? 2 * QD - 1 : 2 * QD, next = 2 * QD;
		while (got < N - (round == 2)) {
			int r = sc_l3_fill_reap(l3, done, N, 10 * 1000000000ll);
			ck_assert_msg(r > 0, "round %d: %d of %d fills ended; none more in 10 s (%d)", round, got, want_done, r);
			for (int j = 0; j < r; j++) {
				int i = (int)done[j]->user_data;
				ck_assert_msg(done[j]->result == 0, "round %d: fill %d: %d", round, i, done[j]->result);
				uint8_t *want = malloc(SZ);
				fill_bytes(want, SZ, 70u + (unsigned)i);
				ck_assert_msg(memcmp(want, dst[i], SZ) == 0, "round %d: fill %d: wrong bytes", round, i);
				free(want);
			}
			got += r;
			if (next < N) {
				int k = sc_l3_fill_submit(l3, rp + next, (unsigned)(N - next));
				ck_assert_int_ge(k, 0);
				next += k;
			}
			now = sc_test_l3_fills_reading(l3, &most);
			ck_assert_msg(most <= QD, "round %d: %u fills read at once, queue_depth %d", round, most, QD);
		}
		ck_assert_int_eq(sc_l3_fill_inflight(l3), 0);
		if (round == 2) {
			ck_assert_int_eq(abandoned, -ECANCELED);
			for (int b = 0; b < SZ; b++)
				if (dst[2 * QD - 1][b] != 0xa5)
					ck_abort_msg("the abandoned waiting fill wrote byte %d of its memory", b);
		}
	}
	for (int i = 0; i < N; i++)
		free(dst[i]);
	sc_l3_close(l3);
}
END_TEST

/* A fill that waits behind another reads a short file's first bytes while it waits (a segmented
 * object's manifest, most likely); an object file cut short is no manifest: read again whole when
 * it starts, it is what it is, corrupt (quarantined), and the fills around it return their bytes. */
START_TEST(a_cut_object_waiting_behind_others_is_judged_as_any)
{
	enum { N = 3, SZ = 3 << 20 };
	struct sc_l3 *l3 = open_l3(&(struct sc_l3_opts){ .queue_depth = 1 });
	struct sc_location loc[N];
	uint8_t *dst[N];
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(put_full(l3, "cut", 60u + (uint32_t)i, SZ, 90u + (unsigned)i, &loc[i]), 0);
		dst[i] = abuf(SZ);
	}
	char rel[48], path[200];
	l3_obj_relpath(loc[1].digest.lo, loc[1].digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	ck_assert_int_eq(truncate(path, 4096 + 5000), 0);
	struct sc_l3_stats st0, st;
	sc_l3_stats(l3, &st0);
	for (int round = 0; round < 2; round++) {
		struct sc_l3_fill_req req[N], *rp[N], *done[N];
		for (int i = 0; i < N; i++) {
			req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = dst[i], .dst_bytes = SZ, .user_data = (uint64_t)i,
							  .flags = round ? SC_L3_FILL_BUFFERED : 0 };
			rp[i] = &req[i];
		}
		ck_assert_int_eq(sc_l3_fill_submit(l3, rp, 2), 2); /* 0 reads, 1 waits (its open and first read go) */
		int next = 2, got = 0;
		while (got < N) {
			int r = sc_l3_fill_reap(l3, done, N, 10 * 1000000000ll);
			ck_assert_msg(r > 0, "round %d: %d of %d ended, none more in 10 s", round, got, N);
			for (int j = 0; j < r; j++) {
				int i = (int)done[j]->user_data, rc = done[j]->result;
				if (i == 1)
					ck_assert_msg(rc == (round ? -ENOENT : -EBADMSG), "round %d: the cut object: %d", round, rc);
				else {
					uint8_t *want = malloc(SZ);
					fill_bytes(want, SZ, 90u + (unsigned)i);
					ck_assert_msg(rc == 0 && memcmp(want, dst[i], SZ) == 0, "round %d: fill %d: %d", round, i, rc);
					free(want);
				}
			}
			got += r;
			if (next < N && sc_l3_fill_submit(l3, rp + next, 1) == 1)
				next++;
		}
	}
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined + 1); /* round 0 moved it away: round 1 misses */
	ck_assert_int_eq(access(path, F_OK), -1);
	for (int i = 0; i < N; i++)
		free(dst[i]);
	sc_l3_close(l3);
}
END_TEST

/* The fills of a store on @dir whose O_DIRECT offsets align to 4096: NULL, or what went wrong. */
static const char *direct_fills_at_4k(const char *dir)
{
	static char why[200];
	struct sc_l3 *l3 = NULL;
	if (sc_l3_open(dir, &(struct sc_l3_opts){ .o_direct = SC_L3_ODIRECT_ON }, &l3))
		return "sc_l3_open failed";
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	struct sc_location loc;
	uint8_t *dst = abuf(200000), *want = malloc(100001);
	fill_bytes(want, 100001, 12);
	const char *err = NULL;
	if (st.dio_offset_align != 4096) {
		snprintf(why, sizeof(why), "the kernel reports O_DIRECT offsets aligned to %u, not 4096", st.dio_offset_align);
		err = why;
	} else if (put_full(l3, "4k", 9, 100001, 12, &loc)) {
		err = "the put failed";
	}
	/* room for the tail rounded up to 4096: direct; room for it rounded to 512 only (enough on a
	 * disk of 512-byte sectors): buffered; both exact */
	for (int k = 0; !err && k < 2; k++) {
		struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = k ? 100352 : 200000 }, *rp = &r, *done;
		memset(dst, 0, 200000);
		if (sc_l3_fill_submit(l3, &rp, 1) != 1 || sc_l3_fill_reap(l3, &done, 1, -1) != 1 || r.result)
			err = k ? "the buffered fill failed" : "the direct fill failed";
		else if (r.direct != !k)
			err = k ? "a fill with room for a 512-byte tail only was read direct" : "a fill with room was not direct";
		else if (memcmp(dst, want, 100001))
			err = "wrong bytes";
	}
	free(dst);
	free(want);
	sc_l3_close(l3);
	return err;
}

/* O_DIRECT on a disk whose logical sectors are 4 KiB (NVMe drives formatted 4Kn): offsets must
 * align to 4096, which the header block does, so fills read direct and exact. A loop device of
 * 4 KiB sectors with ext4 on it, made and removed here. */
START_TEST(o_direct_on_a_disk_of_4k_sectors)
{
	char img[128], mnt[128], dev[64] = "";
	snprintf(img, sizeof(img), "%s/disk.img", tmpdir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
	ck_assert_int_eq(mkdir(mnt, 0755), 0);
	ck_assert_int_eq(sc_test_sh("truncate -s 64M %s", img), 0);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "losetup -f --show -b 4096 %s 2>/dev/null", img);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	if (!fgets(dev, sizeof(dev), p))
		dev[0] = 0;
	pclose(p);
	dev[strcspn(dev, "\n")] = 0;
	if (!dev[0]) {
		sc_skip("o_direct_on_a_disk_of_4k_sectors: no loop device (losetup -b 4096 failed)");
		return;
	}
	const char *err = NULL;
	if (sc_test_sh("mkfs.ext4 -q %s && mount %s %s", dev, dev, mnt))
		err = "mkfs.ext4 or mount failed";
	else
		err = direct_fills_at_4k(mnt);
	sc_test_sh("umount %s 2>/dev/null", mnt);
	sc_test_sh("losetup -d %s", dev);
	ck_assert_msg(!err, "%s (%s)", err, dev);
}
END_TEST

START_TEST(o_direct_modes)
{
	struct sc_l3 *l3 = open_l3_direct();
	if (!l3)
		return;
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "d", 9, 100001, 9, &loc), 0);
	uint8_t *dst = abuf(200000);
	struct sc_l3_fill_req r = { .loc = &loc, .dst = dst, .dst_bytes = 200000 }, *rp = &r, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_int_eq(r.result, 0);
	ck_assert_int_eq(r.direct, 1);
	/* misaligned destination or no room for the rounded-up tail: buffered, still correct */
	r = (struct sc_l3_fill_req){ .loc = &loc, .dst = dst + 1, .dst_bytes = 199999 };
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_int_eq(r.result, 0);
	ck_assert_int_eq(r.direct, 0);
	uint8_t *want = malloc(100001);
	fill_bytes(want, 100001, 9);
	ck_assert(memcmp(want, dst + 1, 100001) == 0);
	r = (struct sc_l3_fill_req){ .loc = &loc, .dst = dst, .dst_bytes = 100001 };
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_int_eq(r.result, 0);
	ck_assert_int_eq(r.direct, 0);
	sc_l3_close(l3);
	/* auto: a warm file is read buffered, a cold one direct */
	l3 = open_l3(&(struct sc_l3_opts){ .o_direct = SC_L3_ODIRECT_AUTO });
	r = (struct sc_l3_fill_req){ .loc = &loc, .dst = dst, .dst_bytes = 200000 };
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_int_eq(r.direct, 0);
	char rel[48], path[256];
	l3_obj_relpath(loc.digest.lo, loc.digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	int fd = open(path, O_RDONLY);
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, -1), 1);
	ck_assert_int_eq(r.result, 0);
	ck_assert_int_eq(r.direct, 1);
	ck_assert(memcmp(want, dst, 100001) == 0);
	free(want);
	free(dst);
	sc_l3_close(l3);
}
END_TEST

START_TEST(fill_into_arena_heap)
{
	const char *name;
	/* on hugetlbfs when there is one: then the heap is registered memory and fills use READ_FIXED */
	struct sc_arena_opts ao = { .size_bytes = 64 << 20, .huge = _i ? SC_HUGE_OFF : SC_HUGE_AUTO };
	struct sc_arena *a = sc_test_arena_opts("l3heap", &ao, &name);
	struct sc_l3 *l3 = open_l3(NULL);
	ck_assert_int_eq(sc_l3_bind_arena(l3, a), 0);
	struct l3_ring *ring = l3_ring_get(l3);
	ck_assert_ptr_nonnull(ring);
	if (a->shm->page_size >= (2u << 20)) {
		ck_assert_msg(ring->reg_ok && ring->nreg == 2, "heap not registered (%d, %d)", ring->reg_ok, ring->nreg);
	} else {
		/* on 4 KiB pages pinning the heap would cost more than it saves: not registered */
		uint64_t hsize;
		const uint8_t *heap = shm_region(a->shm, SHM_REGION_HEAP, &hsize);
		for (int k = 0; k < ring->nreg; k++) {
			const uint8_t *b = ring->reg[k].iov_base;
			ck_assert_msg(b + ring->reg[k].iov_len <= heap || b >= heap + hsize,
				      "a 4 KiB-page heap is registered (range %d)", k);
		}
		if (!_i)
			sc_skip("no hugetlbfs arena: the registered-buffer path is not exercised");
	}
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "h", 77, 3 << 20, 77, &loc), 0);
	uint64_t off;
	int rc = shm_heap_alloc(a->shm, 4 << 20, 0, &off);
	ck_assert_msg(rc == 0, "heap alloc: %s", sc_strerror(rc));
	uint8_t *dst = shm_ptr(a->shm, off, 4 << 20);
	ck_assert_ptr_nonnull(dst);
	ck_assert_int_eq(sc_l3_fill(l3, &loc, dst, 4 << 20, 0), 0);
	uint8_t *want = malloc(3 << 20);
	fill_bytes(want, 3 << 20, 77);
	ck_assert(memcmp(want, dst, 3 << 20) == 0);
	memset(dst, 0, 3 << 20);
	ck_assert_int_eq(sc_l3_fill(l3, &loc, dst, 4 << 20, SC_L3_FILL_BUFFERED), 0);
	ck_assert(memcmp(want, dst, 3 << 20) == 0);
	free(want);
	shm_heap_free(a->shm, off);
	sc_l3_close(l3);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Set the object's last use @secs seconds back. */
static void age_object(const struct sc_location *loc, int secs)
{
	char rel[48], path[256];
	l3_obj_relpath(loc->digest.lo, loc->digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= secs;
	ts[1] = ts[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

START_TEST(budget_evicts_lru_to_85_percent)
{
	/* 10 objects of 100 KiB (+4 KiB header) fit a 1 MiB budget; the 11th forces eviction */
	struct sc_l3_opts o = { .budget_bytes = 1 << 20 };
	struct sc_l3 *l3 = open_l3(&o);
	struct sc_location loc[12];
	for (int i = 0; i < 9; i++) {
		ck_assert_int_eq(put_full(l3, "b", 10u + (uint32_t)i, 100 << 10, 500u + (unsigned)i, &loc[i]), 0);
		age_object(&loc[i], 3600 - i); /* as if put an hour ago, in this order */
	}
	/* use the two oldest: they become the most recent */
	check_fill(l3, &loc[0], 500, 0);
	check_fill(l3, &loc[1], 501, 0);
	ck_assert_int_eq(put_full(l3, "b", 30, 100 << 10, 530, &loc[10]), 0);
	ck_assert_int_eq(put_full(l3, "b", 31, 100 << 10, 531, &loc[11]), 0);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_uint_ge(st.evictions, 1);
	ck_assert_uint_le(st.bytes, 1 << 20);
	struct sc_location x;
	/* the filled ones and the newest survive; the oldest unfilled went first */
	ck_assert_int_eq(sc_l3_lookup(l3, loc[0].digest, &x), 0);
	ck_assert_int_eq(sc_l3_lookup(l3, loc[1].digest, &x), 0);
	ck_assert_int_eq(sc_l3_lookup(l3, loc[11].digest, &x), 0);
	ck_assert_int_eq(sc_l3_lookup(l3, loc[2].digest, &x), -ENOENT);
	/* the prefix of an evicted object no longer resolves: the next shorter one does */
	ck_assert_int_eq(sc_l3_locate_longest(l3, "b", toks, 12, &x), 11);
	/* reopening with a smaller budget evicts at once, down to 85% of it */
	sc_l3_close(l3);
	o.budget_bytes = 500 << 10;
	l3 = open_l3(&o);
	sc_l3_stats(l3, &st);
	ck_assert_uint_le(st.bytes, (500 << 10) / 100 * 85);
	ck_assert_int_eq(sc_l3_lookup(l3, loc[11].digest, &x), 0);
	/* explicit eviction */
	ck_assert_int_gt(sc_l3_evict_to(l3, 0), 0);
	sc_l3_stats(l3, &st);
	ck_assert_int_eq(st.bytes, 0);
	ck_assert_int_eq(st.objects, 0);
	sc_l3_close(l3);
}
END_TEST

/* Fork a writer with the store of its own (*@l3, in the child, where it returns 0; it exits 3
 * when the store cannot be opened); the parent gets the pid. */
static pid_t fork_writer(struct sc_l3 **l3)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0 && sc_l3_open(tmpdir, NULL, l3))
		_exit(3);
	return pid;
}

START_TEST(killed_put_leaves_nothing_visible)
{
	struct sc_l3 *cl3 = NULL;
	pid_t pid = fork_writer(&cl3);
	if (pid == 0) {
		shm_fault_arm("l3.putmany.synced"); /* its temp files written and synced, none renamed */
		put_full(cl3, "k", 40, 1 << 20, 40, NULL);
		_exit(4); /* not reached */
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* the temp files are there, but no object and no prefix */
	struct sc_l3_opts o = { .flags = SC_L3_OPEN_NO_RECONCILE };
	struct sc_l3 *l3 = open_l3(&o);
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_list(l3, NULL, NULL), 0);
	ck_assert_int_eq(sc_l3_locate_longest(l3, "k", toks, 40, &loc), 0);
	sc_l3_close(l3);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "test -n \"$(find %s -name '.tmp-*')\"", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	/* nobody holds its writer's lock, but it was written a moment ago: a writer may be in the
	 * instant between its create and its lock, so reconciliation leaves it for now */
	l3 = open_l3(NULL);
	ck_assert_int_eq(system(cmd), 0);
	sc_l3_close(l3);
	/* once it has not been written for a while, reconciliation removes it */
	snprintf(cmd, sizeof(cmd), "find %s -name '.tmp-*' -exec touch -d '-1 minute' {} +", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	l3 = open_l3(NULL);
	snprintf(cmd, sizeof(cmd), "test -z \"$(find %s -name '.tmp-*')\"", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	/* and the same put now works */
	ck_assert_int_eq(put_full(l3, "k", 40, 1 << 20, 40, &loc), 0);
	check_fill(l3, &loc, 40, 0);
	sc_l3_close(l3);
}
END_TEST

START_TEST(real_kill_during_big_puts)
{
	/* a writer killed -9 at an arbitrary moment: whatever is visible verifies */
	struct sc_l3 *cl3 = NULL;
	pid_t pid = fork_writer(&cl3);
	if (pid == 0) {
		for (unsigned i = 0;; i++)
			put_full(cl3, "big", 10 + i % 4000, 8 << 20, i, NULL);
	}
	/* kill it inside a put: once a temp file of its exists */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!sc_test_l3_temps(tmpdir, NULL, NULL)) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		ck_assert_msg(now.tv_sec - t0.tv_sec < 30, "the writer made no temp file in 30 s");
		sched_yield();
	}
	kill(pid, SIGKILL);
	sc_test_wait_killed(pid);
	/* its writes in flight land after waitpid(): its temp file stays locked until they did, and
	 * only then may its mtime be set back. Once it is older than the writer's window between
	 * create and lock, reconciliation removes it */
	ck_assert_int_eq(sc_test_wait_l3_temps_unlocked(tmpdir, 30000), 0);
	ck_assert_int_eq(sc_test_sh("find %s -name '.tmp-*' -exec touch -d '-1 minute' {} +", tmpdir), 0);
	struct sc_l3 *l3 = open_l3(NULL);
	ck_assert_int_eq(sc_l3_verify(l3, NULL, NULL), 0);
	ck_assert_int_eq(sc_test_l3_temps(tmpdir, NULL, NULL), 0);
	sc_l3_close(l3);
}
END_TEST

START_TEST(concurrent_puts_from_processes)
{
	enum { P = 4, K = 12 };
	pid_t pids[P];
	for (int p = 0; p < P; p++) {
		pids[p] = fork();
		ck_assert_int_ge(pids[p], 0);
		if (pids[p] == 0) {
			struct sc_l3 *l3 = NULL;
			if (sc_l3_open(tmpdir, NULL, &l3))
				_exit(3);
			int bad = 0;
			for (int i = 0; i < K; i++) {
				/* everyone puts the shared set, plus one of its own */
				bad |= put_full(l3, "mp", 100u + (uint32_t)i, 200000, (unsigned)i, NULL) != 0;
				bad |= put_full(l3, "mp", 1000u + (uint32_t)(p * K + i), 3000, 9000u + (unsigned)(p * K + i), NULL) != 0;
			}
			sc_l3_close(l3);
			_exit(bad);
		}
	}
	for (int p = 0; p < P; p++) {
		int status;
		waitpid(pids[p], &status, 0);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	struct sc_l3 *l3 = open_l3(NULL);
	ck_assert_int_eq(sc_l3_list(l3, NULL, NULL), K + P * K);
	ck_assert_int_eq(sc_l3_verify(l3, NULL, NULL), 0);
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_locate_longest(l3, "mp", toks, 100 + K - 1, &loc), 100 + K - 1);
	check_fill(l3, &loc, K - 1, 0);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_int_eq(st.objects, K + P * K);
	sc_l3_close(l3);
}
END_TEST

START_TEST(files_and_dirs_are_private)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "p", 5, 100, 5, &loc), 0);
	char rel[48], path[256];
	struct stat sb;
	l3_obj_relpath(loc.digest.lo, loc.digest.hi, rel);
	snprintf(path, sizeof(path), "%s/objects/%s", tmpdir, rel);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	snprintf(path, sizeof(path), "%s/objects", tmpdir);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0700);
	sc_l3_close(l3);
}
END_TEST

START_TEST(regression_wrong_location_does_not_quarantine)
{
	/* a fill given a location that does not describe the object (wrong kind or sizes) fails
	 * with -EINVAL and leaves the good object alone (it used to be quarantined) */
	struct sc_l3 *l3 = open_l3(NULL);
	uint8_t b[20000];
	memset(b, 7, sizeof(b));
	int32_t t[3] = { 1, 2, 3 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { sizeof(b) } };
	struct sc_l3_put_args a = { .ns = "n", .tokens = t, .token_count = 3, .payload = &p };
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_put(l3, &a, &loc), 0);
	void *dst = aligned_alloc(4096, 24576);
	struct sc_location bad = loc;
	bad.kind = SC_PAYLOAD_RECURRENT_ONLY;
	ck_assert_int_eq(sc_l3_fill(l3, &bad, dst, 24576, 0), -EINVAL);
	bad = loc;
	bad.sec_len[0] -= 4096;
	bad.payload_bytes -= 4096;
	ck_assert_int_eq(sc_l3_fill(l3, &bad, dst, 24576, 0), -EINVAL);
	ck_assert_int_eq(sc_l3_fill(l3, &loc, dst, 24576, 0), 0);
	ck_assert(memcmp(dst, b, sizeof(b)) == 0);
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.quarantined, 0);
	free(dst);
	sc_l3_close(l3);
}
END_TEST

/* Defect 4: a read-only user of a mistyped path created the directory tree. With
 * SC_L3_OPEN_NO_CREATE nothing is created: not a missing directory, not a store in an existing
 * directory that is not one. */
START_TEST(regression_no_create_creates_nothing)
{
	char path[128];
	struct sc_l3 *l3;
	struct sc_l3_opts o = { .flags = SC_L3_OPEN_NO_CREATE };
	snprintf(path, sizeof(path), "%s/nope/deeper", tmpdir);
	ck_assert_int_eq(sc_l3_open(path, &o, &l3), -ENOENT);
	snprintf(path, sizeof(path), "%s/nope", tmpdir);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(sc_l3_open(tmpdir, &o, &l3), -ENOENT); /* an empty directory: not a store */
	ck_assert_int_eq(count_dir("."), 0);
	o.flags |= SC_L3_OPEN_NO_RECONCILE;
	ck_assert_int_eq(sc_l3_open(tmpdir, &o, &l3), -ENOENT);
	ck_assert_int_eq(count_dir("."), 0);
	l3 = open_l3(NULL); /* creating is the default */
	sc_l3_close(l3);
	o.flags = SC_L3_OPEN_NO_CREATE;
	ck_assert_int_eq(sc_l3_open(tmpdir, &o, &l3), 0);
	sc_l3_close(l3);
	o.flags = 0x80;
	ck_assert_int_eq(sc_l3_open(tmpdir, &o, &l3), -EINVAL);
}
END_TEST

/* Files planted under an object's or a prefix entry's name (a FIFO, a directory, a link): open
 * and reconciliation neither block on them nor move them; a fill refuses them; verify reports
 * each as bad and moves it to quarantine/ (a put can then write the object). */
START_TEST(planted_files_never_block)
{
	struct sc_l3 *l3 = open_l3(NULL);
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "f", 6, 5000, 6, &loc), 0);
	sc_l3_close(l3);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "cd %s && mkdir -p objects/ab prefix/ef && "
		 "mkfifo objects/ab/abababababababababababababababab.sc3 prefix/ef/efefefefefefefefefefefefefefefef.pfx && "
		 "mkdir objects/ab/abababababababababababababababac.sc3 && "
		 "ln -s /etc/passwd objects/ab/abababababababababababababababad.sc3", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(10);
		struct sc_l3 *x;
		struct sc_location l;
		int ok = sc_l3_open(tmpdir, NULL, &x) == 0;
		ok = ok && sc_l3_locate_longest(x, "f", toks, 6, &l) == 6 && sc_l3_list(x, NULL, NULL) == 1;
		struct sc_location fake = l;
		fake.digest = (struct sc_digest){ 0xabababababababab, 0xabababababababab };
		void *dst = aligned_alloc(4096, 8192);
		ok = ok && sc_l3_fill(x, &fake, dst, 8192, 0) == -EBADMSG;
		free(dst);
		struct stat st;
		char p[300];
		snprintf(p, sizeof(p), "%s/objects/ab/abababababababababababababababac.sc3", tmpdir);
		ok = ok && lstat(p, &st) == 0; /* open and reconciliation left the planted directory */
		ok = ok && sc_l3_verify(x, NULL, NULL) == 3;
		sc_l3_close(x);
		_exit(ok ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert_msg(WIFEXITED(status), "blocked on a planted file (signal %d)", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	struct stat sb;
	snprintf(cmd, sizeof(cmd), "%s/objects/ab/abababababababababababababababac.sc3", tmpdir);
	ck_assert_int_eq(lstat(cmd, &sb), -1); /* verify moved the planted directory to quarantine/ */
	snprintf(cmd, sizeof(cmd), "%s/prefix/ef/efefefefefefefefefefefefefefefef.pfx", tmpdir);
	ck_assert_int_eq(lstat(cmd, &sb), 0);
	ck_assert(S_ISFIFO(sb.st_mode));
}
END_TEST

/* A store shared by a group: --mode/--group (file_mode, gid) give every file and directory it
 * creates exactly that mode and group, whatever the umask. */
START_TEST(group_shared_modes)
{
	gid_t g = getgid();
	if (sc_test_is_root()) {
		g = 65534; /* nogroup: root may give files to any group */
	}
	mode_t old = umask(077);
	struct sc_l3_opts o = { .file_mode = 0660, .gid = g };
	struct sc_l3 *l3 = open_l3(&o);
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "g", 7, 3000, 7, &loc), 0);
	sc_l3_close(l3);
	umask(old);
	char cmd[400];
	/* every file 0660 and every directory 2770, all of group g */
	snprintf(cmd, sizeof(cmd), "test -z \"$(find %s -mindepth 1 \\( -type f ! -perm 0660 \\) -o \\( -type d ! -perm 2770 \\) "
		 "-o ! -group %u)\"", tmpdir, (unsigned)g);
	ck_assert_msg(system(cmd) == 0, "modes or group wrong: %s", cmd);
	if (sc_test_is_root()) {
		/* a group the caller is not in: refused by the kernel, reported as -EPERM */
		pid_t pid = fork();
		if (pid == 0) {
			if (setgid(65534) || setuid(65534))
				_exit(3);
			char sub[200];
			snprintf(sub, sizeof(sub), "/tmp/sc-l3-nobody-%d", (int)getpid());
			struct sc_l3_opts oo = { .file_mode = 0660, .gid = 1 };
			struct sc_l3 *x;
			int rc = sc_l3_open(sub, &oo, &x);
			rmdir(sub);
			_exit(rc == -EPERM ? 0 : 1);
		}
		int status;
		waitpid(pid, &status, 0);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	struct sc_l3_opts bad = { .gid = -5 };
	ck_assert_int_eq(sc_l3_open(tmpdir, &bad, &l3), -EINVAL);
}
END_TEST

/* The same in a directory shared by several hosts (SC_L3_OPEN_SHARED): what shared mode adds
 * (DIR/shared, the janitor's lease, record, log and LRU table, the access records, this host's
 * counters in state_dir) has the store's mode and group too, so that every member can be janitor. */
START_TEST(group_shared_modes_in_shared_mode)
{
	gid_t g = sc_test_is_root() ? 65534 : getgid();
	mode_t old = umask(077);
	char sd[300];
	snprintf(sd, sizeof(sd), "%s/hoststate", tmpdir);
	ck_assert_int_eq(mkdir(sd, 0700), 0);
	struct sc_l3_opts o = { .file_mode = 0660, .gid = g, .flags = SC_L3_OPEN_SHARED, .host_id = "hostA",
				.state_dir = sd, .visibility_ms = 1 };
	struct sc_l3 *l3 = open_l3(&o);
	struct sc_location loc;
	ck_assert_int_eq(put_full(l3, "g", 7, 3000, 7, &loc), 0);
	ck_assert_int_eq(put_full(l3, "g", 7, 3000, 7, &loc), 0); /* a repeated put: a use, recorded */
	ck_assert_int_eq(put_full(l3, "g", 5, 5000, 8, &loc), 0);
	sc_l3_close(l3);
	o.budget_bytes = 4096 + 3000; /* the janitor evicts one: its log is written */
	l3 = open_l3(&o);
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(l3, SC_L3_JANITOR_FULL, &r), 0);
	ck_assert_uint_ge(r.evicted, 1);
	sc_l3_close(l3);
	umask(old);
	chmod(sd, 02770);
	if (chown(sd, (uid_t)-1, g)) {
	}
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "test -e %s/janitor -a -e %s/janitor.log -a -e %s/lru -a -e %s/shared -a -d %s/access",
		 tmpdir, tmpdir, tmpdir, tmpdir, tmpdir);
	ck_assert_msg(system(cmd) == 0, "shared-mode files missing: %s", cmd);
	snprintf(cmd, sizeof(cmd), "test -z \"$(find %s -mindepth 1 \\( -type f ! -perm 0660 \\) -o \\( -type d ! -perm 2770 \\) "
		 "-o ! -group %u)\"", tmpdir, (unsigned)g);
	if (system(cmd) != 0) {
		snprintf(cmd, sizeof(cmd), "find %s -mindepth 1 \\( -type f ! -perm 0660 \\) -o \\( -type d ! -perm 2770 \\) -o ! -group %u | "
			 "xargs ls -ld >&2", tmpdir, (unsigned)g);
		ck_assert_int_eq(system(cmd), 0);
		ck_abort_msg("modes or group wrong in a shared directory (listed above)");
	}
}
END_TEST

Suite *l3_suite(void)
{
	Suite *s = suite_create("l3");
	TCase *tc = tcase_create("store");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, round_trip_every_kind);
	tcase_add_test(tc, locate_longest_first);
	tcase_add_test(tc, kept_files_reused_and_never_stale);
	tcase_add_test(tc, an_object_file_opened_as_descriptor_0_is_filled_kept_and_closed);
	tcase_add_test(tc, a_forked_childs_close_closes_its_copy_of_a_kept_file_as_descriptor_0);
	tcase_add_test(tc, kept_files_by_default_small_under_a_budget_and_let_go_when_removed);
	tcase_add_test(tc, prefix_check_ignores_what_the_stack_held);
	tcase_add_test(tc, closing_a_handle_releases_its_ring_and_files);
	tcase_add_test(tc, a_forked_child_closes_handles_in_any_order_and_fills_again);
	tcase_add_test(tc, a_forked_childs_close_closes_its_copies_of_fills_in_flight);
	tcase_add_test(tc, a_threads_fill_is_reaped_on_its_ring_after_five_other_handles);
	tcase_add_test(tc, a_fill_without_a_descriptor_to_spare_fails_cleanly);
	tcase_add_test(tc, registering_more_memory_than_a_ring_names);
	tcase_add_test(tc, put_is_idempotent_and_refusals_counted);
	tcase_add_test(tc, every_corruption_is_quarantined);
	tcase_add_test(tc, every_corruption_of_a_file_opened_on_the_ring_is_quarantined);
	tcase_add_test(tc, a_failed_stat_on_the_ring_is_a_miss_or_its_error);
	tcase_add_test(tc, a_refused_submission_takes_the_fills_or_reports_the_error);
	tcase_add_test(tc, a_reap_whose_time_runs_out_returns_nothing_done);
	tcase_add_test(tc, a_fill_with_a_deadline_leaves_the_ended_fills_whole);
	tcase_add_test(tc, a_kept_file_serves_only_its_own_digest);
	tcase_add_test(tc, reaps_take_at_most_max_and_a_lone_fill_waits_for_a_full_ring);
	tcase_add_test(tc, an_eviction_through_one_handle_leaves_another_handles_kept_files);
	tcase_add_test(tc, a_reap_interrupted_by_signals_waits_on);
	tcase_add_loop_test(tc, a_close_interrupted_by_signals_waits_for_the_read_in_flight, 0, 2);
	tcase_add_test(tc, a_put_whose_waits_are_interrupted_waits_again);
	tcase_add_test(tc, a_fill_whose_waits_succeed_never_yields);
	tcase_add_loop_test(tc, a_fill_or_put_finding_no_submission_entry_fails_cleanly, 0, 2);
	tcase_add_test(tc, a_kept_file_busy_through_a_removal_is_not_used_after_it);
	tcase_add_test(tc, a_close_whose_wait_fails_closes_the_files_of_its_fills);
	tcase_add_test(tc, a_close_whose_wait_fails_closes_a_busy_kept_file_once);
	tcase_add_test(tc, a_fill_ending_while_its_set_of_kept_files_is_all_busy_keeps_nothing);
	tcase_add_test(tc, a_close_leaves_another_threads_fill_its_file);
	tcase_add_loop_test(tc, kept_files_are_told_apart_by_both_halves_of_the_digest, 0, 2);
	tcase_add_test(tc, a_kept_file_in_use_is_not_closed_to_make_room);
	tcase_add_test(tc, a_busy_kept_file_is_not_shared_by_a_second_fill);
	tcase_add_test(tc, a_full_sets_busy_file_is_not_replaced);
	tcase_add_test(tc, an_eviction_closes_idle_kept_files_at_once_and_leaves_busy_ones_to_their_fill);
	tcase_add_loop_test(tc, an_eviction_closes_idle_kept_files_after_other_handles, 0, 2);
	tcase_add_test(tc, a_round_puts_the_io_wq_worker_limit_back);
	tcase_add_test(tc, a_round_the_ring_cannot_take_whole_cancels_the_rest);
	tcase_add_test(tc, a_file_opened_on_the_ring_as_descriptor_0_is_read);
	tcase_add_test(tc, a_header_cut_short_read_again_buffered_ends_at_the_files_end);
	tcase_add_test(tc, corrupt_header_found_by_locate_and_reconcile);
	tcase_add_test(tc, hostile_prefix_entries_and_links);
	tcase_add_test(tc, prefix_entries_of_the_wrong_size_are_refused);
	tcase_add_test(tc, batch_fills);
	tcase_add_test(tc, fills_beyond_the_depth_wait_and_start_as_reads_end);
	tcase_add_test(tc, a_cut_object_waiting_behind_others_is_judged_as_any);
	tcase_add_test(tc, batch_fills_with_missing_and_odd_files);
	tcase_add_test(tc, o_direct_modes);
	tcase_add_test(tc, o_direct_on_a_disk_of_4k_sectors);
	tcase_add_test(tc, o_direct_fills_are_exact);
	tcase_add_test(tc, o_direct_reads_refused_are_read_again_buffered);
	tcase_add_test(tc, a_fill_that_cannot_turn_buffered_ends_with_the_error);
	tcase_add_test(tc, an_open_file_is_switched_to_the_mode_each_fill_reports);
	tcase_add_test(tc, a_process_that_may_lock_no_memory_fills_with_plain_reads);
	tcase_add_test(tc, kept_files_are_swept_at_most_once_a_second_and_at_once_after_a_removal);
	tcase_add_loop_test(tc, a_ring_s_completion_queue_holds_every_read_in_flight, 0, 3);
	tcase_add_test(tc, a_lone_fill_opens_its_file_itself_and_fills_together_open_on_the_ring);
	tcase_add_test(tc, a_wrong_location_is_refused_through_a_kept_file_too);
	tcase_add_test(tc, an_object_file_as_descriptor_0_is_closed_when_not_kept_or_when_oldest);
	tcase_add_test(tc, the_fill_model_takes_its_samples_from_the_documented_sizes);
	tcase_add_test(tc, registered_ranges_are_used_to_their_bounds_and_not_after_a_refusal);
	tcase_add_test(tc, a_range_registered_again_with_another_length_is_its_own);
	tcase_add_test(tc, eight_registered_ranges_are_all_registered);
	tcase_add_test(tc, one_kept_file_per_object_descriptor_0_included);
	tcase_add_test(tc, a_fill_judges_the_file_it_read_not_what_its_name_names_later);
	tcase_add_test(tc, a_full_set_of_kept_files_replaces_its_least_recently_used_descriptor_0_included);
	tcase_add_test(tc, at_the_limit_the_least_recently_used_kept_file_goes);
	tcase_add_test(tc, fills_that_wait_for_a_slot_all_open_their_files_meanwhile);
	tcase_add_loop_test(tc, fill_into_arena_heap, 0, 2);
	tcase_add_test(tc, budget_evicts_lru_to_85_percent);
	tcase_add_test(tc, killed_put_leaves_nothing_visible);
	tcase_add_test(tc, real_kill_during_big_puts);
	tcase_add_test(tc, concurrent_puts_from_processes);
	tcase_add_test(tc, files_and_dirs_are_private);
	tcase_add_test(tc, regression_wrong_location_does_not_quarantine);
	tcase_add_test(tc, regression_no_create_creates_nothing);
	tcase_add_test(tc, planted_files_never_block);
	tcase_add_test(tc, group_shared_modes);
	tcase_add_test(tc, group_shared_modes_in_shared_mode);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(l3_suite)
