//! The raw C interface of stagecache.h: `#[repr(C)]` mirrors of the structures (public fields by
//! name; reserved and private blocks as opaque arrays) and the functions. Every mirror is checked
//! against the library at start-up (see `crate::check_layouts`).
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

pub const SC_NAME_MAX: usize = 64;
pub const SC_INFO_MAX_ATTACHED: usize = 64;
pub const SC_KV_DESC_MAX_COMPONENTS: usize = 2;
pub const SC_L3_STR_MAX: usize = 1023;
pub const SC_L2_REFUSE_COUNT: usize = 8;
pub const SC_ARENA_OPEN_ANY_OWNER: u32 = 0x1;
pub const SC_MISS_MAX: usize = 16;
pub const SC_LEASES_MAX: usize = 48;
pub const SC_BATCHER_CAPACITY_MAX: u32 = 256;
pub const SC_BATCHER_DEFERRED: c_int = 1;
pub const SC_BATCHER_OPT_INTERVAL: u32 = 0x1;
pub const SC_ARENA_OPT_GID: u32 = 0x1;
pub const SC_COMMIT_FINISHED: u32 = 0x1;
pub const SC_COMMIT_ABORTED: u32 = 0x2;
pub const SC_RESTORE_WAIT: u32 = 0x1;
pub const SC_L3_OPEN_NO_RECONCILE: u32 = 0x1;
pub const SC_L3_PUT_MANY_MAX: usize = 64;
pub const SC_ORIGIN_DIRECT: u32 = 0;
pub const SC_ORIGIN_FROM_L3: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct sc_lookup {
    pub tokens: u32,
    pub l2_tokens: u32,
    pub l3_tokens: u32,
    pub _reserved0: u32,
    pub l2_digest: sc_digest,
    pub l3_digest: sc_digest,
    pub l2_bytes: u64,
    pub l3_bytes: u64,
    pub _reserved: [u64; 4],
}

#[repr(C)]
pub struct sc_l3_prefix_info {
    pub prefix: sc_digest,
    pub digest: sc_digest,
    pub token_count: u32,
    pub object_present: c_int,
    pub created_ns: i64,
    pub _reserved: [u64; 4],
    pub ns: [c_char; SC_L3_STR_MAX + 1],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct sc_event {
    pub type_: u32,
    pub token_count: u32,
    pub stage_id: u64,
    pub key: sc_key,
    pub digest: sc_digest,
    pub lost_why: u32,
    pub _reserved0: u32,
    pub _reserved: [u64; 1],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct sc_events_stats {
    pub records: u32,
    pub listener: u32,
    pub listener_pid: u32,
    pub listener_alive: c_int,
    pub listener_since_ns: u64,
    pub appended: u64,
    pub consumed: u64,
    pub pending: u64,
    pub dropped: u64,
    pub lost: u64,
    pub resets: u64,
    pub seq: u64,
    pub _reserved: [u64; 4],
}

pub enum sc_arena {}
pub enum sc_stage {}
pub enum sc_l3 {}
pub enum sc_ring {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct sc_digest {
    pub lo: u64,
    pub hi: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct sc_key {
    pub lo: u64,
    pub hi: u64,
}

#[repr(C)]
pub struct sc_arena_open_opts {
    pub dir: *const c_char,
    pub flags: u32,
    pub owner_uid: u32,
    pub _reserved: [u64; 4],
}

#[repr(C)]
pub struct sc_arena_file {
    pub path: [c_char; 4096],
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub _reserved: [u64; 4],
}

#[repr(C)]
pub struct sc_arena_opts {
    pub size_bytes: u64,
    pub huge: c_int,
    pub dir: *const c_char,
    pub mode: u32,
    pub gid: i64,
    pub index_entries: u32,
    pub ring_count: u32,
    pub ring_bytes: u32,
    pub obs_entries: u32,
    pub reader_slots: u32,
    pub flags: u32,
    pub l3_index_entries: u32,
    pub l3_index_refresh_ms: u32,
    pub segment_bytes: u32,
    pub slots_per_user: u32,
    pub _reserved: [u64; 4],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct sc_arena_attached {
    pub pid: u32,
    pub uid: u32,
    pub slot: u32,
    pub other_pidns: c_int,
    pub attached_unix: u64,
}

/// `struct sc_holder`: one holder of arena resources (sc_arena_holders).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_holder {
    pub slot: u32,
    pub token: u32,
    pub alive: c_int,
    pub other_pidns: c_int,
    pub pid: u32,
    pub uid: u32,
    pub leases: u32,
    pub leased_bytes: u64,
    pub reserved_bytes: u64,
}

#[repr(C)]
pub struct sc_arena_info {
    pub name: [c_char; SC_NAME_MAX + 1],
    pub path: [c_char; 4096],
    pub size_bytes: u64,
    pub page_size: u64,
    pub backing: c_int,
    pub layout_version: u32,
    pub created_unix: u64,
    pub creator_pid: u32,
    pub mode: u32,
    pub reader_slots: u32,
    pub attached_count: u32,
    pub attached: [sc_arena_attached; SC_INFO_MAX_ATTACHED],
    pub index_entries: u32,
    pub ring_count: u32,
    pub ring_bytes: u32,
    pub obs_entries: u32,
    pub heap_bytes: u64,
    pub l3_index_entries: u32,
    pub l3_index_refresh_ms: u32,
    pub flags: u32,
    pub slots_per_user: u32,
    pub locked_slots: u32,
    pub _reserved0: u32,
    pub _reserved: [u64; 5],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct sc_arena_extent {
    pub base: *mut c_void,
    pub bytes: u64,
    pub page_size: u64,
    pub file_offset: u64,
    pub kind: u32,
    pub flags: u32,
    pub _reserved: [u64; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_kv_component {
    pub version: u32,
    pub role: u32,
    pub token_start: u64,
    pub token_count: u64,
    pub k_type: u32,
    pub v_type: u32,
    pub k_row_bytes: u64,
    pub v_row_bytes: u64,
    pub payload_offset: u64,
    pub payload_bytes: u64,
    pub flags: u32,
    pub _reserved: u32,
}

/// `struct sc_kv_desc`, the KV page descriptor (plain data; see docs/CONCEPTS.md).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_kv_desc {
    pub version: u32,
    pub layer_start: u32,
    pub layer_end: u32,
    pub layer_count: u32,
    pub token_start: u64,
    pub token_count: u64,
    pub k_type: u32,
    pub v_type: u32,
    pub k_row_bytes: u64,
    pub v_row_bytes: u64,
    pub v_element_bytes: u64,
    pub k_idx_row_bytes: u64,
    pub payload_bytes: u64,
    pub flags: u32,
    pub codec: u32,
    pub component_count: u32,
    pub _reserved: u32,
    pub components: [sc_kv_component; SC_KV_DESC_MAX_COMPONENTS],
}

#[repr(C)]
pub struct sc_payload {
    pub kind: u32,
    pub sec: [*const c_void; 2],
    pub sec_len: [u64; 2],
    pub kv_desc: *const sc_kv_desc,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct sc_location {
    pub token_count: u32,
    pub kind: u32,
    pub digest: sc_digest,
    pub prefix: sc_digest,
    pub sec_len: [u64; 2],
    pub payload_bytes: u64,
    pub file_bytes: u64,
    pub has_kv_desc: c_int,
    pub _reserved0: u32,
    pub kv_desc: sc_kv_desc,
    pub cost_ns: u64,
    pub _reserved: [u64; 5],
}

#[repr(C)]
pub struct sc_lease {
    pub sec: [*const c_void; 2],
    pub sec_len: [u64; 2],
    pub kind: u32,
    pub origin: u32,
    pub token_count: u32,
    pub _reserved0_: u32,
    pub digest: sc_digest,
    pub key: sc_key,
    pub has_kv_desc: c_int,
    pub _reserved0: u32,
    pub kv_desc: sc_kv_desc,
    pub segments: u32,
    pub _reserved1: u32,
    pub _reserved: [u64; 7],
    pub _private: [u64; 6],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct sc_segment {
    pub ptr: *const c_void,
    pub len: u64,
    pub section: u32,
    pub _reserved: u32,
}

#[repr(C)]
pub struct sc_l2_entry_info {
    pub key: sc_key,
    pub stage_id: u64,
    pub token_count: u32,
    pub _reserved0_: u32,
    pub bytes: u64,
    pub footprint: u64,
    pub sec_len: [u64; 2],
    pub digest: sc_digest,
    pub kind: u32,
    pub origin: u32,
    pub created_unix_ns: u64,
    pub frequency: u32,
    pub has_kv_desc: c_int,
    pub cost_ns: u64,
    pub _reserved: [u64; 5],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_l2_stats {
    pub entries: u64,
    pub bytes: u64,
    pub logical_bytes: u64,
    pub budget_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
    pub admission_rejects: u64,
    pub refused_bytes: u64,
    pub leases: u64,
    pub pending_reclaim_bytes: u64,
    pub free_bytes: u64,
    pub largest_free_block: u64,
    pub refused: [u64; SC_L2_REFUSE_COUNT],
    pub small_entries: u64,
    pub small_bytes: u64,
    pub main_entries: u64,
    pub main_bytes: u64,
    pub moved_to_main: u64,
    pub ghost_hits: u64,
    pub physical_bytes: u64,
    pub saved_bytes: u64,
    pub segments: u64,
    pub segment_holder_bytes: u64,
    pub segment_dedup_bytes: u64,
    pub refused_low_benefit: u64,
    pub credit_kept: u64,
    pub _reserved: [u64; 1],
}

#[repr(C)]
pub struct sc_l2_resv {
    pub ptr: *mut c_void,
    pub bytes: u64,
    pub _private: [u64; 3],
}

#[repr(C)]
pub struct sc_l3_opts {
    pub budget_bytes: u64,
    pub min_free_bytes: u64,
    pub queue_depth: u32,
    pub o_direct: c_int,
    pub file_mode: u32,
    pub flags: u32,
    pub host_id: *const c_char,
    pub state_dir: *const c_char,
    pub visibility_ms: u32,
    pub fd_cache: u32,
    pub gid: i64,
    pub _reserved: [u64; 2],
}

#[repr(C)]
pub struct sc_l3_put_args {
    pub model_identity: *const c_char,
    pub state_identity: *const c_char,
    pub ns: *const c_char,
    pub tokens: *const i32,
    pub token_count: u32,
    pub payload: *const sc_payload,
}

#[repr(C)]
pub struct sc_l3_fill_req {
    pub loc: *const sc_location,
    pub dst: *mut c_void,
    pub dst_bytes: u64,
    pub flags: u32,
    pub user_data: u64,
    pub stage_id: u64,
    pub result: c_int,
    pub direct: c_int,
    pub fill_ns: u64,
    pub identity: sc_digest,
    pub cost_ns: u64,
    pub _reserved: [u64; 1],
    pub _private: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct sc_l3_janitor_status {
    pub shared: c_int,
    pub _reserved0: u32,
    pub host_id: [c_char; 65],
    pub janitor_host: [c_char; 65],
    pub _reserved1: [u8; 6],
    pub epoch: u64,
    pub pass_start_ns: u64,
    pub pass_end_ns: u64,
    pub objects: u64,
    pub bytes: u64,
    pub evictions: u64,
    pub passes: u64,
    pub _reserved: [u64; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct sc_l3_janitor_report {
    pub epoch: u64,
    pub objects: u64,
    pub bytes: u64,
    pub evicted: u64,
    pub evicted_bytes: u64,
    pub stale_temps: u64,
    pub accesses: u64,
    pub quarantined: u64,
    pub dropped: u64,
    pub skipped_recent: u64,
    pub pass_ns: u64,
    pub _reserved: [u64; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_l3_stats {
    pub objects: u64,
    pub bytes: u64,
    pub fills: u64,
    pub fill_bytes: u64,
    pub fill_ns: u64,
    pub verify_failures: u64,
    pub quarantined: u64,
    pub evictions: u64,
    pub write_refusals: u64,
    pub puts: u64,
    pub put_dedup: u64,
    pub key_collisions: u64,
    pub budget_bytes: u64,
    pub dio_mem_align: u32,
    pub dio_offset_align: u32,
    pub fills_kept: u64,
    pub logical_bytes: u64,
    pub physical_bytes: u64,
    pub saved_bytes: u64,
    pub segments: u64,
    pub segment_bytes: u64,
    pub fill_bytes_from_l2: u64,
    pub identity_mismatches: u64,
    pub fill_starts: u64,
    pub _reserved: [u64; 3],
}

#[repr(C)]
pub struct sc_l3_object_info {
    pub digest: sc_digest,
    pub kind: u32,
    pub token_count: u32,
    pub payload_bytes: u64,
    pub file_bytes: u64,
    pub mtime_ns: i64,
    pub segments: u32,
    pub segments_missing: u32,
    pub _reserved: [u64; 3],
    pub ns: [c_char; SC_L3_STR_MAX + 1],
    pub model_identity: [c_char; SC_L3_STR_MAX + 1],
    pub state_identity: [c_char; SC_L3_STR_MAX + 1],
    pub valid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_promote_stats {
    pub observations: u32,
    pub claims: u32,
    pub capacity: u32,
    pub considered: u64,
    pub promoted: u64,
    pub evicted: u64,
    pub expired: u64,
    pub repairs: u64,
    pub published: u64,
    pub refused: [u64; SC_L2_REFUSE_COUNT],
    pub refused_low_benefit: u64,
    pub _reserved: [u64; 7],
}

/// `struct sc_l3_index_stats`: the arena's L3 location index and key collisions at every level.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_l3_index_stats {
    pub capacity: u32,
    pub refresh_ms: u32,
    pub positive: u32,
    pub negative: u32,
    pub pages: u32,
    pub free_pages: u32,
    pub token_verify: c_int,
    pub bound: c_int,
    pub hits: u64,
    pub negative_hits: u64,
    pub misses: u64,
    pub fallbacks: u64,
    pub stale: u64,
    pub refreshes: u64,
    pub inserts: u64,
    pub evictions: u64,
    pub drops: u64,
    pub full: u64,
    pub vanished: u64,
    pub foreign: u64,
    pub key_collisions: u64,
    pub key_collisions_l2: u64,
    pub key_collisions_index: u64,
    pub key_collisions_l3: u64,
    pub _reserved: [u64; 8],
}

/// The private block of `struct sc_restore` (a lease, a reservation, a pointer, a state): only its
/// size matters here, and the start-up check compares the whole structure's size.
pub const SC_RESTORE_PRIVATE_U64: usize = 62;

#[repr(C)]
pub struct sc_restore {
    pub sec: [*const c_void; 2],
    pub sec_len: [u64; 2],
    pub kind: u32,
    pub token_count: u32,
    pub digest: sc_digest,
    pub has_kv_desc: c_int,
    pub _reserved0: u32,
    pub kv_desc: sc_kv_desc,
    pub source: c_int,
    pub promoted: c_int,
    pub promote_why: c_int,
    pub waited: c_int,
    pub direct: c_int,
    pub in_arena: c_int,
    pub from_index: c_int,
    pub locate_ns: u64,
    pub lookup_ns: u64,
    pub fill_ns: u64,
    pub total_ns: u64,
    pub predicted_ns: u64,
    pub miss_reason: i32,
    pub miss_detail: u32,
    pub _reserved: [u64; 6],
    pub _private: [u64; SC_RESTORE_PRIVATE_U64],
}

/// `struct sc_restore_opts`: a deadline (CLOCK_MONOTONIC ns) or a recompute estimate.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct sc_restore_opts {
    pub flags: u32,
    pub _reserved0: u32,
    pub deadline_ns: u64,
    pub recompute_ns: u64,
    pub _reserved: [u64; 5],
}

/// `struct sc_miss_stats`: why lookups and restores missed, by reason.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_miss_stats {
    pub l2: [u64; SC_MISS_MAX],
    pub restore: [u64; SC_MISS_MAX],
    pub l2_refused: [u64; SC_MISS_MAX],
    pub deadline: [u64; 8],
    pub _reserved: [u64; 8],
}

#[repr(C)]
pub struct sc_commit {
    pub request_id: u64,
    pub session_id: u64,
    pub generated_token_count: u64,
    pub flags: u32,
    pub token_count: u32,
    pub tokens: *const i32,
    pub ring: u32,
    pub gen: u32,
    pub seq: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_ring_stat {
    pub ring: u32,
    pub state: u32,
    pub producer_pid: u32,
    pub gen: u32,
    pub producer_alive: c_int,
    pub corrupt: c_int,
    pub depth_bytes: u64,
    pub depth_records: u64,
    pub records: u64,
    pub delivered: u64,
    pub ring_full: u64,
    pub ring_bytes: u64,
    pub _reserved: [u64; 6],
}

#[repr(C)]
#[derive(Default)]
pub struct sc_batcher_opts {
    pub interval_ns: u64,
    pub capacity: u32,
    pub flags: u32,
    pub _reserved: [u64; 2],
}

/// `struct sc_batcher` is opaque: its size is checked at start-up.
pub const SC_BATCHER_U64: usize = 138;

#[repr(C)]
pub struct sc_batcher {
    pub _opaque: [u64; SC_BATCHER_U64],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sc_fsck_report {
    pub problems: u64,
    pub repaired: u64,
    pub dropped: u64,
    pub entries: u64,
    pub entry_bytes: u64,
    pub pending_bytes: u64,
    pub reserved_bytes: u64,
    pub orphan_bytes: u64,
    pub heap_used_bytes: u64,
    pub heap_free_bytes: u64,
    pub heap_blocks: u64,
    pub leaked_bytes: u64,
    pub digests_checked: u64,
    pub digest_failures: u64,
    pub readers_live: u64,
    pub readers_dead: u64,
    pub rings: u64,
    pub ring_problems: u64,
    pub observations: u64,
    pub obs_problems: u64,
    pub lock_repairs: u64,
    pub _reserved: [u64; 8],
}

pub type sc_ring_fn = unsafe extern "C" fn(c: *const sc_commit, ctx: *mut c_void) -> c_int;

extern "C" {
    pub fn sc_strerror(err: c_int) -> *const c_char;
    pub fn sc_sizeof(t: *const c_char) -> usize;
    pub fn sc_alignof(t: *const c_char) -> usize;
    pub fn sc_offsetof(t: *const c_char, field: *const c_char) -> i64;
    pub fn sc_type_field(t: *const c_char, index: c_uint, name: *mut *const c_char, offset: *mut usize,
                         size: *mut usize) -> c_int;
    pub fn sc_type_name(index: c_uint) -> *const c_char;

    pub fn sc_huge_name(v: c_int) -> *const c_char;
    pub fn sc_backing_name(v: c_int) -> *const c_char;
    pub fn sc_payload_kind_name(v: c_int) -> *const c_char;
    pub fn sc_origin_name(v: c_int) -> *const c_char;
    pub fn sc_promote_why_name(v: c_int) -> *const c_char;
    pub fn sc_restore_source_name(v: c_int) -> *const c_char;
    pub fn sc_ring_state_name(v: c_int) -> *const c_char;
    pub fn sc_extent_kind_name(v: c_int) -> *const c_char;
    pub fn sc_l2_refusal_name(v: c_int) -> *const c_char;
    pub fn sc_miss_reason_name(v: c_int) -> *const c_char;
    pub fn sc_deadline_detail_name(v: c_int) -> *const c_char;
    pub fn sc_clock_ns() -> u64;

    pub fn sc_arena_create(name: *const c_char, opts: *const sc_arena_opts, out: *mut *mut sc_arena) -> c_int;
    pub fn sc_arena_open(name: *const c_char, out: *mut *mut sc_arena) -> c_int;
    pub fn sc_arena_open_dir(dir: *const c_char, name: *const c_char, out: *mut *mut sc_arena) -> c_int;
    pub fn sc_arena_open_with(name: *const c_char, opts: *const sc_arena_open_opts, out: *mut *mut sc_arena) -> c_int;
    pub fn sc_arena_close(a: *mut sc_arena);
    pub fn sc_arena_destroy(dir: *const c_char, name: *const c_char) -> c_int;
    pub fn sc_arena_info(a: *mut sc_arena, info: *mut sc_arena_info) -> c_int;
    pub fn sc_arena_inspect(name: *const c_char, opts: *const sc_arena_open_opts, info: *mut sc_arena_info) -> c_int;
    pub fn sc_arena_extents(a: *mut sc_arena, out: *mut sc_arena_extent, max: c_uint) -> c_int;
    pub fn sc_arena_holders(a: *mut sc_arena, out: *mut sc_holder, max: c_uint) -> c_int;

    pub fn sc_digest_of(buf: *const c_void, len: usize) -> sc_digest;
    pub fn sc_digest_sections(a: *const c_void, alen: usize, b: *const c_void, blen: usize) -> sc_digest;
    pub fn sc_digest_parse(hex: *const c_char, out: *mut sc_digest) -> c_int;

    pub fn sc_stage_open(a: *mut sc_arena, model: *const c_char, state: *const c_char, out: *mut *mut sc_stage)
                         -> c_int;
    pub fn sc_stage_close(s: *mut sc_stage);
    pub fn sc_stage_id(s: *const sc_stage) -> u64;
    pub fn sc_l2_key(s: *const sc_stage, ns: *const c_char, tokens: *const i32, n: u32, out: *mut sc_key) -> c_int;
    pub fn sc_l2_admit(s: *mut sc_stage, ns: *const c_char, tokens: *const i32, n: u32, expected: sc_digest,
                       p: *const sc_payload, origin: u32) -> c_int;
    pub fn sc_promote_admit(s: *mut sc_stage, ns: *const c_char, tokens: *const i32, n: u32, expected: sc_digest,
                            p: *const sc_payload) -> c_int;
    pub fn sc_l2_admit_cost(s: *mut sc_stage, ns: *const c_char, tokens: *const i32, n: u32, expected: sc_digest,
                            p: *const sc_payload, origin: u32, cost_ns: u64) -> c_int;
    pub fn sc_promote_admit_cost(s: *mut sc_stage, ns: *const c_char, tokens: *const i32, n: u32,
                                 expected: sc_digest, p: *const sc_payload, cost_ns: u64) -> c_int;
    pub fn sc_stage_set_token_cost(s: *mut sc_stage, ns_per_token: u64) -> c_int;
    pub fn sc_stage_token_cost(s: *const sc_stage, ns_per_token: *mut u64) -> c_int;
    pub fn sc_miss_stats(a: *mut sc_arena, stage_id: u64, st: *mut sc_miss_stats) -> c_int;
    pub fn sc_l2_get(s: *mut sc_stage, ns: *const c_char, tokens: *const i32, n: u32, loc: *const sc_location,
                     lease: *mut sc_lease) -> c_int;
    pub fn sc_lease_release(lease: *mut sc_lease);
    pub fn sc_lease_segments(lease: *const sc_lease, out: *mut sc_segment, max: u32) -> c_int;
    pub fn sc_lease_copy(lease: *const sc_lease, buf: *mut c_void, cap: u64) -> i64;
    pub fn sc_l2_peek(s: *mut sc_stage, ns: *const c_char, tokens: *const i32, n: u32,
                      info: *mut sc_l2_entry_info) -> c_int;
    pub fn sc_l2_remove(s: *mut sc_stage, key: sc_key) -> c_int;
    pub fn sc_l2_invalidate_digest(a: *mut sc_arena, d: sc_digest) -> c_int;
    pub fn sc_l2_clear(a: *mut sc_arena) -> c_int;
    pub fn sc_l2_shrink_to(a: *mut sc_arena, bytes: u64) -> c_int;
    pub fn sc_l2_stats(a: *mut sc_arena, s: *const sc_stage, st: *mut sc_l2_stats) -> c_int;
    pub fn sc_l2_stage_ids(a: *mut sc_arena, ids: *mut u64, max: c_uint) -> c_int;
    pub fn sc_l2_stats_id(a: *mut sc_arena, id: u64, st: *mut sc_l2_stats) -> c_int;

    pub fn sc_l3_open(dir: *const c_char, opts: *const sc_l3_opts, out: *mut *mut sc_l3) -> c_int;
    pub fn sc_l3_close(l3: *mut sc_l3);
    pub fn sc_l3_put(l3: *mut sc_l3, args: *const sc_l3_put_args, loc: *mut sc_location) -> c_int;
    pub fn sc_l3_put_cost(l3: *mut sc_l3, args: *const sc_l3_put_args, cost_ns: u64, loc: *mut sc_location)
                          -> c_int;
    pub fn sc_l3_put_many(l3: *mut sc_l3, args: *const sc_l3_put_args, costs: *const u64, n: c_uint,
                          locs: *mut sc_location, rcs: *mut c_int) -> c_int;
    pub fn sc_l3_fill_estimate(l3: *mut sc_l3, bytes: u64, ns: *mut u64) -> c_int;
    pub fn sc_l3_locate_longest(l3: *mut sc_l3, ns: *const c_char, tokens: *const i32, n: u32,
                                loc: *mut sc_location) -> c_int;
    pub fn sc_l3_stats(l3: *mut sc_l3, st: *mut sc_l3_stats) -> c_int;
    pub fn sc_lookup(s: *mut sc_stage, l3: *mut sc_l3, ns: *const c_char, tokens: *const i32, n: u32, block: u32,
                     out: *mut sc_lookup) -> c_int;
    pub fn sc_block_hashes(tokens: *const i32, n: u32, block_size: u32, parent: u64, out: *mut u64, max: u32) -> i64;
    pub fn sc_events_stats(a: *mut sc_arena, st: *mut sc_events_stats) -> c_int;
    pub fn sc_l3_janitor_status(l3: *mut sc_l3, st: *mut sc_l3_janitor_status) -> c_int;
    pub fn sc_l3_janitor(l3: *mut sc_l3, flags: u32, rep: *mut sc_l3_janitor_report) -> c_int;

    pub fn sc_promote_consider(a: *mut sc_arena, stage_id: u64, d: sc_digest, token_count: u64, payload_bytes: u64,
                               why: *mut c_int) -> c_int;
    pub fn sc_promote_attempted(a: *mut sc_arena, stage_id: u64, d: sc_digest) -> c_int;
    pub fn sc_promote_stats(a: *mut sc_arena, st: *mut sc_promote_stats) -> c_int;

    pub fn sc_l3_index_stats(a: *mut sc_arena, out: *mut sc_l3_index_stats) -> c_int;
    pub fn sc_restore(s: *mut sc_stage, l3: *mut sc_l3, ns: *const c_char, tokens: *const i32, n: u32, flags: u32,
                      out: *mut sc_restore) -> c_int;
    pub fn sc_restore_release(r: *mut sc_restore);
    pub fn sc_restore_with(s: *mut sc_stage, l3: *mut sc_l3, ns: *const c_char, tokens: *const i32, n: u32,
                           opts: *const sc_restore_opts, out: *mut sc_restore) -> c_int;

    pub fn sc_ring_open(a: *mut sc_arena, out: *mut *mut sc_ring) -> c_int;
    pub fn sc_ring_close(r: *mut sc_ring) -> c_int;
    pub fn sc_ring_index(r: *const sc_ring) -> u32;
    pub fn sc_ring_max_tokens(r: *const sc_ring) -> u32;
    pub fn sc_ring_try_submit(r: *mut sc_ring, c: *const sc_commit) -> c_int;
    pub fn sc_ring_poll(a: *mut sc_arena, cb: sc_ring_fn, ctx: *mut c_void, max: c_uint) -> c_int;
    pub fn sc_ring_consumer_close(a: *mut sc_arena);
    pub fn sc_ring_stats(a: *mut sc_arena, out: *mut sc_ring_stat, max: c_uint) -> c_int;

    pub fn sc_batcher_init_opts(b: *mut sc_batcher, r: *mut sc_ring, request_id: u64, session_id: u64,
                                opts: *const sc_batcher_opts) -> c_int;
    pub fn sc_batcher_commit(b: *mut sc_batcher, token: i32, elapsed_ns: u64) -> c_int;
    pub fn sc_batcher_flush(b: *mut sc_batcher) -> c_int;
    pub fn sc_batcher_finish(b: *mut sc_batcher, flag: u32) -> c_int;
    pub fn sc_batcher_count(b: *const sc_batcher) -> u64;
    pub fn sc_batcher_pending(b: *const sc_batcher) -> u32;
    pub fn sc_batcher_ring_full(b: *const sc_batcher) -> u64;
    pub fn sc_batcher_commits(b: *const sc_batcher) -> u64;
}
