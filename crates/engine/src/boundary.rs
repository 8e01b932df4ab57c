//! Where the kept tail starts: walk back over whole iterations, accumulating
//! tokens, until the next one would exceed the kept budget — but keep at
//! least a floor of iterations. The boundary is always an iteration start,
//! so it never separates a tool call from its result.

use std::borrow::Borrow;
use std::ops::Range;

use abridge_model::{Iteration, Message, head_len, iterations};
use abridge_tokens::Counted;

/// Number of trailing iterations to keep verbatim.
///
/// `tokens[i]` is the token count of message `i`.
pub(crate) fn tail_iterations(
    its: &[Iteration],
    tokens: &[Counted],
    budget: Counted,
    floor: usize,
) -> usize {
    let mut kept = 0;
    let mut used = Counted::ZERO;
    for it in its.iter().rev() {
        let cost: Counted = tokens[it.range()].iter().sum();
        if kept >= floor && used + cost > budget {
            break;
        }
        used += cost;
        kept += 1;
    }
    kept
}

/// Trailing iterations that hold the last `n` messages: those the last `n`
/// messages reach into (at least 1), so a floor of messages keeps whole
/// iterations and every call its result.
pub(crate) fn iterations_covering<M: Borrow<Message>>(messages: &[M], n: usize) -> usize {
    let from = messages.len().saturating_sub(n);
    iterations(messages)
        .iter()
        .filter(|it| it.end > from)
        .count()
        .max(1)
}

/// `[head end, tail start)`: what policies may rewrite, given the tail size.
pub(crate) fn old_region<M: Borrow<Message>>(messages: &[M], tail_n: usize) -> Range<usize> {
    let tail = tail_start(messages, &iterations(messages), tail_n);
    head_len(messages).min(tail)..tail
}

/// Index where the last `tail_n` iterations start (the end when there are none).
pub(crate) fn tail_start<M>(messages: &[M], its: &[Iteration], tail_n: usize) -> usize {
    its.len()
        .checked_sub(tail_n)
        .and_then(|k| its.get(k))
        .map_or(messages.len(), |i| i.start)
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
        let tokens = [5, 5, 10, 20, 30, 40].map(Counted::new);
        let its = its(&[2, 3, 4, 5], 6);
        assert_eq!(tail_iterations(&its, &tokens, Counted::new(75), 1), 2);
        assert_eq!(tail_iterations(&its, &tokens, Counted::new(70), 1), 2);
        assert_eq!(tail_iterations(&its, &tokens, Counted::new(69), 1), 1);
        assert_eq!(tail_iterations(&its, &tokens, Counted::new(0), 3), 3);
        assert_eq!(tail_iterations(&its, &tokens, Counted::new(1_000), 1), 4);
        assert_eq!(tail_iterations(&its, &tokens, Counted::new(0), 9), 4);
    }
}
