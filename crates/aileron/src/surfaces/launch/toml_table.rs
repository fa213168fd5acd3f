//! Codex's `config.toml`: sets `[mcp_servers.<name>]` with `toml_edit`, which keeps every other
//! byte of the file (comments, ordering, spacing) as the user wrote it. Keys the user added to our
//! table themselves (`startup_timeout_sec`, `enabled`, ...) are kept too; only `command`, `args`
//! and the `env` entries we own are set, and only when they differ.

use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, TableLike, Value};

use super::McpServer;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TomlEditError {
    #[error("{0}")]
    Parse(String),
    #[error("`{0}` is not a table")]
    NotATable(String),
}

/// Sets `mcp_servers.<name>` to run `server`. Returns `text` unchanged when it already does.
pub fn upsert_mcp_server(text: &str, name: &str, server: &McpServer) -> Result<String, TomlEditError> {
    let mut document: DocumentMut =
        text.parse().map_err(|e: toml_edit::TomlError| TomlEditError::Parse(e.to_string()))?;
    let root = document.as_table_mut();
    // `mcp_servers = { ... }` holds inline values only; a new entry there must be inline too.
    let inline_parent = matches!(root.get("mcp_servers"), Some(Item::Value(Value::InlineTable(_))));
    if !root.contains_key("mcp_servers") {
        let mut servers = Table::new();
        // Only `[mcp_servers.<name>]` headers appear, never an empty `[mcp_servers]`.
        servers.set_implicit(true);
        root.insert("mcp_servers", Item::Table(servers));
    }
    let servers = root
        .get_mut("mcp_servers")
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| TomlEditError::NotATable("mcp_servers".into()))?;
    let changed = match servers.get_mut(name) {
        None => {
            servers.insert(name, new_server_item(server, inline_parent));
            true
        }
        Some(item) => {
            let table =
                item.as_table_like_mut().ok_or_else(|| TomlEditError::NotATable(format!("mcp_servers.{name}")))?;
            update_server(table, server)
        }
    };
    Ok(if changed { document.to_string() } else { text.to_string() })
}

fn new_server_item(server: &McpServer, inline: bool) -> Item {
    if inline {
        let mut table = InlineTable::new();
        table.insert("command", Value::from(server.command.as_str()));
        table.insert("args", Value::Array(string_array(&server.args)));
        table.insert("env_vars", Value::Array(string_array(&server.pass_env)));
        return Item::Value(Value::InlineTable(table));
    }
    let mut table = Table::new();
    table.insert("command", toml_edit::value(server.command.as_str()));
    table.insert("args", Item::Value(Value::Array(string_array(&server.args))));
    table.insert("env_vars", Item::Value(Value::Array(string_array(&server.pass_env))));
    Item::Table(table)
}

fn string_array(items: &[String]) -> Array {
    items.iter().map(String::as_str).collect()
}

/// Sets what differs in an existing server table; returns whether anything changed. Values an
/// earlier Aileron wrote literally into `env` for a variable now passed through (a dead session
/// token, an old URL) are removed, and an `env` left empty by that goes too.
fn update_server(table: &mut dyn TableLike, server: &McpServer) -> bool {
    let mut changed = false;
    if table.get("command").and_then(Item::as_str) != Some(server.command.as_str()) {
        table.insert("command", toml_edit::value(server.command.as_str()));
        changed = true;
    }
    let args: Option<Vec<&str>> =
        table.get("args").and_then(Item::as_array).map(|array| array.iter().filter_map(Value::as_str).collect());
    let args_match = table.get("args").and_then(Item::as_array).is_some_and(|array| array.len() == server.args.len())
        && args.is_some_and(|args| args == server.args.iter().map(String::as_str).collect::<Vec<_>>());
    if !args_match {
        table.insert("args", Item::Value(Value::Array(string_array(&server.args))));
        changed = true;
    }
    match table.get_mut("env_vars").and_then(Item::as_array_mut) {
        Some(listed) => {
            for name in &server.pass_env {
                if !listed.iter().any(|value| value.as_str() == Some(name.as_str())) {
                    listed.push(name.as_str());
                    changed = true;
                }
            }
        }
        None => {
            table.insert("env_vars", Item::Value(Value::Array(string_array(&server.pass_env))));
            changed = true;
        }
    }
    let emptied = match table.get_mut("env").and_then(Item::as_table_like_mut) {
        Some(env) => {
            for name in &server.pass_env {
                changed |= env.remove(name).is_some();
            }
            env.is_empty()
        }
        None => false,
    };
    if emptied {
        table.remove("env");
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> McpServer {
        McpServer {
            command: "/opt/aileron/bin/aileron-mcp".into(),
            args: vec![],
            pass_env: vec!["AILERON_URL".into(), "AILERON_TOKEN".into()],
        }
    }

    fn check(before: &str, expected: &str) {
        let after = upsert_mcp_server(before, "aileron", &server()).unwrap();
        assert_eq!(after, expected, "before:\n{before}");
        assert_eq!(upsert_mcp_server(&after, "aileron", &server()).unwrap(), after, "a second run changes nothing");
    }

    const USER_CONFIG: &str = "# Codex settings\nmodel = \"gpt-5.1-codex\" # fast\n\n[mcp_servers.docs]\ncommand = \"npx\"  # keep\nargs = [\"-y\", \"docs-mcp\"]\n\n[profiles.work]\nmodel = \"o3\"\n";
    const AILERON_TABLE: &str = "\n[mcp_servers.aileron]\ncommand = \"/opt/aileron/bin/aileron-mcp\"\nargs = []\nenv_vars = [\"AILERON_URL\", \"AILERON_TOKEN\"]\n";

    #[test]
    fn the_server_table_is_added_and_everything_else_is_kept() {
        // toml_edit groups the new table with its `mcp_servers` siblings.
        check(USER_CONFIG, &USER_CONFIG.replace("\n[profiles.work]", &format!("{AILERON_TABLE}\n[profiles.work]")));
        check("", AILERON_TABLE.trim_start());
        check("model = \"o3\"\n", &format!("model = \"o3\"\n{AILERON_TABLE}"));
    }

    #[test]
    fn an_existing_entry_is_updated_in_place_keeping_user_keys() {
        // What an earlier Aileron wrote: the session's values literally, a dead token among them.
        let before = format!(
            "{USER_CONFIG}\n[mcp_servers.aileron]\ncommand = \"/opt/aileron/bin/aileron-mcp\"\nargs = []\nstartup_timeout_sec = 20 # mine\n\n\
             [mcp_servers.aileron.env]\nAILERON_URL = \"http://127.0.0.1:4000\"\nAILERON_TOKEN = \"t0\"\nEXTRA = \"x\"\n"
        );
        let after = upsert_mcp_server(&before, "aileron", &server()).unwrap();
        assert!(!after.contains("t0") && !after.contains("AILERON_URL = "), "the literal values are gone:\n{after}");
        assert!(
            after.contains("EXTRA = \"x\"") && after.contains("startup_timeout_sec = 20 # mine"),
            "the user's keys stay:\n{after}"
        );
        assert!(after.contains("env_vars = [\"AILERON_URL\", \"AILERON_TOKEN\"]"), "{after}");
        assert_eq!(upsert_mcp_server(&after, "aileron", &server()).unwrap(), after, "then nothing changes");
        // An env holding only our old values goes entirely.
        let ours_only = format!("{USER_CONFIG}{AILERON_TABLE}\n[mcp_servers.aileron.env]\nAILERON_TOKEN = \"t0\"\n");
        let after = upsert_mcp_server(&ours_only, "aileron", &server()).unwrap();
        assert!(!after.contains("[mcp_servers.aileron.env]") && !after.contains("t0"), "{after}");
    }

    #[test]
    fn inline_server_maps_get_an_inline_entry() {
        check(
            "mcp_servers = { docs = { command = \"npx\" } }\n",
            // The space before the closing brace stays with `docs`, as written.
            "mcp_servers = { docs = { command = \"npx\" } , aileron = { command = \"/opt/aileron/bin/aileron-mcp\", args = [], env_vars = [\"AILERON_URL\", \"AILERON_TOKEN\"] } }\n",
        );
    }

    #[test]
    fn files_that_are_not_toml_or_clash_are_errors() {
        assert!(matches!(upsert_mcp_server("model = \n", "aileron", &server()), Err(TomlEditError::Parse(_))));
        assert_eq!(
            upsert_mcp_server("mcp_servers = 3\n", "aileron", &server()),
            Err(TomlEditError::NotATable("mcp_servers".into()))
        );
        assert_eq!(
            upsert_mcp_server("[mcp_servers]\naileron = \"x\"\n", "aileron", &server()),
            Err(TomlEditError::NotATable("mcp_servers.aileron".into()))
        );
    }
}
