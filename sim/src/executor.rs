//! The deterministic executor: actors are futures polled one step at a time on one thread, in an
//! order drawn from the seed, over one virtual clock.
//!
//! Every call an actor makes to a port first yields ([`Sim::yield_now`]): that is where the
//! executor switches to another actor, injects a fault, or crashes the actor by dropping its
//! future (a process dying between two AWS calls). An actor that waits ([`Sim::sleep_until`])
//! sleeps until the virtual clock reaches its instant; when no actor can move, the clock jumps to
//! the earliest wake-up. Nothing here reads the wall clock or the operating system's randomness,
//! so a seed replays exactly.

use chrono::{DateTime, Duration, Utc};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use sundial_domain::clock::Clock;
use sundial_domain::entropy::Entropy;

/// An actor's work.
pub type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the executor knows of the actor it is polling, and the seed's random source.
#[derive(Debug)]
pub struct Core {
    rng: StdRng,
    now: DateTime<Utc>,
    /// Steps taken so far.
    pub step: u64,
    /// The actor being polled.
    pub actor: Arc<str>,
    /// Some part of the polled actor stopped at a port call: poll it again soon.
    yielded: bool,
    /// The earliest instant a sleeping part of the polled actor waits for.
    wake: Option<DateTime<Utc>>,
    /// A target asked for the polled actor's process to die (a call that crashes its worker).
    crash_requested: bool,
}

impl Core {
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// A draw in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.rng.random::<f64>()
    }

    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    /// A draw in `[low, high]`.
    pub fn between(&mut self, low: i64, high: i64) -> i64 {
        if high <= low { low } else { self.rng.random_range(low..=high) }
    }

    pub fn bits(&mut self) -> u128 {
        self.rng.random::<u128>()
    }

    /// Lets `by` pass on the virtual clock.
    pub fn pass(&mut self, by: Duration) {
        self.now += by;
    }
}

/// A handle on the simulation's core, shared by the executor, the ports and the actors.
#[derive(Debug, Clone)]
pub struct Sim(Arc<Mutex<Core>>);

impl Sim {
    pub fn new(seed: u64, start: DateTime<Utc>) -> Sim {
        Sim(Arc::new(Mutex::new(Core {
            rng: StdRng::seed_from_u64(seed),
            now: start,
            step: 0,
            actor: Arc::from("setup"),
            yielded: false,
            wake: None,
            crash_requested: false,
        })))
    }

    /// The core, for one short use (never held across an await).
    pub fn core(&self) -> MutexGuard<'_, Core> {
        // The simulation runs on one thread; a poisoned lock means a panic is already unwinding.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.core().now
    }

    /// Stops the polled actor here until the executor picks it again.
    pub fn yield_now(&self) -> YieldNow {
        YieldNow { sim: self.clone(), done: false }
    }

    /// Waits until the virtual clock reaches `at`.
    pub fn sleep_until(&self, at: DateTime<Utc>) -> SleepUntil {
        SleepUntil { sim: self.clone(), at }
    }

    pub fn sleep(&self, by: Duration) -> SleepUntil {
        let at = self.now() + by;
        self.sleep_until(at)
    }

    /// Asks for the polled actor to die once this poll returns.
    pub fn crash_current(&self) {
        self.core().crash_requested = true;
    }
}

/// See [`Sim::yield_now`].
#[derive(Debug)]
pub struct YieldNow {
    sim: Sim,
    done: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.done {
            return Poll::Ready(());
        }
        self.done = true;
        self.sim.core().yielded = true;
        // Combinators that poll only woken children (FuturesUnordered) poll this one again.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// See [`Sim::sleep_until`].
#[derive(Debug)]
pub struct SleepUntil {
    sim: Sim,
    at: DateTime<Utc>,
}

impl Future for SleepUntil {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut core = self.sim.core();
        if core.now >= self.at {
            return Poll::Ready(());
        }
        core.wake = Some(core.wake.map_or(self.at, |w| w.min(self.at)));
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// One process's view of time: the virtual clock, off by the process's skew.
#[derive(Debug, Clone)]
pub struct SimClock {
    pub sim: Sim,
    pub skew: Duration,
}

impl Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        self.sim.now() + self.skew
    }
}

/// Chance drawn from the seed.
#[derive(Debug, Clone)]
pub struct SimEntropy(pub Sim);

impl Entropy for SimEntropy {
    fn unit(&self) -> f64 {
        self.0.core().unit()
    }

    fn bits(&self) -> u128 {
        self.0.core().bits()
    }
}

/// Pauses in virtual time.
#[derive(Debug, Clone)]
pub struct SimTimer(pub Sim);

#[async_trait::async_trait]
impl sundial_app::timer::Timer for SimTimer {
    async fn sleep(&self, duration: std::time::Duration) {
        let by = Duration::from_std(duration).unwrap_or_else(|_| Duration::seconds(1));
        self.0.sleep(by).await;
    }
}

/// An actor: a name and its work.
pub struct Actor {
    pub name: Arc<str>,
    /// What it is, so that its death can be answered (a consumer restarts, a request is retried).
    pub role: Role,
    work: Work,
    ready: bool,
    wake: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actor").field("name", &self.name).field("role", &self.role).finish()
    }
}

/// What an actor stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// A worker process's consumer loop (worker index).
    Consumer(usize),
    /// A worker process's dead-letter handler (worker index).
    DeadLetters(usize),
    /// One invocation of a tick or a watchdog: the next minute brings another.
    Invocation,
    /// One API request of the workload (operation index, try).
    Request(usize, u32),
    /// A target calling back (callback plan index, try).
    Callback(usize, u32),
}

/// What one step did.
#[derive(Debug)]
pub enum Stepped {
    /// Nothing can move before `until` (or ever: `None`).
    Idle(Option<DateTime<Utc>>),
    /// An actor was polled; it finished or is still going.
    Polled,
    /// An actor died (injected, or asked for by its target).
    Crashed(Actor),
}

/// The actors and the order they move in.
#[derive(Debug, Default)]
pub struct Executor {
    actors: Vec<Actor>,
}

impl Executor {
    pub fn spawn(&mut self, name: impl Into<Arc<str>>, role: Role, work: Work) {
        self.actors.push(Actor { name: name.into(), role, work, ready: true, wake: None });
    }

    /// Whether an actor of `role` is alive.
    pub fn has(&self, role: &Role) -> bool {
        self.actors.iter().any(|a| &a.role == role)
    }

    /// Moves one actor drawn at random among those that can move; `crash` is the chance that it
    /// dies instead (when it stopped at a port call).
    pub fn step(&mut self, sim: &Sim, crash: f64) -> Stepped {
        let now = sim.now();
        let movable: Vec<usize> = (0..self.actors.len())
            .filter(|&i| self.actors[i].ready || self.actors[i].wake.is_some_and(|w| w <= now))
            .collect();
        if movable.is_empty() {
            return Stepped::Idle(self.actors.iter().filter_map(|a| a.wake).min());
        }
        let pick = {
            let mut core = sim.core();
            core.step += 1;
            movable[core.between(0, movable.len() as i64 - 1) as usize]
        };
        if self.actors[pick].ready && sim.core().chance(crash) {
            return Stepped::Crashed(self.actors.swap_remove(pick));
        }
        {
            let mut core = sim.core();
            core.actor = self.actors[pick].name.clone();
            core.yielded = false;
            core.wake = None;
            core.crash_requested = false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        let done = self.actors[pick].work.as_mut().poll(&mut cx).is_ready();
        let (yielded, wake, crash_requested) = {
            let core = sim.core();
            (core.yielded, core.wake, core.crash_requested)
        };
        if done {
            self.actors.swap_remove(pick);
            return Stepped::Polled;
        }
        if crash_requested {
            return Stepped::Crashed(self.actors.swap_remove(pick));
        }
        let actor = &mut self.actors[pick];
        actor.ready = yielded;
        actor.wake = wake;
        if !yielded && wake.is_none() {
            // Pending on nothing the simulation drives: it would never move again.
            actor.wake = Some(now + Duration::seconds(1));
        }
        Stepped::Polled
    }
}
