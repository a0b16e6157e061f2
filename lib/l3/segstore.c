/*
 * lib/l3/segstore.c, lib/l3/segread.c — segmented L3 objects: a payload above one segment is stored as content-addressed
 * segment files shared by every object that contains them, and the object file holds a manifest.
 *
 * The option. DIR/segments (struct l3_segcfg) records the segment size of new puts; every process
 * and host reads it at open (sc_l3_set_segment_bytes writes it; 0 or no file: whole objects, the
 * version 1 format). An object's manifest says how it was cut, so a store whose option changed
 * reads both kinds, and readers never need the option.
 *
 * Segments. DIR/seg/<2 hex>/<32 hex>.seg holds the bytes of one segment, named by their digest
 * (unseeded XXH3-128, as L2 segments and payload digests). A segment is written once: a temp file
 * named with the writer's identity (host, pid, nonce), fsync, rename with RENAME_NOREPLACE; two
 * writers of one segment on any hosts write the same bytes, the second finds it there. Segment
 * files are never modified; they leave only by the sweep below or by quarantine.
 *
 * A put (lib/l3/put.c put_object): (1) every segment is checked (size) and touched (mtime now),
 * written where missing; (2) the manifest is written (tmp + rename); (3) every segment is touched
 * again, and written again where it is missing. A fill reads the manifest, then the segments on the
 * fill ring (lib/l3/segread.c) straight into the destination, verifies each segment's digest and the whole
 * payload's; a segment that fails is quarantined with every object naming it (their L2 mirrors and
 * index entries invalidated as for any quarantined object); a missing or short one is a miss.
 *
 * The sweep (reconciliation, eviction, the janitor; one at a time: DIR/lock, or the janitor lease
 * in shared mode, where only the janitor sweeps). At the start of a pass, time T0; the objects are
 * listed and the segments their manifests name are counted; a segment no listed manifest names is
 * removed only if (a) its mtime is older than T0 - G (G, the grace: at least L3_SEG_GRACE_NS and the
 * shared mode's visibility grace, which also covers clock skew between hosts), and (b) after it is
 * captured (renamed to .gc-<digest>.<writer>), its mtime read again is still older than T0 - G;
 * otherwise it is put back. Why a put that reuses or writes a segment S can never lose it: if the
 * pass listed the put's manifest, S is referenced. If not, the manifest became visible after the
 * pass began (after T0), and the put's step (3) touches S after that: if the touch comes before the
 * capture, S's mtime is after T0 and the re-read keeps S; if it comes after, the touch fails
 * (ENOENT) and the put writes S again. Step (1) keeps a pass from removing what a put is about to
 * name in the common case (touched within the grace), so step (3) rarely has to write anything.
 * The physical bytes of a store are its object files plus its segment files, each counted once.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../xxh.h"
#include "types.h"
#include "files.h"
#include "format.h"
#include "hosts.h"
#include "segread.h"
#include "segstore.h"
#include "write.h"
#include "../../shm/fault.h"

#define SEGCFG_MAGIC 0x0a47464333435350ull /* "PSC3CFG\n" */
#define L3_SEG_GRACE_NS (2ull * 1000000000ull)

struct l3_segcfg {
	uint64_t magic;
	uint32_t version, size;
	uint64_t segment_bytes;
	uint64_t check; /* XXH3-64 of the bytes before it */
};
_Static_assert(sizeof(struct l3_segcfg) == 32, "l3 segment option layout");


static uint64_t grace(const struct sc_l3 *l3)
{
	return l3->grace_ns > L3_SEG_GRACE_NS ? l3->grace_ns : L3_SEG_GRACE_NS;
}


/* ---- the option ---- */

static int seg_dir(struct sc_l3 *l3, int create)
{
	if (l3->sgfd >= 0)
		return 0;
	if (create) {
		int rc = l3_mkdir_at(l3, l3->dirfd, "seg");
		if (rc)
			return rc;
	}
	int fd = openat(l3->dirfd, "seg", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT && !create ? 0 : -errno;
	l3->sgfd = fd;
	return 0;
}


int l3_seg_open(struct sc_l3 *l3)
{
	struct l3_segcfg c;
	int fd = l3_open_file(l3->dirfd, "segments", O_RDONLY);
	if (fd == -ENOENT)
		return seg_dir(l3, 0);
	if (fd < 0)
		return fd;
	ssize_t n = pread(fd, &c, sizeof(c), 0);
	int rc = n < 0 ? -errno : 0;
	close(fd);
	if (!rc && (n != sizeof(c) || c.magic != SEGCFG_MAGIC || c.version != 1 || c.size != sizeof(c) ||
		    XXH3_64bits(&c, offsetof(struct l3_segcfg, check)) != c.check ||
		    (c.segment_bytes && (c.segment_bytes < L3_SEG_MIN || c.segment_bytes > L3_SEG_MAXSZ ||
					 c.segment_bytes % L3_DIO_ALIGN))))
		rc = -EBADMSG; /* a damaged option file: refused rather than guessed */
	if (rc)
		return rc;
	l3->seg_size = c.segment_bytes;
	return seg_dir(l3, l3->seg_size != 0);
}


int sc_l3_set_segment_bytes(struct sc_l3 *l3, uint64_t segment_bytes)
{
	if (!l3 || (segment_bytes && (segment_bytes < L3_SEG_MIN || segment_bytes > L3_SEG_MAXSZ ||
				      segment_bytes % L3_DIO_ALIGN)))
		return -EINVAL;
	int rc = segment_bytes ? seg_dir(l3, 1) : 0;
	if (rc)
		return rc;
	struct l3_segcfg c = { SEGCFG_MAGIC, 1, sizeof(c), segment_bytes, 0 };
	c.check = XXH3_64bits(&c, offsetof(struct l3_segcfg, check));
	struct iovec iov = { &c, sizeof(c) };
	if ((rc = l3_write_file(l3, l3->dirfd, ".", "segments", &iov, 1, 0)))
		return rc;
	l3->seg_size = segment_bytes;
	return 0;
}


int sc_l3_segment_bytes(struct sc_l3 *l3, uint64_t *segment_bytes)
{
	if (!l3 || !segment_bytes)
		return -EINVAL;
	*segment_bytes = l3->seg_size;
	return 0;
}


/* ---- the put side ---- */

/* The wire bytes [off, off+len) as at most two pieces (they may straddle the sections). */
static int wire_iov(const struct sc_payload *pl, uint64_t off, uint64_t len, struct iovec iov[2])
{
	int n = 0;
	for (int s = 0; s < 2 && len; s++) {
		if (off >= pl->sec_len[s]) {
			off -= pl->sec_len[s];
			continue;
		}
		uint64_t take = pl->sec_len[s] - off < len ? pl->sec_len[s] - off : len;
		iov[n++] = (struct iovec){ (uint8_t *)pl->sec[s] + off, (size_t)take };
		len -= take;
		off = 0;
	}
	return n;
}


int l3_seg_plan(struct sc_l3 *l3, const struct sc_payload *pl, struct l3_seg_man *m)
{
	uint64_t payload = pl->sec_len[0] + pl->sec_len[1], sz = l3->seg_size;
	uint64_t n = (payload + sz - 1) / sz;
	if (n > L3_SEG_MAX_COUNT)
		return -E2BIG;
	if (!(m->e = malloc((size_t)n * sizeof(*m->e))))
		return -ENOMEM;
	m->n = (uint32_t)n;
	XXH3_state_t hs;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = i * sz, len = payload - off < sz ? payload - off : sz;
		struct iovec iov[2];
		int k = wire_iov(pl, off, len, iov);
		XXH3_128bits_reset(&hs);
		for (int j = 0; j < k; j++)
			XXH3_128bits_update(&hs, iov[j].iov_base, iov[j].iov_len);
		XXH128_hash_t d = XXH3_128bits_digest(&hs);
		m->e[i] = (struct l3_seg_ent){ d.low64, d.high64, len };
	}
	return 0;
}


void l3_seg_hdr(uint8_t *block, const struct l3_seg_man *m, uint64_t seg_bytes)
{
	struct l3_obj_hdr h;
	memcpy(&h, block, sizeof(h));
	h.version = L3_FORMAT_SEGMENTED;
	h.flags = L3_OBJ_SEGMENTED;
	h.seg_count = m->n;
	h.seg_bytes = seg_bytes;
	h.seg_check = XXH3_64bits(m->e, (size_t)m->n * sizeof(*m->e));
	memcpy(block, &h, sizeof(h));
	uint64_t c = l3_hdr_check(block);
	memcpy(block + offsetof(struct l3_obj_hdr, check), &c, sizeof(c));
}


uint64_t l3_seg_need(struct sc_l3 *l3, const struct l3_seg_man *m)
{
	uint64_t need = L3_HDR_BLOCK + (uint64_t)m->n * sizeof(*m->e);
	for (uint32_t i = 0; i < m->n; i++) {
		char rel[48];
		struct stat sb;
		l3_seg_relpath(m->e[i].lo, m->e[i].hi, rel);
		if (l3_statat(l3->sgfd, rel, &sb) < 0 || (uint64_t)sb.st_size != m->e[i].len)
			need += m->e[i].len;
	}
	return need;
}


int l3_seg_store(struct sc_l3 *l3, const struct sc_payload *pl, const struct l3_seg_man *m, uint64_t *wrote,
		 uint64_t *wrote_bytes, int sync_found)
{
	uint64_t off = 0, synced[4] = { 0 }; /* the seg/XX directories synced by this call */
	for (uint32_t i = 0; i < m->n; off += m->e[i].len, i++) {
		const struct l3_seg_ent *e = &m->e[i];
		char rel[48], hex[33], name[40];
		struct stat sb;
		l3_seg_relpath(e->lo, e->hi, rel);
		if (l3_statat(l3->sgfd, rel, &sb) == 0) {
			/* there and whole: touched (the sweep's rule); a touch that fails finds it gone */
			if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == e->len) {
				char sub[3] = { rel[0], rel[1], 0 };
				unsigned d = (unsigned)strtoul(sub, NULL, 16) & 255;
				if (sync_found && !(synced[d / 64] >> (d % 64) & 1) && l3_name_young(l3->sgfd, sub, &sb)) {
					int rc = l3_fsync_dir_at(l3->sgfd, sub);
					if (rc)
						return rc;
					synced[d / 64] |= 1ull << (d % 64);
				}
				if (l3_touchat(l3->sgfd, rel) == 0)
					continue;
				if (errno != ENOENT)
					return -errno;
			} else {
				(void)l3_seg_move_away(l3, e->lo, e->hi); /* truncated or planted: replaced */
			}
		} else if (errno != ENOENT) {
			return -errno;
		}
		struct iovec iov[2];
		int k = wire_iov(pl, off, e->len, iov);
		l3_digest_hex(e->lo, e->hi, hex);
		snprintf(name, sizeof(name), "%s.seg", hex);
		char sub[3] = { hex[0], hex[1], 0 };
		int rc = l3_write_file(l3, l3->sgfd, sub, name, iov, k, 1);
		if (rc == -EEXIST)
			continue; /* another writer's, the same bytes (its mtime is fresh) */
		if (rc)
			return rc;
		(*wrote)++;
		*wrote_bytes += e->len;
	}
	return 0;
}


/* ---- a pass: references, the sweep ---- */

static struct l3_segref *ref_find(struct l3_segs *s, uint64_t lo, uint64_t hi, int add)
{
	if (add && (s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct l3_segref *e = calloc(cap, sizeof(*e));
		if (!e)
			return NULL;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->e[i].used)
				continue;
			size_t k = (size_t)(s->e[i].lo * 0x9e3779b97f4a7c15ull >> 7) & (cap - 1);
			while (e[k].used)
				k = (k + 1) & (cap - 1);
			e[k] = s->e[i];
		}
		free(s->e);
		s->e = e, s->cap = cap;
	}
	if (!s->cap)
		return NULL;
	size_t k = (size_t)(lo * 0x9e3779b97f4a7c15ull >> 7) & (s->cap - 1);
	for (; s->e[k].used; k = (k + 1) & (s->cap - 1))
		if (s->e[k].lo == lo && s->e[k].hi == hi)
			return &s->e[k];
	if (!add)
		return NULL;
	s->e[k] = (struct l3_segref){ .lo = lo, .hi = hi, .used = 1 };
	s->n++;
	return &s->e[k];
}


/* Note a segment file @st in the table (listing, or one a new put made since). */
static struct l3_segref *ref_seen(struct l3_segs *s, uint64_t lo, uint64_t hi, const struct stat *sb)
{
	struct l3_segref *r = ref_find(s, lo, hi, 1);
	if (r && !r->bytes) {
		r->bytes = (uint64_t)sb->st_size ? (uint64_t)sb->st_size : 1;
		r->mtime = (int64_t)shm_ts_ns(sb->st_mtim);
		s->files++;
		s->bytes += r->bytes;
	}
	return r;
}


/* Put the captured @cap back as @rel unless @rel exists again (a put wrote it: the same bytes).
 * ceph-fuse has no RENAME_NOREPLACE: link is no-replace too. */
static void put_back(int dfd, const char *cap, const char *rel)
{
	if (l3_renameat(dfd, cap, dfd, rel, RENAME_NOREPLACE) == 0)
		return;
	if (errno == EINVAL && l3_linkat(dfd, cap, dfd, rel) == 0) {
		l3_unlinkat(dfd, cap); /* linked back: the captured name goes */
		return;
	}
	if (errno == EEXIST)
		l3_unlinkat(dfd, cap); /* a put wrote it again (the same bytes): ours is a spare */
	/* any other failure (I/O, space, a signal): kept as it is; the next pass puts it back */
}


static char *gc_name(struct sc_l3 *l3, const char *hex, char *out, size_t n)
{
	snprintf(out, n, "%.2s/.gc-%s.%s", hex, hex, l3->writer);
	return out;
}


static int list_seg(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct l3_segs *s = ctx;
	uint64_t lo, hi;
	struct stat sb;
	(void)sub;
	if (!strncmp(name, ".tmp-", 5)) {
		if (l3_left_over(l3, dfd, name) && unlinkat(dfd, name, 0) == 0)
			s->stale++;
		return 0;
	}
	if (!strncmp(name, ".gc-", 4)) {
		/* a sweeper died between capture and removal: put back (the next sweep judges it) */
		char hex[33], fin[40];
		if (strlen(name) < 4 + 32 || !l3_left_over(l3, dfd, name))
			return 0;
		memcpy(hex, name + 4, 32);
		hex[32] = 0;
		snprintf(fin, sizeof(fin), "%s.seg", hex);
		if (l3_hex_digest(hex, &lo, &hi) == 0)
			put_back(dfd, name, fin);
		return 0;
	}
	if (l3_name_digest(name, ".seg", &lo, &hi) || fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(sb.st_mode))
		return 0;
	return ref_seen(s, lo, hi, &sb) ? 0 : -ENOMEM;
}


int l3_segs_begin(struct sc_l3 *l3, struct l3_segs *s)
{
	memset(s, 0, sizeof(*s));
	s->t0 = shm_realtime_ns();
	return l3->sgfd >= 0 ? l3_scan(l3, l3->sgfd, list_seg, s) : 0;
}


static void logical_add(struct l3_segs *s, uint64_t v, int delta)
{
	if (delta > 0)
		s->logical += v;
	else
		s->logical = s->logical > v ? s->logical - v : 0;
}


int l3_segs_object(struct sc_l3 *l3, struct l3_segs *s, int dfd, const char *name, uint64_t file_bytes, int delta,
		   uint64_t *freed)
{
	/* a version 2 object's body is a whole number of entries; anything else is read as whole */
	if (l3->sgfd < 0 || file_bytes < L3_HDR_BLOCK || (file_bytes - L3_HDR_BLOCK) % sizeof(struct l3_seg_ent)) {
		logical_add(s, file_bytes, delta);
		return 0;
	}
	int fd = l3_open_file(dfd, name, O_RDONLY);
	if (fd < 0)
		return fd;
	struct l3_obj_hdr h;
	struct l3_seg_ent *e;
	int n = l3_seg_manifest(fd, file_bytes, &h, &e);
	close(fd);
	if (n <= 0) {
		if (n == 0)
			logical_add(s, file_bytes, delta);
		return n;
	}
	int missing = 0;
	for (int i = 0; i < n; i++) {
		struct l3_segref *r = ref_find(s, e[i].lo, e[i].hi, 0);
		if (r && r->bytes == e[i].len)
			continue;
		if (r && r->bytes) {
			missing = 1; /* listed with another size: cut or planted, never this segment */
			continue;
		}
		char rel[48];
		struct stat sb;
		l3_seg_relpath(e[i].lo, e[i].hi, rel);
		/* not listed: made since the listing began (a put), or missing */
		if (l3_statat(l3->sgfd, rel, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == e[i].len) {
			if (!ref_seen(s, e[i].lo, e[i].hi, &sb)) {
				free(e);
				return -ENOMEM;
			}
		} else {
			missing = 1;
		}
	}
	if (missing && delta > 0) {
		free(e);
		return -ENOENT;
	}
	for (int i = 0; i < n; i++) {
		struct l3_segref *r = ref_find(s, e[i].lo, e[i].hi, 0);
		if (!r)
			continue;
		if (delta > 0) {
			r->refs++;
		} else if (r->refs && !--r->refs && freed) {
			*freed += r->bytes;
		}
	}
	logical_add(s, L3_HDR_BLOCK + h.payload_bytes, delta);
	free(e);
	return 1;
}


int l3_segs_sweep(struct sc_l3 *l3, struct l3_segs *s, int (*act)(void *), void *ctx)
{
	if (l3->sgfd < 0)
		return 0;
	uint64_t g = grace(l3), old = s->t0 > g ? s->t0 - g : 0;
	for (size_t i = 0; i < s->cap; i++) {
		struct l3_segref *r = &s->e[i];
		if (!r->used || r->refs || !r->bytes || (uint64_t)r->mtime >= old)
			continue;
		int rc = act ? act(ctx) : 0;
		if (rc)
			return rc;
		char rel[48], hex[33], cap[160];
		struct stat sb;
		l3_seg_relpath(r->lo, r->hi, rel);
		l3_digest_hex(r->lo, r->hi, hex);
		gc_name(l3, hex, cap, sizeof(cap));
		shm_sched_point("l3seg.sweep.chosen");
		if (l3_renameat(l3->sgfd, rel, l3->sgfd, cap, 0) < 0) {
			if (errno == ENOENT) /* gone already (quarantined) */
				s->files--, s->bytes -= r->bytes, r->bytes = 0;
			continue;
		}
		/* touched since the pass began (a put names it): put back */
		if (l3_statat(l3->sgfd, cap, &sb) == 0 && shm_ts_ns(sb.st_mtim) >= old) {
			put_back(l3->sgfd, cap, rel);
			continue;
		}
		if (l3_unlinkat(l3->sgfd, cap) < 0)
			continue;
		s->removed++;
		s->removed_bytes += r->bytes;
		s->files--;
		s->bytes -= r->bytes;
		r->bytes = 0;
	}
	return 0;
}


void l3_segs_end(struct l3_segs *s)
{
	free(s->e);
	s->e = NULL;
	s->cap = s->n = 0;
}


void l3_segs_publish(struct sc_l3 *l3, const struct l3_segs *s, uint64_t objects, uint64_t bytes)
{
	atomic_store_explicit(&l3->st->objects, objects, RELAXED);
	atomic_store_explicit(&l3->st->bytes, bytes, RELAXED);
	atomic_store_explicit(&l3->st->logical, s->logical, RELAXED);
	atomic_store_explicit(&l3->st->segments, s->files, RELAXED);
	atomic_store_explicit(&l3->st->seg_bytes, s->bytes, RELAXED);
}
