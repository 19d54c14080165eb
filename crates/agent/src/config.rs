//! The configuration file of `sessionlog run` and `chat` (TOML):
//!
//! ```toml
//! state_dir = "state"          # OpenClaw-style: agents/<agent>/sessions/
//! agent = "main"               # default session key agent:<agent>:main
//! workspace = "."              # root for the tools
//! storage = "jsonl"            # or "sqlite": OpenClaw's agent database
//! user_timezone = "Europe/Berlin"  # the memory flush's date and clock (default: the host's zone)
//! time_format = "24"           # its clock: "12" (default) or "24"
//! [model]
//! api = "openai-completions"   # or "anthropic-messages"
//! base_url = "http://127.0.0.1:8080/v1"
//! model = "some-model"
//! api_key_env = "OPENAI_API_KEY"
//! context_window = 128000
//! max_tokens = 4096
//! [compaction]                 # the policy fields of replay/policies/*.toml, plus:
//! preset = "openclaw"
//! summarizer = "extractive"    # or "model"
//! [compaction.memoryFlush]     # OpenClaw 2026.9's keys
//! softThresholdTokens = 4000
//! forceFlushTranscriptBytes = "2mb"  # or a number of bytes; 0 = off
//! model = "openai/gpt-5-mini"  # read, not honoured: the flush runs on [model]
//! [memory]
//! enabled = true               # memory_search / memory_get (default off)
//! ```
//!
//! Relative paths are read from the configuration file's folder.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sessionlog_compaction::{Policy, PolicyOverrides};
use sessionlog_provider::ModelConfig;

use crate::storage::Storage;

/// Which summariser compactions use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummarizerChoice {
    /// The deterministic extractive summariser (no model).
    Extractive,
    /// The configured model.
    Model,
}

/// The `[compaction]` table: a preset, policy fields over it, the summariser.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionConfig {
    /// The preset's name (`openclaw`, `pi`, `claude-code`, `codex`).
    pub preset: String,
    /// The summariser.
    pub summarizer: SummarizerChoice,
    /// Policy fields set over the preset (camelCase, as in policy files).
    pub overrides: PolicyOverrides,
}

impl Default for CompactionConfig {
    fn default() -> CompactionConfig {
        CompactionConfig {
            preset: "openclaw".to_owned(),
            summarizer: SummarizerChoice::Extractive,
            overrides: PolicyOverrides::default(),
        }
    }
}

/// The `[memory]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Registers `memory_search` and `memory_get` (default off).
    #[serde(default)]
    pub enabled: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    state_dir: PathBuf,
    #[serde(default = "default_agent")]
    agent: String,
    #[serde(default = "default_workspace")]
    workspace: PathBuf,
    #[serde(default)]
    read_only_workspace: bool,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    max_tool_rounds: Option<usize>,
    #[serde(default)]
    bash_timeout_secs: Option<f64>,
    #[serde(default)]
    history_limit: Option<usize>,
    #[serde(default)]
    user_timezone: Option<String>,
    #[serde(default)]
    time_format: Option<String>,
    model: ModelConfig,
    #[serde(default)]
    compaction: Option<toml::Table>,
    #[serde(default)]
    memory: MemoryConfig,
    #[serde(default)]
    storage: Storage,
}

fn default_agent() -> String {
    "main".to_owned()
}

fn default_workspace() -> PathBuf {
    PathBuf::from(".")
}

/// A configuration file, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The state folder (`agents/<agent>/sessions/` inside).
    pub state_dir: PathBuf,
    /// The agent id.
    pub agent: String,
    /// The folder the tools are confined to.
    pub workspace: PathBuf,
    /// The workspace may not be written (the memory flush is skipped).
    pub read_only_workspace: bool,
    /// The system prompt sent with every call.
    pub system_prompt: Option<String>,
    /// Model calls per turn at most (tool rounds); default 50.
    pub max_tool_rounds: usize,
    /// `bash`'s timeout when a call names none (seconds; default 600).
    pub bash_timeout_secs: Option<f64>,
    /// Keep only the last N user turns in each request (OpenClaw's `historyLimit`).
    pub history_limit: Option<usize>,
    /// The user's time zone (IANA name; default: the host's): the memory
    /// flush's date and current-time line.
    pub user_timezone: Option<String>,
    /// `time_format = "24"`: that line on a 24-hour clock (default 12-hour).
    pub time_format_24h: bool,
    /// The `[model]` section.
    pub model: ModelConfig,
    /// The `[compaction]` section.
    pub compaction: CompactionConfig,
    /// The `[memory]` section.
    pub memory: MemoryConfig,
    /// Where sessions are kept (`storage`, default `jsonl`).
    pub storage: Storage,
}

/// A configuration that cannot be used: the file and why.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub reason: String,
}

impl Config {
    /// Reads the configuration at `path`.
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let err = |reason: String| ConfigError { path: path.to_owned(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let base = path.parent().map(Path::to_owned).unwrap_or_default();
        Config::parse(&text, &base).map_err(err)
    }

    /// Parses configuration text; relative paths are taken from `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Config, String> {
        let raw: Raw = toml::from_str(text).map_err(|e| e.to_string())?;
        raw.model.model().map_err(|e| format!("[model]: {e}"))?;
        let time_format_24h = match raw.time_format.as_deref() {
            None | Some("12") => false,
            Some("24") => true,
            Some(other) => return Err(format!("time_format `{other}`: \"12\" or \"24\"")),
        };
        if raw.user_timezone.is_some() {
            crate::flush::UserTime::resolve(raw.user_timezone.as_deref(), time_format_24h)
                .map_err(|e| format!("user_timezone: {e}"))?;
        }
        let mut compaction = CompactionConfig::default();
        if let Some(mut table) = raw.compaction {
            if let Some(preset) = table.remove("preset") {
                let name = preset.as_str().ok_or("[compaction] preset must be a string")?;
                if Policy::preset(name).is_none() {
                    return Err(format!(
                        "[compaction] unknown preset `{name}` (known: {})",
                        sessionlog_compaction::PRESETS.join(", ")
                    ));
                }
                compaction.preset = name.to_owned();
            }
            if let Some(s) = table.remove("summarizer") {
                compaction.summarizer = match s.as_str() {
                    Some("extractive") => SummarizerChoice::Extractive,
                    Some("model") => SummarizerChoice::Model,
                    _ => return Err(format!("[compaction] unknown summarizer {s} (extractive, model)")),
                };
            }
            compaction.overrides = table.try_into().map_err(|e| format!("[compaction]: {e}"))?;
        }
        Ok(Config {
            state_dir: base.join(raw.state_dir),
            agent: raw.agent,
            workspace: base.join(raw.workspace),
            read_only_workspace: raw.read_only_workspace,
            system_prompt: raw.system_prompt,
            max_tool_rounds: raw.max_tool_rounds.unwrap_or(50).max(1),
            bash_timeout_secs: raw.bash_timeout_secs.or(Some(600.0)),
            history_limit: raw.history_limit,
            user_timezone: raw.user_timezone,
            time_format_24h,
            model: raw.model,
            compaction,
            memory: raw.memory,
            storage: raw.storage,
        })
    }

    /// The compaction policy: the preset, the model's window unless the
    /// table sets one, then the table's fields.
    pub fn policy(&self) -> Policy {
        let mut base = Policy::preset(&self.compaction.preset).unwrap_or_else(Policy::openclaw);
        if let Ok(model) = self.model.model() {
            base.context_window = model.context_window;
        }
        self.compaction.overrides.apply(base)
    }

    /// The flush turn's own model (`[compaction.memoryFlush] model`), if set.
    pub fn flush_model(&self) -> Option<&str> {
        self.compaction
            .overrides
            .memory_flush
            .as_ref()?
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
    }

    /// What the file sets that the live loop does not honour, one sentence
    /// each (the loop logs them when it starts).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(model) = self.flush_model() {
            out.push(format!(
                "[compaction.memoryFlush] model = \"{model}\" is not honoured: the memory flush runs on the [model] section's model ({})",
                self.model.model
            ));
        }
        out
    }

    /// The default session key: `agent:<agent>:main`.
    pub fn main_key(&self) -> String {
        format!("agent:{}:main", self.agent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE_EXAMPLE: &str = r#"
state_dir = "state"
agent = "main"
workspace = "."
[model]
api = "openai-completions"
base_url = "http://127.0.0.1:8080/v1"
model = "some-model"
api_key_env = "OPENAI_API_KEY"
context_window = 128000
max_tokens = 4096
[compaction]
preset = "openclaw"
summarizer = "model"
"#;

    #[test]
    fn the_issues_example_reads_and_the_window_follows_the_model() {
        let c = Config::parse(ISSUE_EXAMPLE, Path::new("/cfg")).unwrap();
        assert_eq!(c.state_dir, Path::new("/cfg/state"));
        assert_eq!(c.main_key(), "agent:main:main");
        assert_eq!(c.compaction.summarizer, SummarizerChoice::Model);
        let p = c.policy();
        // openclaw preset on a 128000 window: reserve = min(max(16384, floor 20000), 32000) = 20000.
        assert_eq!((p.context_window, p.effective_reserve()), (128_000, 20_000));
        let c = Config::parse(
            &format!("{ISSUE_EXAMPLE}contextWindow = 9000\nkeepRecentTokens = 100\n"),
            Path::new("/"),
        )
        .unwrap();
        assert_eq!((c.policy().context_window, c.policy().keep_recent_tokens), (9000, 100));
    }

    #[test]
    fn storage_defaults_to_jsonl_and_names_its_choices() {
        assert_eq!(Config::parse(ISSUE_EXAMPLE, Path::new("/")).unwrap().storage, Storage::Jsonl);
        let sqlite = format!("storage = \"sqlite\"\n{ISSUE_EXAMPLE}");
        assert_eq!(Config::parse(&sqlite, Path::new("/")).unwrap().storage, Storage::Sqlite);
        let e = Config::parse(&format!("storage = \"mysql\"\n{ISSUE_EXAMPLE}"), Path::new("/")).unwrap_err();
        assert!(e.contains("unknown variant `mysql`, expected `jsonl` or `sqlite`"), "{e}");
    }

    #[test]
    fn the_flush_model_is_read_and_said_not_honoured_and_retired_prompts_are_refused() {
        let with = |flush: &str| {
            Config::parse(&format!("{ISSUE_EXAMPLE}[compaction.memoryFlush]\n{flush}"), Path::new("/"))
        };
        let c = with("model = \"openai/gpt-5-mini\"\n").unwrap();
        assert_eq!(c.flush_model(), Some("openai/gpt-5-mini"));
        assert_eq!(
            c.warnings(),
            ["[compaction.memoryFlush] model = \"openai/gpt-5-mini\" is not honoured: the memory flush runs on the [model] section's model (some-model)"]
        );
        assert_eq!(c.policy().memory_flush, Policy::openclaw().memory_flush);
        assert!(Config::parse(ISSUE_EXAMPLE, Path::new("/")).unwrap().warnings().is_empty());
        for key in ["prompt", "systemPrompt"] {
            let e = with(&format!("{key} = \"Write notes.\"\n")).unwrap_err();
            assert!(e.contains("OpenClaw 2026.9 no longer takes a custom memory-flush prompt"), "{e}");
        }
    }

    #[test]
    fn mistakes_are_named() {
        let e =
            Config::parse(&ISSUE_EXAMPLE.replace("\"openclaw\"", "\"nope\""), Path::new("/")).unwrap_err();
        assert!(e.contains("unknown preset `nope`"), "{e}");
        let e = Config::parse(&format!("{ISSUE_EXAMPLE}reserve = 1\n"), Path::new("/")).unwrap_err();
        assert!(e.contains("reserve"), "{e}");
        let e =
            Config::parse(&format!("{ISSUE_EXAMPLE}maxReserveShare = nan\n"), Path::new("/")).unwrap_err();
        assert!(e.contains("maxReserveShare must be a number from 0 to 1"), "{e}");
        let e = Config::parse(&ISSUE_EXAMPLE.replace("openai-completions", "gemini"), Path::new("/"))
            .unwrap_err();
        assert!(e.contains("unknown model api `gemini`"), "{e}");
    }
}
