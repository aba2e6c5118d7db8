//! Sluice API (work in progress).
