//! Bloom filters. STUB.
