//! Raft layer (work in progress).
