//! The `breaker` table models and tools share, built by ballast-core's [`BreakerConfig::builder`].
//!
//! The typed config holds ballast-core's own [`BreakerConfig`], so the breaker the gateway runs is the one that
//! was validated. Here each value is only read as written (a duration, a number, a whole number that fits) and
//! handed to the builder, starting from ballast-core's defaults; every rule is the builder's, and its refusal
//! ([`InvalidBreaker`]) becomes an error at `<path>.<InvalidBreaker::field>`.
//!
//! One mapping is the file's own: `consecutive_failures = 0` and `failure_rate = 0` turn a trigger off. The
//! builder takes 0 consecutive failures as off too; an off rate is its `None`, so a written 0 becomes `None`.

use std::time::Duration;

use ballast_core::{BreakerConfig, BreakerConfigBuilder, InvalidBreaker};

use super::check::{Checker, DurationRule, ask_core, join};
use crate::error::Problem;
use crate::raw::{HumanValue, RawBreaker};

/// One value the file wrote, read and ready for the builder.
#[derive(Clone, Copy)]
enum Setting {
    ConsecutiveFailures(u32),
    ConsecutiveSpread(Duration),
    FailureRate(Option<f64>),
    Window(Duration),
    MinCalls(u32),
    SlowCall(Duration),
    OpenFor(Duration),
    OpenJitter(f64),
    HalfOpenProbes(u32),
    SuccessThreshold(u32),
}

impl Setting {
    /// The key, as in the file and in [`InvalidBreaker::field`].
    fn field(self) -> &'static str {
        match self {
            Setting::ConsecutiveFailures(_) => "consecutive_failures",
            Setting::ConsecutiveSpread(_) => "consecutive_spread",
            Setting::FailureRate(_) => "failure_rate",
            Setting::Window(_) => "window",
            Setting::MinCalls(_) => "min_calls",
            Setting::SlowCall(_) => "slow_call",
            Setting::OpenFor(_) => "open_for",
            Setting::OpenJitter(_) => "open_jitter",
            Setting::HalfOpenProbes(_) => "half_open_probes",
            Setting::SuccessThreshold(_) => "success_threshold",
        }
    }

    fn apply(self, builder: BreakerConfigBuilder) -> BreakerConfigBuilder {
        match self {
            Setting::ConsecutiveFailures(n) => builder.consecutive_failures(n),
            Setting::ConsecutiveSpread(spread) => builder.consecutive_spread(spread),
            Setting::FailureRate(rate) => builder.failure_rate(rate),
            Setting::Window(window) => builder.window(window),
            Setting::MinCalls(n) => builder.min_calls(n),
            Setting::SlowCall(threshold) => builder.slow_call(Some(threshold)),
            Setting::OpenFor(open_for) => builder.open_for(open_for),
            Setting::OpenJitter(jitter) => builder.open_jitter(jitter),
            Setting::HalfOpenProbes(m) => builder.half_open_probes(m),
            Setting::SuccessThreshold(s) => builder.success_threshold(s),
        }
    }
}

/// The builder from ballast-core's defaults with every setting applied.
fn build(settings: &[Setting]) -> Result<BreakerConfig, InvalidBreaker> {
    let builder = settings
        .iter()
        .fold(BreakerConfig::builder(), |builder, setting| {
            setting.apply(builder)
        });
    builder.build()
}

impl Checker {
    /// A `breaker` table at `path`.
    pub(crate) fn breaker(&mut self, path: &str, raw: Option<&RawBreaker>) -> BreakerConfig {
        let default = BreakerConfig::default();
        let Some(raw) = raw else { return default };
        let read = self.breaker_settings(path, raw);
        let read_all = read.iter().all(Option::is_some);
        let mut settings: Vec<Setting> = read.into_iter().flatten().collect();
        let values = settings.len();
        let build = |settings: &Vec<Setting>| build(settings);
        let built = ask_core(&mut settings, values, build, |settings, error| {
            let field = error.field();
            self.report(join(path, field), Problem::Breaker(error));
            // Put the refused value back to its default and ask again, for the table's other errors.
            let refused = settings.iter().position(|s| s.field() == field);
            refused.map(|i| settings.remove(i)).is_some()
        });
        match built {
            Some(config) if read_all => config,
            _ => default,
        }
    }

    /// Every written value, read: `None` for one that could not be read (already reported).
    fn breaker_settings(&mut self, path: &str, raw: &RawBreaker) -> Vec<Option<Setting>> {
        type Count = fn(u32) -> Setting;
        type Time = fn(Duration) -> Setting;
        let counts: [(&str, Option<i64>, Count); 4] = [
            (
                "consecutive_failures",
                raw.consecutive_failures,
                Setting::ConsecutiveFailures,
            ),
            ("min_calls", raw.min_calls, Setting::MinCalls),
            ("half_open_probes", raw.half_open_probes, Setting::HalfOpenProbes),
            (
                "success_threshold",
                raw.success_threshold,
                Setting::SuccessThreshold,
            ),
        ];
        let times: [(&str, Option<&HumanValue>, Time); 4] = [
            (
                "consecutive_spread",
                raw.consecutive_spread.as_ref(),
                Setting::ConsecutiveSpread,
            ),
            ("window", raw.window.as_ref(), Setting::Window),
            ("slow_call", raw.slow_call.as_ref(), Setting::SlowCall),
            ("open_for", raw.open_for.as_ref(), Setting::OpenFor),
        ];
        let mut settings = Vec::new();
        // Whole numbers only need to fit a u32, durations to be well-formed: every range is the builder's.
        for (key, value, setting) in counts.into_iter().filter(|c| c.1.is_some()) {
            settings.push(self.int(&join(path, key), value, 0, 0).map(setting));
        }
        for (key, value, setting) in times.into_iter().filter(|t| t.1.is_some()) {
            let duration = self.duration(&join(path, key), value, Duration::ZERO, DurationRule::Any);
            settings.push(duration.map(setting));
        }
        // Numbers go to the builder as written (NaN included); only the file's 0 for "off" is translated.
        if let Some(rate) = raw.failure_rate {
            settings.push(Some(Setting::FailureRate((rate != 0.0).then_some(rate))));
        }
        if let Some(jitter) = raw.open_jitter {
            settings.push(Some(Setting::OpenJitter(jitter)));
        }
        settings
    }
}
