//! Looks for anything it should not see: environment variables, argv, files such as /etc/passwd
//! and ~/.aileron, and directory listings. Prints everything it found (as success) so tests can
//! assert that it found nothing: `env` and `argv` empty, every `found` false.

use std::path::PathBuf;

use aileron_connector_sdk::run;
use serde_json::{Map, Value, json};

/// Paths a connector must never read. `~` is not expanded by the OS, so the literal form is
/// tried too, plus `$HOME/.aileron` when HOME leaks.
const FILES: [&str; 6] = [
    "/etc/passwd",
    "/root/.aileron/secrets.json",
    "~/.aileron/secrets.json",
    "/proc/self/environ",
    "secrets.json",
    "../secrets.json",
];
const DIRECTORIES: [&str; 5] = ["/", ".", "/root/.aileron", "~/.aileron", "/tmp"];

fn main() {
    run(|_, _| {
        let env: Vec<String> = std::env::vars_os()
            .map(|(key, value)| format!("{}={}", key.to_string_lossy(), value.to_string_lossy()))
            .collect();
        let argv: Vec<String> = std::env::args_os().map(|arg| arg.to_string_lossy().into_owned()).collect();

        let mut files: Vec<PathBuf> = FILES.iter().map(PathBuf::from).collect();
        if let Some(home) = std::env::var_os("HOME") {
            files.push(PathBuf::from(home).join(".aileron/secrets.json"));
        }
        let mut file_results = Map::new();
        for path in files {
            let result = match std::fs::read(&path) {
                Ok(bytes) => {
                    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(64)]);
                    json!({ "found": true, "bytes": bytes.len(), "head": head })
                }
                Err(error) => json!({ "found": false, "error": error.to_string() }),
            };
            file_results.insert(path.display().to_string(), result);
        }

        let mut directory_results = Map::new();
        for path in DIRECTORIES {
            let result = match std::fs::read_dir(path) {
                Ok(entries) => {
                    let names: Vec<Value> = entries
                        .flatten()
                        .map(|entry| Value::String(entry.file_name().to_string_lossy().into_owned()))
                        .collect();
                    json!({ "found": true, "entries": names })
                }
                Err(error) => json!({ "found": false, "error": error.to_string() }),
            };
            directory_results.insert(path.to_owned(), result);
        }

        // No `current_dir`: wasi-libc answers "/" by itself without asking the host, so it would
        // read as a finding while revealing nothing.
        Ok(json!({ "env": env, "argv": argv, "files": file_results, "directories": directory_results }))
    });
}
