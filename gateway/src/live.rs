//! The running gateway: the current [`Stack`], replaced whole on a reload while connections
//! and requests in flight carry on with the one they started with.
//!
//! A reload reads and checks the file as at start; a file that does not load, or one that
//! changes what cannot change while running (the Redis URL, where the lines are), is refused
//! and the running version kept. The store is the same before and after, so nobody's place or
//! slot is lost; connections are not touched (a kept-alive connection's next request takes the
//! new version).

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use http::{Request, Response};
use hyper::body::Incoming;
use tower::Service;

use crate::config::{Config, Overrides};
use crate::service::ArcFuture;
use crate::stack::{self, GatewayBody, Shared, Stack};

/// The gateway as it runs: cheap to clone, one per connection.
#[derive(Clone)]
pub struct Live {
    inner: Arc<Inner>,
}

struct Inner {
    current: RwLock<Running>,
    shared: Shared,
    path: PathBuf,
    overrides: Overrides,
}

struct Running {
    stack: Arc<Stack>,
    config: Config,
}

impl Live {
    /// The gateway for `config` (read from `path` with `overrides`, which a reload reads
    /// again).
    pub fn new(
        config: Config,
        shared: Shared,
        overrides: Overrides,
    ) -> Result<Self, crate::config::FileError> {
        let stack = Arc::new(stack::build(&config, &shared)?);
        Ok(Self {
            inner: Arc::new(Inner {
                path: config.path.clone(),
                current: RwLock::new(Running { stack, config }),
                shared,
                overrides,
            }),
        })
    }

    /// The version running now.
    pub fn stack(&self) -> Arc<Stack> {
        Arc::clone(&self.read().stack)
    }

    /// Reads the file again and, if it loads, runs it from the next request on. On an error
    /// the running version stays, and the error says why.
    pub fn reload(&self) -> Result<(), String> {
        let mut config =
            Config::load(&self.inner.path, &self.inner.overrides).map_err(|e| e.to_string())?;
        {
            let running = self.read();
            if config.redis != running.config.redis {
                return Err(format!(
                    "{}: the redis settings changed; the lines live there, so a running gateway keeps \
                     its store: restart the gateway to move it",
                    config.path.display()
                ));
            }
            if config.listen != running.config.listen {
                tracing::warn!(
                    old = %running.config.listen,
                    new = %config.listen,
                    "the listen address changed; it takes effect at the next start"
                );
                // What is in force stays what the running version says, so that the next
                // reload of the same file warns again.
                config.listen = running.config.listen;
            }
            if config.workers != running.config.workers {
                tracing::warn!(
                    old = running.config.workers,
                    new = config.workers,
                    "the number of workers changed; it takes effect at the next start"
                );
                // The new version's proxy keeps a pool per running worker.
                config.workers = running.config.workers;
            }
            if config.limits.serve.describe() != running.config.limits.serve.describe() {
                tracing::warn!("the serving limits changed; they take effect at the next start");
                config.limits.serve = running.config.limits.serve;
            }
            // The file checked `upstream_timeout` against its own `request_timeout`, which
            // waits for the next start: against the one in force, a longer wait on the app
            // would be cut by the request's timeout (a 503 where the file says 504).
            let in_force = config.limits.serve.get_request_timeout();
            if config.limits.upstream_timeout >= in_force {
                return Err(format!(
                    "limits.upstream_timeout ({:?}) must be shorter than the request_timeout in \
                     force until the next start ({in_force:?})",
                    config.limits.upstream_timeout
                ));
            }
        }
        let stack = Arc::new(stack::build(&config, &self.inner.shared).map_err(|e| e.to_string())?);
        let old = {
            let mut running = self
                .inner
                .current
                .write()
                .unwrap_or_else(|p| p.into_inner());
            std::mem::replace(
                &mut *running,
                Running {
                    stack: Arc::clone(&stack),
                    config,
                },
            )
        };
        let rooms: Vec<&str> = stack.rooms.iter().map(|r| r.config().room()).collect();
        tracing::info!(?rooms, "reloaded");
        apply_changed_settings(&old.stack, &stack);
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Running> {
        // A panic while holding the lock cannot leave a half-written version: the swap is
        // one assignment.
        self.inner.current.read().unwrap_or_else(|p| p.into_inner())
    }
}

/// A room's capacity and admission rate live in the store once it has seen the room (the
/// admin API changes them there, for every gateway), and a file's values are only where a new
/// room starts. A reload whose file *changes* one of them is an operator's change like the
/// admin API's, and is written to the store; a value the file did not change is left alone, so
/// that a reload does not undo a change made through the admin API.
fn apply_changed_settings(old: &Stack, new: &Stack) {
    for room in &new.rooms {
        let id = room.config().room();
        let Some(before) = old.rooms.iter().find(|r| r.config().room() == id) else {
            continue;
        };
        let (was, now) = (before.config().policy(), room.config().policy());
        let capacity = (was.capacity != now.capacity).then_some(now.capacity);
        let rate = (was.admission_rate != now.admission_rate).then_some(now.admission_rate);
        if capacity.is_none() && rate.is_none() {
            continue;
        }
        let control = room.control();
        tokio::spawn(async move {
            if let Some(capacity) = capacity {
                match control.set_capacity(capacity).await {
                    Ok(_) => tracing::info!(
                        room = control.room(),
                        capacity,
                        "capacity changed by the file"
                    ),
                    Err(e) => {
                        tracing::error!(room = control.room(), error = %e, "the file's new capacity could not be stored; change it with the admin API")
                    }
                }
            }
            if let Some(rate) = rate {
                match control.set_rate(rate).await {
                    Ok(_) => tracing::info!(
                        room = control.room(),
                        ?rate,
                        "admission rate changed by the file"
                    ),
                    Err(e) => {
                        tracing::error!(room = control.room(), error = %e, "the file's new admission rate could not be stored; change it with the admin API")
                    }
                }
            }
        });
    }
}

type LiveFuture = ArcFuture<Response<GatewayBody>>;

impl Service<Request<Incoming>> for Live {
    type Response = Response<GatewayBody>;
    type Error = Infallible;
    type Future = LiveFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> LiveFuture {
        self.read().stack.service.call_shared(req)
    }
}
