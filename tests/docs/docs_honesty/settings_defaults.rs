//! The defaults of `docs/configuration.md` that the rendering cannot vouch for, checked against a
//! built room: the words of a default that is unset, the limits and the cookies as a room really
//! applies them, and the hand-written table of the settings set in code only.

use super::{
    app, builder, clocked, file_duration, file_rate, first_visit, layer, number, read, request,
    send, setting, spans, status_path, table, Answer, CONFIGURATION, NOT_CHECKED,
};

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use http::{header, HeaderValue, Method, Request, StatusCode};
use tower_waiting_room::{ConfigError, PeerAddr, ProofOfWork, SigningKey, WaitingRoomLayer};

// ===== the settings table: what the rendering cannot vouch for =====

/// Compares one documented default with the room. `Ok(None)` when the setting has no check
/// here, `Ok(Some(()))` when it matches, `Err(why)` otherwise.
async fn check(setting: &str, default: &str) -> Result<Option<()>, String> {
    let l = layer();
    let c = l.config();
    let p = c.policy();
    let eq = |what: &str, doc: String, code: String| {
        if doc == code {
            Ok(Some(()))
        } else {
            Err(format!("{what}: documented {doc}, the room has {code}"))
        }
    };
    let words = |want: &str| {
        if default == want {
            Ok(())
        } else {
            Err(format!("expected {want:?}, the docs say {default:?}"))
        }
    };
    match setting {
        // The generated table's unset defaults.
        "capacity" => required(
            default,
            builder_without_capacity(),
            ConfigError::MissingCapacity,
        ),
        "admission_rate" => {
            words("none")?;
            eq(
                "admission rate",
                "None".into(),
                format!("{:?}", p.admission_rate),
            )
        }
        "abandon_after" => abandon_after(default),
        "cookie_name" => {
            let base = first_span(default)?
                .trim_matches('"')
                .replace("{room}", c.room());
            eq(
                "cookie names",
                format!("{base}_q / {base}_a / {base}_t"),
                format!(
                    "{} / {} / {}",
                    c.cookies().queue_name(),
                    c.cookies().admission_name(),
                    c.cookies().ticket_name()
                ),
            )
        }
        "cookie_domain" => {
            words("unset (host-only cookies)")?;
            let (set, _) = first_visit(&app(layer())).await;
            if set.contains("Domain=") {
                return Err(format!("the queue cookie has a Domain: {set}"));
            }
            eq(
                "cookie domain",
                "None".into(),
                format!("{:?}", c.cookies().domain()),
            )
        }
        "client_ip_header" | "client_ip_with" => client_ip_default(default).await,
        "proof_of_work" => proof_of_work_off(default).await,
        "proof_of_work_challenge_ttl" => {
            let ttl = file_duration(&first_span(default)?)
                .ok_or_else(|| format!("no duration in {default:?}"))?;
            eq(
                "challenge lifetime",
                format!("{ttl:?}"),
                format!("{:?}", ProofOfWork::new(8).challenge_ttl()),
            )
        }
        "risky_networks" => risky_networks_none(default).await,
        "opens_at" => {
            words("none (open now)")?;
            // Open now: a second visit is admitted.
            let app = app(layer());
            let (_, cookie) = first_visit(&app).await;
            let a = send(&app, request(Method::GET, "/", Some(&cookie))).await;
            if a.status != StatusCode::OK {
                return Err(format!(
                    "a visitor of a new room got {}: {}",
                    a.status, a.body
                ));
            }
            eq("schedule", "None".into(), format!("{:?}", p.schedule))
        }
        "closes_at" => {
            words("none")?;
            eq("schedule", "None".into(), format!("{:?}", p.schedule))
        }
        // Written defaults whose effect is checked on a room.
        "new_visitor_limit" => new_visitor_limit(default).await,
        "poll_limit" => poll_limit(default).await,
        "keep_line_after_close" => {
            let doc = match first_span(default)?.as_str() {
                "false" => false,
                "true" => true,
                other => return Err(format!("not true/false: {other:?}")),
            };
            let scheduled = builder()
                .opens_at(std::time::UNIX_EPOCH)
                .build()
                .map_err(|e| e.to_string())?;
            let keeps = scheduled
                .config()
                .policy()
                .schedule
                .as_ref()
                .map(|s| s.keep_line_after_close);
            eq(
                "keep_line_after_close",
                format!("{:?}", Some(doc)),
                format!("{keeps:?}"),
            )
        }
        // The settings set in code only.
        "secret/signing_key/previous_signing_key/keyring" => secrets_row(default),
        "risk" => risk_default(default).await,
        _ => Ok(None),
    }
}

fn first_span(cell: &str) -> Result<String, String> {
    spans(cell)
        .into_iter()
        .next()
        .ok_or_else(|| format!("no `code` in {cell:?}"))
}

fn builder_without_capacity() -> Result<WaitingRoomLayer, ConfigError> {
    WaitingRoomLayer::builder("x").secret([7u8; 32]).build()
}

fn required(
    default: &str,
    built: Result<WaitingRoomLayer, ConfigError>,
    want: ConfigError,
) -> Result<Option<()>, String> {
    if default != "required" {
        return Err(format!("expected \"required\", the docs say {default:?}"));
    }
    match built {
        Err(e) if e == want => Ok(Some(())),
        Err(e) => Err(format!("without it the builder says {e:?}, not {want:?}")),
        Ok(_) => Err("documented as required, but the room builds without it".into()),
    }
}

/// `"30m"`, or `queue_ttl` if longer.
fn abandon_after(default: &str) -> Result<Option<()>, String> {
    let after = file_duration(&first_span(default)?)
        .ok_or_else(|| format!("no duration in {default:?}"))?;
    if !default.contains("`queue_ttl` if longer") {
        return Err(format!(
            "expected \"... or `queue_ttl` if longer\": {default:?}"
        ));
    }
    let ms = |d: Duration| d.as_millis() as u64;
    let got = layer().config().policy().abandon_after_ms;
    if got != ms(after) {
        return Err(format!("documented {after:?}, the room has {got} ms"));
    }
    let longer = after + Duration::from_secs(600);
    let stretched = builder()
        .queue_ttl(longer)
        .build()
        .map_err(|e| e.to_string())?
        .config()
        .policy()
        .abandon_after_ms;
    if stretched != ms(longer) {
        return Err(format!(
            "with queue_ttl {longer:?}, abandon_after is {stretched} ms"
        ));
    }
    Ok(Some(()))
}

/// Keys are required; secrets have at least 32 bytes; `from_hex` takes 64+ hex digits.
fn secrets_row(default: &str) -> Result<Option<()>, String> {
    if default != "required" {
        return Err(format!("expected \"required\", the docs say {default:?}"));
    }
    let missing = WaitingRoomLayer::builder("x").capacity(1).build().err();
    if missing != Some(ConfigError::MissingSigningKey) {
        return Err(format!("without a key the builder says {missing:?}"));
    }
    Ok(Some(()))
}

/// The meaning cell of the secrets row: "secrets of at least N bytes" and
/// "`SigningKey::from_hex` takes M+ hex digits".
fn secret_lengths(meaning: &str) -> Result<(), String> {
    let bytes = meaning
        .find("at least ")
        .and_then(|i| number(&meaning[i..]))
        .ok_or_else(|| format!("no \"at least N bytes\" in {meaning:?}"))? as usize;
    let short = WaitingRoomLayer::builder("x")
        .capacity(1)
        .secret(vec![7u8; bytes - 1])
        .build();
    if !matches!(short, Err(ConfigError::SecretTooShort { .. })) {
        return Err(format!("a secret of {} bytes is not refused", bytes - 1));
    }
    if let Err(e) = builder_with_secret(vec![7u8; bytes]) {
        return Err(format!("a secret of {bytes} bytes is refused: {e:?}"));
    }
    let digits = meaning
        .find("from_hex")
        .and_then(|i| number(&meaning[i..]))
        .ok_or_else(|| format!("no hex digit count after from_hex in {meaning:?}"))?
        as usize;
    if SigningKey::from_hex("k", &"ab".repeat(digits / 2 - 1)).is_ok() {
        return Err(format!("from_hex takes {} hex digits", digits - 2));
    }
    if let Err(e) = SigningKey::from_hex("k", &"ab".repeat(digits / 2)) {
        return Err(format!("from_hex refuses {digits} hex digits: {e:?}"));
    }
    Ok(())
}

fn builder_with_secret(secret: Vec<u8>) -> Result<WaitingRoomLayer, ConfigError> {
    WaitingRoomLayer::builder("x")
        .capacity(1)
        .secret(secret)
        .build()
}

/// `max` first visits from one address pass, the next one is `429` asking to wait at most
/// `per`; the address is still limited just before `per` has passed, and free again after two
/// windows.
async fn new_visitor_limit(default: &str) -> Result<Option<()>, String> {
    let (max, per) = file_rate(default).ok_or_else(|| format!("no rate in {default:?}"))?;
    let (app, clock) = clocked(builder());
    // One client address, a new source port (connection) every time.
    let port = std::cell::Cell::new(1024u16);
    let visit = || {
        let mut req = request(Method::GET, "/", None);
        port.set(port.get() + 1);
        req.extensions_mut()
            .insert(PeerAddr(SocketAddr::from(([203, 0, 113, 7], port.get()))));
        req
    };
    for i in 1..=max {
        let a = send(&app, visit()).await;
        if a.status != StatusCode::FOUND {
            return Err(format!("first visit {i} of {max} got {}", a.status));
        }
    }
    limited(
        send(&app, visit()).await,
        max,
        per,
        "first visits from one address",
    )?;
    clock.advance(per - Duration::from_millis(1));
    let a = send(&app, visit()).await;
    if a.status != StatusCode::TOO_MANY_REQUESTS {
        return Err(format!("limited for less than {per:?}: {}", a.status));
    }
    clock.advance(per + Duration::from_millis(1));
    let a = send(&app, visit()).await;
    if a.status != StatusCode::FOUND {
        return Err(format!(
            "still limited two windows of {per:?} later: {}",
            a.status
        ));
    }
    Ok(Some(()))
}

/// `max` status polls of one session pass, the next is `429` (same shape as above).
async fn poll_limit(default: &str) -> Result<Option<()>, String> {
    let (max, per) = file_rate(default).ok_or_else(|| format!("no rate in {default:?}"))?;
    let (app, clock) = clocked(builder());
    let (_, cookie) = first_visit(&app).await;
    let poll = || request(Method::GET, status_path(), Some(&cookie));
    for i in 1..=max {
        let a = send(&app, poll()).await;
        if a.status != StatusCode::OK {
            return Err(format!("poll {i} of {max} got {}", a.status));
        }
    }
    limited(send(&app, poll()).await, max, per, "polls of one session")?;
    clock.advance(per - Duration::from_millis(1));
    let a = send(&app, poll()).await;
    if a.status != StatusCode::TOO_MANY_REQUESTS {
        return Err(format!("limited for less than {per:?}: {}", a.status));
    }
    clock.advance(per + Duration::from_millis(1));
    let a = send(&app, poll()).await;
    if a.status != StatusCode::OK {
        return Err(format!(
            "still limited two windows of {per:?} later: {}",
            a.status
        ));
    }
    Ok(Some(()))
}

fn limited(a: Answer, max: u32, per: Duration, what: &str) -> Result<(), String> {
    if a.status != StatusCode::TOO_MANY_REQUESTS || a.state().as_deref() != Some("limited") {
        return Err(format!(
            "{what}: number {} got {} {}, not 429 limited",
            max + 1,
            a.status,
            a.body
        ));
    }
    let wait: u64 = a
        .header(header::RETRY_AFTER)
        .and_then(|v| v.parse().ok())
        .ok_or("a 429 without Retry-After")?;
    if wait == 0 || wait > per.as_secs().max(1) {
        return Err(format!(
            "{what}: Retry-After {wait} s, longer than the documented window of {per:?}"
        ));
    }
    Ok(())
}

/// By default the client IP is the connection's: a spoofed `X-Forwarded-For` does not give a
/// fresh budget.
async fn client_ip_default(default: &str) -> Result<Option<()>, String> {
    if !default.contains("connection") {
        return Err(format!(
            "expected the connection's address, the docs say {default:?}"
        ));
    }
    let (app, _clock) =
        clocked(builder().new_visitor_limit(tower_waiting_room::RateLimit::per_minute(1)));
    let mut statuses = Vec::new();
    for i in 0..2u8 {
        let mut req = request(Method::GET, "/", None);
        req.extensions_mut()
            .insert(PeerAddr(SocketAddr::from(([203, 0, 113, 7], 1000))));
        req.headers_mut().insert(
            "x-forwarded-for",
            HeaderValue::from_str(&format!("198.51.100.{i}")).unwrap(),
        );
        statuses.push(send(&app, req).await.status);
    }
    if statuses != [StatusCode::FOUND, StatusCode::TOO_MANY_REQUESTS] {
        return Err(format!(
            "X-Forwarded-For changed the client IP by default: {statuses:?}"
        ));
    }
    Ok(Some(()))
}

/// Proof of work is off: a visitor with a queue cookie goes to the store, no challenge.
async fn proof_of_work_off(default: &str) -> Result<Option<()>, String> {
    if default != "off" {
        return Err(format!("expected \"off\", the docs say {default:?}"));
    }
    let app = app(layer());
    let (_, cookie) = first_visit(&app).await;
    let a = send(&app, request(Method::GET, "/", Some(&cookie))).await;
    if a.status == StatusCode::FORBIDDEN || a.state().as_deref() == Some("challenge") {
        return Err(format!("a new visitor got a challenge: {}", a.body));
    }
    Ok(Some(()))
}

/// The default scorer decides with proof of work on: a browser's first visit gets a cleared
/// (proven) queue cookie, a client without a browser's headers an unproven one.
async fn risk_default(default: &str) -> Result<Option<()>, String> {
    if !default.starts_with("the default scorer") {
        return Err(format!(
            "expected \"the default scorer ...\", got {default:?}"
        ));
    }
    let app = app(builder()
        .proof_of_work(ProofOfWork::new(8))
        .build()
        .map_err(|e| e.to_string())?);
    let browser = Request::builder()
        .uri("/")
        .header(header::HOST, "shop.example")
        .header(header::USER_AGENT, "Mozilla/5.0")
        .header(header::ACCEPT_LANGUAGE, "en")
        .body(Body::empty())
        .unwrap();
    let cookie = |a: &Answer| a.header(header::SET_COOKIE).unwrap_or("").to_owned();
    let low = cookie(&send(&app, browser).await);
    let medium = cookie(&send(&app, request(Method::GET, "/", None)).await);
    if !low.contains("=p1.") || !medium.contains("=q1.") {
        return Err(format!(
            "with proof of work on, a browser's cookie is not cleared ({low}) or a script's is ({medium})"
        ));
    }
    Ok(Some(()))
}

/// No networks are listed: a new visitor from anywhere gets its first-visit redirect.
async fn risky_networks_none(default: &str) -> Result<Option<()>, String> {
    if default != "none" {
        return Err(format!("expected \"none\", got {default:?}"));
    }
    let layer = layer();
    if !layer.config().risky_networks().is_empty() {
        return Err(format!("listed: {:?}", layer.config().risky_networks()));
    }
    let mut req = request(Method::GET, "/", None);
    req.extensions_mut()
        .insert(PeerAddr(SocketAddr::from(([203, 0, 113, 7], 1000))));
    let a = send(&app(layer), req).await;
    if a.status != StatusCode::FOUND {
        return Err(format!("a new visitor got {}: {}", a.status, a.body));
    }
    Ok(Some(()))
}

/// Every setting whose default the table gives in words has a check, and passes it; so do the
/// written defaults checked on a room (the limits, the line after a closing).
#[tokio::test]
async fn settings_table_defaults_in_words_are_the_rooms() {
    let mut failures = Vec::new();
    for row in table::rows() {
        match check(row.key, &row.default).await {
            Ok(Some(())) => {}
            // A default the table writes as a file would: it is the declaration's.
            Ok(None) if !row.in_words => {}
            Ok(None) => failures.push(format!(
                "`{}`: the default {:?} is words, and has no check: add one to \
                 tests/docs/docs_honesty.rs",
                row.key, row.default
            )),
            Err(why) => failures.push(format!("`{}`: {why}", row.key)),
        }
    }
    assert!(
        failures.is_empty(),
        "the settings table (rendered from src/config/settings.rs) is not the room's:\n{}",
        failures.join("\n")
    );
}

/// The settings set in code only, a hand-written table of `docs/configuration.md`.
#[tokio::test]
async fn code_only_settings_table_matches_the_builder() {
    let text = read(CONFIGURATION);
    let mut failures = Vec::new();
    for row in table(
        CONFIGURATION,
        &text,
        &["builder method", "default", "meaning"],
    ) {
        let name = setting(&row.cells[0]);
        if NOT_CHECKED.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let default = row.cells.get(1).map(String::as_str).unwrap_or("");
        match check(&name, default).await {
            Ok(Some(())) => {}
            Ok(None) => failures.push(format!(
                "{}: `{name}`: no check: add one to tests/docs/docs_honesty/settings_defaults.rs (or a line in \
                 NOT_CHECKED saying why it cannot have one)",
                row.at
            )),
            Err(why) => failures.push(format!("{}: `{name}`: {why}", row.at)),
        }
        if name == "secret/signing_key/previous_signing_key/keyring" {
            if let Err(why) = secret_lengths(row.cells.get(2).map_or("", String::as_str)) {
                failures.push(format!("{}: `{name}`: {why}", row.at));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the settings set in code only, in {CONFIGURATION}, are not the room's:\n{}",
        failures.join("\n")
    );
}
