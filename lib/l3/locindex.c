/*
 * lib/l3/locindex.c — the L3 location index: what its entries mean, when they are trusted, and who
 * keeps them true (the rules are in docs/DESIGN.md ("The L3 location index"); the shared-memory protocol is
 * shm/l3ix.c).
 *
 * An entry answers "is there a prefix entry in the L3 directory for (namespace, these tokens)?"
 * for one token length: positive (with the object's digest) or negative (checked: no such prefix
 * entry). It is keyed by the arena-keyed prefix hash P (lib/key.c), the same hash the L2 key is
 * derived from, so the restore path hashes the tokens once.
 *
 * Two modes. Complete: a scan of the directory (ix_sync, at most once per refresh interval, by
 * whichever restore finds the last one older than that) left every prefix entry of the directory
 * in the index, and nothing was evicted since; then a key absent from the index is absent from
 * the directory (as of at most an interval ago) and positive entries need no freshness of their
 * own. Incomplete (the directory outgrew the index, or the scan is due and busy): an entry is
 * trusted for the interval after it was confirmed against the directory (checked_ns), a key the
 * index does not know sends the caller to the directory probe. In both modes, a lookup that finds
 * no positive entry at all is a miss and probes the directory at once (l3_locate_dir), which
 * writes what it saw back. Writers attached to the arena update the index before they return
 * (put, quarantine, eviction, a dropped prefix entry).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "types.h"
#include "locindex.h"
#include "dirindex.h"
#include "files.h"
#include "format.h"
#include "hosts.h"
#include "../l2/l2.h"
#include "../probes.h"
#include "../../shm/fault.h"


/* why a lookup fell back to the directory (probe argument, `stagecache trace`) */
enum { WHY_HIT = 0, WHY_MISS = 2, WHY_STALE = 3, WHY_COLLISION = 4, WHY_UNBOUND = 5 };

static uint64_t refresh_ns(const struct sc_arena *a)
{
	return (uint64_t)a->shm->hv.l3ix_refresh_ms * 1000000ull;
}

int l3ix_bind(struct sc_arena *a, struct sc_l3 *l3)
{
	/* relaxed: a cache of a fact that never changes once true (the first binder wins) */
	if (__atomic_load_n(&l3->ix_ok, __ATOMIC_RELAXED) == a)
		return 1;
	struct shm_l3ix *ix = arena_l3ix(a);
	if (!ix || !ix->nsets)
		return 0;
	struct shm_l3ix_hdr *h = ix->hdr;
	/* acquire: pairs with the release store of dir_ino below (dir_dev is written first) */
	uint64_t ino = __atomic_load_n(&h->dir_ino, __ATOMIC_ACQUIRE);
	if (!ino) {
		if (shm_l3ix_lock(ix))
			return 0;
		if (!h->dir_ino) {
			h->dir_dev = l3->dir_dev;
			__atomic_store_n(&h->dir_ino, l3->dir_ino, __ATOMIC_RELEASE);
		}
		shm_l3ix_unlock(ix);
		ino = __atomic_load_n(&h->dir_ino, __ATOMIC_ACQUIRE);
	}
	if (ino == l3->dir_ino && __atomic_load_n(&h->dir_dev, __ATOMIC_RELAXED) == l3->dir_dev) {
		__atomic_store_n(&l3->ix_ok, a, __ATOMIC_RELAXED);
		return 1;
	}
	shm_l3ix_count(ix, L3IX_FOREIGN, 1);
	return 0;
}

/* ---- lookups ---- */

struct ix_res {
	uint32_t nl, at;                     /* lengths probed; index of the hit */
	uint32_t lens[L3_MAX_PROBES];
	struct sc_key keys[L3_MAX_PROBES];
	struct shm_l3ix_snap snap;           /* the hit */
	int why;
};

static void probe_fire(int why, uint64_t tokens, uint64_t t0)
{
	if (SC_PROBE_ENABLED(l3_index)) {
		uint64_t w = (uint64_t)why, tk = tokens, dt = shm_now_ns() - t0;
		SC_PROBE(l3_index, w, tk, dt);
	}
}

static void entry_from(struct shm_l3ix_entry *e, struct sc_key key, uint32_t len, struct sc_digest l3key,
		       uint64_t checked_ns, uint64_t gen)
{
	memset(e, 0, sizeof(*e));
	e->key_lo = key.lo, e->key_hi = key.hi;
	e->token_count = len;
	e->l3key_lo = l3key.lo, e->l3key_hi = l3key.hi;
	e->checked_ns = checked_ns;
	e->dir_gen = gen;
}

static void loc_into(struct shm_l3ix_entry *e, const struct sc_location *loc)
{
	e->flags = SHM_L3IX_POS | (loc->has_kv_desc ? SHM_L3IX_DESC : 0);
	e->digest_lo = loc->digest.lo, e->digest_hi = loc->digest.hi;
	e->sec_len[0] = loc->sec_len[0], e->sec_len[1] = loc->sec_len[1];
	e->kind = loc->kind;
}

static void ix_sync(struct sc_arena *a, struct sc_l3 *l3, uint64_t now);

/*
 * Probe the index longest first: 1 a positive entry (r->at, r->snap), -EAGAIN fall back to the
 * directory (r->why), -EINVAL. Token ids of negative entries are compared here; those of a
 * positive one by the caller, and only when no L2 entry vouches for the tokens (its own stored
 * ids compared equal): see l3ix_entry_tokens_equal and the design note.
 */
static int ix_probe(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		    uint64_t now, struct ix_res *r)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	r->why = WHY_MISS;
	if (!ix || !ix->nsets)
		return -EAGAIN;
	uint64_t fresh = refresh_ns(a), checked;
	/* acquire: pairs with the scanner's release store of complete_ns */
	uint64_t complete = atomic_load_explicit(&ix->hdr->complete_ns, memory_order_acquire);
	if (!complete || complete + fresh < now) {
		ix_sync(a, l3, now);
		complete = atomic_load_explicit(&ix->hdr->complete_ns, memory_order_acquire);
	}
	int authoritative = complete && complete + fresh >= now;
	int k = shm_l3ix_lengths(ix, n, r->lens, L3_MAX_PROBES, &checked);
	if (k < 0 || !checked)
		return -EAGAIN;
	if (!authoritative && checked + fresh < now) {
		r->why = WHY_STALE;
		return -EAGAIN;
	}
	r->nl = (uint32_t)k;
	/* one pass over the tokens; P itself only for the lengths actually probed */
	const uint8_t *secret = a->shm->hv.key_secret;
	int rc = key_pfx_chain(secret, ns, tokens, n, r->lens, r->nl, r->keys);
	if (rc)
		return rc;
	/* acquire: pairs with the release increment of dir_gen */
	uint64_t gen = atomic_load_explicit(&ix->hdr->dir_gen, memory_order_acquire);
	uint32_t cmp = SHM_L3IX_NEG;
	for (uint32_t i = r->nl; i-- > 0;) {
		int eq;
		r->keys[i] = key_pfx_finish(secret, r->keys[i], tokens, r->lens[i]);
		int f = shm_l3ix_find(ix, r->keys[i].lo, r->keys[i].hi, r->lens[i],
				      l2_verify_tokens(a) ? tokens : NULL, cmp, &eq, &r->snap);
		if (f < 0)
			return -EAGAIN;
		if (f == 0) {
			if (authoritative)
				continue; /* not in the directory either */
			return -EAGAIN;
		}
		int stale = r->snap.e.dir_gen != gen || r->snap.e.checked_ns + fresh < now;
		if (r->snap.e.flags & SHM_L3IX_NEG) {
			if (authoritative)
				continue;
			if (stale || eq != 1) {
				/* stale, or not ours (a collision), or not verifiable without token ids */
				if (eq == 0)
					key_collision_count(a, 1, r->lens[i]);
				r->why = stale ? WHY_STALE : eq == 0 ? WHY_COLLISION : WHY_MISS;
				return -EAGAIN;
			}
			shm_l3ix_count(ix, L3IX_NEG_HITS, 1);
			continue;
		}
		if ((stale && !authoritative) || r->snap.e.dir_gen != gen) {
			r->why = WHY_STALE;
			return -EAGAIN;
		}
		r->at = i;
		return 1;
	}
	return -EAGAIN; /* no positive entry: a miss, which the directory decides at once */
}

/* ---- the directory scan (completeness) ---- */

#define SCAN_BACKOFF 64          /* refresh intervals between full scans that could not fit */
#define SCAN_SETTLE_NS 50000000  /* a directory changed this recently may change again unseen */

struct scan {
	struct sc_arena *a;
	struct sc_l3 *l3;
	struct shm_l3ix *ix;
	uint64_t t0, gen, since_real, files, limit;
	int full, tok, gave_up;
	struct sc_digest *seen;      /* l3 keys present in the rescanned subdirectories */
	size_t nseen, capseen;
	struct sc_digest *known;     /* l3 keys of the index's positive entries when the scan began */
	size_t nknown;
	uint8_t rescanned[SHM_L3IX_SUBDIRS];
};

static int dg_cmp(const void *x, const void *y);

/* "00".."ff": the prefix subdirectory @s */
static void sub_name(uint32_t s, char out[3])
{
	static const char hex[] = "0123456789abcdef";
	out[0] = hex[(s >> 4) & 15], out[1] = hex[s & 15], out[2] = 0;
}

/*
 * A prefix entry younger than the visibility grace names an object that does not show here: in a
 * directory shared by hosts, one another host's janitor has evicted (such an entry is dropped
 * only once older than the grace, lib/l3/dirindex.c), or one whose file this mount does not show
 * yet. Either way the index leaves it out: named by the index, it would send every restore to a
 * fill that finds nothing, after a fill had just dropped it as vanished. The directory probe that
 * an index miss runs at once finds the object when it shows. 1: leave it out.
 */
static int young_and_missing(struct sc_l3 *l3, const struct l3_pfx *p)
{
	if (l3_settled(l3, p->created_ns))
		return 0;
	char rel[48];
	struct stat sb;
	l3_obj_relpath(p->digest_lo, p->digest_hi, rel);
	return l3_statat(l3->objfd, rel, &sb) == -ENOENT;
}

/* One prefix entry file: read it and write its entry (when it changed since the last scan). */
static void scan_file(struct scan *sc, int dfd, const char *name, struct sc_digest l3key)
{
	if (!sc->full && sc->nknown && bsearch(&l3key, sc->known, sc->nknown, sizeof(l3key), dg_cmp)) {
		/* a name the index has: read it again only if it was rewritten since the last scan
		 * (a name it does not have is always read: its times are another host's clock, and a put
		 * renames a file written earlier, so no time says it is new) */
		struct stat sb;
		if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			return;
		uint64_t mt = (uint64_t)sb.st_mtim.tv_sec * 1000000000ull + (uint64_t)sb.st_mtim.tv_nsec;
		uint64_t ct = (uint64_t)sb.st_ctim.tv_sec * 1000000000ull + (uint64_t)sb.st_ctim.tv_nsec;
		if ((mt > ct ? mt : ct) + SCAN_SETTLE_NS < sc->since_real)
			return; /* not changed since the last scan */
	}
	int fd = l3_open_file(dfd, name, O_RDONLY); /* never a planted FIFO or link */
	if (fd < 0)
		return;
	struct l3_pfx p;
	int32_t *tok = NULL;
	char *ns = malloc(SC_L3_STR_MAX + 1);
	int rc = ns ? l3_read_pfx(fd, &p, &tok, ns) : -ENOMEM;
	close(fd);
	/* version 1 or bad files are not represented: a directory probe treats them as absent too */
	if (!rc && tok && p.prefix_lo == l3key.lo && p.prefix_hi == l3key.hi && !young_and_missing(sc->l3, &p)) {
		struct sc_key key;
		uint32_t len = p.token_count;
		if (!key_pfx_hashes(sc->a->shm->hv.key_secret, ns, tok, len, &len, 1, &key)) {
			struct shm_l3ix_entry e;
			entry_from(&e, key, len, l3key, sc->t0, sc->gen);
			e.flags = SHM_L3IX_POS;
			e.digest_lo = p.digest_lo, e.digest_hi = p.digest_hi;
			uint32_t ev = 0;
			if (!shm_l3ix_lock(sc->ix)) {
				shm_l3ix_put_locked(sc->ix, &e, sc->tok ? tok : NULL, &ev);
				shm_l3ix_unlock(sc->ix);
				shm_l3ix_count(sc->ix, L3IX_INSERTS, 1);
				shm_l3ix_count(sc->ix, L3IX_EVICTIONS, ev);
			}
		}
	}
	free(tok);
	free(ns);
}

static int scan_subdir(struct scan *sc, struct sc_l3 *l3, uint32_t s)
{
	char sub[3];
	sub_name(s, sub);
	int fd = openat(l3->pfxfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	sc->rescanned[s] = 1;
	struct dirent *de;
	while ((de = readdir(d))) {
		uint64_t lo, hi;
		if (l3_name_digest(de->d_name, ".pfx", &lo, &hi))
			continue;
		if (++sc->files > sc->limit) {
			sc->gave_up = 1; /* more prefix entries than the index can hold */
			break;
		}
		if (sc->nseen == sc->capseen) {
			size_t cap = sc->capseen ? 2 * sc->capseen : 1024;
			struct sc_digest *v = realloc(sc->seen, cap * sizeof(*v));
			if (!v) {
				sc->gave_up = 1;
				break;
			}
			sc->seen = v, sc->capseen = cap;
		}
		struct sc_digest k = { lo, hi };
		sc->seen[sc->nseen++] = k;
		scan_file(sc, dirfd(d), de->d_name, k);
	}
	closedir(d);
	return 0;
}

/* The l3 keys of the index's positive entries, sorted (what an incremental scan need not read
 * again unless rewritten). 0, or -ENOMEM / the lock's error. */
static int known_keys(struct scan *sc)
{
	uint32_t total = sc->ix->nsets * SHM_L3IX_WAYS;
	sc->known = malloc((size_t)total * sizeof(*sc->known));
	if (!sc->known)
		return -ENOMEM;
	int rc = shm_l3ix_lock(sc->ix);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < total; i++) {
		const struct shm_l3ix_entry *e = &sc->ix->ent[i];
		if (e->flags & SHM_L3IX_POS)
			sc->known[sc->nknown++] = (struct sc_digest){ e->l3key_lo, e->l3key_hi };
	}
	shm_l3ix_unlock(sc->ix);
	qsort(sc->known, sc->nknown, sizeof(*sc->known), dg_cmp);
	return 0;
}

/*
 * Bring the index up to date with the directory and, when everything fits, declare it complete.
 * One process at a time (sync_mu, trylock: a restore never waits for another's scan). Incremental:
 * only subdirectories whose mtime moved since the last scan are listed (shared mode: all), only
 * files the index does not know or that changed since are read; a full scan (the first, or after an eviction) reads every file, and when the directory
 * has more prefix entries than the index holds it gives up for SCAN_BACKOFF intervals.
 */
static void ix_sync(struct sc_arena *a, struct sc_l3 *l3, uint64_t now)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	if (!l3 || !ix || !ix->nsets || l3ix_bind(a, l3) != 1)
		return;
	struct shm_l3ix_hdr *h = ix->hdr;
	int rc = shm_mutex_trylock(a->shm, &h->sync_mu);
	if (rc == -EBUSY && !shm_token_alive(a->shm, shm_mutex_owner(&h->sync_mu) & ~SHM_MUTEX_WAITERS))
		rc = shm_mutex_lock(a->shm, &h->sync_mu); /* a dead scanner's: take it over */
	if (rc == -EOWNERDEAD) {
		atomic_store_explicit(&h->sync_full, 1, RELAXED); /* it died mid-scan: start over */
		rc = 0;
	}
	if (rc)
		return;
	uint64_t fresh = refresh_ns(a);
	uint64_t done = atomic_load_explicit(&h->complete_ns, RELAXED);
	struct scan *sc = NULL;
	if (done && done + fresh >= now)
		goto out; /* someone else scanned meanwhile */
	int full = atomic_exchange_explicit(&h->sync_full, 0, RELAXED) || !h->scan_real_ns;
	if (full && h->scan_backoff_ns > now) {
		atomic_store_explicit(&h->sync_full, 1, RELAXED);
		goto out;
	}
	sc = calloc(1, sizeof(*sc));
	if (!sc) {
		atomic_store_explicit(&h->sync_full, 1, RELAXED);
		goto out;
	}
	uint32_t total = ix->nsets * SHM_L3IX_WAYS;
	*sc = (struct scan){ .a = a, .l3 = l3, .ix = ix, .t0 = shm_now_ns(), .full = full, .tok = l2_verify_tokens(a),
			     .gen = atomic_load_explicit(&h->dir_gen, RELAXED), .since_real = h->scan_real_ns,
			     .limit = total / 2 }; /* a set-associative table fills unevenly: half is the bound */
	uint64_t real0 = shm_realtime_ns();
	shm_sched_point("l3ix.sync.start");
	if (!full && known_keys(sc))
		full = sc->full = 1; /* no memory for the list: read every file */
	/* the lengths */
	uint32_t *lens = malloc(SHM_L3IX_MAX_LENGTHS * sizeof(*lens));
	int64_t lm = 0;
	/* shared mode: another host's new length does not reliably move the lengths directory's
	 * mtime as this host's client sees it (lib/l3/dirindex.c): read it again, once per interval */
	int nl = lens ? l3_lengths_snapshot(l3, lens, SHM_L3IX_MAX_LENGTHS, &lm, l3->shared) : -ENOMEM;
	if (nl >= 0 && !shm_l3ix_lock(ix)) {
		shm_l3ix_set_lengths_locked(ix, lens, (uint32_t)nl, sc->t0, (uint64_t)lm);
		shm_l3ix_unlock(ix);
	}
	free(lens);
	int ok = nl >= 0;
	/* the subdirectories that changed (all of them for a full scan) */
	for (uint32_t s = 0; ok && !sc->gave_up && s < SHM_L3IX_SUBDIRS; s++) {
		char sub[3];
		struct stat sb;
		sub_name(s, sub);
		uint64_t mt = 0;
		if (fstatat(l3->pfxfd, sub, &sb, AT_SYMLINK_NOFOLLOW) == 0)
			mt = (uint64_t)sb.st_mtim.tv_sec * 1000000000ull + (uint64_t)sb.st_mtim.tv_nsec;
		else if (errno != ENOENT)
			ok = 0;
		/* (shared mode: nor does a subdirectory's, for another host's entry: list them all; only
		 * names the index does not have, or rewritten ones, are read) */
		if (!full && !l3->shared && mt == ix->scan->sub_mtime_ns[s])
			continue;
		if (scan_subdir(sc, l3, s))
			ok = 0;
		/* a change within the mtime's tick may not have moved it: look again next time */
		ix->scan->sub_mtime_ns[s] = mt + SCAN_SETTLE_NS < real0 ? mt : 0;
	}
	if (!ok || sc->gave_up) {
		atomic_store_explicit(&h->sync_full, 1, RELAXED);
		if (sc->gave_up) /* the directory outgrew the index: stay incomplete for a while */
			h->scan_backoff_ns = now + SCAN_BACKOFF * fresh;
		goto out;
	}
	/* listed, not yet declared complete: a put landing now is after t0, so it is not claimed */
	shm_sched_point("l3ix.sync.listed");
	/* prefix entries gone from the rescanned subdirectories: their index entries go too */
	if (sc->nseen) /* seen may be NULL then (qsort's argument must not be) */
		qsort(sc->seen, sc->nseen, sizeof(*sc->seen), dg_cmp);
	uint64_t dropped = 0;
	if (!shm_l3ix_lock(ix)) {
		for (uint32_t i = 0; i < total; i++) {
			struct shm_l3ix_entry *e = &ix->ent[i];
			if (!(e->flags & SHM_L3IX_POS) || !sc->rescanned[e->l3key_hi >> 56])
				continue;
			if (e->checked_ns > sc->t0)
				continue; /* confirmed after the listing may have been made: not ours to judge */
			struct sc_digest k = { e->l3key_lo, e->l3key_hi };
			if (!sc->nseen || !bsearch(&k, sc->seen, sc->nseen, sizeof(k), dg_cmp)) {
				shm_l3ix_clear_locked(ix, i);
				dropped++;
			}
		}
		shm_l3ix_unlock(ix);
	}
	shm_l3ix_count(ix, L3IX_DROPS, dropped);
	shm_l3ix_count(ix, L3IX_REFRESHES, 1);
	h->scan_real_ns = real0;
	/* complete unless something was evicted meanwhile (which set sync_full again) */
	if (!atomic_load_explicit(&h->sync_full, RELAXED))
		/* release: pairs with the readers' acquire load; every entry written above is visible */
		atomic_store_explicit(&h->complete_ns, sc->t0, memory_order_release);
out:
	if (sc)
		free(sc->seen), free(sc->known);
	free(sc);
	shm_mutex_unlock(a->shm, &h->sync_mu);
}

/* ---- refresh (after a directory probe) ---- */

static void refresh(struct sc_arena *a, const char *ns, const int32_t *tokens, uint32_t n,
		    const struct l3_probe_log *log, const struct sc_location *loc, uint64_t t0)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	struct sc_key keys[L3_MAX_PROBES];
	if (!ix || !ix->nsets || (log->n && key_pfx_hashes(a->shm->hv.key_secret, ns, tokens, n, log->lens, log->n, keys)))
		return;
	int tok = l2_verify_tokens(a);
	uint32_t pos = 0, neg = 0, evicted = 0, full = 0;
	/* between reading the directory and writing what it saw: a writer may change both in between
	 * (shm_l3ix_put_locked keeps whichever entry was confirmed later) */
	shm_sched_point("l3ix.refresh.read");
	if (shm_l3ix_lock(ix))
		return;
	uint64_t gen = atomic_load_explicit(&ix->hdr->dir_gen, RELAXED);
	/* a length added within the directory's mtime tick may be missing: the interval bounds that too */
	shm_l3ix_set_lengths_locked(ix, log->all, log->nall, t0, (uint64_t)log->all_mtime_ns);
	for (uint32_t i = 0; i < log->n; i++) {
		struct shm_l3ix_entry e;
		if (log->state[i] != L3_PROBE_ABSENT && log->state[i] != L3_PROBE_FOUND)
			continue;
		entry_from(&e, keys[i], log->lens[i], log->l3key[i], t0, gen);
		if (log->state[i] == L3_PROBE_FOUND)
			loc_into(&e, loc), pos++;
		else
			e.flags = SHM_L3IX_NEG, neg++;
		uint32_t ev;
		if (shm_l3ix_put_locked(ix, &e, tok ? tokens : NULL, &ev))
			full++;
		evicted += ev;
	}
	shm_l3ix_unlock(ix);
	shm_l3ix_count(ix, L3IX_REFRESHES, 1);
	shm_l3ix_count(ix, L3IX_INSERTS, pos + neg - full);
	shm_l3ix_count(ix, L3IX_EVICTIONS, evicted);
	shm_l3ix_count(ix, L3IX_FULL, full);
	uint64_t p = pos, q = neg, ev = evicted;
	SC_PROBE(l3_index_refresh, p, q, ev);
}

/* The directory probe, then what it saw goes into the index. */
static int fallback(struct sc_arena *a, struct sc_l3 *l3, int bound, const char *ns, const int32_t *tokens,
		    uint32_t n, struct sc_location *loc, uint32_t *bad)
{
	uint64_t t0 = shm_now_ns();
	struct l3_probe_log *log = bound ? malloc(sizeof(*log)) : NULL;
	int rc = l3_locate_dir(l3, ns, tokens, n, loc, log, bad);
	if (rc >= 0 && log)
		refresh(a, ns, tokens, n, log, loc, t0);
	free(log);
	struct shm_l3ix *ix = arena_l3ix(a);
	if (ix)
		shm_l3ix_count(ix, L3IX_FALLBACKS, 1);
	return rc;
}

/* Drop the index entry @snap (an object it names is gone) and every L2 mirror of its digest. */
static void drop_vanished(struct sc_arena *a, struct sc_digest d)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	if (ix)
		shm_l3ix_count(ix, L3IX_VANISHED, 1);
	l3ix_on_objects_gone(a, &d, 1);
	l2_invalidate_why(a, d, SC_MISS_EVICTED_JANITOR);
}

/* Nothing is stored for any prefix of @tokens: was some prefix of them dropped because its object
 * went from L3 (a departure noted by l3ix_objects_gone_why)? The reason + 1 (0: no). One hashing
 * pass over the lengths the index knows; a miss path only. */
static int gone_noted(struct sc_arena *a, const char *ns, const int32_t *tokens, uint32_t n)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	uint32_t lens[L3_MAX_PROBES];
	struct sc_key keys[L3_MAX_PROBES];
	uint64_t checked;
	if (!ix || !ix->nsets)
		return 0;
	int k = shm_l3ix_lengths(ix, n, lens, L3_MAX_PROBES, &checked);
	if (k <= 0 || key_pfx_hashes(a->shm->hv.key_secret, ns, tokens, n, lens, (uint32_t)k, keys))
		return 0;
	for (int i = 0; i < k; i++) {
		uint32_t detail;
		int why = l2_depart_reason(a, l2_key_fp(keys[i].lo, keys[i].hi), &detail);
		if (why == SC_MISS_EVICTED_JANITOR || why == SC_MISS_QUARANTINED)
			return why + 1;
	}
	return 0;
}

/*
 * Re-puts by any process of this host on the bound directory (struct l3_state's journal): drop
 * the index entries of the prefixes whose entry now names another digest, so that an L2 mirror of
 * the old digest is never served on the index's word (the directory probe finds the new one).
 * Two loads when nothing changed. Processes race to apply the same keys: dropping is idempotent,
 * and repl_seen only moves forward (CAS).
 */
static void sync_replaced(struct sc_arena *a, struct sc_l3 *l3)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	if (!ix || !ix->nsets)
		return; /* no index (or one refused since it was bound): nothing to keep in step */
	/* acquire: pairs with journal_replaced's fetch_add (the slots written before it follow) */
	uint64_t seq = atomic_load_explicit(&l3->st->repl_seq, memory_order_acquire);
	uint64_t seen = atomic_load_explicit(&ix->hdr->repl_seen, memory_order_acquire);
	if (seen == seq + 1)
		return;
	int all = !seen ? seq != 0 : seen > seq + 1 || seq + 1 - seen > L3_REPL_SLOTS;
	for (uint64_t t = seen ? seen - 1 : seq; !all && t < seq; t++) {
		struct l3_repl *r = &l3->st->repl[t % L3_REPL_SLOTS];
		uint64_t s1 = atomic_load_explicit(&r->seq, memory_order_acquire); /* pairs with its release */
		struct sc_digest key = { atomic_load_explicit(&r->lo, memory_order_relaxed),
					 atomic_load_explicit(&r->hi, memory_order_relaxed) };
		atomic_thread_fence(memory_order_acquire);
		if (s1 != t + 1 || atomic_load_explicit(&r->seq, memory_order_relaxed) != s1)
			all = 1; /* overwritten by a later re-put, or being written: forget everything */
		else
			l3ix_on_prefix_gone(a, key);
	}
	if (all)
		l3ix_invalidate_all(a);
	(void)atomic_compare_exchange_strong_explicit(&ix->hdr->repl_seen, &seen, seq + 1, memory_order_release,
						      memory_order_relaxed);
}

int l3ix_locate(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		uint64_t now, struct l3ix_found *f, struct sc_location *loc)
{
	uint64_t t0 = SC_PROBE_ENABLED(l3_index) ? shm_now_ns() : 0;
	int bound = l3ix_bind(a, l3);
	if (bound)
		sync_replaced(a, l3);
	struct ix_res r;
	int rc = bound ? ix_probe(a, l3, ns, tokens, n, now ? now : shm_now_ns(), &r) : -EAGAIN;
	if (!bound)
		r.why = WHY_UNBOUND;
	struct shm_l3ix *ix = arena_l3ix(a);
	if (rc == 1) {
		f->len = r.lens[r.at];
		f->pfx = r.keys[r.at];
		f->snap = r.snap;
		f->from_index = 1;
		if (ix)
			shm_l3ix_count(ix, L3IX_HITS, 1);
		probe_fire(WHY_HIT, f->len, t0);
		return (int)f->len;
	}
	if (rc != -EAGAIN)
		return rc;
	if (ix) {
		shm_l3ix_count(ix, L3IX_MISSES, 1);
		if (r.why == WHY_STALE)
			shm_l3ix_count(ix, L3IX_STALE, 1);
	}
	probe_fire(r.why, n, t0);
	f->from_index = 0;
	rc = fallback(a, l3, bound, ns, tokens, n, loc, &f->bad);
	if (rc == 0 && bound)
		f->gone = gone_noted(a, ns, tokens, n);
	if (rc > 0) {
		f->len = (uint32_t)rc;
		uint32_t len = f->len;
		if (key_pfx_hashes(a->shm->hv.key_secret, ns, tokens, n, &len, 1, &f->pfx))
			return -EINVAL;
	}
	return rc;
}

int l3ix_complete(struct sc_arena *a, struct sc_l3 *l3, const struct l3ix_found *f, struct sc_location *loc)
{
	struct sc_digest d = { f->snap.e.digest_lo, f->snap.e.digest_hi };
	int rc = sc_l3_lookup(l3, d, loc);
	if (rc == -ENOENT) {
		drop_vanished(a, d);
		return -ENOENT;
	}
	if (rc == -EBADMSG)
		return -ENOENT; /* a bad header: quarantined (which dropped its entries and mirrors), a miss */
	if (rc)
		return rc;
	loc->token_count = f->len;
	loc->prefix = (struct sc_digest){ f->snap.e.l3key_lo, f->snap.e.l3key_hi };
	return 0;
}

int l3ix_entry_tokens_equal(struct sc_arena *a, struct sc_l3 *l3, const struct l3ix_found *f, const char *ns,
			    const int32_t *tokens)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	if (!ix || !l2_verify_tokens(a))
		return 1;
	if (f->snap.e.flags & SHM_L3IX_TOKENS) {
		int eq = shm_l3ix_tokens_equal(ix, &f->snap, tokens);
		if (eq == 0)
			key_collision_count(a, 1, f->len);
		if (eq != -EAGAIN)
			return eq;
	}
	/* the entry keeps no token ids (there were no free pages): the prefix entry file has them */
	char rel[48];
	l3_pfx_relpath(f->snap.e.l3key_lo, f->snap.e.l3key_hi, rel);
	int fd = l3_open_file(l3->pfxfd, rel, O_RDONLY);
	if (fd < 0)
		return -EAGAIN;
	struct l3_pfx p;
	int32_t *tok = NULL;
	char *sns = malloc(SC_L3_STR_MAX + 1);
	int rc = sns ? l3_read_pfx(fd, &p, &tok, sns) : -ENOMEM;
	close(fd);
	int eq = -EAGAIN;
	if (!rc && tok && p.digest_lo == f->snap.e.digest_lo && p.digest_hi == f->snap.e.digest_hi) {
		/* the file still says what the entry says: now whose prefix is it? */
		eq = p.token_count == f->len && !memcmp(tok, tokens, (size_t)f->len * 4) && !strcmp(sns, ns ? ns : "");
		if (!eq)
			key_collision_count(a, 1, f->len);
	}
	free(tok);
	free(sns);
	return eq;
}

void l3ix_vanished(struct sc_arena *a, struct sc_digest d)
{
	drop_vanished(a, d);
}

int l3ix_locate_full(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
		     struct sc_location *loc)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		struct l3ix_found f = { 0 };
		int rc = l3ix_locate(a, l3, ns, tokens, n, 0, &f, loc);
		if (rc <= 0 || !f.from_index)
			return rc;
		/* no L2 entry vouches for the tokens here: the index entry's own ids must be ours */
		if (l3ix_entry_tokens_equal(a, l3, &f, ns, tokens) != 1)
			break;
		/* the descriptor and sizes come from the object's header, which also proves it is there */
		rc = l3ix_complete(a, l3, &f, loc);
		if (rc != -ENOENT)
			return rc ? rc : (int)f.len;
	}
	return l3_locate_dir(l3, ns, tokens, n, loc, NULL, NULL);
}

/* ---- coherence: writers attached to the arena ---- */

void l3ix_on_put(struct sc_arena *a, struct sc_l3 *l3, const char *ns, const int32_t *tokens,
		 const struct sc_location *loc)
{
	if (!l3ix_bind(a, l3))
		return;
	struct shm_l3ix *ix = arena_l3ix(a);
	struct sc_key key;
	uint32_t len = loc->token_count;
	if (key_pfx_hashes(a->shm->hv.key_secret, ns, tokens, len, &len, 1, &key))
		return;
	struct shm_l3ix_entry e;
	uint32_t ev = 0;
	if (shm_l3ix_lock(ix))
		return;
	entry_from(&e, key, len, loc->prefix, shm_now_ns(), atomic_load_explicit(&ix->hdr->dir_gen, RELAXED));
	loc_into(&e, loc);
	int rc = shm_l3ix_put_locked(ix, &e, l2_verify_tokens(a) ? tokens : NULL, &ev);
	shm_l3ix_add_length_locked(ix, len);
	shm_l3ix_unlock(ix);
	shm_l3ix_count(ix, rc ? L3IX_FULL : L3IX_INSERTS, 1);
	shm_l3ix_count(ix, L3IX_EVICTIONS, ev);
}

static int dg_cmp(const void *x, const void *y)
{
	/* (sorted by lo first) */
	const struct sc_digest *a = x, *b = y;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return (a->hi > b->hi) - (a->hi < b->hi);
}

void l3ix_on_objects_gone(struct sc_arena *a, const struct sc_digest *digests, size_t n)
{
	l3ix_objects_gone_why(a, digests, n, SC_MISS_EVICTED_JANITOR);
}

void l3ix_objects_gone_why(struct sc_arena *a, const struct sc_digest *digests, size_t n, int why)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	if (!ix || !ix->nsets || !n)
		return;
	struct sc_digest *sorted = malloc(n * sizeof(*sorted));
	if (sorted) {
		memcpy(sorted, digests, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), dg_cmp);
	}
	uint64_t dropped = 0;
	if (shm_l3ix_lock(ix)) {
		free(sorted);
		return;
	}
	/* the prefixes dropped, noted after the index's mutex is released (the policy mutex is never
	 * taken under it): a restore that then finds nothing says "evicted", not "never stored" */
	uint64_t gone[64];
	size_t ngone = 0;
	uint32_t total = ix->nsets * SHM_L3IX_WAYS;
	for (uint32_t i = 0; i < total; i++) {
		struct shm_l3ix_entry *e = &ix->ent[i];
		if (!(e->flags & SHM_L3IX_POS))
			continue;
		struct sc_digest d = { e->digest_lo, e->digest_hi };
		int hit = 0;
		if (sorted)
			hit = bsearch(&d, sorted, n, sizeof(d), dg_cmp) != NULL;
		else
			for (size_t j = 0; j < n && !hit; j++)
				hit = sc_digest_equal(d, digests[j]);
		if (hit) {
			if (ngone < sizeof(gone) / sizeof(gone[0]))
				gone[ngone++] = l2_key_fp(e->key_lo, e->key_hi);
			shm_l3ix_clear_locked(ix, i);
			dropped++;
		}
	}
	shm_l3ix_unlock(ix);
	free(sorted);
	shm_l3ix_count(ix, L3IX_DROPS, dropped);
	for (size_t i = 0; i < ngone; i++)
		l2_depart_note(a, gone[i], why, 0);
}

void l3ix_on_prefix_gone(struct sc_arena *a, struct sc_digest l3key)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	if (!ix || !ix->nsets || shm_l3ix_lock(ix))
		return;
	uint64_t dropped = 0;
	uint32_t total = ix->nsets * SHM_L3IX_WAYS;
	for (uint32_t i = 0; i < total; i++) {
		struct shm_l3ix_entry *e = &ix->ent[i];
		if ((e->flags & SHM_L3IX_POS) && e->l3key_lo == l3key.lo && e->l3key_hi == l3key.hi) {
			shm_l3ix_clear_locked(ix, i);
			dropped++;
		}
	}
	shm_l3ix_unlock(ix);
	shm_l3ix_count(ix, L3IX_DROPS, dropped);
}

void l3ix_invalidate_all(struct sc_arena *a)
{
	struct shm_l3ix *ix = arena_l3ix(a);
	if (!ix)
		return;
	shm_l3ix_incomplete(ix);
	/* release: pairs with the readers' acquire load; every entry is re-checked */
	atomic_fetch_add_explicit(&ix->hdr->dir_gen, 1, memory_order_release);
}

/* ---- stats ---- */

int sc_l3_index_stats(struct sc_arena *a, struct sc_l3_index_stats *out)
{
	if (!a || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	struct shm_l3ix *ix = arena_l3ix(a);
	if (!ix)
		return -EBADMSG;
	_Atomic uint64_t *c = ix->hdr->counters;
	out->capacity = ix->nsets * SHM_L3IX_WAYS;
	out->refresh_ms = a->shm->hv.l3ix_refresh_ms;
	out->token_verify = l2_verify_tokens(a);
	out->pages = ix->npages;
	out->free_pages = __atomic_load_n(&ix->hdr->free_pages, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < out->capacity; i++) {
		uint32_t fl = __atomic_load_n(&ix->ent[i].flags, __ATOMIC_RELAXED);
		out->positive += (fl & SHM_L3IX_POS) != 0;
		out->negative += (fl & SHM_L3IX_NEG) != 0;
	}
	out->bound = __atomic_load_n(&ix->hdr->dir_ino, __ATOMIC_RELAXED) != 0;
	out->hits = atomic_load_explicit(&c[L3IX_HITS], RELAXED);
	out->negative_hits = atomic_load_explicit(&c[L3IX_NEG_HITS], RELAXED);
	out->misses = atomic_load_explicit(&c[L3IX_MISSES], RELAXED);
	out->fallbacks = atomic_load_explicit(&c[L3IX_FALLBACKS], RELAXED);
	out->stale = atomic_load_explicit(&c[L3IX_STALE], RELAXED);
	out->refreshes = atomic_load_explicit(&c[L3IX_REFRESHES], RELAXED);
	out->inserts = atomic_load_explicit(&c[L3IX_INSERTS], RELAXED);
	out->evictions = atomic_load_explicit(&c[L3IX_EVICTIONS], RELAXED);
	out->drops = atomic_load_explicit(&c[L3IX_DROPS], RELAXED);
	out->full = atomic_load_explicit(&c[L3IX_FULL], RELAXED);
	out->vanished = atomic_load_explicit(&c[L3IX_VANISHED], RELAXED);
	out->foreign = atomic_load_explicit(&c[L3IX_FOREIGN], RELAXED);
	out->key_collisions_l2 = atomic_load_explicit(&c[L3IX_COLL_L2], RELAXED);
	out->key_collisions_index = atomic_load_explicit(&c[L3IX_COLL_INDEX], RELAXED);
	out->key_collisions_l3 = atomic_load_explicit(&c[L3IX_COLL_L3], RELAXED);
	out->key_collisions = out->key_collisions_l2 + out->key_collisions_index + out->key_collisions_l3;
	return 0;
}
