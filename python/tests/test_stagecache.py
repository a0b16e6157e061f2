"""Tests of the Python package against the built library (python3 -m unittest, run by make check
through tests/api/python.sh with Debian's python3 and python3-numpy)."""
import ctypes
import errno
import gc
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import stagecache as sc
from stagecache import _ffi

try:
    import numpy as np
except ImportError:  # make check installs python3-numpy; elsewhere the numpy cases skip
    np = None

PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(sc.__file__)))
_n = [0]


def uniq(tag):
    _n[0] += 1
    return "py-%s-%d-%d" % (tag, os.getpid(), _n[0])


class ArenaCase(unittest.TestCase):
    """A fresh 16 MiB arena on 4 KiB shared memory, one stage."""
    size = 16 << 20
    huge = "off"

    def setUp(self):
        self.name = uniq(type(self).__name__.lower()[:8])
        self.arena = sc.Arena.create(self.name, self.size, huge=self.huge)
        self.stage = self.arena.stage("llama-test", "kv-fp16")

    def tearDown(self):
        gc.collect()
        self.arena.close()
        sc.Arena.destroy(self.name)


def payload(n, seed=1):
    return bytes((i * 31 + seed) & 0xff for i in range(n))


class TestLayouts(unittest.TestCase):
    def test_every_structure_and_public_field_is_mirrored(self):
        names = _ffi.library_types()
        self.assertIn("sc_lease", names)
        for cname in names:
            if cname == "sc_batcher":  # opaque
                self.assertEqual(_ffi.library_fields(cname), [])
                continue
            self.assertIn(cname, _ffi.STRUCTS, "no mirror of %s" % cname)
            cls = _ffi.STRUCTS[cname]
            mine = {n for n, _ in cls._fields_ if not n.startswith("_")}
            for fname, off, size in _ffi.library_fields(cname):
                self.assertIn(fname, mine, "%s.%s is not mirrored" % (cname, fname))
                self.assertEqual(getattr(cls, fname).offset, off, "%s.%s" % (cname, fname))
                self.assertEqual(getattr(cls, fname).size, size, "%s.%s" % (cname, fname))
            self.assertEqual(ctypes.sizeof(cls), sc.lib.sc_sizeof(cname.encode()), cname)

    def test_the_library_describes_every_structure_of_the_header(self):
        # a structure added to stagecache.h (or stagecache_parts.h) must get a line in lib/abi.c
        # (and a mirror here)
        import re
        header = ""
        for h in ("stagecache.h", "stagecache_parts.h"):
            with open(os.path.join(PKG_DIR, "..", "lib", h)) as f:
                header += f.read()
        declared = set(re.findall(r"^struct (sc_\w+) \{", header, re.M))
        self.assertEqual(declared, set(_ffi.library_types()))

    def test_a_mismatch_refuses_to_load(self):
        good = _ffi.STRUCTS["sc_l2_stats"]

        class Shifted(ctypes.Structure):  # hits where misses is: what a stale mirror looks like
            _fields_ = [("entries", ctypes.c_uint64), ("bytes", ctypes.c_uint64), ("logical_bytes", ctypes.c_uint64),
                        ("budget_bytes", ctypes.c_uint64), ("misses", ctypes.c_uint64), ("hits", ctypes.c_uint64),
                        ("_rest", ctypes.c_uint8 * (ctypes.sizeof(good) - 48))]
        try:
            _ffi.STRUCTS["sc_l2_stats"] = Shifted
            with self.assertRaises(sc.LayoutError) as cm:
                _ffi.check_layouts()
            self.assertIn("sc_l2_stats.misses", str(cm.exception))
        finally:
            _ffi.STRUCTS["sc_l2_stats"] = good
        _ffi.check_layouts()

    def test_a_wrong_size_refuses_to_load(self):
        good = _ffi.STRUCTS["sc_digest"]

        class Short(ctypes.Structure):
            _fields_ = [("lo", ctypes.c_uint64)]
        try:
            _ffi.STRUCTS["sc_digest"] = Short
            with self.assertRaises(sc.LayoutError):
                _ffi.check_layouts()
        finally:
            _ffi.STRUCTS["sc_digest"] = good


class TestDigestAndErrors(unittest.TestCase):
    def test_digest(self):
        d = sc.digest(b"abc")
        self.assertEqual(len(d.hex()), 32)
        self.assertEqual(sc.Digest.parse(d.hex()), d)
        self.assertEqual(sc.Digest.parse(d.hex().upper()), d)
        self.assertEqual(sc.digest(b"ab", b"c"), d)
        self.assertEqual(sc.digest(bytearray(b"abc")), d)
        self.assertEqual(sc.digest(memoryview(b"xabc")[1:]), d)
        self.assertNotEqual(sc.digest(b"abd"), d)
        for bad in ("", "xyz", "0" * 31, "g" * 32, "0" * 33):
            with self.assertRaises(sc.Error) as cm:
                sc.Digest.parse(bad)
            self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_errors_carry_the_errno_and_the_library_message(self):
        with self.assertRaises(sc.Error) as cm:
            sc.Arena.open(uniq("none"))
        e = cm.exception
        self.assertIsInstance(e, OSError)
        self.assertEqual(e.errno, errno.ENOENT)
        self.assertIn(sc.strerror(-errno.ENOENT), str(e))
        self.assertEqual(e.call, "sc_arena_open")
        with self.assertRaises(sc.Error) as cm:
            sc.Arena.open("bad/name")
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(sc.Error) as cm:
            sc.Arena.create(uniq("small"), 1 << 20, huge="off")
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(KeyError):
            sc.Arena.create(uniq("h"), 16 << 20, huge="sometimes")


class TestArena(ArenaCase):
    def test_info_and_extents(self):
        info = self.arena.info()
        self.assertEqual(info["name"], self.name)
        self.assertEqual(info["backing"], "shm-4k")
        self.assertGreaterEqual(info["attached_count"], 1)
        self.assertTrue(info["path"].endswith("stagecache." + self.name))
        ex = self.arena.extents()
        self.assertEqual(len(ex), 1)
        self.assertEqual(ex[0].kind, "heap")
        self.assertEqual(ex[0].page_size, 4096)
        self.assertGreaterEqual(ex[0].bytes, info["heap_bytes"])

    def test_slots_per_user_and_inspect(self):
        name = uniq("spu")
        with self.assertRaises(sc.Error) as cm:  # a limit above the slots
            sc.Arena.create(name, 16 << 20, huge="off", reader_slots=4, slots_per_user=5)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        a = sc.Arena.create(name, 16 << 20, huge="off", reader_slots=4, slots_per_user=2)
        b = None
        try:
            self.assertEqual(a.info()["slots_per_user"], 2)
            b = sc.Arena.open(name)
            with self.assertRaises(sc.Error) as cm:  # this user's third attach
                sc.Arena.open(name)
            self.assertEqual(cm.exception.errno, errno.EDQUOT)
            info = sc.Arena.inspect(name)  # no slot needed
            self.assertEqual(info["slots_per_user"], 2)
            self.assertEqual(info["attached_count"], 2)
            self.assertEqual(info["name"], name)
            self.assertEqual(sc.Arena.inspect(name, owner="any")["reader_slots"], 4)
            with self.assertRaises(sc.Error) as cm:
                sc.Arena.inspect("bad/name")
            self.assertEqual(cm.exception.errno, errno.EINVAL)
            with self.assertRaises(sc.Error) as cm:
                sc.Arena.inspect(uniq("none"))
            self.assertEqual(cm.exception.errno, errno.ENOENT)
            with self.assertRaises(ValueError):
                sc.Arena.inspect(name, owner=True)
        finally:
            if b is not None:
                b.close()
            a.close()
            sc.Arena.destroy(name)

    def test_create_twice_and_use_after_close(self):
        with self.assertRaises(sc.Error) as cm:
            sc.Arena.create(self.name, 16 << 20, huge="off")
        self.assertEqual(cm.exception.errno, errno.EEXIST)
        other = sc.Arena.open(self.name)
        other.close()
        other.close()  # idempotent
        with self.assertRaises(ValueError):
            other.l2_stats()
        with self.assertRaises(ValueError):
            other.stage("m", "s")

    def test_bad_stage_identities(self):
        for model, state in (("", "s"), ("m", ""), ("m" * 5000, "s")):
            with self.assertRaises(sc.Error) as cm:
                self.arena.stage(model, state)
            self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_stage_ids_and_stats(self):
        other = self.arena.stage("other", "kv")
        self.stage.admit("a", [1, 2], payload(100))
        other.admit("a", [1, 2], payload(200))
        other.admit("a", [1, 2, 3], payload(300))
        ids = sorted(self.arena.stage_ids())
        self.assertEqual(ids, sorted([self.stage.id, other.id]))
        self.assertEqual(self.arena.l2_stats_id(other.id)["entries"], 2)
        self.assertEqual(self.arena.l2_stats_id(other.id), other.stats())
        self.assertEqual(self.arena.l2_stats()["entries"], 3)
        with self.assertRaises(sc.Error) as cm:
            self.arena.l2_stats_id(12345)
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        other.close()



class TestSegments(unittest.TestCase):
    def test_a_scattered_entry_reads_back_and_is_counted_once(self):
        name = uniq("seg")
        a = sc.Arena.create(name, 64 << 20, huge="off", segment_bytes=1 << 20)
        try:
            st = a.stage("llama-test", "kv-fp16")
            base = os.urandom(6 << 20)
            st.admit("t", [1, 2], base[:4 << 20])
            st.admit("t", [1, 2, 3], base)
            with st.get("t", [1, 2, 3]) as lease:
                self.assertEqual(lease.sec_len, (6 << 20, 0))
                self.assertEqual(bytes(lease.view(0)), base)
            s = a.l2_stats()
            self.assertEqual(s["logical_bytes"], 10 << 20)
            self.assertEqual(s["physical_bytes"], 6 << 20)
            self.assertEqual(s["saved_bytes"], 4 << 20)
            with self.assertRaises(sc.Error):
                sc.Arena.create(uniq("seg"), 16 << 20, huge="off", segment_bytes=3 << 20)
            del lease
            gc.collect()
        finally:
            a.close()
            sc.Arena.destroy(name)

class TestLeases(ArenaCase):
    def test_admit_get_zero_copy_views(self):
        data = payload(10000)
        d = self.stage.admit("t", [5, 6, 7], data)
        self.assertEqual(d, sc.digest(data))
        with self.stage.get("t", [5, 6, 7]) as lease:
            self.assertEqual(lease.kind, "full_state")
            self.assertEqual(lease.origin, "direct")
            self.assertEqual(lease.token_count, 3)
            self.assertEqual(lease.digest, d)
            self.assertEqual(lease.sec_len, (10000, 0))
            v = lease.view(0)
            self.assertTrue(v.readonly)
            self.assertEqual(v.nbytes, 10000)
            self.assertEqual(bytes(v), data)
            with self.assertRaises(TypeError):
                v[0] = 1
            self.assertEqual(len(lease.view(1)), 0)
            del v
        self.assertTrue(lease.released)
        self.assertEqual(self.arena.l2_stats()["leases"], 0)
        with self.assertRaises(ValueError):
            lease.view(0)
        self.assertIsNone(self.stage.get("t", [5, 6]))

    def test_the_view_is_the_shared_memory(self):
        # the view and a copy taken by the library agree byte for byte, at the lease's place
        data = payload(3 << 20, seed=9)
        self.stage.admit("t", [1], data)
        lease = self.stage.get("t", [1])
        self.assertEqual(bytes(lease.view(0)), self.stage.get_copy("t", [1]))
        ex = self.arena.extents()[0]
        self.assertTrue(ex.base <= lease._c.sec[0] < ex.base + ex.bytes)
        lease.release()

    def test_a_view_maps_the_attached_file_never_the_name(self):
        # the lease was taken from this handle: its view shows this arena's bytes, even after the
        # name was destroyed and created again, or another file was planted under it (a FIFO
        # would hang a view that opened the path)
        data = payload(20000, seed=3)
        self.stage.admit("t", [9], data)
        path = self.arena.info()["path"]
        sc.Arena.destroy(self.name)
        other = sc.Arena.create(self.name, self.size, huge=self.huge)
        ostage = other.stage("llama-test", "kv-fp16")
        ostage.admit("t", [9], payload(20000, seed=4))
        with self.stage.get("t", [9]) as lease:
            self.assertEqual(bytes(lease.view(0)), data)
            self.assertEqual(sc.digest(lease.view(0)), lease.digest)
        ostage.close()
        other.close()
        sc.Arena.destroy(self.name)
        os.mkfifo(path, 0o600)
        try:
            done = []

            def look():
                with self.stage.get("t", [9]) as lease:
                    done.append(bytes(lease.view(0)) == data)
            t = threading.Thread(target=look, daemon=True)
            t.start()
            t.join(10)  # a view that opened the planted FIFO would block here forever
            self.assertEqual(done, [True])
        finally:
            os.unlink(path)
        # tearDown destroys the name again: make one to destroy
        sc.Arena.create(self.name, self.size, huge=self.huge).close()

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_numpy_arrays_over_a_lease(self):
        arr = np.arange(4096, dtype=np.float16)
        self.stage.admit("t", [1, 2], arr.tobytes())
        lease = self.stage.get("t", [1, 2])
        a = lease.array(0, dtype=np.float16, shape=(64, 64))
        self.assertEqual(a.shape, (64, 64))
        self.assertFalse(a.flags.writeable)
        self.assertTrue(np.array_equal(a.ravel(), arr))
        with self.assertRaises(ValueError):
            a[0, 0] = 1
        # an exported numpy array keeps the lease: release raises, nothing is unpinned
        with self.assertRaises(BufferError):
            lease.release()
        self.assertFalse(lease.released)
        self.assertEqual(self.arena.l2_stats()["leases"], 1)
        del a
        lease.release()
        self.assertEqual(self.arena.l2_stats()["leases"], 0)
        # tokens as a numpy array work too
        self.assertIsNotNone(self.stage.get_copy("t", np.array([1, 2], dtype=np.int64)))

    def test_a_view_still_exported_after_release_raises(self):
        self.stage.admit("t", [9], payload(5000))
        lease = self.stage.get("t", [9])
        whole = lease.view(0)
        part = whole[100:200]      # a slice shares the mapping
        again = memoryview(part)   # so does a view of a view
        del whole, part
        with self.assertRaises(BufferError):
            lease.release()
        self.assertFalse(lease.released)
        self.assertEqual(self.arena.l2_stats()["leases"], 1)
        self.assertEqual(bytes(again), payload(5000)[100:200])  # still valid: still pinned
        again.release()
        lease.release()
        self.assertTrue(lease.released)
        self.assertEqual(self.arena.l2_stats()["leases"], 0)
        with self.assertRaises(BufferError):  # the context manager raises the same way
            with self.stage.get("t", [9]) as l2:
                keep = l2.view(0)
        del keep
        l2.release()

    def test_a_lease_held_across_a_clear(self):
        data = payload(1 << 20, seed=3)
        self.stage.admit("t", [1, 2, 3], data)
        lease = self.stage.get("t", [1, 2, 3])
        v = lease.view(0)
        self.assertEqual(self.arena.clear(), 1)
        self.assertIsNone(self.stage.get("t", [1, 2, 3]))
        # churn the heap: the cleared entry's memory must not be handed out while leased
        for i in range(40):
            self.stage.admit("churn", [i], payload(256 << 10, seed=i))
        self.assertEqual(bytes(v), data)
        self.assertGreater(self.arena.l2_stats()["pending_reclaim_bytes"], 0)
        del v
        lease.release()
        for i in range(40, 48):  # later writers reclaim it
            self.stage.admit("churn", [i], payload(256 << 10, seed=i))
        self.assertEqual(self.arena.l2_stats()["leases"], 0)

    def test_location_validation_removes_a_stale_mirror(self):
        data = payload(1000)
        d = self.stage.admit("t", [1, 2, 3], data)
        self.assertIsNone(self.stage.get("t", [1, 2, 3], location=(3, sc.digest(b"changed"))))
        self.assertIsNone(self.stage.peek("t", [1, 2, 3]))  # removed, not only missed
        self.stage.admit("t", [1, 2, 3], data)
        with self.stage.get("t", [1, 2, 3], location=(3, d)) as lease:
            self.assertEqual(lease.digest, d)

    def test_peek_copy_prefix_remove(self):
        toks = list(range(1, 1025))
        self.stage.admit("t", toks[:512], payload(700))
        info = self.stage.peek("t", toks[:512])
        self.assertEqual(info["token_count"], 512)
        self.assertEqual(info["bytes"], 700)
        self.assertEqual(info["kind"], "full_state")
        self.assertEqual(info["key"], self.stage.key("t", toks[:512]))
        self.assertEqual(self.stage.get_copy("t", toks[:512]), payload(700))
        self.assertIsNone(self.stage.get_copy("t", toks[:511]))
        n, lease = self.stage.longest_prefix("t", toks, block=256)
        self.assertEqual(n, 512)
        lease.release()
        self.assertIsNone(self.stage.longest_prefix("u", toks))
        self.assertTrue(self.stage.remove(info["key"]))
        self.assertFalse(self.stage.remove(info["key"]))

    def test_lookup_across_l2_and_l3(self):
        toks = list(range(1, 1001))
        d = tempfile.mkdtemp(prefix="sc-py-lookup-")
        try:
            with sc.L3(d) as l3:
                self.assertEqual(self.stage.lookup("t", toks, l3)["tokens"], 0)
                self.stage.admit("t", toks[:512], payload(700))
                l3.put("t", toks[:700], payload(300))
                r = self.stage.lookup("t", toks, l3)
                self.assertEqual((r["tokens"], r["l2_tokens"], r["l3_tokens"]), (700, 512, 700))
                self.assertEqual(r["l2_bytes"], 700)
                self.assertEqual(r["l3_bytes"], 300)
                self.assertEqual(r["l2_digest"], sc.digest(payload(700)))
                r = self.stage.lookup("t", toks)  # L2 only
                self.assertEqual((r["tokens"], r["l3_tokens"], r["l3_digest"]), (512, 0, None))
                with self.assertRaises(sc.Error):
                    self.stage.lookup("t", [])
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_block_hashes_and_event_counters(self):
        h = sc.block_hashes(list(range(40)), 16)
        self.assertEqual(len(h), 2)
        self.assertTrue(all(0 <= x < (1 << 63) for x in h))
        self.assertEqual(sc.block_hashes(list(range(16, 32)), 16, parent=h[0]), h[1:])
        self.assertEqual(sc.block_hashes(list(range(15)), 16), [])
        st = self.arena.events_stats()
        self.assertEqual(st["listener"], 0)
        self.assertFalse(st["listener_alive"])
        self.assertGreaterEqual(st["records"], 4096)

    def test_kv_recurrent_with_a_descriptor(self):
        kv, rec = payload(4096, 2), payload(512, 3)
        desc = sc.KvDesc(version=1, layer_end=2, layer_count=2, token_count=4, k_type=1, v_type=1,
                         k_row_bytes=1024, v_row_bytes=1024, v_element_bytes=2, payload_bytes=len(kv))
        p = sc.Payload("kv_recurrent", kv, rec, kv_desc=desc)
        self.stage.admit("t", [1, 2, 3, 4], p)
        with self.stage.get("t", [1, 2, 3, 4]) as lease:
            self.assertEqual(lease.kind, "kv_recurrent")
            self.assertEqual(lease.sec_len, (4096, 512))
            self.assertEqual(lease.kv_desc.as_dict()["k_row_bytes"], 1024)
            self.assertEqual(bytes(lease.view(0)), kv)
            self.assertEqual(bytes(lease.view(1)), rec)
            self.assertEqual(lease.tobytes(), kv + rec)
        bad = sc.KvDesc(version=1, payload_bytes=len(kv) + 1)
        with self.assertRaises(sc.Error) as cm:
            self.stage.admit("t", [5], sc.Payload("kv_recurrent", kv, rec, kv_desc=bad))
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(sc.Error) as cm:  # a KV section needs its descriptor
            self.stage.admit("t", [5], sc.Payload("kv_recurrent", kv, rec))
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_bad_input(self):
        with self.assertRaises(sc.Error) as cm:
            self.stage.admit("t", [1], b"")
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(sc.Error) as cm:
            self.stage.admit("t", [], b"x")
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        with self.assertRaises(sc.Error) as cm:
            self.stage.admit("t", [1], b"x", digest=sc.digest(b"y"))
        self.assertEqual(cm.exception.errno, errno.EBADMSG)
        with self.assertRaises(sc.Error) as cm:
            self.stage.admit("t", [1], b"x" * (32 << 20))  # above the budget
        self.assertEqual(cm.exception.errno, errno.E2BIG)
        with self.assertRaises(OverflowError):
            self.stage.get("t", [2 ** 40])
        with self.assertRaises(ValueError):
            sc.Payload("nonsense", b"x")
        # the empty payload, the digest and the size are counted (an empty token list too, once
        # the library counts every refusal)
        self.assertGreaterEqual(self.arena.l2_stats()["admission_rejects"], 3)

    def test_too_many_leases(self):
        self.stage.admit("t", [1], payload(64))
        held = [self.stage.get("t", [1]) for _ in range(sc.LEASES_MAX)]
        with self.assertRaises(sc.Error) as cm:
            self.stage.get("t", [1])
        self.assertEqual(cm.exception.errno, errno.EMFILE)
        for lease in held:
            lease.release()
        self.stage.get("t", [1]).release()

    def test_closing_the_arena_releases_what_it_holds(self):
        self.stage.admit("t", [1], payload(64))
        lease = self.stage.get("t", [1])
        v = lease.view(0)
        with self.assertRaises(BufferError):
            self.arena.close()  # a view is still exported: nothing is closed
        self.assertEqual(bytes(v), payload(64))
        del v
        self.arena.close()
        self.assertTrue(lease.released)
        self.arena = sc.Arena.open(self.name)  # for tearDown


def _tree(top):
    """Every path under `top` with its size and mtime (what a side effect would change)."""
    out = {}
    if not os.path.isdir(top):
        return out
    for d, dirs, files in os.walk(top):
        for f in dirs + files:
            p = os.path.join(d, f)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            out[os.path.relpath(p, top)] = (st.st_size, st.st_mtime_ns)
    return out


# names a bad argument could turn into an arena file (other processes' arenas come and go)
_BAD_NAMES = ["None", "0", "1.5", "['x']", "7", "", "a", "a/b", "b", "..", "../x", "x" * 300]


def _arenas():
    """The arena files under the names a bad argument could have made (both backings)."""
    found = set()
    for d in ("/dev/shm", "/dev/hugepages"):
        for n in _BAD_NAMES:
            p = os.path.join(d, "stagecache." + n)
            if os.path.lexists(p):
                found.add(p)
    return found


class TestBadInputHasNoSideEffects(ArenaCase):
    """Bad arguments raise, and change nothing: no file or directory created (in the current
    directory, the L3 directory or the arena directories), no arena state changed."""

    def setUp(self):
        super().setUp()
        self.cwd = os.getcwd()
        self.tmp = tempfile.mkdtemp(prefix="sc-py-bad-", dir="/var/tmp")
        self.dir = tempfile.mkdtemp(prefix="sc-py-bad-l3-", dir="/var/tmp")
        os.chdir(self.tmp)
        self.l3 = sc.L3(self.dir)
        self.stage.admit("t", [1, 2], payload(100))

    def tearDown(self):
        self.l3.close()
        os.chdir(self.cwd)
        shutil.rmtree(self.tmp)
        shutil.rmtree(self.dir)
        super().tearDown()

    def state(self):
        st = self.arena.l2_stats()
        return (_tree(self.tmp), _tree(self.dir), _arenas(), st["entries"], st["bytes"], st["inserts"])

    def assert_no_effect(self, exc, fn, *args, **kw):
        before = self.state()
        with self.assertRaises(exc):
            fn(*args, **kw)
        self.assertEqual(self.state(), before, "%s%r changed something" % (getattr(fn, "__name__", fn), args))

    def test_bad_paths_and_names(self):
        for bad in (None, 0, 1.5, ["x"], object()):
            self.assert_no_effect(TypeError, sc.L3, bad)
            self.assert_no_effect(TypeError, sc.Arena.create, bad, 1 << 20, huge="off")
            self.assert_no_effect(TypeError, sc.Arena.open, bad)
            self.assert_no_effect(TypeError, sc.Arena.destroy, bad)
            self.assert_no_effect(TypeError, sc.Arena.create, "7", 1 << 20, huge="off", dir=bad or 7)
            self.assert_no_effect(TypeError, self.arena.stage, bad, "s")
            self.assert_no_effect(TypeError, self.arena.stage, "m", bad)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "None")))
        for bad in ("", "a/b", "../x", "x" * 300):
            self.assert_no_effect(sc.Error, sc.Arena.create, bad, 1 << 20, huge="off")
            self.assert_no_effect(sc.Error, sc.Arena.open, bad)
        self.assert_no_effect(sc.Error, sc.L3, "")
        self.assert_no_effect(sc.Error, sc.L3, os.path.join(self.tmp, "missing", "deeper"))

    def test_bad_payloads_and_tokens(self):
        self.assert_no_effect(sc.Error, self.stage.admit, "t", [1], b"")
        self.assert_no_effect(sc.Error, self.stage.admit, "t", [], b"x")
        self.assert_no_effect(sc.Error, self.stage.admit, "t", [3], b"x", digest=sc.digest(b"y"))
        self.assert_no_effect(sc.Error, self.stage.admit, "t", [3], b"x" * (32 << 20))
        self.assert_no_effect(OverflowError, self.stage.admit, "t", [2 ** 40], b"x")
        self.assert_no_effect(OverflowError, self.stage.get, "t", [2 ** 40])
        self.assert_no_effect(ValueError, sc.Payload, "nonsense", b"x")
        self.assert_no_effect(sc.Error, self.l3.put, "t", [], payload(10))
        self.assert_no_effect(OverflowError, self.l3.put, "t", [2 ** 40], payload(10))
        self.assert_no_effect(sc.Error, self.l3.put, "t", [1], b"")


@unittest.skipUnless(os.path.isdir("/dev/hugepages") and os.access("/dev/hugepages", os.W_OK),
                     "no writable hugetlbfs at /dev/hugepages (run stagecache setup)")
class TestHugepages(ArenaCase):
    huge = "require"

    def setUp(self):
        try:
            super().setUp()
        except sc.Error as e:
            # a shortage (or no usable mount) is this machine's; any other error is the library's
            if e.errno not in (errno.ENOMEM, errno.ENODEV, errno.EACCES):
                raise
            self.skipTest("no 2 MiB hugepages for an arena here: %s" % e)

    def test_views_on_2m_pages(self):
        info = self.arena.info()
        self.assertEqual(info["backing"], "hugetlbfs-2M")
        self.assertEqual(self.arena.extents()[0].page_size, 2 << 20)
        data = payload(3 << 20, seed=5)
        self.stage.admit("t", [1], data)
        small = payload(100, seed=6)
        self.stage.admit("t", [2], small)
        with self.stage.get("t", [1]) as a, self.stage.get("t", [2]) as b:
            va, vb = a.view(0), b.view(0)
            self.assertEqual(bytes(va), data)
            self.assertEqual(bytes(vb), small)
            del va, vb


class TestL3AndRestore(ArenaCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="sc-py-l3-", dir="/var/tmp")
        self.l3 = sc.L3(self.dir)

    def tearDown(self):
        self.l3.close()
        shutil.rmtree(self.dir)
        super().tearDown()

    def test_put_locate_lookup_fill(self):
        toks = list(range(100, 400))
        data = payload(50000, 7)
        loc = self.l3.put("ns", toks[:200], data, model_identity="llama-test", state_identity="kv-fp16")
        self.assertEqual(loc.token_count, 200)
        self.assertEqual(loc.digest, sc.digest(data))
        self.assertEqual(loc.payload_bytes, 50000)
        found = self.l3.locate_longest("ns", toks)
        self.assertEqual(found.token_count, 200)
        self.assertIsNone(self.l3.locate_longest("other", toks))
        self.assertEqual(self.l3.lookup(loc.digest).token_count, 200)
        self.assertIsNone(self.l3.lookup(sc.digest(b"nothing")))
        self.assertEqual(self.l3.fill(found), data)
        st = self.l3.stats()
        self.assertEqual(st["objects"], 1)
        self.assertEqual(st["puts"], 1)

    def test_restore_l3_then_promoted_then_l2(self):
        toks = list(range(1, 301))
        data = payload(70000, 11)
        self.l3.put("ns", toks[:100], data)
        r = self.stage.restore(self.l3, "ns", toks)
        self.assertEqual((r.source, r.promoted, r.promote_why, r.token_count), ("l3", False, "first_hit", 100))
        self.assertTrue(r.in_arena)
        self.assertEqual(bytes(r.view(0)), data)
        r.release()
        with self.stage.restore(self.l3, "ns", toks) as r:
            self.assertEqual((r.source, r.promoted, r.promote_why), ("l3", True, "second_hit"))
        with self.stage.restore(self.l3, "ns", toks, wait=True) as r:
            self.assertEqual(r.source, "l2")
            self.assertIsNone(r.promote_why)
            v = r.view(0)
            self.assertEqual(bytes(v), data)
            with self.assertRaises(BufferError):
                r.release()
            del v
        self.assertIsNone(self.stage.restore(self.l3, "none", toks))
        self.assertEqual(self.stage.peek("ns", toks[:100])["origin"], "l3")
        ps = self.arena.promote_stats()
        self.assertEqual(ps["considered"], 2)
        self.assertEqual(ps["promoted"], 1)

    def test_costs_are_recorded_and_carried_into_l2(self):
        toks = list(range(1, 201))
        data = payload(50000, 5)
        loc = self.l3.put("ns", toks, data, cost_ns=123456789)
        self.assertEqual(loc.cost_ns, 123456789)
        self.assertEqual(self.l3.lookup(loc.digest).cost_ns, 123456789)
        self.stage.restore(self.l3, "ns", toks).release()   # first fill: not promoted
        with self.stage.restore(self.l3, "ns", toks) as r:  # second: promoted with the object's cost
            self.assertTrue(r.promoted)
        self.assertEqual(self.stage.peek("ns", toks)["cost_ns"], 123456789)
        self.stage.set_token_cost(1000)
        self.assertEqual(self.stage.token_cost, 1000)
        self.stage.admit("ns", [7] * 30, payload(4096, 2))  # no cost of its own: 30 tokens x 1000
        self.assertEqual(self.stage.peek("ns", [7] * 30)["cost_ns"], 30000)
        self.stage.admit("ns", [8] * 3, payload(4096, 3), cost_ns=2 ** 70)  # clamped, not an error
        self.assertEqual(self.stage.peek("ns", [8] * 3)["cost_ns"], sc.COST_MAX)
        with self.assertRaises(ValueError):
            self.stage.admit("ns", [9], payload(4096), cost_ns=-1)

    def test_put_many_acknowledges_each_put_with_its_bytes_and_cost(self):
        toks = list(range(1000, 1400))
        items = [("ns", toks[:50], payload(3000, 1)),
                 ("ns", toks[:120], payload(70000, 2), None, None, 555),
                 {"ns": "other", "tokens": toks[:80], "payload": payload(4096, 3), "cost_ns": 2 ** 70},
                 {"ns": "ns", "tokens": toks[:300], "payload": payload(9000, 4), "model_identity": "llama-test",
                  "state_identity": "kv-fp16", "cost_ns": 123456789}]
        locs = self.l3.put_many(items)
        self.assertEqual([loc.token_count for loc in locs], [50, 120, 80, 300])
        self.assertEqual([loc.cost_ns for loc in locs], [0, 555, sc.COST_MAX, 123456789])
        for loc, (ns, t, data, cost) in zip(locs, [("ns", toks[:50], payload(3000, 1), 0),
                                                   ("ns", toks[:120], payload(70000, 2), 555),
                                                   ("other", toks[:80], payload(4096, 3), sc.COST_MAX),
                                                   ("ns", toks[:300], payload(9000, 4), 123456789)]):
            self.assertEqual(loc.digest, sc.digest(data))
            found = self.l3.locate_longest(ns, t)
            self.assertEqual((found.token_count, found.digest, found.cost_ns), (len(t), loc.digest, cost))
            self.assertEqual(self.l3.fill(found), data)
            self.assertEqual(self.l3.lookup(loc.digest).cost_ns, cost)
        self.assertEqual(self.l3.locate_longest("ns", toks).token_count, 300)
        self.assertEqual(self.l3.stats()["objects"], 4)
        # the located object fills into a stage that matches its identity
        with self.stage.restore(self.l3, "ns", toks) as r:
            self.assertEqual((r.source, r.token_count, bytes(r.view(0))), ("l3", 300, payload(9000, 4)))

    def test_put_many_refuses_an_invalid_put_and_writes_nothing(self):
        toks = list(range(1, 101))
        kept = payload(5000, 9)
        self.l3.put("ns", toks[:10], kept)
        fresh = ("ns", toks[:20], payload(6000, 8), None, None, 7)
        for bad in [("ns", [], payload(100)),                          # no tokens
                    ("ns", toks[:30], b""),                            # no payload
                    ("ns", toks[:30], sc.Payload("full_state", b"a", b"b"))]:  # a second section
            with self.assertRaises(sc.PutManyError) as cm:
                self.l3.put_many([fresh, bad])
            e = cm.exception
            self.assertEqual((e.errno, e.index, e.call), (errno.EINVAL, 0, "sc_l3_put_many"))
            self.assertIn("EINVAL", str(e))
            self.assertEqual([r.errno for r in e.results], [errno.EINVAL, errno.EINVAL])
            self.assertEqual(self.l3.locate_longest("ns", toks[:20]).token_count, 10)
            self.assertIsNone(self.l3.lookup(sc.digest(payload(6000, 8))))
        # arguments that cannot be converted: nothing written either
        with self.assertRaises(TypeError):
            self.l3.put_many([fresh, ("ns", toks[:30], 5)])
        with self.assertRaises(ValueError):
            self.l3.put_many([fresh, {"ns": "ns", "tokens": toks[:30], "payload": b"x", "cost_ns": -1}])
        with self.assertRaises(TypeError):
            self.l3.put_many([fresh, {"ns": "ns", "tokens": toks[:30], "payload": b"x", "bytes": 1}])
        self.assertIsNone(self.l3.lookup(sc.digest(payload(6000, 8))))
        # what was stored before is intact
        self.assertEqual(self.l3.stats()["objects"], 1)
        found = self.l3.locate_longest("ns", toks)
        self.assertEqual(found.token_count, 10)
        self.assertEqual(self.l3.fill(found), kept)

    def test_put_many_reports_each_put_it_could_not_make(self):
        d = tempfile.mkdtemp(prefix="sc-py-l3b-", dir="/var/tmp")
        try:
            with sc.L3(d, budget=1 << 20) as l3:
                items = [("ns", [1], payload(1000, 1)), ("ns", [1, 2], bytes(2 << 20)), ("ns", [1, 2, 3], payload(900))]
                with self.assertRaises(sc.PutManyError) as cm:  # the second is larger than the budget
                    l3.put_many(items)
                e = cm.exception
                self.assertEqual((e.errno, e.index), (errno.E2BIG, 1))
                self.assertIn("put 1 of 3: ", str(e))
                self.assertIn("1 failed, 2 acknowledged, 0 not tried", str(e))
                ok, big, ok2 = e.results
                self.assertEqual((ok.token_count, big.errno, ok2.token_count), (1, errno.E2BIG, 3))
                self.assertEqual(l3.fill(l3.locate_longest("ns", [1])), payload(1000, 1))
                self.assertEqual(l3.fill(l3.locate_longest("ns", [1, 2, 3])), payload(900))
                self.assertEqual(l3.locate_longest("ns", [1, 2]).token_count, 1)
        finally:
            shutil.rmtree(d)

    def test_put_many_of_more_than_64_puts_goes_in_batches(self):
        self.assertEqual(sc.L3_PUT_MANY_MAX, 64)
        puts_before = self.l3.stats()["puts"]
        self.assertEqual(self.l3.put_many([]), [])
        self.assertEqual(self.l3.put_many(iter([])), [])
        self.assertEqual(self.l3.stats()["puts"], puts_before)
        items = [("ns", [7, i], payload(100 + i, i), None, None, i + 1) for i in range(150)]
        locs = self.l3.put_many(items)
        self.assertEqual(len(locs), 150)
        for i in (0, 63, 64, 127, 128, 149):
            found = self.l3.locate_longest("ns", [7, i])
            self.assertEqual((found.token_count, found.cost_ns, found.digest), (2, i + 1, locs[i].digest))
            self.assertEqual(self.l3.fill(found), payload(100 + i, i))
        self.assertEqual(self.l3.stats()["objects"], 150)
        # an invalid put in the second batch: the first batch is acknowledged, its own is refused
        # whole, the third is not tried
        items = [("ns", [8, i], payload(100 + i, i + 3)) for i in range(140)]
        items[70] = ("ns", [], payload(10))
        with self.assertRaises(sc.PutManyError) as cm:
            self.l3.put_many(items)
        e = cm.exception
        self.assertEqual((e.errno, e.index, len(e.results)), (errno.EINVAL, 64, 140))
        self.assertTrue(all(isinstance(r, sc.Location) for r in e.results[:64]))
        self.assertTrue(all(r.errno == errno.EINVAL for r in e.results[64:128]))
        self.assertEqual(e.results[128:], [None] * 12)
        self.assertIn("put 64 of 140: ", str(e))
        self.assertIn("64 failed, 64 acknowledged, 12 not tried", str(e))
        self.assertEqual(self.l3.locate_longest("ns", [8, 63]).token_count, 2)
        self.assertIsNone(self.l3.locate_longest("ns", [8, 64]))
        self.assertIsNone(self.l3.locate_longest("ns", [8, 139]))

    def test_a_restore_that_would_lose_answers_recompute(self):
        toks = list(range(1, 101))
        self.l3.put("ns", toks, payload(1 << 20, 9))
        with self.assertRaises(sc.Recompute) as cm:  # the deadline has passed: no fill
            self.stage.restore(self.l3, "ns", toks, deadline_ns=sc.clock_ns() - 1)
        self.assertEqual((cm.exception.reason, cm.exception.detail), ("deadline", "past"))
        self.assertEqual(self.l3.stats()["fill_starts"], 0)
        m = self.stage.miss_stats()
        self.assertEqual(m["restore"]["deadline"], 1)
        self.assertEqual(m["deadline"]["past"], 1)
        self.assertIsNone(self.stage.restore(self.l3, "other", toks))
        self.assertEqual(self.arena.miss_stats()["restore"]["never_stored"], 1)
        with self.stage.restore(self.l3, "ns", toks, deadline_ns=sc.clock_ns() + 60 * 10 ** 9) as r:
            self.assertEqual(r.source, "l3")
        self.assertIsNotNone(self.l3.fill_estimate(1 << 20))

    def test_promote_admit_in_one_call(self):
        data = payload(3000)
        d = sc.digest(data)
        self.assertEqual(self.arena.promote_consider(self.stage.id, d, 10, len(data)), (False, "first_hit"))
        self.assertEqual(self.arena.promote_consider(self.stage.id, d, 10, len(data)), (True, "second_hit"))
        self.stage.promote_admit("ns", list(range(10)), data)
        self.assertEqual(self.stage.peek("ns", list(range(10)))["origin"], "l3")
        self.assertEqual(self.arena.promote_stats()["published"], 1)
        # still in L2: not promoted again (the seed's rule); once it left L2 it comes back at once
        self.assertEqual(self.arena.promote_consider(self.stage.id, d, 10, len(data)), (False, "terminal"))
        self.assertTrue(self.stage.remove(self.stage.key("ns", list(range(10)))))
        self.assertEqual(self.arena.promote_consider(self.stage.id, d, 10, len(data)), (True, "returning"))


class TestRingsAndBatcher(ArenaCase):
    def test_batcher_cadence_and_terminal(self):
        with self.arena.ring() as ring:
            with sc.Batcher(ring, 7, 9) as b:
                self.assertTrue(b.commit(11, 0))                 # first token: at once
                for i, t in enumerate((12, 13, 14)):
                    self.assertTrue(b.commit(t, (i + 1) * 10_000_000))
                self.assertTrue(b.commit(15, 100_000_000))       # the 100 ms window
                self.assertEqual(b.count, 5)
        got = self.arena.poll()
        self.assertEqual([(c.generated_token_count, list(c.tokens), c.flags) for c in got],
                         [(1, [11], 0), (5, [12, 13, 14, 15], 0), (5, [], sc.COMMIT_FINISHED)])
        self.assertEqual([c.seq for c in got], [1, 2, 3])
        self.assertEqual({(c.request_id, c.session_id) for c in got}, {(7, 9)})

    def test_interval_zero_and_an_aborted_generation(self):
        with self.arena.ring() as ring:
            with self.assertRaises(RuntimeError):
                with sc.Batcher(ring, 1, 2, interval_ns=0) as b:
                    for t in range(4):
                        self.assertTrue(b.commit(t, 0))
                    self.assertEqual(b.commits, 4)  # every token its own commit
                    raise RuntimeError("decode failed")
        got = self.arena.poll()
        self.assertEqual(got[-1].flags, sc.COMMIT_ABORTED)
        self.assertEqual([t for c in got for t in c.tokens], [0, 1, 2, 3])

    def test_a_full_ring_refuses_a_token_only_when_the_batcher_is_full(self):
        name = uniq("tiny")
        a = sc.Arena.create(name, 16 << 20, huge="off", rings=1, ring_bytes=4096)
        try:
            ring = a.ring()
            while ring.submit(1, 1, 1, [1]):
                pass
            b = sc.Batcher(ring, 5, 6, capacity=4)
            taken = [b.commit(t, t) for t in range(4)]
            self.assertEqual(taken, [True] * 4)             # taken, deferred behind the full ring
            self.assertFalse(b.commit(4, 10))                # refused: send it again
            self.assertEqual(b.count, 4)
            self.assertGreater(b.ring_full, 0)
            self.assertFalse(b.flush())
            a.poll(1000)
            self.assertTrue(b.commit(4, 11))
            self.assertTrue(b.finish())
            toks = [t for c in a.poll(1000) for t in c.tokens]
            self.assertEqual(toks, [0, 1, 2, 3, 4])
            ring.close()
        finally:
            a.close()
            sc.Arena.destroy(name)

    def test_no_ring_keeps_nothing(self):
        b = sc.Batcher(None, 7, 9)
        self.assertTrue(b.commit(1, 0))
        self.assertTrue(b.commit(2, 500_000_000))
        self.assertTrue(b.flush())
        self.assertEqual(b.count, 0)

    def test_one_consumer_at_a_time(self):
        with self.arena.ring() as ring:
            self.assertTrue(ring.submit(3, 4, 1, [42]))
        self.assertEqual(len(self.arena.poll()), 1)
        other = sc.Arena.open(self.name)
        try:
            with self.assertRaises(sc.Error) as cm:
                other.poll()
            self.assertEqual(cm.exception.errno, errno.EBUSY)
            self.arena.consumer_close()
            self.assertEqual(other.poll(), [])
        finally:
            other.close()
        stats = self.arena.ring_stats()
        self.assertEqual(sum(r["records"] for r in stats), 1)
        self.assertEqual(sum(r["delivered"] for r in stats), 1)
        with self.assertRaises(sc.Error):
            sc.Batcher(None, 1, 2, capacity=sc.BATCHER_CAPACITY_MAX + 1)


CHILD = r"""
import sys, stagecache as sc
name, mode = sys.argv[1], sys.argv[2]
a = sc.Arena.open(name)
st = a.stage("llama-test", "kv-fp16")
if mode == "reader":
    with st.get("shared", [1, 2, 3]) as lease:
        v = lease.view(0)
        assert bytes(v) == bytes((i * 31 + 4) & 0xff for i in range(200000)), "bytes differ"
        assert lease.digest == sc.digest(v), "digest differs"
        del v
    st.admit("from-child", [4, 5, 6], b"child wrote this" * 100)
    print("ok", st.id)
elif mode == "producer":
    with a.ring() as ring, sc.Batcher(ring, 77, 1) as b:
        for t in range(1000):
            while not b.commit(t, t * 1_000_000):
                pass
    print("ok")
elif mode == "holder":
    lease = st.get("shared", [1, 2, 3])
    view = lease.view(0)
    print("holding", flush=True)
    sys.stdin.read()
st.close()
a.close()
"""


class TestTwoProcesses(ArenaCase):
    def child(self, mode, **kw):
        env = dict(os.environ, PYTHONPATH=PKG_DIR, PYTHONDONTWRITEBYTECODE="1")
        return subprocess.Popen([sys.executable, "-c", CHILD, self.name, mode], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **kw)

    def test_a_second_python_process_shares_the_arena(self):
        data = payload(200000, seed=4)
        self.stage.admit("shared", [1, 2, 3], data)
        p = self.child("reader")
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out.split()[0], "ok")
        self.assertEqual(int(out.split()[1]), self.stage.id)  # same identities, same stage id
        self.assertEqual(self.stage.get_copy("from-child", [4, 5, 6]), b"child wrote this" * 100)
        st = self.arena.l2_stats(self.stage)
        self.assertEqual(st["entries"], 2)
        self.assertEqual(st["hits"], 2)  # the child's hit was flushed when it closed its stage

    def test_commits_from_another_process_arrive_in_order(self):
        p = self.child("producer")
        got, deadline = [], time.time() + 60
        while time.time() < deadline:
            got += self.arena.poll(256)
            if got and got[-1].flags:
                break
            time.sleep(0.001)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual([t for c in got for t in c.tokens], list(range(1000)))
        self.assertEqual(got[-1].flags, sc.COMMIT_FINISHED)
        self.assertEqual(got[-1].generated_token_count, 1000)
        self.assertEqual([c.seq for c in got], list(range(1, len(got) + 1)))

    def test_a_killed_holder_does_not_pin_memory_forever(self):
        data = payload(200000, seed=4)
        self.stage.admit("shared", [1, 2, 3], data)
        p = self.child("holder", stdin=subprocess.PIPE)
        self.assertEqual(p.stdout.readline().strip(), "holding")
        self.assertEqual(self.arena.l2_stats()["leases"], 1)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        p.stdout.close(), p.stderr.close(), p.stdin.close()
        # the dead process's lease is reclaimed by later operations (bounded, rate-limited)
        deadline = time.time() + 20
        while self.arena.l2_stats()["leases"] and time.time() < deadline:
            self.arena.clear()
            self.stage.admit("churn", [int(time.time() * 1000) & 0xffff], payload(4096))
            time.sleep(0.05)
        self.assertEqual(self.arena.l2_stats()["leases"], 0)

    def test_a_handle_is_not_used_after_fork(self):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self.arena.l2_stats()
            except RuntimeError:
                code = 0
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)


class TestThreads(ArenaCase):
    def test_calls_release_the_gil(self):
        # sc_fill_wait blocks (polling) for 300 ms while a fill claim is held: while one thread is
        # inside it, another thread keeps running Python, which it could not if the GIL were held
        for name, args in (("sc_fill_claim", (ctypes.c_void_p, ctypes.c_uint64, _ffi.Digest_)),
                           ("sc_fill_release", (ctypes.c_void_p, ctypes.c_uint64, _ffi.Digest_)),
                           ("sc_fill_wait", (ctypes.c_void_p, ctypes.c_uint64, _ffi.Digest_, ctypes.c_int64))):
            f = getattr(sc.lib, name)
            f.restype, f.argtypes = ctypes.c_int, list(args)
        d = sc.digest(b"gil")._c()
        self.assertEqual(sc.lib.sc_fill_claim(self.arena._handle(), 1, d), 0)
        other = sc.Arena.open(self.name)
        result = []
        t = threading.Thread(target=lambda: result.append(sc.lib.sc_fill_wait(other._handle(), 1, d, 300_000_000)))
        t0 = time.monotonic()
        t.start()
        spins = 0
        while t.is_alive():
            spins += 1
        elapsed = time.monotonic() - t0
        t.join()
        sc.lib.sc_fill_release(self.arena._handle(), 1, d)
        other.close()
        self.assertEqual(result, [-errno.ETIMEDOUT])
        self.assertGreaterEqual(elapsed, 0.29)
        self.assertGreater(spins, 10000, "the main thread did not run while the other was in the library")


if __name__ == "__main__":
    unittest.main()
