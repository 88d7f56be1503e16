//! The one WebGPU device of a browser engine: wgpu creates it with the
//! adapter's limits (onnxruntime-web's kernels want more than the defaults)
//! and `shader-f16` when the adapter has it, and the same `GPUDevice` is
//! handed to onnxruntime-web, so logits it writes are readable by our kernel.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::{JsCast, JsValue};

use super::GpuError;

pub struct SharedDevice {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: String,
    pub f16: bool,
    /// Set (reason: message) once the browser reports the device lost.
    pub lost: Rc<RefCell<Option<String>>>,
}

impl SharedDevice {
    /// The raw `GPUDevice` for onnxruntime-web's WebGPU execution provider.
    pub fn js_device(&self) -> Option<JsValue> {
        self.device.as_webgpu().map(|d| JsValue::from(d.clone()))
    }
}

/// Whether this page exposes `navigator.gpu` at all.
fn navigator_gpu() -> bool {
    let nav =
        js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).unwrap_or(JsValue::UNDEFINED);
    !nav.is_undefined()
        && js_sys::Reflect::get(&nav, &"gpu".into())
            .is_ok_and(|g| !g.is_undefined() && !g.is_null())
}

pub async fn request_shared_device() -> Result<SharedDevice, GpuError> {
    if !navigator_gpu() {
        return Err(GpuError::NoAdapter(
            "navigator.gpu is undefined: this browser has WebGPU disabled or does not support it"
                .into(),
        ));
    }
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::BROWSER_WEBGPU;
    let instance = wgpu::Instance::new(desc);
    let adapter = instance
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        })
        .await
        .map_err(|e| {
            GpuError::NoAdapter(format!(
                "navigator.gpu.requestAdapter() gave no adapter ({e})"
            ))
        })?;
    let info = adapter.get_info();
    let f16 = adapter.features().contains(wgpu::Features::SHADER_F16);
    let features = if f16 {
        wgpu::Features::SHADER_F16
    } else {
        wgpu::Features::empty()
    };
    let (device, queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            label: Some("readout"),
            required_features: features,
            required_limits: adapter.limits(),
            ..Default::default()
        })
        .await
        .map_err(|e| GpuError::Device(e.to_string()))?;
    let mut shared = SharedDevice {
        device,
        queue,
        adapter: info.name.clone(),
        f16,
        lost: Rc::new(RefCell::new(None)),
    };
    watch_lost(&shared);
    // GPUDevice.adapterInfo says what the adapter is (e.g. google / swiftshader).
    if let Some(d) = shared.js_device() {
        let ai = js_sys::Reflect::get(&d, &"adapterInfo".into()).unwrap_or(JsValue::UNDEFINED);
        let field = |k: &str| {
            js_sys::Reflect::get(&ai, &k.into())
                .ok()
                .and_then(|v| v.as_string())
                .filter(|s| !s.is_empty())
        };
        let parts: Vec<String> = ["vendor", "architecture", "description"]
            .iter()
            .filter_map(|k| field(k))
            .collect();
        if !parts.is_empty() {
            shared.adapter = parts.join(" / ");
        }
    }
    if shared.adapter.is_empty() {
        // Firefox leaves GPUAdapterInfo empty (fingerprinting protection).
        shared.adapter = "an adapter the browser does not name".into();
    }
    Ok(shared)
}

/// Records `GPUDevice.lost` when it resolves (a driver reset, the tab's GPU
/// process crashing, `destroy()`), so every later run is refused by name
/// instead of failing inside onnxruntime-web.
fn watch_lost(shared: &SharedDevice) {
    let Some(p) = shared.js_device().as_ref().and_then(lost_promise) else {
        return;
    };
    let lost = shared.lost.clone();
    wasm_bindgen_futures::spawn_local(async move {
        let info = wasm_bindgen_futures::JsFuture::from(p)
            .await
            .unwrap_or(JsValue::UNDEFINED);
        *lost.borrow_mut() = Some(lost_reason(&info));
    });
}

/// A `GPUDevice`'s `lost` promise (it resolves once, and stays resolved).
pub fn lost_promise(device: &JsValue) -> Option<js_sys::Promise> {
    js_sys::Reflect::get(device, &"lost".into())
        .and_then(|p| p.dyn_into::<js_sys::Promise>())
        .ok()
}

/// "reason: message" from a `GPUDeviceLostInfo`.
pub fn lost_reason(info: &JsValue) -> String {
    let field = |k: &str| {
        js_sys::Reflect::get(info, &k.into())
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_default()
    };
    let (reason, message) = (field("reason"), field("message"));
    format!(
        "{}{}",
        if reason.is_empty() {
            "unknown"
        } else {
            &reason
        },
        if message.is_empty() {
            String::new()
        } else {
            format!(": {message}")
        }
    )
}
