//! Entry points for `examples/kernels.rs` (the callgrind guard,
//! `scripts/callgrind-guard.sh`) into hot paths the pipeline reaches only
//! from inside the crate. Not an API: hidden from the docs, may change.

use crate::batch::{Assembler, Batch};
use crate::example::ExampleParser;
use crate::spec::FeatureSpec;

/// The workers' lm path: serialized records straight into the padded
/// tensors (what a `parse → batch → pad` pipeline of variable-length
/// integer features runs per batch). `None` where that path does not apply.
pub fn lm_direct<R: AsRef<[u8]>>(
    assembler: &Assembler,
    parser: &mut ExampleParser,
    records: &[R],
) -> Option<Batch> {
    assembler.assemble_direct(parser, records)
}

/// The workers' img path: fixed-length features copied from the records
/// straight into their rows (a record of the layout walked last read from
/// its values' places). `None` where that path does not apply.
pub fn img_direct<R: AsRef<[u8]>>(
    assembler: &Assembler,
    spec: &FeatureSpec,
    records: &[R],
) -> Option<Batch> {
    assembler.assemble_dense_direct(spec, records)
}
