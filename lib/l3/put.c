/*
 * lib/l3/put.c — sc_l3_put: the object (whole, or a manifest of segments) and its prefix entry,
 * each written durably (lib/l3/write.c); a put is acknowledged only once both were seen in place,
 * and writes again what a concurrent eviction or drop took. Room is made first (budget, free
 * space). A put that replaces a prefix entry's digest is journalled in DIR/state (every bound
 * location index drops the key at its next locate: lib/l3/locindex.c). The bound arena's location
 * index learns the put before it returns.
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
#include "fill.h"
#include "format.h"
#include "hosts.h"
#include "janitor.h"
#include "locindex.h"
#include "put.h"
#include "ring.h"
#include "segstore.h"
#include "write.h"
#include "../probes.h"
#include "../../shm/fault.h"

/* Prefix @key now names another digest than it did: every arena index bound to this directory
 * drops what it knew of it at its next locate (struct l3_state, the re-put journal). */
static void journal_replaced(struct sc_l3 *l3, XXH128_hash_t key)
{
	struct l3_state *st = l3->st;
	uint64_t t = atomic_fetch_add_explicit(&st->repl_seq, 1, memory_order_acq_rel);
	struct l3_repl *r = &st->repl[t % L3_REPL_SLOTS];
	atomic_store_explicit(&r->seq, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release); /* a reader that sees our key sees seq 0 first */
	atomic_store_explicit(&r->lo, key.low64, memory_order_relaxed);
	atomic_store_explicit(&r->hi, key.high64, memory_order_relaxed);
	atomic_store_explicit(&r->seq, t + 1, memory_order_release); /* pairs with sync_replaced */
}


/* A prefix entry to write: the record, the namespace's length, its place and whether it replaces
 * an entry naming another digest. */
struct pfx_rec {
	struct l3_pfx p;
	uint32_t ns_len;
	int replaced;
	int sync_dir; /* the same entry is there, young: its directory is synced by the put (write.h) */
	char sub[3], name[40];
};

/* Plan the entry @key -> (@lo, @hi) of @ns/@tokens: 1 it must be written (@out filled), 0 the same
 * entry is there, or a negative errno. The token length is registered first. */
static int pfx_plan(struct sc_l3 *l3, XXH128_hash_t key, const char *ns, const int32_t *tokens, uint32_t ntok,
		    uint64_t lo, uint64_t hi, struct pfx_rec *out)
{
	char rel[48], hex[33];
	l3_pfx_relpath(key.low64, key.high64, rel);
	/* the length first: an entry whose length is not registered is never probed, and a writer
	 * killed between the two must not leave one behind (a later put finds the entry the same
	 * and would not come here again) */
	int rc = l3_put_length(l3, ntok);
	if (rc)
		return rc;
	struct l3_pfx p;
	struct stat sb;
	out->ns_len = ns ? (uint32_t)strlen(ns) : 0;
	out->replaced = out->sync_dir = 0;
	l3_digest_hex(key.low64, key.high64, hex);
	out->sub[0] = hex[0], out->sub[1] = hex[1], out->sub[2] = 0;
	int fd = l3_open_file(l3->pfxfd, rel, O_RDONLY);
	if (fd >= 0) {
		int32_t *old = NULL;
		char *old_ns = malloc(SC_L3_STR_MAX + 1);
		int same = old_ns && l3_read_pfx(fd, &p, &old, old_ns) == 0 && old && p.digest_lo == lo &&
			   p.digest_hi == hi && p.token_count == ntok && !memcmp(old, tokens, (size_t)ntok * 4) &&
			   !strcmp(old_ns, ns ? ns : "");
		free(old);
		free(old_ns);
		/* the same entry is kept, unless it is old enough to be judged by a dropper that cannot
		 * see our object yet (shared mode): then it is written again, young */
		int keep = same && (!l3->grace_ns || shm_realtime_ns() - p.created_ns < l3->grace_ns / 2);
		/* kept, the put relies on it: its directory synced while it is young (write.h) */
		if (keep)
			out->sync_dir = fstat(fd, &sb) < 0 || l3_name_young(l3->pfxfd, out->sub, &sb);
		close(fd);
		if (keep)
			return 0;
		out->replaced = !same;
	}
	out->p = (struct l3_pfx){ .magic = L3_PFX_MAGIC, .version = L3_PFX_VERSION, .token_count = ntok,
				  .digest_lo = lo, .digest_hi = hi, .prefix_lo = key.low64, .prefix_hi = key.high64,
				  .created_ns = shm_realtime_ns() };
	out->p.check = l3_pfx_check(&out->p, tokens, ns, out->ns_len);
	snprintf(out->name, sizeof(out->name), "%s.pfx", hex);
	return 1;
}

/* The bytes of entry @e (its record, tokens, namespace) in @iov: the count of vectors. */
static int pfx_iov(struct pfx_rec *e, const int32_t *tokens, const char *ns, struct iovec iov[4])
{
	iov[0] = (struct iovec){ &e->p, sizeof(e->p) };
	iov[1] = (struct iovec){ (void *)tokens, (size_t)e->p.token_count * 4 };
	iov[2] = (struct iovec){ &e->ns_len, 4 };
	iov[3] = (struct iovec){ (void *)(ns ? ns : ""), e->ns_len };
	return e->ns_len ? 4 : 3;
}

static int put_prefix(struct sc_l3 *l3, XXH128_hash_t key, const char *ns, const int32_t *tokens, uint32_t ntok,
		      uint64_t lo, uint64_t hi)
{
	struct pfx_rec e;
	struct iovec iov[4];
	int rc = pfx_plan(l3, key, ns, tokens, ntok, lo, hi, &e);
	if (rc == 0 && e.sync_dir)
		return l3_fsync_dir_at(l3->pfxfd, e.sub);
	if (rc <= 0)
		return rc;
	rc = l3_write_file(l3, l3->pfxfd, e.sub, e.name, iov, pfx_iov(&e, tokens, ns, iov), 0);
	if (!rc && e.replaced)
		journal_replaced(l3, key);
	return rc;
}


/* The payload rules of sc_l2_admit: kind, sections, descriptor. */
static int payload_check(const struct sc_payload *p)
{
	if (!p || (p->sec_len[0] && !p->sec[0]) || (p->sec_len[1] && !p->sec[1]) || p->sec_len[0] > L3_MAX_PAYLOAD ||
	    p->sec_len[1] > L3_MAX_PAYLOAD || !(p->sec_len[0] + p->sec_len[1]))
		return -EINVAL;
	switch (p->kind) {
	case SC_PAYLOAD_FULL_STATE:
	case SC_PAYLOAD_RECURRENT_ONLY:
		return p->sec_len[1] || p->kv_desc ? -EINVAL : 0;
	case SC_PAYLOAD_KV_RECURRENT:
		if (!p->kv_desc != !p->sec_len[0])
			return -EINVAL;
		return p->kv_desc ? sc_kv_desc_validate(p->kv_desc, p->sec_len[0]) : 0;
	default:
		return -EINVAL;
	}
}


int l3_put_room(struct sc_l3 *l3, uint64_t need)
{
	struct statvfs vfs;
	if (l3->opts.budget_bytes && need > l3->opts.budget_bytes) {
		ADD(write_refusals, 1);
		return -E2BIG;
	}
	/* a filesystem that reports no size at all (ceph-fuse without a mgr: 0 blocks) is of unknown
	 * size, not full: there the budget is the only limit */
	if (fstatvfs(l3->dirfd, &vfs) == 0 && vfs.f_blocks &&
	    sat_mul((uint64_t)vfs.f_bavail, vfs.f_frsize) < sat_add(need, l3->opts.min_free_bytes)) {
		ADD(write_refusals, 1);
		return -ENOSPC;
	}
	uint64_t budget = l3->opts.budget_bytes;
	if (budget && !l3->shared && sat_add(atomic_load_explicit(&l3->st->bytes, RELAXED), need) > budget) {
		uint64_t target = budget / 100 * L3_LOW_WATER_PCT;
		int rc = sc_l3_evict_to(l3, target > need ? target - need : 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}


/* Is the object @rel (in directory @sub of DIR/objects) of @file_bytes there? 1: yes (putting it
 * again is a use, counted as a dedup; *@young set when its name is young: write.h); 0: no,
 * *@planted set when something that is not an object holds its name. */
static int obj_there(struct sc_l3 *l3, const char *rel, const char *sub, uint64_t file_bytes, int *planted,
		     int *young)
{
	uint64_t lo, hi;
	struct stat sb;
	l3_name_digest(rel + 3, ".sc3", &lo, &hi);
	int fd = l3_open_file(l3->objfd, rel, O_RDONLY);
	/* a FIFO, socket, device or directory under the object's name (l3_open_file refuses it
	 * without waiting on it) is not an object: ours replaces it */
	*planted = fd == -EBADMSG;
	if (fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == file_bytes) {
		ADD(put_dedup, 1);
		*young = l3_name_young(l3->objfd, sub, &sb);
		/* the LRU order keeps what is put again */
		l3_note_access(l3, fd, lo, hi, (int64_t)shm_ts_ns(sb.st_mtim));
		close(fd);
		shm_sched_point("l3.put.there"); /* found and touched: not written again */
		return 1;
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

/* A new object of @file_bytes holding @payload bytes is in place. */
static void obj_counted(struct sc_l3 *l3, uint64_t file_bytes, uint64_t payload)
{
	ADD(puts, 1);
	ADD(objects, 1);
	ADD(bytes, file_bytes);
	ADD(logical, L3_HDR_BLOCK + payload);
}


/* Write the object of a put (its header block @block, then the sections, or with @m the manifest
 * after its segments) unless it is there. Sets *@wrote to the physical bytes this call added.
 * 0, or a negative errno (refusals counted). */
static int put_object(struct sc_l3 *l3, const struct sc_payload *pl, const struct l3_seg_man *m, uint8_t *block,
		      const char *rel, uint64_t file_bytes, uint64_t *wrote)
{
	uint64_t payload = pl->sec_len[0] + pl->sec_len[1];
	int planted, young = 0;
	char sub[3] = { rel[0], rel[1], 0 };
	*wrote = 0;
	if (obj_there(l3, rel, sub, file_bytes, &planted, &young))
		return young ? l3_fsync_dir_at(l3->objfd, sub) : 0;
	/* the room it takes: a segmented object's file and the segments not stored yet */
	int rc = l3_put_room(l3, m ? l3_seg_need(l3, m) : L3_HDR_BLOCK + payload);
	if (rc)
		return rc;
	uint64_t segs = 0, seg_bytes = 0;
	/* segments first, each touched: a sweep that began before our manifest keeps them (lib/l3/segstore.c) */
	if (m && (rc = l3_seg_store(l3, pl, m, &segs, &seg_bytes, 1)))
		goto refused;
	char name[48];
	struct iovec iov[3] = { { block, L3_HDR_BLOCK } };
	int niov = 1;
	if (m)
		iov[niov++] = (struct iovec){ m->e, (size_t)m->n * sizeof(*m->e) };
	for (int i = 0; !m && i < 2; i++)
		if (pl->sec_len[i])
			iov[niov++] = (struct iovec){ (void *)pl->sec[i], pl->sec_len[i] };
	snprintf(name, sizeof(name), "%s", rel + 3);
	if (m) {
		shm_fault_point("l3seg.put.segments");
		shm_sched_point("l3seg.put.reused"); /* segments checked and touched, manifest not yet written */
	}
	rc = l3_write_file(l3, l3->objfd, sub, name, iov, niov, !planted);
	/* the manifest is in place: every segment touched again, written again where a sweep took it */
	if ((!rc || rc == -EEXIST) && m) {
		uint64_t s2 = 0, b2 = 0;
		int rc2 = l3_seg_store(l3, pl, m, &s2, &b2, 0);
		segs += s2, seg_bytes += b2;
		if (rc2)
			rc = rc2;
	}
	ADD(segments, segs);
	ADD(seg_bytes, seg_bytes);
	ADD(bytes, seg_bytes);
	*wrote = seg_bytes;
	if (rc == -EEXIST) {
		ADD(put_dedup, 1);
		return 0;
	}
refused:
	if (rc) {
		if (rc == -ENOSPC || rc == -EDQUOT)
			ADD(write_refusals, 1);
		return rc;
	}
	obj_counted(l3, file_bytes, payload);
	*wrote += file_bytes;
	if (m) {
		uint64_t lg = L3_HDR_BLOCK + payload, stored = file_bytes + seg_bytes, shared = payload - seg_bytes;
		SC_PROBE(l3_segments, lg, stored, shared);
	}
	return 0;
}


/* Are the object @rel and the prefix entry @key -> its digest both there? */
static int put_landed(struct sc_l3 *l3, const char *rel, XXH128_hash_t key, XXH128_hash_t dg, uint32_t tokens)
{
	char prel[48];
	struct stat sb;
	struct l3_pfx p;
	if (l3_statat(l3->objfd, rel, &sb) < 0 || !S_ISREG(sb.st_mode))
		return 0;
	l3_pfx_relpath(key.low64, key.high64, prel);
	int fd = l3_open_file(l3->pfxfd, prel, O_RDONLY);
	if (fd < 0)
		return 0;
	int ok = l3_read_pfx(fd, &p, NULL, NULL) == 0 && p.digest_lo == dg.low64 && p.digest_hi == dg.high64 && p.token_count == tokens;
	close(fd);
	return ok;
}


/* A put being made: its object's digest and header block, its prefix key, its plan of segments
 * (@m NULL: a whole object), the object's name and size. */
struct put_prep {
	const struct sc_l3_put_args *a;
	XXH128_hash_t dg, key;
	uint8_t *block;
	struct l3_seg_man man, *m;
	uint64_t payload, file_bytes;
	char rel[48];
};

/* Check @a and prepare its put into @pp (released by prep_free, whatever this returns). */
static int put_prep(struct sc_l3 *l3, const struct sc_l3_put_args *a, uint64_t cost_ns, struct put_prep *pp)
{
	memset(pp, 0, sizeof(*pp));
	if (!a || !a->tokens || !a->token_count || payload_check(a->payload))
		return -EINVAL;
	const struct sc_payload *pl = a->payload;
	pp->a = a;
	pp->payload = pl->sec_len[0] + pl->sec_len[1];
	pp->file_bytes = L3_HDR_BLOCK + pp->payload;
	XXH3_state_t hs;
	XXH3_128bits_reset(&hs);
	for (int i = 0; i < 2; i++)
		if (pl->sec_len[i])
			XXH3_128bits_update(&hs, pl->sec[i], pl->sec_len[i]);
	pp->dg = XXH3_128bits_digest(&hs);
	l3_prefix_keys(a->ns, a->tokens, &a->token_count, 1, &pp->key);
	if (!(pp->block = aligned_alloc(L3_DIO_ALIGN, L3_HDR_BLOCK)))
		return -ENOMEM;
	int rc = l3_hdr_build(pp->block, a, pp->dg, pp->key);
	if (rc)
		return rc;
	if (cost_ns)
		l3_hdr_set_cost(pp->block, cost_ns); /* before a segmented header is derived from it */
	/* segments on and a payload above one: the object is a manifest of its segments */
	if (l3->seg_size && pp->payload > l3->seg_size) {
		if ((rc = l3_seg_plan(l3, pl, &pp->man)))
			return rc;
		pp->m = &pp->man;
		l3_seg_hdr(pp->block, pp->m, l3->seg_size);
		pp->file_bytes = L3_HDR_BLOCK + (uint64_t)pp->man.n * sizeof(*pp->man.e);
	}
	l3_obj_relpath(pp->dg.low64, pp->dg.high64, pp->rel);
	return 0;
}

static void prep_free(struct put_prep *pp)
{
	free(pp->man.e);
	free(pp->block);
	pp->man.e = NULL;
	pp->block = NULL;
}

/* The put of @pp was acknowledged: the bound arena's index learns it, @loc (if not NULL) gets it. */
static void put_done(struct sc_l3 *l3, const struct put_prep *pp, struct sc_location *loc)
{
	struct sc_location where;
	struct l3_obj_hdr h;
	l3_hdr_parse(pp->block, 0, &h);
	l3_hdr_location(pp->block, &h, &where);
	where.prefix = (struct sc_digest){ pp->key.low64, pp->key.high64 };
	/* attached: the arena's location index knows before we return */
	if (l3->arena)
		l3ix_on_put(l3->arena, l3, pp->a->ns, pp->a->tokens, &where);
	l3_tell_stored(l3, where.prefix, where.digest, pp->a->token_count);
	if (loc)
		*loc = where;
}

/* The put of @pp made alone, object then entry, each written durably (four fsyncs in a row: a
 * segmented put, or one a concurrent eviction or drop raced with); the physical bytes it
 * added in *@wrote. */
static int put_one(struct sc_l3 *l3, struct put_prep *pp, uint64_t *wrote_any)
{
	const struct sc_l3_put_args *a = pp->a;
	/* acknowledged only once the object and the entry were seen in place after both were
	 * written: an eviction or a drop that raced with us is repaired by writing again */
	for (int attempt = 0;; attempt++) {
		uint64_t wrote;
		int rc = put_object(l3, a->payload, pp->m, pp->block, pp->rel, pp->file_bytes, &wrote);
		if (rc)
			return rc;
		*wrote_any += wrote;
		if ((rc = put_prefix(l3, pp->key, a->ns, a->tokens, a->token_count, pp->dg.low64, pp->dg.high64)))
			return rc;
		if (put_landed(l3, pp->rel, pp->key, pp->dg, a->token_count))
			return 0;
		if (attempt == 3)
			return -EAGAIN; /* evicted as fast as we put it: the budget is too small for the load */
	}
}

int sc_l3_put(struct sc_l3 *l3, const struct sc_l3_put_args *a, struct sc_location *loc)
{
	return sc_l3_put_cost(l3, a, 0, loc);
}

/* A single put is a group commit of one: its object's and its entry's temp files synced in one
 * round, its directories in another, instead of four fsyncs in a row; a segmented put, or one
 * that an eviction or a drop raced with, is made by put_one inside (sc_l3_put_many). */
int sc_l3_put_cost(struct sc_l3 *l3, const struct sc_l3_put_args *a, uint64_t cost_ns, struct sc_location *loc)
{
	return sc_l3_put_many(l3, a, &cost_ns, 1, loc, NULL); /* -EINVAL for a NULL handle or put */
}


/* ---- group commit ---- */

/* One put of a batch: what it writes (the object unless it is there, the entry unless it is the
 * same) and its result. */
struct batch_put {
	struct put_prep pp;
	struct pfx_rec e;
	struct l3_wfile obj, pfx;
	int there_dir[2]; /* the directories of a young object and entry found in place (write.h), or -1 */
	int planted, rc;
	uint8_t write_obj, write_pfx, placed_obj;
};

/* Queue @fd in @fds[*n] unless it names a directory queued already: one fsync per directory. */
static void dir_once(int *fds, unsigned *n, int fd, const struct stat *seen, struct stat *sts)
{
	for (unsigned i = 0; i < *n; i++)
		if (sts[i].st_ino == seen->st_ino && sts[i].st_dev == seen->st_dev)
			return;
	sts[*n] = *seen;
	fds[(*n)++] = fd;
}

/* Write @b's temp files (not synced): 0, or its error (its temp files removed). */
static int batch_write(struct sc_l3 *l3, struct batch_put *b)
{
	struct put_prep *pp = &b->pp;
	const struct sc_l3_put_args *a = pp->a;
	const struct sc_payload *pl = a->payload;
	int rc, young = 0;
	char sub[3] = { pp->rel[0], pp->rel[1], 0 };
	b->write_obj = !obj_there(l3, pp->rel, sub, pp->file_bytes, &b->planted, &young);
	if (!b->write_obj && young && (b->there_dir[0] = l3_open_dir_at(l3->objfd, sub)) < 0)
		return b->there_dir[0];
	if (b->write_obj) {
		struct iovec iov[3] = { { pp->block, L3_HDR_BLOCK } };
		int niov = 1;
		for (int i = 0; i < 2; i++)
			if (pl->sec_len[i])
				iov[niov++] = (struct iovec){ (void *)pl->sec[i], pl->sec_len[i] };
		if ((rc = l3_put_room(l3, pp->file_bytes))) /* a refusal, counted */
			return rc;
		if ((rc = l3_wfile_create(l3, l3->objfd, sub, &b->obj)) ||
		    (rc = l3_write_at(b->obj.fd, iov, niov, 0)))
			goto refused;
	}
	rc = pfx_plan(l3, pp->key, a->ns, a->tokens, a->token_count, pp->dg.low64, pp->dg.high64, &b->e);
	if (rc == 0 && b->e.sync_dir && (b->there_dir[1] = l3_open_dir_at(l3->pfxfd, b->e.sub)) < 0)
		return b->there_dir[1];
	if (rc <= 0)
		return rc;
	b->write_pfx = 1;
	struct iovec iov[4];
	if (!(rc = l3_wfile_create(l3, l3->pfxfd, b->e.sub, &b->pfx)))
		rc = l3_write_at(b->pfx.fd, iov, pfx_iov(&b->e, a->tokens, a->ns, iov), 0);
refused:
	if (rc == -ENOSPC || rc == -EDQUOT)
		ADD(write_refusals, 1);
	return rc;
}

/* The fds of every temp file of @bs still to be placed (@fds holds 2 @n). */
static unsigned batch_temps(struct batch_put *bs, unsigned n, int *fds)
{
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		if (bs[i].rc)
			continue;
		if (bs[i].write_obj)
			fds[k++] = bs[i].obj.fd;
		if (bs[i].write_pfx)
			fds[k++] = bs[i].pfx.fd;
	}
	return k;
}

/* Place @b's synced files, the object first; the directories are synced by the caller. */
static int batch_place(struct sc_l3 *l3, struct batch_put *b)
{
	if (b->write_obj) {
		int rc = l3_wfile_place(&b->obj, b->pp.rel + 3, !b->planted);
		if (rc && rc != -EEXIST)
			return rc;
		if (rc == -EEXIST)
			ADD(put_dedup, 1); /* another put of the same digest was first */
		else
			b->placed_obj = 1;
	}
	shm_fault_point("l3.putmany.object_placed");
	return b->write_pfx ? l3_wfile_place(&b->pfx, b->e.name, 0) : 0;
}

/* Sync the directories @bs placed names in, each once: 0 or the first error. */
static int batch_sync_dirs(struct l3_ring *r, struct batch_put *bs, unsigned n)
{
	int *fds = malloc(sizeof(*fds) * 2 * n);
	struct stat *sts = malloc(sizeof(*sts) * 2 * n), sb;
	unsigned k = 0;
	if (!fds || !sts) {
		free(fds);
		free(sts);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		struct l3_wfile *w[2] = { bs[i].write_obj ? &bs[i].obj : NULL, bs[i].write_pfx ? &bs[i].pfx : NULL };
		for (int j = 0; j < 2 && !bs[i].rc; j++) {
			int fd = w[j] ? w[j]->sfd : bs[i].there_dir[j];
			if (fd >= 0 && fstat(fd, &sb) == 0)
				dir_once(fds, &k, fd, &sb, sts);
		}
	}
	int rc = l3_ring_fsync_all(r, fds, k);
	free(fds);
	free(sts);
	return rc;
}

int sc_l3_put_many(struct sc_l3 *l3, const struct sc_l3_put_args *args, const uint64_t *costs, unsigned n,
		   struct sc_location *locs, int *rcs)
{
	if (!l3 || !args || !n || n > SC_L3_PUT_MANY_MAX)
		return -EINVAL;
	struct batch_put *bs = calloc(n, sizeof(*bs));
	int *fds = malloc(sizeof(*fds) * 2 * n);
	struct l3_ring *r = l3_ring_get(l3);
	int rc = 0, tried = 0;
	if (!bs || !fds || !r) {
		rc = -ENOMEM;
		goto cleanup;
	}
	for (unsigned i = 0; i < n; i++)
		bs[i].obj.fd = bs[i].obj.sfd = bs[i].pfx.fd = bs[i].pfx.sfd = bs[i].there_dir[0] = bs[i].there_dir[1] = -1;
	/* every put checked before anything is written */
	for (unsigned i = 0; i < n && !rc; i++)
		rc = put_prep(l3, &args[i], costs ? costs[i] : 0, &bs[i].pp);
	if (rc)
		goto cleanup;
	tried = 1;
	/* 1. every temp file written; a segmented object is put alone (its segments are synced
	 * and touched in an order of their own: lib/l3/segstore.c) */
	for (unsigned i = 0; i < n; i++)
		if (!bs[i].pp.m)
			bs[i].rc = batch_write(l3, &bs[i]);
	shm_fault_point("l3.putmany.written");
	/* 2. one round of fsyncs for all of them, then each placed, its object before its entry */
	int sync_rc = l3_ring_fsync_all(r, fds, batch_temps(bs, n, fds));
	shm_fault_point("l3.putmany.synced");
	for (unsigned i = 0; i < n; i++)
		if (!bs[i].pp.m && !bs[i].rc)
			bs[i].rc = sync_rc ? sync_rc : batch_place(l3, &bs[i]);
	shm_fault_point("l3.putmany.placed");
	/* 3. one round of fsyncs of the directories: the names are durable */
	int dir_rc = batch_sync_dirs(r, bs, n);
	uint64_t wrote_any = 0;
	for (unsigned i = 0; i < n; i++) {
		struct batch_put *b = &bs[i];
		l3_wfile_close(&b->obj);
		l3_wfile_close(&b->pfx);
		for (int j = 0; j < 2; j++)
			if (b->there_dir[j] >= 0)
				close(b->there_dir[j]);
		if (!b->rc && dir_rc)
			b->rc = dir_rc;
		if (b->placed_obj) {
			obj_counted(l3, b->pp.file_bytes, b->pp.payload);
			wrote_any += b->pp.file_bytes;
		}
		if (!b->rc && b->write_pfx && b->e.replaced)
			journal_replaced(l3, b->pp.key);
		/* acknowledged once both were seen in place; a segmented put, or one an eviction or a
		 * drop raced with, is made alone */
		if (b->pp.m || (!b->rc && !put_landed(l3, b->pp.rel, b->pp.key, b->pp.dg, b->pp.a->token_count)))
			b->rc = put_one(l3, &b->pp, &wrote_any);
		if (!b->rc)
			put_done(l3, &b->pp, locs ? &locs[i] : NULL);
		if (b->rc && !rc)
			rc = b->rc;
		if (rcs)
			rcs[i] = b->rc;
	}
	if (wrote_any)
		l3_janitor_after_put(l3, wrote_any);
	l3_access_flush(l3, 0);
cleanup:
	for (unsigned i = 0; bs && i < n; i++)
		prep_free(&bs[i].pp);
	if (rc && rcs && !tried) /* refused before any put was tried */
		for (unsigned i = 0; i < n; i++)
			rcs[i] = rc;
	free(bs);
	free(fds);
	return rc;
}
