//! `[deferred]` and each tool's `defer`: ranges, the callback's URL and secret (together or not at all), and
//! deferral only for side-effecting tools.

use super::check::{Checker, DurationRule, join};
use crate::error::Problem;
use crate::raw::{RawDeferred, RawToolDefer};
use crate::typed::{
    DeferredCallback, DeferredConfig, MAX_DEFER_ATTEMPTS, MAX_DEFER_CONCURRENCY, MAX_DEFER_TTL,
    MIN_DEFER_TTL, ToolDefer,
};
use ballast_human::format_duration;

const CALLBACK_CREDENTIALS: &str = "a callback is authenticated by its signature, made with the secret named in \
     deferred.callback_secret_env";
const CALLBACK_NEEDS_SECRET: &str = "callbacks are signed (HMAC) with the secret it names, so that \
     their receiver can tell them from anyone else's POST";
const SECRET_NEEDS_CALLBACK: &str = "the secret only signs callbacks, and without a URL none is sent";

const TTL_RULE: DurationRule = DurationRule::Within(MIN_DEFER_TTL, MAX_DEFER_TTL, "between 1s and 7d");

impl Checker {
    pub(crate) fn deferred(&mut self, raw: &RawDeferred) -> DeferredConfig {
        let d = DeferredConfig::default();
        let concurrency = self.int_in(
            "deferred.concurrency",
            raw.concurrency,
            d.concurrency,
            1,
            MAX_DEFER_CONCURRENCY,
        );
        let ttl = self.duration("deferred.ttl", raw.ttl.as_ref(), d.ttl, TTL_RULE);
        let max_attempts = self.int_in(
            "deferred.max_attempts",
            raw.max_attempts,
            d.max_attempts,
            1,
            MAX_DEFER_ATTEMPTS,
        );
        let base = self.duration("deferred.base", raw.base.as_ref(), d.base, DurationRule::Positive);
        let cap = self.duration("deferred.cap", raw.cap.as_ref(), d.cap, DurationRule::Positive);
        if let (Some(base), Some(cap)) = (base, cap)
            && base > cap
        {
            let relation = Problem::Relation {
                value: format_duration(base).to_string(),
                must_be: "at most",
                other: "deferred.cap".to_owned(),
                other_value: format_duration(cap).to_string(),
            };
            self.report("deferred.base", relation);
        }
        let callback = match (&raw.callback_url, &raw.callback_secret_env) {
            (None, None) => None,
            (Some(url), secret) => {
                let url = self.http_url("deferred.callback_url", Some(url), CALLBACK_CREDENTIALS);
                let secret_env = match secret {
                    Some(env) => self.env_name("deferred.callback_secret_env", env),
                    None => {
                        self.report(
                            "deferred.callback_url",
                            Problem::NeedsPair {
                                other: "deferred.callback_secret_env",
                                reason: CALLBACK_NEEDS_SECRET,
                            },
                        );
                        None
                    }
                };
                (url.zip(secret_env)).map(|(url, secret_env)| DeferredCallback { url, secret_env })
            }
            (None, Some(env)) => {
                self.env_name("deferred.callback_secret_env", env);
                self.report(
                    "deferred.callback_secret_env",
                    Problem::NeedsPair {
                        other: "deferred.callback_url",
                        reason: SECRET_NEEDS_CALLBACK,
                    },
                );
                None
            }
        };
        DeferredConfig {
            concurrency: concurrency.unwrap_or(d.concurrency),
            ttl: ttl.unwrap_or(d.ttl),
            max_attempts: max_attempts.unwrap_or(d.max_attempts),
            base: base.unwrap_or(d.base),
            cap: cap.unwrap_or(d.cap),
            callback,
        }
    }

    /// A tool's `defer` (at `path`): written, its callers accept deferral, which only a side-effecting tool may;
    /// each key left out takes `deferred`'s (or, for `concurrency`, the tools' default).
    pub(crate) fn tool_defer(
        &mut self,
        path: &str,
        raw: Option<&RawToolDefer>,
        side_effects: bool,
        deferred: &DeferredConfig,
    ) -> ToolDefer {
        let d = deferred.tool_default();
        let Some(raw) = raw else { return d };
        if !side_effects {
            self.report(path, Problem::DeferNeedsSideEffects);
        }
        let ttl = self.duration(&join(path, "ttl"), raw.ttl.as_ref(), d.ttl, TTL_RULE);
        let max_attempts = self.int_in(
            &join(path, "max_attempts"),
            raw.max_attempts,
            d.max_attempts,
            1,
            MAX_DEFER_ATTEMPTS,
        );
        let concurrency = self.int(&join(path, "concurrency"), raw.concurrency, d.concurrency, 1);
        ToolDefer {
            accepted: true,
            ttl: ttl.unwrap_or(d.ttl),
            max_attempts: max_attempts.unwrap_or(d.max_attempts),
            concurrency: concurrency.unwrap_or(d.concurrency),
        }
    }
}
