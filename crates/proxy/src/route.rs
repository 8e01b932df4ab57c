//! Where a request goes: the provider whose API it speaks (by its path,
//! then by its credential headers), that provider's upstream and no other,
//! with only that provider's credentials, on a path that cannot leave the
//! upstream's base.

use axum::http::{HeaderMap, Uri};

pub(crate) use abridge::model::Provider;

/// The provider of a request for `path` with `headers` and `query`: by its
/// path, then (a path several APIs have) by its credential.
pub(crate) fn provider_of(path: &str, headers: &HeaderMap, query: Option<&str>) -> Provider {
    let gemini_path = ["/v1beta/", "/v1alpha/", "/upload/", "/download/"]
        .iter()
        .any(|p| path.starts_with(p))
        || path
            .strip_prefix("/v1/models/")
            .is_some_and(|rest| rest.contains(':'));
    if gemini_path {
        return Provider::Gemini;
    }
    if path == "/v1/messages" || path.starts_with("/v1/messages/") || path == "/v1/complete" {
        return Provider::Anthropic;
    }
    if path == "/v1/chat/completions" || path.starts_with("/v1/responses") {
        return Provider::OpenAi;
    }
    // A path several APIs have (`/v1/models`, `/v1/files`…): the
    // credential says whose.
    let owned = |p: Provider| {
        let f = p.facts();
        f.own_credentials.iter().any(|h| headers.contains_key(*h))
            || f.fixed_headers
                .iter()
                .any(|(h, _)| headers.contains_key(*h))
            || query_keys(query).any(|(k, _)| f.key_param == Some(k))
    };
    [Provider::Gemini, Provider::Anthropic]
        .into_iter()
        .find(|p| owned(*p))
        .unwrap_or(Provider::OpenAi)
}

/// Takes out of `headers` the credentials of providers other than `to`.
pub(crate) fn keep_own_credentials(to: Provider, headers: &mut HeaderMap) {
    for p in Provider::ALL.into_iter().filter(|p| *p != to) {
        for name in p.facts().own_credentials {
            headers.remove(*name);
        }
    }
}

/// The model of a Gemini conversation request (`POST
/// /{v1,v1beta}/models/{model}:generateContent` or
/// `:streamGenerateContent`), which its path names: the body does not.
pub(crate) fn gemini_conversation(path: &str) -> Option<&str> {
    let rest = path
        .strip_prefix("/v1beta/models/")
        .or_else(|| path.strip_prefix("/v1/models/"))?;
    let (model, method) = rest.split_once(':')?;
    let conversation = matches!(method, "generateContent" | "streamGenerateContent");
    (conversation && !model.is_empty() && !model.contains('/')).then_some(model)
}

/// The headers that carry a credential: `authorization` (every provider
/// takes bearers) and each provider's own, in the order tenant ids hash
/// them. The order is part of every tenant's id: it does not change.
pub(crate) fn credential_headers() -> impl Iterator<Item = &'static str> {
    let providers = [Provider::Anthropic, Provider::Gemini, Provider::OpenAi];
    std::iter::once("authorization").chain(
        providers
            .into_iter()
            .flat_map(|p| p.facts().own_credentials.iter().copied()),
    )
}

/// Whether query parameter `name` carries a provider's key (Gemini's `key`).
fn is_key_param(name: &str) -> bool {
    Provider::ALL
        .into_iter()
        .any(|p| p.facts().key_param == Some(name))
}

/// Why a request cannot be sent where its path says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The path could reach beyond the upstream's base.
    Escape(&'static str),
    /// The provider has no upstream configured.
    NoUpstream(Provider),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Escape(what) => write!(
                f,
                "the request path holds {what}, which could lead outside the configured upstream; the proxy does not forward it"
            ),
            Refused::NoUpstream(p) => write!(
                f,
                "this is a request for the {} API, and the proxy has no upstream for it: set [serve] {} (or --{})",
                p.as_str(),
                p.facts().upstream_key,
                p.facts().upstream_key.replace('_', "-")
            ),
        }
    }
}

/// An upstream's base, checked once: where every URL for it must stay.
#[derive(Debug, Clone)]
pub(crate) struct Base {
    text: String,
    url: reqwest::Url,
}

impl Base {
    /// A base from configuration (`None` when empty: the provider is off).
    pub(crate) fn parse(text: &str) -> Result<Option<Base>, String> {
        let text = text.trim().trim_end_matches('/');
        if text.is_empty() {
            return Ok(None);
        }
        let url = reqwest::Url::parse(text).map_err(|e| format!("{text:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(format!("{text:?}: not an http:// or https:// URL"));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
            return Err(format!("{text:?}: a base takes no query, fragment or user"));
        }
        Ok(Some(Base {
            text: text.to_owned(),
            url,
        }))
    }

    /// The URL of `rest` (a path and query) under this base; refused when
    /// it would not stay under it.
    pub(crate) fn join(&self, rest: &str) -> Result<String, Refused> {
        check_path(rest)?;
        let joined = format!("{}{rest}", self.text);
        let url = reqwest::Url::parse(&joined).map_err(|_| Refused::Escape("an unusual form"))?;
        let base_path = self.url.path().trim_end_matches('/');
        let stays = url.scheme() == self.url.scheme()
            && url.host() == self.url.host()
            && url.port_or_known_default() == self.url.port_or_known_default()
            && url.username().is_empty()
            && url.password().is_none()
            && url.path().starts_with(base_path);
        if !stays {
            return Err(Refused::Escape("an unusual form"));
        }
        Ok(joined)
    }
}

/// Refuses a path and query that could leave the base it is joined to:
/// user info, a second authority, a step up, or their encoded forms.
fn check_path(rest: &str) -> Result<(), Refused> {
    let (path, _query) = rest.split_once('?').unwrap_or((rest, ""));
    // Empty: the base itself (with a query, or not).
    if !path.is_empty() && !path.starts_with('/') {
        return Err(Refused::Escape("no leading '/'"));
    }
    if path.contains('@') {
        return Err(Refused::Escape("'@'"));
    }
    if path.contains('\\') {
        return Err(Refused::Escape("a backslash"));
    }
    if path.contains("//") {
        return Err(Refused::Escape("'//'"));
    }
    if path.split('/').any(|s| s == ".." || s == ".") {
        return Err(Refused::Escape("a '.' or '..' segment"));
    }
    let lower = path.to_ascii_lowercase();
    for (code, what) in [
        ("%2e", "an encoded '.'"),
        ("%2f", "an encoded '/'"),
        ("%5c", "an encoded backslash"),
        ("%40", "an encoded '@'"),
        ("%25", "an encoded '%'"),
    ] {
        if lower.contains(code) {
            return Err(Refused::Escape(what));
        }
    }
    if path.chars().any(|c| c.is_control()) {
        return Err(Refused::Escape("a control character"));
    }
    Ok(())
}

/// The request's own target (path and query), refused when it names a
/// host (absolute form) or could leave any base it is joined to.
pub(crate) fn origin_form(uri: &Uri) -> Result<&str, Refused> {
    if uri.scheme().is_some() || uri.authority().is_some() {
        return Err(Refused::Escape("a scheme or host"));
    }
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    check_path(target)?;
    Ok(target)
}

/// The passthroughs already logged: once per tenant, provider, method and
/// path (bounded: forgetting means logging again).
#[derive(Debug, Default)]
pub(crate) struct Passthroughs(std::sync::Mutex<std::collections::HashSet<u64>>);

/// Most passthroughs remembered.
const LOGGED: usize = 10_000;

impl Passthroughs {
    /// Logs a request of `tenant` forwarded as sent, the first time one
    /// like it is.
    pub(crate) fn note(
        &self,
        tenant: &str,
        parts: &axum::http::request::Parts,
        provider: Provider,
    ) {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for piece in [
            tenant,
            provider.as_str(),
            parts.method.as_str(),
            parts.uri.path(),
        ] {
            h.update(piece.as_bytes());
            h.update(b"\0");
        }
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= LOGGED {
            seen.clear();
        }
        if seen.insert(h.digest()) {
            tracing::info!(
                provider = provider.as_str(),
                method = %parts.method,
                path = parts.uri.path(),
                "forwarding a request abridge does not model, as sent (logged once per key and path; counted in abridge_passthrough_total{{why=\"unmodeled\"}})"
            );
        }
    }
}

/// `path_and_query` without a key parameter (Gemini's `key`) (for any other
/// provider: a key never travels to another provider's host).
pub(crate) fn without_query_key(path_and_query: &str) -> std::borrow::Cow<'_, str> {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return path_and_query.into();
    };
    if query_keys(Some(query)).next().is_none() {
        return path_and_query.into();
    }
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| !is_key_param(kv.split_once('=').map_or(*kv, |(k, _)| k)))
        .collect();
    match kept.is_empty() {
        true => path.to_owned().into(),
        false => format!("{path}?{}", kept.join("&")).into(),
    }
}

/// The query parameters that carry a provider's key, name and value, in order.
pub(crate) fn query_keys(query: Option<&str>) -> impl Iterator<Item = (&str, &str)> {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| is_key_param(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_headers_keep_the_order_tenant_ids_were_first_hashed_in() {
        let names: Vec<&str> = credential_headers().collect();
        assert_eq!(
            names,
            ["authorization", "x-api-key", "x-goog-api-key", "api-key"]
        );
    }
    use axum::http::HeaderValue;

    #[test]
    fn paths_name_their_provider_and_credentials_break_ties() {
        let none = HeaderMap::new();
        let of = |p: &str| provider_of(p, &none, None);
        assert_eq!(
            of("/v1beta/models/gemini-2.5-pro:generateContent"),
            Provider::Gemini
        );
        assert_eq!(
            of("/v1/models/gemini-2.5-pro:streamGenerateContent"),
            Provider::Gemini
        );
        assert_eq!(of("/upload/v1beta/files"), Provider::Gemini);
        assert_eq!(of("/v1/messages/count_tokens"), Provider::Anthropic);
        assert_eq!(of("/v1/responses/compact"), Provider::OpenAi);
        assert_eq!(of("/v1/models"), Provider::OpenAi);
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("k"));
        assert_eq!(provider_of("/v1/models", &h, None), Provider::Anthropic);
        assert_eq!(
            provider_of("/v1/models", &none, Some("key=g")),
            Provider::Gemini
        );
        // The path wins over a stray header.
        assert_eq!(
            provider_of("/v1/chat/completions", &h, None),
            Provider::OpenAi
        );
    }

    #[test]
    fn a_path_never_leaves_its_base() {
        for base in ["http://127.0.0.1:18101", "http://127.0.0.1:18101/v1"] {
            let b = Base::parse(base).unwrap().unwrap();
            assert_eq!(b.join("/models?x=1").unwrap(), format!("{base}/models?x=1"));
            assert_eq!(b.join("").unwrap(), base);
            assert_eq!(b.join("?x=1").unwrap(), format!("{base}?x=1"));
            for bad in [
                "@127.0.0.1:18102/v1/models",
                "/@127.0.0.1:18102/v1/models",
                "//127.0.0.1:18102/v1/models",
                "/v1/../../x",
                "/v1/%2e%2e/x",
                "/v1/%2E%2E/x",
                "/v1%2f..%2fx",
                "/v1\\..\\x",
                "/v1/%40evil",
                "/v1/%252e%252e/x",
                ":18102/v1/models",
                ".evil.example/v1",
            ] {
                assert!(b.join(bad).is_err(), "{base} + {bad}");
            }
        }
        assert!(Base::parse("").unwrap().is_none());
        assert!(Base::parse("ftp://x").is_err());
        assert!(Base::parse("http://u:p@x").is_err());
    }

    #[test]
    fn the_key_parameter_goes_only_to_gemini() {
        assert_eq!(
            without_query_key("/v1/models?key=s&alt=sse"),
            "/v1/models?alt=sse"
        );
        assert_eq!(without_query_key("/v1/models?key=s"), "/v1/models");
        assert_eq!(without_query_key("/v1/models?keys=1"), "/v1/models?keys=1");
        let uri: Uri = "http://evil.example/v1/models".parse().unwrap();
        assert!(origin_form(&uri).is_err());
    }
}
