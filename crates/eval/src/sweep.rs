//! The same cuts at a series of budgets: per source and budget, how much
//! of the budget each strategy used, its recall, how many cuts it left well
//! under the budget that it could have filled, how many lost recall as the
//! budget rose, and how many of the names it lost a search finds.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::sources::{kind_of, source_of};
use crate::{CutReport, Strategy};

/// Budgets a sweep goes through: 5 % to 60 % of the pre-cut tokens.
pub const SWEEP: [f64; 12] = [
    0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60,
];

/// One source, kind of cut, strategy and budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    /// The folder of the transcripts.
    pub source: String,
    /// `recorded` or `fraction`.
    pub cuts: &'static str,
    /// The strategy.
    pub strategy: Strategy,
    /// The budget, as a share of the pre-cut tokens.
    pub budget: f64,
    /// Cuts measured.
    pub n: usize,
    /// Mean recall.
    pub recall: f64,
    /// Mean output tokens over the budget, of the cuts it could reach
    /// (over the budget before, and not over it at its floor).
    pub used: f64,
    /// Of those, how many used under 0.9 of the budget.
    pub under: usize,
    /// How many cuts it could reach.
    pub reachable: usize,
    /// Cuts whose recall is lower than at the budget before, both budgets
    /// reachable (over the budget before compaction, the floor under it).
    pub fell: usize,
    /// Of the later-used names lost, the share a search of the recall
    /// tool finds (mean over the cuts that lost some), when it keeps
    /// originals.
    pub findable: Option<f64>,
}

/// One cut of one transcript, for one strategy: its source, its kind, and
/// its messages and tokens before it.
type CutKey = (String, String, (usize, u64), Strategy);

/// The rows of `runs` (each budget with its reports, budgets in order)
/// for `strategies`.
pub fn sweep(runs: &[(f64, Vec<CutReport>)], strategies: &[Strategy]) -> Vec<SweepRow> {
    type Key = (String, &'static str, Strategy);
    let mut rows: BTreeMap<(Key, usize), SweepRow> = BTreeMap::new();
    // Each cut's recall at the budget before, by strategy, when that budget
    // could be reached (else it kept its floor, over the budget).
    let mut before: BTreeMap<CutKey, Option<f64>> = BTreeMap::new();
    for (i, (budget, reports)) in runs.iter().enumerate() {
        for r in reports {
            for res in r
                .results
                .iter()
                .filter(|x| strategies.contains(&x.strategy))
            {
                if res.error.is_some() {
                    continue;
                }
                let key = (source_of(r), kind_of(r.cut), res.strategy);
                let row = rows.entry((key.clone(), i)).or_insert_with(|| SweepRow {
                    source: key.0.clone(),
                    cuts: key.1,
                    strategy: key.2,
                    budget: *budget,
                    n: 0,
                    recall: 0.0,
                    used: 0.0,
                    under: 0,
                    reachable: 0,
                    fell: 0,
                    findable: None,
                });
                row.n += 1;
                row.recall += res.recall;
                let reachable = r.tokens_before > r.budget_tokens && res.over_budget.is_none();
                if reachable {
                    let used = res.tokens as f64 / r.budget_tokens.max(1) as f64;
                    row.reachable += 1;
                    row.used += used;
                    row.under += usize::from(used < 0.9);
                }
                if let Some(f) = res.findable {
                    *row.findable.get_or_insert(0.0) += f;
                }
                // A transcript's recorded cuts are told apart by their length
                // and their tokens: an OpenHands view keeps the same number
                // of events at each of its condensations.
                let cut = (
                    r.source.clone(),
                    format!("{:?}", r.cut),
                    (r.messages_before, r.tokens_before),
                    res.strategy,
                );
                // A fall counts between budgets the cut could reach: below
                // its floor a cut sends the floor, more than the budget.
                let now = reachable.then_some(res.recall);
                if before
                    .insert(cut, now)
                    .flatten()
                    .zip(now)
                    .is_some_and(|(b, r)| r + 1e-9 < b)
                {
                    row.fell += 1;
                }
            }
        }
    }
    // Means from sums; findable over the cuts that lost something.
    let losing = |runs: &[(f64, Vec<CutReport>)], key: &Key, i: usize| -> usize {
        runs[i]
            .1
            .iter()
            .filter(|r| source_of(r) == key.0 && kind_of(r.cut) == key.1)
            .flat_map(|r| &r.results)
            .filter(|x| x.strategy == key.2 && x.findable.is_some())
            .count()
    };
    rows.into_iter()
        .map(|((key, i), mut row)| {
            row.recall /= row.n.max(1) as f64;
            row.used /= row.reachable.max(1) as f64;
            row.findable = row
                .findable
                .map(|f| f / losing(runs, &key, i).max(1) as f64);
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CutKind;
    use crate::sources::tests::cut;

    /// One cut at two budgets: used and under from the tokens, a recall
    /// that fell counted at the higher budget, findable averaged over the
    /// cuts that lost something.
    #[test]
    fn a_sweep_says_what_was_used_and_where_recall_fell() {
        let at = |budget: f64, recall: f64, tokens: u64, findable: Option<f64>| {
            let mut c = cut("corpus/team/a.jsonl", CutKind::Recorded, recall, 0.5);
            c.tokens_before = 1_000;
            c.budget_tokens = (1_000.0 * budget) as u64;
            c.results[0].tokens = tokens;
            c.results[0].findable = findable;
            (budget, vec![c])
        };
        let runs = [at(0.1, 0.9, 95, Some(1.0)), at(0.2, 0.8, 150, Some(0.5))];
        let rows = sweep(&runs, &[Strategy::Offline]);
        assert_eq!(rows.len(), 2);
        let (low, high) = (&rows[0], &rows[1]);
        assert_eq!((low.source.as_str(), low.cuts), ("team", "recorded"));
        assert_eq!((low.under, low.reachable, low.fell), (0, 1, 0));
        assert!((low.used - 0.95).abs() < 1e-9);
        assert_eq!(
            (high.under, high.fell),
            (1, 1),
            "150 of 200 used, and recall fell"
        );
        assert_eq!(high.findable, Some(0.5));
    }

    /// A budget below the cut's floor sends the floor, over the budget: a
    /// lower recall at the next budget, which the cut can reach, is not a
    /// fall of the same plan.
    #[test]
    fn a_fall_from_a_budget_under_the_floor_is_not_counted() {
        let at = |budget: f64, recall: f64, over: bool| {
            let mut c = cut("corpus/team/a.jsonl", CutKind::Recorded, recall, 0.5);
            c.tokens_before = 1_000;
            c.budget_tokens = (1_000.0 * budget) as u64;
            c.results[0].tokens = 300;
            c.results[0].over_budget = over.then(|| "at its floor".to_owned());
            (budget, vec![c])
        };
        let runs = [at(0.1, 0.9, true), at(0.2, 0.5, false), at(0.3, 0.4, false)];
        let rows = sweep(&runs, &[Strategy::Offline]);
        let fell: Vec<usize> = rows.iter().map(|r| r.fell).collect();
        assert_eq!(fell, [0, 0, 1]);
    }

    /// An OpenHands transcript's condensations each leave a view of the
    /// same length: two such cuts are two cuts, and one's recall at a
    /// budget is never compared with the other's at the budget before.
    #[test]
    fn cuts_of_the_same_length_are_told_apart_by_their_tokens() {
        let at = |budget: f64, recalls: [f64; 2]| {
            let cuts = [(1_000, recalls[0]), (3_000, recalls[1])].map(|(tokens, recall)| {
                let mut c = cut("corpus/team/a.jsonl", CutKind::Recorded, recall, 0.5);
                c.tokens_before = tokens;
                c.budget_tokens = (tokens as f64 * budget) as u64;
                c.results[0].tokens = c.budget_tokens;
                c
            });
            (budget, cuts.to_vec())
        };
        // Each cut's recall rises with the budget; the second's is lower
        // than the first's throughout.
        let runs = [at(0.1, [0.9, 0.3]), at(0.2, [1.0, 0.4])];
        let rows = sweep(&runs, &[Strategy::Offline]);
        let fell: Vec<usize> = rows.iter().map(|r| r.fell).collect();
        assert_eq!(fell, [0, 0]);
    }
}
