//! The targets: one [`SimTarget`] answers every job's calls as the job's profile says (succeed,
//! fail, fail for good, hang past the timeout, answer 202 and call back later or never, or crash
//! the worker that called it), after a while of virtual time, and records every call it got.

use crate::executor::Sim;
use crate::ledger::{Answered, CallbackPlan, Hit, Ledger};
use async_trait::async_trait;
use chrono::Duration;
use serde_json::Value;
use sundial_domain::job::Job;
use sundial_domain::ports::targets::{Answer, Caller, Invocation};
use sundial_domain::run::RunId;

/// How a job's target behaves: relative weights of its answers, and how long it works.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    pub ok: f64,
    pub fail: f64,
    pub permanent: f64,
    pub hang: f64,
    pub accept: f64,
    pub crash: f64,
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
            busy_ms: sim.and_then(|s| s.get("busy_ms")).and_then(Value::as_i64).unwrap_or(0),
        }
    }

    /// As a job's payload.
    pub fn to_payload(self) -> Value {
        serde_json::json!({"sim": {
            "ok": self.ok, "fail": self.fail, "permanent": self.permanent, "hang": self.hang,
            "accept": self.accept, "crash": self.crash, "busy_ms": self.busy_ms,
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
        }
    }
}
