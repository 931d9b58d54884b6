//! The HTTP agents' headers, APIs and SDKs, and a whole conversation with the chaos model on every API.

use super::*;

#[test]
fn agents_alternate_apis_and_sdks_so_that_each_api_has_both() {
    let seen: Vec<(Wire, Flavour)> = (0..4)
        .map(|agent| (wire_for(ModelApi::Mixed, agent), Flavour::of_agent(agent)))
        .collect();
    assert_eq!(
        seen,
        [
            (Wire::Responses, Flavour::Python),
            (Wire::Chat, Flavour::Python),
            (Wire::Responses, Flavour::Node),
            (Wire::Chat, Flavour::Node)
        ]
    );
    assert_eq!(wire_for(ModelApi::Chat, 0), Wire::Chat);
    assert_eq!(wire_for(ModelApi::Responses, 1), Wire::Responses);
    assert!((0..4).all(|agent| wire_for(ModelApi::Messages, agent) == Wire::Messages));
    for api in [
        ModelApi::Mixed,
        ModelApi::Responses,
        ModelApi::Chat,
        ModelApi::Messages,
    ] {
        assert_eq!(api.to_string().parse(), Ok(api));
    }
    let name = |api, tools| strategy_name("gateway", api, tools);
    assert_eq!(name(ModelApi::Mixed, ToolApi::Http), "gateway");
    assert_eq!(name(ModelApi::Messages, ToolApi::Http), "gateway (messages)");
    assert_eq!(name(ModelApi::Mixed, ToolApi::Mcp), "gateway (mcp)");
    assert_eq!(name(ModelApi::Chat, ToolApi::Mcp), "gateway (chat, mcp)");
    assert_eq!("mcp".parse(), Ok(ToolApi::Mcp));
    assert!("grpc".parse::<ToolApi>().unwrap_err().contains("http, mcp"));
    assert!(
        "soap"
            .parse::<ModelApi>()
            .unwrap_err()
            .contains("mixed, responses, chat, messages")
    );
}

#[test]
fn a_messages_call_sends_the_key_and_version_as_anthropics_sdks_do_and_the_run_as_any_call() {
    let route = Route::Ballast {
        spread: Arc::new(Spread::new(vec!["http://127.0.0.1:1".into()])),
    };
    let agents = HttpAgents::new(route, Some("k-1".into()), ModelApi::Messages, 1.0).unwrap();
    let conversation = Conversation::new(1, 0, std::time::Duration::from_secs(30));
    let headers = agents.model_headers(Wire::Messages, &conversation, Some(conversation.deadline));
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(header("x-api-key"), Some("k-1"));
    assert_eq!(header("anthropic-version"), Some(ANTHROPIC_VERSION));
    assert_eq!(header("authorization"), None);
    assert_eq!(header("ballast-run-id"), Some("fs-1-0"));
    assert_eq!(header("ballast-timeout-ms"), Some("30000"));
    let chat = agents.model_headers(Wire::Chat, &conversation, None);
    assert_eq!(chat.get("authorization").unwrap(), "Bearer k-1");
    assert!(chat.get("anthropic-version").is_none() && chat.get("ballast-timeout-ms").is_none());
    let picker = Picker::new(Arc::new(Spread::new(vec!["http://127.0.0.1:1".into()])), "fs-1-0");
    let target = Way::Gateway(Arc::new(picker)).model("/messages");
    assert_eq!(target.next().url, "http://127.0.0.1:1/v1/messages");
}

/// Against the chaos model itself (no faults), every API's agents hold the whole conversation: the upstream
/// reads each API's turns as the same conversation (a Messages call without `anthropic-version`, or tool
/// results it cannot read, would not get there).
#[tokio::test]
async fn agents_on_every_api_hold_the_conversation_with_the_chaos_model() {
    let upstream = ballast_chaos::spawn(ballast_chaos::Profile::default())
        .await
        .expect("chaos");
    for api in [ModelApi::Chat, ModelApi::Responses, ModelApi::Messages] {
        let route = Route::Any {
            models: upstream.url("/v1"),
            upstream: upstream.url(""),
        };
        let agents = HttpAgents::new(route, Some("k-1".into()), api, 1.0).unwrap();
        // A refund (agent 0) and a payment (agent 2).
        for agent in [0, 2] {
            let conversation = Conversation::new(1, agent, std::time::Duration::from_secs(10));
            let outcome = agents.converse(&conversation).await;
            assert!(outcome.succeeded, "{api}, agent {agent}: {outcome:?}");
            assert_eq!(outcome.calls, 5, "model, lookup, model, action, model");
            assert_eq!(
                outcome.acknowledged,
                std::slice::from_ref(&conversation.op),
                "the action, answered"
            );
        }
    }
    upstream.shutdown().await.expect("chaos stops");
}
