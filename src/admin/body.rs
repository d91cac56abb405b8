//! The body of the admin service's answers.

/// The body of an [`AdminService`](super::AdminService) answer: JSON or the dashboard, in one
/// chunk (a [`FullBody`](crate::FullBody)).
///
/// ```
/// use http_body::Body;
/// use tower_waiting_room::admin::AdminBody;
///
/// let body = AdminBody::from("{}");
/// assert_eq!(body.size_hint().exact(), Some(2));
/// ```
#[doc(hidden)]
pub type AdminBody = crate::FullBody;
