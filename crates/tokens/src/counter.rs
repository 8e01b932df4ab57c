//! Per-message token counts with a cache keyed by content hash.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use abridge_model::{Arguments, Conversation, ImageSource, Message, Part, Tool};
use serde_json::Value;

use crate::image::image_tokens;
use crate::tokenizer::TokenizerKind;
use crate::units::Counted;

/// Leading bytes of an image hashed for the count cache: its header.
const IMAGE_HASH_BYTES: usize = 65_536;

/// Tokens of one message, by kind of content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct TokenCounts {
    /// Text parts.
    pub text: usize,
    /// Tool call names and arguments.
    pub tool_args: usize,
    /// Tool result content (text; images inside count as images).
    pub tool_results: usize,
    /// Images.
    pub images: usize,
    /// Reasoning / thinking.
    pub reasoning: usize,
    /// Opaque parts (documents, audio, server blocks), counted as their JSON.
    pub other: usize,
    /// Per-message framing.
    pub overhead: usize,
}

impl TokenCounts {
    /// Sum of all kinds.
    pub fn total(&self) -> Counted {
        Counted::of(
            self.text
                + self.tool_args
                + self.tool_results
                + self.images
                + self.reasoning
                + self.other
                + self.overhead,
        )
    }

    /// Adds another count in place.
    pub fn add(&mut self, o: &TokenCounts) {
        self.text += o.text;
        self.tool_args += o.tool_args;
        self.tool_results += o.tool_results;
        self.images += o.images;
        self.reasoning += o.reasoning;
        self.other += o.other;
        self.overhead += o.overhead;
    }
}

/// A message's [`TokenCounts`] as the cache keeps them: 28 bytes where the
/// counts take 56 (one message's count of one kind fits 32 bits many times
/// over; a larger one saturates).
#[derive(Debug, Clone, Copy)]
struct Packed([u32; 7]);

impl Packed {
    fn of(c: &TokenCounts) -> Packed {
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Packed([
            n(c.text),
            n(c.tool_args),
            n(c.tool_results),
            n(c.images),
            n(c.reasoning),
            n(c.other),
            n(c.overhead),
        ])
    }

    fn unpack(self) -> TokenCounts {
        let [
            text,
            tool_args,
            tool_results,
            images,
            reasoning,
            other,
            overhead,
        ] = self.0.map(|v| v as usize);
        TokenCounts {
            text,
            tool_args,
            tool_results,
            images,
            reasoning,
            other,
            overhead,
        }
    }
}

/// Counts tokens of messages, remembering each message's count by a hash of
/// its content, so that recounting a history that grew by one message costs
/// hashing the old ones and tokenizing only the new one.
#[derive(Debug)]
pub struct TokenCounter {
    kind: TokenizerKind,
    /// Counts by [`content_hash`] (already a hash: not hashed again), packed:
    /// a session's counter lives as long as the session.
    cache: HashMap<u64, Packed, BuildHasherDefault<Prehashed>>,
    capacity: usize,
    hits: u64,
    misses: u64,
    /// The last tool declarations counted: a hash of their text, and tokens.
    tools: Option<(u64, Counted)>,
}

impl TokenCounter {
    /// A counter with the default cache capacity (100,000 messages).
    pub fn new(kind: TokenizerKind) -> Self {
        Self::with_capacity(kind, 100_000)
    }

    /// A counter whose cache is cleared when it holds `capacity` entries.
    pub fn with_capacity(kind: TokenizerKind, capacity: usize) -> Self {
        TokenCounter {
            kind,
            cache: HashMap::default(),
            capacity: capacity.max(1),
            hits: 0,
            misses: 0,
            tools: None,
        }
    }

    /// The tokenizer in use.
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }

    /// Cache hits and misses so far.
    pub fn cache_stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    /// About how many bytes its cache takes (its table's capacity).
    pub fn cache_bytes(&self) -> usize {
        // Key, value and the table's control byte per slot.
        self.cache.capacity() * (size_of::<u64>() + size_of::<Packed>() + 1)
    }

    /// Tokens of plain text.
    pub fn count_text(&self, text: &str) -> Counted {
        Counted::of(self.kind.count(text))
    }

    /// Tokens of one message, from the cache when its content was seen before.
    pub fn count_message(&mut self, m: &Message) -> TokenCounts {
        self.count_keyed(content_hash(m), m)
    }

    /// [`count_message`](Self::count_message) with its hash already taken.
    fn count_keyed(&mut self, key: u64, m: &Message) -> TokenCounts {
        if let Some(c) = self.cache.get(&key) {
            self.hits += 1;
            return c.unpack();
        }
        self.misses += 1;
        let counts = count_uncached(self.kind, m);
        if self.cache.len() >= self.capacity {
            self.cache.clear();
        }
        self.cache.insert(key, Packed::of(&counts));
        counts
    }

    /// Forgets every count but those of `messages`, and gives back the
    /// memory the rest took: what a history was compacted to is all a
    /// thread counts again (the messages it replaced are not sent again),
    /// and a session's counter lives as long as the session.
    pub fn keep_only(&mut self, messages: &[Message]) {
        let mut kept = HashMap::with_capacity_and_hasher(messages.len(), Default::default());
        for m in messages {
            let key = content_hash(m);
            if let Some(c) = self.cache.get(&key) {
                kept.insert(key, *c);
            }
        }
        self.cache = kept;
    }

    /// Tokens of every message, in order.
    pub fn count_messages(&mut self, messages: &[Message]) -> Vec<TokenCounts> {
        // Each message hashed once: the prefill and the reads share the keys.
        let keys: Vec<u64> = messages.iter().map(content_hash).collect();
        self.prefill(&keys, messages);
        keys.iter()
            .zip(messages)
            .map(|(key, m)| self.count_keyed(*key, m))
            .collect()
    }

    /// Counts the messages not in the cache on every core when there is
    /// enough new text to be worth the threads (a history seen for the
    /// first time), and keeps their counts; the caller then reads them
    /// from the cache in order.
    fn prefill(&mut self, keys: &[u64], messages: &[Message]) {
        let threads = abridge_model::shares::threads(MAX_THREADS);
        if threads < 2 {
            return;
        }
        let mut new: Vec<(u64, &Message, usize)> = Vec::new();
        let mut bytes = 0;
        for (key, m) in keys.iter().zip(messages) {
            if !self.cache.contains_key(key) {
                let size = m.text_bytes();
                bytes += size;
                new.push((*key, m, size));
            }
        }
        if bytes < PARALLEL_BYTES || self.cache.len() + new.len() > self.capacity {
            return;
        }
        let kind = self.kind;
        let counted = abridge_model::shares::on_shares(
            &new,
            |(_, _, size)| *size,
            threads,
            |share, _| {
                share
                    .iter()
                    .map(|(key, m, _)| (*key, count_uncached(kind, m)))
                    .collect::<Vec<_>>()
            },
        );
        // A share that panicked is counted in order by the caller.
        for (key, counts) in counted.into_iter().filter_map(Result::ok).flatten() {
            self.misses += 1;
            self.cache.insert(key, Packed::of(&counts));
        }
    }

    /// Tokens of the tool declarations (their JSON), 0 without tools.
    pub fn count_tools(&mut self, tools: Option<&[Tool]>) -> Counted {
        let Some(tools) = tools else {
            return Counted::ZERO;
        };
        let texts: Vec<std::borrow::Cow<'_, str>> = tools
            .iter()
            .flat_map(|t| match t {
                Tool::Function(f) => vec![
                    f.name.as_str().into(),
                    f.description.as_deref().unwrap_or("").into(),
                    f.parameters
                        .as_ref()
                        .map_or(String::new(), |p| p.to_string())
                        .into(),
                ],
                Tool::Opaque(v) => vec![v.to_string().into()],
            })
            .collect();
        // Agents send the same declarations every turn: count them once.
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for t in &texts {
            h.update(&(t.len() as u64).to_le_bytes());
            h.update(t.as_bytes());
        }
        let key = h.digest();
        if let Some((k, n)) = self.tools
            && k == key
        {
            return n;
        }
        let n = Counted::of(texts.iter().map(|t| self.kind.count(t)).sum());
        self.tools = Some((key, n));
        n
    }

    /// Total prompt tokens of a conversation: messages plus tool declarations.
    pub fn count_conversation(&mut self, conv: &Conversation) -> Counted {
        let messages: Counted = self
            .count_messages(&conv.messages)
            .iter()
            .map(TokenCounts::total)
            .sum();
        messages + self.count_tools(conv.tools.as_deref())
    }
}

fn count_uncached(kind: TokenizerKind, m: &Message) -> TokenCounts {
    let mut c = TokenCounts {
        overhead: kind.message_overhead(),
        ..TokenCounts::default()
    };
    for p in &m.parts {
        count_part(kind, p, &mut c, false);
    }
    c
}

fn count_part(kind: TokenizerKind, p: &Part, c: &mut TokenCounts, in_result: bool) {
    match p {
        Part::Text(t) if in_result => c.tool_results += kind.count(&t.text),
        Part::Text(t) => c.text += kind.count(&t.text),
        Part::Image(img) => c.images += image_tokens(kind, img),
        Part::ToolCall(call) => {
            c.tool_args += kind.count(&call.name) + kind.count(&call.arguments.to_json_text());
        }
        Part::ToolResult(r) => {
            for inner in &r.parts {
                count_part(kind, inner, c, true);
            }
        }
        Part::Reasoning(r) => c.reasoning += kind.count(&r.text),
        Part::Opaque(v) => c.other += kind.count(&v.to_string()),
    }
}

/// The hasher of keys that are already hashes.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else folds in, to stay a hasher.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// New text below which counting stays on the calling thread (threads cost
/// tens of microseconds; 256 KB of text takes milliseconds to count).
const PARALLEL_BYTES: usize = 256 * 1024;

/// Most threads one count uses.
const MAX_THREADS: usize = 8;

/// Hash of everything in a message that its token count depends on.
///
/// Each string is hashed in one pass (xxh3) with the hash so far as its
/// seed: no hasher state is built or copied per message, which matters
/// when a history holds a million short ones.
pub fn content_hash(m: &Message) -> u64 {
    let mut h = Fold(0);
    h.bytes(0, m.role.as_str().as_bytes());
    h.number(1, m.parts.len() as u64);
    for p in &m.parts {
        hash_part(p, &mut h);
    }
    h.0
}

/// A hash built string by string.
struct Fold(u64);

impl Fold {
    fn bytes(&mut self, tag: u8, bytes: &[u8]) {
        let seed = self.0 ^ u64::from(tag).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, seed);
    }

    fn number(&mut self, tag: u8, n: u64) {
        self.bytes(tag, &n.to_le_bytes());
    }
}

fn hash_part(p: &Part, h: &mut Fold) {
    match p {
        Part::Text(t) => h.bytes(2, t.text.as_bytes()),
        // Its count depends on the header and, for `detail`, the source fields.
        Part::Image(img) => {
            let bytes = match &img.source {
                ImageSource::Url(u) => u.as_bytes(),
                ImageSource::Base64 { data, .. } => data.as_bytes(),
            };
            h.number(3, bytes.len() as u64);
            h.bytes(4, &bytes[..bytes.len().min(IMAGE_HASH_BYTES)]);
            let detail = img.source_extra.get("detail").map(ToString::to_string);
            h.bytes(5, detail.as_deref().unwrap_or("\0").as_bytes());
        }
        Part::ToolCall(c) => {
            h.bytes(6, c.name.as_bytes());
            match &c.arguments {
                Arguments::Json(s) | Arguments::Custom(s) => h.bytes(7, s.as_bytes()),
                Arguments::Value(v) => hash_value(v, h),
            }
        }
        Part::ToolResult(r) => {
            h.number(8, r.parts.len() as u64);
            for inner in &r.parts {
                hash_part(inner, h);
            }
        }
        Part::Reasoning(r) => h.bytes(9, r.text.as_bytes()),
        Part::Opaque(v) => {
            h.number(10, 0);
            hash_value(v, h);
        }
    }
}

/// Hashes a JSON value by structure, without serializing it.
fn hash_value(v: &Value, h: &mut Fold) {
    match v {
        Value::Null => h.number(20, 0),
        Value::Bool(b) => h.number(21, u64::from(*b)),
        // As a float, and exactly (an integer past 2^53 is not a float).
        Value::Number(n) => {
            h.number(22, n.as_f64().map_or(0, f64::to_bits));
            h.number(
                23,
                n.as_u64().unwrap_or(0) ^ n.as_i64().map_or(0, |i| i as u64),
            );
        }
        Value::String(s) => h.bytes(24, s.as_bytes()),
        Value::Array(a) => {
            h.number(25, a.len() as u64);
            a.iter().for_each(|x| hash_value(x, h));
        }
        Value::Object(m) => {
            h.number(26, m.len() as u64);
            for (k, x) in m {
                h.bytes(27, k.as_bytes());
                hash_value(x, h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_counts_read_back_and_saturate() {
        let c = TokenCounts {
            text: 1,
            tool_args: 2,
            tool_results: 3,
            images: 4,
            reasoning: 5,
            other: 6,
            overhead: 7,
        };
        assert_eq!(Packed::of(&c).unpack(), c);
        let huge = TokenCounts {
            text: usize::MAX,
            ..c
        };
        assert_eq!(Packed::of(&huge).unpack().text, u32::MAX as usize);
        assert!(std::mem::size_of::<Packed>() * 2 <= std::mem::size_of::<TokenCounts>());
    }

    #[test]
    fn keeping_only_some_messages_forgets_the_rest_and_its_room() {
        let messages: Vec<Message> = (0..1000)
            .map(|i| Message::text(abridge_model::Role::User, format!("message number {i}")))
            .collect();
        let mut c = TokenCounter::new(TokenizerKind::O200kBase);
        let counted = c.count_messages(&messages);
        let room = c.cache.capacity();
        c.keep_only(&messages[990..]);
        assert_eq!(c.cache.len(), 10);
        assert!(
            c.cache.capacity() < room / 10,
            "{} of {room}",
            c.cache.capacity()
        );
        let (hits, misses) = c.cache_stats();
        // The kept ones are read back, the rest counted again, alike.
        assert_eq!(c.count_message(&messages[995]), counted[995]);
        assert_eq!(c.count_message(&messages[5]), counted[5]);
        assert_eq!(c.cache_stats(), (hits + 1, misses + 1));
    }
}
