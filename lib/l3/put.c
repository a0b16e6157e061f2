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
#include "format.h"
#include "hosts.h"
#include "janitor.h"
#include "locindex.h"
#include "put.h"
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


static int put_prefix(struct sc_l3 *l3, XXH128_hash_t key, const char *ns, const int32_t *tokens, uint32_t ntok,
		      uint64_t lo, uint64_t hi)
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
	uint32_t ns_len = ns ? (uint32_t)strlen(ns) : 0;
	int fd = l3_open_file(l3->pfxfd, rel, O_RDONLY), replaced = 0;
	if (fd >= 0) {
		int32_t *old = NULL;
		char *old_ns = malloc(SC_L3_STR_MAX + 1);
		int same = old_ns && l3_read_pfx(fd, &p, &old, old_ns) == 0 && old && p.digest_lo == lo &&
			   p.digest_hi == hi && p.token_count == ntok && !memcmp(old, tokens, (size_t)ntok * 4) &&
			   !strcmp(old_ns, ns ? ns : "");
		free(old);
		free(old_ns);
		close(fd);
		/* the same entry is kept, unless it is old enough to be judged by a dropper that cannot
		 * see our object yet (shared mode): then it is written again, young */
		if (same && (!l3->grace_ns || shm_realtime_ns() - p.created_ns < l3->grace_ns / 2))
			return 0;
		replaced = !same;
	}
	p = (struct l3_pfx){ .magic = L3_PFX_MAGIC, .version = L3_PFX_VERSION, .token_count = ntok,
			     .digest_lo = lo, .digest_hi = hi, .prefix_lo = key.low64, .prefix_hi = key.high64,
			     .created_ns = shm_realtime_ns() };
	p.check = l3_pfx_check(&p, tokens, ns, ns_len);
	l3_digest_hex(key.low64, key.high64, hex);
	char name[40];
	snprintf(name, sizeof(name), "%s.pfx", hex);
	char sub[3] = { hex[0], hex[1], 0 };
	struct iovec iov[4] = { { &p, sizeof(p) }, { (void *)tokens, (size_t)ntok * 4 }, { &ns_len, 4 },
				{ (void *)(ns ? ns : ""), ns_len } };
	rc = l3_write_file(l3, l3->pfxfd, sub, name, iov, ns_len ? 4 : 3, 0);
	if (!rc && replaced)
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


/* Write the object of a put (its header block @block, then the sections, or with @m the manifest
 * after its segments) unless it is there. Sets *@wrote to the physical bytes this call added.
 * 0, or a negative errno (refusals counted). */
static int put_object(struct sc_l3 *l3, const struct sc_payload *pl, const struct l3_seg_man *m, uint8_t *block,
		      const char *rel, uint64_t file_bytes, uint64_t *wrote)
{
	uint64_t lo, hi, payload = pl->sec_len[0] + pl->sec_len[1];
	struct stat sb;
	*wrote = 0;
	l3_name_digest(rel + 3, ".sc3", &lo, &hi);
	int fd = l3_open_file(l3->objfd, rel, O_RDONLY);
	/* a FIFO, socket, device or directory under the object's name (l3_open_file refuses it
	 * without waiting on it) is not an object: ours replaces it */
	int planted = fd == -EBADMSG;
	if (fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == file_bytes) {
		ADD(put_dedup, 1);
		/* putting it again is a use: the LRU order keeps what is put again */
		l3_note_access(l3, fd, lo, hi, (int64_t)shm_ts_ns(sb.st_mtim));
		close(fd);
		return 0;
	}
	if (fd >= 0)
		close(fd);
	/* the room it takes: a segmented object's file and the segments not stored yet */
	int rc = l3_put_room(l3, m ? l3_seg_need(l3, m) : L3_HDR_BLOCK + payload);
	if (rc)
		return rc;
	uint64_t segs = 0, seg_bytes = 0;
	/* segments first, each touched: a sweep that began before our manifest keeps them (lib/l3/segstore.c) */
	if (m && (rc = l3_seg_store(l3, pl, m, &segs, &seg_bytes)))
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
	char sub[3] = { rel[0], rel[1], 0 };
	if (m) {
		shm_fault_point("l3seg.put.segments");
		shm_sched_point("l3seg.put.reused"); /* segments checked and touched, manifest not yet written */
	}
	rc = l3_write_file(l3, l3->objfd, sub, name, iov, niov, !planted);
	/* the manifest is in place: every segment touched again, written again where a sweep took it */
	if ((!rc || rc == -EEXIST) && m) {
		uint64_t s2 = 0, b2 = 0;
		int rc2 = l3_seg_store(l3, pl, m, &s2, &b2);
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
	ADD(puts, 1);
	ADD(objects, 1);
	ADD(bytes, file_bytes);
	ADD(logical, L3_HDR_BLOCK + payload);
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


int sc_l3_put(struct sc_l3 *l3, const struct sc_l3_put_args *a, struct sc_location *loc)
{
	return sc_l3_put_cost(l3, a, 0, loc);
}

int sc_l3_put_cost(struct sc_l3 *l3, const struct sc_l3_put_args *a, uint64_t cost_ns, struct sc_location *loc)
{
	if (!l3 || !a || !a->tokens || !a->token_count || payload_check(a->payload))
		return -EINVAL;
	const struct sc_payload *pl = a->payload;
	uint64_t payload = pl->sec_len[0] + pl->sec_len[1], file_bytes = L3_HDR_BLOCK + payload;
	XXH3_state_t hs;
	XXH3_128bits_reset(&hs);
	for (int i = 0; i < 2; i++)
		if (pl->sec_len[i])
			XXH3_128bits_update(&hs, pl->sec[i], pl->sec_len[i]);
	XXH128_hash_t dg = XXH3_128bits_digest(&hs), key;
	l3_prefix_keys(a->ns, a->tokens, &a->token_count, 1, &key);
	uint8_t *block = aligned_alloc(L3_DIO_ALIGN, L3_HDR_BLOCK);
	if (!block)
		return -ENOMEM;
	struct l3_seg_man man = { 0 }, *m = NULL;
	uint64_t wrote_any = 0;
	int rc = l3_hdr_build(block, a, dg, key);
	if (rc)
		goto cleanup;
	if (cost_ns)
		l3_hdr_set_cost(block, cost_ns); /* before a segmented header is derived from it */
	/* segments on and a payload above one: the object is a manifest of its segments */
	if (l3->seg_size && payload > l3->seg_size) {
		if ((rc = l3_seg_plan(l3, pl, &man)))
			goto cleanup;
		m = &man;
		l3_seg_hdr(block, m, l3->seg_size);
		file_bytes = L3_HDR_BLOCK + (uint64_t)man.n * sizeof(*man.e);
	}
	char rel[48];
	l3_obj_relpath(dg.low64, dg.high64, rel);
	/* acknowledged only once the object and the entry were seen in place after both were
	 * written: an eviction or a drop that raced with us is repaired by writing again */
	for (int attempt = 0;; attempt++) {
		uint64_t wrote;
		if ((rc = put_object(l3, pl, m, block, rel, file_bytes, &wrote)))
			goto cleanup;
		wrote_any += wrote;
		if ((rc = put_prefix(l3, key, a->ns, a->tokens, a->token_count, dg.low64, dg.high64)))
			goto cleanup;
		if (put_landed(l3, rel, key, dg, a->token_count))
			break;
		if (attempt == 3) {
			rc = -EAGAIN; /* evicted as fast as we put it: the budget is too small for the load */
			goto cleanup;
		}
	}
	{
		struct sc_location where;
		struct l3_obj_hdr h;
		l3_hdr_parse(block, 0, &h);
		l3_hdr_location(block, &h, &where);
		where.prefix = (struct sc_digest){ key.low64, key.high64 };
		/* attached: the arena's location index knows before we return */
		if (l3->arena)
			l3ix_on_put(l3->arena, l3, a->ns, a->tokens, &where);
		l3_tell_stored(l3, where.prefix, where.digest, a->token_count);
		if (loc)
			*loc = where;
	}
	if (wrote_any)
		l3_janitor_after_put(l3, wrote_any);
	l3_access_flush(l3, 0);
cleanup:
	free(man.e);
	free(block);
	return rc;
}
