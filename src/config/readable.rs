//! Readable values of the settings: durations (`"30s"`, `"2h30m"`), rate limits (`"60/1m"`),
//! fail policies, `SameSite` values, and the serde functions that read them into
//! [`Settings`](super::settings::Settings)' fields. A refused value's message is
//! ``"`{value}` {problem}"``; the caller, who knows the key or the variable, names it.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::{self, Deserialize, Deserializer, Visitor};

use super::{FailPolicy, SameSite};
use crate::auto::AutoCapacity;
use crate::defences::RateLimit;

pub(crate) const DURATION_HINT: &str = "is not a duration; write e.g. 30s, 5m, 1h";

/// Why a duration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DurationError {
    /// Empty, a sign, a space, a fraction, a unit without a number...
    Malformed,
    /// A unit other than `ms`, `s`, `m`, `h`, `d`.
    UnknownUnit,
    /// Units out of order (`30s1m`) or repeated.
    Order,
    /// More milliseconds than fit in 64 bits.
    Overflow,
}

impl DurationError {
    fn problem(self) -> String {
        match self {
            DurationError::Malformed | DurationError::UnknownUnit => DURATION_HINT.to_owned(),
            DurationError::Order => {
                format!("{DURATION_HINT} (largest unit first, each unit at most once, as in 2h30m)")
            }
            DurationError::Overflow => "is too long a duration".to_owned(),
        }
    }
}

/// Parses a readable duration: `250ms`, `30s`, `5m`, `1h`, `2h30m`, `1d`, or a bare whole
/// number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Malformed);
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        let secs: u64 = text.parse().map_err(|_| DurationError::Overflow)?;
        return from_units(secs, 1_000);
    }
    let mut rest = text;
    let mut total_ms: u64 = 0;
    // The rank of the last unit, to keep them largest first and each at most once.
    let mut last_rank = usize::MAX;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(DurationError::Malformed);
        }
        let letters = rest[digits..]
            .bytes()
            .take_while(u8::is_ascii_alphabetic)
            .count();
        let (number, unit) = (&rest[..digits], &rest[digits..digits + letters]);
        rest = &rest[digits + letters..];
        let (rank, ms_per_unit) = match unit {
            "d" => (4, 86_400_000),
            "h" => (3, 3_600_000),
            "m" => (2, 60_000),
            "s" => (1, 1_000),
            "ms" => (0, 1),
            "" => return Err(DurationError::Malformed),
            _ => return Err(DurationError::UnknownUnit),
        };
        if rank >= last_rank {
            return Err(DurationError::Order);
        }
        last_rank = rank;
        let n: u64 = number.parse().map_err(|_| DurationError::Overflow)?;
        let part = n.checked_mul(ms_per_unit).ok_or(DurationError::Overflow)?;
        total_ms = total_ms.checked_add(part).ok_or(DurationError::Overflow)?;
    }
    Ok(Duration::from_millis(total_ms))
}

fn from_units(n: u64, ms_per_unit: u64) -> Result<Duration, DurationError> {
    n.checked_mul(ms_per_unit)
        .map(Duration::from_millis)
        .ok_or(DurationError::Overflow)
}

fn duration_setting(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(DurationError::problem)
}

pub(crate) fn parse_number<T: std::str::FromStr>(text: &str, max: u64) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("is not a whole number from 0 to {max}"))
}

pub(crate) fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("is not a boolean; write true or false".to_owned()),
    }
}

fn parse_fail_policy(text: &str) -> Result<FailPolicy, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "open" => Ok(FailPolicy::Open),
        "closed" => Ok(FailPolicy::Closed),
        "drain" => Ok(FailPolicy::drain()),
        other => match other
            .strip_prefix("drain:")
            .map(|n| n.trim().parse::<u64>())
        {
            Some(Ok(budget)) => Ok(FailPolicy::Drain { budget }),
            _ => {
                Err("is not a fail policy; write open, closed, drain or drain:<budget>".to_owned())
            }
        },
    }
}

fn parse_same_site(text: &str) -> Result<SameSite, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "lax" => Ok(SameSite::Lax),
        "strict" => Ok(SameSite::Strict),
        "none" => Ok(SameSite::None),
        _ => Err("is not a SameSite value; write lax, strict or none".to_owned()),
    }
}

/// `"<max>/<duration>"` (`60/1m`, `30/10s`, `5/s`: a unit alone is one of it), or `"off"`.
fn parse_rate_limit(text: &str) -> Result<Option<RateLimit>, String> {
    const HINT: &str = "is not a rate limit; write e.g. 60/1m, 30/10s, or off";
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let (max, per) = text.split_once('/').ok_or_else(|| HINT.to_owned())?;
    let max: u32 = max.trim().parse().map_err(|_| HINT.to_owned())?;
    let per = per.trim();
    let per = if per.starts_with(|c: char| c.is_ascii_alphabetic()) {
        parse_duration(&format!("1{per}"))
    } else {
        parse_duration(per)
    }
    .map_err(|_| HINT.to_owned())?;
    Ok(Some(RateLimit::new(max, per)))
}

/// The message of a refused value: the value, then what is wrong with it.
pub(crate) fn refused(value: impl fmt::Display, problem: impl fmt::Display) -> String {
    format!("`{value}` {problem}")
}

// ===== serde: the field types' readers =====

/// A string or whole number, handed to `parse` as text.
struct Text<F> {
    expecting: &'static str,
    numbers: bool,
    parse: F,
}

impl<'de, T, F: FnOnce(&str) -> Result<T, String>> Visitor<'de> for Text<F> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.parse)(v).map_err(|problem| E::custom(refused(v, problem)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        if self.numbers {
            self.visit_str(&v.to_string())
        } else {
            Err(E::invalid_type(de::Unexpected::Unsigned(v), &self))
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) if self.numbers => Err(E::custom(refused(
                v,
                format_args!("{DURATION_HINT} (not negative)"),
            ))),
            Err(_) => Err(E::invalid_type(de::Unexpected::Signed(v), &self)),
        }
    }
}

fn text<'de, D, T>(
    d: D,
    expecting: &'static str,
    numbers: bool,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    d.deserialize_any(Text {
        expecting,
        numbers,
        parse,
    })
}

/// A readable duration.
pub(crate) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let expecting = "a duration such as \"30s\", \"5m\" or \"1h\"";
    text(d, expecting, true, duration_setting)
}

/// A readable duration, for a setting that has none by default.
pub(crate) fn some_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// Addresses and address ranges, one string separated by commas (surrounding spaces ignored);
/// the builder checks each one.
pub(crate) fn networks<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let expecting =
        "addresses and ranges separated by commas, such as \"203.0.113.0/24, 2001:db8::/32\"";
    text(d, expecting, false, |list| Ok(split_list(list)))
}

/// The items of a list separated by commas, trimmed, empty ones dropped.
fn split_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Auto capacity's terms (`"20-2000, p95 300ms"`, then optionally `errors 1%`, `window 5s`
/// and `rate follows`), or `"off"` (`None`); the builder checks them.
pub(crate) fn auto_capacity<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<AutoCapacity>, D::Error> {
    let expecting = "auto capacity's terms such as \"20-2000, p95 300ms\", or \"off\"";
    text(d, expecting, false, parse_auto_capacity)
}

pub(crate) fn parse_auto_capacity(text: &str) -> Result<Option<AutoCapacity>, String> {
    const HINT: &str = "is not auto capacity's terms; write e.g. \"20-2000, p95 300ms\" \
                        (optionally \", errors 1%, window 5s, rate follows\"), or off";
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let hint = || refused(text, HINT);
    let mut parts = text.split(',').map(str::trim);
    let (min, max) = parts
        .next()
        .and_then(|bounds| bounds.split_once('-'))
        .and_then(|(min, max)| Some((min.trim().parse().ok()?, max.trim().parse().ok()?)))
        .ok_or_else(hint)?;
    let (mut target, mut budget, mut window, mut rate_follows) = (None, None, None, false);
    for part in parts {
        if part.split_whitespace().eq(["rate", "follows"]) && !rate_follows {
            rate_follows = true;
            continue;
        }
        let (name, value) = part.split_once(char::is_whitespace).ok_or_else(hint)?;
        let value = value.trim();
        match name {
            "p95" if target.is_none() => {
                target = Some(parse_duration(value).map_err(|_| hint())?);
            }
            "errors" if budget.is_none() => {
                let percent: f64 = value
                    .strip_suffix('%')
                    .and_then(|p| p.trim().parse().ok())
                    .ok_or_else(hint)?;
                budget = Some(percent / 100.0);
            }
            "window" if window.is_none() => {
                window = Some(parse_duration(value).map_err(|_| hint())?);
            }
            _ => return Err(hint()),
        }
    }
    let mut terms = AutoCapacity::new(min, max, target.ok_or_else(hint)?);
    if let Some(budget) = budget {
        terms = terms.error_budget(budget);
    }
    if let Some(window) = window {
        terms = terms.window(window);
    }
    Ok(Some(terms.rate_follows(rate_follows)))
}

/// A rate limit, or `"off"` (`None`).
pub(crate) fn rate_limit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RateLimit>, D::Error> {
    let expecting = "a rate limit such as \"60/1m\", or \"off\"";
    text(d, expecting, false, parse_rate_limit)
}

pub(crate) fn fail_policy<'de, D: Deserializer<'de>>(d: D) -> Result<FailPolicy, D::Error> {
    text(d, "\"open\" or \"closed\"", false, parse_fail_policy)
}

pub(crate) fn same_site<'de, D: Deserializer<'de>>(d: D) -> Result<SameSite, D::Error> {
    text(d, "\"lax\", \"strict\" or \"none\"", false, parse_same_site)
}

/// Unix seconds (a whole number).
pub(crate) fn unix_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SystemTime>, D::Error> {
    let Some(secs) = Option::<u64>::deserialize(d)? else {
        return Ok(None);
    };
    UNIX_EPOCH
        .checked_add(Duration::from_secs(secs))
        .map(Some)
        .ok_or_else(|| de::Error::custom(refused(secs, "is too far in the future")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_capacity_terms_read_as_written_and_nothing_else() {
        let ms = Duration::from_millis;
        let terms = parse_auto_capacity(" 20-2000, p95 300ms ")
            .unwrap()
            .unwrap();
        assert_eq!(terms, AutoCapacity::new(20, 2000, ms(300)));
        let terms = parse_auto_capacity("5 - 50, p95 1s, errors 2.5%, window 10s")
            .unwrap()
            .unwrap();
        assert_eq!(
            terms,
            AutoCapacity::new(5, 50, ms(1000))
                .error_budget(0.025)
                .window(ms(10_000))
        );
        assert_eq!(parse_auto_capacity("OFF"), Ok(None));
        let follows = parse_auto_capacity("5-50, p95 1s, rate  follows")
            .unwrap()
            .unwrap();
        assert!(follows.get_rate_follows());
        for bad in [
            "20-2000, p95 300ms, rate follows, rate follows",
            "20-2000, p95 300ms, rate",
            "20-2000, p95 300ms, rate follow",
            "",
            "20",
            "20-2000",
            "20-x, p95 300ms",
            "20-2000, p95",
            "20-2000, p95 fast",
            "20-2000, p95 300ms, p95 200ms",
            "20-2000, p95 300ms, errors 1",
            "20-2000, p95 300ms, burst 5",
            "-5-10, p95 1s",
        ] {
            let e = parse_auto_capacity(bad).unwrap_err();
            assert!(e.contains("20-2000, p95 300ms"), "{bad:?}: {e}");
        }
    }

    fn ms(n: u64) -> Result<Duration, DurationError> {
        Ok(Duration::from_millis(n))
    }

    #[test]
    fn readable_durations() {
        assert_eq!(parse_duration("250ms"), ms(250));
        assert_eq!(parse_duration("30s"), ms(30_000));
        assert_eq!(parse_duration("5m"), ms(300_000));
        assert_eq!(parse_duration("1h"), ms(3_600_000));
        assert_eq!(parse_duration("2h30m"), ms(9_000_000));
        assert_eq!(parse_duration("1d"), ms(86_400_000));
        assert_eq!(parse_duration("1h1m1s1ms"), ms(3_661_001));
        assert_eq!(parse_duration("90"), ms(90_000));
        assert_eq!(parse_duration(" 45s "), ms(45_000));
        assert_eq!(parse_duration("0s"), ms(0));
    }

    #[test]
    fn bad_durations_are_refused() {
        use DurationError::*;
        for (text, why) in [
            ("", Malformed),
            ("   ", Malformed),
            ("-5s", Malformed),
            ("-5", Malformed),
            ("+5s", Malformed),
            ("s", Malformed),
            ("5 m", Malformed),
            ("1.5s", Malformed),
            ("5 minutes", Malformed),
            ("5minutes", UnknownUnit),
            ("5sec", UnknownUnit),
            ("5y", UnknownUnit),
            ("5µs", Malformed),
            ("30s1m", Order),
            ("5m5m", Order),
            ("18446744073709551616", Overflow),
            ("18446744073709551615", Overflow),
            ("18446744073709552s", Overflow),
            ("213503982335d", Overflow),
            ("18446744073709551615ms1ms", Order),
            ("18446744073709551s18446744073709551ms", Overflow),
        ] {
            assert_eq!(parse_duration(text), Err(why), "{text:?}");
        }
        // The largest: u64::MAX milliseconds.
        assert_eq!(
            parse_duration("18446744073709551615ms"),
            ms(u64::MAX),
            "the largest"
        );
    }

    #[test]
    fn rate_limits() {
        assert_eq!(
            parse_rate_limit("60/1m"),
            Ok(Some(RateLimit::per_minute(60)))
        );
        assert_eq!(
            parse_rate_limit("30/10s"),
            Ok(Some(RateLimit::new(30, Duration::from_secs(10))))
        );
        assert_eq!(parse_rate_limit("5/s"), Ok(Some(RateLimit::per_second(5))));
        assert_eq!(parse_rate_limit("OFF"), Ok(None));
        for bad in ["60", "60/", "/1m", "x/1m", "60/1y", "-1/1m", "60/5 minutes"] {
            assert!(parse_rate_limit(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn numbers_and_booleans() {
        assert_eq!(parse_number::<u32>("500", 0), Ok(500));
        assert_eq!(
            parse_number::<u8>("300", 255),
            Err("is not a whole number from 0 to 255".to_owned())
        );
        assert!(parse_number::<u64>("-1", u64::MAX).is_err());
        assert_eq!(parse_bool("TRUE"), Ok(true));
        assert_eq!(parse_bool("0"), Ok(false));
        assert!(parse_bool("maybe").is_err());
    }
}
