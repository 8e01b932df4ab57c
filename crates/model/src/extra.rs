//! [`Extra`]: the fields of a wire object that abridge does not model.

use std::ops::{Deref, DerefMut};
use std::sync::LazyLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// JSON object of the fields that abridge does not model but must keep, in
/// their order. Most messages and parts have none, and an empty one takes
/// no allocation and a pointer's width: a decoded history of a million
/// short messages held a 72-byte map in each message and each text part.
///
/// It reads and writes as the map it holds (`Deref`); writing through it
/// allocates the map.
#[derive(Clone, Default)]
pub struct Extra(Option<Box<Map<String, Value>>>);

/// What an empty [`Extra`] reads as.
static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

impl Extra {
    /// No fields.
    pub const fn new() -> Self {
        Extra(None)
    }

    /// Removes a field as [`Map::remove`] does, without allocating a map
    /// to remove it from when there is none.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.as_mut()?.remove(key)
    }

    /// Removes a field as [`Map::shift_remove`] does (the others keep
    /// their order), without allocating a map when there is none.
    pub fn shift_remove(&mut self, key: &str) -> Option<Value> {
        self.0.as_mut()?.shift_remove(key)
    }

    /// Removes every field and gives back the map's allocation (a
    /// conversion that strips what the other API does not take clears the
    /// extras of every message and part: they must not each gain a map).
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// The fields as a map (empty when there are none).
    pub fn into_map(self) -> Map<String, Value> {
        self.0.map(|m| *m).unwrap_or_default()
    }
}

impl Deref for Extra {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        self.0.as_deref().unwrap_or(&EMPTY)
    }
}

impl DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.0.get_or_insert_with(Box::default)
    }
}

/// What is left of a decoded object: an empty one gives back the
/// allocation the object was parsed into (a message whose every field is
/// modelled would hold it for nothing; a million of them held 300 MB).
impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Self {
        Extra((!map.is_empty()).then(|| Box::new(map)))
    }
}

impl FromIterator<(String, Value)> for Extra {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Map::from_iter(iter).into()
    }
}

impl Extend<(String, Value)> for Extra {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        let mut iter = iter.into_iter().peekable();
        if iter.peek().is_some() {
            self.deref_mut().extend(iter);
        }
    }
}

impl IntoIterator for Extra {
    type Item = (String, Value);
    type IntoIter = serde_json::map::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl<'a> IntoIterator for &'a Extra {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Equal when they hold the same fields (an emptied map equals none).
impl PartialEq for Extra {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Extra {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Extra::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_extra_takes_no_map_and_reads_as_one() {
        assert_eq!(std::mem::size_of::<Extra>(), std::mem::size_of::<usize>());
        let mut e = Extra::new();
        assert!(e.is_empty() && e.get("x").is_none() && e.0.is_none());
        assert!(
            e.remove("x").is_none() && e.0.is_none(),
            "removing allocates nothing"
        );
        e.insert("x".into(), Value::from(1));
        assert_eq!(e.get("x"), Some(&Value::from(1)));
        assert_eq!(Extra::new().remove("x"), None);
        assert_eq!(Extra::new().shift_remove("x"), None);
        e.remove("x");
        // Emptied is the same as never written.
        assert_eq!(e, Extra::new());
        e.insert("y".into(), Value::from(2));
        e.clear();
        assert!(e.0.is_none() && e.is_empty(), "clearing frees the map");
        assert!(Extra::from(Map::new()).0.is_none());
        let kept: Extra = [("a".to_owned(), Value::from(true))].into_iter().collect();
        assert_eq!(serde_json::to_string(&kept).unwrap(), r#"{"a":true}"#);
        let back: Extra = serde_json::from_str(r#"{"a":true}"#).unwrap();
        assert_eq!(back, kept);
        assert_eq!(kept.into_map().len(), 1);
    }
}
