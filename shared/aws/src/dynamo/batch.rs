//! Batch reads: [`get`] reads items by key with BatchGetItem, 100 keys a request, asks again for
//! the keys DynamoDB leaves unprocessed, and decodes each item by the caller's policy.

use super::item::Item;
use crate::errors::store_error;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::KeysAndAttributes;
use std::time::Duration;
use sundial_domain::ports::store::{StoreError, StoreResult};

/// The most keys one BatchGetItem request may name.
pub const MAX_KEYS: usize = 100;

/// Rounds in a row that process none of the keys asked for, after which a read gives up.
const IDLE_ROUNDS: u32 = 5;

/// Rounds one request of [`MAX_KEYS`] may take in all, progress or not: a read throttled into
/// processing a few keys a round gives up within seconds (its pauses add up to under 5 s), well
/// inside a function's time limit, instead of crawling through its keys for minutes.
const MAX_ROUNDS: u32 = 10;

/// Whether a request whose keys are still `pending` after `rounds` rounds, the last `idle` of them
/// without progress, gives up.
fn gives_up(pending: usize, rounds: u32, idle: u32) -> bool {
    pending > 0 && (idle >= IDLE_ROUNDS || rounds >= MAX_ROUNDS)
}

/// The pause before asking again for unprocessed keys, the `retry`th time (from 1): 50 ms,
/// doubling, at most 800 ms.
fn pause(retry: u32) -> Duration {
    Duration::from_millis(25 << retry.clamp(1, 5))
}

/// The items of `keys` in `table` (read consistently if `consistent`), in the order DynamoDB
/// answers, which is not the keys' order; a key without an item is left out. `decode` says what
/// becomes of each item: `Ok(Some)` keeps it, `Ok(None)` leaves it out (a store reports what it
/// leaves out), and an error fails the whole read.
///
/// DynamoDB leaves keys unprocessed under throttling, and past the 16 MB one response holds:
/// those are asked for again after a growing pause, for as long as each round processes some of
/// them; [`IDLE_ROUNDS`] rounds in a row that process none, or [`MAX_ROUNDS`] rounds for one
/// request in all, make the read `Unavailable`. A key
/// named twice in one request of 100 is refused as DynamoDB refuses it (`Rejected`).
pub async fn get<T>(
    client: &Client,
    table: &str,
    keys: Vec<Item>,
    consistent: bool,
    decode: impl Fn(&Item) -> StoreResult<Option<T>>,
) -> StoreResult<Vec<T>> {
    let mut decoded = Vec::with_capacity(keys.len());
    let mut keys = keys.into_iter();
    loop {
        let mut pending: Vec<Item> = keys.by_ref().take(MAX_KEYS).collect();
        if pending.is_empty() {
            return Ok(decoded);
        }
        let (mut retries, mut idle) = (0u32, 0u32);
        while !pending.is_empty() {
            if retries > 0 {
                tokio::time::sleep(pause(retries)).await;
            }
            let asked = pending.len();
            let request = KeysAndAttributes::builder()
                .set_keys(Some(pending))
                .consistent_read(consistent)
                .build()
                .map_err(|e| StoreError::Rejected(e.to_string()))?;
            let out =
                client.batch_get_item().request_items(table, request).send().await.map_err(store_error)?;
            let items = out.responses.as_ref().and_then(|r| r.get(table));
            for item in items.into_iter().flatten() {
                decoded.extend(decode(item)?);
            }
            pending =
                out.unprocessed_keys.and_then(|mut u| u.remove(table)).map(|k| k.keys).unwrap_or_default();
            idle = if pending.len() < asked { 0 } else { idle + 1 };
            retries += 1;
            if gives_up(pending.len(), retries, idle) {
                return Err(StoreError::Unavailable(format!(
                    "{} keys of {table} left unprocessed after {retries} batch reads ({idle} in a row without progress)",
                    pending.len()
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_gives_up_after_five_idle_rounds_or_ten_in_all() {
        assert!(!gives_up(0, MAX_ROUNDS, IDLE_ROUNDS), "nothing pending: done, not given up");
        assert!(!gives_up(3, 4, 4));
        assert!(gives_up(3, 5, 5), "five rounds in a row without progress");
        assert!(!gives_up(3, 9, 0), "progress every round, under the bound");
        assert!(gives_up(3, 10, 0), "ten rounds in all, progress or not");
        let worst: u64 = (1..MAX_ROUNDS).map(|r| pause(r).as_millis() as u64).sum();
        assert!(worst < 5_000, "the pauses of a read that gives up: {worst} ms");
    }

    #[test]
    fn pauses_grow_and_are_bounded() {
        let pauses: Vec<u64> = (1..=8).map(|r| pause(r).as_millis() as u64).collect();
        assert_eq!(pauses, [50, 100, 200, 400, 800, 800, 800, 800]);
    }
}
