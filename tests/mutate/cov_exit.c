/* tests/mutate/cov_exit.c — linked only into make mutate's coverage build (build/mutate/cov), with
 * -Wl,--wrap=_exit: a test's child that ends with _exit() writes its coverage counters first, as
 * one that returns or calls exit() does. (A process killed by a signal writes none.) */
void __gcov_dump(void);
void __real__exit(int status) __attribute__((noreturn));
void __wrap__exit(int status) __attribute__((noreturn));

void __wrap__exit(int status)
{
	__gcov_dump();
	__real__exit(status);
}
