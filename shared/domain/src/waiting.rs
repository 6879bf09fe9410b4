//! Why a waiting run (QUEUED or RETRYING) has not started yet: its start offset within the
//! job's flexible window, its backoff after a failed attempt, or its concurrency group being
//! full. Shown on `GET /v1/runs/{id}` and the dashboard's run page.

use crate::group::Group;
use crate::run::{Run, RunState};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// What a waiting run waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Wait {
    /// Its start was moved within the job's flexible window (or jitter): it starts at `until`,
    /// `offset_s` after its scheduled instant.
    FlexibleOffset { until: DateTime<Utc>, offset_s: i64 },
    /// Its instant has not come yet (claimed ahead of it).
    NotDue { until: DateTime<Utc> },
    /// Attempt `attempt` failed; the next starts after the backoff, at `until`.
    Backoff { until: DateTime<Utc>, attempt: u32 },
    /// Its group is full: `running` of `max_running` attempts run, and `ahead` older runs wait
    /// first.
    Group { group: String, running: usize, max_running: u32, ahead: usize },
}

/// Why `run` has not started at `now`; `group` is its job's group as read, if the job has one.
/// `None` for a run that is not waiting, or is about to start.
pub fn wait_of(run: &Run, group: Option<&Group>, now: DateTime<Utc>) -> Option<Wait> {
    let until = run.waits_until()?;
    if until > now {
        return Some(match run.state {
            RunState::Retrying => Wait::Backoff { until, attempt: run.attempt },
            _ if run.due_at > run.scheduled_at() => {
                Wait::FlexibleOffset { until, offset_s: (run.due_at - run.scheduled_at()).num_seconds() }
            }
            _ => Wait::NotDue { until },
        });
    }
    let group = group?;
    let id = run.id().to_string();
    let me = group.live_waiters(now).find(|(waiter, _)| **waiter == id)?.1;
    let ahead = group
        .live_waiters(now)
        .filter(|(other, w)| (w.instant, other.as_str()) < (me.instant, id.as_str()))
        .count();
    Some(Wait::Group {
        group: group.name.clone(),
        running: group.slots.len(),
        max_running: group.max_running,
        ahead,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{at, job};
    use crate::group::Taken;
    use crate::run::RunKey;
    use crate::run::transition::claim;
    use chrono::Duration;

    #[test]
    fn a_waiting_run_says_what_it_waits_for() {
        let j = job(serde_json::json!({}));
        let t = at("2026-11-22T10:00:00Z");
        let offset = claim(&j, RunKey::scheduled(t), t + Duration::seconds(90), t, Duration::days(1));
        assert_eq!(
            wait_of(&offset, None, t),
            Some(Wait::FlexibleOffset { until: t + Duration::seconds(90), offset_s: 90 })
        );
        let ahead = claim(&j, RunKey::scheduled(t), t, t - Duration::seconds(30), Duration::days(1));
        assert_eq!(wait_of(&ahead, None, t - Duration::seconds(10)), Some(Wait::NotDue { until: t }));
        let retrying = Run {
            state: RunState::Retrying,
            attempt: 1,
            retry_at: Some(t + Duration::seconds(20)),
            ..ahead.clone()
        };
        assert_eq!(
            wait_of(&retrying, None, t),
            Some(Wait::Backoff { until: t + Duration::seconds(20), attempt: 1 })
        );
        assert_eq!(wait_of(&ahead, None, t), None, "due, no group: about to start");
        let mut group = Group::new("alice", "etl", 0, t);
        assert!(matches!(
            group.take(&ahead.id().to_string(), &ahead, Duration::seconds(30), t),
            Taken::Wait { .. }
        ));
        assert_eq!(
            wait_of(&ahead, Some(&group), t),
            Some(Wait::Group { group: "etl".into(), running: 0, max_running: 0, ahead: 0 })
        );
    }
}
