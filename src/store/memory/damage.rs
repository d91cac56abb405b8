//! The conformance suite's damage to a room, done to the embedded store's values as the Redis
//! harness does it to the keys with real commands. The script's repair of a damaged room is in
//! `src/store/redis/script/main.lua`; here most damage needs none (typed values), and each step
//! tolerates the rest as the script does.

use std::sync::Arc;

use super::liveness::Liveness;
use super::pace::Bucket;
use super::{lock, MemoryStore};
use crate::store::snapshot::LivenessRule;
use crate::store::AdmissionRing;

impl MemoryStore {
    /// Test hook for the conformance suite's damage cases: does `damage` to `room`'s state,
    /// as the Redis harness does with real commands. `Err(reason)` for damage a store of typed
    /// Rust values cannot suffer.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn __damage(
        &self,
        room: &str,
        damage: crate::store::damage::Damage,
    ) -> Result<(), &'static str> {
        use crate::store::damage::{Damage, Field, Part};
        const TYPED: &str = "the embedded store's parts are typed Rust values: they cannot hold \
                             a value of the wrong type or a number that is not a number";
        const INTEGER_PLACES: &str = "the embedded store holds places in line as integers: \
                                      they cannot hold a damaged number";
        let name: Arc<str> = Arc::from(room);
        let room = self.room(&name);
        let mut r = lock(&room);
        match damage {
            Damage::Lost(part) => match part {
                Part::Seq => r.waiters.forget_last_seq(),
                Part::Line => r.waiters.clear_places(),
                Part::Seen => r.waiters.clear_check_ins(),
                Part::Active => r.active.clear(),
                Part::Granted => r.granted.clear(),
                Part::Bucket => r.bucket = Bucket::default(),
                Part::Admitted => r.admissions = AdmissionRing::default(),
                Part::Settings => {
                    r.settings = None;
                    r.born = None;
                    r.capacity_change = None;
                    r.paused_at = None;
                    r.last_pause = None;
                    r.admitted_early = 0;
                    r.first_move = None;
                    r.kept_schedule = None;
                }
                Part::Banned => r.banned.clear(),
                Part::Arrivals => {
                    return Err("the embedded store keeps each waiter's arrival with its place")
                }
            },
            Damage::WrongType(_) | Damage::NotANumber(_) => return Err(TYPED),
            Damage::SettingsVersion(_) | Damage::NewerAdditiveSettings(_) => {
                return Err("the embedded store's settings are this crate's own Rust value")
            }
            // A typed value holds no text: what a strict reader makes of a damaged number (none
            // in range, stored.lua) is a value out of the field's range, where its type has one.
            Damage::BadNumber(Field::Capacity, _) => {
                if let Some(s) = r.settings.as_mut() {
                    s.capacity = 0;
                }
            }
            Damage::BadNumber(Field::Rate, _) => {
                if let Some(s) = r.settings.as_mut() {
                    s.admission_rate = Some(0);
                }
            }
            Damage::BadNumber(..) => return Err(TYPED),
            Damage::Place(..) => return Err(INTEGER_PLACES),
            Damage::BucketFieldLost => {
                return Err("the embedded budget is one Rust value: it has no field to lose")
            }
            Damage::CheckInLost(s) => r.waiters.remove_check_in(s),
            Damage::StrayCheckIn(s, at) => {
                // By the rules of the room's last call (a room never called: epochs of 1 ms).
                let rules = r.liveness.unwrap_or(Liveness {
                    turn: LivenessRule {
                        width_ms: 1,
                        keep: 0,
                    },
                    abandon: LivenessRule {
                        width_ms: 1,
                        keep: 0,
                    },
                });
                r.waiters.check_in(s, rules.at(at));
            }
            Damage::SlotHolderInLine(s) => r.waiters.push(s),
            // The room's lock, then the tickets', as a redeem takes them.
            Damage::TicketLost(s) => lock(&self.tickets).lose(&name, s),
        }
        Ok(())
    }
}
