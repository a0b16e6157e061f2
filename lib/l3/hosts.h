/* lib/l3/hosts.h — what a directory shared by several hosts needs: host identity, the mode, temp-file names and their judgement, access records, the grace, dropping prefix entries safely (lib/l3/hosts.c). */
#ifndef SC_LIB_L3_HOSTS_H
#define SC_LIB_L3_HOSTS_H

#include "types.h"

/* This host's identity: @host_id validated, or /etc/machine-id, or the host name. */
int l3_host_init(struct sc_l3 *l3, const char *host_id);
/* Shared mode: DIR/shared present, asked for (and then recorded), or DIR on CephFS. */
int l3_mode_init(struct sc_l3 *l3, uint32_t flags);
/* l3->writer = "<host>.<pid>.<nonce>", the stem of every temp file and access segment we make. */
void l3_writer_init(struct sc_l3 *l3);
/* "<prefix><writer>.<n>" for a new temp file (".tmp-") or captured prefix entry (".drop-"). */
void l3_tmp_name(struct sc_l3 *l3, const char *prefix, char *out, size_t n);
/* A file its maker holds (an OFD lock on byte 0, from creation to rename or close) is in use; one
 * nobody holds is left over once it is older than L3_TMP_STALE_NS and the visibility grace (the
 * instant between its creation and its lock; a maker on another host). 1 left over, 0 not. */
#define L3_TMP_STALE_NS (2ull * 1000000000ull)
int l3_left_over(struct sc_l3 *l3, int dfd, const char *name);
/* Record a use of an object for the LRU order: local mode touches the file's mtime (@fd, when
 * last touched longer ago than L3_TOUCH_NS); shared mode buffers an access record. */
int64_t l3_note_access(struct sc_l3 *l3, int fd, uint64_t lo, uint64_t hi, int64_t mtime_ns);
/* Write buffered access records (@force: even if few and recent). Caller must not hold mu. */
void l3_access_flush(struct sc_l3 *l3, int force);
/* Is something made at @t_ns (CLOCK_REALTIME of the host that made it) older than the grace?
 * (Local mode: always.) */
int l3_settled(const struct sc_l3 *l3, uint64_t t_ns);
/* Drop the prefix entry at @pfxfd/@rel if, once captured, it names an object that is missing or
 * bad and is older than the grace; a put that raced with us keeps its entry. 1 dropped, 0 kept,
 * negative errno. */
int l3_pfx_drop(struct sc_l3 *l3, const char *rel);
/* Resolve a captured ".drop-" file left by a dead dropper: put it back or remove it. */
int l3_pfx_drop_resolve(struct sc_l3 *l3, int dfd, const char *sub, const char *name);

#endif
