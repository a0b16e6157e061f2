//! Safe Rust bindings of libstagecache: a shared host-RAM cache of exact LLM prefix state for
//! co-located worker processes (see the project's README and `stagecache.h`).
//!
//! ```no_run
//! use stagecache::{Arena, ArenaOptions, Huge};
//! let arena = Arena::create("example", &ArenaOptions { size_bytes: 64 << 20, huge: Huge::Off, ..Default::default() })?;
//! let stage = arena.stage("llama-3-8b", "kv-fp16")?;
//! let tokens = [101, 2023, 2003];
//! stage.admit_bytes("tenant-a", &tokens, b"prefix state")?;
//! if let Some(lease) = stage.get("tenant-a", &tokens, None)? {
//!     assert_eq!(lease.section(0), b"prefix state");
//! } // the lease is released here; it cannot outlive `stage`, which cannot outlive `arena`
//! # Ok::<(), stagecache::Error>(())
//! ```
//!
//! Ownership follows the library's rules, and the compiler enforces them:
//! * an [`Arena`] handle may move to another thread (`Send`) but is used by one thread at a
//!   time (not `Sync`); each thread opens its own handle;
//! * a [`Stage`], [`Ring`], [`Lease`] and [`Restore`] borrow their arena (or stage), so none can
//!   outlive it or cross to another thread while it is in use;
//! * an [`L3`] handle may be shared by threads (`Send + Sync`): each thread gets its own io_uring;
//! * the structures of the header are checked against the library the first time a handle is
//!   opened ([`check_layouts`]); a mismatch is [`Error::Layout`], never undefined behaviour.
//!
//! What the borrows rule out (each of these fails to compile):
//!
//! A lease cannot outlive its stage:
//! ```compile_fail,E0597
//! # use stagecache::*;
//! # let arena = Arena::open("x").unwrap();
//! let lease = {
//!     let stage = arena.stage("m", "s").unwrap();
//!     stage.get("ns", &[1], None).unwrap().unwrap()
//! };
//! ```
//! A section cannot outlive its lease:
//! ```compile_fail,E0597
//! # use stagecache::*;
//! # let arena = Arena::open("x").unwrap();
//! # let stage = arena.stage("m", "s").unwrap();
//! let bytes: &[u8] = {
//!     let lease = stage.get("ns", &[1], None).unwrap().unwrap();
//!     lease.section(0)
//! };
//! ```
//! A stage cannot outlive its arena:
//! ```compile_fail,E0597
//! # use stagecache::*;
//! let stage = {
//!     let arena = Arena::open("x").unwrap();
//!     arena.stage("m", "s").unwrap()
//! };
//! ```
//! A stage (or a lease) does not cross to another thread; an arena in use by one does not either:
//! ```compile_fail,E0277
//! # use stagecache::*;
//! let arena = Arena::open("x").unwrap();
//! let stage = arena.stage("m", "s").unwrap();
//! std::thread::spawn(move || drop(stage));
//! ```
//! ```compile_fail,E0277
//! # use stagecache::*;
//! let arena = Arena::open("x").unwrap();
//! std::thread::scope(|s| { s.spawn(|| arena.l2_stats()); });
//! ```

pub mod ffi;

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::ptr;
use std::sync::Once;
use std::time::Duration;

pub use ffi::sc_kv_component as KvComponent;
pub use ffi::sc_kv_desc as KvDesc;
pub use ffi::sc_holder as Holder;
pub use ffi::sc_l2_stats as L2Stats;
pub use ffi::sc_miss_stats as MissStats;
pub use ffi::sc_l3_stats as L3Stats;
pub use ffi::sc_promote_stats as PromoteStats;
pub use ffi::sc_ring_stat as RingStat;

/// Leases one arena handle may hold at once.
pub const LEASES_MAX: usize = ffi::SC_LEASES_MAX;
/// Tokens one batcher holds at most.
pub const BATCHER_CAPACITY_MAX: u32 = ffi::SC_BATCHER_CAPACITY_MAX;
/// Puts one group commit makes together; `L3::put_many` takes more in batches of this many.
pub const L3_PUT_MANY_MAX: usize = ffi::SC_L3_PUT_MANY_MAX;

// ---- errors ----

/// What can go wrong.
/// Whose arena files an open trusts besides root's and the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Only root's and the caller's.
    Me,
    /// Also those of this uid (the group member who created the arena).
    Uid(u32),
    /// Any owner's (never a world-writable file).
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A library call failed with a (positive) errno; Display adds the library's message.
    Call { call: &'static str, errno: i32 },
    /// The library's structures differ from this crate's: it refuses to call into it.
    Layout(String),
    /// An argument cannot be passed to C (an interior NUL, too many tokens, ...).
    Argument(&'static str),
    /// `L3::put_many`: a put was not acknowledged. `index` is the first such put, `errno` its
    /// error; `results` has one entry per put: `Some(Ok(..))` acknowledged (durable),
    /// `Some(Err(..))` failed, `None` not tried (in a batch after the failed one). A batch
    /// holding an invalid put is refused whole: each of its puts failed with EINVAL.
    PutMany { index: usize, errno: i32, results: Vec<Option<Result<(u32, Digest)>>> },
}

/// CLOCK_MONOTONIC in ns: the clock of `RestoreOptions::deadline_ns`.
pub fn clock_ns() -> u64 {
    unsafe { ffi::sc_clock_ns() }
}

/// The name of a miss reason (`MissStats` arrays are indexed by it): "never_stored", ... .
pub fn miss_reason_name(reason: i32) -> &'static str {
    name_of(ffi::sc_miss_reason_name, reason)
}

/// Options of `Stage::restore_with`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RestoreOptions {
    /// Wait for another process's fill of the same payload.
    pub wait: bool,
    /// `clock_ns()` time by which to answer (0: none).
    pub deadline_ns: u64,
    /// What recomputing the prefix would take, ns (0: unknown).
    pub recompute_ns: u64,
}

impl Error {
    /// True for the answer of `Stage::restore_with` that recomputing wins (-ETIME).
    pub fn is_recompute(&self) -> bool {
        self.errno() == Some(ETIME)
    }

    /// The errno of a failed call (ENOENT, EBADMSG, ...), if it is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Call { errno, .. } | Error::PutMany { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

/// The library's message for an errno (negative or positive).
pub fn strerror(errno: i32) -> String {
    unsafe { CStr::from_ptr(ffi::sc_strerror(errno)) }.to_string_lossy().into_owned()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Call { call, errno } => write!(f, "{}: {}", call, strerror(*errno)),
            Error::Layout(s) => write!(f, "libstagecache does not match this crate: {}", s),
            Error::Argument(s) => write!(f, "invalid argument: {}", s),
            Error::PutMany { index, errno, results } => {
                let failed = results.iter().filter(|r| matches!(r, Some(Err(_)))).count();
                let untried = results.iter().filter(|r| r.is_none()).count();
                write!(f, "sc_l3_put_many: put {} of {}: {}; {} failed, {} acknowledged, {} not tried", index,
                       results.len(), strerror(*errno), failed, results.len() - failed - untried, untried)
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        match e.errno() {
            Some(n) => std::io::Error::from_raw_os_error(n),
            None => std::io::Error::new(std::io::ErrorKind::Other, e),
        }
    }
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

fn check(rc: c_int, call: &'static str) -> Result<c_int> {
    if rc < 0 {
        Err(Error::Call { call, errno: -rc })
    } else {
        Ok(rc)
    }
}

const ENOENT: c_int = 2;
const ETIME: c_int = 62;
const ENODATA: c_int = 61;
const EAGAIN: c_int = 11;
const EBUSY: c_int = 16;

fn cstr(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::Argument("a string with a NUL byte"))
}

fn name_of(f: unsafe extern "C" fn(c_int) -> *const c_char, v: c_int) -> &'static str {
    // the library's names are static strings, never NULL
    unsafe { CStr::from_ptr(f(v)) }.to_str().unwrap_or("unknown")
}

// ---- layouts ----

macro_rules! offset_of {
    ($t:ty, $f:ident) => {{
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        #[allow(unused_unsafe)]
        let field = unsafe { ptr::addr_of!((*base).$f) };
        (field as usize) - (base as usize)
    }};
}

macro_rules! size_of_field {
    ($t:ty, $f:ident) => {{
        fn size<T>(_: *const T) -> usize {
            std::mem::size_of::<T>()
        }
        let u = MaybeUninit::<$t>::uninit();
        #[allow(unused_unsafe)]
        size(unsafe { ptr::addr_of!((*u.as_ptr()).$f) })
    }};
}

/// One mirrored field: (name, offset here, size here).
pub type FieldLayout = (&'static str, usize, usize);
/// One mirrored structure: C name, size, alignment, fields.
pub type TypeLayout = (&'static str, usize, usize, Vec<FieldLayout>);

macro_rules! layout {
    ($name:expr, $t:ty, [$($f:ident),* $(,)?]) => {
        ($name, std::mem::size_of::<$t>(), std::mem::align_of::<$t>(),
         vec![$((stringify!($f), offset_of!($t, $f), size_of_field!($t, $f))),*])
    };
}

/// Every structure this crate mirrors, with the public fields it reads or writes.
pub fn layouts() -> Vec<TypeLayout> {
    use ffi::*;
    vec![
        layout!("sc_arena_opts", sc_arena_opts, [size_bytes, huge, dir, mode, gid, index_entries, ring_count,
                ring_bytes, obs_entries, reader_slots, flags, l3_index_entries, l3_index_refresh_ms, segment_bytes,
                slots_per_user]),
        layout!("sc_arena_attached", sc_arena_attached, [pid, uid, slot, other_pidns, attached_unix]),
        layout!("sc_holder", sc_holder, [slot, token, alive, other_pidns, pid, uid, leases, leased_bytes,
                reserved_bytes]),
        layout!("sc_arena_info", sc_arena_info, [name, path, size_bytes, page_size, backing, layout_version,
                created_unix, creator_pid, mode, reader_slots, attached_count, attached, index_entries,
                ring_count, ring_bytes, obs_entries, heap_bytes, l3_index_entries, l3_index_refresh_ms, flags,
                slots_per_user, locked_slots]),
        layout!("sc_arena_extent", sc_arena_extent, [base, bytes, page_size, file_offset, kind, flags]),
        layout!("sc_digest", sc_digest, [lo, hi]),
        layout!("sc_key", sc_key, [lo, hi]),
        layout!("sc_kv_component", sc_kv_component, [version, role, token_start, token_count, k_type, v_type,
                k_row_bytes, v_row_bytes, payload_offset, payload_bytes, flags]),
        layout!("sc_kv_desc", sc_kv_desc, [version, layer_start, layer_end, layer_count, token_start, token_count,
                k_type, v_type, k_row_bytes, v_row_bytes, v_element_bytes, k_idx_row_bytes, payload_bytes, flags,
                codec, component_count, components]),
        layout!("sc_payload", sc_payload, [kind, sec, sec_len, kv_desc]),
        layout!("sc_location", sc_location, [token_count, kind, digest, prefix, sec_len, payload_bytes,
                file_bytes, has_kv_desc, kv_desc, cost_ns]),
        layout!("sc_lease", sc_lease, [sec, sec_len, kind, origin, token_count, digest, key, has_kv_desc, kv_desc,
                segments]),
        layout!("sc_segment", sc_segment, [ptr, len, section]),
        layout!("sc_l2_entry_info", sc_l2_entry_info, [key, stage_id, token_count, bytes, footprint, sec_len,
                digest, kind, origin, created_unix_ns, frequency, has_kv_desc, cost_ns]),
        layout!("sc_l2_stats", sc_l2_stats, [entries, bytes, logical_bytes, budget_bytes, hits, misses, inserts,
                evictions, admission_rejects, refused_bytes, leases, pending_reclaim_bytes, free_bytes,
                largest_free_block, refused, small_entries, small_bytes, main_entries, main_bytes, moved_to_main,
                ghost_hits, physical_bytes, saved_bytes, segments, segment_holder_bytes, segment_dedup_bytes,
                refused_low_benefit, credit_kept]),
        layout!("sc_l2_resv", sc_l2_resv, [ptr, bytes]),
        layout!("sc_l3_opts", sc_l3_opts, [budget_bytes, min_free_bytes, queue_depth, o_direct, file_mode, flags,
                host_id, state_dir, visibility_ms, fd_cache, gid]),
        layout!("sc_l3_put_args", sc_l3_put_args, [model_identity, state_identity, ns, tokens, token_count,
                payload]),
        layout!("sc_l3_fill_req", sc_l3_fill_req, [loc, dst, dst_bytes, flags, user_data, stage_id, result, direct,
                fill_ns, identity, cost_ns]),
        layout!("sc_l3_stats", sc_l3_stats, [objects, bytes, fills, fill_bytes, fill_ns, verify_failures,
                quarantined, evictions, write_refusals, puts, put_dedup, key_collisions, budget_bytes, dio_mem_align,
                dio_offset_align, fills_kept, logical_bytes, physical_bytes, saved_bytes, segments, segment_bytes,
                fill_bytes_from_l2, identity_mismatches, fill_starts]),
        layout!("sc_l3_janitor_status", sc_l3_janitor_status, [shared, host_id, janitor_host, epoch, pass_start_ns,
                pass_end_ns, objects, bytes, evictions, passes]),
        layout!("sc_l3_janitor_report", sc_l3_janitor_report, [epoch, objects, bytes, evicted, evicted_bytes,
                stale_temps, accesses, quarantined, dropped, skipped_recent, pass_ns]),
        layout!("sc_l3_object_info", sc_l3_object_info, [digest, kind, token_count, payload_bytes, file_bytes,
                mtime_ns, segments, segments_missing, ns, model_identity, state_identity, valid]),
        layout!("sc_promote_stats", sc_promote_stats, [observations, claims, capacity, considered, promoted,
                evicted, expired, repairs, published, refused, refused_low_benefit]),
        layout!("sc_restore", sc_restore, [sec, sec_len, kind, token_count, digest, has_kv_desc, kv_desc, source,
                promoted, promote_why, waited, direct, in_arena, from_index, locate_ns, lookup_ns, fill_ns,
                total_ns, predicted_ns, miss_reason, miss_detail]),
        layout!("sc_restore_opts", sc_restore_opts, [flags, deadline_ns, recompute_ns]),
        layout!("sc_miss_stats", sc_miss_stats, [l2, restore, l2_refused, deadline]),
        layout!("sc_l3_index_stats", sc_l3_index_stats, [capacity, refresh_ms, positive, negative, pages,
                free_pages, token_verify, bound, hits, negative_hits, misses, fallbacks, stale, refreshes, inserts,
                evictions, drops, full, vanished, foreign, key_collisions, key_collisions_l2, key_collisions_index,
                key_collisions_l3]),
        layout!("sc_commit", sc_commit, [request_id, session_id, generated_token_count, flags, token_count, tokens,
                ring, gen, seq]),
        layout!("sc_ring_stat", sc_ring_stat, [ring, state, producer_pid, gen, producer_alive, corrupt, depth_bytes,
                depth_records, records, delivered, ring_full, ring_bytes]),
        layout!("sc_batcher_opts", sc_batcher_opts, [interval_ns, capacity, flags]),
        layout!("sc_batcher", sc_batcher, []),
        layout!("sc_fsck_report", sc_fsck_report, [problems, repaired, dropped, entries, entry_bytes, pending_bytes,
                reserved_bytes, orphan_bytes, heap_used_bytes, heap_free_bytes, heap_blocks, leaked_bytes,
                digests_checked, digest_failures, readers_live, readers_dead, rings, ring_problems, observations,
                obs_problems, lock_repairs]),
        layout!("sc_arena_open_opts", sc_arena_open_opts, [dir, flags, owner_uid]),
        layout!("sc_arena_file", sc_arena_file, [path, mode, uid, gid, size]),
        layout!("sc_lookup", sc_lookup, [tokens, l2_tokens, l3_tokens, l2_digest, l3_digest, l2_bytes, l3_bytes]),
        layout!("sc_l3_prefix_info", sc_l3_prefix_info, [prefix, digest, token_count, object_present, created_ns,
                ns]),
        {
            // the C field is `type`, a keyword here
            let mut l = layout!("sc_event", sc_event, [type_, token_count, stage_id, key, digest, lost_why]);
            l.3[0].0 = "type";
            l
        },
        layout!("sc_events_stats", sc_events_stats, [records, listener, listener_pid, listener_alive,
                listener_since_ns, appended, consumed, pending, dropped, lost, resets, seq]),
    ]
}

/// The public fields of a C structure as the library knows them: (name, offset, size).
pub fn library_fields(type_name: &str) -> Vec<(String, usize, usize)> {
    let t = CString::new(type_name).unwrap();
    let mut out = Vec::new();
    for i in 0.. {
        let (mut name, mut off, mut size) = (ptr::null(), 0usize, 0usize);
        if unsafe { ffi::sc_type_field(t.as_ptr(), i, &mut name, &mut off, &mut size) } != 0 {
            break;
        }
        out.push((unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned(), off, size));
    }
    out
}

/// The structures the library describes.
pub fn library_types() -> Vec<String> {
    (0..)
        .map(|i| unsafe { ffi::sc_type_name(i) })
        .take_while(|p| !p.is_null())
        .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        .collect()
}

/// Compare every mirrored structure with the library's (size, alignment, and each field's
/// offset and size). Called once, automatically, before the first handle is opened.
pub fn check_layouts() -> Result<()> {
    let mut problems = Vec::new();
    for (name, size, align, fields) in layouts() {
        let c = CString::new(name).unwrap();
        let lsize = unsafe { ffi::sc_sizeof(c.as_ptr()) };
        if lsize == 0 {
            problems.push(format!("{}: unknown to the library", name));
            continue;
        }
        if lsize != size {
            problems.push(format!("{}: {} bytes here, {} in the library", name, size, lsize));
        }
        let lalign = unsafe { ffi::sc_alignof(c.as_ptr()) };
        if lalign != align {
            problems.push(format!("{}: alignment {} here, {} in the library", name, align, lalign));
        }
        let lib_fields = library_fields(name);
        for (f, off, fsize) in fields {
            match lib_fields.iter().find(|(n, _, _)| n == f) {
                None => problems.push(format!("{}.{}: not a public field of the library's structure", name, f)),
                Some((_, loff, lsz)) if *loff != off || *lsz != fsize => problems.push(format!(
                    "{}.{}: offset {} size {} here, offset {} size {} in the library",
                    name, f, off, fsize, loff, lsz
                )),
                _ => {}
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Layout(problems.join("; ")))
    }
}

static LAYOUT_ONCE: Once = Once::new();
static mut LAYOUT_RESULT: Option<Result<()>> = None;

fn layouts_ok() -> Result<()> {
    // written once under the Once, read only after it completed
    unsafe {
        LAYOUT_ONCE.call_once(|| LAYOUT_RESULT = Some(check_layouts()));
        LAYOUT_RESULT.clone().unwrap()
    }
}

// ---- values ----

/// What `Stage::lookup` found: the longest prefix held in L2, in L3, and the longer of the two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lookup {
    pub tokens: u32,
    pub l2_tokens: u32,
    pub l3_tokens: u32,
    pub l2_digest: Option<Digest>,
    pub l3_digest: Option<Digest>,
    pub l2_bytes: u64,
    pub l3_bytes: u64,
}

/// The block hashes `stagecache events` publishes for a prefix (docs/ROUTING.md): one per whole
/// block of `block_size` tokens, chained from `parent` (0 for a prefix that starts at token 0).
pub fn block_hashes(tokens: &[i32], block_size: u32, parent: u64) -> Result<Vec<u64>> {
    let n = tokens_len(tokens)?;
    let nb = if block_size > 0 { n / block_size } else { 0 };
    let mut out = vec![0u64; nb as usize];
    let rc = unsafe { ffi::sc_block_hashes(tokens.as_ptr(), n, block_size, parent, out.as_mut_ptr(), nb) };
    if rc < 0 {
        check(rc as c_int, "sc_block_hashes")?;
    }
    Ok(out)
}

/// An XXH3-128 payload digest; `Display` is the 32-hex form the tools print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Digest {
    pub lo: u64,
    pub hi: u64,
}

impl Digest {
    /// The digest of `data` (unseeded XXH3-128, the same on every machine).
    pub fn of(data: &[u8]) -> Digest {
        let d = unsafe { ffi::sc_digest_of(data.as_ptr() as *const c_void, data.len()) };
        Digest { lo: d.lo, hi: d.hi }
    }

    /// The digest of the wire `a` then `b`.
    pub fn of_sections(a: &[u8], b: &[u8]) -> Digest {
        let d = unsafe {
            ffi::sc_digest_sections(a.as_ptr() as *const c_void, a.len(), b.as_ptr() as *const c_void, b.len())
        };
        Digest { lo: d.lo, hi: d.hi }
    }

    /// Parse 32 hex characters.
    pub fn parse(hex: &str) -> Result<Digest> {
        let c = cstr(hex)?;
        let mut d = ffi::sc_digest::default();
        check(unsafe { ffi::sc_digest_parse(c.as_ptr(), &mut d) }, "sc_digest_parse")?;
        Ok(Digest { lo: d.lo, hi: d.hi })
    }

    fn c(self) -> ffi::sc_digest {
        ffi::sc_digest { lo: self.lo, hi: self.hi }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}{:016x}", self.hi, self.lo)
    }
}

/// An L2 key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Key {
    pub lo: u64,
    pub hi: u64,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}{:016x}", self.hi, self.lo)
    }
}

/// Payload kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    FullState = 1,
    RecurrentOnly = 2,
    KvRecurrent = 3,
}

impl Kind {
    fn from_c(v: u32) -> Option<Kind> {
        match v {
            1 => Some(Kind::FullState),
            2 => Some(Kind::RecurrentOnly),
            3 => Some(Kind::KvRecurrent),
            _ => None,
        }
    }
    /// "full_state", "recurrent_only", "kv_recurrent".
    pub fn name(self) -> &'static str {
        name_of(ffi::sc_payload_kind_name, self as c_int)
    }
}

/// Where an L2 entry came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Direct = 0,
    FromL3 = 1,
}

impl Origin {
    /// "direct" or "l3".
    pub fn name(self) -> &'static str {
        name_of(ffi::sc_origin_name, self as c_int)
    }
}

/// Why the promotion policy decided as it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromoteWhy {
    Terminal = 0,
    Oversize = 1,
    LongPrefix = 2,
    SecondHit = 3,
    FirstHit = 4,
    Returning = 5,
}

impl PromoteWhy {
    fn from_c(v: c_int) -> Option<PromoteWhy> {
        match v {
            0 => Some(PromoteWhy::Terminal),
            1 => Some(PromoteWhy::Oversize),
            2 => Some(PromoteWhy::LongPrefix),
            3 => Some(PromoteWhy::SecondHit),
            4 => Some(PromoteWhy::FirstHit),
            5 => Some(PromoteWhy::Returning),
            _ => None,
        }
    }
    /// "terminal", "oversize", "long_prefix", "second_hit", "first_hit", "returning".
    pub fn name(self) -> &'static str {
        name_of(ffi::sc_promote_why_name, self as c_int)
    }
}

/// A payload to admit or put: a kind, one or two sections, and a KV descriptor for a
/// `KvRecurrent` payload with a KV section.
pub struct Payload<'p> {
    pub kind: Kind,
    pub sections: [&'p [u8]; 2],
    pub kv_desc: Option<&'p KvDesc>,
}

impl<'p> Payload<'p> {
    /// A full-state payload of one section.
    pub fn full_state(bytes: &'p [u8]) -> Payload<'p> {
        Payload { kind: Kind::FullState, sections: [bytes, &[]], kv_desc: None }
    }

    /// The digest of the wire.
    pub fn digest(&self) -> Digest {
        Digest::of_sections(self.sections[0], self.sections[1])
    }

    fn c(&self) -> ffi::sc_payload {
        ffi::sc_payload {
            kind: self.kind as u32,
            sec: [self.sections[0].as_ptr() as *const c_void, self.sections[1].as_ptr() as *const c_void],
            sec_len: [self.sections[0].len() as u64, self.sections[1].len() as u64],
            kv_desc: self.kv_desc.map_or(ptr::null(), |d| d as *const KvDesc),
        }
    }
}

/// The durable copy's location, for validating an L2 lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub token_count: u64,
    pub digest: Digest,
}

/// A memory range of the arena that holds payload bytes (for DMA registration).
#[derive(Clone, Copy, Debug)]
pub struct Extent {
    pub base: *mut u8,
    pub bytes: u64,
    pub page_size: u64,
    pub file_offset: u64,
    pub kind: &'static str,
}

// ---- arena ----

/// Backing for a new arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Huge {
    /// hugetlbfs, else tmpfs with THP, else 4 KiB shared memory
    Auto = 0,
    /// hugetlbfs or fail
    Require = 1,
    /// 4 KiB shared memory
    Off = 2,
}

impl Default for Huge {
    fn default() -> Self {
        Huge::Auto
    }
}

/// Creation parameters (zero: the library's default).
#[derive(Clone, Debug, Default)]
pub struct ArenaOptions {
    pub size_bytes: u64,
    pub huge: Huge,
    pub dir: Option<String>,
    pub mode: u32,
    /// Group owner of the file (Some(0) is root's group).
    pub group: Option<u32>,
    pub index_entries: u32,
    pub ring_count: u32,
    pub ring_bytes: u32,
    pub obs_entries: u32,
    pub reader_slots: u32,
    /// Content-addressed L2 segments of this size (a power of two, 64 KiB..1 GiB); 0: none.
    pub segment_bytes: u32,
    /// Reader slots the processes of one user may hold at once (0: three quarters of them when
    /// the group may open the arena, else all); an attach beyond it fails with EDQUOT.
    pub slots_per_user: u32,
}

/// A handle on a named arena. `Send` (it may move to another thread) but not `Sync` (one thread
/// uses it at a time). Closed on drop, after everything that borrows it.
pub struct Arena {
    h: *mut ffi::sc_arena,
    name: String,
    _not_sync: PhantomData<Cell<()>>,
}

// The handle holds no thread-local state; the library asks only that one thread use it at a time,
// which `&mut`/`&` borrows and the absence of `Sync` guarantee.
unsafe impl Send for Arena {}

/// The open options for `dir` (kept alive by the caller) and `owner`.
fn open_opts(dir: Option<&std::ffi::CStr>, owner: Owner) -> ffi::sc_arena_open_opts {
    let (flags, owner_uid) = match owner {
        Owner::Me => (0, 0),
        Owner::Uid(u) => (0, u),
        Owner::Any => (ffi::SC_ARENA_OPEN_ANY_OWNER, 0),
    };
    ffi::sc_arena_open_opts { dir: dir.map_or(ptr::null(), |d| d.as_ptr()), flags, owner_uid, _reserved: [0; 4] }
}

impl Arena {
    /// Create the arena `name` and attach to it.
    pub fn create(name: &str, opts: &ArenaOptions) -> Result<Arena> {
        layouts_ok()?;
        let cname = cstr(name)?;
        let dir = opts.dir.as_deref().map(cstr).transpose()?;
        let o = ffi::sc_arena_opts {
            size_bytes: opts.size_bytes,
            huge: opts.huge as c_int,
            dir: dir.as_ref().map_or(ptr::null(), |d| d.as_ptr()),
            mode: opts.mode,
            gid: opts.group.map_or(0, i64::from),
            index_entries: opts.index_entries,
            ring_count: opts.ring_count,
            ring_bytes: opts.ring_bytes,
            obs_entries: opts.obs_entries,
            reader_slots: opts.reader_slots,
            flags: if opts.group.is_some() { ffi::SC_ARENA_OPT_GID } else { 0 },
            l3_index_entries: 0,
            l3_index_refresh_ms: 0,
            segment_bytes: opts.segment_bytes,
            slots_per_user: opts.slots_per_user,
            _reserved: [0; 4],
        };
        let mut h = ptr::null_mut();
        check(unsafe { ffi::sc_arena_create(cname.as_ptr(), &o, &mut h) }, "sc_arena_create")?;
        Ok(Arena { h, name: name.to_string(), _not_sync: PhantomData })
    }

    /// Attach to an existing arena (in /dev/hugepages, then /dev/shm).
    pub fn open(name: &str) -> Result<Arena> {
        layouts_ok()?;
        let cname = cstr(name)?;
        let mut h = ptr::null_mut();
        check(unsafe { ffi::sc_arena_open(cname.as_ptr(), &mut h) }, "sc_arena_open")?;
        Ok(Arena { h, name: name.to_string(), _not_sync: PhantomData })
    }

    /// Attach to an existing arena in `dir` only.
    pub fn open_dir(dir: &str, name: &str) -> Result<Arena> {
        layouts_ok()?;
        let (cdir, cname) = (cstr(dir)?, cstr(name)?);
        let mut h = ptr::null_mut();
        check(unsafe { ffi::sc_arena_open_dir(cdir.as_ptr(), cname.as_ptr(), &mut h) }, "sc_arena_open")?;
        Ok(Arena { h, name: name.to_string(), _not_sync: PhantomData })
    }

    /// Attach to an existing arena (in `dir` only, or the known directories) whose file is
    /// owned by root, by you, or by `owner` (`sc_arena_open_with`): how another member of the
    /// group opens the creator's arena.
    pub fn open_with(name: &str, dir: Option<&str>, owner: Owner) -> Result<Arena> {
        layouts_ok()?;
        let cname = cstr(name)?;
        let cdir = dir.map(cstr).transpose()?;
        let o = open_opts(cdir.as_deref(), owner);
        let mut h = ptr::null_mut();
        check(unsafe { ffi::sc_arena_open_with(cname.as_ptr(), &o, &mut h) }, "sc_arena_open")?;
        Ok(Arena { h, name: name.to_string(), _not_sync: PhantomData })
    }

    /// Describe the arena `name` without attaching to it (`sc_arena_inspect`: no reader slot is
    /// taken and nothing is written): works when every slot is taken, and for a user who may only
    /// read the file. `dir` and `owner` as for `open_with`.
    pub fn inspect(name: &str, dir: Option<&str>, owner: Owner) -> Result<ffi::sc_arena_info> {
        layouts_ok()?;
        let cname = cstr(name)?;
        let cdir = dir.map(cstr).transpose()?;
        let o = open_opts(cdir.as_deref(), owner);
        let mut info = MaybeUninit::<ffi::sc_arena_info>::zeroed();
        check(unsafe { ffi::sc_arena_inspect(cname.as_ptr(), &o, info.as_mut_ptr()) }, "sc_arena_inspect")?;
        Ok(unsafe { info.assume_init() })
    }

    /// Remove the arena's file (attached processes keep their mapping until they close).
    pub fn destroy(dir: Option<&str>, name: &str) -> Result<()> {
        let cname = cstr(name)?;
        let cdir = dir.map(cstr).transpose()?;
        check(unsafe { ffi::sc_arena_destroy(cdir.as_ref().map_or(ptr::null(), |d| d.as_ptr()), cname.as_ptr()) },
              "sc_arena_destroy")?;
        Ok(())
    }

    /// The name it was opened by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Open a stage view: a model identity and a state identity, part of every key.
    pub fn stage(&self, model_identity: &str, state_identity: &str) -> Result<Stage<'_>> {
        let (m, s) = (cstr(model_identity)?, cstr(state_identity)?);
        let mut h = ptr::null_mut();
        check(unsafe { ffi::sc_stage_open(self.h, m.as_ptr(), s.as_ptr(), &mut h) }, "sc_stage_open")?;
        Ok(Stage { h, arena: self })
    }

    /// The arena-wide L2 counters.
    pub fn l2_stats(&self) -> Result<L2Stats> {
        let mut st = L2Stats::default();
        check(unsafe { ffi::sc_l2_stats(self.h, ptr::null(), &mut st) }, "sc_l2_stats")?;
        Ok(st)
    }

    /// The ids of every stage with counters in the arena.
    pub fn stage_ids(&self) -> Result<Vec<u64>> {
        let n = check(unsafe { ffi::sc_l2_stage_ids(self.h, ptr::null_mut(), 0) }, "sc_l2_stage_ids")? as usize;
        let mut ids = vec![0u64; n];
        let got = check(unsafe { ffi::sc_l2_stage_ids(self.h, ids.as_mut_ptr(), n as u32) }, "sc_l2_stage_ids")?;
        ids.truncate((got as usize).min(n));
        Ok(ids)
    }

    /// One stage's counters by id (0: the arena's).
    pub fn l2_stats_id(&self, stage_id: u64) -> Result<L2Stats> {
        let mut st = L2Stats::default();
        check(unsafe { ffi::sc_l2_stats_id(self.h, stage_id, &mut st) }, "sc_l2_stats_id")?;
        Ok(st)
    }

    /// Remove every L2 entry (leased ones' memory waits for their release). Returns the count.
    pub fn clear(&self) -> Result<usize> {
        Ok(check(unsafe { ffi::sc_l2_clear(self.h) }, "sc_l2_clear")? as usize)
    }

    /// Set the L2 budget (0: the whole heap) and evict down to it; Ok(false) when only leased
    /// entries are left above it.
    pub fn shrink_to(&self, bytes: u64) -> Result<bool> {
        loop {
            match unsafe { ffi::sc_l2_shrink_to(self.h, bytes) } {
                rc if rc == -EAGAIN => continue, // bounded work done: go on
                rc if rc == -EBUSY => return Ok(false),
                rc => {
                    check(rc, "sc_l2_shrink_to")?;
                    return Ok(true);
                }
            }
        }
    }

    /// Remove every entry, in every stage, whose payload digest is `d`. Returns the count.
    pub fn invalidate(&self, d: Digest) -> Result<usize> {
        Ok(check(unsafe { ffi::sc_l2_invalidate_digest(self.h, d.c()) }, "sc_l2_invalidate_digest")? as usize)
    }

    /// The memory ranges that hold payload bytes, e.g. for `cudaHostRegister`.
    pub fn extents(&self) -> Result<Vec<Extent>> {
        let n = check(unsafe { ffi::sc_arena_extents(self.h, ptr::null_mut(), 0) }, "sc_arena_extents")? as usize;
        let mut v: Vec<ffi::sc_arena_extent> = Vec::with_capacity(n);
        let got = check(unsafe { ffi::sc_arena_extents(self.h, v.as_mut_ptr(), n as u32) }, "sc_arena_extents")?;
        unsafe { v.set_len((got as usize).min(n)) };
        Ok(v.iter()
            .map(|e| Extent {
                base: e.base as *mut u8,
                bytes: e.bytes,
                page_size: e.page_size,
                file_offset: e.file_offset,
                kind: name_of(ffi::sc_extent_kind_name, e.kind as c_int),
            })
            .collect())
    }

    /// Count an L3 fill of `digest` for `stage_id` and decide whether to promote it.
    pub fn promote_consider(&self, stage_id: u64, digest: Digest, token_count: u64, payload_bytes: u64)
                            -> Result<(bool, PromoteWhy)> {
        let mut why: c_int = -1;
        let rc = check(unsafe { ffi::sc_promote_consider(self.h, stage_id, digest.c(), token_count, payload_bytes,
                                                         &mut why) }, "sc_promote_consider")?;
        Ok((rc == 1, PromoteWhy::from_c(why).ok_or(Error::Argument("unknown promotion reason"))?))
    }

    /// Mark the observation terminal (`Stage::promote_admit` does it for you). False when there
    /// is no observation.
    pub fn promote_attempted(&self, stage_id: u64, digest: Digest) -> Result<bool> {
        let rc = unsafe { ffi::sc_promote_attempted(self.h, stage_id, digest.c()) };
        if rc == -ENOENT {
            return Ok(false);
        }
        check(rc, "sc_promote_attempted")?;
        Ok(true)
    }

    /// The promotion table's counters.
    /// Why lookups and restores of stage `stage_id` (0: every stage) missed.
    pub fn miss_stats(&self, stage_id: u64) -> Result<MissStats> {
        let mut st = MissStats::default();
        check(unsafe { ffi::sc_miss_stats(self.h, stage_id, &mut st) }, "sc_miss_stats")?;
        Ok(st)
    }

    pub fn promote_stats(&self) -> Result<PromoteStats> {
        let mut st = PromoteStats::default();
        check(unsafe { ffi::sc_promote_stats(self.h, &mut st) }, "sc_promote_stats")?;
        Ok(st)
    }

    /// Claim a commit ring for this producer.
    pub fn ring(&self) -> Result<Ring<'_>> {
        let mut h = ptr::null_mut();
        check(unsafe { ffi::sc_ring_open(self.h, &mut h) }, "sc_ring_open")?;
        Ok(Ring { h, arena: self })
    }

    /// Deliver up to `max` pending commits to `f` (return false from it to stop after that one).
    /// Takes the exclusive consumer role on the first call (another live consumer: EBUSY).
    pub fn poll<F: FnMut(&Commit<'_>) -> bool>(&self, max: u32, mut f: F) -> Result<usize> {
        unsafe extern "C" fn trampoline<F: FnMut(&Commit<'_>) -> bool>(c: *const ffi::sc_commit,
                                                                      ctx: *mut c_void) -> c_int {
            let f = &mut *(ctx as *mut F);
            let c = &*c;
            let tokens = if c.token_count == 0 || c.tokens.is_null() {
                &[][..]
            } else {
                std::slice::from_raw_parts(c.tokens, c.token_count as usize)
            };
            let commit = Commit {
                request_id: c.request_id,
                session_id: c.session_id,
                generated_token_count: c.generated_token_count,
                flags: c.flags,
                tokens,
                ring: c.ring,
                gen: c.gen,
                seq: c.seq,
            };
            // a panic must not unwind into C: stop the poll and resume it afterwards
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&commit))) {
                Ok(true) => 0,
                _ => 1,
            }
        }
        let n = check(unsafe { ffi::sc_ring_poll(self.h, trampoline::<F>, &mut f as *mut F as *mut c_void, max) },
                      "sc_ring_poll")?;
        Ok(n as usize)
    }

    /// Give the consumer role up.
    pub fn consumer_close(&self) {
        unsafe { ffi::sc_ring_consumer_close(self.h) }
    }

    /// A snapshot of every commit ring.
    pub fn ring_stats(&self) -> Result<Vec<RingStat>> {
        let n = check(unsafe { ffi::sc_ring_stats(self.h, ptr::null_mut(), 0) }, "sc_ring_stats")? as usize;
        let mut v = vec![RingStat::default(); n];
        let got = check(unsafe { ffi::sc_ring_stats(self.h, v.as_mut_ptr(), n as u32) }, "sc_ring_stats")?;
        v.truncate((got as usize).min(n));
        Ok(v)
    }

    /// Every attachment and what it holds (leases, reservations), live or dead.
    pub fn holders(&self) -> Result<Vec<Holder>> {
        let n = check(unsafe { ffi::sc_arena_holders(self.h, ptr::null_mut(), 0) }, "sc_arena_holders")? as usize;
        let mut v = vec![Holder::default(); n];
        let got = check(unsafe { ffi::sc_arena_holders(self.h, v.as_mut_ptr(), n as u32) }, "sc_arena_holders")?;
        v.truncate((got as usize).min(n));
        Ok(v)
    }

    /// Attached processes (this one included), and the measured backing, e.g. "hugetlbfs-2M".
    pub fn attached_and_backing(&self) -> Result<(u32, &'static str)> {
        let mut info = MaybeUninit::<ffi::sc_arena_info>::zeroed();
        check(unsafe { ffi::sc_arena_info(self.h, info.as_mut_ptr()) }, "sc_arena_info")?;
        let info = unsafe { info.assume_init() };
        Ok((info.attached_count, name_of(ffi::sc_backing_name, info.backing)))
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        unsafe { ffi::sc_arena_close(self.h) }
    }
}

impl fmt::Debug for Arena {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Arena({:?})", self.name)
    }
}

// ---- stage ----

/// A stage view (model identity, state identity) of an arena; borrows it.
pub struct Stage<'a> {
    h: *mut ffi::sc_stage,
    arena: &'a Arena,
}

fn tokens_len(tokens: &[i32]) -> Result<u32> {
    if tokens.len() > u32::MAX as usize {
        return Err(Error::Argument("too many tokens"));
    }
    Ok(tokens.len() as u32)
}

impl<'a> Stage<'a> {
    /// The stage id used by probes and stats.
    pub fn id(&self) -> u64 {
        unsafe { ffi::sc_stage_id(self.h) }
    }

    /// The arena it belongs to.
    pub fn arena(&self) -> &'a Arena {
        self.arena
    }

    /// The L2 key of (ns, tokens).
    pub fn key(&self, ns: &str, tokens: &[i32]) -> Result<Key> {
        let ns = cstr(ns)?;
        let mut k = ffi::sc_key::default();
        check(unsafe { ffi::sc_l2_key(self.h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?, &mut k) },
              "sc_l2_key")?;
        Ok(Key { lo: k.lo, hi: k.hi })
    }

    /// Copy a payload into L2 under the key of (ns, tokens), checked against `expected`.
    pub fn admit(&self, ns: &str, tokens: &[i32], expected: Digest, payload: &Payload<'_>, origin: Origin)
                 -> Result<()> {
        let ns = cstr(ns)?;
        let p = payload.c();
        check(unsafe { ffi::sc_l2_admit(self.h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?, expected.c(), &p,
                                        origin as u32) }, "sc_l2_admit")?;
        Ok(())
    }

    /// Admit a full-state payload (digest computed here). Returns the digest.
    pub fn admit_bytes(&self, ns: &str, tokens: &[i32], bytes: &[u8]) -> Result<Digest> {
        let d = Digest::of(bytes);
        self.admit(ns, tokens, d, &Payload::full_state(bytes), Origin::Direct)?;
        Ok(d)
    }

    /// `admit` with the prefix's compute cost (ns to compute it; 0: the stage's per-token cost),
    /// so that L2 keeps what saves the most compute per byte.
    pub fn admit_with_cost(&self, ns: &str, tokens: &[i32], expected: Digest, payload: &Payload<'_>, origin: Origin,
                           cost_ns: u64) -> Result<()> {
        let ns = cstr(ns)?;
        let p = payload.c();
        check(unsafe { ffi::sc_l2_admit_cost(self.h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?, expected.c(),
                                             &p, origin as u32, cost_ns) }, "sc_l2_admit_cost")?;
        Ok(())
    }

    /// Declare what computing one token of this stage costs (ns): admissions without a cost of
    /// their own are charged token count x this.
    pub fn set_token_cost(&self, ns_per_token: u64) -> Result<()> {
        let rc = unsafe { ffi::sc_stage_set_token_cost(self.h, ns_per_token) };
        if rc == -28 {
            return Ok(()); // ENOSPC: no record in the arena; this handle still charges it
        }
        check(rc, "sc_stage_set_token_cost")?;
        Ok(())
    }

    /// The per-token cost declared for this stage (0: none).
    pub fn token_cost(&self) -> Result<u64> {
        let mut v = 0u64;
        check(unsafe { ffi::sc_stage_token_cost(self.h, &mut v) }, "sc_stage_token_cost")?;
        Ok(v)
    }

    /// The compute cost the entry of (ns, tokens) was admitted with (None when not cached).
    pub fn cost_of(&self, ns: &str, tokens: &[i32]) -> Result<Option<u64>> {
        let ns = cstr(ns)?;
        let mut info = MaybeUninit::<ffi::sc_l2_entry_info>::zeroed();
        let rc = unsafe { ffi::sc_l2_peek(self.h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?,
                                          info.as_mut_ptr()) };
        if rc == -ENOENT {
            return Ok(None);
        }
        check(rc, "sc_l2_peek")?;
        Ok(Some(unsafe { info.assume_init() }.cost_ns))
    }

    /// Why this stage's lookups and restores missed.
    pub fn miss_stats(&self) -> Result<MissStats> {
        self.arena.miss_stats(self.id())
    }

    /// Admit an L3 fill the policy said yes to, and record the attempt, in one call.
    pub fn promote_admit(&self, ns: &str, tokens: &[i32], expected: Digest, payload: &Payload<'_>) -> Result<()> {
        let ns = cstr(ns)?;
        let p = payload.c();
        check(unsafe { ffi::sc_promote_admit(self.h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?, expected.c(),
                                             &p) }, "sc_promote_admit")?;
        Ok(())
    }

    /// Look (ns, tokens) up: a lease on a hit, None on a miss. With a location, an entry that
    /// disagrees with it (token count, digest) is removed and the lookup is a miss.
    pub fn get(&self, ns: &str, tokens: &[i32], location: Option<Location>) -> Result<Option<Lease<'_>>> {
        let ns = cstr(ns)?;
        let loc = match location {
            Some(l) => {
                if l.token_count > u64::from(u32::MAX) {
                    return Err(Error::Argument("location token count above u32::MAX"));
                }
                // SAFETY: sc_location is plain data; all zeroes is a valid (empty) location
                let mut c: ffi::sc_location = unsafe { std::mem::zeroed() };
                c.token_count = l.token_count as u32;
                c.digest = l.digest.c();
                Some(c)
            }
            None => None,
        };
        let mut lease = MaybeUninit::<ffi::sc_lease>::zeroed();
        let rc = unsafe {
            ffi::sc_l2_get(self.h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?,
                           loc.as_ref().map_or(ptr::null(), |l| l as *const ffi::sc_location), lease.as_mut_ptr())
        };
        if rc == -ENOENT {
            return Ok(None);
        }
        check(rc, "sc_l2_get")?;
        let c = unsafe { lease.assume_init() };
        let mut l = Lease { c, gathered: None, _stage: PhantomData };
        if l.c.segments != 0 {
            // a scattered (segmented) entry: its wire is copied out once, sections borrow the copy
            let n = (l.c.sec_len[0] + l.c.sec_len[1]) as usize;
            let mut buf = vec![0u8; n];
            let got = unsafe { ffi::sc_lease_copy(&l.c, buf.as_mut_ptr() as *mut c_void, n as u64) };
            if got < 0 {
                check(got as c_int, "sc_lease_copy")?;
            }
            l.gathered = Some(buf);
        }
        Ok(Some(l))
    }

    /// Whether (ns, tokens) is cached, without touching it: (token_count, wire bytes, origin).
    pub fn peek(&self, ns: &str, tokens: &[i32]) -> Result<Option<(u64, u64, Origin)>> {
        let ns = cstr(ns)?;
        let mut info = MaybeUninit::<ffi::sc_l2_entry_info>::zeroed();
        let rc = unsafe { ffi::sc_l2_peek(self.h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?,
                                          info.as_mut_ptr()) };
        if rc == -ENOENT {
            return Ok(None);
        }
        check(rc, "sc_l2_peek")?;
        let info = unsafe { info.assume_init() };
        let origin = if info.origin == ffi::SC_ORIGIN_FROM_L3 { Origin::FromL3 } else { Origin::Direct };
        Ok(Some((u64::from(info.token_count), info.bytes, origin)))
    }

    /// How much of a prompt is here (sc_lookup): the longest prefix L2 holds for this stage and
    /// the longest `l3` (optional) holds for `ns`. Takes no lease and counts nothing.
    pub fn lookup(&self, ns: &str, tokens: &[i32], l3: Option<&L3>, block: u32) -> Result<Lookup> {
        let ns = cstr(ns)?;
        let mut r = ffi::sc_lookup::default();
        let l3h = l3.map_or(ptr::null_mut(), |l| l.h);
        check(unsafe { ffi::sc_lookup(self.h, l3h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?, block, &mut r) },
              "sc_lookup")?;
        Ok(Lookup {
            tokens: r.tokens,
            l2_tokens: r.l2_tokens,
            l3_tokens: r.l3_tokens,
            l2_digest: if r.l2_tokens > 0 { Some(Digest { lo: r.l2_digest.lo, hi: r.l2_digest.hi }) } else { None },
            l3_digest: if r.l3_tokens > 0 { Some(Digest { lo: r.l3_digest.lo, hi: r.l3_digest.hi }) } else { None },
            l2_bytes: r.l2_bytes,
            l3_bytes: r.l3_bytes,
        })
    }

    /// Remove the entry with `key`; false when there is none.
    pub fn remove(&self, key: Key) -> Result<bool> {
        let rc = unsafe { ffi::sc_l2_remove(self.h, ffi::sc_key { lo: key.lo, hi: key.hi }) };
        if rc == -ENOENT {
            return Ok(false);
        }
        check(rc, "sc_l2_remove")?;
        Ok(true)
    }

    /// `restore` with a deadline or a recompute estimate: Err with `is_recompute()` when
    /// recomputing wins (the deadline passed, the predicted fill would lose, or the fill was
    /// abandoned past the deadline).
    pub fn restore_with(&self, l3: &L3, ns: &str, tokens: &[i32], opts: &RestoreOptions)
                        -> Result<Option<Restore<'_>>> {
        let ns = cstr(ns)?;
        let o = ffi::sc_restore_opts {
            flags: if opts.wait { ffi::SC_RESTORE_WAIT } else { 0 },
            deadline_ns: opts.deadline_ns,
            recompute_ns: opts.recompute_ns,
            ..Default::default()
        };
        let mut r: Box<MaybeUninit<ffi::sc_restore>> = Box::new(MaybeUninit::zeroed());
        let rc = unsafe {
            ffi::sc_restore_with(self.h, l3.h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?, &o, r.as_mut_ptr())
        };
        if rc == -ENOENT {
            return Ok(None);
        }
        check(rc, "sc_restore_with")?;
        let r = unsafe { Box::from_raw(Box::into_raw(r) as *mut ffi::sc_restore) };
        Ok(Some(Restore { c: r, _stage: PhantomData }))
    }

    /// This stage's L2 counters.
    pub fn stats(&self) -> Result<L2Stats> {
        let mut st = L2Stats::default();
        check(unsafe { ffi::sc_l2_stats(self.arena.h, self.h, &mut st) }, "sc_l2_stats")?;
        Ok(st)
    }

    /// The whole restore path: the longest stored prefix of `tokens` in `l3`, served from its L2
    /// mirror or filled from disk (and maybe promoted). None when nothing is stored.
    pub fn restore(&self, l3: &L3, ns: &str, tokens: &[i32], wait: bool) -> Result<Option<Restore<'_>>> {
        let ns = cstr(ns)?;
        let mut r: Box<MaybeUninit<ffi::sc_restore>> = Box::new(MaybeUninit::zeroed());
        let rc = unsafe {
            ffi::sc_restore(self.h, l3.h, ns.as_ptr(), tokens.as_ptr(), tokens_len(tokens)?,
                            if wait { ffi::SC_RESTORE_WAIT } else { 0 }, r.as_mut_ptr())
        };
        if rc == -ENOENT {
            return Ok(None);
        }
        check(rc, "sc_restore")?;
        let r = unsafe { Box::from_raw(Box::into_raw(r) as *mut ffi::sc_restore) };
        Ok(Some(Restore { c: r, _stage: PhantomData }))
    }
}

impl Drop for Stage<'_> {
    fn drop(&mut self) {
        unsafe { ffi::sc_stage_close(self.h) }
    }
}

// ---- leases and restores ----

/// Section `i` of a lease or restore as a slice. Safety: `sec[i]` points at `sec_len[i]` bytes
/// that stay valid for as long as the caller's borrow of the lease or restore.
unsafe fn section_of<'a>(sec: &[*const c_void; 2], sec_len: &[u64; 2], i: usize) -> &'a [u8] {
    assert!(i < 2, "a payload has sections 0 and 1");
    let n = sec_len[i] as usize;
    if n == 0 {
        return &[];
    }
    std::slice::from_raw_parts(sec[i] as *const u8, n)
}

/// A pinned, zero-copy, read-only view of an L2 entry; released on drop. It borrows its stage,
/// so it cannot outlive it, and the sections it lends cannot outlive the lease.
pub struct Lease<'s> {
    c: ffi::sc_lease,
    gathered: Option<Vec<u8>>, // a scattered entry's wire, copied out (arenas with segments)
    _stage: PhantomData<&'s Stage<'s>>,
}

impl<'s> Lease<'s> {
    /// Section 0 or 1 (empty when absent). Zero-copy, except for an entry stored scattered over
    /// shared segments (an arena created with segment_bytes), whose wire was copied out once.
    pub fn section(&self, i: usize) -> &[u8] {
        if let Some(g) = &self.gathered {
            assert!(i < 2, "a payload has sections 0 and 1");
            let (at, n) = (if i == 0 { 0 } else { self.c.sec_len[0] as usize }, self.c.sec_len[i] as usize);
            return &g[at..at + n];
        }
        unsafe { section_of(&self.c.sec, &self.c.sec_len, i) }
    }
    /// Is the entry scattered over shared segments (sections are then a private copy)?
    pub fn scattered(&self) -> bool {
        self.c.segments != 0
    }
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_c(self.c.kind)
    }
    pub fn origin(&self) -> Origin {
        if self.c.origin == ffi::SC_ORIGIN_FROM_L3 { Origin::FromL3 } else { Origin::Direct }
    }
    pub fn token_count(&self) -> u64 {
        u64::from(self.c.token_count)
    }
    pub fn digest(&self) -> Digest {
        Digest { lo: self.c.digest.lo, hi: self.c.digest.hi }
    }
    pub fn key(&self) -> Key {
        Key { lo: self.c.key.lo, hi: self.c.key.hi }
    }
    pub fn kv_desc(&self) -> Option<&KvDesc> {
        if self.c.has_kv_desc != 0 { Some(&self.c.kv_desc) } else { None }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        unsafe { ffi::sc_lease_release(&mut self.c) }
    }
}

/// Which tier served a restore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    L2,
    L3,
}

/// A restored prefix and its bytes, until dropped. Borrows its stage.
pub struct Restore<'s> {
    c: Box<ffi::sc_restore>,
    _stage: PhantomData<&'s Stage<'s>>,
}

impl<'s> Restore<'s> {
    /// Section 0 or 1 (empty when absent).
    pub fn section(&self, i: usize) -> &[u8] {
        unsafe { section_of(&self.c.sec, &self.c.sec_len, i) }
    }
    pub fn token_count(&self) -> u32 {
        self.c.token_count
    }
    pub fn digest(&self) -> Digest {
        Digest { lo: self.c.digest.lo, hi: self.c.digest.hi }
    }
    pub fn source(&self) -> Source {
        if self.c.source == 1 { Source::L2 } else { Source::L3 }
    }
    pub fn promoted(&self) -> bool {
        self.c.promoted != 0
    }
    /// The policy's reason (None when served from L2).
    pub fn promote_why(&self) -> Option<PromoteWhy> {
        PromoteWhy::from_c(self.c.promote_why)
    }
    /// The sections lie in the arena (see `Arena::extents`); false: private memory.
    pub fn in_arena(&self) -> bool {
        self.c.in_arena != 0
    }
    pub fn kv_desc(&self) -> Option<&KvDesc> {
        if self.c.has_kv_desc != 0 { Some(&self.c.kv_desc) } else { None }
    }
    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.c.total_ns)
    }
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        unsafe { ffi::sc_restore_release(&mut *self.c) }
    }
}

// ---- L3 ----

/// One put of `L3::put_many`: the arguments of `L3::put_with_cost`.
pub struct L3Put<'p> {
    pub ns: &'p str,
    pub tokens: &'p [i32],
    pub payload: Payload<'p>,
    /// The prefix's compute cost, ns (0: unknown).
    pub cost_ns: u64,
}

impl<'p> L3Put<'p> {
    /// A put that records no cost.
    pub fn new(ns: &'p str, tokens: &'p [i32], payload: Payload<'p>) -> L3Put<'p> {
        L3Put { ns, tokens, payload, cost_ns: 0 }
    }
}

/// What one put hands to C: the parts its `sc_l3_put_args` points into.
struct PutParts<'a> {
    ns: CString,
    tokens: &'a [i32],
    token_count: u32,
    payload: ffi::sc_payload,
}

impl<'a> PutParts<'a> {
    fn new(ns: &str, tokens: &'a [i32], payload: &Payload<'a>) -> Result<PutParts<'a>> {
        Ok(PutParts { ns: cstr(ns)?, tokens, token_count: tokens_len(tokens)?, payload: payload.c() })
    }

    /// The arguments, valid while `self` is neither moved nor dropped.
    fn args(&self) -> ffi::sc_l3_put_args {
        ffi::sc_l3_put_args {
            model_identity: ptr::null(),
            state_identity: ptr::null(),
            ns: self.ns.as_ptr(),
            tokens: self.tokens.as_ptr(),
            token_count: self.token_count,
            payload: &self.payload,
        }
    }
}

/// What a put returns of its location: (token count, digest).
fn placed(loc: &ffi::sc_location) -> (u32, Digest) {
    (loc.token_count, Digest { lo: loc.digest.lo, hi: loc.digest.hi })
}

/// Options of an L3 directory (zero: the library's default).
#[derive(Clone, Debug, Default)]
pub struct L3Options {
    pub budget_bytes: u64,
    pub min_free_bytes: u64,
    pub queue_depth: u32,
    pub file_mode: u32,
    /// Skip start-up reconciliation (read-only tools).
    pub no_reconcile: bool,
}

/// The durable on-disk store. `Send + Sync`: the library lets threads share a handle (each
/// thread gets its own io_uring on first use, shared state is under the handle's mutex).
pub struct L3 {
    h: *mut ffi::sc_l3,
}

unsafe impl Send for L3 {}
unsafe impl Sync for L3 {}

impl L3 {
    /// Open (creating if needed) the L3 directory `dir`.
    pub fn open(dir: &str, opts: &L3Options) -> Result<L3> {
        layouts_ok()?;
        let d = cstr(dir)?;
        let o = ffi::sc_l3_opts {
            budget_bytes: opts.budget_bytes,
            min_free_bytes: opts.min_free_bytes,
            queue_depth: opts.queue_depth,
            o_direct: 0,
            file_mode: opts.file_mode,
            flags: if opts.no_reconcile { ffi::SC_L3_OPEN_NO_RECONCILE } else { 0 },
            host_id: ptr::null(),
            state_dir: ptr::null(),
            visibility_ms: 0,
            fd_cache: 0,
            gid: 0,
            _reserved: [0; 2],
        };
        let mut h = ptr::null_mut();
        check(unsafe { ffi::sc_l3_open(d.as_ptr(), &o, &mut h) }, "sc_l3_open")?;
        Ok(L3 { h })
    }

    /// Write a payload through to disk and index its prefix; returns (token count, digest).
    pub fn put(&self, ns: &str, tokens: &[i32], payload: &Payload<'_>) -> Result<(u32, Digest)> {
        self.put_with_cost(ns, tokens, payload, 0)
    }

    /// `put` recording the prefix's compute cost (ns; restores carry it into L2; 0: unknown).
    pub fn put_with_cost(&self, ns: &str, tokens: &[i32], payload: &Payload<'_>, cost_ns: u64)
                         -> Result<(u32, Digest)> {
        let put = PutParts::new(ns, tokens, payload)?;
        let mut loc = MaybeUninit::<ffi::sc_location>::zeroed();
        check(unsafe { ffi::sc_l3_put_cost(self.h, &put.args(), cost_ns, loc.as_mut_ptr()) }, "sc_l3_put_cost")?;
        Ok(placed(unsafe { &loc.assume_init() }))
    }

    /// Several puts made durable together (group commit: two fsync latencies shared by the batch
    /// instead of four per put); (token count, digest) per put, in order. No puts: an empty Vec,
    /// without calling the library.
    ///
    /// More than `L3_PUT_MANY_MAX` (64) puts go in batches of that many, in order. Every put's
    /// arguments are converted first (an `Error::Argument` writes nothing); the library checks a
    /// batch whole before writing any of it (one invalid put: the batch is refused with EINVAL,
    /// nothing of it written, nothing stored before lost). When a put is not acknowledged, the
    /// batches after its own are not tried and the answer is `Error::PutMany`, whose `results`
    /// name the puts acknowledged (durable). Blocks on disk I/O.
    pub fn put_many(&self, puts: &[L3Put<'_>]) -> Result<Vec<(u32, Digest)>> {
        let parts = puts.iter().map(|p| PutParts::new(p.ns, p.tokens, &p.payload)).collect::<Result<Vec<_>>>()?;
        let mut done: Vec<Result<(u32, Digest)>> = Vec::with_capacity(puts.len());
        for (batch, puts_of) in parts.chunks(L3_PUT_MANY_MAX).zip(puts.chunks(L3_PUT_MANY_MAX)) {
            let args: Vec<ffi::sc_l3_put_args> = batch.iter().map(PutParts::args).collect();
            let costs: Vec<u64> = puts_of.iter().map(|p| p.cost_ns).collect();
            let mut locs = vec![unsafe { MaybeUninit::<ffi::sc_location>::zeroed().assume_init() }; batch.len()];
            let mut rcs: Vec<c_int> = vec![0; batch.len()];
            let rc = unsafe {
                ffi::sc_l3_put_many(self.h, args.as_ptr(), costs.as_ptr(), batch.len() as c_uint, locs.as_mut_ptr(),
                                    rcs.as_mut_ptr())
            };
            done.extend(rcs.iter().zip(&locs).map(|(&r, loc)| match r {
                0 => Ok(placed(loc)),
                _ => Err(Error::Call { call: "sc_l3_put_many", errno: -r }),
            }));
            if rc < 0 {
                let index = done.iter().position(|r| r.is_err()).unwrap_or(done.len() - batch.len());
                let errno = done[index].as_ref().err().and_then(Error::errno).unwrap_or(-rc);
                let mut results: Vec<_> = done.into_iter().map(Some).collect();
                results.resize(puts.len(), None);
                return Err(Error::PutMany { index, errno, results });
            }
        }
        done.into_iter().collect()
    }

    /// The predicted time of a fill of `bytes` on this thread's ring, ns (None: nothing measured).
    pub fn fill_estimate(&self, bytes: u64) -> Result<Option<u64>> {
        let mut ns = 0u64;
        let rc = unsafe { ffi::sc_l3_fill_estimate(self.h, bytes, &mut ns) };
        if rc == -ENODATA {
            return Ok(None);
        }
        check(rc, "sc_l3_fill_estimate")?;
        Ok(Some(ns))
    }

    /// The longest stored prefix of `tokens`: its location, or None.
    pub fn locate_longest(&self, ns: &str, tokens: &[i32]) -> Result<Option<Location>> {
        let ns = cstr(ns)?;
        let mut loc = MaybeUninit::<ffi::sc_location>::zeroed();
        let rc = check(unsafe { ffi::sc_l3_locate_longest(self.h, ns.as_ptr(), tokens.as_ptr(),
                                                          tokens_len(tokens)? as u32, loc.as_mut_ptr()) },
                       "sc_l3_locate_longest")?;
        if rc == 0 {
            return Ok(None);
        }
        let loc = unsafe { loc.assume_init() };
        Ok(Some(Location { token_count: u64::from(loc.token_count), digest: Digest { lo: loc.digest.lo,
                                                                                    hi: loc.digest.hi } }))
    }

    /// The directory's shared counters.
    pub fn stats(&self) -> Result<L3Stats> {
        let mut st = L3Stats::default();
        check(unsafe { ffi::sc_l3_stats(self.h, &mut st) }, "sc_l3_stats")?;
        Ok(st)
    }
}

impl Drop for L3 {
    fn drop(&mut self) {
        unsafe { ffi::sc_l3_close(self.h) }
    }
}

// ---- rings and the batcher ----

/// A commit ring claimed by this producer; borrows its arena.
pub struct Ring<'a> {
    h: *mut ffi::sc_ring,
    arena: &'a Arena,
}

/// One commit as the consumer sees it; `tokens` points into the ring, valid during the callback.
#[derive(Debug)]
pub struct Commit<'c> {
    pub request_id: u64,
    pub session_id: u64,
    pub generated_token_count: u64,
    pub flags: u32,
    pub tokens: &'c [i32],
    pub ring: u32,
    pub gen: u32,
    pub seq: u64,
}

impl<'a> Ring<'a> {
    /// The ring's index in the arena.
    pub fn index(&self) -> u32 {
        unsafe { ffi::sc_ring_index(self.h) }
    }
    /// The most tokens one commit may carry.
    pub fn max_tokens(&self) -> u32 {
        unsafe { ffi::sc_ring_max_tokens(self.h) }
    }
    /// The arena it belongs to.
    pub fn arena(&self) -> &'a Arena {
        self.arena
    }
    /// Append one commit; Ok(false) when the ring is full (nothing written).
    pub fn submit(&self, request_id: u64, session_id: u64, generated_token_count: u64, tokens: &[i32], flags: u32)
                  -> Result<bool> {
        let c = ffi::sc_commit {
            request_id,
            session_id,
            generated_token_count,
            flags,
            token_count: tokens_len(tokens)? as u32,
            tokens: tokens.as_ptr(),
            ring: 0,
            gen: 0,
            seq: 0,
        };
        let rc = unsafe { ffi::sc_ring_try_submit(self.h, &c) };
        if rc == -EAGAIN {
            return Ok(false);
        }
        check(rc, "sc_ring_try_submit")?;
        Ok(true)
    }
}

impl Drop for Ring<'_> {
    fn drop(&mut self) {
        unsafe { ffi::sc_ring_close(self.h) };
    }
}

/// What a commit did with its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Committed {
    /// Taken, and whatever was due was emitted.
    Emitted,
    /// Taken; the batch it made due waits for room in the ring (a later call sends it).
    Deferred,
    /// Not taken: the batcher is full and the ring still is. Commit the same token again.
    Refused,
}

/// The per-request commit batcher: first token at once, then at most every interval or every
/// `capacity` tokens, a flush before the end — the cadence of the seed's batcher. Borrows its
/// ring. Dropping it flushes what is pending (the seed's safety net for early returns); a normal
/// generation calls `finish`.
pub struct Batcher<'r> {
    b: Box<ffi::sc_batcher>,
    _ring: PhantomData<&'r Ring<'r>>,
}

/// Batcher options: `interval: Some(Duration::ZERO)` emits every token at once.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatcherOptions {
    pub interval: Option<Duration>,
    pub capacity: u32,
}

impl<'r> Batcher<'r> {
    /// A batcher for one request, with the default cadence (100 ms, 256 tokens).
    pub fn new(ring: &'r Ring<'_>, request_id: u64, session_id: u64) -> Result<Batcher<'r>> {
        Self::with_options(Some(ring), request_id, session_id, BatcherOptions::default())
    }

    /// A batcher with no ring: it keeps and counts nothing.
    pub fn detached(request_id: u64, session_id: u64) -> Result<Batcher<'static>> {
        Batcher::with_options(None, request_id, session_id, BatcherOptions::default())
    }

    /// A batcher with options (ring None: keeps nothing).
    pub fn with_options(ring: Option<&'r Ring<'_>>, request_id: u64, session_id: u64, opts: BatcherOptions)
                        -> Result<Batcher<'r>> {
        layouts_ok()?;
        let mut o = ffi::sc_batcher_opts { capacity: opts.capacity, ..Default::default() };
        if let Some(i) = opts.interval {
            o.interval_ns = u64::try_from(i.as_nanos()).map_err(|_| Error::Argument("interval too long"))?;
            o.flags |= ffi::SC_BATCHER_OPT_INTERVAL;
        }
        let mut b = Box::new(ffi::sc_batcher { _opaque: [0; ffi::SC_BATCHER_U64] });
        check(unsafe { ffi::sc_batcher_init_opts(&mut *b, ring.map_or(ptr::null_mut(), |r| r.h), request_id,
                                                 session_id, &o) }, "sc_batcher_init_opts")?;
        Ok(Batcher { b, _ring: PhantomData })
    }

    /// Record one generated token; `elapsed` is the time since the request started.
    pub fn commit(&mut self, token: i32, elapsed: Duration) -> Result<Committed> {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        match unsafe { ffi::sc_batcher_commit(&mut *self.b, token, ns) } {
            0 => Ok(Committed::Emitted),
            ffi::SC_BATCHER_DEFERRED => Ok(Committed::Deferred),
            rc if rc == -EAGAIN => Ok(Committed::Refused),
            rc => check(rc, "sc_batcher_commit").map(|_| Committed::Emitted),
        }
    }

    /// Emit whatever is pending; Ok(false) when the ring is full (it stays pending).
    pub fn flush(&mut self) -> Result<bool> {
        let rc = unsafe { ffi::sc_batcher_flush(&mut *self.b) };
        if rc == -EAGAIN {
            return Ok(false);
        }
        check(rc, "sc_batcher_flush")?;
        Ok(true)
    }

    /// The generation's terminal commit; Ok(false) when the ring is full (call again).
    pub fn finish(&mut self, aborted: bool) -> Result<bool> {
        let flag = if aborted { ffi::SC_COMMIT_ABORTED } else { ffi::SC_COMMIT_FINISHED };
        let rc = unsafe { ffi::sc_batcher_finish(&mut *self.b, flag) };
        if rc == -EAGAIN {
            return Ok(false);
        }
        check(rc, "sc_batcher_finish")?;
        Ok(true)
    }

    /// Tokens recorded so far, pending ones included (0 without a ring).
    pub fn generated_token_count(&self) -> u64 {
        unsafe { ffi::sc_batcher_count(&*self.b) }
    }
    /// Tokens recorded and not yet emitted.
    pub fn pending(&self) -> u32 {
        unsafe { ffi::sc_batcher_pending(&*self.b) }
    }
    /// Emits that found the ring full.
    pub fn ring_full(&self) -> u64 {
        unsafe { ffi::sc_batcher_ring_full(&*self.b) }
    }
    /// Commits emitted.
    pub fn commits(&self) -> u64 {
        unsafe { ffi::sc_batcher_commits(&*self.b) }
    }
}

impl Drop for Batcher<'_> {
    fn drop(&mut self) {
        // the seed's safety net: a residual batch is flushed on any exit path (a full ring
        // cannot be waited for here: what does not fit stays unsent, as the ring-full counter says)
        unsafe { ffi::sc_batcher_flush(&mut *self.b) };
    }
}
