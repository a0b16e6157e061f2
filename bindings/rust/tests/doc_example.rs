//! The Rust example of docs/LIBRARY.md, extracted by build.rs from the block after `<!-- example: rust -->`,
//! compiled here and run as a test.
#![allow(dead_code)]

include!(concat!(env!("OUT_DIR"), "/doc_example.rs"));

#[test]
fn the_library_doc_example_runs() {
    main().expect("the Rust example of docs/LIBRARY.md");
}
