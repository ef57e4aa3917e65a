//! Framing + CRC throughput: plain deframing from memory, GZIP reading,
//! a memcpy baseline, and `RecordReader` over a page-cached file against
//! plain reads of the same file.
//!
//! Data: ~64 MB of lm-like records (1..4 KB each), generated at bench time:
//! random bytes (the brief's "lm-like" payload; incompressible, so GZIP
//! stores it) and, for a realistic GZIP case, token-id-like varints that
//! compress about 1.1×. Throughput is always counted in uncompressed bytes.
//!
//! Run: `cargo bench --bench framing` (and `taskset -c 0 cargo bench --bench framing`).

use std::hint::black_box;
use std::io::{Cursor, Read};
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use infeed::record::{Compression, Deframer, ReadOptions, RecordReader, RecordWriter};

const TOTAL: usize = 64 << 20;
const CHUNK: usize = 1 << 20;

/// xorshift64*: deterministic and fast.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Records of 1..4 KB, ~64 MB in all; `fill` writes one record's payload.
fn records(mut fill: impl FnMut(&mut Rng, usize, &mut Vec<u8>)) -> Vec<Vec<u8>> {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut out = Vec::new();
    let mut total = 0;
    while total < TOTAL {
        let len = 1024 + (rng.next() % 3072) as usize;
        let mut r = Vec::with_capacity(len + 8);
        fill(&mut rng, len, &mut r);
        r.truncate(len);
        total += len + 16;
        out.push(r);
    }
    out
}

fn random_bytes(rng: &mut Rng, len: usize, r: &mut Vec<u8>) {
    while r.len() < len {
        r.extend_from_slice(&rng.next().to_le_bytes());
    }
}

/// Varint token ids, log-uniform (Zipf-like) over a 32k vocabulary.
fn token_varints(rng: &mut Rng, len: usize, r: &mut Vec<u8>) {
    let ln_vocab = 32_000f64.ln();
    while r.len() < len {
        let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        let mut id = (u * ln_vocab).exp() as u64;
        while id >= 0x80 {
            r.push((id as u8) | 0x80);
            id >>= 7;
        }
        r.push(id as u8);
    }
}

fn encode(records: &[Vec<u8>], c: Compression) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), c);
    for r in records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap()
}

fn read_all<R: Read>(r: RecordReader<R>) -> usize {
    r.map(|r| r.unwrap().data.len()).sum()
}

fn bench(c: &mut Criterion) {
    let records_random = records(random_bytes);
    let plain = encode(&records_random, Compression::None);
    let gzip = encode(&records_random, Compression::Gzip);
    let records_tokens = records(token_varints);
    let plain_tokens = encode(&records_tokens, Compression::None);
    let gzip_tokens = encode(&records_tokens, Compression::Gzip);
    // The plain stream pre-split into the 1 MiB chunks a reader would push.
    let chunks: Vec<Bytes> = plain.chunks(CHUNK).map(Bytes::copy_from_slice).collect();
    eprintln!(
        "framing bench: {} random records, {} bytes plain, {} gzip; {} token records, {} bytes plain, {} gzip",
        records_random.len(),
        plain.len(),
        gzip.len(),
        records_tokens.len(),
        plain_tokens.len(),
        gzip_tokens.len(),
    );

    let mut g = c.benchmark_group("framing");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Bytes(plain.len() as u64));

    // (a) Framing + both CRCs, from memory, 1 MiB chunks.
    g.bench_function("a_deframe_crc_memory", |b| {
        let opts = ReadOptions::default();
        b.iter(|| {
            let mut d = Deframer::new("mem", &opts);
            let mut bytes = 0usize;
            for chunk in &chunks {
                d.push(chunk.clone());
                while let Some(r) = d.next_record().unwrap() {
                    bytes += r.data.len();
                }
            }
            d.finish().unwrap();
            black_box(bytes)
        })
    });

    // (b) GZIP: decompress + deframe + CRCs (random payload: stored blocks).
    g.bench_function("b_gzip_read_random", |b| {
        let opts = ReadOptions::default();
        b.iter(|| {
            black_box(read_all(RecordReader::new(
                Cursor::new(&gzip[..]),
                "mem.gz",
                Compression::Gzip,
                &opts,
            )))
        })
    });

    // (c) memcpy of the same bytes.
    g.bench_function("c_memcpy_baseline", |b| {
        let mut dst = vec![0u8; plain.len()];
        b.iter(|| {
            dst.copy_from_slice(black_box(&plain));
            black_box(dst.as_ptr());
        })
    });

    // (d) From a page-cached file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.tfrecord");
    std::fs::write(&path, &plain).unwrap();
    black_box(std::fs::read(&path).unwrap());

    g.bench_function("d_file_record_reader", |b| {
        let opts = ReadOptions::default();
        b.iter(|| black_box(read_all(RecordReader::open(&path, &opts).unwrap())))
    });

    // A fresh 64 MB Vec per read: page faults dominate.
    g.bench_function("d_file_std_fs_read", |b| {
        b.iter(|| black_box(std::fs::read(&path).unwrap().len()))
    });

    // The page-cache floor: the whole file into a reused buffer (no faults).
    g.bench_function("d_file_read_reused_buffer", |b| {
        let mut buf = vec![0u8; plain.len()];
        b.iter(|| {
            let mut f = std::fs::File::open(&path).unwrap();
            f.read_exact(&mut buf).unwrap();
            black_box(buf.as_ptr())
        })
    });

    // What RecordReader reads with: fresh 1 MiB buffers, no framing.
    g.bench_function("d_file_read_1MiB_chunks", |b| {
        b.iter(|| {
            let mut f = std::fs::File::open(&path).unwrap();
            let mut total = 0;
            loop {
                let mut v = Vec::with_capacity(CHUNK);
                let got = (&mut f).take(CHUNK as u64).read_to_end(&mut v).unwrap();
                total += got;
                black_box(Bytes::from(v));
                if got < CHUNK {
                    break;
                }
            }
            black_box(total)
        })
    });

    // (b') GZIP on compressible token-like payloads.
    g.throughput(Throughput::Bytes(plain_tokens.len() as u64));
    g.bench_function("b_gzip_read_tokens", |b| {
        let opts = ReadOptions::default();
        b.iter(|| {
            black_box(read_all(RecordReader::new(
                Cursor::new(&gzip_tokens[..]),
                "mem.gz",
                Compression::Gzip,
                &opts,
            )))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
