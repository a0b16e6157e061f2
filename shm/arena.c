/*
 * shm/arena.c — creating, attaching to and destroying the named arena file.
 *
 * Protocol
 * --------
 * Creation is race-free by O_CREAT|O_EXCL on the final path: of two creators exactly one gets
 * the file, the other -EEXIST. The winner sizes the file (fallocate pre-faults it, so a hugepage
 * shortage is an -ENOMEM now rather than a SIGBUS later), maps it, writes the header and formats
 * the regions, and only then release-stores header.initialised = SHM_INIT_DONE. An opener
 * acquire-loads that word (pairs with the creator's release) and waits a bounded time for it;
 * after the wait it gets -EAGAIN. Nothing but the creator writes the identity part of the
 * header, and nobody writes it after publication.
 *
 * Attach validates everything before trusting it: file type (a regular file, opened without
 * following links or blocking, so a planted FIFO or symlink is refused, never waited on), owner
 * and mode (not world-writable; root's, the caller's, or an owner the caller trusts), size, magic, layout version,
 * header checksum, total size == file size, and every region inside the file, aligned, in order
 * and non-overlapping. A refused file is never written to (it is mapped, read, unmapped).
 *
 * Backing. hugetlbfs (2 MiB pages, fallocate'd) when a hugetlbfs mount with 2 MiB pages exists,
 * else a tmpfs file with MADV_HUGEPAGE (the mount decides whether THP is used: a mount that gives
 * them only to faults has its pages populated through the advised mapping), else 4 KiB shmem.
 * What was obtained is measured from /proc/self/smaps, never assumed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "arena.h"
#include "layout.h"
#include "evring.h"
#include "seg.h"
#include "l3ix.h"
#include "fault.h"
#include "readers.h"

#define HUGETLBFS_MAGIC_ 0x958458f6
#define TMPFS_MAGIC_ 0x01021994
#define OPEN_WAIT_NS (2ull * 1000000000ull)
#define OPEN_POLL_NS 2000000 /* between looks at a file still being created */
/* A file without a creation lock that is younger than this may be in the instant between its
 * creator's O_EXCL and the lock: wait for it rather than call it broken. */
#define CREATE_GAP_NS (1ull * 1000000000ull)
/* Backing codes, as in enum sc_backing (stagecache.h) — shm/ does not include lib/. */
enum { B_UNKNOWN = 0, B_HUGETLBFS_2M = 1, B_SHMEM_THP = 2, B_SHM_4K = 3, B_FILE_4K = 4 };

/* Map @size bytes of arena file @fd. The test build puts a PROT_NONE guard of one huge page before
 * and after every arena (2 MiB aligned, as hugetlbfs needs), so that an access just outside the
 * arena faults at once instead of landing in whatever the kernel mapped next to it. */
#ifdef SC_TEST_HOOKS
#define ARENA_GUARD SHM_HUGE_PAGE_BYTES
static void *map_arena(int fd, uint64_t size, int prot)
{
	uint8_t *r = mmap(NULL, size + 3 * ARENA_GUARD, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return MAP_FAILED;
	uint8_t *b = (uint8_t *)(((uintptr_t)r + 2 * ARENA_GUARD - 1) & ~(uintptr_t)(ARENA_GUARD - 1));
	uint8_t *end = r + size + 3 * ARENA_GUARD;
	if (mmap(b, size, prot, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
		int e = errno;
		munmap(r, size + 3 * ARENA_GUARD);
		errno = e;
		return MAP_FAILED;
	}
	if (b - ARENA_GUARD > r)
		munmap(r, (size_t)(b - ARENA_GUARD - r));
	if (b + size + ARENA_GUARD < end)
		munmap(b + size + ARENA_GUARD, (size_t)(end - (b + size + ARENA_GUARD)));
	return b;
}
static void unmap_arena(void *base, uint64_t size)
{
	munmap((uint8_t *)base - ARENA_GUARD, size + 2 * ARENA_GUARD);
}
#else
static void *map_arena(int fd, uint64_t size, int prot)
{
	return mmap(NULL, size, prot, MAP_SHARED, fd, 0);
}
static void unmap_arena(void *base, uint64_t size)
{
	munmap(base, size);
}
#endif

int shm_name_valid(const char *name)
{
	if (!name)
		return 0;
	size_t n = strlen(name);
	if (n < 1 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return 0;
	}
	/* "." and ".." would make stagecache.. paths that are still fine, but refuse pure dots anyway */
	return strspn(name, ".") != n;
}

/* First hugetlbfs mount with 2 MiB pages (preferring /dev/hugepages). 0 and @out filled, or -ENODEV. */
static int find_hugetlbfs(char *out, size_t outlen)
{
	FILE *f = setmntent("/proc/mounts", "r");
	if (!f)
		return -ENODEV;
	struct mntent ent, *m;
	char buf[4096]; /* a longer line is cut (its options may be lost: ps == NULL) */
	int found = 0;
	/* getmntent_r: the library may be called from several threads at once */
	while ((m = getmntent_r(f, &ent, buf, sizeof(buf)))) {
		if (strcmp(m->mnt_type, "hugetlbfs"))
			continue;
		const char *ps = hasmntopt(m, "pagesize");
		if (ps && strncmp(ps, "pagesize=2M", 11) && strncmp(ps, "pagesize=2048k", 14))
			continue;
		if (!found || !strcmp(m->mnt_dir, "/dev/hugepages")) {
			snprintf(out, outlen, "%s", m->mnt_dir);
			found = 1;
		}
	}
	endmntent(f);
	return found ? 0 : -ENODEV;
}

uint64_t shm_header_checksum(const struct shm_header *h)
{
	struct shm_header copy;
	memcpy(&copy, h, offsetof(struct shm_header, header_check));
	atomic_store_explicit(&copy.initialised, 0, memory_order_relaxed);
	return XXH64(&copy, offsetof(struct shm_header, header_check), 0x5ca1ab1e);
}

int shm_header_check(const struct shm_header *h, uint64_t file_bytes)
{
	if (file_bytes < SHM_HEADER_BYTES || h->magic != SHM_MAGIC)
		return -EBADMSG;
	if (h->layout_version != SHM_LAYOUT_VERSION)
		return -EPROTO;
	if (h->header_bytes != SHM_HEADER_BYTES || h->region_count != SHM_REGION_COUNT ||
	    h->total_bytes != file_bytes || h->header_check != shm_header_checksum(h))
		return -EBADMSG;
	if (h->reader_slots == 0 || h->reader_slots > SHM_READER_SLOTS_MAX || h->slots_per_user > h->reader_slots ||
	    (uint64_t)h->reader_slots * 512u > h->regions[SHM_REGION_READERS].size)
		return -EBADMSG;
	if ((h->arena_flags & ~SHM_ARENA_FLAGS_MASK) || !h->l3ix_refresh_ms || h->l3ix_entries > SHM_L3IX_MAX_ENTRIES ||
	    h->regions[SHM_REGION_L3IX].size < shm_l3ix_bytes(h->l3ix_entries))
		return -EBADMSG;
	if ((h->seg_bytes && (h->seg_bytes & (h->seg_bytes - 1))) || (h->seg_bytes && !h->seg_slots) ||
	    h->seg_slots > (1u << 24) || (h->seg_slots & (h->seg_slots - 1)) ||
	    h->regions[SHM_REGION_POLICY].size < shm_seg_table_bytes((uint32_t)h->seg_slots))
		return -EBADMSG;
	if (h->regions[SHM_REGION_EVENTS].size < shm_evring_bytes(shm_evring_records(h->index_entries)))
		return -EBADMSG;
	uint64_t prev_end = SHM_HEADER_BYTES;
	for (int i = 0; i < SHM_REGION_COUNT; i++) {
		const struct shm_region *r = &h->regions[i];
		if (r->off % 4096 || r->size % 4096 || r->off < prev_end || r->off > file_bytes ||
		    r->size > file_bytes - r->off)
			return -EBADMSG;
		prev_end = r->off + r->size;
	}
	return 0;
}

int shm_measure_backing(const void *addr, uint64_t *page_size)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	if (!f)
		return B_UNKNOWN;
	/* whole lines: a piece of a long mapped path cut off by a fixed buffer could read as a header */
	char *line = NULL;
	size_t cap = 0;
	int in = 0, backing = B_UNKNOWN;
	uint64_t kps = 0, pmd = 0, lo, hi;
	while (getline(&line, &cap, f) > 0) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			if (in)
				break;
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (!in)
			continue;
		unsigned long long v;
		if (sscanf(line, "KernelPageSize: %llu kB", &v) == 1)
			kps = v * 1024;
		else if (sscanf(line, "ShmemPmdMapped: %llu kB", &v) == 1 || sscanf(line, "FilePmdMapped: %llu kB", &v) == 1)
			pmd += v;
	}
	free(line);
	fclose(f);
	if (!kps)
		return B_UNKNOWN;
	if (kps == SHM_HUGE_PAGE_BYTES)
		backing = B_HUGETLBFS_2M;
	else if (pmd > 0)
		backing = B_SHMEM_THP, kps = SHM_HUGE_PAGE_BYTES;
	else
		backing = B_SHM_4K;
	if (page_size)
		*page_size = kps;
	return backing;
}

/* Touch one byte in each 2 MiB of the first 64 MiB of the heap (read only) so that THP mappings
 * show up in smaps for this process, then measure. A file outside tmpfs and hugetlbfs (an
 * explicit --dir on a disk) is page cache, not shared memory: say so. */
int shm_arena_measure(struct shm_arena *a, uint64_t *page_size)
{
	const struct shm_region *heap = &a->hv.regions[SHM_REGION_HEAP];
	volatile const uint8_t *p = a->base + heap->off;
	uint64_t lim = heap->size < (64u << 20) ? heap->size : (64u << 20);
	for (uint64_t o = 0; o < lim; o += SHM_HUGE_PAGE_BYTES)
		(void)p[o];
	int b = shm_measure_backing(a->base + heap->off, page_size);
	struct statfs sfs;
	if (b == B_SHM_4K && fstatfs(a->fd, &sfs) == 0 && (long)sfs.f_type != TMPFS_MAGIC_)
		b = B_FILE_4K;
	return b;
}

static void measure(struct shm_arena *a)
{
	a->backing = shm_arena_measure(a, &a->page_size);
}

/*
 * Open handles of this process, for fork and for I/O pins: a child closes the lock descriptors of
 * every handle it inherited, so that its parent's slots are seen dead when the parent dies, and
 * marks the copies unusable (shm/readers.c); a ring finds the handle whose mapping it reads into
 * (shm_arena_pin_find). Guarded by open_mu, which the atfork handlers hold across fork(); a handle's
 * lock_fd is closed only after it left the list, so a descriptor handed out under open_mu is
 * always the handle's own.
 */
static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shm_arena *open_list;
static uint64_t next_serial = 1;
static _Atomic uint64_t open_gen = 1; /* moves at every close */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
	pthread_mutex_lock(&open_mu);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&open_mu);
}

static void fork_child(void)
{
	for (struct shm_arena *a = open_list; a; a = a->next_open) {
		if (a->lock_fd >= 0)
			close(a->lock_fd);
		a->lock_fd = -1;
		a->forked = 1;
	}
	open_list = NULL; /* the child's copies are not its own handles */
	pthread_mutex_unlock(&open_mu);
}

static void register_atfork(void)
{
	(void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void track_open(struct shm_arena *a)
{
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&open_mu);
	a->serial = next_serial++;
	a->next_open = open_list;
	open_list = a;
	pthread_mutex_unlock(&open_mu);
}

/* Take @a off the list; the rings that still hold its lock description (its pins, then stable). */
static uint32_t untrack_open(struct shm_arena *a)
{
	pthread_mutex_lock(&open_mu);
	for (struct shm_arena **p = &open_list; *p; p = &(*p)->next_open)
		if (*p == a) {
			*p = a->next_open;
			break;
		}
	uint32_t pins = a->io_pins;
	atomic_fetch_add_explicit(&open_gen, 1, memory_order_release); /* pairs with shm_arena_open_gen */
	pthread_mutex_unlock(&open_mu);
	return pins;
}

int shm_arena_pin_find(const void *p, struct shm_pin_owner *o)
{
	const uint8_t *b = p;
	int rc = 0;
	pthread_mutex_lock(&open_mu);
	for (struct shm_arena *a = open_list; a; a = a->next_open) {
		if (b < a->base || b >= a->base + a->size)
			continue;
		if (a->lock_fd < 0)
			break; /* no slot: nothing of this handle can be reclaimed as a dead holder's */
		int fd = fcntl(a->lock_fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			break;
		}
		*o = (struct shm_pin_owner){ a->serial, (uintptr_t)a->base, (uintptr_t)(a->base + a->size), fd };
		a->io_pins++;
		rc = 1;
		break;
	}
	pthread_mutex_unlock(&open_mu);
	return rc;
}

void shm_arena_unpin(uint64_t serial)
{
	pthread_mutex_lock(&open_mu);
	for (struct shm_arena *a = open_list; a; a = a->next_open)
		if (a->serial == serial) {
			if (a->io_pins)
				a->io_pins--;
			break;
		}
	pthread_mutex_unlock(&open_mu);
}

uint64_t shm_arena_open_gen(void)
{
	return atomic_load_explicit(&open_gen, memory_order_acquire); /* pairs with untrack_open */
}

int shm_arena_serial_open(uint64_t serial)
{
	int open = 0;
	pthread_mutex_lock(&open_mu);
	for (struct shm_arena *a = open_list; a && !open; a = a->next_open)
		open = a->serial == serial;
	pthread_mutex_unlock(&open_mu);
	return open;
}

static int path_for(char *out, size_t outlen, const char *dir, const char *name)
{
	int n = snprintf(out, outlen, "%s/stagecache.%s", dir, name);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

static int fs_magic(int fd, long *magic)
{
	struct statfs sfs;
	if (fstatfs(fd, &sfs) < 0)
		return -errno;
	*magic = (long)sfs.f_type;
	return 0;
}

static int locate(const char *dir, const char *name, char *path, size_t len);

/* Does the tmpfs mount that holds @fd give transparent huge pages only to page faults: huge=advise
 * (in an advised mapping) or huge=within_size (once the file has its size)? Then pages allocated
 * by fallocate are small ones. huge=always gives them to fallocate too, huge=never to nobody. */
static int thp_by_fault(int fd)
{
	struct stat st;
	FILE *f = fstat(fd, &st) == 0 ? fopen("/proc/self/mountinfo", "re") : NULL;
	if (!f)
		return 0;
	char *line = NULL;
	size_t cap = 0;
	int yes = 0;
	while (getline(&line, &cap, f) > 0) {
		unsigned maj, min;
		if (sscanf(line, "%*u %*u %u:%u", &maj, &min) != 2 || makedev(maj, min) != st.st_dev)
			continue;
		/* after " - ": the type, the source, the superblock's options (the last field) */
		const char *opts = strstr(line, " - ") ? strrchr(line, ' ') : NULL;
		yes = opts && (strstr(opts, "huge=advise") || strstr(opts, "huge=within_size"));
		break;
	}
	free(line);
	fclose(f);
	return yes;
}

/* Advise transparent huge pages for the tmpfs mapping @base and allocate its pages through it
 * (MADV_POPULATE_WRITE, Linux 5.14): 0, or -ENOMEM when tmpfs has no room (EFAULT: a fault there
 * would be a SIGBUS) or memory is short, or -errno. */
static int populate(void *base, uint64_t size)
{
	(void)madvise(base, size, MADV_HUGEPAGE);
	if (madvise(base, size, MADV_POPULATE_WRITE) == 0)
		return 0;
	return errno == EFAULT || errno == ENOMEM ? -ENOMEM : -errno;
}

static int create_in(const char *dir, const char *name, const struct shm_params *pin, uint32_t mode,
		     int64_t gid, struct shm_arena **out)
{
	struct shm_params p = *pin;
	struct shm_region regions[SHM_REGION_MAX];
	int rc;
	int want_huge = p.huge_mode != SHM_HUGE_OFF;

	struct shm_arena *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fd = -1;
	a->lock_fd = -1;
	a->reader_slot = -1;
	snprintf(a->name, sizeof(a->name), "%s", name);
	if ((rc = path_for(a->path, sizeof(a->path), dir, name)))
		goto fail;

	int fd = open(a->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode ? (mode & 0777) : 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	a->fd = fd;
	/* openers wait while this is held (until the arena is published, or we fail and unlink) */
	if ((rc = shm_ofd_trylock(fd, SHM_LOCK_CREATE)))
		goto fail_unlink;
	shm_sched_point("arena.create.locked");
	/* exact mode regardless of umask; group if asked */
	if (fchmod(fd, mode ? (mode & 0777) : 0600) < 0 || (gid >= 0 && fchown(fd, (uid_t)-1, (gid_t)gid) < 0)) {
		rc = -errno;
		goto fail_unlink;
	}
	long fsm = 0;
	if ((rc = fs_magic(fd, &fsm)))
		goto fail_unlink;
	int hugetlb = fsm == HUGETLBFS_MAGIC_;
	if (p.huge_mode == SHM_HUGE_REQUIRE && !hugetlb) {
		rc = -ENODEV;
		goto fail_unlink;
	}
	if (p.huge_mode == SHM_HUGE_OFF && hugetlb) {
		rc = -EINVAL; /* huge=off in a hugetlbfs directory is a contradiction */
		goto fail_unlink;
	}
	p.page_size = hugetlb ? (uint32_t)SHM_HUGE_PAGE_BYTES : SHM_PAGE_BYTES;
	if (hugetlb)
		p.total_bytes = (p.total_bytes + SHM_HUGE_PAGE_BYTES - 1) & ~(SHM_HUGE_PAGE_BYTES - 1);
	else
		p.total_bytes = shm_page_up(p.total_bytes);
	if ((rc = shm_layout_plan(&p, regions)))
		goto fail_unlink;
	/* reader slots per user: by default a quarter of the table stays out of any one user's reach
	 * when others may open the file (its group has access); a file only its owner (and root) can
	 * open has nobody to keep them for */
	if (!p.slots_per_user)
		p.slots_per_user = (mode & 0070) ? p.reader_slots - p.reader_slots / 4 : p.reader_slots;
	if (p.slots_per_user > p.reader_slots) {
		rc = -EINVAL;
		goto fail_unlink;
	}

	/* pre-fault: a shortage of hugepages or tmpfs space is reported now, not as SIGBUS later.
	 * On a tmpfs that gives transparent huge pages only to faults the file is sized, mapped and
	 * advised, then populated through the mapping. Elsewhere fallocate (several times quicker than
	 * faults for 4 KiB pages), which hugetlbfs stops at any pending signal with EINTR (io_uring's
	 * task work counts as one); the pages it allocated stay, so the call is made again and goes
	 * on from there. A tmpfs may give huge pages either way: the mapping is advised */
	int thp = !hugetlb && want_huge && fsm == TMPFS_MAGIC_;
	int by_fault = thp && thp_by_fault(fd);
	int frc;
	if (by_fault) {
		frc = ftruncate(fd, (off_t)p.total_bytes);
	} else {
		while ((frc = fallocate(fd, 0, 0, (off_t)p.total_bytes)) < 0 && errno == EINTR)
			;
	}
	if (frc < 0) {
		rc = (errno == ENOSPC || errno == ENOMEM) ? -ENOMEM : -errno;
		if (rc == -EOPNOTSUPP && ftruncate(fd, (off_t)p.total_bytes) == 0)
			rc = 0;
		if (rc)
			goto fail_unlink;
	}
	void *base = map_arena(fd, p.total_bytes, PROT_READ | PROT_WRITE);
	if (base == MAP_FAILED) {
		rc = errno == ENOMEM ? -ENOMEM : -errno;
		goto fail_unlink;
	}
	a->base = base;
	a->size = p.total_bytes;
	a->hdr = base;
	if (by_fault && (rc = populate(base, p.total_bytes)))
		goto fail_unmap;
	if (thp && !by_fault)
		(void)madvise(base, p.total_bytes, MADV_HUGEPAGE); /* advisory: the mount decides */

	struct shm_header *h = a->hdr;
	h->magic = SHM_MAGIC;
	h->layout_version = SHM_LAYOUT_VERSION;
	h->header_bytes = SHM_HEADER_BYTES;
	h->total_bytes = p.total_bytes;
	h->region_count = SHM_REGION_COUNT;
	h->created_ns = shm_realtime_ns();
	h->creator_pid = (uint32_t)getpid();
	h->page_size = p.page_size;
	h->index_entries = p.index_entries;
	h->ring_count = p.ring_count;
	h->ring_bytes = p.ring_bytes;
	h->obs_entries = p.obs_entries;
	h->reader_slots = p.reader_slots;
	h->huge_mode = p.huge_mode;
	h->l3ix_entries = p.l3ix_entries;
	h->arena_flags = p.arena_flags;
	h->l3ix_refresh_ms = p.l3ix_refresh_ms;
	h->seg_bytes = p.seg_bytes;
	h->seg_slots = p.seg_slots;
	memcpy(h->regions, regions, sizeof(regions));
	if (getrandom(h->key_secret, SHM_SECRET_BYTES, 0) != (ssize_t)SHM_SECRET_BYTES) {
		rc = -EIO;
		goto fail_unmap;
	}
	h->header_check = shm_header_checksum(h);
	h->slots_per_user = p.slots_per_user;
	memcpy(&a->hv, h, sizeof(a->hv));
	atomic_store_explicit(&h->global_epoch, 1, memory_order_relaxed);
	if ((rc = shm_layout_format(a)))
		goto fail_unmap;
	/* release: everything above is visible to an opener that acquires SHM_INIT_DONE. Published
	 * before the lock goes: an opener that finds the lock free and the header not published takes
	 * the file for one whose creator died (once it is older than CREATE_GAP_NS) */
	atomic_store_explicit(&h->initialised, SHM_INIT_DONE, memory_order_release);
	shm_sched_point("arena.create.published");
	shm_ofd_unlock(fd, SHM_LOCK_CREATE);

	rc = shm_readers_claim(a);
	if (rc < 0)
		goto fail_unmap;
	measure(a);
	track_open(a);
	atomic_store_explicit(&a->intact_ns, shm_now_ns(), memory_order_relaxed); /* sized above */
	*out = a;
	return 0;

fail_unmap:
	unmap_arena(a->base, a->size);
fail_unlink:
	unlink(a->path);
fail:
	if (a->fd >= 0)
		close(a->fd);
	free(a);
	return rc;
}

int shm_arena_create(const char *dir, const char *name, const struct shm_params *p, uint32_t mode,
		     int64_t gid, struct shm_arena **out)
{
	char hdir[PATH_MAX];
	*out = NULL;
	if (!shm_name_valid(name) || p->huge_mode > SHM_HUGE_OFF)
		return -EINVAL;
	if (dir)
		return create_in(dir, name, p, mode, gid, out);
	/* one name, one arena: open searches both known directories, so refuse a name that exists
	 * in either (O_EXCL makes the race within one directory exact) */
	char path[PATH_MAX];
	if (locate(NULL, name, path, sizeof(path)) == 0)
		return -EEXIST; /* (one in a directory this user may not search cannot be seen) */
	if (p->huge_mode != SHM_HUGE_OFF && find_hugetlbfs(hdir, sizeof(hdir)) == 0) {
		int rc = create_in(hdir, name, p, mode, gid, out);
		/* auto: a hugepage shortage, or a hugetlbfs mount this user may not write (root's 0755
		 * /dev/hugepages; see stagecache setup --group), falls back to tmpfs; require: it is
		 * the answer */
		int fallback = rc == -ENOMEM || rc == -EACCES || rc == -EPERM || rc == -EROFS;
		if (!fallback || p->huge_mode == SHM_HUGE_REQUIRE)
			return rc;
	} else if (p->huge_mode == SHM_HUGE_REQUIRE) {
		return -ENODEV;
	}
	return create_in("/dev/shm", name, p, mode, gid, out);
}

/* Open an existing arena file without following a link and without blocking on whatever else
 * was planted under its name (a FIFO would block an open for reading forever); refuse anything
 * that is not a regular file. 0 with *fd and *st, or -errno (-EBADMSG: not a regular file). */
static int open_regular(const char *path, int flags, int *fd, struct stat *st)
{
	*fd = open(path, flags | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	if (*fd < 0) {
		int e = errno;
		/* a symlink (ELOOP), a directory (EISDIR), a socket (ENXIO): not an arena file */
		return e == ELOOP || e == EISDIR || e == ENXIO || e == ENODEV ? -EBADMSG : -e;
	}
	if (fstat(*fd, st) < 0) {
		int e = errno;
		close(*fd);
		return -e;
	}
	if (!S_ISREG(st->st_mode)) {
		close(*fd);
		return -EBADMSG;
	}
	return 0;
}

/* Planting: an arena file anyone may write, or one another unprivileged user made, is refused
 * unless the caller said whose files to trust. Root's files are trusted (root can do anything). */
static int trusted(const struct stat *st, const struct shm_trust *t)
{
	if (st->st_mode & S_IWOTH)
		return 0;
	if (st->st_uid == 0 || st->st_uid == geteuid())
		return 1;
	return t && (t->any_owner || (t->uid >= 0 && (uint64_t)t->uid == st->st_uid));
}

/*
 * Wait (bounded) until the file at @fd holds a published arena header. 0 and *@hdr filled, or
 * -EAGAIN (still being created when the wait ended), -EBADMSG (not an arena, or one whose creator
 * died before publishing it), -EPROTO (another layout version), -errno.
 */
static int wait_published(int fd, struct shm_header *hdr, uint64_t *size)
{
	uint64_t deadline = shm_now_ns() + OPEN_WAIT_NS;
	for (;;) {
		struct stat st;
		if (fstat(fd, &st) < 0)
			return -errno;
		if (!S_ISREG(st.st_mode))
			return -EBADMSG;
		*size = (uint64_t)st.st_size;
		memset(hdr, 0, sizeof(*hdr));
		if (*size >= sizeof(*hdr) && pread(fd, hdr, sizeof(*hdr), 0) != (ssize_t)sizeof(*hdr))
			return -EBADMSG;
		if (hdr->magic == SHM_MAGIC && hdr->layout_version != SHM_LAYOUT_VERSION)
			return -EPROTO;
		/* acquire: pairs with the creator's release of SHM_INIT_DONE (re-read from the mapping) */
		if (*size >= SHM_HEADER_BYTES && hdr->magic == SHM_MAGIC &&
		    atomic_load_explicit(&hdr->initialised, memory_order_relaxed) == SHM_INIT_DONE)
			return 0;
		if (hdr->magic != SHM_MAGIC && hdr->magic != 0)
			return -EBADMSG; /* somebody else's file */
		int creating = shm_ofd_held(fd, SHM_LOCK_CREATE);
		if (creating < 0)
			return creating;
		if (!creating) {
			/* nobody is creating it: a young file may be in the instant before its creator's
			 * lock; an older one was left half-made by a creator that died */
			uint64_t ctime_ns = shm_ts_ns(st.st_ctim);
			if (shm_realtime_ns() > ctime_ns + CREATE_GAP_NS)
				return -EBADMSG;
		}
		if (shm_now_ns() > deadline)
			return -EAGAIN;
		shm_sched_point("arena.open.wait"); /* unpublished, and being created: we look again */
		struct timespec ts = { 0, OPEN_POLL_NS };
		nanosleep(&ts, NULL);
	}
}

static int attach_path(const char *path, const char *name, const struct shm_trust *trust, unsigned flags,
		       struct shm_arena **out)
{
	int fd, noslot = (flags & SHM_OPEN_NO_SLOT) != 0;
	struct stat st;
	int rc = open_regular(path, noslot ? O_RDONLY : O_RDWR, &fd, &st);
	if (rc)
		return rc;
	if (!trusted(&st, trust)) {
		rc = -EPERM;
		goto fail_fd;
	}
	uint64_t size = 0;
	/* read the header before mapping the rest: a file that is not an arena is never mapped writable */
	struct shm_header hdr;
	rc = wait_published(fd, &hdr, &size);
	if (rc)
		goto fail_fd;
	void *base = map_arena(fd, size, noslot ? PROT_READ : PROT_READ | PROT_WRITE);
	if (base == MAP_FAILED) {
		rc = -errno;
		goto fail_fd;
	}
	struct shm_header *h = base;
	/* acquire: pairs with the creator's release store of SHM_INIT_DONE (seen published above) */
	if (atomic_load_explicit(&h->initialised, memory_order_acquire) != SHM_INIT_DONE) {
		rc = -EBADMSG;
		goto fail_map;
	}
	/* check a private copy, then use only the copy: the shared header may change under us */
	struct shm_header hv;
	memcpy(&hv, h, sizeof(hv));
	if ((rc = shm_header_check(&hv, size)))
		goto fail_map;

	struct shm_arena *a = calloc(1, sizeof(*a));
	if (!a) {
		rc = -ENOMEM;
		goto fail_map;
	}
	a->base = base;
	a->size = size;
	a->hdr = h;
	a->hv = hv;
	a->fd = fd;
	a->lock_fd = -1;
	snprintf(a->name, sizeof(a->name), "%s", name);
	snprintf(a->path, sizeof(a->path), "%s", path);
	a->reader_slot = -1;
	a->no_slot = noslot;
	rc = noslot ? 0 : shm_readers_claim(a);
	if (rc < 0) {
		free(a);
		goto fail_map;
	}
	measure(a);
	if (!noslot)
		track_open(a); /* a slotless handle has no lock to close at fork and nothing to pin */
	atomic_store_explicit(&a->intact_ns, shm_now_ns(), memory_order_relaxed); /* size checked above */
	*out = a;
	return 0;

fail_map:
	unmap_arena(base, size);
fail_fd:
	close(fd);
	return rc;
}

/* Directories searched when none is given: hugetlbfs mounts first, then /dev/shm. */
static int known_dirs(char dirs[2][PATH_MAX])
{
	int n = 0;
	if (find_hugetlbfs(dirs[0], PATH_MAX) == 0)
		n++;
	snprintf(dirs[n++], PATH_MAX, "/dev/shm");
	return n;
}

/* Resolve the path of an existing arena file; 0 or -ENOENT. */
static int locate(const char *dir, const char *name, char *path, size_t len)
{
	char dirs[2][PATH_MAX];
	int n;
	if (dir) {
		snprintf(dirs[0], PATH_MAX, "%s", dir);
		n = 1;
	} else {
		n = known_dirs(dirs);
	}
	int denied = 0;
	for (int i = 0; i < n; i++) {
		struct stat st;
		if (path_for(path, len, dirs[i], name))
			continue;
		/* the name itself, not what a link points at: a planted link is found and refused */
		if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0)
			return 0;
		denied |= errno == EACCES; /* a directory we may not search: it may be there */
	}
	return denied ? -EACCES : -ENOENT;
}

int shm_arena_stat(const char *dir, const char *name, char *path, size_t len, struct stat *st)
{
	if (!shm_name_valid(name))
		return -EINVAL;
	int rc = locate(dir, name, path, len);
	if (rc)
		return rc;
	return fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

int shm_arena_open(const char *dir, const char *name, const struct shm_trust *trust, unsigned flags,
		   struct shm_arena **out)
{
	char path[PATH_MAX];
	*out = NULL;
	if (!shm_name_valid(name))
		return -EINVAL;
	int rc = locate(dir, name, path, sizeof(path));
	if (rc)
		return rc;
	return attach_path(path, name, trust, flags, out);
}

void shm_arena_close(struct shm_arena *a)
{
	if (!a)
		return;
	uint32_t pins = a->forked || a->no_slot ? 0 : untrack_open(a);
	/* a ring that still holds our lock may still be reading into the arena: the slot stays ours
	 * (LIVE, locked by the ring) until the ring lets the lock go, then a reaper clears it. A file
	 * cut shorter than the mapping would fault on the slot: closing the lock fd frees it anyway */
	shm_readers_release(a, pins != 0 || shm_arena_intact(a) != 0);
	unmap_arena(a->base, a->size);
	close(a->fd);
	free(a);
}

/* Find arena @name (in @dir, or the known directories) into @path and read its first @len bytes
 * into @head (which starts with the magic word). 0, -EINVAL, -ENOENT, -EBADMSG (short, or not an
 * arena), or -errno. */
static int read_head(const char *dir, const char *name, char path[PATH_MAX], void *head, size_t len)
{
	if (!shm_name_valid(name))
		return -EINVAL;
	int rc = locate(dir, name, path, PATH_MAX);
	if (rc)
		return rc;
	int fd;
	struct stat st;
	if ((rc = open_regular(path, O_RDONLY, &fd, &st)))
		return rc;
	ssize_t n = pread(fd, head, len, 0);
	close(fd);
	uint64_t magic;
	memcpy(&magic, head, sizeof(magic));
	return n == (ssize_t)len && magic == SHM_MAGIC ? 0 : -EBADMSG;
}

int shm_arena_intact(struct shm_arena *a)
{
	if (atomic_load_explicit(&a->cut, memory_order_relaxed))
		return -EBADMSG; /* seen cut before: what was lost does not come back */
	struct stat st;
	if (fstat(a->fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < a->size) {
		atomic_store_explicit(&a->cut, 1, memory_order_relaxed);
		return -EBADMSG;
	}
	atomic_store_explicit(&a->intact_ns, shm_now_ns(), memory_order_relaxed);
	return 0;
}

int shm_arena_intact_lately(struct shm_arena *a)
{
	if (atomic_load_explicit(&a->cut, memory_order_relaxed))
		return -EBADMSG;
	if (shm_now_ns() - atomic_load_explicit(&a->intact_ns, memory_order_relaxed) < SHM_INTACT_RECHECK_NS)
		return 0;
	return shm_arena_intact(a);
}

int shm_arena_destroy(const char *dir, const char *name)
{
	char path[PATH_MAX];
	uint64_t magic = 0;
	/* only ever remove what is recognisably ours (a half-built arena has its magic already) */
	int rc = read_head(dir, name, path, &magic, sizeof(magic));
	struct stat st;
	/* or a regular file under our name cut shorter than a header, or whose first word is zero
	 * (an arena someone who could write it truncated, then perhaps extended with zeroes): nothing
	 * in it to keep, and create needs the name */
	if (rc == -EBADMSG && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    (st.st_size < (off_t)SHM_HEADER_BYTES || magic == 0))
		rc = 0;
	if (rc)
		return rc;
	return unlink(path) < 0 ? -errno : 0;
}

int shm_arena_file_version(const char *dir, const char *name, uint32_t *version)
{
	char path[PATH_MAX];
	struct shm_header h = { 0 };
	int rc = read_head(dir, name, path, &h, sizeof(h));
	if (rc)
		return rc;
	*version = h.layout_version;
	return 0;
}

int shm_arena_list(const char *dir, void (*cb)(const char *dir, const char *name, void *ctx), void *ctx)
{
	char dirs[3][PATH_MAX];
	int n = known_dirs(dirs), found = 0;
	if (dir)
		snprintf(dirs[n++], PATH_MAX, "%s", dir);
	for (int i = 0; i < n; i++) {
		DIR *d = opendir(dirs[i]);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (strncmp(e->d_name, "stagecache.", 11) || !shm_name_valid(e->d_name + 11))
				continue;
			found++;
			if (cb)
				cb(dirs[i], e->d_name + 11, ctx);
		}
		closedir(d);
	}
	return found;
}
