#![no_main]
// Replayed by tests/fuzz_corpus.rs over fuzz/corpus/models_json/ in the normal test run.
libfuzzer_sys::fuzz_target!(|data: &[u8]| readout::fuzz::models_json(data));
