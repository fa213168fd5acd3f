//! `[capabilities.spawn]` (SPEC §5): the declared programs, argv templates, environment and filesystem
//! scope. Only the structure is decoded and checked here; `SpawnPolicy::check_spawn` in the shell
//! enforces it per call.

use std::collections::BTreeMap;

use super::ManifestValidator;
use super::raw::{RawLimits, RawSpawn};
use crate::identity::ContentHash;
use crate::parse_error::{FieldPath, ParseError};
use crate::policy::validate_op_name;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnCapability {
    pub programs: Vec<SpawnProgram>,
    /// Keyed by operation name (the `<op>` of `spawn:<op>`).
    pub operations: BTreeMap<String, SpawnOperation>,
    pub env_passthrough: Vec<String>,
    /// Environment keys that carry the bound credential; always a subset of `env_passthrough`.
    pub credential_env_keys: Vec<String>,
    pub fs_read: Vec<String>,
    pub fs_write: Vec<String>,
    pub cwd: Option<String>,
    pub limits: SpawnLimits,
}

impl SpawnCapability {
    pub fn operation(&self, op: &str) -> Option<&SpawnOperation> {
        self.operations.get(op)
    }

    pub fn program(&self, path: &str) -> Option<&SpawnProgram> {
        self.programs.iter().find(|p| p.path == path)
    }
}

/// One allowed binary, by exact path (absolute or `~/`), optionally pinned by hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnProgram {
    pub path: String,
    pub hash: Option<ContentHash>,
}

/// `operations.<op> = {argv, description}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnOperation {
    /// The argv template as written, e.g. `git log --since={since}`.
    pub argv: String,
    pub description: String,
    /// Path of the declared program the template's first word names.
    pub program: String,
}

impl SpawnOperation {
    /// The template split into words (no shell: whitespace is the only separator).
    pub fn argv_words(&self) -> Vec<&str> {
        self.argv.split_whitespace().collect()
    }

    /// `{name}` placeholders in order of appearance, each once.
    pub fn placeholders(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        let mut rest = self.argv.as_str();
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            match after.find('}') {
                Some(close) if is_placeholder_name(&after[..close]) => {
                    let name = &after[..close];
                    if !names.contains(&name) {
                        names.push(name);
                    }
                    rest = &after[close + 1..];
                }
                _ => rest = after,
            }
        }
        names
    }
}

fn is_placeholder_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Output caps for a spawned program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpawnLimits {
    pub max_stdout_bytes: u64,
    pub max_stderr_bytes: u64,
}

impl Default for SpawnLimits {
    fn default() -> SpawnLimits {
        SpawnLimits { max_stdout_bytes: 1024 * 1024, max_stderr_bytes: 256 * 1024 }
    }
}

/// Why a path is not an acceptable scope (absolute or `~/`-anchored, no `..`, no control characters).
fn path_problem(path: &str) -> Option<String> {
    if path.chars().any(|c| c.is_control()) {
        return Some(format!("{path:?} contains control characters"));
    }
    let relative = match path.strip_prefix("~/") {
        Some(rest) => rest,
        None => match path.strip_prefix('/') {
            Some(rest) => rest,
            None => return Some(format!("`{path}` must be an absolute path or start with `~/`")),
        },
    };
    if relative.split('/').any(|segment| segment == "..") {
        return Some(format!("`{path}` must not contain `..`"));
    }
    None
}

/// `AILERON_*` (any case): the daemon's own variables, which a spawned program never receives.
fn is_aileron_variable(name: &str) -> bool {
    name.get(..8).is_some_and(|prefix| prefix.eq_ignore_ascii_case("AILERON_"))
}

/// Whether `path` lies within `scope`, segment by segment, written the same way (both `~/` or
/// both absolute; the shell checks again on the resolved paths at run time).
pub fn path_within(path: &str, scope: &str) -> bool {
    fn anchored(path: &str) -> Option<(bool, Vec<&str>)> {
        let (home, rest) = match path.strip_prefix("~/") {
            Some(rest) => (true, rest),
            None => (false, path.strip_prefix('/')?),
        };
        Some((home, rest.split('/').filter(|segment| !segment.is_empty() && *segment != ".").collect()))
    }
    match (anchored(path), anchored(scope)) {
        (Some((path_home, path)), Some((scope_home, scope))) => path_home == scope_home && path.starts_with(&scope),
        _ => false,
    }
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl ManifestValidator<'_, '_> {
    pub(super) fn spawn(
        &self,
        raw: RawSpawn,
        path: &FieldPath,
        has_credential: bool,
    ) -> Result<SpawnCapability, ParseError> {
        let programs = self.programs(raw.programs, &path.key("programs"))?;
        let operations = self.operations(raw.operations, &path.key("operations"), &programs)?;
        let env_path = path.key("env_passthrough");
        let env_passthrough = raw.env_passthrough.unwrap_or_default();
        for (index, name) in env_passthrough.iter().enumerate() {
            let element = env_path.index(index);
            if !is_env_name(name) {
                return Err(self.err(
                    &element,
                    format!("{name:?} is not an environment variable name"),
                    "use letters, digits and `_`, not starting with a digit, e.g. \"GIT_AUTHOR_NAME\"",
                ));
            }
            if env_passthrough[..index].contains(name) {
                return Err(self.err(&element, format!("`{name}` is listed twice"), "remove the duplicate"));
            }
            if is_aileron_variable(name) {
                return Err(self.err(
                    &element,
                    format!("`{name}` is Aileron's own setting: the daemon's token, passphrase and configuration never reach a program"),
                    "remove it; a program that needs a credential declares [capabilities.credential] and credential_env_keys",
                ));
            }
        }
        let credential_path = path.key("credential_env_keys");
        let credential_env_keys = raw.credential_env_keys.unwrap_or_default();
        if !credential_env_keys.is_empty() && !has_credential {
            return Err(self.err(
                &credential_path,
                "`credential_env_keys` needs a [capabilities.credential] table: there is no credential to inject",
                "declare the credential kind the program needs, or remove credential_env_keys",
            ));
        }
        for (index, name) in credential_env_keys.iter().enumerate() {
            let element = credential_path.index(index);
            if !env_passthrough.contains(name) {
                return Err(self.err(
                    &element,
                    format!("`{name}` must also be listed in env_passthrough"),
                    "credential_env_keys is a subset of env_passthrough: add the key there too",
                ));
            }
            if credential_env_keys[..index].contains(name) {
                return Err(self.err(&element, format!("`{name}` is listed twice"), "remove the duplicate"));
            }
        }
        let fs_read = self.scopes(raw.fs_read, &path.key("fs_read"))?;
        let fs_write = self.scopes(raw.fs_write, &path.key("fs_write"))?;
        let cwd = match raw.cwd {
            None => None,
            Some(cwd) => {
                if let Some(problem) = path_problem(&cwd) {
                    return Err(self.err(&path.key("cwd"), problem, "write e.g. cwd = \"~/code/\""));
                }
                // The working directory gets exactly the access of the scope it lies in, so it
                // must lie in one: a cwd of its own would widen what the program may touch.
                if !fs_read.iter().chain(&fs_write).any(|scope| path_within(&cwd, scope)) {
                    return Err(self.err(
                        &path.key("cwd"),
                        format!("`{cwd}` is not within any fs_read or fs_write scope"),
                        "a program's working directory must lie in a directory the manifest lets it read or write: \
                         list that directory in fs_read (read-only) or fs_write, or remove cwd",
                    ));
                }
                Some(cwd)
            }
        };
        let limits = self.limits(raw.limits, &path.key("limits"))?;
        Ok(SpawnCapability {
            programs,
            operations,
            env_passthrough,
            credential_env_keys,
            fs_read,
            fs_write,
            cwd,
            limits,
        })
    }

    fn programs(
        &self,
        raw: Option<Vec<super::raw::RawProgram>>,
        path: &FieldPath,
    ) -> Result<Vec<SpawnProgram>, ParseError> {
        let hint = "list the binaries it may run, e.g. programs = [{ path = \"/usr/bin/git\" }]";
        let raw = self.required(raw, path, hint)?;
        if raw.is_empty() {
            return Err(self.err(path, "`programs` must list at least one program", hint));
        }
        let mut programs: Vec<SpawnProgram> = Vec::new();
        for (index, program) in raw.into_iter().enumerate() {
            let element = path.index(index);
            let program_path = self.required(program.path, &element.key("path"), hint)?;
            if let Some(problem) = path_problem(&program_path) {
                return Err(self.err(&element.key("path"), problem, hint));
            }
            if program_path.ends_with('/') {
                return Err(self.err(
                    &element.key("path"),
                    format!("`{program_path}` names a directory, not a program"),
                    hint,
                ));
            }
            if programs.iter().any(|p| p.path == program_path) {
                return Err(self.err(
                    &element.key("path"),
                    format!("`{program_path}` is listed twice"),
                    "remove the duplicate",
                ));
            }
            let hash = match program.hash {
                None => None,
                Some(hash) => Some(ContentHash::parse(&hash).map_err(|e| {
                    self.err(
                        &element.key("hash"),
                        e.to_string(),
                        "pin the binary with sha256: and 64 lowercase hex digits",
                    )
                })?),
            };
            programs.push(SpawnProgram { path: program_path, hash });
        }
        Ok(programs)
    }

    fn operations(
        &self,
        raw: Option<BTreeMap<String, super::raw::RawOperation>>,
        path: &FieldPath,
        programs: &[SpawnProgram],
    ) -> Result<BTreeMap<String, SpawnOperation>, ParseError> {
        let hint = "declare each command, e.g. [capabilities.spawn.operations.status] argv = \"git status --short\"";
        let raw = self.required(raw, path, hint)?;
        if raw.is_empty() {
            return Err(self.err(path, "[capabilities.spawn.operations] must declare at least one operation", hint));
        }
        let mut operations = BTreeMap::new();
        for (name, operation) in raw {
            let op_path = path.key(&name);
            validate_op_name(&name).map_err(|reason| self.err(&op_path, reason, hint))?;
            let argv_path = op_path.key("argv");
            let argv = self.required(operation.argv, &argv_path, hint)?;
            if argv.trim().is_empty() {
                return Err(self.err(&argv_path, "`argv` must not be empty", hint));
            }
            if argv.chars().any(|c| c.is_control()) {
                return Err(self.err(
                    &argv_path,
                    "`argv` must not contain control characters (tabs, newlines)",
                    "separate words with single spaces",
                ));
            }
            let first = argv.split_whitespace().next().unwrap_or_default();
            let program = self.program_for(first, programs, &argv_path)?;
            let description_path = op_path.key("description");
            let description_hint = "say in plain words what the command does; it is shown in the consent prompt";
            let description = self.required(operation.description, &description_path, description_hint)?;
            let description = self.non_blank(description, &description_path, description_hint)?;
            operations.insert(name, SpawnOperation { argv, description, program });
        }
        Ok(operations)
    }

    /// The declared program an argv template's first word names: its exact path, or a unique file name.
    fn program_for(&self, first: &str, programs: &[SpawnProgram], path: &FieldPath) -> Result<String, ParseError> {
        if let Some(program) = programs.iter().find(|p| p.path == first) {
            return Ok(program.path.clone());
        }
        let matching: Vec<&SpawnProgram> = programs.iter().filter(|p| file_name(&p.path) == first).collect();
        match matching.as_slice() {
            [program] => Ok(program.path.clone()),
            [] => Err(self.err(
                path,
                format!("`{first}` (the first word of argv) is not a declared program"),
                "add it to [capabilities.spawn] programs or fix argv",
            )),
            several => Err(self.err(
                path,
                format!(
                    "`{first}` matches more than one declared program ({})",
                    several.iter().map(|p| p.path.as_str()).collect::<Vec<_>>().join(", ")
                ),
                "start argv with the program's full path",
            )),
        }
    }

    fn scopes(&self, raw: Option<Vec<String>>, path: &FieldPath) -> Result<Vec<String>, ParseError> {
        let scopes = raw.unwrap_or_default();
        for (index, scope) in scopes.iter().enumerate() {
            let element = path.index(index);
            if let Some(problem) = path_problem(scope) {
                return Err(self.err(&element, problem, "write absolute or ~/ paths, e.g. \"~/code/\""));
            }
            if scopes[..index].contains(scope) {
                return Err(self.err(&element, format!("`{scope}` is listed twice"), "remove the duplicate"));
            }
        }
        Ok(scopes)
    }

    fn limits(&self, raw: Option<RawLimits>, path: &FieldPath) -> Result<SpawnLimits, ParseError> {
        let defaults = SpawnLimits::default();
        let Some(raw) = raw else {
            return Ok(defaults);
        };
        let limit = |value: Option<i64>, key: &str, default: u64| -> Result<u64, ParseError> {
            match value {
                None => Ok(default),
                Some(bytes) if bytes >= 1 => Ok(bytes as u64),
                Some(bytes) => Err(self.err(
                    &path.key(key),
                    format!("`{key}` must be a positive number of bytes (got {bytes})"),
                    format!("omit it for the default of {default} bytes"),
                )),
            }
        };
        Ok(SpawnLimits {
            max_stdout_bytes: limit(raw.max_stdout_bytes, "max_stdout_bytes", defaults.max_stdout_bytes)?,
            max_stderr_bytes: limit(raw.max_stderr_bytes, "max_stderr_bytes", defaults.max_stderr_bytes)?,
        })
    }
}
