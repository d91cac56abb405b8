//! Reading and checking what a caller sends: a JSON body whose every member is kept (a key
//! given twice is refused, not read as its last value), the `PATCH` of a room (its settings,
//! and the switch of its capacity controller), a release's count, and the echo of a bad
//! value, capped.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use std::time::Duration;

use crate::auto::AutoCapacity;
use crate::store::SettingsChange;

/// A body's JSON: an object's members in the order sent, **every one of them** (a key given
/// twice is there twice, where `serde_json::Value` would keep only the last), or another value.
#[derive(Debug, PartialEq)]
pub(super) enum Json {
    Object(Vec<(String, Value)>),
    Other(Value),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(
            match deserializer.deserialize_any(AnyVisitor { top: true })? {
                Parsed::Members(members) => Json::Object(members),
                Parsed::Value(value) => Json::Other(value),
            },
        )
    }
}

/// A member's value, any JSON, with every object in it giving each key once: one given twice
/// fails the body's parse (`{"auto": {"min": 1, "min": 9}}` would read as 9), as a top-level
/// key given twice is refused by [`members`].
struct Once(Value);

impl<'de> Deserialize<'de> for Once {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_any(AnyVisitor { top: false })? {
            Parsed::Value(value) => Ok(Once(value)),
            Parsed::Members(_) => unreachable!("only the top keeps its members"),
        }
    }
}

/// What [`AnyVisitor`] read: the top object's members, every one of them, or a value.
enum Parsed {
    Members(Vec<(String, Value)>),
    Value(Value),
}

/// Reads any JSON value. An object at the `top` keeps every member (a key given twice is
/// there twice, for [`members`] to name); any other object must give each key once.
struct AnyVisitor {
    top: bool,
}

impl<'de> Visitor<'de> for AnyVisitor {
    type Value = Parsed;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        if self.top {
            let mut members = Vec::new();
            while let Some((name, Once(value))) = map.next_entry::<String, Once>()? {
                members.push((name, value));
            }
            return Ok(Parsed::Members(members));
        }
        let mut object = serde_json::Map::new();
        while let Some((name, Once(value))) = map.next_entry::<String, Once>()? {
            if object.contains_key(&name) {
                return Err(serde::de::Error::custom(format!(
                    "`{}` given twice: give each field once",
                    capped(&name)
                )));
            }
            object.insert(name, value);
        }
        Ok(Parsed::Value(Value::Object(object)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Parsed, A::Error> {
        let mut items = Vec::new();
        while let Some(Once(item)) = seq.next_element::<Once>()? {
            items.push(item);
        }
        Ok(Parsed::Value(Value::Array(items)))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Parsed, E> {
        Ok(Parsed::Value(Value::Bool(b)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Parsed, E> {
        Ok(Parsed::Value(Value::from(n)))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Parsed, E> {
        Ok(Parsed::Value(Value::from(n)))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Parsed, E> {
        Ok(Parsed::Value(Value::from(n)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Parsed, E> {
        Ok(Parsed::Value(Value::from(s)))
    }

    fn visit_unit<E>(self) -> Result<Parsed, E> {
        Ok(Parsed::Value(Value::Null))
    }
}

#[cfg(test)]
impl From<Value> for Json {
    fn from(value: Value) -> Self {
        match value {
            Value::Object(fields) => Json::Object(fields.into_iter().collect()),
            other => Json::Other(other),
        }
    }
}

/// The members of an object body, or the message for a body that is not one, or that gives a
/// key twice (JSON leaves duplicates to the reader; read as the last, they would hide a
/// mistake: `{"capacity": 0, "capacity": 7}` is refused, not taken as 7).
fn members(body: Json, shape: &str) -> Result<Vec<(String, Value)>, String> {
    let Json::Object(members) = body else {
        return Err(shape.to_owned());
    };
    for (i, (name, _)) in members.iter().enumerate() {
        if members[..i].iter().any(|(seen, _)| seen == name) {
            return Err(format!(
                "`{}` given twice: give each field once",
                capped(name)
            ));
        }
    }
    Ok(members)
}

const FIELDS: &str = "capacity, rate, paused, open, end_slots and auto";

/// What a room's `PATCH` asks for.
#[derive(Debug, PartialEq)]
pub(super) struct Patch {
    /// The settings to change (empty when only `auto` was given).
    pub(super) change: SettingsChange,
    /// `{"auto": {...}}`: the capacity controller switched, or given new terms, after the
    /// change.
    pub(super) auto: Option<AutoPatch>,
}

/// `{"auto": {...}}`: `enabled`, and any of the terms (`min`, `max`, `target_ms`,
/// `error_budget`, `window_ms`), at least one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct AutoPatch {
    pub(super) enabled: Option<bool>,
    pub(super) min: Option<u32>,
    pub(super) max: Option<u32>,
    pub(super) target_ms: Option<u64>,
    pub(super) error_budget: Option<f64>,
    pub(super) window_ms: Option<u64>,
    pub(super) rate_follows: Option<bool>,
}

impl AutoPatch {
    /// `terms` with the ones given here in place of theirs; `None` when none is given.
    pub(super) fn terms(&self, terms: AutoCapacity) -> Option<AutoCapacity> {
        let none = (self.min, self.max, self.target_ms) == (None, None, None)
            && (self.error_budget, self.window_ms, self.rate_follows) == (None, None, None);
        if none {
            return None;
        }
        let target = self
            .target_ms
            .map_or(terms.get_target_p95(), Duration::from_millis);
        Some(
            AutoCapacity::new(
                self.min.unwrap_or(terms.get_min()),
                self.max.unwrap_or(terms.get_max()),
                target,
            )
            .error_budget(self.error_budget.unwrap_or(terms.get_error_budget()))
            .window(
                self.window_ms
                    .map_or(terms.get_window(), Duration::from_millis),
            )
            .rate_follows(self.rate_follows.unwrap_or(terms.get_rate_follows())),
        )
    }
}

/// What a `PATCH` body asks for, or a message saying what is wrong with it (and then nothing is
/// changed).
pub(super) fn patch(body: Json) -> Result<Patch, String> {
    let mut auto = None;
    let mut others = Vec::new();
    let Json::Object(members) = body else {
        return settings_change(body).map(|change| Patch { change, auto });
    };
    for (name, value) in members {
        if name == "auto" {
            if auto.is_some() {
                return Err("`auto` given twice: give each field once".to_owned());
            }
            auto = Some(auto_patch(&value)?);
        } else {
            others.push((name, value));
        }
    }
    let change = if others.is_empty() && auto.is_some() {
        SettingsChange::new()
    } else {
        settings_change(Json::Object(others))?
    };
    Ok(Patch { change, auto })
}

/// `{"enabled": true}`, `{"enabled": false}`, and or any of the terms; each checked for its
/// type and range here, the terms as a whole where they are put together.
fn auto_patch(value: &Value) -> Result<AutoPatch, String> {
    const SHAPE: &str = "auto must be an object of enabled (true or false) and any of min, \
                         max, target_ms, error_budget, window_ms and rate_follows";
    let Some(fields) = value.as_object().filter(|f| !f.is_empty()) else {
        return Err(format!("{SHAPE}, not {}", shown(value)));
    };
    let whole = |name: &str, v: &Value, max: u64| match v.as_u64() {
        Some(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "auto's {name} must be a whole number from 1 to {max}{}, not {}",
            written(v, |n| (1..=max).contains(&n)),
            shown(v)
        )),
    };
    let mut patch = AutoPatch::default();
    for (name, v) in fields {
        match name.as_str() {
            "enabled" | "rate_follows" => {
                let flag = Some(v.as_bool().ok_or_else(|| {
                    format!("auto's {name} must be true or false, not {}", shown(v))
                })?);
                if name == "enabled" {
                    patch.enabled = flag;
                } else {
                    patch.rate_follows = flag;
                }
            }
            "min" => patch.min = Some(whole("min", v, u64::from(u32::MAX))? as u32),
            "max" => patch.max = Some(whole("max", v, u64::from(u32::MAX))? as u32),
            "target_ms" => patch.target_ms = Some(whole("target_ms", v, 3_600_000)?),
            "window_ms" => patch.window_ms = Some(whole("window_ms", v, 60_000)?),
            "error_budget" => {
                patch.error_budget =
                    Some(v.as_f64().filter(|b| *b > 0.0 && *b < 1.0).ok_or_else(|| {
                        format!(
                            "auto's error_budget must be a share between 0 and 1, such as \
                                 0.01, not {}",
                            shown(v)
                        )
                    })?)
            }
            other => return Err(format!("{SHAPE}, not {}", capped(other))),
        }
    }
    Ok(patch)
}

/// The settings change of a `PATCH` body.
fn settings_change(body: Json) -> Result<SettingsChange, String> {
    let fields = members(
        body,
        "the body must be a JSON object, such as {\"capacity\": 100}",
    )?;
    if fields.is_empty() {
        return Err(format!("nothing to change: give any of {FIELDS}"));
    }
    let mut change = SettingsChange::new();
    let mut end_slots = false;
    for (name, value) in &fields {
        change =
            match name.as_str() {
                "capacity" => change.capacity(match value.as_u64() {
                    Some(0) => return Err("capacity must be at least 1".to_owned()),
                    Some(n) if n <= u64::from(u32::MAX) => n as u32,
                    _ => {
                        return Err(format!(
                            "capacity must be a whole number from 1 to {}{}, not {}",
                            u32::MAX,
                            written(value, |n| (1..=u64::from(u32::MAX)).contains(&n)),
                            shown(value)
                        ))
                    }
                }),
                "rate" => change.admission_rate(match value {
                    Value::Null => None,
                    v => match v.as_u64() {
                        Some(0) => return Err(
                            "rate must be at least 1 admission per second; null removes the limit"
                                .to_owned(),
                        ),
                        Some(n) if n <= u64::from(u32::MAX) => Some(n as u32),
                        _ => {
                            return Err(format!(
                                "rate must be a whole number of admissions per second{}, or \
                                 null for no limit, not {}",
                                written(value, |n| (1..=u64::from(u32::MAX)).contains(&n)),
                                shown(value)
                            ))
                        }
                    },
                }),
                "paused" => change.paused(boolean(name, value)?),
                "open" => change.open(boolean(name, value)?),
                // Only ever `true`: `false` would be a change that changes nothing.
                "end_slots" => {
                    if *value != Value::Bool(true) {
                        return Err(format!(
                            "end_slots can only be true, with \"open\": false (it ends every \
                             slot on closing); leave it out otherwise, not {}",
                            capped(&value.to_string())
                        ));
                    }
                    end_slots = true;
                    change
                }
                other => {
                    return Err(format!(
                        "unknown field {:?}: the fields are {FIELDS}",
                        capped(other)
                    ))
                }
            };
    }
    if end_slots {
        if change.get_open() != Some(false) {
            return Err(
                "end_slots goes with \"open\": false (it ends every slot on closing)".into(),
            );
        }
        change = change.end_slots();
    }
    Ok(change)
}

/// For a whole number sent as a decimal (`1000.0`, `1e3`, `-0`: JSON reads them as floats,
/// which are refused), the words that say how to write it, with the number to send when it
/// `fits`; nothing for any other value.
fn written(value: &Value, fits: impl Fn(u64) -> bool) -> String {
    const WRITTEN: &str = ", written without a decimal point or exponent";
    match value.as_f64() {
        Some(f) if value.is_f64() && f.fract() == 0.0 => {
            // Below 2^64 (`u64::MAX as f64` is 2^64), the cast is exact.
            if (0.0..u64::MAX as f64).contains(&f) && fits(f as u64) {
                format!("{WRITTEN} (as {})", f as u64)
            } else {
                WRITTEN.to_owned()
            }
        }
        _ => String::new(),
    }
}

/// A value sent, as JSON writes it, capped.
fn shown(value: &Value) -> String {
    capped(&value.to_string()).into_owned()
}

fn boolean(name: &str, value: &Value) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("{name} must be true or false, not {}", shown(value)))
}

/// The `count` of a release body.
pub(super) fn release_count(body: Json) -> Result<u64, String> {
    const SHAPE: &str = "the body must be {\"count\": n}, n at least 1";
    let mut count = None;
    for (name, value) in members(body, SHAPE)? {
        if name != "count" {
            return Err(format!("unknown field {:?}: {SHAPE}", capped(&name)));
        }
        count = Some(value);
    }
    match count.as_ref().map(|v| (v, v.as_u64())) {
        None => Err(format!("count is missing: {SHAPE}")),
        Some((_, Some(0))) => Err("count must be at least 1".to_owned()),
        Some((_, Some(n))) => Ok(n),
        Some((v, None)) => Err(format!(
            "count must be a whole number of at least 1{}, not {}",
            written(v, |n| n >= 1),
            shown(v)
        )),
    }
}

/// `text` as an answer shows it: at most its first 64 characters, then `…` if there was more
/// (what a caller sent is echoed to say what was wrong, not repeated at any length).
pub(super) fn capped(text: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 64;
    match text.char_indices().nth(MAX) {
        None => text.into(),
        Some((end, _)) => format!("{}…", &text[..end]).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_patch_switches_the_capacity_controller_alone_or_after_a_change() {
        let on = patch(json!({"auto": {"enabled": true}}).into()).unwrap();
        let switch = |enabled| AutoPatch {
            enabled: Some(enabled),
            ..AutoPatch::default()
        };
        assert_eq!(
            on,
            Patch {
                change: SettingsChange::new(),
                auto: Some(switch(true))
            }
        );
        let both = patch(json!({"capacity": 50, "auto": {"enabled": false}}).into()).unwrap();
        assert_eq!(
            (both.change.get_capacity(), both.auto),
            (Some(50), Some(switch(false)))
        );
        let plain = patch(json!({"paused": true}).into()).unwrap();
        assert_eq!(plain.auto, None);
        for bad in [
            json!({"auto": true}),
            json!({"auto": {"enabled": "yes"}}),
            json!({"auto": {"enabled": true, "minimum": 5}}),
            json!({"auto": {"min": 0}}),
            json!({"auto": {"min": -1}}),
            json!({"auto": {"max": 4_294_967_296u64}}),
            json!({"auto": {"target_ms": 2.5}}),
            json!({"auto": {"window_ms": 60_001}}),
            json!({"auto": {"error_budget": 1.0}}),
            json!({"auto": {"error_budget": 0}}),
            json!({"auto": {"error_budget": "1%"}}),
            json!({"auto": {"rate_follows": 1}}),
            json!({"auto": {}}),
            json!({}),
        ] {
            assert!(patch(bad.clone().into()).is_err(), "{bad}");
        }
        let twice = patch(parse(
            r#"{"auto": {"enabled": true}, "auto": {"enabled": false}}"#,
        ));
        assert!(twice.unwrap_err().contains("twice"));
    }

    #[test]
    fn a_patch_of_the_terms_changes_those_given_and_keeps_the_rest() {
        let was = AutoCapacity::new(20, 2_000, Duration::from_millis(300));
        let given = patch(json!({"auto": {"max": 500, "error_budget": 0.02}}).into())
            .unwrap()
            .auto
            .unwrap();
        assert_eq!(given.enabled, None);
        assert_eq!(
            given.terms(was),
            Some(
                AutoCapacity::new(20, 500, Duration::from_millis(300))
                    .error_budget(0.02)
                    .window(was.get_window())
            )
        );
        let all = patch(
            json!({"auto": {"enabled": false, "min": 1, "max": 9, "target_ms": 80,
                            "error_budget": 0.5, "window_ms": 1_000, "rate_follows": true}})
            .into(),
        )
        .unwrap()
        .auto
        .unwrap();
        assert_eq!(
            all.terms(was),
            Some(
                AutoCapacity::new(1, 9, Duration::from_millis(80))
                    .error_budget(0.5)
                    .window(Duration::from_secs(1))
                    .rate_follows(true)
            )
        );
        assert_eq!(switch_only().terms(was), None);
    }

    fn switch_only() -> AutoPatch {
        AutoPatch {
            enabled: Some(true),
            ..AutoPatch::default()
        }
    }

    fn parse(body: &str) -> Json {
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn patch_bodies() {
        let ok =
            settings_change(json!({"capacity": 5, "rate": null, "paused": true}).into()).unwrap();
        assert_eq!(ok.get_capacity(), Some(5));
        assert_eq!(ok.get_admission_rate(), Some(None));
        assert_eq!(ok.get_paused(), Some(true));
        let close = settings_change(json!({"open": false, "end_slots": true}).into()).unwrap();
        assert!(close.ends_slots());
        for bad in [
            json!({}),
            json!([]),
            json!({"capacity": 0}),
            json!({"capacity": -1}),
            json!({"capacity": 1.5}),
            json!({"capacity": "5"}),
            json!({"capacity": 4_294_967_296u64}),
            json!({"rate": 0}),
            json!({"rate": "fast"}),
            json!({"paused": 1}),
            json!({"capcity": 5}),
            json!({"end_slots": true}),
            json!({"open": true, "end_slots": true}),
        ] {
            assert!(
                settings_change(bad.clone().into()).is_err(),
                "{bad} was accepted"
            );
        }
    }

    #[test]
    fn release_bodies() {
        assert_eq!(release_count(json!({"count": 3}).into()), Ok(3));
        for bad in [
            json!({}),
            json!({"count": 0}),
            json!({"count": -2}),
            json!({"count": "3"}),
            json!({"count": 3, "all": true}),
            json!(3),
        ] {
            assert!(
                release_count(bad.clone().into()).is_err(),
                "{bad} was accepted"
            );
        }
    }

    /// A body as the service reads it, duplicate keys and all.
    #[test]
    fn bodies_keep_every_member() {
        assert_eq!(
            parse(r#"{"a": 1, "a": [2], "b": null}"#),
            Json::Object(vec![
                ("a".to_owned(), json!(1)),
                ("a".to_owned(), json!([2])),
                ("b".to_owned(), Value::Null)
            ])
        );
        for other in ["[1, {\"a\": 2}]", "true", "-3", "7", "2.5", "\"x\"", "null"] {
            let value: Value = serde_json::from_str(other).unwrap();
            assert_eq!(parse(other), Json::Other(value), "{other}");
        }
        assert!(serde_json::from_str::<Json>("{\"a\": 1} x").is_err());
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        for (body, name) in [
            (r#"{"capacity": 0, "capacity": 7}"#, "capacity"),
            (r#"{"paused": true, "paused": false}"#, "paused"),
            (r#"{"capacity": 5, "rate": 1, "rate": null}"#, "rate"),
            (
                r#"{"open": false, "end_slots": true, "end_slots": true}"#,
                "end_slots",
            ),
            (r#"{"nope": 1, "nope": 2}"#, "nope"),
        ] {
            let why = settings_change(parse(body)).unwrap_err();
            assert!(
                why.contains(&format!("`{name}` given twice")),
                "{body}: {why}"
            );
        }
        let why = release_count(parse(r#"{"count": 1, "count": 2}"#)).unwrap_err();
        assert!(why.contains("`count` given twice"), "{why}");
        assert_eq!(release_count(parse(r#"{"count": 2}"#)), Ok(2));
        // Within a member too, at any depth: the body does not parse, and says why.
        for (body, name) in [
            (r#"{"auto": {"min": 1, "min": 9}}"#, "min"),
            (
                r#"{"auto": {"enabled": true, "enabled": false}}"#,
                "enabled",
            ),
            (r#"{"capacity": 5, "x": [{"a": 1, "a": 2}]}"#, "a"),
        ] {
            let why = serde_json::from_str::<Json>(body).unwrap_err().to_string();
            assert!(
                why.contains(&format!("`{name}` given twice")),
                "{body}: {why}"
            );
        }
        let auto = patch(parse(r#"{"auto": {"enabled": true, "min": 2}}"#)).unwrap();
        assert_eq!(auto.auto.and_then(|a| a.min), Some(2));
    }

    #[test]
    fn end_slots_is_true_with_closing_or_absent() {
        for bad in [
            json!({"end_slots": false}),
            json!({"open": true, "end_slots": false}),
            json!({"open": false, "end_slots": false}),
            json!({"capacity": 5, "end_slots": false}),
            json!({"open": false, "end_slots": null}),
            json!({"open": false, "end_slots": 1}),
            json!({"paused": true, "end_slots": true}),
        ] {
            let why = settings_change(bad.clone().into()).unwrap_err();
            assert!(why.contains("end_slots"), "{bad}: {why}");
        }
        assert!(!settings_change(json!({"open": false}).into())
            .unwrap()
            .ends_slots());
    }

    #[test]
    fn whole_numbers_written_as_decimals_are_refused_saying_so() {
        let why = |body: &str| settings_change(parse(body)).unwrap_err();
        let written = "written without a decimal point or exponent";
        for body in [
            r#"{"capacity": 1e3}"#,
            r#"{"capacity": 1000.0}"#,
            r#"{"capacity": 10E2}"#,
        ] {
            assert_eq!(
                why(body),
                format!(
                    "capacity must be a whole number from 1 to 4294967295, {written} (as 1000), \
                     not 1000.0"
                ),
                "{body}"
            );
        }
        // Out of range, or no admissible whole number at all: no suggestion.
        assert_eq!(
            why(r#"{"capacity": -0}"#),
            format!("capacity must be a whole number from 1 to 4294967295, {written}, not -0.0")
        );
        assert!(why(r#"{"capacity": 1e10}"#).ends_with(&format!("{written}, not 10000000000.0")));
        assert!(why(r#"{"capacity": -2.0}"#).ends_with(&format!("{written}, not -2.0")));
        assert_eq!(
            why(r#"{"rate": 2e1}"#),
            format!(
                "rate must be a whole number of admissions per second, {written} (as 20), or \
                 null for no limit, not 20.0"
            )
        );
        assert!(why(r#"{"rate": -0.0}"#).contains(&format!("{written}, or null")));
        // 2^64: no u64, so no suggestion (a saturating cast would suggest u64::MAX).
        assert_eq!(
            release_count(parse(r#"{"count": 18446744073709551616.0}"#)),
            Err(format!(
                "count must be a whole number of at least 1, {written}, not 1.8446744073709552e+19"
            ))
        );
        assert_eq!(
            release_count(parse(r#"{"count": 3.0}"#)),
            Err(format!(
                "count must be a whole number of at least 1, {written} (as 3), not 3.0"
            ))
        );
        // Not whole, or not numbers: as before, without the clause.
        assert_eq!(
            why(r#"{"capacity": 2.5}"#),
            "capacity must be a whole number from 1 to 4294967295, not 2.5"
        );
        assert_eq!(
            release_count(parse(r#"{"count": "3"}"#)),
            Err("count must be a whole number of at least 1, not \"3\"".to_owned())
        );
        // Whole numbers as whole numbers are fine.
        assert_eq!(
            settings_change(parse(r#"{"capacity": 1000}"#))
                .unwrap()
                .get_capacity(),
            Some(1000)
        );
    }

    #[test]
    fn echoes_are_capped() {
        assert_eq!(capped("short"), "short");
        let exact = "é".repeat(64);
        assert_eq!(capped(&exact), exact);
        let long = "é".repeat(5000);
        assert_eq!(capped(&long), format!("{}…", "é".repeat(64)));
    }
}
