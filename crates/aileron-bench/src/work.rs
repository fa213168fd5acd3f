//! What a phase costs the benchmark's process, clients and daemon together: CPU time and
//! context switches (from `getrusage`) and heap allocations (counted by this binary's global
//! allocator). They count work rather than time it, so a change to the run path shows in them
//! even when this VM's speed moves by tens of per cent between runs and throughput cannot tell
//! it from noise. Context switches are counted because a durable run hands off between threads
//! (client, daemon worker, audit writer) where a health request does not, and each hand-off is a
//! cost of its own (BENCHMARKS.md, issue 17, "Tenth session").

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use super::machine::CpuTimes;

/// The allocator the `aileron` executable uses (`platform::allocator`, mimalloc:
/// docs/decisions/0004-actions-and-runs.md, "Allocator"), with
/// every allocation counted, so the daemon (b) and (d) serve in this process allocates as the
/// real one does. Each thread counts on a cache line of its own (while there are no more threads
/// than lines), so two threads allocating at once do not contend for one line: a contended
/// atomic on every allocation would add to the CPU per request it measures.
pub struct Counting;

static INNER: aileron::platform::allocator::Allocator = aileron::platform::allocator::Allocator;

#[repr(align(128))]
struct Shard {
    allocations: AtomicU64,
    bytes: AtomicU64,
}

const SHARDS: usize = 64;

static COUNTS: [Shard; SHARDS] = [const { Shard { allocations: AtomicU64::new(0), bytes: AtomicU64::new(0) } }; SHARDS];

/// The next thread's shard. Handed out in turn: a shard picked from the address of a
/// thread-local instead put every thread on one of two lines, since threads' stacks (and their
/// TLS blocks) lie a whole number of pages apart.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

fn shard() -> &'static Shard {
    &COUNTS[shard_index()]
}

fn shard_index() -> usize {
    thread_local! {
        // A `usize` needs no destructor, so its first use registers none and allocates nothing.
        static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

fn count(bytes: usize) {
    let shard = shard();
    shard.allocations.fetch_add(1, Ordering::Relaxed);
    shard.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `INNER`; counting allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract is `INNER`'s.
        unsafe { INNER.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as above.
        unsafe { INNER.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { INNER.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A growth is an allocation of its new size (it may move every byte).
        count(new_size);
        // SAFETY: as above.
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
}

/// The process's work so far: CPU time and context switches of all its threads, and heap
/// allocations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Work {
    pub cpu: Duration,
    /// Voluntary (a thread waited: a lock, a futex, I/O, `epoll_wait`) and involuntary (the
    /// scheduler preempted it) context switches, summed over the process's threads.
    pub switches: u64,
    pub allocations: u64,
    pub allocated_bytes: u64,
    /// The whole machine's CPU time (every process's, and the idle time): whether the CPUs had
    /// work to do at all, which the process's own figures cannot say.
    pub machine: CpuTimes,
    /// CPU time of the threads that make records durable: the audit log's writer and tree, and
    /// (b)'s floor's group commit ([`DURABLE_THREADS`]). Part of `cpu`.
    pub durable_cpu: Duration,
}

/// The names (`/proc/self/task/<tid>/comm`, at most 15 bytes) of the threads whose CPU time is
/// [`Work::durable_cpu`]: the audit log's writer and tree (`aileron-audit-writer`,
/// `aileron-audit-tree`) and (b)'s durable floor (`group-commit-floor`) begin with these.
pub const DURABLE_THREADS: [&str; 2] = ["aileron-audit-", "group-commit-fl"];

impl Work {
    pub fn now() -> Work {
        // `RUSAGE_SELF` sums every thread of the process, the finished ones included.
        let (cpu, switches) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
            .map(|usage| {
                let switches = usage.voluntary_context_switches() + usage.involuntary_context_switches();
                (duration_of(usage.user_time()) + duration_of(usage.system_time()), switches.max(0) as u64)
            })
            .unwrap_or_default();
        let (mut allocations, mut allocated_bytes) = (0, 0);
        for shard in &COUNTS {
            allocations += shard.allocations.load(Ordering::Relaxed);
            allocated_bytes += shard.bytes.load(Ordering::Relaxed);
        }
        Work {
            cpu,
            switches,
            allocations,
            allocated_bytes,
            machine: CpuTimes::read().unwrap_or_default(),
            durable_cpu: threads_cpu(&DURABLE_THREADS),
        }
    }

    /// The work done between `earlier` and `self`.
    pub fn since(self, earlier: Work) -> Work {
        Work {
            cpu: self.cpu.saturating_sub(earlier.cpu),
            switches: self.switches.saturating_sub(earlier.switches),
            allocations: self.allocations - earlier.allocations,
            allocated_bytes: self.allocated_bytes - earlier.allocated_bytes,
            machine: self.machine.since(earlier.machine),
            durable_cpu: self.durable_cpu.saturating_sub(earlier.durable_cpu),
        }
    }

    pub fn plus(self, other: Work) -> Work {
        Work {
            cpu: self.cpu + other.cpu,
            switches: self.switches + other.switches,
            allocations: self.allocations + other.allocations,
            allocated_bytes: self.allocated_bytes + other.allocated_bytes,
            machine: self.machine.plus(other.machine),
            durable_cpu: self.durable_cpu + other.durable_cpu,
        }
    }

    /// Per request, over `requests` answered.
    pub fn per(self, requests: usize) -> PerRequest {
        let requests = requests.max(1) as f64;
        PerRequest {
            cpu: self.cpu.div_f64(requests),
            durable_cpu: self.durable_cpu.div_f64(requests),
            switches: self.switches as f64 / requests,
            allocations: self.allocations as f64 / requests,
            allocated_bytes: self.allocated_bytes as f64 / requests,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct PerRequest {
    pub cpu: Duration,
    pub durable_cpu: Duration,
    pub switches: f64,
    pub allocations: f64,
    pub allocated_bytes: f64,
}

fn duration_of(time: nix::sys::time::TimeVal) -> Duration {
    Duration::from_secs(time.tv_sec().max(0) as u64) + Duration::from_micros(time.tv_usec().max(0) as u64)
}

/// A process's CPU time, all its threads (`/proc/<pid>/stat`'s `utime` + `stime`, in the kernel's
/// fixed `USER_HZ` of 100 ticks a second).
pub(super) fn process_cpu(pid: u32) -> Option<Duration> {
    ticks_cpu(std::path::Path::new(&format!("/proc/{pid}/stat")))
}

/// The CPU time of this process's live threads whose names begin with one of `prefixes`: from
/// each thread's `/proc/self/task/<tid>/schedstat` (nanoseconds on the CPU), or where the kernel
/// keeps no such statistics its `stat` (`utime` + `stime`, in ticks of 10 ms).
pub(super) fn threads_cpu(prefixes: &[&str]) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Duration::ZERO };
    let mut total = Duration::ZERO;
    for task in tasks.flatten() {
        let path = task.path();
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else { continue };
        if !prefixes.iter().any(|prefix| name.starts_with(prefix)) {
            continue;
        }
        let on_cpu = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|stat| stat.split_ascii_whitespace().next()?.parse::<u64>().ok())
            .filter(|nanos| *nanos > 0)
            .map(Duration::from_nanos);
        total += on_cpu.or_else(|| ticks_cpu(&path.join("stat"))).unwrap_or_default();
    }
    total
}

/// `utime` + `stime` of a `/proc` `stat` file, in the kernel's fixed `USER_HZ` of 100 ticks a
/// second.
fn ticks_cpu(stat: &std::path::Path) -> Option<Duration> {
    let stat = std::fs::read_to_string(stat).ok()?;
    // After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
    let mut fields = stat.get(stat.rfind(')')? + 2..)?.split_ascii_whitespace().skip(11);
    let ticks = fields.next()?.parse::<u64>().ok()? + fields.next()?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_counted_on_every_thread() {
        let before = Work::now();
        let kept: Vec<Vec<u8>> = (0..100).map(|n| Vec::with_capacity(1000 + n)).collect();
        let other = std::thread::spawn(|| (0..50).map(|_| Box::new([0u8; 64])).collect::<Vec<_>>()).join().unwrap();
        let done = Work::now().since(before);
        assert!(done.allocations >= 100 + 50 + 1, "{done:?}");
        assert!(done.allocated_bytes >= 100 * 1000 + 50 * 64, "{done:?}");
        drop((kept, other));
    }

    #[test]
    fn the_switches_of_every_thread_are_counted() {
        let before = Work::now();
        // Each sleep parks the thread: one voluntary switch at least, on a thread that ends.
        std::thread::spawn(|| (0..20).for_each(|_| std::thread::sleep(Duration::from_micros(200)))).join().unwrap();
        let done = Work::now().since(before);
        assert!(done.switches >= 20, "{done:?}");
    }

    #[test]
    fn threads_running_at_once_count_on_lines_of_their_own() {
        let started = std::sync::Barrier::new(8);
        let lines: Vec<usize> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        // All alive at once, as a daemon's workers, its writer and the clients are.
                        started.wait();
                        shard_index()
                    })
                })
                .collect();
            threads.into_iter().map(|thread| thread.join().unwrap()).collect()
        });
        let distinct: std::collections::BTreeSet<_> = lines.iter().collect();
        assert_eq!(distinct.len(), lines.len(), "threads shared a counter line: {lines:?}");
    }

    /// Only the threads a prefix names count, and their spinning shows.
    #[test]
    fn the_cpu_of_the_named_threads_is_read_and_no_other_thread_s() {
        /// Spins until this thread has run `spun` on a CPU (not on the wall clock: the other
        /// tests share the CPUs).
        fn spin_until(spun: Duration) {
            fn on_cpu() -> Duration {
                let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                // SAFETY: writes one `timespec` this frame owns.
                assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) }, 0);
                Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
            }
            let started = on_cpu();
            let mut n = 0u64;
            while on_cpu() - started < spun {
                for _ in 0..10_000 {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
        }
        let (spin, ready, done) = (std::sync::Barrier::new(3), std::sync::Barrier::new(3), std::sync::Barrier::new(3));
        std::thread::scope(|scope| {
            for (name, spun) in
                [("bench-named-one", Duration::from_millis(200)), ("bench-other", Duration::from_millis(600))]
            {
                let (spin, ready, done) = (&spin, &ready, &done);
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn_scoped(scope, move || {
                        spin.wait();
                        spin_until(spun);
                        ready.wait();
                        done.wait();
                    })
                    .unwrap();
            }
            let before = threads_cpu(&["bench-named"]);
            spin.wait();
            ready.wait();
            // Both threads are still alive: the named one spun 200 ms, the other 600 ms.
            let named = threads_cpu(&["bench-named"]).saturating_sub(before);
            let both = threads_cpu(&["bench-named", "bench-oth"]);
            done.wait();
            // The ticks of `stat` (where the kernel keeps no `schedstat`) round down to 10 ms.
            assert!(named >= Duration::from_millis(190) && named < Duration::from_millis(400), "{named:?}");
            assert!(both >= named + Duration::from_millis(390), "{both:?} against {named:?}");
        });
        assert_eq!(threads_cpu(&["no-such-thread"]), Duration::ZERO);
    }

    /// This process's CPU time reads from `/proc` and grows with work done.
    #[test]
    fn a_process_cpu_time_is_read_and_grows() {
        let pid = std::process::id();
        let before = process_cpu(pid).expect("/proc/<pid>/stat reads");
        let mut spin = 0u64;
        let grew = (0..1_000_000).any(|_| {
            for _ in 0..10_000 {
                spin = std::hint::black_box(spin.wrapping_add(1));
            }
            process_cpu(pid).unwrap() >= before + Duration::from_millis(20)
        });
        assert!(grew, "spinning shows in the process's CPU time");
        assert_eq!(process_cpu(u32::MAX), None, "no such process");
    }
}
