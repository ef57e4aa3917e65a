//! What a client and everything made from it share: the raw PJRT client
//! and device, and the host memory the device may still be reading.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use super::dma::Dma;
use super::event::RawEvent;
use super::plugin::Plugin;
use super::sys;
use crate::batch::Tensor;

/// Host memory the device may read until `event` fires.
pub(crate) struct HostRelease {
    _tensor: Tensor,
    event: RawEvent,
}

impl HostRelease {
    /// Holds `tensor` until `event` fires.
    pub(super) fn new(tensor: Tensor, event: RawEvent) -> Self {
        Self {
            _tensor: tensor,
            event,
        }
    }

    /// True (and safe to drop) once the device is done with the memory.
    pub(crate) fn is_done(&self) -> bool {
        self.event.is_ready()
    }

    /// Blocks until the device is done with the memory.
    pub(crate) fn wait(self) {
        let _ = self.event.wait();
    }
}

/// State shared by a client and everything made from it; dropped (and the
/// PJRT client destroyed) after the last buffer and executable.
pub(crate) struct ClientInner {
    pub(super) plugin: &'static Plugin,
    pub(super) raw: *mut sys::PJRT_Client,
    pub(super) device: *mut sys::PJRT_Device,
    pub(super) device_count: usize,
    pub(super) platform: String,
    pub(super) compiles: Cell<u64>,
    /// Host memory the device may still read: released when its event fires.
    pub(super) pending: RefCell<Vec<HostRelease>>,
    /// The zero of every [`Completion`]'s clock.
    pub(super) origin: Instant,
    /// Batch buffers mapped for DMA.
    pub(super) dma: Dma,
}

impl ClientInner {
    /// The PJRT client handle.
    pub(crate) fn raw_client(&self) -> *mut sys::PJRT_Client {
        self.raw
    }

    /// Queues host memory for release once the device is done with it.
    pub(crate) fn hold_until_done(&self, release: HostRelease) {
        self.pending.borrow_mut().push(release);
    }

    /// Releases the host memory whose events have fired; how many.
    pub(crate) fn reap(&self) -> usize {
        let mut pending = self.pending.borrow_mut();
        let before = pending.len();
        pending.retain(|r| !r.is_done());
        before - pending.len()
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        // Every buffer is gone (each held an Rc): wait for the device to let
        // go of the host memory before the client goes.
        for release in self.pending.get_mut().drain(..) {
            release.wait();
        }
        // Mappings need the client: undo them first (the memory stays in
        // its pool, unmapped).
        self.dma.release();
        let mut args = sys::PJRT_Client_Destroy_Args {
            struct_size: sys::PJRT_Client_Destroy_Args_STRUCT_SIZE as usize,
            client: self.raw,
            ..Default::default()
        };
        // SAFETY: the client is live, owned by us, and nothing made from it
        // remains (they all held this `Rc`). A failure cannot be reported
        // from `drop`.
        let _ = unsafe { pjrt_call!(self.plugin, PJRT_Client_Destroy, &mut args) };
    }
}
