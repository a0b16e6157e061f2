//! The README's Rust example, extracted by build.rs from the block after `<!-- example: rust -->`,
//! compiled here and run as a test.
#![allow(dead_code)]

include!(concat!(env!("OUT_DIR"), "/readme_example.rs"));

#[test]
fn the_readme_example_runs() {
    main().expect("the README's Rust example");
}
