//! A switched connection (a WebSocket, the one upgrade passed on): once both sides have handed
//! their connection over, bytes are copied both ways until either closes.

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

/// Joins the visitor's connection to the app's, in a task of its own (the `101` answer goes back
/// first: hyper hands over the visitor's side only once it has been sent).
pub(crate) fn join(client: OnUpgrade, upstream: OnUpgrade) {
    tokio::spawn(async move {
        let (client, upstream) = match tokio::try_join!(client, upstream) {
            Ok(both) => both,
            Err(e) => {
                tracing::debug!(error = %e, "an upgrade was not completed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut upstream = TokioIo::new(upstream);
        match tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            Ok((up, down)) => tracing::debug!(up, down, "an upgraded connection closed"),
            Err(e) => tracing::debug!(error = %e, "an upgraded connection ended"),
        }
    });
}
