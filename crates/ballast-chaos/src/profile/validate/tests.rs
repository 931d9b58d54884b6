//! Every rule of phase two, with its message and path.

use std::time::Duration;

use crate::profile::error::{Problem, ProfileError};
use crate::profile::{ErrorDelivery, Profile, RetryAfterForm, ScriptStep};

/// The problems of a profile that must be refused, one line each.
fn problems(toml: &str) -> Vec<String> {
    match Profile::from_toml_str(toml) {
        Err(ProfileError::Invalid { problems }) => problems.iter().map(ToString::to_string).collect(),
        other => panic!("expected validation errors, got {other:?}"),
    }
}

fn valid(toml: &str) -> Profile {
    Profile::from_toml_str(toml).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn rates_are_probabilities() {
    let found = problems(
        "[endpoints.create_refund]\nerrors = { 503 = 1.5 }\nhang = -0.1\nreset = nan\n\
         insufficient_quota = inf\nspend_limit = 1.1\nstream = { cut = 2.0, cut_after_chunks = 1, error = -1.0 }\n",
    );
    assert_eq!(
        found,
        [
            "endpoints.create_refund.errors.503: 1.5 is not a rate (0..=1)",
            "endpoints.create_refund.insufficient_quota: inf is not a rate (0..=1)",
            "endpoints.create_refund.spend_limit: 1.1 is not a rate (0..=1)",
            "endpoints.create_refund.hang: -0.1 is not a rate (0..=1)",
            "endpoints.create_refund.reset: NaN is not a rate (0..=1)",
            "endpoints.create_refund.stream.cut: 2 is not a rate (0..=1)",
            "endpoints.create_refund.stream.error: -1 is not a rate (0..=1)",
        ]
    );
}

#[test]
fn exclusive_rates_sum_to_at_most_one() {
    assert_eq!(
        problems("[endpoints.model]\nerrors = { 503 = 0.5 }\nhang = 0.7\n"),
        ["endpoints.model: rates sum to 1.2, over 1 (errors.503 = 0.5, hang = 0.7)"]
    );
    assert_eq!(
        problems(
            "[default]\nreset = 0.6\nstream = { stall = 0.6, stall_after_chunks = 1, stall_for = \"1s\" }\n"
        ),
        ["default: rates sum to 1.2, over 1 (reset = 0.6, stream.stall = 0.6)"]
    );
    assert_eq!(
        problems("[endpoints.model]\nspend_limit = 0.5\nstream = { error = 0.6 }\n"),
        ["endpoints.model: rates sum to 1.1, over 1 (spend_limit = 0.5, stream.error = 0.6)"]
    );
}

#[test]
fn a_stream_error_comes_after_at_least_one_content_chunk() {
    let profile = valid("[endpoints.model]\nstream = { error = 0.1 }\n");
    assert_eq!(
        profile.endpoint("model").stream.error_after_chunks,
        1,
        "the default"
    );
    let profile = valid("[endpoints.model]\nstream = { error = 0.1, error_after_chunks = 3 }\n");
    assert_eq!(profile.endpoint("model").stream.error_after_chunks, 3);
    assert_eq!(
        problems("[endpoints.model]\nstream = { error = 0.1, error_after_chunks = 0 }\n"),
        ["endpoints.model.stream.error_after_chunks: 0 must be at least 1"]
    );
}

#[test]
fn rates_that_are_one_on_paper_pass_despite_float_noise() {
    // 0.2 + 0.4 + 0.3 + 0.1 is 1.0000000000000002 in doubles.
    let profile = valid("[default]\nerrors = { 500 = 0.2, 502 = 0.4 }\nhang = 0.3\nreset = 0.1\n");
    assert_eq!(profile.default.reset, 0.1);
}

#[test]
fn an_endpoint_is_blamed_for_the_sum_only_when_it_sets_a_rate() {
    let toml = "[default]\nhang = 0.6\n[endpoints.quiet]\nkey_mode = \"keyed\"\n\
                [endpoints.loud]\nerrors = { 503 = 0.5 }\n";
    assert_eq!(
        problems(toml),
        ["endpoints.loud: rates sum to 1.1, over 1 (errors.503 = 0.5, hang = 0.6)"]
    );
}

#[test]
fn latency_needs_a_positive_median_under_its_p99() {
    assert_eq!(
        problems("[endpoints.model]\nlatency = { p50 = \"80ms\", p99 = \"10ms\" }\n"),
        ["endpoints.model.latency: p99 (10ms) is under p50 (80ms)"]
    );
    assert_eq!(
        problems("[endpoints.model]\nlatency = { p50 = \"0s\", p99 = \"10ms\" }\n"),
        ["endpoints.model.latency.p50: must be above 0s"]
    );
    let equal = valid("[default]\nlatency = { p50 = \"25ms\", p99 = \"25ms\" }\n");
    assert_eq!(
        equal.default.latency.map(|l| l.p99),
        Some(Duration::from_millis(25))
    );
}

#[test]
fn durations_are_checked_with_their_reason() {
    assert_eq!(
        problems("[default]\nlatency = { p50 = \"12x\", p99 = 30 }\n"),
        [
            "default.latency.p50: \"12x\" is not a duration: unknown unit \"x\" (use d, h, m, s, ms, us or ns)",
            "default.latency.p99: 30 is not a duration: units are required (e.g. \"30s\" or \"30ms\")",
        ]
    );
    assert_eq!(
        problems("[model]\nchunk_interval = true\n"),
        ["model.chunk_interval: true is not a duration: expected a string such as \"40ms\""]
    );
}

/// A profile's durations are written as `ballast.toml`'s are (one grammar, ballast-human): compound forms too.
#[test]
fn durations_are_written_as_in_the_config() {
    let profile = valid("[default]\nlatency = { p50 = \"1m30s\", p99 = \"1h0.5s\" }\n");
    assert_eq!(
        profile.default.latency.map(|l| (l.p50, l.p99)),
        Some((Duration::from_secs(90), Duration::from_millis(3_600_500)))
    );
    assert_eq!(
        problems("[default]\nlatency = { p50 = true, p99 = \"1s\" }\n"),
        ["default.latency.p50: true is not a duration: expected a string such as \"40ms\""]
    );
}

#[test]
fn outages_end_after_they_start() {
    assert_eq!(
        problems(
            "[endpoints.process_payment]\noutages = [ { start = \"20s\", end = \"21s\" }, \
                  { start = \"23s\", end = \"20s\" }, { start = \"5s\", end = \"5s\" } ]\n"
        ),
        [
            "endpoints.process_payment.outages[1]: end (20s) is not after start (23s)",
            "endpoints.process_payment.outages[2]: end (5s) is not after start (5s)",
        ]
    );
}

#[test]
fn outages_say_what_they_answer_and_closed_windows_are_windows() {
    use crate::profile::{OutageAnswer, Window};
    let profile = valid(
        "closed = [ { start = \"5s\", end = \"15s\" } ]\n[default]\noutages = [ { start = \"1s\", end = \"2s\" }, \
         { start = \"3s\", end = \"4s\", answer = \"no_retry_after\" }, { start = \"5s\", end = \"6s\", answer = \"hang\" } ]\n",
    );
    let answers: Vec<OutageAnswer> = profile.default.outages.iter().map(|o| o.answer).collect();
    assert_eq!(
        answers,
        [
            OutageAnswer::RetryAfter,
            OutageAnswer::NoRetryAfter,
            OutageAnswer::Hang
        ]
    );
    assert_eq!(
        profile.closed,
        [Window {
            start: Duration::from_secs(5),
            end: Duration::from_secs(15)
        }]
    );
    assert_eq!(
        problems("closed = [ { start = \"5s\", end = \"1s\" } ]\n"),
        ["closed[0]: end (1s) is not after start (5s)"]
    );
    let unknown = Profile::from_toml_str(
        "[default]\noutages = [ { start = \"1s\", end = \"2s\", answer = \"explode\" } ]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(unknown.contains("explode"), "{unknown}");
}

#[test]
fn capacity_admits_someone() {
    assert_eq!(
        problems("[default]\ncapacity = { concurrent = 0, queue = 8 }\n"),
        ["default.capacity.concurrent: 0 must be at least 1"]
    );
    let no_queue = valid("[default]\ncapacity = { concurrent = 4 }\n");
    assert_eq!(
        no_queue.default.capacity.map(|c| (c.concurrent, c.queue)),
        Some((4, 0))
    );
}

#[test]
fn stream_faults_have_chunks_and_a_stall() {
    assert_eq!(
        problems("[endpoints.model]\nstream = { cut = 0.1, stall = 0.1, stall_after_chunks = 0 }\n"),
        [
            "endpoints.model.stream.cut_after_chunks: 0 must be at least 1 when cut > 0",
            "endpoints.model.stream.stall_for: must be above 0s when stall > 0",
        ]
    );
    // Zero rates need nothing else.
    valid("[endpoints.model]\nstream = { cut = 0.0, stall = 0.0 }\n");
    // A stall may come before the first chunk.
    let before =
        valid("[endpoints.model]\nstream = { stall = 0.1, stall_after_chunks = 0, stall_for = \"1s\" }\n");
    assert_eq!(before.endpoint("model").stream.stall_after_chunks, 0);
}

#[test]
fn keep_alives_have_an_interval_and_errors_a_delivery() {
    let profile = valid(
        "[endpoints.model]\nstream = { stall = 1.0, stall_for = \"3s\", keep_alive = \"500ms\", \
         error_delivery = \"events\" }\n",
    );
    let stream = profile.endpoint("model").stream;
    assert_eq!(stream.keep_alive, Some(Duration::from_millis(500)));
    assert_eq!(stream.error_delivery, ErrorDelivery::Events);
    assert_eq!(
        Profile::default().default.stream.error_delivery,
        ErrorDelivery::Status
    );
    assert_eq!(Profile::default().default.stream.keep_alive, None);
    assert_eq!(
        problems(
            "[default]\nstream = { keep_alive = \"0s\" }\n[endpoints.model]\nstream = { keep_alive = \"fast\" }\n"
        ),
        [
            "default.stream.keep_alive: must be above 0s",
            "endpoints.model.stream.keep_alive: \"fast\" is not a duration: unexpected 'f' (write e.g. \"1h30m\" or \"1.5s\", without spaces)",
        ]
    );
    let err =
        Profile::from_toml_str("[default]\nstream = { error_delivery = \"event\" }\n").expect_err("unknown");
    assert!(
        err.to_string()
            .starts_with("default.stream.error_delivery: unknown variant `event`"),
        "{err}"
    );
}

#[test]
fn error_keys_are_error_statuses() {
    assert_eq!(
        problems("[default]\nerrors = { 200 = 0.1, 600 = 0.1, abc = 0.1, 0503 = 0.1, 429 = 0.1 }\n"),
        [
            "default.errors.0503: \"0503\" is not an error status (a number in 400..=599)",
            "default.errors.200: \"200\" is not an error status (a number in 400..=599)",
            "default.errors.600: \"600\" is not an error status (a number in 400..=599)",
            "default.errors.abc: \"abc\" is not an error status (a number in 400..=599)",
        ]
    );
}

#[test]
fn errors_are_drawn_in_status_order() {
    let profile = valid("[default]\nerrors = { 529 = 0.01, 503 = 0.02, 429 = 0.03 }\n");
    let statuses: Vec<u16> = profile.default.errors.iter().map(|e| e.status).collect();
    assert_eq!(statuses, [429, 503, 529]);
}

#[test]
fn retry_after_forms() {
    let form = |value: &str| {
        valid(&format!("[default]\nretry_after = {value}\n"))
            .default
            .retry_after
    };
    assert_eq!(form("\"1s\""), Some(RetryAfterForm::Seconds(1)));
    assert_eq!(form("{ millis = \"250ms\" }"), Some(RetryAfterForm::Millis(250)));
    assert_eq!(form("{ seconds = \"2m\" }"), Some(RetryAfterForm::Seconds(120)));
    assert_eq!(
        form("{ http_date = \"2s\" }"),
        Some(RetryAfterForm::HttpDate(Duration::from_secs(2)))
    );
    assert_eq!(
        problems(
            "[default]\nretry_after = \"1.5s\"\n[endpoints.a]\nretry_after = { http_dat = \"2s\" }\n\
                  [endpoints.b]\nretry_after = { http_date = \"500ms\" }\n[endpoints.c]\nretry_after = 1\n"
        ),
        [
            "default.retry_after: 1.5s is not a whole number of seconds (Retry-After carries seconds)",
            "endpoints.a.retry_after: { http_dat = \"2s\" } is not a Retry-After (write \"1s\", \
             { seconds = \"1s\" } or { http_date = \"2s\" })",
            "endpoints.b.retry_after.http_date: 500ms is not a whole number of seconds (Retry-After carries \
             seconds)",
            "endpoints.c.retry_after: 1 is not a duration: units are required (e.g. \"1s\" or \"1ms\")",
        ]
    );
}

#[test]
fn endpoint_names_are_function_names() {
    assert_eq!(
        problems("[endpoints.\"refund now\"]\nhang = 0.1\n"),
        ["endpoints.refund now: \"refund now\" is not an endpoint name (1 to 64 of A-Z, a-z, 0-9, _ and -)"]
    );
}

#[test]
fn model_settings() {
    assert_eq!(
        problems("[model]\ncontext_limit_chars = 0\nchunk_interval = \"5\"\n"),
        [
            "model.context_limit_chars: 0 must be at least 1",
            "model.chunk_interval: \"5\" is not a duration: units are required (e.g. \"5s\" or \"5ms\")",
        ]
    );
    let model = valid("[model]\ncontext_limit_chars = 100\nchunk_interval = \"1ms\"\n").model;
    assert_eq!(
        (model.context_limit_chars, model.chunk_interval),
        (100, Duration::from_millis(1))
    );
}

#[test]
fn script_steps_parse() {
    let profile = valid(
        "[[scripts]]\nendpoint = \"create_refund\"\nop = \"op-42\"\n\
         steps = [\"503\", 429, \"hang\", \"reset\", \"commit_then_lose\", \"insufficient_quota\", \"spend_limit\", \
         \"stream_error\", \"garbage\", \"is_error\", \"ok\"]\n",
    );
    assert_eq!(
        profile.scripts[0].steps,
        [
            ScriptStep::Status(503),
            ScriptStep::Status(429),
            ScriptStep::Hang,
            ScriptStep::Reset,
            ScriptStep::CommitThenLose,
            ScriptStep::InsufficientQuota,
            ScriptStep::SpendLimit,
            ScriptStep::StreamError,
            ScriptStep::Garbage,
            ScriptStep::IsError,
            ScriptStep::Ok,
        ]
    );
    let step_error = |step: &str| {
        format!(
            "{step} is not a step (ok, hang, reset, commit_then_lose, insufficient_quota, spend_limit, stream_error, \
             garbage, is_error or a status in 400..=599)"
        )
    };
    assert_eq!(
        problems(
            "[[scripts]]\nendpoint = \"m\"\nop = \"x\"\nsteps = [\"5o3\", 200, \"OK\", \"0503\", 1.5]\n"
        ),
        [
            format!("scripts[0].steps[0]: {}", step_error("\"5o3\"")),
            format!("scripts[0].steps[1]: {}", step_error("200")),
            format!("scripts[0].steps[2]: {}", step_error("\"OK\"")),
            format!("scripts[0].steps[3]: {}", step_error("\"0503\"")),
            format!("scripts[0].steps[4]: {}", step_error("1.5")),
        ]
    );
}

#[test]
fn scripts_name_an_endpoint_an_op_and_steps_once() {
    let toml = "[[scripts]]\nendpoint = \"\"\nop = \"\"\nsteps = []\n\
                [[scripts]]\nendpoint = \"m\"\nop = \"x\"\nsteps = [\"ok\"]\n\
                [[scripts]]\nendpoint = \"m\"\nop = \"x\"\nsteps = [\"503\"]\n";
    assert_eq!(
        problems(toml),
        [
            "scripts[0].endpoint: must not be empty",
            "scripts[0].op: must not be empty",
            "scripts[0].steps: must not be empty",
            "scripts[2]: same endpoint and op as scripts[1]",
        ]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let toml = "[model]\ncontext_limit_chars = 0\n[default]\nhang = 2.0\n\
                [endpoints.model]\nlatency = { p50 = \"80ms\", p99 = \"10ms\" }\n\
                [[scripts]]\nendpoint = \"model\"\nop = \"x\"\nsteps = [\"nope\"]\n";
    let err = Profile::from_toml_str(toml).expect_err("four problems");
    let ProfileError::Invalid { problems } = &err else {
        panic!("{err:?}")
    };
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "model.context_limit_chars",
            "default.hang",
            "endpoints.model.latency",
            "scripts[0].steps[0]"
        ]
    );
    assert_eq!(problems[1].problem, Problem::NotARate { value: 2.0 });
    assert_eq!(err.to_string().lines().count(), 4, "one line each:\n{err}");
}
