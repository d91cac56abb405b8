//! The end of serving: the process's stop signals, and how [`serve`](super::serve) tells its
//! connections to finish.

use tokio::sync::watch;

/// Completes when the process is asked to stop: Ctrl-C (`SIGINT`) or, on unix, `SIGTERM` (what
/// `kill`, systemd, Docker and Kubernetes send). Pass it to [`serve`](super::serve) as its
/// `shutdown`.
///
/// A signal whose handler cannot be installed is logged (`WARN`) and never completes; the other
/// still does.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// The serving loop's side: says when to start closing. Dropping it (when `serve` returns, or
/// its future is dropped) is the end of the grace: connections still open are closed.
pub(super) struct Closer(watch::Sender<bool>);

/// A connection's side: hears when to finish gracefully, and when to stop at once.
#[derive(Clone)]
pub(super) struct Closing(watch::Receiver<bool>);

/// A closer and the receiver the connections clone.
pub(super) fn channel() -> (Closer, Closing) {
    let (tx, rx) = watch::channel(false);
    (Closer(tx), Closing(rx))
}

impl Closer {
    /// Tells every connection to finish what it is doing and close.
    pub(super) fn start(&self) {
        let _ = self.0.send(true);
    }
}

impl Closing {
    /// Completes once closing has started (or the grace is over already).
    pub(super) async fn started(&mut self) {
        let _ = self.0.wait_for(|closing| *closing).await;
    }

    /// Completes once the grace is over: the closer is gone.
    pub(super) async fn over(&mut self) {
        // Nothing is sent after `true`: `changed` only returns, with an error, once the sender
        // is dropped.
        while self.0.changed().await.is_ok() {}
    }
}
