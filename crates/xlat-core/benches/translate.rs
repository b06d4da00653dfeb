// Placeholder until the translation lands; replaced by the criterion benchmark.
fn main() {}
