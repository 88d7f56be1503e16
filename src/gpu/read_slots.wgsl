// The GPU readout (spec §8). Each workgroup takes one task: a row of the
// bound [1, S, W] logits and the columns to gather there. It reduces the whole
// row to its maximum and sum of exponentials in one online pass, so the host
// reads back n + 3 floats per task instead of the row. The letters readout is
// one task at the last row; a cloze run is one task per option token, each at
// the row that predicts it (one column), folded here into one float: the
// token's log-softmax.
//
// Only the tasks' rows are bound (from an aligned offset), so a long [1, S, V]
// tensor never exceeds the device's storage-binding limit.

// Specialised at pipeline creation: 1 reads two float16 per u32 word.
override IS_F16: u32 = 0u;

struct Params {
    width: u32,   // W: vocabulary or pruned rows
    n_tasks: u32,
}

struct Task {
    base: u32,       // the row's first value, counted from the start of the binding
    col_start: u32,  // first of this task's columns in `columns`
    n_cols: u32,     // columns to gather (<= 64)
    out: u32,        // first of this task's result slots
    fold: u32,       // 1: one slot, x[column] - ln Σ exp(x) (+1 for a non-finite row)
}

@group(0) @binding(0) var<storage, read> logits: array<u32>;
@group(0) @binding(1) var<storage, read> tasks: array<Task>;
@group(0) @binding(2) var<storage, read> columns: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;
// Per task: [gathered logits (n_cols)..., row max, sum of exp(x - max), non-finite flag],
// or, folded, [log p of the one column].
@group(0) @binding(4) var<storage, read_write> result: array<f32>;

const WG: u32 = 256u;
var<workgroup> maxes: array<f32, 256>;
var<workgroup> sums: array<f32, 256>;
var<workgroup> bad: atomic<u32>;

fn value(i: u32) -> f32 {
    if (IS_F16 == 1u) {
        let pair = unpack2x16float(logits[i / 2u]);
        return select(pair.x, pair.y, (i & 1u) == 1u);
    }
    return bitcast<f32>(logits[i]);
}

// Infinity or NaN: all exponent bits set (float32 view of either dtype).
fn non_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if (lid == 0u) {
        atomicStore(&bad, 0u);
    }
    workgroupBarrier();
    let task = tasks[wid.x];
    // -FLT_MAX by its bits: some WGSL compilers (Tint) refuse the decimal literal.
    var m = bitcast<f32>(0xff7fffffu);
    var s = 0.0;
    // Online max and sum: one read of each value.
    for (var i = lid; i < params.width; i += WG) {
        let v = value(task.base + i);
        if (non_finite(v)) {
            atomicOr(&bad, 1u);
            continue;
        }
        if (v > m) {
            s = s * exp(m - v) + 1.0;
            m = v;
        } else {
            s += exp(v - m);
        }
    }
    maxes[lid] = m;
    sums[lid] = s;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k = k >> 1u) {
        if (lid < k) {
            let m1 = maxes[lid];
            let m2 = maxes[lid + k];
            let mm = max(m1, m2);
            sums[lid] = sums[lid] * exp(m1 - mm) + sums[lid + k] * exp(m2 - mm);
            maxes[lid] = mm;
        }
        workgroupBarrier();
    }

    if (task.fold == 1u) {
        if (lid == 0u) {
            let lp = value(task.base + columns[task.col_start]) - (maxes[0] + log(sums[0]));
            // A log-probability is never positive (x <= max, ln Σ >= 0, and
            // float rounding is monotonic), so +1 marks a non-finite row for
            // the host to refuse by name. (Tint refuses a NaN constant.)
            result[task.out] = select(lp, 1.0, atomicLoad(&bad) != 0u);
        }
        return;
    }
    if (lid < task.n_cols) {
        result[task.out + lid] = value(task.base + columns[task.col_start + lid]);
    }
    if (lid == 0u) {
        result[task.out + task.n_cols] = maxes[0];
        result[task.out + task.n_cols + 1u] = sums[0];
        result[task.out + task.n_cols + 2u] = f32(atomicLoad(&bad));
    }
}
