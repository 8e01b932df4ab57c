//! Where the kept tail starts: walk back over whole iterations, accumulating
//! tokens, until the next one would exceed the kept budget — but keep at
//! least a floor of iterations. The boundary is always an iteration start,
//! so it never separates a tool call from its result.

use abridge_model::Iteration;

/// Number of trailing iterations to keep verbatim.
///
/// `tokens[i]` is the token count of message `i`.
pub(crate) fn tail_iterations(
    its: &[Iteration],
    tokens: &[u64],
    budget: u64,
    floor: usize,
) -> usize {
    let mut kept = 0;
    let mut used = 0u64;
    for it in its.iter().rev() {
        let cost: u64 = tokens[it.range()].iter().sum();
        if kept >= floor && used + cost > budget {
            break;
        }
        used += cost;
        kept += 1;
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn its(starts: &[usize], len: usize) -> Vec<Iteration> {
        let mut v: Vec<Iteration> = starts
            .iter()
            .map(|&s| Iteration { start: s, end: len })
            .collect();
        for i in 0..v.len().saturating_sub(1) {
            v[i].end = v[i + 1].start;
        }
        v
    }

    #[test]
    fn budget_and_floor() {
        // head 0..2, iterations of 10, 20, 30, 40 tokens
        let tokens = [5, 5, 10, 20, 30, 40];
        let its = its(&[2, 3, 4, 5], 6);
        assert_eq!(tail_iterations(&its, &tokens, 75, 1), 2);
        assert_eq!(tail_iterations(&its, &tokens, 70, 1), 2);
        assert_eq!(tail_iterations(&its, &tokens, 69, 1), 1);
        assert_eq!(tail_iterations(&its, &tokens, 0, 3), 3);
        assert_eq!(tail_iterations(&its, &tokens, 1_000, 1), 4);
        assert_eq!(tail_iterations(&its, &tokens, 0, 9), 4);
    }
}
