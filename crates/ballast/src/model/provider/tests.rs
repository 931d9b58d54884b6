use std::time::Duration;

use proptest::prelude::*;

use super::*;

use ProviderErrorKind::*;

fn tokens(limit: Option<u64>, prompt: Option<u64>, completion: Option<u64>) -> Option<ContextTokens> {
    Some(ContextTokens {
        limit,
        prompt,
        completion,
    })
}

/// A captured body: its name, status, bytes, and the kind and numbers it must be classified with.
type Case = (
    &'static str,
    u16,
    &'static [u8],
    ProviderErrorKind,
    Option<ContextTokens>,
);

/// Every captured body (fixtures/README.md names the sources), with the status it came with and what it must
/// be classified as.
#[test]
fn captured_bodies_are_classified_as_expected() {
    let cases: [Case; 14] = [
        (
            "openai context_length_exceeded",
            400,
            include_bytes!("fixtures/openai_context_length_exceeded.json"),
            ContextLength,
            tokens(Some(4097), Some(4294), None),
        ),
        (
            "openai insufficient_quota",
            429,
            include_bytes!("fixtures/openai_insufficient_quota.json"),
            InsufficientQuota,
            None,
        ),
        (
            "anthropic credit balance too low",
            400,
            include_bytes!("fixtures/anthropic_credit_balance_too_low.json"),
            InsufficientQuota,
            None,
        ),
        (
            "anthropic prompt is too long",
            400,
            include_bytes!("fixtures/anthropic_prompt_too_long.json"),
            ContextLength,
            tokens(Some(200_000), Some(208_310), None),
        ),
        (
            "anthropic input and max_tokens",
            400,
            include_bytes!("fixtures/anthropic_input_and_max_tokens.json"),
            ContextLength,
            tokens(Some(200_000), Some(199_759), Some(8192)),
        ),
        (
            "anthropic max_tokens over the model's output limit",
            400,
            include_bytes!("fixtures/anthropic_max_tokens_too_large.json"),
            BadRequest,
            None,
        ),
        (
            "anthropic 529 overloaded",
            529,
            include_bytes!("fixtures/anthropic_overloaded.json"),
            Overloaded,
            None,
        ),
        (
            "vllm, top-level envelope",
            400,
            include_bytes!("fixtures/vllm_context_length_top_level.json"),
            ContextLength,
            tokens(Some(6048), Some(568), Some(6048)),
        ),
        (
            "vllm, nested envelope",
            400,
            include_bytes!("fixtures/vllm_context_length_nested.json"),
            ContextLength,
            tokens(Some(3), Some(8), None),
        ),
        (
            "vllm negative max_tokens",
            400,
            include_bytes!("fixtures/vllm_max_tokens_negative.json"),
            BadRequest,
            None,
        ),
        (
            "ollama native",
            400,
            include_bytes!("fixtures/ollama_context_length.json"),
            ContextLength,
            None,
        ),
        (
            "ollama /v1",
            400,
            include_bytes!("fixtures/ollama_v1_context_length.json"),
            ContextLength,
            None,
        ),
        (
            "deepseek",
            400,
            include_bytes!("fixtures/deepseek_context_length.json"),
            ContextLength,
            tokens(Some(131_072), Some(122_942), Some(8192)),
        ),
        (
            "llama.cpp server",
            400,
            include_bytes!("fixtures/llamacpp_context_size.json"),
            ContextLength,
            tokens(Some(8192), Some(13_392), None),
        ),
    ];
    for (name, status, body, kind, expected_tokens) in cases {
        let error = ProviderError::classify(status, body, None);
        assert_eq!(error.kind, kind, "{name}: {error}");
        assert_eq!(error.tokens, expected_tokens, "{name}");
        assert_eq!(error.status, status, "{name}");
        assert!(error.message.is_some(), "{name}: the message is kept");
    }
}

#[test]
fn the_structured_fields_are_kept_as_sent() {
    let error = ProviderError::classify(
        429,
        include_bytes!("fixtures/openai_insufficient_quota.json"),
        None,
    );
    assert_eq!(error.code.as_deref(), Some("insufficient_quota"));
    assert_eq!(error.error_type.as_deref(), Some("insufficient_quota"));
    assert_eq!(error.kind, InsufficientQuota, "a spent quota is not waited for");

    let error = ProviderError::classify(
        400,
        include_bytes!("fixtures/vllm_context_length_nested.json"),
        None,
    );
    assert_eq!(error.code.as_deref(), Some("400"), "vLLM's numeric code, as text");
    assert_eq!(error.error_type.as_deref(), Some("BadRequestError"));
    assert_eq!(error.kind, ContextLength, "learnt from the message");

    let error = ProviderError::classify(400, include_bytes!("fixtures/ollama_context_length.json"), None);
    assert_eq!(
        error.message.as_deref(),
        Some("the input length exceeds the context length")
    );
    assert_eq!((error.code, error.error_type), (None, None));
}

#[test]
fn anthropics_own_envelope_gives_the_kind_and_the_numbers() {
    let body = br#"{"type":"error","error":{"type":"invalid_request_error",
                    "message":"prompt is too long: 208656 tokens > 200000 maximum"}}"#;
    let error = ProviderError::classify(400, body, None);
    assert_eq!(error.kind, ContextLength);
    assert_eq!(error.tokens, tokens(Some(200_000), Some(208_656), None));
}

#[test]
fn anthropics_wording_is_read_in_openais_envelope_too() {
    let body = br#"{"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum",
                    "type":"invalid_request_error","param":null,"code":null}}"#;
    let error = ProviderError::classify(400, body, None);
    assert_eq!(error.kind, ContextLength);
    assert_eq!(error.tokens, tokens(Some(200_000), Some(210_000), None));
}

#[test]
fn a_specific_code_wins_over_the_message_and_the_status() {
    // The message talks about context length, but the code says rate limit: the code is trusted.
    let body = br#"{"error":{"code":"rate_limit_exceeded","type":"tokens",
                    "message":"This model's maximum context length is 8192 tokens per min"}}"#;
    assert_eq!(ProviderError::classify(400, body, None).kind, RateLimited);
    // insufficient_quota on a 429 is not a rate limit.
    let body = br#"{"error":{"code":"insufficient_quota","type":"insufficient_quota","message":"x"}}"#;
    assert_eq!(ProviderError::classify(429, body, None).kind, InsufficientQuota);
    // The type is read when the code is generic or absent.
    let body = br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    assert_eq!(ProviderError::classify(429, body, None).kind, RateLimited);
    let body = br#"{"error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    assert_eq!(ProviderError::classify(401, body, None).kind, Auth);
    let body =
        br#"{"error":{"code":"invalid_api_key","type":"invalid_request_error","message":"Incorrect"}}"#;
    assert_eq!(ProviderError::classify(401, body, None).kind, Auth);
}

#[test]
fn without_a_code_or_wording_the_status_decides() {
    let cases = [
        (401, Auth),
        (403, Auth),
        (429, RateLimited),
        (503, Overloaded),
        (529, Overloaded),
        (500, ServerError),
        (502, ServerError),
        (504, ServerError),
        (408, ServerError),
        (400, BadRequest),
        (404, BadRequest),
        (422, BadRequest),
        (200, Other),
        (302, Other),
    ];
    for (status, kind) in cases {
        for body in [
            &b""[..],
            b"<html>Bad Gateway</html>",
            br#"{"error":{"message":"something"}}"#,
            b"\xff\xfe",
        ] {
            let error = ProviderError::classify(status, body, None);
            assert_eq!(error.kind, kind, "{status} {body:?}");
            assert_eq!(error.tokens, None);
        }
    }
}

#[test]
fn a_plain_text_body_is_read_for_the_wording() {
    let error = ProviderError::classify(400, b"prompt is too long: 5 tokens > 4 maximum\n", None);
    assert_eq!(error.kind, ContextLength);
    assert_eq!(
        error.message.as_deref(),
        Some("prompt is too long: 5 tokens > 4 maximum")
    );
}

#[test]
fn the_wait_asked_for_is_kept() {
    let wait = Some(Duration::from_secs(1));
    let error = ProviderError::classify(429, b"", wait);
    assert_eq!((error.kind, error.retry_after), (RateLimited, wait));
}

#[test]
fn prompt_allowed_subtracts_the_completion_reservation() {
    assert_eq!(
        tokens(Some(6048), Some(568), Some(6048))
            .unwrap()
            .prompt_allowed(),
        Some(0)
    );
    assert_eq!(
        tokens(Some(200_000), None, Some(8192)).unwrap().prompt_allowed(),
        Some(191_808)
    );
    assert_eq!(
        tokens(Some(4097), Some(4294), None).unwrap().prompt_allowed(),
        Some(4097)
    );
    assert_eq!(tokens(None, Some(4294), Some(1)).unwrap().prompt_allowed(), None);
}

#[test]
fn display_names_the_status_kind_and_message() {
    let error = ProviderError::classify(529, include_bytes!("fixtures/anthropic_overloaded.json"), None);
    assert_eq!(
        error.to_string(),
        "the upstream answered 529 (overloaded): Overloaded"
    );
}

proptest! {
    /// Whatever the body, classification answers (no panic) and only a context-length error carries numbers.
    #[test]
    fn any_body_is_classified(status in 0u16..1000, body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let error = ProviderError::classify(status, &body, None);
        prop_assert!(error.tokens.is_none() || error.kind == ContextLength);
    }

    /// Whatever the words around it, a message with a context-length wording in a JSON error is one.
    #[test]
    fn a_wording_inside_any_text_is_found(prefix in "[a-zA-Z .,]{0,40}", suffix in "[a-zA-Z .,]{0,40}",
                                          prompt in 1u64..10_000_000, limit in 1u64..10_000_000) {
        let message = format!("{prefix} prompt is too long: {prompt} tokens > {limit} maximum{suffix}");
        let body = serde_json::to_vec(&serde_json::json!({"error": {"message": message}})).unwrap();
        let error = ProviderError::classify(400, &body, None);
        prop_assert_eq!(error.kind, ContextLength);
        prop_assert_eq!(error.tokens, tokens(Some(limit), Some(prompt), None));
    }
}
