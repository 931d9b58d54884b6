//! Priority admission: a concurrency limit and a bounded queue ordered by class, then deadline.
//!
//! (Skeleton: the queue and its decisions are being written; `Priority` is final.)

use std::fmt;
use std::str::FromStr;

use crate::UnknownName;

/// A request's criticality (Google SRE, "Handling Overload"): higher classes are served first and shed last.
///
/// Ordered from lowest to highest, so `Priority::CriticalPlus > Priority::Sheddable`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Work that may be dropped first (product search in a flash sale).
    Sheddable,
    /// Work worth keeping over `sheddable`, dropped before anything critical.
    SheddablePlus,
    /// Work the user waits for (the default).
    #[default]
    Critical,
    /// Work that must not be dropped while anything else can be (payments).
    CriticalPlus,
}

impl Priority {
    /// Every class, lowest first.
    pub const ALL: [Priority; 4] = [
        Priority::Sheddable,
        Priority::SheddablePlus,
        Priority::Critical,
        Priority::CriticalPlus,
    ];

    /// The name used in configuration and in the `ballast-priority` header.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Sheddable => "sheddable",
            Priority::SheddablePlus => "sheddable_plus",
            Priority::Critical => "critical",
            Priority::CriticalPlus => "critical_plus",
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Priority {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Priority::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownName::new(s, &["critical_plus", "critical", "sheddable_plus", "sheddable"]))
    }
}

#[cfg(test)]
mod priority_tests {
    use super::*;

    #[test]
    fn classes_order_and_names() {
        assert!(Priority::CriticalPlus > Priority::Critical);
        assert!(Priority::Critical > Priority::SheddablePlus);
        assert!(Priority::SheddablePlus > Priority::Sheddable);
        for p in Priority::ALL {
            assert_eq!(p.as_str().parse::<Priority>(), Ok(p));
        }
        assert!("urgent".parse::<Priority>().is_err());
    }
}
