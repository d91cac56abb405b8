//! The embedded store's integration tests (the store conformance suite on `MemoryStore`) in one
//! binary.

#[cfg(feature = "testing")]
mod store_memory;
