//! Recording and mapping one readout: the scratch buffers (cached, grown
//! when outgrown), the bind groups per window of rows, the dispatch, and the
//! map back of what the tasks asked for.

use crate::gpu::read_slots::*;

impl GpuReadout {
    /// Scratch that holds `n_tasks` tasks and `n_cols` columns: the cached
    /// one when it is big enough, else a new one (counted).
    pub(super) fn scratch(&self, n_tasks: usize, n_cols: usize) -> Scratch {
        if let Some(s) = self.scratch.take() {
            if s.task_cap >= n_tasks && s.col_cap >= n_cols {
                return s;
            }
        }
        let (task_cap, col_cap) = (n_tasks.next_power_of_two(), n_cols.next_power_of_two());
        let result_bytes = ((col_cap + TAIL * task_cap) * 4) as u64;
        let mk = |label, size: u64, usage| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let copy_dst = wgpu::BufferUsages::COPY_DST;
        self.allocations.set(self.allocations.get() + 5);
        Scratch {
            tasks: mk(
                "readout tasks",
                (task_cap * std::mem::size_of::<Task>()) as u64,
                wgpu::BufferUsages::STORAGE | copy_dst,
            ),
            columns: mk(
                "readout columns",
                (col_cap * 4) as u64,
                wgpu::BufferUsages::STORAGE | copy_dst,
            ),
            params: mk(
                "readout params",
                std::mem::size_of::<Params>() as u64,
                wgpu::BufferUsages::UNIFORM | copy_dst,
            ),
            result: mk(
                "readout result",
                result_bytes,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            ),
            staging: mk(
                "readout staging",
                result_bytes,
                wgpu::BufferUsages::MAP_READ | copy_dst,
            ),
            task_cap,
            col_cap,
        }
    }

    /// One dispatch over the tasks of `window` (indices into `tasks`), whose
    /// rows all lie in one bindable span; each task's raw slots, in window order.
    pub(super) async fn dispatch(
        &self,
        logits: &wgpu::Buffer,
        width: usize,
        f16: bool,
        tasks: &[RowTask<'_>],
        window: &[usize],
        kind: Kind,
    ) -> Result<Vec<Vec<f32>>, GpuError> {
        let elem = if f16 { 2u64 } else { 4 };
        let first = window.iter().map(|&i| tasks[i].row).min().unwrap_or(0);
        let last = window.iter().map(|&i| tasks[i].row).max().unwrap_or(0);
        let align = self.device.limits().min_storage_buffer_offset_alignment as u64;
        let row_start = (first * width) as u64 * elem;
        let bind_start = row_start / align * align;
        let bind_end = (((last + 1) * width) as u64 * elem).div_ceil(4) * 4;
        let bind_size = bind_end.min(logits.size()) - bind_start;
        let mut gpu_tasks = Vec::with_capacity(window.len());
        let mut cols = Vec::new();
        let mut slot = 0u32;
        for &i in window {
            let t = &tasks[i];
            let base = ((t.row * width) as u64 * elem - bind_start) / elem;
            gpu_tasks.push(Task {
                base: base as u32,
                col_start: cols.len() as u32,
                n_cols: t.columns.len() as u32,
                out: slot,
                fold: (kind == Kind::LogProb) as u32,
            });
            cols.extend_from_slice(t.columns);
            slot += kind.slots(t.columns.len()) as u32;
        }
        let scratch = self.scratch(window.len(), cols.len());
        let r = self
            .dispatch_with(
                &scratch,
                logits,
                (bind_start, bind_size),
                (width, f16),
                &gpu_tasks,
                &cols,
            )
            .await;
        self.scratch.set(Some(scratch));
        let vals = r?;
        Ok(gpu_tasks
            .iter()
            .map(|t| {
                let at = t.out as usize;
                vals[at..at + kind.slots(t.n_cols as usize)].to_vec()
            })
            .collect())
    }

    /// Writes the tasks, dispatches, and maps back their result slots.
    pub(super) async fn dispatch_with(
        &self,
        scratch: &Scratch,
        logits: &wgpu::Buffer,
        (bind_start, bind_size): (u64, u64),
        (width, f16): (usize, bool),
        tasks: &[Task],
        cols: &[u32],
    ) -> Result<Vec<f32>, GpuError> {
        let kind = |t: &Task| {
            if t.fold == 1 {
                Kind::LogProb
            } else {
                Kind::Slots
            }
        };
        let out_bytes = tasks
            .iter()
            .map(|t| kind(t).slots(t.n_cols as usize) as u64 * 4)
            .sum::<u64>();
        let params = Params {
            width: width as u32,
            n_tasks: tasks.len() as u32,
            _pad: [0; 2],
        };
        self.queue
            .write_buffer(&scratch.tasks, 0, bytemuck::cast_slice(tasks));
        self.queue
            .write_buffer(&scratch.columns, 0, bytemuck::cast_slice(cols));
        self.queue
            .write_buffer(&scratch.params, 0, bytemuck::bytes_of(&params));
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
                    resource: scratch.tasks.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: scratch.columns.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: scratch.params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 4,
                    resource: scratch.result.as_entire_binding(),
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
            pass.set_pipeline(&self.pipelines[f16 as usize]);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(tasks.len() as u32, 1, 1);
        }
        enc.copy_buffer_to_buffer(&scratch.result, 0, &scratch.staging, 0, out_bytes);
        self.queue.submit([enc.finish()]);
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Readout(format!(
                "the readout dispatch was refused: {e}"
            )));
        }

        let (tx, rx) = futures_channel::oneshot::channel();
        scratch
            .staging
            .map_async(wgpu::MapMode::Read, ..out_bytes, move |r| {
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
            let view = scratch
                .staging
                .get_mapped_range(..out_bytes)
                .map_err(|e| GpuError::Readout(e.to_string()))?;
            bytemuck::cast_slice(&view).to_vec()
        };
        scratch.staging.unmap();
        Ok(vals)
    }
}

/// Groups task indices (in row order) into windows whose rows fit one
/// storage binding of this device.
pub(super) fn windows(
    tasks: &[RowTask<'_>],
    width: usize,
    elem: u64,
    limits: &wgpu::Limits,
) -> Vec<Vec<usize>> {
    let max = limits.max_storage_buffer_binding_size;
    let align = limits.min_storage_buffer_offset_alignment as u64;
    let row_bytes = width as u64 * elem;
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| tasks[i].row);
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut start = 0u64;
    for i in order {
        let row = tasks[i].row as u64;
        let end = (row + 1) * row_bytes;
        match out.last_mut() {
            Some(w) if end - start <= max => w.push(i),
            _ => {
                start = row * row_bytes / align * align;
                out.push(vec![i]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: u32) -> wgpu::Limits {
        wgpu::Limits {
            max_storage_buffer_binding_size: max.into(),
            min_storage_buffer_offset_alignment: 256,
            ..wgpu::Limits::default()
        }
    }

    #[test]
    fn rows_are_grouped_into_bindable_windows_in_row_order() {
        let c = [1u32];
        let t = |row| RowTask { row, columns: &c };
        let tasks = [t(5), t(0), t(1), t(9), t(2)];
        // 1000 float32 per row: 4000 bytes. A 12,000-byte binding holds the
        // rows from an aligned start through at most two more rows.
        let w = windows(&tasks, 1000, 4, &limits(12_000));
        assert_eq!(w, vec![vec![1, 2, 4], vec![0], vec![3]]);
        // A binding that holds every row: one window, one dispatch.
        let w = windows(&tasks, 1000, 4, &limits(1 << 27));
        assert_eq!(w, vec![vec![1, 2, 4, 0, 3]]);
        // Every window's span fits the limit, measured from its aligned start.
        for (max, elem) in [(12_000u32, 4u64), (9_000, 2), (4_096, 4)] {
            for win in windows(&tasks, 1000, elem, &limits(max)) {
                let lo = tasks[win[0]].row as u64 * 1000 * elem / 256 * 256;
                let hi = (tasks[*win.last().unwrap()].row as u64 + 1) * 1000 * elem;
                assert!(
                    win.len() == 1 || hi - lo <= max as u64,
                    "{win:?} spans {}",
                    hi - lo
                );
            }
        }
    }
}
