//! The dashboard's token: conversation content is sensitive, so a
//! dashboard reachable beyond loopback asks for it.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::Ui;

const COOKIE: &str = "abridge_ui";

/// Lets a request through when no token is set or it carries the token
/// (bearer header, cookie, or `?token=`, which also sets the cookie).
pub(crate) async fn check(State(ui): State<Ui>, request: Request, next: Next) -> Response {
    let Some(token) = ui.token.as_deref() else {
        return next.run(request).await;
    };
    let from_query = query_token(request.uri().query());
    let presented = bearer(request.headers())
        .or_else(|| cookie(request.headers()))
        .or(from_query.clone());
    if !presented.is_some_and(|p| same(p.as_bytes(), token.as_bytes())) {
        return crate::error(
            StatusCode::UNAUTHORIZED,
            "this dashboard needs its token: open it with ?token=… (abridge ui prints the address)",
        );
    }
    let mut response = next.run(request).await;
    if from_query.is_some() {
        let cookie = format!("{COOKIE}={token}; Path=/ui; HttpOnly; SameSite=Strict");
        if let Ok(v) = cookie.parse() {
            response.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    response.into_response()
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    v.strip_prefix("Bearer ").map(str::to_owned)
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            kv.trim()
                .strip_prefix(COOKIE)?
                .strip_prefix('=')
                .map(str::to_owned)
        })
}

fn query_token(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("token=").map(str::to_owned))
}

/// Equality that takes the same time wherever the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
