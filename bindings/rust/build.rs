//! Links libstagecache (the build tree's by default, or $STAGECACHE_LIB_DIR) and extracts the
//! Rust example of docs/LIBRARY.md so that `cargo test` compiles and runs it (tests/doc_example.rs).
use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../..");
    let libdir = match env::var("STAGECACHE_LIB_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => root.join("build"),
    };
    let libdir = libdir.canonicalize().unwrap_or(libdir);
    println!("cargo:rerun-if-env-changed=STAGECACHE_LIB_DIR");
    println!("cargo:rustc-link-search=native={}", libdir.display());
    println!("cargo:rustc-link-lib=dylib=stagecache");
    // found at run time without LD_LIBRARY_PATH (an installed library is found by ld.so anyway)
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", libdir.display());

    let doc = root.join("docs/LIBRARY.md");
    println!("cargo:rerun-if-changed={}", doc.display());
    let text = fs::read_to_string(&doc).unwrap_or_default();
    let example = extract(&text, "<!-- example: rust -->").unwrap_or_else(|| {
        "compile_error!(\"docs/LIBRARY.md has no Rust example after <!-- example: rust -->\");".to_string()
    });
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("doc_example.rs");
    fs::write(out, example).unwrap();
}

/// The fenced code block that follows `marker`.
fn extract(text: &str, marker: &str) -> Option<String> {
    let after = &text[text.find(marker)? + marker.len()..];
    let start = after.find("```rust")? + "```rust".len();
    let body = &after[start..];
    let end = body.find("\n```")?;
    Some(body[..end].trim_start_matches('\n').to_string())
}
