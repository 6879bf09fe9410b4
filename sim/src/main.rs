//! `sundial-sim`: runs many seeds of the simulation (the long mode) and prints any failing seed
//! with the steps that broke the invariant.
//!
//! ```text
//! cargo run -p sundial-sim --release -- --seeds 10000 [--from 0] [--jobs 8] [--minutes 20]
//! cargo run -p sundial-sim --release -- --seed 4242 [--trace tick]
//! ```

use std::process::ExitCode;
use sundial_sim::{Options, simulate};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| -> Result<Option<u64>, String> {
        match args.iter().position(|a| a == name) {
            None => Ok(None),
            Some(i) => {
                let text = args.get(i + 1).ok_or(format!("{name} needs a number"))?;
                text.parse().map(Some).map_err(|_| format!("{name}: `{text}` is not a number"))
            }
        }
    };
    let parsed = (|| -> Result<_, String> {
        for arg in args.iter().filter(|a| a.starts_with("--")) {
            if !["--seed", "--seeds", "--from", "--jobs", "--minutes", "--trace"].contains(&arg.as_str()) {
                return Err(format!("unknown option {arg}"));
            }
        }
        let trace = match args.iter().position(|a| a == "--trace") {
            None => None,
            Some(i) => Some(args.get(i + 1).cloned().ok_or("--trace needs an actor name prefix")?),
        };
        Ok((
            value("--seed")?,
            value("--seeds")?,
            value("--from")?,
            value("--jobs")?,
            value("--minutes")?,
            trace,
        ))
    })();
    let (seed, seeds, from, jobs, minutes, trace) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!(
                "sundial-sim: {e}\nusage: sundial-sim [--seed N | --seeds COUNT [--from N]] [--jobs N] [--minutes N] [--trace ACTOR-PREFIX]"
            );
            return ExitCode::from(2);
        }
    };
    let (first, count) = match (seed, seeds) {
        (Some(seed), _) => (seed, 1),
        (None, seeds) => (from.unwrap_or(0), seeds.unwrap_or(1_000)),
    };
    let started = std::time::Instant::now();
    let (mut failed, mut steps, mut runs, mut twice) = (0u64, 0u64, 0usize, 0usize);
    // Seeds with a group, those whose group was full at the target at least once; refused calls;
    // runs of at-most-once jobs, and those it ended.
    let (mut groups, mut full, mut refused, mut once, mut once_ended) = (0, 0, 0, 0, 0);
    let (mut out_of_budget, mut ended_at_limit) = (0, 0);
    let mut works = (0usize, 0usize, 0usize);
    let (mut unions, mut dst_policies, mut long_windows, mut far, mut far_started) = (0, 0, 0, 0, 0);
    let (mut calendars, mut named, mut copied) = (0, 0, 0);
    for seed in first..first + count {
        let mut options = Options::seed(seed);
        options.jobs = jobs.map_or(options.jobs, |j| j as usize);
        options.minutes = minutes.map_or(options.minutes, |m| m as i64);
        options.trace_actors = trace.clone();
        let outcome = simulate(options);
        steps += outcome.steps;
        runs += outcome.summary.runs;
        twice += outcome.summary.told_twice_in_window;
        if let Some((max_running, peak)) = outcome.summary.group {
            groups += 1;
            full += usize::from(peak >= max_running as usize);
        }
        refused += outcome.summary.refused_calls;
        once += outcome.summary.at_most_once_runs.0;
        once_ended += outcome.summary.at_most_once_runs.1;
        ended_at_limit += outcome.summary.ended_at_limit;
        unions += outcome.summary.unions;
        dst_policies += outcome.summary.dst_policies;
        long_windows += outcome.summary.long_windows;
        calendars += outcome.summary.calendars;
        named += outcome.summary.named_calendars.0;
        copied += outcome.summary.named_calendars.1;
        far += outcome.summary.far_in_window.0;
        far_started += outcome.summary.far_in_window.1;
        works.0 += outcome.summary.works.0;
        works.1 += outcome.summary.works.1;
        works.2 += outcome.summary.works.2;
        out_of_budget += outcome.faults.get(sundial_sim::world::OUT_OF_BUDGET).copied().unwrap_or(0);
        for line in &outcome.trace {
            println!("{line}");
        }
        if !outcome.passed() {
            failed += 1;
            println!("{}", outcome.explain());
        }
        if count == 1 {
            println!("{:#?}", outcome.summary);
        }
    }
    println!(
        "{count} seeds from {first}: {failed} failed; {steps} steps, {runs} runs, {twice} events told twice in the crash window; {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!(
        "groups in {groups} seeds, full at the target in {full}; {refused} calls refused; {once} runs at most once, {once_ended} of them ended rather than repeated"
    );
    println!("{ended_at_limit} jobs ended at their max_runs");
    println!(
        "{unions} jobs with a union of schedules, {dst_policies} with a DST policy, {long_windows} with a flexible window over 15 minutes, {calendars} with a business calendar; {far} runs due over 15 minutes into their window, {far_started} of them started"
    );
    println!("{named} jobs naming a shared calendar, which its edits reached {copied} times");
    println!("{out_of_budget} tick passes stopped by their budget and continued by the next");
    println!(
        "{} works started elsewhere and followed: {} seen ending by a look, {} stopped",
        works.0, works.1, works.2
    );
    if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
