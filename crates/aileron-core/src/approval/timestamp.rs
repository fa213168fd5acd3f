//! The two UTC time forms the approval queue reads: RFC 3339 as the shell writes it
//! (`2026-11-22T05:37:00.123Z`) and the compact form inside approval ids (`20261122T053700Z`).
//!
//! Parsed by hand because core carries no date-time crate. Only the forms Aileron itself writes
//! are accepted (UTC `Z`, optional fraction), and every field is range-checked so that an id such
//! as `act-20261399T999999Z-...` arriving in a URL is rejected rather than carried around.

/// A validated UTC calendar time with millisecond precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UtcTime {
    year: u32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    millis: u32,
}

impl UtcTime {
    /// `YYYY-MM-DDTHH:MM:SS[.fraction]Z`; the fraction is cut to milliseconds.
    pub(crate) fn parse_rfc3339(text: &str) -> Option<UtcTime> {
        let bytes = text.as_bytes();
        // The length and separator checks come first so that the slicing below stays on ASCII.
        if !text.is_ascii() || bytes.len() < 20 {
            return None;
        }
        if bytes[4] != b'-' || bytes[7] != b'-' || bytes[10] != b'T' || bytes[13] != b':' || bytes[16] != b':' {
            return None;
        }
        let rest = text[19..].strip_suffix('Z')?;
        let millis = if rest.is_empty() {
            0
        } else {
            let fraction = rest.strip_prefix('.')?;
            if fraction.is_empty() || !fraction.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let padded: String = fraction.chars().chain("00".chars()).take(3).collect();
            padded.parse().ok()?
        };
        UtcTime::new(
            digits(&text[0..4])?,
            digits(&text[5..7])?,
            digits(&text[8..10])?,
            digits(&text[11..13])?,
            digits(&text[14..16])?,
            digits(&text[17..19])?,
            millis,
        )
    }

    /// `YYYYMMDDTHHMMSSZ`.
    pub(crate) fn parse_compact(text: &str) -> Option<UtcTime> {
        let bytes = text.as_bytes();
        if !text.is_ascii() || bytes.len() != 16 || bytes[8] != b'T' || bytes[15] != b'Z' {
            return None;
        }
        UtcTime::new(
            digits(&text[0..4])?,
            digits(&text[4..6])?,
            digits(&text[6..8])?,
            digits(&text[9..11])?,
            digits(&text[11..13])?,
            digits(&text[13..15])?,
            0,
        )
    }

    fn new(year: u32, month: u32, day: u32, hour: u32, minute: u32, second: u32, millis: u32) -> Option<UtcTime> {
        let valid = (1..=12).contains(&month)
            && (1..=days_in_month(year, month)).contains(&day)
            && hour < 24
            && minute < 60
            && second < 60
            && millis < 1000;
        valid.then_some(UtcTime { year, month, day, hour, minute, second, millis })
    }

    /// `YYYYMMDDTHHMMSSZ` (seconds precision).
    pub(crate) fn compact(&self) -> String {
        format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// Milliseconds since 1970-01-01T00:00:00Z.
    pub(crate) fn epoch_millis(&self) -> i64 {
        let days = days_from_civil(i64::from(self.year), i64::from(self.month), i64::from(self.day));
        let seconds =
            days * 86_400 + i64::from(self.hour) * 3_600 + i64::from(self.minute) * 60 + i64::from(self.second);
        seconds * 1_000 + i64::from(self.millis)
    }
}

/// Milliseconds from `from` to `to` (both RFC 3339 UTC), saturating at zero when the clock went
/// backwards; `None` when either does not parse.
pub(crate) fn millis_between(from: &str, to: &str) -> Option<u64> {
    let from = UtcTime::parse_rfc3339(from)?.epoch_millis();
    let to = UtcTime::parse_rfc3339(to)?.epoch_millis();
    Some(u64::try_from(to - from).unwrap_or(0))
}

fn digits(text: &str) -> Option<u32> {
    if text.bytes().all(|b| b.is_ascii_digit()) { text.parse().ok() } else { None }
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
