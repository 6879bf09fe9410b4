//! Chance as an input: everything that draws at random (job ids, manual run keys, callback and
//! signing secrets, the jitter of backoffs) asks an [`Entropy`], as everything that needs "now"
//! asks a [`crate::clock::Clock`], so that a simulation replays a seed exactly.

/// A source of uniformly random draws.
pub trait Entropy: Send + Sync + std::fmt::Debug {
    /// A draw in `[0, 1)`.
    fn unit(&self) -> f64;
    /// 128 random bits.
    fn bits(&self) -> u128;
}

/// The operating system's randomness (through `rand`'s thread-local generator).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn unit(&self) -> f64 {
        rand::random()
    }

    fn bits(&self) -> u128 {
        rand::random()
    }
}

/// A new secret: 256 bits, hex-encoded.
pub fn secret(entropy: &dyn Entropy) -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(&entropy.bits().to_be_bytes());
    bytes[16..].copy_from_slice(&entropy.bits().to_be_bytes());
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_256_bits_and_differ() {
        let (a, b) = (secret(&OsEntropy), secret(&OsEntropy));
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let unit = OsEntropy.unit();
        assert!((0.0..1.0).contains(&unit));
    }
}
