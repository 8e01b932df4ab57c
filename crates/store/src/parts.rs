//! A snapshot's bodies kept by their parts. Each body (the history before
//! a compaction, and after) is its envelope — every field but the history,
//! which is left an empty array — and its history's items; each part is
//! kept once per source (a proxy's session, a CLI's input file) under the
//! hash of its text, and a snapshot lists its parts in order. A session
//! compacted twenty times sends the same messages twenty times over: its
//! snapshots then hold about one history, not twenty.

use abridge::model::{BodyParts, Conversation, encode_parts};
use serde_json::Value;

use crate::{Error, Result};

/// The hash a part is kept under (128 bits of xxh3: within one source, two
/// texts never share it in practice).
pub(crate) type PartHash = [u8; 16];

/// One body in parts: the envelope first, then the history's items.
#[derive(Debug)]
pub(crate) struct StoredBody {
    /// Where the items go in the envelope (`None`: the body is the items).
    pub(crate) history_key: Option<&'static str>,
    /// The envelope, then each item: its hash and text.
    pub(crate) parts: Vec<(PartHash, String)>,
}

impl StoredBody {
    /// The parts of `conv`'s request body.
    pub(crate) fn of(conv: &Conversation) -> Result<StoredBody> {
        let mut items = Vec::new();
        let body = encode_parts(conv, |item| items.push(item)).map_err(|e| Error::Serialize {
            what: "history",
            message: e.to_string(),
        })?;
        let mut parts = Vec::with_capacity(items.len() + 1);
        parts.push((hash(&body.envelope), body.envelope));
        parts.extend(items.into_iter().map(|i| (hash(&i), i)));
        Ok(StoredBody {
            history_key: body.history_key,
            parts,
        })
    }
}

/// The hash of a part's text.
pub(crate) fn hash(text: &str) -> PartHash {
    xxhash_rust::xxh3::xxh3_128(text.as_bytes()).to_le_bytes()
}

/// A body put back together from its parts, read in order (the envelope
/// first), as JSON.
pub(crate) fn join(history_key: Option<&str>, parts: &[String]) -> Result<Value> {
    let (envelope, items) = parts.split_first().ok_or_else(|| Error::Serialize {
        what: "stored body",
        message: "no parts".into(),
    })?;
    let key = match history_key {
        // The key names a field the envelope holds: an owned str for the
        // lifetime `BodyParts` wants is found among the known ones.
        Some(k) => Some(
            ["messages", "input", "contents"]
                .into_iter()
                .find(|known| *known == k)
                .ok_or_else(|| Error::Serialize {
                    what: "stored body",
                    message: format!("unknown history key {k:?}"),
                })?,
        ),
        None => None,
    };
    let body = BodyParts {
        envelope: envelope.clone(),
        history_key: key,
    };
    let text = body.join(&items.join(","));
    serde_json::from_str(&text).map_err(|e| Error::Serialize {
        what: "stored body",
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use abridge::model::{decode, encode};

    #[test]
    fn a_body_in_parts_reads_back_as_the_body() {
        let body = r#"{"model": "claude-sonnet-4-5", "system": "s", "messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}], "max_tokens": 5}"#;
        let conv = decode(body.as_bytes()).unwrap().remove(0);
        let stored = StoredBody::of(&conv).unwrap();
        assert_eq!(stored.parts.len(), 3, "the envelope and two messages");
        let texts: Vec<String> = stored.parts.iter().map(|(_, t)| t.clone()).collect();
        assert_eq!(
            join(stored.history_key, &texts).unwrap(),
            encode(&conv).unwrap()
        );
        assert_ne!(stored.parts[1].0, stored.parts[2].0);
        assert_eq!(stored.parts[1].0, hash(&stored.parts[1].1));
    }
}
