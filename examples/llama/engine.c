/*
 * examples/llama/engine.c — see engine.h. Everything llama.cpp-specific of the example is here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ggml-backend.h>
#include <llama.h>

#include "engine.h"

static int quiet_log = 1;

static void log_cb(enum ggml_log_level level, const char *text, void *ud)
{
	(void)ud;
	if (!quiet_log || level == GGML_LOG_LEVEL_ERROR)
		fputs(text, stderr);
}

int eng_open(struct eng *e, const char *libdir, const char *model_path, const struct eng_opts *o, int verbose,
	     char *err, size_t errlen)
{
	memset(e, 0, sizeof(*e));
	quiet_log = !verbose;
	llama_log_set(log_cb, NULL);
	ggml_log_set(log_cb, NULL);
	static int loaded;
	if (!loaded) {
		ggml_backend_load_all_from_path(libdir);
		loaded = 1;
	}
	if (!ggml_backend_dev_count()) {
		snprintf(err, errlen, "no ggml backend could be loaded from %s", libdir);
		return -1;
	}
	llama_backend_init();
	struct llama_model_params mp = llama_model_default_params();
	mp.n_gpu_layers = 0;
	e->model = llama_model_load_from_file(model_path, mp);
	if (!e->model) {
		snprintf(err, errlen, "llama.cpp could not load the model %s", model_path);
		return -1;
	}
	e->block = o->block ? o->block : 256;
	uint32_t train = (uint32_t)llama_model_n_ctx_train(e->model);
	e->n_ctx = o->n_ctx ? o->n_ctx : 16384;
	if (train && e->n_ctx > train)
		e->n_ctx = train;
	e->flash_attn = o->flash_attn;
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = e->n_ctx;
	cp.n_batch = e->block;
	cp.n_ubatch = e->block;
	cp.n_seq_max = 1;
	int threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	cp.n_threads = threads;
	cp.n_threads_batch = threads;
	cp.flash_attn_type = o->flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
	cp.type_k = GGML_TYPE_F16;
	cp.type_v = GGML_TYPE_F16;
	cp.no_perf = true;
	e->ctx = llama_init_from_model(e->model, cp);
	if (!e->ctx) {
		snprintf(err, errlen, "llama.cpp could not create a context of %u tokens", e->n_ctx);
		eng_close(e);
		return -1;
	}
	e->n_ctx = llama_n_ctx(e->ctx);
	e->n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(e->model));
	e->logits = calloc((size_t)e->n_vocab, sizeof(float));
	struct llama_batch *b = malloc(sizeof(*b));
	if (!e->logits || !b) {
		free(b);
		snprintf(err, errlen, "out of memory");
		eng_close(e);
		return -1;
	}
	*b = llama_batch_init((int32_t)e->block, 0, 1);
	e->batch_ = b;
	snprintf(e->desc, sizeof(e->desc), "layers=%d,embd=%d,heads=%d/%d,vocab=%d,kv=f16/f16,fa=%d,block=%u",
		 llama_model_n_layer(e->model), llama_model_n_embd(e->model), llama_model_n_head(e->model),
		 llama_model_n_head_kv(e->model), e->n_vocab, e->flash_attn, e->block);
	return 0;
}

void eng_close(struct eng *e)
{
	if (e->batch_) {
		llama_batch_free(*(struct llama_batch *)e->batch_);
		free(e->batch_);
	}
	if (e->ctx)
		llama_free(e->ctx);
	if (e->model)
		llama_model_free(e->model);
	free(e->logits);
	memset(e, 0, sizeof(*e));
}

void eng_reset(struct eng *e)
{
	llama_memory_clear(llama_get_memory(e->ctx), false); /* metadata only: the bytes are overwritten before use */
	e->n_past = 0;
	e->have_logits = 0;
}

int eng_decode(struct eng *e, const int32_t *tok, uint32_t n, int (*on_boundary)(struct eng *, void *), void *ctx)
{
	struct llama_batch *b = e->batch_;
	uint32_t i = 0;
	while (i < n) {
		uint32_t room = e->block - (uint32_t)e->n_past % e->block; /* up to the next boundary */
		uint32_t m = n - i < room ? n - i : room;
		if ((uint32_t)e->n_past + m > e->n_ctx)
			return -1;
		b->n_tokens = (int32_t)m;
		for (uint32_t j = 0; j < m; j++) {
			b->token[j] = tok[i + j];
			b->pos[j] = e->n_past + (int32_t)j;
			b->n_seq_id[j] = 1;
			b->seq_id[j][0] = 0;
			b->logits[j] = j == m - 1;
		}
		if (llama_decode(e->ctx, *b) != 0)
			return -1;
		const float *lg = llama_get_logits_ith(e->ctx, (int32_t)m - 1);
		if (!lg)
			return -1;
		memcpy(e->logits, lg, (size_t)e->n_vocab * sizeof(float));
		e->have_logits = 1;
		e->n_past += (int32_t)m;
		i += m;
		if (on_boundary && e->n_past % e->block == 0 && on_boundary(e, ctx))
			return -1;
	}
	return 0;
}

int32_t eng_greedy(const struct eng *e)
{
	int32_t best = 0;
	for (int32_t i = 1; i < e->n_vocab; i++)
		if (e->logits[i] > e->logits[best])
			best = i;
	return best;
}

size_t eng_state_size(struct eng *e)
{
	return llama_state_seq_get_size(e->ctx, 0);
}

size_t eng_state_get(struct eng *e, void *buf, size_t cap)
{
	return llama_state_seq_get_data(e->ctx, buf, cap, 0);
}

int eng_state_set(struct eng *e, const void *state, size_t len, int32_t n_tokens, const float *logits)
{
	eng_reset(e);
	if (llama_state_seq_set_data(e->ctx, state, len, 0) != len) {
		eng_reset(e);
		return -1;
	}
	e->n_past = n_tokens;
	memcpy(e->logits, logits, (size_t)e->n_vocab * sizeof(float));
	e->have_logits = 1;
	return 0;
}

struct eng *eng_new(const char *libdir, const char *model_path, uint32_t n_ctx, uint32_t block, int threads,
		    int flash_attn, char *err, size_t errlen)
{
	struct eng *e = malloc(sizeof(*e));
	struct eng_opts o = { .n_ctx = n_ctx, .block = block, .threads = threads, .flash_attn = flash_attn };
	if (!e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (eng_open(e, libdir ? libdir : SC_LLAMA_LIBDIR, model_path, &o, 0, err, errlen)) {
		free(e);
		return NULL;
	}
	return e;
}

void eng_free(struct eng *e)
{
	if (e) {
		eng_close(e);
		free(e);
	}
}

int32_t eng_n_past(const struct eng *e)
{
	return e->n_past;
}

int32_t eng_n_vocab(const struct eng *e)
{
	return e->n_vocab;
}

const float *eng_logits(const struct eng *e)
{
	return e->logits;
}

const char *eng_desc(const struct eng *e)
{
	return e->desc;
}

int eng_state_version(void)
{
	return LLAMA_STATE_SEQ_VERSION;
}
