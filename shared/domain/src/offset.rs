//! Start offsets: how long after its scheduled instant a run may first start, as a pure
//! function of the job's id and the instant (so racing claimers agree, and the forecast counts
//! a run where the tick puts it). [`crate::job::Job::start_offset`] picks between them.

use chrono::{DateTime, Duration, Utc};

/// The deterministic start offset of `jitter_s` for one instant of one job: the same job and
/// instant always get the same offset in `0..=jitter_s` seconds (FNV-1a of both).
pub fn jitter_offset(job_id: &str, instant: DateTime<Utc>, jitter_s: u32) -> Duration {
    if jitter_s == 0 {
        return Duration::zero();
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in job_id.bytes().chain(instant.timestamp().to_be_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    Duration::seconds((hash % (u64::from(jitter_s) + 1)) as i64)
}

/// The start offset a flexible window of `window_s` gives one instant of one job, in
/// `0..=window_s` seconds: a pure function of both, so racing claimers agree and the forecast
/// counts the run where the tick puts it. FNV-1a of the id and the instant, finished with
/// SplitMix64's mixer (every input bit reaches every output bit, so ids that share a ULID
/// time prefix and consecutive instants still land independently), then scaled by
/// multiplication rather than a remainder (no modulo bias). Each job of a peak lands uniformly
/// and independently of the others: a minute's count is binomial around the window's average,
/// which is as flat as any rule that sees one job at a time can make it (docs/decisions.md).
pub fn spread_offset(job_id: &str, instant: DateTime<Utc>, window_s: u32) -> Duration {
    if window_s == 0 {
        return Duration::zero();
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in job_id.bytes().chain([0xff]).chain(instant.timestamp().to_be_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^= hash >> 31;
    let slots = u128::from(window_s) + 1;
    Duration::seconds(((u128::from(hash) * slots) >> 64) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn jitter_is_deterministic_and_bounded() {
        let t = utc("2026-01-01T00:00:00Z");
        assert_eq!(jitter_offset("job", t, 30), jitter_offset("job", t, 30));
        assert_eq!(jitter_offset("job", t, 0), Duration::zero());
        let offsets: std::collections::HashSet<i64> =
            (0..200).map(|k| jitter_offset("job", t + Duration::minutes(k), 30).num_seconds()).collect();
        assert!(offsets.iter().all(|o| (0..=30).contains(o)));
        assert!(offsets.len() > 20, "offsets should spread: {offsets:?}");
    }

    #[test]
    fn spread_is_deterministic_bounded_and_covers_the_window() {
        let t = utc("2026-01-01T00:00:00Z");
        assert_eq!(spread_offset("job", t, 600), spread_offset("job", t, 600));
        assert_eq!(spread_offset("job", t, 0), Duration::zero());
        let offsets: Vec<i64> =
            (0..5_000).map(|k| spread_offset(&format!("job{k}"), t, 600).num_seconds()).collect();
        assert!(offsets.iter().all(|o| (0..=600).contains(o)));
        // Both ends of the window are reachable.
        assert_eq!(offsets.iter().min(), Some(&0));
        assert!((599..=600).contains(offsets.iter().max().unwrap_or(&0)), "{:?}", offsets.iter().max());
    }
}
