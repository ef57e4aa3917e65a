//! The PJRT client (one per device thread), compilation and execution.

use std::cell::{Cell, RefCell};
use std::ffi::c_char;
use std::rc::Rc;
use std::time::Instant;

use prost::Message;

use super::buffer::DeviceBuffer;
use super::device::ClientInner;
use super::dma::{Dma, DmaMap, DmaStatus};
use super::error::XlaError;
use super::event::{Completion, RawEvent};
use super::plugin::{Plugin, lossy};
use super::program::{ArrayType, ElementType, Program, Signature};
use super::sys;
use crate::batch::{Element, Tensor};

/// The value of a client create option.
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    Str(String),
    Int(i64),
    IntList(Vec<i64>),
    Float(f32),
    Bool(bool),
}

/// How to create a [`Client`]: [`ClientOptions::default`] and the setters
/// (`#[non_exhaustive]`; the fields stay public).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ClientOptions {
    /// Devices of a CPU client (`cpu_device_count`). The CPU plugin makes
    /// several unless told; a training loop on one device wants one. `None`
    /// leaves it to the plugin. A plugin that does not know the option (GPU,
    /// TPU) is asked again without it when it was not set explicitly.
    pub cpu_device_count: Option<i64>,
    /// Other plugin-specific create options, passed as they are.
    pub options: Vec<(String, OptionValue)>,
    /// Whether pooled batch buffers are mapped for DMA (pinned) on their
    /// first upload: by default where the device is not the CPU and the
    /// plugin offers `PJRT_Client_DmaMap`.
    pub dma_map: DmaMap,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            cpu_device_count: Some(1),
            options: Vec::new(),
            dma_map: DmaMap::Auto,
        }
    }
}

impl ClientOptions {
    /// Sets [`cpu_device_count`](Self::cpu_device_count): `None` leaves it
    /// to the plugin.
    pub fn cpu_device_count(mut self, devices: impl Into<Option<i64>>) -> Self {
        self.cpu_device_count = devices.into();
        self
    }

    /// Sets [`dma_map`](Self::dma_map).
    pub fn dma_map(mut self, mode: DmaMap) -> Self {
        self.dma_map = mode;
        self
    }

    /// Adds a plugin-specific create option (see
    /// [`options`](Self::options)).
    pub fn option(mut self, name: impl Into<String>, value: OptionValue) -> Self {
        self.options.push((name.into(), value));
        self
    }
}

/// A PJRT client on one device: compiles programs and moves data.
///
/// `!Send`: PJRT handles belong to the thread that made them.
pub struct Client {
    pub(crate) inner: Rc<ClientInner>,
}

impl Client {
    /// Moves `tensor` to the device without copying when the plugin can
    /// alias host memory (the CPU plugin can: the tensor is 64-byte
    /// aligned), else by an asynchronous copy. Either way the tensor is kept
    /// alive (not returned to its pool) until the device is done with it.
    pub fn upload(&self, name: &str, tensor: Tensor) -> Result<DeviceBuffer, XlaError> {
        DeviceBuffer::upload(&self.inner, name, tensor)
    }

    /// Copies `values` (row-major, `dims`) to the device; the slice is free
    /// again when this returns.
    pub fn upload_copy<T: Element>(
        &self,
        name: &str,
        dims: &[usize],
        values: &[T],
    ) -> Result<DeviceBuffer, XlaError> {
        DeviceBuffer::upload_copy(&self.inner, name, dims, values)
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("platform", &self.inner.platform)
            .field("devices", &self.inner.device_count)
            .finish()
    }
}

/// Builds the `PJRT_NamedValue`s of `options`; the values point into
/// `options`, which must outlive their use.
fn named_values(options: &[(String, OptionValue)]) -> Vec<sys::PJRT_NamedValue> {
    options
        .iter()
        .map(|(name, value)| {
            let mut v = sys::PJRT_NamedValue {
                struct_size: sys::PJRT_NamedValue_STRUCT_SIZE as usize,
                name: name.as_ptr().cast::<c_char>(),
                name_size: name.len(),
                value_size: 1,
                ..Default::default()
            };
            match value {
                OptionValue::Str(s) => {
                    v.type_ = sys::PJRT_NamedValue_kString;
                    v.__bindgen_anon_1.string_value = s.as_ptr().cast::<c_char>();
                    v.value_size = s.len();
                }
                OptionValue::Int(i) => {
                    v.type_ = sys::PJRT_NamedValue_kInt64;
                    v.__bindgen_anon_1.int64_value = *i;
                }
                OptionValue::IntList(l) => {
                    v.type_ = sys::PJRT_NamedValue_kInt64List;
                    v.__bindgen_anon_1.int64_array_value = l.as_ptr();
                    v.value_size = l.len();
                }
                OptionValue::Float(f) => {
                    v.type_ = sys::PJRT_NamedValue_kFloat;
                    v.__bindgen_anon_1.float_value = *f;
                }
                OptionValue::Bool(b) => {
                    v.type_ = sys::PJRT_NamedValue_kBool;
                    v.__bindgen_anon_1.bool_value = *b;
                }
            }
            v
        })
        .collect()
}

fn create_raw(
    plugin: &'static Plugin,
    options: &[(String, OptionValue)],
) -> Result<*mut sys::PJRT_Client, XlaError> {
    let values = named_values(options);
    let mut args = sys::PJRT_Client_Create_Args {
        struct_size: sys::PJRT_Client_Create_Args_STRUCT_SIZE as usize,
        create_options: values.as_ptr(),
        num_options: values.len(),
        ..Default::default()
    };
    // SAFETY: `args` is fully initialised; `values` and the strings and
    // lists they point into (`options`) outlive the call; no key-value
    // callbacks (single process).
    unsafe { pjrt_call!(plugin, PJRT_Client_Create, &mut args) }?;
    Ok(args.client)
}

impl Client {
    /// A client of `plugin` with `options`.
    pub fn new(plugin: &'static Plugin, options: &ClientOptions) -> Result<Self, XlaError> {
        let mut all = options.options.clone();
        if let Some(n) = options.cpu_device_count {
            all.push(("cpu_device_count".into(), OptionValue::Int(n)));
        }
        let raw = match create_raw(plugin, &all) {
            // A non-CPU plugin may refuse `cpu_device_count`: retry without
            // it, unless the caller asked for it explicitly.
            Err(XlaError::Pjrt { .. })
                if options.cpu_device_count == ClientOptions::default().cpu_device_count =>
            {
                create_raw(plugin, &options.options)?
            }
            other => other?,
        };
        let mut inner = ClientInner {
            plugin,
            raw,
            device: std::ptr::null_mut(),
            device_count: 0,
            platform: String::new(),
            compiles: Cell::new(0),
            pending: RefCell::new(Vec::new()),
            origin: Instant::now(),
            dma: Dma::new(DmaMap::Never, ""),
        };
        let mut devices = sys::PJRT_Client_AddressableDevices_Args {
            struct_size: sys::PJRT_Client_AddressableDevices_Args_STRUCT_SIZE as usize,
            client: raw,
            ..Default::default()
        };
        // SAFETY: `raw` is the live client just created; args initialised.
        unsafe { pjrt_call!(plugin, PJRT_Client_AddressableDevices, &mut devices) }?;
        inner.device_count = devices.num_addressable_devices;
        if devices.num_addressable_devices == 0 || devices.addressable_devices.is_null() {
            return Err(XlaError::Pjrt {
                call: "PJRT_Client_AddressableDevices",
                code: "NOT_FOUND",
                message: "the client has no addressable device".into(),
            });
        }
        // SAFETY: the plugin returned a non-null array of
        // `num_addressable_devices` (> 0) devices owned by the client.
        inner.device = unsafe { *devices.addressable_devices };
        let mut name = sys::PJRT_Client_PlatformName_Args {
            struct_size: sys::PJRT_Client_PlatformName_Args_STRUCT_SIZE as usize,
            client: raw,
            ..Default::default()
        };
        // SAFETY: live client; the name lives as long as the client and is
        // copied at once.
        unsafe {
            pjrt_call!(plugin, PJRT_Client_PlatformName, &mut name)?;
            inner.platform = lossy(name.platform_name, name.platform_name_size);
        }
        inner.dma = Dma::new(options.dma_map, &inner.platform);
        Ok(Self {
            inner: Rc::new(inner),
        })
    }

    /// A client of the default plugin ([`Plugin::load_default`]) with one
    /// CPU device.
    pub fn cpu_default() -> Result<Self, XlaError> {
        Self::new(Plugin::load_default()?, &ClientOptions::default())
    }

    /// The plugin.
    pub fn plugin(&self) -> &'static Plugin {
        self.inner.plugin
    }

    /// The platform name (`cpu`, `cuda`, `tpu`, ...).
    pub fn platform(&self) -> &str {
        &self.inner.platform
    }

    /// Addressable devices; buffers and executions use the first.
    pub fn device_count(&self) -> usize {
        self.inner.device_count
    }

    /// What came of mapping batch buffers for DMA so far.
    pub fn dma_status(&self) -> DmaStatus {
        self.inner.dma.status()
    }

    /// Programs compiled by this client so far.
    pub fn compile_count(&self) -> u64 {
        self.inner.compiles.get()
    }

    /// Host buffers the device may still read (not yet back in their pool).
    pub fn pending_host_buffers(&self) -> usize {
        self.inner.pending.borrow().len()
    }

    /// Returns to their pools the host buffers the device is done with;
    /// how many. Uploads and executions call this too.
    pub fn release_host_buffers(&self) -> usize {
        self.inner.reap()
    }

    /// Compiles `program` for this client's first device.
    pub fn compile(&self, program: &Program) -> Result<Executable, XlaError> {
        let plugin = self.inner.plugin;
        let format = "mlir";
        let raw_program = sys::PJRT_Program {
            struct_size: sys::PJRT_Program_STRUCT_SIZE as usize,
            // The plugin only reads the code (`char*` for in/out use elsewhere).
            code: program.text().as_ptr().cast::<c_char>().cast_mut(),
            code_size: program.text().len(),
            format: format.as_ptr().cast::<c_char>(),
            format_size: format.len(),
            ..Default::default()
        };
        let options = compile_options();
        let mut args = sys::PJRT_Client_Compile_Args {
            struct_size: sys::PJRT_Client_Compile_Args_STRUCT_SIZE as usize,
            client: self.inner.raw,
            program: &raw_program,
            compile_options: options.as_ptr().cast::<c_char>(),
            compile_options_size: options.len(),
            ..Default::default()
        };
        // SAFETY: live client; the program text, format and options outlive
        // the call (the plugin does not keep them).
        unsafe { pjrt_call!(plugin, PJRT_Client_Compile, &mut args) }?;
        self.inner.compiles.set(self.inner.compiles.get() + 1);
        let mut exe = Executable {
            client: Rc::clone(&self.inner),
            raw: args.executable,
            signature: program.signature().clone(),
            outputs: Vec::new(),
        };
        let outputs = exe.query_outputs()?;
        if outputs.len() != program.signature().results.len() {
            return Err(XlaError::Program {
                message: format!(
                    "main declares {} results {} but the compiled program has {} outputs",
                    program.signature().results.len(),
                    program.signature(),
                    outputs.len()
                ),
            });
        }
        exe.outputs = outputs;
        Ok(exe)
    }
}

/// Serialized `xla.CompileOptionsProto` with one replica, one partition.
fn compile_options() -> Vec<u8> {
    /// `xla.ExecutableBuildOptionsProto`, the fields infeed sets.
    #[derive(Clone, PartialEq, Message)]
    struct ExecutableBuildOptionsProto {
        #[prost(int64, tag = "1")]
        device_ordinal: i64,
        #[prost(int64, tag = "4")]
        num_replicas: i64,
        #[prost(int64, tag = "5")]
        num_partitions: i64,
    }
    /// `xla.CompileOptionsProto`, the fields infeed sets.
    #[derive(Clone, PartialEq, Message)]
    struct CompileOptionsProto {
        #[prost(message, optional, tag = "3")]
        executable_build_options: Option<ExecutableBuildOptionsProto>,
    }
    CompileOptionsProto {
        executable_build_options: Some(ExecutableBuildOptionsProto {
            device_ordinal: -1,
            num_replicas: 1,
            num_partitions: 1,
        }),
    }
    .encode_to_vec()
}

/// A compiled program, loaded on its client's device.
pub struct Executable {
    client: Rc<ClientInner>,
    raw: *mut sys::PJRT_LoadedExecutable,
    signature: Signature,
    outputs: Vec<ArrayType>,
}

impl std::fmt::Debug for Executable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executable")
            .field("signature", &self.signature.to_string())
            .finish()
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        let mut args = sys::PJRT_LoadedExecutable_Destroy_Args {
            struct_size: sys::PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE as usize,
            executable: self.raw,
            ..Default::default()
        };
        // SAFETY: live executable owned by us, destroyed once; the client
        // outlives it (we hold its Rc).
        let _ = unsafe { pjrt_call!(self.client.plugin, PJRT_LoadedExecutable_Destroy, &mut args) };
    }
}

impl Executable {
    /// The program's parameter and result types.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The types of the outputs, as the compiled program reports them.
    pub fn output_types(&self) -> &[ArrayType] {
        &self.outputs
    }

    fn query_outputs(&self) -> Result<Vec<ArrayType>, XlaError> {
        let plugin = self.client.plugin;
        let mut get = sys::PJRT_LoadedExecutable_GetExecutable_Args {
            struct_size: sys::PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE as usize,
            loaded_executable: self.raw,
            ..Default::default()
        };
        // SAFETY: live loaded executable; args initialised.
        unsafe { pjrt_call!(plugin, PJRT_LoadedExecutable_GetExecutable, &mut get) }?;
        let exe = get.executable;
        let result = (|| {
            let mut types = sys::PJRT_Executable_OutputElementTypes_Args {
                struct_size: sys::PJRT_Executable_OutputElementTypes_Args_STRUCT_SIZE as usize,
                executable: exe,
                ..Default::default()
            };
            // SAFETY: `exe` is the live executable just obtained.
            unsafe { pjrt_call!(plugin, PJRT_Executable_OutputElementTypes, &mut types) }?;
            let mut dims = sys::PJRT_Executable_OutputDimensions_Args {
                struct_size: sys::PJRT_Executable_OutputDimensions_Args_STRUCT_SIZE as usize,
                executable: exe,
                ..Default::default()
            };
            // SAFETY: as above.
            unsafe { pjrt_call!(plugin, PJRT_Executable_OutputDimensions, &mut dims) }?;
            if types.num_output_types != dims.num_outputs {
                return Err(XlaError::Program {
                    message: format!(
                        "the plugin reports {} output types but {} output shapes",
                        types.num_output_types, dims.num_outputs
                    ),
                });
            }
            let n = types.num_output_types;
            // SAFETY: the plugin returned arrays of `n` types and `n` ranks
            // (null only when empty), owned by the executable, alive now.
            let (type_list, ranks) = unsafe {
                (
                    slice_or_empty(types.output_types, n),
                    slice_or_empty(dims.dim_sizes, n),
                )
            };
            let total: usize = ranks.iter().sum();
            // SAFETY: `dims` holds the sum of all ranks entries.
            let all_dims = unsafe { slice_or_empty(dims.dims, total) };
            let mut at = 0;
            type_list
                .iter()
                .zip(ranks)
                .map(|(&t, &rank)| {
                    let dtype = ElementType::from_pjrt(t).ok_or_else(|| XlaError::Program {
                        message: format!("an output has PJRT element type {t}, unknown to infeed"),
                    })?;
                    let shape = all_dims[at..at + rank]
                        .iter()
                        .map(|&d| usize::try_from(d).unwrap_or(0))
                        .collect::<Vec<_>>();
                    at += rank;
                    Ok(ArrayType::new(dtype, &shape))
                })
                .collect()
        })();
        let mut destroy = sys::PJRT_Executable_Destroy_Args {
            struct_size: sys::PJRT_Executable_Destroy_Args_STRUCT_SIZE as usize,
            executable: exe,
            ..Default::default()
        };
        // SAFETY: GetExecutable hands us an executable we must destroy; done
        // once, after its outputs were copied.
        unsafe { pjrt_call!(plugin, PJRT_Executable_Destroy, &mut destroy) }?;
        result
    }

    /// Checks arguments (name and type of each) against the parameters:
    /// the error names the argument and both types.
    pub fn check_args(&self, args: &[(&str, &ArrayType)]) -> Result<(), XlaError> {
        check_params(&self.signature, args)
    }

    /// Runs the program on `args` and waits for nothing: the outputs are
    /// device buffers that become ready when the device finishes, and the
    /// [`Completion`] says when that is.
    pub fn launch(
        &self,
        args: &[&DeviceBuffer],
    ) -> Result<(Vec<DeviceBuffer>, Completion), XlaError> {
        let named: Vec<(&str, &ArrayType)> =
            args.iter().map(|b| (b.name(), b.array_type())).collect();
        self.check_args(&named)?;
        if let Some(foreign) = args
            .iter()
            .position(|b| !Rc::ptr_eq(&b.client, &self.client))
        {
            return Err(XlaError::Program {
                message: format!("argument {foreign} belongs to another client"),
            });
        }
        self.client.reap();
        let plugin = self.client.plugin;
        let raw_args: Vec<*mut sys::PJRT_Buffer> = args.iter().map(|b| b.raw).collect();
        let arg_lists: [*const *mut sys::PJRT_Buffer; 1] = [raw_args.as_ptr()];
        let mut outputs: Vec<*mut sys::PJRT_Buffer> =
            vec![std::ptr::null_mut(); self.outputs.len()];
        let output_lists: [*mut *mut sys::PJRT_Buffer; 1] = [outputs.as_mut_ptr()];
        let mut complete: [*mut sys::PJRT_Event; 1] = [std::ptr::null_mut()];
        let mut options = sys::PJRT_ExecuteOptions {
            struct_size: sys::PJRT_ExecuteOptions_STRUCT_SIZE as usize,
            ..Default::default()
        };
        let mut exec = sys::PJRT_LoadedExecutable_Execute_Args {
            struct_size: sys::PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE as usize,
            executable: self.raw,
            options: &mut options,
            argument_lists: arg_lists.as_ptr(),
            num_devices: 1,
            num_args: raw_args.len(),
            output_lists: output_lists.as_ptr(),
            device_complete_events: complete.as_mut_ptr(),
            ..Default::default()
        };
        // SAFETY: live executable and argument buffers of the same client,
        // checked above against the program's parameters; the argument and
        // output lists are [1][num_args] and [1][num_outputs] arrays that
        // outlive the call; the plugin fills `outputs` and `complete`.
        unsafe { pjrt_call!(plugin, PJRT_LoadedExecutable_Execute, &mut exec) }?;
        let buffers = outputs
            .into_iter()
            .zip(&self.outputs)
            .enumerate()
            .map(|(i, (raw, ty))| {
                // SAFETY: each output is a fresh buffer the caller owns.
                unsafe {
                    DeviceBuffer::from_raw(
                        Rc::clone(&self.client),
                        raw,
                        ty.clone(),
                        format!("output {i}"),
                    )
                }
            })
            .collect::<Vec<_>>();
        // SAFETY: the plugin set a fresh event we own (or left it null).
        let event = unsafe { RawEvent::from_raw(plugin, complete[0]) }.ok_or(XlaError::Pjrt {
            call: "PJRT_LoadedExecutable_Execute",
            code: "INTERNAL",
            message: "no completion event".into(),
        })?;
        Ok((buffers, Completion::new(event, self.client.origin)))
    }

    /// Runs the program on `args` and waits until it has finished.
    pub fn execute(&self, args: &[&DeviceBuffer]) -> Result<Vec<DeviceBuffer>, XlaError> {
        let (outputs, done) = self.launch(args)?;
        done.wait()?;
        Ok(outputs)
    }
}

/// `len` elements at `ptr`, or an empty slice when `ptr` is null.
///
/// # Safety
/// `ptr` is null or valid for `len` reads for the returned lifetime.
unsafe fn slice_or_empty<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// Checks arguments (name and type of each) against a program's parameters;
/// the error names the argument and both types.
pub(crate) fn check_params(sig: &Signature, args: &[(&str, &ArrayType)]) -> Result<(), XlaError> {
    if sig.params.len() != args.len() {
        return Err(XlaError::ArgumentCount {
            expected: sig.params.len(),
            actual: args.len(),
            signature: sig.to_string(),
        });
    }
    for (index, (&(name, actual), expected)) in args.iter().zip(&sig.params).enumerate() {
        let describe = || (name.to_owned(), expected.to_string(), actual.to_string());
        if actual.dtype != expected.dtype {
            let (name, expected, actual) = describe();
            return Err(XlaError::ArgumentType {
                index,
                name,
                expected,
                actual,
            });
        }
        if actual.dims != expected.dims {
            let (name, expected, actual) = describe();
            return Err(XlaError::ArgumentShape {
                index,
                name,
                expected,
                actual,
            });
        }
    }
    Ok(())
}
