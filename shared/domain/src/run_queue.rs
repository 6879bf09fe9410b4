//! Dispatching runs through the queue: a run becomes visible at its second.
//!
//! `DelaySeconds` is the time until the run is due, rounded up, so a message is never visible
//! before its instant (SQS caps the delay at 15 minutes; runs are never claimed further ahead
//! than that, and a longer wait is a chain of messages).
//!
//! Receives are spent only on failures: a consumer holds a message for [`HOLD_S`] and extends
//! the hold while it works, so a message of a crashed consumer comes back within a minute; a
//! wait (a backoff, an early arrival) replaces the message with a delayed one instead of hiding
//! it, so `maxReceiveCount` counts real failures only.

use crate::run::{Run, RunId, RunMessage};
use chrono::{DateTime, Utc};

/// SQS's longest message delay.
pub const MAX_DELAY_S: u32 = crate::limits::MAX_MESSAGE_DELAY_S;
/// SQS's largest batch.
pub const BATCH: usize = 10;

/// A message to send and how long to keep it invisible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    pub message: RunMessage,
    pub delay_s: u32,
    /// Whose run it is, as the queue's fair-share tenant (SQS `MessageGroupId`): one owner's
    /// burst does not hold the other owners' messages back. See [`tenant_of`].
    pub tenant: String,
}

impl Dispatch {
    /// The message for `run`'s next attempt, visible when that attempt may start.
    pub fn next_attempt(run: &Run, now: DateTime<Utc>) -> Dispatch {
        let at = run.waits_until().unwrap_or(now);
        Dispatch::after(run, delay_until(at, now))
    }

    /// The message for `run`'s next attempt, visible in `delay_s` seconds.
    pub fn after(run: &Run, delay_s: u32) -> Dispatch {
        Dispatch { message: run.next_message(), delay_s, tenant: tenant_of(&run.owner) }
    }

    /// The next look at the work `run`'s open attempt started, tagged `tag`, visible in
    /// `delay_s` seconds: `seen` is the number of looks the attempt has recorded
    /// ([`crate::follow`]).
    pub fn look(run: &Run, seen: u32, tag: String, delay_s: u32) -> Dispatch {
        let message = RunMessage {
            job_id: run.job_id.to_string(),
            run_key: run.key.encode(),
            attempt: run.attempt,
            look: Some(seen),
            tag: Some(tag),
        };
        Dispatch { message, delay_s, tenant: tenant_of(&run.owner) }
    }

    /// The message asking for attempt `attempt` of the run `id` of `owner`, visible now: a
    /// waiter woken by the group slot handed to it (only its id and attempt are at hand).
    pub fn wake(id: &RunId, attempt: u32, owner: &str) -> Dispatch {
        let message = RunMessage {
            job_id: id.job_id.to_string(),
            run_key: id.key.encode(),
            attempt,
            look: None,
            tag: None,
        };
        Dispatch { message, delay_s: 0, tenant: tenant_of(owner) }
    }
}

/// The longest `MessageGroupId` SQS accepts.
pub const MAX_TENANT_LEN: usize = 128;

/// An owner as a fair-share tenant id: the owner itself when SQS accepts it as a
/// `MessageGroupId` (1–128 ASCII letters, digits and punctuation), else `h-` and the hex of its
/// SHA-256, so that every owner stays one distinct, valid tenant.
pub fn tenant_of(owner: &str) -> String {
    let valid = !owner.is_empty()
        && owner.len() <= MAX_TENANT_LEN
        && owner.bytes().all(|b| b.is_ascii_alphanumeric() || b.is_ascii_punctuation());
    if valid {
        return owner.to_string();
    }
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(owner.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("h-{hex}")
}

/// How long a consumer holds a message it received; it extends the hold every
/// [`HOLD_RENEW_S`] while it works.
pub const HOLD_S: u32 = 60;
/// How often a held message's hold is renewed.
pub const HOLD_RENEW_S: u64 = 20;

/// How long a message that failed for a transient reason (storage unavailable, a send that did
/// not happen) stays hidden before its next receive: 10 s doubling with each receive, at most
/// 15 minutes, so `maxReceiveCount` (15) outlasts a brownout of hours, not seconds.
pub fn transient_backoff_s(receive_count: u32) -> u32 {
    let exponent = receive_count.saturating_sub(1).min(10);
    (10u32 << exponent).min(MAX_DELAY_S)
}

/// Seconds from `now` until `due`, rounded up, within SQS's bounds.
pub fn delay_until(due: DateTime<Utc>, now: DateTime<Utc>) -> u32 {
    let millis = (due - now).num_milliseconds();
    if millis <= 0 {
        return 0;
    }
    (((millis + 999) / 1000) as u64).min(u64::from(MAX_DELAY_S)) as u32
}

/// How soon after a whole second a send counts as made at it: a message sent this close to a
/// second's start is visible at most this late.
pub const ALIGNED_WITHIN_MS: i64 = 100;
/// How far past a whole second an aligned send is made, so that a wake-up the wall clock reads a
/// few milliseconds early still falls in the new second.
pub const ALIGN_MARGIN_MS: i64 = 20;

/// When to send, as of `now`, the first message of a run due at `due`, so that it is visible as
/// soon after `due` as SQS allows.
///
/// SQS counts a delay in whole seconds from the moment it has the message, and [`delay_until`]
/// rounds up, so a message sent at a fraction `f` into a second for a run due on a whole second
/// is visible `f` late. A run due later than now is therefore sent just after the next whole
/// second (a wait of under a second), unless now is just after one already; a run due by now is
/// sent now. Only the send moves: its delay is still counted from the clock read before it, so
/// the message is never visible before its run is due.
pub fn aligned_send(due: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    // A leap second reads as 1,000 ms and more.
    let into_second = i64::from(now.timestamp_subsec_millis().min(999));
    if due <= now || into_second <= ALIGNED_WITHIN_MS {
        return now;
    }
    now + chrono::Duration::milliseconds(1000 - into_second + ALIGN_MARGIN_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_owner_is_a_valid_distinct_tenant() {
        assert_eq!(tenant_of("team-a"), "team-a");
        assert_eq!(tenant_of("arn:aws:iam::1:user/x"), "arn:aws:iam::1:user/x");
        for odd in ["", "with space", "ténant", &"x".repeat(129)] {
            let tenant = tenant_of(odd);
            assert!(tenant.starts_with("h-") && tenant.len() == 66, "{odd:?} → {tenant}");
        }
        assert_ne!(tenant_of("with space"), tenant_of("with  space"));
    }
    use chrono::Duration;

    #[test]
    fn delays_round_up_and_stay_in_bounds() {
        let now: DateTime<Utc> = "2026-01-01T12:00:00.250Z".parse().unwrap();
        let due: DateTime<Utc> = "2026-01-01T12:00:37Z".parse().unwrap();
        assert_eq!(delay_until(due, now), 37, "36.75 s rounds up: never visible early");
        assert_eq!(delay_until(now, now), 0);
        assert_eq!(delay_until(now - Duration::seconds(5), now), 0);
        assert_eq!(delay_until(now + Duration::hours(1), now), MAX_DELAY_S);
        assert_eq!(delay_until(now + Duration::milliseconds(1), now), 1);
    }

    #[test]
    fn transient_failures_back_off_so_receives_last_hours() {
        assert_eq!(transient_backoff_s(1), 10);
        assert_eq!(transient_backoff_s(2), 20);
        assert_eq!(transient_backoff_s(7), 640);
        assert_eq!(transient_backoff_s(8), MAX_DELAY_S);
        assert_eq!(transient_backoff_s(u32::MAX), MAX_DELAY_S);
        // The 15 receives a message gets before the DLQ span over two hours of failures.
        let total: u32 = (1..=15).map(transient_backoff_s).sum();
        assert!(total > 2 * 3600, "{total}");
    }

    #[test]
    fn runs_due_later_are_sent_just_after_a_whole_second() {
        let now: DateTime<Utc> = "2026-01-01T12:00:00.600Z".parse().unwrap();
        let due: DateTime<Utc> = "2026-01-01T12:01:00Z".parse().unwrap();
        let at = aligned_send(due, now);
        assert_eq!(at, "2026-01-01T12:00:01.020Z".parse::<DateTime<Utc>>().unwrap());
        // Sent then, it is visible 20 ms after its instant instead of 600 ms.
        let visible = at + Duration::seconds(i64::from(delay_until(due, at)));
        assert_eq!(visible - due, Duration::milliseconds(20));
        let unaligned = now + Duration::seconds(i64::from(delay_until(due, now)));
        assert_eq!(unaligned - due, Duration::milliseconds(600));
        // Due within the next second too: sent at the aligned instant with no delay.
        let soon: DateTime<Utc> = "2026-01-01T12:00:00.900Z".parse().unwrap();
        assert_eq!(aligned_send(soon, now), at);
        assert_eq!(delay_until(soon, at), 0);
    }

    #[test]
    fn runs_due_already_or_sends_near_a_second_go_now() {
        let now: DateTime<Utc> = "2026-01-01T12:00:00.600Z".parse().unwrap();
        assert_eq!(aligned_send(now, now), now);
        assert_eq!(aligned_send(now - Duration::seconds(3), now), now);
        let early: DateTime<Utc> = "2026-01-01T12:00:00.080Z".parse().unwrap();
        assert_eq!(aligned_send(early + Duration::seconds(60), early), early);
    }

    proptest::proptest! {
        /// An aligned send waits under a second and is never visible before its run is due.
        #[test]
        fn aligned_sends_wait_under_a_second_and_are_never_early(
            now_ms in 0i64..10_000_000, due_ms in -5_000i64..900_000,
        ) {
            let now = DateTime::<Utc>::from_timestamp_millis(1_800_000_000_000 + now_ms).unwrap();
            let due = now + Duration::milliseconds(due_ms);
            let at = aligned_send(due, now);
            proptest::prop_assert!(at >= now && at - now < Duration::milliseconds(1000 + ALIGN_MARGIN_MS));
            let visible = at + Duration::seconds(i64::from(delay_until(due, at)));
            proptest::prop_assert!(visible >= due);
            if due_ms > 0 && due.timestamp_subsec_millis() == 0 {
                proptest::prop_assert!(visible - due <= Duration::milliseconds(ALIGNED_WITHIN_MS));
            }
        }
    }
}
