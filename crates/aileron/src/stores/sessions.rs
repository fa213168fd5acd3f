//! Launch sessions (SPEC §13): one session per `aileron launch` of an agent. Starting a session
//! mints a bearer token limited to [`SESSION_SCOPES`] (list and run actions, poll approvals; never
//! decide) and journals the start to `sessions.jsonl`; ending it revokes the token and journals the
//! agent's exit code. Each journal line is fsynced before the answer that reports it.
//!
//! Session tokens live only in the daemon's memory, like the daemon token: a daemon restart ends
//! every session. Replaying the journal at start-up shows such sessions as `interrupted` (started,
//! never ended), and their agents' `aileron-mcp` gets 401 until the agent is launched again.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use serde::{Deserialize, Serialize};

use crate::platform::principal::{SESSION_SCOPES, Scope, TokenRegistry};

/// Longest agent name a session may carry (it ends up in audit actor ids and file names).
pub const MAX_AGENT_NAME: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("invalid agent name `{0}`: use 1-64 lowercase letters, digits, `.`, `_` or `-`")]
    InvalidAgent(String),
    #[error("no session `{0}`")]
    NotFound(String),
    #[error("session `{0}` has already ended")]
    AlreadyEnded(String),
    #[error("session `{0}` cannot be resumed: only an unconfined session a daemon restart interrupted can")]
    NotResumable(String),
    #[error("writing {path}: {source}")]
    Journal { path: PathBuf, source: io::Error },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Active,
    Ended,
    /// Started before the daemon's last restart and never ended: its token died with that daemon.
    Interrupted,
}

/// How a session's agent is contained (docs/decisions/0013-launch-containment.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Confinement {
    /// User, mount and PID namespaces: the home masked, no other process visible.
    Namespaces,
    /// None: launched with `--unconfined`, or an agent host that started `aileron-mcp` itself.
    #[default]
    Unconfined,
}

impl Confinement {
    pub fn as_str(self) -> &'static str {
        match self {
            Confinement::Namespaces => "namespaces",
            Confinement::Unconfined => "unconfined",
        }
    }
}

/// What `GET /v1/sessions/{id}` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Session {
    pub session_id: String,
    pub agent: String,
    pub pid: Option<u32>,
    pub confinement: Confinement,
    /// Whether its network left only through its egress proxy (SPEC §15); false for an
    /// unconfined agent and for `--network=open`.
    #[serde(default)]
    pub network_enforced: bool,
    pub started_at: String,
    pub status: SessionStatus,
    pub ended_at: Option<String>,
    pub exit_code: Option<i32>,
    pub scopes: Vec<String>,
}

/// A newly started session and its token (shown once, to the launcher).
#[derive(Debug, Clone)]
pub struct StartedSession {
    pub session: Session,
    pub token: crate::platform::secret::Secret,
}

/// One line of `sessions.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event")]
enum JournalLine {
    #[serde(rename = "session.started")]
    Started {
        session_id: String,
        agent: String,
        pid: Option<u32>,
        started_at: String,
        scopes: Vec<String>,
        /// Absent in journals written before containment existed: those agents were unconfined.
        #[serde(default)]
        confinement: Confinement,
        /// Absent in journals written before SPEC §15: those agents kept the host's network.
        #[serde(default)]
        network_enforced: bool,
    },
    #[serde(rename = "session.ended")]
    Ended { session_id: String, ended_at: String, exit_code: Option<i32> },
    /// A new token for a session a restart interrupted. At the next replay it is interrupted again
    /// (that token died with that daemon), so the line only records when it happened.
    #[serde(rename = "session.resumed")]
    Resumed { session_id: String, resumed_at: String },
}

/// The wire name of a scope, as shown to clients.
pub fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::ActionsList => "actions:list",
        Scope::ActionsRun => "actions:run",
        Scope::ApprovalsPoll => "approvals:poll",
        Scope::ApprovalsDecide => "approvals:decide",
        Scope::Console => "console",
        Scope::Admin => "admin",
        Scope::Gateway => "gateway",
    }
}

/// The daemon's sessions: replayed from the journal at start, kept in memory, journaled on change.
pub struct SessionRegistry {
    journal_path: PathBuf,
    /// Opened on the first write, so a daemon that never launches an agent creates no file.
    journal: Mutex<Option<File>>,
    sessions: RwLock<HashMap<String, Session>>,
}

impl SessionRegistry {
    /// Replays `journal_path`. Lines that do not parse (a torn tail after a crash) are skipped:
    /// the journal is a record, never a source of authority, so it must not stop the daemon.
    pub fn open(journal_path: PathBuf) -> SessionRegistry {
        let mut sessions = HashMap::new();
        let mut skipped = 0usize;
        if let Ok(file) = File::open(&journal_path) {
            for line in BufReader::new(file).lines() {
                let Ok(line) = line else {
                    skipped += 1;
                    continue;
                };
                match serde_json::from_str::<JournalLine>(&line) {
                    Ok(entry) => replay(&mut sessions, entry),
                    Err(_) if line.trim().is_empty() => {}
                    Err(_) => skipped += 1,
                }
            }
        }
        if skipped > 0 {
            log_line!("aileron daemon: skipped {skipped} unreadable line(s) of {}", journal_path.display());
        }
        SessionRegistry { journal_path, journal: Mutex::new(None), sessions: RwLock::new(sessions) }
    }

    /// Journals a new session, then mints its token: a session whose start could not be recorded
    /// never gets a token.
    pub fn start(
        &self,
        tokens: &TokenRegistry,
        agent: &str,
        pid: Option<u32>,
        confinement: Confinement,
        network_enforced: bool,
    ) -> Result<StartedSession, SessionError> {
        if !valid_agent_name(agent) {
            return Err(SessionError::InvalidAgent(agent.to_string()));
        }
        let session = Session {
            session_id: new_session_id(),
            agent: agent.to_string(),
            pid,
            confinement,
            network_enforced,
            started_at: now(),
            status: SessionStatus::Active,
            ended_at: None,
            exit_code: None,
            scopes: SESSION_SCOPES.iter().map(|scope| scope_name(*scope).to_string()).collect(),
        };
        self.append(&JournalLine::Started {
            session_id: session.session_id.clone(),
            agent: session.agent.clone(),
            pid,
            started_at: session.started_at.clone(),
            scopes: session.scopes.clone(),
            confinement,
            network_enforced,
        })?;
        let token =
            tokens.mint_session(&session.session_id, SESSION_SCOPES.to_vec(), confinement == Confinement::Namespaces);
        self.sessions.write().expect("session table poisoned").insert(session.session_id.clone(), session.clone());
        Ok(StartedSession { session, token })
    }

    /// Gives an unconfined session a daemon restart interrupted a new token and makes it active
    /// again, so the process that held it (`aileron-mcp`'s own session) keeps its identity and its
    /// approvals across the restart. A confined session is never resumed: its token belonged to a
    /// launch whose namespaces are gone.
    pub fn resume(&self, tokens: &TokenRegistry, session_id: &str) -> Result<StartedSession, SessionError> {
        {
            let sessions = self.sessions.read().expect("session table poisoned");
            let session = sessions.get(session_id).ok_or_else(|| SessionError::NotFound(session_id.to_string()))?;
            if session.status != SessionStatus::Interrupted || session.confinement != Confinement::Unconfined {
                return Err(SessionError::NotResumable(session_id.to_string()));
            }
        }
        self.append(&JournalLine::Resumed { session_id: session_id.to_string(), resumed_at: now() })?;
        let mut sessions = self.sessions.write().expect("session table poisoned");
        let session = sessions.get_mut(session_id).ok_or_else(|| SessionError::NotFound(session_id.to_string()))?;
        if session.status != SessionStatus::Interrupted {
            return Err(SessionError::NotResumable(session_id.to_string()));
        }
        session.status = SessionStatus::Active;
        let token = tokens.mint_session(session_id, SESSION_SCOPES.to_vec(), false);
        Ok(StartedSession { session: session.clone(), token })
    }

    /// Revokes the session's token, then journals the end. The token is gone even when the
    /// journal cannot be written (the error is still reported).
    pub fn end(
        &self,
        tokens: &TokenRegistry,
        session_id: &str,
        exit_code: Option<i32>,
    ) -> Result<Session, SessionError> {
        {
            let sessions = self.sessions.read().expect("session table poisoned");
            let session = sessions.get(session_id).ok_or_else(|| SessionError::NotFound(session_id.to_string()))?;
            if session.status != SessionStatus::Active {
                return Err(SessionError::AlreadyEnded(session_id.to_string()));
            }
        }
        tokens.revoke_session(session_id);
        let ended_at = now();
        let mut sessions = self.sessions.write().expect("session table poisoned");
        let session = sessions.get_mut(session_id).ok_or_else(|| SessionError::NotFound(session_id.to_string()))?;
        session.status = SessionStatus::Ended;
        session.ended_at = Some(ended_at.clone());
        session.exit_code = exit_code;
        let ended = session.clone();
        drop(sessions);
        self.append(&JournalLine::Ended { session_id: session_id.to_string(), ended_at, exit_code })?;
        Ok(ended)
    }

    pub fn get(&self, session_id: &str) -> Option<Session> {
        self.sessions.read().expect("session table poisoned").get(session_id).cloned()
    }

    /// Sessions still running, oldest first.
    pub fn active(&self) -> Vec<Session> {
        let sessions = self.sessions.read().expect("sessions lock poisoned");
        let mut active: Vec<Session> =
            sessions.values().filter(|s| s.status == SessionStatus::Active).cloned().collect();
        active.sort_by(|a, b| a.started_at.cmp(&b.started_at));
        active
    }

    /// Every session the journal knows, newest first.
    pub fn all(&self) -> Vec<Session> {
        let sessions = self.sessions.read().expect("sessions lock poisoned");
        let mut all: Vec<Session> = sessions.values().cloned().collect();
        all.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.session_id.cmp(&a.session_id)));
        all
    }

    pub fn journal_path(&self) -> &Path {
        &self.journal_path
    }

    fn append(&self, line: &JournalLine) -> Result<(), SessionError> {
        let error = |source| SessionError::Journal { path: self.journal_path.clone(), source };
        let mut text = serde_json::to_string(line).map_err(|e| error(io::Error::other(e)))?;
        text.push('\n');
        let mut journal = self.journal.lock().expect("session journal poisoned");
        if journal.is_none() {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .read(true)
                .mode(0o600)
                .open(&self.journal_path)
                .map_err(error)?;
            // A crash mid-append leaves a last line without its newline; ending it first keeps this
            // line whole (the torn one stays a skipped line) instead of joining both into one that
            // no replay can read.
            if ends_torn(&file).map_err(error)? {
                text.insert(0, '\n');
            }
            *journal = Some(file);
        }
        let file = journal.as_mut().expect("opened above");
        // One write of one line: O_APPEND keeps lines whole even if another writer appears.
        file.write_all(text.as_bytes()).map_err(error)?;
        file.sync_data().map_err(error)
    }
}

/// Whether the file is not empty and its last byte is not a newline.
fn ends_torn(file: &File) -> io::Result<bool> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(false);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, len - 1)?;
    Ok(last[0] != b'\n')
}

fn replay(sessions: &mut HashMap<String, Session>, entry: JournalLine) {
    match entry {
        JournalLine::Started { session_id, agent, pid, started_at, scopes, confinement, network_enforced } => {
            let session = Session {
                session_id: session_id.clone(),
                agent,
                pid,
                confinement,
                network_enforced,
                started_at,
                status: SessionStatus::Interrupted,
                ended_at: None,
                exit_code: None,
                scopes,
            };
            sessions.insert(session_id, session);
        }
        JournalLine::Ended { session_id, ended_at, exit_code } => {
            if let Some(session) = sessions.get_mut(&session_id) {
                session.status = SessionStatus::Ended;
                session.ended_at = Some(ended_at);
                session.exit_code = exit_code;
            }
        }
        JournalLine::Resumed { .. } => {}
    }
}

fn valid_agent_name(agent: &str) -> bool {
    !agent.is_empty()
        && agent.len() <= MAX_AGENT_NAME
        && agent.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

/// `ses-` + 16 random hex digits.
fn new_session_id() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("operating system randomness unavailable");
    format!("ses-{}", hex::encode(bytes))
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(dir: &Path) -> SessionRegistry {
        SessionRegistry::open(dir.join("sessions.jsonl"))
    }

    #[test]
    fn agent_names_are_checked() {
        let check = |name: &str, expected: bool| assert_eq!(valid_agent_name(name), expected, "{name:?}");
        check("claude", true);
        check("open-code_2.0", true);
        check("", false);
        check("Claude", false);
        check("../etc", false);
        check("a b", false);
        check(&"x".repeat(MAX_AGENT_NAME), true);
        check(&"x".repeat(MAX_AGENT_NAME + 1), false);
    }

    #[test]
    fn start_and_end_are_journaled_and_replayed() {
        let temp = tempfile::tempdir().unwrap();
        let tokens = TokenRegistry::new("admin".into());
        let sessions = registry(temp.path());
        let ended = sessions.start(&tokens, "codex", Some(41), Confinement::Namespaces, true).unwrap();
        let active = sessions.start(&tokens, "claude", None, Confinement::Unconfined, false).unwrap();
        assert!(tokens.resolve(ended.token.expose()).is_some());
        sessions.end(&tokens, &ended.session.session_id, Some(3)).unwrap();
        assert!(tokens.resolve(ended.token.expose()).is_none(), "ending revokes the token");
        assert!(tokens.resolve(active.token.expose()).is_some(), "other sessions keep theirs");
        assert!(matches!(
            sessions.end(&tokens, &ended.session.session_id, Some(0)),
            Err(SessionError::AlreadyEnded(_))
        ));
        assert!(matches!(sessions.end(&tokens, "ses-nope", None), Err(SessionError::NotFound(_))));

        // A torn tail (crash mid-write) is skipped.
        let mut file = OpenOptions::new().append(true).open(temp.path().join("sessions.jsonl")).unwrap();
        file.write_all(b"{\"event\":\"session.ended\",\"sess").unwrap();
        let replayed = registry(temp.path());
        let ended_view = replayed.get(&ended.session.session_id).unwrap();
        assert_eq!(
            (ended_view.status, ended_view.exit_code, ended_view.pid),
            (SessionStatus::Ended, Some(3), Some(41))
        );
        let active_view = replayed.get(&active.session.session_id).unwrap();
        assert_eq!(active_view.status, SessionStatus::Interrupted, "a restart ends sessions that were active");
        assert_eq!(active_view.scopes, ["actions:list", "actions:run", "approvals:poll"]);
    }

    #[test]
    fn only_an_unconfined_session_a_restart_interrupted_is_resumed() {
        let temp = tempfile::tempdir().unwrap();
        let tokens = TokenRegistry::new("admin".into());
        let sessions = registry(temp.path());
        let own = sessions.start(&tokens, "aileron-mcp", None, Confinement::Unconfined, false).unwrap();
        let confined = sessions.start(&tokens, "claude", None, Confinement::Namespaces, true).unwrap();
        let ended = sessions.start(&tokens, "codex", None, Confinement::Unconfined, false).unwrap();
        sessions.end(&tokens, &ended.session.session_id, Some(0)).unwrap();
        let refused =
            |result: Result<StartedSession, SessionError>| matches!(result, Err(SessionError::NotResumable(_)));
        assert!(refused(sessions.resume(&tokens, &own.session.session_id)), "still active: it has its token");
        // The daemon restarts: every token is gone, the sessions read back interrupted.
        let tokens = TokenRegistry::new("admin".into());
        let sessions = registry(temp.path());
        assert!(refused(sessions.resume(&tokens, &confined.session.session_id)), "a launch's namespaces are gone");
        assert!(refused(sessions.resume(&tokens, &ended.session.session_id)));
        assert!(matches!(sessions.resume(&tokens, "ses-unknown"), Err(SessionError::NotFound(_))));
        let resumed = sessions.resume(&tokens, &own.session.session_id).unwrap();
        assert_eq!(resumed.session.status, SessionStatus::Active);
        let principal = tokens.resolve(resumed.token.expose()).expect("the new token works");
        assert!(
            matches!(&principal, crate::platform::principal::Principal::Session { session_id, .. } if *session_id == own.session.session_id),
            "the same session"
        );
        assert!(refused(sessions.resume(&tokens, &own.session.session_id)), "once");
        // The journal line is read back at the next start, which interrupts it again.
        let again = registry(temp.path());
        assert_eq!(again.get(&own.session.session_id).unwrap().status, SessionStatus::Interrupted);
    }

    #[test]
    fn a_session_that_cannot_be_journaled_gets_no_token() {
        let temp = tempfile::tempdir().unwrap();
        let tokens = TokenRegistry::new("admin".into());
        let sessions = SessionRegistry::open(temp.path().join("missing-dir").join("sessions.jsonl"));
        let error = sessions.start(&tokens, "claude", None, Confinement::Namespaces, true).unwrap_err();
        assert!(error.to_string().contains("sessions.jsonl"), "{error}");
        assert!(sessions.sessions.read().unwrap().is_empty());
    }
}
