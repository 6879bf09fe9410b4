"""Writes the schedule maths' cross-check tables, from independent libraries, into
shared/domain/tests/fixtures/ (committed; the domain's oracle tests replay them, so the test
command installs nothing for them). Run again only to change the tables:

    python3 -m venv /tmp/oracle && /tmp/oracle/bin/pip install numpy croniter
    /tmp/oracle/bin/python scripts/oracle/generate.py

- busdays-numpy.json: business days by numpy (np.is_busday, np.busday_offset): week patterns
  and holiday sets drawn at random (seeded), each with dates asked whether they are business
  days and where an instant on them moves forward and back, and the N-th and last business days
  of months.
- cron-croniter.json: the instants of crons in zones (croniter over zoneinfo), the first 30
  after each of several starts, across DST changes; the test compares them with Sundial's and
  lets them differ only where Sundial's documented DST rule decides (docs/decisions.md).
"""
import datetime as dt
import json
import pathlib
import random
import zoneinfo

import numpy as np
from croniter import croniter

OUT = pathlib.Path(__file__).resolve().parents[2] / "shared/domain/tests/fixtures"
DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def busdays(rng):
    cases = []
    for _ in range(30):
        mask = [rng.random() < 0.7 for _ in range(7)]
        if not any(mask):
            mask[rng.randrange(7)] = True
        start = dt.date(2026, 1, 1) + dt.timedelta(days=rng.randrange(0, 700))
        # Runs of holidays, some long, so that moves walk past several.
        holidays = set()
        for _ in range(rng.randrange(0, 40)):
            first = start + dt.timedelta(days=rng.randrange(-30, 400))
            for d in range(rng.choice([1, 1, 1, 2, 3, 9])):
                holidays.add(first + dt.timedelta(days=d))
        holidays = sorted(holidays)
        weekmask = [1 if m else 0 for m in mask]
        hol = np.array(holidays, dtype="datetime64[D]") if holidays else np.array([], dtype="datetime64[D]")
        dates = []
        for _ in range(40):
            day = start + dt.timedelta(days=rng.randrange(0, 380))
            d64 = np.datetime64(day)
            dates.append({
                "date": day.isoformat(),
                "business": bool(np.is_busday(d64, weekmask=weekmask, holidays=hol)),
                "next": str(np.busday_offset(d64, 0, roll="forward", weekmask=weekmask, holidays=hol)),
                "previous": str(np.busday_offset(d64, 0, roll="backward", weekmask=weekmask, holidays=hol)),
            })
        nth = []
        for _ in range(12):
            month_start = dt.date(start.year + rng.randrange(0, 2), rng.randrange(1, 13), 1)
            next_month = (month_start + dt.timedelta(days=32)).replace(day=1)
            n = rng.choice([1, 2, 3, 5, 10, 20, 23, -1, -2, -5])
            if n > 0:
                got = np.busday_offset(np.datetime64(month_start), n - 1, roll="forward", weekmask=weekmask, holidays=hol)
            else:
                last = np.datetime64(next_month - dt.timedelta(days=1))
                got = np.busday_offset(last, n + 1, roll="backward", weekmask=weekmask, holidays=hol)
            day = dt.date.fromisoformat(str(got))
            in_month = month_start <= day < next_month
            nth.append({"year": month_start.year, "month": month_start.month, "n": n,
                        "date": day.isoformat() if in_month else None})
        cases.append({"business_days": [DAYS[i] for i in range(7) if mask[i]],
                      "holidays": [h.isoformat() for h in holidays], "dates": dates, "nth": nth})
    return {"generator": f"numpy {np.__version__}", "cases": cases}


CRONS = ["0 9 * * *", "30 2 * * *", "0 9 * * 1-5", "0 0 1 * *", "15 1,13 * * 0", "45 23 * * 5", "0 */6 * * *", "30 1 * * *"]
ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago", "Europe/Berlin"]
STARTS = ["2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-09-20T00:00:00Z", "2026-10-20T00:00:00Z"]


def crons():
    cases = []
    for cron in CRONS:
        for zone in ZONES:
            tz = zoneinfo.ZoneInfo(zone)
            for start in STARTS:
                after = dt.datetime.fromisoformat(start.replace("Z", "+00:00")).astimezone(tz)
                it = croniter(cron, after)
                instants = [it.get_next(dt.datetime).astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") for _ in range(30)]
                cases.append({"cron": cron, "timezone": zone, "after": start, "instants": instants})
    import croniter as module
    return {"generator": f"croniter {getattr(module, '__version__', '?')} over zoneinfo", "cases": cases}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(35)
    (OUT / "busdays-numpy.json").write_text(json.dumps(busdays(rng), separators=(",", ":")) + "\n")
    (OUT / "cron-croniter.json").write_text(json.dumps(crons(), separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
