//! The demo's command line: its usage text, [`Options`] and their parsing.

use tower_waiting_room::FailPolicy;

pub(crate) const USAGE: &str = "\
tower-waiting-room demo: an axum app behind a fair virtual waiting room.

USAGE:
    cargo run --example demo -- [FLAGS]

FLAGS:
    --port <N>            port to listen on, on 127.0.0.1 (default 3000; 0 picks a free one)
    --capacity <N>        visitors inside at once (default 2)
    --vip-capacity <N>    visitors inside the \"vip\" room (/vip) at once (default 1)
    --rate <N>            at most N admissions per second (default: no limit)
    --active-ttl <SECS>   slot lifetime, extended by activity (default 300)
    --grant-ttl <SECS>    time a promoted visitor has to claim the slot (default 30)
    --queue-ttl <SECS>    a waiter silent for longer is skipped (default 120)
    --refresh <SECS>      admission token trusted without a store call while younger
                          than this; must be shorter than --active-ttl (default 15)
    --max-queue <N>       longest line; beyond it visitors get \"full\" (default 100000)
    --room <ID>           the default room's id, [A-Za-z0-9_-]{1,64}, not \"vip\"
                          (default \"demo\")
    --secret <HEX>        signing secret, at least 64 hex digits (32 bytes). Default: a
                          random key for this process only. Gateways that share a queue
                          must share this secret.
    --fail-open           let new visitors in while the store is unreachable (default)
    --fail-closed         answer new visitors \"try again soon\" while the store is down
    --fail-drain <N>      while the store is down, keep letting the front of the line in, in
                          order, at its last pace, up to N visitors (docs/scale.md)
                          (the embedded store is never unreachable; this matters with
                          --redis)
    --insecure-cookies    send cookies without the `Secure` attribute, for plain http.
                          Without it, cookies are `Secure`: browsers (and recent curl)
                          treat http://127.0.0.1 and http://localhost as secure and keep
                          them, but many other clients (Python's urllib and requests,
                          older curl, anything reaching the demo by another host name)
                          drop `Secure` cookies over http://, so every request looks like
                          a first visit and they loop on the redirect. Never use this
                          flag in production.
    --redis <URL>         share the queue through Redis/Valkey (redis://host:port); every
                          process with the same --redis, --room and --secret shares it
    --proof-of-work <BITS>
                          ask new visitors who look scripted (no User-Agent or
                          Accept-Language, or headers in an order no browser sends) to
                          solve a proof-of-work challenge (1-32 leading zero bits;
                          measured in headless Chromium: 16 bits under a second, 20 bits
                          several seconds) before joining the line; browsers go straight
                          in (default: off)
    --challenge-everyone  with --proof-of-work: every new visitor solves the challenge,
                          browsers too (a risk hook that says medium)
    --risky-networks <RANGES>
                          refuse new visitors (403, state refused) from these address
                          ranges, separated by commas (203.0.113.0/24,2001:db8::/32):
                          data centres, known bots (default: none)
    --admin-token <TOKEN> serve the admin dashboard and API at /admin (not behind the
                          room), for callers sending `Authorization: Bearer <TOKEN>`; at
                          least 32 characters. Also read from ADMIN_TOKEN. Without it,
                          there is no admin at all.
    --opens-in <SECS>     open the default room SECS seconds after start-up: until then
                          visitors are registered and shown a countdown, and at the
                          opening they stand in line in a random order, ahead of later
                          arrivals (default: open now; the vip room is always open)
    --opens-at <UNIX>     the same at a Unix time (seconds): gateways sharing a queue
                          (--redis) must open at the same time, so give them this
                          (`date -d 'now + 2 min' +%s`), not --opens-in
    --closes-in <SECS>    stop taking newcomers SECS seconds after start-up (after the
                          opening); those in line keep their place (default: never)
    --closes-at <UNIX>    the same at a Unix time (seconds)
    --single-use-tickets  each admission to the default room also gets a one-time
                          checkout ticket, and POST /checkout takes it, exactly once
                          across all gateways (a second use: 403 ticket_used); an
                          admission alone is then 403 ticket_missing (default: off)
    --auto-capacity <MIN:MAX>
                          the default room's capacity follows the app's health between
                          MIN and MAX (docs/auto-capacity.md): it grows while admitted
                          requests are fast, backs off when their p95 passes the target
                          or a queue forms, and is cut on errors (default: off)
    --latency-target-ms <MS>
                          with --auto-capacity: the p95 of admitted requests it aims at
                          (default: 300)
    --knee <K>            serve GET /work behind the default room: an app that works on
                          K requests at a time (50 ms each), queues the rest, and answers
                          503 past 2K in flight (default: off)
    --no-visitor-limit    no limit on new places per client IP (by default 60 a minute):
                          for load tests from one machine, never for a sale
    --edge-tokens         each admission to the default room also gets a short-lived
                          Ed25519 token a CDN edge can check with the room's public keys
                          (docs/edge.md); the keys from EDGE_KEYS in the environment, or
                          fresh ones at each start (default: off)
    --languages <TAGS>    the languages the pages speak, separated by commas, the first the
                          default (en,de,ar); each visitor gets theirs from Accept-Language
                          (default: all 17 built in, docs/languages.md)
    -h, --help            print this help

ROUTES:
    GET  /                          the protected page (behind the default room)
    GET  /vip                       the VIP page (behind the \"vip\" room)
    GET  /work                      with --knee: an app with a knee (behind the default room)
    POST /checkout                  gated by the default room: 200 JSON when admitted,
                                    403 {\"error\":\"not_admitted\",...} otherwise; never queued.
                                    With --single-use-tickets: 200 once per ticket, then
                                    403 {\"error\":\"ticket_used\",...}
    GET  /stats                     the room's counts as JSON (NOT behind the room)
    GET  /metrics                   the room's metrics, Prometheus text (NOT behind the room)
    GET  /__waitingroom/{room}/status   where you stand, as JSON (room: the default room
                                        or vip; clients without cookies that are admitted
                                        get their \"ticket\" for /checkout: their
                                        admission, or with --single-use-tickets their
                                        one-time ticket)
    POST /__waitingroom/{room}/leave    give up your place or slot
    POST /__waitingroom/{room}/proof    a proof-of-work solution (with --proof-of-work)
    GET  /__waitingroom/keys            with --edge-tokens: the default room's public edge
                                        keys, a JWKS (also at /__waitingroom/{room}/keys)
    GET  /admin/                    the admin dashboard (with --admin-token)
    /admin/rooms/...                the admin API (with --admin-token; docs/api.md)
";

/// What the command line asked for.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) port: u16,
    pub(crate) capacity: u32,
    pub(crate) vip_capacity: u32,
    pub(crate) rate: Option<u32>,
    pub(crate) active_ttl: Option<u64>,
    pub(crate) grant_ttl: Option<u64>,
    pub(crate) queue_ttl: Option<u64>,
    pub(crate) refresh: Option<u64>,
    pub(crate) max_queue: Option<u64>,
    pub(crate) room: String,
    pub(crate) secret: Option<String>,
    pub(crate) fail_policy: Option<FailPolicy>,
    pub(crate) insecure_cookies: bool,
    pub(crate) redis: Option<String>,
    pub(crate) proof_of_work: Option<u8>,
    pub(crate) challenge_everyone: bool,
    pub(crate) risky_networks: Vec<String>,
    pub(crate) admin_token: Option<String>,
    pub(crate) opens_in: Option<u64>,
    pub(crate) closes_in: Option<u64>,
    pub(crate) opens_at: Option<u64>,
    pub(crate) closes_at: Option<u64>,
    pub(crate) single_use_tickets: bool,
    pub(crate) auto_capacity: Option<(u32, u32)>,
    pub(crate) latency_target_ms: u64,
    pub(crate) knee: Option<usize>,
    pub(crate) no_visitor_limit: bool,
    pub(crate) edge_tokens: bool,
    pub(crate) languages: Option<Vec<String>>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            port: 3000,
            capacity: 2,
            vip_capacity: 1,
            rate: None,
            active_ttl: None,
            grant_ttl: None,
            queue_ttl: None,
            refresh: None,
            max_queue: None,
            room: "demo".to_owned(),
            secret: None,
            fail_policy: None,
            insecure_cookies: false,
            redis: None,
            proof_of_work: None,
            challenge_everyone: false,
            risky_networks: Vec::new(),
            admin_token: None,
            opens_in: None,
            closes_in: None,
            opens_at: None,
            closes_at: None,
            single_use_tickets: false,
            auto_capacity: None,
            latency_target_ms: 300,
            knee: None,
            no_visitor_limit: false,
            edge_tokens: false,
            languages: None,
        }
    }
}

/// `Ok(None)` means `--help` was asked for.
pub(crate) fn parse_args(
    args: impl IntoIterator<Item = String>,
) -> Result<Option<Options>, String> {
    let mut opts = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone().or_else(|| args.next()) {
                Some(v) => Ok(v),
                None => Err(format!("{name} needs a value")),
            }
        };
        let is_switch = matches!(
            flag.as_str(),
            "-h" | "--help"
                | "--fail-open"
                | "--fail-closed"
                | "--insecure-cookies"
                | "--single-use-tickets"
                | "--challenge-everyone"
                | "--no-visitor-limit"
        );
        if is_switch && inline.is_some() {
            return Err(format!("{flag} takes no value"));
        }
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--port" => opts.port = number(&flag, &value(&flag)?)?,
            "--capacity" => opts.capacity = positive(&flag, &value(&flag)?)?,
            "--vip-capacity" => opts.vip_capacity = positive(&flag, &value(&flag)?)?,
            "--rate" => opts.rate = Some(positive(&flag, &value(&flag)?)?),
            "--active-ttl" => opts.active_ttl = Some(positive(&flag, &value(&flag)?)?),
            "--grant-ttl" => opts.grant_ttl = Some(positive(&flag, &value(&flag)?)?),
            "--queue-ttl" => opts.queue_ttl = Some(positive(&flag, &value(&flag)?)?),
            "--refresh" => opts.refresh = Some(positive(&flag, &value(&flag)?)?),
            "--max-queue" => opts.max_queue = Some(positive(&flag, &value(&flag)?)?),
            "--room" => opts.room = value(&flag)?,
            "--secret" => opts.secret = Some(value(&flag)?),
            "--redis" => opts.redis = Some(value(&flag)?),
            "--admin-token" => opts.admin_token = Some(value(&flag)?),
            "--opens-in" => opts.opens_in = Some(number(&flag, &value(&flag)?)?),
            "--closes-in" => opts.closes_in = Some(positive(&flag, &value(&flag)?)?),
            "--opens-at" => opts.opens_at = Some(number(&flag, &value(&flag)?)?),
            "--closes-at" => opts.closes_at = Some(positive(&flag, &value(&flag)?)?),
            "--proof-of-work" => {
                let bits = value(&flag)?;
                opts.proof_of_work = Some(bits.parse().map_err(|_| {
                    format!("--proof-of-work needs a number of bits, got {bits:?}")
                })?);
            }
            "--insecure-cookies" => opts.insecure_cookies = true,
            "--challenge-everyone" => opts.challenge_everyone = true,
            "--risky-networks" => {
                let list = value(&flag)?;
                opts.risky_networks = list.split(',').map(|n| n.trim().to_owned()).collect();
            }
            "--single-use-tickets" => opts.single_use_tickets = true,
            "--auto-capacity" => {
                let v = value(&flag)?;
                let bounds = v.split_once(':').and_then(|(min, max)| {
                    Some((min.trim().parse().ok()?, max.trim().parse().ok()?))
                });
                opts.auto_capacity = Some(bounds.ok_or_else(|| {
                    format!("--auto-capacity needs MIN:MAX (such as 5:500), got {v:?}")
                })?);
            }
            "--latency-target-ms" => opts.latency_target_ms = positive(&flag, &value(&flag)?)?,
            "--knee" => opts.knee = Some(positive(&flag, &value(&flag)?)?),
            "--no-visitor-limit" => opts.no_visitor_limit = true,
            "--edge-tokens" => opts.edge_tokens = true,
            "--languages" => {
                let list = value(&flag)?;
                opts.languages = Some(
                    list.split(',')
                        .map(|t| t.trim().to_owned())
                        .filter(|t| !t.is_empty())
                        .collect(),
                );
            }
            "--fail-open" | "--fail-closed" | "--fail-drain" => {
                let policy = match flag.as_str() {
                    "--fail-open" => FailPolicy::Open,
                    "--fail-closed" => FailPolicy::Closed,
                    _ => FailPolicy::Drain {
                        budget: positive(&flag, &value(&flag)?)?,
                    },
                };
                if opts.fail_policy.is_some_and(|p| p != policy) {
                    return Err(
                        "give one of --fail-open, --fail-closed and --fail-drain".to_owned()
                    );
                }
                opts.fail_policy = Some(policy);
            }
            other if other.starts_with('-') => return Err(format!("unknown flag {other}")),
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    Ok(Some(opts))
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag} needs a whole number, got {v:?}"))
}

fn positive<T: std::str::FromStr + PartialEq + Default>(flag: &str, v: &str) -> Result<T, String> {
    let n: T = number(flag, v)?;
    if n == T::default() {
        return Err(format!("{flag} must be at least 1"));
    }
    Ok(n)
}
