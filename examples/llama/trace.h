/*
 * examples/llama/trace.h — a deterministic multi-turn chat trace of token ids.
 *
 * Conversations each start from one of a few shared system prompts, chosen with a Zipf law (a
 * few assistants take most of the traffic), and extend their own history turn by turn: the
 * prompt of turn k is the system prompt, every earlier user message and every earlier reply,
 * then the new user message. The replies are whatever the model generates, so the trace gives
 * the user messages and the driver appends the replies.
 */
#ifndef SC_EXAMPLES_LLAMA_TRACE_H
#define SC_EXAMPLES_LLAMA_TRACE_H

#include <stdint.h>

struct trace_opts {
	uint32_t conversations;  /* default 8 */
	uint32_t turns_min, turns_max;   /* default 3..5 */
	uint32_t systems;        /* distinct system prompts, default 4 */
	uint32_t system_min, system_max; /* tokens, default 512..1024 */
	uint32_t user_min, user_max;     /* tokens of a user message, default 32..160 */
	uint32_t generate;       /* tokens each reply generates, default 32 */
	double zipf;             /* exponent of the system prompts' popularity, default 1.1 */
	uint64_t seed;           /* default 25 */
	int32_t vocab;           /* token ids are drawn from [3, vocab) */
};

struct trace_conv {
	uint32_t system;         /* index of its system prompt */
	uint32_t turns;
	uint32_t *user_len;      /* per turn */
	int32_t **user;          /* per turn: the user message */
};

struct trace {
	struct trace_opts o;
	int32_t **system;        /* the system prompts */
	uint32_t *system_len;
	struct trace_conv *conv;
	uint64_t requests;       /* sum of turns */
};

/* Fill defaults for zero fields, then draw the trace. 0, or -1 (out of memory or bad options). */
int trace_make(struct trace *t, const struct trace_opts *o);
void trace_free(struct trace *t);

#endif
