//! [`StoreError`], the one error type of every store, and its [`StoreErrorKind`].

use std::error::Error;
use std::fmt;

/// Why a store call failed; the layer answers by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The store cannot be reached (I/O error, dropped connection, refused): the room's
    /// [`FailPolicy`](crate::FailPolicy) applies.
    Unavailable,
    /// The call did not finish before its deadline: treated like `Unavailable`.
    Timeout,
    /// The store is up but cannot serve now: out of memory (`OOM`), or busy running another
    /// script (`BUSY`). Visitors are told to try again soon. Never treated as "down, let
    /// everyone in".
    Busy,
    /// The store answered something this crate did not expect (a reply of another script
    /// version, a generic `ERR` of the server). Follows the fail policy like `Unavailable`.
    Protocol,
    /// The store's own configuration is invalid (a bad URL, an empty key prefix…); returned by
    /// store builders, never at request time.
    Config,
    /// The store is reachable but refuses this crate's calls because of how it is set up: a
    /// user without the right to run scripts (`NOPERM`), failed authentication, a key of another
    /// type under the room's prefix (`WRONGTYPE`), a script cache that will not keep the script,
    /// persistence that stops writes (`MISCONF`). Nothing gets better by itself: an operator
    /// must act. The layer treats it like `Unavailable` (the fail policy applies); stores
    /// report it loudly (the Redis store logs it at `ERROR` and opens its circuit breaker, so
    /// requests do not each wait on a store that will refuse them).
    Misconfigured,
}

/// The one error type of every store.
#[derive(Debug)]
pub struct StoreError {
    kind: StoreErrorKind,
    source: Option<Box<dyn Error + Send + Sync>>,
}

impl StoreError {
    /// An error of `kind` without a cause.
    pub fn new(kind: StoreErrorKind) -> Self {
        Self { kind, source: None }
    }

    /// An error of `kind` caused by `source`.
    pub fn with_source(
        kind: StoreErrorKind,
        source: impl Into<Box<dyn Error + Send + Sync>>,
    ) -> Self {
        Self {
            kind,
            source: Some(source.into()),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            StoreErrorKind::Unavailable => "store unavailable",
            StoreErrorKind::Timeout => "store call timed out",
            StoreErrorKind::Busy => "store busy (out of memory or running a long script)",
            StoreErrorKind::Protocol => "unexpected store answer",
            StoreErrorKind::Config => "invalid store configuration",
            StoreErrorKind::Misconfigured => "store misconfigured",
        };
        match &self.source {
            Some(source) => write!(f, "{what}: {source}"),
            None => f.write_str(what),
        }
    }
}

impl Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}
