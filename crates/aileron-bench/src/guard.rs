//! The regression guard CI runs (issue 49): the benchmark's smallest sizes, and each summary
//! figure's ratio to its same-run baseline held against the ratio recorded in a reference file
//! (`xtask/bench/guard.json`). A ratio that moved beyond [`TOLERANCE`] either way fails the run.
//!
//! A guard against accidents — a change that doubles a run's CPU, a cache that stops caching —
//! not a timing test: only ratios are compared (the machine's speed cancels out), and only
//! medians, rates and counts (a p99 or a max of a few hundred samples on a shared CI machine
//! moves by more than 2× on its own). An improvement beyond 2× fails too: record it with
//! `cargo xtask bench-guard --write`, so the guard keeps watching from the new level.
//!
//! A ratio that moved is measured once more (its part alone) before the guard fails: a shared
//! machine moves one now and then on its own, a regression moves it both times.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::report::SummaryRow;

/// How far a ratio may move (as a factor, either way) before the guard fails.
pub(super) const TOLERANCE: f64 = 2.0;

/// The reference file: the command that measured it and each guarded figure's ratio, as
/// `{"command": "...", "ratios": {"<key>": 0.31, ...}}`.
#[derive(Debug)]
struct Reference {
    command: String,
    ratios: BTreeMap<String, f64>,
}

impl Reference {
    fn to_json(&self) -> Value {
        json!({ "command": self.command, "ratios": self.ratios })
    }

    fn from_json(value: &Value) -> Option<Reference> {
        let command = value.get("command")?.as_str()?.to_string();
        let ratios = value
            .get("ratios")?
            .as_object()?
            .iter()
            .map(|(key, ratio)| Some((key.clone(), ratio.as_f64()?)))
            .collect::<Option<_>>()?;
        Some(Reference { command, ratios })
    }
}

/// One guarded figure held against its reference.
#[derive(Debug, PartialEq)]
pub(super) struct Verdict {
    pub(super) key: String,
    pub(super) reference: f64,
    pub(super) now: f64,
}

impl Verdict {
    /// `now / reference`: above 1 the figure's ratio grew.
    pub(super) fn change(&self) -> f64 {
        self.now / self.reference
    }

    pub(super) fn within(&self) -> bool {
        let change = self.change();
        (1.0 / TOLERANCE..=TOLERANCE).contains(&change)
    }
}

/// The figure's name without what varies from run to run: parenthesised remarks holding numbers
/// ("(+12 µs)", "(1,000 answered, in 4.6 s)") go, and every other number becomes `#` (not the
/// digits of a word: `p50` stays).
pub(super) fn key(figure: &str) -> String {
    let mut kept = String::new();
    let mut rest = figure;
    while let Some(open) = rest.find('(') {
        let close = rest[open..].find(')').map_or(rest.len(), |close| open + close + 1);
        let group = &rest[open..close];
        kept.push_str(&rest[..open]);
        if !group.chars().any(|c| c.is_ascii_digit()) {
            kept.push_str(group);
        }
        rest = &rest[close..];
    }
    kept.push_str(rest);
    let mut key = String::new();
    let mut chars = kept.chars().peekable();
    let mut after_word = false;
    while let Some(c) = chars.next() {
        let in_word = after_word;
        after_word = c.is_alphanumeric();
        if c.is_ascii_digit() && !in_word {
            while chars.peek().is_some_and(|next| next.is_ascii_digit() || *next == ',' || *next == '.') {
                chars.next();
            }
            key.push('#');
        } else {
            key.push(c);
        }
    }
    key.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A row's ratio when it is one (`0.31×`) and the figure is guarded (not a tail).
pub(super) fn guarded(row: &SummaryRow) -> Option<(String, f64)> {
    let figure = row.figure.to_lowercase();
    // Tails, and differences shown as ratios (their sign and size are the noise's).
    if figure.contains("p99") || figure.trim_end().ends_with("max") || figure.contains("added") {
        return None;
    }
    // Context switches depend on how many cores the machine has and how its scheduler wakes
    // threads, not on the code alone; against health's (~0.1 a request) a run's moved 6× → 54×
    // between two runs of one commit on one machine.
    if figure.contains("context switches") {
        return None;
    }
    let ratio: f64 = row.ratio.strip_suffix('×')?.trim().parse().ok()?;
    (ratio.is_finite() && ratio > 0.0).then(|| (key(&row.figure), ratio))
}

/// The smallest ratio a reference records: the summary prints two decimals, so below 0.1× a
/// ratio keeps one significant digit and its rounding alone can move it 2× (0.01× stands for
/// anything from 0.005× to 0.015×: the OTLP receiver's CPU against a run's). A figure recorded
/// higher is still compared however low it falls.
const MIN_REFERENCE_RATIO: f64 = 0.1;

/// The guarded ratios of `rows` that a reference records.
fn reference_ratios(rows: &[SummaryRow]) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut ratios = ratios(rows)?;
    ratios.retain(|_, ratio| *ratio >= MIN_REFERENCE_RATIO);
    Ok(ratios)
}

/// Writes the reference for `rows`, measured by `command`.
pub(super) fn write(path: &Path, command: &str, rows: &[SummaryRow]) -> anyhow::Result<()> {
    let reference = Reference { command: command.to_string(), ratios: reference_ratios(rows)? };
    let text = serde_json::to_string_pretty(&reference.to_json())? + "\n";
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, text).with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("renaming {} into place", temporary.display()))?;
    eprintln!("wrote {} guarded ratios to {}", reference.ratios.len(), path.display());
    Ok(())
}

/// Holds `rows` against the reference at `path` and prints every guarded figure; returns the
/// ratios that moved beyond [`TOLERANCE`] (for [`confirm`] to measure again). Fails when the
/// reference is missing or was measured with other sizes.
pub(super) fn check(path: &Path, command: &str, rows: &[SummaryRow]) -> anyhow::Result<Vec<Verdict>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading the guard's reference {}", path.display()))?;
    let reference = serde_json::from_str(&text).ok().as_ref().and_then(Reference::from_json).with_context(|| {
        format!("{}: not a guard reference\nhint: write one with `cargo xtask bench-guard --write`", path.display())
    })?;
    if reference.command != command {
        bail!(
            "{}: measured with `{}`, this run is `{command}`\nhint: write it again with `cargo xtask bench-guard --write`",
            path.display(),
            reference.command
        );
    }
    let now = ratios(rows)?;
    let (verdicts, missing) = compare(&reference.ratios, &now);
    println!("regression guard: each ratio against {} (fails beyond {TOLERANCE}× either way)", path.display());
    print(&verdicts);
    for key in &missing {
        // A warning, not a failure: a figure that shows no ratio in some runs (a difference that
        // came out negative) must not fail CI; a renamed one is seen here and written again.
        println!("  gone  {key} (in the reference, no ratio in this run: not guarded)");
    }
    let guarded = verdicts.len();
    let moved: Vec<Verdict> = verdicts.into_iter().filter(|verdict| !verdict.within()).collect();
    if moved.is_empty() {
        println!("regression guard: {guarded} ratios within {TOLERANCE}×");
    }
    Ok(moved)
}

/// Holds the ratios that moved in the first measurement against the same references in a second
/// (`rows`): the guard fails on those that moved in both.
pub(super) fn confirm(moved: &[Verdict], rows: &[SummaryRow]) -> anyhow::Result<()> {
    let now = ratios(rows)?;
    let again: Vec<Verdict> = moved
        .iter()
        .map(|first| Verdict {
            key: first.key.clone(),
            reference: first.reference,
            // Not measured again (the part failed to show it): it stands as it moved.
            now: now.get(&first.key).copied().unwrap_or(first.now),
        })
        .collect();
    println!("regression guard: the ratios that moved, measured again");
    print(&again);
    let still = again.iter().filter(|verdict| !verdict.within()).count();
    if still > 0 {
        bail!(
            "the regression guard failed: {still} ratio(s) moved beyond {TOLERANCE}× in two measurements\nhint: find \
             the change that moved them; if it was meant, record the new ratios with `cargo xtask bench-guard --write`"
        );
    }
    println!("regression guard: within {TOLERANCE}× on the second measurement");
    Ok(())
}

fn print(verdicts: &[Verdict]) {
    for verdict in verdicts {
        let mark = if verdict.within() { "ok" } else { "MOVED" };
        println!(
            "  {mark:5} {:>7.2}× → {:>7.2}× ({:.2}×)  {}",
            verdict.reference,
            verdict.now,
            verdict.change(),
            verdict.key
        );
    }
}

/// The guarded ratios of `rows` by key; two figures with one key are an error (one would hide
/// the other).
fn ratios(rows: &[SummaryRow]) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut ratios = BTreeMap::new();
    for (key, ratio) in rows.iter().filter_map(guarded) {
        if ratios.insert(key.clone(), ratio).is_some() {
            bail!(
                "two summary figures have the guard key `{key}`\nhint: make their names differ in words, not numbers"
            );
        }
    }
    Ok(ratios)
}

/// Each reference ratio against the one measured now, and the reference's figures not measured
/// now. Figures new in this run are not guarded until the reference is written again.
fn compare(reference: &BTreeMap<String, f64>, now: &BTreeMap<String, f64>) -> (Vec<Verdict>, Vec<String>) {
    let mut verdicts = Vec::new();
    let mut missing = Vec::new();
    for (key, reference) in reference {
        match now.get(key) {
            Some(now) => verdicts.push(Verdict { key: key.clone(), reference: *reference, now: *now }),
            None => missing.push(key.clone()),
        }
    }
    (verdicts, missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(figure: &str, ratio: &str) -> SummaryRow {
        SummaryRow {
            figure: figure.to_string(),
            measured: String::new(),
            baseline: String::new(),
            ratio: ratio.to_string(),
            goal: "",
            met: None,
        }
    }

    #[test]
    fn keys_drop_what_varies_between_runs() {
        let table = [
            ("(e) MCP tools/call of echo, p50 (+12 µs)", "(e) MCP tools/call of echo, p50"),
            ("(e) MCP tools/call of echo, p50 (-3 µs)", "(e) MCP tools/call of echo, p50"),
            ("(b) echo runs/s, 16 clients", "(b) echo runs/s, # clients"),
            (
                "(j) daemon RSS, 1,000 runs sent at once (1,000 waiting at most, in 4.6 s)",
                "(j) daemon RSS, # runs sent at once",
            ),
            ("(d) traces `otlp` (process)", "(d) traces `otlp` (process)"),
        ];
        for (figure, expected) in table {
            assert_eq!(key(figure), expected, "{figure}");
        }
    }

    #[test]
    fn only_ratios_of_medians_rates_and_counts_are_guarded() {
        assert_eq!(guarded(&row("(a) warm echo call, p50", "0.31×")), Some(("(a) warm echo call, p50".into(), 0.31)));
        assert_eq!(guarded(&row("(a) warm echo call, p99", "0.22×")), None, "a tail");
        assert_eq!(guarded(&row("(j) change → tools/list answered, max", "2.00×")), None, "a maximum");
        assert_eq!(
            guarded(&row("(f) LLM gateway max req/s against the bare proxy", "0.91×")),
            Some(("(f) LLM gateway max req/s against the bare proxy".into(), 0.91)),
            "a rate"
        );
        assert_eq!(guarded(&row("(e) MCP's added p50 against `cat`", "5.45×")), None, "a difference");
        assert_eq!(
            guarded(&row("(b) context switches per run, 4 clients (process)", "53.9×")),
            None,
            "the scheduler's"
        );
        assert_eq!(guarded(&row("(n) policy decision share", "2.0 %")), None, "not a ratio");
        assert_eq!(guarded(&row("(n) run added", "+13 µs")), None, "not a ratio");
        assert_eq!(guarded(&row("(x) nothing measured", "0.00×")), None, "no ratio to compare against");
    }

    #[test]
    fn a_reference_leaves_out_ratios_with_one_significant_digit_but_a_check_compares_them() {
        let rows = [row("(d) the receiver's CPU per run", "0.01×"), row("(b) echo runs/s, 4 clients", "0.16×")];
        let recorded = reference_ratios(&rows).unwrap();
        assert_eq!(recorded.into_iter().collect::<Vec<_>>(), [("(b) echo runs/s, # clients".to_string(), 0.16)]);
        // Fallen from 0.16× to 0.07×: still compared, and beyond 2×.
        let now = ratios(&[row("(b) echo runs/s, 4 clients", "0.07×")]).unwrap();
        let reference = [("(b) echo runs/s, # clients".to_string(), 0.16)].into_iter().collect();
        let (verdicts, _) = compare(&reference, &now);
        assert!(!verdicts[0].within(), "{verdicts:?}");
    }

    #[test]
    fn a_ratio_that_moves_beyond_two_times_either_way_fails() {
        let reference: BTreeMap<String, f64> =
            [("a".to_string(), 1.0), ("b".to_string(), 1.0), ("c".to_string(), 4.0), ("gone".to_string(), 1.0)]
                .into_iter()
                .collect();
        let now: BTreeMap<String, f64> =
            [("a".to_string(), 1.9), ("b".to_string(), 0.45), ("c".to_string(), 8.5), ("new".to_string(), 9.0)]
                .into_iter()
                .collect();
        let (verdicts, missing) = compare(&reference, &now);
        let within: Vec<(&str, bool)> = verdicts.iter().map(|v| (v.key.as_str(), v.within())).collect();
        assert_eq!(within, [("a", true), ("b", false), ("c", false)]);
        assert_eq!(missing, ["gone"]);
    }

    #[test]
    fn a_ratio_fails_only_when_it_moved_in_the_second_measurement_too() {
        let moved = |key: &str| Verdict { key: key.to_string(), reference: 1.0, now: 3.0 };
        let back = [row("(b) echo runs/s, 4 clients", "1.2×"), row("(e) MCP tools/list, 1000 actions, p50", "2.5×")];
        assert!(confirm(&[moved("(b) echo runs/s, # clients")], &back).is_ok(), "back within 2×");
        let error = confirm(&[moved("(b) echo runs/s, # clients"), moved("(e) MCP tools/list, # actions, p50")], &back)
            .expect_err("(e) moved again");
        assert!(error.to_string().contains("1 ratio(s) moved beyond 2× in two measurements"), "{error}");
        let error = confirm(&[moved("(j) not measured again")], &back).expect_err("a ratio not measured again stands");
        assert!(error.to_string().contains("1 ratio(s)"), "{error}");
    }
}
