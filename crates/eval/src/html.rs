//! One self-contained page (no network): a chart per metric, a table per
//! cut, and the briefings side by side. The data is embedded as JSON, the
//! same as `--json` prints.

use std::fmt::Write;

use crate::{CutReport, Strategy};

/// The report page.
pub fn html(reports: &[CutReport]) -> String {
    let mut out = String::from(HEAD);
    let _ = write!(
        out,
        "<h1>abridge eval</h1><p>{} cut(s) of {} transcript(s). Recall: share of the identifiers the agent referred to after the cut (its text, and arguments that name things) that the compacted history still holds; with code, the names in the code it typed count too. Precision: share of a briefing's identifiers the agent went on to use.</p>",
        reports.len(),
        {
            let mut s: Vec<&str> = reports.iter().map(|r| r.source.as_str()).collect();
            s.dedup();
            s.len()
        }
    );
    for (metric, name) in [
        ("recall", "Recall"),
        ("recall_with_code", "Recall with names in typed code"),
        ("precision", "Precision"),
        ("kept", "Tokens kept"),
    ] {
        chart(&mut out, reports, metric, name);
    }
    for r in reports {
        table(&mut out, r);
    }
    let data = serde_json::to_string(reports)
        .unwrap_or_else(|_| "[]".into())
        .replace("</", "<\\/");
    let _ = writeln!(
        out,
        "<script type=\"application/json\" id=\"eval-data\">{data}</script></body></html>"
    );
    out
}

const HEAD: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>abridge eval</title><style>\
body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}\
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th:first-child,td:first-child{text-align:left}\
.briefings{display:flex;gap:1em;align-items:flex-start}.briefings pre{flex:1;white-space:pre-wrap;\
font-size:12px;background:#f6f6f6;padding:8px;max-height:40em;overflow:auto}svg text{font-size:11px}\
</style></head><body>";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Mean of a metric per strategy over the cuts that have it, as bars.
fn chart(out: &mut String, reports: &[CutReport], metric: &str, name: &str) {
    let rows: Vec<(Strategy, f64)> = Strategy::ALL
        .into_iter()
        .filter_map(|s| {
            let v: Vec<f64> = reports
                .iter()
                .flat_map(|r| &r.results)
                .filter(|x| x.strategy == s && x.error.is_none())
                .filter_map(|x| match metric {
                    "recall" => Some(x.recall),
                    "recall_with_code" => Some(x.recall_with_code),
                    "precision" => x.precision,
                    "probe_score" => x.probe_score,
                    _ => Some(x.kept),
                })
                .collect();
            (!v.is_empty()).then(|| (s, v.iter().sum::<f64>() / v.len() as f64))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<h2>{name} (mean over cuts)</h2><svg width=\"560\" height=\"{}\" role=\"img\">",
        rows.len() * 22 + 4
    );
    for (i, (s, v)) in rows.iter().enumerate() {
        let y = i * 22 + 2;
        let _ = write!(
            out,
            "<text x=\"0\" y=\"{}\">{}</text><rect x=\"170\" y=\"{y}\" width=\"{:.1}\" height=\"16\" fill=\"#4a7bd0\" data-strategy=\"{}\" data-metric=\"{metric}\" data-value=\"{v:.4}\"></rect><text x=\"{:.1}\" y=\"{}\">{:.1}%</text>",
            y + 13,
            s.label(),
            v.min(1.0) * 320.0,
            serde_json::to_string(s)
                .unwrap_or_default()
                .trim_matches('"'),
            174.0 + v.min(1.0) * 320.0,
            y + 13,
            v * 100.0
        );
    }
    out.push_str("</svg>");
}

fn table(out: &mut String, r: &CutReport) {
    let cut = match r.cut {
        crate::CutKind::Recorded => "where the agent compacted".to_owned(),
        crate::CutKind::Fraction { percent } => format!("at {percent}% of its turns"),
    };
    let _ = write!(
        out,
        "<h2>{} — {cut}</h2><p>{} messages, {} tokens before the cut; budget {} tokens; {} identifiers referred to later.</p>\
         <table><tr><th>strategy</th><th>tokens</th><th>kept</th><th>valid</th><th>recall</th><th>with code</th><th>precision</th><th>briefing tokens</th><th>probes</th></tr>",
        esc(&r.source),
        r.messages_before,
        r.tokens_before,
        r.budget_tokens,
        r.later_used
    );
    for x in &r.results {
        let pct = |v: f64| format!("{:.1}%", v * 100.0);
        let _ = write!(
            out,
            "<tr data-strategy=\"{}\"><td>{}</td><td data-tokens=\"{}\">{}</td><td>{}</td><td>{}</td><td data-recall=\"{:.4}\">{}</td><td data-recall-code=\"{:.4}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            serde_json::to_string(&x.strategy)
                .unwrap_or_default()
                .trim_matches('"'),
            x.strategy.label(),
            x.tokens,
            match (&x.error, &x.over_budget) {
                (Some(e), _) => format!("failed: {}", esc(e)),
                (None, Some(why)) => format!(
                    "{} <small title=\"{}\">over the budget</small>",
                    x.tokens,
                    esc(why)
                ),
                (None, None) => x.tokens.to_string(),
            },
            pct(x.kept),
            if x.valid { "yes" } else { "no" },
            x.recall,
            pct(x.recall),
            x.recall_with_code,
            pct(x.recall_with_code),
            x.precision.map_or("—".into(), pct),
            x.briefing_tokens.map_or("—".into(), |t| t.to_string()),
            x.probe_score.map_or("—".into(), pct)
        );
    }
    out.push_str("</table>");
    if !r.probes.is_empty() {
        out.push_str("<p>Probe questions (reference answers from the full history):</p><ul>");
        for p in &r.probes {
            let _ = write!(
                out,
                "<li>{} — <i>{}</i></li>",
                esc(&p.question),
                esc(&p.reference)
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("<div class=\"briefings\">");
    for x in r.results.iter().filter(|x| x.briefing.is_some()) {
        let _ = write!(
            out,
            "<pre><b>{}</b>\n\n{}</pre>",
            x.strategy.label(),
            esc(x.briefing.as_deref().unwrap_or_default())
        );
    }
    out.push_str("</div>");
}
