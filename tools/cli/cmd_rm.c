/* tools/cli/cmd_rm.c — `stagecache rm NAME (--key HEX | --model M --state S [--ns NS] --tokens LIST|@FILE)`. */
#include <errno.h>
#include <stdlib.h>

#include "cli.h"
#include "l2cli.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: stagecache rm NAME --key HEX [--dir DIR] [--owner USER]\n"
		   "       stagecache rm NAME --model M --state S [--ns NS] --tokens LIST|@FILE [--dir DIR] [--owner USER]\n\n"
		   "Remove one L2 entry, by its key (as 'ls' prints it) or by its prefix. A leased entry\n"
		   "disappears at once; its memory follows when the last lease is released.\n");
}

/* Remove the entry @key (NULL: the key of @x's prefix); an exit status. */
static int rm(const struct l2cli_args *x, const struct sc_key *key)
{
	struct sc_key k;
	if (key)
		k = *key;
	else
		sc_l2_key(x->st, x->ns, x->tokens, x->n, &k);
	int rc = sc_l2_remove(x->st, k);
	if (rc == -ENOENT)
		return cli_fail("rm", 0, "no such L2 entry");
	if (rc)
		return cli_l2_error("rm", rc, x->name, "cannot remove");
	char kh[33];
	printf("removed %s\n", sc_digest_format((struct sc_digest){ k.lo, k.hi }, kh));
	return EXIT_OK;
}

int cmd_rm(int argc, char **argv)
{
	struct l2cli_args x = { .ns = "" };
	const char *key_s = NULL;
	const struct cli_opt own[] = { { "key", CLI_STR, &key_s }, { 0 } };
	int rc = l2cli_parse("rm", argc, argv, usage, own, &x);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	struct sc_key key;
	if (key_s) {
		struct sc_digest d;
		if (x.model || x.state || x.tokens_spec)
			return cli_usage_error("rm", "--key or a prefix (--model/--state/--tokens), not both");
		if (sc_digest_parse(key_s, &d))
			return cli_usage_error("rm", "--key '%s': want 32 hex characters", cli_q(key_s));
		key = (struct sc_key){ d.lo, d.hi };
		/* a key names its stage already; any stage handle of the arena can remove it */
		x.model = "-";
		x.state = "-";
	} else if (!x.model || !x.state || !x.tokens_spec) {
		return cli_usage_error("rm", "give --key, or --model, --state and --tokens");
	} else if ((rc = l2cli_parse_tokens("rm", x.tokens_spec, &x.tokens, &x.n))) {
		return rc;
	}
	if ((rc = l2cli_open("rm", &x)) == EXIT_OK)
		rc = rm(&x, key_s ? &key : NULL);
	l2cli_close(&x);
	return rc;
}
