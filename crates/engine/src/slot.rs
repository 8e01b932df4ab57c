//! A message of the history being rewritten, copied on write: the
//! original until a step changes it. The steps work over the request's own
//! messages instead of a cloned working copy (a million one-word messages
//! held 150 MB twice), and what they leave alone is never copied.

use std::borrow::Borrow;
use std::ops::Deref;

use abridge_model::Message;

/// One message of the work: the history's own, or a step's rewrite of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Slot<'a> {
    /// The history's message, unchanged.
    Same(&'a Message),
    /// Written by a step (boxed: a slot is two words wide).
    Changed(Box<Message>),
}

impl Slot<'_> {
    /// The message to change, copied from the history on its first change.
    pub(crate) fn make_mut(&mut self) -> &mut Message {
        if let Slot::Same(m) = *self {
            *self = Slot::Changed(Box::new(m.clone()));
        }
        match self {
            Slot::Changed(m) => m,
            Slot::Same(_) => unreachable!("a borrowed slot was just replaced by its copy"),
        }
    }

    /// The message itself, copied when it is the history's.
    pub(crate) fn into_owned(self) -> Message {
        match self {
            Slot::Same(m) => m.clone(),
            Slot::Changed(m) => *m,
        }
    }
}

impl Deref for Slot<'_> {
    type Target = Message;

    fn deref(&self) -> &Message {
        match self {
            Slot::Same(m) => m,
            Slot::Changed(m) => m,
        }
    }
}

impl Borrow<Message> for Slot<'_> {
    fn borrow(&self) -> &Message {
        self
    }
}

impl From<Message> for Slot<'_> {
    fn from(m: Message) -> Self {
        Slot::Changed(Box::new(m))
    }
}

/// The history's messages as slots, none copied.
pub(crate) fn borrowed(messages: &[Message]) -> Vec<Slot<'_>> {
    messages.iter().map(Slot::Same).collect()
}

/// Slots as messages, copying those still the history's.
pub(crate) fn owned(slots: Vec<Slot<'_>>) -> Vec<Message> {
    slots.into_iter().map(Slot::into_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_copied_on_its_first_change_only() {
        let m = Message::text(abridge_model::Role::User, "word");
        let mut s = Slot::Same(&m);
        assert!(matches!(s, Slot::Same(_)));
        s.make_mut().meta.pinned = true;
        assert!(matches!(s, Slot::Changed(_)));
        assert!(
            s.meta.pinned && !m.meta.pinned,
            "the history's message is untouched"
        );
        assert_eq!(size_of::<Slot<'_>>(), 2 * size_of::<usize>());
    }
}
