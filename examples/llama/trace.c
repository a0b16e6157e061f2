/*
 * examples/llama/trace.c — see trace.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

static uint64_t next(uint64_t *s) /* splitmix64: the same trace on every machine */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t uniform(uint64_t *s, uint32_t lo, uint32_t hi)
{
	return hi <= lo ? lo : lo + (uint32_t)(next(s) % (uint64_t)(hi - lo + 1));
}

static int32_t *tokens(uint64_t *s, uint32_t n, int32_t vocab)
{
	int32_t *t = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
	if (t)
		for (uint32_t i = 0; i < n; i++)
			t[i] = 3 + (int32_t)(next(s) % (uint64_t)(vocab - 3));
	return t;
}

int trace_make(struct trace *t, const struct trace_opts *in)
{
	memset(t, 0, sizeof(*t));
	struct trace_opts o = *in;
#define DEF(f, v) if (!o.f) o.f = v
	DEF(conversations, 8);
	DEF(turns_min, 3);
	DEF(turns_max, 5);
	DEF(systems, 4);
	DEF(system_min, 512);
	DEF(system_max, 1024);
	DEF(user_min, 32);
	DEF(user_max, 160);
	DEF(generate, 32);
	DEF(seed, 25);
#undef DEF
	if (o.zipf <= 0)
		o.zipf = 1.1;
	if (o.vocab <= 3 || o.turns_max < o.turns_min || o.system_max < o.system_min || o.user_max < o.user_min)
		return -1;
	t->o = o;
	uint64_t s = o.seed;
	t->system = calloc(o.systems, sizeof(*t->system));
	t->system_len = calloc(o.systems, sizeof(*t->system_len));
	t->conv = calloc(o.conversations, sizeof(*t->conv));
	double *cdf = calloc(o.systems, sizeof(double));
	if (!t->system || !t->system_len || !t->conv || !cdf) {
		free(cdf);
		return -1;
	}
	double sum = 0;
	for (uint32_t i = 0; i < o.systems; i++) {
		t->system_len[i] = uniform(&s, o.system_min, o.system_max);
		if (!(t->system[i] = tokens(&s, t->system_len[i], o.vocab)))
			goto oom;
		sum += 1.0 / pow((double)(i + 1), o.zipf);
		cdf[i] = sum;
	}
	for (uint32_t c = 0; c < o.conversations; c++) {
		struct trace_conv *v = &t->conv[c];
		double u = (double)(next(&s) >> 11) / 9007199254740992.0 * sum;
		while (v->system + 1 < o.systems && u > cdf[v->system])
			v->system++;
		v->turns = uniform(&s, o.turns_min, o.turns_max);
		v->user_len = calloc(v->turns, sizeof(uint32_t));
		v->user = calloc(v->turns, sizeof(int32_t *));
		if (!v->user_len || !v->user)
			goto oom;
		for (uint32_t k = 0; k < v->turns; k++) {
			v->user_len[k] = uniform(&s, o.user_min, o.user_max);
			if (!(v->user[k] = tokens(&s, v->user_len[k], o.vocab)))
				goto oom;
		}
		t->requests += v->turns;
	}
	free(cdf);
	return 0;
oom:
	free(cdf);
	trace_free(t);
	return -1;
}

void trace_free(struct trace *t)
{
	for (uint32_t i = 0; t->system && i < t->o.systems; i++)
		free(t->system[i]);
	for (uint32_t c = 0; t->conv && c < t->o.conversations; c++) {
		for (uint32_t k = 0; t->conv[c].user && k < t->conv[c].turns; k++)
			free(t->conv[c].user[k]);
		free(t->conv[c].user);
		free(t->conv[c].user_len);
	}
	free(t->system);
	free(t->system_len);
	free(t->conv);
	memset(t, 0, sizeof(*t));
}
