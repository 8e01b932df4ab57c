//! Small text helpers shared by every crate that shortens or inspects text,
//! so a briefing, a placeholder and a summarizer prompt cut text the same way.

/// First non-empty line of a text (`""` when there is none).
pub fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// `text` when it is at most `max` bytes; otherwise its head and the last
/// `tail` bytes around ` … ` (or the head and `…` when `tail` is 0). Cuts
/// fall on character boundaries, so the result is always valid UTF-8.
///
/// ```
/// use abridge_model::text::clip;
/// assert_eq!(clip("short", 10, 0), "short");
/// assert_eq!(clip("abcdefghij", 5, 0), "abcde…");
/// assert_eq!(clip("abcdefghij", 6, 2), "abcd … ij");
/// assert_eq!(clip("ééé", 3, 0), "é…");
/// ```
pub fn clip(text: &str, max: usize, tail: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let tail = tail.min(max);
    let head = floor(text, max - tail);
    if tail == 0 {
        return format!("{}…", &text[..head]);
    }
    let end = ceil(text, text.len() - tail);
    format!("{} … {}", &text[..head], &text[end..])
}

fn floor(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// `1234567` → `1,234,567`: figures as the CLI and the dashboard print them.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_line_skips_blank_lines() {
        assert_eq!(first_line("\n  \nerror: x\nmore"), "error: x");
        assert_eq!(first_line(""), "");
    }

    #[test]
    fn clip_never_splits_a_character() {
        let s = "日本語のテキスト".repeat(20);
        for max in 0..s.len() {
            for tail in [0, 1, 5, 17] {
                let c = clip(&s, max, tail);
                assert!(c.len() <= max + " … ".len() + 3, "{max} {tail}");
            }
        }
    }
}
