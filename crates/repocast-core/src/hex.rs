//! Hex text for hashes and keys: what the key files, the known-servers
//! file, the hash cache and the partial files' names write, one encoder
//! and one decoder for all of them.

/// Lower-case hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// 64 hex digits as 32 bytes (`None` for anything else).
pub fn decode32(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_lengths_and_digits() {
        let b: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
        let s = encode(&b);
        assert_eq!(s.len(), 64);
        assert_eq!(decode32(&s), Some(b));
        assert_eq!(decode32(&s[..62]), None);
        assert_eq!(decode32(&"g".repeat(64)), None);
        assert_eq!(decode32(&"é".repeat(32)), None);
    }
}
