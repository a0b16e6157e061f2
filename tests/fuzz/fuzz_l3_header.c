/* tests/fuzz/fuzz_l3_header.c — the L3 object header parser, pure and through the public path.
 *
 * Input: [steer u8][hlen u16 LE][hlen bytes: the start of the 4096-byte header block (the rest of
 * the block is zero)][payload bytes]. hlen is taken modulo 4097, so the mutations work on the
 * few hundred bytes that matter instead of a 4 KiB block of zeroes, and the payload stays small.
 *
 * Per input:
 *  1. l3_hdr_parse / l3_hdr_check / l3_hdr_location straight on the block (a heap buffer of exactly
 *     L3_HDR_BLOCK bytes, so a read past it is an ASAN report), with and without a file size;
 *     an accepted header must describe a payload matching the file size and strings inside the block.
 *  2. The block + payload written as an object file in a temp L3 directory (on /dev/shm), named
 *     by the digest in the header, then the public path: sc_l3_lookup, sc_l3_fill (buffered or
 *     not) into a buffer with guard bytes, optionally sc_l3_list / sc_l3_verify and a re-open of
 *     the directory (reconciliation). Errors (and quarantine) are expected; a crash, an ASAN/UBSAN
 *     report, a write past the destination or a fill that returns 0 with bytes that do not match
 *     the stored payload are findings (they trap).
 *
 * Steering bits (so that the checks behind the checksum are reached):
 *   0x01 fix magic, version, hdr_bytes, flags, and a non-zero token count / known kind
 *   0x02 fix the sizes: payload_bytes and the sections agree with the file; desc_bytes 0 or exact
 *   0x04 set the header digest to the payload's real digest
 *   0x08 recompute the header checksum (last, over the final block)
 *   0x10 name the file by a digest other than the header's (mismatch path)
 *   0x20 stale location: after the lookup, the file is replaced by the unsteered bytes before the fill
 *   0x40 re-open the directory (sc_l3_open reconciles: quarantines bad objects)
 *   0x80 sc_l3_list and sc_l3_verify over the directory
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxh_x86dispatch.h>

#include "stagecache.h"
#include "../../lib/l3/l3.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK FUZZ_CHECK

#define MAX_PAYLOAD (64u << 10)
#define GUARD 256u

static char dir[128], qdir[160], odir[160];
static struct sc_l3 *l3;

static void rm_tree(const char *path)
{
	DIR *d = opendir(path);
	if (!d) {
		unlink(path);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char p[512];
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (e->d_type == DT_DIR)
			rm_tree(p);
		else
			unlink(p);
	}
	closedir(d);
	rmdir(path);
}

/* Empty a directory's files (the quarantine) without removing it. */
static void rm_files(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' || e->d_name[1] == 't') /* keep . and .., drop .tmp-* too */
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static void cleanup(void)
{
	sc_l3_close(l3);
	l3 = NULL;
	if (dir[0])
		rm_tree(dir);
}

static void open_l3(void)
{
	struct sc_l3_opts o = { 0 };
	o.queue_depth = 4;
	sc_l3_close(l3);
	l3 = NULL;
	int rc = sc_l3_open(dir, &o, &l3);
	CHECK(rc == 0); /* an empty temp directory must open */
}

static void init(void)
{
	snprintf(dir, sizeof(dir), "/dev/shm/fuzz-l3-%d", (int)getpid());
	snprintf(qdir, sizeof(qdir), "%s/quarantine", dir);
	snprintf(odir, sizeof(odir), "%s/objects", dir);
	rm_tree(dir);
	open_l3();
	atexit(cleanup);
}

static int write_file(const char *path, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0)
		return -1;
	int ok = write(fd, a, alen) == (ssize_t)alen && (!blen || write(fd, b, blen) == (ssize_t)blen);
	close(fd);
	return ok ? 0 : -1;
}

static int list_cb(const struct sc_l3_object_info *in, void *ctx)
{
	(void)ctx;
	/* strings are NUL-terminated inside their buffers */
	CHECK(memchr(in->ns, 0, sizeof(in->ns)) && memchr(in->model_identity, 0, sizeof(in->model_identity)) &&
	      memchr(in->state_identity, 0, sizeof(in->state_identity)));
	return 0;
}

/* The pure parser: properties of an accepted header. */
static void check_pure(const uint8_t *block, uint64_t file_bytes)
{
	struct l3_obj_hdr h;
	(void)l3_hdr_check(block);
	int rc = l3_hdr_parse(block, 0, &h);
	CHECK(rc == 0 || rc == -EBADMSG || rc == -EPROTO);
	int rf = l3_hdr_parse(block, file_bytes, &h);
	CHECK(rf == 0 || rf == -EBADMSG || rf == -EPROTO);
	CHECK(!(rf == 0 && rc != 0)); /* a size only adds a check */
	if (rc)
		return;
	l3_hdr_parse(block, 0, &h);
	CHECK(h.payload_bytes && h.payload_bytes == h.section_bytes[0] + h.section_bytes[1]);
	CHECK(h.section_bytes[0] <= L3_MAX_PAYLOAD && h.section_bytes[1] <= L3_MAX_PAYLOAD);
	CHECK(L3_HDR_FIXED + (uint64_t)h.desc_bytes + h.model_len + h.state_len + h.ns_len <= L3_HDR_BLOCK);
	CHECK(h.check == l3_hdr_check(block));
	if (rf == 0)
		CHECK(file_bytes == L3_HDR_BLOCK + h.payload_bytes);
	struct sc_location loc;
	l3_hdr_location(block, &h, &loc);
	CHECK(loc.payload_bytes == loc.sec_len[0] + loc.sec_len[1] && loc.file_bytes == L3_HDR_BLOCK + loc.payload_bytes);
	if (loc.has_kv_desc)
		CHECK(loc.kind == SC_PAYLOAD_KV_RECURRENT && sc_kv_desc_validate(&loc.kv_desc, loc.sec_len[0]) == 0);
	else
		CHECK(loc.kind != SC_PAYLOAD_KV_RECURRENT || loc.sec_len[0] == 0);
}

static void steer_header(uint8_t *block, uint8_t steer, const uint8_t *payload, size_t plen)
{
	struct l3_obj_hdr h;
	memcpy(&h, block, sizeof(h));
	if (steer & 0x01) {
		h.magic = L3_OBJ_MAGIC;
		h.version = L3_FORMAT_VERSION;
		h.hdr_bytes = L3_HDR_BLOCK;
		h.flags = 0;
		if (h.kind == 0 || h.kind > 3)
			h.kind = 1 + h.kind % 3;
		if (!h.token_count)
			h.token_count = 1;
	}
	if (steer & 0x02) {
		h.payload_bytes = plen;
		if (h.kind != SC_PAYLOAD_KV_RECURRENT) {
			h.section_bytes[0] = plen, h.section_bytes[1] = 0, h.desc_bytes = 0;
		} else {
			if (h.section_bytes[0] > plen)
				h.section_bytes[0] %= plen + 1;
			h.section_bytes[1] = plen - h.section_bytes[0];
			h.desc_bytes = h.section_bytes[0] ? (uint32_t)sizeof(struct sc_kv_desc) : 0;
			if (h.desc_bytes) {
				/* the descriptor's own size must match its section */
				struct sc_kv_desc d;
				memcpy(&d, block + L3_HDR_FIXED, sizeof(d));
				d.payload_bytes = h.section_bytes[0];
				memcpy(block + L3_HDR_FIXED, &d, sizeof(d));
			}
		}
		h.model_len %= SC_L3_STR_MAX + 1;
		h.state_len %= SC_L3_STR_MAX + 1;
		h.ns_len %= SC_L3_STR_MAX + 1;
	}
	if (steer & 0x04) {
		XXH128_hash_t d = XXH3_128bits(payload, plen);
		h.digest_lo = d.low64, h.digest_hi = d.high64;
	}
	memcpy(block, &h, sizeof(h));
	if (steer & 0x08) {
		uint64_t c = l3_hdr_check(block);
		memcpy(block + offsetof(struct l3_obj_hdr, check), &c, sizeof(c));
	}
}

/* Seeds: valid objects of each payload shape, as l3_hdr_build writes them. */
static void seed_one(const char *sd, const char *name, uint8_t steer, const struct sc_payload *pl, uint8_t fill)
{
	static uint8_t block[L3_HDR_BLOCK], in[3 + L3_HDR_BLOCK];
	uint8_t payload[512];
	int32_t toks[4] = { 1, 2, 3, 4 };
	uint64_t plen = pl->sec_len[0] + pl->sec_len[1];
	memset(payload, fill, sizeof(payload));
	for (uint64_t i = 0; i < plen; i++)
		payload[i] = (uint8_t)(fill + i * 7);
	struct sc_payload p = *pl;
	p.sec[0] = payload, p.sec[1] = payload + pl->sec_len[0];
	struct sc_l3_put_args a = { .model_identity = "model-A", .state_identity = "st", .ns = "ns1",
				    .tokens = toks, .token_count = 4, .payload = &p };
	XXH128_hash_t d = XXH3_128bits(payload, plen), pk = { 0, 0 };
	if (l3_hdr_build(block, &a, d, pk))
		return;
	size_t hlen = L3_HDR_FIXED + (pl->kv_desc ? sizeof(struct sc_kv_desc) : 0) + 7 + 2 + 3;
	in[0] = steer, in[1] = (uint8_t)hlen, in[2] = (uint8_t)(hlen >> 8);
	memcpy(in + 3, block, hlen);
	fuzz_seed_write(sd, name, in, 3 + hlen, payload, plen);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_reap_stale("fuzz-l3-");
	const char *sd = fuzz_seed_dir(*argc, *argv);
	if (!sd)
		return 0;
	struct sc_kv_desc raw = { .version = 1, .payload_bytes = 96, .token_count = 4 };
	struct sc_kv_desc iswa = { .version = 2, .payload_bytes = 96, .token_count = 4, .codec = SC_KV_CODEC_ISWA,
				   .component_count = 2 };
	iswa.components[0] = (struct sc_kv_component){ .role = SC_KV_ROLE_BASE, .token_count = 4, .payload_bytes = 64 };
	iswa.components[1] = (struct sc_kv_component){ .role = SC_KV_ROLE_SWA, .token_start = 2, .token_count = 2,
						       .payload_offset = 64, .payload_bytes = 32 };
	struct sc_payload full = { .kind = SC_PAYLOAD_FULL_STATE, .sec_len = { 100, 0 } };
	struct sc_payload rec = { .kind = SC_PAYLOAD_RECURRENT_ONLY, .sec_len = { 33, 0 } };
	struct sc_payload kvr = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec_len = { 96, 40 }, .kv_desc = &raw };
	struct sc_payload kvi = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec_len = { 96, 40 }, .kv_desc = &iswa };
	struct sc_payload kv0 = { .kind = SC_PAYLOAD_KV_RECURRENT, .sec_len = { 0, 40 } };
	seed_one(sd, "full", 0x00, &full, 1);
	seed_one(sd, "full-list", 0x80, &full, 2);
	seed_one(sd, "full-stale", 0x20, &full, 3);
	seed_one(sd, "full-reopen", 0x40, &full, 4);
	seed_one(sd, "rec", 0x00, &rec, 5);
	seed_one(sd, "kv-raw", 0x00, &kvr, 6);
	seed_one(sd, "kv-iswa", 0x00, &kvi, 7);
	seed_one(sd, "kv-iswa-steer", 0x0f, &kvi, 8);
	seed_one(sd, "kv-empty", 0x00, &kv0, 9);
	seed_one(sd, "kv-mismatch", 0x10, &kvr, 10);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0])
		init();
	if (size < 3)
		return 0;
	uint8_t steer = data[0];
	size_t hlen = (size_t)(data[1] | data[2] << 8) % (L3_HDR_BLOCK + 1);
	data += 3, size -= 3;
	if (hlen > size)
		hlen = size;
	const uint8_t *payload = data + hlen;
	size_t plen = size - hlen;
	if (plen > MAX_PAYLOAD)
		plen = MAX_PAYLOAD;

	/* the unsteered block, exactly L3_HDR_BLOCK bytes on the heap */
	uint8_t *raw = calloc(1, L3_HDR_BLOCK), *block = malloc(L3_HDR_BLOCK);
	CHECK(raw && block);
	memcpy(raw, data, hlen);
	check_pure(raw, L3_HDR_BLOCK + plen);
	memcpy(block, raw, L3_HDR_BLOCK);
	steer_header(block, steer, payload, plen);
	if (steer)
		check_pure(block, L3_HDR_BLOCK + plen);

	/* the object file, named by the header's digest (or not) */
	struct l3_obj_hdr h;
	memcpy(&h, block, sizeof(h));
	uint64_t lo = h.digest_lo, hi = h.digest_hi;
	if (steer & 0x10)
		lo ^= 1;
	char rel[48], sub[192], path[256];
	l3_obj_relpath(lo, hi, rel);
	snprintf(sub, sizeof(sub), "%s/%.2s", odir, rel);
	snprintf(path, sizeof(path), "%s/%s", odir, rel);
	mkdir(sub, 0700);
	/* a short input becomes a short (truncated) file: the header block itself is cut */
	size_t blen = hlen < L3_HDR_BLOCK && plen == 0 ? hlen : L3_HDR_BLOCK;
	if (write_file(path, block, blen, payload, blen == L3_HDR_BLOCK ? plen : 0))
		goto out;

	if (steer & 0x40)
		open_l3();

	struct sc_location loc;
	int rc = sc_l3_lookup(l3, (struct sc_digest){ lo, hi }, &loc);
	CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOENT);
	if (rc == 0) {
		/* the location of an accepted header describes this file */
		CHECK(loc.digest.lo == lo && loc.digest.hi == hi);
		CHECK(loc.payload_bytes == plen && loc.file_bytes == L3_HDR_BLOCK + plen);
		CHECK(loc.payload_bytes == loc.sec_len[0] + loc.sec_len[1]);
		if (steer & 0x20) /* replaced between lookup and fill */
			write_file(path, raw, blen, payload, blen == L3_HDR_BLOCK ? plen : 0);
		uint8_t *dst = malloc(loc.payload_bytes + GUARD);
		CHECK(dst);
		memset(dst + loc.payload_bytes, 0xA5, GUARD);
		int fr = sc_l3_fill(l3, &loc, dst, loc.payload_bytes, (steer & 0x02) ? SC_L3_FILL_BUFFERED : 0);
		CHECK(fr <= 0);
		for (uint32_t i = 0; i < GUARD; i++)
			CHECK(dst[loc.payload_bytes + i] == 0xA5); /* the kernel wrote past dst_bytes */
		if (fr == 0) {
			/* verified: exactly the stored bytes, and they hash to the digest */
			CHECK(memcmp(dst, payload, plen) == 0);
			XXH128_hash_t d = XXH3_128bits(dst, plen);
			CHECK(d.low64 == lo && d.high64 == hi);
		}
		free(dst);
		/* a second lookup agrees with the first unless the fill quarantined the object */
		struct sc_location loc2;
		int r2 = sc_l3_lookup(l3, (struct sc_digest){ lo, hi }, &loc2);
		CHECK(r2 == 0 || r2 == -ENOENT || r2 == -EBADMSG);
		if (fr == 0)
			CHECK(r2 == 0 && loc2.payload_bytes == loc.payload_bytes);
	}
	if (steer & 0x80) {
		int n = sc_l3_list(l3, list_cb, NULL);
		CHECK(n >= 0);
		n = sc_l3_verify(l3, list_cb, NULL);
		CHECK(n >= 0);
	}
out:
	unlink(path);
	rm_files(qdir);
	free(raw);
	free(block);
	return 0;
}
