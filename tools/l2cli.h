/* tools/l2cli.h — argument helpers shared by the L2 subcommands (defined in tools/cmd_put.c). */
#ifndef SC_TOOLS_L2CLI_H
#define SC_TOOLS_L2CLI_H

#include <stdint.h>
#include <stdio.h>

#include "stagecache.h"

struct l2cli_args {
	const char *dir, *name, *model, *state, *ns, *tokens_spec;
	int32_t *tokens;
	size_t n;
};

/* The options the L2 subcommands share: --dir (d), --model (m), --state (s), --ns (n),
 * --tokens (t). Returns 1 when @c was one of them (and stores @arg), else 0. */
int l2cli_common_opt(int c, const char *arg, struct l2cli_args *x);
/* Read a whole file (malloc'd). 0 or -errno. */
int l2cli_read_file(const char *path, uint8_t **buf, uint64_t *len);
/* Parse "1,2,3" or "@file"; prints its own error and returns an exit status. */
int l2cli_parse_tokens(const char *cmd, const char *spec, int32_t **out, size_t *n);
/* Open the arena and the stage; prints its own error and returns an exit status. */
int l2cli_open(const char *cmd, const struct l2cli_args *x, struct sc_arena **a, struct sc_stage **st);
/* Print an entry (one line, or one JSON object). */
void l2cli_print_info(const struct sc_l2_entry_info *e, int json, uint64_t now_ns);
const char *l2cli_kind_name(uint32_t kind);
/* A payload read from files for put: sections, optional descriptor, and the sc_payload over them. */
struct l2cli_payload {
	uint8_t *b0, *b1;
	uint64_t l0, l1;
	struct sc_kv_desc desc;
	struct sc_payload p;
};
/* Read section 0 (@f0), section 1 (@recf) and a descriptor JSON (@descf), each optional; prints its
 * own error and returns an exit status. Free with l2cli_payload_free (also after a failure). */
int l2cli_load_payload(const char *cmd, uint32_t kind, const char *f0, const char *recf, const char *descf,
		       struct l2cli_payload *out);
void l2cli_payload_free(struct l2cli_payload *p);
/* Parse a KV descriptor JSON object; 0 or -1. */
int l2cli_parse_desc(const char *text, struct sc_kv_desc *d);

#endif
