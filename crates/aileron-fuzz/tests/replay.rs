//! Replays every checked-in corpus and regression input through its target, then mutates the
//! corpus blindly for a bounded time per target (`AILERON_FUZZ_SECONDS`, default 1): a plain
//! `cargo test` run of the fuzz targets, on the stable toolchain, with no new dependency.
//! Coverage-guided fuzzing is cargo-fuzz's job (`fuzz/`, see RELIABILITY.md); this keeps every
//! crash it found fixed and catches the shallow ones on every test run.
//!
//! A panic is saved to `target/fuzz-failures/<target>-<hash>` and the test fails naming it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aileron_fuzz::TARGETS;

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `<kind>/<target>/`, sorted; none when the directory does not exist.
fn inputs(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = crate_dir().join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    paths.sort();
    paths.into_iter().map(|path| (path.clone(), std::fs::read(&path).expect("reading an input"))).collect()
}

/// xorshift64*: deterministic per seed, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

/// Bytes that often matter to the formats under test.
const INTERESTING: &[u8] = b"\0\n\r\"'\\{}[]=+,.:@/#$-_ \x7f\xff0129aZ";

/// One to four mutations of `input`: bit flips, byte inserts and deletes, interesting bytes, a
/// splice from another corpus entry, a truncation, or a duplicated range.
fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(7) {
            0 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] ^= 1 << rng.below(8);
            }
            1 => bytes.insert(at, rng.next() as u8),
            2 if at < bytes.len() => {
                let end = (at + 1 + rng.below(8)).min(bytes.len());
                bytes.drain(at..end);
            }
            3 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            4 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                let len = rng.below(other.len() - from + 1);
                bytes.splice(at..at, other[from..from + len].iter().copied());
            }
            5 => bytes.truncate(at),
            _ if at < bytes.len() => {
                let end = (at + 1 + rng.below(16)).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(at..at, copy);
            }
            _ => {}
        }
    }
    bytes
}

/// Saves a crashing input where the failure message says.
fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = crate_dir().join("../../target/fuzz-failures");
    std::fs::create_dir_all(&dir).expect("creating target/fuzz-failures");
    // FNV-1a: a stable name without a hashing dependency.
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let path = dir.join(format!("{target}-{hash:016x}"));
    std::fs::write(&path, input).expect("writing the failing input");
    path.canonicalize().unwrap_or(path)
}

/// Runs `target` on `input`; on a panic, the message to fail with.
fn run_one(name: &str, target: fn(&[u8]), input: &[u8], origin: &str) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| target(input))) {
        Ok(()) => Ok(()),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let saved = save_failure(name, input);
            Err(format!(
                "target `{name}` panicked on {origin}: {message}\n  input saved to {}\n  hint: minimise it, copy it into \
                 crates/aileron-fuzz/regressions/{name}/, fix the product, and keep it there as a regression test",
                saved.display()
            ))
        }
    }
}

fn budget() -> Duration {
    let seconds = std::env::var("AILERON_FUZZ_SECONDS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(1.0);
    Duration::from_secs_f64(seconds.max(0.0))
}

#[test]
fn every_target_has_a_seed_corpus() {
    let empty: Vec<&str> =
        TARGETS.iter().map(|(name, _)| *name).filter(|name| inputs("corpus", name).is_empty()).collect();
    assert!(empty.is_empty(), "targets without seeds in crates/aileron-fuzz/corpus/: {empty:?}");
}

#[test]
fn corpus_and_regressions_replay_then_blind_mutation_finds_nothing() {
    // Panics are expected and reported by us; the default hook would print each one.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let budget = budget();
    let mut failures = Vec::new();
    let mut summary = Vec::new();
    for (name, target) in TARGETS {
        let mut corpus: Vec<Vec<u8>> = Vec::new();
        for kind in ["corpus", "regressions"] {
            for (path, input) in inputs(kind, name) {
                let origin = path.strip_prefix(crate_dir()).unwrap_or(&path).display().to_string();
                if let Err(failure) = run_one(name, *target, &input, &origin) {
                    failures.push(failure);
                }
                corpus.push(input);
            }
        }
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.bytes().fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(b)));
        let started = Instant::now();
        let mut executions = 0u64;
        while started.elapsed() < budget && !corpus.is_empty() {
            let pick = rng.below(corpus.len());
            let input = mutate(&mut rng, &corpus[pick], &corpus);
            executions += 1;
            if let Err(failure) = run_one(name, *target, &input, "a mutated input") {
                failures.push(failure);
                break;
            }
        }
        summary.push(format!("{name}: {} inputs replayed, {executions} mutations", corpus.len()));
    }
    std::panic::set_hook(hook);
    println!("{}", summary.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
