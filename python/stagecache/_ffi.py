"""The C side: loading libstagecache, the structures of stagecache.h, the prototypes, and the
layout check that refuses to run against a library whose structures differ from these.

Only ctypes from the standard library. Every foreign call goes through ctypes.CDLL, which
releases the GIL for the duration of the call, so long calls (fills, restores) let other
Python threads run.
"""
import ctypes
import ctypes.util
import os

from ctypes import (POINTER, Structure, c_char, c_char_p, c_int, c_int32, c_int64, c_size_t,
                    c_uint, c_uint8, c_uint32, c_uint64, c_void_p)


class LayoutError(ImportError):
    """The library's structures differ from the ones this package was written for."""


def _candidates():
    env = os.environ.get("STAGECACHE_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    try:  # written by `make install`: the library installed with this package
        from ._installed import LIBDIR
        yield os.path.join(LIBDIR, "libstagecache.so.0")
    except ImportError:
        # the build tree: python/stagecache/ -> build/
        yield os.path.join(here, "..", "..", "build", "libstagecache.so.0")
    found = ctypes.util.find_library("stagecache")
    if found:
        yield found
    yield "libstagecache.so.0"


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: not found" % path)
            continue
        try:
            return ctypes.CDLL(path, use_errno=True), path
        except OSError as e:
            errors.append(str(e))
    raise ImportError("cannot load libstagecache (set STAGECACHE_LIB to its path): " + "; ".join(errors))


lib, lib_path = _load()

# ---- structures: public fields by name, reserved and private blocks as opaque bytes ----

SC_NAME_MAX = 64
SC_ARENA_OPEN_ANY_OWNER = 0x1  # sc_arena_open_opts.flags: any owner (never a world-writable file)
SC_INFO_MAX_ATTACHED = 64
SC_KV_DESC_MAX_COMPONENTS = 2
SC_L3_STR_MAX = 1023
SC_L3_HOST_ID_MAX = 64
SC_L2_REFUSE_COUNT = 8
SC_MISS_MAX = 16


class Digest_(Structure):
    _fields_ = [("lo", c_uint64), ("hi", c_uint64)]


class Key_(Structure):
    _fields_ = [("lo", c_uint64), ("hi", c_uint64)]


class ArenaOpenOpts(Structure):
    _fields_ = [("dir", c_char_p), ("flags", c_uint32), ("owner_uid", c_uint32), ("_reserved", c_uint64 * 4)]


class ArenaFile(Structure):
    _fields_ = [("path", c_char * 4096), ("mode", c_uint32), ("uid", c_uint32), ("gid", c_uint32),
                ("size", c_uint64), ("_reserved", c_uint64 * 4)]


class ArenaOpts(Structure):
    _fields_ = [("size_bytes", c_uint64), ("huge", c_int), ("dir", c_char_p), ("mode", c_uint32),
                ("gid", c_int64), ("index_entries", c_uint32), ("ring_count", c_uint32),
                ("ring_bytes", c_uint32), ("obs_entries", c_uint32), ("reader_slots", c_uint32),
                ("flags", c_uint32), ("l3_index_entries", c_uint32), ("l3_index_refresh_ms", c_uint32),
                ("segment_bytes", c_uint32), ("slots_per_user", c_uint32), ("_reserved", c_uint64 * 4)]


class ArenaAttached(Structure):
    _fields_ = [("pid", c_uint32), ("uid", c_uint32), ("slot", c_uint32), ("other_pidns", c_int),
                ("attached_unix", c_uint64)]


class Holder(Structure):
    _fields_ = [("slot", c_uint32), ("token", c_uint32), ("alive", c_int), ("other_pidns", c_int),
                ("pid", c_uint32), ("uid", c_uint32), ("leases", c_uint32), ("leased_bytes", c_uint64),
                ("reserved_bytes", c_uint64)]


class ArenaInfo(Structure):
    _fields_ = [("name", c_char * (SC_NAME_MAX + 1)), ("path", c_char * 4096), ("size_bytes", c_uint64),
                ("page_size", c_uint64), ("backing", c_int), ("layout_version", c_uint32),
                ("created_unix", c_uint64), ("creator_pid", c_uint32), ("mode", c_uint32),
                ("reader_slots", c_uint32), ("attached_count", c_uint32),
                ("attached", ArenaAttached * SC_INFO_MAX_ATTACHED), ("index_entries", c_uint32),
                ("ring_count", c_uint32), ("ring_bytes", c_uint32), ("obs_entries", c_uint32),
                ("heap_bytes", c_uint64), ("l3_index_entries", c_uint32), ("l3_index_refresh_ms", c_uint32),
                ("flags", c_uint32), ("slots_per_user", c_uint32), ("locked_slots", c_uint32),
                ("_reserved0", c_uint32), ("_reserved", c_uint64 * 5)]


class ArenaExtent(Structure):
    _fields_ = [("base", c_void_p), ("bytes", c_uint64), ("page_size", c_uint64), ("file_offset", c_uint64),
                ("kind", c_uint32), ("flags", c_uint32), ("_reserved", c_uint64 * 4)]


class KvComponent(Structure):
    _fields_ = [("version", c_uint32), ("role", c_uint32), ("token_start", c_uint64), ("token_count", c_uint64),
                ("k_type", c_uint32), ("v_type", c_uint32), ("k_row_bytes", c_uint64), ("v_row_bytes", c_uint64),
                ("payload_offset", c_uint64), ("payload_bytes", c_uint64), ("flags", c_uint32),
                ("_reserved", c_uint32)]


class KvDesc(Structure):
    """struct sc_kv_desc: set the fields by name (KvDesc(version=1, layer_end=2, ...))."""
    _fields_ = [("version", c_uint32), ("layer_start", c_uint32), ("layer_end", c_uint32),
                ("layer_count", c_uint32), ("token_start", c_uint64), ("token_count", c_uint64),
                ("k_type", c_uint32), ("v_type", c_uint32), ("k_row_bytes", c_uint64), ("v_row_bytes", c_uint64),
                ("v_element_bytes", c_uint64), ("k_idx_row_bytes", c_uint64), ("payload_bytes", c_uint64),
                ("flags", c_uint32), ("codec", c_uint32), ("component_count", c_uint32), ("_reserved", c_uint32),
                ("components", KvComponent * SC_KV_DESC_MAX_COMPONENTS)]

    def as_dict(self):
        d = {n: getattr(self, n) for n, _ in self._fields_ if not n.startswith("_") and n != "components"}
        d["components"] = [{n: getattr(c, n) for n, _ in c._fields_ if not n.startswith("_")}
                           for c in self.components[:min(self.component_count, SC_KV_DESC_MAX_COMPONENTS)]]
        return d


class Payload_(Structure):
    _fields_ = [("kind", c_uint32), ("sec", c_void_p * 2), ("sec_len", c_uint64 * 2), ("kv_desc", POINTER(KvDesc))]


class Location_(Structure):
    """struct sc_location: where a durable copy is (L3), and what an L2 lookup is checked against."""
    _fields_ = [("token_count", c_uint32), ("kind", c_uint32), ("digest", Digest_), ("prefix", Digest_),
                ("sec_len", c_uint64 * 2), ("payload_bytes", c_uint64), ("file_bytes", c_uint64),
                ("has_kv_desc", c_int), ("_reserved0", c_uint32), ("kv_desc", KvDesc), ("cost_ns", c_uint64),
                ("_reserved", c_uint64 * 5)]


class Lease_(Structure):
    _fields_ = [("sec", c_void_p * 2), ("sec_len", c_uint64 * 2), ("kind", c_uint32), ("origin", c_uint32),
                ("token_count", c_uint32), ("_reserved0_", c_uint32), ("digest", Digest_), ("key", Key_),
                ("has_kv_desc", c_int),
                ("_reserved0", c_uint32), ("kv_desc", KvDesc), ("segments", c_uint32), ("_reserved1", c_uint32),
                ("_reserved", c_uint64 * 7), ("_private", c_uint64 * 6)]


class Segment(Structure):
    _fields_ = [("ptr", c_void_p), ("len", c_uint64), ("section", c_uint32), ("_reserved", c_uint32)]


class L2EntryInfo(Structure):
    _fields_ = [("key", Key_), ("stage_id", c_uint64), ("token_count", c_uint32), ("_reserved0_", c_uint32),
                ("bytes", c_uint64),
                ("footprint", c_uint64), ("sec_len", c_uint64 * 2), ("digest", Digest_), ("kind", c_uint32),
                ("origin", c_uint32), ("created_unix_ns", c_uint64), ("frequency", c_uint32),
                ("has_kv_desc", c_int), ("cost_ns", c_uint64), ("_reserved", c_uint64 * 5)]


class L2Stats(Structure):
    _fields_ = [(n, c_uint64) for n in (
        "entries", "bytes", "logical_bytes", "budget_bytes", "hits", "misses", "inserts", "evictions",
        "admission_rejects", "refused_bytes", "leases", "pending_reclaim_bytes", "free_bytes",
        "largest_free_block")] + [("refused", c_uint64 * SC_L2_REFUSE_COUNT)] + [(n, c_uint64) for n in (
        "small_entries", "small_bytes", "main_entries", "main_bytes", "moved_to_main", "ghost_hits",
        "physical_bytes", "saved_bytes", "segments", "segment_holder_bytes", "segment_dedup_bytes",
        "refused_low_benefit", "credit_kept")] + [
        ("_reserved", c_uint64 * 1)]


class L2Resv(Structure):
    _fields_ = [("ptr", c_void_p), ("bytes", c_uint64), ("_private", c_uint64 * 3)]


class L3Opts(Structure):
    _fields_ = [("budget_bytes", c_uint64), ("min_free_bytes", c_uint64), ("queue_depth", c_uint32),
                ("o_direct", c_int), ("file_mode", c_uint32), ("flags", c_uint32), ("host_id", c_char_p),
                ("state_dir", c_char_p), ("visibility_ms", c_uint32), ("fd_cache", c_uint32), ("gid", c_int64),
                ("_reserved", c_uint64 * 2)]


class L3PutArgs(Structure):
    _fields_ = [("model_identity", c_char_p), ("state_identity", c_char_p), ("ns", c_char_p),
                ("tokens", POINTER(c_int32)), ("token_count", c_uint32), ("payload", POINTER(Payload_))]


L3Location_ = Location_  # the deprecated name of the one location type (struct sc_location)


class L3FillReq(Structure):
    _fields_ = [("loc", POINTER(L3Location_)), ("dst", c_void_p), ("dst_bytes", c_uint64), ("flags", c_uint32),
                ("user_data", c_uint64), ("stage_id", c_uint64), ("result", c_int), ("direct", c_int),
                ("fill_ns", c_uint64), ("identity", Digest_), ("cost_ns", c_uint64), ("_reserved", c_uint64 * 1),
                ("_private", c_void_p)]


class L3Stats(Structure):
    _fields_ = [(n, c_uint64) for n in (
        "objects", "bytes", "fills", "fill_bytes", "fill_ns", "verify_failures", "quarantined", "evictions",
        "write_refusals", "puts", "put_dedup", "key_collisions", "budget_bytes")] + [
        ("dio_mem_align", c_uint32), ("dio_offset_align", c_uint32), ("fills_kept", c_uint64)] + [(n, c_uint64) for n in (
        "logical_bytes", "physical_bytes", "saved_bytes", "segments", "segment_bytes", "fill_bytes_from_l2",
        "identity_mismatches", "fill_starts")] + [
        ("_reserved", c_uint64 * 3)]


class L3JanitorStatus(Structure):
    _fields_ = [("shared", c_int), ("_reserved0", c_uint32), ("host_id", c_char * (SC_L3_HOST_ID_MAX + 1)),
                ("janitor_host", c_char * (SC_L3_HOST_ID_MAX + 1)), ("_reserved1", c_uint8 * 6)] + [
        (n, c_uint64) for n in ("epoch", "pass_start_ns", "pass_end_ns", "objects", "bytes", "evictions",
                                "passes")] + [("_reserved", c_uint64 * 4)]


class L3JanitorReport(Structure):
    _fields_ = [(n, c_uint64) for n in (
        "epoch", "objects", "bytes", "evicted", "evicted_bytes", "stale_temps", "accesses", "quarantined",
        "dropped", "skipped_recent", "pass_ns")] + [("_reserved", c_uint64 * 4)]


class L3ObjectInfo(Structure):
    _fields_ = [("digest", Digest_), ("kind", c_uint32), ("token_count", c_uint32), ("payload_bytes", c_uint64),
                ("file_bytes", c_uint64), ("mtime_ns", c_int64), ("segments", c_uint32),
                ("segments_missing", c_uint32), ("_reserved", c_uint64 * 3),
                ("ns", c_char * (SC_L3_STR_MAX + 1)), ("model_identity", c_char * (SC_L3_STR_MAX + 1)),
                ("state_identity", c_char * (SC_L3_STR_MAX + 1)), ("valid", c_int)]


class PromoteStats(Structure):
    _fields_ = [("observations", c_uint32), ("claims", c_uint32), ("capacity", c_uint32)] + [
        (n, c_uint64) for n in ("considered", "promoted", "evicted", "expired", "repairs", "published")] + [
        ("refused", c_uint64 * SC_L2_REFUSE_COUNT), ("refused_low_benefit", c_uint64), ("_reserved", c_uint64 * 7)]


class Restore_(Structure):
    _fields_ = [("sec", c_void_p * 2), ("sec_len", c_uint64 * 2), ("kind", c_uint32), ("token_count", c_uint32),
                ("digest", Digest_), ("has_kv_desc", c_int), ("_reserved0", c_uint32), ("kv_desc", KvDesc),
                ("source", c_int), ("promoted", c_int), ("promote_why", c_int), ("waited", c_int),
                ("direct", c_int), ("in_arena", c_int), ("from_index", c_int), ("locate_ns", c_uint64),
                ("lookup_ns", c_uint64),
                ("fill_ns", c_uint64), ("total_ns", c_uint64), ("predicted_ns", c_uint64), ("miss_reason", c_int32),
                ("miss_detail", c_uint32), ("_reserved", c_uint64 * 6),
                ("_private", c_uint8 * 0)]  # sized at load time: see _fit_private


class RestoreOpts(Structure):
    _fields_ = [("flags", c_uint32), ("_reserved0", c_uint32), ("deadline_ns", c_uint64), ("recompute_ns", c_uint64),
                ("_reserved", c_uint64 * 5)]


class MissStats(Structure):
    _fields_ = [("l2", c_uint64 * SC_MISS_MAX), ("restore", c_uint64 * SC_MISS_MAX),
                ("l2_refused", c_uint64 * SC_MISS_MAX), ("deadline", c_uint64 * 8), ("_reserved", c_uint64 * 8)]


class L3IndexStats(Structure):
    _fields_ = [(n, c_uint32) for n in ("capacity", "refresh_ms", "positive", "negative", "pages", "free_pages")] + [
        ("token_verify", c_int), ("bound", c_int)] + [(n, c_uint64) for n in (
            "hits", "negative_hits", "misses", "fallbacks", "stale", "refreshes", "inserts", "evictions", "drops",
            "full", "vanished", "foreign", "key_collisions", "key_collisions_l2", "key_collisions_index",
            "key_collisions_l3")] + [("_reserved", c_uint64 * 8)]


class Commit_(Structure):
    _fields_ = [("request_id", c_uint64), ("session_id", c_uint64), ("generated_token_count", c_uint64),
                ("flags", c_uint32), ("token_count", c_uint32), ("tokens", POINTER(c_int32)), ("ring", c_uint32),
                ("gen", c_uint32), ("seq", c_uint64)]


class RingStat(Structure):
    _fields_ = [("ring", c_uint32), ("state", c_uint32), ("producer_pid", c_uint32), ("gen", c_uint32),
                ("producer_alive", c_int), ("corrupt", c_int)] + [
        (n, c_uint64) for n in ("depth_bytes", "depth_records", "records", "delivered", "ring_full",
                                "ring_bytes")] + [("_reserved", c_uint64 * 6)]


class BatcherOpts(Structure):
    _fields_ = [("interval_ns", c_uint64), ("capacity", c_uint32), ("flags", c_uint32), ("_reserved", c_uint64 * 2)]


class FsckReport(Structure):
    _fields_ = [(n, c_uint64) for n in (
        "problems", "repaired", "dropped", "entries", "entry_bytes", "pending_bytes", "reserved_bytes",
        "orphan_bytes", "heap_used_bytes", "heap_free_bytes", "heap_blocks", "leaked_bytes", "digests_checked",
        "digest_failures", "readers_live", "readers_dead", "rings", "ring_problems", "observations",
        "obs_problems", "lock_repairs")] + [("_reserved", c_uint64 * 8)]


class Lookup_(Structure):
    _fields_ = [("tokens", c_uint32), ("l2_tokens", c_uint32), ("l3_tokens", c_uint32), ("_reserved0", c_uint32),
                ("l2_digest", Digest_), ("l3_digest", Digest_), ("l2_bytes", c_uint64), ("l3_bytes", c_uint64),
                ("_reserved", c_uint64 * 4)]


class L3PrefixInfo(Structure):
    _fields_ = [("prefix", Digest_), ("digest", Digest_), ("token_count", c_uint32), ("object_present", c_int),
                ("created_ns", c_int64), ("_reserved", c_uint64 * 4), ("ns", c_char * (SC_L3_STR_MAX + 1))]


class Event_(Structure):
    _fields_ = [("type", c_uint32), ("token_count", c_uint32), ("stage_id", c_uint64), ("key", Key_),
                ("digest", Digest_), ("lost_why", c_uint32), ("_reserved0", c_uint32), ("_reserved", c_uint64)]


class EventsStats(Structure):
    _fields_ = [("records", c_uint32), ("listener", c_uint32), ("listener_pid", c_uint32),
                ("listener_alive", c_int)] + [(n, c_uint64) for n in (
                    "listener_since_ns", "appended", "consumed", "pending", "dropped", "lost", "resets",
                    "seq")] + [("_reserved", c_uint64 * 4)]


# C name -> the mirror. struct sc_batcher is opaque: it is allocated as sc_sizeof("sc_batcher")
# bytes, so it has no mirror.
STRUCTS = {
    "sc_arena_opts": ArenaOpts, "sc_arena_attached": ArenaAttached, "sc_arena_info": ArenaInfo, "sc_holder": Holder,
    "sc_arena_extent": ArenaExtent, "sc_digest": Digest_, "sc_key": Key_, "sc_kv_component": KvComponent,
    "sc_kv_desc": KvDesc, "sc_payload": Payload_, "sc_location": Location_, "sc_lease": Lease_, "sc_segment": Segment,
    "sc_l2_entry_info": L2EntryInfo, "sc_l2_stats": L2Stats, "sc_l2_resv": L2Resv, "sc_l3_opts": L3Opts,
    "sc_l3_put_args": L3PutArgs, "sc_l3_fill_req": L3FillReq, "sc_l3_index_stats": L3IndexStats,
    "sc_l3_stats": L3Stats, "sc_l3_janitor_status": L3JanitorStatus, "sc_l3_janitor_report": L3JanitorReport,
    "sc_l3_object_info": L3ObjectInfo, "sc_promote_stats": PromoteStats,
    "sc_restore": Restore_, "sc_commit": Commit_, "sc_ring_stat": RingStat, "sc_batcher_opts": BatcherOpts,
    "sc_fsck_report": FsckReport, "sc_arena_open_opts": ArenaOpenOpts, "sc_arena_file": ArenaFile,
    "sc_restore_opts": RestoreOpts, "sc_miss_stats": MissStats,
    "sc_lookup": Lookup_, "sc_l3_prefix_info": L3PrefixInfo, "sc_event": Event_, "sc_events_stats": EventsStats,
}

# ---- prototypes ----

_u64p = POINTER(c_uint64)
RING_FN = ctypes.CFUNCTYPE(c_int, POINTER(Commit_), c_void_p)


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_proto("sc_sizeof", c_size_t, c_char_p)
_proto("sc_alignof", c_size_t, c_char_p)
_proto("sc_offsetof", c_int64, c_char_p, c_char_p)
_proto("sc_type_field", c_int, c_char_p, c_uint, POINTER(c_char_p), POINTER(c_size_t), POINTER(c_size_t))
_proto("sc_type_name", c_char_p, c_uint)


def _fit_private():
    """struct sc_restore's private block holds a lease and a reservation: size it from the library
    (the checks below still compare every public field and the total size)."""
    global Restore_
    total = lib.sc_sizeof(b"sc_restore")
    public_end = Restore_._reserved.offset + Restore_._reserved.size
    if total <= public_end:
        raise LayoutError("sc_restore: the library's structure (%d bytes) is smaller than this package's "
                          "public fields (%d bytes)" % (total, public_end))

    class Restore(Structure):
        _fields_ = Restore_._fields_[:-1] + [("_private", c_uint8 * (total - public_end))]
    Restore.__name__ = "Restore_"
    Restore_ = Restore
    STRUCTS["sc_restore"] = Restore


_fit_private()

_proto("sc_strerror", c_char_p, c_int)
for _n in ("sc_huge_name", "sc_backing_name", "sc_payload_kind_name", "sc_origin_name", "sc_l3_odirect_name",
           "sc_promote_why_name", "sc_restore_source_name", "sc_ring_state_name", "sc_extent_kind_name",
           "sc_l2_refusal_name", "sc_miss_reason_name", "sc_deadline_detail_name"):
    _proto(_n, c_char_p, c_int)

_arena_pp = POINTER(c_void_p)
_proto("sc_arena_create", c_int, c_char_p, POINTER(ArenaOpts), _arena_pp)
_proto("sc_arena_open", c_int, c_char_p, _arena_pp)
_proto("sc_arena_open_dir", c_int, c_char_p, c_char_p, _arena_pp)
_proto("sc_arena_open_with", c_int, c_char_p, POINTER(ArenaOpenOpts), _arena_pp)
_proto("sc_arena_inspect", c_int, c_char_p, POINTER(ArenaOpenOpts), POINTER(ArenaInfo))
_proto("sc_arena_close", None, c_void_p)
_proto("sc_arena_destroy", c_int, c_char_p, c_char_p)
_proto("sc_arena_info", c_int, c_void_p, POINTER(ArenaInfo))
_proto("sc_arena_fd", c_int, c_void_p)
_proto("sc_arena_extents", c_int, c_void_p, POINTER(ArenaExtent), c_uint)
_proto("sc_arena_holders", c_int, c_void_p, POINTER(Holder), c_uint)
_proto("sc_arena_token", c_uint32, c_void_p)
_proto("sc_arena_layout_version", c_uint32)

_proto("sc_digest_of", Digest_, c_void_p, c_size_t)
_proto("sc_digest_sections", Digest_, c_void_p, c_size_t, c_void_p, c_size_t)
_proto("sc_digest_parse", c_int, c_char_p, POINTER(Digest_))

_proto("sc_stage_open", c_int, c_void_p, c_char_p, c_char_p, _arena_pp)
_proto("sc_stage_close", None, c_void_p)
_proto("sc_stage_id", c_uint64, c_void_p)
_proto("sc_l2_key", c_int, c_void_p, c_char_p, POINTER(c_int32), c_uint32, POINTER(Key_))
_proto("sc_kv_desc_validate", c_int, POINTER(KvDesc), c_uint64)
_proto("sc_l2_admit", c_int, c_void_p, c_char_p, POINTER(c_int32), c_uint32, Digest_, POINTER(Payload_), c_uint32)
_proto("sc_promote_admit", c_int, c_void_p, c_char_p, POINTER(c_int32), c_uint32, Digest_, POINTER(Payload_))
_proto("sc_l2_admit_cost", c_int, c_void_p, c_char_p, POINTER(c_int32), c_uint32, Digest_, POINTER(Payload_), c_uint32,
       c_uint64)
_proto("sc_promote_admit_cost", c_int, c_void_p, c_char_p, POINTER(c_int32), c_uint32, Digest_, POINTER(Payload_),
       c_uint64)
_proto("sc_stage_set_token_cost", c_int, c_void_p, c_uint64)
_proto("sc_stage_token_cost", c_int, c_void_p, _u64p)
_proto("sc_miss_stats", c_int, c_void_p, c_uint64, POINTER(MissStats))
_proto("sc_l2_get", c_int, c_void_p, c_char_p, POINTER(c_int32), c_uint32, POINTER(Location_), POINTER(Lease_))
_proto("sc_lease_release", None, POINTER(Lease_))
_proto("sc_lease_segments", c_int, POINTER(Lease_), POINTER(Segment), c_uint32)
_proto("sc_lease_copy", c_int64, POINTER(Lease_), c_void_p, c_uint64)
_proto("sc_l2_get_copy", c_int64, c_void_p, c_char_p, POINTER(c_int32), c_uint32, POINTER(Location_), c_void_p,
       c_uint64, POINTER(L2EntryInfo))
_proto("sc_l2_peek", c_int, c_void_p, c_char_p, POINTER(c_int32), c_uint32, POINTER(L2EntryInfo))
_proto("sc_l2_longest_prefix", c_int, c_void_p, c_char_p, POINTER(c_int32), c_uint32, c_uint32,
       POINTER(c_uint32), POINTER(Lease_))
_proto("sc_l2_remove", c_int, c_void_p, Key_)
_proto("sc_l2_invalidate_digest", c_int, c_void_p, Digest_)
_proto("sc_l2_shrink_to", c_int, c_void_p, c_uint64)
_proto("sc_l2_clear", c_int, c_void_p)
_proto("sc_l2_stats", c_int, c_void_p, c_void_p, POINTER(L2Stats))
_proto("sc_l2_stage_ids", c_int, c_void_p, _u64p, c_uint)
_proto("sc_l2_stats_id", c_int, c_void_p, c_uint64, POINTER(L2Stats))

_proto("sc_l3_open", c_int, c_char_p, POINTER(L3Opts), _arena_pp)
_proto("sc_l3_close", None, c_void_p)
_proto("sc_l3_put", c_int, c_void_p, POINTER(L3PutArgs), POINTER(L3Location_))
_proto("sc_l3_put_cost", c_int, c_void_p, POINTER(L3PutArgs), c_uint64, POINTER(L3Location_))
_proto("sc_l3_put_many", c_int, c_void_p, POINTER(L3PutArgs), _u64p, c_uint, POINTER(L3Location_), POINTER(c_int))
_proto("sc_l3_fill_estimate", c_int, c_void_p, c_uint64, _u64p)
_proto("sc_l3_locate_longest", c_int, c_void_p, c_char_p, POINTER(c_int32), c_uint32, POINTER(L3Location_))
_proto("sc_l3_lookup", c_int, c_void_p, Digest_, POINTER(L3Location_))
_proto("sc_l3_fill", c_int, c_void_p, POINTER(L3Location_), c_void_p, c_uint64, c_uint32)
_proto("sc_l3_bind_arena", c_int, c_void_p, c_void_p)
_proto("sc_lookup", c_int, c_void_p, c_void_p, c_char_p, POINTER(c_int32), c_uint32, c_uint32, POINTER(Lookup_))
_proto("sc_block_hashes", c_int64, POINTER(c_int32), c_uint32, c_uint32, c_uint64, _u64p, c_uint32)
_proto("sc_events_stats", c_int, c_void_p, POINTER(EventsStats))
_proto("sc_l3_stats", c_int, c_void_p, POINTER(L3Stats))
_proto("sc_l3_janitor_status", c_int, c_void_p, POINTER(L3JanitorStatus))
_proto("sc_l3_janitor", c_int, c_void_p, c_uint32, POINTER(L3JanitorReport))
_proto("sc_l3_evict_to", c_int, c_void_p, c_uint64)

_proto("sc_promote_consider", c_int, c_void_p, c_uint64, Digest_, c_uint64, c_uint64, POINTER(c_int))
_proto("sc_promote_attempted", c_int, c_void_p, c_uint64, Digest_)
_proto("sc_promote_stats", c_int, c_void_p, POINTER(PromoteStats))

_proto("sc_restore", c_int, c_void_p, c_void_p, c_char_p, POINTER(c_int32), c_uint32, c_uint32, POINTER(Restore_))
_proto("sc_restore_release", None, POINTER(Restore_))
_proto("sc_restore_with", c_int, c_void_p, c_void_p, c_char_p, POINTER(c_int32), c_uint32, POINTER(RestoreOpts),
       POINTER(Restore_))
_proto("sc_clock_ns", c_uint64)

_proto("sc_ring_open", c_int, c_void_p, _arena_pp)
_proto("sc_ring_close", c_int, c_void_p)
_proto("sc_ring_index", c_uint32, c_void_p)
_proto("sc_ring_max_tokens", c_uint32, c_void_p)
_proto("sc_ring_try_submit", c_int, c_void_p, POINTER(Commit_))
_proto("sc_ring_poll", c_int, c_void_p, RING_FN, c_void_p, c_uint)
_proto("sc_ring_consumer_close", None, c_void_p)
_proto("sc_ring_stats", c_int, c_void_p, POINTER(RingStat), c_uint)

_proto("sc_batcher_init_opts", c_int, c_void_p, c_void_p, c_uint64, c_uint64, POINTER(BatcherOpts))
_proto("sc_batcher_commit", c_int, c_void_p, c_int32, c_uint64)
_proto("sc_batcher_flush", c_int, c_void_p)
_proto("sc_batcher_finish", c_int, c_void_p, c_uint32)
_proto("sc_batcher_count", c_uint64, c_void_p)
_proto("sc_batcher_pending", c_uint32, c_void_p)
_proto("sc_batcher_ring_full", c_uint64, c_void_p)
_proto("sc_batcher_commits", c_uint64, c_void_p)

_proto("sc_arena_fsck", c_int, c_void_p, c_uint32, c_void_p, c_void_p, POINTER(FsckReport))


# ---- the layout check ----

def library_fields(type_name):
    """Every public field of a C structure as the library knows it: [(name, offset, size)]."""
    out = []
    name, off, size = c_char_p(), c_size_t(), c_size_t()
    i = 0
    while lib.sc_type_field(type_name.encode(), i, ctypes.byref(name), ctypes.byref(off), ctypes.byref(size)) == 0:
        out.append((name.value.decode(), off.value, size.value))
        i += 1
    return out


def library_types():
    out, i = [], 0
    while True:
        n = lib.sc_type_name(i)
        if n is None:
            return out
        out.append(n.decode())
        i += 1


def check_layouts():
    """Compare every structure mirrored here with the library's, field by field. Raises LayoutError."""
    problems = []
    for cname, cls in STRUCTS.items():
        size = lib.sc_sizeof(cname.encode())
        if size == 0:
            problems.append("%s: unknown to the library" % cname)
            continue
        if ctypes.sizeof(cls) != size:
            problems.append("%s: %d bytes here, %d in the library" % (cname, ctypes.sizeof(cls), size))
        if ctypes.alignment(cls) != lib.sc_alignof(cname.encode()):
            problems.append("%s: alignment %d here, %d in the library" % (
                cname, ctypes.alignment(cls), lib.sc_alignof(cname.encode())))
        for fname, _ in cls._fields_:
            if fname.startswith("_"):
                continue  # reserved or private: not part of the contract
            off = lib.sc_offsetof(cname.encode(), fname.encode())
            mine = getattr(cls, fname)
            if off < 0:
                problems.append("%s.%s: not a public field of the library's structure" % (cname, fname))
            elif off != mine.offset:
                problems.append("%s.%s: offset %d here, %d in the library" % (cname, fname, mine.offset, off))
            else:
                lsize = [s for n, _, s in library_fields(cname) if n == fname]
                if lsize and lsize[0] != mine.size:
                    problems.append("%s.%s: %d bytes here, %d in the library" % (cname, fname, mine.size, lsize[0]))
    if lib.sc_sizeof(b"sc_batcher") == 0 or lib.sc_alignof(b"sc_batcher") > 16:
        problems.append("sc_batcher: unknown to the library, or an alignment this package cannot honour")
    if problems:
        raise LayoutError("libstagecache at %s does not match this package: %s" % (lib_path, "; ".join(problems)))


check_layouts()
