//! Every session: model, context against the window, compactions, saving;
//! sortable, filterable, paged.

use maud::{Markup, html};

use crate::data::{PAGE, SessionPage, SessionQuery, SessionSort};
use crate::layout::{bar, n, page};

/// A link to this page with the query changed.
fn href(q: &SessionQuery, sort: SessionSort, asc: bool, page: usize) -> String {
    let sort = serde_json::to_value(sort)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut s = format!("/ui?sort={sort}&asc={asc}&page={page}");
    if !q.q.is_empty() {
        s.push_str("&q=");
        s.push_str(&encode(&q.q));
    }
    s
}

/// Percent-encodes a query value.
pub(crate) fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn dollars(v: Option<f64>) -> Markup {
    match v {
        Some(d) => html! { (format!("${d:.4}")) },
        None => html! { span.muted { "—" } },
    }
}

fn header(q: &SessionQuery, label: &str, key: SessionSort, num: bool) -> Markup {
    let sorted = q.sort == key;
    // A click on the sorted column flips it; on another, its default order.
    let asc = if sorted {
        !q.ascending()
    } else {
        key.ascending_by_default()
    };
    let arrow = match (sorted, q.ascending()) {
        (true, false) => " ▾",
        (true, true) => " ▴",
        _ => "",
    };
    html! { th.num[num] { a href=(href(q, key, asc, 0)) { (label) (arrow) } } }
}

pub(crate) fn render(p: &SessionPage, q: &SessionQuery) -> Markup {
    let pages = p.total.div_ceil(PAGE).max(1);
    page(
        "Sessions",
        html! {
            h1 { "Sessions" }
            form.filter method="get" action="/ui" {
                input type="search" name="q" value=(q.q) placeholder="filter by session or model";
                button type="submit" { "Filter" }
                span.muted { (n(p.total as u64)) " sessions" }
            }
            table #sessions {
                thead { tr {
                    (header(q, "Session", SessionSort::Source, false))
                    (header(q, "Model", SessionSort::Model, false))
                    (header(q, "Requests", SessionSort::Requests, true))
                    (header(q, "Context (last request)", SessionSort::Tokens, false))
                    (header(q, "Compactions", SessionSort::Compactions, true))
                    (header(q, "Tokens saved", SessionSort::Saved, true))
                    th.num { "Cost / request" }
                    th.num { "Saving / request" }
                    (header(q, "Last activity", SessionSort::Last, false))
                } }
                tbody {
                    @for s in &p.rows {
                        tr {
                            td {
                                a href=(format!("/ui/session?source={}", encode(&s.source))) { (s.source) }
                                @if s.compacted {
                                    " " span.badge.compacted title="its last request was sent compacted" { "compacted" }
                                }
                            }
                            td { (s.model.as_deref().unwrap_or("—")) }
                            td.num { @match s.requests { Some(r) => (n(r)), None => span.muted { "—" } } }
                            td { (n(s.context.get())) " " (bar(s.context.get(), s.window)) }
                            td.num {
                                @match s.last_snapshot {
                                    Some(id) => a href=(format!("/ui/compactions/{id}")) title="the last compaction" { (s.compactions) },
                                    None => (s.compactions),
                                }
                            }
                            td.num { (n(s.saved.get())) }
                            td.num { (dollars(s.cost_per_request)) }
                            td.num { (dollars(s.saving_per_request)) }
                            td { (s.last_at) }
                        }
                    }
                }
            }
            @if p.rows.is_empty() { p.muted { "No session recorded yet." } }
            div.pager {
                @if q.page > 0 { a href=(href(q, q.sort, q.ascending(), q.page - 1)) { "← newer" } }
                span.muted { "page " (q.page + 1) " of " (pages) }
                @if q.page + 1 < pages { a href=(href(q, q.sort, q.ascending(), q.page + 1)) { "older →" } }
            }
        },
    )
}
