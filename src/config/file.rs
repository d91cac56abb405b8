//! [`RoomFile`]: the room's settings from a file or the environment, with readable
//! durations. The documentation is on the type, since this module is private.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::edge_file::{EdgeFile, EDGE_KEYS_ENV, EDGE_KEYS_FILE, EDGE_SCOPE, EDGE_TOKEN_TTL};
use super::lang_file::{LanguagesFile, DEFAULT_LANGUAGE, LANGUAGES};
use super::readable::refused;
use super::rotation_file::{
    RotationFile, PREVIOUS_SECRET_ENV, PREVIOUS_SECRET_FILE, PREVIOUS_SECRET_ID, SECRET_ID,
};
use super::settings::Settings;
use super::value::{field_names, from_entries, read_file_value, EntryError, Value, ValueError};

/// The room's settings as an operator writes them: deserialized from a file (any serde format:
/// TOML, JSON, YAML...) or read from environment variables with [`from_env`](Self::from_env),
/// with readable durations (`"30s"`, `"5m"`).
///
/// A file holds the settings an operator tunes; [`builder`](Self::builder) turns them into a
/// [`WaitingRoomBuilder`](crate::WaitingRoomBuilder), the same settings its setters write, so
/// [`build`](crate::WaitingRoomBuilder::build) validates them exactly as it validates settings
/// made in code (a [`ConfigError`](crate::ConfigError)), and the store, clock, renderer, bypass
/// rules and the like are still added in code.
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
/// Every [setting](crate::config#settings) that is data is a key, named after the
/// [`WaitingRoomBuilder`](crate::WaitingRoomBuilder) method that takes it; the settings table
/// in `docs/configuration.md` lists them with how a file writes each value. Every key but
/// `room` may be left out: a missing key keeps the builder's default. Unknown keys are refused, so a typo is an
/// error, not a default. Besides the settings, a file has:
///
/// - `room`: the room id (required);
/// - `secret_env`: the name of the environment variable holding the signing secret;
/// - `secret_file`: the path of a file holding the signing secret;
/// - `secret_id`: the id the secret signs under (`k1` unless said), and a previous secret still
///   accepted while its cookies live: `previous_secret_env` or `previous_secret_file` (from the
///   environment, `{PREFIX}_PREVIOUS_SECRET` may hold it), under `previous_secret_id` (`k1`
///   unless said); see [Secrets](#secrets);
/// - `edge_keys_env` or `edge_keys_file`: where the [edge tokens](crate::edge)' key set is (an
///   environment variable's name, a file's path), which turns them on; `edge_token_ttl` (a
///   duration, 60 s by default) and `edge_scope` (path prefixes separated by spaces, `"/"` by
///   default). From the environment, `{PREFIX}_EDGE_KEYS` may hold the key set itself.
/// - `languages`: the languages the pages speak, their tags separated by spaces or commas
///   (`"en de ar"`; every built-in one by default:
///   [`BUILT_IN_LANGUAGES`](crate::response::BUILT_IN_LANGUAGES)), and `default_language`, the
///   one visitors get when none of theirs is offered (the first of `languages` unless said).
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
/// [`secret`](crate::WaitingRoomBuilder::secret) as it is (at least 32 bytes; a hex string is not
/// decoded), except that one line ending at the end of a file is dropped. A `secret` key in a
/// file is refused.
///
/// To rotate it without sending anyone to the back of the line, give the new secret an id of
/// its own (`secret_id = "k2"`) and name the old one as the previous secret
/// (`previous_secret_file`, read the same way) until its cookies and tokens have expired: the
/// new one signs, both verify, as with a [`Keyring`](crate::Keyring). Neither the settings' `Debug` nor any error of this module shows a secret;
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
#[derive(Clone)]
pub struct RoomFile {
    pub(crate) room: String,
    /// Every other key but the secret's: the struct the builder holds.
    pub(crate) settings: Settings,
    pub(crate) secret_env: Option<String>,
    pub(crate) secret_file: Option<PathBuf>,
    /// The secret itself, only from `{PREFIX}_SECRET`.
    pub(crate) secret: Option<Secret>,
    /// The keys' ids, and a previous secret still accepted.
    pub(crate) rotation: RotationFile,
    /// Edge tokens: where the key set is, their lifetime and scope.
    pub(crate) edge: EdgeFile,
    /// The languages of the pages, and the default one.
    pub(crate) languages: LanguagesFile,
}

/// Bytes of a secret; its `Debug` shows only its length.
#[derive(Clone)]
pub(crate) struct Secret(pub(crate) Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes, redacted>", self.0.len())
    }
}

impl fmt::Debug for RoomFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secret shows only its length.
        f.debug_struct("RoomFile")
            .field("room", &self.room)
            .field("settings", &self.settings)
            .field("secret_env", &self.secret_env)
            .field("secret_file", &self.secret_file)
            .field("secret", &self.secret)
            .field("rotation", &self.rotation)
            .field("edge", &self.edge)
            .field("languages", &self.languages)
            .finish()
    }
}

/// The keys of a file besides [`Settings`]' fields.
const ROOM: &str = "room";
const SECRET_ENV: &str = "secret_env";
const SECRET_FILE: &str = "secret_file";
/// Refused whenever present, without its value.
const SECRET: &str = "secret";

/// The keys an unknown key's error offers: every key a file may have, not `secret`.
fn offered_keys() -> &'static [&'static str] {
    static OFFERED: OnceLock<Vec<&'static str>> = OnceLock::new();
    OFFERED.get_or_init(|| keys().iter().copied().filter(|k| *k != SECRET).collect())
}

/// Every key a file may have, and `secret`, which it may not (read to be refused at its line).
fn keys() -> &'static [&'static str] {
    static KEYS: OnceLock<Vec<&'static str>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys = vec![ROOM];
        keys.extend_from_slice(field_names::<Settings>());
        keys.extend_from_slice(&[SECRET_ENV, SECRET_FILE, SECRET]);
        keys.extend_from_slice(&[
            SECRET_ID,
            PREVIOUS_SECRET_ENV,
            PREVIOUS_SECRET_FILE,
            PREVIOUS_SECRET_ID,
        ]);
        keys.extend_from_slice(&[EDGE_KEYS_ENV, EDGE_KEYS_FILE, EDGE_TOKEN_TTL, EDGE_SCOPE]);
        keys.extend_from_slice(&[LANGUAGES, DEFAULT_LANGUAGE]);
        keys
    })
}

impl<'de> Deserialize<'de> for RoomFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_struct("RoomFile", keys(), FileVisitor)
    }
}

/// A file's map, read by [`Settings`]' derive.
struct FileVisitor;

impl<'de> Visitor<'de> for FileVisitor {
    type Value = RoomFile;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct RoomFile")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RoomFile, A::Error> {
        let mut file = RoomFile::new(String::new());
        let mut room = None;
        file.settings = Settings::deserialize(FileMap {
            map,
            file: &mut file,
            room: &mut room,
            key: ROOM,
        })?;
        file.room = room.ok_or_else(|| de::Error::missing_field(ROOM))?;
        Ok(file)
    }
}

/// A file's map as [`Settings`]' derive sees it: the room's and the secret's keys are taken
/// out on the way, and each value is read while the format still stands on it (so that its
/// error points at it), as its field's type, an error naming the key.
struct FileMap<'a, A> {
    map: A,
    file: &'a mut RoomFile,
    room: &'a mut Option<String>,
    /// The key whose value comes next.
    key: &'static str,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FileMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key_seed(Key)? {
            let taken = match key {
                ROOM => self.room.is_some(),
                SECRET_ENV => self.file.secret_env.is_some(),
                SECRET_FILE => self.file.secret_file.is_some(),
                SECRET_ID => self.file.rotation.secret_id.is_some(),
                PREVIOUS_SECRET_ENV => self.file.rotation.previous_env.is_some(),
                PREVIOUS_SECRET_FILE => self.file.rotation.previous_file.is_some(),
                PREVIOUS_SECRET_ID => self.file.rotation.previous_id.is_some(),
                EDGE_KEYS_ENV => self.file.edge.keys_env.is_some(),
                EDGE_KEYS_FILE => self.file.edge.keys_file.is_some(),
                EDGE_TOKEN_TTL => self.file.edge.ttl.is_some(),
                EDGE_SCOPE => self.file.edge.scope.is_some(),
                LANGUAGES => self.file.languages.languages.is_some(),
                DEFAULT_LANGUAGE => self.file.languages.default.is_some(),
                _ => false,
            };
            if taken {
                return Err(de::Error::duplicate_field(key));
            }
            match key {
                ROOM => *self.room = Some(self.map.next_value()?),
                SECRET_ENV => self.file.secret_env = Some(self.map.next_value()?),
                SECRET_FILE => self.file.secret_file = Some(self.map.next_value()?),
                SECRET_ID => self.file.rotation.secret_id = Some(self.map.next_value()?),
                PREVIOUS_SECRET_ENV => {
                    self.file.rotation.previous_env = Some(self.map.next_value()?)
                }
                PREVIOUS_SECRET_FILE => {
                    self.file.rotation.previous_file = Some(self.map.next_value()?)
                }
                PREVIOUS_SECRET_ID => self.file.rotation.previous_id = Some(self.map.next_value()?),
                EDGE_KEYS_ENV => self.file.edge.keys_env = Some(self.map.next_value()?),
                EDGE_KEYS_FILE => self.file.edge.keys_file = Some(self.map.next_value()?),
                EDGE_TOKEN_TTL => self.file.edge.ttl = Some(self.map.next_value()?),
                EDGE_SCOPE => self.file.edge.scope = Some(self.map.next_value()?),
                LANGUAGES => self.file.languages.languages = Some(self.map.next_value()?),
                DEFAULT_LANGUAGE => self.file.languages.default = Some(self.map.next_value()?),
                // Refused while the format stands on the value, to point at its line.
                SECRET => match self.map.next_value_seed(RefuseSecret)? {},
                _ => {
                    self.key = key;
                    return seed.deserialize(key.into_deserializer()).map(Some);
                }
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(Keyed {
            key: self.key,
            seed,
        })
    }
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for FileMap<'_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// A `secret` key's value: always refused, without reading (or quoting) it.
struct RefuseSecret;

impl<'de> DeserializeSeed<'de> for RefuseSecret {
    type Value = std::convert::Infallible;

    fn deserialize<D: Deserializer<'de>>(self, _: D) -> Result<Self::Value, D::Error> {
        Err(de::Error::custom(
            "secret: the secret does not go in the settings; name an environment variable \
             with secret_env, or a file with secret_file",
        ))
    }
}

/// The value of `key`, read by `seed`; an error names the key.
struct Keyed<S> {
    key: &'static str,
    seed: S,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Keyed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        let value = Value::deserialize(d)?;
        read_file_value(&value, self.seed).map_err(|ValueError(problem)| {
            de::Error::custom(format_args!("{}: {problem}", self.key))
        })
    }
}

/// A key of a file, refused unless it is one of [`keys`] (while the format still knows where
/// it stands, to point at it).
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = &'static str;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
        let key = String::deserialize(d)?;
        keys()
            .iter()
            .copied()
            .find(|k| *k == key)
            .ok_or_else(|| de::Error::unknown_field(&key, offered_keys()))
    }
}

/// An environment variable's name as an error shows it (and keeps it): a name of letters,
/// digits and `_` not starting with a digit, at most 128 bytes, as it is. Anything else is not
/// shown: it is likely the value itself (a secret, a URL with its password) written where its
/// variable's name goes.
pub(crate) fn shown_variable(name: &str) -> String {
    let is_name = (1..=128).contains(&name.len())
        && !name.as_bytes()[0].is_ascii_digit()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if is_name {
        name.to_owned()
    } else {
        format!("<not a variable's name, {} bytes, not shown>", name.len())
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
    /// More than one of `previous_secret_env`, `previous_secret_file` and, in the
    /// environment, `{PREFIX}_PREVIOUS_SECRET` is set.
    ConflictingPreviousSecrets,
    /// The environment variable named by `previous_secret_env` is not set or not valid
    /// unicode.
    PreviousSecretEnv {
        /// The variable's name.
        variable: String,
    },
    /// The file named by `previous_secret_file` cannot be read.
    PreviousSecretFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `secret_id` is set without a secret from the file, or `previous_secret_id` without a
    /// previous secret: an id names nothing.
    KeyIdWithoutSecret {
        /// The key (`secret_id`, `previous_secret_id`).
        key: String,
    },
    /// `proof_of_work_challenge_ttl` is set without `proof_of_work`.
    ChallengeTtlWithoutProofOfWork,
    /// `edge_token_ttl` or `edge_scope` is set, but no edge keys (`edge_keys_env`,
    /// `edge_keys_file`, or `{PREFIX}_EDGE_KEYS`).
    EdgeTokensWithoutKeys,
    /// More than one of `edge_keys_env`, `edge_keys_file` and `{PREFIX}_EDGE_KEYS` is set.
    ConflictingEdgeKeys,
    /// The environment variable named by `edge_keys_env` is not set or not valid unicode.
    EdgeKeysEnv {
        /// The variable's name.
        variable: String,
    },
    /// The file named by `edge_keys_file` cannot be read.
    EdgeKeysFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
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
            RoomFileError::ConflictingPreviousSecrets => f.write_str(
                "set only one of previous_secret_env and previous_secret_file (and, in the \
                 environment, the previous secret)",
            ),
            RoomFileError::PreviousSecretEnv { variable } => write!(
                f,
                "previous_secret_env: the environment variable {variable} is not set or not \
                 valid unicode"
            ),
            RoomFileError::PreviousSecretFile { path, source } => write!(
                f,
                "previous_secret_file: cannot read {}: {source}",
                path.display()
            ),
            RoomFileError::KeyIdWithoutSecret { key } => write!(
                f,
                "{key} is set but names no secret: give the secret it is the id of \
                 (secret_env or secret_file; previous_secret_env or previous_secret_file)"
            ),
            RoomFileError::ChallengeTtlWithoutProofOfWork => {
                f.write_str("proof_of_work_challenge_ttl is set but proof_of_work is not")
            }
            RoomFileError::EdgeTokensWithoutKeys => f.write_str(
                "edge_token_ttl or edge_scope is set but no edge keys: name them with \
                 edge_keys_env or edge_keys_file",
            ),
            RoomFileError::ConflictingEdgeKeys => f.write_str(
                "set only one of edge_keys_env and edge_keys_file (and, in the environment, the \
                 keys)",
            ),
            RoomFileError::EdgeKeysEnv { variable } => write!(
                f,
                "edge_keys_env: the environment variable {variable} is not set or not valid \
                 unicode"
            ),
            RoomFileError::EdgeKeysFile { path, source } => {
                write!(
                    f,
                    "edge_keys_file: cannot read {}: {source}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for RoomFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RoomFileError::SecretFile { source, .. } => Some(source),
            RoomFileError::EdgeKeysFile { source, .. } => Some(source),
            RoomFileError::PreviousSecretFile { source, .. } => Some(source),
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
        let mut file = RoomFile::new(String::new());
        // The settings' entries, keyed by field name, and the variable each came from.
        let mut entries: Vec<(String, Value)> = Vec::new();
        let mut variables: Vec<(String, String)> = Vec::new();
        for (name, value) in vars {
            let (name, value) = (name.as_ref(), value.as_ref());
            let Some(key) = name
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('_'))
            else {
                continue;
            };
            match key {
                "ROOM" => room = Some(value.to_owned()),
                "SECRET" => file.secret = Some(Secret(value.as_bytes().to_vec())),
                "SECRET_ENV" => file.secret_env = Some(value.to_owned()),
                "SECRET_FILE" => file.secret_file = Some(PathBuf::from(value)),
                "SECRET_ID" => file.rotation.secret_id = Some(value.to_owned()),
                "PREVIOUS_SECRET" => {
                    file.rotation.previous = Some(Secret(value.as_bytes().to_vec()))
                }
                "PREVIOUS_SECRET_ENV" => file.rotation.previous_env = Some(value.to_owned()),
                "PREVIOUS_SECRET_FILE" => file.rotation.previous_file = Some(PathBuf::from(value)),
                "PREVIOUS_SECRET_ID" => file.rotation.previous_id = Some(value.to_owned()),
                "EDGE_KEYS" => file.edge.keys = Some(value.to_owned()),
                "EDGE_KEYS_ENV" => file.edge.keys_env = Some(value.to_owned()),
                "EDGE_KEYS_FILE" => file.edge.keys_file = Some(PathBuf::from(value)),
                "EDGE_TOKEN_TTL" => file.edge.ttl = Some(value.to_owned()),
                "EDGE_SCOPE" => file.edge.scope = Some(value.to_owned()),
                "LANGUAGES" => file.languages.languages = Some(value.to_owned()),
                "DEFAULT_LANGUAGE" => file.languages.default = Some(value.to_owned()),
                _ => {
                    let Some(field) = field_names::<Settings>()
                        .iter()
                        .find(|field| field.to_ascii_uppercase() == key)
                    else {
                        return Err(RoomFileError::UnknownVariable {
                            variable: name.to_owned(),
                        });
                    };
                    // A variable given again replaces the earlier one.
                    if let Some(i) = entries.iter().position(|(k, _)| k == field) {
                        entries.remove(i);
                        variables.remove(i);
                    }
                    entries.push(((*field).to_owned(), Value::Str(value.to_owned())));
                    variables.push((name.to_owned(), value.to_owned()));
                }
            }
        }
        file.settings = from_entries(&entries).map_err(|EntryError { entry, message }| {
            let (variable, value) = match entry {
                Some(i) => variables[i].clone(),
                None => (format!("{prefix}_*"), String::new()),
            };
            // The message is `` `{value}` {problem} ``: the error shows the value apart.
            let problem = message
                .strip_prefix(&refused(&value, ""))
                .map_or_else(|| message.clone(), str::to_owned);
            RoomFileError::InvalidValue {
                variable,
                value,
                problem,
            }
        })?;
        file.room = room.ok_or_else(|| RoomFileError::MissingVariable {
            variable: format!("{prefix}_ROOM"),
        })?;
        Ok(file)
    }

    pub(crate) fn new(room: String) -> Self {
        Self {
            room,
            settings: Settings::default(),
            secret_env: None,
            secret_file: None,
            secret: None,
            rotation: RotationFile::default(),
            edge: EdgeFile::default(),
            languages: LanguagesFile::default(),
        }
    }

    /// The settings, and the secret read from where the file points (`env` standing for the
    /// process environment); or what keeps them from being used.
    pub(crate) fn settings_and_secret(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(&Settings, Option<Vec<u8>>), RoomFileError> {
        let secret = self.read_secret(env)?;
        if self.settings.proof_of_work.is_none()
            && self.settings.proof_of_work_challenge_ttl.is_some()
        {
            return Err(RoomFileError::ChallengeTtlWithoutProofOfWork);
        }
        Ok((&self.settings, secret.map(|Secret(bytes)| bytes)))
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
                    variable: shown_variable(variable),
                }),
            };
        }
        if let Some(path) = &self.secret_file {
            return read_secret_file(path)
                .map(Some)
                .map_err(|source| RoomFileError::SecretFile {
                    path: path.to_owned(),
                    source,
                });
        }
        Ok(None)
    }
}

/// A secret from a file: its bytes, but one line ending at the end, as `echo` and editors
/// leave.
pub(crate) fn read_secret_file(path: &Path) -> std::io::Result<Secret> {
    let mut bytes = std::fs::read(path)?;
    if bytes.ends_with(b"\n") {
        bytes.pop();
        if bytes.ends_with(b"\r") {
            bytes.pop();
        }
    }
    Ok(Secret(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn an_unknown_key_is_told_with_the_keys_a_file_may_have() {
        let err = toml::from_str::<RoomFile>("room = \"shop\"\ncapcity = 5").unwrap_err();
        let message = err.message();
        assert!(message.contains("unknown field `capcity`"), "{message}");
        assert!(message.contains("`capacity`") && message.contains("`secret_env`"));
        assert!(
            !message.contains("`secret`"),
            "offers the refused key: {message}"
        );
    }

    #[test]
    fn every_setting_is_a_key_of_files_and_a_variable() {
        let fields = field_names::<Settings>();
        assert!(fields.len() >= 29, "{fields:?}");
        for field in fields {
            assert!(keys().contains(field), "{field}");
            // An empty value: refused as a value, never as an unknown key or variable.
            let variable = format!("WR_{}", field.to_ascii_uppercase());
            let env = RoomFile::from_env_vars("WR", [("WR_ROOM", "shop"), (&*variable, "")]);
            assert!(
                !matches!(env, Err(RoomFileError::UnknownVariable { .. })),
                "{variable}: {env:?}"
            );
            let text = format!("room = \"shop\"\n{field} = \"\"");
            if let Err(err) = toml::from_str::<RoomFile>(&text) {
                assert!(err.message().starts_with(&format!("{field}: ")), "{err}");
            }
        }
        let env =
            RoomFile::from_env_vars("WR", [("WR_ROOM", "shop"), ("WR_MAX_EVENT_STREAMS", "7")]);
        assert_eq!(env.unwrap().settings.max_event_streams, 7);
    }
}
