//! Context-length errors that providers report only in words: every pattern in one place, one function per
//! provider, each with a captured body among the fixtures (`fixtures/README.md` names the sources).
//!
//! Why text at all: OpenAI says `context_length_exceeded` in `error.code`, but the providers a route falls back
//! to often do not — Anthropic's is a plain `invalid_request_error`, vLLM's a `BadRequestError` with a numeric
//! code, Ollama's a bare string, DeepSeek's an `invalid_request_error` code. The structured code is read first
//! (`provider.rs`); only when it says nothing specific are these patterns tried. The patterns match providers'
//! messages, never Ballast's own.
//!
//! Where the message carries numbers they are read too ([`ContextTokens`]), so truncation can cut by what the
//! provider measured instead of guessing.

use super::ContextTokens;

/// The context-length patterns of every provider, tried in order on the message (any case).
pub(super) fn recognise(message: &str) -> Option<ContextTokens> {
    // Lower case, and without the backticks Anthropic puts around `max_tokens` in one wording.
    let text = message.to_ascii_lowercase().replace('`', "");
    anthropic(&text)
        .or_else(|| openai(&text))
        .or_else(|| vllm(&text))
        .or_else(|| llama_cpp(&text))
        .or_else(|| ollama(&text))
}

/// Anthropic (also through its OpenAI-compatible endpoint):
/// - `prompt is too long: 208656 tokens > 200000 maximum`
/// - `input length and max_tokens exceed context limit: 199759 + 8192 > 200000, decrease input length or
///   max_tokens and try again`
fn anthropic(text: &str) -> Option<ContextTokens> {
    if let Some(rest) = after(text, "prompt is too long: ") {
        let (prompt, rest) = number(rest)?;
        let limit = after(rest, "tokens > ").and_then(number).map(|(limit, _)| limit);
        return Some(ContextTokens {
            limit,
            prompt: Some(prompt),
            completion: None,
        });
    }
    let rest = after(text, "input length and max_tokens exceed context limit: ")?;
    let (prompt, rest) = number(rest)?;
    let (completion, rest) = number(after(rest, "+ ")?)?;
    let limit = after(rest, "> ").and_then(number).map(|(limit, _)| limit);
    Some(ContextTokens {
        limit,
        prompt: Some(prompt),
        completion: Some(completion),
    })
}

/// OpenAI:
/// - `This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens.
///   Please reduce the length of the messages.` (with `error.code` `context_length_exceeded`; the text is read
///   for its numbers)
/// - `... However, you requested 4972 tokens (3222 in the messages, 1750 in the completion). ...` — also what
///   DeepSeek and older vLLM send
/// - `... however you requested 4116 tokens (1044 in your prompt; 3072 for the completion). ...` (legacy)
/// - `Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 289650 tokens. ...`
///   (GPT-5)
fn openai(text: &str) -> Option<ContextTokens> {
    if let Some(rest) = after(text, "input tokens exceed the configured limit of ") {
        let (limit, rest) = number(rest)?;
        let prompt = after(rest, "resulted in ")
            .and_then(number)
            .map(|(prompt, _)| prompt);
        return Some(ContextTokens {
            limit: Some(limit),
            prompt,
            completion: None,
        });
    }
    let limit = after(text, "maximum context length is ")
        .and_then(number)
        .map(|(limit, _)| limit)?;
    let mut tokens = ContextTokens {
        limit: Some(limit),
        prompt: None,
        completion: None,
    };
    if let Some(rest) = after(text, "your messages resulted in ") {
        tokens.prompt = number(rest).map(|(prompt, _)| prompt);
        return Some(tokens);
    }
    let split = after(text, "you requested ")
        .and_then(number)
        .and_then(|(_, rest)| after(rest, "tokens ("));
    if let Some((prompt, rest)) = split.and_then(number)
        && (rest.starts_with(" in the messages") || rest.starts_with(" in your prompt"))
    {
        tokens.prompt = Some(prompt);
        tokens.completion = after(rest, ", ")
            .or_else(|| after(rest, "; "))
            .and_then(number)
            .map(|(c, _)| c);
        return Some(tokens);
    }
    None
}

/// vLLM (its 400 `BadRequestError`, in either body shape), the wordings of its releases:
/// - `This model's maximum context length is 3 tokens. However, your request has 8 input tokens. Please reduce
///   the length of the input messages.`
/// - `... However, you requested 2000 output tokens and your prompt contains at least 31000 input tokens, for
///   a total of at least 33000 tokens. ...`
/// - `'max_tokens' or 'max_completion_tokens' is too large: 2045. This model's maximum context length is 2048
///   tokens and your request has 8 input tokens (2045 > 2048 - 8).`
/// - `... However, you requested 33000 tokens in the messages, Please reduce the length of the messages.`
/// - `The prompt (total length 25938) is too long to fit into the model (context length 4096).`
fn vllm(text: &str) -> Option<ContextTokens> {
    if let Some(rest) = after(text, "the prompt (total length ") {
        let (prompt, rest) = number(rest)?;
        let limit = after(rest, "(context length ")
            .and_then(number)
            .map(|(limit, _)| limit);
        return Some(ContextTokens {
            limit,
            prompt: Some(prompt),
            completion: None,
        });
    }
    let limit = after(text, "maximum context length is ")
        .and_then(number)
        .map(|(limit, _)| limit)?;
    let mut tokens = ContextTokens {
        limit: Some(limit),
        prompt: None,
        completion: None,
    };
    if let Some(rest) = after(text, "your request has ") {
        tokens.prompt = number(rest).map(|(prompt, _)| prompt);
        tokens.completion = after(text, "is too large: ")
            .and_then(number)
            .map(|(completion, _)| completion);
        return Some(tokens);
    }
    if let Some(rest) = after(text, "your prompt contains ") {
        let rest = rest.strip_prefix("at least ").unwrap_or(rest);
        tokens.prompt = number(rest).map(|(prompt, _)| prompt);
        let requested = after(text, "you requested ").and_then(number);
        tokens.completion = requested
            .filter(|(_, rest)| rest.starts_with(" output tokens"))
            .map(|(c, _)| c);
        return Some(tokens);
    }
    let requested = after(text, "you requested ").and_then(number);
    tokens.prompt = requested
        .filter(|(_, rest)| rest.starts_with(" tokens in the messages"))
        .map(|(p, _)| p);
    // "maximum context length is N tokens" and nothing else we can read: still the context window.
    Some(tokens)
}

/// llama.cpp's server (`error.type` `exceed_context_size_error` is read as a code first; this reads the
/// wording when a proxy kept only the message): `request (13392 tokens) exceeds the available context size
/// (8192 tokens), try increasing it`.
fn llama_cpp(text: &str) -> Option<ContextTokens> {
    let at = text.find("exceeds the available context size")?;
    let prompt = after(&text[..at], "request (")
        .and_then(number)
        .map(|(prompt, _)| prompt);
    let limit = after(&text[at..], "context size (")
        .and_then(number)
        .map(|(limit, _)| limit);
    Some(ContextTokens {
        limit,
        prompt,
        completion: None,
    })
}

/// Ollama (with truncation off; its OpenAI-compatible endpoint wraps the same text in `error.message`): `the
/// input length exceeds the context length`. No numbers.
fn ollama(text: &str) -> Option<ContextTokens> {
    (text.contains("input length exceeds the context length")
        || text.contains("input exceeds context length"))
    .then(ContextTokens::default)
}

/// The text after the first `phrase`.
fn after<'a>(text: &'a str, phrase: &str) -> Option<&'a str> {
    text.find(phrase).map(|at| &text[at + phrase.len()..])
}

/// A whole number at the start of `text` (digits, with `,` or `_` as thousands separators allowed), and the text
/// after it. `None` when `text` does not start with a digit or the number does not fit a `u64`.
fn number(text: &str) -> Option<(u64, &str)> {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '_'))
        .unwrap_or(text.len());
    // A trailing separator is punctuation ("4097 tokens, however"), not part of the number.
    let end = text[..end].trim_end_matches([',', '_']).len();
    let digits: String = text[..end].chars().filter(char::is_ascii_digit).collect();
    let value = digits.parse().ok()?;
    Some((value, &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(limit: Option<u64>, prompt: Option<u64>, completion: Option<u64>) -> Option<ContextTokens> {
        Some(ContextTokens {
            limit,
            prompt,
            completion,
        })
    }

    #[test]
    fn numbers_read_with_separators_and_stop_at_punctuation() {
        assert_eq!(number("4097 tokens"), Some((4097, " tokens")));
        assert_eq!(number("128,000 tokens"), Some((128_000, " tokens")));
        assert_eq!(number("4097, however"), Some((4097, ", however")));
        assert_eq!(number("x4097"), None);
        assert_eq!(number(""), None);
        assert_eq!(number("99999999999999999999999"), None, "over u64 is no number");
    }

    #[test]
    fn each_wording_gives_its_numbers() {
        let cases = [
            (
                "prompt is too long: 208656 tokens > 200000 maximum",
                tokens(Some(200_000), Some(208_656), None),
            ),
            (
                "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease input length",
                tokens(Some(200_000), Some(199_759), Some(8192)),
            ),
            (
                "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens.",
                tokens(Some(4097), Some(4294), None),
            ),
            (
                "This model's maximum context length is 4097 tokens. However, you requested 4972 tokens (3222 in the \
                 messages, 1750 in the completion). Please reduce the length of the messages or completion.",
                tokens(Some(4097), Some(3222), Some(1750)),
            ),
            (
                "This model's maximum context length is 4097 tokens, however you requested 4116 tokens (1044 in your \
                 prompt; 3072 for the completion). Please reduce your prompt; or completion length.",
                tokens(Some(4097), Some(1044), Some(3072)),
            ),
            (
                "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 289650 tokens.",
                tokens(Some(272_000), Some(289_650), None),
            ),
            (
                "This model's maximum context length is 32768 tokens. However, you requested 2000 output tokens and \
                 your prompt contains at least 31000 input tokens, for a total of at least 33000 tokens.",
                tokens(Some(32_768), Some(31_000), Some(2000)),
            ),
            (
                "'max_tokens' or 'max_completion_tokens' is too large: 2045. This model's maximum context length is \
                 2048 tokens and your request has 8 input tokens (2045 > 2048 - 8).",
                tokens(Some(2048), Some(8), Some(2045)),
            ),
            (
                "This model's maximum context length is 32768 tokens. However, you requested 33000 tokens in the \
                 messages, Please reduce the length of the messages.",
                tokens(Some(32_768), Some(33_000), None),
            ),
            (
                "The prompt (total length 25938) is too long to fit into the model (context length 4096).",
                tokens(Some(4096), Some(25_938), None),
            ),
            (
                "request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it",
                tokens(Some(8192), Some(13_392), None),
            ),
            (
                "the input length exceeds the context length",
                tokens(None, None, None),
            ),
        ];
        for (message, expected) in cases {
            assert_eq!(recognise(message), expected, "{message}");
        }
    }

    #[test]
    fn other_messages_are_not_context_errors() {
        for message in [
            "max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for claude-3-5-sonnet",
            "You exceeded your current quota, please check your plan and billing details.",
            "Rate limit reached for gpt-4 on tokens per min (TPM): Limit 10000, Used 9000, Requested 2000.",
            "max_tokens must be at least 1, got -186.",
            "Overloaded",
            "",
        ] {
            assert_eq!(recognise(message), None, "{message}");
        }
    }
}
