/* tools/stress_hosts.h — `stagecache stress NAME --hosts N --l3 DIR...` (tools/stress_hosts.c). */
#ifndef SC_TOOLS_STRESS_HOSTS_H
#define SC_TOOLS_STRESS_HOSTS_H

/* Does this `stress` command line ask for several hosts (--hosts)? */
int stress_hosts_wanted(int argc, char **argv);
/* The multi-host stress; an exit status. */
int stress_hosts_main(int argc, char **argv);

#endif
