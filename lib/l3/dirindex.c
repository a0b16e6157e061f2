/*
 * lib/l3/dirindex.c — reading the L3 directory: the prefix index (locate_longest), lookup by digest,
 * stats, listing and full verification. Writers and the multi-process rules: lib/l3/put.c.
 *
 * The set of token lengths present in the prefix index is cached per handle (lengths/ holds one
 * empty file per length) and reloaded when that directory's mtime moves (shared mode: at most a
 * second old, and at once on a miss), so locate probes only lengths that exist: at most
 * L3_MAX_PROBES of them, longest first, after one hashing pass.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../xxh.h"

#include "types.h"
#include "dirindex.h"
#include "files.h"
#include "format.h"
#include "hosts.h"
#include "quarantine.h"
#include "segread.h"
#include "janitor.h"



/* ---- locate ---- */

static int u32cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}


/* Reload the registered token lengths when the lengths directory changed (local mode), or when
 * the list is older than L3_LENGTHS_TTL_NS or @force (shared mode: another host's new entry does
 * not reliably move the directory's mtime as this host's client sees it; measured on ceph-fuse).
 * Sets *@reloaded. Caller holds l3->mu. */
#define L3_LENGTHS_TTL_NS 1000000000ll
#define L3_MTIME_SETTLE_NS 50000000ll /* directory mtimes are coarse: a change this recent may not show */
#define VERIFY_READ_BYTES (1u << 20)  /* sc_l3_verify reads payloads in pieces of this */
static int lengths_refresh_locked(struct sc_l3 *l3, int force, int *reloaded)
{
	struct stat sb;
	int64_t now = (int64_t)shm_realtime_ns(), m = 0;
	*reloaded = 0;
	if (l3->shared) {
		if (l3->lengths && !force && now - l3->lengths_mtime_ns < L3_LENGTHS_TTL_NS)
			return 0;
		m = now; /* shared mode: lengths_mtime_ns is the time of the load */
	} else {
		if (fstat(l3->lenfd, &sb) < 0)
			return -errno;
		m = (int64_t)shm_ts_ns(sb.st_mtim);
		if (l3->lengths && m == l3->lengths_mtime_ns && l3->lengths_settled)
			return 0;
		/* directory timestamps are coarse (one tick): a change within the tick we loaded in would
		 * not move mtime, so a load that close to the last change is not trusted until the next call */
		l3->lengths_settled = now - m > L3_MTIME_SETTLE_NS;
	}
	*reloaded = 1;
	DIR *d = l3_opendir(l3->lenfd);
	if (!d)
		return -errno;
	uint32_t *v = malloc(L3_MAX_LENGTHS * sizeof(uint32_t)), n = 0;
	if (!v) {
		closedir(d);
		return -ENOMEM;
	}
	struct dirent *e;
	while ((e = readdir(d)) && n < L3_MAX_LENGTHS) {
		char *end;
		unsigned long x = strtoul(e->d_name, &end, 10);
		if (*end || end == e->d_name || !x || x > UINT32_MAX)
			continue;
		v[n++] = (uint32_t)x;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), u32cmp);
	free(l3->lengths);
	l3->lengths = v;
	l3->nlengths = n;
	l3->lengths_mtime_ns = m;
	return 0;
}


int l3_lengths_snapshot(struct sc_l3 *l3, uint32_t *out, uint32_t max, int64_t *mtime_ns, int force)
{
	int reloaded;
	pthread_mutex_lock(&l3->mu);
	int rc = lengths_refresh_locked(l3, force, &reloaded);
	if (!rc) {
		uint32_t c = l3->nlengths < max ? l3->nlengths : max;
		memcpy(out, l3->lengths + (l3->nlengths - c), (size_t)c * 4);
		*mtime_ns = l3->lengths_mtime_ns;
		rc = (int)c;
	}
	pthread_mutex_unlock(&l3->mu);
	return rc;
}


int sc_l3_lookup(struct sc_l3 *l3, struct sc_digest digest, struct sc_location *loc)
{
	if (!l3 || !loc)
		return -EINVAL;
	uint64_t lo = digest.lo, hi = digest.hi;
	uint8_t block[L3_HDR_BLOCK];
	uint64_t fb;
	struct l3_obj_hdr h;
	int rc = l3_read_header(l3, lo, hi, block, &fb);
	if (!rc)
		rc = l3_hdr_parse(block, fb, &h);
	if (!rc && (h.digest_lo != lo || h.digest_hi != hi))
		rc = -EBADMSG;
	if (rc == -EBADMSG || rc == -EPROTO || rc == -ELOOP) {
		/* ELOOP: a link planted under the object's name (never followed): bad, as the verify
		 * walk judges it, so the index answers as the directory probe does */
		ADD(verify_failures, 1);
		l3_quarantine(l3, lo, hi, EBADMSG);
		return -EBADMSG;
	}
	if (!rc)
		l3_hdr_location(block, &h, loc);
	return rc;
}


static int locate_once(struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n, struct sc_location *loc,
		       struct l3_probe_log *log, uint32_t *bad, int force, int *reloaded)
{
	uint32_t lens[L3_MAX_PROBES], nl = 0;
	pthread_mutex_lock(&l3->mu);
	int rc = lengths_refresh_locked(l3, force, reloaded);
	if (!rc) {
		/* the longest stored lengths <= n, at most L3_MAX_PROBES, kept ascending for hashing */
		uint32_t hi = l3->nlengths;
		while (hi > 0 && l3->lengths[hi - 1] > n)
			hi--;
		uint32_t lo = hi > L3_MAX_PROBES ? hi - L3_MAX_PROBES : 0;
		for (uint32_t i = lo; i < hi; i++)
			lens[nl++] = l3->lengths[i];
		if (log) {
			/* the whole set, for the arena's copy (the index probes what we probe) */
			uint32_t c = l3->nlengths < L3_LOG_LENGTHS ? l3->nlengths : L3_LOG_LENGTHS;
			memcpy(log->all, l3->lengths + (l3->nlengths - c), (size_t)c * 4);
			log->nall = c;
			log->all_mtime_ns = l3->lengths_mtime_ns;
		}
	}
	pthread_mutex_unlock(&l3->mu);
	if (rc)
		return rc;
	XXH128_hash_t keys[L3_MAX_PROBES];
	l3_prefix_keys(ns, tokens, lens, nl, keys);
	if (log) {
		log->n = nl;
		memcpy(log->lens, lens, (size_t)nl * 4);
		for (uint32_t i = 0; i < nl; i++) {
			log->state[i] = L3_PROBE_SKIPPED;
			log->l3key[i] = (struct sc_digest){ keys[i].low64, keys[i].high64 };
		}
	}
	for (uint32_t i = nl; i-- > 0;) {
		char rel[48];
		struct l3_pfx p;
		int32_t *stored = NULL;
		l3_pfx_relpath(keys[i].low64, keys[i].high64, rel);
		struct stat sb;
		int fd = l3_open_file_st(l3->pfxfd, rel, O_RDONLY, &sb);
		if (fd < 0) {
			if (log && fd == -ENOENT)
				log->state[i] = L3_PROBE_ABSENT;
			continue;
		}
		rc = l3_read_pfx_sized(fd, sb.st_size, &p, &stored, NULL);
		close(fd);
		int read_ok = rc == 0;
		if (!rc && (p.prefix_lo != keys[i].low64 || p.prefix_hi != keys[i].high64 || p.token_count != lens[i]))
			rc = -EBADMSG;
		int object_bad = 0;
		if (!rc && !stored) {
			if (log)
				log->state[i] = L3_PROBE_UNVERIFIABLE;
			continue; /* version 1: no token ids to verify the prefix with (left in place) */
		}
		if (!rc && memcmp(stored, tokens, (size_t)lens[i] * 4)) {
			/* another prefix's entry under the same key: a miss, counted, left in place */
			free(stored);
			ADD(key_collisions, 1);
			if (l3->arena)
				key_collision_count(l3->arena, 2, lens[i]);
			if (log)
				log->state[i] = L3_PROBE_COLLISION;
			continue;
		}
		free(stored);
		if (!rc) {
			rc = sc_l3_lookup(l3, (struct sc_digest){ p.digest_lo, p.digest_hi }, loc);
			if (!rc) {
				/* one object may serve several prefixes: report the one we matched */
				loc->token_count = lens[i];
				loc->prefix = (struct sc_digest){ keys[i].low64, keys[i].high64 };
				if (log)
					log->state[i] = L3_PROBE_FOUND, log->found = i;
				return (int)lens[i];
			}
			/* the object failed verification now (lookup quarantined it), or was quarantined
			 * since this entry was written (at an open, by verify, by a fill). In a directory
			 * shared by several hosts, what another host quarantined is a miss here, like
			 * what its janitor evicted: only a failure found now is reported. */
			object_bad = rc == -EBADMSG ||
				     (rc == -ENOENT && !l3->shared &&
				      l3_quarantined_since(l3, p.digest_lo, p.digest_hi, p.created_ns));
		}
		/* a corrupted entry, or one naming a missing or bad object (vanished under us: a miss
		 * at this length): drop it, keep probing. Not on a transient error, not while the entry
		 * is younger than the visibility grace (its object may not show here yet), and never an
		 * entry a concurrent put has just written or checked (l3_pfx_drop captures, then judges). */
		if ((rc == -ENOENT || rc == -EBADMSG) && !(read_ok && !l3_settled(l3, p.created_ns)) &&
		    l3_pfx_drop(l3, rel) == 1) {
			if (l3->arena)
				l3_tell_prefix_gone(l3, (struct sc_digest){ keys[i].low64, keys[i].high64 });
			if (log)
				log->state[i] = L3_PROBE_ABSENT;
			if (object_bad && bad) {
				*bad = lens[i]; /* restore reports it (once: the entry is gone now) */
				return 0;
			}
		}
	}
	return 0;
}


int l3_locate_dir(struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n, struct sc_location *loc,
		  struct l3_probe_log *log, uint32_t *bad)
{
	if (bad)
		*bad = 0;
	if (!l3 || !tokens || !n || !loc || (ns && strlen(ns) > SC_L3_STR_MAX))
		return -EINVAL;
	int reloaded;
	int rc = locate_once(l3, ns, tokens, n, loc, log, bad, 0, &reloaded);
	/* shared mode: a miss re-reads the lengths another host may have added, and looks again */
	if (rc == 0 && l3->shared && !reloaded && !(bad && *bad))
		rc = locate_once(l3, ns, tokens, n, loc, log, bad, 1, &reloaded);
	return rc;
}


struct walk {
	int (*cb)(const struct sc_l3_object_info *, void *);
	void *ctx;
	int verify;
	int count, bad;
	struct sc_l3_object_info info;
};

static void copy_str(char *dst, const uint8_t *src, uint32_t n)
{
	memcpy(dst, src, n);
	dst[n] = 0;
}


static int walk_one(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct walk *w = ctx;
	(void)sub;
	uint64_t lo, hi, fb = 0;
	if (l3_name_digest(name, ".sc3", &lo, &hi))
		return 0;
	struct sc_l3_object_info *in = &w->info;
	memset(in, 0, offsetof(struct sc_l3_object_info, ns));
	in->ns[0] = in->model_identity[0] = in->state_identity[0] = 0;
	in->digest = (struct sc_digest){ lo, hi };
	uint8_t block[L3_HDR_BLOCK];
	struct l3_obj_hdr h;
	int fd = l3_open_file(dfd, name, O_RDONLY);
	if (fd < 0 && w->verify && (fd == -EBADMSG || fd == -ELOOP)) {
		/* not a regular file under an object's name (a planted FIFO, link or directory): bad,
		 * and moved away so that a put can write the object again */
		w->count++, w->bad++;
		in->valid = 0;
		ADD(verify_failures, 1);
		l3_quarantine(l3, lo, hi, EBADMSG);
		return w->cb ? w->cb(in, w->ctx) : 0;
	}
	if (fd < 0)
		return 0; /* gone, or (listing) not a regular file: not an object */
	struct stat sb;
	int rc = l3_read_block(fd, block, &fb);
	if (!rc)
		rc = l3_hdr_parse(block, fb, &h);
	if (!rc && (h.digest_lo != lo || h.digest_hi != hi))
		rc = -EBADMSG;
	if (fstat(fd, &sb) == 0)
		in->mtime_ns = (int64_t)shm_ts_ns(sb.st_mtim);
	in->file_bytes = fb;
	if (!rc) {
		in->kind = h.kind, in->token_count = h.token_count, in->payload_bytes = h.payload_bytes;
		in->segments = h.version == L3_FORMAT_SEGMENTED ? (uint32_t)h.seg_count : 0;
		const uint8_t *q = block + L3_HDR_FIXED + h.desc_bytes;
		copy_str(in->model_identity, q, h.model_len);
		copy_str(in->state_identity, q + h.model_len, h.state_len);
		copy_str(in->ns, q + h.model_len + h.state_len, h.ns_len);
	}
	if (!rc && w->verify && h.version == L3_FORMAT_SEGMENTED) {
		rc = l3_seg_verify(l3, fd, fb, &in->segments_missing); /* a bad segment: quarantined with its users */
	} else if (!rc && w->verify) {
		uint8_t *buf = malloc(VERIFY_READ_BYTES);
		XXH3_state_t hs;
		XXH3_128bits_reset(&hs);
		uint64_t off = L3_HDR_BLOCK;
		while (buf && off < fb) {
			ssize_t r = pread(fd, buf, fb - off < VERIFY_READ_BYTES ? fb - off : VERIFY_READ_BYTES, (off_t)off);
			if (r <= 0)
				break;
			XXH3_128bits_update(&hs, buf, (size_t)r);
			off += (uint64_t)r;
		}
		free(buf);
		XXH128_hash_t d = XXH3_128bits_digest(&hs);
		if (!buf && off < fb)
			rc = -ENOMEM;
		else if (off != fb || d.low64 != lo || d.high64 != hi)
			rc = -EBADMSG;
	}
	close(fd);
	if (rc == -ENOMEM)
		return rc;
	in->valid = rc == 0;
	w->count++;
	if (rc) {
		w->bad++;
		/* a manifest naming a missing segment is reported, not quarantined: reconciliation
		 * removes it (it was never corrupt) */
		if (w->verify && rc != -ENOENT) {
			ADD(verify_failures, 1);
			l3_quarantine(l3, lo, hi, EBADMSG);
		}
	}
	return w->cb ? w->cb(in, w->ctx) : 0;
}


/* Walk every object (@verify: and check its digest): the count walked, or with @verify the count
 * found bad; or -errno. */
static int walk_objects(struct sc_l3 *l3, int (*cb)(const struct sc_l3_object_info *, void *), void *ctx,
			int verify)
{
	if (!l3)
		return -EINVAL;
	struct walk *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->cb = cb, w->ctx = ctx, w->verify = verify;
	int rc = l3_scan(l3, l3->objfd, walk_one, w);
	int n = verify ? w->bad : w->count;
	free(w);
	return rc ? rc : n;
}


int sc_l3_list(struct sc_l3 *l3, int (*cb)(const struct sc_l3_object_info *, void *), void *ctx)
{
	return walk_objects(l3, cb, ctx, 0);
}


int sc_l3_verify(struct sc_l3 *l3, int (*cb)(const struct sc_l3_object_info *, void *), void *ctx)
{
	return walk_objects(l3, cb, ctx, 1);
}




void l3_drop_prefix(struct sc_l3 *l3, uint64_t key_lo, uint64_t key_hi, uint64_t lo, uint64_t hi)
{
	char rel[48];
	struct l3_pfx p;
	l3_pfx_relpath(key_lo, key_hi, rel);
	int fd = l3_open_file(l3->pfxfd, rel, O_RDONLY);
	if (fd < 0)
		return;
	int same = l3_read_pfx(fd, &p, NULL, NULL) == 0 && p.digest_lo == lo && p.digest_hi == hi;
	close(fd);
	/* a concurrent put may have replaced it with a good one: only this one goes */
	if (same && l3_unlinkat(l3->pfxfd, rel) == 0 && l3->arena)
		l3_tell_prefix_gone(l3, (struct sc_digest){ key_lo, key_hi });
}


/* ---- prefix entries, as tools list them (sc_l3_prefix_get, sc_l3_prefix_list) ---- */

/* Read the prefix entry @rel of @dfd that should hold key @lo/@hi: its ids into *@tokens (malloc'd),
 * what it says into @info. 0 or a negative errno (-EBADMSG: not a valid version 2 entry of that key). */
static int read_prefix_info(struct sc_l3 *l3, int dfd, const char *rel, uint64_t lo, uint64_t hi,
			    struct sc_l3_prefix_info *info, int32_t **tokens)
{
	int fd = l3_open_file(dfd, rel, O_RDONLY); /* never a FIFO or a link planted under the name */
	if (fd < 0)
		return fd;
	struct l3_pfx p;
	memset(info, 0, sizeof(*info));
	int rc = l3_read_pfx(fd, &p, tokens, info->ns);
	close(fd);
	if (rc)
		return rc;
	if (!*tokens || p.prefix_lo != lo || p.prefix_hi != hi) {
		free(*tokens);
		*tokens = NULL;
		return -EBADMSG; /* version 1 (no ids), or another prefix's entry under this name */
	}
	char orel[48];
	struct stat sb;
	l3_obj_relpath(p.digest_lo, p.digest_hi, orel);
	info->prefix = (struct sc_digest){ lo, hi };
	info->digest = (struct sc_digest){ p.digest_lo, p.digest_hi };
	info->token_count = p.token_count;
	info->created_ns = (int64_t)p.created_ns;
	info->object_present = fstatat(l3->objfd, orel, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode);
	return 0;
}

int64_t sc_l3_prefix_get(struct sc_l3 *l3, struct sc_digest prefix, struct sc_l3_prefix_info *info, int32_t *tokens,
			 uint32_t cap)
{
	if (!l3 || (cap && !tokens))
		return -EINVAL;
	char rel[48];
	struct sc_l3_prefix_info local;
	int32_t *t = NULL;
	l3_pfx_relpath(prefix.lo, prefix.hi, rel);
	int rc = read_prefix_info(l3, l3->pfxfd, rel, prefix.lo, prefix.hi, info ? info : &local, &t);
	if (rc)
		return rc;
	uint32_t n = (info ? info : &local)->token_count;
	if (cap)
		memcpy(tokens, t, (size_t)(n < cap ? n : cap) * 4);
	free(t);
	return n;
}

struct prefix_walk {
	int (*cb)(const struct sc_l3_prefix_info *, const int32_t *, void *);
	void *ctx;
	int count;
	int stopped;
	struct sc_l3_prefix_info info;
};

static int prefix_one(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *vctx)
{
	(void)sub;
	struct prefix_walk *w = vctx;
	uint64_t lo, hi;
	int32_t *t = NULL;
	if (l3_name_digest(name, ".pfx", &lo, &hi))
		return 0; /* temp files, captures being judged */
	int rc = read_prefix_info(l3, dfd, name, lo, hi, &w->info, &t);
	if (rc == -ENOMEM)
		return rc;
	if (rc)
		return 0; /* gone since the listing, or not a valid entry: not reported */
	w->count++;
	rc = w->cb(&w->info, t, w->ctx);
	free(t);
	if (rc)
		w->stopped = 1;
	return rc;
}

int sc_l3_prefix_list(struct sc_l3 *l3, int (*cb)(const struct sc_l3_prefix_info *, const int32_t *, void *), void *ctx)
{
	if (!l3 || !cb)
		return -EINVAL;
	struct prefix_walk *w = calloc(1, sizeof(*w)); /* the info holds a namespace: not on the stack */
	if (!w)
		return -ENOMEM;
	w->cb = cb;
	w->ctx = ctx;
	int rc = l3_scan(l3, l3->pfxfd, prefix_one, w);
	if (!rc || w->stopped)
		rc = w->stopped ? rc : w->count;
	free(w);
	return rc;
}
