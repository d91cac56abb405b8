//! The app behind the layer ends a visitor's slot (checkout finished): by the response header
//! [`END_SLOT_HEADER`] or [`Admission::end_slot`](crate::Admission::end_slot). The response
//! future carries a [`Slot`] for each request that holds one and, once the app's response is
//! ready, asks here whether to end it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http::{header, HeaderMap, HeaderName};

use crate::config::defaults::END_SLOT_HEADER;
use crate::config::RoomConfig;
use crate::cookies;
use crate::outcome::{Admission, AdmittedBy};
use crate::session::SessionId;
use crate::store::{Store, StoreFuture};
use crate::telemetry::{EndedBy, RoomMetrics};

/// The slot a passing request holds, and the flag its [`Admission`] shares with the layer.
pub(crate) struct Slot {
    session: SessionId,
    ended: Arc<AtomicBool>,
    /// When the request was passed to the app, if the room samples its latency (auto
    /// capacity).
    pub(crate) started: Option<tokio::time::Instant>,
}

impl Slot {
    /// The slot behind `admission`; `None` for a visitor let in without one (fail open).
    pub(crate) fn of(admission: &Admission) -> Option<Self> {
        (admission.by != AdmittedBy::FailOpen).then(|| Slot {
            session: admission.session,
            ended: admission.ended.clone(),
            started: None,
        })
    }

    /// Whether the app ended the slot (its response had the header, or a handler called
    /// `end_slot`), and how. Both together count as the header.
    pub(crate) fn ended_by(&self, header: bool) -> Option<EndedBy> {
        if header {
            Some(EndedBy::Header)
        } else if self.ended.load(Ordering::Relaxed) {
            Some(EndedBy::Admission)
        } else {
            None
        }
    }

    /// Frees the slot the app ended, and removes the admission cookie on its response: the
    /// token of a slot that is gone would otherwise cost a heartbeat on every request. The queue
    /// cookie stays, its place used up: back later, the visitor joins the end of the line.
    pub(super) fn end(
        &self,
        config: &RoomConfig,
        metrics: &RoomMetrics,
        store: &Arc<dyn Store>,
        by: EndedBy,
        headers: &mut HeaderMap,
    ) -> StoreFuture<bool> {
        let c = &config.cookies;
        headers.append(
            header::SET_COOKIE,
            cookies::clear_cookie(c, &c.admission_name),
        );
        metrics.ended(by);
        store.release(&config.policy, self.session)
    }

    /// Done with: the app's response is ready and the slot was not ended. When nothing else
    /// holds the flag any more (the request and every clone of its admission are gone, as
    /// they are once a handler has answered), nobody can end the slot through it, and it is
    /// kept for this thread's next admission ([`end_flag`]).
    pub(crate) fn done(self) {
        let mut ended = self.ended;
        if let Some(flag) = Arc::get_mut(&mut ended) {
            *flag.get_mut() = false;
            SPARE_FLAGS.with_borrow_mut(|spare| {
                if spare.len() < SPARE_FLAGS_KEPT {
                    spare.push(ended);
                }
            });
        }
    }
}

thread_local! {
    /// End-slot flags that no admission holds any more, for the next admissions made on this
    /// thread: a request on the fast path then allocates no flag of its own (an allocation and
    /// a free per request otherwise, the plumbing's dearest part after the extension insert).
    static SPARE_FLAGS: RefCell<Vec<Arc<AtomicBool>>> = const { RefCell::new(Vec::new()) };
}

/// Spare flags kept per thread at most: enough for the requests one thread has in flight.
const SPARE_FLAGS_KEPT: usize = 64;

/// A new admission's end-slot flag, unset and shared with nobody: a spare one of this thread's
/// if there is one.
pub(crate) fn end_flag() -> Arc<AtomicBool> {
    SPARE_FLAGS.with_borrow_mut(Vec::pop).unwrap_or_default()
}

static END_SLOT: HeaderName = HeaderName::from_static(END_SLOT_HEADER);

/// Removes the end-slot header from the app's response, always: it is meant for the layer
/// only, whatever the request (bypassed, failed open, or holding a slot). Whether it was there.
pub(crate) fn strip_end_slot(headers: &mut HeaderMap) -> bool {
    // An app's response has a handful of headers and nearly never this one: looking at their
    // names is cheaper than the hashed lookup `remove` makes (and runs less code, which over
    // HTTP costs more than the instructions: see docs/benchmarks.md). A longer map goes
    // straight to `remove`.
    if headers.len() <= FEW_HEADERS && !headers.keys().any(|name| *name == END_SLOT) {
        return false;
    }
    // Every value goes (a header repeated is still one request to end the slot).
    headers.remove(&END_SLOT).is_some()
}

/// Up to this many response headers, [`strip_end_slot`] compares names instead of hashing.
const FEW_HEADERS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    /// A response's headers: `n` others, and the end-slot header `times` times among them.
    fn headers(n: usize, times: usize) -> HeaderMap {
        let mut h = HeaderMap::new();
        for i in 0..n {
            h.append(
                HeaderName::try_from(format!("x-other-{i}")).unwrap(),
                "1".parse().unwrap(),
            );
            if i == n / 2 {
                for _ in 0..times {
                    h.append(END_SLOT.clone(), "1".parse().unwrap());
                }
            }
        }
        h
    }

    #[test]
    fn the_end_slot_header_is_always_stripped_however_many_headers_there_are() {
        // Under and over FEW_HEADERS, where it looks by name and where it hashes.
        for n in [1, 3, FEW_HEADERS - 1, FEW_HEADERS + 5, 40] {
            let mut absent = headers(n, 0);
            assert!(!strip_end_slot(&mut absent), "{n} headers");
            assert_eq!(absent.len(), n);
            for times in [1, 2] {
                let mut present = headers(n, times);
                assert!(strip_end_slot(&mut present), "{n} headers, {times} times");
                assert!(
                    !present.contains_key(&END_SLOT),
                    "{n} headers, {times} times"
                );
                assert_eq!(present.len(), n, "the others stay");
            }
        }
        let mut only = HeaderMap::new();
        only.insert(END_SLOT.clone(), "yes".parse().unwrap());
        assert!(strip_end_slot(&mut only) && only.is_empty());
    }

    #[test]
    fn a_flag_serves_again_only_once_nobody_else_holds_it() {
        let slot = |ended: &Arc<AtomicBool>| Slot {
            session: SessionId::random(),
            ended: ended.clone(),
            started: None,
        };
        // Nothing but the slot holds it once the request is answered: the next admission on
        // this thread gets that very flag, unset.
        let flag = end_flag();
        let first = slot(&flag);
        drop(flag);
        let ptr = Arc::as_ptr(&first.ended);
        first.done();
        let again = end_flag();
        assert_eq!(Arc::as_ptr(&again), ptr, "kept for the next admission");
        assert!(!again.load(Ordering::Relaxed));

        // A clone of the admission still alive (a handler kept it): its flag stays its own, so
        // a late `end_slot` through it can reach no other request's slot.
        let kept = again.clone();
        slot(&again).done();
        drop(again);
        let next = end_flag();
        assert!(
            !Arc::ptr_eq(&next, &kept),
            "a flag someone holds is not handed out"
        );
        kept.store(true, Ordering::Relaxed);
        assert!(!next.load(Ordering::Relaxed));
    }
}
