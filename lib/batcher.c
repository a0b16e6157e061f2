/*
 * lib/batcher.c — the generation commit batcher: turns one-token-at-a-time decode output into
 * commits at a fixed cadence (first token at once, then at most every interval or every
 * capacity tokens, and a flush before the terminal) published through the producer's ring.
 *
 * Cost per token in the steady state: a store into the caller-allocated buffer and one
 * comparison against an elapsed time the decode loop already has. No allocation, no clock, no
 * lock: the buffer is fixed and a batch that reaches capacity is emitted early instead of growing.
 *
 * A commit is a delta: its tokens are the ones added since the previous commit, and
 * generated_token_count is the running total after them, so the concatenation of all batches is
 * exactly the token sequence. When the ring is full the batch simply stays pending and the next
 * commit/flush retries it, so nothing is dropped and nothing is reordered.
 *
 * A commit has two distinct ring-full outcomes, and callers must be able to tell them apart
 * without comparing counts: the token was taken and only the emit was deferred
 * (SC_BATCHER_DEFERRED, a success: never send that token again), or the buffer was already full
 * and the token was refused (-EAGAIN: send the same token again later).
 */
#include <errno.h>
#include <string.h>

#include "stagecache.h"

#define B_STARTED 0x1u  /* a commit was emitted: last_emit_ns is meaningful */
#define B_RETRY 0x2u    /* an emit found the ring full: the next commit emits regardless of cadence */
#define B_FINISHED 0x4u /* the terminal commit went out */

int sc_batcher_init_opts(struct sc_batcher *b, struct sc_ring *ring, uint64_t request_id, uint64_t session_id,
			 const struct sc_batcher_opts *opts)
{
	if (!b)
		return -EINVAL;
	if (opts && ((opts->flags & ~SC_BATCHER_OPT_MASK) || opts->reserved[0] || opts->reserved[1]))
		return -EINVAL;
	/* an interval of 0 (emit every token) is asked for explicitly; a plain 0 is the default */
	uint64_t interval = SC_BATCHER_INTERVAL_DEFAULT_NS;
	if (opts && (opts->interval_ns || (opts->flags & SC_BATCHER_OPT_INTERVAL)))
		interval = opts->interval_ns;
	uint32_t cap = opts && opts->capacity ? opts->capacity : SC_BATCHER_CAPACITY_MAX;
	if (cap > SC_BATCHER_CAPACITY_MAX)
		return -EINVAL;
	if (ring && cap > sc_ring_max_tokens(ring))
		return -E2BIG;
	/* the token buffer is left uninitialised: only [0, pending) is ever read */
	b->ring = ring;
	b->request_id = request_id;
	b->session_id = session_id;
	b->interval_ns = interval;
	b->last_emit_ns = 0;
	b->count = 0;
	b->ring_full = 0;
	b->commits = 0;
	b->capacity = cap;
	b->pending = 0;
	b->state = 0;
	b->reserved = 0;
	return 0;
}

int sc_batcher_init(struct sc_batcher *b, struct sc_ring *ring, uint64_t request_id, uint64_t session_id)
{
	return sc_batcher_init_opts(b, ring, request_id, session_id, NULL);
}

/* Publish the pending batch with @flags; on success the batch is gone. */
static int emit(struct sc_batcher *b, uint32_t flags)
{
	struct sc_commit c = {
		.request_id = b->request_id,
		.session_id = b->session_id,
		.generated_token_count = b->count,
		.flags = flags,
		.token_count = b->pending,
		.tokens = b->tokens,
	};
	int rc = sc_ring_try_submit(b->ring, &c);
	if (__builtin_expect(rc == 0, 1)) {
		b->pending = 0;
		b->commits++;
		b->state &= ~B_RETRY;
		return 0;
	}
	if (rc == -EAGAIN) {
		b->ring_full++;
		b->state |= B_RETRY;
	}
	return rc;
}

int sc_batcher_commit(struct sc_batcher *b, int32_t token, uint64_t elapsed_ns)
{
	if (!b->ring)
		return 0; /* nobody listens: retain and count nothing */
	if (__builtin_expect(b->state & B_FINISHED, 0))
		return -EINVAL;
	if (__builtin_expect(b->pending >= b->capacity, 0)) {
		/* full from an earlier refused emit: make room first, or refuse the token (the ring
		 * being full is the only way emit fails here: -EAGAIN then means "not taken") */
		int rc = emit(b, 0);
		if (rc)
			return rc;
		b->last_emit_ns = elapsed_ns;
		b->state |= B_STARTED;
	}
	b->count++;
	b->tokens[b->pending++] = token;
	/* elapsed time that went backwards is never due by time (no unsigned wrap) */
	int due = b->pending >= b->capacity || (b->state & (B_STARTED | B_RETRY)) != B_STARTED ||
		  (elapsed_ns >= b->last_emit_ns && elapsed_ns - b->last_emit_ns >= b->interval_ns);
	if (!due)
		return 0;
	int rc = emit(b, 0);
	if (rc == -EAGAIN)
		return SC_BATCHER_DEFERRED; /* the token is in the pending batch: taken */
	if (rc)
		return rc;
	b->last_emit_ns = elapsed_ns;
	b->state |= B_STARTED;
	return 0;
}

int sc_batcher_flush(struct sc_batcher *b)
{
	if (!b->ring || !b->pending)
		return 0;
	/* deliberately leaves last_emit_ns alone: there is no later token to space away from */
	return emit(b, 0);
}

int sc_batcher_finish(struct sc_batcher *b, uint32_t terminal_flag)
{
	if (terminal_flag != SC_COMMIT_FINISHED && terminal_flag != SC_COMMIT_ABORTED)
		return -EINVAL;
	if (!b->ring || (b->state & B_FINISHED))
		return 0;
	/* the residual batch and the terminal marker travel in one record, so the marker can never
	 * overtake a token */
	int rc = emit(b, terminal_flag);
	if (rc)
		return rc;
	b->state |= B_FINISHED;
	return 0;
}

uint64_t sc_batcher_count(const struct sc_batcher *b)
{
	return b->count;
}

uint32_t sc_batcher_pending(const struct sc_batcher *b)
{
	return b->pending;
}

uint64_t sc_batcher_ring_full(const struct sc_batcher *b)
{
	return b->ring_full;
}

uint64_t sc_batcher_commits(const struct sc_batcher *b)
{
	return b->commits;
}
