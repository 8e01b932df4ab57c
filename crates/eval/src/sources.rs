//! Figures per source: one agent and team's transcripts (a corpus folder),
//! each strategy's recall and precision there with their spread, the
//! agent's own summary beside abridge's where the source has real cut
//! points, and each source against the others (leave one source out), so
//! that a figure carried by the sources it was developed on shows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{CutKind, CutReport, Origins, SectionScore, Strategy};

/// One figure over a source's cuts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Mean over the cuts.
    pub mean: f64,
    /// Standard deviation over the cuts.
    pub sd: f64,
    /// The lowest cut.
    pub min: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        Some(Spread {
            mean,
            sd: var.sqrt(),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
        })
    }
}

/// A strategy's figures over one source's cuts of one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyFigures {
    /// The strategy.
    pub strategy: Strategy,
    /// Cuts it gave a history for.
    pub cuts: usize,
    /// Recall of later-used identifiers.
    pub recall: Option<Spread>,
    /// Precision of the briefing (strategies that write one).
    pub precision: Option<Spread>,
    /// Tokens kept, as a share of the pre-cut tokens.
    pub kept: Option<Spread>,
    /// Cuts whose history stayed over the budget.
    pub over_budget: usize,
    /// The mean recall over the other sources (each weighing the same),
    /// at cuts of the same kind: what the figure would be with this source
    /// left out.
    pub others_recall: Option<f64>,
    /// The same for precision.
    pub others_precision: Option<f64>,
    /// Its briefings' sections over the cuts (identifiers named and used
    /// again, summed), most naming first: which sections carry the
    /// precision.
    #[serde(default)]
    pub sections: Vec<SectionScore>,
    /// The identifiers it lost over the cuts, by where they were before
    /// the cut.
    #[serde(default)]
    pub missed_from: Origins,
    /// Recall had nothing said (head, user, agent) been lost.
    #[serde(default)]
    pub recall_if_said_kept: Option<Spread>,
}

/// One source's figures at one kind of cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceFigures {
    /// The source: the folder its transcripts are in.
    pub source: String,
    /// `recorded` (where the agent compacted) or `fraction` (at 50 % and
    /// 75 % of its turns, for sources that never compacted).
    pub cuts: String,
    /// Transcripts.
    pub transcripts: usize,
    /// One row per strategy.
    pub strategies: Vec<StrategyFigures>,
}

/// The source of a report: the folder of its transcript (a conversation
/// folder's own parent: OpenHands keeps each in a folder of its own).
pub(crate) fn source_of(report: &CutReport) -> String {
    let path = report.source.split('#').next().unwrap_or(&report.source);
    Path::new(path)
        .parent()
        .and_then(|f| f.file_name())
        .map_or_else(|| ".".to_owned(), |n| n.to_string_lossy().into_owned())
}

pub(crate) fn kind_of(cut: CutKind) -> &'static str {
    match cut {
        CutKind::Recorded => "recorded",
        CutKind::Fraction { .. } => "fraction",
    }
}

/// Every source's figures, by source and kind of cut, with each strategy
/// against the other sources.
pub fn by_source(reports: &[CutReport]) -> Vec<SourceFigures> {
    type Key = (String, &'static str);
    let mut groups: BTreeMap<Key, Vec<&CutReport>> = BTreeMap::new();
    for r in reports {
        groups
            .entry((source_of(r), kind_of(r.cut)))
            .or_default()
            .push(r);
    }
    let mut out: Vec<SourceFigures> = groups
        .iter()
        .map(|((source, cuts), rs)| {
            let transcripts = rs
                .iter()
                .map(|r| r.source.as_str())
                .collect::<BTreeSet<_>>()
                .len();
            SourceFigures {
                source: source.clone(),
                cuts: (*cuts).to_owned(),
                transcripts,
                strategies: Strategy::ALL
                    .into_iter()
                    .filter_map(|s| figures(rs, s))
                    .collect(),
            }
        })
        .collect();
    leave_one_out(&mut out);
    out
}

fn figures(reports: &[&CutReport], s: Strategy) -> Option<StrategyFigures> {
    let results: Vec<_> = reports
        .iter()
        .flat_map(|r| &r.results)
        .filter(|x| x.strategy == s && x.error.is_none())
        .collect();
    if results.is_empty() {
        return None;
    }
    let of = |f: &dyn Fn(&crate::StrategyResult) -> Option<f64>| {
        Spread::of(&results.iter().filter_map(|x| f(x)).collect::<Vec<_>>())
    };
    Some(StrategyFigures {
        strategy: s,
        cuts: results.len(),
        recall: of(&|x| Some(x.recall)),
        precision: of(&|x| x.precision),
        kept: of(&|x| Some(x.kept)),
        over_budget: results.iter().filter(|x| x.over_budget.is_some()).count(),
        others_recall: None,
        others_precision: None,
        sections: sections_of(&results),
        missed_from: results.iter().map(|x| x.missed_from).sum(),
        recall_if_said_kept: of(&|x| Some(x.recall_if_said_kept)),
    })
}

/// The sections of `results`' briefings, summed by heading, most naming first.
fn sections_of(results: &[&crate::StrategyResult]) -> Vec<SectionScore> {
    let mut sum: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for s in results.iter().flat_map(|r| &r.sections) {
        let e = sum.entry(s.section.as_str()).or_default();
        e.0 += s.named;
        e.1 += s.used;
    }
    let mut out: Vec<SectionScore> = sum
        .into_iter()
        .map(|(section, (named, used))| SectionScore {
            section: section.to_owned(),
            named,
            used,
        })
        .collect();
    out.sort_by(|a, b| b.named.cmp(&a.named).then(a.section.cmp(&b.section)));
    out
}

/// A strategy's mean figures at one source and kind of cut.
struct Means {
    /// Index of the source's row.
    at: usize,
    cuts: String,
    strategy: Strategy,
    recall: Option<f64>,
    precision: Option<f64>,
}

/// Fills each row's figures over the other sources with cuts of its kind.
fn leave_one_out(sources: &mut [SourceFigures]) {
    // Every row's means, taken before any is filled.
    let means: Vec<Means> = sources
        .iter()
        .enumerate()
        .flat_map(|(at, src)| {
            src.strategies.iter().map(move |f| Means {
                at,
                cuts: src.cuts.clone(),
                strategy: f.strategy,
                recall: f.recall.map(|x| x.mean),
                precision: f.precision.map(|x| x.mean),
            })
        })
        .collect();
    let mean = |xs: Vec<f64>| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    for (at, src) in sources.iter_mut().enumerate() {
        for f in &mut src.strategies {
            let strategy = f.strategy;
            let others = || {
                means
                    .iter()
                    .filter(|m| m.at != at && m.cuts == src.cuts && m.strategy == strategy)
            };
            f.others_recall = mean(others().filter_map(|m| m.recall).collect());
            f.others_precision = mean(others().filter_map(|m| m.precision).collect());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::StrategyResult;

    pub(crate) fn result(
        strategy: Strategy,
        recall: f64,
        precision: Option<f64>,
    ) -> StrategyResult {
        StrategyResult {
            strategy,
            tokens: 10,
            kept: 0.1,
            valid: true,
            recall,
            recall_with_code: recall,
            recoverable: None,
            findable: None,
            index_tokens: None,
            precision,
            missed: Vec::new(),
            // One name lost per cut that is short of full recall, seen only
            // in a tool result.
            missed_from: Origins {
                results: usize::from(recall < 1.0),
                ..Origins::default()
            },
            recall_if_said_kept: recall,
            unused: Vec::new(),
            sections: Vec::new(),
            briefing: None,
            briefing_tokens: None,
            error: None,
            over_budget: None,
            probe_score: None,
        }
    }

    pub(crate) fn cut(source: &str, cut: CutKind, recall: f64, precision: f64) -> CutReport {
        CutReport {
            source: source.to_owned(),
            cut,
            messages_before: 10,
            tokens_before: 100,
            budget_tokens: 10,
            later_used: 5,
            later_used_from: Origins::default(),
            probes: Vec::new(),
            probe_error: None,
            results: vec![
                result(Strategy::Offline, recall, Some(precision)),
                result(Strategy::None, 1.0, None),
            ],
        }
    }

    #[test]
    fn figures_group_by_folder_and_kind_with_the_other_sources_beside() {
        let reports = [
            cut("corpus/a_team/one.jsonl", CutKind::Recorded, 0.8, 0.4),
            cut("corpus/a_team/two.jsonl", CutKind::Recorded, 0.6, 0.2),
            cut("corpus/b_team/conv-folder", CutKind::Recorded, 1.0, 0.5),
            cut("corpus/c_team/runs.json#3", CutKind::Recorded, 0.5, 0.1),
            cut(
                "corpus/a_team/one.jsonl",
                CutKind::Fraction { percent: 50 },
                0.9,
                0.3,
            ),
        ];
        let figures = by_source(&reports);
        let names: Vec<(&str, &str)> = figures
            .iter()
            .map(|f| (f.source.as_str(), f.cuts.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("a_team", "fraction"),
                ("a_team", "recorded"),
                ("b_team", "recorded"),
                ("c_team", "recorded")
            ]
        );
        let a = &figures[1];
        assert_eq!(a.transcripts, 2);
        // A transcript cut more than once counts once, wherever its cuts are.
        let again = [reports[0].clone(), reports[1].clone(), reports[0].clone()];
        assert_eq!(by_source(&again)[0].transcripts, 2);
        let offline = &a.strategies[a
            .strategies
            .iter()
            .position(|s| s.strategy == Strategy::Offline)
            .unwrap()];
        let recall = offline.recall.unwrap();
        assert!((recall.mean - 0.7).abs() < 1e-9 && (recall.sd - 0.1).abs() < 1e-9);
        assert!((recall.min - 0.6).abs() < 1e-9);
        // Its losses are summed over its cuts, its ceiling spread like recall.
        assert_eq!(offline.missed_from.results, 2);
        assert!((offline.recall_if_said_kept.unwrap().mean - 0.7).abs() < 1e-9);
        // The others: b and c at recorded cuts, each weighing the same.
        assert!((offline.others_recall.unwrap() - 0.75).abs() < 1e-9);
        assert!((offline.others_precision.unwrap() - 0.3).abs() < 1e-9);
        // No other source has fraction cuts.
        assert_eq!(figures[0].strategies[0].others_recall, None);
        // A strategy without a briefing has no precision.
        let none = a
            .strategies
            .iter()
            .find(|s| s.strategy == Strategy::None)
            .unwrap();
        assert!(none.precision.is_none());
    }

    #[test]
    fn sections_sum_over_the_cuts_most_naming_first() {
        let mut a = cut("x/a.json", CutKind::Recorded, 0.5, 0.5);
        let mut b = cut("x/b.json", CutKind::Recorded, 0.5, 0.5);
        let score = |section: &str, named, used| SectionScore {
            section: section.into(),
            named,
            used,
        };
        a.results[0].sections = vec![score("Files", 2, 1), score("Identifiers used", 1, 1)];
        b.results[0].sections = vec![score("Identifiers used", 4, 1)];
        let figures = by_source(&[a, b]);
        let row = figures[0]
            .strategies
            .iter()
            .find(|s| s.strategy == Strategy::Offline)
            .unwrap();
        assert_eq!(
            row.sections,
            [score("Identifiers used", 5, 2), score("Files", 2, 1)]
        );
    }
}
