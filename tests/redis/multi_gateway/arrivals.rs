//! The arrivals: each visitor's plan, drawn from the seed, its first visit for a queue cookie,
//! and its joining the line.

use super::tools::{wall_ms, Answer, Rng};
use super::visitors::{request, Plan, Shared, Visitor};
use super::{BLOCKERS, HELD_PATIENCE, QUEUE_COOKIE, ROLE_BLOCK, ROOM};
use crate::common::Jar;

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use tower_waiting_room::__private::QueueCookie;
use tower_waiting_room::SessionId;

/// Who in the current block of `ROLE_BLOCK` arrivals vanishes, and who would abandon.
#[derive(Clone, Copy, Default)]
pub(super) struct Roles {
    vanisher: usize,
    abandoner: usize,
}

impl Roles {
    fn draw(rng: &mut Rng) -> Roles {
        let n = ROLE_BLOCK as u64;
        let vanisher = rng.below(n);
        let abandoner = (vanisher + 1 + rng.below(n - 1)) % n;
        Roles {
            vanisher: vanisher as usize,
            abandoner: abandoner as usize,
        }
    }
}

/// The plan of visitor `arrival` (`held`: it joins while the blockers hold the room), and how
/// long it waits before abandoning if its first answer is "waiting" (its plan then becomes
/// `Abandon`). Every draw is made for every visitor, so the seed alone decides who does what.
pub(super) fn plan_for(
    arrival: usize,
    held: bool,
    roles: &mut Roles,
    rng: &mut Rng,
) -> (Plan, Option<Duration>) {
    if arrival >= BLOCKERS && (arrival - BLOCKERS).is_multiple_of(ROLE_BLOCK) {
        *roles = Roles::draw(rng);
    }
    let extra = 1 + rng.below(3) as u32;
    let patience = Duration::from_millis(rng.below(HELD_PATIENCE.as_millis() as u64));
    if arrival < BLOCKERS {
        return (Plan::Block, None);
    }
    let role = (arrival - BLOCKERS) % ROLE_BLOCK;
    if role == roles.vanisher {
        (Plan::Vanish, None)
    } else if role == roles.abandoner {
        // After the hold, more patient: some get in before they would have given up.
        let after = if held {
            patience
        } else {
            patience + Duration::from_millis(500)
        };
        (Plan::Stay { extra }, Some(after))
    } else {
        (Plan::Stay { extra }, None)
    }
}

/// Visitor `arrival`'s first visit: the stateless redirect that hands out its signed queue
/// cookie. It involves no store, so the next visitor's is fetched while one joins.
pub(super) async fn arrive(
    shared: Arc<Shared>,
    arrival: usize,
    plan: Plan,
    mut rng: Rng,
) -> (Visitor, Jar, Rng) {
    let mut v = Visitor {
        arrival,
        plan,
        session: SessionId::from_bytes([0; 16]),
        queue_cookie: String::new(),
        waits: 0,
        last_wait_sent: None,
        admitted_at: None,
        abandoned: false,
        lapsed: false,
        longest_gap: Duration::ZERO,
        gone_at: None,
        fresh_admissions: 0,
        extensions: 0,
        lost_slot: 0,
        after_leave: None,
        unavailable: 0,
        errors: 0,
        problems: Vec::new(),
    };
    let mut jar = Jar::default();
    let first = request(&shared, &mut v, &mut rng, Method::GET, "/", None)
        .await
        .expect("the first visit is answered");
    assert_eq!(
        first.reply.status,
        StatusCode::FOUND,
        "a first visit is redirected: {}",
        first.describe()
    );
    jar.absorb(&first.reply);
    v.queue_cookie = jar
        .get(QUEUE_COOKIE)
        .expect("a queue cookie on the first visit")
        .to_owned();
    v.session = QueueCookie::verify(&shared.keys, ROOM, &v.queue_cookie, wall_ms())
        .expect("the queue cookie verifies with the shared key")
        .session();
    (v, jar, rng)
}

/// Joins a visitor who has its queue cookie: its first store answer. Visitors join strictly one
/// after another, so their arrival order is the order the store saw them in.
pub(super) async fn join(
    shared: &Shared,
    mut v: Visitor,
    jar: Jar,
    abandon: Option<Duration>,
    rng: &mut Rng,
) -> (Visitor, Jar, Answer) {
    let cookies = jar.header();
    let answer = request(shared, &mut v, rng, Method::GET, "/", cookies.as_ref())
        .await
        .expect("the first store answer");
    // Abandoning is planned only among those known to wait: a first answer "waiting".
    if let (Some(after), StatusCode::TOO_MANY_REQUESTS) = (abandon, answer.reply.status) {
        v.plan = Plan::Abandon { after };
    }
    (v, jar, answer)
}
