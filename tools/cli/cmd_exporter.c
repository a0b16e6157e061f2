/*
 * tools/cli/cmd_exporter.c — `stagecache exporter NAME... [--listen ADDR:PORT] [--dir DIR] [--l3 DIR]...`:
 * serves every counter of `stagecache stats` for Prometheus at /metrics, in the OpenMetrics text
 * format (or the classic 0.0.4 text format to a scraper that does not ask for OpenMetrics).
 *
 * No root and no eBPF: the counters are the library's own (sc_l2_stats, sc_promote_stats,
 * sc_ring_stats, sc_arena_info, sc_l3_stats), so the exporter needs only read-write access to the
 * arena files (as any worker) and read access to the L3 directories. HTTP is libmicrohttpd's,
 * with one internal thread: each scrape attaches to every arena, reads, and detaches, all on that
 * thread (an arena handle belongs to one thread), so a destroyed and re-created arena is always
 * the current one and no reader slot is held between scrapes. A scrape takes a snapshot of each
 * arena first and then writes the families, since OpenMetrics wants each family's samples together.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "cli.h"

/*
 * libmicrohttpd is loaded when the exporter starts serving (dlopen), not linked: the stagecache
 * binary depends only on what every command uses (ldd: liburing, libbpf, libelf, zlib,
 * libxxhash, libc). The calls below go through these pointers under their usual names.
 */
#define MHD_SONAME "libmicrohttpd.so.12"
static struct {
	__typeof__(&MHD_start_daemon) start_daemon;
	__typeof__(&MHD_stop_daemon) stop_daemon;
	__typeof__(&MHD_get_daemon_info) get_daemon_info;
	__typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
	__typeof__(&MHD_add_response_header) add_response_header;
	__typeof__(&MHD_queue_response) queue_response;
	__typeof__(&MHD_destroy_response) destroy_response;
	__typeof__(&MHD_lookup_connection_value) lookup_connection_value;
} mhd;

/* 0, or prints why libmicrohttpd cannot be used and returns EXIT_FAIL */
static int mhd_load(void)
{
	void *h = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (h) {
#define SYM(f) (mhd.f = (__typeof__(mhd.f))dlsym(h, "MHD_" #f)) != NULL
		if (SYM(start_daemon) && SYM(stop_daemon) && SYM(get_daemon_info) && SYM(create_response_from_buffer) &&
		    SYM(add_response_header) && SYM(queue_response) && SYM(destroy_response) &&
		    SYM(lookup_connection_value))
			return 0;
#undef SYM
	}
	fprintf(stderr, "stagecache exporter: cannot serve HTTP: %s (install Debian's libmicrohttpd12; --once needs no "
			"HTTP)\n", dlerror());
	return EXIT_FAIL;
}

#define MHD_start_daemon (*mhd.start_daemon)
#define MHD_stop_daemon (*mhd.stop_daemon)
#define MHD_get_daemon_info (*mhd.get_daemon_info)
#define MHD_create_response_from_buffer (*mhd.create_response_from_buffer)
#define MHD_add_response_header (*mhd.add_response_header)
#define MHD_queue_response (*mhd.queue_response)
#define MHD_destroy_response (*mhd.destroy_response)
#define MHD_lookup_connection_value (*mhd.lookup_connection_value)

#define MAX_TARGETS 64
#define MAX_STAGES 1024

/* Bounds against clients that connect and never finish (or trickle) a request: a scraper is one
 * connection now and then; a host's scrapers are a handful of addresses. */
#define CONN_MAX 256
#define CONN_PER_IP 8
#define CONN_TIMEOUT_S 10
#define LOG_EVERY_S 60

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache exporter NAME... [--listen ADDR:PORT] [--dir DIR] [--owner USER] [--l3 DIR]... [--once]\n\n"
		"Serve the counters of the arenas NAME... (and of the L3 directories given with --l3) for\n"
		"Prometheus at http://ADDR:PORT/metrics, in the OpenMetrics text format (the classic text\n"
		"format 0.0.4 to a scraper that does not ask for OpenMetrics). Every counter of\n"
		"`stagecache stats --json` is there: L2 (per arena and per stage id), promotion, rings,\n"
		"leases, attached processes, refusals, and L3. Each scrape attaches to each arena and\n"
		"detaches again; an arena that cannot be read has stagecache_up 0. Needs no root and no\n"
		"eBPF: run it as a user who can open the arenas (their owner or group). Runs until SIGINT\n"
		"or SIGTERM (exit 0).\n\n"
		"  --listen ADDR:PORT  address to listen on (default 127.0.0.1:9477; port 0 picks a free\n"
		"                      one, printed at start; [::1]:PORT for IPv6)\n"
		"  --dir DIR           look for the arenas only in DIR\n"
		"  --owner U           trust arena files owned by user U (a name, a number, or any), as a\n"
		"                      member of the group who did not create the arenas\n"
		"  --l3 DIR            also export the counters of the L3 directory DIR (repeatable)\n"
		"  --once              print the metrics once to stdout and exit (1 if a target is down)\n\n"
		"It prints \"listening on http://ADDR:PORT/metrics\" once it accepts connections. At most %d\n"
		"connections at once, %d from one address; idle ones are closed after %d s; what the HTTP\n"
		"server has to say goes to stderr at most once every %d s.\n", CONN_MAX, CONN_PER_IP, CONN_TIMEOUT_S,
		LOG_EVERY_S);
}

/* ---- one scrape's snapshot ---- */

struct arena_snap {
	int up;
	struct sc_l2_stats l2;
	struct cli_counters c; /* nrings, nstages >= 0 */
};

struct l3_snap {
	int up;
	struct sc_l3_stats st;
};

struct exporter {
	char **names;
	int nnames;
	const char *dir;
	const char *l3dirs[MAX_TARGETS];
	int nl3;
	int last_up[2 * MAX_TARGETS]; /* for logging changes only: 1 up, 0 down, -1 unknown */
};

static void snap_free(struct arena_snap *s)
{
	cli_counters_free(&s->c);
}

static int snap_arena(const struct exporter *x, const char *name, struct arena_snap *s, int *err)
{
	memset(s, 0, sizeof(*s));
	struct sc_arena *a;
	struct sc_arena_open_opts o = cli_open_opts(x->dir);
	int rc = sc_arena_open_with(name, &o, &a);
	if (rc) {
		*err = rc;
		return -1;
	}
	if ((rc = sc_l2_stats(a, NULL, &s->l2))) {
		*err = rc;
		sc_arena_close(a);
		return -1;
	}
	s->up = 1;
	cli_counters_read(a, MAX_STAGES, &s->c);
	if (s->c.nrings < 0)
		s->c.nrings = 0;
	if (s->c.nstages < 0)
		s->c.nstages = 0;
	sc_arena_close(a);
	return 0;
}

/* An existing L3 directory, opened so that nothing in it is created or changed. */
static int snap_l3(const char *dir, struct l3_snap *s, int *err)
{
	memset(s, 0, sizeof(*s));
	struct sc_l3 *l3;
	/* a local store (DIR/state) or a shared one (DIR/shared); nothing is created */
	struct sc_l3_opts o = { .flags = SC_L3_OPEN_NO_RECONCILE | SC_L3_OPEN_NO_CREATE };
	if ((*err = sc_l3_open(dir, &o, &l3)))
		return -1;
	*err = sc_l3_stats(l3, &s->st);
	sc_l3_close(l3);
	if (*err)
		return -1;
	s->up = 1;
	return 0;
}

/* ---- the families ---- */

/* S_L2_WHY and S_PROMO_WHY: one sample per refusal reason (label reason, SC_L2_REFUSE_COUNT of them,
 * 8 bytes apart from `off`); S_KEYCOL: one per level (label level). */
/* S_MISS (the arena's) and S_STAGE_MISS (each stage's): one sample per reason of the array of
 * struct sc_miss_stats at `off` (label reason). */
enum scope { S_ARENA, S_L2, S_L2_WHY, S_STAGE, S_PROMO, S_PROMO_WHY, S_L3IX, S_KEYCOL, S_RING, S_L3, S_MISS,
	     S_STAGE_MISS };
/* S_ARENA values, from sc_arena_info (named by `off`) */
enum { A_UP, A_ATTACHED, A_SIZE, A_HEAP, A_PAGE };

struct family {
	const char *name; /* without the _total of a counter's sample */
	const char *type; /* "counter" or "gauge" */
	enum scope scope;
	size_t off, size; /* in the scope's structure; size 0: computed (see value()) */
	const char *help;
};

#define L2F(n, t, f, h) { "stagecache_l2_" n, t, S_L2, offsetof(struct sc_l2_stats, f), 8, h }
#define STF(n, t, f, h) { "stagecache_stage_" n, t, S_STAGE, offsetof(struct sc_l2_stats, f), 8, h }
#define PRF(n, t, f, h) { "stagecache_promotion_" n, t, S_PROMO, offsetof(struct sc_promote_stats, f), \
			  sizeof(((struct sc_promote_stats *)0)->f), h }
#define RGF(n, t, f, h) { "stagecache_ring_" n, t, S_RING, offsetof(struct sc_ring_stat, f), \
			  sizeof(((struct sc_ring_stat *)0)->f), h }
#define IXF(n, t, f, h) { "stagecache_l3_index_" n, t, S_L3IX, offsetof(struct sc_l3_index_stats, f), \
			  sizeof(((struct sc_l3_index_stats *)0)->f), h }
#define L3F(n, t, f, h) { "stagecache_l3_" n, t, S_L3, offsetof(struct sc_l3_stats, f), 8, h }
#define C "counter"
#define G "gauge"

static const struct family families[] = {
	{ "stagecache_up", G, S_ARENA, A_UP, 0, "1 when the arena could be attached and read in this scrape" },
	{ "stagecache_attached_processes", G, S_ARENA, A_ATTACHED, 0,
	  "processes attached to the arena (the exporter included)" },
	{ "stagecache_arena_size_bytes", G, S_ARENA, A_SIZE, 0, "size of the arena" },
	{ "stagecache_arena_heap_bytes", G, S_ARENA, A_HEAP, 0, "size of the arena's payload heap" },
	{ "stagecache_arena_page_size_bytes", G, S_ARENA, A_PAGE, 0, "page size of the arena's mapping, as measured" },
	L2F("entries", G, entries, "live L2 entries"),
	L2F("bytes", G, bytes, "bytes charged to the L2 budget (footprint)"),
	L2F("logical_bytes", G, logical_bytes, "payload (wire) bytes of the live L2 entries"),
	L2F("physical_bytes", G, physical_bytes, "payload bytes L2 stores for them (each shared segment once, holders included)"),
	L2F("saved_bytes", G, saved_bytes, "logical minus physical bytes (segments shared between entries)"),
	L2F("segments", G, segments, "content-addressed segments indexed in L2"),
	L2F("segment_holder_bytes", G, segment_holder_bytes, "bytes kept for shared segments after their entry left"),
	L2F("segment_dedup_bytes", C, segment_dedup_bytes, "bytes admissions found stored already"),
	L2F("budget_bytes", G, budget_bytes, "the L2 budget"),
	L2F("hits", C, hits, "L2 lookups that hit (flushed every 1024 lookups per stage handle)"),
	L2F("misses", C, misses, "L2 lookups that missed"),
	L2F("inserts", C, inserts, "entries admitted or published"),
	L2F("evictions", C, evictions, "entries evicted to make room"),
	L2F("admission_rejects", C, admission_rejects, "admissions refused (digest, shape, size)"),
	L2F("refused_bytes", C, refused_bytes, "wire bytes refused as larger than the budget"),
	L2F("leases", G, leases, "leases held by every attached process"),
	L2F("pending_reclaim_bytes", G, pending_reclaim_bytes, "bytes removed and waiting for readers to leave"),
	L2F("free_bytes", G, free_bytes, "free bytes of the heap"),
	L2F("largest_free_block_bytes", G, largest_free_block, "largest free block of the heap (fragmentation)"),
	L2F("small_entries", G, small_entries, "entries on the small (probation) FIFO"),
	L2F("small_bytes", G, small_bytes, "bytes charged by the entries on the small FIFO"),
	L2F("main_entries", G, main_entries, "entries on the main FIFO"),
	L2F("main_bytes", G, main_bytes, "bytes charged by the entries on the main FIFO"),
	L2F("moved_to_main", C, moved_to_main, "entries moved from the small FIFO to main (read again while small)"),
	L2F("ghost_hits", C, ghost_hits, "admissions of a key evicted from small recently (straight to main)"),
	{ "stagecache_l2_refused", C, S_L2_WHY, offsetof(struct sc_l2_stats, refused), 8,
	  "admissions and publications refused, by reason" },
	L2F("refused_low_benefit", C, refused_low_benefit,
	    "admissions refused by the benefit policy (no net benefit, or worth < 1/16 of what is evicted)"),
	L2F("credit_kept", C, credit_kept, "unhit entries kept one more pass for their compute benefit"),
	{ "stagecache_misses", C, S_MISS, offsetof(struct sc_miss_stats, l2), 8, "L2 lookups that missed, by reason" },
	{ "stagecache_misses_refused", C, S_MISS, offsetof(struct sc_miss_stats, l2_refused), 8,
	  "L2 misses of keys whose admission was refused, by the refusal's reason" },
	{ "stagecache_restore_misses", C, S_MISS, offsetof(struct sc_miss_stats, restore), 8,
	  "restores that returned no state, by reason" },
	{ "stagecache_restore_deadline", C, S_MISS, offsetof(struct sc_miss_stats, deadline), 8,
	  "restores answered recompute (deadline), by detail" },
	{ "stagecache_stage_misses", C, S_STAGE_MISS, offsetof(struct sc_miss_stats, l2), 8,
	  "L2 lookups of the stage that missed, by reason" },
	{ "stagecache_stage_restore_misses", C, S_STAGE_MISS, offsetof(struct sc_miss_stats, restore), 8,
	  "restores of the stage that returned no state, by reason" },
	STF("entries", G, entries, "live L2 entries of the stage"),
	STF("bytes", G, bytes, "bytes charged to the budget by the stage"),
	STF("logical_bytes", G, logical_bytes, "payload (wire) bytes of the stage's entries"),
	STF("hits", C, hits, "L2 hits of the stage"),
	STF("misses", C, misses, "L2 misses of the stage"),
	STF("inserts", C, inserts, "entries admitted by the stage"),
	STF("evictions", C, evictions, "entries of the stage evicted"),
	STF("admission_rejects", C, admission_rejects, "admissions of the stage refused"),
	STF("refused_bytes", C, refused_bytes, "wire bytes of the stage refused as too large"),
	STF("refused_low_benefit", C, refused_low_benefit, "admissions of the stage refused by the benefit policy"),
	PRF("observations", G, observations, "observations in the promotion table"),
	PRF("claims", G, claims, "fills claimed now (single flight)"),
	PRF("capacity", G, capacity, "slots of the promotion table"),
	PRF("considered", C, considered, "L3 fills considered by the policy"),
	PRF("promoted", C, promoted, "fills the policy said yes to"),
	PRF("evicted", C, evicted, "observations evicted from a full table"),
	PRF("expired", C, expired, "observations expired"),
	PRF("repairs", C, repairs, "repairs of the table after a holder died"),
	PRF("published", C, published, "promotions published in L2"),
	PRF("refused_low_benefit", C, refused_low_benefit, "promotions refused by the benefit policy"),
	{ "stagecache_promotion_refused", C, S_PROMO_WHY, offsetof(struct sc_promote_stats, refused), 8,
	  "promotions L2 refused, by reason" },
	IXF("capacity", G, capacity, "entries of the L3 location index (0: none)"),
	IXF("refresh_ms", G, refresh_ms, "milliseconds an index entry is trusted without the directory"),
	IXF("positive", G, positive, "index entries now saying a prefix is stored"),
	IXF("negative", G, negative, "index entries now saying a prefix was checked absent"),
	IXF("pages", G, pages, "token-id pages of the index (1 KiB each)"),
	IXF("free_pages", G, free_pages, "free token-id pages of the index"),
	IXF("token_verify", G, token_verify, "1 when token ids are stored and compared"),
	IXF("bound", G, bound, "1 when an L3 directory is bound to the index"),
	IXF("hits", C, hits, "restores and locates answered by a positive entry"),
	IXF("negative_hits", C, negative_hits, "lengths skipped on a fresh negative entry"),
	IXF("misses", C, misses, "lookups the index could not answer"),
	IXF("fallbacks", C, fallbacks, "directory probes run"),
	IXF("stale", C, stale, "misses on an entry older than the refresh interval"),
	IXF("refreshes", C, refreshes, "directory scans completed and probes written back"),
	IXF("inserts", C, inserts, "index entries inserted"),
	IXF("evictions", C, evictions, "index entries evicted"),
	IXF("drops", C, drops, "index entries dropped"),
	IXF("full", C, full, "inserts refused because the index was full"),
	IXF("vanished", C, vanished, "objects found gone under a fill or a lookup"),
	IXF("foreign", C, foreign, "lookups by an L3 directory other than the bound one"),
	{ "stagecache_key_collisions", C, S_KEYCOL, offsetof(struct sc_l3_index_stats, key_collisions_l2), 8,
	  "keys that matched but whose tokens did not, by level (l2, index, l3)" },
	RGF("state", G, state, "0 free, 1 claiming, 2 live, 3 closed"),
	RGF("producer_alive", G, producer_alive, "1 when the ring's producer is live"),
	RGF("corrupt", G, corrupt, "1 when the ring's indices are inconsistent"),
	RGF("depth_records", G, depth_records, "records submitted and not yet delivered"),
	RGF("depth_bytes", G, depth_bytes, "bytes submitted and not yet delivered"),
	RGF("records", C, records, "records ever submitted to the ring"),
	RGF("delivered", C, delivered, "records ever delivered from the ring"),
	RGF("full", C, ring_full, "submits refused because the ring was full"),
	RGF("capacity_bytes", G, ring_bytes, "record space of the ring"),
	{ "stagecache_l3_up", G, S_L3, 0, 0, "1 when the L3 directory could be read in this scrape" },
	L3F("objects", G, objects, "objects stored"),
	L3F("bytes", G, bytes, "bytes of object files"),
	L3F("fills", C, fills, "fills from the directory"),
	L3F("fill_bytes", C, fill_bytes, "bytes filled"),
	{ "stagecache_l3_fill_seconds", C, S_L3, offsetof(struct sc_l3_stats, fill_ns), 0, "time spent in fills, submit to verified" },
	L3F("verify_failures", C, verify_failures, "objects that failed verification"),
	L3F("quarantined", C, quarantined, "objects moved to quarantine"),
	L3F("evictions", C, evictions, "objects evicted for the budget"),
	L3F("write_refusals", C, write_refusals, "puts refused (budget, free space)"),
	L3F("puts", C, puts, "puts"),
	L3F("put_dedup", C, put_dedup, "puts of a digest already stored"),
	L3F("budget_bytes", G, budget_bytes, "the budget of the directory as opened by the exporter (0: none)"),
	L3F("logical_bytes", G, logical_bytes, "bytes the objects would take stored whole"),
	L3F("physical_bytes", G, physical_bytes, "bytes of object and segment files, a segment once"),
	L3F("saved_bytes", G, saved_bytes, "logical minus physical bytes (segments shared between objects)"),
	L3F("segments", G, segments, "segment files"),
	L3F("fills_kept", C, fills_kept, "fills that read an object file kept open"),
	L3F("fill_bytes_from_l2", C, fill_bytes_from_l2, "segment bytes of fills copied from L2, not read"),
	L3F("identity_mismatches", C, identity_mismatches, "fills refused: the object was put by another model or state identity"),
	L3F("fill_starts", C, fill_starts, "fills submitted (each reads, or fails before reading)"),
};

_Static_assert(offsetof(struct sc_l3_index_stats, key_collisions_l3) ==
		       offsetof(struct sc_l3_index_stats, key_collisions_l2) + 16, "the levels are 8 bytes apart");
_Static_assert(sizeof(((struct sc_l2_stats *)0)->refused) == 8 * SC_L2_REFUSE_COUNT &&
		       sizeof(((struct sc_promote_stats *)0)->refused) == 8 * SC_L2_REFUSE_COUNT,
	       "the reasons are 8 bytes apart");

static uint64_t field(const void *base, size_t off, size_t size)
{
	if (size == 4) {
		uint32_t v;
		memcpy(&v, (const char *)base + off, 4);
		return v;
	}
	uint64_t v;
	memcpy(&v, (const char *)base + off, 8);
	return v;
}

/* A label value with OpenMetrics escapes (backslash, double quote, newline). */
static void label_value(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void sample(FILE *f, const struct family *fam, const char *k1, const char *v1, const char *k2, const char *v2,
		   const char *value)
{
	int counter = !strcmp(fam->type, C);
	fprintf(f, "%s%s{%s=", fam->name, counter ? "_total" : "", k1);
	label_value(f, v1);
	if (k2) {
		fprintf(f, ",%s=", k2);
		label_value(f, v2);
	}
	fprintf(f, "} %s\n", value);
}

static void header(FILE *f, const struct family *fam, int om)
{
	int counter = !strcmp(fam->type, C);
	/* OpenMetrics names the family; the classic format names the sample (with _total) */
	const char *suffix = counter && !om ? "_total" : "";
	fprintf(f, "# TYPE %s%s %s\n", fam->name, suffix, fam->type);
	if (om) {
		size_t n = strlen(fam->name);
		if (n > 6 && !strcmp(fam->name + n - 6, "_bytes"))
			fprintf(f, "# UNIT %s bytes\n", fam->name);
		else if (n > 8 && !strcmp(fam->name + n - 8, "_seconds"))
			fprintf(f, "# UNIT %s seconds\n", fam->name);
	}
	fprintf(f, "# HELP %s%s %s.\n", fam->name, suffix, fam->help);
}

/* One sample per index j < @n (a refusal reason, a collision level): the 8-byte field at
 * fam->off + 8 j of @base, labelled @label="name(j)". */
static void sample_each(FILE *f, const struct family *fam, const char *an, const void *base, int n,
			const char *label, const char *(*name)(int j))
{
	char v[64];
	for (int j = 0; j < n; j++) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)field(base, fam->off + 8 * (size_t)j, 8));
		sample(f, fam, "arena", an, label, name(j), v);
	}
}

static const char *level_name(int j)
{
	static const char *const level[] = { "l2", "index", "l3" };
	return level[j];
}

/* An S_ARENA family's value for @s; 0 when the arena's info is missing. */
static int arena_value(const struct family *fam, const struct arena_snap *s, uint64_t *val)
{
	switch (fam->off) {
	case A_UP: *val = (uint64_t)s->up; return 1;
	case A_ATTACHED: *val = s->c.info.attached_count; break;
	case A_SIZE: *val = s->c.info.size_bytes; break;
	case A_HEAP: *val = s->c.info.heap_bytes; break;
	default: *val = s->c.info.page_size; break;
	}
	return s->c.have_info;
}

/* One value of arena @an (a struct @base when @have), unlabelled. */
static void sample_one(FILE *f, const struct family *fam, const char *an, const void *base, int have)
{
	char v[64];
	if (!have)
		return;
	snprintf(v, sizeof(v), "%llu", (unsigned long long)field(base, fam->off, fam->size));
	sample(f, fam, "arena", an, NULL, NULL, v);
}

static const char *miss_name(int j)
{
	return sc_miss_reason_name(j);
}

static const char *refusal_name(int j)
{
	return sc_l2_refusal_name(j);
}

static const char *deadline_name(int j)
{
	return sc_deadline_detail_name(j);
}

/* The reasons of the miss array at @off of struct sc_miss_stats: how many, and their names. */
static int miss_labels(size_t off, const char *(**name)(int j))
{
	if (off == offsetof(struct sc_miss_stats, l2_refused)) {
		*name = refusal_name;
		return SC_L2_REFUSE_REASONS;
	}
	if (off == offsetof(struct sc_miss_stats, deadline)) {
		*name = deadline_name;
		return SC_DEADLINE_COUNT;
	}
	*name = miss_name;
	return SC_MISS_COUNT;
}

/* Family @fam's samples of arena @an (snapshot @s). */
static void arena_samples(FILE *f, const struct family *fam, const char *an, const struct arena_snap *s)
{
	char v[64], id[32], ring[16];
	uint64_t val;
	switch (fam->scope) {
	case S_ARENA:
		if (!arena_value(fam, s, &val))
			break;
		snprintf(v, sizeof(v), "%llu", (unsigned long long)val);
		sample(f, fam, "arena", an, NULL, NULL, v);
		break;
	case S_L2: sample_one(f, fam, an, &s->l2, s->up); break;
	case S_PROMO: sample_one(f, fam, an, &s->c.ps, s->c.have_ps); break;
	case S_L3IX: sample_one(f, fam, an, &s->c.xs, s->c.have_xs); break;
	case S_STAGE:
		for (int j = 0; j < s->c.nstages; j++) {
			snprintf(id, sizeof(id), "%016llx", (unsigned long long)s->c.ids[j]);
			snprintf(v, sizeof(v), "%llu", (unsigned long long)field(&s->c.stages[j], fam->off, fam->size));
			sample(f, fam, "arena", an, "stage", id, v);
		}
		break;
	case S_L2_WHY:
		if (s->up)
			sample_each(f, fam, an, &s->l2, SC_L2_REFUSE_COUNT, "reason", sc_l2_refusal_name);
		break;
	case S_PROMO_WHY:
		if (s->c.have_ps)
			sample_each(f, fam, an, &s->c.ps, SC_L2_REFUSE_COUNT, "reason", sc_l2_refusal_name);
		break;
	case S_KEYCOL:
		if (s->c.have_xs)
			sample_each(f, fam, an, &s->c.xs, 3, "level", level_name);
		break;
	case S_MISS: {
		const char *(*name)(int j);
		int n = miss_labels(fam->off, &name);
		if (s->c.have_ms)
			sample_each(f, fam, an, &s->c.all_misses, n, "reason", name);
		break;
	}
	case S_STAGE_MISS: {
		const char *(*name)(int j);
		int n = miss_labels(fam->off, &name);
		for (int j = 0; s->c.misses && j < s->c.nstages; j++) {
			snprintf(id, sizeof(id), "%016llx", (unsigned long long)s->c.ids[j]);
			for (int k = 0; k < n; k++) {
				snprintf(v, sizeof(v), "%llu",
					 (unsigned long long)field(&s->c.misses[j], fam->off + 8 * (size_t)k, 8));
				fprintf(f, "%s_total{arena=", fam->name);
				label_value(f, an);
				fprintf(f, ",stage=\"%s\",reason=\"%s\"} %s\n", id, name(k), v);
			}
		}
		break;
	}
	case S_RING:
		for (int j = 0; j < s->c.nrings; j++) {
			snprintf(ring, sizeof(ring), "%d", j);
			snprintf(v, sizeof(v), "%llu", (unsigned long long)field(&s->c.rings[j], fam->off, fam->size));
			sample(f, fam, "arena", an, "ring", ring, v);
		}
		break;
	default:
		break;
	}
}

/* Family @fam's sample of L3 directory @dir (snapshot @l). */
static void l3_samples(FILE *f, const struct family *fam, const char *dir, const struct l3_snap *l)
{
	char v[64];
	if (fam->size == 0 && fam->off == 0)
		snprintf(v, sizeof(v), "%d", l->up);
	else if (!l->up)
		return;
	else if (fam->size == 0) /* nanoseconds as seconds, exactly */
		snprintf(v, sizeof(v), "%llu.%09llu", (unsigned long long)(l->st.fill_ns / 1000000000ull),
			 (unsigned long long)(l->st.fill_ns % 1000000000ull));
	else
		snprintf(v, sizeof(v), "%llu", (unsigned long long)field(&l->st, fam->off, fam->size));
	sample(f, fam, "dir", dir, NULL, NULL, v);
}

static void write_metrics(FILE *f, const struct exporter *x, struct arena_snap *as, struct l3_snap *ls, int om)
{
	for (size_t k = 0; k < sizeof(families) / sizeof(families[0]); k++) {
		const struct family *fam = &families[k];
		header(f, fam, om);
		for (int i = 0; fam->scope != S_L3 && i < x->nnames; i++)
			arena_samples(f, fam, x->names[i], &as[i]);
		for (int i = 0; fam->scope == S_L3 && i < x->nl3; i++)
			l3_samples(f, fam, x->l3dirs[i], &ls[i]);
	}
	if (om)
		fputs("# EOF\n", f);
}

static void note_change(struct exporter *x, int slot, const char *what, const char *name, int up, int err)
{
	if (x->last_up[slot] == up)
		return;
	if (up && x->last_up[slot] == 0)
		fprintf(stderr, "stagecache exporter: %s '%s' can be read again\n", what, name);
	else if (!up)
		fprintf(stderr, "stagecache exporter: cannot read %s '%s': %s (%s 0)\n", what, name, sc_strerror(err),
			slot < MAX_TARGETS ? "stagecache_up" : "stagecache_l3_up");
	x->last_up[slot] = up;
}

/* One scrape: snapshot everything, then write. Returns a malloc'd text (NULL on no memory). */
static char *scrape(struct exporter *x, int om, size_t *len, int *all_up)
{
	struct arena_snap *as = calloc((size_t)x->nnames, sizeof(*as));
	struct l3_snap *ls = calloc((size_t)x->nl3 + 1, sizeof(*ls));
	char *buf = NULL;
	*all_up = 1;
	if (!as || !ls)
		goto out;
	for (int i = 0; i < x->nnames; i++) {
		int err = 0;
		snap_arena(x, x->names[i], &as[i], &err);
		note_change(x, i, "arena", x->names[i], as[i].up, err);
		*all_up &= as[i].up;
	}
	for (int i = 0; i < x->nl3; i++) {
		int err = 0;
		snap_l3(x->l3dirs[i], &ls[i], &err);
		note_change(x, MAX_TARGETS + i, "L3 directory", x->l3dirs[i], ls[i].up, err);
		*all_up &= ls[i].up;
	}
	FILE *f = open_memstream(&buf, len);
	if (f) {
		write_metrics(f, x, as, ls, om);
		if (fclose(f)) {
			free(buf);
			buf = NULL;
		}
	}
out:
	for (int i = 0; as && i < x->nnames; i++)
		snap_free(&as[i]);
	free(as);
	free(ls);
	return buf;
}

/* ---- HTTP ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len,
			     enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **state)
{
	(void)version, (void)upload;
	static int marker;
	if (!*state) { /* first call: headers only; answer on the second */
		*state = &marker;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* a body is never expected: drop it */
		return MHD_YES;
	}
	static char text_plain[] = "text/plain; charset=utf-8";
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		static char msg[] = "only GET and HEAD\n";
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text_plain, msg, sizeof(msg) - 1, MHD_RESPMEM_PERSISTENT);
	}
	if (!strcmp(url, "/")) {
		static char page[] = "stagecache exporter: the metrics are at /metrics\n";
		return reply(c, MHD_HTTP_OK, text_plain, page, sizeof(page) - 1, MHD_RESPMEM_PERSISTENT);
	}
	if (strcmp(url, "/metrics")) {
		static char msg[] = "not found: the metrics are at /metrics\n";
		return reply(c, MHD_HTTP_NOT_FOUND, text_plain, msg, sizeof(msg) - 1, MHD_RESPMEM_PERSISTENT);
	}
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	int om = accept && strstr(accept, "application/openmetrics-text");
	size_t len = 0;
	int all_up;
	char *body = scrape(cls, om, &len, &all_up);
	if (!body) {
		static char msg[] = "out of memory\n";
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text_plain, msg, sizeof(msg) - 1, MHD_RESPMEM_PERSISTENT);
	}
	return reply(c, MHD_HTTP_OK,
		     om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
			: "text/plain; version=0.0.4; charset=utf-8",
		     body, len, MHD_RESPMEM_MUST_FREE);
}

/* "127.0.0.1:9477", "[::1]:9477", "localhost:80" -> a socket address. */
static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *sl)
{
	char host[256];
	const char *port;
	if (s[0] == '[') {
		const char *e = strchr(s, ']');
		if (!e || e[1] != ':' || (size_t)(e - s - 1) >= sizeof(host))
			return -1;
		memcpy(host, s + 1, (size_t)(e - s - 1));
		host[e - s - 1] = 0;
		port = e + 2;
	} else {
		const char *e = strrchr(s, ':');
		if (!e || (size_t)(e - s) >= sizeof(host) || e == s)
			return -1;
		memcpy(host, s, (size_t)(e - s));
		host[e - s] = 0;
		port = e + 1;
	}
	uint64_t p;
	if (cli_parse_u64(port, 65535, &p))
		return -1;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *res;
	if (getaddrinfo(host, port, &hints, &res))
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sl = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int l3_opt(const char *cmd, const char *arg, void *dst)
{
	struct exporter *x = dst;
	if (x->nl3 == MAX_TARGETS)
		return cli_usage_error(cmd, "at most %d --l3 directories", MAX_TARGETS);
	x->l3dirs[x->nl3++] = arg;
	return 0;
}

/* --once: one scrape to stdout; EXIT_FAIL unless every target was up. */
static int scrape_once(struct exporter *x)
{
	size_t len;
	int all_up;
	char *body = scrape(x, 1, &len, &all_up);
	if (!body)
		return cli_fail("exporter", -ENOMEM, "cannot build the metrics");
	fwrite(body, 1, len, stdout);
	free(body);
	return all_up ? EXIT_OK : EXIT_FAIL;
}

/* Say where the daemon @d listens (@ss, the port it bound). */
static void print_listening(struct MHD_Daemon *d, const struct sockaddr_storage *ss)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	unsigned port = info ? info->port : 0;
	char host[INET6_ADDRSTRLEN] = "?";
	if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, host, sizeof(host));
	else
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, host, sizeof(host));
	printf(ss->ss_family == AF_INET6 ? "listening on http://[%s]:%u/metrics\n" : "listening on http://%s:%u/metrics\n",
	       host, port);
	fflush(stdout);
}

/* libmicrohttpd's messages: none before the daemon runs (a failed start is ours to say, in one
 * line), then at most one every LOG_EVERY_S seconds with a count of those left out (a client can
 * make it say something per connection). */
static _Atomic int mhd_started;
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static time_t last;
	static unsigned long dropped;
	if (!atomic_load(&mhd_started))
		return;
	pthread_mutex_lock(&mu);
	time_t now = time(NULL);
	if (last && now - last < LOG_EVERY_S) {
		dropped++;
	} else {
		char msg[512];
		vsnprintf(msg, sizeof(msg), fmt, ap);
		msg[strcspn(msg, "\n")] = 0;
		if (dropped)
			fprintf(stderr, "stagecache exporter: http: %s (%lu more messages in %d s left out)\n", msg, dropped,
				LOG_EVERY_S);
		else
			fprintf(stderr, "stagecache exporter: http: %s\n", msg);
		last = now;
		dropped = 0;
	}
	pthread_mutex_unlock(&mu);
}

/* Serve /metrics on @listen until SIGINT or SIGTERM; an exit status. */
static int serve(struct exporter *x, const char *listen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	if (mhd_load())
		return EXIT_FAIL;
	if (parse_listen(listen, &ss, &sl))
		return cli_usage_error("exporter", "bad --listen '%s' (ADDR:PORT, e.g. 127.0.0.1:9477 or [::1]:9477)", cli_q(listen));
	/* SIGINT and SIGTERM are taken with sigwait below: block them before MHD starts its thread */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	/* epoll: no select() limit on descriptors; limits per address and in all */
	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, 0, NULL, NULL, handle, x, MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)CONN_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned)CONN_PER_IP, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
	if (!d)
		return cli_fail("exporter", -EADDRINUSE, "cannot listen on %s", listen);
	atomic_store(&mhd_started, 1);
	print_listening(d, &ss);
	int sig;
	sigwait(&sigs, &sig);
	MHD_stop_daemon(d);
	return EXIT_OK;
}

int cmd_exporter(int argc, char **argv)
{
	struct exporter x = { 0 };
	const char *listen = "127.0.0.1:9477";
	int once = 0;
	const struct cli_opt opts[] = {
		{ "listen", CLI_STR, &listen }, { "dir", CLI_STR, &x.dir }, { "owner", CLI_OWNER },
		{ "l3", CLI_FN, &x, .fn = l3_opt }, { "once", CLI_FLAG, &once },
		{ 0 },
	};
	int rc = cli_parse_opts("exporter", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	x.names = argv + optind;
	x.nnames = argc - optind;
	if (x.nnames < 1)
		return cli_usage_error("exporter", "missing NAME (one or more arenas)");
	if (x.nnames > MAX_TARGETS)
		return cli_usage_error("exporter", "at most %d arenas", MAX_TARGETS);
	for (int i = 0; i < x.nnames; i++)
		if ((rc = cli_check_name("exporter", x.names[i])))
			return rc;
	for (int i = 0; i < 2 * MAX_TARGETS; i++)
		x.last_up[i] = -1;
	return once ? scrape_once(&x) : serve(&x, listen);
}
