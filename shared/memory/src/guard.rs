//! Locking a double's state: a `std::sync::Mutex`, taken for one synchronous step and never held
//! across an `await`. A lock poisoned by a panicking test thread still holds consistent state
//! (every step writes its changes only after all its checks), so it is taken over, not unwrapped.

use std::sync::{Mutex, MutexGuard};

/// Locks `state`, taking a poisoned lock over.
pub fn lock<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}
