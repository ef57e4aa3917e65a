//! The command line's words for the library's settings: a library error
//! names the setting to change as the library spells it
//! (`ReadOptions::compression`, `ConvertOptions::features`), and the
//! command line says the flag that sets it instead.

/// Each library setting an error may name, and what says it on the command
/// line; longer names first, so that none is cut by a shorter one.
const FLAGS: &[(&str, &str)] = &[
    ("ReadOptions::compression none", "--compression none"),
    (
        "ReadOptions::compression gzip or zlib",
        "--compression gzip or zlib",
    ),
    ("ReadOptions::compression", "--compression"),
    ("ConvertOptions::compression", "--compression"),
    ("ConvertOptions::features", "--feature"),
    ("ConvertOptions::columns", "--columns"),
    ("ConvertOptions::format", "--format"),
    ("ConvertOptions::task_index", "--task-index"),
    ("ConvertOptions::num_tasks", "--num-tasks"),
    ("ConvertOptions::threads", "--threads"),
    ("ConvertOptions::null_omit", "--nulls omit"),
    ("ConvertOptions::prefix", "--prefix"),
    ("ConvertOptions::tfds", "--tfds"),
    (
        "the lengths of TokenMode::Truncate and TokenMode::Group",
        "--max-length and --group-to",
    ),
    ("the block of TokenMode::Group", "--group-block"),
];

/// `message` (a library error's) with the settings it names said as flags.
pub fn flags(message: &str) -> String {
    let mut out = message.to_owned();
    for (setting, flag) in FLAGS {
        if out.contains(setting) {
            out = out.replace(setting, flag);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_become_flags_and_other_words_stay() {
        assert_eq!(
            flags(
                "add ConvertOptions::features NAME:TYPE, or choose columns with \
                 ConvertOptions::columns"
            ),
            "add --feature NAME:TYPE, or choose columns with --columns"
        );
        assert_eq!(
            flags("if the file is not compressed, use ReadOptions::compression none"),
            "if the file is not compressed, use --compression none"
        );
        assert_eq!(
            flags("the block of TokenMode::Group must be at least 1"),
            "--group-block must be at least 1"
        );
        assert_eq!(
            flags("the compression of a file"),
            "the compression of a file"
        );
    }
}
