//! One session: a chart of its context at each compaction (before and
//! after), the trigger and target lines, and the list of compactions.

use maud::{Markup, html};

use crate::data::SessionDetail;
use crate::layout::{n, page};

const W: f64 = 900.0;
const H: f64 = 260.0;
const PAD: f64 = 48.0;

fn chart(d: &SessionDetail) -> Markup {
    let top = d
        .entries
        .iter()
        .map(|e| e.tokens_before)
        .chain(d.trigger)
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.1;
    let count = d.entries.len().max(1) as f64;
    let x = |i: usize| PAD + (W - 2.0 * PAD) * (i as f64 + 0.5) / count;
    let y = |t: u64| H - PAD + -(H - 2.0 * PAD) * (t as f64 / top);
    let line = |t: u64, class: &str, label: String| {
        html! {
            line class=(class) x1=(PAD) x2=(W - PAD) y1=(y(t)) y2=(y(t)) stroke-dasharray="6 4" stroke=(if class == "trigger" { "#c2410c" } else { "#15803d" }) {}
            text x=(W - PAD) y=(y(t) - 4.0) text-anchor="end" { (label) }
        }
    };
    html! {
        svg.chart #timeline viewBox=(format!("0 0 {W} {H}")) width=(W) height=(H) role="img" aria-label="context tokens at each compaction" {
            line x1=(PAD) x2=(PAD) y1=(PAD) y2=(H - PAD) stroke="#dde2ea" {}
            line x1=(PAD) x2=(W - PAD) y1=(H - PAD) y2=(H - PAD) stroke="#dde2ea" {}
            text x=(PAD - 6.0) y=(y(0) + 4.0) text-anchor="end" { "0" }
            text x=(PAD - 6.0) y=(PAD + 4.0) text-anchor="end" { (n((top / 1.1) as u64)) }
            @if let Some(t) = d.trigger { (line(t, "trigger", format!("trigger {}", n(t)))) }
            @if let Some(t) = d.target { (line(t, "target", format!("target {}", n(t)))) }
            @for (i, e) in d.entries.iter().enumerate() {
                line x1=(x(i)) x2=(x(i)) y1=(y(e.tokens_before)) y2=(y(e.tokens_after)) stroke="#2f6fdf" stroke-width="2" {}
                a href=(format!("/ui/compactions/{}", e.id)) {
                    circle.marker cx=(x(i)) cy=(y(e.tokens_before)) r="4" fill="#c2410c" {
                        title { (format!("compaction {}: {} → {} tokens", e.id, n(e.tokens_before), n(e.tokens_after))) }
                    }
                }
                circle cx=(x(i)) cy=(y(e.tokens_after)) r="3" fill="#2f6fdf" {}
            }
        }
    }
}

pub(crate) fn render(d: &SessionDetail) -> Markup {
    page(
        &d.source,
        html! {
            h1 { "Session " (d.source) }
            p.muted { "Context tokens at each compaction: before (marker) and after. Per-request usage is not recorded by this store." }
            (chart(d))
            h2 { "Compactions" }
            table #compactions {
                thead { tr { th { "Snapshot" } th { "When" } th { "Model" } th.num { "Before" } th.num { "After" } th { "Summarizer" } th.num { "Iterations dropped" } } }
                tbody {
                    @for e in d.entries.iter().rev() {
                        tr {
                            td { a href=(format!("/ui/compactions/{}", e.id)) { "#" (e.id) } }
                            td { (e.created_at) }
                            td { (e.model.as_deref().unwrap_or("—")) }
                            td.num { (n(e.tokens_before)) }
                            td.num { (n(e.tokens_after)) }
                            td { (e.summarizer.as_deref().unwrap_or("—")) }
                            td.num { (e.dropped_iterations) }
                        }
                    }
                }
            }
        },
    )
}
