//! The exact tokenizers: tiktoken's vocabularies, compiled in, and their
//! pre-tokenization.
//!
//! `build.rs` stores each vocabulary as its tokens' bytes in rank order
//! (1.4 MB for `o200k_base`) and their lengths; the first count builds a
//! map from bytes to rank in a few milliseconds. A piece the
//! pre-tokenizer cuts that is a whole token counts 1; any other is merged
//! by rank (`merge.rs`), as tiktoken does. `tests/it/tables.rs` and the
//! unit tests hold every count to `bpe-openai`'s and, on the corpus, to
//! tiktoken's.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::ControlFlow;
use std::sync::LazyLock;

use crate::merge;
use crate::pretokenize::{Pretokenizer, Scheme};

/// A vocabulary and the pre-tokenization it was trained with.
pub(crate) struct Table {
    pretokenizer: &'static Pretokenizer,
    /// Token bytes → rank (the token's id).
    ranks: HashMap<&'static [u8], u32, BuildHasherDefault<BytesHasher>>,
    /// The longest token, in bytes: longer pieces are never one token.
    longest: usize,
}

impl Table {
    /// The table of `tokens` (every token's bytes, in rank order) and
    /// `lengths` (one byte per token).
    fn new(scheme: Scheme, tokens: &'static [u8], lengths: &'static [u8]) -> Table {
        let mut ranks = HashMap::with_capacity_and_hasher(lengths.len(), Default::default());
        let mut at = 0;
        let mut longest = 0;
        for (rank, &len) in lengths.iter().enumerate() {
            let len = usize::from(len);
            let bytes = &tokens[at..at + len];
            ranks.insert(bytes, rank as u32);
            at += len;
            longest = longest.max(len);
        }
        Table {
            pretokenizer: Pretokenizer::of(scheme),
            ranks,
            longest,
        }
    }

    /// Tokens of `text`, as tiktoken's `encode_ordinary` counts them.
    pub(crate) fn count(&self, text: &str) -> usize {
        self.count_past(text, usize::MAX)
    }

    /// Tokens of `text` while they are at most `limit`: the count itself
    /// when it is, else some number above `limit` (counting stops there).
    pub(crate) fn count_past(&self, text: &str, limit: usize) -> usize {
        let mut n = 0;
        self.pretokenizer.pieces(text, |piece| {
            n += if piece.len() <= self.longest && self.ranks.contains_key(piece) {
                1
            } else {
                merge::count(piece, |b| match b.len() <= self.longest {
                    true => self.ranks.get(b).copied(),
                    false => None,
                })
            };
            match n > limit {
                true => ControlFlow::Break(()),
                false => ControlFlow::Continue(()),
            }
        });
        n
    }
}

/// The hasher of the rank map: xxh3 of the key's bytes (the length prefix
/// `[u8]`'s `Hash` writes first is folded in).
#[derive(Default)]
pub(crate) struct BytesHasher(u64);

impl Hasher for BytesHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    fn write_usize(&mut self, n: usize) {
        self.0 ^= n as u64;
    }
}

static O200K_BASE: LazyLock<Table> = LazyLock::new(|| {
    Table::new(
        Scheme::O200k,
        include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.tokens")),
        include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.lengths")),
    )
});

static CL100K_BASE: LazyLock<Table> = LazyLock::new(|| {
    Table::new(
        Scheme::Cl100k,
        include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.tokens")),
        include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.lengths")),
    )
});

/// `o200k_base`: GPT-4o, GPT-4.1, GPT-5, the o-series.
pub(crate) fn o200k_base() -> &'static Table {
    &O200K_BASE
}

/// `cl100k_base`: GPT-4, GPT-3.5.
pub(crate) fn cl100k_base() -> &'static Table {
    &CL100K_BASE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(scheme: Scheme) -> &'static bpe_openai::Tokenizer {
        match scheme {
            Scheme::O200k => bpe_openai::o200k_base(),
            Scheme::Cl100k => bpe_openai::cl100k_base(),
        }
    }

    fn table(scheme: Scheme) -> &'static Table {
        match scheme {
            Scheme::O200k => o200k_base(),
            Scheme::Cl100k => cl100k_base(),
        }
    }

    #[test]
    fn ranks_are_bpe_openai_ids() {
        for scheme in [Scheme::O200k, Scheme::Cl100k] {
            let bpe = &reference(scheme).bpe;
            let t = table(scheme);
            assert_eq!(t.ranks.len(), bpe.num_tokens());
            for id in (0..bpe.num_tokens() as u32).step_by(97) {
                assert_eq!(t.ranks.get(bpe.token_bytes(id)), Some(&id));
            }
        }
    }
}
