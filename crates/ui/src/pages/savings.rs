//! What the proxy's requests added up to: tokens the clients sent against
//! tokens forwarded, per day on a chart, and dollars with abridge and
//! (estimated) without, per tenant (its hashed id) and model.

use abridge_store::Totals;
use maud::{Markup, html};

use crate::layout::{n, page};

const W: f64 = 900.0;
const H: f64 = 260.0;
const PAD: f64 = 56.0;

/// The page's lines: by day (newest first), by tenant, by model.
pub(crate) struct Savings {
    pub(crate) days: Vec<Totals>,
    pub(crate) tenants: Vec<Totals>,
    pub(crate) models: Vec<Totals>,
}

fn share(t: &Totals) -> String {
    match t.client_tokens {
        0 => "—".to_owned(),
        c => format!("{:.1}%", 100.0 * t.tokens_saved() as f64 / c as f64),
    }
}

fn usd(v: f64) -> String {
    format!("${v:.4}")
}

/// Tokens sent and forwarded per day, oldest on the left.
fn chart(days: &[Totals]) -> Markup {
    let days: Vec<&Totals> = days.iter().rev().collect();
    let top = days
        .iter()
        .map(|d| d.client_tokens)
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.1;
    let count = days.len().max(1) as f64;
    let x = |i: usize| PAD + (W - 2.0 * PAD) * (i as f64 + 0.5) / count;
    let y = |v: u64| H - PAD - (H - 2.0 * PAD) * (v as f64 / top);
    let line = |id: &str, color: &str, v: &dyn Fn(&Totals) -> u64| {
        let pts: Vec<String> = days
            .iter()
            .enumerate()
            .map(|(i, d)| format!("{:.1},{:.1}", x(i), y(v(d))))
            .collect();
        html! {
            polyline id=(id) points=(pts.join(" ")) fill="none" stroke=(color) stroke-width="2" {}
            @for (i, d) in days.iter().enumerate() {
                circle cx=(x(i)) cy=(y(v(d))) r="3" fill=(color) {
                    title { (d.day) ": " (n(v(d))) " tokens" }
                }
            }
        }
    };
    html! {
        svg.chart #savings-chart viewBox=(format!("0 0 {W} {H}")) width=(W) height=(H) role="img" aria-label="tokens sent and forwarded per day" {
            line x1=(PAD) x2=(PAD) y1=(PAD) y2=(H - PAD) stroke="#dde2ea" {}
            line x1=(PAD) x2=(W - PAD) y1=(H - PAD) y2=(H - PAD) stroke="#dde2ea" {}
            text x=(PAD - 6.0) y=(H - PAD + 4.0) text-anchor="end" { "0" }
            text x=(PAD - 6.0) y=(PAD + 4.0) text-anchor="end" { (n((top / 1.1) as u64)) }
            @if let (Some(first), Some(last)) = (days.first(), days.last()) {
                text x=(PAD) y=(H - PAD + 20.0) { (first.day) }
                text x=(W - PAD) y=(H - PAD + 20.0) text-anchor="end" { (last.day) }
            }
            text x=(PAD + 8.0) y=(PAD - 12.0) fill="#9ca3af" { "sent by the clients" }
            text x=(PAD + 160.0) y=(PAD - 12.0) fill="#2f6fdf" { "forwarded" }
            (line("client-line", "#9ca3af", &|d| d.client_tokens))
            (line("forwarded-line", "#2f6fdf", &|d| d.forwarded_tokens))
        }
    }
}

fn table(id: &str, what: &str, lines: &[Totals], key: impl Fn(&Totals) -> &str) -> Markup {
    html! {
        table id=(id) {
            thead { tr {
                th { (what) }
                th.num { "Requests" } th.num { "Rewritten" }
                th.num { "Tokens sent" } th.num { "Forwarded" } th.num { "Saved" }
                th.num { "$ with" } th.num { "$ without" } th.num { "$ saved" }
                th.num title="requests sent over the model's window: unanswerable without abridge" { "Over window" }
            } }
            tbody {
                @for t in lines {
                    tr {
                        td { @match key(t) { "" => span.muted { "(none)" }, k => code { (k) } } }
                        td.num { (n(t.requests)) } td.num { (n(t.compacted)) }
                        td.num.client { (n(t.client_tokens)) } td.num.forwarded { (n(t.forwarded_tokens)) }
                        td.num { (share(t)) }
                        td.num { (usd(t.cost_compared)) } td.num { (usd(t.cost_without)) }
                        td.num.saved { (usd(t.saved())) }
                        td.num { (n(t.over_window)) }
                    }
                }
            }
        }
    }
}

pub(crate) fn render(s: &Savings) -> Markup {
    let mut all = Totals::default();
    for d in &s.days {
        all.merge(d);
    }
    page(
        "Savings",
        html! {
            h1 { "Savings" }
            @if all.requests == 0 {
                p.muted { "No request recorded yet: a proxy (abridge serve, abridge run) with this store records each one." }
            } @else {
                p.muted { "Days with requests: " (s.days.len()) ". Tokens in the provider's units: what it reported, plus what abridge left out. Dollars at the registry's prices, on the requests priced both ways." }
                div.cards {
                    div.card { "Requests" b #total-requests { (n(all.requests)) } }
                    div.card { "Tokens sent by the clients" b #total-client { (n(all.client_tokens)) } }
                    div.card { "Tokens forwarded" b #total-forwarded { (n(all.forwarded_tokens)) } }
                    div.card { "Saved" b { (share(&all)) } }
                    div.card { "$ with / without" b { (usd(all.cost_compared)) " / " (usd(all.cost_without)) } }
                    div.card { "$ saved" b #total-saved { (usd(all.saved())) } }
                    div.card title="unanswerable without abridge; not priced as a saving" { "Over the window" b { (n(all.over_window)) } }
                }
                (chart(&s.days))
                h2 { "Per tenant" }
                (table("per-tenant", "Tenant (hashed id)", &s.tenants, |t| &t.tenant))
                h2 { "Per model" }
                (table("per-model", "Model", &s.models, |t| &t.model))
                h2 { "Per day" }
                (table("per-day", "Day (UTC)", &s.days, |t| &t.day))
            }
        },
    )
}
