#!/usr/bin/python3
"""examples/llama/gen-model.py — write a deterministic random-weight GGUF of the llama architecture.

No weights can be downloaded where stagecache is built and tested, and the example does not need
good ones: it needs a real llama.cpp model whose prefill costs what a model of that shape costs,
and whose state restores exactly. The weights are drawn from numpy's PCG64 with a fixed seed, so
one size and seed always give the same bytes (the model identity the worker derives from the
file's digest is stable across machines).

usage: gen-model.py [--size tiny|small|base] [--seed N] [--gguf-py DIR] OUT.gguf
  tiny   4 layers, 256 wide, 4 heads (2 KV), FFN 512,  vocab 2048, context 4096   (~7 MB; tests)
  small  6 layers, 512 wide, 8 heads (2 KV), FFN 1408, vocab 4096, context 16384  (~45 MB)
  base  12 layers, 768 wide, 12 heads (4 KV), FFN 2048, vocab 8192, context 32768 (~175 MB;
        bench and demo: prefill is costly on two cores)
The GGUF writer is llama.cpp's own gguf-py, from the engine `make deps` installs (--gguf-py,
default build/llama/gguf-py); numpy is Debian's python3-numpy.
"""
import argparse
import os
import sys

SIZES = {
    # name: layers, width, heads, kv heads, ffn, vocab, context
    "tiny": (4, 256, 4, 2, 512, 2048, 4096),
    "small": (6, 512, 8, 2, 1408, 4096, 16384),
    "base": (12, 768, 12, 4, 2048, 8192, 32768),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("out")
    ap.add_argument("--size", choices=sorted(SIZES), default="base")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--gguf-py", default="build/llama/gguf-py")
    a = ap.parse_args()
    if not os.path.isdir(a.gguf_py):
        sys.exit("gen-model: %s: no gguf-py (run `make deps`: it installs the llama.cpp engine)" % a.gguf_py)
    sys.path.insert(0, a.gguf_py)
    import numpy as np
    import gguf

    n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, n_ctx = SIZES[a.size]
    hd = n_embd // n_head
    rng = np.random.Generator(np.random.PCG64(a.seed))

    def mat(rows, cols):
        # N(0, 1/cols): activations keep their scale through each projection
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)).astype(np.float16)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    tmp = a.out + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name("stagecache-random-%s-seed%d" % (a.size, a.seed))
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    # a plain SentencePiece-style vocabulary: the worker takes token ids, never text
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    toks = [b"<unk>", b"<s>", b"</s>"] + [("<t%d>" % i).encode() for i in range(3, n_vocab)]
    w.add_token_list(toks)
    w.add_token_scores([0.0] * n_vocab)
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + \
        [gguf.TokenType.NORMAL] * (n_vocab - 3)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    w.add_tensor("token_embd.weight", mat(n_vocab, n_embd))
    for i in range(n_layer):
        p = "blk.%d." % i
        w.add_tensor(p + "attn_norm.weight", norm(n_embd))
        w.add_tensor(p + "attn_q.weight", mat(n_head * hd, n_embd))
        w.add_tensor(p + "attn_k.weight", mat(n_head_kv * hd, n_embd))
        w.add_tensor(p + "attn_v.weight", mat(n_head_kv * hd, n_embd))
        w.add_tensor(p + "attn_output.weight", mat(n_embd, n_head * hd))
        w.add_tensor(p + "ffn_norm.weight", norm(n_embd))
        w.add_tensor(p + "ffn_gate.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", mat(n_embd, n_ff))
    w.add_tensor("output_norm.weight", norm(n_embd))
    w.add_tensor("output.weight", mat(n_vocab, n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, a.out)
    print("gen-model: %s: %s, %d layers, %d wide, %d heads (%d KV), vocab %d, context %d, %.1f MB"
          % (a.out, a.size, n_layer, n_embd, n_head, n_head_kv, n_vocab, n_ctx, os.path.getsize(a.out) / 1e6))


if __name__ == "__main__":
    main()
