//! Flink's `serialized-throwable`: the base64 text of a Java-serialized
//! `org.apache.flink.util.SerializedThrowable`, written in Rust.
//!
//! Flink's `RestClusterClient` (`flink savepoint`, `flink stop`, the Kubernetes operator)
//! reads a failed operation's `failure-cause` through `SerializedThrowableDeserializer`,
//! which decodes only the `serialized-throwable` field; without it the client cannot read
//! the answer at all. [`serialized_throwable`] writes the bytes Flink 2.3.0's own
//! `new SerializedThrowable(e)` gives for an exception `e` of a class named `class` with the
//! given message and no Java stack frames (compared byte for byte on Java 17; Throwable's
//! serial form is that of Java 7 and later):
//!
//! - `detailMessage` is `"{class}: {message}"`, `originalErrorClassName` is `class`,
//!   `fullStringifiedStackTrace` is the given stack-trace text; no cause, an empty stack
//!   trace, no suppressed exceptions (Flink's constructor leaves exactly these);
//! - `serializedException` holds `e` itself as Java writes it: an object of a class named
//!   `class` (serialVersionUID [`ORIGINAL_SERIAL_VERSION_UID`], extending
//!   `java.lang.Exception`) with `detailMessage` `message`. No JVM has that class, so
//!   `deserializeError` falls back to the `SerializedThrowable` itself, exactly as Flink does
//!   for an exception class the client lacks: `getOriginalErrorClassName()` is `class`,
//!   `toString()` is `"{class}: {class}: {message}"` (what `flink savepoint` prints after
//!   `Caused by:`), `printStackTrace` prints the stack-trace text.
//!
//! Texts are bounded ([`MAX_CLASS_BYTES`], [`MAX_TEXT_BYTES`]: cut at the last character
//! boundary within the bound), strings longer than 65535 bytes of modified UTF-8 are written
//! as Java's long strings, and nothing here panics.

/// The class name is cut to this many bytes of UTF-8.
pub const MAX_CLASS_BYTES: usize = 1024;
/// The message and the stack-trace text are each cut to this many bytes of UTF-8.
pub const MAX_TEXT_BYTES: usize = 128 * 1024;
/// The serialVersionUID written for the original exception's (non-existent) class.
pub const ORIGINAL_SERIAL_VERSION_UID: i64 = 1;

/// The base64 text (standard alphabet, padded: what Flink's Jackson reads) of a
/// Java-serialized `SerializedThrowable` for an exception of class `class` (for example
/// `jobstore.SavepointTimeoutException`) with `message`, whose `getFullStringifiedStackTrace()`
/// is `stack_trace`. See the module documentation for what Flink's client shows from it.
pub fn serialized_throwable(class: &str, message: &str, stack_trace: &str) -> String {
    base64(&serialized_throwable_bytes(class, message, stack_trace))
}

/// The Java serialization stream that [`serialized_throwable`] encodes in base64.
pub fn serialized_throwable_bytes(class: &str, message: &str, stack_trace: &str) -> Vec<u8> {
    let class = cut(class, MAX_CLASS_BYTES);
    let message = cut(message, MAX_TEXT_BYTES);
    let stack_trace = cut(stack_trace, MAX_TEXT_BYTES);

    let original = ClassDesc {
        name: class,
        serial_version_uid: ORIGINAL_SERIAL_VERSION_UID,
        flags: SC_SERIALIZABLE,
        fields: &[],
        superclass: Some(&EXCEPTION),
    };
    let mut inner = Stream::new();
    inner.throwable(&original, Cause::Itself, message);

    let mut outer = Stream::new();
    outer.throwable(
        &SERIALIZED_THROWABLE,
        Cause::Null,
        &format!("{class}: {message}"),
    );
    // SerializedThrowable's own fields, in Java's order (by name).
    outer.string(stack_trace);
    outer.string(class);
    outer.byte_array(&inner.out);
    outer.out
}

// The constants of java.io.ObjectStreamConstants that these streams use: the header,
const STREAM_MAGIC: u16 = 0xACED;
const STREAM_VERSION: u16 = 5;
const BASE_WIRE_HANDLE: u32 = 0x7E_0000;

/// The tags of what comes next in the stream.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Tc {
    // Values,
    Null = 0x70,
    Reference = 0x71,
    Object = 0x73,
    Array = 0x75,
    // strings,
    String = 0x74,
    LongString = 0x7C,
    // and class descriptors.
    ClassDesc = 0x72,
    EndBlockData = 0x78,
}

// The flags of a class descriptor.
const SC_WRITE_METHOD: u8 = 0x01;
const SC_SERIALIZABLE: u8 = 0x02;

/// A serializable class as its stream descriptor shows it. The field lists are in the order
/// Java writes them (primitive fields first, then by name); values were read with `javap`
/// and `serialver` from Flink 2.3.0 and a Java 17 runtime.
struct ClassDesc<'a> {
    name: &'a str,
    serial_version_uid: i64,
    flags: u8,
    /// (type code, field name, type signature)
    fields: &'a [(u8, &'static str, &'static str)],
    superclass: Option<&'a ClassDesc<'a>>,
}

static THROWABLE: ClassDesc<'static> = ClassDesc {
    name: "java.lang.Throwable",
    serial_version_uid: -3042686055658047285,
    // Throwable has a writeObject method (defaultWriteObject, then the end of its block).
    flags: SC_SERIALIZABLE | SC_WRITE_METHOD,
    fields: &[
        (b'L', "cause", "Ljava/lang/Throwable;"),
        (b'L', "detailMessage", "Ljava/lang/String;"),
        (b'[', "stackTrace", "[Ljava/lang/StackTraceElement;"),
        (b'L', "suppressedExceptions", "Ljava/util/List;"),
    ],
    superclass: None,
};

static EXCEPTION: ClassDesc<'static> = ClassDesc {
    name: "java.lang.Exception",
    serial_version_uid: -3387516993124229948,
    flags: SC_SERIALIZABLE,
    fields: &[],
    superclass: Some(&THROWABLE),
};

static SERIALIZED_THROWABLE: ClassDesc<'static> = ClassDesc {
    name: "org.apache.flink.util.SerializedThrowable",
    serial_version_uid: 7284183123441947635,
    flags: SC_SERIALIZABLE,
    fields: &[
        (b'L', "fullStringifiedStackTrace", "Ljava/lang/String;"),
        (b'L', "originalErrorClassName", "Ljava/lang/String;"),
        (b'[', "serializedException", "[B"),
    ],
    superclass: Some(&EXCEPTION),
};

static STACK_TRACE_ARRAY: ClassDesc<'static> = ClassDesc {
    name: "[Ljava.lang.StackTraceElement;",
    serial_version_uid: 0x0246_2A3C_3CFD_2239,
    flags: SC_SERIALIZABLE,
    fields: &[],
    superclass: None,
};

/// `Collections.emptyList()`: Throwable's "no suppressed exceptions" sentinel.
static EMPTY_LIST: ClassDesc<'static> = ClassDesc {
    name: "java.util.Collections$EmptyList",
    serial_version_uid: 0x7AB8_17B4_3CA7_9EDE,
    flags: SC_SERIALIZABLE,
    fields: &[],
    superclass: None,
};

static BYTE_ARRAY: ClassDesc<'static> = ClassDesc {
    name: "[B",
    serial_version_uid: 0xACF3_17F8_0608_54E0_u64 as i64,
    flags: SC_SERIALIZABLE,
    fields: &[],
    superclass: None,
};

/// What a Throwable's `cause` field holds: null (after `initCause(null)`, as in
/// SerializedThrowable) or the object itself (a fresh exception's "no cause yet").
enum Cause {
    Null,
    Itself,
}

/// One Java object serialization stream being written, with its handle table: class
/// descriptors (by identity, so that an original class named like one of Java's is still a
/// descriptor of its own) and field type signatures (Java interns them, so equal ones share
/// a handle). Every other string is a new object with a handle of its own.
struct Stream {
    out: Vec<u8>,
    next_handle: u32,
    handles: Vec<(Handled, u32)>,
}

#[derive(PartialEq)]
enum Handled {
    /// The address of a ClassDesc.
    Class(usize),
    Signature(&'static str),
}

impl Stream {
    fn new() -> Stream {
        let mut out = Vec::new();
        out.extend_from_slice(&STREAM_MAGIC.to_be_bytes());
        out.extend_from_slice(&STREAM_VERSION.to_be_bytes());
        Stream {
            out,
            next_handle: BASE_WIRE_HANDLE,
            handles: Vec::new(),
        }
    }

    fn assign(&mut self, what: Option<Handled>) -> u32 {
        let handle = self.next_handle;
        self.next_handle += 1;
        if let Some(what) = what {
            self.handles.push((what, handle));
        }
        handle
    }

    /// Writes a back-reference if `what` has a handle already.
    fn reference(&mut self, what: &Handled) -> bool {
        match self.handles.iter().find(|(h, _)| h == what) {
            Some(&(_, handle)) => {
                self.out.push(Tc::Reference as u8);
                self.out.extend_from_slice(&handle.to_be_bytes());
                true
            }
            None => false,
        }
    }

    fn class_desc(&mut self, desc: &ClassDesc) {
        let class = Handled::Class(std::ptr::from_ref(desc).addr());
        if self.reference(&class) {
            return;
        }
        self.out.push(Tc::ClassDesc as u8);
        self.utf(desc.name);
        self.out
            .extend_from_slice(&desc.serial_version_uid.to_be_bytes());
        self.assign(Some(class));
        self.out.push(desc.flags);
        // At most four fields, see the descriptors above.
        self.out
            .extend_from_slice(&(desc.fields.len() as u16).to_be_bytes());
        for &(code, name, signature) in desc.fields {
            self.out.push(code);
            self.utf(name);
            if !self.reference(&Handled::Signature(signature)) {
                self.assign(Some(Handled::Signature(signature)));
                self.new_string(signature);
            }
        }
        self.out.push(Tc::EndBlockData as u8); // no class annotation
        match desc.superclass {
            Some(superclass) => self.class_desc(superclass),
            None => self.out.push(Tc::Null as u8),
        }
    }

    /// An object of class `desc` (a Throwable subclass without fields of its own besides
    /// those the caller writes after this) with Throwable's data.
    fn throwable(&mut self, desc: &ClassDesc, cause: Cause, detail_message: &str) {
        self.out.push(Tc::Object as u8);
        self.class_desc(desc);
        let itself = self.assign(None);
        match cause {
            Cause::Null => self.out.push(Tc::Null as u8),
            Cause::Itself => {
                self.out.push(Tc::Reference as u8);
                self.out.extend_from_slice(&itself.to_be_bytes());
            }
        }
        self.string(detail_message);
        // An empty StackTraceElement[].
        self.out.push(Tc::Array as u8);
        self.class_desc(&STACK_TRACE_ARRAY);
        self.assign(None);
        self.out.extend_from_slice(&0i32.to_be_bytes());
        // Collections.emptyList(): no data of its own.
        self.out.push(Tc::Object as u8);
        self.class_desc(&EMPTY_LIST);
        self.assign(None);
        // The end of Throwable.writeObject's block; Exception and the subclass have no data.
        self.out.push(Tc::EndBlockData as u8);
    }

    /// A new String object.
    fn string(&mut self, s: &str) {
        self.assign(None);
        self.new_string(s);
    }

    fn new_string(&mut self, s: &str) {
        let utf = modified_utf8(s);
        match u16::try_from(utf.len()) {
            Ok(len) => {
                self.out.push(Tc::String as u8);
                self.out.extend_from_slice(&len.to_be_bytes());
            }
            Err(_) => {
                self.out.push(Tc::LongString as u8);
                self.out
                    .extend_from_slice(&(utf.len() as u64).to_be_bytes());
            }
        }
        self.out.extend_from_slice(&utf);
    }

    /// `DataOutput.writeUTF`, for class and field names (bounded far below 65535 bytes).
    fn utf(&mut self, s: &str) {
        let utf = modified_utf8(s);
        let len = u16::try_from(utf.len()).unwrap_or(u16::MAX);
        self.out.extend_from_slice(&len.to_be_bytes());
        self.out.extend_from_slice(&utf[..usize::from(len)]);
    }

    fn byte_array(&mut self, bytes: &[u8]) {
        self.out.push(Tc::Array as u8);
        self.class_desc(&BYTE_ARRAY);
        self.assign(None);
        // The inputs are bounded, so this is far below i32::MAX.
        let len = i32::try_from(bytes.len()).unwrap_or(i32::MAX);
        self.out.extend_from_slice(&len.to_be_bytes());
        self.out.extend_from_slice(bytes);
    }
}

/// Java's modified UTF-8: UTF-16 code units, each as 1 to 3 bytes; U+0000 as two bytes
/// (C0 80) and a character beyond U+FFFF as its two surrogates, three bytes each.
fn modified_utf8(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for unit in s.encode_utf16() {
        match unit {
            0x0001..=0x007F => out.push(unit as u8),
            0x0000 | 0x0080..=0x07FF => {
                out.push(0xC0 | (unit >> 6) as u8);
                out.push(0x80 | (unit & 0x3F) as u8);
            }
            _ => {
                out.push(0xE0 | (unit >> 12) as u8);
                out.push(0x80 | ((unit >> 6) & 0x3F) as u8);
                out.push(0x80 | (unit & 0x3F) as u8);
            }
        }
    }
    out
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// Base64 with the standard alphabet and padding (RFC 4648 section 4), no line breaks.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::path::{Path, PathBuf};

    fn fixtures() -> Vec<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/serialized-throwable");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("tests/data/serialized-throwable")
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        files
    }

    fn text<'a>(fixture: &'a Value, key: &str) -> &'a str {
        fixture[key]
            .as_str()
            .unwrap_or_else(|| panic!("{key} is a string"))
    }

    /// Every fixture's `serialized-throwable` is what the function gives for its `class`,
    /// `message` and `stack-trace`, byte for byte (the Java self-test decodes the same
    /// fixtures with Flink's classes). With `JOBSTORE_BLESS_FIXTURES=1` the fixtures are
    /// rewritten instead; check them with the Java self-test afterwards.
    #[test]
    fn reproduces_the_fixtures() {
        let files = fixtures();
        assert!(files.len() >= 3, "fixtures: {files:?}");
        let bless = std::env::var_os("JOBSTORE_BLESS_FIXTURES").is_some_and(|v| v == "1");
        for file in files {
            let raw = std::fs::read_to_string(&file).expect("a fixture");
            let mut fixture: Value = serde_json::from_str(&raw).expect("a JSON fixture");
            let made = serialized_throwable(
                text(&fixture, "class"),
                text(&fixture, "message"),
                text(&fixture, "stack-trace"),
            );
            if bless {
                fixture["serialized-throwable"] = Value::String(made);
                let json = serde_json::to_string_pretty(&fixture).expect("JSON") + "\n";
                std::fs::write(&file, json).expect("writing a fixture");
            } else {
                assert!(
                    made == text(&fixture, "serialized-throwable"),
                    "{} differs from the function's output",
                    file.display()
                );
            }
        }
    }

    /// The first bytes of the stream: magic, version and SerializedThrowable's descriptor
    /// with its serialVersionUID, as `ObjectOutputStream` writes them (from a Java dump).
    #[test]
    fn starts_like_javas_stream() {
        let bytes = serialized_throwable_bytes("jobstore.X", "m", "jobstore.X: m");
        let mut head = vec![
            0xAC,
            0xED,
            0x00,
            0x05,
            Tc::Object as u8,
            Tc::ClassDesc as u8,
            0x00,
            0x29,
        ];
        head.extend_from_slice(b"org.apache.flink.util.SerializedThrowable");
        head.extend_from_slice(&[0x65, 0x16, 0x9D, 0xF5, 0x1F, 0xA7, 0x13, 0xF3, 0x02, 0, 3]);
        assert_eq!(bytes[..head.len()], head[..]);
        assert!(serialized_throwable("jobstore.X", "m", "").starts_with("rO0ABXNy"));
    }

    #[test]
    fn modified_utf8_of_nul_and_supplementary_characters() {
        assert_eq!(modified_utf8("a\0é"), [b'a', 0xC0, 0x80, 0xC3, 0xA9]);
        assert_eq!(modified_utf8("€"), [0xE2, 0x82, 0xAC]);
        // U+1F600 is D83D DE00 in UTF-16.
        assert_eq!(
            modified_utf8("\u{1F600}"),
            [0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]
        );
    }

    /// 65535 bytes of modified UTF-8 is still a short string, one more is a long one;
    /// the length counts modified UTF-8 bytes, not characters nor Rust's UTF-8 bytes.
    #[test]
    fn long_strings_beyond_65535_bytes() {
        let tag_and_len = |s: &str| {
            let mut stream = Stream::new();
            stream.string(s);
            stream.out[4..].to_vec()
        };
        let at_limit = "a".repeat(65535);
        assert_eq!(tag_and_len(&at_limit)[..3], [Tc::String as u8, 0xFF, 0xFF]);
        let beyond = "a".repeat(65536);
        assert_eq!(
            tag_and_len(&beyond)[..9],
            [Tc::LongString as u8, 0, 0, 0, 0, 0, 1, 0, 0]
        );
        // 16384 emoji: 65536 bytes in UTF-8, 98304 in modified UTF-8.
        let emoji = "\u{1F600}".repeat(16384);
        assert_eq!(
            tag_and_len(&emoji)[..9],
            [Tc::LongString as u8, 0, 0, 0, 0, 0, 1, 0x80, 0]
        );
        assert_eq!(tag_and_len("")[..], [Tc::String as u8, 0, 0]);
    }

    #[test]
    fn inputs_are_cut_at_character_boundaries() {
        let huge = "é".repeat(MAX_TEXT_BYTES); // twice the bound
        let cut_message = cut(&huge, MAX_TEXT_BYTES);
        assert_eq!(cut_message.len(), MAX_TEXT_BYTES);
        assert_eq!(cut("aé", 2), "a");
        let bounded = serialized_throwable_bytes(&"x".repeat(5000), &huge, &huge);
        let unbounded_len = 3 * huge.len();
        assert!(bounded.len() < unbounded_len, "{}", bounded.len());
        let class = "C".repeat(MAX_CLASS_BYTES);
        let message = cut_message;
        assert_eq!(
            serialized_throwable_bytes(&class, message, message),
            serialized_throwable_bytes(&"C".repeat(5000), &huge, &huge)
        );
    }

    #[test]
    fn base64_of_rfc4648_vectors() {
        for (raw, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(raw.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xFB, 0xFF, 0xBF]), "+/+/");
    }
}
