//! What an agent's HTTP calls do when it is written with the official OpenAI SDKs: their retries, their waits and
//! the headers they send, as openai-python 3.57 (`_base_client.py`) and openai-node 7.59 (`client.ts`) do them
//! (read from the installed packages: crates/ballast-cli/tests/sdk/README.md, "What the SDKs do with the gateway's
//! answers"). The HTTP strategies send every call — model turns, and tool calls made with plain HTTP beside the
//! SDK — through [`SdkHabits::post`], so an agent behaves as a Python or TypeScript agent of today does.
//!
//! - Up to 2 retries of connection errors, timeouts, 408, 409, 429 and 5xx — unless the answer says
//!   `x-should-retry: false` (and any status is retried when it says `true`). Python first refuses to retry an
//!   answer whose `Retry-After` is over 120 s; Node reads `x-should-retry` first.
//! - The wait before a retry: `retry-after-ms`, else `Retry-After` (seconds, or an HTTP-date), when it is at most
//!   120 s (Python; and above 0) or 60 s (Node; and at least 0); else 0.5 s × 2^n up to 8 s, minus up to 25 %
//!   jitter, n the retries taken so far.
//! - Every request says `x-stainless-retry-count` (its retry number, from 0) and its timeout: Python
//!   `x-stainless-read-timeout` (seconds, a decimal), Node `x-stainless-timeout` (whole seconds, truncated — sent
//!   because the agent sets its timeout per request, the only way openai-node sends it).
//! - A timeout covers one HTTP request, whole answer included (Python's httpx read timeout is the time to the
//!   answer for a non-streamed call; Node's covers the headers and the body).
//!
//! Every duration — the timeout, the backoff, the 60 s and 120 s limits — runs at the bench's time scale, as the
//! in-process strategies' own durations do; the waits the answers ask for are the upstream's, already scaled.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};

/// Retries after the first try (both SDKs' default `max_retries`).
const MAX_RETRIES: u32 = 2;
/// The first backoff sleep, doubled on each retry.
const INITIAL_RETRY_DELAY: Duration = Duration::from_millis(500);
/// The longest backoff sleep.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(8);
/// openai-python waits a `Retry-After` up to this; a longer one is not retried at all.
const PYTHON_MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
/// openai-node waits a `Retry-After` up to this; a longer one is ignored (it backs off instead).
const NODE_MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Which SDK's habits an agent has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// openai-python 3.57.
    Python,
    /// openai-node 7.59.
    Node,
}

impl Flavour {
    /// Agents alternate, two by two so that each API (even agents the Responses API, odd ones chat) has agents of
    /// both flavours: agents 0 and 1 are Python's, 2 and 3 Node's, ...
    pub(super) fn of_agent(agent: usize) -> Flavour {
        if (agent / 2).is_multiple_of(2) {
            Flavour::Python
        } else {
            Flavour::Node
        }
    }
}

/// How one agent's SDK calls: its flavour, its timeout and the bench's time scale.
#[derive(Clone, Debug)]
pub(super) struct SdkHabits {
    flavour: Flavour,
    /// The timeout of one HTTP request (scaled).
    timeout: Duration,
    time_scale: f64,
}

/// Why a call failed after the SDK's retries.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Failure {
    /// No answer: `timeout`, `connect_error`, `connection_lost`, `bad_answer` (the naive strategy's kinds).
    Transport(String),
    /// An answer that was not a 2xx.
    Status {
        /// Its status.
        status: StatusCode,
        /// Its headers.
        headers: HeaderMap,
    },
}

impl Failure {
    /// The failure's stable code: a Ballast gateway's `ballast-code` when it sent one, else `status_<N>` (the
    /// naive client's spelling), or the transport's kind.
    pub(super) fn code(&self) -> String {
        match self {
            Failure::Transport(kind) => kind.clone(),
            Failure::Status { status, headers } => headers
                .get("ballast-code")
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| format!("status_{}", status.as_u16()), str::to_owned),
        }
    }

    /// Whether a Ballast gateway shed the call by admission (`overloaded` with `ballast-shed`, not a throttle's
    /// refusal).
    pub(super) fn shed_by_admission(&self) -> bool {
        let Failure::Status { headers, .. } = self else {
            return false;
        };
        let shed = headers.get("ballast-shed").and_then(|v| v.to_str().ok());
        self.code() == "overloaded"
            && shed.is_some_and(|reason| reason != ballast::Overload::Throttled.as_str())
    }
}

impl SdkHabits {
    /// An agent of `flavour` whose SDK timeout is `timeout` (scaled), on a clock running at `time_scale`.
    pub(super) fn new(flavour: Flavour, timeout: Duration, time_scale: f64) -> SdkHabits {
        SdkHabits {
            flavour,
            timeout,
            time_scale,
        }
    }

    /// POSTs `body` (JSON) to `url` with `headers`, retrying as the SDK does; `rng` draws the backoff's jitter.
    /// The body of the 2xx answer, or why there is none.
    pub(super) async fn post(
        &self,
        client: &reqwest::Client,
        url: &str,
        headers: &HeaderMap,
        body: &Bytes,
        rng: &mut SmallRng,
    ) -> Result<Bytes, Failure> {
        let mut retries = 0;
        loop {
            let request = client
                .post(url)
                .headers(headers.clone())
                .header("content-type", "application/json")
                .header("x-stainless-retry-count", retries)
                .header(self.timeout_header(), self.timeout_value())
                .timeout(self.timeout)
                .body(body.clone());
            // What failed, and the wait its answer asked for (`None`: back off).
            let (failure, asked) = match request.send().await {
                Ok(response) if response.status().is_success() => match response.bytes().await {
                    Ok(body) => return Ok(body),
                    Err(error) => (Failure::Transport(super::naive::kind(&error)), None),
                },
                Ok(response) => {
                    let (status, headers) = (response.status(), response.headers().clone());
                    // Read to its end, so that the connection is reused.
                    let _ = response.bytes().await;
                    if !self.should_retry(status, &headers) {
                        return Err(Failure::Status { status, headers });
                    }
                    let asked = self.asked_wait(&headers);
                    (Failure::Status { status, headers }, asked)
                }
                Err(error) => (Failure::Transport(super::naive::kind(&error)), None),
            };
            if retries == MAX_RETRIES {
                return Err(failure);
            }
            tokio::time::sleep(asked.unwrap_or_else(|| self.backoff(retries, rng))).await;
            retries += 1;
        }
    }

    /// Whether the SDK retries an answer with `status` and `headers` (module docs).
    fn should_retry(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        if self.flavour == Flavour::Python
            && retry_after(headers).is_some_and(|wait| wait > self.scaled(PYTHON_MAX_RETRY_AFTER))
        {
            return false;
        }
        match headers.get("x-should-retry").map(HeaderValue::as_bytes) {
            Some(b"true") => return true,
            Some(b"false") => return false,
            _ => {}
        }
        matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error()
    }

    /// The wait an answer asks for, when the SDK takes it (module docs); `None`: back off.
    fn asked_wait(&self, headers: &HeaderMap) -> Option<Duration> {
        let wait = retry_after(headers)?;
        let (limit, zero_taken) = match self.flavour {
            Flavour::Python => (PYTHON_MAX_RETRY_AFTER, false),
            Flavour::Node => (NODE_MAX_RETRY_AFTER, true),
        };
        (wait <= self.scaled(limit) && (zero_taken || !wait.is_zero())).then_some(wait)
    }

    /// The backoff before retry `retries + 1`: 0.5 s × 2^retries up to 8 s, minus up to 25 % (scaled).
    fn backoff(&self, retries: u32, rng: &mut SmallRng) -> Duration {
        let sleep = INITIAL_RETRY_DELAY
            .saturating_mul(1 << retries.min(16))
            .min(MAX_RETRY_DELAY);
        self.scaled(sleep.mul_f64(1.0 - 0.25 * rng.random_range(0.0..1.0)))
    }

    fn scaled(&self, duration: Duration) -> Duration {
        duration.mul_f64(self.time_scale)
    }

    fn timeout_header(&self) -> &'static str {
        match self.flavour {
            Flavour::Python => "x-stainless-read-timeout",
            Flavour::Node => "x-stainless-timeout",
        }
    }

    /// Python: `str(float)` of the seconds (`30.0`, `0.6`); Node: `String(Math.trunc(ms / 1000))`.
    fn timeout_value(&self) -> String {
        let seconds = self.timeout.as_secs_f64();
        match self.flavour {
            Flavour::Python if seconds.fract() == 0.0 => format!("{seconds:.1}"),
            Flavour::Python => format!("{seconds}"),
            Flavour::Node => self.timeout.as_secs().to_string(),
        }
    }
}

/// The wait an answer asks for: `retry-after-ms` (a number of milliseconds), else `Retry-After` as a number of
/// seconds (fractions allowed, as both SDKs parse it), else as an HTTP-date (the time until then; zero for a date
/// past). `None`: neither, or neither readable.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let number = |value: &str, unit: f64| {
        value
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(|n| Duration::from_secs_f64((n * unit).max(0.0)))
    };
    if let Some(wait) = text("retry-after-ms").and_then(|v| number(v, 0.001)) {
        return Some(wait);
    }
    let value = text("retry-after")?;
    number(value, 1.0).or_else(|| ballast::clock::retry_after(value).ok())
}

/// A seeded jitter source for one conversation (the SDKs draw from `Math.random`/`random()`; a seeded one makes
/// a run repeat).
pub(super) fn jitter_rng(op: &str) -> SmallRng {
    SmallRng::seed_from_u64(super::naive::op_seed(op) ^ 0x5D4B_A817)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn x_should_retry_decides_and_python_refuses_a_retry_after_over_two_minutes() {
        let python = SdkHabits::new(Flavour::Python, Duration::from_secs(30), 1.0);
        let node = SdkHabits::new(Flavour::Node, Duration::from_secs(30), 1.0);
        let s = |n: u16| StatusCode::from_u16(n).unwrap();
        for sdk in [&python, &node] {
            assert!(sdk.should_retry(s(503), &headers(&[])));
            assert!(sdk.should_retry(s(409), &headers(&[])));
            assert!(!sdk.should_retry(s(400), &headers(&[])));
            assert!(!sdk.should_retry(s(503), &headers(&[("x-should-retry", "false")])));
            assert!(sdk.should_retry(s(400), &headers(&[("x-should-retry", "true")])));
        }
        let long = headers(&[("x-should-retry", "true"), ("retry-after", "121")]);
        assert!(!python.should_retry(s(503), &long));
        assert!(node.should_retry(s(503), &long));
    }

    #[test]
    fn waits_follow_retry_after_ms_then_retry_after_within_each_sdks_limit() {
        let python = SdkHabits::new(Flavour::Python, Duration::from_secs(30), 1.0);
        let node = SdkHabits::new(Flavour::Node, Duration::from_secs(30), 1.0);
        let both = headers(&[("retry-after-ms", "250"), ("retry-after", "1")]);
        assert_eq!(python.asked_wait(&both), Some(Duration::from_millis(250)));
        assert_eq!(
            node.asked_wait(&headers(&[("retry-after", "1.5")])),
            Some(Duration::from_millis(1500))
        );
        let ninety = headers(&[("retry-after", "90")]);
        assert_eq!(python.asked_wait(&ninety), Some(Duration::from_secs(90)));
        assert_eq!(node.asked_wait(&ninety), None, "over 60 s: Node backs off");
        let zero = headers(&[("retry-after", "0")]);
        assert_eq!(python.asked_wait(&zero), None, "Python takes only a wait above 0");
        assert_eq!(node.asked_wait(&zero), Some(Duration::ZERO));
        let date = headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]);
        assert_eq!(node.asked_wait(&date), Some(Duration::ZERO), "a date past");
        // At a tenth of real time, the limits shrink alike.
        let fast = SdkHabits::new(Flavour::Node, Duration::from_secs(3), 0.1);
        assert_eq!(fast.asked_wait(&headers(&[("retry-after-ms", "7000")])), None);
    }

    #[test]
    fn backoff_doubles_from_half_a_second_less_up_to_a_quarter_and_scales() {
        let sdk = SdkHabits::new(Flavour::Python, Duration::from_secs(30), 1.0);
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..100 {
            let first = sdk.backoff(0, &mut rng).as_secs_f64();
            assert!((0.375..=0.5).contains(&first), "{first}");
            let second = sdk.backoff(1, &mut rng).as_secs_f64();
            assert!((0.75..=1.0).contains(&second), "{second}");
            assert!(sdk.backoff(10, &mut rng) <= MAX_RETRY_DELAY);
        }
        let fast = SdkHabits::new(Flavour::Python, Duration::from_secs(3), 0.1);
        assert!(fast.backoff(0, &mut rng) <= Duration::from_millis(50));
    }

    #[test]
    fn timeout_headers_are_written_as_each_sdk_writes_them() {
        let python = SdkHabits::new(Flavour::Python, Duration::from_secs(30), 1.0);
        assert_eq!(
            (python.timeout_header(), python.timeout_value().as_str()),
            ("x-stainless-read-timeout", "30.0")
        );
        let python = SdkHabits::new(Flavour::Python, Duration::from_millis(600), 0.02);
        assert_eq!(python.timeout_value(), "0.6");
        let node = SdkHabits::new(Flavour::Node, Duration::from_millis(29_900), 1.0);
        assert_eq!(
            (node.timeout_header(), node.timeout_value().as_str()),
            ("x-stainless-timeout", "29")
        );
    }

    #[test]
    fn failures_read_a_gateways_code_and_shed() {
        let shed = Failure::Status {
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers: headers(&[("ballast-code", "overloaded"), ("ballast-shed", "queue_full")]),
        };
        assert_eq!(shed.code(), "overloaded");
        assert!(shed.shed_by_admission());
        let throttled = Failure::Status {
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers: headers(&[("ballast-code", "overloaded"), ("ballast-shed", "throttled")]),
        };
        assert!(!throttled.shed_by_admission());
        let plain = Failure::Status {
            status: StatusCode::BAD_GATEWAY,
            headers: HeaderMap::new(),
        };
        assert_eq!(plain.code(), "status_502");
        assert_eq!(Failure::Transport("timeout".into()).code(), "timeout");
    }
}
