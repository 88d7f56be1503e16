//! Every file a model names stays inside the model's root (issue: hostile
//! files). A symlink out of the folder is refused by name on both native
//! runtimes before either opens it; links that stay inside, and a Hugging
//! Face hub cache snapshot (files linked into the repository's `blobs/`),
//! load and score as the plain folder does.
#![cfg(unix)]

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::{criterion, model_path, Q4};
use readout::{open_host_engine, HostOptions, Precision, ReadoutRequest, RuntimeKind};

const RUNTIMES: [RuntimeKind; 2] = [RuntimeKind::Ort, RuntimeKind::Own];

fn opts(runtime: RuntimeKind) -> HostOptions {
    HostOptions {
        runtime,
        threads: 2,
        precision: Precision::Int8,
        pack: true,
    }
}

/// A fresh scratch folder under target/ (removed first if a run left one).
fn scratch(tag: &str) -> PathBuf {
    let d = common::root()
        .join("target")
        .join("confinement")
        .join(format!("{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The first answer's probabilities on a short state.
fn probs(dir: &Path, runtime: RuntimeKind) -> Vec<f64> {
    let mut e =
        open_host_engine(dir, &opts(runtime)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let state = common::state("The parcel arrived two days late and the box was torn.");
    let c = criterion("late", "Did the parcel arrive late?", &["Yes", "No"]);
    let d = pollster::block_on(async {
        let id = e.prefill(&state).await?;
        e.score(id, &c, &ReadoutRequest::default()).await
    })
    .unwrap();
    d.probs.iter().map(|p| p.p).collect()
}

#[test]
fn a_symlink_out_of_the_model_folder_is_refused_by_name_on_both_runtimes() {
    let d = scratch("out");
    let model = d.join("model");
    common::copy_model(Q4, &model);
    std::fs::rename(model.join("model.onnx.data"), d.join("elsewhere.data")).unwrap();
    symlink(d.join("elsewhere.data"), model.join("model.onnx.data")).unwrap();
    for rt in RUNTIMES {
        let e = open_host_engine(&model, &opts(rt))
            .err()
            .unwrap_or_else(|| panic!("{rt:?} loaded through a link out of the folder"));
        let info = e.info();
        assert_eq!(info.code, "outside_root", "{rt:?}: {e}");
        assert_eq!(info.field.as_deref(), Some("external data"));
        assert!(e.to_string().contains("elsewhere.data"), "{e}");
    }
    // The same for a side file: the tokenizer linked out of the folder.
    std::fs::rename(d.join("elsewhere.data"), model.join("model.onnx.data")).unwrap();
    std::fs::rename(model.join("tokenizer.json"), d.join("tokenizer.json")).unwrap();
    symlink(d.join("tokenizer.json"), model.join("tokenizer.json")).unwrap();
    let e = open_host_engine(&model, &opts(RuntimeKind::Ort))
        .err()
        .expect("a linked-out tokenizer loaded");
    assert_eq!(e.info().code, "outside_root");
    assert_eq!(e.info().field.as_deref(), Some("tokenizer.json"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn links_inside_the_folder_and_a_hub_cache_snapshot_load_and_score_as_the_plain_folder() {
    let plain = model_path(Q4);
    let want: Vec<Vec<f64>> = RUNTIMES.iter().map(|&rt| probs(&plain, rt)).collect();

    // A link that stays inside the folder.
    let d = scratch("hub");
    let inside = d.join("inside");
    common::copy_model(Q4, &inside);
    std::fs::rename(inside.join("model.onnx.data"), inside.join("weights.bin")).unwrap();
    symlink("weights.bin", inside.join("model.onnx.data")).unwrap();

    // The hub cache's layout: every file of a snapshot is a relative link
    // into the repository's blobs/, named by its hash.
    let repo = d.join("models--org--tiny");
    let snap = repo.join("snapshots").join("0123abcd");
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    for (i, f) in std::fs::read_dir(&plain).unwrap().enumerate() {
        let f = f.unwrap().path();
        let blob = format!("blob{i:02}");
        std::fs::copy(&f, repo.join("blobs").join(&blob)).unwrap();
        symlink(
            format!("../../blobs/{blob}"),
            snap.join(f.file_name().unwrap()),
        )
        .unwrap();
    }
    for (i, &rt) in RUNTIMES.iter().enumerate() {
        assert_eq!(
            probs(&inside, rt),
            want[i],
            "{rt:?}: a link inside the folder"
        );
        assert_eq!(probs(&snap, rt), want[i], "{rt:?}: a hub cache snapshot");
    }
    // A snapshot file linked outside the repository is still outside.
    std::fs::remove_file(snap.join("model.onnx.data")).unwrap();
    symlink(inside.join("weights.bin"), snap.join("model.onnx.data")).unwrap();
    let e = open_host_engine(&snap, &opts(RuntimeKind::Own))
        .err()
        .expect("a link out of the repository loaded");
    assert_eq!(e.info().code, "outside_root");
    std::fs::remove_dir_all(&d).unwrap();
}
