//! [`server_sent_events`]: a streamed answer's text read as its events, the way an SSE client reads them, for the
//! tests that check what a stream carried (the chaos upstream's own, the gateway's to its callers).

/// One server-sent event — its `event:` name (if any) and its `data:` lines joined — or a comment (a block of `:`
/// lines: a keep-alive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sse {
    /// An event.
    Event {
        /// The `event:` name; `None` for the default (`message`).
        name: Option<String>,
        /// The `data:` lines, joined with `\n`.
        data: String,
    },
    /// A comment block's text.
    Comment(String),
}

impl Sse {
    /// The `event:` name (`None` for a comment or an unnamed event).
    pub fn name(&self) -> Option<&str> {
        match self {
            Sse::Event { name, .. } => name.as_deref(),
            Sse::Comment(_) => None,
        }
    }

    /// The data as JSON; panics on a comment or on data that is not JSON (`[DONE]`).
    pub fn json(&self) -> serde_json::Value {
        match self {
            Sse::Event { data, .. } => serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}")),
            Sse::Comment(text) => panic!("a comment, not an event: {text}"),
        }
    }
}

/// The events of an SSE body: blocks separated by a blank line; a field's value after `name:` with one optional
/// space, as the SSE specification reads it.
pub fn server_sent_events(text: &str) -> Vec<Sse> {
    (text.split("\n\n").filter(|block| !block.trim().is_empty()))
        .map(|block| {
            if let Some(comment) = block.strip_prefix(':') {
                return Sse::Comment(comment.trim().to_owned());
            }
            let mut name = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(value) = field(line, "event") {
                    name = Some(value.to_owned());
                } else if let Some(value) = field(line, "data") {
                    data.push(value);
                }
            }
            Sse::Event {
                name,
                data: data.join("\n"),
            }
        })
        .collect()
}

/// The value of `line` when it is the field `name`.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let value = line.strip_prefix(name)?.strip_prefix(':')?;
    Some(value.strip_prefix(' ').unwrap_or(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_comments_and_multi_line_data_are_read_as_a_client_reads_them() {
        let text = ": keep-alive\n\nevent: response.created\ndata: {\"a\":1}\n\ndata:[DONE]\n\ndata: one\ndata: two\n\n";
        assert_eq!(
            server_sent_events(text),
            [
                Sse::Comment("keep-alive".into()),
                Sse::Event {
                    name: Some("response.created".into()),
                    data: "{\"a\":1}".into()
                },
                Sse::Event {
                    name: None,
                    data: "[DONE]".into()
                },
                Sse::Event {
                    name: None,
                    data: "one\ntwo".into()
                },
            ]
        );
        assert_eq!(server_sent_events(text)[1].json()["a"], 1);
    }
}
