//! One compaction: figures, policies, summarizer attempts with their
//! verification, the briefing, and the history before and after side by
//! side with changed messages highlighted and expandable.

use abridge::AttemptOutcome;
use maud::{Markup, html};

use crate::data::{CompactionDetail, Line};
use crate::layout::{n, page};
use crate::pages::sessions::encode;

/// Characters of a message shown when it is expanded.
const SHOWN: usize = 4_000;

fn attempts(d: &CompactionDetail) -> Markup {
    html! {
        table #attempts {
            thead { tr { th { "Summarizer" } th.num { "ms" } th { "Outcome" } th { "Verification" } } }
            tbody {
                @for a in &d.report.attempts {
                    tr {
                        td { (a.summarizer) }
                        td.num { (a.ms) }
                        @match &a.outcome {
                            AttemptOutcome::Used { verification } => {
                                td { span.badge.used { "used" } }
                                td {
                                    @match verification {
                                        Some(v) => {
                                            (v.appended_facts.len()) " facts appended, "
                                            (v.missing_facts.len()) " missing, "
                                            (v.unverified_claims.len()) " claims flagged"
                                            @for c in &v.unverified_claims { pre { (c) } }
                                        }
                                        None => span.muted { "deterministic (nothing to verify)" },
                                    }
                                }
                            }
                            AttemptOutcome::Failed { error } => {
                                td { span.badge.failed { "failed" } }
                                td { (error.to_string()) }
                            }
                        }
                    }
                }
            }
        }
        @if d.report.attempts.is_empty() { p.muted { "No summarizer ran: clipping reached the target." } }
    }
}

/// A briefing's lines: `#` headings as headings, the rest as text.
fn briefing(text: &str) -> Markup {
    html! {
        div.briefing #briefing {
            @for line in text.lines() {
                @if let Some(h) = line.trim_start().strip_prefix("## ").or_else(|| line.trim_start().strip_prefix("# ")) {
                    h2 { (h) }
                } @else if !line.trim().is_empty() {
                    pre { (line) }
                }
            }
        }
    }
}

fn side(title: &str, id: &str, lines: &[Line], mark: &str) -> Markup {
    let total: u64 = lines.iter().map(|l| l.tokens).sum();
    html! {
        div {
            h2 { (title) " — " (lines.len()) " messages, " (n(total)) " tokens" }
            ol id=(id) {
                @for (i, l) in lines.iter().enumerate() {
                    li class=(if l.changed { mark } else { "kept" }) {
                        @if l.changed {
                            details {
                                summary { (i) ". " (l.role.as_str()) " · " (l.kind) " · " (n(l.tokens)) " tokens" }
                                pre { (l.text.chars().take(SHOWN).collect::<String>()) @if l.text.chars().count() > SHOWN { "…" } }
                            }
                        } @else {
                            span { (i) ". " (l.role.as_str()) " · " (l.kind) " · " (n(l.tokens)) " tokens" }
                        }
                    }
                }
            }
        }
    }
}

pub(crate) fn render(d: &CompactionDetail) -> Markup {
    let e = &d.entry;
    let r = &d.report;
    let source = e.source.clone().unwrap_or_else(|| "(no source)".to_owned());
    page(
        &format!("Compaction {}", e.id),
        html! {
            h1 { "Compaction #" (e.id) }
            p.muted {
                "Session " a href=(format!("/ui/session?source={}", encode(&source))) { (source) }
                " · " (e.created_at) " · " (e.model.as_deref().unwrap_or("model unknown"))
                " · " a #download href=(format!("/ui/compactions/{}/original.json", e.id)) download { "download the original history" }
            }
            div.cards {
                div.card { "Before" b { (n(r.tokens_before.get())) } }
                div.card { "After" b #tokens-after { (n(r.tokens_after.get())) } }
                div.card { "Target" b { @match r.target { Some(t) => (n(t.get())), None => "—" } } }
                div.card { "Reason" b { @match r.reason { Some(x) => (x.as_str()), None => "—" } } }
                div.card { "Summarizer" b { (r.summarizer.as_deref().unwrap_or("none")) } }
                div.card { "Engine time" b { (format!("{:.1} ms", r.duration_us as f64 / 1000.0)) } }
            }
            h2 { "Policies" }
            table #policies {
                thead { tr { th { "Policy" } th.num { "Items" } th.num { "Tokens saved" } } }
                tbody { @for p in &r.policies { tr { td { (p.policy.as_str()) } td.num { (p.items) } td.num { (n(p.tokens_saved.get())) } } } }
            }
            h2 { "Summarizer attempts" }
            (attempts(d))
            @if let Some(b) = &d.briefing { h2 { "Briefing" } (briefing(b)) }
            div.diff {
                (side("Before", "before", &d.before, "dropped"))
                (side("After", "after", &d.after, "added"))
            }
        },
    )
}
