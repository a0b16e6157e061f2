/*
 * examples/llama/engine.h — the little the worker needs from llama.cpp: a model and a context
 * with one sequence, batched decoding that never crosses a block boundary, greedy sampling, and
 * the sequence's state as bytes (llama_state_seq_get_data / set_data).
 *
 * Why batches stop at block boundaries: llama.cpp's CPU path computes the same bits for the
 * same batch split. A worker that restores the state of the first k blocks and decodes the rest
 * splits the rest exactly as the worker that computed all of it did, so both see bit-identical
 * logits (tests/check_llama.c checks it). It also puts logits at every boundary, which the
 * exported state carries (a restore of a whole prompt samples its first token at once).
 */
#ifndef SC_EXAMPLES_LLAMA_ENGINE_H
#define SC_EXAMPLES_LLAMA_ENGINE_H

#include <stddef.h>
#include <stdint.h>

struct llama_model;
struct llama_context;

struct eng_opts {
	uint32_t n_ctx;      /* context (tokens); 0: 16384, at most the model's */
	uint32_t block;      /* batches never cross a multiple of this; 0: 256 */
	int threads;         /* 0: the online CPUs */
	int flash_attn;      /* 1: flash attention (V not transposed in the state) */
};

struct eng {
	struct llama_model *model;
	struct llama_context *ctx;
	int32_t n_vocab;
	uint32_t n_ctx, block;
	int flash_attn;
	int32_t n_past;      /* tokens in the sequence's cache */
	float *logits;       /* n_vocab: the logits after the last decoded token (valid when have_logits) */
	int have_logits;
	char desc[256];      /* layers, width, heads... for the state identity and for people */
	void *batch_;        /* struct llama_batch * (private) */
};

/* Load the backends from @libdir (the CPU variant that fits this machine), the model and a
 * context. 0, or -1 with a reason in @err. Quiet unless @verbose (llama.cpp logs to stderr). */
int eng_open(struct eng *e, const char *libdir, const char *model_path, const struct eng_opts *o, int verbose,
	     char *err, size_t errlen);
void eng_close(struct eng *e);

/* Forget the sequence (its cache cells and logits). */
void eng_reset(struct eng *e);

/*
 * Decode @tok[0..n) at positions n_past.. in batches that stop at every multiple of the block;
 * after each batch @on_boundary (may be NULL) is called when n_past is a multiple of the block,
 * with the logits of the last token in e->logits. 0, or -1 (llama_decode failed, context full).
 */
int eng_decode(struct eng *e, const int32_t *tok, uint32_t n, int (*on_boundary)(struct eng *, void *), void *ctx);

/* The argmax of e->logits (greedy), lowest id on ties. */
int32_t eng_greedy(const struct eng *e);

/* The sequence's state: its size, a copy into @buf (returns the bytes written, 0 on failure). */
size_t eng_state_size(struct eng *e);
size_t eng_state_get(struct eng *e, void *buf, size_t cap);
/* Replace the sequence with a state of @n_tokens tokens and the logits that follow them.
 * 0, or -1 (llama.cpp refused the bytes: the sequence is then empty). */
int eng_state_set(struct eng *e, const void *state, size_t len, int32_t n_tokens, const float *logits);

#endif

/*
 * The same engine for languages that call C through a foreign-function interface (worker.py uses
 * it through ctypes, built as libsc-llama-engine.so): a heap-allocated engine and accessors, so
 * that the caller mirrors no structure.
 */
struct eng *eng_new(const char *libdir, const char *model_path, uint32_t n_ctx, uint32_t block, int threads,
		    int flash_attn, char *err, size_t errlen);
void eng_free(struct eng *e);
int32_t eng_n_past(const struct eng *e);
int32_t eng_n_vocab(const struct eng *e);
const float *eng_logits(const struct eng *e);
const char *eng_desc(const struct eng *e);
/* LLAMA_STATE_SEQ_VERSION of the llama.h this was built with (part of the state identity). */
int eng_state_version(void);
