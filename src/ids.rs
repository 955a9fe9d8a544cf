//! Identifiers, parsed once at the edge and printed the way Flink prints them.
//!
//! Job, application and trigger ids are 16 bytes written as 32 lowercase hex characters
//! (either case is accepted on input). A cluster id is Flink's
//! `high-availability.cluster-id`: 1-128 characters of `[A-Za-z0-9._-]`.

use std::fmt;
use std::str::FromStr;

/// Why an identifier was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("must be 32 hexadecimal characters")]
    Hex,
    #[error("must be 1-128 characters of [A-Za-z0-9._-]")]
    Cluster,
}

/// A 16-byte Flink identifier (JobID, ApplicationID, TriggerId).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HexId(u128);

impl HexId {
    /// A fresh random id (a v4 UUID's 16 bytes).
    pub fn random() -> Self {
        HexId(uuid::Uuid::new_v4().as_u128())
    }
}

impl FromStr for HexId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(IdError::Hex);
        }
        u128::from_str_radix(s, 16)
            .map(HexId)
            .map_err(|_| IdError::Hex)
    }
}

impl fmt::Display for HexId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for HexId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl serde::Serialize for HexId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Flink's `high-availability.cluster-id`: entries of different clusters never meet.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterId(String);

impl ClusterId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ClusterId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        let ok = (1..=128).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(ClusterId(s.to_owned()))
        } else {
            Err(IdError::Cluster)
        }
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for ClusterId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_ids_parse_either_case_and_print_lowercase() {
        let id: HexId = "38DCC0B26CE09271cefd5020d41b4b88".parse().unwrap();
        assert_eq!(id.to_string(), "38dcc0b26ce09271cefd5020d41b4b88");
        let zero: HexId = "00000000000000000000000000000001".parse().unwrap();
        assert_eq!(zero.to_string(), "00000000000000000000000000000001");
        for bad in [
            "",
            "abc",
            "38dcc0b26ce09271cefd5020d41b4b8",
            "38dcc0b26ce09271cefd5020d41b4b888",
            "38dcc0b2-ce09-271c-efd5-020d41b4b8",
            "+8dcc0b26ce09271cefd5020d41b4b88",
            "g8dcc0b26ce09271cefd5020d41b4b88",
            "３8dcc0b26ce09271cefd5020d41b4b8",
        ] {
            assert_eq!(bad.parse::<HexId>(), Err(IdError::Hex), "{bad:?}");
        }
    }

    #[test]
    fn cluster_ids() {
        for good in ["default", "a", "A.b_c-9", &"x".repeat(128)] {
            assert_eq!(good.parse::<ClusterId>().unwrap().as_str(), good);
        }
        for bad in ["", "a/b", "a b", "é", &"x".repeat(129), "a%2Fb"] {
            assert!(bad.parse::<ClusterId>().is_err(), "{bad:?}");
        }
    }
}
