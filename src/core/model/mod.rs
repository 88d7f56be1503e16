//! The files beside a model, as data (`models.json`, `config.json`,
//! `slot_map.json`, `head_rows.json`), and which backend a browser engine
//! runs an entry on.

pub mod backend_choice;
pub mod config;
pub mod head_rows;
pub mod layout;
pub mod models_json;
pub mod slot_map;
