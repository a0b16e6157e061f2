/* tools/stress/stress_hosts.h — `stagecache stress NAME --hosts N --l3 DIR...` (tools/stress/stress_hosts.c). */
#ifndef SC_TOOLS_STRESS_HOSTS_H
#define SC_TOOLS_STRESS_HOSTS_H

#include <stdatomic.h>
#include <stddef.h>

/* Does this `stress` command line ask for several hosts (--hosts)? */
int stress_hosts_wanted(int argc, char **argv);
/* The multi-host stress; an exit status. */
int stress_hosts_main(int argc, char **argv);

/* The option-table rows (tools/common/cli.h) both stress modes take, into the same-named fields of
 * their options @o: --seconds, --kill-every, --seed, --size, --keep, --json. */
#define STRESS_COMMON_OPTS(o)                                                                 \
	{ "seconds", CLI_U32, &(o)->seconds, 1, 86400, "" },                                  \
	{ "kill-every", CLI_U32, &(o)->kill_every_ms, 0, 3600000, " (milliseconds)" },        \
	{ "seed", CLI_U64, &(o)->seed, 0, UINT64_MAX, "" },                                   \
	{ "size", CLI_SIZE, &(o)->size, SC_ARENA_MIN_BYTES, UINT64_MAX, "" },                 \
	{ "keep", CLI_FLAG, &(o)->keep }, { "json", CLI_FLAG, &(o)->json }

/* The first problem of a run, kept: formats into @buf only when *@written was 0 (sets it). */
void stress_first_problem(_Atomic int *written, char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* problem(sh, fmt, ...): the first problem in the run's shared page (sh->first_problem). */
#define problem(sh, ...) \
	stress_first_problem(&(sh)->problem_written, (sh)->first_problem, sizeof((sh)->first_problem), __VA_ARGS__)

#endif
