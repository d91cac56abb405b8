//! Reading [`Settings`](super::settings::Settings)' values, so that a file and the environment
//! go through the struct's one serde derive: a file's values as the format gave them, the
//! environment's as text, each parsed as its field's type. A refused value's error leaves the
//! key or the variable to the caller, who knows it.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Unexpected,
    Visitor,
};
use serde::Deserialize;

use super::readable::{parse_bool, parse_number, refused};

/// One setting's value as a file or the environment gives it, before it is read as its field's
/// type.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Str(String),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Bool(bool),
    Null,
    /// A table, a list, a date...: no setting takes one, and the error says which it was.
    Map,
    Seq,
    Bytes,
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a setting's value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Signed(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Unsigned(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_bytes<E>(self, _: &[u8]) -> Result<Value, E> {
        Ok(Value::Bytes)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(Value::Seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Value::Map)
    }
}

/// The message of a value that could not be read.
#[derive(Debug)]
pub(crate) struct ValueError(pub(crate) String);

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ValueError {}

impl de::Error for ValueError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ValueError(msg.to_string())
    }
}

/// One value, read as whatever its field asks for. From the environment (`env`), every value
/// is text, so numbers and booleans are parsed from it; a file's values are taken as they are.
struct ValueDeserializer<'a> {
    value: &'a Value,
    env: bool,
}

macro_rules! whole_numbers {
    ($($method:ident => $visit:ident: $ty:ty),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
            match self.value {
                Value::Str(s) if self.env => {
                    let n: $ty = parse_number(s, u64::from(<$ty>::MAX))
                        .map_err(|problem| ValueError(refused(s, problem)))?;
                    visitor.$visit(n)
                }
                _ => self.deserialize_any(visitor),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for ValueDeserializer<'_> {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self.value {
            Value::Str(s) => visitor.visit_str(s),
            Value::Unsigned(n) => visitor.visit_u64(*n),
            Value::Signed(n) => visitor.visit_i64(*n),
            Value::Float(x) => visitor.visit_f64(*x),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Null => visitor.visit_none(),
            Value::Map => Err(de::Error::invalid_type(Unexpected::Map, &visitor)),
            Value::Seq => Err(de::Error::invalid_type(Unexpected::Seq, &visitor)),
            Value::Bytes => Err(de::Error::invalid_type(Unexpected::Bytes(&[]), &visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        match self.value {
            Value::Str(s) if self.env => {
                let b = parse_bool(s).map_err(|problem| ValueError(refused(s, problem)))?;
                visitor.visit_bool(b)
            }
            _ => self.deserialize_any(visitor),
        }
    }

    whole_numbers! {
        deserialize_u8 => visit_u8: u8,
        deserialize_u16 => visit_u16: u16,
        deserialize_u32 => visit_u32: u32,
        deserialize_u64 => visit_u64: u64,
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i64 i128 u128 f32 f64 char str string bytes byte_buf unit unit_struct
        newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// The entries as a map, remembering which one's value is being read.
struct Entries<'a> {
    entries: &'a [(String, Value)],
    next: usize,
    /// The entry whose value is being read: when reading fails, the one refused.
    reading: &'a Cell<Option<usize>>,
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = ValueError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ValueError> {
        let Some((key, _)) = self.entries.get(self.next) else {
            return Ok(None);
        };
        seed.deserialize(key.as_str().into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, ValueError> {
        let index = self.next;
        self.next += 1;
        self.reading.set(Some(index));
        let value = seed.deserialize(ValueDeserializer {
            value: &self.entries[index].1,
            env: true,
        })?;
        self.reading.set(None);
        Ok(value)
    }
}

impl<'de> Deserializer<'de> for Entries<'_> {
    type Error = ValueError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ValueError> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// A refusal of [`from_entries`]: the message, and the entry whose value was refused (`None`
/// when no one value is at fault, as with a key given twice).
#[derive(Debug)]
pub(crate) struct EntryError {
    pub(crate) entry: Option<usize>,
    pub(crate) message: String,
}

/// `T` from the environment's `(key, value)` entries, keys being `T`'s field names and values
/// text, each parsed as its field's type.
pub(crate) fn from_entries<T: DeserializeOwned>(
    entries: &[(String, Value)],
) -> Result<T, EntryError> {
    let reading = Cell::new(None);
    T::deserialize(Entries {
        entries,
        next: 0,
        reading: &reading,
    })
    .map_err(|ValueError(message)| EntryError {
        entry: reading.get(),
        message,
    })
}

/// A file's value, as the format gave it, read by `seed`.
pub(crate) fn read_file_value<'de, S: DeserializeSeed<'de>>(
    value: &Value,
    seed: S,
) -> Result<S::Value, ValueError> {
    seed.deserialize(ValueDeserializer { value, env: false })
}

/// The field names of the struct `T` derives `Deserialize` for, in their order.
pub(crate) fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    /// Asked for a struct, keeps its field names (and reads nothing).
    struct Probe<'a>(&'a mut &'static [&'static str]);

    impl<'de> Deserializer<'de> for Probe<'_> {
        type Error = ValueError;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, ValueError> {
            Err(ValueError("not a struct".to_owned()))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, ValueError> {
            *self.0 = fields;
            Err(ValueError("only the field names were wanted".to_owned()))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}
