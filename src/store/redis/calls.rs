//! The room library's functions and their arguments: one struct per function (or per family of
//! functions that take the same arguments), whose fields, in their declared order, are the
//! function's `ARGV` as its header in the script names them (`script/visitor.lua`,
//! `script/sync.lua`, `script/operator.lua`, `script/tickets.lua`, `script/auto.lua`). Every
//! room function takes the call's four arguments first ([`Call`], `script/call.lua`) and, for a
//! room with a schedule, the schedule last; the `room_args!` macro writes both around the
//! fields, so each order is declared once. The functions on a record alone (the tickets', the
//! capacity controller's report and switch) take their own fields only (`record_args!`). Unit
//! tests hold each `FIELDS` to its function's header, every registered function to its struct
//! and its count of arguments, the packed numbers ([`Number`]) to the order the script unpacks
//! them in, and the library's name (`library!`) to the script's.

use crate::config::RoomPolicy;
use crate::session::SessionId;
use crate::store::{
    GatewayId, TicketNonce, ADMISSION_BUCKETS, ADMISSION_BUCKET_MS, FIVE_MINUTE_BUCKETS,
    MAX_PROMOTIONS_PER_CALL, MAX_SWEEP_PER_CALL, MINUTE_BUCKETS,
};

/// The library's name, its version in it: `FUNCTION LOAD` answers it, and every function's
/// name starts with it. Written once here, as a macro so that `function_name!` can `concat!`
/// it into each function's name at compile time; the script writes it once too
/// (`script/keys.lua`: its `#!lua` line, which Redis reads as it is, and its `LIBRARY`, from which
/// `script/register.lua` names every function). A unit test holds the three equal.
macro_rules! library {
    () => {
        "twr_room_v11"
    };
}

/// The registered function of the operation `$op`: `<LIBRARY>_<op>`, as `script/register.lua`
/// names it.
macro_rules! function_name {
    ($op:literal) => {
        concat!(library!(), "_", $op)
    };
}

/// The library's name (`library!`).
pub(crate) const LIBRARY: &str = library!();

/// The function of a newcomer's enter ([`VisitorOp::Join`]), the benchmark's.
pub(crate) const JOIN_FUNCTION: &str = function_name!("join");

/// `now` when the store has no clock of its own: the script reads the server's `TIME`, one
/// clock for every gateway.
pub(crate) const NOW_FROM_SERVER: u64 = 0;

/// `line_numbers` and `room_numbers` ([`Call`]): the room's policy and the crate's bounds, each a
/// string of numbers joined by `:` (Redis makes a string of every argument, and the script's Lua
/// another, on every call: thirteen of them cost a short call more than one of its commands).
/// The first holds the three the script's fast path needs ([`Number::LINE`]), whose string its
/// window is kept for; the second the ten only main reads ([`Number::ROOM`]).
pub(crate) fn packed_numbers(policy: &RoomPolicy) -> [String; 2] {
    let join = |numbers: &[Number]| {
        let mut text = String::with_capacity(numbers.len() * 8);
        for (i, n) in numbers.iter().enumerate() {
            if i > 0 {
                text.push(':');
            }
            text.push_str(&n.of(policy).to_string());
        }
        text
    };
    [join(&Number::LINE), join(&Number::ROOM)]
}

/// The numbers [`packed_numbers`] sends for `policy`, as numbers: what tells two policies' calls
/// apart without formatting them.
pub(crate) fn policy_numbers(policy: &RoomPolicy) -> [u64; 13] {
    let mut out = [0; 13];
    for (slot, n) in out.iter_mut().zip(Number::LINE.iter().chain(&Number::ROOM)) {
        *slot = n.of(policy);
    }
    out
}

/// One of the numbers [`packed_numbers`] sends: the room's policy and the crate's bounds. Their
/// order is [`Number::LINE`]'s and [`Number::ROOM`]'s, which a unit test holds to the names
/// `F.setup` (`script/call.lua`) unpacks them into ([`Number::name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Number {
    MaxQueue,
    QueueTtl,
    /// The effective `abandon_after` (the script takes at least `queue_ttl` of it, too).
    Abandon,
    Capacity,
    /// Admissions per second, 0 = none.
    Rate,
    Active,
    Grant,
    Promote,
    Sweep,
    Bucket,
    Ring,
    Minute,
    Five,
}

impl Number {
    /// `line_numbers`, in their order.
    pub(crate) const LINE: [Number; 3] = [Number::MaxQueue, Number::QueueTtl, Number::Abandon];

    /// `room_numbers`, in their order.
    pub(crate) const ROOM: [Number; 10] = [
        Number::Capacity,
        Number::Rate,
        Number::Active,
        Number::Grant,
        Number::Promote,
        Number::Sweep,
        Number::Bucket,
        Number::Ring,
        Number::Minute,
        Number::Five,
    ];

    /// The local `F.setup` unpacks it into (`script/call.lua`).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn name(self) -> &'static str {
        match self {
            Number::MaxQueue => "max_queue",
            Number::QueueTtl => "queue_ttl",
            Number::Abandon => "abandon",
            Number::Capacity => "capacity",
            Number::Rate => "rate",
            Number::Active => "active",
            Number::Grant => "grant",
            Number::Promote => "promote",
            Number::Sweep => "sweep",
            Number::Bucket => "bucket",
            Number::Ring => "ring",
            Number::Minute => "minute",
            Number::Five => "five",
        }
    }

    /// Its value for `policy`.
    fn of(self, policy: &RoomPolicy) -> u64 {
        match self {
            Number::MaxQueue => policy.max_queue_len,
            Number::QueueTtl => policy.queue_ttl_ms,
            Number::Abandon => policy.effective_abandon_after_ms(),
            Number::Capacity => u64::from(policy.capacity),
            Number::Rate => u64::from(policy.admission_rate.unwrap_or(0)),
            Number::Active => policy.active_ttl_ms,
            Number::Grant => policy.grant_ttl_ms,
            Number::Promote => u64::from(MAX_PROMOTIONS_PER_CALL),
            Number::Sweep => u64::from(MAX_SWEEP_PER_CALL),
            Number::Bucket => ADMISSION_BUCKET_MS,
            Number::Ring => ADMISSION_BUCKETS,
            Number::Minute => MINUTE_BUCKETS,
            Number::Five => FIVE_MINUTE_BUCKETS,
        }
    }
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
    /// ([`packed_numbers`]).
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
    /// The id's 16 raw bytes, of which the script keeps the first 14 as the session's member in
    /// a room of settings version 6, all 16 in a room of version 5 (`script/settings.lua`,
    /// Settings: members).
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

impl Arg for GatewayId {
    /// As the controller's record keeps it: 16 lowercase hex digits.
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

/// The arguments of a function on a record alone (`script/tickets.lua`, `script/auto.lua`): the
/// struct with the fields in their `ARGV` order, nothing around them (no [`Call`], no schedule:
/// such a call reads its record alone); `FUNCTION`, the registered function; `FIELDS` and
/// `argv` as `room_args!`'s.
macro_rules! record_args {
    ($(#[$meta:meta])* $name:ident = $function:literal { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        pub(crate) struct $name {
            $($(#[$fmeta])* pub(crate) $field: $ty,)*
        }

        impl $name {
            pub(crate) const FUNCTION: &'static str = function_name!($function);

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
            VisitorOp::Enter => function_name!("enter"),
            VisitorOp::Join => JOIN_FUNCTION,
            VisitorOp::Poll => function_name!("poll"),
            VisitorOp::Heartbeat => function_name!("heartbeat"),
            VisitorOp::Release => function_name!("release"),
        }
    }
}

room_args! {
    /// `<LIBRARY>_enter`, `_join`, `_poll`, `_heartbeat`, `_release` (`script/visitor.lua`).
    Visitor {
        /// The visitor.
        session: SessionId,
    }
}

room_args! {
    /// `<LIBRARY>_sync` (`script/sync.lua`): a gateway's check-ins and its snapshot. The
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
        /// The offsets of `sessions` but the last `m` of `horizon`, in their order.
        offsets: Vec<u8>,
        /// Behind the turn horizon, set in neither.
        abandon_only: Vec<u8>,
        /// Behind the turn horizon, set in the abandon ring's named epoch.
        behind_set: Vec<u8>,
        /// `<n> <horizon> <m>`, the first `n` of `sessions` ahead of it and the last `m` behind
        /// it with their bits set in the abandon ring's named epoch (looked up only: their
        /// offsets are in `behind_set`, not `offsets`); empty for none.
        horizon: Vec<u8>,
        /// Found in line, due to be written early into the abandon ring's next epoch
        /// (`early.rs`).
        early: Vec<u8>,
    }
}

room_args! {
    /// `<LIBRARY>_join_batch` (`script/batch.lua`): the joins of a batch of newcomers, in one
    /// call (`batch.rs`). Never with a schedule.
    JoinBatch {
        /// The newcomers' ids, 16 raw bytes each, in the order the store received them.
        sessions: Vec<u8>,
    }
}

room_args! {
    /// `<LIBRARY>_stats` (`script/operator.lua`).
    Stats {
        /// Minutes of admissions history in the reply.
        history_minutes: u64,
    }
}

room_args! {
    /// `<LIBRARY>_configure` (`script/operator.lua`): -1 (0 for the capacity) leaves a
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
    /// `<LIBRARY>_admit_next` (`script/operator.lua`).
    AdmitNext {
        /// How many to let in.
        count: u64,
    }
}

room_args! {
    /// `<LIBRARY>_ban` (`script/operator.lua`).
    Ban {
        session: SessionId,
        /// The end of the ban in ms.
        until_ms: i64,
    }
}

record_args! {
    /// `<LIBRARY>_ticket_mint`: the session's ticket, made or kept.
    TicketMint = "ticket_mint" {
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

record_args! {
    /// `<LIBRARY>_ticket_redeem`: the ticket's one use, while its session holds its slot.
    TicketRedeem = "ticket_redeem" {
        /// The one the ticket names.
        nonce: TicketNonce,
        /// The time ([`Now`]), held to the server's as a room call's is.
        now: Now,
        /// The session, its 16 raw bytes (its member in `active`, as the room keeps it: the
        /// script looks both forms up).
        session: SessionId,
    }
}

room_args! {
    /// `<LIBRARY>_auto_apply` (`script/auto.lua`): the capacity controller's decision, written
    /// as `configure` writes a capacity, if the gateway still decides.
    AutoApply {
        /// The decider.
        gateway: GatewayId,
        /// At least 1.
        capacity: u64,
        /// The admission rate to write with it, at least 1; -1 leaves it as it is.
        rate: i64,
        /// What every gateway shows, at most [`MAX_AUTO_STATUS`](crate::store::MAX_AUTO_STATUS)
        /// bytes.
        status: String,
    }
}

record_args! {
    /// `<LIBRARY>_auto_report`: a gateway's counts added to the room's window, the lease taken
    /// or renewed, the window handed to its holder once it is over.
    AutoReport = "auto_report" {
        /// The time ([`Now`]), held to the server's as a room call's is.
        now: Now,
        /// The reporter.
        gateway: GatewayId,
        /// How long a window lasts, 1 ms to an hour.
        window_ms: u64,
        /// How long a lease lasts from the report that takes or renews it, 1 ms to an hour.
        lease_ms: u64,
        /// The counts since the reporter's last report, each at most 2^53.
        ok: u64,
        errors: u64,
        timeouts: u64,
        /// The highest load the app reported, 0 to 100; -1 for none.
        load: i64,
        /// The latency buckets that counted something, `"<index> <count> "` each.
        latencies: Vec<u8>,
    }
}

record_args! {
    /// `<LIBRARY>_auto_switch`: the controller on (`""`) or off (why, as
    /// [`AutoOff::as_str`](crate::store::AutoOff::as_str) writes it), for every gateway; and
    /// the terms to keep, after a `t` (`""`: those kept stay).
    AutoSwitch = "auto_switch" {
        off: String,
        terms: String,
    }
}

/// A visitor's call of `op` (`"enter"`, `"join"`, `"poll"`, `"heartbeat"`, `"release"`) with
/// the session as the raw bytes `session` (16 for an id; the benchmark sends a
/// `redis-benchmark` template in their place), or a batch of joins (`"join_batch"`, `session`
/// then the newcomers' ids one after the other, 16 bytes each), `now` the server's clock and silence not
/// excused: for the tests and the benchmark that call the function by hand. Its function's
/// name, and the arguments; `None` for another `op`.
pub(crate) fn visitor_call(
    op: &str,
    policy: &RoomPolicy,
    session: &[u8],
    schedule: Option<String>,
) -> Option<(&'static str, Vec<Vec<u8>>)> {
    let [line_numbers, room_numbers] = packed_numbers(policy);
    let call = Call {
        now: Now::Server,
        line_numbers,
        room_numbers,
        excused: false,
    };
    if op == "join_batch" {
        let argv = JoinBatch {
            call,
            sessions: session.to_vec(),
            schedule,
        }
        .argv();
        return Some((JoinBatch::FUNCTION, argv));
    }
    let op = match op {
        "enter" => VisitorOp::Enter,
        "join" => VisitorOp::Join,
        "poll" => VisitorOp::Poll,
        "heartbeat" => VisitorOp::Heartbeat,
        "release" => VisitorOp::Release,
        _ => return None,
    };
    let mut argv = Visitor {
        call,
        session: SessionId::from_bytes([0; 16]),
        schedule,
    }
    .argv();
    let at = Visitor::FIELDS.iter().position(|f| *f == "session");
    argv[at.expect("a visitor's ARGV has its session")] = session.to_vec();
    Some((op.function(), argv))
}

impl Sync {
    pub(crate) const FUNCTION: &'static str = function_name!("sync");
}

impl JoinBatch {
    pub(crate) const FUNCTION: &'static str = function_name!("join_batch");
}

impl Stats {
    pub(crate) const FUNCTION: &'static str = function_name!("stats");
}

impl Configure {
    pub(crate) const FUNCTION: &'static str = function_name!("configure");
}

impl AdmitNext {
    pub(crate) const FUNCTION: &'static str = function_name!("admit_next");
}

impl Ban {
    pub(crate) const FUNCTION: &'static str = function_name!("ban");
}

impl AutoApply {
    pub(crate) const FUNCTION: &'static str = function_name!("auto_apply");
}

#[cfg(test)]
mod tests;
