//! A schedule's DST policy (`schedule.dst`): what a cron's local time does when a DST change
//! skips it (a gap) or repeats it (a fold). The rule it changes, and the walk that finds what a
//! change does to a schedule, are in [`crate::schedule::zoned`].

use serde::{Deserialize, Serialize};

/// What a local time skipped by a DST change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DstGap {
    /// Fires once, at the end of the gap (02:30 → 03:00).
    Shift,
    /// Does not fire that day.
    Skip,
}

/// What a local time that occurs twice (a fall-back) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DstFold {
    /// Fires once, at its first occurrence.
    First,
    /// Fires at both occurrences.
    Both,
}

/// A schedule's DST policy (`schedule.dst`); each rule left out is the default rule: `shift` and
/// `first` for a fixed hour, `skip` and `both` for an expression that follows real time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DstPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<DstGap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fold: Option<DstFold>,
}

impl DstPolicy {
    /// The gap rule for a cron that follows real time (a `*` hour) or not.
    pub fn gap_for(&self, follows_real_time: bool) -> DstGap {
        self.gap.unwrap_or(if follows_real_time { DstGap::Skip } else { DstGap::Shift })
    }

    /// The fold rule for a cron that follows real time (a `*` hour) or not.
    pub fn fold_for(&self, follows_real_time: bool) -> DstFold {
        self.fold.unwrap_or(if follows_real_time { DstFold::Both } else { DstFold::First })
    }
}
