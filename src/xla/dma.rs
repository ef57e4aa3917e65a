//! Pinned batch memory: pooled batch buffers mapped for DMA with
//! `PJRT_Client_DmaMap`, once each, on their first upload.
//!
//! A GPU copies pageable host memory through a staging buffer of its own
//! (a second copy, at a fraction of the link's speed); memory the runtime
//! knows is mapped goes straight over the link. Batch buffers come from a
//! pool and return to it, so one mapping per buffer serves every batch that
//! buffer ever holds; the table in `batch/registered.rs` undoes it before
//! the pool frees the memory, or when the client goes first. A CPU device
//! reads batch memory in place (zero-copy), so there it is off by default.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::XlaError;
use super::plugin::Plugin;
use super::sys;
use crate::batch::registered::{self, Unmap};
use crate::batch::{AlignedBuf, PAGE_ALIGNED_FROM};

/// Whether batch buffers are mapped for DMA ([`ClientOptions::dma_map`](super::ClientOptions::dma_map)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DmaMap {
    /// Mapped where the device is not the host's CPU and the plugin offers
    /// `PJRT_Client_DmaMap`.
    #[default]
    Auto,
    /// Asked of every plugin (the CPU one too).
    Always,
    /// Never mapped.
    Never,
}

/// What came of mapping so far (for reports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DmaStatus {
    /// Not asked (`Never`, or `Auto` on a CPU device).
    Off,
    /// Not asked yet: no pooled buffer was uploaded.
    Untried,
    /// The plugin refused or lacks the call (its message).
    Unsupported(String),
    /// Mapping works: buffers this client mapped so far, and those the
    /// plugin would not map (uploaded from pageable memory instead). `live`:
    /// of the mapped, those mapped still; the rest were unmapped because
    /// the pool freed their memory, so `buffers - live` counts mappings
    /// the pool's churn cost (each a `PJRT_Client_DmaMap` and an unmap).
    Mapped {
        buffers: u64,
        refused: u64,
        live: u64,
    },
}

/// A client's mapping state (one per client, on its device thread).
pub(crate) struct Dma {
    wanted: bool,
    /// This client's key in the table of mappings.
    owner: u64,
    refused: std::cell::RefCell<Option<String>>,
    tried: Cell<bool>,
    mapped: Cell<u64>,
    /// Buffers the plugin would not map (uploaded from pageable memory).
    failed: Cell<u64>,
}

static OWNERS: AtomicU64 = AtomicU64::new(1);

/// Unmaps through the client that mapped (alive while its mappings are:
/// the client releases them before it is destroyed).
struct PjrtUnmap {
    plugin: &'static Plugin,
    client: usize,
}

impl Unmap for PjrtUnmap {
    fn unmap(&self, addr: usize) {
        let mut args = sys::PJRT_Client_DmaUnmap_Args {
            struct_size: sys::PJRT_Client_DmaUnmap_Args_STRUCT_SIZE as usize,
            client: self.client as *mut sys::PJRT_Client,
            data: addr as *mut std::ffi::c_void,
            ..Default::default()
        };
        // SAFETY: the client is live (see the type's doc) and mapped `addr`,
        // whose memory is not yet freed.
        if let Err(e) = unsafe { pjrt_call!(self.plugin, PJRT_Client_DmaUnmap, &mut args) } {
            tracing::warn!(addr, error = %e, "PJRT_Client_DmaUnmap failed");
        }
    }
}

impl Dma {
    pub fn new(mode: DmaMap, platform: &str) -> Self {
        Dma {
            wanted: match mode {
                DmaMap::Auto => !platform.eq_ignore_ascii_case("cpu"),
                DmaMap::Always => true,
                DmaMap::Never => false,
            },
            owner: OWNERS.fetch_add(1, Ordering::Relaxed),
            refused: Default::default(),
            tried: Cell::new(false),
            mapped: Cell::new(0),
            failed: Cell::new(0),
        }
    }

    pub fn status(&self) -> DmaStatus {
        if !self.wanted {
            return DmaStatus::Off;
        }
        if let Some(why) = self.refused.borrow().as_ref() {
            return DmaStatus::Unsupported(why.clone());
        }
        match self.tried.get() {
            false => DmaStatus::Untried,
            true => DmaStatus::Mapped {
                buffers: self.mapped.get(),
                refused: self.failed.get(),
                live: registered::mapped_by(self.owner) as u64,
            },
        }
    }

    /// Maps `buf`'s whole allocation for DMA unless it is mapped already;
    /// true when it is mapped. Only pooled buffers of whole pages of their
    /// own (`PAGE_ALIGNED_FROM` bytes and up): an unpooled buffer is freed
    /// after one use, and a small one costs more to map than the staging
    /// copy it saves (and may share its page with another allocation).
    pub fn ensure(
        &self,
        plugin: &'static Plugin,
        client: *mut sys::PJRT_Client,
        buf: &AlignedBuf,
    ) -> bool {
        if !self.wanted
            || !buf.is_pooled()
            || buf.capacity() < PAGE_ALIGNED_FROM
            || self.refused.borrow().is_some()
        {
            return false;
        }
        let addr = buf.as_ptr() as usize;
        if registered::is_registered(addr, self.owner) {
            return true;
        }
        self.tried.set(true);
        let mut args = sys::PJRT_Client_DmaMap_Args {
            struct_size: sys::PJRT_Client_DmaMap_Args_STRUCT_SIZE as usize,
            client,
            data: addr as *mut std::ffi::c_void,
            size: buf.capacity(),
            ..Default::default()
        };
        // SAFETY: live client; `data` is valid for `capacity` bytes and stays
        // allocated until `registered` unmaps it (before any free).
        match unsafe { pjrt_call!(plugin, PJRT_Client_DmaMap, &mut args) } {
            Ok(()) => {
                let unmap = Arc::new(PjrtUnmap {
                    plugin,
                    client: client as usize,
                });
                registered::register(addr, self.owner, unmap);
                self.mapped.set(self.mapped.get() + 1);
                true
            }
            // The plugin lacks the call: never ask again.
            Err(
                e @ (XlaError::Unsupported { .. }
                | XlaError::Pjrt {
                    code: "UNIMPLEMENTED",
                    ..
                }),
            ) => {
                *self.refused.borrow_mut() = Some(e.to_string());
                false
            }
            // This buffer only (the runtime's pinned-memory limit, say).
            Err(e) => {
                self.failed.set(self.failed.get() + 1);
                tracing::debug!(error = %e, "PJRT_Client_DmaMap refused a batch buffer");
                false
            }
        }
    }

    /// Undoes this client's mappings (called before the client is destroyed).
    pub fn release(&self) -> usize {
        registered::release_owner(self.owner)
    }
}
