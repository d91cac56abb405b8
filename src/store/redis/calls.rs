//! The room library's functions and their arguments: one struct per function (or per family of
//! functions that take the same arguments), whose fields, in their declared order, are the
//! function's `ARGV` as its header in the script names them (`script/visitor.lua`,
//! `script/sync.lua`, `script/operator.lua`, `script/tickets.lua`). Every room function takes
//! the call's four arguments first ([`Call`], `script/call.lua`) and, for a room with a
//! schedule, the schedule last; the [`room_args!`] macro writes both around the fields, so each
//! order is declared once. The tickets' functions take their own fields only
//! ([`ticket_args!`]). A unit test holds each `FIELDS` to its function's header, and every
//! registered function to its struct.

use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::{
    TicketNonce, ADMISSION_BUCKETS, ADMISSION_BUCKET_MS, FIVE_MINUTE_BUCKETS,
    MAX_PROMOTIONS_PER_CALL, MAX_SWEEP_PER_CALL, MINUTE_BUCKETS,
};

/// The library's name, its version in it: `FUNCTION LOAD` answers it, and every function's
/// name starts with it (`script/keys.lua`'s first line says it too).
pub(crate) const LIBRARY: &str = "twr_room_v8";

/// The function of a newcomer's enter ([`VisitorOp::Join`]), the benchmark's.
pub(crate) const JOIN_FUNCTION: &str = "twr_room_v8_join";

/// `now` when the store has no clock of its own: the script reads the server's `TIME`, one
/// clock for every gateway.
pub(crate) const NOW_FROM_SERVER: u64 = 0;

/// `line_numbers` and `room_numbers` ([`Call`]): the room's policy and the crate's bounds, each a string of numbers
/// joined by `:` (Redis makes a string of every argument, and the script's Lua another, on
/// every call: thirteen of them cost a short call more than one of its commands). The first
/// holds the three the script's fast path needs (`max_queue_len`, `queue_ttl`, the effective
/// `abandon_after`), whose string its window is kept for; the second the ten only main reads.
pub(crate) fn packed_numbers(policy: &RoomPolicy) -> [String; 2] {
    let [capacity, rate, active, grant, queue_ttl, max_queue, promote, sweep, bucket, ring, minute, five, abandon] =
        numbers(policy);
    let join = |ns: &[u64]| {
        let mut text = String::with_capacity(ns.len() * 8);
        for (i, n) in ns.iter().enumerate() {
            if i > 0 {
                text.push(':');
            }
            text.push_str(&n.to_string());
        }
        text
    };
    [
        join(&[max_queue, queue_ttl, abandon]),
        join(&[
            capacity, rate, active, grant, promote, sweep, bucket, ring, minute, five,
        ]),
    ]
}

/// The room's policy and the crate's bounds: what [`packed_numbers`] sends.
fn numbers(policy: &RoomPolicy) -> [u64; 13] {
    [
        u64::from(policy.capacity),
        u64::from(policy.admission_rate.unwrap_or(0)),
        policy.active_ttl_ms,
        policy.grant_ttl_ms,
        policy.queue_ttl_ms,
        policy.max_queue_len,
        u64::from(MAX_PROMOTIONS_PER_CALL),
        u64::from(MAX_SWEEP_PER_CALL),
        ADMISSION_BUCKET_MS,
        ADMISSION_BUCKETS,
        MINUTE_BUCKETS,
        FIVE_MINUTE_BUCKETS,
        policy.effective_abandon_after_ms(),
    ]
}

/// The time a call of the crate's functions names (`script/time.lua`): a room call's ARGV 1,
/// a ticket call's ARGV 2, matching's calls' too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Now {
    /// The server's `TIME` (`0`): one clock for every gateway.
    Server,
    /// The gateway's own clock in ms; the library refuses a call whose time is more than a
    /// second from the server's (`WRCLOCK`).
    Sent(u64),
    /// A manual clock that tests move by hand, in ms (`m<ms>`): taken as it is.
    Manual(u64),
}

impl std::fmt::Display for Now {
    /// As the library reads it (`script/time.lua`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Now::Server => write!(f, "{NOW_FROM_SERVER}"),
            // 0 would read as the server's time.
            Now::Sent(ms) => write!(f, "{}", ms.max(1)),
            Now::Manual(ms) => write!(f, "m{}", ms.max(1)),
        }
    }
}

impl Arg for Now {
    fn write(self, argv: &mut Vec<Vec<u8>>) {
        argv.push(self.to_string().into_bytes());
    }
}

/// The arguments every function takes first (`script/call.lua`).
pub(crate) struct Call {
    /// The time ([`Now`]).
    pub(crate) now: Now,
    /// `<max_queue_len>:<queue_ttl_ms>:<abandon_after_ms>`
    /// ([`packed_numbers`](packed_numbers)).
    pub(crate) line_numbers: String,
    /// The ten numbers only main reads, packed likewise.
    pub(crate) room_numbers: String,
    /// Silence excused: this gateway failed to reach the store within the last queue_ttl.
    pub(crate) excused: bool,
}

impl Call {
    /// The names of [`Call`]'s fields in their order, as the headers list them.
    pub(crate) const FIELDS: [&'static str; 4] = ["now", "line_numbers", "room_numbers", "excused"];

    fn write(self, argv: &mut Vec<Vec<u8>>) {
        self.now.write(argv);
        self.line_numbers.write(argv);
        self.room_numbers.write(argv);
        self.excused.write(argv);
    }
}

/// One argument as the script reads it: numbers and flags as decimal text, ids as their raw
/// bytes, lists as built.
pub(crate) trait Arg {
    fn write(self, argv: &mut Vec<Vec<u8>>);
}

impl Arg for u64 {
    fn write(self, argv: &mut Vec<Vec<u8>>) {
        argv.push(self.to_string().into_bytes());
    }
}

impl Arg for i64 {
    fn write(self, argv: &mut Vec<Vec<u8>>) {
        argv.push(self.to_string().into_bytes());
    }
}

impl Arg for bool {
    fn write(self, argv: &mut Vec<Vec<u8>>) {
        argv.push(vec![if self { b'1' } else { b'0' }]);
    }
}

impl Arg for String {
    fn write(self, argv: &mut Vec<Vec<u8>>) {
        argv.push(self.into_bytes());
    }
}

impl Arg for Vec<u8> {
    fn write(self, argv: &mut Vec<Vec<u8>>) {
        argv.push(self);
    }
}

impl Arg for SessionId {
    /// The member of every zset: the id's 16 raw bytes.
    fn write(self, argv: &mut Vec<Vec<u8>>) {
        argv.push(self.as_bytes().to_vec());
    }
}

impl Arg for TicketNonce {
    /// As the ticket record keeps it: 32 lowercase hex digits.
    fn write(self, argv: &mut Vec<Vec<u8>>) {
        argv.push(self.to_string().into_bytes());
    }
}

/// A function's arguments: the struct with [`Call`] first, the fields in their `ARGV` order,
/// and the schedule last; `FIELDS`, their names; `argv`, the arguments in that order.
macro_rules! room_args {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        pub(crate) struct $name {
            /// `ARGV` 1 to 4.
            pub(crate) call: Call,
            $($(#[$fmeta])* pub(crate) $field: $ty,)*
            /// Last, only for a room with a schedule
            /// ([`schedule_arg`](super::protocol::schedule_arg)).
            pub(crate) schedule: Option<String>,
        }

        impl $name {
            /// The names of the `ARGV` in their order, as the function's header lists them.
            #[cfg_attr(not(test), allow(dead_code))]
            pub(crate) const FIELDS: &'static [&'static str] = &[
                Call::FIELDS[0],
                Call::FIELDS[1],
                Call::FIELDS[2],
                Call::FIELDS[3],
                $(stringify!($field),)*
                "schedule",
            ];

            /// The `ARGV`, in [`Self::FIELDS`] order (the schedule only when there is one).
            pub(crate) fn argv(self) -> Vec<Vec<u8>> {
                let mut argv = Vec::with_capacity(Self::FIELDS.len());
                self.call.write(&mut argv);
                $(Arg::write(self.$field, &mut argv);)*
                if let Some(schedule) = self.schedule {
                    schedule.write(&mut argv);
                }
                argv
            }
        }
    };
}

/// A ticket function's arguments (`script/tickets.lua`): the struct with the fields in their
/// `ARGV` order, nothing around them (no [`Call`], no schedule: a ticket call reads the record
/// alone); `FUNCTION`, the registered function; `FIELDS` and `argv` as [`room_args!`]'s.
macro_rules! ticket_args {
    ($(#[$meta:meta])* $name:ident = $function:literal { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        pub(crate) struct $name {
            $($(#[$fmeta])* pub(crate) $field: $ty,)*
        }

        impl $name {
            pub(crate) const FUNCTION: &'static str = $function;

            /// The names of the `ARGV` in their order, as the function's header lists them.
            #[cfg_attr(not(test), allow(dead_code))]
            pub(crate) const FIELDS: &'static [&'static str] = &[$(stringify!($field),)*];

            /// The `ARGV`, in [`Self::FIELDS`] order.
            pub(crate) fn argv(self) -> Vec<Vec<u8>> {
                let mut argv = Vec::with_capacity(Self::FIELDS.len());
                $(Arg::write(self.$field, &mut argv);)*
                argv
            }
        }
    };
}

/// The functions that take a visitor's session and nothing else of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VisitorOp {
    Enter,
    /// An enter by a visitor whose cookie has no place ([`Store::join`]): the fast path takes
    /// a number first; main answers it as an enter.
    ///
    /// [`Store::join`]: crate::store::Store::join
    Join,
    Poll,
    Heartbeat,
    Release,
}

impl VisitorOp {
    /// The registered function's name (`script/register.lua`).
    pub(crate) fn function(self) -> &'static str {
        match self {
            VisitorOp::Enter => "twr_room_v8_enter",
            VisitorOp::Join => JOIN_FUNCTION,
            VisitorOp::Poll => "twr_room_v8_poll",
            VisitorOp::Heartbeat => "twr_room_v8_heartbeat",
            VisitorOp::Release => "twr_room_v8_release",
        }
    }
}

room_args! {
    /// `twr_room_v8_enter`, `_join`, `_poll`, `_heartbeat`, `_release` (`script/visitor.lua`).
    Visitor {
        /// The visitor.
        session: SessionId,
    }
}

room_args! {
    /// `twr_room_v8_sync` (`script/sync.lua`): a gateway's check-ins and its snapshot. The
    /// lists of offsets are [`offsets_arg`](super::protocol::offsets_arg)'s.
    Sync {
        /// The sessions looked up, 16 raw bytes each ([`seen_arg`](super::protocol::seen_arg)).
        sessions: Vec<u8>,
        /// Found in line, set in neither ring's current epoch: written into both.
        both: Vec<u8>,
        /// The turn ring's epoch in which this gateway set bits (`checked_in.rs`), or empty.
        turn_epoch: Vec<u8>,
        /// The abandon ring's, likewise.
        abandon_epoch: Vec<u8>,
        /// Set in the abandon ring's named epoch only.
        turn_only: Vec<u8>,
        /// Set in both named epochs.
        neither: Vec<u8>,
        /// The offsets of `sessions`, in their order.
        offsets: Vec<u8>,
        /// Behind the turn horizon, set in neither.
        abandon_only: Vec<u8>,
        /// Behind the turn horizon, set in the abandon ring's named epoch.
        behind_set: Vec<u8>,
        /// `<n> <horizon>`, the first `n` of `sessions` ahead of it; empty for none.
        horizon: Vec<u8>,
    }
}

room_args! {
    /// `twr_room_v8_stats` (`script/operator.lua`).
    Stats {
        /// Minutes of admissions history in the reply.
        history_minutes: u64,
    }
}

room_args! {
    /// `twr_room_v8_configure` (`script/operator.lua`): -1 (0 for the capacity) leaves a
    /// setting as it is ([`configure`](super::protocol::configure)).
    Configure {
        capacity: i64,
        /// Admissions per second, 0 = none.
        rate: i64,
        paused: i64,
        open: i64,
        /// On closing, end the slots too.
        end_slots: bool,
    }
}

room_args! {
    /// `twr_room_v8_admit_next` (`script/operator.lua`).
    AdmitNext {
        /// How many to let in.
        count: u64,
    }
}

room_args! {
    /// `twr_room_v8_ban` (`script/operator.lua`).
    Ban {
        session: SessionId,
        /// The end of the ban in ms.
        until_ms: i64,
    }
}

ticket_args! {
    /// `twr_room_v8_ticket_mint`: the session's ticket, made or kept.
    TicketMint = "twr_room_v8_ticket_mint" {
        /// Stored as the ticket's if the session has no live record and this is the
        /// admission's first mint.
        nonce: TicketNonce,
        /// The time ([`Now`]), held to the server's as a room call's is.
        now: Now,
        /// The record's expiry in ms (the slot's), at most 2^53 (a Lua number is a double).
        expires_at: u64,
        /// The admission goes on ([`MintFor::Renewal`](crate::store::MintFor::Renewal)): a
        /// missing record was lost, and reads as used.
        renewal: bool,
    }
}

ticket_args! {
    /// `twr_room_v8_ticket_redeem`: the ticket's one use, while its session holds its slot.
    TicketRedeem = "twr_room_v8_ticket_redeem" {
        /// The one the ticket names.
        nonce: TicketNonce,
        /// The time ([`Now`]), held to the server's as a room call's is.
        now: Now,
        /// The session, its 16 raw bytes: the member the room's functions keep in `active`.
        session: SessionId,
    }
}

/// A visitor's call of `op` (`"enter"`, `"join"`, `"poll"`, `"heartbeat"`, `"release"`) with
/// the session as the raw bytes `session` (16 for an id; the benchmark sends a
/// `redis-benchmark` template in their place), `now` the server's clock and silence not
/// excused: for the tests and the benchmark that call the function by hand. Its function's
/// name, and the arguments; `None` for another `op`.
pub(crate) fn visitor_call(
    op: &str,
    policy: &RoomPolicy,
    session: &[u8],
    schedule: Option<String>,
) -> Option<(&'static str, Vec<Vec<u8>>)> {
    let op = match op {
        "enter" => VisitorOp::Enter,
        "join" => VisitorOp::Join,
        "poll" => VisitorOp::Poll,
        "heartbeat" => VisitorOp::Heartbeat,
        "release" => VisitorOp::Release,
        _ => return None,
    };
    let [line_numbers, room_numbers] = packed_numbers(policy);
    let mut argv = Visitor {
        call: Call {
            now: Now::Server,
            line_numbers,
            room_numbers,
            excused: false,
        },
        session: SessionId::from_bytes([0; 16]),
        schedule,
    }
    .argv();
    let at = Visitor::FIELDS.iter().position(|f| *f == "session");
    argv[at.expect("a visitor's ARGV has its session")] = session.to_vec();
    Some((op.function(), argv))
}

impl Sync {
    pub(crate) const FUNCTION: &'static str = "twr_room_v8_sync";
}

impl Stats {
    pub(crate) const FUNCTION: &'static str = "twr_room_v8_stats";
}

impl Configure {
    pub(crate) const FUNCTION: &'static str = "twr_room_v8_configure";
}

impl AdmitNext {
    pub(crate) const FUNCTION: &'static str = "twr_room_v8_admit_next";
}

impl Ban {
    pub(crate) const FUNCTION: &'static str = "twr_room_v8_ban";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script_header::argv_names;
    use crate::store::redis::protocol::SCRIPT;

    #[test]
    fn every_functions_argv_header_matches_its_struct() {
        let visitor = [
            VisitorOp::Enter,
            VisitorOp::Join,
            VisitorOp::Poll,
            VisitorOp::Heartbeat,
            VisitorOp::Release,
        ]
        .map(|op| (op.function(), Visitor::FIELDS));
        let others = [
            (Sync::FUNCTION, Sync::FIELDS),
            (Stats::FUNCTION, Stats::FIELDS),
            (Configure::FUNCTION, Configure::FIELDS),
            (AdmitNext::FUNCTION, AdmitNext::FIELDS),
            (Ban::FUNCTION, Ban::FIELDS),
            (TicketMint::FUNCTION, TicketMint::FIELDS),
            (TicketRedeem::FUNCTION, TicketRedeem::FIELDS),
        ];
        let mut declared = Vec::new();
        for (function, fields) in visitor.into_iter().chain(others) {
            assert!(function.starts_with(&format!("{LIBRARY}_")), "{function}");
            assert_eq!(argv_names(SCRIPT, function), fields, "{function}");
            declared.push(function);
        }
        // Every function the library registers, by whichever of its `register...` helpers: the
        // lines `register...('<name>', ...)` (register.lua). Each helper is the only place its
        // `redis.register_function` is called, so no function is registered another way.
        let mut registered: Vec<&str> = SCRIPT
            .lines()
            .filter_map(|l| {
                let (_, rest) = l.strip_prefix("register")?.split_once("('")?;
                rest.split_once('\'').map(|(name, _)| name)
            })
            .collect();
        assert_eq!(
            SCRIPT.matches("redis.register_function").count(),
            SCRIPT.matches("\nlocal function register").count(),
            "each register helper calls redis.register_function once, and nothing else does"
        );
        registered.sort_unstable();
        declared.sort_unstable();
        assert_eq!(
            registered, declared,
            "every registered function has its struct, and every struct its function"
        );
        assert!(SCRIPT.starts_with(&format!("#!lua name={LIBRARY}\n")));
    }

    /// The time travels as the library reads it (`script/call.lua`): `0` for the server's,
    /// the gateway's own as a number (never `0`, which would read as the server's), a manual
    /// clock tagged `m`.
    #[test]
    fn the_time_travels_tagged_by_whose_clock_it_is() {
        let text = |now: Now| {
            let mut argv = Vec::new();
            now.write(&mut argv);
            String::from_utf8(argv.remove(0)).unwrap()
        };
        assert_eq!(text(Now::Server), "0");
        assert_eq!(text(Now::Sent(1_767_225_600_000)), "1767225600000");
        assert_eq!(text(Now::Sent(0)), "1");
        assert_eq!(text(Now::Manual(42)), "m42");
        assert_eq!(text(Now::Manual(0)), "m1");
    }

    #[test]
    fn the_arguments_go_in_their_declared_order() {
        let call = || Call {
            now: Now::Sent(7),
            line_numbers: "1:2:3".to_owned(),
            room_numbers: "4:5".to_owned(),
            excused: true,
        };
        let s = SessionId::from_bytes([9; 16]);
        let ban = Ban {
            call: call(),
            session: s,
            until_ms: 42,
            schedule: None,
        }
        .argv();
        assert_eq!(
            ban,
            [
                b"7".to_vec(),
                b"1:2:3".to_vec(),
                b"4:5".to_vec(),
                b"1".to_vec(),
                vec![9; 16],
                b"42".to_vec(),
            ]
        );
        let visit = Visitor {
            call: call(),
            session: s,
            schedule: Some("schedule:1:0:1:5".to_owned()),
        }
        .argv();
        assert_eq!(visit.len(), Visitor::FIELDS.len());
        assert_eq!(visit.last().unwrap(), b"schedule:1:0:1:5");
        // A ticket call: its own fields only, the nonce in hex, the session as raw bytes.
        let nonce = TicketNonce::from_hex(&"0a".repeat(16)).unwrap();
        let redeem = TicketRedeem {
            nonce,
            now: Now::Sent(7),
            session: s,
        }
        .argv();
        assert_eq!(
            redeem,
            [b"0a".repeat(16), b"7".to_vec(), vec![9; 16]],
            "{:?}",
            TicketRedeem::FIELDS
        );
    }
}
