//! Helpers shared by the engine tests.

use std::ops::Range;

use abridge::Compactor;
use abridge::model::{Conversation, Family, Message, head_len, iterations};
use abridge::synth::Spec;
use proptest::prelude::*;

/// Tokens of each message of `conv` as `c` counts them, and of its tool
/// definitions.
pub(crate) fn message_and_tool_tokens(c: &mut Compactor, conv: &Conversation) -> (Vec<u64>, u64) {
    let total = c.count(conv).get();
    let tokens: Vec<u64> = c
        .message_tokens(&conv.messages)
        .iter()
        .map(|t| t.get())
        .collect();
    let tools = total - tokens.iter().sum::<u64>();
    (tokens, tools)
}

/// Same on the wire: role, parts, content form and extra fields (meta ignored).
pub(crate) fn same(a: &Message, b: &Message) -> bool {
    a.role == b.role && a.parts == b.parts && a.form == b.form && a.extra == b.extra
}

/// The messages of the last `k` iterations.
pub(crate) fn last_iterations(conv: &Conversation, k: usize) -> &[Message] {
    let its = iterations(&conv.messages);
    let start = its
        .len()
        .checked_sub(k)
        .map_or(0, |i| its.get(i).map_or(conv.messages.len(), |it| it.start));
    &conv.messages[start..]
}

/// Asserts what compaction must never change: the head, the last `k`
/// iterations and every pinned message.
pub(crate) fn assert_kept(input: &Conversation, output: &Conversation, k: usize, pinned: &[usize]) {
    let head = head_len(&input.messages);
    for i in 0..head {
        assert!(
            same(&input.messages[i], &output.messages[i]),
            "head message {i} changed"
        );
    }
    let (a, b) = (last_iterations(input, k), last_iterations(output, k));
    assert_eq!(a.len(), b.len(), "tail length changed");
    assert!(a.iter().zip(b).all(|(x, y)| same(x, y)), "tail changed");
    let mut pinned = pinned.to_vec();
    pinned.sort_unstable();
    pinned.dedup();
    let mut from = 0;
    // Pins are indices in the body's `messages` array.
    for p in pinned {
        let Some(m) = input.messages.get(p + input.wire_offset()) else {
            continue;
        };
        let found = output.messages[from..].iter().position(|o| same(o, m));
        let pos = found.unwrap_or_else(|| panic!("pinned message {p} changed or lost"));
        from += pos + 1;
    }
}

/// Generated runs of either family, with `iterations` and `page_lines` in range.
pub(crate) fn specs(
    iterations: Range<usize>,
    page_lines: Range<usize>,
) -> impl Strategy<Value = Spec> {
    (any::<u64>(), iterations, prop::bool::ANY, page_lines).prop_map(
        |(seed, iterations, anthropic, page_lines)| Spec {
            seed,
            iterations,
            family: if anthropic {
                Family::Anthropic
            } else {
                Family::OpenAi
            },
            page_lines,
        },
    )
}
