//! L3::put_many: puts made durable together (group commit), each acknowledged with its own
//! result; an invalid put refuses its batch whole; more than L3_PUT_MANY_MAX go in batches.
mod common;

use stagecache::{Digest, Error, L3Options, L3Put, Payload, Source, L3, L3_PUT_MANY_MAX};

const EINVAL: i32 = 22;
const E2BIG: i32 = 7;

/// A fresh L3 directory, removed on drop.
struct TestL3 {
    l3: Option<L3>,
    dir: String,
}

impl TestL3 {
    fn new(tag: &str, opts: &L3Options) -> TestL3 {
        let dir = format!("/var/tmp/sc-rs-{}-{}", tag, common::name("d"));
        TestL3 { l3: Some(L3::open(&dir, opts).unwrap()), dir }
    }
    fn l3(&self) -> &L3 {
        self.l3.as_ref().unwrap()
    }
}

impl Drop for TestL3 {
    fn drop(&mut self) {
        drop(self.l3.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn bytes(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32).map(|i| (i.wrapping_mul(31).wrapping_add(seed)) as u8).collect()
}

#[test]
fn put_many_acknowledges_each_put_and_restores_its_bytes_and_cost() {
    let t = common::TestArena::new("pm");
    let s = TestL3::new("pm", &L3Options::default());
    let stage = t.arena().stage("m", "s").unwrap();
    let tokens: Vec<i32> = (1000..1400).collect();
    let data = [bytes(3000, 1), bytes(70_000, 2), bytes(4096, 3), bytes(9000, 4)];
    let (lens, costs, nss) = ([50, 120, 80, 300], [0u64, 5_000_000, 7_000_000, 123_456_789], ["ns", "ns", "other", "ns"]);
    let puts: Vec<L3Put> = (0..4)
        .map(|i| L3Put {
            ns: nss[i],
            tokens: &tokens[..lens[i]],
            payload: Payload::full_state(&data[i]),
            cost_ns: costs[i],
        })
        .collect();
    let got = s.l3().put_many(&puts).unwrap();
    let want: Vec<(u32, Digest)> = (0..4).map(|i| (lens[i] as u32, Digest::of(&data[i]))).collect();
    assert_eq!(got, want);
    assert_eq!(s.l3().stats().unwrap().objects, 4);
    for i in 0..4 {
        let t = &tokens[..lens[i]];
        let loc = s.l3().locate_longest(nss[i], t).unwrap().unwrap();
        assert_eq!((loc.token_count, loc.digest), (lens[i] as u64, Digest::of(&data[i])));
        {
            let r = stage.restore(s.l3(), nss[i], t, false).unwrap().unwrap();
            assert_eq!(r.source(), Source::L3);
            assert_eq!(r.section(0), &data[i][..]);
        }
        // the second fill promotes, carrying the cost the object records into L2
        assert!(stage.restore(s.l3(), nss[i], t, false).unwrap().unwrap().promoted(), "put {}", i);
        if costs[i] != 0 {
            assert_eq!(stage.cost_of(nss[i], t).unwrap(), Some(costs[i]), "put {}", i);
        }
    }
}

#[test]
fn put_many_refuses_an_invalid_put_and_writes_nothing() {
    let t = common::TestArena::new("pmi");
    let s = TestL3::new("pmi", &L3Options::default());
    let stage = t.arena().stage("m", "s").unwrap();
    let tokens: Vec<i32> = (1..101).collect();
    let kept = bytes(5000, 9);
    s.l3().put("ns", &tokens[..10], &Payload::full_state(&kept)).unwrap();
    let fresh = bytes(6000, 8);
    let second = [7u8; 16];
    let refused = [
        L3Put::new("ns", &[], Payload::full_state(b"no tokens")),
        L3Put::new("ns", &tokens[..30], Payload::full_state(&[])),
        L3Put::new("ns", &tokens[..30], Payload { sections: [b"a", &second], ..Payload::full_state(b"") }),
    ];
    for bad in refused {
        let e = s.l3().put_many(&[L3Put::new("ns", &tokens[..20], Payload::full_state(&fresh)), bad]).unwrap_err();
        assert_eq!(e.errno(), Some(EINVAL));
        match &e {
            Error::PutMany { index, results, .. } => {
                assert_eq!(*index, 0);
                let einval = Some(Err(Error::Call { call: "sc_l3_put_many", errno: EINVAL }));
                assert_eq!(results, &vec![einval.clone(), einval]);
            }
            other => panic!("{:?}", other),
        }
        assert!(e.to_string().starts_with("sc_l3_put_many: put 0 of 2: "), "{}", e);
        assert_eq!(s.l3().locate_longest("ns", &tokens[..20]).unwrap().unwrap().token_count, 10);
    }
    // an argument that cannot go to C: nothing written either
    let e = s.l3().put_many(&[L3Put::new("ns", &tokens[..20], Payload::full_state(&fresh)),
                               L3Put::new("n\0s", &tokens[..30], Payload::full_state(&fresh))]).unwrap_err();
    assert_eq!(e, Error::Argument("a string with a NUL byte"));
    // what was stored before is intact
    assert_eq!(s.l3().stats().unwrap().objects, 1);
    assert_eq!(s.l3().locate_longest("ns", &tokens).unwrap().unwrap().token_count, 10);
    let r = stage.restore(s.l3(), "ns", &tokens, false).unwrap().unwrap();
    assert_eq!((r.token_count(), r.section(0)), (10, &kept[..]));
}

#[test]
fn put_many_reports_each_put_it_could_not_make() {
    let s = TestL3::new("pmb", &L3Options { budget_bytes: 1 << 20, ..Default::default() });
    let (a, big, c) = (bytes(1000, 1), vec![0u8; 2 << 20], bytes(900, 5));
    let e = s.l3().put_many(&[L3Put::new("ns", &[1], Payload::full_state(&a)),
                               L3Put::new("ns", &[1, 2], Payload::full_state(&big)),
                               L3Put::new("ns", &[1, 2, 3], Payload::full_state(&c))]).unwrap_err();
    assert_eq!(e.errno(), Some(E2BIG)); // larger than the budget
    assert!(e.to_string().ends_with("; 1 failed, 2 acknowledged, 0 not tried"), "{}", e);
    let (index, results) = match e {
        Error::PutMany { index, results, .. } => (index, results),
        other => panic!("{:?}", other),
    };
    assert_eq!(index, 1);
    assert_eq!(results, vec![Some(Ok((1, Digest::of(&a)))),
                             Some(Err(Error::Call { call: "sc_l3_put_many", errno: E2BIG })),
                             Some(Ok((3, Digest::of(&c))))]);
    assert_eq!(s.l3().locate_longest("ns", &[1, 2]).unwrap().unwrap().token_count, 1);
    assert_eq!(s.l3().locate_longest("ns", &[1, 2, 3]).unwrap().unwrap().digest, Digest::of(&c));
}

#[test]
fn put_many_of_more_than_64_puts_goes_in_batches() {
    assert_eq!(L3_PUT_MANY_MAX, 64);
    let s = TestL3::new("pmn", &L3Options::default());
    assert_eq!(s.l3().put_many(&[]).unwrap(), vec![]);
    assert_eq!(s.l3().stats().unwrap().puts, 0);
    let toks: Vec<[i32; 2]> = (0..150).map(|i| [7, i]).collect();
    let data: Vec<Vec<u8>> = (0..150).map(|i| bytes(100 + i, i as u32)).collect();
    let puts: Vec<L3Put> = (0..150).map(|i| L3Put::new("ns", &toks[i], Payload::full_state(&data[i]))).collect();
    let got = s.l3().put_many(&puts).unwrap();
    assert_eq!(got.len(), 150);
    for i in [0, 63, 64, 127, 128, 149] {
        assert_eq!(got[i], (2, Digest::of(&data[i])));
        let loc = s.l3().locate_longest("ns", &toks[i]).unwrap().unwrap();
        assert_eq!((loc.token_count, loc.digest), (2, Digest::of(&data[i])));
    }
    assert_eq!(s.l3().stats().unwrap().objects, 150);
    // an invalid put in the second batch: the first batch is acknowledged, its own is refused
    // whole, the third is not tried
    let toks: Vec<[i32; 2]> = (0..140).map(|i| [8, i]).collect();
    let data: Vec<Vec<u8>> = (0..140).map(|i| bytes(100 + i, i as u32 + 3)).collect();
    let mut puts: Vec<L3Put> = (0..140).map(|i| L3Put::new("ns", &toks[i], Payload::full_state(&data[i]))).collect();
    puts[70].tokens = &[];
    let e = s.l3().put_many(&puts).unwrap_err();
    assert!(e.to_string().starts_with("sc_l3_put_many: put 64 of 140: "), "{}", e);
    assert!(e.to_string().ends_with("; 64 failed, 64 acknowledged, 12 not tried"), "{}", e);
    let (index, errno, results) = match e {
        Error::PutMany { index, errno, results } => (index, errno, results),
        other => panic!("{:?}", other),
    };
    assert_eq!((index, errno, results.len()), (64, EINVAL, 140));
    assert!(results[..64].iter().all(|r| matches!(r, Some(Ok((2, _))))));
    assert!(results[64..128].iter().all(|r| matches!(r, Some(Err(e)) if e.errno() == Some(EINVAL))));
    assert!(results[128..].iter().all(Option::is_none));
    assert!(s.l3().locate_longest("ns", &toks[63]).unwrap().is_some());
    assert!(s.l3().locate_longest("ns", &toks[64]).unwrap().is_none());
    assert!(s.l3().locate_longest("ns", &toks[139]).unwrap().is_none());
}
