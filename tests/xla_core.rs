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
