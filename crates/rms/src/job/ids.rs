//! Job identifiers.
//!
//! A [`JobId`] is a newtype over an immutable string holding a random UUIDv4.
//! It converts to and from `String`/`&str` like the spec's `String` newtype,
//! but shares its text (`Arc<str>`), so cloning an ID — done for every child
//! of a parent snapshot — is a reference-count bump, not an allocation. It
//! borrows as `str`, so maps keyed by `JobId` can be searched with a plain
//! `&str` taken from a request.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Identifier of one tracked job (a random UUIDv4 rendered as text).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(Arc<str>);

impl JobId {
    /// Generates a fresh random UUIDv4 identifier.
    pub fn new() -> Self {
        let mut buffer = uuid::Uuid::encode_buffer();
        Self(Arc::from(
            &*uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buffer),
        ))
    }

    /// Wraps an identifier that already exists (for example one read from a
    /// request). No validation: unknown IDs simply find no record.
    pub fn from_existing(id: impl AsRef<str>) -> Self {
        Self(Arc::from(id.as_ref()))
    }

    /// The identifier as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `Default` generates a new random ID, as the spec requires.
impl Default for JobId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl AsRef<str> for JobId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Deref for JobId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

// `Hash`/`Eq` of the newtype equal those of the inner `Arc<str>`, which equal
// those of `str`, so this `Borrow` is consistent as `HashMap` requires.
impl Borrow<str> for JobId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for JobId {
    fn from(value: &str) -> Self {
        Self(Arc::from(value))
    }
}

impl From<String> for JobId {
    fn from(value: String) -> Self {
        Self(Arc::from(value))
    }
}

impl From<&String> for JobId {
    fn from(value: &String) -> Self {
        Self(Arc::from(value.as_str()))
    }
}

impl From<JobId> for String {
    fn from(value: JobId) -> Self {
        value.0.as_ref().to_owned()
    }
}

impl PartialEq<str> for JobId {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for JobId {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// Serialized as a plain JSON string.
impl Serialize for JobId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(JobId::from)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn new_ids_are_uuid_v4_and_unique() {
        let a = JobId::new();
        let b = JobId::default();
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(a.as_str()).expect("job id must be a UUID");
        assert_eq!(parsed.get_version_num(), 4);
    }

    #[test]
    fn conversions_round_trip() {
        let id = JobId::from("abc");
        assert_eq!(id.to_string(), "abc");
        assert_eq!(id.as_ref(), "abc");
        assert_eq!(&*id, "abc");
        assert_eq!(String::from(id.clone()), "abc");
        assert_eq!(JobId::from(String::from("abc")), id);
        assert_eq!(JobId::from_existing("abc"), id);
        assert_eq!(format!("{id:?}"), "\"abc\"");
    }

    #[test]
    fn map_lookup_by_str_matches_job_id_key() {
        let mut map = HashMap::new();
        map.insert(JobId::from("k"), 1);
        assert_eq!(map.get("k"), Some(&1));
    }

    #[test]
    fn serializes_as_a_plain_string() {
        let id = JobId::from("x-1");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"x-1\"");
        let back: JobId = serde_json::from_str("\"x-1\"").unwrap();
        assert_eq!(back, id);
    }
}
