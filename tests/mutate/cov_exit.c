/* tests/mutate/cov_exit.c — linked only into make mutate's coverage build (build/mutate/cov), with
 * -Wl,--wrap=_exit and -Wl,--wrap=kill: a test's child that ends with _exit() writes its coverage
 * counters first, as one that returns or calls exit() does, and so does a process that sends
 * itself SIGKILL (a fault point: shm/fault.c), so that the lines it ran before dying count for the
 * case that made it die. (A process killed by another writes none.) */
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

void __gcov_dump(void);
void __real__exit(int status) __attribute__((noreturn));
void __wrap__exit(int status) __attribute__((noreturn));
int __real_kill(pid_t pid, int sig);
int __wrap_kill(pid_t pid, int sig);

void __wrap__exit(int status)
{
	__gcov_dump();
	__real__exit(status);
}

int __wrap_kill(pid_t pid, int sig)
{
	if (sig == SIGKILL && (pid == 0 || pid == getpid()))
		__gcov_dump();
	return __real_kill(pid, sig);
}
