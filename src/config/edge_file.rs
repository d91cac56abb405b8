//! A settings file's edge tokens ([`crate::edge`]): where the key set is (never the keys
//! themselves in the file: `edge_keys_env` names an environment variable, `edge_keys_file` a
//! file; from the environment, `{PREFIX}_EDGE_KEYS` may hold them), and the tokens' lifetime
//! and scope. Read when the file's builder is made; keys that cannot be used are the builder's
//! [`ConfigError::InvalidEdgeKeys`](crate::ConfigError::InvalidEdgeKeys) at `build`.

use std::fmt;
use std::path::{Path, PathBuf};

use super::file::RoomFileError;
use super::readable::parse_duration;
use crate::edge::{EdgeKeySet, EdgeTokens};
use crate::vocab::ConfigError;

/// The file's keys for edge tokens.
pub(crate) const EDGE_KEYS_ENV: &str = "edge_keys_env";
pub(crate) const EDGE_KEYS_FILE: &str = "edge_keys_file";
pub(crate) const EDGE_TOKEN_TTL: &str = "edge_token_ttl";
pub(crate) const EDGE_SCOPE: &str = "edge_scope";

/// What a file or the environment says of edge tokens.
#[derive(Clone, Default)]
pub(crate) struct EdgeFile {
    pub(crate) keys_env: Option<String>,
    pub(crate) keys_file: Option<PathBuf>,
    /// The key set's text itself, only from `{PREFIX}_EDGE_KEYS`.
    pub(crate) keys: Option<String>,
    pub(crate) ttl: Option<String>,
    pub(crate) scope: Option<String>,
}

impl fmt::Debug for EdgeFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys show only whether they are there.
        f.debug_struct("EdgeFile")
            .field("keys_env", &self.keys_env)
            .field("keys_file", &self.keys_file)
            .field("keys", &self.keys.as_ref().map(|_| "<redacted>"))
            .field("ttl", &self.ttl)
            .field("scope", &self.scope)
            .finish()
    }
}

impl EdgeFile {
    /// Whether the file says anything of edge tokens.
    fn is_set(&self) -> bool {
        self.keys_env.is_some()
            || self.keys_file.is_some()
            || self.keys.is_some()
            || self.ttl.is_some()
            || self.scope.is_some()
    }

    /// The room's edge tokens as the file gives them (`env` standing for the process
    /// environment): none when it names none; the key set's own faults are left to `build`.
    pub(crate) fn read(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Result<EdgeTokens, ConfigError>>, RoomFileError> {
        if !self.is_set() {
            return Ok(None);
        }
        let sources = [
            self.keys.is_some(),
            self.keys_env.is_some(),
            self.keys_file.is_some(),
        ];
        match sources.iter().filter(|s| **s).count() {
            0 => return Err(RoomFileError::EdgeTokensWithoutKeys),
            1 => {}
            _ => return Err(RoomFileError::ConflictingEdgeKeys),
        }
        let text = match (&self.keys, &self.keys_env, &self.keys_file) {
            (Some(keys), _, _) => keys.clone(),
            (_, Some(variable), _) => env(variable).ok_or_else(|| RoomFileError::EdgeKeysEnv {
                variable: super::file::shown_variable(variable),
            })?,
            (_, _, Some(path)) => read_keys_file(path)?,
            _ => unreachable!("one source, counted above"),
        };
        let mut tokens = match EdgeKeySet::parse(&text) {
            Ok(keys) => EdgeTokens::new(keys),
            Err(e) => return Ok(Some(Err(e))),
        };
        if let Some(ttl) = &self.ttl {
            let ttl = parse_duration(ttl).map_err(|_| RoomFileError::InvalidValue {
                variable: EDGE_TOKEN_TTL.to_owned(),
                value: ttl.clone(),
                problem: "is not a duration; write e.g. 30s, 1m".to_owned(),
            })?;
            tokens = tokens.ttl(ttl);
        }
        if let Some(scope) = &self.scope {
            tokens = tokens.scope(scope.split_whitespace());
        }
        Ok(Some(Ok(tokens)))
    }
}

fn read_keys_file(path: &Path) -> Result<String, RoomFileError> {
    std::fs::read_to_string(path).map_err(|source| RoomFileError::EdgeKeysFile {
        path: path.to_owned(),
        source,
    })
}
