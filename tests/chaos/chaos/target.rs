//! The Redis primary, its replica and the sentinel under fault injection (`Target`), and the
//! injector thread that runs the fault schedule against them.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::redis_harness::Server;
use crate::sentinel::{Sentinel, MASTER};
use tower_waiting_room::SessionId;

use super::faults::{
    key_loss_reorders, Damage, Fault, BAD_NUMBERS, CORRUPTIONS, CURRENT_EPOCH_LUA,
    HASH_TYPE_SCRIPT, KEY_NAMES, RESCORE_SCRIPT, RING_TYPE_SCRIPT, SCORE_FORMS, SEQ_FORMS,
    SETTINGS_FIELDS, SET_FIELD_SCRIPT, SET_HASH_FIELD_SCRIPT, TYPE_KEYS, YEAR_MS,
};
use super::tools::{now_ms, rel, sleep_until, Rng};
use super::windows::{Window, REPL_LAG_MS};

/// The two Redis nodes and the sentinel under fault injection. Dropping it resumes a paused
/// node first, so that the harness stops every server, even after a panic.
pub(super) struct Target {
    nodes: [Server; 2],
    sentinel: Sentinel,
    /// Which node the sentinel named as the primary after the last fault.
    primary: usize,
    /// The pid of a node stopped with SIGSTOP.
    paused: Option<String>,
    /// Which keys are still to be deleted in this round.
    key_deck: Vec<usize>,
    /// The decks of the damage dealt (`Target::corrupt`), by name.
    decks: BTreeMap<&'static str, Vec<usize>>,
    /// The kinds of damage dealt (`CORRUPTIONS`, or those `CHAOS_CORRUPT` names).
    pub(super) corruptions: Vec<&'static str>,
    /// Planned or crash: which failover comes next.
    failover_deck: Vec<usize>,
    /// During a fault: the primary the sentinel named last, the node it named before that,
    /// when it was seen to change last, and when that old primary was first seen unable to
    /// take writes after that.
    named_last: usize,
    named_before: usize,
    switch_seen: Option<u64>,
    fenced_seen: Option<u64>,
}

/// How long the topology has to settle after a fault before the harness gives up.
const HEAL_WITHIN: Duration = Duration::from_secs(30);

/// A deadline [`HEAL_WITHIN`] from now that a TILT of the sentinel moves, once, by as much
/// again: a sentinel in TILT (its timer ran late: the machine starved or paused it, seen on a
/// loaded CI machine) does nothing for 30 s and then must see the replica afresh, so a
/// failover or a settling that began then cannot be done within `HEAL_WITHIN`. That is the
/// machine's doing, not the room's; every guarantee is still checked over the longer fault.
struct HealDeadline {
    at: std::time::Instant,
    tilts: usize,
    moved: bool,
}

impl HealDeadline {
    fn new(sentinel: &Sentinel) -> Self {
        Self {
            at: std::time::Instant::now() + HEAL_WITHIN,
            tilts: sentinel.tilts(),
            moved: false,
        }
    }

    /// Whether the deadline has passed (moved once if the sentinel went into TILT since
    /// [`new`](Self::new)).
    fn passed(&mut self, sentinel: &Sentinel) -> bool {
        let now = std::time::Instant::now();
        if now >= self.at && !self.moved && sentinel.tilts() > self.tilts {
            eprintln!("chaos: the sentinel went into TILT; its deadline moves by {HEAL_WITHIN:?}");
            self.at = now + HEAL_WITHIN;
            self.moved = true;
        }
        now >= self.at
    }
}

impl Target {
    /// A primary and its replica, both with AOF (`appendfsync always`) and
    /// `min-replicas-to-write 1`, and a sentinel watching them.
    pub(super) fn start() -> Target {
        let args = [
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            // A primary that has lost its replica refuses writes (NOREPLICAS): a demoted or
            // restarted old primary cannot take writes that its replacement will never see.
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            "10",
            // A replica that (re)connects is served at once, not after the default 5 s wait
            // for more replicas.
            "--repl-diskless-sync-delay",
            "0",
        ];
        let nodes = [Server::start(&args), Server::start(&args)];
        let primary_port = nodes[0].port.to_string();
        let r = nodes[1]
            .command(&["REPLICAOF", "127.0.0.1", &primary_port])
            .expect("REPLICAOF");
        assert!(!r.starts_with('-'), "REPLICAOF: {r}");
        let mut target = Target {
            sentinel: Sentinel::start(nodes[0].port, 1),
            nodes,
            primary: 0,
            paused: None,
            key_deck: Vec::new(),
            decks: BTreeMap::new(),
            corruptions: CORRUPTIONS.to_vec(),
            failover_deck: Vec::new(),
            named_last: 0,
            named_before: 0,
            switch_seen: None,
            fenced_seen: None,
        };
        target.heal();
        target
    }

    pub(super) fn url(&self) -> String {
        format!("redis+sentinel://127.0.0.1:{}/{MASTER}", self.sentinel.port)
    }

    fn pid(&self, node: usize) -> String {
        self.nodes[node]
            .info_field("server", "process_id")
            .expect("INFO server has process_id")
    }

    fn signal(pid: &str, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {pid} failed");
    }

    fn command(&self, args: &[&str]) {
        let r = self.nodes[self.primary]
            .command(args)
            .expect("Redis answers");
        assert!(!r.starts_with('-'), "{args:?}: {r}");
    }

    /// One command to the primary: its reply (a bulk string's text, a status or an integer as
    /// sent), or the error it answered.
    fn query(&self, args: &[&str]) -> Result<String, String> {
        let r = self.nodes[self.primary]
            .command(args)
            .map_err(|e| e.to_string())?;
        let r = r.strip_suffix("\r\n").unwrap_or(&r).to_owned();
        match r.strip_prefix('-') {
            Some(e) => Err(e.to_owned()),
            None => Ok(r),
        }
    }

    /// The next card of the deck `name` of `n` cards (`Rng::deal`).
    fn deal(&mut self, rng: &mut Rng, name: &'static str, n: usize) -> usize {
        rng.deal(self.decks.entry(name).or_default(), 0..n)
    }

    /// Damages one of the room's keys (`CORRUPTIONS`), in turn by kind and by form: the key's
    /// short name, and what was done. A damage the server refused (the key still of a type an
    /// earlier one left, not repaired yet) did nothing and costs nothing.
    fn corrupt(&mut self, keys: &[String; 20], rng: &mut Rng) -> (&'static str, Damage) {
        let key_at = |name: &str| KEY_NAMES.iter().position(|&k| k == name).expect("a key");
        let key = |name: &str| keys[key_at(name)].as_str();
        // A liveness ring's number of keys (`turn0` .. `turn5`, `abandon0` .. `abandon3`).
        let ring_len = |name: &str| if name.starts_with("turn") { 6 } else { 4 };
        let card = self.deal(rng, "kind", self.corruptions.len());
        let kind = self.corruptions[card];
        let mut d = Damage {
            kind,
            ..Damage::default()
        };
        let (name, done): (&'static str, Result<String, String>) = match kind {
            "seq" => {
                let v = SEQ_FORMS[self.deal(rng, "seq", SEQ_FORMS.len())];
                d.form = format!("seq = {v:?}");
                d.reorders = key_loss_reorders("seq");
                ("seq", self.query(&["SET", key("seq"), v]))
            }
            "field" => {
                let field = SETTINGS_FIELDS[self.deal(rng, "field", SETTINGS_FIELDS.len())];
                // `due` is also set a year ahead, once in each round of its values.
                let v = if field == "due" {
                    match self.deal(rng, "due", BAD_NUMBERS.len() + 1) {
                        i if i < BAD_NUMBERS.len() => BAD_NUMBERS[i].to_owned(),
                        _ => (now_ms() + YEAR_MS).to_string(),
                    }
                } else {
                    BAD_NUMBERS[self.deal(rng, "number", BAD_NUMBERS.len())].to_owned()
                };
                let script = format!("{CURRENT_EPOCH_LUA}{SET_FIELD_SCRIPT}");
                let len = ring_len(field).to_string();
                let done = self.query(&["EVAL", &script, "1", key("settings"), field, &v, &len]);
                let shown = if v.len() > 12 && field == "due" {
                    "a year ahead".to_owned()
                } else {
                    format!("{v:?}")
                };
                d.form = format!("settings.{} = {shown}", done.as_deref().unwrap_or(field));
                ("settings", done)
            }
            "score" => {
                let v = SCORE_FORMS[self.deal(rng, "score", SCORE_FORMS.len())];
                let at = rng.below(1_000_000).to_string();
                let done = self.query(&["EVAL", RESCORE_SCRIPT, "1", key("line"), &at, v]);
                let mut words = done.as_deref().unwrap_or("").split(' ');
                let (hex, rank, n) = (words.next(), words.next(), words.next());
                d.rescored = hex.and_then(SessionId::from_hex);
                d.ahead = v == "-inf" && hex.is_some_and(|h| !h.is_empty());
                d.form = match (d.rescored, rank, n) {
                    (Some(s), Some(r), Some(n)) => {
                        format!("line: the waiter {s} ({r} of {n} ahead of it) scored {v}")
                    }
                    _ if hex == Some("") => "line: empty, no waiter scored".to_owned(),
                    _ => format!("line: a member that is no session scored {v}"),
                };
                ("line", done)
            }
            "junk" => {
                let v = ["-inf", "1e300"][self.deal(rng, "junk", 2)];
                let member = format!("chaos-junk-{}", rng.below(1_000_000));
                d.ahead = v == "-inf";
                d.form = format!("line: the junk member {member:?} scored {v}");
                ("line", self.query(&["ZADD", key("line"), v, &member]))
            }
            "slots" => {
                let name = ["active", "granted"][self.deal(rng, "slots", 2)];
                d.form = format!("{name}: a string");
                d.rebuilds = true;
                d.reorders = key_loss_reorders(name);
                (name, self.query(&["SET", key(name), "chaos damage"]))
            }
            "type" => {
                let name = TYPE_KEYS[self.deal(rng, "type", TYPE_KEYS.len())];
                d.reorders = key_loss_reorders(name);
                d.ends_rebuild = name == "settings";
                if let Some(prefix) = name.strip_suffix('*') {
                    let len = ring_len(prefix);
                    let first = key_at(&format!("{prefix}0"));
                    let mut args = vec!["EVAL".to_owned(), String::new(), (len + 1).to_string()];
                    args[1] = format!("{CURRENT_EPOCH_LUA}{RING_TYPE_SCRIPT}");
                    args.push(key("settings").to_owned());
                    args.extend(keys[first..first + len].iter().cloned());
                    args.push(prefix.to_owned());
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let done = self.query(&args);
                    let i: usize = done.as_deref().unwrap_or("0").parse().unwrap_or(0);
                    d.form = format!("{prefix}{i}: a hash");
                    (KEY_NAMES[first + i.min(len - 1)], done)
                } else if matches!(name, "seq" | "fast") {
                    d.form = format!("{name}: a hash");
                    let done = self.query(&["EVAL", HASH_TYPE_SCRIPT, "1", key(name)]);
                    (KEY_NAMES[key_at(name)], done)
                } else {
                    d.form = format!("{name}: a string");
                    (
                        KEY_NAMES[key_at(name)],
                        self.query(&["SET", key(name), "chaos damage"]),
                    )
                }
            }
            "pace" => {
                let (name, default) =
                    [("bucket", "milli"), ("admitted", "n0")][self.deal(rng, "pace", 2)];
                let v = BAD_NUMBERS[self.deal(rng, "number", BAD_NUMBERS.len())];
                let at = rng.below(1_000_000).to_string();
                let done = self.query(&[
                    "EVAL",
                    SET_HASH_FIELD_SCRIPT,
                    "1",
                    key(name),
                    &at,
                    v,
                    default,
                ]);
                d.form = format!("{name}.{} = {v:?}", done.as_deref().unwrap_or(default));
                (KEY_NAMES[key_at(name)], done)
            }
            other => unreachable!("no corruption {other}"),
        };
        match done {
            Ok(_) => (name, d),
            Err(e) => (
                name,
                Damage {
                    kind,
                    form: format!("{} (refused: {e})", d.form),
                    ..Damage::default()
                },
            ),
        }
    }

    /// The node the sentinel names as the primary now.
    fn named_primary(&self) -> Option<usize> {
        let port = self.sentinel.primary_port()?;
        self.nodes.iter().position(|n| n.port == port)
    }

    /// Waits until the sentinel names a primary and has no failover under way, that primary
    /// takes writes (it has a replica in sync: `min-replicas-to-write`), and the other node is
    /// its replica, in sync (made so with `REPLICAOF` if it still thinks itself a primary, as a
    /// restarted or demoted old primary does until the sentinel gets round to it). Two looks
    /// in a row, 250 ms apart, must agree. Returns the primary.
    fn heal(&mut self) -> usize {
        let mut deadline = HealDeadline::new(&self.sentinel);
        let mut healthy_before: Option<usize> = None;
        loop {
            self.observe();
            let healthy = self.look();
            if let Some(p) = healthy.filter(|&p| Some(p) == healthy_before) {
                self.primary = p;
                return p;
            }
            healthy_before = healthy;
            assert!(
                !deadline.passed(&self.sentinel),
                "the topology did not settle within {HEAL_WITHIN:?}: sentinel flags {:?}, \
                 primary {:?}; sentinel log:\n{}",
                self.sentinel.master_flags(),
                self.sentinel.primary_port(),
                self.sentinel.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Follows failovers: notes when the sentinel names another primary than it did last (a
    /// fault may see more than one: a new primary too slow to answer its pings may be replaced
    /// in turn), and then when the primary it replaced is first seen unable to take writes:
    /// dead, a replica, or without a good replica (`min-replicas-to-write` refuses writes then).
    /// A paused node is not asked (it would not answer).
    fn observe(&mut self) {
        if let Some(p) = self.named_primary().filter(|&p| p != self.named_last) {
            self.named_before = self.named_last;
            self.named_last = p;
            self.switch_seen = Some(now_ms());
            self.fenced_seen = None;
        }
        if self.switch_seen.is_some() && self.fenced_seen.is_none() && self.paused.is_none() {
            let fenced = match self.nodes[self.named_before].command(&["INFO", "replication"]) {
                Err(_) => true,
                Ok(info) => {
                    info.contains("role:slave") || info.contains("min_slaves_good_slaves:0")
                }
            };
            if fenced {
                self.fenced_seen = Some(now_ms());
            }
        }
    }

    /// Sleeps `hold`, following a failover meanwhile.
    fn hold(&mut self, hold: Duration) {
        let until = std::time::Instant::now() + hold;
        while std::time::Instant::now() < until {
            self.observe();
            std::thread::sleep(
                until
                    .saturating_duration_since(std::time::Instant::now())
                    .min(Duration::from_millis(50)),
            );
        }
    }

    /// How long the replica takes to reach the primary's replication offset as it is now (an
    /// upper bound of the replication lag, round trips included), or `None` if it did not
    /// within 2 s.
    fn catch_up(&self) -> Option<u64> {
        let offset = |n: &Server, field: &str| -> Option<u64> {
            n.info_field("replication", field)?.parse().ok()
        };
        let (primary, replica) = (&self.nodes[self.primary], &self.nodes[1 - self.primary]);
        let t0 = now_ms();
        let target = offset(primary, "master_repl_offset")?;
        while now_ms() < t0 + 2_000 {
            if offset(replica, "slave_repl_offset").is_some_and(|r| r >= target) {
                return Some(now_ms() - t0);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        None
    }

    /// One look for `heal`: the primary if all is well.
    fn look(&self) -> Option<usize> {
        if self.sentinel.master_flags().as_deref() != Some("master") {
            return None;
        }
        let p = self.named_primary()?;
        let (primary, other) = (&self.nodes[p], &self.nodes[1 - p]);
        let role = |n: &Server| n.info_field("replication", "role");
        if role(primary).as_deref() != Some("master") {
            return None;
        }
        let port = primary.port.to_string();
        let follows = role(other).as_deref() == Some("slave")
            && other.info_field("replication", "master_port").as_deref() == Some(&port);
        if !follows {
            // An old primary back from the dead or demoted: make it the new one's replica.
            let _ = other.command(&["REPLICAOF", "127.0.0.1", &port]);
            return None;
        }
        let synced = other
            .info_field("replication", "master_link_status")
            .as_deref()
            == Some("up");
        let writable = primary
            .info_field("replication", "min_slaves_good_slaves")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n >= 1);
        (synced && writable).then_some(p)
    }

    /// Injects `fault` for about `hold` and returns once the store is healthy again.
    fn inject(
        &mut self,
        fault: Fault,
        hold: Duration,
        keys: &[String; 20],
        rng: &mut Rng,
    ) -> Window {
        let before = self.primary;
        self.named_last = before;
        self.switch_seen = None;
        self.fenced_seen = None;
        let start = now_ms();
        let mut key = None;
        let mut damage = None;
        match fault {
            Fault::Kill => {
                Self::signal(&self.pid(before), "-KILL");
                self.hold(hold);
                self.nodes[before].restart();
            }
            Fault::Pause => {
                let pid = self.pid(before);
                Self::signal(&pid, "-STOP");
                self.paused = Some(pid.clone());
                self.hold(hold);
                Self::signal(&pid, "-CONT");
                self.paused = None;
            }
            Fault::Oom => {
                self.command(&["CONFIG", "SET", "maxmemory", "1"]);
                std::thread::sleep(hold);
                self.command(&["CONFIG", "SET", "maxmemory", "0"]);
            }
            Fault::DelKey => {
                let i = rng.deal(&mut self.key_deck, 0..keys.len());
                self.command(&["DEL", &keys[i]]);
                key = Some(KEY_NAMES[i]);
            }
            Fault::Corrupt => {
                let (k, d) = self.corrupt(keys, rng);
                key = Some(k);
                damage = Some(d);
            }
            Fault::Failover => {
                let planned = rng.deal(&mut self.failover_deck, 0..2) == 0;
                key = Some(if planned { "planned" } else { "crash" });
                if planned {
                    // Refused while the sentinel still counts the replica unfit: try again.
                    let mut deadline = HealDeadline::new(&self.sentinel);
                    while let Err(e) = self.sentinel.failover() {
                        assert!(
                            !deadline.passed(&self.sentinel),
                            "SENTINEL FAILOVER refused for {HEAL_WITHIN:?}: {e}"
                        );
                        std::thread::sleep(Duration::from_millis(100));
                    }
                } else {
                    Self::signal(&self.pid(before), "-KILL");
                }
                let mut deadline = HealDeadline::new(&self.sentinel);
                while self.switch_seen.is_none() {
                    self.observe();
                    assert!(
                        !deadline.passed(&self.sentinel),
                        "no failover within {HEAL_WITHIN:?}; sentinel log:\n{}",
                        self.sentinel.log()
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
                if !planned {
                    // Back from its AOF as a primary that nobody replicates: it refuses writes
                    // (min-replicas-to-write) until `heal` makes it the new primary's replica.
                    self.nodes[before].restart();
                }
            }
        }
        let after = self.heal();
        let end = now_ms();
        if after == before && self.switch_seen.is_some() {
            // There and back again: say what the sentinel saw.
            let log = self.sentinel.log();
            let seen: Vec<&str> = log
                .lines()
                .filter(|l| {
                    ["switch-master", "sdown", "odown", "failover"]
                        .iter()
                        .any(|w| l.contains(w))
                })
                .collect();
            eprintln!("chaos: the primary changed and came back; the sentinel's log says:");
            for l in seen.iter().rev().take(20).rev() {
                eprintln!("  {l}");
            }
        }
        Window {
            fault,
            start,
            end,
            key,
            damage,
            switched: after != before || self.switch_seen.is_some(),
            lost_until: self.fenced_seen.or(self.switch_seen).unwrap_or(end),
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(pid) = self.paused.take() {
            let _ = Command::new("kill").args(["-CONT", &pid]).status();
        }
    }
}

/// Runs the fault schedule on its own thread (the servers are driven with blocking I/O) until
/// `stop`; returns the servers, healthy, the windows, and the replication lags measured
/// between faults (ms; `u64::MAX` for a replica that did not catch up within 2 s).
pub(super) fn injector(
    mut target: Target,
    keys: [String; 20],
    faults: Vec<Fault>,
    mut rng: Rng,
    until: u64,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Target, Vec<Window>, Vec<u64>)> {
    std::thread::spawn(move || {
        let mut windows = Vec::new();
        let mut lags = Vec::new();
        let mut deck = Vec::new();
        // A deletion or a damage is over at once, and there are many keys and forms: two of
        // each per round.
        let cards: Vec<Fault> = faults
            .iter()
            .chain(
                faults
                    .iter()
                    .filter(|&&f| matches!(f, Fault::DelKey | Fault::Corrupt)),
            )
            .copied()
            .collect();
        // In the first round every kind comes before the second deletion and the second
        // damage (the cards after `faults.len()`, put at the bottom of the deck): a short run
        // sees each kind. A failover (with the healing after it) takes a few seconds: it is
        // dealt among the first three, so that a short run always has one.
        let first = rng.deal(&mut deck, 0..cards.len());
        deck.push(first);
        deck.sort_by_key(|&c| c < faults.len());
        if let Some(at) = deck.iter().position(|&c| cards[c] == Fault::Failover) {
            let to = deck.len() - 1 - (rng.below(3) as usize).min(deck.len() - 1);
            deck.swap(at, to);
        }
        // The launch fills the room in its first half second: the first fault comes later than
        // a write may be lost before it (REPL_LAG_MS), so that the full room is counted.
        std::thread::sleep(Duration::from_millis(REPL_LAG_MS + 1_500));
        while now_ms() < until && !stop.load(Ordering::SeqCst) {
            // The sentinel acts on its own too (a node held down over a second): a change of
            // primary the harness did not see through is a window of its own.
            let named = target.named_primary();
            if named.is_some_and(|p| p != target.primary) {
                let start = now_ms();
                let before = target.primary;
                let after = target.heal();
                let end = now_ms();
                eprintln!("chaos: unscheduled failover noticed at {}", rel(start));
                windows.push(Window {
                    fault: Fault::Failover,
                    start: windows.last().map_or(start, |w: &Window| w.end),
                    end,
                    key: Some("unscheduled"),
                    damage: None,
                    switched: after != before,
                    lost_until: end,
                });
            }
            let fault = cards[rng.deal(&mut deck, 0..cards.len())];
            let hold = Duration::from_millis(rng.between(300, 2_500));
            let from = target.nodes[target.primary].port;
            let w = target.inject(fault, hold, &keys, &mut rng);
            let to = target.nodes[target.primary].port;
            let what = match &w.damage {
                Some(d) => Some(d.form.clone()),
                None => w.key.map(str::to_owned),
            };
            eprintln!(
                "chaos: {} {}{} to {}{}",
                fault.name(),
                what.map(|k| format!("{k} ")).unwrap_or_default(),
                rel(w.start),
                rel(w.end),
                if w.switched {
                    format!(" (primary {from} -> {to})")
                } else {
                    String::new()
                }
            );
            windows.push(w);
            // Now and then the next fault follows at once, while the breakers are still open
            // and probing: a server that comes back hung, or full.
            let gap = if rng.chance(30) {
                0
            } else {
                rng.between(800, 2_500)
            };
            let gap_until = now_ms() + gap;
            if gap > 0 {
                lags.push(target.catch_up().unwrap_or(u64::MAX));
            }
            sleep_until(gap_until);
        }
        (target, windows, lags)
    })
}
