#![cfg_attr(fuzzing, no_main)]
tep_fuzz::fuzz_main!(tep_fuzz::flow_description);
