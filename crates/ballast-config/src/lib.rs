//! Ballast's configuration. (Skeleton: being written.)
