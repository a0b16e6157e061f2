/* shm/util.c — clocks and process identity, used to tell a live owner from a dead or recycled pid. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"

uint64_t shm_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t shm_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t shm_proc_start_time(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* the command name may hold spaces and parentheses: fields resume after the last ')' */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	/* p is now at " S ppid ..." : state is field 3, starttime is field 22 */
	int field = 2;
	while (*p && field < 22) {
		if (*p == ' ')
			field++;
		p++;
	}
	if (field != 22)
		return 0;
	/* a zombie still has a stat file: treat it as dead */
	char state = 0;
	const char *q = strrchr(buf, ')');
	if (q && q[1] == ' ')
		state = q[2];
	if (state == 'Z' || state == 'X')
		return 0;
	unsigned long long st = 0;
	if (sscanf(p, "%llu", &st) != 1)
		return 0;
	return st ? st : 1;
}

int shm_proc_alive(int pid, uint64_t start)
{
	if (pid <= 0)
		return 0;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 0;
	uint64_t st = shm_proc_start_time(pid);
	if (!st)
		return 0;
	return start == 0 || st == start;
}
