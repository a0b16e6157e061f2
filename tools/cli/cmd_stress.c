/*
 * tools/cli/cmd_stress.c — `stagecache stress ...` in the product binary: runs the test build's
 * CLI beside it (build/test/stagecache stress ...), with the same arguments.
 *
 * The stress harness (tools/stress/) arms the library's fault points, which only the test build
 * has (the product library carries no test hook: tests/check_product.c), so it is compiled into
 * the test build alone; users and CI still type `build/stagecache stress`. The test build links
 * its own tools/stress/stress.c instead of this file (see the Makefile).
 */
#include "beside.h"
#include "cli.h"

int cmd_stress(int argc, char **argv)
{
	return cli_exec_beside("stress", "test/stagecache", "the stress harness is part of the test build, and",
			       "run it from the build tree after 'make' (build/stagecache stress ...)", "stagecache", 0,
			       argc, argv);
}
