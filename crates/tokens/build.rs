//! Stores the exact tokenizers' tables compressed.
//!
//! `bpe-openai` embeds its serialized tables uncompressed: 47 MB of the
//! release binary, four fifths of it. This script takes the same tables
//! from `bpe-openai` (a build dependency, so the tables are the ones its
//! tested release ships), serializes them again and writes them to
//! `OUT_DIR` compressed with zstd; `src/tables.rs` includes and expands them
//! on first use. The library never calls `bpe_openai::o200k_base()` itself,
//! so the linker drops the uncompressed copies.
//!
//! Optimised builds compress hard (level 19, about 30 s here, the two
//! tables in parallel); unoptimised builds, which are not shipped, compress
//! fast.

use std::error::Error;
use std::path::PathBuf;

type BuildResult = Result<(), Box<dyn Error + Send + Sync>>;

fn main() -> BuildResult {
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let level = match std::env::var("OPT_LEVEL").as_deref() {
        Ok("0") => 3,
        _ => 19,
    };
    let (o200k, cl100k) = std::thread::scope(|scope| {
        let o200k = scope.spawn(|| store(&out, "o200k_base", bpe_openai::o200k_base(), level));
        let cl100k = scope.spawn(|| store(&out, "cl100k_base", bpe_openai::cl100k_base(), level));
        (o200k.join(), cl100k.join())
    });
    o200k.map_err(|_| "compressing o200k_base panicked")??;
    cl100k.map_err(|_| "compressing cl100k_base panicked")??;
    Ok(())
}

fn store(
    out: &std::path::Path,
    name: &str,
    tokenizer: &bpe_openai::Tokenizer,
    level: i32,
) -> BuildResult {
    let serialized = rmp_serde::to_vec(&tokenizer.bpe)?;
    let compressed = zstd::bulk::compress(&serialized, level)?;
    std::fs::write(out.join(format!("{name}.bpe.zst")), compressed)?;
    Ok(())
}
