//! `infeed verify`: check every CRC, list every corrupt record.

use std::io::Write;

use clap::Args;
use infeed::record::CorruptPolicy;

use super::{CliError, InputArgs, open_records};

#[derive(Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    input: InputArgs,
}

/// Reads every file to the end, skipping past corruption so that every
/// corrupt region is reported; exits 1 when any file had one.
pub fn run(args: &VerifyArgs, out: &mut impl Write) -> Result<i32, CliError> {
    let options = args.input.read_options().on_corrupt(CorruptPolicy::Skip);
    let mut corrupt_files = 0usize;
    for path in &args.input.shards()? {
        let mut reader = open_records(path, &options)?;
        let mut good = 0u64;
        for record in reader.by_ref() {
            record?;
            good += 1;
        }
        let skipped = reader.skipped();
        let name = path;
        if skipped.records == 0 {
            writeln!(out, "{name}: ok, {good} records")?;
            continue;
        }
        corrupt_files += 1;
        for event in &skipped.events {
            writeln!(
                out,
                "{name}: byte {}: {} ({} bytes skipped)",
                event.offset,
                super::hints::flags(&event.kind.to_string()),
                event.bytes
            )?;
        }
        let unlisted = skipped.records - skipped.events.len() as u64;
        if unlisted > 0 {
            writeln!(out, "{name}: … and {unlisted} more corrupt regions")?;
        }
        writeln!(
            out,
            "{name}: CORRUPT, {good} good records, {} corrupt regions, {} bytes skipped",
            skipped.records, skipped.bytes
        )?;
    }
    Ok(if corrupt_files > 0 { 1 } else { 0 })
}
