//! Ids of what the agent created: a call whose tool creates, adds, books or
//! inserts something returns the new thing's id, and an agent that loses it
//! creates the thing again. These ids stay named in the briefing and on the
//! index line of the call's handle.

use serde_json::Value;

/// Words of a tool's name that say it makes something.
const VERBS: [&str; 12] = [
    "create", "add", "book", "insert", "new", "make", "register", "reserve", "schedule", "open",
    "submit", "upload",
];

/// Words in a text result after which an id follows.
const LEADS: [&str; 8] = [
    "id",
    "created",
    "added",
    "booked",
    "inserted",
    "registered",
    "reserved",
    "number",
];

/// Most ids kept per call.
const MAX_IDS: usize = 4;

/// The words of a tool's name (`createEntity`, `book_reservation`,
/// `issues.create`), lowercased.
pub(crate) fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    for c in name.chars() {
        let boundary = !c.is_alphanumeric() || c.is_uppercase();
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The ids a call of `tool` returned in `result` when the tool creates
/// something; empty otherwise, or when the result names none.
pub fn ids(tool: &str, result: &str) -> Vec<String> {
    let words = words(tool);
    if !words.iter().any(|w| VERBS.contains(&w.as_str())) {
        return Vec::new();
    }
    let text = result.trim();
    let mut ids = match serde_json::from_str::<Value>(text) {
        Ok(v) => json_ids(&v, &words),
        Err(_) => text_ids(text),
    };
    ids.dedup();
    ids.truncate(MAX_IDS);
    ids
}

/// An object's own id (`id`, `uuid`, or `<noun>_id` for a noun of the
/// tool's name), or the id of an object under such a noun; other `_id`
/// fields name what the new thing refers to, not the thing.
fn json_ids(v: &Value, nouns: &[String]) -> Vec<String> {
    let Some(map) = v.as_object() else {
        return match v {
            Value::Array(items) => items.iter().flat_map(|i| json_ids(i, nouns)).collect(),
            other => scalar(other).into_iter().collect(),
        };
    };
    let own = |k: &str| {
        let k = k.to_lowercase();
        k == "id"
            || k == "uuid"
            || nouns.iter().any(|n| {
                k.strip_prefix(n.as_str())
                    .is_some_and(|rest| matches!(rest, "_id" | "id" | "_number" | "_key"))
            })
    };
    let mut ids: Vec<String> = map
        .iter()
        .filter(|(k, _)| own(k))
        .filter_map(|(_, v)| scalar(v))
        .collect();
    if ids.is_empty() {
        ids = map
            .iter()
            .filter(|(k, v)| v.is_object() && nouns.contains(&k.to_lowercase()))
            .flat_map(|(_, v)| json_ids(v, &[]))
            .collect();
    }
    ids
}

/// A string or number that can be an id.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if looks_like_id(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// One token without spaces that holds a digit or is a code (`HAT084`,
/// `PROJ-12`, a UUID), short enough to be a name.
fn looks_like_id(s: &str) -> bool {
    (2..=80).contains(&s.len())
        && !s.contains(char::is_whitespace)
        && (s.chars().any(|c| c.is_ascii_digit())
            || (s.len() >= 5 && s.chars().all(|c| c.is_ascii_uppercase())))
}

/// Ids in a text result: UUIDs, and an id-like token within three words
/// after `id`, `created`, `booked`… (`Created ticket PROJ-12`, `id: 42`).
fn text_ids(text: &str) -> Vec<String> {
    let head: String = text.lines().take(5).collect::<Vec<_>>().join(" ");
    let tokens: Vec<&str> = head
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '"' | '\''))
        .filter(|t| !t.is_empty())
        .collect();
    let clean = |t: &str| {
        t.trim_matches(|c: char| matches!(c, '.' | ':' | '=' | '#' | '`' | '[' | ']'))
            .to_owned()
    };
    let mut ids = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let t = clean(t);
        let led = tokens[i.saturating_sub(3)..i].iter().any(|w| {
            let w = clean(w).to_lowercase();
            LEADS.contains(&w.as_str()) || w.ends_with("_id")
        });
        // `#12`: an issue, a pull request, a task, wherever it stands.
        let numbered = tokens[i].starts_with('#') && t.chars().all(|c| c.is_ascii_digit());
        if is_uuid(&t) || (led && looks_like_id(&t)) || (numbered && !t.is_empty()) {
            ids.push(t);
        }
    }
    ids
}

/// `8-4-4-4-12` hexadecimal digits.
fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "3f2b8c1e-9a4d-4e6f-b1a2-7c8d9e0f1a2b";

    #[test]
    fn a_creating_call_names_what_it_returned() {
        let json = format!(r#"{{"id": "{UUID}", "title": "Checkout fails", "owner_id": "u-7"}}"#);
        assert_eq!(ids("create_entity", &json), [UUID]);
        let booked = r#"{"reservation_id": "HATHAT", "user_id": "mia_li_3668", "flights": []}"#;
        assert_eq!(ids("book_reservation", booked), ["HATHAT"]);
        let nested = r#"{"ticket": {"id": 4821, "status": "open"}}"#;
        assert_eq!(ids("createTicket", nested), ["4821"]);
        assert_eq!(
            ids("addTodo", "Created ticket PROJ-12 in backlog"),
            ["PROJ-12"]
        );
        assert_eq!(
            ids("insert_row", &format!("ok, row {UUID} inserted")),
            [UUID]
        );
        assert_eq!(ids("issues.create", "id: 42"), ["42"]);
        assert_eq!(
            ids("TaskCreate", "Task #1 created successfully: Fix it"),
            ["1"]
        );
    }

    #[test]
    fn other_calls_and_results_without_ids_name_nothing() {
        assert!(ids("get_user_details", r#"{"id": "mia_li_3668"}"#).is_empty());
        assert!(ids("read_file", UUID).is_empty());
        assert!(ids("create_entity", "ok").is_empty());
        // A reference to another record is not the created thing's id.
        assert!(ids("create_comment", r#"{"post_id": "p-9", "body": "hi"}"#).is_empty());
    }
}
