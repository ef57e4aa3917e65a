//! Writes ImageNet-style JPEG shards without TensorFlow: `tf.train.Example`s
//! of `image/encoded` (a JPEG, quality 90, 4:2:0) and `image/class/label`
//! (an int64 in 0..1000), the features ImageNet's TFRecords hold:
//!
//! ```sh
//! cargo run --release --features images --example jpeg_shards -- OUT_DIR [--count 2000] [--shards 4] [--size 400x300]
//! ```
//!
//! The pictures are examples/common/pictures.rs's (gradients, discs and
//! boxes, noise), seeded by their index, so a rerun writes the same bytes.
//! Shards are `OUT_DIR/train-0000i-of-0000n.tfrecord`; prints their paths.

#[path = "common/pictures.rs"]
mod pictures;

use std::collections::HashMap;

use infeed::example::proto::{BytesList, Example, Feature, Features, Int64List, feature::Kind};
use infeed::record::{Compression, RecordWriter};
use prost::Message;

fn value(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn record(index: u64, w: usize, h: usize) -> Vec<u8> {
    let jpeg = pictures::jpeg(w, h, &pictures::picture(w, h, index + 1), false);
    let feature = |kind| Feature { kind: Some(kind) };
    let features = HashMap::from([
        (
            "image/encoded".to_owned(),
            feature(Kind::BytesList(BytesList { value: vec![jpeg] })),
        ),
        (
            "image/class/label".to_owned(),
            feature(Kind::Int64List(Int64List {
                value: vec![(index * 7919 % 1000) as i64],
            })),
        ),
    ]);
    Example {
        features: Some(Features { feature: features }),
    }
    .encode_to_vec()
}

fn main() -> std::io::Result<()> {
    let Some(out) = std::env::args().nth(1).filter(|a| !a.starts_with("--")) else {
        eprintln!("usage: jpeg_shards OUT_DIR [--count N] [--shards S] [--size WxH]");
        std::process::exit(2);
    };
    let count: u64 = value("--count", "2000").parse().expect("--count");
    let shards: u64 = value("--shards", "4")
        .parse::<u64>()
        .expect("--shards")
        .max(1);
    let size = value("--size", "400x300");
    let (w, h) = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .expect("--size WxH");
    std::fs::create_dir_all(&out)?;
    for shard in 0..shards {
        let path = format!("{out}/train-{shard:05}-of-{shards:05}.tfrecord");
        let mut writer = RecordWriter::create(&path, Compression::None)?;
        for index in (shard..count).step_by(shards as usize) {
            writer.write_record(&record(index, w, h))?;
        }
        writer.finish()?;
        println!("{path}");
    }
    Ok(())
}
