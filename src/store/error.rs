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
    /// The store is up but cannot serve now: out of memory (`OOM`), busy running another
    /// script (`BUSY`), or holding the room's settings in a version this crate cannot read (a
    /// rolling upgrade's mix: [`StoreError::is_version_mix`]). Visitors are told to try again
    /// soon; waiters keep their place. Never treated as "down, let everyone in".
    Busy,
    /// The store answered, but not in the protocol: a reply this crate did not expect, a
    /// generic `ERR` of the server, or a call the store refused (an argument out of its
    /// bounds, a clock far from the server's). The store is up, so this is never an outage:
    /// answered like `Busy` (nobody is let in by it, under any fail policy, and nobody loses
    /// their place), whatever in a key or an argument caused it.
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
    /// The room's stored settings were written by a version of the crate this one cannot read
    /// (a newer one whose changes are not additive, or one too old): a
    /// [`Busy`](StoreErrorKind::Busy) error, so that nobody is let in by it and nobody loses
    /// their place while the versions are mixed. `detail` says which versions (it is shown in
    /// logs and the operator's answers: no host, no secret).
    pub fn version_mix(detail: impl Into<String>) -> Self {
        Self::with_source(StoreErrorKind::Busy, VersionMix(detail.into()))
    }

    /// Whether this error is a [version mix](Self::version_mix): the store answers, but this
    /// gateway cannot read the room's settings until it runs the version that wrote them.
    pub fn is_version_mix(&self) -> bool {
        self.kind == StoreErrorKind::Busy
            && self
                .source
                .as_ref()
                .is_some_and(|s| s.downcast_ref::<VersionMix>().is_some())
    }

    /// Whether the store answered, so that the failure is never taken for an outage: busy
    /// (out of memory, a long script, a version mix) or an answer outside the protocol. The
    /// fail policy does not apply: nobody is let in by it, and nobody loses their place.
    pub(crate) fn store_answered(&self) -> bool {
        matches!(self.kind, StoreErrorKind::Busy | StoreErrorKind::Protocol)
    }

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

    /// The same error again, for another caller: its kind and what its cause says (not the
    /// cause's own chain), a version mix still one.
    pub(crate) fn copied(&self) -> StoreError {
        let cause = self.source.as_ref().map(|s| s.to_string());
        match cause {
            Some(cause) if self.is_version_mix() => StoreError::version_mix(cause),
            Some(cause) => StoreError::with_source(self.kind, cause),
            None => StoreError::new(self.kind),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            StoreErrorKind::Unavailable => "store unavailable",
            StoreErrorKind::Timeout => "store call timed out",
            StoreErrorKind::Busy if self.is_version_mix() => {
                "store busy (the room's settings were written by a version of the crate this \
                 one cannot read)"
            }
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

/// The source of a [version mix](StoreError::version_mix): which versions met.
#[derive(Debug)]
struct VersionMix(String);

impl fmt::Display for VersionMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for VersionMix {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_copied_for_another_caller_keeps_its_kind_and_word() {
        let mix = StoreError::version_mix("settings of version 9");
        let copy = mix.copied();
        assert!(copy.is_version_mix());
        assert_eq!(copy.to_string(), mix.to_string());
        let timeout = StoreError::with_source(StoreErrorKind::Timeout, "no answer within 250ms");
        let copy = timeout.copied();
        assert_eq!(copy.kind(), StoreErrorKind::Timeout);
        assert_eq!(copy.to_string(), timeout.to_string());
        let bare = StoreError::new(StoreErrorKind::Busy).copied();
        assert_eq!(bare.kind(), StoreErrorKind::Busy);
        assert!(!bare.is_version_mix());
    }

    #[test]
    fn a_version_mix_is_a_busy_store_and_says_so() {
        let e = StoreError::version_mix("room settings of version 6, this crate reads version 5");
        assert_eq!(e.kind(), StoreErrorKind::Busy);
        assert!(e.is_version_mix());
        let text = e.to_string();
        assert!(
            text.contains("cannot read") && text.contains("version 6"),
            "{text}"
        );
        assert!(!StoreError::new(StoreErrorKind::Busy).is_version_mix());
        assert!(
            !StoreError::with_source(StoreErrorKind::Misconfigured, VersionMix(String::new()))
                .is_version_mix()
        );
    }
}
