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
	/* generic on purpose: callers that know which object and which rule say so themselves */
	case EBADMSG: return "invalid or corrupted data (not a stagecache object, a failed check, or truncated)";
	case EPROTO: return "stagecache layout version mismatch";
	case EEXIST: return "already exists";
	case ENOENT: return "not found";
	case EINVAL: return "invalid argument";
	case ENOMEM: return "not enough memory (or hugepages)";
	case ENODEV: return "no hugetlbfs mount with 2 MiB pages (run: stagecache setup)";
	case EAGAIN: return "temporarily unavailable (try again)";
	case EUSERS: return "reader table full: every slot is held by a live process";
	case EDQUOT: return "this user's processes hold as many of the arena's reader slots as one user may";
	case ECHILD: return "this handle was inherited through fork: the child must open its own";
	case EACCES: return "permission denied";
	case EPERM: return "refused: the file is world-writable or owned by a user not trusted";
	case E2BIG: return "larger than the cache can ever hold";
	case ENOSPC: return "no space (could not make room)";
	case EBUSY: return "busy (held by another process)";
	case ETIMEDOUT: return "timed out";
	case EOWNERDEAD: return "a lock holder died; state was repaired";
	case ENOTRECOVERABLE: return "the arena was declared unrepairable by fsck: destroy it and create it again";
	case EMFILE: return "too many held: leases of this arena handle (SC_LEASES_MAX), or open files";
	case ENOBUFS: return "buffer too small";
	case EKEYREJECTED: return "stored by another model or state identity (not this stage's)";
	default: return strerror(err);
	}
}
