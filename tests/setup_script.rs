//! `scripts/setup.sh` checks the disk before it installs or builds anything
//! (a CI run once failed 15 minutes in on a full disk). Both refusals happen
//! before the first install step, so these runs change nothing.

use std::process::{Command, Output};

fn setup(args: &[&str]) -> Output {
    Command::new("bash")
        .arg("scripts/setup.sh")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("bash runs")
}

#[test]
fn a_disk_that_cannot_hold_the_run_is_refused_at_once_naming_the_need() {
    let out = setup(&["--disk-gb", "100000000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not enough disk: this run writes about 100000000 GB"),
        "{err}"
    );
    assert!(
        err.contains("builds 100000000 GB") && err.contains("GB free"),
        "{err}"
    );
    assert!(!err.contains("[setup] ok"), "{err}");
}

#[test]
fn a_malformed_disk_figure_is_refused_naming_the_flag() {
    for bad in [
        &["--disk-gb", "2x"][..],
        &["--disk-gb", "-1"],
        &["--disk-gb"],
    ] {
        let out = setup(bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(
            err.contains("--disk-gb needs a whole number of GB"),
            "{bad:?}: {err}"
        );
    }
}
