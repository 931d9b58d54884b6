//! The responses and conversations a server keeps, for `previous_response_id`, `conversation` and
//! `GET /v1/responses/{id}`.
//!
//! They belong to the server, not to a profile's epoch: `POST /admin/profile` swaps the faults and keeps them, so
//! a test may change the faults in the middle of a conversation. What is kept is bounded, as a provider's
//! retention is: the newest [`MAX_STORED`] responses and the newest [`MAX_STORED`] conversations; a
//! `previous_response_id` to a forgotten response is not found.
//!
//! # Ids unique per server
//! A gateway routes a `previous_response_id` to the deployment that created it; two chaos servers that handed out
//! the same id would make that routing untestable. So a response id is `resp_` and 48 hex digits from the store's
//! own id source (`ids`), never handed out by another.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::ResponsesError;
use crate::server::ids::Ids;
use crate::server::lock::lock;

/// The most responses, and the most conversations, a server keeps.
pub(crate) const MAX_STORED: usize = 10_000;

/// A kept response.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    /// The response as `GET` shows it.
    pub(crate) response: Value,
    /// The items a response continuing this one starts from: its history, its input and its output.
    pub(crate) context: Vec<Value>,
    /// Created with `background: true`: cancellable while queued.
    pub(crate) background: bool,
    /// A queued background response's answer and context, shown from the first `GET` (or continuation) on.
    pub(crate) pending: Option<(Value, Vec<Value>)>,
}

impl Stored {
    /// A queued background response runs when it is first looked at.
    fn run_if_queued(&mut self) {
        if let Some((response, context)) = self.pending.take() {
            self.response = response;
            self.context = context;
        }
    }
}

/// The responses and conversations of one server.
#[derive(Debug)]
pub(crate) struct ResponseStore {
    ids: Ids,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    responses: HashMap<String, Stored>,
    /// Response ids, oldest first (deleted ones linger until the next compaction).
    order: VecDeque<String>,
    conversations: HashMap<String, Vec<Value>>,
    conversation_order: VecDeque<String>,
}

impl Default for ResponseStore {
    fn default() -> Self {
        ResponseStore {
            ids: Ids::new("resp_"),
            inner: Mutex::default(),
        }
    }
}

impl ResponseStore {
    /// A new response id, never handed out before by any store.
    pub(crate) fn next_id(&self) -> String {
        self.ids.next()
    }

    /// The items a request continues: those of its `previous` response (a queued one runs first), or of its
    /// `conversation` (none yet for a new one), or none.
    pub(crate) fn history(
        &self,
        previous: Option<&str>,
        conversation: Option<&str>,
    ) -> Result<Vec<Value>, ResponsesError> {
        let mut inner = lock(&self.inner);
        if let Some(id) = previous {
            let stored = inner
                .responses
                .get_mut(id)
                .ok_or_else(|| ResponsesError::PreviousResponseNotFound(id.to_owned()))?;
            stored.run_if_queued();
            return Ok(stored.context.clone());
        }
        Ok(conversation
            .and_then(|id| inner.conversations.get(id))
            .cloned()
            .unwrap_or_default())
    }

    /// Keeps response `id`, forgetting the oldest beyond [`MAX_STORED`].
    pub(crate) fn keep(&self, id: String, stored: Stored) {
        let mut inner = lock(&self.inner);
        inner.order.push_back(id.clone());
        inner.responses.insert(id, stored);
        while inner.responses.len() > MAX_STORED {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            inner.responses.remove(&oldest);
        }
        if inner.order.len() > 2 * MAX_STORED {
            let Inner { order, responses, .. } = &mut *inner;
            order.retain(|id| responses.contains_key(id));
        }
    }

    /// Adds `items` to conversation `id` (created on first use), forgetting the oldest conversation beyond
    /// [`MAX_STORED`].
    pub(crate) fn extend_conversation(&self, id: &str, items: impl IntoIterator<Item = Value>) {
        let mut inner = lock(&self.inner);
        if !inner.conversations.contains_key(id) {
            inner.conversation_order.push_back(id.to_owned());
            if inner.conversation_order.len() > MAX_STORED
                && let Some(oldest) = inner.conversation_order.pop_front()
            {
                inner.conversations.remove(&oldest);
            }
        }
        inner
            .conversations
            .entry(id.to_owned())
            .or_default()
            .extend(items);
    }

    /// Response `id` (a queued one runs first).
    pub(crate) fn get(&self, id: &str) -> Result<Value, ResponsesError> {
        let mut inner = lock(&self.inner);
        let stored = inner
            .responses
            .get_mut(id)
            .ok_or_else(|| ResponsesError::NotFound(id.to_owned()))?;
        stored.run_if_queued();
        Ok(stored.response.clone())
    }

    /// Forgets response `id`; the body OpenAI answers a deletion with.
    pub(crate) fn delete(&self, id: &str) -> Result<Value, ResponsesError> {
        let mut inner = lock(&self.inner);
        match inner.responses.remove(id) {
            Some(_) => Ok(json!({"id": id, "object": "response", "deleted": true})),
            None => Err(ResponsesError::NotFound(id.to_owned())),
        }
    }

    /// Cancels response `id`: a queued background response becomes `cancelled` (and cancelling it again is no
    /// error); any other is refused as OpenAI refuses it.
    pub(crate) fn cancel(&self, id: &str) -> Result<Value, ResponsesError> {
        let mut inner = lock(&self.inner);
        let stored = inner
            .responses
            .get_mut(id)
            .ok_or_else(|| ResponsesError::NotFound(id.to_owned()))?;
        if !stored.background {
            return Err(ResponsesError::NotCancellable(
                "Cannot cancel a synchronous response.".into(),
            ));
        }
        match stored.response.get("status").and_then(Value::as_str) {
            Some("queued") => {
                stored.pending = None;
                stored.response["status"] = json!("cancelled");
                Ok(stored.response.clone())
            }
            Some("cancelled") => Ok(stored.response.clone()),
            _ => Err(ResponsesError::NotCancellable(
                "Cannot cancel a completed response.".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(n: usize) -> Stored {
        Stored {
            response: json!({"n": n, "status": "completed"}),
            context: vec![json!(n)],
            background: false,
            pending: None,
        }
    }

    #[test]
    fn ids_look_like_openais_and_differ_between_stores() {
        let (one, two) = (ResponseStore::default(), ResponseStore::default());
        let id = one.next_id();
        assert!(id.starts_with("resp_") && id.len() == "resp_".len() + 48, "{id}");
        assert_ne!(id, one.next_id());
        assert_ne!(id, two.next_id(), "the first id of two stores");
    }

    #[test]
    fn a_kept_response_is_continued_and_read() {
        let store = ResponseStore::default();
        store.keep("resp_a".into(), stored(1));
        assert_eq!(store.history(Some("resp_a"), None), Ok(vec![json!(1)]));
        assert_eq!(store.get("resp_a"), Ok(json!({"n": 1, "status": "completed"})));
        assert_eq!(
            store.history(Some("resp_b"), None),
            Err(ResponsesError::PreviousResponseNotFound("resp_b".into()))
        );
        assert_eq!(
            store.delete("resp_a"),
            Ok(json!({"id": "resp_a", "object": "response", "deleted": true}))
        );
        assert_eq!(
            store.get("resp_a"),
            Err(ResponsesError::NotFound("resp_a".into()))
        );
        assert_eq!(
            store.delete("resp_a"),
            Err(ResponsesError::NotFound("resp_a".into()))
        );
    }

    #[test]
    fn conversations_are_created_on_first_use_and_grow() {
        let store = ResponseStore::default();
        assert_eq!(store.history(None, Some("conv_1")), Ok(vec![]));
        store.extend_conversation("conv_1", [json!(1), json!(2)]);
        store.extend_conversation("conv_1", [json!(3)]);
        assert_eq!(
            store.history(None, Some("conv_1")),
            Ok(vec![json!(1), json!(2), json!(3)])
        );
        assert_eq!(store.history(None, None), Ok(vec![]));
    }

    #[test]
    fn only_the_newest_are_kept() {
        let store = ResponseStore::default();
        for n in 0..=MAX_STORED {
            store.keep(format!("resp_{n}"), stored(n));
        }
        assert!(store.get("resp_0").is_err(), "the oldest is forgotten");
        assert!(store.get("resp_1").is_ok());
        assert!(store.get(&format!("resp_{MAX_STORED}")).is_ok());
        // Deleting and keeping forever leaves the order bounded.
        for n in 0..3 * MAX_STORED {
            let id = format!("gone_{n}");
            store.keep(id.clone(), stored(n));
            store.delete(&id).expect("kept");
        }
        assert!(lock(&store.inner).order.len() <= 2 * MAX_STORED + 1);
    }

    #[test]
    fn a_background_response_is_queued_until_looked_at_and_cancellable_while_queued() {
        let store = ResponseStore::default();
        let queued = Stored {
            response: json!({"status": "queued"}),
            context: vec![json!("asked")],
            background: true,
            pending: Some((
                json!({"status": "completed"}),
                vec![json!("asked"), json!("answered")],
            )),
        };
        store.keep("resp_q".into(), queued.clone());
        assert_eq!(store.get("resp_q"), Ok(json!({"status": "completed"})));
        assert_eq!(
            store.cancel("resp_q"),
            Err(ResponsesError::NotCancellable(
                "Cannot cancel a completed response.".into()
            ))
        );
        store.keep("resp_c".into(), queued.clone());
        assert_eq!(store.cancel("resp_c"), Ok(json!({"status": "cancelled"})));
        assert_eq!(
            store.cancel("resp_c"),
            Ok(json!({"status": "cancelled"})),
            "again: no error"
        );
        assert_eq!(store.history(Some("resp_c"), None), Ok(vec![json!("asked")]));
        store.keep("resp_p".into(), queued);
        assert_eq!(
            store.history(Some("resp_p"), None),
            Ok(vec![json!("asked"), json!("answered")]),
            "continuing a queued response runs it"
        );
        store.keep("resp_s".into(), stored(1));
        assert_eq!(
            store.cancel("resp_s"),
            Err(ResponsesError::NotCancellable(
                "Cannot cancel a synchronous response.".into()
            ))
        );
        assert_eq!(
            store.cancel("resp_x"),
            Err(ResponsesError::NotFound("resp_x".into()))
        );
    }
}
