/*
 * tests/l3_hosts.h — helpers of the suites that simulate several hosts on one L3 directory
 * (tests/check_l3_shared.c on a local filesystem, tests/check_cephfs.c on a real CephFS).
 */
#ifndef SC_TESTS_L3_HOSTS_H
#define SC_TESTS_L3_HOSTS_H

#include <stddef.h>
#include <stdint.h>

#include "stagecache.h"

/* Tokens of document @doc: @n of them, the same on every host. */
void h_tokens(uint32_t doc, int32_t *t, uint32_t n);
/* Payload bytes of document @doc (@n bytes, deterministic). */
void h_bytes(uint32_t doc, uint8_t *p, size_t n);
/* The visibility grace h_open asks for (sc_l3_opts.visibility_ms; 0: the library's default). */
extern unsigned h_visibility_ms;
/* Open @dir as host @host (shared mode), budget @budget, counters under @state_dir (may be NULL). */
int h_open(const char *dir, const char *host, uint64_t budget, const char *state_dir, struct sc_l3 **out);
/* Put document @doc (@ntok tokens, @bytes payload bytes, FULL_STATE) in namespace "h". */
int h_put(struct sc_l3 *l3, uint32_t doc, uint32_t ntok, size_t bytes);
/* Locate document @doc and fill it; compare every byte. 0 ok, -ENOENT (a miss: not stored, or
 * vanished), 1 WRONG BYTES, or another negative errno. */
int h_fetch(struct sc_l3 *l3, uint32_t doc, uint32_t ntok, size_t bytes);
/* h_fetch, retried while it misses, for at most @ms milliseconds (another host's put becomes
 * visible here within the filesystem's visibility delay). */
int h_fetch_wait(struct sc_l3 *l3, uint32_t doc, uint32_t ntok, size_t bytes, unsigned ms);
/* Run a shell command (printf format); its exit status (-1 if it could not run). */
int h_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Names of regular files under @dir whose name starts with @prefix: how many. */
int h_count(const char *dir, const char *prefix);
/* rm -rf (no following of mounts: FTW_MOUNT). */
void h_rm_rf(const char *dir);
/* Wait for child @pid (up to @secs seconds, then SIGKILL it); its exit status, or -1 when it did
 * not exit normally (killed, crashed, timed out). */
int h_wait(int pid, int secs);

#endif
