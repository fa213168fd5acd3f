//! The web console in a real browser: Debian's chromium, driven by `playwright-core` from the Node
//! scripts in `tests/browser/`, against a real daemon started by the `aileron` binary.
//! `approvals` follows a person reviewing requests; `console` walks every console page.
//!
//! Needs `/usr/bin/chromium`, `node` and `tests/browser/node_modules` (`cargo xtask setup` installs
//! the first and the last). When one is missing the tests FAIL and say so, because a skipped
//! browser test looks exactly like a passing one. On a machine that cannot have a browser, set
//! `AILERON_SKIP_BROWSER_TESTS=1` to skip them explicitly; CI never sets it.

mod approvals;
mod console;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SKIP_VARIABLE: &str = "AILERON_SKIP_BROWSER_TESTS";
const CHROMIUM: &str = "/usr/bin/chromium";
/// Generous: chromium's first start on a 2-core machine that is also compiling can take seconds.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// `#1b1f24`, the header colour of the page's stylesheet: present only if the CSP let the styles in.
const HEADER_BACKGROUND: &str = "rgb(27, 31, 36)";

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// What this machine lacks to run the browser tests, each with how to get it.
fn missing_dependencies() -> Vec<String> {
    let mut missing = Vec::new();
    if !Path::new(CHROMIUM).exists() {
        missing.push(format!("{CHROMIUM} (Debian's chromium package)"));
    }
    if Command::new("node").arg("--version").output().is_err() {
        missing.push("node (Node.js 20 or later on PATH)".to_string());
    }
    let playwright = browser_dir().join("node_modules/playwright-core/package.json");
    if !playwright.exists() {
        missing.push(format!("{} (npm ci in {})", playwright.display(), browser_dir().display()));
    }
    missing
}

/// Whether a browser test should run: false when skipped on purpose, a failure when something it
/// needs is missing.
fn browser_available() -> bool {
    if std::env::var_os(SKIP_VARIABLE).is_some_and(|value| value == "1") {
        eprintln!("skipping the browser test: {SKIP_VARIABLE}=1");
        return false;
    }
    let missing = missing_dependencies();
    assert!(
        missing.is_empty(),
        "the browser test needs: {}\nhint: run `cargo xtask setup` (as root it installs chromium with apt-get and \
         the npm packages with npm ci), or set {SKIP_VARIABLE}=1 to skip this test on this machine",
        missing.join(", ")
    );
    true
}

/// A Node driver, spoken to over its stdin/stdout (see the protocol at the top of each script).
struct BrowserDriver {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl BrowserDriver {
    /// Starts `tests/browser/<script>` on the sign-in URL.
    fn start(script: &str, login_url: &str) -> BrowserDriver {
        let mut child = Command::new("node")
            .arg(script)
            .arg(login_url)
            .current_dir(browser_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting node {script}: {e}"));
        let (sender, lines) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (pipe, collected) = (child.stderr.take().expect("piped stderr"), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut collected = collected.lock().unwrap();
                collected.push_str(&line);
                collected.push('\n');
            }
        });
        let stdin = child.stdin.take();
        BrowserDriver { child, stdin, lines, stderr }
    }

    /// The next `REPLY` object; an `ERROR`, silence or exit fails the test with the script's stderr.
    fn reply(&mut self, what: &str) -> Value {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        let mut other_output = String::new();
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(remaining) {
                Ok(line) => {
                    if let Some(body) = line.strip_prefix("REPLY ") {
                        return serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: bad reply {body}: {e}"));
                    }
                    if let Some(message) = line.strip_prefix("ERROR ") {
                        panic!("{what}: the browser script failed: {message}\n{}", self.diagnostics(&other_output));
                    }
                    other_output.push_str(&line);
                    other_output.push('\n');
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "{what}: no answer from the browser in {REPLY_TIMEOUT:?}\n{}",
                        self.diagnostics(&other_output)
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("{what}: the browser script exited\n{}", self.diagnostics(&other_output))
                }
            }
        }
    }

    fn send(&mut self, command: Value) -> Value {
        let what = command.to_string();
        let stdin = self.stdin.as_mut().expect("the driver's stdin is open");
        writeln!(stdin, "{command}").and_then(|()| stdin.flush()).expect("writing to the browser script");
        self.reply(&what)
    }

    fn diagnostics(&self, other_output: &str) -> String {
        // Give the stderr reader a moment to catch up with a script that just died.
        std::thread::sleep(Duration::from_millis(200));
        format!("other stdout:\n{other_output}stderr:\n{}", self.stderr.lock().unwrap())
    }
}

impl Drop for BrowserDriver {
    fn drop(&mut self) {
        // Closing stdin lets the script close chromium itself; kill only if it does not.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn check_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading the screenshot {}: {e}", path.display()));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is a PNG", path.display());
    // IHDR width and height, big-endian, right after the signature and the chunk header.
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert!(width >= 800 && height >= 400, "{}: {width}x{height}", path.display());
    assert!(bytes.len() > 10_000, "{} has content ({} bytes)", path.display(), bytes.len());
}

fn assert_no_page_problems(reply: &Value, step: &str) {
    assert_eq!(reply["problems"], json!([]), "{step}: the page logged errors (script, CSP, failed requests)");
}
