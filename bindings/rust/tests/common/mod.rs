//! Shared by the integration tests: a fresh arena per test, removed on drop.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use stagecache::{Arena, ArenaOptions, Huge};

static N: AtomicU32 = AtomicU32::new(0);

/// A unique arena name for this test process.
pub fn name(tag: &str) -> String {
    format!("rs-{}-{}-{}", tag, std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// An arena on 4 KiB shared memory, destroyed when dropped (after everything borrowing it).
pub struct TestArena {
    pub arena: Option<Arena>,
    pub name: String,
}

impl TestArena {
    pub fn new(tag: &str) -> TestArena {
        Self::with(tag, ArenaOptions { size_bytes: 16 << 20, huge: Huge::Off, ..Default::default() })
    }

    pub fn with(tag: &str, opts: ArenaOptions) -> TestArena {
        let name = name(tag);
        let arena = Arena::create(&name, &opts).expect("create a test arena");
        TestArena { arena: Some(arena), name }
    }

    pub fn arena(&self) -> &Arena {
        self.arena.as_ref().unwrap()
    }
}

impl Drop for TestArena {
    fn drop(&mut self) {
        drop(self.arena.take());
        let _ = Arena::destroy(None, &self.name);
    }
}
