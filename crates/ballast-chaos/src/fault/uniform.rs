//! Uniform numbers from (seed, endpoint, op, attempt), by SHA-256.
//!
//! The encoding is unambiguous, so two different inputs never hash the same bytes: a version tag, the seed as 8
//! little-endian bytes, the endpoint and the op each as an 8-byte little-endian length then their UTF-8 bytes, the
//! attempt as 4 little-endian bytes. (Without the lengths, endpoint `ab` with op `c` and endpoint `a` with op `bc`
//! would be the same bytes.) The 32-byte digest is read as four little-endian `u64` words; each word's top 53
//! bits make one uniform in `[0, 1)` with every value a multiple of 2^-53 (a double's full precision).
//!
//! Changing anything here changes every fault of every seed: the tag is versioned so that a deliberate change can
//! say so, and a test pins one digest.

use sha2::{Digest, Sha256};

/// Tag of the encoding; a new scheme gets a new tag.
const TAG: &[u8] = b"ballast-chaos draw v1\0";

/// The SHA-256 digest of the encoded inputs, as four words.
pub(super) fn words(seed: u64, endpoint: &str, op: &str, attempt: u32) -> [u64; 4] {
    let mut hasher = Sha256::new();
    hasher.update(TAG);
    hasher.update(seed.to_le_bytes());
    for text in [endpoint, op] {
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    hasher.update(attempt.to_le_bytes());
    let digest: [u8; 32] = hasher.finalize().into();
    std::array::from_fn(|word| u64::from_le_bytes(std::array::from_fn(|byte| digest[8 * word + byte])))
}

/// A word's top 53 bits as a uniform in `[0, 1)`.
pub(super) fn unit(word: u64) -> f64 {
    // 2^53 and every multiple of 2^-53 below 1 are exact doubles: no rounding happens here.
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    (word >> 11) as f64 * SCALE
}

/// The three uniforms of one draw: the fault pick and the two of Box–Muller. (The fourth word is unused, kept for
/// a later draw without changing the others.)
pub(super) fn uniforms(seed: u64, endpoint: &str, op: &str, attempt: u32) -> [f64; 3] {
    let [a, b, c, _] = words(seed, endpoint, op, attempt);
    [unit(a), unit(b), unit(c)]
}
