//! The app behind the layer ends a visitor's slot (checkout finished): by the response header
//! [`END_SLOT_HEADER`] or [`Admission::end_slot`](crate::Admission::end_slot). The response
//! future carries a [`Slot`] for each request that holds one and, once the app's response is
//! ready, asks here whether to end it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http::{header, HeaderMap, HeaderName};

use crate::config::defaults::{APP_LOAD_HEADER, END_SLOT_HEADER};
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
static APP_LOAD: HeaderName = HeaderName::from_static(APP_LOAD_HEADER);

/// What the app's response said to the layer, in headers meant for it only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AppSaid {
    /// The end-slot header was there.
    pub(crate) end_slot: bool,
    /// The app's load, 0 to 100, when its header held one.
    pub(crate) load: Option<u8>,
}

/// Removes the headers meant for the layer (end-slot, app load) from the app's response,
/// always: whatever the request (bypassed, failed open, or holding a slot) and whatever the
/// room, clients never see them. What they said.
pub(crate) fn strip_app_headers(headers: &mut HeaderMap) -> AppSaid {
    // An app's response has a handful of headers and nearly never these: looking at their
    // names is cheaper than the hashed lookup `remove` makes (and runs less code, which over
    // HTTP costs more than the instructions: see docs/benchmarks.md). A longer map goes
    // straight to `remove`.
    if headers.len() <= FEW_HEADERS
        && !headers
            .keys()
            .any(|name| *name == END_SLOT || *name == APP_LOAD)
    {
        return AppSaid::default();
    }
    // Every value goes (a header repeated is still one request to end the slot; a load said
    // twice is read from the first).
    let end_slot = headers.remove(&END_SLOT).is_some();
    let load = headers
        .remove(&APP_LOAD)
        .and_then(|v| load_of(v.as_bytes()));
    AppSaid { end_slot, load }
}

/// A load as the app writes it: 1 to 3 ASCII digits, at most 100.
fn load_of(value: &[u8]) -> Option<u8> {
    if value.is_empty() || value.len() > 3 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = value.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    u8::try_from(n).ok().filter(|&n| n <= 100)
}

/// Up to this many response headers, [`strip_app_headers`] compares names instead of hashing.
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
            assert_eq!(
                strip_app_headers(&mut absent),
                AppSaid::default(),
                "{n} headers"
            );
            assert_eq!(absent.len(), n);
            for times in [1, 2] {
                let mut present = headers(n, times);
                assert!(
                    strip_app_headers(&mut present).end_slot,
                    "{n} headers, {times} times"
                );
                assert!(
                    !present.contains_key(&END_SLOT),
                    "{n} headers, {times} times"
                );
                assert_eq!(present.len(), n, "the others stay");
            }
        }
        let mut only = HeaderMap::new();
        only.insert(END_SLOT.clone(), "yes".parse().unwrap());
        assert!(strip_app_headers(&mut only).end_slot && only.is_empty());
    }

    #[test]
    fn the_app_load_is_read_strictly_and_always_stripped() {
        for n in [1, FEW_HEADERS + 5] {
            for (value, load) in [
                ("0", Some(0)),
                ("85", Some(85)),
                ("100", Some(100)),
                ("101", None),
                ("999", None),
                ("-1", None),
                (" 50", None),
                ("50%", None),
                ("0x10", None),
                ("", None),
                ("1000", None),
                ("00085", None),
            ] {
                let mut h = headers(n, 0);
                h.append(APP_LOAD.clone(), value.parse().unwrap());
                let said = strip_app_headers(&mut h);
                assert_eq!(said.load, load, "{value:?}, {n} headers");
                assert!(!said.end_slot);
                assert!(
                    !h.contains_key(&APP_LOAD),
                    "{value:?}: stripped all the same"
                );
                assert_eq!(h.len(), n);
            }
        }
        // Said twice: both go, the first one counts.
        let mut twice = HeaderMap::new();
        twice.append(APP_LOAD.clone(), "90".parse().unwrap());
        twice.append(APP_LOAD.clone(), "10".parse().unwrap());
        twice.append(END_SLOT.clone(), "1".parse().unwrap());
        let said = strip_app_headers(&mut twice);
        assert_eq!((said.end_slot, said.load), (true, Some(90)));
        assert!(twice.is_empty());
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
