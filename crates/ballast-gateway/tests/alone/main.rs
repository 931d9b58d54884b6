//! The gateway's test that needs the process to itself: the request's span as a log reader sees it, through the
//! process's global subscriber, installed before any other test of the process can register a callsite (tracing
//! caches whether a callsite is enabled for every thread, and a subscriber installed while other tests run can
//! miss the spans of callsites they registered first).

mod request_span;
