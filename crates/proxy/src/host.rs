//! The `Host` check: a browser page on another site can reach a server on
//! loopback by pointing its own name at 127.0.0.1 (DNS rebinding); its
//! requests then carry that name as their `Host`. Only names the proxy
//! answers to get through: an IP address (no rebinding names one),
//! `localhost`, and the configured `[serve] allowed_hosts`.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Response, StatusCode, header};
use axum::middleware::Next;

/// `router` with every request's `Host` checked: anything else than an IP
/// address, `localhost` or one of `allowed` (a name, or `name:port`) gets
/// 421 Misdirected Request.
pub fn guard_host(router: Router, allowed: &[String]) -> Router {
    let allowed: Arc<Vec<String>> = Arc::new(
        allowed
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect(),
    );
    router.layer(axum::middleware::from_fn_with_state(allowed, check))
}

async fn check(
    State(allowed): State<Arc<Vec<String>>>,
    request: Request,
    next: Next,
) -> Response<Body> {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{fffd}").to_ascii_lowercase());
    match host {
        Some(h) if !is_allowed(&h, &allowed) => misdirected(&h),
        _ => next.run(request).await,
    }
}

/// True when `host` (a `Host` header, lower case) names this proxy.
fn is_allowed(host: &str, allowed: &[String]) -> bool {
    let name = strip_port(host);
    let ip = name.trim_start_matches('[').trim_end_matches(']');
    ip.parse::<IpAddr>().is_ok()
        || name == "localhost"
        || allowed.iter().any(|a| a == host || a == name)
}

/// `host` without its `:port`.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.split_once(']') {
            Some((h, rest)) if rest.is_empty() || is_port(rest) => &host[..h.len() + 1],
            _ => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if is_port(&format!(":{port}")) => name,
        _ => host,
    }
}

/// `:` and digits.
fn is_port(s: &str) -> bool {
    s.strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn misdirected(host: &str) -> Response<Body> {
    let shown: String = host
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(100)
        .collect();
    let body = serde_json::json!({"error": {
        "type": "abridge_proxy_error",
        "message": format!(
            "this server does not answer to the name {shown:?}: call it by its address, or add the name to [serve] allowed_hosts (--allowed-host NAME)"
        ),
    }});
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::MISDIRECTED_REQUEST;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_localhost_and_configured_names_only() {
        let allowed = vec![
            "abridge.internal".to_owned(),
            "team.example:8443".to_owned(),
        ];
        for ok in [
            "127.0.0.1:8787",
            "127.0.0.1",
            "[::1]:8787",
            "10.1.2.3:80",
            "localhost:8787",
            "localhost",
            "abridge.internal",
            "abridge.internal:9999",
            "team.example:8443",
        ] {
            assert!(is_allowed(ok, &allowed), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:8787",
            "127.0.0.1.nip.io:8787",
            "localhost.attacker.example",
            "team.example:80",
            "[::1]x:80",
            "",
        ] {
            assert!(!is_allowed(bad, &allowed), "{bad}");
        }
    }
}
