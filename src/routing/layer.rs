//! [`WaitingRooms`], the layer of several rooms, and its builder [`WaitingRoomsBuilder`].

use std::sync::Arc;

use http::Request;
use tower_layer::Layer;

use super::service::WaitingRoomsService;
use crate::config::ConfigError;
use crate::layer::WaitingRoomLayer;
use crate::room::Room;
use crate::vocab::{loose_under, override_method, Rule};

/// Several waiting rooms in front of one service: [rules](Rule) send each request to a room, or
/// gate it by one, or let it pass. Build one with [`WaitingRooms::builder`]; clones share the
/// rooms. See the [module docs](super) for the order in which a request is dispatched and the
/// one way to compose it with axum.
///
/// ```
/// use axum::{routing::get, Router};
/// use tower_waiting_room::routing::{Rule, WaitingRooms};
/// use tower_waiting_room::WaitingRoomLayer;
///
/// # fn main() -> Result<(), tower_waiting_room::ConfigError> {
/// let secret = *b"a secret of at least thirty-two bytes!!";
/// let main = WaitingRoomLayer::builder("main").capacity(1_000).secret(secret).build()?;
/// let vip = WaitingRoomLayer::builder("vip").capacity(50).secret(secret).build()?;
/// let rooms = WaitingRooms::builder()
///     .room(Rule::path_prefix("/vip"), vip)
///     .default_room(main)
///     .gate(Rule::post("/checkout"), "main")
///     .build()?;
/// let app: Router = Router::new()
///     .route("/", get(|| async { "shop" }))
///     .route("/vip", get(|| async { "vip" }))
///     // Last, over the whole app: every room's endpoints answer, whatever the app's routes.
///     .layer(rooms);
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct WaitingRooms {
    rooms: Arc<Rooms>,
}

/// The rooms and their rules, immutable once built.
pub(crate) struct Rooms {
    /// Every room, each once, in the order first given.
    all: Vec<Arc<Room>>,
    /// `{prefix}/{room}/` of every room, with the room's index in `all`.
    endpoints: Vec<(String, usize)>,
    /// Gate rules, those without a predicate first.
    gates: Vec<(Rule, usize)>,
    /// Room rules, those without a predicate first.
    routes: Vec<(Rule, usize)>,
    default: Option<usize>,
}

/// Where a request goes.
pub(crate) enum Route<'a> {
    /// To the room: its endpoints, or its line.
    Room(&'a Arc<Room>),
    /// A gated route of the room: admitted, or refused; never queued.
    Gate(&'a Arc<Room>),
    /// No rule and no default room: straight to the inner service, untouched.
    Pass,
}

impl Rooms {
    /// Where `req` goes: (1) a room's own endpoints, whatever the rules; (2) gates; (3) room
    /// rules; (4) the default room, or else through.
    pub(crate) fn route<B>(&self, req: &Request<B>) -> Route<'_> {
        let path = req.uri().path();
        if let Some((_, i)) = self
            .endpoints
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix.as_str()) && loose_under(path, prefix))
        {
            return Route::Room(&self.all[*i]);
        }
        // The gate whose route the request is taken for first: by the method its override
        // header names (an app that honours it acts on that method, whatever another room
        // gates for the method sent), then as the path comes, then as an app may read it.
        let overridden = override_method(req);
        let gated = overridden
            .as_ref()
            .and_then(|o| {
                self.gates
                    .iter()
                    .find(|(rule, _)| rule.matches_overridden(req, o))
            })
            .or_else(|| self.gates.iter().find(|(rule, _)| rule.matches(req)))
            .or_else(|| {
                self.gates
                    .iter()
                    .find(|(rule, _)| rule.matches_gate(req, overridden.as_ref()))
            });
        if let Some((_, i)) = gated {
            return Route::Gate(&self.all[*i]);
        }
        if let Some((_, i)) = self.routes.iter().find(|(rule, _)| rule.matches(req)) {
            return Route::Room(&self.all[*i]);
        }
        match self.default {
            Some(i) => Route::Room(&self.all[i]),
            None => Route::Pass,
        }
    }

    /// Every room.
    pub(crate) fn all(&self) -> &[Arc<Room>] {
        &self.all
    }
}

impl WaitingRooms {
    /// Starts putting rooms together.
    pub fn builder() -> WaitingRoomsBuilder {
        WaitingRoomsBuilder::default()
    }

    /// The room `id`, for its [`control`](WaitingRoomLayer::control) and
    /// [`stats`](WaitingRoomLayer::stats); `None` when no room has that id.
    pub fn room(&self, id: &str) -> Option<WaitingRoomLayer> {
        self.rooms
            .all
            .iter()
            .find(|r| r.config().room() == id)
            .map(|r| WaitingRoomLayer::from_room(r.clone()))
    }

    /// The ids of the rooms, in the order first given to the builder.
    pub fn room_ids(&self) -> impl Iterator<Item = &str> {
        self.rooms.all.iter().map(|r| r.config().room())
    }
}

impl<S> Layer<S> for WaitingRooms {
    type Service = WaitingRoomsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WaitingRoomsService::new(inner, self.rooms.clone())
    }
}

impl std::fmt::Debug for WaitingRooms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.rooms;
        let id = |i: &usize| r.all[*i].config().room();
        f.debug_struct("WaitingRooms")
            .field("rooms", &self.room_ids().collect::<Vec<_>>())
            .field(
                "routes",
                &r.routes
                    .iter()
                    .map(|(rule, i)| (rule, id(i)))
                    .collect::<Vec<_>>(),
            )
            .field(
                "gates",
                &r.gates
                    .iter()
                    .map(|(rule, i)| (rule, id(i)))
                    .collect::<Vec<_>>(),
            )
            .field("default", &r.default.as_ref().map(id))
            .finish()
    }
}

/// Puts several rooms together into a [`WaitingRooms`] layer; [`build`](Self::build) checks
/// the whole and returns a [`ConfigError`] instead of panicking.
///
/// Each room is built as a single room is ([`WaitingRoomLayer::builder`]), with its own
/// settings, keys, cookies, store and endpoints.
#[must_use]
#[derive(Default)]
pub struct WaitingRoomsBuilder {
    rooms: Vec<WaitingRoomLayer>,
    routes: Vec<(Rule, String)>,
    gates: Vec<(Rule, String)>,
    default: Option<String>,
}

impl WaitingRoomsBuilder {
    /// Requests matching `rule` go to `room`. The same room may be given with several rules.
    pub fn room(mut self, rule: Rule, room: WaitingRoomLayer) -> Self {
        self.routes.push((rule, room.config().room().to_owned()));
        self.rooms.push(room);
        self
    }

    /// Requests no rule takes go to `room` (without one they pass through untouched: no
    /// [`Admission`](crate::Admission), no cookie, no store call).
    pub fn default_room(mut self, room: WaitingRoomLayer) -> Self {
        self.default = Some(room.config().room().to_owned());
        self.rooms.push(room);
        self
    }

    /// A room that no rule sends requests to: its endpoints answer, and gates may name it.
    pub fn gate_only_room(mut self, room: WaitingRoomLayer) -> Self {
        self.rooms.push(room);
        self
    }

    /// Requests matching `rule` are gated by the room `room_id`: they pass with a valid
    /// admission of that room (its admission cookie, its token header, or the
    /// `X-Admission-Ticket` header) and are otherwise refused with `403` JSON `not_admitted`;
    /// never queued. Gates come before room rules, so a gate may name a room that is not in
    /// front of the route (checkout gated by the "drop" room while the shop's pages are open to
    /// all). The room must be given to the builder too. A room's own gates
    /// ([`WaitingRoomBuilder::gate`](crate::WaitingRoomBuilder::gate)) count as gates here too,
    /// wherever the rules send the request.
    pub fn gate(mut self, rule: Rule, room_id: impl Into<String>) -> Self {
        self.gates.push((rule, room_id.into()));
        self
    }

    /// Checks the whole and builds the layer: every rule well formed; no two rooms with the
    /// same id or the same cookie names; no gate naming an unknown room; no two rules of
    /// different rooms, or gates to different rooms, that can match the same request (rules
    /// with a predicate are not checked).
    pub fn build(self) -> Result<WaitingRooms, ConfigError> {
        let mut all: Vec<Arc<Room>> = Vec::new();
        for layer in &self.rooms {
            let room = layer.room();
            match all
                .iter()
                .find(|r| r.config().room() == room.config().room())
            {
                Some(known) if Arc::ptr_eq(known, room) => {}
                Some(_) => {
                    return Err(ConfigError::DuplicateRoom {
                        room: room.config().room().to_owned(),
                    })
                }
                None => all.push(room.clone()),
            }
        }
        check_cookie_names(&all)?;
        let index = |id: &str| all.iter().position(|r| r.config().room() == id);
        let resolve = |rules: Vec<(Rule, String)>| -> Result<Vec<(Rule, usize)>, ConfigError> {
            let mut out = Vec::with_capacity(rules.len());
            for (rule, id) in rules {
                if !rule.is_valid() {
                    return Err(ConfigError::InvalidRule {
                        rule: rule.describe(),
                    });
                }
                let i = index(&id).ok_or(ConfigError::UnknownGateRoom { room: id })?;
                out.push((rule, i));
            }
            check_overlaps(&out, &all)?;
            // Structured rules first; predicates after, in the order given.
            out.sort_by_key(|(rule, _)| rule.has_predicate());
            Ok(out)
        };
        let routes = resolve(self.routes)?;
        // A room's own gates hold wherever the rules send the request: behind several rooms, a
        // gated route of one room may be routed to another room, or nowhere, and must stay
        // gated (checked for overlaps with the others like any gate).
        let mut gate_rules = self.gates;
        for room in &all {
            for rule in room.gates() {
                gate_rules.push((rule.clone(), room.config().room().to_owned()));
            }
        }
        let gates = resolve(gate_rules)?;
        let default = self.default.as_deref().and_then(index);
        let endpoints: Vec<(String, usize)> = all
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let c = r.config();
                (format!("{}/{}/", c.path_prefix(), c.room()), i)
            })
            .collect();
        // Endpoints are found by prefix: one room's under another's would never be reached.
        for (outer, i) in &endpoints {
            if let Some((_, j)) = endpoints
                .iter()
                .find(|(inner, j)| j != i && inner.starts_with(outer.as_str()))
            {
                return Err(ConfigError::NestedEndpoints {
                    outer_room: all[*i].config().room().to_owned(),
                    inner_room: all[*j].config().room().to_owned(),
                });
            }
        }
        Ok(WaitingRooms {
            rooms: Arc::new(Rooms {
                all,
                endpoints,
                gates,
                routes,
                default,
            }),
        })
    }
}

/// No two rooms share a cookie name: a browser keeps one value per name, so one room's cookie
/// would overwrite the other's.
fn check_cookie_names(all: &[Arc<Room>]) -> Result<(), ConfigError> {
    let mut seen: Vec<&str> = Vec::new();
    for room in all {
        let c = room.config().cookies();
        for name in [c.queue_name(), c.admission_name()] {
            if seen.contains(&name) {
                return Err(ConfigError::SharedCookieName {
                    name: name.to_owned(),
                });
            }
            seen.push(name);
        }
    }
    Ok(())
}

/// No two structured rules for different rooms can match the same request.
fn check_overlaps(rules: &[(Rule, usize)], all: &[Arc<Room>]) -> Result<(), ConfigError> {
    let structured: Vec<&(Rule, usize)> =
        rules.iter().filter(|(r, _)| !r.has_predicate()).collect();
    for (n, (a, i)) in structured.iter().enumerate() {
        for (b, j) in &structured[n + 1..] {
            if i != j && a.may_overlap(b) {
                return Err(ConfigError::OverlappingRules {
                    first_room: all[*i].config().room().to_owned(),
                    first_rule: a.describe(),
                    second_room: all[*j].config().room().to_owned(),
                    second_rule: b.describe(),
                });
            }
        }
    }
    Ok(())
}

impl std::fmt::Debug for WaitingRoomsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoomsBuilder")
            .field("routes", &self.routes)
            .field("gates", &self.gates)
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}
