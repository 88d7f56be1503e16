//! Dispatches `readout.wgsl` on logits already in a GPU buffer and maps back
//! only the gathered letters, the row's max and its sum of exponentials.

use super::GpuError;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    width: u32,
    base: u32,
    n_cols: u32,
    is_f16: u32,
}

/// What comes back from the GPU for one criterion.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSlots {
    /// The letters' logits, in the order of the columns asked for.
    pub logits: Vec<f32>,
    /// ln Σ exp over the whole row (f64 on the host: max + ln(sum)).
    pub log_sum_exp: f64,
    /// Bytes mapped back to the host.
    pub bytes_read_back: usize,
}

pub struct GpuReadout {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

const MAX_COLS: usize = 20;

impl GpuReadout {
    /// Compiles the kernel; a device that rejects it is an error here, not
    /// zeros later (an invalid pipeline dispatches nothing).
    pub async fn new(device: wgpu::Device, queue: wgpu::Queue) -> Result<Self, GpuError> {
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("readout.wgsl"),
            source: wgpu::ShaderSource::Wgsl(include_str!("readout.wgsl").into()),
        });
        let entry = |binding, ty| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty,
            count: None,
        };
        let storage = |read_only| wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("readout"),
            entries: &[
                entry(0, storage(true)),
                entry(1, storage(true)),
                entry(
                    2,
                    wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                ),
                entry(3, storage(false)),
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("readout"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("readout"),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Readout(format!(
                "readout.wgsl was rejected by this device: {e}"
            )));
        }
        Ok(Self {
            device,
            queue,
            pipeline,
            layout,
        })
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// A storage buffer holding `bytes` (padded to 4 bytes), as a runtime
    /// would leave logits on the GPU.
    pub fn upload(&self, bytes: &[u8]) -> wgpu::Buffer {
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().div_ceil(4).max(1) * 4, 0);
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("logits"),
            size: padded.len() as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue.write_buffer(&buf, 0, &padded);
        buf
    }

    /// Reads `columns` at the last row of a `[1, S, W]` tensor in `logits`.
    pub async fn read(
        &self,
        logits: &wgpu::Buffer,
        dims: [usize; 3],
        f16: bool,
        columns: &[u32],
    ) -> Result<GpuSlots, GpuError> {
        let [b, s, w] = dims;
        if b != 1 || s == 0 || w == 0 {
            return Err(GpuError::Readout(format!(
                "logits dims {dims:?}: [1, S >= 1, W] expected"
            )));
        }
        if columns.is_empty() || columns.len() > MAX_COLS {
            return Err(GpuError::Readout(format!(
                "{} columns asked for; 1 to {MAX_COLS} allowed",
                columns.len()
            )));
        }
        if let Some(c) = columns.iter().find(|&&c| c as usize >= w) {
            return Err(GpuError::Readout(format!(
                "column {c} outside a last axis of {w}"
            )));
        }
        let need = (s * w * if f16 { 2 } else { 4 }) as u64;
        if logits.size() < need {
            return Err(GpuError::Readout(format!(
                "logits buffer holds {} bytes; dims {dims:?} need {need}",
                logits.size()
            )));
        }
        let n = columns.len();
        // Bind only the last row, from the nearest aligned offset before it.
        let elem = if f16 { 2u64 } else { 4 };
        let row_start = ((s - 1) * w) as u64 * elem;
        let align = self.device.limits().min_storage_buffer_offset_alignment as u64;
        let bind_start = row_start / align * align;
        let bind_size = (need - bind_start).div_ceil(4) * 4;
        let bind_size = bind_size.min(logits.size() - bind_start);
        let base = ((row_start - bind_start) / elem) as u32;
        let params = Params {
            width: w as u32,
            base,
            n_cols: n as u32,
            is_f16: f16 as u32,
        };
        let mk = |label, size: u64, usage| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let cols = mk(
            "columns",
            (n * 4) as u64,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        );
        self.queue
            .write_buffer(&cols, 0, bytemuck::cast_slice(columns));
        let uni = mk(
            "params",
            16,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        );
        self.queue
            .write_buffer(&uni, 0, bytemuck::bytes_of(&params));
        let out_bytes = ((n + 3) * 4) as u64;
        let out = mk(
            "result",
            out_bytes,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        );
        let staging = mk(
            "staging",
            out_bytes,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("readout"),
            layout: &self.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: logits,
                        offset: bind_start,
                        size: std::num::NonZeroU64::new(bind_size),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: cols.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: uni.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: out.as_entire_binding(),
                },
            ],
        });
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("readout"),
            });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("readout"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        enc.copy_buffer_to_buffer(&out, 0, &staging, 0, out_bytes);
        self.queue.submit([enc.finish()]);
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Readout(format!(
                "the readout dispatch was refused: {e}"
            )));
        }

        let (tx, rx) = futures_channel::oneshot::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Readout(e.to_string()))?;
        rx.await
            .map_err(|_| GpuError::Readout("map_async was dropped".into()))?
            .map_err(|e| GpuError::Readout(e.to_string()))?;
        let vals: Vec<f32> = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| GpuError::Readout(e.to_string()))?;
            bytemuck::cast_slice(&view).to_vec()
        };
        staging.unmap();
        if vals[n + 2] != 0.0 {
            return Err(GpuError::Readout(format!(
                "a logit in row {} is not finite",
                s - 1
            )));
        }
        let (max, sum) = (vals[n] as f64, vals[n + 1] as f64);
        Ok(GpuSlots {
            logits: vals[..n].to_vec(),
            log_sum_exp: max + sum.ln(),
            bytes_read_back: out_bytes as usize,
        })
    }
}
