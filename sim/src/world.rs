//! One simulated deployment: the ports in memory behind the fault injector, one set of use cases
//! per process (an API, two ticks, two watchdogs, workers with their dead-letter handler, each
//! with its own clock skew), and the agenda that fires them as EventBridge, the SQS event source
//! and the users would: a tick and a watchdog on each of two schedules every minute (sometimes
//! minutes late), workers polling the runs queue, the workload's requests, the targets'
//! callbacks. [`Simulation::run`] moves it until the quiet period after the workload ends.

use crate::executor::{Executor, Role, Sim, SimClock, SimEntropy, SimTimer, Stepped, Work};
use crate::faults::{
    Faults, FaultyBus, FaultyCalendars, FaultyFences, FaultyGroups, FaultyJobs, FaultyQueue, FaultyRuns,
    FaultyTickState, FaultyTopics, Rates,
};
use crate::ledger::{CallbackPlan, Ledger};
use crate::target::SimTarget;
use crate::workload::{Action, CALENDAR, Workload};
use chrono::{DateTime, Duration, Utc};
use futures::future::{Either, join_all, select};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use sundial_app::jobs::{EditTerms, JobsSettings, RequestKey};
use sundial_app::meter::Meter;
use sundial_app::ports::Ports;
use sundial_app::run_control::{CallbackError, Completion};
use sundial_app::skips::SkipAsk;
use sundial_app::use_cases::{self, UseCases};
use sundial_app::worker::WorkerSettings;
use sundial_app::worker::poll::{Settled, handle_message};
use sundial_domain::audit::{Actor, ActorKind, Stamp};
use sundial_domain::egress::Egress;
use sundial_domain::group::GroupDocument;
use sundial_domain::job::{CatchupPolicy, JobId, PauseNote};
use sundial_domain::limits::{Limits, TargetAllowList};
use sundial_domain::page_token::PageTokens;
use sundial_domain::ports::queue::{RunInbox, RunQueue};
use sundial_domain::run_queue::{HOLD_RENEW_S, HOLD_S};
use sundial_domain::watchdog::rules::WatchdogSettings;
use sundial_memory::{
    MemoryCalendarStore, MemoryEventBus, MemoryFenceStore, MemoryGroupStore, MemoryJobStore, MemoryQueue,
    MemoryRunStore, MemoryTickStateStore, MemoryTopics,
};

/// The owner of every job.
pub const OWNER: &str = "sim";
/// Partitions of the due and in-flight indexes.
const SHARDS: u16 = 4;
/// Worker processes, each taking up to ten messages at a time.
const WORKERS: usize = 3;

/// What a simulation is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    /// Jobs in the workload.
    pub jobs: usize,
    /// Minutes of workload, with faults; then the quiet period, without.
    pub minutes: i64,
    pub quiet_minutes: i64,
    pub rates: Rates,
    /// A bound on steps: more means something spins without making progress.
    pub max_steps: u64,
    /// Keep every step of the actors whose names start with this (for reading a failure).
    pub trace_actors: Option<String>,
}

impl Options {
    pub fn seed(seed: u64) -> Options {
        Options {
            seed,
            jobs: 8,
            minutes: 20,
            quiet_minutes: 45,
            rates: Rates::DEFAULT,
            max_steps: 2_000_000,
            trace_actors: None,
        }
    }
}

/// What fires at an instant.
#[derive(Debug, Clone)]
enum Event {
    /// The minute's ticks and watchdogs are scheduled.
    Minute,
    Tick(usize),
    Watchdog(usize),
    /// The workload's request `n`, try `t`.
    Request(usize, u32),
    /// A worker's consumer (re)starts.
    Consumer(usize),
    DeadLetters,
    /// A target's callbacks (plan `n`), try `t`.
    Callback(usize, u32),
    /// The workload is over: faults stop.
    Quiet,
}

/// The in-memory services behind the faults, as the checker reads them.
#[derive(Debug, Clone)]
pub struct Stores {
    pub jobs: Arc<MemoryJobStore>,
    pub runs: Arc<MemoryRunStore>,
    pub groups: Arc<MemoryGroupStore>,
    pub calendars: Arc<MemoryCalendarStore>,
    pub fences: Arc<MemoryFenceStore>,
    pub tick_state: Arc<MemoryTickStateStore>,
    pub queue: Arc<MemoryQueue>,
    pub bus: Arc<MemoryEventBus>,
    /// The audit trail every store writes its records into, with their changes.
    pub trail: sundial_memory::MemoryAuditTrail,
}

/// A simulated deployment.
#[derive(Debug)]
pub struct Simulation {
    pub sim: Sim,
    pub ledger: Ledger,
    pub faults: Arc<Faults>,
    pub stores: Stores,
    pub workload: Workload,
    pub options: Options,
    api: UseCases,
    ticks: Vec<UseCases>,
    watchdogs: Vec<UseCases>,
    workers: Vec<UseCases>,
    inbox: Arc<FaultyQueue>,
    /// The ids of the workload's jobs, once created.
    ids: Arc<Mutex<Vec<Option<JobId>>>>,
    /// Dead letters handled so far.
    dead_handled: Arc<Mutex<usize>>,
    plans: Vec<CallbackPlan>,
    agenda: BTreeMap<(DateTime<Utc>, u64), Event>,
    serial: u64,
    executor: Executor,
    incarnations: u64,
}

impl Simulation {
    pub fn new(options: Options) -> Simulation {
        let sim = Sim::new(options.seed, DateTime::UNIX_EPOCH);
        let workload = Workload::draw(&sim, options.seed, options.jobs.max(1), options.minutes.max(3));
        sim.core().pass(workload.start - Duration::minutes(5) - DateTime::UNIX_EPOCH);
        let ledger = Ledger::default();
        // Half the seeds meet a queue outage of 5-8 minutes during the workload, drawn apart from
        // the seed's main stream.
        let outage = {
            use rand::{RngExt, SeedableRng};
            let mut rng = rand::rngs::StdRng::seed_from_u64(options.seed ^ 0x5eed);
            let minutes = options.minutes.max(11);
            rng.random_bool(0.5).then(|| {
                let from = workload.start + Duration::seconds(rng.random_range(60..(minutes - 9) * 60));
                (from, from + Duration::seconds(rng.random_range(300..=480)))
            })
        };
        let faults = Faults::new(sim.clone(), ledger.clone(), options.rates, outage);
        let server = Arc::new(SimClock { sim: sim.clone(), skew: Duration::zero() });
        let max_receives = sim.core().between(2, 15) as u32;
        let trail = sundial_memory::MemoryAuditTrail::new();
        let stores = Stores {
            jobs: Arc::new(MemoryJobStore::new(SHARDS).recording_to(trail.clone())),
            runs: Arc::new(MemoryRunStore::new(SHARDS).recording_to(trail.clone())),
            groups: Arc::new(MemoryGroupStore::new().recording_to(trail.clone())),
            calendars: Arc::new(MemoryCalendarStore::new().recording_to(trail.clone())),
            fences: Arc::new(MemoryFenceStore::new()),
            tick_state: Arc::new(MemoryTickStateStore::new()),
            queue: Arc::new(MemoryQueue::new(server.clone()).with_max_receive_count(Some(max_receives))),
            bus: Arc::new(MemoryEventBus::new()),
            trail: trail.clone(),
        };
        let inbox = Arc::new(FaultyQueue {
            inner: stores.queue.clone(),
            faults: faults.clone(),
            ledger: ledger.clone(),
            sim: sim.clone(),
        });
        let base = Ports {
            jobs: Arc::new(FaultyJobs {
                inner: stores.jobs.clone(),
                faults: faults.clone(),
                ledger: ledger.clone(),
                sim: sim.clone(),
            }),
            runs: Arc::new(FaultyRuns {
                inner: stores.runs.clone(),
                faults: faults.clone(),
                ledger: ledger.clone(),
                sim: sim.clone(),
            }),
            groups: Arc::new(FaultyGroups { inner: stores.groups.clone(), faults: faults.clone() }),
            calendars: Arc::new(FaultyCalendars { inner: stores.calendars.clone(), faults: faults.clone() }),
            // The simulated API is called as its use cases, past authentication: no key is read.
            keys: Arc::new(sundial_memory::MemoryKeyStore::new().recording_to(trail.clone())),
            audit: Arc::new(trail.clone()),
            fences: Arc::new(FaultyFences { inner: stores.fences.clone(), faults: faults.clone() }),
            tick_state: Arc::new(FaultyTickState {
                inner: stores.tick_state.clone(),
                faults: faults.clone(),
                ledger: ledger.clone(),
                sim: sim.clone(),
            }),
            queue: inbox.clone(),
            bus: Arc::new(FaultyBus {
                inner: stores.bus.clone(),
                faults: faults.clone(),
                ledger: ledger.clone(),
                sim: sim.clone(),
            }),
            topics: Arc::new(FaultyTopics { inner: Arc::new(MemoryTopics::new()), faults: faults.clone() }),
            // The workload names no alert channel.
            channels: Arc::new(sundial_memory::channels::MemoryChannels::default()),
            caller: Arc::new(SimTarget { sim: sim.clone(), ledger: ledger.clone() }),
            spans: Arc::new(sundial_domain::ports::spans::NoSpans),
            clock: server,
            timer: Arc::new(SimTimer(sim.clone())),
            entropy: Arc::new(SimEntropy(sim.clone())),
            meter: Meter::new(false),
        };
        // Each process's clock is off by up to 30 s either way.
        let process = |sim: &Sim| {
            let skew = Duration::milliseconds(sim.core().between(-30_000, 30_000));
            let ports = Ports { clock: Arc::new(SimClock { sim: sim.clone(), skew }), ..base.clone() };
            UseCases::new(&ports, settings())
        };
        let api = process(&sim);
        let ticks = vec![process(&sim), process(&sim)];
        let watchdogs = vec![process(&sim), process(&sim)];
        let workers = (0..WORKERS).map(|_| process(&sim)).collect();
        if let Some((name, max_running)) = &workload.group {
            create_group(&api, name, *max_running);
        }
        if let Some((name, document)) = &workload.calendar {
            create_calendar(&api, name, document);
        }
        let jobs = workload.documents.len();
        let mut world = Simulation {
            sim,
            ledger,
            faults,
            stores,
            workload,
            options,
            api,
            ticks,
            watchdogs,
            workers,
            inbox,
            ids: Arc::new(Mutex::new(vec![None; jobs])),
            dead_handled: Arc::default(),
            plans: Vec::new(),
            agenda: BTreeMap::new(),
            serial: 0,
            executor: Executor::default(),
            incarnations: 0,
        };
        let now = world.sim.now();
        world.at(now, Event::Minute);
        for w in 0..WORKERS {
            world.at(now, Event::Consumer(w));
        }
        world.at(now, Event::DeadLetters);
        for n in 0..world.workload.ops.len() {
            world.at(world.workload.ops[n].at, Event::Request(n, 0));
        }
        world.at(world.workload.horizon, Event::Quiet);
        world
    }

    /// The end of the quiet period: every run must have ended by then. It lasts as long again
    /// as the workload's longest flexible window, so that a run starting at the end of its
    /// window (its instant at the horizon) has the whole quiet period to end in.
    pub fn end(&self) -> DateTime<Utc> {
        self.workload.horizon + self.workload.longest_window() + Duration::minutes(self.options.quiet_minutes)
    }

    fn at(&mut self, at: DateTime<Utc>, event: Event) {
        self.serial += 1;
        self.agenda.insert((at, self.serial), event);
    }

    /// Moves the world one step; `false` once it is over. `after_step` sees every step.
    pub fn run(&mut self, mut after_step: impl FnMut(&Simulation) -> bool) -> Result<(), String> {
        let end = self.end();
        loop {
            let now = self.sim.now();
            while let Some(entry) = self.agenda.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                let event = entry.remove();
                self.fire(event);
            }
            let crash = self.faults.rates().crash;
            match self.executor.step(&self.sim, crash) {
                Stepped::Idle(wake) => {
                    let next =
                        [wake, self.agenda.keys().next().map(|(at, _)| *at)].into_iter().flatten().min();
                    match next {
                        Some(next) if next <= end => {
                            let by = next - now;
                            self.sim.core().pass(by.max(Duration::zero()));
                        }
                        _ => return Ok(()),
                    }
                }
                Stepped::Polled => {}
                Stepped::Crashed(actor) => self.crashed(actor.name.clone(), actor.role),
            }
            let plans = std::mem::take(&mut self.ledger.get().callbacks);
            for plan in plans {
                self.plans.push(plan);
                let n = self.plans.len() - 1;
                self.fire(Event::Callback(n, 0));
            }
            if !after_step(self) {
                return Ok(());
            }
            if self.sim.core().step > self.options.max_steps {
                return Err(format!("no end after {} steps: something spins", self.options.max_steps));
            }
            if self.sim.now() > end {
                return Ok(());
            }
        }
    }

    fn crashed(&mut self, name: Arc<str>, role: Role) {
        let now = self.sim.now();
        {
            let mut ledger = self.ledger.get();
            ledger.crashes += 1;
            ledger.crashed.insert(name.clone());
            if let Some(unmarked) = ledger.unmarked.remove(&name) {
                ledger.window.extend(unmarked);
            }
        }
        self.faults.note(format!("CRASH of {name}"), None, None);
        let later =
            |core: &mut crate::executor::Core, low, high| now + Duration::seconds(core.between(low, high));
        match role {
            Role::Consumer(w) => {
                let at = later(&mut self.sim.core(), 1, 30);
                self.at(at, Event::Consumer(w));
            }
            Role::DeadLetters(_) => {
                let at = later(&mut self.sim.core(), 1, 30);
                self.at(at, Event::DeadLetters);
            }
            Role::Request(n, t) if t < 3 && !matches!(self.workload.ops[n].action, Action::Create(_)) => {
                let at = later(&mut self.sim.core(), 1, 5);
                self.at(at, Event::Request(n, t + 1));
            }
            Role::Callback(n, t) if t < 3 => {
                let at = later(&mut self.sim.core(), 1, 5);
                self.at(at, Event::Callback(n, t + 1));
            }
            _ => {}
        }
    }

    fn name(&mut self, what: &str) -> String {
        self.incarnations += 1;
        format!("{what}#{}", self.incarnations)
    }

    fn fire(&mut self, event: Event) {
        let now = self.sim.now();
        match event {
            Event::Minute => {
                let minute = sundial_domain::due_index::minute_of(now) + Duration::minutes(1);
                for p in 0..2 {
                    let (offset, late) = {
                        let mut core = self.sim.core();
                        let offset = Duration::milliseconds(core.between(0, 3_000));
                        let on = self.faults.on();
                        (offset, on && core.chance(0.05))
                    };
                    let delay = if late {
                        self.ledger.fault("tick delayed by minutes");
                        Duration::seconds(self.sim.core().between(60, 240))
                    } else {
                        Duration::zero()
                    };
                    self.at(minute + offset + delay, Event::Tick(p));
                    let offset = Duration::milliseconds(self.sim.core().between(0, 3_000));
                    self.at(minute + offset + Duration::seconds(20), Event::Watchdog(p));
                }
                self.at(minute, Event::Minute);
            }
            Event::Tick(p) => {
                let tick = self.ticks[p].tick.clone();
                let name = self.name(&format!("tick-{p}"));
                let ledger = self.ledger.clone();
                self.executor.spawn(
                    name,
                    Role::Invocation,
                    Box::pin(async move {
                        // A pass its budget stopped is counted, so that the long mode shows the
                        // out-of-budget path is taken.
                        if tick.run().await.is_ok_and(|report| report.unfinished) {
                            ledger.fault(OUT_OF_BUDGET);
                        }
                    }),
                );
            }
            Event::Watchdog(p) => {
                let watchdog = self.watchdogs[p].watchdog.clone();
                let name = self.name(&format!("watchdog-{p}"));
                self.executor.spawn(
                    name,
                    Role::Invocation,
                    Box::pin(async move {
                        let _ = watchdog.run().await;
                    }),
                );
            }
            Event::Consumer(w) => {
                if !self.executor.has(&Role::Consumer(w)) {
                    let name = self.name(&format!("worker-{w}"));
                    let work =
                        consumer(self.sim.clone(), self.workers[w].clone(), self.inbox.clone(), name.clone());
                    self.executor.spawn(name, Role::Consumer(w), work);
                }
            }
            Event::DeadLetters => {
                if !self.executor.has(&Role::DeadLetters(0)) {
                    let name = self.name("dead-letters");
                    let work = dead_letters(
                        self.ledger.clone(),
                        self.sim.clone(),
                        self.workers[0].clone(),
                        self.stores.queue.clone(),
                        self.dead_handled.clone(),
                    );
                    self.executor.spawn(name, Role::DeadLetters(0), work);
                }
            }
            Event::Request(n, t) => {
                let name = self.name(&format!("api-op{n}"));
                let work = request(self, n);
                self.executor.spawn(name, Role::Request(n, t), work);
            }
            Event::Callback(n, t) => {
                let name = self.name(&format!("callback{n}"));
                let work =
                    callback(self.sim.clone(), self.api.clone(), self.ledger.clone(), self.plans[n].clone());
                self.executor.spawn(name, Role::Callback(n, t), work);
            }
            Event::Quiet => {
                self.faults.stop();
                self.faults.note("faults stop".into(), None, None);
            }
        }
    }
}

/// A tick pass's time budget in the simulation: short, as a Lambda invocation cut short by its
/// timeout would be, so that passes over busy minutes (whose aligned sends wait on the virtual
/// clock) stop unfinished and the next pass continues them.
const TICK_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// What the ledger counts a tick pass its budget stopped as.
pub const OUT_OF_BUDGET: &str = "tick pass out of its budget";

/// The use cases' configuration: `Config`'s defaults, targets validated but never resolved.
fn settings() -> use_cases::Settings {
    let targets = TargetAllowList {
        own_prefix: "sundial-".into(),
        network: Egress::new(&[], &[]).expect("an empty egress allow-list is valid"),
        ..TargetAllowList::default()
    };
    use_cases::Settings {
        claim: Default::default(),
        tick: sundial_app::tick::TickSettings { budget: TICK_BUDGET, ..Default::default() },
        worker: WorkerSettings::default(),
        watchdog: WatchdogSettings::default(),
        jobs: JobsSettings {
            limits: Limits::default(),
            targets,
            page_tokens: PageTokens::new(&[7u8; 64]).expect("a 64-byte key"),
        },
        public_url: None,
        pagerduty_url: sundial_domain::channels::PAGERDUTY_EVENTS_URL.to_string(),
        audit_retention_days: sundial_domain::audit::DEFAULT_RETENTION_DAYS,
    }
}

/// Creates the workload's concurrency group through the API's use cases (under the faults, so
/// tried until it lands), before anything else happens: jobs that name it need it to exist.
fn create_group(api: &UseCases, name: &str, max_running: u32) {
    let owner = OWNER.to_string();
    let document = GroupDocument { max_running };
    let created = (0..20).find_map(|_| settle(api.groups.put(&owner, name, &document)).ok());
    created.expect("the group is created within 20 tries");
}

/// Creates the workload's named calendar through the API's use cases (under the faults, so
/// tried until it lands), before any job names it.
fn create_calendar(api: &UseCases, name: &str, document: &serde_json::Value) {
    let owner = OWNER.to_string();
    let document = serde_json::from_value(document.clone()).expect("the workload's calendar decodes");
    let created = (0..20).find_map(|_| settle(api.calendars.put(&owner, name, &document, None)).ok());
    created.expect("the calendar is created within 20 tries");
}

/// Runs `work` to its end outside the executor, for the world's setup: it may stop at port calls
/// (a yield, where nobody else moves and nobody dies), but never sleeps.
fn settle<T>(work: impl std::future::Future<Output = T>) -> T {
    use std::task::{Context, Poll, Waker};
    let mut work = std::pin::pin!(work);
    let mut cx = Context::from_waker(Waker::noop());
    (0..100_000)
        .find_map(|_| match work.as_mut().poll(&mut cx) {
            Poll::Ready(out) => Some(out),
            Poll::Pending => None,
        })
        .expect("setup work that never sleeps ends")
}

/// A worker process's consumer: receive a batch, handle its messages concurrently while renewing
/// their holds, delete those done with; wait a second when the queue is empty.
fn consumer(sim: Sim, process: UseCases, inbox: Arc<FaultyQueue>, name: String) -> Work {
    Box::pin(async move {
        loop {
            let batch = inbox.receive(10, 0).await.unwrap_or_default();
            if batch.is_empty() {
                sim.sleep(Duration::seconds(1)).await;
                continue;
            }
            let handled = batch.iter().map(|message| {
                let (sim, worker, inbox, name) =
                    (sim.clone(), process.worker.clone(), inbox.clone(), name.clone());
                async move {
                    let work = Box::pin(handle_message(
                        &worker,
                        inbox.as_ref() as &dyn RunQueue,
                        inbox.as_ref() as &dyn RunInbox,
                        message,
                        &name,
                    ));
                    let renew = Box::pin(async {
                        loop {
                            sim.sleep(Duration::seconds(HOLD_RENEW_S as i64)).await;
                            let _ = inbox.set_visibility(&message.receipt, HOLD_S).await;
                        }
                    });
                    let settled = match select(work, renew).await {
                        Either::Left((settled, _)) => settled,
                        Either::Right(((), _)) => Settled::Kept,
                    };
                    if settled == Settled::Done {
                        let _ = inbox.delete(&message.receipt).await;
                    }
                }
            });
            join_all(handled).await;
        }
    })
}

/// The dead-letter queue's handler: every 20 s, each dead letter not yet handled.
fn dead_letters(
    ledger: Ledger,
    sim: Sim,
    process: UseCases,
    queue: Arc<MemoryQueue>,
    handled: Arc<Mutex<usize>>,
) -> Work {
    Box::pin(async move {
        loop {
            sim.sleep(Duration::seconds(20)).await;
            let letters = queue.dead_letters();
            loop {
                let next = *handled.lock().unwrap_or_else(|e| e.into_inner());
                let Some(letter) = letters.get(next) else { break };
                let reason = letter
                    .reason
                    .clone()
                    .unwrap_or_else(|| format!("received {} times", letter.receive_count));
                let carried = serde_json::from_str::<sundial_domain::run::RunMessage>(&letter.body)
                    .ok()
                    .map(|m| (m.job_id, m.run_key, m.attempt));
                ledger.get().dead_letter = carried;
                let handled_ok = process.worker.dead_lettered(&letter.body, &reason).await.is_ok();
                ledger.get().dead_letter = None;
                if !handled_ok {
                    break;
                }
                *handled.lock().unwrap_or_else(|e| e.into_inner()) = next + 1;
            }
        }
    })
}

/// The stamp of the workload's request `n`: its changes are recorded as `op-<n>`'s.
fn stamp(n: usize) -> Stamp {
    Stamp {
        actor: Actor { kind: ActorKind::ConfiguredKey, name: OWNER.into(), key_id: None },
        action: format!("op-{n}"),
        route: "sim".into(),
        request_id: format!("op-{n}"),
        source: None,
    }
}

/// The workload's request `n`, tried up to three times while it fails, acting as the API does
/// for a request: its changes are written with their audit records.
fn request(world: &Simulation, n: usize) -> Work {
    let op = world.workload.ops[n].clone();
    let api = world.api.acting(stamp(n));
    let (sim, ledger, ids, jobs) =
        (world.sim.clone(), world.ledger.clone(), world.ids.clone(), api.jobs.clone());
    let skips = api.skips.clone();
    let calendars = api.calendars.clone();
    let document = match op.action {
        Action::Create(j) => world.workload.documents.get(j).cloned(),
        _ => None,
    };
    let owner = OWNER.to_string();
    Box::pin(async move {
        let job = |j: usize| ids.lock().unwrap_or_else(|e| e.into_inner()).get(j).cloned().flatten();
        for _ in 0..3 {
            let done = match &op.action {
                Action::Create(j) => {
                    let Some(document) = document.clone().and_then(|d| serde_json::from_value(d).ok()) else {
                        return;
                    };
                    if let Ok(created) = jobs.create(&owner, document).await {
                        ids.lock().unwrap_or_else(|e| e.into_inner())[*j] = Some(created.id);
                    }
                    // A create is not retried: without its answer the client cannot know.
                    true
                }
                Action::Patch(j, patch) => match job(*j) {
                    Some(id) => jobs.patch(&owner, &id, patch, EditTerms::default()).await.is_ok(),
                    None => true,
                },
                Action::Pause(j, until) => match job(*j) {
                    Some(id) => {
                        let note =
                            PauseNote { reason: Some("sim".into()), by: Some(owner.clone()), until: *until };
                        jobs.pause(&owner, &id, note).await.is_ok()
                    }
                    None => true,
                },
                Action::Resume(j) => match job(*j) {
                    Some(id) => jobs.resume(&owner, &id, CatchupPolicy::Skip).await.is_ok(),
                    None => true,
                },
                Action::Skip(j, k) => match job(*j) {
                    Some(id) => skips.skip(&owner, &id, &SkipAsk::Next(*k), &owner).await.is_ok(),
                    None => true,
                },
                Action::Trigger(j) => match job(*j) {
                    Some(id) => {
                        let key = RequestKey { key: format!("op-{n}"), first_seen: op.at };
                        let ok = jobs.trigger(&owner, &id, Some(&key)).await.is_ok();
                        ledger.get().triggers.push((n, id, ok));
                        ok
                    }
                    None => true,
                },
                Action::Backfill(j, from, to) => match job(*j) {
                    Some(id) => {
                        // The runs it creates are told apart from the schedule's.
                        let actor = sim.core().actor.clone();
                        ledger.get().backfillers.insert(actor);
                        jobs.backfill(&owner, &id, *from, *to).await.is_ok()
                    }
                    None => true,
                },
                Action::Delete(j) => match job(*j) {
                    Some(id) => jobs.delete(&owner, &id).await.is_ok(),
                    None => true,
                },
                // Sent again while it fails: a replay finishes copying it into the jobs.
                Action::PutCalendar(document) => match serde_json::from_value(document.clone()) {
                    Ok(document) => calendars.put(&owner, CALENDAR, &document, None).await.is_ok(),
                    Err(_) => true,
                },
            };
            if done {
                return;
            }
            sim.sleep(Duration::seconds(2)).await;
        }
    })
}

/// A target that answered 202 reporting back: heartbeats, then its completion (or nothing).
fn callback(sim: Sim, api: UseCases, ledger: Ledger, plan: CallbackPlan) -> Work {
    Box::pin(async move {
        let every = Duration::seconds(plan.every_s);
        for _ in 0..plan.heartbeats {
            sim.sleep(every).await;
            let _ = api.run_control.heartbeat(&plan.run_id, &plan.token).await;
        }
        let Some(succeeded) = plan.then else { return };
        sim.sleep(every).await;
        ledger.get().completed.push((plan.run_id.to_string(), plan.attempt, succeeded));
        for _ in 0..3 {
            let completion = Completion {
                succeeded,
                output: None,
                error: (!succeeded).then(|| "the work failed".to_string()),
                permanent: false,
            };
            // Acting as the API does for a callback: its change recorded as the run token's.
            let stamp = Stamp {
                actor: Actor { kind: ActorKind::RunToken, name: plan.run_id.to_string(), key_id: None },
                action: "run.complete".into(),
                route: "sim".into(),
                request_id: format!("callback {} #{}", plan.run_id, plan.attempt),
                source: None,
            };
            match api.acting(stamp).run_control.complete(&plan.run_id, &plan.token, completion).await {
                Err(CallbackError::Store(_)) => sim.sleep(Duration::seconds(2)).await,
                _ => return,
            }
        }
    })
}
