/* lib/error.c — one message per error the library returns. */
#include <errno.h>
#include <string.h>

#include "stagecache.h"

const char *sc_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0: return "success";
	case EBADMSG: return "not a valid stagecache object (bad magic, corrupted header or data, or truncated)";
	case EPROTO: return "stagecache layout version mismatch";
	case EEXIST: return "already exists";
	case ENOENT: return "no such arena or object";
	case EINVAL: return "invalid argument";
	case ENOMEM: return "not enough memory (or hugepages) to create it";
	case ENODEV: return "no hugetlbfs mount with 2 MiB pages (run: stagecache setup)";
	case EAGAIN: return "temporarily unavailable (being created, or full: try again)";
	case EUSERS: return "reader table full: every slot is held by a live process";
	case ECHILD: return "this handle was inherited through fork: the child must open its own";
	case EACCES: return "permission denied";
	case E2BIG: return "larger than the cache can ever hold";
	case ENOSPC: return "no space (could not make room)";
	case EBUSY: return "busy: another process is filling it";
	case ETIMEDOUT: return "timed out";
	case EOWNERDEAD: return "a lock holder died; state was repaired";
	case EMFILE: return "too many held: leases of this arena handle (SC_LEASES_MAX), or open files";
	case ENOBUFS: return "buffer too small";
	default: return strerror(err);
	}
}
