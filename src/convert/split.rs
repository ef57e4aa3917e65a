//! `--task-index I --num-tasks N`: which records each of N tasks converts.
//!
//! The input is the sequence of records of all files, in input order. It is
//! cut into *blocks*: up to `B` consecutive records of one file (a block
//! never spans files). `B` is the `--group-to` block (1000 records, like the
//! Hugging Face script's `map(batched=True, batch_size=1000)`), or 1 without
//! grouping. Then:
//! - with at least N files, task I takes files `[I·F/N, (I+1)·F/N)`, whole;
//! - with fewer, every task counts the records of every file (a cheap pass
//!   that splits records but parses nothing) and takes blocks
//!   `[I·K/N, (I+1)·K/N)` of the K blocks.
//!
//! Either way each task's part is a contiguous run of whole blocks, so the
//! outputs of tasks 0, 1, …, N−1, read in order, are exactly the single-task
//! output, record for record (grouping happens inside blocks).
#![cfg_attr(not(feature = "convert"), allow(dead_code))] // the conversion task splits; `files.rs` does not

/// A run of records `[start, end)` of one file (`end` may be `u64::MAX`: to the end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileRange {
    /// Index of the file in the input list.
    pub file: usize,
    /// First record.
    pub start: u64,
    /// One past the last record.
    pub end: u64,
}

/// Every file, whole.
pub(super) fn whole(files: usize) -> Vec<FileRange> {
    (0..files)
        .map(|file| FileRange {
            file,
            start: 0,
            end: u64::MAX,
        })
        .collect()
}

/// Task `task`'s files when there are at least as many files as tasks.
pub(super) fn by_files(files: usize, task: usize, tasks: usize) -> Vec<FileRange> {
    let (lo, hi) = (task * files / tasks, (task + 1) * files / tasks);
    whole(files)
        .into_iter()
        .filter(|r| r.file >= lo && r.file < hi)
        .collect()
}

/// Task `task`'s record ranges given every file's record count.
pub(super) fn by_blocks(counts: &[u64], block: u64, task: usize, tasks: usize) -> Vec<FileRange> {
    let block = block.max(1);
    let blocks: Vec<u64> = counts.iter().map(|&c| c.div_ceil(block)).collect();
    let total: u64 = blocks.iter().sum();
    let (task, tasks) = (task as u128, tasks as u128);
    let lo = (task * total as u128 / tasks) as u64;
    let hi = ((task + 1) * total as u128 / tasks) as u64;
    let mut out = Vec::new();
    let mut offset = 0u64;
    for (file, (&count, &k)) in counts.iter().zip(&blocks).enumerate() {
        let (a, b) = (lo.max(offset), hi.min(offset + k));
        if a < b {
            out.push(FileRange {
                file,
                start: (a - offset) * block,
                end: ((b - offset) * block).min(count),
            });
        }
        offset += k;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn files_are_dealt_in_contiguous_runs() {
        assert_eq!(
            by_files(5, 0, 2).iter().map(|r| r.file).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(
            by_files(5, 1, 2).iter().map(|r| r.file).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
    }

    #[test]
    fn blocks_split_inside_files() {
        // 2 files of 2500 and 10 records, blocks of 1000: blocks 3 + 1 = 4.
        let t0 = by_blocks(&[2500, 10], 1000, 0, 3);
        let t1 = by_blocks(&[2500, 10], 1000, 1, 3);
        let t2 = by_blocks(&[2500, 10], 1000, 2, 3);
        assert_eq!(
            t0,
            vec![FileRange {
                file: 0,
                start: 0,
                end: 1000
            }]
        );
        assert_eq!(
            t1,
            vec![FileRange {
                file: 0,
                start: 1000,
                end: 2000
            }]
        );
        assert_eq!(
            t2,
            vec![
                FileRange {
                    file: 0,
                    start: 2000,
                    end: 2500
                },
                FileRange {
                    file: 1,
                    start: 0,
                    end: 10
                }
            ]
        );
    }

    proptest! {
        #[test]
        fn tasks_cover_every_record_once_in_order(
            counts in proptest::collection::vec(0u64..50, 1..5),
            block in 1u64..7,
            tasks in 1usize..9,
        ) {
            let mut seen = Vec::new();
            for task in 0..tasks {
                for r in by_blocks(&counts, block, task, tasks) {
                    prop_assert!(r.start % block == 0);
                    for i in r.start..r.end {
                        seen.push((r.file, i));
                    }
                }
            }
            let all: Vec<(usize, u64)> = counts.iter().enumerate()
                .flat_map(|(f, &c)| (0..c).map(move |i| (f, i))).collect();
            prop_assert_eq!(seen, all);
        }
    }
}
