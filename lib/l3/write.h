/* lib/l3/write.h — writing files durably: temp file, fsync, rename, fsync of the directory (lib/l3/write.c). */
#ifndef SC_LIB_L3_WRITE_H
#define SC_LIB_L3_WRITE_H

#include <sys/stat.h>

#include "types.h"

/* A temp file being written: its final directory @sfd, the directory @tfd holding it as @tmp,
 * and @fd (write-only, OFD-locked: "being written"; -1 once placed or closed). */
struct l3_wfile {
	int sfd, tfd, fd;
	char tmp[L3_WRITER_MAX + 24];
};
/* Create @w: the temp file of a file to be placed in @dfd/@sub (made when missing), in DIR/tmp,
 * locked and owned. 0 or a negative errno (then nothing is left open or on disk). */
int l3_wfile_create(struct sc_l3 *l3, int dfd, const char *sub, struct l3_wfile *w);
/* Rename @w's temp file to @final in its directory (@noreplace: -EEXIST when a file is there, the
 * temp removed) and close it; the caller synced it first. The directory is not synced. */
int l3_wfile_place(struct l3_wfile *w, const char *final, int noreplace);
/* Close what @w holds; a temp file not placed is removed. */
void l3_wfile_close(struct l3_wfile *w);
/*
 * A put that finds a name in place (its object, its entry, a segment, its token length) relies on
 * it instead of writing it, and its acknowledgment must not rest on another writer's rename whose
 * directory that writer has not synced yet (it syncs right after the rename, unless it dies
 * first). A name is young when its inode changed less than L3_SETTLE_NS ago and so did its
 * directory (a rename moves both; a use's touch only the file): then the put syncs the directory.
 * An older one is durable: its writer's sync, or else the kernel's writeback of the directory
 * (vm.dirty_expire_centisecs, 30 s by default; ext4's journal commits every 5 s), came first.
 * Hosts sharing a store are assumed to keep their clocks within seconds of each other.
 */
#define L3_SETTLE_NS (60ull * 1000000000ull)
/* Is @sb (a file in @dfd/@sub; @sub NULL: in @dfd) young? A directory that cannot be read: yes. */
int l3_name_young(int dfd, const char *sub, const struct stat *sb);
#ifdef SC_TEST_HOOKS
extern uint64_t l3_settle_ns; /* L3_SETTLE_NS; tests set 0 (every name settled) or UINT64_MAX */
#endif
/* Register a token length in DIR/lengths (idempotent; a young one found there: DIR/lengths synced). */
int l3_put_length(struct sc_l3 *l3, uint32_t tokens);
/* Write @iov as @dfd/@sub/@final: a temp file (host identity in its name), fsync, rename (with
 * @noreplace: -EEXIST when it is there), fsync of the directory. */
int l3_write_file(struct sc_l3 *l3, int dfd, const char *sub, const char *final, const struct iovec *iov, int niov,
		  int noreplace);
/* Replace the file DIR/@name (one the janitor or an eviction keeps: DIR/lru, DIR/victims) by
 * @iov: a temp file in DIR (locked while written; a writer that dies leaves it to the janitor),
 * fsync'd when @sync, renamed over @name once @fence (if any) says the caller may. 0 or -errno
 * (then the temp file is gone and @name as it was). */
int l3_replace_top(struct sc_l3 *l3, const char *name, const struct iovec *iov, int niov, int sync,
		   int (*fence)(struct sc_l3 *));

#endif
