//! Cron in a time zone: mapping matching local times onto real instants across DST changes.
//!
//! The design's rule, decided once here, and what a job's [`DstPolicy`] may change:
//! - a fixed local time skipped by a DST change fires once, at the end of the gap (02:30 on a
//!   02:00→03:00 night fires at 03:00): `gap: shift`; `gap: skip` leaves it out;
//! - a fixed local time that occurs twice fires once, at its first occurrence: `fold: first`;
//!   `fold: both` fires in both passes;
//! - a job whose hour field is `*` (or a step over all hours) follows real time: it fires in both
//!   passes of a repeated hour and has no instants in a skipped one (as cronie does), unless its
//!   policy says otherwise.

use super::cron::CronExpr;
pub use crate::dst::{DstFold, DstGap, DstPolicy};
use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use serde::Serialize;

/// The largest DST shift looked for around an instant (real zones shift by at most 2 hours).
const MAX_SHIFT: Duration = Duration::hours(3);

pub(super) fn offset_at(tz: Tz, t: DateTime<Utc>) -> Duration {
    Duration::seconds(i64::from(tz.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc()))
}

/// The local time of `t` in `tz`; `None` past either end of chrono's range (where
/// `naive_local` would panic).
pub(super) fn local_time(tz: Tz, t: DateTime<Utc>) -> Option<NaiveDateTime> {
    t.naive_utc().checked_add_offset(tz.offset_from_utc_datetime(&t.naive_utc()).fix())
}

/// The instant at which local wall-clock time jumps over `gap_time`, a local time that does not
/// exist: the first instant whose local time is later than `gap_time`.
pub(super) fn end_of_gap(tz: Tz, gap_time: NaiveDateTime) -> Option<DateTime<Utc>> {
    // Local time is monotone in real time around a gap, so bisect on whole seconds.
    let mut lo = gap_time.and_utc().checked_sub_signed(Duration::hours(15))?;
    let mut hi = gap_time.and_utc().checked_add_signed(Duration::hours(15))?;
    if local_time(tz, hi)? <= gap_time || local_time(tz, lo)? > gap_time {
        return None;
    }
    while hi - lo > Duration::seconds(1) {
        // Half the span in whole seconds: halving a Duration would leave fractions of a
        // second, and the end of a gap would not be a whole second.
        let mid = lo + Duration::seconds((hi - lo).num_seconds() / 2);
        if local_time(tz, mid)? > gap_time { hi = mid } else { lo = mid }
    }
    Some(hi)
}

/// The real instants a matching local time stands for under the DST rule, earliest first.
pub(super) fn instants_of(
    expr: &CronExpr,
    tz: Tz,
    dst: DstPolicy,
    local: NaiveDateTime,
) -> Vec<DateTime<Utc>> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => vec![t.with_timezone(&Utc)],
        LocalResult::Ambiguous(first, second) => match dst.fold_for(expr.follows_real_time()) {
            DstFold::Both => vec![first.with_timezone(&Utc), second.with_timezone(&Utc)],
            DstFold::First => vec![first.with_timezone(&Utc)],
        },
        LocalResult::None => match dst.gap_for(expr.follows_real_time()) {
            DstGap::Skip => vec![],
            DstGap::Shift => end_of_gap(tz, local).into_iter().collect(),
        },
    }
}

/// The first instant strictly after `after` at which `expr` fires in `tz` under `dst`. `None`
/// when there is none within the search horizon or before the end of chrono's range (year
/// 262142).
pub fn next_after(expr: &CronExpr, tz: Tz, dst: DstPolicy, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    // Ahead of a fall-back change, local times already passed come round again: start the walk
    // that much earlier. Elsewhere local order is real order and the first hit is the answer.
    let ahead = after.checked_add_signed(MAX_SHIFT).unwrap_or(DateTime::<Utc>::MAX_UTC);
    let rewind = (offset_at(tz, after) - offset_at(tz, ahead)).max(Duration::zero());
    let mut cursor = match local_time(tz, after) {
        Some(local) => local.checked_sub_signed(rewind).unwrap_or(NaiveDateTime::MIN),
        // Local time past the end of chrono's range: no later local time can be written.
        None if after.year() > 0 => return None,
        // Local time before its start: every local time that can be written is later.
        None => NaiveDateTime::MIN,
    };
    let mut best: Option<DateTime<Utc>> = None;
    loop {
        let Some(local) = expr.next_local_at_or_after(cursor) else {
            return best;
        };
        if let Some(b) = best {
            // Past this point no local time maps to an instant before `best`.
            match local_time(tz, b).and_then(|b| b.checked_add_signed(rewind)) {
                Some(last) if local <= last => {}
                _ => return best,
            }
        }
        for instant in instants_of(expr, tz, dst, local) {
            if instant > after && best.is_none_or(|b| instant < b) {
                best = Some(instant);
            }
        }
        if best.is_some() && rewind.is_zero() {
            return best;
        }
        cursor = match local.checked_add_signed(Duration::seconds(1)) {
            Some(next) => next,
            None => return best,
        };
    }
}

/// What a DST change does to a cron's instants: the local times of one transition that match the
/// cron and do not exist (a gap) or occur twice (a fold), and what the policy makes of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DstEffect {
    /// The transition: the first instant on the new offset.
    pub at: DateTime<Utc>,
    pub kind: DstEffectKind,
    /// The matching local times it touches, earliest first (at most [`EFFECT_TIMES`]).
    pub locals: Vec<NaiveDateTime>,
    /// How many matching local times it touches in all.
    pub count: usize,
    /// Where the moved times fire (`Moved`: the end of the gap).
    pub to: Option<DateTime<Utc>>,
}

/// The matching local times one effect lists, at most.
pub const EFFECT_TIMES: usize = 4;

/// What the policy made of the local times of one transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DstEffectKind {
    /// They do not exist, and fire once at the end of the gap.
    Moved,
    /// They do not exist, and do not fire.
    Skipped,
    /// They occur twice, and fire at both.
    Doubled,
    /// They occur twice, and fire at the first only.
    FirstOnly,
}

impl DstEffect {
    /// The effect in words: "2027-03-14: 02:30 does not exist in America/New_York; runs at 03:00".
    pub fn explain(&self, tz: Tz) -> String {
        let date = self.locals.first().map_or_else(String::new, |l| l.format("%Y-%m-%d").to_string());
        let mut times: Vec<String> = self.locals.iter().map(|l| l.format("%H:%M").to_string()).collect();
        if self.count > self.locals.len() {
            times.push(format!("{} more", self.count - self.locals.len()))
        }
        let times = match times.as_slice() {
            [one] => one.clone(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
            [] => String::new(),
        };
        let (exists, verb) =
            if self.count == 1 { ("does not exist", "occurs") } else { ("do not exist", "occur") };
        match self.kind {
            DstEffectKind::Moved => {
                let to =
                    self.to.map_or_else(String::new, |t| t.with_timezone(&tz).format("%H:%M").to_string());
                format!("{date}: {times} {exists} in {tz}; runs at {to}")
            }
            DstEffectKind::Skipped => format!("{date}: {times} {exists} in {tz}; skipped (dst.gap: skip)"),
            DstEffectKind::Doubled => format!("{date}: {times} {verb} twice in {tz}; runs at both"),
            DstEffectKind::FirstOnly => {
                format!("{date}: {times} {verb} twice in {tz}; runs once, at the first (dst.fold: first)")
            }
        }
    }
}

/// The DST changes of `tz` in `[from, to]` that touch `expr`'s local times, with what `dst` makes
/// of each, in order. Walks the span an hour at a time (DST changes are hours apart at least) and
/// bisects each change to its second.
pub fn effects_between(
    expr: &CronExpr,
    tz: Tz,
    dst: DstPolicy,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<DstEffect> {
    let mut effects = Vec::new();
    let mut t = from;
    while t < to {
        let Some(next) = t.checked_add_signed(Duration::hours(1)) else { break };
        let (before, after) = (offset_at(tz, t), offset_at(tz, next));
        if before != after
            && let Some(change) = first_on_offset(tz, t, next, after)
            && let Some(effect) = effect_of(expr, dst, change, before, after)
        {
            effects.push(effect);
        }
        t = next;
    }
    effects
}

/// The first instant in `(lo, hi]` on the offset `after`.
fn first_on_offset(
    tz: Tz,
    mut lo: DateTime<Utc>,
    mut hi: DateTime<Utc>,
    after: Duration,
) -> Option<DateTime<Utc>> {
    while hi - lo > Duration::seconds(1) {
        let mid = lo + Duration::seconds((hi - lo).num_seconds() / 2);
        if offset_at(tz, mid) == after { hi = mid } else { lo = mid }
    }
    Some(hi)
}

/// What one change (at `change`, from offset `before` to `after`) does to `expr`.
fn effect_of(
    expr: &CronExpr,
    dst: DstPolicy,
    change: DateTime<Utc>,
    before: Duration,
    after: Duration,
) -> Option<DstEffect> {
    // The local times a gap leaves out, or a fold repeats: [change + min, change + max) local.
    let wall = change.naive_utc();
    let (start, end) =
        (wall.checked_add_signed(before.min(after))?, wall.checked_add_signed(before.max(after))?);
    let mut locals = Vec::new();
    let mut count = 0;
    let mut cursor = start;
    while let Some(local) = expr.next_local_at_or_after(cursor).filter(|l| *l < end) {
        if locals.len() < EFFECT_TIMES {
            locals.push(local);
        }
        count += 1;
        cursor = local.checked_add_signed(Duration::seconds(1))?;
    }
    if count == 0 {
        return None;
    }
    let kind =
        match (after > before, dst.gap_for(expr.follows_real_time()), dst.fold_for(expr.follows_real_time()))
        {
            (true, DstGap::Shift, _) => DstEffectKind::Moved,
            (true, DstGap::Skip, _) => DstEffectKind::Skipped,
            (false, _, DstFold::Both) => DstEffectKind::Doubled,
            (false, _, DstFold::First) => DstEffectKind::FirstOnly,
        };
    let to = (kind == DstEffectKind::Moved).then_some(change);
    Some(DstEffect { at: change, kind, locals, count, to })
}

#[cfg(test)]
mod tests {
    //! The DST decision table: each row is a zone, an expression, a starting instant and the
    //! instants that must follow, in UTC.
    use super::*;

    fn fires(expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
        fires_under(DstPolicy::default(), expr, zone, from, n)
    }

    fn fires_under(dst: DstPolicy, expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
        let (Ok(expr), Ok(tz), Ok(from)) =
            (expr.parse::<CronExpr>(), zone.parse::<Tz>(), from.parse::<DateTime<Utc>>())
        else {
            return vec!["bad test input".into()];
        };
        let mut out = Vec::new();
        let mut t = from;
        while out.len() < n {
            let Some(next) = next_after(&expr, tz, dst, t) else {
                break;
            };
            out.push(format!("{}", next.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S%:z")));
            t = next;
        }
        out
    }

    const NY: &str = "America/New_York";

    #[test]
    fn new_york_spring_forward_fixed_0230_fires_at_end_of_gap() {
        assert_eq!(
            fires("30 2 * * *", NY, "2026-03-07T00:00:00Z", 3),
            ["2026-03-07 02:30:00-05:00", "2026-03-08 03:00:00-04:00", "2026-03-09 02:30:00-04:00"]
        );
    }

    #[test]
    fn the_end_of_a_gap_is_a_whole_second() {
        let tz: Tz = NY.parse().unwrap();
        let expr: CronExpr = "30 2 * * *".parse().unwrap();
        let next =
            next_after(&expr, tz, DstPolicy::default(), "2026-03-08T06:59:59Z".parse().unwrap()).unwrap();
        assert_eq!(next, "2026-03-08T07:00:00Z".parse::<DateTime<Utc>>().unwrap());
    }

    #[test]
    fn new_york_spring_forward_fixed_0130_is_unaffected() {
        assert_eq!(
            fires("30 1 * * *", NY, "2026-03-07T12:00:00Z", 2),
            ["2026-03-08 01:30:00-05:00", "2026-03-09 01:30:00-04:00"]
        );
    }

    #[test]
    fn new_york_spring_forward_star_hour_skips_the_missing_hour() {
        assert_eq!(
            fires("30 * * * *", NY, "2026-03-08T05:00:00Z", 3),
            ["2026-03-08 00:30:00-05:00", "2026-03-08 01:30:00-05:00", "2026-03-08 03:30:00-04:00"]
        );
    }

    #[test]
    fn new_york_fall_back_fixed_0130_fires_once_at_first_occurrence() {
        assert_eq!(
            fires("30 1 * * *", NY, "2026-10-31T12:00:00Z", 2),
            ["2026-11-01 01:30:00-04:00", "2026-11-02 01:30:00-05:00"]
        );
    }

    #[test]
    fn new_york_fall_back_fixed_0230_is_unaffected() {
        assert_eq!(
            fires("30 2 * * *", NY, "2026-10-31T12:00:00Z", 2),
            ["2026-11-01 02:30:00-05:00", "2026-11-02 02:30:00-05:00"]
        );
    }

    #[test]
    fn new_york_fall_back_star_hour_fires_in_both_passes() {
        assert_eq!(
            fires("30 * * * *", NY, "2026-11-01T04:00:00Z", 4),
            [
                "2026-11-01 00:30:00-04:00",
                "2026-11-01 01:30:00-04:00",
                "2026-11-01 01:30:00-05:00",
                "2026-11-01 02:30:00-05:00"
            ]
        );
    }

    #[test]
    fn fall_back_from_inside_the_first_pass_still_finds_the_second() {
        // 01:40 EDT: the next `:30` in real time is 01:30 EST, fifty minutes later.
        assert_eq!(fires("30 * * * *", NY, "2026-11-01T05:40:00Z", 1), ["2026-11-01 01:30:00-05:00"]);
    }

    #[test]
    fn several_gap_times_collapse_into_one_instant() {
        assert_eq!(
            fires("0,20,40 2 * * *", NY, "2026-03-08T06:00:00Z", 2),
            ["2026-03-08 03:00:00-04:00", "2026-03-09 02:00:00-04:00"]
        );
    }

    #[test]
    fn london_spring_forward_and_fall_back() {
        assert_eq!(
            fires("30 1 * * *", "Europe/London", "2026-03-28T12:00:00Z", 2),
            ["2026-03-29 02:00:00+01:00", "2026-03-30 01:30:00+01:00"]
        );
        assert_eq!(
            fires("30 1 * * *", "Europe/London", "2026-10-24T12:00:00Z", 2),
            ["2026-10-25 01:30:00+01:00", "2026-10-26 01:30:00+00:00"]
        );
        assert_eq!(
            fires("15 * * * *", "Europe/London", "2026-10-24T23:30:00Z", 3),
            ["2026-10-25 01:15:00+01:00", "2026-10-25 01:15:00+00:00", "2026-10-25 02:15:00+00:00"]
        );
    }

    #[test]
    fn lord_howe_half_hour_shift() {
        // 2026-10-04 02:00 +10:30 → 02:30 +11:00: 02:15 is skipped and fires at 02:30.
        assert_eq!(
            fires("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z", 2),
            ["2026-10-04 02:30:00+11:00", "2026-10-05 02:15:00+11:00"]
        );
        // 2026-04-05 02:00 +11:00 → 01:30 +10:30: 01:45 occurs twice and fires once.
        assert_eq!(
            fires("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T00:00:00Z", 2),
            ["2026-04-05 01:45:00+11:00", "2026-04-06 01:45:00+10:30"]
        );
        // Real time: `*/15` over the repeated half hour fires in both passes.
        assert_eq!(
            fires("*/15 * * * *", "Australia/Lord_Howe", "2026-04-04T14:20:00Z", 5),
            [
                "2026-04-05 01:30:00+11:00",
                "2026-04-05 01:45:00+11:00",
                "2026-04-05 01:30:00+10:30",
                "2026-04-05 01:45:00+10:30",
                "2026-04-05 02:00:00+10:30"
            ]
        );
    }

    const SKIP_GAP: DstPolicy = DstPolicy { gap: Some(DstGap::Skip), fold: None };
    const BOTH_FOLDS: DstPolicy = DstPolicy { gap: None, fold: Some(DstFold::Both) };
    const SHIFT_FIRST: DstPolicy = DstPolicy { gap: Some(DstGap::Shift), fold: Some(DstFold::First) };

    /// The policy table: New York (an hour) and Lord Howe (half an hour), each gap and fold rule,
    /// for a fixed hour and for one that follows real time.
    #[test]
    fn a_dst_policy_changes_only_what_it_names() {
        // New York, 2026-03-08: 02:00 EST → 03:00 EDT.
        assert_eq!(
            fires_under(SKIP_GAP, "30 2 * * *", NY, "2026-03-07T12:00:00Z", 2),
            ["2026-03-09 02:30:00-04:00", "2026-03-10 02:30:00-04:00"],
            "gap: skip leaves 02:30 out that night"
        );
        assert_eq!(
            fires_under(SHIFT_FIRST, "30 * * * *", NY, "2026-03-08T05:00:00Z", 3),
            ["2026-03-08 00:30:00-05:00", "2026-03-08 01:30:00-05:00", "2026-03-08 03:00:00-04:00"],
            "gap: shift moves even a real-time cron's 02:30 to 03:00"
        );
        // New York, 2026-11-01: 02:00 EDT → 01:00 EST.
        assert_eq!(
            fires_under(BOTH_FOLDS, "30 1 * * *", NY, "2026-10-31T12:00:00Z", 3),
            ["2026-11-01 01:30:00-04:00", "2026-11-01 01:30:00-05:00", "2026-11-02 01:30:00-05:00"],
            "fold: both fires in each pass"
        );
        assert_eq!(
            fires_under(SHIFT_FIRST, "30 * * * *", NY, "2026-11-01T04:00:00Z", 3),
            ["2026-11-01 00:30:00-04:00", "2026-11-01 01:30:00-04:00", "2026-11-01 02:30:00-05:00"],
            "fold: first fires a real-time cron once in the repeated hour"
        );
        // Lord Howe, 2026-10-04: 02:00 +10:30 → 02:30 +11:00; 2026-04-05: 02:00 +11:00 → 01:30 +10:30.
        assert_eq!(
            fires_under(SKIP_GAP, "15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z", 2),
            ["2026-10-05 02:15:00+11:00", "2026-10-06 02:15:00+11:00"]
        );
        assert_eq!(
            fires_under(BOTH_FOLDS, "45 1 * * *", "Australia/Lord_Howe", "2026-04-04T00:00:00Z", 3),
            ["2026-04-05 01:45:00+11:00", "2026-04-05 01:45:00+10:30", "2026-04-06 01:45:00+10:30"]
        );
    }

    #[test]
    fn the_effects_of_a_year_say_what_each_change_does() {
        let (tz, from, to): (Tz, DateTime<Utc>, DateTime<Utc>) = (
            NY.parse().unwrap(),
            "2026-01-01T00:00:00Z".parse().unwrap(),
            "2027-01-01T00:00:00Z".parse().unwrap(),
        );
        let explain = |expr: &str, dst: DstPolicy| -> Vec<String> {
            let expr: CronExpr = expr.parse().unwrap();
            effects_between(&expr, tz, dst, from, to).iter().map(|e| e.explain(tz)).collect()
        };
        assert_eq!(
            explain("30 2 * * *", DstPolicy::default()),
            ["2026-03-08: 02:30 does not exist in America/New_York; runs at 03:00"],
            "02:30 never occurs twice: only the spring change touches it"
        );
        assert_eq!(
            explain("30 1 * * *", BOTH_FOLDS),
            ["2026-11-01: 01:30 occurs twice in America/New_York; runs at both"]
        );
        assert_eq!(
            explain("*/15 * * * *", DstPolicy::default()),
            [
                "2026-03-08: 02:00, 02:15, 02:30 and 02:45 do not exist in America/New_York; skipped (dst.gap: skip)",
                "2026-11-01: 01:00, 01:15, 01:30 and 01:45 occur twice in America/New_York; runs at both"
            ]
        );
        assert_eq!(
            explain("0 12 * * *", DstPolicy::default()),
            Vec::<String>::new(),
            "noon is never touched"
        );
        let lord_howe: Tz = "Australia/Lord_Howe".parse().unwrap();
        let expr: CronExpr = "15 2 * * *".parse().unwrap();
        let effects = effects_between(&expr, lord_howe, DstPolicy::default(), from, to);
        assert_eq!(
            effects.iter().map(|e| e.explain(lord_howe)).collect::<Vec<_>>(),
            ["2026-10-04: 02:15 does not exist in Australia/Lord_Howe; runs at 02:30"]
        );
    }

    #[test]
    fn utc_has_no_surprises() {
        assert_eq!(
            fires("0 0 * * *", "UTC", "2026-03-08T00:00:00Z", 2),
            ["2026-03-09 00:00:00+00:00", "2026-03-10 00:00:00+00:00"]
        );
    }
}
