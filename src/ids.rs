//! Identifiers, parsed once at the edge and printed the way Flink prints them.
//!
//! Job, application and trigger ids are 16 bytes written as 32 lowercase hex characters
//! (either case is accepted on input); each is its own type, so that a trigger id cannot be
//! passed where a job id is expected. A cluster id is Flink's
//! `high-availability.cluster-id`: 1-128 characters of `[A-Za-z0-9._-]`.
//!
//! Every identifier is kept in the database as its text, and decoded from rows as its type
//! (a malformed stored id is a decoding error, never a panic).

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

/// 16 bytes written as 32 hex characters: what the three Flink id types share.
fn parse_hex16(s: &str) -> Result<u128, IdError> {
    if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(IdError::Hex);
    }
    u128::from_str_radix(s, 16).map_err(|_| IdError::Hex)
}

/// Implements the database encoding of a type kept as text: its `Display` form is written,
/// its `FromStr` reads it back. Used for identifiers and for the enums the schema keeps as
/// text (states, kinds, statuses).
macro_rules! sql_text {
    ($t:ty) => {
        $crate::ids::sql_text!($t, |text: &str| text.parse::<$t>());
    };
    ($t:ty, $read:expr) => {
        impl<DB: sqlx::Database> sqlx::Type<DB> for $t
        where
            str: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $t
        where
            String: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self, buf: &mut <DB as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <String as sqlx::Encode<'q, DB>>::encode(self.to_string(), buf)
            }
        }

        impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $t
        where
            &'r str: sqlx::Decode<'r, DB>,
        {
            fn decode(
                value: <DB as sqlx::Database>::ValueRef<'r>,
            ) -> Result<Self, sqlx::error::BoxDynError> {
                let text = <&'r str as sqlx::Decode<'r, DB>>::decode(value)?;
                ($read)(text).map_err(|e| format!("stored {} {text:?}: {e}", stringify!($t)).into())
            }
        }
    };
}
pub(crate) use sql_text;

/// Whether `value` prints as `text`.
pub(crate) fn prints_as(value: &impl fmt::Display, text: &str) -> bool {
    use fmt::Write as _;
    let mut printed = String::with_capacity(text.len());
    let _ = write!(printed, "{value}");
    printed == text
}

/// An identifier equals the text it prints as (`id == "38dcc0b2..."`).
macro_rules! text_eq {
    ($t:ty) => {
        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                $crate::ids::prints_as(self, other)
            }
        }

        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                $crate::ids::prints_as(self, other)
            }
        }

        impl PartialEq<String> for $t {
            fn eq(&self, other: &String) -> bool {
                $crate::ids::prints_as(self, other)
            }
        }
    };
}
pub(crate) use text_eq;

/// Defines a 16-byte Flink identifier type.
macro_rules! hex_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(u128);

        impl $name {
            /// A fresh random id (a v4 UUID's 16 bytes).
            pub fn random() -> Self {
                $name(uuid::Uuid::new_v4().as_u128())
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                parse_hex16(s).map($name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:032x}", self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        sql_text!($name);
        text_eq!($name);
    };
}

hex_id!(
    /// Flink's `JobID`.
    JobId
);
hex_id!(
    /// Flink 2.3's `ApplicationID`.
    ApplicationId
);
hex_id!(
    /// Flink's `TriggerId`: the id of a savepoint, checkpoint or disposal operation (jobstore's
    /// request-id, which it also gives Flink as the trigger id).
    TriggerId
);

impl TriggerId {
    /// A trigger id derived from `parts` (the first 16 bytes of their SHA-256): the same
    /// parts give the same id in every process, so that two replicas, a crash or a retry
    /// can only ever make one operation for them.
    pub fn derive(parts: &[&str]) -> TriggerId {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for part in parts {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        let digest = hash.finalize();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        TriggerId(u128::from_be_bytes(bytes))
    }
}

/// A text checked once: its `as_str`, `Display`, `Debug` and serde form are the text.
macro_rules! checked_text {
    ($t:ident) => {
        impl $t {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
    };
}
pub(crate) use checked_text;

/// Flink's `high-availability.cluster-id`: entries of different clusters never meet.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterId(String);

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

checked_text!(ClusterId);
sql_text!(ClusterId);
text_eq!(ClusterId);

/// A Flink REST base URL, checked and normalised once: `http://` or `https://` (in any
/// case), a host, an optional port and path, nothing else (no user info, query or fragment;
/// no white space, control character or backslash anywhere, which URL parsers silently drop
/// or rewrite). It keeps a lowercase scheme and no trailing `/`, so it always satisfies the
/// `clusters.flink_rest_url` CHECK of both schemas (`^https?://`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct FlinkRestUrl(String);

impl FlinkRestUrl {
    /// A URL as the database keeps it, unchecked: rows written before the URL normalisation
    /// still load, and every URL is checked again before each request to Flink.
    pub fn from_stored(url: String) -> Self {
        FlinkRestUrl(url)
    }
}

impl FromStr for FlinkRestUrl {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            Err(format!(
                "must be an http:// or https:// base URL ({why}), got {raw:?}"
            ))
        };
        if raw
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
        {
            return bad("no white space, control character or backslash");
        }
        let lower = raw.get(..8).unwrap_or(raw).to_ascii_lowercase();
        let rest = match (lower.starts_with("http://"), lower.starts_with("https://")) {
            (true, _) => &raw[7..],
            (_, true) => &raw[8..],
            _ => return bad("it must start with http:// or https://"),
        };
        if rest.starts_with('/') {
            return bad("a host is needed");
        }
        let url = match url::Url::parse(raw) {
            Ok(u) => u,
            Err(e) => return bad(&e.to_string()),
        };
        if !matches!(url.scheme(), "http" | "https") {
            return bad("it must start with http:// or https://");
        }
        match url.host_str() {
            None | Some("") => return bad("a host is needed"),
            Some(_) => {}
        }
        if !url.username().is_empty() || url.password().is_some() {
            return bad("no user info");
        }
        if url.query().is_some() {
            return bad("no query");
        }
        if url.fragment().is_some() {
            return bad("no fragment");
        }
        Ok(FlinkRestUrl(url.as_str().trim_end_matches('/').to_owned()))
    }
}

// Read back as stored: a URL kept before the URL normalisation still loads (the
// executor checks every URL again before each request).
checked_text!(FlinkRestUrl);
text_eq!(FlinkRestUrl);
sql_text!(FlinkRestUrl, |text: &str| Ok::<_, String>(
    FlinkRestUrl::from_stored(text.to_owned())
));

/// The OpenAPI schema of an identifier type, named `name` (every field and path parameter of
/// that type refers to it).
macro_rules! id_schema {
    ($t:ty, $name:literal, $pattern:literal, $description:expr) => {
        impl utoipa::PartialSchema for $t {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .pattern(Some($pattern))
                    .description($description)
                    .into()
            }
        }

        impl utoipa::ToSchema for $t {
            fn name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }
        }

        impl utoipa::PartialSchema for &$t {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                <$t as utoipa::PartialSchema>::schema()
            }
        }

        impl utoipa::ToSchema for &$t {
            fn name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }
        }
    };
}

const HEX_ID: Option<&str> = Some("16 bytes as 32 hex characters, as Flink prints them");
id_schema!(JobId, "HexId", "^[0-9a-fA-F]{32}$", HEX_ID);
id_schema!(ApplicationId, "HexId", "^[0-9a-fA-F]{32}$", HEX_ID);
id_schema!(TriggerId, "HexId", "^[0-9a-fA-F]{32}$", HEX_ID);
id_schema!(
    ClusterId,
    "ClusterId",
    "^[A-Za-z0-9._-]{1,128}$",
    None::<&str>
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_ids_parse_either_case_and_print_lowercase() {
        let id: JobId = "38DCC0B26CE09271cefd5020d41b4b88".parse().unwrap();
        assert_eq!(id.to_string(), "38dcc0b26ce09271cefd5020d41b4b88");
        let zero: TriggerId = "00000000000000000000000000000001".parse().unwrap();
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
            assert_eq!(bad.parse::<ApplicationId>(), Err(IdError::Hex), "{bad:?}");
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
