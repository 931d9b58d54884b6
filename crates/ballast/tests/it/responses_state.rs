//! State a provider keeps, through a model route (paused time, chaos upstreams in process): a request that
//! continues a response goes to the deployment that made it and never falls back to another provider; a response
//! is another owner's to nobody; retrieve, delete and cancel go to its home; records kept in a store outlive the
//! client that wrote them.

use crate::support;

use std::sync::Arc;

use ballast::model::{
    InputItem, ResponseIdCall, ResponseObject, ResponsesCall, ResponsesRequest, StoreStateRecords,
};
use ballast::{CallError, Clients, Refusal, Runs};
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
        let clients = (Clients::from_config(&config)
            .env(&env)
            .runs(runs)
            .state_records(records))
        .build(upstreams.transport())
        .unwrap()
        .models;
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

/// Records that take 30 s to read or write (a store that hangs).
#[derive(Debug)]
struct HangingStore;

impl ballast::model::StateRecords for HangingStore {
    fn record<'a>(
        &'a self,
        _: &'a str,
        _: &'a ballast::model::StateId,
        _: &'a ballast::model::StateHome,
    ) -> futures::future::BoxFuture<'a, Result<(), ballast::model::StateRecordError>> {
        Box::pin(async {
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
            Ok(())
        })
    }

    fn find<'a>(
        &'a self,
        _: &'a str,
        _: &'a ballast::model::StateId,
    ) -> futures::future::BoxFuture<
        'a,
        Result<Option<ballast::model::StateHome>, ballast::model::StateRecordError>,
    > {
        Box::pin(async {
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
            Ok(None)
        })
    }
}

/// DESIGN.md, "Idempotency, server side": every wait on the store is bounded by the call's deadline. A store that
/// hangs never holds an answer past it: the record is written in the background, and a read fails in time.
#[tokio::test(start_paused = true)]
async fn a_hanging_store_never_holds_a_call_past_its_deadline() {
    use std::time::Duration;

    use ballast::clock;

    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = support::chat::client_with_records(&config(""), &upstreams, Arc::new(HangingStore));
    let deadline = |now| ballast::policy::Deadline::after(now, Duration::from_secs(2));
    let started = clock::now();
    let answer = route
        .respond(respond_call(&first_response_turn("op-7")).deadline(deadline(started)))
        .await
        .expect("answered, its record written in the background");
    assert!(clock::now().saturating_duration_since(started) < Duration::from_secs(2));
    assert_eq!(answer.response.function_calls().count(), 1);

    let started = clock::now();
    let error = route
        .respond(continuing(&answer.response).deadline(deadline(started)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            CallError::Refused {
                refusal: Refusal::StateRecords(_),
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.code().as_str(), "store_unavailable");
    assert!(
        clock::now().saturating_duration_since(started) < Duration::from_secs(2),
        "refused in time"
    );
}

/// Two deployments at one URL with one model, told apart by their keys (two accounts): a response continues at
/// the account that made it.
#[tokio::test(start_paused = true)]
async fn deployments_that_differ_only_in_their_key_keep_their_own_state() {
    use ballast::model::{MemoryStateRecords, StateHome, StateId, StateRecords as _};

    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let config = ballast_config::Config::from_toml_str(&format!(
        r#"
version = 1
[[models]]
name = "agent"
deployments = [
  {{ base_url = "http://primary/v1", model = "mock", api_key_env = "{}" }},
  {{ base_url = "http://primary/v1", model = "mock", api_key_env = "SECOND_KEY" }},
]
"#,
        PRIMARY_KEY.0
    ))
    .unwrap();
    // The second account made response `resp_second` (as a fallback after the first's quota ran out would).
    let records = Arc::new(MemoryStateRecords::default());
    let home = StateHome {
        base_url: "http://primary/v1".into(),
        model: "mock".into(),
        account: Some("env:SECOND_KEY".into()),
    };
    records
        .record("", &StateId::Response("resp_second".into()), &home)
        .await
        .unwrap();
    let env = std::collections::HashMap::from([
        (PRIMARY_KEY.0.to_owned(), PRIMARY_KEY.1.to_owned()),
        ("SECOND_KEY".to_owned(), "sk-second".to_owned()),
    ]);
    let runs = Arc::new(Runs::new(config.run.retry_allowance, config.run.ttl));
    let route = (Clients::from_config(&config)
        .env(&env)
        .runs(runs)
        .state_records(records))
    .build(upstreams.transport())
    .unwrap()
    .models
    .get("agent")
    .unwrap()
    .clone();
    let next = ResponsesRequest::new(
        "agent",
        vec![InputItem::message("user", "Refund order 1, op=op-8")],
    )
    .after("resp_second");
    // The mock never made it, and says so; what matters is where the request went.
    let _ = route.respond(next.into()).await;
    let seen = upstreams.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].headers["authorization"], "Bearer sk-second",
        "the account that made it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_naming_a_response_and_a_conversation_is_refused() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let mut body = first_response_turn("op-9");
    body["previous_response_id"] = json!("resp_1");
    body["conversation"] = json!("conv_1");
    let error = route.respond(respond_call(&body)).await.unwrap_err();
    assert!(
        matches!(
            error,
            CallError::Refused {
                refusal: Refusal::BothStates { .. },
                ..
            }
        ),
        "{error}"
    );
    let long = "r".repeat(243);
    let error = route
        .retrieve_response(ResponseIdCall::for_response(long))
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
    assert!(upstreams.seen().is_empty(), "nothing was sent");
}

/// A streamed response is recorded like one answered whole; one the provider does not keep is not, streamed or
/// not; and retrieving a response does not count its tokens again.
#[tokio::test(start_paused = true)]
async fn what_is_recorded_and_what_is_counted() {
    use futures::StreamExt as _;

    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route
        .respond_stream(respond_call(&first_response_turn("op-10")))
        .await
        .unwrap();
    let events: Vec<_> = stream.map(|e| e.unwrap()).collect().await;
    let made = events.last().unwrap().response().expect("the completed response");
    let got = route
        .retrieve_response(ResponseIdCall::for_response(made.id.clone()))
        .await
        .unwrap();
    assert_eq!(got.response.id, made.id, "a streamed response is recorded");
    assert!(
        got.report.tokens.is_none(),
        "retrieving counts no tokens: {}",
        got.report
    );

    let mut unkept = first_response_turn("op-11");
    unkept["store"] = json!(false);
    let whole = route.respond(respond_call(&unkept)).await.unwrap();
    let streamed = route.respond_stream(respond_call(&unkept)).await.unwrap();
    let events: Vec<_> = streamed.map(|e| e.unwrap()).collect().await;
    let streamed_id = events.last().unwrap().response().unwrap().id;
    for id in [whole.response.id, streamed_id] {
        let error = route
            .retrieve_response(ResponseIdCall::for_response(id))
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
    }
}
