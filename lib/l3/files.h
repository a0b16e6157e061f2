/* lib/l3/files.h — file helpers of the store: opening without following or blocking, creating with the store's mode, reading headers and prefix entries, listing (lib/l3/files.c). */
#ifndef SC_LIB_L3_FILES_H
#define SC_LIB_L3_FILES_H

#include <linux/openat2.h>

#include "types.h"

/* Resolution of every path inside the store: no link in any component, nothing above the
 * directory it starts from. */
#define L3_RESOLVE (RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH)

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* Linux 6.5, every architecture; Debian 12's headers predate it */
#endif

/*
 * Paths inside the store ("<sub>/<name>" at most), never through a link in any component.
 * l3_openat: openat2 with RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH (O_CLOEXEC and O_NOFOLLOW added);
 * an fd or -errno (-ELOOP: a link on the way). l3_at_open: the directory @rel is in, opened
 * O_PATH | O_NOFOLLOW (at->fd is @dfd itself when @rel has no '/'), and its last component; 0 or
 * -errno (-ENOTDIR or -ELOOP: a link or a file where the subdirectory belongs); close it with
 * l3_at_close. The others are their system calls through it (a stat never follows the leaf
 * either): 0 or -errno. Each leaves errno set on failure, as the system calls do.
 */
struct l3_at {
	int fd;
	int own;
	const char *leaf;
};
int l3_openat(int dfd, const char *rel, int flags, mode_t mode);
int l3_at_open(int dfd, const char *rel, struct l3_at *at);
void l3_at_close(struct l3_at *at);
int l3_statat(int dfd, const char *rel, struct stat *st);
int l3_unlinkat(int dfd, const char *rel);
/* @flags: renameat2's (RENAME_NOREPLACE), or 0 for a plain rename */
int l3_renameat(int odfd, const char *orel, int ndfd, const char *nrel, unsigned flags);
int l3_linkat(int odfd, const char *orel, int ndfd, const char *nrel);
int l3_touchat(int dfd, const char *rel);

/* Open @rel under @dfd without following a link or blocking (a planted FIFO would block an open
 * for reading), refusing anything but a regular file (-EBADMSG; a symlink is -ELOOP). The fd is
 * blocking again on return (io_uring honours O_NONBLOCK: reads would fail with -EAGAIN). */
int l3_open_file(int dfd, const char *rel, int flags);
/* l3_open_file for pread() only: the file's status in *@sb (the fstat its check made: a caller
 * needing the size does not ask again), and the fd left O_NONBLOCK, which a regular file's reads
 * ignore (open(2)) but io_uring does not: never give such an fd to a ring. Saves two system calls
 * of the nine a lookup makes. */
int l3_open_file_st(int dfd, const char *rel, int flags, struct stat *sb);
/* Give what we just created (@fd) the store's exact mode and group. 0 or -errno. */
int l3_own(struct sc_l3 *l3, int fd, int is_dir);
/* Open DIR-relative @name with @flags (O_RDONLY/O_WRONLY/O_RDWR, O_APPEND, O_TRUNC, O_EXCL),
 * creating it when missing: a file it creates gets exactly the store's mode and group (l3_own);
 * an existing one is used as it is (never a FIFO, a link or anything but a regular file, and
 * never blocking). An fd or a negative errno. */
int l3_create_file(struct sc_l3 *l3, int dfd, const char *name, int flags);
/* mkdirat with the store's mode and group (0 also when it exists). */
int l3_mkdir_at(struct sc_l3 *l3, int dfd, const char *name);
/* Call @cb(l3, subdir_fd, sub, name, ctx) for every entry of every <topfd>/<2 hex>/ directory. */
int l3_scan(struct sc_l3 *l3, int topfd, int (*cb)(struct sc_l3 *, int, const char *, const char *, void *),
	    void *ctx);
/* "<32 hex><suffix>" -> digest; -EINVAL otherwise. */
int l3_name_digest(const char *name, const char *suffix, uint64_t *lo, uint64_t *hi);
/* The header block and size of an object opened at @fd. */
int l3_read_block(int fd, uint8_t *block, uint64_t *file_bytes);
/* A prefix entry opened at @fd, validated (magic, version, checksum, size). With @tokens, a
 * version 2 entry's token ids are returned in *@tokens (malloc'd; NULL for version 1); with @ns
 * (SC_L3_STR_MAX + 1 bytes), its namespace. */
int l3_read_pfx(int fd, struct l3_pfx *p, int32_t **tokens, char *ns);
/* l3_read_pfx of a file whose size is known (@size, from l3_open_file_st): one read. */
int l3_read_pfx_sized(int fd, int64_t size, struct l3_pfx *p, int32_t **tokens, char *ns);
/* Read prefix file @at in @dfd, whose name is @name (<prefix key>.pfx; @at may be another name of
 * the file), into @p and its key into *@lo, *@hi: 0 read and it holds that prefix, -EBADMSG
 * unreadable or it holds another prefix, another -errno from the read, or 1 when @name is no
 * prefix file name or @at cannot be opened (nothing to judge). */
int l3_read_pfx_named(int dfd, const char *at, const char *name, struct l3_pfx *p, uint64_t *lo, uint64_t *hi);
int l3_read_header(struct sc_l3 *l3, uint64_t lo, uint64_t hi, uint8_t *block, uint64_t *file_bytes);
/* The directory @dfd as a DIR stream of its own (a new description: @dfd stays open and its
 * position untouched), or NULL. */
DIR *l3_opendir(int dfd);
/* The O_DIRECT alignment of the filesystem holding @fd (a regular file in the directory) into
 * l3->dio_*_align: statx's, else a page when the filesystem takes O_DIRECT, else 0 (never direct);
 * and what the filesystem means for kept files (l3->kept_*: lib/l3/ring.c). */
void l3_dio_detect(struct sc_l3 *l3, int fd);
#ifdef SC_TEST_HOOKS
/* The default byte budget of kept files on a local filesystem (L3_KEPT_LOCAL_BYTES; tests lower it). */
extern uint64_t l3_kept_local_bytes;
#endif
/* Make room for @need elements of @elem bytes in the realloc'd array *@p of capacity *@cap
 * (doubling from 64). 0 or -ENOMEM (the array is left as it was). */
int l3_grow(void **p, size_t *cap, size_t need, size_t elem);
/* A subdirectory @name of @dfd, opened without following a link. An fd or -errno. */
int l3_open_dir_at(int dfd, const char *name);
/* The check of a version 2 prefix entry: XXH3-64 of its token ids and namespace trailer, seeded
 * with the hash of the header's first 56 bytes. */
uint64_t l3_pfx_check(const struct l3_pfx *p, const int32_t *tokens, const char *ns, uint32_t ns_len);
/* fsync of the directory @sub of @dfd (NULL: @dfd itself; what makes a rename durable). 0 or -errno. */
int l3_fsync_dir_at(int dfd, const char *sub);
#ifdef SC_TEST_HOOKS
extern _Atomic unsigned long l3_test_dir_syncs; /* calls of l3_fsync_dir_at */
#endif
/* Is @name in @dfd still the file open as @fd (not removed or replaced since it was opened)? */
int l3_still_named(int dfd, const char *name, int fd);
/* Is the object of @loc backed by the disk it claims? An object file is written whole, so one whose
 * allocated blocks are a small fraction of its size (a sparse file a member planted, its header
 * claiming up to L3_MAX_PAYLOAD) would make a reader allocate and read what is not there: 0, or
 * -EBADMSG (sparse), or -errno (-ENOENT: gone). A manifest's segments are checked one by one when
 * read. */
int l3_obj_backed(struct sc_l3 *l3, const struct sc_location *loc);

/* flock(@how) on @fd, waiting at most @ms (anyone who can open the file can hold a lock on it
 * forever): 0, -EBUSY when it is still held after @ms, or -errno. May sleep. */
int l3_flock_wait(int fd, int how, unsigned ms);
/* How long a process waits for the store's locks before it says "busy". */
#define L3_LOCK_WAIT_MS 5000u
/* The store's DIR/lock (flock): exclusive between processes that scan and unlink (local mode);
 * 0 or -EBUSY after L3_LOCK_WAIT_MS. */
int l3_flock_ex(struct sc_l3 *l3);
void l3_flock_un(struct sc_l3 *l3);
/* Is less than half of [@off, @off + @bytes) of @fd in the page cache (cachestat; unknown: cold)? */
int l3_file_cold(int fd, uint64_t off, uint64_t bytes);

#endif
