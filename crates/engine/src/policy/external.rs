//! `clip_external`: bodies of old wrapped blocks (`<EXTERNAL-CONTENT …>` …
//! `</EXTERNAL-CONTENT>`, as browser agents wrap page snapshots) become
//! `> [clipped for brevity; recall abr_…]` with the tags kept; old images
//! become a short text with their handle. The message holding the newest block of each tag, and the newest
//! message with an image, are left whole.

use std::ops::Range;

use abridge_model::{ContentForm, Message, Part};
use memchr::memmem::Finder;

use crate::config::PolicyConfig;
use crate::placeholder::{block_excerpt_handle, external_body, image, is_external_body};
use crate::recall::{Found, Original, keep};
use crate::slot::Slot;

pub(super) fn apply(
    messages: &mut [Slot<'_>],
    region: Range<usize>,
    cfg: &PolicyConfig,
    mut found: Option<Found<'_>>,
) -> usize {
    let newest_image = messages.iter().rposition(|m| has_image(&m.parts));
    let tags: Vec<Tag> = cfg.external_tags.iter().map(|t| Tag::new(t)).collect();
    // One pass per tag: which messages of the region hold a block, and
    // which of them holds the newest block of the whole history (none
    // when a later message does).
    let blocks: Vec<Blocks> = tags
        .iter()
        .map(|tag| Blocks::find(messages, region.clone(), tag))
        .collect();
    let mut changed = 0;
    for i in region.clone() {
        if messages[i].meta.pinned {
            continue;
        }
        // A message is copied only when it has something to clip.
        for (tag, blocks) in tags.iter().zip(&blocks) {
            if blocks.to_clip(i - region.start) {
                let parts = &mut messages[i].make_mut().parts;
                changed += clip_blocks_in(parts, tag, &mut found);
            }
        }
        if newest_image != Some(i) && has_image(&messages[i].parts) {
            changed += clip_images(&mut messages[i].make_mut().parts, &mut found);
        }
    }
    changed
}

/// Where one tag's blocks are, as far as clipping a region needs.
struct Blocks {
    /// For each message of the region, whether it holds a block.
    held: Vec<bool>,
    /// The region's message holding the newest block of the history.
    newest: Option<usize>,
}

impl Blocks {
    fn find(messages: &[Slot<'_>], region: Range<usize>, tag: &Tag) -> Blocks {
        let holds = |m: &Message| any_text(&m.parts, &|t| find_block(t, tag, 0).is_some());
        let held: Vec<bool> = messages[region.clone()].iter().map(|m| holds(m)).collect();
        let later = messages[region.end..].iter().any(|m| holds(m));
        let newest = (!later).then(|| held.iter().rposition(|h| *h)).flatten();
        Blocks { held, newest }
    }

    /// Whether the region's `i`-th message has blocks to clip.
    fn to_clip(&self, i: usize) -> bool {
        self.held[i] && self.newest != Some(i)
    }
}

fn has_image(parts: &[Part]) -> bool {
    parts.iter().any(|p| match p {
        Part::Image(_) => true,
        Part::ToolResult(r) => has_image(&r.parts),
        _ => false,
    })
}

/// Whether a text of `parts` (or of a tool result among them) passes `f`.
fn any_text(parts: &[Part], f: &dyn Fn(&str) -> bool) -> bool {
    parts.iter().any(|p| match p {
        Part::Text(t) => f(&t.text),
        Part::ToolResult(r) => r.parts.iter().filter_map(Part::as_text).any(f),
        _ => false,
    })
}

fn clip_blocks_in(parts: &mut [Part], tag: &Tag, found: &mut Option<Found<'_>>) -> usize {
    let mut changed = 0;
    for p in parts {
        match p {
            Part::Text(t) => {
                if let Some(clipped) = clip_blocks(&t.text, tag, found) {
                    t.text = clipped;
                    changed += 1;
                }
            }
            Part::ToolResult(r) => changed += clip_blocks_in(&mut r.parts, tag, found),
            _ => {}
        }
    }
    changed
}

fn clip_images(parts: &mut [Part], found: &mut Option<Found<'_>>) -> usize {
    let mut changed = 0;
    for p in parts.iter_mut() {
        match p {
            Part::Image(i) => {
                let handle = keep(found, || Original::image(&i.source));
                *p = Part::text(image(handle.as_ref()));
                changed += 1;
            }
            Part::ToolResult(r) => {
                let n = clip_images(&mut r.parts, found);
                if n > 0 && r.form != ContentForm::Blocks {
                    r.form = ContentForm::Blocks;
                }
                changed += n;
            }
            _ => {}
        }
    }
    changed
}

/// A wrapper tag's opening and closing text, each searched for with a
/// vectorised finder built once per policy run: the newest block of each tag
/// is looked for through the whole history on every run.
struct Tag {
    open: Finder<'static>,
    close: Finder<'static>,
}

impl Tag {
    fn new(name: &str) -> Tag {
        Tag {
            open: Finder::new(&format!("<{name}")).into_owned(),
            close: Finder::new(&format!("</{name}>")).into_owned(),
        }
    }
}

/// Byte ranges of the next block of `tag` at or after `from`: (body start,
/// body end, close end).
fn find_block(text: &str, tag: &Tag, from: usize) -> Option<(usize, usize, usize)> {
    let bytes = text.as_bytes();
    let mut search = from;
    loop {
        let start = search + tag.open.find(bytes.get(search..)?)?;
        // The needle is whole characters, so `after` is a boundary.
        let after = start + tag.open.needle().len();
        let next = text[after..].chars().next()?;
        if next == '>' || next.is_whitespace() {
            let body_start = after + memchr::memchr(b'>', &bytes[after..])? + 1;
            let body_end = body_start + tag.close.find(&bytes[body_start..])?;
            return Some((body_start, body_end, body_end + tag.close.needle().len()));
        }
        search = after;
    }
}

/// The text with every block body of `tag` clipped, or `None` when nothing changed.
fn clip_blocks(text: &str, tag: &Tag, found: &mut Option<Found<'_>>) -> Option<String> {
    let mut out = String::new();
    let mut pos = 0;
    let mut changed = false;
    while let Some((body_start, body_end, close_end)) = find_block(text, tag, pos) {
        let body = &text[body_start..body_end];
        out.push_str(&text[pos..body_start]);
        if is_external_body(body) {
            out.push_str(body);
        } else {
            let open = &text[text[..body_start].rfind('<').unwrap_or(0)..body_start];
            // An excerpt an earlier compaction gave back goes back to its
            // placeholder, its original the one it named.
            let handle = match block_excerpt_handle(body) {
                Some(h) => Some(h),
                None => keep(found, || Original::external(open, body)),
            };
            out.push('\n');
            out.push_str(&external_body(handle.as_ref()));
            out.push('\n');
            changed = true;
        }
        out.push_str(&text[body_end..close_end]);
        pos = close_end;
    }
    if !changed {
        return None;
    }
    out.push_str(&text[pos..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_bodies_and_keeps_tags() {
        let t = "before <EXTERNAL-CONTENT source=\"a\">\nline 1\nline 2\n</EXTERNAL-CONTENT> mid <EXTERNAL-CONTENT>x</EXTERNAL-CONTENT> end";
        let c = clip_blocks(t, &Tag::new("EXTERNAL-CONTENT"), &mut None).unwrap();
        assert_eq!(
            c,
            "before <EXTERNAL-CONTENT source=\"a\">\n> [clipped for brevity]\n</EXTERNAL-CONTENT> mid <EXTERNAL-CONTENT>\n> [clipped for brevity]\n</EXTERNAL-CONTENT> end"
        );
        assert_eq!(
            clip_blocks(&c, &Tag::new("EXTERNAL-CONTENT"), &mut None),
            None
        );
    }

    #[test]
    fn ignores_other_tags_and_unclosed_blocks() {
        assert_eq!(
            clip_blocks(
                "<EXTERNAL-CONTENTS>x</EXTERNAL-CONTENTS>",
                &Tag::new("EXTERNAL-CONTENT"),
                &mut None
            ),
            None
        );
        assert_eq!(
            clip_blocks(
                "<EXTERNAL-CONTENT>never closed",
                &Tag::new("EXTERNAL-CONTENT"),
                &mut None
            ),
            None
        );
        assert_eq!(
            clip_blocks(
                "ünïcödé <EXTERNAL-CONTENT>é</EXTERNAL-CONTENT>",
                &Tag::new("EXTERNAL-CONTENT"),
                &mut None
            )
            .unwrap(),
            "ünïcödé <EXTERNAL-CONTENT>\n> [clipped for brevity]\n</EXTERNAL-CONTENT>"
        );
    }
}
