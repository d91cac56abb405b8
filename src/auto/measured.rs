//! [`Measured`]: what a layer between the room and the app knows of an answer that the room,
//! measuring from its call to the response's head, cannot.

use std::time::Duration;

/// What a layer between a room and the app (a reverse proxy) tells a room with
/// [`auto_capacity`](crate::WaitingRoomBuilder::auto_capacity) about one answer, in the
/// response's extensions. Without it the room counts every answer to an admitted request as
/// the app's, timed from its call to the response's head.
///
/// A client that uploads slowly, stops halfway through its body or sends too much is not the
/// app slowing down or failing: counted as the app's, a few admitted clients could push the
/// capacity down for everyone (a body dripped past the controller's timeout is a timeout, a
/// proxy's `502` for a body cut short an error).
///
/// The room takes it as said, from whatever is between it and the app: only a layer that
/// measures should set it (an app's handler could set `AppTook(Duration::ZERO)` on every
/// answer and hide its own slowness). A proxy's app cannot: extensions do not cross the wire.
///
/// ```
/// use std::time::Duration;
/// use tower_waiting_room::auto::Measured;
///
/// // A proxy whose client stopped sending its body answers for it, and says so:
/// let mut res = http::Response::new(());
/// *res.status_mut() = http::StatusCode::BAD_REQUEST;
/// res.extensions_mut().insert(Measured::ClientFault);
///
/// // One whose client took 20 s to send its body, of which 30 ms were the app's:
/// let mut res = http::Response::new(());
/// res.extensions_mut().insert(Measured::AppTook(Duration::from_millis(30)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measured {
    /// The answer says nothing of the app's health: the client failed its request (its body
    /// stopped, arrived too slowly or was too large) and the layer answered for it. Not
    /// counted.
    ClientFault,
    /// The app's own time until the answer's head, without the time the request waited for
    /// its client to send the body: counted instead of the room's measure, which includes it.
    AppTook(Duration),
}
