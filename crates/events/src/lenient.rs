//! Field deserialisers that never fail on valid JSON.
//!
//! Pi keeps any line that `JSON.parse` accepts, whatever the types inside. The
//! typed view therefore reads each field as "the type we expect, or nothing":
//! a value of another JSON type becomes `None` (the raw line still holds it).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, value::MapAccessDeserializer, Deserialize, Deserializer, IgnoredAny, Visitor};

/// What one lenient field accepts; every hook defaults to "not this type".
trait Accept<'de>: Sized {
    type Out;
    fn string(_: &str) -> Option<Self::Out> {
        None
    }
    fn number(_: f64) -> Option<Self::Out> {
        None
    }
    fn boolean(_: bool) -> Option<Self::Out> {
        None
    }
    fn seq<A: de::SeqAccess<'de>>(mut seq: A) -> Result<Option<Self::Out>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn map<A: de::MapAccess<'de>>(mut map: A) -> Result<Option<Self::Out>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

struct Lenient<K>(PhantomData<K>);

impl<'de, K: Accept<'de>> Visitor<'de> for Lenient<K> {
    type Value = Option<K::Out>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(K::string(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(K::boolean(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(K::number(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(K::number(v as f64))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(K::number(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        K::seq(seq)
    }
    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        K::map(map)
    }
}

struct Str;
impl Accept<'_> for Str {
    type Out = String;
    fn string(v: &str) -> Option<String> {
        Some(v.to_owned())
    }
}

struct NameK;
impl Accept<'_> for NameK {
    type Out = crate::entry::Name;
    fn string(v: &str) -> Option<crate::entry::Name> {
        Some(v.to_owned().into())
    }
}

struct Num;
impl Accept<'_> for Num {
    type Out = f64;
    fn number(v: f64) -> Option<f64> {
        Some(v)
    }
}

struct Bool;
impl Accept<'_> for Bool {
    type Out = bool;
    fn boolean(v: bool) -> Option<bool> {
        Some(v)
    }
}

struct Obj<T>(PhantomData<T>);
impl<'de, T: Deserialize<'de>> Accept<'de> for Obj<T> {
    type Out = T;
    fn map<A: de::MapAccess<'de>>(map: A) -> Result<Option<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Some)
    }
}

struct List<T>(PhantomData<T>);
impl<'de, T: Deserialize<'de>> Accept<'de> for List<T> {
    type Out = Vec<T>;
    fn seq<A: de::SeqAccess<'de>>(mut seq: A) -> Result<Option<Vec<T>>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            out.push(item);
        }
        Ok(Some(out))
    }
}

/// A string field; any other JSON type reads as `None`.
pub(crate) fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    d.deserialize_any(Lenient::<Str>(PhantomData))
}

/// A string field kept as a [`crate::entry::Name`]; any other JSON type reads as `None`.
pub(crate) fn name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<crate::entry::Name>, D::Error> {
    d.deserialize_any(Lenient::<NameK>(PhantomData))
}

/// A number field (as JavaScript sees it, an `f64`); other types read as `None`.
pub(crate) fn number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_any(Lenient::<Num>(PhantomData))
}

/// A boolean field; other types read as `None`.
pub(crate) fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    d.deserialize_any(Lenient::<Bool>(PhantomData))
}

/// A nested object read as `T`; any non-object value reads as `None`.
pub(crate) fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_any(Lenient::<Obj<T>>(PhantomData))
}

struct ContentK;
impl<'de> Accept<'de> for ContentK {
    type Out = crate::entry::Content;
    fn string(v: &str) -> Option<Self::Out> {
        Some(crate::entry::Content::Text(v.to_owned()))
    }
    fn seq<A: de::SeqAccess<'de>>(seq: A) -> Result<Option<Self::Out>, A::Error> {
        let items = List::<crate::entry::BlockItem>::seq(seq)?;
        Ok(items.map(|items| crate::entry::Content::Blocks(items.into_iter().map(|b| b.0).collect())))
    }
}

/// Message content: a string, or an array whose items read as blocks.
pub(crate) fn content<'de, D: Deserializer<'de>>(d: D) -> Result<Option<crate::entry::Content>, D::Error> {
    d.deserialize_any(Lenient::<ContentK>(PhantomData))
}

/// A list whose items read as `T` (each item decides how lenient it is);
/// any non-array value reads as `None`.
pub(crate) fn list<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    d.deserialize_any(Lenient::<List<T>>(PhantomData))
}

/// A context edit's `replacement`: `null`, an object with `content`, or anything else.
pub(crate) fn replacement<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::entry::Replacement>, D::Error> {
    use crate::entry::Replacement;
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Replacement>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Some(Replacement::Omit))
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Some(Replacement::Omit))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Some(Replacement::Invalid))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Some(Replacement::Invalid))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Some(Replacement::Invalid))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Some(Replacement::Invalid))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Some(Replacement::Invalid))
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Some(Replacement::Invalid))
        }
        fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            #[derive(serde::Deserialize)]
            struct Fields {
                #[serde(default, deserialize_with = "content")]
                content: Option<crate::entry::Content>,
            }
            let fields = Fields::deserialize(MapAccessDeserializer::new(map))?;
            Ok(Some(Replacement::Content(fields.content)))
        }
    }
    d.deserialize_any(V)
}
