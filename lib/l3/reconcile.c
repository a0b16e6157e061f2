/*
 * lib/l3/reconcile.c — reconciliation at open (local mode): what crashed writers left. A temp
 * file whose writer no longer holds its lock and that is not young is removed (its writes may still
 * land while the lock is held: lib/l3/hosts.c l3_left_over); an object with a bad header is
 * quarantined; a prefix entry naming an object that is gone is dropped; the counters are recounted.
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

/* A temp file (.tmp-<writer>.<n>), or a captured prefix entry (.drop-<writer>.<n>), left over by
 * a writer that is gone (lib/l3/hosts.c: its OFD lock is free and it is not young). */
static int tmp_is_stale(struct sc_l3 *l3, int dfd, const char *name)
{
	return l3_left_over(l3, dfd, name);
}


struct recon {
	uint64_t objects, bytes, stale, quarantined, dropped;
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
	if (l3_segs_object(l3, &r->segs, dfd, name, fb, 1, NULL) == -ENOENT && fstatat(dfd, name, &sb, 0) == 0 &&
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
		if (l3_statat(l3->objfd, rel, &sb) < 0 &&
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


int l3_reconcile(struct sc_l3 *l3)
{
	int rc = l3_flock_ex(l3);
	if (rc == -EBUSY)
		return 0; /* another process reconciles (or holds the lock): the store opens as it is */
	if (rc)
		return rc;
	struct recon r = { 0 };
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
	if (!rc && l3->opts.budget_bytes && r.bytes > l3->opts.budget_bytes) {
		int n = sc_l3_evict_to(l3, l3->opts.budget_bytes / 100 * L3_LOW_WATER_PCT);
		if (n < 0)
			rc = n;
	}
	return rc;
}
