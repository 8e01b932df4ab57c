//! Token figures in their units. Three kinds of figure describe a prompt,
//! and they differ by the provider's own count (a system prompt abridge
//! never sees, injected reminders, a tokenizer abridge estimates):
//!
//! - [`Counted`]: abridge's count, with the configured tokenizer.
//! - [`Calibrated`]: a count in the provider's units — abridge's count
//!   through the conversation's calibration (`abridge::Calibration::apply`,
//!   the one conversion from [`Counted`]), or what the provider reported
//!   ([`Calibrated::from_reported`]). Triggers, prices and the dashboard
//!   work in these.
//! - [`Reported`]: prompt tokens the provider reported for a request.
//!
//! Each is its own type: adding, comparing or pricing across units does
//! not compile. All three serialize as bare integers.

use serde::{Deserialize, Serialize};

macro_rules! unit {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(u64);

        impl $name {
            /// Zero tokens.
            pub const ZERO: $name = $name(0);

            /// A figure of this unit: only where the figure is known to be
            /// in it (a tokenizer's count, a provider's report, a configured
            /// threshold).
            pub const fn new(tokens: u64) -> $name {
                $name(tokens)
            }

            /// The figure as a bare integer (for display, storage and ratios).
            pub const fn get(self) -> u64 {
                self.0
            }

            /// `self - other`, or zero when `other` is larger.
            pub const fn saturating_sub(self, other: $name) -> $name {
                $name(self.0.saturating_sub(other.0))
            }

            /// `self - other`, or `None` when `other` is larger.
            pub const fn checked_sub(self, other: $name) -> Option<$name> {
                match self.0.checked_sub(other.0) {
                    Some(n) => Some($name(n)),
                    None => None,
                }
            }

            /// A fraction of this figure, rounded down (a target as a share
            /// of a trigger, a soft threshold).
            pub fn scaled(self, ratio: f64) -> $name {
                $name((self.0 as f64 * ratio) as u64)
            }
        }

        impl std::ops::Add for $name {
            type Output = $name;
            fn add(self, o: $name) -> $name {
                $name(self.0 + o.0)
            }
        }

        impl std::ops::AddAssign for $name {
            fn add_assign(&mut self, o: $name) {
                self.0 += o.0;
            }
        }

        impl std::iter::Sum for $name {
            fn sum<I: Iterator<Item = $name>>(it: I) -> $name {
                $name(it.map(|t| t.0).sum())
            }
        }

        impl<'a> std::iter::Sum<&'a $name> for $name {
            fn sum<I: Iterator<Item = &'a $name>>(it: I) -> $name {
                $name(it.map(|t| t.0).sum())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

unit!(
    /// Tokens as abridge counts them with the configured tokenizer.
    Counted
);

unit!(
    /// Tokens in the provider's units: abridge's count through the
    /// conversation's calibration, or the provider's own report.
    Calibrated
);

unit!(
    /// Prompt tokens the provider reported for a request it served.
    Reported
);

impl Counted {
    /// A tokenizer's count.
    pub const fn of(tokens: usize) -> Counted {
        Counted(tokens as u64)
    }
}

impl Calibrated {
    /// The provider's own report is its count, in its units.
    pub const fn from_reported(r: Reported) -> Calibrated {
        Calibrated(r.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_add_subtract_and_serialize_as_integers() {
        let a = Counted(1_000) + Counted(234);
        assert_eq!(a, Counted(1_234));
        assert_eq!(Counted(5).saturating_sub(Counted(9)), Counted::ZERO);
        assert_eq!(
            [Counted(1), Counted(2)].into_iter().sum::<Counted>(),
            Counted(3)
        );
        assert_eq!(Calibrated(10_000).scaled(0.8), Calibrated(8_000));
        assert_eq!(serde_json::to_string(&Reported(42)).unwrap(), "42");
        assert_eq!(
            serde_json::from_str::<Calibrated>("7").unwrap(),
            Calibrated(7)
        );
        assert_eq!(Calibrated::from_reported(Reported(9)), Calibrated(9));
    }
}
