//! Where the `gateway` agents' requests go when the gateway is several `ballast serve` instances
//! (`--instances N`): every request — each try of each call, the SDK's retries, an MCP client's posts — to an
//! instance picked at random, as a load balancer without affinity spreads them. That is the worst case for a run
//! that spans calls: its deadline, its retry allowance and its side effects' records must come from the shared
//! store, never from the memory of the instance that saw its last call.
//!
//! - **Seeded.** Each conversation draws its picks from a generator of its own, seeded from its operation id (which
//!   holds the run's seed): a run repeats its picks whatever order its conversations interleave in.
//! - **A retry after no answer goes elsewhere.** When an instance gave no answer — the connection refused or reset
//!   — the conversation's next request picks among the other instances, as a load balancer's retry to another
//!   backend does (nginx's `proxy_next_upstream error`, Envoy's `previous_hosts` retry predicate): the callers of an
//!   instance killed mid-sale retry on one that is up. A timeout is not that: the instance is there, waiting on
//!   the upstream, and the next pick is any instance again.
//! - **Counted here.** What each instance answered, and what it left unanswered, is counted at the client, per
//!   request sent — not read from each instance's `/metrics` (`ballast_requests_total`): an instance killed and
//!   restarted starts its counters again, while the client's count is the load the balancer spread, whatever the
//!   instance made of it. The bench's own `/status` reads are not counted.
//!
//! With one instance there is nothing to draw: every request goes to it, as before there were instances.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};

use super::fleet::InstanceLoad;

/// The gateway instances of one run, by their root URLs (`http://HOST:PORT`), and what each answered.
#[derive(Debug)]
pub(super) struct Spread {
    bases: Vec<String>,
    answered: Vec<AtomicU64>,
    unanswered: Vec<AtomicU64>,
}

impl Spread {
    /// The instances at `bases` (at least one).
    pub(super) fn new(bases: Vec<String>) -> Spread {
        assert!(!bases.is_empty(), "a gateway has at least one instance");
        let counters = || bases.iter().map(|_| AtomicU64::new(0)).collect();
        Spread {
            answered: counters(),
            unanswered: counters(),
            bases,
        }
    }

    /// How many there are.
    pub(super) fn len(&self) -> usize {
        self.bases.len()
    }

    /// The root URL of instance `index`.
    pub(super) fn base(&self, index: usize) -> &str {
        &self.bases[index]
    }

    /// What each instance answered so far.
    pub(super) fn load(&self) -> Vec<InstanceLoad> {
        (0..self.len())
            .map(|instance| InstanceLoad {
                instance,
                answered: self.answered[instance].load(Ordering::Relaxed),
                unanswered: self.unanswered[instance].load(Ordering::Relaxed),
            })
            .collect()
    }
}

/// What came of one request to an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reached {
    /// It answered (any status).
    Answered,
    /// No answer within the request's timeout: the instance is there, busy or waiting.
    TimedOut,
    /// No answer: the connection was refused or lost.
    Unreached,
}

impl Reached {
    /// What a request that failed with `error` came to.
    pub(super) fn of(error: &reqwest::Error) -> Reached {
        if error.is_timeout() {
            Reached::TimedOut
        } else {
            Reached::Unreached
        }
    }
}

/// One conversation's way to the instances: its seeded picks, and the instance its next pick avoids.
#[derive(Debug)]
pub(super) struct Picker {
    spread: Arc<Spread>,
    picks: Mutex<Picks>,
}

#[derive(Debug)]
struct Picks {
    rng: SmallRng,
    /// The instance that just gave no answer.
    avoid: Option<usize>,
}

impl Picker {
    /// The picks of the conversation whose operation id is `op`.
    pub(super) fn new(spread: Arc<Spread>, op: &str) -> Picker {
        let rng = SmallRng::seed_from_u64(super::scenario::op_seed(op) ^ 0x1B5A_7C3D_0F0E_A4D1);
        Picker {
            spread,
            picks: Mutex::new(Picks { rng, avoid: None }),
        }
    }

    /// The instance the next request goes to (see the module docs).
    fn pick(&self) -> usize {
        let n = self.spread.len();
        if n == 1 {
            return 0;
        }
        let mut picks = self.picks.lock().unwrap_or_else(PoisonError::into_inner);
        match picks.avoid.take() {
            Some(avoid) => {
                let other = picks.rng.random_range(0..n - 1);
                if other >= avoid { other + 1 } else { other }
            }
            None => picks.rng.random_range(0..n),
        }
    }

    fn record(&self, instance: usize, reached: Reached) {
        let counters = match reached {
            Reached::Answered => &self.spread.answered,
            Reached::TimedOut | Reached::Unreached => &self.spread.unanswered,
        };
        counters[instance].fetch_add(1, Ordering::Relaxed);
        if reached == Reached::Unreached && self.spread.len() > 1 {
            self.picks.lock().unwrap_or_else(PoisonError::into_inner).avoid = Some(instance);
        }
    }
}

/// Where a call's requests go: one URL for every request, or a path on the instance each request picks.
#[derive(Clone, Debug)]
pub(super) enum Target {
    /// This URL.
    Url(String),
    /// `path` on a gateway instance.
    Gateway {
        /// The conversation's picks.
        picker: Arc<Picker>,
        /// The path, from `/`.
        path: String,
    },
}

/// One request's destination: its URL, and the instance it goes to (to say what came of it).
#[derive(Debug)]
pub(super) struct Sending<'a> {
    /// The URL to send it to.
    pub(super) url: String,
    to: Option<(&'a Picker, usize)>,
}

impl Target {
    /// Where the next request goes.
    pub(super) fn next(&self) -> Sending<'_> {
        match self {
            Target::Url(url) => Sending {
                url: url.clone(),
                to: None,
            },
            Target::Gateway { picker, path } => {
                let instance = picker.pick();
                Sending {
                    url: format!("{}{path}", picker.spread.base(instance)),
                    to: Some((picker, instance)),
                }
            }
        }
    }
}

impl Sending<'_> {
    /// What came of it: counted for its instance, and an instance that gave no answer is avoided next.
    pub(super) fn reached(&self, reached: Reached) {
        if let Some((picker, instance)) = self.to {
            picker.record(instance, reached);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(n: usize) -> Arc<Spread> {
        Arc::new(Spread::new(
            (0..n).map(|i| format!("http://127.0.0.1:{}", 9000 + i)).collect(),
        ))
    }

    #[test]
    fn picks_spread_over_every_instance_and_repeat_with_the_operation() {
        let spread = spread(3);
        let target = |op: &str| Target::Gateway {
            picker: Arc::new(Picker::new(Arc::clone(&spread), op)),
            path: "/v1/responses".into(),
        };
        let urls = |target: &Target| (0..300).map(|_| target.next().url).collect::<Vec<_>>();
        let first = urls(&target("fs-1-0"));
        assert_eq!(
            first,
            urls(&target("fs-1-0")),
            "the same op picks the same instances"
        );
        assert_ne!(first, urls(&target("fs-1-1")));
        for port in 9000..9003 {
            let count = first.iter().filter(|url| url.contains(&port.to_string())).count();
            assert!((60..140).contains(&count), "{port}: {count} of 300");
        }
        assert!(first[0].ends_with("/v1/responses"));
    }

    #[test]
    fn after_no_answer_the_next_request_goes_to_another_instance_and_after_a_timeout_to_any() {
        let spread = spread(2);
        let target = Target::Gateway {
            picker: Arc::new(Picker::new(Arc::clone(&spread), "fs-1-0")),
            path: "/".into(),
        };
        for _ in 0..50 {
            let sending = target.next();
            let refused = sending.url.clone();
            sending.reached(Reached::Unreached);
            let retry = target.next();
            assert_ne!(retry.url, refused, "the retry goes elsewhere");
            retry.reached(Reached::Answered);
        }
        let mut after_timeout = std::collections::HashSet::new();
        for _ in 0..50 {
            let sending = target.next();
            sending.reached(Reached::TimedOut);
            after_timeout.insert(sending.url);
        }
        assert_eq!(after_timeout.len(), 2, "a timeout avoids nothing");
        let load = spread.load();
        let answered: u64 = load.iter().map(|l| l.answered).sum();
        let unanswered: u64 = load.iter().map(|l| l.unanswered).sum();
        assert_eq!((answered, unanswered), (50, 100));
    }

    #[test]
    fn one_instance_takes_every_request_and_a_url_counts_nothing() {
        let spread = spread(1);
        let target = Target::Gateway {
            picker: Arc::new(Picker::new(Arc::clone(&spread), "fs-1-0")),
            path: "/mcp".into(),
        };
        let sending = target.next();
        assert_eq!(sending.url, "http://127.0.0.1:9000/mcp");
        sending.reached(Reached::Unreached);
        assert_eq!(target.next().url, "http://127.0.0.1:9000/mcp");
        let url = Target::Url("http://127.0.0.1:1/x".into());
        url.next().reached(Reached::Answered);
        assert_eq!(spread.load()[0].unanswered, 1);
        assert_eq!(spread.load()[0].answered, 0);
    }
}
