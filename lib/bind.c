/*
 * lib/bind.c — binding an L3 store to an arena: the arena's location index serves the store's
 * locates, fills may use the arena's registered heap, and what the store's lower layers remove
 * (quarantine, the janitor's evictions and drops, a dropped prefix entry) reaches the arena through
 * the hooks installed here (struct l3_hooks): the L3 modules never call up into the index or L2.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "l2/l2.h"
#include "l3/dirindex.h"
#include "l3/files.h"
#include "l3/fill.h"
#include "l3/format.h"
#include "l3/locindex.h"

/* Quarantines done while no arena was bound left DIR/quarantine/<digest>.mirror: invalidate those
 * digests' mirrors in @arena now, then drop the records. */
static void apply_mirror_records(struct sc_l3 *l3, struct sc_arena *arena)
{
	DIR *d = l3_opendir(l3->quarfd);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		uint64_t lo, hi;
		if (l3_name_digest(e->d_name, ".mirror", &lo, &hi))
			continue;
		struct sc_digest dg = { lo, hi };
		l3ix_objects_gone_why(arena, &dg, 1, SC_MISS_QUARANTINED); /* the location index may name it too */
		if (l2_invalidate_why(arena, dg, SC_MISS_QUARANTINED) >= 0)
			unlinkat(dirfd(d), e->d_name, 0); /* ENOENT: another binder got it first */
	}
	closedir(d);
}

/* Objects evicted: the location index forgets them, the listener hears of each. */
static void objects_gone(struct sc_arena *arena, const struct sc_digest *d, size_t n)
{
	l3ix_on_objects_gone(arena, d, n);
	for (size_t i = 0; i < n; i++)
		events_note(arena, SC_EVENT_L3_OBJECT_GONE, 0, (struct sc_key){ 0, 0 }, d[i], 0);
}

/* A quarantined object: the location index forgets it and L2 mirrors of it go; the listener hears
 * of it last, so that what it looks up on the event finds the object gone everywhere. */
static void quarantined(struct sc_arena *arena, struct sc_digest d)
{
	l3ix_objects_gone_why(arena, &d, 1, SC_MISS_QUARANTINED);
	l2_invalidate_why(arena, d, SC_MISS_QUARANTINED);
	events_note(arena, SC_EVENT_L3_OBJECT_GONE, 0, (struct sc_key){ 0, 0 }, d, 0);
}

static void prefix_gone(struct sc_arena *arena, struct sc_digest key)
{
	l3ix_on_prefix_gone(arena, key);
	events_note(arena, SC_EVENT_L3_REMOVED, 0, (struct sc_key){ key.lo, key.hi }, (struct sc_digest){ 0, 0 }, 0);
}

/* A put through a bound handle (the location index learnt it from the put itself). */
static void stored(struct sc_arena *arena, struct sc_digest key, struct sc_digest d, uint32_t ntok)
{
	events_note(arena, SC_EVENT_L3_STORED, 0, (struct sc_key){ key.lo, key.hi }, d, ntok);
}

static const struct l3_hooks bound_hooks = {
	.objects_gone = objects_gone,
	.quarantined = quarantined,
	.prefix_gone = prefix_gone,
	.stored = stored,
};

int sc_l3_bind_arena(struct sc_l3 *l3, struct sc_arena *arena)
{
	if (!l3 || !arena)
		return -EINVAL;
	apply_mirror_records(l3, arena);
	l3->hooks = &bound_hooks;
	l3->arena = arena;
	if (l3ix_bind(arena, l3) && l3->recon_changed)
		l3ix_invalidate_all(arena); /* our reconciliation changed the directory: re-check all */
	/* registering pins every page of the range in each thread's ring: cheap on hugetlbfs (a few
	 * ms per GiB, already faulted), slow on 4 KiB shmem (~0.4 ms per MiB), where plain reads win */
	if (arena->shm->page_size < (2u << 20))
		return 0;
	uint64_t size;
	void *heap = shm_region(arena->shm, SHM_REGION_HEAP, &size);
	return sc_l3_register_memory(l3, heap, size);
}



int sc_l3_locate_longest(struct sc_l3 *l3, const char *ns, const int32_t *tokens, uint32_t n,
			 struct sc_location *loc)
{
	if (!l3 || !tokens || !n || !loc || (ns && strlen(ns) > SC_L3_STR_MAX))
		return -EINVAL;
	if (l3->arena)
		return l3ix_locate_full(l3->arena, l3, ns, tokens, n, loc);
	return l3_locate_dir(l3, ns, tokens, n, loc, NULL, NULL);
}

