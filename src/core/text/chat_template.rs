//! The model's own chat template (`chat_template.jinja`, or the
//! `chat_template` field of `tokenizer_config.json`), rendered with
//! minijinja plus the Python string methods HF templates call.
//!
//! The prompt is one user message holding the plain contract's text, then
//! the assistant's turn. The head is the rendering up to the end of the
//! evidence; the engine checks that it is a token prefix of every full
//! prompt, so a cached head always means what one uncached forward means.

use crate::core::input::input_limits;
use minijinja::{Environment, Error as JinjaError, ErrorKind};
use serde::Serialize;
use serde_json::Value;

use crate::core::CoreError;

/// Where the head ends inside a rendering: a private-use character no
/// evidence or template is expected to hold (checked when it is found).
const SPLIT_MARK: &str = "\u{F8FF}readout-head-end\u{F8FF}";

pub struct ChatTemplate {
    /// Where the template came from, for errors.
    name: String,
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("name", &self.name)
            .finish()
    }
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'a str,
    content: &'a str,
}

#[derive(Serialize)]
struct Context<'a> {
    messages: Vec<Message<'a>>,
    add_generation_prompt: bool,
    bos_token: &'a str,
    eos_token: &'a str,
}

/// A special token in `tokenizer_config.json`: a string or `{ "content": ... }`.
fn token_field(config: &Value, field: &str) -> String {
    match config.get(field) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

fn raise_exception(message: String) -> Result<String, JinjaError> {
    Err(JinjaError::new(ErrorKind::InvalidOperation, message))
}

impl ChatTemplate {
    /// The template a model directory ships: `chat_template.jinja` when given,
    /// else `tokenizer_config.json`'s `chat_template` (a string, or a list of
    /// named templates of which `default` is taken). `None`: the model has none.
    pub fn from_model_files(
        jinja: Option<&str>,
        tokenizer_config: Option<&str>,
    ) -> Result<Option<Self>, CoreError> {
        let config: Value = match tokenizer_config {
            Some(text) => serde_json::from_str(text).map_err(|e| CoreError::ChatTemplate {
                template: "tokenizer_config.json".into(),
                message: e.to_string(),
            })?,
            None => Value::Null,
        };
        let (name, source) = match jinja {
            Some(src) => ("chat_template.jinja", src.to_string()),
            None => match config.get("chat_template") {
                Some(Value::String(s)) => ("tokenizer_config.json#chat_template", s.clone()),
                Some(Value::Array(list)) => {
                    let default = list
                        .iter()
                        .find(|t| t.get("name").and_then(Value::as_str) == Some("default"));
                    match default
                        .and_then(|t| t.get("template"))
                        .and_then(Value::as_str)
                    {
                        Some(s) => ("tokenizer_config.json#chat_template[default]", s.into()),
                        None => return Ok(None),
                    }
                }
                _ => return Ok(None),
            },
        };
        Self::new(
            name,
            source,
            token_field(&config, "bos_token"),
            token_field(&config, "eos_token"),
        )
        .map(Some)
    }

    pub fn new(
        name: &str,
        source: String,
        bos_token: String,
        eos_token: String,
    ) -> Result<Self, CoreError> {
        input_limits::check_size(
            name,
            source.len() as u64,
            input_limits::MAX_TEMPLATE_BYTES,
            "bytes",
            "real chat templates are a few kB; is it the right file?",
        )?;
        let mut env = Environment::new();
        // A template is code from the model's files: bound what one
        // rendering may spend, so a loop or a recursion ends by name.
        env.set_fuel(Some(input_limits::TEMPLATE_FUEL));
        env.set_recursion_limit(input_limits::TEMPLATE_RECURSION);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned("chat", source)
            .map_err(|e| CoreError::ChatTemplate {
                template: name.to_string(),
                message: e.to_string(),
            })?;
        Ok(Self {
            name: name.to_string(),
            env,
            bos_token,
            eos_token,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `content` as the one user message, followed by the assistant's turn.
    pub fn render_user(&self, content: &str) -> Result<String, CoreError> {
        let err = |e: JinjaError| match e.kind() {
            ErrorKind::OutOfFuel => CoreError::TooLarge {
                field: format!("{} (rendering)", self.name),
                size: input_limits::TEMPLATE_FUEL + 1,
                limit: input_limits::TEMPLATE_FUEL,
                unit: "instructions",
                hint: "the template loops far longer than a chat template needs",
            },
            _ => CoreError::ChatTemplate {
                template: self.name.clone(),
                message: e.to_string(),
            },
        };
        let t = self.env.get_template("chat").map_err(err)?;
        t.render(Context {
            messages: vec![Message {
                role: "user",
                content,
            }],
            add_generation_prompt: true,
            bos_token: &self.bos_token,
            eos_token: &self.eos_token,
        })
        .map_err(err)
    }

    /// The rendering of a user message that starts with `head_body`, cut
    /// where `head_body` ends: the text every prompt of this state begins with.
    pub fn head_text(&self, head_body: &str) -> Result<String, CoreError> {
        if head_body.contains(SPLIT_MARK) {
            return Err(CoreError::TemplateSplit {
                template: self.name.clone(),
                reason: "the evidence holds readout's private split mark".into(),
            });
        }
        let rendered = self.render_user(&format!("{head_body}{SPLIT_MARK}"))?;
        match rendered.find(SPLIT_MARK) {
            Some(at) if rendered[..at].ends_with(head_body) => Ok(rendered[..at].to_string()),
            _ => Err(CoreError::TemplateSplit {
                template: self.name.clone(),
                reason: "the template does not render the user's text verbatim, so no head can be cut from it".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn renders_one_user_turn_and_cuts_the_head() {
        let t = ChatTemplate::new("t", CHATML.into(), String::new(), String::new()).unwrap();
        assert_eq!(
            t.render_user("hi").unwrap(),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(
            t.head_text("Evidence").unwrap(),
            "<|im_start|>user\nEvidence"
        );
    }

    #[test]
    fn a_template_that_loops_or_recurses_ends_by_name() {
        let looping =
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        let t = ChatTemplate::new("loop", looping.into(), String::new(), String::new()).unwrap();
        let started = std::time::Instant::now();
        let e = t.render_user("x").unwrap_err();
        assert_eq!(e.info().code, "too_large", "{e}");
        assert!(e.to_string().contains("instructions"), "{e}");
        assert!(started.elapsed().as_secs() < 5, "fuel ends the loop early");
        let recursing = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
        let t = ChatTemplate::new("rec", recursing.into(), String::new(), String::new()).unwrap();
        let e = t.render_user("x").unwrap_err();
        assert_eq!(e.info().code, "chat_template", "{e}");
        assert!(e.to_string().contains("recursion"), "{e}");
        let huge = "x".repeat(input_limits::MAX_TEMPLATE_BYTES as usize + 1);
        let e = ChatTemplate::new("huge", huge, String::new(), String::new()).unwrap_err();
        assert_eq!(e.info().code, "too_large");
    }

    #[test]
    fn python_methods_and_raise_exception_work() {
        let src = "{{ messages[0]['content'].strip().upper() }}{% if messages|length > 1 %}{{ raise_exception('one') }}{% endif %}";
        let t = ChatTemplate::new("t", src.into(), String::new(), String::new()).unwrap();
        assert_eq!(t.render_user("  ab ").unwrap(), "AB");
    }

    #[test]
    fn a_template_that_rewrites_the_text_is_refused_by_name() {
        let t = ChatTemplate::new(
            "rewriter",
            "{{ messages[0]['content'] | upper }}".into(),
            String::new(),
            String::new(),
        )
        .unwrap();
        let e = t.head_text("evidence").unwrap_err();
        assert!(
            matches!(&e, CoreError::TemplateSplit { template, .. } if template == "rewriter"),
            "{e}"
        );
    }

    #[test]
    fn reads_the_template_from_tokenizer_config() {
        let cfg = serde_json::json!({
            "chat_template": [{"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"}],
            "bos_token": {"content": "<s>"}
        })
        .to_string();
        let t = ChatTemplate::from_model_files(None, Some(&cfg))
            .unwrap()
            .unwrap();
        assert_eq!(t.render_user("x").unwrap(), "<s>x");
        assert!(ChatTemplate::from_model_files(None, Some("{}"))
            .unwrap()
            .is_none());
        let e =
            ChatTemplate::new("bad", "{% if %}".into(), String::new(), String::new()).unwrap_err();
        assert!(matches!(e, CoreError::ChatTemplate { .. }));
    }
}
