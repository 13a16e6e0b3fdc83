//! A strict reader of DER (ASN.1 Distinguished Encoding Rules) elements, as BoringSSL's `CBS`
//! reads them: one-byte tags only (no high-tag-number form), definite lengths in their shortest
//! form of at most four length bytes, every length checked against the input. It reads one
//! element at a time and leaves the rest unread, so a caller decides how much of a structure it
//! looks at. Never panics, never allocates.

use std::fmt;

/// `SEQUENCE` (constructed).
pub const SEQUENCE: u8 = 0x30;
pub const BOOLEAN: u8 = 0x01;
pub const INTEGER: u8 = 0x02;
pub const OCTET_STRING: u8 = 0x04;
pub const OBJECT_IDENTIFIER: u8 = 0x06;
pub const ENUMERATED: u8 = 0x0a;
pub const GENERALIZED_TIME: u8 = 0x18;

/// A context-specific tag `[n]`, constructed (an EXPLICIT tag or a constructed IMPLICIT one).
pub const fn context_constructed(n: u8) -> u8 {
    0xa0 | n
}

/// A context-specific tag `[n]`, primitive (an IMPLICIT tag of a primitive type).
pub const fn context_primitive(n: u8) -> u8 {
    0x80 | n
}

/// Why bytes are not the DER element that was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DerError {
    /// The input ended inside an element's tag, length or content.
    Truncated,
    /// A tag in the high-tag-number form (low five bits all set), which no structure read here
    /// uses.
    HighTagNumber,
    /// An indefinite length (BER, not DER).
    IndefiniteLength,
    /// A long-form length that the short form or fewer bytes could have said, or one of more
    /// than four bytes.
    NonMinimalLength,
    /// Another element than the one expected: `expected` and `found` tags.
    UnexpectedTag { expected: u8, found: u8 },
}

impl fmt::Display for DerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DerError::Truncated => f.write_str("truncated DER element"),
            DerError::HighTagNumber => f.write_str("unsupported high-number DER tag"),
            DerError::IndefiniteLength => f.write_str("indefinite length (BER, not DER)"),
            DerError::NonMinimalLength => f.write_str("non-minimal DER length"),
            DerError::UnexpectedTag { expected, found } => {
                write!(f, "expected DER tag 0x{expected:02x}, found 0x{found:02x}")
            }
        }
    }
}

impl std::error::Error for DerError {}

/// A position in DER input: reads the elements at that level one after another.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(input: &'a [u8]) -> Self {
        Reader { rest: input }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// The tag of the next element, if any (its encoding is not checked).
    pub fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// The next element, whatever its tag: `(tag, content)`.
    pub fn read_any(&mut self) -> Result<(u8, &'a [u8]), DerError> {
        let (&tag, after_tag) = self.rest.split_first().ok_or(DerError::Truncated)?;
        if tag & 0x1f == 0x1f {
            return Err(DerError::HighTagNumber);
        }
        let (&first, after_len) = after_tag.split_first().ok_or(DerError::Truncated)?;
        let (len, after_len) = if first < 0x80 {
            (usize::from(first), after_len)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 {
                return Err(DerError::IndefiniteLength);
            }
            if n > 4 {
                return Err(DerError::NonMinimalLength);
            }
            let bytes = after_len.get(..n).ok_or(DerError::Truncated)?;
            if bytes[0] == 0 {
                return Err(DerError::NonMinimalLength);
            }
            let len = bytes
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            if len < 0x80 {
                return Err(DerError::NonMinimalLength);
            }
            (len, &after_len[n..])
        };
        let content = after_len.get(..len).ok_or(DerError::Truncated)?;
        self.rest = &after_len[len..];
        Ok((tag, content))
    }

    /// The content of the next element, which must have tag `tag`.
    pub fn read(&mut self, tag: u8) -> Result<&'a [u8], DerError> {
        let found = self.peek_tag().ok_or(DerError::Truncated)?;
        if found != tag {
            return Err(DerError::UnexpectedTag {
                expected: tag,
                found,
            });
        }
        self.read_any().map(|(_, content)| content)
    }

    /// The content of the next element if its tag is `tag` (an OPTIONAL field); `None`, and
    /// nothing read, when another element or nothing follows.
    pub fn read_optional(&mut self, tag: u8) -> Result<Option<&'a [u8]>, DerError> {
        if self.peek_tag() != Some(tag) {
            return Ok(None);
        }
        self.read(tag).map(Some)
    }
}

/// Whether `content` is a valid DER INTEGER body: not empty, and no leading byte that only
/// repeats the sign of the next one (BoringSSL's `CBS_is_valid_asn1_integer`).
pub fn is_minimal_integer(content: &[u8]) -> bool {
    match content {
        [] => false,
        [0x00, next, ..] => next & 0x80 != 0,
        [0xff, next, ..] => next & 0x80 == 0,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_short_and_long_lengths() {
        let mut r = Reader::new(&[0x04, 0x02, 0xaa, 0xbb, 0x05, 0x00]);
        assert_eq!(r.read(OCTET_STRING), Ok(&[0xaa, 0xbb][..]));
        assert_eq!(r.read_any(), Ok((0x05, &[][..])));
        assert!(r.is_empty());

        let mut long = vec![0x04, 0x81, 0x80];
        long.extend([7u8; 0x80]);
        assert_eq!(
            Reader::new(&long).read(OCTET_STRING).map(<[u8]>::len),
            Ok(0x80)
        );
        let mut two = vec![0x04, 0x82, 0x01, 0x00];
        two.extend([7u8; 0x100]);
        assert_eq!(
            Reader::new(&two).read(OCTET_STRING).map(<[u8]>::len),
            Ok(0x100)
        );
    }

    #[test]
    fn refuses_what_der_does_not_allow() {
        let read = |b: &[u8]| Reader::new(b).read_any().map(|(t, _)| t);
        assert_eq!(read(&[]), Err(DerError::Truncated));
        assert_eq!(read(&[0x04]), Err(DerError::Truncated));
        assert_eq!(read(&[0x04, 0x03, 0x00]), Err(DerError::Truncated));
        assert_eq!(read(&[0x04, 0x82, 0x01]), Err(DerError::Truncated));
        assert_eq!(read(&[0x1f, 0x01, 0x00]), Err(DerError::HighTagNumber));
        assert_eq!(
            read(&[0x30, 0x80, 0x00, 0x00]),
            Err(DerError::IndefiniteLength)
        );
        // 5 in long form; 0x0100 with a leading zero byte; five length bytes.
        assert_eq!(read(&[0x04, 0x81, 0x05]), Err(DerError::NonMinimalLength));
        assert_eq!(
            read(&[0x04, 0x83, 0x00, 0x01, 0x00]),
            Err(DerError::NonMinimalLength)
        );
        assert_eq!(
            read(&[0x04, 0x85, 1, 0, 0, 0, 0]),
            Err(DerError::NonMinimalLength)
        );
        // A huge declared length is only compared, never allocated.
        assert_eq!(
            read(&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff]),
            Err(DerError::Truncated)
        );
    }

    #[test]
    fn optional_and_unexpected_tags() {
        let mut r = Reader::new(&[0x02, 0x01, 0x05]);
        assert_eq!(r.read_optional(0xa0), Ok(None));
        assert_eq!(
            r.clone().read(OCTET_STRING),
            Err(DerError::UnexpectedTag {
                expected: OCTET_STRING,
                found: INTEGER
            })
        );
        assert_eq!(r.read_optional(INTEGER), Ok(Some(&[0x05][..])));
        assert_eq!(r.read_optional(INTEGER), Ok(None));
        assert_eq!(r.read(INTEGER), Err(DerError::Truncated));
    }

    #[test]
    fn minimal_integers() {
        for ok in [
            &[0x00][..],
            &[0x7f],
            &[0x00, 0x80],
            &[0xff],
            &[0xff, 0x7f],
            &[0x10, 0x01],
        ] {
            assert!(is_minimal_integer(ok), "{ok:?}");
        }
        for bad in [&[][..], &[0x00, 0x10], &[0xff, 0x80]] {
            assert!(!is_minimal_integer(bad), "{bad:?}");
        }
    }
}
