/*
 * tools/cli/cmd_trace.c — `stagecache trace`: attach the eBPF programs of bpf/stagecache.bpf.c to the
 * USDT probes of libstagecache in every process that maps the library (or a static binary), pin
 * their maps for bpftool, and print a live table per stage until SIGINT or --duration.
 *
 * Order (STYLE 10): check privileges, BTF and the target -> mount bpffs -> open -> load -> attach
 * -> pin -> "ready" -> run -> detach, unpin, destroy; every error path goes through one cleanup.
 *
 * A USDT attachment lives only as long as this process (links are not pinned); the maps are
 * pinned, so with --keep the last counts stay readable by bpftool after the tracer exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <link.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cli.h"
#include "stagecache.skel.h"
#include "../../bpf/stagecache_maps.h"

#define CMD "trace"
#define BPFFS_ROOT "/sys/fs/bpf"
#define MAX_ROWS 256

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache trace [--lib PATH | --binary PATH] [--pid PID] [--interval S]\n"
		"                        [--duration S] [--json] [--keep] [--pin-dir DIR] [--verbose]\n\n"
		"Attach eBPF programs to the USDT probes of libstagecache (provider 'stagecache') in every\n"
		"process that uses the library, pin the maps for bpftool and print live counts per stage.\n"
		"Needs root, kernel BTF (/sys/kernel/btf/vmlinux) and bpffs (mounted if missing).\n\n"
		"  --lib PATH      the shared library to trace (default: the libstagecache.so.0 this tool uses)\n"
		"  --binary PATH   a program linked statically with libstagecache.a\n"
		"  --pid PID       only this process (default target: the library or executable it maps)\n"
		"  --interval S    seconds between tables (default 1)\n"
		"  --duration S    stop after S seconds (default: at SIGINT)\n"
		"  --json          one JSON object per line instead of tables\n"
		"  --keep          leave the maps pinned at exit (default: remove the pins)\n"
		"  --pin-dir DIR   where to pin the maps (default " SC_BPF_PIN_DIR_DEFAULT ", mode 0700)\n"
		"  --verbose       show libbpf's messages\n\n"
		"Prints a line starting with 'ready' once attached. Maps: counters, reasons, latency,\n"
		"recent_promotions, promotion_payoff, trace_state; e.g.\n"
		"  bpftool map dump pinned " SC_BPF_PIN_DIR_DEFAULT "/counters\n");
}

/* ---- libbpf messages: shown with --verbose, otherwise the last few are kept for errors ---- */

static int verbose;
static char last_msgs[4][256];
static unsigned last_n;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (verbose)
		return vfprintf(stderr, fmt, ap);
	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(last_msgs[last_n % 4], sizeof(last_msgs[0]), fmt, ap);
	last_n++;
	return 0;
}

static void dump_libbpf_msgs(void)
{
	unsigned first = last_n > 4 ? last_n - 4 : 0;
	for (unsigned i = first; i < last_n; i++)
		fprintf(stderr, "  libbpf: %s", last_msgs[i % 4]);
	last_n = 0;
}

/* ---- finding the target ---- */

static int find_self_lib(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	if (info->dlpi_name && strstr(info->dlpi_name, "libstagecache.so")) {
		snprintf(data, PATH_MAX, "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

/* The library (or, for a static binary, the executable) that process @pid runs stagecache from. */
static int target_of_pid(int pid, char *out)
{
	char p[64], line[PATH_MAX + 256];
	snprintf(p, sizeof(p), "/proc/%d/maps", pid);
	FILE *f = fopen(p, "r");
	if (!f)
		return -errno;
	int found = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		if (path && strstr(path, "/libstagecache.so")) {
			path[strcspn(path, "\n")] = 0;
			snprintf(out, PATH_MAX, "/proc/%d/root%s", pid, path);
			found = 1;
		}
	}
	fclose(f);
	if (found)
		return 0;
	snprintf(out, PATH_MAX, "/proc/%d/exe", pid);
	return 0;
}

static int is_elf(const char *path)
{
	unsigned char m[4];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, m, 4);
	close(fd);
	return n == 4 && m[0] == 0x7f && m[1] == 'E' && m[2] == 'L' && m[3] == 'F' ? 0 : -ENOEXEC;
}

/* ---- bpffs and the pin directory ---- */

static int on_bpffs(const char *path)
{
	struct statfs st;
	if (statfs(path, &st))
		return -errno;
	return st.f_type == BPF_FS_MAGIC ? 1 : 0;
}

/* mkdir -p with mode 0700; remembers the directories it made (deepest last) for removal. */
static int make_dirs(const char *dir, char made[][PATH_MAX], int *nmade, int max)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (char *p = tmp + 1;; p++) {
		if (*p != '/' && *p != 0)
			continue;
		char c = *p;
		*p = 0;
		if (mkdir(tmp, 0700) == 0) {
			if (*nmade < max)
				snprintf(made[(*nmade)++], PATH_MAX, "%s", tmp);
		} else if (errno != EEXIST) {
			return -errno;
		}
		*p = c;
		if (!c)
			break;
	}
	return 0;
}

/* ---- the snapshot: counters summed per stage (or ring) over pids ---- */

struct row {
	int is_ring;
	uint64_t id;
	struct sc_bpf_counter ev[SC_EV_COUNT];
	uint64_t never_hit;
	uint64_t fill_hist[SC_BPF_HIST_SLOTS];
	uint64_t refused[SC_BPF_REFUSALS];       /* L2 refusals by reason (l2_reject) */
	uint64_t promo_refused[SC_BPF_REFUSALS]; /* promotions not published, by reason (promote_outcome) */
	uint64_t miss_l2[SC_BPF_MISS_REASONS];   /* L2 misses by reason (miss_reason, level 0) */
	uint64_t miss_restore[SC_BPF_MISS_REASONS]; /* restores with no state by reason (level 1) */
	uint64_t miss_refused[SC_BPF_REFUSALS];  /* L2 misses of reason refused, by the refusal */
	uint64_t miss_deadline[SC_BPF_DEADLINE_DETAILS]; /* restore deadline misses by detail */
};

struct snap {
	int n;
	struct row rows[MAX_ROWS];
	uint64_t drops;
};

static struct row *row_of(struct snap *s, int is_ring, uint64_t id)
{
	for (int i = 0; i < s->n; i++)
		if (s->rows[i].is_ring == is_ring && s->rows[i].id == id)
			return &s->rows[i];
	if (s->n == MAX_ROWS)
		return NULL;
	struct row *r = &s->rows[s->n++];
	memset(r, 0, sizeof(*r));
	r->is_ring = is_ring;
	r->id = id;
	return r;
}

/* counters: events per stage (commits and ring-full per ring), summed over pids */
static void sum_counters(struct stagecache_bpf *skel, struct snap *s)
{
	int fd = bpf_map__fd(skel->maps.counters);
	struct sc_bpf_key k, next, *prev = NULL;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct sc_bpf_counter c;
		k = next;
		prev = &k;
		if (k.event >= SC_EV_COUNT || bpf_map_lookup_elem(fd, &k, &c))
			continue;
		int ring = k.event == SC_EV_COMMIT || k.event == SC_EV_RING_FULL;
		struct row *r = row_of(s, ring, k.stage);
		if (!r)
			continue;
		r->ev[k.event].count += c.count;
		r->ev[k.event].bytes += c.bytes;
		r->ev[k.event].tokens += c.tokens;
		r->ev[k.event].ns += c.ns;
	}
}

/* latency: each stage's fill histogram */
static void read_fill_hists(struct stagecache_bpf *skel, struct snap *s)
{
	int fd = bpf_map__fd(skel->maps.latency);
	struct sc_bpf_hist_key hk, hnext, *hprev = NULL;
	static struct sc_bpf_hist h;
	while (bpf_map_get_next_key(fd, hprev, &hnext) == 0) {
		hk = hnext;
		hprev = &hk;
		if (hk.kind != SC_HIST_FILL || bpf_map_lookup_elem(fd, &hk, &h))
			continue;
		struct row *r = row_of(s, 0, hk.stage);
		if (r)
			memcpy(r->fill_hist, h.slots, sizeof(r->fill_hist));
	}
}

/* promotion_payoff: promotions that have served no hit yet, per stage */
static void count_never_hit(struct stagecache_bpf *skel, struct snap *s)
{
	int fd = bpf_map__fd(skel->maps.promotion_payoff);
	struct sc_bpf_digest dk, dnext, *dprev = NULL;
	while (bpf_map_get_next_key(fd, dprev, &dnext) == 0) {
		struct sc_bpf_payoff p;
		dk = dnext;
		dprev = &dk;
		if (bpf_map_lookup_elem(fd, &dk, &p))
			continue;
		if (p.promoted_ns && !p.hits) {
			struct row *r = row_of(s, 0, p.stage);
			if (r)
				r->never_hit++;
		}
	}
}

/* The counter of @r that the `reasons` entry of @event, @reason adds to (NULL: none). */
static uint64_t *reason_slot(struct row *r, uint32_t event, uint32_t reason)
{
	switch (event) {
	case SC_EV_L2_REJECT: return &r->refused[reason < SC_BPF_REFUSALS ? reason : SC_BPF_REFUSALS - 1];
	case SC_EV_PROMOTE_REFUSED: return &r->promo_refused[reason < SC_BPF_REFUSALS ? reason : SC_BPF_REFUSALS - 1];
	case SC_EV_MISS_L2: return reason < SC_BPF_MISS_REASONS ? &r->miss_l2[reason] : NULL;
	case SC_EV_MISS_RESTORE: return reason < SC_BPF_MISS_REASONS ? &r->miss_restore[reason] : NULL;
	case SC_EV_MISS_REFUSED: return reason < SC_BPF_REFUSALS ? &r->miss_refused[reason] : NULL;
	case SC_EV_MISS_DEADLINE: return reason < SC_BPF_DEADLINE_DETAILS ? &r->miss_deadline[reason] : NULL;
	}
	return NULL;
}

/* reasons: L2 refusals, unpublished promotions and misses by reason, per stage */
static void sum_reasons(struct stagecache_bpf *skel, struct snap *s)
{
	int fd = bpf_map__fd(skel->maps.reasons);
	struct sc_bpf_reason_key rk, rnext, *rprev = NULL;
	while (bpf_map_get_next_key(fd, rprev, &rnext) == 0) {
		struct sc_bpf_count c;
		rk = rnext;
		rprev = &rk;
		struct row *r;
		uint64_t *slot;
		if (bpf_map_lookup_elem(fd, &rk, &c) || !(r = row_of(s, 0, rk.stage)) ||
		    !(slot = reason_slot(r, rk.event, rk.reason)))
			continue;
		*slot += c.count;
	}
}

static void take_snapshot(struct stagecache_bpf *skel, struct snap *s)
{
	s->n = 0;
	sum_counters(skel, s);
	read_fill_hists(skel, s);
	count_never_hit(skel, s);
	sum_reasons(skel, s);
	uint32_t zero = 0;
	struct sc_bpf_state st;
	s->drops = bpf_map_lookup_elem(bpf_map__fd(skel->maps.trace_state), &zero, &st) ? 0 : st.drops;
}

/* Upper bound of the log2 bucket holding quantile @q, in ns (0 when empty). */
static uint64_t hist_quantile(const uint64_t *slots, double q)
{
	uint64_t total = 0;
	for (int i = 0; i < SC_BPF_HIST_SLOTS; i++)
		total += slots[i];
	if (!total)
		return 0;
	uint64_t want = (uint64_t)(q * (double)total + 0.999999), seen = 0;
	for (int i = 0; i < SC_BPF_HIST_SLOTS; i++) {
		seen += slots[i];
		if (seen >= want)
			return i >= 63 ? UINT64_MAX : (2ull << i) - 1;
	}
	return UINT64_MAX;
}

static const struct row *prev_row(const struct snap *p, const struct row *r)
{
	for (int i = 0; i < p->n; i++)
		if (p->rows[i].is_ring == r->is_ring && p->rows[i].id == r->id)
			return &p->rows[i];
	return NULL;
}

/* Events that carry no stage and land on stage 0: quarantines, the location index, collisions. */
static int stageless(int e)
{
	return e == SC_EV_L3_QUARANTINE || (e >= SC_EV_L3IX_HIT && e <= SC_EV_KEY_COLLISION) ||
	       e == SC_EV_L3_SEG_LOGICAL || e == SC_EV_L3_SEG_STORED;
}

/* Has the row anything but stageless events? */
static int row_busy(const struct row *r)
{
	for (int e = 0; e < SC_EV_COUNT; e++)
		if (!stageless(e) && r->ev[e].count)
			return 1;
	return 0;
}

/* @event summed over the stage rows (firings, bytes). */
static struct sc_bpf_counter sum(const struct snap *s, int event)
{
	struct sc_bpf_counter n = { 0 };
	for (int i = 0; i < s->n; i++) {
		if (s->rows[i].is_ring)
			continue;
		n.count += s->rows[i].ev[event].count;
		n.bytes += s->rows[i].ev[event].bytes;
	}
	return n;
}

static uint64_t total(const struct snap *s, int event)
{
	return sum(s, event).count;
}

static uint64_t quarantined(const struct snap *s)
{
	return total(s, SC_EV_L3_QUARANTINE);
}

/* Under a stage's row: why lookups and restores missed (when any), as `stats` prints them. */
static void print_misses(const struct row *r)
{
	_Static_assert(SC_BPF_MISS_REASONS <= SC_MISS_MAX && SC_BPF_REFUSALS <= SC_MISS_MAX &&
			       SC_BPF_DEADLINE_DETAILS <= 8, "eBPF's miss counts fit struct sc_miss_stats");
	struct sc_miss_stats m = { 0 };
	memcpy(m.l2, r->miss_l2, sizeof(r->miss_l2));
	memcpy(m.restore, r->miss_restore, sizeof(r->miss_restore));
	memcpy(m.l2_refused, r->miss_refused, sizeof(r->miss_refused));
	memcpy(m.deadline, r->miss_deadline, sizeof(r->miss_deadline));
	cli_text_misses(stdout, &m, "  ");
}

/* Under a stage's row: admissions and promotions that did not publish, by reason (when any). */
static void print_refusals(const struct row *r)
{
	uint64_t l2 = 0, promo = 0, published = r->ev[SC_EV_PROMOTE_PUBLISHED].count;
	for (int w = 0; w < SC_BPF_REFUSALS; w++)
		l2 += r->refused[w], promo += r->promo_refused[w];
	if (l2) {
		printf("  L2 refused:  ");
		for (int w = 0; w < SC_BPF_REFUSALS; w++)
			if (r->refused[w])
				printf(" %s %llu", sc_l2_refusal_name(w), (unsigned long long)r->refused[w]);
		printf("\n");
	}
	if (promo || published) {
		printf("  promotions:   %llu published, %llu not", (unsigned long long)published, (unsigned long long)promo);
		for (int w = 0; w < SC_BPF_REFUSALS; w++)
			if (r->promo_refused[w])
				printf(" (%s %llu)", sc_l2_refusal_name(w), (unsigned long long)r->promo_refused[w]);
		printf("\n");
	}
}

static void print_header(const struct snap *s, double t, double dt, int json)
{
	unsigned long long ix_hit = total(s, SC_EV_L3IX_HIT), ix_fb = total(s, SC_EV_L3IX_FALLBACK),
			   ix_ref = total(s, SC_EV_L3IX_REFRESH), coll = total(s, SC_EV_KEY_COLLISION);
	/* segmented L3 puts: the objects whole against what they wrote */
	unsigned long long lg = sum(s, SC_EV_L3_SEG_LOGICAL).bytes, ph = sum(s, SC_EV_L3_SEG_STORED).bytes;
	unsigned long long sv = lg > ph ? lg - ph : 0;
	if (json) {
		printf("{\"type\":\"interval\",\"t\":%.3f,\"drops\":%llu,\"l3_quarantined\":%llu,"
		       "\"l3_index\":{\"index_hits\":%llu,\"fallbacks\":%llu,\"refreshes\":%llu},"
		       "\"l3_segments\":{\"logical_bytes\":%llu,\"physical_bytes\":%llu,\"saved_bytes\":%llu},"
		       "\"key_collisions\":%llu,\"stages\":[",
		       t, (unsigned long long)s->drops, (unsigned long long)quarantined(s), ix_hit, ix_fb, ix_ref, lg, ph,
		       sv, coll);
	} else {
		printf("\n-- %.1fs  (interval %.1fs, L3 quarantined %llu, drops %llu)\n", t, dt,
		       (unsigned long long)quarantined(s), (unsigned long long)s->drops);
		printf("location index: hits %llu, directory probes %llu, refreshes %llu; key collisions %llu\n", ix_hit,
		       ix_fb, ix_ref, coll);
		if (lg)
			printf("L3 segmented puts: logical %llu bytes, physical %llu, saved %llu\n", lg, ph, sv);
		printf("%-16s %9s %9s %9s %6s %8s %9s %8s %7s %8s %9s %9s %9s\n", "stage", "hits", "promo_hit",
		       "misses", "hit%", "promos", "never_hit", "evicts", "fills", "fill_err", "fill_GB/s",
		       "fill_p50", "fill_p99");
	}
}

/* One stage's row: @p is the same row in the previous snapshot (for the fill rate over @dt). */
static void print_stage(const struct row *r, const struct row *p, double dt, int json, int first)
{
	uint64_t hits = r->ev[SC_EV_L2_HIT].count, misses = r->ev[SC_EV_L2_MISS].count;
	double ratio = hits + misses ? (double)hits / (double)(hits + misses) : 0;
	double gbs = dt > 0 ? (double)(r->ev[SC_EV_FILL_DONE].bytes - p->ev[SC_EV_FILL_DONE].bytes) / dt / 1e9 : 0;
	uint64_t p50 = hist_quantile(r->fill_hist, 0.50), p99 = hist_quantile(r->fill_hist, 0.99);
	if (json) {
		printf("%s{\"stage\":\"%016llx\",\"hits\":%llu,\"promotion_hits\":%llu,\"misses\":%llu,"
		       "\"hit_ratio\":%.4f,\"admits\":%llu,\"rejects\":%llu,\"promotions\":%llu,"
		       "\"promotions_never_hit\":%llu,\"evictions\":%llu,\"removes\":%llu,\"fills\":%llu,"
		       "\"fill_errors\":%llu,\"fill_bytes\":%llu,\"fill_gb_per_s\":%.3f,"
		       "\"fill_p50_ns\":%llu,\"fill_p99_ns\":%llu,\"promotions_published\":%llu,"
		       "\"segment_logical_bytes\":%llu,\"segment_physical_bytes\":%llu,\"segment_saved_bytes\":%llu",
		       first ? "" : ",", (unsigned long long)r->id, (unsigned long long)hits,
		       (unsigned long long)r->ev[SC_EV_L2_HIT_PROMOTED].count, (unsigned long long)misses, ratio,
		       (unsigned long long)r->ev[SC_EV_L2_ADMIT].count,
		       (unsigned long long)r->ev[SC_EV_L2_REJECT].count,
		       (unsigned long long)r->ev[SC_EV_PROMOTE].count, (unsigned long long)r->never_hit,
		       (unsigned long long)r->ev[SC_EV_L2_EVICT].count,
		       (unsigned long long)r->ev[SC_EV_L2_REMOVE].count,
		       (unsigned long long)r->ev[SC_EV_FILL_DONE].count,
		       (unsigned long long)r->ev[SC_EV_FILL_ERROR].count,
		       (unsigned long long)r->ev[SC_EV_FILL_DONE].bytes, gbs, (unsigned long long)p50,
		       (unsigned long long)p99, (unsigned long long)r->ev[SC_EV_PROMOTE_PUBLISHED].count,
		       (unsigned long long)r->ev[SC_EV_L2_SEG_LOGICAL].bytes,
		       (unsigned long long)r->ev[SC_EV_L2_SEG_STORED].bytes,
		       (unsigned long long)(r->ev[SC_EV_L2_SEG_LOGICAL].bytes - r->ev[SC_EV_L2_SEG_STORED].bytes));
		for (int k = 0; k < 2; k++) {
			const uint64_t *v = k ? r->promo_refused : r->refused;
			printf(",\"%s\":{", k ? "promotions_refused" : "refused");
			for (int w = 0; w < SC_BPF_REFUSALS; w++)
				printf("%s\"%s\":%llu", w ? "," : "", sc_l2_refusal_name(w), (unsigned long long)v[w]);
			printf("}");
		}
		for (int k = 0; k < 2; k++) {
			const uint64_t *v = k ? r->miss_restore : r->miss_l2;
			printf(",\"%s\":{", k ? "restore_misses" : "l2_misses");
			for (int w = 0; w < SC_MISS_COUNT; w++)
				printf("%s\"%s\":%llu", w ? "," : "", sc_miss_reason_name(w), (unsigned long long)v[w]);
			printf("}");
		}
		printf(",\"l2_misses_refused\":{");
		for (int w = 0; w < SC_BPF_REFUSALS; w++)
			printf("%s\"%s\":%llu", w ? "," : "", sc_l2_refusal_name(w), (unsigned long long)r->miss_refused[w]);
		printf("},\"restore_deadline\":{");
		for (int w = 0; w < SC_BPF_DEADLINE_DETAILS; w++)
			printf("%s\"%s\":%llu", w ? "," : "", sc_deadline_detail_name(w), (unsigned long long)r->miss_deadline[w]);
		printf("}}");
	} else {
		char a[32], b[32], hr[16] = "-";
		if (hits + misses)
			snprintf(hr, sizeof(hr), "%.1f%%", 100 * ratio);
		snprintf(a, sizeof(a), "%.1fus", (double)p50 / 1e3);
		snprintf(b, sizeof(b), "%.1fus", (double)p99 / 1e3);
		printf("%016llx %9llu %9llu %9llu %6s %8llu %9llu %8llu %7llu %8llu %9.3f %9s %9s\n",
		       (unsigned long long)r->id, (unsigned long long)hits,
		       (unsigned long long)r->ev[SC_EV_L2_HIT_PROMOTED].count, (unsigned long long)misses,
		       hr, (unsigned long long)r->ev[SC_EV_PROMOTE].count,
		       (unsigned long long)r->never_hit, (unsigned long long)r->ev[SC_EV_L2_EVICT].count,
		       (unsigned long long)r->ev[SC_EV_FILL_DONE].count,
		       (unsigned long long)r->ev[SC_EV_FILL_ERROR].count, gbs, p50 ? a : "-", p99 ? b : "-");
		print_refusals(r);
		print_misses(r);
	}
}

/* One commit ring's row: commits and tokens per second over @dt. */
static void print_ring(const struct row *r, const struct row *p, double dt, int json, int first)
{
	double cps = dt > 0 ? (double)(r->ev[SC_EV_COMMIT].count - p->ev[SC_EV_COMMIT].count) / dt : 0;
	double tps = dt > 0 ? (double)(r->ev[SC_EV_COMMIT].tokens - p->ev[SC_EV_COMMIT].tokens) / dt : 0;
	if (json)
		printf("%s{\"ring\":%llu,\"commits\":%llu,\"commits_per_s\":%.1f,\"tokens_per_s\":%.1f,"
		       "\"ring_full\":%llu}",
		       first ? "" : ",", (unsigned long long)r->id,
		       (unsigned long long)r->ev[SC_EV_COMMIT].count, cps, tps,
		       (unsigned long long)r->ev[SC_EV_RING_FULL].count);
	else
		printf("%-16llu %9llu %9.1f %9.1f %9llu\n", (unsigned long long)r->id,
		       (unsigned long long)r->ev[SC_EV_COMMIT].count, cps, tps,
		       (unsigned long long)r->ev[SC_EV_RING_FULL].count);
}

/* One table (or JSON line): the busy stages, then the rings; rates against @prev. */
static void print_snapshot(const struct snap *s, const struct snap *prev, double t, double dt, int json)
{
	static const struct row zero_row;
	print_header(s, t, dt, json);
	int first = 1;
	for (int i = 0; i < s->n; i++) {
		const struct row *r = &s->rows[i], *p = prev_row(prev, r);
		if (r->is_ring || !row_busy(r))
			continue;
		print_stage(r, p ? p : &zero_row, dt, json, first);
		first = 0;
	}
	if (json)
		printf("],\"rings\":[");
	else
		printf("%-16s %9s %9s %9s %9s\n", "ring", "commits", "commits/s", "tokens/s", "ring_full");
	first = 1;
	for (int i = 0; i < s->n; i++) {
		const struct row *r = &s->rows[i], *p = prev_row(prev, r);
		if (!r->is_ring)
			continue;
		print_ring(r, p ? p : &zero_row, dt, json, first);
		first = 0;
	}
	if (json)
		printf("]}\n");
	fflush(stdout);
}

/* ---- at exit: the payoff of the promotions seen (newest first), the operator's verdict on the
 * promotion policy: a promotion that served no hit cost a fill's worth of arena for nothing ---- */

#define PAYOFF_SHOWN 20

struct payoff_row {
	struct sc_bpf_digest d;
	struct sc_bpf_payoff p;
};

static int by_newest(const void *a, const void *b)
{
	uint64_t x = ((const struct payoff_row *)a)->p.promoted_ns, y = ((const struct payoff_row *)b)->p.promoted_ns;
	return (x < y) - (x > y);
}

static void print_payoff(struct stagecache_bpf *skel, int json)
{
	static struct payoff_row rows[SC_BPF_PAYOFF_ENTRIES];
	int n = 0, fd = bpf_map__fd(skel->maps.promotion_payoff);
	struct sc_bpf_digest k, next, *prev = NULL;
	while (n < SC_BPF_PAYOFF_ENTRIES && bpf_map_get_next_key(fd, prev, &next) == 0) {
		k = next;
		prev = &k;
		/* entries first seen on a hit (promoted before the trace) have no promotion to judge */
		if (bpf_map_lookup_elem(fd, &k, &rows[n].p) == 0 && rows[n].p.promoted_ns) {
			rows[n].d = k;
			n++;
		}
	}
	qsort(rows, (size_t)n, sizeof(rows[0]), by_newest);
	if (json)
		printf("{\"type\":\"payoff\",\"promotions\":%d,\"newest\":[", n);
	else if (n)
		printf("\npromotions while tracing: %d (newest %d: hits served since promotion)\n%-32s %-16s %8s %10s %8s\n",
		       n, n < PAYOFF_SHOWN ? n : PAYOFF_SHOWN, "digest", "stage", "tokens", "bytes", "hits");
	for (int i = 0; i < n && i < PAYOFF_SHOWN; i++) {
		const struct payoff_row *r = &rows[i];
		char hex[33];
		snprintf(hex, sizeof(hex), "%016llx%016llx", (unsigned long long)r->d.hi, (unsigned long long)r->d.lo);
		if (json)
			printf("%s{\"digest\":\"%s\",\"stage\":\"%016llx\",\"tokens\":%llu,\"bytes\":%llu,\"hits\":%llu,"
			       "\"pid\":%u}",
			       i ? "," : "", hex, (unsigned long long)r->p.stage, (unsigned long long)r->p.tokens,
			       (unsigned long long)r->p.bytes, (unsigned long long)r->p.hits, r->p.pid);
		else
			printf("%-32s %016llx %8llu %10llu %8llu\n", hex, (unsigned long long)r->p.stage,
			       (unsigned long long)r->p.tokens, (unsigned long long)r->p.bytes,
			       (unsigned long long)r->p.hits);
	}
	if (json)
		printf("]}\n");
	fflush(stdout);
}

/* ---- options ---- */

struct opts {
	const char *lib, *binary, *pin_dir;
	int pid;
	double interval, duration;
	int json, keep;
};

static int parse_seconds(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0) || v > 1e7)
		return -1;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option opts[] = {
		{ "lib", required_argument, 0, 'l' },      { "binary", required_argument, 0, 'b' },
		{ "pid", required_argument, 0, 'p' },      { "interval", required_argument, 0, 'i' },
		{ "duration", required_argument, 0, 'd' }, { "pin-dir", required_argument, 0, 'P' },
		{ "json", no_argument, 0, 'j' },           { "keep", no_argument, 0, 'k' },
		{ "verbose", no_argument, 0, 'v' },        { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	*o = (struct opts){ .pin_dir = SC_BPF_PIN_DIR_DEFAULT, .pid = -1, .interval = 1 };
	uint64_t v;
	int c;
	cli_getopt_begin();
	while ((c = getopt_long(argc, argv, ":hv", opts, NULL)) != -1) {
		switch (c) {
		case 'l': o->lib = optarg; break;
		case 'b': o->binary = optarg; break;
		case 'P':
			if (optarg[0] != '/')
				return cli_usage_error(CMD, "--pin-dir '%s': needs an absolute path", cli_q(optarg));
			o->pin_dir = optarg;
			break;
		case 'p':
			if (cli_parse_u64(optarg, INT_MAX, &v) || v == 0)
				return cli_usage_error(CMD, "bad --pid '%s'", cli_q(optarg));
			o->pid = (int)v;
			break;
		case 'i':
			if (parse_seconds(optarg, &o->interval) || o->interval < 0.05)
				return cli_usage_error(CMD, "bad --interval '%s' (seconds, at least 0.05)", cli_q(optarg));
			break;
		case 'd':
			if (parse_seconds(optarg, &o->duration))
				return cli_usage_error(CMD, "bad --duration '%s' (seconds)", cli_q(optarg));
			break;
		case 'j': o->json = 1; break;
		case 'k': o->keep = 1; break;
		case 'v': verbose = 1; break;
		case 'h': usage(stdout); return -1;
		default: return cli_opt_error(CMD, c, argv);
		}
	}
	if (optind != argc)
		return cli_usage_error(CMD, "unexpected argument '%s'", cli_q(argv[optind]));
	if (o->lib && o->binary)
		return cli_usage_error(CMD, "--lib and --binary exclude each other");
	return 0;
}

/* ---- the command: check -> target -> pin directory -> open, load -> attach -> pin -> run ---- */

static const char *const pinned_maps[] = { "counters", "reasons", "latency",
					   "recent_promotions", "promotion_payoff", "trace_state" };
#define NPINNED (int)(sizeof(pinned_maps) / sizeof(pinned_maps[0]))

/* What one trace holds, released by trace_cleanup() whatever phase it reached. */
struct tracer {
	struct opts o;
	const char *what;                  /* "library" or "binary" */
	char target[PATH_MAX], real[PATH_MAX];
	char made[8][PATH_MAX];            /* directories made for the pins, deepest last */
	int nmade, npinned, nprogs, attached;
	char missing[512];                 /* probes not in the target, comma-separated */
	struct stagecache_bpf *skel;
};

static int check_privileges(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "stagecache trace: must run as root: loading eBPF programs and attaching uprobes "
				"needs CAP_BPF and CAP_PERFMON (try: sudo stagecache trace)\n");
		return EXIT_FAIL;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		fprintf(stderr, "stagecache trace: kernel BTF is missing (/sys/kernel/btf/vmlinux): the eBPF programs "
				"are CO-RE and need a kernel built with CONFIG_DEBUG_INFO_BTF=y\n");
		return EXIT_FAIL;
	}
	return 0;
}

/* The file whose probes we attach to: --lib, --binary, what --pid maps, or our own library. */
static int find_target(struct tracer *t)
{
	const struct opts *o = &t->o;
	t->what = o->binary ? "binary" : "library";
	if (o->lib || o->binary) {
		snprintf(t->target, sizeof(t->target), "%s", o->lib ? o->lib : o->binary);
	} else if (o->pid > 0) {
		int e = target_of_pid(o->pid, t->target);
		if (e)
			return cli_fail(CMD, e, "process %d", o->pid);
		t->what = strstr(t->target, "/exe") ? "binary" : "library";
	} else {
		t->target[0] = 0;
		dl_iterate_phdr(find_self_lib, t->target);
		if (!t->target[0]) {
			fprintf(stderr, "stagecache trace: this stagecache is linked statically: give --lib PATH or "
					"--binary PATH\n");
			return EXIT_FAIL;
		}
	}
	if (!realpath(t->target, t->real)) {
		fprintf(stderr, "stagecache trace: %s '%s': %s\n", t->what, t->target, strerror(errno));
		return EXIT_FAIL;
	}
	int e = is_elf(t->real);
	if (e) {
		fprintf(stderr, "stagecache trace: %s '%s': %s\n", t->what, t->real,
			e == -ENOEXEC ? "not an ELF file" : strerror(-e));
		return EXIT_FAIL;
	}
	return 0;
}

/* From here on a signal only stops the loop, so the pins are always removed. */
static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* bpffs (mounted at /sys/fs/bpf when the pin directory lives there and nothing is mounted), the
 * pin directory (mode 0700), and no pins of another trace in it. */
static int prepare_pin_dir(struct tracer *t)
{
	const char *dir = t->o.pin_dir;
	if (!strncmp(dir, BPFFS_ROOT "/", strlen(BPFFS_ROOT) + 1) && on_bpffs(BPFFS_ROOT) == 0) {
		if (mount("bpf", BPFFS_ROOT, "bpf", 0, "mode=0700")) {
			fprintf(stderr, "stagecache trace: bpffs is not mounted at " BPFFS_ROOT " and mounting it failed: "
					"%s (mount -t bpf bpf " BPFFS_ROOT ")\n", strerror(errno));
			return -1;
		}
	}
	int e = make_dirs(dir, t->made, &t->nmade, 8);
	if (e) {
		fprintf(stderr, "stagecache trace: cannot create pin directory %s: %s\n", dir, strerror(-e));
		return -1;
	}
	if (on_bpffs(dir) != 1) {
		fprintf(stderr, "stagecache trace: %s is not on a bpf filesystem (mount -t bpf bpf " BPFFS_ROOT ")\n", dir);
		return -1;
	}
	chmod(dir, 0700); /* digests and counters are for the operator only */
	for (int i = 0; i < NPINNED; i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", dir, pinned_maps[i]);
		if (access(p, F_OK) == 0) {
			fprintf(stderr, "stagecache trace: %s already exists: another trace is running or one kept its "
					"pins (--keep); remove them (rm %s/*) or use --pin-dir\n", p, dir);
			return -1;
		}
	}
	return 0;
}

static int open_and_load(struct tracer *t)
{
	libbpf_set_print(libbpf_print);
	t->skel = stagecache_bpf__open();
	if (!t->skel) {
		fprintf(stderr, "stagecache trace: opening the eBPF object failed: %s\n", strerror(errno));
		dump_libbpf_msgs();
		return -1;
	}
	int e = stagecache_bpf__load(t->skel);
	if (e) {
		fprintf(stderr, "stagecache trace: loading the eBPF programs failed: %s\n", strerror(-e));
		dump_libbpf_msgs();
		return -1;
	}
	struct sc_bpf_state st0 = { .layout_version = SC_BPF_LAYOUT_VERSION };
	uint32_t zero = 0;
	bpf_map_update_elem(bpf_map__fd(t->skel->maps.trace_state), &zero, &st0, BPF_ANY);
	return 0;
}

/* Each program to the probe of its name; a probe the target lacks is listed in t->missing. */
static int attach(struct tracer *t)
{
	struct stagecache_bpf *skel = t->skel;
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, skel->obj) {
		const char *name = bpf_program__name(prog);
		t->nprogs++;
		struct bpf_link *l = bpf_program__attach_usdt(prog, t->o.pid, t->real, "stagecache", name, NULL);
		if (!l) {
			int e = -errno;
			if (e == -ENOENT) { /* not in this file (e.g. a static binary without that module) */
				size_t len = strlen(t->missing);
				snprintf(t->missing + len, sizeof(t->missing) - len, "%s%s", t->missing[0] ? "," : "", name);
				continue;
			}
			fprintf(stderr, "stagecache trace: attaching to probe stagecache:%s in %s failed: %s\n", name,
				t->real, strerror(-e));
			dump_libbpf_msgs();
			return -1;
		}
		/* the skeleton's links array destroys it with the skeleton */
		for (int i = 0; i < skel->skeleton->prog_cnt; i++)
			if (*skel->skeleton->progs[i].prog == prog)
				*skel->skeleton->progs[i].link = l;
		t->attached++;
	}
	last_n = 0;
	if (!t->attached) {
		fprintf(stderr, "stagecache trace: %s '%s' has no stagecache USDT probes (is it libstagecache.so.0, or "
				"a program linked statically with libstagecache.a? use --lib or --binary)\n", t->what, t->real);
		return -1;
	}
	return 0;
}

static int pin_maps(struct tracer *t)
{
	for (int i = 0; i < NPINNED; i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(t->skel->obj, pinned_maps[i]);
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", t->o.pin_dir, pinned_maps[i]);
		int e = m ? bpf_map__pin(m, p) : -ENOENT;
		if (e) {
			fprintf(stderr, "stagecache trace: pinning %s failed: %s\n", p, strerror(-e));
			return -1;
		}
		t->npinned = i + 1;
	}
	return 0;
}

/* The "ready" line whoever started us waits for. */
static void announce_ready(const struct tracer *t)
{
	if (t->o.json) {
		printf("{\"type\":\"ready\",\"attached\":%d,\"probes\":%d,\"path\":", t->attached, t->nprogs);
		cli_json_str(stdout, t->real);
		printf(",\"pid\":%d,\"pin_dir\":", t->o.pid);
		cli_json_str(stdout, t->o.pin_dir);
		printf(",\"missing\":\"%s\"}\n", t->missing);
	} else {
		printf("ready: %d/%d probes attached to %s (%s), maps pinned in %s%s%s\n", t->attached, t->nprogs, t->real,
		       t->o.pid > 0 ? "one process" : "every process", t->o.pin_dir,
		       t->missing[0] ? "; not in this file: " : "", t->missing);
	}
	fflush(stdout);
}

/* A table (or JSON line) every --interval until a signal or --duration. */
static void run_loop(struct tracer *t)
{
	static struct snap snaps[2];
	const struct opts *o = &t->o;
	double t0 = cli_now(), last = t0;
	int cur = 0;
	memset(&snaps[1], 0, sizeof(snaps[1]));
	for (;;) {
		double now = cli_now();
		double next = last + o->interval;
		if (o->duration > 0 && next > t0 + o->duration)
			next = t0 + o->duration;
		while (!stop_signal && now < next) {
			double d = next - now;
			struct timespec ts = { (time_t)d, (long)((d - (double)(time_t)d) * 1e9) };
			nanosleep(&ts, NULL);
			now = cli_now();
		}
		take_snapshot(t->skel, &snaps[cur]);
		print_snapshot(&snaps[cur], &snaps[!cur], now - t0, now - last, o->json);
		cur = !cur;
		last = now;
		if (stop_signal || (o->duration > 0 && now >= t0 + o->duration))
			break;
	}
}

/* Pins and the directories made for them go (kept with --keep after a clean run); links, programs
 * and maps go with the skeleton. */
static void trace_cleanup(struct tracer *t, int rc)
{
	if (!t->o.keep || rc != EXIT_OK) {
		for (int i = 0; i < t->npinned; i++) {
			char p[PATH_MAX];
			snprintf(p, sizeof(p), "%s/%s", t->o.pin_dir, pinned_maps[i]);
			unlink(p);
		}
		for (int i = t->nmade - 1; i >= 0; i--)
			rmdir(t->made[i]);
	}
	stagecache_bpf__destroy(t->skel);
}

int cmd_trace(int argc, char **argv)
{
	static struct tracer t;
	int rc = parse_args(argc, argv, &t.o);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((rc = check_privileges()) || (rc = find_target(&t)))
		return rc;
	catch_signals();

	rc = EXIT_FAIL;
	if (prepare_pin_dir(&t) || open_and_load(&t) || attach(&t) || pin_maps(&t))
		goto cleanup;
	announce_ready(&t);
	run_loop(&t);
	print_payoff(t.skel, t.o.json);
	rc = EXIT_OK;
cleanup:
	trace_cleanup(&t, rc);
	return rc;
}
