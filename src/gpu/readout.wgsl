// The GPU readout (spec §8): at one row of a [1, S, W] logits tensor,
// gather the answer letters' logits and reduce the whole row to its maximum
// and sum of exponentials, so the host reads back n + 3 floats instead of
// the row. One workgroup strides over the row; W is at most the vocabulary.
// Only the row's bytes are bound (from an aligned offset), so a long
// [1, S, V] tensor never exceeds the device's storage-binding limit.

struct Params {
    width: u32,    // W: vocabulary or pruned rows
    base: u32,     // the row's first value, counted from the start of the binding
    n_cols: u32,   // letters to gather (<= 20)
    is_f16: u32,   // 1: two float16 per u32 word
}

@group(0) @binding(0) var<storage, read> logits: array<u32>;
@group(0) @binding(1) var<storage, read> columns: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;
// [gathered logits (n_cols)..., row max, sum of exp(x - max), non-finite flag]
@group(0) @binding(3) var<storage, read_write> result: array<f32>;

const WG: u32 = 256u;
var<workgroup> scratch: array<f32, 256>;
var<workgroup> bad: atomic<u32>;

fn value(i: u32) -> f32 {
    if (params.is_f16 == 1u) {
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
fn main(@builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) {
        atomicStore(&bad, 0u);
    }
    let base = params.base;
    // -FLT_MAX by its bits: some WGSL compilers (Tint) refuse the decimal literal.
    var m = bitcast<f32>(0xff7fffffu);
    for (var i = lid; i < params.width; i += WG) {
        let v = value(base + i);
        if (non_finite(v)) {
            atomicOr(&bad, 1u);
        }
        m = max(m, v);
    }
    scratch[lid] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            scratch[lid] = max(scratch[lid], scratch[lid + s]);
        }
        workgroupBarrier();
    }
    let row_max = scratch[0];
    workgroupBarrier();

    var acc = 0.0;
    for (var i = lid; i < params.width; i += WG) {
        acc += exp(value(base + i) - row_max);
    }
    scratch[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            scratch[lid] = scratch[lid] + scratch[lid + s];
        }
        workgroupBarrier();
    }

    if (lid < params.n_cols) {
        result[lid] = value(base + columns[lid]);
    }
    if (lid == 0u) {
        result[params.n_cols] = row_max;
        result[params.n_cols + 1u] = scratch[0];
        result[params.n_cols + 2u] = f32(atomicLoad(&bad));
    }
}
