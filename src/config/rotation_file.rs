//! A settings file's key rotation: the id the current secret signs under (`secret_id`), and a
//! previous secret still accepted when verifying (`previous_secret_env` names an environment
//! variable, `previous_secret_file` a file; from the environment, `{PREFIX}_PREVIOUS_SECRET` may
//! hold it), under its own id (`previous_secret_id`). What a [`Keyring`](crate::Keyring) does in
//! code: a new secret signs from now on, and every cookie and token signed with the old one
//! stays good until it expires, so nobody in line or inside is logged out by the change. Keys
//! that cannot be used (a short secret, a bad id, two keys under one id) are the builder's
//! [`ConfigError`] at `build`.

use std::fmt;
use std::path::PathBuf;

use super::defaults::KEY_ID;
use super::file::{read_secret_file, RoomFileError, Secret};
use crate::token::SigningKey;
use crate::vocab::ConfigError;

/// The file's keys for key rotation.
pub(crate) const SECRET_ID: &str = "secret_id";
pub(crate) const PREVIOUS_SECRET_ENV: &str = "previous_secret_env";
pub(crate) const PREVIOUS_SECRET_FILE: &str = "previous_secret_file";
pub(crate) const PREVIOUS_SECRET_ID: &str = "previous_secret_id";

/// What a file or the environment says of the keys' ids and a previous secret.
#[derive(Clone, Default)]
pub(crate) struct RotationFile {
    pub(crate) secret_id: Option<String>,
    pub(crate) previous_env: Option<String>,
    pub(crate) previous_file: Option<PathBuf>,
    /// The previous secret itself, only from `{PREFIX}_PREVIOUS_SECRET`.
    pub(crate) previous: Option<Secret>,
    pub(crate) previous_id: Option<String>,
}

impl fmt::Debug for RotationFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secret shows only its length.
        f.debug_struct("RotationFile")
            .field("secret_id", &self.secret_id)
            .field("previous_env", &self.previous_env)
            .field("previous_file", &self.previous_file)
            .field("previous", &self.previous)
            .field("previous_id", &self.previous_id)
            .finish()
    }
}

impl RotationFile {
    /// The current key made of `secret` under the file's `secret_id` (`k1`, as
    /// [`secret`](crate::WaitingRoomBuilder::secret) gives, if none).
    pub(crate) fn current(&self, secret: &[u8]) -> Result<SigningKey, ConfigError> {
        SigningKey::new(self.secret_id.as_deref().unwrap_or(KEY_ID), secret)
    }

    /// The previous key, if the file names one (`env` standing for the process environment),
    /// under `previous_secret_id` (`k1` if none: the id a secret had before its file named
    /// one); its faults as a key are left to `build`.
    pub(crate) fn previous(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Result<SigningKey, ConfigError>>, RoomFileError> {
        let sources = [
            self.previous.is_some(),
            self.previous_env.is_some(),
            self.previous_file.is_some(),
        ];
        let secret = match sources.iter().filter(|s| **s).count() {
            0 if self.previous_id.is_some() => {
                return Err(RoomFileError::KeyIdWithoutSecret {
                    key: PREVIOUS_SECRET_ID.to_owned(),
                })
            }
            0 => return Ok(None),
            1 => match (&self.previous, &self.previous_env, &self.previous_file) {
                (Some(secret), _, _) => secret.clone(),
                (_, Some(variable), _) => match env(variable) {
                    Some(value) => Secret(value.into_bytes()),
                    None => {
                        return Err(RoomFileError::PreviousSecretEnv {
                            variable: super::file::shown_variable(variable),
                        })
                    }
                },
                (_, _, Some(path)) => {
                    read_secret_file(path).map_err(|source| RoomFileError::PreviousSecretFile {
                        path: path.clone(),
                        source,
                    })?
                }
                _ => unreachable!("one source, counted above"),
            },
            _ => return Err(RoomFileError::ConflictingPreviousSecrets),
        };
        let id = self.previous_id.as_deref().unwrap_or(KEY_ID);
        Ok(Some(SigningKey::new(id, secret.0)))
    }
}
