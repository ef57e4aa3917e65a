//! `infeed count`: records per file and in total.

use std::io::Write;

use super::{CliError, InputArgs, open_records};
use clap::Args;

#[derive(Args)]
pub struct CountArgs {
    #[command(flatten)]
    input: InputArgs,
}

/// Prints `FILE<TAB>COUNT` per file, then `total<TAB>COUNT`.
pub fn run(args: &CountArgs, out: &mut impl Write) -> Result<i32, CliError> {
    let options = args.input.read_options();
    let mut total = 0u64;
    for path in &args.input.shards()? {
        let mut count = 0u64;
        for record in open_records(path, &options)? {
            record?;
            count += 1;
        }
        writeln!(out, "{path}\t{count}")?;
        total += count;
    }
    writeln!(out, "total\t{total}")?;
    Ok(0)
}
