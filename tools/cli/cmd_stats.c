/* tools/cli/cmd_stats.c — `stagecache stats NAME [--model M --state S] [--dir DIR] [--l3 DIR] [--json]`:
 * the L2 counters, then (arena-wide) every stage's, the promotion policy's, the commit rings', the
 * attached processes and (with --l3) an L3 directory's. `stagecache exporter` serves the same
 * counters to Prometheus; its test checks that both agree. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "l2cli.h"

static const char *ring_state(uint32_t st)
{
	static const char *names[] = { "free", "claiming", "live", "closed" };
	return st < 4 ? names[st] : "unknown";
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache stats NAME [--model M --state S] [--dir DIR] [--l3 DIR] [--owner USER] [--json]\n\n"
		   "L2 counters, for the whole arena or one stage (--model and --state): entries, bytes,\n"
		   "logical bytes, budget, hits, misses, inserts, evictions, admission rejects, refused bytes;\n"
		   "and always arena-wide: leases held, bytes waiting for reclamation, free bytes and the\n"
		   "largest free block (fragmentation); the refusals by reason (digest, invalid, too_large,\n"
		   "over_budget, leased, no_room, scan_limit, other) and the eviction policy's state (S3-FIFO:\n"
		   "entries and bytes on the small and main FIFOs, moves to main, ghost hits). Arena-wide,\n"
		   "also the promotion policy's counters (with what became of each promotion: published or\n"
		   "refused, by reason), the commit rings in use, every stage's L2 counters (by stage id) and\n"
		   "the number of attached processes (this one included).\n\n"
		   "  --l3 DIR   also the counters of the L3 directory DIR (shared by every process using it;\n"
		   "             DIR must exist: nothing is created or changed)\n"
		   "  --owner U  trust an arena file owned by user U (a name, a number, or any)\n");
}

/* The per-stage view: the counters that belong to one stage (leases, free bytes... are global),
 * with the stage's miss reasons when @m is given. */
static void print_stage_json(uint64_t id, const struct sc_l2_stats *s, const struct sc_miss_stats *m)
{
	printf("{\"stage\":\"%016llx\",\"entries\":%llu,\"bytes\":%llu,\"logical_bytes\":%llu,\"hits\":%llu,"
	       "\"misses\":%llu,\"inserts\":%llu,\"evictions\":%llu,\"admission_rejects\":%llu,\"refused_bytes\":%llu,"
	       "\"refused_low_benefit\":%llu",
	       (unsigned long long)id, (unsigned long long)s->entries, (unsigned long long)s->bytes,
	       (unsigned long long)s->logical_bytes, (unsigned long long)s->hits, (unsigned long long)s->misses,
	       (unsigned long long)s->inserts, (unsigned long long)s->evictions,
	       (unsigned long long)s->admission_rejects, (unsigned long long)s->refused_bytes,
	       (unsigned long long)s->refused_low_benefit);
	if (m)
		cli_json_misses(stdout, m, 0);
	printf("}");
}

/* Everything stats reads, then prints: the L2 counters (of a stage, with --model/--state), and
 * arena-wide the other modules' counters when the arena has them. */
struct snap {
	const char *model, *state, *l3dir;
	struct sc_l2_stats s;
	struct sc_miss_stats ms; /* of the stage (with a model) or of the arena */
	int have_ms;
	struct cli_counters c; /* arena-wide only (not read with a model: nrings, nstages < 0) */
	struct sc_l3_stats l3s;
};

/* The L3 directory's counters (an existing store only: nothing is created or reconciled). */
static int read_l3(struct snap *x)
{
	struct sc_l3 *l3 = NULL;
	struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_RECONCILE | SC_L3_OPEN_NO_CREATE };
	int rc = sc_l3_open(x->l3dir, &lo, &l3);
	if (rc)
		return l3cli_open_error("stats", rc, x->l3dir, &lo);
	rc = sc_l3_stats(l3, &x->l3s);
	sc_l3_close(l3);
	if (rc)
		return cli_fail("stats", 0, "cannot read the counters of L3 directory %s: %s", x->l3dir, strerror(-rc));
	return EXIT_OK;
}

/* The counters of arena @name (and of the stage, with a model): 0, or an exit status. */
static int read_arena(const char *dir, const char *name, struct snap *x)
{
	struct sc_arena *a;
	int rc = cli_open_arena("stats", dir, name, &a);
	if (rc)
		return rc;
	struct sc_stage *st = NULL;
	if (x->model && (rc = sc_stage_open(a, x->model, x->state, &st))) {
		sc_arena_close(a);
		return cli_l2_error("stats", rc, name, "cannot open the stage");
	}
	rc = sc_l2_stats(a, st, &x->s);
	x->have_ms = sc_miss_stats(a, st ? sc_stage_id(st) : 0, &x->ms) == 0;
	sc_stage_close(st);
	if (!x->model)
		cli_counters_read(a, 1024, &x->c); /* the stage table holds at most 1024 stages */
	sc_arena_close(a);
	return rc ? cli_l2_error("stats", rc, name, "cannot read the counters") : EXIT_OK;
}

static const char *const l2_names[] = { "entries", "bytes", "logical_bytes", "budget_bytes", "hits", "misses",
					"inserts", "evictions", "admission_rejects", "refused_bytes", "leases",
					"pending_reclaim_bytes", "free_bytes", "largest_free_block", "small_entries",
					"small_bytes", "main_entries", "main_bytes", "moved_to_main", "ghost_hits",
					"physical_bytes", "saved_bytes", "segments", "segment_holder_bytes",
					"segment_dedup_bytes", "refused_low_benefit", "credit_kept" };
enum { L2_NAMES = sizeof(l2_names) / sizeof(l2_names[0]) };

/* The L2 counters in the order of l2_names. */
static void l2_values(const struct sc_l2_stats *s, uint64_t v[L2_NAMES])
{
	const uint64_t w[] = { s->entries, s->bytes, s->logical_bytes, s->budget_bytes, s->hits, s->misses,
			       s->inserts, s->evictions, s->admission_rejects, s->refused_bytes, s->leases,
			       s->pending_reclaim_bytes, s->free_bytes, s->largest_free_block, s->small_entries,
			       s->small_bytes, s->main_entries, s->main_bytes, s->moved_to_main, s->ghost_hits,
			       s->physical_bytes, s->saved_bytes, s->segments, s->segment_holder_bytes,
			       s->segment_dedup_bytes, s->refused_low_benefit, s->credit_kept };
	_Static_assert(sizeof(w) / sizeof(w[0]) == L2_NAMES, "a value for every name");
	memcpy(v, w, sizeof(w));
}

/* "name":count for each refusal reason of the refused[] arrays (low_benefit has its own counter,
 * refused_low_benefit). */
static void json_refused(const uint64_t *refused)
{
	for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
		printf("%s\"%s\":%llu", i ? "," : "", sc_l2_refusal_name(i), (unsigned long long)refused[i]);
}

static void json_l2_promotion(const struct snap *x)
{
	uint64_t v[L2_NAMES];
	l2_values(&x->s, v);
	printf("{\"l2\":{");
	for (size_t i = 0; i < L2_NAMES; i++)
		printf("%s\"%s\":%llu", i ? "," : "", l2_names[i], (unsigned long long)v[i]);
	printf(",\"refused\":{");
	json_refused(x->s.refused);
	printf("}");
	if (x->have_ms)
		cli_json_misses(stdout, &x->ms, 1);
	printf("}");
	if (!x->c.have_ps)
		return;
	const struct sc_promote_stats *ps = &x->c.ps;
	printf(",\"promotion\":{\"observations\":%u,\"claims\":%u,\"capacity\":%u,\"considered\":%llu,"
	       "\"promoted\":%llu,\"evicted\":%llu,\"expired\":%llu,\"repairs\":%llu,\"published\":%llu,"
	       "\"refused_low_benefit\":%llu,\"refused\":{",
	       ps->observations, ps->claims, ps->capacity, (unsigned long long)ps->considered,
	       (unsigned long long)ps->promoted, (unsigned long long)ps->evicted, (unsigned long long)ps->expired,
	       (unsigned long long)ps->repairs, (unsigned long long)ps->published,
	       (unsigned long long)ps->refused_low_benefit);
	json_refused(ps->refused);
	printf("}}");
}

static void json_index(const struct sc_l3_index_stats *xs)
{
	printf(",\"l3_index\":{\"capacity\":%u,\"refresh_ms\":%u,\"positive\":%u,\"negative\":%u,"
	       "\"pages\":%u,\"free_pages\":%u,\"token_verify\":%s,\"bound\":%s,\"hits\":%llu,"
	       "\"negative_hits\":%llu,\"misses\":%llu,\"fallbacks\":%llu,\"stale\":%llu,"
	       "\"refreshes\":%llu,\"inserts\":%llu,\"evictions\":%llu,\"drops\":%llu,\"full\":%llu,"
	       "\"vanished\":%llu,\"foreign\":%llu},\"key_collisions\":{\"total\":%llu,\"l2\":%llu,"
	       "\"index\":%llu,\"l3\":%llu}",
	       xs->capacity, xs->refresh_ms, xs->positive, xs->negative, xs->pages, xs->free_pages,
	       xs->token_verify ? "true" : "false", xs->bound ? "true" : "false", (unsigned long long)xs->hits,
	       (unsigned long long)xs->negative_hits, (unsigned long long)xs->misses, (unsigned long long)xs->fallbacks,
	       (unsigned long long)xs->stale, (unsigned long long)xs->refreshes, (unsigned long long)xs->inserts,
	       (unsigned long long)xs->evictions, (unsigned long long)xs->drops, (unsigned long long)xs->full,
	       (unsigned long long)xs->vanished, (unsigned long long)xs->foreign,
	       (unsigned long long)xs->key_collisions, (unsigned long long)xs->key_collisions_l2,
	       (unsigned long long)xs->key_collisions_index, (unsigned long long)xs->key_collisions_l3);
}

static void json_rings_stages(const struct snap *x)
{
	if (x->c.nrings >= 0) {
		printf(",\"rings\":[");
		for (int i = 0; i < x->c.nrings; i++) {
			const struct sc_ring_stat *r = &x->c.rings[i];
			printf("%s{\"ring\":%u,\"state\":%u,\"state_name\":\"%s\",\"producer_pid\":%u,"
			       "\"producer_alive\":%s,\"records\":%llu,\"delivered\":%llu,\"depth_records\":%llu,"
			       "\"depth_bytes\":%llu,\"ring_full\":%llu,\"ring_bytes\":%llu,\"corrupt\":%s}",
			       i ? "," : "", r->ring, r->state, ring_state(r->state), r->producer_pid,
			       r->producer_alive ? "true" : "false", (unsigned long long)r->records,
			       (unsigned long long)r->delivered, (unsigned long long)r->depth_records,
			       (unsigned long long)r->depth_bytes, (unsigned long long)r->ring_full,
			       (unsigned long long)r->ring_bytes, r->corrupt ? "true" : "false");
		}
		printf("]");
	}
	if (x->c.nstages >= 0) {
		printf(",\"stages\":[");
		for (int i = 0; i < x->c.nstages; i++) {
			printf("%s", i ? "," : "");
			print_stage_json(x->c.ids[i], &x->c.stages[i], x->c.misses ? &x->c.misses[i] : NULL);
		}
		printf("]");
	}
}

static void json_l3(const char *dir, const struct sc_l3_stats *l)
{
	printf(",\"l3\":{\"dir\":");
	cli_json_str(stdout, dir);
	printf(",\"objects\":%llu,\"bytes\":%llu,\"fills\":%llu,\"fill_bytes\":%llu,\"fill_ns\":%llu,"
	       "\"verify_failures\":%llu,\"quarantined\":%llu,\"evictions\":%llu,\"write_refusals\":%llu,"
	       "\"puts\":%llu,\"put_dedup\":%llu,\"budget_bytes\":%llu,\"logical_bytes\":%llu,"
	       "\"physical_bytes\":%llu,\"saved_bytes\":%llu,\"segments\":%llu,\"fills_kept\":%llu,"
	       "\"fill_bytes_from_l2\":%llu,\"identity_mismatches\":%llu,\"fill_starts\":%llu}",
	       (unsigned long long)l->objects, (unsigned long long)l->bytes, (unsigned long long)l->fills,
	       (unsigned long long)l->fill_bytes, (unsigned long long)l->fill_ns, (unsigned long long)l->verify_failures,
	       (unsigned long long)l->quarantined, (unsigned long long)l->evictions,
	       (unsigned long long)l->write_refusals, (unsigned long long)l->puts, (unsigned long long)l->put_dedup,
	       (unsigned long long)l->budget_bytes, (unsigned long long)l->logical_bytes,
	       (unsigned long long)l->physical_bytes, (unsigned long long)l->saved_bytes,
	       (unsigned long long)l->segments, (unsigned long long)l->fills_kept,
	       (unsigned long long)l->fill_bytes_from_l2, (unsigned long long)l->identity_mismatches,
	       (unsigned long long)l->fill_starts);
}


static void text_l2_promotion(const struct snap *x)
{
	uint64_t v[L2_NAMES];
	l2_values(&x->s, v);
	printf("L2%s%s%s%s\n", x->model ? " stage " : "", x->model ? x->model : "", x->model ? "/" : "",
	       x->model ? x->state : "");
	for (size_t i = 0; i < L2_NAMES; i++)
		printf("  %-22s %llu\n", l2_names[i], (unsigned long long)v[i]);
	printf("  refused               ");
	for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
		printf("%s%s %llu", i ? ", " : "", sc_l2_refusal_name(i), (unsigned long long)x->s.refused[i]);
	printf(", %s %llu\n", sc_l2_refusal_name(SC_L2_REFUSE_LOW_BENEFIT), (unsigned long long)x->s.refused_low_benefit);
	if (x->have_ms)
		cli_text_misses(stdout, &x->ms, "  ");
	if (!x->c.have_ps)
		return;
	const struct sc_promote_stats *ps = &x->c.ps;
	printf("promotion\n  observations %u/%u, claims %u, considered %llu, promoted %llu, evicted %llu, "
	       "expired %llu, repairs %llu\n",
	       ps->observations, ps->capacity, ps->claims, (unsigned long long)ps->considered,
	       (unsigned long long)ps->promoted, (unsigned long long)ps->evicted, (unsigned long long)ps->expired,
	       (unsigned long long)ps->repairs);
	uint64_t refused = ps->refused_low_benefit;
	for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
		refused += ps->refused[i];
	printf("  published %llu, refused %llu", (unsigned long long)ps->published, (unsigned long long)refused);
	for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
		if (ps->refused[i])
			printf(" (%s %llu)", sc_l2_refusal_name(i), (unsigned long long)ps->refused[i]);
	if (ps->refused_low_benefit)
		printf(" (%s %llu)", sc_l2_refusal_name(SC_L2_REFUSE_LOW_BENEFIT), (unsigned long long)ps->refused_low_benefit);
	printf("\n");
}

static void text_index(const struct sc_l3_index_stats *xs)
{
	printf("L3 location index (%u entries, refresh %u ms, token verification %s%s)\n", xs->capacity,
	       xs->refresh_ms, xs->token_verify ? "on" : "OFF", xs->bound ? "" : ", no directory bound yet");
	printf("  entries %u positive + %u negative, token pages %u free of %u\n", xs->positive, xs->negative,
	       xs->free_pages, xs->pages);
	printf("  hits %llu, negative skips %llu, misses %llu (stale %llu), directory probes %llu, scans+refreshes %llu\n",
	       (unsigned long long)xs->hits, (unsigned long long)xs->negative_hits, (unsigned long long)xs->misses,
	       (unsigned long long)xs->stale, (unsigned long long)xs->fallbacks, (unsigned long long)xs->refreshes);
	printf("  inserts %llu, evictions %llu, dropped %llu, full %llu, vanished objects %llu, other directories %llu\n",
	       (unsigned long long)xs->inserts, (unsigned long long)xs->evictions, (unsigned long long)xs->drops,
	       (unsigned long long)xs->full, (unsigned long long)xs->vanished, (unsigned long long)xs->foreign);
	printf("key collisions %llu (L2 %llu, index %llu, L3 %llu): each was a miss\n",
	       (unsigned long long)xs->key_collisions, (unsigned long long)xs->key_collisions_l2,
	       (unsigned long long)xs->key_collisions_index, (unsigned long long)xs->key_collisions_l3);
}

static void text_rings_stages(const struct snap *x)
{
	int shown = 0;
	for (int i = 0; i < x->c.nrings; i++) {
		const struct sc_ring_stat *r = &x->c.rings[i];
		if (!r->producer_pid && !r->records)
			continue;
		if (!shown++)
			printf("rings (in use)\n");
		printf("  ring %-3u %-8s pid %-7u%s records %llu delivered %llu depth %llu full %llu%s\n", r->ring,
		       ring_state(r->state), r->producer_pid, r->producer_pid && !r->producer_alive ? " (dead)" : "",
		       (unsigned long long)r->records, (unsigned long long)r->delivered,
		       (unsigned long long)r->depth_records, (unsigned long long)r->ring_full, r->corrupt ? " CORRUPT" : "");
	}
	if (x->c.nrings >= 0 && !shown)
		printf("rings: none in use (%d)\n", x->c.nrings);
	for (int i = 0; i < x->c.nstages; i++) {
		const struct sc_l2_stats *s = &x->c.stages[i];
		if (!i)
			printf("stages\n");
		printf("  %016llx entries %llu bytes %llu hits %llu misses %llu inserts %llu evictions %llu "
		       "rejects %llu\n",
		       (unsigned long long)x->c.ids[i], (unsigned long long)s->entries, (unsigned long long)s->bytes,
		       (unsigned long long)s->hits, (unsigned long long)s->misses, (unsigned long long)s->inserts,
		       (unsigned long long)s->evictions, (unsigned long long)s->admission_rejects);
		if (x->c.misses)
			cli_text_misses(stdout, &x->c.misses[i], "    ");
	}
}

static void text_l3(const char *dir, const struct sc_l3_stats *l)
{
	printf("L3 %s\n  objects %llu, bytes %llu, fills %llu (%llu bytes, %llu ns), verify failures %llu, "
	       "quarantined %llu, evictions %llu, write refusals %llu, puts %llu (+%llu already present)\n"
	       "  bytes logical %llu, physical %llu, saved %llu (segments %llu); fills from files kept open %llu, "
	       "segment bytes copied from L2 %llu; refused as another identity's %llu\n",
	       dir, (unsigned long long)l->objects, (unsigned long long)l->bytes, (unsigned long long)l->fills,
	       (unsigned long long)l->fill_bytes, (unsigned long long)l->fill_ns, (unsigned long long)l->verify_failures,
	       (unsigned long long)l->quarantined, (unsigned long long)l->evictions,
	       (unsigned long long)l->write_refusals, (unsigned long long)l->puts, (unsigned long long)l->put_dedup,
	       (unsigned long long)l->logical_bytes, (unsigned long long)l->physical_bytes,
	       (unsigned long long)l->saved_bytes, (unsigned long long)l->segments, (unsigned long long)l->fills_kept,
	       (unsigned long long)l->fill_bytes_from_l2, (unsigned long long)l->identity_mismatches);
}

/* The sections of the output in one format; the same order in both. */
struct format {
	void (*l2_promotion)(const struct snap *x);
	void (*index)(const struct sc_l3_index_stats *xs);
	void (*rings_stages)(const struct snap *x);
	void (*attached)(uint32_t n);
	void (*l3)(const char *dir, const struct sc_l3_stats *l);
	const char *end;
};

static void json_attached(uint32_t n)
{
	printf(",\"attached\":%u", n);
}

static void text_attached(uint32_t n)
{
	printf("attached processes: %u (this one included)\n", n);
}

static const struct format json_format = { json_l2_promotion, json_index, json_rings_stages, json_attached, json_l3,
					   "}\n" };
static const struct format text_format = { text_l2_promotion, text_index, text_rings_stages, text_attached, text_l3,
					   "" };

static void print(const struct snap *x, const struct format *f)
{
	f->l2_promotion(x);
	if (x->c.have_xs)
		f->index(&x->c.xs);
	f->rings_stages(x);
	if (x->c.have_info)
		f->attached(x->c.info.attached_count);
	if (x->l3dir)
		f->l3(x->l3dir, &x->l3s);
	fputs(f->end, stdout);
}

int cmd_stats(int argc, char **argv)
{
	struct snap x = { .c = { .nrings = -1, .nstages = -1 } };
	const char *dir = NULL, *name;
	int json = 0;
	const struct cli_opt opts[] = {
		{ "dir", CLI_STR, &dir },            { "model", CLI_STR, &x.model },
		{ "state", CLI_STR, &x.state },      { "owner", CLI_OWNER },
		{ "json", CLI_FLAG, &json },         { "l3", CLI_STR, &x.l3dir },
		CLI_OPERAND("NAME", &name),
	};
	int rc = cli_parse_opts("stats", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((x.model != NULL) != (x.state != NULL))
		return cli_usage_error("stats", "%s needs %s too", x.model ? "--model" : "--state",
				       x.model ? "--state" : "--model");
	if ((x.model && (rc = cli_check_identity("stats", "--model", x.model, SC_IDENTITY_MAX, 0))) ||
	    (x.state && (rc = cli_check_identity("stats", "--state", x.state, SC_IDENTITY_MAX, 0))))
		return rc;
	if (x.l3dir)
		rc = read_l3(&x);
	if (rc == EXIT_OK)
		rc = read_arena(dir, name, &x);
	if (rc == EXIT_OK)
		print(&x, json ? &json_format : &text_format);
	cli_counters_free(&x.c);
	return rc;
}
