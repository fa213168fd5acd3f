//! How a figure is summarised and printed: a sorted sample set and its nearest-rank
//! percentiles, ratios against a baseline, and durations, counts, rates and sizes as they read in
//! BENCHMARKS.md.

use std::fmt::Write as _;
use std::time::Duration;

/// Samples sorted once; percentiles by the nearest-rank method.
#[derive(Debug, Clone)]
pub(super) struct Distribution {
    pub(super) sorted: Vec<Duration>,
}

impl Distribution {
    pub(super) fn new(mut samples: Vec<Duration>) -> Distribution {
        samples.sort_unstable();
        Distribution { sorted: samples }
    }

    /// These samples and `other`'s, as one set.
    pub(super) fn merged(self, other: Distribution) -> Distribution {
        let mut samples = self.sorted;
        samples.extend(other.sorted);
        Distribution::new(samples)
    }

    pub(super) fn len(&self) -> usize {
        self.sorted.len()
    }

    /// The smallest sample with at least `percent` % of the samples at or below it.
    fn percentile(&self, percent: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = (percent / 100.0 * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    pub(super) fn p50(&self) -> Duration {
        self.percentile(50.0)
    }

    pub(super) fn p99(&self) -> Duration {
        self.percentile(99.0)
    }

    pub(super) fn mean(&self) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        self.sorted.iter().sum::<Duration>() / self.sorted.len() as u32
    }

    pub(super) fn min(&self) -> Duration {
        self.sorted.first().copied().unwrap_or_default()
    }

    pub(super) fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or_default()
    }
}

/// One markdown table row per labelled distribution: n, p50, p99, mean, min, max.
pub(super) fn distribution_rows(text: &mut String, rows: &[(&str, &Distribution)]) {
    for (label, samples) in rows {
        let _ = writeln!(
            text,
            "| {label} | {} | {} | {} | {} | {} | {} |",
            samples.len(),
            format_duration(samples.p50()),
            format_duration(samples.p99()),
            format_duration(samples.mean()),
            format_duration(samples.min()),
            format_duration(samples.max()),
        );
    }
}

pub(super) fn ratio(measured: Duration, baseline: Duration) -> f64 {
    measured.as_secs_f64() / baseline.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// `measured − baseline` in microseconds, signed.
pub(super) fn added_micros(measured: Duration, baseline: Duration) -> f64 {
    (measured.as_secs_f64() - baseline.as_secs_f64()) * 1e6
}

pub(super) fn format_duration(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    if micros < 1_000.0 {
        format!("{micros:.1} µs")
    } else if micros < 1_000_000.0 {
        format!("{:.2} ms", micros / 1e3)
    } else {
        format!("{:.2} s", micros / 1e6)
    }
}

pub(super) fn format_ratio(ratio: f64) -> String {
    format!("{ratio:.2}×")
}

/// ` (rounds: 0.86×, 1.00×, 0.89×)`: `ours` against `floor` round by round, so a reader sees
/// whether a pooled ratio near its goal is every round's or one slow round's; empty for one round.
pub(super) fn round_ratios(ours: &[f64], floor: &[f64]) -> String {
    if ours.len() < 2 || ours.len() != floor.len() {
        return String::new();
    }
    let ratios: Vec<String> =
        ours.iter().zip(floor).map(|(ours, floor)| format_ratio(ours / floor.max(f64::MIN_POSITIVE))).collect();
    format!(" (rounds: {})", ratios.join(", "))
}

/// `1234567` → `1,234,567`.
pub(super) fn format_count(count: u64) -> String {
    let digits = count.to_string();
    let mut grouped = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

pub(super) fn format_rate(per_second: f64) -> String {
    format!("{}/s", format_count(per_second.round() as u64))
}

pub(super) fn format_bytes(bytes: usize) -> String {
    format!("{:.0} KiB", bytes as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|v| Duration::from_micros(*v)).collect()
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let hundred: Vec<u64> = (1..=100).rev().collect();
        // (samples, percentile, expected µs)
        let table: [(&[u64], f64, u64); 8] = [
            (&hundred, 50.0, 50),
            (&hundred, 99.0, 99),
            (&hundred, 100.0, 100),
            (&hundred, 0.0, 1),
            (&[7], 50.0, 7),
            (&[7], 99.0, 7),
            (&[3, 1, 2], 50.0, 2),
            (&[10, 20, 30, 40], 50.0, 20),
        ];
        for (samples, percent, expected) in table {
            let distribution = Distribution::new(micros(samples));
            assert_eq!(distribution.percentile(percent), Duration::from_micros(expected), "{samples:?} p{percent}");
        }
        let distribution = Distribution::new(micros(&[4, 1, 7]));
        assert_eq!(
            (distribution.min(), distribution.max(), distribution.mean()),
            (Duration::from_micros(1), Duration::from_micros(7), Duration::from_micros(4))
        );
        assert_eq!(Distribution::new(Vec::new()).p99(), Duration::ZERO);
    }

    #[test]
    fn merged_samples_are_one_sorted_set() {
        let first = Distribution::new(micros(&[30, 10, 50]));
        let later = Distribution::new(micros(&[40, 20]));
        let merged = first.merged(later);
        assert_eq!(merged.sorted, micros(&[10, 20, 30, 40, 50]));
        assert_eq!((merged.len(), merged.p50()), (5, Duration::from_micros(30)));
        let empty = Distribution::new(Vec::new()).merged(Distribution::new(micros(&[7])));
        assert_eq!(empty.p99(), Duration::from_micros(7));
    }

    #[test]
    fn figures_format_for_people() {
        let durations = [
            (Duration::from_nanos(41_234), "41.2 µs"),
            (Duration::from_nanos(999_900), "999.9 µs"),
            (Duration::from_micros(1_500), "1.50 ms"),
            (Duration::from_millis(20), "20.00 ms"),
            (Duration::from_millis(2_346), "2.35 s"),
        ];
        for (duration, expected) in durations {
            assert_eq!(format_duration(duration), expected);
        }
        for (count, expected) in [(0, "0"), (999, "999"), (1_000, "1,000"), (1_234_567, "1,234,567")] {
            assert_eq!(format_count(count), expected);
        }
        assert_eq!(format_rate(1_530.4), "1,530/s");
        assert_eq!(format_ratio(ratio(Duration::from_micros(60), Duration::from_micros(40))), "1.50×");
    }
}
