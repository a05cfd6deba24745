//! Journal manifest. STUB.
