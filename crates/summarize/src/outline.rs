//! Where in a file the agent worked: the names the file defines (`def`,
//! `fn`, `class`, a shell `name() {`) and which of them its changes touched.

/// Keywords that open a definition at the start of a line.
const DEFINES: [&str; 16] = [
    "def",
    "defp",
    "defmacro",
    "defmacrop",
    "defmodule",
    "fn",
    "func",
    "function",
    "class",
    "struct",
    "enum",
    "trait",
    "interface",
    "type",
    "module",
    "impl",
];

/// Words that may precede a definition keyword (`pub fn`, `export async
/// function`).
const MODIFIERS: [&str; 12] = [
    "pub",
    "pub(crate)",
    "export",
    "default",
    "async",
    "static",
    "public",
    "private",
    "protected",
    "abstract",
    "final",
    "unsafe",
];

/// Names defined in `code`, in order: a definition keyword at the start of
/// a line followed by a name. Line-number gutters (`  12→`, `12\t`) of a
/// file as a read tool prints it are skipped; `class="btn"` or `type:
/// "text"` are not definitions.
pub(crate) fn defined_names(code: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in code.lines() {
        if let Some(name) = definition(without_gutter(line))
            && !out.iter().any(|n| n == name)
        {
            out.push(name.to_owned());
        }
    }
    out
}

/// Names of `defined` that `change` (an edit's old or new text, a written
/// body) defines or uses, in order of appearance.
pub(crate) fn touched<'a>(change: &'a str, defined: &[String]) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for word in words(change) {
        if defined.iter().any(|d| d == word) && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// A character of a name: `Mod.fun`, `valid?`, `save!`, `snake_case`.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_?!.".contains(c)
}

fn words(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !is_name_char(c))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| !w.is_empty())
}

fn without_gutter(line: &str) -> &str {
    let t = line.trim_start();
    let rest = t.trim_start_matches(|c: char| c.is_ascii_digit());
    if rest.len() < t.len() {
        if let Some(r) = rest.strip_prefix('→').or_else(|| rest.strip_prefix('\t')) {
            return r;
        }
    }
    line
}

/// The name a line defines, if it opens a definition.
fn definition(line: &str) -> Option<&str> {
    let mut tokens = line
        .split_whitespace()
        .skip_while(|t| MODIFIERS.contains(t));
    let first = tokens.next()?;
    if DEFINES.contains(&first) {
        let mut next = tokens.next()?;
        if first == "func" && next.starts_with('(') {
            // Go's receiver: `func (s *Server) Serve(`, `func (Server) Serve(`.
            if !next.ends_with(')') {
                tokens.find(|t| t.ends_with(')'))?;
            }
            next = tokens.next()?;
        }
        return name_of(next);
    }
    // A shell function: `name() {` or `name () {` (not a call: `main()`).
    let shell = line.trim_end().strip_suffix('{')?.trim_end();
    let name = shell.strip_suffix("()")?.trim_end();
    (line.trim_start() == line && !name.contains(char::is_whitespace))
        .then(|| name_of(name))
        .flatten()
        .filter(|n| n.len() == name.len())
}

/// The leading name of `token` (`parse(` → `parse`, `Foo<T>` → `Foo`), if
/// it is at least three characters and starts with a letter.
fn name_of(token: &str) -> Option<&str> {
    let end = token
        .find(|c: char| !is_name_char(c))
        .unwrap_or(token.len());
    let name = token[..end].trim_end_matches('.');
    (name.len() >= 3 && name.starts_with(|c: char| c.is_ascii_alphabetic())).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_at_line_start_in_common_languages() {
        let code = "defmodule SpotterWeb.HooksController do\n\
            \x20 def commit_event(conn, params) do\n\
            \x20 defp enqueue_enrichment(hashes, session) when hashes != [] do\n\
            pub(crate) fn parse_line(s: &str) {}\n\
            export async function loadSession(id) {}\n\
            func (s *Server) Serve(addr string) error {\n\
            func (Server) Close() error {\n\
            class Greeter:\n\
            post_snapshot() {\n\
            main()\n\
            \x20 <div class=\"btn badge\">\n\
            \x20 %{type: \"text\", text: \"hi\"}\n\
            \x20 post_snapshot\n\
            \x20   115→  defp build_evidence(params) do\n\
            12\tdef ingest(x):\n";
        assert_eq!(
            defined_names(code),
            [
                "SpotterWeb.HooksController",
                "commit_event",
                "enqueue_enrichment",
                "parse_line",
                "loadSession",
                "Serve",
                "Close",
                "Greeter",
                "post_snapshot",
                "build_evidence",
                "ingest",
            ]
        );
    }

    #[test]
    fn a_change_touches_the_names_it_defines_or_calls() {
        let defined = ["commit_event", "enqueue_enrichment", "ingest_commits"].map(String::from);
        let edit = "def commit_event(conn, params) do\n  enqueue_enrichment(hashes, s)\n  \
                    Logger.info(\"commit_event\")";
        assert_eq!(
            touched(edit, &defined),
            ["commit_event", "enqueue_enrichment"]
        );
    }
}
