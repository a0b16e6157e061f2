/*
 * tools/cli/cmd_l3.c — `stagecache l3 init|put|ls|stats|verify|locate|janitor DIR ...`: the durable L3 store.
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
		"                             [--model M] [--state S] [--cost-ns NS] [--budget SIZE]\n"
		"                             [--min-free SIZE] [--mode MODE] [--group GROUP] [--json]\n"
		"       stagecache l3 put DIR ... --kind kv_recurrent [--kv-file F --desc-json F] [--recurrent-file F]\n"
		"       stagecache l3 init DIR [--segment-bytes SIZE]\n"
		"       stagecache l3 ls DIR [--prefixes] [--json]\n"
		"       stagecache l3 stats DIR [--json]\n"
		"       stagecache l3 verify DIR [--mode MODE --group G] [--json]\n"
		"       stagecache l3 locate DIR [--ns NS] --tokens 1,2,3|@file [--json]\n"
		"       stagecache l3 janitor DIR [--budget SIZE] [--full] [--wait] [--loop SECONDS [--count N]]\n"
		"                                 [--mode MODE] [--group GROUP] [--json]\n"
		"Every action also takes --host ID (this host's identity in a shared DIR; default\n"
		"/etc/machine-id) and --shared (DIR is shared by several hosts; recorded in DIR, and implied\n"
		"on CephFS).\n\n"
		"The durable L3 store: one object per payload digest under DIR/objects, a prefix index\n"
		"(namespace, tokens) -> digest, quarantine/ for objects that failed verification.\n"
		"  put     write a payload through to disk (fsync'd; idempotent) and index its prefix;\n"
		"          DIR is created if missing. --mode (octal, default 0600) and --group give the\n"
		"          files and directories it creates to a group (e.g. --mode 0660 --group G: every\n"
		"          member of G can then put, restore from, and reconcile DIR). --cost-ns records what\n"
		"          computing the prefix costs (ns): restores carry it into L2, whose policy keeps\n"
		"          what saves the most compute per byte\n"
		"  init    create DIR (or open it) and record its options: --segment-bytes SIZE (a multiple\n"
		"          of 4K, 64K..1G; 0: off, the default) stores payloads above SIZE as content-addressed\n"
		"          segments under DIR/seg, each distinct segment once, the object a manifest\n"
		"  ls      list the objects (headers are checked); --prefixes lists the prefix entries\n"
		"          instead: prefix key, object digest, namespace, token count, whether the object is\n"
		"          there, and (--json) the token ids\n"
		"  stats   counters shared by every process using DIR\n"
		"  verify  read every object and check its digest; bad ones are listed and quarantined (exit 1)\n"
		"  locate  the longest stored prefix of the tokens\n"
		"  janitor one pass of budget eviction and cleanup, if no other process (on any host) holds\n"
		"          the janitor lease (exit 1 and who holds it, unless --wait); --full also checks every\n"
		"          header and drops prefix entries naming missing objects; --loop S keeps the lease and\n"
		"          runs a pass every S seconds (a standby on another host takes over when it dies);\n"
		"          --mode/--group as for put, for the files it creates (lease, log, LRU table)\n"
		"Only init and put create DIR. Opening DIR reconciles it (stale temp files removed, bad headers\n"
		"quarantined; above 1024 objects a bounded step per open), except for ls and verify, and in a\n"
		"shared DIR, where that is the janitor's work (l3 janitor --full).\n");
}

static void print_loc(const struct sc_location *l, int json)
{
	char d[SC_DIGEST_HEX_LEN + 1];
	sc_digest_format(l->digest, d);
	if (json)
		printf("{\"token_count\":%u,\"digest\":\"%s\",\"kind\":\"%s\",\"payload_bytes\":%llu,\"sections\":[%llu,%llu],"
		       "\"file_bytes\":%llu,\"cost_ns\":%llu,\"kv_desc\":%s}\n",
		       l->token_count, d, l2cli_kind_name(l->kind), (unsigned long long)l->payload_bytes,
		       (unsigned long long)l->sec_len[0], (unsigned long long)l->sec_len[1],
		       (unsigned long long)l->file_bytes, (unsigned long long)l->cost_ns, l->has_kv_desc ? "true" : "false");
	else
		printf("tokens %u  digest %s  kind %s  bytes %llu\n", l->token_count, d, l2cli_kind_name(l->kind),
		       (unsigned long long)l->payload_bytes);
}

/* --mode of put and janitor: octal, at most 0666, the owner can read and write. */
static int mode_opt(const char *cmd, const char *arg, void *dst)
{
	uint32_t *mode = dst;
	if (cli_parse_mode(cmd, "--mode", arg, 0666, mode))
		return EXIT_USAGE;
	if ((*mode & 0600) == 0600)
		return 0;
	return cli_usage_error(cmd, "--mode %04o: the owner needs read and write (0600)", *mode);
}

/* The option-table rows (tools/common/cli.h) of the store options put and janitor share, into the
 * struct sc_l3_opts @o: --budget, --mode, --group, --host, --shared. */
#define L3_STORE_OPTS(o)                                                                           \
	{ "budget", CLI_SIZE, &(o)->budget_bytes, 0, UINT64_MAX, .want = "a size such as 10G" },   \
	{ "mode", CLI_FN, &(o)->file_mode, .fn = mode_opt },                                       \
	{ "group", CLI_GROUP, &(o)->gid },                                                         \
	{ "host", CLI_STR, &(o)->host_id },                                                        \
	{ "shared", CLI_BITS, &(o)->flags, .max = SC_L3_OPEN_SHARED }

/* Write the payload of @a through to the store in @dir (opened with @o) and print where it is; an
 * exit status. */
static int put(const char *dir, const struct sc_l3_opts *o, const struct sc_l3_put_args *a, uint64_t cost, int json)
{
	char why[256], hb[32];
	if (!a->payload->sec_len[0] && !a->payload->sec_len[1])
		return cli_fail("l3", 0, "put refused: %s", l2cli_explain_payload(a->payload, why, sizeof(why)));
	struct sc_l3 *l3;
	int rc = sc_l3_open(dir, o, &l3);
	if (rc)
		return l3cli_open_error("l3", rc, dir, o);
	struct sc_location loc;
	rc = sc_l3_put_cost(l3, a, cost, &loc);
	sc_l3_close(l3);
	if (rc == -EINVAL)
		return cli_fail("l3", 0, "put refused: %s", l2cli_explain_payload(a->payload, why, sizeof(why)));
	if (rc == -E2BIG)
		return cli_fail("l3", 0, "put refused: the object is larger than the budget (--budget %s)",
				cli_human(o->budget_bytes, hb, sizeof(hb)));
	if (rc == -ENOSPC)
		return cli_fail("l3", 0, "put refused: not enough free disk space in %s (or below --min-free)", dir);
	if (rc)
		return cli_fail("l3", 0, "put into %s failed: %s", dir, strerror(-rc));
	print_loc(&loc, json);
	return EXIT_OK;
}

static int do_put(int argc, char **argv)
{
	const char *ns = "", *tspec = NULL, *kind_s = NULL, *file = NULL, *kvf = NULL, *recf = NULL, *descf = NULL, *dir;
	struct sc_l3_put_args a = { 0 };
	struct sc_l3_opts o = { 0 };
	int json = 0;
	uint64_t cost = 0;
	const struct cli_opt opts[] = {
		L3_STORE_OPTS(&o),
		{ "cost-ns", CLI_U64, &cost, 0, UINT64_MAX, .want = "a number of nanoseconds" },
		{ "ns", CLI_STR, &ns },                 { "tokens", CLI_STR, &tspec },
		{ "kind", CLI_STR, &kind_s },           { "file", CLI_STR, &file },
		{ "kv-file", CLI_STR, &kvf },           { "recurrent-file", CLI_STR, &recf },
		{ "desc-json", CLI_STR, &descf },       { "model", CLI_STR, &a.model_identity },
		{ "state", CLI_STR, &a.state_identity }, { "json", CLI_FLAG, &json },
		{ "min-free", CLI_SIZE, &o.min_free_bytes, 0, UINT64_MAX, .want = "a size such as 1G" },
		CLI_OPERAND("DIR", &dir),
	};
	int ret = cli_parse_opts("l3", argc, argv, opts, usage);
	if (ret)
		return ret < 0 ? EXIT_OK : ret;
	if ((ret = cli_check_identity("l3", "--ns", ns, SC_L3_STR_MAX, 1)) ||
	    (a.model_identity && (ret = cli_check_identity("l3", "--model", a.model_identity, SC_L3_STR_MAX, 1))) ||
	    (a.state_identity && (ret = cli_check_identity("l3", "--state", a.state_identity, SC_L3_STR_MAX, 1))))
		return ret;
	if (!tspec || !kind_s)
		return cli_usage_error("l3", "put needs --tokens and --kind");
	uint32_t kind;
	if ((ret = l2cli_payload_kind("l3", kind_s, file, kvf, recf, descf, &kind)))
		return ret;
	int32_t *tokens = NULL;
	size_t n = 0;
	if ((ret = l2cli_parse_tokens("l3", tspec, &tokens, &n)))
		return ret;
	if (n > UINT32_MAX) {
		free(tokens);
		return cli_usage_error("l3", "--tokens: more than %u tokens", UINT32_MAX);
	}
	struct l2cli_payload pl;
	if ((ret = l2cli_load_payload("l3", kind, kind == SC_PAYLOAD_KV_RECURRENT ? kvf : file, recf, descf, &pl)) ==
	    EXIT_OK) {
		a.ns = ns, a.tokens = tokens, a.token_count = (uint32_t)n, a.payload = &pl.p;
		ret = put(dir, &o, &a, cost, json);
	}
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
		       "\"file_bytes\":%llu,\"segments\":%u,\"segments_missing\":%u,\"last_use_age_s\":%.1f,\"ns\":",
		       d, in->valid ? "true" : "false", l2cli_kind_name(in->kind), in->token_count,
		       (unsigned long long)in->payload_bytes, (unsigned long long)in->file_bytes, in->segments,
		       in->segments_missing, age);
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
	if (in->segments_missing)
		printf("%s  BAD  its manifest names %u missing or cut segment%s of %u (kept: a miss until a put of it "
		       "writes them again; reconciliation removes it)\n", d, in->segments_missing,
		       in->segments_missing == 1 ? "" : "s", in->segments);
	else if (in->kind)
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
		       "\"puts\":%llu,\"put_dedup\":%llu,\"fills_kept\":%llu,\"dio_mem_align\":%u,\"dio_offset_align\":%u,\"shared\":%s,"
		       "\"host\":\"%s\",\"janitor_epoch\":%llu,\"janitor_pass_ns\":%llu,\"janitor_evictions\":%llu,"
		       "\"janitor_host\":\"%s\",\"logical_bytes\":%llu,\"physical_bytes\":%llu,\"saved_bytes\":%llu,"
		       "\"segments\":%llu,\"segment_bytes\":%llu,\"fill_bytes_from_l2\":%llu,\"identity_mismatches\":%llu}\n",
		       (unsigned long long)s.objects, (unsigned long long)s.bytes, (unsigned long long)s.fills,
		       (unsigned long long)s.fill_bytes, (unsigned long long)s.fill_ns, (unsigned long long)s.verify_failures,
		       (unsigned long long)s.quarantined, (unsigned long long)s.evictions,
		       (unsigned long long)s.write_refusals, (unsigned long long)s.puts, (unsigned long long)s.put_dedup,
		       (unsigned long long)s.fills_kept, s.dio_mem_align, s.dio_offset_align, js.shared ? "true" : "false", js.host_id,
		       (unsigned long long)js.epoch, (unsigned long long)js.pass_end_ns,
		       (unsigned long long)js.evictions, js.janitor_host, (unsigned long long)s.logical_bytes,
		       (unsigned long long)s.physical_bytes, (unsigned long long)s.saved_bytes,
		       (unsigned long long)s.segments, (unsigned long long)s.segment_bytes,
		       (unsigned long long)s.fill_bytes_from_l2, (unsigned long long)s.identity_mismatches);
	} else {
		char h[32];
		printf("objects          %llu\n", (unsigned long long)s.objects);
		printf("bytes            %s\n", cli_human(s.bytes, h, sizeof(h)));
		char l[32], sv[32], sg[32];
		printf("logical          %s, physical %s, saved %s\n", cli_human(s.logical_bytes, l, sizeof(l)),
		       cli_human(s.physical_bytes, h, sizeof(h)), cli_human(s.saved_bytes, sv, sizeof(sv)));
		if (s.segment_bytes || s.segments)
			printf("segments         %llu files, new puts cut at %s; fills copied %s of them from L2\n",
			       (unsigned long long)s.segments, s.segment_bytes ? cli_human(s.segment_bytes, sg, sizeof(sg)) : "- (off)",
			       cli_human(s.fill_bytes_from_l2, l, sizeof(l)));
		printf("fills            %llu (%s, %.3f ms mean; %llu from files kept open)\n", (unsigned long long)s.fills,
		       cli_human(s.fill_bytes, h, sizeof(h)), s.fills ? (double)s.fill_ns / (double)s.fills / 1e6 : 0.0,
		       (unsigned long long)s.fills_kept);
		printf("verify_failures  %llu\nquarantined      %llu\nevictions        %llu\nwrite_refusals   %llu\n",
		       (unsigned long long)s.verify_failures, (unsigned long long)s.quarantined,
		       (unsigned long long)s.evictions, (unsigned long long)s.write_refusals);
		printf("identity_mismatches %llu (fills refused: another model's or state's object)\n",
		       (unsigned long long)s.identity_mismatches);
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

static int do_locate(struct sc_l3 *l3, const char *ns, const char *tspec, int json)
{
	int32_t *tokens;
	size_t n;
	int ret = l2cli_parse_tokens("l3", tspec, &tokens, &n);
	if (ret)
		return ret;
	struct sc_location loc;
	int rc = n <= UINT32_MAX ? sc_l3_locate_longest(l3, ns, tokens, (uint32_t)n, &loc) : -E2BIG;
	free(tokens);
	if (rc == -E2BIG)
		return cli_usage_error("l3", "--tokens: more than %u tokens", UINT32_MAX);
	if (rc < 0)
		return cli_fail("l3", 0, "locate failed: %s", strerror(-rc));
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

static int do_janitor(int argc, char **argv)
{
	/* the janitor works on a store: it creates none */
	struct sc_l3_opts o = { .flags = SC_L3_OPEN_NO_RECONCILE | SC_L3_OPEN_NO_CREATE };
	uint32_t flags = 0;
	uint64_t loop_s = 0, count = 0;
	int json = 0;
	const char *dir;
	const struct cli_opt opts[] = {
		L3_STORE_OPTS(&o),
		{ "full", CLI_BITS, &flags, .max = SC_L3_JANITOR_FULL },
		{ "wait", CLI_BITS, &flags, .max = SC_L3_JANITOR_WAIT },
		{ "loop", CLI_U64, &loop_s, 1, 86400, .want = "seconds, 1-86400" },
		{ "count", CLI_U64, &count, 1, UINT32_MAX, .want = "a count, 1-4294967295" },
		{ "json", CLI_FLAG, &json },
		CLI_OPERAND("DIR", &dir),
	};
	int rc = cli_parse_opts("l3", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (count && !loop_s)
		return cli_usage_error("l3", "--count goes with --loop");
	struct sc_l3 *l3;
	rc = sc_l3_open(dir, &o, &l3);
	if (rc)
		return l3cli_open_error("l3", rc, dir, &o);
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

static int print_prefix(const struct sc_l3_prefix_info *p, const int32_t *tokens, void *ctx)
{
	char key[SC_DIGEST_HEX_LEN + 1], dig[SC_DIGEST_HEX_LEN + 1];
	sc_digest_format(p->prefix, key);
	sc_digest_format(p->digest, dig);
	if (*(int *)ctx) {
		printf("{\"prefix\":\"%s\",\"digest\":\"%s\",\"ns\":", key, dig);
		cli_json_str(stdout, p->ns);
		printf(",\"tokens\":%u,\"object_present\":%s,\"token_ids\":[", p->token_count,
		       p->object_present ? "true" : "false");
		l2cli_print_ids(tokens, p->token_count);
		printf("]}\n");
	} else {
		printf("%s  %s  %8u  %-7s  %s\n", key, dig, p->token_count, p->object_present ? "present" : "missing",
		       cli_q(p->ns));
	}
	return 0;
}

static int do_ls_prefixes(struct sc_l3 *l3, const char *dir, int json)
{
	if (!json)
		printf("%-32s  %-32s  %8s  %-7s  %s\n", "PREFIX", "DIGEST", "TOKENS", "OBJECT", "NS");
	int rc = sc_l3_prefix_list(l3, print_prefix, &json);
	return rc < 0 ? cli_fail("l3", 0, "cannot list the prefix entries of %s: %s", dir, strerror(-rc)) : EXIT_OK;
}

static int do_ls(struct sc_l3 *l3, const char *dir, int json)
{
	int rc = sc_l3_list(l3, print_obj, &json);
	return rc < 0 ? cli_fail("l3", 0, "cannot list %s: %s", dir, strerror(-rc)) : EXIT_OK;
}

static int do_verify(struct sc_l3 *l3, const char *dir, int json)
{
	int ret = EXIT_OK, total = sc_l3_list(l3, NULL, NULL);
	int rc = sc_l3_verify(l3, json ? print_obj : print_bad, &json);
	if (rc < 0)
		ret = cli_fail("l3", 0, "cannot verify %s: %s", dir, strerror(-rc));
	else if (!json)
		printf("%d objects checked, %d bad (quarantined, or kept where segments are missing)\n",
		       total < 0 ? 0 : total, rc);
	if (rc > 0)
		ret = cli_fail("l3", 0, "%d bad object%s in %s (listed above)", rc, rc == 1 ? "" : "s", dir);
	return ret;
}

/* init: DIR created (or opened) and --segment-bytes recorded in it. */
static int do_init(struct sc_l3 *l3, const char *dir, const char *segs, uint64_t seg_bytes, int json)
{
	int rc;
	if (segs && (rc = sc_l3_set_segment_bytes(l3, seg_bytes)))
		return cli_fail("l3", rc, "cannot record --segment-bytes in %s", dir);
	if (!json)
		printf("%s: an L3 store%s\n", dir, segs && seg_bytes ? ", segments on" : "");
	return EXIT_OK;
}

/* --segment-bytes: only init takes it; 0 (off) or a multiple of 4K from 64K to 1G. */
static int segment_opt(const char *segs, int init, uint64_t *seg_bytes)
{
	*seg_bytes = 0;
	if (segs && !init)
		return cli_usage_error("l3", "--segment-bytes: only init takes it");
	if (segs && (cli_parse_size(segs, seg_bytes) ||
		     (*seg_bytes && (*seg_bytes < (64u << 10) || *seg_bytes > (1u << 30) || *seg_bytes % 4096))))
		return cli_usage_error("l3", "--segment-bytes '%s': want 0 (off) or a multiple of 4K from 64K to 1G",
				       cli_q(segs));
	return 0;
}

/* init, ls, stats, verify and locate: their options, DIR opened (created only by init), the
 * action. */
static int do_read(const char *verb, int argc, char **argv)
{
	int locate = !strcmp(verb, "locate"), init = !strcmp(verb, "init"), json = 0, prefixes = 0;
	const char *ns = NULL, *tspec = NULL, *host = NULL, *segs = NULL, *dir;
	uint32_t shared = 0, mode = 0;
	int64_t gid = 0;
	uint64_t seg_bytes;
	const struct cli_opt opts[] = {
		{ "mode", CLI_FN, &mode, .fn = mode_opt }, { "group", CLI_GROUP, &gid },
		{ "ns", CLI_STR, &ns },                 { "tokens", CLI_STR, &tspec },
		{ "json", CLI_FLAG, &json },            { "host", CLI_STR, &host },
		{ "shared", CLI_BITS, &shared, .max = SC_L3_OPEN_SHARED },
		{ "segment-bytes", CLI_STR, &segs },
		{ "prefixes", CLI_FLAG, &prefixes },
		{ 0 },
	};
	int rc = cli_parse_opts("l3", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (prefixes && strcmp(verb, "ls"))
		return cli_usage_error("l3", "--prefixes: only ls takes it");
	if ((rc = segment_opt(segs, init, &seg_bytes)))
		return rc;
	if ((ns || tspec) && !locate)
		return cli_usage_error("l3", "%s: only locate (and put) take it", ns ? "--ns" : "--tokens");
	if ((rc = cli_operand("l3", "DIR", argc, argv, &dir)))
		return rc;
	if (locate && !tspec)
		return cli_usage_error("l3", "locate needs --tokens");
	if (ns && (rc = cli_check_identity("l3", "--ns", ns, SC_L3_STR_MAX, 1)))
		return rc;
	struct sc_l3 *l3;
	/* ls and verify report bad objects themselves: no silent quarantine at open */
	int own_check = !strcmp(verb, "ls") || !strcmp(verb, "verify");
	struct sc_l3_opts o = { .flags = (init ? 0 : SC_L3_OPEN_NO_CREATE) | (own_check ? SC_L3_OPEN_NO_RECONCILE : 0) |
					 shared,
				.host_id = host, .file_mode = mode, .gid = gid };
	if ((rc = sc_l3_open(dir, &o, &l3)))
		return l3cli_open_error("l3", rc, dir, &o);
	int ret = init                      ? do_init(l3, dir, segs, seg_bytes, json)
		  : !strcmp(verb, "ls")     ? (prefixes ? do_ls_prefixes(l3, dir, json) : do_ls(l3, dir, json))
		  : !strcmp(verb, "stats")  ? do_stats(l3, json)
		  : !strcmp(verb, "verify") ? do_verify(l3, dir, json)
					    : do_locate(l3, ns ? ns : "", tspec, json);
	sc_l3_close(l3);
	return ret;
}

int cmd_l3(int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error("l3", "missing ACTION (init, put, ls, stats, verify, locate, janitor)");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return EXIT_OK;
	}
	const char *verb = argv[1];
	if (strcmp(verb, "put") && strcmp(verb, "ls") && strcmp(verb, "stats") && strcmp(verb, "verify") &&
	    strcmp(verb, "locate") && strcmp(verb, "janitor") && strcmp(verb, "init"))
		return cli_usage_error("l3", "unknown action '%s' (init, put, ls, stats, verify, locate, janitor)",
				       cli_q(verb));
	/* ACTION's options are parsed from argv + 1 (ACTION in the place of argv[0]); DIR is what is
	 * left over, wherever it was among the options */
	if (!strcmp(verb, "put"))
		return do_put(argc - 1, argv + 1);
	if (!strcmp(verb, "janitor"))
		return do_janitor(argc - 1, argv + 1);
	return do_read(verb, argc - 1, argv + 1);
}
