//! `call`: a warm in-process call of the `echo` test connector through `Runtime::call`, against a
//! bare wasmtime instantiate + `_start` of the same module (`aileron_sandbox::baseline`), the two
//! kinds alternating in rounds on one tokio task.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aileron_core::ContentHash;
use aileron_sandbox::baseline::{BareCommand, NoEgress};
use aileron_sandbox::{CallRequest, HostHooks, ImportPolicy, Limits, Runtime, RuntimeConfig};
use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::ECHO_WASM;
use super::figures::{Distribution, format_count, format_duration, format_ratio, ratio};
use super::report::SummaryRow;

/// Untimed calls of each kind before the call benchmark measures.
const CALL_WARMUP: usize = 300;
/// The call benchmark alternates between the two kinds in rounds of this many calls, so drift
/// (frequency scaling, a noisy neighbour) lands on both sides.
const CALL_ROUND: usize = 100;
const CALL_RATIO_GOAL: f64 = 1.5;
const CALL_P50_GOAL: Duration = Duration::from_micros(100);

pub(super) struct CallFigures {
    sandboxed: Distribution,
    bare: Distribution,
    stdin_bytes: usize,
}

pub(super) async fn call_benchmark(calls: usize) -> anyhow::Result<CallFigures> {
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let hash = ContentHash::of_bytes(ECHO_WASM);
    let module = runtime
        .load(&hash, ECHO_WASM, &ImportPolicy::default())
        .map_err(|failure| anyhow::anyhow!("loading the echo guest: {}", failure.message))?;
    let bare = BareCommand::compile(ECHO_WASM)?;
    let hooks: Arc<dyn HostHooks> = Arc::new(NoEgress);

    let args = json!({ "text": "hello from the benchmark" });
    let request = CallRequest { op: "echo".into(), args: args.clone(), limits: Limits::default() };
    let expected = json!({ "op": "echo", "args": args });
    let stdin = serde_json::to_vec(&expected).expect("JSON values serialize");
    let expected_stdout = json!({ "output": expected });

    let sandboxed_call = async |request: CallRequest| -> anyhow::Result<Duration> {
        let started = Instant::now();
        let outcome = runtime.call(&module, request, hooks.clone()).await;
        let elapsed = started.elapsed();
        match outcome.result {
            Ok(output) if output == expected => Ok(elapsed),
            Ok(output) => bail!("Runtime::call of echo returned {output}, expected {expected}"),
            Err(failure) => bail!("Runtime::call of echo failed: {} ({})", failure.message, failure.class),
        }
    };
    let bare_call = async |stdin: Vec<u8>| -> anyhow::Result<Duration> {
        let started = Instant::now();
        let stdout = bare.run(stdin).await?;
        let elapsed = started.elapsed();
        let printed: Value = serde_json::from_slice(&stdout).context("the bare run printed no JSON")?;
        if printed != expected_stdout {
            bail!("the bare run of echo printed {printed}, expected {expected_stdout}");
        }
        Ok(elapsed)
    };

    for _ in 0..CALL_WARMUP {
        sandboxed_call(request.clone()).await?;
        bare_call(stdin.clone()).await?;
    }
    let mut sandboxed = Vec::with_capacity(calls);
    let mut bare_samples = Vec::with_capacity(calls);
    let mut round = 0;
    while sandboxed.len() < calls {
        let n = CALL_ROUND.min(calls - sandboxed.len());
        // Alternate which kind goes first, so neither always runs on a freshly warmed cache.
        for kind in if round % 2 == 0 { [0, 1] } else { [1, 0] } {
            for _ in 0..n {
                if kind == 0 {
                    sandboxed.push(sandboxed_call(request.clone()).await?);
                } else {
                    bare_samples.push(bare_call(stdin.clone()).await?);
                }
            }
        }
        round += 1;
    }
    Ok(CallFigures {
        sandboxed: Distribution::new(sandboxed),
        bare: Distribution::new(bare_samples),
        stdin_bytes: stdin.len(),
    })
}

impl CallFigures {
    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let mut rows = Vec::new();
        let (measured, baseline) = (self.sandboxed.p50(), self.bare.p50());
        let met = ratio(measured, baseline) <= CALL_RATIO_GOAL && measured <= CALL_P50_GOAL;
        rows.push(SummaryRow::timed(
            "(a) warm echo call, p50",
            (measured, baseline),
            "bare",
            "≤ 1.5×, ≤ 100 µs",
            Some(met),
        ));
        rows.push(SummaryRow::timed(
            "(a) warm echo call, p99",
            (self.sandboxed.p99(), self.bare.p99()),
            "bare",
            "",
            None,
        ));
        rows
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let _ = writeln!(text, "\n### (a) Warm in-process call of `echo`\n");
        let _ = writeln!(text, "Reproduce: `{command_line}`.");
        let _ = writeln!(
            text,
            "Sequential calls on one tokio task, {CALL_WARMUP} untimed calls of each kind first, then alternating \
             rounds of {CALL_ROUND}; stdin is the {} B request `{{\"op\", \"args\"}}`.\n",
            self.stdin_bytes
        );
        let _ = writeln!(text, "| | calls | p50 | p99 | mean | min | max |");
        let _ = writeln!(text, "|---|---:|---:|---:|---:|---:|---:|");
        for (label, samples) in [
            ("`Runtime::call` (no-op `HostHooks`)", &self.sandboxed),
            ("bare wasmtime (`aileron_sandbox::baseline`)", &self.bare),
        ] {
            let _ = writeln!(
                text,
                "| {label} | {} | {} | {} | {} | {} | {} |",
                format_count(samples.len() as u64),
                format_duration(samples.p50()),
                format_duration(samples.p99()),
                format_duration(samples.mean()),
                format_duration(samples.min()),
                format_duration(samples.max())
            );
        }
        let (s, b) = (&self.sandboxed, &self.bare);
        let _ = writeln!(
            text,
            "| ratio | | {} | {} | {} | {} | {} |",
            format_ratio(ratio(s.p50(), b.p50())),
            format_ratio(ratio(s.p99(), b.p99())),
            format_ratio(ratio(s.mean(), b.mean())),
            format_ratio(ratio(s.min(), b.min())),
            format_ratio(ratio(s.max(), b.max()))
        );
    }
}
