//! The machine a run measured on, as the report describes it: CPUs, memory, kernel, the
//! scratch directory's filesystem and the load average, read from `/proc`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) struct Machine {
    pub(super) cpus: usize,
    pub(super) model: String,
    pub(super) memory: String,
    pub(super) kernel: String,
    /// Filesystem of the scratch directory (where the audit log and the caches are written).
    pub(super) scratch_filesystem: String,
    /// `/proc/loadavg` when the run started: other work on the machine skews every figure.
    pub(super) load_at_start: String,
}

impl Machine {
    pub(super) fn describe(scratch: &Path) -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpus = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
        let model = proc_field(&read("/proc/cpuinfo"), "model name").unwrap_or("unknown CPU").to_string();
        let memory = proc_bytes(&read("/proc/meminfo"), "MemTotal").map_or_else(
            || "unknown".to_string(),
            |bytes| format!("{:.0} GiB", bytes as f64 / (1024.0 * 1024.0 * 1024.0)),
        );
        let kernel = read("/proc/sys/kernel/osrelease").trim().to_string();
        let scratch = scratch.canonicalize().unwrap_or_else(|_| scratch.to_path_buf());
        let scratch_filesystem = match mount_of(&read("/proc/self/mounts"), &scratch) {
            Some(mount) => format!("{} ({} mounted at {})", mount.fstype, mount.device, mount.point),
            None => "unknown filesystem".to_string(),
        };
        Machine { cpus, model, memory, kernel, scratch_filesystem, load_at_start: load_average() }
    }

    pub(super) fn summary(&self) -> String {
        format!("{} CPUs, {}, {} RAM, Linux {}", self.cpus, self.model, self.memory, self.kernel)
    }
}

/// The 1, 5 and 15 minute load averages.
pub(super) fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let averages: Vec<&str> = text.split_whitespace().take(3).collect();
    if averages.len() == 3 { averages.join(" ") } else { "unknown".to_string() }
}

/// A share of CPU time as `12.1 %`, or `unknown` when it could not be measured.
pub(super) fn format_share(share: Option<f64>) -> String {
    share.map_or_else(|| "unknown".to_string(), |share| format!("{:.1} %", share * 100.0))
}

/// The machine's CPU time so far, from the `cpu` line of `/proc/stat`, in clock ticks (or, from
/// [`CpuTimes::since`], over an interval).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct CpuTimes {
    /// user, nice, system, idle, iowait, irq and softirq: the time the guest saw.
    seen: u64,
    /// Time the hypervisor ran something else while this VM had work: invisible to every clock
    /// in here, it stretches whatever was being timed.
    stolen: u64,
    /// idle and iowait: no CPU had anything to run (iowait: while some task waited on a disk).
    idle: u64,
}

impl CpuTimes {
    /// Reads the `cpu` line (the file's first) into a buffer on the stack: a load phase's
    /// [`super::work::Work`] snapshots take this, and the window between them counts allocations.
    pub(super) fn read() -> Option<CpuTimes> {
        use std::io::Read as _;
        let mut head = [0u8; 512];
        let read = std::fs::File::open("/proc/stat").ok()?.read(&mut head).ok()?;
        CpuTimes::parse(std::str::from_utf8(&head[..read]).ok()?)
    }

    fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().find(|line| line.starts_with("cpu "))?;
        let mut numbers = line.split_whitespace().skip(1);
        let mut fields = [0u64; 8];
        for field in &mut fields {
            *field = numbers.next()?.parse().ok()?;
        }
        let (seen, stolen) = (fields[..7].iter().sum(), fields[7]);
        Some(CpuTimes { seen, stolen, idle: fields[3] + fields[4] })
    }

    /// The time between `earlier` and `self`.
    pub(super) fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            seen: self.seen.saturating_sub(earlier.seen),
            stolen: self.stolen.saturating_sub(earlier.stolen),
            idle: self.idle.saturating_sub(earlier.idle),
        }
    }

    pub(super) fn plus(self, other: CpuTimes) -> CpuTimes {
        CpuTimes { seen: self.seen + other.seen, stolen: self.stolen + other.stolen, idle: self.idle + other.idle }
    }

    /// Of an interval's time, the share in which no CPU had anything to run; `None` when the
    /// interval is empty (or `/proc/stat` could not be read).
    pub(super) fn idle_share(self) -> Option<f64> {
        (self.seen > 0).then(|| self.idle as f64 / self.seen as f64)
    }

    /// The share of the CPU time between `self` and `later` that was stolen.
    fn stolen_share(self, later: CpuTimes) -> Option<f64> {
        let stolen = later.stolen.checked_sub(self.stolen)?;
        let total = later.seen.checked_sub(self.seen)? + stolen;
        (total > 0).then(|| stolen as f64 / total as f64)
    }
}

/// The share of CPU time stolen during each part of a run: the VM's own noise, beside the figures
/// it moves. Also each part's wall time, printed as it ends, and — for a guard run — a watchdog
/// that stops the process when one part runs past its limit (a hang must name itself, not eat
/// CI's time).
pub(super) struct StolenTime {
    last: Option<CpuTimes>,
    parts: Vec<(&'static str, Option<f64>)>,
    /// When the running part started; the watchdog reads it.
    started: Arc<Mutex<Instant>>,
}

impl StolenTime {
    /// Starts the first part; with a `limit`, a watchdog thread ends the process with an error
    /// when a part runs longer (the thread ends with this value).
    pub(super) fn start(limit: Option<Duration>) -> StolenTime {
        let started = Arc::new(Mutex::new(Instant::now()));
        if let Some(limit) = limit {
            let watched = Arc::downgrade(&started);
            std::thread::spawn(move || {
                while let Some(started) = watched.upgrade() {
                    let running = started.lock().map(|started| started.elapsed()).unwrap_or_default();
                    drop(started);
                    if running > limit {
                        eprintln!(
                            "error: the part started last (its line is the last `(x)` line above) has run for {} s, \
                             longer than the {} s a part may take: taken for hung, the run stops\nhint: run that part \
                             alone with `cargo xtask bench --only <part>` to see where it waits",
                            running.as_secs(),
                            limit.as_secs()
                        );
                        std::process::exit(1);
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            });
        }
        StolenTime { last: CpuTimes::read(), parts: Vec::new(), started }
    }

    /// Ends the part `label` (and starts the next one); passes its figures through.
    pub(super) fn after<T>(&mut self, label: &'static str, figures: T) -> T {
        let now = CpuTimes::read();
        let share = self.last.zip(now).and_then(|(last, now)| last.stolen_share(now));
        self.parts.push((label, share));
        self.last = now;
        if let Ok(mut started) = self.started.lock() {
            eprintln!("    {label} took {:.1} s", started.elapsed().as_secs_f64());
            *started = Instant::now();
        }
        figures
    }

    /// `(a) 0.4 %, (b) 12.1 %, …`, or `None` when no part was measured.
    pub(super) fn describe(&self) -> Option<String> {
        let parts: Vec<String> =
            self.parts.iter().map(|(label, share)| format!("{label} {}", format_share(*share))).collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// The value of the first `key : value` line of a `/proc` file.
fn proc_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name.trim() == key).then_some(value.trim())
    })
}

/// A `key:   123 kB` field of a `/proc` file, in bytes.
pub(super) fn proc_bytes(text: &str, key: &str) -> Option<u64> {
    let kib: u64 = proc_field(text, key)?.strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

#[derive(Debug, PartialEq, Eq)]
struct Mount<'a> {
    device: &'a str,
    point: &'a str,
    fstype: &'a str,
}

/// The mount holding `path`: the `/proc/self/mounts` entry with the longest mount point above it.
fn mount_of<'a>(mounts: &'a str, path: &Path) -> Option<Mount<'a>> {
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            Some(Mount { device: fields.next()?, point: fields.next()?, fstype: fields.next()? })
        })
        .filter(|mount| path.starts_with(mount.point))
        .max_by_key(|mount| mount.point.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stolen_time_is_the_steal_column_over_all_columns() {
        let before = CpuTimes::parse("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n").unwrap();
        assert_eq!(before, CpuTimes { seen: 965, stolen: 35, idle: 810 });
        let after = CpuTimes::parse("cpu  160 0 80 850 10 0 5 60 0 0\n").unwrap();
        // 25 of the 165 ticks that passed were stolen.
        assert_eq!(before.stolen_share(after), Some(25.0 / 165.0));
        assert_eq!(before.stolen_share(before), None);
        assert_eq!(CpuTimes::parse("cpu  1 2 3\n"), None);
        let mut stolen = StolenTime { last: Some(before), ..StolenTime::start(None) };
        stolen.parts.push(("(b)", before.stolen_share(after)));
        stolen.parts.push(("(c)", None));
        assert_eq!(stolen.describe().as_deref(), Some("(b) 15.2 %, (c) unknown"));
        assert_eq!(StolenTime { last: None, ..StolenTime::start(None) }.describe(), None);
    }

    #[test]
    fn idle_time_is_idle_and_iowait_over_the_time_the_guest_saw() {
        let before = CpuTimes::parse("cpu  100 0 50 800 10 0 5 35 0 0\n").unwrap();
        let after = CpuTimes::parse("cpu  160 0 80 850 30 0 10 60 0 0\n").unwrap();
        // 50 idle and 20 iowait of the 165 ticks the guest saw (the 25 stolen are not among them).
        let interval = after.since(before);
        assert_eq!(interval, CpuTimes { seen: 165, stolen: 25, idle: 70 });
        assert_eq!(interval.idle_share(), Some(70.0 / 165.0));
        // Intervals add up (the rounds of a phase are pooled), and an empty one has no share.
        assert_eq!(interval.plus(interval).idle_share(), Some(70.0 / 165.0));
        assert_eq!(CpuTimes::default().idle_share(), None);
        assert_eq!(before.since(after), CpuTimes::default());
    }

    #[test]
    fn proc_files_and_mounts_are_read() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nprocessor\t: 1\n";
        assert_eq!(proc_field(cpuinfo, "model name"), Some("AMD EPYC"));
        assert_eq!(proc_field("MemTotal:       24582816 kB\n", "MemTotal"), Some("24582816 kB"));
        assert_eq!(proc_field(cpuinfo, "flags"), None);
        let rollup = "Rss:              183908 kB\nPss:              147200 kB\nPss_Dirty:         4000 kB\n";
        assert_eq!(proc_bytes(rollup, "Pss"), Some(147200 * 1024), "the field named, not one it begins");
        assert_eq!(proc_bytes(rollup, "Pss_Dirty"), Some(4000 * 1024));
        assert_eq!(proc_bytes(cpuinfo, "model name"), None, "not a kB figure");

        let mounts = "/dev/vda / ext4 rw,relatime 0 0\ntmpfs /tmp tmpfs rw 0 0\ntmpfs /tmpfoo tmpfs rw 0 0\n";
        // (path, expected mount point)
        let table = [("/tmp/aileron-bench-x", "/tmp"), ("/tmpfoo/x", "/tmpfoo"), ("/tmpx/y", "/"), ("/", "/")];
        for (path, point) in table {
            assert_eq!(mount_of(mounts, Path::new(path)).map(|mount| mount.point), Some(point), "{path}");
        }
        assert_eq!(
            mount_of(mounts, Path::new("/work")),
            Some(Mount { device: "/dev/vda", point: "/", fstype: "ext4" })
        );
    }
}
