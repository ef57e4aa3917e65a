//! `infeed index`: infeed's indexes of the TensorFlow-written files in
//! testdata/ (plain, GZIP, ZLIB), in the `.infeed-index` folder beside them
//! or in a folder of the user's; read back through the library, they give
//! every record as sequential reading does.

use infeed::index::{AccessOptions, IndexOptions, RandomAccess, load};

use crate::support::run::infeed_in;
use crate::support::tfrecord::read_file;

#[test]
fn index_writes_an_index_per_shard_that_reads_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = [
        "testdata/examples.tfrecord",
        "testdata/examples.tfrecord.gz",
        "testdata/examples.tfrecord.zz",
        "testdata/lm-sample.tfrecord.gz",
    ];
    let out_dir = dir.path().join("idx");
    let mut args = vec![
        "index".to_owned(),
        "--output".to_owned(),
        out_dir.display().to_string(),
    ];
    args.extend(files.iter().map(|f| f.to_string()));
    let out = infeed_in(repo, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4);
    for (line, file) in lines.iter().zip(files) {
        let name = file.rsplit('/').next().unwrap();
        let want = read_file(repo.join(file));
        assert_eq!(
            *line,
            format!("{file}\t{}/{name}.index\t{}", out_dir.display(), want.len())
        );
        let index = out_dir.join(format!("{name}.index")).display().to_string();
        let shard = repo.join(file).display().to_string();
        // An index of the shard by this name from another folder: the name
        // and content match, so it loads.
        assert_eq!(
            load(&shard, &index, &Default::default()).unwrap().len(),
            want.len() as u64
        );
        let access = RandomAccess::open(
            &[shard],
            &AccessOptions {
                index: IndexOptions {
                    dir: Some(out_dir.display().to_string()),
                    ..IndexOptions::default()
                },
                ..AccessOptions::default()
            },
        )
        .unwrap();
        let all: Vec<u64> = (0..want.len() as u64).rev().collect();
        let got = access.get_many(&all).unwrap();
        for (k, (_, r)) in got.iter().enumerate() {
            assert_eq!(r, &want[want.len() - 1 - k], "{file}");
        }
    }
}

#[test]
fn index_of_a_corrupt_shard_names_the_record() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = infeed_in(
        repo,
        &[
            "index",
            "testdata/corrupt.tfrecord",
            "--output",
            &dir.path().display().to_string(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(
            "infeed: testdata/corrupt.tfrecord: record 2 at byte 117: data CRC mismatch"
        ),
        "{stderr}"
    );
}

/// By default an index goes into `.infeed-index` beside its shard (a DALI
/// index too), where no glob of the shards reaches it; a pipeline's reader
/// finds it there.
#[test]
fn index_writes_into_a_hidden_folder_beside_the_shards_by_default() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    for name in ["examples.tfrecord", "examples.tfrecord.gz"] {
        std::fs::copy(repo.join("testdata").join(name), dir.path().join(name)).unwrap();
    }
    let glob = format!("{}/examples.tfrecord*", dir.path().display());
    let out = infeed_in(repo, &["index", &glob]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let want = read_file(repo.join("testdata/examples.tfrecord"));
    let d = dir.path().display();
    assert_eq!(
        stdout,
        format!(
            "{d}/examples.tfrecord\t{d}/.infeed-index/examples.tfrecord.index\t{n}\n\
             {d}/examples.tfrecord.gz\t{d}/.infeed-index/examples.tfrecord.gz.index\t{n}\n",
            n = want.len()
        )
    );
    let out = infeed_in(
        repo,
        &["index", "--dali", &format!("{d}/examples.tfrecord")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        dir.path()
            .join(".infeed-index/examples.tfrecord.idx")
            .exists()
    );
    // Beside the shards: the shards alone.
    assert_eq!(
        crate::support::listing(dir.path()),
        [".infeed-index", "examples.tfrecord", "examples.tfrecord.gz"]
    );
    let shards: Vec<String> = ["examples.tfrecord", "examples.tfrecord.gz"]
        .iter()
        .map(|n| format!("{d}/{n}"))
        .collect();
    let found = infeed::index::load_or_build(&shards, &IndexOptions::default()).unwrap();
    for (shard, (idx, how)) in shards.iter().zip(found) {
        assert_eq!(idx.len(), want.len() as u64);
        assert_eq!(
            how,
            infeed::index::Found::Loaded {
                index: infeed::index::index_url(shard, None)
            }
        );
    }
}
