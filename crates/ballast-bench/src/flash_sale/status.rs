//! What the gateway's `/status` says during a run, as an operator reads it: its breakers' changes and the attempts
//! its throttles refused — of every instance, merged.
//!
//! With several instances each one's `/status` is read (at once, on each look) and merged: the breakers' changes
//! of each, labelled with its index (`create_refund (instance 1)`: breakers are per instance, DESIGN.md "Many
//! instances"), and the refusals summed. An instance that does not answer a look — killed, restarting — is skipped
//! and read at the next. One that restarted starts its counts again: what it had counted before is kept, and its
//! breakers' transitions are read from zero.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;

use super::strategy::BreakerChange;

/// What the instances' `/status` have said (see the module docs).
pub(super) struct StatusWatch {
    client: reqwest::Client,
    /// Each instance's `/status` URL.
    urls: Vec<String>,
    /// The principal's key, to read it with.
    key: String,
    seen: Mutex<Vec<Seen>>,
    changes: Mutex<Vec<BreakerChange>>,
}

/// What one instance's `/status` said at the last look.
#[derive(Clone, Debug, Default)]
struct Seen {
    /// Transitions so far, per breaker.
    transitions: HashMap<String, u64>,
    /// Its throttles' refusals at the last look.
    refused: u64,
    /// Refusals it counted before it restarted.
    refused_before: u64,
}

impl StatusWatch {
    /// A watch of the `/status` at `urls` (one per instance), read with `key`.
    pub(super) fn new(urls: Vec<String>, key: &str) -> Result<StatusWatch, String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|error| format!("an HTTP client: {error}"))?;
        Ok(StatusWatch {
            client,
            seen: Mutex::new(vec![Seen::default(); urls.len()]),
            urls,
            key: key.to_owned(),
            changes: Mutex::default(),
        })
    }

    /// Looks every `every` until dropped.
    pub(super) async fn look_every(self: Arc<StatusWatch>, every: Duration) {
        let mut looks = tokio::time::interval(every);
        looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            looks.tick().await;
            self.look().await;
        }
    }

    /// Reads every instance's `/status` once; one that does not answer is read at the next look.
    pub(super) async fn look(&self) {
        let statuses = futures::future::join_all(self.urls.iter().map(|url| self.read(url))).await;
        for (instance, status) in statuses.into_iter().enumerate() {
            if let Ok(status) = status {
                self.merge(instance, &status);
            }
        }
    }

    /// The breakers' changes not yet taken.
    pub(super) fn take_changes(&self) -> Vec<BreakerChange> {
        std::mem::take(&mut *lock(&self.changes))
    }

    /// The attempts every instance's throttles refused so far.
    pub(super) fn refused(&self) -> u64 {
        lock(&self.seen)
            .iter()
            .map(|seen| seen.refused_before + seen.refused)
            .sum()
    }

    async fn read(&self, url: &str) -> Result<Value, reqwest::Error> {
        self.client
            .get(url)
            .bearer_auth(&self.key)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await
    }

    /// What instance `instance`'s `status` adds.
    fn merge(&self, instance: usize, status: &Value) {
        let upstreams = upstreams(status);
        let refused: u64 = upstreams
            .iter()
            .filter_map(|(_, upstream)| upstream["throttle"]["refused_total"].as_u64())
            .sum();
        let mut all = lock(&self.seen);
        let seen = &mut all[instance];
        if refused < seen.refused {
            // Restarted: its counts begin again.
            seen.refused_before += seen.refused;
            seen.transitions.clear();
        }
        seen.refused = refused;
        let label = |name: String| match self.urls.len() {
            1 => name,
            _ => format!("{name} (instance {instance})"),
        };
        for (name, upstream) in upstreams {
            let breaker = &upstream["breaker"];
            let transitions = breaker["transitions"].as_u64().unwrap_or_default();
            let before = seen
                .transitions
                .insert(name.clone(), transitions)
                .unwrap_or_default();
            // Fewer than before: the instance restarted, and every one it counts is new.
            let before = if transitions < before { 0 } else { before };
            let last = &breaker["last_transition"];
            if transitions <= before || !last.is_object() {
                continue;
            }
            let mut reason = last["reason"].as_str().unwrap_or_default().to_owned();
            let unseen = transitions - before - 1;
            if unseen > 0 {
                reason.push_str(&format!(" ({unseen} earlier changes between two looks)"));
            }
            let state = |key: &str| last[key].as_str().unwrap_or_default().to_owned();
            lock(&self.changes).push(BreakerChange {
                breaker: label(name),
                change: format!("{} -> {}", state("from"), state("to")),
                reason,
                at: Duration::ZERO,
            });
        }
    }
}

/// Every upstream `/status` names, with what it says of it: model deployments (`route[i]`), tools, MCP servers
/// (`mcp:name`).
fn upstreams(status: &Value) -> Vec<(String, &Value)> {
    let mut upstreams: Vec<(String, &Value)> = Vec::new();
    if let Some(models) = status["models"].as_object() {
        for (route, model) in models {
            let deployments = model["deployments"].as_array().into_iter().flatten();
            for (index, deployment) in deployments.enumerate() {
                upstreams.push((format!("{route}[{index}]"), deployment));
            }
        }
    }
    if let Some(tools) = status["tools"].as_object() {
        upstreams.extend(tools.iter().map(|(name, tool)| (name.clone(), tool)));
    }
    if let Some(servers) = status["mcp_servers"].as_object() {
        upstreams.extend(
            servers
                .iter()
                .map(|(name, server)| (format!("mcp:{name}"), server)),
        );
    }
    upstreams
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn status(transitions: u64, refused: u64) -> Value {
        json!({"tools": {"create_refund": {
            "breaker": {"transitions": transitions, "last_transition": {"from": "closed", "to": "open", "reason": "5 consecutive failures"}},
            "throttle": {"refused_total": refused}
        }}})
    }

    #[test]
    fn instances_are_merged_labelled_and_a_restart_keeps_what_was_counted() {
        let watch = StatusWatch::new(vec!["http://a/status".into(), "http://b/status".into()], "k").unwrap();
        watch.merge(0, &status(1, 3));
        watch.merge(1, &status(0, 2));
        let changes = watch.take_changes();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].breaker, "create_refund (instance 0)");
        assert_eq!(watch.refused(), 5);
        watch.merge(0, &status(1, 3));
        assert!(watch.take_changes().is_empty(), "nothing new");
        // Instance 0 restarted: it counts from zero again.
        watch.merge(0, &status(0, 1));
        assert_eq!(watch.refused(), 3 + 1 + 2);
        watch.merge(0, &status(1, 1));
        assert_eq!(
            watch.take_changes().len(),
            1,
            "its first change after the restart"
        );
    }

    #[test]
    fn one_instance_is_not_labelled() {
        let watch = StatusWatch::new(vec!["http://a/status".into()], "k").unwrap();
        watch.merge(0, &status(2, 0));
        let changes = watch.take_changes();
        assert_eq!(changes[0].breaker, "create_refund");
        assert!(
            changes[0].reason.contains("1 earlier changes"),
            "{}",
            changes[0].reason
        );
    }
}
