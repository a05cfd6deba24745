//! Journal files. STUB.
