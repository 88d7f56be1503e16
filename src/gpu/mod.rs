//! The engine's own GPU work (spec §8), on wgpu: WebGPU in the browser
//! (the same device handed to onnxruntime-web), Vulkan natively (lavapipe
//! here), so the kernel is tested against the CPU readout in `cargo test`.

mod read_slots;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use read_slots::{GpuReadout, GpuSlots, RowTask, MAX_COLS};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum GpuError {
    #[error("GPU: no adapter ({0})")]
    NoAdapter(String),
    #[error("GPU: device request refused ({0})")]
    Device(String),
    #[error("GPU readout: {0}")]
    Readout(String),
}

/// A device on whatever adapter wgpu finds first (natively: Vulkan).
pub async fn request_device() -> Result<(wgpu::Device, wgpu::Queue, wgpu::AdapterInfo), GpuError> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = instance
        .request_adapter(&wgpu::RequestAdapterOptions::default())
        .await
        .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
    let info = adapter.get_info();
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("readout"),
            ..Default::default()
        })
        .await
        .map_err(|e| GpuError::Device(e.to_string()))?;
    Ok((device, queue, info))
}
