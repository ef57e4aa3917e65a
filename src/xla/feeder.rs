//! The device feeder (placeholder while the core lands).
