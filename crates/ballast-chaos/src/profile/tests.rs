//! Loading (syntax errors, files), presets, scripts over the draw, the summary, and docs/chaos.md in step.

use std::time::Duration;

use super::*;
use crate::{Draw, Fault, draw};

const DOCS: &str = include_str!("../../../../docs/chaos.md");

fn syntax_error(toml: &str) -> (String, String, Option<usize>) {
    match Profile::from_toml_str(toml) {
        Err(ProfileError::Syntax {
            path, message, line, ..
        }) => (path, message, line),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn an_unknown_key_names_the_key_and_its_table() {
    let (path, message, line) = syntax_error("seed = 1\n[endpoints.create_refund]\nhnag = 0.1\n");
    assert_eq!(path, "endpoints.create_refund.hnag");
    assert!(
        message.starts_with("unknown field `hnag`, expected one of `latency`"),
        "{message}"
    );
    assert_eq!(line, Some(3));
    let err = Profile::from_toml_str("sed = 1\n").expect_err("unknown key");
    assert!(err.to_string().starts_with("sed: unknown field `sed`"), "{err}");
    let (path, _, _) = syntax_error("[endpoints.m]\nstream = { cutt = 0.1 }\n");
    assert_eq!(path, "endpoints.m.stream.cutt");
}

#[test]
fn a_wrong_type_names_its_path() {
    let (path, message, _) = syntax_error("[default]\nhang = \"often\"\n");
    assert_eq!(path, "default.hang");
    assert!(message.contains("invalid type"), "{message}");
    let (path, message, _) = syntax_error("[endpoints.x]\nkey_mode = \"stripe\"\n");
    assert_eq!(path, "endpoints.x.key_mode");
    assert!(message.contains("unknown variant `stripe`"), "{message}");
    let (path, _, _) = syntax_error("seed = -1\n");
    assert_eq!(path, "seed");
    let (path, _, _) = syntax_error("[default]\nlatency = { p50 = \"1ms\" }\n");
    assert_eq!(path, "default.latency", "a missing p99");
}

#[test]
fn not_toml_is_a_syntax_error_with_a_line() {
    let (path, _, line) = syntax_error("seed = 1\n[default\n");
    assert_eq!((path.as_str(), line), ("", Some(2)));
}

#[test]
fn an_empty_file_is_the_no_fault_profile() {
    assert_eq!(
        Profile::from_toml_str("").expect("empty is valid"),
        Profile::default()
    );
}

#[test]
fn load_reads_a_file_and_names_a_missing_one() {
    let dir = std::env::temp_dir().join(format!("ballast-chaos-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("profile.toml");
    std::fs::write(&file, "seed = 9\n[default]\nhang = 0.5\n").expect("write");
    let profile = Profile::load(&file).expect("loads");
    assert_eq!((profile.seed, profile.default.hang), (9, 0.5));
    let missing = dir.join("missing.toml");
    let err = Profile::load(&missing).expect_err("missing");
    assert!(matches!(err, ProfileError::Read { .. }));
    assert!(err.to_string().contains("missing.toml"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn endpoint_tables_override_default_key_by_key() {
    let profile = Profile::from_toml_str(
        "[default]\nerrors = { 503 = 0.1 }\nhang = 0.02\ncapacity = { concurrent = 8 }\n\
         [endpoints.create_refund]\nhang = 0.0\nkey_mode = \"keyed\"\n\
         [endpoints.model]\nerrors = {}\n",
    )
    .expect("valid");
    let refund = profile.endpoint("create_refund");
    assert_eq!((refund.errors[0].status, refund.hang), (503, 0.0));
    assert_eq!(refund.capacity, profile.default.capacity);
    assert_eq!(refund.key_mode, KeyMode::Keyed);
    assert!(
        profile.endpoint("model").errors.is_empty(),
        "an empty table clears the default's"
    );
    assert_eq!(profile.endpoint("lookup_order"), &profile.default);
}

fn script_profile() -> Profile {
    Profile::from_toml_str(
        "seed = 3\n[endpoints.create_refund]\nhang = 0.5\nretry_after = \"2s\"\nlose_with = \"reset\"\n\
         latency = { p50 = \"40ms\", p99 = \"200ms\" }\n\
         [[scripts]]\nendpoint = \"create_refund\"\nop = \"op-42\"\n\
         steps = [\"503\", \"500\", \"commit_then_lose\", \"ok\"]\n",
    )
    .expect("valid")
}

#[test]
fn scripts_override_the_draw_for_their_attempts_then_fall_back_to_it() {
    let profile = script_profile();
    let faults = profile.endpoint("create_refund");
    let scripted = |attempt| profile.fault_for("create_refund", "op-42", attempt);
    let at_once = |fault| Draw {
        latency: Duration::ZERO,
        fault,
    };
    assert_eq!(scripted(1), at_once(Fault::status(503, faults)));
    assert!(matches!(
        scripted(1).fault,
        Fault::Status {
            retry_after: Some(RetryAfterForm::Seconds(2)),
            ..
        }
    ));
    assert_eq!(scripted(2), at_once(Fault::status(500, faults)));
    assert_eq!(scripted(3), at_once(Fault::CommitThenLose(LoseMode::Reset)));
    assert_eq!(scripted(4), at_once(Fault::None));
    for attempt in 5..40 {
        assert_eq!(
            scripted(attempt),
            draw(3, "create_refund", "op-42", attempt, faults)
        );
    }
    // Other ops and other endpoints are not scripted.
    for attempt in 1..5 {
        assert_eq!(
            profile.fault_for("create_refund", "op-43", attempt),
            draw(3, "create_refund", "op-43", attempt, faults)
        );
        assert_eq!(
            profile.fault_for("model", "op-42", attempt),
            draw(3, "model", "op-42", attempt, &profile.default)
        );
    }
    // Attempt 0 (not 1-based) falls on the first step rather than panicking.
    assert_eq!(scripted(0), scripted(1));
}

#[test]
fn spend_limits_and_stream_errors_are_drawn_scripted_and_summarized() {
    let profile = Profile::from_toml_str(
        "[endpoints.model]\nspend_limit = 0.25\nstream = { error = 0.5, error_after_chunks = 2 }\n\
         [[scripts]]\nendpoint = \"model\"\nop = \"op-7\"\nsteps = [\"spend_limit\", \"stream_error\"]\n",
    )
    .expect("valid");
    let scripted = |attempt| profile.fault_for("model", "op-7/turn-0", attempt).fault;
    assert_eq!(scripted(1), Fault::SPEND_LIMIT);
    assert_eq!(scripted(2), Fault::StreamError { after_chunks: 2 });
    let summary = profile.summary();
    assert!(
        summary.contains("model: no latency; 25% 429 spend_limit, 50% stream error after 2 content chunks"),
        "{summary}"
    );
    assert!(
        summary.contains("script model op \"op-7\": spend_limit, stream_error"),
        "{summary}"
    );
}

/// Issue 32: the faults only MCP plays, and the lying annotations, are keys like any other.
#[test]
fn garbage_is_errors_and_lying_annotations_are_read_drawn_and_summarized() {
    let profile = Profile::from_toml_str(
        "[mcp]\nlying_annotations = true\n[endpoints.create_refund]\ngarbage = 0.25\nis_error = 0.5\n\
         [[scripts]]\nendpoint = \"create_refund\"\nop = \"op-7\"\nsteps = [\"garbage\", \"is_error\"]\n",
    )
    .expect("valid");
    assert!(profile.mcp.lying_annotations);
    assert!(!Profile::default().mcp.lying_annotations, "honest by default");
    let scripted = |attempt| profile.fault_for("create_refund", "op-7", attempt).fault;
    assert_eq!(scripted(1), Fault::Garbage);
    assert_eq!(scripted(2), Fault::IsError);
    let drawn: Vec<Fault> = (0..200)
        .map(|i| profile.fault_for("create_refund", &format!("op-{i}-x"), 1).fault)
        .collect();
    assert!(
        drawn.contains(&Fault::Garbage) && drawn.contains(&Fault::IsError) && drawn.contains(&Fault::None)
    );
    let summary = profile.summary();
    assert!(
        summary.contains("create_refund: no latency; 25% garbage (MCP), 50% is_error (MCP)"),
        "{summary}"
    );
    assert!(
        summary.contains("mcp: create_refund annotated readOnlyHint: true (a lie)"),
        "{summary}"
    );
    let over = Profile::from_toml_str("[default]\ngarbage = 0.75\nis_error = 0.5\n").expect_err("over 1");
    assert_eq!(
        over.to_string(),
        "default: rates sum to 1.25, over 1 (garbage = 0.75, is_error = 0.5)"
    );
    let unknown = Profile::from_toml_str("[mcp]\nlying = true\n").expect_err("unknown key");
    assert!(unknown.to_string().contains("mcp.lying"), "{unknown}");
}

#[test]
fn the_summary_says_what_is_served() {
    let summary = Profile::preset("flash-sale", 7).expect("preset").summary();
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(
        lines[0],
        "seed 7; model: context limit 32000 chars, a chunk every 5ms"
    );
    assert_eq!(
        lines[1],
        "[default]: no latency; no faults; capacity 64 + queue 64; key_mode none"
    );
    assert_eq!(
        lines[5],
        "process_payment: latency p50 40ms, p99 200ms; 3% 429, 5% 503, 1% hang, 2% commit_then_lose (then hang); \
         Retry-After: 1 on 429 and 503; down from 20s to 23s; capacity 64 + queue 64; key_mode keyed"
    );
    assert_eq!(lines.len(), 6, "{summary}");
    let scripted = script_profile().summary();
    assert!(
        scripted.contains("script create_refund op \"op-42\": 503, 500, commit_then_lose, ok"),
        "{scripted}"
    );
    assert!(scripted.contains("50% hang"), "{scripted}");
}

#[test]
fn a_scaled_profile_scales_stalls_keep_alives_and_chunks() {
    let profile = Profile::from_toml_str(
        "[model]\nchunk_interval = \"10ms\"\n[endpoints.model]\n\
         stream = { stall = 0.5, stall_after_chunks = 0, stall_for = \"2s\", keep_alive = \"500ms\", \
         error_delivery = \"events\" }\n",
    )
    .expect("valid");
    let fast = profile.scaled(0.1);
    let stream = fast.endpoint("model").stream;
    assert_eq!(stream.stall_for, Duration::from_millis(200));
    assert_eq!(stream.keep_alive, Some(Duration::from_millis(50)));
    assert_eq!(
        stream.error_delivery,
        ErrorDelivery::Events,
        "not a duration: unchanged"
    );
    assert_eq!(stream.stall_after_chunks, 0);
    assert_eq!(fast.model.chunk_interval, Duration::from_millis(1));
    assert_eq!(fast.default.stream.keep_alive, None);
    let summary = profile.summary();
    assert!(
        summary
            .contains("keep-alive every 500ms while a stream stalls; a stream's injected errors as events"),
        "{summary}"
    );
}

/// Every ```toml block of docs/chaos.md is a valid profile.
#[test]
fn the_docs_examples_are_valid() {
    let blocks: Vec<&str> = DOCS
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(
        blocks.len() >= 2,
        "docs/chaos.md shows its schema in ```toml blocks"
    );
    for block in blocks {
        if let Err(e) = Profile::from_toml_str(block) {
            panic!("docs/chaos.md example does not load:\n{block}\n{e}");
        }
    }
}

/// docs/chaos.md names every key of the schema and every preset.
#[test]
fn the_docs_name_every_key_and_preset() {
    let keys = [
        "seed",
        "context_limit_chars",
        "chunk_interval",
        "[default]",
        "[endpoints.",
        "latency",
        "p50",
        "p99",
        "errors",
        "retry_after",
        "http_date",
        "insufficient_quota",
        "spend_limit",
        "hang",
        "reset",
        "commit_then_lose",
        "lose_with",
        "outages",
        "capacity",
        "concurrent",
        "queue",
        "stream",
        "cut_after_chunks",
        "stall_after_chunks",
        "stall_for",
        "keep_alive",
        "error_after_chunks",
        "stream_error",
        "error_delivery",
        "key_mode",
        "keyed_replays_errors",
        "[[scripts]]",
        "steps",
    ];
    for key in keys.iter().chain(Profile::PRESETS) {
        assert!(DOCS.contains(key), "docs/chaos.md does not mention {key}");
    }
}

/// The TOML docs/chaos.md shows for each preset is that preset, number for number.
#[test]
fn the_docs_show_each_preset_as_a_file() {
    for name in Profile::PRESETS {
        let heading = format!("### `{name}`\n");
        let section = DOCS
            .split(&heading)
            .nth(1)
            .unwrap_or_else(|| panic!("no section {heading}"));
        let block = section
            .split("```toml\n")
            .nth(1)
            .and_then(|b| b.split("```").next())
            .unwrap_or_else(|| panic!("no ```toml block under {heading}"));
        let documented = Profile::from_toml_str(block).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(documented, Profile::preset(name, 0).expect("preset"), "{name}");
    }
}
