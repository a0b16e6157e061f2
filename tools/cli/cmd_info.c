/* tools/cli/cmd_info.c — `stagecache info NAME [--dir DIR] [--json]`. */
#include <getopt.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache info NAME [--dir DIR] [--owner USER] [--json]\n\n"
		   "Describe the arena NAME: file, size, backing measured from /proc/self/smaps\n"
		   "(hugetlbfs-2M, shmem-thp or shm-4k), layout version, creation time, region sizes, the\n"
		   "processes attached now, and reader slots whose lock someone holds without being attached.\n"
		   "Takes no reader slot (the file is only read): works when every slot is taken.\n");
}

static void print_json(const struct sc_arena_info *in)
{
	uint32_t shown = 0;
	printf("{\"name\":");
	cli_json_str(stdout, in->name);
	printf(",\"path\":");
	cli_json_str(stdout, in->path);
	printf(",\"size_bytes\":%llu,\"backing\":\"%s\",\"page_size\":%llu,\"layout_version\":%u,"
	       "\"created_unix\":%llu,\"creator_pid\":%u,\"mode\":\"%04o\",\"heap_bytes\":%llu,"
	       "\"index_entries\":%u,\"ring_count\":%u,\"ring_bytes\":%u,\"obs_entries\":%u,\"reader_slots\":%u,"
	       "\"l3_index_entries\":%u,\"l3_index_refresh_ms\":%u,\"token_verify\":%s,\"slots_per_user\":%u,"
	       "\"locked_slots\":%u,\"attached\":[",
	       (unsigned long long)in->size_bytes, sc_backing_name(in->backing), (unsigned long long)in->page_size,
	       in->layout_version, (unsigned long long)in->created_unix, in->creator_pid, in->mode,
	       (unsigned long long)in->heap_bytes, in->index_entries, in->ring_count, in->ring_bytes, in->obs_entries,
	       in->reader_slots, in->l3_index_entries, in->l3_index_refresh_ms,
	       (in->flags & SC_ARENA_NO_TOKEN_VERIFY) ? "false" : "true", in->slots_per_user, in->locked_slots);
	for (uint32_t i = 0; i < in->attached_count && i < SC_INFO_MAX_ATTACHED; i++) {
		const struct sc_arena_attached *t = &in->attached[i];
		printf("%s{\"slot\":%u,\"pid\":%u,\"uid\":%u,\"other_pid_namespace\":%s,\"attached_unix\":%llu}",
		       shown++ ? "," : "", t->slot, t->pid, t->uid, t->other_pidns ? "true" : "false",
		       (unsigned long long)t->attached_unix);
	}
	printf("]}\n");
}

static void print_text(const struct sc_arena_info *in)
{
	char hb[32], tb[64];
	time_t t = (time_t)in->created_unix;
	strftime(tb, sizeof(tb), "%Y-%m-%d %H:%M:%S %Z", localtime(&t));
	printf("name:           %s\n", in->name);
	printf("path:           %s (mode %04o)\n", in->path, in->mode);
	printf("size:           %s (%llu bytes)\n", cli_human(in->size_bytes, hb, sizeof(hb)),
	       (unsigned long long)in->size_bytes);
	printf("backing:        %s (page size %llu)\n", sc_backing_name(in->backing), (unsigned long long)in->page_size);
	printf("layout version: %u\n", in->layout_version);
	printf("created:        %s by pid %u\n", tb, in->creator_pid);
	printf("heap:           %s\n", cli_human(in->heap_bytes, hb, sizeof(hb)));
	printf("index entries:  %u\n", in->index_entries);
	printf("L3 index:       %u entries, refresh %u ms\n", in->l3_index_entries, in->l3_index_refresh_ms);
	printf("token ids:      %s\n", (in->flags & SC_ARENA_NO_TOKEN_VERIFY) ? "NOT verified (--no-token-verify)"
								    : "stored and compared on every hit");
	printf("commit rings:   %u x %s\n", in->ring_count, cli_human(in->ring_bytes, hb, sizeof(hb)));
	printf("observations:   %u\n", in->obs_entries);
	printf("attached:       %u of %u slots", in->attached_count, in->reader_slots);
	if (in->slots_per_user && in->slots_per_user < in->reader_slots)
		printf(", at most %u per user", in->slots_per_user);
	printf("\n");
	if (in->locked_slots)
		printf("locked:         %u more slots' locks are held by processes not attached (any user who can open "
		       "the file can lock its bytes; mode %04o)\n", in->locked_slots, in->mode);
	for (uint32_t i = 0; i < in->attached_count && i < SC_INFO_MAX_ATTACHED; i++) {
		const struct sc_arena_attached *p = &in->attached[i];
		time_t at = (time_t)p->attached_unix;
		strftime(tb, sizeof(tb), "%H:%M:%S", localtime(&at));
		printf("  slot %-4u pid %-8u uid %-6u since %s%s\n", p->slot, p->pid, p->uid, tb,
		       p->other_pidns ? "  (another pid namespace)" : "");
	}
}

int cmd_info(int argc, char **argv)
{
	const char *dir = NULL, *name;
	int json = 0;
	const struct cli_opt opts[] = {
		{ "dir", CLI_STR, &dir }, { "owner", CLI_OWNER }, { "json", CLI_FLAG, &json }, CLI_OPERAND("NAME", &name),
	};
	int rc = cli_parse_opts("info", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if ((rc = cli_check_name("info", name)))
		return rc;
	/* without a reader slot: a description must not depend on one being free */
	struct sc_arena_open_opts o = cli_open_opts(dir);
	struct sc_arena_info in;
	if ((rc = sc_arena_inspect(name, &o, &in)))
		return cli_arena_error("info", rc, dir, name);
	(json ? print_json : print_text)(&in);
	return EXIT_OK;
}
