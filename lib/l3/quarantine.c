/*
 * lib/l3/quarantine.c — an object (or segment) that failed verification moves to quarantine/ and
 * is never served again; whoever mirrors it (the bound arena's L2 and location index) is told
 * through the hooks the binding installed (struct l3_hooks), not by a call up.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../xxh.h"
#include "types.h"
#include "files.h"
#include "format.h"
#include "quarantine.h"
#include "../probes.h"

/* ---- quarantine, eviction ---- */

int l3_quarantine(struct sc_l3 *l3, uint64_t lo, uint64_t hi, int reason)
{
	char rel[48], hex[33], qname[80];
	struct stat sb;
	l3_obj_relpath(lo, hi, rel);
	l3_digest_hex(lo, hi, hex);
	snprintf(qname, sizeof(qname), "%s.%llu.sc3", hex, (unsigned long long)shm_realtime_ns());
	int rc, have = l3_statat(l3->objfd, rel, &sb) == 0;
	if ((rc = l3_renameat(l3->objfd, rel, l3->quarfd, qname, 0)) < 0)
		return rc; /* someone else moved it first */
	l3_kept_invalidate(l3);
	if (have && S_ISREG(sb.st_mode)) { /* a planted FIFO or directory was never counted */
		l3_count_sub(&l3->st->bytes, (uint64_t)sb.st_size);
		l3_count_sub(&l3->st->objects, 1);
	}
	ADD(quarantined, 1);
	uint64_t a = lo, b = hi;
	int64_t why = reason;
	SC_PROBE(l3_quarantine, a, b, why);
	if (l3->arena && l3->hooks) {
		l3->hooks->quarantined(l3->arena, (struct sc_digest){ lo, hi });
	} else {
		/* no arena to invalidate mirrors in (reconciliation at open, l3 verify, a fill before
		 * any bind): leave a record for the next sc_l3_bind_arena */
		char rec[48];
		snprintf(rec, sizeof(rec), "%s.mirror", hex);
		int fd = openat(l3->quarfd, rec, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, l3->file_mode);
		if (fd >= 0) {
			(void)l3_own(l3, fd, 0);
			close(fd);
		}
	}
	return 0;
}


int l3_quarantined_since(struct sc_l3 *l3, uint64_t lo, uint64_t hi, uint64_t since_ns)
{
	char hex[33];
	l3_digest_hex(lo, hi, hex);
	DIR *d = l3_opendir(l3->quarfd);
	if (!d)
		return 0;
	struct dirent *e;
	int found = 0;
	while (!found && (e = readdir(d))) {
		unsigned long long ns;
		char tail[8];
		if (strncmp(e->d_name, hex, 32) || e->d_name[32] != '.' ||
		    sscanf(e->d_name + 33, "%llu.%7s", &ns, tail) != 2 || strcmp(tail, "sc3"))
			continue;
		found = ns >= since_ns;
	}
	closedir(d);
	return found;
}
