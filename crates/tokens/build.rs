//! Stores the exact tokenizers' vocabularies.
//!
//! The vocabularies are tiktoken's, taken from `bpe-openai` (a build
//! dependency, so they are the ones its tested release ships): for each,
//! every token's bytes in rank order (`{name}.tokens`) and their lengths,
//! one byte each (`{name}.lengths`), 2.4 MB for both. `src/tables.rs`
//! includes them and builds its rank map on first use; nothing of
//! `bpe-openai`'s own serialized automata reaches the binary.

use std::error::Error;
use std::path::{Path, PathBuf};

type BuildResult = Result<(), Box<dyn Error + Send + Sync>>;

fn main() -> BuildResult {
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    store(&out, "o200k_base", bpe_openai::o200k_base())?;
    store(&out, "cl100k_base", bpe_openai::cl100k_base())?;
    Ok(())
}

fn store(out: &Path, name: &str, tokenizer: &bpe_openai::Tokenizer) -> BuildResult {
    let bpe = &tokenizer.bpe;
    let mut tokens = Vec::new();
    let mut lengths = Vec::with_capacity(bpe.num_tokens());
    for id in 0..bpe.num_tokens() as u32 {
        let bytes = bpe.token_bytes(id);
        lengths.push(
            u8::try_from(bytes.len())
                .map_err(|_| format!("{name}: token {id} is over 255 bytes"))?,
        );
        tokens.extend_from_slice(bytes);
    }
    std::fs::write(out.join(format!("{name}.tokens")), tokens)?;
    std::fs::write(out.join(format!("{name}.lengths")), lengths)?;
    Ok(())
}
