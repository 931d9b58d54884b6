//! Named profiles, pinned here and documented in docs/chaos.md (a test pins each one's numbers).
//!
//! - `none`: nothing goes wrong — the baseline every other run is compared with.
//! - `flaky`: every endpoint answers 10% 503 and hangs on 2%: the everyday unreliable upstream.
//! - `flash-sale`: a spike on a slow, rate-limited model and on tools that commit then lose the response, behind a
//!   capacity limit that turns retry storms into overload, with a payment outage at 20 s. Numbers from issue 3.
//!
//! In every preset the side-effecting tools (`create_refund`, `process_payment`) deduplicate by
//! `Idempotency-Key` (key mode `keyed`): issue 3 pins it for `flash-sale`, and keeping it the same everywhere means
//! switching preset changes the faults, not the upstream's contract. A profile file can set `key_mode = "none"`
//! to stand for an upstream that does not deduplicate.

use std::time::Duration;

use super::error::ProfileError;
use super::{
    Capacity, EndpointProfile, ErrorRate, KeyMode, Latency, Outage, OutageAnswer, Profile, RetryAfterForm,
};

/// The tools whose calls have side effects.
const SIDE_EFFECTING: [&str; 2] = ["create_refund", "process_payment"];

impl Profile {
    /// The names [`Profile::preset`] knows.
    pub const PRESETS: &'static [&'static str] = &["none", "flaky", "flash-sale"];

    /// The preset `name` (one of [`Profile::PRESETS`]) under `seed`.
    ///
    /// ```
    /// use ballast_chaos::Profile;
    ///
    /// let sale = Profile::preset("flash-sale", 7).unwrap();
    /// assert_eq!(sale.endpoint("process_payment").outages.len(), 1);
    /// assert!(Profile::preset("chaos-monkey", 7).unwrap_err().to_string().contains("none, flaky, flash-sale"));
    /// ```
    pub fn preset(name: &str, seed: u64) -> Result<Profile, ProfileError> {
        let profile = match name {
            "none" => with_keyed_tools(EndpointProfile::default(), EndpointProfile::default()),
            "flaky" => with_keyed_tools(flaky(), flaky()),
            "flash-sale" => flash_sale(),
            _ => return Err(ProfileError::UnknownPreset { name: name.into() }),
        };
        Ok(Profile { seed, ..profile })
    }
}

/// `default` for every endpoint but the side-effecting tools, which get `tool`, `keyed`.
fn with_keyed_tools(default: EndpointProfile, tool: EndpointProfile) -> Profile {
    let tool = EndpointProfile {
        key_mode: KeyMode::Keyed,
        ..tool
    };
    let endpoints = SIDE_EFFECTING
        .iter()
        .map(|&name| (name.to_owned(), tool.clone()))
        .collect();
    Profile {
        default,
        endpoints,
        ..Profile::default()
    }
}

fn flaky() -> EndpointProfile {
    EndpointProfile {
        errors: vec![rate(503, 0.10)],
        hang: 0.02,
        ..EndpointProfile::default()
    }
}

/// 64 served at once, 64 more waiting, on every endpoint.
const SALE_CAPACITY: Capacity = Capacity {
    concurrent: 64,
    queue: 64,
};

fn flash_sale() -> Profile {
    let default = EndpointProfile {
        capacity: Some(SALE_CAPACITY),
        ..EndpointProfile::default()
    };
    let model = EndpointProfile {
        latency: Some(latency(80, 400)),
        errors: vec![rate(429, 0.03), rate(500, 0.05), rate(503, 0.03)],
        retry_after: Some(RetryAfterForm::Seconds(1)),
        hang: 0.01,
        ..default.clone()
    };
    let lookup_order = EndpointProfile {
        latency: Some(latency(20, 100)),
        errors: vec![rate(503, 0.05)],
        hang: 0.01,
        ..default.clone()
    };
    let tool = EndpointProfile {
        latency: Some(latency(40, 200)),
        errors: vec![rate(429, 0.03), rate(503, 0.05)],
        retry_after: Some(RetryAfterForm::Seconds(1)),
        commit_then_lose: 0.02,
        hang: 0.01,
        ..default.clone()
    };
    let mut profile = with_keyed_tools(default, tool);
    if let Some(payment) = profile.endpoints.get_mut("process_payment") {
        payment.outages = vec![Outage {
            start: Duration::from_secs(20),
            end: Duration::from_secs(23),
            answer: OutageAnswer::RetryAfter,
        }];
    }
    profile.endpoints.insert("model".into(), model);
    profile.endpoints.insert("lookup_order".into(), lookup_order);
    profile
}

fn rate(status: u16, rate: f64) -> ErrorRate {
    ErrorRate { status, rate }
}

fn latency(p50_ms: u64, p99_ms: u64) -> Latency {
    Latency {
        p50: Duration::from_millis(p50_ms),
        p99: Duration::from_millis(p99_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::LoseMode;

    #[test]
    fn the_flaky_preset() {
        let profile = Profile::preset("flaky", 5).expect("preset");
        assert_eq!(profile.seed, 5);
        for name in [
            "[default]",
            "model",
            "lookup_order",
            "create_refund",
            "process_payment",
        ] {
            let faults = if name == "[default]" {
                &profile.default
            } else {
                profile.endpoint(name)
            };
            assert_eq!(
                faults.errors,
                [ErrorRate {
                    status: 503,
                    rate: 0.10
                }],
                "{name}"
            );
            assert_eq!(
                (faults.hang, faults.reset, faults.commit_then_lose),
                (0.02, 0.0, 0.0),
                "{name}"
            );
            assert_eq!(
                (faults.latency, faults.retry_after, faults.capacity),
                (None, None, None),
                "{name}"
            );
        }
        for tool in ["create_refund", "process_payment"] {
            assert_eq!(profile.endpoint(tool).key_mode, KeyMode::Keyed);
        }
        assert_eq!(profile.endpoint("model").key_mode, KeyMode::None);
    }

    #[test]
    fn the_none_preset() {
        let profile = Profile::preset("none", 0).expect("preset");
        assert_eq!(profile.default, EndpointProfile::default());
        for tool in ["create_refund", "process_payment"] {
            let expected = EndpointProfile {
                key_mode: KeyMode::Keyed,
                ..EndpointProfile::default()
            };
            assert_eq!(profile.endpoint(tool), &expected);
        }
        assert_eq!(profile.endpoints.len(), 2);
        assert!(profile.scripts.is_empty());
    }

    #[test]
    fn the_flash_sale_preset() {
        let profile = Profile::preset("flash-sale", 7).expect("preset");
        let ms = Duration::from_millis;
        let capacity = Some(Capacity {
            concurrent: 64,
            queue: 64,
        });
        let one_second = Some(RetryAfterForm::Seconds(1));
        let errors = |faults: &EndpointProfile| -> Vec<(u16, f64)> {
            faults.errors.iter().map(|e| (e.status, e.rate)).collect()
        };

        let model = profile.endpoint("model");
        assert_eq!(
            model.latency,
            Some(Latency {
                p50: ms(80),
                p99: ms(400)
            })
        );
        assert_eq!(errors(model), [(429, 0.03), (500, 0.05), (503, 0.03)]);
        assert_eq!(
            (model.retry_after, model.hang, model.commit_then_lose),
            (one_second, 0.01, 0.0)
        );
        assert_eq!((model.capacity, model.key_mode), (capacity, KeyMode::None));

        let lookup = profile.endpoint("lookup_order");
        assert_eq!(
            lookup.latency,
            Some(Latency {
                p50: ms(20),
                p99: ms(100)
            })
        );
        assert_eq!(errors(lookup), [(503, 0.05)]);
        assert_eq!(
            (lookup.retry_after, lookup.hang, lookup.capacity),
            (None, 0.01, capacity)
        );

        for tool in ["create_refund", "process_payment"] {
            let faults = profile.endpoint(tool);
            assert_eq!(
                faults.latency,
                Some(Latency {
                    p50: ms(40),
                    p99: ms(200)
                }),
                "{tool}"
            );
            assert_eq!(errors(faults), [(429, 0.03), (503, 0.05)], "{tool}");
            assert_eq!(
                (faults.retry_after, faults.hang, faults.commit_then_lose),
                (one_second, 0.01, 0.02),
                "{tool}"
            );
            assert_eq!(
                (faults.lose_with, faults.key_mode, faults.capacity),
                (LoseMode::Hang, KeyMode::Keyed, capacity)
            );
        }
        assert!(profile.endpoint("create_refund").outages.is_empty());
        assert_eq!(
            profile.endpoint("process_payment").outages,
            [Outage {
                start: Duration::from_secs(20),
                end: Duration::from_secs(23),
                answer: OutageAnswer::RetryAfter,
            }]
        );
        assert_eq!(
            profile.default,
            EndpointProfile {
                capacity,
                ..EndpointProfile::default()
            }
        );
        assert_eq!(profile.endpoints.len(), 4);
    }

    #[test]
    fn an_unknown_preset_lists_the_known_ones() {
        let err = Profile::preset("flashsale", 1).expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "unknown preset \"flashsale\" (known presets: none, flaky, flash-sale)"
        );
        for name in Profile::PRESETS {
            assert!(Profile::preset(name, 1).is_ok(), "{name}");
        }
    }
}
