//! The `[model]` section of a configuration file: which model, where, with
//! which key. Shared by the live loop (`sessionlog run`/`chat`) and the
//! model summariser (`--summarizer model`).

use serde::{Deserialize, Serialize};

use crate::{Api, ClientOptions, Model};

/// The `[model]` table of a TOML configuration.
///
/// ```toml
/// [model]
/// api = "openai-completions"       # or "anthropic-messages"
/// base_url = "http://127.0.0.1:8080/v1"
/// model = "some-model"
/// api_key_env = "OPENAI_API_KEY"   # optional; none is needed for loopback
/// context_window = 128000
/// max_tokens = 4096
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Pi's API name: `openai-completions` or `anthropic-messages`.
    pub api: String,
    /// The endpoint's base URL.
    pub base_url: String,
    /// The model id sent to the server.
    pub model: String,
    /// The provider name recorded in assistant messages (default: `openai`
    /// or `anthropic` after the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The environment variable holding the API key (none read when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The context window in tokens (default 128 000, Pi's for an unknown model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The output limit in tokens (default 16 384, Pi's for an unknown model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The model thinks (reasoning effort, thinking budgets).
    #[serde(default)]
    pub reasoning: bool,
}

/// A `[model]` section that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelConfigError {
    /// `api` names no API we speak.
    #[error("unknown model api `{0}` (expected openai-completions or anthropic-messages)")]
    UnknownApi(String),
    /// `api_key_env` names a variable that is not set.
    #[error("the API key variable `{0}` is not set")]
    MissingKey(String),
}

impl ModelConfig {
    /// The [`Model`] this section describes, with Pi's defaults for the rest.
    pub fn model(&self) -> Result<Model, ModelConfigError> {
        let api = Api::from_name(&self.api).ok_or_else(|| ModelConfigError::UnknownApi(self.api.clone()))?;
        let provider = self.provider.clone().unwrap_or_else(|| {
            match api {
                Api::OpenAiCompletions => "openai",
                Api::AnthropicMessages => "anthropic",
            }
            .to_owned()
        });
        let mut model = Model::new(api, &provider, &self.model, &self.base_url);
        if let Some(window) = self.context_window {
            model.context_window = window;
        }
        if let Some(max) = self.max_tokens {
            model.max_tokens = max;
        }
        model.reasoning = self.reasoning;
        Ok(model)
    }

    /// Client options with the key read from `api_key_env` through `lookup`
    /// (`std::env::var` in a program; a map in a test).
    pub fn client_options(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<ClientOptions, ModelConfigError> {
        let api_key = match &self.api_key_env {
            None => None,
            Some(var) => Some(lookup(var).ok_or_else(|| ModelConfigError::MissingKey(var.clone()))?),
        };
        Ok(ClientOptions { api_key, ..ClientOptions::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> Result<ModelConfig, serde_json::Error> {
        // The same derive reads TOML; JSON keeps this crate free of a TOML parser.
        serde_json::from_str(text)
    }

    #[test]
    fn defaults_follow_the_api_and_pi() {
        let c =
            section(r#"{"api":"anthropic-messages","base_url":"http://127.0.0.1:1/","model":"m"}"#).unwrap();
        let m = c.model().unwrap();
        assert_eq!(m.api, Api::AnthropicMessages);
        assert_eq!(m.provider, "anthropic");
        assert_eq!(m.base_url, "http://127.0.0.1:1");
        assert_eq!((m.context_window, m.max_tokens), (128_000, 16_384));
        assert_eq!(c.client_options(|_| None).unwrap().api_key, None);
    }

    #[test]
    fn bad_sections_are_refused_with_the_reason() {
        let c = section(r#"{"api":"gemini","base_url":"x","model":"m"}"#).unwrap();
        assert_eq!(c.model().unwrap_err(), ModelConfigError::UnknownApi("gemini".into()));
        let c =
            section(r#"{"api":"openai-completions","base_url":"x","model":"m","api_key_env":"K"}"#).unwrap();
        assert_eq!(c.client_options(|_| None).unwrap_err(), ModelConfigError::MissingKey("K".into()));
        assert_eq!(c.client_options(|_| Some("s".into())).unwrap().api_key.as_deref(), Some("s"));
        assert!(section(r#"{"api":"x","base_url":"x","model":"m","typo":1}"#).is_err());
    }
}
