/* tests/check_arena.c — the arena: create/open/destroy, backing, header validation, reader table. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "sc_check.h"
#include "../lib/internal.h"
#include "../shm/arena.h"
#include "../shm/evq.h"
#include "../shm/evring.h"
#include "../shm/index.h"
#include "../shm/l3ix.h"
#include "../shm/layout.h"
#include "../shm/obs.h"
#include "../shm/readers.h"
#include "../shm/ring.h"
#include "../shm/seg.h"
#include "../shm/util.h"

static uint64_t file_hash(const char *path)
{
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	XXH64_state_t *st = XXH64_createState();
	XXH64_reset(st, 0);
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		XXH64_update(st, buf, (size_t)n);
	close(fd);
	uint64_t h = XXH64_digest(st);
	XXH64_freeState(st);
	return h;
}

static void shm_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "/dev/shm/stagecache.%s", name);
}

/* Create an arena, close it, and return its path (the file stays). */
static const char *make_closed_arena(const char *tag, char *path, size_t len)
{
	const char *name;
	struct sc_arena *a = sc_test_arena(tag, 16 << 20, &name);
	sc_arena_close(a);
	shm_path(path, len, name);
	return name;
}

static void patch_file(const char *path, off_t off, const void *bytes, size_t n)
{
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

START_TEST(test_create_open_close_destroy)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("basic", 32 << 20, &name);
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	ck_assert_str_eq(in.name, name);
	ck_assert_uint_eq(in.size_bytes, 32 << 20);
	ck_assert_int_eq(in.backing, SC_BACKING_SHM_4K);
	ck_assert_uint_eq(in.page_size, 4096);
	ck_assert_uint_eq(in.layout_version, sc_arena_layout_version());
	ck_assert_uint_eq(in.mode, 0600);
	ck_assert_uint_eq(in.creator_pid, (uint32_t)getpid());
	ck_assert_uint_ge(in.attached_count, 1);
	ck_assert_uint_gt(in.heap_bytes, 16 << 20);

	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	ck_assert_int_eq(sc_arena_info(b, &in), 0);
	ck_assert_uint_eq(in.attached_count, 2);
	sc_arena_close(b);
	sc_arena_close(a);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0);
	ck_assert_int_eq(sc_arena_open(name, &b), -ENOENT);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), -ENOENT);
}
END_TEST

START_TEST(test_bad_names)
{
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
	struct sc_arena *a;
	char long_name[80];
	memset(long_name, 'a', 65);
	long_name[65] = 0;
	const char *bad[] = { "", "a/b", "a b", "../x", long_name, "é", "x\n", ".", ".." };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(sc_arena_create(bad[i], &o, &a), -EINVAL);
		ck_assert_int_eq(sc_arena_open(bad[i], &a), -EINVAL);
		ck_assert_int_eq(sc_arena_destroy(NULL, bad[i]), -EINVAL);
	}
	ck_assert_int_eq(sc_arena_create(NULL, &o, &a), -EINVAL);
	/* 64 characters is the limit and is fine */
	long_name[64] = 0;
	memcpy(long_name, "t-long-", 7);
	sc_arena_destroy(NULL, long_name);
	ck_assert_int_eq(sc_arena_create(long_name, &o, &a), 0);
	sc_test_arena_destroy(a, long_name);
}
END_TEST

/* Every byte value, alone (a name of one character) and inside a name: only A-Z a-z 0-9 . _ - are
 * name characters, and a name of dots only is refused (lib/stagecache.h, SC_NAME_MAX). */
START_TEST(test_name_characters)
{
	for (int c = 1; c < 256; c++) {
		int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
			 c == '-';
		char alone[2] = { (char)c, 0 }, inside[8] = { 't', '-', (char)c, 'x', 0 };
		ck_assert_msg(shm_name_valid(alone) == ok, "byte %#x alone: %d", c, shm_name_valid(alone));
		ck_assert_msg(shm_name_valid(inside) == (ok || c == '.'), "byte %#x inside a name: %d", c,
			      shm_name_valid(inside));
	}
	ck_assert_int_eq(shm_name_valid("..."), 0);
	ck_assert_int_eq(shm_name_valid(".a."), 1);
	ck_assert_int_eq(shm_name_valid(NULL), 0);
}
END_TEST

START_TEST(test_bad_sizes)
{
	struct sc_arena *a;
	const char *name = sc_test_name("size");
	struct sc_arena_opts o = { .huge = SC_HUGE_OFF };
	uint64_t sizes[] = { 0, 4096, SC_ARENA_MIN_BYTES - 1, SC_ARENA_MAX_BYTES + 1, UINT64_MAX };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		o.size_bytes = sizes[i];
		ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	}
	/* parameters that leave no room for the heap */
	o.size_bytes = SC_ARENA_MIN_BYTES;
	o.ring_count = 64;
	o.ring_bytes = 1 << 20;
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	o.ring_count = 0;
	o.ring_bytes = 12345; /* not a power of two */
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	o.ring_bytes = 0;
	o.mode = 01777;
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	o.mode = 0;
	o.huge = 7;
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	/* an index smaller than its shard count, with or without segments (whose table is formatted
	 * after the index: the index's refusal stands) */
	o.huge = SC_HUGE_OFF;
	o.size_bytes = 32ull << 20;
	o.index_entries = 8;
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	o.segment_bytes = 64u << 10;
	ck_assert_int_eq(sc_arena_create(name, &o, &a), -EINVAL);
	char path[128];
	shm_path(path, sizeof(path), name);
	ck_assert_int_ne(access(path, F_OK), 0); /* nothing left behind */
}
END_TEST

START_TEST(test_exists)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("exists", 16 << 20, &name), *b;
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
	ck_assert_int_eq(sc_arena_create(name, &o, &b), -EEXIST);
	o.huge = SC_HUGE_AUTO; /* also refused when it would land in the other directory */
	ck_assert_int_eq(sc_arena_create(name, &o, &b), -EEXIST);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_not_an_arena)
{
	const char *name = sc_test_name("bogus");
	char path[128];
	shm_path(path, sizeof(path), name);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	char buf[8192];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 131 + 7);
	ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
	uint64_t h = file_hash(path);
	struct sc_arena *a;
	ck_assert_int_eq(sc_arena_open(name, &a), -EBADMSG);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), -EBADMSG);
	uint32_t v;
	ck_assert_int_eq(sc_arena_file_version(NULL, name, &v), -EBADMSG);
	ck_assert_uint_eq(file_hash(path), h);
	/* refused at once for what it is, even while somebody holds the byte a creator would lock */
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(shm_ofd_trylock(fd, SHM_LOCK_CREATE), 0);
	ck_assert_int_eq(sc_arena_open(name, &a), -EBADMSG);
	close(fd);
	/* exactly a header's size, not ours: kept */
	ck_assert_int_eq(truncate(path, SHM_HEADER_BYTES), 0);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), -EBADMSG);
	ck_assert_int_eq(access(path, F_OK), 0);
	/* an empty and a tiny file too: neither opened, and destroy removes them (shorter than any
	 * header: nothing in them to keep, and create needs the name) */
	ck_assert_int_eq(truncate(path, 0), 0);
	ck_assert_int_eq(sc_arena_open(name, &a), -EBADMSG);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, 100), 100);
	close(fd);
	ck_assert_int_eq(sc_arena_open(name, &a), -EBADMSG);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	/* a whole file whose first word is zero (an arena cut and extended with zeroes): removed */
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	memset(buf, 0, 8);
	ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	/* a directory with the name: not opened, not removed */
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_lt(sc_arena_open(name, &a), 0);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), -EBADMSG);
	ck_assert_int_eq(access(path, F_OK), 0);
	rmdir(path);
	/* a name that is not one is -EINVAL, also for a look at the file */
	struct sc_arena_file fl;
	ck_assert_int_eq(sc_arena_file_stat(NULL, "a/b", &fl), -EINVAL);
	ck_assert_int_eq(sc_arena_file_stat(NULL, "..", &fl), -EINVAL);
}
END_TEST

START_TEST(test_layout_version_mismatch)
{
	char path[128];
	const char *name = make_closed_arena("ver", path, sizeof(path));
	uint32_t v = 99;
	patch_file(path, offsetof(struct shm_header, layout_version), &v, sizeof(v));
	uint64_t h = file_hash(path);
	struct sc_arena *a;
	ck_assert_int_eq(sc_arena_open(name, &a), -EPROTO);
	ck_assert_int_eq(sc_arena_file_version(NULL, name, &v), 0);
	ck_assert_uint_eq(v, 99);
	ck_assert_uint_eq(file_hash(path), h);
	/* a file that holds that header and nothing more is still told apart */
	ck_assert_int_eq(truncate(path, sizeof(struct shm_header)), 0);
	ck_assert_int_eq(sc_arena_open(name, &a), -EPROTO);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0); /* still recognisably ours */
}
END_TEST

START_TEST(test_truncated)
{
	char path[128];
	const char *name = make_closed_arena("trunc", path, sizeof(path));
	ck_assert_int_eq(truncate(path, 8 << 20), 0);
	uint64_t h = file_hash(path);
	struct sc_arena *a;
	ck_assert_int_eq(sc_arena_open(name, &a), -EBADMSG);
	ck_assert_uint_eq(file_hash(path), h);
	/* cut right after its published header: judged by that header at once, not waited on like a
	 * file being created, even while somebody holds the creation lock */
	ck_assert_int_eq(truncate(path, SHM_HEADER_BYTES), 0);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(shm_ofd_trylock(fd, SHM_LOCK_CREATE), 0);
	ck_assert_int_eq(sc_arena_open(name, &a), -EBADMSG);
	close(fd);
	/* its first word not written yet (zero), while a creator holds its lock: still being created,
	 * whatever else the header says */
	uint64_t magic, zero = 0;
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &magic, sizeof(magic), 0), (ssize_t)sizeof(magic));
	ck_assert_int_eq(pwrite(fd, &zero, sizeof(zero), 0), (ssize_t)sizeof(zero));
	ck_assert_int_eq(shm_ofd_trylock(fd, SHM_LOCK_CREATE), 0);
	ck_assert_int_eq(sc_arena_open(name, &a), -EAGAIN); /* (after the open's wait, 2 s) */
	ck_assert_int_eq(pwrite(fd, &magic, sizeof(magic), 0), (ssize_t)sizeof(magic));
	close(fd);
	/* cut to the header's fields alone, while a creator holds its lock: still being created */
	ck_assert_int_eq(truncate(path, sizeof(struct shm_header)), 0);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(shm_ofd_trylock(fd, SHM_LOCK_CREATE), 0);
	ck_assert_int_eq(sc_arena_open(name, &a), -EAGAIN); /* (after the open's wait, 2 s) */
	close(fd);
	/* truncated inside the header */
	ck_assert_int_eq(truncate(path, 1000), 0);
	ck_assert_int_eq(sc_arena_open(name, &a), -EBADMSG);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0);
}
END_TEST

/* A member cuts an open arena's file: the next stage open finds it (one fstat), and from then on
 * every writer refuses, also an admission right after (whose own check would trust a whole-file
 * finding younger than 10 ms), also once the file is extended back to its size with zeroes. */
START_TEST(test_writers_refuse_once_the_file_was_cut)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("cutopen", 16 << 20, &name);
	struct sc_stage *st, *st2;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0); /* the file found whole just now */
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	static uint8_t pl[4096];
	int32_t t[3] = { 1, 2, 3 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pl, NULL }, .sec_len = { sizeof(pl), 0 } };
	ck_assert_int_eq(truncate(in.path, 4096), 0);
	ck_assert_int_eq(sc_stage_open(a, "m2", "s", &st2), -EBADMSG);
	ck_assert_int_eq(sc_l2_admit(st, "", t, 3, sc_digest_of(pl, sizeof(pl)), &p, SC_ORIGIN_DIRECT), -EBADMSG);
	ck_assert_int_eq(truncate(in.path, 16 << 20), 0);
	ck_assert_int_eq(sc_stage_open(a, "m2", "s", &st2), -EBADMSG);
	ck_assert_int_eq(sc_l2_admit(st, "", t, 3, sc_digest_of(pl, sizeof(pl)), &p, SC_ORIGIN_DIRECT), -EBADMSG);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* @h with region @r of exactly @size bytes when that is more (the regions after it moved up to the
 * next page boundaries, the file grown with them) and its check word written again. */
static void grow_region(struct shm_header *h, int r, uint64_t size)
{
	if (size <= h->regions[r].size)
		return;
	uint64_t add = (size - h->regions[r].size + 4095) & ~4095ull;
	h->regions[r].size = size;
	for (int i = r + 1; i < SHM_REGION_COUNT; i++)
		h->regions[i].off += add;
	h->total_bytes += add;
	h->header_check = shm_header_checksum(h);
}

/* A header at each of its limits is accepted and one past it refused (checked on a copy: the
 * file sizes those limits need are only numbers here): the largest reader table with every slot
 * for one user, the largest L3 location index, the largest segment table, each in a region of
 * exactly the bytes it needs; and an empty last region at the file's end. */
/* The header of a fresh 16 MiB arena with 64 KiB segments (accepted by the check). */
static struct shm_header valid_header(const char *tag)
{
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .segment_bytes = 64 << 10 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts(tag, &o, &name);
	struct shm_header h = a->shm->hv;
	sc_test_arena_destroy(a, name);
	ck_assert_int_eq(shm_header_check(&h, h.total_bytes), 0);
	return h;
}

START_TEST(test_header_check_limits)
{
	const struct shm_header h0 = valid_header("hlim");
	ck_assert_uint_ne(h0.seg_bytes, 0);
	for (int over = 0; over < 2; over++) {
		struct shm_header h = h0;
		h.reader_slots = SHM_READER_SLOTS_MAX + (uint32_t)over;
		h.slots_per_user = SHM_READER_SLOTS_MAX;
		grow_region(&h, SHM_REGION_READERS, (uint64_t)h.reader_slots * 512);
		ck_assert_int_eq(shm_header_check(&h, h.total_bytes), over ? -EBADMSG : 0);
		h = h0;
		h.l3ix_entries = SHM_L3IX_MAX_ENTRIES + (uint32_t)over;
		grow_region(&h, SHM_REGION_L3IX, shm_l3ix_bytes(h.l3ix_entries));
		ck_assert_int_eq(shm_header_check(&h, h.total_bytes), over ? -EBADMSG : 0);
		h = h0;
		h.seg_slots = (1u << 24) << over;
		grow_region(&h, SHM_REGION_POLICY, shm_seg_table_bytes((uint32_t)h.seg_slots));
		ck_assert_int_eq(shm_header_check(&h, h.total_bytes), over ? -EBADMSG : 0);
		/* the last region emptied, at the file's end or (over) one page past it */
		h = h0;
		struct shm_region *last = &h.regions[SHM_REGION_COUNT - 1];
		last->off = h.total_bytes + 4096u * (uint64_t)over;
		last->size = 0;
		h.header_check = shm_header_checksum(&h);
		ck_assert_int_eq(shm_header_check(&h, h.total_bytes), over ? -EBADMSG : 0);
	}
	/* not an arena's header (another magic; a file shorter than a header) is -EBADMSG before its
	 * layout version is read: only an arena of another layout is -EPROTO */
	struct shm_header h = h0;
	h.layout_version++;
	h.header_check = shm_header_checksum(&h);
	ck_assert_int_eq(shm_header_check(&h, h.total_bytes), -EPROTO);
	ck_assert_int_eq(shm_header_check(&h, SHM_HEADER_BYTES), -EPROTO); /* a header and nothing more */
	ck_assert_int_eq(shm_header_check(&h, SHM_HEADER_BYTES - 1), -EBADMSG);
	h.magic ^= 1;
	h.header_check = shm_header_checksum(&h);
	ck_assert_int_eq(shm_header_check(&h, h.total_bytes), -EBADMSG);
}
END_TEST

/* The largest whole number of pages below @bytes: a region size too small by at least a byte that
 * is still whole pages (every region of an arena we make is), so that only the bound refuses it. */
static uint64_t page_below(uint64_t bytes)
{
	return (bytes - 1) & ~4095ull;
}

/* Each field a header check reads, made wrong alone (the checksum computed again, as a writer who
 * could forge it would): every one refused. A region size that is not whole pages is wrong too:
 * the heap's capacity is computed from its size, and every block's footprint assumes whole pages. */
START_TEST(test_header_check_refuses_each_field_alone)
{
	const struct shm_header h0 = valid_header("hfld");
	ck_assert(h0.seg_bytes && h0.seg_slots > 2 && h0.l3ix_entries && h0.slots_per_user);
	struct shm_region *rg;
	for (int k = 0; k < 18; k++) {
		struct shm_header h = h0;
		rg = h.regions;
		switch (k) {
		case 0: h.header_bytes += 4096; break;
		case 1: h.region_count--; break;
		case 2: h.total_bytes += 4096; break; /* the file is h0's size */
		case 3: h.reader_slots = 0, h.slots_per_user = 0; break;
		case 4: rg[SHM_REGION_READERS].size = page_below((uint64_t)h.reader_slots * 512); break;
		case 5: h.arena_flags |= 0x80000000u; break;
		case 6: h.l3ix_refresh_ms = 0; break;
		case 7: rg[SHM_REGION_L3IX].size = page_below(shm_l3ix_bytes(h.l3ix_entries)); break;
		case 8: h.seg_bytes += 4096; break;
		case 9: h.seg_slots = 0; break;
		case 10: h.seg_slots--; break; /* not a power of two, and a smaller table */
		case 11: rg[SHM_REGION_POLICY].size = page_below(shm_seg_table_bytes((uint32_t)h.seg_slots)); break;
		case 12:
			rg[SHM_REGION_EVENTS].size = page_below(shm_evring_bytes(shm_evring_records(h.index_entries)));
			break;
		case 13: rg[SHM_REGION_HEAP].off += 8, rg[SHM_REGION_HEAP].size -= 8; break;
		case 14: rg[SHM_REGION_HEAP].size++; break;
		case 15: rg[SHM_REGION_HEAP].off = rg[SHM_REGION_EVENTS].off; break; /* overlaps */
		case 16: h.slots_per_user = h.reader_slots + 1; break;
		case 17: rg[SHM_REGION_HEAP].size -= 64; break; /* inside the file, not whole pages */
		}
		h.header_check = shm_header_checksum(&h);
		ck_assert_msg(shm_header_check(&h, h0.total_bytes) == -EBADMSG, "field %d wrong alone: accepted", k);
	}
}
END_TEST

START_TEST(test_corrupted_header)
{
	/* each field the attach checks, one at a time: all refused with -EBADMSG, file unchanged */
	static const size_t offs[] = {
		offsetof(struct shm_header, magic),
		offsetof(struct shm_header, header_bytes),
		offsetof(struct shm_header, total_bytes),
		offsetof(struct shm_header, region_count),
		offsetof(struct shm_header, regions) + 16 * SHM_REGION_HEAP,     /* heap offset */
		offsetof(struct shm_header, regions) + 16 * SHM_REGION_INDEX + 8, /* index size */
		offsetof(struct shm_header, key_secret) + 5,
		offsetof(struct shm_header, header_check),
		offsetof(struct shm_header, ring_bytes),
	};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		char path[128];
		const char *name = make_closed_arena("corrupt", path, sizeof(path));
		uint8_t b;
		int fd = open(path, O_RDWR);
		ck_assert_int_eq(pread(fd, &b, 1, (off_t)offs[i]), 1);
		b ^= 0x40;
		ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)offs[i]), 1);
		close(fd);
		uint64_t h = file_hash(path);
		struct sc_arena *a;
		ck_assert_msg(sc_arena_open(name, &a) == -EBADMSG, "byte at %zu", offs[i]);
		ck_assert_uint_eq(file_hash(path), h);
		unlink(path);
	}
}
END_TEST

START_TEST(test_hostile_region_table)
{
	/* a region table pointing outside the file, even with a matching checksum, is refused */
	char path[128];
	const char *name = make_closed_arena("hostile", path, sizeof(path));
	int fd = open(path, O_RDWR);
	struct shm_header h;
	ck_assert_int_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	h.regions[SHM_REGION_RINGS].size = h.total_bytes;
	h.header_check = 0;
	/* recompute the checksum the way attach does, so only the region check can catch it */
	struct shm_header copy = h;
	atomic_store(&copy.initialised, 0);
	h.header_check = XXH64(&copy, offsetof(struct shm_header, header_check), 0x5ca1ab1e);
	ck_assert_int_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	struct sc_arena *a;
	ck_assert_int_eq(sc_arena_open(name, &a), -EBADMSG);
	unlink(path);
}
END_TEST

/* At an opener's wait for an unpublished header (schedule point arena.open.wait, in this
 * process): publish the header of the file at @path, at the first wait only. */
struct publish_at_wait {
	const char *path;
	int waits;
};

static void publish_at_wait(const char *point, void *ctx)
{
	struct publish_at_wait *p = ctx;
	if (strcmp(point, "arena.open.wait") || p->waits++)
		return;
	uint32_t done = SHM_INIT_DONE;
	patch_file(p->path, offsetof(struct shm_header, initialised), &done, sizeof(done));
}

/* Count an opener's waits for a creator (arena.open.wait) in the int at @ctx. */
static void count_open_waits(const char *point, void *ctx)
{
	if (!strcmp(point, "arena.open.wait"))
		(*(int *)ctx)++;
}

START_TEST(test_half_built_waits_then_eagain)
{
	char path[128];
	const char *name = make_closed_arena("half", path, sizeof(path));
	uint32_t zero = 0;
	patch_file(path, offsetof(struct shm_header, initialised), &zero, sizeof(zero));
	/* a creator at work holds the creation lock: openers wait, then -EAGAIN */
	int cfd = open(path, O_RDWR);
	ck_assert_int_ge(cfd, 0);
	ck_assert_int_eq(shm_ofd_trylock(cfd, SHM_LOCK_CREATE), 0);
	struct sc_arena *a;
	ck_assert_int_eq(sc_arena_open(name, &a), -EAGAIN);
	/* publishing the word while an opener waits lets it in */
	struct publish_at_wait pw = { .path = path };
	sc_sched_set(publish_at_wait, &pw);
	int rc = sc_arena_open(name, &a);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(pw.waits, 1); /* it waited, and its next look found the header published */
	sc_arena_close(a);
	/* a creator that died before publishing (no lock, not in the instant after its create)
	 * left a half-made file: clearly not an arena, at once */
	patch_file(path, offsetof(struct shm_header, initialised), &zero, sizeof(zero));
	close(cfd);
	/* time itself: the file's ctime (the patch above) must be older than CREATE_GAP_NS (1 s,
	 * shm/arena.c), else the open takes it for a create in the instant before its lock and waits */
	usleep(1100000);
	int waits = 0;
	sc_sched_set(count_open_waits, &waits);
	rc = sc_arena_open(name, &a);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(rc, -EBADMSG);
	ck_assert_int_eq(waits, 0); /* refused without waiting */
	unlink(path);
}
END_TEST

START_TEST(test_permissions)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("perm", 16 << 20, &name);
	char path[128];
	shm_path(path, sizeof(path), name);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	if (geteuid() != 0) {
		sc_skip("arena permissions: not root, cannot switch to another user");
		sc_test_arena_destroy(a, name);
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(3);
		struct sc_arena *b;
		if (sc_arena_open(name, &b) != -EACCES)
			_exit(1);
		/* nor may it remove what it cannot read */
		_exit(sc_arena_destroy(NULL, name) == -EACCES ? 0 : 2);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "another user and root's 0600 arena: %#x (1 open, 2 destroy)",
		      status);
	ck_assert_int_eq(stat(path, &st), 0);
	sc_test_arena_destroy(a, name);

	/* an explicit mode and group */
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .mode = 0660, .gid = 65534 };
	a = sc_test_arena_opts("perm2", &o, &name);
	shm_path(path, sizeof(path), name);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0660);
	ck_assert_uint_eq(st.st_gid, 65534);
	/* a member of that group (another user) opens it: root's file is trusted without being asked */
	pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(3);
		struct sc_arena *b;
		int rc = sc_arena_open(name, &b);
		if (rc == 0)
			sc_arena_close(b);
		_exit(rc == 0 ? 0 : rc == -EPERM ? 1 : 2);
	}
	waitpid(pid, &status, 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a group member opening root's arena: %#x (1 -EPERM)",
		      status);
	sc_test_arena_destroy(a, name);
	/* another user's own arena: trusted by that user without being asked */
	pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(3);
		struct sc_arena_opts o2 = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
		const char *own = sc_test_name("perm3");
		struct sc_arena *x, *y;
		if (sc_arena_create(own, &o2, &x))
			_exit(4);
		int rc = sc_arena_open(own, &y);
		if (rc == 0)
			sc_arena_close(y);
		sc_arena_close(x);
		sc_arena_destroy(NULL, own);
		_exit(rc == 0 ? 0 : rc == -EPERM ? 1 : 2);
	}
	waitpid(pid, &status, 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a user opening its own arena: %#x (1 -EPERM, 4 create)",
		      status);
}
END_TEST

START_TEST(test_create_race)
{
	for (int round = 0; round < 20; round++) {
		const char *name = sc_test_name("race");
		int go[2];
		ck_assert_int_eq(pipe(go), 0);
		pid_t kids[2];
		for (int k = 0; k < 2; k++) {
			kids[k] = fork();
			if (kids[k] == 0) {
				char c;
				close(go[1]);
				if (read(go[0], &c, 1) != 0)
					_exit(9);
				struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
				struct sc_arena *a;
				int rc = sc_arena_create(name, &o, &a);
				if (rc == 0) {
					sc_arena_close(a);
					_exit(0);
				}
				_exit(rc == -EEXIST ? 1 : 2);
			}
		}
		close(go[0]);
		close(go[1]); /* both children start now */
		int ok = 0, exist = 0;
		for (int k = 0; k < 2; k++) {
			int status;
			waitpid(kids[k], &status, 0);
			ck_assert(WIFEXITED(status));
			ok += WEXITSTATUS(status) == 0;
			exist += WEXITSTATUS(status) == 1;
		}
		ck_assert_int_eq(ok, 1);
		ck_assert_int_eq(exist, 1);
		struct sc_arena *a;
		ck_assert_int_eq(sc_arena_open(name, &a), 0);
		sc_test_arena_destroy(a, name);
	}
}
END_TEST

START_TEST(test_child_sees_parent_writes)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("share", 16 << 20, &name);
	uint64_t hsize;
	uint8_t *heap = shm_region(a->shm, SHM_REGION_HEAP, &hsize);
	for (int i = 0; i < 4096; i++)
		heap[hsize - 4096 + (uint64_t)i] = (uint8_t)(i * 7);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *b;
		if (sc_arena_open(name, &b))
			_exit(2);
		uint64_t sz;
		uint8_t *h2 = shm_region(b->shm, SHM_REGION_HEAP, &sz);
		int bad = sz != hsize;
		for (int i = 0; i < 4096 && !bad; i++)
			bad = h2[sz - 4096 + (uint64_t)i] != (uint8_t)(i * 7);
		/* and writes back */
		h2[0] = 0xa5;
		sc_arena_close(b);
		_exit(bad);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_eq(heap[0], 0xa5);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_killed_reader_slot_reclaimed)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("reap", 16 << 20, &name);
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *b;
		if (sc_arena_open(name, &b))
			_exit(2);
		if (write(ready[1], "x", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	char c;
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	ck_assert_uint_eq(in.attached_count, 2);
	int found = 0;
	for (uint32_t i = 0; i < in.attached_count; i++)
		found |= in.attached[i].pid == (uint32_t)pid;
	ck_assert(found);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* dead: no longer listed, and its slot is reclaimed */
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	ck_assert_uint_eq(in.attached_count, 1);
	ck_assert_int_eq(shm_readers_reap(a->shm), 1);
	uint32_t used = 0;
	for (uint32_t i = 0; i < shm_readers_count(a->shm); i++)
		used += atomic_load(&shm_reader_slot(a->shm, i)->state) != SHM_SLOT_FREE;
	ck_assert_uint_eq(used, 1);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_live_pid_without_lock_is_dead)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("recycle", 16 << 20, &name);
	/* a slot that says LIVE and names a live pid (our parent's), but whose lock nobody holds,
	 * belongs to a dead holder: pids decide nothing */
	uint32_t i;
	struct shm_reader_slot *s = NULL;
	for (i = 0; i < shm_readers_count(a->shm); i++)
		if (atomic_load(&shm_reader_slot(a->shm, i)->state) == SHM_SLOT_FREE) {
			s = shm_reader_slot(a->shm, i);
			break;
		}
	ck_assert_ptr_nonnull(s);
	atomic_store(&s->inc, 7);
	atomic_store(&s->pid, (uint32_t)getppid());
	atomic_store(&s->state, SHM_SLOT_LIVE);
	ck_assert(!shm_slot_alive(a->shm, i));
	ck_assert(!shm_token_alive(a->shm, shm_token(i, 7)));
	ck_assert_int_eq(shm_readers_reap(a->shm), 1);
	ck_assert_uint_eq(atomic_load(&s->state), SHM_SLOT_FREE);
	ck_assert_uint_ne(atomic_load(&s->inc), 7); /* every token of the dead holder is dead */
	/* our own slot is alive, and tokens naming no slot are dead */
	ck_assert(shm_token_alive(a->shm, a->shm->token));
	ck_assert(!shm_token_alive(a->shm, 0));
	ck_assert(!shm_token_alive(a->shm, shm_token(0xffff, 1)));
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_reader_table_full)
{
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .reader_slots = 2 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("full", &o, &name), *b, *c;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	ck_assert_int_eq(sc_arena_open(name, &c), -EUSERS);
	sc_arena_close(b);
	ck_assert_int_eq(sc_arena_open(name, &c), 0);
	sc_arena_close(c);
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(test_epochs)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("epoch", 16 << 20, &name);
	struct shm_arena *s = a->shm;
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	shm_epoch_enter(s);
	uint64_t e = shm_epoch_min_active(s);
	ck_assert_uint_ge(e, 1);
	uint64_t e2 = shm_epoch_advance(s);
	ck_assert_uint_gt(e2, e);
	ck_assert_uint_eq(shm_epoch_min_active(s), e); /* we still hold the old epoch */
	shm_epoch_exit(s);
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	/* a dead reader stuck inside a section holds reclamation back only until its slot is
	 * reaped (nobody guesses that a reader is dead: its lock says so) */
	pid_t pid = fork();
	if (pid == 0) {
		struct sc_arena *b;
		if (sc_arena_open(name, &b))
			_exit(2);
		shm_epoch_enter(b->shm);
		raise(SIGKILL);
	}
	waitpid(pid, NULL, 0);
	ck_assert_uint_eq(shm_epoch_min_active(s), e2);
	ck_assert_int_eq(shm_readers_reap(s), 1);
	ck_assert_uint_eq(shm_epoch_min_active(s), UINT64_MAX);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A field of /proc/meminfo (@fmt: "Name: %ld"), or -1 when it is not there. */
/* The first value of @file's lines that matches @fmt, or -1 */
static long meminfo_of(const char *file, const char *fmt)
{
	FILE *f = fopen(file, "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static long meminfo(const char *fmt)
{
	return meminfo_of("/proc/meminfo", fmt);
}

static int hugepages_free(void)
{
	return (int)meminfo("HugePages_Free: %ld");
}

/* ShmemHugePages, in kB */
static long shmem_huge_kb(void)
{
	return meminfo("ShmemHugePages: %ld kB");
}

/* The number of hugetlbfs mounts; *@dev: whether /dev/hugepages is one. */
static int hugetlbfs_mounts(int *dev)
{
	FILE *f = fopen("/proc/mounts", "r");
	char line[512];
	int n = 0;
	*dev = 0;
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, " hugetlbfs ")) {
			n++;
			*dev |= strstr(line, " /dev/hugepages hugetlbfs ") != NULL;
		}
	if (f)
		fclose(f);
	return n;
}

static int hugetlbfs_mounted(void)
{
	int dev;
	return hugetlbfs_mounts(&dev) > 0;
}

/* Is /dev/hugepages the one hugetlbfs mount? */
static int only_dev_hugepages(void)
{
	int dev;
	return hugetlbfs_mounts(&dev) == 1 && dev;
}

START_TEST(test_huge_require)
{
	if (!hugetlbfs_mounted() || hugepages_free() < 8) {
		sc_skip("huge=require: no hugetlbfs mount with at least 8 free 2 MiB pages (run stagecache setup)");
		return;
	}
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_REQUIRE };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("huge", &o, &name);
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	ck_assert_int_eq(in.backing, SC_BACKING_HUGETLBFS_2M);
	ck_assert_uint_eq(in.page_size, 2 << 20);
	ck_assert_uint_eq(in.size_bytes, 16 << 20); /* a multiple of 2 MiB is not rounded up */
	ck_assert(strncmp(in.path, "/dev/shm/", 9) != 0);
	/* a size that is not a multiple of 2 MiB is rounded up to the next one, and only that far */
	struct sc_arena_opts o2 = { .size_bytes = (10 << 20) + 4096, .huge = SC_HUGE_REQUIRE };
	const char *name2;
	struct sc_arena *a2 = sc_test_arena_opts("huge2", &o2, &name2);
	struct sc_arena_info in2;
	ck_assert_int_eq(sc_arena_info(a2, &in2), 0);
	ck_assert_uint_eq(in2.size_bytes, 12 << 20);
	sc_test_arena_destroy(a2, name2);
	/* a child finds it in the hugetlbfs directory */
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* In a mount namespace of its own (a forked child), arenas go to /dev/hugepages when it is a
 * hugetlbfs mount, listed before another hugetlbfs mount or after it, and to the other one when
 * /dev/hugepages is not mounted. */
START_TEST(test_hugetlbfs_mount_chosen)
{
	if (geteuid() != 0 || !only_dev_hugepages() || hugepages_free() < 8) {
		sc_skip("choice of hugetlbfs mount: needs root and /dev/hugepages as the only hugetlbfs mount, with 8 "
			"free 2 MiB pages");
		return;
	}
	char dir[] = "/var/tmp/sc-test-dir-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			_exit(10);
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_REQUIRE };
		struct sc_arena *a;
		struct sc_arena_info in;
		const char *name = sc_test_name("mnt");
		int where[3] = { 0, 0, 0 };
		for (int round = 0; round < 3; round++) {
			int rc = 0;
			if (round == 0) /* listed after /dev/hugepages */
				rc = mount("none", dir, "hugetlbfs", 0, "pagesize=2M");
			else if (round == 1) /* alone */
				rc = umount2("/dev/hugepages", MNT_DETACH);
			else /* /dev/hugepages again, listed after the other */
				rc = mount("none", "/dev/hugepages", "hugetlbfs", 0, "pagesize=2M");
			if (rc)
				_exit(11);
			if (sc_arena_create(name, &o, &a))
				_exit(12);
			rc = sc_arena_info(a, &in);
			sc_arena_close(a);
			sc_arena_destroy(NULL, name);
			if (rc)
				_exit(12);
			where[round] = strncmp(in.path, "/dev/hugepages/", 15) == 0 ? 1
				       : strncmp(in.path, dir, strlen(dir)) == 0 ? 2 : 3;
		}
		umount2(dir, MNT_DETACH);
		_exit(where[0] == 1 && where[1] == 2 && where[2] == 1 ? 0 : 20 + where[0] * 16 + where[1] * 4 + where[2]);
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	rmdir(dir);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 10) {
		sc_skip("choice of hugetlbfs mount: no mount namespace of our own here (CAP_SYS_ADMIN)");
		return;
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "status %#x (10-12 set-up; 20 + 16 a + 4 b + c: 1 /dev/hugepages, 2 the other mount, 3 elsewhere)", st);
}
END_TEST

START_TEST(test_huge_require_shortage)
{
	if (!hugetlbfs_mounted() || hugepages_free() < 0) {
		sc_skip("huge=require shortage: no hugetlbfs mount");
		return;
	}
	/* The free count is the machine's: another process taking or giving back hugepages meanwhile
	 * (a test run next to this one) moves it. An attempt that saw it move is tried again; a
	 * reservation this process keeps moves it in every attempt. */
	const char *name = sc_test_name("short");
	struct sc_arena_opts o = { .huge = SC_HUGE_REQUIRE };
	struct sc_arena *a;
	int freep = -1, after = -1, rc = 0;
	for (int attempt = 0; attempt < 8; attempt++, sc_test_pause_ms(100)) {
		freep = hugepages_free();
		o.size_bytes = ((uint64_t)freep + 16) * (2 << 20);
		rc = sc_arena_create(name, &o, &a);
		if (rc == 0) { /* others gave back 16 pages or more meanwhile */
			sc_test_arena_destroy(a, name);
			continue;
		}
		ck_assert_int_eq(rc, -ENOMEM);
		ck_assert_int_eq(sc_arena_open(name, &a), -ENOENT); /* nothing left behind */
		if ((after = hugepages_free()) == freep)
			break;
	}
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_msg(after == freep, "free hugepages %d before a refused create, %d after: kept reserved?", freep,
		      after); /* nothing kept reserved */
	/* auto falls back instead (tried again, like the above, while others give pages back) */
	o.huge = SC_HUGE_AUTO;
	int huge = 0;
	for (int attempt = 0; attempt < 8; attempt++, sc_test_pause_ms(100)) {
		o.size_bytes = ((uint64_t)hugepages_free() + 16) * (2 << 20);
		if (o.size_bytes >= (2ull << 30))
			break;
		ck_assert_int_eq(sc_arena_create(name, &o, &a), 0);
		struct sc_arena_info in;
		sc_arena_info(a, &in);
		huge = in.backing == SC_BACKING_HUGETLBFS_2M;
		sc_test_arena_destroy(a, name);
		if (!huge)
			break;
	}
	ck_assert_msg(!huge, "huge=auto took hugepages in 8 attempts for arenas 16 pages larger than the free ones");
}
END_TEST

static volatile sig_atomic_t storm_signals;

static void storm_count(int sig)
{
	(void)sig;
	storm_signals++;
}

/*
 * hugetlbfs stops allocating at a pending signal (fallocate -EINTR), and io_uring's task work
 * looks like one to it: a create under a storm of signals still makes its arena, every time,
 * all its pages allocated, and is never reported as a shortage or an interruption.
 */
START_TEST(huge_create_under_a_storm_of_signals)
{
	enum { PAGES = 32, CREATES = 8 };
	if (!hugetlbfs_mounted() || hugepages_free() < PAGES + 8) {
		sc_skip("huge create under signals: no hugetlbfs mount with %d free 2 MiB pages (run stagecache setup)", PAGES + 8);
		return;
	}
	struct sigaction sa = { .sa_handler = storm_count }, old;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, &old), 0);
	pid_t me = getpid(), pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		while (getppid() == me)
			kill(me, SIGUSR1);
		_exit(0);
	}
	/* the storm is on once the first signal arrived */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!storm_signals) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		ck_assert_msg(now.tv_sec - t0.tv_sec < 10, "the signalling child sent nothing in 10 s");
		sched_yield();
	}
	/* at least CREATES creates, and on until more than CREATES signals arrived during them: on a
	 * busy machine the signalling child may not run for a while */
	sig_atomic_t before = storm_signals;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int i = 0;
	for (; i < CREATES || storm_signals - before <= CREATES; i++) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= 30)
			break;
		struct sc_arena_opts o = { .size_bytes = (uint64_t)PAGES << 21, .huge = SC_HUGE_REQUIRE };
		const char *name = sc_test_name("storm");
		struct sc_arena *a = NULL;
		int rc = sc_arena_create(name, &o, &a);
		ck_assert_msg(rc == 0, "create %d of a %d-page hugetlbfs arena under signals: %s", i, PAGES, sc_strerror(rc));
		struct sc_arena_info in;
		ck_assert_int_eq(sc_arena_info(a, &in), 0);
		ck_assert_int_eq(in.backing, SC_BACKING_HUGETLBFS_2M);
		struct stat sb;
		ck_assert_int_eq(stat(in.path, &sb), 0);
		ck_assert_msg((uint64_t)sb.st_blocks * 512 == (uint64_t)PAGES << 21, "create %d: %llu bytes allocated of %d pages", i,
			      (unsigned long long)sb.st_blocks * 512, PAGES);
		sc_test_arena_destroy(a, name);
	}
	sig_atomic_t during = storm_signals - before;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(sigaction(SIGUSR1, &old, NULL), 0);
	ck_assert_msg(i >= CREATES && during > CREATES,
		      "%d signals during %d creates in 30 s (wanted more than %d during at least %d): no storm, or creates too slow",
		      (int)during, i, CREATES, CREATES);
}
END_TEST

/* The backing each kind of directory gives, as measured from /proc/self/smaps: a disk directory
 * is page cache (file-4k); a tmpfs mounted huge=always (in a mount namespace of our own) maps the
 * heap with transparent huge pages (shmem-thp, 2 MiB pages). */
START_TEST(test_backing_of_a_disk_and_a_thp_tmpfs)
{
	char dir[] = "/var/tmp/sc-test-dir-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .dir = dir };
	struct sc_arena *a;
	struct sc_arena_info in;
	const char *name = sc_test_name("disk");
	struct statfs sfs;
	ck_assert_int_eq(statfs(dir, &sfs), 0);
	if (sfs.f_type == 0x01021994 /* tmpfs */) {
		sc_skip("backing of an arena on disk: /var/tmp is a tmpfs here");
	} else {
		ck_assert_int_eq(sc_arena_create(name, &o, &a), 0);
		int rc = sc_arena_info(a, &in);
		sc_arena_close(a);
		ck_assert_int_eq(sc_arena_destroy(dir, name), 0);
		ck_assert_int_eq(rc, 0);
		ck_assert_msg(in.backing == SC_BACKING_FILE_4K && in.page_size == 4096, "on disk: backing %d, pages of %llu",
			      in.backing, (unsigned long long)in.page_size);
	}
	if (geteuid() != 0) {
		rmdir(dir);
		sc_skip("a tmpfs with huge=always needs root (mount namespace, mount)");
		return;
	}
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			_exit(10);
		if (mount("tmpfs", dir, "tmpfs", 0, "huge=always,size=64m"))
			_exit(11); /* no transparent huge pages for tmpfs in this kernel */
		o.size_bytes = 32 << 20;
		long before = shmem_huge_kb();
		if (sc_arena_create(name, &o, &a))
			_exit(12);
		long after = shmem_huge_kb(); /* the attach measured the mapping: its pages are in */
		int b = sc_arena_info(a, &in) ? -1 : in.backing;
		uint64_t ps = in.page_size;
		sc_arena_close(a);
		sc_arena_destroy(dir, name);
		if (before < 0 || after <= before)
			_exit(15); /* the kernel gave no huge page (fragmented memory, shmem THP denied) */
		_exit(b == SC_BACKING_SHMEM_THP && ps == 2u << 20 ? 0 : b == SC_BACKING_SHM_4K ? 13 : 14);
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	rmdir(dir);
	ck_assert(WIFEXITED(st));
	if (WEXITSTATUS(st) == 10 || WEXITSTATUS(st) == 11 || WEXITSTATUS(st) == 15) {
		sc_skip("backing of a tmpfs mounted huge=always: %s", WEXITSTATUS(st) == 10 ? "no mount namespace of our own here"
			: WEXITSTATUS(st) == 11 ? "tmpfs refuses huge=always (no transparent huge pages for shared memory)"
			: "the kernel gave the tmpfs no huge page (ShmemHugePages did not grow)");
		return;
	}
	ck_assert_msg(WEXITSTATUS(st) == 0, "tmpfs huge=always: %d (10 namespace, 12 create, 13 measured shm-4k, 14 other)",
		      WEXITSTATUS(st));
}
END_TEST

/* Run @body(@dir, @ctx) in a forked child that has a mount namespace of its own (whatever it
 * mounts or unmounts there vanishes with it); @dir is a fresh empty directory under /var/tmp,
 * removed afterwards. Returns @body's result (0 to 255), or -1 when the child could not make the
 * namespace. */
#define NO_MOUNT_NS 10
static int in_mount_ns(int (*body)(const char *dir, void *ctx), void *ctx)
{
	char dir[] = "/var/tmp/sc-test-dir-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			_exit(NO_MOUNT_NS);
		_exit(body(dir, ctx));
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	rmdir(dir);
	ck_assert_msg(WIFEXITED(st), "the child in its own mount namespace ended by signal %d", WTERMSIG(st));
	return WEXITSTATUS(st) == NO_MOUNT_NS ? -1 : WEXITSTATUS(st);
}

/* A test case around in_mount_ns (root only): skips when the namespace cannot be made, or when
 * @body returned 11 (what it needs is missing here: @why11) or @code2 (@why2); otherwise @body
 * must return 0 (@codes says what its other results mean). */
static void mount_ns_case(const char *what, int (*body)(const char *dir, void *ctx), const char *why11, int code2,
			  const char *why2, const char *codes)
{
	if (geteuid() != 0) {
		sc_skip("%s: needs root (a mount namespace of its own)", what);
		return;
	}
	int rc = in_mount_ns(body, NULL);
	if (rc < 0 || rc == 11 || (code2 && rc == code2)) {
		sc_skip("%s: %s", what, rc < 0 ? "no mount namespace of our own here" : rc == 11 ? why11 : why2);
		return;
	}
	ck_assert_msg(rc == 0, "%s: %d (%s)", what, rc, codes);
}

/* On a tmpfs mounted huge=advise (in a mount namespace of our own) huge=auto asks for transparent
 * huge pages (madvise) and gets them; huge=off does not ask, and its heap stays in 4 KiB pages.
 * huge=auto gets them on a tmpfs mounted huge=within_size as well: neither mount gives them to
 * pages allocated by fallocate. */
/* The backing an arena of @huge mode gets in a tmpfs mounted at @dir with @mopts (after unmounting
 * what was there when @again); -1 when the mount or the create fails. */
static int tmpfs_backing(const char *dir, const char *mopts, int again, int huge)
{
	if ((again && umount(dir)) || mount("tmpfs", dir, "tmpfs", 0, mopts))
		return -1;
	struct sc_arena_opts o = { .size_bytes = 32 << 20, .huge = huge, .dir = dir };
	struct sc_arena *a;
	struct sc_arena_info in;
	const char *name = sc_test_name("adv");
	if (sc_arena_create(name, &o, &a))
		return -1;
	int b = sc_arena_info(a, &in) ? -1 : in.backing;
	sc_arena_close(a);
	sc_arena_destroy(dir, name);
	return b;
}

static int test_huge_modes_on_an_advise_tmpfs_body(const char *dir, void *ctx)
{
	(void)ctx;
	char sys[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
	if (f && !fgets(sys, sizeof(sys), f))
		sys[0] = 0;
	if (f)
		fclose(f);
	if (strstr(sys, "[force]") || strstr(sys, "[deny]"))
		return 15; /* the mount options do not decide here */
	/* huge=always first: it tells whether the kernel gives a tmpfs huge pages at all */
	if (tmpfs_backing(dir, "huge=always,size=96m", 0, SC_HUGE_AUTO) != SC_BACKING_SHMEM_THP)
		return 15;
	if (tmpfs_backing(dir, "huge=advise,size=96m", 1, SC_HUGE_OFF) != SC_BACKING_SHM_4K)
		return 13;
	const char *mopts[] = { "huge=advise,size=96m", "huge=within_size,size=96m" };
	for (int m = 0; m < 2; m++) {
		if (tmpfs_backing(dir, mopts[m], 1, SC_HUGE_AUTO) == SC_BACKING_SHMEM_THP)
			continue;
		/* none: memory may have become too fragmented meanwhile; huge=always tells again */
		return tmpfs_backing(dir, "huge=always,size=96m", 1, SC_HUGE_AUTO) == SC_BACKING_SHMEM_THP ? 14 + 10 * m : 15;
	}
	return 0;
}

START_TEST(test_huge_modes_on_an_advise_tmpfs)
{
	mount_ns_case("huge modes on a tmpfs mounted huge=advise", test_huge_modes_on_an_advise_tmpfs_body,
		      "tmpfs refuses a huge= option (no transparent huge pages for shared memory)", 15,
		      "the kernel gave no huge page to a tmpfs mounted huge=always, or shmem_enabled forces or denies them",
		      "13 huge=off was not shm-4k, 14 huge=auto measured another backing than shmem-thp, 24 the same on "
		      "huge=within_size");
}
END_TEST

/* A tmpfs without room for the arena: -ENOMEM at create (not a SIGBUS later), whether its pages
 * are populated through the mapping (huge=auto, huge=advise mount) or by fallocate (huge=off), and
 * no file left behind. */
static int test_tmpfs_without_room_body(const char *dir, void *ctx)
{
	(void)ctx;
	if (mount("tmpfs", dir, "tmpfs", 0, "huge=advise,size=12m") && mount("tmpfs", dir, "tmpfs", 0, "size=12m"))
		return 11;
	const char *name = sc_test_name("room");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/stagecache.%s", dir, name);
	enum sc_huge modes[] = { SC_HUGE_AUTO, SC_HUGE_OFF };
	for (int i = 0; i < 2; i++) {
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = modes[i], .dir = dir };
		struct sc_arena *a = NULL;
		int rc = sc_arena_create(name, &o, &a);
		if (rc != -ENOMEM || a)
			return 20 + i;
		if (access(path, F_OK) == 0 || errno != ENOENT)
			return 30 + i;
		o.size_bytes = 8 << 20; /* and one that fits is made */
		if (sc_arena_create(name, &o, &a))
			return 40 + i;
		sc_arena_close(a);
		if (sc_arena_destroy(dir, name))
			return 50 + i;
	}
	return 0;
}

START_TEST(test_tmpfs_without_room)
{
	mount_ns_case("a tmpfs without room", test_tmpfs_without_room_body, "tmpfs cannot be mounted here", 0, NULL,
		      "2x not -ENOMEM, 3x a file left, 4x the arena that fits, 5x its destroy; x: 0 huge=auto, 1 huge=off");
}
END_TEST

START_TEST(test_huge_off)
{
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("off", &o, &name);
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	ck_assert_int_eq(in.backing, SC_BACKING_SHM_4K);
	ck_assert(strncmp(in.path, "/dev/shm/", 9) == 0);
	sc_test_arena_destroy(a, name);
	/* huge=off in a hugetlbfs directory is a contradiction */
	if (hugetlbfs_mounted()) {
		o.dir = "/dev/hugepages";
		ck_assert_int_eq(sc_arena_create(sc_test_name("off2"), &o, &a), -EINVAL);
	}
}
END_TEST

/* The backing is measured for the mapping that holds the address, also at its first and last byte:
 * a test arena lies between two PROT_NONE guards (anonymous, 4 KiB pages), so the guard ending at
 * the arena's first byte and the one starting just past its last are neighbours of another kind
 * when the arena is on hugetlbfs. */
START_TEST(test_backing_measured_at_the_edges_of_a_mapping)
{
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("edge", &o, &name);
	const uint8_t *base = a->shm->base;
	uint64_t size = a->shm->size, ps = 0;
	ck_assert_int_eq(shm_measure_backing(base, &ps), SC_BACKING_SHM_4K);
	ck_assert_uint_eq(ps, 4096);
	ck_assert_int_eq(shm_measure_backing(base + size - 1, NULL), SC_BACKING_SHM_4K);
	sc_test_arena_destroy(a, name);
	if (!hugetlbfs_mounted() || hugepages_free() < 8) {
		sc_skip("backing at the edges of a hugetlbfs mapping: no hugetlbfs mount with 8 free 2 MiB pages");
		return;
	}
	o.huge = SC_HUGE_REQUIRE;
	a = sc_test_arena_opts("edge2", &o, &name);
	base = a->shm->base;
	size = a->shm->size;
	ck_assert_int_eq(shm_measure_backing(base, &ps), SC_BACKING_HUGETLBFS_2M);
	ck_assert_uint_eq(ps, 2 << 20);
	ck_assert_int_eq(shm_measure_backing(base + size - 1, NULL), SC_BACKING_HUGETLBFS_2M);
	ck_assert_int_eq(shm_measure_backing(base - 1, &ps), SC_BACKING_SHM_4K); /* the guards */
	ck_assert_uint_eq(ps, 4096);
	ck_assert_int_eq(shm_measure_backing(base + size, NULL), SC_BACKING_SHM_4K);
	/* an address no mapping holds */
	ck_assert_int_eq(shm_measure_backing((const void *)(uintptr_t)4096, NULL), SC_BACKING_UNKNOWN);
	sc_test_arena_destroy(a, name);
}
END_TEST

static void close_fd0_at_create(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "arena.create.locked"))
		close(0);
}

/* A forked child closes the lock descriptor of every handle it inherited, descriptor 0 too: here
 * fd 0 is taken while the arena file is opened and given up before the reader claim opens its lock
 * description, which then gets number 0. */
START_TEST(test_forked_child_closes_a_lock_descriptor_numbered_0)
{
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		int nul = open("/dev/null", O_RDONLY);
		if (nul < 0 || (nul != 0 && dup2(nul, 0) != 0))
			_exit(10);
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
		const char *name = sc_test_name("fd0");
		struct sc_arena *a;
		sc_sched_set(close_fd0_at_create, NULL);
		int rc = sc_arena_create(name, &o, &a);
		sc_sched_set(NULL, NULL);
		if (rc)
			_exit(11);
		int rcx = a->shm->lock_fd == 0 ? 0 : 12;
		struct shm_pin_owner po; /* an I/O pin finds the handle: its descriptor 0 is a lock */
		if (!rcx && shm_arena_pin_find(a->shm->base, &po) != 1)
			rcx = 14;
		else if (!rcx)
			close(po.fd), shm_arena_unpin(a->shm->serial);
		pid_t g = rcx ? -1 : fork();
		if (g == 0)
			_exit(fcntl(0, F_GETFD) == -1 && errno == EBADF && a->shm->lock_fd == -1 ? 0 : 1);
		int st = 0;
		if (g > 0 && (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0))
			rcx = 13;
		sc_arena_close(a);
		sc_arena_destroy(NULL, name);
		_exit(rcx);
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "status %#x (10 fd 0, 11 create, 12 the lock descriptor is not 0, 13 the child kept it open, 14 no pin)", st);
}
END_TEST

/* I/O pins (shm_arena_pin_find and the rest): the handle whose mapping holds an address, from its
 * first byte to its last and not one byte outside; the pin count of that handle only; a new
 * descriptor of its lock description, number 0 when that is free; serials and the close count. */
START_TEST(test_io_pins_find_the_handle_that_maps_an_address)
{
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
	const char *na, *nb;
	struct sc_arena *a = sc_test_arena_opts("pina", &o, &na), *b = sc_test_arena_opts("pinb", &o, &nb);
	struct shm_arena *sa = a->shm, *sb = b->shm;
	struct shm_pin_owner po;
	const uint8_t *ends[] = { sa->base, sa->base + sa->size - 1 };
	for (int i = 0; i < 2; i++) {
		memset(&po, 0, sizeof(po));
		ck_assert_int_eq(shm_arena_pin_find(ends[i], &po), 1);
		ck_assert_uint_eq(po.serial, sa->serial);
		ck_assert(po.base == (uintptr_t)sa->base && po.end == (uintptr_t)(sa->base + sa->size));
		struct stat s1, s2;
		ck_assert_int_eq(fstat(po.fd, &s1), 0);
		ck_assert_int_eq(fstat(sa->lock_fd, &s2), 0);
		ck_assert(po.fd != sa->lock_fd && s1.st_ino == s2.st_ino && s1.st_dev == s2.st_dev);
		close(po.fd);
	}
	ck_assert_uint_eq(sa->io_pins, 2);
	ck_assert_uint_eq(sb->io_pins, 0);
	ck_assert_int_eq(shm_arena_pin_find(sa->base - 1, &po), 0);
	ck_assert_int_eq(shm_arena_pin_find(sa->base + sa->size, &po), 0);
	ck_assert_int_eq(shm_arena_pin_find(&po, &po), 0); /* the stack */
	/* a handle whose slot was released holds no lock to pin: 0, not an error */
	struct sc_arena *r;
	const char *nr;
	r = sc_test_arena_opts("pinr", &o, &nr);
	shm_readers_release(r->shm, 0);
	ck_assert_int_eq(shm_arena_pin_find(r->shm->base, &po), 0);
	sc_test_arena_destroy(r, nr);
	/* unpin: the named handle's count only (b, opened later, is first on the list) */
	shm_arena_unpin(sa->serial);
	ck_assert_uint_eq(sa->io_pins, 1);
	ck_assert_uint_eq(sb->io_pins, 0);
	shm_arena_unpin(sb->serial); /* nothing pinned: stays 0 */
	ck_assert_uint_eq(sb->io_pins, 0);
	ck_assert_uint_eq(sa->io_pins, 1);
	/* a free descriptor 0 is a descriptor like any other */
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		/* the child's handles are copies (not its own): they find nothing */
		int rc = shm_arena_pin_find(sa->base, &po);
		_exit(rc == 0 ? 0 : 1);
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a forked child found a pin: %#x", st);
	int saved = dup(0);
	ck_assert_int_ge(saved, 0);
	close(0);
	int rc = shm_arena_pin_find(sb->base, &po);
	int fd = po.fd;
	ck_assert_int_eq(dup2(saved, 0), 0);
	close(saved);
	ck_assert_int_eq(rc, 1);
	ck_assert_int_eq(fd, 0);
	close(fd == 0 ? -1 : fd);
	ck_assert_uint_eq(sb->io_pins, 1);
	/* serials and closes */
	uint64_t gen = shm_arena_open_gen(), serial_a = sa->serial;
	ck_assert(sa->serial != sb->serial);
	ck_assert_int_eq(shm_arena_serial_open(serial_a), 1);
	ck_assert_int_eq(shm_arena_serial_open(sb->serial), 1);
	shm_arena_unpin(serial_a);
	ck_assert_uint_eq(sa->io_pins, 0);
	sc_test_arena_destroy(a, na);
	ck_assert_uint_gt(shm_arena_open_gen(), gen);
	ck_assert_int_eq(shm_arena_serial_open(serial_a), 0);
	ck_assert_int_eq(shm_arena_serial_open(sb->serial), 1);
	shm_arena_unpin(serial_a); /* a closed handle: a no-op */
	ck_assert_uint_eq(sb->io_pins, 1);
	shm_arena_unpin(sb->serial);
	ck_assert_uint_eq(sb->io_pins, 0);
	sc_test_arena_destroy(b, nb);
}
END_TEST

/* An arena's path that needs PATH_MAX bytes with its terminating NUL is refused as too long (not
 * cut short and then used); one byte shorter, it is used (here: a directory that does not exist).
 * Opening either says there is no such arena. */
START_TEST(test_path_of_exactly_path_max_bytes)
{
	const char *name = sc_test_name("pm");
	size_t fixed = strlen("/stagecache.") + strlen(name);
	char *dir = malloc(PATH_MAX);
	ck_assert_ptr_nonnull(dir);
	for (int fits = 0; fits < 2; fits++) {
		size_t len = PATH_MAX - fixed - (size_t)fits; /* the path: PATH_MAX - fits characters */
		memset(dir, 'd', len);
		dir[0] = '/';
		dir[len] = 0;
		for (size_t i = 200; i < len; i += 200)
			dir[i] = '/'; /* components within NAME_MAX */
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .dir = dir };
		struct sc_arena *a = NULL;
		int want = fits ? -ENOENT : -ENAMETOOLONG;
		ck_assert_int_eq(sc_arena_create(name, &o, &a), want);
		ck_assert_ptr_null(a);
		ck_assert_int_eq(sc_arena_open_dir(dir, name, &a), -ENOENT); /* no such arena, either way */
	}
	free(dir);
}
END_TEST

/* SC_ARENA_OPT_GID with gid 0: the file's group is root's even when the creator's group is
 * another (a root process whose effective group is not 0). */
START_TEST(test_group_0_given_literally)
{
	if (geteuid() != 0) {
		sc_skip("a file's group set to 0 by a process in another group needs root");
		return;
	}
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		if (setresgid(65534, 65534, 65534))
			_exit(10);
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .mode = 0660, .gid = 0,
					   .flags = SC_ARENA_OPT_GID };
		const char *name = sc_test_name("gid0");
		struct sc_arena *a;
		if (sc_arena_create(name, &o, &a))
			_exit(11);
		struct sc_arena_file f;
		int rc = sc_arena_file_stat(NULL, name, &f);
		sc_arena_close(a);
		sc_arena_destroy(NULL, name);
		_exit(rc ? 12 : f.gid == 0 ? 0 : 13);
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x (10 setresgid, 11 create, 12 stat, 13 not group 0)",
		      st);
}
END_TEST

/* A filesystem without fallocate (ramfs, in a mount namespace of our own): the file is sized with
 * ftruncate instead, and the arena works. */
static int test_directory_without_fallocate_body(const char *dir, void *ctx)
{
	(void)ctx;
	if (mount("ramfs", dir, "ramfs", 0, NULL))
		return 11;
	int probe = open(dir, O_TMPFILE | O_RDWR, 0600);
	if (probe < 0)
		return 11;
	int nofalloc = fallocate(probe, 0, 0, 4096) < 0 && errno == EOPNOTSUPP;
	close(probe);
	if (!nofalloc)
		return 14;
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .dir = dir };
	const char *name = sc_test_name("ramfs");
	struct sc_arena *a, *b;
	if (sc_arena_create(name, &o, &a))
		return 12;
	int rc = sc_arena_open_dir(dir, name, &b);
	if (!rc)
		sc_arena_close(b);
	sc_arena_close(a);
	sc_arena_destroy(dir, name);
	return rc ? 13 : 0;
}

START_TEST(test_directory_without_fallocate)
{
	mount_ns_case("a directory without fallocate", test_directory_without_fallocate_body, "no ramfs here", 14,
		      "this kernel's ramfs has fallocate", "12 create, 13 open");
}
END_TEST

/* A create that fails after it opened the file closes it, descriptor 0 too (stdin closed before). */
START_TEST(test_failed_create_closes_descriptor_0)
{
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		close(0);
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_REQUIRE, .dir = "/dev/shm" };
		struct sc_arena *a;
		if (sc_arena_create(sc_test_name("fd0f"), &o, &a) != -ENODEV) /* not hugetlbfs: after the open */
			_exit(10);
		_exit(fcntl(0, F_GETFD) == -1 && errno == EBADF ? 0 : 11);
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x (10 not -ENODEV, 11 descriptor 0 left open)", st);
}
END_TEST

/* huge=auto with a hugetlbfs mount that has the pages: the arena is there, and only there. */
START_TEST(test_huge_auto_takes_hugetlbfs)
{
	if (!hugetlbfs_mounted() || hugepages_free() < 8) {
		sc_skip("huge=auto on hugetlbfs: no hugetlbfs mount with at least 8 free 2 MiB pages (run stagecache setup)");
		return;
	}
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_AUTO };
	const char *name = sc_test_name("auto");
	struct sc_arena *a;
	ck_assert_int_eq(sc_arena_create(name, &o, &a), 0);
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	char shm[PATH_MAX];
	snprintf(shm, sizeof(shm), "/dev/shm/stagecache.%s", name);
	int in_shm = access(shm, F_OK) == 0;
	sc_arena_close(a);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0);
	ck_assert_int_eq(in.backing, SC_BACKING_HUGETLBFS_2M);
	ck_assert(strncmp(in.path, "/dev/shm/", 9) != 0);
	ck_assert_msg(!in_shm, "a second arena file in /dev/shm");
}
END_TEST

static void count_from_nonexistent(const char *dir, const char *name, void *ctx)
{
	(void)name;
	*(int *)ctx += !strcmp(dir, "/nonexistent-sc-dir");
}

/* The shm level refuses what the library would never pass: a backing mode past the last one, a bad
 * name; nothing is created. */
START_TEST(test_shm_create_refuses_bad_arguments)
{
	const char *name = sc_test_name("shmbad");
	struct shm_params p = { .total_bytes = 16 << 20, .huge_mode = SHM_HUGE_OFF + 1 };
	struct shm_arena *sa = (struct shm_arena *)1;
	ck_assert_int_eq(shm_arena_create(NULL, name, &p, 0600, -1, &sa), -EINVAL);
	ck_assert_ptr_null(sa);
	sa = (struct shm_arena *)1;
	p.huge_mode = SHM_HUGE_OFF;
	ck_assert_int_eq(shm_arena_create(NULL, "a/b", &p, 0600, -1, &sa), -EINVAL);
	ck_assert_ptr_null(sa);
	struct stat st;
	ck_assert_int_eq(shm_arena_stat(NULL, name, (char[PATH_MAX]){ 0 }, PATH_MAX, &st), -ENOENT);
	/* the same parameters with a valid mode are fine */
	ck_assert_int_eq(shm_arena_create(NULL, name, &p, 0600, -1, &sa), 0);
	shm_arena_close(sa);
	ck_assert_int_eq(shm_arena_destroy(NULL, name), 0);
	shm_arena_close(NULL); /* nothing */
	/* a directory to list that does not exist (or cannot be read) adds nothing */
	int from_it = 0;
	ck_assert_int_ge(shm_arena_list("/nonexistent-sc-dir", count_from_nonexistent, &from_it), 0);
	ck_assert_int_eq(from_it, 0);
}
END_TEST

/* With no hugetlbfs mount at all (every one unmounted in a mount namespace of our own) huge=require
 * is -ENODEV and creates nothing, and huge=auto lands in /dev/shm. */
static int test_no_hugetlbfs_mount_body(const char *dir, void *ctx)
{
	(void)ctx;
	(void)dir;
	for (int round = 0; round < 8; round++) {
		FILE *f = fopen("/proc/mounts", "r");
		char dev[256], mnt[PATH_MAX], type[64];
		int left = 0;
		while (f && fscanf(f, "%255s %4095s %63s %*[^\n]", dev, mnt, type) == 3)
			if (!strcmp(type, "hugetlbfs"))
				left += umount2(mnt, MNT_DETACH) != 0;
		if (f)
			fclose(f);
		if (!hugetlbfs_mounted())
			break;
		if (left)
			return 11;
	}
	if (hugetlbfs_mounted())
		return 11;
	/* a /dev/shm of our own, watched: whether anything is made in it */
	int watch = -1;
	if (mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=64m") || (watch = inotify_init1(IN_NONBLOCK)) < 0 ||
	    inotify_add_watch(watch, "/dev/shm", IN_CREATE) < 0)
		return 11;
	const char *name = sc_test_name("nohuge");
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_REQUIRE };
	struct sc_arena *a = NULL;
	if (sc_arena_create(name, &o, &a) != -ENODEV || a)
		return 12;
	char ev[4096];
	if (read(watch, ev, sizeof(ev)) > 0)
		return 16; /* a file was made (and removed) */
	close(watch);
	struct sc_arena_file fl;
	if (sc_arena_file_stat(NULL, name, &fl) != -ENOENT)
		return 13;
	o.huge = SC_HUGE_AUTO;
	if (sc_arena_create(name, &o, &a))
		return 14;
	struct sc_arena_info in;
	int rc = sc_arena_info(a, &in);
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
	return rc || strncmp(in.path, "/dev/shm/", 9) ? 15 : 0;
}

START_TEST(test_no_hugetlbfs_mount)
{
	mount_ns_case("no hugetlbfs mount", test_no_hugetlbfs_mount_body, "a hugetlbfs mount could not be unmounted", 0, NULL,
		      "12 require not -ENODEV, 13 a file made, 14 auto, 15 auto not in /dev/shm, 16 /dev/shm modified by "
		      "the refused require");
}
END_TEST

/* A name looked for in a directory the caller may not search (a hugetlbfs mount of mode 0700, in a
 * mount namespace of our own) may be there: open, inspection and destroy say -EACCES, not -ENOENT. */
static int test_unsearchable_directory_is_not_absence_body(const char *dir, void *ctx)
{
	(void)ctx;
	(void)dir;
	if (access("/dev/hugepages", F_OK) || mount("none", "/dev/hugepages", "hugetlbfs", 0, "mode=0700,pagesize=2M"))
		return 11;
	if (setgid(65534) || setuid(65534))
		return 12;
	const char *name = sc_test_name("hidden");
	struct sc_arena *a = NULL;
	struct sc_arena_file fl;
	uint32_t v;
	if (sc_arena_open(name, &a) != -EACCES)
		return 13;
	if (sc_arena_file_stat(NULL, name, &fl) != -EACCES)
		return 14;
	if (sc_arena_file_version(NULL, name, &v) != -EACCES)
		return 15;
	if (sc_arena_destroy(NULL, name) != -EACCES)
		return 16;
	return 0;
}

START_TEST(test_unsearchable_directory_is_not_absence)
{
	mount_ns_case("a name behind an unsearchable hugetlbfs mount", test_unsearchable_directory_is_not_absence_body,
		      "hugetlbfs cannot be mounted on /dev/hugepages here", 0, NULL,
		      "12 setuid; not -EACCES from: 13 open, 14 file stat, 15 file version, 16 destroy");
}
END_TEST

struct pause_at {
	const char *point;
	int to_parent, from_parent;
};

static void pause_at_point(const char *point, void *ctx)
{
	struct pause_at *p = ctx;
	char c = 1;
	if (strcmp(point, p->point) || write(p->to_parent, &c, 1) != 1 || read(p->from_parent, &c, 1) != 1)
		return;
}

/* An opener that comes while the creator has published the header and still holds its lock
 * (schedule point arena.create.published) attaches at once, without waiting for the lock. */
START_TEST(test_open_between_publication_and_unlock)
{
	int up[2], down[2];
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	const char *name = sc_test_name("pub");
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		struct pause_at p = { "arena.create.published", up[1], down[0] };
		sc_sched_set(pause_at_point, &p);
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
		struct sc_arena *a;
		int rc = sc_arena_create(name, &o, &a);
		sc_sched_set(NULL, NULL);
		if (!rc)
			sc_arena_close(a);
		_exit(rc ? 1 : 0);
	}
	close(up[1]); /* a creator that ends before the point ends the read below */
	close(down[0]);
	char ch;
	int at = read(up[0], &ch, 1) == 1; /* the creator is at the point */
	char path[128];
	shm_path(path, sizeof(path), name);
	int fd = at ? open(path, O_RDONLY) : -1;
	int held = fd >= 0 ? shm_ofd_held(fd, SHM_LOCK_CREATE) : -1; /* published, the lock still held */
	if (fd >= 0)
		close(fd);
	struct sc_arena *b = NULL;
	int rc = at ? sc_arena_open(name, &b) : -1; /* (unpublished, it would wait 2 s and say -EAGAIN) */
	if (at)
		ck_assert_int_eq(write(down[1], &ch, 1), 1);
	close(down[1]);
	close(up[0]);
	int wst;
	ck_assert_int_eq(waitpid(c, &wst, 0), c);
	if (!rc)
		sc_arena_close(b);
	sc_arena_destroy(NULL, name);
	ck_assert_msg(at && WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the creator did not reach the point: %#x", wst);
	ck_assert_int_eq(held, 1);
	ck_assert_int_eq(rc, 0);
}
END_TEST

static void stale_eintr(const char *point, void *ctx)
{
	(void)ctx;
	if (!strcmp(point, "arena.create.locked"))
		errno = EINTR;
}

/* The create retries fallocate only when fallocate itself was interrupted, not when errno says
 * EINTR from before (left here by a schedule hook): it returns. */
START_TEST(test_create_with_a_stale_eintr)
{
	const char *name = sc_test_name("eintr");
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
	struct sc_arena *a;
	sc_sched_set(stale_eintr, NULL);
	alarm(10); /* a retry loop would never end: SIGALRM ends the case */
	int rc = sc_arena_create(name, &o, &a);
	alarm(0);
	sc_sched_set(NULL, NULL);
	ck_assert_int_eq(rc, 0);
	sc_arena_close(a);
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0);
}
END_TEST

/* Without /proc (unmounted in a mount namespace of our own) an arena is made and opened in a tmpfs
 * directory: its backing cannot be measured (unknown), nothing else needs /proc. */
static int test_arena_without_proc_body(const char *dir, void *ctx)
{
	(void)ctx;
	if (mount("tmpfs", dir, "tmpfs", 0, "size=64m") || umount2("/proc", MNT_DETACH) ||
	    access("/proc/self/mountinfo", F_OK) == 0)
		return 11;
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_AUTO, .dir = dir };
	const char *name = sc_test_name("noproc");
	struct sc_arena *a, *b;
	if (sc_arena_create(name, &o, &a))
		return 12;
	struct sc_arena_info in;
	int rc = sc_arena_info(a, &in);
	int rc2 = sc_arena_open_dir(dir, name, &b);
	if (!rc2)
		sc_arena_close(b);
	sc_arena_close(a);
	sc_arena_destroy(dir, name);
	return rc ? 13 : in.backing != SC_BACKING_UNKNOWN ? 14 : rc2 ? 15 : 0;
}

START_TEST(test_arena_without_proc)
{
	mount_ns_case("an arena without /proc", test_arena_without_proc_body,
		      "a tmpfs could not be mounted or /proc unmounted", 0, NULL,
		      "12 create, 13 info, 14 a backing measured, 15 open");
}
END_TEST

/* The test build maps every arena between two guards, reserving three huge pages of address space
 * more than the arena: with an address-space limit that leaves room for the arena but not for
 * that reservation, the create says -ENOMEM (and maps nothing at a guessed address). */
START_TEST(test_no_address_space_for_the_guards)
{
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		long vm_kb = meminfo_of("/proc/self/status", "VmSize: %ld kB");
		if (vm_kb <= 0)
			_exit(10);
		struct rlimit rl = { .rlim_cur = (rlim_t)vm_kb * 1024 + (16u << 20) + (2u << 20),
				     .rlim_max = RLIM_INFINITY };
		if (setrlimit(RLIMIT_AS, &rl))
			_exit(10);
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
		const char *name = sc_test_name("nogua");
		struct sc_arena *a = NULL;
		int rc = sc_arena_create(name, &o, &a);
		if (!rc)
			sc_arena_close(a);
		sc_arena_destroy(NULL, name);
		_exit(rc == -ENOMEM ? 0 : rc == 0 ? 1 : 2);
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	ck_assert(WIFEXITED(st));
	if (WEXITSTATUS(st) == 10) {
		sc_skip("no room for the guards: cannot read VmSize or set RLIMIT_AS here");
		return;
	}
	ck_assert_msg(WEXITSTATUS(st) == 0, "address space for the arena but not its guards: %d (1 created, 2 another error)",
		      WEXITSTATUS(st));
}
END_TEST

static void count_published(const char *point, void *ctx)
{
	if (!strcmp(point, "arena.create.published"))
		(*(int *)ctx)++;
}

/* A create whose reader claim cannot open its lock description (one descriptor left: the arena
 * file takes it) fails whole: an error, no handle, no file. */
START_TEST(test_create_without_a_descriptor_for_the_claim)
{
	char dir[] = "/var/tmp/sc-test-dir-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	const char *name = sc_test_name("nofd");
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		struct rlimit rl = { 64, 64 };
		if (setrlimit(RLIMIT_NOFILE, &rl))
			_exit(10);
		int last = -1;
		while ((last = open("/dev/null", O_RDONLY)) >= 0 && last < 63)
			;
		if (last < 0 && errno != EMFILE)
			_exit(10);
		if (last >= 0)
			close(last); /* exactly one descriptor free */
		else if (close(63))
			_exit(10);
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .dir = dir };
		struct sc_arena *a = NULL;
		int published = 0; /* the claim comes after the publication: the file's own open did not fail */
		sc_sched_set(count_published, &published);
		int rc = sc_arena_create(name, &o, &a);
		sc_sched_set(NULL, NULL);
		_exit(rc == -EMFILE && !a && published == 1 ? 0 : rc == 0 ? 1 : published != 1 ? 3 : 2);
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/stagecache.%s", dir, name);
	int left = access(path, F_OK) == 0;
	unlink(path);
	rmdir(dir);
	ck_assert(WIFEXITED(st));
	if (WEXITSTATUS(st) == 10) {
		sc_skip("a create without a descriptor for its claim: cannot set RLIMIT_NOFILE here");
		return;
	}
	ck_assert_msg(WEXITSTATUS(st) == 0, "one descriptor left: %d (1 created, 2 another error than -EMFILE, 3 failed before the claim)", WEXITSTATUS(st));
	ck_assert_msg(!left, "the arena file was left behind");
}
END_TEST

/* A hugetlbfs mount whose /proc/mounts line is longer than the 4 KiB read of it (a mount point of
 * 4 070 bytes), so that its options are cut off, is still handled: listing and creating work. */
static int test_hugetlbfs_mount_with_a_long_path_body(const char *dir, void *ctx)
{
	(void)ctx;
	char mnt[PATH_MAX];
	if (mount("tmpfs", dir, "tmpfs", 0, "size=1m")) /* the directories go with the namespace */
		return 11;
	int n = snprintf(mnt, sizeof(mnt), "%s", dir);
	while (n < 4070 - 251) {
		mnt[n] = '/';
		memset(mnt + n + 1, 'm', 250);
		n += 251;
		mnt[n] = 0;
		if (mkdir(mnt, 0700))
			return 11;
	}
	mnt[n] = '/';
	memset(mnt + n + 1, 'm', (size_t)(4070 - n - 1));
	mnt[4070] = 0;
	if (mkdir(mnt, 0700) || mount("none", mnt, "hugetlbfs", 0, "pagesize=2M"))
		return 11;
	if (sc_arena_list(NULL, NULL, NULL) < 0)
		return 12;
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
	const char *name = sc_test_name("lmnt");
	struct sc_arena *a;
	if (sc_arena_create(name, &o, &a))
		return 13;
	sc_arena_close(a);
	return sc_arena_destroy(NULL, name) ? 14 : 0;
}

START_TEST(test_hugetlbfs_mount_with_a_long_path)
{
	mount_ns_case("a hugetlbfs mount with a long path", test_hugetlbfs_mount_with_a_long_path_body,
		      "hugetlbfs cannot be mounted here", 0, NULL, "12 list, 13 create, 14 destroy");
}
END_TEST

/* A file mapped below the arena under a path longer than any fixed line buffer, renamed so that
 * its path's tail reads like a header line of the arena's mapping where a 512-byte buffer would
 * cut the line: the arena's backing is still measured from its own mapping. */
static int test_backing_beside_a_mapping_with_a_long_path_body(const char *top, void *ctx)
{
	(void)ctx;
	if (!hugetlbfs_mounted() || hugepages_free() < 8 || mount("tmpfs", top, "tmpfs", 0, "size=1m"))
		return 11; /* (the tree below goes with the namespace) */
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_REQUIRE };
	const char *name = sc_test_name("lpath");
	struct sc_arena *a;
	if (sc_arena_create(name, &o, &a))
		return 11;
	uint8_t *base = a->shm->base;
	char dir[PATH_MAX], path[PATH_MAX], renamed[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", top);
	for (int i = 0; i < 2; i++) {
		size_t n = strlen(dir);
		dir[n] = '/';
		memset(dir + n + 1, 'd', 150);
		dir[n + 151] = 0;
		if (mkdir(dir, 0700))
			return 12;
	}
	snprintf(path, sizeof(path), "%s/x", dir);
	int fd = open(path, O_CREAT | O_RDWR | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, 4096))
		return 12;
	void *m = MAP_FAILED;
	for (int k = 1; k <= 64 && m == MAP_FAILED; k++)
		m = mmap(base - (size_t)k * (16u << 20), 4096, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
	if (m == MAP_FAILED)
		return 13;
	/* where the path starts in the mapping's header line */
	FILE *f = fopen("/proc/self/smaps", "re");
	char *line = NULL, head[32];
	size_t cap = 0;
	long at = -1;
	snprintf(head, sizeof(head), "%lx-", (unsigned long)(uintptr_t)m);
	while (f && at < 0 && getline(&line, &cap, f) > 0)
		if (!strncmp(line, head, strlen(head)) && strstr(line, dir))
			at = strstr(line, dir) - line;
	free(line);
	if (f)
		fclose(f);
	long fill = 511 - at - (long)strlen(dir) - 1; /* a 512-byte buffer cuts the line after 511 bytes */
	if (at < 0 || fill < 1 || fill > 200)
		return 14;
	char forged[64];
	snprintf(forged, sizeof(forged), "%lx-%lx z", (unsigned long)(uintptr_t)base, (unsigned long)(uintptr_t)(base + 4096));
	int n = snprintf(renamed, sizeof(renamed), "%s/", dir);
	memset(renamed + n, 'f', (size_t)fill);
	snprintf(renamed + n + fill, sizeof(renamed) - (size_t)(n + fill), "%s", forged);
	if (rename(path, renamed))
		return 12;
	uint64_t ps = 0;
	int b = shm_measure_backing(base, &ps);
	munmap(m, 4096);
	close(fd);
	sc_arena_close(a);
	sc_arena_destroy(NULL, name);
	return b == SC_BACKING_HUGETLBFS_2M && ps == 2u << 20 ? 0 : 15;
}

START_TEST(test_backing_beside_a_mapping_with_a_long_path)
{
	mount_ns_case("backing beside a long mapped path", test_backing_beside_a_mapping_with_a_long_path_body,
		      "no hugetlbfs mount with 8 free 2 MiB pages, or no tmpfs", 0, NULL,
		      "12 the file, 13 no address below the arena, 14 the smaps line's layout, 15 another backing than "
		      "hugetlbfs-2M");
}
END_TEST

/* sc_arena_list's callback: the names listed from one directory, and every call */
struct listed {
	const char *dir;
	char names[8][80];
	int n, all;
};

static void list_cb(const char *dir, const char *name, void *ctx)
{
	struct listed *l = ctx;
	l->all++;
	if (strcmp(dir, l->dir) == 0 && l->n < 8)
		snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(x, y);
}

static const char *list_sorted(struct listed *l)
{
	static char out[700];
	qsort(l->names, (size_t)l->n, sizeof(l->names[0]), cmp_str);
	out[0] = 0;
	for (int i = 0; i < l->n; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), " %s", l->names[i]);
	return out;
}

/* Remove @dir and the plain files in it. */
static int remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *e;
	char f[PATH_MAX];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(f, sizeof(f), "%s/%s", dir, e->d_name);
			unlink(f);
		}
	closedir(d);
	return rmdir(dir);
}

START_TEST(test_explicit_dir_and_list)
{
	char dir[] = "/dev/shm/sc-test-dir-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sc_arena_opts o = { .size_bytes = 16 << 20, .dir = dir };
	const char *name = sc_test_name("dir");
	struct sc_arena *a, *b;
	ck_assert_int_eq(sc_arena_create(name, &o, &a), 0);
	ck_assert_int_eq(sc_arena_open(name, &b), -ENOENT); /* not in the known places */
	ck_assert_int_eq(sc_arena_open_dir(dir, name, &b), 0);
	sc_arena_close(b);
	ck_assert_int_ge(sc_arena_list(dir, NULL, NULL), 1);
	sc_arena_close(a);
	/* beside it: names the list must skip, and two more it must give (the list reads only names) */
	static const char *const junk[] = { "stagecache.", "stagecache..", "stagecache.a b", "stagecache.é",
					    "stagecachex.y", "Stagecache.z", "other", "stagecache" };
	char f[PATH_MAX];
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		snprintf(f, sizeof(f), "%s/%s", dir, junk[i]);
		ck_assert_int_eq(close(creat(f, 0600)), 0);
	}
	snprintf(f, sizeof(f), "%s/stagecache.Q", dir);
	ck_assert_int_eq(close(creat(f, 0600)), 0);
	snprintf(f, sizeof(f), "%s/stagecache.%s.x", dir, name);
	ck_assert_int_eq(close(creat(f, 0600)), 0);
	struct listed l = { .dir = dir };
	int n = sc_arena_list(dir, list_cb, &l);
	ck_assert_int_eq(n, l.all); /* the count is the callbacks' */
	char want[160];
	snprintf(want, sizeof(want), " Q %s %s.x", name, name); /* sorted */
	ck_assert_msg(strcmp(list_sorted(&l), want) == 0, "listed from %s: '%s', want '%s'", dir, list_sorted(&l), want);
	ck_assert_int_eq(sc_arena_destroy(dir, name), 0);
	ck_assert_int_eq(remove_dir(dir), 0);
}
END_TEST


START_TEST(regression_header_rewritten_after_attach)
{
	/* another process rewrites the shared header after we attached: we keep using the copy we
	 * validated, so nothing moves (a reader-table walk used to run off the region and crash) */
	const char *name;
	struct sc_arena *a = sc_test_arena("rewrite", 16 << 20, &name);
	struct shm_header *h = a->shm->hdr;
	h->reader_slots = 0x7fffffff;
	h->regions[SHM_REGION_READERS].off = a->shm->size * 4;
	h->regions[SHM_REGION_RINGS].size = a->shm->size * 4;
	ck_assert_uint_eq(shm_epoch_min_active(a->shm), UINT64_MAX);
	shm_epoch_enter(a->shm);
	shm_epoch_exit(a->shm);
	struct sc_arena_info in;
	ck_assert_int_eq(sc_arena_info(a, &in), 0);
	ck_assert_uint_eq(in.reader_slots, 256);
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(a, 0, NULL, NULL, &r), 1); /* the shared header is reported */
	/* a new attach refuses the rewritten header */
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), -EBADMSG);
	/* repair rewrites it from the copy this handle validated: new opens work again */
	ck_assert_int_eq(sc_arena_fsck(a, SC_FSCK_REPAIR, NULL, NULL, &r), 0);
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* A header with more reader slots than a token can name (65 536: slot 65 536's token would name
 * slot 0) is refused, even when its regions are laid out consistently for them; the same header
 * with the largest count passes. */
START_TEST(header_reader_slots_beyond_the_maximum_is_refused)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("rsm", 16 << 20, &name);
	static struct shm_header copy;
	struct shm_header *h = &copy;
	for (uint32_t slots = SHM_READER_SLOTS_MAX; slots <= SHM_READER_SLOTS_MAX + 1; slots++) {
		memcpy(h, a->shm->hdr, sizeof(*h));
		uint64_t old = h->regions[SHM_REGION_READERS].size;
		uint64_t want = ((uint64_t)slots * SHM_READER_SLOT_BYTES + 4095) & ~4095ull;
		uint64_t delta = want - old;
		h->reader_slots = slots;
		h->regions[SHM_REGION_READERS].size = want;
		for (int i = SHM_REGION_READERS + 1; i < SHM_REGION_COUNT; i++)
			h->regions[i].off += delta;
		h->total_bytes += delta;
		h->header_check = shm_header_checksum(h);
		ck_assert_int_eq(shm_header_check(h, h->total_bytes), slots > SHM_READER_SLOTS_MAX ? -EBADMSG : 0);
	}
	sc_test_arena_destroy(a, name);
}
END_TEST

START_TEST(header_slots_per_user_beyond_the_slots_is_refused)
{
	/* a header whose limit per user exceeds its reader slots is not one create writes: an open
	 * refuses it (the field lies outside the header's checksum, so this check is its only guard),
	 * and once it is put back, opens work again */
	const char *name;
	struct sc_arena *a = sc_test_arena("spu", 16 << 20, &name), *b;
	struct shm_header *h = a->shm->hdr;
	uint32_t keep = h->slots_per_user;
	h->slots_per_user = h->reader_slots + 1;
	h->header_check = shm_header_checksum(h);
	ck_assert_int_eq(sc_arena_open(name, &b), -EBADMSG);
	h->slots_per_user = keep;
	h->header_check = shm_header_checksum(h);
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* Defect 3: `mkfifo /dev/shm/stagecache.NAME; stagecache destroy NAME` hung (any
 * user can plant a FIFO). Every open of an arena file refuses what is not a regular file without
 * blocking; a child runs the calls under an alarm so that a hang fails the test. */
START_TEST(regression_planted_fifo_never_blocks)
{
	const char *name = sc_test_name("fifo");
	char path[128];
	shm_path(path, sizeof(path), name);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(5);
		struct sc_arena *b;
		uint32_t v;
		int ok = sc_arena_destroy(NULL, name) == -EBADMSG && sc_arena_open(name, &b) == -EBADMSG &&
			 sc_arena_file_version(NULL, name, &v) == -EBADMSG;
		struct sc_arena_opts o = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF };
		ok = ok && sc_arena_create(name, &o, &b) == -EEXIST;
		_exit(ok ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert_msg(WIFEXITED(status), "an open of a planted FIFO blocked (killed by signal %d)",
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode)); /* left untouched */
	unlink(path);
}
END_TEST

/* Planting: anyone can create /dev/shm/stagecache.NAME first. A world-writable arena file, or one
 * another unprivileged user owns, is refused unless the caller says whom to trust; a symlink is
 * never followed. */
START_TEST(planted_arena_files_are_refused)
{
	const char *name;
	char path[128];
	name = make_closed_arena("plant", path, sizeof(path));
	struct sc_arena *b;
	ck_assert_int_eq(chmod(path, 0666), 0);
	ck_assert_int_eq(sc_arena_open(name, &b), -EPERM);
	struct sc_arena_open_opts any = { .flags = SC_ARENA_OPEN_ANY_OWNER };
	ck_assert_int_eq(sc_arena_open_with(name, &any, &b), -EPERM); /* world-writable: never */
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	sc_arena_close(b);
	struct sc_arena_file fi;
	ck_assert_int_eq(sc_arena_file_stat(NULL, name, &fi), 0);
	ck_assert(S_ISREG(fi.mode));
	ck_assert_str_eq(fi.path, path);
	/* a symlink to a good arena is refused, and destroy leaves both alone */
	const char *ln = sc_test_name("link");
	char lpath[128];
	shm_path(lpath, sizeof(lpath), ln);
	ck_assert_int_eq(symlink(path, lpath), 0);
	ck_assert_int_eq(sc_arena_open(ln, &b), -EBADMSG);
	ck_assert_int_eq(sc_arena_destroy(NULL, ln), -EBADMSG);
	ck_assert_int_eq(sc_arena_file_stat(NULL, ln, &fi), 0);
	ck_assert(S_ISLNK(fi.mode));
	unlink(lpath);
	struct sc_arena_opts bad = { .size_bytes = 16 << 20, .huge = SC_HUGE_OFF, .mode = 0666 };
	ck_assert_int_eq(sc_arena_create(sc_test_name("ww"), &bad, &b), -EINVAL);
	if (!sc_test_is_root()) {
		sc_skip("planting by another user: needs root to chown");
	} else {
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		ck_assert_int_eq(sc_arena_open(name, &b), -EPERM);
		struct sc_arena_open_opts trust = { .owner_uid = 65534 };
		ck_assert_int_eq(sc_arena_open_with(name, &trust, &b), 0);
		sc_arena_close(b);
		ck_assert_int_eq(sc_arena_open_with(name, &any, &b), 0);
		sc_arena_close(b);
		struct sc_arena_open_opts other = { .owner_uid = 1234 };
		ck_assert_int_eq(sc_arena_open_with(name, &other, &b), -EPERM);
		struct sc_arena_open_opts flags = { .flags = 0x80 };
		ck_assert_int_eq(sc_arena_open_with(name, &flags, &b), -EINVAL);
	}
	ck_assert_int_eq(sc_arena_destroy(NULL, name), 0);
}
END_TEST

/* Defect 12: a non-root user could not create an arena with the defaults: the
 * hugetlbfs mount is root's 0755, and the fallback to /dev/shm happened only on a shortage. */
START_TEST(regression_nonroot_create_falls_back)
{
	if (!sc_test_is_root()) {
		sc_skip("needs root to become another user");
		return;
	}
	const char *name = sc_test_name("nonroot");
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(3);
		/* only meaningful where the hugetlbfs mount is not writable by this user */
		if (access("/dev/hugepages", W_OK) == 0)
			_exit(4);
		struct sc_arena *a;
		struct sc_arena_opts o = { .size_bytes = 16 << 20 };
		int rc = sc_arena_create(name, &o, &a);
		struct sc_arena_info in;
		int ok = rc == 0 && sc_arena_info(a, &in) == 0 && in.backing != SC_BACKING_HUGETLBFS_2M &&
			 !strncmp(in.path, "/dev/shm/", 9);
		if (rc == 0) {
			struct sc_arena *b; /* a file of one's own is trusted: another handle opens it */
			int orc = sc_arena_open(name, &b);
			ok = ok && orc == 0;
			if (orc == 0)
				sc_arena_close(b);
			sc_arena_close(a);
			sc_arena_destroy(NULL, name);
		}
		o.huge = SC_HUGE_REQUIRE; /* no fallback asked for: the permission error is the answer */
		int rc2 = sc_arena_create(name, &o, &a);
		ok = ok && (rc2 == -EACCES || rc2 == -ENODEV);
		_exit(ok ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert(WIFEXITED(status));
	if (WEXITSTATUS(status) == 4) {
		sc_skip("the hugetlbfs mount is writable by nobody here: nothing to fall back from");
		return;
	}
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/* In a child: touch the byte at @p (read, or write when @write); exits 0 if it did not fault. */
static int touch_faults(volatile uint8_t *p, int write)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (write)
			*p = 1;
		else
			(void)*p;
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
}

/* The test build guards every arena mapping (created or opened, 4 KiB pages or huge) with a
 * PROT_NONE page on each side: a write one byte past the heap's end faults at once, however large
 * the arena, instead of landing in a neighbour mapping (or nowhere anyone checks). */
START_TEST(test_test_arenas_are_guarded)
{
	const char *name;
	struct sc_arena *a = sc_test_arena("guard", 8 << 20, &name);
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	struct sc_arena *h[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		volatile uint8_t *base = h[i]->shm->base;
		uint64_t size = h[i]->shm->size, heap_bytes;
		uint8_t *heap = shm_region(h[i]->shm, SHM_REGION_HEAP, &heap_bytes);
		ck_assert_ptr_eq(heap + heap_bytes, (uint8_t *)base + size); /* the heap ends the arena */
		ck_assert_int_eq(touch_faults(base + size - 1, 1), 0);
		ck_assert_int_eq(touch_faults(base, 0), 0);
		ck_assert_msg(touch_faults(base + size, 1), "a write just past the arena did not fault");
		ck_assert_msg(touch_faults(base + size + 7, 0), "a read past the arena did not fault");
		ck_assert_msg(touch_faults(base - 1, 0), "a read before the arena did not fault");
	}
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The smallest index there is: one entry per shard (16). It works, admits and serves. */
START_TEST(test_smallest_index_works)
{
	struct sc_arena_opts o = { .size_bytes = 8 << 20, .huge = SC_HUGE_OFF, .index_entries = 16 };
	const char *name;
	struct sc_arena *a = sc_test_arena_opts("idx16", &o, &name);
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(a, "m", "s", &st), 0);
	static uint8_t buf[1000];
	memset(buf, 9, sizeof(buf));
	int32_t t[2] = { 1, 2 };
	struct sc_payload p = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	ck_assert_int_eq(sc_l2_admit(st, "i", t, 2, sc_digest(buf, sizeof(buf)), &p, SC_ORIGIN_DIRECT), 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "i", t, 2, NULL, &l), 0);
	sc_lease_release(&l);
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0);
	struct sc_fsck_report r;
	ck_assert_int_eq(sc_arena_fsck(b, 0, NULL, NULL, &r), 0);
	sc_arena_close(b);
	sc_stage_close(st);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* The most index entries an arena may have (SHM_INDEX_MAX_ENTRIES, 2^24: an entry's number fits a
 * heap tag): the layout planner, the index's formatting and every opener's view accept exactly that
 * many (one more is refused by the planner: test_layout_plan_refuses_bad_parameters). The arena's
 * file is ~3.6 GiB of /dev/shm, allocated at creation (the index and eviction queues of 2^24
 * entries); formatting writes every index entry (2 GiB); without room the case prints SKIP. */
START_TEST(test_largest_index_works)
{
	struct shm_region regions[SHM_REGION_MAX];
	struct shm_params p = { .total_bytes = 64ull << 30, .index_entries = SHM_INDEX_MAX_ENTRIES };
	ck_assert_int_eq(shm_layout_plan(&p, regions), 0);
	struct sc_arena_opts o = { .size_bytes = regions[SHM_REGION_HEAP].off + (16u << 20), .huge = SC_HUGE_OFF,
				   .index_entries = SHM_INDEX_MAX_ENTRIES };
	const char *name = sc_test_name("idxmax");
	struct sc_arena *a;
	int rc = sc_arena_create(name, &o, &a);
	if (rc == -ENOMEM || rc == -ENOSPC) {
		printf("SKIP: test_largest_index_works: no room for a %llu MiB arena in /dev/shm (%s)\n",
		       (unsigned long long)(o.size_bytes >> 20), sc_strerror(rc));
		return;
	}
	ck_assert_msg(rc == 0, "create %s: %s", name, sc_strerror(rc));
	struct sc_arena_info info;
	ck_assert_int_eq(sc_arena_info(a, &info), 0);
	ck_assert_uint_eq(info.index_entries, SHM_INDEX_MAX_ENTRIES);
	struct sc_arena *b;
	ck_assert_int_eq(sc_arena_open(name, &b), 0); /* a second opener views the same index */
	struct sc_stage *st;
	ck_assert_int_eq(sc_stage_open(b, "m", "s", &st), 0);
	static uint8_t buf[1000];
	memset(buf, 7, sizeof(buf));
	int32_t t[2] = { 3, 4 };
	struct sc_payload pl = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { buf }, .sec_len = { sizeof(buf) } };
	ck_assert_int_eq(sc_l2_admit(st, "i", t, 2, sc_digest(buf, sizeof(buf)), &pl, SC_ORIGIN_DIRECT), 0);
	struct sc_lease l;
	ck_assert_int_eq(sc_l2_get(st, "i", t, 2, NULL, &l), 0);
	sc_lease_release(&l);
	sc_stage_close(st);
	sc_arena_close(b);
	sc_test_arena_destroy(a, name);
}
END_TEST

/* shm/ does not trust its caller: the layout planner itself refuses what no arena may have
 * (segment sizes that are not a power of two in range, too many entries, slots or rings), not only
 * the public create that checks first. */
START_TEST(test_layout_plan_refuses_bad_parameters)
{
	struct shm_region regions[SHM_REGION_MAX];
	struct shm_params ok = { .total_bytes = 16u << 20 };
	struct shm_params p = ok;
	ck_assert_int_eq(shm_layout_plan(&p, regions), 0);
	const uint32_t bad_seg[] = { 3, 4096, 32u << 10, (1u << 20) + 1, 1u << 31 };
	for (unsigned i = 0; i < sizeof(bad_seg) / sizeof(bad_seg[0]); i++) {
		p = ok;
		p.seg_bytes = bad_seg[i];
		ck_assert_msg(shm_layout_plan(&p, regions) == -EINVAL, "segment size %u accepted", bad_seg[i]);
	}
	p = ok;
	p.seg_bytes = 1u << 20;
	ck_assert_int_eq(shm_layout_plan(&p, regions), 0);
	p = ok;
	p.index_entries = SHM_INDEX_MAX_ENTRIES + 1;
	ck_assert_int_eq(shm_layout_plan(&p, regions), -EINVAL);
	p = ok;
	p.reader_slots = SHM_READER_SLOTS_MAX + 1;
	ck_assert_int_eq(shm_layout_plan(&p, regions), -EINVAL);
	p = ok;
	p.ring_bytes = 3000;
	ck_assert_int_eq(shm_layout_plan(&p, regions), -EINVAL);
	p = ok;
	p.l3ix_entries = SHM_L3IX_MAX_ENTRIES + 1;
	ck_assert_int_eq(shm_layout_plan(&p, regions), -EINVAL);
	p = ok;
	p.arena_flags = SHM_ARENA_FLAGS_MASK + 1; /* a flag no layout knows */
	ck_assert_int_eq(shm_layout_plan(&p, regions), -EINVAL);
	p = ok;
	p.arena_flags = SHM_ARENA_FLAGS_MASK;
	ck_assert_int_eq(shm_layout_plan(&p, regions), 0);
}
END_TEST

/* ...and accepts everything up to those limits: each largest (and smallest) value alone on a
 * large arena, the smallest heap an arena may have, and a plan writes no region past the table. */
START_TEST(test_layout_plan_accepts_every_limit)
{
	struct shm_region regions[SHM_REGION_MAX + 1];
	const struct shm_params big = { .total_bytes = 1ull << 42, .index_entries = 4096, .l3ix_entries = 4096 };
	struct shm_params p;
	struct {
		const char *what;
		uint32_t *field, at, past;
	} lim[] = {
		{ "index entries", &p.index_entries, SHM_INDEX_MAX_ENTRIES, SHM_INDEX_MAX_ENTRIES + 1 },
		{ "rings", &p.ring_count, SHM_RING_COUNT_MAX, SHM_RING_COUNT_MAX + 1 },
		{ "ring bytes", &p.ring_bytes, SHM_RING_BYTES_MAX, SHM_RING_BYTES_MAX << 1 },
		{ "ring bytes", &p.ring_bytes, SHM_RING_BYTES_MIN, SHM_RING_BYTES_MIN >> 1 },
		{ "observations", &p.obs_entries, SHM_OBS_MAX_ENTRIES, SHM_OBS_MAX_ENTRIES + 1 },
		{ "reader slots", &p.reader_slots, SHM_READER_SLOTS_MAX, SHM_READER_SLOTS_MAX + 1 },
		{ "l3 index entries", &p.l3ix_entries, SHM_L3IX_MAX_ENTRIES, SHM_L3IX_MAX_ENTRIES + 1 },
		{ "segment bytes", &p.seg_bytes, SHM_SEG_MAX_BYTES, SHM_SEG_MAX_BYTES << 1 },
		{ "segment bytes", &p.seg_bytes, SHM_SEG_MIN_BYTES, SHM_SEG_MIN_BYTES >> 1 },
	};
	for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
		p = big;
		*lim[i].field = lim[i].at;
		ck_assert_msg(shm_layout_plan(&p, regions) == 0, "%s %u refused", lim[i].what, lim[i].at);
		p = big;
		*lim[i].field = lim[i].past;
		ck_assert_msg(shm_layout_plan(&p, regions) == -EINVAL, "%s %u accepted", lim[i].what, lim[i].past);
	}
	/* the smallest arena: a 2 MiB heap after the regions, not a page less */
	p = big;
	ck_assert_int_eq(shm_layout_plan(&p, regions), 0);
	uint64_t heap_off = regions[SHM_REGION_HEAP].off;
	p = big;
	p.total_bytes = heap_off + (2u << 20);
	ck_assert_int_eq(shm_layout_plan(&p, regions), 0);
	ck_assert_uint_eq(regions[SHM_REGION_HEAP].off, heap_off);
	ck_assert_uint_eq(regions[SHM_REGION_HEAP].size, 2u << 20);
	p = big;
	p.total_bytes = heap_off + (2u << 20) - 4096;
	ck_assert_int_eq(shm_layout_plan(&p, regions), -EINVAL);
	/* the table has SHM_REGION_MAX slots: the word after it is the caller's */
	memset(&regions[SHM_REGION_MAX], 0x5a, sizeof(regions[0]));
	p = big;
	ck_assert_int_eq(shm_layout_plan(&p, regions), 0);
	ck_assert_uint_eq(regions[SHM_REGION_MAX].off, 0x5a5a5a5a5a5a5a5aull);
	ck_assert_uint_eq(regions[SHM_REGION_MAX].size, 0x5a5a5a5a5a5a5a5aull);
}
END_TEST

/* The planner wastes nothing it need not: the regions follow one another, each rounded to a page
 * only; the segment table starts on the first page after the eviction queues, even when the
 * queues end exactly on a page; the heap starts on the first 2 MiB boundary after the regions. */
START_TEST(test_layout_plan_rounds_only_to_the_next_boundary)
{
	uint32_t exact = 0; /* an index size whose queues end exactly on a page */
	for (uint32_t n = 4096; n < (1u << 20) && !exact; n++)
		if (shm_evq_bytes(n) % 4096 == 0)
			exact = n;
	ck_assert_uint_ne(exact, 0);
	const uint32_t entries[] = { 0, 4096, exact, exact + 1 };
	for (size_t k = 0; k < sizeof(entries) / sizeof(entries[0]); k++) {
		struct shm_region r[SHM_REGION_MAX];
		struct shm_params p = { .total_bytes = 256u << 20, .seg_bytes = 1u << 20, .index_entries = entries[k] };
		ck_assert_int_eq(shm_layout_plan(&p, r), 0);
		uint64_t end = SHM_HEADER_BYTES;
		for (int i = 0; i < SHM_REGION_HEAP; i++) {
			ck_assert_msg(r[i].off == end, "region %d does not start where the one before ends", i);
			end += r[i].size;
		}
		uint64_t q = shm_evq_bytes(p.index_entries);
		ck_assert_uint_eq(r[SHM_REGION_POLICY].size, shm_page_up(shm_page_up(q) + shm_seg_table_bytes(p.seg_slots)));
		ck_assert_uint_eq(r[SHM_REGION_HEAP].off % SHM_HUGE_PAGE_BYTES, 0);
		ck_assert_uint_ge(r[SHM_REGION_HEAP].off, end);
		ck_assert_uint_lt(r[SHM_REGION_HEAP].off - end, SHM_HUGE_PAGE_BYTES);
		ck_assert_uint_eq(r[SHM_REGION_HEAP].off + r[SHM_REGION_HEAP].size, p.total_bytes);
	}
}
END_TEST

Suite *arena_suite(void)
{
	Suite *s = suite_create("arena");
	TCase *tc = tcase_create("arena");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_create_open_close_destroy);
	tcase_add_test(tc, test_bad_names);
	tcase_add_test(tc, test_name_characters);
	tcase_add_test(tc, test_bad_sizes);
	tcase_add_test(tc, test_exists);
	tcase_add_test(tc, test_not_an_arena);
	tcase_add_test(tc, test_layout_version_mismatch);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_writers_refuse_once_the_file_was_cut);
	tcase_add_test(tc, test_corrupted_header);
	tcase_add_test(tc, test_header_check_limits);
	tcase_add_test(tc, test_header_check_refuses_each_field_alone);
	tcase_add_test(tc, test_hostile_region_table);
	tcase_add_test(tc, test_half_built_waits_then_eagain);
	tcase_add_test(tc, test_permissions);
	tcase_add_test(tc, test_create_race);
	tcase_add_test(tc, test_child_sees_parent_writes);
	tcase_add_test(tc, test_killed_reader_slot_reclaimed);
	tcase_add_test(tc, test_live_pid_without_lock_is_dead);
	tcase_add_test(tc, test_reader_table_full);
	tcase_add_test(tc, test_epochs);
	tcase_add_test(tc, regression_header_rewritten_after_attach);
	tcase_add_test(tc, header_slots_per_user_beyond_the_slots_is_refused);
	tcase_add_test(tc, header_reader_slots_beyond_the_maximum_is_refused);
	tcase_add_test(tc, regression_planted_fifo_never_blocks);
	tcase_add_test(tc, planted_arena_files_are_refused);
	tcase_add_test(tc, regression_nonroot_create_falls_back);
	tcase_add_test(tc, test_huge_require);
	tcase_add_test(tc, test_hugetlbfs_mount_chosen);
	tcase_add_test(tc, test_huge_require_shortage);
	tcase_add_test(tc, huge_create_under_a_storm_of_signals);
	tcase_add_test(tc, test_huge_off);
	tcase_add_test(tc, test_huge_modes_on_an_advise_tmpfs);
	tcase_add_test(tc, test_tmpfs_without_room);
	tcase_add_test(tc, test_backing_measured_at_the_edges_of_a_mapping);
	tcase_add_test(tc, test_forked_child_closes_a_lock_descriptor_numbered_0);
	tcase_add_test(tc, test_io_pins_find_the_handle_that_maps_an_address);
	tcase_add_test(tc, test_path_of_exactly_path_max_bytes);
	tcase_add_test(tc, test_group_0_given_literally);
	tcase_add_test(tc, test_directory_without_fallocate);
	tcase_add_test(tc, test_failed_create_closes_descriptor_0);
	tcase_add_test(tc, test_huge_auto_takes_hugetlbfs);
	tcase_add_test(tc, test_shm_create_refuses_bad_arguments);
	tcase_add_test(tc, test_no_hugetlbfs_mount);
	tcase_add_test(tc, test_unsearchable_directory_is_not_absence);
	tcase_add_test(tc, test_open_between_publication_and_unlock);
	tcase_add_test(tc, test_create_with_a_stale_eintr);
	tcase_add_test(tc, test_arena_without_proc);
	tcase_add_test(tc, test_backing_beside_a_mapping_with_a_long_path);
	tcase_add_test(tc, test_hugetlbfs_mount_with_a_long_path);
	tcase_add_test(tc, test_no_address_space_for_the_guards);
	tcase_add_test(tc, test_create_without_a_descriptor_for_the_claim);
	tcase_add_test(tc, test_backing_of_a_disk_and_a_thp_tmpfs);
	tcase_add_test(tc, test_explicit_dir_and_list);
	tcase_add_test(tc, test_test_arenas_are_guarded);
	tcase_add_test(tc, test_smallest_index_works);
	tcase_add_test(tc, test_largest_index_works);
	tcase_add_test(tc, test_layout_plan_refuses_bad_parameters);
	tcase_add_test(tc, test_layout_plan_accepts_every_limit);
	tcase_add_test(tc, test_layout_plan_rounds_only_to_the_next_boundary);
	suite_add_tcase(s, tc);
	return s;
}

SC_CHECK_MAIN(arena_suite)
