//! Standard base64 (RFC 4648, section 4, with padding), the encoding of `encoding_format: "base64"`.
//!
//! Written here rather than taken from a crate: nothing in the workspace depends on one, and the mock needs only
//! to encode, which is a few lines pinned by the RFC's own test vectors.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` in standard base64 with `=` padding.
pub(super) fn encode(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [group[0], *group.get(1).unwrap_or(&0), *group.get(2).unwrap_or(&0)];
        let bits = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (position, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if position <= group.len() {
                text.push(char::from(ALPHABET[((bits >> shift) & 0x3f) as usize]));
            } else {
                text.push('=');
            }
        }
    }
    text
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Standard base64 decoded; `None` when it is not (tests only: the mock never decodes).
    pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
        if !text.len().is_multiple_of(4) {
            return None;
        }
        let mut bytes = Vec::with_capacity(text.len() / 4 * 3);
        for group in text.as_bytes().chunks(4) {
            let padding = group.iter().rev().take_while(|&&c| c == b'=').count();
            let mut bits = 0u32;
            for &c in &group[..4 - padding] {
                let value = ALPHABET.iter().position(|&a| a == c)?;
                bits = (bits << 6) | value as u32;
            }
            bits <<= 6 * padding as u32;
            bytes.extend_from_slice(&bits.to_be_bytes()[1..4 - padding]);
        }
        Some(bytes)
    }

    #[test]
    fn the_rfc_4648_test_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(encode(plain.as_bytes()), encoded, "{plain:?}");
            assert_eq!(decode(encoded).as_deref(), Some(plain.as_bytes()), "{encoded:?}");
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        for len in 0..bytes.len() {
            assert_eq!(decode(&encode(&bytes[..len])).as_deref(), Some(&bytes[..len]));
        }
        assert_eq!(encode(&[0xfb, 0xff]), "+/8=");
    }
}
