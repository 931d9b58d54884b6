//! The HTTP side. (Skeleton: being written.)
