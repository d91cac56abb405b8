//! Every store call of a room counted and timed: the store, and each of its capabilities,
//! wrapped once when the room is built.

use super::*;

/// `store`, each of its calls counted and timed in `metrics` (and its `stats` answers setting the
/// room's gauges), with the same capabilities. Without the feature, `store` itself.
pub(crate) fn metered(store: Arc<dyn Store>, metrics: &Arc<RoomMetrics>) -> Arc<dyn Store> {
    #[cfg(feature = "metrics")]
    {
        // Each capability is wrapped once, here, and only if the store has it.
        let tickets = Arc::clone(&store).tickets().map(|inner| {
            Arc::new(Metered {
                inner,
                metrics: metrics.clone(),
            }) as Arc<dyn TicketStore>
        });
        let snapshots = Arc::clone(&store).snapshots().map(|inner| {
            Arc::new(Metered {
                inner,
                metrics: metrics.clone(),
            }) as Arc<dyn SnapshotStore>
        });
        let auto = Arc::clone(&store).auto().map(|inner| {
            Arc::new(Metered {
                inner,
                metrics: metrics.clone(),
            }) as Arc<dyn AutoStore>
        });
        Arc::new(Metered {
            inner: MeteredStore {
                store,
                tickets,
                snapshots,
                auto,
            },
            metrics: metrics.clone(),
        })
    }
    #[cfg(not(feature = "metrics"))]
    {
        let _ = metrics;
        store
    }
}

/// A store, or one of its capabilities, whose calls are counted and timed: wrapped once by the
/// room, so every store (the embedded one, Redis, the app's own) is measured the same way.
#[cfg(feature = "metrics")]
struct Metered<T> {
    inner: T,
    metrics: Arc<RoomMetrics>,
}

/// The store a [`Metered`] store calls, and its capabilities, already metered.
#[cfg(feature = "metrics")]
struct MeteredStore {
    store: Arc<dyn Store>,
    tickets: Option<Arc<dyn TicketStore>>,
    snapshots: Option<Arc<dyn SnapshotStore>>,
    auto: Option<Arc<dyn AutoStore>>,
}

#[cfg(feature = "metrics")]
impl Store for Metered<MeteredStore> {
    fn enter(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        let call = self.inner.store.enter(policy, session);
        self.metrics.timed(StoreOp::Enter, call)
    }
    fn join(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        let call = self.inner.store.join(policy, session);
        self.metrics.timed(StoreOp::Enter, call)
    }
    fn poll(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        let call = self.inner.store.poll(policy, session);
        self.metrics.timed(StoreOp::Poll, call)
    }
    fn heartbeat(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<Decision> {
        let call = self.inner.store.heartbeat(policy, session);
        self.metrics.timed(StoreOp::Heartbeat, call)
    }
    fn release(&self, policy: &RoomPolicy, session: SessionId) -> StoreFuture<bool> {
        let call = self.inner.store.release(policy, session);
        self.metrics.timed(StoreOp::Release, call)
    }
    fn stats(&self, policy: &RoomPolicy) -> StoreFuture<RoomStats> {
        self.metrics.stats_call(self.inner.store.stats(policy))
    }
    fn configure(
        &self,
        policy: &RoomPolicy,
        change: SettingsChange,
    ) -> StoreFuture<SettingsUpdate> {
        let call = self.inner.store.configure(policy, change);
        self.metrics.timed(StoreOp::Configure, call)
    }
    fn admit_next(&self, policy: &RoomPolicy, count: u32) -> StoreFuture<u64> {
        let call = self.inner.store.admit_next(policy, count);
        self.metrics.timed(StoreOp::AdmitNext, call)
    }
    fn ban(&self, policy: &RoomPolicy, session: SessionId, until_ms: u64) -> StoreFuture<bool> {
        let call = self.inner.store.ban(policy, session, until_ms);
        self.metrics.timed(StoreOp::Ban, call)
    }
    fn tickets(self: Arc<Self>) -> Option<Arc<dyn TicketStore>> {
        self.inner.tickets.clone()
    }
    fn snapshots(self: Arc<Self>) -> Option<Arc<dyn SnapshotStore>> {
        self.inner.snapshots.clone()
    }
    fn auto(self: Arc<Self>) -> Option<Arc<dyn AutoStore>> {
        self.inner.auto.clone()
    }
}

#[cfg(feature = "metrics")]
impl AutoStore for Metered<Arc<dyn AutoStore>> {
    fn auto_report(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        counts: &crate::auto::Window,
        window_ms: u64,
        lease_ms: u64,
    ) -> StoreFuture<AutoReport> {
        let call = self
            .inner
            .auto_report(policy, gateway, counts, window_ms, lease_ms);
        self.metrics.timed(StoreOp::AutoReport, call)
    }
    fn auto_apply(
        &self,
        policy: &RoomPolicy,
        gateway: GatewayId,
        capacity: u32,
        rate: Option<u32>,
        status: &str,
    ) -> StoreFuture<AutoApplied> {
        let call = self
            .inner
            .auto_apply(policy, gateway, capacity, rate, status);
        self.metrics.timed(StoreOp::AutoApply, call)
    }
    fn auto_switch(
        &self,
        policy: &RoomPolicy,
        off: Option<AutoOff>,
        terms: Option<&str>,
    ) -> StoreFuture<()> {
        let call = self.inner.auto_switch(policy, off, terms);
        self.metrics.timed(StoreOp::AutoSwitch, call)
    }
}

#[cfg(feature = "metrics")]
impl TicketStore for Metered<Arc<dyn TicketStore>> {
    fn mint_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        fresh: TicketNonce,
        expires_at_ms: u64,
        mint_for: MintFor,
    ) -> StoreFuture<Minted> {
        let call = self
            .inner
            .mint_ticket(policy, session, fresh, expires_at_ms, mint_for);
        self.metrics.timed(StoreOp::MintTicket, call)
    }
    fn redeem_ticket(
        &self,
        policy: &RoomPolicy,
        session: SessionId,
        nonce: TicketNonce,
    ) -> StoreFuture<Redeemed> {
        let call = self.inner.redeem_ticket(policy, session, nonce);
        self.metrics.timed(StoreOp::RedeemTicket, call)
    }
}

#[cfg(feature = "metrics")]
impl SnapshotStore for Metered<Arc<dyn SnapshotStore>> {
    fn sync(&self, policy: &RoomPolicy, seen: SeenWaiters) -> StoreFuture<RoomSnapshot> {
        let call = self.inner.sync(policy, seen);
        self.metrics.timed(StoreOp::Sync, call)
    }
}
