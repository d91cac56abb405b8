//! [`RoomFile`]: the room's settings from a file or the environment, with readable
//! durations. The documentation is on the type, since this module is private.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use super::{FailPolicy, SameSite};
use crate::defences::{ProofOfWork, RateLimit};
use crate::{WaitingRoomBuilder, WaitingRoomLayer};

/// The room's settings as an operator writes them: deserialized from a file (any serde format:
/// TOML, JSON, YAML...) or read from environment variables with [`from_env`](Self::from_env),
/// with readable durations (`"30s"`, `"5m"`).
///
/// A file holds the settings an operator tunes; [`builder`](Self::builder) turns them into a
/// [`WaitingRoomBuilder`] through its public setters, so [`build`](WaitingRoomBuilder::build)
/// validates them exactly as it validates settings made in code (a
/// [`ConfigError`](crate::ConfigError)), and the store, clock, renderer, bypass rules and the
/// like are still added in code.
///
/// ```
/// use std::time::Duration;
/// use tower_waiting_room::config::RoomFile;
///
/// let settings: RoomFile = toml::from_str(
///     r#"
///     room = "shop"
///     capacity = 500
///     queue_ttl = "2m"
///     session_ttl = "12h"
///     new_visitor_limit = "120/1m"
///     fail_policy = "closed"
///     "#,
/// )?;
/// let layer = settings
///     .builder()? // with `secret_env` or `secret_file` set, this reads the secret
///     .secret([7u8; 32]) // here a key in code instead; so are a store, a renderer...
///     .build()?;
/// assert_eq!(layer.config().policy().queue_ttl_ms, 120_000);
/// assert_eq!(layer.config().session_ttl(), Duration::from_secs(12 * 3600));
///
/// // The same from environment variables (here a list; `from_env` reads the process's).
/// let settings = RoomFile::from_env_vars(
///     "WR",
///     [
///         ("WR_ROOM", "shop"),
///         ("WR_CAPACITY", "500"),
///         ("WR_QUEUE_TTL", "2m"),
///         ("WR_SECRET", "a secret of at least thirty-two bytes"),
///         ("HOME", "/root"), // without the prefix: not read
///     ],
/// )?;
/// let layer = settings.builder()?.build()?;
/// assert_eq!(layer.config().policy().capacity, 500);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Keys
///
/// Every key is named after the [`WaitingRoomBuilder`] method that takes it, and every key but
/// `room` may be left out: a missing key keeps the builder's default (see the
/// [`config`](crate::config) docs). Unknown keys are refused, so a typo is an error, not a default.
///
/// | key | value |
/// |---|---|
/// | `room` | the room id (required) |
/// | `capacity`, `admission_rate`, `max_queue_len` | whole numbers |
/// | `active_ttl`, `grant_ttl`, `queue_ttl`, `abandon_after`, `refresh`, `session_ttl` | duration |
/// | `fail_policy` | `"open"`, `"closed"`, `"drain"` or `"drain:<budget>"` |
/// | `cookie_name`, `cookie_path`, `cookie_domain` | strings |
/// | `secure_cookies` | `true` or `false` |
/// | `same_site` | `"lax"`, `"strict"` or `"none"` |
/// | `path_prefix`, `queue_header`, `token_header`, `client_ip_header` | strings |
/// | `new_visitor_limit`, `poll_limit` | `"<max>/<duration>"` (`"60/1m"`, `"5/s"`), or `"off"` |
/// | `bind_tokens_to_network` | `true` or `false` |
/// | `single_use_tickets` | `true` or `false` |
/// | `max_event_streams` | a whole number (0 turns event streams off) |
/// | `proof_of_work` | the difficulty in bits (turns proof of work on) |
/// | `proof_of_work_challenge_ttl` | a duration; needs `proof_of_work` |
/// | `opens_at`, `closes_at` | Unix seconds (whole numbers): a scheduled opening and closing |
/// | `keep_line_after_close` | `true` or `false` |
/// | `secret_env` | the name of the environment variable holding the signing secret |
/// | `secret_file` | the path of a file holding the signing secret |
///
/// # Readable durations
///
/// A duration is a string of one or more `<whole number><unit>` parts, largest unit first,
/// each unit at most once, no spaces; or a bare whole number (in a string or not), meaning
/// seconds.
///
/// | unit | meaning | examples |
/// |---|---|---|
/// | `ms` | milliseconds | `"250ms"` |
/// | `s` | seconds | `"30s"`, `"1m30s"`, `30`, `"30"` |
/// | `m` | minutes | `"5m"` |
/// | `h` | hours | `"1h"`, `"2h30m"` |
/// | `d` | days | `"1d"`, `"1d12h"` |
///
/// A bad one is refused with the key and the value: ``queue_ttl: `5 minutes` is not a
/// duration; write e.g. 30s, 5m, 1h``.
///
/// # Secrets
///
/// The signing secret is never written in the settings: `secret_env` names an environment
/// variable that holds it, `secret_file` a file (a secrets mount) that holds it; at most one of
/// them. [`builder`](Self::builder) reads it, and gives it to
/// [`secret`](WaitingRoomBuilder::secret) as it is (at least 32 bytes; a hex string is not
/// decoded), except that one line ending at the end of a file is dropped. A `secret` key in a
/// file is refused. Neither the settings' `Debug` nor any error of this module shows a secret;
/// note that a parser's own error (TOML's, for instance) may quote the offending line of the
/// file.
///
/// # Environment variables
///
/// [`from_env`](Self::from_env) reads the same keys from variables named `{PREFIX}_{KEY}`, the
/// key upper-cased: with the prefix `WR`, `WR_ROOM=shop`, `WR_CAPACITY=500`,
/// `WR_QUEUE_TTL=5m`, `WR_SECURE_COOKIES=false`, `WR_NEW_VISITOR_LIMIT=off`,
/// `WR_SECRET_FILE=/run/secrets/wr`. Besides those, `{PREFIX}_SECRET` may hold the secret
/// itself (it is in the environment already). Values are parsed like the file's; booleans are
/// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`). A variable with the prefix that is
/// not one of these keys is refused, so a typo is caught; so name the variable of `secret_env`
/// without the prefix.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoomFile {
    room: String,
    #[serde(default)]
    capacity: Option<u32>,
    #[serde(default)]
    admission_rate: Option<u32>,
    #[serde(default, deserialize_with = "field::active_ttl")]
    active_ttl: Option<Duration>,
    #[serde(default, deserialize_with = "field::grant_ttl")]
    grant_ttl: Option<Duration>,
    #[serde(default, deserialize_with = "field::queue_ttl")]
    queue_ttl: Option<Duration>,
    #[serde(default, deserialize_with = "field::abandon_after")]
    abandon_after: Option<Duration>,
    #[serde(default, deserialize_with = "field::refresh")]
    refresh: Option<Duration>,
    #[serde(default, deserialize_with = "field::session_ttl")]
    session_ttl: Option<Duration>,
    #[serde(default)]
    max_queue_len: Option<u64>,
    #[serde(default, deserialize_with = "field::fail_policy")]
    fail_policy: Option<FailPolicy>,
    #[serde(default)]
    cookie_name: Option<String>,
    #[serde(default)]
    cookie_path: Option<String>,
    #[serde(default)]
    cookie_domain: Option<String>,
    #[serde(default)]
    secure_cookies: Option<bool>,
    #[serde(default, deserialize_with = "field::same_site")]
    same_site: Option<SameSite>,
    #[serde(default)]
    path_prefix: Option<String>,
    #[serde(default)]
    queue_header: Option<String>,
    #[serde(default)]
    token_header: Option<String>,
    /// `Some(None)`: turned off.
    #[serde(default, deserialize_with = "field::new_visitor_limit")]
    new_visitor_limit: Option<Option<RateLimit>>,
    /// `Some(None)`: turned off.
    #[serde(default, deserialize_with = "field::poll_limit")]
    poll_limit: Option<Option<RateLimit>>,
    #[serde(default)]
    client_ip_header: Option<String>,
    #[serde(default)]
    bind_tokens_to_network: Option<bool>,
    #[serde(default)]
    single_use_tickets: Option<bool>,
    max_event_streams: Option<usize>,
    #[serde(default)]
    proof_of_work: Option<u8>,
    #[serde(default, deserialize_with = "field::proof_of_work_challenge_ttl")]
    proof_of_work_challenge_ttl: Option<Duration>,
    #[serde(default)]
    secret_env: Option<String>,
    #[serde(default)]
    secret_file: Option<PathBuf>,
    /// Unix seconds.
    #[serde(default)]
    opens_at: Option<u64>,
    /// Unix seconds.
    #[serde(default)]
    closes_at: Option<u64>,
    #[serde(default)]
    keep_line_after_close: Option<bool>,
    /// A `secret` key in a file: always refused, without its value.
    #[serde(default, rename = "secret", deserialize_with = "field::refuse_secret")]
    _secret_key: (),
    /// The secret itself, only from `{PREFIX}_SECRET`.
    #[serde(skip)]
    secret: Option<Secret>,
}

/// Bytes of a secret; its `Debug` shows only its length.
#[derive(Clone)]
struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes, redacted>", self.0.len())
    }
}

impl fmt::Debug for RoomFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every field but the secret, which shows only its length.
        f.debug_struct("RoomFile")
            .field("room", &self.room)
            .field("capacity", &self.capacity)
            .field("admission_rate", &self.admission_rate)
            .field("active_ttl", &self.active_ttl)
            .field("grant_ttl", &self.grant_ttl)
            .field("queue_ttl", &self.queue_ttl)
            .field("abandon_after", &self.abandon_after)
            .field("refresh", &self.refresh)
            .field("session_ttl", &self.session_ttl)
            .field("max_queue_len", &self.max_queue_len)
            .field("fail_policy", &self.fail_policy)
            .field("cookie_name", &self.cookie_name)
            .field("cookie_path", &self.cookie_path)
            .field("cookie_domain", &self.cookie_domain)
            .field("secure_cookies", &self.secure_cookies)
            .field("same_site", &self.same_site)
            .field("path_prefix", &self.path_prefix)
            .field("queue_header", &self.queue_header)
            .field("token_header", &self.token_header)
            .field("new_visitor_limit", &self.new_visitor_limit)
            .field("poll_limit", &self.poll_limit)
            .field("client_ip_header", &self.client_ip_header)
            .field("bind_tokens_to_network", &self.bind_tokens_to_network)
            .field("single_use_tickets", &self.single_use_tickets)
            .field("max_event_streams", &self.max_event_streams)
            .field("proof_of_work", &self.proof_of_work)
            .field(
                "proof_of_work_challenge_ttl",
                &self.proof_of_work_challenge_ttl,
            )
            .field("secret_env", &self.secret_env)
            .field("secret_file", &self.secret_file)
            .field("secret", &self.secret)
            .field("opens_at", &self.opens_at)
            .field("closes_at", &self.closes_at)
            .field("keep_line_after_close", &self.keep_line_after_close)
            .finish()
    }
}

/// Settings from a file or the environment that cannot be used. Settings that can be read but
/// that the room refuses (a zero capacity, a short secret) are the builder's
/// [`ConfigError`](crate::ConfigError) instead. No variant holds a secret.
#[derive(Debug)]
#[non_exhaustive]
pub enum RoomFileError {
    /// A variable's value does not parse.
    InvalidValue {
        /// The variable (`WR_QUEUE_TTL`).
        variable: String,
        /// Its value.
        value: String,
        /// What is wrong, e.g. "is not a duration; write e.g. 30s, 5m, 1h".
        problem: String,
    },
    /// A variable with the prefix is not one of the settings (a typo?).
    UnknownVariable {
        /// The variable.
        variable: String,
    },
    /// A variable with the prefix is not valid unicode.
    NotUnicode {
        /// The variable's name, lossily decoded.
        variable: String,
    },
    /// A required variable is missing (`{PREFIX}_ROOM`).
    MissingVariable {
        /// The variable.
        variable: String,
    },
    /// The prefix is empty.
    EmptyPrefix,
    /// More than one of `secret`, `secret_env` and `secret_file` is set.
    ConflictingSecrets,
    /// The environment variable named by `secret_env` is not set or not valid unicode.
    SecretEnv {
        /// The variable's name.
        variable: String,
    },
    /// The file named by `secret_file` cannot be read.
    SecretFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `proof_of_work_challenge_ttl` is set without `proof_of_work`.
    ChallengeTtlWithoutProofOfWork,
}

impl fmt::Display for RoomFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoomFileError::InvalidValue {
                variable,
                value,
                problem,
            } => write!(f, "{variable}: `{value}` {problem}"),
            RoomFileError::UnknownVariable { variable } => write!(
                f,
                "{variable} is not a setting of the waiting room (a typo?); \
                 see the keys in tower_waiting_room::config::RoomFile"
            ),
            RoomFileError::NotUnicode { variable } => {
                write!(f, "{variable} is not valid unicode")
            }
            RoomFileError::MissingVariable { variable } => write!(f, "{variable} is not set"),
            RoomFileError::EmptyPrefix => {
                f.write_str("the prefix of the environment variables is empty")
            }
            RoomFileError::ConflictingSecrets => f.write_str(
                "set only one of secret_env and secret_file (and, in the environment, the secret)",
            ),
            RoomFileError::SecretEnv { variable } => write!(
                f,
                "secret_env: the environment variable {variable} is not set or not valid unicode"
            ),
            RoomFileError::SecretFile { path, source } => {
                write!(f, "secret_file: cannot read {}: {source}", path.display())
            }
            RoomFileError::ChallengeTtlWithoutProofOfWork => {
                f.write_str("proof_of_work_challenge_ttl is set but proof_of_work is not")
            }
        }
    }
}

impl std::error::Error for RoomFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RoomFileError::SecretFile { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl RoomFile {
    /// The room id.
    pub fn room(&self) -> &str {
        &self.room
    }

    /// Reads the settings from the process environment: `{prefix}_ROOM` (required),
    /// `{prefix}_CAPACITY`, `{prefix}_QUEUE_TTL`, ... (see
    /// [environment variables](RoomFile#environment-variables)). Other variables are
    /// ignored; one with the prefix that is not a setting is an error.
    pub fn from_env(prefix: &str) -> Result<Self, RoomFileError> {
        let mut vars = Vec::new();
        let wanted = format!("{}_", prefix.trim_end_matches('_'));
        for (name, value) in std::env::vars_os() {
            let Some(name) = name.to_str().map(str::to_owned) else {
                let lossy = name.to_string_lossy();
                if lossy.starts_with(&wanted) {
                    return Err(RoomFileError::NotUnicode {
                        variable: lossy.into_owned(),
                    });
                }
                continue;
            };
            if !name.starts_with(&wanted) {
                continue;
            }
            match value.into_string() {
                Ok(value) => vars.push((name, value)),
                Err(_) => return Err(RoomFileError::NotUnicode { variable: name }),
            }
        }
        Self::from_env_vars(prefix, vars)
    }

    /// [`from_env`](Self::from_env) on the given `(name, value)` pairs instead of the process
    /// environment: for tests, or variables gathered elsewhere. The prefix is given without
    /// its `_` (a trailing one is ignored).
    pub fn from_env_vars<I, K, V>(prefix: &str, vars: I) -> Result<Self, RoomFileError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let prefix = prefix.trim_end_matches('_');
        if prefix.is_empty() {
            return Err(RoomFileError::EmptyPrefix);
        }
        let mut room = None;
        let mut s = RoomFile::new(String::new());
        for (name, value) in vars {
            let (name, value) = (name.as_ref(), value.as_ref());
            let Some(key) = name
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('_'))
            else {
                continue;
            };
            if key == "ROOM" {
                room = Some(value.to_owned());
                continue;
            }
            s.set_from_env(key, name, value)?;
        }
        s.room = room.ok_or_else(|| RoomFileError::MissingVariable {
            variable: format!("{prefix}_ROOM"),
        })?;
        Ok(s)
    }

    fn new(room: String) -> Self {
        Self {
            room,
            capacity: None,
            admission_rate: None,
            active_ttl: None,
            grant_ttl: None,
            queue_ttl: None,
            abandon_after: None,
            refresh: None,
            session_ttl: None,
            max_queue_len: None,
            fail_policy: None,
            cookie_name: None,
            cookie_path: None,
            cookie_domain: None,
            secure_cookies: None,
            same_site: None,
            path_prefix: None,
            queue_header: None,
            token_header: None,
            new_visitor_limit: None,
            poll_limit: None,
            client_ip_header: None,
            bind_tokens_to_network: None,
            single_use_tickets: None,
            max_event_streams: None,
            proof_of_work: None,
            proof_of_work_challenge_ttl: None,
            secret_env: None,
            secret_file: None,
            _secret_key: (),
            secret: None,
            opens_at: None,
            closes_at: None,
            keep_line_after_close: None,
        }
    }

    /// One variable: `key` is its name without the prefix.
    // Long, but flat: one arm per setting.
    fn set_from_env(
        &mut self,
        key: &str,
        variable: &str,
        value: &str,
    ) -> Result<(), RoomFileError> {
        let invalid = |problem: String| RoomFileError::InvalidValue {
            variable: variable.to_owned(),
            value: value.to_owned(),
            problem,
        };
        let text = || Some(value.to_owned());
        match key {
            "CAPACITY" => {
                self.capacity = Some(parse_number(value, u32::MAX.into()).map_err(invalid)?)
            }
            "ADMISSION_RATE" => {
                self.admission_rate = Some(parse_number(value, u32::MAX.into()).map_err(invalid)?)
            }
            "MAX_QUEUE_LEN" => {
                self.max_queue_len = Some(parse_number(value, u64::MAX).map_err(invalid)?)
            }
            "ACTIVE_TTL" => self.active_ttl = Some(duration_setting(value).map_err(invalid)?),
            "GRANT_TTL" => self.grant_ttl = Some(duration_setting(value).map_err(invalid)?),
            "QUEUE_TTL" => self.queue_ttl = Some(duration_setting(value).map_err(invalid)?),
            "ABANDON_AFTER" => self.abandon_after = Some(duration_setting(value).map_err(invalid)?),
            "REFRESH" => self.refresh = Some(duration_setting(value).map_err(invalid)?),
            "SESSION_TTL" => self.session_ttl = Some(duration_setting(value).map_err(invalid)?),
            "FAIL_POLICY" => self.fail_policy = Some(parse_fail_policy(value).map_err(invalid)?),
            "COOKIE_NAME" => self.cookie_name = text(),
            "COOKIE_PATH" => self.cookie_path = text(),
            "COOKIE_DOMAIN" => self.cookie_domain = text(),
            "SECURE_COOKIES" => self.secure_cookies = Some(parse_bool(value).map_err(invalid)?),
            "SAME_SITE" => self.same_site = Some(parse_same_site(value).map_err(invalid)?),
            "PATH_PREFIX" => self.path_prefix = text(),
            "QUEUE_HEADER" => self.queue_header = text(),
            "TOKEN_HEADER" => self.token_header = text(),
            "NEW_VISITOR_LIMIT" => {
                self.new_visitor_limit = Some(parse_rate_limit(value).map_err(invalid)?)
            }
            "POLL_LIMIT" => self.poll_limit = Some(parse_rate_limit(value).map_err(invalid)?),
            "CLIENT_IP_HEADER" => self.client_ip_header = text(),
            "BIND_TOKENS_TO_NETWORK" => {
                self.bind_tokens_to_network = Some(parse_bool(value).map_err(invalid)?)
            }
            "SINGLE_USE_TICKETS" => {
                self.single_use_tickets = Some(parse_bool(value).map_err(invalid)?)
            }
            "MAX_EVENT_STREAMS" => {
                self.max_event_streams =
                    Some(parse_number(value, u32::MAX.into()).map_err(invalid)?)
            }
            "PROOF_OF_WORK" => {
                self.proof_of_work = Some(parse_number(value, u8::MAX.into()).map_err(invalid)?)
            }
            "PROOF_OF_WORK_CHALLENGE_TTL" => {
                self.proof_of_work_challenge_ttl = Some(duration_setting(value).map_err(invalid)?)
            }
            "SECRET_ENV" => self.secret_env = text(),
            "SECRET_FILE" => self.secret_file = Some(PathBuf::from(value)),
            "SECRET" => self.secret = Some(Secret(value.as_bytes().to_vec())),
            "OPENS_AT" => self.opens_at = Some(parse_number(value, u64::MAX).map_err(invalid)?),
            "CLOSES_AT" => self.closes_at = Some(parse_number(value, u64::MAX).map_err(invalid)?),
            "KEEP_LINE_AFTER_CLOSE" => {
                self.keep_line_after_close = Some(parse_bool(value).map_err(invalid)?)
            }
            _ => {
                return Err(RoomFileError::UnknownVariable {
                    variable: variable.to_owned(),
                })
            }
        }
        Ok(())
    }

    /// A builder with these settings, through the builder's public setters: settings left out
    /// keep the builder's defaults, and [`build`](WaitingRoomBuilder::build) validates them as
    /// usual. Reads the secret named by `secret_env` or `secret_file` now; without one, `build`
    /// asks for a key ([`MissingSigningKey`](crate::ConfigError::MissingSigningKey)) unless you
    /// add one to the builder.
    pub fn builder(&self) -> Result<WaitingRoomBuilder, RoomFileError> {
        self.builder_with_env(|name| std::env::var(name).ok())
    }

    /// [`builder`](Self::builder), with `env` standing for the process environment.
    fn builder_with_env(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<WaitingRoomBuilder, RoomFileError> {
        let secret = self.read_secret(env)?;
        let proof_of_work = match (self.proof_of_work, self.proof_of_work_challenge_ttl) {
            (None, Some(_)) => return Err(RoomFileError::ChallengeTtlWithoutProofOfWork),
            (None, None) => None,
            (Some(bits), None) => Some(ProofOfWork::new(bits)),
            (Some(bits), Some(ttl)) => Some(ProofOfWork::new(bits).with_challenge_ttl(ttl)),
        };
        let mut b = WaitingRoomLayer::builder(self.room.clone());
        // Only what is set, so everything else keeps the builder's own default.
        macro_rules! set {
            ($($field:ident => $method:ident),* $(,)?) => {$(
                if let Some(v) = self.$field.clone() {
                    b = b.$method(v);
                }
            )*};
        }
        set! {
            capacity => capacity,
            admission_rate => admission_rate,
            active_ttl => active_ttl,
            grant_ttl => grant_ttl,
            queue_ttl => queue_ttl,
            abandon_after => abandon_after,
            refresh => refresh,
            session_ttl => session_ttl,
            max_queue_len => max_queue_len,
            fail_policy => fail_policy,
            cookie_name => cookie_name,
            cookie_path => cookie_path,
            cookie_domain => cookie_domain,
            secure_cookies => secure_cookies,
            same_site => same_site,
            path_prefix => path_prefix,
            queue_header => queue_header,
            token_header => token_header,
            new_visitor_limit => new_visitor_limit,
            poll_limit => poll_limit,
            client_ip_header => client_ip_header,
            bind_tokens_to_network => bind_tokens_to_network,
            single_use_tickets => single_use_tickets,
            max_event_streams => max_event_streams,
        }
        if let Some(p) = proof_of_work {
            b = b.proof_of_work(p);
        }
        if let Some(secret) = secret {
            b = b.secret(secret.0);
        }
        let unix = |secs: u64| std::time::UNIX_EPOCH + Duration::from_secs(secs);
        if let Some(at) = self.opens_at {
            b = b.opens_at(unix(at));
        }
        if let Some(at) = self.closes_at {
            b = b.closes_at(unix(at));
        }
        if let Some(keep) = self.keep_line_after_close {
            b = b.keep_line_after_close(keep);
        }
        Ok(b)
    }

    fn read_secret(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Secret>, RoomFileError> {
        let sources = [
            self.secret.is_some(),
            self.secret_env.is_some(),
            self.secret_file.is_some(),
        ];
        if sources.iter().filter(|s| **s).count() > 1 {
            return Err(RoomFileError::ConflictingSecrets);
        }
        if let Some(secret) = &self.secret {
            return Ok(Some(secret.clone()));
        }
        if let Some(variable) = &self.secret_env {
            return match env(variable) {
                Some(value) => Ok(Some(Secret(value.into_bytes()))),
                None => Err(RoomFileError::SecretEnv {
                    variable: variable.clone(),
                }),
            };
        }
        if let Some(path) = &self.secret_file {
            return read_secret_file(path).map(Some);
        }
        Ok(None)
    }
}

fn read_secret_file(path: &Path) -> Result<Secret, RoomFileError> {
    let mut bytes = std::fs::read(path).map_err(|source| RoomFileError::SecretFile {
        path: path.to_owned(),
        source,
    })?;
    // One line ending, as `echo` and editors leave.
    if bytes.ends_with(b"\n") {
        bytes.pop();
        if bytes.ends_with(b"\r") {
            bytes.pop();
        }
    }
    Ok(Secret(bytes))
}

// ===== parsing values =====

const DURATION_HINT: &str = "is not a duration; write e.g. 30s, 5m, 1h";

/// Why a duration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DurationError {
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
fn parse_duration(text: &str) -> Result<Duration, DurationError> {
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

fn parse_number<T: std::str::FromStr>(text: &str, max: u64) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("is not a whole number from 0 to {max}"))
}

fn parse_bool(text: &str) -> Result<bool, String> {
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

// ===== serde: one function per field, so that errors name the field =====

mod field {
    use super::*;

    /// A string or whole number, handed to `parse` as text; errors name `key`.
    struct Text<F> {
        key: &'static str,
        expecting: &'static str,
        numbers: bool,
        parse: F,
    }

    impl<'de, T, F: FnOnce(&str) -> Result<T, String>> Visitor<'de> for Text<F> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.expecting)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            (self.parse)(v)
                .map(Some)
                .map_err(|problem| E::custom(format_args!("{}: `{v}` {problem}", self.key)))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            if self.numbers {
                self.visit_str(&v.to_string())
            } else {
                Err(E::invalid_type(de::Unexpected::Unsigned(v), &self))
            }
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) if self.numbers => Err(E::custom(format_args!(
                    "{}: `{v}` {DURATION_HINT} (not negative)",
                    self.key
                ))),
                Err(_) => Err(E::invalid_type(de::Unexpected::Signed(v), &self)),
            }
        }
    }

    fn text<'de, D, T>(
        d: D,
        key: &'static str,
        expecting: &'static str,
        numbers: bool,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
    {
        d.deserialize_any(Text {
            key,
            expecting,
            numbers,
            parse,
        })
    }

    macro_rules! durations {
        ($($name:ident),*) => {$(
            pub(super) fn $name<'de, D: Deserializer<'de>>(
                d: D,
            ) -> Result<Option<Duration>, D::Error> {
                let expecting = "a duration such as \"30s\", \"5m\" or \"1h\"";
                text(d, stringify!($name), expecting, true, duration_setting)
            }
        )*};
    }
    durations!(
        active_ttl,
        grant_ttl,
        queue_ttl,
        abandon_after,
        refresh,
        session_ttl,
        proof_of_work_challenge_ttl
    );

    macro_rules! rate_limits {
        ($($name:ident),*) => {$(
            pub(super) fn $name<'de, D: Deserializer<'de>>(
                d: D,
            ) -> Result<Option<Option<RateLimit>>, D::Error> {
                let expecting = "a rate limit such as \"60/1m\", or \"off\"";
                text(d, stringify!($name), expecting, false, parse_rate_limit)
            }
        )*};
    }
    rate_limits!(new_visitor_limit, poll_limit);

    pub(super) fn fail_policy<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<FailPolicy>, D::Error> {
        text(
            d,
            "fail_policy",
            "\"open\" or \"closed\"",
            false,
            parse_fail_policy,
        )
    }

    pub(super) fn same_site<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SameSite>, D::Error> {
        text(
            d,
            "same_site",
            "\"lax\", \"strict\" or \"none\"",
            false,
            parse_same_site,
        )
    }

    /// Refuses a `secret` key without reading (or quoting) its value.
    pub(super) fn refuse_secret<'de, D: Deserializer<'de>>(_: D) -> Result<(), D::Error> {
        Err(de::Error::custom(
            "secret: the secret does not go in the settings; name an environment variable \
             with secret_env, or a file with secret_file",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Result<Duration, DurationError> {
        Ok(Duration::from_millis(n))
    }

    #[test]
    fn a_schedule_from_the_environment() {
        let vars = [
            ("WR_ROOM", "sale"),
            ("WR_CAPACITY", "2"),
            ("WR_SECRET", "0123456789abcdef0123456789abcdef"),
            ("WR_OPENS_AT", "1767229200"),
            ("WR_CLOSES_AT", "1767232800"),
            ("WR_KEEP_LINE_AFTER_CLOSE", "off"),
        ];
        let file = RoomFile::from_env_vars("WR", vars).unwrap();
        let layer = file.builder().unwrap().build().unwrap();
        let s = layer.config().policy().schedule.clone().unwrap();
        assert_eq!(s.opens_at_ms, 1_767_229_200_000);
        assert_eq!(s.closes_at_ms, Some(1_767_232_800_000));
        assert!(!s.keep_line_after_close);
        let backwards = [
            ("WR_ROOM", "sale"),
            ("WR_CAPACITY", "2"),
            ("WR_SECRET", "0123456789abcdef0123456789abcdef"),
            ("WR_OPENS_AT", "1767229200"),
            ("WR_CLOSES_AT", "1767229200"),
        ];
        let file = RoomFile::from_env_vars("WR", backwards).unwrap();
        assert_eq!(
            file.builder().unwrap().build().err(),
            Some(crate::ConfigError::ClosesBeforeOpening)
        );
        let bad = [("WR_ROOM", "sale"), ("WR_OPENS_AT", "tomorrow")];
        assert!(RoomFile::from_env_vars("WR", bad).is_err());
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

    #[test]
    fn the_secret_from_secret_env_reaches_the_builder() {
        let settings = RoomFile {
            capacity: Some(1),
            secret_env: Some("TEST_SECRET".to_owned()),
            ..RoomFile::new("shop".to_owned())
        };
        let env = |name: &str| (name == "TEST_SECRET").then(|| "s".repeat(32));
        assert!(settings.builder_with_env(env).unwrap().build().is_ok());
        let short = |name: &str| (name == "TEST_SECRET").then(|| "s".repeat(31));
        let err = settings.builder_with_env(short).unwrap().build().err();
        assert_eq!(
            err,
            Some(crate::ConfigError::SecretTooShort {
                key_id: "k1".to_owned(),
                len: 31
            })
        );
        let err = settings.builder_with_env(|_| None).err().unwrap();
        assert!(
            matches!(err, RoomFileError::SecretEnv { ref variable } if variable == "TEST_SECRET")
        );
    }
}
