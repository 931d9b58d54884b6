//! Ids unique per server: response ids (`resp_...`) and Anthropic's request ids (`req_...`).
//!
//! A gateway routes a `previous_response_id` to the deployment that created it, and logs a `request-id` to tell
//! one upstream answer from another; two chaos servers that handed out the same id would make both untestable. So
//! each id source draws a nonce when it is made — SHA-256 over two hashes of std's randomly keyed `RandomState`,
//! the process id and a count of the sources this process made — and an id is its prefix and 48 hex digits of
//! SHA-256 over the nonce and the count of ids it issued. No clock, no random number generator to choose: the same
//! entropy std's hash maps use against collisions.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// One source of ids, never handing out an id any source handed out before.
#[derive(Debug)]
pub(crate) struct Ids {
    prefix: &'static str,
    nonce: [u8; 32],
    issued: AtomicU64,
}

impl Ids {
    /// A source of ids that start with `prefix` (`resp_`, `req_`).
    pub(crate) fn new(prefix: &'static str) -> Ids {
        Ids {
            prefix,
            nonce: nonce(),
            issued: AtomicU64::new(0),
        }
    }

    /// A new id.
    pub(crate) fn next(&self) -> String {
        let issued = self.issued.fetch_add(1, Ordering::Relaxed) + 1;
        let digest = Sha256::new()
            .chain_update(self.nonce)
            .chain_update(issued.to_le_bytes())
            .finalize();
        let hex: String = digest[..24].iter().map(|b| format!("{b:02x}")).collect();
        format!("{}{hex}", self.prefix)
    }
}

/// A source's nonce: see the module docs.
fn nonce() -> [u8; 32] {
    static SOURCES: AtomicU64 = AtomicU64::new(0);
    let mut hasher = Sha256::new();
    hasher.update(b"ballast-chaos ids v1\0");
    hasher.update(RandomState::new().hash_one(0u8).to_le_bytes());
    hasher.update(RandomState::new().hash_one(1u8).to_le_bytes());
    hasher.update(std::process::id().to_le_bytes());
    hasher.update(SOURCES.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_never_repeat_across_sources() {
        let (a, b) = (Ids::new("req_"), Ids::new("req_"));
        let ids: std::collections::HashSet<String> = (0..100).flat_map(|_| [a.next(), b.next()]).collect();
        assert_eq!(ids.len(), 200);
        assert!(
            ids.iter()
                .all(|id| id.starts_with("req_") && id.len() == "req_".len() + 48)
        );
    }
}
