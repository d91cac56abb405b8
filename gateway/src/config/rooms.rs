//! A `[[rooms]]` table: the room's own settings file ([`RoomFile`], every key it knows, read by
//! the crate exactly as a room's file is) with the keys of the routes the room covers beside
//! them.
//!
//! The routes' keys are taken out on the way, while the TOML reader still stands on each key,
//! so that an error in a room's settings (a typo, a bad duration) points at its own line.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;
use tower_waiting_room::config::RoomFile;

/// The routes of one room.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    /// Path prefixes the room covers (`"/"`: every path).
    pub paths: Option<Spanned<Vec<String>>>,
    /// Hosts the room covers (all of them when none).
    pub hosts: Option<Spanned<Vec<String>>>,
    /// Routes gated by the room: `"POST /checkout"`, `"/api/orders/*"`.
    pub gates: Option<Spanned<Vec<String>>>,
    /// Path prefixes that skip the room (static files, webhooks).
    pub bypass: Option<Spanned<Vec<String>>>,
}

const ROUTE_KEYS: [&str; 4] = ["paths", "hosts", "gates", "bypass"];

/// One `[[rooms]]` table.
#[derive(Debug)]
pub(crate) struct RoomEntry {
    pub settings: RoomFile,
    pub routes: Routes,
}

impl<'de> Deserialize<'de> for RoomEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = RoomEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a room: its settings and the routes it covers")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RoomEntry, A::Error> {
        let mut routes = Routes::default();
        let settings = RoomFile::deserialize(WithoutRoutes {
            map,
            routes: &mut routes,
        })?;
        Ok(RoomEntry { settings, routes })
    }
}

/// The table as [`RoomFile`] sees it: the routes' keys read into `routes` and skipped.
struct WithoutRoutes<'a, A> {
    map: A,
    routes: &'a mut Routes,
}

/// A key: one of the routes' (with the room's seed handed back unused, for the next key), or
/// one the room's file takes, read by its own seed, which refuses an unknown key while the
/// reader still stands on it, so that the error points at the key's line.
enum Key<S, V> {
    Route(&'static str, S),
    Room(V),
}

struct KeySeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<S> {
    type Value = Key<S, S::Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let key = String::deserialize(d)?;
        if key == "client_ip_header" {
            // The room would read it, and the gateway's own client address would override it
            // without a word: refused, with where the setting is.
            return Err(de::Error::custom(
                "client_ip_header: the gateway finds the client's address itself; list the \
                 proxies in front of it in the top-level trusted_proxies instead",
            ));
        }
        match ROUTE_KEYS.iter().find(|k| **k == key) {
            Some(route) => Ok(Key::Route(route, self.0)),
            None => self
                .0
                .deserialize(key.into_deserializer())
                .map(Key::Room)
                .map_err(|KeyError(e)| de::Error::custom(e)),
        }
    }
}

/// Keys of a room's settings file that a `[[rooms]]` table refuses, with a word of where the
/// setting goes instead (above).
const REFUSED_KEYS: [&str; 1] = ["client_ip_header"];

/// An error reading a room's key: an unknown one is told with the keys a `[[rooms]]` table
/// takes (the room's file's, less those it refuses, and the routes'), not the room file's list.
#[derive(Debug)]
struct KeyError(String);

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KeyError {}

impl de::Error for KeyError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        KeyError(msg.to_string())
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let keys: Vec<String> = expected
            .iter()
            .filter(|k| !REFUSED_KEYS.contains(k))
            .chain(&ROUTE_KEYS)
            .map(|k| format!("`{k}`"))
            .collect();
        KeyError(format!(
            "unknown field `{field}`, expected one of {}",
            keys.join(", ")
        ))
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for WithoutRoutes<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        mut seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            match self.map.next_key_seed(KeySeed(seed))? {
                None => return Ok(None),
                Some(Key::Room(key)) => return Ok(Some(key)),
                Some(Key::Route(route, unused)) => {
                    let slot = match route {
                        "paths" => &mut self.routes.paths,
                        "hosts" => &mut self.routes.hosts,
                        "gates" => &mut self.routes.gates,
                        _ => &mut self.routes.bypass,
                    };
                    if slot.is_some() {
                        return Err(de::Error::custom(format_args!("duplicate key `{route}`")));
                    }
                    *slot = Some(self.map.next_value()?);
                    seed = unused;
                }
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for WithoutRoutes<'_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}
