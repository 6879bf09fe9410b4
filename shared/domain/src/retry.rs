//! Retry timing: exponential backoff with full jitter, a pure function of the attempt that
//! failed, the job's policy and a random number the caller supplies.

use crate::job::RetryPolicy;
use chrono::Duration;

/// The wait before the attempt after `failed_attempt` (1 for the first attempt): uniform in
/// `[1 s, min(max_backoff_s, backoff_s × 2^(failed_attempt − 1))]`, `unit` being a random number
/// in `[0, 1)`. At least a second: SQS visibility works in whole seconds.
pub fn backoff(failed_attempt: u32, policy: &RetryPolicy, unit: f64) -> Duration {
    let exponent = failed_attempt.saturating_sub(1).min(30);
    let ceiling = u64::from(policy.backoff_s)
        .saturating_mul(1u64 << exponent)
        .min(u64::from(policy.max_backoff_s))
        .max(1);
    let unit = if unit.is_finite() { unit.clamp(0.0, 1.0) } else { 0.0 };
    let seconds = ((ceiling as f64) * unit).ceil() as i64;
    Duration::seconds(seconds.clamp(1, ceiling as i64))
}

/// Whether another attempt follows the one numbered `attempt`.
pub fn attempts_remain(attempt: u32, policy: &RetryPolicy) -> bool {
    attempt < policy.max_attempts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy(backoff_s: u32, max_backoff_s: u32) -> RetryPolicy {
        RetryPolicy { max_attempts: 5, backoff_s, max_backoff_s }
    }

    #[test]
    fn ceiling_doubles_up_to_the_cap() {
        let p = policy(10, 60);
        assert_eq!(backoff(1, &p, 0.999_999), Duration::seconds(10));
        assert_eq!(backoff(2, &p, 0.999_999), Duration::seconds(20));
        assert_eq!(backoff(3, &p, 0.999_999), Duration::seconds(40));
        assert_eq!(backoff(4, &p, 0.999_999), Duration::seconds(60));
        assert_eq!(backoff(30, &p, 0.999_999), Duration::seconds(60));
        assert_eq!(backoff(1, &p, 0.0), Duration::seconds(1));
    }

    #[test]
    fn attempts_remain_below_the_maximum() {
        let p = policy(1, 1);
        assert!(attempts_remain(4, &p));
        assert!(!attempts_remain(5, &p));
    }

    proptest! {
        #[test]
        fn backoff_is_within_one_second_and_the_ceiling(
            attempt in 1u32..40, base in 1u32..1000, cap in 1u32..43_200, unit in 0.0f64..1.0,
        ) {
            let p = policy(base, cap.max(base));
            let b = backoff(attempt, &p, unit).num_seconds();
            let ceiling = (u64::from(base) << (attempt - 1).min(30)).min(u64::from(cap.max(base))) as i64;
            prop_assert!(b >= 1 && b <= ceiling.max(1));
        }

        #[test]
        fn backoff_grows_with_the_random_number(attempt in 1u32..10, a in 0.0f64..1.0, b in 0.0f64..1.0) {
            let p = policy(10, 3600);
            let (lo, hi) = if a < b { (a, b) } else { (b, a) };
            prop_assert!(backoff(attempt, &p, lo) <= backoff(attempt, &p, hi));
        }
    }
}
