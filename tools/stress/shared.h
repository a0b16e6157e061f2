/*
 * tools/stress/shared.h — what the workers (worker.c) and the parent and verifier (stress.c) of
 * `stagecache stress` share: the bookkeeping mapping (struct shared; stress.c says who writes
 * what), the options, the workload's constants.
 */
#ifndef SC_TOOLS_STRESS_SHARED_H
#define SC_TOOLS_STRESS_SHARED_H

#include <stdatomic.h>
#include <stdint.h>

#include "stagecache.h"
#include "../demo/workload.h"

#define MAX_PROCS 64
#define MAX_INCARNATIONS 65536
#define KEYS 256
#define L3_DOCS 48
#define NS "stress"
#define MODEL "stress-model"
#define STATE "state"
#define HDR_MAGIC 0x5354524553534844ull /* payload header: magic, key id, version */
/* --users: workers alternate between these uids, sharing this group (nobody / nogroup and the uid
 * below it: numeric ids need no passwd entry) */
#define USER_A 65534u
#define USER_B 65533u
#define USERS_GID 65534u
#define HELD_GRACE_NS 2000000000ull /* what the dead hold must be released within this */

enum op { OP_GET, OP_ADMIT, OP_REMOVE, OP_INVALIDATE, OP_L3, OP_DECODE, OP_REPUT, OP_OTHER_ID, OP_FILLQ, OP_COUNT };
#define FILLQ 16       /* fills in flight in a fill_queue op */
#define VERSIONS 8     /* digests of a document's latest versions kept for checking restores */
#define OTHER_MODEL "stress-other-model"

struct incarnation {
	/* written by the worker */
	_Atomic uint64_t committed;   /* (request seq << 32) | committed tokens of that request */
	_Atomic uint32_t token;       /* its arena handle's owner token (sc_arena_token) */
	/* written by the parent */
	_Atomic uint64_t died_ns;     /* when the parent saw it die (0: alive or unknown) */
	/* written by the verifier */
	_Atomic uint64_t delivered;   /* same packing: the furthest point delivered */
	_Atomic uint32_t worker;      /* which worker slot this incarnation ran in */
};

struct worker_slot {
	_Atomic int32_t pid;               /* the worker's pid in our namespace (the one to kill) */
	_Atomic int32_t waitpid;           /* the child we wait for (a pid-namespace parent, or the worker) */
	_Atomic uint32_t incarnation;
	_Atomic uint64_t heartbeat_ns;     /* last op completed */
	_Atomic uint64_t ops[OP_COUNT];
	_Atomic uint64_t hits, misses, admits_ok, admits_refused, restores_l2, restores_l3;
	_Atomic uint64_t digest_mismatches, errors;
	_Atomic uint64_t late_writes;      /* L2 hits whose bytes are not their entry's digest */
	_Atomic uint64_t stale_served;     /* restores of a version older than one put before them */
	_Atomic int32_t last_error;
	_Atomic int32_t armed;             /* a fault point is armed in this incarnation */
	uint8_t pad[64];
};

/* The versions of one L3 document: only its owner slot (id % procs) puts it, so versions are
 * ordered; version v's payload is the document's with v stamped into its recurrent section. */
struct doc_versions {
	_Atomic uint64_t done;             /* the last version whose put returned */
	_Atomic uint64_t next;             /* the next version to put */
	struct {
		_Atomic uint64_t v;        /* version + 1 once lo, hi are written (0: being written) */
		_Atomic uint64_t lo, hi;
	} d[VERSIONS];
};

struct shared {
	_Atomic int stop_workers, stop_verifier;
	struct doc_versions ver[L3_DOCS];
	struct worker_slot w[MAX_PROCS];
	_Atomic uint64_t torn_records, verify_commits, verify_tokens, stale_records;
	_Atomic int verifier_error;
	char first_problem[256];
	_Atomic int problem_written;
	struct wl_doc l3docs[L3_DOCS];
	struct incarnation inc[MAX_INCARNATIONS];
};

struct stress_opts {
	const char *name, *l3dir;
	uint32_t procs, seconds, kill_every_ms;
	uint64_t seed, size, max_payload, segment_bytes;
	int json, keep, pidns, users;
};

static inline uint64_t pack(uint32_t seq, uint32_t tokens)
{
	return ((uint64_t)seq << 32) | tokens;
}

/* ---- the verifier: every commit of every incarnation ---- */

#endif
