/*
 * tools/cli/l2cli.c — what the L2 subcommands (put, get, peek, rm, restore, l3) share: the prefix
 * options, token lists, payload files, the KV descriptor JSON, opening the arena and stage, and
 * saying which admission rule a refused payload broke.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "l2cli.h"

int l2cli_check_args(const char *cmd, const struct l2cli_args *x, size_t ns_max)
{
	int rc;
	if (x->name && (rc = cli_check_name(cmd, x->name)))
		return rc;
	if (x->model && (rc = cli_check_identity(cmd, "--model", x->model, SC_IDENTITY_MAX, 0)))
		return rc;
	if (x->state && (rc = cli_check_identity(cmd, "--state", x->state, SC_IDENTITY_MAX, 0)))
		return rc;
	if (x->ns && (rc = cli_check_identity(cmd, "--ns", x->ns, ns_max, 1)))
		return rc;
	return 0;
}

int l2cli_payload_kind(const char *cmd, const char *kind_s, const char *file, const char *kvf, const char *recf,
		       const char *descf, uint32_t *kind)
{
	if (!strcmp(kind_s, "full_state") || !strcmp(kind_s, "full") || !strcmp(kind_s, "FULL_STATE"))
		*kind = SC_PAYLOAD_FULL_STATE;
	else if (!strcmp(kind_s, "recurrent_only") || !strcmp(kind_s, "recurrent") || !strcmp(kind_s, "RECURRENT_ONLY"))
		*kind = SC_PAYLOAD_RECURRENT_ONLY;
	else if (!strcmp(kind_s, "kv_recurrent") || !strcmp(kind_s, "kv") || !strcmp(kind_s, "KV_RECURRENT"))
		*kind = SC_PAYLOAD_KV_RECURRENT;
	else
		return cli_usage_error(cmd, "--kind '%s': want full_state, recurrent_only or kv_recurrent", cli_q(kind_s));
	if (*kind == SC_PAYLOAD_KV_RECURRENT ? (file != NULL || (!kvf && !recf)) : (!file || kvf || recf || descf))
		return cli_usage_error(cmd, *kind == SC_PAYLOAD_KV_RECURRENT
						    ? "--kind kv_recurrent takes --kv-file/--recurrent-file (and --desc-json), not --file"
						    : "--kind %s takes --file (and no --kv-file, --recurrent-file or --desc-json)",
				       kind_s);
	return 0;
}

int l2cli_load_payload(const char *cmd, uint32_t kind, const char *f0, const char *recf, const char *descf,
		       struct l2cli_payload *out)
{
	int rc;
	memset(out, 0, sizeof(*out));
	if (f0 && (rc = cli_read_input(cmd, kind == SC_PAYLOAD_KV_RECURRENT ? "--kv-file" : "--file", f0, &out->b0, &out->l0)))
		return rc;
	if (recf && (rc = cli_read_input(cmd, "--recurrent-file", recf, &out->b1, &out->l1)))
		return rc;
	int have_desc = 0;
	if (descf) {
		uint8_t *dj;
		uint64_t djl;
		if ((rc = cli_read_input(cmd, "--desc-json", descf, &dj, &djl)))
			return rc;
		rc = l2cli_parse_desc((char *)dj, &out->desc);
		free(dj);
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

/* Which rule of sc_kv_desc_validate @d breaks for a KV section of @len bytes (NULL: none). */
static const char *desc_rule(const struct sc_kv_desc *d, uint64_t len, char *buf, size_t n)
{
	const struct sc_kv_component *b = &d->components[0], *w = &d->components[1];
	if (d->payload_bytes != len)
		snprintf(buf, n, "the descriptor's payload_bytes (%llu) is not the KV section's length (%llu)",
			 (unsigned long long)d->payload_bytes, (unsigned long long)len);
	else if (d->flags & ~SC_KV_DESC_FLAGS_MASK)
		snprintf(buf, n, "the descriptor's flags %#x have unknown bits (known: 0x1 v_transposed, 0x2 has_k_index)",
			 d->flags);
	else if ((d->k_idx_row_bytes > 0) != ((d->flags & SC_KV_DESC_HAS_K_INDEX) != 0))
		snprintf(buf, n, "the descriptor's k_idx_row_bytes (%llu) must be > 0 exactly when flag 0x2 (has_k_index) is set",
			 (unsigned long long)d->k_idx_row_bytes);
	else if ((d->codec == SC_KV_CODEC_RAW || d->codec == SC_KV_CODEC_1) && d->component_count)
		snprintf(buf, n, "codec %u takes no components (the descriptor has %u)", d->codec, d->component_count);
	else if (d->codec != SC_KV_CODEC_RAW && d->codec != SC_KV_CODEC_1 && d->codec != SC_KV_CODEC_ISWA)
		snprintf(buf, n, "unknown codec %u (0 raw, 1, 2 iswa)", d->codec);
	else if (d->codec == SC_KV_CODEC_ISWA && (d->version != 2 || d->component_count != 2))
		snprintf(buf, n, "codec 2 (iswa) needs version 2 and exactly two components (has version %u, %u components)",
			 d->version, d->component_count);
	else if (d->codec == SC_KV_CODEC_ISWA && (b->role != SC_KV_ROLE_BASE || w->role != SC_KV_ROLE_SWA))
		snprintf(buf, n, "iswa components must be the base (role 1) then the sliding window (role 2)");
	else if (d->codec == SC_KV_CODEC_ISWA &&
		 (b->payload_offset || b->token_start != d->token_start || b->token_count != d->token_count))
		snprintf(buf, n, "the iswa base component must start at offset 0 and cover the descriptor's tokens");
	else if (d->codec == SC_KV_CODEC_ISWA && w->token_start + w->token_count != b->token_start + b->token_count)
		snprintf(buf, n, "the iswa window must end at the same token as the base");
	else if (d->codec == SC_KV_CODEC_ISWA)
		snprintf(buf, n, "the iswa window must start at offset base.payload_bytes and end at the KV section's end");
	else
		return NULL;
	return buf;
}

const char *l2cli_explain_payload(const struct sc_payload *p, char *buf, size_t n)
{
	uint64_t l0 = p->sec_len[0], l1 = p->sec_len[1];
	if (!l0 && !l1)
		snprintf(buf, n, "the payload is empty (0 bytes)");
	else if (p->kind == SC_PAYLOAD_KV_RECURRENT && l0 && !p->kv_desc)
		snprintf(buf, n, "a KV section (--kv-file) needs its descriptor (--desc-json)");
	else if (p->kind == SC_PAYLOAD_KV_RECURRENT && !l0 && p->kv_desc)
		snprintf(buf, n, "--desc-json describes a KV section, but the KV section is empty");
	else if (p->kind != SC_PAYLOAD_KV_RECURRENT && (l1 || p->kv_desc))
		snprintf(buf, n, "%s has one section and no descriptor", l2cli_kind_name(p->kind));
	else if (p->kv_desc && desc_rule(p->kv_desc, l0, buf, n))
		;
	else
		snprintf(buf, n, "the sections and the descriptor do not agree");
	return buf;
}

int l2cli_parse_tokens(const char *cmd, const char *spec, int32_t **out, size_t *n)
{
	uint8_t *fbuf = NULL;
	uint64_t flen = 0;
	const char *s = spec;
	if (spec[0] == '@') {
		int rc = cli_read_input(cmd, "--tokens", spec + 1, &fbuf, &flen);
		if (rc)
			return rc;
		if (memchr(fbuf, 0, flen)) {
			free(fbuf);
			return cli_usage_error(cmd, "--tokens: %s holds a NUL byte (want integers separated by commas)", spec + 1);
		}
		s = (const char *)fbuf;
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
			char near[24];
			snprintf(near, sizeof(near), "%.20s", p);
			near[strcspn(near, "\n")] = 0;
			rc = cli_usage_error(cmd, "--tokens: bad token '%s' after %zu tokens (want int32 integers separated by commas)",
					     cli_q(near), k);
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
		return cli_fail(cmd, 0, "--tokens: out of memory");
	if (rc == EXIT_OK && k == 0)
		rc = cli_usage_error(cmd, "--tokens: no tokens in '%s'", cli_q(spec));
	if (rc != EXIT_OK) {
		free(t);
		return rc;
	}
	*out = t;
	*n = k;
	return EXIT_OK;
}

int l2cli_open(const char *cmd, struct l2cli_args *x)
{
	x->st = NULL;
	int rc = cli_open_arena(cmd, x->dir, x->name, &x->a);
	if (rc)
		return rc;
	rc = sc_stage_open(x->a, x->model, x->state, &x->st);
	if (rc) {
		sc_arena_close(x->a);
		x->a = NULL;
		return cli_l2_error(cmd, rc, x->name, "cannot open the stage");
	}
	return EXIT_OK;
}

void l2cli_close(struct l2cli_args *x)
{
	sc_stage_close(x->st);
	sc_arena_close(x->a);
	free(x->tokens);
	x->st = NULL;
	x->a = NULL;
	x->tokens = NULL;
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
	l2cli_print_info_ids(e, json, now_ns, NULL, 0);
}

void l2cli_print_ids(const int32_t *ids, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		printf(i ? ",%d" : "%d", ids[i]);
}

void l2cli_print_info_ids(const struct sc_l2_entry_info *e, int json, uint64_t now_ns, const int32_t *ids, uint64_t nids)
{
	char key[33], dig[33];
	sc_digest_format((struct sc_digest){ e->key.lo, e->key.hi }, key);
	sc_digest_format(e->digest, dig);
	double age = e->created_unix_ns && now_ns > e->created_unix_ns ? (double)(now_ns - e->created_unix_ns) / 1e9 : 0;
	if (json && ids) {
		printf("{\"key\":\"%s\",\"stage\":\"%016llx\",\"tokens\":%llu,\"digest\":\"%s\",\"token_ids\":[", key,
		       (unsigned long long)e->stage_id, (unsigned long long)e->token_count, dig);
		l2cli_print_ids(ids, nids);
		printf("]}\n");
		return;
	}
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


int l3cli_open_error(const char *cmd, int rc, const char *dir, const struct sc_l3_opts *o)
{
	struct stat st;
	int have = stat(dir, &st) == 0;
	switch (rc) {
	case -ENOENT:
		if (!have)
			return cli_fail(cmd, 0, "L3 directory %s does not exist", dir);
		if (o && (o->flags & SC_L3_OPEN_NO_CREATE))
			return cli_fail(cmd, 0, "%s is not an L3 directory (no %s/state; 'stagecache l3 put %s ...' makes one)",
					dir, dir, dir);
		return cli_fail(cmd, 0, "cannot open L3 directory %s: part of it is missing", dir);
	case -ENOTDIR:
		return cli_fail(cmd, 0, "%s is not a directory", dir);
	case -EACCES:
		if (have)
			return cli_fail(cmd, 0, "permission denied: L3 directory %s (mode %04o, owner uid %u, group %u) or a "
					"file in it", dir, st.st_mode & 07777, st.st_uid, st.st_gid);
		return cli_fail(cmd, 0, "permission denied: cannot open L3 directory %s", dir);
	case -EPERM:
		if (o && o->gid > 0)
			return cli_fail(cmd, 0, "cannot give the files of %s to group %lld: you are not a member of it", dir,
					(long long)o->gid);
		return cli_fail(cmd, 0, "cannot open L3 directory %s: %s", dir, strerror(EPERM));
	case -EBADMSG:
		return cli_fail(cmd, 0, "%s/state is not an L3 state file (garbage, or not a regular file)", dir);
	case -ELOOP:
		return cli_fail(cmd, 0, "L3 directory %s holds a symbolic link where a directory or file of its own belongs",
				dir);
	case -EINVAL:
		if (o && o->host_id)
			return cli_fail(cmd, 0, "cannot open L3 directory %s: --host '%s': want 1-%u of A-Z a-z 0-9 _ -", dir,
					cli_q(o->host_id), SC_L3_HOST_ID_MAX);
		return cli_fail(cmd, 0, "cannot open L3 directory %s: %s", dir, strerror(EINVAL));
	default:
		return cli_fail(cmd, 0, "cannot open L3 directory %s: %s", dir, strerror(-rc));
	}
}

int l2cli_parse(const char *cmd, int argc, char **argv, void (*usage)(FILE *), const struct cli_opt *own,
		struct l2cli_args *x)
{
	enum { NCOMMON = 6, MAX_OWN = 16 };
	struct cli_opt t[NCOMMON + MAX_OWN + 1] = {
		{ "dir", CLI_STR, &x->dir },        { "model", CLI_STR, &x->model },
		{ "state", CLI_STR, &x->state },    { "ns", CLI_STR, &x->ns },
		{ "tokens", CLI_STR, &x->tokens_spec }, { "owner", CLI_OWNER },
	};
	int n = 0;
	for (; own[n].name; n++) {
		if (n == MAX_OWN)
			return cli_usage_error(cmd, "internal error: more than %d options", MAX_OWN);
		t[NCOMMON + n] = own[n];
	}
	t[NCOMMON + n] = (struct cli_opt)CLI_OPERAND("NAME", &x->name);
	int rc = cli_parse_opts(cmd, argc, argv, t, usage);
	return rc ? rc : l2cli_check_args(cmd, x, SC_IDENTITY_MAX);
}

int l2cli_prefix(const char *cmd, struct l2cli_args *x)
{
	if (!x->model || !x->state || !x->tokens_spec)
		return cli_usage_error(cmd, "--model, --state and --tokens are required");
	return l2cli_parse_tokens(cmd, x->tokens_spec, &x->tokens, &x->n);
}
