//! One session: a chart of its context per request (abridge's count and
//! the provider's usage) with the trigger and target lines and a marker at
//! each compaction — or, for a store without a request log, its context at
//! each compaction — and the list of compactions. The chart is in the
//! provider's units throughout, as the trigger is.

use abridge_tokens::Calibrated;
use maud::{Markup, html};

use crate::data::SessionDetail;
use crate::layout::{n, page};

const W: f64 = 900.0;
const H: f64 = 280.0;
const PAD: f64 = 52.0;

/// Maps points onto the chart.
struct Scale {
    top: f64,
    count: f64,
}

impl Scale {
    /// Room for the highest of `peaks` and the trigger line, `count` points across.
    fn fit(
        peaks: impl Iterator<Item = Calibrated>,
        trigger: Option<Calibrated>,
        count: usize,
    ) -> Scale {
        let top = peaks.chain(trigger).max().map_or(1, Calibrated::get).max(1);
        Scale {
            top: top as f64 * 1.1,
            count: count.max(1) as f64,
        }
    }

    fn x(&self, i: usize) -> f64 {
        PAD + (W - 2.0 * PAD) * (i as f64 + 0.5) / self.count
    }
    fn y(&self, t: Calibrated) -> f64 {
        H - PAD - (H - 2.0 * PAD) * (t.get() as f64 / self.top)
    }
}

/// Axes, and the trigger and target lines.
fn frame(d: &SessionDetail, s: &Scale, what: &str) -> Markup {
    let level = |t: Calibrated, class: &str, color: &str| {
        html! {
            line class=(class) x1=(PAD) x2=(W - PAD) y1=(s.y(t)) y2=(s.y(t)) stroke-dasharray="6 4" stroke=(color) {}
            text x=(W - PAD) y=(s.y(t) - 4.0) text-anchor="end" { (class) " " (n(t.get())) }
        }
    };
    html! {
        line x1=(PAD) x2=(PAD) y1=(PAD) y2=(H - PAD) stroke="#dde2ea" {}
        line x1=(PAD) x2=(W - PAD) y1=(H - PAD) y2=(H - PAD) stroke="#dde2ea" {}
        text x=(PAD - 6.0) y=(s.y(Calibrated::ZERO) + 4.0) text-anchor="end" { "0" }
        text x=(PAD - 6.0) y=(PAD + 4.0) text-anchor="end" { (n((s.top / 1.1) as u64)) }
        text x=(W / 2.0) y=(H - PAD + 28.0) text-anchor="middle" { (what) }
        @if let Some(t) = d.trigger { (level(t, "trigger", "#c2410c")) }
        @if let Some(t) = d.target { (level(t, "target", "#15803d")) }
    }
}

fn polyline(points: impl Iterator<Item = (f64, f64)>, id: &str, color: &str) -> Markup {
    let pts: Vec<String> = points.map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    html! { polyline id=(id) points=(pts.join(" ")) fill="none" stroke=(color) stroke-width="2" {} }
}

fn svg(body: Markup) -> Markup {
    html! {
        svg.chart #timeline viewBox=(format!("0 0 {W} {H}")) width=(W) height=(H) role="img" aria-label="context tokens per request" {
            (body)
        }
    }
}

/// Context per request: abridge's count, the provider's usage, compactions.
fn requests_chart(d: &SessionDetail) -> Markup {
    let r = &d.requests;
    let reported = |q: &abridge_store::RequestRecord| q.usage.map(Calibrated::from_reported);
    let peaks = r
        .iter()
        .map(|q| q.tokens.max(reported(q).unwrap_or_default()));
    let s = Scale::fit(peaks, d.trigger, r.len());
    svg(html! {
        (frame(d, &s, &format!("{} requests", r.len())))
        (polyline(r.iter().enumerate().map(|(i, q)| (s.x(i), s.y(q.tokens))), "abridge-line", "#2f6fdf"))
        (polyline(r.iter().enumerate().filter_map(|(i, q)| Some((s.x(i), s.y(reported(q)?)))), "usage-line", "#8b5cf6"))
        @for (i, q) in r.iter().enumerate().filter(|(_, q)| q.recalls > 0) {
            rect.recall x=(s.x(i) - 4.0) y=(s.y(q.tokens) - 4.0) width="8" height="8" fill="#0f766e" {
                title { (format!("request {}: {} recalled", i + 1, originals(q.recalls))) }
            }
        }
        @for (i, q) in r.iter().enumerate() {
            @if let Some(id) = q.snapshot {
                a href=(format!("/ui/compactions/{id}")) {
                    circle.marker cx=(s.x(i)) cy=(s.y(q.tokens)) r="5" fill="#c2410c" {
                        title { (format!("request {}: compaction {id}, {} tokens sent", i + 1, n(q.tokens.get()))) }
                    }
                }
            }
        }
    })
}

/// Context at each compaction, before (marker) and after.
fn compactions_chart(d: &SessionDetail) -> Markup {
    let e = &d.entries;
    let s = Scale::fit(
        e.iter().map(|e| e.provider_tokens_before),
        d.trigger,
        e.len(),
    );
    svg(html! {
        (frame(d, &s, &format!("{} compactions (no request log in this store)", e.len())))
        @for (i, e) in e.iter().enumerate() {
            line x1=(s.x(i)) x2=(s.x(i)) y1=(s.y(e.provider_tokens_before)) y2=(s.y(e.provider_tokens_after)) stroke="#2f6fdf" stroke-width="2" {}
            a href=(format!("/ui/compactions/{}", e.id)) {
                circle.marker cx=(s.x(i)) cy=(s.y(e.provider_tokens_before)) r="4" fill="#c2410c" {
                    title { (format!("compaction {}: {} → {} tokens", e.id, n(e.provider_tokens_before.get()), n(e.provider_tokens_after.get()))) }
                }
            }
            circle cx=(s.x(i)) cy=(s.y(e.provider_tokens_after)) r="3" fill="#2f6fdf" {}
        }
    })
}

/// `1 original`, `3 originals`.
fn originals(n: u32) -> String {
    match n {
        1 => "1 original".to_owned(),
        n => format!("{n} originals"),
    }
}

fn dollars(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_owned(), |d| format!("${d:.4}"))
}

pub(crate) fn render(d: &SessionDetail) -> Markup {
    let compacted = d.requests.iter().filter(|r| r.compacted).count();
    page(
        &d.source,
        html! {
            h1 { "Session " (d.source) }
            div.cards {
                div.card { "Requests" b #requests { (d.requests.len()) } }
                div.card { "Sent compacted" b { (compacted) } }
                div.card { "Recalled" b #recalled { (d.requests.iter().map(|r| r.recalls).sum::<u32>()) } }
                div.card { "Compactions" b { (d.entries.len()) } }
                div.card { "Estimated cost" b { (dollars(d.cost)) } }
                div.card { "Estimated saving" b { (dollars(d.saving)) } }
            }
            @if d.requests.is_empty() {
                (compactions_chart(d))
            } @else {
                p.muted {
                    span style="color:#2f6fdf" { "■ abridge's count of what was sent" } " · "
                    span style="color:#8b5cf6" { "■ provider-reported prompt tokens" } " · "
                    span style="color:#c2410c" { "● compaction" }
                }
                (requests_chart(d))
            }
            h2 { "Compactions" }
            table #compactions {
                thead { tr { th { "Snapshot" } th { "When" } th { "Model" } th.num { "Before" } th.num { "After" } th { "Summarizer" } th.num { "Iterations dropped" } } }
                tbody {
                    @for e in d.entries.iter().rev() {
                        tr {
                            td { a href=(format!("/ui/compactions/{}", e.id)) { "#" (e.id) } }
                            td { (e.created_at) }
                            td { (e.model.as_deref().unwrap_or("—")) }
                            td.num { (n(e.tokens_before.get())) }
                            td.num { (n(e.tokens_after.get())) }
                            td { (e.summarizer.as_deref().unwrap_or("—")) }
                            td.num { (e.dropped_iterations) }
                        }
                    }
                }
            }
        },
    )
}
