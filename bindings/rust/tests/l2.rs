//! The seed's L2 tests (skippy-server's stage_l2.rs), ported: a stage-scoped view of the host-RAM
//! tier, lookups validated against the durable location, the promotion policy for L3 fills.
//! The seed's StageL2 is an arena with a 1 MiB budget and a stage; its string digests are digests
//! of those strings. Then what the crate adds: layouts, leases, restore, errors, threads.
mod common;

use stagecache::{
    Arena, ArenaOptions, Digest, Error, Huge, Kind, L3Options, Location, Origin, Owner, Payload, PromoteWhy, Source, L3,
};

const PROMOTION_MAX_BYTES: u64 = 64 * 1024 * 1024;
const RESTORE_WORTH_TOKENS: u64 = 4_096;

struct StageL2 {
    t: common::TestArena,
}

impl StageL2 {
    fn new(budget_bytes: u64) -> StageL2 {
        let t = common::TestArena::new("l2");
        assert!(t.arena().shrink_to(budget_bytes).unwrap());
        assert_eq!(t.arena().l2_stats().unwrap().budget_bytes, budget_bytes);
        StageL2 { t }
    }
    fn arena(&self) -> &Arena {
        self.t.arena()
    }
}

fn identity(tokens: Vec<i32>) -> (String, Vec<i32>) {
    ("namespace".to_string(), tokens)
}

fn location(token_count: u64, manifest_key: Digest) -> Location {
    Location { token_count, digest: manifest_key }
}

#[test]
fn second_l3_fill_promotes_and_serves_the_located_prefix() {
    let l2 = StageL2::new(1 << 20);
    let stage = l2.arena().stage("model", "state").unwrap();
    let bytes = vec![7u8; 128];
    let digest = Digest::of(&bytes);
    let payload = Payload::full_state(&bytes);
    let (namespace, token_ids) = identity(vec![1, 2, 3, 4]);
    let location = location(3, digest);
    let consider = |d| l2.arena().promote_consider(stage.id(), d, 3, bytes.len() as u64).unwrap().0;

    assert!(!consider(digest));
    assert!(consider(digest));
    stage.promote_admit(&namespace, &token_ids[..3], digest, &payload).unwrap();
    assert!(!consider(digest));

    // a longer query hits the located L3 prefix mirror
    let hit = stage
        .get(&namespace, &token_ids[..location.token_count as usize], Some(location))
        .unwrap()
        .expect("longer query should hit the located L3 prefix mirror");
    assert_eq!(hit.token_count(), 3);
    assert_eq!(hit.digest(), digest);
    assert_eq!(hit.origin(), Origin::FromL3);
    assert_eq!(hit.section(0), &bytes[..]);
}

#[test]
fn restart_class_prefix_promotes_on_first_fill_but_oversized_payload_does_not() {
    let l2 = StageL2::new(1 << 20);
    let stage = l2.arena().stage("model", "state").unwrap();
    let a = l2.arena();
    let (yes, why) = a.promote_consider(stage.id(), Digest::of(b"restart"), RESTORE_WORTH_TOKENS, 1 << 20).unwrap();
    assert!(yes);
    assert_eq!(why, PromoteWhy::LongPrefix);
    let oversized = Digest::of(b"oversized");
    let (yes, why) = a.promote_consider(stage.id(), oversized, RESTORE_WORTH_TOKENS, PROMOTION_MAX_BYTES + 1).unwrap();
    assert!(!yes);
    assert_eq!(why, PromoteWhy::Oversize);
    let (yes, why) = a.promote_consider(stage.id(), oversized, RESTORE_WORTH_TOKENS, PROMOTION_MAX_BYTES).unwrap();
    assert!(!yes);
    assert_eq!(why, PromoteWhy::Terminal);
}

#[test]
fn a_changed_durable_digest_invalidates_the_mirror() {
    let l2 = StageL2::new(1 << 20);
    let stage = l2.arena().stage("model", "state").unwrap();
    let bytes = vec![7u8; 128];
    let digest = Digest::of(&bytes);
    let payload = Payload::full_state(&bytes);
    let (namespace, token_ids) = identity(vec![1, 2, 3]);
    stage.promote_admit(&namespace, &token_ids, digest, &payload).unwrap();

    let changed = location(3, Digest::of(b"changed"));
    assert!(stage.get(&namespace, &token_ids, Some(changed)).unwrap().is_none());
    assert_eq!(stage.stats().unwrap().entries, 0);
}

// ---- beyond the seed ----

#[test]
fn layouts_match_the_library_and_every_public_field_is_mirrored() {
    stagecache::check_layouts().unwrap();
    let mine = stagecache::layouts();
    for t in stagecache::library_types() {
        let (_, _, _, fields) = mine.iter().find(|(n, _, _, _)| *n == t).unwrap_or_else(|| panic!("no mirror of {}", t));
        for (f, _, _) in stagecache::library_fields(&t) {
            assert!(fields.iter().any(|(n, _, _)| *n == f), "{}.{} is not mirrored", t, f);
        }
    }
}

#[test]
fn leases_are_zero_copy_and_released_on_drop() {
    let t = common::TestArena::new("lease");
    let stage = t.arena().stage("m", "s").unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31) as u8).collect();
    let d = stage.admit_bytes("ns", &[1, 2, 3], &data).unwrap();
    {
        let lease = stage.get("ns", &[1, 2, 3], None).unwrap().unwrap();
        assert_eq!(lease.section(0), &data[..]);
        assert_eq!(lease.section(1), &[] as &[u8]);
        assert_eq!(lease.kind(), Some(Kind::FullState));
        assert_eq!(lease.digest(), d);
        assert_eq!(lease.key(), stage.key("ns", &[1, 2, 3]).unwrap());
        let ext = &t.arena().extents().unwrap()[0];
        let p = lease.section(0).as_ptr() as usize;
        assert!(p >= ext.base as usize && p + data.len() <= ext.base as usize + ext.bytes as usize);
        // a lease held across a clear keeps its bytes
        assert_eq!(t.arena().clear().unwrap(), 1);
        for i in 0..40 {
            stage.admit_bytes("churn", &[i], &vec![i as u8; 200_000]).unwrap();
        }
        assert_eq!(lease.section(0), &data[..]);
        assert_eq!(t.arena().l2_stats().unwrap().leases, 1);
    }
    assert_eq!(t.arena().l2_stats().unwrap().leases, 0);
    assert!(stage.get("ns", &[1, 2, 3], None).unwrap().is_none());
}

#[test]
fn errors_carry_the_errno_and_the_library_message() {
    let e = Arena::open(&common::name("missing")).unwrap_err();
    assert_eq!(e.errno(), Some(2));
    assert!(e.to_string().starts_with("sc_arena_open: "));
    let boxed: Box<dyn std::error::Error> = Box::new(e.clone());
    assert_eq!(boxed.to_string(), e.to_string());
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(Arena::open("bad\0name").unwrap_err(), Error::Argument("a string with a NUL byte"));
    let t = common::TestArena::new("err");
    let stage = t.arena().stage("m", "s").unwrap();
    let err = stage.admit("ns", &[1], Digest::of(b"other"), &Payload::full_state(b"x"), Origin::Direct).unwrap_err();
    assert_eq!(err.errno(), Some(74)); // EBADMSG: not the expected digest
    assert_eq!(Digest::parse("xyz").unwrap_err().errno(), Some(22));
    let d = Digest::of(b"abc");
    assert_eq!(Digest::parse(&d.to_string()).unwrap(), d);
    assert!(t.arena().stage("", "s").is_err());
    let too_big = ArenaOptions { size_bytes: 1 << 20, huge: Huge::Off, ..Default::default() };
    assert_eq!(Arena::create(&common::name("small"), &too_big).unwrap_err().errno(), Some(22));
}

#[test]
fn a_user_holds_at_most_its_slots_and_inspect_needs_none() {
    let over = ArenaOptions { size_bytes: 16 << 20, huge: Huge::Off, reader_slots: 4, slots_per_user: 5, ..Default::default() };
    assert_eq!(Arena::create(&common::name("spu"), &over).unwrap_err().errno(), Some(22)); // above the slots
    let t = common::TestArena::with(
        "spu",
        ArenaOptions { size_bytes: 16 << 20, huge: Huge::Off, reader_slots: 4, slots_per_user: 2, ..Default::default() },
    );
    let second = Arena::open(&t.name).unwrap();
    assert_eq!(Arena::open(&t.name).unwrap_err().errno(), Some(122)); // EDQUOT: this user's third
    let info = Arena::inspect(&t.name, None, Owner::Me).unwrap();
    assert_eq!((info.slots_per_user, info.reader_slots, info.attached_count), (2, 4, 2));
    assert_eq!(Arena::inspect(&common::name("none"), None, Owner::Any).err().and_then(|e| e.errno()), Some(2));
    assert_eq!(Arena::inspect("bad/name", None, Owner::Me).err().and_then(|e| e.errno()), Some(22));
    drop(second);
    assert_eq!(Arena::inspect(&t.name, None, Owner::Me).unwrap().attached_count, 1);
}

#[test]
fn restore_fills_from_l3_then_serves_from_l2() {
    let t = common::TestArena::new("rst");
    let dir = format!("/var/tmp/sc-rs-l3-{}-{}", std::process::id(), common::name("d"));
    let l3 = L3::open(&dir, &L3Options::default()).unwrap();
    let stage = t.arena().stage("m", "s").unwrap();
    let tokens: Vec<i32> = (1..5000).collect();
    let data: Vec<u8> = (0..64_000u32).map(|i| (i * 7) as u8).collect();
    let (n, d) = l3.put("ns", &tokens[..4096], &Payload::full_state(&data)).unwrap();
    assert_eq!((n, d), (4096, Digest::of(&data)));
    assert_eq!(l3.locate_longest("ns", &tokens).unwrap().unwrap().token_count, 4096);
    {
        let r = stage.restore(&l3, "ns", &tokens, false).unwrap().unwrap();
        assert_eq!(r.source(), Source::L3);
        assert!(r.promoted());
        assert_eq!(r.promote_why(), Some(PromoteWhy::LongPrefix));
        assert!(r.in_arena());
        assert_eq!(r.section(0), &data[..]);
    }
    {
        let r = stage.restore(&l3, "ns", &tokens, true).unwrap().unwrap();
        assert_eq!(r.source(), Source::L2);
        assert_eq!(r.promote_why(), None);
        assert_eq!(r.section(0), &data[..]);
    }
    assert!(stage.restore(&l3, "other", &tokens, false).unwrap().is_none());
    assert_eq!(l3.stats().unwrap().fills, 1);
    drop(stage);
    drop(l3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn costs_go_in_and_a_restore_past_its_deadline_answers_recompute() {
    let t = common::TestArena::new("cost");
    let dir = format!("/var/tmp/sc-rs-cost-{}-{}", std::process::id(), common::name("d"));
    let l3 = L3::open(&dir, &L3Options::default()).unwrap();
    let stage = t.arena().stage("m", "s").unwrap();
    let tokens: Vec<i32> = (1..200).collect();
    let data: Vec<u8> = (0..64_000u32).map(|i| (i * 3) as u8).collect();
    l3.put_with_cost("ns", &tokens, &Payload::full_state(&data), 5_000_000).unwrap();
    // a deadline already past: no fill, "recompute"
    let past = stagecache::RestoreOptions { deadline_ns: stagecache::clock_ns() - 1, ..Default::default() };
    let e = stage.restore_with(&l3, "ns", &tokens, &past).err().unwrap();
    assert!(e.is_recompute());
    assert_eq!(l3.stats().unwrap().fill_starts, 0);
    let m = stage.miss_stats().unwrap();
    assert_eq!(m.restore[9], 1, "{}", stagecache::miss_reason_name(9)); // SC_MISS_DEADLINE
    // no deadline: filled, then promoted with the object's cost on the second fill
    drop(stage.restore(&l3, "ns", &tokens, false).unwrap().unwrap());
    drop(stage.restore(&l3, "ns", &tokens, false).unwrap().unwrap());
    assert_eq!(stage.cost_of("ns", &tokens).unwrap(), Some(5_000_000));
    stage.set_token_cost(1_000).unwrap();
    assert_eq!(stage.token_cost().unwrap(), 1_000);
    let small: Vec<u8> = vec![7; 4096];
    stage.admit_with_cost("ns", &[1, 2, 3], Digest::of(&small), &Payload::full_state(&small), Origin::Direct, 0).unwrap();
    assert_eq!(stage.cost_of("ns", &[1, 2, 3]).unwrap(), Some(3_000));
    assert!(l3.fill_estimate(1 << 20).unwrap().is_some());
    drop(stage);
    drop(l3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lookup_answers_for_l2_and_l3_in_one_call() {
    let t = common::TestArena::new("look");
    let dir = format!("/var/tmp/sc-rs-look-{}-{}", std::process::id(), common::name("d"));
    let l3 = L3::open(&dir, &L3Options::default()).unwrap();
    let stage = t.arena().stage("m", "s").unwrap();
    let tokens: Vec<i32> = (1..1001).collect();
    assert_eq!(stage.lookup("ns", &tokens, Some(&l3), 0).unwrap().tokens, 0);
    let data = vec![3u8; 700];
    stage.admit_bytes("ns", &tokens[..512], &data).unwrap();
    l3.put("ns", &tokens[..700], &Payload::full_state(&data[..300])).unwrap();
    let r = stage.lookup("ns", &tokens, Some(&l3), 0).unwrap();
    assert_eq!((r.tokens, r.l2_tokens, r.l3_tokens), (700, 512, 700));
    assert_eq!(r.l2_digest, Some(Digest::of(&data)));
    assert_eq!(r.l3_bytes, 300);
    let r = stage.lookup("ns", &tokens, None, 0).unwrap();
    assert_eq!((r.tokens, r.l3_digest), (512, None));
    assert!(stage.lookup("ns", &[], None, 0).is_err());
    let h = stagecache::block_hashes(&tokens[..40], 16, 0).unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(stagecache::block_hashes(&tokens[16..32], 16, h[0]).unwrap(), vec![h[1]]);
    drop(stage);
    drop(l3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_arena_moves_to_another_thread_and_l3_is_shared() {
    fn is_send<T: Send>() {}
    fn is_sync<T: Sync>() {}
    is_send::<Arena>();
    is_send::<L3>();
    is_sync::<L3>();
    let t = common::TestArena::new("thr");
    let name = t.name.clone();
    let handle = std::thread::spawn(move || {
        let a = Arena::open(&name).unwrap();
        let stage = a.stage("m", "s").unwrap();
        stage.admit_bytes("ns", &[9], b"from a thread").unwrap();
        drop(stage);
        a // handed back to the main thread
    });
    let a = handle.join().unwrap();
    let stage = a.stage("m", "s").unwrap();
    assert_eq!(stage.get("ns", &[9], None).unwrap().unwrap().section(0), b"from a thread");
}

#[test]
fn a_scattered_entry_reads_back_and_is_stored_once() {
    let t = common::TestArena::with(
        "seg",
        ArenaOptions { size_bytes: 64 << 20, huge: Huge::Off, segment_bytes: 1 << 20, ..Default::default() },
    );
    let stage = t.arena().stage("m", "s").unwrap();
    let base: Vec<u8> = (0..6u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8).collect();
    stage.admit_bytes("ns", &[1, 2], &base[..4 << 20]).unwrap();
    stage.admit_bytes("ns", &[1, 2, 3], &base).unwrap();
    {
        let l = stage.get("ns", &[1, 2, 3], None).unwrap().unwrap();
        assert!(l.scattered());
        assert_eq!(l.section(0), &base[..]);
        let a = stage.get("ns", &[1, 2], None).unwrap().unwrap();
        assert!(!a.scattered());
        assert_eq!(a.section(0), &base[..4 << 20]);
    }
    let s = t.arena().l2_stats().unwrap();
    assert_eq!(s.logical_bytes, 10 << 20);
    assert_eq!(s.physical_bytes, 6 << 20);
    assert_eq!(s.saved_bytes, 4 << 20);
}
