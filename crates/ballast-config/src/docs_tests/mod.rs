//! docs/config.md and examples/ballast.toml kept in step with the code, and round trips.
//!
//! - `keys`: every key of the schema is documented, every documented key exists, and its documented default is
//!   the default.
//! - `example`: examples/ballast.toml loads as the flash-sale setup and fits its own deadline.
//! - here: the fully populated raw config every test starts from, and the round trips.

use crate::*;

mod example;
mod keys;

const DOCS: &str = include_str!("../../../../docs/config.md");
const EXAMPLE: &str = include_str!("../../../../examples/ballast.toml");

fn text(s: &str) -> Option<HumanValue> {
    Some(HumanValue::from(s))
}

fn retry() -> Option<RawRetry> {
    Some(RawRetry {
        max_attempts: Some(2),
        base: text("50ms"),
        cap: text("1s"),
        jitter: Some("decorrelated".into()),
    })
}

fn breaker() -> Option<RawBreaker> {
    Some(RawBreaker {
        consecutive_failures: Some(4),
        consecutive_spread: text("1s"),
        failure_rate: Some(0.4),
        window: text("20s"),
        min_calls: Some(10),
        slow_call: text("2s"),
        open_for: text("15s"),
        open_jitter: Some(0.2),
        half_open_probes: Some(4),
        success_threshold: Some(2),
    })
}

fn throttle() -> Option<RawThrottle> {
    Some(RawThrottle {
        enabled: Some(true),
        accept_multiplier: Some(1.5),
        window: text("3s"),
        min_requests: Some(20),
    })
}

/// Every field of every raw struct set. Struct literals without `..`: a field added to a raw struct does not
/// compile until it is added here, and then the tests below ask for its documentation.
fn fully_populated() -> RawConfig {
    let tool = |name: &str, budget: RawBudget, fallback_tool: Option<String>, fallback_response| RawTool {
        name: Some(name.into()),
        description: Some(format!("The {name} tool.")),
        input_schema: Some(toml::Value::Table(toml::toml! {
            type = "object"
            required = ["order_id"]
            [properties.order_id]
            type = "string"
        })),
        upstream: Some(RawUpstream {
            method: Some("PUT".into()),
            url: Some(format!("http://127.0.0.1:9000/{name}")),
            // Strings first: TOML writes a table's plain values before its sub-tables, so this order survives.
            headers: RawHeaders(vec![
                ("x-api-version".into(), RawHeaderValue::Literal("2024-01".into())),
                (
                    "authorization".into(),
                    RawHeaderValue::Env(RawHeaderEnv {
                        env: Some(format!("{}_TOKEN", name.to_uppercase())),
                        prefix: Some("Bearer ".into()),
                    }),
                ),
            ]),
        }),
        side_effects: Some(true),
        upstream_idempotency: Some("keyed".into()),
        priority: Some("sheddable_plus".into()),
        per_try_timeout: text("1.5s"),
        retry: retry(),
        budget: Some(budget),
        breaker: breaker(),
        throttle: throttle(),
        concurrency: Some(8),
        queue: Some(16),
        fallback_tool,
        fallback_response,
        defer: Some(RawToolDefer {
            ttl: text("10m"),
            max_attempts: Some(8),
            concurrency: Some(3),
        }),
    };
    RawConfig {
        version: 1,
        server: RawServer {
            listen: Some("0.0.0.0:9090".into()),
            admin_listen: Some("0.0.0.0:9091".into()),
            default_timeout: text("20s"),
            max_timeout: text("1m"),
            reserve: text("20ms"),
            min_attempt: text("30ms"),
            body_limit: text("1MiB"),
            grace: text("5s"),
            drain_delay: text("2s"),
            max_retry_after: text("30s"),
            repeat_window: text("5s"),
            header_timeout: text("5s"),
            body_timeout: text("20s"),
            idle_timeout: text("90s"),
            send_timeout: text("30s"),
            max_connections: Some(2000),
        },
        principals: vec![
            RawPrincipal {
                name: Some("a".into()),
                key_env: Some("KEY_A".into()),
                key_hash_env: None,
                admin: Some(true),
            },
            RawPrincipal {
                name: Some("b".into()),
                key_env: None,
                key_hash_env: Some("KEY_B_SHA256".into()),
                admin: Some(false),
            },
        ],
        // `url` and `url_env` exclude each other; both are set here only so that both keys are seen.
        store: RawStore {
            url: Some("sqlite::memory:".into()),
            url_env: Some("STORE_URL".into()),
            retention: text("1h"),
        },
        run: RawRun {
            retry_allowance: Some(5),
            retry_allowance_per_call: Some(1.0),
            ttl: text("15m"),
            max_runs: Some(20_000),
            max_runs_per_principal: Some(5_000),
        },
        deferred: RawDeferred {
            concurrency: Some(8),
            ttl: text("30m"),
            max_attempts: Some(6),
            base: text("2s"),
            cap: text("30s"),
            callback_url: Some("https://hooks.example.com/ballast".into()),
            callback_secret_env: Some("BALLAST_CALLBACK_SECRET".into()),
        },
        telemetry: RawTelemetry {
            endpoint: Some("http://127.0.0.1:4318".into()),
            protocol: Some("http/json".into()),
            sampling: Some(0.5),
            service_name: Some("gateway-eu".into()),
        },
        models: vec![
            RawModel {
                name: Some("gpt-4.1".into()),
                deployments: vec![
                    RawDeployment {
                        base_url: Some("https://api.openai.com/v1".into()),
                        model: Some("gpt-4.1".into()),
                        api_key_env: Some("OPENAI_API_KEY".into()),
                        per_try_timeout: text("10s"),
                        api: Some(vec!["responses".into(), "chat".into()]),
                        limits: Some(RawLimits {
                            requests_per_minute: Some(500),
                            tokens_per_minute: Some(200_000),
                            burst: text("2s"),
                            on_store_loss: Some("refuse".into()),
                        }),
                    },
                    RawDeployment {
                        base_url: Some("http://127.0.0.1:9000/v1".into()),
                        model: Some("mock".into()),
                        ..Default::default()
                    },
                ],
                per_try_timeout: text("12s"),
                primary_share: Some(0.7),
                stream_idle_timeout: text("15s"),
                retry: retry(),
                budget: Some(RawBudget::Ratio {
                    ratio: Some(0.1),
                    min_per_sec: Some(5),
                    window: text("30s"),
                }),
                breaker: breaker(),
                throttle: throttle(),
                priority: Some("critical_plus".into()),
                concurrency: Some(32),
                queue: Some(128),
                context: Some(RawContext {
                    on_overflow: Some("fallback".into()),
                }),
            },
            RawModel {
                name: Some("small".into()),
                deployments: vec![RawDeployment {
                    base_url: Some("http://127.0.0.1:9001/v1".into()),
                    ..Default::default()
                }],
                budget: Some(RawBudget::TokenBucket {
                    capacity: Some(20),
                    refill_per_sec: Some(2.0),
                }),
                ..Default::default()
            },
        ],
        tools: vec![
            tool(
                "refund",
                RawBudget::TokenBucket {
                    capacity: Some(5),
                    refill_per_sec: Some(0.5),
                },
                Some("refund_later".into()),
                None,
            ),
            tool(
                "refund_later",
                RawBudget::Ratio {
                    ratio: Some(0.3),
                    min_per_sec: Some(1),
                    window: text("5s"),
                },
                None,
                Some(toml::Value::Table(toml::toml! { queued = true })),
            ),
        ],
        mcp_servers: vec![
            RawMcpServer {
                name: Some("shop".into()),
                url: Some("http://127.0.0.1:9100/mcp".into()),
                headers: RawHeaders(vec![(
                    "authorization".into(),
                    RawHeaderValue::Env(RawHeaderEnv {
                        env: Some("SHOP_MCP_TOKEN".into()),
                        prefix: Some("Bearer ".into()),
                    }),
                )]),
                prefix: Some("shop_".into()),
                trust_annotations: Some(true),
                side_effects: Some(true),
                upstream_idempotency: Some("keyed".into()),
                priority: Some("critical".into()),
                per_try_timeout: text("4s"),
                retry: retry(),
                budget: Some(RawBudget::TokenBucket {
                    capacity: Some(10),
                    refill_per_sec: Some(1.0),
                }),
                breaker: breaker(),
                throttle: throttle(),
                concurrency: Some(16),
                queue: Some(32),
                tools: [(
                    "lookup_order".to_owned(),
                    RawMcpTool {
                        side_effects: Some(false),
                        priority: Some("sheddable".into()),
                        per_try_timeout: text("1s"),
                        description: Some("Look up an order.".into()),
                        hidden: Some(false),
                    },
                )]
                .into(),
            },
            RawMcpServer {
                name: Some("search".into()),
                url: Some("http://127.0.0.1:9101/mcp".into()),
                budget: Some(RawBudget::Ratio {
                    ratio: Some(0.1),
                    min_per_sec: Some(2),
                    window: text("20s"),
                }),
                ..Default::default()
            },
        ],
    }
}

#[test]
fn raw_config_round_trips_through_toml() {
    for raw in [fully_populated(), RawConfig::default(), parse(EXAMPLE).unwrap()] {
        let text = toml::to_string(&raw).unwrap();
        assert_eq!(parse(&text).unwrap(), raw, "{text}");
    }
}

#[test]
fn typed_config_round_trips_with_every_value_written_out() {
    let mut valid = fully_populated();
    valid.tools[0].fallback_tool = None; // fallback_tool and fallback_response are exclusive per tool
    valid.tools[0].fallback_response = Some(toml::Value::String("later".into()));
    // A static answer is for a read-only tool only (it would report a side effect that never ran).
    valid.tools[0].side_effects = Some(false);
    valid.tools[0].upstream_idempotency = None;
    valid.tools[0].defer = None; // deferral is for side-effecting tools only
    valid.tools[1].fallback_tool = Some("refund".into());
    valid.tools[1].fallback_response = None;
    valid.store.url_env = None;
    for config in [
        validate(&valid).unwrap(),
        Config::from_toml_str(EXAMPLE).unwrap(),
        Config::embedded_default(),
    ] {
        let written = toml::to_string(&RawConfig::from(&config)).unwrap();
        assert_eq!(Config::from_toml_str(&written).unwrap(), config, "{written}");
    }
}
