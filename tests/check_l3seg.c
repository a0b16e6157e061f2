/* tests/check_l3seg.c — segmented L3 objects (lib/l3/segstore.c): segments stored once, fills byte for
 * byte, a corrupt segment quarantining every object that uses it (and their L2 mirrors), missing
 * and cut segments as misses, corrupted manifests refused, the budget in physical bytes, the
 * sweep of unreferenced segments and its race with a put that reuses one (a forked putter held
 * between its reuse check and its manifest), verification naming a missing segment. Real files,
 * real io_uring, real processes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "l3_hosts.h"
#include "sc_check.h"
#include "../lib/l2/l2.h"
#include "../lib/l3/l3.h"
#include "../lib/l3/format.h"
#include "../lib/l3/segread.h"
#include "../lib/l3/segstore.h"
#include "../shm/fault.h"

#define SEG (64u << 10)

static char tmpdir[64];
static int32_t toks[4096];

static void rm_tmp(void)
{
	if (tmpdir[0])
		sc_test_rm_tree(tmpdir);
	tmpdir[0] = 0;
}

static void setup(void)
{
	h_tokens(7, toks, 4096);
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/sc-l3seg-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	atexit(rm_tmp); /* a failed assertion exits the test process without the teardown */
}

static struct sc_l3 *open_seg(const struct sc_l3_opts *o, uint64_t seg)
{
	struct sc_l3 *l3 = NULL;
	int rc = sc_l3_open(tmpdir, o, &l3);
	ck_assert_msg(rc == 0, "sc_l3_open: %s", sc_strerror(rc));
	if (seg)
		ck_assert_int_eq(sc_l3_set_segment_bytes(l3, seg), 0);
	return l3;
}

/* A payload of @nseg segments: the first @shared from seed 1 (the same in every payload), the
 * rest from @seed, plus @tail bytes (a short last segment). */
static uint8_t *payload(uint32_t nseg, uint32_t shared, unsigned seed, size_t tail, size_t *n)
{
	*n = (size_t)nseg * SEG + tail;
	uint8_t *b = malloc(*n);
	for (uint32_t i = 0; i < nseg; i++)
		h_bytes(i < shared ? 1000 + i : seed * 100 + i, b + (size_t)i * SEG, SEG);
	h_bytes(seed + 7, b + (size_t)nseg * SEG, tail);
	return b;
}

/* Two payloads of @nseg segments sharing the first @shared, put as "a" and "b" (10 tokens). */
struct two {
	uint8_t *a, *b;
	size_t na, nb;
	struct sc_location la, lb;
};

static int put_buf(struct sc_l3 *l3, const char *ns, uint32_t ntok, const uint8_t *b, size_t n, struct sc_location *loc)
{
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { b }, .sec_len = { n } };
	struct sc_l3_put_args a = { .ns = ns, .tokens = toks, .token_count = ntok, .payload = &pl };
	return sc_l3_put(l3, &a, loc);
}

/* A payload of @nseg segments from @seed plus @tail bytes (payload()), put as "a" at *@la: the
 * payload, *@n bytes. */
static uint8_t *put_payload(struct sc_l3 *l3, uint32_t nseg, unsigned seed, size_t tail, size_t *n,
			    struct sc_location *la)
{
	uint8_t *a = payload(nseg, 0, seed, tail, n);
	ck_assert_int_eq(put_buf(l3, "a", 10, a, *n, la), 0);
	return a;
}

static void put_two(struct sc_l3 *l3, struct two *t, uint32_t nseg, uint32_t shared)
{
	t->a = payload(nseg, shared, 2, 0, &t->na);
	t->b = payload(nseg, shared, 3, 0, &t->nb);
	ck_assert_int_eq(put_buf(l3, "a", 10, t->a, t->na, &t->la), 0);
	ck_assert_int_eq(put_buf(l3, "b", 10, t->b, t->nb, &t->lb), 0);
}

static void two_free(struct two *t)
{
	free(t->a);
	free(t->b);
}

/* A child process held until the parent lets it go: it says it is there (hold), the parent hears
 * it (held_wait) and later lets it go on (held_go). */
struct held {
	int up[2], down[2];
	pid_t pid;
};

static void held_fork(struct held *h)
{
	ck_assert_int_eq(pipe(h->up), 0);
	ck_assert_int_eq(pipe(h->down), 0);
	h->pid = fork();
	ck_assert_int_ge(h->pid, 0);
}

static int hold(struct held *h)
{
	char c = 'h';
	return write(h->up[1], &c, 1) == 1 && read(h->down[0], &c, 1) == 1 ? 0 : -1;
}

static void held_wait(struct held *h)
{
	char c;
	ck_assert_int_eq(read(h->up[0], &c, 1), 1);
}

static void held_end(struct held *h, int go)
{
	if (go)
		ck_assert_int_eq(write(h->down[1], "g", 1), 1);
	else
		kill(h->pid, SIGKILL);
	int status;
	ck_assert_int_eq(waitpid(h->pid, &status, 0), h->pid);
	ck_assert_msg(!go || (WIFEXITED(status) && WEXITSTATUS(status) == 0), "child: %x", status);
	close(h->up[0]), close(h->up[1]), close(h->down[0]), close(h->down[1]);
}

static int fill_cmp(struct sc_l3 *l3, const struct sc_location *loc, const uint8_t *want, uint32_t flags)
{
	size_t cap = (loc->payload_bytes + 4095) / 4096 * 4096;
	uint8_t *dst = aligned_alloc(4096, cap);
	memset(dst, 0xa5, cap);
	int rc = sc_l3_fill(l3, loc, dst, cap, flags);
	if (rc == 0)
		ck_assert_msg(memcmp(dst, want, loc->payload_bytes) == 0, "a fill returned wrong bytes");
	free(dst);
	return rc;
}

static void seg_path(uint64_t lo, uint64_t hi, char *out, size_t n)
{
	char hex[33];
	l3_digest_hex(lo, hi, hex);
	snprintf(out, n, "%s/seg/%.2s/%s.seg", tmpdir, hex, hex);
}

static void seg_path_of(const uint8_t *bytes, size_t len, char *out, size_t n)
{
	struct sc_digest d = sc_digest(bytes, len);
	seg_path(d.lo, d.hi, out, n);
}

/* Does @dir hold a file whose name starts with @prefix and ends with @suffix? */
static int dir_has(const char *dir, const char *prefix, const char *suffix)
{
	DIR *d = opendir(dir);
	ck_assert_msg(d != NULL, "%s: %s", dir, strerror(errno));
	struct dirent *e;
	int found = 0;
	size_t np = strlen(prefix), ns = strlen(suffix);
	while (!found && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		found = n >= np + ns && !strncmp(e->d_name, prefix, np) && !strcmp(e->d_name + n - ns, suffix);
	}
	closedir(d);
	return found;
}

static void obj_path(const struct sc_location *loc, char *out, size_t n)
{
	char rel[48];
	l3_obj_relpath(loc->digest.lo, loc->digest.hi, rel);
	snprintf(out, n, "%s/objects/%s", tmpdir, rel);
}

static uint64_t file_size(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static uint64_t file_size_fd(int fd)
{
	struct stat sb;
	return fstat(fd, &sb) == 0 ? (uint64_t)sb.st_size : UINT64_MAX;
}

/* Files under DIR/<sub> (two levels) and their bytes; names starting with '.' are not counted. */
static uint64_t du(const char *sub, uint64_t *files)
{
	char path[256];
	uint64_t bytes = 0;
	*files = 0;
	for (int i = 0; i < 256; i++) {
		snprintf(path, sizeof(path), "%s/%s/%02x", tmpdir, sub, i);
		DIR *d = opendir(path);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char f[600];
			snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
			bytes += file_size(f);
			(*files)++;
		}
		closedir(d);
	}
	return bytes;
}

/* Every segment file's mtime @secs seconds back (as if written long ago). */
static void age_segments(int secs)
{
	char path[256];
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= secs;
	ts[1] = ts[0];
	for (int i = 0; i < 256; i++) {
		snprintf(path, sizeof(path), "%s/seg/%02x", tmpdir, i);
		DIR *d = opendir(path);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				ck_assert_int_eq(utimensat(dirfd(d), e->d_name, ts, 0), 0);
		closedir(d);
	}
}

static void age_file(const char *p, int secs)
{
	struct timespec ts[2];
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= secs;
	ts[1] = ts[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
}

START_TEST(shared_leading_segments_stored_once)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t na, nb;
	/* A: 10 segments + a 1000-byte tail; B: A's first 8 segments, then 4 of its own and a tail */
	uint8_t *a = payload(10, 8, 2, 1000, &na), *b = payload(12, 8, 3, 5000, &nb);
	struct sc_location la, lb;
	ck_assert_int_eq(put_buf(l3, "a", 100, a, na, &la), 0);
	ck_assert_int_eq(put_buf(l3, "b", 120, b, nb, &lb), 0);
	/* the objects are manifests: header block + 24 bytes per segment */
	ck_assert_uint_eq(la.file_bytes, 4096 + 11 * 24);
	ck_assert_uint_eq(lb.file_bytes, 4096 + 13 * 24);
	char pa[256], pb[256];
	obj_path(&la, pa, sizeof(pa));
	obj_path(&lb, pb, sizeof(pb));
	ck_assert_uint_eq(file_size(pa), la.file_bytes);
	ck_assert_uint_eq(file_size(pb), lb.file_bytes);
	/* segments: 8 shared + 2 + 1 tail of A + 4 + 1 tail of B, each once */
	uint64_t files, seg_bytes = du("seg", &files);
	ck_assert_uint_eq(files, 8 + 3 + 5);
	ck_assert_uint_eq(seg_bytes, (uint64_t)(8 + 2 + 4) * SEG + 1000 + 5000);
	uint64_t physical = seg_bytes + la.file_bytes + lb.file_bytes, logical = 2 * 4096 + na + nb;
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.bytes, physical);
	ck_assert_uint_eq(st.physical_bytes, physical);
	ck_assert_uint_eq(st.logical_bytes, logical);
	ck_assert_uint_eq(st.saved_bytes, logical - physical);
	ck_assert_uint_eq(st.segments, 16);
	ck_assert_uint_eq(st.segment_bytes, SEG);
	/* byte for byte, buffered and O_DIRECT-capable, and through a fresh handle (reconciled: the
	 * same counts from a scan) */
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	ck_assert_int_eq(fill_cmp(l3, &lb, b, SC_L3_FILL_BUFFERED), 0);
	/* a manifest's file is never kept open (its header must be read to know it is one) */
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.fills, 3);
	ck_assert_uint_eq(st.fills_kept, 0);
	/* a put of A again stores nothing */
	ck_assert_int_eq(put_buf(l3, "a2", 50, a, na, NULL), 0);
	ck_assert_uint_eq(du("seg", &files), seg_bytes);
	sc_l3_close(l3);
	l3 = open_seg(NULL, 0);
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.bytes, physical);
	ck_assert_uint_eq(st.logical_bytes, logical);
	ck_assert_uint_eq(st.segments, 16);
	ck_assert_uint_eq(st.segment_bytes, SEG); /* recorded in the store: a new handle reads it */
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_locate_longest(l3, "b", toks, 4096, &loc), 120);
	ck_assert_int_eq(fill_cmp(l3, &loc, b, 0), 0);
	/* a payload of one segment or less stays whole (version 1) */
	size_t nc;
	uint8_t *c = payload(1, 0, 9, 0, &nc);
	struct sc_location lc;
	ck_assert_int_eq(put_buf(l3, "c", 10, c, nc, &lc), 0);
	ck_assert_uint_eq(lc.file_bytes, 4096 + SEG);
	ck_assert_int_eq(fill_cmp(l3, &lc, c, 0), 0);
	sc_l3_close(l3);
	free(a), free(b), free(c);
}
END_TEST

/* A whole object (version 1) whose payload is a whole number of manifest entries (24 bytes each)
 * looks like a manifest by its size alone: a scan reads its header and counts it whole, at its
 * size, in a fresh handle's logical and physical bytes. */
START_TEST(a_whole_object_the_size_of_a_manifest_is_counted_whole)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t n = 24 * 1000;
	uint8_t *a = malloc(n);
	for (size_t i = 0; i < n; i++)
		a[i] = (uint8_t)(i * 7 + 1);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "w", 10, a, n, &la), 0);
	ck_assert_uint_eq(la.file_bytes, 4096 + n); /* whole: header block + payload */
	ck_assert_uint_eq((la.file_bytes - 4096) % sizeof(struct l3_seg_ent), 0);
	sc_l3_close(l3);
	l3 = open_seg(NULL, 0);
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.objects, 1);
	ck_assert_uint_eq(st.bytes, la.file_bytes);
	ck_assert_uint_eq(st.logical_bytes, la.file_bytes);
	ck_assert_uint_eq(st.segments, 0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	sc_l3_close(l3);
	free(a);
}
END_TEST

START_TEST(whole_objects_keep_reading_and_option_refusals)
{
	/* segments off (the default): today's format; then on: both kinds read */
	struct sc_l3 *l3 = open_seg(NULL, 0);
	uint64_t sb = 1;
	ck_assert_int_eq(sc_l3_segment_bytes(l3, &sb), 0);
	ck_assert_uint_eq(sb, 0);
	size_t na, nb;
	uint8_t *a = payload(6, 0, 4, 10, &na), *b = payload(6, 3, 5, 10, &nb);
	struct sc_location la, lb;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, na, &la), 0);
	ck_assert_uint_eq(la.file_bytes, 4096 + na);
	int bad[] = { 1, 4096, SEG - 4096, SEG + 100, (int)(SEG / 2) };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(sc_l3_set_segment_bytes(l3, (uint64_t)bad[i]), -EINVAL);
	ck_assert_int_eq(sc_l3_set_segment_bytes(NULL, SEG), -EINVAL);
	ck_assert_int_eq(sc_l3_set_segment_bytes(l3, 2 * SEG), 0);
	ck_assert_int_eq(put_buf(l3, "b", 10, b, nb, &lb), 0);
	ck_assert_uint_eq(lb.file_bytes, 4096 + 4 * 24); /* 3 segments of 128 KiB and a 10-byte one */
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	ck_assert_int_eq(fill_cmp(l3, &lb, b, 0), 0);
	/* verification reads both kinds */
	ck_assert_int_eq(sc_l3_verify(l3, NULL, NULL), 0);
	sc_l3_close(l3);
	/* a damaged option file is refused with a clear error, not guessed */
	char p[256];
	snprintf(p, sizeof(p), "%s/segments", tmpdir);
	sc_test_flip_byte(p, 16, 0x40);
	struct sc_l3 *x = NULL;
	ck_assert_int_eq(sc_l3_open(tmpdir, NULL, &x), -EBADMSG);
	free(a), free(b);
}
END_TEST

/* The header block (aligned, malloc'd) of a segmented object of the manifest @ent[0..n) and a
 * payload of @payload bytes whose digest is @d, built in memory (@n 0: a whole object's). */
static uint8_t *seg_block_of(struct l3_seg_ent *ent, uint32_t n, uint64_t payload, struct sc_digest d)
{
	static uint8_t one;
	uint8_t *block = aligned_alloc(4096, L3_HDR_BLOCK);
	int32_t t[4] = { 1, 2, 3, 4 };
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { &one }, .sec_len = { payload } };
	struct sc_l3_put_args a = { .ns = "m", .tokens = t, .token_count = 4, .payload = &pl };
	struct l3_seg_man m = { ent, n };
	ck_assert_ptr_nonnull(block);
	ck_assert_int_eq(l3_hdr_build(block, &a, (XXH128_hash_t){ d.lo, d.hi }, (XXH128_hash_t){ 7, 8 }), 0);
	if (n)
		l3_seg_hdr(block, &m, L3_SEG_MAXSZ);
	return block;
}

static uint8_t *seg_block(struct l3_seg_ent *ent, uint32_t n, uint64_t payload)
{
	return seg_block_of(ent, n, payload, (struct sc_digest){ 5, 6 });
}

/* A header block for a segmented object of the manifest @ent[0..n) and a payload of @payload bytes,
 * built in memory, then read back through l3_seg_manifest_mem: its count or -errno. */
static int manifest_of(struct l3_seg_ent *ent, uint32_t n, uint64_t payload)
{
	uint8_t *block = seg_block(ent, n, payload);
	struct l3_obj_hdr h;
	struct l3_seg_ent *e = NULL;
	int rc = l3_seg_manifest_mem(block, L3_HDR_BLOCK + n * sizeof(*ent), ent, n * sizeof(*ent), &h, &e);
	ck_assert(rc > 0 ? e != NULL : e == NULL); /* the entries handed over only when valid */
	free(e);
	free(block);
	return rc;
}

/* A manifest's segment lengths at their bounds: a segment of exactly L3_SEG_MAXSZ (a store's
 * largest segment size: sc_l3_set_segment_bytes takes it) is valid; one byte more, an empty
 * segment, or lengths that do not sum to the payload make the manifest bad; a whole object's header
 * is no manifest. (Built in memory: no gigabyte is written.) */
START_TEST(manifest_segment_lengths_at_their_bounds)
{
	struct l3_seg_ent ent[2] = { { 1, 2, L3_SEG_MAXSZ }, { 3, 4, 4096 } };
	ck_assert_int_eq(manifest_of(ent, 2, (uint64_t)L3_SEG_MAXSZ + 4096), 2);
	ent[0].len = (uint64_t)L3_SEG_MAXSZ + 1;
	ck_assert_int_eq(manifest_of(ent, 2, (uint64_t)L3_SEG_MAXSZ + 4097), -EBADMSG);
	ent[0].len = 0;
	ck_assert_int_eq(manifest_of(ent, 2, 4096), -EBADMSG);
	ent[0].len = 8192;
	ck_assert_int_eq(manifest_of(ent, 2, 8192 + 4096), 2);
	ck_assert_int_eq(manifest_of(ent, 2, 8192 + 4096 + 1), -EBADMSG);
	ck_assert_int_eq(manifest_of(ent, 2, 8192 + 4096 - 1), -EBADMSG);
	/* a whole object's header block is no manifest: 0, and no entries */
	uint8_t *whole = seg_block(NULL, 0, 4096);
	struct l3_obj_hdr h;
	struct l3_seg_ent *e = NULL;
	ck_assert_int_eq(l3_seg_manifest_mem(whole, L3_HDR_BLOCK + 4096, NULL, 0, &h, &e), 0);
	ck_assert_ptr_null(e);
	free(whole);
}
END_TEST

START_TEST(corrupt_segment_quarantines_every_user_and_their_mirrors)
{
	const char *aname;
	struct sc_arena *arena = sc_test_arena("l3seg", 64 << 20, &aname);
	struct sc_stage *stage;
	ck_assert_int_eq(sc_stage_open(arena, "m", "s", &stage), 0);
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	ck_assert_int_eq(sc_l3_bind_arena(l3, arena), 0);
	size_t na, nb, nc;
	uint8_t *a = payload(5, 2, 2, 0, &na), *b = payload(7, 2, 3, 0, &nb), *c = payload(4, 0, 4, 0, &nc);
	struct sc_location la, lb, lc;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, na, &la), 0);
	ck_assert_int_eq(put_buf(l3, "b", 10, b, nb, &lb), 0);
	ck_assert_int_eq(put_buf(l3, "c", 10, c, nc, &lc), 0);
	/* two restores each: promoted, the L2 mirrors exist */
	for (int k = 0; k < 2; k++) {
		const char *ns[] = { "a", "b" };
		for (int i = 0; i < 2; i++) {
			struct sc_restore r;
			ck_assert_int_eq(sc_restore(stage, l3, ns[i], toks, 10, 0, &r), 10);
			sc_restore_release(&r);
		}
	}
	struct sc_l2_entry_info info;
	ck_assert_int_eq(sc_l2_peek(stage, "a", toks, 10, &info), 0);
	ck_assert_int_eq(sc_l2_peek(stage, "b", toks, 10, &info), 0);
	struct sc_l3_stats st0, st;
	sc_l3_stats(l3, &st0);
	/* a flipped byte in segment 1, which A and B share */
	char sp[256];
	seg_path_of(a + SEG, SEG, sp, sizeof(sp));
	struct stat seg_st;
	ck_assert_int_eq(stat(sp, &seg_st), 0);
	sc_test_flip_byte(sp, 12345, 0x40);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), -EBADMSG);
	/* the segment and both objects are in quarantine, both mirrors gone; C (unrelated) stays */
	ck_assert_int_eq(access(sp, F_OK), -1);
	char pa[256], pb[256], pc[256];
	obj_path(&la, pa, sizeof(pa));
	obj_path(&lb, pb, sizeof(pb));
	obj_path(&lc, pc, sizeof(pc));
	ck_assert_int_eq(access(pa, F_OK), -1);
	ck_assert_int_eq(access(pb, F_OK), -1);
	ck_assert_int_eq(access(pc, F_OK), 0);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined + 2);
	ck_assert_uint_ge(st.verify_failures, st0.verify_failures + 1);
	/* the quarantined segment is named by its digest */
	struct sc_digest sd = sc_digest(a + SEG, SEG);
	char hex[33], qdir[256];
	l3_digest_hex(sd.lo, sd.hi, hex);
	snprintf(qdir, sizeof(qdir), "%s/quarantine", tmpdir);
	ck_assert_msg(dir_has(qdir, hex, ".seg"), "no %s.*.seg in %s", hex, qdir);
	/* the segment file left the store's counts with it (its size, once) */
	ck_assert_uint_eq(st.segments, st0.segments - 1);
	ck_assert_uint_le(st.physical_bytes, st0.physical_bytes - (uint64_t)seg_st.st_size);
	ck_assert_int_eq(sc_l2_peek(stage, "a", toks, 10, &info), -ENOENT);
	ck_assert_int_eq(sc_l2_peek(stage, "b", toks, 10, &info), -ENOENT);
	/* restores: never wrong bytes; B's is reported (quarantined) or a miss, then a miss */
	struct sc_restore r;
	int rc = sc_restore(stage, l3, "b", toks, 10, 0, &r);
	ck_assert_msg(rc == -EBADMSG || rc == -ENOENT, "restore of B: %d", rc);
	ck_assert_int_eq(sc_restore(stage, l3, "b", toks, 10, 0, &r), -ENOENT);
	rc = sc_restore(stage, l3, "a", toks, 10, 0, &r);
	ck_assert_msg(rc == -EBADMSG || rc == -ENOENT, "restore of A: %d", rc);
	ck_assert_int_eq(sc_restore(stage, l3, "a", toks, 10, 0, &r), -ENOENT);
	ck_assert_int_eq(fill_cmp(l3, &lb, b, 0), -ENOENT);
	ck_assert_int_eq(fill_cmp(l3, &lc, c, 0), 0);
	/* a put of A again writes the segment anew: readable again */
	ck_assert_int_eq(put_buf(l3, "a", 10, a, na, &la), 0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	sc_l3_close(l3);
	sc_stage_close(stage);
	sc_test_arena_destroy(arena, aname);
	free(a), free(b), free(c);
}
END_TEST

/* Looking for a bad segment's users, a scan opens only the object files that may be manifests
 * (regular files of a header block and a whole number of entries): not an empty file, a FIFO or a
 * directory planted under object names beside them (a directory passes the size test on ext4,
 * whose directories are 4096 bytes). An inotify watch on the directory sees every open. */
START_TEST(a_scan_for_a_bad_segments_users_opens_only_what_may_be_a_manifest)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t na;
	uint8_t *a = payload(4, 0, 6, 0, &na);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, na, &la), 0);
	char pa[256], dir[256], planted[3][256];
	obj_path(&la, pa, sizeof(pa));
	const char *base = strrchr(pa, '/') + 1;
	size_t at = (size_t)(base - pa) + 31; /* the name's last hex digit: another digest, same directory */
	snprintf(dir, sizeof(dir), "%.*s", (int)(base - 1 - pa), pa);
	for (int k = 0; k < 3; k++) {
		memcpy(planted[k], pa, sizeof(pa));
		planted[k][at] = planted[k][at] == "123"[k] ? 'f' : "123"[k];
	}
	const char *p0 = planted[0], *p1 = planted[1], *p2 = planted[2];
	int fd = open(p0, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(mkfifo(p1, 0600), 0);
	ck_assert_int_eq(mkdir(p2, 0700), 0);
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ck_assert_int_ge(in, 0);
	ck_assert_int_ge(inotify_add_watch(in, dir, IN_OPEN), 0);
	char sp[256];
	seg_path_of(a + SEG, SEG, sp, sizeof(sp));
	sc_test_flip_byte(sp, 200, 0x40);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), -EBADMSG);
	ck_assert_int_eq(access(pa, F_OK), -1); /* its user found, and quarantined */
	int own = 0;
	_Alignas(struct inotify_event) char buf[8192];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		for (char *q = buf; q < buf + n; q += sizeof(struct inotify_event) + ((struct inotify_event *)q)->len) {
			const struct inotify_event *ev = (const void *)q;
			if (!ev->len)
				continue;
			own += !strcmp(ev->name, base);
			for (int k = 0; k < 3; k++)
				ck_assert_msg(strcmp(ev->name, planted[k] + (base - pa)), "the scan opened the planted %s",
					      k == 0 ? "empty file" : k == 1 ? "FIFO" : "directory");
		}
	}
	ck_assert_int_gt(own, 0); /* the watch saw the manifest's opens */
	close(in);
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* A bad segment that cannot be moved to quarantine (its directory removed by hand) stays where it
 * is, and so does its object: the fill says -EBADMSG, and the store's counts still count both. */
START_TEST(a_bad_segment_that_cannot_be_moved_away_stays_counted)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t na;
	uint8_t *a = payload(4, 0, 5, 0, &na);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, na, &la), 0);
	char sp[256], pa[256], qdir[256];
	seg_path_of(a + SEG, SEG, sp, sizeof(sp));
	obj_path(&la, pa, sizeof(pa));
	snprintf(qdir, sizeof(qdir), "%s/quarantine", tmpdir);
	ck_assert_int_eq(rmdir(qdir), 0);
	struct sc_l3_stats st0, st;
	sc_l3_stats(l3, &st0);
	sc_test_flip_byte(sp, 100, 0x40);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), -EBADMSG);
	ck_assert_int_eq(access(sp, F_OK), 0);
	ck_assert_int_eq(access(pa, F_OK), 0);
	sc_l3_stats(l3, &st);
	ck_assert_uint_ge(st.verify_failures, st0.verify_failures + 1);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	ck_assert_uint_eq(st.segments, st0.segments);
	ck_assert_uint_eq(st.objects, st0.objects);
	ck_assert_uint_eq(st.bytes, st0.bytes);
	ck_assert_uint_eq(st.physical_bytes, st0.physical_bytes);
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* @l3's statistics into *@st; or, where its filesystem has no O_DIRECT, this case's SKIP line and
 * the handle closed: 1 then. */
static int no_direct_here(struct sc_l3 *l3, struct sc_l3_stats *st)
{
	ck_assert_int_eq(sc_l3_stats(l3, st), 0);
	if (st->dio_mem_align)
		return 0;
	sc_skip("no O_DIRECT on %s", tmpdir);
	sc_l3_close(l3);
	return 1;
}

/* A store of SEG-byte segments reading O_DIRECT (mode on), and its statistics now in @st0: NULL
 * (the SKIP said) where its directory takes no O_DIRECT. */
static struct sc_l3 *open_seg_direct(struct sc_l3_stats *st0)
{
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .o_direct = SC_L3_ODIRECT_ON }, SEG);
	return no_direct_here(l3, st0) ? NULL : l3;
}

/* open_seg_direct with an object of four whole segments from @seed put as "a" (*@a, *@n bytes,
 * at *@la) and filled once (the ring made): NULL (the SKIP said) where there is no O_DIRECT. */
static struct sc_l3 *open_four_direct(unsigned seed, struct sc_l3_stats *st0, uint8_t **a, size_t *n,
				      struct sc_location *la)
{
	struct sc_l3 *l3 = open_seg_direct(st0);
	if (!l3)
		return NULL;
	*a = payload(4, 0, seed, 0, n);
	ck_assert_int_eq(put_buf(l3, "a", 10, *a, *n, la), 0);
	ck_assert_int_eq(fill_cmp(l3, la, *a, 0), 0);
	return l3;
}

/* Segment reads O_DIRECT (mode on): two windows of segments and a short last one, verified as
 * they land; a destination that cannot take a direct read (unaligned, or no room for the rounded
 * last read) is read buffered, same bytes; a flipped byte in either window is caught by the
 * hashing done while the other reads are in flight: -EBADMSG, the segment and object quarantined. */
START_TEST(direct_segment_reads_verify_as_they_land)
{
	struct sc_l3_stats st0, st;
	struct sc_l3 *l3 = open_seg_direct(&st0);
	if (!l3)
		return;
	size_t n;
	uint8_t *a = payload(40, 0, 9, 1000, &n);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	ck_assert_uint_eq(la.payload_bytes, n);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, SC_L3_FILL_BUFFERED), 0);
	/* exactly the payload's bytes (the last direct read would not fit), then unaligned */
	uint8_t *exact = NULL, *big = malloc(n + 1);
	ck_assert_int_eq(posix_memalign((void **)&exact, 4096, n), 0);
	ck_assert_int_eq(sc_l3_fill(l3, &la, exact, n, 0), 0);
	ck_assert(memcmp(exact, a, n) == 0);
	ck_assert_int_eq(sc_l3_fill(l3, &la, big + 1, n, 0), 0);
	ck_assert(memcmp(big + 1, a, n) == 0);
	/* bad input: a destination smaller than the payload */
	ck_assert_int_eq(sc_l3_fill(l3, &la, exact, n - 1, 0), -EINVAL);
	/* a flipped byte in the second window (segment 35) */
	char sp[256];
	seg_path_of(a + 35 * (size_t)SEG, SEG, sp, sizeof(sp));
	sc_test_flip_byte(sp, 4097, 0x40);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), -EBADMSG);
	ck_assert_int_eq(access(sp, F_OK), -1);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined + 1);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), -ENOENT);
	/* put again (the segment written anew); then the short last segment flipped */
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	seg_path_of(a + 40 * (size_t)SEG, 1000, sp, sizeof(sp));
	sc_test_flip_byte(sp, 999, 0x40);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), -EBADMSG);
	ck_assert_int_eq(access(sp, F_OK), -1);
	/* and one in the first window, the fill reading buffered */
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	seg_path_of(a + 3 * (size_t)SEG, SEG, sp, sizeof(sp));
	sc_test_flip_byte(sp, 0, 0x40);
	ck_assert_int_eq(fill_cmp(l3, &la, a, SC_L3_FILL_BUFFERED), -EBADMSG);
	sc_l3_close(l3);
	free(a), free(exact), free(big);
}
END_TEST

/* The kernel may refuse an O_DIRECT segment read it accepted the open for (-EINVAL): that segment
 * is read again buffered, the others go on direct; the fill returns the bytes, nothing is
 * quarantined. Refusals in the first window, in the second, and of the short last segment (the
 * test build's l3_test_refuse_seg_direct: bit k, the object's segment k). */
START_TEST(direct_segment_reads_refused_are_read_again_buffered)
{
	struct sc_l3_stats st0, st;
	struct sc_l3 *l3 = open_seg_direct(&st0);
	if (!l3)
		return;
	size_t n;
	uint8_t *a = payload(40, 0, 19, 1000, &n);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	static const uint64_t refuse[] = { 1ull << 0, (1ull << 3) | (1ull << 35), 1ull << 40 };
	for (unsigned i = 0; i < sizeof(refuse) / sizeof(refuse[0]); i++) {
		atomic_store(&l3_test_refuse_seg_direct, refuse[i]);
		ck_assert_msg(fill_cmp(l3, &la, a, 0) == 0, "refusals %#llx", (unsigned long long)refuse[i]);
		ck_assert_msg(atomic_load(&l3_test_refuse_seg_direct) == 0, "refusals %#llx: not all made",
			      (unsigned long long)refuse[i]);
	}
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* Pages of the file at @p in the page cache. */
static size_t cached_pages(const char *p)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	size_t len = (size_t)file_size_fd(fd), pages = (len + 4095) / 4096, n = 0;
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert(m != MAP_FAILED);
	unsigned char vec[64];
	ck_assert_uint_le(pages, sizeof(vec));
	ck_assert_int_eq(mincore(m, len, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	munmap(m, len);
	close(fd);
	return n;
}

/* The file at @p in the page cache for its first @pages pages only (read without readahead). */
static void cache_only(const char *p, size_t pages)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fdatasync(fd), 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
	char b[4096];
	for (size_t i = 0; i < pages; i++)
		ck_assert_int_gt(pread(fd, b, sizeof(b), (off_t)(i * 4096)), 0);
	close(fd);
	ck_assert_uint_eq(cached_pages(p), pages);
}

/* Segment reads O_DIRECT (mode on) leave the page cache as it was: after a fill, segment files
 * that were not cached still are not — the short last one too, when the destination ends exactly
 * where its read rounded to the O_DIRECT length does — and one more than half cached (warm, which
 * mode on does not ask about: only auto does) is still cached as much as before, no more. The same
 * on a filesystem whose O_DIRECT offset alignment is a whole header block (4 KiB sectors: set in
 * the handle, as statx would report it there). A last segment of whole alignment units needs no
 * room past the payload. A fill asked to read buffered does (it fills the page cache). */
START_TEST(direct_segment_reads_leave_the_page_cache_as_it_was)
{
	struct sc_l3_stats st0;
	struct sc_l3 *l3 = open_seg_direct(&st0);
	if (!l3)
		return;
	ck_assert(st0.dio_offset_align && 4096 % st0.dio_offset_align == 0 && 4096 % st0.dio_mem_align == 0);
	size_t n;
	uint8_t *a = payload(2, 0, 41, 1000, &n);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	char sp[3][256];
	for (int i = 0; i < 3; i++)
		seg_path_of(a + (size_t)i * SEG, i < 2 ? SEG : 1000, sp[i], sizeof(sp[i]));
	for (int k = 0; k < 2; k++) {
		if (k)
			l3->dio_off_align = L3_HDR_BLOCK;
		uint32_t oa = l3->dio_off_align;
		cache_only(sp[0], 0);
		cache_only(sp[1], 10); /* 40 KiB of 64: warm */
		cache_only(sp[2], 0);
		/* the destination: the payload, its last segment's read rounded up to the offset alignment */
		size_t cap = 2 * (size_t)SEG + (1000 + oa - 1) / oa * oa;
		uint8_t *dst = aligned_alloc(4096, (cap + 4095) / 4096 * 4096);
		ck_assert_ptr_nonnull(dst);
		ck_assert_int_eq(sc_l3_fill(l3, &la, dst, cap, 0), 0);
		ck_assert(memcmp(dst, a, n) == 0);
		ck_assert_uint_eq(cached_pages(sp[0]), 0);
		ck_assert_uint_eq(cached_pages(sp[1]), 10);
		ck_assert_uint_eq(cached_pages(sp[2]), 0);
		free(dst);
	}
	/* a last segment of whole alignment units, the destination exactly the payload: its direct
	 * read needs no room past it, writes nothing past it, and it too leaves the page cache alone */
	size_t nb;
	uint8_t *b = payload(2, 0, 43, 0, &nb);
	struct sc_location lb;
	ck_assert_int_eq(put_buf(l3, "b", 11, b, nb, &lb), 0);
	char bp[256];
	seg_path_of(b + SEG, SEG, bp, sizeof(bp));
	cache_only(bp, 0);
	uint8_t *dst = aligned_alloc(4096, nb + 4096);
	ck_assert_ptr_nonnull(dst);
	memset(dst + nb, 0x5a, 4096);
	ck_assert_int_eq(sc_l3_fill(l3, &lb, dst, nb, 0), 0);
	ck_assert(memcmp(dst, b, nb) == 0);
	for (size_t i = nb; i < nb + 4096; i++)
		ck_assert_msg(dst[i] == 0x5a, "a byte past the destination written (%zu)", i - nb);
	ck_assert_uint_eq(cached_pages(bp), 0);
	/* a fill asked to read buffered reads through the page cache, in mode on too */
	ck_assert_int_eq(sc_l3_fill(l3, &lb, dst, nb, SC_L3_FILL_BUFFERED), 0);
	ck_assert(memcmp(dst, b, nb) == 0);
	ck_assert_uint_eq(cached_pages(bp), SEG / 4096);
	sc_l3_close(l3);
	free(a), free(b), free(dst);
}
END_TEST

/* In mode auto a segment is read O_DIRECT only when it is cold (less than half of it in the page
 * cache, by cachestat): after a fill the cold segments are still not cached, and the warm one
 * between them was read through the page cache (the test build's refusal of its direct read was
 * never asked for). */
START_TEST(auto_mode_reads_cold_segments_direct_and_a_warm_one_buffered)
{
	struct sc_l3_stats st0;
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .o_direct = SC_L3_ODIRECT_AUTO }, SEG);
	if (no_direct_here(l3, &st0))
		return;
	size_t n;
	struct sc_location la;
	uint8_t *a = put_payload(l3, 3, 47, 0, &n, &la);
	char sp[3][256];
	for (int i = 0; i < 3; i++)
		seg_path_of(a + (size_t)i * SEG, SEG, sp[i], sizeof(sp[i]));
	int fd = open(sp[1], O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	struct {
		uint64_t off, len;
	} rg = { 0, SEG };
	uint64_t cs[5];
	int no_cachestat = syscall(__NR_cachestat, fd, &rg, cs, 0) < 0;
	close(fd);
	if (no_cachestat) {
		sc_skip("no cachestat: mode auto takes every segment for cold");
		sc_l3_close(l3);
		free(a);
		return;
	}
	cache_only(sp[0], 0);
	cache_only(sp[1], SEG / 4096);
	cache_only(sp[2], 0);
	atomic_store(&l3_test_refuse_seg_direct, 1ull << 1);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	uint64_t left = atomic_exchange(&l3_test_refuse_seg_direct, 0);
	ck_assert_msg(left == 1ull << 1, "the warm segment was read O_DIRECT");
	ck_assert_uint_eq(cached_pages(sp[0]), 0);
	ck_assert_uint_eq(cached_pages(sp[1]), SEG / 4096);
	ck_assert_uint_eq(cached_pages(sp[2]), 0);
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* A fill of a segmented object whose request for a submission entry finds none (the queue full and
 * its submit refused by the kernel) fails with -EAGAIN; nothing is quarantined, no descriptor is
 * left open, and the next fill returns the bytes. Each of the fill's requests in turn (the
 * manifest's reads, then the opens and reads of its 21 segments, one window), until a fill makes
 * fewer requests (and returns the bytes). */
START_TEST(a_segment_fill_finding_no_submission_entry_fails_cleanly)
{
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE }, SEG);
	struct sc_l3_stats st0, st;
	size_t n;
	struct sc_location la;
	uint8_t *a = put_payload(l3, 20, 48, 1000, &n, &la);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0); /* the ring made */
	ck_assert_int_eq(sc_l3_stats(l3, &st0), 0);
	int fds = sc_test_open_fds();
	unsigned k, failed = 0;
	for (k = 0; k < 64; k++) {
		atomic_store(&l3_test_no_sqe, 1ull << k);
		int rc = fill_cmp(l3, &la, a, 0);
		uint64_t left = atomic_exchange(&l3_test_no_sqe, 0);
		ck_assert_msg(rc == 0 || (!left && rc == -EAGAIN), "request %u: %s", k, sc_strerror(rc));
		failed += rc != 0;
		ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
		if (left)
			break; /* the fill made fewer requests */
	}
	ck_assert_msg(k > 40 && k < 64, "a fill of 21 segments asked for %u entries", k);
	ck_assert_uint_eq(failed, k);
	ck_assert_int_eq(sc_test_open_fds(), fds);
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* The segment reads among @l3's ring's submission entries (each keeps what was last prepared in
 * it): how many, and in *@async how many of them were sent to io-wq (IOSQE_ASYNC). */
static unsigned seg_reads_on_ring(struct sc_l3 *l3, unsigned *async)
{
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	unsigned n = 0;
	*async = 0;
	for (unsigned i = 0; i < r->ring.sq.ring_entries; i++) {
		const struct io_uring_sqe *e = &r->ring.sq.sqes[i];
		uint32_t tag = (uint32_t)(e->user_data >> 3) & L3_FILL_TAG_MASK;
		if ((e->opcode != IORING_OP_READ && e->opcode != IORING_OP_READ_FIXED) || (e->user_data & 7) != L3_IO_SEG ||
		    !(tag & L3_SEG_TAG) || (tag & L3_SEG_OPEN))
			continue;
		n++;
		*async += !!(e->flags & IOSQE_ASYNC);
	}
	return n;
}

/* A buffered segment read of 256 KiB or more is sent to io-wq (IOSQE_ASYNC: copied on another CPU
 * while this thread hashes); a smaller one, or a direct one, is issued inline. Seen in the entries
 * of a handle's first ring after a put and one fill of three segments: 0 of 64 KiB, buffered; 1 of
 * 256 KiB (the threshold), buffered; 2 of 256 KiB, O_DIRECT. */
START_TEST(large_buffered_segment_reads_go_to_io_wq)
{
	static const struct {
		uint32_t seg;
		int mode;
		unsigned async;
	} c[] = { { SEG, SC_L3_ODIRECT_OFF, 0 }, { 256 << 10, SC_L3_ODIRECT_OFF, 3 }, { 256 << 10, SC_L3_ODIRECT_ON, 0 } };
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .o_direct = c[_i].mode }, c[_i].seg);
	struct sc_l3_stats st0;
	if (c[_i].mode == SC_L3_ODIRECT_ON && no_direct_here(l3, &st0))
		return;
	size_t n = 3 * (size_t)c[_i].seg;
	uint8_t *a = malloc(n);
	ck_assert_ptr_nonnull(a);
	for (int i = 0; i < 3; i++)
		h_bytes(4900 + (unsigned)i, a + (size_t)i * c[_i].seg, c[_i].seg);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	unsigned async, reads = seg_reads_on_ring(l3, &async);
	ck_assert_uint_eq(reads, 3);
	ck_assert_msg(async == c[_i].async, "%u of 3 segment reads of %u KiB (%s) sent to io-wq", async,
		      c[_i].seg >> 10, c[_i].mode == SC_L3_ODIRECT_ON ? "direct" : "buffered");
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* A segmented arena (64 MiB, segments of SEG) with a stage, and a segmented store. */
struct l2l3 {
	struct sc_arena *arena;
	const char *aname;
	struct sc_stage *stage;
	struct sc_l3 *l3;
};

static void l2l3_open(struct l2l3 *x)
{
	struct sc_arena_opts ao = { .size_bytes = 64u << 20, .huge = SC_HUGE_OFF, .segment_bytes = SEG };
	x->arena = sc_test_arena_opts("l3segl2", &ao, &x->aname);
	ck_assert_int_eq(sc_stage_open(x->arena, "m", "s", &x->stage), 0);
	x->l3 = open_seg(NULL, SEG);
}

static void l2l3_close(struct l2l3 *x)
{
	sc_l3_close(x->l3);
	sc_stage_close(x->stage);
	sc_test_arena_destroy(x->arena, x->aname);
}

/* Restore "b" (10 tokens) through L3: it comes whole from L3 with bytes @b (@nb); how many of its
 * bytes the fill copied from L2. */
static uint64_t restore_b_from_l3(struct l2l3 *x, const uint8_t *b, size_t nb)
{
	struct sc_l3_stats s0, s1;
	ck_assert_int_eq(sc_l3_stats(x->l3, &s0), 0);
	struct sc_restore r;
	ck_assert_int_eq(sc_restore(x->stage, x->l3, "b", toks, 10, 0, &r), 10);
	ck_assert_int_eq(r.source, SC_RESTORE_FROM_L3);
	ck_assert(r.sec_len[0] == nb && memcmp(r.sec[0], b, nb) == 0);
	sc_restore_release(&r);
	ck_assert_int_eq(sc_l3_stats(x->l3, &s1), 0);
	return s1.fill_bytes_from_l2 - s0.fill_bytes_from_l2;
}

/* A segment the restoring arena's L2 keeps in its table's first slot (slot 0: its digest's low
 * bits are all zero) is copied from it like any other: its L3 file gone, the fill of "b" takes it
 * from L2. Payload a's first 8 bytes are chosen (a counter, tried in turn) to land it there. */
START_TEST(fill_copies_a_segment_from_the_first_slot_of_l2s_table)
{
	struct l2l3 x;
	l2l3_open(&x);
	size_t na, nb;
	uint8_t *a = payload(2, 0, 5, 0, &na), *b = payload(2, 0, 6, 0, &nb);
	const struct shm_segtab *t = l2_segtab(x.arena);
	struct sc_digest d0 = sc_test_digest_low_bits_zero(a, SEG, t->mask);
	memcpy(b, a, SEG); /* b's first segment is a's */
	struct sc_payload pa = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { a }, .sec_len = { na } };
	ck_assert_int_eq(sc_l2_admit(x.stage, "a", toks, 10, sc_digest(a, na), &pa, 0), 0);
	ck_assert_uint_eq(t->slot[0].state, SHM_SEG_LIVE);
	ck_assert_uint_eq(t->slot[0].digest_lo, d0.lo);
	struct sc_location lb;
	ck_assert_int_eq(put_buf(x.l3, "b", 10, b, nb, &lb), 0);
	char p[300];
	seg_path_of(b, SEG, p, sizeof(p));
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_uint_eq(restore_b_from_l3(&x, b, nb), SEG);
	l2l3_close(&x);
	free(a);
	free(b);
}
END_TEST

/* A fill whose arena's segment table lock cannot be taken (its word scribbled to name the
 * filling process, which does not hold it) copies nothing from L2: it reads every segment of "b"
 * from L3 (L2 holds two of them: fill_reads_only_what_l2_lacks copies such), and restores it
 * whole. The word is left as it was. */
START_TEST(fill_copies_nothing_from_l2_while_the_tables_lock_is_scribbled)
{
	struct l2l3 x;
	l2l3_open(&x);
	size_t na, nb;
	uint8_t *a = payload(3, 2, 2, 0, &na), *b = payload(3, 2, 3, 0, &nb);
	struct sc_payload pa = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { a }, .sec_len = { na } };
	ck_assert_int_eq(sc_l2_admit(x.stage, "a", toks, 10, sc_digest(a, na), &pa, 0), 0);
	struct sc_location lb;
	ck_assert_int_eq(put_buf(x.l3, "b", 10, b, nb, &lb), 0);
	_Atomic uint32_t *word = &l2_segtab(x.arena)->hdr->mu.word;
	ck_assert_uint_eq(atomic_load(word), 0);
	atomic_store(word, x.arena->shm->token);
	ck_assert_uint_eq(restore_b_from_l3(&x, b, nb), 0);
	ck_assert_uint_eq(atomic_load(word), x.arena->shm->token); /* left as it was */
	atomic_store(word, 0);
	l2l3_close(&x);
	free(a);
	free(b);
}
END_TEST

/* A store whose segments are twice the arena's: a fill through a handle bound to that arena asks
 * its L2 for none of them (only segments of the arena's size are indexed there), so it never
 * takes the arena's segment table lock: while another process holds that lock, alive, the fill
 * completes, and the holder has not seen a waiter. */
START_TEST(a_fill_of_segments_of_another_size_leaves_l2s_table_lock_alone)
{
	struct l2l3 x;
	l2l3_open(&x);
	ck_assert_int_eq(sc_l3_set_segment_bytes(x.l3, 2 * SEG), 0);
	ck_assert_int_eq(sc_l3_bind_arena(x.l3, x.arena), 0);
	size_t nb;
	uint8_t *b = payload(4, 0, 9, 0, &nb); /* two whole segments of the store's size */
	struct sc_location lb;
	ck_assert_int_eq(put_buf(x.l3, "b", 10, b, nb, &lb), 0);
	struct shm_mutex *mu = &l2_segtab(x.arena)->hdr->mu;
	pid_t holder = sc_test_locker(x.aname, mu, 'h', 0);
	ck_assert_int_eq(fill_cmp(x.l3, &lb, b, 0), 0);
	uint32_t w = atomic_load(&mu->word);
	ck_assert_msg(w && !(w & SHM_MUTEX_WAITERS), "the fill waited for the table's lock (word %#x)", w);
	/* now wait for it ourselves: the holder lets go once it sees a waiter */
	ck_assert_int_eq(shm_mutex_lock(x.arena->shm, mu), 0);
	shm_mutex_unlock(x.arena->shm, mu);
	int status;
	ck_assert_int_eq(waitpid(holder, &status, 0), holder);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	l2l3_close(&x);
	free(b);
}
END_TEST

/* Fills read only what L2 lacks: the segments the restoring arena's L2 already holds are copied
 * from it (their L3 files are not even opened: here they are gone), the rest read; an L2 copy
 * that does not hold what its name says (scribbled shared memory) is read from L3 instead. */
START_TEST(fill_reads_only_what_l2_lacks)
{
	struct l2l3 x;
	l2l3_open(&x);
	struct sc_stage *stage = x.stage;
	struct sc_l3 *l3 = x.l3;
	size_t na, nb, nc;
	uint8_t *a = payload(5, 3, 2, 0, &na), *b = payload(6, 3, 3, 100, &nb), *c = payload(4, 1, 4, 0, &nc);
	struct sc_payload pa = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { a }, .sec_len = { na } };
	ck_assert_int_eq(sc_l2_admit(stage, "a", toks, 10, sc_digest(a, na), &pa, 0), 0); /* L2 holds a's 5 */
	struct sc_location lb, lc;
	ck_assert_int_eq(put_buf(l3, "b", 10, b, nb, &lb), 0);
	ck_assert_int_eq(put_buf(l3, "c", 10, c, nc, &lc), 0);
	/* two of b's 3 shared segments: their L3 files go; the fill must not need them */
	for (uint32_t i = 1; i < 3; i++) {
		char p[300];
		seg_path_of(b + (size_t)i * SEG, SEG, p, sizeof(p));
		ck_assert_int_eq(unlink(p), 0);
	}
	ck_assert_uint_eq(restore_b_from_l3(&x, b, nb), 3 * SEG);
	struct sc_l3_stats s0, s1;
	ck_assert_int_eq(sc_l3_stats(l3, &s1), 0);
	struct sc_restore r;
	/* scribble L2's copy of segment 0 (shared by a, b and c): c's fill reads it from L3 */
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(stage, "a", toks, 10, NULL, &l), 0);
	ck_assert_ptr_nonnull(l.sec[0]);
	((uint8_t *)(uintptr_t)l.sec[0])[17] ^= 0x40;
	sc_lease_release(&l);
	ck_assert_int_eq(sc_restore(stage, l3, "c", toks, 10, 0, &r), 10);
	ck_assert(r.sec_len[0] == nc && memcmp(r.sec[0], c, nc) == 0);
	sc_restore_release(&r);
	ck_assert_int_eq(sc_l3_stats(l3, &s0), 0);
	ck_assert_uint_eq(s0.fill_bytes_from_l2, s1.fill_bytes_from_l2); /* nothing else came from L2 */
	ck_assert_uint_eq(s0.verify_failures, s1.verify_failures);   /* and nothing in L3 was blamed */
	l2l3_close(&x);
	free(a);
	free(b);
	free(c);
}
END_TEST

/*
 * Segmented fills run on the fill ring beside other fills: a batch of segmented objects (one of
 * two windows, one with a corrupt segment, one with a segment gone) and whole ones, more than the
 * ring reads at once, each gets its own result and bytes; at most queue_depth read at once; the
 * corrupt segment is quarantined with its object, the missing one is a miss. Direct and buffered.
 */
START_TEST(segmented_fills_run_on_the_ring_beside_other_fills)
{
	enum { QD = 2, N = 7 };
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .queue_depth = QD }, SEG);
	/* 0: 40 segments and a tail (two windows), 1: 5, 2: 3 (one flipped), 3: 4 (one removed),
	 * 4..6: smaller than a segment (stored whole) */
	static const uint32_t nseg[N] = { 40, 5, 3, 4, 0, 0, 0 };
	static const size_t tail[N] = { 1000, 0, 0, 0, 5000, 7000, 60000 };
	uint8_t *want[N], *dst[N];
	size_t len[N];
	struct sc_location loc[N];
	for (int i = 0; i < N; i++) {
		want[i] = payload(nseg[i], 0, 40u + (unsigned)i, tail[i], &len[i]);
		ck_assert_int_eq(put_buf(l3, i < 4 ? "s" : "w", 10u + (uint32_t)i, want[i], len[i], &loc[i]), 0);
		dst[i] = aligned_alloc(4096, (len[i] + 4095) / 4096 * 4096);
	}
	char bad[256], gone[256];
	seg_path_of(want[2] + SEG, SEG, bad, sizeof(bad));
	seg_path_of(want[3] + 2 * SEG, SEG, gone, sizeof(gone));
	for (int round = 0; round < 2; round++) {
		if (round == 1) /* the quarantined object put anew (its bad segment written whole), spoiled again */
			ck_assert_int_eq(put_buf(l3, "s", 12, want[2], len[2], &loc[2]), 0);
		sc_test_flip_byte(bad, 100, 0x40);
		ck_assert_int_eq(round ? access(gone, F_OK) : unlink(gone), round ? -1 : 0); /* still missing */
		struct sc_l3_stats st0, st;
		sc_l3_stats(l3, &st0);
		struct sc_l3_fill_req req[N], *rp[N], *done[N];
		for (int i = 0; i < N; i++) {
			memset(dst[i], 0xa5, len[i]);
			req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = dst[i], .dst_bytes = (len[i] + 4095) / 4096 * 4096,
							  .user_data = (uint64_t)i, .flags = round ? SC_L3_FILL_BUFFERED : 0 };
			rp[i] = &req[i];
		}
		int next = 0, got = 0;
		unsigned most;
		while (got < N) {
			if (next < N) {
				int k = sc_l3_fill_submit(l3, rp + next, (unsigned)(N - next));
				ck_assert_int_ge(k, 0);
				next += k;
			}
			int r = sc_l3_fill_reap(l3, done, N, 10 * 1000000000ll);
			ck_assert_msg(r > 0, "round %d: %d of %d fills ended; none more in 10 s (%d)", round, got, N, r);
			for (int j = 0; j < r; j++) {
				int i = (int)done[j]->user_data, rc = done[j]->result;
				if (i == 2)
					ck_assert_msg(rc == -EBADMSG, "round %d: the corrupt segment's object: %d", round, rc);
				else if (i == 3)
					ck_assert_msg(rc == -ENOENT, "round %d: the missing segment's object: %d", round, rc);
				else
					ck_assert_msg(rc == 0 && memcmp(dst[i], want[i], len[i]) == 0, "round %d: fill %d: %d%s", round,
						      i, rc, rc ? "" : " (wrong bytes)");
			}
			got += r;
			sc_test_l3_fills_reading(l3, &most);
			ck_assert_msg(most <= QD, "round %d: %u fills read at once, queue_depth %d", round, most, QD);
		}
		ck_assert_int_eq(sc_l3_fill_inflight(l3), 0);
		sc_l3_stats(l3, &st);
		ck_assert_uint_eq(st.quarantined, st0.quarantined + 1); /* the object naming the bad segment */
		char op[256];
		obj_path(&loc[2], op, sizeof(op));
		ck_assert_int_eq(access(bad, F_OK), -1); /* moved away with it */
		ck_assert_int_eq(access(op, F_OK), -1);
		obj_path(&loc[3], op, sizeof(op));
		ck_assert_int_eq(access(op, F_OK), 0); /* a missing segment is a miss: its object stays */
		ck_assert_int_eq(fill_cmp(l3, &loc[0], want[0], 0), 0); /* the others untouched */
	}
	for (int i = 0; i < N; i++)
		free(want[i]), free(dst[i]);
	sc_l3_close(l3);
}
END_TEST

/* With one fill reading at a time, segmented fills submitted together each start when the one
 * before ends, even when it ends in its verification with nothing else in flight (a fill left
 * waiting then would wait forever in a close, which waits for reads, not fills). */
START_TEST(waiting_fills_start_when_a_segmented_fill_ends)
{
	enum { N = 3 };
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .queue_depth = 1 }, SEG);
	uint8_t *want[N], *dst[N];
	size_t len[N];
	struct sc_location loc[N];
	struct sc_l3_fill_req req[N], *rp[N], *done[N];
	for (int i = 0; i < N; i++) {
		want[i] = payload(3 + (uint32_t)i, 0, 60u + (unsigned)i, 500, &len[i]);
		ck_assert_int_eq(put_buf(l3, "q", 10u + (uint32_t)i, want[i], len[i], &loc[i]), 0);
		dst[i] = aligned_alloc(4096, (len[i] + 4095) / 4096 * 4096);
		req[i] = (struct sc_l3_fill_req){ .loc = &loc[i], .dst = dst[i], .dst_bytes = (len[i] + 4095) / 4096 * 4096,
						  .user_data = (uint64_t)i };
		rp[i] = &req[i];
	}
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(sc_l3_fill_submit(l3, rp, 2), 2); /* twice queue_depth */
		int got = 0;
		while (got < 2) {
			int r = sc_l3_fill_reap(l3, done, N, 10 * 1000000000ll);
			ck_assert_msg(r > 0, "round %d: %d of 2 fills ended, none more in 10 s", round, got);
			for (int j = 0; j < r; j++) {
				int i = (int)done[j]->user_data;
				ck_assert_msg(done[j]->result == 0 && memcmp(dst[i], want[i], len[i]) == 0, "fill %d: %d", i,
					      done[j]->result);
			}
			got += r;
		}
		rp[0] = &req[2]; /* then the third with the first again */
		rp[1] = &req[0];
	}
	ck_assert_int_eq(sc_l3_fill_inflight(l3), 0);
	/* and closed with both in flight: the close waits for every read of both (a waiting fill must
	 * start, or the close would wait for nothing forever) */
	for (int i = 0; i < 2; i++)
		memset(dst[i], 0, len[i]);
	rp[0] = &req[0];
	rp[1] = &req[1];
	ck_assert_int_eq(sc_l3_fill_submit(l3, rp, 1), 1); /* alone: opened and closed in this thread */
	ck_assert_int_eq(sc_l3_fill_submit(l3, rp + 1, 1), 1);
	sc_l3_close(l3);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(req[i].result == 0 && memcmp(dst[i], want[i], len[i]) == 0, "fill %d at close: %d", i,
			      req[i].result);
	for (int i = 0; i < N; i++)
		free(want[i]), free(dst[i]);
}
END_TEST

static void note_result(void *ctx, int result)
{
	int *r = ctx;
	r[0]++;
	r[1] = result;
}

/* A segmented fill given up at any point of its steps (after 0, 1, 2 ... reaps) hears of it once,
 * after its last read: its memory, written over at once, is never read into afterwards. */
START_TEST(an_abandoned_segmented_fill_ends_after_its_reads)
{
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .queue_depth = 4 }, SEG);
	size_t n, nw;
	uint8_t *a = payload(40, 0, 50, 3000, &n), *w = payload(0, 0, 51, 9000, &nw);
	struct sc_location la, lw;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	ck_assert_int_eq(put_buf(l3, "w", 10, w, nw, &lw), 0);
	size_t cap = (n + 4095) / 4096 * 4096;
	uint8_t *dst = aligned_alloc(4096, cap), *canary = malloc(cap);
	memset(canary, 0x3c, cap);
	int cancelled = 0;
	for (int k = 0; k < 12; k++) {
		struct sc_l3_fill_req req = { .loc = &la, .dst = dst, .dst_bytes = cap }, *rp = &req, *done[2];
		ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
		for (int i = 0; i < k; i++) /* let it go on k steps (a reap takes what has completed) */
			if (sc_l3_fill_reap(l3, done, 1, 0) == 1)
				break;
		int heard[2] = { 0, 0 };
		if (!sc_l3_fill_inflight(l3))
			continue; /* it ended within those steps */
		l3_fill_abandon(l3, &req, note_result, heard);
		while (!heard[0])
			ck_assert_int_ge(sc_l3_fill_reap(l3, done, 1, 1000000), 0);
		ck_assert_int_eq(heard[0], 1);
		ck_assert_msg(heard[1] == -ECANCELED || heard[1] == 0, "step %d: %d", k, heard[1]);
		cancelled += heard[1] == -ECANCELED;
		memset(dst, 0x3c, cap); /* the memory is the caller's again */
		ck_assert_int_eq(fill_cmp(l3, &lw, w, 0), 0); /* the ring goes on */
		l3_fill_poll(l3);
		ck_assert_msg(memcmp(dst, canary, cap) == 0, "step %d: written after its end was heard", k);
		ck_assert_int_eq(sc_l3_fill_inflight(l3), 0);
	}
	ck_assert_int_gt(cancelled, 0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0); /* nothing was judged bad */
	free(a), free(w), free(dst), free(canary);
	sc_l3_close(l3);
}
END_TEST

/* Is a completed segment open of the fill in @r's completion queue, not yet taken? */
static int seg_open_completed(struct l3_ring *r)
{
	struct io_uring_cqe *cqe;
	unsigned head, k = 0;
	io_uring_for_each_cqe(&r->ring, head, cqe)
	{
		uint64_t ud = cqe->user_data;
		k |= (ud & 7) == L3_IO_SEG && (ud >> 3 & (L3_SEG_TAG | L3_SEG_OPEN)) == (L3_SEG_TAG | L3_SEG_OPEN);
	}
	return k;
}

/* A segmented fill abandoned while its segments' opens are in flight (a completed open not yet
 * taken) starts no read when they end: its destination is not written after the abandonment. */
START_TEST(an_abandoned_fill_reads_no_segment_its_opens_found)
{
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .queue_depth = 4 }, SEG);
	size_t n;
	uint8_t *a = payload(4, 0, 60, 3000, &n);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	struct l3_ring *r = NULL;
	size_t cap = (n + 4095) / 4096 * 4096;
	uint8_t *dst = aligned_alloc(4096, cap), *canary = malloc(cap);
	memset(canary, 0x5a, cap);
	int found = 0;
	for (int k = 0; k < 8 && !found; k++) {
		struct sc_l3_fill_req req = { .loc = &la, .dst = dst, .dst_bytes = cap, .flags = SC_L3_FILL_BUFFERED },
				      *rp = &req, *done;
		ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
		r = l3_ring_find(l3);
		ck_assert_ptr_nonnull(r);
		int ended = 0;
		for (int i = 0; i < 64 && !ended && !found; i++) {
			struct io_uring_cqe *cqe;
			struct __kernel_timespec ts = { .tv_sec = 10 };
			/* a completion of the fill, not taken: the reap does */
			ck_assert_int_eq(io_uring_wait_cqe_timeout(&r->ring, &cqe, &ts), 0);
			if ((found = seg_open_completed(r)))
				break;
			ended = sc_l3_fill_reap(l3, &done, 1, 0) == 1;
		}
		if (!found) {
			while (!ended)
				ended = sc_l3_fill_reap(l3, &done, 1, 1000000) == 1;
			continue;
		}
		int heard[2] = { 0, 0 };
		l3_fill_abandon(l3, &req, note_result, heard);
		memset(dst, 0x5a, cap); /* no read is in flight: none may start */
		while (!heard[0])
			ck_assert_int_ge(sc_l3_fill_reap(l3, &done, 1, 1000000), 0);
		ck_assert_int_eq(heard[1], -ECANCELED);
		ck_assert_msg(memcmp(dst, canary, cap) == 0, "a segment was read after the fill was abandoned");
	}
	ck_assert_msg(found, "no segment open was seen completed before its reap");
	ck_assert_int_eq(sc_l3_fill_inflight(l3), 0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	free(a), free(dst), free(canary);
	sc_l3_close(l3);
}
END_TEST

/* A fill that ended before its caller gave up on it (its completion taken by a poll, not yet
 * reaped) is not on the ring any more: the abandonment hears its result at once, once, and a
 * reap finds nothing of it after. */
START_TEST(an_abandoned_fill_that_had_ended_is_heard_at_once)
{
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .queue_depth = 4 }, SEG);
	size_t nw;
	uint8_t *w = payload(0, 0, 61, 9000, &nw);
	struct sc_location lw;
	ck_assert_int_eq(put_buf(l3, "w", 10, w, nw, &lw), 0);
	size_t cap = (nw + 4095) / 4096 * 4096;
	uint8_t *dst = aligned_alloc(4096, cap);
	struct sc_l3_fill_req req = { .loc = &lw, .dst = dst, .dst_bytes = cap }, *rp = &req, *done;
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	for (int i = 0; i < 10000 && r->done_head != &req; i++) { /* until it ended (a poll took it) */
		l3_fill_poll(l3);
		if (r->done_head != &req)
			sc_test_pause_ms(1);
	}
	ck_assert_ptr_eq(r->done_head, &req);
	int heard[2] = { 0, 1 };
	l3_fill_abandon(l3, &req, note_result, heard);
	ck_assert_int_eq(heard[0], 1);
	ck_assert_int_eq(heard[1], 0);
	ck_assert(memcmp(dst, w, nw) == 0);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, 0), 0);
	free(w), free(dst);
	sc_l3_close(l3);
}
END_TEST

/* A direct segment read the kernel refuses (-EINVAL) after its fill was abandoned is not read
 * again buffered (its destination is no longer the fill's): the fill ends with the refusal. The
 * abandonment comes after 0, 1, 2 ... steps (a step: a completion is there, a reap takes what is),
 * so one comes while the reads are in flight, their completions not yet taken. */
START_TEST(a_refused_direct_read_of_an_abandoned_fill_is_not_read_again)
{
	struct sc_l3_stats st0, st;
	size_t n;
	uint8_t *a;
	struct sc_location la;
	struct sc_l3 *l3 = open_four_direct(53, &st0, &a, &n, &la);
	if (!l3)
		return;
	struct l3_ring *r = l3_ring_find(l3);
	size_t cap = (n + 4095) / 4096 * 4096;
	uint8_t *dst = aligned_alloc(4096, cap);
	int refused = 0;
	for (int k = 0; k < 12 && !refused; k++) {
		atomic_store(&l3_test_refuse_seg_direct, 0xf); /* each segment's direct read, once */
		struct sc_l3_fill_req req = { .loc = &la, .dst = dst, .dst_bytes = cap }, *rp = &req, *done;
		ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
		int ended = 0;
		for (int i = 0; i < k && !ended; i++) {
			struct io_uring_cqe *cqe;
			ck_assert_int_eq(io_uring_wait_cqe(&r->ring, &cqe), 0); /* not taken: the reap does */
			ended = sc_l3_fill_reap(l3, &done, 1, 0) == 1;
		}
		if (ended)
			break; /* the fill ended within those steps: later ones would too */
		int heard[2] = { 0, 0 };
		l3_fill_abandon(l3, &req, note_result, heard);
		while (!heard[0])
			ck_assert_int_ge(sc_l3_fill_reap(l3, &done, 1, 1000000), 0);
		ck_assert_msg(heard[1] == -EINVAL || heard[1] == -ECANCELED || heard[1] == 0, "step %d: %d", k, heard[1]);
		refused = heard[1] == -EINVAL;
	}
	atomic_store(&l3_test_refuse_seg_direct, 0);
	ck_assert_msg(refused, "no abandoned fill ended with its refused read");
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	free(a), free(dst);
	sc_l3_close(l3);
}
END_TEST

static int note_missing(const struct sc_l3_object_info *in, void *ctx)
{
	uint32_t *m = ctx;
	if (!in->valid && in->segments == 4 && in->segments_missing) {
		m[0]++;
		m[1] += in->segments_missing;
	}
	return 0;
}

/* A segmented store's handle with one object, "a": @nseg segments of seed @seed. */
struct one_seg_obj {
	struct sc_l3 *l3;
	uint8_t *a;
	size_t n;
	struct sc_location la;
};

static void one_seg_obj_open(struct one_seg_obj *o, uint32_t nseg, unsigned seed)
{
	o->l3 = open_seg(NULL, SEG);
	o->a = payload(nseg, 0, seed, 0, &o->n);
	ck_assert_int_eq(put_buf(o->l3, "a", 10, o->a, o->n, &o->la), 0);
}

static void one_seg_obj_close(struct one_seg_obj *o)
{
	sc_l3_close(o->l3);
	free(o->a);
}

/* A segmented fill in a process that may open one descriptor more (its object file) but not a
 * segment file, before and after a fill of it succeeded: each time a clear error that is not a
 * miss, the object not quarantined; with descriptors again, the same fill returns the bytes.
 * (In a child: the limit is the process's.) */
START_TEST(a_segmented_fill_without_a_descriptor_to_spare_fails_cleanly)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t na, nw;
	uint8_t *a = payload(3, 0, 21, 100, &na), *w = payload(0, 0, 22, 5000, &nw);
	struct sc_location la, lw;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, na, &la), 0);
	ck_assert_int_eq(put_buf(l3, "w", 10, w, nw, &lw), 0);
	struct sc_l3_stats st0;
	sc_l3_stats(l3, &st0);
	ck_assert_uint_eq(st0.segments, 4); /* a: three segments and its tail; w stored whole */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* the child's fill ring first (a whole object), then one descriptor to spare */
		size_t cap = (na + 4095) / 4096 * 4096;
		uint8_t *dst = aligned_alloc(4096, cap);
		struct rlimit was, one;
		int bad = !dst || sc_l3_fill(l3, &lw, dst, cap, 0) != 0 || memcmp(dst, w, nw) != 0;
		bad |= getrlimit(RLIMIT_NOFILE, &was) != 0;
		one = (struct rlimit){ (rlim_t)sc_test_lowest_free_fd() + 1, was.rlim_max };
		bad |= setrlimit(RLIMIT_NOFILE, &one) != 0;
		int rc = sc_l3_fill(l3, &la, dst, cap, 0);
		bad |= setrlimit(RLIMIT_NOFILE, &was) != 0;
		if (rc == 0 || rc == -EBADMSG || rc == -ENOENT)
			_exit(10); /* served without a ring, or judged the object bad */
		struct sc_l3_stats st;
		sc_l3_stats(l3, &st);
		if (st.quarantined)
			_exit(11);
		memset(dst, 0, cap);
		bad |= sc_l3_fill(l3, &la, dst, cap, 0) != 0 || memcmp(dst, a, na) != 0;
		/* again, after a fill of it: room for the object file but not for a segment's */
		one.rlim_cur = (rlim_t)sc_test_lowest_free_fd() + 1;
		bad |= setrlimit(RLIMIT_NOFILE, &one) != 0;
		rc = sc_l3_fill(l3, &la, dst, cap, 0);
		bad |= setrlimit(RLIMIT_NOFILE, &was) != 0;
		if (rc == 0 || rc == -EBADMSG || rc == -ENOENT)
			_exit(13); /* a segment that could not be opened is not missing */
		sc_l3_stats(l3, &st);
		bad |= st.quarantined != 0 || sc_l3_fill(l3, &la, dst, cap, 0) != 0 || memcmp(dst, a, na) != 0;
		_exit(bad ? 12 : 0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "the child: status %d (exit 10: the fill succeeded or judged the object; 11: quarantined; 12: no "
		      "bytes after; 13: a segment it could not open was a miss)", st);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	sc_l3_close(l3);
	free(a);
	free(w);
}
END_TEST

/* sc_l3_verify finding a bad segment in a process that may open the descriptors of its walk (the
 * objects' subdirectory, the object, the segment) and none more: the search for the objects that
 * name the segment then opens no manifest (it finds none), yet the segment and the object being
 * verified go to quarantine and the object is reported bad, as with descriptors to spare. */
START_TEST(verify_of_a_bad_segment_with_no_descriptor_to_spare_quarantines_it)
{
	struct one_seg_obj o;
	one_seg_obj_open(&o, 3, 31);
	char sp[256], pa[256], hex[33], qdir[256];
	seg_path_of(o.a + SEG, SEG, sp, sizeof(sp));
	sc_test_flip_byte(sp, 100, 0x40);
	obj_path(&o.la, pa, sizeof(pa));
	struct sc_l3_stats st0, st;
	sc_l3_stats(o.l3, &st0);
	/* three descriptors to spare, exactly: the free ones below the first three free in a row
	 * taken (the ring's, the handle's and the harness's are open above them) */
	int plug[64], nplug = 0, low;
	while (fcntl((low = sc_test_lowest_free_fd()) + 1, F_GETFD) >= 0 || fcntl(low + 2, F_GETFD) >= 0) {
		ck_assert_int_lt(nplug, 64);
		ck_assert_int_eq(plug[nplug++] = open("/dev/null", O_RDONLY | O_CLOEXEC), low);
	}
	struct rlimit was, three;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &was), 0);
	three = (struct rlimit){ (rlim_t)low + 3, was.rlim_max };
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &three), 0);
	int rc = sc_l3_verify(o.l3, NULL, NULL);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &was), 0);
	while (nplug)
		close(plug[--nplug]);
	ck_assert_int_eq(rc, 1);
	ck_assert_int_eq(access(sp, F_OK), -1);
	struct sc_digest sd = sc_digest(o.a + SEG, SEG);
	l3_digest_hex(sd.lo, sd.hi, hex);
	snprintf(qdir, sizeof(qdir), "%s/quarantine", tmpdir);
	ck_assert_msg(dir_has(qdir, hex, ".seg"), "no %s.*.seg in %s", hex, qdir);
	ck_assert_int_eq(access(pa, F_OK), -1);
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined + 1);
	ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, 0), -ENOENT);
	one_seg_obj_close(&o);
}
END_TEST

/* Write @len bytes at DIR/<sub>/<2 hex>/<32 hex><suffix>, the name of digest @d (its
 * subdirectory made when missing). */
static void plant(const char *sub, struct sc_digest d, const char *suffix, const void *b1, size_t n1,
		  const void *b2, size_t n2)
{
	char hex[33], path[300];
	l3_digest_hex(d.lo, d.hi, hex);
	snprintf(path, sizeof(path), "%s/%s/%.2s", tmpdir, sub, hex);
	ck_assert(mkdir(path, 0700) == 0 || errno == EEXIST);
	snprintf(path, sizeof(path), "%s/%s/%.2s/%s%s", tmpdir, sub, hex, hex, suffix);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, b1, n1), (ssize_t)n1);
	if (n2)
		ck_assert_int_eq(write(fd, b2, n2), (ssize_t)n2);
	close(fd);
}

/* A segmented object of 250 segments of 16 bytes, one file named 250 times (as a store written by
 * another version, or by hand, may hold), planted in @l3's store beside a put that makes its
 * segment directory: its payload in @a, its location in @la, its file's and segment's paths in
 * @pa and @sp. Its manifest is longer than its payload, and no segment but the last ends at an
 * O_DIRECT offset alignment. */
enum { SMALL_N = 250, SMALL_LEN = 16 };

static void plant_small_segments(struct sc_l3 *l3, uint8_t a[SMALL_N * SMALL_LEN], struct sc_location *la,
				 char pa[256], char sp[256])
{
	size_t nb;
	uint8_t *b = payload(1, 0, 91, 0, &nb), one[SMALL_LEN];
	struct sc_location lb;
	ck_assert_int_eq(put_buf(l3, "b", 10, b, nb, &lb), 0); /* DIR/seg made */
	free(b);
	struct l3_seg_ent ent[SMALL_N];
	h_bytes(92, one, SMALL_LEN);
	struct sc_digest sd = sc_digest(one, SMALL_LEN);
	for (int i = 0; i < SMALL_N; i++) {
		memcpy(a + i * SMALL_LEN, one, SMALL_LEN);
		ent[i] = (struct l3_seg_ent){ sd.lo, sd.hi, SMALL_LEN };
	}
	struct sc_digest d = sc_digest(a, SMALL_N * SMALL_LEN);
	ck_assert_uint_gt(sizeof(ent), SMALL_N * SMALL_LEN); /* the entries outrun the payload */
	plant("seg", sd, ".seg", one, SMALL_LEN, NULL, 0);
	uint8_t *block = seg_block_of(ent, SMALL_N, SMALL_N * SMALL_LEN, d);
	plant("objects", d, ".sc3", block, L3_HDR_BLOCK, ent, sizeof(ent));
	free(block);
	ck_assert_int_eq(sc_l3_lookup(l3, d, la), 0);
	seg_path(sd.lo, sd.hi, sp, 256);
	obj_path(la, pa, 256);
}

/* A store reading O_DIRECT (mode on) with the object of plant_small_segments planted in it. */
struct small_direct {
	struct sc_l3 *l3;
	struct sc_l3_stats st0; /* the store's statistics before */
	uint8_t a[SMALL_N * SMALL_LEN];
	struct sc_location la;
	char pa[256], sp[256];
};

/* Open *@o: 0, or 1 (the SKIP said) where its directory takes no O_DIRECT. */
static int small_direct_open(struct small_direct *o)
{
	if (!(o->l3 = open_seg_direct(&o->st0)))
		return 1;
	plant_small_segments(o->l3, o->a, &o->la, o->pa, o->sp);
	return 0;
}

/* A segment file whose bytes hash to a digest other than its manifest entry's, in either half
 * (here: a segment's true bytes under a name whose low or high half is off by one bit, with an
 * entry naming it so; planted, as another version or a hand may leave it), is bad: -EBADMSG, and
 * the object is quarantined, though the object's own digest matches. */
START_TEST(a_segment_off_its_entrys_digest_in_either_half_is_bad)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t nb;
	uint8_t *b = payload(1, 0, 93, 0, &nb);
	struct sc_location lb;
	ck_assert_int_eq(put_buf(l3, "b", 10, b, nb, &lb), 0); /* DIR/seg made */
	free(b);
	for (int half = 0; half < 2; half++) {
		uint8_t one[4096];
		h_bytes(94 + half, one, sizeof(one));
		struct sc_digest d = sc_digest(one, sizeof(one)); /* the object's, and the segment's true one */
		struct l3_seg_ent ent = { d.lo ^ (half == 0), d.hi ^ (half == 1), sizeof(one) };
		plant("seg", (struct sc_digest){ ent.lo, ent.hi }, ".seg", one, sizeof(one), NULL, 0);
		uint8_t *block = seg_block_of(&ent, 1, sizeof(one), d);
		plant("objects", d, ".sc3", block, L3_HDR_BLOCK, &ent, sizeof(ent));
		free(block);
		struct sc_location la;
		ck_assert_int_eq(sc_l3_lookup(l3, d, &la), 0);
		struct sc_l3_stats st0, st;
		sc_l3_stats(l3, &st0);
		ck_assert_msg(fill_cmp(l3, &la, one, 0) == -EBADMSG, "half %d: a segment off its entry's digest was served", half);
		sc_l3_stats(l3, &st);
		ck_assert_uint_gt(st.quarantined, st0.quarantined);
	}
	sc_l3_close(l3);
}
END_TEST

/* The planted object of 250 segments of 16 bytes, its file cold and read O_DIRECT (auto mode; the
 * segment's file warm, read buffered): the first read, of the header block and the destination's
 * first chunk, brings only part of the entries; the rest are read after it, buffered, and the fill
 * returns the bytes. */
START_TEST(a_manifest_longer_than_the_first_read_is_read_after_it)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	struct sc_l3_stats st0, st;
	if (no_direct_here(l3, &st0))
		return;
	uint8_t a[SMALL_N * SMALL_LEN];
	struct sc_location la;
	char sp[256], pa[256];
	plant_small_segments(l3, a, &la, pa, sp);
	ck_assert_uint_ne(SMALL_N * sizeof(struct l3_seg_ent) % st0.dio_offset_align, 0);
	uint8_t *dst = aligned_alloc(4096, 4096);
	ck_assert_ptr_nonnull(dst);
	for (int k = 0; k < 2; k++) {
		cache_only(pa, 0);
		cache_only(sp, 1);
		memset(dst, 0, 4096);
		struct sc_l3_fill_req req = { .loc = &la, .dst = dst, .dst_bytes = 4096 }, *rp = &req, *done;
		ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
		ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, 10 * 1000000000ll), 1);
		ck_assert_int_eq(req.result, 0);
		ck_assert_int_eq(req.direct, 1);
		ck_assert(memcmp(dst, a, sizeof(a)) == 0);
	}
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	sc_l3_close(l3);
	free(dst);
}
END_TEST

/* A manifest that came whole with the header block is read from there: the object's file is not
 * switched to buffered for it. In a child where a switch of a file to buffered (fcntl F_SETFL 0)
 * is refused (EINVAL, a seccomp filter), a direct fill (mode on) of four whole segments, every
 * read of it direct, returns the bytes; the parent's fill after it too. */
START_TEST(a_manifest_read_with_the_header_switches_no_file)
{
	struct sc_l3_stats st0;
	size_t n;
	uint8_t *a;
	struct sc_location la;
	struct sc_l3 *l3 = open_four_direct(58, &st0, &a, &n, &la);
	if (!l3)
		return;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int rc = sc_test_refuse_setfl(0);
		if (rc)
			_exit(rc);
		size_t cap = (n + 4095) / 4096 * 4096;
		uint8_t *dst = aligned_alloc(4096, cap);
		struct sc_l3_fill_req req = { .loc = &la, .dst = dst, .dst_bytes = cap }, *rp = &req, *done;
		if (!dst || sc_l3_fill_submit(l3, &rp, 1) != 1 || sc_l3_fill_reap(l3, &done, 1, -1) != 1)
			_exit(22);
		if (req.result)
			_exit(23);
		_exit(req.direct && memcmp(dst, a, n) == 0 ? 0 : 24);
	}
	int ex = sc_test_child_status(pid, "no seccomp filter: no refused switch to buffered");
	ck_assert_msg(ex <= 0, "the child: exit %d (78: the filter does not hold; 22: no fill; 23: the fill failed; 24: not direct, or wrong bytes)", ex);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* Segments whose lengths are not multiples of the O_DIRECT offset alignment, in mode on: a direct
 * read of one would be rounded up over the places of the segments after it (which may have landed
 * already, from the file or from L2). Each such segment is read buffered (only the object's last
 * may be read direct: its rounded tail stays inside the destination); the fill returns the bytes,
 * the object and its segment stay (nothing quarantined), and nothing past the destination is
 * written. */
START_TEST(segments_off_the_direct_alignment_are_read_buffered_next_to_each_other)
{
	struct small_direct o;
	if (small_direct_open(&o))
		return;
	struct sc_l3_stats st;
	ck_assert_uint_ne(SMALL_LEN % o.st0.dio_offset_align, 0);
	enum { DST = 8192 };
	uint8_t *dst = aligned_alloc(4096, DST);
	ck_assert_ptr_nonnull(dst);
	for (int k = 0; k < 3; k++) {
		cache_only(o.pa, 0);
		cache_only(o.sp, 0);
		memset(dst, 0x5a, DST);
		ck_assert_int_eq(sc_l3_fill(o.l3, &o.la, dst, DST, 0), 0);
		ck_assert(memcmp(dst, o.a, sizeof(o.a)) == 0);
		/* the last segment's rounded read may reach past the payload, never past the rounding */
		size_t al = o.st0.dio_offset_align, end = sizeof(o.a) - SMALL_LEN + (SMALL_LEN + al - 1) / al * al;
		for (size_t i = end; i < DST; i++)
			ck_assert_msg(dst[i] == 0x5a, "a byte past the last segment's read written (%zu)", i);
	}
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, o.st0.quarantined);
	ck_assert_int_eq(access(o.pa, F_OK), 0);
	ck_assert_int_eq(access(o.sp, F_OK), 0);
	ck_assert_int_eq(sc_l3_verify(o.l3, NULL, NULL), 0);
	sc_l3_close(o.l3);
	free(dst);
}
END_TEST

/* A manifest read from a file cut short after it was sized (another process truncating it, a
 * janitor racing a reader): -EBADMSG whatever errno held before (none, or a failure's), never a
 * parsed header: cut to nothing, inside its header block, or to a whole valid header block with
 * none of the entries it names. */
START_TEST(manifest_of_a_file_cut_short_is_ebadmsg)
{
	int fd = open(tmpdir, O_TMPFILE | O_RDWR, 0600);
	ck_assert_int_ge(fd, 0);
	struct l3_seg_ent ent[2] = { { 1, 2, 8192 }, { 3, 4, 4096 } };
	const uint64_t sized = L3_HDR_BLOCK + 2 * sizeof(struct l3_seg_ent);
	uint8_t *block = seg_block(ent, 2, 8192 + 4096);
	for (int k = 0; k < 3; k++) {
		if (k == 1)
			ck_assert_int_eq(pwrite(fd, "\1\2\3", 3, 0), 3); /* three bytes of a header */
		if (k == 2) {
			ck_assert_int_eq(pwrite(fd, block, L3_HDR_BLOCK, 0), (ssize_t)L3_HDR_BLOCK);
			struct l3_obj_hdr h;
			ck_assert_int_eq(l3_hdr_parse(block, sized, &h), 0); /* the header itself is good */
			ck_assert_uint_eq(h.seg_count, 2);
			ck_assert_uint_eq(file_size_fd(fd), L3_HDR_BLOCK); /* the entries are not there */
		}
		for (int was = 0; was < 2; was++) {
			struct l3_obj_hdr h;
			struct l3_seg_ent *e = NULL;
			errno = was ? EIO : 0;
			ck_assert_int_eq(l3_seg_manifest(fd, sized, &h, &e), -EBADMSG);
			ck_assert_ptr_null(e);
		}
	}
	free(block);
	close(fd);
}
END_TEST

/* Segmented fills close every file they open, and only those: the process's descriptors
 * (standard input among them) are as many after each fill as before; and a segment file opened
 * as descriptor 0 (standard input closed while the fill was in flight, its object's file open) is
 * read like any other, and closed. */
START_TEST(segmented_fills_close_every_segment_file_descriptor_0_too)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t n;
	uint8_t *a = payload(3, 0, 51, 100, &n);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0); /* the ring made */
	ck_assert_int_ge(fcntl(0, F_GETFD), 0);
	int before = sc_test_open_fds();
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	ck_assert_int_eq(sc_test_open_fds(), before);
	/* submitted alone (its object's file opened in this thread at once), then 0 freed: the
	 * segments are opened as the reap reads the manifest, the first as 0 */
	size_t cap = (n + 4095) / 4096 * 4096;
	uint8_t *dst = aligned_alloc(4096, cap);
	ck_assert_ptr_nonnull(dst);
	struct sc_l3_fill_req req = { .loc = &la, .dst = dst, .dst_bytes = cap }, *rp = &req, *done;
	ck_assert_int_ge(fcntl(0, F_GETFD), 0);
	ck_assert_int_eq(sc_l3_fill_submit(l3, &rp, 1), 1);
	ck_assert_int_eq(sc_test_open_fds(), before + 1); /* the object's file */
	ck_assert_int_eq(close(0), 0);
	ck_assert_int_eq(sc_l3_fill_reap(l3, &done, 1, 10 * 1000000000ll), 1);
	ck_assert_int_eq(req.result, 0);
	ck_assert(memcmp(dst, a, n) == 0);
	ck_assert_int_eq(fcntl(0, F_GETFD), -1); /* closed with the rest */
	ck_assert_int_eq(sc_test_open_fds(), before - 1);
	sc_l3_close(l3);
	free(a), free(dst);
}
END_TEST

/* A segment read the kernel fails (its place in the destination not writable: -EFAULT) fails the
 * fill with the kernel's error: not a miss, nothing quarantined; with the memory writable again,
 * the same fill returns the bytes. (Buffered, the last of 40 segments: past what the first read,
 * of the header block and the destination's first chunk, covers.) */
START_TEST(a_segment_read_that_fails_fails_the_fill_with_its_error)
{
	struct one_seg_obj o;
	one_seg_obj_open(&o, 40, 61);
	uint8_t *dst = mmap(NULL, o.n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(dst != MAP_FAILED);
	ck_assert_int_eq(mprotect(dst + 39 * SEG, SEG, PROT_READ), 0); /* the last segment's place */
	struct sc_l3_stats st0, st;
	sc_l3_stats(o.l3, &st0);
	ck_assert_int_eq(sc_l3_fill(o.l3, &o.la, dst, o.n, SC_L3_FILL_BUFFERED), -EFAULT);
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	ck_assert_int_eq(mprotect(dst + 39 * SEG, SEG, PROT_READ | PROT_WRITE), 0);
	ck_assert_int_eq(sc_l3_fill(o.l3, &o.la, dst, o.n, 0), 0);
	ck_assert(memcmp(dst, o.a, o.n) == 0);
	munmap(dst, o.n);
	one_seg_obj_close(&o);
}
END_TEST

static void cut_to_nothing(void *path, int nth)
{
	if (!nth && truncate(path, 0) < 0)
		abort();
}

/* A segment file cut to nothing after the fill saw its size, before its read ran (another process
 * truncating it: the read, held by a fanotify permission event, runs after the cut and reads
 * nothing): the fill is a miss, as for a segment cut before it, and nothing is quarantined. */
START_TEST(a_segment_cut_under_its_read_is_a_miss)
{
	struct one_seg_obj o;
	one_seg_obj_open(&o, 3, 71);
	ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, SC_L3_FILL_BUFFERED), 0);
	char sp[256];
	seg_path_of(o.a + SEG, SEG, sp, sizeof(sp));
	struct sc_fan f;
	if (sc_fan_start_or_skip(&f, sp, FAN_ACCESS_PERM, cut_to_nothing, sp)) {
		one_seg_obj_close(&o);
		return;
	}
	struct sc_l3_stats st0, st;
	sc_l3_stats(o.l3, &st0);
	ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, SC_L3_FILL_BUFFERED), -ENOENT);
	sc_fan_stop(&f);
	ck_assert(f.acted);
	ck_assert_uint_eq(file_size(sp), 0);
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	one_seg_obj_close(&o);
}
END_TEST

/* Rename ((const char **)@names)[0] over [1] at the first read held (another process putting a
 * good file under the name while the read waits). */
static void rename_over(void *names, int nth)
{
	const char *const *p = names;
	if (!nth && rename(p[0], p[1]) < 0)
		abort();
}

/* A segment replaced under its read by a good file (another process renaming a good copy over its
 * name while the read waits, held by a fanotify permission event). Bad as read (_i 0, 1): the name
 * no longer names what was read, and neither the good segment nor the objects that name it go to
 * quarantine; a fill (_i 0) is a miss (-ENOENT), a verify of the store (_i 1) counts the segment
 * missing (the object reported, as for any missing segment, not quarantined). Good as read (_i 2):
 * a verify finds nothing wrong, whichever file held the bytes. Nothing is quarantined, and the
 * next fill returns the bytes. */
START_TEST(a_segment_replaced_under_its_read_is_not_quarantined)
{
	struct one_seg_obj o;
	one_seg_obj_open(&o, 3, 72);
	char sp[256], good[300];
	seg_path_of(o.a + SEG, SEG, sp, sizeof(sp));
	snprintf(good, sizeof(good), "%s/good-segment", tmpdir);
	int fd = open(good, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, o.a + SEG, SEG), SEG);
	close(fd);
	if (_i < 2)
		sc_test_flip_byte(sp, 100, 0x40); /* the file under the name, in place: bad */
	const char *names[2] = { good, sp };
	struct sc_fan f;
	if (sc_fan_start_or_skip(&f, sp, FAN_ACCESS_PERM, rename_over, names)) {
		one_seg_obj_close(&o);
		return;
	}
	struct sc_l3_stats st0, st;
	sc_l3_stats(o.l3, &st0);
	if (_i == 0)
		ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, SC_L3_FILL_BUFFERED), -ENOENT);
	else
		ck_assert_int_eq(sc_l3_verify(o.l3, NULL, NULL), _i == 1 ? 1 : 0); /* the objects reported bad */
	sc_fan_stop(&f);
	ck_assert_int_ge(f.acted, 1); /* an uncached page is read again from io-wq: a second event */
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	ck_assert_int_eq(access(sp, F_OK), 0);
	ck_assert_int_eq(access(good, F_OK), -1);
	ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, 0), 0);
	one_seg_obj_close(&o);
}
END_TEST

/* A segmented object's file ends with its manifest: its fill makes no read past it (the first read
 * comes back short there, and a read after it, of nothing, would be one more round trip to the
 * daemon on FUSE). Seen in the ring's submission array: no read into the destination but at a
 * segment's place. */
START_TEST(a_segmented_fill_reads_nothing_past_its_manifest)
{
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .fd_cache = SC_L3_FD_CACHE_NONE, .o_direct = SC_L3_ODIRECT_OFF }, SEG);
	size_t n;
	uint8_t *a = payload(4, 0, 59, 0, &n);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	size_t cap = (n + 4095) / 4096 * 4096;
	uint8_t *dst = aligned_alloc(4096, cap);
	ck_assert_ptr_nonnull(dst);
	ck_assert_int_eq(sc_l3_fill(l3, &la, dst, cap, 0), 0);
	ck_assert(memcmp(dst, a, n) == 0);
	struct l3_ring *r = l3_ring_find(l3);
	ck_assert_ptr_nonnull(r);
	int reads = 0, past = 0;
	for (unsigned i = 0; i < r->ring.sq.ring_entries; i++) {
		const struct io_uring_sqe *q = &r->ring.sq.sqes[i];
		uint64_t at = q->addr - (uint64_t)(uintptr_t)dst;
		if ((q->opcode != IORING_OP_READ && q->opcode != IORING_OP_READ_FIXED) || at >= cap)
			continue;
		reads++;
		past += at % SEG != 0;
	}
	ck_assert_msg(reads >= 4, "%d reads into the destination: not the segments' (the array was reused?)", reads);
	ck_assert_msg(past == 0, "%d reads into the destination off a segment's place", past);
	free(a), free(dst);
	sc_l3_close(l3);
}
END_TEST

/* The segment file of regrow(): cut to @cut bytes at every read of it until its first @cut bytes
 * landed in the destination (a read may report more than one event: a direct read tried at
 * submission and again by io-wq), then written back whole, once: grown by 8 KiB of other bytes
 * past its length, or (@direct) exactly, through O_DIRECT, with none of it left in the page cache. */
struct regrow {
	const char *path;
	const uint8_t *bytes; /* the segment's SEG bytes */
	const volatile uint8_t *dst; /* its place in the destination */
	size_t cut;
	int direct, grown;
};

static void regrow(void *ctx, int nth)
{
	struct regrow *g = ctx;
	(void)nth;
	if (memcmp((const uint8_t *)g->dst, g->bytes, g->cut)) {
		if (truncate(g->path, (off_t)g->cut) < 0)
			abort();
		return;
	}
	if (g->grown++)
		return;
	static uint8_t buf[SEG + 8192] __attribute__((aligned(4096)));
	memcpy(buf, g->bytes, SEG);
	memset(buf + SEG, 0xa5, 8192);
	int fd = open(g->path, O_WRONLY | (g->direct ? O_DIRECT : 0));
	size_t len = g->direct ? SEG : sizeof(buf);
	if (fd < 0 || pwrite(fd, buf, len, 0) != (ssize_t)len || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		abort();
	close(fd);
}

/* A segment read cut short (the file cut under it) reads the rest, exactly the bytes its segment
 * lacks, and the fill returns the right bytes with nothing quarantined. _i 0: a direct read cut at
 * an unaligned length, its rest read buffered: with the file grown past the segment's length
 * meanwhile, nothing lands past the segment's place (in the next segment's, already read); _i 1:
 * the same, buffered, through a handle whose filesystem takes no O_DIRECT (alignments 0); _i 2: a
 * direct read cut at an aligned length, its rest read direct too (none of it in the page cache). */
START_TEST(the_rest_of_a_short_segment_read_stops_at_its_segments_end)
{
	struct sc_l3_stats st0, st;
	size_t n;
	uint8_t *a;
	struct sc_location la;
	struct sc_l3 *l3;
	if (_i != 1) {
		if (!(l3 = open_four_direct(57, &st0, &a, &n, &la)))
			return;
	} else {
		l3 = open_seg(NULL, SEG);
		a = payload(4, 0, 58, 0, &n);
		ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
		ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
		l3->dio_mem_align = l3->dio_off_align = 0;
		sc_l3_stats(l3, &st0);
	}
	size_t cap = (n + 4095) / 4096 * 4096;
	uint8_t *dst = aligned_alloc(4096, cap);
	ck_assert_ptr_nonnull(dst);
	memset(dst, 0x5a, cap);
	char sp[256];
	seg_path_of(a, SEG, sp, sizeof(sp));
	struct regrow g = { sp, a, dst, _i == 2 ? 4096 : 100, _i == 2, 0 };
	struct sc_fan f;
	if (sc_fan_start_or_skip(&f, sp, FAN_ACCESS_PERM, regrow, &g)) {
		free(a), free(dst);
		sc_l3_close(l3);
		return;
	}
	int rc = sc_l3_fill(l3, &la, dst, cap, 0);
	sc_fan_stop(&f);
	ck_assert_msg(g.grown >= 1, "the segment's rest was not read again");
	ck_assert_msg(rc == 0, "the fill: %s", sc_strerror(rc));
	ck_assert(memcmp(dst, a, n) == 0);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	if (_i == 2)
		ck_assert_uint_eq(cached_pages(sp), 0);
	free(a), free(dst);
	sc_l3_close(l3);
}
END_TEST

/* Once a segmented fill has its error, the completions of its other reads change nothing: with
 * the first segment cut to nothing under its direct read (a miss) and the second's direct read
 * refused after it (l3_test_refuse_seg_direct), the refused read is not read again and the fill
 * is the miss; nothing is quarantined. */
START_TEST(a_segmented_fills_error_stays_through_its_other_reads)
{
	struct sc_l3_stats st0, st;
	size_t n;
	uint8_t *a;
	struct sc_location la;
	struct sc_l3 *l3 = open_four_direct(54, &st0, &a, &n, &la);
	if (!l3)
		return;
	char sp[256];
	seg_path_of(a, SEG, sp, sizeof(sp));
	struct sc_fan f;
	if (sc_fan_start_or_skip(&f, sp, FAN_ACCESS_PERM, cut_to_nothing, sp)) {
		free(a);
		sc_l3_close(l3);
		return;
	}
	atomic_store(&l3_test_refuse_seg_direct, 1ull << 1);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), -ENOENT);
	sc_fan_stop(&f);
	ck_assert(f.acted);
	ck_assert_uint_eq(file_size(sp), 0);
	ck_assert_msg(atomic_exchange(&l3_test_refuse_seg_direct, 0) == 1ull << 1,
		      "the second segment's read was looked at after the fill had its error");
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	free(a);
	sc_l3_close(l3);
}
END_TEST

static void close_stdin(void *unused, int nth)
{
	(void)unused;
	if (!nth && close(0) < 0)
		abort();
}

/* A bad segment found by a fill quarantines the object naming it even when that object's manifest
 * is opened as descriptor 0 by the search for the segment's users (another thread of the process
 * closed its standard input while the search opened the objects' subdirectory: held there by a
 * fanotify permission event), and the manifest's descriptor is closed after. */
START_TEST(a_bad_segments_user_whose_manifest_opens_as_descriptor_0_is_quarantined)
{
	struct one_seg_obj o;
	one_seg_obj_open(&o, 3, 81);
	ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, 0), 0); /* the ring made */
	char sp[256], pa[256], sub[256];
	seg_path_of(o.a + SEG, SEG, sp, sizeof(sp));
	sc_test_flip_byte(sp, 10, 0x40);
	obj_path(&o.la, pa, sizeof(pa));
	snprintf(sub, sizeof(sub), "%s", pa);
	*strrchr(sub, '/') = 0; /* DIR/objects/XX: only a's file in it */
	ck_assert_int_ge(fcntl(0, F_GETFD), 0);
	struct sc_fan f;
	if (sc_fan_start_or_skip(&f, sub, FAN_OPEN_PERM | FAN_ONDIR, close_stdin, NULL)) {
		one_seg_obj_close(&o);
		return;
	}
	ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, 0), -EBADMSG);
	sc_fan_stop(&f);
	ck_assert(f.acted);
	ck_assert_int_eq(access(sp, F_OK), -1);
	ck_assert_int_eq(access(pa, F_OK), -1);
	ck_assert_int_eq(fcntl(0, F_GETFD), -1);
	one_seg_obj_close(&o);
}
END_TEST

/* Verification reads a segment opened as descriptor 0 (another thread of the process closed its
 * standard input while verification opened the object's file: held there by a fanotify
 * permission event) like any other: the store verifies clean, and the segment's descriptor is
 * closed after. */
START_TEST(verification_reads_a_segment_opened_as_descriptor_0)
{
	struct one_seg_obj o;
	one_seg_obj_open(&o, 3, 91);
	char pa[256];
	obj_path(&o.la, pa, sizeof(pa));
	ck_assert_int_ge(fcntl(0, F_GETFD), 0);
	struct sc_fan f;
	if (sc_fan_start_or_skip(&f, pa, FAN_OPEN_PERM, close_stdin, NULL)) {
		one_seg_obj_close(&o);
		return;
	}
	ck_assert_int_eq(sc_l3_verify(o.l3, NULL, NULL), 0);
	sc_fan_stop(&f);
	ck_assert(f.acted);
	ck_assert_int_eq(fcntl(0, F_GETFD), -1);
	ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, 0), 0);
	one_seg_obj_close(&o);
}
END_TEST

/* The segment directory opened as descriptor 0 (standard input closed when segments were turned
 * on) is the store's like any other: a segmented put, its fill and its verification go through it,
 * and the close of the handle closes it. */
START_TEST(a_segment_directory_opened_as_descriptor_0_is_used)
{
	struct sc_l3 *l3 = open_seg(NULL, 0);
	char sd[300];
	snprintf(sd, sizeof(sd), "%s/seg", tmpdir);
	ck_assert_int_eq(access(sd, F_OK), -1); /* no segments yet: no directory open */
	ck_assert_int_eq(close(0), 0);
	ck_assert_int_eq(sc_l3_set_segment_bytes(l3, SEG), 0);
	struct stat a0, b0;
	ck_assert_int_eq(fstat(0, &a0), 0);
	ck_assert_int_eq(stat(sd, &b0), 0);
	ck_assert(a0.st_dev == b0.st_dev && a0.st_ino == b0.st_ino);
	size_t n;
	uint8_t *a = payload(3, 0, 95, 10, &n);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	ck_assert_uint_eq(la.file_bytes, L3_HDR_BLOCK + 4 * sizeof(struct l3_seg_ent)); /* segmented */
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	ck_assert_int_eq(sc_l3_verify(l3, NULL, NULL), 0);
	sc_l3_close(l3);
	ck_assert_int_eq(fcntl(0, F_GETFD), -1);
	free(a);
}
END_TEST

/* At the second read of the object file @path: its header block rewritten in place as a whole
 * object's of a payload as long as its manifest, claiming the digest of an empty payload. */
static void rewrite_as_whole(void *path, int nth)
{
	if (nth != 1)
		return;
	static uint8_t one;
	uint64_t body = file_size(path) - L3_HDR_BLOCK;
	uint8_t *block = aligned_alloc(4096, L3_HDR_BLOCK);
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { &one }, .sec_len = { body } };
	struct sc_l3_put_args a = { .ns = "m", .tokens = toks, .token_count = 4, .payload = &pl };
	struct sc_digest e = sc_digest(&one, 0);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (!block || fd < 0 || l3_hdr_build(block, &a, (XXH128_hash_t){ e.lo, e.hi }, (XXH128_hash_t){ 7, 8 }) ||
	    pwrite(fd, block, L3_HDR_BLOCK, 0) != L3_HDR_BLOCK)
		abort();
	close(fd);
	free(block);
}

/* A segmented object's file rewritten in place while verification reads it (another writer; held
 * between its two reads of the header by a fanotify permission event) into a whole object's header
 * that claims an empty payload's digest: the object is reported bad and quarantined, never valid. */
START_TEST(verify_of_an_object_rewritten_under_it_is_bad)
{
	struct one_seg_obj o;
	one_seg_obj_open(&o, 3, 99);
	ck_assert_int_eq(sc_l3_verify(o.l3, NULL, NULL), 0);
	char pa[256];
	obj_path(&o.la, pa, sizeof(pa));
	struct sc_fan f;
	if (sc_fan_start_or_skip(&f, pa, FAN_ACCESS_PERM, rewrite_as_whole, pa)) {
		one_seg_obj_close(&o);
		return;
	}
	struct sc_l3_stats st0, st;
	sc_l3_stats(o.l3, &st0);
	int rc = sc_l3_verify(o.l3, NULL, NULL);
	sc_fan_stop(&f);
	ck_assert_int_ge(f.acted, 2); /* the header read twice, rewritten between */
	ck_assert_int_eq(rc, 1);
	ck_assert_int_eq(access(pa, F_OK), -1);
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined + 1);
	one_seg_obj_close(&o);
}
END_TEST

/* A segment file longer than its manifest entry (bytes appended, by hand or by another version) is
 * not that segment's file: a miss, nothing quarantined, although its first bytes are the
 * segment's. */
START_TEST(a_grown_segment_is_a_miss)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t n;
	struct sc_location la;
	uint8_t *a = put_payload(l3, 3, 49, 0, &n, &la);
	char sp[256];
	seg_path_of(a + SEG, SEG, sp, sizeof(sp));
	int fd = open(sp, O_WRONLY | O_APPEND | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "grown", 5), 5);
	close(fd);
	struct sc_l3_stats st0, st;
	ck_assert_int_eq(sc_l3_stats(l3, &st0), 0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), -ENOENT);
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	ck_assert_uint_eq(file_size(sp), SEG + 5);
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* A segment open the ring refuses as a kernel without openat2 there does (-EINVAL, -EOPNOTSUPP) is
 * made again with a system call, and the fill returns the bytes; any other error of an open
 * (-EACCES), and any error of a buffered segment read (-EINVAL among them: only a direct read's is
 * a refusal, read again buffered), fails the fill with it. Nothing is quarantined, no descriptor
 * is left open, and the next fill returns the bytes. (The test build's l3_test_seg_open_res and
 * l3_test_seg_read_res: the next segment open's or read's result.) */
START_TEST(a_failed_segment_open_or_read_is_made_again_or_fails_the_fill)
{
	static const struct {
		_Atomic int *hook;
		int res, want;
	} c[] = { { &l3_test_seg_open_res, -EINVAL, 0 },      { &l3_test_seg_open_res, -EOPNOTSUPP, 0 },
		  { &l3_test_seg_open_res, -EACCES, -EACCES }, { &l3_test_seg_read_res, -EINVAL, -EINVAL },
		  { &l3_test_seg_read_res, -EIO, -EIO } };
	struct sc_l3 *l3 = open_seg(&(struct sc_l3_opts){ .o_direct = SC_L3_ODIRECT_OFF }, SEG);
	size_t n;
	struct sc_location la;
	uint8_t *a = put_payload(l3, 3, 50, 0, &n, &la);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0); /* the ring made */
	struct sc_l3_stats st0, st;
	ck_assert_int_eq(sc_l3_stats(l3, &st0), 0);
	int fds = sc_test_open_fds();
	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		atomic_store(c[i].hook, c[i].res);
		int rc = fill_cmp(l3, &la, a, 0);
		ck_assert_int_eq(atomic_exchange(c[i].hook, 0), 0);
		ck_assert_msg(rc == c[i].want, "a segment %s ended %s: the fill %s",
			      c[i].hook == &l3_test_seg_open_res ? "open" : "read", sc_strerror(c[i].res), sc_strerror(rc));
		ck_assert_int_eq(sc_test_open_fds(), fds);
		ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	}
	ck_assert_int_eq(sc_l3_stats(l3, &st), 0);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	sc_l3_close(l3);
	free(a);
}
END_TEST

START_TEST(missing_or_cut_segment_is_a_miss)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	struct two t;
	put_two(l3, &t, 4, 0);
	char sa[256], sb[256];
	seg_path_of(t.a + 2 * SEG, SEG, sa, sizeof(sa));
	seg_path_of(t.b + 3 * SEG, SEG, sb, sizeof(sb));
	ck_assert_int_eq(unlink(sa), 0);     /* removed (as by another host) */
	ck_assert_int_eq(truncate(sb, 100), 0); /* cut */
	struct sc_l3_stats st0, st;
	sc_l3_stats(l3, &st0);
	ck_assert_int_eq(fill_cmp(l3, &t.la, t.a, 0), -ENOENT);
	ck_assert_int_eq(fill_cmp(l3, &t.lb, t.b, 0), -ENOENT);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined); /* a miss, not a corruption */
	/* verification names both as bad (a manifest naming a missing segment) and keeps them */
	uint32_t missing[2] = { 0, 0 };
	ck_assert_int_eq(sc_l3_verify(l3, note_missing, missing), 2);
	ck_assert_uint_eq(missing[0], 2); /* objects reported with missing segments */
	ck_assert_uint_eq(missing[1], 2); /* one segment each, of 4 */
	char pa[256], pb[256];
	obj_path(&t.la, pa, sizeof(pa));
	obj_path(&t.lb, pb, sizeof(pb));
	ck_assert_int_eq(access(pa, F_OK), 0);
	sc_l3_close(l3);
	/* reconciliation removes a settled object that can never be read */
	age_file(pa, 60);
	age_file(pb, 60);
	l3 = open_seg(NULL, 0);
	ck_assert_int_eq(access(pa, F_OK), -1);
	ck_assert_int_eq(access(pb, F_OK), -1);
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_locate_longest(l3, "a", toks, 10, &loc), 0);
	/* and a new put of B repairs the cut segment (moved away, written whole) */
	ck_assert_int_eq(put_buf(l3, "b", 10, t.b, t.nb, &t.lb), 0);
	ck_assert_int_eq(fill_cmp(l3, &t.lb, t.b, 0), 0);
	ck_assert_uint_eq(file_size(sb), SEG);
	sc_l3_close(l3);
	two_free(&t);
}
END_TEST

/* Does any of @dst's first @nseg segment places hold its segment's bytes (from @want)? (A fill's
 * first read, of the object's header block, lands in the destination's start too; it holds no
 * segment's bytes.) */
static int a_segment_landed(const uint8_t *dst, const uint8_t *want, uint32_t nseg)
{
	for (uint32_t i = 0; i < nseg; i++)
		if (!memcmp(dst + (size_t)i * SEG, want + (size_t)i * SEG, SEG))
			return 1;
	return 0;
}

/* A segmented fill reads no segment before every open of its window ended: with the third of
 * four segments missing, the fill is a miss and no segment was read into its destination. */
START_TEST(a_segmented_fill_reads_nothing_before_its_opens_ended)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	struct two t;
	put_two(l3, &t, 4, 0);
	char sa[256];
	seg_path_of(t.a + 2 * SEG, SEG, sa, sizeof(sa));
	ck_assert_int_eq(unlink(sa), 0);
	size_t cap = (t.la.payload_bytes + 4095) / 4096 * 4096;
	uint8_t *dst = aligned_alloc(4096, cap);
	for (uint32_t flags = 0; flags <= SC_L3_FILL_BUFFERED; flags += SC_L3_FILL_BUFFERED) {
		memset(dst, 0x3c, cap);
		ck_assert_int_eq(sc_l3_fill(l3, &t.la, dst, cap, flags), -ENOENT);
		ck_assert_msg(!a_segment_landed(dst, t.a, 4), "a segment was read for a miss (flags %u)", flags);
	}
	free(dst);
	sc_l3_close(l3);
	two_free(&t);
}
END_TEST

/* A location that describes a segmented object otherwise than its header does (its payload's
 * size, first section or kind) is the caller's error: -EINVAL, nothing quarantined; the true
 * location is still served. */
START_TEST(a_location_that_describes_a_segmented_object_otherwise_is_refused)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t n;
	uint8_t *a = payload(3, 0, 56, 0, &n);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, n, &la), 0);
	struct sc_l3_stats st0, st;
	sc_l3_stats(l3, &st0);
	for (int v = 0; v < 3; v++) {
		struct sc_location off = la;
		if (v == 0)
			off.payload_bytes += 4096;
		else if (v == 1)
			off.sec_len[0] -= 1;
		else
			off.kind = SC_PAYLOAD_RECURRENT_ONLY;
		ck_assert_msg(fill_cmp(l3, &off, a, 0) == -EINVAL, "variant %d served", v);
	}
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	free(a);
	sc_l3_close(l3);
}
END_TEST

/*
 * What a member may plant under a segment's name (the segment files are opened side by side on the
 * fill ring): a FIFO is never waited on, a link never followed (even to a good copy of the
 * segment), a directory never read; each fill ends at once as a miss or a refusal, nothing is
 * quarantined, and once the names hold the segment files again the fills return the bytes.
 */
START_TEST(things_planted_under_a_segment_name_are_never_read)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	struct two t;
	put_two(l3, &t, 4, 0);
	char s1[256], s2[256], s3[256], c1[300], c2[300], c3[300];
	seg_path_of(t.a + 1 * SEG, SEG, s1, sizeof(s1));
	seg_path_of(t.a + 2 * SEG, SEG, s2, sizeof(s2));
	seg_path_of(t.b + 3 * SEG, SEG, s3, sizeof(s3));
	snprintf(c1, sizeof(c1), "%s/outside1.seg", tmpdir);
	snprintf(c2, sizeof(c2), "%s/outside2.seg", tmpdir);
	snprintf(c3, sizeof(c3), "%s/outside3.seg", tmpdir);
	ck_assert_int_eq(rename(s1, c1), 0);           /* the good files, outside the segment directory */
	ck_assert_int_eq(rename(s2, c2), 0);
	ck_assert_int_eq(rename(s3, c3), 0);
	ck_assert_int_eq(symlink(c2, s2), 0);          /* a good copy named through a link */
	ck_assert_int_eq(mkfifo(s1, 0600), 0);         /* a FIFO: an open that blocked would hang */
	ck_assert_int_eq(mkdir(s3, 0700), 0);          /* a directory */
	struct sc_l3_stats st0, st;
	sc_l3_stats(l3, &st0);
	int rc = fill_cmp(l3, &t.la, t.a, 0);
	ck_assert_msg(rc == -ENOENT || rc == -ELOOP, "a fill over a FIFO and a link: %s", sc_strerror(rc));
	ck_assert_int_eq(fill_cmp(l3, &t.lb, t.b, 0), -ENOENT);
	/* the link alone (the FIFO gone): refused, not followed */
	ck_assert_int_eq(unlink(s1), 0);
	ck_assert_int_eq(rename(c1, s1), 0);
	rc = fill_cmp(l3, &t.la, t.a, 0);
	ck_assert_msg(rc == -ENOENT || rc == -ELOOP, "a fill through a linked segment: %s", sc_strerror(rc));
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	/* the names hold files again: the fills return the bytes */
	ck_assert_int_eq(unlink(s2), 0);
	ck_assert_int_eq(rename(c2, s2), 0);
	ck_assert_int_eq(rmdir(s3), 0);
	ck_assert_int_eq(rename(c3, s3), 0);
	ck_assert_int_eq(fill_cmp(l3, &t.la, t.a, 0), 0);
	ck_assert_int_eq(fill_cmp(l3, &t.lb, t.b, 0), 0);
	sc_l3_close(l3);
	two_free(&t);
}
END_TEST

/* A directory planted under a segment's name whose size is the segment's length (a last segment
 * as long as an empty directory here) is no segment file: the fill is a miss (-ENOENT), not a
 * read of a directory, and nothing is quarantined. */
START_TEST(a_directory_as_long_as_its_segment_is_a_miss)
{
	char probe[300];
	snprintf(probe, sizeof(probe), "%s/probe", tmpdir);
	ck_assert_int_eq(mkdir(probe, 0700), 0);
	struct stat sb;
	ck_assert_int_eq(stat(probe, &sb), 0);
	ck_assert_int_eq(rmdir(probe), 0);
	if (sb.st_size <= 0 || sb.st_size >= SEG) {
		sc_skip("an empty directory here is %lld bytes: no segment as long", (long long)sb.st_size);
		return;
	}
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t n;
	uint8_t *a = payload(2, 0, 63, (size_t)sb.st_size, &n);
	struct sc_location la;
	ck_assert_int_eq(put_buf(l3, "a", 12, a, n, &la), 0);
	char sp[256];
	seg_path_of(a + 2 * SEG, (size_t)sb.st_size, sp, sizeof(sp));
	ck_assert_int_eq(unlink(sp), 0);
	ck_assert_int_eq(mkdir(sp, 0700), 0);
	struct stat db;
	ck_assert_int_eq(stat(sp, &db), 0);
	ck_assert_int_eq(db.st_size, sb.st_size);
	struct sc_l3_stats st0, st;
	sc_l3_stats(l3, &st0);
	ck_assert_int_eq(fill_cmp(l3, &la, a, SC_L3_FILL_BUFFERED), -ENOENT);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, st0.quarantined);
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* A put that finds a FIFO or a directory planted under one of its segments' names moves it away
 * and writes the segment: the store counts the segment files it wrote, and nothing for the
 * planted things it moved (they were never counted). */
START_TEST(a_put_over_things_planted_under_its_segment_names_counts_its_own_files)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t nb, n;
	uint8_t *b = payload(1, 0, 61, 0, &nb), *a = payload(3, 0, 62, 0, &n);
	struct sc_location lb, la;
	ck_assert_int_eq(put_buf(l3, "b", 10, b, nb, &lb), 0); /* DIR/seg made */
	char s1[256], s2[256];
	seg_path_of(a + SEG, SEG, s1, sizeof(s1));
	seg_path_of(a + 2 * SEG, SEG, s2, sizeof(s2));
	for (int i = 0; i < 2; i++) {
		char d[256];
		snprintf(d, sizeof(d), "%s", i ? s2 : s1);
		*strrchr(d, '/') = 0;
		ck_assert(mkdir(d, 0700) == 0 || errno == EEXIST);
	}
	ck_assert_int_eq(mkfifo(s1, 0600), 0);
	ck_assert_int_eq(mkdir(s2, 0700), 0);
	struct sc_l3_stats st0, st;
	sc_l3_stats(l3, &st0);
	ck_assert_int_eq(put_buf(l3, "a", 11, a, n, &la), 0);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.segments, st0.segments + 3);
	ck_assert_uint_eq(st.physical_bytes, st0.physical_bytes + la.file_bytes + n);
	struct stat sb;
	ck_assert_int_eq(lstat(s1, &sb), 0);
	ck_assert(S_ISREG(sb.st_mode) && (size_t)sb.st_size == SEG);
	ck_assert_int_eq(lstat(s2, &sb), 0);
	ck_assert(S_ISREG(sb.st_mode) && (size_t)sb.st_size == SEG);
	ck_assert_int_eq(fill_cmp(l3, &la, a, 0), 0);
	sc_l3_close(l3);
	free(a), free(b);
}
END_TEST

/* The object's header block at @p with @mut applied and a correct checksum, into @block. */
static void mutated_header(const char *p, void (*mut)(struct l3_obj_hdr *), uint8_t block[L3_HDR_BLOCK])
{
	int fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, block, L3_HDR_BLOCK, 0), L3_HDR_BLOCK);
	close(fd);
	struct l3_obj_hdr h;
	memcpy(&h, block, sizeof(h));
	mut(&h);
	memcpy(block, &h, sizeof(h));
	uint64_t c = l3_hdr_check(block);
	memcpy(block + offsetof(struct l3_obj_hdr, check), &c, 8);
}

/* Write @block over the header block of the file at @p (no read of it: a fanotify watcher of its
 * reads may do this): 0, or -1. */
static int write_header(const char *p, const uint8_t block[L3_HDR_BLOCK])
{
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	int ok = fd >= 0 && pwrite(fd, block, L3_HDR_BLOCK, 0) == L3_HDR_BLOCK;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* Rewrite the object's header block with @mut applied and a correct checksum. */
static void rewrite_header(const char *p, void (*mut)(struct l3_obj_hdr *))
{
	uint8_t block[L3_HDR_BLOCK];
	mutated_header(p, mut, block);
	ck_assert_int_eq(write_header(p, block), 0);
}

static void huge_count(struct l3_obj_hdr *h)
{
	h->seg_count = 1ull << 40;
}

static void flags_off(struct l3_obj_hdr *h)
{
	h->flags = 0;
}

/* Another object's digest in one half: the file named by the digest holds another. */
static void digest_lo_off(struct l3_obj_hdr *h)
{
	h->digest_lo ^= 1;
}

static void digest_hi_off(struct l3_obj_hdr *h)
{
	h->digest_hi ^= 1ull << 63;
}

/* A manifest longer than the first read, whose reading fails, fails the fill with that error and
 * judges nothing, even where the header block already names another object's digest (the file
 * planted so): nothing is quarantined. Here a seccomp filter in a child fails every pread with
 * EIO (_i 0), or refuses the switch of the object's file to buffered for that read with EINVAL
 * (_i 1). The fill after it, which reads the manifest, finds the digest wrong: -EBADMSG, and the
 * file goes to quarantine. */
START_TEST(a_manifest_that_cannot_be_read_judges_nothing)
{
	struct small_direct o;
	if (small_direct_open(&o))
		return;
	rewrite_header(o.pa, digest_lo_off);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int rc;
		if (_i)
			rc = sc_test_refuse_setfl(0);
		else
			rc = sc_test_refuse_syscall(__NR_pread64, SECCOMP_RET_ERRNO | EIO) ? 77 : 0;
		if (rc)
			_exit(rc);
		if (fill_cmp(o.l3, &o.la, o.a, 0) != (_i ? -EINVAL : -EIO))
			_exit(22);
		_exit(access(o.pa, F_OK) == 0 ? 0 : 23);
	}
	int ex = sc_test_child_status(pid, "no seccomp filter: no failed read of a manifest");
	ck_assert_msg(ex <= 0, "the child: exit %d (78: the filter does not hold; 22: the fill did not fail with the "
		      "read's error; 23: the object was quarantined)", ex);
	struct sc_l3_stats st;
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, o.st0.quarantined);
	ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, 0), -EBADMSG);
	ck_assert_int_eq(access(o.pa, F_OK), -1);
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, o.st0.quarantined + 1);
	sc_l3_close(o.l3);
}
END_TEST

/* The header as a whole object's (version 1) of the body the file holds: a valid header of
 * another format. */
static void whole_object_header(struct l3_obj_hdr *h)
{
	h->version = L3_FORMAT_VERSION;
	h->flags = 0;
	h->payload_bytes = h->section_bytes[0] = h->seg_count * sizeof(struct l3_seg_ent);
	h->seg_count = h->seg_bytes = h->seg_check = 0;
}

/* A format this version does not know (l3_hdr_parse: -EPROTO). */
static void unknown_version(struct l3_obj_hdr *h)
{
	h->version = 7;
}

/* What a schedule hook does at l3seg.fill.manifest_again (a fill saw the header block of a
 * segmented object and reads its whole manifest next), in the filling thread: @block written over
 * the header of the file at @path (another process overwriting it in place), or, with @from set,
 * the file at @from renamed over @path (another process replacing it). */
struct manifest_again {
	const char *path, *from;
	uint8_t block[L3_HDR_BLOCK];
	int hits, failed;
};

static void at_manifest_again(const char *point, void *ctx)
{
	struct manifest_again *x = ctx;
	if (strcmp(point, "l3seg.fill.manifest_again"))
		return;
	x->hits++;
	if (x->from ? rename(x->from, x->path) : write_header(x->path, x->block))
		x->failed = 1;
}

/* Fill @o's object with @x done at the schedule point (reached once): the fill's result. */
static int fill_with_manifest_again(struct small_direct *o, struct manifest_again *x)
{
	sc_sched_set(at_manifest_again, x);
	int rc = fill_cmp(o->l3, &o->la, o->a, 0);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(x->hits, 1);
	ck_assert(!x->failed);
	return rc;
}

/* A segmented object's file overwritten in place between the fill's first read (a header block of a
 * segmented object, part of its manifest) and its read of the whole manifest: the file no longer
 * holds what the first read showed, whatever it holds now (_i 0: a whole object's header, valid;
 * _i 1: a header of a format this version does not know). -EBADMSG, and it goes to quarantine. */
START_TEST(a_manifest_rewritten_between_its_two_reads_is_bad)
{
	struct small_direct o;
	if (small_direct_open(&o))
		return;
	struct manifest_again x = { .path = o.pa };
	mutated_header(o.pa, _i ? unknown_version : whole_object_header, x.block);
	ck_assert_int_eq(fill_with_manifest_again(&o, &x), -EBADMSG);
	ck_assert_int_eq(access(o.pa, F_OK), -1);
	struct sc_l3_stats st;
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, o.st0.quarantined + 1);
	sc_l3_close(o.l3);
}
END_TEST

/* A bad segmented object's file replaced under its fill by a good one (another process renaming a
 * good copy over its name between the fill's two reads of the manifest): what the fill read is
 * bad, but its name no longer names it, and the good file under that name is not moved to
 * quarantine. The fill is a miss (-ENOENT), nothing is quarantined, and the next fill returns the
 * bytes. Bad two ways: _i 0, its header names another object's digest (seen when the manifest is
 * read); _i 1, its manifest lists good segments of another payload (seen once every segment was
 * read and the whole hashed). */
START_TEST(a_bad_manifest_replaced_under_its_fill_is_a_miss)
{
	struct small_direct o;
	if (small_direct_open(&o))
		return;
	char good[300], bad[300];
	snprintf(good, sizeof(good), "%s/good-copy", tmpdir);
	snprintf(bad, sizeof(bad), "%s/bad-copy", tmpdir);
	ck_assert_int_eq(link(o.pa, good), 0); /* the good file kept under another name */
	enum { MB = SMALL_N * sizeof(struct l3_seg_ent) };
	uint8_t *b = aligned_alloc(4096, L3_HDR_BLOCK + MB);
	ck_assert_ptr_nonnull(b);
	if (_i == 0) {
		mutated_header(o.pa, digest_lo_off, b);
		int fd = open(o.pa, O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, b + L3_HDR_BLOCK, MB, L3_HDR_BLOCK), MB);
		close(fd);
	} else {
		uint8_t two[SMALL_LEN];
		h_bytes(96, two, SMALL_LEN);
		struct sc_digest sd = sc_digest(two, SMALL_LEN);
		plant("seg", sd, ".seg", two, SMALL_LEN, NULL, 0);
		struct l3_seg_ent *ent = (struct l3_seg_ent *)(b + L3_HDR_BLOCK);
		for (int i = 0; i < SMALL_N; i++)
			ent[i] = (struct l3_seg_ent){ sd.lo, sd.hi, SMALL_LEN };
		uint8_t *block = seg_block_of(ent, SMALL_N, SMALL_N * SMALL_LEN, o.la.digest);
		memcpy(b, block, L3_HDR_BLOCK);
		free(block);
	}
	int fd = open(bad, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, b, L3_HDR_BLOCK + MB), L3_HDR_BLOCK + MB);
	close(fd);
	ck_assert_int_eq(rename(bad, o.pa), 0); /* the bad file in its place */
	struct manifest_again x = { .path = o.pa, .from = good };
	ck_assert_int_eq(fill_with_manifest_again(&o, &x), -ENOENT);
	ck_assert_int_eq(access(o.pa, F_OK), 0);
	struct sc_l3_stats st;
	sc_l3_stats(o.l3, &st);
	ck_assert_uint_eq(st.quarantined, o.st0.quarantined);
	ck_assert_uint_eq(st.verify_failures, o.st0.verify_failures); /* nothing judged */
	ck_assert_int_eq(fill_cmp(o.l3, &o.la, o.a, 0), 0);
	sc_l3_close(o.l3);
	free(b);
}
END_TEST

START_TEST(corrupted_manifest_is_refused)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t n;
	uint8_t *a = payload(3, 0, 2, 0, &n);
	for (int k = 0; k < 6; k++) {
		struct sc_location loc;
		char ns[8];
		snprintf(ns, sizeof(ns), "m%d", k);
		a[0] = (uint8_t)k; /* another payload each round */
		ck_assert_int_eq(put_buf(l3, ns, 10, a, n, &loc), 0);
		char p[256];
		obj_path(&loc, p, sizeof(p));
		if (k == 0)
			sc_test_flip_byte(p, 4096 + 30, 0x40); /* an entry's length: the manifest check fails */
		else if (k == 1)
			rewrite_header(p, huge_count); /* hostile count with a valid header checksum */
		else if (k == 2)
			rewrite_header(p, flags_off); /* version 2 without its flag */
		else if (k == 3)
			ck_assert_int_eq(truncate(p, 4096 + 24), 0); /* a manifest cut short */
		else
			rewrite_header(p, k == 4 ? digest_lo_off : digest_hi_off); /* another's digest, one half */
		struct sc_location got;
		/* a clear error, the object in quarantine, never bytes */
		ck_assert_int_eq(fill_cmp(l3, &loc, a, 0), -EBADMSG);
		ck_assert_int_eq(access(p, F_OK), -1);
		ck_assert_int_eq(sc_l3_lookup(l3, loc.digest, &got), -ENOENT);
	}
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.quarantined, 6);
	sc_l3_close(l3);
	free(a);
}
END_TEST

START_TEST(budget_counts_physical_bytes)
{
	/* 8 objects of 10 segments sharing 9: 5.3 MB logical, ~1.2 MB physical, under a 2 MiB budget */
	struct sc_l3_opts o = { .budget_bytes = 2 << 20 };
	struct sc_l3 *l3 = open_seg(&o, SEG);
	struct sc_location loc[8];
	uint8_t *p[8];
	size_t n;
	for (int i = 0; i < 8; i++) {
		p[i] = payload(10, 9, 10u + (unsigned)i, 0, &n);
		ck_assert_int_eq(put_buf(l3, "k", 20u + (uint32_t)i, p[i], n, &loc[i]), 0);
	}
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.evictions, 0);
	ck_assert_uint_gt(st.logical_bytes, o.budget_bytes);
	ck_assert_uint_eq(st.bytes, (uint64_t)17 * SEG + 8 * (4096 + 10 * 24));
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(fill_cmp(l3, &loc[i], p[i], 0), 0);
	/* unrelated payloads push it over: eviction (oldest first) frees the segments of the objects
	 * it removes, counted once, and what is left fits the budget */
	for (int i = 0; i < 8; i++) {
		char path[256];
		obj_path(&loc[i], path, sizeof(path));
		age_file(path, 3600 - i);
	}
	age_segments(3600);
	uint8_t *q[3];
	struct sc_location lq[3];
	for (int i = 0; i < 3; i++) {
		q[i] = payload(6, 0, 50u + (unsigned)i, 0, &n);
		ck_assert_int_eq(put_buf(l3, "u", 30u + (uint32_t)i, q[i], n, &lq[i]), 0);
	}
	sc_l3_stats(l3, &st);
	ck_assert_uint_gt(st.evictions, 0);
	uint64_t of, sf, ob = du("objects", &of), sb = du("seg", &sf);
	ck_assert_uint_le(ob + sb, o.budget_bytes);
	ck_assert_uint_eq(st.bytes, ob + sb); /* exact: the counter is the files */
	ck_assert_uint_eq(st.segments, sf);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(fill_cmp(l3, &lq[i], q[i], 0), 0);
	/* what survived reads; what was evicted is a miss */
	int kept = 0;
	for (int i = 0; i < 8; i++) {
		int rc = fill_cmp(l3, &loc[i], p[i], 0);
		ck_assert_msg(rc == 0 || rc == -ENOENT, "fill %d: %d", i, rc);
		kept += rc == 0;
	}
	ck_assert_int_lt(kept, 8);
	sc_l3_close(l3);
	/* a payload larger than the whole budget is refused only when what it adds is: one that
	 * extends a stored one by a segment is taken */
	o.budget_bytes = 5 << 18;
	l3 = open_seg(&o, 0);
	size_t nbig;
	uint8_t *big = payload(21, 16, 60, 0, &nbig), *base = payload(16, 16, 60, 0, &n);
	struct sc_location lbase, lbig;
	ck_assert_int_eq(put_buf(l3, "base", 5, base, n, &lbase), 0);
	ck_assert_int_eq(put_buf(l3, "big", 6, big, nbig, &lbig), 0);
	ck_assert_uint_gt(nbig, o.budget_bytes);
	ck_assert_int_eq(fill_cmp(l3, &lbig, big, 0), 0);
	sc_l3_close(l3);
	free(big), free(base);
	for (int i = 0; i < 8; i++)
		free(p[i]);
	for (int i = 0; i < 3; i++)
		free(q[i]);
}
END_TEST

START_TEST(sweep_removes_unreferenced_segments)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	struct two t;
	put_two(l3, &t, 6, 3);
	uint64_t files;
	du("seg", &files);
	ck_assert_uint_eq(files, 9);
	/* A's object goes (as an unlink by hand): its 3 own segments are referenced by nothing */
	char pa[256];
	obj_path(&t.la, pa, sizeof(pa));
	ck_assert_int_eq(unlink(pa), 0);
	/* young segments are kept (the grace: a put may be about to name them) */
	ck_assert_int_ge(sc_l3_evict_to(l3, UINT64_MAX), 0);
	du("seg", &files);
	ck_assert_uint_eq(files, 9);
	age_segments(3600);
	sc_l3_close(l3);
	l3 = open_seg(NULL, 0); /* reconciliation sweeps */
	uint64_t bytes = du("seg", &files);
	ck_assert_uint_eq(files, 6);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.segments, 6);
	ck_assert_uint_eq(st.bytes, bytes + t.lb.file_bytes);
	ck_assert_int_eq(fill_cmp(l3, &t.lb, t.b, 0), 0);
	/* the janitor (local mode) sweeps too: B's object removed, its segments aged */
	char pb[256];
	obj_path(&t.lb, pb, sizeof(pb));
	ck_assert_int_eq(unlink(pb), 0);
	age_segments(3600);
	struct sc_l3_janitor_report rep;
	ck_assert_int_eq(sc_l3_janitor(l3, 0, &rep), 0);
	du("seg", &files);
	ck_assert_uint_eq(files, 0);
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.segments, 0);
	ck_assert_uint_eq(st.bytes, 0);
	sc_l3_close(l3);
	two_free(&t);
}
END_TEST

/* The putter's hook: at "l3seg.put.reused" (segments checked and touched, manifest not written),
 * tell the parent and wait for its word. */
static void hold_at_reuse(const char *point, void *ctx)
{
	if (!strcmp(point, "l3seg.put.reused") && hold(ctx))
		_exit(5);
}

/* A put that reuses segments of a removed object, held between its reuse check and its manifest
 * while another process sweeps (@stall: the segments' mtimes set back meanwhile, as if the put
 * had stalled past the grace): its object must read, byte for byte. */
static void race(int stall)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	size_t na, nb;
	uint8_t *a = payload(6, 4, 2, 0, &na), *b = payload(6, 4, 3, 0, &nb);
	struct sc_location la, lb;
	ck_assert_int_eq(put_buf(l3, "a", 10, a, na, &la), 0);
	char pa[256];
	obj_path(&la, pa, sizeof(pa));
	ck_assert_int_eq(unlink(pa), 0); /* A's segments: unreferenced, and old */
	age_segments(3600);
	struct held h;
	held_fork(&h);
	if (h.pid == 0) {
		struct sc_l3 *c = NULL;
		if (sc_l3_open(tmpdir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &c))
			_exit(2);
		sc_sched_set(hold_at_reuse, &h);
		_exit(put_buf(c, "b", 10, b, nb, NULL) == 0 ? 0 : 3);
	}
	held_wait(&h);
	/* the putter reused A's 4 segments (touched them) and has not written its manifest */
	uint64_t files;
	du("seg", &files);
	ck_assert_uint_eq(files, 6 + 2);
	if (stall)
		age_segments(3600);
	struct sc_l3 *s = open_seg(NULL, 0); /* reconciliation: a sweep */
	du("seg", &files);
	if (stall)
		ck_assert_uint_eq(files, 0); /* the stalled put's segments were taken: its step 3 rewrites them */
	else
		ck_assert_uint_eq(files, 6); /* touched by the put: kept; A's 2 own ones removed */
	held_end(&h, 1);
	ck_assert_int_eq(sc_l3_locate_longest(s, "b", toks, 10, &lb), 10);
	ck_assert_int_eq(fill_cmp(s, &lb, b, 0), 0);
	/* and a later sweep keeps them: they are referenced */
	age_segments(3600);
	ck_assert_int_ge(sc_l3_evict_to(s, UINT64_MAX), 0);
	ck_assert_int_eq(fill_cmp(s, &lb, b, 0), 0);
	du("seg", &files);
	ck_assert_uint_eq(files, 6);
	sc_l3_close(s);
	sc_l3_close(l3);
	free(a), free(b);
}

START_TEST(sweep_never_takes_a_segment_a_put_is_reusing)
{
	race(0);
}
END_TEST

START_TEST(sweep_during_a_stalled_put_is_repaired_by_the_put)
{
	race(1);
}
END_TEST

/* A child puts @a (@n bytes) under "k", 10 tokens, through @l3 and is killed at fault point @point. */
static void put_killed_at(struct sc_l3 *l3, const char *point, const uint8_t *a, size_t n)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		shm_fault_arm(point);
		put_buf(l3, "k", 10, a, n, NULL);
		_exit(4); /* not reached */
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: the writer was not killed (status %d)",
		      point, status);
}

START_TEST(killed_put_leaves_segments_the_sweep_removes)
{
	size_t n;
	uint8_t *a = payload(5, 0, 2, 0, &n);
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	put_killed_at(l3, "l3seg.put.segments", a, n);
	/* its segments are written, its object is not: nothing to locate */
	uint64_t files;
	du("seg", &files);
	ck_assert_uint_eq(files, 5);
	struct sc_location loc;
	ck_assert_int_eq(sc_l3_locate_longest(l3, "k", toks, 10, &loc), 0);
	sc_l3_close(l3);
	/* young: kept (a put may be about to name them); once settled, reconciliation removes them */
	l3 = open_seg(NULL, 0);
	du("seg", &files);
	ck_assert_uint_eq(files, 5);
	sc_l3_close(l3);
	age_segments(3600);
	l3 = open_seg(NULL, 0);
	du("seg", &files);
	ck_assert_uint_eq(files, 0);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	ck_assert_uint_eq(st.bytes, 0);
	/* and the same put works */
	ck_assert_int_eq(put_buf(l3, "k", 10, a, n, &loc), 0);
	ck_assert_int_eq(fill_cmp(l3, &loc, a, 0), 0);
	sc_l3_close(l3);
	free(a);
}
END_TEST

/* A segmented put is made alone (lib/l3/put.c put_one): its five segments (steps @1 to @5), then
 * its manifest (@6), then its entry (@7), each written, fsync'ed, renamed and its directory
 * fsync'ed before the next. Killed at any step of the manifest or the entry: it is served exactly
 * or not at all, what it left is cleaned up once old, and the same put works. */
static const char *const seg_put_steps[] = {
	"l3.put.written@6", "l3.put.before_rename@6", "l3.put.after_rename@6",
	"l3.put.created@7", "l3.put.before_rename@7", "l3.put.after_rename@7",
};

START_TEST(segmented_put_killed_in_its_manifest_or_entry)
{
	const char *point = seg_put_steps[_i];
	size_t n;
	uint8_t *a = payload(5, 0, 2, 0, &n);
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	put_killed_at(l3, point, a, n);
	/* served exactly, and only once its entry is in place */
	struct sc_location loc;
	int found = sc_l3_locate_longest(l3, "k", toks, 10, &loc);
	ck_assert_msg(found == (strstr(point, "after_rename@7") ? 10 : 0), "%s: locate %d", point, found);
	if (found)
		ck_assert_int_eq(fill_cmp(l3, &loc, a, 0), 0);
	sc_l3_close(l3);
	/* once what it left is old, an open removes its temp files and verification finds nothing wrong */
	age_segments(3600);
	ck_assert_int_eq(sc_test_sh("find %s -name '.tmp-*' -exec touch -d '-1 minute' {} +", tmpdir), 0);
	l3 = open_seg(NULL, SEG);
	ck_assert_msg(sc_test_sh("test -z \"$(find %s -name '.tmp-*')\"", tmpdir) == 0, "%s: temp files left", point);
	ck_assert_int_eq(sc_l3_verify(l3, NULL, NULL), 0);
	/* and the same put works */
	ck_assert_int_eq(put_buf(l3, "k", 10, a, n, &loc), 0);
	ck_assert_int_eq(fill_cmp(l3, &loc, a, 0), 0);
	sc_l3_close(l3);
	free(a);
}
END_TEST

START_TEST(concurrent_puts_from_processes_store_each_segment_once)
{
	struct sc_l3 *l3 = open_seg(NULL, SEG);
	enum { NP = 4 };
	pid_t pids[NP];
	for (int p = 0; p < NP; p++) {
		pids[p] = fork();
		ck_assert_int_ge(pids[p], 0);
		if (pids[p] == 0) {
			struct sc_l3 *c = NULL;
			if (sc_l3_open(tmpdir, &(struct sc_l3_opts){ .flags = SC_L3_OPEN_NO_RECONCILE }, &c))
				_exit(2);
			int bad = 0;
			for (int i = 0; i < 6; i++) {
				size_t n;
				/* every process puts the same 6 payloads (sharing 5 segments) in another order */
				int k = (i + p) % 6;
				uint8_t *b = payload(8, 5, 20u + (unsigned)k, 0, &n);
				bad |= put_buf(c, "p", 10u + (uint32_t)k, b, n, NULL) != 0;
				free(b);
			}
			sc_l3_close(c);
			_exit(bad);
		}
	}
	for (int p = 0; p < NP; p++) {
		int status;
		ck_assert_int_eq(waitpid(pids[p], &status, 0), pids[p]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	uint64_t files, bytes = du("seg", &files);
	ck_assert_uint_eq(files, 5 + 6 * 3);
	ck_assert_uint_eq(bytes, (uint64_t)(5 + 18) * SEG);
	for (int k = 0; k < 6; k++) {
		size_t n;
		uint8_t *b = payload(8, 5, 20u + (unsigned)k, 0, &n);
		struct sc_location loc;
		ck_assert_int_eq(sc_l3_locate_longest(l3, "p", toks, 10u + (uint32_t)k, &loc), 10 + k);
		ck_assert_int_eq(fill_cmp(l3, &loc, b, 0), 0);
		free(b);
	}
	sc_l3_close(l3);
	l3 = open_seg(NULL, 0);
	struct sc_l3_stats st;
	sc_l3_stats(l3, &st);
	uint64_t of, ob = du("objects", &of);
	ck_assert_uint_eq(st.bytes, ob + bytes);
	ck_assert_uint_eq(st.objects, 6);
	sc_l3_close(l3);
}
END_TEST

/* Shared mode (several hosts on one directory): each host reads the others' segmented objects,
 * and only the elected janitor sweeps. */
START_TEST(shared_mode_only_the_janitor_sweeps)
{
	char sdir[64];
	snprintf(sdir, sizeof(sdir), "/var/tmp/sc-l3seg-st-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sdir));
	struct sc_l3_opts oa = { .host_id = "hostA", .state_dir = sdir, .flags = SC_L3_OPEN_SHARED };
	struct sc_l3_opts ob = { .host_id = "hostB", .state_dir = sdir };
	struct sc_l3 *a = open_seg(&oa, 0), *b = open_seg(&ob, 0);
	ck_assert_int_eq(sc_l3_set_segment_bytes(a, SEG), 0);
	uint64_t sz;
	ck_assert_int_eq(sc_l3_segment_bytes(b, &sz), 0);
	ck_assert_uint_eq(sz, 0); /* opened before the option was recorded */
	sc_l3_close(b);
	b = open_seg(&ob, 0);
	ck_assert_int_eq(sc_l3_segment_bytes(b, &sz), 0);
	ck_assert_uint_eq(sz, SEG);
	size_t nx, ny;
	uint8_t *x = payload(5, 2, 2, 0, &nx), *y = payload(5, 2, 3, 0, &ny);
	struct sc_location lx, ly;
	ck_assert_int_eq(put_buf(a, "x", 10, x, nx, &lx), 0);
	ck_assert_int_eq(put_buf(b, "y", 10, y, ny, &ly), 0); /* B reuses A's 2 segments */
	uint64_t files;
	du("seg", &files);
	ck_assert_uint_eq(files, 2 + 3 + 3);
	ck_assert_int_eq(fill_cmp(b, &lx, x, 0), 0);
	ck_assert_int_eq(fill_cmp(a, &ly, y, 0), 0);
	/* X's object goes; its own segments are old and unreferenced */
	char px[256];
	obj_path(&lx, px, sizeof(px));
	ck_assert_int_eq(unlink(px), 0);
	age_segments(3600);
	struct held h;
	held_fork(&h);
	if (h.pid == 0) {
		/* hostA's janitor: one pass, then it keeps the lease and does nothing */
		struct sc_l3 *j = NULL;
		struct sc_l3_janitor_report r;
		struct sc_l3_opts oj = { .host_id = "hostA", .state_dir = sdir };
		_exit(sc_l3_open(tmpdir, &oj, &j) || sc_l3_janitor(j, SC_L3_JANITOR_KEEP, &r) || hold(&h) ? 2 : 0);
	}
	held_wait(&h);
	/* the child's pass (hostA elected) swept X's own 3 */
	du("seg", &files);
	ck_assert_uint_eq(files, 5);
	/* a put that makes more garbage, then: no one but the lease holder sweeps */
	char py[256];
	obj_path(&ly, py, sizeof(py));
	ck_assert_int_eq(unlink(py), 0);
	age_segments(3600);
	struct sc_l3 *b2 = open_seg(&ob, 0); /* shared: no reconciliation at open */
	struct sc_l3_janitor_report r;
	ck_assert_int_eq(sc_l3_janitor(b2, 0, &r), -EBUSY);
	ck_assert_int_eq(sc_l3_evict_to(b2, 0), -EBUSY);
	du("seg", &files);
	ck_assert_uint_eq(files, 5);
	held_end(&h, 0);
	/* the lease is free: hostB is elected and sweeps */
	ck_assert_int_eq(sc_l3_janitor(b2, SC_L3_JANITOR_FULL, &r), 0);
	du("seg", &files);
	ck_assert_uint_eq(files, 0);
	struct sc_l3_stats st;
	ck_assert_int_eq(sc_l3_stats(b2, &st), 0);
	ck_assert_uint_eq(st.bytes, 0);
	ck_assert_uint_eq(r.objects, 0);
	sc_l3_close(b2);
	sc_l3_close(b);
	sc_l3_close(a);
	sc_test_rm_tree(sdir);
	free(x), free(y);
}
END_TEST

Suite *l3seg_suite(void)
{
	Suite *s = suite_create("l3seg");
	TCase *tc = tcase_create("segments");
	tcase_add_checked_fixture(tc, setup, rm_tmp);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, shared_leading_segments_stored_once);
	tcase_add_test(tc, a_whole_object_the_size_of_a_manifest_is_counted_whole);
	tcase_add_test(tc, segmented_fills_run_on_the_ring_beside_other_fills);
	tcase_add_test(tc, an_abandoned_segmented_fill_ends_after_its_reads);
	tcase_add_test(tc, an_abandoned_fill_that_had_ended_is_heard_at_once);
	tcase_add_test(tc, waiting_fills_start_when_a_segmented_fill_ends);
	tcase_add_test(tc, whole_objects_keep_reading_and_option_refusals);
	tcase_add_test(tc, corrupt_segment_quarantines_every_user_and_their_mirrors);
	tcase_add_test(tc, a_bad_segment_that_cannot_be_moved_away_stays_counted);
	tcase_add_test(tc, a_scan_for_a_bad_segments_users_opens_only_what_may_be_a_manifest);
	tcase_add_test(tc, manifest_segment_lengths_at_their_bounds);
	tcase_add_test(tc, direct_segment_reads_verify_as_they_land);
	tcase_add_test(tc, direct_segment_reads_refused_are_read_again_buffered);
	tcase_add_test(tc, a_refused_direct_read_of_an_abandoned_fill_is_not_read_again);
	tcase_add_test(tc, an_abandoned_fill_reads_no_segment_its_opens_found);
	tcase_add_test(tc, direct_segment_reads_leave_the_page_cache_as_it_was);
	tcase_add_test(tc, auto_mode_reads_cold_segments_direct_and_a_warm_one_buffered);
	tcase_add_test(tc, a_segment_fill_finding_no_submission_entry_fails_cleanly);
	tcase_add_loop_test(tc, large_buffered_segment_reads_go_to_io_wq, 0, 3);
	tcase_add_test(tc, fill_reads_only_what_l2_lacks);
	tcase_add_test(tc, fill_copies_a_segment_from_the_first_slot_of_l2s_table);
	tcase_add_test(tc, fill_copies_nothing_from_l2_while_the_tables_lock_is_scribbled);
	tcase_add_test(tc, a_fill_of_segments_of_another_size_leaves_l2s_table_lock_alone);
	tcase_add_test(tc, missing_or_cut_segment_is_a_miss);
	tcase_add_test(tc, a_grown_segment_is_a_miss);
	tcase_add_test(tc, a_failed_segment_open_or_read_is_made_again_or_fails_the_fill);
	tcase_add_test(tc, a_segmented_fill_reads_nothing_before_its_opens_ended);
	tcase_add_test(tc, a_location_that_describes_a_segmented_object_otherwise_is_refused);
	tcase_add_test(tc, a_segment_cut_under_its_read_is_a_miss);
	tcase_add_loop_test(tc, a_segment_replaced_under_its_read_is_not_quarantined, 0, 3);
	tcase_add_test(tc, a_segmented_fills_error_stays_through_its_other_reads);
	tcase_add_loop_test(tc, the_rest_of_a_short_segment_read_stops_at_its_segments_end, 0, 3);
	tcase_add_test(tc, a_segmented_fill_reads_nothing_past_its_manifest);
	tcase_add_test(tc, a_segment_off_its_entrys_digest_in_either_half_is_bad);
	tcase_add_test(tc, verify_of_an_object_rewritten_under_it_is_bad);
	tcase_add_test(tc, a_segment_directory_opened_as_descriptor_0_is_used);
	tcase_add_test(tc, verification_reads_a_segment_opened_as_descriptor_0);
	tcase_add_test(tc, a_bad_segments_user_whose_manifest_opens_as_descriptor_0_is_quarantined);
	tcase_add_test(tc, segmented_fills_close_every_segment_file_descriptor_0_too);
	tcase_add_test(tc, a_segment_read_that_fails_fails_the_fill_with_its_error);
	tcase_add_test(tc, things_planted_under_a_segment_name_are_never_read);
	tcase_add_test(tc, a_directory_as_long_as_its_segment_is_a_miss);
	tcase_add_test(tc, a_put_over_things_planted_under_its_segment_names_counts_its_own_files);
	tcase_add_test(tc, manifest_of_a_file_cut_short_is_ebadmsg);
	tcase_add_test(tc, a_manifest_longer_than_the_first_read_is_read_after_it);
	tcase_add_test(tc, a_manifest_read_with_the_header_switches_no_file);
	tcase_add_loop_test(tc, a_manifest_that_cannot_be_read_judges_nothing, 0, 2);
	tcase_add_loop_test(tc, a_manifest_rewritten_between_its_two_reads_is_bad, 0, 2);
	tcase_add_loop_test(tc, a_bad_manifest_replaced_under_its_fill_is_a_miss, 0, 2);
	tcase_add_test(tc, segments_off_the_direct_alignment_are_read_buffered_next_to_each_other);
	tcase_add_test(tc, a_segmented_fill_without_a_descriptor_to_spare_fails_cleanly);
	tcase_add_test(tc, verify_of_a_bad_segment_with_no_descriptor_to_spare_quarantines_it);
	tcase_add_test(tc, corrupted_manifest_is_refused);
	tcase_add_test(tc, budget_counts_physical_bytes);
	tcase_add_test(tc, sweep_removes_unreferenced_segments);
	tcase_add_test(tc, sweep_never_takes_a_segment_a_put_is_reusing);
	tcase_add_test(tc, sweep_during_a_stalled_put_is_repaired_by_the_put);
	tcase_add_test(tc, killed_put_leaves_segments_the_sweep_removes);
	tcase_add_loop_test(tc, segmented_put_killed_in_its_manifest_or_entry, 0,
			    (int)(sizeof(seg_put_steps) / sizeof(seg_put_steps[0])));
	tcase_add_test(tc, concurrent_puts_from_processes_store_each_segment_once);
	tcase_add_test(tc, shared_mode_only_the_janitor_sweeps);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(l3seg_suite)
