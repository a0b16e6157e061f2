/*
 * lib/l3/open.c — the L3 directory: open (identity, mode, state, reconciliation, the budget) and
 * close, and the counters (sc_l3_stats). The on-disk layout is in lib/l3/types.h.
 *
 * Multi-process rules. Objects and prefix entries appear only by rename of a fully written and
 * fsynced temp file, so a reader never sees a partial one and a writer killed at any point leaves
 * at most a .tmp-<writer>.<n> file, which reconciliation (or the janitor) removes once its
 * writer no longer holds its OFD lock on it and it is not young (lib/l3/hosts.c): never another
 * live process's or another host's file in progress. Objects are put with RENAME_NOREPLACE (two
 * puts of one digest, from any hosts: the second finds it there). Eviction and reconciliation hold
 * DIR/lock (flock, exclusive) so that only one process scans and unlinks at a time; put and fill
 * never take it. In shared mode a put never scans or evicts unless the store is over budget and
 * no janitor is at work (lib/l3/janitor.c). A fill that raced with an eviction either opened the
 * file first (and reads it; unlink does not disturb an open file) or gets -ENOENT: a miss.
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
#include "hosts.h"
#include "janitor.h"
#include "reconcile.h"
#include "segstore.h"
#include "state.h"

static _Atomic uint64_t next_id = 1;


/* ---- open / close ---- */

/* Files a handle's rings keep open: as asked (at most RLIMIT_NOFILE / 2), or by default
 * min(4096, RLIMIT_NOFILE / 4) (a process has other uses for descriptors); on a local filesystem
 * l3_dio_detect keeps only small files by default, under a byte budget (on kernel CephFS and NFS
 * none). */
static uint32_t kept_max(uint32_t asked)
{
	if (asked == SC_L3_FD_CACHE_NONE)
		return 0;
	struct rlimit rl;
	uint64_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 65536;
	uint64_t n = asked ? asked : lim / 4 < 4096 ? lim / 4 : 4096;
	return (uint32_t)(n < lim / 2 ? n : lim / 2);
}


int sc_l3_open(const char *dir, const struct sc_l3_opts *opts, struct sc_l3 **out)
{
	struct sc_l3_opts o = { 0 };
	if (!dir || !*dir || !out)
		return -EINVAL;
	*out = NULL;
	if (opts)
		o = *opts;
	if ((o.flags & ~SC_L3_OPEN_MASK) || o.o_direct < SC_L3_ODIRECT_AUTO || o.o_direct > SC_L3_ODIRECT_OFF ||
	    o.queue_depth > SC_L3_MAX_QUEUE_DEPTH || (o.file_mode & ~0666u) || o.gid < 0 || o.gid > 0x7fffffff ||
	    (o.fd_cache > SC_L3_FD_CACHE_MAX && o.fd_cache != SC_L3_FD_CACHE_NONE))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(o.reserved) / sizeof(o.reserved[0]); i++)
		if (o.reserved[i])
			return -EINVAL; /* a field of a later version: refuse rather than ignore it */
	int create = !(o.flags & SC_L3_OPEN_NO_CREATE);
	if (!o.queue_depth)
		o.queue_depth = 64;
	struct sc_l3 *l3 = calloc(1, sizeof(*l3));
	if (!l3)
		return -ENOMEM;
	l3->dirfd = l3->objfd = l3->pfxfd = l3->lenfd = l3->quarfd = l3->lockfd = l3->tmpfd = l3->host_fd = -1;
	l3->accfd = l3->segfd = l3->janfd = l3->sgfd = -1;
	pthread_mutex_init(&l3->jan_mu, NULL);
	l3->opts = o;
	l3->kept_max = kept_max(o.fd_cache);
	l3->kept_file_max = l3->kept_bytes_max = UINT64_MAX; /* l3_dio_detect bounds the default */
	l3->file_mode = o.file_mode ? o.file_mode : 0600;
	l3->dir_mode = l3->file_mode | ((l3->file_mode & 0444) >> 2) | 0700 | (o.gid > 0 ? S_ISGID : 0);
	l3->id = atomic_fetch_add_explicit(&next_id, 1, RELAXED);
	if (getrandom(&l3->nonce, sizeof(l3->nonce), GRND_NONBLOCK) != (ssize_t)sizeof(l3->nonce))
		l3->nonce = shm_now_ns() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)l3;
	pthread_mutex_init(&l3->mu, NULL);
	int rc = -ENOMEM;
	if (!(l3->dir = strdup(dir)))
		goto cleanup;
	if ((rc = l3_host_init(l3, o.host_id)))
		goto cleanup;
	l3_writer_init(l3);
	l3->opts.host_id = NULL; /* not kept: the caller's string may not outlive the handle */
	l3->opts.state_dir = NULL;
	int made = 0;
	if (create) {
		if (mkdir(dir, l3->dir_mode & 0777) == 0)
			made = 1;
		else if (errno != EEXIST) {
			rc = -errno;
			goto cleanup;
		}
	}
	if ((rc = l3->dirfd = l3_open_dir_at(AT_FDCWD, dir)) < 0)
		goto cleanup;
	if (made && (rc = l3_own(l3, l3->dirfd, 1)))
		goto cleanup;
	/* without NO_CREATE an existing directory becomes a store; with it, only a store is opened
	 * (its state file tells), and nothing is created in it */
	if (!create && faccessat(l3->dirfd, "shared", F_OK, 0) < 0 && (rc = l3_state_open(l3, 0)))
		goto cleanup;
	struct stat dsb;
	if (fstat(l3->dirfd, &dsb) < 0) {
		rc = -errno;
		goto cleanup;
	}
	l3->dir_dev = (uint64_t)dsb.st_dev;
	l3->dir_ino = (uint64_t)dsb.st_ino;
	const char *subs[] = { "objects", "prefix", "lengths", "quarantine", "tmp" };
	int *fds[] = { &l3->objfd, &l3->pfxfd, &l3->lenfd, &l3->quarfd, &l3->tmpfd };
	for (int i = 0; i < 5; i++) {
		if (create && (rc = l3_mkdir_at(l3, l3->dirfd, subs[i])) < 0)
			goto cleanup;
		if ((rc = *fds[i] = l3_open_dir_at(l3->dirfd, subs[i])) < 0) {
			if (i == 4 && rc == -ENOENT) { /* a store made before DIR/tmp, opened NO_CREATE */
				l3->tmpfd = -1;
				continue;
			}
			goto cleanup;
		}
	}
	if (fstat(l3->objfd, &dsb) < 0) {
		rc = -errno;
		goto cleanup;
	}
	l3->obj_dev = (uint64_t)dsb.st_dev;
	l3->lockfd = l3_open_file(l3->dirfd, "lock", O_RDWR);
	if (l3->lockfd == -ENOENT && create) {
		l3->lockfd = openat(l3->dirfd, "lock", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, l3->file_mode);
		if (l3->lockfd < 0 && errno == EEXIST)
			l3->lockfd = l3_open_file(l3->dirfd, "lock", O_RDWR);
		else if (l3->lockfd < 0)
			l3->lockfd = -errno;
		else if ((rc = l3_own(l3, l3->lockfd, 0)))
			goto cleanup;
	}
	if (l3->lockfd < 0) {
		rc = l3->lockfd;
		goto cleanup;
	}
	if ((rc = l3_mode_init(l3, o.flags)) || (rc = l3_seg_open(l3)))
		goto cleanup;
	if (l3->shared)
		l3->grace_ns = (o.visibility_ms ? o.visibility_ms : L3_VISIBILITY_MS_DEFAULT) * 1000000ull;
	if (l3->shared) {
		if (l3->st) { /* mapped by the NO_CREATE check above: a shared directory counts per host */
			munmap(l3->st, sizeof(struct l3_state));
			l3->st = NULL;
		}
		l3->opts.state_dir = o.state_dir;
		rc = l3_state_open_host(l3);
		l3->opts.state_dir = NULL;
	} else if (!l3->st) {
		rc = l3_state_open(l3, create);
	}
	if (rc)
		goto cleanup;
	/* bounded: a step of reconciliation, not a scan (lib/l3/reconcile.c). Shared mode: none at
	 * all (every host's workers open; the janitor reconciles: sc_l3_janitor) */
	if (!(o.flags & SC_L3_OPEN_NO_RECONCILE) && !l3->shared) {
		if ((rc = l3_reconcile_open(l3)))
			goto cleanup;
		uint64_t budget = l3->opts.budget_bytes;
		if (budget && atomic_load_explicit(&l3->st->bytes, RELAXED) > budget &&
		    (rc = sc_l3_evict_to(l3, budget / 100 * L3_LOW_WATER_PCT)) < 0)
			goto cleanup;
		rc = 0;
	}
	*out = l3;
	return 0;
cleanup:
	sc_l3_close(l3);
	return rc;
}


void sc_l3_close(struct sc_l3 *l3)
{
	if (!l3)
		return;
	l3_fills_drain(l3);
	l3_rings_free(l3);
	if (l3->dirfd >= 0)
		l3_access_flush(l3, 1);
	l3_janitor_release(l3);
	int fds[] = { l3->dirfd, l3->objfd, l3->pfxfd, l3->lenfd, l3->quarfd, l3->lockfd, l3->accfd, l3->segfd, l3->sgfd,
		      l3->tmpfd };
	for (int i = 0; i < 10; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	l3_state_close(l3);
	pthread_mutex_destroy(&l3->mu);
	pthread_mutex_destroy(&l3->jan_mu);
	free(l3->lengths);
	free(l3->dir);
	free(l3);
}




/* ---- stats, list, verify ---- */

int sc_l3_stats(struct sc_l3 *l3, struct sc_l3_stats *s)
{
	if (!l3 || !s)
		return -EINVAL;
	struct l3_state *st = l3->st;
	*s = (struct sc_l3_stats){
		.objects = atomic_load_explicit(&st->objects, RELAXED),
		.bytes = atomic_load_explicit(&st->bytes, RELAXED),
		.fills = atomic_load_explicit(&st->fills, RELAXED),
		.fill_bytes = atomic_load_explicit(&st->fill_bytes, RELAXED),
		.fill_ns = atomic_load_explicit(&st->fill_ns, RELAXED),
		.verify_failures = atomic_load_explicit(&st->verify_failures, RELAXED),
		.quarantined = atomic_load_explicit(&st->quarantined, RELAXED),
		.evictions = atomic_load_explicit(&st->evictions, RELAXED),
		.write_refusals = atomic_load_explicit(&st->write_refusals, RELAXED),
		.puts = atomic_load_explicit(&st->puts, RELAXED),
		.key_collisions = atomic_load_explicit(&st->key_collisions, RELAXED),
		.put_dedup = atomic_load_explicit(&st->put_dedup, RELAXED),
		.fills_kept = atomic_load_explicit(&st->fills_kept, RELAXED),
		.budget_bytes = l3->opts.budget_bytes,
		.dio_mem_align = l3->dio_mem_align,
		.dio_offset_align = l3->dio_off_align,
		.logical_bytes = atomic_load_explicit(&st->logical, RELAXED),
		.segments = atomic_load_explicit(&st->segments, RELAXED),
		.segment_bytes = l3->seg_size,
		.fill_bytes_from_l2 = atomic_load_explicit(&st->seg_from_l2, RELAXED),
		.identity_mismatches = atomic_load_explicit(&st->identity_mismatches, RELAXED),
		.fill_starts = atomic_load_explicit(&st->fill_starts, RELAXED),
	};
	struct l3_jrec_view v;
	if (l3->shared && l3_janitor_read(l3, &v) == 0 && v.pass_end_ns) {
		/* per-host counters cannot know the whole store: the last pass does */
		s->objects = v.objects;
		s->bytes = v.bytes;
	}
	s->physical_bytes = s->bytes;
	s->saved_bytes = s->logical_bytes > s->bytes ? s->logical_bytes - s->bytes : 0;
	return 0;
}
