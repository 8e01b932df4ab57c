//! Handles: short names for replaced content, derived from the content
//! (so the same original gets the same handle on every turn, in every
//! process, and a compacted prefix stays byte-identical).
//!
//! Two derivations: from the content alone (XXH3, fixed: a library user's
//! own history, one owner), and keyed ([`HandleKey`], HMAC-SHA-256: a
//! proxy shared by several tenants), where a handle cannot be computed
//! without the key, and an original resolves only for the key that made
//! its handle ([`Original::belongs`](super::Original::belongs)).

use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use xxhash_rust::xxh3::Xxh3Default;

/// What every handle starts with.
pub(crate) const PREFIX: &str = "abr_";

/// Characters after the prefix in the handles abridge makes (base 36: about
/// 51 bits, so two different originals of one store share a handle with a
/// chance near 10⁻¹⁵ · n²).
const LEN: usize = 10;

/// Characters after the prefix in a keyed handle (base 36: about 82 bits,
/// too many to guess).
const KEYED_LEN: usize = 16;

/// Shortest and longest tail a handle may have when read back.
const TAIL: std::ops::RangeInclusive<usize> = 6..=16;

/// The secret a keyed handle is derived with: one per tenant of a shared
/// proxy. Its bytes are never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct HandleKey([u8; 32]);

impl HandleKey {
    /// A key from 32 secret bytes.
    pub fn new(bytes: [u8; 32]) -> Self {
        HandleKey(bytes)
    }
}

impl std::fmt::Debug for HandleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HandleKey(..)")
    }
}

/// The name of one replaced original: `abr_` and 6 to 16 of `[0-9a-z]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Handle(String);

impl Handle {
    /// The handle of `content` of the given kind.
    pub(crate) fn derive(kind: &str, content: &[&[u8]]) -> Handle {
        let mut h = Xxh3Default::new();
        framed(kind, content, |b| h.update(b));
        Handle::of_number(u128::from(h.digest()), LEN)
    }

    /// The handle of `content` of the given kind under `key`.
    pub(crate) fn keyed(key: &HandleKey, kind: &str, content: &[&[u8]]) -> Handle {
        let Ok(mut mac) = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(&key.0) else {
            unreachable!("HMAC takes a key of any length")
        };
        framed(kind, content, |b| mac.update(b));
        let digest = mac.finalize().into_bytes();
        let mut first = [0u8; 16];
        first.copy_from_slice(&digest[..16]);
        Handle::of_number(u128::from_le_bytes(first), KEYED_LEN)
    }

    /// `n`'s last `len` base-36 digits after the prefix.
    fn of_number(mut n: u128, len: usize) -> Handle {
        let mut tail = vec![b'0'; len];
        for slot in tail.iter_mut().rev() {
            *slot = DIGITS[(n % 36) as usize];
            n /= 36;
        }
        Handle(format!("{PREFIX}{}", String::from_utf8_lossy(&tail)))
    }

    /// Reads a handle, or `None` when `s` is not one.
    pub fn parse(s: &str) -> Option<Handle> {
        let tail = s.trim().strip_prefix(PREFIX)?;
        (TAIL.contains(&tail.len()) && tail.bytes().all(|b| is_digit(&b)))
            .then(|| Handle(s.trim().into()))
    }

    /// The handle as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Every handle written in `text`, in order (repeats included).
    pub fn find_all(text: &str) -> impl Iterator<Item = Handle> + '_ {
        text.match_indices(PREFIX).filter_map(move |(at, _)| {
            let before = text[..at].bytes().next_back();
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return None;
            }
            let tail = &text[at + PREFIX.len()..];
            let len = tail.bytes().take_while(is_digit).count();
            let after = tail.as_bytes().get(len);
            (TAIL.contains(&len) && !after.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_'))
                .then(|| Handle(text[at..at + PREFIX.len() + len].to_owned()))
        })
    }
}

/// Feeds `kind` and `content` to a hash, each piece after its length (a
/// split moved between pieces is another content).
fn framed(kind: &str, content: &[&[u8]], mut update: impl FnMut(&[u8])) {
    update(&(kind.len() as u64).to_le_bytes());
    update(kind.as_bytes());
    for c in content {
        update(&(c.len() as u64).to_le_bytes());
        update(c);
    }
}

const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

fn is_digit(b: &u8) -> bool {
    b.is_ascii_digit() || b.is_ascii_lowercase()
}

impl std::fmt::Display for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Handle {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        Handle::parse(&s)
            .ok_or_else(|| format!("not a handle (abr_ and 6 to 16 of [0-9a-z]): {s:?}"))
    }
}

impl From<Handle> for String {
    fn from(h: Handle) -> String {
        h.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_handles_are_stable_and_well_formed() {
        let a = Handle::derive("tool_result", &[b"hello"]);
        assert_eq!(a, Handle::derive("tool_result", &[b"hello"]));
        assert_ne!(a, Handle::derive("tool_result", &[b"hello!"]));
        assert_ne!(a, Handle::derive("arguments", &[b"hello"]));
        // Length prefixes: a split moved between pieces is another content.
        assert_ne!(
            Handle::derive("k", &[b"ab", b"c"]),
            Handle::derive("k", &[b"a", b"bc"])
        );
        assert_eq!(a.as_str().len(), PREFIX.len() + LEN);
        assert_eq!(Handle::parse(a.as_str()), Some(a.clone()));
        // Fixed across releases: stored handles must keep resolving.
        assert_eq!(
            Handle::derive("tool_result", &[b"hello"]).as_str(),
            "abr_jqnp1p3ap5"
        );
    }

    #[test]
    fn keyed_handles_depend_on_the_key_and_are_long() {
        let (a, b) = (HandleKey::new([1; 32]), HandleKey::new([2; 32]));
        let h = Handle::keyed(&a, "tool_result", &[b"hello"]);
        assert_eq!(h, Handle::keyed(&a, "tool_result", &[b"hello"]));
        assert_ne!(h, Handle::keyed(&b, "tool_result", &[b"hello"]));
        assert_ne!(h, Handle::keyed(&a, "tool_result", &[b"hello!"]));
        assert_ne!(h, Handle::derive("tool_result", &[b"hello"]));
        assert_eq!(h.as_str().len(), PREFIX.len() + KEYED_LEN);
        assert_eq!(Handle::parse(h.as_str()), Some(h.clone()));
        assert_eq!(Handle::find_all(&format!("(see {h})")).count(), 1);
        assert_eq!(format!("{a:?}"), "HandleKey(..)");
    }

    #[test]
    fn handles_are_found_in_text_only_whole() {
        let found: Vec<String> = Handle::find_all(
            "see abr_abc123, (abr_0123456789) xabr_zzzzzz abr_ABCDEF abr_12345 abr_1234567890abcdefg abr_qqqqqq_x abr_k9k9k9.",
        )
        .map(String::from)
        .collect();
        assert_eq!(found, ["abr_abc123", "abr_0123456789", "abr_k9k9k9"]);
        assert_eq!(Handle::parse("abr_12345"), None);
        assert_eq!(Handle::parse("abr_ABCDEF"), None);
    }
}
