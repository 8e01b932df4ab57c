//! The page shell and small shared pieces.

use maud::{DOCTYPE, Markup, html};

/// A whole page: title, the embedded stylesheet, the header.
pub(crate) fn page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · abridge" }
                link rel="stylesheet" href="/ui/style.css";
            }
            body {
                header {
                    a.brand href="/ui" { "abridge" }
                    nav { a href="/ui" { "sessions" } " · " a href="/ui/savings" { "savings" } }
                }
                main { (body) }
            }
        }
    }
}

pub(crate) use abridge_model::text::thousands as n;

/// A bar filled to `used / of`.
pub(crate) fn bar(used: u64, of: Option<u64>) -> Markup {
    let Some(of) = of.filter(|o| *o > 0) else {
        return html! { span.muted { "window unknown" } };
    };
    let pct = (used as f64 / of as f64 * 100.0).min(100.0);
    html! {
        span.bar.hot[pct >= 80.0] title=(format!("{} of {} tokens", n(used), n(of))) {
            span style=(format!("width: {pct:.1}%")) {}
        }
        " " span.muted { (format!("{pct:.0}%")) }
    }
}
