//! Subcommands, one file each.

pub fn main() -> i32 {
    0
}
