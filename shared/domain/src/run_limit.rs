//! What `schedule.max_runs` counts, and how a claim pass counts against it: the scheduled runs
//! a job's claims wrote (not manual runs, not a backfill's), each counted once, whichever pass
//! wrote it and whatever moved the job's cursor since.
//!
//! A pass writes its runs before the advance that counts them, so a run can be written and not
//! counted: the advance was lost (a crash, a conflict with an edit or another claimer). The count
//! therefore says which runs it holds, by marks ([`RunCount::holds`]): each mark holds the runs of
//! instants before the cursor a counting advance wrote, claimed under the version it read or an
//! earlier one. Within a version the cursor only moves forward and every pass claims from it, so
//! a run written after the count is never held by it: the pass that claims its instant again
//! counts it. What moves the cursor otherwise bumps the version:
//! - back (a resume re-arms before instants claimed ahead): the older mark is kept beside the new
//!   one, so the runs claimed ahead stay held and are not counted twice;
//! - forward (an edit, a resume that skips), or to instants of another schedule: the runs the new
//!   mark comes to hold that the pass does not claim are read and counted first.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// How far before the pass that wrote a count a run written after it under a newer version can
/// lie: an edit or a resume comes after that pass (the pass's advance was conditioned on the
/// version the edit bumped), and moves the cursor back no further than its own time, with room
/// for the skew between clocks and the pass's own length.
pub const WRITTEN_AFTER_WITHIN: Duration = Duration::minutes(20);

/// The most marks a count keeps: one more for each move back of the cursor within a message's
/// longest delay. Past it the oldest goes, and a run only it held could be counted again.
pub const MAX_MARKS: usize = 8;

/// A job's count of the scheduled runs its claims wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCount {
    /// The runs counted.
    pub runs: u64,
    /// Which runs those are, oldest mark first. Empty: none counted yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<Mark>,
}

/// The runs of instants before `until`, claimed under job version `version` or an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub until: DateTime<Utc>,
    pub version: u64,
    /// When the pass that wrote it began (its clock).
    pub at: DateTime<Utc>,
}

impl RunCount {
    /// Whether this count holds the run of `instant` claimed under job version `claimed_under`.
    pub fn holds(&self, instant: DateTime<Utc>, claimed_under: u64) -> bool {
        self.marks.iter().any(|m| instant < m.until && claimed_under <= m.version)
    }

    /// From which instant a pass of the job at `version` reads the runs written before its
    /// claims, to count those its new mark will hold and the count does not: `None`, nothing
    /// to read (the job not edited since the count, nor its cursor moved past the mark).
    ///
    /// - Edited (or paused, resumed) since: the runs written under the newer versions, which lie
    ///   no further back than [`WRITTEN_AFTER_WITHIN`] before the pass that wrote the newest
    ///   mark, and those the cursor may have been moved forward over, from the mark on.
    /// - Moved past the newest mark in the same version (the catch-up dropped instants, a pass
    ///   that claimed nothing advanced): from the mark, for what a lost advance left there.
    /// - Never counted: from the beginning (`Some(None)`). A count of runs without a mark
    ///   (written before marks were kept) is taken as exact.
    pub fn read_from(&self, cursor: DateTime<Utc>, version: u64) -> Option<Option<DateTime<Utc>>> {
        match self.marks.last() {
            None if self.runs == 0 => Some(None),
            None => None,
            Some(m) if version > m.version => Some(Some(m.until.min(m.at - WRITTEN_AFTER_WITHIN))),
            Some(m) => (m.until < cursor).then_some(Some(m.until)),
        }
    }
}

/// One pass's count of a job's scheduled runs against its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    limit: Option<u64>,
    count: RunCount,
    runs: u64,
    /// The instants the pass accounted for (read or claimed), each once.
    seen: BTreeSet<DateTime<Utc>>,
    /// The last of them within where the pass claims (not [`Tally::read_older`]'s).
    last: Option<DateTime<Utc>>,
    /// The last instant of a run of an older version read past where the pass claims (see
    /// [`Tally::read_older`]).
    older_last: Option<DateTime<Utc>>,
}

impl Tally {
    /// The count as the job holds it, against `limit` (`None`: no limit).
    pub fn new(limit: Option<u64>, count: RunCount) -> Self {
        let runs = count.runs;
        Tally { limit, count, runs, seen: BTreeSet::new(), last: None, older_last: None }
    }

    /// Counts the runs read (each: its instant and the version it was claimed under) that the
    /// count does not hold.
    pub fn read(&mut self, runs: impl IntoIterator<Item = (DateTime<Utc>, u64)>) {
        for (instant, version) in runs {
            self.account(instant, Some(version));
        }
    }

    /// Counts the runs read past where the pass of the job at `version` claims that older
    /// versions' claimers wrote (they reach a message's longest delay past their clocks) and
    /// the count does not hold; the new count keeps a mark for them. The job's own version's
    /// runs there are left to the pass that claims them.
    pub fn read_older(&mut self, runs: impl IntoIterator<Item = (DateTime<Utc>, u64)>, version: u64) {
        for (instant, claimed_under) in runs.into_iter().filter(|(_, v)| *v < version) {
            self.count_unless_held(instant, Some(claimed_under));
            self.older_last = Some(self.older_last.map_or(instant, |last| last.max(instant)));
        }
    }

    /// Whether the limit leaves room for another run.
    pub fn has_room(&self) -> bool {
        self.limit.is_none_or(|limit| self.runs < limit)
    }

    /// Counts the claim of `instant`: `found` is the version its run was claimed under when the
    /// pass found it written already (`None`: the pass wrote it).
    pub fn claimed(&mut self, instant: DateTime<Utc>, found: Option<u64>) {
        self.account(instant, found);
    }

    /// Passes `instant` without counting it: its run is not one the limit counts (a backfill's).
    pub fn passed(&mut self, instant: DateTime<Utc>) {
        self.seen.insert(instant);
        self.last = Some(self.last.map_or(instant, |last| last.max(instant)));
    }

    fn account(&mut self, instant: DateTime<Utc>, found: Option<u64>) {
        self.count_unless_held(instant, found);
        self.last = Some(self.last.map_or(instant, |last| last.max(instant)));
    }

    fn count_unless_held(&mut self, instant: DateTime<Utc>, found: Option<u64>) {
        let held = found.is_some_and(|version| self.count.holds(instant, version));
        if self.seen.insert(instant) && !held {
            self.runs += 1;
        }
    }

    /// The count to write with the advance of the job at `version` to `next` (`None`: the
    /// schedule ends), by the pass that began `at`. Its new mark holds every instant the pass
    /// accounted for; the older marks that still hold more than it are kept.
    pub fn into_count(self, next: Option<DateTime<Utc>>, version: u64, at: DateTime<Utc>) -> RunCount {
        let after_last = self.last.map(|last| last + Duration::seconds(1));
        let until = next.into_iter().chain(after_last).max();
        let mut marks = self.count.marks;
        // The older versions' runs read past the new mark: held by a mark of their own, which
        // no run of this version or a later one falls under.
        let older = self.older_last.map(|last| last + Duration::seconds(1));
        if let Some(older) = older.filter(|o| until.is_none_or(|u| *o > u)) {
            marks.retain(|m| m.until > older);
            marks.push(Mark { until: older, version: version.saturating_sub(1), at });
        }
        if let Some(until) = until {
            marks.retain(|m| m.until > until);
            marks.push(Mark { until, version, at });
        }
        if marks.len() > MAX_MARKS {
            marks.drain(..marks.len() - MAX_MARKS);
        }
        RunCount { runs: self.runs, marks }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("an RFC 3339 instant")
    }

    /// The time the passes of these tests began.
    fn now() -> DateTime<Utc> {
        t("2030-01-01T00:00:00Z")
    }

    fn mark(until: &str, version: u64) -> Mark {
        Mark { until: t(until), version, at: now() }
    }

    fn count(runs: u64, marks: &[Mark]) -> RunCount {
        RunCount { runs, marks: marks.to_vec() }
    }

    #[test]
    fn each_new_run_is_counted_and_the_limit_is_reached() {
        let mut tally = Tally::new(Some(2), RunCount::default());
        assert!(tally.has_room());
        tally.claimed(t("2030-01-01T00:00:00Z"), None);
        tally.claimed(t("2030-01-01T00:01:00Z"), None);
        assert!(!tally.has_room(), "two of two");
        assert_eq!(tally.into_count(None, 1, now()), count(2, &[mark("2030-01-01T00:01:01Z", 1)]));
    }

    #[test]
    fn a_cursor_moved_back_keeps_the_runs_claimed_ahead_held() {
        let ahead = mark("2030-01-01T00:05:00Z", 1);
        // A resume (version 2) moved the cursor back to 00:04, claimed ahead and counted before
        // the pause; 00:05 was written by a pass whose advance was lost.
        let mut back = Tally::new(Some(9), count(3, &[ahead]));
        back.claimed(t("2030-01-01T00:04:00Z"), Some(1));
        let resumed = back.into_count(Some(t("2030-01-01T00:04:30Z")), 2, now());
        assert_eq!(resumed, count(3, &[ahead, mark("2030-01-01T00:04:30Z", 2)]), "both marks kept");
        // A run written since under version 2 before the old mark is not held by it.
        assert!(resumed.holds(t("2030-01-01T00:04:00Z"), 1));
        assert!(!resumed.holds(t("2030-01-01T00:04:40Z"), 2));
        let mut on = Tally::new(Some(9), resumed);
        on.claimed(t("2030-01-01T00:04:40Z"), Some(2));
        on.claimed(t("2030-01-01T00:05:00Z"), Some(1));
        let moved = on.into_count(Some(t("2030-01-01T00:06:00Z")), 2, now());
        assert_eq!(moved, count(5, &[mark("2030-01-01T00:06:00Z", 2)]), "the old mark passed");
    }

    #[test]
    fn a_pass_reads_only_where_the_count_may_miss_runs() {
        let held = count(3, &[mark("2030-01-01T00:05:00Z", 1)]);
        let until = t("2030-01-01T00:05:00Z");
        assert_eq!(held.read_from(until, 1), None, "where the count left it");
        assert_eq!(held.read_from(t("2030-01-01T00:09:00Z"), 1), Some(Some(until)), "moved forward");
        assert_eq!(
            held.read_from(t("2030-01-01T00:02:00Z"), 2),
            Some(Some(now() - WRITTEN_AFTER_WITHIN)),
            "edited: from before the pass that counted"
        );
        // A daily job's mark lies a day ahead of its pass: an edit reads from the pass.
        let daily = count(1, &[mark("2030-01-02T00:00:00Z", 1)]);
        let read = daily.read_from(t("2030-01-01T00:05:00Z"), 2);
        assert_eq!(read, Some(Some(now() - WRITTEN_AFTER_WITHIN)));
        assert_eq!(RunCount::default().read_from(until, 1), Some(None), "never counted");
        assert_eq!(count(4, &[]).read_from(until, 1), None, "an old count without marks");
    }

    #[test]
    fn runs_read_are_counted_once_unless_held() {
        let mut tally = Tally::new(Some(10), count(3, &[mark("2030-01-01T00:05:00Z", 1)]));
        let read =
            [(t("2030-01-01T00:04:00Z"), 1), (t("2030-01-01T00:06:00Z"), 1), (t("2030-01-01T00:07:00Z"), 1)];
        tally.read(read);
        tally.claimed(t("2030-01-01T00:07:00Z"), Some(1));
        tally.claimed(t("2030-01-01T00:09:00Z"), None);
        tally.passed(t("2030-01-01T00:09:30Z"));
        let next = t("2030-01-01T00:10:00Z");
        assert_eq!(tally.into_count(Some(next), 1, now()), count(6, &[mark("2030-01-01T00:10:00Z", 1)]));
    }

    #[test]
    fn older_versions_runs_past_the_new_cursor_are_counted_and_held_apart() {
        // Version 1 claimed 00:40 and 00:45 and never counted them; version 2's first pass claims
        // 00:39:34 and reads on past its cursor.
        let mut tally = Tally::new(Some(5), RunCount::default());
        tally.read([(t("2030-01-01T00:40:00Z"), 1)]);
        tally.read_older([(t("2030-01-01T00:45:00Z"), 1), (t("2030-01-01T00:50:00Z"), 2)], 2);
        tally.claimed(t("2030-01-01T00:39:34Z"), None);
        let next = t("2030-01-01T00:41:34Z");
        let count = tally.into_count(Some(next), 2, now());
        assert_eq!(count.runs, 3, "version 2's own run past the cursor is left to its claim");
        assert_eq!(count.marks, [mark("2030-01-01T00:45:01Z", 1), mark("2030-01-01T00:41:34Z", 2)]);
        assert!(count.holds(t("2030-01-01T00:45:00Z"), 1));
        assert!(!count.holds(t("2030-01-01T00:43:00Z"), 2), "a later run of version 2 is not held");
    }

    #[test]
    fn older_runs_read_keep_their_mark_when_the_pass_writes_none_of_its_own() {
        let mut tally = Tally::new(Some(2), count(2, &[mark("2030-01-01T00:05:00Z", 1)]));
        tally.read_older([(t("2030-01-01T00:12:00Z"), 1)], 2);
        let written = tally.into_count(None, 2, now());
        assert_eq!(written.runs, 3);
        assert!(written.holds(t("2030-01-01T00:12:00Z"), 1), "held: not counted again");
    }

    #[test]
    fn a_read_alone_can_reach_the_limit_and_the_marks_are_bounded() {
        let mut tally = Tally::new(Some(1), RunCount::default());
        tally.read([(t("2030-01-01T00:03:00Z"), 1)]);
        assert!(!tally.has_room());
        assert_eq!(tally.into_count(None, 1, now()), count(1, &[mark("2030-01-01T00:03:01Z", 1)]));

        let many: Vec<Mark> = (0..MAX_MARKS as i64)
            .map(|i| Mark {
                until: t("2030-01-01T01:00:00Z") - Duration::minutes(i),
                version: i as u64,
                at: now(),
            })
            .collect();
        let next = Tally::new(None, count(0, &many)).into_count(Some(t("2030-01-01T00:00:00Z")), 99, now());
        assert_eq!(next.marks.len(), MAX_MARKS);
        assert_eq!(next.marks.last().map(|m| m.version), Some(99));
    }
}
