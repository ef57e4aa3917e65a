//! Indexes and random access (`infeed::index`): a shard's index built in
//! one pass (plain, GZIP, ZLIB, several GZIP members), saved in the
//! `.infeed-index` folder beside the shard or in a folder of the user's and
//! loaded back, and one beside the shard (where versions before wrote it)
//! still found; records read through it
//! one at a time and many at once equal sequential reading; a stale,
//! foreign, cut or damaged index, an index out of range and an access point
//! that does not inflate are typed errors naming the shard and the index.

use std::sync::Arc;

use infeed::index::{
    AccessOptions, BuildOptions, Found, IndexError, IndexOptions, RandomAccess, ShardIndex,
    beside_url, build, index_url, load, load_or_build, save,
};
use infeed::record::Compression;
use proptest::prelude::*;

use crate::support::tfrecord::{read_file, write_file};

#[cfg(feature = "cli")]
mod cli;

/// A record of varying length (1 to ~3 KiB): its number spelled, then
/// bytes that compress little (so a GZIP shard has many deflate blocks,
/// and access points between them).
fn record(f: usize, i: usize) -> Vec<u8> {
    let mut r = format!("file {f} record {i} ").into_bytes();
    let len = 1 + (i * 7919 + f * 104_729) % 3000;
    let mut x = (f * 1_000_003 + i) as u64 | 1;
    while r.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.push(b'a' + (x % 16) as u8);
    }
    r.truncate(len);
    r
}

/// Shards of `counts` records with compression `c`; their paths.
fn shards(dir: &std::path::Path, counts: &[usize], c: Compression) -> Vec<String> {
    let ext = match c {
        Compression::None => "",
        Compression::Gzip => ".gz",
        Compression::Zlib => ".zz",
    };
    counts
        .iter()
        .enumerate()
        .map(|(f, &n)| {
            let path = dir.join(format!("part-{f}.tfrecord{ext}"));
            write_file(&path, (0..n).map(|i| record(f, i)), c)
        })
        .collect()
}

/// Every record of `files`, in order, as (file, offset, bytes).
fn sequential(files: &[String]) -> Vec<(usize, u64, Vec<u8>)> {
    files
        .iter()
        .enumerate()
        .flat_map(|(f, path)| {
            read_file(path)
                .into_iter()
                .map(move |r| (f, r.offset, r.data.to_vec()))
        })
        .collect()
}

/// Small access-point spans, so that even these small shards have many.
fn small_span() -> AccessOptions {
    AccessOptions {
        index: IndexOptions {
            dir: None,
            build: BuildOptions {
                span: 16 << 10,
                ..BuildOptions::default()
            },
        },
        ..AccessOptions::default()
    }
}

#[test]
fn every_record_through_the_index_equals_sequential_reading() {
    let dir = tempfile::tempdir().unwrap();
    for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
        let sub = dir.path().join(format!("{c}"));
        std::fs::create_dir_all(&sub).unwrap();
        let files = shards(&sub, &[300, 0, 1, 257], c);
        let want = sequential(&files);
        let access = RandomAccess::open(&files, &small_span()).unwrap();
        assert_eq!(access.len(), want.len() as u64);
        if c != Compression::None {
            let points: usize = access.indexes().map(|i| i.points.len()).sum();
            assert!(points > 20, "{c}: {points} access points");
        }
        // One at a time, forwards and backwards.
        for i in (0..want.len()).chain((0..want.len()).rev().step_by(7)) {
            let (shard, r) = access.get(i as u64).unwrap();
            assert_eq!(
                (shard, r.offset, r.data.to_vec()),
                want[i],
                "{c} record {i}"
            );
        }
        // All at once, in a scrambled order with repeats.
        let order: Vec<u64> = (0..want.len() as u64 * 2)
            .map(|k| k * 7_919 % want.len() as u64)
            .collect();
        let got = access.get_many(&order).unwrap();
        for (k, (shard, r)) in got.iter().enumerate() {
            assert_eq!((*shard, r.offset, r.data.to_vec()), want[order[k] as usize]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// `get_many` equals sequential reading for any set of indices, plain
    /// and GZIP, whatever the coalescing distance, mapped or read.
    #[test]
    fn get_many_equals_sequential_reading(
        gzip in any::<bool>(),
        counts in proptest::collection::vec(0usize..120, 1..5),
        picks in proptest::collection::vec(any::<u64>(), 0..200),
        coalesce in prop_oneof![Just(0u64), Just(4096), Just(1 << 20)],
        mmap in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let c = if gzip { Compression::Gzip } else { Compression::None };
        let files = shards(dir.path(), &counts, c);
        let want = sequential(&files);
        let opts = AccessOptions { coalesce_bytes: coalesce, mmap, ..small_span() };
        let access = RandomAccess::open(&files, &opts).unwrap();
        prop_assert_eq!(access.len(), want.len() as u64);
        if want.is_empty() {
            return Ok(());
        }
        let indices: Vec<u64> = picks.iter().map(|p| p % want.len() as u64).collect();
        let got = access.get_many(&indices).unwrap();
        prop_assert_eq!(got.len(), indices.len());
        for (k, (shard, r)) in got.iter().enumerate() {
            prop_assert_eq!(&(*shard, r.offset, r.data.to_vec()), &want[indices[k] as usize]);
        }
    }
}

#[test]
fn an_index_saved_beside_its_shard_or_in_a_folder_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path(), &[50, 70], Compression::Gzip);
    let idx = build(&files[0], &BuildOptions::default()).unwrap();
    assert_eq!(idx.len(), 50);
    // By default in a hidden folder beside the shards: no glob of shards
    // (infeed's, TensorFlow's, Beam's) reaches one level down.
    let default = index_url(&files[0], None);
    assert_eq!(
        default,
        format!(
            "{}/.infeed-index/part-0.tfrecord.gz.index",
            dir.path().display()
        )
    );
    save(&idx, &default, &Default::default()).unwrap();
    assert_eq!(load(&files[0], &default, &Default::default()).unwrap(), idx);
    let found = load_or_build(&files[..1], &IndexOptions::default()).unwrap();
    assert_eq!(found[0].1, Found::Loaded { index: default });
    // A glob of the shards passes over an index beside them (where versions
    // before `.infeed-index` wrote it).
    let beside = beside_url(&files[0]);
    assert_eq!(beside, format!("{}.index", files[0]));
    save(&idx, &beside, &Default::default()).unwrap();
    let listed = infeed::source::list_shards_blocking(
        &format!("{}/part-*", dir.path().display()),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(
        listed.iter().map(|s| s.url.clone()).collect::<Vec<_>>(),
        files
    );
    let elsewhere = dir.path().join("indexes").display().to_string();
    let there = index_url(&files[0], Some(&elsewhere));
    assert_eq!(there, format!("{elsewhere}/part-0.tfrecord.gz.index"));
    save(&idx, &there, &Default::default()).unwrap();
    assert_eq!(load(&files[0], &there, &Default::default()).unwrap(), idx);
    // The reader takes them from there (the second is built in memory).
    let opts = AccessOptions {
        index: IndexOptions {
            dir: Some(elsewhere),
            ..IndexOptions::default()
        },
        ..AccessOptions::default()
    };
    let access = RandomAccess::open(&files, &opts).unwrap();
    assert_eq!(access.len(), 120);
    assert_eq!(access.get(119).unwrap().1.data.to_vec(), record(1, 69));
}

/// How an index is refused: by the shard's and the index's names, with
/// what differs.
#[test]
fn a_stale_foreign_cut_or_damaged_index_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path(), &[40, 40], Compression::None);
    let index = index_url(&files[0], None);
    save(
        &build(&files[0], &BuildOptions::default()).unwrap(),
        &index,
        &Default::default(),
    )
    .unwrap();
    // Another shard's index.
    let err = load(&files[1], &index, &Default::default()).unwrap_err();
    assert!(matches!(err, IndexError::OtherShard { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "{index}: an index of \"part-0.tfrecord\", not of {}",
            files[1]
        )
    );
    // Missing.
    let missing = index_url(&files[1], None);
    let err = load(&files[1], &missing, &Default::default()).unwrap_err();
    assert!(matches!(err, IndexError::Missing { .. }), "{err}");
    assert!(err.to_string().contains("no index at"), "{err}");
    // Cut short, damaged.
    let bytes = std::fs::read(&index).unwrap();
    std::fs::write(&index, &bytes[..bytes.len() - 9]).unwrap();
    let err = load(&files[0], &index, &Default::default()).unwrap_err();
    assert!(matches!(err, IndexError::Corrupt { .. }), "{err}");
    assert!(err.to_string().starts_with(&format!("{index}: ")), "{err}");
    std::fs::write(&index, b"DALI 0 100\n").unwrap();
    let err = load(&files[0], &index, &Default::default()).unwrap_err();
    assert!(err.to_string().contains("not an infeed index"), "{err}");
    // The shard rewritten with the same records in another order: same
    // size, other content.
    std::fs::write(&index, &bytes).unwrap();
    let mut reversed: Vec<Vec<u8>> = (0..40).map(|i| record(0, i)).collect();
    reversed.reverse();
    write_file(
        std::path::Path::new(&files[0]),
        &reversed,
        Compression::None,
    );
    let err = load(&files[0], &index, &Default::default()).unwrap_err();
    match &err {
        IndexError::Stale { what, .. } => {
            assert!(
                what.starts_with("modification time") || what.starts_with("content"),
                "{what}"
            );
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("stale index of"), "{err}");
    // Grown (a record appended): its size says so.
    let mut more = reversed.clone();
    more.push(b"one more".to_vec());
    write_file(std::path::Path::new(&files[0]), &more, Compression::None);
    let err = load(&files[0], &index, &Default::default()).unwrap_err();
    assert!(
        matches!(err, IndexError::Stale { what: "size", .. }),
        "{err}"
    );
}

#[test]
fn an_index_out_of_range_or_a_point_that_does_not_inflate_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path(), &[200], Compression::Gzip);
    let mut idx = build(
        &files[0],
        &BuildOptions {
            span: 16 << 10,
            ..BuildOptions::default()
        },
    )
    .unwrap();
    let access = RandomAccess::with_indexes(&files, vec![Arc::new(idx.clone())], &small_span());
    let err = access.get(200).unwrap_err();
    assert_eq!(
        err.to_string(),
        "record 200 is out of range: the dataset has 200 records"
    );
    // A window that is not deflate: the records after that point fail by
    // name, the others read.
    assert!(idx.points.len() > 3);
    idx.points[2].window = bytes::Bytes::from_static(b"\xff\xfe\xfd");
    let after = (0..200)
        .find(|&i| idx.record(i).unwrap().0 >= idx.points[2].out)
        .unwrap();
    let access = RandomAccess::with_indexes(&files, vec![Arc::new(idx)], &small_span());
    assert!(access.get(0).is_ok());
    let err = access.get(after).unwrap_err();
    assert!(
        matches!(err, IndexError::BadPoint { point: 2, .. }),
        "{err}"
    );
    assert!(
        err.to_string().starts_with(&format!(
            "{}: access point 2 of its index {} does not inflate",
            files[0],
            index_url(&files[0], None)
        )),
        "{err}"
    );
}

/// An index a version before `.infeed-index` wrote beside its shard
/// (`SHARD.index`) is still found, and read (not built again), where the
/// folder has none; where both are, the folder's is read.
#[test]
fn an_index_beside_its_shard_as_versions_before_wrote_it_is_still_found() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path(), &[30, 40], Compression::Gzip);
    for f in &files {
        let idx = build(f, &BuildOptions::default()).unwrap();
        save(&idx, &beside_url(f), &Default::default()).unwrap();
    }
    let found = load_or_build(&files, &IndexOptions::default()).unwrap();
    for (f, (idx, how)) in files.iter().zip(&found) {
        assert_eq!(
            how,
            &Found::Loaded {
                index: format!("{f}.index")
            }
        );
        assert_eq!(**idx, build(f, &BuildOptions::default()).unwrap());
    }
    let access = RandomAccess::open(&files, &AccessOptions::default()).unwrap();
    assert_eq!(access.len(), 70);
    assert_eq!(access.get(69).unwrap().1.data.to_vec(), record(1, 39));
    // It is checked as any: another shard's index there is refused by name.
    let other = build(&files[1], &BuildOptions::default()).unwrap();
    save(&other, &beside_url(&files[0]), &Default::default()).unwrap();
    let Err(err) = RandomAccess::open(&files, &AccessOptions::default()) else {
        panic!("another shard's index was taken");
    };
    assert!(
        err.to_string()
            .starts_with(&format!("{}.index: an index of", files[0])),
        "{err}"
    );
    // An index in the folder comes first: the foreign one beside is not read.
    let idx = build(&files[0], &BuildOptions::default()).unwrap();
    save(&idx, &index_url(&files[0], None), &Default::default()).unwrap();
    let access = RandomAccess::open(&files, &AccessOptions::default()).unwrap();
    assert_eq!(access.get(29).unwrap().1.data.to_vec(), record(0, 29));
    // Through an explicit folder, only that folder is looked in.
    let opts = IndexOptions {
        dir: Some(dir.path().join("elsewhere").display().to_string()),
        ..IndexOptions::default()
    };
    let found = load_or_build(&files, &opts).unwrap();
    assert!(found.iter().all(|(_, how)| *how == Found::Built));
}

#[test]
fn an_index_that_places_a_record_where_there_is_none_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path(), &[30], Compression::None);
    let idx = build(&files[0], &BuildOptions::default()).unwrap();
    // Another file of the same name and size whose records lie elsewhere.
    let other: Vec<Vec<u8>> = (0..30).map(|i| record(0, 29 - i)).collect();
    write_file(std::path::Path::new(&files[0]), &other, Compression::None);
    let access = RandomAccess::with_indexes(&files, vec![Arc::new(idx)], &AccessOptions::default());
    let first_len = record(0, 0).len();
    let errors = (0..30)
        .filter(|&i| match access.get(i) {
            Ok((_, r)) => {
                // Wherever a record is found, it is a whole, valid record.
                assert!(other.iter().any(|o| o[..] == r.data[..]));
                false
            }
            Err(IndexError::NoRecord { .. }) => true,
            Err(e) => panic!("{e}"),
        })
        .count();
    assert!(errors > 0 && first_len > 0);
}

/// The index of a kilobyte-record shard is about 0.2% of it; of a GZIP
/// shard with 1 MiB spans, about 1% of the uncompressed data.
#[test]
fn index_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let plain = shards(dir.path(), &[3000], Compression::None);
    let size = std::fs::metadata(&plain[0]).unwrap().len();
    let idx = build(&plain[0], &BuildOptions::default()).unwrap();
    let bytes = idx.encode().len() as u64;
    assert!(bytes * 100 < size, "{bytes} of {size}");
    let idx2 = ShardIndex::decode(&idx.encode(), "x").unwrap();
    assert_eq!(idx2, idx);
}

/// On each emulated cloud: plain and GZIP shards indexed from the bucket,
/// their indexes written to a prefix of it (to a local folder for gs://,
/// whose emulator takes no object_store writes), loaded back and read
/// through; a global shuffle over them reads every record once.
#[cfg(feature = "cloud")]
#[test]
#[ignore = "needs emulators: scripts/emulators.sh (scripts/test.sh starts them)"]
fn indexes_of_cloud_shards_read_every_record() {
    use crate::emulators::{bucket, require_emulators, unique_prefix, upload};
    require_emulators();
    let local = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for scheme in ["gs", "s3", "az"] {
        let base = format!("{scheme}://{}", bucket());
        let prefix = unique_prefix("index");
        for c in [Compression::None, Compression::Gzip] {
            let sub = local.path().join(format!("{scheme}-{c}"));
            std::fs::create_dir_all(&sub).unwrap();
            let files = shards(&sub, &[90, 35], c);
            let want = sequential(&files);
            let urls: Vec<String> = files
                .iter()
                .map(|f| {
                    let key = format!("{prefix}/{c}/{}", f.rsplit('/').next().unwrap());
                    rt.block_on(upload(&base, &key, &std::fs::read(f).unwrap()));
                    format!("{base}/{key}")
                })
                .collect();
            let dir = match scheme {
                "gs" => sub.join("idx").display().to_string(),
                _ => format!("{base}/{prefix}/idx-{c}"),
            };
            let opts = BuildOptions {
                span: 16 << 10,
                ..BuildOptions::default()
            };
            for url in &urls {
                let idx = build(url, &opts).unwrap();
                save(&idx, &index_url(url, Some(&dir)), &Default::default()).unwrap();
                assert_eq!(
                    load(url, &index_url(url, Some(&dir)), &Default::default()).unwrap(),
                    idx
                );
            }
            let access = RandomAccess::open(
                &urls,
                &AccessOptions {
                    index: IndexOptions {
                        dir: Some(dir.clone()),
                        ..IndexOptions::default()
                    },
                    ..AccessOptions::default()
                },
            )
            .unwrap();
            let order: Vec<u64> = (0..want.len() as u64)
                .map(|k| k * 37 % want.len() as u64)
                .collect();
            for (k, (shard, r)) in access.get_many(&order).unwrap().iter().enumerate() {
                assert_eq!(
                    (*shard, r.offset, r.data.to_vec()),
                    want[order[k] as usize],
                    "{scheme} {c}"
                );
            }
            // The pipeline's global shuffle, by record and by block.
            for blocks in [None, Some(8192)] {
                let p = infeed::pipeline::Pipeline::from_files(urls.clone())
                    .unwrap()
                    .index_dir(&dir);
                let p = match blocks {
                    None => p.global_shuffle(),
                    Some(b) => p.global_shuffle_blocks(b),
                };
                let mut got: Vec<Vec<u8>> = p
                    .build_raw(16, false)
                    .unwrap()
                    .flat_map(|b| b.unwrap().into_records())
                    .map(|r| r.to_vec())
                    .collect();
                got.sort();
                let mut all: Vec<Vec<u8>> = want.iter().map(|w| w.2.clone()).collect();
                all.sort();
                assert_eq!(got, all, "{scheme} {c} {blocks:?}");
            }
        }
    }
}
