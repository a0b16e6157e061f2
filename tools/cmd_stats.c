/* tools/cmd_stats.c — `stagecache stats NAME [--model M --state S] [--dir DIR] [--l3 DIR] [--json]`:
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

/* The per-stage view: the counters that belong to one stage (leases, free bytes... are global). */
static void print_stage_json(uint64_t id, const struct sc_l2_stats *s)
{
	printf("{\"stage\":\"%016llx\",\"entries\":%llu,\"bytes\":%llu,\"logical_bytes\":%llu,\"hits\":%llu,"
	       "\"misses\":%llu,\"inserts\":%llu,\"evictions\":%llu,\"admission_rejects\":%llu,\"refused_bytes\":%llu}",
	       (unsigned long long)id, (unsigned long long)s->entries, (unsigned long long)s->bytes,
	       (unsigned long long)s->logical_bytes, (unsigned long long)s->hits, (unsigned long long)s->misses,
	       (unsigned long long)s->inserts, (unsigned long long)s->evictions,
	       (unsigned long long)s->admission_rejects, (unsigned long long)s->refused_bytes);
}

int cmd_stats(int argc, char **argv)
{
	const char *dir = NULL, *model = NULL, *state = NULL, *l3dir = NULL, *name;
	int json = 0;
	const struct cli_opt opts[] = {
		{ "dir", CLI_STR, &dir },            { "model", CLI_STR, &model },
		{ "state", CLI_STR, &state },        { "owner", CLI_OWNER },
		{ "json", CLI_FLAG, &json },         { "l3", CLI_STR, &l3dir },
		{ 0 },
	};
	int prc = cli_parse_opts("stats", argc, argv, opts, usage);
	if (prc)
		return prc < 0 ? EXIT_OK : prc;
	if ((prc = cli_operand("stats", "NAME", argc, argv, &name)))
		return prc;
	if ((model != NULL) != (state != NULL))
		return cli_usage_error("stats", "%s needs %s too", model ? "--model" : "--state", model ? "--state" : "--model");
	int rc = 0;
	if ((model && (rc = cli_check_identity("stats", "--model", model, SC_IDENTITY_MAX, 0))) ||
	    (state && (rc = cli_check_identity("stats", "--state", state, SC_IDENTITY_MAX, 0))))
		return rc;
	struct sc_l3 *l3 = NULL;
	struct sc_l3_stats l3s;
	/* an existing store only: nothing is created or reconciled */
	struct sc_l3_opts lo = { .flags = SC_L3_OPEN_NO_RECONCILE | SC_L3_OPEN_NO_CREATE };
	if (l3dir && (rc = sc_l3_open(l3dir, &lo, &l3)))
		return l3cli_open_error("stats", rc, l3dir, &lo);
	if (l3 && (rc = sc_l3_stats(l3, &l3s))) {
		sc_l3_close(l3);
		return cli_fail("stats", 0, "cannot read the counters of L3 directory %s: %s", l3dir, strerror(-rc));
	}
	sc_l3_close(l3);
	struct sc_arena *a;
	if ((rc = cli_open_arena("stats", dir, name, &a)))
		return rc;
	struct sc_stage *st = NULL;
	if (model && (rc = sc_stage_open(a, model, state, &st))) {
		sc_arena_close(a);
		return cli_l2_error("stats", rc, name, "cannot open the stage");
	}
	struct sc_l2_stats s;
	rc = sc_l2_stats(a, st, &s);
	sc_stage_close(st);
	/* the other modules' counters, when this build has them (arena-wide only) */
	struct sc_promote_stats ps;
	int have_ps = !model && sc_promote_stats(a, &ps) == 0;
	struct sc_l3_index_stats xs;
	int have_xs = !model && sc_l3_index_stats(a, &xs) == 0;
	struct sc_arena_info info;
	struct sc_ring_stat *rs = NULL;
	int nrings = -1;
	int have_info = !model && sc_arena_info(a, &info) == 0;
	if (have_info && (rs = calloc(info.ring_count + 1, sizeof(*rs)))) {
		nrings = sc_ring_stats(a, rs, info.ring_count);
		if (nrings > (int)info.ring_count)
			nrings = (int)info.ring_count;
	}
	/* every stage's counters (the table holds at most 1024 stages) */
	uint64_t ids[1024];
	struct sc_l2_stats *ss = NULL;
	int nstages = model ? -1 : sc_l2_stage_ids(a, ids, 1024);
	if (nstages > 1024)
		nstages = 1024;
	if (nstages > 0 && (ss = calloc((size_t)nstages, sizeof(*ss)))) {
		int k = 0;
		for (int i = 0; i < nstages; i++)
			if (sc_l2_stats_id(a, ids[i], &ss[k]) == 0)
				ids[k++] = ids[i];
		nstages = k;
	} else if (nstages > 0) {
		nstages = -1;
	}
	sc_arena_close(a);
	if (rc) {
		free(rs);
		free(ss);
		return cli_l2_error("stats", rc, name, "cannot read the counters");
	}
	const char *names[] = { "entries", "bytes", "logical_bytes", "budget_bytes", "hits", "misses", "inserts",
				"evictions", "admission_rejects", "refused_bytes", "leases", "pending_reclaim_bytes",
				"free_bytes", "largest_free_block", "small_entries", "small_bytes", "main_entries",
				"main_bytes", "moved_to_main", "ghost_hits", "physical_bytes", "saved_bytes", "segments",
				"segment_holder_bytes", "segment_dedup_bytes" };
	uint64_t v[] = { s.entries, s.bytes, s.logical_bytes, s.budget_bytes, s.hits, s.misses, s.inserts, s.evictions,
			 s.admission_rejects, s.refused_bytes, s.leases, s.pending_reclaim_bytes, s.free_bytes,
			 s.largest_free_block, s.small_entries, s.small_bytes, s.main_entries, s.main_bytes,
			 s.moved_to_main, s.ghost_hits, s.physical_bytes, s.saved_bytes, s.segments, s.segment_holder_bytes,
			 s.segment_dedup_bytes };
	if (json) {
		printf("{\"l2\":{");
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			printf("%s\"%s\":%llu", i ? "," : "", names[i], (unsigned long long)v[i]);
		printf(",\"refused\":{");
		for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
			printf("%s\"%s\":%llu", i ? "," : "", sc_l2_refusal_name(i), (unsigned long long)s.refused[i]);
		printf("}}");
		if (have_ps) {
			printf(",\"promotion\":{\"observations\":%u,\"claims\":%u,\"capacity\":%u,\"considered\":%llu,"
			       "\"promoted\":%llu,\"evicted\":%llu,\"expired\":%llu,\"repairs\":%llu,\"published\":%llu,"
			       "\"refused\":{",
			       ps.observations, ps.claims, ps.capacity, (unsigned long long)ps.considered,
			       (unsigned long long)ps.promoted, (unsigned long long)ps.evicted, (unsigned long long)ps.expired,
			       (unsigned long long)ps.repairs, (unsigned long long)ps.published);
			for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
				printf("%s\"%s\":%llu", i ? "," : "", sc_l2_refusal_name(i), (unsigned long long)ps.refused[i]);
			printf("}}");
		}
		if (have_xs)
			printf(",\"l3_index\":{\"capacity\":%u,\"refresh_ms\":%u,\"positive\":%u,\"negative\":%u,"
			       "\"pages\":%u,\"free_pages\":%u,\"token_verify\":%s,\"bound\":%s,\"hits\":%llu,"
			       "\"negative_hits\":%llu,\"misses\":%llu,\"fallbacks\":%llu,\"stale\":%llu,"
			       "\"refreshes\":%llu,\"inserts\":%llu,\"evictions\":%llu,\"drops\":%llu,\"full\":%llu,"
			       "\"vanished\":%llu,\"foreign\":%llu},\"key_collisions\":{\"total\":%llu,\"l2\":%llu,"
			       "\"index\":%llu,\"l3\":%llu}",
			       xs.capacity, xs.refresh_ms, xs.positive, xs.negative, xs.pages, xs.free_pages,
			       xs.token_verify ? "true" : "false", xs.bound ? "true" : "false",
			       (unsigned long long)xs.hits, (unsigned long long)xs.negative_hits,
			       (unsigned long long)xs.misses, (unsigned long long)xs.fallbacks, (unsigned long long)xs.stale,
			       (unsigned long long)xs.refreshes, (unsigned long long)xs.inserts,
			       (unsigned long long)xs.evictions, (unsigned long long)xs.drops, (unsigned long long)xs.full,
			       (unsigned long long)xs.vanished, (unsigned long long)xs.foreign,
			       (unsigned long long)xs.key_collisions, (unsigned long long)xs.key_collisions_l2,
			       (unsigned long long)xs.key_collisions_index, (unsigned long long)xs.key_collisions_l3);
		if (nrings >= 0) {
			printf(",\"rings\":[");
			for (int i = 0; i < nrings; i++)
				printf("%s{\"ring\":%u,\"state\":%u,\"state_name\":\"%s\",\"producer_pid\":%u,"
				       "\"producer_alive\":%s,\"records\":%llu,\"delivered\":%llu,\"depth_records\":%llu,"
				       "\"depth_bytes\":%llu,\"ring_full\":%llu,\"ring_bytes\":%llu,\"corrupt\":%s}",
				       i ? "," : "", rs[i].ring, rs[i].state, ring_state(rs[i].state), rs[i].producer_pid,
				       rs[i].producer_alive ? "true" : "false", (unsigned long long)rs[i].records,
				       (unsigned long long)rs[i].delivered, (unsigned long long)rs[i].depth_records,
				       (unsigned long long)rs[i].depth_bytes, (unsigned long long)rs[i].ring_full,
				       (unsigned long long)rs[i].ring_bytes, rs[i].corrupt ? "true" : "false");
			printf("]");
		}
		if (nstages >= 0) {
			printf(",\"stages\":[");
			for (int i = 0; i < nstages; i++) {
				printf("%s", i ? "," : "");
				print_stage_json(ids[i], &ss[i]);
			}
			printf("]");
		}
		if (have_info)
			printf(",\"attached\":%u", info.attached_count);
		if (l3dir) {
			printf(",\"l3\":{\"dir\":");
			cli_json_str(stdout, l3dir);
			printf(",\"objects\":%llu,\"bytes\":%llu,\"fills\":%llu,\"fill_bytes\":%llu,\"fill_ns\":%llu,"
			       "\"verify_failures\":%llu,\"quarantined\":%llu,\"evictions\":%llu,\"write_refusals\":%llu,"
			       "\"puts\":%llu,\"put_dedup\":%llu,\"budget_bytes\":%llu}",
			       (unsigned long long)l3s.objects, (unsigned long long)l3s.bytes, (unsigned long long)l3s.fills,
			       (unsigned long long)l3s.fill_bytes, (unsigned long long)l3s.fill_ns,
			       (unsigned long long)l3s.verify_failures, (unsigned long long)l3s.quarantined,
			       (unsigned long long)l3s.evictions, (unsigned long long)l3s.write_refusals,
			       (unsigned long long)l3s.puts, (unsigned long long)l3s.put_dedup,
			       (unsigned long long)l3s.budget_bytes);
		}
		printf("}\n");
	} else {
		printf("L2%s%s%s%s\n", model ? " stage " : "", model ? model : "", model ? "/" : "", model ? state : "");
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			printf("  %-22s %llu\n", names[i], (unsigned long long)v[i]);
		printf("  refused               ");
		for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
			printf("%s%s %llu", i ? ", " : "", sc_l2_refusal_name(i), (unsigned long long)s.refused[i]);
		printf("\n");
		if (have_ps) {
			printf("promotion\n  observations %u/%u, claims %u, considered %llu, promoted %llu, evicted %llu, "
			       "expired %llu, repairs %llu\n",
			       ps.observations, ps.capacity, ps.claims, (unsigned long long)ps.considered,
			       (unsigned long long)ps.promoted, (unsigned long long)ps.evicted, (unsigned long long)ps.expired,
			       (unsigned long long)ps.repairs);
			uint64_t refused = 0;
			for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
				refused += ps.refused[i];
			printf("  published %llu, refused %llu", (unsigned long long)ps.published, (unsigned long long)refused);
			for (int i = 0; i < SC_L2_REFUSE_COUNT; i++)
				if (ps.refused[i])
					printf(" (%s %llu)", sc_l2_refusal_name(i), (unsigned long long)ps.refused[i]);
			printf("\n");
		}
		if (have_xs) {
			printf("L3 location index (%u entries, refresh %u ms, token verification %s%s)\n", xs.capacity,
			       xs.refresh_ms, xs.token_verify ? "on" : "OFF", xs.bound ? "" : ", no directory bound yet");
			printf("  entries %u positive + %u negative, token pages %u free of %u\n", xs.positive, xs.negative,
			       xs.free_pages, xs.pages);
			printf("  hits %llu, negative skips %llu, misses %llu (stale %llu), directory probes %llu, scans+refreshes %llu\n",
			       (unsigned long long)xs.hits, (unsigned long long)xs.negative_hits, (unsigned long long)xs.misses,
			       (unsigned long long)xs.stale, (unsigned long long)xs.fallbacks, (unsigned long long)xs.refreshes);
			printf("  inserts %llu, evictions %llu, dropped %llu, full %llu, vanished objects %llu, other directories %llu\n",
			       (unsigned long long)xs.inserts, (unsigned long long)xs.evictions, (unsigned long long)xs.drops,
			       (unsigned long long)xs.full, (unsigned long long)xs.vanished, (unsigned long long)xs.foreign);
			printf("key collisions %llu (L2 %llu, index %llu, L3 %llu): each was a miss\n",
			       (unsigned long long)xs.key_collisions, (unsigned long long)xs.key_collisions_l2,
			       (unsigned long long)xs.key_collisions_index, (unsigned long long)xs.key_collisions_l3);
		}
		int shown = 0;
		for (int i = 0; i < nrings; i++) {
			if (!rs[i].producer_pid && !rs[i].records)
				continue;
			if (!shown++)
				printf("rings (in use)\n");
			printf("  ring %-3u %-8s pid %-7u%s records %llu delivered %llu depth %llu full %llu%s\n", rs[i].ring,
			       ring_state(rs[i].state), rs[i].producer_pid,
			       rs[i].producer_pid && !rs[i].producer_alive ? " (dead)" : "", (unsigned long long)rs[i].records,
			       (unsigned long long)rs[i].delivered, (unsigned long long)rs[i].depth_records,
			       (unsigned long long)rs[i].ring_full, rs[i].corrupt ? " CORRUPT" : "");
		}
		if (nrings >= 0 && !shown)
			printf("rings: none in use (%d)\n", nrings);
		for (int i = 0; i < nstages; i++) {
			if (!i)
				printf("stages\n");
			printf("  %016llx entries %llu bytes %llu hits %llu misses %llu inserts %llu evictions %llu "
			       "rejects %llu\n",
			       (unsigned long long)ids[i], (unsigned long long)ss[i].entries, (unsigned long long)ss[i].bytes,
			       (unsigned long long)ss[i].hits, (unsigned long long)ss[i].misses,
			       (unsigned long long)ss[i].inserts, (unsigned long long)ss[i].evictions,
			       (unsigned long long)ss[i].admission_rejects);
		}
		if (have_info)
			printf("attached processes: %u (this one included)\n", info.attached_count);
		if (l3dir)
			printf("L3 %s\n  objects %llu, bytes %llu, fills %llu (%llu bytes, %llu ns), verify failures %llu, "
			       "quarantined %llu, evictions %llu, write refusals %llu, puts %llu (+%llu already present)\n",
			       l3dir, (unsigned long long)l3s.objects, (unsigned long long)l3s.bytes,
			       (unsigned long long)l3s.fills, (unsigned long long)l3s.fill_bytes,
			       (unsigned long long)l3s.fill_ns, (unsigned long long)l3s.verify_failures,
			       (unsigned long long)l3s.quarantined, (unsigned long long)l3s.evictions,
			       (unsigned long long)l3s.write_refusals, (unsigned long long)l3s.puts,
			       (unsigned long long)l3s.put_dedup);
	}
	free(rs);
	free(ss);
	return EXIT_OK;
}
