//! Reading logits where they lie: the WGSL readout over a buffer on the
//! shared device, so only the letters (or one log-probability per token)
//! come back.

use super::*;
use crate::platform::js;

impl WebRuntime {
    /// A logits buffer of `bytes` on the shared device (reused when the size repeats).
    pub(super) fn logits_buffer(&mut self, bytes: u64) -> Result<JsValue, RuntimeError> {
        let gpu = self
            .gpu
            .as_ref()
            .ok_or_else(|| RuntimeError::Gpu("no shared device".into()))?;
        let size = bytes.div_ceil(4) * 4;
        if self.logits_buf.as_ref().is_none_or(|b| b.size() != size) {
            self.logits_buf = Some(gpu.device().create_buffer(&wgpu::BufferDescriptor {
                label: Some("logits"),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
        }
        let buf = self
            .logits_buf
            .as_ref()
            .and_then(|b| b.as_webgpu())
            .ok_or_else(|| RuntimeError::Gpu("the logits buffer has no WebGPU handle".into()))?;
        Ok(JsValue::from(buf.clone()))
    }

    /// Runs `step` with its logits written into this engine's buffer on the
    /// shared device (and the presents kept on the GPU when asked for). The
    /// logits stay there for the kernel; the dims and dtype say how to read them.
    pub(super) async fn run_into_gpu(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        keep_present: bool,
        width: usize,
    ) -> Result<(Object, [usize; 3], bool), RuntimeError> {
        self.check_device()?;
        let rows = self.logits_rows.unwrap_or(step.input_ids.len());
        let width = self.logits_width.unwrap_or(width);
        let f16 = self.signature.logits_dtype == Dtype::F16;
        let dims = [1usize, rows, width];
        let bytes = (rows * width * if f16 { 2 } else { 4 }) as u64;
        let raw = self.logits_buffer(bytes)?;
        let tensor = self
            .ort
            .tensor_from_gpu_buffer(&raw, if f16 { "float16" } else { "float32" }, &dims)
            .map_err(|e| RuntimeError::Gpu(e.0))?;
        let fetches = Object::new();
        js::set(&fetches, "logits", &tensor);
        if self.signature.exposes_hidden() {
            js::set(&fetches, HIDDEN_OUTPUT, &JsValue::NULL);
        }
        if keep_present {
            for n in self.present_names().iter() {
                js::set(&fetches, &n.as_string().unwrap_or_default(), &JsValue::NULL);
            }
        }
        let out = self
            .run_fetch(step, past, &fetches)
            .await
            .map_err(|e| match e {
                RuntimeError::Run(m) => RuntimeError::Run(format!(
                    "{m} (logits pre-allocated as {dims:?} on the shared device)"
                )),
                other => other,
            })?;
        Ok((out, dims, f16))
    }

    /// The kernel and the logits buffer `run_into_gpu` wrote.
    pub(super) fn kernel(&self) -> Result<(&GpuReadout, &wgpu::Buffer), RuntimeError> {
        let gpu = self
            .gpu
            .as_ref()
            .ok_or_else(|| RuntimeError::Gpu("no shared device".into()))?;
        let buf = self
            .logits_buf
            .as_ref()
            .ok_or_else(|| RuntimeError::Gpu("no logits buffer".into()))?;
        Ok((gpu, buf))
    }

    /// A kernel failure, or the device loss behind it when there was one.
    pub(super) async fn kernel_failed(&self, e: crate::gpu::GpuError) -> RuntimeError {
        self.loss_behind(RuntimeError::Gpu(e.to_string())).await
    }

    /// The kernel over the logits `run_into_gpu` left in our buffer.
    pub(super) async fn read_rows_on_gpu(
        &mut self,
        dims: [usize; 3],
        f16: bool,
        tasks: &[RowTask<'_>],
    ) -> Result<Vec<crate::gpu::GpuSlots>, RuntimeError> {
        let (gpu, buf) = self.kernel()?;
        let g = match self
            .unless_lost(gpu.read_rows(buf, dims, f16, tasks))
            .await?
        {
            Ok(g) => g,
            Err(e) => return Err(self.kernel_failed(e).await),
        };
        self.meter.read_back += g.iter().map(|s| s.bytes_read_back as u64).sum::<u64>();
        Ok(g)
    }

    /// log p at each (row, token) of the logits `run_into_gpu` left in our buffer.
    pub(super) async fn log_probs_in_gpu(
        &mut self,
        dims: [usize; 3],
        f16: bool,
        at: &[(usize, u32)],
    ) -> Result<Vec<f64>, RuntimeError> {
        let (gpu, buf) = self.kernel()?;
        let (lp, bytes) = match self
            .unless_lost(gpu.read_log_probs(buf, dims, f16, at))
            .await?
        {
            Ok(r) => r,
            Err(e) => return Err(self.kernel_failed(e).await),
        };
        self.meter.read_back += bytes as u64;
        Ok(lp)
    }

    /// The GPU path of `read`: logits into our buffer, the kernel reads them.
    pub(super) async fn read_on_gpu(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        spec: &ReadSpec<'_>,
    ) -> Result<RowRead, RuntimeError> {
        let (out, dims, f16) = self
            .run_into_gpu(step, past, false, spec.head.width())
            .await?;
        let hidden = if self.signature.exposes_hidden() {
            Some(self.take_hidden(&out).await?)
        } else {
            None
        };
        let cols: Vec<u32> = spec.columns.iter().map(|&c| c as u32).collect();
        let want_lse = spec.allowed_mass && matches!(spec.head, HeadColumns::Vocab { .. });
        let task = RowTask {
            row: dims[1] - 1,
            columns: &cols,
        };
        let mut g = self.read_rows_on_gpu(dims, f16, &[task]).await?;
        let g = g.remove(0);
        let slots = from_gathered(g.logits, want_lse.then_some(g.log_sum_exp));
        Ok(RowRead {
            slots,
            dims: dims.to_vec(),
            hidden,
        })
    }

    /// The GPU path of `log_probs_at`: one task per (row, token), one
    /// dispatch, one float back per pair instead of the rows.
    pub(super) async fn log_probs_on_gpu(
        &mut self,
        step: &Step,
        past: Option<&WebKv>,
        keep_present: bool,
        at: &[(usize, u32)],
        width: usize,
    ) -> Result<Gathered<WebKv>, RuntimeError> {
        let (out, dims, f16) = self.run_into_gpu(step, past, keep_present, width).await?;
        let present = if keep_present {
            Some(self.keep_present(&out)?)
        } else {
            None
        };
        // The hidden state is fetched with every run of such a graph and not
        // wanted here; a missing one must not strand the kept past.
        if self.signature.exposes_hidden() {
            match Self::output(&out, HIDDEN_OUTPUT) {
                Ok(t) => t.dispose(),
                Err(e) => {
                    if let Some(p) = present {
                        self.release(p);
                    }
                    return Err(e);
                }
            }
        }
        match self.log_probs_in_gpu(dims, f16, at).await {
            Ok(log_probs) => Ok(Gathered {
                log_probs,
                dims: dims.to_vec(),
                present,
            }),
            Err(e) => {
                if let Some(p) = present {
                    self.release(p);
                }
                Err(e)
            }
        }
    }
}
