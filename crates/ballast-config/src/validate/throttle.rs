//! The `throttle` table models and tools share, checked by ballast-core's [`ThrottleConfig::new`].

use std::time::Duration;

use ballast_core::ThrottleConfig;

use super::check::{Checker, DurationRule, join};
use crate::error::Problem;
use crate::raw::RawThrottle;

impl Checker {
    /// A `throttle` table at `path`: `None` when `enabled = false`, the defaults when absent (a value that
    /// cannot be used is reported, and its default taken, so the table's other errors are reported too).
    pub(crate) fn throttle(&mut self, path: &str, raw: Option<&RawThrottle>) -> Option<ThrottleConfig> {
        let d = ThrottleConfig::default();
        let Some(raw) = raw else { return Some(d) };
        let multiplier = self.float(
            &join(path, "accept_multiplier"),
            raw.accept_multiplier,
            d.accept_multiplier(),
            |k| (1.0..=1000.0).contains(&k),
            "between 1 and 1000",
        );
        let window_path = join(path, "window");
        let mut window = self.duration(
            &window_path,
            raw.window.as_ref(),
            d.window(),
            DurationRule::Positive,
        );
        if let (Some(short), Some(raw_window)) = (window, &raw.window)
            && short < Duration::from_millis(1)
        {
            let must_be = "at least 1ms".to_owned();
            self.report(
                &window_path,
                Problem::Range {
                    value: raw_window.to_string(),
                    must_be,
                },
            );
            window = None;
        }
        let min_requests = self.int(&join(path, "min_requests"), raw.min_requests, d.min_requests(), 0);
        // The default's 10 buckets of a tenth of the window, fewer in a window under 10 ms (a bucket is at least
        // 1 ms).
        let window = window.unwrap_or(d.window());
        let most = d.window_buckets();
        let buckets = u32::try_from(window.as_millis().clamp(1, u128::from(most))).unwrap_or(most);
        let config = ThrottleConfig::new(
            multiplier.unwrap_or(d.accept_multiplier()),
            window,
            buckets,
            min_requests.unwrap_or(d.min_requests()),
        )
        // Every rule of `new` is checked above; a refusal here keeps the defaults.
        .unwrap_or(d);
        raw.enabled.unwrap_or(true).then_some(config)
    }
}
