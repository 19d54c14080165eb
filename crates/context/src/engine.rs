//! Context engines: the pluggable step between the log and the provider
//! (spec context-engine §4), a registry with owners, and the built-ins.
//!
//! * [`ContextEngine`] — bootstrap, ingest, assemble with a token budget,
//!   compact, after-turn, dispose; `owns_compaction` in [`EngineInfo`].
//! * [`Legacy`] — passes the projection through; compaction is delegated to a
//!   [`Compactor`] (the compaction crate provides one; this crate cannot
//!   depend on it, so the dependency is inverted).
//! * [`Pinned`] — keeps a pinned layer (rules, memory) outside the
//!   summarisable history and fits the history to the budget, newest first,
//!   never splitting a tool call from its results.
//! * [`Registry`] — ids with owners: `core` ids are protected, a second
//!   registration reports the existing owner, resolution defaults to `legacy`
//!   and names the unknown id with the registered ones.
//! * [`SessionKeyAdapter`] — the session-key compatibility behaviour as an
//!   explicit adapter for engines that declare they take no session key.
//! * [`Guarded`] — OpenClaw's later quarantine: a failing non-default engine
//!   is set aside for the process and `legacy` takes over
//!   ([`Registry::resolve_guarded`]).

use std::collections::BTreeMap;

use serde_json::Value;
use sessionlog_tokens::TokenCounter;

/// What an engine says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInfo {
    /// Registry id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Version.
    pub version: String,
    /// The engine compacts by itself (Pi's auto-compaction is then off).
    pub owns_compaction: bool,
    /// The engine's parameters accept a `session_key` (false for engines
    /// written before session keys existed; see [`SessionKeyAdapter`]).
    pub accepts_session_key: bool,
}

/// Which session a call is about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionRef {
    /// The session id.
    pub session_id: String,
    /// The session key, when the host has one.
    pub session_key: Option<String>,
}

/// A request to assemble the provider context.
#[derive(Debug, Clone, PartialEq)]
pub struct AssembleRequest {
    /// The session.
    pub session: SessionRef,
    /// Provider-facing messages from the projection (`convertToLlm` output).
    pub messages: Vec<Value>,
    /// The context window the host resolved, in tokens.
    pub token_budget: Option<u64>,
}

/// What `assemble` returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    /// The messages to send.
    pub messages: Vec<Value>,
    /// The engine's estimate of their size (0 = the caller estimates).
    pub estimated_tokens: u64,
    /// Text prepended to the system prompt.
    pub system_prompt_addition: Option<String>,
}

/// A request to compact.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompactRequest {
    /// The session.
    pub session: SessionRef,
    /// The context window, in tokens.
    pub token_budget: Option<u64>,
    /// Compact even below the threshold (manual `/compact`, overflow).
    pub force: bool,
    /// The context size the host observed.
    pub current_token_count: Option<u64>,
    /// Text after `/compact`.
    pub custom_instructions: Option<String>,
}

/// What `compact` returns.
#[derive(Debug, Clone, PartialEq)]
pub enum CompactResult {
    /// Nothing was written.
    NotCompacted {
        /// Why (e.g. `below_threshold`, `already_compacted`).
        reason: String,
    },
    /// A compaction entry was produced.
    Compacted {
        /// The summary.
        summary: String,
        /// First entry kept verbatim.
        first_kept_entry_id: String,
        /// Tokens before.
        tokens_before: u64,
        /// Tokens after, when known.
        tokens_after: Option<u64>,
        /// The entry's `details`.
        details: Value,
    },
}

/// Errors an engine reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The engine failed.
    #[error("context engine {engine}: {reason}")]
    Failed {
        /// The engine id.
        engine: String,
        /// What went wrong.
        reason: String,
    },
}

/// The compaction a legacy-style engine delegates to.
pub trait Compactor {
    /// Compacts the session.
    fn compact(&mut self, request: &CompactRequest) -> Result<CompactResult, EngineError>;
}

/// A context engine (spec context-engine §4.1).
pub trait ContextEngine {
    /// What the engine is.
    fn info(&self) -> EngineInfo;

    /// Imports an existing session; `Ok(false)` when there was nothing to do.
    fn bootstrap(&mut self, _session: &SessionRef) -> Result<bool, EngineError> {
        Ok(false)
    }

    /// Takes one new message; `Ok(false)` for a duplicate or a no-op.
    fn ingest(&mut self, session: &SessionRef, message: &Value) -> Result<bool, EngineError>;

    /// Builds the messages for the next model call.
    fn assemble(&mut self, request: AssembleRequest) -> Result<Assembled, EngineError>;

    /// Compacts (manual, overflow recovery, or its own decision).
    fn compact(
        &mut self,
        request: &CompactRequest,
        compactor: &mut dyn Compactor,
    ) -> Result<CompactResult, EngineError>;

    /// Runs after a turn with the full message snapshot.
    fn after_turn(&mut self, _session: &SessionRef, _messages: &[Value]) -> Result<(), EngineError> {
        Ok(())
    }

    /// Releases resources.
    fn dispose(&mut self) {}
}

/// The built-in engine: the projection passes through unchanged, compaction
/// is the compaction pipeline (spec context-engine §4.6).
#[derive(Debug, Clone, Copy, Default)]
pub struct Legacy;

impl ContextEngine for Legacy {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            id: "legacy".to_owned(),
            name: "Legacy Context Engine".to_owned(),
            version: "1.0.0".to_owned(),
            owns_compaction: false,
            accepts_session_key: true,
        }
    }

    fn ingest(&mut self, _session: &SessionRef, _message: &Value) -> Result<bool, EngineError> {
        // The session log persists messages; the engine keeps nothing.
        Ok(false)
    }

    fn assemble(&mut self, request: AssembleRequest) -> Result<Assembled, EngineError> {
        Ok(Assembled { messages: request.messages, estimated_tokens: 0, system_prompt_addition: None })
    }

    fn compact(
        &mut self,
        request: &CompactRequest,
        compactor: &mut dyn Compactor,
    ) -> Result<CompactResult, EngineError> {
        compactor.compact(request)
    }
}

/// Tokens of a provider message as Pi's estimator would count it.
pub fn message_tokens(message: &Value, counter: &dyn TokenCounter) -> u64 {
    use serde::Deserialize;
    sessionlog_events::Message::deserialize(message).map_or(0, |m| counter.message_tokens(&m))
}

/// An engine with a pinned layer: texts (rules files, memory) that always
/// reach the model as a system-prompt addition and are never part of the
/// summarisable history; the history is fitted to the budget from the newest
/// message back, keeping tool calls with their results.
pub struct Pinned {
    pinned: Vec<String>,
    counter: &'static dyn TokenCounter,
}

impl Pinned {
    /// An engine pinning `texts`, counting with `counter`.
    pub fn new(texts: Vec<String>, counter: &'static dyn TokenCounter) -> Pinned {
        Pinned { pinned: texts, counter }
    }
}

impl ContextEngine for Pinned {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            id: "pinned".to_owned(),
            name: "Pinned-layer Context Engine".to_owned(),
            ..Legacy.info()
        }
    }

    fn ingest(&mut self, session: &SessionRef, message: &Value) -> Result<bool, EngineError> {
        Legacy.ingest(session, message)
    }

    fn assemble(&mut self, request: AssembleRequest) -> Result<Assembled, EngineError> {
        let addition = (!self.pinned.is_empty()).then(|| self.pinned.join("\n\n"));
        let pinned_tokens = addition.as_ref().map_or(0, |a| (sessionlog_tokens::utf16_len(a)).div_ceil(4));
        let budget = request.token_budget.map(|b| b.saturating_sub(pinned_tokens));
        let groups = group_provider_messages(&request.messages);
        let mut kept: Vec<&[Value]> = Vec::new();
        let mut total = 0u64;
        for group in groups.iter().rev() {
            let t: u64 = group.iter().map(|m| message_tokens(m, self.counter)).sum();
            if budget.is_some_and(|b| total + t > b) && !kept.is_empty() {
                break;
            }
            total += t;
            kept.push(group);
        }
        let messages: Vec<Value> = kept.into_iter().rev().flat_map(|g| g.iter().cloned()).collect();
        Ok(Assembled { messages, estimated_tokens: total + pinned_tokens, system_prompt_addition: addition })
    }

    fn compact(
        &mut self,
        request: &CompactRequest,
        compactor: &mut dyn Compactor,
    ) -> Result<CompactResult, EngineError> {
        Legacy.compact(request, compactor)
    }
}

/// Provider messages grouped so an assistant's tool calls stay with the
/// results that follow it.
pub fn group_provider_messages(messages: &[Value]) -> Vec<&[Value]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let mut end = i + 1;
        if messages[i].get("role").and_then(Value::as_str) == Some("assistant") {
            while end < messages.len()
                && messages[end].get("role").and_then(Value::as_str) == Some("toolResult")
            {
                end += 1;
            }
        }
        out.push(&messages[i..end]);
        i = end;
    }
    out
}

/// Wraps an engine that takes no session key: every call reaches it without
/// one (spec context-engine §4.5, as a declared capability instead of a
/// retry after a validation error).
pub struct SessionKeyAdapter<E> {
    inner: E,
}

impl<E: ContextEngine> SessionKeyAdapter<E> {
    /// Wraps `inner`.
    pub fn new(inner: E) -> Self {
        SessionKeyAdapter { inner }
    }

    fn strip(&self, session: &SessionRef) -> SessionRef {
        if self.inner.info().accepts_session_key {
            session.clone()
        } else {
            SessionRef { session_id: session.session_id.clone(), session_key: None }
        }
    }
}

impl<E: ContextEngine> ContextEngine for SessionKeyAdapter<E> {
    fn info(&self) -> EngineInfo {
        self.inner.info()
    }
    fn bootstrap(&mut self, session: &SessionRef) -> Result<bool, EngineError> {
        let s = self.strip(session);
        self.inner.bootstrap(&s)
    }
    fn ingest(&mut self, session: &SessionRef, message: &Value) -> Result<bool, EngineError> {
        let s = self.strip(session);
        self.inner.ingest(&s, message)
    }
    fn assemble(&mut self, mut request: AssembleRequest) -> Result<Assembled, EngineError> {
        request.session = self.strip(&request.session);
        self.inner.assemble(request)
    }
    fn compact(
        &mut self,
        request: &CompactRequest,
        compactor: &mut dyn Compactor,
    ) -> Result<CompactResult, EngineError> {
        let mut request = request.clone();
        request.session = self.strip(&request.session);
        self.inner.compact(&request, compactor)
    }
    fn after_turn(&mut self, session: &SessionRef, messages: &[Value]) -> Result<(), EngineError> {
        let s = self.strip(session);
        self.inner.after_turn(&s, messages)
    }
    fn dispose(&mut self) {
        self.inner.dispose();
    }
}

impl ContextEngine for Box<dyn ContextEngine> {
    fn info(&self) -> EngineInfo {
        (**self).info()
    }
    fn bootstrap(&mut self, session: &SessionRef) -> Result<bool, EngineError> {
        (**self).bootstrap(session)
    }
    fn ingest(&mut self, session: &SessionRef, message: &Value) -> Result<bool, EngineError> {
        (**self).ingest(session, message)
    }
    fn assemble(&mut self, request: AssembleRequest) -> Result<Assembled, EngineError> {
        (**self).assemble(request)
    }
    fn compact(
        &mut self,
        request: &CompactRequest,
        compactor: &mut dyn Compactor,
    ) -> Result<CompactResult, EngineError> {
        (**self).compact(request, compactor)
    }
    fn after_turn(&mut self, session: &SessionRef, messages: &[Value]) -> Result<(), EngineError> {
        (**self).after_turn(session, messages)
    }
    fn dispose(&mut self) {
        (**self).dispose();
    }
}

/// Builds an engine.
pub type Factory = Box<dyn Fn() -> Box<dyn ContextEngine> + Send + Sync>;

/// The owner of the built-in ids.
pub const CORE_OWNER: &str = "core";
/// The owner of registrations through the public path.
pub const PUBLIC_OWNER: &str = "public-sdk";
/// The default slot.
pub const DEFAULT_ENGINE: &str = "legacy";

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The owner is empty.
    #[error("a context engine needs a non-empty owner")]
    EmptyOwner,
    /// Only `core` may register the default slot.
    #[error("`{DEFAULT_ENGINE}` is reserved for the core")]
    DefaultReserved,
    /// Another owner holds the id (or the same owner without refresh).
    #[error("context engine `{id}` is already registered by `{existing_owner}`")]
    Taken {
        /// The id.
        id: String,
        /// Who holds it.
        existing_owner: String,
    },
}

/// An engine id the registry does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown context engine `{id}` (registered: {})", registered.join(", "))]
pub struct UnknownEngine {
    /// The id asked for.
    pub id: String,
    /// The ids registered.
    pub registered: Vec<String>,
}

/// Engine ids with their owners and factories, and the engines quarantined
/// in this process.
#[derive(Default)]
pub struct Registry {
    engines: BTreeMap<String, (String, Factory)>,
    quarantine: Quarantine,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A registry with `legacy` (owner `core`).
    pub fn with_builtins() -> Registry {
        let mut r = Registry::new();
        // The core owns the default slot: this registration cannot fail.
        let _ = r.register_for_owner(DEFAULT_ENGINE, Box::new(|| Box::new(Legacy)), CORE_OWNER, false);
        r
    }

    /// The built-ins plus `pinned` (owner `core`), keeping `texts` outside
    /// the history and counting with `counter`.
    pub fn with_pinned(texts: Vec<String>, counter: &'static dyn TokenCounter) -> Registry {
        let mut r = Registry::with_builtins();
        // A core id not registered yet: this registration cannot fail.
        let _ = r.register_for_owner(
            "pinned",
            Box::new(move || Box::new(Pinned::new(texts.clone(), counter))),
            CORE_OWNER,
            false,
        );
        r
    }

    /// Registers `id` for `owner` (spec context-engine §4.4).
    pub fn register_for_owner(
        &mut self,
        id: &str,
        factory: Factory,
        owner: &str,
        allow_same_owner_refresh: bool,
    ) -> Result<(), RegisterError> {
        if owner.trim().is_empty() {
            return Err(RegisterError::EmptyOwner);
        }
        if id == DEFAULT_ENGINE && owner != CORE_OWNER {
            return Err(RegisterError::DefaultReserved);
        }
        if let Some((existing, _)) = self.engines.get(id) {
            if existing != owner || !allow_same_owner_refresh {
                return Err(RegisterError::Taken { id: id.to_owned(), existing_owner: existing.clone() });
            }
        }
        self.engines.insert(id.to_owned(), (owner.to_owned(), factory));
        Ok(())
    }

    /// The public registration path: owner `public-sdk`, no refresh.
    pub fn register(&mut self, id: &str, factory: Factory) -> Result<(), RegisterError> {
        self.register_for_owner(id, factory, PUBLIC_OWNER, false)
    }

    /// The owner of `id`, if registered.
    pub fn owner(&self, id: &str) -> Option<&str> {
        self.engines.get(id).map(|(o, _)| o.as_str())
    }

    /// Registered ids, sorted.
    pub fn ids(&self) -> Vec<String> {
        self.engines.keys().cloned().collect()
    }

    /// Engines quarantined so far, with the reason, by id.
    pub fn quarantined(&self) -> BTreeMap<String, String> {
        self.quarantine.snapshot()
    }

    /// The engine for a configured id with OpenClaw's later quarantine rule: a
    /// non-default engine that is missing, fails the contract check (empty id
    /// or name), or fails or panics in its factory or a lifecycle method is
    /// quarantined for the rest of the process and the work goes to `legacy`
    /// ([`Guarded`]); compaction errors are returned, never quarantined.
    pub fn resolve_guarded(&self, configured: Option<&str>) -> SessionKeyAdapter<Box<dyn ContextEngine>> {
        let id = configured.map(str::trim).filter(|s| !s.is_empty()).unwrap_or(DEFAULT_ENGINE);
        let legacy = || -> Box<dyn ContextEngine> {
            match self.engines.get(DEFAULT_ENGINE) {
                Some((_, factory)) => factory(),
                None => Box::new(Legacy),
            }
        };
        if id == DEFAULT_ENGINE {
            return SessionKeyAdapter::new(legacy());
        }
        let primary = if self.quarantine.contains(id) {
            None
        } else {
            match self.engines.get(id) {
                None => {
                    self.quarantine.add(id, "not registered");
                    None
                }
                Some((_, factory)) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(factory)) {
                    Err(_) => {
                        self.quarantine.add(id, "its factory panicked");
                        None
                    }
                    Ok(engine) => {
                        let info = engine.info();
                        if info.id.trim().is_empty() || info.name.trim().is_empty() {
                            self.quarantine.add(id, "fails the contract check (empty id or name)");
                            None
                        } else {
                            Some(engine)
                        }
                    }
                },
            }
        };
        let guarded =
            Guarded { id: id.to_owned(), primary, fallback: legacy(), quarantine: self.quarantine.clone() };
        SessionKeyAdapter::new(Box::new(guarded))
    }

    /// The engine for a configured id (trimmed; empty or none = `legacy`),
    /// wrapped in the [`SessionKeyAdapter`].
    pub fn resolve(
        &self,
        configured: Option<&str>,
    ) -> Result<SessionKeyAdapter<Box<dyn ContextEngine>>, UnknownEngine> {
        let id = configured.map(str::trim).filter(|s| !s.is_empty()).unwrap_or(DEFAULT_ENGINE);
        match self.engines.get(id) {
            Some((_, factory)) => Ok(SessionKeyAdapter::new(factory())),
            None => Err(UnknownEngine { id: id.to_owned(), registered: self.ids() }),
        }
    }
}

/// The engines quarantined in a process, shared by a registry and the
/// engines it handed out.
#[derive(Debug, Clone, Default)]
pub struct Quarantine(std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>);

impl Quarantine {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        // A panic while the record was held leaves it usable: it is a plain map.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn add(&self, id: &str, reason: &str) {
        self.lock().entry(id.to_owned()).or_insert_with(|| reason.to_owned());
    }

    fn contains(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    fn snapshot(&self) -> BTreeMap<String, String> {
        self.lock().clone()
    }
}

/// A non-default engine with `legacy` behind it: the first failure (or
/// panic) of `bootstrap`, `ingest`, `assemble` or `after_turn` quarantines it,
/// and that call and every later one go to the fallback. `compact` errors
/// are returned as they are (spec context-engine §4.4, later behaviour).
pub struct Guarded {
    id: String,
    primary: Option<Box<dyn ContextEngine>>,
    fallback: Box<dyn ContextEngine>,
    quarantine: Quarantine,
}

impl Guarded {
    /// Runs `call` on the primary engine; on an error or a panic the engine
    /// is quarantined and `None` returned, so the caller uses the fallback.
    fn try_primary<T>(
        &mut self,
        call: impl FnOnce(&mut dyn ContextEngine) -> Result<T, EngineError>,
    ) -> Option<T> {
        if self.quarantine.contains(&self.id) {
            self.primary = None;
        }
        let engine = self.primary.as_mut()?;
        let reason = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(engine.as_mut()))) {
            Ok(Ok(value)) => return Some(value),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "panicked".to_owned(),
        };
        self.quarantine.add(&self.id, &reason);
        if let Some(mut engine) = self.primary.take() {
            // Released as well as it can be; a second failure changes nothing.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.dispose()));
        }
        None
    }
}

impl ContextEngine for Guarded {
    fn info(&self) -> EngineInfo {
        match &self.primary {
            Some(engine) => engine.info(),
            None => self.fallback.info(),
        }
    }
    fn bootstrap(&mut self, session: &SessionRef) -> Result<bool, EngineError> {
        match self.try_primary(|e| e.bootstrap(session)) {
            Some(done) => Ok(done),
            None => self.fallback.bootstrap(session),
        }
    }
    fn ingest(&mut self, session: &SessionRef, message: &Value) -> Result<bool, EngineError> {
        match self.try_primary(|e| e.ingest(session, message)) {
            Some(done) => Ok(done),
            None => self.fallback.ingest(session, message),
        }
    }
    fn assemble(&mut self, request: AssembleRequest) -> Result<Assembled, EngineError> {
        let again = request.clone();
        match self.try_primary(|e| e.assemble(request)) {
            Some(assembled) => Ok(assembled),
            None => self.fallback.assemble(again),
        }
    }
    fn compact(
        &mut self,
        request: &CompactRequest,
        compactor: &mut dyn Compactor,
    ) -> Result<CompactResult, EngineError> {
        match self.primary.as_mut() {
            Some(engine) => engine.compact(request, compactor),
            None => self.fallback.compact(request, compactor),
        }
    }
    fn after_turn(&mut self, session: &SessionRef, messages: &[Value]) -> Result<(), EngineError> {
        match self.try_primary(|e| e.after_turn(session, messages)) {
            Some(()) => Ok(()),
            None => self.fallback.after_turn(session, messages),
        }
    }
    fn dispose(&mut self) {
        if let Some(engine) = self.primary.as_mut() {
            engine.dispose();
        }
        self.fallback.dispose();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn factory() -> Factory {
        Box::new(|| Box::new(Legacy))
    }

    #[test]
    fn a_provider_message_counts_as_its_transcript_entry_does() {
        let counter: &dyn TokenCounter = &sessionlog_tokens::PiEstimator;
        let messages = [
            json!({"role": "user", "content": "hello there", "timestamp": 1}),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "reading"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/main.rs", "limit": 40}}
            ], "usage": {"input": 10, "output": 5}}),
            json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read",
                   "content": [{"type": "text", "text": "fn main() {}"}], "isError": false}),
        ];
        for message in &messages {
            let line =
                json!({"type": "message", "id": "a", "parentId": null, "message": message}).to_string();
            let entry = sessionlog_events::Entry::parse(&line).unwrap();
            let expected = counter.message_tokens(entry.message().unwrap());
            assert!(expected > 0, "{message}");
            assert_eq!(message_tokens(message, counter), expected, "{message}");
        }
    }

    #[test]
    fn the_core_owns_the_default_slot() {
        let mut r = Registry::with_builtins();
        assert_eq!(r.owner("legacy"), Some(CORE_OWNER));
        assert_eq!(r.register("legacy", factory()), Err(RegisterError::DefaultReserved));
        assert_eq!(
            r.register_for_owner("legacy", factory(), "plugin:x", true),
            Err(RegisterError::DefaultReserved)
        );
        assert_eq!(r.register_for_owner("x", factory(), " ", false), Err(RegisterError::EmptyOwner));
    }

    #[test]
    fn a_second_registration_reports_the_existing_owner() {
        let mut r = Registry::with_builtins();
        r.register("lossless", factory()).unwrap();
        assert_eq!(
            r.register_for_owner("lossless", factory(), "plugin:other", false),
            Err(RegisterError::Taken { id: "lossless".into(), existing_owner: PUBLIC_OWNER.into() })
        );
        // The public path cannot refresh its own id either; an owner with the flag can.
        assert!(r.register("lossless", factory()).is_err());
        r.register_for_owner("mine", factory(), "plugin:me", false).unwrap();
        assert!(r.register_for_owner("mine", factory(), "plugin:me", false).is_err());
        r.register_for_owner("mine", factory(), "plugin:me", true).unwrap();
    }

    #[test]
    fn resolution_defaults_to_legacy_and_names_unknown_ids() {
        let r = Registry::with_builtins();
        assert_eq!(r.resolve(None).map(|e| e.info().id).ok(), Some("legacy".to_owned()));
        assert_eq!(r.resolve(Some("  ")).map(|e| e.info().id).ok(), Some("legacy".to_owned()));
        let err = r.resolve(Some("lossless-claw")).err().unwrap();
        assert_eq!(err.to_string(), "unknown context engine `lossless-claw` (registered: legacy)");
    }

    /// An engine written before session keys: it records what it received.
    struct Old {
        seen: std::rc::Rc<std::cell::RefCell<Vec<Option<String>>>>,
    }

    impl ContextEngine for Old {
        fn info(&self) -> EngineInfo {
            EngineInfo { accepts_session_key: false, id: "old".into(), ..Legacy.info() }
        }
        fn ingest(&mut self, s: &SessionRef, _: &Value) -> Result<bool, EngineError> {
            self.seen.borrow_mut().push(s.session_key.clone());
            Ok(true)
        }
        fn assemble(&mut self, r: AssembleRequest) -> Result<Assembled, EngineError> {
            self.seen.borrow_mut().push(r.session.session_key.clone());
            Legacy.assemble(r)
        }
        fn compact(
            &mut self,
            r: &CompactRequest,
            c: &mut dyn Compactor,
        ) -> Result<CompactResult, EngineError> {
            self.seen.borrow_mut().push(r.session.session_key.clone());
            c.compact(r)
        }
    }

    struct NoCompaction;
    impl Compactor for NoCompaction {
        fn compact(&mut self, _: &CompactRequest) -> Result<CompactResult, EngineError> {
            Ok(CompactResult::NotCompacted { reason: "below_threshold".into() })
        }
    }

    #[test]
    fn the_adapter_strips_the_session_key_for_engines_that_take_none() {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut e = SessionKeyAdapter::new(Old { seen: seen.clone() });
        let s = SessionRef { session_id: "s".into(), session_key: Some("agent:main:main".into()) };
        e.ingest(&s, &json!({})).unwrap();
        e.assemble(AssembleRequest { session: s.clone(), messages: vec![], token_budget: None }).unwrap();
        let r = e
            .compact(&CompactRequest { session: s.clone(), ..Default::default() }, &mut NoCompaction)
            .unwrap();
        assert_eq!(r, CompactResult::NotCompacted { reason: "below_threshold".into() });
        assert_eq!(*seen.borrow(), [None, None, None]);
        // Engines that accept keys get them.
        let mut legacy = SessionKeyAdapter::new(Legacy);
        let out = legacy.assemble(AssembleRequest {
            session: s,
            messages: vec![json!({"role":"user","content":"x"})],
            token_budget: None,
        });
        assert_eq!(out.unwrap().messages.len(), 1);
    }

    /// An engine that fails (or panics) in the call named by `fails`.
    struct Flaky {
        fails: &'static str,
        name: &'static str,
    }

    impl ContextEngine for Flaky {
        fn info(&self) -> EngineInfo {
            EngineInfo { id: "flaky".into(), name: self.name.into(), ..Legacy.info() }
        }
        fn ingest(&mut self, _: &SessionRef, _: &Value) -> Result<bool, EngineError> {
            if self.fails == "ingest-panics" {
                panic!("flaky ingest");
            }
            Ok(true)
        }
        fn assemble(&mut self, _: AssembleRequest) -> Result<Assembled, EngineError> {
            if self.fails == "assemble" {
                return Err(EngineError::Failed { engine: "flaky".into(), reason: "store offline".into() });
            }
            Ok(Assembled {
                messages: vec![],
                estimated_tokens: 7,
                system_prompt_addition: Some("flaky".into()),
            })
        }
        fn compact(
            &mut self,
            _: &CompactRequest,
            _: &mut dyn Compactor,
        ) -> Result<CompactResult, EngineError> {
            Err(EngineError::Failed { engine: "flaky".into(), reason: "cannot compact".into() })
        }
    }

    fn registry_with(fails: &'static str, name: &'static str) -> Registry {
        let mut r = Registry::with_builtins();
        r.register("flaky", Box::new(move || Box::new(Flaky { fails, name }))).unwrap();
        r
    }

    fn request() -> AssembleRequest {
        AssembleRequest {
            session: SessionRef::default(),
            messages: vec![json!({"role":"user","content":"hi"})],
            token_budget: None,
        }
    }

    #[test]
    fn a_failing_engine_is_quarantined_and_legacy_takes_over() {
        let r = registry_with("assemble", "Flaky");
        let mut e = r.resolve_guarded(Some("flaky"));
        assert_eq!(e.info().id, "flaky");
        // The failing call is answered by legacy: the messages pass through.
        let out = e.assemble(request()).unwrap();
        assert_eq!(out.messages, request().messages);
        assert_eq!(out.system_prompt_addition, None);
        assert_eq!(e.info().id, "legacy");
        let q = r.quarantined();
        assert_eq!(q.get("flaky").map(String::as_str), Some("context engine flaky: store offline"));
        // For the rest of the process the id resolves to legacy.
        assert_eq!(r.resolve_guarded(Some("flaky")).info().id, "legacy");
    }

    #[test]
    fn a_panicking_engine_is_quarantined_too() {
        let r = registry_with("ingest-panics", "Flaky");
        let mut e = r.resolve_guarded(Some("flaky"));
        assert!(e.ingest(&SessionRef::default(), &json!({})).is_ok());
        assert_eq!(r.quarantined().get("flaky").map(String::as_str), Some("panicked"));
        assert_eq!(e.info().id, "legacy");
    }

    #[test]
    fn compaction_errors_are_returned_not_quarantined() {
        let r = registry_with("nothing", "Flaky");
        let mut e = r.resolve_guarded(Some("flaky"));
        let out = e.assemble(request()).unwrap();
        assert_eq!(out.system_prompt_addition.as_deref(), Some("flaky"));
        let err = e.compact(&CompactRequest::default(), &mut NoCompaction).unwrap_err();
        assert!(err.to_string().contains("cannot compact"));
        assert!(r.quarantined().is_empty());
        assert_eq!(e.info().id, "flaky");
    }

    #[test]
    fn missing_and_nameless_engines_fall_back_at_resolution() {
        let r = registry_with("nothing", " ");
        assert_eq!(r.resolve_guarded(Some("flaky")).info().id, "legacy");
        assert_eq!(r.resolve_guarded(Some("gone")).info().id, "legacy");
        let q = r.quarantined();
        assert_eq!(q.get("gone").map(String::as_str), Some("not registered"));
        assert!(q.get("flaky").is_some_and(|why| why.contains("contract")));
        // The default never goes through the guard, and the baseline resolve still refuses unknown ids.
        assert_eq!(r.resolve_guarded(None).info().id, "legacy");
        assert!(r.resolve(Some("gone")).is_err());
    }

    #[test]
    fn the_pinned_engine_keeps_its_layer_and_fits_whole_tool_groups() {
        let counter = sessionlog_tokens::counter(sessionlog_tokens::Tokenizer::Pi).unwrap();
        let mut e = Pinned::new(vec!["Never push to main.".into()], counter);
        let big = "x".repeat(400); // 100 tokens
        let messages = vec![
            json!({"role":"user","content": big}),
            json!({"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}}]}),
            json!({"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text": big}]}),
            json!({"role":"user","content":"next"}),
        ];
        let out = e
            .assemble(AssembleRequest { session: SessionRef::default(), messages, token_budget: Some(120) })
            .unwrap();
        assert_eq!(out.system_prompt_addition.as_deref(), Some("Never push to main."));
        // Budget 120 - 5 pinned: "next" (1) fits, the call + result group (~105) fits, the first user does not.
        let roles: Vec<&str> = out.messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["assistant", "toolResult", "user"]);
        assert!(out.estimated_tokens <= 120);
    }
}
