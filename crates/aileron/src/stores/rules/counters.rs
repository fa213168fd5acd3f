//! The run counters rules read (SPEC §16): per principal and tool, the runs admitted in the last
//! hour, the last day, and in the session — counted when a run is admitted, before it runs, so
//! calls racing past a limit cannot all get in: deciding and counting happen under one lock.
//!
//! Durable through the audit log: when the rules read a counter, each admission is recorded
//! (`policy.admitted`, fsynced before the run starts) and a starting daemon counts those of the
//! last day again ([`Counters::rebuild`]). A run killed mid-flight therefore still counts; no
//! second database.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};

/// What the rules see for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub last_hour: i64,
    pub last_day: i64,
    pub session: i64,
}

#[derive(Debug, Default)]
struct Window {
    /// Admission times within the last day, oldest first.
    times: VecDeque<DateTime<Utc>>,
    /// Every admission counted for this principal and tool.
    total: i64,
}

impl Window {
    fn forget_before(&mut self, now: DateTime<Utc>) {
        let day_ago = now - Duration::days(1);
        while self.times.front().is_some_and(|t| *t <= day_ago) {
            self.times.pop_front();
        }
    }

    fn counts(&self, now: DateTime<Utc>) -> Counts {
        let hour_ago = now - Duration::hours(1);
        // Times are in order: those of the last hour are at the back.
        let last_hour = self.times.len() - self.times.partition_point(|t| *t <= hour_ago);
        Counts { last_hour: last_hour as i64, last_day: self.times.len() as i64, session: self.total }
    }
}

/// The counters of every principal and tool.
#[derive(Debug, Default)]
pub struct Counters {
    windows: Mutex<HashMap<(String, String), Window>>,
}

/// What [`Counters::admit`] decided, with the counts the decision saw.
pub struct Admission<T> {
    pub decided: T,
    pub counts: Counts,
    /// Whether the call was counted.
    pub counted: bool,
}

impl Counters {
    /// Decides with the counts of `(subject, tool)` at `now` and, when `counts_it` says so of the
    /// decision, counts the call — both under the lock, so `k` admissions under a limit of `k`
    /// are all there are, however many calls race.
    pub fn admit<T>(
        &self,
        subject: &str,
        tool: &str,
        now: DateTime<Utc>,
        decide: impl FnOnce(Counts) -> T,
        counts_it: impl FnOnce(&T) -> bool,
    ) -> Admission<T> {
        let mut windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let window = windows.entry((subject.to_string(), tool.to_string())).or_default();
        window.forget_before(now);
        let counts = window.counts(now);
        let decided = decide(counts);
        let counted = counts_it(&decided);
        if counted {
            window.times.push_back(now);
            window.total += 1;
        }
        Admission { decided, counts, counted }
    }

    /// The counts of `(subject, tool)` at `now` (a later moment too: nothing admitted meanwhile),
    /// without counting anything.
    pub fn counts(&self, subject: &str, tool: &str, now: DateTime<Utc>) -> Counts {
        let windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        windows.get(&(subject.to_string(), tool.to_string())).map(|w| w.counts(now)).unwrap_or_default()
    }

    /// When the counts of `(subject, tool)` will next go down, after `now`: the moments the
    /// oldest admissions leave the hour and the day, soonest first (what "retry after" is
    /// searched over).
    pub fn releases(&self, subject: &str, tool: &str, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(window) = windows.get(&(subject.to_string(), tool.to_string())) else { return Vec::new() };
        let mut moments: Vec<DateTime<Utc>> = window
            .times
            .iter()
            .flat_map(|t| [*t + Duration::hours(1), *t + Duration::days(1)])
            .filter(|moment| *moment > now)
            .collect();
        moments.sort();
        moments.dedup();
        moments
    }

    /// Counts an admission recorded earlier (a starting daemon reading the audit log).
    pub fn record(&self, subject: &str, tool: &str, at: DateTime<Utc>) {
        let mut windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let window = windows.entry((subject.to_string(), tool.to_string())).or_default();
        // Records come oldest first; keep the times in order regardless.
        let index = window.times.partition_point(|t| *t <= at);
        window.times.insert(index, at);
        window.total += 1;
    }
}

impl Counters {
    /// Counts again the admissions the audit log recorded in the day before `now`
    /// (`policy.admitted`): what a restarted daemon starts from. Returns how many it read.
    pub fn rebuild(&self, audit: &crate::stores::audit_log::AuditLog, now: DateTime<Utc>) -> Result<usize, String> {
        use aileron_core::vocabulary::{EventType, keys};
        let filter = crate::stores::audit_log::AuditFilter {
            since: Some((now - Duration::days(1)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            event_type: Some(EventType::PolicyAdmitted.as_str().to_string()),
            ..Default::default()
        };
        let records = audit.query(&filter).map_err(|e| e.to_string())?;
        // Newest first from the query: counted oldest first.
        for record in records.iter().rev() {
            let field = |key: &str| record.payload.get(key).and_then(serde_json::Value::as_str);
            let (Some(subject), Some(tool)) = (field(keys::POLICY_SUBJECT), field(keys::ACTION_NAME)) else { continue };
            let Ok(at) = DateTime::parse_from_rfc3339(&record.timestamp) else { continue };
            self.record(subject, tool, at.with_timezone(&Utc));
        }
        Ok(records.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn counts_move_with_the_clock() {
        let counters = Counters::default();
        for time in ["2026-11-28T09:00:00Z", "2026-11-29T08:30:00Z", "2026-11-29T09:10:00Z"] {
            counters.admit("agent:s", "send", at(time), |_| (), |_| true);
        }
        let now = at("2026-11-29T09:20:00Z");
        assert_eq!(counters.counts("agent:s", "send", now), Counts { last_hour: 2, last_day: 2, session: 3 });
        assert_eq!(counters.counts("agent:s", "other", now), Counts::default());
        assert_eq!(
            counters.releases("agent:s", "send", now),
            vec![
                at("2026-11-29T09:30:00Z"),
                at("2026-11-29T10:10:00Z"),
                at("2026-11-30T08:30:00Z"),
                at("2026-11-30T09:10:00Z")
            ]
        );
        assert_eq!(counters.counts("agent:s", "send", at("2026-11-29T09:45:00Z")).last_hour, 1);
    }
}
