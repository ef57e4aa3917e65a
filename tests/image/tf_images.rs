//! Placeholder: filled in below.
