//! The serving threads: `workers` threads, each with a Tokio runtime of its own
//! (current-thread), all accepting from the one listening socket, as nginx's worker processes
//! do.
//!
//! Why not Tokio's multi-thread runtime: measured on one core, a proxied request costs 2 to 4
//! us less of CPU on a current-thread runtime (no work-stealing queues, no wake-ups across
//! threads), about a tenth of what the gateway spends on it (docs/benchmarks.md). The price is
//! that a connection stays with the worker that accepted it: a worker busy with heavy
//! connections is not helped by an idle one. New connections go to whichever worker accepts
//! first (each holds a copy of the socket's descriptor; a connection waits in the one accept
//! queue until a worker takes it, and none is stranded when a worker stops).
//!
//! What the workers share is what one runtime shared before: the running [`Live`] stack, its
//! rooms and their store. What each keeps to itself is its connections, and the pool of
//! connections to the app that its requests use ([`current`] tells the proxy which pool).

use std::cell::Cell;
use std::num::NonZeroUsize;
use std::thread::JoinHandle;

use tokio::sync::watch;
use tower_waiting_room::serve::{serve, Limits};

use crate::live::Live;

thread_local! {
    static WORKER: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The index of the serving worker running this thread, from 0; `None` off the workers.
pub fn current() -> Option<usize> {
    WORKER.with(Cell::get)
}

/// The serving workers, started by [`start`].
#[derive(Debug)]
pub struct Workers {
    threads: Vec<JoinHandle<()>>,
}

/// Starts `count` workers serving `live` on `listener` within `limits` (the connection cap
/// shared out among them), until `stop` turns `true` (or its sender is dropped).
pub fn start(
    listener: std::net::TcpListener,
    count: NonZeroUsize,
    live: &Live,
    limits: Limits,
    stop: &watch::Receiver<bool>,
) -> std::io::Result<Workers> {
    let count = count.get();
    let cap = limits.get_max_connections();
    let mut threads = Vec::with_capacity(count);
    for index in 0..count {
        // The cap shared out: the workers' caps add up to it (and each takes at least one).
        let share = cap / count + usize::from(index < cap % count);
        let limits = limits.max_connections(share.max(1));
        let listener = listener.try_clone()?;
        let live = live.clone();
        let mut stop = stop.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name(format!("gateway-worker-{index}"))
            .spawn(move || {
                WORKER.with(|w| w.set(Some(index)));
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(e) => {
                            tracing::error!(worker = index, error = %e, "cannot serve");
                            return;
                        }
                    };
                    let stopped = async move {
                        // A dropped sender stops the workers too.
                        let _ = stop.wait_for(|stop| *stop).await;
                    };
                    serve(listener, live, limits, stopped).await;
                });
            })?;
        threads.push(thread);
    }
    Ok(Workers { threads })
}

impl Workers {
    /// Waits for every worker to finish serving (after `stop` and the grace); `false` if one
    /// of them panicked.
    pub fn join(self) -> bool {
        self.threads
            .into_iter()
            .map(JoinHandle::join)
            .fold(true, |ok, joined| ok & joined.is_ok())
    }
}
