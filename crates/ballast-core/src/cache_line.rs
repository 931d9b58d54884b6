//! Keeping hot shared atomics apart.

/// A value alone on its cache line (128 bytes: x86 fetches lines in adjacent pairs). Two values that different
/// threads write, or one that every call reads beside one that every call writes, would otherwise share a line
/// and each access would miss whenever another thread had just written (false sharing). Measured on the ratio
/// budget, that cost ~200 ns a call with two threads.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct OwnCacheLine<T>(pub(crate) T);

impl<T> std::ops::Deref for OwnCacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
