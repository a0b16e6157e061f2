/*
 * examples/llama/cache.h — a llama.cpp worker's use of stagecache: restore the longest stored
 * prefix of a prompt into the engine, export the engine's state at block boundaries into L2 and
 * L3, stream generated tokens through the commit batcher. Only lib/stagecache.h is used.
 *
 * The payload (SC_PAYLOAD_FULL_STATE, one section) of a prefix of P tokens is
 *   [ llama_state_seq_get_data bytes | P's next-token logits, n_vocab float32 | trailer, 64 bytes ]
 * The trailer names the model file (its digest) and the state format, and is checked before the
 * bytes reach llama.cpp: a state of another model is a miss, never an import. With token_major the
 * state bytes are stored in layout.h's token-major form (part of the state identity), and put back
 * into llama.cpp's form before the import.
 */
#ifndef SC_EXAMPLES_LLAMA_CACHE_H
#define SC_EXAMPLES_LLAMA_CACHE_H

#include <stdint.h>
#include <stagecache.h>

#include "engine.h"

#define LLC_TRAILER_MAGIC 0x31414d414c4c4353ull /* "SCLLAMA1" */

struct llc_trailer {
	uint64_t magic;
	uint32_t version;          /* 1 */
	uint32_t token_count;
	uint32_t n_vocab;
	uint32_t reserved;
	uint64_t state_bytes;      /* llama.cpp's sequence state */
	uint64_t logits_bytes;     /* n_vocab * 4 */
	struct sc_digest model;    /* the model file's digest */
	uint64_t format;           /* hash of the state identity (engine shape, KV types, flash attention) */
};
_Static_assert(sizeof(struct llc_trailer) == 64, "the trailer is 64 bytes");

enum llc_export { LLC_EXPORT_NONE, LLC_EXPORT_LAST, LLC_EXPORT_ALL };

struct llc_opts {
	const char *arena;         /* NULL: no cache at all */
	const char *l3_dir;
	const char *ns;            /* the caller's namespace; the model's identity is appended */
	int ns_raw;                /* use @ns as given (a misconfiguration the trailer check must catch) */
	int ring;                  /* stream generated tokens through a commit ring */
	int token_major;           /* store the state token-major (layout.h): segments can share blocks */
	int prefault;              /* read one byte of every page of the arena's payload memory at open */
};

struct llc {
	struct sc_arena *arena;
	struct sc_stage *stage;
	struct sc_l3 *l3;
	struct sc_ring *ring;
	char model_id[128], state_id[384], ns[256];
	struct sc_digest model_digest;
	uint64_t format;
	uint8_t *buf;              /* export buffer */
	size_t cap;
	uint8_t *tmp;              /* the other form of the state (token-major layout) */
	size_t tmp_cap;
	int token_major;
	uint32_t block;
	uint64_t prefault_ns;      /* mapping the arena's payload memory at open */
	/* counters */
	uint64_t exports, export_bytes, admit_fail, put_fail, refused, ring_full;
};

/* Hash the model file and derive the identities (no arena needed). 0 or a negative errno. */
int llc_identify(struct llc *c, const char *model_path, const struct eng *e, const struct llc_opts *o);
/* Open the arena, the stage, the L3 directory and (o->ring) a commit ring. 0 or a negative errno,
 * with what failed in @what. */
int llc_open(struct llc *c, const struct llc_opts *o, const char **what);
void llc_close(struct llc *c);

/* What a restore did (times in ns). */
struct llc_restored {
	uint32_t tokens;           /* 0: nothing usable */
	int source;                /* enum sc_restore_source, 0 when nothing */
	int refused;               /* a stored state failed the trailer check (another model or format) */
	int promoted;
	uint64_t locate_ns, lookup_ns, fill_ns, restore_ns, import_ns;
	uint64_t state_bytes;
	struct sc_digest digest;
	/* calibration (when asked): the same bytes memcpy'd to private memory, and set_data from there */
	uint64_t memcpy_ns, set_private_ns;
};

/* Restore the longest stored prefix of @tok[0..n) into @e (sc_restore, then
 * llama_state_seq_set_data straight from the arena). The engine holds the prefix afterwards,
 * or is empty. Returns 0 or a negative errno of something other than a miss. */
int llc_restore(struct llc *c, struct eng *e, const int32_t *tok, uint32_t n, int calibrate, struct llc_restored *out);

/* Export the engine's state of @tok[0..e->n_past) into L2 and L3. 0 or a negative errno.
 * @admit_ns, @put_ns (may be NULL) receive the time of each half. */
int llc_export(struct llc *c, struct eng *e, const int32_t *tok, uint64_t *get_ns, uint64_t *admit_ns,
	       uint64_t *put_ns);

uint64_t llc_now_ns(void);

#endif
