//! Due-index maths: which minute bucket and shard a job's next instant lives in.
//!
//! The `by-due` index is partitioned by `due_bucket = <UTC minute>#<shard>` so that a burst of
//! jobs due in one minute spreads over `shards` partitions; the tick queries every shard of each
//! minute. Instants are written as fixed-width UTC text so that string order is time order.

use chrono::{DateTime, Duration, DurationRound, Utc};

/// Formats an instant as stored: `2026-11-22T03:04:05Z` (whole seconds, fixed width).
pub fn format_instant(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Parses an instant written by [`format_instant`] (or any RFC 3339 text).
pub fn parse_instant(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text).ok().map(|t| t.with_timezone(&Utc))
}

/// The shard of a job: a stable hash of its id modulo the shard count.
pub fn shard_of(job_id: &str, shards: u16) -> u16 {
    let hash = job_id
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    (hash % u64::from(shards.max(1))) as u16
}

/// The UTC minute an instant falls in.
pub fn minute_of(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(Duration::minutes(1)).unwrap_or(t)
}

/// The partition key of a minute and shard: `2026-11-22T03:04Z#07`.
pub fn bucket(minute: DateTime<Utc>, shard: u16) -> String {
    format!("{}#{shard:02}", minute.format("%Y-%m-%dT%H:%MZ"))
}

/// The partition key for a job due at `t`.
pub fn due_bucket(job_id: &str, t: DateTime<Utc>, shards: u16) -> String {
    bucket(minute_of(t), shard_of(job_id, shards))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_name_minute_and_shard() {
        let t: DateTime<Utc> = "2026-11-22T03:04:59Z".parse().unwrap();
        let b = due_bucket("job", t, 16);
        assert!(b.starts_with("2026-11-22T03:04Z#"), "{b}");
        assert_eq!(format_instant(t), "2026-11-22T03:04:59Z");
        assert_eq!(parse_instant("2026-11-22T03:04:59Z"), Some(t));
    }

    proptest! {
        #[test]
        fn shards_are_in_range_and_stable(id in "[a-z0-9]{1,30}", shards in 1u16..64) {
            let s = shard_of(&id, shards);
            prop_assert!(s < shards);
            prop_assert_eq!(s, shard_of(&id, shards));
        }

        #[test]
        fn formatted_instants_sort_like_time(a in 0i64..4_000_000_000, b in 0i64..4_000_000_000) {
            let (ta, tb) = (DateTime::from_timestamp(a, 0).unwrap(), DateTime::from_timestamp(b, 0).unwrap());
            prop_assert_eq!(format_instant(ta).cmp(&format_instant(tb)), ta.cmp(&tb));
            prop_assert!(minute_of(ta) <= ta && ta - minute_of(ta) < Duration::minutes(1));
        }
    }
}
