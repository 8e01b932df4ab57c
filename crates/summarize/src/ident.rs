//! Identifiers in free text: URLs, paths, file names, hashes, UUIDs, ids
//! and code symbols — what an agent needs verbatim to carry on.

/// Identifiers in `text`, in order of first appearance, without duplicates.
pub fn identifiers(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in text.split(|c: char| c.is_whitespace() || "\"'`()[]{}<>,;|".contains(c)) {
        // `key=value` splits, a URL's query does not.
        let pieces: Vec<&str> = if raw.contains("://") {
            vec![raw]
        } else {
            raw.split('=').collect()
        };
        for piece in pieces {
            let token = piece
                .trim_end_matches(['.', ':', '!', '?'])
                .trim_start_matches(['@', '#', '*']);
            if is_identifier(token) && !out.iter().any(|t| t == token) {
                out.push(token.to_owned());
            }
        }
    }
    out
}

/// True for a token worth keeping verbatim.
pub fn is_identifier(t: &str) -> bool {
    if t.len() < 3 || t.len() > 300 {
        return false;
    }
    if t.starts_with("http://") || t.starts_with("https://") {
        return true;
    }
    let alnum = t.chars().filter(char::is_ascii_alphanumeric).count();
    if alnum < 3
        || !t
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:~+$%".contains(c))
    {
        return false;
    }
    let letters = t.chars().filter(char::is_ascii_alphabetic).count();
    let digits = t.chars().filter(char::is_ascii_digit).count();
    if t.contains('/') {
        return letters > 0 && !t.starts_with("//");
    }
    if is_hex_id(t) {
        return true;
    }
    if let Some((name, ext)) = t.rsplit_once('.')
        && !ext.is_empty()
        && ext.len() <= 5
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic())
        && name.chars().any(|c| c.is_ascii_alphabetic())
        && name.len() >= 2
    {
        return true; // file.ext, Module.Sub.fun
    }
    let has_sep = t.contains(['_', '-']);
    let camel = t
        .chars()
        .zip(t.chars().skip(1))
        .any(|(a, b)| a.is_ascii_lowercase() && b.is_ascii_uppercase());
    (letters > 0 && digits > 0 && (has_sep || letters >= 2) && !t.starts_with('-'))
        || (has_sep && letters >= 4 && !t.starts_with('-') && !t.ends_with('-'))
        || camel
}

fn is_hex_id(t: &str) -> bool {
    let hex: String = t.chars().filter(|c| *c != '-').collect();
    hex.len() >= 7
        && hex.chars().all(|c| c.is_ascii_hexdigit())
        && hex.chars().any(|c| c.is_ascii_digit())
        && hex.chars().any(|c| c.is_ascii_alphabetic())
}

/// True when `text` keeps `id`: verbatim, or for a path, its last two
/// components (an absolute path written relative to the project counts).
pub fn mentions(text: &str, id: &str) -> bool {
    if text.contains(id) {
        return true;
    }
    let parts: Vec<&str> = id.trim_end_matches('/').rsplit('/').take(2).collect();
    if id.contains('/') && parts.len() == 2 && !parts[1].is_empty() {
        return text.contains(&format!("{}/{}", parts[1], parts[0]));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_agents_reuse() {
        let t = "Edited /home/u/app/lib/foo_web/live/session_live.ex (see https://x.test/a?b=1). \
                 Ticket APP-1432, commit 9f3c2ab, id 4d5611e5-241a-462a-8d15-5122611a9569, \
                 fn build_tool_use_index and SessionLive, bead spotter-dov.3, Cargo.toml. \
                 The quick brown fox, e.g. 1.5 times, well-known.";
        let ids = identifiers(t);
        for want in [
            "/home/u/app/lib/foo_web/live/session_live.ex",
            "https://x.test/a?b=1)",
            "APP-1432",
            "9f3c2ab",
            "4d5611e5-241a-462a-8d15-5122611a9569",
            "build_tool_use_index",
            "SessionLive",
            "spotter-dov.3",
            "Cargo.toml",
        ] {
            assert!(
                ids.iter().any(|i| i == want.trim_end_matches(')'))
                    || ids.iter().any(|i| i == want),
                "{want}: {ids:?}"
            );
        }
        for not in ["quick", "brown", "e.g", "1.5", "times", "The"] {
            assert!(!ids.iter().any(|i| i == not), "{not}: {ids:?}");
        }
        assert!(mentions(
            "see lib/foo_web/live/session_live.ex",
            "/home/u/app/lib/foo_web/live/session_live.ex"
        ));
        assert!(!mentions(
            "see session_live.ex",
            "/home/u/app/lib/foo_web/live/session_live.ex"
        ));
    }
}
