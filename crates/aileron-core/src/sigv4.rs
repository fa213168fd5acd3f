//! AWS Signature Version 4 request signing (pure; being written).
