/* tests/fuzz/fuzz_arena_attach.c — arena attach over a mutated header: the input is written as an
 * arena file and opened; every outcome must be an error code or a clean attach, never a crash.
 *
 * The last input byte steers:
 *   0x01 fix magic, version, header size and region count
 *   0x02 total_bytes = the input size
 *   0x04 recompute the header checksum (last)
 *   0x08 extend the file (sparse) to total_bytes when that is larger than the input and at most
 *        64 MiB: an input can then hold the header and the small regions of a real arena while the
 *        heap (2 MiB aligned, MiBs) stays implicit zeroes
 *   0x10 after a successful attach, use the arena: stage open, lookups, list, stats, ring stats
 *        and a ring poll, promotion stats, and an fsck check
 * Seeds (written when the corpus directory is empty): the first bytes (everything before the heap)
 * of a real populated 8 MiB arena, with 0x08|0x10 set, so the modules' own region validation is
 * reached, not only the header check.
 *
 * The writer locks in the file (index shards and sweep, heap, observation table) are reset to a
 * freshly formatted image before the file is written: a garbage lock word names a dead owner,
 * which the first locker takes over only after a wait slice — fuzz_arena_scribble covers that;
 * here it would only slow every run down.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stagecache.h"
#include "../../lib/internal.h"
#include "../../shm/arena.h"
#include "../../shm/index.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EXTEND (64ull << 20)
#define NPFX 4

static char name[64], path[128];
static uint8_t mutex_image[sizeof(struct shm_mutex)];
static int have_mutex_image;
static int32_t toks[NPFX][6];

/* A small real arena: its pre-heap bytes are the seed; one of its mutexes is the clean image. */
static void make_seed(const char *sd)
{
	char sname[64];
	snprintf(sname, sizeof(sname), "fuzz-attach-seed-%d", (int)getpid());
	struct sc_arena_opts o = { .size_bytes = 8u << 20, .huge = SC_HUGE_OFF, .index_entries = 256,
				   .ring_count = 2, .ring_bytes = 4096, .obs_entries = 64, .reader_slots = 8 };
	struct sc_arena *a = NULL;
	sc_arena_destroy(NULL, sname);
	if (sc_arena_create(sname, &o, &a))
		return;
	uint8_t *base = a->shm->base;
	uint64_t ixsz;
	uint8_t *ix = shm_region(a->shm, SHM_REGION_INDEX, &ixsz);
	memcpy(mutex_image, ix + offsetof(struct shm_index_hdr, sweep_mu), sizeof(mutex_image));
	have_mutex_image = 1;
	struct sc_stage *st = NULL;
	if (sd && sc_stage_open(a, "m", "s", &st) == 0) {
		static uint8_t pl[1000];
		for (int p = 0; p < NPFX; p++) {
			struct sc_payload py = { .kind = SC_PAYLOAD_FULL_STATE, .sec = { pl }, .sec_len = { 100 + p * 200u } };
			(void)sc_l2_admit(st, "", toks[p], 6, sc_digest(pl, py.sec_len[0]), &py, SC_ORIGIN_DIRECT);
		}
		struct sc_ring *r;
		if (sc_ring_open(a, &r) == 0) {
			struct sc_commit c = { .request_id = 1, .generated_token_count = 2, .token_count = 2,
					       .tokens = toks[0] };
			(void)sc_ring_try_submit(r, &c);
			sc_ring_close(r);
		}
		sc_stage_close(st);
		uint64_t osz; /* everything up to the end of the last region before the heap */
		uint8_t *obs = shm_region(a->shm, SHM_REGION_OBS, &osz);
		size_t n = (size_t)(obs - base) + osz;
		uint8_t *img = malloc(n);
		if (img) {
			memcpy(img, base, n);
			static const uint8_t steers[] = { 0x1d, 0x18, 0x19, 0x0d, 0x1f };
			for (unsigned i = 0; i < sizeof(steers); i++) {
				char nm[32];
				img[n - 1] = steers[i];
				snprintf(nm, sizeof(nm), "prefix-%02x", steers[i]);
				fuzz_seed_write(sd, nm, img, n, NULL, 0);
			}
			free(img);
		}
	}
	sc_arena_close(a);
	sc_arena_destroy(NULL, sname);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	for (int p = 0; p < NPFX; p++)
		for (int t = 0; t < 6; t++)
			toks[p][t] = p * 10 + t;
	fuzz_reap_stale("stagecache.fuzz-attach-");
	fuzz_reap_stale("stagecache.fuzz-attach-seed-");
	make_seed(fuzz_seed_dir(*argc, *argv));
	return 0;
}

/* Reset every mutex the layout puts in the file (positions from the header's regions). */
static void clean_mutexes(uint8_t *buf, uint64_t n)
{
	const struct shm_header *h = (const struct shm_header *)buf;
	uint64_t at[SHM_INDEX_SHARDS + 3];
	unsigned k = 0;
	uint64_t ix = h->regions[SHM_REGION_INDEX].off;
	at[k++] = ix + offsetof(struct shm_index_hdr, sweep_mu);
	for (unsigned s = 0; s < SHM_INDEX_SHARDS; s++)
		at[k++] = ix + offsetof(struct shm_index_hdr, shards) + s * sizeof(struct shm_index_shard);
	at[k++] = h->regions[SHM_REGION_HEAP].off + SHM_CACHELINE;
	at[k++] = h->regions[SHM_REGION_OBS].off + SHM_CACHELINE;
	for (unsigned i = 0; i < k; i++)
		if (at[i] <= n && sizeof(mutex_image) <= n - at[i])
			memcpy(buf + at[i], mutex_image, sizeof(mutex_image));
}

static int list_cb(const struct sc_l2_entry_info *e, void *ctx)
{
	(void)e, (void)ctx;
	return 0;
}

static int poll_cb(const struct sc_commit *c, void *ctx)
{
	(void)ctx;
	volatile int32_t x = c->token_count ? c->tokens[0] : 0;
	(void)x;
	return 0;
}

static void exercise(struct sc_arena *a)
{
	struct sc_stage *st = NULL;
	if (sc_stage_open(a, "m", "s", &st) == 0) {
		for (int p = 0; p < NPFX; p++) {
			struct sc_lease l;
			if (sc_l2_get(st, "", toks[p], 6, NULL, &l) == 0) {
				volatile uint8_t x = 0;
				for (int s = 0; s < 2; s++)
					for (uint64_t i = 0; i < l.sec_len[s]; i += 512)
						x ^= ((const uint8_t *)l.sec[s])[i];
				sc_lease_release(&l);
			}
			struct sc_l2_entry_info in;
			(void)sc_l2_peek(st, "", toks[p], 6, &in);
		}
		sc_stage_close(st);
	}
	(void)sc_l2_list(a, list_cb, NULL, 0);
	struct sc_l2_stats ls;
	(void)sc_l2_stats(a, NULL, &ls);
	struct sc_ring_stat rs[4];
	(void)sc_ring_stats(a, rs, 4);
	(void)sc_ring_poll(a, poll_cb, NULL, 16);
	sc_ring_consumer_close(a);
	struct sc_promote_stats ps;
	(void)sc_promote_stats(a, &ps);
	struct sc_fsck_report rep;
	(void)sc_arena_fsck(a, 0, NULL, NULL, &rep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!name[0]) {
		snprintf(name, sizeof(name), "fuzz-attach-%d", (int)getpid());
		snprintf(path, sizeof(path), "/dev/shm/stagecache.%s", name);
		if (!have_mutex_image)
			make_seed(NULL);
	}
	/* the header is checked before anything else is trusted: the pure check first */
	if (size >= sizeof(struct shm_header)) {
		struct shm_header h;
		memcpy(&h, data, sizeof(h));
		(void)shm_header_check(&h, size);
	}
	/* then a real attach of the bytes as a file (capped so the corpus stays small). Steer the
	 * mutations past the cheap checks so the deep ones are exercised: mark the header published
	 * (an unpublished one only makes attach wait), and on request fix the size and checksum. */
	static uint8_t buf[1u << 20];
	size_t n = size > sizeof(buf) ? sizeof(buf) : size;
	memcpy(buf, data, n);
	uint64_t file_bytes = n;
	uint8_t steer = n ? data[n - 1] : 0;
	if (n >= sizeof(struct shm_header)) {
		struct shm_header *h = (struct shm_header *)buf;
		atomic_store_explicit(&h->initialised, SHM_INIT_DONE, memory_order_relaxed);
		if (steer & 1) {
			h->magic = SHM_MAGIC;
			h->layout_version = SHM_LAYOUT_VERSION;
			h->header_bytes = SHM_HEADER_BYTES;
			h->region_count = SHM_REGION_COUNT;
		}
		if (steer & 2)
			h->total_bytes = n;
		if ((steer & 8) && h->total_bytes > n && h->total_bytes <= MAX_EXTEND)
			file_bytes = h->total_bytes;
		if (have_mutex_image)
			clean_mutexes(buf, n);
		if (steer & 4)
			h->header_check = shm_header_checksum(h);
	}
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0)
		return 0;
	if (write(fd, buf, n) != (ssize_t)n || (file_bytes > n && ftruncate(fd, (off_t)file_bytes))) {
		close(fd);
		return 0;
	}
	close(fd);
	struct sc_arena *a = NULL;
	int rc = sc_arena_open(name, &a);
	FUZZ_CHECK(rc <= 0 && rc > -4096);
	if (rc == 0) {
		struct sc_arena_info in;
		sc_arena_info(a, &in);
		if (steer & 0x10)
			exercise(a);
		sc_arena_close(a);
	}
	unlink(path);
	return 0;
}
