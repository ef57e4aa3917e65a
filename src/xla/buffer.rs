//! Device buffers: host tensors moved to the device without a copy, and
//! results read back.

use std::ffi::c_void;
use std::rc::Rc;

use super::device::{ClientInner, HostRelease};
use super::error::XlaError;
use super::event::RawEvent;
use super::program::{ArrayType, ElementType};
use super::sys;
use crate::batch::{AlignedBuf, Element, Tensor};

/// An array on the device.
///
/// Made by [`Client::upload`](super::Client::upload) (zero-copy from a 64-byte aligned tensor) or
/// returned by an execution. Dropping it frees the device array; host
/// memory it aliased goes back to its pool when the device says it is done.
pub struct DeviceBuffer {
    pub(crate) client: Rc<ClientInner>,
    pub(crate) raw: *mut sys::PJRT_Buffer,
    ty: ArrayType,
    name: String,
    host: Option<HostRelease>,
    /// Uploaded from host memory mapped for DMA.
    pinned: bool,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("name", &self.name)
            .field("type", &self.ty.to_string())
            .field("zero_copy_host", &self.host.is_some())
            .finish()
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let mut args = sys::PJRT_Buffer_Destroy_Args {
            struct_size: sys::PJRT_Buffer_Destroy_Args_STRUCT_SIZE as usize,
            buffer: self.raw,
            ..Default::default()
        };
        // SAFETY: live buffer owned by us, destroyed once; the client
        // outlives it (we hold its Rc). Executions still reading it keep the
        // device memory alive inside the runtime.
        let _ = unsafe { pjrt_call!(self.client.plugin, PJRT_Buffer_Destroy, &mut args) };
        // The host memory stays alive until the runtime says it is done
        // (after the last execution that reads it).
        if let Some(release) = self.host.take() {
            self.client.hold_until_done(release);
        }
    }
}

impl DeviceBuffer {
    /// Wraps a buffer the caller owns.
    ///
    /// # Safety
    /// `raw` is a live buffer of `client`, owned by nobody else, of type `ty`.
    pub(crate) unsafe fn from_raw(
        client: Rc<ClientInner>,
        raw: *mut sys::PJRT_Buffer,
        ty: ArrayType,
        name: String,
    ) -> Self {
        Self {
            client,
            raw,
            ty,
            name,
            host: None,
            pinned: false,
        }
    }

    /// Element type and dimensions.
    pub fn array_type(&self) -> &ArrayType {
        &self.ty
    }

    /// A name for messages: the tensor's name, or `output N`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Renames the buffer (names appear in shape errors).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// True when the buffer aliases (or is being copied from) host memory
    /// that is held until the device is done with it.
    pub fn holds_host_memory(&self) -> bool {
        self.host.is_some()
    }

    /// True when it was uploaded from host memory mapped for DMA (pinned):
    /// the copy went straight over the link, without a staging copy.
    pub fn uploaded_pinned(&self) -> bool {
        self.pinned
    }

    /// Waits until the array is on the device (an upload's copy done, an
    /// execution's result computed); its error, if that failed.
    pub fn wait_ready(&self) -> Result<(), XlaError> {
        let plugin = self.client.plugin;
        let mut args = sys::PJRT_Buffer_ReadyEvent_Args {
            struct_size: sys::PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE as usize,
            buffer: self.raw,
            ..Default::default()
        };
        // SAFETY: live buffer; args initialised.
        unsafe { pjrt_call!(plugin, PJRT_Buffer_ReadyEvent, &mut args) }?;
        // SAFETY: the plugin set a fresh event we own (or null: ready).
        match unsafe { RawEvent::from_raw(plugin, args.event) } {
            Some(event) => event.wait(),
            None => Ok(()),
        }
    }

    /// The device address of the data (for checks such as "was this upload
    /// zero-copy": on a CPU device it equals the host tensor's address).
    pub fn device_address(&self) -> Result<usize, XlaError> {
        let mut args = sys::PJRT_Buffer_UnsafePointer_Args {
            struct_size: sys::PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE as usize,
            buffer: self.raw,
            ..Default::default()
        };
        // SAFETY: live buffer; args initialised; the address is only read.
        unsafe { pjrt_call!(self.client.plugin, PJRT_Buffer_UnsafePointer, &mut args) }?;
        Ok(args.buffer_pointer)
    }

    /// Copies the array into `dst` (exactly its byte size), waiting for the
    /// device (and for the execution that computes it).
    pub fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), XlaError> {
        let needed = self.ty.byte_size().unwrap_or(usize::MAX);
        if dst.len() != needed {
            return Err(XlaError::HostSize {
                what: format!("reading {}", self.name),
                expected: self.ty.to_string(),
                expected_bytes: needed,
                actual_bytes: dst.len(),
            });
        }
        let plugin = self.client.plugin;
        let mut args = sys::PJRT_Buffer_ToHostBuffer_Args {
            struct_size: sys::PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE as usize,
            src: self.raw,
            dst: dst.as_mut_ptr().cast::<c_void>(),
            dst_size: dst.len(),
            ..Default::default()
        };
        // SAFETY: live buffer; `dst` is valid for `dst_size` bytes and stays
        // borrowed until the copy's event has fired (awaited below before
        // returning, also on error).
        unsafe { pjrt_call!(plugin, PJRT_Buffer_ToHostBuffer, &mut args) }?;
        // SAFETY: the plugin set a fresh event we own (or null: copy done).
        match unsafe { RawEvent::from_raw(plugin, args.event) } {
            Some(event) => event.wait(),
            None => Ok(()),
        }
    }

    /// The array as a host tensor (i64, i32, f32 or u8), in a fresh
    /// 64-byte aligned buffer.
    pub fn to_tensor(&self) -> Result<Tensor, XlaError> {
        let dtype = self
            .ty
            .dtype
            .tensor_type()
            .ok_or_else(|| XlaError::HostType {
                what: self.name.clone(),
                actual: self.ty.to_string(),
            })?;
        let bytes = self.ty.byte_size().ok_or_else(|| XlaError::Program {
            message: format!("{} is too large", self.ty),
        })?;
        let mut buf = AlignedBuf::zeroed(bytes);
        self.copy_to_host(buf.as_bytes_mut())?;
        Tensor::new(dtype, self.ty.dims.clone(), buf).map_err(|e| XlaError::Program {
            message: e.to_string(),
        })
    }

    /// The elements, when `T` is the array's element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, XlaError> {
        let want = ElementType::from(T::DTYPE);
        if want != self.ty.dtype {
            return Err(XlaError::HostType {
                what: format!("{} read as {want}", self.name),
                actual: self.ty.to_string(),
            });
        }
        Ok(self
            .to_tensor()?
            .values::<T>()
            .map(<[T]>::to_vec)
            .unwrap_or_default())
    }
}

impl DeviceBuffer {
    /// [`Client::upload`](super::Client::upload).
    pub(super) fn upload(
        client: &Rc<ClientInner>,
        name: &str,
        tensor: Tensor,
    ) -> Result<DeviceBuffer, XlaError> {
        client.reap();
        let ty = ArrayType::new(tensor.dtype().into(), tensor.shape());
        let pinned = client.dma.ensure(client.plugin, client.raw, tensor.data());
        let (raw, event) = buffer_from_host(
            client,
            &ty,
            tensor.data().as_ptr(),
            sys::PJRT_HostBufferSemantics_kImmutableZeroCopy,
        )?;
        // SAFETY: `raw` is the fresh buffer just made, owned by us.
        let mut buffer =
            unsafe { DeviceBuffer::from_raw(Rc::clone(client), raw, ty, name.to_owned()) };
        buffer.pinned = pinned;
        // SAFETY: the event (if any) is fresh and owned by us.
        match unsafe { RawEvent::from_raw(client.plugin, event) } {
            Some(event) => {
                buffer.host = Some(HostRelease::new(tensor, event));
            }
            // No event means no word on when the device is done with the
            // memory (no known plugin does this): never free it, rather than
            // free it too early.
            None => std::mem::forget(tensor),
        }
        Ok(buffer)
    }

    /// [`Client::upload_copy`](super::Client::upload_copy).
    pub(super) fn upload_copy<T: Element>(
        client: &Rc<ClientInner>,
        name: &str,
        dims: &[usize],
        values: &[T],
    ) -> Result<DeviceBuffer, XlaError> {
        let ty = ArrayType::new(T::DTYPE.into(), dims);
        let bytes = std::mem::size_of_val(values);
        if ty.byte_size() != Some(bytes) {
            return Err(XlaError::HostSize {
                what: format!("uploading {name}"),
                expected: ty.to_string(),
                expected_bytes: ty.byte_size().unwrap_or(usize::MAX),
                actual_bytes: bytes,
            });
        }
        let (raw, event) = buffer_from_host(
            client,
            &ty,
            values.as_ptr().cast::<u8>(),
            sys::PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
        )?;
        // SAFETY: `raw` is the fresh buffer just made, owned by us.
        let buffer = unsafe { DeviceBuffer::from_raw(Rc::clone(client), raw, ty, name.to_owned()) };
        // SAFETY: the event (if any) is fresh and owned by us. With these
        // semantics the plugin is done with `values` when the call returns;
        // waiting for the event as well costs nothing and relies on less.
        if let Some(event) = unsafe { RawEvent::from_raw(client.plugin, event) } {
            event.wait()?;
        }
        Ok(buffer)
    }
}

/// Makes a device buffer of `ty` from host `data` with `semantics`; the
/// buffer and the event that fires when the device is done with `data`.
fn buffer_from_host(
    client: &ClientInner,
    ty: &ArrayType,
    data: *const u8,
    semantics: sys::PJRT_HostBufferSemantics,
) -> Result<(*mut sys::PJRT_Buffer, *mut sys::PJRT_Event), XlaError> {
    let dims = ty
        .dims
        .iter()
        .map(|&d| i64::try_from(d))
        .collect::<Result<Vec<i64>, _>>()
        .map_err(|_| XlaError::Program {
            message: format!("{ty} has a dimension beyond i64"),
        })?;
    let mut args = sys::PJRT_Client_BufferFromHostBuffer_Args {
        struct_size: sys::PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE as usize,
        client: client.raw_client(),
        data: data.cast::<c_void>(),
        type_: ty.dtype.to_pjrt(),
        dims: dims.as_ptr(),
        num_dims: dims.len(),
        host_buffer_semantics: semantics,
        device: client.device,
        ..Default::default()
    };
    // SAFETY: live client and device; `data` points at `ty.byte_size()`
    // bytes, dense row-major (no strides, default layout) — the callers
    // check the size — and stays valid as the semantics promise: for
    // zero-copy the tensor is held until the returned event fires, for
    // copy-during-call the caller's borrow outlives the call. `dims`
    // outlives the call.
    unsafe { pjrt_call!(client.plugin, PJRT_Client_BufferFromHostBuffer, &mut args) }?;
    Ok((args.buffer, args.done_with_host_buffer))
}
