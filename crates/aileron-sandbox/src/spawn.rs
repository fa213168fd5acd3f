//! The spawn functions of `aileron_host` (SPEC §4.2, §5): the sandbox side only. A guest's
//! envelope or operation is parsed here and handed to the embedder's [`HostHooks::spawn`], where
//! the gate, the confinement, credentials and audit live; the captured output is buffered in the
//! call's store for the guest to pull.
//!
//! Two conventions exist and are served both, chosen per module from the declared signature of
//! its spawn imports: the seed ADR's handle-based one (`spawn`/`spawn_op` return a handle ≥ 0 and
//! the accessors take it) and the original project's single-slot one (they return 0 and the
//! accessors read the last spawn).

use aileron_core::policy::SpawnEnvelope;
use aileron_core::{Boundary, Failure, FailureClass};
use wasmtime::{Caller, ExternType, Linker, Module};

use crate::context::CallContext;
use crate::guest_memory::GuestMemory;
use crate::hooks::{GuestSpawn, MODULE, SpawnOutput};

/// The spawn functions of the ABI.
pub(crate) const FUNCTIONS: [&str; 5] = ["spawn", "spawn_op", "spawn_status", "spawn_output_size", "spawn_output_read"];

/// Return codes of `spawn` / `spawn_op`.
const SPAWN_FAILED: i32 = -1;
const SPAWN_MALFORMED: i32 = -2;
const SPAWN_SANDBOX_UNAVAILABLE: i32 = -3;
/// Returned by the accessors for an unknown handle, a spawn that never ran or a bad `which`.
const NO_OUTPUT: i32 = -1;

/// Spawns one call may make; each keeps its output until the call ends.
pub(crate) const MAX_SPAWNS_PER_CALL: usize = 64;

impl SpawnOutput {
    fn stream(&self, which: i32) -> Option<&[u8]> {
        match which {
            0 => Some(&self.stdout),
            1 => Some(&self.stderr),
            _ => None,
        }
    }
}

/// Which spawn convention a module was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Convention {
    /// Handles returned by `spawn`/`spawn_op` and passed to the accessors.
    Handles,
    /// `spawn`/`spawn_op` return 0; the accessors read the last spawn.
    SingleSlot,
}

impl Convention {
    /// The convention a module's spawn imports declare; a module importing no accessor is served
    /// the handle convention. Accessors that disagree are refused with a message naming them.
    pub(crate) fn of(module: &Module) -> Result<Convention, Failure> {
        let mut votes: Vec<(&str, Convention)> = Vec::new();
        for import in module.imports().filter(|import| import.module() == MODULE) {
            let ExternType::Func(ty) = import.ty() else { continue };
            let params = ty.params().len();
            let convention = match (import.name(), params) {
                ("spawn_status", 0) | ("spawn_output_size", 1) | ("spawn_output_read", 3) => Convention::SingleSlot,
                ("spawn_status", 1) | ("spawn_output_size", 2) | ("spawn_output_read", 4) => Convention::Handles,
                _ => continue,
            };
            votes.push((import.name(), convention));
        }
        let Some(&(_, first)) = votes.first() else {
            return Ok(Convention::Handles);
        };
        if let Some((name, _)) = votes.iter().find(|(_, convention)| *convention != first) {
            return Err(Failure::runtime_error(
                Boundary::Sandbox,
                format!(
                    "the module's spawn imports mix the handle and the single-slot conventions (`{MODULE}.{name}` \
                     disagrees with `{MODULE}.{}`)",
                    votes[0].0
                ),
            ));
        }
        Ok(first)
    }
}

fn malformed(context: &mut CallContext, function: &str, problem: String) -> i32 {
    context.record_failure(Failure::runtime_error(
        Boundary::Sandbox,
        format!("the connector sent a malformed {function} request: {problem}"),
    ));
    SPAWN_MALFORMED
}

/// Hands a parsed request to the embedder and stores what came back; the guest's return code.
async fn run(
    caller: &mut Caller<'_, CallContext>,
    request: GuestSpawn,
    convention: Convention,
) -> wasmtime::Result<i32> {
    let context = caller.data_mut();
    if context.spawns.len() >= MAX_SPAWNS_PER_CALL {
        context.record_failure(Failure::resource_limit(
            "spawns",
            format!("a connector call may spawn at most {MAX_SPAWNS_PER_CALL} programs"),
        ));
        return Ok(SPAWN_FAILED);
    }
    // The single slot never shows a previous program's output as this one's.
    context.last_spawn = None;
    let (hooks, deadline) = (context.hooks.clone(), context.deadline);
    match hooks.spawn(request, deadline).await {
        Ok(output) => {
            let context = caller.data_mut();
            context.spawns.push(output);
            let handle = context.spawns.len() - 1;
            context.last_spawn = Some(handle);
            Ok(match convention {
                Convention::Handles => handle as i32,
                Convention::SingleSlot => 0,
            })
        }
        Err(failure) => {
            let code = if failure.class == FailureClass::SpawnSandboxUnavailable {
                SPAWN_SANDBOX_UNAVAILABLE
            } else {
                SPAWN_FAILED
            };
            caller.data_mut().fail_host_call(failure, code)
        }
    }
}

fn output(context: &CallContext, handle: Option<i32>) -> Option<&SpawnOutput> {
    let index = match handle {
        Some(handle) => usize::try_from(handle).ok()?,
        None => context.last_spawn?,
    };
    context.spawns.get(index)
}

fn size(context: &CallContext, handle: Option<i32>, which: i32) -> i32 {
    output(context, handle)
        .and_then(|output| output.stream(which))
        .map_or(NO_OUTPUT, |bytes| i32::try_from(bytes.len()).unwrap_or(i32::MAX))
}

fn read(
    caller: &mut Caller<'_, CallContext>,
    handle: Option<i32>,
    which: i32,
    dst: i32,
    len: i32,
) -> wasmtime::Result<i32> {
    let (mut memory, context) = GuestMemory::of(caller, "spawn_output_read")?;
    let Some(bytes) = output(context, handle).and_then(|output| output.stream(which)) else {
        return Ok(NO_OUTPUT);
    };
    let count = bytes.len().min(len as u32 as usize).min(i32::MAX as usize);
    memory.write(dst as u32, &bytes[..count])?;
    Ok(count as i32)
}

/// Defines the spawn functions in `linker` with the signatures of `convention`.
pub(crate) fn add_to_linker(linker: &mut Linker<CallContext>, convention: Convention) -> wasmtime::Result<()> {
    linker.func_wrap_async(MODULE, "spawn", move |mut caller: Caller<'_, CallContext>, (ptr, len): (i32, i32)| {
        Box::new(async move {
            let (memory, context) = GuestMemory::of(&mut caller, "spawn")?;
            let parsed = serde_json::from_slice::<SpawnEnvelope>(memory.bytes(ptr as u32, len as u32)?);
            let envelope = match parsed {
                Ok(envelope) => envelope,
                Err(error) => {
                    return Ok(malformed(
                        context,
                        "spawn",
                        format!("the envelope is not JSON of the form {{program, argv, env?, cwd?, stdin?, credential_env_keys?}}: {error}"),
                    ));
                }
            };
            run(&mut caller, GuestSpawn::Envelope(envelope), convention).await
        })
    })?;

    linker.func_wrap_async(
        MODULE,
        "spawn_op",
        move |mut caller: Caller<'_, CallContext>, (op_ptr, op_len, args_ptr, args_len): (i32, i32, i32, i32)| {
            Box::new(async move {
                let (memory, context) = GuestMemory::of(&mut caller, "spawn_op")?;
                let op = match std::str::from_utf8(memory.bytes(op_ptr as u32, op_len as u32)?) {
                    Ok(op) if !op.is_empty() => op.to_string(),
                    _ => return Ok(malformed(context, "spawn_op", "the operation name is empty or not UTF-8".into())),
                };
                let args_bytes = memory.bytes(args_ptr as u32, args_len as u32)?;
                let args = if args_bytes.is_empty() {
                    serde_json::Value::Object(serde_json::Map::new())
                } else {
                    match serde_json::from_slice::<serde_json::Value>(args_bytes) {
                        Ok(args @ serde_json::Value::Object(_)) => args,
                        _ => {
                            return Ok(malformed(context, "spawn_op", "the arguments are not a JSON object".into()));
                        }
                    }
                };
                run(&mut caller, GuestSpawn::Operation { op, args }, convention).await
            })
        },
    )?;

    match convention {
        Convention::Handles => {
            linker.func_wrap(MODULE, "spawn_status", |caller: Caller<'_, CallContext>, handle: i32| -> i32 {
                output(caller.data(), Some(handle)).map_or(NO_OUTPUT, |output| output.exit_code)
            })?;
            linker.func_wrap(
                MODULE,
                "spawn_output_size",
                |caller: Caller<'_, CallContext>, handle: i32, which: i32| -> i32 {
                    size(caller.data(), Some(handle), which)
                },
            )?;
            linker.func_wrap(
                MODULE,
                "spawn_output_read",
                |mut caller: Caller<'_, CallContext>, handle: i32, which: i32, dst: i32, len: i32| {
                    read(&mut caller, Some(handle), which, dst, len)
                },
            )?;
        }
        Convention::SingleSlot => {
            linker.func_wrap(MODULE, "spawn_status", |caller: Caller<'_, CallContext>| -> i32 {
                output(caller.data(), None).map_or(NO_OUTPUT, |output| output.exit_code)
            })?;
            linker.func_wrap(MODULE, "spawn_output_size", |caller: Caller<'_, CallContext>, which: i32| -> i32 {
                size(caller.data(), None, which)
            })?;
            linker.func_wrap(
                MODULE,
                "spawn_output_read",
                |mut caller: Caller<'_, CallContext>, which: i32, dst: i32, len: i32| {
                    read(&mut caller, None, which, dst, len)
                },
            )?;
        }
    }
    Ok(())
}
