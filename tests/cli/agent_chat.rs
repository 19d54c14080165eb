//! `sessionlog chat` driven through a real pseudo-terminal (a private tmux
//! server): a streamed reply, `/status`, Ctrl-C during a stream aborting the
//! turn but not the program, `/new`, and `/quit`.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use sessionlog_test_support::fake_llm::{Ending, FakeLlm, Reply, Turn};

use crate::support::{arg, bin};

struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-f", "/dev/null", "-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "chat", "-S", "-200"]).stdout)
            .into_owned()
    }

    fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "chat"];
        args.extend_from_slice(keys);
        assert!(self.cmd(&args).status.success());
    }

    /// Waits until the screen shows `what` `times` times.
    fn wait_for(&self, what: &str, times: usize) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if screen.matches(what).count() >= times {
                return screen;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "waited for {what:?}; screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

#[test]
fn chat_streams_reports_status_survives_ctrl_c_and_starts_anew() {
    // `.ci/run` installs tmux when it is missing; without it this test fails
    // rather than passing with nothing checked.
    assert!(
        Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success()),
        "tmux is needed for the pseudo-terminal test of chat (`.ci/run` installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let cfg = dir.path().join("chat.toml");
    std::fs::write(
        &cfg,
        format!(
            "state_dir = \"state\"\nworkspace = \"ws\"\n[model]\napi = \"openai-completions\"\nbase_url = \"{}\"\nmodel = \"m\"\ncontext_window = 128000\n",
            fake.openai_base_url()
        ),
    )
    .unwrap();
    let tmux = Tmux { socket: format!("sessionlog-chat-{}", std::process::id()) };
    let command = format!("{} chat --config {}", bin(), arg(&cfg));
    assert!(tmux
        .cmd(&["new-session", "-d", "-s", "chat", "-x", "160", "-y", "50", &command])
        .status
        .success());
    tmux.wait_for("/status /new /reset", 1);

    let mut streamed = Turn::text("Hi from the model").usage(1_200, 30);
    streamed.piece = 3;
    streamed.delay = Some(Duration::from_millis(20));
    fake.push(Reply::turn(streamed));
    tmux.send(&["hello", "Enter"]);
    tmux.wait_for("Hi from the model", 1);

    tmux.send(&["/status", "Enter"]);
    let screen = tmux.wait_for("Compactions: 0", 1);
    assert!(screen.contains("Model: openai/m"), "{screen}");
    // 1200 + 30 tokens of the last call, of a 128000 window.
    assert!(screen.contains("Context: 1.2k/128.0k tokens (0%)"), "{screen}");
    assert!(screen.contains("Session: agent:main:main ("), "{screen}");

    // A reply that streams a little, then hangs: Ctrl-C aborts it.
    let mut hanging = Turn::text("Once upon a time there was").usage(10, 1);
    hanging.piece = 5;
    fake.push(Reply::turn(hanging.ending(Ending::HangAfter(3))));
    tmux.send(&["tell me a story", "Enter"]);
    tmux.wait_for("Once ", 1);
    tmux.send(&["C-c"]);
    tmux.wait_for("[aborted]", 1);

    // Still running: /new starts a new session, which answers.
    tmux.send(&["/new", "Enter"]);
    tmux.wait_for("(new)]", 1);
    fake.push(Reply::turn(Turn::text("fresh start").usage(5, 2)));
    tmux.send(&["again", "Enter"]);
    tmux.wait_for("fresh start", 1);
    tmux.send(&["/quit", "Enter"]);
    let start = Instant::now();
    while tmux.cmd(&["has-session", "-t", "chat"]).status.success() {
        assert!(start.elapsed() < Duration::from_secs(10), "chat did not leave on /quit");
        std::thread::sleep(Duration::from_millis(50));
    }

    // The first session's transcript was archived by /new, with the aborted entry in it.
    let sessions = dir.path().join("state/agents/main/sessions");
    let archived: Vec<_> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".jsonl.reset."))
        .collect();
    assert_eq!(archived.len(), 1, "{archived:?}");
    let text = std::fs::read_to_string(&archived[0]).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["message"]["stopReason"], "aborted");
}
