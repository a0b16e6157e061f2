#!/usr/bin/python3
"""tests/kv_subscriber.py — a router's view of `stagecache events`, for tests/check_events.c.

  kv_subscriber.py subscribe --endpoint EP --replay EP --state FILE [--skip SEQ,...] [--topic T]
                             [--format array|map]
      Subscribe like a cache-aware router: decode every KVEventBatch as vLLM's published types
      define them (msgspec array_like structs, events as tagged arrays: checked field by field
      below, with Debian's python3-msgpack), rebuild the set of block hashes per medium, detect
      sequence gaps and heal them through the replay socket (a DEALER: a request may be answered
      with several batches). Joins late on purpose: the first thing it does is ask for a replay
      from sequence 0. --skip drops the listed batches as if the network had lost them. The state
      (last sequence, the sets, counters, decoding errors) is written to FILE (atomically, by
      rename) after every change and every 200 ms.

  kv_subscriber.py expect --ls FILE --l3ls FILE --state FILE [--block-size N] [--medium-l2 M] [--medium-l3 M]
      Compute from `stagecache ls --json --token-ids` and `stagecache l3 ls --prefixes --json`
      output the block hashes that should be held (docs/ROUTING.md: XXH3-64 chained over blocks,
      with python3-xxhash, independently of the C code) and compare them with the subscriber's
      sets. Exit 0 when equal, 1 with the differences.

  kv_subscriber.py replay --replay EP --raw HEX[,HEX...]
      Send a malformed request (frames as hex) and print what came back (for the refusal tests).
"""
import argparse
import json
import os
import struct
import sys
import time

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)


class DecodeError(Exception):
    pass


# vLLM's types (vllm/distributed/kv_events.py, examples/online_serving/kv_events_subscriber.py):
#   class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True): ts: float; events: list
#       (data_parallel_rank: int | None = None, omitted when None)
#   class KVCacheEvent(msgspec.Struct, array_like=True, omit_defaults=True, tag=True)
#   class BlockStored(KVCacheEvent): block_hashes: list[int]; parent_block_hash: int | None;
#       token_ids: list[int]; block_size: int; lora_id: int | None; medium: str | None
#       (later: lora_name: str | None, required; then fields with defaults: extra_keys, group_idx)
#   class BlockRemoved(KVCacheEvent): block_hashes: list[int]; medium: str | None
#   class AllBlocksCleared(KVCacheEvent): pass
# A tagged array_like struct is encoded as [tag, field1, field2, ...] with the class name as tag.

def _int(v, what):
    if not isinstance(v, int) or isinstance(v, bool):
        raise DecodeError(f"{what}: expected int, got {type(v).__name__}")
    if not -(1 << 63) <= v < (1 << 64):
        raise DecodeError(f"{what}: out of 64-bit range")
    return v


def _opt_int(v, what):
    return None if v is None else _int(v, what)


def _opt_str(v, what):
    if v is not None and not isinstance(v, str):
        raise DecodeError(f"{what}: expected str or None")
    return v


def _int_list(v, what):
    if not isinstance(v, list):
        raise DecodeError(f"{what}: expected array")
    return [_int(x, what) for x in v]


MAP_FIELDS = {"BlockStored": ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
                              "lora_name"],
              "BlockRemoved": ["block_hashes", "medium"], "AllBlocksCleared": []}


def decode_event(e, fmt="array"):
    if fmt == "map":
        # later vLLM (tag=True without array_like) and Dynamo's relay: {"type": tag, field: value}
        if not isinstance(e, dict) or not isinstance(e.get("type"), str) or e["type"] not in MAP_FIELDS:
            raise DecodeError("event: expected a map with a known \"type\"")
        fields = MAP_FIELDS[e["type"]]
        if set(e) != {"type", *fields}:
            raise DecodeError(f"{e['type']}: fields {sorted(e)}")
        e = [e["type"]] + [e[f] for f in fields]
    if not isinstance(e, list) or not e or not isinstance(e[0], str):
        raise DecodeError("event: expected a tagged array")
    tag = e[0]
    if tag == "BlockStored":
        # both generations of the type must decode it: the six-field one ignores a trailing
        # element, the seven-field one requires lora_name
        if len(e) != 8:
            raise DecodeError(f"BlockStored: {len(e) - 1} fields, want 7")
        _opt_str(e[7], "lora_name")
        ev = {"type": tag, "block_hashes": _int_list(e[1], "block_hashes"),
              "parent_block_hash": _opt_int(e[2], "parent_block_hash"),
              "token_ids": _int_list(e[3], "token_ids"), "block_size": _int(e[4], "block_size"),
              "lora_id": _opt_int(e[5], "lora_id"), "medium": _opt_str(e[6], "medium")}
        if len(ev["token_ids"]) != len(ev["block_hashes"]) * ev["block_size"]:
            raise DecodeError("BlockStored: token_ids is not block_size per block")
        return ev
    if tag == "BlockRemoved":
        if len(e) != 3:
            raise DecodeError(f"BlockRemoved: {len(e) - 1} fields, want 2")
        return {"type": tag, "block_hashes": _int_list(e[1], "block_hashes"), "medium": _opt_str(e[2], "medium")}
    if tag == "AllBlocksCleared":
        if len(e) != 1:
            raise DecodeError("AllBlocksCleared: has fields")
        return {"type": tag}
    raise DecodeError(f"unknown event tag {tag!r}")


def decode_batch(payload, fmt="array"):
    try:
        b = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except Exception as ex:  # noqa: BLE001 - any msgpack failure is a decoding error
        raise DecodeError(f"msgpack: {ex}") from ex
    if not isinstance(b, list) or len(b) not in (2, 3):
        raise DecodeError("KVEventBatch: expected [ts, events] or [ts, events, dp_rank]")
    if not isinstance(b[0], float):
        raise DecodeError("KVEventBatch.ts: expected float")
    if not isinstance(b[1], list):
        raise DecodeError("KVEventBatch.events: expected array")
    if len(b) == 3:
        _int(b[2], "data_parallel_rank")
    return b[0], [decode_event(e, fmt) for e in b[1]]


class Router:
    def __init__(self, args):
        self.args = args
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, args.topic.encode())
        self.sub.connect(args.endpoint)
        self.sets = {}
        self.last_seq = -1
        self.skip = {int(s) for s in args.skip.split(",") if s} if args.skip else set()
        self.counters = {"batches": 0, "events": 0, "gaps": 0, "replays": 0, "replayed_batches": 0,
                         "snapshots": 0, "skipped": 0, "errors": 0, "stale": 0}
        self.errors = []
        self.dirty = True

    def apply(self, events):
        for ev in events:
            self.counters["events"] += 1
            if ev["type"] == "AllBlocksCleared":
                self.sets = {}
                self.counters["snapshots"] += 1
            elif ev["type"] == "BlockStored":
                s = self.sets.setdefault(ev["medium"], set())
                s.update(ev["block_hashes"])
            else:
                s = self.sets.setdefault(ev["medium"], set())
                s.difference_update(ev["block_hashes"])
        self.dirty = True

    def handle(self, seq, payload, replayed=False):
        try:
            _, events = decode_batch(payload, self.args.format)
        except DecodeError as ex:
            self.counters["errors"] += 1
            self.errors.append(f"seq {seq}: {ex}")
            return
        self.apply(events)
        self.last_seq = seq
        self.counters["batches"] += 1
        if replayed:
            self.counters["replayed_batches"] += 1

    def replay_from(self, start):
        """Ask for every batch from @start; apply those after last_seq. Each attempt on a new
        DEALER (a publisher that died with our request leaves no reply to wait for): 2 s each,
        5 attempts, then it is an error."""
        self.counters["replays"] += 1
        for _ in range(5):
            rep = self.ctx.socket(zmq.DEALER)
            rep.setsockopt(zmq.LINGER, 0)
            rep.connect(self.args.replay)
            try:
                rep.send_multipart([b"", start.to_bytes(8, "big")])
                deadline = time.monotonic() + 2
                while time.monotonic() < deadline:
                    if not rep.poll(100):
                        continue
                    frames = rep.recv_multipart()
                    if len(frames) != 3 or frames[0] != b"":
                        self.counters["errors"] += 1
                        self.errors.append(f"replay reply of {len(frames)} frames")
                        return
                    if frames[1] == END_SEQ:
                        return
                    seq = int.from_bytes(frames[1], "big")
                    if seq > self.last_seq:
                        self.handle(seq, frames[2], replayed=True)
            finally:
                rep.close(0)
            self.counters["replay_retries"] = self.counters.get("replay_retries", 0) + 1
        self.errors.append("replay: no end marker in 5 attempts of 2 s")
        self.counters["errors"] += 1

    def save(self):
        st = {"last_seq": self.last_seq, "counters": self.counters, "errors": self.errors[-20:],
              "sets": {m: sorted(s) for m, s in self.sets.items()}}
        tmp = self.args.state + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, self.args.state)
        self.dirty = False

    def run(self):
        # a late joiner: everything from the start (buffered batches, or a snapshot)
        self.replay_from(0)
        self.save()
        last_save = time.monotonic()
        while True:
            if self.sub.poll(50):
                frames = self.sub.recv_multipart()
                if len(frames) != 3 or len(frames[1]) != 8:
                    self.counters["errors"] += 1
                    self.errors.append(f"message of {len(frames)} frames")
                    continue
                seq = int.from_bytes(frames[1], "big")
                if seq in self.skip:
                    self.skip.discard(seq)
                    self.counters["skipped"] += 1
                    continue
                if seq <= self.last_seq:
                    self.counters["stale"] += 1  # already applied (a replay covered it)
                    continue
                if seq > self.last_seq + 1:
                    self.counters["gaps"] += 1
                    self.replay_from(self.last_seq + 1)
                    if seq <= self.last_seq:
                        continue
                self.handle(seq, frames[2])
            now = time.monotonic()
            if self.dirty or now - last_save > 0.2:
                self.save()
                last_save = now


# ---- the expected sets, from ls output ----

def block_hashes(tokens, bs):
    import xxhash
    out, parent = [], 0
    for i in range(len(tokens) // bs):
        data = struct.pack("<Q", parent) + struct.pack(f"<{bs}i", *tokens[i * bs:(i + 1) * bs])
        parent = xxhash.xxh3_64_intdigest(data) & 0x7FFFFFFFFFFFFFFF
        out.append(parent)
    return out


def expect(args):
    want = {args.medium_l2: set(), args.medium_l3: set()}
    with open(args.ls) as f:
        for line in f:
            if line.strip():
                e = json.loads(line)
                want[args.medium_l2].update(block_hashes(e["token_ids"], args.block_size))
    if args.l3ls:
        with open(args.l3ls) as f:
            for line in f:
                if line.strip():
                    p = json.loads(line)
                    if p["object_present"]:
                        want[args.medium_l3].update(block_hashes(p["token_ids"], args.block_size))
    with open(args.state) as f:
        st = json.load(f)
    ok = True
    for m, w in want.items():
        have = set(st["sets"].get(m, []))
        if have != w:
            ok = False
            print(f"medium {m}: subscriber holds {len(have)} blocks, ls says {len(w)}: "
                  f"{len(have - w)} extra, {len(w - have)} missing")
    for m in st["sets"]:
        if m not in want and st["sets"][m]:
            ok = False
            print(f"medium {m}: unexpected, {len(st['sets'][m])} blocks")
    if st["errors"]:
        ok = False
        print("decoding errors: " + "; ".join(st["errors"]))
    if ok:
        print(f"equal: {args.medium_l2} {len(want[args.medium_l2])} blocks, {args.medium_l3} "
              f"{len(want[args.medium_l3])} blocks; counters {json.dumps(st['counters'])}")
    return 0 if ok else 1


def raw_replay(args):
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(args.replay)
    frames = [bytes.fromhex(h) for h in args.raw.split(",")]
    s.send_multipart(frames)
    if s.poll(3000):
        got = s.recv_multipart()
        print("reply:", ",".join(f.hex() for f in got))
        return 0
    print("no reply")
    return 0


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="cmd", required=True)
    a = sp.add_parser("subscribe")
    a.add_argument("--endpoint", required=True)
    a.add_argument("--replay", required=True)
    a.add_argument("--state", required=True)
    a.add_argument("--skip", default="")
    a.add_argument("--topic", default="")
    a.add_argument("--format", choices=["array", "map"], default="array")
    b = sp.add_parser("expect")
    b.add_argument("--ls", required=True)
    b.add_argument("--l3ls")
    b.add_argument("--state", required=True)
    b.add_argument("--block-size", type=int, default=16)
    b.add_argument("--medium-l2", default="cpu_shared")
    b.add_argument("--medium-l3", default="disk")
    c = sp.add_parser("replay")
    c.add_argument("--replay", required=True)
    c.add_argument("--raw", required=True)
    args = ap.parse_args()
    if args.cmd == "subscribe":
        Router(args).run()
    elif args.cmd == "expect":
        sys.exit(expect(args))
    else:
        sys.exit(raw_replay(args))


if __name__ == "__main__":
    main()
