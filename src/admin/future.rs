//! The response future of [`AdminService`](super::AdminService).

/// Response future of [`AdminService`](super::AdminService): reads the request's body (up to
/// the limit), asks the store, and answers. Never fails. (An
/// [`AnswerFuture`](crate::future::AnswerFuture), as matching's.)
#[doc(hidden)]
pub type ResponseFuture = crate::future::AnswerFuture;
