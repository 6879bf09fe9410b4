//! A deterministic simulation of the whole scheduler, for finding the interleavings and faults
//! that break its promises (in the manner of FoundationDB's and TigerBeetle's simulators).
//!
//! One seed draws a workload ([`workload`]) and every choice after it: which actor moves next,
//! which call fails, which process dies, how targets answer, how far clocks are off. The API,
//! two ticks, two watchdogs, three workers and the targets' callbacks run as actors
//! ([`executor`]) over the in-memory ports (kept equal to DynamoDB, SQS and SNS by the contract
//! suite) behind a fault injector ([`faults`]), on one virtual clock ([`world`]). The invariants
//! ([`check`]) are checked after every step and at the end of a quiet period without faults; the
//! [`ledger`] keeps what happened, so a failing seed prints the steps that led to it.
//!
//! `simulate(Options::seed(n))` replays seed `n` exactly: nothing reads the wall clock or the
//! system's randomness (time, chance and waiting are ports).

#![allow(clippy::expect_used)] // a test crate: a broken assumption is a failed simulation

pub mod check;
pub mod executor;
pub mod faults;
pub mod ledger;
pub mod target;
pub mod workload;
pub mod world;

use check::{Checker, Summary, Violation};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
pub use world::Options;
use world::Simulation;

/// What one seed did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub seed: u64,
    pub steps: u64,
    pub summary: Summary,
    pub crashes: u64,
    pub faults: BTreeMap<&'static str, u64>,
    /// Broken invariants, each with the trace of the steps about what it concerns.
    pub violations: Vec<(Violation, Vec<String>)>,
    /// A digest of the whole trace: the same seed gives the same digest.
    pub digest: String,
    /// Every step of the actors [`Options::trace_actors`] names.
    pub trace: Vec<String>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The first broken invariant and its trace, for a failure message.
    pub fn explain(&self) -> String {
        let mut text = format!(
            "seed {} broke {} invariant(s) in {} steps\n",
            self.seed,
            self.violations.len(),
            self.steps
        );
        for (violation, trace) in self.violations.iter().take(3) {
            text.push_str(&format!(
                "\n{violation}\n  replay: cargo run -p sundial-sim --release -- --seed {}\n",
                self.seed
            ));
            for line in trace {
                text.push_str("    ");
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    }
}

/// Runs one seed.
pub fn simulate(options: Options) -> Outcome {
    let seed = options.seed;
    let trace_actors = options.trace_actors.clone();
    let mut world = Simulation::new(options);
    let mut checker = Checker::default();
    let ran = world.run(|world| {
        checker.after_step(world);
        checker.violations.is_empty()
    });
    if let Err(spin) = ran {
        checker.violations.push(Violation {
            invariant: "every run ends",
            detail: spin,
            job: None,
            run: None,
        });
    }
    let summary =
        if checker.violations.is_empty() { checker.at_quiescence(&world) } else { Summary::default() };
    let ledger = world.ledger.get();
    let mut digest = Sha256::new();
    for line in &ledger.lines {
        digest.update(format!("{} {} {} {}\n", line.step, line.at, line.actor, line.what).as_bytes());
    }
    let violations = checker
        .violations
        .iter()
        .map(|v| {
            let trace = ledger::trace_of(&ledger, v.job.as_deref(), v.run.as_deref(), 60);
            (v.clone(), trace)
        })
        .collect();
    Outcome {
        seed,
        steps: world.sim.core().step,
        summary,
        crashes: ledger.crashes,
        faults: ledger.faults.clone(),
        violations,
        digest: hex::encode(digest.finalize()),
        trace: trace_actors.map(|prefix| ledger::trace_of_actors(&ledger, &prefix)).unwrap_or_default(),
    }
}
