//! The capacity controller on Redis ([`AutoStore`]): one record per room, a hash in the room's
//! hash tag, and three functions of the room's library (`script/auto.lua`, their arguments
//! [`calls::AutoReport`], [`calls::AutoApply`] and [`calls::AutoSwitch`]), called through the
//! store's one call path (deadline, circuit breaker, error classes, the library loaded when the
//! server has no such function). A report and a switch run on the record alone; an apply is a
//! room call, which writes the capacity as `configure` does.

use redis::Value;

use super::calls;
use super::protocol::{self, reply, Op};
use super::RedisStore;
use crate::auto::{LatencyHistogram, Window};
use crate::config::RoomPolicy;
use crate::store::auto::{check_auto_apply, check_auto_switch, check_auto_terms};
use crate::store::{
    AutoApplied, AutoOff, AutoReport, AutoStore, GatewayId, StoreError, StoreErrorKind, StoreFuture,
};

/// The largest count the script keeps (a Lua number holds every whole number up to 2^53): a
/// report's counts are sent at most this.
const MAX_COUNT: u64 = 1 << 53;

/// The key of `room`'s controller record: `{prefix}:{room}:auto`, the room as the hash tag, as
/// the room's own keys.
pub(crate) fn auto_key(prefix: &str, room: &str) -> String {
    format!("{prefix}:{{{room}}}:auto")
}

fn unexpected(reply: &[Value]) -> StoreError {
    StoreError::with_source(
        StoreErrorKind::Protocol,
        format!("unexpected capacity controller reply {reply:?}"),
    )
}

/// A report's latency buckets as the script takes them: `"<index> <count> "` for each bucket
/// that counted something.
fn latencies_arg(latencies: &LatencyHistogram) -> Vec<u8> {
    let mut text = Vec::new();
    for (index, count) in latencies.buckets() {
        text.extend_from_slice(format!("{index} {} ", count.min(MAX_COUNT)).as_bytes());
    }
    text
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

fn text(v: &Value) -> Option<&str> {
    match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

/// Why the controller is off, as the script answers it: `''` on.
fn off(v: &Value) -> Option<Option<AutoOff>> {
    match text(v)? {
        "" => Some(None),
        why => AutoOff::parse(why).map(Some),
    }
}

/// A report's reply (`script/auto.lua`'s header): `None` for any other shape.
fn report(reply: &[Value]) -> Option<AutoReport> {
    let (tag, off, deciding, status, terms, rest) = match reply {
        [tag, off, deciding, Value::Array(status), Value::Array(terms), rest @ ..] => {
            (text(tag)?, off, deciding, status, terms, rest)
        }
        _ => return None,
    };
    let off = self::off(off)?;
    let deciding = match int(deciding)? {
        0 => false,
        1 => true,
        _ => return None,
    };
    let one = |list: &[Value]| match list {
        [] => Some(None),
        [s] => Some(Some(text(s)?.to_owned())),
        _ => None,
    };
    let (status, terms) = (one(status)?, one(terms)?);
    let window = match (tag, rest) {
        ("report", []) => None,
        ("window", [start, end, ok, errors, timeouts, load, Value::Array(buckets)]) => {
            let count = |v: &Value| int(v).and_then(|n| u64::try_from(n).ok());
            let mut latencies = LatencyHistogram::new();
            let last = LatencyHistogram::bucket_of(std::time::Duration::MAX);
            for pair in buckets.chunks(2) {
                let [index, n] = pair else { return None };
                let index = usize::try_from(count(index)?).ok()?;
                if index > last {
                    return None;
                }
                latencies.add_to_bucket(index, count(n)?);
            }
            Some(Window {
                start_ms: count(start)?,
                end_ms: count(end)?,
                ok: count(ok)?,
                errors: count(errors)?,
                timeouts: count(timeouts)?,
                latencies,
                load: match int(load)? {
                    -1 => None,
                    n => Some(u8::try_from(n).ok().filter(|&l| l <= 100)?),
                },
                ..Window::default()
            })
        }
        _ => return None,
    };
    Some(AutoReport::new(off, deciding, window, status).with_terms(terms))
}

/// An apply's reply (`script/auto.lua`'s header): `None` for any other shape.
fn applied(reply: &[Value]) -> Option<AutoApplied> {
    let code = int(reply.first()?)?;
    Some(match (code, &reply[1..]) {
        (reply::AUTO_APPLIED, [before]) => AutoApplied::Applied {
            before: u32::try_from(int(before)?).ok()?,
        },
        (reply::AUTO_NOT_DECIDING, []) => AutoApplied::NotDeciding,
        (reply::AUTO_OFF, [why]) => AutoApplied::Off(off(why)??),
        (reply::AUTO_CHANGED, [_]) => AutoApplied::ChangedElsewhere,
        _ => return None,
    })
}

impl RedisStore {
    /// The room's controller record.
    fn auto_record(&self, policy: &RoomPolicy) -> String {
        auto_key(self.prefix(), &policy.room)
    }
}

impl AutoStore for RedisStore {
    fn auto_report(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        counts: &Window,
        window_ms: u64,
        lease_ms: u64,
    ) -> StoreFuture<AutoReport> {
        // Refused here as the script would refuse them (`WRARGS`): nothing is sent.
        if let Err(e) = check_auto_terms(window_ms, lease_ms) {
            return Box::pin(std::future::ready(Err(e)));
        }
        let args = calls::AutoReport {
            now: self.call_now(),
            gateway,
            window_ms,
            lease_ms,
            ok: counts.ok.min(MAX_COUNT),
            errors: counts.errors.min(MAX_COUNT),
            timeouts: counts.timeouts.min(MAX_COUNT),
            // A load beyond 100 is no load the app reports: none, as the embedded store reads it.
            load: counts.load.filter(|&l| l <= 100).map_or(-1, i64::from),
            latencies: latencies_arg(&counts.latencies),
        }
        .argv();
        let call: StoreFuture<Vec<Value>> = self.run_room(
            calls::AutoReport::FUNCTION,
            policy,
            vec![self.auto_record(policy)],
            args,
        );
        Box::pin(async move {
            let reply = call.await?;
            report(&reply).ok_or_else(|| unexpected(&reply))
        })
    }

    fn auto_apply(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        capacity: u32,
        rate: Option<u32>,
        status: &str,
    ) -> StoreFuture<AutoApplied> {
        if let Err(e) = check_auto_apply(capacity, rate, status) {
            return Box::pin(std::future::ready(Err(e)));
        }
        let args = calls::AutoApply {
            call: self.call_arg(policy),
            gateway,
            capacity: u64::from(capacity),
            rate: rate.map_or(-1, i64::from),
            status: status.to_owned(),
            schedule: protocol::schedule_arg(Op::AutoApply, policy, None),
        }
        .argv();
        let mut keys = self.room_keys(policy, None);
        keys.push(self.auto_record(policy));
        let call: StoreFuture<Vec<Value>> =
            self.run_room(calls::AutoApply::FUNCTION, policy, keys, args);
        Box::pin(async move {
            let reply = call.await?;
            applied(&reply).ok_or_else(|| unexpected(&reply))
        })
    }

    fn auto_switch(
        &self,
        policy: &RoomPolicy,
        off: Option<AutoOff>,
        terms: Option<&str>,
    ) -> StoreFuture<()> {
        if let Err(e) = check_auto_switch(terms) {
            return Box::pin(std::future::ready(Err(e)));
        }
        let args = calls::AutoSwitch {
            off: off.map_or("", AutoOff::as_str).to_owned(),
            terms: terms.map(|t| format!("t{t}")).unwrap_or_default(),
        }
        .argv();
        let call: StoreFuture<Vec<Value>> = self.run_room(
            calls::AutoSwitch::FUNCTION,
            policy,
            vec![self.auto_record(policy)],
            args,
        );
        Box::pin(async move {
            let reply = call.await?;
            let switched = match reply.as_slice() {
                [on] => text(on) == Some("on") && off.is_none(),
                [tag, why] => text(tag) == Some("off") && self::off(why) == Some(off),
                _ => false,
            };
            if switched {
                Ok(())
            } else {
                Err(unexpected(&reply))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::auto::MAX_AUTO_TERM_MS;
    use crate::store::redis::protocol::SCRIPT;
    use crate::store::MAX_AUTO_STATUS;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn the_record_shares_the_rooms_hash_tag() {
        assert_eq!(auto_key("twr", "shop"), "twr:{shop}:auto");
        let room_keys = protocol::keys("twr", "shop");
        assert!(room_keys.iter().all(|k| k.starts_with("twr:{shop}:")));
        assert!(!room_keys.contains(&auto_key("twr", "shop")));
    }

    /// The script's bounds are the crate's: the buckets a histogram has, the status a store
    /// keeps, the longest window or lease.
    #[test]
    fn the_script_shares_the_crates_bounds() {
        let last = LatencyHistogram::bucket_of(std::time::Duration::MAX);
        assert!(SCRIPT.contains(&format!("\nlocal AUTO_BUCKETS = {}\n", last + 1)));
        assert!(SCRIPT.contains(&format!("\nlocal AUTO_STATUS_MAX = {MAX_AUTO_STATUS}\n")));
        assert!(SCRIPT.contains(&format!("\nlocal AUTO_TERM_MAX = {MAX_AUTO_TERM_MS}\n")));
        for off in [AutoOff::SetByHand, AutoOff::ChangedElsewhere] {
            assert!(
                SCRIPT.contains(&format!("{} = true", off.as_str())),
                "{off:?}"
            );
        }
    }

    #[test]
    fn latencies_travel_as_pairs_and_come_back() {
        let mut h = LatencyHistogram::new();
        h.record_n(std::time::Duration::from_millis(3), 2);
        h.record(std::time::Duration::from_secs(3_600));
        let text = String::from_utf8(latencies_arg(&h)).unwrap();
        let pairs: Vec<(usize, u64)> = h.buckets().collect();
        assert_eq!(
            text,
            pairs
                .iter()
                .map(|(i, n)| format!("{i} {n} "))
                .collect::<String>()
        );
        let mut reply = vec![
            bulk("window"),
            bulk(""),
            Value::Int(1),
            Value::Array(vec![bulk("steady")]),
            Value::Array(vec![bulk("5-50, p95 300ms, errors 1%, window 5000ms")]),
        ];
        reply.extend([7, 9, 3, 1, 0, 42].map(Value::Int));
        let flat = pairs
            .iter()
            .flat_map(|&(i, n)| [Value::Int(i as i64), Value::Int(n as i64)])
            .collect();
        reply.push(Value::Array(flat));
        let got = report(&reply).unwrap();
        let window = got.window.unwrap();
        assert_eq!(window.latencies, h);
        assert_eq!(
            (window.start_ms, window.end_ms, window.ok, window.errors),
            (7, 9, 3, 1)
        );
        assert_eq!(window.load, Some(42));
        assert!(got.deciding);
        assert_eq!(got.off, None);
        assert_eq!(got.status.as_deref(), Some("steady"));
        assert_eq!(
            got.terms.as_deref(),
            Some("5-50, p95 300ms, errors 1%, window 5000ms")
        );
    }

    #[test]
    fn replies_map_to_reports_and_decisions() {
        let plain = [
            bulk("report"),
            bulk("changed_elsewhere"),
            Value::Int(0),
            Value::Array(vec![]),
            Value::Array(vec![]),
        ];
        assert_eq!(
            report(&plain),
            Some(AutoReport::new(
                Some(AutoOff::ChangedElsewhere),
                false,
                None,
                None
            ))
        );
        // Another reason, a flag that is no flag, a window without its buckets: not ours.
        let mut bad = plain.clone();
        bad[1] = bulk("tired");
        assert_eq!(report(&bad), None);
        let mut bad = plain.clone();
        bad[2] = Value::Int(2);
        assert_eq!(report(&bad), None);
        let mut bad = plain.to_vec();
        bad[0] = bulk("window");
        assert_eq!(report(&bad), None);
        // Without its terms (another version's reply), or two of them: not ours either.
        assert_eq!(report(&plain[..4]), None);
        let mut bad = plain.to_vec();
        bad[4] = Value::Array(vec![bulk("a"), bulk("b")]);
        assert_eq!(report(&bad), None);
        let int = |n: &[i64]| n.iter().map(|&n| Value::Int(n)).collect::<Vec<_>>();
        assert_eq!(
            applied(&int(&[reply::AUTO_APPLIED, 40])),
            Some(AutoApplied::Applied { before: 40 })
        );
        assert_eq!(
            applied(&int(&[reply::AUTO_NOT_DECIDING])),
            Some(AutoApplied::NotDeciding)
        );
        assert_eq!(
            applied(&[Value::Int(reply::AUTO_OFF), bulk("set_by_hand")]),
            Some(AutoApplied::Off(AutoOff::SetByHand))
        );
        assert_eq!(applied(&[Value::Int(reply::AUTO_OFF), bulk("")]), None);
        assert_eq!(
            applied(&int(&[reply::AUTO_CHANGED, 12])),
            Some(AutoApplied::ChangedElsewhere)
        );
        assert_eq!(applied(&int(&[reply::AUTO_APPLIED, -1])), None);
        assert_eq!(applied(&int(&[reply::SETTINGS, 1, 0, 0, 1])), None);
        assert_eq!(applied(&[]), None);
    }
}
