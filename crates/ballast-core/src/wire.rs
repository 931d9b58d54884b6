//! Deadline headers on the wire. (Skeleton: being written.)
