/*
 * lib/l3/evict.c — sc_l3_evict_to: least recently used objects go until the store is under the
 * target (local mode, under DIR/lock); segments no object names go with the sweep; the bound
 * arena's location index forgets the evicted objects through the hooks. A large store is not
 * listed while the order the last listing left (lib/l3/victims.c) has victims enough.
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
#include "ring.h"
#include "format.h"
#include "janitor.h"
#include "reconcile.h"
#include "segstore.h"
#include "victims.h"

struct victim {
	uint64_t lo, hi, bytes;
	int64_t mtime;
	int segmented, gone;
};

struct victims {
	struct victim *v;
	size_t n, cap;
	uint64_t total;
	struct l3_segs segs;
};

static int collect(struct sc_l3 *l3, int dfd, const char *sub, const char *name, void *ctx)
{
	struct victims *vs = ctx;
	(void)sub;
	uint64_t lo, hi;
	struct stat sb;
	if (l3_name_digest(name, ".sc3", &lo, &hi) || fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (vs->n == vs->cap) {
		size_t cap = vs->cap ? vs->cap * 2 : 256;
		struct victim *v = realloc(vs->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		vs->v = v, vs->cap = cap;
	}
	int seg = l3_segs_object(l3, &vs->segs, dfd, name, (uint64_t)sb.st_size, 1, NULL) == 1;
	vs->v[vs->n++] = (struct victim){ lo, hi, (uint64_t)sb.st_size, (int64_t)shm_ts_ns(sb.st_mtim), seg, 0 };
	vs->total += (uint64_t)sb.st_size;
	return 0;
}


static int by_age(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;
	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}


/* What a large store's next evictions take without listing: the head of this listing's order. */
static void save_order(struct sc_l3 *l3, const struct victims *vs, uint64_t total)
{
	struct l3_cand *c = malloc((vs->n ? vs->n : 1) * sizeof(*c));
	size_t k = 0;
	for (size_t i = 0; c && i < vs->n; i++)
		if (!vs->v[i].gone)
			l3_cand_set(&c[k++], vs->v[i].lo, vs->v[i].hi, vs->v[i].bytes, vs->v[i].mtime, vs->v[i].segmented);
	if (c)
		(void)l3_victims_save(l3, c, k, total);
	free(c);
}

int sc_l3_evict_to(struct sc_l3 *l3, uint64_t target)
{
	if (!l3)
		return -EINVAL;
	if (l3->shared)
		return l3_janitor_evict_to(l3, target);
	int rc = l3_flock_ex(l3);
	if (rc)
		return rc;
	/* a large store: from the last listing's order while it lasts */
	int reached = 0, early = 0;
	if (l3_reconcile_large(l3) && (early = l3_victims_evict(l3, target, NULL, &reached)) >= 0) {
		ADD(evictions, early);
		if (reached) {
			l3_flock_un(l3);
			return early;
		}
	}
	early = early > 0 ? early : 0;
#ifdef SC_TEST_HOOKS
	atomic_fetch_add_explicit(&l3_test_evict_listings, 1, RELAXED);
#endif
	struct victims vs = { 0 };
	rc = l3_segs_begin(l3, &vs.segs);
	if (!rc)
		rc = l3_scan(l3, l3->objfd, collect, &vs);
	int evicted = 0;
	if (!rc) {
		qsort(vs.v, vs.n, sizeof(*vs.v), by_age);
		/* physical bytes: a segment counts once, and leaves with the last object naming it */
		uint64_t total = vs.total + vs.segs.bytes, objects = vs.n, objbytes = vs.total;
		struct sc_digest *gone = l3->arena ? malloc(vs.n * sizeof(*gone) + 1) : NULL;
		for (size_t i = 0; i < vs.n && total > target; i++) {
			char rel[48];
			uint64_t freed = 0;
			l3_obj_relpath(vs.v[i].lo, vs.v[i].hi, rel);
			(void)l3_segs_object(l3, &vs.segs, l3->objfd, rel, vs.v[i].bytes, -1, &freed);
			if (l3_unlinkat(l3->objfd, rel) < 0) {
				(void)l3_segs_object(l3, &vs.segs, l3->objfd, rel, vs.v[i].bytes, 1, NULL);
				continue;
			}
			l3_kept_forget(l3);
			if (gone)
				gone[evicted] = (struct sc_digest){ vs.v[i].lo, vs.v[i].hi };
			total -= vs.v[i].bytes + freed;
			objbytes -= vs.v[i].bytes;
			objects--;
			evicted++;
			vs.v[i].gone = 1;
		}
		/* what no object names any more goes (lib/l3/segstore.c: the rule that keeps a put's) */
		if (l3_segs_sweep(l3, &vs.segs, NULL, NULL) == 0)
			total = objbytes + vs.segs.bytes;
		/* attached: the index forgets them before we return (without memory for the list, the
		 * fills that find them gone drop them) */
		if (gone && evicted)
			l3_tell_objects_gone(l3, gone, (size_t)evicted);
		free(gone);
		l3_segs_publish(l3, &vs.segs, objects, total);
		save_order(l3, &vs, total);
		ADD(evictions, evicted);
		rc = evicted + early;
	}
	l3_flock_un(l3);
	l3_segs_end(&vs.segs);
	free(vs.v);
	return rc;
}
