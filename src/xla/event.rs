//! PJRT events: owned handles destroyed once, and the completion of an
//! execution with the moment it finished.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::error::XlaError;
use super::plugin::Plugin;
use super::sys;

/// An owned `PJRT_Event*` (never null), destroyed on drop.
pub(crate) struct RawEvent {
    plugin: &'static Plugin,
    ptr: *mut sys::PJRT_Event,
}

impl RawEvent {
    /// Takes ownership of `ptr`; `None` when it is null.
    ///
    /// # Safety
    /// `ptr` is null or a live event of `plugin` that nothing else destroys.
    pub(crate) unsafe fn from_raw(
        plugin: &'static Plugin,
        ptr: *mut sys::PJRT_Event,
    ) -> Option<Self> {
        (!ptr.is_null()).then_some(Self { plugin, ptr })
    }

    /// True once the event has completed (with or without an error). A
    /// failed query counts as ready, so a broken event never holds memory
    /// forever; its error shows in [`RawEvent::wait`].
    pub(crate) fn is_ready(&self) -> bool {
        let mut args = sys::PJRT_Event_IsReady_Args {
            struct_size: sys::PJRT_Event_IsReady_Args_STRUCT_SIZE as usize,
            event: self.ptr,
            ..Default::default()
        };
        // SAFETY: `self.ptr` is a live event of this plugin; `args` is fully
        // initialised.
        let result = unsafe { pjrt_call!(self.plugin, PJRT_Event_IsReady, &mut args) };
        result.is_err() || args.is_ready
    }

    /// Blocks until the event completes; its error, if any.
    pub(crate) fn wait(&self) -> Result<(), XlaError> {
        let mut args = sys::PJRT_Event_Await_Args {
            struct_size: sys::PJRT_Event_Await_Args_STRUCT_SIZE as usize,
            event: self.ptr,
            ..Default::default()
        };
        // SAFETY: `self.ptr` is a live event of this plugin; `args` is fully
        // initialised. The returned error is owned by us and destroyed by
        // `check`.
        unsafe { pjrt_call!(self.plugin, PJRT_Event_Await, &mut args) }
    }
}

impl Drop for RawEvent {
    fn drop(&mut self) {
        let mut args = sys::PJRT_Event_Destroy_Args {
            struct_size: sys::PJRT_Event_Destroy_Args_STRUCT_SIZE as usize,
            event: self.ptr,
            ..Default::default()
        };
        // SAFETY: the event is live and owned by us; destroyed exactly once.
        // A failure to destroy cannot be reported from `drop` (and leaks at
        // most the event).
        let _ = unsafe { pjrt_call!(self.plugin, PJRT_Event_Destroy, &mut args) };
    }
}

/// Shared between a [`Completion`] and the plugin's on-ready callback.
struct DoneAt {
    plugin: &'static Plugin,
    origin: Instant,
    /// Nanoseconds after `origin` plus one when the event completed; 0 until then.
    nanos: AtomicU64,
}

/// Runs on a plugin thread when an execution completes: records the time.
unsafe extern "C" fn record_done(error: *mut sys::PJRT_Error, user_arg: *mut c_void) {
    // SAFETY: `user_arg` is the `Arc<DoneAt>` leaked by `Completion::new`
    // for this one callback; it is taken back exactly once, here.
    let done = unsafe { Arc::from_raw(user_arg.cast_const().cast::<DoneAt>()) };
    let nanos = u64::try_from(done.origin.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
    done.nanos.store(nanos + 1, Ordering::Release);
    // SAFETY: the callback owns `error` (null or live) and must destroy it;
    // the execution's error is read again through `Completion::wait`.
    let _ = unsafe { done.plugin.check(error, "execution") };
}

/// The completion of one execution on the device.
///
/// Knows when the device finished (recorded by a callback the plugin runs),
/// so a training loop can tell how long the device sat idle waiting for
/// input. Dropping it waits for the execution to finish.
pub struct Completion {
    event: RawEvent,
    done: Arc<DoneAt>,
    callback: bool,
}

impl Completion {
    /// Watches `event`; `origin` is the clock's zero for [`Self::done_at`].
    pub(crate) fn new(event: RawEvent, origin: Instant) -> Self {
        let done = Arc::new(DoneAt {
            plugin: event.plugin,
            origin,
            nanos: AtomicU64::new(0),
        });
        let user_arg = Arc::into_raw(Arc::clone(&done)).cast_mut().cast::<c_void>();
        let mut args = sys::PJRT_Event_OnReady_Args {
            struct_size: sys::PJRT_Event_OnReady_Args_STRUCT_SIZE as usize,
            event: event.ptr,
            callback: Some(record_done),
            user_arg,
            ..Default::default()
        };
        // SAFETY: the event is live; `record_done` matches the callback type
        // and takes back the `Arc` behind `user_arg`, which stays valid until
        // then (it is leaked for the callback).
        let callback = unsafe { pjrt_call!(event.plugin, PJRT_Event_OnReady, &mut args) }.is_ok();
        if !callback {
            // SAFETY: the callback was not registered, so the leaked Arc is
            // reclaimed here instead, exactly once.
            drop(unsafe { Arc::from_raw(user_arg.cast_const().cast::<DoneAt>()) });
        }
        Self {
            event,
            done,
            callback,
        }
    }

    /// True once the execution has finished.
    pub fn is_done(&self) -> bool {
        self.done_at().is_some() || (!self.callback && self.event.is_ready())
    }

    /// When the device finished the execution, once it has.
    pub fn done_at(&self) -> Option<Instant> {
        match self.done.nanos.load(Ordering::Acquire) {
            0 => None,
            n => Some(self.done.origin + Duration::from_nanos(n - 1)),
        }
    }

    /// Waits for the execution to finish; its error, if it failed.
    pub fn wait(&self) -> Result<(), XlaError> {
        self.event.wait()
    }

    /// Waits for the callback to have recorded the time (it runs just after
    /// the event becomes ready), so the event can be destroyed safely.
    fn settle(&self) {
        let _ = self.event.wait();
        if self.callback {
            while self.done.nanos.load(Ordering::Acquire) == 0 {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        self.settle();
    }
}
