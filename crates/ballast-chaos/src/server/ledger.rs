//! The side-effect ledger: every execution of a side-effecting tool, by operation.
//!
//! The ledger is the ground truth a test or a benchmark checks a client against: "did the refund happen once?".
//! An operation id (`op`) names one logical operation; every execution beyond the first of the same op is a
//! duplicate — the double refund Ballast exists to prevent.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

/// Executions per operation.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    ops: BTreeMap<String, OpEntry>,
}

/// The record of one operation, as `GET /ledger` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct OpEntry {
    /// The tool that executed it first (op ids are meant to belong to one side-effecting tool).
    pub(crate) tool: String,
    /// How many times it executed.
    pub(crate) executions: u64,
    /// The distinct `Idempotency-Key` values its executions carried, in order of first use.
    pub(crate) keys: Vec<String>,
    /// The same keys, to tell a new one at once: an op executed under many keys (a client that makes a new key
    /// each try, or a bench sending one body with a new key each time) would otherwise cost a scan of them all
    /// on every execution.
    #[serde(skip)]
    seen: HashSet<String>,
}

/// `GET /ledger`.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub(crate) struct LedgerView {
    /// Per operation id.
    pub(crate) ops: BTreeMap<String, OpEntry>,
    /// Sums over all operations.
    pub(crate) totals: Totals,
}

/// The ledger's sums.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Totals {
    /// Executions of all operations.
    pub(crate) executions: u64,
    /// Operations executed at least once.
    pub(crate) ops: u64,
    /// Executions beyond the first of each operation.
    pub(crate) duplicates: u64,
}

impl Ledger {
    /// Records one execution of `op` by `tool`, carrying `key`; returns the op's execution number (1-based).
    pub(crate) fn record(&mut self, tool: &str, op: &str, key: Option<&str>) -> u64 {
        let entry = self.ops.entry(op.to_owned()).or_insert_with(|| OpEntry {
            tool: tool.to_owned(),
            executions: 0,
            keys: Vec::new(),
            seen: HashSet::new(),
        });
        entry.executions += 1;
        if let Some(key) = key
            && entry.seen.insert(key.to_owned())
        {
            entry.keys.push(key.to_owned());
        }
        entry.executions
    }

    /// What `GET /ledger` shows.
    pub(crate) fn view(&self) -> LedgerView {
        let executions = self.ops.values().map(|e| e.executions).sum();
        let ops = self.ops.len() as u64;
        LedgerView {
            ops: self.ops.clone(),
            totals: Totals {
                executions,
                ops,
                duplicates: executions - ops,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_executions_beyond_the_first_per_op() {
        let mut ledger = Ledger::default();
        assert_eq!(ledger.record("create_refund", "op-1", Some("k1")), 1);
        assert_eq!(ledger.record("create_refund", "op-1", Some("k2")), 2);
        assert_eq!(ledger.record("create_refund", "op-1", Some("k1")), 3);
        assert_eq!(ledger.record("process_payment", "op-2", None), 1);
        let view = ledger.view();
        assert_eq!(
            view.totals,
            Totals {
                executions: 4,
                ops: 2,
                duplicates: 2
            }
        );
        assert_eq!(view.ops["op-1"].keys, ["k1", "k2"]);
        assert!(view.ops["op-2"].keys.is_empty());
        assert_eq!(view.ops["op-2"].tool, "process_payment");
    }

    #[test]
    fn an_empty_ledger_has_no_duplicates() {
        let view = Ledger::default().view();
        assert_eq!(view.totals.duplicates, 0);
        assert!(view.ops.is_empty());
    }
}
