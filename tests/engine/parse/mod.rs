//! The Example / SequenceExample batch parser and the wire length scan.

mod example;
mod length;
mod props;
mod sequence;
