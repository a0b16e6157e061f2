/*
 * tools/cli/cmd_tail.c — `stagecache tail NAME [--dir DIR] [--json] [--follow]`: print the commits
 * in the arena's commit rings, one line each, as the (single) ring consumer.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

struct tail_ctx {
	int json;
	FILE *out;
	uint64_t count;
};

static const char *terminal_name(uint32_t flags)
{
	if (flags & SC_COMMIT_ABORTED)
		return "aborted";
	if (flags & SC_COMMIT_FINISHED)
		return "finished";
	return NULL;
}

static int print_commit(const struct sc_commit *c, void *ctx)
{
	const struct tail_ctx *t = ctx;
	const char *term = terminal_name(c->flags);
	FILE *f = t->out;
	((struct tail_ctx *)ctx)->count++;
	if (t->json) {
		fprintf(f, "{\"ring\":%u,\"gen\":%u,\"seq\":%llu,\"request\":%llu,\"session\":%llu,\"total\":%llu,\"tokens\":[",
			c->ring, c->gen, (unsigned long long)c->seq, (unsigned long long)c->request_id,
			(unsigned long long)c->session_id, (unsigned long long)c->generated_token_count);
		for (uint32_t i = 0; i < c->token_count; i++)
			fprintf(f, i ? ",%d" : "%d", c->tokens[i]);
		fprintf(f, "],\"terminal\":");
		if (term)
			cli_json_str(f, term);
		else
			fputs("null", f);
		fputs("}\n", f);
	} else {
		fprintf(f, "request=%llu session=%llu total=%llu tokens=[", (unsigned long long)c->request_id,
			(unsigned long long)c->session_id, (unsigned long long)c->generated_token_count);
		for (uint32_t i = 0; i < c->token_count; i++)
			fprintf(f, i ? " %d" : "%d", c->tokens[i]);
		fprintf(f, "] terminal=%s ring=%u seq=%llu\n", term ? term : "-", c->ring, (unsigned long long)c->seq);
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache tail NAME [--dir DIR] [--owner USER] [--json] [--follow]\n\n"
		   "Print the commits waiting in arena NAME's commit rings, one line each:\n"
		   "  request=R session=S total=T tokens=[...] terminal=finished|aborted|- ring=I seq=N\n"
		   "total is the request's running token count after the commit; seq numbers each ring's\n"
		   "records 1, 2, 3 ... per producer, so gaps would show.\n\n"
		   "tail consumes what it prints: the rings have one consumer at a time, and tail fails if\n"
		   "another process is consuming them.\n\n"
		   "options:\n"
		   "  --dir DIR   look for the arena in DIR only\n"
		   "  --owner U   trust an arena file owned by user U (a name, a number, or any)\n"
		   "  --json      one JSON object per commit: ring, gen, seq, request, session, total,\n"
		   "              tokens, terminal (null, \"finished\" or \"aborted\")\n"
		   "  --follow    keep printing commits as they arrive, until interrupted\n"
		   "  --help      this text\n\n"
		   "exit status: 0 ok, 1 failure, 2 usage error\n");
}

/* --follow: stop on SIGINT, SIGTERM or a closed pipe (stop_flag), one line at a time. */
static void follow_setup(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* Print the commits of arena @a (named @name) until the rings are empty (or, with @follow, until
 * stopped); an exit status. */
static int drain(struct sc_arena *a, const char *name, struct tail_ctx *t, int follow)
{
	int rc = EXIT_OK, warned = 0;
	while (!stop_flag) {
		uint64_t before = t->count;
		int n = sc_ring_poll(a, print_commit, t, 1024);
		if (n == -EBADMSG) {
			/* one ring is corrupted; the others were served: report it once and go on */
			if (!warned)
				cli_fail("tail", 0, "a commit ring of '%s' holds a malformed record and is skipped (see "
					 "'stagecache stats'; 'stagecache fsck %s --repair' drops its records)", name,
					 name);
			warned = 1;
			rc = EXIT_FAIL;
			n = (int)(t->count - before);
		}
		if (n == -EBUSY)
			return cli_fail("tail", 0, "another process is consuming the commit rings of '%s' (one consumer at a "
					"time)", name);
		if (n < 0)
			return cli_fail("tail", 0, "cannot read the commit rings of '%s': %s", name,
					n == -EBADMSG ? "the ring directory is corrupted (fsck --repair rewrites it)"
						      : sc_strerror(n));
		if (n > 0)
			continue;
		if (!follow)
			break;
		fflush(stdout);
		struct timespec ts = { 0, 2000000 }; /* idle: 2 ms between polls */
		nanosleep(&ts, NULL);
	}
	return rc;
}

int cmd_tail(int argc, char **argv)
{
	const char *dir = NULL, *name;
	struct tail_ctx t = { 0, stdout, 0 };
	int follow = 0;
	const struct cli_opt opts[] = {
		{ "dir", CLI_STR, &dir },            { "owner", CLI_OWNER },
		{ "json", CLI_FLAG, &t.json },       { "follow", CLI_FLAG, &follow },
		CLI_OPERAND("NAME", &name),
	};
	int rc = cli_parse_opts("tail", argc, argv, opts, usage);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	struct sc_arena *a;
	if ((rc = cli_open_arena("tail", dir, name, &a)))
		return rc;
	if (follow)
		follow_setup();
	rc = drain(a, name, &t, follow);
	if (fflush(stdout) && rc == EXIT_OK)
		rc = cli_fail("tail", 0, "writing the output: %s", strerror(errno));
	sc_ring_consumer_close(a);
	sc_arena_close(a);
	return rc;
}
