//! The operators' dashboard: every session or stored conversation, its
//! compactions, and each compaction in full — policies, summarizer
//! attempts, verification, the briefing, the history before and after side
//! by side, and the original to download. Server-rendered HTML (maud, so
//! every value is escaped), one embedded stylesheet, no script and no
//! request to another origin. Read-only.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = abridge_store::Store::open("abridge.sqlite".as_ref())?;
//! let app = abridge_ui::router(abridge_ui::Ui::new(Box::new(store), None));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8788").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

mod auth;
mod data;
mod layout;
mod pages;

use std::sync::{Arc, Mutex};

use abridge_store::SnapshotStore;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

pub use data::{SessionQuery, SessionSort, SessionSummary};

/// What the dashboard reads, and the token that guards it.
#[derive(Clone)]
pub struct Ui {
    store: Arc<Mutex<Box<dyn SnapshotStore + Send>>>,
    token: Option<Arc<str>>,
}

impl Ui {
    /// A dashboard over `store`; with `token`, every page asks for it
    /// (`Authorization: Bearer`, or `?token=` once, then a cookie).
    pub fn new(store: Box<dyn SnapshotStore + Send>, token: Option<String>) -> Self {
        Ui {
            store: Arc::new(Mutex::new(store)),
            token: token.map(Arc::from),
        }
    }

    /// Runs `f` on the store on a blocking thread (the stores block).
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn SnapshotStore) -> Result<T, String> + Send + 'static,
    ) -> Result<T, Response> {
        let store = self.store.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let guard = store
                .lock()
                .map_err(|_| "the store lock is poisoned".to_owned())?;
            f(guard.as_ref())
        })
        .await;
        match joined {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(error(StatusCode::NOT_FOUND, &e)),
            Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())),
        }
    }
}

/// The dashboard's routes, all under `/ui`.
pub fn router(ui: Ui) -> Router {
    let guarded = Router::new()
        .route("/ui", get(sessions))
        .route("/ui/", get(sessions))
        .route("/ui/session", get(session))
        .route("/ui/compactions/{id}", get(compaction))
        .route("/ui/compactions/{id}/original.json", get(original))
        .route_layer(axum::middleware::from_fn_with_state(
            ui.clone(),
            auth::check,
        ));
    Router::new()
        .route("/ui/style.css", get(style))
        .merge(guarded)
        .with_state(ui)
}

async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("style.css"),
    )
        .into_response()
}

async fn sessions(State(ui): State<Ui>, Query(q): Query<SessionQuery>) -> Response {
    match ui
        .read(move |s| data::sessions(s, &q).map(|page| (page, q)))
        .await
    {
        Ok((page, q)) => Html(pages::sessions::render(&page, &q).into_string()).into_response(),
        Err(r) => r,
    }
}

#[derive(serde::Deserialize)]
struct SourceParam {
    source: String,
}

async fn session(State(ui): State<Ui>, Query(p): Query<SourceParam>) -> Response {
    let source = p.source;
    match ui.read(move |s| data::session(s, &source)).await {
        Ok(detail) => Html(pages::session::render(&detail).into_string()).into_response(),
        Err(r) => r,
    }
}

async fn compaction(State(ui): State<Ui>, Path(id): Path<i64>) -> Response {
    match ui.read(move |s| data::compaction(s, id)).await {
        Ok(detail) => Html(pages::compaction::render(&detail).into_string()).into_response(),
        Err(r) => r,
    }
}

/// The history before the compaction, as `abridge restore` prints it.
async fn original(State(ui): State<Ui>, Path(id): Path<i64>) -> Response {
    let got = ui
        .read(move |s| {
            let snap = s.get(abridge::SnapshotId(id)).map_err(|e| e.to_string())?;
            serde_json::to_string_pretty(&snap.before).map_err(|e| e.to_string())
        })
        .await;
    match got {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, "application/json".to_owned()),
                (
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"abridge-snapshot-{id}-original.json\""),
                ),
            ],
            body + "\n",
        )
            .into_response(),
        Err(r) => r,
    }
}

/// An error page.
fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        Html(layout::page("Error", maud::html! { h1 { (status) } p { (message) } }).into_string()),
    )
        .into_response()
}
