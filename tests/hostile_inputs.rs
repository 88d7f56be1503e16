//! Inputs sized to exhaust memory or time are refused by name, from bounded
//! work, and the engine stays usable after each (issue: hostile files).

mod common;

use common::{criterion, engine, state, Q4};
use readout::ScoreOptions;

#[test]
fn ten_megabytes_of_evidence_are_refused_from_their_first_pieces_and_the_engine_goes_on() {
    let mut e = engine(Q4);
    let opts = ScoreOptions::default();
    let c = criterion("late", "Did the parcel arrive late?", &["Yes", "No"]);
    pollster::block_on(async {
        let id = e
            .prefill(&state("The parcel arrived two days late."))
            .await
            .unwrap();
        let before = e.score(id, &c, &opts).await.unwrap();
        // About 10 MB: tokenised whole it is some two million tokens.
        let huge = "The parcel arrived two days late and nobody called. ".repeat(200_000);
        let err = e.prefill(&state(&huge)).await.unwrap_err();
        let info = err.info();
        assert_eq!(info.code, "context_overflow", "{err}");
        assert_eq!(info.field.as_deref(), Some("evidence"));
        assert_eq!(info.limit, Some(1024));
        // Bounded work: the message says how much was tokenised, a few pieces, not 10 MB.
        let msg = err.to_string();
        let counted: usize = msg
            .split("its first ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {msg}"));
        assert!(
            counted <= 64 << 10,
            "{counted} bytes tokenised before the refusal: {msg}"
        );
        assert!(msg.contains(&format!("{} bytes", huge.len())), "{msg}");
        // A state just inside the context is still tokenised whole and exactly.
        let fits = "word ".repeat(900);
        let ok = e.prefill(&state(&fits)).await.unwrap();
        e.dispose(ok).unwrap();
        let after = e.score(id, &c, &opts).await.unwrap();
        assert_eq!(after.p(), before.p());
    });
}

#[test]
fn a_call_of_a_hundred_thousand_criteria_is_refused_with_its_limit_before_any_run() {
    let mut e = engine(Q4);
    let opts = ScoreOptions::default();
    pollster::block_on(async {
        let id = e
            .prefill(&state("The parcel arrived two days late."))
            .await
            .unwrap();
        let many: Vec<_> = (0..100_000)
            .map(|i| {
                criterion(
                    &format!("c{i}"),
                    "Did the parcel arrive late?",
                    &["Yes", "No"],
                )
            })
            .collect();
        let err = e.score_all(id, &many, &opts).await.unwrap_err();
        let info = err.info();
        assert_eq!(info.code, "too_large", "{err}");
        assert_eq!(info.field.as_deref(), Some("criteria"));
        assert_eq!(info.limit, Some(10_000));
        let some = e.score_all(id, &many[..3], &opts).await.unwrap();
        assert_eq!(some.len(), 3);
    });
}

#[test]
fn a_catalog_whose_file_url_leaves_its_folder_is_refused_before_any_file_is_read() {
    let dir = common::root()
        .join("target")
        .join(format!("hostile-catalog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(common::root().join("models.json")).unwrap();
    let mut cat: serde_json::Value = serde_json::from_str(&text).unwrap();
    let entry = common::entry_mut(&mut cat, Q4);
    entry["files"][0]["url"] = "../../etc/passwd".into();
    let path = dir.join("models.json");
    std::fs::write(&path, serde_json::to_string(&cat).unwrap()).unwrap();
    let err = readout::model_dir::checked_dir(&path, Q4).unwrap_err();
    let info = err.info();
    assert_eq!(info.code, "outside_root", "{err}");
    assert_eq!(info.field.as_deref(), Some("models.json"));
    assert!(err.to_string().contains("../../etc/passwd"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
