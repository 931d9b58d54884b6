//! Idempotency keys and request fingerprints. (Skeleton: being written.)
