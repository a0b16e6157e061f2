/* tools/stress_hosts.h — `stagecache stress NAME --hosts N --l3 DIR...` (tools/stress_hosts.c). */
#ifndef SC_TOOLS_STRESS_HOSTS_H
#define SC_TOOLS_STRESS_HOSTS_H

#include <stdatomic.h>
#include <stddef.h>

/* Does this `stress` command line ask for several hosts (--hosts)? */
int stress_hosts_wanted(int argc, char **argv);
/* The multi-host stress; an exit status. */
int stress_hosts_main(int argc, char **argv);

/* The first problem of a run, kept: formats into @buf only when *@written was 0 (sets it). */
void stress_first_problem(_Atomic int *written, char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* problem(sh, fmt, ...): the first problem in the run's shared page (sh->first_problem). */
#define problem(sh, ...) \
	stress_first_problem(&(sh)->problem_written, (sh)->first_problem, sizeof((sh)->first_problem), __VA_ARGS__)

#endif
