/*
 * lib/l3/reconcile.c — reconciliation at open (local mode): what crashed writers left. A temp
 * file whose writer no longer holds its lock and that is not young is removed (its writes may still
 * land while the lock is held: lib/l3/hosts.c l3_left_over); an object with a bad header is
 * quarantined; a prefix entry naming an object that is gone is dropped.
 *
 * Bounded per open. A small store (at most RECON_FULL_MAX objects by DIR/state) is reconciled
 * whole, as a scan of it costs less than a few ms, and its counters recounted. A larger one gets
 * one step: every temp file in DIR/tmp (where every put writes; what is there is what is in
 * flight or what crashed writers left, whatever the store's size) up to 256 of them, then
 * RECON_STEP entries of objects/ and prefix/ from the cursor in DIR/state, where the previous step
 * stopped (a janitor pass that does not list: RECON_STEP_JANITOR); the cursor wraps, so every
 * entry is judged within a bounded number of opens and passes (or at once by a janitor pass with
 * SC_L3_JANITOR_FULL). Meanwhile nothing wrong is served: a temp
 * file is never a name anyone reads, a fill verifies every byte of an object (a bad one is
 * quarantined then), and a locate drops an entry whose object is gone. What a step does not do:
 * recount (the counters move by each put and removal; evictions and janitor passes recount), and
 * sweep segments no manifest names, or manifests naming a missing segment (a fill of one fails
 * to read it: a miss): janitor passes do, since both need every manifest read.
 *
 * A step takes DIR/lock without waiting: while another process reconciles or evicts, an open does
 * no reconciliation at all (it is the other's work, and an open never waits on a scan).
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
#include "quarantine.h"
#include "segstore.h"
#include "reconcile.h"
#include "../../shm/fault.h"

/* A temp file (.tmp-<writer>.<n>), or a captured prefix entry (.drop-<writer>.<n>), left over by
 * a writer that is gone (lib/l3/hosts.c: its OFD lock is free and it is not young). */
static int tmp_is_stale(struct sc_l3 *l3, int dfd, const char *name)
{
	return l3_left_over(l3, dfd, name);
}


#define RECON_FULL_MAX 1024u /* objects: a store this small is reconciled whole at open */
#define RECON_STEP 32u       /* entries an open judges above it (each a stat or a 4 KiB read) */
#define RECON_STEP_JANITOR 128u /* entries a janitor pass that does not list judges */
#define SWEEP_DIRS 512u      /* objects/00..ff, then prefix/00..ff */

#ifdef SC_TEST_HOOKS
unsigned l3_recon_full_max = RECON_FULL_MAX, l3_recon_step = 0;
#define FULL_MAX l3_recon_full_max
#define STEP(n) (l3_recon_step ? l3_recon_step : (n))
#else
#define FULL_MAX RECON_FULL_MAX
#define STEP(n) (n)
#endif

struct recon {
	uint64_t objects, bytes, stale, quarantined, dropped;
	int full;               /* a whole scan: segments listed, counters recounted */
	struct l3_segs segs;
};

static int recon_obj(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct recon *r = ctx;
	(void)sub;
	if (!strncmp(name, ".tmp-", 5)) {
		if (tmp_is_stale(l3, dfd, name) && unlinkat(dfd, name, 0) == 0)
			r->stale++;
		return 0;
	}
	uint64_t lo, hi, fb = 0;
	if (l3_name_digest(name, ".sc3", &lo, &hi))
		return 0; /* not ours: leave it alone */
	uint8_t block[L3_HDR_BLOCK];
	struct l3_obj_hdr h;
	int fd = l3_open_file(dfd, name, O_RDONLY);
	if (fd < 0)
		return 0; /* gone, or not a regular file (a planted link or FIFO): not ours, left alone */
	int rc = l3_read_block(fd, block, &fb);
	close(fd);
	if (!rc)
		rc = l3_hdr_parse(block, fb, &h);
	if (!rc && (h.digest_lo != lo || h.digest_hi != hi))
		rc = -EBADMSG;
	if (rc) {
		if (l3_quarantine(l3, lo, hi, EBADMSG) == 0)
			r->quarantined++;
		return 0;
	}
	/* a segmented object one of whose segments is gone can never be read: removed once it is not
	 * young (a put that has just written its manifest rewrites what a sweep took) */
	struct stat sb;
	if (r->full && l3_segs_object(l3, &r->segs, dfd, name, fb, 1, NULL) == -ENOENT && fstatat(dfd, name, &sb, 0) == 0 &&
	    shm_realtime_ns() - shm_ts_ns(sb.st_mtim) > L3_TMP_STALE_NS && unlinkat(dfd, name, 0) == 0) {
		r->dropped++;
		return 0;
	}
	r->objects++;
	r->bytes += fb;
	return 0;
}


static int recon_pfx(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct recon *r = ctx;
	if (!strncmp(name, ".tmp-", 5)) {
		if (tmp_is_stale(l3, dfd, name) && unlinkat(dfd, name, 0) == 0)
			r->stale++;
		return 0;
	}
	if (!strncmp(name, ".drop-", 6)) {
		if (tmp_is_stale(l3, dfd, name) && l3_pfx_drop_resolve(l3, dfd, sub, name) == 1)
			r->dropped++;
		return 0;
	}
	uint64_t lo, hi;
	struct l3_pfx p;
	int rc = l3_read_pfx_named(dfd, name, name, &p, &lo, &hi);
	if (rc == 1)
		return 0;
	if (!rc) {
		char rel[48];
		struct stat sb;
		l3_obj_relpath(p.digest_lo, p.digest_hi, rel);
		/* an entry whose object was quarantined stays: the next restore of it reports the
		 * failed verification (and drops it) instead of a silent "nothing stored" */
		if (fstatat(l3->objfd, rel, &sb, AT_SYMLINK_NOFOLLOW) < 0 &&
		    !l3_quarantined_since(l3, p.digest_lo, p.digest_hi, p.created_ns))
			rc = -ENOENT;
	}
	/* only what is known bad or orphaned is dropped, never on a transient error, and never an
	 * entry that a concurrent put has just checked (the capture protocol) */
	if (rc == -ENOENT || rc == -EBADMSG) {
		char rel[48];
		snprintf(rel, sizeof(rel), "%s/%s", sub, name);
		if (l3_pfx_drop(l3, rel) == 1)
			r->dropped++;
	}
	return 0;
}


/* Judge at most @max temp files of DIR/tmp (0: all). */
static void recon_tmp(struct sc_l3 *l3, struct recon *r, unsigned max)
{
	if (l3->tmpfd < 0)
		return;
	DIR *d = l3_opendir(l3->tmpfd);
	if (!d)
		return;
	struct dirent *e;
	for (unsigned n = 0; (!max || n < max) && (e = readdir(d)); n++) {
		if (strncmp(e->d_name, ".tmp-", 5) || !tmp_is_stale(l3, dirfd(d), e->d_name))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			r->stale++;
		shm_fault_point("l3.recon.judged");
	}
	closedir(d);
}

/* One bounded step of the sweep: up to @budget entries of objects/ and prefix/ from the cursor in
 * DIR/state; caller holds DIR/lock. */
static void recon_sweep(struct sc_l3 *l3, struct recon *r, unsigned budget)
{
	struct l3_state *st = l3->st;
	uint64_t pos = atomic_load_explicit(&st->sweep_pos, RELAXED) % SWEEP_DIRS;
	long off = (long)atomic_load_explicit(&st->sweep_off, RELAXED);
	unsigned seen = 0;
	for (unsigned dirs = 0; seen < budget && dirs <= SWEEP_DIRS; dirs++) {
		char sub[3];
		snprintf(sub, sizeof(sub), "%02x", (unsigned)(pos % 256));
		int top = pos < 256 ? l3->objfd : l3->pfxfd;
		int fd = openat(top, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		int done = 1;
		if (d) {
			struct dirent *e;
			if (off > 0)
				seekdir(d, off);
			while (seen < budget && (e = readdir(d))) {
				if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
					continue;
				seen++;
				(pos < 256 ? recon_obj : recon_pfx)(l3, dirfd(d), sub, e->d_name, r);
				shm_fault_point("l3.recon.judged");
			}
			done = seen < budget;
			off = done ? 0 : telldir(d);
			closedir(d);
		} else if (fd >= 0) {
			close(fd);
		}
		if (!done)
			break;
		off = 0;
		if (++pos == SWEEP_DIRS) {
			pos = 0;
			atomic_fetch_add_explicit(&st->sweep_rounds, 1, RELAXED);
		}
	}
	atomic_store_explicit(&st->sweep_pos, pos, RELAXED);
	atomic_store_explicit(&st->sweep_off, (uint64_t)(off > 0 ? off : 0), RELAXED);
}

int l3_reconcile_large(struct sc_l3 *l3)
{
	return atomic_load_explicit(&l3->st->objects, RELAXED) > FULL_MAX;
}

void l3_reconcile_step_locked(struct sc_l3 *l3, int janitor, uint64_t *stale, uint64_t *quarantined, uint64_t *dropped)
{
	struct recon r = { 0 };
	unsigned n = janitor ? STEP(RECON_STEP_JANITOR) : STEP(RECON_STEP);
	recon_tmp(l3, &r, n > 256 ? n : 256);
	recon_sweep(l3, &r, n);
	l3->recon_changed = r.quarantined || r.dropped;
	*stale += r.stale;
	*quarantined += r.quarantined;
	*dropped += r.dropped;
}

int l3_reconcile_open(struct sc_l3 *l3)
{
	if (!l3_reconcile_large(l3))
		return l3_reconcile(l3);
	if (flock(l3->lockfd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
	uint64_t s = 0, q = 0, d = 0;
	l3_reconcile_step_locked(l3, 0, &s, &q, &d);
	l3_flock_un(l3);
	return 0;
}

int l3_reconcile(struct sc_l3 *l3)
{
	int rc = l3_flock_ex(l3);
	if (rc)
		return rc;
	struct recon r = { .full = 1 };
	recon_tmp(l3, &r, 0);
	rc = l3_segs_begin(l3, &r.segs);
	if (!rc)
		rc = l3_scan(l3, l3->objfd, recon_obj, &r);
	if (!rc)
		rc = l3_scan(l3, l3->pfxfd, recon_pfx, &r);
	if (!rc)
		rc = l3_segs_sweep(l3, &r.segs, NULL, NULL);
	if (!rc) {
		r.bytes += r.segs.bytes;
		l3_segs_publish(l3, &r.segs, r.objects, r.bytes);
	}
	l3_segs_end(&r.segs);
	l3->recon_changed = r.quarantined || r.dropped;
	l3_flock_un(l3);
	return rc;
}
