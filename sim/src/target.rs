//! The targets: one [`SimTarget`] answers every job's calls as the job's profile says (succeed,
//! fail, fail for good, hang past the timeout, answer 202 and call back later or never, crash
//! the worker that called it, refuse the connection so that the call never leaves, or start work
//! elsewhere that the attempt follows, as a Step Functions execution is), after a while of
//! virtual time, and records every call it got and every work it started, looked at or stopped. It also counts the synchronous calls of
//! each concurrency group's jobs in flight at once, for the `group limit` invariant.

use crate::executor::Sim;
use crate::ledger::{Answered, CallbackPlan, GroupPeak, Hit, Ledger, Line};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use sundial_domain::job::Job;
use sundial_domain::ports::targets::{Answer, Caller, Invocation, Progress};
use sundial_domain::run::Outcome;
use sundial_domain::run::RunId;
use sundial_domain::run::transition::Ending;

/// How a job's target behaves: relative weights of its answers, and how long it works.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    pub ok: f64,
    pub fail: f64,
    pub permanent: f64,
    pub hang: f64,
    pub accept: f64,
    pub crash: f64,
    /// The connection is refused: the request never leaves (`Answer::NotSent`).
    pub refused: f64,
    /// Work is started elsewhere and followed (`Answer::Started`).
    pub start: f64,
    /// The longest a call works before answering, in milliseconds.
    pub busy_ms: i64,
}

impl Profile {
    /// The profile a job's payload carries (`{"sim": {...}}`); succeed at once when none.
    pub fn of(job: &Job) -> Profile {
        let sim = job.document.payload.get("sim");
        let weight = |name: &str| sim.and_then(|s| s.get(name)).and_then(Value::as_f64).unwrap_or(0.0);
        Profile {
            ok: sim.map_or(1.0, |_| weight("ok")),
            fail: weight("fail"),
            permanent: weight("permanent"),
            hang: weight("hang"),
            accept: weight("accept"),
            crash: weight("crash"),
            refused: weight("refused"),
            start: weight("start"),
            busy_ms: sim.and_then(|s| s.get("busy_ms")).and_then(Value::as_i64).unwrap_or(0),
        }
    }

    /// As a job's payload.
    pub fn to_payload(self) -> Value {
        serde_json::json!({"sim": {
            "ok": self.ok, "fail": self.fail, "permanent": self.permanent, "hang": self.hang,
            "accept": self.accept, "crash": self.crash, "refused": self.refused, "start": self.start,
            "busy_ms": self.busy_ms,
        }})
    }

    /// The answer for a draw in `[0, 1)`.
    fn pick(&self, draw: f64) -> Answered {
        let weights = [
            (self.ok, Answered::Ok),
            (self.fail, Answered::Failed(503)),
            (self.permanent, Answered::Failed(400)),
            (self.hang, Answered::Hung),
            (self.accept, Answered::Accepted),
            (self.crash, Answered::Crashed),
            (self.refused, Answered::Refused),
            (self.start, Answered::Started),
        ];
        let total: f64 = weights.iter().map(|(w, _)| w).sum();
        let mut at = draw * total;
        for (weight, answer) in weights {
            if at < weight {
                return answer;
            }
            at -= weight;
        }
        Answered::Ok
    }
}

/// Every job's target.
#[derive(Debug)]
pub struct SimTarget {
    pub sim: Sim,
    pub ledger: Ledger,
}

#[async_trait]
impl Caller for SimTarget {
    async fn call(&self, inv: &Invocation<'_>) -> Answer {
        // The request is on its way: the worker may die before it arrives.
        self.sim.yield_now().await;
        let profile = Profile::of(inv.job);
        let timeout = Duration::from_std(inv.timeout).unwrap_or_else(|_| Duration::seconds(1));
        let (answered, busy, plan) = {
            let mut core = self.sim.core();
            let draw = core.unit();
            let busy = Duration::milliseconds(core.between(0, profile.busy_ms));
            let plan = (core.between(1, 20), core.between(0, 2) as u32, core.between(0, 9));
            (profile.pick(draw), busy, plan)
        };
        // A call that works past the timeout is cut by the caller.
        let answered = match answered {
            Answered::Ok | Answered::Failed(_) if busy >= timeout => Answered::Hung,
            other => other,
        };
        let hit = Hit {
            run_id: inv.run_id.clone(),
            job_id: inv.job.id.to_string(),
            attempt: inv.attempt,
            scheduled_at: inv.scheduled_at,
            idempotency_key: sundial_domain::target::idempotency_key(inv).to_string(),
            answered,
            at: self.sim.now(),
        };
        self.ledger.get().hits.push(hit);
        self.note(inv, format!("target: call #{} answers {answered:?}", inv.attempt));
        if answered == Answered::Refused {
            // Refused before the request left: the target never saw it.
            return Answer::NotSent { error: "connection refused".into() };
        }
        // In flight at the target until this call ends: answered, or dropped with its worker.
        let now = self.sim.now();
        let _in_flight =
            inv.job.document.group.clone().map(|group| InFlight::arrive(&self.ledger, group, inv, now));
        // A `forbid` or `replace` job's calls are counted as a group of one of their own.
        let fenced = inv.job.document.concurrency != sundial_domain::job::ConcurrencyPolicy::Allow;
        let _job_in_flight = fenced.then(|| InFlight::arrive(&self.ledger, job_calls(&inv.job.id), inv, now));
        match answered {
            Answered::Crashed => {
                self.sim.crash_current();
                std::future::pending().await
            }
            Answered::Hung => {
                self.sim.sleep(timeout).await;
                Answer::TimedOut
            }
            Answered::Accepted => {
                let (every_s, heartbeats, ends) = plan;
                if let Some(run_id) = RunId::parse(&inv.run_id) {
                    let then = match ends {
                        0 => None,
                        1..=2 => Some(false),
                        _ => Some(true),
                    };
                    let token = inv.callback_token.clone();
                    let plan =
                        CallbackPlan { run_id, token, attempt: inv.attempt, every_s, heartbeats, then };
                    self.ledger.get().callbacks.push(plan);
                }
                Answer::Accepted { status: 202 }
            }
            Answered::Ok => {
                self.sim.sleep(busy).await;
                Answer::Succeeded { status: Some(200), output: None }
            }
            Answered::Failed(status) => {
                self.sim.sleep(busy).await;
                Answer::Failed {
                    retryable: status >= 500,
                    status: Some(status),
                    error: format!("HTTP {status}"),
                }
            }
            Answered::Refused => Answer::NotSent { error: "connection refused".into() },
            Answered::Started => {
                // Named after the run and the attempt, as an execution is: a start sent again
                // finds the same work.
                let handle = format!(
                    "arn:aws:states:us-east-1:000000000000:execution:sim:{}-{}",
                    inv.run_id, inv.attempt
                );
                let (lasts, succeeds) = {
                    let mut core = self.sim.core();
                    // Up to twice the attempt's timeout, or (one in three) an hour: some end by
                    // themselves, some are stopped at the timeout or by a cancel.
                    let lasts = match core.chance(0.3) {
                        true => Duration::hours(1),
                        false => Duration::milliseconds(
                            core.between(500, 2 * timeout.num_milliseconds().max(1_000)),
                        ),
                    };
                    (lasts, core.chance(0.8))
                };
                let now = self.sim.now();
                let work = crate::ledger::Work {
                    run_id: inv.run_id.clone(),
                    attempt: inv.attempt,
                    started_at: now,
                    ends_at: now + lasts,
                    succeeds,
                    stopped_at: None,
                    reported: None,
                };
                self.ledger.get().works.entry(handle.clone()).or_insert(work);
                self.sim.yield_now().await;
                Answer::Started { handle }
            }
        }
    }

    async fn follow(&self, handle: &str) -> Progress {
        self.sim.yield_now().await;
        let now = self.sim.now();
        // The describe call fails now and then.
        if self.sim.core().chance(0.1) {
            return Progress::Unknown("describe failed (injected)".into());
        }
        let Some(work) = self.ledger.get().works.get(handle).cloned() else {
            return Progress::Missing(format!("no work {handle}"));
        };
        let ended = work.stopped_at.map_or(work.ends_at, |stopped| stopped.min(work.ends_at));
        if now < ended {
            return Progress::Running;
        }
        let ending = match (work.stopped_at.is_some_and(|s| s <= work.ends_at), work.succeeds) {
            (true, _) => Ending { permanent: true, ..Ending::new(Outcome::Failed).because("aborted") },
            (false, true) => Ending::new(Outcome::Succeeded),
            (false, false) => Ending::new(Outcome::Failed).because("the work failed"),
        };
        if let Some(work) = self.ledger.get().works.get_mut(handle) {
            work.reported = Some(ending.outcome == Outcome::Succeeded);
        }
        Progress::Ended(ending)
    }

    async fn stop(&self, handle: &str, reason: &str) -> Result<(), String> {
        self.sim.yield_now().await;
        let now = self.sim.now();
        // The stop call fails now and then (throttled, the service unavailable).
        if self.sim.core().chance(0.1) {
            return Err("stop failed (injected)".into());
        }
        let stopped = {
            let mut observed = self.ledger.get();
            match observed.works.get_mut(handle) {
                Some(work) => {
                    if work.stopped_at.is_none() && now < work.ends_at {
                        work.stopped_at = Some(now);
                    }
                    Ok(())
                }
                None => Err(format!("no work {handle}")),
            }
        };
        let (step, at, actor) = {
            let core = self.sim.core();
            (core.step, core.now(), core.actor.clone())
        };
        let line =
            Line { step, at, actor, what: format!("target: stop {handle}: {reason}"), job: None, run: None };
        self.ledger.get().lines.push(line);
        stopped
    }
}

impl SimTarget {
    /// A line of the trace about the call's run.
    fn note(&self, inv: &Invocation<'_>, what: String) {
        let (step, at, actor) = {
            let core = self.sim.core();
            (core.step, core.now(), core.actor.clone())
        };
        let key = RunId::parse(&inv.run_id).map(|id| id.key.encode());
        let line = Line { step, at, actor, what, job: Some(inv.job.id.to_string()), run: key };
        self.ledger.get().lines.push(line);
    }
}

/// The key under which a `forbid` or `replace` job's own calls in flight are counted (by run).
pub fn job_calls(job: &sundial_domain::job::JobId) -> String {
    format!("job {job}")
}

/// A synchronous call of a group's job at the target: counted from its arrival until it is
/// dropped, when the call answers or when its worker dies (the executor drops the worker's
/// future, and the call with it).
struct InFlight {
    ledger: Ledger,
    group: String,
    call: (String, u32),
}

impl InFlight {
    fn arrive(ledger: &Ledger, group: String, inv: &Invocation<'_>, at: DateTime<Utc>) -> InFlight {
        let call = (inv.run_id.clone(), inv.attempt);
        let mut observed = ledger.get();
        let calls = observed.group_calls.entry(group.clone()).or_default();
        calls.push(call.clone());
        // A job's own calls count its runs: two attempts of one run overlapping (a lease judged
        // expired under clock skew while its call went on) is not two runs.
        let count = match group.starts_with("job ") {
            true => calls.iter().map(|(run, _)| run).collect::<std::collections::BTreeSet<_>>().len(),
            false => calls.len(),
        };
        let now_calls = calls.clone();
        let line = format!("target: {count} call(s) of group {group} in flight: {now_calls:?}");
        let peak = observed.group_peaks.entry(group.clone()).or_insert(GroupPeak {
            count: 0,
            at,
            calls: Vec::new(),
        });
        if count > peak.count {
            *peak = GroupPeak { count, at, calls: now_calls };
        }
        if let Some(last) = observed.lines.last().cloned() {
            observed.lines.push(Line { what: line, ..last });
        }
        InFlight { ledger: ledger.clone(), group, call }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut observed = self.ledger.get();
        if let Some(calls) = observed.group_calls.get_mut(&self.group)
            && let Some(i) = calls.iter().position(|c| *c == self.call)
        {
            calls.swap_remove(i);
        }
    }
}
