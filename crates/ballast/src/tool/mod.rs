//! `ToolClient`: an agent's tool calls with every Ballast guarantee, configured from the one TOML schema or built
//! in code under its rules.
//!
//! Why a client and not just layers: a tool call is more than an HTTP request. A side-effecting call must carry
//! ONE `Idempotency-Key` for the whole logical operation — generated once, outside every retry loop, or derived
//! from (run, step, tool, ordinal) so a re-run step re-sends the same key (reference/004: the double refund) —
//! and must wait out a 409 "in progress" instead of failing; a call belongs to a run whose deadline and retry
//! allowance it shares; and when the upstream is failing the caller wants the configured fallback, not an error.
//! The client runs each call through the stack of the `ballast` crate for its tool (the client core's `Upstream`),
//!
//! ```text
//! deadline -> admission -> retry -> BreakerLayer -> AttemptLayer -> transport
//! ```
//!
//! reads what each trip returned, and answers with the upstream's answer or a typed error, each with the call's
//! [`OutcomeReport`](crate::OutcomeReport), whose verdict it writes from those values.
//!
//! Around the stack the client keeps the promises a layer cannot:
//! - **The upstream's own headers** (`upstream.headers`): resolved once when the client is built — a value from
//!   the environment read then, marked sensitive, and a missing one refused then
//!   ([`InvalidTool::MissingSecret`]) — and sent on every attempt.
//! - **Request size.** Arguments whose JSON is over `server.body_limit` are refused before anything is sent.
//! - **409 "in progress".** Waited out within the deadline (`send.rs`, `poll.rs`): the upstream's `Retry-After`
//!   honoured but never under a 100 ms floor, growing with jitter to 2 s; each poll is marked so the retry layer
//!   spends no retry and no budget on it and keeps counting `ballast-attempt`.
//! - **Fallback** (`fallback.rs`). When the upstream is failing (breaker open, shed, retries spent), the
//!   configured `fallback_tool` or `fallback_response` answers — for a side-effecting tool only when no attempt
//!   may have reached the upstream, so a fallback never repeats a refund. The report stays the call's own, with
//!   the fallback tool's report nested in it.
//! - **Cancellation.** [`ToolCall::cancel_token`]: sleeps, waits and queued work stop at once; a sent
//!   side-effecting attempt runs to its end and is recorded.
//! - **The total.** The report's total is the whole call's, polls and fallback included.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use ballast::{Clients, tool::ToolCall, transport::ServiceTransport};
//! use ballast_config::Config;
//! use serde_json::json;
//!
//! let config = Config::from_toml_str(r#"
//!     version = 1
//!     [[tools]]
//!     name = "lookup_order"
//!     upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
//!     per_try_timeout = "1s"
//! "#).unwrap();
//! // In process, against the chaos upstream; in production, `HttpTransport` over reqwest.
//! let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
//! let tools = Clients::from_config(&config).build(transport).unwrap().tools;
//! let answer = tools
//!     .get("lookup_order")
//!     .unwrap()
//!     .call(ToolCall::new(json!({"order_id": "1234", "op": "op-1"})))
//!     .await
//!     .unwrap();
//! assert_eq!(answer.body()["order_id"], "1234");
//! println!("{}", answer.report);
//! # }
//! ```
//!
//! Without TOML, [`ToolClient::builder`] takes the same settings in code and checks them, at `build()`, by the
//! configuration's own rules; gather built clients into a [`ToolClients`] with `collect()` or
//! [`ToolClients::insert`]:
//!
//! ```
//! use std::time::Duration;
//! use ballast::{tool::{ToolClient, ToolClients}, config::HttpMethod, transport::ServiceTransport};
//!
//! let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
//! let lookup = ToolClient::builder("lookup_order", HttpMethod::Post, "http://chaos/tools/lookup_order")
//!     .per_try_timeout(Duration::from_secs(1))
//!     .build(transport)
//!     .unwrap();
//! let tools: ToolClients = [lookup].into_iter().collect();
//! assert!(tools.get("lookup_order").is_some());
//! ```

mod builder;
mod call;
mod client;
mod fallback;
mod poll;
pub(crate) mod registry;
mod send;

pub use builder::ToolClientBuilder;
pub use call::{Progress, ToolAnswer, ToolCall, ToolError};
pub use client::ToolClient;
pub use fallback::STATIC_RESPONSE;
pub use registry::{InvalidTool, ToolClients};
