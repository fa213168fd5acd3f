//! A deny-by-default WASI preview-1 shim (import module `wasi_snapshot_preview1`).
//!
//! It serves what std Rust `wasm32-wasip1` and Go `GOOS=wasip1` guests need and nothing more:
//! empty argv and environment, real clocks and randomness, stdin = the request bytes, stdout and
//! stderr captured by the host, no preopened directories (so no file can ever be opened), and a
//! `poll_oneoff` whose clock subscriptions really sleep, asynchronously, within the wall-time
//! limit. Every other preview-1 function is linked with its real signature and denies with an
//! errno: `EBADF` for descriptors other than 0–2 and for every path and socket call (no such
//! descriptor can exist), `ENOTSUP`/`ESPIPE` for the standard streams, `ENOSYS` for
//! `proc_raise`. Linking the complete set means a guest never fails to load because its toolchain
//! imported a function it does not call; an import outside preview 1 is refused at load instead.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wasmtime::{Caller, FuncType, Linker, Val, ValType};

use crate::context::CallContext;
use crate::guest_memory::GuestMemory;
use crate::limits::{LimitKind, LimitStop};

pub(crate) const MODULE: &str = "wasi_snapshot_preview1";

/// WASI errno values (preview 1 `errno` enum).
mod errno {
    pub const SUCCESS: i32 = 0;
    pub const BADF: i32 = 8;
    pub const INVAL: i32 = 28;
    pub const IO: i32 = 29;
    pub const NOSYS: i32 = 52;
    pub const NOTSOCK: i32 = 57;
    pub const NOTSUP: i32 = 58;
    pub const SPIPE: i32 = 70;
}

const STDIN: u32 = 0;
const STDOUT: u32 = 1;
const STDERR: u32 = 2;

const FILETYPE_CHARACTER_DEVICE: u8 = 2;

/// Rights bits (preview 1 `rights` flags) granted on the standard streams.
const RIGHT_FD_READ: u64 = 1 << 1;
const RIGHT_FD_FDSTAT_SET_FLAGS: u64 = 1 << 3;
const RIGHT_FD_WRITE: u64 = 1 << 6;
const RIGHT_FD_FILESTAT_GET: u64 = 1 << 21;
const RIGHT_POLL_FD_READWRITE: u64 = 1 << 27;

const CLOCK_REALTIME: u32 = 0;
const CLOCK_MONOTONIC: u32 = 1;

const EVENTTYPE_CLOCK: u8 = 0;
const EVENTTYPE_FD_READ: u8 = 1;
const EVENTTYPE_FD_WRITE: u8 = 2;
const SUBCLOCKFLAGS_ABSTIME: u16 = 1;
const SUBSCRIPTION_SIZE: u32 = 48;
const EVENT_SIZE: u32 = 32;

/// `proc_exit`: the guest ended the call with this code. Raised as a trap so the guest stops at
/// once; the outcome mapping turns it back into an exit code.
#[derive(Debug, thiserror::Error)]
#[error("guest exited with code {0}")]
pub(crate) struct GuestExit(pub(crate) i32);

/// The functions implemented here (the others are in [`DENIED`]).
const IMPLEMENTED: [&str; 20] = [
    "args_get",
    "args_sizes_get",
    "environ_get",
    "environ_sizes_get",
    "clock_res_get",
    "clock_time_get",
    "random_get",
    "fd_write",
    "fd_read",
    "fd_close",
    "fd_fdstat_get",
    "fd_fdstat_set_flags",
    "fd_prestat_get",
    "fd_prestat_dir_name",
    "fd_seek",
    "fd_tell",
    "fd_filestat_get",
    "proc_exit",
    "sched_yield",
    "poll_oneoff",
];

/// How a denied function answers.
#[derive(Clone, Copy)]
enum Denial {
    /// The first parameter is a descriptor: `EBADF` unless it is 0–2, then this errno.
    Descriptor(i32),
    Always(i32),
}

/// The rest of preview 1: name, parameter types (`i` = i32, `I` = i64; every one returns an errno)
/// and the denial.
const DENIED: [(&str, &str, Denial); 26] = [
    ("fd_advise", "iIIi", Denial::Descriptor(errno::SPIPE)),
    ("fd_allocate", "iII", Denial::Descriptor(errno::NOTSUP)),
    ("fd_datasync", "i", Denial::Descriptor(errno::INVAL)),
    ("fd_fdstat_set_rights", "iII", Denial::Descriptor(errno::NOTSUP)),
    ("fd_filestat_set_size", "iI", Denial::Descriptor(errno::NOTSUP)),
    ("fd_filestat_set_times", "iIIi", Denial::Descriptor(errno::NOTSUP)),
    ("fd_pread", "iiiIi", Denial::Descriptor(errno::SPIPE)),
    ("fd_pwrite", "iiiIi", Denial::Descriptor(errno::SPIPE)),
    ("fd_readdir", "iiiIi", Denial::Descriptor(errno::NOTSUP)),
    ("fd_renumber", "ii", Denial::Descriptor(errno::NOTSUP)),
    ("fd_sync", "i", Denial::Descriptor(errno::INVAL)),
    ("path_create_directory", "iii", Denial::Always(errno::BADF)),
    ("path_filestat_get", "iiiii", Denial::Always(errno::BADF)),
    ("path_filestat_set_times", "iiiiIIi", Denial::Always(errno::BADF)),
    ("path_link", "iiiiiii", Denial::Always(errno::BADF)),
    ("path_open", "iiiiiIIii", Denial::Always(errno::BADF)),
    ("path_readlink", "iiiiii", Denial::Always(errno::BADF)),
    ("path_remove_directory", "iii", Denial::Always(errno::BADF)),
    ("path_rename", "iiiiii", Denial::Always(errno::BADF)),
    ("path_symlink", "iiiii", Denial::Always(errno::BADF)),
    ("path_unlink_file", "iii", Denial::Always(errno::BADF)),
    ("proc_raise", "i", Denial::Always(errno::NOSYS)),
    ("sock_accept", "iii", Denial::Descriptor(errno::NOTSOCK)),
    ("sock_recv", "iiiiii", Denial::Descriptor(errno::NOTSOCK)),
    ("sock_send", "iiiii", Denial::Descriptor(errno::NOTSOCK)),
    ("sock_shutdown", "ii", Denial::Descriptor(errno::NOTSOCK)),
];

/// Whether this shim defines `name` (every preview-1 function).
pub(crate) fn defines(name: &str) -> bool {
    IMPLEMENTED.contains(&name) || DENIED.iter().any(|(denied, _, _)| *denied == name)
}

fn is_standard_stream(fd: i32) -> bool {
    (0..=2).contains(&fd)
}

/// Nanoseconds on the monotonic clock: time since the first use in this process, so values are
/// comparable across calls (a guest may only rely on them never going backwards).
fn monotonic_now() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn realtime_now() -> u64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX)
}

/// Reads the time of a supported clock, `None` for the CPU-time clocks we do not offer.
fn clock_now(id: u32) -> Option<u64> {
    match id {
        CLOCK_REALTIME => Some(realtime_now()),
        CLOCK_MONOTONIC => Some(monotonic_now()),
        _ => None,
    }
}

type Ctx<'a> = Caller<'a, CallContext>;

/// Defines every preview-1 function in `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<CallContext>) -> wasmtime::Result<()> {
    add_environment(linker)?;
    add_clocks_and_randomness(linker)?;
    add_streams(linker)?;
    add_descriptor_queries(linker)?;
    add_process(linker)?;
    add_poll(linker)?;
    add_denied(linker)
}

/// No argv, no environment: both are empty lists.
fn add_environment(linker: &mut Linker<CallContext>) -> wasmtime::Result<()> {
    fn empty_sizes(
        mut caller: Ctx<'_>,
        count_ptr: i32,
        size_ptr: i32,
        function: &'static str,
    ) -> wasmtime::Result<i32> {
        let (mut memory, _) = GuestMemory::of(&mut caller, function)?;
        memory.write_u32(count_ptr as u32, 0)?;
        memory.write_u32(size_ptr as u32, 0)?;
        Ok(errno::SUCCESS)
    }
    linker.func_wrap(MODULE, "args_sizes_get", |caller: Ctx<'_>, count: i32, size: i32| {
        empty_sizes(caller, count, size, "args_sizes_get")
    })?;
    linker.func_wrap(MODULE, "environ_sizes_get", |caller: Ctx<'_>, count: i32, size: i32| {
        empty_sizes(caller, count, size, "environ_sizes_get")
    })?;
    // With zero entries there is nothing to write into the guest's arrays.
    linker.func_wrap(MODULE, "args_get", |_: Ctx<'_>, _argv: i32, _buf: i32| errno::SUCCESS)?;
    linker.func_wrap(MODULE, "environ_get", |_: Ctx<'_>, _environ: i32, _buf: i32| errno::SUCCESS)?;
    Ok(())
}

fn add_clocks_and_randomness(linker: &mut Linker<CallContext>) -> wasmtime::Result<()> {
    linker.func_wrap(
        MODULE,
        "clock_res_get",
        |mut caller: Ctx<'_>, id: i32, res_ptr: i32| -> wasmtime::Result<i32> {
            if clock_now(id as u32).is_none() {
                return Ok(errno::INVAL);
            }
            let (mut memory, _) = GuestMemory::of(&mut caller, "clock_res_get")?;
            memory.write_u64(res_ptr as u32, 1)?;
            Ok(errno::SUCCESS)
        },
    )?;
    linker.func_wrap(
        MODULE,
        "clock_time_get",
        |mut caller: Ctx<'_>, id: i32, _precision: i64, time_ptr: i32| -> wasmtime::Result<i32> {
            let Some(now) = clock_now(id as u32) else {
                return Ok(errno::INVAL);
            };
            let (mut memory, _) = GuestMemory::of(&mut caller, "clock_time_get")?;
            memory.write_u64(time_ptr as u32, now)?;
            Ok(errno::SUCCESS)
        },
    )?;
    linker.func_wrap(MODULE, "random_get", |mut caller: Ctx<'_>, buf: i32, len: i32| -> wasmtime::Result<i32> {
        let (mut memory, _) = GuestMemory::of(&mut caller, "random_get")?;
        let target = memory.bytes_mut(buf as u32, len as u32)?;
        Ok(if getrandom::fill(target).is_ok() { errno::SUCCESS } else { errno::IO })
    })?;
    Ok(())
}

/// stdin, stdout and stderr. No other descriptor exists.
fn add_streams(linker: &mut Linker<CallContext>) -> wasmtime::Result<()> {
    linker.func_wrap(
        MODULE,
        "fd_write",
        |mut caller: Ctx<'_>, fd: i32, iovs: i32, iovs_len: i32, nwritten_ptr: i32| -> wasmtime::Result<i32> {
            let fd = fd as u32;
            if fd != STDOUT && fd != STDERR {
                return Ok(errno::BADF);
            }
            let (mut memory, context) = GuestMemory::of(&mut caller, "fd_write")?;
            let mut written: u32 = 0;
            for at in memory.iovecs(iovs as u32, iovs_len as u32)? {
                let (buf, len) = memory.iovec(at)?;
                let data = memory.bytes(buf, len)?;
                if fd == STDOUT {
                    if context.stdout.len() + data.len() > context.max_stdout_bytes {
                        return Err(LimitStop(LimitKind::Stdout).into());
                    }
                    context.stdout.extend_from_slice(data);
                } else {
                    context.stderr.push(data);
                }
                written = written.saturating_add(len);
            }
            memory.write_u32(nwritten_ptr as u32, written)?;
            Ok(errno::SUCCESS)
        },
    )?;
    linker.func_wrap(
        MODULE,
        "fd_read",
        |mut caller: Ctx<'_>, fd: i32, iovs: i32, iovs_len: i32, nread_ptr: i32| -> wasmtime::Result<i32> {
            if fd as u32 != STDIN {
                return Ok(errno::BADF);
            }
            let (mut memory, context) = GuestMemory::of(&mut caller, "fd_read")?;
            let mut read: u32 = 0;
            for at in memory.iovecs(iovs as u32, iovs_len as u32)? {
                let (buf, len) = memory.iovec(at)?;
                let remaining = &context.stdin[context.stdin_offset..];
                let count = remaining.len().min(len as usize);
                memory.write(buf, &remaining[..count])?;
                context.stdin_offset += count;
                read += count as u32;
                if context.stdin_offset == context.stdin.len() {
                    break;
                }
            }
            memory.write_u32(nread_ptr as u32, read)?;
            Ok(errno::SUCCESS)
        },
    )?;
    // Closing a standard stream is accepted and has no effect: the host owns the buffers.
    linker.func_wrap(
        MODULE,
        "fd_close",
        |_: Ctx<'_>, fd: i32| {
            if is_standard_stream(fd) { errno::SUCCESS } else { errno::BADF }
        },
    )?;
    linker.func_wrap(
        MODULE,
        "fd_seek",
        |_: Ctx<'_>, fd: i32, _offset: i64, _whence: i32, _new_offset: i32| {
            if is_standard_stream(fd) { errno::SPIPE } else { errno::BADF }
        },
    )?;
    linker.func_wrap(
        MODULE,
        "fd_tell",
        |_: Ctx<'_>, fd: i32, _offset_ptr: i32| {
            if is_standard_stream(fd) { errno::SPIPE } else { errno::BADF }
        },
    )?;
    Ok(())
}

/// Descriptor metadata: the standard streams are character devices; there are no preopens, so
/// the guest's preopen scan (fd 3, 4, ... until `EBADF`) ends at once.
fn add_descriptor_queries(linker: &mut Linker<CallContext>) -> wasmtime::Result<()> {
    linker.func_wrap(
        MODULE,
        "fd_fdstat_get",
        |mut caller: Ctx<'_>, fd: i32, stat_ptr: i32| -> wasmtime::Result<i32> {
            let rights = match fd as u32 {
                STDIN => RIGHT_FD_READ,
                STDOUT | STDERR => RIGHT_FD_WRITE,
                _ => return Ok(errno::BADF),
            } | RIGHT_FD_FDSTAT_SET_FLAGS
                | RIGHT_FD_FILESTAT_GET
                | RIGHT_POLL_FD_READWRITE;
            // fdstat: filetype u8 @0, flags u16 @2, rights_base u64 @8, rights_inheriting u64 @16.
            let mut stat = [0u8; 24];
            stat[0] = FILETYPE_CHARACTER_DEVICE;
            stat[8..16].copy_from_slice(&rights.to_le_bytes());
            let (mut memory, _) = GuestMemory::of(&mut caller, "fd_fdstat_get")?;
            memory.write(stat_ptr as u32, &stat)?;
            Ok(errno::SUCCESS)
        },
    )?;
    // Go marks its standard streams non-blocking; our streams never block, so the flags are moot.
    linker.func_wrap(MODULE, "fd_fdstat_set_flags", |_: Ctx<'_>, fd: i32, _flags: i32| {
        if is_standard_stream(fd) { errno::SUCCESS } else { errno::BADF }
    })?;
    linker.func_wrap(
        MODULE,
        "fd_filestat_get",
        |mut caller: Ctx<'_>, fd: i32, stat_ptr: i32| -> wasmtime::Result<i32> {
            if !is_standard_stream(fd) {
                return Ok(errno::BADF);
            }
            // filestat: dev, ino, filetype u8 @16, nlink, size, atim, mtim, ctim; all zero but the type.
            let mut stat = [0u8; 64];
            stat[16] = FILETYPE_CHARACTER_DEVICE;
            let (mut memory, _) = GuestMemory::of(&mut caller, "fd_filestat_get")?;
            memory.write(stat_ptr as u32, &stat)?;
            Ok(errno::SUCCESS)
        },
    )?;
    linker.func_wrap(MODULE, "fd_prestat_get", |_: Ctx<'_>, _fd: i32, _prestat_ptr: i32| errno::BADF)?;
    linker.func_wrap(MODULE, "fd_prestat_dir_name", |_: Ctx<'_>, _fd: i32, _path: i32, _len: i32| errno::BADF)?;
    Ok(())
}

fn add_process(linker: &mut Linker<CallContext>) -> wasmtime::Result<()> {
    linker.func_wrap(MODULE, "proc_exit", |_: Ctx<'_>, code: i32| -> wasmtime::Result<()> {
        Err(GuestExit(code).into())
    })?;
    // The epoch callback already yields to the executor regularly; nothing to do here.
    linker.func_wrap(MODULE, "sched_yield", |_: Ctx<'_>| errno::SUCCESS)?;
    Ok(())
}

/// One decoded `poll_oneoff` subscription.
enum Subscription {
    Clock { userdata: u64, wake: Option<Instant> },
    Descriptor { userdata: u64, kind: u8, fd: u32 },
    Invalid { userdata: u64, kind: u8 },
}

/// When a clock subscription fires, as an `Instant` (`None` = an unsupported clock).
fn clock_wake(now: Instant, id: u32, timeout: u64, flags: u16) -> Option<Instant> {
    let clock_now = clock_now(id)?;
    let wait = if flags & SUBCLOCKFLAGS_ABSTIME != 0 { timeout.saturating_sub(clock_now) } else { timeout };
    // A timeout too far in the future to represent is as good as never; the deadline caps it.
    Some(now.checked_add(Duration::from_nanos(wait)).unwrap_or(now + Duration::from_secs(86_400 * 365)))
}

fn decode_subscriptions(memory: &GuestMemory<'_>, ptr: u32, count: u32) -> wasmtime::Result<Vec<Subscription>> {
    memory.bytes(ptr, count.saturating_mul(SUBSCRIPTION_SIZE))?;
    let now = Instant::now();
    (0..count)
        .map(|i| {
            let at = ptr + i * SUBSCRIPTION_SIZE;
            let userdata = memory.read_u64(at)?;
            let kind = memory.bytes(at + 8, 1)?[0];
            Ok(match kind {
                EVENTTYPE_CLOCK => {
                    let id = memory.read_u32(at + 16)?;
                    let timeout = memory.read_u64(at + 24)?;
                    let flags = memory.read_u16(at + 40)?;
                    Subscription::Clock { userdata, wake: clock_wake(now, id, timeout, flags) }
                }
                EVENTTYPE_FD_READ | EVENTTYPE_FD_WRITE => {
                    Subscription::Descriptor { userdata, kind, fd: memory.read_u32(at + 16)? }
                }
                _ => Subscription::Invalid { userdata, kind },
            })
        })
        .collect()
}

/// An event to report: (userdata, errno, type, nbytes).
type Event = (u64, i32, u8, u64);

/// Events that are ready without waiting: every descriptor subscription (the standard streams
/// never block), unsupported clocks and malformed subscriptions (reported with an error).
fn immediate_events(subscriptions: &[Subscription], stdin_remaining: u64) -> Vec<Event> {
    let mut events = Vec::new();
    for subscription in subscriptions {
        match *subscription {
            Subscription::Descriptor { userdata, kind, fd } => {
                let ready = match (kind, fd) {
                    (EVENTTYPE_FD_READ, STDIN) => Some(stdin_remaining),
                    (EVENTTYPE_FD_WRITE, STDOUT | STDERR) => Some(u64::from(u32::MAX)),
                    _ => None,
                };
                events.push(match ready {
                    Some(nbytes) => (userdata, errno::SUCCESS, kind, nbytes),
                    None => (userdata, errno::BADF, kind, 0),
                });
            }
            Subscription::Clock { userdata, wake: None } => events.push((userdata, errno::INVAL, EVENTTYPE_CLOCK, 0)),
            Subscription::Invalid { userdata, kind } => events.push((userdata, errno::INVAL, kind, 0)),
            Subscription::Clock { wake: Some(_), .. } => {}
        }
    }
    events
}

fn add_poll(linker: &mut Linker<CallContext>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        MODULE,
        "poll_oneoff",
        |mut caller: Ctx<'_>, (in_ptr, out_ptr, count, nevents_ptr): (i32, i32, i32, i32)| {
            Box::new(async move {
                let count = count as u32;
                if count == 0 {
                    return Ok(errno::INVAL);
                }
                let (memory, context) = GuestMemory::of(&mut caller, "poll_oneoff")?;
                // Check the output array up front so a bad pointer traps before any sleep.
                memory.bytes(out_ptr as u32, count.saturating_mul(EVENT_SIZE))?;
                let subscriptions = decode_subscriptions(&memory, in_ptr as u32, count)?;
                let stdin_remaining = (context.stdin.len() - context.stdin_offset) as u64;
                let deadline = context.deadline;
                let mut events = immediate_events(&subscriptions, stdin_remaining);
                if events.is_empty() {
                    let wakes = subscriptions.iter().filter_map(|s| match s {
                        Subscription::Clock { userdata, wake: Some(wake) } => Some((*userdata, *wake)),
                        _ => None,
                    });
                    let wakes: Vec<(u64, Instant)> = wakes.collect();
                    let earliest = wakes.iter().map(|(_, wake)| *wake).min().expect("a clock subscription remains");
                    tokio::time::sleep_until(earliest.min(deadline).into()).await;
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(LimitStop(LimitKind::Time).into());
                    }
                    events = wakes
                        .into_iter()
                        .filter(|(_, wake)| *wake <= now)
                        .map(|(userdata, _)| (userdata, errno::SUCCESS, EVENTTYPE_CLOCK, 0))
                        .collect();
                }
                let (mut memory, _) = GuestMemory::of(&mut caller, "poll_oneoff")?;
                for (i, (userdata, error, kind, nbytes)) in events.iter().enumerate() {
                    // event: userdata u64 @0, error u16 @8, type u8 @10, fd_readwrite.nbytes u64 @16.
                    let mut event = [0u8; EVENT_SIZE as usize];
                    event[0..8].copy_from_slice(&userdata.to_le_bytes());
                    event[8..10].copy_from_slice(&(*error as u16).to_le_bytes());
                    event[10] = *kind;
                    event[16..24].copy_from_slice(&nbytes.to_le_bytes());
                    memory.write(out_ptr as u32 + i as u32 * EVENT_SIZE, &event)?;
                }
                memory.write_u32(nevents_ptr as u32, events.len() as u32)?;
                wasmtime::Result::<i32>::Ok(errno::SUCCESS)
            })
        },
    )?;
    Ok(())
}

fn add_denied(linker: &mut Linker<CallContext>) -> wasmtime::Result<()> {
    let engine = linker.engine().clone();
    for (name, params, denial) in DENIED {
        let params = params.chars().map(|c| if c == 'I' { ValType::I64 } else { ValType::I32 });
        let ty = FuncType::new(&engine, params, [ValType::I32]);
        linker.func_new(MODULE, name, ty, move |_caller, params, results| {
            let errno = match denial {
                Denial::Always(errno) => errno,
                Denial::Descriptor(errno) => match params.first() {
                    Some(Val::I32(fd)) if is_standard_stream(*fd) => errno,
                    _ => errno::BADF,
                },
            };
            results[0] = Val::I32(errno);
            Ok(())
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_defines_all_of_preview_1() {
        let preview_1 = [
            "args_get",
            "args_sizes_get",
            "environ_get",
            "environ_sizes_get",
            "clock_res_get",
            "clock_time_get",
            "fd_advise",
            "fd_allocate",
            "fd_close",
            "fd_datasync",
            "fd_fdstat_get",
            "fd_fdstat_set_flags",
            "fd_fdstat_set_rights",
            "fd_filestat_get",
            "fd_filestat_set_size",
            "fd_filestat_set_times",
            "fd_pread",
            "fd_prestat_get",
            "fd_prestat_dir_name",
            "fd_pwrite",
            "fd_read",
            "fd_readdir",
            "fd_renumber",
            "fd_seek",
            "fd_sync",
            "fd_tell",
            "fd_write",
            "path_create_directory",
            "path_filestat_get",
            "path_filestat_set_times",
            "path_link",
            "path_open",
            "path_readlink",
            "path_remove_directory",
            "path_rename",
            "path_symlink",
            "path_unlink_file",
            "poll_oneoff",
            "proc_exit",
            "proc_raise",
            "sched_yield",
            "random_get",
            "sock_accept",
            "sock_recv",
            "sock_send",
            "sock_shutdown",
        ];
        for name in preview_1 {
            assert!(defines(name), "{name}");
        }
        assert_eq!(IMPLEMENTED.len() + DENIED.len(), preview_1.len());
        assert!(!defines("sock_open"));
    }

    #[test]
    fn clock_subscriptions_wake_relative_or_absolute() {
        let now = Instant::now();
        let second = 1_000_000_000;
        // (clock id, timeout, flags, expected wait; None = unsupported clock)
        let table = [
            (CLOCK_MONOTONIC, second, 0, Some(Duration::from_secs(1))),
            (CLOCK_REALTIME, 0, 0, Some(Duration::ZERO)),
            (CLOCK_MONOTONIC, 0, SUBCLOCKFLAGS_ABSTIME, Some(Duration::ZERO)),
            (2, second, 0, None),
        ];
        for (id, timeout, flags, expected) in table {
            assert_eq!(clock_wake(now, id, timeout, flags).map(|wake| wake - now), expected, "clock {id}");
        }
        let absolute = monotonic_now() + 2 * second;
        let wait = clock_wake(now, CLOCK_MONOTONIC, absolute, SUBCLOCKFLAGS_ABSTIME).unwrap() - now;
        assert!(wait <= Duration::from_secs(2) && wait > Duration::from_millis(1900), "{wait:?}");
        assert!(clock_wake(now, CLOCK_MONOTONIC, u64::MAX, 0).is_some());
    }

    #[test]
    fn descriptor_subscriptions_are_ready_at_once() {
        let subscriptions = [
            Subscription::Descriptor { userdata: 1, kind: EVENTTYPE_FD_READ, fd: STDIN },
            Subscription::Descriptor { userdata: 2, kind: EVENTTYPE_FD_WRITE, fd: STDOUT },
            Subscription::Descriptor { userdata: 3, kind: EVENTTYPE_FD_READ, fd: 7 },
            Subscription::Clock { userdata: 4, wake: Some(Instant::now()) },
            Subscription::Clock { userdata: 5, wake: None },
            Subscription::Invalid { userdata: 6, kind: 9 },
        ];
        let expected = vec![
            (1, errno::SUCCESS, EVENTTYPE_FD_READ, 42),
            (2, errno::SUCCESS, EVENTTYPE_FD_WRITE, u64::from(u32::MAX)),
            (3, errno::BADF, EVENTTYPE_FD_READ, 0),
            (5, errno::INVAL, EVENTTYPE_CLOCK, 0),
            (6, errno::INVAL, 9, 0),
        ];
        assert_eq!(immediate_events(&subscriptions, 42), expected);
    }
}
