//! Settings from a file or the environment ([`RoomFile`]): every key reaches the room, durations
//! are readable, typos and bad values are refused with the key's or variable's name, and the
//! secret is read from where the settings point and never shown.

use std::path::PathBuf;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{header, Request, StatusCode};
use tower::ServiceExt;
use tower_waiting_room::config::{RoomFile, RoomFileError};
use tower_waiting_room::{ConfigError, FailPolicy, SameSite, WaitingRoomLayer};

const SECRET: &str = "0123456789abcdef0123456789abcdef-a-test-secret";

/// A file under the temp directory, unique to this process and `name`, holding `contents`.
fn temp_file(name: &str, contents: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "tower-waiting-room-config-{}-{name}",
        std::process::id()
    ));
    std::fs::write(&path, contents).expect("write a temp file");
    path
}

fn parse(text: &str) -> Result<RoomFile, toml::de::Error> {
    toml::from_str(text)
}

/// The settings' builder with a test secret, built.
fn build(text: &str) -> WaitingRoomLayer {
    parse(text)
        .expect("the settings parse")
        .builder()
        .expect("a builder")
        .secret(SECRET)
        .build()
        .expect("a valid room")
}

#[test]
fn a_full_file_reaches_the_room() {
    let secret = temp_file("full-secret", format!("{SECRET}\n").as_bytes());
    let text = format!(
        r#"
        room = "shop-1"
        capacity = 250
        admission_rate = 20
        active_ttl = "10m"
        grant_ttl = "45s"
        queue_ttl = "3m"
        abandon_after = "1h"
        refresh = "20s"
        session_ttl = "12h"
        max_queue_len = 5000
        fail_policy = "closed"
        cookie_name = "line"
        cookie_path = "/shop"
        cookie_domain = "example.com"
        secure_cookies = false
        same_site = "strict"
        path_prefix = "/shop/_room"
        queue_header = "x-line"
        token_header = "x-pass"
        new_visitor_limit = "100/1m"
        poll_limit = "off"
        client_ip_header = "x-forwarded-for"
        bind_tokens_to_network = true
        single_use_tickets = true
        proof_of_work = 12
        proof_of_work_challenge_ttl = "2m"
        secret_file = {secret:?}
        "#
    );
    let settings = parse(&text).expect("the file parses");
    assert_eq!(settings.room(), "shop-1");
    let layer = settings
        .builder()
        .expect("the secret file is read")
        .build()
        .expect("a valid room");
    let c = layer.config();
    let p = c.policy();
    assert_eq!(c.room(), "shop-1");
    assert_eq!(p.capacity, 250);
    assert_eq!(p.admission_rate, Some(20));
    assert_eq!(p.active_ttl_ms, 600_000);
    assert_eq!(p.grant_ttl_ms, 45_000);
    assert_eq!(p.queue_ttl_ms, 180_000);
    assert_eq!(p.abandon_after_ms, 3_600_000);
    assert_eq!(p.max_queue_len, 5000);
    assert_eq!(c.refresh(), Duration::from_secs(20));
    assert_eq!(c.session_ttl(), Duration::from_secs(12 * 3600));
    assert_eq!(c.fail_policy(), FailPolicy::Closed);
    let cookies = c.cookies();
    assert_eq!(cookies.queue_name(), "line_q");
    assert_eq!(cookies.admission_name(), "line_a");
    assert_eq!(cookies.path(), "/shop");
    assert_eq!(cookies.domain(), Some("example.com"));
    assert!(!cookies.secure());
    assert_eq!(cookies.same_site(), SameSite::Strict);
    assert_eq!(c.path_prefix(), "/shop/_room");
    assert_eq!(c.queue_header().as_str(), "x-line");
    assert_eq!(c.token_header().as_str(), "x-pass");
    assert!(c.bind_tokens_to_network());
    assert!(c.single_use_tickets());
    assert_eq!(cookies.ticket_name(), "line_t");
    std::fs::remove_file(secret).ok();
}

#[test]
fn missing_keys_keep_the_builders_defaults() {
    let from_file = build("room = \"shop\"\ncapacity = 3");
    let from_code = WaitingRoomLayer::builder("shop")
        .capacity(3)
        .secret(SECRET)
        .build()
        .unwrap();
    let (f, c) = (from_file.config(), from_code.config());
    assert_eq!(f.policy(), c.policy());
    assert_eq!(f.refresh(), c.refresh());
    assert_eq!(f.session_ttl(), c.session_ttl());
    assert_eq!(f.fail_policy(), c.fail_policy());
    assert_eq!(f.path_prefix(), c.path_prefix());
    assert_eq!(f.queue_header(), c.queue_header());
    assert_eq!(f.token_header(), c.token_header());
    assert_eq!(f.bind_tokens_to_network(), c.bind_tokens_to_network());
    assert_eq!(f.single_use_tickets(), c.single_use_tickets());
    assert!(!f.single_use_tickets());
    assert_eq!(f.cookies().queue_name(), c.cookies().queue_name());
    assert_eq!(f.cookies().path(), c.cookies().path());
    assert_eq!(f.cookies().domain(), c.cookies().domain());
    assert_eq!(f.cookies().secure(), c.cookies().secure());
    assert_eq!(f.cookies().same_site(), c.cookies().same_site());
}

#[test]
fn every_readable_duration() {
    for (written, expected) in [
        ("\"250ms\"", Duration::from_millis(250)),
        ("\"30s\"", Duration::from_secs(30)),
        ("\"5m\"", Duration::from_secs(300)),
        ("\"1h\"", Duration::from_secs(3600)),
        ("\"2h30m\"", Duration::from_secs(9000)),
        ("\"1d\"", Duration::from_secs(86_400)),
        ("\"1m30s500ms\"", Duration::from_millis(90_500)),
        ("90", Duration::from_secs(90)),
        ("\"90\"", Duration::from_secs(90)),
    ] {
        let layer = build(&format!(
            "room = \"shop\"\ncapacity = 1\nsession_ttl = {written}"
        ));
        assert_eq!(layer.config().session_ttl(), expected, "{written}");
    }
}

#[test]
fn a_bad_duration_names_the_key_and_the_value() {
    let err = parse("room = \"shop\"\nqueue_ttl = \"5 minutes\"").unwrap_err();
    assert!(
        err.message()
            .contains("queue_ttl: `5 minutes` is not a duration; write e.g. 30s, 5m, 1h"),
        "{err}"
    );
    for (written, key) in [
        ("active_ttl = \"5y\"", "active_ttl"),
        ("grant_ttl = \"\"", "grant_ttl"),
        ("refresh = -5", "refresh"),
        ("abandon_after = \"30s1m\"", "abandon_after"),
        ("session_ttl = \"99999999999999999d\"", "session_ttl"),
    ] {
        let err = parse(&format!("room = \"shop\"\n{written}")).unwrap_err();
        assert!(err.message().starts_with(key), "{written}: {err}");
    }
    // Not a string or whole number: serde's message, and TOML's pointer to the line.
    let err = parse("room = \"shop\"\nsession_ttl = 1.5").unwrap_err();
    assert!(err.message().contains("a duration such as"), "{err}");
    assert!(err.to_string().contains("session_ttl"), "{err}");
    let err = parse("room = \"shop\"\nsession_ttl = \"99999999999999999d\"").unwrap_err();
    assert!(err.message().contains("too long"), "{err}");
}

#[test]
fn other_bad_values_name_the_key() {
    for (written, expected) in [
        ("fail_policy = \"sometimes\"", "fail_policy: `sometimes`"),
        ("same_site = \"loose\"", "same_site: `loose`"),
        ("new_visitor_limit = \"60\"", "new_visitor_limit: `60`"),
        (
            "poll_limit = \"3 per second\"",
            "poll_limit: `3 per second`",
        ),
    ] {
        let err = parse(&format!("room = \"shop\"\n{written}")).unwrap_err();
        assert!(err.message().contains(expected), "{written}: {err}");
    }
    // Case does not matter for the words.
    let layer = build("room = \"shop\"\ncapacity = 1\nfail_policy = \"Closed\"");
    assert_eq!(layer.config().fail_policy(), FailPolicy::Closed);
}

#[test]
fn an_unknown_key_is_refused() {
    let err = parse("room = \"shop\"\ncapcity = 5").unwrap_err();
    assert!(err.message().contains("capcity"), "{err}");
    let err = parse("capacity = 5").unwrap_err();
    assert!(
        err.message().contains("room"),
        "the room is required: {err}"
    );
}

#[test]
fn values_the_room_refuses_are_the_builders_config_errors() {
    let settings = parse("room = \"shop\"\ncapacity = 0").unwrap();
    let err = settings.builder().unwrap().secret(SECRET).build().err();
    assert_eq!(err, Some(ConfigError::MissingCapacity));
    let settings = parse("room = \"shop\"\ncapacity = 1\nrefresh = \"5m\"").unwrap();
    let err = settings.builder().unwrap().secret(SECRET).build().err();
    assert_eq!(err, Some(ConfigError::RefreshNotShorterThanActiveTtl));
    let settings = parse("room = \"shop\"\ncapacity = 1\nproof_of_work = 40").unwrap();
    let err = settings.builder().unwrap().secret(SECRET).build().err();
    assert_eq!(err, Some(ConfigError::InvalidProofOfWork));
    // No secret anywhere: the builder asks for one.
    let settings = parse("room = \"shop\"\ncapacity = 1").unwrap();
    let err = settings.builder().unwrap().build().err();
    assert_eq!(err, Some(ConfigError::MissingSigningKey));
}

#[test]
fn risky_networks_are_one_string_separated_by_commas_in_a_file_and_the_environment() {
    let layer = build(
        "room = \"shop\"\ncapacity = 1\nrisky_networks = \" 192.0.2.0/24, 2001:db8::/32 ,, 198.51.100.7\"",
    );
    assert_eq!(
        layer.config().risky_networks(),
        ["192.0.2.0/24", "2001:db8::/32", "198.51.100.7"]
    );
    let layer = RoomFile::from_env_vars(
        "WR",
        [
            ("WR_ROOM", "shop"),
            ("WR_CAPACITY", "1"),
            ("WR_SECRET", SECRET),
            ("WR_RISKY_NETWORKS", "10.0.0.0/8,203.0.113.0/24"),
        ],
    )
    .unwrap()
    .builder()
    .unwrap()
    .build()
    .unwrap();
    assert_eq!(
        layer.config().risky_networks(),
        ["10.0.0.0/8", "203.0.113.0/24"]
    );
    // A range the builder refuses is its config error, naming the entry.
    let settings =
        parse("room = \"shop\"\ncapacity = 1\nrisky_networks = \"192.0.2.7/24\"").unwrap();
    let err = settings.builder().unwrap().secret(SECRET).build().err();
    assert_eq!(
        err,
        Some(ConfigError::InvalidNetwork {
            network: "192.0.2.7/24".to_owned()
        })
    );
    // A list is not the form: refused with the key, not read as something else.
    let err = parse("room = \"shop\"\nrisky_networks = [\"192.0.2.0/24\"]").unwrap_err();
    assert!(err.message().contains("risky_networks"), "{err}");
}

#[test]
fn a_challenge_ttl_needs_proof_of_work() {
    let settings = parse("room = \"shop\"\nproof_of_work_challenge_ttl = \"1m\"").unwrap();
    assert!(matches!(
        settings.builder(),
        Err(RoomFileError::ChallengeTtlWithoutProofOfWork)
    ));
}

// ===== secrets =====

#[test]
fn the_secret_file_loses_one_line_ending_only() {
    // 31 bytes and a newline: too short, so the newline was not counted.
    let path = temp_file("short-secret", format!("{}\n", "s".repeat(31)).as_bytes());
    let settings = parse(&format!(
        "room = \"shop\"\ncapacity = 1\nsecret_file = {path:?}"
    ))
    .unwrap();
    let err = settings.builder().unwrap().build().err();
    assert_eq!(
        err,
        Some(ConfigError::SecretTooShort {
            key_id: "k1".to_owned(),
            len: 31
        })
    );
    std::fs::remove_file(path).ok();
}

#[test]
fn an_unreadable_secret_is_a_settings_error() {
    let missing = std::env::temp_dir().join("tower-waiting-room-no-such-secret-file");
    let settings = parse(&format!("room = \"shop\"\nsecret_file = {missing:?}")).unwrap();
    let err = settings.builder().expect_err("an error");
    assert!(
        matches!(&err, RoomFileError::SecretFile { path, .. } if *path == missing),
        "{err:?}"
    );
    assert!(std::error::Error::source(&err).is_some());

    let settings =
        parse("room = \"shop\"\nsecret_env = \"TOWER_WAITING_ROOM_TEST_SURELY_UNSET_7F3A\"")
            .unwrap();
    let err = settings.builder().expect_err("an error");
    assert!(
        err.to_string()
            .contains("TOWER_WAITING_ROOM_TEST_SURELY_UNSET_7F3A"),
        "{err}"
    );

    let settings = parse("room = \"shop\"\nsecret_env = \"A\"\nsecret_file = \"b\"").unwrap();
    assert!(matches!(
        settings.builder(),
        Err(RoomFileError::ConflictingSecrets)
    ));
}

/// A secret (or a URL with its password) written where its variable's name goes is no name:
/// the error says so and repeats neither in its text nor in its `Debug`.
#[test]
fn a_value_for_a_variable_s_name_is_not_repeated() {
    let value = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t!";
    let file = std::env::temp_dir().join(format!("twr-secret-{}", std::process::id()));
    std::fs::write(&file, "0123456789abcdef0123456789abcdef").unwrap();
    for key in ["secret_env", "previous_secret_env", "edge_keys_env"] {
        let first = match key {
            "secret_env" => String::new(),
            _ => format!("secret_file = {file:?}\n"),
        };
        let text = format!("room = \"shop\"\n{first}{key} = \"{value}\"");
        let settings = parse(&text).unwrap_or_else(|e| panic!("{key}: {e}"));
        let Err(err) = settings.builder() else {
            panic!("{key}: no such variable, yet built");
        };
        let shown = format!("{err} {err:?}");
        assert!(shown.contains(key), "{key}: {shown}");
        assert!(!shown.contains(value), "{key}: {shown}");
    }
    std::fs::remove_file(&file).ok();
}

#[test]
fn a_secret_in_the_file_is_refused_without_being_repeated() {
    // JSON's errors quote no source line, so the message is only this crate's.
    let err =
        serde_json::from_str::<RoomFile>(&format!(r#"{{"room": "shop", "secret": "{SECRET}"}}"#))
            .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("secret_env"), "{message}");
    assert!(!message.contains(SECRET), "{message}");
    let err = parse(&format!("room = \"shop\"\nsecret = \"{SECRET}\"")).unwrap_err();
    assert!(err.message().contains("secret_file"), "{err}");
    assert!(!err.message().contains(SECRET), "{err}");
}

#[test]
fn the_secret_never_shows_in_debug() {
    let settings = RoomFile::from_env_vars(
        "WR",
        [
            ("WR_ROOM", "shop"),
            ("WR_CAPACITY", "1"),
            ("WR_SECRET", SECRET),
        ],
    )
    .unwrap();
    let debug = format!("{settings:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(!debug.contains(&SECRET[..8]), "{debug}");
    assert!(debug.contains("redacted"), "{debug}");
    assert!(debug.contains("shop"), "the rest is shown: {debug}");
    let builder = settings.builder().unwrap();
    assert!(!format!("{builder:?}").contains(&SECRET[..8]));
    // And the secret is really there.
    assert!(builder.build().is_ok());
}

// ===== the environment =====

#[test]
fn environment_variables_map_to_the_keys() {
    let layer = RoomFile::from_env_vars(
        "WR",
        [
            ("WR_ROOM", "env-room"),
            ("WR_CAPACITY", "42"),
            ("WR_ADMISSION_RATE", "7"),
            ("WR_ACTIVE_TTL", "10m"),
            ("WR_GRANT_TTL", "1m"),
            ("WR_QUEUE_TTL", "5m"),
            ("WR_ABANDON_AFTER", "2h"),
            ("WR_REFRESH", "250ms"),
            ("WR_SESSION_TTL", "1d"),
            ("WR_MAX_QUEUE_LEN", "900"),
            ("WR_FAIL_POLICY", "closed"),
            ("WR_COOKIE_NAME", "envq"),
            ("WR_COOKIE_PATH", "/app"),
            ("WR_COOKIE_DOMAIN", "example.org"),
            ("WR_SECURE_COOKIES", "false"),
            ("WR_SAME_SITE", "strict"),
            ("WR_PATH_PREFIX", "/app/_wr"),
            ("WR_QUEUE_HEADER", "x-q"),
            ("WR_TOKEN_HEADER", "x-t"),
            ("WR_NEW_VISITOR_LIMIT", "off"),
            ("WR_POLL_LIMIT", "10/1s"),
            ("WR_CLIENT_IP_HEADER", "x-real-ip"),
            ("WR_BIND_TOKENS_TO_NETWORK", "1"),
            ("WR_SINGLE_USE_TICKETS", "true"),
            ("WR_PROOF_OF_WORK", "8"),
            ("WR_PROOF_OF_WORK_CHALLENGE_TTL", "30s"),
            ("WR_SECRET", SECRET),
            // Not ours: ignored.
            ("HOME", "/root"),
            ("WRONG_PREFIX", "x"),
        ],
    )
    .expect("the variables parse")
    .builder()
    .unwrap()
    .build()
    .expect("a valid room");
    let c = layer.config();
    let p = c.policy();
    assert_eq!(c.room(), "env-room");
    assert_eq!(p.capacity, 42);
    assert_eq!(p.admission_rate, Some(7));
    assert_eq!(p.active_ttl_ms, 600_000);
    assert_eq!(p.grant_ttl_ms, 60_000);
    assert_eq!(p.queue_ttl_ms, 300_000);
    assert_eq!(p.abandon_after_ms, 7_200_000);
    assert_eq!(p.max_queue_len, 900);
    assert_eq!(c.refresh(), Duration::from_millis(250));
    assert_eq!(c.session_ttl(), Duration::from_secs(86_400));
    assert_eq!(c.fail_policy(), FailPolicy::Closed);
    assert_eq!(c.cookies().queue_name(), "envq_q");
    assert_eq!(c.cookies().path(), "/app");
    assert_eq!(c.cookies().domain(), Some("example.org"));
    assert!(!c.cookies().secure());
    assert_eq!(c.cookies().same_site(), SameSite::Strict);
    assert_eq!(c.path_prefix(), "/app/_wr");
    assert_eq!(c.queue_header().as_str(), "x-q");
    assert_eq!(c.token_header().as_str(), "x-t");
    assert!(c.bind_tokens_to_network());
    assert!(c.single_use_tickets());
}

#[test]
fn a_bad_number_names_the_variable() {
    let err =
        RoomFile::from_env_vars("WR", [("WR_ROOM", "shop"), ("WR_CAPACITY", "ten")]).unwrap_err();
    assert!(
        matches!(&err, RoomFileError::InvalidValue { variable, value, .. }
            if variable == "WR_CAPACITY" && value == "ten"),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("WR_CAPACITY: `ten`"), "{err}");
    for (name, value) in [
        ("WR_CAPACITY", "-1"),
        ("WR_CAPACITY", "4294967296"),
        ("WR_PROOF_OF_WORK", "300"),
        ("WR_QUEUE_TTL", "5 minutes"),
        ("WR_SECURE_COOKIES", "maybe"),
        ("WR_SAME_SITE", "loose"),
        ("WR_POLL_LIMIT", "fast"),
    ] {
        let err =
            RoomFile::from_env_vars("WR", [("WR_ROOM", "shop"), (name, value)]).expect_err(name);
        assert!(
            err.to_string().starts_with(&format!("{name}: `{value}`")),
            "{err}"
        );
    }
}

#[test]
fn an_unknown_variable_with_the_prefix_is_refused() {
    let err =
        RoomFile::from_env_vars("WR", [("WR_ROOM", "shop"), ("WR_CAPACTY", "5")]).unwrap_err();
    assert!(
        matches!(&err, RoomFileError::UnknownVariable { variable } if variable == "WR_CAPACTY"),
        "{err:?}"
    );
    assert!(err.to_string().contains("WR_CAPACTY"), "{err}");
    let err = RoomFile::from_env_vars("WR", [("WR_CAPACITY", "5")]).unwrap_err();
    assert!(
        matches!(&err, RoomFileError::MissingVariable { variable } if variable == "WR_ROOM"),
        "{err:?}"
    );
    // A trailing `_` on the prefix is the same prefix; an empty one is refused.
    assert!(RoomFile::from_env_vars("WR_", [("WR_ROOM", "shop")]).is_ok());
    assert!(matches!(
        RoomFile::from_env_vars("", [("ROOM", "shop")]),
        Err(RoomFileError::EmptyPrefix)
    ));
}

#[test]
fn a_too_short_secret_from_the_environment_is_the_builders_config_error() {
    let settings = RoomFile::from_env_vars(
        "WR",
        [
            ("WR_ROOM", "shop"),
            ("WR_CAPACITY", "1"),
            ("WR_SECRET", "short"),
        ],
    )
    .unwrap();
    let err = settings.builder().unwrap().build().err();
    assert_eq!(
        err,
        Some(ConfigError::SecretTooShort {
            key_id: "k1".to_owned(),
            len: 5
        })
    );
    let both = RoomFile::from_env_vars(
        "WR",
        [
            ("WR_ROOM", "shop"),
            ("WR_SECRET", SECRET),
            ("WR_SECRET_FILE", "/run/secrets/wr"),
        ],
    )
    .unwrap();
    assert!(matches!(
        both.builder(),
        Err(RoomFileError::ConflictingSecrets)
    ));
}

// ===== the defences the room cannot show in its config =====

fn app(layer: WaitingRoomLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "inside" }))
        .layer(layer)
}

fn visit(ip: &str, cookie: Option<&str>) -> Request<Body> {
    let mut req = Request::get("/").header("x-real-ip", ip);
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    req.body(Body::empty()).unwrap()
}

/// The queue cookie a first visit's answer sets, as a `Cookie` header sends it back.
fn queue_cookie(first: &http::Response<Body>) -> String {
    first
        .headers()
        .get(header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("a queue cookie")
        .to_owned()
}

#[tokio::test]
async fn the_new_visitor_limit_and_client_ip_header_apply() {
    let app = app(build(
        "room = \"shop\"\ncapacity = 1\nnew_visitor_limit = \"1/1m\"\n\
         client_ip_header = \"x-real-ip\"",
    ));
    let first = app.clone().oneshot(visit("192.0.2.1", None)).await.unwrap();
    assert_eq!(first.status(), StatusCode::FOUND);
    let second = app.clone().oneshot(visit("192.0.2.1", None)).await.unwrap();
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    let other = app
        .clone()
        .oneshot(visit("198.51.100.1", None))
        .await
        .unwrap();
    assert_eq!(
        other.status(),
        StatusCode::FOUND,
        "another IP is not limited"
    );
}

#[tokio::test]
async fn proof_of_work_from_the_file_challenges_new_visitors() {
    let app = app(build(
        "room = \"shop\"\ncapacity = 1\nproof_of_work = 8\nclient_ip_header = \"x-real-ip\"",
    ));
    let first = app.clone().oneshot(visit("192.0.2.1", None)).await.unwrap();
    assert_eq!(first.status(), StatusCode::FOUND);
    let cookie = queue_cookie(&first);
    let second = app
        .clone()
        .oneshot(visit("192.0.2.1", Some(&cookie)))
        .await
        .unwrap();
    assert_eq!(second.status(), StatusCode::FORBIDDEN, "a challenge");
}

// ===== docs/configuration.md =====

fn configuration_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
    std::fs::read_to_string(path).expect("docs/configuration.md")
}

/// The rows of the docs' tables of file keys (every table whose header starts `| key |`: the
/// settings table generated from the builder's declaration, and the file-only keys), each as
/// its key and its default cell.
fn documented_rows(md: &str) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let mut lines = md.lines();
    while let Some(header) = lines.by_ref().find(|l| l.starts_with("| key |")) {
        let columns: Vec<&str> = header.split('|').map(str::trim).collect();
        let default = columns
            .iter()
            .position(|c| *c == "default")
            .expect("a default column");
        lines.next(); // the |---| line
        for row in lines.by_ref().take_while(|l| l.starts_with('|')) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let key = cells[1].trim_matches('`').to_owned();
            rows.push((key, cells[default].to_owned()));
        }
    }
    rows
}

/// The keys the docs' tables list.
fn documented_keys(md: &str) -> Vec<String> {
    documented_rows(md)
        .into_iter()
        .map(|(key, _)| key)
        .collect()
}

/// The keys serde knows, from its "unknown field" error.
fn known_keys() -> Vec<String> {
    let err = parse("room = \"shop\"\nno_such_key = 1").unwrap_err();
    let message = err.message().to_owned();
    let list = message
        .split("expected one of ")
        .nth(1)
        .expect("serde lists the fields");
    list.split(", ")
        .map(|k| k.trim_matches('`').to_owned())
        // Refused whenever present: not a key to document as one.
        .filter(|k| k != "secret")
        .collect()
}

#[test]
fn the_docs_table_lists_every_key() {
    let mut documented = documented_keys(&configuration_md());
    let mut known = known_keys();
    documented.sort();
    known.sort();
    assert_eq!(documented, known);
}

#[test]
fn the_docs_complete_file_builds_and_has_every_key() {
    let md = configuration_md();
    let file: String = md
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a toml block in docs/configuration.md")
        .to_owned();
    let secret = temp_file("docs-secret", SECRET.as_bytes());
    let previous = temp_file("docs-previous-secret", NEW_SECRET.as_bytes());
    let edge_keys = temp_file(
        "docs-edge-keys",
        format!("current k1 {}\n", "A".repeat(43)).as_bytes(),
    );
    let file = file
        .replace("/run/secrets/waiting-room-old", previous.to_str().unwrap())
        .replace("/run/secrets/waiting-room", secret.to_str().unwrap())
        .replace("/run/secrets/edge-keys", edge_keys.to_str().unwrap());
    let layer = parse(&file)
        .expect("the docs' file parses")
        .builder()
        .expect("a builder")
        .build()
        .expect("the docs' file is a valid room");
    assert_eq!(layer.config().room(), "shop");
    for key in known_keys() {
        // One of each pair of places a secret may be named.
        let secret_key =
            ["secret_env", "previous_secret_env", "edge_keys_env"].contains(&key.as_str());
        assert!(
            secret_key || file.lines().any(|l| l.starts_with(&format!("{key} = "))),
            "the complete file has no {key}"
        );
    }
    std::fs::remove_file(secret).ok();
    std::fs::remove_file(edge_keys).ok();
}

#[test]
fn the_docs_defaults_are_the_rooms() {
    // Not visible in the room's config (the same defaults as in the config module's table).
    const NOT_VISIBLE: &[&str] = &[
        "new_visitor_limit",
        "poll_limit",
        "proof_of_work_challenge_ttl",
    ];
    let md = configuration_md();
    let default_room = format!("{:?}", build("room = \"shop\"\ncapacity = 1").config());
    let mut checked = 0;
    for (key, default) in documented_rows(&md) {
        let key = key.as_str();
        // Defaults written as a value: a cell that starts with a code span.
        let Some(default) = default.strip_prefix('`').and_then(|c| c.split('`').next()) else {
            continue;
        };
        if NOT_VISIBLE.contains(&key) {
            continue;
        }
        let default = default.replace("{room}", "shop");
        let room = build(&format!("room = \"shop\"\ncapacity = 1\n{key} = {default}"));
        assert_eq!(
            format!("{:?}", room.config()),
            default_room,
            "docs/configuration.md: {key} = {default} is not the default"
        );
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} defaults checked");
}

// ===== rotating the secret =====

const NEW_SECRET: &str = "fedcba9876543210fedcba9876543210-the-next-secret";

/// The first cookie a visitor gets from `layer` (name=value), and the value's key id.
async fn first_cookie(layer: WaitingRoomLayer) -> (String, String) {
    let first = app(layer).oneshot(visit("192.0.2.1", None)).await.unwrap();
    assert_eq!(first.status(), StatusCode::FOUND);
    let cookie = queue_cookie(&first);
    let id = cookie.split('.').nth(1).expect("a key id").to_owned();
    (cookie, id)
}

#[tokio::test]
async fn a_previous_secret_keeps_the_old_cookies_good_while_the_new_one_signs() {
    let old = temp_file("rotate-old", SECRET.as_bytes());
    let new = temp_file("rotate-new", NEW_SECRET.as_bytes());
    let layer = |text: String| parse(&text).unwrap().builder().unwrap().build().unwrap();
    let before = layer(format!(
        "room = \"shop\"\ncapacity = 1\nsecret_file = {old:?}"
    ));
    let (cookie, id) = first_cookie(before).await;
    assert_eq!(id, "k1");
    let rotated = format!(
        "room = \"shop\"\ncapacity = 1\nsecret_file = {new:?}\nsecret_id = \"k2\"\n\
         previous_secret_file = {old:?}"
    );
    // The old cookie is still a place: its holder is let in (the slot is free), not sent
    // back as a first visit; what the room signs now is signed under the new key.
    let after = app(layer(rotated.clone()))
        .oneshot(visit("192.0.2.1", Some(&cookie)))
        .await
        .unwrap();
    assert_eq!(
        after.status(),
        StatusCode::OK,
        "the old cookie was not taken"
    );
    let (_, id) = first_cookie(layer(rotated)).await;
    assert_eq!(id, "k2");
    // Without the previous secret, the same cookie is no cookie: a first visit again.
    let dropped = layer(format!(
        "room = \"shop\"\ncapacity = 1\nsecret_file = {new:?}\nsecret_id = \"k2\""
    ));
    let again = app(dropped)
        .oneshot(visit("192.0.2.1", Some(&cookie)))
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::FOUND);
    std::fs::remove_file(old).ok();
    std::fs::remove_file(new).ok();
}

#[test]
fn a_previous_secret_is_read_checked_and_never_shown() {
    let vars = |extra: &[(&'static str, &'static str)]| {
        let mut v = vec![
            ("WR_ROOM", "shop"),
            ("WR_CAPACITY", "1"),
            ("WR_SECRET", NEW_SECRET),
        ];
        v.extend_from_slice(extra);
        RoomFile::from_env_vars("WR", v).unwrap()
    };
    // From the environment, under its own id; the two keys' ids must differ.
    let file = vars(&[("WR_SECRET_ID", "k2"), ("WR_PREVIOUS_SECRET", SECRET)]);
    if let Err(e) = file.builder().unwrap().build() {
        panic!("the rotated keys: {e}");
    }
    let debug = format!("{file:?}");
    assert!(!debug.contains(&SECRET[..8]), "{debug}");
    let same_id = vars(&[("WR_PREVIOUS_SECRET", SECRET)]);
    assert!(matches!(
        same_id.builder().unwrap().build().err(),
        Some(ConfigError::DuplicateKeyId { .. })
    ));
    // A short previous secret is the builder's error, named by its id.
    let short = vars(&[("WR_SECRET_ID", "k2"), ("WR_PREVIOUS_SECRET", "short")]);
    assert_eq!(
        short.builder().unwrap().build().err(),
        Some(ConfigError::SecretTooShort {
            key_id: "k1".to_owned(),
            len: 5
        })
    );
    // Where it is read from: one place, that exists; an id names a secret.
    let both = vars(&[
        ("WR_PREVIOUS_SECRET", SECRET),
        ("WR_PREVIOUS_SECRET_FILE", "/run/secrets/old"),
    ]);
    assert!(matches!(
        both.builder(),
        Err(RoomFileError::ConflictingPreviousSecrets)
    ));
    let unset = vars(&[(
        "WR_PREVIOUS_SECRET_ENV",
        "TOWER_WAITING_ROOM_TEST_SURELY_UNSET_9C1B",
    )]);
    assert!(matches!(
        unset.builder(),
        Err(RoomFileError::PreviousSecretEnv { .. })
    ));
    let missing = std::env::temp_dir().join("tower-waiting-room-no-such-previous-secret");
    let file = parse(&format!(
        "room = \"shop\"\nsecret_env = \"X\"\nprevious_secret_file = {missing:?}"
    ))
    .unwrap();
    let err = file.builder().expect_err("an error");
    assert!(
        matches!(
            &err,
            RoomFileError::SecretEnv { .. } | RoomFileError::PreviousSecretFile { .. }
        ),
        "{err:?}"
    );
    let only_file = parse(&format!(
        "room = \"shop\"\nprevious_secret_file = {missing:?}"
    ))
    .unwrap();
    let err = only_file.builder().expect_err("an error");
    assert!(
        matches!(&err, RoomFileError::PreviousSecretFile { path, .. } if *path == missing),
        "{err:?}"
    );
    assert!(std::error::Error::source(&err).is_some());
    for (text, key) in [
        (
            "room = \"shop\"\nprevious_secret_id = \"k0\"",
            "previous_secret_id",
        ),
        ("room = \"shop\"\nsecret_id = \"k2\"", "secret_id"),
    ] {
        let err = parse(text)
            .unwrap()
            .builder()
            .expect_err("an id without its secret");
        assert!(
            matches!(&err, RoomFileError::KeyIdWithoutSecret { key: k } if k == key),
            "{err:?}"
        );
    }
}
