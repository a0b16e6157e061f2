"""stagecache — Python bindings of libstagecache (ctypes only; numpy used when present).

A shared host-RAM cache of LLM prefix state for co-located worker processes::

    import stagecache as sc

    with sc.Arena.open("cache") as arena, arena.stage("llama-3-8b", "kv-fp16") as stage:
        stage.admit("tenant-a", tokens, state_bytes)
        with stage.get("tenant-a", tokens) as lease:        # None on a miss
            kv = lease.view(0)                                # read-only memoryview, no copy
            ...                                               # import the state from kv
            del kv                                            # views go before the lease

Rules that come from the library (see stagecache.h):

* An Arena handle belongs to one thread at a time (each thread opens its own); the calls of one
  handle are serialised with a lock here. After fork() a child opens its own handles.
* A Lease (and a Restore) pins the bytes it shows. Its views are zero-copy memoryviews (and numpy
  arrays) over the shared memory; releasing it while a view is still exported raises BufferError
  and keeps it held, so a view can never read memory the cache has reused.
* Errors are stagecache.Error (an OSError) carrying the errno and the library's message.
* Every foreign call releases the GIL (ctypes.CDLL), so fills and restores let other threads run.
"""
import array
import ctypes
import errno as _errno
import mmap
import os
import threading
import weakref
from collections import namedtuple
from collections.abc import Mapping

from . import _ffi
from ._ffi import KvDesc, KvComponent, LayoutError, lib, lib_path

try:  # optional: numpy arrays over leases
    import numpy as _np
except ImportError:  # pragma: no cover - exercised where numpy is absent
    _np = None

__all__ = [
    "Arena", "Stage", "Lease", "Restore", "L3", "Location", "Ring", "Batcher", "Commit", "Digest", "Key",
    "Extent", "Payload", "KvDesc", "KvComponent", "Error", "Recompute", "PutManyError", "LayoutError", "digest",
    "strerror", "block_hashes", "clock_ns", "COST_MAX",
    "FULL_STATE", "RECURRENT_ONLY", "KV_RECURRENT", "ORIGIN_DIRECT", "ORIGIN_L3", "COMMIT_FINISHED",
    "COMMIT_ABORTED", "LEASES_MAX", "BATCHER_CAPACITY_MAX", "L3_PUT_MANY_MAX",
]

FULL_STATE, RECURRENT_ONLY, KV_RECURRENT = 1, 2, 3
ORIGIN_DIRECT, ORIGIN_L3 = 0, 1
COMMIT_FINISHED, COMMIT_ABORTED = 0x1, 0x2
LEASES_MAX = 48
BATCHER_CAPACITY_MAX = 256
L3_PUT_MANY_MAX = 64  # puts per sc_l3_put_many (SC_L3_PUT_MANY_MAX): L3.put_many batches by it
COST_MAX = 1 << 50  # ns: larger compute costs are clamped
_BATCHER_DEFERRED = 1
_BATCHER_OPT_INTERVAL = 0x1
_RESTORE_WAIT = 0x1
_L3_OPEN_NO_RECONCILE = 0x1
_HUGE = {"auto": 0, "require": 1, "off": 2}
_ODIRECT = {"auto": 0, "on": 1, "off": 2}
_KINDS = {"full_state": FULL_STATE, "recurrent_only": RECURRENT_ONLY, "kv_recurrent": KV_RECURRENT}
_ORIGINS = {"direct": ORIGIN_DIRECT, "l3": ORIGIN_L3}


# ---- errors ----

def strerror(err):
    """The library's message for a (negative or positive) errno."""
    return lib.sc_strerror(int(err)).decode()


class Error(OSError):
    """A failed libstagecache call: .errno (positive), .strerror (the library's message), .call."""

    def __init__(self, rc, call):
        code = -rc if rc < 0 else rc
        super().__init__(code, "%s: %s" % (call, strerror(code)))
        self.call = call


class Recompute(Error):
    """Stage.restore with a deadline or a recompute estimate: recomputing wins (sc_restore_with
    returned -ETIME). .reason is the miss reason ("deadline"), .detail how ("predicted", "past",
    "abandoned", "waited"), .predicted_ns the fill time it predicted (0: none)."""

    def __init__(self, rc, call, reason, detail, predicted_ns):
        super().__init__(rc, call)
        self.reason, self.detail, self.predicted_ns = reason, detail, predicted_ns


class PutManyError(Error):
    """L3.put_many: a put was not acknowledged. .index is the first such put and .errno its
    error; .results has one entry per item: its Location when acknowledged (durable), an Error
    when it failed, None when it was not tried (it was in a batch after the failed one). A batch
    holding an invalid put is refused whole: each of its puts is an EINVAL Error."""

    def __init__(self, results):
        self.index = next(i for i, r in enumerate(results) if isinstance(r, Error))
        self.results = results
        code = results[self.index].errno
        failed = sum(1 for r in results if isinstance(r, Error))
        untried = results.count(None)
        OSError.__init__(self, code, "sc_l3_put_many: put %d of %d: %s (%s); %d failed, %d acknowledged, "
                         "%d not tried" % (self.index, len(results), strerror(code), _errno.errorcode.get(code, code),
                                           failed, len(results) - failed - untried, untried))
        self.call = "sc_l3_put_many"


def _check(rc, call):
    if rc < 0:
        raise Error(rc, call)
    return rc


def clock_ns():
    """CLOCK_MONOTONIC in ns (sc_clock_ns): the clock of Stage.restore's deadline_ns."""
    return lib.sc_clock_ns()


def _misses(m):
    """struct sc_miss_stats as nested dicts of counts by name."""
    names = lambda fn, n: [fn(i).decode() for i in range(n)]
    miss = names(lib.sc_miss_reason_name, 13)
    return {"l2": dict(zip(miss, m.l2)), "restore": dict(zip(miss, m.restore)),
            "l2_refused": dict(zip(names(lib.sc_l2_refusal_name, 9), m.l2_refused)),
            "deadline": dict(zip(names(lib.sc_deadline_detail_name, 4), m.deadline))}


def _name(fn, v):
    return fn(int(v)).decode()


# ---- small values ----

class Digest(namedtuple("Digest", "lo hi")):
    """An XXH3-128 payload digest; str() is the 32-hex form the tools print."""
    __slots__ = ()

    def hex(self):
        return "%016x%016x" % (self.hi, self.lo)

    __str__ = hex

    @classmethod
    def parse(cls, text):
        d = _ffi.Digest_()
        _check(lib.sc_digest_parse(text.encode() if isinstance(text, str) else text, ctypes.byref(d)), "sc_digest_parse")
        return cls(d.lo, d.hi)

    def _c(self):
        return _ffi.Digest_(self.lo, self.hi)


class Key(namedtuple("Key", "lo hi")):
    """An L2 key; str() is the 32-hex form `stagecache ls` prints."""
    __slots__ = ()

    def hex(self):
        return "%016x%016x" % (self.hi, self.lo)

    __str__ = hex


Extent = namedtuple("Extent", "base bytes page_size file_offset kind")
Extent.__doc__ = "A memory range of the arena that holds payload bytes (for DMA registration)."

Commit = namedtuple("Commit", "request_id session_id generated_token_count flags tokens ring gen seq")
Commit.__doc__ = "One commit delivered by Arena.poll (tokens copied out of the ring)."


def _digest_c(d):
    return Digest(d.lo, d.hi)


def _struct_dict(s):
    out = {}
    for n, _ in s._fields_:
        if n.startswith("_"):
            continue
        v = getattr(s, n)
        if isinstance(v, ctypes.Array):
            v = list(v)  # e.g. refusals by reason: a plain list, comparable and printable
        out[n] = v
    return out


# ---- arguments ----

def _buffer(obj):
    """(c pointer, length, keepalive) for a bytes-like object, without copying when possible."""
    if obj is None:
        return None, 0, None
    if isinstance(obj, bytes):
        return ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p), len(obj), obj
    mv = memoryview(obj)
    if mv.nbytes == 0:
        return None, 0, None
    if not mv.c_contiguous:
        b = mv.tobytes()
        return ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p), len(b), b
    if mv.readonly:
        # a read-only buffer that is not bytes (a numpy view, a mmap): ctypes cannot point into it
        b = mv.tobytes()
        return ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p), len(b), b
    c = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B"))
    return ctypes.cast(c, ctypes.c_void_p), mv.nbytes, (mv, c)


def _tokens(tokens):
    """(POINTER(c_int32), n, keepalive) for a sequence of token ids (list, array('i'), numpy int32)."""
    if _np is not None and isinstance(tokens, _np.ndarray):
        a = _np.ascontiguousarray(tokens, dtype=_np.int32)
        return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), int(a.size), a
    if isinstance(tokens, array.array) and tokens.typecode == "i" and tokens.itemsize == 4:
        a = tokens
    else:
        a = array.array("i", tokens)
    if len(a) == 0:
        return ctypes.POINTER(ctypes.c_int32)(), 0, a
    addr, n = a.buffer_info()
    return ctypes.cast(ctypes.c_void_p(addr), ctypes.POINTER(ctypes.c_int32)), n, a


def _put_args(ns, tokens, payload, model_identity=None, state_identity=None, cost_ns=0):
    """One put (L3.put's arguments): its struct sc_l3_put_args, its cost for the C side, and what
    must stay alive while the library reads them."""
    cp, keep = Payload.of(payload)._c()
    t, n, kt = _tokens(tokens)
    a = _ffi.L3PutArgs()
    a.model_identity = model_identity.encode() if model_identity else None
    a.state_identity = state_identity.encode() if state_identity else None
    a.ns, a.tokens, a.token_count, a.payload = _ns(ns), t, n, ctypes.pointer(cp)
    return a, _cost(cost_ns), (cp, keep, kt)


def _cost(v):
    """A cost or time in ns for the C side: an int >= 0 (larger than 64 bits: saturated)."""
    v = int(v or 0)
    if v < 0:
        raise ValueError("a cost or time in ns cannot be negative")
    return min(v, (1 << 64) - 1)


def _path(p, what):
    """A path argument as bytes: str, bytes or os.PathLike only (never str(None) == "None")."""
    if isinstance(p, (str, bytes)) or hasattr(p, "__fspath__"):
        return os.fsencode(p)
    raise TypeError("%s must be a path (str, bytes or os.PathLike), not %s" % (what, type(p).__name__))


def _text(n, what="name"):
    """A name argument as bytes: str or bytes only."""
    if isinstance(n, str):
        return n.encode()
    if isinstance(n, bytes):
        return n
    raise TypeError("%s must be str or bytes, not %s" % (what, type(n).__name__))


def _ns(ns):
    if ns is None:
        return b""
    return ns.encode() if isinstance(ns, str) else bytes(ns)


class Payload:
    """What to admit or put: a kind and one or two sections (bytes-like), with a KV descriptor
    for a kv_recurrent payload with a KV section. A plain bytes-like object given where a
    Payload is expected is a full_state payload."""

    def __init__(self, kind, sec0, sec1=None, kv_desc=None):
        self.kind = _KINDS.get(kind, kind) if isinstance(kind, str) else int(kind)
        if self.kind not in (FULL_STATE, RECURRENT_ONLY, KV_RECURRENT):
            raise ValueError("unknown payload kind %r" % (kind,))
        self.sections = (sec0, sec1)
        self.kv_desc = kv_desc

    @classmethod
    def of(cls, obj):
        return obj if isinstance(obj, Payload) else cls(FULL_STATE, obj)

    def _c(self):
        p = _ffi.Payload_()
        p.kind = self.kind
        keep = []
        for i, sec in enumerate(self.sections):
            ptr, n, k = _buffer(sec)
            p.sec[i] = ptr
            p.sec_len[i] = n
            keep.append(k)
        if self.kv_desc is not None:
            if not isinstance(self.kv_desc, KvDesc):
                raise TypeError("kv_desc must be a stagecache.KvDesc")
            p.kv_desc = ctypes.pointer(self.kv_desc)
            keep.append(self.kv_desc)
        return p, keep

    def digest(self):
        """The digest of the wire (section 0 then section 1)."""
        a, an, _ka = _buffer(self.sections[0])
        b, bn, _kb = _buffer(self.sections[1])
        return _digest_c(lib.sc_digest_sections(a, an, b, bn))


def digest(data, data2=None):
    """The unseeded XXH3-128 of data (then data2), as every tool and L3 object uses it."""
    a, an, _ka = _buffer(data)
    if data2 is None:
        return _digest_c(lib.sc_digest_of(a, an))
    b, bn, _kb = _buffer(data2)
    return _digest_c(lib.sc_digest_sections(a, an, b, bn))


# ---- views over shared memory ----

class _Window(mmap.mmap):
    """A read-only mapping of the bytes of one lease in the arena file. The views handed out are
    slices of it, so they keep it (and through .owner, the lease) alive, and mmap.close() refuses
    while any of them is still exported."""
    owner = None


class _Views:
    """The sections of a lease or restore, readable through memoryviews that never outlive it."""

    def __init__(self, arena, ptrs, lens, in_arena, owner):
        self._win = None
        self._copy = None
        self._lens = lens
        total = lens[0] + lens[1]
        if total == 0:
            self._off = (0, 0)
            return
        if not in_arena:
            # private process memory (a restore that L2 could not hold): a copy, read-only and safe
            self._copy = ctypes.string_at(ptrs[0], lens[0]) + (ctypes.string_at(ptrs[1], lens[1]) if lens[1] else b"")
            self._off = (0, lens[0])
            return
        # one mapping of the arena file over both sections, widened to whole pages
        spans = [(p, n) for p, n in zip(ptrs, lens) if n]
        lo = min(p for p, _ in spans)
        hi = max(p + n for p, n in spans)
        ext = arena._extent_of(lo)
        if hi > ext.base + ext.bytes:
            raise Error(-_errno.EFAULT, "a section crosses the end of the arena's extent")
        file_lo = lo - ext.base + ext.file_offset
        page = ext.page_size
        start = file_lo & ~(page - 1)
        end = (file_lo + (hi - lo) + page - 1) & ~(page - 1)
        self._win = _Window(arena._fd(), end - start, mmap.MAP_SHARED, mmap.PROT_READ, offset=start)
        self._win.owner = owner
        self._off = tuple((p - lo) + (file_lo - start) if n else 0 for p, n in zip(ptrs, lens))

    def view(self, i):
        n = self._lens[i]
        if n == 0:
            return memoryview(b"")
        o = self._off[i]
        if self._copy is not None:
            return memoryview(self._copy)[o:o + n]
        return memoryview(self._win)[o:o + n]

    def close(self):
        """Unmap; raises BufferError while a view is still exported."""
        if self._win is not None:
            try:
                self._win.close()
            except BufferError:
                raise BufferError("a view of this lease is still exported (a memoryview, a slice of one, or a "
                                  "numpy array): drop it before releasing the lease") from None
            self._win = None
        self._copy = None


class _Pinned:
    """What Lease and Restore share: the views, the numpy arrays, release and the context manager."""
    _views = None
    _released = True

    def _alive(self):
        if self._released:
            raise ValueError("this %s was released" % type(self).__name__.lower())

    def view(self, i=0):
        """Section i as a read-only memoryview over the shared memory (no copy)."""
        self._alive()
        if i not in (0, 1):
            raise IndexError("a payload has sections 0 and 1")
        return self._views.view(i)

    @property
    def sections(self):
        """(view(0), view(1))."""
        return (self.view(0), self.view(1))

    def array(self, i=0, dtype="uint8", shape=None):
        """Section i as a read-only numpy array over the shared memory (no copy). Needs numpy."""
        if _np is None:
            raise RuntimeError("numpy is not installed")
        a = _np.frombuffer(self.view(i), dtype=dtype)
        return a.reshape(shape) if shape is not None else a

    def tobytes(self):
        """A copy of the wire (section 0 then section 1)."""
        return bytes(self.view(0)) + bytes(self.view(1))

    @property
    def released(self):
        return self._released

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __del__(self):
        try:
            if not self._released:
                self.release()
        except Exception:
            pass


class Lease(_Pinned):
    """A pinned, zero-copy, read-only view of an L2 entry (Stage.get). Release it (or leave its
    `with` block) when done; views must be dropped first."""

    def __init__(self, arena, c):
        self._arena = arena
        self._c = c
        self.kind = _name(lib.sc_payload_kind_name, c.kind)
        self.origin = _name(lib.sc_origin_name, c.origin)
        self.token_count = c.token_count
        self.digest = _digest_c(c.digest)
        self.key = Key(c.key.lo, c.key.hi)
        self.kv_desc = KvDesc.from_buffer_copy(c.kv_desc) if c.has_kv_desc else None
        self.sec_len = (c.sec_len[0], c.sec_len[1])
        self._released = False
        self._gathered = None
        try:
            ptrs, in_arena = (c.sec[0] or 0, c.sec[1] or 0), True
            if c.segments:
                # a scattered (segmented) entry: its wire is copied out once, views cover the copy
                n = self.sec_len[0] + self.sec_len[1]
                self._gathered = ctypes.create_string_buffer(max(n, 1))
                got = lib.sc_lease_copy(ctypes.byref(c), self._gathered, n)
                if got != n:
                    raise Error(got if got < 0 else -_errno.EBADMSG, "sc_lease_copy")
                base = ctypes.addressof(self._gathered)
                ptrs, in_arena = (base, base + self.sec_len[0]), False
            self._views = _Views(arena, ptrs, self.sec_len, in_arena, self)
        except BaseException:
            with arena._lock:
                lib.sc_lease_release(ctypes.byref(c))
            self._released = True
            raise
        arena._leases.add(self)

    def release(self):
        """Release the lease: the entry's memory may be reused from then on. Raises BufferError
        (and keeps the lease) while a view is still exported. A second release is a no-op."""
        if self._released:
            return
        self._views.close()
        with self._arena._lock:
            if self._arena._open():  # a closed handle took its leases with it
                lib.sc_lease_release(ctypes.byref(self._c))
        self._released = True
        self._arena._leases.discard(self)

    def __repr__(self):
        return "<stagecache.Lease %s %d tokens %s %s%s>" % (self.kind, self.token_count, self.digest, self.origin,
                                                            " released" if self._released else "")


class Restore(_Pinned):
    """A restored prefix (Stage.restore): where it came from and its bytes until release."""

    def __init__(self, arena, c):
        self._arena = arena
        self._c = c
        self.kind = _name(lib.sc_payload_kind_name, c.kind)
        self.token_count = c.token_count
        self.digest = _digest_c(c.digest)
        self.kv_desc = KvDesc.from_buffer_copy(c.kv_desc) if c.has_kv_desc else None
        self.sec_len = (c.sec_len[0], c.sec_len[1])
        self.source = _name(lib.sc_restore_source_name, c.source)
        self.promoted = bool(c.promoted)
        self.promote_why = _name(lib.sc_promote_why_name, c.promote_why) if c.promote_why >= 0 else None
        self.waited = bool(c.waited)
        self.direct = bool(c.direct)
        self.in_arena = bool(c.in_arena)
        self.times_ns = {"locate": c.locate_ns, "lookup": c.lookup_ns, "fill": c.fill_ns, "total": c.total_ns}
        self.predicted_ns = c.predicted_ns
        self._released = False
        try:
            self._views = _Views(arena, (c.sec[0] or 0, c.sec[1] or 0), self.sec_len, c.in_arena, self)
        except BaseException:
            with arena._lock:
                lib.sc_restore_release(ctypes.byref(c))
            self._released = True
            raise
        arena._leases.add(self)

    def release(self):
        """As Lease.release."""
        if self._released:
            return
        self._views.close()
        with self._arena._lock:
            if self._arena._open():
                lib.sc_restore_release(ctypes.byref(self._c))
        self._released = True
        self._arena._leases.discard(self)

    def __repr__(self):
        return "<stagecache.Restore from %s, %d tokens %s%s>" % (self.source, self.token_count, self.digest,
                                                               " released" if self._released else "")


# ---- arena ----

class _Closable:
    """A handle closed by close(), by `with`, or when it is collected."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _ArenaChild(_Closable):
    """What Stage and Ring share: a library handle that lives inside an arena handle, is closed
    before it, and refuses to work once either is closed. Subclasses set _what (for messages),
    _registry (the arena's WeakSet of them) and _close_fn (the library's close)."""

    def _attach(self, arena, h):
        self.arena, self._h = arena, h
        getattr(arena, self._registry).add(self)

    def _handle(self):
        if not self._h.value:
            raise ValueError("this %s is closed" % self._what)
        self.arena._handle()
        return self._h

    def close(self):
        if self._h.value:
            with self.arena._lock:
                if self.arena._open():
                    type(self)._close_fn(self._h)
                self._h = ctypes.c_void_p()
            getattr(self.arena, self._registry).discard(self)


def _open_opts(dir, owner):
    """sc_arena_open_opts for `dir` and `owner` (see Arena.open), and the path buffer it points to."""
    o = _ffi.ArenaOpenOpts()
    keep = _path(dir, "dir") if dir is not None else None
    o.dir = keep
    if owner == "any":
        o.flags = _ffi.SC_ARENA_OPEN_ANY_OWNER
    elif isinstance(owner, str):
        import pwd
        try:
            o.owner_uid = pwd.getpwnam(owner).pw_uid
        except KeyError:
            raise ValueError("owner: no such user %r" % owner) from None
    elif owner is not None:
        if isinstance(owner, bool) or not isinstance(owner, int) or not 0 < owner < 0xffffffff:
            raise ValueError("owner: a user name, a uid or 'any', not %r" % (owner,))
        o.owner_uid = owner
    return o, keep


def _info_dict(i):
    """A struct sc_arena_info as a dict (backing by name, attached processes as a list of dicts)."""
    d = _struct_dict(i)
    d["name"], d["path"] = i.name.decode(), i.path.decode()
    d["backing"] = _name(lib.sc_backing_name, i.backing)
    d["attached"] = [{"pid": a.pid, "uid": a.uid, "slot": a.slot, "other_pidns": bool(a.other_pidns),
                      "attached_unix": a.attached_unix}
                     for a in i.attached[:min(i.attached_count, _ffi.SC_INFO_MAX_ATTACHED)]]
    return d


class Arena(_Closable):
    """A handle on a named arena. Arena.create(...) or Arena.open(...); close() (or `with`)."""

    def __init__(self, handle, name):
        self._h = ctypes.c_void_p(handle)
        self.name = name
        self._lock = threading.RLock()
        self._leases = weakref.WeakSet()
        self._stages = weakref.WeakSet()
        self._rings = weakref.WeakSet()
        self._file = None
        self._extents = None
        self._pid = os.getpid()

    @classmethod
    def create(cls, name, size, huge="auto", dir=None, mode=0, group=None, index_entries=0, rings=0,
               ring_bytes=0, obs_entries=0, reader_slots=0, segment_bytes=0, slots_per_user=0):
        """Create the arena `name` of `size` bytes and attach to it (see sc_arena_create).
        `segment_bytes` (a power of two, 64 KiB..1 GiB; 0: none) stores each distinct segment of
        large payloads once (content-addressed L2). `slots_per_user`: reader slots the processes
        of one user may hold (0: three quarters of them when the group may open the arena)."""
        o = _ffi.ArenaOpts()
        o.size_bytes = int(size)
        o.huge = _HUGE[huge] if isinstance(huge, str) else int(huge)
        o.dir = _path(dir, "dir") if dir is not None else None
        o.mode = int(mode)
        if group is not None:
            o.gid = int(group)
            o.flags |= 0x1  # SC_ARENA_OPT_GID: group 0 is meant literally
        o.index_entries, o.ring_count, o.ring_bytes = int(index_entries), int(rings), int(ring_bytes)
        o.obs_entries, o.reader_slots = int(obs_entries), int(reader_slots)
        o.segment_bytes, o.slots_per_user = int(segment_bytes), int(slots_per_user)
        h = ctypes.c_void_p()
        _check(lib.sc_arena_create(_text(name), ctypes.byref(o), ctypes.byref(h)), "sc_arena_create")
        return cls(h.value, name)

    @classmethod
    def open(cls, name, dir=None, owner=None):
        """Attach to an existing arena (in /dev/hugepages then /dev/shm, or only in `dir`).

        The file must be owned by root or by you, or by `owner`: a user name, a uid, or "any"
        (sc_arena_open_with; how another member of the group opens the creator's arena)."""
        o, keep = _open_opts(dir, owner)
        h = ctypes.c_void_p()
        rc = lib.sc_arena_open_with(_text(name), ctypes.byref(o), ctypes.byref(h))
        _check(rc, "sc_arena_open")
        return cls(h.value, name)

    @staticmethod
    def inspect(name, dir=None, owner=None):
        """sc_arena_inspect: the arena `name` described as info() does, without attaching (no
        reader slot taken, nothing written): works when every slot is taken, and for a user who
        may only read the file. `dir` and `owner` as for open()."""
        o, keep = _open_opts(dir, owner)
        i = _ffi.ArenaInfo()
        _check(lib.sc_arena_inspect(_text(name), ctypes.byref(o), ctypes.byref(i)), "sc_arena_inspect")
        return _info_dict(i)

    @staticmethod
    def destroy(name, dir=None):
        """Remove the arena's file (attached processes keep their mapping until they close)."""
        _check(lib.sc_arena_destroy(_path(dir, "dir") if dir is not None else None, _text(name)), "sc_arena_destroy")

    def _open(self):
        """Open, and in the process that opened it."""
        return bool(self._h.value) and os.getpid() == self._pid

    def _handle(self):
        if not self._h.value:
            raise ValueError("this arena handle is closed")
        if os.getpid() != self._pid:
            raise RuntimeError("an arena handle cannot be used after fork(): open a new one in the child")
        return self._h

    def close(self):
        """Release what this handle still holds (leases, restores, rings, stages), then detach.
        Raises BufferError (and stays open) while a view of a lease is still exported."""
        if not self._h.value:
            return
        for pinned in list(self._leases):
            pinned.release()
        for r in list(self._rings):
            r.close()
        for s in list(self._stages):
            s.close()
        with self._lock:
            if self._file is not None:
                os.close(self._file)
                self._file = None
            if self._open():
                lib.sc_arena_close(self._h)
            self._h = ctypes.c_void_p()


    # -- description --

    def info(self):
        """sc_arena_info as a dict (backing by name, attached processes as a list of dicts)."""
        i = _ffi.ArenaInfo()
        with self._lock:
            _check(lib.sc_arena_info(self._handle(), ctypes.byref(i)), "sc_arena_info")
        return _info_dict(i)

    def holders(self):
        """Every attachment and what it holds (sc_arena_holders): a list of dicts."""
        with self._lock:
            n = _check(lib.sc_arena_holders(self._handle(), None, 0), "sc_arena_holders")
            arr = (_ffi.Holder * max(n, 1))()
            n = min(_check(lib.sc_arena_holders(self._handle(), arr, n), "sc_arena_holders"), n)
        out = []
        for h in arr[:n]:
            d = _struct_dict(h)
            d["alive"], d["other_pidns"] = bool(h.alive), bool(h.other_pidns)
            out.append(d)
        return out

    def events_stats(self):
        """The KV-event ring's counters and who listens (sc_events_stats): a dict."""
        st = _ffi.EventsStats()
        with self._lock:
            _check(lib.sc_events_stats(self._handle(), ctypes.byref(st)), "sc_events_stats")
        d = _struct_dict(st)
        d["listener_alive"] = bool(st.listener_alive)
        return d

    @property
    def token(self):
        """This handle's owner token (sc_arena_token)."""
        return lib.sc_arena_token(self._handle())

    def extents(self):
        """The memory ranges that hold payload bytes (sc_arena_extents), e.g. for cudaHostRegister."""
        with self._lock:
            n = _check(lib.sc_arena_extents(self._handle(), None, 0), "sc_arena_extents")
            arr = (_ffi.ArenaExtent * n)()
            _check(lib.sc_arena_extents(self._handle(), arr, n), "sc_arena_extents")
        return [Extent(e.base, e.bytes, e.page_size, e.file_offset, _name(lib.sc_extent_kind_name, e.kind))
                for e in arr]

    def _extent_of(self, ptr):
        if self._extents is None:
            self._extents = self.extents()
        for e in self._extents:
            if e.base <= ptr < e.base + e.bytes:
                return e
        raise Error(-_errno.EFAULT, "a section outside the arena's extents")

    def _fd(self):
        # the file the library mapped (sc_arena_fd), never a path: the name may name another file
        # by now (destroyed and created again, or planted by another user)
        if self._file is None:
            with self._lock:
                self._file = _check(lib.sc_arena_fd(self._handle()), "sc_arena_fd")
        return self._file

    # -- stages --

    def stage(self, model_identity, state_identity):
        """Open a stage view (see Stage)."""
        return Stage(self, model_identity, state_identity)

    # -- L2 administration and counters --

    def l2_stats(self, stage=None):
        """sc_l2_stats as a dict (one stage's with `stage`)."""
        st = _ffi.L2Stats()
        with self._lock:
            _check(lib.sc_l2_stats(self._handle(), stage._handle() if stage else None, ctypes.byref(st)),
                   "sc_l2_stats")
        return _struct_dict(st)

    def stage_ids(self):
        """The ids of every stage with counters in the arena."""
        with self._lock:
            n = _check(lib.sc_l2_stage_ids(self._handle(), None, 0), "sc_l2_stage_ids")
            ids = (ctypes.c_uint64 * max(n, 1))()
            n = _check(lib.sc_l2_stage_ids(self._handle(), ids, n), "sc_l2_stage_ids")
        return list(ids[:n])

    def l2_stats_id(self, stage_id):
        """sc_l2_stats_id: one stage's counters by id (0: the whole arena)."""
        st = _ffi.L2Stats()
        with self._lock:
            _check(lib.sc_l2_stats_id(self._handle(), int(stage_id), ctypes.byref(st)), "sc_l2_stats_id")
        return _struct_dict(st)

    def miss_stats(self, stage_id=0):
        """sc_miss_stats: why lookups and restores missed, by reason, for stage `stage_id` (an id,
        or a Stage; 0: the whole arena), as dicts {"l2", "restore", "l2_refused", "deadline"}."""
        m = _ffi.MissStats()
        sid = stage_id.id if isinstance(stage_id, Stage) else int(stage_id)
        with self._lock:
            _check(lib.sc_miss_stats(self._handle(), sid, ctypes.byref(m)), "sc_miss_stats")
        return _misses(m)

    def promote_stats(self):
        st = _ffi.PromoteStats()
        with self._lock:
            _check(lib.sc_promote_stats(self._handle(), ctypes.byref(st)), "sc_promote_stats")
        return _struct_dict(st)

    def ring_stats(self):
        """One dict per commit ring (state by name)."""
        with self._lock:
            n = _check(lib.sc_ring_stats(self._handle(), None, 0), "sc_ring_stats")
            arr = (_ffi.RingStat * max(n, 1))()
            n = min(_check(lib.sc_ring_stats(self._handle(), arr, n), "sc_ring_stats"), n)
        out = []
        for r in arr[:n]:
            d = _struct_dict(r)
            d["state_name"] = _name(lib.sc_ring_state_name, r.state)
            d["producer_alive"], d["corrupt"] = bool(r.producer_alive), bool(r.corrupt)
            out.append(d)
        return out

    def clear(self):
        """Remove every L2 entry (leased ones' memory waits for their release). Returns the count."""
        with self._lock:
            return _check(lib.sc_l2_clear(self._handle()), "sc_l2_clear")

    def invalidate(self, digest_):
        """Remove every entry, in every stage, whose payload digest is `digest_`. Returns the count."""
        d = Digest.parse(digest_) if isinstance(digest_, str) else digest_
        with self._lock:
            return _check(lib.sc_l2_invalidate_digest(self._handle(), d._c()), "sc_l2_invalidate_digest")

    def shrink_to(self, nbytes):
        """Set the L2 budget (0: the whole heap) and evict down to it; False when only leased
        entries are left above it (-EBUSY), True when done."""
        with self._lock:
            while True:
                rc = lib.sc_l2_shrink_to(self._handle(), int(nbytes))
                if rc == -_errno.EAGAIN:
                    continue
                if rc == -_errno.EBUSY:
                    return False
                _check(rc, "sc_l2_shrink_to")
                return True

    def fsck(self, deep=False, repair=False):
        """sc_arena_fsck: the report as a dict, with "left" (problems left)."""
        rep = _ffi.FsckReport()
        with self._lock:
            left = _check(lib.sc_arena_fsck(self._handle(), (1 if deep else 0) | (2 if repair else 0), None, None,
                                            ctypes.byref(rep)), "sc_arena_fsck")
        d = _struct_dict(rep)
        d["left"] = left
        return d

    # -- promotion policy --

    def promote_consider(self, stage_id, digest_, token_count, payload_bytes):
        """Count an L3 fill of `digest_` and decide: (yes, why) with why a name such as "second_hit"."""
        why = ctypes.c_int(-1)
        with self._lock:
            rc = _check(lib.sc_promote_consider(self._handle(), int(stage_id), digest_._c(), int(token_count),
                                                int(payload_bytes), ctypes.byref(why)), "sc_promote_consider")
        return bool(rc), _name(lib.sc_promote_why_name, why.value)

    def promote_attempted(self, stage_id, digest_):
        """Mark the observation terminal (Stage.promote_admit does it for you)."""
        with self._lock:
            rc = lib.sc_promote_attempted(self._handle(), int(stage_id), digest_._c())
        if rc != -_errno.ENOENT:
            _check(rc, "sc_promote_attempted")
        return rc == 0

    # -- commit rings --

    def ring(self):
        """Claim a commit ring for this producer (see Ring)."""
        return Ring(self)

    def poll(self, max=64):
        """Take up to `max` pending commits from every ring (the consumer role is exclusive:
        another live consumer makes this raise Error EBUSY). Returns a list of Commit."""
        out = []

        def cb(c, _ctx):
            c = c.contents
            toks = tuple(c.tokens[:c.token_count]) if c.token_count else ()
            out.append(Commit(c.request_id, c.session_id, c.generated_token_count, c.flags, toks, c.ring, c.gen,
                              c.seq))
            return 0
        fn = _ffi.RING_FN(cb)
        with self._lock:
            _check(lib.sc_ring_poll(self._handle(), fn, None, int(max)), "sc_ring_poll")
        return out

    def consumer_close(self):
        """Give the consumer role up."""
        with self._lock:
            lib.sc_ring_consumer_close(self._handle())


# ---- stage ----

class Stage(_ArenaChild):
    """A stage view of an arena: a model identity and a state identity, part of every key."""
    _what, _registry, _close_fn = "stage", "_stages", lib.sc_stage_close

    def __init__(self, arena, model_identity, state_identity):
        self.arena = arena
        self.model_identity, self.state_identity = model_identity, state_identity
        h = ctypes.c_void_p()
        with arena._lock:
            _check(lib.sc_stage_open(arena._handle(), _text(model_identity, "model_identity"),
                                     _text(state_identity, "state_identity"),
                                     ctypes.byref(h)), "sc_stage_open")
        self._attach(arena, h)
        self.id = lib.sc_stage_id(h)

    def key(self, ns, tokens):
        t, n, _k = _tokens(tokens)
        k = _ffi.Key_()
        _check(lib.sc_l2_key(self._handle(), _ns(ns), t, n, ctypes.byref(k)), "sc_l2_key")
        return Key(k.lo, k.hi)

    def admit(self, ns, tokens, payload, digest=None, origin="direct", cost_ns=0):
        """Copy a payload into L2 under the key of (ns, tokens). The digest is computed when not
        given (a given one is checked: -EBADMSG when it differs). `cost_ns`: what computing this
        prefix costs (0: the stage's per-token cost, see set_token_cost), so that L2 keeps what
        saves the most compute per byte (sc_l2_admit_cost)."""
        p = Payload.of(payload)
        d = digest if digest is not None else p.digest()
        cp, _keep = p._c()
        t, n, _kt = _tokens(tokens)
        o = _ORIGINS[origin] if isinstance(origin, str) else int(origin)
        with self.arena._lock:
            _check(lib.sc_l2_admit_cost(self._handle(), _ns(ns), t, n, d._c(), ctypes.byref(cp), o, _cost(cost_ns)),
                   "sc_l2_admit_cost")
        return d

    def promote_admit(self, ns, tokens, payload, digest=None, cost_ns=0):
        """Admit an L3 fill the policy said yes to, and record the attempt (sc_promote_admit_cost)."""
        p = Payload.of(payload)
        d = digest if digest is not None else p.digest()
        cp, _keep = p._c()
        t, n, _kt = _tokens(tokens)
        with self.arena._lock:
            _check(lib.sc_promote_admit_cost(self._handle(), _ns(ns), t, n, d._c(), ctypes.byref(cp), _cost(cost_ns)),
                   "sc_promote_admit_cost")
        return d

    def set_token_cost(self, ns_per_token):
        """Declare what computing one token of this stage costs, ns (sc_stage_set_token_cost): an
        admission without a cost of its own is charged token count x this."""
        rc = lib.sc_stage_set_token_cost(self._handle(), _cost(ns_per_token))
        if rc != -_errno.ENOSPC:  # no record in the arena: this handle still charges it
            _check(rc, "sc_stage_set_token_cost")

    @property
    def token_cost(self):
        v = ctypes.c_uint64()
        _check(lib.sc_stage_token_cost(self._handle(), ctypes.byref(v)), "sc_stage_token_cost")
        return v.value

    def miss_stats(self):
        """Why this stage's lookups and restores missed (Arena.miss_stats of this stage)."""
        return self.arena.miss_stats(self.id)

    @staticmethod
    def _loc(location):
        if location is None:
            return None
        if isinstance(location, Location):
            return ctypes.byref(_ffi.Location_(token_count=location.token_count, digest=location.digest._c()))
        token_count, d = location
        return ctypes.byref(_ffi.Location_(token_count=int(token_count), digest=d._c()))

    def get(self, ns, tokens, location=None):
        """Look (ns, tokens) up; a Lease on a hit, None on a miss. `location` (a Location, or
        (token_count, Digest)) validates the entry: a disagreeing one is removed (a miss)."""
        t, n, _kt = _tokens(tokens)
        c = _ffi.Lease_()
        with self.arena._lock:
            rc = lib.sc_l2_get(self._handle(), _ns(ns), t, n, self._loc(location), ctypes.byref(c))
            if rc == -_errno.ENOENT:
                return None
            _check(rc, "sc_l2_get")
            return Lease(self.arena, c)

    def get_copy(self, ns, tokens, location=None):
        """The wire of the entry as bytes (no lease), or None on a miss."""
        t, n, _kt = _tokens(tokens)
        info = _ffi.L2EntryInfo()
        with self.arena._lock:
            rc = lib.sc_l2_get_copy(self._handle(), _ns(ns), t, n, self._loc(location), None, 0, ctypes.byref(info))
            while rc == -_errno.ENOBUFS:
                buf = ctypes.create_string_buffer(info.bytes)
                rc = lib.sc_l2_get_copy(self._handle(), _ns(ns), t, n, self._loc(location), buf, len(buf),
                                        ctypes.byref(info))
                if rc >= 0:
                    return buf.raw[:rc]
            if rc == -_errno.ENOENT:
                return None
            _check(rc, "sc_l2_get_copy")
            return b""

    def peek(self, ns, tokens):
        """An entry's metadata (dict) without touching it, or None."""
        t, n, _kt = _tokens(tokens)
        info = _ffi.L2EntryInfo()
        with self.arena._lock:
            rc = lib.sc_l2_peek(self._handle(), _ns(ns), t, n, ctypes.byref(info))
        if rc == -_errno.ENOENT:
            return None
        _check(rc, "sc_l2_peek")
        d = _struct_dict(info)
        d["key"], d["digest"] = Key(info.key.lo, info.key.hi), _digest_c(info.digest)
        d["kind"], d["origin"] = _name(lib.sc_payload_kind_name, info.kind), _name(lib.sc_origin_name, info.origin)
        d["sec_len"] = (info.sec_len[0], info.sec_len[1])
        d["has_kv_desc"] = bool(info.has_kv_desc)
        return d

    def longest_prefix(self, ns, tokens, block=0):
        """The longest cached block-aligned prefix: (length, Lease), or None."""
        t, n, _kt = _tokens(tokens)
        ln = ctypes.c_uint32()
        c = _ffi.Lease_()
        with self.arena._lock:
            rc = lib.sc_l2_longest_prefix(self._handle(), _ns(ns), t, n, int(block), ctypes.byref(ln), ctypes.byref(c))
            if rc == -_errno.ENOENT:
                return None
            _check(rc, "sc_l2_longest_prefix")
            return ln.value, Lease(self.arena, c)

    def lookup(self, ns, tokens, l3=None, block=0):
        """How much of a prompt is here (sc_lookup): a dict with tokens (the longer of the two),
        l2_tokens, l3_tokens (0: none), l2_digest, l3_digest (None when none), l2_bytes, l3_bytes.
        Takes no lease and counts nothing; `l3` (an L3, optional) is asked for namespace `ns`."""
        t, n, _kt = _tokens(tokens)
        r = _ffi.Lookup_()
        with self.arena._lock:
            rc = lib.sc_lookup(self._handle(), l3._handle() if l3 is not None else None, _ns(ns), t, n, int(block),
                               ctypes.byref(r))
        _check(rc, "sc_lookup")
        d = _struct_dict(r)
        d["l2_digest"] = _digest_c(r.l2_digest) if r.l2_tokens else None
        d["l3_digest"] = _digest_c(r.l3_digest) if r.l3_tokens else None
        return d

    def remove(self, key):
        """Remove the entry with `key` (a Key); False when there is none."""
        with self.arena._lock:
            rc = lib.sc_l2_remove(self._handle(), _ffi.Key_(key.lo, key.hi))
        if rc == -_errno.ENOENT:
            return False
        _check(rc, "sc_l2_remove")
        return True

    def stats(self):
        return self.arena.l2_stats(self)

    def restore(self, l3, ns, tokens, wait=False, deadline_ns=0, recompute_ns=0):
        """The whole restore path (sc_restore_with): a Restore, or None when nothing is stored for
        these tokens. `deadline_ns` (clock_ns() based) and `recompute_ns` (what recomputing costs)
        let it answer "recompute" instead of a fill that would lose: Recompute is raised. Blocks on
        disk I/O with the GIL released."""
        t, n, _kt = _tokens(tokens)
        c = _ffi.Restore_()
        o = _ffi.RestoreOpts(flags=_RESTORE_WAIT if wait else 0, deadline_ns=_cost(deadline_ns),
                             recompute_ns=_cost(recompute_ns))
        with self.arena._lock:
            rc = lib.sc_restore_with(self._handle(), l3._handle(), _ns(ns), t, n, ctypes.byref(o), ctypes.byref(c))
            if rc == -_errno.ENOENT:
                return None
            if rc == -_errno.ETIME:
                raise Recompute(rc, "sc_restore_with", _name(lib.sc_miss_reason_name, c.miss_reason),
                                _name(lib.sc_deadline_detail_name, c.miss_detail), c.predicted_ns)
            _check(rc, "sc_restore_with")
            return Restore(self.arena, c)


# ---- L3 ----

class Location:
    """Where a durable copy is (sc_location): token_count, kind, digest, sections, descriptor."""

    def __init__(self, c):
        self._c = c
        self.token_count = c.token_count
        self.kind = _name(lib.sc_payload_kind_name, c.kind)
        self.digest = _digest_c(c.digest)
        self.prefix = _digest_c(c.prefix)
        self.sec_len = (c.sec_len[0], c.sec_len[1])
        self.payload_bytes = c.payload_bytes
        self.file_bytes = c.file_bytes
        self.cost_ns = c.cost_ns
        self.kv_desc = KvDesc.from_buffer_copy(c.kv_desc) if c.has_kv_desc else None

    def __repr__(self):
        return "<stagecache.Location %d tokens %s %s %d bytes>" % (self.token_count, self.kind, self.digest,
                                                                   self.payload_bytes)


def block_hashes(tokens, block_size=16, parent=0):
    """The block hashes `stagecache events` publishes for a prefix (docs/ROUTING.md,
    sc_block_hashes): one per whole block of `block_size` tokens, chained from `parent`."""
    t, n, _kt = _tokens(tokens)
    nb = n // block_size if block_size > 0 else 0
    out = (ctypes.c_uint64 * max(nb, 1))()
    rc = lib.sc_block_hashes(t, n, int(block_size), int(parent), out, nb)
    _check(rc, "sc_block_hashes")
    return list(out[:rc])


class L3(_Closable):
    """The durable on-disk store (sc_l3_open): put, locate, lookup, fill, stats.
    The handle may be shared by threads (each thread gets its own io_uring)."""

    def __init__(self, dir, budget=0, min_free=0, queue_depth=0, o_direct="auto", file_mode=0, reconcile=True):
        path = _path(dir, "dir")  # before anything: a bad argument has no side effect
        o = _ffi.L3Opts()
        o.budget_bytes, o.min_free_bytes, o.queue_depth = int(budget), int(min_free), int(queue_depth)
        o.o_direct = _ODIRECT[o_direct] if isinstance(o_direct, str) else int(o_direct)
        o.file_mode = int(file_mode)
        o.flags = 0 if reconcile else _L3_OPEN_NO_RECONCILE
        h = ctypes.c_void_p()
        _check(lib.sc_l3_open(path, ctypes.byref(o), ctypes.byref(h)), "sc_l3_open")
        self._h = h
        self.dir = os.fsdecode(path)
        self._lock = threading.Lock()

    def _handle(self):
        if not self._h.value:
            raise ValueError("this L3 handle is closed")
        return self._h

    def close(self):
        if self._h.value:
            lib.sc_l3_close(self._h)
            self._h = ctypes.c_void_p()


    def put(self, ns, tokens, payload, model_identity=None, state_identity=None, cost_ns=0):
        """Write a payload through to disk and index its prefix, recording `cost_ns` (what
        computing the prefix costs, 0: none; sc_l3_put_cost). Returns its Location."""
        a, cost, _keep = _put_args(ns, tokens, payload, model_identity, state_identity, cost_ns)
        loc = _ffi.L3Location_()
        _check(lib.sc_l3_put_cost(self._handle(), ctypes.byref(a), cost, ctypes.byref(loc)), "sc_l3_put_cost")
        return Location(loc)

    def put_many(self, items):
        """Several puts made durable together (sc_l3_put_many, group commit: two fsync latencies
        shared by the batch instead of four per put). Each item holds one put's arguments: a
        tuple (ns, tokens, payload[, model_identity[, state_identity[, cost_ns]]]) or a dict of
        put's keywords. Returns one Location per item, in order; an empty sequence returns []
        without calling the library.

        More than L3_PUT_MANY_MAX (64) items are put in batches of that many, in order. Every
        item's arguments are converted first (a TypeError or ValueError writes nothing); the
        library checks a batch whole before writing any of it (one invalid put: the batch is
        refused with EINVAL, nothing of it written, nothing stored before lost). When a put is
        not acknowledged, the batches after its own are not tried and PutManyError is raised;
        the puts it reports acknowledged are durable. Blocks on disk I/O (GIL released)."""
        puts = [_put_args(**it) if isinstance(it, Mapping) else _put_args(*it) for it in items]
        out = []
        for lo in range(0, len(puts), L3_PUT_MANY_MAX):
            batch = puts[lo:lo + L3_PUT_MANY_MAX]
            k = len(batch)
            args = (_ffi.L3PutArgs * k)(*(a for a, _c, _k in batch))
            costs = (ctypes.c_uint64 * k)(*(c for _a, c, _k in batch))
            locs, rcs = (_ffi.L3Location_ * k)(), (ctypes.c_int * k)()
            rc = lib.sc_l3_put_many(self._handle(), args, costs, k, locs, rcs)
            out += [Location(locs[i]) if rcs[i] == 0 else Error(rcs[i], "sc_l3_put_many") for i in range(k)]
            if rc < 0:
                raise PutManyError(out + [None] * (len(puts) - len(out)))
        return out

    def fill_estimate(self, nbytes):
        """The predicted time of a fill of `nbytes` on this thread's ring (sc_l3_fill_estimate),
        ns, or None when nothing was measured yet."""
        v = ctypes.c_uint64()
        rc = lib.sc_l3_fill_estimate(self._handle(), int(nbytes), ctypes.byref(v))
        if rc == -_errno.ENODATA:
            return None
        _check(rc, "sc_l3_fill_estimate")
        return v.value

    def locate_longest(self, ns, tokens):
        """The longest stored prefix of tokens: a Location, or None."""
        t, n, _kt = _tokens(tokens)
        loc = _ffi.L3Location_()
        rc = _check(lib.sc_l3_locate_longest(self._handle(), _ns(ns), t, n, ctypes.byref(loc)), "sc_l3_locate_longest")
        return Location(loc) if rc > 0 else None

    def lookup(self, digest_):
        """The Location of the object with `digest_`, or None."""
        loc = _ffi.L3Location_()
        rc = lib.sc_l3_lookup(self._handle(), digest_._c(), ctypes.byref(loc))
        if rc == -_errno.ENOENT:
            return None
        _check(rc, "sc_l3_lookup")
        return Location(loc)

    def fill(self, location):
        """Read and verify the payload of `location` into a new bytearray (GIL released while
        it reads). For fills straight into the arena use Stage.restore."""
        buf = bytearray(max(location.payload_bytes, 1))
        c = (ctypes.c_char * len(buf)).from_buffer(buf)
        _check(lib.sc_l3_fill(self._handle(), ctypes.byref(location._c), c, len(buf), 1), "sc_l3_fill")
        del c
        return bytes(buf[:location.payload_bytes])

    def bind_arena(self, arena):
        """Quarantines invalidate L2 mirrors in `arena` (see sc_l3_bind_arena)."""
        _check(lib.sc_l3_bind_arena(self._handle(), arena._handle()), "sc_l3_bind_arena")

    def evict_to(self, nbytes):
        return _check(lib.sc_l3_evict_to(self._handle(), int(nbytes)), "sc_l3_evict_to")

    def stats(self):
        st = _ffi.L3Stats()
        _check(lib.sc_l3_stats(self._handle(), ctypes.byref(st)), "sc_l3_stats")
        return _struct_dict(st)


# ---- rings and the batcher ----

class Ring(_ArenaChild):
    """A commit ring claimed by this producer (sc_ring_open). Use it from one thread.
    close() gives the ring up (what was submitted is still delivered)."""
    _what, _registry, _close_fn = "ring", "_rings", lib.sc_ring_close

    def __init__(self, arena):
        self.arena = arena
        h = ctypes.c_void_p()
        with arena._lock:
            _check(lib.sc_ring_open(arena._handle(), ctypes.byref(h)), "sc_ring_open")
        self._attach(arena, h)
        self.index = lib.sc_ring_index(h)
        self.max_tokens = lib.sc_ring_max_tokens(h)

    def submit(self, request_id, session_id, generated_token_count, tokens, flags=0):
        """Append one commit; False when the ring is full (nothing written)."""
        t, n, _kt = _tokens(tokens)
        c = _ffi.Commit_(request_id=request_id, session_id=session_id, generated_token_count=generated_token_count,
                         flags=flags, token_count=n, tokens=t)
        with self.arena._lock:
            rc = lib.sc_ring_try_submit(self._handle(), ctypes.byref(c))
        if rc == -_errno.EAGAIN:
            return False
        _check(rc, "sc_ring_try_submit")
        return True


class Batcher:
    """The per-request commit batcher (sc_batcher): first token at once, then every interval or
    every `capacity` tokens, a flush before the end. `ring` None makes a batcher that keeps and
    counts nothing. As a context manager it finishes the generation on exit (aborted when the
    block raised)."""

    def __init__(self, ring, request_id, session_id, interval_ns=None, capacity=None):
        self.ring = ring
        # opaque: sc_sizeof("sc_batcher") bytes, 8-byte aligned (an array of u64)
        self._buf = (ctypes.c_uint64 * ((lib.sc_sizeof(b"sc_batcher") + 7) // 8))()
        self._own_lock = threading.RLock()
        o = _ffi.BatcherOpts()
        if interval_ns is not None:
            o.interval_ns = int(interval_ns)
            o.flags |= _BATCHER_OPT_INTERVAL  # 0 really means "every token"
        o.capacity = int(capacity or 0)
        _check(lib.sc_batcher_init_opts(self._buf, ring._handle() if ring else None, int(request_id),
                                        int(session_id), ctypes.byref(o)), "sc_batcher_init_opts")

    def _lock(self):
        return self.ring.arena._lock if self.ring else self._own_lock

    def commit(self, token, elapsed_ns):
        """Record one generated token (elapsed_ns: time since the request started). True when it
        was taken (its batch may wait for room in the ring: it goes out with a later call);
        False when it was refused because the batcher is full and the ring still is: commit
        the same token again later."""
        with self._lock():
            rc = lib.sc_batcher_commit(self._buf, int(token), int(elapsed_ns))
        if rc == -_errno.EAGAIN:
            return False
        _check(rc, "sc_batcher_commit")
        return True

    def flush(self):
        """Emit what is pending; False when the ring is full (the batch stays pending)."""
        with self._lock():
            rc = lib.sc_batcher_flush(self._buf)
        if rc == -_errno.EAGAIN:
            return False
        _check(rc, "sc_batcher_flush")
        return True

    def finish(self, aborted=False):
        """The generation's terminal commit; False when the ring is full (call again)."""
        with self._lock():
            rc = lib.sc_batcher_finish(self._buf, COMMIT_ABORTED if aborted else COMMIT_FINISHED)
        if rc == -_errno.EAGAIN:
            return False
        _check(rc, "sc_batcher_finish")
        return True

    @property
    def count(self):
        return lib.sc_batcher_count(self._buf)

    @property
    def pending(self):
        return lib.sc_batcher_pending(self._buf)

    @property
    def ring_full(self):
        return lib.sc_batcher_ring_full(self._buf)

    @property
    def commits(self):
        return lib.sc_batcher_commits(self._buf)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.finish(aborted=exc_type is not None)
        return False
