//! The seed's batcher tests (skippy-server's generation_commit_batcher.rs), ported: the same cases
//! and assertions, with the commits observed as a consumer sees them, through a real commit ring
//! of a real arena, instead of a recording ingress.
mod common;

use std::time::Duration;

use stagecache::{Arena, Batcher, BatcherOptions, Committed, BATCHER_CAPACITY_MAX};

const PENDING_CAPACITY: usize = BATCHER_CAPACITY_MAX as usize;

fn at(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// Every commit delivered so far: (generated_token_count, tokens), as the seed's RecordingIngress.
fn commits(arena: &Arena) -> Vec<(usize, Vec<i32>)> {
    let mut out = Vec::new();
    loop {
        let n = arena
            .poll(1024, |c| {
                assert_eq!((c.request_id, c.session_id), (7, 9));
                out.push((c.generated_token_count as usize, c.tokens.to_vec()));
                true
            })
            .expect("poll");
        if n == 0 {
            return out;
        }
    }
}

#[test]
fn the_first_token_emits_immediately() {
    let t = common::TestArena::new("b1");
    let ring = t.arena().ring().unwrap();
    let mut batcher = Batcher::new(&ring, 7, 9).unwrap();

    batcher.commit(11, at(0)).unwrap();

    assert_eq!(commits(t.arena()), vec![(1, vec![11])]);
}

#[test]
fn tokens_inside_one_window_accumulate_into_one_commit() {
    let t = common::TestArena::new("b2");
    let ring = t.arena().ring().unwrap();
    let mut batcher = Batcher::new(&ring, 7, 9).unwrap();

    batcher.commit(1, at(0)).unwrap();
    for (index, token) in [2, 3, 4].iter().enumerate() {
        batcher.commit(*token, at(10 * (index as u64 + 1))).unwrap();
    }
    batcher.commit(5, at(100)).unwrap();

    assert_eq!(
        commits(t.arena()),
        vec![(1, vec![1]), (5, vec![2, 3, 4, 5])],
        "the second commit carries the whole window and the total after it"
    );
}

#[test]
fn concatenated_batches_reproduce_the_token_sequence_exactly() {
    let t = common::TestArena::new("b3");
    let ring = t.arena().ring().unwrap();
    let tokens: Vec<i32> = (0..500).collect();

    {
        let mut batcher = Batcher::new(&ring, 7, 9).unwrap();
        for (index, token) in tokens.iter().enumerate() {
            // 3 ms per token: several cadence windows across the run.
            assert_eq!(batcher.commit(*token, at(3 * index as u64)).unwrap(), Committed::Emitted);
        }
        batcher.flush().unwrap();
        assert_eq!(batcher.generated_token_count(), tokens.len() as u64);
    }

    let commits = commits(t.arena());
    let observed: Vec<i32> = commits.iter().flat_map(|(_, batch)| batch.iter().copied()).collect();
    assert_eq!(observed, tokens);
    assert!(
        commits.len() < tokens.len(),
        "batching must produce fewer commits than tokens; got {} for {}",
        commits.len(),
        tokens.len()
    );

    let totals: Vec<usize> = commits.iter().map(|(total, _)| *total).collect();
    let mut running = 0usize;
    let expected: Vec<usize> = commits
        .iter()
        .map(|(_, batch)| {
            running += batch.len();
            running
        })
        .collect();
    assert_eq!(totals, expected, "generated_token_count must be the running total after each batch");
}

#[test]
fn reaching_the_buffer_capacity_commits_early() {
    let t = common::TestArena::new("b4");
    let ring = t.arena().ring().unwrap();
    let mut batcher = Batcher::new(&ring, 7, 9).unwrap();

    // All inside one cadence window, so only the capacity ceiling can force the second commit.
    for token in 0..=PENDING_CAPACITY as i32 {
        batcher.commit(token, at(0)).unwrap();
    }

    let commits = commits(t.arena());
    assert_eq!(commits.len(), 2, "first token, then the capacity ceiling");
    assert_eq!(commits[1].1.len(), PENDING_CAPACITY);
}

#[test]
fn flush_emits_the_residual_batch_exactly_once() {
    let t = common::TestArena::new("b5");
    let ring = t.arena().ring().unwrap();
    let mut batcher = Batcher::new(&ring, 7, 9).unwrap();

    batcher.commit(1, at(0)).unwrap();
    batcher.commit(2, at(5)).unwrap();
    batcher.flush().unwrap();
    batcher.flush().unwrap();

    assert_eq!(commits(t.arena()), vec![(1, vec![1]), (2, vec![2])]);
}

#[test]
fn dropping_flushes_the_residual_batch() {
    let t = common::TestArena::new("b6");
    let ring = t.arena().ring().unwrap();

    {
        let mut batcher = Batcher::new(&ring, 7, 9).unwrap();
        batcher.commit(1, at(0)).unwrap();
        batcher.commit(2, at(5)).unwrap();
    }

    assert_eq!(commits(t.arena()), vec![(1, vec![1]), (2, vec![2])]);
}

#[test]
fn no_receipt_config_retains_nothing() {
    let mut batcher = Batcher::detached(7, 9).unwrap();
    batcher.commit(1, at(0)).unwrap();
    batcher.commit(2, at(500)).unwrap();
    batcher.flush().unwrap();
    assert_eq!(batcher.generated_token_count(), 0);
}

// ---- beyond the seed: what a ring adds ----

#[test]
fn a_full_ring_defers_and_then_refuses_and_nothing_is_lost() {
    let t = common::TestArena::with(
        "b7",
        stagecache::ArenaOptions {
            size_bytes: 16 << 20,
            huge: stagecache::Huge::Off,
            ring_count: 1,
            ring_bytes: 4096,
            ..Default::default()
        },
    );
    let ring = t.arena().ring().unwrap();
    while ring.submit(1, 1, 1, &[1], 0).unwrap() {}
    let mut batcher = Batcher::with_options(Some(&ring), 7, 9, BatcherOptions { capacity: 4, ..Default::default() })
        .unwrap();
    for token in 0..4 {
        assert_eq!(batcher.commit(token, at(token as u64)).unwrap(), Committed::Deferred);
    }
    assert_eq!(batcher.commit(4, at(10)).unwrap(), Committed::Refused);
    assert_eq!(batcher.generated_token_count(), 4);
    assert!(!batcher.flush().unwrap());
    t.arena().poll(1024, |_| true).unwrap(); // the filler records
    assert_eq!(batcher.commit(4, at(11)).unwrap(), Committed::Emitted);
    assert!(batcher.finish(false).unwrap());
    let mut got = Vec::new();
    let mut last_flags = 0;
    t.arena()
        .poll(1024, |c| {
            got.extend_from_slice(c.tokens);
            last_flags = c.flags;
            true
        })
        .unwrap();
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    assert_eq!(last_flags, 1); // SC_COMMIT_FINISHED
}

#[test]
fn an_interval_of_zero_emits_every_token() {
    let t = common::TestArena::new("b8");
    let ring = t.arena().ring().unwrap();
    let mut batcher =
        Batcher::with_options(Some(&ring), 7, 9, BatcherOptions { interval: Some(Duration::ZERO), capacity: 0 })
            .unwrap();
    for token in 0..5 {
        batcher.commit(token, at(1)).unwrap();
    }
    assert_eq!(batcher.commits(), 5);
    assert_eq!(commits(t.arena()).len(), 5);
}
