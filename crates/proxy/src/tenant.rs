//! Tenants: who a request belongs to, derived from its credential by a
//! keyed hash, so that one proxy can serve a team without one key reading
//! what another's sessions kept. The credential itself is never kept; the
//! server secret is (in the store, so that replicas and restarts agree).

use abridge::recall::HandleKey;
use axum::http::HeaderMap;
use hmac::{KeyInit, Mac};
use sha2::Sha256;

use crate::route::{credential_headers, query_keys};

/// The proxy's secret: what tenant ids and handle keys are derived with.
#[derive(Clone)]
pub(crate) struct Secret([u8; 32]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A new random secret.
    pub(crate) fn random() -> Result<Secret, String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| format!("no random bytes for the secret: {e}"))?;
        Ok(Secret(bytes))
    }

    /// A secret from configured text (any length; hashed to 32 bytes).
    pub(crate) fn from_text(text: &str) -> Secret {
        Secret(mac(b"abridge secret", &[text.as_bytes()]))
    }

    /// As stored: 64 hex digits.
    pub(crate) fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// Back from [`to_hex`](Self::to_hex).
    pub(crate) fn from_hex(text: &str) -> Option<Secret> {
        let text = text.trim();
        if text.len() != 64 || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Secret(bytes))
    }

    /// The tenant of a request: its credential headers and `?key=`
    /// parameter, hashed with the secret. A request with none belongs to
    /// the tenant of requests without a credential (a local model's).
    pub(crate) fn tenant_of(&self, headers: &HeaderMap, query: Option<&str>) -> TenantId {
        let mut pieces: Vec<&[u8]> = Vec::new();
        for name in credential_headers() {
            for v in headers.get_all(name) {
                pieces.extend([name.as_bytes(), v.as_bytes()]);
            }
        }
        for (k, v) in query_keys(query) {
            pieces.extend([k.as_bytes(), v.as_bytes()]);
        }
        let id = mac(
            &self.0,
            &[&[b"tenant".as_slice()], pieces.as_slice()].concat(),
        );
        TenantId(hex(&id[..16]))
    }

    /// A tenant with its handle key (derived when a session opens, not on
    /// every request).
    pub(crate) fn tenant(&self, id: TenantId) -> Tenant {
        let key = HandleKey::new(mac(&self.0, &[b"handles", id.0.as_bytes()]));
        Tenant { id, key }
    }
}

/// A tenant's id: 32 hex digits, the same for every request with its
/// credential, on every replica that shares the secret.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TenantId(String);

impl TenantId {
    /// As text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// A tenant: its id, and the key its handles are derived with.
#[derive(Debug, Clone)]
pub(crate) struct Tenant {
    pub(crate) id: TenantId,
    pub(crate) key: HandleKey,
}

/// HMAC-SHA-256 of `pieces` (each after its length) under `key`.
fn mac(key: &[u8], pieces: &[&[u8]]) -> [u8; 32] {
    let Ok(mut m) = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key) else {
        unreachable!("HMAC takes a key of any length")
    };
    for p in pieces {
        m.update(&(p.len() as u64).to_le_bytes());
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn tenants_follow_the_credential_and_the_secret() {
        let s = Secret::from_text("one");
        let of = |s: &Secret, h: &HeaderMap, q| s.tenant(s.tenant_of(h, q));
        let a = of(&s, &headers(&[("authorization", "Bearer A")]), None);
        let a2 = of(
            &s,
            &headers(&[("authorization", "Bearer A"), ("x-other", "1")]),
            Some("alt=sse"),
        );
        let b = of(&s, &headers(&[("authorization", "Bearer B")]), None);
        let g = of(&s, &HeaderMap::new(), Some("alt=sse&key=G"));
        let none = of(&s, &HeaderMap::new(), None);
        assert_eq!(a.id, a2.id);
        assert_eq!(a.key, a2.key);
        assert_ne!(a.id, b.id);
        assert_ne!(a.key, b.key);
        assert_ne!(g.id, none.id);
        let two = Secret::from_text("two");
        let other = of(&two, &headers(&[("authorization", "Bearer A")]), None);
        assert_ne!(a.id, other.id, "another secret, other tenants");
        assert_ne!(a.key, other.key);
        assert_eq!(a.id.as_str().len(), 32);
        assert!(!format!("{a:?}").contains("Bearer"));
    }

    #[test]
    fn secrets_round_trip_as_hex() {
        let s = Secret::random().unwrap();
        let back = Secret::from_hex(&s.to_hex()).unwrap();
        assert_eq!(back.0, s.0);
        assert!(Secret::from_hex("zz").is_none());
        assert_eq!(format!("{s:?}"), "Secret(..)");
    }
}
