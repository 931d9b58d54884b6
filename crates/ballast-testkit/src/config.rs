//! [`ConfigText`]: the text of a gateway config (`ballast.toml`) from the parts the tests repeat — `version = 1`,
//! the store, a tool and its upstream, a model route and its deployments, a principal — so a test names only what
//! it is about.
//!
//! Why text and not a typed `Config`: the real parser still reads every test's config (its defaults, its
//! validation, its errors), and a test of the binary writes the same text to a file. The builder checks nothing;
//! what it writes is what the parser is given. A test whose point is the exact TOML writes it out instead.

use std::fmt::Write as _;

/// The text of a gateway config, built from its parts (module docs). Sections come out in a fixed order —
/// `version`, `[store]`, `[server]`, `[run]`, `[[principals]]`, `[[tools]]`, `[[models]]`, then [`raw`](Self::raw)
/// text — whatever the order of the calls.
///
/// ```
/// use ballast_testkit::{ConfigText, deployment};
///
/// let toml = ConfigText::new()
///     .server("default_timeout = \"10s\"")
///     .principal("agents", "AGENTS_KEY")
///     .tool("lookup_order", "http://chaos/tools/lookup_order", "per_try_timeout = \"1s\"")
///     .model("agent", &[deployment("http://chaos/v1", "mock")], "")
///     .build();
/// assert!(toml.starts_with("version = 1\n[store]\nurl = \"sqlite::memory:\"\n"));
/// assert!(toml.contains("[[tools]]\nname = \"lookup_order\"\n"));
/// ```
#[derive(Clone, Debug)]
pub struct ConfigText {
    store: String,
    server: String,
    run: String,
    principals: String,
    tools: String,
    models: String,
    raw: String,
}

impl Default for ConfigText {
    fn default() -> Self {
        ConfigText::new()
    }
}

impl ConfigText {
    /// `version = 1` and an SQLite store in memory (the store of an in-process test: nothing on disk).
    pub fn new() -> ConfigText {
        ConfigText {
            store: "sqlite::memory:".to_owned(),
            server: String::new(),
            run: String::new(),
            principals: String::new(),
            tools: String::new(),
            models: String::new(),
            raw: String::new(),
        }
    }

    /// The store at `url` instead (`sqlite://{dir}/ballast.db` for a test of the binary, a PostgreSQL URL...).
    pub fn store(mut self, url: &str) -> ConfigText {
        self.store = url.to_owned();
        self
    }

    /// `lines` (TOML, `key = value` one a line) under `[server]`; each call adds to the section.
    pub fn server(mut self, lines: &str) -> ConfigText {
        push_keys(&mut self.server, lines, "server");
        self
    }

    /// `lines` under `[run]`; each call adds to the section.
    pub fn run(mut self, lines: &str) -> ConfigText {
        push_keys(&mut self.run, lines, "run");
        self
    }

    /// A principal whose API key is the environment variable `key_env`.
    pub fn principal(mut self, name: &str, key_env: &str) -> ConfigText {
        let _ = write!(
            self.principals,
            "[[principals]]\nname = {}\nkey_env = {}\n",
            quoted(name),
            quoted(key_env)
        );
        self
    }

    /// A tool called with `POST url`, and `extra` lines of its table (`side_effects = true`, `retry = {..}`).
    pub fn tool(mut self, name: &str, url: &str, extra: &str) -> ConfigText {
        let _ = write!(
            self.tools,
            "[[tools]]\nname = {}\nupstream = {{ method = \"POST\", url = {} }}\n",
            quoted(name),
            quoted(url)
        );
        push_keys(&mut self.tools, extra, name);
        self
    }

    /// A model route over `deployments` (inline tables, as [`deployment`] writes them), and `extra` lines of its
    /// table (`retry = {..}`, `concurrency = 1`).
    pub fn model(mut self, name: &str, deployments: &[impl AsRef<str>], extra: &str) -> ConfigText {
        let list: Vec<&str> = deployments.iter().map(AsRef::as_ref).collect();
        let _ = write!(
            self.models,
            "[[models]]\nname = {}\ndeployments = [ {} ]\n",
            quoted(name),
            list.join(", ")
        );
        push_keys(&mut self.models, extra, name);
        self
    }

    /// `toml` as it is, after everything else: what the builder has no part for (a tool whose upstream has
    /// headers, an admin principal).
    pub fn raw(mut self, toml: &str) -> ConfigText {
        push_lines(&mut self.raw, toml);
        self
    }

    /// The text.
    pub fn build(self) -> String {
        let mut text = format!("version = 1\n[store]\nurl = {}\n", quoted(&self.store));
        for (header, lines) in [("[server]\n", &self.server), ("[run]\n", &self.run)] {
            if !lines.is_empty() {
                text.push_str(header);
                text.push_str(lines);
            }
        }
        for part in [&self.principals, &self.tools, &self.models, &self.raw] {
            text.push_str(part);
        }
        text
    }
}

/// A model deployment as an inline table: `{ base_url = "…", model = "…" }`.
pub fn deployment(base_url: &str, model: &str) -> String {
    format!("{{ base_url = {}, model = {} }}", quoted(base_url), quoted(model))
}

/// `lines`, trimmed of the indentation of a Rust string literal, each ending with a newline.
/// `lines` as [`push_lines`] adds them, when they are keys of the table `table` is writing: a table header among
/// them would start another table (a second `[server]`, keys of a tool landing in the next one), so it panics and
/// names [`ConfigText::raw`], where whole tables go.
fn push_keys(to: &mut String, lines: &str, table: &str) {
    if let Some(header) = lines.lines().map(str::trim).find(|line| line.starts_with('[')) {
        panic!(
            "ConfigText: {header:?} in the keys of {table:?} starts another table; write whole tables with raw()"
        );
    }
    push_lines(to, lines);
}

/// Each non-empty line of `lines`, trimmed (a multi-line string value is not for this builder: write it with
/// [`ConfigText::raw`] and mind that its lines are trimmed too).
fn push_lines(to: &mut String, lines: &str) {
    for line in lines.lines().map(str::trim).filter(|l| !l.is_empty()) {
        to.push_str(line);
        to.push('\n');
    }
}

/// `text` as a TOML basic string.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use ballast_config::Config;

    use super::*;

    #[test]
    #[should_panic(expected = "starts another table; write whole tables with raw()")]
    fn a_table_header_among_a_tables_keys_is_refused() {
        let _ = ConfigText::new().server("[server]\nreserve = \"10ms\"");
    }

    #[test]
    fn the_least_config_is_a_version_and_a_store_in_memory() {
        let text = ConfigText::new().build();
        assert_eq!(text, "version = 1\n[store]\nurl = \"sqlite::memory:\"\n");
        Config::from_toml_str(&text).expect("the parser reads it");
    }

    #[test]
    fn every_part_is_written_in_its_section_whatever_the_order_of_the_calls() {
        let text = ConfigText::new()
            .model(
                "agent",
                &[
                    deployment("http://ok/v1", "mock"),
                    deployment("http://b/v1", "big"),
                ],
                "retry = { max_attempts = 1 }",
            )
            .tool(
                "create_refund",
                "http://chaos/tools/create_refund",
                "
                side_effects = true
                per_try_timeout = \"1s\"
                ",
            )
            .run("retry_allowance = 1")
            .principal("agents", "AGENTS_KEY")
            .server("default_timeout = \"10s\"")
            .server("reserve = \"300ms\"")
            .store("sqlite://{dir}/ballast.db")
            .raw("[[principals]]\nname = \"ops\"\nkey_env = \"OPS_KEY\"\nadmin = true")
            .build();
        assert_eq!(
            text,
            r#"version = 1
[store]
url = "sqlite://{dir}/ballast.db"
[server]
default_timeout = "10s"
reserve = "300ms"
[run]
retry_allowance = 1
[[principals]]
name = "agents"
key_env = "AGENTS_KEY"
[[tools]]
name = "create_refund"
upstream = { method = "POST", url = "http://chaos/tools/create_refund" }
side_effects = true
per_try_timeout = "1s"
[[models]]
name = "agent"
deployments = [ { base_url = "http://ok/v1", model = "mock" }, { base_url = "http://b/v1", model = "big" } ]
retry = { max_attempts = 1 }
[[principals]]
name = "ops"
key_env = "OPS_KEY"
admin = true
"#
        );
    }

    #[test]
    fn the_parser_reads_what_it_writes() {
        let text = ConfigText::new()
            .server("body_limit = \"1KiB\"")
            .run("max_runs = 300")
            .principal("agents", "AGENTS_KEY")
            .tool(
                "lookup_order",
                "http://chaos/tools/lookup_order",
                "per_try_timeout = \"1s\"",
            )
            .model(
                "agent",
                &[deployment("http://chaos/v1", "mock")],
                "concurrency = 1",
            )
            .build();
        let config = Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config.tools[0].name, "lookup_order");
        assert_eq!(config.models[0].name, "agent");
        assert_eq!(config.server.body_limit, 1024);
    }

    #[test]
    fn values_are_written_as_toml_strings() {
        assert_eq!(quoted(r#"a "b" \c"#), r#""a \"b\" \\c""#);
        assert_eq!(quoted("line\nnext\u{1}"), r#""line\nnext\u0001""#);
        assert_eq!(
            deployment("http://ok/v1", "mock"),
            r#"{ base_url = "http://ok/v1", model = "mock" }"#
        );
    }
}
