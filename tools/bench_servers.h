/*
 * tools/bench_servers.h — what the two halves of `stagecache bench servers` share. Private to them:
 *   bench_servers.c      the driver: options, keys and values, the L2 side, measurements, report;
 *   bench_servers_srv.c  memcached and Redis: start/stop, temp dir, signal cleanup, their clients.
 * The names linked across the two carry a bs_ prefix, since every tool links into one binary.
 */
#ifndef SC_TOOLS_BENCH_SERVERS_H
#define SC_TOOLS_BENCH_SERVERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MAX_KEYS 256
#define NSIZES 3

/* How often the timed loops look at the clock: rare enough to cost nothing, often enough to stop
 * within a few ms of the deadline even at 1 MiB per get. */
#define CLOCK_EVERY 16

struct bs_size {
	const char *tag;
	uint64_t bytes;
};
extern const struct bs_size bs_sizes[NSIZES]; /* 4k, 64k, 1m */

enum srv { SRV_MC_UNIX, SRV_MC_TCP, SRV_REDIS, NSRV };

/* ---- keys and values (bench_servers.c) ---- */
extern char bs_mkey[NSIZES][MAX_KEYS][32];
extern size_t bs_mkey_len[NSIZES][MAX_KEYS];
/* The value of key @i of size class @si: incompressible, distinct per key. */
void bs_value_fill(int si, int i, uint8_t *buf);
/* 0 if @got/@len is the value of key @i of size class @si; else -1 (said why, naming @who). */
int bs_check_value(const char *who, int si, int i, const uint8_t *got, size_t len, uint8_t *scratch);
/* where the timed loops put the bytes they touch, so no compiler drops the touch */
extern volatile unsigned bs_sink;

/* ---- state the signal handler also reads (bench_servers_srv.c; written before it can matter) ---- */
extern volatile pid_t bs_client;        /* the running client process, or -1 */
extern char bs_arena_path[4096];        /* the arena's file, or "" */

/* ---- servers (bench_servers_srv.c); each prints why it failed ---- */
/* Forget every server (at the start of a run). */
void bs_servers_reset(void);
/* Remove the temp dirs and arenas that runs killed with SIGKILL left behind. */
void bs_sweep_dead_runs(void);
/* Create this run's temp dir. 0 or -errno (says nothing). */
int bs_tmpdir_create(void);
void bs_tmpdir_remove(void);
/* Clean up servers, temp dir, client and arena on SIGINT/SIGTERM/SIGHUP; restore the old handlers. */
void bs_signals_install(void);
void bs_signals_restore(void);
/* In a freshly forked child: no inherited cleanup duty, and die with @parent (by @deathsig). */
void bs_child_detach(pid_t parent, int deathsig);
/* Start server @s (enum srv) on its local socket and wait until it accepts. 0 or -1. */
int bs_server_start(int s, uint64_t mem_mb);
/* Store every value in server @s (from the setup process) and note its version. 0 or -1. */
int bs_server_load(int s, int nkeys, uint8_t *scratch);
/* Stop and reap every server. */
void bs_servers_stop(void);
/* In a client process: connect to server @s, check every value, then GET in a loop for @seconds.
 * Gets/s, or -1. */
double bs_server_client(int s, int si, int nkeys, double seconds, int verify, uint8_t *scratch);
/* The server @s and its client library, with versions, for a metric's baseline note. */
void bs_server_describe(char *out, size_t len, int s);

#endif
