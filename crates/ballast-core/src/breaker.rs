//! Circuit breaker. (Skeleton: being written.)
