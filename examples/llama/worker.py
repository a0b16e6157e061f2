#!/usr/bin/python3
"""examples/llama/worker.py — the llama.cpp worker of examples/llama/worker.c, in Python.

The same loop through the stagecache Python bindings (python/stagecache): restore the longest
stored prefix of a prompt (Stage.restore), hand its bytes to llama.cpp straight from shared memory
(llama_state_seq_set_data through the engine wrapper examples/llama/engine.c, built as
libsc-llama-engine.so and called with ctypes), decode the rest in batches that stop at block
boundaries, sample greedily, stream the tokens through a Batcher, export the state at each
boundary passed (L3 put, L2 admit). Its payloads, identities and namespaces are the C worker's,
byte for byte: each restores what the other exported (tests/check_llama.c checks it).

usage: PYTHONPATH=python worker.py --model FILE --arena NAME --l3 DIR [--engine LIB] [--block N]
                                   [--ns NS] [--threads N] [--ctx N]
Protocol (stdin/stdout): the C worker's "req ID SESSION NGEN FLAGS N TOK..." and "quit"
(FLAGS: - or nocache,noexport); it answers "res ID prompt=N restored=P source=... refused=0|1
generated=G logits=DIGEST gen=T1,T2,...".
"""
import argparse
import ctypes
import os
import struct
import sys
import time

import stagecache as sc

TRAILER = struct.Struct("<QIIIIQQQQQ")  # struct llc_trailer (examples/llama/cache.h), 64 bytes
MAGIC = 0x31414D414C4C4353              # "SCLLAMA1"
BOUNDARY_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class Engine:
    """llama.cpp through engine.c's C API (a model, a context of one sequence)."""

    def __init__(self, lib, model, n_ctx, block, threads):
        self.lib = L = ctypes.CDLL(lib)
        L.eng_new.restype = ctypes.c_void_p
        L.eng_new.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_int,
                              ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        for fn, res, args in (("eng_free", None, [ctypes.c_void_p]), ("eng_reset", None, [ctypes.c_void_p]),
                              ("eng_decode", ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32),
                                                            ctypes.c_uint32, BOUNDARY_FN, ctypes.c_void_p]),
                              ("eng_greedy", ctypes.c_int32, [ctypes.c_void_p]),
                              ("eng_state_size", ctypes.c_size_t, [ctypes.c_void_p]),
                              ("eng_state_get", ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]),
                              ("eng_state_set", ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                                               ctypes.c_int32, ctypes.c_void_p]),
                              ("eng_n_past", ctypes.c_int32, [ctypes.c_void_p]),
                              ("eng_n_vocab", ctypes.c_int32, [ctypes.c_void_p]),
                              ("eng_logits", ctypes.POINTER(ctypes.c_float), [ctypes.c_void_p]),
                              ("eng_desc", ctypes.c_char_p, [ctypes.c_void_p]),
                              ("eng_state_version", ctypes.c_int, [])):
            getattr(L, fn).restype = res
            getattr(L, fn).argtypes = args
        err = ctypes.create_string_buffer(512)
        self.e = L.eng_new(None, model.encode(), n_ctx, block, threads, 1, err, len(err))
        if not self.e:
            raise RuntimeError(err.value.decode())
        self.n_vocab = L.eng_n_vocab(self.e)
        self.block = block
        self.desc = L.eng_desc(self.e).decode()

    def logits(self):
        """The logits after the last decoded token, as bytes (n_vocab float32)."""
        return ctypes.string_at(self.lib.eng_logits(self.e), self.n_vocab * 4)

    def decode(self, tokens, on_boundary):
        arr = (ctypes.c_int32 * len(tokens))(*tokens)
        cb = BOUNDARY_FN(lambda _e, _ctx: on_boundary())
        if self.lib.eng_decode(self.e, arr, len(tokens), cb, None):
            raise RuntimeError("llama_decode failed")


class Worker:
    def __init__(self, a):
        self.eng = Engine(a.engine, a.model, a.ctx, a.block, a.threads)
        # the identities, exactly as examples/llama/cache.c derives them
        with open(a.model, "rb") as f:
            blob = f.read()
        d = sc.digest(blob)
        self.model_digest = d
        self.model_id = "gguf-xxh128:%s:%d" % (d.hex(), len(blob))
        self.state_id = "llama_state_seq/v%d:%s+logits/f32+trailer/v1" % (self.eng.lib.eng_state_version(),
                                                                          self.eng.desc)
        self.format = sc.digest(self.state_id.encode()).lo
        both = sc.digest(self.model_id.encode(), self.state_id.encode())
        self.ns = "%s@%016x" % (a.ns, both.lo)
        # Step 1: the arena, the stage, L3, a ring
        self.arena = sc.Arena.open(a.arena)
        self.stage = self.arena.stage(self.model_id, self.state_id)
        self.l3 = sc.L3(a.l3)
        self.l3.bind_arena(self.arena)  # its puts update the arena's location index at once
        try:
            self.ring = self.arena.ring()
        except sc.Error as err:  # every ring taken (no consumer drains them): serve without streaming
            if err.errno != 28:
                raise
            self.ring = None

    def trailer_ok(self, wire, tokens):
        if len(wire) < TRAILER.size:
            return None
        t = TRAILER.unpack_from(wire, len(wire) - TRAILER.size)
        magic, version, count, n_vocab, _r, state_bytes, logits_bytes, mlo, mhi, fmt = t
        ok = (magic == MAGIC and version == 1 and count == tokens and n_vocab == self.eng.n_vocab
              and logits_bytes == n_vocab * 4 and (mlo, mhi) == (self.model_digest.lo, self.model_digest.hi)
              and fmt == self.format and state_bytes + logits_bytes + TRAILER.size == len(wire))
        return state_bytes if ok else None

    def restore(self, tokens):
        """Step 2 and 3: the longest stored prefix into the engine, straight from shared memory."""
        L, e = self.eng.lib, self.eng.e
        r = self.stage.restore(self.l3, self.ns, tokens, wait=True)
        if r is None:
            L.eng_reset(e)
            return 0, "none", 0
        with r:
            arr = r.array(0)  # read-only numpy view of the arena: its address goes to llama.cpp
            state_bytes = self.trailer_ok(memoryview(arr), r.token_count)
            if state_bytes is None:  # another model's or format's state: never imported
                del arr
                L.eng_reset(e)
                return 0, "none", 1
            base = arr.ctypes.data
            bad = L.eng_state_set(e, base, state_bytes, r.token_count, base + state_bytes)
            del arr
            source = r.source
        if bad:
            L.eng_reset(e)
            return 0, "none", 1
        return r.token_count, source, 0

    def export(self, seq):
        """Step 4: the engine's state at a block boundary, durable in L3 and shared in L2."""
        L, e = self.eng.lib, self.eng.e
        n = L.eng_n_past(e)
        size = L.eng_state_size(e)
        buf = ctypes.create_string_buffer(size)
        got = L.eng_state_get(e, buf, size)
        lg = self.eng.logits()
        d = self.model_digest
        wire = buf.raw[:got] + lg + TRAILER.pack(MAGIC, 1, n, self.eng.n_vocab, 0, got, len(lg), d.lo, d.hi,
                                                 self.format)
        loc = self.l3.put(self.ns, seq[:n], wire, model_identity=self.model_id, state_identity=self.state_id)
        try:
            self.stage.admit(self.ns, seq[:n], wire, digest=loc.digest)
        except sc.Error as err:
            if err.errno not in (7, 28):  # E2BIG, ENOSPC: L2 may refuse, L3 has it
                raise

    def serve(self, rid, session, ngen, flags, prompt):
        t0 = time.monotonic_ns()
        nocache, noexport = "nocache" in flags, "noexport" in flags
        restored, source, refused = (0, "none", 0)
        if nocache:
            self.eng.lib.eng_reset(self.eng.e)
        else:
            restored, source, refused = self.restore(prompt)
        seq = list(prompt)

        generating = [False]

        def on_boundary():
            # only prompt boundaries: a token decoded alone has KV whose last bits differ from the
            # same token's in a prompt batch (see worker.c)
            if not (nocache or noexport or generating[0]) and self.eng.lib.eng_n_past(self.eng.e) > restored:
                self.export(seq)
            return 0

        if restored < len(prompt):
            self.eng.decode(prompt[restored:], on_boundary)
        generating[0] = True
        ld = sc.Digest(0, 0)
        gen = []
        b = sc.Batcher(self.ring, rid, session) if self.ring else None  # Step 5
        for g in range(ngen):
            if g:
                self.eng.decode([seq[-1]], on_boundary)
            ld = sc.digest(struct.pack("<QQ", ld.lo, ld.hi), self.eng.logits())
            tok = self.eng.lib.eng_greedy(self.eng.e)
            seq.append(tok)
            gen.append(tok)
            if b:
                b.commit(tok, time.monotonic_ns() - t0)  # False: the ring is full, the batch waits
        if b:
            b.finish()
        print("res %d prompt=%d restored=%d source=%s refused=%d generated=%d logits=%s gen=%s"
              % (rid, len(prompt), restored, source, refused, len(gen), ld.hex(), ",".join(map(str, gen))),
              flush=True)

    def close(self):
        self.arena.close()
        self.l3.close()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--model", required=True)
    ap.add_argument("--arena", required=True)
    ap.add_argument("--l3", required=True)
    ap.add_argument("--engine", default=os.path.join(here, "../../build/examples/llama/libsc-llama-engine.so"))
    ap.add_argument("--ns", default="chat")
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=16384)
    a = ap.parse_args()
    w = Worker(a)
    print("ready pid=%d model=%s ns=%s vocab=%d" % (os.getpid(), w.model_id, w.ns, w.eng.n_vocab), flush=True)
    for line in sys.stdin:
        f = line.split()
        if not f or f[0] == "quit":
            break
        if f[0] != "req" or len(f) < 6 or len(f) != 6 + int(f[5]):
            print("err %s bad request" % (f[1] if len(f) > 1 else "?"), flush=True)
            continue
        w.serve(int(f[1]), int(f[2]), int(f[3]), f[4].split(","), [int(x) for x in f[6:]])
    w.close()


main()
