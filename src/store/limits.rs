//! What every store takes from a caller, checked the same way by each: the Redis library
//! refuses a call outside these bounds (`script/call.lua`, `WRARGS`), and the embedded store
//! refuses it too rather than overflowing its sums (a lifetime of `u64::MAX` panicked in a
//! debug build, and in a release one wrapped to a slot already over, letting a second visitor
//! in beside the first).

use super::{StoreError, StoreErrorKind, MAX_QUEUE_LEN_LIMIT, MAX_STORED_TTL_MS};
use crate::config::RoomPolicy;

/// The latest time a store keeps (a ban's end): 2^53 ms, the largest whole number Redis' Lua
/// holds exactly, about 285 000 years from the epoch. A later end is kept as this one (a ban
/// "for ever" is one either way).
pub(crate) const LATEST_MS: u64 = 1 << 53;

/// A policy as every store takes it: a capacity of at least one, lifetimes from 1 ms to
/// [`MAX_STORED_TTL_MS`], a longest line from 1 to [`MAX_QUEUE_LEN_LIMIT`]. The builder
/// refuses any other at build time; this is for stores used directly (tools, tests, wrappers).
pub(crate) fn check_policy(policy: &RoomPolicy) -> Result<(), StoreError> {
    let lifetime = |ms: u64| (1..=MAX_STORED_TTL_MS).contains(&ms);
    let within = policy.capacity >= 1
        && (1..=MAX_QUEUE_LEN_LIMIT).contains(&policy.max_queue_len)
        && [
            policy.active_ttl_ms,
            policy.grant_ttl_ms,
            policy.queue_ttl_ms,
            // As the stores take it (and the Redis store sends it): at least `queue_ttl`.
            policy.effective_abandon_after_ms(),
        ]
        .into_iter()
        .all(lifetime);
    if within {
        Ok(())
    } else {
        Err(StoreError::with_source(
            StoreErrorKind::Protocol,
            "a policy outside the store's bounds (a lifetime beyond 7 days, a capacity or a line of 0)",
        ))
    }
}
