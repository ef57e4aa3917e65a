//! Records read by the workers: a plain local shard's records are left
//! unread by its shard thread, framed by the shard's index where one is
//! found (in `index_dir`, or beside the shard) and by its headers where
//! none is, and read by the worker that assembles them (by `pread`, or
//! with `mmap` as views of each worker's own maps). The pipeline gives the
//! same batches as when its shard threads read the records (as they do
//! when a step before the workers needs their bytes), and states that
//! restore it exactly whichever way it frames its shards; under
//! `on_corrupt(Skip)` the walks skip and count what a reader does; a
//! record corrupted in place is the error a reader gives; a GZIP shard is
//! read by its shard thread; a stale index is passed over for the headers;
//! buckets and packing have each record measured by its walk; `worker_reads`,
//! which once asked for all this, is accepted and changes nothing.

use infeed::index::{BuildOptions, build, index_url, save};
use infeed::pipeline::{Pipeline, PipelineError, PipelineStats};
use infeed::record::{Compression, CorruptPolicy, ErrorKind, ReadOptions, RecordReader};
use infeed::source::SourceOptions;

use super::grouping::{spec, write_lm_files};
use crate::support::tfrecord::{corrupt_keeping_time, write_files};

/// Each batch's records as strings, with the state after it, and the error
/// that ended the run, if one did.
pub(super) type Run = (Vec<(Vec<String>, Vec<u8>)>, Option<PipelineError>);

pub(super) fn run(p: &Pipeline, batch: usize) -> Run {
    let mut batches = p.build_raw(batch, false).unwrap();
    let mut out = Vec::new();
    loop {
        match batches.next_batch() {
            Ok(Some(raw)) => {
                let records = raw
                    .records()
                    .map(|r| String::from_utf8(r.to_vec()).unwrap())
                    .collect();
                out.push((records, batches.state()));
            }
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

/// Builds `shard`'s index and saves it into the folder `dir`.
pub(super) fn save_index(shard: &str, dir: &str) {
    let index = build(shard, &BuildOptions::default()).unwrap();
    let url = index_url(shard, Some(dir));
    save(&index, &url, &SourceOptions::default()).unwrap();
}

/// A folder in `dir` of the indexes of `files` (as `infeed index --output`
/// writes them).
fn indexes_of(files: &[String], dir: &std::path::Path) -> String {
    let indexes = dir.join("indexes");
    std::fs::create_dir(&indexes).unwrap();
    let indexes = indexes.display().to_string();
    for shard in files {
        save_index(shard, &indexes);
    }
    indexes
}

/// `p` with its records read by its shard threads, before the workers: a
/// map on serialized records needs their bytes there, and one that gives
/// each record back changes no batch (its states are another pipeline's).
fn read_first(p: Pipeline) -> Pipeline {
    p.map(|r| r)
}

/// Each batch's records, without its state.
fn records(batches: &[(Vec<String>, Vec<u8>)]) -> Vec<&Vec<String>> {
    batches.iter().map(|(records, _)| records).collect()
}

/// Where record `i` of shard `f` of `write_files` starts ("f{f}-r{i}"
/// records, framed).
pub(super) fn record_offset(f: usize, i: usize) -> u64 {
    (0..i).map(|r| format!("f{f}-r{r}").len() as u64 + 16).sum()
}

/// Every batch's records as strings, and the run's figures at its end.
pub(super) fn drain(p: Pipeline, batch: usize) -> (Vec<Vec<String>>, PipelineStats) {
    let mut batches = p.build_raw(batch, false).unwrap();
    let mut out = Vec::new();
    while let Some(raw) = batches.next_batch().unwrap() {
        out.push(
            raw.records()
                .map(|r| String::from_utf8(r.to_vec()).unwrap())
                .collect(),
        );
    }
    (out, batches.stats())
}

fn pipeline(files: &[String]) -> Pipeline {
    Pipeline::from_files(files.to_vec())
        .unwrap()
        .seed(5)
        .threads(2)
        .interleave(2, 3)
        .repeat(Some(2))
}

#[test]
fn a_shuffle_buffer_holds_the_records_unread_and_shuffles_them_alike() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[40, 0, 77, 13, 1], Compression::None);
    let shuffled = || pipeline(&files).shuffle(25).shuffle_files();
    let (read, end) = run(&read_first(shuffled()), 7);
    assert!(end.is_none());
    let (by_headers, end) = run(&shuffled(), 7);
    assert!(end.is_none());
    assert_eq!(records(&by_headers), records(&read));
    let read = by_headers;
    for unread in [shuffled(), shuffled().worker_reads()] {
        let (workers, end) = run(&unread, 7);
        assert!(end.is_none());
        assert_eq!(workers, read);
        // A restore refills the buffer by reading its records again:
        // those come read, the rest unread, in the same batches.
        for cut in [3, 20] {
            let (rest, _) = run(&unread.clone().resume_from(&read[cut].1), 7);
            assert_eq!(rest, read[cut + 1..], "cut after batch {cut}");
        }
    }
}

#[test]
fn the_same_batches_and_states_as_the_shard_threads_give() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[40, 0, 77, 13, 1], Compression::None);
    let (read, end) = run(&read_first(pipeline(&files)), 7);
    assert!(end.is_none());
    assert_eq!(read.len(), (2 * 131usize).div_ceil(7));
    let (by_headers, end) = run(&pipeline(&files), 7);
    assert!(end.is_none());
    assert_eq!(records(&by_headers), records(&read));
    // With `mmap`, each worker reads views of its own maps instead.
    let mapped = || pipeline(&files).read_options(ReadOptions::default().mmap(true));
    let (mapped_workers, end) = run(&mapped(), 7);
    assert!(end.is_none());
    assert_eq!(mapped_workers, by_headers);
    let (rest, _) = run(&mapped().resume_from(&by_headers[9].1), 7);
    assert_eq!(rest, by_headers[10..]);
    // Framed by indexes found beside the shards: the same batches and
    // states, and a state of either framing resumes the other exactly;
    // the shard threads' own, theirs.
    let indexes = indexes_of(&files, dir.path());
    let (by_index, end) = run(&pipeline(&files).index_dir(&indexes), 7);
    assert!(end.is_none());
    assert_eq!(by_index, by_headers);
    for cut in [0, 5, 18, 30] {
        let state = &by_headers[cut].1;
        let (rest, _) = run(&pipeline(&files).resume_from(state), 7);
        assert_eq!(rest, by_headers[cut + 1..], "cut after batch {cut}");
        let (rest, _) = run(&pipeline(&files).resume_from(&by_index[cut].1), 7);
        assert_eq!(rest, by_headers[cut + 1..], "cut after batch {cut}");
        let (rest, _) = run(&read_first(pipeline(&files)).resume_from(&read[cut].1), 7);
        assert_eq!(rest, read[cut + 1..], "cut after batch {cut}");
    }
}

#[test]
fn the_same_with_logical_streams_host_shards_and_skip_take() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[40, 25, 77, 13], Compression::None);
    let variants: [&dyn Fn(Pipeline) -> Pipeline; 4] = [
        &|p| p.streams(2),
        // Two hosts of four files: each its own files.
        &|p| p.shard(1, 2),
        // Five hosts of four files: each every fifth record.
        &|p| p.shard(3, 5),
        &|p| p.skip(9).take(60),
    ];
    for (n, variant) in variants.iter().enumerate() {
        let base = || variant(Pipeline::from_files(files.clone()).unwrap().threads(2));
        let (read, end) = run(&read_first(base()), 6);
        assert!(end.is_none() && !read.is_empty());
        let (by_headers, end) = run(&base(), 6);
        assert!(end.is_none());
        assert_eq!(records(&by_headers), records(&read), "variant {n}");
        let (mapped, end) = run(&base().read_options(ReadOptions::default().mmap(true)), 6);
        assert!(end.is_none());
        assert_eq!(mapped, by_headers, "variant {n}");
    }
}

/// Under `on_corrupt(Skip)` the workers read the records too: each
/// shard's walk checks every payload, skips the corrupt regions a reader
/// skips and counts them, so the batches and counts are those of the shard
/// threads reading the records, every pass, and a state restores exactly
/// across a skipped region. A shuffle buffer holds its records unread.
#[test]
fn skipping_corrupt_records_leaves_the_rest_to_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    // Enough records for the shuffle to sample its buffer (every 256 out).
    let files = write_files(dir.path(), &[400, 770, 130], Compression::None);
    let at = record_offset;
    // Record 30's payload in shard 0, record 50's length in shard 1.
    corrupt_keeping_time(&files[0], at(0, 30) + 14);
    corrupt_keeping_time(&files[1], at(1, 50) + 1);
    let skipping = || {
        pipeline(&files)
            .read_options(ReadOptions::default().on_corrupt(CorruptPolicy::Skip))
            .shuffle(25)
    };
    let drained = |p: Pipeline| {
        let (batches, stats) = drain(p, 7);
        let skipped = (stats.read.skipped_records, stats.read.skipped_bytes);
        (
            batches.concat(),
            skipped,
            stats.record_thread.buffer_payload_bytes,
        )
    };
    let (read, skipped, held) = drained(read_first(skipping()));
    assert_eq!(read.len(), 2 * (400 + 770 + 130 - 2));
    assert!(!read.iter().any(|r| r == "f0-r30" || r == "f1-r50"));
    assert_eq!(skipped.0, 4);
    assert!(held > 0);
    let (workers, counted, held) = drained(skipping());
    assert_eq!((workers, counted), (read, skipped));
    assert_eq!(held, 0);
    let (batches, end) = run(&skipping(), 7);
    assert!(end.is_none());
    for cut in [3, 100, 300] {
        let (rest, _) = run(&skipping().resume_from(&batches[cut].1), 7);
        assert_eq!(rest, batches[cut + 1..], "cut after batch {cut}");
    }
}

/// A mixture's sources are read by the workers too: the same batches as
/// when their shard threads read them, a shuffled source's included, and
/// states that restore them exactly.
#[test]
fn a_mixtures_sources_are_read_by_the_workers_alike() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[40, 0, 77, 13, 1], Compression::None);
    let (a, b) = (files[..2].to_vec(), files[2..].to_vec());
    let mix = |first: fn(Pipeline) -> Pipeline| {
        let a = Pipeline::from_files(a.clone()).unwrap().repeat(Some(3));
        let b = Pipeline::from_files(b.clone())
            .unwrap()
            .shuffle(20)
            .shuffle_files()
            .repeat(Some(2));
        Pipeline::mix([("a", first(a)), ("b", first(b))], &[1.0, 2.0])
            .unwrap()
            .seed(5)
            .threads(2)
    };
    let (read, end) = run(&mix(read_first), 7);
    assert!(end.is_none());
    assert!(read.len() > 20);
    let (workers, end) = run(&mix(|p| p), 7);
    assert!(end.is_none());
    assert_eq!(records(&workers), records(&read));
    for cut in [0, 9, 20] {
        let (rest, _) = run(&mix(|p| p).resume_from(&workers[cut].1), 7);
        assert_eq!(rest, workers[cut + 1..], "cut after batch {cut}");
    }
}

#[test]
fn a_host_frames_only_the_shards_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[20, 20, 20, 20], Compression::None);
    // Host 1's shards cannot be framed: host 0 must not try.
    for f in [1, 3] {
        std::fs::write(&files[f], b"not a TFRecord shard").unwrap();
    }
    let host0 = || Pipeline::from_files(files.clone()).unwrap().shard(0, 2);
    let (read, _) = run(&read_first(host0()), 8);
    let (workers, end) = run(&host0(), 8);
    assert!(end.is_none(), "{end:?}");
    assert_eq!(records(&workers), records(&read));
    assert_eq!(read.iter().map(|(b, _)| b.len()).sum::<usize>(), 40);
}

#[test]
fn indexes_found_frame_plain_shards_and_gzip_shards_are_read_as_usual() {
    let dir = tempfile::tempdir().unwrap();
    let sub = |name: &str| {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        sub
    };
    let plain = write_files(&sub("plain"), &[30, 12], Compression::None);
    let gzip = write_files(&sub("gzip"), &[9, 21], Compression::Gzip);
    let files: Vec<String> = plain.iter().chain(&gzip).cloned().collect();
    let (read, _) = run(&read_first(pipeline(&files)), 4);
    let (by_headers, _) = run(&pipeline(&files), 4);
    assert_eq!(records(&by_headers), records(&read));
    let indexes = indexes_of(&files, dir.path());
    let (by_index, end) = run(&pipeline(&files).index_dir(&indexes), 4);
    assert!(end.is_none());
    assert_eq!(by_index, by_headers);
    assert_eq!(read.iter().map(|(b, _)| b.len()).sum::<usize>(), 2 * 72);
    // Found beside the shards (`infeed index`'s default place) alike.
    for shard in &files {
        let index = build(shard, &BuildOptions::default()).unwrap();
        save(&index, &index_url(shard, None), &SourceOptions::default()).unwrap();
    }
    let (beside, end) = run(&pipeline(&files), 4);
    assert!(end.is_none());
    assert_eq!(beside, by_headers);
}

/// An index that no longer matches its shard (the shard written again
/// since) is passed over: the shard is framed by its headers, and the
/// records are the shard's as it is now.
#[test]
fn a_stale_index_is_passed_over_for_the_headers() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[30, 12], Compression::None);
    let indexes = indexes_of(&files, dir.path());
    let rewritten = write_files(dir.path(), &[17, 12], Compression::None);
    assert_eq!(rewritten, files);
    let (read, _) = run(&read_first(pipeline(&files)), 4);
    let (workers, end) = run(&pipeline(&files).index_dir(&indexes), 4);
    assert!(end.is_none(), "{end:?}");
    assert_eq!(records(&workers), records(&read));
    assert_eq!(read.iter().map(|(b, _)| b.len()).sum::<usize>(), 2 * 29);
}

/// A record corrupted in place, after its shard was indexed (the index
/// still matches the file), is the error a reader of the shard gives, its
/// number in the shard included, whether the shard is framed by its
/// headers or by its index; the batches before its own are delivered.
#[test]
fn a_record_corrupted_in_place_is_the_error_a_reader_gives() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough that the byte changed lies outside the first and last
    // 4 KiB, which the index's identity hashes.
    let files = write_files(dir.path(), &[1000], Compression::None);
    let shard = &files[0];
    let indexes = dir.path().join("indexes").display().to_string();
    std::fs::create_dir(&indexes).unwrap();
    save_index(shard, &indexes);
    let p = Pipeline::from_files(files.clone()).unwrap().threads(2);
    let (clean, _) = run(&p, 100);
    // Record 550's payload "f0-r550", changed in place, the file's time
    // kept.
    let offset: u64 = (0..550).map(|i| format!("f0-r{i}").len() as u64 + 16).sum();
    corrupt_keeping_time(shard, offset + 12);
    let reader_error = RecordReader::open(shard, &ReadOptions::default())
        .unwrap()
        .find_map(Result::err)
        .unwrap();
    assert_eq!(
        (reader_error.offset, reader_error.index),
        (offset, Some(550))
    );
    assert!(
        matches!(reader_error.kind, ErrorKind::DataCrc { .. }),
        "{reader_error}"
    );
    let expected = PipelineError::Record(reader_error).to_string();
    for unread in [p.clone(), p.clone().index_dir(&indexes)] {
        let (workers, error) = run(&unread, 100);
        assert_eq!(error.map(|e| e.to_string()), Some(expected.clone()));
        // The batches before the corrupt record's, and none of its rows.
        assert_eq!(workers[..], clean[..5]);
    }
}

/// `worker_reads` once asked the workers to read the records, and was
/// refused with the steps that need the bytes before them; it is accepted
/// now with every step, and changes neither batches nor description.
#[test]
fn worker_reads_is_accepted_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[10, 7], Compression::None);
    let p = || {
        Pipeline::from_files(files.clone())
            .unwrap()
            .seed(3)
            .threads(2)
    };
    let skipping = ReadOptions::default().on_corrupt(CorruptPolicy::Skip);
    let source = || p().repeat(Some(2));
    let lm = write_lm_files(dir.path(), &[vec![3, 9, 1, 5, 12, 2, 7]]);
    let bucketed = |given: bool| {
        let p = Pipeline::from_files(lm.clone()).unwrap();
        let p = if given { p.worker_reads() } else { p };
        p.parse(spec())
            .max_length(16)
            .bucket_by_length("ids", &[4, 8], &[2, 2, 1])
    };
    let cases: [(&str, Pipeline); 5] = [
        ("plain", p().shuffle(5)),
        (
            "skipping corrupt records",
            p().read_options(skipping.clone()),
        ),
        ("a filter", p().filter(|r: &[u8]| !r.ends_with(b"3"))),
        (
            "the global shuffle",
            p().global_shuffle().read_options(skipping),
        ),
        (
            "a mixture",
            Pipeline::mix([("a", source()), ("b", source())], &[1.0, 1.0]).unwrap(),
        ),
    ];
    for (what, p) in cases {
        assert_eq!(p.clone().worker_reads().describe(), p.describe(), "{what}");
        let (given, _) = drain(p.clone().worker_reads(), 4);
        let (without, _) = drain(p, 4);
        assert!(!without.is_empty(), "{what}");
        assert_eq!(given, without, "{what}");
    }
    assert_eq!(bucketed(true).describe(), bucketed(false).describe());
    let batches = |given: bool| -> Vec<_> {
        let batches = bucketed(given).build().unwrap();
        batches.map(Result::unwrap).collect()
    };
    let without = batches(false);
    assert!(!without.is_empty());
    assert_eq!(batches(true), without);
}

/// A mixture's workers check each source's records as the source's own
/// read options say, not the mixture's: a corrupt record of a source that
/// checks CRCs ends the run under a mixture that does not; a skipping
/// source's walk skips and counts its corrupt records, the same records
/// coming as when its shard threads read them.
#[test]
fn a_mixtures_workers_check_each_source_as_its_own_options_say() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[40, 77], Compression::None);
    let at = record_offset;
    corrupt_keeping_time(&files[1], at(1, 30) + 14);
    let skip = ReadOptions::default().on_corrupt(CorruptPolicy::Skip);
    let mix = |a: ReadOptions, first: fn(Pipeline) -> Pipeline| {
        let a = Pipeline::from_files(vec![files[0].clone()])
            .unwrap()
            .read_options(a)
            .repeat(Some(2));
        let b = Pipeline::from_files(vec![files[1].clone()])
            .unwrap()
            .read_options(skip.clone())
            .repeat(Some(2));
        Pipeline::mix([("a", first(a)), ("b", first(b))], &[1.0, 1.0])
            .unwrap()
            .read_options(ReadOptions::default().verify_crc(false))
            .seed(5)
            .threads(2)
    };
    let drained = |p: Pipeline| {
        let (batches, stats) = drain(p, 7);
        (batches.concat(), stats.read.skipped_records)
    };
    let (read, skipped) = drained(mix(ReadOptions::default(), read_first));
    assert_eq!(skipped, 2);
    assert!(!read.iter().any(|r| r == "f1-r30"));
    assert_eq!(drained(mix(ReadOptions::default(), |p| p)), (read, skipped));
    // Source a checks its CRCs (as by default) and source b skips: their
    // checks differ, so each shard is checked by its own.
    corrupt_keeping_time(&files[0], at(0, 20) + 14);
    let (_, error) = run(&mix(ReadOptions::default(), read_first), 7);
    let expected = error.expect("the shard threads found no corrupt record");
    let named = format!("{}: record 20 at byte {}: data CRC", files[0], at(0, 20));
    assert!(expected.to_string().starts_with(&named), "{expected}");
    let (_, error) = run(&mix(ReadOptions::default(), |p| p), 7);
    assert_eq!(error.map(|e| e.to_string()), Some(expected.to_string()));
    // Both skip: alike, one check for all.
    let (workers, skipped) = drained(mix(skip.clone(), |p| p));
    assert_eq!(skipped, 4);
    assert_eq!((workers, skipped), drained(mix(skip.clone(), read_first)));
}

/// Buckets and packing need each record's length before the workers:
/// the walks scan each payload for it (by the headers, or by an index
/// found), and the workers read the records as for any other grouping.
/// The batches and states are those of the shard threads reading the
/// records, with a shuffle buffer and an interleave as well, and a state
/// restores exactly; a record the scan cannot read is the parse error it
/// was, after the batches before it.
#[test]
fn buckets_and_packing_are_measured_by_the_walks_and_read_by_the_workers() {
    use super::grouping::{float_ids, lm_record};
    use crate::support::tfrecord::write_file;
    let dir = tempfile::tempdir().unwrap();
    let (_, files, indexes) = lm_files(dir.path());
    let groupings: [&dyn Fn(Pipeline) -> infeed::pipeline::ParsedPipeline; 2] = [
        &|p| {
            p.parse(spec())
                .max_length(24)
                .bucket_by_length("ids", &[6, 12], &[4, 3, 2])
        },
        &|p| p.parse(spec()).pack(32).batch(3, false),
    ];
    let orders: [&dyn Fn(Pipeline) -> Pipeline; 3] =
        [&|p| p, &|p| p.shuffle(17).shuffle_files(), &|p| {
            p.interleave(2, 3).repeat(Some(2))
        }];
    same_as_read_first(&files, &indexes, &groupings, &orders);
    // The fourth record of a shard holds its lengths as floats: the wire
    // scan cannot read it, and the error names it.
    let bad = dir.path().join("bad.tfrecord");
    let records = (0..3).map(|i| lm_record(i, 5)).chain([float_ids()]);
    let bad = write_file(&bad, records.chain([lm_record(9, 3)]), Compression::None);
    let offset: u64 = (0..3).map(|i| lm_record(i, 5).len() as u64 + 16).sum();
    let mut batches = Pipeline::from_files([bad.clone()])
        .unwrap()
        .parse(spec())
        .pack(32)
        .batch(1, false)
        .build()
        .unwrap();
    // The three records before it, packed into one row, come first.
    assert_eq!(batches.next_batch().unwrap().unwrap().real_rows, 1);
    match batches.next_batch() {
        Err(PipelineError::Parse {
            path,
            offset: at,
            error,
            ..
        }) => {
            assert_eq!((path.as_str(), at), (bad.as_str(), offset));
            assert_eq!(error.feature.as_deref(), Some("ids"));
        }
        other => panic!("{:?}", other.map(|b| b.map(|b| b.shape()))),
    }
}

/// Parsed steps before the grouping (`filter_length`, `filter_rows`,
/// lengths measured after them) parse each record on the prefilter
/// threads, which read the records the shard threads left unread, as a
/// worker reads its batch's: the same batches and states as records read
/// before the workers, in every order; a record corrupted in place is the
/// reader's error after the same batches.
#[test]
fn parsed_steps_before_the_grouping_read_their_records_on_the_prefilter_threads() {
    use infeed::example::Column;
    let dir = tempfile::tempdir().unwrap();
    let (lens, files, indexes) = lm_files(dir.path());
    let steps: [&dyn Fn(Pipeline) -> infeed::pipeline::ParsedPipeline; 3] = [
        &|p| {
            p.parse(spec())
                .filter_length("ids", 4, 18)
                .max_length(24)
                .batch(5, false)
        },
        &|p| {
            p.parse(spec())
                .filter_length("ids", 2, 20)
                .pack(32)
                .batch(3, false)
        },
        &|p| {
            p.parse(spec())
                .filter_rows(|b, row| match b.get("ids") {
                    Some(Column::Ragged {
                        values, row_splits, ..
                    }) => {
                        let ids = values.as_int64().unwrap();
                        let row = &ids[row_splits[row]..row_splits[row + 1]];
                        row.first().is_none_or(|v| v % 3 != 0)
                    }
                    _ => true,
                })
                .max_length(24)
                .bucket_by_length("ids", &[6, 12], &[4, 3, 2])
        },
    ];
    let orders: [&dyn Fn(Pipeline) -> Pipeline; 4] = [
        &|p| p,
        &|p| p.shuffle(17).shuffle_files(),
        &|p| p.interleave(2, 3).repeat(Some(2)),
        &|p| p.global_shuffle(),
    ];
    same_as_read_first(&files, &indexes, &steps, &orders);
    // Record 40 of the second shard, its payload changed in place (its
    // index kept, the file's time too): the prefilter threads' read finds
    // it, and the run ends as when a shard thread read it.
    let offset: u64 = (0..40)
        .map(|i| super::grouping::lm_record(100 + i, lens[1][i as usize]).len() as u64 + 16)
        .sum();
    corrupt_keeping_time(&files[1], offset + 14);
    let until_error = |p: Pipeline| {
        let mut batches = steps[1](p).build().unwrap();
        let mut digests = Vec::new();
        loop {
            match batches.next_batch() {
                Ok(Some(b)) => digests.push(b.digest()),
                Ok(None) => panic!("no error"),
                Err(e) => return (digests, e.to_string()),
            }
        }
    };
    let base = || Pipeline::from_files(files.clone()).unwrap().threads(2);
    let (read, error) = until_error(read_first(base()));
    assert!(
        error.contains(&files[1]) && error.contains(&offset.to_string()),
        "{error}"
    );
    assert!(read.len() > 3);
    for p in [base(), base().index_dir(&indexes)] {
        assert_eq!(until_error(p), (read.clone(), error.clone()));
    }
}

/// A mixture's sources are framed by the indexes found of their shards (in
/// the source's `index_dir`, or the mixture's), as a pipeline's are. The
/// proof: a shard written again in place after it was indexed, the same
/// size, time and ends, but two records cut elsewhere, is framed by its
/// index, whose places no longer hold its records (an error); by its
/// headers it reads.
#[test]
fn a_mixtures_sources_are_framed_by_the_indexes_found() {
    use crate::support::tfrecord::write_file;
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[1000, 30], Compression::None);
    let indexes = indexes_of(&files[..1], dir.path());
    let mix = |own: Option<&str>, mixture: Option<&str>| {
        let a = Pipeline::from_files([files[0].clone()]).unwrap();
        let a = own.map_or(a.clone(), |dir| a.index_dir(dir));
        // Endless: the mixture ends with `a`.
        let b = Pipeline::from_files([files[1].clone()])
            .unwrap()
            .repeat(None);
        let mix = Pipeline::mix([("a", a), ("b", b)], &[1.0, 1.0]).unwrap();
        mixture
            .map_or(mix.clone(), |dir| mix.index_dir(dir))
            .seed(5)
            .threads(2)
    };
    let (by_headers, end) = run(&mix(None, None), 8);
    assert!(end.is_none(), "{end:?}");
    let has = |run: &[(Vec<String>, Vec<u8>)], record: &str| {
        run.iter().any(|(b, _)| b.iter().any(|r| r == record))
    };
    assert!(has(&by_headers, "f0-r999"));
    for (own, mixture) in [(Some(&indexes), None), (None, Some(&indexes))] {
        let (by_index, end) = run(
            &mix(own.map(String::as_str), mixture.map(String::as_str)),
            8,
        );
        assert!(end.is_none(), "{end:?}");
        assert_eq!(by_index, by_headers);
    }
    // Records 500 and 501 ("f0-r500", "f0-r501") as "f0-r50" and
    // "0f0-r501": the same bytes but for their frames.
    let modified = std::fs::metadata(&files[0]).unwrap().modified().unwrap();
    let records = (0..1000).map(|i| match i {
        500 => "f0-r50".to_owned(),
        501 => "0f0-r501".to_owned(),
        i => format!("f0-r{i}"),
    });
    let size = std::fs::metadata(&files[0]).unwrap().len();
    write_file(std::path::Path::new(&files[0]), records, Compression::None);
    assert_eq!(std::fs::metadata(&files[0]).unwrap().len(), size);
    let file = std::fs::File::options()
        .write(true)
        .open(&files[0])
        .unwrap();
    file.set_modified(modified).unwrap();
    let (read, end) = run(&mix(None, None), 8);
    assert!(end.is_none(), "{end:?}");
    assert!(has(&read, "0f0-r501") && has(&read, "f0-r999"));
    for (own, mixture) in [(Some(&indexes), None), (None, Some(&indexes))] {
        let (_, end) = run(
            &mix(own.map(String::as_str), mixture.map(String::as_str)),
            8,
        );
        let end = end.expect("framed by its index").to_string();
        assert!(end.contains(&files[0]), "{end}");
    }
}

/// Three shards of 60 lm records of lengths 1 to 23, and a folder of their
/// indexes: the lengths, the shards, the folder.
fn lm_files(dir: &std::path::Path) -> (Vec<Vec<usize>>, Vec<String>, String) {
    let lens: Vec<Vec<usize>> = (0..3)
        .map(|f| (0..60).map(|i| 1 + (i * 7 + f * 3) % 23).collect())
        .collect();
    let files = write_lm_files(dir, &lens);
    let indexes = indexes_of(&files, dir);
    (lens, files, indexes)
}

/// Each grouping of `files` in each order gives the batches it gives with
/// its records read before the workers, framed by the shards' headers and
/// by their `indexes`; and a state after 5 batches restores to the rest.
fn same_as_read_first(
    files: &[String],
    indexes: &str,
    groupings: &[&dyn Fn(Pipeline) -> infeed::pipeline::ParsedPipeline],
    orders: &[&dyn Fn(Pipeline) -> Pipeline],
) {
    use super::grouping::{digests, digests_then_state};
    for (g, grouping) in groupings.iter().enumerate() {
        for (o, order) in orders.iter().enumerate() {
            let base = || {
                order(
                    Pipeline::from_files(files.to_vec())
                        .unwrap()
                        .seed(3)
                        .threads(2),
                )
            };
            let read = digests(grouping(read_first(base())).build().unwrap());
            assert!(read.len() > 10, "grouping {g}, order {o}");
            for index_dir in [None, Some(indexes)] {
                let p = || match index_dir {
                    Some(dir) => grouping(base().index_dir(dir)),
                    None => grouping(base()),
                };
                let workers = digests(p().build().unwrap());
                assert_eq!(workers, read, "grouping {g}, order {o}, {index_dir:?}");
                let (first, state) = digests_then_state(p().build().unwrap(), 5);
                assert_eq!(first, read[..5]);
                let rest = digests(p().resume_from(&state).build().unwrap());
                assert_eq!(rest, read[5..], "grouping {g}, order {o}, {index_dir:?}");
            }
        }
    }
}

/// The batches a prefiltered run delivers before a record that does not
/// read carry states that lose and repeat nothing, the last partial ones
/// too (sent after the error, while the chain had run a chunk ahead): the
/// shard made whole again, the run resumed from any of them delivers
/// exactly the values the clean run does after it.
#[test]
fn states_before_a_prefilter_read_error_resume_exactly() {
    use super::grouping::{lm_record, values};
    let dir = tempfile::tempdir().unwrap();
    let (lens, files, _) = lm_files(dir.path());
    let p = || {
        Pipeline::from_files(files.clone())
            .unwrap()
            .threads(2)
            .parse(spec())
            .filter_length("ids", 2, 20)
            .pack(32)
            .batch(3, false)
    };
    let all = |batches: infeed::pipeline::Batches<infeed::batch::Batch>| {
        batches.map(Result::unwrap).collect::<Vec<_>>()
    };
    let clean = values(&all(p().build().unwrap()));
    let original = std::fs::read(&files[1]).unwrap();
    let offset: u64 = (0..40)
        .map(|i| lm_record(100 + i, lens[1][i as usize]).len() as u64 + 16)
        .sum();
    corrupt_keeping_time(&files[1], offset + 14);
    let mut batches = p().build().unwrap();
    let mut before = Vec::new();
    let error = loop {
        match batches.next_batch() {
            Ok(Some(b)) => before.push((b, batches.state())),
            Ok(None) => panic!("no error"),
            Err(e) => break e.to_string(),
        }
    };
    assert!(error.contains(&files[1]), "{error}");
    assert!(before.len() > 3);
    std::fs::write(&files[1], &original).unwrap();
    for k in 0..before.len() {
        let mut seen: Vec<_> = before[..=k].iter().map(|(b, _)| b.clone()).collect();
        seen.extend(all(p().resume_from(&before[k].1).build().unwrap()));
        assert_eq!(
            values(&seen),
            clean,
            "resumed after batch {k} of {}",
            before.len()
        );
    }
}

/// A record too long for its row ends the run; the batches before it carry
/// states that name it and every record after the last one grouped, on
/// the walks' path and the prefilter's alike: a run resumed from any of
/// them delivers the records the first run delivered after that state,
/// and ends with the same error, never past it.
#[test]
fn states_before_a_grouping_error_resume_to_it() {
    use super::grouping::{lm_record, values};
    use crate::support::tfrecord::write_file;
    let dir = tempfile::tempdir().unwrap();
    let (mut lens, files, _) = lm_files(dir.path());
    lens[1][40] = 40;
    let records = (0..60).map(|i| lm_record(100 + i as i64, lens[1][i]));
    write_file(std::path::Path::new(&files[1]), records, Compression::None);
    let packed: [&dyn Fn(Pipeline) -> infeed::pipeline::ParsedPipeline; 2] =
        [&|p| p.parse(spec()).pack(32).batch(3, false), &|p| {
            p.parse(spec())
                .filter_length("ids", 1, 100)
                .pack(32)
                .batch(3, false)
        }];
    for (k, pack) in packed.iter().enumerate() {
        let p = || pack(Pipeline::from_files(files.clone()).unwrap().threads(2));
        let until_error = |mut batches: infeed::pipeline::Batches<infeed::batch::Batch>| {
            let mut out = Vec::new();
            loop {
                match batches.next_batch() {
                    Ok(Some(b)) => out.push((b, batches.state())),
                    Ok(None) => panic!("no error"),
                    Err(e) => return (out, e.to_string()),
                }
            }
        };
        let (before, error) = until_error(p().build().unwrap());
        assert!(error.contains("40") && error.contains(&files[1]), "{error}");
        assert!(before.len() > 3, "pipeline {k}");
        let delivered: Vec<_> = before.iter().map(|(b, _)| b.clone()).collect();
        for (n, (_, state)) in before.iter().enumerate() {
            let (after, again) = until_error(p().resume_from(state).build().unwrap());
            assert_eq!(again, error, "pipeline {k}, resumed after batch {n}");
            let mut seen = delivered[..=n].to_vec();
            seen.extend(after.into_iter().map(|(b, _)| b));
            assert_eq!(values(&seen), values(&delivered), "pipeline {k}, batch {n}");
        }
    }
}
