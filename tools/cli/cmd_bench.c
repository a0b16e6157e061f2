/*
 * tools/cli/cmd_bench.c — `stagecache bench ...`: runs the benchmark binary `stagecache-bench`
 * found next to this one (installed beside it), with the same arguments.
 *
 * The benchmarks compare with other systems (LMDB, DPDK, memcached and Redis over their wire
 * protocols, fio); they live in their own binary (tools/bench/) so that the product binary depends
 * only on what it uses (`ldd stagecache`: liburing, libbpf, libelf, zlib, libxxhash, libc).
 */
#include "beside.h"
#include "cli.h"

int cmd_bench(int argc, char **argv)
{
	return cli_exec_beside("bench", "stagecache-bench", "the benchmark program",
			       "build it with 'make' (or install it next to stagecache)", "stagecache-bench", 1, argc, argv);
}
