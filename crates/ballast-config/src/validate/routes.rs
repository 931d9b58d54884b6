//! `[[models]]` and `[[tools]]`: each entry, unique names, and the fallback-tool graph.

use std::collections::HashMap;
use std::time::Duration;

use ballast_core::UpstreamIdempotency;

use super::check::{Checker, DurationRule, index, join};
use super::text::{IDENT_RULE, MODEL_RULE, is_ident, is_model_name};
use crate::error::Problem;
use crate::raw::{RawDeployment, RawLimits, RawModel, RawTool, RawUpstream};
use crate::typed::{
    Api, ApiSet, ContextConfig, DEFAULT_MODEL_PER_TRY_TIMEOUT, DeferredConfig, Deployment, HttpMethod,
    Limits, ModelRoute, OnOverflow, OnStoreLoss, ToolConfig, ToolFallback, Upstream,
};

const DEPLOYMENT_CREDENTIALS: &str =
    "put the API key in the environment and name its variable in api_key_env";
const TOOL_CREDENTIALS: &str = "tool upstreams take no credentials in their URL";

impl Checker {
    /// Names must be unique within `section`: the second use is reported, pointing at the first.
    pub(crate) fn unique_names<'a>(&mut self, section: &str, names: impl Iterator<Item = Option<&'a str>>) {
        let mut first: HashMap<&str, usize> = HashMap::new();
        for (i, name) in names.enumerate() {
            let Some(name) = name else { continue };
            if let Some(&j) = first.get(name) {
                let problem = Problem::Duplicate {
                    name: name.to_owned(),
                    first: index(section, j),
                };
                self.report(join(&index(section, i), "name"), problem);
            } else {
                first.insert(name, i);
            }
        }
    }

    pub(crate) fn models(&mut self, raw: &[RawModel]) -> Vec<ModelRoute> {
        let models = raw
            .iter()
            .enumerate()
            .map(|(i, m)| self.model(&index("models", i), m))
            .collect();
        self.unique_names("models", raw.iter().map(|m| m.name.as_deref()));
        models
    }

    fn model(&mut self, path: &str, raw: &RawModel) -> ModelRoute {
        // The defaults of an omitted key: the typed route's own.
        let d = ModelRoute::new(String::new(), Vec::new());
        let name = self.name(&join(path, "name"), raw.name.as_ref(), is_model_name, MODEL_RULE);
        let name = name.unwrap_or_default();
        let per_try = self
            .duration(
                &join(path, "per_try_timeout"),
                raw.per_try_timeout.as_ref(),
                d.per_try_timeout,
                DurationRule::Positive,
            )
            .unwrap_or(d.per_try_timeout);
        let deployments_path = join(path, "deployments");
        if raw.deployments.is_empty() {
            self.report(&deployments_path, Problem::Empty);
        }
        let deployments: Vec<_> = (raw.deployments.iter().enumerate())
            .map(|(i, d)| self.deployment(&index(&deployments_path, i), d, &name, per_try))
            .collect();
        let primary_share = self.float(
            &join(path, "primary_share"),
            raw.primary_share,
            d.primary_share,
            |x| x > 0.0 && x <= 1.0,
            "more than 0 and at most 1",
        );
        let stream_idle_timeout = self
            .duration(
                &join(path, "stream_idle_timeout"),
                raw.stream_idle_timeout.as_ref(),
                d.stream_idle_timeout,
                DurationRule::Positive,
            )
            .unwrap_or(d.stream_idle_timeout);
        let overflow_path = join(&join(path, "context"), "on_overflow");
        let on_overflow = raw.context.as_ref().and_then(|c| c.on_overflow.as_ref());
        let on_overflow = self
            .word(&overflow_path, on_overflow, d.context.on_overflow)
            .unwrap_or(d.context.on_overflow);
        if on_overflow == OnOverflow::Fallback && deployments.len() < 2 {
            self.report(overflow_path, Problem::NeedsFallbackDeployment);
        }
        let priority = self.word(&join(path, "priority"), raw.priority.as_ref(), d.priority);
        let concurrency = self.int(&join(path, "concurrency"), raw.concurrency, d.concurrency, 1);
        let queue = self.int(&join(path, "queue"), raw.queue, d.queue, 0);
        ModelRoute {
            name,
            deployments,
            per_try_timeout: per_try,
            primary_share: primary_share.unwrap_or(d.primary_share),
            stream_idle_timeout,
            retry: self.retry(&join(path, "retry"), raw.retry.as_ref()),
            budget: self.budget(&join(path, "budget"), raw.budget.as_ref()),
            breaker: self.breaker(&join(path, "breaker"), raw.breaker.as_ref()),
            throttle: self.throttle(&join(path, "throttle"), raw.throttle.as_ref()),
            priority: priority.unwrap_or(d.priority),
            concurrency: concurrency.unwrap_or(d.concurrency),
            queue: queue.unwrap_or(d.queue),
            context: ContextConfig { on_overflow },
        }
    }

    fn deployment(&mut self, path: &str, raw: &RawDeployment, route: &str, per_try: Duration) -> Deployment {
        let base_url = self.http_url(
            &join(path, "base_url"),
            raw.base_url.as_ref(),
            DEPLOYMENT_CREDENTIALS,
        );
        let model = match &raw.model {
            Some(model) => self.name(&join(path, "model"), Some(model), is_model_name, MODEL_RULE),
            None => Some(route.to_owned()),
        };
        let api_key_env =
            (raw.api_key_env.as_ref()).and_then(|env| self.env_name(&join(path, "api_key_env"), env));
        let per_try = self.duration(
            &join(path, "per_try_timeout"),
            raw.per_try_timeout.as_ref(),
            per_try,
            DurationRule::Positive,
        );
        let apis = self.apis(&join(path, "api"), raw.api.as_deref());
        let limits = (raw.limits.as_ref()).and_then(|limits| self.limits(&join(path, "limits"), limits));
        Deployment {
            base_url: base_url.unwrap_or_default(),
            model: model.unwrap_or_default(),
            api_key_env,
            per_try_timeout: per_try.unwrap_or(DEFAULT_MODEL_PER_TRY_TIMEOUT),
            apis,
            limits,
        }
    }

    /// A deployment's `limits`: at least one of the two rates, each at least 1 a minute.
    fn limits(&mut self, path: &str, raw: &RawLimits) -> Option<Limits> {
        let mut rate = |key: &str, value: Option<i64>| {
            value.and_then(|value| self.int(&join(path, key), Some(value), 1, 1))
        };
        let requests_per_minute = rate("requests_per_minute", raw.requests_per_minute);
        let tokens_per_minute = rate("tokens_per_minute", raw.tokens_per_minute);
        let burst = self.duration(
            &join(path, "burst"),
            raw.burst.as_ref(),
            ballast_core::DEFAULT_LIMIT_BURST,
            DurationRule::Any,
        );
        let on_store_loss = self.word(
            &join(path, "on_store_loss"),
            raw.on_store_loss.as_ref(),
            OnStoreLoss::Share,
        );
        if raw.requests_per_minute.is_none() && raw.tokens_per_minute.is_none() {
            self.report(
                path,
                Problem::MissingOneOf {
                    choices: "requests_per_minute or tokens_per_minute",
                },
            );
            return None;
        }
        Some(Limits {
            requests_per_minute,
            tokens_per_minute,
            burst: burst?,
            on_store_loss: on_store_loss?,
        })
    }

    /// A deployment's `api`: OpenAI's APIs when omitted; otherwise a non-empty list of known API names, each once.
    fn apis(&mut self, path: &str, raw: Option<&[String]>) -> ApiSet {
        let Some(raw) = raw else { return ApiSet::OPENAI };
        if raw.is_empty() {
            self.report(path, Problem::Empty);
            return ApiSet::OPENAI;
        }
        let mut apis = ApiSet::NONE;
        for (i, name) in raw.iter().enumerate() {
            let item = index(path, i);
            let Some(api) = self.word::<Api>(&item, Some(name), Api::Chat) else {
                continue;
            };
            if apis.contains(api) {
                let first = index(path, raw.iter().position(|n| n == name).unwrap_or(0));
                self.report(
                    &item,
                    Problem::Duplicate {
                        name: name.clone(),
                        first,
                    },
                );
            }
            apis = apis.with(api);
        }
        if apis.is_empty() { ApiSet::OPENAI } else { apis }
    }

    pub(crate) fn tools(&mut self, raw: &[RawTool], deferred: &DeferredConfig) -> Vec<ToolConfig> {
        let tools: Vec<_> = raw
            .iter()
            .enumerate()
            .map(|(i, t)| self.tool(&index("tools", i), t, deferred))
            .collect();
        self.unique_names("tools", raw.iter().map(|t| t.name.as_deref()));
        self.fallback_graph(raw);
        tools
    }

    fn tool(&mut self, path: &str, raw: &RawTool, deferred: &DeferredConfig) -> ToolConfig {
        // The defaults of an omitted key: the typed tool's own.
        let d = ToolConfig::new(String::new(), upstream_placeholder());
        let name = self.name(&join(path, "name"), raw.name.as_ref(), is_ident, IDENT_RULE);
        let upstream = self.upstream(&join(path, "upstream"), raw.upstream.as_ref());
        let side_effects = raw.side_effects.unwrap_or(d.side_effects);
        let idempotency_path = join(path, "upstream_idempotency");
        let written = raw.upstream_idempotency.as_ref();
        let upstream_idempotency = self.word(&idempotency_path, written, d.upstream_idempotency);
        if !side_effects && upstream_idempotency.is_some_and(UpstreamIdempotency::deduplicates) {
            let value = written.cloned().unwrap_or_default();
            self.report(idempotency_path, Problem::NeedsSideEffects { value });
        }
        let priority = self.word(&join(path, "priority"), raw.priority.as_ref(), d.priority);
        let per_try = self.duration(
            &join(path, "per_try_timeout"),
            raw.per_try_timeout.as_ref(),
            d.per_try_timeout,
            DurationRule::Positive,
        );
        let concurrency = self.int(&join(path, "concurrency"), raw.concurrency, d.concurrency, 1);
        let queue = self.int(&join(path, "queue"), raw.queue, d.queue, 0);
        let fallback = match (&raw.fallback_tool, &raw.fallback_response) {
            (Some(_), Some(_)) => {
                self.report(
                    join(path, "fallback_response"),
                    Problem::Conflict {
                        other: "fallback_tool",
                    },
                );
                None
            }
            // Whether the tool exists is checked once every tool is known (`fallback_graph`).
            (Some(tool), None) => Some(ToolFallback::Tool(tool.clone())),
            (None, Some(_)) if side_effects => {
                self.report(
                    join(path, "fallback_response"),
                    Problem::StaticFallbackForSideEffects,
                );
                None
            }
            (None, Some(response)) => self
                .json(&join(path, "fallback_response"), response)
                .map(ToolFallback::Response),
            (None, None) => None,
        };
        let description = self.description(&join(path, "description"), raw.description.as_ref());
        let input_schema = (raw.input_schema.as_ref())
            .and_then(|schema| self.object_schema(&join(path, "input_schema"), schema));
        let defer = self.tool_defer(&join(path, "defer"), raw.defer.as_ref(), side_effects, deferred);
        ToolConfig {
            name: name.unwrap_or_default(),
            description,
            input_schema,
            upstream,
            side_effects,
            upstream_idempotency: upstream_idempotency.unwrap_or(d.upstream_idempotency),
            priority: priority.unwrap_or(d.priority),
            per_try_timeout: per_try.unwrap_or(d.per_try_timeout),
            retry: self.retry(&join(path, "retry"), raw.retry.as_ref()),
            budget: self.budget(&join(path, "budget"), raw.budget.as_ref()),
            breaker: self.breaker(&join(path, "breaker"), raw.breaker.as_ref()),
            throttle: self.throttle(&join(path, "throttle"), raw.throttle.as_ref()),
            concurrency: concurrency.unwrap_or(d.concurrency),
            queue: queue.unwrap_or(d.queue),
            fallback,
            defer,
        }
    }

    fn upstream(&mut self, path: &str, raw: Option<&RawUpstream>) -> Upstream {
        let placeholder = upstream_placeholder();
        let Some(raw) = raw else {
            self.report(path, Problem::Required);
            return placeholder;
        };
        let method = self.word(&join(path, "method"), raw.method.as_ref(), HttpMethod::Post);
        let url = self.http_url(&join(path, "url"), raw.url.as_ref(), TOOL_CREDENTIALS);
        let headers = self.upstream_headers(&join(path, "headers"), &raw.headers);
        Upstream {
            headers,
            ..Upstream::new(method.unwrap_or(placeholder.method), url.unwrap_or_default())
        }
    }

    /// Every `fallback_tool` names another configured tool, and following them never comes back around.
    fn fallback_graph(&mut self, raw: &[RawTool]) {
        let position: HashMap<&str, usize> = raw
            .iter()
            .enumerate()
            .rev()
            .filter_map(|(i, t)| Some((t.name.as_deref()?, i)))
            .collect();
        // next[i]: the tool `i` falls back to, when that is a valid edge.
        let mut next: Vec<Option<usize>> = vec![None; raw.len()];
        for (i, tool) in raw.iter().enumerate() {
            let Some(target) = &tool.fallback_tool else {
                continue;
            };
            let path = join(&index("tools", i), "fallback_tool");
            match position.get(target.as_str()) {
                None => self.report(path, Problem::UnknownTool { name: target.clone() }),
                Some(_) if tool.name.as_deref() == Some(target) => {
                    self.report(path, Problem::SelfFallback { name: target.clone() });
                }
                Some(&j) => next[i] = Some(j),
            }
        }
        // Each tool has at most one fallback, so a walk from any tool either ends or enters one cycle.
        let mut done = vec![false; raw.len()];
        for start in 0..raw.len() {
            let mut walk = Vec::new();
            let mut at = Some(start);
            while let Some(i) = at {
                if done[i] {
                    break;
                }
                if let Some(k) = walk.iter().position(|&w| w == i) {
                    self.report_cycle(raw, &walk[k..]);
                    break;
                }
                walk.push(i);
                at = next[i];
            }
            for i in walk {
                done[i] = true;
            }
        }
    }

    /// Reports a cycle once, on its first tool in file order.
    fn report_cycle(&mut self, raw: &[RawTool], cycle: &[usize]) {
        let Some(first) = (0..cycle.len()).min_by_key(|&k| cycle[k]) else {
            return;
        };
        let name = |i: usize| raw[i].name.clone().unwrap_or_default();
        let names: Vec<String> = (0..=cycle.len())
            .map(|k| name(cycle[(first + k) % cycle.len()]))
            .collect();
        self.report(
            join(&index("tools", cycle[first]), "fallback_tool"),
            Problem::FallbackCycle { cycle: names },
        );
    }
}

/// What a tool's `upstream` is read as when it is missing or broken (reported): `POST` to nowhere.
fn upstream_placeholder() -> Upstream {
    Upstream::new(HttpMethod::Post, String::new())
}
