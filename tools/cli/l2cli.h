/* tools/cli/l2cli.h — argument helpers shared by the L2 subcommands (defined in tools/cli/l2cli.c). */
#ifndef SC_TOOLS_L2CLI_H
#define SC_TOOLS_L2CLI_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "stagecache.h"

struct l2cli_args {
	const char *dir, *name, *model, *state, *ns, *tokens_spec;
	int32_t *tokens;
	size_t n;
	struct sc_arena *a; /* l2cli_open's; l2cli_close closes them and frees tokens */
	struct sc_stage *st;
};

/* The arena name, --model, --state (non-empty, at most SC_IDENTITY_MAX bytes) and --ns (at most
 * @ns_max bytes) of @x, those that are set: 0 or a usage error naming the one that is wrong. */
int l2cli_check_args(const char *cmd, const struct l2cli_args *x, size_t ns_max);
/* The opening of an L2 command: its options (the shared ones: --dir, --model, --state, --ns,
 * --tokens, --owner; and the table @own), --help (prints @usage), then the one operand NAME into @x and l2cli_check_args.
 * 0 to carry on, CLI_HELP, or the exit status of a usage error. */
int l2cli_parse(const char *cmd, int argc, char **argv, void (*usage)(FILE *), const struct cli_opt *own,
		struct l2cli_args *x);
/* A prefix is required (--model, --state, --tokens): parse the tokens into @x. 0 or an exit status. */
int l2cli_prefix(const char *cmd, struct l2cli_args *x);
/* Parse "1,2,3" or "@file"; prints its own error and returns an exit status (2: bad syntax, 1:
 * the file cannot be read). */
int l2cli_parse_tokens(const char *cmd, const char *spec, int32_t **out, size_t *n);
/* Open the arena and the stage into x->a, x->st; prints its own error and returns an exit status.
 * On failure both are NULL. */
int l2cli_open(const char *cmd, struct l2cli_args *x);
/* Close what l2cli_open opened and free the tokens (whatever of it there is). */
void l2cli_close(struct l2cli_args *x);
/* Print an entry (one line, or one JSON object). */
void l2cli_print_info(const struct sc_l2_entry_info *e, int json, uint64_t now_ns);
/* The same with the entry's token ids (@ids, @nids; NULL: none); with them the JSON object is
 * the key, stage, token count, digest and "token_ids" only. */
void l2cli_print_info_ids(const struct sc_l2_entry_info *e, int json, uint64_t now_ns, const int32_t *ids,
			  uint64_t nids);
/* Token ids as a comma-separated list (JSON array contents). */
void l2cli_print_ids(const int32_t *ids, uint64_t n);
const char *l2cli_kind_name(uint32_t kind);
/* A payload read from files for put: sections, optional descriptor, and the sc_payload over them. */
struct l2cli_payload {
	uint8_t *b0, *b1;
	uint64_t l0, l1;
	struct sc_kv_desc desc;
	struct sc_payload p;
};
/* --kind @kind_s (full_state, recurrent_only, kv_recurrent; short and upper-case spellings too)
 * into *@kind, and the payload files that kind takes (--file @file; or --kv-file @kvf,
 * --recurrent-file @recf, --desc-json @descf): 0 or a usage error. */
int l2cli_payload_kind(const char *cmd, const char *kind_s, const char *file, const char *kvf, const char *recf,
		       const char *descf, uint32_t *kind);
/* Read section 0 (@f0), section 1 (@recf) and a descriptor JSON (@descf), each optional; prints its
 * own error and returns an exit status. Free with l2cli_payload_free (also after a failure). */
int l2cli_load_payload(const char *cmd, uint32_t kind, const char *f0, const char *recf, const char *descf,
		       struct l2cli_payload *out);
void l2cli_payload_free(struct l2cli_payload *p);
/* Parse a KV descriptor JSON object; 0 or -1. */
int l2cli_parse_desc(const char *text, struct sc_kv_desc *d);
/* Explain an sc_l3_open error @rc about @dir (opened with @o) in one line; EXIT_FAIL. */
int l3cli_open_error(const char *cmd, int rc, const char *dir, const struct sc_l3_opts *o);
/* Which admission rule @p breaks (an -EINVAL from sc_l2_admit or sc_l3_put), in words. */
const char *l2cli_explain_payload(const struct sc_payload *p, char *buf, size_t n);

#endif
