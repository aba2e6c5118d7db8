//! Sluice fault-injection harness (work in progress).
