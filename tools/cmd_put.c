/*
 * tools/cmd_put.c — `stagecache put NAME --model M --state S --ns NS --tokens 1,2,3|@file --kind K
 * --file PAYLOAD | --kv-file F --recurrent-file F --desc-json F [--origin direct|l3] [--json]`.
 *
 * Also holds the argument helpers the other L2 subcommands share (get, peek, rm: l2cli_*).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "l2cli.h"

/* ---- shared helpers ---- */

int l2cli_common_opt(int c, const char *arg, struct l2cli_args *x)
{
	switch (c) {
	case 'd': x->dir = arg; return 1;
	case 'm': x->model = arg; return 1;
	case 's': x->state = arg; return 1;
	case 'n': x->ns = arg; return 1;
	case 't': x->tokens_spec = arg; return 1;
	default: return 0;
	}
}

int l2cli_read_file(const char *path, uint8_t **buf, uint64_t *len)
{
	FILE *f = fopen(path, "rb");
	*buf = NULL;
	*len = 0;
	if (!f)
		return -errno;
	uint64_t cap = 1 << 16, n = 0;
	uint8_t *b = malloc(cap);
	while (b) {
		size_t r = fread(b + n, 1, cap - n, f);
		n += r;
		if (n < cap)
			break;
		uint8_t *nb = realloc(b, cap * 2);
		if (!nb) {
			free(b);
			b = NULL;
			break;
		}
		b = nb;
		cap *= 2;
	}
	int err = ferror(f) ? -EIO : 0;
	fclose(f);
	if (!b)
		return -ENOMEM;
	if (err) {
		free(b);
		return err;
	}
	*buf = b;
	*len = n;
	return 0;
}

/* "1,2,3" (commas or blanks) or "@file" with the same syntax inside. */
int l2cli_load_payload(const char *cmd, uint32_t kind, const char *f0, const char *recf, const char *descf,
		       struct l2cli_payload *out)
{
	int rc;
	memset(out, 0, sizeof(*out));
	if (f0 && (rc = l2cli_read_file(f0, &out->b0, &out->l0)))
		return cli_fail(cmd, 0, "cannot read %s: %s", f0, strerror(-rc));
	if (recf && (rc = l2cli_read_file(recf, &out->b1, &out->l1)))
		return cli_fail(cmd, 0, "cannot read %s: %s", recf, strerror(-rc));
	int have_desc = 0;
	if (descf) {
		uint8_t *dj;
		uint64_t djl;
		if ((rc = l2cli_read_file(descf, &dj, &djl)))
			return cli_fail(cmd, 0, "cannot read %s: %s", descf, strerror(-rc));
		char *z = realloc(dj, djl + 1);
		if (!z) {
			free(dj);
			return cli_fail(cmd, -ENOMEM, "%s", descf);
		}
		z[djl] = 0;
		rc = l2cli_parse_desc(z, &out->desc);
		free(z);
		if (rc)
			return cli_fail(cmd, 0, "%s: not a KV descriptor JSON object (numbers only, optional \"components\" array)",
					descf);
		have_desc = 1;
	}
	out->p = (struct sc_payload){ .kind = kind, .sec = { out->b0, out->b1 }, .sec_len = { out->l0, out->l1 },
				      .kv_desc = have_desc ? &out->desc : NULL };
	return 0;
}

void l2cli_payload_free(struct l2cli_payload *p)
{
	free(p->b0);
	free(p->b1);
	p->b0 = p->b1 = NULL;
}

int l2cli_parse_tokens(const char *cmd, const char *spec, int32_t **out, size_t *n)
{
	uint8_t *fbuf = NULL;
	uint64_t flen = 0;
	const char *s = spec;
	if (spec[0] == '@') {
		int rc = l2cli_read_file(spec + 1, &fbuf, &flen);
		if (rc)
			return cli_fail(cmd, 0, "cannot read tokens from %s: %s", spec + 1, strerror(-rc));
		char *z = realloc(fbuf, flen + 1);
		if (!z) {
			free(fbuf);
			return cli_fail(cmd, -ENOMEM, "tokens");
		}
		z[flen] = 0;
		fbuf = (uint8_t *)z;
		s = z;
	}
	size_t cap = 64, k = 0;
	int32_t *t = malloc(cap * sizeof(*t));
	const char *p = s;
	int rc = EXIT_OK;
	while (t && *p) {
		while (*p == ',' || isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		char *end;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (end == p || errno || v < INT32_MIN || v > INT32_MAX || (*end && *end != ',' && !isspace((unsigned char)*end))) {
			rc = cli_usage_error(cmd, "bad token list near '%.20s' (want integers separated by commas)", p);
			break;
		}
		if (k == cap) {
			int32_t *nt = realloc(t, cap * 2 * sizeof(*t));
			if (!nt) {
				free(t);
				t = NULL;
				break;
			}
			t = nt;
			cap *= 2;
		}
		t[k++] = (int32_t)v;
		p = end;
	}
	free(fbuf);
	if (!t)
		return cli_fail(cmd, -ENOMEM, "tokens");
	if (rc == EXIT_OK && k == 0)
		rc = cli_usage_error(cmd, "--tokens: no tokens");
	if (rc != EXIT_OK) {
		free(t);
		return rc;
	}
	*out = t;
	*n = k;
	return EXIT_OK;
}

int l2cli_open(const char *cmd, const struct l2cli_args *x, struct sc_arena **a, struct sc_stage **st)
{
	if (cli_open_arena(cmd, x->dir, x->name, a))
		return EXIT_FAIL;
	int rc = sc_stage_open(*a, x->model, x->state, st);
	if (rc) {
		sc_arena_close(*a);
		return cli_fail(cmd, rc, "cannot open stage (model '%s', state '%s')", x->model, x->state);
	}
	return EXIT_OK;
}

const char *l2cli_kind_name(uint32_t k)
{
	switch (k) {
	case SC_PAYLOAD_FULL_STATE: return "full_state";
	case SC_PAYLOAD_RECURRENT_ONLY: return "recurrent_only";
	case SC_PAYLOAD_KV_RECURRENT: return "kv_recurrent";
	default: return "unknown";
	}
}

void l2cli_print_info(const struct sc_l2_entry_info *e, int json, uint64_t now_ns)
{
	char key[33], dig[33];
	sc_digest_format((struct sc_digest){ e->key.lo, e->key.hi }, key);
	sc_digest_format(e->digest, dig);
	double age = e->created_unix_ns && now_ns > e->created_unix_ns ? (double)(now_ns - e->created_unix_ns) / 1e9 : 0;
	if (json)
		printf("{\"key\":\"%s\",\"stage\":\"%016llx\",\"tokens\":%llu,\"bytes\":%llu,\"footprint\":%llu,"
		       "\"digest\":\"%s\",\"kind\":\"%s\",\"origin\":\"%s\",\"age_s\":%.3f,\"frequency\":%u,"
		       "\"sections\":[%llu,%llu],\"kv_desc\":%s}\n",
		       key, (unsigned long long)e->stage_id, (unsigned long long)e->token_count,
		       (unsigned long long)e->bytes, (unsigned long long)e->footprint, dig, l2cli_kind_name(e->kind),
		       e->origin ? "l3" : "direct", age, e->frequency, (unsigned long long)e->sec_len[0],
		       (unsigned long long)e->sec_len[1], e->has_kv_desc ? "true" : "false");
	else
		printf("%s  %016llx  %8llu  %10llu  %s  %-6s  %8.1fs  %u\n", key, (unsigned long long)e->stage_id,
		       (unsigned long long)e->token_count, (unsigned long long)e->bytes, dig, e->origin ? "l3" : "direct",
		       age, e->frequency);
}

/* ---- descriptor JSON: a flat reader for the fields of struct sc_kv_desc ---- */

static const char *skip_ws(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

static int set_field(struct sc_kv_desc *d, int comp, const char *key, uint64_t v)
{
#define F(name) if (!strcmp(key, #name)) { d->name = v; return 0; }
#define C(name) if (!strcmp(key, #name)) { d->components[comp].name = v; return 0; }
	if (comp < 0) {
		F(version) F(layer_start) F(layer_end) F(layer_count) F(token_start) F(token_count) F(k_type) F(v_type)
		F(k_row_bytes) F(v_row_bytes) F(v_element_bytes) F(k_idx_row_bytes) F(payload_bytes) F(flags) F(codec)
		F(component_count)
	} else {
		C(version) C(role) C(token_start) C(token_count) C(k_type) C(v_type) C(k_row_bytes) C(v_row_bytes)
		C(payload_offset) C(payload_bytes) C(flags)
	}
#undef F
#undef C
	return -1;
}

static const char *parse_obj(const char *p, struct sc_kv_desc *d, int comp, int *ncomp);

static const char *parse_value(const char *p, const char *key, struct sc_kv_desc *d, int comp, int *ncomp)
{
	p = skip_ws(p);
	if (*p == '[' && comp < 0 && !strcmp(key, "components")) {
		p = skip_ws(p + 1);
		while (*p == '{') {
			if (*ncomp >= SC_KV_DESC_MAX_COMPONENTS)
				return NULL;
			p = parse_obj(p, d, (*ncomp)++, ncomp);
			if (!p)
				return NULL;
			p = skip_ws(p);
			if (*p == ',')
				p = skip_ws(p + 1);
		}
		return *p == ']' ? p + 1 : NULL;
	}
	if (*p == '-' || !isdigit((unsigned char)*p))
		return NULL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno || set_field(d, comp, key, v))
		return NULL;
	return end;
}

static const char *parse_obj(const char *p, struct sc_kv_desc *d, int comp, int *ncomp)
{
	p = skip_ws(p);
	if (*p != '{')
		return NULL;
	p = skip_ws(p + 1);
	while (*p == '"') {
		char key[64];
		const char *q = strchr(p + 1, '"');
		if (!q || q - p - 1 >= (long)sizeof(key))
			return NULL;
		memcpy(key, p + 1, (size_t)(q - p - 1));
		key[q - p - 1] = 0;
		p = skip_ws(q + 1);
		if (*p != ':')
			return NULL;
		p = parse_value(p + 1, key, d, comp, ncomp);
		if (!p)
			return NULL;
		p = skip_ws(p);
		if (*p == ',')
			p = skip_ws(p + 1);
	}
	return *p == '}' ? p + 1 : NULL;
}

int l2cli_parse_desc(const char *text, struct sc_kv_desc *d)
{
	memset(d, 0, sizeof(*d));
	int ncomp = 0;
	const char *p = parse_obj(text, d, -1, &ncomp);
	return p && !*skip_ws(p) ? 0 : -1;
}

/* ---- put ---- */

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache put NAME --model M --state S [--ns NS] --tokens LIST|@FILE\n"
		   "         --kind full_state|recurrent_only --file PAYLOAD\n"
		   "       stagecache put NAME ... --kind kv_recurrent [--kv-file F --desc-json F] [--recurrent-file F]\n"
		   "         [--origin direct|l3] [--digest HEX] [--dir DIR] [--json]\n\n"
		   "Admit a payload into L2 under the key of (model, state, namespace, tokens). The expected\n"
		   "digest is computed from the files unless --digest gives one (a mismatch is refused).\n"
		   "LIST is integers separated by commas; @FILE reads them from a file.\n");
}

static int parse_kind(const char *s, uint32_t *k)
{
	if (!strcmp(s, "full_state") || !strcmp(s, "full") || !strcmp(s, "FULL_STATE"))
		*k = SC_PAYLOAD_FULL_STATE;
	else if (!strcmp(s, "recurrent_only") || !strcmp(s, "recurrent") || !strcmp(s, "RECURRENT_ONLY"))
		*k = SC_PAYLOAD_RECURRENT_ONLY;
	else if (!strcmp(s, "kv_recurrent") || !strcmp(s, "kv") || !strcmp(s, "KV_RECURRENT"))
		*k = SC_PAYLOAD_KV_RECURRENT;
	else
		return -1;
	return 0;
}

int cmd_put(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, 0, 'd' },       { "model", required_argument, 0, 'm' },
		{ "state", required_argument, 0, 's' },     { "ns", required_argument, 0, 'n' },
		{ "tokens", required_argument, 0, 't' },    { "kind", required_argument, 0, 'k' },
		{ "file", required_argument, 0, 'f' },      { "kv-file", required_argument, 0, 'K' },
		{ "recurrent-file", required_argument, 0, 'R' }, { "desc-json", required_argument, 0, 'D' },
		{ "origin", required_argument, 0, 'o' },    { "digest", required_argument, 0, 'g' },
		{ "json", no_argument, 0, 'j' },            { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct l2cli_args x = { .ns = "" };
	const char *kind_s = NULL, *file = NULL, *kvf = NULL, *recf = NULL, *descf = NULL, *origin_s = "direct",
		   *digest_s = NULL;
	int json = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'k': kind_s = optarg; break;
		case 'f': file = optarg; break;
		case 'K': kvf = optarg; break;
		case 'R': recf = optarg; break;
		case 'D': descf = optarg; break;
		case 'o': origin_s = optarg; break;
		case 'g': digest_s = optarg; break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default:
			if (l2cli_common_opt(c, optarg, &x))
				break;
			return cli_usage_error("put", "unknown option");
		}
	}
	if (optind != argc - 1)
		return cli_usage_error("put", optind >= argc ? "missing NAME" : "too many arguments");
	x.name = argv[optind];
	if (!x.model || !x.state || !x.tokens_spec || !kind_s)
		return cli_usage_error("put", "--model, --state, --tokens and --kind are required");
	uint32_t kind, origin;
	if (parse_kind(kind_s, &kind))
		return cli_usage_error("put", "unknown --kind '%s' (full_state, recurrent_only, kv_recurrent)", kind_s);
	if (!strcmp(origin_s, "direct"))
		origin = SC_ORIGIN_DIRECT;
	else if (!strcmp(origin_s, "l3") || !strcmp(origin_s, "from_l3"))
		origin = SC_ORIGIN_FROM_L3;
	else
		return cli_usage_error("put", "unknown --origin '%s' (direct, l3)", origin_s);
	if (kind == SC_PAYLOAD_KV_RECURRENT ? (file != NULL || (!kvf && !recf)) : (!file || kvf || recf || descf))
		return cli_usage_error("put", kind == SC_PAYLOAD_KV_RECURRENT
						      ? "kv_recurrent takes --kv-file/--recurrent-file (and --desc-json), not --file"
						      : "this kind takes --file only");
	struct sc_digest want;
	if (digest_s && sc_digest_parse(digest_s, &want))
		return cli_usage_error("put", "--digest: want 32 hex characters");

	int rc = l2cli_parse_tokens("put", x.tokens_spec, &x.tokens, &x.n);
	if (rc)
		return rc;
	struct l2cli_payload pl;
	int ret = EXIT_FAIL;
	struct sc_arena *a = NULL;
	struct sc_stage *st = NULL;
	if (l2cli_load_payload("put", kind, kind == SC_PAYLOAD_KV_RECURRENT ? kvf : file, recf, descf, &pl))
		goto cleanup;
	uint64_t l0 = pl.p.sec_len[0], l1 = pl.p.sec_len[1];
	if (!digest_s)
		want = sc_digest_sections(pl.p.sec[0], l0, pl.p.sec[1], l1);
	if (l2cli_open("put", &x, &a, &st))
		goto cleanup;
	rc = sc_l2_admit(st, x.ns, x.tokens, x.n, want, &pl.p, origin);
	if (rc) {
		const char *why = rc == -EBADMSG ? "the payload's digest is not the expected one"
				  : rc == -EINVAL ? "empty payload, or sections and descriptor do not agree"
				  : rc == -E2BIG ? "larger than the L2 budget"
				  : rc == -ENOSPC ? "could not make room (everything else is leased)"
						  : "admission failed";
		cli_fail("put", rc == -EBADMSG || rc == -EINVAL || rc == -E2BIG || rc == -ENOSPC ? 0 : rc, "%s", why);
		goto cleanup;
	}
	struct sc_key key;
	sc_l2_key(st, x.ns, x.tokens, x.n, &key);
	char kh[33], dh[33];
	sc_digest_format((struct sc_digest){ key.lo, key.hi }, kh);
	sc_digest_format(want, dh);
	if (json)
		printf("{\"key\":\"%s\",\"stage\":\"%016llx\",\"tokens\":%zu,\"bytes\":%llu,\"digest\":\"%s\"}\n", kh,
		       (unsigned long long)sc_stage_id(st), x.n, (unsigned long long)(l0 + l1), dh);
	else
		printf("admitted %s (%zu tokens, %llu bytes, digest %s)\n", kh, x.n, (unsigned long long)(l0 + l1), dh);
	ret = EXIT_OK;
cleanup:
	sc_stage_close(st);
	sc_arena_close(a);
	l2cli_payload_free(&pl);
	free(x.tokens);
	return ret;
}
