//! The library's integration tests: the layers and clients against the chaos upstream in process, under
//! paused time.
//!
//! One module per file, all in one binary: each test binary is a link, and one per crate keeps a cold build
//! short.

mod admission_breaker_stack;
mod admission_priority;
mod architecture_doc;
mod attempt_background;
mod attempt_headers;
mod breaker_chaos;
mod builders;
mod chat_context;
mod chat_fallback;
mod chat_http;
mod chat_runs;
mod chat_stream;
mod chat_stream_breaker;
mod crowd;
mod deadline_context;
mod deadline_steps;
mod deferred;
mod idempotency_concurrency;
mod idempotency_crash;
mod idempotency_disconnect;
mod idempotency_input;
mod idempotency_lease;
mod idempotency_status;
mod idempotency_store_failure;
mod mcp_upstream;
mod messages;
mod observability;
mod responses;
mod responses_state;
mod responses_stream;
mod retry_chaos;
mod retry_layer;
mod runs_shared;
mod stack_equivalence;
mod stack_outcome_unknown;
mod support;
mod tool_behind_idempotency;
mod tool_cancel;
mod tool_client;
mod tool_deadline;
mod tool_headers;
mod tool_polling;
mod transport_http;
mod transport_service;
