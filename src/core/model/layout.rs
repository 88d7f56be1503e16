//! Where a model folder keeps its graph. onnxruntime-genai's builder puts
//! `model.onnx` at the top; Hugging Face's onnx-community exports put one
//! graph per precision under `onnx/`, with the tokenizer and config at the
//! top. The native loader and the browser's folder loads both find the
//! graph here, so a folder means the same file to both.

/// The builder's graph, at the folder's top.
pub const TOP_GRAPH: &str = "model.onnx";

/// Graph files tried under `onnx/` when there is no top graph, best first.
/// `f16_first`: the runtime computes float16 natively (every native CPU
/// runtime; WebGPU with shader-f16), so the half-size q4f16 file comes
/// first; otherwise the int4 file with float32 scales does.
pub fn onnx_community_graphs(f16_first: bool) -> [&'static str; 5] {
    if f16_first {
        [
            "model_q4f16.onnx",
            "model_q4.onnx",
            "model_fp16.onnx",
            "model.onnx",
            "model_quantized.onnx",
        ]
    } else {
        [
            "model_q4.onnx",
            "model.onnx",
            "model_quantized.onnx",
            "model_q4f16.onnx",
            "model_fp16.onnx",
        ]
    }
}

/// External-data names for a graph file: the builder's (`model.onnx.data`)
/// and Optimum's (`model_q4.onnx_data`).
pub fn external_data_names(graph: &str) -> [String; 2] {
    [format!("{graph}.data"), format!("{graph}_data")]
}

/// For a `/`-separated path or URL path naming a graph file: the model's
/// root (with a trailing `/`) and the graph relative to it. The root is
/// the graph's folder, or the folder above it when that is `onnx/`.
pub fn split_graph_path(path: &str) -> (&str, &str) {
    let Some(slash) = path.rfind('/') else {
        return ("", path);
    };
    let folder = &path[..slash];
    match folder.rfind('/') {
        Some(up) if &folder[up + 1..] == "onnx" => (&path[..=up], &path[up + 1..]),
        None if folder == "onnx" => ("", path),
        _ => (&path[..=slash], &path[slash + 1..]),
    }
}

/// Whether `source` (a path or URL, before any `?` or `#`) names a graph
/// file rather than a folder.
pub fn names_graph(source: &str) -> bool {
    source
        .split(['?', '#'])
        .next()
        .unwrap_or(source)
        .ends_with(".onnx")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_under_onnx_is_rooted_one_folder_up() {
        assert_eq!(
            split_graph_path("/m/hf/onnx/model_q4.onnx"),
            ("/m/hf/", "onnx/model_q4.onnx")
        );
        assert_eq!(split_graph_path("/m/b/model.onnx"), ("/m/b/", "model.onnx"));
        assert_eq!(split_graph_path("onnx/model.onnx"), ("", "onnx/model.onnx"));
        assert_eq!(split_graph_path("model.onnx"), ("", "model.onnx"));
        assert!(names_graph("https://h/x/onnx/model_q4.onnx?download=1"));
        assert!(!names_graph("/models/tiny/"));
    }

    #[test]
    fn each_order_tries_every_precision_once() {
        for f16 in [true, false] {
            let mut names = onnx_community_graphs(f16).to_vec();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), 5);
        }
        assert_eq!(onnx_community_graphs(true)[0], "model_q4f16.onnx");
        assert_eq!(onnx_community_graphs(false)[0], "model_q4.onnx");
    }
}
