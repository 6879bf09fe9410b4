//! Following work a target started (a Step Functions execution, an ECS task) to its end: when
//! the next look is due, and how long each look keeps the attempt's lease.
//!
//! A look is a message on the runs queue, asking for the open attempt with the number of looks
//! the attempt had recorded when it was sent, and a tag of its own. The worker that takes it
//! describes the work and either ends the attempt as the work ended or records the look with its
//! tag (a write conditional on the run being unchanged) and sends the next. A look whose number
//! is stale, or whose write loses, sends nothing: a chain of looks duplicated by a redelivery
//! ends at its next look, and exactly one chain follows each attempt. A look that finds the last
//! look recorded under its own tag was that look, back because its successor may never have been
//! sent (a send that failed after the write, a worker that died between the two): it sends the
//! successor again, and the two copies meet at the next write. The start's message stands for
//! the first look ([`FIRST_LOOK_TAG`]). Should every message of a chain be lost all the same,
//! the attempt's lease lapses with no look to renew it: whoever finds it so (the watchdog, a
//! stray message of the attempt) sends a look at once instead of ending the attempt, and that
//! look ends it as the work stands (stopping it past the deadline). Looks fall on one grid counted from the attempt's start
//! ([`FIRST_LOOKS_S`], then every [`LOOK_EVERY_S`]), never later than the attempt's deadline,
//! where the work is stopped: a quick execution costs one look, a long one a look a minute.

use crate::run_queue::delay_until;
use chrono::{DateTime, Duration, Utc};

/// The first looks, in seconds after the attempt started.
pub const FIRST_LOOKS_S: [i64; 6] = [2, 5, 10, 20, 40, 60];
/// After the first looks, one every this many seconds.
pub const LOOK_EVERY_S: i64 = 60;
/// How long each look keeps the attempt's lease: many look intervals, so that a backlog of the
/// runs queue delays a look without the watchdog taking the attempt for lost.
pub const LEASE: Duration = Duration::minutes(10);
/// The tag of the first look, recorded by the attempt's start message.
pub const FIRST_LOOK_TAG: &str = "start";

/// A look's tag, from a number drawn in `[0, 1)`.
pub fn tag(unit: f64) -> String {
    format!("{:013x}", (unit * (1u64 << 52) as f64) as u64)
}
/// How long after an attempt's deadline a failing stop of its work is tried again before the
/// attempt is ended all the same (its error says the work may still run).
pub const STOP_GRACE: Duration = Duration::minutes(15);
/// How often the watchdog sends a look for followed work whose looks went quiet.
pub const REVIVE_EVERY: Duration = Duration::minutes(2);
/// How long after its start work may be unknown to its service's describe call (Step Functions
/// and ECS read their own writes eventually) before it counts as gone.
pub const MISSING_GRACE: Duration = Duration::seconds(60);

/// Seconds from `now` until the next look at work started at `started_at`: the next point of the
/// grid, or `deadline` if sooner; at least one second.
pub fn next_look(started_at: DateTime<Utc>, now: DateTime<Utc>, deadline: Option<DateTime<Utc>>) -> u32 {
    let elapsed_ms = (now - started_at).num_milliseconds().max(0);
    let next_s = FIRST_LOOKS_S
        .iter()
        .copied()
        .find(|s| s * 1000 > elapsed_ms)
        .unwrap_or_else(|| (elapsed_ms / 1000 / LOOK_EVERY_S + 1) * LOOK_EVERY_S);
    let at = started_at + Duration::seconds(next_s);
    let at = deadline.map_or(at, |deadline| at.min(deadline));
    delay_until(at, now).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::at as t;

    #[test]
    fn looks_fall_on_one_grid_from_the_start() {
        let start = t("2026-06-01T00:00:00Z");
        let after = |s: i64| next_look(start, start + Duration::milliseconds(s), None);
        assert_eq!(after(0), 2);
        assert_eq!(after(1_500), 1, "rounded up to the second");
        assert_eq!(after(2_000), 3, "a look at a grid point asks for the next one");
        assert_eq!(after(45_000), 15);
        assert_eq!(after(60_000), 60);
        assert_eq!(after(61_000), 59);
        assert_eq!(after(3_600_500), 60, "every minute, on the minute of the start");
    }

    #[test]
    fn no_look_is_later_than_the_deadline() {
        let start = t("2026-06-01T00:00:00Z");
        let deadline = Some(start + Duration::seconds(30));
        assert_eq!(next_look(start, start + Duration::seconds(21), deadline), 9);
        assert_eq!(next_look(start, start + Duration::seconds(31), deadline), 1, "past it: at once");
    }
}
