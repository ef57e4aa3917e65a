//! The floor beside the image pipelines of `scripts/compare-images.sh`:
//! libjpeg-turbo decoding whole JPEGs, nothing else, on the same files.
//!
//! ```sh
//! cargo build --release --example jpeg_floor --features images
//! taskset -c 0 target/release/examples/jpeg_floor 'bench-data/scale-1/jpeg/*.tfrecord' [THREADS] [ROUNDS]
//! ```
//!
//! Reads every record of the shards (plain TFRecord files, a glob), takes the
//! bytes of each one's `image/encoded` feature into memory (untimed), then
//! decodes each JPEG whole, at full scale, to RGB through TurboJPEG with
//! TensorFlow's settings (fast integer IDCT, fancy upsampling), ROUNDS times
//! (default 2) after one untimed round, on THREADS threads (default 1), each
//! decoding its share of the pictures with its own handle into a buffer it
//! reuses. No crop, no resize, no copy out: the work every pipeline that
//! decodes these pictures whole must do. Prints one JSON line;
//! `images_per_sec_per_thread` is the per-core rate when each thread has a
//! core of its own.

use std::ffi::c_int;
use std::process::ExitCode;
use std::time::Instant;

use infeed::example::proto::{Example, feature::Kind};
use infeed::record::{ReadOptions, RecordReader};
use prost::Message;
use turbojpeg_sys as tj;

const FEATURE: &str = "image/encoded";

/// The JPEG bytes of every record of `paths`.
fn load(paths: &[String]) -> Result<Vec<Vec<u8>>, String> {
    let mut images = Vec::new();
    for path in paths {
        let reader = RecordReader::open(path, &ReadOptions::default())
            .map_err(|e| format!("{path}: {e}"))?;
        for record in reader {
            let record = record.map_err(|e| format!("{path}: {e}"))?;
            let example = Example::decode(&record.data[..]).map_err(|e| format!("{path}: {e}"))?;
            let bytes = example
                .features
                .and_then(|mut f| f.feature.remove(FEATURE))
                .and_then(|f| match f.kind {
                    Some(Kind::BytesList(mut list)) if !list.value.is_empty() => {
                        Some(list.value.swap_remove(0))
                    }
                    _ => None,
                })
                .ok_or_else(|| format!("{path}: a record without {FEATURE}"))?;
            images.push(bytes);
        }
    }
    Ok(images)
}

/// Decodes `images` whole to RGB, `rounds` times after a warm-up; returns
/// the pixels decoded in the timed rounds.
fn decode_all(images: &[&Vec<u8>], rounds: usize, start: &std::sync::Barrier) -> u64 {
    // SAFETY: a fresh decompressor, used by this thread alone and destroyed
    // at the end; every call passes it live, `data` outlives each call and
    // `out` holds the `w * h * 3` bytes written at pitch `w * 3`.
    unsafe {
        let handle = tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as c_int);
        assert!(!handle.is_null(), "tj3Init");
        tj::tj3Set(handle, tj::TJPARAM_TJPARAM_FASTDCT as c_int, 1);
        let mut out = Vec::new();
        let mut pixels = 0u64;
        for round in 0..=rounds {
            if round == 1 {
                start.wait();
            }
            for data in images {
                let rc = tj::tj3DecompressHeader(handle, data.as_ptr(), data.len() as _);
                assert_eq!(rc, 0, "tj3DecompressHeader");
                let w = tj::tj3Get(handle, tj::TJPARAM_TJPARAM_JPEGWIDTH as c_int) as usize;
                let h = tj::tj3Get(handle, tj::TJPARAM_TJPARAM_JPEGHEIGHT as c_int) as usize;
                out.resize(w * h * 3, 0);
                let rc = tj::tj3Decompress8(
                    handle,
                    data.as_ptr(),
                    data.len() as _,
                    out.as_mut_ptr(),
                    (w * 3) as c_int,
                    tj::TJPF_TJPF_RGB as c_int,
                );
                assert_eq!(rc, 0, "tj3Decompress8");
                if round > 0 {
                    pixels += (w * h) as u64;
                }
            }
        }
        tj::tj3Destroy(handle);
        pixels
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(pattern) = args.first() else {
        eprintln!("usage: jpeg_floor 'GLOB' [THREADS] [ROUNDS]");
        return ExitCode::from(2);
    };
    let threads: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2).max(1);
    let mut paths: Vec<String> = match glob::glob(pattern) {
        Ok(found) => found
            .filter_map(Result::ok)
            .map(|p| p.display().to_string())
            .collect(),
        Err(e) => {
            eprintln!("jpeg_floor: {pattern}: {e}");
            return ExitCode::from(2);
        }
    };
    paths.sort();
    let images = match load(&paths) {
        Ok(images) if !images.is_empty() => images,
        Ok(_) => {
            eprintln!("jpeg_floor: no records in {pattern}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("jpeg_floor: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Thread t decodes pictures t, t + threads, …
    let shares: Vec<Vec<&Vec<u8>>> = (0..threads)
        .map(|t| images.iter().skip(t).step_by(threads).collect())
        .collect();
    let start = std::sync::Barrier::new(threads + 1);
    let (pixels, seconds) = std::thread::scope(|s| {
        let workers: Vec<_> = shares
            .iter()
            .map(|share| s.spawn(|| decode_all(share, rounds, &start)))
            .collect();
        start.wait();
        let t0 = Instant::now();
        let pixels: u64 = workers
            .into_iter()
            .map(|w| w.join().expect("decoder thread"))
            .sum();
        (pixels, t0.elapsed().as_secs_f64())
    });
    let decoded = (images.len() * rounds) as f64;
    let bytes: usize = images.iter().map(Vec::len).sum();
    println!(
        "{{\"side\":\"libjpeg-turbo\",\"images\":{},\"threads\":{threads},\"rounds\":{rounds},\
         \"seconds\":{seconds},\"images_per_sec\":{},\"images_per_sec_per_thread\":{},\
         \"megapixels_per_sec\":{},\"mean_encoded_bytes\":{}}}",
        images.len(),
        decoded / seconds,
        decoded / seconds / threads as f64,
        pixels as f64 / seconds / 1e6,
        bytes / images.len(),
    );
    ExitCode::SUCCESS
}
