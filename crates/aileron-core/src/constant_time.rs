//! Comparing secrets (tokens, CSRF values, OAuth states) without an early exit, so the time taken
//! does not tell an attacker how much of a guess was right.

/// `a == b`, in time that depends only on the lengths.
pub fn eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn equal_only_when_every_byte_is() {
        assert!(super::eq(b"token", b"token"));
        assert!(!super::eq(b"token", b"tokem"));
        assert!(!super::eq(b"token", b"token!"));
        assert!(super::eq(b"", b""));
    }
}
