//! A streamed response: events pass to the client as they come — text and
//! thinking at once, tool calls held until the model's turn ends (a turn
//! that calls the recall tool continues without them) — and each round
//! after the first continues the same stream: its start is not repeated,
//! its blocks are numbered on, and the end carries the usage summed.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::Response;
use futures_util::StreamExt;

use super::api::{Api, Round};
use super::{Onward, Recalling, Resend, exhausted_note};
use crate::forward::{OnUsage, to_client};
use crate::metrics::Metrics;
use crate::sse::{Event, SseReader};
use crate::telemetry::Trace;
use crate::usage::{Replied, UsageTap};

/// Largest event of an upstream stream the rounds hold while it arrives.
const MAX_EVENT: usize = 64 << 20;

/// The client's stream: the rounds of `first` and its continuations.
pub(super) fn streamed<A: Api>(
    r: Recalling,
    first: reqwest::Response,
    onward: Onward,
) -> Response<Body> {
    let Onward {
        resend,
        metrics,
        trace,
        on_usage,
        extra,
    } = onward;
    let (status, head) = (first.status(), first.headers().clone());
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let usage = Report {
        done: on_usage,
        first: Replied::default(),
    };
    tokio::spawn(run::<A>(r, first, (resend, trace), metrics, usage, tx));
    let body =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    to_client(status, &head, extra, Body::from_stream(body))
}

type Sender = tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>;

/// Why a round's stream ended before its end.
enum Broken {
    /// The client went away.
    Left,
    /// The upstream did (or sent an event too large to hold).
    Upstream(&'static str),
}

/// The first round's usage is what the sent history cost; it is reported
/// when the stream ends, however it ends, with how many calls were
/// answered.
async fn run<A: Api>(
    mut r: Recalling,
    first: reqwest::Response,
    (resend, trace): (Resend, Trace),
    metrics: Arc<Metrics>,
    mut usage: Report,
    tx: Sender,
) {
    let mut machine = A::stream(&r.tool);
    let mut response = first;
    let mut rounds = 0;
    loop {
        let mut tap = (rounds == 0).then(|| UsageTap::new(A::WIRE.family(), true));
        match pass(response, &mut machine, tap.as_mut(), &tx).await {
            Ok(()) => {}
            Err(Broken::Left) => return metrics.disconnect(),
            Err(Broken::Upstream(why)) => {
                let _ = tx.send(Err(std::io::Error::other(why))).await;
                return;
            }
        }
        if let Some(t) = tap {
            usage.first = t.finish();
        }
        let calls = machine.recall_calls();
        let last = calls.is_empty() || rounds == r.max_rounds;
        let next = if last {
            None
        } else {
            rounds += 1;
            metrics.recall_round();
            let (started, n) = (std::time::SystemTime::now(), calls.len());
            let answers = r.answer(calls, &metrics).await;
            let next = match A::continue_with(&mut r.body, machine.turn(), &answers) {
                Ok(()) => resend_round(&resend, &r).await,
                Err(e) => {
                    tracing::warn!(error = %e, "a recall round could not be encoded");
                    None
                }
            };
            trace.recall_round(rounds, n, started);
            next
        };
        let Some(next) = next else {
            if last && !machine.recall_calls().is_empty() {
                metrics.recall_rounds_exhausted();
            }
            drop(usage);
            for out in machine.finish(&exhausted_note(rounds)) {
                if tx.send(Ok(out)).await.is_err() {
                    return;
                }
            }
            return;
        };
        machine.next_round();
        response = next;
    }
}

/// Passes one round's events through the API's stream to the client, and
/// through the usage tap when there is one: the events are read once.
async fn pass(
    response: reqwest::Response,
    machine: &mut impl Round,
    mut tap: Option<&mut UsageTap>,
    tx: &Sender,
) -> Result<(), Broken> {
    let mut events = SseReader::with_limit(MAX_EVENT);
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        // The upstream went away mid-stream: so does the client's.
        let chunk = chunk.map_err(|_| Broken::Upstream("upstream stream ended early"))?;
        for e in events.feed(&chunk) {
            deliver(e, machine, tap.as_deref_mut(), tx).await?;
        }
        if events.overflowed() {
            return Err(Broken::Upstream("upstream sent an event too large to hold"));
        }
    }
    match events.finish() {
        Some(e) => deliver(e, machine, tap, tx).await,
        None => Ok(()),
    }
}

async fn deliver(
    e: Event,
    machine: &mut impl Round,
    tap: Option<&mut UsageTap>,
    tx: &Sender,
) -> Result<(), Broken> {
    if let Some(t) = tap {
        t.event(&e.data);
    }
    for out in machine.event(e.name.as_deref(), &e.data) {
        tx.send(Ok(out)).await.map_err(|_| Broken::Left)?;
    }
    Ok(())
}

/// The next round's response, when the upstream gives one.
async fn resend_round(resend: &Resend, r: &Recalling) -> Option<reqwest::Response> {
    match resend.send(&r.body).await {
        Ok(next) if next.status().is_success() => Some(next),
        Ok(next) => {
            tracing::warn!(status = %next.status(), "the upstream refused a recall round");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "the upstream failed on a recall round");
            None
        }
    }
}

/// Hands the first round's usage on when dropped.
struct Report {
    done: Option<OnUsage>,
    first: Replied,
}

impl Drop for Report {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            done(std::mem::take(&mut self.first));
        }
    }
}
