//! The vault file format (pure; being written).
