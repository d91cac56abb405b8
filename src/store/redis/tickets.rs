//! Single-use tickets on Redis: one key per session in the room's hash tag, and two functions of
//! the room's library (`script/tickets.lua`, their arguments [`TicketMint`] and
//! [`TicketRedeem`]), called through the store's one call path (deadline, circuit breaker,
//! error classes, the library loaded when the server has no such function).

use super::calls::{TicketMint, TicketRedeem};
use super::RedisStore;
use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::limits::LATEST_MS;
use crate::store::{
    MintFor, Minted, Redeemed, StoreError, StoreErrorKind, StoreFuture, TicketNonce,
};

/// The key of `session`'s ticket in `room`: `{prefix}:{room}:tk:<session>`, the room as the hash
/// tag, as the room's own keys.
pub(crate) fn ticket_key(prefix: &str, room: &str, session: SessionId) -> String {
    format!("{prefix}:{{{room}}}:tk:{session}")
}

/// The room's claimed slots (the room's `active` key), which a redeem reads.
fn active_key(prefix: &str, room: &str) -> String {
    format!("{prefix}:{{{room}}}:active")
}

impl RedisStore {
    pub(super) fn mint(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
    ) -> StoreFuture<Minted> {
        let args = TicketMint {
            nonce: fresh,
            now: self.call_now(),
            // Lua numbers are doubles: an expiry beyond 2^53 ms (year 287 396) is no real one.
            expires_at: expires_at_ms.min(LATEST_MS),
            renewal: mint_for == MintFor::Renewal,
        }
        .argv();
        let keys = vec![ticket_key(self.prefix(), &policy.room, session)];
        let call: StoreFuture<Vec<String>> =
            self.run_room(TicketMint::FUNCTION, policy, keys, args);
        Box::pin(async move {
            let reply = call.await?;
            match reply.as_slice() {
                [state] if state == "used" => Ok(Minted::Used),
                [state, nonce, expires] if state == "ticket" => {
                    match (TicketNonce::from_hex(nonce), expires.parse()) {
                        (Some(nonce), Ok(expires_at_ms)) => Ok(Minted::Ticket {
                            nonce,
                            expires_at_ms,
                        }),
                        _ => Err(unexpected(&reply)),
                    }
                }
                _ => Err(unexpected(&reply)),
            }
        })
    }

    pub(super) fn redeem(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        nonce: TicketNonce,
    ) -> StoreFuture<Redeemed> {
        let args = TicketRedeem {
            nonce,
            now: self.call_now(),
            session,
        }
        .argv();
        let keys = vec![
            ticket_key(self.prefix(), &policy.room, session),
            active_key(self.prefix(), &policy.room),
        ];
        let call: StoreFuture<Vec<String>> =
            self.run_room(TicketRedeem::FUNCTION, policy, keys, args);
        Box::pin(async move {
            let reply = call.await?;
            match reply.as_slice() {
                [state] if state == "accepted" => Ok(Redeemed::Accepted),
                [state] if state == "used" => Ok(Redeemed::Used),
                [state] if state == "unknown" => Ok(Redeemed::Unknown),
                [state] if state == "slot_ended" => Ok(Redeemed::SlotEnded),
                _ => Err(unexpected(&reply)),
            }
        })
    }
}

fn unexpected(reply: &[String]) -> StoreError {
    StoreError::with_source(
        StoreErrorKind::Protocol,
        format!("unexpected ticket function reply {reply:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ticket_key_shares_the_rooms_hash_tag() {
        let session = SessionId::from_bytes([0xab; 16]);
        let key = ticket_key("twr", "shop", session);
        assert_eq!(key, format!("twr:{{shop}}:tk:{}", "ab".repeat(16)));
        let room_keys = crate::store::redis::protocol::keys("twr", "shop");
        assert!(room_keys[0].starts_with("twr:{shop}:"), "{}", room_keys[0]);
        // The redeem reads the very key the room's functions keep their claimed slots in.
        let active = crate::store::redis::protocol::KEY_NAMES
            .iter()
            .position(|k| *k == "active")
            .unwrap();
        assert_eq!(active_key("twr", "shop"), room_keys[active]);
    }
}
