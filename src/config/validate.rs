//! Checks of the settings: every check the builder makes, in one place (keys check their own
//! secrets and ids when they are made, since [`SigningKey`](crate::SigningKey) is built by users
//! too).

use std::time::Duration;

use http::HeaderName;

use super::settings::Settings;
use super::{ConfigError, CookieSettings, SameSite, MAX_ROOM_ID_LEN};
use crate::clock::duration_ms;
use crate::defences::proof_of_work::{MAX_DIFFICULTY, MIN_DIFFICULTY};
use crate::defences::risk::Networks;
use crate::defences::{ProofOfWork, RateLimit};
use crate::encoding::is_plain_id;
use crate::token::{Keyring, SigningKey};
use crate::vocab::Rule;

/// What [`settings`] makes of valid settings.
pub(crate) struct Checked {
    /// The settings, with the defaults that follow from other settings resolved: a room's
    /// settings say what it does, whether a value was left to its default or set to it.
    pub(crate) settings: Settings,
    pub(crate) capacity: u32,
    pub(crate) cookies: CookieSettings,
    pub(crate) queue_header: HeaderName,
    pub(crate) token_header: HeaderName,
    pub(crate) client_ip_header: Option<HeaderName>,
    pub(crate) proof_of_work: Option<ProofOfWork>,
    pub(crate) risky_networks: Networks,
}

/// Every setting of the room `room` and its gates, in a fixed order: the first one refused is
/// the error.
pub(crate) fn settings(
    room: &str,
    mut s: Settings,
    gates: &[Rule],
) -> Result<Checked, ConfigError> {
    let capacity = numbers_and_durations(room, &s)?;
    let cookie_name = s.cookie_name.take().unwrap_or_else(|| format!("wr_{room}"));
    let cookies = cookie_settings(
        &cookie_name,
        &s.cookie_path,
        s.cookie_domain.as_deref(),
        s.secure_cookies,
        s.same_site,
    )?;
    if !cookie_path_covers(&s.cookie_path, &s.path_prefix) {
        return Err(ConfigError::CookiePathMissesEndpoints {
            cookie_path: s.cookie_path.clone(),
            path_prefix: s.path_prefix.clone(),
        });
    }
    let (queue_header, token_header) = value_headers(&s.queue_header, &s.token_header)?;
    for (setting, limit) in [
        ("new_visitor_limit", s.new_visitor_limit),
        ("poll_limit", s.poll_limit),
    ] {
        if limit.is_some_and(|l| !valid_rate_limit(&l)) {
            return Err(ConfigError::InvalidRateLimit { setting });
        }
    }
    let proof_of_work = s.proof_of_work();
    if proof_of_work.is_some_and(|p| !valid_proof_of_work(&p)) {
        return Err(ConfigError::InvalidProofOfWork);
    }
    let risky_networks =
        Networks::parse(s.risky_networks.iter().map(String::as_str)).map_err(|network| {
            ConfigError::InvalidNetwork {
                network: network.to_owned(),
            }
        })?;
    if let Some(rule) = gates.iter().find(|rule| !rule.is_valid()) {
        return Err(ConfigError::InvalidRule {
            rule: rule.describe(),
        });
    }
    if let (Some(opens), Some(closes)) = (s.opens_at, s.closes_at) {
        if closes <= opens {
            return Err(ConfigError::ClosesBeforeOpening);
        }
    }
    let client_ip_header = s
        .client_ip_header
        .as_deref()
        .map(|name| header_name(name, "client_ip_header"))
        .transpose()?;
    s.cookie_name = Some(cookie_name);
    s.abandon_after = Some(s.effective_abandon_after());
    s.proof_of_work_challenge_ttl = proof_of_work.map(|p| p.challenge_ttl());
    Ok(Checked {
        settings: s,
        capacity,
        cookies,
        queue_header,
        token_header,
        client_ip_header,
        proof_of_work,
        risky_networks,
    })
}

/// The room id, capacity, admission rate, line length, durations and path prefix. Returns the
/// capacity.
fn numbers_and_durations(room: &str, s: &Settings) -> Result<u32, ConfigError> {
    if !valid_room_id(room) {
        return Err(ConfigError::InvalidRoomId {
            room: room.to_owned(),
        });
    }
    let capacity = match s.capacity {
        Some(c) if c > 0 => c,
        _ => return Err(ConfigError::MissingCapacity),
    };
    if s.admission_rate == Some(0) {
        return Err(ConfigError::ZeroAdmissionRate);
    }
    if s.max_queue_len == 0 {
        return Err(ConfigError::ZeroMaxQueueLen);
    }
    for (setting, d) in [
        ("active_ttl", s.active_ttl),
        ("grant_ttl", s.grant_ttl),
        ("queue_ttl", s.queue_ttl),
        ("abandon_after", s.effective_abandon_after()),
        ("refresh", s.refresh),
        ("session_ttl", s.session_ttl),
    ] {
        if !valid_duration(d) {
            return Err(ConfigError::InvalidDuration { setting });
        }
    }
    if s.max_queue_len > crate::store::MAX_QUEUE_LEN_LIMIT {
        return Err(ConfigError::BeyondStoreLimit {
            setting: "max_queue_len",
        });
    }
    for (setting, d) in [
        ("active_ttl", s.active_ttl),
        ("grant_ttl", s.grant_ttl),
        ("queue_ttl", s.queue_ttl),
        ("abandon_after", s.effective_abandon_after()),
    ] {
        if duration_ms(d) > crate::store::MAX_STORED_TTL_MS {
            return Err(ConfigError::BeyondStoreLimit { setting });
        }
    }
    if s.refresh >= s.active_ttl {
        return Err(ConfigError::RefreshNotShorterThanActiveTtl);
    }
    if s.abandon_after.is_some_and(|a| a < s.queue_ttl) {
        return Err(ConfigError::AbandonAfterShorterThanQueueTtl);
    }
    if !valid_path_prefix(&s.path_prefix) {
        return Err(ConfigError::InvalidPathPrefix {
            prefix: s.path_prefix.clone(),
        });
    }
    Ok(capacity)
}

/// Whole milliseconds, and far from overflowing when added to a timestamp.
pub(crate) fn valid_duration(d: Duration) -> bool {
    d.as_millis() > 0 && duration_ms(d) <= u64::MAX / 4
}

/// At least one event per window of at least a millisecond.
pub(crate) fn valid_rate_limit(limit: &RateLimit) -> bool {
    limit.max() > 0 && valid_duration(limit.per())
}

/// A difficulty in range, and a challenge that lives at least a second.
pub(crate) fn valid_proof_of_work(pow: &ProofOfWork) -> bool {
    (MIN_DIFFICULTY..=MAX_DIFFICULTY).contains(&pow.difficulty())
        && pow.challenge_ttl() >= Duration::from_secs(1)
        && valid_duration(pow.challenge_ttl())
}

pub(crate) fn valid_room_id(room: &str) -> bool {
    is_plain_id(room, MAX_ROOM_ID_LEN)
}

/// A prefix of the room's endpoints: `/` then segments of URL path characters, none empty and
/// none `.` or `..` (a request's path with one is refused or resolved before it reaches the
/// room, so endpoints under such a prefix could never be reached).
pub(crate) fn valid_path_prefix(prefix: &str) -> bool {
    prefix.len() > 1
        && prefix.starts_with('/')
        && !prefix.ends_with('/')
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b))
        && prefix[1..]
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

/// Cookie names are RFC 6265 tokens (long enough for `wr_` + the longest room id + `_q`).
pub(crate) fn valid_cookie_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Path and domain attribute values: visible ASCII without `;` or `,`.
pub(crate) fn valid_cookie_attr(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| (0x21..0x7f).contains(&b) && b != b';' && b != b',')
}

/// Whether a browser sends a cookie of `cookie_path` with a request for `path` (RFC 6265's
/// path match, by segments: `/shop` covers `/shop` and `/shop/cart`, not `/shopping`).
fn cookie_path_covers(cookie_path: &str, path: &str) -> bool {
    cookie_path == path
        || path
            .strip_prefix(cookie_path)
            .is_some_and(|rest| cookie_path.ends_with('/') || rest.starts_with('/'))
}

/// The room's cookie settings: `{base}_q`, `{base}_a` and `{base}_t`, with their attributes
/// checked.
pub(crate) fn cookie_settings(
    base: &str,
    path: &str,
    domain: Option<&str>,
    secure: bool,
    same_site: SameSite,
) -> Result<CookieSettings, ConfigError> {
    if !valid_cookie_name(base) {
        return Err(ConfigError::InvalidCookieSetting { setting: "name" });
    }
    if !valid_cookie_attr(path) || !path.starts_with('/') {
        return Err(ConfigError::InvalidCookieSetting { setting: "path" });
    }
    if domain.is_some_and(|d| !valid_cookie_attr(d)) {
        return Err(ConfigError::InvalidCookieSetting { setting: "domain" });
    }
    if same_site == SameSite::None && !secure {
        return Err(ConfigError::SameSiteNoneNeedsSecure);
    }
    Ok(CookieSettings {
        queue_name: super::CookieName::new(format!("{base}_q")),
        admission_name: super::CookieName::new(format!("{base}_a")),
        ticket_name: super::CookieName::new(format!("{base}_t")),
        edge_name: super::CookieName::new(format!("{base}_e")),
        path: path.to_owned(),
        domain: domain.map(str::to_owned),
        secure,
        same_site,
    })
}

/// A header name from a setting.
pub(crate) fn header_name(name: &str, setting: &'static str) -> Result<HeaderName, ConfigError> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| ConfigError::InvalidHeaderName { setting })
}

/// The queue and token headers, which must differ.
pub(crate) fn value_headers(
    queue: &str,
    token: &str,
) -> Result<(HeaderName, HeaderName), ConfigError> {
    let queue = header_name(queue, "queue_header")?;
    let token = header_name(token, "token_header")?;
    if queue == token {
        return Err(ConfigError::InvalidHeaderName {
            setting: "token_header",
        });
    }
    Ok((queue, token))
}

/// The keyring from the current and the previous key, which must have different ids.
pub(crate) fn keyring(
    current: Option<Result<SigningKey, ConfigError>>,
    previous: Option<Result<SigningKey, ConfigError>>,
) -> Result<Keyring, ConfigError> {
    let mut keys = Keyring::new(current.ok_or(ConfigError::MissingSigningKey)??);
    if let Some(previous) = previous {
        keys = keys.with_previous(previous?);
    }
    if let Some(id) = keys.duplicate_id() {
        return Err(ConfigError::DuplicateKeyId { id: id.to_owned() });
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proof_of_work_settings_are_validated() {
        assert!(valid_proof_of_work(&ProofOfWork::new(1)));
        assert!(valid_proof_of_work(&ProofOfWork::new(32)));
        assert!(!valid_proof_of_work(&ProofOfWork::new(0)));
        assert!(!valid_proof_of_work(&ProofOfWork::new(33)));
        assert!(!valid_proof_of_work(
            &ProofOfWork::new(10).with_challenge_ttl(Duration::from_millis(10))
        ));
    }

    #[test]
    fn rate_limits_and_durations_are_validated() {
        assert!(valid_rate_limit(&RateLimit::per_second(1)));
        assert!(!valid_rate_limit(&RateLimit::per_second(0)));
        assert!(!valid_rate_limit(&RateLimit::new(
            5,
            Duration::from_micros(500)
        )));
        assert!(!valid_duration(Duration::ZERO));
        assert!(!valid_duration(Duration::MAX));
    }
}
