//! What the overhead bench sends: one group per kind of request — a tool call, then each model API answered whole
//! and streamed — each sent as its caller sends it (the key as the caller's SDK sends it, and what else that SDK
//! sends on every request).

use super::load::Until;

/// One kind of request, measured direct, through the floor and through the gateway.
pub(super) struct Group {
    /// What the rows say after `direct`, `floor`, `gateway` (`""` for the tool call, the first group).
    pub(super) name: &'static str,
    /// The request's path at the upstream (and the floor, which forwards it untouched).
    pub(super) upstream_path: &'static str,
    /// The same request's path at the gateway.
    pub(super) gateway_path: &'static str,
    /// A side-effecting path at the gateway, measured too (the idempotent path), for the tool group.
    pub(super) keyed_path: Option<&'static str>,
    /// The same tool called as an MCP `tools/call` at the gateway's `/mcp`, measured too, for the tool group: the
    /// JSON-RPC body.
    pub(super) mcp_body: Option<&'static str>,
    /// The same request through the gateway as calls of runs (`ballast-run-id`), a new run every this many calls
    /// on a connection, measured too, for the tool group (the row `gateway, run`).
    pub(super) runs_of: Option<u64>,
    /// The JSON body.
    pub(super) body: &'static str,
    /// What its latency is timed to: the whole answer, or a stream's first content event.
    pub(super) until: Until,
    /// Whose SDK sends it: how the key goes, and what else is sent.
    pub(super) caller: Caller,
}

/// How a group's requests say who calls, as the caller's SDK sends them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Caller {
    /// OpenAI's SDKs (and a tool call's plain HTTP): `Authorization: Bearer KEY`.
    OpenAi,
    /// Anthropic's SDKs: `x-api-key: KEY` and `anthropic-version: 2023-06-01` — sent direct and through the floor
    /// too, since the upstream refuses a Messages request without the version.
    Anthropic,
}

impl Caller {
    /// The headers of a request with `key` (`None`: to the upstream or the floor, which take none).
    pub(super) fn headers(self, key: Option<&str>) -> Vec<(&'static str, String)> {
        match self {
            Caller::OpenAi => key
                .map(|key| ("authorization", format!("Bearer {key}")))
                .into_iter()
                .collect(),
            Caller::Anthropic => key
                .map(|key| ("x-api-key", key.to_owned()))
                .into_iter()
                .chain([("anthropic-version", "2023-06-01".to_owned())])
                .collect(),
        }
    }
}

impl Group {
    /// Its name in `--groups`: `tools`, or the name its rows carry.
    pub(super) fn label(&self) -> &'static str {
        if self.name.is_empty() { "tools" } else { self.name }
    }
}

/// The calls of one run in the `gateway, run` row: a new run every 4 calls on a connection, about the flash sale's
/// conversation (model, lookup, model, action, model). Why not one run per connection: every call but its first
/// would then update a state that already exists — the cheaper half — and a run that lived for a whole load would
/// be one no agent makes (a session id reused as a run id); why not a new run each call: no call would find its
/// run. One in four calls starts its run (its deadline and retry allowance), three continue it — wherever the
/// gateway keeps runs: in its memory, or in a shared store (DESIGN.md, "Many instances").
pub(super) const CALLS_PER_RUN: u64 = 4;

/// `lookup_order` as an MCP `tools/call`, with the tool group's arguments.
pub(super) const MCP_LOOKUP: &str = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "lookup_order", "arguments": {"order_id": "1234"}}}"#;

/// The headers of an MCP client of the gateway's `/mcp`, besides its key: it takes JSON or a stream, and speaks
/// 2025-11-25 (the gateway keeps no session, so a call needs no `initialize` before it).
pub(super) const MCP_HEADERS: [(&str, &str); 2] = [
    ("accept", "application/json, text/event-stream"),
    ("mcp-protocol-version", "2025-11-25"),
];

/// The groups, in the order run: a tool call, then the model routes, answered whole and streamed (timed to the
/// first content event: for a stream that is when the caller can start acting, and the gateway's commit point).
pub(super) const GROUPS: [Group; 7] = [
    Group {
        name: "",
        upstream_path: "/tools/lookup_order",
        gateway_path: "/v1/tools/lookup_order",
        keyed_path: Some("/v1/tools/create_refund"),
        mcp_body: Some(MCP_LOOKUP),
        runs_of: Some(CALLS_PER_RUN),
        body: r#"{"order_id": "1234"}"#,
        until: Until::Whole,
        caller: Caller::OpenAi,
    },
    Group {
        name: "chat",
        upstream_path: "/v1/chat/completions",
        gateway_path: "/v1/chat/completions",
        keyed_path: None,
        mcp_body: None,
        runs_of: None,
        body: r#"{"model": "agent", "messages": [{"role": "user", "content": "Refund order 1234, op=op-bench"}]}"#,
        until: Until::Whole,
        caller: Caller::OpenAi,
    },
    Group {
        name: "chat streamed",
        upstream_path: "/v1/chat/completions",
        gateway_path: "/v1/chat/completions",
        keyed_path: None,
        mcp_body: None,
        runs_of: None,
        body: r#"{"model": "agent", "stream": true, "messages": [{"role": "user", "content": "Refund order 1234, op=op-bench"}]}"#,
        until: Until::FirstContent("tool_calls"),
        caller: Caller::OpenAi,
    },
    Group {
        name: "responses",
        upstream_path: "/v1/responses",
        gateway_path: "/v1/responses",
        keyed_path: None,
        mcp_body: None,
        runs_of: None,
        body: r#"{"model": "agent", "store": false, "input": "Refund order 1234, op=op-bench"}"#,
        until: Until::Whole,
        caller: Caller::OpenAi,
    },
    Group {
        name: "responses streamed",
        upstream_path: "/v1/responses",
        gateway_path: "/v1/responses",
        keyed_path: None,
        mcp_body: None,
        runs_of: None,
        body: r#"{"model": "agent", "store": false, "stream": true, "input": "Refund order 1234, op=op-bench"}"#,
        until: Until::FirstContent("response.output_item.added"),
        caller: Caller::OpenAi,
    },
    Group {
        name: "messages",
        upstream_path: "/v1/messages",
        gateway_path: "/v1/messages",
        keyed_path: None,
        mcp_body: None,
        runs_of: None,
        body: r#"{"model": "agent", "max_tokens": 1024, "messages": [{"role": "user", "content": "Refund order 1234, op=op-bench"}]}"#,
        until: Until::Whole,
        caller: Caller::Anthropic,
    },
    Group {
        name: "messages streamed",
        upstream_path: "/v1/messages",
        gateway_path: "/v1/messages",
        keyed_path: None,
        mcp_body: None,
        runs_of: None,
        body: r#"{"model": "agent", "max_tokens": 1024, "stream": true, "messages": [{"role": "user", "content": "Refund order 1234, op=op-bench"}]}"#,
        until: Until::FirstContent("content_block_start"),
        caller: Caller::Anthropic,
    },
];

#[cfg(test)]
mod tests {
    use ballast_chaos::Profile;

    use super::*;

    /// Every group's request, as its caller's SDK sends it, is one the upstream answers (a Messages request needs
    /// `anthropic-version`), and a streamed one holds the event its latency is timed to.
    #[tokio::test]
    async fn every_groups_request_is_answered_by_the_upstream_with_its_timed_event() {
        let profile = Profile::preset("none", 0).expect("the preset");
        let upstream = ballast_chaos::spawn(profile).await.expect("chaos");
        let client = reqwest::Client::new();
        for group in &GROUPS {
            let mut request = client
                .post(upstream.url(group.upstream_path))
                .header("content-type", "application/json")
                .body(group.body);
            for (name, value) in group.caller.headers(None) {
                request = request.header(name, value);
            }
            let answer = request.send().await.expect("an answer");
            let status = answer.status();
            let body = answer.text().await.expect("a body");
            assert!(status.is_success(), "{}: {status} {body}", group.label());
            if let Until::FirstContent(marker) = group.until {
                assert!(body.contains(marker), "{}: {body}", group.label());
            }
        }
        upstream.shutdown().await.expect("chaos stops");
    }

    #[test]
    fn anthropics_callers_send_the_key_as_x_api_key_with_the_version() {
        assert_eq!(
            Caller::Anthropic.headers(Some("k")),
            [
                ("x-api-key", "k".to_owned()),
                ("anthropic-version", "2023-06-01".to_owned())
            ]
        );
        assert_eq!(
            Caller::Anthropic.headers(None),
            [("anthropic-version", "2023-06-01".to_owned())]
        );
        assert_eq!(
            Caller::OpenAi.headers(Some("k")),
            [("authorization", "Bearer k".to_owned())]
        );
        assert!(Caller::OpenAi.headers(None).is_empty());
        assert!(crate::overhead::group_labels().contains(&"messages streamed"));
    }
}
