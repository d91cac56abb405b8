//! The faults the injector deals (`Fault`), and the damage a `corrupt` fault does to the room's
//! keys: its kinds and forms, the Lua scripts that write them, and what each may cost the checks.

use tower_waiting_room::SessionId;

use super::{ACTIVE_TTL, GRANT_TTL, STORE_TIMEOUT};

/// What the injector does to Redis. Every fault but `Failover` acts on whichever node the
/// sentinel names as the primary at that moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Fault {
    /// SIGKILL of the primary, then a restart from its AOF (`appendfsync always`: no write it
    /// acknowledged is lost from its own data set). Held over a second, the sentinel may fail
    /// over meanwhile: the node then comes back as a replica of the new primary.
    Kill,
    /// SIGSTOP, then SIGCONT of the primary: a hung server (calls time out, the breaker opens).
    /// Held over a second, the sentinel may fail over meanwhile, as for `Kill`.
    Pause,
    /// `CONFIG SET maxmemory 1`, then back to 0: every script refused with OOM (busy).
    Oom,
    /// `DEL` of one of the room's keys, chosen by the seed.
    DelKey,
    /// Damage to one of the room's keys, in one of the forms of `CORRUPTIONS`, chosen by the
    /// seed: the library must read it as missing, repair it or refuse the call (busy), never
    /// let anyone in for it.
    Corrupt,
    /// A failover through the sentinel, every gateway on a `redis+sentinel://` URL: planned
    /// (`SENTINEL FAILOVER`) or a crash (SIGKILL of the primary until the sentinel has promoted
    /// the replica, then the old primary restarted as a replica of the new one), dealt in turn.
    Failover,
}

impl Fault {
    pub(super) const ALL: [Fault; 6] = [
        Fault::Kill,
        Fault::Pause,
        Fault::Oom,
        Fault::DelKey,
        Fault::Corrupt,
        Fault::Failover,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::Oom => "oom",
            Fault::DelKey => "del",
            Fault::Corrupt => "corrupt",
            Fault::Failover => "failover",
        }
    }

    /// The store is away (unreachable, hung, or between primaries): the fail policy applies.
    pub(super) fn store_away(self) -> bool {
        matches!(self, Fault::Kill | Fault::Pause | Fault::Failover)
    }
}

/// The room's keys in the script's order (`redis_keys`), and what losing each one may cost.
/// Losing `settings` brings back the builder's values, which every gateway here shares; losing
/// `arrivals` or `banned` changes no admission (the oldest wait; no bans in a chaos run).
/// A lost liveness bitmap (`turn*`, `abandon*`) counts everyone as seen in its epoch: it
/// reorders nothing and frees no slot. A lost `fast` (the fast path's window) is a closed
/// window: main answers until it keeps one again.
pub(super) const KEY_NAMES: [&str; 20] = [
    "seq", "line", "active", "granted", "bucket", "admitted", "settings", "arrivals", "banned",
    "turn0", "turn1", "turn2", "turn3", "turn4", "turn5", "abandon0", "abandon1", "abandon2",
    "abandon3", "fast",
];

/// Losing this key may reorder the line (waiters re-queued at the back, sequence restarted).
pub(super) fn key_loss_reorders(key: &str) -> bool {
    matches!(key, "seq" | "line" | "granted")
}

/// Losing this key forgets slots: visitors who held one are no longer counted by the store.
pub(super) fn key_loss_frees_slots(key: &str) -> bool {
    matches!(key, "active" | "granted")
}

/// The kinds of damage a `corrupt` fault deals, one per fault (`CHAOS_CORRUPT` picks some), in
/// turn like the faults: every kind once per round of them, its form dealt the same way. Each is
/// what a hand edit, another program or a half-applied bug could leave, and what the library
/// must survive (src/store/redis/script/main.lua, "Bad days"):
///
/// - `seq`: the `seq` string set to a number the scripts never write (`SEQ_FORMS`): `INCR`
///   refuses it, the library deletes it (repair) and numbers newcomers after the last waiter;
///   what it costs is what losing `seq` costs (`key_loss_reorders`).
/// - `field`: a field of the settings hash set to a bad number (`SETTINGS_FIELDS`,
///   `BAD_NUMBERS`, and `due` a year ahead): read strictly, as missing (stored.lua), so repaired
///   or taken the safe way. Costs nothing.
/// - `score`: a waiter's score in `line` set to no place (`SCORE_FORMS`, `ZADD XX`): that waiter
///   goes to the back (line.lua, `F.replace_in_line`) and loses its place, nobody else; scored
///   `-inf` it ranks first until it is moved, one place ahead of every other waiter.
/// - `junk`: a member that is no session added to `line` at either end, scored `-inf` (ahead of
///   everyone, one place, until it is moved to the back or skipped at its turn) or `1e300`.
/// - `slots`: `active` or `granted` of the wrong type (a string): deleted by the repair, and the
///   slots rebuilt from their holders' heartbeats while the room counts as full (main.lua, Bad
///   days): no slot is freed, so the capacity check is not relaxed at all. Lost grants send their
///   waiters back to the line, as when `granted` is deleted (`key_loss_reorders`).
/// - `type`: any other key of the wrong type (`TYPE_KEYS`: a hash where `seq`, a liveness bitmap
///   or `fast` is, a string where a zset or hash is): deleted by the repair, so it costs what its
///   loss costs (`key_loss_reorders`), and a deleted `settings` ends a rebuild of the slots.
/// - `pace`: a field of `bucket` or `admitted` set to a bad number: counted as full, or as zero.
pub(super) const CORRUPTIONS: [&str; 7] =
    ["seq", "field", "score", "junk", "slots", "type", "pace"];

/// What `seq` is set to: none is a number as `INCR` writes one.
pub(super) const SEQ_FORMS: [&str; 9] = ["01", "-0", "007", "00", "1e3", "+7", " 7", "inf", "x"];

/// The settings fields damaged (keys.lua's header): `turn*` and the like name the field of the
/// ring's current epoch (the one whose field holds the latest epoch).
pub(super) const SETTINGS_FIELDS: [&str; 25] = [
    "v",
    "capacity",
    "rate",
    "paused",
    "open",
    "born",
    "moved",
    "early",
    "due",
    "bans",
    "noted",
    "cursor",
    "rebuild",
    "cap_before",
    "cap_at",
    "paused_at",
    "pause_start",
    "pause_end",
    "opens_at",
    "closes_at",
    "turn*",
    "turn*from",
    "turn*first",
    "abandon*",
    "abandon*from",
];

/// Numbers no script writes where they are put, the last one 20 nines: stored.lua reads each as
/// missing where it reads an integer in a range (`-1` is a liveness epoch field's "epoch 1,
/// lost", an old epoch, and `2.5` or `-1` a sweep `cursor`'s score, both taken as they are).
pub(super) const BAD_NUMBERS: [&str; 8] = [
    "inf",
    "1e300",
    "2.5",
    "-1",
    "0x10",
    "01",
    "-0",
    "99999999999999999999",
];

/// A waiter's score that is no place.
pub(super) const SCORE_FORMS: [&str; 4] = ["1e20", "1e300", "inf", "-inf"];

/// The keys a `type` damage replaces with a value of another type (`slots` does `active` and
/// `granted`): `turn*` and `abandon*` are the ring's current bitmap.
pub(super) const TYPE_KEYS: [&str; 10] = [
    "seq", "line", "bucket", "admitted", "settings", "arrivals", "banned", "turn*", "abandon*",
    "fast",
];

/// A year in ms: `due` that far ahead is damage (no slot lives that long).
pub(super) const YEAR_MS: u64 = 365 * 24 * 3_600 * 1_000;

/// How long a rebuild of the slots may run after a `slots` damage (ms): the library starts it
/// when it first trips on the key (a call within the damage's window: the room is busy) and
/// holds it for the longest lifetime of a slot or grant (main.lua, Bad days); a store deadline
/// more for a call that tripped at the window's end.
pub(super) fn rebuild_ms() -> u64 {
    (ACTIVE_TTL.max(GRANT_TTL) + STORE_TIMEOUT).as_millis() as u64
}

/// Sets the score of the waiter at a seeded rank of the line (ARGV[1], in millionths of its
/// length) to ARGV[2] (`ZADD XX`). Returns the member in hex, its rank and the line's length,
/// or '' for an empty line.
pub(super) const RESCORE_SCRIPT: &str = r"
local n = redis.call('ZCARD', KEYS[1])
if n == 0 then return '' end
local r = math.floor(tonumber(ARGV[1]) * n / 1000000)
local m = redis.call('ZRANGE', KEYS[1], r, r)[1]
redis.call('ZADD', KEYS[1], 'XX', ARGV[2], m)
local hex = string.gsub(m, '.', function(c) return string.format('%02x', string.byte(c)) end)
return hex .. ' ' .. r .. ' ' .. n
";

/// The ring field of `ARGV[1]` (`turn` or `abandon`) whose epoch is the latest (the current
/// one), of ARGV[2] fields: its index.
pub(super) const CURRENT_EPOCH_LUA: &str = r"
local function current(settings, ring, len)
  local best, at = -1, 0
  for i = 0, len - 1 do
    local e = tonumber(redis.call('HGET', settings, ring .. i))
    if e and math.abs(e) > best then best, at = math.abs(e), i end
  end
  return at
end
";

/// Sets the settings field ARGV[1] to ARGV[2]; `<ring>*<suffix>` names the ring's current
/// epoch's field (ARGV[3]: the ring's length). Returns the field's name.
pub(super) const SET_FIELD_SCRIPT: &str = r"
local f = ARGV[1]
local ring, suffix = string.match(f, '^(%a+)%*(%a*)$')
if ring then f = ring .. current(KEYS[1], ring, tonumber(ARGV[3])) .. suffix end
redis.call('HSET', KEYS[1], f, ARGV[2])
return f
";

/// Makes KEYS[2 + i] a hash, i the current epoch of the ring ARGV[1] (KEYS[1]: settings; then
/// the ring's keys). Returns i.
pub(super) const RING_TYPE_SCRIPT: &str = r"
local i = current(KEYS[1], ARGV[1], #KEYS - 1)
redis.call('DEL', KEYS[2 + i])
redis.call('HSET', KEYS[2 + i], 'chaos', 'damage')
return tostring(i)
";

/// Makes KEYS[1] a hash.
pub(super) const HASH_TYPE_SCRIPT: &str = r"
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'chaos', 'damage')
return 'ok'
";

/// Sets a field of the hash KEYS[1], one of its own at a seeded place (ARGV[1], in millionths of
/// their number) or ARGV[3] if it has none, to ARGV[2]. Returns the field's name.
pub(super) const SET_HASH_FIELD_SCRIPT: &str = r"
local fields = redis.call('HKEYS', KEYS[1])
local f = ARGV[3]
if #fields > 0 then f = fields[math.floor(tonumber(ARGV[1]) * #fields / 1000000) + 1] end
redis.call('HSET', KEYS[1], f, ARGV[2])
return f
";

/// What a `corrupt` fault did, and what it may cost the checks.
#[derive(Clone, Debug, Default)]
pub(super) struct Damage {
    /// The kind (`CORRUPTIONS`).
    pub(super) kind: &'static str,
    /// What was written, for the report.
    pub(super) form: String,
    /// The library deletes the key (repair) and so loses what it held, as if it had been
    /// deleted: the line may be reordered (`key_loss_reorders`).
    pub(super) reorders: bool,
    /// `active` or `granted` of the wrong type: the slots are rebuilt for `rebuild_ms`.
    pub(super) rebuilds: bool,
    /// The settings key, deleted by the repair: a rebuild of the slots under way ends with it.
    pub(super) ends_rebuild: bool,
    /// The waiter whose score was set to no place: it loses its place (nobody else does), but
    /// is never let in for it.
    pub(super) rescored: Option<SessionId>,
    /// A member scored `-inf` ranks ahead of every waiter until it is moved or skipped: each
    /// waiter's position is one more meanwhile.
    pub(super) ahead: bool,
}
