/* tools/cli/cmd_fsck.c — `stagecache fsck NAME [--deep] [--repair] [--dir DIR] [--owner USER] [--json]`. */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "cli.h"

struct fsck_out {
	int json, n;
};

static void on_finding(const char *component, const char *message, int repaired, void *p)
{
	struct fsck_out *o = p;
	if (o->json) {
		printf("%s{\"component\":\"%s\",\"message\":", o->n ? "," : "", component);
		cli_json_str(stdout, message);
		printf(",\"repaired\":%s}", repaired ? "true" : "false");
	} else {
		printf("%-13s %s%s\n", component, message, repaired ? "  [repaired]" : "");
	}
	o->n++;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache fsck NAME [--deep] [--repair] [--dir DIR] [--owner USER] [--json]\n\n"
		   "Check arena NAME with everything a reader or writer validates: the header, the L2 index\n"
		   "against the heap (every allocation owned by exactly one live entry, pending reclamation or\n"
		   "a live process's reservation; free space accounted), the commit rings and every record in\n"
		   "them, the observation table and fill claims, the L3 location index, the lock words, and\n"
		   "reader slots of dead processes.\n"
		   "  --deep     also verify every L2 entry's payload digest\n"
		   "  --repair   fix what can be fixed (dead readers reaped, orphaned memory freed, broken\n"
		   "             chains and lists rebuilt, corrupted lock words and region headers rewritten)\n"
		   "             and drop what cannot (entries that fail their checks, records of a corrupted\n"
		   "             ring, entries whose payload does not match its digest: --repair implies\n"
		   "             --deep); then check again, until clean. If the arena still is not clean, it is\n"
		   "             declared unrepairable: every later open says so, and the remedy is\n"
		   "             'stagecache destroy NAME' and create.\n"
		   "  --json     one JSON object: findings and counts\n"
		   "Other processes may keep using the arena while it runs (writers wait for it); a repair of\n"
		   "lock words assumes no writer is inside the arena.\n"
		   "fsck attaches with a reader slot; when none is free (or your user holds its limit) it reads\n"
		   "the header and the reader table without one, says who holds the slots, and exits 1.\n"
		   "Exit status: 0 no problem left, 1 problems left (or fsck could not run), 2 usage error,\n"
		   "3 the arena is declared unrepairable (destroy it and create it again).\n");
}

/* The JSON object's tail: the result and the report's counts. */
static void print_json(int rc, const struct sc_fsck_report *r)
{
	printf("],\"result\":%d,\"damaged\":%s,\"problems\":%llu,\"repaired\":%llu,\"dropped\":%llu,\"entries\":%llu,"
	       "\"entry_bytes\":%llu,\"pending_bytes\":%llu,\"reserved_bytes\":%llu,\"orphan_bytes\":%llu,"
	       "\"leaked_bytes\":%llu,\"heap_used_bytes\":%llu,\"heap_free_bytes\":%llu,\"heap_blocks\":%llu,"
	       "\"digests_checked\":%llu,\"digest_failures\":%llu,\"readers_live\":%llu,\"readers_dead\":%llu,"
	       "\"rings\":%llu,\"ring_problems\":%llu,\"observations\":%llu,\"obs_problems\":%llu,"
	       "\"lock_repairs\":%llu}\n",
	       rc, rc == -ENOTRECOVERABLE ? "true" : "false", (unsigned long long)r->problems,
	       (unsigned long long)r->repaired, (unsigned long long)r->dropped, (unsigned long long)r->entries,
	       (unsigned long long)r->entry_bytes, (unsigned long long)r->pending_bytes,
	       (unsigned long long)r->reserved_bytes, (unsigned long long)r->orphan_bytes,
	       (unsigned long long)r->leaked_bytes, (unsigned long long)r->heap_used_bytes,
	       (unsigned long long)r->heap_free_bytes, (unsigned long long)r->heap_blocks,
	       (unsigned long long)r->digests_checked, (unsigned long long)r->digest_failures,
	       (unsigned long long)r->readers_live, (unsigned long long)r->readers_dead, (unsigned long long)r->rings,
	       (unsigned long long)r->ring_problems, (unsigned long long)r->observations,
	       (unsigned long long)r->obs_problems, (unsigned long long)r->lock_repairs);
}

/* The text summary of a check that ran (@rc >= 0: the problems left). */
static void print_text(const char *name, int rc, uint32_t flags, const struct sc_fsck_report *r)
{
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	printf("entries %llu (%s), pending reclamation %s, reservations %s; heap %s used, %s free in %llu blocks\n",
	       (unsigned long long)r->entries, cli_human(r->entry_bytes, b1, sizeof(b1)),
	       cli_human(r->pending_bytes, b2, sizeof(b2)), cli_human(r->reserved_bytes, b3, sizeof(b3)),
	       cli_human(r->heap_used_bytes, b4, sizeof(b4)), cli_human(r->heap_free_bytes, b5, sizeof(b5)),
	       (unsigned long long)r->heap_blocks);
	printf("leaked %llu bytes, orphaned %llu bytes; readers %llu live, %llu dead; rings %llu; observations %llu; "
	       "lock repairs so far %llu\n",
	       (unsigned long long)r->leaked_bytes, (unsigned long long)r->orphan_bytes,
	       (unsigned long long)r->readers_live, (unsigned long long)r->readers_dead, (unsigned long long)r->rings,
	       (unsigned long long)r->observations, (unsigned long long)r->lock_repairs);
	if (flags & SC_FSCK_DEEP)
		printf("digests verified %llu, failed %llu\n", (unsigned long long)r->digests_checked,
		       (unsigned long long)r->digest_failures);
	if (rc == 0)
		printf("%s: clean%s\n", name, r->repaired ? " (after repairs)" : "");
	else
		cli_fail("fsck", 0, "%s: %d problem%s left%s", name, rc, rc == 1 ? "" : "s",
			 flags & SC_FSCK_REPAIR ? " (held by live processes; run fsck --repair again when they are done)"
						: " (fsck --repair fixes what it can)");
}

/* No reader slot to be had (@why: -EUSERS or -EDQUOT): what can be known without one, from a
 * read-only look (sc_arena_inspect). EXIT_FAIL: the arena was not checked. */
static int fsck_without_slot(const char *dir, const char *name, int why, struct fsck_out *o)
{
	struct sc_arena_open_opts oo = cli_open_opts(dir);
	struct sc_arena_info in;
	int rc = sc_arena_inspect(name, &oo, &in);
	if (rc)
		return cli_arena_error("fsck", rc, dir, name);
	char msg[320];
	if (o->json)
		printf("{\"findings\":[");
	snprintf(msg, sizeof(msg), "%s: %u of %u slots attached, %u more slots' locks held by processes not attached",
		 why == -EDQUOT ? "your user holds as many reader slots as one user may" : "no reader slot is free",
		 in.attached_count, in.reader_slots, in.locked_slots);
	on_finding("readers", msg, 0, o);
	on_finding("fsck", "the index, heap, rings and observations were not checked (that needs a reader slot)", 0, o);
	if (o->json) {
		struct sc_fsck_report r = { .problems = 2, .readers_live = in.attached_count };
		print_json(why, &r);
	}
	return cli_fail("fsck", 0, "cannot check '%s': %s (%u attached, %u slots' locks held without attaching; "
			"'stagecache info %s' lists them)", name,
			why == -EDQUOT ? "your user holds as many of its reader slots as one user may"
				       : "every reader slot is taken",
			in.attached_count, in.locked_slots, name);
}

int cmd_fsck(int argc, char **argv)
{
	const char *dir = NULL, *name;
	struct fsck_out o = { 0, 0 };
	uint32_t flags = 0;
	const struct cli_opt opts[] = {
		{ "deep", CLI_BITS, &flags, .max = SC_FSCK_DEEP },
		{ "repair", CLI_BITS, &flags, .max = SC_FSCK_REPAIR },
		{ "dir", CLI_STR, &dir },            { "owner", CLI_OWNER },
		{ "json", CLI_FLAG, &o.json },       CLI_OPERAND("NAME", &name),
	};
	int rc = cli_parse_opts("fsck", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((rc = cli_check_name("fsck", name)))
		return rc;
	struct sc_arena *a;
	struct sc_arena_open_opts oo = cli_open_opts(dir);
	if ((rc = sc_arena_open_with(name, &oo, &a))) {
		if (rc == -EUSERS || rc == -EDQUOT)
			return fsck_without_slot(dir, name, rc, &o);
		int ex = cli_arena_error("fsck", rc, dir, name);
		return rc == -ENOTRECOVERABLE ? EXIT_DAMAGED : ex;
	}
	struct sc_fsck_report r;
	if (o.json)
		printf("{\"findings\":[");
	rc = sc_arena_fsck(a, flags, on_finding, &o, &r);
	sc_arena_close(a);
	if (o.json)
		print_json(rc, &r);
	if (rc == -ENOTRECOVERABLE) {
		cli_fail("fsck", 0, "arena '%s' cannot be repaired and is declared unrepairable: destroy it and create it again",
			 name);
		return EXIT_DAMAGED;
	}
	if (rc < 0)
		return cli_fail("fsck", 0, "cannot check '%s': %s", name, rc == -EBADMSG ? "its index or heap header is "
				"corrupted beyond what fsck can rebuild" : sc_strerror(rc));
	if (!o.json)
		print_text(name, rc, flags, &r);
	else if (rc > 0)
		cli_fail("fsck", 0, "%s: %d problem%s left", name, rc, rc == 1 ? "" : "s");
	return rc == 0 ? EXIT_OK : EXIT_FAIL;
}
