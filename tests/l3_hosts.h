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
/* Wait for child @pid (up to @secs seconds, then SIGKILL it); its exit status, or -1 when it did
 * not exit normally (killed, crashed, timed out). */
int h_wait(int pid, int secs);

/*
 * Another host in its own process: its own handle of @dir (host @host, budget @budget, counters
 * under @state_dir) and its own arena @arena (bound to the handle: its quarantines drop its own
 * mirrors), running the parent's commands one at a time:
 *   'p' put document @doc (@ntok tokens, @bytes bytes)            -> sc_l3_put's result
 *   'f' fetch it and compare every byte                          -> h_fetch's result
 *   'e' evict until at most @bytes remain (the janitor's pass)    -> objects evicted, or errno
 *   'x' flip a payload byte of its object; 'X' a header byte     -> 0, or errno
 */
struct h_peer {
	int pid, cmd, res;
};
int h_peer_start(struct h_peer *p, const char *dir, const char *host, uint64_t budget, const char *state_dir,
		 const char *arena);
int h_peer_do(struct h_peer *p, char op, uint32_t doc, uint32_t ntok, uint32_t bytes);
/* Stop the peer: 0 when it exited cleanly. */
int h_peer_stop(struct h_peer *p);

/*
 * Coherence of the location index across hosts. Host A is this process (an
 * arena whose index refresh interval is @refresh_ms, a handle of @dir_a bound to it), host B an
 * h_peer on @dir_b (the same directory through its own mount, or the same path locally):
 *   1. B puts; A's restore finds it at once (its index was complete and did not have it: a miss
 *      goes to the directory), within @vis_ms (the filesystem's visibility delay; 0 locally);
 *   2. B puts a longer prefix of a prompt A's index already answers: A's restores keep serving
 *      the shorter one (right bytes) until the index's refresh shows the longer one: by the
 *      second directory scan of A's after A's mount showed it at the latest (the first may have
 *      been under way; the time it took: *@lat_ms);
 *   3. B evicts an object A's index names: A's restore misses (no error), the entry is dropped
 *      (index counters vanished and drops move) and the next restore misses without it;
 *   4. B corrupts an object and B's own fill quarantines it: A misses, never bytes;
 *   5. B corrupts an object A reads first: A's fill fails its digest, quarantines it, and the
 *      restore is a miss, not an error; the same for a corrupt header.
 * Returns 0, or -1 with the reason in @why.
 */
int h_coherence(const char *dir_a, const char *dir_b, const char *state_a, const char *state_b, const char *arena_a,
		const char *arena_b, unsigned refresh_ms, unsigned vis_ms, double *lat_ms, char *why, size_t len);

#endif
