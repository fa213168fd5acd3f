//! Load-time checks of a module's imports and exports (SPEC §3.1 `[capabilities.runtime]`, §4.1).
//!
//! A module is refused before it can run when it imports anything this runtime does not serve
//! (`connector_runtime_error`, naming the import), when it imports an `aileron_host` function its
//! manifest does not list (`capability_denied`, boundary `connector_manifest`), or when it is not a
//! WASI command module exporting `_start` and `memory`.

use aileron_core::{Boundary, Failure};
use wasmtime::{ExternType, Module};

use crate::{hooks, host, spawn, wasi};

/// Which `aileron_host` functions a module may import: `[capabilities.runtime] imports` of its
/// manifest. `None` (no such table) allows every function of the ABI.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportPolicy {
    /// Entries name a host function either bare (`http_request`) or qualified
    /// (`aileron_host.http_request`); other entries (e.g. `wasi:cli/stdout`) match nothing.
    pub allowed_host_imports: Option<Vec<String>>,
}

impl ImportPolicy {
    fn allows(&self, function: &str) -> bool {
        let Some(allowed) = &self.allowed_host_imports else {
            return true;
        };
        allowed.iter().any(|entry| {
            let entry = entry.trim();
            entry == function
                || entry.strip_prefix(hooks::MODULE).and_then(|rest| rest.strip_prefix('.')) == Some(function)
        })
    }
}

/// Checks what does not depend on the manifest; returns the `aileron_host` functions imported.
pub(crate) fn check_module(module: &Module) -> Result<Vec<String>, Failure> {
    let refuse = |message: String| Failure::runtime_error(Boundary::Sandbox, message);
    let mut host_imports = Vec::new();
    for import in module.imports() {
        let (namespace, name) = (import.module(), import.name());
        if !matches!(import.ty(), ExternType::Func(_)) {
            return Err(refuse(format!(
                "the module imports `{namespace}.{name}`, which is not a function: connectors may import only \
                 host functions and must define their own memory"
            )));
        }
        let known = match namespace {
            hooks::MODULE => host::FUNCTIONS.contains(&name) || spawn::FUNCTIONS.contains(&name),
            wasi::MODULE => wasi::defines(name),
            _ => false,
        };
        if !known {
            return Err(refuse(format!(
                "the module imports `{namespace}.{name}`, which this runtime does not provide (it serves \
                 `{}` preview 1 and `{}`: {}, {})",
                wasi::MODULE,
                hooks::MODULE,
                host::FUNCTIONS.join(", "),
                spawn::FUNCTIONS.join(", ")
            )));
        }
        if namespace == hooks::MODULE && !host_imports.iter().any(|imported| imported == name) {
            host_imports.push(name.to_string());
        }
    }
    match module.get_export("_start") {
        Some(ExternType::Func(ty)) if ty.params().len() == 0 && ty.results().len() == 0 => {}
        _ => {
            return Err(refuse(
                "the module exports no `_start` function taking and returning nothing: connectors must be WASI \
                 command modules (built for wasm32-wasip1)"
                    .into(),
            ));
        }
    }
    if !matches!(module.get_export("memory"), Some(ExternType::Memory(_))) {
        return Err(refuse("the module exports no `memory`: the host functions need the guest's linear memory".into()));
    }
    Ok(host_imports)
}

/// Checks the manifest's allow-list.
pub(crate) fn check_policy(host_imports: &[String], policy: &ImportPolicy) -> Result<(), Failure> {
    if let Some(function) = host_imports.iter().find(|function| !policy.allows(function)) {
        let allowed = policy.allowed_host_imports.clone().unwrap_or_default();
        return Err(Failure::capability_denied(
            Boundary::ConnectorManifest,
            format!(
                "the module imports `{}.{function}` but its manifest's [capabilities.runtime] imports does not list it",
                hooks::MODULE
            ),
        )
        .with_detail("requested", format!("{}.{function}", hooks::MODULE))
        .with_detail("granted", allowed));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_entries_match_bare_or_qualified_names() {
        let policy = |entries: &[&str]| ImportPolicy {
            allowed_host_imports: Some(entries.iter().map(|e| e.to_string()).collect()),
        };
        // (policy, function, allowed)
        let table = [
            (ImportPolicy::default(), "http_request", true),
            (policy(&[]), "log", false),
            (policy(&["log"]), "log", true),
            (policy(&["aileron_host.log"]), "log", true),
            (policy(&["aileron_host.log"]), "http_request", false),
            (policy(&["aileron_hostlog"]), "log", false),
            (policy(&["wasi:cli/stdout"]), "log", false),
        ];
        for (policy, function, allowed) in table {
            assert_eq!(policy.allows(function), allowed, "{policy:?} {function}");
        }
    }

    #[test]
    fn spawn_functions_are_checked_like_every_other() {
        let imports = vec!["log".to_string(), "spawn".to_string()];
        let only_log = ImportPolicy { allowed_host_imports: Some(vec!["log".into()]) };
        let failure = check_policy(&imports, &only_log).unwrap_err();
        assert!(failure.message.contains("does not list it"), "{}", failure.message);
        assert_eq!(failure.boundary, Boundary::ConnectorManifest);
        assert!(check_policy(&imports, &ImportPolicy::default()).is_ok());
        let both = ImportPolicy { allowed_host_imports: Some(vec!["log".into(), "aileron_host.spawn".into()]) };
        assert!(check_policy(&imports, &both).is_ok());
    }
}
