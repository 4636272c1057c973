//! Checked byte reader and writer shared by the message parsers.
//!
//! [`Reader`] returns [`WireError::Truncated`] instead of panicking on short
//! input; every count it reads is checked against a limit by the caller
//! through [`Reader::count`].

use super::{HEADER_LEN, MAGIC, VERSION, WireError};

/// A cursor over untrusted bytes; no method panics.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Checks the common header and returns the kind byte.
    pub fn header(&mut self) -> Result<u8, WireError> {
        let h = self.bytes(HEADER_LEN)?;
        if h[0..2] != MAGIC {
            return Err(WireError::BadMagic);
        }
        if h[2] != VERSION {
            return Err(WireError::UnsupportedVersion(h[2]));
        }
        Ok(h[3])
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.bytes(1)?[0])
    }

    /// A big-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A big-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A big-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    /// A 32-byte hash.
    pub fn hash(&mut self) -> Result<[u8; 32], WireError> {
        let b = self.bytes(32)?;
        let mut a = [0u8; 32];
        a.copy_from_slice(b);
        Ok(a)
    }

    /// A u32 count, checked against `max` and against the bytes left
    /// (each element takes at least `min_elem` bytes), so a forged count
    /// cannot make the parser allocate.
    pub fn count(
        &mut self,
        field: &'static str,
        max: u32,
        min_elem: usize,
    ) -> Result<usize, WireError> {
        let n = self.u32()?;
        if n > max || (n as usize).saturating_mul(min_elem) > self.remaining() {
            return Err(WireError::OutOfRange {
                field,
                value: n as u64,
            });
        }
        Ok(n as usize)
    }

    /// A UTF-8 string with a u16 length of at most `max` bytes.
    pub fn string(&mut self, field: &'static str, max: usize) -> Result<String, WireError> {
        let n = self.u16()? as usize;
        if n > max {
            return Err(WireError::OutOfRange {
                field,
                value: n as u64,
            });
        }
        let b = self.bytes(n)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| WireError::BadUtf8(field))
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<(), WireError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(WireError::Trailing)
        }
    }
}

/// Appends big-endian fields to a buffer.
pub struct Writer<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    /// A writer appending to `buf`, starting with the common header.
    pub fn with_header(buf: &'a mut Vec<u8>, kind: u8) -> Self {
        buf.extend_from_slice(&MAGIC);
        buf.push(VERSION);
        buf.push(kind);
        Writer { buf }
    }

    /// One byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    /// A big-endian u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A big-endian u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A big-endian u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Raw bytes.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    /// A u32 element count (callers keep counts within the parse limits).
    pub fn count(&mut self, n: usize) -> &mut Self {
        self.u32(n.min(u32::MAX as usize) as u32)
    }

    /// A string with a u16 length; longer strings are cut at a char boundary.
    pub fn string(&mut self, s: &str) -> &mut Self {
        let mut end = s.len().min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u16(end as u16).bytes(&s.as_bytes()[..end])
    }
}

/// Returns `Err(OutOfRange)` when `value > max`.
pub fn check_max(field: &'static str, value: u64, max: u64) -> Result<(), WireError> {
    if value > max {
        Err(WireError::OutOfRange { field, value })
    } else {
        Ok(())
    }
}
