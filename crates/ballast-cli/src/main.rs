//! The `ballast` command. (Skeleton: `plan` is being written.)

fn main() {}
