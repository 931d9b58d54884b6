//! State a provider keeps, through a model route (paused time, chaos upstreams in process): a request that
//! continues a response goes to the deployment that made it and never falls back to another provider; a response
//! is another owner's to nobody; retrieve, delete and cancel go to its home; records kept in a store outlive the
//! client that wrote them.

mod support;

use std::sync::Arc;

use ballast::model::{
    InputItem, ModelClients, ResponseIdCall, ResponseObject, ResponsesCall, ResponsesRequest,
    StoreStateRecords,
};
use ballast::{CallError, Refusal, Runs};
use serde_json::json;
use support::chat::{PRIMARY_KEY, Upstreams, client, config, first_response_turn, profile, respond_call};

/// The quota of the primary is spent for op `op`'s first turn: that response is made by the fallback.
fn primary_quota_spent_for(op: &str) -> String {
    format!("[[scripts]]\nendpoint = \"model\"\nop = \"{op}/turn-0\"\nsteps = [\"insufficient_quota\"]\n")
}

/// The next turn after `response`: its call's output, continuing it by id.
fn continuing(response: &ResponseObject) -> ResponsesCall {
    let call = response.function_calls().next().expect("a call");
    let output = InputItem::function_call_output(call.call_id, r#"{"amount": 3}"#);
    ResponsesRequest::new("agent", vec![output])
        .after(response.id.clone())
        .into()
}

/// Issue 17: "a request with `previous_response_id` never goes to another provider" — not while the healthier
/// primary is back, and not when its home fails.
#[tokio::test(start_paused = true)]
async fn a_continued_response_goes_only_to_the_deployment_that_made_it() {
    let fallback_fails_turn_1 =
        "[[scripts]]\nendpoint = \"model\"\nop = \"op-2/turn-1\"\nsteps = [\"503\", \"503\", \"503\"]\n";
    let upstreams = Upstreams::new(&[
        (
            "primary",
            profile(&(primary_quota_spent_for("op-1") + &primary_quota_spent_for("op-2"))),
        ),
        ("fallback", profile(fallback_fails_turn_1)),
    ]);
    let route = client(&config(""), &upstreams);
    let first = route
        .respond(respond_call(&first_response_turn("op-1")))
        .await
        .unwrap();
    assert_eq!(first.deployment, "agent[1] gpt-4.1", "made by the fallback");

    // The primary is healthy for this turn, and passed over for its spent quota only by calls that may fall
    // back: a continued response goes home either way.
    let second = route.respond(continuing(&first.response)).await.unwrap();
    assert_eq!(second.deployment, "agent[1] gpt-4.1");
    assert_eq!(
        second.report.target, "agent[1] gpt-4.1",
        "no other deployment was tried first"
    );

    // When its home fails, the call fails: another provider has no such response.
    let other = route
        .respond(respond_call(&first_response_turn("op-2")))
        .await
        .unwrap();
    assert_eq!(other.deployment, "agent[1] gpt-4.1");
    let asked_primary = upstreams.count("primary");
    let error = route.respond(continuing(&other.response)).await.unwrap_err();
    let CallError::Upstream { status, report, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(*status, 503);
    assert_eq!(report.target, "agent[1] gpt-4.1");
    assert!(report.fallback_report.is_none(), "no fallback: {report}");
    assert_eq!(
        upstreams.count("primary"),
        asked_primary,
        "the primary never saw it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_response_is_its_owners_alone() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let alice = route
        .respond(respond_call(&first_response_turn("op-3")).owner("alice"))
        .await
        .unwrap();
    let sent = upstreams.seen().len();

    let error = route
        .respond(continuing(&alice.response).owner("bob"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            CallError::Refused {
                refusal: Refusal::UnknownState(_),
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.code().as_str(), "invalid_request");
    let error = (route
        .retrieve_response(ResponseIdCall::for_response(alice.response.id.clone()).owner("bob")))
    .await
    .unwrap_err();
    assert!(
        matches!(
            error,
            CallError::Refused {
                refusal: Refusal::UnknownState(_),
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(
        upstreams.seen().len(),
        sent,
        "nothing of bob's reached a provider"
    );

    let next = route
        .respond(continuing(&alice.response).owner("alice"))
        .await
        .unwrap();
    assert_eq!(
        next.response.function_calls().next().unwrap().name,
        "create_refund"
    );
}

#[tokio::test(start_paused = true)]
async fn retrieve_delete_and_cancel_go_to_the_responses_home() {
    let upstreams = Upstreams::new(&[
        ("primary", profile(&primary_quota_spent_for("op-4"))),
        ("fallback", profile("")),
    ]);
    let route = client(&config(""), &upstreams);
    let made = route
        .respond(respond_call(&first_response_turn("op-4")))
        .await
        .unwrap();
    let id = made.response.id.clone();
    let asked_primary = upstreams.count("primary");

    let got = route
        .retrieve_response(ResponseIdCall::for_response(id.clone()))
        .await
        .unwrap();
    assert_eq!(got.deployment, "agent[1] gpt-4.1");
    assert_eq!(got.response.id, id);
    assert_eq!(
        got.response.function_calls().collect::<Vec<_>>(),
        made.response.function_calls().collect::<Vec<_>>()
    );

    // A completed response cannot be cancelled: the provider's own answer comes back.
    let error = route
        .cancel_response(ResponseIdCall::for_response(id.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(error, CallError::Upstream { status: 400, .. }),
        "{error}"
    );

    let deleted = route
        .delete_response(ResponseIdCall::for_response(id.clone()))
        .await
        .unwrap();
    assert_eq!(deleted.response["deleted"], true);
    let error = route
        .retrieve_response(ResponseIdCall::for_response(id.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(error, CallError::Upstream { status: 404, .. }),
        "{error}"
    );
    assert_eq!(
        upstreams.count("primary"),
        asked_primary,
        "none of them went to the primary"
    );

    let seen = upstreams.seen();
    let paths: Vec<String> = (seen.iter().rev().take(4).rev())
        .map(|s| format!("{} {}", s.host, s.method_and_path()))
        .collect();
    assert_eq!(
        paths,
        [
            format!("fallback GET /v1/responses/{id}"),
            format!("fallback POST /v1/responses/{id}/cancel"),
            format!("fallback DELETE /v1/responses/{id}"),
            format!("fallback GET /v1/responses/{id}"),
        ]
    );
    let error = route
        .retrieve_response(ResponseIdCall::for_response("../models"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            CallError::Refused {
                refusal: Refusal::InvalidId(_),
                ..
            }
        ),
        "{error}"
    );
}

/// A conversation stays with the deployment its first request went to, and is its starter's.
#[tokio::test(start_paused = true)]
async fn a_conversation_stays_where_it_started() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let mut body = first_response_turn("op-5");
    body["conversation"] = json!("conv_1");
    let first = route.respond(respond_call(&body).owner("alice")).await.unwrap();
    assert_eq!(first.deployment, "agent[0] mock");
    let error = route.respond(respond_call(&body).owner("bob")).await.unwrap_err();
    assert!(
        matches!(
            error,
            CallError::Refused {
                refusal: Refusal::UnknownState(_),
                ..
            }
        ),
        "{error}"
    );
}

/// Records kept in the store outlive the client: a new one (a restarted gateway) sends the next turn home.
#[tokio::test]
async fn records_in_a_store_outlive_the_client_that_wrote_them() {
    let upstreams = Upstreams::new(&[
        ("primary", profile(&primary_quota_spent_for("op-6"))),
        ("fallback", profile("")),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("state.db").display());
    let config = config("");
    let env = std::collections::HashMap::from([(PRIMARY_KEY.0.to_owned(), PRIMARY_KEY.1.to_owned())]);
    let route = |store| {
        let records = Arc::new(StoreStateRecords::new(store));
        let runs = Arc::new(Runs::new(config.run.retry_allowance, config.run.ttl));
        let clients =
            ModelClients::from_config_with_records(&config, &env, upstreams.transport(), runs, records)
                .unwrap();
        clients.get("agent").unwrap().clone()
    };
    let open = || ballast::idempotency::store::open(&url, Default::default());
    let first = {
        route(open().await.unwrap())
            .respond(respond_call(&first_response_turn("op-6")))
            .await
            .unwrap()
    };
    assert_eq!(first.deployment, "agent[1] gpt-4.1");
    let second = route(open().await.unwrap())
        .respond(continuing(&first.response))
        .await
        .unwrap();
    assert_eq!(
        second.deployment, "agent[1] gpt-4.1",
        "the new client knew its home"
    );
}
