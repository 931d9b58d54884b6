//! One binary form of a stored response's headers, shared by every backend (a BLOB column, a Redis field).
//!
//! Each header is its name's length (u16, big-endian), the name, its value's length (u32, big-endian), the
//! value. Header values may be any bytes HTTP allows, so text formats (JSON) would need escaping; this form
//! needs none and reads back exactly.

use crate::StoreError;

/// Headers in the stored form.
pub fn encode_headers(headers: &[(String, Vec<u8>)]) -> Vec<u8> {
    let size = headers
        .iter()
        .map(|(name, value)| 6 + name.len() + value.len())
        .sum();
    let mut out = Vec::with_capacity(size);
    for (name, value) in headers {
        // Header names are at most a few dozen bytes and values bounded by the body limit: both fit.
        out.extend_from_slice(&u16::try_from(name.len()).unwrap_or(u16::MAX).to_be_bytes());
        out.extend_from_slice(&name.as_bytes()[..name.len().min(usize::from(u16::MAX))]);
        out.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(&value[..value.len().min(u32::MAX as usize)]);
    }
    out
}

/// Headers back from [`encode_headers`]'s form.
pub fn decode_headers(mut bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    let corrupt = || StoreError::Corrupt("stored response headers are truncated or not UTF-8".into());
    let mut headers = Vec::new();
    while !bytes.is_empty() {
        let (len, rest) = bytes.split_first_chunk::<2>().ok_or_else(corrupt)?;
        let (name, rest) = rest
            .split_at_checked(usize::from(u16::from_be_bytes(*len)))
            .ok_or_else(corrupt)?;
        let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let len = usize::try_from(u32::from_be_bytes(*len)).map_err(|_| corrupt())?;
        let (value, rest) = rest.split_at_checked(len).ok_or_else(corrupt)?;
        let name = std::str::from_utf8(name).map_err(|_| corrupt())?;
        headers.push((name.to_owned(), value.to_vec()));
        bytes = rest;
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_with_any_value_bytes() {
        let headers = vec![
            ("content-type".to_owned(), b"application/json".to_vec()),
            ("x-odd".to_owned(), vec![0, 0xff, b'\n']),
            ("x-empty".to_owned(), Vec::new()),
        ];
        assert_eq!(decode_headers(&encode_headers(&headers)).unwrap(), headers);
        assert_eq!(decode_headers(&[]).unwrap(), Vec::new());
    }

    #[test]
    fn truncated_headers_are_corrupt_not_a_panic() {
        let bytes = encode_headers(&[("a".to_owned(), b"bc".to_vec())]);
        for cut in 1..bytes.len() {
            assert!(
                matches!(decode_headers(&bytes[..cut]), Err(StoreError::Corrupt(_))),
                "cut at {cut}"
            );
        }
    }
}
