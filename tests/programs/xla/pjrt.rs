//! The PJRT layer on the CPU plugin: load, compile, upload, execute, read back.
//! Needs the plugin: `scripts/fetch-pjrt.sh` (or PJRT_PLUGIN_PATH); with the
//! `xla` feature on and no plugin these tests fail, never pass silently.
#![cfg(feature = "xla")]

use infeed::batch::{BufferPool, Tensor, TensorType};
use infeed::xla::{ArrayType, Client, ElementType, Plugin, Program, XlaError};

fn client() -> Client {
    let plugin = Plugin::load_default().unwrap_or_else(|e| {
        panic!("the xla tests need the CPU plugin (run scripts/fetch-pjrt.sh): {e}")
    });
    Client::new(plugin, &Default::default()).expect("CPU client")
}

const ADD_ONE: &str = r#"
func.func @main(%x: tensor<2x3xi32>) -> tensor<2x3xi32> {
  %one = stablehlo.constant dense<1> : tensor<2x3xi32>
  %y = stablehlo.add %x, %one : tensor<2x3xi32>
  return %y : tensor<2x3xi32>
}
"#;

#[test]
fn one_cpu_device_and_version() {
    let c = client();
    assert_eq!(c.platform(), "cpu");
    assert_eq!(c.device_count(), 1);
    assert_eq!(c.plugin().api_version(), (0, 81));
}

#[test]
fn cpu_device_count_is_honoured() {
    let plugin = Plugin::load_default().unwrap();
    let options = infeed::xla::ClientOptions::default().cpu_device_count(3);
    let c = Client::new(plugin, &options).unwrap();
    assert_eq!(c.device_count(), 3);
    // Programs still compile for, and run on, the first device.
    let exe = c.compile(&Program::from_mlir(ADD_ONE).unwrap()).unwrap();
    let x = c.upload_copy::<i32>("x", &[2, 3], &[7; 6]).unwrap();
    assert_eq!(
        exe.execute(&[&x]).unwrap()[0].to_vec::<i32>().unwrap(),
        [8; 6]
    );
}

#[test]
fn add_one_round_trip() {
    let c = client();
    let exe = c.compile(&Program::from_mlir(ADD_ONE).unwrap()).unwrap();
    assert_eq!(c.compile_count(), 1);
    let x = Tensor::from_slice::<i32>(&[2, 3], &[1, 2, 3, -4, i32::MAX - 1, 0]).unwrap();
    let buf = c.upload("x", x).unwrap();
    let out = exe.execute(&[&buf]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].array_type(),
        &ArrayType::new(ElementType::S32, &[2, 3])
    );
    assert_eq!(out[0].to_vec::<i32>().unwrap(), [2, 3, 4, -3, i32::MAX, 1]);
}

const IDENTITY4: &str = r#"
func.func @main(%a: tensor<3xi64>, %b: tensor<2x2xf32>, %c: tensor<5xui8>, %d: tensor<i32>)
    -> (tensor<3xi64>, tensor<2x2xf32>, tensor<5xui8>, tensor<i32>) {
  return %a, %b, %c, %d : tensor<3xi64>, tensor<2x2xf32>, tensor<5xui8>, tensor<i32>
}
"#;

#[test]
fn round_trip_exact_bytes_every_type() {
    let c = client();
    let exe = c.compile(&Program::from_mlir(IDENTITY4).unwrap()).unwrap();
    let a = Tensor::from_slice::<i64>(&[3], &[i64::MIN, -1, i64::MAX]).unwrap();
    // A NaN with a payload, -0.0 and a subnormal: bits must survive.
    let floats = [f32::from_bits(0x7fc0_1234), -0.0, f32::from_bits(1), 1.5e38];
    let b = Tensor::from_slice::<f32>(&[2, 2], &floats).unwrap();
    let cc = Tensor::from_slice::<u8>(&[5], &[0, 1, 127, 128, 255]).unwrap();
    let d = Tensor::from_slice::<i32>(&[], &[-7]).unwrap();
    let inputs = [a, b, cc, d];
    let bufs: Vec<_> = inputs
        .iter()
        .map(|t| c.upload("t", t.clone()).unwrap())
        .collect();
    let refs: Vec<_> = bufs.iter().collect();
    let out = exe.execute(&refs).unwrap();
    for (t, o) in inputs.iter().zip(&out) {
        let back = o.to_tensor().unwrap();
        assert_eq!(back.dtype(), t.dtype());
        assert_eq!(back.shape(), t.shape());
        assert_eq!(back.bytes(), t.bytes());
    }
    // Also the uploaded buffers themselves read back exactly.
    for (t, b) in inputs.iter().zip(&bufs) {
        assert_eq!(b.to_tensor().unwrap().bytes(), t.bytes());
    }
}

#[test]
fn upload_is_zero_copy_and_pool_gets_memory_back_after_device() {
    let c = client();
    let pool = BufferPool::default();
    let t = Tensor::zeros(TensorType::I32, &[64, 128], &pool).unwrap();
    let host = t.data().as_ptr() as usize;
    let buf = c.upload("ids", t).unwrap();
    assert!(buf.holds_host_memory());
    // The CPU device reads the pooled buffer in place.
    assert_eq!(buf.device_address().unwrap(), host);
    assert_eq!(pool.stats().kept_buffers, 0);
    drop(buf);
    // The host memory goes back only once the runtime lets go of it.
    let start = std::time::Instant::now();
    while c.pending_host_buffers() > 0 && start.elapsed().as_secs() < 10 {
        c.release_host_buffers();
        std::thread::yield_now();
    }
    assert_eq!(c.pending_host_buffers(), 0);
    let s = pool.stats();
    assert_eq!((s.returned, s.kept_buffers), (1, 1));
}

#[test]
fn upload_copy_and_repeated_execution() {
    let c = client();
    let exe = c.compile(&Program::from_mlir(ADD_ONE).unwrap()).unwrap();
    let mut x = c.upload_copy::<i32>("x", &[2, 3], &[0; 6]).unwrap();
    assert!(!x.holds_host_memory());
    for _ in 0..5 {
        let mut out = exe.execute(&[&x]).unwrap();
        x = out.pop().unwrap();
    }
    assert_eq!(x.to_vec::<i32>().unwrap(), [5; 6]);
    assert_eq!(c.compile_count(), 1);
    let err = c.upload_copy::<i32>("x", &[2, 3], &[0; 5]).unwrap_err();
    assert!(
        matches!(
            err,
            XlaError::HostSize {
                expected_bytes: 24,
                actual_bytes: 20,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn shape_mismatch_names_both_shapes() {
    let c = client();
    let exe = c.compile(&Program::from_mlir(ADD_ONE).unwrap()).unwrap();
    let x = c.upload_copy::<i32>("input_ids", &[2, 4], &[0; 8]).unwrap();
    let err = exe.execute(&[&x]).unwrap_err();
    assert!(
        matches!(&err, XlaError::ArgumentShape { index: 0, name, expected, actual }
            if name == "input_ids" && expected == "tensor<2x3xi32>" && actual == "tensor<2x4xi32>"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "argument 0 (input_ids) is tensor<2x4xi32> but parameter 0 of the program is tensor<2x3xi32>: shapes differ"
    );
}

#[test]
fn dtype_mismatch_names_both_types() {
    let c = client();
    let exe = c.compile(&Program::from_mlir(ADD_ONE).unwrap()).unwrap();
    let x = c.upload_copy::<i64>("input_ids", &[2, 3], &[0; 6]).unwrap();
    let err = exe.execute(&[&x]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "argument 0 (input_ids) is tensor<2x3xi64> but parameter 0 of the program is tensor<2x3xi32>: element types differ"
    );
    assert!(matches!(err, XlaError::ArgumentType { index: 0, .. }));
    let err = exe.execute(&[&x, &x]).unwrap_err();
    assert!(
        matches!(
            err,
            XlaError::ArgumentCount {
                expected: 1,
                actual: 2,
                ..
            }
        ),
        "{err}"
    );
    let f = c.upload_copy::<f32>("f", &[2, 3], &[0.0; 6]).unwrap();
    let err = f.to_vec::<i32>().unwrap_err();
    assert!(matches!(err, XlaError::HostType { .. }), "{err}");
}

#[test]
fn bad_program_carries_the_plugins_message() {
    let c = client();
    let bad = "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  %y = stablehlo.frobnicate %x : tensor<2xf32>\n  return %y : tensor<2xf32>\n}";
    let err = c.compile(&Program::from_mlir(bad).unwrap()).unwrap_err();
    match &err {
        XlaError::Pjrt { call, message, .. } => {
            assert_eq!(*call, "PJRT_Client_Compile");
            assert!(message.contains("frobnicate"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.compile_count(), 0);
}

#[test]
fn missing_plugin_file() {
    let err = Plugin::load("/nonexistent/dir/pjrt_plugin.so").unwrap_err();
    assert!(
        matches!(&err, XlaError::PluginNotFound { path } if path.to_str() == Some("/nonexistent/dir/pjrt_plugin.so"))
    );
    assert!(err.to_string().contains("PJRT_PLUGIN_PATH"), "{err}");
}

#[test]
fn non_library_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not_a_plugin.so");
    std::fs::write(&path, b"this is not an ELF file").unwrap();
    let err = Plugin::load(&path).unwrap_err();
    assert!(matches!(&err, XlaError::PluginLoad { .. }), "{err:?}");
    assert!(err.to_string().contains("not_a_plugin.so"), "{err}");
}

#[test]
fn library_without_pjrt_api() {
    // The C library this test process already has loaded: a real shared
    // library that is not a PJRT plugin.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .expect("libc in /proc/self/maps");
    let err = Plugin::load(libc).unwrap_err();
    assert!(
        matches!(&err, XlaError::NotAPlugin { message, .. } if message.contains("GetPjrtApi")),
        "{err:?}"
    );
}
