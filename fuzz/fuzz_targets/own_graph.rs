#![no_main]
// Replayed by tests/fuzz_corpus.rs over fuzz/corpus/own_graph/ in the normal test run.
libfuzzer_sys::fuzz_target!(|data: &[u8]| readout::fuzz::own_graph(data));
