//! The `infeed` binary: cat/count/verify, inspect/index, bench and its config.

mod basics;
mod bench_compare;
mod bench_config;
mod bench_output;
mod inspect;
mod manifest;
mod masks;
mod normalize;
mod settings;
mod tfds;
mod tokenize;
