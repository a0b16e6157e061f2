/* lib/arena.c — the public arena API over shm/arena.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "../shm/readers.h"

_Static_assert(SHM_HUGE_AUTO == SC_HUGE_AUTO && SHM_HUGE_REQUIRE == SC_HUGE_REQUIRE && SHM_HUGE_OFF == SC_HUGE_OFF,
	       "shm/arena.h huge modes are enum sc_huge");

int sc_arena_create(const char *name, const struct sc_arena_opts *opts, struct sc_arena **out)
{
	if (!out || !opts)
		return -EINVAL;
	*out = NULL;
	if (opts->size_bytes < SC_ARENA_MIN_BYTES || opts->size_bytes > SC_ARENA_MAX_BYTES)
		return -EINVAL;
	if (opts->huge < SC_HUGE_AUTO || opts->huge > SC_HUGE_OFF || (opts->mode & ~0777u) || (opts->mode & S_IWOTH) ||
	    (opts->flags & ~SC_ARENA_OPT_MASK))
		return -EINVAL;
	/* read without write: such a user could lock every reader slot's byte (a read lock) */
	if ((opts->mode & S_IROTH) || ((opts->mode & S_IRGRP) && !(opts->mode & S_IWGRP)))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(opts->reserved) / sizeof(opts->reserved[0]); i++)
		if (opts->reserved[i])
			return -EINVAL;
	if ((opts->segment_bytes && ((opts->segment_bytes & (opts->segment_bytes - 1)) ||
							  opts->segment_bytes < SC_SEGMENT_MIN ||
							  opts->segment_bytes > SC_SEGMENT_MAX)))
		return -EINVAL;
	/* gid 0 is root's group only when asked for explicitly; otherwise 0 and -1 mean "leave it" */
	int64_t gid = opts->gid;
	if (!(opts->flags & SC_ARENA_OPT_GID) && gid == 0)
		gid = -1;
	if (gid < -1 || gid > (int64_t)UINT32_MAX - 1)
		return -EINVAL;
	struct sc_arena *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	struct shm_params p = {
		.total_bytes = opts->size_bytes,
		.index_entries = opts->index_entries,
		.ring_count = opts->ring_count,
		.ring_bytes = opts->ring_bytes,
		.obs_entries = opts->obs_entries,
		.reader_slots = opts->reader_slots,
		.l3ix_entries = opts->l3_index_entries,
		.arena_flags = (opts->flags & SC_ARENA_NO_TOKEN_VERIFY) ? SHM_ARENA_NO_TOKEN_VERIFY : 0,
		.l3ix_refresh_ms = opts->l3_index_refresh_ms,
		.huge_mode = (uint32_t)opts->huge,
		.seg_bytes = opts->segment_bytes,
		.slots_per_user = opts->slots_per_user,
	};
	int rc = shm_arena_create(opts->dir, name, &p, opts->mode, gid, &a->shm);
	if (rc) {
		free(a);
		return rc;
	}
	*out = a;
	return 0;
}

/* @opts (NULL: defaults) into *@o and the trust it names; -EINVAL for unknown flags or a reserved word. */
static int open_opts(const struct sc_arena_open_opts *opts, struct sc_arena_open_opts *o, struct shm_trust *t)
{
	*o = (struct sc_arena_open_opts){ 0 };
	if (opts)
		*o = *opts;
	if (o->flags & ~SC_ARENA_OPEN_MASK)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]); i++)
		if (o->reserved[i])
			return -EINVAL; /* a field of a later version: refuse rather than ignore it */
	*t = (struct shm_trust){ .any_owner = (o->flags & SC_ARENA_OPEN_ANY_OWNER) != 0,
				 .uid = o->owner_uid ? (int64_t)o->owner_uid : -1 };
	return 0;
}

int sc_arena_open_with(const char *name, const struct sc_arena_open_opts *opts, struct sc_arena **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	struct sc_arena_open_opts o;
	struct shm_trust t;
	if (open_opts(opts, &o, &t))
		return -EINVAL;
	struct sc_arena *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	int rc = shm_arena_open(o.dir, name, &t, 0, &a->shm);
	if (rc) {
		free(a);
		return rc;
	}
	if (arena_is_damaged(a)) {
		/* fsck gave up on it: say so here rather than let every later call fail its own way */
		sc_arena_close(a);
		return -ENOTRECOVERABLE;
	}
	*out = a;
	return 0;
}

int sc_arena_open_dir(const char *dir, const char *name, struct sc_arena **out)
{
	struct sc_arena_open_opts o = { .dir = dir };
	return sc_arena_open_with(name, &o, out);
}

int sc_arena_open(const char *name, struct sc_arena **out)
{
	return sc_arena_open_dir(NULL, name, out);
}

int sc_arena_file_stat(const char *dir, const char *name, struct sc_arena_file *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	struct stat st;
	int rc = shm_arena_stat(dir, name, out->path, sizeof(out->path), &st);
	if (rc)
		return rc;
	out->mode = (uint32_t)st.st_mode;
	out->uid = (uint32_t)st.st_uid;
	out->gid = (uint32_t)st.st_gid;
	out->size = (uint64_t)st.st_size;
	return 0;
}

void sc_arena_close(struct sc_arena *a)
{
	if (!a)
		return;
	if (shm_arena_intact(a->shm) == 0) {
		sc_ring_consumer_close(a); /* gives the consumer role up if this handle holds it */
	} else {
		free(a->ring_cons); /* the file was cut under the mapping: the role's word may be gone */
		a->ring_cons = NULL;
	}
	/* abandoned fills still reading into our memory: their reservations stay tagged with our
	 * token, which the ring keeps alive until the reads are done; the reaper frees them then */
	for (struct arena_orphan *o = a->orphans, *n; o; o = n) {
		n = o->next;
		o->arena = NULL;
		o->next = NULL;
		o->pprev = NULL;
	}
	a->orphans = NULL;
	shm_arena_close(a->shm);
	free(a);
}

int sc_arena_fd(struct sc_arena *a)
{
	if (!a)
		return -EINVAL;
	if (a->shm->forked)
		return -ECHILD;
	/* the description the handle mapped: never the file a path names now (it may be another) */
	int fd = fcntl(a->shm->fd, F_DUPFD_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

int sc_arena_destroy(const char *dir, const char *name)
{
	return shm_arena_destroy(dir, name);
}

const char *sc_backing_name(int backing)
{
	switch (backing) {
	case SC_BACKING_HUGETLBFS_2M: return "hugetlbfs-2M";
	case SC_BACKING_SHMEM_THP: return "shmem-thp";
	case SC_BACKING_SHM_4K: return "shm-4k";
	case SC_BACKING_FILE_4K: return "file-4k";
	default: return "unknown";
	}
}

/* What sc_arena_info and sc_arena_inspect report: reads only (a slotless handle maps PROT_READ). */
static int describe(struct shm_arena *a, struct sc_arena_info *info)
{
	int rc = shm_arena_intact(a);
	if (rc)
		return rc; /* cut shorter than the mapping: every look below would fault */
	const struct shm_header *h = &a->hv;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%s", a->name);
	snprintf(info->path, sizeof(info->path), "%s", a->path);
	info->size_bytes = a->size;
	info->backing = shm_arena_measure(a, &info->page_size);
	if (info->backing == SC_BACKING_SHM_4K && a->backing == SC_BACKING_SHMEM_THP)
		info->backing = a->backing, info->page_size = a->page_size; /* THP seen at attach */
	info->layout_version = h->layout_version;
	info->created_unix = h->created_ns / SHM_NS_PER_SEC;
	info->creator_pid = h->creator_pid;
	struct stat st;
	if (fstat(a->fd, &st) == 0)
		info->mode = st.st_mode & 07777;
	info->reader_slots = h->reader_slots;
	info->index_entries = h->index_entries;
	info->ring_count = h->ring_count;
	info->ring_bytes = h->ring_bytes;
	info->obs_entries = h->obs_entries;
	info->heap_bytes = h->regions[SHM_REGION_HEAP].size;
	info->l3_index_entries = h->l3ix_entries;
	info->l3_index_refresh_ms = h->l3ix_refresh_ms;
	info->flags = (h->arena_flags & SHM_ARENA_NO_TOKEN_VERIFY) ? SC_ARENA_NO_TOKEN_VERIFY : 0;
	info->slots_per_user = h->slots_per_user;
	uint32_t n = shm_readers_count(a);
	uint64_t my_ns = shm_pidns_self();
	for (uint32_t i = 0; i < n; i++) {
		struct shm_reader_slot *s = shm_reader_slot(a, i);
		/* alive by the slot's kernel-held lock, never by pid */
		if (atomic_load_explicit(&s->state, memory_order_acquire) != SHM_SLOT_LIVE || !shm_slot_alive(a, i)) {
			/* not attached, but its byte locked: by someone outside the library (or a claim now) */
			info->locked_slots += shm_ofd_held(a->fd, SHM_LOCK_SLOT(i)) == 1;
			continue;
		}
		if (info->attached_count < SC_INFO_MAX_ATTACHED) {
			uint64_t ns = atomic_load_explicit(&s->pidns, memory_order_relaxed);
			info->attached[info->attached_count].pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
			info->attached[info->attached_count].uid = atomic_load_explicit(&s->uid, memory_order_relaxed);
			info->attached[info->attached_count].other_pidns = ns && my_ns && ns != my_ns;
			info->attached[info->attached_count].slot = i;
			info->attached[info->attached_count].attached_unix =
				atomic_load_explicit(&s->attached_ns, memory_order_relaxed) / SHM_NS_PER_SEC;
		}
		info->attached_count++;
	}
	return 0;
}

int sc_arena_info(struct sc_arena *arena, struct sc_arena_info *info)
{
	if (!arena || !info)
		return -EINVAL;
	return describe(arena->shm, info);
}

int sc_arena_inspect(const char *name, const struct sc_arena_open_opts *opts, struct sc_arena_info *info)
{
	struct sc_arena_open_opts o;
	struct shm_trust t;
	struct shm_arena *a;
	if (!info || open_opts(opts, &o, &t))
		return -EINVAL;
	int rc = shm_arena_open(o.dir, name, &t, SHM_OPEN_NO_SLOT, &a);
	if (rc)
		return rc;
	rc = describe(a, info);
	shm_arena_close(a);
	return rc;
}

int sc_arena_list(const char *dir, void (*cb)(const char *dir, const char *name, void *ctx), void *ctx)
{
	return shm_arena_list(dir, cb, ctx);
}

uint32_t sc_arena_layout_version(void)
{
	return SHM_LAYOUT_VERSION;
}

int sc_arena_file_version(const char *dir, const char *name, uint32_t *version)
{
	if (!version)
		return -EINVAL;
	return shm_arena_file_version(dir, name, version);
}
