//! The tick's walk over the minutes of one pass, decided without I/O: where the pass starts,
//! which minutes no tick reached while they were current (the gap), and the segments it claims
//! minute by minute. A live segment is recorded reached before its minutes are claimed, and its
//! sends wait for the next whole second; a segment of the gap is never recorded reached (only
//! the watermark certifies it, once every job in it was claimed), and is sent at once, its
//! instants being late already. The tick (`sundial_app::tick`) reads the clock and the stores
//! and follows this walk.

use chrono::{DateTime, Duration, Utc};

/// The minutes of one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinuteWalk {
    /// The first minute the pass reads: the trailing minutes up to the watermark.
    pub first: DateTime<Utc>,
    /// The minutes no tick reached while they were current: the first and the last.
    pub gap: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// How far past its first minute a segment reaches at most.
    span: Duration,
}

/// Consecutive minutes of a pass, claimed alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    /// Minutes of the gap.
    pub in_gap: bool,
}

impl Segment {
    /// The minute to record reached before the segment is claimed: its last, unless the segment
    /// is of the gap.
    pub fn reached(&self) -> Option<DateTime<Utc>> {
        (!self.in_gap).then_some(self.last)
    }

    /// Whether its sends wait for the next whole second: live minutes only.
    pub fn aligned(&self) -> bool {
        !self.in_gap
    }

    /// The minutes of the segment, in order.
    pub fn minutes(&self) -> impl Iterator<Item = DateTime<Utc>> + use<> {
        let (first, last) = (self.first, self.last);
        (0..).map(move |n| first + Duration::minutes(n)).take_while(move |m| *m <= last)
    }
}

impl MinuteWalk {
    /// The walk of a pass in the minute `live_from`: from `trailing_minutes` (at least one) up to
    /// the watermark, or up to two minutes before `live_from` when there is none yet; the gap
    /// after `reached_before` (the last minute a live tick reached or a pass fully processed) up
    /// to the minute before `live_from`; segments of `chunk_minutes` at most.
    pub fn new(
        watermark: Option<DateTime<Utc>>,
        reached_before: Option<DateTime<Utc>>,
        live_from: DateTime<Utc>,
        trailing_minutes: i64,
        chunk_minutes: i64,
    ) -> Self {
        let watermark = watermark.unwrap_or(live_from - Duration::minutes(2));
        let first = watermark - Duration::minutes(trailing_minutes.max(1) - 1);
        let gap = reached_before
            .map(|r| (r + Duration::minutes(1), live_from - Duration::minutes(1)))
            .filter(|(first, last)| first <= last);
        MinuteWalk { first, gap, span: Duration::minutes(chunk_minutes.max(1) - 1) }
    }

    /// The segment that starts at `minute` and ends by `end` (the last minute the lookahead
    /// reaches now); `None` once `minute` is past `end`. The gap is a segment of its own (or a
    /// few, when it is longer than a chunk): the live minutes before it end where it begins.
    pub fn segment(&self, minute: DateTime<Utc>, end: DateTime<Utc>) -> Option<Segment> {
        if minute > end {
            return None;
        }
        let mut last = end.min(minute + self.span);
        let mut in_gap = false;
        if let Some((first, gap_last)) = self.gap {
            if minute < first {
                last = last.min(first - Duration::minutes(1));
            } else if minute <= gap_last {
                last = last.min(gap_last);
                in_gap = true;
            }
        }
        Some(Segment { first: minute, last, in_gap })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(hhmm: &str) -> DateTime<Utc> {
        format!("2030-01-01T{hhmm}:00Z").parse().unwrap_or_default()
    }

    /// Every segment of a walk whose lookahead ends at `end`, the clock standing still.
    fn segments(walk: &MinuteWalk, end: DateTime<Utc>) -> Vec<(String, String, bool)> {
        let mut out = Vec::new();
        let mut minute = walk.first;
        while let Some(s) = walk.segment(minute, end) {
            out.push((s.first.format("%H:%M").to_string(), s.last.format("%H:%M").to_string(), s.in_gap));
            minute = s.last + Duration::minutes(1);
        }
        out
    }

    #[test]
    fn the_walk_of_each_kind_of_pass() {
        struct Case {
            what: &'static str,
            watermark: Option<&'static str>,
            reached_before: Option<&'static str>,
            chunk: i64,
            segments: &'static [(&'static str, &'static str, bool)],
        }
        // Every pass is in the minute 12:00, its lookahead ending at 12:01, two trailing minutes.
        let cases = [
            Case {
                what: "a first pass: from the two minutes before now",
                watermark: None,
                reached_before: None,
                chunk: 30,
                segments: &[("11:57", "12:01", false)],
            },
            Case {
                what: "a steady pass: the watermark's minute and the one before it, then now",
                watermark: Some("11:59"),
                reached_before: Some("11:59"),
                chunk: 30,
                segments: &[("11:58", "12:01", false)],
            },
            Case {
                what: "after an outage: the live minutes before the gap, the gap, then live again",
                watermark: Some("11:50"),
                reached_before: Some("11:52"),
                chunk: 30,
                segments: &[("11:49", "11:52", false), ("11:53", "11:59", true), ("12:00", "12:01", false)],
            },
            Case {
                what: "a long gap in chunks",
                watermark: Some("11:00"),
                reached_before: Some("11:00"),
                chunk: 25,
                segments: &[
                    ("10:59", "11:00", false),
                    ("11:01", "11:25", true),
                    ("11:26", "11:50", true),
                    ("11:51", "11:59", true),
                    ("12:00", "12:01", false),
                ],
            },
            Case {
                what: "live minutes in chunks too",
                watermark: Some("11:59"),
                reached_before: Some("11:59"),
                chunk: 2,
                segments: &[("11:58", "11:59", false), ("12:00", "12:01", false)],
            },
        ];
        for case in cases {
            let walk =
                MinuteWalk::new(case.watermark.map(m), case.reached_before.map(m), m("12:00"), 2, case.chunk);
            let expected: Vec<(String, String, bool)> =
                case.segments.iter().map(|(f, l, g)| (f.to_string(), l.to_string(), *g)).collect();
            assert_eq!(segments(&walk, m("12:01")), expected, "{}", case.what);
        }
    }

    #[test]
    fn live_segments_are_recorded_reached_and_aligned_and_the_gap_is_neither() {
        let walk = MinuteWalk::new(Some(m("11:50")), Some(m("11:52")), m("12:00"), 2, 30);
        let live = walk.segment(m("11:49"), m("12:01"));
        let gap = walk.segment(m("11:53"), m("12:01"));
        assert_eq!(live.map(|s| (s.reached(), s.aligned())), Some((Some(m("11:52")), true)));
        assert_eq!(gap.map(|s| (s.reached(), s.aligned())), Some((None, false)));
        let minutes: Vec<_> = gap.iter().flat_map(Segment::minutes).collect();
        assert_eq!(minutes.len(), 7);
        assert_eq!(walk.segment(m("12:02"), m("12:01")), None, "past the lookahead");
    }
}
