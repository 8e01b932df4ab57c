//! The operators' dashboard: every session or stored conversation, its
//! compactions, and each compaction in full — policies, summarizer
//! attempts, verification, the briefing, the history before and after side
//! by side, the original to download, and what the requests saved. Server-rendered HTML (maud, so
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

    fn with<T>(
        &self,
        f: impl FnOnce(&dyn SnapshotStore) -> Result<T, String>,
    ) -> Result<T, String> {
        let guard = self
            .store
            .lock()
            .map_err(|_| "the store lock is poisoned".to_owned())?;
        f(guard.as_ref())
    }

    /// The sessions page (`GET /ui`), rendered; blocks on the store.
    pub fn sessions_page(&self, q: &SessionQuery) -> Result<String, String> {
        let page = self.with(|s| data::sessions(s, q))?;
        Ok(pages::sessions::render(&page, q).into_string())
    }

    /// A session's page (`GET /ui/session?source=`), rendered; blocks on the store.
    pub fn session_page(&self, source: &str) -> Result<String, String> {
        let detail = self.with(|s| data::session(s, source))?;
        Ok(pages::session::render(&detail).into_string())
    }

    /// A compaction's page (`GET /ui/compactions/{id}`), rendered; blocks on the store.
    pub fn compaction_page(&self, id: i64) -> Result<String, String> {
        let detail = self.with(|s| data::compaction(s, id))?;
        Ok(pages::compaction::render(&detail).into_string())
    }

    /// The savings page (`GET /ui/savings`), rendered; blocks on the store.
    pub fn savings_page(&self) -> Result<String, String> {
        use abridge_store::GroupBy;
        let savings = self.with(|s| {
            let by = |g, limit| s.totals(g, limit).map_err(|e| e.to_string());
            Ok(pages::savings::Savings {
                days: by(GroupBy::Day, 90)?,
                tenants: by(GroupBy::Tenant, 100)?,
                models: by(GroupBy::Model, 100)?,
            })
        })?;
        Ok(pages::savings::render(&savings).into_string())
    }

    /// Runs `f` on a blocking thread (the stores block).
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Ui) -> Result<T, String> + Send + 'static,
    ) -> Result<T, Response> {
        let ui = self.clone();
        let joined = tokio::task::spawn_blocking(move || f(&ui)).await;
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
        .route("/ui/savings", get(savings))
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
    html(ui.read(move |ui| ui.sessions_page(&q)).await)
}

async fn savings(State(ui): State<Ui>) -> Response {
    html(ui.read(|ui| ui.savings_page()).await)
}

#[derive(serde::Deserialize)]
struct SourceParam {
    source: String,
}

async fn session(State(ui): State<Ui>, Query(p): Query<SourceParam>) -> Response {
    html(ui.read(move |ui| ui.session_page(&p.source)).await)
}

async fn compaction(State(ui): State<Ui>, Path(id): Path<i64>) -> Response {
    html(ui.read(move |ui| ui.compaction_page(id)).await)
}

fn html(page: Result<String, Response>) -> Response {
    page.map_or_else(|r| r, |h| Html(h).into_response())
}

/// The history before the compaction, as `abridge restore` prints it.
async fn original(State(ui): State<Ui>, Path(id): Path<i64>) -> Response {
    let got = ui
        .read(move |ui| {
            ui.with(|s| {
                let snap = s.get(abridge::SnapshotId(id)).map_err(|e| e.to_string())?;
                serde_json::to_string_pretty(&snap.before).map_err(|e| e.to_string())
            })
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
