#![no_main]
// Replayed by tests/fuzz_corpus.rs over fuzz/corpus/slot_map/ in the normal test run.
libfuzzer_sys::fuzz_target!(|data: &[u8]| readout::fuzz::slot_map(data));
