//! Loading a PJRT plugin: `dlopen` the shared library, call its
//! `GetPjrtApi`, check the C API version, initialise it once.

use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::error::XlaError;
use super::sys;

/// The environment variable naming the plugin to load.
pub const PLUGIN_PATH_VAR: &str = "PJRT_PLUGIN_PATH";

/// Where `scripts/fetch-pjrt.sh` puts the CPU plugin, relative to the
/// repository root.
pub const DEFAULT_PLUGIN: &str = ".pjrt/xla_cpu_pjrt.so";

/// The C API version of infeed's bindings (`src/xla/sys.rs`).
pub const API_VERSION: (i32, i32) = (sys::PJRT_API_MAJOR as i32, sys::PJRT_API_MINOR as i32);

/// A loaded, initialised PJRT plugin: the table of C API functions.
///
/// Plugins stay loaded for the life of the process (unloading XLA runtimes
/// is not supported by them), so a plugin is a `&'static Plugin`, loaded
/// once per file however often [`Plugin::load`] is called.
pub struct Plugin {
    path: PathBuf,
    api: &'static sys::PJRT_Api,
    version: (i32, i32),
}

// SAFETY: the API table is immutable data of a library that is never
// unloaded; its functions may be called from any thread (PJRT objects made
// with them are what is not thread-safe, and those types are `!Send`).
unsafe impl Send for Plugin {}
// SAFETY: as above; `Plugin` has no interior mutability.
unsafe impl Sync for Plugin {}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish()
    }
}

static LOADED: OnceLock<Mutex<Vec<&'static Plugin>>> = OnceLock::new();

impl Plugin {
    /// Loads the plugin at `path` (once per process per file).
    ///
    /// Errors: [`XlaError::PluginNotFound`] when there is no file,
    /// [`XlaError::PluginLoad`] when it is no loadable library,
    /// [`XlaError::NotAPlugin`] when it has no `GetPjrtApi`,
    /// [`XlaError::ApiVersion`] when its C API major version differs.
    pub fn load(path: impl AsRef<Path>) -> Result<&'static Plugin, XlaError> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(XlaError::PluginNotFound {
                path: path.to_owned(),
            });
        }
        let canonical = path.canonicalize().map_err(|e| XlaError::PluginLoad {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let mut loaded = LOADED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(plugin) = loaded.iter().find(|p| p.path == canonical) {
            return Ok(plugin);
        }
        let plugin: &'static Plugin = Box::leak(Box::new(Self::open(&canonical)?));
        loaded.push(plugin);
        Ok(plugin)
    }

    /// Loads the plugin named by `PJRT_PLUGIN_PATH`, or else the CPU plugin
    /// that `scripts/fetch-pjrt.sh` puts in `.pjrt/` of the current
    /// directory or one of its parents.
    pub fn load_default() -> Result<&'static Plugin, XlaError> {
        Self::load(default_path())
    }

    fn open(path: &Path) -> Result<Self, XlaError> {
        // SAFETY: loading a library runs its initialisers; a PJRT plugin's
        // are sound to run. Which file is loaded is the caller's choice (as
        // with any plugin path), and it is kept loaded forever below.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| XlaError::PluginLoad {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        type GetPjrtApi = unsafe extern "C" fn() -> *const sys::PJRT_Api;
        // SAFETY: `GetPjrtApi` is declared by the PJRT C API with exactly
        // this signature (no arguments, returns `const PJRT_Api*`).
        let get: libloading::Symbol<'_, GetPjrtApi> =
            unsafe { lib.get(b"GetPjrtApi\0") }.map_err(|e| XlaError::NotAPlugin {
                path: path.to_owned(),
                message: format!("no GetPjrtApi symbol ({e})"),
            })?;
        // SAFETY: a PJRT plugin's GetPjrtApi takes nothing and returns a
        // pointer to a static table (or null, checked below).
        let api = unsafe { get() };
        // The library must never be unloaded: the table lives in it.
        std::mem::forget(lib);
        // SAFETY: the pointer is null or points at the plugin's static table,
        // which lives as long as the never-unloaded library.
        let api: &'static sys::PJRT_Api =
            unsafe { api.as_ref() }.ok_or_else(|| XlaError::NotAPlugin {
                path: path.to_owned(),
                message: "GetPjrtApi returned null".into(),
            })?;
        let version_end = std::mem::offset_of!(sys::PJRT_Api, pjrt_api_version)
            + std::mem::size_of::<sys::PJRT_Api_Version>();
        if api.struct_size < version_end {
            return Err(XlaError::NotAPlugin {
                path: path.to_owned(),
                message: format!("its API table is {} bytes", api.struct_size),
            });
        }
        let version = (
            api.pjrt_api_version.major_version,
            api.pjrt_api_version.minor_version,
        );
        if version.0 != API_VERSION.0 {
            return Err(XlaError::ApiVersion {
                path: path.to_owned(),
                plugin_major: version.0,
                plugin_minor: version.1,
                ours_major: API_VERSION.0,
                ours_minor: API_VERSION.1,
            });
        }
        let plugin = Plugin {
            path: path.to_owned(),
            api,
            version,
        };
        let mut args = sys::PJRT_Plugin_Initialize_Args {
            struct_size: sys::PJRT_Plugin_Initialize_Args_STRUCT_SIZE as usize,
            ..Default::default()
        };
        // SAFETY: `args` is a fully initialised PJRT_Plugin_Initialize_Args;
        // initialisation runs once per plugin (the `LOADED` lock is held).
        unsafe { pjrt_call!(&plugin, PJRT_Plugin_Initialize, &mut args) }?;
        Ok(plugin)
    }

    /// The canonical path of the plugin file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The PJRT C API version the plugin implements (major, minor).
    pub fn api_version(&self) -> (i32, i32) {
        self.version
    }

    /// The plugin's attributes (`xla_version`, `stablehlo_current_version`,
    /// ...) as `name = value` text.
    pub fn attributes(&self) -> Result<Vec<(String, String)>, XlaError> {
        let mut args = sys::PJRT_Plugin_Attributes_Args {
            struct_size: sys::PJRT_Plugin_Attributes_Args_STRUCT_SIZE as usize,
            ..Default::default()
        };
        // SAFETY: `args` is fully initialised; the outputs live as long as
        // the process (per the C API).
        unsafe { pjrt_call!(self, PJRT_Plugin_Attributes, &mut args) }?;
        let attrs = if args.attributes.is_null() {
            &[][..]
        } else {
            // SAFETY: the plugin returned `num_attributes` values at
            // `attributes`, valid for the life of the process.
            unsafe { std::slice::from_raw_parts(args.attributes, args.num_attributes) }
        };
        Ok(attrs
            .iter()
            .map(|a| {
                // SAFETY: name/name_size describe a string of the plugin's.
                let name = unsafe { lossy(a.name, a.name_size) };
                // SAFETY: the union member read is the one `type_` names,
                // and pointer members come with their element counts.
                let value = unsafe {
                    match a.type_ {
                        sys::PJRT_NamedValue_kString => {
                            lossy(a.__bindgen_anon_1.string_value, a.value_size)
                        }
                        sys::PJRT_NamedValue_kInt64 => a.__bindgen_anon_1.int64_value.to_string(),
                        sys::PJRT_NamedValue_kInt64List => {
                            let p = a.__bindgen_anon_1.int64_array_value;
                            if p.is_null() {
                                "[]".into()
                            } else {
                                format!("{:?}", std::slice::from_raw_parts(p, a.value_size))
                            }
                        }
                        sys::PJRT_NamedValue_kFloat => a.__bindgen_anon_1.float_value.to_string(),
                        sys::PJRT_NamedValue_kBool => a.__bindgen_anon_1.bool_value.to_string(),
                        _ => "?".into(),
                    }
                };
                (name, value)
            })
            .collect())
    }

    /// The API table.
    pub(crate) fn api(&self) -> &'static sys::PJRT_Api {
        self.api
    }

    /// The function at byte `offset` of the table, if the plugin's table is
    /// long enough to have it and sets it.
    pub(crate) fn function<F: Copy>(
        &self,
        offset: usize,
        f: Option<F>,
        name: &'static str,
    ) -> Result<F, XlaError> {
        let present = offset + std::mem::size_of::<usize>() <= self.api.struct_size;
        f.filter(|_| present).ok_or(XlaError::Unsupported {
            function: name,
            major: self.version.0,
            minor: self.version.1,
        })
    }

    /// Turns a returned `PJRT_Error*` into a result, destroying the error.
    ///
    /// # Safety
    /// `error` is null or an error returned by this plugin, not yet destroyed.
    pub(crate) unsafe fn check(
        &self,
        error: *mut sys::PJRT_Error,
        call: &'static str,
    ) -> Result<(), XlaError> {
        if error.is_null() {
            return Ok(());
        }
        let mut msg = sys::PJRT_Error_Message_Args {
            struct_size: sys::PJRT_Error_Message_Args_STRUCT_SIZE as usize,
            error,
            ..Default::default()
        };
        let message = match self.api.PJRT_Error_Message {
            Some(f) => {
                // SAFETY: `error` is a live error of this plugin (caller's
                // contract); the message lives as long as the error, and is
                // copied before the error is destroyed below.
                unsafe {
                    f(&mut msg);
                    lossy(msg.message, msg.message_size)
                }
            }
            None => "(the plugin gives no message)".into(),
        };
        let mut code_args = sys::PJRT_Error_GetCode_Args {
            struct_size: sys::PJRT_Error_GetCode_Args_STRUCT_SIZE as usize,
            error,
            ..Default::default()
        };
        let code = match self.api.PJRT_Error_GetCode {
            // SAFETY: as above; GetCode's own error (never expected) is
            // ignored rather than destroyed twice.
            Some(f) if unsafe { f(&mut code_args) }.is_null() => code_name(code_args.code),
            _ => "UNKNOWN",
        };
        if let Some(destroy) = self.api.PJRT_Error_Destroy {
            let mut args = sys::PJRT_Error_Destroy_Args {
                struct_size: sys::PJRT_Error_Destroy_Args_STRUCT_SIZE as usize,
                error,
                ..Default::default()
            };
            // SAFETY: `error` is live and destroyed exactly once, here.
            unsafe { destroy(&mut args) };
        }
        Err(XlaError::Pjrt {
            call,
            code,
            message,
        })
    }
}

/// Copies `len` bytes at `ptr` into a `String` (lossy UTF-8; empty on null).
///
/// # Safety
/// `ptr` is null or valid for reads of `len` bytes.
pub(crate) unsafe fn lossy(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

fn code_name(code: sys::PJRT_Error_Code) -> &'static str {
    match code {
        sys::PJRT_Error_Code_OK => "OK",
        sys::PJRT_Error_Code_CANCELLED => "CANCELLED",
        sys::PJRT_Error_Code_INVALID_ARGUMENT => "INVALID_ARGUMENT",
        sys::PJRT_Error_Code_DEADLINE_EXCEEDED => "DEADLINE_EXCEEDED",
        sys::PJRT_Error_Code_NOT_FOUND => "NOT_FOUND",
        sys::PJRT_Error_Code_ALREADY_EXISTS => "ALREADY_EXISTS",
        sys::PJRT_Error_Code_PERMISSION_DENIED => "PERMISSION_DENIED",
        sys::PJRT_Error_Code_RESOURCE_EXHAUSTED => "RESOURCE_EXHAUSTED",
        sys::PJRT_Error_Code_FAILED_PRECONDITION => "FAILED_PRECONDITION",
        sys::PJRT_Error_Code_ABORTED => "ABORTED",
        sys::PJRT_Error_Code_OUT_OF_RANGE => "OUT_OF_RANGE",
        sys::PJRT_Error_Code_UNIMPLEMENTED => "UNIMPLEMENTED",
        sys::PJRT_Error_Code_INTERNAL => "INTERNAL",
        sys::PJRT_Error_Code_UNAVAILABLE => "UNAVAILABLE",
        sys::PJRT_Error_Code_DATA_LOSS => "DATA_LOSS",
        sys::PJRT_Error_Code_UNAUTHENTICATED => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

/// The plugin path to use: `PJRT_PLUGIN_PATH`, else the first
/// `.pjrt/xla_cpu_pjrt.so` in the current directory or its parents, else
/// `.pjrt/xla_cpu_pjrt.so` (which then does not exist).
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os(PLUGIN_PATH_VAR).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Ok(cwd) = std::env::current_dir() {
        for dir in cwd.ancestors() {
            let candidate = dir.join(DEFAULT_PLUGIN);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    PathBuf::from(DEFAULT_PLUGIN)
}
