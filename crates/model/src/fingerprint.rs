//! Fingerprints of wire content: equal for messages that send the same
//! bytes' worth of meaning to a provider, different (but for a 2⁻⁶⁴ chance)
//! when anything sent differs — text, ids, images, unknown fields, order.
//! [`Meta`](crate::Meta) is not sent and not hashed; nor are `cache_control`
//! markers, which say where a provider caches, not what the model reads —
//! clients move them to the newest message every turn, and a history whose
//! marker moved is still the same history. For the same reason a message
//! of one marked text block hashes as its plain string: Claude Code sends
//! its newest message as `[{"type":"text","text":…,"cache_control":…}]` and
//! the same message as `"…"` once it is no longer the newest, which the
//! provider reads the same. The algorithm (XXH3
//! over a tagged, length-prefixed walk) is fixed, so fingerprints can be
//! stored and compared across processes and releases.

use serde_json::{Map, Value};
use xxhash_rust::xxh3::Xxh3Default;

use crate::message::{
    Arguments, CACHE_CONTROL, ContentForm, ImageSource, Message, Part, ReasoningKind, Role,
};

/// Fingerprint of a run of messages (order counts).
pub fn fingerprint(messages: &[Message]) -> u64 {
    let mut h = Feed(Xxh3Default::new());
    h.len(messages.len());
    for m in messages {
        h.message(m);
    }
    h.0.digest()
}

/// Fingerprint of `m` following a run whose chained fingerprint is
/// `before`: a run's chain is its messages chained one by one from a fixed
/// start, so it extends without the run (unlike [`fingerprint`], which
/// hashes the run's length first). Cache markers are left out as in
/// [`fingerprint`].
pub fn chained(before: u64, m: &Message) -> u64 {
    let mut h = Feed(Xxh3Default::new());
    h.message(m);
    xxhash_rust::xxh3::xxh3_64_with_seed(&h.0.digest().to_le_bytes(), before)
}

struct Feed(Xxh3Default);

/// One text block with nothing but a cache marker beside its text: the
/// same content as a plain string.
fn plain_text_block(parts: &[Part]) -> bool {
    matches!(parts, [Part::Text(t)] if t.extra.keys().all(|k| k == CACHE_CONTROL))
}

impl Feed {
    fn tag(&mut self, t: u8) {
        self.0.update(&[t]);
    }

    fn len(&mut self, n: usize) {
        self.0.update(&(n as u64).to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.update(s.as_bytes());
    }

    fn opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.tag(1);
                self.str(s);
            }
            None => self.tag(0),
        }
    }

    fn message(&mut self, m: &Message) {
        self.role(&m.role);
        self.tag(match m.form {
            ContentForm::Absent => 0,
            ContentForm::Null => 1,
            ContentForm::Blocks if !plain_text_block(&m.parts) => 3,
            ContentForm::Text | ContentForm::Blocks => 2,
        });
        self.extra(&m.extra);
        self.parts(&m.parts);
    }

    fn role(&mut self, r: &Role) {
        self.str(r.as_str());
    }

    fn parts(&mut self, parts: &[Part]) {
        self.len(parts.len());
        for p in parts {
            self.part(p);
        }
    }

    fn part(&mut self, p: &Part) {
        match p {
            Part::Text(t) => {
                self.tag(0);
                self.str(&t.text);
                self.extra(&t.extra);
            }
            Part::Image(i) => {
                self.tag(1);
                match &i.source {
                    ImageSource::Url(u) => {
                        self.tag(0);
                        self.str(u);
                    }
                    ImageSource::Base64 { media_type, data } => {
                        self.tag(1);
                        self.str(media_type);
                        self.str(data);
                    }
                }
                self.extra(&i.source_extra);
                self.extra(&i.extra);
            }
            Part::ToolCall(c) => {
                self.tag(2);
                self.str(&c.id);
                self.str(&c.name);
                match &c.arguments {
                    Arguments::Json(s) => {
                        self.tag(0);
                        self.str(s);
                    }
                    Arguments::Value(v) => {
                        self.tag(1);
                        self.value(v);
                    }
                    Arguments::Custom(s) => {
                        self.tag(2);
                        self.str(s);
                    }
                }
                self.extra(&c.extra);
                self.extra(&c.function_extra);
            }
            Part::ToolResult(r) => {
                self.tag(3);
                self.str(&r.call_id);
                self.parts(&r.parts);
                self.tag(match r.is_error {
                    None => 0,
                    Some(false) => 1,
                    Some(true) => 2,
                });
                self.extra(&r.extra);
            }
            Part::Reasoning(r) => {
                self.tag(4);
                self.str(&r.text);
                self.opt(r.signature.as_deref());
                self.tag(match r.kind {
                    ReasoningKind::Thinking => 0,
                    ReasoningKind::Redacted => 1,
                    ReasoningKind::Field => 2,
                    ReasoningKind::Thought => 3,
                });
                self.extra(&r.extra);
            }
            Part::Opaque(v) => {
                self.tag(5);
                self.value(v);
            }
        }
    }

    /// Fields but cache markers and nulls: a `null` says no more than an
    /// absent field (the Responses codec leaves one in the slot of each
    /// field it models, which a message the engine wrote has not).
    fn extra(&mut self, e: &Map<String, Value>) {
        let hashed = |(k, v): &(&String, &Value)| k.as_str() != CACHE_CONTROL && !v.is_null();
        self.len(e.iter().filter(hashed).count());
        for (k, v) in e.iter().filter(hashed) {
            self.str(k);
            self.value(v);
        }
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.tag(0),
            Value::Bool(b) => self.tag(if *b { 2 } else { 1 }),
            Value::Number(n) => {
                self.tag(3);
                self.str(&n.to_string());
            }
            Value::String(s) => {
                self.tag(4);
                self.str(s);
            }
            Value::Array(a) => {
                self.tag(5);
                self.len(a.len());
                for x in a {
                    self.value(x);
                }
            }
            Value::Object(o) => {
                self.tag(6);
                self.extra(o);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wire_difference_changes_the_fingerprint() {
        let base = vec![Message::text(Role::User, "hello")];
        let f = fingerprint(&base);
        assert_eq!(f, fingerprint(&base.clone()));
        let mut other = base.clone();
        other[0].meta.pinned = true;
        assert_eq!(f, fingerprint(&other), "meta is not sent");
        other[0].role = Role::Assistant;
        assert_ne!(f, fingerprint(&other));
        let mut other = base.clone();
        other[0].extra.insert("name".into(), Value::from("x"));
        assert_ne!(f, fingerprint(&other));
        let mut marked = base.clone();
        marked[0].extra.insert(
            "cache_control".into(),
            serde_json::json!({"type": "ephemeral"}),
        );
        assert_eq!(f, fingerprint(&marked), "a cache marker is not content");
        let mut block = base.clone();
        block[0].form = ContentForm::Blocks;
        assert_eq!(f, fingerprint(&block), "one text block is its string");
        if let Part::Text(t) = &mut block[0].parts[0] {
            t.extra.insert(
                "cache_control".into(),
                serde_json::json!({"type": "ephemeral"}),
            );
        }
        assert_eq!(f, fingerprint(&block), "a marked text block is its string");
        if let Part::Text(t) = &mut block[0].parts[0] {
            t.extra.insert("citations".into(), serde_json::json!([]));
        }
        assert_ne!(f, fingerprint(&block), "a block with more than text is not");
        let two = vec![
            Message::text(Role::User, "hel"),
            Message::text(Role::User, "lo"),
        ];
        assert_ne!(f, fingerprint(&two));
    }
}
