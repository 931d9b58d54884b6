//! Priority admission: a concurrency limit and a bounded queue ordered by class, then deadline.
//!
//! Why: an upstream serves only so many calls at once; under a spike the rest must wait or be refused. An
//! unbounded wait turns a spike into a collapse in which every request times out in the queue (Google SRE book,
//! "Addressing Cascading Failures": bound the queue, shed early), and refusing blindly drops a payment as
//! readily as a product search. So, per upstream:
//! - **Serve by criticality, then deadline.** Classes are Google SRE's criticalities ("Handling Overload":
//!   `CRITICAL_PLUS` .. `SHEDDABLE`); within a class the earliest deadline goes first (it has the least time to
//!   wait), then arrival order.
//! - **Shed the least important work first.** A full queue pushes out its lowest-class waiter to admit a higher
//!   class, and refuses a newcomer only when nothing below it waits: a higher class is never shed for room
//!   while a lower one waits.
//! - **Refuse doomed work.** A request whose deadline will pass before it can finish only burns a slot and then
//!   times out ("Using load shedding to avoid overload", AWS Builders' Library: don't spend capacity on work
//!   the client has given up on; Google SRE: check the deadline before starting work).
//!
//! [`Admission`] holds the decisions only; the async shell keeps it behind a mutex, parks waiters and answers
//! the sheds (503 `overloaded` with `ballast-shed: <reason>` and `Retry-After`).
//!
//! The rules and the decisions taken where DESIGN.md leaves room are documented on [`Admission`].

mod config;
mod estimate;
mod queue;
mod shed;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use crate::UnknownName;

pub use config::{AdmissionConfig, InvalidAdmission};
pub use queue::{Admission, Offer, Release, Ticket};
pub use shed::{Shed, ShedReason};

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
