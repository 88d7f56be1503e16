//! Text: the prompt contract, the model's chat template, tokenisation.

pub mod chat_template;
pub mod prompt;
pub mod tokenizer;
