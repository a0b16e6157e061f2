/* tools/cmd_stats.c — `stagecache stats NAME [--model M --state S] [--dir DIR] [--json]`: the L2
 * counters, then (arena-wide) the promotion policy's and the commit rings'. */
#include <getopt.h>
#include <stdlib.h>

#include "cli.h"

static const char *ring_state(uint32_t st)
{
	static const char *names[] = { "free", "claiming", "live", "closed" };
	return st < 4 ? names[st] : "unknown";
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache stats NAME [--model M --state S] [--dir DIR] [--json]\n\n"
		   "L2 counters, for the whole arena or one stage (--model and --state): entries, bytes,\n"
		   "logical bytes, budget, hits, misses, inserts, evictions, admission rejects, refused bytes;\n"
		   "and always arena-wide: leases held, bytes waiting for reclamation, free bytes and the\n"
		   "largest free block (fragmentation). Arena-wide, also the promotion policy's counters and\n"
		   "the commit rings in use.\n");
}

int cmd_stats(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, 0, 'd' },   { "model", required_argument, 0, 'm' },
		{ "state", required_argument, 0, 's' }, { "owner", required_argument, 0, 'O' },
		{ "json", no_argument, 0, 'j' },        { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *dir = NULL, *model = NULL, *state = NULL;
	int json = 0, c;
	cli_getopt_begin();
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'm': model = optarg; break;
		case 's': state = optarg; break;
		case 'O':
			if (cli_parse_owner("stats", optarg))
				return EXIT_USAGE;
			break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_opt_error("stats", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error("stats", "missing NAME");
	if (optind < argc - 1)
		return cli_usage_error("stats", "unexpected argument '%s'", cli_q(argv[optind + 1]));
	if ((model != NULL) != (state != NULL))
		return cli_usage_error("stats", "%s needs %s too", model ? "--model" : "--state", model ? "--state" : "--model");
	int rc = 0;
	if ((model && (rc = cli_check_identity("stats", "--model", model, SC_IDENTITY_MAX, 0))) ||
	    (state && (rc = cli_check_identity("stats", "--state", state, SC_IDENTITY_MAX, 0))))
		return rc;
	struct sc_arena *a;
	if ((rc = cli_open_arena("stats", dir, argv[optind], &a)))
		return rc;
	struct sc_stage *st = NULL;
	if (model && (rc = sc_stage_open(a, model, state, &st))) {
		sc_arena_close(a);
		return cli_l2_error("stats", rc, argv[optind], "cannot open the stage");
	}
	struct sc_l2_stats s;
	rc = sc_l2_stats(a, st, &s);
	sc_stage_close(st);
	/* the other modules' counters, when this build has them (arena-wide only) */
	struct sc_promote_stats ps;
	int have_ps = !model && sc_promote_stats(a, &ps) == 0;
	struct sc_arena_info info;
	struct sc_ring_stat *rs = NULL;
	int nrings = -1;
	if (!model && sc_arena_info(a, &info) == 0 && (rs = calloc(info.ring_count + 1, sizeof(*rs)))) {
		nrings = sc_ring_stats(a, rs, info.ring_count);
		if (nrings > (int)info.ring_count)
			nrings = (int)info.ring_count;
	}
	sc_arena_close(a);
	if (rc) {
		free(rs);
		return cli_l2_error("stats", rc, argv[optind], "cannot read the counters");
	}
	const char *names[] = { "entries", "bytes", "logical_bytes", "budget_bytes", "hits", "misses", "inserts",
				"evictions", "admission_rejects", "refused_bytes", "leases", "pending_reclaim_bytes",
				"free_bytes", "largest_free_block" };
	uint64_t v[] = { s.entries, s.bytes, s.logical_bytes, s.budget_bytes, s.hits, s.misses, s.inserts, s.evictions,
			 s.admission_rejects, s.refused_bytes, s.leases, s.pending_reclaim_bytes, s.free_bytes,
			 s.largest_free_block };
	if (json) {
		printf("{\"l2\":{");
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			printf("%s\"%s\":%llu", i ? "," : "", names[i], (unsigned long long)v[i]);
		printf("}");
		if (have_ps)
			printf(",\"promotion\":{\"observations\":%u,\"claims\":%u,\"capacity\":%u,\"considered\":%llu,"
			       "\"promoted\":%llu,\"evicted\":%llu,\"expired\":%llu,\"repairs\":%llu}",
			       ps.observations, ps.claims, ps.capacity, (unsigned long long)ps.considered,
			       (unsigned long long)ps.promoted, (unsigned long long)ps.evicted, (unsigned long long)ps.expired,
			       (unsigned long long)ps.repairs);
		if (nrings >= 0) {
			printf(",\"rings\":[");
			for (int i = 0; i < nrings; i++)
				printf("%s{\"ring\":%u,\"state\":%u,\"state_name\":\"%s\",\"producer_pid\":%u,"
				       "\"producer_alive\":%s,\"records\":%llu,\"delivered\":%llu,\"depth_records\":%llu,"
				       "\"depth_bytes\":%llu,\"ring_full\":%llu,\"corrupt\":%s}",
				       i ? "," : "", rs[i].ring, rs[i].state, ring_state(rs[i].state), rs[i].producer_pid,
				       rs[i].producer_alive ? "true" : "false", (unsigned long long)rs[i].records,
				       (unsigned long long)rs[i].delivered, (unsigned long long)rs[i].depth_records,
				       (unsigned long long)rs[i].depth_bytes, (unsigned long long)rs[i].ring_full,
				       rs[i].corrupt ? "true" : "false");
			printf("]");
		}
		printf("}\n");
	} else {
		printf("L2%s%s%s%s\n", model ? " stage " : "", model ? model : "", model ? "/" : "", model ? state : "");
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			printf("  %-22s %llu\n", names[i], (unsigned long long)v[i]);
		if (have_ps)
			printf("promotion\n  observations %u/%u, claims %u, considered %llu, promoted %llu, evicted %llu, "
			       "expired %llu, repairs %llu\n",
			       ps.observations, ps.capacity, ps.claims, (unsigned long long)ps.considered,
			       (unsigned long long)ps.promoted, (unsigned long long)ps.evicted, (unsigned long long)ps.expired,
			       (unsigned long long)ps.repairs);
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
	}
	free(rs);
	return EXIT_OK;
}
