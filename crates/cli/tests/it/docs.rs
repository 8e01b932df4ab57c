//! The samples of the README and the book (`docs/src`) against the real
//! thing: every `abridge` command line in a `sh` block parses as the CLI
//! parses it, and every `toml` block is a configuration `abridge serve
//! --config` accepts. (The Rust samples compile as doctests of the engine.)

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The README and every chapter of the book, with their paths.
fn pages() -> Vec<(PathBuf, String)> {
    let mut paths = vec![root().join("README.md")];
    let chapters = std::fs::read_dir(root().join("docs/src")).expect("docs/src");
    let mut chapters: Vec<PathBuf> = chapters
        .map(|e| e.expect("a chapter").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    chapters.sort();
    paths.extend(chapters);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("a page");
            (p, text)
        })
        .collect()
}

/// The code blocks of `lang` in a page: the line each starts on, its text.
fn blocks(page: &str, lang: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, bool, String)> = None;
    for (n, line) in page.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                let this = info.split(',').next() == Some(lang);
                open = Some((n + 1, this, String::new()));
            }
            (Some(_), Some(_)) => {
                if let Some((at, true, text)) = open.take() {
                    out.push((at, text));
                }
            }
            (Some((_, _, text)), None) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// The arguments of each `abridge` command in a shell block: a command
/// run as `abridge …`, `./…/abridge …` or `cargo run -p abridge-cli -- …`,
/// after any variable assignments, in lines joined at a trailing `\`.
fn abridge_commands(block: &str) -> Vec<Vec<String>> {
    let joined = block.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let line = line.split(" #").next().unwrap_or_default();
        for command in line.split("&&").flat_map(|c| c.split(';')) {
            let Some(words) = shlex::split(command) else {
                continue;
            };
            let words: Vec<String> = words.into_iter().skip_while(|w| is_assignment(w)).collect();
            let Some(program) = words.first() else {
                continue;
            };
            if Path::new(program)
                .file_name()
                .is_some_and(|n| n == "abridge")
            {
                out.push(words[1..].to_vec());
            } else if program == "cargo"
                && words.iter().any(|w| w == "abridge-cli")
                && let Some(dashes) = words.iter().position(|w| w == "--")
            {
                out.push(words[dashes + 1..].to_vec());
            }
        }
    }
    out
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[test]
fn every_abridge_command_in_the_docs_parses() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (path, page) in pages() {
        for (line, block) in blocks(&page, "sh") {
            for args in abridge_commands(&block) {
                checked += 1;
                if let Err(e) = abridge_cli::parses(args.clone()) {
                    let first = e.lines().next().unwrap_or_default().to_owned();
                    wrong.push(format!(
                        "{}:{line}: abridge {}: {first}",
                        path.display(),
                        args.join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "commands the CLI refuses:\n{}",
        wrong.join("\n")
    );
    // The README's two commands and the book's tours are among them.
    assert!(
        checked >= 10,
        "only {checked} abridge commands found in sh blocks"
    );
}

#[test]
fn a_misspelt_command_is_caught() {
    let block = "abridge compact f.json --target-tokens 2500\nFOO=1 abridge compcat f.json\n";
    let commands = abridge_commands(block);
    assert_eq!(commands.len(), 2);
    assert!(abridge_cli::parses(commands[0].clone()).is_ok());
    assert!(abridge_cli::parses(commands[1].clone()).is_err());
}

#[test]
fn every_toml_sample_is_a_configuration_the_proxy_accepts() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (path, page) in pages() {
        for (line, block) in blocks(&page, "toml") {
            checked += 1;
            if let Err(e) = abridge_proxy::ProxyConfig::from_toml(&block) {
                wrong.push(format!("{}:{line}: {e}", path.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "samples that do not parse:\n{}",
        wrong.join("\n")
    );
    assert!(checked >= 1, "no toml sample found");
    let example = std::fs::read_to_string(root().join("abridge.example.toml")).expect("example");
    abridge_proxy::ProxyConfig::from_toml(&example).expect("abridge.example.toml");
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut wrong = Vec::new();
    for (path, page) in pages() {
        let dir = path.parent().expect("a folder");
        let mut prose = String::new();
        let mut fence = false;
        for line in page.lines() {
            fence ^= line.starts_with("```");
            if !fence {
                prose.push_str(line);
                prose.push('\n');
            }
        }
        for (at, _) in prose.match_indices("](") {
            let rest = &prose[at + 2..];
            let target = &rest[..rest.find(')').unwrap_or(rest.len())];
            let file = target.split('#').next().unwrap_or_default();
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            if !dir.join(file).exists() {
                wrong.push(format!("{}: {target}", path.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "links to nothing:\n{}", wrong.join("\n"));
}
