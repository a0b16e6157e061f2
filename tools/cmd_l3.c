/*
 * tools/cmd_l3.c — `stagecache l3 put|ls|stats|verify|locate|janitor DIR ...`: the durable L3 store.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "l2cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stagecache l3 put DIR --ns NS --tokens 1,2,3|@file --kind full_state|recurrent_only --file PAYLOAD\n"
		"                             [--model M] [--state S] [--budget SIZE] [--min-free SIZE] [--json]\n"
		"       stagecache l3 put DIR ... --kind kv_recurrent [--kv-file F --desc-json F] [--recurrent-file F]\n"
		"       stagecache l3 ls DIR [--json]\n"
		"       stagecache l3 stats DIR [--json]\n"
		"       stagecache l3 verify DIR [--json]\n"
		"       stagecache l3 locate DIR --ns NS --tokens 1,2,3|@file [--json]\n"
		"       stagecache l3 janitor DIR [--budget SIZE] [--full] [--wait] [--loop SECONDS [--count N]] [--json]\n"
		"Every action also takes --host ID (this host's identity in a shared DIR; default\n"
		"/etc/machine-id) and --shared (DIR is shared by several hosts; recorded in DIR, and implied\n"
		"on CephFS).\n\n"
		"The durable L3 store: one object per payload digest under DIR/objects, a prefix index\n"
		"(namespace, tokens) -> digest, quarantine/ for objects that failed verification.\n"
		"  put     write a payload through to disk (fsync'd; idempotent) and index its prefix\n"
		"  ls      list the objects (headers are checked)\n"
		"  stats   counters shared by every process using DIR\n"
		"  verify  read every object and check its digest; bad ones are listed and quarantined (exit 1)\n"
		"  locate  the longest stored prefix of the tokens\n"
		"  janitor one pass of budget eviction and cleanup, if no other process (on any host) holds\n"
		"          the janitor lease (exit 1 and who holds it, unless --wait); --full also checks every\n"
		"          header and drops prefix entries naming missing objects; --loop S keeps the lease and\n"
		"          runs a pass every S seconds (a standby on another host takes over when it dies)\n"
		"Opening DIR reconciles it (stale temp files removed, bad headers quarantined), except in a\n"
		"shared DIR, where that is the janitor's work (l3 janitor --full).\n");
}

static int parse_kind(const char *s, uint32_t *k)
{
	if (!strcmp(s, "full_state") || !strcmp(s, "full"))
		*k = SC_PAYLOAD_FULL_STATE;
	else if (!strcmp(s, "recurrent_only") || !strcmp(s, "recurrent"))
		*k = SC_PAYLOAD_RECURRENT_ONLY;
	else if (!strcmp(s, "kv_recurrent") || !strcmp(s, "kv"))
		*k = SC_PAYLOAD_KV_RECURRENT;
	else
		return -1;
	return 0;
}

static void print_loc(const struct sc_location *l, int json)
{
	char d[SC_DIGEST_HEX_LEN + 1];
	sc_digest_format(l->digest, d);
	if (json)
		printf("{\"token_count\":%u,\"digest\":\"%s\",\"kind\":\"%s\",\"payload_bytes\":%llu,\"sections\":[%llu,%llu],"
		       "\"file_bytes\":%llu,\"kv_desc\":%s}\n",
		       l->token_count, d, l2cli_kind_name(l->kind), (unsigned long long)l->payload_bytes,
		       (unsigned long long)l->sec_len[0], (unsigned long long)l->sec_len[1],
		       (unsigned long long)l->file_bytes, l->has_kv_desc ? "true" : "false");
	else
		printf("tokens %u  digest %s  kind %s  bytes %llu\n", l->token_count, d, l2cli_kind_name(l->kind),
		       (unsigned long long)l->payload_bytes);
}

static int do_put(const char *dir, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ns", required_argument, 0, 'n' },        { "tokens", required_argument, 0, 't' },
		{ "kind", required_argument, 0, 'k' },      { "file", required_argument, 0, 'f' },
		{ "kv-file", required_argument, 0, 'K' },   { "recurrent-file", required_argument, 0, 'R' },
		{ "desc-json", required_argument, 0, 'D' }, { "model", required_argument, 0, 'm' },
		{ "state", required_argument, 0, 's' },     { "budget", required_argument, 0, 'b' },
		{ "min-free", required_argument, 0, 'F' },  { "json", no_argument, 0, 'j' },
		{ "host", required_argument, 0, 'H' },      { "shared", no_argument, 0, 'S' },
		{ "help", no_argument, 0, 'h' },            { 0, 0, 0, 0 },
	};
	const char *ns = "", *tspec = NULL, *kind_s = NULL, *file = NULL, *kvf = NULL, *recf = NULL, *descf = NULL;
	struct sc_l3_put_args a = { 0 };
	struct sc_l3_opts o = { 0 };
	int json = 0, c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': ns = optarg; break;
		case 't': tspec = optarg; break;
		case 'k': kind_s = optarg; break;
		case 'f': file = optarg; break;
		case 'K': kvf = optarg; break;
		case 'R': recf = optarg; break;
		case 'D': descf = optarg; break;
		case 'm': a.model_identity = optarg; break;
		case 's': a.state_identity = optarg; break;
		case 'b':
			if (cli_parse_size(optarg, &o.budget_bytes))
				return cli_usage_error("l3", "bad --budget '%s'", optarg);
			break;
		case 'F':
			if (cli_parse_size(optarg, &o.min_free_bytes))
				return cli_usage_error("l3", "bad --min-free '%s'", optarg);
			break;
		case 'j': json = 1; break;
		case 'H': o.host_id = optarg; break;
		case 'S': o.flags |= SC_L3_OPEN_SHARED; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("l3", "unknown option");
		}
	}
	if (optind != argc)
		return cli_usage_error("l3", "unexpected argument '%s'", argv[optind]);
	if (!tspec || !kind_s)
		return cli_usage_error("l3", "put needs --tokens and --kind");
	uint32_t kind;
	if (parse_kind(kind_s, &kind))
		return cli_usage_error("l3", "unknown --kind '%s' (full_state, recurrent_only, kv_recurrent)", kind_s);
	if (kind == SC_PAYLOAD_KV_RECURRENT ? (file != NULL || (!kvf && !recf)) : (!file || kvf || recf || descf))
		return cli_usage_error("l3", kind == SC_PAYLOAD_KV_RECURRENT
						     ? "kv_recurrent takes --kv-file/--recurrent-file (and --desc-json), not --file"
						     : "this kind takes --file only");
	int32_t *tokens = NULL;
	size_t n = 0;
	int ret = l2cli_parse_tokens("l3", tspec, &tokens, &n);
	if (ret)
		return ret;
	ret = EXIT_FAIL;
	struct l2cli_payload pl;
	int rc;
	struct sc_l3 *l3 = NULL;
	if (l2cli_load_payload("l3", kind, kind == SC_PAYLOAD_KV_RECURRENT ? kvf : file, recf, descf, &pl))
		goto cleanup;
	if (n > UINT32_MAX) {
		cli_fail("l3", 0, "too many tokens");
		goto cleanup;
	}
	a.ns = ns, a.tokens = tokens, a.token_count = (uint32_t)n, a.payload = &pl.p;
	if ((rc = sc_l3_open(dir, &o, &l3))) {
		cli_fail("l3", rc, "cannot open L3 directory %s", dir);
		goto cleanup;
	}
	struct sc_location loc;
	rc = sc_l3_put(l3, &a, &loc);
	if (rc) {
		cli_fail("l3", rc, "put refused%s", rc == -EINVAL ? " (empty payload, or sections and descriptor disagree)" : "");
		goto cleanup;
	}
	print_loc(&loc, json);
	ret = EXIT_OK;
cleanup:
	sc_l3_close(l3);
	free(tokens);
	l2cli_payload_free(&pl);
	return ret;
}

static int print_obj(const struct sc_l3_object_info *in, void *ctx)
{
	int json = *(int *)ctx;
	char d[SC_DIGEST_HEX_LEN + 1];
	sc_digest_format(in->digest, d);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	double age = ((double)ts.tv_sec * 1e9 + (double)ts.tv_nsec - (double)in->mtime_ns) / 1e9;
	if (json) {
		printf("{\"digest\":\"%s\",\"valid\":%s,\"kind\":\"%s\",\"token_count\":%u,\"payload_bytes\":%llu,"
		       "\"file_bytes\":%llu,\"last_use_age_s\":%.1f,\"ns\":",
		       d, in->valid ? "true" : "false", l2cli_kind_name(in->kind), in->token_count,
		       (unsigned long long)in->payload_bytes, (unsigned long long)in->file_bytes, age);
		cli_json_str(stdout, in->ns);
		printf(",\"model\":");
		cli_json_str(stdout, in->model_identity);
		printf(",\"state\":");
		cli_json_str(stdout, in->state_identity);
		printf("}\n");
	} else {
		char h[32];
		printf("%s  %-14s %7u tok  %10s  %-8s ns=%s\n", d, in->valid ? l2cli_kind_name(in->kind) : "INVALID",
		       in->token_count, cli_human(in->payload_bytes, h, sizeof(h)), in->valid ? "ok" : "BAD", in->ns);
	}
	return 0;
}

/* verify, text mode: one line per bad object. sc_l3_verify reports only ->valid; the header fields
 * are filled in only when the header parsed (kind 0 is never valid), which tells a bad header from a
 * payload that does not hash to its digest. */
static int print_bad(const struct sc_l3_object_info *in, void *ctx)
{
	(void)ctx;
	if (in->valid)
		return 0;
	char d[SC_DIGEST_HEX_LEN + 1], h[32];
	sc_digest_format(in->digest, d);
	if (in->kind)
		printf("%s  BAD  payload does not match its digest (%s, %u tok, %s, ns=%s)\n", d,
		       l2cli_kind_name(in->kind), in->token_count, cli_human(in->payload_bytes, h, sizeof(h)), in->ns);
	else
		printf("%s  BAD  header unreadable or invalid (%s on disk)\n", d, cli_human(in->file_bytes, h, sizeof(h)));
	return 0;
}

static int do_stats(struct sc_l3 *l3, int json)
{
	struct sc_l3_stats s;
	struct sc_l3_janitor_status js;
	int rc = sc_l3_stats(l3, &s);
	if (rc)
		return cli_fail("l3", rc, "stats");
	if ((rc = sc_l3_janitor_status(l3, &js)) && rc != -EBADMSG)
		return cli_fail("l3", rc, "janitor status");
	if (json) {
		printf("{\"objects\":%llu,\"bytes\":%llu,\"fills\":%llu,\"fill_bytes\":%llu,\"fill_ns\":%llu,"
		       "\"verify_failures\":%llu,\"quarantined\":%llu,\"evictions\":%llu,\"write_refusals\":%llu,"
		       "\"puts\":%llu,\"put_dedup\":%llu,\"dio_mem_align\":%u,\"dio_offset_align\":%u,\"shared\":%s,"
		       "\"host\":\"%s\",\"janitor_epoch\":%llu,\"janitor_pass_ns\":%llu,\"janitor_evictions\":%llu,"
		       "\"janitor_host\":\"%s\"}\n",
		       (unsigned long long)s.objects, (unsigned long long)s.bytes, (unsigned long long)s.fills,
		       (unsigned long long)s.fill_bytes, (unsigned long long)s.fill_ns, (unsigned long long)s.verify_failures,
		       (unsigned long long)s.quarantined, (unsigned long long)s.evictions,
		       (unsigned long long)s.write_refusals, (unsigned long long)s.puts, (unsigned long long)s.put_dedup,
		       s.dio_mem_align, s.dio_offset_align, js.shared ? "true" : "false", js.host_id,
		       (unsigned long long)js.epoch, (unsigned long long)js.pass_end_ns,
		       (unsigned long long)js.evictions, js.janitor_host);
	} else {
		char h[32];
		printf("objects          %llu\n", (unsigned long long)s.objects);
		printf("bytes            %s\n", cli_human(s.bytes, h, sizeof(h)));
		printf("fills            %llu (%s, %.3f ms mean)\n", (unsigned long long)s.fills,
		       cli_human(s.fill_bytes, h, sizeof(h)), s.fills ? (double)s.fill_ns / (double)s.fills / 1e6 : 0.0);
		printf("verify_failures  %llu\nquarantined      %llu\nevictions        %llu\nwrite_refusals   %llu\n",
		       (unsigned long long)s.verify_failures, (unsigned long long)s.quarantined,
		       (unsigned long long)s.evictions, (unsigned long long)s.write_refusals);
		printf("puts             %llu (+%llu already present)\n", (unsigned long long)s.puts,
		       (unsigned long long)s.put_dedup);
		if (s.dio_mem_align)
			printf("O_DIRECT         memory align %u, offset align %u\n", s.dio_mem_align, s.dio_offset_align);
		else
			printf("O_DIRECT         not available on this filesystem\n");
		printf("mode             %s (host %s)\n", js.shared ? "shared by several hosts" : "local", js.host_id);
		if (js.epoch) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			double age = ((double)ts.tv_sec * 1e9 + (double)ts.tv_nsec - (double)js.pass_end_ns) / 1e9;
			printf("janitor          epoch %llu, host %s, last pass %.1f s ago, %llu evictions in all\n",
			       (unsigned long long)js.epoch, js.janitor_host, js.pass_end_ns ? age : -1.0,
			       (unsigned long long)js.evictions);
		} else {
			printf("janitor          no pass yet\n");
		}
		if (js.shared)
			printf("(counters are this host's; objects and bytes as of the last janitor pass)\n");
	}
	return EXIT_OK;
}

static int do_locate(struct sc_l3 *l3, int argc, char **argv, int json)
{
	const char *ns = "", *tspec = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--ns") && i + 1 < argc)
			ns = argv[++i];
		else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
			tspec = argv[++i];
		else if (strcmp(argv[i], "--json"))
			return cli_usage_error("l3", "unknown argument '%s'", argv[i]);
	}
	if (!tspec)
		return cli_usage_error("l3", "locate needs --tokens");
	int32_t *tokens;
	size_t n;
	int ret = l2cli_parse_tokens("l3", tspec, &tokens, &n);
	if (ret)
		return ret;
	struct sc_location loc;
	int rc = n && n <= UINT32_MAX ? sc_l3_locate_longest(l3, ns, tokens, (uint32_t)n, &loc) : -EINVAL;
	free(tokens);
	if (rc < 0)
		return cli_fail("l3", rc, "locate");
	if (rc == 0) {
		if (json)
			printf("{\"token_count\":0}\n");
		else
			printf("no stored prefix\n");
		return EXIT_FAIL;
	}
	print_loc(&loc, json);
	return EXIT_OK;
}

static volatile sig_atomic_t janitor_stop;

static void on_stop(int sig)
{
	(void)sig;
	janitor_stop = 1;
}

static void print_janitor(const struct sc_l3_janitor_report *r, int json)
{
	char h[32];
	if (json)
		printf("{\"epoch\":%llu,\"objects\":%llu,\"bytes\":%llu,\"evicted\":%llu,\"evicted_bytes\":%llu,"
		       "\"stale_temps\":%llu,\"accesses\":%llu,\"quarantined\":%llu,\"dropped\":%llu,"
		       "\"skipped_recent\":%llu,\"pass_ms\":%.1f}\n",
		       (unsigned long long)r->epoch, (unsigned long long)r->objects, (unsigned long long)r->bytes,
		       (unsigned long long)r->evicted, (unsigned long long)r->evicted_bytes,
		       (unsigned long long)r->stale_temps, (unsigned long long)r->accesses,
		       (unsigned long long)r->quarantined, (unsigned long long)r->dropped,
		       (unsigned long long)r->skipped_recent, (double)r->pass_ns / 1e6);
	else
		printf("janitor epoch %llu: %llu objects, %s; evicted %llu (%llu kept: used since listed); "
		       "removed %llu stale temp files; merged %llu uses; quarantined %llu, dropped %llu prefix "
		       "entries; %.1f ms\n",
		       (unsigned long long)r->epoch, (unsigned long long)r->objects, cli_human(r->bytes, h, sizeof(h)),
		       (unsigned long long)r->evicted, (unsigned long long)r->skipped_recent,
		       (unsigned long long)r->stale_temps, (unsigned long long)r->accesses,
		       (unsigned long long)r->quarantined, (unsigned long long)r->dropped, (double)r->pass_ns / 1e6);
	fflush(stdout);
}

static int do_janitor(const char *dir, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "budget", required_argument, 0, 'b' }, { "full", no_argument, 0, 'f' },
		{ "wait", no_argument, 0, 'w' },         { "loop", required_argument, 0, 'l' },
		{ "count", required_argument, 0, 'c' },  { "host", required_argument, 0, 'H' },
		{ "shared", no_argument, 0, 'S' },       { "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },         { 0, 0, 0, 0 },
	};
	struct sc_l3_opts o = { .flags = SC_L3_OPEN_NO_RECONCILE };
	uint32_t flags = 0;
	uint64_t loop_s = 0, count = 0;
	int json = 0, c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (cli_parse_size(optarg, &o.budget_bytes))
				return cli_usage_error("l3", "bad --budget '%s'", optarg);
			break;
		case 'f': flags |= SC_L3_JANITOR_FULL; break;
		case 'w': flags |= SC_L3_JANITOR_WAIT; break;
		case 'l':
			if (cli_parse_u64(optarg, 86400, &loop_s) || !loop_s)
				return cli_usage_error("l3", "bad --loop '%s' (seconds, 1-86400)", optarg);
			break;
		case 'c':
			if (cli_parse_u64(optarg, UINT32_MAX, &count) || !count)
				return cli_usage_error("l3", "bad --count '%s'", optarg);
			break;
		case 'H': o.host_id = optarg; break;
		case 'S': o.flags |= SC_L3_OPEN_SHARED; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("l3", "unknown option");
		}
	}
	if (optind != argc)
		return cli_usage_error("l3", "unexpected argument '%s'", argv[optind]);
	if (count && !loop_s)
		return cli_usage_error("l3", "--count goes with --loop");
	struct sc_l3 *l3;
	int rc = sc_l3_open(dir, &o, &l3);
	if (rc)
		return cli_fail("l3", rc, "cannot open L3 directory %s%s", dir,
				rc == -EINVAL && o.host_id ? " (--host: 1-64 of A-Z a-z 0-9 _ -)" : "");
	struct sigaction sa = { .sa_handler = on_stop };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	int ret = EXIT_OK;
	if (loop_s)
		flags |= SC_L3_JANITOR_KEEP | SC_L3_JANITOR_WAIT;
	for (uint64_t n = 0; !janitor_stop; n++) {
		struct sc_l3_janitor_report r;
		rc = sc_l3_janitor(l3, flags, &r);
		if (rc == 0) {
			print_janitor(&r, json);
		} else if (rc == -EBUSY) {
			struct sc_l3_janitor_status st;
			sc_l3_janitor_status(l3, &st);
			fprintf(stderr, "stagecache l3: the janitor lease is held by another process (last holder: host %s, epoch %llu)\n",
				st.janitor_host[0] ? st.janitor_host : "?", (unsigned long long)st.epoch);
			ret = EXIT_FAIL;
			break;
		} else if (rc == -ESTALE && loop_s) {
			fprintf(stderr, "stagecache l3: lost the janitor lease; waiting to be elected again\n");
		} else {
			ret = cli_fail("l3", rc, "janitor pass");
			if (!loop_s || rc != -EINTR)
				break;
		}
		if (!loop_s || (count && n + 1 >= count))
			break;
		for (uint64_t t = 0; t < loop_s * 10 && !janitor_stop; t++)
			usleep(100000);
	}
	sc_l3_close(l3);
	return ret;
}

int cmd_l3(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	const char *verb = argv[1];
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return EXIT_OK;
		}
	if (strcmp(verb, "put") && strcmp(verb, "ls") && strcmp(verb, "stats") && strcmp(verb, "verify") &&
	    strcmp(verb, "locate") && strcmp(verb, "janitor"))
		return cli_usage_error("l3", "unknown action '%s' (put, ls, stats, verify, locate, janitor)", verb);
	if (argc < 3 || argv[2][0] == '-')
		return cli_usage_error("l3", "missing DIR");
	const char *dir = argv[2];
	if (!strcmp(verb, "put") || !strcmp(verb, "janitor")) {
		optind = 1;
		return (!strcmp(verb, "put") ? do_put : do_janitor)(dir, argc - 2, argv + 2);
	}
	/* ls and verify report bad objects themselves: no silent quarantine at open */
	struct sc_l3_opts o = { .flags = (!strcmp(verb, "ls") || !strcmp(verb, "verify")) ? SC_L3_OPEN_NO_RECONCILE : 0 };
	int json = 0, nrest = 0;
	char **rest = calloc((size_t)argc, sizeof(*rest));
	if (!rest)
		return cli_fail("l3", -ENOMEM, "arguments");
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--shared")) {
			o.flags |= SC_L3_OPEN_SHARED;
		} else if (!strcmp(argv[i], "--host")) {
			if (i + 1 >= argc) {
				free(rest);
				return cli_usage_error("l3", "--host needs an ID");
			}
			o.host_id = argv[++i];
		} else if (strcmp(verb, "locate")) {
			free(rest);
			return cli_usage_error("l3", "unknown argument '%s'", argv[i]);
		} else {
			rest[nrest++] = argv[i];
		}
	}
	struct sc_l3 *l3;
	int rc = sc_l3_open(dir, &o, &l3);
	if (rc) {
		free(rest);
		return cli_fail("l3", rc, "cannot open L3 directory %s%s", dir,
				rc == -EINVAL && o.host_id ? " (--host: 1-64 of A-Z a-z 0-9 _ -)" : "");
	}
	int ret = EXIT_OK;
	if (!strcmp(verb, "ls")) {
		rc = sc_l3_list(l3, print_obj, &json);
		if (rc < 0)
			ret = cli_fail("l3", rc, "ls");
	} else if (!strcmp(verb, "stats")) {
		ret = do_stats(l3, json);
	} else if (!strcmp(verb, "verify")) {
		int total = sc_l3_list(l3, NULL, NULL);
		rc = sc_l3_verify(l3, json ? print_obj : print_bad, &json);
		if (rc < 0)
			ret = cli_fail("l3", rc, "verify");
		else if (!json)
			printf("%d objects checked, %d bad (quarantined)\n", total < 0 ? 0 : total, rc);
		if (rc > 0)
			ret = EXIT_FAIL;
	} else {
		ret = do_locate(l3, nrest, rest, json);
	}
	sc_l3_close(l3);
	free(rest);
	return ret;
}
