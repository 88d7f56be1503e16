//! Dispatches `read_slots.wgsl` on logits already in a GPU buffer and maps back
//! only what each task asks for: the gathered columns of one row, the row's
//! max and its sum of exponentials.
//!
//! The pipelines (one per logits dtype, specialised at creation) and the
//! small buffers a dispatch needs are made once per `GpuReadout` and grown
//! when a request outgrows them; only the bind group, which names the
//! logits buffer onnxruntime-web wrote, is made per call.

use std::cell::Cell;

use crate::gpu::GpuError;

mod dispatch;

use crate::gpu::read_slots::dispatch::windows;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    width: u32,
    n_tasks: u32,
    _pad: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Task {
    base: u32,
    col_start: u32,
    n_cols: u32,
    out: u32,
    /// 1: one slot, log p of the single column (+1 for a non-finite row).
    fold: u32,
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

/// One row of the logits and the columns to gather there.
#[derive(Debug, Clone, Copy)]
pub struct RowTask<'a> {
    pub row: usize,
    pub columns: &'a [u32],
}

/// What a dispatch computes per task: the gathered logits with the row's
/// max, sum and flag (letters), or the log-softmax at one column, folded on
/// the GPU into one float (cloze).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Slots,
    LogProb,
}

impl Kind {
    fn slots(self, n_cols: usize) -> usize {
        match self {
            Self::Slots => n_cols + TAIL,
            Self::LogProb => 1,
        }
    }
}

/// The buffers every dispatch uses, sized for `tasks` tasks of `cols`
/// columns in all.
struct Scratch {
    tasks: wgpu::Buffer,
    columns: wgpu::Buffer,
    params: wgpu::Buffer,
    result: wgpu::Buffer,
    staging: wgpu::Buffer,
    task_cap: usize,
    col_cap: usize,
}

pub struct GpuReadout {
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// Indexed by `is_f16`.
    pipelines: [wgpu::ComputePipeline; 2],
    layout: wgpu::BindGroupLayout,
    /// Taken for the length of a call and put back after, so two calls in
    /// flight at once each get buffers (the second makes its own) and no
    /// borrow is held across an await.
    scratch: Cell<Option<Scratch>>,
    /// Buffers made, counted: a test shows they are made once, not per call.
    allocations: Cell<u64>,
}

/// Columns one task may gather (the answer letters: at most 20).
pub const MAX_COLS: usize = 20;
/// Result slots per task beyond its columns: max, sum, non-finite flag.
const TAIL: usize = 3;

impl GpuReadout {
    /// Compiles the kernel for both dtypes; a device that rejects it is an
    /// error here, not zeros later (an invalid pipeline dispatches nothing).
    pub async fn new(device: wgpu::Device, queue: wgpu::Queue) -> Result<Self, GpuError> {
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("read_slots.wgsl"),
            source: wgpu::ShaderSource::Wgsl(include_str!("read_slots.wgsl").into()),
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
                entry(2, storage(true)),
                entry(
                    3,
                    wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                ),
                entry(4, storage(false)),
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("readout"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = |is_f16: f64| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(if is_f16 == 1.0 {
                    "readout f16"
                } else {
                    "readout f32"
                }),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &[("IS_F16", is_f16)],
                    ..Default::default()
                },
                cache: None,
            })
        };
        let pipelines = [pipeline(0.0), pipeline(1.0)];
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Readout(format!(
                "read_slots.wgsl was rejected by this device: {e}"
            )));
        }
        Ok(Self {
            device,
            queue,
            pipelines,
            layout,
            scratch: Cell::new(None),
            allocations: Cell::new(0),
        })
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Buffers this readout has made so far (its scratch, not logits).
    pub fn allocations(&self) -> u64 {
        self.allocations.get()
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
        let row = dims[1].checked_sub(1).ok_or_else(|| {
            GpuError::Readout(format!("logits dims {dims:?}: [1, S >= 1, W] expected"))
        })?;
        let mut out = self
            .read_rows(logits, dims, f16, &[RowTask { row, columns }])
            .await?;
        Ok(out.remove(0))
    }

    /// Reads every task in one dispatch and one map (one each per window of
    /// rows that fits a storage binding); each task's `bytes_read_back` is
    /// its own slots.
    pub async fn read_rows(
        &self,
        logits: &wgpu::Buffer,
        dims: [usize; 3],
        f16: bool,
        tasks: &[RowTask<'_>],
    ) -> Result<Vec<GpuSlots>, GpuError> {
        self.check(logits, dims, f16, tasks)?;
        if tasks.is_empty() {
            return Ok(Vec::new());
        }
        let w = dims[2];
        let raw = self.run_tasks(logits, w, f16, tasks, Kind::Slots).await?;
        let mut out = Vec::with_capacity(tasks.len());
        for (t, vals) in tasks.iter().zip(raw) {
            let n = t.columns.len();
            if vals[n + 2] != 0.0 {
                return Err(GpuError::Readout(format!(
                    "a logit in row {} is not finite",
                    t.row
                )));
            }
            let (max, sum) = (vals[n] as f64, vals[n + 1] as f64);
            out.push(GpuSlots {
                logits: vals[..n].to_vec(),
                log_sum_exp: max + sum.ln(),
                bytes_read_back: Kind::Slots.slots(n) * 4,
            });
        }
        Ok(out)
    }

    /// log p(`token`) under the full row `row`'s softmax, for each pair, in
    /// one dispatch: the GPU folds each row to one float, so 4 bytes per pair
    /// come back. Returns the log-probabilities and the bytes mapped back.
    pub async fn read_log_probs(
        &self,
        logits: &wgpu::Buffer,
        dims: [usize; 3],
        f16: bool,
        pairs: &[(usize, u32)],
    ) -> Result<(Vec<f64>, usize), GpuError> {
        let cols: Vec<[u32; 1]> = pairs.iter().map(|&(_, t)| [t]).collect();
        let tasks: Vec<RowTask> = pairs
            .iter()
            .zip(&cols)
            .map(|(&(row, _), c)| RowTask { row, columns: c })
            .collect();
        self.check(logits, dims, f16, &tasks)?;
        if tasks.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let raw = self
            .run_tasks(logits, dims[2], f16, &tasks, Kind::LogProb)
            .await?;
        let mut out = Vec::with_capacity(pairs.len());
        for (&(row, _), vals) in pairs.iter().zip(raw) {
            let lp = vals[0];
            // +1 is the kernel's mark of a non-finite row (a log p is <= 0).
            if lp.is_nan() || lp > 0.0 {
                return Err(GpuError::Readout(format!(
                    "a logit in row {row} is not finite"
                )));
            }
            out.push(lp as f64);
        }
        Ok((out, pairs.len() * 4))
    }

    /// Every task in one dispatch and one map (one each per window of rows
    /// that fits a storage binding); each task's raw slots, in task order.
    async fn run_tasks(
        &self,
        logits: &wgpu::Buffer,
        width: usize,
        f16: bool,
        tasks: &[RowTask<'_>],
        kind: Kind,
    ) -> Result<Vec<Vec<f32>>, GpuError> {
        let elem = if f16 { 2u64 } else { 4 };
        let mut out = vec![Vec::new(); tasks.len()];
        for window in windows(tasks, width, elem, &self.device.limits()) {
            let got = self
                .dispatch(logits, width, f16, tasks, &window, kind)
                .await?;
            for (i, g) in window.into_iter().zip(got) {
                out[i] = g;
            }
        }
        Ok(out)
    }

    /// Refuses dims, rows, columns or a buffer the tasks cannot be read from.
    fn check(
        &self,
        logits: &wgpu::Buffer,
        dims: [usize; 3],
        f16: bool,
        tasks: &[RowTask<'_>],
    ) -> Result<(), GpuError> {
        let [b, s, w] = dims;
        if b != 1 || s == 0 || w == 0 {
            return Err(GpuError::Readout(format!(
                "logits dims {dims:?}: [1, S >= 1, W] expected"
            )));
        }
        for t in tasks {
            if t.columns.is_empty() || t.columns.len() > MAX_COLS {
                return Err(GpuError::Readout(format!(
                    "{} columns asked for; 1 to {MAX_COLS} allowed",
                    t.columns.len()
                )));
            }
            if let Some(c) = t.columns.iter().find(|&&c| c as usize >= w) {
                return Err(GpuError::Readout(format!(
                    "column {c} outside a last axis of {w}"
                )));
            }
            if t.row >= s {
                return Err(GpuError::Readout(format!(
                    "row {} outside logits dims {dims:?}",
                    t.row
                )));
            }
        }
        let elem = if f16 { 2u64 } else { 4 };
        let need = (s * w) as u64 * elem;
        if logits.size() < need {
            return Err(GpuError::Readout(format!(
                "logits buffer holds {} bytes; dims {dims:?} need {need}",
                logits.size()
            )));
        }
        Ok(())
    }
}
