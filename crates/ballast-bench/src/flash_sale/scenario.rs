//! What a run is made of: the scenario (the upstream's faults), the arrivals (when each agent starts), and the
//! conversations themselves — all a pure function of the options and the seed, so every strategy of a run meets
//! the same agents at the same times against the same faults.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ballast_chaos::{EndpointProfile, Outage, OutageAnswer, Profile, Window};
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};

/// The upstream's faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// `ballast chaos`'s `flash-sale` preset: a slow, rate-limited model, 5xx and 429 everywhere, hangs, tools
    /// that commit and then lose the answer, a payment outage 20 s in (the default).
    FlashSale,
    /// A healthy upstream (preset `none`) that is dead for 10 s, from 10 s to 20 s, for every endpoint, in the
    /// way the variant says; agents arrive steadily over 30 s.
    DeadUpstream(Dead),
    /// The flash sale with its payment provider down for 30 s, from 10 s to 40 s (503 with `Retry-After`), while
    /// agents arrive steadily over 30 s: the payments started in that window cannot be served within their
    /// deadline — the side effects `--defer` lets wait, and the bench drains after the outage.
    PaymentOutage,
}

/// How the upstream is dead in [`Scenario::DeadUpstream`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dead {
    /// 503 without `Retry-After`.
    Unavailable,
    /// 503 with `Retry-After` (the time left).
    UnavailableRetryAfter,
    /// No connection: connecting is refused.
    Refused,
    /// Every request hangs.
    Hangs,
}

impl Dead {
    /// Every variant, in the order the bench reports them.
    pub const ALL: [Dead; 4] = [
        Dead::Unavailable,
        Dead::UnavailableRetryAfter,
        Dead::Refused,
        Dead::Hangs,
    ];

    /// The variant's name on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Dead::Unavailable => "503",
            Dead::UnavailableRetryAfter => "503-retry-after",
            Dead::Refused => "refused",
            Dead::Hangs => "hangs",
        }
    }
}

impl Scenario {
    /// When the payment provider is down (before time scaling), for [`Scenario::PaymentOutage`].
    pub const PAYMENT_OUTAGE: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(40));

    /// When the upstream is dead (before time scaling), for [`Scenario::DeadUpstream`].
    pub const OUTAGE: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(20));

    /// The scenario's name: `flash-sale`, `dead-upstream:503`, ...
    pub fn name(self) -> String {
        match self {
            Scenario::FlashSale => "flash-sale".to_owned(),
            Scenario::DeadUpstream(dead) => format!("dead-upstream:{}", dead.as_str()),
            Scenario::PaymentOutage => "payment-outage".to_owned(),
        }
    }

    /// The arrivals the scenario is meant for: a burst for the flash sale, steady for a dead upstream.
    pub fn default_arrivals(self) -> Arrivals {
        match self {
            Scenario::FlashSale => Arrivals::Burst,
            Scenario::DeadUpstream(_) | Scenario::PaymentOutage => Arrivals::Steady,
        }
    }

    /// Over how long the agents arrive (before time scaling), for arrivals that spread.
    pub fn arrival_span(self) -> Duration {
        match self {
            Scenario::FlashSale => Duration::from_secs(10),
            Scenario::DeadUpstream(_) | Scenario::PaymentOutage => Duration::from_secs(30),
        }
    }

    /// The chaos upstream's profile for `seed`, its clock scaled by `time_scale`.
    pub fn profile(self, seed: u64, time_scale: f64) -> Profile {
        let profile = match self {
            Scenario::FlashSale => Profile::preset("flash-sale", seed).expect("a preset of the chaos crate"),
            Scenario::DeadUpstream(dead) => dead_upstream(seed, dead),
            Scenario::PaymentOutage => payment_outage(seed),
        };
        profile.scaled(time_scale)
    }

    /// The outage window, if the scenario has one for every endpoint (after time scaling).
    pub fn outage(self, time_scale: f64) -> Option<(Duration, Duration)> {
        match self {
            Scenario::FlashSale | Scenario::PaymentOutage => None,
            Scenario::DeadUpstream(_) => {
                let (start, end) = Scenario::OUTAGE;
                Some((start.mul_f64(time_scale), end.mul_f64(time_scale)))
            }
        }
    }
}

/// The flash-sale preset with the payment outage of [`Scenario::PAYMENT_OUTAGE`] in place of its own.
fn payment_outage(seed: u64) -> Profile {
    let mut profile = Profile::preset("flash-sale", seed).expect("a preset of the chaos crate");
    let (start, end) = Scenario::PAYMENT_OUTAGE;
    let outage = Outage {
        start,
        end,
        answer: OutageAnswer::RetryAfter,
    };
    profile
        .endpoints
        .entry("process_payment".to_owned())
        .or_default()
        .outages = vec![outage];
    profile
}

fn dead_upstream(seed: u64, dead: Dead) -> Profile {
    let mut profile = Profile::preset("none", seed).expect("a preset of the chaos crate");
    let (start, end) = Scenario::OUTAGE;
    let answer = match dead {
        Dead::Unavailable => OutageAnswer::NoRetryAfter,
        Dead::UnavailableRetryAfter => OutageAnswer::RetryAfter,
        Dead::Hangs => OutageAnswer::Hang,
        Dead::Refused => {
            profile.closed = vec![Window { start, end }];
            return profile;
        }
    };
    let outage = Outage { start, end, answer };
    profile.default.outages.push(outage);
    let default: EndpointProfile = profile.default.clone();
    for faults in profile.endpoints.values_mut() {
        faults.outages.push(outage);
    }
    for endpoint in ["model", "lookup_order", "create_refund", "process_payment"] {
        profile
            .endpoints
            .entry(endpoint.to_owned())
            .or_insert_with(|| default.clone());
    }
    profile
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;

    /// `flash-sale`, or `dead-upstream:<variant>` with a variant of [`Dead::ALL`] (`dead-upstream` alone is
    /// `dead-upstream:503`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "flash-sale" => return Ok(Scenario::FlashSale),
            "payment-outage" => return Ok(Scenario::PaymentOutage),
            "dead-upstream" => return Ok(Scenario::DeadUpstream(Dead::Unavailable)),
            _ => {}
        }
        let variants = || {
            Dead::ALL
                .iter()
                .map(|d| format!("dead-upstream:{}", d.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let variant = s.strip_prefix("dead-upstream:").ok_or_else(|| {
            format!(
                "unknown scenario {s:?}: flash-sale, payment-outage, {}",
                variants()
            )
        })?;
        Dead::ALL
            .into_iter()
            .find(|d| d.as_str() == variant)
            .map(Scenario::DeadUpstream)
            .ok_or_else(|| format!("unknown dead-upstream variant {variant:?}: {}", variants()))
    }
}

/// When the agents start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// All at once (the flash sale).
    Burst,
    /// At a rate that grows linearly over the span: few first, most at the end.
    Ramp,
    /// A Poisson process averaging the agents over the span (seeded).
    Poisson,
    /// Evenly spaced over the span.
    Steady,
}

impl Arrivals {
    /// The start offsets of `agents` agents over `span`, in order, drawn from `seed`.
    pub fn offsets(self, agents: usize, span: Duration, seed: u64) -> Vec<Duration> {
        let n = agents.max(1) as f64;
        match self {
            Arrivals::Burst => vec![Duration::ZERO; agents],
            Arrivals::Steady => (0..agents).map(|i| span.mul_f64(i as f64 / n)).collect(),
            // A rate growing linearly from 0: the i-th of n arrives when the area under it reaches i/n.
            Arrivals::Ramp => (0..agents).map(|i| span.mul_f64((i as f64 / n).sqrt())).collect(),
            Arrivals::Poisson => {
                let mut rng = SmallRng::seed_from_u64(seed ^ 0x5EED_A441_7A15);
                let mean = span.as_secs_f64() / n;
                let mut at = 0.0_f64;
                (0..agents)
                    .map(|_| {
                        let u: f64 = rng.random_range(f64::EPSILON..1.0);
                        at += -mean * u.ln();
                        Duration::from_secs_f64(at)
                    })
                    .collect()
            }
        }
    }
}

impl FromStr for Arrivals {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "burst" => Ok(Arrivals::Burst),
            "ramp" => Ok(Arrivals::Ramp),
            "poisson" => Ok(Arrivals::Poisson),
            "steady" => Ok(Arrivals::Steady),
            _ => Err(format!("unknown arrivals {s:?}: burst, ramp, poisson, steady")),
        }
    }
}

impl fmt::Display for Arrivals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arrivals::Burst => "burst",
            Arrivals::Ramp => "ramp",
            Arrivals::Poisson => "poisson",
            Arrivals::Steady => "steady",
        })
    }
}

/// What an agent does with its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// `create_refund`.
    Refund,
    /// `process_payment`.
    Payment,
}

impl Action {
    /// The tool the model calls for it.
    pub fn tool(self) -> &'static str {
        match self {
            Action::Refund => "create_refund",
            Action::Payment => "process_payment",
        }
    }
}

/// One agent's conversation: the user turn the mock model reads (its op, order and action) and its deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    /// The agent's number in the run, from 0.
    pub agent: usize,
    /// The operation id: every call of the conversation carries it, so the chaos upstream draws its faults by it.
    pub op: String,
    /// The order.
    pub order: u32,
    /// Refund or pay.
    pub action: Action,
    /// The whole conversation's deadline.
    pub deadline: Duration,
}

impl Conversation {
    /// The `agent`-th conversation of a run with `seed`: every third agent pays, the others refund.
    pub fn new(seed: u64, agent: usize, deadline: Duration) -> Conversation {
        Conversation {
            agent,
            op: format!("fs-{seed}-{agent}"),
            order: 1000 + agent as u32,
            action: if agent % 3 == 2 {
                Action::Payment
            } else {
                Action::Refund
            },
            deadline,
        }
    }

    /// The user turn the mock model answers: it names the order, the op, and the action.
    pub fn user_turn(&self) -> String {
        let verb = match self.action {
            Action::Refund => "Refund",
            Action::Payment => "Pay",
        };
        format!("{verb} order {}, op={}", self.order, self.op)
    }
}

/// A stable seed from an op id (FNV-1a): each conversation's own jitter, so a run repeats.
pub(super) fn op_seed(op: &str) -> u64 {
    op.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_parse_and_print_alike() {
        let named = [Scenario::FlashSale, Scenario::PaymentOutage];
        for scenario in named.into_iter().chain(Dead::ALL.map(Scenario::DeadUpstream)) {
            assert_eq!(scenario.name().parse::<Scenario>(), Ok(scenario));
        }
        assert_eq!(
            "dead-upstream".parse(),
            Ok(Scenario::DeadUpstream(Dead::Unavailable))
        );
        let error = "dead-upstream:gone".parse::<Scenario>().unwrap_err();
        assert!(error.contains("dead-upstream:refused"), "{error}");
    }

    #[test]
    fn arrivals_spread_as_named_and_repeat_with_the_seed() {
        let span = Duration::from_secs(10);
        assert_eq!(Arrivals::Burst.offsets(3, span, 1), vec![Duration::ZERO; 3]);
        let steady = Arrivals::Steady.offsets(4, span, 1);
        assert_eq!(steady[1], Duration::from_millis(2500));
        let ramp = Arrivals::Ramp.offsets(100, span, 1);
        assert!(ramp.windows(2).all(|w| w[0] <= w[1]));
        assert!(
            ramp[75] - ramp[50] < ramp[25] - ramp[0],
            "gaps shrink as the rate grows"
        );
        let poisson = Arrivals::Poisson.offsets(1000, span, 7);
        assert_eq!(poisson, Arrivals::Poisson.offsets(1000, span, 7));
        assert_ne!(poisson, Arrivals::Poisson.offsets(1000, span, 8));
        let last = poisson.last().unwrap().as_secs_f64();
        assert!((8.0..12.0).contains(&last), "about the span on average: {last}");
    }

    #[test]
    fn conversations_name_their_op_and_action() {
        let pay = Conversation::new(3, 2, Duration::from_secs(30));
        assert_eq!(pay.user_turn(), "Pay order 1002, op=fs-3-2");
        assert_eq!(pay.action.tool(), "process_payment");
        assert_eq!(Conversation::new(3, 0, Duration::ZERO).action, Action::Refund);
    }

    #[test]
    fn a_dead_upstream_is_dead_everywhere_in_its_way() {
        let hangs = Scenario::DeadUpstream(Dead::Hangs).profile(1, 1.0);
        for endpoint in [
            "model",
            "lookup_order",
            "create_refund",
            "process_payment",
            "other",
        ] {
            let outages = &hangs.endpoint(endpoint).outages;
            assert_eq!(outages.len(), 1, "{endpoint}");
            assert_eq!(outages[0].answer, OutageAnswer::Hang);
        }
        let refused = Scenario::DeadUpstream(Dead::Refused).profile(1, 0.5);
        assert_eq!(refused.closed[0].end, Duration::from_secs(10));
        assert!(refused.endpoint("model").outages.is_empty());
    }
}

#[cfg(test)]
mod payment_outage_tests {
    use super::*;

    #[test]
    fn the_payment_outage_is_the_sale_with_payments_down_from_10_to_40_s() {
        let profile = Scenario::PaymentOutage.profile(1, 1.0);
        let outages = &profile.endpoint("process_payment").outages;
        assert_eq!(outages.len(), 1);
        assert_eq!((outages[0].start, outages[0].end), Scenario::PAYMENT_OUTAGE);
        assert!(profile.endpoint("create_refund").outages.is_empty());
        assert_eq!(Scenario::PaymentOutage.default_arrivals(), Arrivals::Steady);
        assert_eq!(
            Scenario::PaymentOutage.outage(1.0),
            None,
            "not every endpoint is down"
        );
    }
}
