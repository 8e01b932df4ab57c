//! The sheet: rendering, merging a previous briefing, fitting a budget.

use super::fit::first_trim;
use super::*;

#[test]
fn every_section_parses_back_as_its_kind() {
    let sections: Vec<Section> = Kind::ALL
        .into_iter()
        .map(|k| {
            Section::new(
                k,
                vec![
                    SheetItem::new("src/lib.rs"),
                    SheetItem::new("APP-1432 done"),
                ],
            )
        })
        .collect();
    let mut text = String::new();
    for s in &sections {
        s.render(&Root(None), &mut text);
    }
    let (known, foreign) = parse(&text);
    assert!(foreign.is_empty(), "{foreign:?}");
    let kinds: Vec<Kind> = known.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, Kind::ALL);
    for s in known {
        let texts: Vec<&str> = s.items.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["src/lib.rs", "APP-1432 done"], "{:?}", s.kind);
    }
}

#[test]
fn foreign_headings_become_the_earlier_briefing() {
    let mut sections = vec![
        Section::new(Kind::Files, vec![SheetItem::keyed("read · a.rs", "a.rs")]),
        Section::new(Kind::Earlier, Vec::new()),
    ];
    let (known, foreign) = parse("## Summary\nThe agent fixed APP-1.\n## Files\n- edited · b.rs\n");
    merge(&mut sections, known, foreign);
    let texts = |s: &Section| s.items.iter().map(|i| i.text.clone()).collect::<Vec<_>>();
    assert_eq!(texts(&sections[0]), ["edited · b.rs", "read · a.rs"]);
    assert_eq!(
        texts(&sections[1]),
        ["## Summary", "The agent fixed APP-1."]
    );
}

/// Lines the engine quoted from replaced results into a briefing's room
/// are not carried into the next briefing: their results stay one recall
/// away, and the room they took is the new briefing's. The same under the
/// title a briefing without recall gives them.
#[test]
fn quoted_result_lines_are_dropped_when_a_briefing_merges() {
    for title in [
        Kind::ResultLines.title(),
        Kind::ResultLines.title_without_recall(),
    ] {
        let mut sections = vec![
            Section::new(Kind::Files, vec![SheetItem::keyed("read · a.rs", "a.rs")]),
            Section::new(Kind::ResultLines, Vec::new()),
            Section::new(Kind::Earlier, Vec::new()),
        ];
        let previous = format!(
            "## Files\n- edited · b.rs\n\n## {title}\n[read_file a.rs]\n…\npub fn settle_entry() {{}}\n…\n",
        );
        let (known, foreign) = parse(&previous);
        assert!(foreign.is_empty(), "{title}: {foreign:?}");
        merge(&mut sections, known, foreign);
        let rendered: String = sections
            .iter()
            .flat_map(|s| s.items.iter())
            .map(|i| i.text.clone())
            .collect();
        assert!(!rendered.contains("settle_entry"), "{title}: {rendered}");
        assert!(rendered.contains("edited · b.rs"), "{title}: {rendered}");
    }
}

/// Chained as data, a file seen in both compactions is listed once, in
/// its newest form, though the first sheet showed it relative to a root
/// (parsed back from text, the shown path would not match the new one).
#[test]
fn a_chained_sheet_merges_by_absolute_path() {
    let file = |ops: &str, path: &str| SheetItem::keyed(format!("{ops} · {path}"), path);
    let paths = [
        "/home/u/proj/app/a.rs",
        "/home/u/proj/app/b.rs",
        "/home/u/proj/app/c.rs",
    ];
    let first = Sheet {
        sections: vec![Section::new(
            Kind::Files,
            paths.iter().map(|p| file("read", p)).collect(),
        )],
    };
    let mut text = String::new();
    let root = Root::of(&first.sections);
    assert_eq!(root.0.as_deref(), Some("/home/u/proj/"));
    first.sections[0].render(&root, &mut text);
    assert!(text.contains("- read · app/a.rs"), "{text}");
    let mut next = vec![Section::new(Kind::Files, vec![file("edited", paths[0])])];
    merge(&mut next, first.sections.clone(), Vec::new());
    let texts: Vec<&str> = next[0].items.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "read · /home/u/proj/app/b.rs",
            "read · /home/u/proj/app/c.rs",
            "edited · /home/u/proj/app/a.rs"
        ]
    );
    let (known, _) = parse(&text);
    let mut from_text = vec![Section::new(Kind::Files, vec![file("edited", paths[0])])];
    merge(&mut from_text, known, Vec::new());
    assert_eq!(
        from_text[0].items.len(),
        4,
        "the text's relative path is another key"
    );
}

#[test]
fn a_sheet_round_trips_as_json() {
    let sheet = Sheet {
        sections: vec![Section::new(
            Kind::Files,
            vec![SheetItem::keyed("read · /a.rs", "/a.rs")],
        )],
    };
    let json = serde_json::to_string(&sheet).unwrap();
    assert!(json.contains(r#""kind":"files""#), "{json}");
    assert_eq!(serde_json::from_str::<Sheet>(&json).unwrap(), sheet);
}

/// `fit` as it was written first: every item counted, the oldest beyond
/// each section's minimum dropped one at a time, lowest priority first.
fn fit_by_dropping_one_at_a_time(sections: &mut [Section], budget: usize, kind: TokenizerKind) {
    let root = Root(None);
    let cost = |s: &str| kind.count(s) + 2;
    let costs: Vec<Vec<usize>> = sections
        .iter()
        .map(|s| {
            s.items
                .iter()
                .map(|i| cost(&root.show(s.kind, &i.text)))
                .collect()
        })
        .collect();
    // A heading is written while its section has an item.
    let heading = |s: &Section| cost(s.kind.title()) + 2;
    let mut total: usize = sections
        .iter()
        .filter(|s| !s.items.is_empty())
        .map(heading)
        .sum::<usize>()
        + costs.iter().flatten().sum::<usize>();
    let mut dropped = vec![0usize; sections.len()];
    while total > budget {
        let victim = sections
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                let (priority, keep) = s.kind.priority_and_keep();
                priority < u8::MAX && s.items.len() - dropped[*i] > keep
            })
            .min_by_key(|(_, s)| s.priority())
            .map(|(i, _)| i);
        let Some(i) = victim else { break };
        total -= costs[i][dropped[i]];
        dropped[i] += 1;
        if dropped[i] == sections[i].items.len() {
            total -= heading(&sections[i]);
        }
    }
    for (section, n) in sections.iter_mut().zip(dropped) {
        section.items.drain(..n);
        section.omitted += n;
    }
}

#[test]
fn fitting_counts_only_what_it_keeps_and_keeps_what_dropping_one_by_one_kept() {
    let words = [
        "alpha",
        "src/engine/rewrite.rs",
        "call_0042 read_file",
        "the quick brown fox",
    ];
    for seed in 0..200usize {
        let sections: Vec<Section> = Kind::ALL
            .into_iter()
            .enumerate()
            .map(|(k, kind)| {
                let n = (seed * 7 + k * 13) % 60;
                let items = (0..n)
                    .map(|j| SheetItem::new(format!("{} {j}", words[(seed + j + k) % words.len()])))
                    .collect();
                Section::new(kind, items)
            })
            .collect();
        let budget = 40 + (seed * 37) % 1500;
        let mut lazy = sections.clone();
        let (_, total) = first_trim(&mut lazy, &Root(None), budget, &|s| {
            TokenizerKind::O200kBase.count(s) + 2
        });
        let mut eager = sections;
        fit_by_dropping_one_at_a_time(&mut eager, budget, TokenizerKind::O200kBase);
        let texts = |s: &[Section]| -> Vec<(usize, Vec<String>)> {
            s.iter()
                .map(|s| (s.omitted, s.items.iter().map(|i| i.text.clone()).collect()))
                .collect()
        };
        assert_eq!(texts(&lazy), texts(&eager), "seed {seed}, budget {budget}");
        let shown: usize = lazy
            .iter()
            .filter(|s| !s.items.is_empty())
            .map(|s| {
                TokenizerKind::O200kBase.count(s.kind.title())
                    + 4
                    + s.items
                        .iter()
                        .map(|i| {
                            TokenizerKind::O200kBase.count(&Root(None).show(s.kind, &i.text)) + 2
                        })
                        .sum::<usize>()
            })
            .sum();
        assert_eq!(total, shown, "seed {seed}: the total is what is kept");
    }
}

/// What the fit does not count item by item (the root note, "older items
/// omitted", the sections left out) still fits: the sheet as written is
/// within its budget at every size, down to what is never trimmed.
#[test]
fn the_written_sheet_is_within_its_budget() {
    let root = "/home/someone/projects/a-rather-long-workspace-name/service";
    let mut f = Facts::default();
    for i in 0..40 {
        f.files.push(crate::facts::FileFact {
            path: format!("{root}/src/module_{i}/handler_{i}.rs"),
            edited: 1,
            ..Default::default()
        });
        f.progress
            .push(format!("committed: step {i} of the migration"));
        f.narrative
            .push(format!("Looked at handler {i} and its callers."));
        f.decisions
            .push(format!("[feedback] keep handler {i} synchronous"));
        f.errors.push(format!(
            "Edit `{root}/src/module_{i}/handler_{i}.rs`: no match"
        ));
        f.other_calls.push(format!("lookup `item-{i}` → ok"));
        f.created.push(format!("create_entity `ticket` → T-{i}"));
        f.used_ids.push(format!("handler_{i}"));
        f.user_messages.push(format!("Also check module {i}."));
    }
    let kind = TokenizerKind::O200kBase;
    for budget in (40..1200).step_by(23) {
        let (text, _) = render(f.clone(), None, budget, kind);
        assert!(
            kind.count(&text) <= budget,
            "{budget}: {} tokens\n{text}",
            kind.count(&text)
        );
    }
}

/// A sheet that leaves items out for space uses the room it was given:
/// headings of sections with nothing to show take none of it, and what
/// the fit does not count is measured, not reserved.
#[test]
fn a_sheet_that_leaves_items_out_fills_its_budget() {
    let mut f = Facts::default();
    for i in 0..60 {
        f.narrative
            .push(format!("Looked at handler {i} and its callers."));
        f.other_calls.push(format!("lookup `item-{i}` → ok"));
        f.user_messages.push(format!("Also check module {i}."));
    }
    let kind = TokenizerKind::O200kBase;
    for budget in (200..1200).step_by(37) {
        let (text, sheet) = render(f.clone(), None, budget, kind);
        let omitted: usize = sheet.sections.iter().map(|s| s.omitted).sum();
        assert!(omitted > 0, "{budget}: the facts are meant to overflow it");
        let used = kind.count(&text);
        assert!(
            used * 10 >= budget * 9 && used <= budget,
            "{budget}: {used} tokens written\n{text}"
        );
    }
}

/// What a sheet always keeps (the agent's last words, the latest error
/// verbatim) is cut to a budget it is over on its own, rather than the
/// sheet go over and its briefing fail: the error first, then the last
/// words, whose beginning stays.
#[test]
fn what_always_stays_is_cut_to_a_budget_it_is_over_alone() {
    let mut f = Facts::default();
    let ids: Vec<String> = (0..40).map(|i| format!("R{i:04}X")).collect();
    f.last_state = Some(format!(
        "I found these reservations under your profile: {}. Which one should I cancel?",
        ids.join(", ")
    ));
    f.latest_error = Some(format!(
        "Traceback:\n{}",
        "  File \"x.py\", line 1\n".repeat(12)
    ));
    for i in 0..30 {
        f.narrative.push(format!("Looked at reservation {i}."));
    }
    let kind = TokenizerKind::O200kBase;
    let whole = kind.count(&render(f.clone(), None, 10_000, kind).0);
    for budget in (48..whole).step_by(7) {
        let (text, sheet) = render(f.clone(), None, budget, kind);
        let used = kind.count(&text);
        assert!(used <= budget, "{budget}: {used} tokens\n{text}");
        let last = sheet.sections.iter().find(|s| s.kind == Kind::Last);
        let last = last.and_then(|s| s.items.first()).map(|i| i.text.as_str());
        assert!(
            last.is_some_and(|t| t.starts_with("I found these")),
            "{budget}: the last words' beginning is kept\n{text}"
        );
    }
}
